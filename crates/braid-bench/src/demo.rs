//! The demo: what bonding is for, on the bus's two recorded LTE links
//! (scenarios/bus-lte.toml), through each link alone, Linux MPTCP and braid with its
//! defaults (an empty `[engine]` table), the same traffic for each, in three parts:
//!
//! - (a) riders' web flows: braid's median flow completion time against the best link
//!   alone's and MPTCP's;
//! - (b) one bulk download: braid's goodput against the links' alone goodputs summed (the
//!   capacity measured in the same run) and MPTCP's;
//! - (c) a 2 Mbit/s video stream (CBR UDP, downlink) beside a bulk download while the
//!   better link is cut for 10 s: the download's longest stall and the video lost.
//!
//! `braid demo` runs it in the lab (crate::lab_demo) where it can, else here in the
//! simulator (no MPTCP there). Both print the table and headlines built here.

use braid_lab::experiment::STALL_AFTER_S;
use braid_sim::host::{BulkConfig, UdpCbrConfig, WorkloadConfig};
use braid_sim::link::BlackoutConfig;
use braid_sim::scenario::EngineSection;
use braid_sim::{Scenario, TraceCache};
use serde_json::json;

use crate::common::{f, scenario_dir};
use crate::{BenchError, BenchReport, Headline, Options, Table};

/// The bus scenario, embedded so the demo runs from any directory.
pub const BUS: &str = include_str!("../../../scenarios/bus.toml");

/// The demo's scenario: the bus on recorded LTE traces.
pub const DEMO: &str = include_str!("../../../scenarios/bus-lte.toml");

/// The video stream's rate, Mbit/s of UDP payload.
pub const VIDEO_MBPS: f64 = 2.0;
/// How long the better link is cut in part (c), s.
pub const CUT_S: f64 = 10.0;
/// Where in the recordings the cut falls, s: att's trace seconds 70-80, where att alone
/// carries 5.9-11.1 Mbit/s every second, so the video fits on the surviving link and what
/// is lost is the failover's doing. (Early in the trace, at 7-10 s and 19-27 s, att
/// carries 0.3-1.9 Mbit/s a second: no system could keep a 2 Mbit/s video there.)
pub const CUT_IN_TRACE_S: f64 = 70.0;
/// Goals: (a) best alone / braid median FCT; (b) braid / summed alone goodput; (c) the
/// download's longest stall (ms) and the video lost (%).
pub const GOAL_WEB: f64 = 1.0;
pub const GOAL_BULK: f64 = 0.9;
pub const GOAL_STALL_MS: f64 = 300.0;
pub const GOAL_VIDEO_LOSS_PERCENT: f64 = 1.0;
/// The table's name for braid run with its defaults.
pub const BRAID: &str = "braid (defaults)";
pub const MPTCP: &str = "Linux MPTCP";

/// The demo's scenario with its traces found: under `scenarios/` of the working directory
/// when run from the repository, else of the repository this was built from.
pub fn demo_scenario(traces: &mut TraceCache) -> Result<Scenario, BenchError> {
    let mut s = Scenario::parse(DEMO, "scenarios/bus-lte.toml", &scenario_dir(), traces)?;
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

/// How long each part runs, s.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub web_s: f64,
    pub bulk_s: f64,
    /// Left out of the bulk goodput at its start (slow start).
    pub bulk_omit_s: f64,
    /// Part (c): how far into their traces the links start, when the better link is cut,
    /// and the whole run, s.
    pub cut_trace_start_s: f64,
    pub cut_at_s: f64,
    pub cut_run_s: f64,
}

/// What one system did in the three parts (NaN or `None` where it did not run the part).
#[derive(Clone, Debug)]
pub struct Row {
    pub system: String,
    pub web: Option<Web>,
    pub bulk_mbps: f64,
    pub cut: Option<Cut>,
}

/// Part (a)'s figures.
#[derive(Clone, Copy, Debug)]
pub struct Web {
    pub started: u64,
    pub completed: u64,
    pub median_ms: f64,
    pub p95_ms: f64,
}

/// Part (c)'s figures.
#[derive(Clone, Copy, Debug)]
pub struct Cut {
    pub longest_stall_ms: f64,
    pub video_sent: u64,
    pub video_lost: u64,
}

impl Cut {
    pub fn loss_percent(&self) -> f64 {
        100.0 * self.video_lost as f64 / self.video_sent.max(1) as f64
    }
}

/// The one table and the headlines of a demo run. `rows` holds the links alone first
/// (their names ending in " only"), then MPTCP and braid as they ran.
pub fn report(
    opts: &Options<'_>,
    rows: &[Row],
    systems: serde_json::Value,
    notes: Vec<String>,
) -> BenchReport {
    let find = |name: &str| rows.iter().find(|r| r.system == name);
    let alone: Vec<&Row> = rows
        .iter()
        .filter(|r| r.system.ends_with(" only"))
        .collect();
    let summed: f64 = alone.iter().map(|r| r.bulk_mbps).sum();
    let best_median = alone
        .iter()
        .filter_map(|r| r.web.filter(|w| w.completed > 0).map(|w| w.median_ms))
        .fold(f64::NAN, f64::min);
    let mut table = Table::new([
        "system",
        "(a) web flows done",
        "median FCT ms",
        "p95 ms",
        "(b) bulk Mbit/s",
        "of summed alone",
        "(c) longest stall ms",
        "video lost",
    ]);
    let dash = || "-".to_owned();
    for r in rows {
        let (done, median, p95) = r.web.map_or_else(
            || (dash(), dash(), dash()),
            |w| {
                (
                    format!("{}/{}", w.completed, w.started),
                    f(w.median_ms, 0),
                    f(w.p95_ms, 0),
                )
            },
        );
        let (stall, lost) = r.cut.map_or_else(
            || (dash(), dash()),
            |c| {
                (
                    f(c.longest_stall_ms, 0),
                    format!(
                        "{:.2}% ({}/{})",
                        c.loss_percent(),
                        c.video_lost,
                        c.video_sent
                    ),
                )
            },
        );
        table.row([
            r.system.clone(),
            done,
            median,
            p95,
            f(r.bulk_mbps, 2),
            f(r.bulk_mbps / summed, 2),
            stall,
            lost,
        ]);
    }
    table.row([
        "links alone, summed".to_owned(),
        dash(),
        dash(),
        dash(),
        f(summed, 2),
        f(1.0, 2),
        dash(),
        dash(),
    ]);

    let braid = find(BRAID);
    let mptcp = find(MPTCP);
    let median = |r: Option<&Row>| r.and_then(|r| r.web).map_or(f64::NAN, |w| w.median_ms);
    let bulk = |r: Option<&Row>| r.map_or(f64::NAN, |r| r.bulk_mbps);
    let stall = |r: Option<&Row>| {
        r.and_then(|r| r.cut)
            .map_or(f64::NAN, |c| c.longest_stall_ms)
    };
    let loss = |r: Option<&Row>| r.and_then(|r| r.cut).map_or(f64::NAN, |c| c.loss_percent());
    let with_mptcp = |h: Headline, v: f64| match mptcp {
        Some(_) => h.with_baseline(MPTCP, v),
        None => h,
    };
    let headlines = vec![
        with_mptcp(
            Headline::new(
                "(a) web: median FCT of the best link alone / braid's",
                best_median / median(braid),
                None,
                GOAL_WEB,
                true,
            ),
            best_median / median(mptcp),
        ),
        with_mptcp(
            Headline::new(
                "(b) bulk: braid's goodput / the links' alone goodputs summed",
                bulk(braid) / summed,
                None,
                GOAL_BULK,
                true,
            ),
            bulk(mptcp) / summed,
        ),
        with_mptcp(
            Headline::new(
                format!(
                    "(c) better link cut {CUT_S:.0} s: longest stall of braid's bulk download, ms"
                ),
                stall(braid),
                None,
                GOAL_STALL_MS,
                false,
            ),
            stall(mptcp),
        ),
        with_mptcp(
            Headline::new(
                format!(
                    "(c) better link cut {CUT_S:.0} s: {VIDEO_MBPS} Mbit/s video lost through braid, %"
                ),
                loss(braid),
                None,
                GOAL_VIDEO_LOSS_PERCENT,
                false,
            ),
            loss(mptcp),
        ),
    ];
    BenchReport {
        bench: "demo".to_owned(),
        seed: opts.seed,
        quick: opts.quick,
        systems,
        headline: headlines[0].clone(),
        headlines,
        notes,
        table,
    }
}

/// The durations of each part in the simulator (virtual time; fast).
fn sim_plan(quick: bool) -> Plan {
    if quick {
        Plan {
            web_s: 300.0,
            bulk_s: 30.0,
            bulk_omit_s: 2.0,
            cut_trace_start_s: CUT_IN_TRACE_S - 10.0,
            cut_at_s: 10.0,
            cut_run_s: 30.0,
        }
    } else {
        Plan {
            web_s: 1800.0,
            bulk_s: 120.0,
            bulk_omit_s: 3.0,
            cut_trace_start_s: CUT_IN_TRACE_S - 20.0,
            cut_at_s: 20.0,
            cut_run_s: 60.0,
        }
    }
}

/// The path of highest mean downlink rate (the better link; MPTCP's default route in the
/// lab).
pub fn better_path(sc: &Scenario, traces: &mut TraceCache) -> usize {
    let mut best = (0, f64::MIN);
    for (k, p) in sc.paths.iter().enumerate() {
        let rate = p.down.mean_rate_bps(traces).unwrap_or(0.0);
        if rate > best.1 {
            best = (k, rate);
        }
    }
    best.0
}

/// The series' longest run of empty intervals from `from_s` to `to_s`, ms.
fn longest_stall_ms(series: &[f64], interval_ms: f64, from_s: f64, to_s: f64) -> f64 {
    let bin = |s: f64| ((s * 1000.0 / interval_ms.max(1e-9)) as usize).min(series.len());
    let (mut longest, mut run) = (0usize, 0usize);
    for &g in series.get(bin(from_s)..bin(to_s)).unwrap_or_default() {
        run = if g == 0.0 { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest as f64 * interval_ms
}

/// Goodput of a bulk series from `from_s` on, Mbit/s.
fn mean_from(series: &[f64], interval_ms: f64, from_s: f64) -> f64 {
    let first = (from_s * 1000.0 / interval_ms.max(1e-9)) as usize;
    let s = series.get(first..).unwrap_or_default();
    s.iter().sum::<f64>() / s.len().max(1) as f64
}

/// Runs the demo in the simulator: each link alone (`direct`) and braid with its
/// defaults; Linux MPTCP runs only in the lab.
pub fn run(opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
    let mut traces = TraceCache::new();
    let mut base = demo_scenario(&mut traces)?;
    base.seed = opts.seed;
    base.engine = EngineSection::default();
    let plan = sim_plan(opts.quick);
    let better = better_path(&base, &mut traces);
    let names: Vec<String> = base.paths.iter().map(|p| p.name.clone()).collect();
    let web = base.clone();
    let bulk = Scenario {
        workloads: vec![WorkloadConfig::Bulk(BulkConfig {
            sample_ms: 50,
            ..BulkConfig::default()
        })],
        duration_s: plan.bulk_s,
        ..base.clone()
    };
    let mut cut = Scenario {
        workloads: vec![
            WorkloadConfig::Bulk(BulkConfig {
                sample_ms: 50,
                ..BulkConfig::default()
            }),
            // The stream stops a second early, so that none of it is still in flight at
            // the end: sent and never received is lost.
            WorkloadConfig::UdpCbr(UdpCbrConfig {
                rate_mbps: Some(VIDEO_MBPS),
                stop_s: Some(plan.cut_run_s - 1.0),
                ..UdpCbrConfig::default()
            }),
        ],
        duration_s: plan.cut_run_s,
        ..base.clone()
    };
    let window = BlackoutConfig {
        start_s: plan.cut_at_s,
        duration_s: CUT_S,
    };
    for p in &mut cut.paths {
        for l in [&mut p.up, &mut p.down] {
            if l.trace.is_some() {
                l.trace_offset_s = Some(l.trace_offset_s.unwrap_or(0.0) + plan.cut_trace_start_s);
            }
        }
    }
    cut.paths[better].up.blackouts.push(window.clone());
    cut.paths[better].down.blackouts.push(window);
    let mut scenarios = Vec::new();
    let mut labels = Vec::new();
    for (name, direct) in names
        .iter()
        .map(|n| (format!("{n} only"), Some(n.clone())))
        .chain([(BRAID.to_owned(), None)])
    {
        let mut w = web.clone();
        w.duration_s = plan.web_s;
        w.engine.direct = direct.clone();
        let mut b = bulk.clone();
        b.engine.direct = direct.clone();
        scenarios.push(w);
        scenarios.push(b);
        if direct.is_none() {
            scenarios.push(cut.clone());
        }
        labels.push(name);
    }
    let reports = crate::common::run_all(opts, "demo", scenarios)?;
    let mut reports = reports.into_iter();
    let mut rows = Vec::new();
    let mut systems = serde_json::Map::new();
    let missing = |what: &str| BenchError::Other(format!("the demo's {what} run reported nothing"));
    for name in labels {
        let w = reports.next().ok_or_else(|| missing("web"))?;
        let b = reports.next().ok_or_else(|| missing("bulk"))?;
        let flows = w
            .workloads
            .first()
            .and_then(|x| x.flows.clone())
            .ok_or_else(|| missing("web"))?;
        let bs = b
            .workloads
            .first()
            .and_then(|x| x.bulk.clone())
            .ok_or_else(|| missing("bulk"))?;
        let bulk_mbps = mean_from(
            &bs.goodput_mbps_series,
            bs.series_interval_ms,
            plan.bulk_omit_s,
        );
        let mut json = json!({ "web": flows, "bulk": { "goodput_mbps": bulk_mbps, "stats": bs } });
        let cut = if name == BRAID {
            let c = reports.next().ok_or_else(|| missing("cut"))?;
            let cb = c
                .workloads
                .first()
                .and_then(|x| x.bulk.clone())
                .ok_or_else(|| missing("cut"))?;
            let video = c
                .workloads
                .get(1)
                .and_then(|x| x.udp.clone())
                .ok_or_else(|| missing("cut"))?;
            let stall = longest_stall_ms(
                &cb.goodput_mbps_series,
                cb.series_interval_ms,
                plan.cut_at_s,
                plan.cut_at_s + CUT_S + STALL_AFTER_S,
            );
            json["cut"] = json!({ "longest_stall_ms": stall, "bulk": cb, "video": video });
            Some(Cut {
                longest_stall_ms: stall,
                video_sent: video.packets_sent,
                video_lost: video.packets_sent.saturating_sub(video.packets_received),
            })
        } else {
            None
        };
        systems.insert(name.clone(), json);
        rows.push(Row {
            system: name,
            web: Some(Web {
                started: flows.started,
                completed: flows.completed,
                median_ms: flows.fct_ms.median,
                p95_ms: flows.fct_ms.p95,
            }),
            bulk_mbps,
            cut,
        });
    }
    let notes = vec![
        "simulated: the Linux TCP model, no Linux MPTCP (the lab, with real kernels and \
         MPTCP side by side, needs root)"
            .into(),
        format!(
            "(a) {:.0} s of web flows (load scale 4); (b) one bulk download, {:.0} s, \
             goodput after the first {:.0} s; (c) a bulk download and {VIDEO_MBPS} Mbit/s \
             of video (CBR UDP, 1200-byte datagrams, downlink) for {:.0} s from {:.0} s into \
             the traces, {} cut both ways from {:.0} s for {CUT_S:.0} s; stall = longest run \
             of empty 50 ms intervals of the download from the cut to {STALL_AFTER_S:.0} s \
             after its end; video lost = sent and never received",
            plan.web_s,
            plan.bulk_s,
            plan.bulk_omit_s,
            plan.cut_run_s,
            plan.cut_trace_start_s,
            names[better],
            plan.cut_at_s
        ),
        "braid runs with its defaults (an empty [engine] table)".into(),
    ];
    Ok(report(
        opts,
        &rows,
        serde_json::Value::Object(systems),
        notes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_count_empty_intervals_from_the_cut() {
        let s = [1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0];
        assert_eq!(longest_stall_ms(&s, 50.0, 0.0, 1.0), 150.0);
        assert_eq!(longest_stall_ms(&s, 50.0, 0.2, 1.0), 100.0);
        assert_eq!(longest_stall_ms(&s, 50.0, 0.2, 0.3), 50.0);
        assert_eq!(longest_stall_ms(&s, 50.0, 0.2, 0.25), 0.0);
        assert_eq!(mean_from(&s, 50.0, 0.3), 1.5);
    }

    fn row(system: &str, median_ms: f64, bulk_mbps: f64, cut: Option<(f64, u64)>) -> Row {
        Row {
            system: system.to_owned(),
            web: Some(Web {
                started: 10,
                completed: 10,
                median_ms,
                p95_ms: 2.0 * median_ms,
            }),
            bulk_mbps,
            cut: cut.map(|(longest_stall_ms, video_lost)| Cut {
                longest_stall_ms,
                video_sent: 1000,
                video_lost,
            }),
        }
    }

    #[test]
    fn headlines_judge_braid_against_the_links_alone_with_mptcp_beside() {
        let opts = Options {
            quick: true,
            seed: 1,
            trace_offset_s: 0.0,
            progress: None,
        };
        let rows = [
            row("a only", 400.0, 4.0, None),
            row("b only", 100.0, 16.0, None),
            row(MPTCP, 200.0, 10.0, Some((2000.0, 500))),
            row(BRAID, 80.0, 19.0, Some((250.0, 20))),
        ];
        let r = report(&opts, &rows, serde_json::Value::Null, Vec::new());
        let h: Vec<(f64, bool, Option<f64>)> = r
            .headlines
            .iter()
            .map(|h| (h.value, h.met, h.baseline.as_ref().and_then(|b| b.value)))
            .collect();
        assert_eq!(h[0], (1.25, true, Some(0.5)));
        assert_eq!(h[1], (0.95, true, Some(0.5)));
        assert_eq!(h[2], (250.0, true, Some(2000.0)));
        assert_eq!(h[3], (2.0, false, Some(50.0)));
        assert_eq!(r.headline.value, 1.25);
        // The summed row, and a dash where a system did not run a part.
        let text = r.table.to_string();
        assert!(text.contains("links alone, summed"), "{text}");
        assert!(text
            .lines()
            .any(|l| l.starts_with("a only") && l.ends_with('-')));
        // Without MPTCP (the simulator) no baseline is shown.
        let r = report(
            &opts,
            &[rows[0].clone(), rows[1].clone(), rows[3].clone()],
            serde_json::Value::Null,
            Vec::new(),
        );
        assert!(r.headlines.iter().all(|h| h.baseline.is_none()));
    }
}
