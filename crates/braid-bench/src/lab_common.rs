//! What the lab benchmarks share: checking the lab can run, deciding whether braid can,
//! and the figures every lab report carries (the emulator's own delivery error, so the
//! accuracy of each run is on record beside its results).

use braid_lab::emulator::Histogram;
use braid_lab::support::{check, Need};
use braid_lab::{Lab, LabError, PathSpec};
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
