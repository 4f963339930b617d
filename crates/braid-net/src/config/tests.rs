use super::*;

const GATEWAY: &str = r#"
[interface]
private_key_file = "/etc/braid/gateway.key"

[server]
endpoint = "192.0.2.1:51820"
public_key = "Qai1mfkDCnKOVb1EVxWHdAI2QYSe30Wf+oASvMc5Slg="

[[uplink]]
interface = "lo"

[[uplink]]
name = "lte"
source = "127.0.0.1"
capacity_mbps = 20
metered = true
"#;

const SERVER: &str = r#"
[interface]
private_key_file = "/etc/braid/server.key"
listen = "127.0.0.1:51999"
address = "10.77.0.1/24"

[[gateway]]
name = "bus-17"
public_key = "Qai1mfkDCnKOVb1EVxWHdAI2QYSe30Wf+oASvMc5Slg="
address = "10.77.0.17"
"#;

fn gateway_err(text: &str) -> String {
    let e = GatewayConfig::parse("gw.toml", text).expect_err("must be refused");
    let s = e.to_string();
    assert!(!s.contains('\n'), "not one line: {s}");
    s
}

fn server_err(text: &str) -> String {
    let e = ServerConfig::parse("srv.toml", text).expect_err("must be refused");
    let s = e.to_string();
    assert!(!s.contains('\n'), "not one line: {s}");
    s
}

#[test]
fn good_configs_parse() {
    let g = GatewayConfig::parse("gw.toml", GATEWAY).unwrap();
    assert_eq!(g.uplinks.len(), 2);
    assert_eq!(g.uplinks[0].name, "lo");
    // Capacities are learned unless hinted.
    assert_eq!(g.uplinks[0].capacity_bps, None);
    assert_eq!(g.uplinks[1].capacity_bps, Some(20_000_000));
    assert!(g.uplinks[1].metered);
    assert_eq!(g.tun, "braid0");
    assert_eq!(g.server_endpoint, "192.0.2.1:51820".parse().unwrap());
    let s = ServerConfig::parse("srv.toml", SERVER).unwrap();
    assert_eq!(s.address.to_string(), "10.77.0.1/24");
    assert_eq!(s.peers[0].address, Some(Ipv4Addr::new(10, 77, 0, 17)));
    assert_eq!(s.mtu, 1500 - TUNNEL_OVERHEAD as u16);
}

#[test]
fn an_unknown_key_names_the_key_and_its_line() {
    let text = GATEWAY.replace("metered = true", "meterd = true");
    let e = gateway_err(&text);
    assert!(e.starts_with("gw.toml:16: unknown key `meterd`"), "{e}");
    assert!(e.contains("remove it or fix its spelling"), "{e}");
    let e = server_err(&format!("{SERVER}\n[nonsense]\n"));
    assert!(e.contains("unknown key `nonsense`"), "{e}");
}

#[test]
fn a_missing_key_says_to_add_it() {
    let e = gateway_err(&GATEWAY.replace("endpoint = \"192.0.2.1:51820\"", ""));
    assert!(e.contains("missing key `endpoint`"), "{e}");
}

#[test]
fn toml_syntax_errors_are_one_line() {
    let e = gateway_err("[interface\n");
    assert!(e.starts_with("gw.toml:1:"), "{e}");
}

#[test]
fn uplink_mistakes() {
    let e = gateway_err(&GATEWAY.replace("source = \"127.0.0.1\"", ""));
    assert!(e.contains("uplink 2: set interface"), "{e}");
    let e = gateway_err(&GATEWAY.replace("source = \"127.0.0.1\"", "interface = \"lo\""));
    assert!(e.contains("same interface"), "{e}");
    let e = gateway_err(&GATEWAY.replace("capacity_mbps = 20", "capacity_mbps = -3"));
    assert!(e.contains("capacity_mbps = -3"), "{e}");
    let e = gateway_err(&GATEWAY.replace(
        "capacity_mbps = 20",
        "capacity_mbps = 20\ndown_capacity_mbps = 0",
    ));
    assert!(e.contains("down_capacity_mbps = 0"), "{e}");
    let ok = GatewayConfig::parse(
        "gw.toml",
        &GATEWAY.replace(
            "capacity_mbps = 20",
            "capacity_mbps = 20\ndown_capacity_mbps = 60",
        ),
    )
    .expect("valid");
    assert_eq!(ok.uplinks[0].down_capacity_bps, None);
    assert_eq!(ok.uplinks[1].down_capacity_bps, Some(60_000_000));
    let e = gateway_err(&GATEWAY.replace("interface = \"lo\"", "interface = \"a/b\""));
    assert!(e.contains("not a valid Linux interface name"), "{e}");
    let no_uplinks = GATEWAY.split("[[uplink]]").next().unwrap();
    let e = gateway_err(no_uplinks);
    assert!(e.contains("no [[uplink]]"), "{e}");
}

#[test]
fn endpoint_and_routes_mistakes() {
    let e = gateway_err(&GATEWAY.replace("192.0.2.1:51820", "server.example"));
    assert!(e.contains("server.endpoint = 'server.example'"), "{e}");
    let e = gateway_err(&GATEWAY.replace("[server]", "routes = [\"10.1.0.0/33\"]\n[server]"));
    assert!(e.contains("routes: '10.1.0.0/33' is not a prefix"), "{e}");
    let g =
        GatewayConfig::parse("gw.toml", &GATEWAY.replace("192.0.2.1:51820", "192.0.2.1")).unwrap();
    assert_eq!(g.server_endpoint.port(), DEFAULT_PORT);
}

#[test]
fn bad_address_pools() {
    let e = server_err(&SERVER.replace("10.77.0.1/24", "10.77.0.1"));
    assert!(e.contains("interface.address = '10.77.0.1'"), "{e}");
    let e = server_err(&SERVER.replace("10.77.0.1/24", "10.77.0.1/31"));
    assert!(e.contains("no room for gateways"), "{e}");
    let e = server_err(&SERVER.replace("10.77.0.1/24", "10.77.0.0/24"));
    assert!(e.contains("network or broadcast"), "{e}");
    let e = server_err(&SERVER.replace("10.77.0.17", "10.78.0.17"));
    assert!(
        e.contains("not a free host address of the pool 10.77.0.0/24"),
        "{e}"
    );
    let e = server_err(&SERVER.replace("10.77.0.17", "10.77.0.1"));
    assert!(e.contains("not a free host address"), "{e}");
}

#[test]
fn duplicate_gateways_are_refused() {
    let dup = format!(
        "{SERVER}\n[[gateway]]\nname = \"bus-17\"\npublic_key = \"Z4goDxlMrN6FjpDZIZNWJnDZ1QhdqWcQMmb9dVDMHDE=\"\n"
    );
    let e = server_err(&dup);
    assert!(e.contains("two [[gateway]] are named 'bus-17'"), "{e}");
    let same_key = SERVER.to_owned()
        + "\n[[gateway]]\nname = \"bus-18\"\npublic_key = \"Qai1mfkDCnKOVb1EVxWHdAI2QYSe30Wf+oASvMc5Slg=\"\n";
    let e = server_err(&same_key);
    assert!(e.contains("same public_key"), "{e}");
}

#[test]
fn engine_mistakes() {
    let e = gateway_err(&format!("{GATEWAY}\n[engine]\nscheduler = \"fastest\"\n"));
    assert!(e.contains("fastest") && e.contains("delay-based"), "{e}");
    let e = gateway_err(&format!("{GATEWAY}\n[engine]\npath_timeout_ms = 0\n"));
    assert!(e.contains("engine.path_timeout_ms = 0"), "{e}");
    let g = GatewayConfig::parse(
        "gw.toml",
        &format!(
            "{GATEWAY}\n[engine]\nscheduler = \"round-robin\"\nloss_recovery = \"evolution\"\n"
        ),
    )
    .unwrap();
    let c = engine_config(&g.engine, 1400, 7);
    assert_eq!(c.scheduler, SchedulerKind::RoundRobin);
    assert_eq!(c.max_packet_size, 1400);
    assert_eq!(c.session_id, 7);
}

#[test]
fn a_web_address_off_loopback_needs_a_token() {
    let g = GatewayConfig::parse(
        "gw.toml",
        &format!("{GATEWAY}\n[control]\nweb = \"127.0.0.1:9580\"\n"),
    )
    .unwrap();
    assert_eq!(g.control.web, Some("127.0.0.1:9580".parse().unwrap()));
    let e = gateway_err(&format!("{GATEWAY}\n[control]\nweb = \"0.0.0.0:9580\"\n"));
    assert!(
        e.contains("[control] web = \"0.0.0.0:9580\"") && e.contains("web_token"),
        "{e}"
    );
    let e = server_err(&format!(
        "{SERVER}\n[control]\nmetrics = \"192.0.2.5:9582\"\n"
    ));
    assert!(
        e.contains("[control] metrics") && e.contains("web_token"),
        "{e}"
    );
    let e = gateway_err(&format!(
        "{GATEWAY}\n[control]\nweb = \"0.0.0.0:9580\"\nweb_token = \"short\"\n"
    ));
    assert!(e.contains("at least 32"), "{e}");
    let s = ServerConfig::parse(
        "srv.toml",
        &format!(
            "{SERVER}\n[control]\nweb = \"[::]:9580\"\nweb_token = \"{}\"\n",
            "ab".repeat(16)
        ),
    )
    .unwrap();
    assert_eq!(
        s.control.web_token.as_deref(),
        Some("ab".repeat(16).as_str())
    );
}

#[test]
fn mtu_out_of_range() {
    let e = gateway_err(&GATEWAY.replace("[server]", "mtu = 100\n[server]"));
    assert!(e.contains("interface.mtu = 100"), "{e}");
}

#[test]
fn a_missing_key_file_names_the_fix() {
    let g = GatewayConfig::parse(
        "gw.toml",
        &GATEWAY.replace("/etc/braid/gateway.key", "/nonexistent/braid-test.key"),
    )
    .unwrap();
    let e = g.check_system().unwrap_err().to_string();
    assert!(
        e.contains("'/nonexistent/braid-test.key' does not exist") && e.contains("braid genkey"),
        "{e}"
    );
}

/// A key file of its own per call, in a folder removed when the test passes: tests run in
/// parallel, and one rewriting a shared file while another reads it made
/// `a_port_in_use_names_the_port` fail now and then.
fn temp_key() -> (braid_testkit::Scratch, PathBuf) {
    let dir = braid_testkit::Scratch::new("net-config");
    let key = dir.join("key");
    std::fs::write(&key, "ILEpoz2c+2WynMiVyV47eLhhGYS8st9XQuqZY5wiSV0=\n").unwrap();
    (dir, key)
}

#[test]
fn a_missing_interface_names_it() {
    let (_dir, key) = temp_key();
    let text = GATEWAY
        .replace("/etc/braid/gateway.key", key.to_str().unwrap())
        .replace("interface = \"lo\"", "interface = \"nosuchif0\"");
    let g = GatewayConfig::parse("gw.toml", &text).unwrap();
    let e = g.check_system().unwrap_err().to_string();
    assert!(
        e.contains("uplink 'nosuchif0': interface 'nosuchif0' does not exist"),
        "{e}"
    );
    let text = GATEWAY
        .replace("/etc/braid/gateway.key", key.to_str().unwrap())
        .replace("127.0.0.1", "192.0.2.99");
    let g = GatewayConfig::parse("gw.toml", &text).unwrap();
    let e = g.check_system().unwrap_err().to_string();
    assert!(
        e.contains("source address 192.0.2.99 is not assigned"),
        "{e}"
    );
}

#[test]
fn the_mtu_is_derived_from_the_uplinks() {
    let (_dir, key) = temp_key();
    let text = GATEWAY.replace("/etc/braid/gateway.key", key.to_str().unwrap());
    let g = GatewayConfig::parse("gw.toml", &text).unwrap();
    let lo_mtu: u32 = std::fs::read_to_string("/sys/class/net/lo/mtu")
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(65536);
    let expected = lo_mtu - TUNNEL_OVERHEAD as u32;
    match g.check_system() {
        Ok(m) => assert_eq!(u32::from(m), expected.min(u32::from(u16::MAX))),
        // An MTU beyond u16 (lo's 65536) cannot be represented: that too is one line.
        Err(e) => assert!(e.to_string().contains("set interface.mtu"), "{e}"),
    }
}

#[test]
fn a_port_in_use_names_the_port() {
    let (_dir, key) = temp_key();
    let busy = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let text = SERVER
        .replace("/etc/braid/server.key", key.to_str().unwrap())
        .replace("127.0.0.1:51999", &format!("127.0.0.1:{port}"));
    let s = ServerConfig::parse("srv.toml", &text).unwrap();
    let e = s.check_system().unwrap_err().to_string();
    assert!(
        e.contains(&format!("UDP port 127.0.0.1:{port} is already in use")),
        "{e}"
    );
    let text = SERVER
        .replace("/etc/braid/server.key", key.to_str().unwrap())
        .replace("listen", "masquerade = \"nosuchif0\"\nlisten");
    let s = ServerConfig::parse("srv.toml", &text).unwrap();
    let e = s.check_system().unwrap_err().to_string();
    assert!(
        e.contains("masquerade: interface 'nosuchif0' does not exist"),
        "{e}"
    );
}

#[test]
fn bad_keys_are_one_line() {
    let e = gateway_err(&GATEWAY.replace("Qai1mfkDCnKOVb1EVxWHdAI2QYSe30Wf+oASvMc5Slg=", "nope"));
    assert!(
        e.contains("server.public_key:") && e.contains("braid genkey"),
        "{e}"
    );
    let plain = GATEWAY
        .replace("Qai1mfkDCnKOVb1EVxWHdAI2QYSe30Wf+oASvMc5Slg=", "nope")
        .replace("[server]", "plaintext = true\n[server]");
    assert!(GatewayConfig::parse("gw.toml", &plain).is_ok());
    let (_dir, key) = temp_key();
    let bad = key.with_file_name("bad-key");
    std::fs::write(&bad, "not a key\n").unwrap();
    let g = GatewayConfig::parse(
        "gw.toml",
        &GATEWAY.replace("/etc/braid/gateway.key", bad.to_str().unwrap()),
    )
    .unwrap();
    let e = g.check_system().unwrap_err().to_string();
    assert!(e.contains("bad-key") && !e.contains('\n'), "{e}");
}

#[test]
fn the_example_configs_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let g = GatewayConfig::load(Path::new(&format!("{dir}/gateway.toml"))).unwrap();
    assert_eq!(g.uplinks.len(), 2);
    let s = ServerConfig::load(Path::new(&format!("{dir}/server.toml"))).unwrap();
    assert_eq!(s.peers.len(), 2);
}

#[test]
fn metered_uplinks_take_a_price_a_cap_and_a_target() {
    let text = GATEWAY.replace(
        "metered = true",
        "metered = true\ncost_per_gb = 8\nmonthly_cap_gb = 10\ncap_reset_day = 1",
    ) + "[engine.metering]\ntarget_mbps = 2\n[[engine.class]]\nname = \"call\"\nmatch = { protocol = \"udp\" }\nscheduler = \"delay-based\"\ntarget_mbps = 1\n";
    let g = GatewayConfig::parse("gw.toml", &text).unwrap();
    let m = g.uplinks[1].metering.unwrap();
    assert_eq!(
        (m.cost_per_gb, m.monthly_cap_gb, m.cap_reset_day),
        (8.0, Some(10.0), Some(1))
    );
    let c = engine_config(&g.engine, 1400, 1).metering.unwrap();
    // The class's target adds to the session's: Strategy 1 at 3 Mbit/s.
    assert!(c.paths.is_empty());
    // The gateway's session meters the uplink and tells the server the class's budget.
    let m = crate::gateway::metered_uplinks(&g, 0).unwrap();
    assert!(m.announce && m.paths.len() == 1, "{m:?}");
    let classes = m.classes_option(&g.engine.classes).unwrap();
    assert_eq!(classes.classes.len(), 1);
    assert_eq!(classes.classes[0].matcher.protocol, 2);
    assert!(classes.to_bytes().is_ok());
    let e = gateway_err(&text.replace("cap_reset_day = 1", ""));
    assert!(e.contains("monthly_cap_gb needs cap_reset_day"), "{e}");
    let e = gateway_err(&text.replace("cost_per_gb = 8", "cost_per_gb = -8"));
    assert!(e.contains("cost_per_gb = -8"), "{e}");
    let e = gateway_err(&text.replace("target_mbps = 2", "target_mbps = -2"));
    assert!(e.contains("engine.metering.target_mbps = -2"), "{e}");
}

#[test]
fn relays_are_authorized_per_gateway_and_uplinks_reach_them() {
    const RELAY_KEY: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
    let relays = format!(
        "{SERVER}\n[[relay]]\nname = \"neighbour\"\npublic_key = \"{RELAY_KEY}\"\ngateway = \"bus-17\"\n"
    );
    let s = ServerConfig::parse("srv.toml", &relays).unwrap();
    assert_eq!(s.relays.len(), 1);
    assert_eq!(
        (s.relays[0].gateway.as_str(), s.relays[0].revoked),
        ("bus-17", false)
    );
    let revoked = format!("{relays}revoked = true\n");
    assert!(ServerConfig::parse("srv.toml", &revoked).unwrap().relays[0].revoked);
    let e = server_err(&relays.replace("gateway = \"bus-17\"", "gateway = \"bus-18\""));
    assert!(e.contains("names no [[gateway]]"), "{e}");
    let e = server_err(&relays.replace(RELAY_KEY, "not a key"));
    assert!(e.contains("relay 'neighbour': public_key"), "{e}");
    let twice = format!(
        "{relays}\n[[relay]]\nname = \"other\"\npublic_key = \"{RELAY_KEY}\"\ngateway = \"bus-17\"\n"
    );
    assert!(server_err(&twice).contains("same public_key"));

    let g = GatewayConfig::parse(
        "gw.toml",
        &GATEWAY.replace(
            "capacity_mbps = 20",
            "capacity_mbps = 20\nrelay = \"192.168.1.1:7000\"",
        ),
    )
    .unwrap();
    let server = g.server_endpoint;
    assert_eq!(g.uplinks[0].endpoint(server), server);
    assert_eq!(
        g.uplinks[1].endpoint(server),
        "192.168.1.1:7000".parse().unwrap()
    );
    let e = gateway_err(&GATEWAY.replace("capacity_mbps = 20", "relay = \"nowhere:port\""));
    assert!(e.contains("uplink 'lte': relay"), "{e}");
}
