//! `osctp-table1`: Strategy 1 over a cheap link with coverage gaps and a metered one
//! (oSCTP §V-B, Table I), for combined throughput targets of 2 Mbit/s, 900 and 600 kbit/s.
//!
//! The links are [`crate::hybrid_links`]'s. Per target: the download's average goodput,
//! how often the metered link was given a budget ("fired"), its share of the bytes
//! delivered, and its bytes against a hindsight oracle: in each second, the fewest
//! metered bytes that deliver the same total had the cheap link's capacity in that second
//! been known in advance (what the total exceeds the cheap capacity by). The metered bytes
//! are every byte sent on it (what the tariff charges), acknowledgements and heartbeats
//! included. Paper: 1.43/1.27/1.21 Mbit/s, fired 77/62/52%, share 37/26/19%.

use serde_json::json;

use crate::common::{bulk_mbps, f, run_all};
use crate::hybrid_links::{both_links, cheap_capacity_bytes, seconds, CHEAP_TRACE, METERED_KBPS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpTable1;

/// Targets, Mbit/s, with the paper's (goodput Mbit/s, fired, share).
const TARGETS: [(f64, f64, f64, f64); 3] = [
    (2.0, 1.43, 0.77, 0.37),
    (0.9, 1.27, 0.62, 0.26),
    (0.6, 1.21, 0.52, 0.19),
];
/// The headline's target, Mbit/s.
const HEADLINE_TARGET: f64 = 0.9;

/// One target's figures from a run's per-second log and the cheap link's capacity.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub fired: f64,
    pub share: f64,
    pub metered_bytes: f64,
    pub oracle_bytes: f64,
    /// Where the metered bytes above the oracle's went: seconds with no metered budget
    /// (heartbeats and path acks only), seconds at a coverage gap's edge (the cheap link
    /// lit in one of this second and the last and dark in the other), and the rest; and
    /// the metered bytes sent but not delivered.
    pub excess_unbudgeted: f64,
    pub excess_gap_edges: f64,
    pub excess_other: f64,
    pub metered_undelivered: f64,
}

/// The figures of `secs` against `capacity` (bytes per second); the first second, before
/// any prediction, is left out.
pub fn figures(secs: &[crate::hybrid_links::Second], capacity: &[f64]) -> Figures {
    let mut fig = Figures::default();
    let (mut fired, mut n, mut cheap, mut metered) = (0, 0, 0.0, 0.0);
    for (k, (s, c)) in secs.iter().zip(capacity).enumerate().skip(1) {
        n += 1;
        fired += usize::from(s.metered_budget > 0.0);
        cheap += s.cheap_delivered;
        metered += s.metered_delivered;
        fig.metered_bytes += s.metered_sent;
        let oracle = (s.cheap_delivered + s.metered_delivered - c).max(0.0);
        fig.oracle_bytes += oracle;
        let excess = s.metered_sent - oracle;
        let edge = (capacity[k - 1] > 0.0) != (*c > 0.0);
        if s.metered_budget <= 0.0 {
            fig.excess_unbudgeted += excess;
        } else if edge {
            fig.excess_gap_edges += excess;
        } else {
            fig.excess_other += excess;
        }
        fig.metered_undelivered += s.metered_sent - s.metered_delivered;
    }
    fig.fired = fired as f64 / n.max(1) as f64;
    fig.share = metered / (cheap + metered).max(1.0);
    fig
}

impl Bench for OsctpTable1 {
    fn name(&self) -> &'static str {
        "osctp-table1"
    }

    fn summary(&self) -> &'static str {
        "Strategy 1 over a cheap link with gaps and a metered one: goodput, metered use and share, against a hindsight oracle"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let scenarios = TARGETS
            .iter()
            .map(|t| both_links(&format!("table1-{}", t.0), opts.seed, opts.quick, Some(t.0)))
            .collect::<Result<Vec<_>, _>>()?;
        let reports = run_all(opts, "osctp-table1", scenarios)?;
        let capacity = cheap_capacity_bytes(opts.seed, opts.quick)?;
        let mut table = Table::new([
            "target",
            "goodput Mbit/s (paper)",
            "metered fired (paper)",
            "metered share (paper)",
            "metered MB",
            "oracle MB",
            "over oracle",
        ]);
        let mut rows = Vec::new();
        let mut headline = f64::NAN;
        for (t, r) in TARGETS.iter().zip(&reports) {
            let fig = figures(&seconds(r), &capacity);
            let ratio = fig.metered_bytes / fig.oracle_bytes;
            let goodput = bulk_mbps(r);
            if t.0 == HEADLINE_TARGET {
                headline = ratio;
            }
            table.row([
                format!("{} kbit/s", t.0 * 1e3),
                format!("{} ({})", f(goodput, 2), t.1),
                format!("{} ({})", f(fig.fired, 2), t.2),
                format!("{} ({})", f(fig.share, 2), t.3),
                f(fig.metered_bytes / 1e6, 2),
                f(fig.oracle_bytes / 1e6, 2),
                f(ratio, 3),
            ]);
            rows.push(json!({
                "target_mbps": t.0,
                "goodput_mbps": goodput, "paper_goodput_mbps": t.1,
                "fired": fig.fired, "paper_fired": t.2,
                "metered_share": fig.share, "paper_metered_share": t.3,
                "metered_bytes": fig.metered_bytes, "oracle_bytes": fig.oracle_bytes,
                "over_oracle": ratio,
                "excess_bytes": {
                    "unbudgeted_seconds": fig.excess_unbudgeted,
                    "gap_edges": fig.excess_gap_edges,
                    "other": fig.excess_other,
                },
                "metered_undelivered_bytes": fig.metered_undelivered,
            }));
        }
        let notes = vec![
            format!(
                "cheap link: {CHEAP_TRACE} with coverage gaps of 3-17 s (about 40% of the time, from the seed); metered link: {METERED_KBPS} kbit/s; bulk TCP download; Strategy 1 (log utility) with braid's predictor, 1 s intervals"
            ),
            "fired: share of intervals with a metered budget; share: metered bytes delivered over all delivered; metered MB: every byte sent on the metered link".into(),
            "oracle: per second, the total delivered less the cheap link's capacity in that second, known in advance".into(),
        ];
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems: json!({ "targets": rows }),
            headline: Headline::new(
                "metered bytes over the hindsight oracle's at 900 kbit/s",
                headline,
                None,
                1.05,
                false,
            ),
            headlines: Vec::new(),
            notes,
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hybrid_links::Second;

    #[test]
    fn the_oracle_takes_only_what_the_cheap_link_could_not() {
        let s = |cheap: f64, metered: f64, budget: f64| Second {
            cheap_delivered: cheap,
            metered_sent: metered,
            metered_delivered: metered,
            metered_budget: budget,
            ..Second::default()
        };
        // Second 0 is skipped; in second 1 the cheap link had room for 50 more bytes.
        let secs = [
            s(0.0, 99.0, 99.0),
            s(100.0, 100.0, 100.0),
            s(300.0, 0.0, 0.0),
        ];
        let fig = figures(&secs, &[0.0, 150.0, 300.0]);
        assert_eq!(fig.metered_bytes, 100.0);
        assert_eq!(fig.oracle_bytes, 50.0);
        assert_eq!(fig.fired, 0.5);
        assert_eq!(fig.share, 0.2);
    }
}
