//! `osctp-fig13`: the path carrying the acknowledgements fails (oSCTP §IV-E2, Fig 13).
//!
//! Two 2 Mbit/s paths at 50 ms (one-way); path 2 goes down for good at 10 s, both ways.
//! braid's receiver sends each SACK on the path the latest chunk arrived on (oSCTP's
//! choice of source address), so its acknowledgements move with the data; stock SCTP
//! leaves them where the IP layer put them, here path 2. Headline: goodput in the 10 s
//! after the failure as a fraction of the live path's capacity (less headers).

use std::time::Duration;

use serde_json::json;

use braid_core::stream::{AckPath, Failover, ReceiverConfig, StreamConfig};
use braid_sim::stream_world::{StreamPath, StreamRun};

use crate::common::f;
use crate::osctp_stream::{bulk, ideal_mbps, run_many, stock_sctp, BRAID_DEFAULTS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpFig13;

/// When the acknowledgement path fails, s.
pub const FAIL_AT_S: f64 = 10.0;

/// braid's defaults, or stock SCTP: fixed ACK path 2 and stock failover.
pub fn fig13_run(stock: bool, secs: f64, seed: u64) -> StreamRun {
    let mut sender = StreamConfig::default();
    let mut receiver = ReceiverConfig::default();
    if stock {
        sender = stock_sctp(Failover::STOCK, sender);
        receiver.ack_path = AckPath::Fixed(1);
    }
    let mut r = bulk(
        sender,
        vec![
            StreamPath::symmetric(2.0, 50.0),
            StreamPath::symmetric(2.0, 50.0).down(FAIL_AT_S, 1e6),
        ],
        secs,
        seed,
    );
    r.receiver = receiver;
    r
}

/// Goodput in the 10 s after the failure over the live path's ideal.
pub fn after_fraction(o: &braid_sim::stream_world::StreamOutcome) -> f64 {
    o.mbps_between(
        Duration::from_secs_f64(FAIL_AT_S),
        Duration::from_secs_f64(FAIL_AT_S + 10.0),
    ) / ideal_mbps(2.0)
}

impl Bench for OsctpFig13 {
    fn name(&self) -> &'static str {
        "osctp-fig13"
    }

    fn summary(&self) -> &'static str {
        "the stream when the path carrying its ACKs fails: ACKs on the latest arrival path vs a fixed one"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let secs = FAIL_AT_S + if opts.quick { 20.0 } else { 60.0 };
        let systems = [(BRAID_DEFAULTS, false), ("stock SCTP", true)];
        let runs = systems
            .iter()
            .map(|&(_, stock)| fig13_run(stock, secs, opts.seed))
            .collect();
        let outcomes = run_many(opts, "osctp-fig13", runs)?;
        let mut table = Table::new([
            "system",
            "Mbit/s before",
            "Mbit/s 10 s after",
            "fraction of live path",
            "SACKs sent",
        ]);
        let mut rows = Vec::new();
        let mut fr = [0.0; 2];
        for (j, (name, _)) in systems.iter().enumerate() {
            let o = &outcomes[j];
            fr[j] = after_fraction(o);
            let before = o.mbps_between(Duration::ZERO, Duration::from_secs_f64(FAIL_AT_S));
            table.row([
                name.to_string(),
                f(before, 3),
                f(fr[j] * ideal_mbps(2.0), 3),
                f(fr[j], 3),
                o.receiver.sacks.to_string(),
            ]);
            let per_second: Vec<f64> = (0..secs as u64)
                .map(|t| o.mbps_between(Duration::from_secs(t), Duration::from_secs(t + 1)))
                .collect();
            rows.push(json!({
                "system": name, "mbps_before": before, "fraction_after": fr[j],
                "mbps_per_second": per_second,
            }));
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "runs": rows, "live_path_ideal_mbps": ideal_mbps(2.0) }),
            headline: Headline::new(
                "goodput in the 10 s after the ACK path fails, fraction of the live path, braid's defaults",
                fr[0],
                None,
                0.95,
                true,
            )
            .with_baseline(systems[1].0, fr[1]),
            notes: vec![format!(
                "path 2 (stock SCTP's ACK path) down at {FAIL_AT_S} s for good; live path \
                 ideal {} Mbit/s",
                f(ideal_mbps(2.0), 3)
            )],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ACK path dies at 10 s: acknowledging on the latest arrival path keeps the live
    /// path full; a fixed ACK path reads nothing after.
    #[test]
    fn acks_follow_the_data_when_their_path_fails() {
        let go = |stock| {
            let o = braid_sim::stream_world::run_stream(&fig13_run(stock, 20.0, 1)).unwrap();
            assert!(o.intact);
            after_fraction(&o)
        };
        let (latest, fixed) = (go(false), go(true));
        println!("fig13: latest {latest:.3}, fixed {fixed:.3} of the live path");
        assert!(latest > 0.9, "{latest}");
        assert!(fixed < 0.1, "{fixed}");
    }
}
