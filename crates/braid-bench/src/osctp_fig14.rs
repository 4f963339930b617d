//! `osctp-fig14`: average goodput when one path fails for a while and comes back (oSCTP
//! §IV-E, Fig 14), on braid's multipath stream.
//!
//! Two 2 Mbit/s paths at 50 ms (one-way). Path 2 goes down at about 60 s (60 s plus a
//! seeded fraction of a second, so that repetitions differ in phase) for 5 to 60 s, then
//! stays up for 60 s more; each duration is repeated with ten seeds (one when quick). The
//! ideal is both paths' capacity while both are up and one path's while one is down, less
//! chunk, UDP and IP headers. Headline: braid's defaults' mean goodput as a fraction of
//! the ideal, the worst duration; stock SCTP's failover beside it. Paper: about 0.95.

use serde_json::json;

use braid_core::stream::{Failover, StreamConfig};
use braid_sim::stream_world::{StreamPath, StreamRun};
use braid_sim::Rng;

use crate::common::f;
use crate::osctp_stream::{bulk, ideal_mbps, run_many, stock_sctp, BRAID_DEFAULTS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpFig14;

const SYSTEMS: [(&str, Failover); 2] = [
    (BRAID_DEFAULTS, Failover::Osctp),
    ("stock SCTP", Failover::STOCK),
];

/// Path 2 down at 60 s plus a fraction of a second drawn from `seed`, for `down_s`; the run
/// ends 60 s after it is back. Returns the run and the failure time.
pub fn fig14_run(failover: Failover, down_s: f64, seed: u64) -> (StreamRun, f64) {
    let at = 60.0 + Rng::child(seed, "osctp-fig14-phase").f64();
    let run = bulk(
        stock_sctp(failover, StreamConfig::default()),
        vec![
            StreamPath::symmetric(2.0, 50.0),
            StreamPath::symmetric(2.0, 50.0).down(at, down_s),
        ],
        at + down_s + 60.0,
        seed,
    );
    (run, at)
}

/// Mean goodput over the ideal of a run with path 2 down for `down_s` from `at`.
pub fn fraction_of_ideal(o: &braid_sim::stream_world::StreamOutcome, down_s: f64) -> f64 {
    let total = o.duration.as_secs_f64();
    let ideal_bytes = (ideal_mbps(4.0) * (total - down_s) + ideal_mbps(2.0) * down_s) * 1e6 / 8.0;
    o.bytes_read as f64 / ideal_bytes
}

impl Bench for OsctpFig14 {
    fn name(&self) -> &'static str {
        "osctp-fig14"
    }

    fn summary(&self) -> &'static str {
        "the stream's mean goodput when one of two paths is down for 5-60 s and comes back, vs ideal"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let downs: &[f64] = if opts.quick {
            &[5.0, 30.0, 60.0]
        } else {
            &[5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
        };
        let reps: u64 = if opts.quick { 1 } else { 10 };
        let mut runs = Vec::new();
        for &d in downs {
            for (_, fo) in SYSTEMS {
                for r in 0..reps {
                    runs.push(fig14_run(fo, d, opts.seed + r).0);
                }
            }
        }
        let outcomes = run_many(opts, "osctp-fig14", runs)?;
        let mut columns = vec!["down for".to_owned()];
        columns.extend(SYSTEMS.iter().map(|(s, _)| format!("{s} fraction")));
        columns.push("revivals (braid)".to_owned());
        let mut table = Table::new(columns);
        let mut worst = [f64::INFINITY; SYSTEMS.len()];
        let mut rows = Vec::new();
        let per = SYSTEMS.len() * reps as usize;
        for (k, &d) in downs.iter().enumerate() {
            let mut cells = vec![format!("{d} s")];
            let mut by = serde_json::Map::new();
            for (j, (name, _)) in SYSTEMS.iter().enumerate() {
                let base = k * per + j * reps as usize;
                let fr: Vec<f64> = outcomes[base..base + reps as usize]
                    .iter()
                    .map(|o| fraction_of_ideal(o, d))
                    .collect();
                let mean = fr.iter().sum::<f64>() / fr.len() as f64;
                worst[j] = worst[j].min(mean);
                cells.push(f(mean, 3));
                by.insert(
                    name.to_string(),
                    json!({ "mean_fraction": mean, "runs": fr }),
                );
            }
            let revivals: u64 = outcomes[k * per..k * per + reps as usize]
                .iter()
                .map(|o| o.sender.revivals)
                .sum();
            cells.push(revivals.to_string());
            table.row(cells);
            rows.push(json!({ "down_s": d, "systems": by }));
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "points": rows, "repetitions": reps }),
            headline: Headline::new(
                "mean goodput over ideal with one path down for a while, worst duration, braid's defaults",
                worst[0],
                Some(0.95),
                0.98,
                true,
            )
            .with_baseline(SYSTEMS[1].0, worst[1]),
            notes: vec![format!(
                "path 2 down at 60 s + a seeded fraction of a second, then up for 60 s; the \
                 run from a cold start; {reps} repetitions per duration"
            )],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Path 2 down for 5 s and back: braid's stream keeps near the ideal, and above stock
    /// SCTP, whose failed path comes back only on a heartbeat 30 s later.
    #[test]
    fn a_path_down_for_a_while_costs_little() {
        let go = |fo| {
            let o = braid_sim::stream_world::run_stream(&fig14_run(fo, 5.0, 1).0).unwrap();
            assert!(o.intact);
            fraction_of_ideal(&o, 5.0)
        };
        let (osctp, stock) = (go(Failover::Osctp), go(Failover::STOCK));
        println!("fig14 5 s down: oSCTP {osctp:.3}, stock {stock:.3} of ideal");
        assert!(osctp > 0.95, "{osctp}");
        assert!(osctp > stock, "{osctp} {stock}");
    }
}
