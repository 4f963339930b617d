//! The demo in the lab: the bus's two recorded LTE links (scenarios/bus-lte.toml)
//! emulated in real time, and the three parts of crate::demo run over real TCP and UDP
//! through each link alone (both at once: they share no path), Linux MPTCP and braid with
//! its defaults, with a live per-path view while each runs.

use std::time::Duration;

use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::support::{check, Need};
use braid_lab::{experiment, Lab, LabError, System};
use braid_sim::host::WorkloadConfig;
use braid_sim::TraceCache;
use serde_json::json;

use crate::demo::{Cut, Plan, Row, Web, BRAID, CUT_IN_TRACE_S, CUT_S, MPTCP, VIDEO_MBPS};
use crate::lab_common::{delivery_error, num};
use crate::{BenchError, BenchReport, Options};

/// Why the demo cannot run in the lab here, or `None`.
pub fn unavailable() -> Option<String> {
    if let Err(e) = check(&[Need::Mptcp, Need::Iperf]) {
        return Some(e.to_string());
    }
    braid_lab::braid_daemon::unavailable()
}

/// About 85 s quick, 4.5 minutes in full (the links' capacities vary over the traces'
/// 60 s, so every system runs the same stretch of them from a fresh start).
fn plan(quick: bool) -> Plan {
    if quick {
        Plan {
            web_s: 8.0,
            bulk_s: 5.0,
            bulk_omit_s: 1.0,
            cut_trace_start_s: CUT_IN_TRACE_S - 2.0,
            cut_at_s: 2.0,
            cut_run_s: 15.0,
        }
    } else {
        Plan {
            web_s: 40.0,
            bulk_s: 20.0,
            bulk_omit_s: 3.0,
            cut_trace_start_s: CUT_IN_TRACE_S - 5.0,
            cut_at_s: 5.0,
            cut_run_s: 25.0,
        }
    }
}

/// Per-path rates between two ticks, for the live view.
struct Rates {
    label: String,
    last: Vec<(u64, u64)>,
    last_t: Duration,
}

impl Rates {
    fn new(label: &str) -> Rates {
        Rates {
            label: label.to_owned(),
            last: Vec::new(),
            last_t: Duration::ZERO,
        }
    }

    fn line(&mut self, lab: &Lab, t: Duration) -> String {
        let reports = lab.path_reports();
        let dt = t.saturating_sub(self.last_t).as_secs_f64().max(0.001);
        self.last.resize(reports.len(), (0, 0));
        let mut s = format!("{:<26} {:>3} s ", self.label, t.as_secs());
        for (k, (name, up, down)) in reports.iter().enumerate() {
            let (u, d) = (up.link.bytes_delivered, down.link.bytes_delivered);
            let (pu, pd) = self.last[k];
            let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 * 8.0 / dt / 1e6;
            s += &format!(
                "| {name} ↓{:>5.1} ↑{:>4.1} Mbit/s lost {:>4} ",
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

/// Runs the demo in the lab; `live` gets one line per second while a part runs.
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
    let paths = braid_lab::scenario_run::paths(&sc);
    let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
    let plan = plan(opts.quick);
    let web_for = Duration::from_secs_f64(plan.web_s);
    let grace = Duration::from_secs(if opts.quick { 5 } else { 10 });
    let (bulk_s, omit_s) = (plan.bulk_s as u32, plan.bulk_omit_s as u32);
    let seed = opts.seed;
    let mut lab = Lab::build(&paths, seed)?;
    let mptcp_system = lab.mptcp();
    // The better link: MPTCP's first subflow, and the route its video takes.
    let better = match mptcp_system {
        System::Mptcp { primary } => primary,
        _ => 0,
    };
    let mut notes = Vec::new();
    let mut systems = serde_json::Map::new();
    let mut rows = Vec::new();
    let mut errors = serde_json::Map::new();

    // Each link alone, both at once.
    let singles: Vec<System> = (0..paths.len()).map(System::Path).collect();
    let mut rates = Rates::new("links alone: web");
    let w = experiment::web_watched(
        &mut lab,
        &singles,
        &web,
        seed,
        web_for,
        grace,
        &mut |lab: &Lab, t| live(&rates.line(lab, t)),
    )?;
    let mut rates = Rates::new("links alone: bulk");
    let b = experiment::bulk_watched(&mut lab, &singles, bulk_s, omit_s, &mut |lab: &Lab, t| {
        live(&rates.line(lab, t))
    })?;
    errors.insert("links alone".into(), delivery_error(&lab));
    for ((s, w), b) in singles.iter().zip(w).zip(b) {
        let name = s.label(&names);
        let bulk = bulk_figure(&name, b, &mut notes);
        systems.insert(name.clone(), json!({ "web": w, "bulk": bulk.1 }));
        rows.push(Row {
            system: name,
            web: Some(web_row(&w)),
            bulk_mbps: bulk.0,
            cut: None,
        });
    }

    let mut comparisons: Vec<(&str, System)> = vec![(BRAID, System::Braid("defaults".into()))];
    match lab.mptcp_unavailable() {
        Some(why) => {
            live(&format!("Linux MPTCP unavailable here: {why}"));
            notes.push(format!("Linux MPTCP unavailable: {why}"));
        }
        None => comparisons.insert(0, (MPTCP, mptcp_system)),
    }
    for (name, system) in comparisons {
        let tunnel = match system {
            System::Braid(_) => Some(BraidTunnel::start_with(&lab, &BraidSettings::default())?),
            _ => None,
        };
        let mut rates = Rates::new(&format!("{name}: web"));
        let w = experiment::web_watched(
            &mut lab,
            std::slice::from_ref(&system),
            &web,
            seed,
            web_for,
            grace,
            &mut |lab: &Lab, t| live(&rates.line(lab, t)),
        )?
        .remove(0);
        let mut rates = Rates::new(&format!("{name}: bulk"));
        let b = experiment::bulk_watched(
            &mut lab,
            std::slice::from_ref(&system),
            bulk_s,
            omit_s,
            &mut |lab: &Lab, t| live(&rates.line(lab, t)),
        )?
        .remove(0);
        let bulk = bulk_figure(name, b, &mut notes);
        let before = tunnel.as_ref().map(engine_counters);
        let mut rates = Rates::new(&format!("{name}: {} cut", names[better]));
        let c = experiment::cut_under_video(
            &mut lab,
            &system,
            &experiment::CutPlan {
                path: better,
                trace_start_s: plan.cut_trace_start_s,
                cut_at_s: plan.cut_at_s,
                cut_s: CUT_S,
                duration_s: plan.cut_run_s,
                video_mbps: VIDEO_MBPS,
            },
            &mut |lab: &Lab, t| live(&rates.line(lab, t)),
        )?;
        errors.insert(name.into(), delivery_error(&lab));
        // The emulated links' counters over part (c): queue drops, random and blackout
        // losses per path and direction.
        let links: serde_json::Map<String, serde_json::Value> = lab
            .path_reports()
            .into_iter()
            .map(|(p, up, down)| (p, json!({ "up": up.link, "down": down.link })))
            .collect();
        // What braid's engines did during part (c): their counters' change over it.
        let engine = match (&tunnel, before) {
            (Some(t), Some(before)) => {
                let d = counters_diff(&before, &engine_counters(t));
                notes.push(engine_note(name, &d));
                Some(d)
            }
            _ => None,
        };
        if c.bulk_reset {
            notes.push(format!(
                "{name}: the bulk download of part (c) was reset or failed"
            ));
        }
        rows.push(Row {
            system: name.to_owned(),
            web: Some(web_row(&w)),
            bulk_mbps: bulk.0,
            cut: Some(Cut {
                longest_stall_ms: c.longest_stall_ms,
                video_sent: c.video.packets_sent,
                video_lost: c.video.packets_lost,
            }),
        });
        systems.insert(
            name.into(),
            json!({
                "web": w, "bulk": bulk.1, "cut": c, "links_during_cut": links,
                "engine_during_cut": engine,
            }),
        );
    }
    systems.insert(
        "settings".into(),
        json!({
            "web_s": plan.web_s, "bulk_s": plan.bulk_s, "bulk_omit_s": plan.bulk_omit_s,
            "cut_path": names[better], "cut_trace_start_s": plan.cut_trace_start_s,
            "cut_at_s": plan.cut_at_s, "cut_s": CUT_S,
            "cut_run_s": plan.cut_run_s, "video_mbps": VIDEO_MBPS,
            "emulator_delivery_error": errors,
        }),
    );
    notes.insert(
        0,
        format!(
            "in the lab: scenarios/bus-lte.toml's links emulated in real time, real TCP \
             (Cubic) and UDP; (a) {:.0} s of web flows at load scale {} (the same flows for \
             every system); (b) one iperf3 download, {bulk_s} s after {omit_s} s left out; \
             (c) an HTTP download and {VIDEO_MBPS} Mbit/s of video (CBR UDP, 1200-byte \
             datagrams, downlink) for {:.0} s from {:.0} s into the traces, {} (the better \
             link) blackholed both ways \
             from {:.0} s for {CUT_S:.0} s; stall = longest run of empty {} ms bins of the \
             download from the cut to {} s after its end; video lost = sent and never received",
            plan.web_s,
            web.scale,
            plan.cut_run_s,
            plan.cut_trace_start_s,
            names[better],
            plan.cut_at_s,
            experiment::BIN_MS,
            experiment::STALL_AFTER_S,
        ),
    );
    notes.insert(
        1,
        format!(
            "braid runs with its defaults (an empty [engine] table); Linux MPTCP's first \
             subflow is on {}, and its video, UDP, goes by that default route (MPTCP carries \
             only TCP)",
            names[better]
        ),
    );
    Ok(crate::demo::report(
        opts,
        &rows,
        serde_json::Value::Object(systems),
        notes,
    ))
}

fn web_row(w: &braid_lab::apps::web::WebResult) -> Web {
    Web {
        started: w.started,
        completed: w.completed,
        median_ms: w.fct_ms.median,
        p95_ms: w.fct_ms.p95,
    }
}

/// A bulk run's goodput (NaN when it failed, with a note) and its JSON.
fn bulk_figure(
    name: &str,
    r: Result<braid_lab::apps::iperf::IperfResult, LabError>,
    notes: &mut Vec<String>,
) -> (f64, serde_json::Value) {
    match r {
        Ok(r) => (
            r.goodput_mbps,
            json!({ "goodput_mbps": num(r.goodput_mbps), "retransmits": r.retransmits, "series": r.series }),
        ),
        Err(e) => {
            notes.push(format!("{name}: the bulk download failed: {e}"));
            (f64::NAN, json!({ "error": e.to_string() }))
        }
    }
}

/// Every numeric engine counter of both daemons' first session, keyed
/// `<role>.<path.to.counter>` (`braid status --json`); empty where a status failed.
fn engine_counters(t: &BraidTunnel) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for role in ["server", "gateway"] {
        if let Ok(v) = t.status(role) {
            flatten(role, &v["sessions"][0]["engine"], &mut out);
        }
    }
    out
}

fn flatten(
    prefix: &str,
    v: &serde_json::Value,
    out: &mut serde_json::Map<String, serde_json::Value>,
) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten(&format!("{prefix}.{k}"), x, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), x, out);
            }
        }
        serde_json::Value::Number(_) => {
            out.insert(prefix.to_owned(), v.clone());
        }
        _ => {}
    }
}

/// `after - before` for each counter (estimates such as rates and delays: their value
/// after).
fn counters_diff(
    before: &serde_json::Map<String, serde_json::Value>,
    after: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (k, a) in after {
        let d = match (
            a.as_u64(),
            before.get(k).and_then(serde_json::Value::as_u64),
        ) {
            (Some(a), Some(b)) if a >= b => json!(a - b),
            _ => a.clone(),
        };
        out.insert(k.clone(), d);
    }
    serde_json::Value::Object(out)
}

/// The counters that explain a stall and lost video: the server's (the downlink's
/// sender) send-queue drops, failover resends, retransmissions; the gateway's (receiver)
/// holes given up and its hole timeout.
fn engine_note(name: &str, d: &serde_json::Value) -> String {
    let g = |k: &str| d.get(k).map_or_else(|| "?".to_owned(), ToString::to_string);
    format!(
        "{name} during part (c), server: send-queue drops {}, failover resent {}, failover \
         left to TCP {}, trimmed from the send queue {}, retransmissions {}, nacks received {}; gateway: holes skipped {}, \
         released by hole timeout {}, hole timeout {} ms, duplicates {}",
        g("server.send_queue_drops"),
        g("server.failover_resent"),
        g("server.failover_left"),
        g("server.failover_trimmed"),
        g("server.loss_recovery.retransmissions_sent"),
        g("server.loss_recovery.nacks_received"),
        g("gateway.reorder.holes_skipped"),
        g("gateway.reorder.released_by_timeout"),
        g("gateway.reorder.hole_timeout_ms"),
        g("gateway.reorder.duplicates"),
    )
}
