//! `udp-aggregation`: constant-bit-rate UDP offered at exactly the summed capacity of 2 to 7
//! heterogeneous paths (1-10 Mbit/s, 20-200 ms one way, drawn with the seed), less braid's
//! header overhead; the delivered fraction of braid's defaults (the headline) and of each
//! other scheduler. BaPu (§7) reports 95% of the aggregate for UDP.

use serde_json::json;

use crate::common::{engine_of, f, run_all, scenario, symmetric_path, BRAID_DEFAULTS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct UdpAggregation;

/// braid's defaults first (their scheduler is delay-based), then the other schedulers.
const SYSTEMS: [&str; 5] = [
    BRAID_DEFAULTS,
    "round-robin",
    "weighted-round-robin",
    "smallest-rtt",
    "adas",
];
const PAYLOAD: f64 = 1200.0;

impl Bench for UdpAggregation {
    fn name(&self) -> &'static str {
        "udp-aggregation"
    }

    fn summary(&self) -> &'static str {
        "UDP CBR at exactly the summed capacity of 2-7 heterogeneous paths: delivered fraction, braid's defaults and each scheduler"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 20.0 } else { 60.0 };
        let mut rng = braid_sim::Rng::child(opts.seed, "udp-aggregation-paths");
        let links: Vec<(f64, f64)> = (0..7)
            .map(|_| {
                let rate = (1000.0 + 9000.0 * rng.f64()).round();
                let delay = (20.0 + 180.0 * rng.f64()).round();
                (rate, delay)
            })
            .collect();
        // Bytes on a link per UDP payload: IPv4 + UDP inside, braid's header (with its
        // ack), UDP + IPv4 outside.
        let wire = PAYLOAD
            + 28.0
            + (braid_wire::HEADER_LEN + 4 + braid_wire::DATA_FIXED_LEN) as f64
            + 28.0;
        let ns: Vec<usize> = (2..=7).collect();
        let mut scenarios = Vec::new();
        let mut offered = Vec::new();
        for &n in &ns {
            let cap: f64 = links[..n].iter().map(|l| l.0).sum();
            let rate_kbps = cap * PAYLOAD / wire;
            offered.push(rate_kbps / 1000.0);
            let paths: String = links[..n]
                .iter()
                .enumerate()
                .map(|(i, &(r, d))| symmetric_path(&format!("p{i}"), r, d, ""))
                .collect();
            for s in SYSTEMS {
                scenarios.push(scenario(
                    &format!("udp-{n}-{s}"),
                    duration,
                    opts.seed,
                    &engine_of(s),
                    &paths,
                    &format!(
                        "[[workload]]\nkind = \"udp-cbr\"\nrate_kbps = {rate_kbps}\npacket_bytes = {PAYLOAD}\n"
                    ),
                )?);
            }
        }
        let reports = run_all(opts, "udp-aggregation", scenarios)?;
        let mut columns = vec!["paths".to_owned(), "offered Mbit/s".to_owned()];
        columns.extend(SYSTEMS.iter().map(|s| s.to_string()));
        let mut table = Table::new(columns);
        let mut rows = Vec::new();
        let mut braid7 = f64::NAN;
        for (k, &n) in ns.iter().enumerate() {
            let mut cells = vec![n.to_string(), f(offered[k], 2)];
            let mut fr = serde_json::Map::new();
            for (j, s) in SYSTEMS.iter().enumerate() {
                let r = &reports[k * SYSTEMS.len() + j];
                let u = r.workloads.first().and_then(|w| w.udp.clone());
                // Loss over the sequence numbers up to the highest received: packets still
                // in flight when the run ends are not counted as lost.
                let delivered = u.map_or(0.0, |u| 1.0 - u.loss_rate);
                cells.push(f(delivered, 4));
                fr.insert(s.to_string(), json!(delivered));
                if n == 7 && *s == BRAID_DEFAULTS {
                    braid7 = delivered;
                }
            }
            table.row(cells);
            rows.push(json!({ "paths": n, "offered_mbps": offered[k], "delivered_fraction": fr }));
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({
                "links": links.iter().map(|(r, d)| json!({"kbps": r, "delay_ms": d})).collect::<Vec<_>>(),
                "points": rows,
            }),
            headline: Headline::new(
                "delivered fraction at 7 paths, braid's defaults",
                braid7,
                Some(0.95),
                0.99,
                true,
            ),
            notes: vec![format!(
                "{duration} s per run; delivered = 1 - loss over the sequence numbers up to the \
                 highest received (packets in flight at the end are not losses)"
            )],
            table,
        })
    }
}
