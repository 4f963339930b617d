//! `bapu-fig14` and `bapu-fig15` (root): BaPu §5's home traffic beside lent traffic, on a
//! real `braid relay` and its HTB classes in two namespaces (home router and ISP). The
//! relay's uplink is 10 Mbit/s, all of it lent when idle, with the default guarantee
//! (`relay/mod.rs`: 3% of the uplink, 300 kbit/s here); the shared traffic is a UDP flood
//! at three times the uplink into the relay. Fig 14: a home TCP download (iperf3 -R, the
//! ISP's side shaped to 20 Mbit/s), whose ACKs climb the uplink; fig 15: a home TCP upload.
//! Each runs alone, then beside the flood. Headline: the home flow's goodput beside the
//! shared traffic over alone (goal 0.95); `headlines` adds the least shared rate per
//! 500 ms during the home flow over the guarantee (goal 0.9: the guarantee held).

#![expect(
    clippy::disallowed_methods,
    reason = "a lab benchmark in real time: rates are sampled against the clock"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use braid_net::relay::htb;
use braid_net::testbed::{self, Netns, Proc};
use serde_json::{json, Value};

use crate::common::f;
use crate::lab_common::{braid_unavailable, load_average, num};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct BapuFig14;
pub struct BapuFig15;

const UPLINK_MBIT: f64 = 10.0;
const DOWNLINK_MBIT: f64 = 20.0;

/// The gateway's side of the relay, played by a UDP source at 30 Mbit/s.
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

/// The keys of the run: any valid pair (the server is not there; the flood only has to
/// fill the relay's shared class).
const RELAY_KEY: &str = "ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg4ODg=";
const SERVER_PUBLIC: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";

fn config(d: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let key = d.join("relay.key");
    let io = |e: std::io::Error| e.to_string();
    std::fs::write(&key, format!("{RELAY_KEY}\n")).map_err(io)?;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    let cfg = d.join("relay.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"private_key_file = "{}"
server_public_key = "{SERVER_PUBLIC}"
server = "10.204.0.2:51820"
listen = "127.0.0.1:7000"
uplink_port = 7001
state_dir = "{}"
[lend]
rate_mbit = {UPLINK_MBIT}
monthly_gb = 1000
[shaping]
device = "rup"
uplink_mbit = {UPLINK_MBIT}
"#,
            key.display(),
            d.join("state").display()
        ),
    )
    .map_err(io)?;
    Ok(cfg)
}

/// Bytes the shared class has sent.
fn shared_bytes(ns: &Netns) -> u64 {
    let out = ns
        .exec("tc", &["-s", "class", "show", "dev", "rup"])
        .unwrap_or_default();
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.contains("class htb b7:30 ") {
            return (lines.next().unwrap_or(""))
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

/// One home flow of `secs` (iperf3, first second left out): its goodput, Mbit/s, and the
/// shared class's rate per 500 ms meanwhile.
fn home_flow(
    relay: &Netns,
    download: bool,
    secs: u32,
    log: &Path,
) -> Result<(f64, Vec<f64>), String> {
    let t = secs.to_string();
    let mut args = vec!["-c", "10.204.0.2", "-t", &t, "-O", "1", "--json"];
    if download {
        args.push("-R");
    }
    let mut iperf = relay.spawn("iperf3", &args, log)?;
    let step = Duration::from_millis(500);
    let start = Instant::now();
    let mut last = (shared_bytes(relay), start);
    let mut shared = Vec::new();
    for k in 1..=secs * 2 {
        std::thread::sleep((start + step * k).saturating_duration_since(Instant::now()));
        let now = (shared_bytes(relay), Instant::now());
        let dt = now.1.duration_since(last.1).as_secs_f64();
        shared.push(now.0.saturating_sub(last.0) as f64 * 8.0 / dt / 1e6);
        last = now;
    }
    let done = testbed::wait_for(Duration::from_secs(10), || !iperf.running());
    if !done {
        iperf.stop(Duration::from_secs(2));
        return Err("iperf3 did not finish".into());
    }
    let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("iperf3: {e}: {text}"))?;
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| format!("iperf3 reported no goodput: {text}"))?;
    Ok((bps / 1e6, shared))
}

struct Measured {
    alone: f64,
    beside: f64,
    shared_alone: f64,
    shared_during: Vec<f64>,
    guarantee_mbit: f64,
}

fn measure(download: bool) -> Result<Measured, String> {
    let braid = braid_lab::braid_daemon::executable().ok_or("no braid executable")?;
    let id = std::process::id() % 100_000;
    let name = if download { "f14" } else { "f15" };
    let relay = Netns::new(&format!("brbp{name}{id}-r"))?;
    let isp = Netns::new(&format!("brbp{name}{id}-i"))?;
    testbed::run(
        "ip",
        &[
            "link",
            "add",
            "rup",
            "netns",
            &relay.name,
            "type",
            "veth",
            "peer",
            "name",
            "iup",
            "netns",
            &isp.name,
        ],
    )?;
    relay.ip(&["addr", "add", "10.204.0.1/24", "dev", "rup"])?;
    isp.ip(&["addr", "add", "10.204.0.2/24", "dev", "iup"])?;
    relay.ip(&["link", "set", "rup", "up"])?;
    isp.ip(&["link", "set", "iup", "up"])?;
    // The ISP's side of the home's downlink.
    let rate = format!("{DOWNLINK_MBIT}mbit");
    isp.exec(
        "tc",
        &[
            "qdisc", "add", "dev", "iup", "root", "handle", "1:", "htb", "default", "1",
        ],
    )?;
    isp.exec(
        "tc",
        &[
            "class", "add", "dev", "iup", "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
        ],
    )?;
    let d = std::env::temp_dir().join(format!("braid-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
    let cfg = config(&d)?;
    let b = braid.to_str().unwrap_or("braid");
    let relay_log = d.join("relay.log");
    let mut r: Proc = relay.spawn(
        b,
        &["relay", "--config", cfg.to_str().unwrap_or("")],
        &relay_log,
    )?;
    let installed = testbed::wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&relay_log).is_ok_and(|s| s.contains("relay lending"))
    });
    if !installed {
        return Err(format!(
            "the relay did not start: {}",
            std::fs::read_to_string(&relay_log).unwrap_or_default()
        ));
    }
    // The guarantee the relay installed: its default for this uplink.
    let guarantee_mbit = braid_net::relay::RelayConfig::load(&cfg)
        .ok()
        .and_then(|c| c.shaping)
        .map_or(f64::NAN, |s| s.guarantee_bps as f64 / 1e6);
    let _sink = isp.spawn("iperf3", &["-s"], &d.join("iperf3-server.log"))?;
    std::thread::sleep(Duration::from_millis(500));
    let secs = 6;
    let (alone, _) = home_flow(&relay, download, secs, &d.join("alone.json"))?;
    let _flood = relay.spawn("python3", &["-c", FLOOD], &d.join("flood.log"))?;
    std::thread::sleep(Duration::from_millis(1500));
    let (before, t0) = (shared_bytes(&relay), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let shared_alone =
        shared_bytes(&relay).saturating_sub(before) as f64 * 8.0 / t0.elapsed().as_secs_f64() / 1e6;
    let (beside, shared_during) = home_flow(&relay, download, secs, &d.join("beside.json"))?;
    let clean = r.stop(Duration::from_secs(5));
    let gone = !relay
        .exec("tc", &["qdisc", "show", "dev", "rup"])
        .unwrap_or_default()
        .contains(&format!("qdisc htb {}", htb::HANDLE));
    if !(clean && gone) {
        return Err(format!(
            "the relay did not leave cleanly (exit ok {clean}, classes gone {gone}); logs in {}",
            d.display()
        ));
    }
    let _ = std::fs::remove_dir_all(&d);
    Ok(Measured {
        alone,
        beside,
        shared_alone,
        shared_during,
        guarantee_mbit,
    })
}

fn report(
    bench: &'static str,
    download: bool,
    opts: &mut Options<'_>,
) -> Result<BenchReport, BenchError> {
    if let Some(why) = testbed::unavailable(&["tc", "iperf3", "python3"]) {
        return Err(BenchError::Other(format!("{why}; {bench} needs root")));
    }
    if let Some(why) = braid_unavailable() {
        return Err(BenchError::Other(format!(
            "braid cannot run in the lab: {why}"
        )));
    }
    let load = load_average();
    opts.progress(bench, 0.0);
    let m = measure(download).map_err(BenchError::Other)?;
    opts.progress(bench, 1.0);
    let ratio = m.beside / m.alone;
    // The first 500 ms sample straddles the flow's start.
    let during = m.shared_during.get(2..).unwrap_or(&[]);
    let shared_min = during.iter().copied().fold(f64::INFINITY, f64::min);
    let kind = if download { "download" } else { "upload" };
    let mut table = Table::new(["", "Mbit/s"]);
    table.row([format!("home {kind} alone"), f(m.alone, 2)]);
    table.row([format!("home {kind} beside shared traffic"), f(m.beside, 2)]);
    table.row(["shared traffic alone".to_owned(), f(m.shared_alone, 2)]);
    table.row([
        format!("shared traffic during the home {kind}, least per 500 ms"),
        f(shared_min, 2),
    ]);
    table.row([
        "the shared class's guarantee".to_owned(),
        f(m.guarantee_mbit, 2),
    ]);
    Ok(BenchReport {
        bench: bench.into(),
        seed: opts.seed,
        quick: opts.quick,
        headlines: vec![Headline::new(
            "least shared rate per 500 ms during the home flow / its guarantee",
            shared_min / m.guarantee_mbit,
            None,
            0.9,
            true,
        )],
        systems: json!({
            "home_alone_mbps": num(m.alone),
            "home_beside_shared_mbps": num(m.beside),
            "ratio": num(ratio),
            "shared_alone_mbps": num(m.shared_alone),
            "shared_during_home_mbps": m.shared_during,
            "shared_min_mbps": num(shared_min),
            "guarantee_mbps": num(m.guarantee_mbit),
            "uplink_mbps": UPLINK_MBIT,
            "downlink_mbps": DOWNLINK_MBIT,
        }),
        headline: Headline::new(
            format!("home {kind} beside lent traffic / alone"),
            ratio,
            None,
            0.95,
            true,
        ),
        notes: vec![format!(
            "a braid relay with its HTB classes on a {UPLINK_MBIT} Mbit/s uplink (downlink \
             shaped to {DOWNLINK_MBIT} Mbit/s at the ISP), default guarantee, all of the \
             uplink lent; shared traffic: UDP at 30 Mbit/s into the relay; home flow: \
             iperf3 TCP (Cubic) for 6 s, first second left out, alone then beside the \
             shared traffic; the same with --quick; load average before: {load}"
        )],
        table,
    })
}

impl Bench for BapuFig14 {
    fn name(&self) -> &'static str {
        "bapu-fig14"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "a home TCP download beside a relay's lent uplink traffic, its ACKs first (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        report("bapu-fig14", true, opts)
    }
}

impl Bench for BapuFig15 {
    fn name(&self) -> &'static str {
        "bapu-fig15"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "a home TCP upload beside a relay's lent uplink traffic, which backs off to its guarantee (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        report("bapu-fig15", false, opts)
    }
}
