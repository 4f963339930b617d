//! `never-worse`: braid must not be slower than the best of its links. Users of today's
//! bonding products most often report that the bond is slower than their best single link
//! when links differ in delay or loss; this matrix of two- and three-path cases with wide
//! delay, loss and capacity disparity checks braid's default configuration against each
//! path used alone, for bulk TCP (goodput) and for the bus short-flow workload (median
//! flow completion time).

use serde_json::json;

use crate::common::{bulk_mbps, f, median_fct_ms, run_all, scenario, symmetric_path};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct NeverWorse;

/// One path: kbit/s, one-way delay ms, loss rate.
type Link = (f64, f64, f64);

/// The matrix: case name and its paths.
fn cases() -> Vec<(&'static str, Vec<Link>)> {
    vec![
        (
            "fibre + satellite",
            vec![(20_000.0, 10.0, 0.0), (20_000.0, 300.0, 0.0)],
        ),
        (
            "clean + 30% loss",
            vec![(10_000.0, 20.0, 0.0), (10_000.0, 20.0, 0.3)],
        ),
        (
            "capacity 20:1",
            vec![(20_000.0, 20.0, 0.0), (1_000.0, 20.0, 0.0)],
        ),
        (
            "fast + slow lossy",
            vec![(10_000.0, 5.0, 0.0), (5_000.0, 400.0, 0.05)],
        ),
        (
            "three mixed",
            vec![
                (10_000.0, 10.0, 0.0),
                (5_000.0, 100.0, 0.02),
                (2_000.0, 400.0, 0.1),
            ],
        ),
        (
            "both lossy",
            vec![(5_000.0, 30.0, 0.05), (5_000.0, 60.0, 0.01)],
        ),
    ]
}

fn paths(links: &[Link]) -> String {
    links
        .iter()
        .enumerate()
        .map(|(i, &(r, d, p))| {
            let loss = if p > 0.0 {
                format!("loss = {{ model = \"bernoulli\", p = {p} }}")
            } else {
                String::new()
            };
            symmetric_path(&format!("p{i}"), r, d, &loss)
        })
        .collect()
}

impl Bench for NeverWorse {
    fn name(&self) -> &'static str {
        "never-worse"
    }

    fn summary(&self) -> &'static str {
        "braid's defaults vs the best single path over links of wide delay, loss and capacity disparity"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let (bulk_s, web_s) = if opts.quick {
            (30.0, 120.0)
        } else {
            (90.0, 600.0)
        };
        let workloads = [
            ("bulk", bulk_s, "[[workload]]\nkind = \"bulk\"\n".to_owned()),
            (
                "web",
                web_s,
                "[[workload]]\nkind = \"web\"\nscale = 4\n".to_owned(),
            ),
        ];
        let cases = cases();
        // Per case and workload: braid, then each path alone.
        let mut scenarios = Vec::new();
        for (name, links) in &cases {
            for (wname, dur, w) in &workloads {
                let p = paths(links);
                scenarios.push(scenario(
                    &format!("{name}-{wname}-braid"),
                    *dur,
                    opts.seed,
                    "",
                    &p,
                    w,
                )?);
                for i in 0..links.len() {
                    scenarios.push(scenario(
                        &format!("{name}-{wname}-p{i}"),
                        *dur,
                        opts.seed,
                        &format!("direct = \"p{i}\""),
                        &p,
                        w,
                    )?);
                }
            }
        }
        let reports = run_all(opts, "never-worse", scenarios)?;
        let mut table = Table::new([
            "case",
            "bulk braid Mbit/s",
            "best path",
            "ratio",
            "web braid median ms",
            "best path",
            "ratio",
        ]);
        let mut rows = Vec::new();
        let mut worst = f64::INFINITY;
        let mut k = 0;
        for (name, links) in &cases {
            let n = links.len();
            let bulk_braid = bulk_mbps(&reports[k]);
            let bulk_best = reports[k + 1..k + 1 + n]
                .iter()
                .map(bulk_mbps)
                .fold(0.0, f64::max);
            k += 1 + n;
            let web_braid = median_fct_ms(&reports[k]);
            let web_best = reports[k + 1..k + 1 + n]
                .iter()
                .map(median_fct_ms)
                .fold(f64::INFINITY, f64::min);
            k += 1 + n;
            let bulk_ratio = bulk_braid / bulk_best;
            let web_ratio = web_best / web_braid;
            worst = worst.min(bulk_ratio).min(web_ratio);
            table.row([
                name.to_string(),
                f(bulk_braid, 2),
                f(bulk_best, 2),
                f(bulk_ratio, 3),
                f(web_braid, 0),
                f(web_best, 0),
                f(web_ratio, 3),
            ]);
            rows.push(json!({
                "case": name,
                "paths": links.iter().map(|(r, d, p)| json!({"kbps": r, "delay_ms": d, "loss": p})).collect::<Vec<_>>(),
                "bulk_braid_mbps": bulk_braid, "bulk_best_single_mbps": bulk_best, "bulk_ratio": bulk_ratio,
                "web_braid_median_ms": web_braid, "web_best_single_median_ms": web_best, "web_ratio": web_ratio,
            }));
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "cases": rows }),
            headline: Headline::new(
                "worst over the matrix of braid / best single path (goodput; and best median FCT / braid's)",
                worst,
                None,
                1.0,
                true,
            ),
            notes: vec![format!(
                "braid with its default configuration; bulk: one TCP download for {bulk_s} s; \
                 web: the bus workload at load scale 4 for {web_s} s"
            )],
            table,
        })
    }
}
