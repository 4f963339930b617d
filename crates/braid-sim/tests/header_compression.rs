//! Inner header compression (`braid_core::compress`) under real inner TCP: what it buys in
//! goodput where braid's headers are the bound, and that multipath reordering, loss and
//! hole timeouts never leave a compressed packet without its context.

use std::path::Path;

use braid_core::compress::CompressStats;
use braid_sim::{run, Report, Scenario, TraceCache};

fn report(paths: &str, compression: bool, workload: &str) -> Report {
    let text = format!(
        r#"
duration_s = 20
seed = 3
[engine]
header_compression = {compression}
tcp_transport = "packet"
{paths}
{workload}
"#
    );
    let sc = Scenario::parse(&text, "hc", Path::new("."), &mut TraceCache::new())
        .expect("the scenario parses");
    run(&sc, &mut TraceCache::new(), None).expect("runs")
}

fn goodput(r: &Report) -> f64 {
    r.workloads[0].bulk.as_ref().expect("bulk").goodput_mbps
}

fn hc(r: &Report) -> (CompressStats, CompressStats) {
    let g = r.gateway.as_ref().expect("a gateway").header_compression;
    let s = r.server.as_ref().expect("a server").header_compression;
    (g, s)
}

const ONE_PATH: &str = r#"
[[path]]
name = "a"
up = { rate_mbps = 10, delay_ms = 20 }
down = { rate_mbps = 10, delay_ms = 20 }
"#;

const BULK: &str = "[[workload]]\nkind = \"bulk\"";

/// On one clean path braid's goodput is bounded by the bytes each packet takes on the link;
/// compression takes 30 of the 40 inner header bytes off a full-size segment, about 2%.
#[test]
fn compression_raises_single_path_goodput_by_the_bytes_it_saves() {
    let on = report(ONE_PATH, true, BULK);
    let off = report(ONE_PATH, false, BULK);
    let (g, s) = hc(&on);
    assert!(s.compressed > 10_000, "{s:?}");
    // Packets sent while a context is being established: 171 of 17 358 before the paths'
    // congestion windows, 194 of 17 176 with them (the first round trips are paced).
    assert!(s.establishing < s.compressed / 50, "{s:?}");
    // All but what was still queued or in flight when the run ended.
    assert!(g.decompressed > s.compressed * 98 / 100, "{g:?} {s:?}");
    assert_eq!(
        g.unknown_context + g.failed + s.unknown_context + s.failed,
        0
    );
    // The acknowledgements are compressed too.
    assert!(g.compressed > s.compressed / 4, "{g:?}");
    assert_eq!(hc(&off).0, CompressStats::default());
    let (a, b) = (goodput(&on), goodput(&off));
    assert!(a > b * 1.015, "compressed {a:.3} Mbit/s, full {b:.3}");
}

/// Two paths of unequal delay, one lossy, many flows: packets of a flow arrive out of
/// order, are lost, recovered or skipped by the hole timeout, and contexts are reused.
/// No compressed packet ever reaches the receiver without its context.
#[test]
fn reordering_and_loss_never_lose_a_context() {
    let paths = r#"
[[path]]
name = "fast"
up = { rate_mbps = 10, delay_ms = 10, loss = { model = "bernoulli", p = 0.02 } }
down = { rate_mbps = 10, delay_ms = 10, loss = { model = "bernoulli", p = 0.02 } }
[[path]]
name = "slow"
up = { rate_mbps = 5, delay_ms = 80 }
down = { rate_mbps = 5, delay_ms = 80 }
"#;
    let workload = "[[workload]]\nkind = \"bulk\"\nflows = 8\n[[workload]]\nkind = \"web\"";
    let r = report(paths, true, workload);
    let (g, s) = hc(&r);
    assert!(s.compressed > 5_000 && g.compressed > 1_000, "{g:?} {s:?}");
    assert_eq!(g.unknown_context + s.unknown_context, 0, "{g:?} {s:?}");
    assert_eq!(g.failed + s.failed, 0, "{g:?} {s:?}");
}
