//! `prism-fig9` (PRISM §8.3.2, Figure 9): striping under rate and delay fluctuation. Three
//! community members of 600, 900 and 1200 kbit/s; on/off background traffic of 400 kbit/s
//! on the first member's downlink and of 800 kbit/s on the third's, in bursts of a
//! Pareto-distributed length (the x axis: its mean) separated by 1 s of idle time (the
//! simulator's `cross_traffic`). One bulk TCP download per run, RPC on (`reordering =
//! "rpc"`, TCP-PRISM at the sender) as in the paper, under each scheduler of the figure:
//! ADAS, WRR, RR, random, hRTT-only and U-only. braid's defaults (its resequencer and
//! delay-based scheduler) run beside them on the same links and background traffic.
//!
//! The paper does not give the members' delays; the links are 60 ms one way, as in
//! `prism-fig8`. Every system sees the same bursts: a link's background traffic is drawn
//! from the link's own generator, seeded by the scenario's seed and the link.

use serde_json::json;

use crate::common::{
    braid_tcp_ideal_mbps, bulk_mbps, f, link, run_all, scenario, BRAID_DEFAULTS, PACKET_TCP,
};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct PrismFig9;

/// Members' rates (kbit/s) and the background rate on each member's downlink.
const MEMBERS: [(f64, Option<f64>); 3] =
    [(600.0, Some(400.0)), (900.0, None), (1200.0, Some(800.0))];
const DELAY_MS: f64 = 60.0;

/// The paper's schedulers, RPC and TCP-PRISM on; the first is the headline's.
const PAPER_SCHEDULERS: [(&str, &str); 6] = [
    ("adas", "adas"),
    ("wrr", "weighted-round-robin"),
    ("rr", "round-robin"),
    ("random", "random"),
    ("hrtt-only", "hrtt-only"),
    ("u-only", "utilization-only"),
];

fn paths(burst_s: f64) -> String {
    let mut out = String::new();
    for (i, (rate, cross)) in MEMBERS.iter().enumerate() {
        let extra = match cross {
            Some(c) if burst_s > 0.0 => {
                format!("cross_traffic = {{ rate_kbps = {c}, burst_s = {burst_s}, idle_s = 1 }}")
            }
            _ => String::new(),
        };
        out += &format!(
            "[[path]]\nname = \"m{i}\"\nup = {}\ndown = {}\n",
            link(*rate, DELAY_MS, ""),
            link(*rate, DELAY_MS, &extra)
        );
    }
    out
}

impl Bench for PrismFig9 {
    fn name(&self) -> &'static str {
        "prism-fig9"
    }

    fn summary(&self) -> &'static str {
        "bulk TCP over three members with on/off Pareto background traffic: ADAS vs WRR, RR, random, hRTT-only, U-only (RPC on), braid's defaults beside"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 120.0 } else { 600.0 };
        let bursts: &[f64] = if opts.quick {
            &[0.0, 2.0, 10.0]
        } else {
            &[0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        };
        let mut systems: Vec<(&str, String, &str)> = PAPER_SCHEDULERS
            .iter()
            .map(|&(name, sched)| {
                (
                    name,
                    format!("scheduler = \"{sched}\"\nreordering = \"rpc\"\n{PACKET_TCP}\n"),
                    "tcp_cc = \"prism\"\n",
                )
            })
            .collect();
        systems.push((BRAID_DEFAULTS, String::new(), ""));
        let mut scenarios = Vec::new();
        for &b in bursts {
            for (name, engine, bulk) in &systems {
                scenarios.push(scenario(
                    &format!("prism9-{b}-{name}"),
                    duration,
                    opts.seed,
                    engine,
                    &paths(b),
                    &format!("[[workload]]\nkind = \"bulk\"\n{bulk}"),
                )?);
            }
        }
        let mtu = scenarios.first().map_or(1400, |s| s.mtu);
        let reports = run_all(opts, "prism-fig9", scenarios)?;
        let mut columns = vec!["burst s".to_owned()];
        columns.extend(systems.iter().map(|s| s.0.to_owned()));
        let mut table = Table::new(columns);
        let mut rows = Vec::new();
        let mut last = Vec::new();
        for (k, &b) in bursts.iter().enumerate() {
            let goodputs: Vec<f64> = (0..systems.len())
                .map(|j| bulk_mbps(&reports[k * systems.len() + j]))
                .collect();
            let mut cells = vec![f(b, 0)];
            cells.extend(goodputs.iter().map(|g| f(*g, 3)));
            table.row(cells);
            let by: serde_json::Map<_, _> = (systems.iter().zip(&goodputs))
                .map(|(s, g)| (s.0.to_owned(), json!(g)))
                .collect();
            // What the background left of the members' downlinks, in ADAS's run: their
            // capacity less the background's packets that took it (offered, not dropped),
            // at the TCP payload per braid datagram of `braid_tcp_ideal_mbps`.
            let r = &reports[k * systems.len()];
            let cross_kbps: f64 = (r.paths.iter())
                .map(|p| {
                    (p.down.cross_packets_offered - p.down.cross_packets_dropped) as f64
                        * 1500.0
                        * 8.0
                        / duration
                        / 1e3
                })
                .sum();
            let total: f64 = MEMBERS.iter().map(|m| m.0).sum();
            let left = braid_tcp_ideal_mbps(total - cross_kbps, mtu);
            rows.push(json!({
                "burst_s": b,
                "goodput_mbps": by,
                "background_kbps": cross_kbps,
                "left_mbps": left,
            }));
            last = goodputs;
        }
        let adas = last[0];
        let (best_name, best) = (1..PAPER_SCHEDULERS.len())
            .map(|j| (PAPER_SCHEDULERS[j].0, last[j]))
            .fold(("-", f64::NAN), |a, b| {
                if b.1 > a.1 || a.1.is_nan() {
                    b
                } else {
                    a
                }
            });
        let braid = last[systems.len() - 1];
        let left = rows
            .last()
            .and_then(|r| r["left_mbps"].as_f64())
            .unwrap_or(f64::NAN);
        let longest = bursts[bursts.len() - 1];
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({
                "members_kbps": MEMBERS.iter().map(|m| m.0).collect::<Vec<_>>(),
                "points": rows,
                "best_other": { "name": best_name, "goodput_mbps": best },
                "braid_over_adas": braid / adas,
                "at_longest": { "left_mbps": left, "adas_of_left": adas / left, "braid_of_left": braid / left },
            }),
            headline: Headline::new(
                format!(
                    "ADAS over the best other scheduler ({best_name}) at {longest:.0} s bursts, \
                     RPC on (braid's defaults: {} of ADAS)",
                    f(braid / adas, 3)
                ),
                adas / best,
                Some(1.12),
                1.2,
                true,
            ),
            notes: vec![
                format!(
                    "{duration} s of one bulk TCP download per run; members 600, 900, 1200 \
                     kbit/s, {DELAY_MS} ms one way; background 400 kbit/s on the first's \
                     downlink and 800 on the third's, Pareto bursts (shape 1.5) of the mean \
                     in the first column, 1 s idle"
                ),
                "the paper's systems run RPC with TCP-PRISM over braid's default loss \
                 recovery, as prism-fig6a/6b/11 do; braid's defaults use its resequencer"
                    .to_owned(),
                "WRR weighs the members by braid's learned capacity estimates, which follow the \
                 background; a WRR of fixed weights, as the paper's, would be weaker"
                    .to_owned(),
                format!(
                    "at {longest:.0} s bursts the background left {} Mbit/s of TCP goodput: \
                     ADAS reached {}, braid's defaults {}",
                    f(left, 3),
                    f(adas / left, 3),
                    f(braid / left, 3)
                ),
            ],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figure's shape on the quick run (seed 1, deterministic): the background takes
    /// goodput from every scheduler, the schedulers that follow the links (ADAS, braid's
    /// defaults) keep more of it than the blind ones (RR, random), and braid's defaults
    /// carry most of what the background left. "Left" is the capacity less the
    /// background's rate at the tunnel's overhead; split-TCP's stream (the default) has
    /// less overhead per byte, and its loss-based windows take queue space from the
    /// unresponsive background, whose datagrams the full queues then drop: 1.11 of it.
    #[test]
    fn fluctuation_hurts_the_blind_schedulers_most() {
        let mut opts = Options {
            quick: true,
            seed: 1,
            trace_offset_s: 0.0,
            progress: None,
        };
        let r = PrismFig9.run(&mut opts).unwrap();
        let points = r.systems["points"].as_array().unwrap();
        let g = |k: usize, s: &str| points[k]["goodput_mbps"][s].as_f64().unwrap();
        let last = points.len() - 1;
        for s in ["adas", "wrr", "rr", "random", "u-only", BRAID_DEFAULTS] {
            assert!(g(last, s) < g(0, s), "{s}: {points:?}");
        }
        for s in ["adas", BRAID_DEFAULTS] {
            assert!(
                g(last, s) > 1.3 * g(last, "rr").max(g(last, "random")),
                "{s}"
            );
        }
        let braid_of_left = r.systems["at_longest"]["braid_of_left"].as_f64().unwrap();
        assert!(
            braid_of_left > 0.8 && braid_of_left <= 1.2,
            "{braid_of_left}"
        );
    }
}
