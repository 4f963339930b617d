//! `pluribus-fig17`: accuracy of the path delay estimate (PluriBus §6.5.2, Fig 17).
//!
//! The bus links of PluriBus §2 (scenarios/bus.toml: an EVDO-like link with 150 ms RTT and
//! a WiMax-like link with 40 ms RTT, their losses and capacities) carry the bus workload at
//! load scales 1, 2, 4 and 8 through the delay-based scheduler. For every data packet in
//! both directions the sender's predicted delivery time (§4.3: size / capacity + queue +
//! (d + δ), on the receiver's clock) is compared with the actual one.
//!
//! The comparison estimator is PluriBus's "Exp. avg.": an exponential average (gain 1/8) of
//! the one-way delays the receiver observed, as the sender knows them: a sample is known
//! one report interval plus one one-way delay after the packet arrived.
//!
//! Paper: 80% of packets within 10 ms of the prediction; the exponential average
//! underestimates badly.

use std::collections::HashMap;

use braid_core::{PathId, Prediction};
use serde_json::json;

use crate::common::{f, run_all_keeping, scenario};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct PluribusFig17;

const SCALES: [f64; 4] = [1.0, 2.0, 4.0, 8.0];
/// Report interval the comparison estimator's feedback waits for, µs.
const REPORT_US: i64 = 100_000;

/// Errors (ms, actual − predicted) of both estimators over one direction.
fn errors(
    predictions: &[Prediction],
    arrivals: &[(u32, PathId, u32)],
    delay_based: &mut Vec<f64>,
    exp_avg: &mut Vec<f64>,
    by_path: &mut HashMap<PathId, Vec<f64>>,
) {
    // By sequence number and path: a packet sent on several paths (redundant copies) has a
    // prediction and an arrival on each.
    let arrived: HashMap<(u32, PathId), u32> = arrivals
        .iter()
        .map(|&(s, path, at)| ((s, path), at))
        .collect();
    // Delay-based: the engine's own prediction.
    for p in predictions {
        if let (Some(pred), Some(&at)) = (p.predicted, arrived.get(&(p.seq, p.path))) {
            let e = f64::from(at.wrapping_sub(pred) as i32) / 1e3;
            delay_based.push(e);
            by_path.entry(p.path).or_default().push(e);
        }
    }
    // Exponential average of observed one-way delays, known with feedback delay.
    let mut samples: Vec<(i64, PathId, f64)> = predictions
        .iter()
        .filter_map(|p| {
            let at = *arrived.get(&(p.seq, p.path))?;
            let owd = i64::from(at.wrapping_sub(p.sent) as i32);
            let known = i64::from(p.sent) + 2 * owd + REPORT_US;
            Some((known, p.path, owd as f64))
        })
        .collect();
    samples.sort_by_key(|s| s.0);
    let mut order: Vec<&Prediction> = predictions.iter().collect();
    order.sort_by_key(|p| p.sent);
    let mut ewma: HashMap<PathId, f64> = HashMap::new();
    let mut next = 0;
    for p in order {
        while next < samples.len() && samples[next].0 <= i64::from(p.sent) {
            let (_, path, owd) = samples[next];
            let e = ewma.entry(path).or_insert(owd);
            *e += (owd - *e) / 8.0;
            next += 1;
        }
        if let (Some(est), Some(&at)) = (ewma.get(&p.path), arrived.get(&(p.seq, p.path))) {
            let actual = f64::from(at.wrapping_sub(p.sent) as i32);
            exp_avg.push((actual - est) / 1e3);
        }
    }
}

fn within(errs: &[f64], ms: f64) -> f64 {
    errs.iter().filter(|e| e.abs() <= ms).count() as f64 / errs.len().max(1) as f64
}

fn quantile_abs(errs: &[f64], q: f64) -> f64 {
    let mut a: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
    a.sort_by(f64::total_cmp);
    braid_sim::metrics::quantile_sorted(&a, q)
}

impl Bench for PluribusFig17 {
    fn name(&self) -> &'static str {
        "pluribus-fig17"
    }

    fn summary(&self) -> &'static str {
        "error of the predicted delivery time on the bus links: delay-based estimator vs an exponential average"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 120.0 } else { 600.0 };
        let bus = crate::demo::bus_paths()?;
        let mut scenarios = Vec::new();
        for scale in SCALES {
            scenarios.push(scenario(
                &format!("fig17-{scale}"),
                duration,
                opts.seed,
                // The tunnel's predictions, of the web's TCP inside it.
                "scheduler = \"delay-based\"\nrecord_predictions = true\ntcp_transport = \"packet\"",
                &bus,
                &format!("[[workload]]\nkind = \"web\"\nscale = {scale}\n"),
            )?);
        }
        let runs = run_all_keeping(opts, "fig17", scenarios)?;
        let mut db_all = Vec::new();
        let mut ea_all = Vec::new();
        let mut table = Table::new([
            "load scale",
            "packets",
            "delay-based within 10 ms",
            "exp. avg. within 10 ms",
            "delay-based median |error| ms",
        ]);
        let mut points = Vec::new();
        for (scale, (_, engines)) in SCALES.iter().zip(runs) {
            let Some(mut e) = engines else {
                return Err(BenchError::Other("fig17 needs braid mode".into()));
            };
            let (mut db, mut ea) = (Vec::new(), Vec::new());
            let (mut down, mut up) = (HashMap::new(), HashMap::new());
            errors(
                &e.server.take_predictions(),
                &e.gateway.take_arrivals(),
                &mut db,
                &mut ea,
                &mut down,
            );
            errors(
                &e.gateway.take_predictions(),
                &e.server.take_arrivals(),
                &mut db,
                &mut ea,
                &mut up,
            );
            let per_path = |m: &HashMap<PathId, Vec<f64>>| -> serde_json::Value {
                let mut keys: Vec<_> = m.keys().copied().collect();
                keys.sort_unstable();
                keys.iter()
                    .map(|k| {
                        let v = &m[k];
                        json!({
                            "path": k,
                            "packets": v.len(),
                            "within_10ms": within(v, 10.0),
                            "mean_error_ms": v.iter().sum::<f64>() / v.len().max(1) as f64,
                        })
                    })
                    .collect()
            };
            table.row([
                f(*scale, 0),
                db.len().to_string(),
                f(within(&db, 10.0), 3),
                f(within(&ea, 10.0), 3),
                f(quantile_abs(&db, 0.5), 1),
            ]);
            points.push(json!({
                "scale": scale,
                "down_by_path": per_path(&down),
                "up_by_path": per_path(&up),
                "packets": db.len(),
                "delay_based_within_10ms": within(&db, 10.0),
                "exp_avg_within_10ms": within(&ea, 10.0),
                "delay_based_abs_error_ms_p50": quantile_abs(&db, 0.5),
                "delay_based_abs_error_ms_p90": quantile_abs(&db, 0.9),
                "delay_based_mean_error_ms": db.iter().sum::<f64>() / db.len().max(1) as f64,
                "delay_based_late_over_10ms": db.iter().filter(|e| **e > 10.0).count() as f64 / db.len().max(1) as f64,
                "delay_based_early_over_10ms": db.iter().filter(|e| **e < -10.0).count() as f64 / db.len().max(1) as f64,
                "exp_avg_abs_error_ms_p50": quantile_abs(&ea, 0.5),
            }));
            db_all.extend(db);
            ea_all.extend(ea);
        }
        let headline = within(&db_all, 10.0);
        table.row([
            "all".to_owned(),
            db_all.len().to_string(),
            f(headline, 3),
            f(within(&ea_all, 10.0), 3),
            f(quantile_abs(&db_all, 0.5), 1),
        ]);
        let cdf: Vec<_> = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
            .iter()
            .map(|&ms| json!({"ms": ms, "delay_based": within(&db_all, ms), "exp_avg": within(&ea_all, ms)}))
            .collect();
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "points": points, "cdf_within": cdf }),
            headline: Headline::new(
                "fraction of packets delivered within 10 ms of the delay-based prediction",
                headline,
                Some(0.8),
                0.9,
                true,
            ),
            notes: vec![format!(
                "{duration} s per load scale, both directions; lost packets have no error"
            )],
            table,
        })
    }
}
