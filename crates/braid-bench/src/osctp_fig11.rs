//! `osctp-fig11`: a path failing under a bulk transfer on braid's multipath stream, oSCTP's
//! failover against stock SCTP's (oSCTP §IV-E1, Fig 11).
//!
//! Two 2 Mbit/s paths at 50 ms (one-way); path 2 goes down for good at 20 s. oSCTP fails a
//! path at its first retransmission timeout and moves its chunks to the live path at once;
//! stock SCTP fails it only after `path_max_retrans` backed-off timeouts, and in the
//! meantime keeps scheduling new chunks on it. Headline: recovery, the time from the
//! failure to the end of the stall it causes (the longest run of 10 ms bins with nothing
//! read that begins within a second of it), and until every 10 s from then on reads at
//! least 90% of the live path's capacity. Paper: at once, against about 60 s.

use std::time::Duration;

use serde_json::json;

use braid_core::stream::{Failover, StreamConfig};
use braid_sim::stream_world::{StreamOutcome, StreamPath};

use crate::common::f;
use crate::osctp_stream::{
    bulk, ideal_mbps, longest_stall_ms, recovery, run_many, stock_sctp, BRAID_DEFAULTS,
};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpFig11;

/// When path 2 fails, s.
pub const FAIL_AT_S: f64 = 20.0;
/// The share of the live path's capacity that counts as recovered, over windows of
/// `WINDOW`: long enough that the live path's own loss recoveries (stalls of about 350 ms
/// behind its drop-tail queue) do not count as not recovered.
pub const FLOOR: f64 = 0.9;
pub const WINDOW: Duration = Duration::from_secs(10);

const SYSTEMS: [(&str, Failover); 2] = [
    (BRAID_DEFAULTS, Failover::Osctp),
    ("stock SCTP", Failover::STOCK),
];

/// The run: two paths, path 2 down at `fail_at_s` until the end.
pub fn fig11_run(
    failover: Failover,
    fail_at_s: f64,
    secs: f64,
    seed: u64,
) -> braid_sim::stream_world::StreamRun {
    let mut r = bulk(
        stock_sctp(failover, StreamConfig::default()),
        vec![
            StreamPath::symmetric(2.0, 50.0),
            StreamPath::symmetric(2.0, 50.0).down(fail_at_s, 1e6),
        ],
        secs,
        seed,
    );
    r.bin = Duration::from_millis(10);
    r
}

/// Recovery after a failure at `fail_at_s`, ms (infinite if never).
pub fn recovery_ms(o: &StreamOutcome, fail_at_s: f64) -> f64 {
    recovery(
        o,
        Duration::from_secs_f64(fail_at_s),
        Duration::from_secs(1),
        WINDOW,
        FLOOR * ideal_mbps(2.0),
    )
    .map_or(f64::INFINITY, |d| d.as_secs_f64() * 1e3)
}

impl Bench for OsctpFig11 {
    fn name(&self) -> &'static str {
        "osctp-fig11"
    }

    fn summary(&self) -> &'static str {
        "the stream's recovery when one of two 2 Mbit/s paths fails: oSCTP failover vs stock SCTP"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        // Stock SCTP needs 1+2+4+8+16+32 s of timeouts at RTO.Min 1 s, and more from a
        // larger RTO: 100 s after the failure leave it room.
        let secs = FAIL_AT_S + 100.0;
        let seeds: Vec<u64> = if opts.quick {
            vec![opts.seed]
        } else {
            (0..5).map(|k| opts.seed + k).collect()
        };
        let mut runs = Vec::new();
        for &seed in &seeds {
            for (_, fo) in SYSTEMS {
                runs.push(fig11_run(fo, FAIL_AT_S, secs, seed));
            }
        }
        let outcomes = run_many(opts, "osctp-fig11", runs)?;
        let mut table = Table::new([
            "seed",
            "system",
            "recovery ms",
            "stall ms",
            "longest stall before ms",
            "Mbit/s 0-20 s",
            "Mbit/s 20-30 s",
            "Mbit/s 30-120 s",
            "timeouts",
        ]);
        let mut worst = [0.0f64; SYSTEMS.len()];
        // The longest failover stall per system: a lower bound where recovery never came.
        let mut stalls = [0.0f64; SYSTEMS.len()];
        let mut rows = Vec::new();
        for (k, &seed) in seeds.iter().enumerate() {
            for (j, (name, _)) in SYSTEMS.iter().enumerate() {
                let o = &outcomes[k * SYSTEMS.len() + j];
                let rec = recovery_ms(o, FAIL_AT_S);
                worst[j] = worst[j].max(rec);
                let s = |a: f64, b: f64| {
                    o.mbps_between(Duration::from_secs_f64(a), Duration::from_secs_f64(b))
                };
                let (before, just, after) = (
                    s(0.0, FAIL_AT_S),
                    s(FAIL_AT_S, FAIL_AT_S + 10.0),
                    s(FAIL_AT_S + 10.0, secs),
                );
                let fail = Duration::from_secs_f64(FAIL_AT_S);
                let stall = longest_stall_ms(o, fail, fail + Duration::from_secs(1));
                let stall_before = longest_stall_ms(o, Duration::from_secs(5), fail);
                stalls[j] = stalls[j].max(stall);
                table.row([
                    seed.to_string(),
                    name.to_string(),
                    f(rec, 0),
                    f(stall, 0),
                    f(stall_before, 0),
                    f(before, 3),
                    f(just, 3),
                    f(after, 3),
                    o.sender.timeouts.to_string(),
                ]);
                let per_second: Vec<f64> = (0..secs as u64)
                    .map(|t| s(t as f64, t as f64 + 1.0))
                    .collect();
                rows.push(json!({
                    "seed": seed, "system": name,
                    "recovery_ms": rec.is_finite().then_some(rec),
                    "stall_ms": stall, "longest_stall_before_ms": stall_before,
                    "mbps_per_second": per_second,
                    "timeouts": o.sender.timeouts, "failures": o.sender.failures,
                }));
            }
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "runs": rows, "live_path_ideal_mbps": ideal_mbps(2.0) }),
            headline: Headline::new(
                "recovery after one of two paths fails, ms, braid's defaults (oSCTP failover)",
                worst[0],
                None,
                300.0,
                false,
            )
            .with_baseline(
                SYSTEMS[1].0,
                if worst[1].is_finite() {
                    worst[1]
                } else {
                    stalls[1]
                },
            ),
            notes: vec![format!(
                "path 2 down at {FAIL_AT_S} s for good; recovered = the stall over and every \
                 10 s window after reads >= {FLOOR} × {} Mbit/s; worst over {} seed(s); a \
                 system that never recovers shows its stall beside the headline",
                f(ideal_mbps(2.0), 3),
                seeds.len()
            )],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Path 2 dies at 5 s: oSCTP's failover is back at the live path's rate within a
    /// second and a half; stock SCTP is still retrying 20 s later.
    #[test]
    fn osctp_failover_recovers_where_stock_sctp_stalls() {
        let go = |fo| {
            let o = braid_sim::stream_world::run_stream(&fig11_run(fo, 5.0, 30.0, 1)).unwrap();
            assert!(o.intact);
            recovery_ms(&o, 5.0)
        };
        let (osctp, stock) = (go(Failover::Osctp), go(Failover::STOCK));
        println!("fig11: recovery oSCTP {osctp} ms, stock {stock} ms");
        assert!(osctp < 1500.0, "{osctp}");
        assert!(stock > 20_000.0, "{stock}");
    }
}
