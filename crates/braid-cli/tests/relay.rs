//! `braid relay` in network namespaces (root): its HTB classes are installed while it runs,
//! gone after it exits and after a SIGKILL and a restart, and home traffic takes its rate
//! back from the shared traffic within a second (BaPu §5, Fig 15). Skipped, with the reason
//! printed, where root, namespaces, iperf3 or python3 are missing.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed step ends the test with its message"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "the lab runs in real time: rates are sampled against the clock"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use braid_net::relay::htb;
use braid_net::testbed::{self, Netns, Proc};

const BRAID: &str = env!("CARGO_BIN_EXE_braid");
const UPLINK_MBIT: f64 = 10.0;
const GUARANTEE_KBIT: f64 = 1000.0;

/// The gateway's side of a relay, played by a UDP source: 1300-byte datagrams at 30 Mbit/s
/// to the relay's listen address (three times the uplink).
const FLOOD: &str = r#"
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b = b"x" * 1300
gap = 1300 * 8 / 30e6
t = time.time()
n = 0
while True:
    s.sendto(b, ("127.0.0.1", 7000))
    n += 1
    d = t + n * gap - time.time()
    if d > 0:
        time.sleep(d)
"#;

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-relay-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_config(d: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let key = d.join("relay.key");
    std::fs::write(&key, "ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg=\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = d.join("relay.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
private_key_file = "{}"
server_public_key = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
server = "10.203.0.2:51820"
listen = "127.0.0.1:7000"
uplink_port = 7001
state_dir = "{}"
[lend]
rate_mbit = 20
monthly_gb = 100
[shaping]
device = "rup"
uplink_mbit = {UPLINK_MBIT}
guarantee_kbit = {GUARANTEE_KBIT}
"#,
            key.display(),
            d.join("state").display()
        ),
    )
    .unwrap();
    cfg
}

/// Whether the relay's root qdisc is on the uplink in `ns`.
fn classes(ns: &Netns) -> bool {
    let out = ns.exec("tc", &["qdisc", "show", "dev", "rup"]).unwrap();
    out.lines()
        .any(|l| l.starts_with(&format!("qdisc htb {} root", htb::HANDLE)))
}

fn start(ns: &Netns, cfg: &Path, log: &Path) -> Proc {
    let p = ns
        .spawn(BRAID, &["relay", "--config", cfg.to_str().unwrap()], log)
        .unwrap();
    let lending = || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("relay lending")
    };
    assert!(
        testbed::wait_for(Duration::from_secs(10), || lending() && classes(ns)),
        "the relay installed its classes: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    p
}

/// Bytes each of the relay's classes has sent so far: (home ACKs + home, shared).
fn class_bytes(ns: &Netns) -> (u64, u64) {
    let out = ns
        .exec("tc", &["-s", "class", "show", "dev", "rup"])
        .unwrap();
    let mut lines = out.lines();
    let (mut home, mut shared) = (0, 0);
    while let Some(l) = lines.next() {
        let sent: u64 = lines
            .next()
            .unwrap_or("")
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if l.contains("class htb b7:10 ") || l.contains("class htb b7:20 ") {
            home += sent;
        } else if l.contains("class htb b7:30 ") {
            shared += sent;
        }
    }
    (home, shared)
}

/// A home TCP upload of `secs` with iperf3, measured at the shaper: the home and shared
/// classes' rates per 100 ms, Mbit/s.
fn home_upload(relay: &Netns, secs: u32, log: &Path) -> Vec<(f64, f64)> {
    let mut iperf = relay
        .spawn(
            "iperf3",
            &["-c", "10.203.0.2", "-t", &secs.to_string()],
            log,
        )
        .unwrap();
    let step = Duration::from_millis(100);
    let start = Instant::now();
    let mut last = (class_bytes(relay), start);
    let mut rates = Vec::new();
    for k in 1..=secs * 10 {
        let due = start + step * k;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let now = (class_bytes(relay), Instant::now());
        let dt = now.1.duration_since(last.1).as_secs_f64();
        let mbit = |a: u64, b: u64| (a - b) as f64 * 8.0 / dt / 1e6;
        rates.push((mbit(now.0 .0, last.0 .0), mbit(now.0 .1, last.0 .1)));
        last = now;
    }
    iperf.stop(Duration::from_secs(3));
    rates
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn relay_classes_come_and_go_and_home_traffic_takes_its_rate_back() {
    if let Some(why) = testbed::unavailable(&["tc", "iperf3", "python3"]) {
        braid_testkit::skip(why);
        return;
    }
    let id = std::process::id();
    let relay = Netns::new(&format!("braid-relay-r{id}")).unwrap();
    let isp = Netns::new(&format!("braid-relay-i{id}")).unwrap();
    relay
        .ip(&[
            "link", "add", "rup", "type", "veth", "peer", "name", "iup", "netns", &isp.name,
        ])
        .unwrap();
    relay
        .ip(&["addr", "add", "10.203.0.1/24", "dev", "rup"])
        .unwrap();
    isp.ip(&["addr", "add", "10.203.0.2/24", "dev", "iup"])
        .unwrap();
    relay.ip(&["link", "set", "rup", "up"]).unwrap();
    isp.ip(&["link", "set", "iup", "up"]).unwrap();
    let d = dir();
    let cfg = write_config(&d);
    let log = d.join("relay.log");

    // A clean exit removes the classes.
    let mut r = start(&relay, &cfg, &log);
    assert!(
        r.stop(Duration::from_secs(5)),
        "the relay exits cleanly on SIGTERM"
    );
    assert!(!classes(&relay), "classes gone after exit");
    assert!(
        !d.join("state/htb-device").exists(),
        "state file gone after exit"
    );

    // A crash leaves them; the next start removes them first.
    let mut r = start(&relay, &cfg, &log);
    r.child.kill().unwrap();
    r.child.wait().unwrap();
    assert!(classes(&relay), "a SIGKILL leaves the classes behind");
    let out = relay
        .exec(
            BRAID,
            &["relay", "--clean", "--config", cfg.to_str().unwrap()],
        )
        .unwrap();
    assert!(out.contains("rup"), "{out}");
    assert!(!classes(&relay), "`braid relay --clean` removes them");
    let mut r = start(&relay, &cfg, &log);
    r.child.kill().unwrap();
    r.child.wait().unwrap();
    let restart_log = d.join("relay2.log");
    let mut r = start(&relay, &cfg, &restart_log);
    assert!(
        std::fs::read_to_string(&restart_log)
            .unwrap()
            .contains("left behind"),
        "the restart removed the crashed run's classes first"
    );

    // Home traffic against the shared flood.
    let _sink = isp.spawn("iperf3", &["-s"], &d.join("iperf3.log")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let alone = home_upload(&relay, 3, &d.join("home-alone.log"));
    let _flood = relay
        .spawn("python3", &["-c", FLOOD], &d.join("flood.log"))
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (before, t0) = (class_bytes(&relay).1, Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let shared_alone =
        (class_bytes(&relay).1 - before) as f64 * 8.0 / t0.elapsed().as_secs_f64() / 1e6;
    let with_shared = home_upload(&relay, 4, &d.join("home-shared.log"));
    let home = |v: &[(f64, f64)]| v.iter().map(|r| r.0).collect::<Vec<f64>>();
    let baseline = mean(&home(&alone)[5..28]);
    let back_at = with_shared.iter().position(|r| r.0 >= 0.8 * baseline);
    let steady = mean(&home(&with_shared)[10..38]);
    let shared_min = with_shared[10..38]
        .iter()
        .map(|r| r.1)
        .fold(f64::INFINITY, f64::min);
    println!(
        "home alone {baseline:.2} Mbit/s; with shared traffic {steady:.2} Mbit/s after 1 s \
         (ratio {:.3}), back to 80% at {:?} ms; shared alone {shared_alone:.2} Mbit/s, \
         least per 100 ms during the home upload {shared_min:.2} Mbit/s (guarantee {:.2})",
        steady / baseline,
        back_at.map(|i| (i + 1) * 100),
        GUARANTEE_KBIT / 1e3
    );
    println!("home, shared per 100 ms: {with_shared:.2?}");
    assert!(
        alone.iter().all(|r| r.1 < 0.1),
        "nothing in the shared class without the flood"
    );
    assert!(
        shared_alone > 0.8 * UPLINK_MBIT,
        "the shared class grows into idle capacity"
    );
    assert!(
        back_at.is_some_and(|i| i < 10),
        "home traffic took its rate back within a second"
    );
    assert!(
        steady > 0.85 * baseline,
        "home keeps its rate beside the shared traffic"
    );
    assert!(
        shared_min > 0.7 * GUARANTEE_KBIT / 1e3,
        "the shared class keeps about its guarantee"
    );
    assert!(r.stop(Duration::from_secs(5)));
    assert!(
        !classes(&relay),
        "classes gone after the restarted relay exits"
    );
    let _ = std::fs::remove_dir_all(&d);
}
