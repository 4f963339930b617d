//! The Prometheus text exposition format (version 0.0.4) of the status snapshot, served
//! as `GET /metrics` by the web server ([`crate::web`]).

use std::fmt::Write as _;

use crate::status::Status;

/// Label values are escaped as the format requires.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The status as Prometheus text.
pub fn render(s: &Status) -> String {
    let mut o = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: &[(String, f64)]| {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} {kind}");
        for (labels, v) in rows {
            if labels.is_empty() {
                let _ = writeln!(o, "{name} {v}");
            } else {
                let _ = writeln!(o, "{name}{{{labels}}} {v}");
            }
        }
    };
    let role = esc(&s.role);
    family(
        "braid_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        &[(format!("role=\"{role}\""), s.uptime_s)],
    );
    family(
        "braid_sessions",
        "gauge",
        "Sessions (gateways at a server; one at a gateway).",
        &[(format!("role=\"{role}\""), s.sessions.len() as f64)],
    );
    let path_rows = |f: &dyn Fn(&crate::status::PathStatus) -> f64| -> Vec<(String, f64)> {
        s.sessions
            .iter()
            .flat_map(|ss| {
                ss.paths.iter().map(move |p| {
                    (
                        format!(
                            "peer=\"{}\",path=\"{}\",path_id=\"{}\"",
                            esc(&ss.peer),
                            esc(&p.name),
                            p.id
                        ),
                        f(p),
                    )
                })
            })
            .collect()
    };
    family(
        "braid_path_up",
        "gauge",
        "1 when the path is usable.",
        &path_rows(&|p| f64::from(u8::from(p.state == "up"))),
    );
    family(
        "braid_path_tx_bytes_total",
        "counter",
        "Bytes sent on the path.",
        &path_rows(&|p| p.tx_bytes as f64),
    );
    family(
        "braid_path_rx_bytes_total",
        "counter",
        "Bytes received on the path.",
        &path_rows(&|p| p.rx_bytes as f64),
    );
    family(
        "braid_path_tx_packets_total",
        "counter",
        "Datagrams sent on the path.",
        &path_rows(&|p| p.tx_packets as f64),
    );
    family(
        "braid_path_rx_packets_total",
        "counter",
        "Datagrams received on the path.",
        &path_rows(&|p| p.rx_packets as f64),
    );
    family(
        "braid_path_metered_bytes_total",
        "counter",
        "Bytes sent and received on a metered path.",
        &path_rows(&|p| p.metered_bytes as f64),
    );
    // Metered uplinks only (a gateway's): this cap period, the cap, the interval's budget.
    let meter_rows = |f: &dyn Fn(&crate::status::MeterStatus) -> Option<f64>| {
        let all = path_rows(&|p| p.meter.as_ref().and_then(f).unwrap_or(f64::NAN));
        all.into_iter()
            .filter(|(_, v)| !v.is_nan())
            .collect::<Vec<_>>()
    };
    family(
        "braid_path_metered_period_bytes",
        "gauge",
        "Bytes sent and received on a metered uplink this cap period, kept across restarts.",
        &meter_rows(&|m| Some(m.period_bytes as f64)),
    );
    family(
        "braid_path_metered_cap_bytes",
        "gauge",
        "A metered uplink's data cap.",
        &meter_rows(&|m| m.cap_bytes.map(|c| c as f64)),
    );
    family(
        "braid_path_metered_projected_bytes",
        "gauge",
        "This cap period's bytes at the rate so far, carried to the period's end.",
        &meter_rows(&|m| m.projected_bytes.map(|c| c as f64)),
    );
    family(
        "braid_path_metered_budget_bytes",
        "gauge",
        "A metered uplink's budget for the current scheduling interval.",
        &meter_rows(&|m| Some(m.budget_bytes as f64)),
    );
    family(
        "braid_path_metered_held",
        "gauge",
        "1 while the engine holds a metered uplink (its budget or cap spent).",
        &meter_rows(&|m| Some(f64::from(u8::from(m.held)))),
    );
    family(
        "braid_path_metered_throttled_seconds_total",
        "counter",
        "Time a metered uplink was held in this session.",
        &meter_rows(&|m| Some(m.throttled_ms / 1e3)),
    );
    family(
        "braid_path_rtt_seconds",
        "gauge",
        "Smoothed round-trip time.",
        &path_rows(&|p| p.rtt_ms.map_or(f64::NAN, |r| r / 1e3)),
    );
    family(
        "braid_path_tx_loss_ratio",
        "gauge",
        "Loss of the direction we send on (the peer's estimate).",
        &path_rows(&|p| p.tx_loss),
    );
    family(
        "braid_path_rx_loss_ratio",
        "gauge",
        "Loss of the direction we receive on.",
        &path_rows(&|p| p.rx_loss),
    );
    family(
        "braid_path_capacity_bits_per_second",
        "gauge",
        "Capacity estimate of the direction we send on.",
        &path_rows(&|p| p.capacity_bps as f64),
    );
    family(
        "braid_path_tx_stalls_total",
        "counter",
        "Times the path was declared failed (acknowledgements stalled while other paths delivered).",
        &path_rows(&|p| p.tx_stalls as f64),
    );
    family(
        "braid_path_tx_revivals_total",
        "counter",
        "Times a failed path came back.",
        &path_rows(&|p| p.tx_revivals as f64),
    );
    let sess_rows = |f: &dyn Fn(&crate::status::SessionStatus) -> u64| -> Vec<(String, f64)> {
        s.sessions
            .iter()
            .map(|ss| (format!("peer=\"{}\"", esc(&ss.peer)), f(ss) as f64))
            .collect()
    };
    family(
        "braid_inner_tx_bytes_total",
        "counter",
        "Inner (tunnelled) bytes sent.",
        &sess_rows(&|ss| ss.inner_tx_bytes),
    );
    family(
        "braid_inner_rx_bytes_total",
        "counter",
        "Inner (tunnelled) bytes delivered.",
        &sess_rows(&|ss| ss.inner_rx_bytes),
    );
    family(
        "braid_recovered_packets_total",
        "counter",
        "Inner packets recovered by loss recovery.",
        &sess_rows(&|ss| ss.recovered),
    );
    family(
        "braid_failover_resent_packets_total",
        "counter",
        "Data packets resent on another path because theirs stalled.",
        &sess_rows(&|ss| ss.failover_resent),
    );
    let d = &s.drops;
    let drops = [
        ("unauthenticated", d.unauthenticated),
        ("replayed", d.replayed),
        ("unknown_session", d.unknown_session),
        ("unknown_key", d.unknown_key),
        ("engine_rejected", d.engine_rejected),
        ("spoofed", d.spoofed),
        ("no_route", d.no_route),
        ("send_errors", d.send_errors),
        ("tun_errors", d.tun_errors),
        ("table_full", d.table_full),
    ];
    let rows: Vec<(String, f64)> = drops
        .iter()
        .map(|(r, v)| (format!("reason=\"{r}\""), *v as f64))
        .collect();
    family(
        "braid_dropped_total",
        "counter",
        "Datagrams and packets dropped, by reason.",
        &rows,
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{PathStatus, SessionStatus};

    #[test]
    fn renders_paths_and_drops() {
        let s = Status {
            role: "gateway".into(),
            sessions: vec![SessionStatus {
                peer: "srv\"1".into(),
                paths: vec![PathStatus {
                    name: "lte".into(),
                    state: "up".into(),
                    tx_bytes: 42,
                    rtt_ms: Some(25.0),
                    tx_stalls: 3,
                    tx_revivals: 2,
                    ..PathStatus::default()
                }],
                failover_resent: 17,
                ..SessionStatus::default()
            }],
            ..Status::default()
        };
        let t = render(&s);
        assert!(
            t.contains(
                "braid_path_tx_bytes_total{peer=\"srv\\\"1\",path=\"lte\",path_id=\"0\"} 42"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "braid_path_rtt_seconds{peer=\"srv\\\"1\",path=\"lte\",path_id=\"0\"} 0.025"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "braid_path_tx_stalls_total{peer=\"srv\\\"1\",path=\"lte\",path_id=\"0\"} 3"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "braid_path_tx_revivals_total{peer=\"srv\\\"1\",path=\"lte\",path_id=\"0\"} 2"
            ),
            "{t}"
        );
        assert!(
            t.contains("braid_failover_resent_packets_total{peer=\"srv\\\"1\"} 17"),
            "{t}"
        );
        assert!(t.contains("braid_path_up{") && t.contains("} 1\n"), "{t}");
        assert!(
            t.contains("braid_dropped_total{reason=\"replayed\"} 0"),
            "{t}"
        );
        assert!(
            t.contains("# TYPE braid_path_rx_bytes_total counter"),
            "{t}"
        );
    }
}
