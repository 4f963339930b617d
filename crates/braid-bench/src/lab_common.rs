//! What the lab benchmarks share: checking the lab can run, deciding whether braid can,
//! and the figures every lab report carries (the emulator's own delivery error, so the
//! accuracy of each run is on record beside its results).

use std::time::Duration;

use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::emulator::Histogram;
use braid_lab::experiment;
use braid_lab::support::{check, Need};
use braid_lab::{Lab, LabError, PathSpec, System};
use braid_sim::link::{LinkConfig, LossConfig};
use serde_json::{json, Value};

use crate::BenchError;

impl From<LabError> for BenchError {
    fn from(e: LabError) -> BenchError {
        BenchError::Other(e.to_string())
    }
}

/// Fails with the reason when the lab cannot run here.
pub fn ready(needs: &[Need]) -> Result<(), BenchError> {
    check(needs).map_err(|e| BenchError::Other(format!("{e}; lab benchmarks need root")))
}

/// Why braid cannot run in the lab (to say so in the report), or `None`.
pub fn braid_unavailable() -> Option<String> {
    braid_lab::braid_daemon::unavailable()
}

/// A symmetric path of `mbps` and `rtt_ms`, with Bernoulli `loss` both ways.
pub fn path(name: &str, mbps: f64, rtt_ms: f64, loss: f64) -> PathSpec {
    let l = LinkConfig {
        rate_mbps: Some(mbps),
        delay_ms: rtt_ms / 2.0,
        loss: (loss > 0.0).then_some(LossConfig::Bernoulli { p: loss }),
        ..LinkConfig::default()
    };
    PathSpec {
        name: name.into(),
        up: l.clone(),
        down: l,
    }
}

/// The emulators' delivery error over every path and direction of the lab's last run.
pub fn delivery_error(lab: &Lab) -> Value {
    let mut h = Histogram::default();
    for (_, up, down) in lab.path_reports() {
        h.merge(&up.delivery_hist);
        h.merge(&down.delivery_hist);
    }
    json!(h.summary())
}

/// A short text for the delivery error of a run.
pub fn delivery_note(label: &str, v: &Value) -> String {
    format!(
        "{label}: emulator delivery error p50 {} µs, p99 {} µs, max {} µs over {} frames \
         (a shared 2-core machine: CPU contention shows up here)",
        v["p50_us"], v["p99_us"], v["max_us"], v["samples"]
    )
}

/// NaN as JSON null, for figures a system could not produce.
pub fn num(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

/// The machine's load average (1, 5 and 15 minutes), as /proc/loadavg gives it: real-time
/// figures are read beside it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Drops at the tail of the paths' downlink queues (the bottlenecks of a download) in the
/// lab's last run, and the bytes the downlinks delivered.
pub fn down_queue_drops(lab: &Lab) -> (u64, u64) {
    lab.path_reports()
        .iter()
        .fold((0, 0), |(drops, bytes), (_, _, down)| {
            (
                drops + down.link.packets_dropped_queue,
                bytes + down.link.bytes_delivered,
            )
        })
}

/// One system's bulk download in [`bulk_groups`].
#[derive(Clone, Debug)]
pub struct BulkFigures {
    /// Receiver goodput, Mbit/s (NaN where it failed or did not run).
    pub goodput_mbps: f64,
    pub retransmits: Option<u64>,
}

impl BulkFigures {
    const NONE: BulkFigures = BulkFigures {
        goodput_mbps: f64::NAN,
        retransmits: None,
    };
}

/// What [`bulk_groups`] measured: per group (the paths alone, MPTCP, braid) the systems'
/// figures, the downlinks' queue drops and delivered bytes, and the emulators' delivery
/// error.
pub struct BulkGroups {
    pub alone: Vec<BulkFigures>,
    pub mptcp: BulkFigures,
    pub braid: BulkFigures,
    /// (drops, bytes delivered) on the downlinks: alone (all paths), MPTCP, braid.
    pub drops: [(u64, u64); 3],
    pub error_alone: Value,
    pub error_mptcp: Value,
}

/// The lab benchmarks' bulk comparison: one iperf3 download (Cubic) `duration` s long after
/// `omit` s left out, through every path alone (at once, one per path), then Linux MPTCP,
/// then braid with `braid` (not run where `None`), each on fresh links. A system that
/// fails gets NaN and a note starting with `label`. `tick(group, elapsed)` is called about
/// every second (groups 0, 1, 2 as above).
pub fn bulk_groups(
    lab: &mut Lab,
    label: &str,
    duration: u32,
    omit: u32,
    braid: Option<&BraidSettings>,
    notes: &mut Vec<String>,
    tick: &mut dyn FnMut(usize, Duration),
) -> Result<BulkGroups, BenchError> {
    let names: Vec<String> = lab.paths().iter().map(|p| p.name.clone()).collect();
    let figures = |r: Result<braid_lab::apps::iperf::IperfResult, LabError>,
                   who: &str,
                   notes: &mut Vec<String>| match r {
        Ok(r) => BulkFigures {
            goodput_mbps: r.goodput_mbps,
            retransmits: r.retransmits,
        },
        Err(e) => {
            notes.push(format!("{label}: {who} failed: {e}"));
            BulkFigures::NONE
        }
    };
    let mut drops = [(0, 0); 3];

    let singles: Vec<System> = (0..names.len()).map(System::Path).collect();
    let results = experiment::bulk_watched(lab, &singles, duration, omit, &mut |_, t| tick(0, t))?;
    let alone = results
        .into_iter()
        .zip(&names)
        .map(|(r, name)| figures(r, &format!("{name} alone"), notes))
        .collect();
    drops[0] = down_queue_drops(lab);
    let error_alone = delivery_error(lab);

    let mptcp = match lab.mptcp_unavailable() {
        Some(why) => {
            notes.push(format!("Linux MPTCP unavailable: {why}"));
            BulkFigures::NONE
        }
        None => {
            let system = lab.mptcp();
            let r =
                experiment::bulk_watched(lab, &[system], duration, omit, &mut |_, t| tick(1, t))?
                    .remove(0);
            drops[1] = down_queue_drops(lab);
            figures(r, "MPTCP", notes)
        }
    };
    let error_mptcp = delivery_error(lab);

    let braid = match braid {
        None => BulkFigures::NONE,
        Some(settings) => {
            let _tunnel = BraidTunnel::start_with(lab, settings)?;
            let system = System::Braid(settings.label());
            let r =
                experiment::bulk_watched(lab, &[system], duration, omit, &mut |_, t| tick(2, t))?
                    .remove(0);
            drops[2] = down_queue_drops(lab);
            figures(r, "braid", notes)
        }
    };
    Ok(BulkGroups {
        alone,
        mptcp,
        braid,
        drops,
        error_alone,
        error_mptcp,
    })
}
