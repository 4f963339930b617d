//! PluriBus §6.4's single-link experiments on loss protection (the scheduler is irrelevant
//! with one link): `pluribus-fig10` (methods against loss rate), `pluribus-fig12` (an
//! offset loss estimate) and `pluribus-fig13` (no slowdown from coding at zero loss). Each
//! runs the web workload (PluriBus §6.1) over one 1.5 Mbit/s link with 75 ms one way and
//! compares median flow completion times; every cell runs the same flows (the workload's
//! randomness does not depend on the engine).

use std::path::Path;

use braid_core::{
    EvolutionParams, LossRecoveryKind, MemberChoice, ReedSolomonParams, XorDecoder, XorParams,
};
use braid_sim::{Scenario, TraceCache};
use serde_json::json;

use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct Fig10;
pub struct Fig12;
pub struct Fig13;

/// One link as in PluriBus §6.4.1: 1.5 Mbit/s, 75 ms one way, Bernoulli loss both ways.
fn scenario(seed: u64, duration_s: f64, loss: f64, scale: f64) -> Result<Scenario, BenchError> {
    let loss = if loss > 0.0 {
        format!(", loss = {{ model = \"bernoulli\", p = {loss} }}")
    } else {
        String::new()
    };
    let text = format!(
        "duration_s = {duration_s}\nseed = {seed}\n\
         [[path]]\nname = \"link\"\n\
         up = {{ rate_mbps = 1.5, delay_ms = 75{loss} }}\n\
         down = {{ rate_mbps = 1.5, delay_ms = 75{loss} }}\n\
         [[workload]]\nkind = \"web\"\nscale = {scale}\n"
    );
    Ok(Scenario::parse(
        &text,
        "pluribus-single-link",
        Path::new("."),
        &mut TraceCache::new(),
    )?)
}

/// One cell's outcome.
#[derive(Clone, Debug)]
struct Cell {
    median_ms: f64,
    completed: u64,
    started: u64,
    coded_sent: u64,
    recovered: u64,
}

/// Runs every (scenario, method) job on both cores; results in job order.
fn run_all(
    jobs: &[(Scenario, LossRecoveryKind)],
    opts: &mut Options<'_>,
    label: &str,
) -> Result<Vec<Cell>, BenchError> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut out: Vec<Option<Result<Cell, String>>> = vec![None; jobs.len()];
    for (start, chunk) in jobs
        .chunks(workers)
        .enumerate()
        .map(|(i, c)| (i * workers, c))
    {
        opts.progress(label, start as f64 / jobs.len() as f64);
        let results: Vec<Result<Cell, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|(sc, kind)| s.spawn(move || one(sc, *kind)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a run panicked".into())))
                .collect()
        });
        for (i, r) in results.into_iter().enumerate() {
            out[start + i] = Some(r);
        }
    }
    opts.progress(label, 1.0);
    out.into_iter()
        .map(|c| {
            c.unwrap_or_else(|| Err("not run".into()))
                .map_err(BenchError::Other)
        })
        .collect()
}

fn one(base: &Scenario, kind: LossRecoveryKind) -> Result<Cell, String> {
    let mut s = base.clone();
    s.engine.loss_recovery = kind;
    let r = braid_sim::run(&s, &mut TraceCache::new(), None).map_err(|e| e.to_string())?;
    let f = r
        .workloads
        .first()
        .and_then(|w| w.flows.clone())
        .ok_or("the web workload reported no flows")?;
    let (gw, srv) = (r.gateway.unwrap_or_default(), r.server.unwrap_or_default());
    Ok(Cell {
        median_ms: f.fct_ms.median,
        completed: f.completed,
        started: f.started,
        coded_sent: gw.loss_recovery.coded_sent
            + srv.loss_recovery.coded_sent
            + gw.loss_recovery.parity_sent
            + srv.loss_recovery.parity_sent,
        recovered: gw.recovered + srv.recovered,
    })
}

fn evolution(offset: f64) -> LossRecoveryKind {
    LossRecoveryKind::Evolution(EvolutionParams {
        loss_offset: offset,
        ..EvolutionParams::default()
    })
}

fn xor(pct: u32) -> LossRecoveryKind {
    LossRecoveryKind::Xor(XorParams {
        redundancy_pct: pct,
        ..XorParams::default()
    })
}

fn report(
    bench: &str,
    opts: &Options<'_>,
    systems: serde_json::Value,
    headline: Headline,
    duration: f64,
    table: Table,
) -> BenchReport {
    BenchReport {
        bench: bench.to_owned(),
        seed: opts.seed,
        quick: opts.quick,
        systems,
        headline,
        notes: vec![
            format!("{duration:.0} virtual s of the web workload per cell, medians over completed flows"),
            "end hosts run smoltcp TCP (1 s minimum RTO, no SACK): losses that reach TCP cost more than on Linux".into(),
        ],
        table,
    }
}

impl Bench for Fig10 {
    fn name(&self) -> &'static str {
        "pluribus-fig10"
    }

    fn summary(&self) -> &'static str {
        "PluriBus Fig 10: median FCT of each loss-protection method relative to Evolution, loss 1-70%"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 300.0 } else { 3600.0 };
        let losses: &[f64] = if opts.quick {
            &[0.05, 0.3]
        } else {
            &[0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7]
        };
        let methods = [
            ("evolution", evolution(0.0)),
            ("lt", LossRecoveryKind::from_name("lt").unwrap_or_default()),
            ("xor 10%", xor(10)),
            ("xor 50%", xor(50)),
            ("xor 100%", xor(100)),
            (
                "reed-solomon 50%",
                LossRecoveryKind::ReedSolomon(ReedSolomonParams {
                    redundancy_pct: 50,
                    ..ReedSolomonParams::default()
                }),
            ),
            (
                "retransmit",
                LossRecoveryKind::from_name("retransmit").unwrap_or_default(),
            ),
            ("none", LossRecoveryKind::None),
            (
                "evolution peeling",
                LossRecoveryKind::Evolution(EvolutionParams {
                    decoder: XorDecoder::Peeling,
                    ..EvolutionParams::default()
                }),
            ),
            (
                "evolution coverage",
                LossRecoveryKind::Evolution(EvolutionParams {
                    members: MemberChoice::Coverage,
                    ..EvolutionParams::default()
                }),
            ),
        ];
        // The last two are Evolution itself with the peeling decoder and with members chosen
        // by coverage: shown, not competitors.
        let competitors = methods.len() - 2;
        let mut jobs = Vec::new();
        for &loss in losses {
            let sc = scenario(opts.seed, duration, loss, 1.0)?;
            for (_, k) in &methods {
                jobs.push((sc.clone(), *k));
            }
        }
        let cells = run_all(&jobs, opts, "fig10")?;
        let mut cols = vec!["loss".to_owned(), "evolution ms".to_owned()];
        cols.extend(methods[1..].iter().map(|m| format!("{} / evo", m.0)));
        let mut table = Table::new(cols);
        let mut systems = serde_json::Map::new();
        let mut worst = f64::INFINITY;
        for (li, &loss) in losses.iter().enumerate() {
            let row = &cells[li * methods.len()..(li + 1) * methods.len()];
            let evo = row[0].median_ms;
            let mut cells_out = vec![format!("{:.0}%", loss * 100.0), format!("{evo:.0}")];
            let mut per = serde_json::Map::new();
            for (mi, (name, _)) in methods.iter().enumerate() {
                let c = &row[mi];
                let ratio = c.median_ms / evo;
                if mi > 0 && mi < competitors {
                    worst = worst.min(ratio);
                }
                if mi > 0 {
                    cells_out.push(format!("{ratio:.2}"));
                }
                per.insert(
                    (*name).to_owned(),
                    json!({
                        "median_fct_ms": c.median_ms,
                        "relative_to_evolution": ratio,
                        "flows_completed": c.completed,
                        "flows_started": c.started,
                        "repair_sent": c.coded_sent,
                        "recovered": c.recovered,
                    }),
                );
            }
            table.row(cells_out);
            systems.insert(format!("loss {loss}"), serde_json::Value::Object(per));
        }
        Ok(report(
            self.name(),
            opts,
            serde_json::Value::Object(systems),
            Headline::new(
                "smallest median FCT of another method over Evolution's, all loss rates",
                worst,
                None,
                1.05,
                true,
            ),
            duration,
            table,
        ))
    }
}

impl Bench for Fig12 {
    fn name(&self) -> &'static str {
        "pluribus-fig12"
    }

    fn summary(&self) -> &'static str {
        "PluriBus Fig 12: median FCT with the loss estimate offset by -0.2..+0.2, over no offset"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 300.0 } else { 3600.0 };
        let losses: &[f64] = if opts.quick {
            &[0.3]
        } else {
            &[0.1, 0.2, 0.3, 0.4, 0.5]
        };
        let offsets = [0.0, -0.2, -0.1, 0.1, 0.2];
        let mut jobs = Vec::new();
        for &loss in losses {
            let sc = scenario(opts.seed, duration, loss, 1.0)?;
            for &o in &offsets {
                jobs.push((sc.clone(), evolution(o)));
            }
        }
        let cells = run_all(&jobs, opts, "fig12")?;
        let mut cols = vec!["loss".to_owned(), "no offset ms".to_owned()];
        cols.extend(offsets[1..].iter().map(|o| format!("{o:+}")));
        let mut table = Table::new(cols);
        let mut systems = serde_json::Map::new();
        let mut worst: f64 = 0.0;
        for (li, &loss) in losses.iter().enumerate() {
            let row = &cells[li * offsets.len()..(li + 1) * offsets.len()];
            let base = row[0].median_ms;
            let mut out = vec![format!("{:.0}%", loss * 100.0), format!("{base:.0}")];
            let mut per = serde_json::Map::new();
            for (oi, &o) in offsets.iter().enumerate() {
                let ratio = row[oi].median_ms / base;
                // The paper has no bar for an offset that would make the estimate negative.
                let skip = loss + o < 0.0 - 1e-9;
                if oi > 0 {
                    if skip {
                        out.push("-".into());
                        continue;
                    }
                    worst = worst.max(ratio);
                    out.push(format!("{ratio:.2}"));
                }
                per.insert(
                    format!("{o:+}"),
                    json!({ "median_fct_ms": row[oi].median_ms, "relative_to_no_offset": ratio }),
                );
            }
            table.row(out);
            systems.insert(format!("loss {loss}"), serde_json::Value::Object(per));
        }
        Ok(report(
            self.name(),
            opts,
            serde_json::Value::Object(systems),
            Headline::new(
                "worst median FCT with an offset loss estimate over no offset",
                worst,
                Some(1.2),
                1.25,
                false,
            ),
            duration,
            table,
        ))
    }
}

impl Bench for Fig13 {
    fn name(&self) -> &'static str {
        "pluribus-fig13"
    }

    fn summary(&self) -> &'static str {
        "PluriBus Fig 13: median FCT with Evolution over without coding, no loss, load scale 1-8"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 300.0 } else { 3600.0 };
        let scales: &[f64] = if opts.quick {
            &[1.0, 8.0]
        } else {
            &[1.0, 2.0, 4.0, 8.0]
        };
        let mut jobs = Vec::new();
        for &scale in scales {
            let sc = scenario(opts.seed, duration, 0.0, scale)?;
            jobs.push((sc.clone(), evolution(0.0)));
            jobs.push((sc, LossRecoveryKind::None));
        }
        let cells = run_all(&jobs, opts, "fig13")?;
        let mut table = Table::new([
            "load scale",
            "coded FCT ms",
            "uncoded FCT ms",
            "ratio",
            "coded packets",
        ]);
        let mut systems = serde_json::Map::new();
        let mut worst: f64 = 0.0;
        for (i, &scale) in scales.iter().enumerate() {
            let (c, n) = (&cells[2 * i], &cells[2 * i + 1]);
            let ratio = c.median_ms / n.median_ms;
            worst = worst.max(ratio);
            table.row([
                format!("{scale}"),
                format!("{:.0}", c.median_ms),
                format!("{:.0}", n.median_ms),
                format!("{ratio:.3}"),
                c.coded_sent.to_string(),
            ]);
            systems.insert(
                format!("scale {scale}"),
                json!({
                    "coded_median_fct_ms": c.median_ms,
                    "uncoded_median_fct_ms": n.median_ms,
                    "ratio": ratio,
                    "coded_packets": c.coded_sent,
                    "flows_completed": [c.completed, n.completed],
                }),
            );
        }
        Ok(report(
            self.name(),
            opts,
            serde_json::Value::Object(systems),
            Headline::new(
                "worst median FCT with coding over without, no loss",
                worst,
                None,
                1.05,
                false,
            ),
            duration,
            table,
        ))
    }
}
