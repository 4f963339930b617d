//! The demo in the lab: the bus on recorded LTE traces (scenarios/bus-lte.toml) emulated
//! in real time, riders' web flows over real TCP through each link alone (both at once),
//! Linux MPTCP and braid as PluriBus (the scenario's delay-based scheduler and Evolution
//! codes), with a live per-path view while each runs and a closing table.

use std::time::Duration;

use braid_lab::apps::web::WebResult;
use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::support::{check, Need};
use braid_lab::{experiment, Lab, PathSpec, System};
use braid_sim::host::WorkloadConfig;
use braid_sim::TraceCache;
use serde_json::json;

use crate::common::f;
use crate::{BenchError, BenchReport, Headline, Options, Table};

/// Why the demo cannot run in the lab here, or `None`.
pub fn unavailable() -> Option<String> {
    if let Err(e) = check(&[Need::Mptcp]) {
        return Some(e.to_string());
    }
    braid_lab::braid_daemon::unavailable()
}

/// Per-path rates between two ticks, for the live view.
struct Rates {
    last: Vec<(u64, u64)>,
    last_t: Duration,
}

impl Rates {
    fn line(&mut self, lab: &Lab, label: &str, t: Duration) -> String {
        let reports = lab.path_reports();
        let dt = (t - self.last_t).as_secs_f64().max(0.001);
        self.last.resize(reports.len(), (0, 0));
        let mut s = format!("{label:<14} {:>3} s ", t.as_secs());
        for (k, (name, up, down)) in reports.iter().enumerate() {
            let (u, d) = (up.link.bytes_delivered, down.link.bytes_delivered);
            let (pu, pd) = self.last[k];
            let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 * 8.0 / dt / 1e6;
            s += &format!(
                "| {name} ↓{:>5.1} ↑{:>4.1} Mbit/s lost {:>3} ",
                rate(d, pd),
                rate(u, pu),
                down.link.packets_lost_random
                    + down.link.packets_lost_blackout
                    + down.link.packets_dropped_queue
            );
            self.last[k] = (u, d);
        }
        self.last_t = t;
        s
    }
}

/// Runs the demo in the lab; `live` gets one line per second per running system.
pub fn run(opts: &mut Options<'_>, live: &mut dyn FnMut(&str)) -> Result<BenchReport, BenchError> {
    let mut traces = TraceCache::new();
    let sc = crate::demo::demo_scenario(&mut traces)?;
    let web = sc
        .workloads
        .iter()
        .find_map(|w| match w {
            WorkloadConfig::Web(c) => Some(c.clone()),
            _ => None,
        })
        .ok_or_else(|| BenchError::Other("the demo scenario has no web workload".into()))?;
    let paths: Vec<PathSpec> = braid_lab::scenario_run::paths(&sc);
    let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
    let secs = if opts.quick {
        20
    } else {
        sc.duration_s.round() as u64
    };
    let (run_for, grace) = (Duration::from_secs(secs), Duration::from_secs(20));
    let mut lab = Lab::build(&paths, opts.seed)?;
    let braid = BraidSettings {
        scheduler: Some(crate::kebab(&sc.engine.scheduler)),
        loss_recovery: Some(sc.engine.loss_recovery),
        aqm: None,
    };
    let braid_label = format!("braid ({})", braid.label());

    let mut results: Vec<(String, WebResult)> = Vec::new();
    let mut groups: Vec<(String, Vec<System>)> = vec![
        (
            "single links".into(),
            (0..paths.len()).map(System::Path).collect(),
        ),
        ("Linux MPTCP".into(), vec![lab.mptcp()]),
        (braid_label.clone(), vec![System::Braid(braid.label())]),
    ];
    if let Some(why) = lab.mptcp_unavailable() {
        live(&format!("Linux MPTCP unavailable here: {why}"));
        groups.retain(|g| !g.1.iter().any(System::is_mptcp));
    }
    for (label, systems) in groups {
        let _tunnel = match systems.first() {
            Some(System::Braid(_)) => Some(BraidTunnel::start_with(&lab, &braid)?),
            _ => None,
        };
        let mut rates = Rates {
            last: Vec::new(),
            last_t: Duration::ZERO,
        };
        let mut tick = |lab: &Lab, t: Duration| live(&rates.line(lab, &label, t));
        let r = experiment::web_watched(
            &mut lab, &systems, &web, opts.seed, run_for, grace, &mut tick,
        )?;
        for (s, w) in systems.iter().zip(r) {
            let name = match s {
                System::Braid(_) => braid_label.clone(),
                other => other.label(&names),
            };
            results.push((name, w));
        }
    }

    let mut table = Table::new(["system", "flows done", "FCT median ms", "p25", "p75", "p95"]);
    let mut systems = serde_json::Map::new();
    let mut best = f64::INFINITY;
    let (mut mptcp, mut braid_median) = (f64::NAN, f64::NAN);
    for (name, w) in &results {
        table.row([
            name.clone(),
            format!("{}/{}", w.completed, w.started),
            f(w.fct_ms.median, 0),
            f(w.fct_ms.p25, 0),
            f(w.fct_ms.p75, 0),
            f(w.fct_ms.p95, 0),
        ]);
        if name.ends_with(" only") && w.fct_ms.count > 0 {
            best = best.min(w.fct_ms.median);
        }
        if name == "Linux MPTCP" {
            mptcp = w.fct_ms.median;
        }
        if name == &braid_label {
            braid_median = w.fct_ms.median;
        }
        systems.insert(name.clone(), json!({ "flows": w }));
    }
    Ok(BenchReport {
        bench: "demo".to_owned(),
        seed: opts.seed,
        quick: opts.quick,
        systems: serde_json::Value::Object(systems),
        headline: Headline::new(
            "median FCT of the best single link / median FCT through braid",
            best / braid_median,
            None,
            1.0,
            true,
        ),
        notes: vec![
            format!(
                "in the lab: scenarios/bus-lte.toml's links emulated in real time, {secs} s of \
                 web flows (the same flows for every system), real TCP (Cubic)"
            ),
            format!(
                "Linux MPTCP median {} ms, braid {} ms: MPTCP / braid = {}",
                f(mptcp, 0),
                f(braid_median, 0),
                f(mptcp / braid_median, 2)
            ),
        ],
        table,
    })
}
