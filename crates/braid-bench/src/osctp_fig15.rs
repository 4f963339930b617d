//! `osctp-fig15`: striping alone over the cheap link with gaps and the metered one, no
//! cost model (oSCTP §V-A, Fig 15): the CDF of per-second goodput of a bulk download over
//! each link alone (TCP directly, no braid) and over braid's two paths. Paper: braid's
//! mean about 85% of the sum of the links' means.

use serde_json::json;

use crate::common::{f, run_all};
use crate::hybrid_links::{both_links, cheap_capacity_bytes, one_link, METERED_KBPS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct OsctpFig15;

fn series(r: &braid_sim::Report) -> Vec<f64> {
    r.workloads
        .iter()
        .filter_map(|w| w.bulk.as_ref())
        .flat_map(|b| b.goodput_mbps_series.iter().copied())
        .collect()
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    braid_sim::metrics::quantile_sorted(&s, q)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

impl Bench for OsctpFig15 {
    fn name(&self) -> &'static str {
        "osctp-fig15"
    }

    fn summary(&self) -> &'static str {
        "striping over a cheap link with gaps and a metered one: per-second goodput CDFs of each link and braid"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let (seed, quick) = (opts.seed, opts.quick);
        let scenarios = vec![
            one_link("fig15-cheap", seed, quick, "cheap")?,
            one_link("fig15-metered", seed, quick, "metered")?,
            both_links("fig15-braid", seed, quick, None)?,
        ];
        let reports = run_all(opts, "osctp-fig15", scenarios)?;
        let names = ["cheap alone", "metered alone", "braid"];
        let mut table = Table::new(["system", "p10", "p25", "p50", "p75", "p90", "mean Mbit/s"]);
        let mut systems = serde_json::Map::new();
        let mut means = Vec::new();
        for (name, r) in names.iter().zip(&reports) {
            let s = series(r);
            let qs = [0.1, 0.25, 0.5, 0.75, 0.9].map(|q| quantile(&s, q));
            let m = mean(&s);
            means.push(m);
            let mut row = vec![(*name).to_owned()];
            row.extend(qs.iter().map(|q| f(*q, 3)));
            row.push(f(m, 3));
            table.row(row);
            systems.insert(
                (*name).to_owned(),
                json!({ "quantiles_mbps": { "p10": qs[0], "p25": qs[1], "p50": qs[2], "p75": qs[3], "p90": qs[4] }, "mean_mbps": m, "seconds": s.len() }),
            );
        }
        let dark = series(&reports[0]).iter().filter(|&&x| x < 0.01).count() as f64
            / series(&reports[0]).len().max(1) as f64;
        let headline = means[2] / (means[0] + means[1]);
        // Beside the paper's ratio: braid against what the links could carry (their mean
        // capacities on the wire; TCP's goodput is about 0.93 of it through braid).
        let cheap = cheap_capacity_bytes(seed, quick)?;
        let capacity_mbps = mean(&cheap) * 8.0 / 1e6 + METERED_KBPS / 1e3;
        systems.insert(
            "braid_over_link_capacity".into(),
            json!(means[2] / capacity_mbps),
        );
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed,
            quick,
            systems: serde_json::Value::Object(systems),
            headline: Headline::new(
                "braid's mean goodput over the sum of the links' means",
                headline,
                Some(0.85),
                0.95,
                true,
            ),
            headlines: Vec::new(),
            notes: vec![
                "links as osctp-table1; each link alone is a bulk TCP download directly over it (no braid); braid stripes over both with no cost model".into(),
                format!("the cheap link alone delivered nothing in {:.0}% of the seconds (paper: about 40%): its coverage gaps are about 40% of the time, and TCP alone over it waits out its retransmission timeouts after each", dark * 100.0),
                format!("braid's mean over the links' mean capacity (wire, {:.3} Mbit/s): {:.3}", capacity_mbps, means[2] / capacity_mbps),
            ],
            table,
        })
    }
}
