//! `lab-bus`: the bus of PluriBus (scenarios/bus.toml: an EVDO-like link with 150 ms RTT
//! and a lossy WiMax-like link with 40 ms RTT) emulated in the lab, riders' short web flows
//! (PluriBus §6.1, the simulator's own arrival stream) fetched over real sockets through
//! each link alone, Linux MPTCP, braid's defaults, braid as PluriBus (delay-based +
//! Evolution, the paper's algorithm) and braid with MinConnPath. Headline: MPTCP's median
//! flow completion time over that of braid's defaults.

use std::path::Path;
use std::time::Duration;

use braid_core::LossRecoveryKind;
use braid_lab::apps::web::WebResult;
use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::support::Need;
use braid_lab::{experiment, Lab, PathSpec, System};
use braid_sim::host::{WebConfig, WorkloadConfig};
use braid_sim::{Scenario, TraceCache};
use serde_json::{json, Value};

use crate::common::f;
use crate::lab_common::{braid_unavailable, delivery_error, delivery_note, num, ready};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabBus;

/// braid's configurations: (label, scheduler, loss recovery), `None` for the default.
/// The first, braid's defaults, is the headline. PluriBus is the delay-based scheduler with
/// Evolution codes (PluriBus §4); MinConnPath is its baseline without coding (§6.1).
type BraidConfig = (&'static str, Option<&'static str>, Option<&'static str>);
const BRAIDS: [BraidConfig; 3] = [
    ("braid (defaults)", None, None),
    (
        "braid (PluriBus: delay-based + Evolution)",
        Some("delay-based"),
        Some("evolution"),
    ),
    ("braid (MinConnPath)", Some("min-conn-path"), Some("none")),
];

/// The bus scenario's paths and web workload.
pub fn bus() -> Result<(Vec<PathSpec>, WebConfig), BenchError> {
    let s = Scenario::parse(
        crate::demo::BUS,
        "scenarios/bus.toml",
        Path::new("scenarios"),
        &mut TraceCache::new(),
    )?;
    let paths = s
        .paths
        .iter()
        .map(|p| PathSpec {
            name: p.name.clone(),
            up: p.up.clone(),
            down: p.down.clone(),
        })
        .collect();
    let web = s
        .workloads
        .iter()
        .find_map(|w| match w {
            WorkloadConfig::Web(c) => Some(c.clone()),
            _ => None,
        })
        .ok_or_else(|| BenchError::Other("scenarios/bus.toml has no web workload".into()))?;
    Ok((paths, web))
}

fn row(label: &str, r: &WebResult) -> Vec<String> {
    vec![
        label.to_owned(),
        format!("{}/{}", r.completed, r.started),
        f(r.fct_ms.median, 0),
        f(r.fct_ms.p25, 0),
        f(r.fct_ms.p75, 0),
        f(r.fct_ms.p95, 0),
        (r.resets + r.failed).to_string(),
    ]
}

impl Bench for LabBus {
    fn name(&self) -> &'static str {
        "lab-bus"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "PluriBus bus links emulated, short web flows over real TCP: each link, MPTCP, braid (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Mptcp])?;
        let (paths, web) = bus()?;
        let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
        let secs = if opts.quick { 45 } else { 600 };
        let run_for = Duration::from_secs(secs);
        let grace = Duration::from_secs(40);
        let braid_why = braid_unavailable();
        let mut lab = Lab::build(&paths, opts.seed)?;
        let mut table = Table::new([
            "system",
            "flows done",
            "FCT median ms",
            "p25",
            "p75",
            "p95",
            "reset/failed",
        ]);
        let mut systems = serde_json::Map::new();
        let primary = match lab.mptcp() {
            System::Mptcp { primary } => names.get(primary).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        let mut notes = vec![format!(
            "scenarios/bus.toml's links emulated in real time; web flows (scale {}, seed {}) \
             for {secs} s, the same flows for every system; Cubic on real kernels; the two \
             single links run at once; MPTCP's first subflow on {} (the path of highest \
             capacity)",
            web.scale, opts.seed, primary,
        )];

        opts.progress("lab-bus", 0.0);
        let singles: Vec<System> = (0..paths.len()).map(System::Path).collect();
        let results = experiment::web(&mut lab, &singles, &web, opts.seed, run_for, grace)?;
        let mut best = f64::NAN;
        for (s, r) in singles.iter().zip(&results) {
            let label = s.label(&names);
            table.row(row(&label, r));
            systems.insert(label, json!(r));
            if r.fct_ms.count > 0 && (best.is_nan() || r.fct_ms.median < best) {
                best = r.fct_ms.median;
            }
        }
        notes.push(delivery_note("single links", &delivery_error(&lab)));

        opts.progress("lab-bus", 0.3);
        let mut mptcp = f64::NAN;
        if let Some(why) = lab.mptcp_unavailable() {
            notes.push(format!("Linux MPTCP unavailable: {why}"));
        } else {
            let mptcp_system = lab.mptcp();
            let r = experiment::web(&mut lab, &[mptcp_system], &web, opts.seed, run_for, grace)?;
            let label = lab.mptcp().label(&names);
            table.row(row(&label, &r[0]));
            mptcp = r[0].fct_ms.median;
            systems.insert(label, json!(r[0]));
            notes.push(delivery_note("MPTCP", &delivery_error(&lab)));
        }

        let mut braid = f64::NAN;
        match &braid_why {
            Some(why) => {
                notes.push(format!(
                    "braid cannot run in the lab yet ({why}): no braid figures"
                ));
                for (label, _, _) in BRAIDS {
                    systems.insert(label.to_owned(), json!({ "unavailable": why }));
                }
            }
            None => {
                for (i, (label, scheduler, recovery)) in BRAIDS.iter().enumerate() {
                    opts.progress("lab-bus", 0.6 + 0.4 * i as f64 / BRAIDS.len() as f64);
                    let loss_recovery = recovery
                        .map(|r| {
                            LossRecoveryKind::from_name(r)
                                .ok_or_else(|| BenchError::Other(format!("no loss recovery {r}")))
                        })
                        .transpose()?;
                    let settings = BraidSettings {
                        scheduler: scheduler.map(str::to_owned),
                        loss_recovery,
                        aqm: None,
                        tcp_transport: None,
                        reordering: None,
                    };
                    let _tunnel = BraidTunnel::start_with(&lab, &settings)?;
                    let system = System::Braid(settings.label());
                    let r = experiment::web(&mut lab, &[system], &web, opts.seed, run_for, grace)?;
                    table.row(row(label, &r[0]));
                    if i == 0 {
                        braid = r[0].fct_ms.median;
                    }
                    systems.insert((*label).to_owned(), json!(r[0]));
                }
            }
        }
        opts.progress("lab-bus", 1.0);
        systems.insert(
            "summary".into(),
            json!({
                "best_single_median_ms": num(best),
                "mptcp_median_ms": num(mptcp),
                "braid_median_ms": num(braid),
            }),
        );
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: Value::Object(systems),
            headline: Headline::new(
                "Linux MPTCP median FCT / braid's defaults' median FCT",
                mptcp / braid,
                None,
                2.0,
                true,
            ),
            notes,
            table,
        })
    }
}
