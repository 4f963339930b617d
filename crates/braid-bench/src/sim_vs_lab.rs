//! `sim-vs-lab`: the same scenario files (scenarios/sim-vs-lab-*.toml) run in the
//! simulator, whose end hosts run the Linux-like TCP model (`braid_sim::host::tcp`), and in
//! the lab (`braid lab run FILE`: real kernel Cubic, the userspace link emulator, braid's
//! real daemons), for direct TCP over the scenario's first path and for braid with its
//! defaults. Compared figures: bulk goodput, and web flows' completion-time quartiles.
//! Headline: the largest relative difference |sim − lab| / lab over them.

use braid_lab::scenario_run::{self, SystemRun};
use braid_lab::support::Need;
use braid_lab::System;
use braid_sim::host::WorkloadConfig;
use braid_sim::{Report, Scenario, TraceCache};
use serde_json::{json, Value};

use crate::common::{f, scenario_dir};
use crate::lab_common::{braid_unavailable, num, ready};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct SimVsLab;

/// The compared scenarios: (file under scenarios/, its text).
const FILES: [(&str, &str); 4] = [
    (
        "sim-vs-lab-two-paths.toml",
        include_str!("../../../scenarios/sim-vs-lab-two-paths.toml"),
    ),
    (
        "sim-vs-lab-loss.toml",
        include_str!("../../../scenarios/sim-vs-lab-loss.toml"),
    ),
    (
        "sim-vs-lab-web.toml",
        include_str!("../../../scenarios/sim-vs-lab-web.toml"),
    ),
    (
        "sim-vs-lab-blackout.toml",
        include_str!("../../../scenarios/sim-vs-lab-blackout.toml"),
    ),
];

/// Quick runs: bulk scenarios last this long (s); a web scenario's arrivals stop after
/// `QUICK_WEB_S`, and the simulator runs `WEB_TAIL_S` more for the flows to finish (the
/// lab waits for them).
const QUICK_BULK_S: f64 = 12.0;
const QUICK_WEB_S: f64 = 15.0;
const WEB_TAIL_S: f64 = 15.0;

/// The lab's IP MTU: veth's 1500 for direct TCP, the TUN device's for braid (its default,
/// 1500 less the tunnel's overhead), so the simulated hosts use the lab's MSS.
const LAB_MTU: usize = 1500;
const LAB_TUN_MTU: usize = LAB_MTU - braid_net::config::TUNNEL_OVERHEAD;

/// Loads `text`, shortened for quick runs.
fn load(
    file: &str,
    text: &str,
    quick: bool,
    traces: &mut TraceCache,
) -> Result<Scenario, BenchError> {
    let mut sc = Scenario::parse(text, &format!("scenarios/{file}"), &scenario_dir(), traces)?;
    sc.name = file.trim_end_matches(".toml").to_owned();
    if quick {
        let mut web = false;
        for w in &mut sc.workloads {
            if let WorkloadConfig::Web(c) = w {
                c.stop_s = Some(QUICK_WEB_S);
                web = true;
            }
        }
        sc.duration_s = if web {
            QUICK_WEB_S + WEB_TAIL_S
        } else {
            QUICK_BULK_S
        };
    }
    Ok(sc)
}

/// The compared figures of a simulator run, per workload in file order: (name, value).
fn sim_figures(r: &Report) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (i, w) in r.workloads.iter().enumerate() {
        if let Some(b) = &w.bulk {
            out.push((format!("w{i} goodput Mbit/s"), b.goodput_mbps));
        } else if let Some(fl) = &w.flows {
            out.extend(fct_figures(
                i,
                fl.fct_ms.p25,
                fl.fct_ms.median,
                fl.fct_ms.p75,
            ));
        }
    }
    out
}

fn fct_figures(i: usize, p25: f64, p50: f64, p75: f64) -> [(String, f64); 3] {
    [
        (format!("w{i} FCT p25 ms"), p25),
        (format!("w{i} FCT p50 ms"), p50),
        (format!("w{i} FCT p75 ms"), p75),
    ]
}

/// The same figures from a lab run's JSON (NaN where a workload failed).
fn lab_figures(sc: &Scenario, run: &SystemRun) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let get = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    for (i, w) in sc.workloads.iter().enumerate() {
        let r = &run.workloads.get(i).cloned().unwrap_or(Value::Null)["result"];
        match w {
            WorkloadConfig::Bulk(_) => {
                out.push((format!("w{i} goodput Mbit/s"), get(r, "goodput_mbps")))
            }
            WorkloadConfig::Web(_) => {
                let q = &r["fct_ms"];
                out.extend(fct_figures(
                    i,
                    get(q, "p25"),
                    get(q, "median"),
                    get(q, "p75"),
                ));
            }
            _ => {}
        }
    }
    out
}

/// Flows completed of the first web workload, sim and lab, for the table's notes.
fn flows_done(sim: &Report, lab: &SystemRun) -> Option<(u64, u64, u64)> {
    let (i, fl) = sim
        .workloads
        .iter()
        .enumerate()
        .find(|(_, w)| w.bulk.is_none() && w.flows.is_some())?;
    let fl = fl.flows.as_ref()?;
    let l = &lab.workloads.get(i)?["result"];
    Some((
        fl.completed,
        l["completed"].as_u64()?,
        l["started"].as_u64()?,
    ))
}

/// |sim − lab| / lab.
fn rel_diff(sim: f64, lab: f64) -> f64 {
    (sim - lab).abs() / lab.abs()
}

impl Bench for SimVsLab {
    fn name(&self) -> &'static str {
        "sim-vs-lab"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "the simulator's TCP model vs real kernels in the lab on the same scenario files: direct TCP and braid (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Iperf])?;
        let braid_why = braid_unavailable();
        let mut traces = TraceCache::new();
        let mut table = Table::new([
            "scenario",
            "system",
            "figure",
            "sim",
            "lab",
            "|sim-lab|/lab",
        ]);
        let mut systems = serde_json::Map::new();
        let mut notes = vec![format!(
            "each scenario file (scenarios/sim-vs-lab-*.toml) runs in the simulator and in the \
             lab (`braid lab run FILE`): direct TCP over its first path (`[engine] direct` in \
             the simulator, the path alone in the lab) and braid with its defaults; simulated \
             hosts use the lab's MTU ({LAB_MTU} direct, {LAB_TUN_MTU} through braid's TUN); \
             quick runs last {QUICK_BULK_S} s (bulk) or stop web arrivals at {QUICK_WEB_S} s"
        )];
        if let Some(why) = &braid_why {
            notes.push(format!(
                "braid cannot run in the lab here ({why}): direct TCP only"
            ));
        }
        let mut worst = (f64::NAN, String::new());
        for (k, (file, text)) in FILES.iter().enumerate() {
            opts.progress("sim-vs-lab", k as f64 / FILES.len() as f64);
            let sc = load(file, text, opts.quick, &mut traces)?;
            let direct = sc.paths[0].name.clone();
            let scheduler = crate::kebab(&sc.engine.scheduler);
            let mut compared: Vec<(String, System, Scenario)> = Vec::new();
            let mut sim_direct = sc.clone();
            sim_direct.engine.direct = Some(direct.clone());
            sim_direct.mtu = LAB_MTU;
            compared.push((format!("direct {direct}"), System::Path(0), sim_direct));
            if braid_why.is_none() {
                let mut sim_braid = sc.clone();
                sim_braid.mtu = LAB_TUN_MTU;
                compared.push(("braid".into(), System::Braid(scheduler), sim_braid));
            }
            let lab_systems: Vec<System> = compared.iter().map(|c| c.1.clone()).collect();
            let lab_runs = scenario_run::run(&sc, &lab_systems)?;
            let mut case = serde_json::Map::new();
            for ((label, _, sim_sc), lab_run) in compared.iter().zip(&lab_runs) {
                let sim = braid_sim::run(sim_sc, &mut traces, None)?;
                let lab = lab_figures(&sc, lab_run);
                let mut figures = Vec::new();
                for ((name, s), (_, l)) in sim_figures(&sim).into_iter().zip(lab) {
                    let d = rel_diff(s, l);
                    // A figure either side could not produce counts as the worst.
                    let key = if d.is_nan() { f64::INFINITY } else { d };
                    if worst.1.is_empty() || key > worst.0 {
                        worst = (key, format!("{} {label} {name}", sc.name));
                    }
                    table.row([
                        sc.name.clone(),
                        label.clone(),
                        name.clone(),
                        f(s, 2),
                        f(l, 2),
                        f(d, 3),
                    ]);
                    figures.push(
                        json!({ "figure": name, "sim": num(s), "lab": num(l), "rel_diff": num(d) }),
                    );
                }
                if let Some((sim_done, lab_done, lab_started)) = flows_done(&sim, lab_run) {
                    notes.push(format!(
                        "{} {label}: web flows completed sim {sim_done}, lab {lab_done} of {lab_started}",
                        sc.name
                    ));
                }
                case.insert(
                    label.clone(),
                    json!({
                        "figures": figures,
                        "sim_system": sim.system,
                        "lab_system": lab_run.system,
                        "lab_workloads": lab_run.workloads,
                    }),
                );
            }
            case.insert("duration_s".into(), json!(sc.duration_s));
            systems.insert(sc.name.clone(), Value::Object(case));
        }
        opts.progress("sim-vs-lab", 1.0);
        if !worst.1.is_empty() {
            notes.push(format!("largest difference: {}", worst.1));
        }
        Ok(BenchReport {
            headlines: Vec::new(),
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            systems: Value::Object(systems),
            headline: Headline::new(
                "largest |sim - lab| / lab over goodput and FCT quartiles",
                worst.0,
                None,
                0.10,
                false,
            ),
            notes,
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_load_and_quick_runs_end_after_every_blackout_and_web_arrival() {
        let mut traces = TraceCache::new();
        for (file, text) in FILES {
            for quick in [false, true] {
                let sc = load(file, text, quick, &mut traces).unwrap();
                assert!(
                    sc.engine.direct.is_none(),
                    "{file}: braid runs with defaults"
                );
                assert!(!sc.paths.is_empty(), "{file}");
                for l in sc.paths.iter().flat_map(|p| [&p.up, &p.down]) {
                    for b in &l.blackouts {
                        assert!(b.start_s + b.duration_s < sc.duration_s, "{file} {quick}");
                    }
                }
                for w in &sc.workloads {
                    if let WorkloadConfig::Web(c) = w {
                        let stop = c.stop_s.unwrap_or(sc.duration_s);
                        assert!(stop + WEB_TAIL_S <= sc.duration_s, "{file} {quick}");
                    }
                }
            }
        }
    }

    #[test]
    fn lab_figures_line_up_with_the_simulator_s() {
        let mut traces = TraceCache::new();
        let (file, text) = FILES[2];
        let sc = load(file, text, true, &mut traces).unwrap();
        let run = SystemRun {
            system: "braid".into(),
            workloads: vec![
                json!({ "result": { "fct_ms": { "p25": 1.0, "median": 2.0, "p75": 3.0 } } }),
            ],
            paths: Vec::new(),
        };
        let lab = lab_figures(&sc, &run);
        let names: Vec<&str> = lab.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["w0 FCT p25 ms", "w0 FCT p50 ms", "w0 FCT p75 ms"]);
        assert_eq!(lab[1].1, 2.0);
        assert!((rel_diff(2.2, 2.0) - 0.1).abs() < 1e-12);
        assert!(rel_diff(1.0, f64::NAN).is_nan());
    }
}
