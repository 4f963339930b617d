//! `lab-traces`: braid on recorded cellular links with real kernels. Three sets of two
//! recorded driving traces (scenarios/traces-*.toml: the downlinks from the recordings,
//! each uplink a constant 3 Mbit/s) emulated in real time; each link alone (both at once),
//! Linux MPTCP and braid's defaults, capacities learned by both, run one bulk download
//! (iperf3, Cubic), and in full runs the web flows at load scale 6. Headline: the worst
//! set's braid bulk goodput over MPTCP's.

use std::time::Duration;

use braid_lab::apps::web::WebResult;
use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::support::Need;
use braid_lab::{experiment, scenario_run, Lab, System};
use braid_sim::host::WebConfig;
use braid_sim::{Scenario, TraceCache};
use serde_json::{json, Value};

use crate::common::{f, scenario_dir};
use crate::lab_common::{
    braid_unavailable, bulk_groups, delivery_note, load_average, num, ready, BulkGroups,
};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabTraces;

/// The sets, embedded so the benchmark runs from any directory (their traces are found
/// beside them: `common::scenario_dir`).
const SETS: [(&str, &str); 3] = [
    (
        "traces-lte-driving.toml",
        include_str!("../../../scenarios/traces-lte-driving.toml"),
    ),
    (
        "traces-lte-2016.toml",
        include_str!("../../../scenarios/traces-lte-2016.toml"),
    ),
    (
        "traces-3g-driving.toml",
        include_str!("../../../scenarios/traces-3g-driving.toml"),
    ),
];

/// Goal for braid's bulk goodput over MPTCP's: MPTCP reaches 0.89 of the summed alone
/// goodput on the first set, and that set's capacity allows about 1.04 of it.
const GOAL: f64 = 1.05;
/// The web flows' load scale (trace-web's, about half the time saturating the best link).
const WEB_SCALE: f64 = 6.0;
/// The groups each set runs per workload: the links alone, MPTCP, braid.
const GROUPS: usize = 3;

/// How long each part runs.
struct Plan {
    /// Bulk download, s (none left out: learning the links is part of the figure).
    bulk_s: u32,
    /// Web arrivals, and the time open flows get to finish; `None`: no web part.
    web: Option<(Duration, Duration)>,
}

impl Plan {
    /// Quick: 20 s downloads, no web flows (about 4 minutes); full: 60 s downloads (the
    /// scenario files' duration), then 60 s of web arrivals (about 21 minutes).
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                bulk_s: 20,
                web: None,
            }
        } else {
            Plan {
                bulk_s: 60,
                web: Some((Duration::from_secs(60), Duration::from_secs(30))),
            }
        }
    }

    /// Nominal seconds of one set, for progress.
    fn set_s(&self) -> f64 {
        let web = self.web.map_or(0.0, |(w, _)| w.as_secs_f64());
        GROUPS as f64 * (f64::from(self.bulk_s) + web)
    }
}

/// One set's figures.
struct SetFigures {
    json: Value,
    row: Vec<String>,
    braid_over_mptcp: f64,
    braid_over_alone: f64,
    /// Best link alone's median FCT over braid's (NaN without the web part).
    web_ratio: f64,
}

fn drops_json((drops, bytes): (u64, u64), goodput_mbps: f64) -> Value {
    json!({
        "down_queue_drops": drops,
        "down_bytes_delivered": bytes,
        "drops_per_mb": num(drops as f64 / (bytes as f64 / 1e6)),
        "goodput_mbps": num(goodput_mbps),
    })
}

/// The web flows through each link alone (at once), MPTCP and braid, labelled.
fn web_groups(
    lab: &mut Lab,
    web: &WebConfig,
    seed: u64,
    (run_for, grace): (Duration, Duration),
    braid: Option<&BraidSettings>,
    tick: &mut dyn FnMut(usize, Duration),
) -> Result<Vec<(String, WebResult)>, BenchError> {
    let names: Vec<String> = lab.paths().iter().map(|p| p.name.clone()).collect();
    let groups: [Vec<System>; GROUPS] = [
        (0..names.len()).map(System::Path).collect(),
        lab.mptcp_unavailable()
            .is_none()
            .then(|| lab.mptcp())
            .into_iter()
            .collect(),
        braid
            .map(|s| System::Braid(s.label()))
            .into_iter()
            .collect(),
    ];
    let mut out = Vec::new();
    for (g, systems) in groups.iter().enumerate() {
        if systems.is_empty() {
            continue;
        }
        let _tunnel = match braid {
            Some(settings) if g == 2 => Some(BraidTunnel::start_with(lab, settings)?),
            _ => None,
        };
        let results =
            experiment::web_watched(lab, systems, web, seed, run_for, grace, &mut |_, t| {
                tick(g, t)
            })?;
        out.extend(systems.iter().map(|s| s.label(&names)).zip(results));
    }
    Ok(out)
}

fn run_set(
    file: &str,
    text: &str,
    plan: &Plan,
    opts: &mut Options<'_>,
    set_index: usize,
    notes: &mut Vec<String>,
) -> Result<SetFigures, BenchError> {
    let mut sc = Scenario::parse(
        text,
        &format!("scenarios/{file}"),
        &scenario_dir(),
        &mut TraceCache::new(),
    )?;
    sc.name = file
        .trim_start_matches("traces-")
        .trim_end_matches(".toml")
        .to_owned();
    let specs = scenario_run::paths(&sc);
    let names: Vec<String> = specs.iter().map(|p| p.name.clone()).collect();
    let mut lab = Lab::build(&specs, opts.seed)?;
    let settings = BraidSettings::default();
    let braid = braid_unavailable().is_none().then_some(&settings);
    let progress_label = format!("lab-traces {}", sc.name);
    let total_s = plan.set_s() * SETS.len() as f64;
    let set_start = plan.set_s() * set_index as f64;
    let bulk_s = f64::from(plan.bulk_s);

    let BulkGroups {
        alone,
        mptcp,
        braid: braid_bulk,
        drops,
        error_alone,
        error_mptcp,
    } = bulk_groups(
        &mut lab,
        &sc.name,
        plan.bulk_s,
        0,
        braid,
        notes,
        &mut |g, t| {
            let at = set_start + bulk_s * g as f64 + t.as_secs_f64().min(bulk_s);
            opts.progress(&progress_label, at / total_s);
        },
    )?;
    notes.push(delivery_note(
        &format!("{}, links alone", sc.name),
        &error_alone,
    ));
    notes.push(delivery_note(&format!("{}, MPTCP", sc.name), &error_mptcp));
    let alone_sum: f64 = alone.iter().map(|a| a.goodput_mbps).sum();
    let braid_over_mptcp = braid_bulk.goodput_mbps / mptcp.goodput_mbps;
    let braid_over_alone = braid_bulk.goodput_mbps / alone_sum;

    let mut web_json = serde_json::Map::new();
    let (mut best_alone_ms, mut mptcp_ms, mut braid_ms) = (f64::NAN, f64::NAN, f64::NAN);
    if let Some(times) = plan.web {
        let web = WebConfig {
            scale: WEB_SCALE,
            ..WebConfig::default()
        };
        let web_start = set_start + GROUPS as f64 * bulk_s;
        let web_s = times.0.as_secs_f64();
        let results = web_groups(&mut lab, &web, opts.seed, times, braid, &mut |g, t| {
            let at = web_start + web_s * g as f64 + t.as_secs_f64().min(web_s);
            opts.progress(&progress_label, at / total_s);
        })?;
        for (label, r) in results {
            let median = if r.fct_ms.count > 0 {
                r.fct_ms.median
            } else {
                f64::NAN
            };
            if label.starts_with("braid") {
                braid_ms = median;
            } else if label == "Linux MPTCP" {
                mptcp_ms = median;
            } else if median.is_finite() && (best_alone_ms.is_nan() || median < best_alone_ms) {
                best_alone_ms = median;
            }
            web_json.insert(label, json!(r));
        }
    }
    let web_ratio = best_alone_ms / braid_ms;

    let mut alone_json = serde_json::Map::new();
    for (name, a) in names.iter().zip(&alone) {
        alone_json.insert(name.clone(), num(a.goodput_mbps));
    }
    let json = json!({
        "scenario": format!("scenarios/{file}"),
        "paths": specs.iter().map(|p| json!({
            "name": p.name,
            "down_trace": p.down.trace,
            "one_way_delay_ms": p.down.delay_ms,
            "up_rate_mbps": p.up.rate_mbps,
        })).collect::<Vec<_>>(),
        "bulk": {
            "duration_s": plan.bulk_s,
            "alone_mbps": alone_json,
            "alone_sum_mbps": num(alone_sum),
            "mptcp": {
                "goodput_mbps": num(mptcp.goodput_mbps),
                "retransmits": mptcp.retransmits,
                "of_alone_sum": num(mptcp.goodput_mbps / alone_sum),
            },
            "braid": {
                "settings": settings.label(),
                "goodput_mbps": num(braid_bulk.goodput_mbps),
                "of_alone_sum": num(braid_over_alone),
                "over_mptcp": num(braid_over_mptcp),
            },
            "drops": {
                "alone": drops_json(drops[0], alone_sum),
                "mptcp": drops_json(drops[1], mptcp.goodput_mbps),
                "braid": drops_json(drops[2], braid_bulk.goodput_mbps),
            },
        },
        "web": if plan.web.is_some() {
            json!({
                "scale": WEB_SCALE,
                "systems": web_json,
                "best_alone_median_ms": num(best_alone_ms),
                "mptcp_median_ms": num(mptcp_ms),
                "braid_median_ms": num(braid_ms),
                "best_alone_over_braid": num(web_ratio),
            })
        } else {
            Value::Null
        },
        "emulator_delivery_error": { "alone": error_alone, "mptcp": error_mptcp },
    });
    let per_mb = |(d, b): (u64, u64)| f(d as f64 / (b as f64 / 1e6), 1);
    let row = vec![
        sc.name.clone(),
        alone
            .iter()
            .map(|a| f(a.goodput_mbps, 2))
            .collect::<Vec<_>>()
            .join(" + "),
        f(mptcp.goodput_mbps, 2),
        f(braid_bulk.goodput_mbps, 2),
        f(braid_over_mptcp, 3),
        f(braid_over_alone, 3),
        f(mptcp.goodput_mbps / alone_sum, 3),
        drops.map(per_mb).join(" / "),
        [best_alone_ms, mptcp_ms, braid_ms]
            .map(|m| f(m, 0))
            .join(" / "),
    ];
    drop(lab);
    Ok(SetFigures {
        json,
        row,
        braid_over_mptcp,
        braid_over_alone,
        web_ratio,
    })
}

/// The smallest and the median of `values` (NaN counts as smallest: a failed set is the
/// worst).
fn worst_and_median(values: &[f64]) -> (f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.total_cmp(b),
    });
    (v[0], v[v.len() / 2])
}

impl Bench for LabTraces {
    fn name(&self) -> &'static str {
        "lab-traces"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "three pairs of recorded cellular links in real time: braid's defaults vs Linux MPTCP vs each link alone (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Iperf, Need::Mptcp])?;
        let plan = Plan::new(opts.quick);
        let mut notes = vec![format!(
            "each set's downlinks replay its recorded traces from their start for every \
             system, uplinks 3 Mbit/s, queues 250 ms; one iperf3 download (Cubic) {} s, \
             nothing left out; the links alone run at once, one per link; MPTCP's first \
             subflow on the link of highest mean capacity; braid: its defaults, capacities \
             learned; web: {}; drops: packets dropped at the downlinks' queues per MB they \
             delivered; load average at the start {}",
            plan.bulk_s,
            match plan.web {
                Some((w, g)) => format!(
                    "flows at load scale {WEB_SCALE} arriving for {} s (seed {}), {} s more \
                     for open ones",
                    w.as_secs(),
                    opts.seed,
                    g.as_secs()
                ),
                None => "not run (full runs only)".to_owned(),
            },
            load_average()
        )];
        if let Some(why) = braid_unavailable() {
            notes.push(format!(
                "braid cannot run in the lab yet ({why}): no braid figures"
            ));
        }
        let mut table = Table::new([
            "set",
            "alone Mbit/s",
            "MPTCP Mbit/s",
            "braid Mbit/s",
            "braid / MPTCP",
            "braid / sum alone",
            "MPTCP / sum alone",
            "drops/MB alone / MPTCP / braid",
            "web median ms best alone / MPTCP / braid",
        ]);
        let mut systems = serde_json::Map::new();
        let (mut over_mptcp, mut over_alone, mut web) = (Vec::new(), Vec::new(), Vec::new());
        for (i, (file, text)) in SETS.iter().enumerate() {
            let set = run_set(file, text, &plan, opts, i, &mut notes)?;
            over_mptcp.push(set.braid_over_mptcp);
            over_alone.push(set.braid_over_alone);
            web.push(set.web_ratio);
            table.row(set.row.clone());
            let name = set.row[0].clone();
            systems.insert(name, set.json);
        }
        opts.progress("lab-traces", 1.0);
        notes.push(format!("load average at the end {}", load_average()));
        let (worst, median) = worst_and_median(&over_mptcp);
        let (alone_worst, alone_median) = worst_and_median(&over_alone);
        let (web_worst, web_median) = worst_and_median(&web);
        systems.insert(
            "summary".into(),
            json!({
                "braid_over_mptcp": { "worst": num(worst), "median": num(median) },
                "braid_of_alone_sum": { "worst": num(alone_worst), "median": num(alone_median) },
                "web_best_alone_over_braid": { "worst": num(web_worst), "median": num(web_median) },
            }),
        );
        notes.push(format!(
            "beside the headline: braid's bulk goodput over the links' summed alone goodput, \
             worst set {}, median {}; best link alone's web median FCT over braid's, worst \
             set {}, median {}",
            f(alone_worst, 3),
            f(alone_median, 3),
            f(web_worst, 3),
            f(web_median, 3)
        ));
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: Value::Object(systems),
            headline: Headline::new(
                "braid bulk goodput / Linux MPTCP's, worst of three recorded trace pairs",
                worst,
                None,
                GOAL,
                true,
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
    fn a_failed_set_is_the_worst() {
        assert_eq!(worst_and_median(&[1.2, 0.9, 1.1]), (0.9, 1.1));
        let (w, m) = worst_and_median(&[1.2, f64::NAN, 1.1]);
        assert!(w.is_nan());
        assert_eq!(m, 1.1);
    }

    #[test]
    fn every_set_loads_with_two_trace_driven_downlinks() {
        for (file, text) in SETS {
            let sc = Scenario::parse(text, file, &scenario_dir(), &mut TraceCache::new())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(sc.paths.len(), 2, "{file}");
            for p in &sc.paths {
                assert!(p.down.trace.is_some(), "{file}: {}", p.name);
                assert_eq!(p.up.rate_mbps, Some(3.0), "{file}: {}", p.name);
            }
        }
    }
}
