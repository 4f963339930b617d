//! What the simulator-based benchmarks share: building scenarios from parts, running many
//! of them in parallel (each run is deterministic, so threads change nothing but the wall
//! time), and reading figures out of reports.

use std::path::{Path, PathBuf};

use braid_sim::{EnginePair, Report, Scenario, TraceCache};

use crate::{BenchError, Options};

/// One direction of a path as a TOML inline table.
pub fn link(rate_kbps: f64, delay_ms: f64, extra: &str) -> String {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    format!("{{ rate_kbps = {rate_kbps}, delay_ms = {delay_ms}{extra} }}")
}

/// A path with the same link model both ways.
pub fn symmetric_path(name: &str, rate_kbps: f64, delay_ms: f64, extra: &str) -> String {
    let l = link(rate_kbps, delay_ms, extra);
    format!("[[path]]\nname = \"{name}\"\nup = {l}\ndown = {l}\n")
}

/// braid as `braid gateway` and `braid server` run it: an empty `[engine]` (the engine's
/// defaults) and no capacity configured. Every headline measures this system.
pub const BRAID_DEFAULTS: &str = "braid";

/// What a compared packet scheduler runs with beside its name: TCP in the packet tunnel,
/// which the scheduler spreads (braid's defaults split TCP onto the stream instead).
pub const PACKET_TCP: &str = "tcp_transport = \"packet\"";

/// The `[engine]` lines of a compared system: none for [`BRAID_DEFAULTS`], else the
/// packet scheduler of that name with everything else at its default ([`PACKET_TCP`]).
pub fn engine_of(system: &str) -> String {
    if system == BRAID_DEFAULTS {
        String::new()
    } else {
        format!("scheduler = \"{system}\"\n{PACKET_TCP}")
    }
}

/// A whole scenario from its parts. `engine` holds `key = value` lines for `[engine]`.
pub fn scenario(
    name: &str,
    duration_s: f64,
    seed: u64,
    engine: &str,
    paths: &str,
    workloads: &str,
) -> Result<Scenario, BenchError> {
    let text = format!(
        "name = \"{name}\"\nduration_s = {duration_s}\nseed = {seed}\n[engine]\n{engine}\n{paths}\n{workloads}"
    );
    Ok(Scenario::parse(
        &text,
        name,
        Path::new("."),
        &mut TraceCache::new(),
    )?)
}

/// Runs `scenarios` on all cores and returns their reports in order, reporting progress
/// (runs completed) under `label`.
pub fn run_all(
    opts: &mut Options<'_>,
    label: &str,
    scenarios: Vec<Scenario>,
) -> Result<Vec<Report>, BenchError> {
    Ok(run_all_keeping(opts, label, scenarios)?
        .into_iter()
        .map(|(r, _)| r)
        .collect())
}

/// Like [`run_all`], keeping each run's engines.
pub fn run_all_keeping(
    opts: &mut Options<'_>,
    label: &str,
    scenarios: Vec<Scenario>,
) -> Result<Vec<(Report, Option<EnginePair>)>, BenchError> {
    let total = scenarios.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(total.max(1));
    let (tx, rx) = std::sync::mpsc::channel();
    let work = std::sync::Mutex::new(scenarios.into_iter().enumerate());
    type Run = Result<(Report, Option<EnginePair>), braid_sim::SimError>;
    let mut results: Vec<Option<Run>> = (0..total).map(|_| None).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let work = &work;
            s.spawn(move || loop {
                let next = work.lock().map(|mut w| w.next());
                let Ok(Some((i, sc))) = next else { break };
                let r = braid_sim::run_keeping_engines(&sc, &mut TraceCache::new(), None);
                if tx.send((i, r)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut done = 0;
        opts.progress(label, 0.0);
        for (i, r) in rx {
            results[i] = Some(r);
            done += 1;
            opts.progress(label, done as f64 / total as f64);
        }
    });
    results
        .into_iter()
        .map(|r| match r {
            Some(r) => r.map_err(BenchError::from),
            None => Err(BenchError::Other("a simulation thread stopped".into())),
        })
        .collect()
}

/// Median flow completion time (ms) of the first workload with flows.
pub fn median_fct_ms(r: &Report) -> f64 {
    r.workloads
        .iter()
        .find_map(|w| w.flows.as_ref())
        .map_or(f64::NAN, |f| f.fct_ms.median)
}

/// Total bulk goodput (Mbit/s) of a report's bulk workloads.
pub fn bulk_mbps(r: &Report) -> f64 {
    r.workloads
        .iter()
        .filter_map(|w| w.bulk.as_ref())
        .map(|b| b.goodput_mbps)
        .sum()
}

/// Goodput a bulk TCP download can reach through braid over links of `capacity_kbps` in
/// total: TCP payload per inner packet over the bytes it takes on a link (inner packet,
/// braid's header with its ack, UDP and IPv4).
pub fn braid_tcp_ideal_mbps(capacity_kbps: f64, mtu: usize) -> f64 {
    let payload = (mtu - 40) as f64;
    let wire = (mtu + braid_wire::HEADER_LEN + 4 + braid_wire::DATA_FIXED_LEN + 28) as f64;
    capacity_kbps / 1000.0 * payload / wire
}

/// Formats a number for tables.
pub fn f(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "-".to_owned()
    }
}

/// Where embedded scenario files' traces are found: `scenarios/` of the working directory
/// when run from the repository, else of the repository this was built from.
pub fn scenario_dir() -> PathBuf {
    let here = Path::new("scenarios");
    if here.join("../traces/ATT-LTE-driving-2016.down").exists() {
        here.to_path_buf()
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
    }
}
