//! `osctp-fig9`: schedulers against the ideal aggregate (oSCTP §IV-D, Fig 9).
//!
//! Bulk TCP through braid over two paths: (a) path 1 at 100 ms and 1 Mbit/s, path 2 at
//! 50 ms with 0.5 to 3 Mbit/s; (b) path 1 at 50 ms and 2 Mbit/s, path 2 at 1 Mbit/s with
//! 50 to 400 ms (one-way delays, as an emulator sets them). braid's defaults (the headline),
//! and round-robin, Lazy, Smallest-RTT (the paper's) and ADAS, each as a fraction of the
//! ideal: the summed capacity less braid's, UDP's, IP's and TCP's headers. Paper:
//! Smallest-RTT within 90% of ideal, round-robin bounded by twice the slower path.
//!
//! Every point runs 120 s, quick or not (quick runs fewer points). The ideal is a steady
//! rate and the inner TCP's start is not: Linux's HyStart leaves slow start once the first
//! queue in front of the fast path raises the RTT by an eighth, and Cubic then takes about
//! 8 s to grow the ~0.9 s × 3 Mbit/s window of panel b at 400 ms; in steady state each
//! loss at the sender's drop-tail holds the in-order stream for a second or two until the
//! retransmission lands. In 30 s runs that ramp and a stall at the end of the run weighed
//! four times as much: delay-based read 0.903 of ideal at 400 ms (0.917 at 200 ms) against
//! 0.97 over 120 s.

use serde_json::json;

use crate::common::{
    braid_tcp_ideal_mbps, bulk_mbps, engine_of, f, run_all, scenario, symmetric_path,
    BRAID_DEFAULTS,
};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpFig9;

/// braid's defaults first (their scheduler is delay-based), then the schedulers of the
/// paper's figure and PRISM's ADAS.
const SCHEDULERS: [&str; 5] = [
    BRAID_DEFAULTS,
    "round-robin",
    "lazy",
    "smallest-rtt",
    "adas",
];
/// The paper's own scheduler, reported beside the headline.
const PAPER: &str = "smallest-rtt";

/// (panel, path 1 kbit/s, path 1 delay, path 2 kbit/s, path 2 delay)
fn points(quick: bool) -> Vec<(&'static str, f64, f64, f64, f64)> {
    let rates: &[f64] = if quick {
        &[500.0, 1500.0, 3000.0]
    } else {
        &[500.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0]
    };
    let delays: &[f64] = if quick {
        &[50.0, 200.0, 400.0]
    } else {
        &[50.0, 100.0, 200.0, 300.0, 400.0]
    };
    let mut v: Vec<_> = rates
        .iter()
        .map(|&r| ("a", 1000.0, 100.0, r, 50.0))
        .collect();
    v.extend(delays.iter().map(|&d| ("b", 2000.0, 50.0, 1000.0, d)));
    v
}

impl Bench for OsctpFig9 {
    fn name(&self) -> &'static str {
        "osctp-fig9"
    }

    fn summary(&self) -> &'static str {
        "bulk TCP over two unequal paths: braid's defaults, round-robin, Lazy, Smallest-RTT, ADAS vs the ideal"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        // The same length as the full run: see the module documentation.
        let duration = 120.0;
        let pts = points(opts.quick);
        let mut scenarios = Vec::new();
        for &(panel, r1, d1, r2, d2) in &pts {
            for s in SCHEDULERS {
                let paths = symmetric_path("p1", r1, d1, "") + &symmetric_path("p2", r2, d2, "");
                scenarios.push(scenario(
                    &format!("osctp-{panel}-{r2}-{d2}-{s}"),
                    duration,
                    opts.seed,
                    &engine_of(s),
                    &paths,
                    "[[workload]]\nkind = \"bulk\"\n",
                )?);
            }
        }
        let mtu = scenarios.first().map_or(1400, |s| s.mtu);
        let reports = run_all(opts, "osctp-fig9", scenarios)?;
        let mut columns = vec![
            "panel".to_owned(),
            "path 2".to_owned(),
            "ideal Mbit/s".to_owned(),
        ];
        columns.extend(SCHEDULERS.iter().map(|s| s.to_string()));
        let mut table = Table::new(columns);
        let mut worst = [f64::INFINITY; SCHEDULERS.len()];
        let mut rows = Vec::new();
        for (k, &(panel, r1, _, r2, d2)) in pts.iter().enumerate() {
            let ideal = braid_tcp_ideal_mbps(r1 + r2, mtu);
            let mut cells = vec![
                panel.to_owned(),
                if panel == "a" {
                    format!("{} kbit/s", r2)
                } else {
                    format!("{} ms", d2)
                },
                f(ideal, 3),
            ];
            let mut fractions = serde_json::Map::new();
            for (j, s) in SCHEDULERS.iter().enumerate() {
                let fr = bulk_mbps(&reports[k * SCHEDULERS.len() + j]) / ideal;
                worst[j] = worst[j].min(fr);
                cells.push(f(fr, 3));
                fractions.insert(s.to_string(), json!(fr));
            }
            table.row(cells);
            rows.push(json!({
                "panel": panel, "path1_kbps": r1, "path2_kbps": r2, "path2_delay_ms": d2,
                "ideal_mbps": ideal, "fraction_of_ideal": fractions,
            }));
        }
        let worst_of = |name: &str| {
            SCHEDULERS
                .iter()
                .position(|s| *s == name)
                .map_or(f64::NAN, |j| worst[j])
        };
        let (braid, paper) = (worst_of(BRAID_DEFAULTS), worst_of(PAPER));
        let mut cells = vec!["worst".to_owned(), String::new(), String::new()];
        cells.extend(worst.iter().map(|w| f(*w, 3)));
        table.row(cells);
        let worst_by: serde_json::Map<_, _> = SCHEDULERS
            .iter()
            .zip(worst)
            .map(|(s, w)| (s.to_string(), json!(w)))
            .collect();
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({
                "points": rows,
                "worst_fraction": worst_by,
                "paper_algorithm": { "name": PAPER, "worst_fraction": paper },
            }),
            headline: Headline::new(
                format!(
                    "worst-case fraction of ideal, braid's defaults (the paper's Smallest-RTT: {})",
                    f(paper, 3)
                ),
                braid,
                Some(0.9),
                0.95,
                true,
            ),
            notes: vec![format!(
                "{duration} s of one bulk TCP download per point; ideal = summed capacity × \
                 TCP payload / wire bytes per packet"
            )],
            table,
        })
    }
}
