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

/// What the end hosts' TCP is, for the reports' notes: the workload sets no `tcp`, so the
/// simulator's default, its Linux-like model.
const TCP_NOTE: &str = "end hosts run the simulator's Linux-like TCP model (initial window 10, Cubic, SACK with RACK-TLP and PRR, 200 ms minimum RTO)";

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
    // The loss-recovery methods compared act on the packets of the hosts' TCP in the
    // tunnel (split-TCP's stream repairs its own losses).
    s.engine.tcp_transport = Some(braid_core::class::Transport::Packet);
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

/// Each cell of Fig 10 and Fig 12 runs with this many seeds, derived from `--seed` (the
/// first is `--seed` itself), and pools them: one seed's median over a few hundred flows
/// moves by 10-20% with the seed, more than the differences measured.
const SEEDS: usize = 4;

/// The seeds of a pooled cell: `seed`, then SplitMix64 steps from it.
fn seeds(seed: u64) -> Vec<u64> {
    let mut state = seed;
    let mut out = vec![seed];
    while out.len() < SEEDS {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.push((z ^ (z >> 31)) >> 1);
    }
    out
}

/// Virtual seconds per seed of a pooled cell.
fn pooled_duration(opts: &Options<'_>) -> f64 {
    if opts.quick {
        600.0
    } else {
        1800.0
    }
}

/// One method's cell over several seeds.
#[derive(Clone, Debug)]
struct Pooled {
    per_seed: Vec<Cell>,
}

impl Pooled {
    /// The pooled median FCT: the mean of the seeds' medians.
    fn median_ms(&self) -> f64 {
        self.per_seed.iter().map(|c| c.median_ms).sum::<f64>() / self.per_seed.len() as f64
    }

    /// Pooled median over `base`'s, and the seeds' own ratios.
    fn relative_to(&self, base: &Pooled) -> (f64, Vec<f64>) {
        let per = self
            .per_seed
            .iter()
            .zip(&base.per_seed)
            .map(|(a, b)| a.median_ms / b.median_ms)
            .collect();
        (self.median_ms() / base.median_ms(), per)
    }

    fn sum(&self, f: impl Fn(&Cell) -> u64) -> u64 {
        self.per_seed.iter().map(f).sum()
    }
}

fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// Runs every (loss, method) cell with each seed of [`seeds`]; results per cell, in order.
fn run_pooled(
    losses: &[f64],
    kinds: &[LossRecoveryKind],
    opts: &mut Options<'_>,
    label: &str,
) -> Result<Vec<Pooled>, BenchError> {
    let duration = pooled_duration(opts);
    let seeds = seeds(opts.seed);
    let mut jobs = Vec::new();
    for &loss in losses {
        for &seed in &seeds {
            let sc = scenario(seed, duration, loss, 1.0)?;
            for k in kinds {
                jobs.push((sc.clone(), *k));
            }
        }
    }
    let cells = run_all(&jobs, opts, label)?;
    let mut out = Vec::new();
    for li in 0..losses.len() {
        for ki in 0..kinds.len() {
            let per_seed = (0..seeds.len())
                .map(|si| cells[(li * seeds.len() + si) * kinds.len() + ki].clone())
                .collect();
            out.push(Pooled { per_seed });
        }
    }
    Ok(out)
}

/// An Evolution variant with the loss estimate offset by the argument.
type Variant = fn(f64) -> LossRecoveryKind;

/// Braid's Evolution (the sampled estimate) with the loss estimate offset by `offset`.
fn evolution(offset: f64) -> LossRecoveryKind {
    LossRecoveryKind::Evolution(EvolutionParams {
        loss_offset: offset,
        ..EvolutionParams::default()
    })
}

/// Evolution as PluriBus §4.1 has it (one fraction `r`), offset by `offset`.
fn evolution_paper(offset: f64) -> LossRecoveryKind {
    LossRecoveryKind::Evolution(EvolutionParams {
        loss_offset: offset,
        ..EvolutionParams::paper()
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
        headlines: Vec::new(),
        systems,
        headline,
        notes: vec![
            format!("{duration:.0} virtual s of the web workload per cell, medians over completed flows"),
            TCP_NOTE.into(),
        ],
        table,
    }
}

/// The notes of a pooled benchmark.
fn pooled_notes(opts: &Options<'_>) -> Vec<String> {
    let seeds: Vec<String> = seeds(opts.seed).iter().map(u64::to_string).collect();
    vec![
        format!(
            "each cell: {} seeds ({}) of {:.0} virtual s of the web workload; a cell's median FCT is the mean of its seeds' medians over completed flows, a ratio is of those pooled medians, and the range in brackets is the seeds' own ratios",
            SEEDS,
            seeds.join(", "),
            pooled_duration(opts)
        ),
        TCP_NOTE.into(),
    ]
}

impl Bench for Fig10 {
    fn name(&self) -> &'static str {
        "pluribus-fig10"
    }

    fn summary(&self) -> &'static str {
        "PluriBus Fig 10: median FCT of each loss-protection method relative to Evolution, loss 1-70%"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let losses: &[f64] = if opts.quick {
            &[0.05, 0.3]
        } else {
            &[0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7]
        };
        // Evolution is braid's (the sampled estimate); the methods after `none` are
        // Evolution's variants, shown and not counted: §4.1's estimate (the paper's
        // Evolution), the same with members by coverage, and braid's with the peeling
        // decoder.
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
            ("evolution §4.1", evolution_paper(0.0)),
            (
                "evolution §4.1 coverage",
                LossRecoveryKind::Evolution(EvolutionParams {
                    members: MemberChoice::Coverage,
                    ..EvolutionParams::paper()
                }),
            ),
            (
                "evolution peeling",
                LossRecoveryKind::Evolution(EvolutionParams {
                    decoder: XorDecoder::Peeling,
                    ..EvolutionParams::default()
                }),
            ),
        ];
        let competitors = methods.len() - 3;
        let kinds: Vec<LossRecoveryKind> = methods.iter().map(|m| m.1).collect();
        let cells = run_pooled(losses, &kinds, opts, "fig10")?;
        // The same flows without loss: no method's median can go below it, which bounds
        // every ratio at a loss rate by that method's median over it.
        let lossless = run_pooled(&[0.0], &[LossRecoveryKind::None], opts, "fig10 no loss")?;
        let lossless = &lossless[0];
        let mut cols = vec![
            "loss".to_owned(),
            "no loss ms".to_owned(),
            "evolution ms".to_owned(),
        ];
        cols.extend(methods[1..].iter().map(|m| format!("{} / evo", m.0)));
        cols.push("closest (seeds)".to_owned());
        let mut table = Table::new(cols);
        let mut systems = serde_json::Map::new();
        let mut worst = f64::INFINITY;
        for (li, &loss) in losses.iter().enumerate() {
            let row = &cells[li * methods.len()..(li + 1) * methods.len()];
            let evo = &row[0];
            let mut out = vec![
                format!("{:.0}%", loss * 100.0),
                format!("{:.0}", lossless.median_ms()),
                format!("{:.0}", evo.median_ms()),
            ];
            let mut per = serde_json::Map::new();
            let (ratio, seeds_ratio) = lossless.relative_to(evo);
            per.insert(
                "none without loss".to_owned(),
                json!({
                    "median_fct_ms": lossless.median_ms(),
                    "relative_to_evolution": ratio,
                    "relative_per_seed": seeds_ratio,
                }),
            );
            let mut closest: Option<(f64, &str, f64, f64)> = None;
            for (mi, (name, _)) in methods.iter().enumerate() {
                let c = &row[mi];
                let (ratio, seeds_ratio) = c.relative_to(evo);
                if mi > 0 && mi < competitors {
                    worst = worst.min(ratio);
                    if closest.is_none_or(|(r, ..)| ratio < r) {
                        let (lo, hi) = range(&seeds_ratio);
                        closest = Some((ratio, name, lo, hi));
                    }
                }
                if mi > 0 {
                    out.push(format!("{ratio:.2}"));
                }
                per.insert(
                    (*name).to_owned(),
                    json!({
                        "median_fct_ms": c.median_ms(),
                        "relative_to_evolution": ratio,
                        "relative_per_seed": seeds_ratio,
                        "median_fct_ms_per_seed": c.per_seed.iter().map(|x| x.median_ms).collect::<Vec<_>>(),
                        "flows_completed": c.sum(|x| x.completed),
                        "flows_started": c.sum(|x| x.started),
                        "repair_sent": c.sum(|x| x.coded_sent),
                        "recovered": c.sum(|x| x.recovered),
                    }),
                );
            }
            out.push(closest.map_or(String::new(), |(r, name, lo, hi)| {
                format!("{name} {r:.2} ({lo:.2}-{hi:.2})")
            }));
            table.row(out);
            systems.insert(format!("loss {loss}"), serde_json::Value::Object(per));
        }
        let mut r = report(
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
            pooled_duration(opts),
            table,
        );
        r.notes = pooled_notes(opts);
        r.notes.push("evolution: braid's (the sampled estimate of docs/architecture.md); evolution §4.1: PluriBus §4.1's single fraction r; both with the immediate decoder. The last three columns are Evolution's variants, not counted in the headline".into());
        Ok(r)
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
        let losses: &[f64] = if opts.quick {
            &[0.3, 0.5]
        } else {
            &[0.1, 0.2, 0.3, 0.4, 0.5]
        };
        let offsets = [0.0, -0.2, -0.1, 0.1, 0.2];
        // braid's Evolution first, then §4.1's (shown, not in the headline).
        let variants: [(&str, Variant); 2] = [("", evolution), (" §4.1", evolution_paper)];
        let mut kinds = Vec::new();
        for (_, v) in &variants {
            kinds.extend(offsets.iter().map(|&o| v(o)));
        }
        let cells = run_pooled(losses, &kinds, opts, "fig12")?;
        let mut cols = vec!["loss".to_owned(), "no offset ms".to_owned()];
        cols.extend(offsets[1..].iter().map(|o| format!("{o:+}")));
        cols.push("worst (seeds)".to_owned());
        let mut table = Table::new(cols);
        let mut systems = serde_json::Map::new();
        let mut worst: f64 = 0.0;
        for (vi, (suffix, _)) in variants.iter().enumerate() {
            for (li, &loss) in losses.iter().enumerate() {
                let at = (li * variants.len() + vi) * offsets.len();
                let row = &cells[at..at + offsets.len()];
                let base = &row[0];
                let mut out = vec![
                    format!("{:.0}%{suffix}", loss * 100.0),
                    format!("{:.0}", base.median_ms()),
                ];
                let mut per = serde_json::Map::new();
                let mut row_worst: Option<(f64, f64, f64)> = None;
                for (oi, &o) in offsets.iter().enumerate() {
                    let (ratio, seeds_ratio) = row[oi].relative_to(base);
                    // The paper has no bar for an offset that would make the estimate
                    // negative.
                    let skip = loss + o < 0.0 - 1e-9;
                    if oi > 0 {
                        if skip {
                            out.push("-".into());
                            continue;
                        }
                        if row_worst.is_none_or(|(r, ..)| ratio > r) {
                            let (lo, hi) = range(&seeds_ratio);
                            row_worst = Some((ratio, lo, hi));
                        }
                        out.push(format!("{ratio:.2}"));
                    }
                    per.insert(
                        format!("{o:+}"),
                        json!({
                            "median_fct_ms": row[oi].median_ms(),
                            "relative_to_no_offset": ratio,
                            "relative_per_seed": seeds_ratio,
                        }),
                    );
                }
                if let Some((r, lo, hi)) = row_worst {
                    if vi == 0 {
                        worst = worst.max(r);
                    }
                    out.push(format!("{r:.2} ({lo:.2}-{hi:.2})"));
                }
                table.row(out);
                let key = if vi == 0 {
                    format!("loss {loss}")
                } else {
                    format!("loss {loss} paper")
                };
                systems.insert(key, serde_json::Value::Object(per));
            }
        }
        let mut r = report(
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
            pooled_duration(opts),
            table,
        );
        r.notes = pooled_notes(opts);
        r.notes.push("rows without a mark: braid's Evolution (the sampled estimate), the headline; rows marked §4.1: PluriBus §4.1's estimate, shown".into());
        Ok(r)
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
