//! `osctp-fig7`: window advance by cumulative ack alone (CD-CWA) against by SACK as well
//! (SD+CD-CWA) on braid's multipath stream (oSCTP §IV-C2, Fig 7).
//!
//! Two 2 Mbit/s paths at 100 and 200 ms (one-way), no random loss, SD-FRT, a bulk transfer
//! without end. Under the paper's round-robin the short path's chunks arrive ahead of the
//! long path's earlier ones and are acknowledged by gap blocks, so under CD-CWA its window
//! grows only on the rarer SACKs that move the cumulative TSN. Shown under round-robin
//! (the paper's setting, the headline's) and braid's default scheduler. Headline:
//! SD+CD-CWA's goodput over CD-CWA's; paper about 1.4.

use serde_json::json;

use braid_core::stream::{StreamConfig, StreamScheduler, WindowAdvance};
use braid_sim::stream_world::StreamPath;

use crate::common::f;
use crate::osctp_stream::{bulk, ideal_mbps, run_many, BRAID_DEFAULTS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpFig7;

const SCHEDULERS: [(&str, Option<StreamScheduler>); 2] = [
    ("round-robin", Some(StreamScheduler::RoundRobin)),
    (BRAID_DEFAULTS, None),
];
const CWA: [(&str, WindowAdvance); 2] = [
    ("CD-CWA", WindowAdvance::CumulativeDriven),
    ("SD+CD-CWA", WindowAdvance::SackAndCumulativeDriven),
];

impl Bench for OsctpFig7 {
    fn name(&self) -> &'static str {
        "osctp-fig7"
    }

    fn summary(&self) -> &'static str {
        "the stream's CD-CWA vs SD+CD-CWA window advance over two 2 Mbit/s paths at 100 and 200 ms"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let lengths: &[f64] = if opts.quick {
            &[20.0, 60.0]
        } else {
            &[20.0, 60.0, 120.0]
        };
        let mut runs = Vec::new();
        for &secs in lengths {
            for (_, sched) in SCHEDULERS {
                for (_, cwa) in CWA {
                    let mut c = StreamConfig {
                        window_advance: cwa,
                        ..StreamConfig::default()
                    };
                    if let Some(s) = sched {
                        c.scheduler = s;
                    }
                    let paths = vec![
                        StreamPath::symmetric(2.0, 100.0),
                        StreamPath::symmetric(2.0, 200.0),
                    ];
                    runs.push(bulk(c, paths, secs, opts.seed));
                }
            }
        }
        let outcomes = run_many(opts, "osctp-fig7", runs)?;
        let ideal = ideal_mbps(4.0);
        let mut table = Table::new([
            "run",
            "scheduler",
            "CD-CWA Mbit/s",
            "SD+CD-CWA Mbit/s",
            "ratio",
        ]);
        let mut rows = Vec::new();
        let mut ratios = Vec::new();
        for (k, &secs) in lengths.iter().enumerate() {
            for (j, (s, _)) in SCHEDULERS.iter().enumerate() {
                let base = (k * SCHEDULERS.len() + j) * CWA.len();
                let (cd, sd) = (outcomes[base].mean_mbps(), outcomes[base + 1].mean_mbps());
                let ratio = sd / cd;
                if *s == "round-robin" {
                    ratios.push(ratio);
                }
                table.row([
                    format!("{secs} s"),
                    s.to_string(),
                    f(cd, 3),
                    f(sd, 3),
                    f(ratio, 3),
                ]);
                rows.push(json!({
                    "seconds": secs, "scheduler": s,
                    "cd_cwa_mbps": cd, "sd_cd_cwa_mbps": sd, "ratio": ratio,
                }));
            }
        }
        // The paper's trace is the start of a transfer: the shortest run under its
        // round-robin is the headline.
        let headline = ratios.first().copied().unwrap_or(f64::NAN);
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "ideal_mbps": ideal, "runs": rows }),
            headline: Headline::new(
                format!(
                    "SD+CD-CWA over CD-CWA goodput, round-robin, first {} s",
                    lengths[0]
                ),
                headline,
                Some(1.4),
                1.4,
                true,
            ),
            notes: vec![format!(
                "bulk from a cold start, SD-FRT; ideal {} Mbit/s",
                f(ideal, 3)
            )],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20 s under round-robin: advancing on SACKs as well grows the short path's window.
    #[test]
    fn sd_cd_cwa_beats_cd_cwa_under_round_robin() {
        let go = |cwa| {
            let c = StreamConfig {
                window_advance: cwa,
                scheduler: StreamScheduler::RoundRobin,
                ..StreamConfig::default()
            };
            let paths = vec![
                StreamPath::symmetric(2.0, 100.0),
                StreamPath::symmetric(2.0, 200.0),
            ];
            let o = braid_sim::stream_world::run_stream(&bulk(c, paths, 20.0, 1)).unwrap();
            assert!(o.intact);
            o.mean_mbps()
        };
        let cd = go(WindowAdvance::CumulativeDriven);
        let sd = go(WindowAdvance::SackAndCumulativeDriven);
        println!("fig7 20 s: CD-CWA {cd:.3}, SD+CD-CWA {sd:.3} Mbit/s");
        assert!(sd > 1.03 * cd, "{sd} {cd}");
    }
}
