//! `tunnel-throughput`: TCP throughput of the real daemon. Two network namespaces joined by
//! two veth pairs (the gateway's two uplinks to the server); iperf3 TCP from the gateway
//! namespace to the server through (a) the plain veth, (b) braid with one path, (c) braid
//! with two paths and (d) wireguard-go over the same veth, where it can be installed from
//! the Go module proxy (`go install golang.zx2c4.com/wireguard@latest`, at run time; nothing
//! third-party is committed). Reports Gbit/s and the tunnel processes' CPU seconds per GB
//! carried (from /proc), with the whole machine's busy CPU seconds per GB beside them.
//!
//! Needs root, iperf3 and (for wireguard-go) Go; wall-clock figures from a shared 2-core
//! machine are noisy, so only the ratios within one run mean much.

use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_net::testbed::{self, Bed, Netns, Proc, SERVER_ADDR};
use serde_json::{json, Value};

use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct TunnelThroughput;

/// What one system achieved.
struct Measured {
    gbps: f64,
    bytes: f64,
    retransmits: u64,
    /// CPU seconds of the tunnel's processes (both ends).
    tunnel_cpu_s: f64,
    /// Busy CPU seconds of the whole machine during the run.
    system_cpu_s: f64,
}

impl Measured {
    fn json(&self) -> Value {
        let gb = self.bytes / 1e9;
        json!({
            "gbps": round(self.gbps, 3),
            "bytes": self.bytes,
            "tcp_retransmits": self.retransmits,
            "tunnel_cpu_s": round(self.tunnel_cpu_s, 3),
            "tunnel_cpu_s_per_gb": if gb > 0.0 { round(self.tunnel_cpu_s / gb, 3) } else { 0.0 },
            "system_cpu_s_per_gb": if gb > 0.0 { round(self.system_cpu_s / gb, 3) } else { 0.0 },
        })
    }
}

fn round(v: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (v * m).round() / m
}

fn err(e: impl Into<String>) -> BenchError {
    BenchError::Other(e.into())
}

/// CPU seconds (user + system) a process has used, from /proc/PID/stat.
fn proc_cpu_s(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) closed by ')'.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; here indices 11 and 12.
    (ticks(11) + ticks(12)) / clock_ticks()
}

/// /proc counts CPU time in USER_HZ ticks, which the kernel's ABI fixes at 100 per second.
fn clock_ticks() -> f64 {
    100.0
}

/// Busy CPU seconds of the whole machine (all but idle and iowait), from /proc/stat.
fn system_busy_s() -> f64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = s.lines().next() else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = v.iter().sum();
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    (total - idle) / clock_ticks()
}

/// Runs iperf3 TCP from `client` to `target` for `secs`, measuring the CPU of `pids`.
fn iperf(
    client: &Netns,
    server: &Netns,
    target: &str,
    secs: u32,
    pids: &[u32],
    logs: &Path,
) -> Result<Measured, BenchError> {
    let mut srv = server
        .spawn("iperf3", &["-s", "-1"], &logs.join("iperf3-server.log"))
        .map_err(err)?;
    std::thread::sleep(Duration::from_millis(300));
    let cpu0: f64 = pids.iter().map(|&p| proc_cpu_s(p)).sum();
    let sys0 = system_busy_s();
    let out = client
        .exec(
            "iperf3",
            &["-c", target, "-t", &secs.to_string(), "-O", "1", "--json"],
        )
        .map_err(err)?;
    let cpu1: f64 = pids.iter().map(|&p| proc_cpu_s(p)).sum();
    let sys1 = system_busy_s();
    srv.stop(Duration::from_secs(2));
    let v: Value = serde_json::from_str(&out).map_err(|e| err(format!("iperf3 output: {e}")))?;
    let recv = &v["end"]["sum_received"];
    let gbps = recv["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9;
    let bytes = recv["bytes"].as_f64().unwrap_or(0.0);
    if bytes <= 0.0 {
        return Err(err(format!("iperf3 to {target} carried nothing: {out}")));
    }
    // The omitted first second is not in `bytes`: scale the CPU to the counted seconds.
    let counted = recv["seconds"].as_f64().unwrap_or(f64::from(secs));
    let scale = counted / (counted + 1.0);
    Ok(Measured {
        gbps,
        bytes,
        retransmits: v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
        tunnel_cpu_s: (cpu1 - cpu0) * scale,
        system_cpu_s: (sys1 - sys0) * scale,
    })
}

fn write(path: &Path, text: &str) -> Result<(), BenchError> {
    std::fs::write(path, text).map_err(|e| err(format!("{}: {e}", path.display())))
}

/// A private key file made by `braid genkey`; returns its public key.
fn keypair(bin: &Path, file: &Path) -> Result<String, BenchError> {
    let bin = bin.to_str().unwrap_or("braid");
    let key = testbed::run(bin, &["genkey"]).map_err(err)?;
    write(file, &key)?;
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{bin} pubkey < {}", file.display()))
        .output()
        .map_err(|e| err(e.to_string()))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Runs braid with `paths` uplinks, encrypted or not, and measures it.
fn braid(
    bed: &Bed,
    bin: &Path,
    dir: &Path,
    paths: usize,
    encrypted: bool,
    secs: u32,
) -> Result<Measured, BenchError> {
    let tag = format!("{paths}-{}", if encrypted { "enc" } else { "plain" });
    let gkey = dir.join(format!("gateway-{tag}.key"));
    let skey = dir.join(format!("server-{tag}.key"));
    let gpub = keypair(bin, &gkey)?;
    let spub = keypair(bin, &skey)?;
    let plain = if encrypted { "" } else { "plaintext = true\n" };
    let srv_cfg = dir.join(format!("server-{tag}.toml"));
    write(
        &srv_cfg,
        &format!(
            "[interface]\nprivate_key_file = \"{skey}\"\n{plain}address = \"10.77.0.1/24\"\nmtu = 1400\n[[gateway]]\nname = \"bench\"\npublic_key = \"{gpub}\"\n[control]\nsocket = \"{d}/server-{tag}.sock\"\n",
            skey = skey.display(),
            d = dir.display()
        ),
    )?;
    let mut uplinks = String::new();
    for i in ["a0", "b0"].iter().take(paths) {
        uplinks += &format!("[[uplink]]\ninterface = \"{i}\"\n");
    }
    let gw_cfg = dir.join(format!("gateway-{tag}.toml"));
    write(
        &gw_cfg,
        &format!(
            "[interface]\nprivate_key_file = \"{gkey}\"\n{plain}mtu = 1400\n[server]\nendpoint = \"{SERVER_ADDR}:51820\"\npublic_key = \"{spub}\"\n{uplinks}[control]\nsocket = \"{d}/gateway-{tag}.sock\"\n",
            gkey = gkey.display(),
            d = dir.display()
        ),
    )?;
    let bin = bin.to_str().unwrap_or("braid");
    let mut server = bed
        .server
        .spawn(
            bin,
            &["server", "--config", srv_cfg.to_str().unwrap_or("")],
            &dir.join(format!("server-{tag}.log")),
        )
        .map_err(err)?;
    std::thread::sleep(Duration::from_millis(300));
    let mut gateway = bed
        .gateway
        .spawn(
            bin,
            &["gateway", "--config", gw_cfg.to_str().unwrap_or("")],
            &dir.join(format!("gateway-{tag}.log")),
        )
        .map_err(err)?;
    let up = testbed::wait_for(Duration::from_secs(10), || {
        bed.gateway
            .exec("ping", &["-c", "1", "-W", "1", "10.77.0.1"])
            .is_ok()
    });
    if !up {
        return Err(err(format!(
            "braid tunnel with {paths} path(s) did not come up (logs in {})",
            dir.display()
        )));
    }
    let m = iperf(
        &bed.gateway,
        &bed.server,
        "10.77.0.1",
        secs,
        &[gateway.pid(), server.pid()],
        dir,
    );
    gateway.stop(Duration::from_secs(3));
    server.stop(Duration::from_secs(3));
    m
}

/// Installs wireguard-go (Go module proxy) into `dir`; its path, or why not.
fn install_wireguard_go(dir: &Path) -> Result<PathBuf, String> {
    let bin = dir.join("wireguard-go");
    if bin.is_file() {
        return Ok(bin);
    }
    let out = std::process::Command::new("go")
        .args(["install", "golang.zx2c4.com/wireguard@latest"])
        .env("GOBIN", dir)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .map_err(|e| format!("Go is not installed ({e})"))?;
    if !out.status.success() {
        return Err(format!(
            "go install golang.zx2c4.com/wireguard@latest failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let built = dir.join("wireguard");
    std::fs::rename(&built, &bin).map_err(|e| format!("{}: {e}", built.display()))?;
    Ok(bin)
}

fn wg_keypair() -> ([u8; 32], [u8; 32]) {
    let mut b = [0u8; 32];
    for chunk in b.chunks_mut(4) {
        chunk.copy_from_slice(&braid_net::system::random_u32().to_ne_bytes());
    }
    let secret = x25519_dalek::StaticSecret::from(b);
    let public = x25519_dalek::PublicKey::from(&secret);
    (secret.to_bytes(), public.to_bytes())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Configures a wireguard-go device through its UAPI socket.
fn uapi(dev: &str, config: &str) -> Result<(), String> {
    use std::io::{BufRead, BufReader, Write};
    let path = format!("/var/run/wireguard/{dev}.sock");
    let ok = testbed::wait_for(Duration::from_secs(5), || Path::new(&path).exists());
    if !ok {
        return Err(format!("wireguard-go did not open {path}"));
    }
    let mut s = std::os::unix::net::UnixStream::connect(&path).map_err(|e| e.to_string())?;
    s.write_all(format!("set=1\n{config}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    for line in BufReader::new(&s).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.is_empty() {
            break;
        }
        answer += &line;
    }
    if answer.contains("errno=0") {
        Ok(())
    } else {
        Err(format!("wireguard-go refused its config: {answer}"))
    }
}

/// wireguard-go over veth a, measured like braid.
fn wireguard(bed: &Bed, wg: &Path, dir: &Path, secs: u32) -> Result<Measured, BenchError> {
    let wg = wg.to_str().unwrap_or("wireguard-go");
    let tag = std::process::id() % 10_000;
    let (gdev, sdev) = (format!("wgg{tag}"), format!("wgs{tag}"));
    let mut procs: Vec<Proc> = Vec::new();
    for (ns, dev) in [(&bed.server, &sdev), (&bed.gateway, &gdev)] {
        procs.push(
            ns.spawn(wg, &["-f", dev], &dir.join(format!("{dev}.log")))
                .map_err(err)?,
        );
    }
    let (gk, gp) = wg_keypair();
    let (sk, sp) = wg_keypair();
    uapi(
        &sdev,
        &format!(
            "private_key={}\nlisten_port=51821\npublic_key={}\nallowed_ip=10.78.0.2/32\n",
            hex(&sk),
            hex(&gp)
        ),
    )
    .map_err(err)?;
    uapi(
        &gdev,
        &format!(
            "private_key={}\npublic_key={}\nendpoint={SERVER_ADDR}:51821\nallowed_ip=10.78.0.1/32\npersistent_keepalive_interval=1\n",
            hex(&gk),
            hex(&sp)
        ),
    )
    .map_err(err)?;
    for (ns, dev, addr) in [
        (&bed.server, &sdev, "10.78.0.1/24"),
        (&bed.gateway, &gdev, "10.78.0.2/24"),
    ] {
        ns.ip(&["addr", "add", addr, "dev", dev]).map_err(err)?;
        ns.ip(&["link", "set", dev, "mtu", "1420", "up"])
            .map_err(err)?;
    }
    let up = testbed::wait_for(Duration::from_secs(10), || {
        bed.gateway
            .exec("ping", &["-c", "1", "-W", "1", "10.78.0.1"])
            .is_ok()
    });
    if !up {
        return Err(err("wireguard-go tunnel did not come up"));
    }
    let pids: Vec<u32> = procs.iter().map(Proc::pid).collect();
    let m = iperf(&bed.gateway, &bed.server, "10.78.0.1", secs, &pids, dir);
    for mut p in procs {
        p.stop(Duration::from_secs(3));
    }
    m
}

impl Bench for TunnelThroughput {
    fn name(&self) -> &'static str {
        "tunnel-throughput"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "TCP through the real daemon (1 and 2 paths) vs plain veth and wireguard-go, Gbit/s and CPU s/GB (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        if let Some(why) = testbed::unavailable(&["iperf3", "ping"]) {
            return Err(err(format!("tunnel-throughput {why}")));
        }
        let bin = std::env::var_os("BRAID_BIN")
            .map(PathBuf::from)
            .or_else(|| std::env::current_exe().ok())
            .ok_or_else(|| err("cannot find the braid binary (set BRAID_BIN)"))?;
        let secs = if opts.quick { 3 } else { 10 };
        let dir = std::env::temp_dir().join(format!("braid-tunnel-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| err(e.to_string()))?;
        let tools = std::env::temp_dir().join("braid-bench-tools");
        std::fs::create_dir_all(&tools).map_err(|e| err(e.to_string()))?;
        let bed = Bed::new(&format!("brdtp{}", std::process::id() % 100_000)).map_err(err)?;
        let mut systems = serde_json::Map::new();
        let mut notes = vec![
            format!("iperf3 TCP, one flow, {secs} s after a 1 s warm-up, gateway namespace to server namespace over veth"),
            "a shared 2-core VM: throughput is noisy between runs; compare the systems of one run".to_owned(),
            "tunnel_cpu_s_per_gb: CPU seconds of both tunnel endpoints' processes per GB carried; system_cpu_s_per_gb: the whole machine's busy CPU (iperf3 and kernel included)".to_owned(),
        ];
        let mut table = Table::new([
            "system",
            "Gbit/s",
            "tunnel CPU s/GB",
            "system CPU s/GB",
            "retransmits",
        ]);
        let mut add = |name: &str, m: &Measured, systems: &mut serde_json::Map<String, Value>| {
            let j = m.json();
            table.row([
                name.to_owned(),
                format!("{:.2}", m.gbps),
                format!("{}", j["tunnel_cpu_s_per_gb"]),
                format!("{}", j["system_cpu_s_per_gb"]),
                m.retransmits.to_string(),
            ]);
            systems.insert(name.to_owned(), j);
        };
        opts.progress("plain veth", 0.0);
        let veth = iperf(&bed.gateway, &bed.server, SERVER_ADDR, secs, &[], &dir)?;
        add("veth", &veth, &mut systems);
        opts.progress("braid, 1 path", 0.2);
        let one = braid(&bed, &bin, &dir, 1, true, secs)?;
        add("braid-1-path", &one, &mut systems);
        opts.progress("braid, 2 paths", 0.4);
        let two = braid(&bed, &bin, &dir, 2, true, secs)?;
        add("braid-2-paths", &two, &mut systems);
        opts.progress("braid, 1 path, unencrypted", 0.6);
        let bare = braid(&bed, &bin, &dir, 1, false, secs)?;
        add("braid-1-path-plaintext", &bare, &mut systems);
        opts.progress("wireguard-go", 0.75);
        let wg = match install_wireguard_go(&tools) {
            Ok(w) => match wireguard(&bed, &w, &dir, secs) {
                Ok(m) => Some(m),
                Err(e) => {
                    notes.push(format!("wireguard-go did not run: {e}"));
                    None
                }
            },
            Err(e) => {
                notes.push(format!("wireguard-go not available: {e}"));
                None
            }
        };
        if let Some(m) = &wg {
            add("wireguard-go", m, &mut systems);
        }
        opts.progress("done", 1.0);
        notes.push("braid rows are encrypted (Noise IK, ChaCha20-Poly1305) like wireguard-go, except braid-1-path-plaintext (plaintext = true), which shows what the encryption costs".to_owned());
        notes.push("both braid paths are veths of equal capacity on the same 2 cores: two paths share the CPU, so they cannot add up here; the two-path row shows the cost of striping and resequencing".to_owned());
        let _ = std::fs::remove_dir_all(&dir);
        let (metric, base) = match &wg {
            Some(w) => ("braid single-path Gbit/s over wireguard-go Gbit/s", w.gbps),
            None => (
                "braid single-path Gbit/s over plain veth Gbit/s (wireguard-go missing)",
                veth.gbps,
            ),
        };
        let value = if base > 0.0 {
            round(one.gbps / base, 3)
        } else {
            0.0
        };
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: Value::Object(systems),
            headline: Headline::new(metric, value, None, 1.0, true),
            notes,
            table,
        })
    }
}
