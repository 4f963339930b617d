//! `osctp-fig16`: the scheduler's error under Strategy 1 (oSCTP §V-B, Fig 16), on
//! [`crate::hybrid_links`]'s links, for targets of 2 Mbit/s, 900 and 600 kbit/s.
//!
//! Per interval, normalized by the target's bytes per interval: (a) the cheap link's
//! predicted less its delivered throughput; (b) the bytes the metered link carried less
//! those the model asked of it (its budget); (c) as (b), but zero where the metered link
//! was given a budget and the total fell short of the target (the network lacked the
//! capacity: not the scheduler's error, as the paper counts it). Paper: about 90% of the
//! intervals within ±0.2 in (c).

use serde_json::json;

use crate::common::{f, run_all};
use crate::hybrid_links::{both_links, seconds, Second};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpFig16;

const TARGETS_MBPS: [f64; 3] = [2.0, 0.9, 0.6];
/// Panel c's band.
const BAND: f64 = 0.2;

/// Panels a, b and c of one run, one value per interval (the first left out: nothing was
/// predicted or asked before it).
pub fn panels(secs: &[Second], target_mbps: f64) -> [Vec<f64>; 3] {
    let norm = target_mbps * 1e6 / 8.0;
    let mut out = [Vec::new(), Vec::new(), Vec::new()];
    for s in secs.iter().skip(1) {
        out[0].push((s.cheap_predicted_bps / 8.0 - s.cheap_delivered) / norm);
        let b = (s.metered_sent - s.metered_budget) / norm;
        out[1].push(b);
        let total = s.cheap_delivered + s.metered_delivered;
        let short = s.metered_budget > 0.0 && total < norm;
        out[2].push(if short { 0.0 } else { b });
    }
    out
}

fn within(v: &[f64], band: f64) -> f64 {
    v.iter().filter(|x| x.abs() <= band).count() as f64 / v.len().max(1) as f64
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    braid_sim::metrics::quantile_sorted(&s, q)
}

impl Bench for OsctpFig16 {
    fn name(&self) -> &'static str {
        "osctp-fig16"
    }

    fn summary(&self) -> &'static str {
        "Strategy 1's prediction and scheduling error per interval against the model's budget"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let scenarios = TARGETS_MBPS
            .iter()
            .map(|&t| both_links(&format!("fig16-{t}"), opts.seed, opts.quick, Some(t)))
            .collect::<Result<Vec<_>, _>>()?;
        let reports = run_all(opts, "osctp-fig16", scenarios)?;
        let mut table = Table::new(["target", "panel", "p10", "p50", "p90", "within ±0.2"]);
        let mut rows = Vec::new();
        let mut pooled_c = Vec::new();
        for (&t, r) in TARGETS_MBPS.iter().zip(&reports) {
            let p = panels(&seconds(r), t);
            let mut by_panel = serde_json::Map::new();
            for (name, v) in ["a", "b", "c"].iter().zip(&p) {
                table.row([
                    format!("{} kbit/s", t * 1e3),
                    (*name).to_owned(),
                    f(quantile(v, 0.1), 3),
                    f(quantile(v, 0.5), 3),
                    f(quantile(v, 0.9), 3),
                    f(within(v, BAND), 3),
                ]);
                by_panel.insert(
                    (*name).to_owned(),
                    json!({
                        "p10": quantile(v, 0.1), "p50": quantile(v, 0.5),
                        "p90": quantile(v, 0.9), "within_0_2": within(v, BAND),
                    }),
                );
            }
            pooled_c.extend_from_slice(&p[2]);
            rows.push(json!({ "target_mbps": t, "intervals": p[2].len(), "panels": by_panel }));
        }
        let headline = within(&pooled_c, BAND);
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems: json!({ "targets": rows }),
            headline: Headline::new(
                "share of intervals within ±0.2 of the target in panel c (three targets pooled)",
                headline,
                Some(0.9),
                0.95,
                true,
            ),
            headlines: Vec::new(),
            notes: vec![
                "a: (predicted - delivered cheap bytes) / target bytes per interval; b: (metered bytes sent - its budget) / target bytes; c: b, zero where the metered link fired and the total fell short of the target".into(),
                "links and workload as osctp-table1".into(),
            ],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortfall_for_want_of_capacity_is_not_an_error() {
        let s = |budget: f64, sent: f64, cheap: f64| Second {
            cheap_delivered: cheap,
            cheap_predicted_bps: 8.0 * cheap,
            metered_sent: sent,
            metered_delivered: sent,
            metered_budget: budget,
        };
        // 1 Mbit/s target: 125 000 bytes per interval.
        let secs = [
            Second::default(),
            s(100_000.0, 50_000.0, 25_000.0),
            s(0.0, 25_000.0, 200_000.0),
        ];
        let [a, b, c] = panels(&secs, 1.0);
        assert_eq!(a, vec![0.0, 0.0]);
        assert_eq!(b, vec![-0.4, 0.2]);
        assert_eq!(c, vec![0.0, 0.2]);
        assert_eq!(within(&c, 0.2), 1.0);
    }
}
