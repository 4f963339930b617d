//! `braid gateway`, `braid server` and `braid status`: the daemon (crates/braid-net) and
//! its status view.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use braid_net::config::{GatewayConfig, ServerConfig};
use braid_net::control::{self, ControlSocket};
use braid_net::status::Status;

#[derive(clap::Args)]
pub struct DaemonArgs {
    /// The config file (docs/daemon.md).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Check the config (and the machine: key file, interfaces, port) and exit.
    #[arg(long)]
    check: bool,
    /// Log format: text or json (one object per line). Levels from RUST_LOG (default info).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The daemon's control socket (default: from the config, or the only socket in
    /// /run/braid).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Find the socket through this gateway or server config.
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Print the whole status as one JSON object.
    #[arg(long)]
    json: bool,
}

fn init_logs(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        b.json().init();
    } else {
        b.init();
    }
}

fn shared() -> braid_net::status::Shared {
    Arc::new(Mutex::new(Status::default()))
}

pub fn gateway(a: DaemonArgs) -> anyhow::Result<()> {
    let path = a
        .config
        .unwrap_or_else(|| PathBuf::from("/etc/braid/gateway.toml"));
    let cfg = GatewayConfig::load(&path)?;
    let mtu = cfg.check_system()?;
    if a.check {
        return crate::emit(&format!("{}: ok (inner MTU {mtu})\n", cfg.file));
    }
    init_logs(&a.log_format);
    let shared = shared();
    let _control =
        ControlSocket::serve(&cfg.socket_path(), shared.clone()).map_err(anyhow::Error::msg)?;
    web(&cfg.control, &shared)?;
    let mut shutdown = braid_net::Shutdown::new()?;
    let split = braid_net::split_tcp::SplitTcp::gateway(&cfg)?;
    let mut g = braid_net::gateway::Gateway::new(cfg, mtu, shared)?;
    if let Some(a) = split.as_ref().and_then(|s| s.arrivals()) {
        g.count_arrivals(a);
    }
    let r = g.run(&mut shutdown);
    // The redirect goes first: the lab and init systems allow a short grace period.
    drop(split);
    r?;
    Ok(())
}

pub fn server(a: DaemonArgs) -> anyhow::Result<()> {
    let path = a
        .config
        .unwrap_or_else(|| PathBuf::from("/etc/braid/server.toml"));
    let cfg = ServerConfig::load(&path)?;
    cfg.check_system()?;
    if a.check {
        return crate::emit(&format!("{}: ok\n", cfg.file));
    }
    init_logs(&a.log_format);
    let shared = shared();
    let _control =
        ControlSocket::serve(&cfg.socket_path(), shared.clone()).map_err(anyhow::Error::msg)?;
    web(&cfg.control, &shared)?;
    let mut shutdown = braid_net::Shutdown::new()?;
    let split = braid_net::split_tcp::SplitTcp::server(&cfg)?;
    let mut s = braid_net::server::Server::new(cfg, shared)?;
    if let Some(a) = split.as_ref().and_then(|sp| sp.peer_arrivals()) {
        s.count_arrivals(a);
    }
    s.run(&mut shutdown)?;
    Ok(())
}

/// The dashboard and `/metrics`, on every address `[control]` names.
fn web(
    c: &braid_net::config::ControlSection,
    shared: &braid_net::status::Shared,
) -> anyhow::Result<()> {
    let listen: Vec<_> = c.web.iter().chain(&c.metrics).copied().collect();
    if listen.is_empty() {
        return Ok(());
    }
    let w = braid_net::web::serve(&listen, c.web_token.clone(), shared.clone())
        .map_err(anyhow::Error::msg)?;
    for a in &w.addrs {
        tracing::info!(address = %a, "web dashboard and /metrics at http://{a}/");
    }
    Ok(())
}

/// The control socket to ask: given, from a config, or the only one in /run/braid.
fn socket_for(a: &StatusArgs) -> anyhow::Result<PathBuf> {
    if let Some(s) = &a.socket {
        return Ok(s.clone());
    }
    if let Some(c) = &a.config {
        if let Ok(g) = GatewayConfig::load(c) {
            return Ok(g.socket_path());
        }
        return Ok(ServerConfig::load(c)?.socket_path());
    }
    let dir = Path::new("/run/braid");
    let socks: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "sock"))
                .collect()
        })
        .unwrap_or_default();
    match socks.as_slice() {
        [one] => Ok(one.clone()),
        [] => anyhow::bail!(
            "no braid daemon found in /run/braid (is one running? pass --socket PATH or --config FILE)"
        ),
        many => anyhow::bail!(
            "several braid daemons in /run/braid ({}): pass --socket PATH",
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub fn status(a: StatusArgs) -> anyhow::Result<()> {
    let sock = socket_for(&a)?;
    let s = control::query(&sock).map_err(anyhow::Error::msg)?;
    if a.json {
        return crate::emit(&(serde_json::to_string_pretty(&s)? + "\n"));
    }
    crate::emit(&render(&s))
}

fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mb/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.0} kb/s", bps / 1e3)
    } else {
        format!("{bps:.0} b/s")
    }
}

fn bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

fn duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A metered uplink's line under the table: this period against the cap, the projection,
/// and the engine's budget for the interval.
fn meter_line(name: &str, m: &braid_net::status::MeterStatus) -> String {
    let cap = match (m.cap_bytes, m.period_end) {
        (Some(c), Some(end)) => format!(
            " of {} ({:.0}%) until {}, projected {}",
            bytes(c),
            m.period_bytes as f64 / c.max(1) as f64 * 100.0,
            day(end),
            m.projected_bytes.map_or("-".to_owned(), bytes)
        ),
        _ => " (no cap)".to_owned(),
    };
    format!(
        "  metered {name}: {} this period{cap}; interval budget {} ({} sent), {}, throttled {}\n",
        bytes(m.period_bytes),
        bytes(m.budget_bytes),
        bytes(m.interval_sent_bytes),
        if m.held { "held" } else { "sending" },
        duration(m.throttled_ms / 1e3)
    )
}

/// A UNIX time's date, UTC (YYYY-MM-DD).
fn day(unix_s: u64) -> String {
    let (y, m, d) = braid_net::config::metering::civil_from_days((unix_s / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The human view: one table of paths per session, then what was dropped.
pub fn render(s: &Status) -> String {
    let mut o = format!(
        "{} {}  mtu {}  {}  offloads {}  up {}\n",
        s.role,
        s.tun,
        s.mtu,
        if s.encrypted {
            "encrypted"
        } else {
            "UNENCRYPTED"
        },
        if s.offload { "on" } else { "off" },
        duration(s.uptime_s)
    );
    if s.sessions.is_empty() {
        o += "no sessions\n";
    }
    for ss in &s.sessions {
        o += &format!(
            "\nsession {:08x}  {}  address {}  {}  up {}\n",
            ss.session_id,
            ss.peer,
            ss.tunnel_address.as_deref().unwrap_or("-"),
            if ss.established {
                "established"
            } else {
                "connecting"
            },
            duration(ss.uptime_s)
        );
        let header = [
            "PATH",
            "STATE",
            "TX RATE",
            "RX RATE",
            "RTT",
            "LOSS TX/RX",
            "CAPACITY",
            "SENT",
            "RECEIVED",
            "METERED",
            "STALLS/REVIVALS",
        ];
        let mut rows: Vec<[String; 11]> = vec![header.map(str::to_owned)];
        for p in &ss.paths {
            rows.push([
                p.name.clone(),
                p.state.clone(),
                rate(p.tx_bps),
                rate(p.rx_bps),
                p.rtt_ms.map_or("-".to_owned(), |r| format!("{r:.1} ms")),
                format!("{:.1}%/{:.1}%", p.tx_loss * 100.0, p.rx_loss * 100.0),
                rate(p.capacity_bps as f64),
                bytes(p.tx_bytes),
                bytes(p.rx_bytes),
                if p.metered {
                    bytes(p.metered_bytes)
                } else {
                    "-".to_owned()
                },
                format!("{}/{}", p.tx_stalls, p.tx_revivals),
            ]);
        }
        let widths: Vec<usize> = (0..11)
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        for r in &rows {
            let line: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(v, w)| format!("{v:<w$}"))
                .collect();
            o += "  ";
            o += line.join("  ").trim_end();
            o += "\n";
        }
        for p in &ss.paths {
            if let Some(m) = &p.meter {
                o += &meter_line(&p.name, m);
            }
        }
        o += &format!(
            "  inner: sent {} ({} packets), delivered {} ({} packets), recovered {}, holes skipped {}, failover resent {}\n",
            bytes(ss.inner_tx_bytes),
            ss.inner_tx_packets,
            bytes(ss.inner_rx_bytes),
            ss.inner_rx_packets,
            ss.recovered,
            ss.holes_skipped,
            ss.failover_resent
        );
    }
    let d = &s.drops;
    let drops = [
        ("unauthenticated", d.unauthenticated),
        ("replayed", d.replayed),
        ("unknown session", d.unknown_session),
        ("unknown key", d.unknown_key),
        ("engine rejected", d.engine_rejected),
        ("spoofed", d.spoofed),
        ("no route", d.no_route),
        ("send errors", d.send_errors),
        ("tun errors", d.tun_errors),
        ("table full", d.table_full),
    ];
    let nonzero: Vec<String> = drops
        .iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    o += &format!(
        "\ndropped: {}\n",
        if nonzero.is_empty() {
            "nothing".to_owned()
        } else {
            nonzero.join(", ")
        }
    );
    o
}

#[cfg(test)]
mod tests {
    use braid_net::status::{PathStatus, SessionStatus, Status};

    fn status() -> Status {
        Status {
            role: "gateway".into(),
            sessions: vec![SessionStatus {
                peer: "srv".into(),
                paths: vec![PathStatus {
                    name: "lte".into(),
                    state: "up".into(),
                    tx_stalls: 3,
                    tx_revivals: 2,
                    ..PathStatus::default()
                }],
                failover_resent: 17,
                ..SessionStatus::default()
            }],
            ..Status::default()
        }
    }

    #[test]
    fn metered_uplinks_show_their_period_cap_and_budget() {
        let mut s = status();
        s.sessions[0].paths[0].meter = Some(braid_net::status::MeterStatus {
            period_bytes: 2_500_000_000,
            cap_bytes: Some(10_000_000_000),
            period_start: Some(20_758 * 86_400),
            period_end: Some(20_788 * 86_400),
            projected_bytes: Some(9_000_000_000),
            budget_bytes: 125_000,
            interval_sent_bytes: 1_000,
            held: true,
            throttled_ms: 61_000.0,
        });
        let t = super::render(&s);
        assert!(
            t.contains("metered lte: 2.50 GB this period of 10.00 GB (25%) until 2026-12-01, projected 9.00 GB; interval budget 125 kB (1 kB sent), held, throttled 1m01s"),
            "{t}"
        );
    }

    #[test]
    fn table_shows_failover_counters() {
        let t = super::render(&status());
        let header = t.lines().find(|l| l.contains("PATH")).expect("header");
        let row = t
            .lines()
            .find(|l| l.trim_start().starts_with("lte"))
            .expect("row");
        assert!(header.trim_end().ends_with("STALLS/REVIVALS"), "{t}");
        assert!(row.trim_end().ends_with("3/2"), "{t}");
        assert!(t.contains("failover resent 17"), "{t}");
    }

    #[test]
    fn json_carries_failover_counters_and_reads_older_daemons() {
        let v = serde_json::to_value(status()).expect("json");
        assert_eq!(v["sessions"][0]["failover_resent"], 17);
        assert_eq!(v["sessions"][0]["paths"][0]["tx_stalls"], 3);
        assert_eq!(v["sessions"][0]["paths"][0]["tx_revivals"], 2);
        // A daemon from before these counters: they read as 0.
        let mut old = v.clone();
        old["sessions"][0]
            .as_object_mut()
            .expect("session")
            .remove("failover_resent");
        old["sessions"][0]["paths"][0]
            .as_object_mut()
            .expect("path")
            .remove("tx_stalls");
        let s: Status = serde_json::from_value(old).expect("older status");
        assert_eq!(s.sessions[0].failover_resent, 0);
        assert_eq!(s.sessions[0].paths[0].tx_stalls, 0);
        assert_eq!(s.sessions[0].paths[0].tx_revivals, 2);
    }
}
