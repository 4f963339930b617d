//! On recorded cellular links whose rate swings tenfold within a second, braid's defaults
//! keep the links' own bottleneck queues from overflowing (each path's congestion window:
//! the stream's, as TCP is split by default; `braid_core::path::window` in the tunnel) and
//! bond most of what the links give when used alone.
//!
//! The first pair of docs/benchmarks.md's "Real links" table: mahimahi's AT&T and T-Mobile
//! LTE downlinks recorded while driving (35 and 25 ms), uplinks a constant 3 Mbit/s, one
//! bulk TCP download for 120 s. Before the windows (`braid bench trace-pairs --seed 3`,
//! the same traces) braid's datagrams were dropped at the links' queues four times as
//! often as the two links' own TCPs' (4229 against 974) and the download reached 0.78 of
//! the links' summed alone goodput; with them 0.84 and 0.6 drops per MB delivered.

use std::path::Path;

use braid_sim::{run, Report, Scenario, TraceCache};

const DURATION_S: f64 = 120.0;

fn scenario(engine: &str, traces: &mut TraceCache) -> Scenario {
    let text = format!(
        r#"
duration_s = {DURATION_S}
seed = 3
[engine]
{engine}
[[path]]
name = "att"
up = {{ rate_mbps = 3, delay_ms = 35 }}
down = {{ trace = "ATT-LTE-driving.down.gz", delay_ms = 35 }}
[[path]]
name = "tmobile"
up = {{ rate_mbps = 3, delay_ms = 25 }}
down = {{ trace = "TMobile-LTE-driving.down.gz", delay_ms = 25 }}
[[workload]]
kind = "bulk"
"#
    );
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces");
    Scenario::parse(&text, "real-links", &base, traces).expect("the scenario parses")
}

/// Goodput (Mbit/s), and datagrams dropped at the downlinks' bottleneck queues per MB the
/// download delivered.
fn bulk(engine: &str, traces: &mut TraceCache) -> (f64, f64) {
    let r: Report = run(&scenario(engine, traces), traces, None).expect("the scenario runs");
    let b = r.workloads[0].bulk.as_ref().expect("a bulk workload");
    let drops: u64 = r.paths.iter().map(|p| p.down.packets_dropped_queue).sum();
    let mb = b.bytes_received as f64 / 1e6;
    (b.goodput_mbps, drops as f64 / mb.max(1e-9))
}

#[test]
fn braid_bonds_recorded_lte_links_without_overflowing_them() {
    let mut traces = TraceCache::new();
    let (braid, braid_drops) = bulk("", &mut traces);
    let (att, att_drops) = bulk(r#"direct = "att""#, &mut traces);
    let (tmo, tmo_drops) = bulk(r#"direct = "tmobile""#, &mut traces);
    let alone_drops = att_drops.max(tmo_drops);
    eprintln!(
        "braid {braid:.2} Mbit/s ({braid_drops:.1} drops/MB); alone {att:.2} ({att_drops:.1}) \
         and {tmo:.2} ({tmo_drops:.1})"
    );
    assert!(
        braid > 0.8 * (att + tmo),
        "braid {braid:.2} Mbit/s against {att:.2} + {tmo:.2} alone"
    );
    assert!(
        braid_drops < 2.0 * alone_drops.max(1.0),
        "braid {braid_drops:.1} drops per MB against {alone_drops:.1} alone"
    );
}
