//! End to end, as root in network namespaces: a gateway with two uplinks and a server, a
//! real TCP download (curl from an HTTP server) and an iperf3 UDP flow through braid, one
//! uplink taken down in the middle of the download, a wrong config refused in one line.
//! Skipped, with the reason printed, where root, namespaces or the tools are missing.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed step ends the test with its message"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use braid_net::testbed::{self, Bed, Netns, Proc, INTERNET_HOST, SERVER_ADDR};

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

/// Captures one braid data datagram arriving at the server (on either veth: the scheduler
/// may keep a light flow on one path), then sends it to the
/// server again as it was (a replay), and corrupted: a byte of its ciphertext flipped and
/// its counter moved ahead of the replay window, so that only authentication can refuse it.
const REPLAY: &str = r#"
import socket, struct
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.settimeout(20)
while True:
    f = s.recv(65535)
    ip = f[14:]
    if ip[9] != 17:
        continue
    udp = ip[(ip[0] & 15) * 4:]
    if struct.unpack("!H", udp[2:4])[0] != 51820 or len(udp) < 300:
        continue
    payload = udp[8:]
    break
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(payload, ("127.0.0.1", 51820))
bad = bytearray(payload)
counter = int.from_bytes(bad[8:16], "big") + 1000000
bad[8:16] = counter.to_bytes(8, "big")
bad[-1] ^= 1
u.sendto(bytes(bad), ("127.0.0.1", 51820))
print("sent", len(payload))
"#;

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn status(ns: &Netns, sock: &Path) -> Option<serde_json::Value> {
    let out = ns
        .exec(BRAID, &["status", "--json", "--socket", sock.to_str()?])
        .ok()?;
    serde_json::from_str(&out).ok()
}

fn path_states(ns: &Netns, sock: &Path) -> Vec<String> {
    status(ns, sock)
        .and_then(|s| {
            s["sessions"][0]["paths"].as_array().map(|ps| {
                ps.iter()
                    .map(|p| p["state"].as_str().unwrap_or("?").to_owned())
                    .collect()
            })
        })
        .unwrap_or_default()
}

fn sha256(ns: Option<&Netns>, file: &Path) -> String {
    let f = file.to_str().unwrap();
    let out = match ns {
        Some(n) => n.exec("sha256sum", &[f]),
        None => testbed::run("sha256sum", &[f]),
    }
    .unwrap();
    out.split_whitespace().next().unwrap().to_owned()
}

/// Writes a new private key to `DIR/NAME.key`; returns its public key.
fn keypair(d: &Path, name: &str) -> String {
    let key = testbed::run(BRAID, &["genkey"]).unwrap();
    let file = d.join(format!("{name}.key"));
    std::fs::write(&file, &key).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{BRAID} pubkey < {}", file.display()))
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn server_config(d: &Path, gateway_key: &str) -> PathBuf {
    let f = d.join("server.toml");
    std::fs::write(
        &f,
        format!(
            r#"[interface]
private_key_file = "{d}/server.key"
listen = "0.0.0.0:51820"
address = "10.77.0.1/24"
masquerade = "c1"

[[gateway]]
name = "bus-17"
public_key = "{gateway_key}"
address = "10.77.0.17"

[control]
socket = "{d}/server.sock"
metrics = "127.0.0.1:9582"
"#,
            d = d.display()
        ),
    )
    .unwrap();
    f
}

fn gateway_config(d: &Path, name: &str, server_key: &str) -> PathBuf {
    let f = d.join(format!("{name}.toml"));
    std::fs::write(
        &f,
        format!(
            r#"[interface]
private_key_file = "{d}/{name}.key"
tun = "{tun}"
routes = ["10.202.0.0/24"]
meter_state = "{d}/{name}.meter.json"

[server]
endpoint = "{SERVER_ADDR}:51820"
public_key = "{server_key}"

[[uplink]]
name = "wan-a"
interface = "a0"
capacity_mbps = 500

[[uplink]]
name = "wan-b"
interface = "b0"
metered = true

[control]
socket = "{d}/{name}.sock"
"#,
            d = d.display(),
            tun = if name == "gateway" {
                "braid0"
            } else {
                "braid9"
            },
        ),
    )
    .unwrap();
    f
}

#[test]
fn gateway_and_server_carry_tcp_and_udp_over_two_uplinks_and_survive_losing_one() {
    if let Some(why) = testbed::unavailable(&["curl", "iperf3", "python3", "sha256sum", "nft"]) {
        braid_testkit::skip(why);
        return;
    }
    let d = dir();
    let server_key = keypair(&d, "server");
    let gateway_key = keypair(&d, "gateway");
    keypair(&d, "stranger");
    let bed = Bed::new(&format!("brde2e{}", std::process::id() % 100_000)).expect("test bed");
    let (gw, srv, net) = (&bed.gateway, &bed.server, &bed.internet);

    // A wrong config: one clear line, non-zero exit.
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(gateway_config(&d, "gateway", &server_key))
            .unwrap()
            .replace("\"b0\"", "\"wwan7\""),
    )
    .unwrap();
    let o = gw
        .command(BRAID)
        .args(["gateway", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("interface 'wwan7' does not exist"), "{e}");

    // The HTTP server and the file to download.
    let www = d.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let file = www.join("blob");
    testbed::run(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={}", file.display()),
            "bs=1M",
            "count=48",
            "status=none",
        ],
    )
    .unwrap();
    let _http = net
        .spawn(
            "python3",
            &[
                "-m",
                "http.server",
                "8080",
                "--bind",
                INTERNET_HOST,
                "--directory",
                www.to_str().unwrap(),
            ],
            &d.join("http.log"),
        )
        .unwrap();

    let mut server = srv
        .spawn(
            BRAID,
            &[
                "server",
                "--config",
                server_config(&d, &gateway_key).to_str().unwrap(),
            ],
            &d.join("server.log"),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut gateway = gw
        .spawn(
            BRAID,
            &[
                "gateway",
                "--config",
                gateway_config(&d, "gateway", &server_key).to_str().unwrap(),
            ],
            &d.join("gateway.log"),
        )
        .unwrap();
    let gw_sock = d.join("gateway.sock");
    let up = testbed::wait_for(Duration::from_secs(10), || {
        status(gw, &gw_sock).is_some_and(|s| s["sessions"][0]["established"] == true)
            && path_states(gw, &gw_sock) == ["up", "up"]
    });
    let logs = || {
        format!(
            "gateway log:\n{}\nserver log:\n{}",
            std::fs::read_to_string(d.join("gateway.log")).unwrap_or_default(),
            std::fs::read_to_string(d.join("server.log")).unwrap_or_default()
        )
    };
    assert!(up, "tunnel not up: {:?}\n{}", status(gw, &gw_sock), logs());

    // An iperf3 UDP flow through braid.
    let _iperf = net
        .spawn(
            "iperf3",
            &["-s", "-1", "-B", INTERNET_HOST],
            &d.join("iperf.log"),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = gw
        .exec(
            "iperf3",
            &["-c", INTERNET_HOST, "-u", "-b", "50M", "-t", "2", "--json"],
        )
        .expect("iperf3 UDP through braid");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sum = &v["end"]["sum"];
    let received =
        sum["packets"].as_f64().unwrap_or(0.0) - sum["lost_packets"].as_f64().unwrap_or(0.0);
    assert!(received > 1000.0, "iperf3 UDP: {sum}");
    assert!(
        sum["lost_percent"].as_f64().unwrap_or(100.0) < 5.0,
        "iperf3 UDP lost too much: {sum}"
    );

    // A TCP download with one uplink taken down half-way.
    let got = d.join("got");
    let mut curl = Proc {
        child: gw
            .command("curl")
            .args([
                "-sS",
                "--fail",
                "--limit-rate",
                "16M",
                "--max-time",
                "60",
                "-o",
                got.to_str().unwrap(),
                &format!("http://{INTERNET_HOST}:8080/blob"),
            ])
            .spawn()
            .unwrap(),
    };
    std::thread::sleep(Duration::from_millis(1200));
    assert!(
        curl.running(),
        "download finished before the uplink went down"
    );
    gw.ip(&["link", "set", "a0", "down"]).unwrap();
    let st = curl.child.wait().unwrap();
    assert!(st.success(), "curl failed\n{}", logs());
    assert_eq!(
        sha256(None, &file),
        sha256(None, &got),
        "downloaded file differs"
    );
    assert!(
        testbed::wait_for(Duration::from_secs(5), || path_states(gw, &gw_sock)
            == ["no-link", "up"]),
        "{:?}",
        path_states(gw, &gw_sock)
    );
    // The uplink comes back without a restart.
    gw.ip(&["link", "set", "a0", "up"]).unwrap();
    assert!(
        testbed::wait_for(Duration::from_secs(10), || path_states(gw, &gw_sock)
            == ["up", "up"]),
        "uplink did not come back: {:?}\n{}",
        path_states(gw, &gw_sock),
        logs()
    );

    // A gateway whose key the server does not know: dropped, counted, no session.
    let srv_sock = d.join("server.sock");
    let mut stranger = gw
        .spawn(
            BRAID,
            &[
                "gateway",
                "--config",
                gateway_config(&d, "stranger", &server_key)
                    .to_str()
                    .unwrap(),
            ],
            &d.join("stranger.log"),
        )
        .unwrap();
    assert!(
        testbed::wait_for(Duration::from_secs(10), || status(srv, &srv_sock)
            .is_some_and(|s| s["drops"]["unknown_key"].as_u64().unwrap_or(0) > 0)),
        "{:?}",
        status(srv, &srv_sock)
    );
    assert!(stranger.stop(Duration::from_secs(5)));
    let s = status(srv, &srv_sock).unwrap();
    assert_eq!(s["sessions"].as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(s["security"]["drop_unknown_key"], s["drops"]["unknown_key"]);

    // A datagram replayed, and one corrupted: captured at the server and sent again.
    let capture = srv
        .spawn("python3", &["-c", REPLAY], &d.join("replay.log"))
        .unwrap();
    let before = status(srv, &srv_sock).unwrap()["drops"].clone();
    let mut capture = capture;
    let sent = testbed::wait_for(Duration::from_secs(10), || {
        let _ = gw.exec("ping", &["-c", "1", "-s", "600", "-W", "1", "10.77.0.1"]);
        !capture.running()
    });
    assert!(
        sent,
        "no datagram captured: {}",
        std::fs::read_to_string(d.join("replay.log")).unwrap_or_default()
    );
    let counted = |key: &str| {
        testbed::wait_for(Duration::from_secs(3), || {
            status(srv, &srv_sock).is_some_and(|s| {
                s["drops"][key].as_u64().unwrap_or(0) > before[key].as_u64().unwrap_or(0)
            })
        })
    };
    assert!(counted("replayed"), "{:?}", status(srv, &srv_sock));
    assert!(counted("unauthenticated"), "{:?}", status(srv, &srv_sock));
    assert!(gw
        .exec("ping", &["-c", "1", "-W", "2", "10.77.0.1"])
        .is_ok());

    // The server's view and metrics.
    let s = status(srv, &srv_sock).expect("server status");
    assert_eq!(s["sessions"].as_array().map(Vec::len), Some(1));
    assert_eq!(s["sessions"][0]["peer"], "bus-17");
    assert_eq!(s["sessions"][0]["tunnel_address"], "10.77.0.17");
    assert!(s["sessions"][0]["inner_rx_bytes"].as_u64().unwrap_or(0) > 1_000_000);
    let metrics = srv
        .exec("curl", &["-s", "http://127.0.0.1:9582/metrics"])
        .unwrap();
    assert!(metrics.contains("braid_path_rx_bytes_total{"), "{metrics}");
    let human = Command::new(BRAID)
        .args(["status", "--socket", gw_sock.to_str().unwrap()])
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("wan-a") && human.contains("wan-b") && human.contains("METERED"),
        "{human}"
    );

    // The server restarts mid-session and forgets it: the gateway, hearing nothing for 5 s,
    // handshakes again, gets a new session and carries traffic again without a restart.
    let old_session =
        status(gw, &gw_sock).expect("gateway status")["sessions"][0]["session_id"].clone();
    assert!(server.stop(Duration::from_secs(5)), "{}", logs());
    server = srv
        .spawn(
            BRAID,
            &[
                "server",
                "--config",
                server_config(&d, &gateway_key).to_str().unwrap(),
            ],
            &d.join("server-restarted.log"),
        )
        .unwrap();
    let back = testbed::wait_for(Duration::from_secs(20), || {
        status(gw, &gw_sock).is_some_and(|s| {
            s["sessions"][0]["established"] == true && s["sessions"][0]["session_id"] != old_session
        }) && gw
            .exec("ping", &["-c", "1", "-W", "1", "10.77.0.1"])
            .is_ok()
    });
    assert!(
        back,
        "no new session after the server restarted: {:?}\n{}\nrestarted server log:\n{}",
        status(gw, &gw_sock),
        logs(),
        std::fs::read_to_string(d.join("server-restarted.log")).unwrap_or_default()
    );

    // Graceful shutdown: both exit cleanly and take down what they set up.
    assert!(gateway.stop(Duration::from_secs(5)), "{}", logs());
    assert!(server.stop(Duration::from_secs(5)), "{}", logs());
    assert!(!gw_sock.exists());
    let tables = srv.exec("nft", &["list", "tables"]).unwrap_or_default();
    assert!(!tables.contains("braid"), "{tables}");
    let _ = std::fs::remove_dir_all(&d);
}
