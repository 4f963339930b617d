//! `pluribus-fig15`: the benefit of delay-based path selection (PluriBus §6.5.1, Fig 15).
//!
//! Two lossless 1.5 Mbit/s links; one with a 150 ms RTT, the other from 150 down to 50 ms.
//! Two TCP flows, each fetching 10 KB, a new one starting as soon as one ends: a good case
//! for MinConnPath, which can put one flow on each link. Median flow completion time of
//! MinConnPath and of delay-based striping (no coding) per RTT difference. Paper: the ratio
//! reaches 2 at a 100 ms difference.

use serde_json::json;

use crate::common::{f, median_fct_ms, run_all, scenario, symmetric_path};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct PluribusFig15;

const DIFFS_MS: [f64; 5] = [0.0, 25.0, 50.0, 75.0, 100.0];
const SYSTEMS: [&str; 2] = ["min-conn-path", "delay-based"];

impl Bench for PluribusFig15 {
    fn name(&self) -> &'static str {
        "pluribus-fig15"
    }

    fn summary(&self) -> &'static str {
        "two 10 KB fetch loops over 1.5 Mbit/s links of 150 ms and 150-50 ms RTT: MinConnPath vs delay-based"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 60.0 } else { 300.0 };
        let mut scenarios = Vec::new();
        for diff in DIFFS_MS {
            for system in SYSTEMS {
                let paths = symmetric_path("a", 1500.0, 75.0, "")
                    + &symmetric_path("b", 1500.0, (150.0 - diff) / 2.0, "");
                scenarios.push(scenario(
                    &format!("fig15-{system}-{diff}"),
                    duration,
                    opts.seed,
                    &format!("scheduler = \"{system}\""),
                    &paths,
                    "[[workload]]\nkind = \"fetch-loop\"\nconcurrency = 2\nsize_bytes = 10000\n",
                )?);
            }
        }
        let reports = run_all(opts, "fig15", scenarios)?;
        let mut table = Table::new([
            "RTT difference ms",
            "MinConnPath median ms",
            "delay-based median ms",
            "ratio",
            "ratio of means",
        ]);
        let mean = |r: &braid_sim::Report| {
            r.workloads
                .first()
                .and_then(|w| w.flows.as_ref())
                .map_or(f64::NAN, |f| f.fct_ms.mean)
        };
        let mut points = Vec::new();
        let mut headline = f64::NAN;
        for (k, diff) in DIFFS_MS.iter().enumerate() {
            let mcp = median_fct_ms(&reports[2 * k]);
            let db = median_fct_ms(&reports[2 * k + 1]);
            let ratio = mcp / db;
            if *diff == 100.0 {
                headline = ratio;
            }
            let mean_ratio = mean(&reports[2 * k]) / mean(&reports[2 * k + 1]);
            table.row([
                f(*diff, 0),
                f(mcp, 0),
                f(db, 0),
                f(ratio, 2),
                f(mean_ratio, 2),
            ]);
            points.push(json!({
                "rtt_difference_ms": diff,
                "min_conn_path_median_fct_ms": mcp,
                "delay_based_median_fct_ms": db,
                "ratio": ratio,
                "ratio_of_means": mean_ratio,
                "min_conn_path_flows": reports[2 * k].workloads[0].flows,
                "delay_based_flows": reports[2 * k + 1].workloads[0].flows,
            }));
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems: json!({ "points": points }),
            headline: Headline::new(
                "median FCT ratio MinConnPath / delay-based at 100 ms RTT difference",
                headline,
                Some(2.0),
                2.2,
                true,
            ),
            notes: vec![
                format!("{duration} s per point; no loss, no coding"),
                "MinConnPath's completion times are bimodal (flows on the fast link, flows on \
                 the slow one) and it balances flow counts, so its median sits at the boundary \
                 between the modes and jumps between them from run to run; the ratio of means \
                 is the steadier comparison"
                    .into(),
            ],
            table,
        })
    }
}
