//! Human-readable summaries of simulator reports: what `braid sim` prints, and the cells
//! benchmarks put in their tables.

use std::fmt::Write;

use braid_sim::host::WorkloadReport;
use braid_sim::{Report, Scenario};

use crate::Table;

/// Goodput of a workload, Mbit/s: bulk goodput, UDP payload goodput, or for short flows the
/// bytes requested by completed flows over the run (their offered load when all complete).
pub fn goodput_mbps(w: &WorkloadReport) -> f64 {
    if let Some(b) = &w.bulk {
        return b.goodput_mbps;
    }
    if let Some(u) = &w.udp {
        return u.goodput_mbps;
    }
    w.flows.as_ref().map_or(0.0, |f| f.offered_load_mbps)
}

/// One line per workload: its main figures.
pub fn workload_line(w: &WorkloadReport) -> String {
    let mut s = format!(
        "{} ({}, {}): ",
        w.name,
        crate::kebab(&w.kind),
        crate::kebab(&w.direction)
    );
    if let Some(b) = &w.bulk {
        let _ = write!(
            s,
            "goodput {:.3} Mbit/s, {} bytes",
            b.goodput_mbps, b.bytes_received
        );
    } else if let Some(f) = &w.flows {
        let _ = write!(
            s,
            "{} flows done of {} ({} incomplete, {} failed), FCT median {:.0} ms \
             (p25 {:.0}, p75 {:.0}, p95 {:.0})",
            f.completed,
            f.started,
            f.incomplete,
            f.failed,
            f.fct_ms.median,
            f.fct_ms.p25,
            f.fct_ms.p75,
            f.fct_ms.p95
        );
    }
    if let Some(u) = &w.udp {
        let _ = write!(
            s,
            "goodput {:.3} Mbit/s, loss {:.2}%, {} reordered, one-way delay median {:.1} ms \
             (p95 {:.1})",
            u.goodput_mbps,
            u.loss_rate * 100.0,
            u.reorder_events,
            u.one_way_delay_ms.median,
            u.one_way_delay_ms.p95
        );
    }
    s
}

/// What `braid sim` prints: the scenario, each workload's figures and each path's traffic.
pub fn summarize(scenario: &Scenario, r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} — {} — {:.0} s simulated, seed {}",
        r.scenario, r.system, r.virtual_s, r.seed
    );
    if !scenario.description.is_empty() {
        let _ = writeln!(out, "{}", scenario.description);
    }
    let _ = writeln!(out);
    for w in &r.workloads {
        let _ = writeln!(out, "{}", workload_line(w));
    }
    let _ = writeln!(out);
    let mut t = Table::new([
        "path",
        "up Mbit/s",
        "up lost",
        "up dropped",
        "down Mbit/s",
        "down lost",
        "down dropped",
    ]);
    let secs = r.virtual_s.max(1e-9);
    for p in &r.paths {
        let rate = |bytes: u64| format!("{:.3}", bytes as f64 * 8.0 / secs / 1e6);
        t.row([
            p.name.clone(),
            rate(p.up.bytes_delivered),
            (p.up.packets_lost_random + p.up.packets_lost_blackout).to_string(),
            p.up.packets_dropped_queue.to_string(),
            rate(p.down.bytes_delivered),
            (p.down.packets_lost_random + p.down.packets_lost_blackout).to_string(),
            p.down.packets_dropped_queue.to_string(),
        ]);
    }
    let _ = write!(out, "{t}");
    if let Some(g) = &r.gateway {
        let _ = writeln!(
            out,
            "\nbraid: {} packets up, {} down; resequencing: {} waited, {} holes given up",
            g.sent_packets,
            g.delivered_packets,
            r.server.as_ref().map_or(0, |s| s.reorder.buffered) + g.reorder.buffered,
            r.server.as_ref().map_or(0, |s| s.reorder.holes_skipped) + g.reorder.holes_skipped,
        );
    }
    out
}
