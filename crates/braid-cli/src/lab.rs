//! `braid lab`: the real testbed on this machine (network namespaces, the link emulator,
//! real TCP, Linux MPTCP beside braid). docs/lab.md describes it.

use std::path::PathBuf;

use anyhow::Context;
use braid_bench::Table;
use braid_lab::support::{check, Need};
use braid_lab::System;
use braid_sim::{Scenario, TraceCache};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Say whether the lab can run here, and if not, why.
    Check,
    /// Run a scenario file's paths and workloads in the lab, through each system in turn.
    Run(RunArgs),
    /// Remove namespaces (and their processes) left by labs that no longer run.
    Clean {
        /// Also remove those of labs still running.
        #[arg(long)]
        all: bool,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Scenario file (TOML; docs/scenarios.md).
    file: PathBuf,
    /// Systems to compare, comma-separated: `paths` (each path alone), `mptcp`, `braid`,
    /// `path:NAME`, `braid:SCHEDULER`.
    #[arg(long, default_value = "paths,mptcp,braid")]
    systems: String,
    /// Print the full report as JSON.
    #[arg(long)]
    json: bool,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    match a.command {
        Sub::Check => {
            check(&[Need::Iperf, Need::Ping, Need::Mptcp])?;
            crate::emit("the lab can run here (root, network namespaces, iperf3, ping, MPTCP)\n")
        }
        Sub::Clean { all } => {
            let removed = braid_lab::netns::clean_leftovers(all)?;
            if removed.is_empty() {
                crate::emit("no lab namespaces to remove\n")
            } else {
                crate::emit(&format!("removed {}\n", removed.join(" ")))
            }
        }
        Sub::Run(r) => run_file(r),
    }
}

/// Parses `--systems` against the scenario's path names.
fn systems(spec: &str, sc: &Scenario) -> anyhow::Result<Vec<System>> {
    let default_scheduler = braid_bench::kebab(&sc.engine.scheduler);
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item.split_once(':') {
            None if item == "paths" => out.extend((0..sc.paths.len()).map(System::Path)),
            // The lab puts MPTCP's first subflow on its best path (scenario_run).
            None if item == "mptcp" => out.push(System::Mptcp { primary: 0 }),
            None if item == "braid" => out.push(System::Braid(default_scheduler.clone())),
            Some(("path", name)) => {
                let k = sc
                    .paths
                    .iter()
                    .position(|p| p.name == name)
                    .with_context(|| format!("--systems: the scenario has no path '{name}'"))?;
                out.push(System::Path(k));
            }
            Some(("braid", s)) => out.push(System::Braid(s.to_owned())),
            _ => anyhow::bail!(
                "--systems: unknown system '{item}' (paths, mptcp, braid, path:NAME, braid:SCHEDULER)"
            ),
        }
    }
    Ok(out)
}

fn run_file(a: RunArgs) -> anyhow::Result<()> {
    let mut traces = TraceCache::new();
    let mut sc = Scenario::load(&a.file, &mut traces)?;
    if let Some(s) = a.seed {
        sc.seed = s;
    }
    let mut systems = systems(&a.systems, &sc)?;
    check(&[Need::Iperf, Need::Mptcp])?;
    if let Some(why) = braid_lab::braid_daemon::unavailable() {
        if systems.iter().any(|s| matches!(s, System::Braid(_))) {
            eprintln!("braid lab: braid cannot run in the lab yet ({why}); leaving it out");
            systems.retain(|s| !matches!(s, System::Braid(_)));
        }
    }
    if !a.json {
        crate::emit(&format!(
            "{}: {} s per system, {} system(s), real time\n",
            sc.name,
            sc.duration_s,
            systems.len()
        ))?;
    }
    let runs = braid_lab::scenario_run::run(&sc, &systems)
        .with_context(|| format!("running {} in the lab", a.file.display()))?;
    if a.json {
        return crate::emit(&(serde_json::to_string_pretty(&runs)? + "\n"));
    }
    let mut t = Table::new(["system", "workload", "result"]);
    for r in &runs {
        for w in &r.workloads {
            t.row([
                r.system.clone(),
                w["kind"].as_str().unwrap_or("?").to_owned(),
                brief(w),
            ]);
        }
    }
    crate::emit(&t.to_string())
}

/// One line per workload result.
fn brief(w: &serde_json::Value) -> String {
    if let Some(e) = w["error"].as_str() {
        return format!("error: {e}");
    }
    let r = &w["result"];
    if let Some(g) = r["goodput_mbps"].as_f64() {
        let mut s = format!("{g:.2} Mbit/s");
        if let Some(l) = r["lost_percent"].as_f64() {
            s += &format!(", {l:.2}% lost");
        }
        return s;
    }
    format!(
        "{}/{} flows, FCT median {:.0} ms (p95 {:.0})",
        r["completed"],
        r["started"],
        r["fct_ms"]["median"].as_f64().unwrap_or(f64::NAN),
        r["fct_ms"]["p95"].as_f64().unwrap_or(f64::NAN)
    )
}
