//! The demo in the simulator: the bus on recorded LTE traces (scenarios/bus-lte.toml) run
//! over each link alone, per-connection striping and braid, side by side. `braid demo`
//! runs it where the lab (crate::lab_demo) cannot run; it is also a regular report so
//! `--json` works the same way as for benchmarks.

use std::path::Path;

use braid_sim::{Scenario, TraceCache};
use serde_json::json;

use crate::{BenchError, BenchReport, Headline, Options, Table};

/// The bus scenario, embedded so the demo runs from any directory.
pub const BUS: &str = include_str!("../../../scenarios/bus.toml");

/// The demo's scenario: the bus on recorded LTE traces.
pub const DEMO: &str = include_str!("../../../scenarios/bus-lte.toml");

/// The demo's scenario with its traces found: under `scenarios/` of the working directory
/// when run from the repository, else of the repository this was built from.
pub fn demo_scenario(traces: &mut TraceCache) -> Result<Scenario, BenchError> {
    let here = Path::new("scenarios");
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let base = if here.join("../traces/ATT-LTE-driving-2016.down").exists() {
        here.to_path_buf()
    } else {
        built
    };
    let mut s = Scenario::parse(DEMO, "scenarios/bus-lte.toml", &base, traces)?;
    s.name = "bus-lte".to_owned();
    Ok(s)
}

/// The `[[path]]` tables of the bus scenario, for benchmarks that run other workloads
/// over the same links.
pub fn bus_paths() -> Result<String, BenchError> {
    let start = BUS
        .find("[[path]]")
        .ok_or_else(|| BenchError::Other("scenarios/bus.toml has no [[path]]".into()))?;
    let end = BUS
        .find("[[workload]]")
        .filter(|&e| e > start)
        .unwrap_or(BUS.len());
    Ok(BUS[start..end].to_owned())
}

/// Runs the demo's bus over each link alone, per-connection striping and braid.
pub fn run(opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
    let mut traces = TraceCache::new();
    let mut base = demo_scenario(&mut traces)?;
    base.seed = opts.seed;
    base.duration_s = if opts.quick { 300.0 } else { 1800.0 };
    let mut variants = Vec::new();
    for p in &base.paths {
        let mut s = base.clone();
        s.engine.direct = Some(p.name.clone());
        variants.push((format!("{} only", p.name), s));
    }
    // Connection-level striping, what a multi-WAN router does.
    let mut mcp = base.clone();
    mcp.engine.scheduler = braid_core::SchedulerKind::MinConnPath;
    mcp.engine.loss_recovery = braid_core::LossRecoveryKind::None;
    variants.push(("per-connection striping".to_owned(), mcp));
    let braid_name = format!(
        "braid ({} + {})",
        crate::kebab(&base.engine.scheduler),
        base.engine.loss_recovery
    );
    variants.push((braid_name.clone(), base.clone()));

    let mut table = Table::new(["system", "flows done", "FCT median ms", "p25", "p75", "p95"]);
    let mut systems = serde_json::Map::new();
    let mut medians = Vec::new();
    for (name, s) in &variants {
        let mut cb = |done: f64| opts.progress(name, done);
        let r = braid_sim::run(s, &mut traces, Some(&mut cb))?;
        let Some(f) = r.workloads.first().and_then(|w| w.flows.clone()) else {
            return Err(BenchError::Other(
                "the bus workload reported no flows".into(),
            ));
        };
        table.row([
            name.clone(),
            format!("{}/{}", f.completed, f.started),
            format!("{:.0}", f.fct_ms.median),
            format!("{:.0}", f.fct_ms.p25),
            format!("{:.0}", f.fct_ms.p75),
            format!("{:.0}", f.fct_ms.p95),
        ]);
        medians.push((name.clone(), f.fct_ms.median));
        systems.insert(name.clone(), json!({ "flows": f }));
    }
    let braid = medians.last().map_or(f64::NAN, |m| m.1);
    let best_single = medians[..base.paths.len()]
        .iter()
        .map(|m| m.1)
        .fold(f64::INFINITY, f64::min);
    Ok(BenchReport {
        bench: "demo".to_owned(),
        seed: opts.seed,
        quick: opts.quick,
        systems: serde_json::Value::Object(systems),
        headline: Headline::new(
            "median FCT of the best single link / median FCT through braid",
            best_single / braid,
            None,
            1.0,
            true,
        ),
        notes: vec![
            "simulated (the lab, with real kernels and Linux MPTCP side by side, needs root)"
                .into(),
            format!(
                "{:.0} s of the bus-lte workload per system (scenarios/bus-lte.toml)",
                base.duration_s
            ),
        ],
        table,
    })
}
