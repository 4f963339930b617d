//! `trace-bulk`, `trace-web` and `trace-pairs`: braid over recorded cellular, 5G and WiFi
//! links (the sets of [`crate::trace_sets`]) against each link used alone, with MinConnPath
//! and round-robin beside it (issue 18). A link whose rate swings tenfold within a second is
//! where a scheduler that predicts delivery from capacity estimates overdrives a link whose
//! capacity just fell; the bottleneck drops per MB the downlinks delivered show it.
//!
//! - `trace-bulk`: one TCP download. Headline: the worst set's braid goodput over the sum of
//!   its links' goodputs alone (goal 0.95; the median over sets is reported beside it).
//! - `trace-web`: short web flows at a load that keeps the best link busy about half the
//!   time, and a 2 Mbit/s UDP video. Headline: the worst set's best-alone median flow
//!   completion time over braid's (goal 1.0).
//! - `trace-pairs`: issue 18's table, its four pairs at its settings (load scale 6).

use std::path::Path;

use braid_sim::metrics::Summary;
use braid_sim::{Report, Scenario, TraceCache};
use serde_json::{json, Value};

use crate::common::{bulk_mbps, engine_of, f, run_all, BRAID_DEFAULTS};
use crate::trace_sets::{self, TraceSet, ISSUE_PAIRS, SETS, UPLINK_KBPS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct TraceBulk;
pub struct TraceWeb;
pub struct TracePairs;

/// braid's defaults (the headline), then the baselines bonded the same way.
const SYSTEMS: [&str; 3] = [BRAID_DEFAULTS, "min-conn-path", "round-robin"];
/// Goals: braid's bulk goodput over the summed alone goodputs; best alone median FCT over
/// braid's.
const GOAL_BULK: f64 = 0.95;
const GOAL_WEB: f64 = 1.0;
/// Offered load of the web workload per unit of load scale, bit/s: the SURGE mean flow
/// (51 245 bytes) every 2.6 s (docs/scenarios.md).
const WEB_BPS_PER_SCALE: f64 = 51_245.0 * 8.0 / 2.6;
/// The best link's share kept busy by the web flows: a link offered half its capacity is
/// transmitting (saturated) about half the time.
const WEB_UTILIZATION: f64 = 0.5;
/// The video: 2 Mbit/s of 1200-byte datagrams.
const VIDEO_KBPS: f64 = 2000.0;
const VIDEO_PACKET: usize = 1200;
/// The video stops this long before the run ends, so that every datagram still missing
/// then is lost (a dead link delivers nothing after its last).
const VIDEO_TAIL_S: f64 = 5.0;
/// issue 18's load scale for `trace-pairs`.
const PAIRS_WEB_SCALE: f64 = 6.0;

/// A set's runs of one workload: each link alone, then each of [`SYSTEMS`].
struct SetRuns<'a> {
    set: &'a TraceSet,
    alone: Vec<Report>,
    systems: Vec<Report>,
}

/// Where the runs' traces start, for the notes: nothing at their start.
fn stretch(opts: &Options<'_>) -> String {
    if opts.trace_offset_s > 0.0 {
        format!(", every trace from {} s into it", opts.trace_offset_s)
    } else {
        String::new()
    }
}

/// Checks that every trace of `sets` is in `dir`, naming the missing ones.
pub(crate) fn check_traces(bench: &str, sets: &[TraceSet], dir: &Path) -> Result<(), BenchError> {
    let missing = trace_sets::missing(sets, dir);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Other(format!(
            "{bench}: {} lacks {} (traces/README.md names each file's source)",
            dir.display(),
            missing.join(", ")
        )))
    }
}

/// The `[[path]]` tables of a set: each downlink its trace from `offset_s` into it, each
/// uplink constant.
fn paths(set: &TraceSet, offset_s: f64) -> String {
    let offset = if offset_s > 0.0 {
        format!(", trace_offset_s = {offset_s}")
    } else {
        String::new()
    };
    set.links
        .iter()
        .map(|l| {
            format!(
                "[[path]]\nname = \"{}\"\nup = {{ rate_kbps = {UPLINK_KBPS}, delay_ms = {} }}\n\
                 down = {{ trace = \"{}\", delay_ms = {}{offset} }}\n",
                l.name, l.delay_ms, l.trace, l.delay_ms
            )
        })
        .collect()
}

/// Runs `scenarios` with the costliest first, so that no long run is left for the end on
/// one thread; reports come back in the order given. `cost` is per scenario.
fn run_costliest_first(
    opts: &mut Options<'_>,
    label: &str,
    scenarios: Vec<Scenario>,
    cost: &[f64],
) -> Result<Vec<Report>, BenchError> {
    let mut order: Vec<usize> = (0..scenarios.len()).collect();
    order.sort_by(|&a, &b| cost[b].total_cmp(&cost[a]));
    let mut slots: Vec<Option<Scenario>> = scenarios.into_iter().map(Some).collect();
    let sorted = order.iter().filter_map(|&i| slots[i].take()).collect();
    let mut out: Vec<Option<Report>> = (0..order.len()).map(|_| None).collect();
    for (r, &i) in run_all(opts, label, sorted)?.into_iter().zip(&order) {
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.ok_or_else(|| BenchError::Other(format!("{label}: a run is missing"))))
        .collect()
}

/// The simulator's work for a set's run of `duration_s`, roughly: its links' summed mean
/// capacity times the simulated time.
fn cost(
    set: &TraceSet,
    dir: &Path,
    offset_s: f64,
    duration_s: f64,
    traces: &mut TraceCache,
) -> f64 {
    let d = duration_s * set.time_share;
    set.links
        .iter()
        .map(|l| {
            trace_sets::window_rate_bps(traces, &dir.join(l.trace), offset_s, d).unwrap_or(0.0)
        })
        .sum::<f64>()
        * d
}

/// Scenarios to run together, each with its cost.
struct Batch<'d> {
    dir: &'d Path,
    seed: u64,
    offset_s: f64,
    traces: TraceCache,
    scenarios: Vec<Scenario>,
    cost: Vec<f64>,
}

impl<'d> Batch<'d> {
    fn new(dir: &'d Path, seed: u64, offset_s: f64) -> Batch<'d> {
        Batch {
            dir,
            seed,
            offset_s,
            traces: TraceCache::new(),
            scenarios: Vec::new(),
            cost: Vec::new(),
        }
    }

    /// A set's scenarios for `workload`: each link alone (direct TCP or UDP over it), then
    /// each of [`SYSTEMS`].
    fn scenarios(
        &mut self,
        set: &TraceSet,
        label: &str,
        workload: &str,
        duration_s: f64,
    ) -> Result<Vec<Scenario>, BenchError> {
        let p = paths(set, self.offset_s);
        let duration_s = duration_s * set.time_share;
        let seed = self.seed;
        let engines = set
            .links
            .iter()
            .map(|l| (l.name.to_owned(), format!("direct = \"{}\"", l.name)))
            .chain(SYSTEMS.iter().map(|s| (s.to_string(), engine_of(s))));
        engines
            .map(|(system, engine)| {
                let name = format!("{}-{label}-{system}", set.name);
                let text = format!(
                    "name = \"{name}\"\nduration_s = {duration_s}\nseed = {seed}\n[engine]\n{engine}\n{p}\n{workload}"
                );
                Ok(Scenario::parse(&text, &name, self.dir, &mut self.traces)?)
            })
            .collect()
    }

    /// Adds a set's runs of `workload` (see [`Batch::scenarios`]); `rate_bps`, when given, is the
    /// rate the workload offers, which bounds the work better than the links' capacity.
    fn add(
        &mut self,
        set: &TraceSet,
        label: &str,
        workload: &str,
        duration_s: f64,
        rate_bps: Option<f64>,
    ) -> Result<(), BenchError> {
        let runs = self.scenarios(set, label, workload, duration_s)?;
        let c = match rate_bps {
            Some(r) => r * duration_s * set.time_share,
            None => cost(set, self.dir, self.offset_s, duration_s, &mut self.traces),
        };
        self.cost.extend(std::iter::repeat_n(c, runs.len()));
        self.scenarios.extend(runs);
        Ok(())
    }

    fn run(self, opts: &mut Options<'_>, label: &str) -> Result<Vec<Report>, BenchError> {
        run_costliest_first(opts, label, self.scenarios, &self.cost)
    }
}

/// Splits `reports`, in the order [`Batch::scenarios`] made them set after set.
fn split<'a>(sets: &'a [TraceSet], reports: &mut impl Iterator<Item = Report>) -> Vec<SetRuns<'a>> {
    sets.iter()
        .map(|set| SetRuns {
            set,
            alone: reports.by_ref().take(set.links.len()).collect(),
            systems: reports.by_ref().take(SYSTEMS.len()).collect(),
        })
        .collect()
}

/// Packets dropped at the tail of a full link queue, every link both ways.
fn queue_drops(r: &Report) -> u64 {
    r.paths
        .iter()
        .map(|p| p.up.packets_dropped_queue + p.down.packets_dropped_queue)
        .sum()
}

/// MB the downlinks delivered.
fn down_mb(r: &Report) -> f64 {
    r.paths.iter().map(|p| p.down.bytes_delivered).sum::<u64>() as f64 / 1e6
}

/// Bottleneck drops per MB delivered over `runs` together.
fn drops_per_mb<'a>(runs: impl IntoIterator<Item = &'a Report>) -> f64 {
    let (d, mb) = runs
        .into_iter()
        .fold((0, 0.0), |(d, mb), r| (d + queue_drops(r), mb + down_mb(r)));
    d as f64 / mb
}

pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub(crate) fn worst(values: &[f64]) -> f64 {
    values.iter().copied().fold(
        f64::INFINITY,
        |a, b| if b.is_nan() { f64::NAN } else { a.min(b) },
    )
}

fn links_json(
    set: &TraceSet,
    dir: &Path,
    offset_s: f64,
    duration_s: f64,
    traces: &mut TraceCache,
) -> Value {
    set.links
        .iter()
        .map(|l| {
            let mbps = trace_sets::window_rate_bps(
                traces,
                &dir.join(l.trace),
                offset_s,
                duration_s * set.time_share,
            )
            .map_or(f64::NAN, |r| r / 1e6);
            json!({ "name": l.name, "trace": l.trace, "radio": l.radio, "delay_ms": l.delay_ms,
                    "mean_down_mbps": mbps, "up_kbps": UPLINK_KBPS })
        })
        .collect()
}

/// Bulk figures of one set.
struct BulkRow {
    alone: Vec<f64>,
    systems: Vec<f64>,
    sum: f64,
    best: f64,
}

impl BulkRow {
    fn new(runs: &SetRuns<'_>) -> BulkRow {
        let alone: Vec<f64> = runs.alone.iter().map(bulk_mbps).collect();
        BulkRow {
            sum: alone.iter().sum(),
            best: alone.iter().copied().fold(0.0, f64::max),
            systems: runs.systems.iter().map(bulk_mbps).collect(),
            alone,
        }
    }

    fn json(&self, runs: &SetRuns<'_>) -> Value {
        let mut sys = serde_json::Map::new();
        for (i, l) in runs.set.links.iter().enumerate() {
            sys.insert(
                format!("alone {}", l.name),
                json!({ "goodput_mbps": self.alone[i],
                        "drops_per_mb": drops_per_mb([&runs.alone[i]]) }),
            );
        }
        for (j, s) in SYSTEMS.iter().enumerate() {
            sys.insert(
                s.to_string(),
                json!({ "goodput_mbps": self.systems[j],
                        "over_sum_alone": self.systems[j] / self.sum,
                        "over_best_alone": self.systems[j] / self.best,
                        "drops_per_mb": drops_per_mb([&runs.systems[j]]) }),
            );
        }
        json!({ "sum_alone_mbps": self.sum, "best_alone_mbps": self.best,
                "alone_drops_per_mb": drops_per_mb(&runs.alone), "systems": sys })
    }
}

/// Median flow completion time (ms) over every flow the web workload started or turned
/// away, those that never finished counted as slower than all that did: a link dead for
/// most of a run finishes few flows, and those few fast. The quantile of the finished
/// flows that this is, interpolated linearly between the reported ones; infinite when
/// fewer than half finished.
fn median_fct_all_ms(r: &Report) -> f64 {
    r.workloads
        .iter()
        .find_map(|w| w.flows.as_ref())
        .map_or(f64::NAN, |fl| {
            censored_median(fl.started + fl.rejected, &fl.fct_ms)
        })
}

/// The median of `total` samples of which `finished` summarizes the finite ones, the rest
/// being larger than all of them.
fn censored_median(total: u64, finished: &Summary) -> f64 {
    let (total, done) = (total as f64, finished.count as f64);
    if done == 0.0 || done < total / 2.0 {
        return f64::INFINITY;
    }
    let q = 0.5 * total / done;
    let s = finished;
    let points = [
        (0.0, s.min),
        (0.25, s.p25),
        (0.5, s.median),
        (0.75, s.p75),
        (0.95, s.p95),
        (1.0, s.max),
    ];
    points.windows(2).find(|w| q <= w[1].0).map_or(s.max, |w| {
        let ((q0, v0), (q1, v1)) = (w[0], w[1]);
        v0 + (v1 - v0) * (q - q0) / (q1 - q0)
    })
}

/// `best / system` of two medians, 1 where neither finished half its flows.
fn fct_ratio(best: f64, system: f64) -> f64 {
    if best.is_infinite() && system.is_infinite() {
        1.0
    } else {
        best / system
    }
}

/// Web figures of one set.
struct WebRow {
    alone: Vec<f64>,
    systems: Vec<f64>,
    best: f64,
    best_link: usize,
}

impl WebRow {
    fn new(runs: &SetRuns<'_>) -> WebRow {
        let alone: Vec<f64> = runs.alone.iter().map(median_fct_all_ms).collect();
        let best_link = (0..alone.len())
            .min_by(|&a, &b| alone[a].total_cmp(&alone[b]))
            .unwrap_or(0);
        WebRow {
            best: alone.get(best_link).copied().unwrap_or(f64::NAN),
            best_link,
            systems: runs.systems.iter().map(median_fct_all_ms).collect(),
            alone,
        }
    }

    fn ratio(&self, j: usize) -> f64 {
        fct_ratio(self.best, self.systems[j])
    }

    /// Bottleneck drops per MB of the best link's run alone.
    fn best_drops_per_mb(&self, runs: &SetRuns<'_>) -> f64 {
        runs.alone
            .get(self.best_link)
            .map_or(f64::NAN, |r| drops_per_mb([r]))
    }

    fn json(&self, runs: &SetRuns<'_>) -> Value {
        let flows = |r: &Report| {
            r.workloads
                .iter()
                .find_map(|w| w.flows.as_ref())
                .map_or(json!(null), |fl| {
                    json!({ "median_fct_ms": median_fct_all_ms(r),
                            "median_finished_fct_ms": fl.fct_ms.median, "p95_finished_fct_ms": fl.fct_ms.p95,
                            "started": fl.started, "rejected": fl.rejected, "completed": fl.completed,
                            "drops_per_mb": drops_per_mb([r]) })
                })
        };
        let mut sys = serde_json::Map::new();
        for (i, l) in runs.set.links.iter().enumerate() {
            sys.insert(format!("alone {}", l.name), flows(&runs.alone[i]));
        }
        for (j, s) in SYSTEMS.iter().enumerate() {
            let mut v = flows(&runs.systems[j]);
            if let Some(o) = v.as_object_mut() {
                o.insert("best_alone_over".into(), json!(self.ratio(j)));
            }
            sys.insert(s.to_string(), v);
        }
        json!({ "best_alone": runs.set.links[self.best_link].name,
                "best_alone_median_fct_ms": self.best,
                "best_alone_drops_per_mb": self.best_drops_per_mb(runs), "systems": sys })
    }
}

/// A video run's loss (the share of datagrams sent that never arrived) and p95 one-way
/// delay (ms) of those that did.
fn video(r: &Report) -> (f64, f64) {
    r.workloads
        .iter()
        .find_map(|w| w.udp.as_ref())
        .map_or((f64::NAN, f64::NAN), |u| {
            let lost = 1.0 - u.packets_received as f64 / u.packets_sent.max(1) as f64;
            (lost, u.one_way_delay_ms.p95)
        })
}

/// Video figures of one set: the best link alone is the one losing least (then the lower
/// p95 delay).
struct VideoRow {
    best_link: usize,
    best: (f64, f64),
    systems: Vec<(f64, f64)>,
}

impl VideoRow {
    fn new(runs: &SetRuns<'_>) -> VideoRow {
        let alone: Vec<(f64, f64)> = runs.alone.iter().map(video).collect();
        let best_link = (0..alone.len())
            .min_by(|&a, &b| {
                alone[a]
                    .0
                    .total_cmp(&alone[b].0)
                    .then(alone[a].1.total_cmp(&alone[b].1))
            })
            .unwrap_or(0);
        VideoRow {
            best_link,
            best: alone
                .get(best_link)
                .copied()
                .unwrap_or((f64::NAN, f64::NAN)),
            systems: runs.systems.iter().map(video).collect(),
        }
    }

    fn json(&self, runs: &SetRuns<'_>) -> Value {
        let mut sys = serde_json::Map::new();
        for (i, l) in runs.set.links.iter().enumerate() {
            let (loss, p95) = video(&runs.alone[i]);
            sys.insert(
                format!("alone {}", l.name),
                json!({ "loss": loss, "p95_delay_ms": p95 }),
            );
        }
        for (j, s) in SYSTEMS.iter().enumerate() {
            let (loss, p95) = self.systems[j];
            sys.insert(
                s.to_string(),
                json!({ "loss": loss, "p95_delay_ms": p95,
                        "loss_minus_best_alone": loss - self.best.0,
                        "p95_over_best_alone": p95 / self.best.1 }),
            );
        }
        json!({ "best_alone": runs.set.links[self.best_link].name, "systems": sys })
    }
}

fn bulk_workload() -> String {
    "[[workload]]\nkind = \"bulk\"\n".to_owned()
}

fn web_workload(scale: f64) -> String {
    format!("[[workload]]\nkind = \"web\"\nscale = {scale}\n")
}

/// Load scale at which a set's web flows offer [`WEB_UTILIZATION`] of its best link's mean
/// capacity over the run, to one decimal.
fn web_scale(
    set: &TraceSet,
    dir: &Path,
    offset_s: f64,
    duration_s: f64,
    traces: &mut TraceCache,
) -> Result<f64, BenchError> {
    let mut best: f64 = 0.0;
    for l in set.links {
        let d = duration_s * set.time_share;
        let r = trace_sets::window_rate_bps(traces, &dir.join(l.trace), offset_s, d)
            .map_err(|e| BenchError::Other(format!("{}: {e}", set.name)))?;
        best = best.max(r);
    }
    Ok((WEB_UTILIZATION * best / WEB_BPS_PER_SCALE * 10.0)
        .round()
        .max(1.0)
        / 10.0)
}

/// The busy share of a direct run's link: downlink bytes delivered over its capacity.
fn utilization(r: &Report, capacity_bps: f64) -> f64 {
    down_mb(r) * 8e6 / (capacity_bps * r.duration_s)
}

fn ratio_cells(v: &[f64]) -> String {
    v.iter().map(|x| f(*x, 2)).collect::<Vec<_>>().join(" / ")
}

impl Bench for TraceBulk {
    fn name(&self) -> &'static str {
        "trace-bulk"
    }

    fn summary(&self) -> &'static str {
        "bulk TCP over 20 sets of recorded LTE, 3G, 5G and WiFi links: braid's defaults against the sum of the links alone"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 60.0 } else { 120.0 };
        let dir = trace_sets::traces_dir();
        check_traces(self.name(), SETS, &dir)?;
        let mut batch = Batch::new(&dir, opts.seed, opts.trace_offset_s);
        for set in SETS {
            batch.add(set, "bulk", &bulk_workload(), duration, None)?;
        }
        let reports = batch.run(opts, "trace-bulk")?;
        let mut traces = TraceCache::new();
        let runs = split(SETS, &mut reports.into_iter());
        let mut table = Table::new([
            "set",
            "alone Mbit/s",
            "braid",
            "/ sum",
            "/ best",
            "min-conn / sum",
            "rr / sum",
            "drops/MB alone",
            "braid",
            "min-conn",
            "rr",
        ]);
        let mut rows = Vec::new();
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); SYSTEMS.len()];
        let mut drops: Vec<Vec<f64>> = vec![Vec::new(); SYSTEMS.len() + 1];
        for r in &runs {
            let b = BulkRow::new(r);
            for j in 0..SYSTEMS.len() {
                ratios[j].push(b.systems[j] / b.sum);
                drops[j + 1].push(drops_per_mb([&r.systems[j]]));
            }
            drops[0].push(drops_per_mb(&r.alone));
            table.row([
                r.set.name.to_owned(),
                ratio_cells(&b.alone),
                f(b.systems[0], 2),
                f(b.systems[0] / b.sum, 3),
                f(b.systems[0] / b.best, 3),
                f(b.systems[1] / b.sum, 3),
                f(b.systems[2] / b.sum, 3),
                f(drops_per_mb(&r.alone), 1),
                f(drops_per_mb([&r.systems[0]]), 1),
                f(drops_per_mb([&r.systems[1]]), 1),
                f(drops_per_mb([&r.systems[2]]), 1),
            ]);
            let mut v = b.json(r);
            if let Some(o) = v.as_object_mut() {
                o.insert("set".into(), json!(r.set.name));
                o.insert("what".into(), json!(r.set.what));
                o.insert(
                    "links".into(),
                    links_json(r.set, &dir, opts.trace_offset_s, duration, &mut traces),
                );
            }
            rows.push(v);
        }
        let worst_idx = (0..runs.len())
            .min_by(|&a, &b| ratios[0][a].total_cmp(&ratios[0][b]))
            .unwrap_or(0);
        let mut summary = serde_json::Map::new();
        for (j, s) in SYSTEMS.iter().enumerate() {
            summary.insert(
                s.to_string(),
                json!({ "worst_over_sum_alone": worst(&ratios[j]),
                        "median_over_sum_alone": median(&ratios[j]),
                        "median_drops_per_mb": median(&drops[j + 1]) }),
            );
        }
        summary.insert(
            "alone".into(),
            json!({ "median_drops_per_mb": median(&drops[0]) }),
        );
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "summary": summary, "sets": rows }),
            headline: Headline::new(
                "worst set's braid bulk goodput / sum of its links' goodputs alone",
                worst(&ratios[0]),
                None,
                GOAL_BULK,
                true,
            ),
            notes: vec![
                format!(
                    "worst set {}; median over the {} sets {:.3} (min-conn-path {:.3}, round-robin {:.3})",
                    runs.get(worst_idx).map_or("-", |r| r.set.name),
                    runs.len(),
                    median(&ratios[0]),
                    median(&ratios[1]),
                    median(&ratios[2]),
                ),
                format!(
                    "one TCP download (the Linux-like model) for {duration} s, seed {}{}; each link alone \
                     is direct TCP over it; braid with its defaults, capacities learned; every downlink \
                     its trace from traces/ with the set's one-way delay both ways, every uplink a \
                     constant {UPLINK_KBPS} kbit/s, queues 250 ms at the link's mean rate",
                    opts.seed,
                    stretch(opts),
                ),
                format!(
                    "drops/MB: packets dropped at full link queues (both ways) per MB the downlinks \
                     delivered; alone: the links' runs alone together. Median over sets: alone {:.1}, \
                     braid {:.1}, min-conn-path {:.1}, round-robin {:.1}",
                    median(&drops[0]),
                    median(&drops[1]),
                    median(&drops[2]),
                    median(&drops[3]),
                ),
            ],
            table,
        })
    }
}

impl Bench for TraceWeb {
    fn name(&self) -> &'static str {
        "trace-web"
    }

    fn summary(&self) -> &'static str {
        "web flows and a 2 Mbit/s video over 20 sets of recorded links: braid's defaults against the best link alone"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let (web_s, video_s) = if opts.quick {
            (120.0, 60.0)
        } else {
            (300.0, 120.0)
        };
        let dir = trace_sets::traces_dir();
        check_traces(self.name(), SETS, &dir)?;
        let mut traces = TraceCache::new();
        let mut batch = Batch::new(&dir, opts.seed, opts.trace_offset_s);
        let mut scales = Vec::new();
        for set in SETS {
            let scale = web_scale(set, &dir, opts.trace_offset_s, web_s, &mut traces)?;
            scales.push(scale);
            batch.add(set, "web", &web_workload(scale), web_s, None)?;
        }
        for set in SETS {
            let stop = video_s * set.time_share - VIDEO_TAIL_S;
            let video = format!(
                "[[workload]]\nkind = \"udp-cbr\"\nrate_kbps = {VIDEO_KBPS}\n\
                 packet_bytes = {VIDEO_PACKET}\nstop_s = {stop}\n"
            );
            batch.add(set, "video", &video, video_s, Some(VIDEO_KBPS * 1e3))?;
        }
        let reports = batch.run(opts, "trace-web")?;
        let mut it = reports.into_iter();
        let web = split(SETS, &mut it);
        let vid = split(SETS, &mut it);
        let mut table = Table::new([
            "set",
            "scale",
            "best busy",
            "alone median ms",
            "braid",
            "best / braid",
            "min-conn",
            "rr",
            "drops/MB best alone",
            "braid",
            "video loss % best",
            "braid",
            "p95 ms best",
            "braid",
        ]);
        let mut rows = Vec::new();
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); SYSTEMS.len()];
        let mut drops: Vec<Vec<f64>> = vec![Vec::new(); SYSTEMS.len() + 1];
        let mut video_worst: Option<(f64, &str)> = None;
        for (k, (w, v)) in web.iter().zip(&vid).enumerate() {
            let wr = WebRow::new(w);
            let vr = VideoRow::new(v);
            for j in 0..SYSTEMS.len() {
                ratios[j].push(wr.ratio(j));
                drops[j + 1].push(drops_per_mb([&w.systems[j]]));
            }
            drops[0].push(wr.best_drops_per_mb(w));
            // The busy share of the link the load was sized on.
            let rates: Vec<f64> = w
                .set
                .links
                .iter()
                .map(|l| {
                    trace_sets::window_rate_bps(
                        &mut traces,
                        &dir.join(l.trace),
                        opts.trace_offset_s,
                        web_s * w.set.time_share,
                    )
                    .unwrap_or(f64::NAN)
                })
                .collect();
            let fastest = (0..rates.len())
                .max_by(|&a, &b| rates[a].total_cmp(&rates[b]))
                .unwrap_or(0);
            let busy = utilization(&w.alone[fastest], rates[fastest]);
            let excess = vr.systems[0].0 - vr.best.0;
            if video_worst.is_none_or(|(e, _)| excess > e) {
                video_worst = Some((excess, w.set.name));
            }
            table.row([
                w.set.name.to_owned(),
                f(scales[k], 1),
                f(busy, 2),
                ratio_cells(&wr.alone),
                f(wr.systems[0], 0),
                f(wr.ratio(0), 3),
                f(wr.ratio(1), 3),
                f(wr.ratio(2), 3),
                f(wr.best_drops_per_mb(w), 1),
                f(drops_per_mb([&w.systems[0]]), 1),
                f(vr.best.0 * 100.0, 2),
                f(vr.systems[0].0 * 100.0, 2),
                f(vr.best.1, 0),
                f(vr.systems[0].1, 0),
            ]);
            rows.push(json!({
                "set": w.set.name, "what": w.set.what,
                "links": links_json(w.set, &dir, opts.trace_offset_s, web_s, &mut traces),
                "web_scale": scales[k], "best_link_busy": busy,
                "web": wr.json(w), "video": vr.json(v),
            }));
        }
        let worst_idx = (0..web.len())
            .min_by(|&a, &b| ratios[0][a].total_cmp(&ratios[0][b]))
            .unwrap_or(0);
        let mut summary = serde_json::Map::new();
        for (j, s) in SYSTEMS.iter().enumerate() {
            summary.insert(
                s.to_string(),
                json!({ "worst_best_alone_over": worst(&ratios[j]),
                        "median_best_alone_over": median(&ratios[j]),
                        "median_drops_per_mb": median(&drops[j + 1]) }),
            );
        }
        summary.insert(
            "best alone".into(),
            json!({ "median_drops_per_mb": median(&drops[0]) }),
        );
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "summary": summary, "sets": rows }),
            headline: Headline::new(
                "worst set's best-alone median FCT / braid's",
                worst(&ratios[0]),
                None,
                GOAL_WEB,
                true,
            ),
            notes: vec![
                format!(
                    "worst set {}; median over the {} sets {:.3} (min-conn-path {:.3}, round-robin {:.3})",
                    web.get(worst_idx).map_or("-", |r| r.set.name),
                    web.len(),
                    median(&ratios[0]),
                    median(&ratios[1]),
                    median(&ratios[2]),
                ),
                format!(
                    "web: SURGE flows for {web_s} s, seed {}{}, at the load scale that offers {WEB_UTILIZATION} \
                     of the set's best link's mean capacity over the run ({:.0} kbit/s per unit of scale): \
                     a link so loaded is busy about half the time ('best busy': its downlink's bytes \
                     over its capacity, alone). Median FCT over every flow started, those unfinished \
                     at the end counted as the slowest (infinite when fewer than half finished)",
                    opts.seed,
                    stretch(opts),
                    WEB_BPS_PER_SCALE / 1e3
                ),
                format!(
                    "video: UDP at {VIDEO_KBPS} kbit/s in {VIDEO_PACKET}-byte datagrams for {video_s} s \
                     less the last {VIDEO_TAIL_S} s, on its own; loss = datagrams sent that never \
                     arrived, p95 over those that did; best = the link alone that loses least. Largest excess loss of braid \
                     over the best link: {} ({:.2} points)",
                    video_worst.map_or("-", |(_, n)| n),
                    video_worst.map_or(f64::NAN, |(e, _)| e * 100.0)
                ),
                format!(
                    "braid with its defaults, capacities learned; each link alone is direct TCP (UDP) \
                     over it; every uplink a constant {UPLINK_KBPS} kbit/s; drops/MB as in trace-bulk, \
                     alone: the best link's run (a slower link alone carries the same load, beyond it). \
                     Median drops/MB over sets: best alone {:.1}, braid {:.1}, min-conn-path {:.1}, \
                     round-robin {:.1}",
                    median(&drops[0]),
                    median(&drops[1]),
                    median(&drops[2]),
                    median(&drops[3]),
                ),
            ],
            table,
        })
    }
}

impl Bench for TracePairs {
    fn name(&self) -> &'static str {
        "trace-pairs"
    }

    fn summary(&self) -> &'static str {
        "issue 18's table: its four recorded pairs, bulk and web at load scale 6, braid's defaults against each link alone"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let (bulk_s, web_s) = if opts.quick {
            (60.0, 120.0)
        } else {
            (120.0, 300.0)
        };
        let sets = &SETS[..ISSUE_PAIRS];
        let dir = trace_sets::traces_dir();
        check_traces(self.name(), sets, &dir)?;
        let mut batch = Batch::new(&dir, opts.seed, opts.trace_offset_s);
        for set in sets {
            batch.add(set, "bulk", &bulk_workload(), bulk_s, None)?;
        }
        for set in sets {
            batch.add(set, "web", &web_workload(PAIRS_WEB_SCALE), web_s, None)?;
        }
        let reports = batch.run(opts, "trace-pairs")?;
        let mut traces = TraceCache::new();
        let mut it = reports.into_iter();
        let bulk = split(sets, &mut it);
        let web = split(sets, &mut it);
        let mut table = Table::new([
            "pair (one-way delay)",
            "bulk: braid / sum alone",
            "braid / best alone",
            "web: best alone / braid",
            "min-conn",
            "rr",
            "drops alone",
            "braid",
        ]);
        let mut rows = Vec::new();
        let mut bulk_ratios = Vec::new();
        for (b, w) in bulk.iter().zip(&web) {
            let br = BulkRow::new(b);
            let wr = WebRow::new(w);
            bulk_ratios.push(br.systems[0] / br.sum);
            let label = b
                .set
                .links
                .iter()
                .map(|l| {
                    let name = l.trace.trim_end_matches(".gz").trim_end_matches(".down");
                    format!("{name} ({})", l.delay_ms)
                })
                .collect::<Vec<_>>()
                .join(" + ");
            table.row([
                label,
                f(br.systems[0] / br.sum, 3),
                f(br.systems[0] / br.best, 3),
                f(wr.ratio(0), 3),
                f(wr.ratio(1), 3),
                f(wr.ratio(2), 3),
                b.alone.iter().map(queue_drops).sum::<u64>().to_string(),
                queue_drops(&b.systems[0]).to_string(),
            ]);
            rows.push(json!({
                "set": b.set.name,
                "links": links_json(b.set, &dir, opts.trace_offset_s, bulk_s, &mut traces),
                "bulk": br.json(b), "web": wr.json(w),
                "bulk_queue_drops": { "alone": b.alone.iter().map(queue_drops).sum::<u64>(),
                                      "braid": queue_drops(&b.systems[0]) },
            }));
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "sets": rows }),
            headline: Headline::new(
                "worst pair's braid bulk goodput / sum of its links' goodputs alone",
                worst(&bulk_ratios),
                None,
                GOAL_BULK,
                true,
            ),
            notes: vec![format!(
                "issue 18's settings: one bulk TCP download for {bulk_s} s, web flows at load scale \
                 {PAIRS_WEB_SCALE} for {web_s} s, each uplink a constant {UPLINK_KBPS} kbit/s; run it \
                 with --seed 3 as the issue did. drops: packets dropped at full link queues in the \
                 bulk runs (alone: both links' runs together){}",
                stretch(opts)
            )],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_and_median_of_ratios() {
        assert_eq!(worst(&[1.2, 0.9, 1.0]), 0.9);
        assert!(worst(&[1.0, f64::NAN]).is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn unfinished_flows_count_as_the_slowest() {
        let mut samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::from_samples(&mut samples);
        // All finished: the plain median.
        assert_eq!(censored_median(100, &s), s.median);
        // 125 flows, 100 finished: the 62.5th of the 125 is the finished ones' q = 0.625,
        // halfway between their median and p75.
        let want = (s.median + s.p75) / 2.0;
        assert!((censored_median(125, &s) - want).abs() < 1e-9);
        // Fewer than half finished.
        assert!(censored_median(201, &s).is_infinite());
        assert_eq!(fct_ratio(f64::INFINITY, f64::INFINITY), 1.0);
        assert_eq!(fct_ratio(100.0, f64::INFINITY), 0.0);
    }

    #[test]
    fn web_load_is_half_the_best_link() {
        let mut traces = TraceCache::new();
        let dir = Path::new("gen");
        // 1200 opportunities per second: 14.4 Mbit/s.
        let text: String = (1..=1000)
            .flat_map(|ms| std::iter::repeat_n(ms, if ms % 5 == 0 { 2 } else { 1 }))
            .map(|ms| format!("{ms}\n"))
            .collect();
        traces.insert(braid_sim::link::Trace::parse(&dir.join("fast"), &text).unwrap());
        traces.insert(braid_sim::link::Trace::parse(&dir.join("slow"), "10\n").unwrap());
        let set = TraceSet {
            name: "t",
            what: "",
            time_share: 1.0,
            links: &[
                trace_sets::TraceLink {
                    name: "a",
                    trace: "slow",
                    radio: "",
                    delay_ms: 1.0,
                },
                trace_sets::TraceLink {
                    name: "b",
                    trace: "fast",
                    radio: "",
                    delay_ms: 1.0,
                },
            ],
        };
        let scale = web_scale(&set, dir, 0.0, 10.0, &mut traces).unwrap();
        let want = 0.5 * 14.4e6 / WEB_BPS_PER_SCALE;
        assert!((scale - want).abs() <= 0.05, "{scale} {want}");
    }
}
