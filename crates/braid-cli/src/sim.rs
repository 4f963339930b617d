//! `braid sim FILE`: one scenario in the simulator.

use std::path::PathBuf;

use anyhow::Context;
use braid_sim::{Scenario, TraceCache};

use crate::progress::Bar;

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file (TOML; see docs/scenarios.md and the examples in scenarios/).
    file: PathBuf,
    /// Print the full report as JSON (byte-identical for the same scenario and seed).
    #[arg(long)]
    json: bool,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut traces = TraceCache::new();
    let mut sc = Scenario::load(&a.file, &mut traces)?;
    if let Some(s) = a.seed {
        sc.seed = s;
    }
    let mut bar = Bar::new(!a.json);
    let mut cb = |done: f64| bar.update(&sc.name, done);
    let report = braid_sim::run(&sc, &mut traces, Some(&mut cb))
        .with_context(|| format!("simulating {}", a.file.display()))?;
    bar.finish();
    if a.json {
        crate::emit(&(serde_json::to_string_pretty(&report)? + "\n"))
    } else {
        crate::emit(&braid_bench::summarize(&sc, &report))
    }
}
