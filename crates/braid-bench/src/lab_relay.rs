//! `lab-relay` (root): a gateway whose only paths are two relays' uplinks (BaPu §2's
//! neighbouring APs, PRISM §3.3's community), each relay in its own namespace with its own
//! HTB-shaped uplink (`braid relay`'s classes), and a server. A real Linux TCP upload
//! (Cubic) crosses braid while relay B joins at a third of the run and relay A leaves
//! (SIGTERM: it tells the gateway and the server) at two thirds. Headline: the upload's
//! goodput over the capacity the relays lent while present (issue 22). After the upload,
//! relay B is revoked without a restart (`revoked = true` in the server's config, SIGHUP):
//! within a second the server must refuse it, and then see its path go down (it is the
//! session's last path, which stays in the session).
//!
//! The upload is a Python sender and receiver over the tunnel; both hash the bytes, so
//! the run also shows the stream intact across the relays' coming and going.

#![expect(
    clippy::disallowed_methods,
    reason = "a lab benchmark in real time: rates are sampled against the clock"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use braid_lab::accuracy::TCP_PAYLOAD;
use braid_net::testbed::{self, Netns, Proc};
use serde_json::{json, Value};

use crate::common::f;
use crate::lab_common::{braid_unavailable, load_average, num};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabRelay;

/// The relays' uplinks, Mbit/s: all of it lent (no home traffic in this run).
const RATE_A: f64 = 8.0;
const RATE_B: f64 = 12.0;
/// The shared class's guarantee (BaPu §5); it grows into the idle uplink.
const GUARANTEE_KBIT: f64 = 500.0;

/// Receives one TCP connection on the server's tunnel address; prints the bytes, their
/// SHA-256 and the bytes received by each 100 ms since the connection opened.
const RECEIVER: &str = r#"
import hashlib, json, socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("10.77.0.1", 5301)); l.listen(1)
c, _ = l.accept(); t0 = time.monotonic()
h = hashlib.sha256(); n = 0; samples = []; next_t = 0.1
while True:
    b = c.recv(262144)
    if not b:
        break
    h.update(b); n += len(b)
    t = time.monotonic() - t0
    while t >= next_t:
        samples.append(n); next_t += 0.1
print(json.dumps({"bytes": n, "sha256": h.hexdigest(), "per_100ms": samples}))
"#;

/// Sends pseudo-random bytes for argv[1] seconds from its connection; says when it is
/// connected (the run's clock starts there, as the receiver's does), and at the end prints
/// the bytes and their SHA-256.
const SENDER: &str = r#"
import hashlib, json, random, socket, sys, time
secs = float(sys.argv[1]); rnd = random.Random(22)
chunks = [rnd.randbytes(65536) for _ in range(4)]
s = socket.create_connection(("10.77.0.1", 5301), timeout=30)
print("connected", flush=True)
h = hashlib.sha256(); n = 0; k = 0; end = time.monotonic() + secs
while time.monotonic() < end:
    b = chunks[k % 4]; k += 1
    s.sendall(b); h.update(b); n += len(b)
s.shutdown(socket.SHUT_WR)
while s.recv(4096):
    pass
print(json.dumps({"bytes": n, "sha256": h.hexdigest()}))
"#;

/// Writes a new private key to `DIR/NAME.key`; returns its public key.
fn keypair(braid: &Path, d: &Path, name: &str) -> Result<String, String> {
    let key = testbed::run(braid.to_str().unwrap_or("braid"), &["genkey"])?;
    let file = d.join(format!("{name}.key"));
    write(&file, &key)?;
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{} pubkey < {}", braid.display(), file.display()))
        .output()
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn write(file: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    // Keys must not be readable by others; configs do not mind.
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())
}

/// The namespaces: gateway, relays A and B, server; each relay with a LAN to the gateway
/// (10.230.N.0/24) and an uplink `wan` to the server (10.231.N.0/24, shaped by the relay).
struct Bed {
    gw: Netns,
    relays: [Netns; 2],
    srv: Netns,
}

impl Bed {
    fn new(prefix: &str) -> Result<Bed, String> {
        let bed = Bed {
            gw: Netns::new(&format!("{prefix}-gw"))?,
            relays: [
                Netns::new(&format!("{prefix}-ra"))?,
                Netns::new(&format!("{prefix}-rb"))?,
            ],
            srv: Netns::new(&format!("{prefix}-srv"))?,
        };
        for (k, r) in bed.relays.iter().enumerate() {
            let n = k + 1;
            let (lan, srv_if) = (format!("l{n}"), format!("u{n}"));
            let veth = |a: &str, an: &Netns, b: &str, bn: &Netns| {
                testbed::run(
                    "ip",
                    &[
                        "link", "add", a, "netns", &an.name, "type", "veth", "peer", "name", b,
                        "netns", &bn.name,
                    ],
                )
            };
            veth(&lan, &bed.gw, "lan", r)?;
            veth("wan", r, &srv_if, &bed.srv)?;
            for (ns, dev, addr) in [
                (&bed.gw, lan.as_str(), format!("10.230.{n}.2/24")),
                (r, "lan", format!("10.230.{n}.1/24")),
                (r, "wan", format!("10.231.{n}.1/24")),
                (&bed.srv, srv_if.as_str(), format!("10.231.{n}.2/24")),
            ] {
                ns.ip(&["addr", "add", &addr, "dev", dev])?;
                ns.ip(&["link", "set", dev, "up"])?;
            }
        }
        Ok(bed)
    }
}

/// The configs of the run in `d`; returns (server, gateway, relay A, relay B).
fn configs(braid: &Path, d: &Path) -> Result<[PathBuf; 4], String> {
    let server = keypair(braid, d, "server")?;
    let gateway = keypair(braid, d, "gateway")?;
    let relays = [keypair(braid, d, "relay-a")?, keypair(braid, d, "relay-b")?];
    let dd = d.display();
    let files = [
        d.join("server.toml"),
        d.join("gateway.toml"),
        d.join("relay-a.toml"),
        d.join("relay-b.toml"),
    ];
    write(
        &files[0],
        &format!(
            r#"[interface]
private_key_file = "{dd}/server.key"
listen = "0.0.0.0:51820"
address = "10.77.0.1/24"

[[gateway]]
name = "home"
public_key = "{gateway}"
address = "10.77.0.17"

[[relay]]
name = "relay-a"
public_key = "{}"
gateway = "home"

[[relay]]
name = "relay-b"
public_key = "{}"
gateway = "home"

[control]
socket = "{dd}/server.sock"
"#,
            relays[0], relays[1]
        ),
    )?;
    write(
        &files[1],
        &format!(
            r#"[interface]
private_key_file = "{dd}/gateway.key"
tun = "braid0"
meter_state = "{dd}/gateway.meter.json"

[server]
endpoint = "10.231.1.2:51820"
public_key = "{server}"

[[uplink]]
name = "relay-a"
interface = "l1"
relay = "10.230.1.1:7000"

[[uplink]]
name = "relay-b"
interface = "l2"
relay = "10.230.2.1:7000"

[control]
socket = "{dd}/gateway.sock"
"#
        ),
    )?;
    for (k, rate) in [RATE_A, RATE_B].into_iter().enumerate() {
        let n = k + 1;
        let name = ["relay-a", "relay-b"][k];
        write(
            &files[2 + k],
            &format!(
                r#"private_key_file = "{dd}/{name}.key"
server_public_key = "{server}"
server = "10.231.{n}.2:51820"
listen = "10.230.{n}.1:7000"
uplink_port = 7001
state_dir = "{dd}/{name}-state"
[lend]
rate_mbit = {rate}
monthly_gb = 1000
[shaping]
device = "wan"
uplink_mbit = {rate}
guarantee_kbit = {GUARANTEE_KBIT}
"#
            ),
        )?;
    }
    Ok(files)
}

fn start(ns: &Netns, braid: &Path, role: &str, cfg: &Path, log: &Path) -> Result<Proc, String> {
    let b = braid.to_str().unwrap_or("braid");
    ns.spawn(b, &[role, "--config", cfg.to_str().unwrap_or("")], log)
}

fn log_has(log: &Path, text: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|s| s.contains(text))
}

fn log_count(log: &Path, text: &str) -> usize {
    std::fs::read_to_string(log).map_or(0, |s| s.matches(text).count())
}

/// What one run measured.
struct Run {
    goodput_mbps: f64,
    lent_mbps: f64,
    sent: Value,
    received: Value,
    events: Value,
    per_second: Vec<f64>,
}

/// One upload of `secs` seconds; relay B starts at `secs / 3`, relay A leaves at
/// `2 secs / 3`; goodput counted from `omit` seconds.
fn upload(braid: &Path, d: &Path, secs: f64, omit: f64) -> Result<Run, String> {
    let prefix = format!("brly{}", std::process::id() % 100_000);
    let bed = Bed::new(&prefix)?;
    let [srv_cfg, gw_cfg, a_cfg, b_cfg] = configs(braid, d)?;
    let logs = ["server", "gateway", "relay-a", "relay-b"].map(|n| d.join(format!("{n}.log")));
    let server = start(&bed.srv, braid, "server", &srv_cfg, &logs[0])?;
    let mut relay_a = start(&bed.relays[0], braid, "relay", &a_cfg, &logs[2])?;
    std::thread::sleep(Duration::from_millis(300));
    let _gateway = start(&bed.gw, braid, "gateway", &gw_cfg, &logs[1])?;
    let ready = testbed::wait_for(Duration::from_secs(15), || {
        bed.gw
            .exec("ping", &["-c", "1", "-W", "1", "10.77.0.1"])
            .is_ok()
    });
    if !ready {
        return Err(format!(
            "the tunnel through relay A did not come up; gateway log: {}",
            std::fs::read_to_string(&logs[1]).unwrap_or_default()
        ));
    }
    let rx_log = d.join("receiver.out");
    let mut receiver = bed.srv.spawn("python3", &["-c", RECEIVER], &rx_log)?;
    std::thread::sleep(Duration::from_millis(300));
    let tx_log = d.join("sender.out");
    let mut sender = bed
        .gw
        .spawn("python3", &["-c", SENDER, &secs.to_string()], &tx_log)?;
    // The relays' changes are timed from the connection, as the receiver's samples are
    // (Python's start takes a second or more on a busy machine).
    if !testbed::wait_for(Duration::from_secs(20), || log_has(&tx_log, "connected")) {
        return Err("the sender did not connect through relay A".into());
    }
    let t0 = Instant::now();
    let at = |s: f64| {
        std::thread::sleep(
            (t0 + Duration::from_secs_f64(s)).saturating_duration_since(Instant::now()),
        )
    };
    at(secs / 3.0);
    let b_joined_s = t0.elapsed().as_secs_f64();
    let _relay_b = start(&bed.relays[1], braid, "relay", &b_cfg, &logs[3])?;
    at(2.0 * secs / 3.0);
    let a_left_s = t0.elapsed().as_secs_f64();
    let a_clean = relay_a.stop(Duration::from_secs(5));
    let done = testbed::wait_for(Duration::from_secs_f64(secs + 30.0), || {
        !sender.running() && !receiver.running()
    });
    if !done {
        return Err("the upload did not finish within 30 s of its end".into());
    }
    // Relay B revoked at runtime: its path leaves the server's session.
    let text = std::fs::read_to_string(&srv_cfg).map_err(|e| e.to_string())?;
    let revoked = text.replacen(
        "name = \"relay-b\"\n",
        "name = \"relay-b\"\nrevoked = true\n",
        1,
    );
    write(&srv_cfg, &revoked)?;
    let downs = |log: &Path| log_count(log, "path down");
    let downs_before = downs(&logs[0]);
    let hup = Instant::now();
    testbed::run("kill", &["-HUP", &server.pid().to_string()])?;
    let b_revoked = testbed::wait_for(Duration::from_secs(1), || {
        log_has(&logs[0], "relay revoked; path")
    });
    let b_revoked_ms = b_revoked.then(|| hup.elapsed().as_secs_f64() * 1e3);
    // B's path is the session's last, which the engine keeps: its datagrams are refused,
    // so the server must see the path go down.
    let b_silenced = log_has(&logs[0], "relay revoked; path removed")
        || testbed::wait_for(Duration::from_secs(3), || downs(&logs[0]) > downs_before);
    let parse = |f: &Path| -> Result<Value, String> {
        let text = std::fs::read_to_string(f).map_err(|e| e.to_string())?;
        text.lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| format!("{}: no result: {text}", f.display()))
    };
    let sent = parse(&tx_log)?;
    let received = parse(&rx_log)?;
    let samples: Vec<f64> = received["per_100ms"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let bytes_at = |s: f64| {
        let i = ((s * 10.0).round() as usize).max(1);
        samples
            .get(i - 1)
            .or(samples.last())
            .copied()
            .unwrap_or(0.0)
    };
    let goodput_mbps = (bytes_at(secs) - bytes_at(omit)) * 8.0 / (secs - omit) / 1e6;
    // What the relays lent over [omit, secs]: A until it left, B from its start.
    let lent_mbit = RATE_A * (a_left_s.min(secs) - omit).max(0.0)
        + RATE_B * (secs - b_joined_s.max(omit)).max(0.0);
    let lent_mbps = lent_mbit / (secs - omit) * TCP_PAYLOAD / 1500.0;
    let per_second = (1..=secs as usize)
        .map(|s| (bytes_at(s as f64) - bytes_at(s as f64 - 1.0)) * 8.0 / 1e6)
        .collect();
    let events = json!({
        "relay_b_started_s": b_joined_s,
        "relay_a_left_s": a_left_s,
        "relay_a_exited_cleanly": a_clean,
        "server_removed_relay_a_path": log_has(&logs[0], "relay left; path removed"),
        "gateway_removed_relay_a_path": log_has(&logs[1], "path left the session"),
        "server_saw_relay_b": log_has(&logs[0], "relay-b"),
        "server_revoked_relay_b": b_revoked,
        "relay_b_silenced": b_silenced,
        "relay_b_revoked_ms": b_revoked_ms,
        "stream_intact": sent["sha256"] == received["sha256"] && sent["bytes"] == received["bytes"],
    });
    Ok(Run {
        goodput_mbps,
        lent_mbps,
        sent,
        received: json!({"bytes": received["bytes"], "sha256": received["sha256"]}),
        events,
        per_second,
    })
}

impl Bench for LabRelay {
    fn name(&self) -> &'static str {
        "lab-relay"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "a TCP upload through two relays' HTB-shaped uplinks while one leaves and another joins (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        if let Some(why) = testbed::unavailable(&["tc", "python3", "ping"]) {
            return Err(BenchError::Other(format!("{why}; lab-relay needs root")));
        }
        if let Some(why) = braid_unavailable() {
            return Err(BenchError::Other(format!(
                "braid cannot run in the lab: {why}"
            )));
        }
        let braid = braid_lab::braid_daemon::executable()
            .ok_or_else(|| BenchError::Other("no braid executable".into()))?;
        let (secs, omit) = if opts.quick { (12.0, 1.0) } else { (30.0, 2.0) };
        let d = std::env::temp_dir().join(format!("braid-lab-relay-{}", std::process::id()));
        std::fs::create_dir_all(&d).map_err(|e| BenchError::Other(e.to_string()))?;
        let mut notes = vec![format!(
            "Python TCP upload (Cubic) for {secs} s, counted from {omit} s; relay A \
             {RATE_A} Mbit/s from the start, leaves at {:.0} s; relay B {RATE_B} Mbit/s \
             joins at {:.0} s; each relay's uplink shaped by its own HTB classes (shared \
             class ceil = the lent rate); lent capacity = each relay's rate while present x \
             1448/1500; braid: encrypted, capacities learned; load average before: {}",
            2.0 * secs / 3.0,
            secs / 3.0,
            load_average()
        )];
        opts.progress("lab-relay", 0.0);
        let r = upload(&braid, &d, secs, omit);
        opts.progress("lab-relay", 1.0);
        let r = match r {
            Ok(r) => {
                // The logs stay where a check of the run failed.
                let all_held = (r.events.as_object().into_iter().flatten())
                    .all(|(_, v)| v.as_bool() != Some(false));
                if all_held {
                    let _ = std::fs::remove_dir_all(&d);
                } else {
                    notes.push(format!("a check failed: logs kept in {}", d.display()));
                }
                r
            }
            Err(e) => {
                return Err(BenchError::Other(format!(
                    "{e} (logs kept in {})",
                    d.display()
                )));
            }
        };
        let ratio = r.goodput_mbps / r.lent_mbps;
        let mut table = Table::new(["", "Mbit/s", "of lent"]);
        table.row(["lent capacity".to_owned(), f(r.lent_mbps, 2), f(1.0, 3)]);
        table.row([
            "braid upload goodput".to_owned(),
            f(r.goodput_mbps, 2),
            f(ratio, 3),
        ]);
        notes.push(format!(
            "goodput per second, Mbit/s: {}",
            r.per_second
                .iter()
                .map(|g| format!("{g:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
        notes.push(format!("events: {}", r.events));
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({
                "goodput_mbps": num(r.goodput_mbps),
                "lent_mbps": num(r.lent_mbps),
                "of_lent": num(ratio),
                "relays": [
                    {"name": "relay-a", "rate_mbps": RATE_A},
                    {"name": "relay-b", "rate_mbps": RATE_B},
                ],
                "per_second_mbps": r.per_second,
                "events": r.events,
                "sent": r.sent,
                "received": r.received,
            }),
            headline: Headline::new(
                "upload goodput / capacity the relays lent (one leaves, one joins)",
                ratio,
                None,
                0.9,
                true,
            ),
            notes,
            table,
        })
    }
}
