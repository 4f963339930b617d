//! The link's configuration as it appears in scenario files (`[path.up]`, `[path.down]`), and
//! its validation.
//!
//! Parsing (serde) only checks shapes and rejects unknown keys; [`LinkConfig::validate`]
//! checks values and combinations and names the offending key in its error.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::trace::TraceCache;

/// Size of one mahimahi delivery opportunity, and the "full packet" the default queue limit
/// is measured in.
pub const MTU_BYTES: u64 = 1500;

/// Queue limit used when none of `queue_packets`, `queue_bytes`, `queue_ms` is set.
pub const DEFAULT_QUEUE_MS: f64 = 250.0;

/// The default queue never holds fewer than this many full (1500-byte) packets, so slow links
/// still get a usable buffer.
pub const DEFAULT_QUEUE_MIN_PACKETS: u64 = 10;

/// One direction of a path: capacity, propagation delay, queue and impairments.
///
/// Capacity is either constant (`rate_mbps` or `rate_kbps`) or a mahimahi trace (`trace`);
/// exactly one of the three must be set. Every other key is optional. Example:
///
/// ```toml
/// [path.up]
/// rate_mbps = 10
/// delay_ms = 20
/// jitter_ms = 2
/// queue_ms = 100
/// loss = { model = "gilbert-elliott", mean = 0.02, burst = 3.0 }
/// blackouts = [{ start_s = 5, duration_s = 0.5 }]
/// corruption = { bit_error_rate = 1e-6 }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Constant capacity in megabits (10^6 bits) per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbps: Option<f64>,
    /// Constant capacity in kilobits (10^3 bits) per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_kbps: Option<f64>,
    /// A mahimahi trace file giving the capacity: each line is a millisecond timestamp at
    /// which 1500 bytes may leave the queue; the file loops with period = its last timestamp.
    /// Used as given (the scenario loader resolves relative paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    /// Start this many seconds into the trace (taken modulo the trace's period). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_offset_s: Option<f64>,
    /// One-way propagation delay added after transmission, in milliseconds. Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: f64,
    /// Scale of the extra per-packet delay, in milliseconds: each packet gets |N(0, jitter)|
    /// (a half-normal draw, mean ≈ 0.8 × jitter) on top of `delay_ms`. Unless `reorder` is
    /// set, a packet is never delivered before the one sent ahead of it: its delivery time is
    /// max(own time, previous delivery time). Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub jitter_ms: f64,
    /// Let jitter reorder packets: each is delivered at its own time. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reorder: bool,
    /// Drop-tail queue limit in packets. At most one of `queue_packets`, `queue_bytes`,
    /// `queue_ms` may be set. The queue holds packets that have not finished transmission
    /// (waiting or partly sent); a packet that would take it over the limit is dropped. An
    /// explicit limit is taken as given, even one smaller than a packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<u64>,
    /// Drop-tail queue limit in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<u64>,
    /// Drop-tail queue limit as a time: bytes = rate × time (a trace's mean rate). When no
    /// limit is set the default is 250 ms, but never fewer than 10 packets of 1500 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_ms: Option<f64>,
    /// Random loss on the air, applied to each packet that finished transmission (it used
    /// capacity, then was lost). Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossConfig>,
    /// Scheduled outages: a packet whose transmission ends inside one is lost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blackouts: Vec<BlackoutConfig>,
    /// Random outages with exponential gaps and durations, drawn from the link's generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_blackouts: Option<RandomBlackoutConfig>,
    /// Bit errors in delivered packets. Corrupted packets are still delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corruption: Option<CorruptionConfig>,
    /// On/off background traffic sharing the queue and the capacity. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_traffic: Option<CrossTrafficConfig>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Random loss model, selected by `model`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LossConfig {
    /// `{ model = "bernoulli", p = 0.05 }`: each packet is lost independently with
    /// probability `p`.
    Bernoulli {
        /// Loss probability per packet, in [0, 1].
        p: f64,
    },
    /// The Gilbert-Elliott two-state Markov model (Gilbert 1960, Elliott 1963) for bursty
    /// loss. The channel is in a Good or a Bad state; a packet is lost with probability
    /// `loss_good` or `loss_bad` according to the current state, then the state moves on
    /// (Good→Bad with probability `p_good_bad`, Bad→Good with `p_bad_good`). In netem's
    /// notation `p = p_good_bad`, `r = p_bad_good`, `1-k = loss_good`, `1-h = loss_bad`.
    ///
    /// Give either the explicit form
    /// `{ model = "gilbert-elliott", p_good_bad = 0.01, p_bad_good = 0.3 }` (with optional
    /// `loss_good`, default 0, and `loss_bad`, default 1), or the convenience form
    /// `{ model = "gilbert-elliott", mean = 0.05, burst = 3.0 }`: mean loss rate and mean
    /// burst length in packets, with `loss_good = 0` and `loss_bad = 1`, so that
    /// `p_bad_good = 1 / burst` and `p_good_bad = mean × p_bad_good / (1 - mean)`.
    GilbertElliott {
        /// Probability per packet of moving from Good to Bad.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p_good_bad: Option<f64>,
        /// Probability per packet of moving from Bad to Good.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p_bad_good: Option<f64>,
        /// Loss probability in the Good state (default 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loss_good: Option<f64>,
        /// Loss probability in the Bad state (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loss_bad: Option<f64>,
        /// Convenience form: long-run fraction of packets lost, in [0, 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mean: Option<f64>,
        /// Convenience form: mean number of consecutive losses, at least 1.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        burst: Option<f64>,
    },
}

/// The four parameters of a Gilbert-Elliott channel after resolving either form of
/// [`LossConfig::GilbertElliott`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GilbertElliott {
    pub p_good_bad: f64,
    pub p_bad_good: f64,
    pub loss_good: f64,
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// Long-run loss rate: π_bad·loss_bad + π_good·loss_good with
    /// π_bad = p_good_bad / (p_good_bad + p_bad_good).
    pub fn mean_loss(&self) -> f64 {
        let sum = self.p_good_bad + self.p_bad_good;
        if sum == 0.0 {
            // The chain never leaves its initial (Good) state.
            return self.loss_good;
        }
        let bad = self.p_good_bad / sum;
        bad * self.loss_bad + (1.0 - bad) * self.loss_good
    }
}

/// `{ start_s = 5.0, duration_s = 1.5 }`: the link is out from `start_s` for `duration_s`
/// seconds of virtual time.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BlackoutConfig {
    pub start_s: f64,
    pub duration_s: f64,
}

/// `{ mean_interval_s = 30, mean_duration_s = 2 }`: outages whose start-to-start gaps (after
/// the previous one ends) and durations are exponentially distributed with these means.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RandomBlackoutConfig {
    /// Mean time from the end of one outage to the start of the next, in seconds.
    pub mean_interval_s: f64,
    /// Mean outage length, in seconds.
    pub mean_duration_s: f64,
}

/// `{ bit_error_rate = 1e-6 }`: every bit of a delivered packet is flipped independently with
/// this probability.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CorruptionConfig {
    pub bit_error_rate: f64,
}

/// `{ rate_kbps = 400, burst_s = 5 }`: background traffic in bursts of a Pareto-distributed
/// length (mean `burst_s`, `shape`, default 1.5, ns-2's) separated by `idle_s` (default 1 s)
/// of silence, at `rate_kbps` during a burst, in packets of `packet_bytes` (default 1500).
/// Its packets queue with the link's own (a full queue drops them too), take capacity, and
/// are not delivered (PRISM §8.3.2).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CrossTrafficConfig {
    pub rate_kbps: f64,
    pub burst_s: f64,
    #[serde(default = "one_second")]
    pub idle_s: f64,
    #[serde(default = "ns2_pareto_shape")]
    pub shape: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_bytes: Option<u64>,
}

fn one_second() -> f64 {
    1.0
}

fn ns2_pareto_shape() -> f64 {
    1.5
}

/// A link configuration that cannot be used. Each message names the key or file at fault and
/// what is expected instead.
#[derive(Debug, thiserror::Error)]
pub enum LinkConfigError {
    #[error("link has no capacity: set exactly one of `rate_mbps`, `rate_kbps` or `trace`")]
    NoCapacity,
    #[error("link capacity is given more than once ({found}): set exactly one of `rate_mbps`, `rate_kbps` or `trace`")]
    ConflictingCapacity { found: String },
    #[error("at most one queue limit may be set, found {found}: keep one of `queue_packets`, `queue_bytes`, `queue_ms`")]
    ConflictingQueueLimit { found: String },
    #[error("`{key}` is {value}, expected {expected}")]
    InvalidValue {
        key: String,
        value: f64,
        expected: &'static str,
    },
    #[error("`trace_offset_s` is set but there is no `trace`: remove it or add a trace")]
    OffsetWithoutTrace,
    #[error("`loss` gilbert-elliott: {problem}")]
    GilbertElliottForm { problem: &'static str },
    /// The message carries the I/O error's text, so it is not also a `source`.
    #[error("cannot read trace file `{}`: {error}", path.display())]
    TraceIo {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("trace file `{}`, line {line}: {problem}", path.display())]
    TraceFormat {
        path: PathBuf,
        line: usize,
        problem: String,
    },
}

impl LinkConfig {
    /// A constant-rate link of `mbps` megabits per second with every other key at its default.
    pub fn with_rate_mbps(mbps: f64) -> LinkConfig {
        LinkConfig {
            rate_mbps: Some(mbps),
            ..LinkConfig::default()
        }
    }

    /// A trace-driven link with every other key at its default.
    pub fn with_trace(path: impl Into<PathBuf>) -> LinkConfig {
        LinkConfig {
            trace: Some(path.into()),
            ..LinkConfig::default()
        }
    }

    /// Checks values and combinations (not the trace file, which [`LinkConfig::mean_rate_bps`]
    /// and [`super::Link::new`] load).
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        let capacity: Vec<&str> = [
            ("`rate_mbps`", self.rate_mbps.is_some()),
            ("`rate_kbps`", self.rate_kbps.is_some()),
            ("`trace`", self.trace.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| *k)
        .collect();
        match capacity.len() {
            0 => return Err(LinkConfigError::NoCapacity),
            1 => {}
            _ => {
                return Err(LinkConfigError::ConflictingCapacity {
                    found: capacity.join(" and "),
                })
            }
        }
        if let Some(r) = self.rate_mbps {
            positive("rate_mbps", r)?;
        }
        if let Some(r) = self.rate_kbps {
            positive("rate_kbps", r)?;
        }
        if let Some(off) = self.trace_offset_s {
            if self.trace.is_none() {
                return Err(LinkConfigError::OffsetWithoutTrace);
            }
            non_negative("trace_offset_s", off)?;
        }
        non_negative("delay_ms", self.delay_ms)?;
        non_negative("jitter_ms", self.jitter_ms)?;

        let limits: Vec<&str> = [
            ("`queue_packets`", self.queue_packets.is_some()),
            ("`queue_bytes`", self.queue_bytes.is_some()),
            ("`queue_ms`", self.queue_ms.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| *k)
        .collect();
        if limits.len() > 1 {
            return Err(LinkConfigError::ConflictingQueueLimit {
                found: limits.join(" and "),
            });
        }
        if let Some(n) = self.queue_packets {
            at_least_one("queue_packets", n)?;
        }
        if let Some(n) = self.queue_bytes {
            at_least_one("queue_bytes", n)?;
        }
        if let Some(ms) = self.queue_ms {
            positive("queue_ms", ms)?;
        }

        if let Some(loss) = &self.loss {
            loss.resolve()?;
        }
        for (i, b) in self.blackouts.iter().enumerate() {
            non_negative(&format!("blackouts[{i}].start_s"), b.start_s)?;
            non_negative(&format!("blackouts[{i}].duration_s"), b.duration_s)?;
        }
        if let Some(rb) = &self.random_blackouts {
            at_least_a_microsecond("random_blackouts.mean_interval_s", rb.mean_interval_s)?;
            at_least_a_microsecond("random_blackouts.mean_duration_s", rb.mean_duration_s)?;
        }
        if let Some(c) = &self.corruption {
            probability("corruption.bit_error_rate", c.bit_error_rate)?;
        }
        if let Some(c) = &self.cross_traffic {
            positive("cross_traffic.rate_kbps", c.rate_kbps)?;
            at_least_a_microsecond("cross_traffic.burst_s", c.burst_s)?;
            non_negative("cross_traffic.idle_s", c.idle_s)?;
            if !(c.shape > 1.0 && c.shape.is_finite()) {
                return Err(invalid(
                    "cross_traffic.shape",
                    c.shape,
                    "a finite number greater than 1 (the Pareto mean is finite only then)",
                ));
            }
            if let Some(b) = c.packet_bytes {
                at_least_one("cross_traffic.packet_bytes", b)?;
            }
        }
        Ok(())
    }

    /// The configured constant rate, or the trace's mean rate, in bits per second.
    pub fn mean_rate_bps(&self, traces: &mut TraceCache) -> Result<f64, LinkConfigError> {
        self.validate()?;
        match (self.rate_mbps, self.rate_kbps, &self.trace) {
            (Some(mbps), _, _) => Ok(mbps * 1e6),
            (_, Some(kbps), _) => Ok(kbps * 1e3),
            (_, _, Some(path)) => Ok(traces.load(path)?.mean_rate_bps()),
            (None, None, None) => Err(LinkConfigError::NoCapacity),
        }
    }

    /// The drop-tail limit this configuration gives at mean rate `rate_bps`.
    pub(crate) fn queue_limit(&self, rate_bps: f64) -> QueueLimit {
        let bytes_for = |ms: f64| (rate_bps * ms / 8e3).floor() as u64;
        match (self.queue_packets, self.queue_bytes, self.queue_ms) {
            (Some(n), _, _) => QueueLimit::Packets(n),
            (_, Some(b), _) => QueueLimit::Bytes(b),
            (_, _, Some(ms)) => QueueLimit::Bytes(bytes_for(ms)),
            (None, None, None) => QueueLimit::Bytes(
                bytes_for(DEFAULT_QUEUE_MS).max(DEFAULT_QUEUE_MIN_PACKETS * MTU_BYTES),
            ),
        }
    }

    /// The trace file, when capacity comes from one.
    pub fn trace_path(&self) -> Option<&Path> {
        self.trace.as_deref()
    }
}

/// A resolved drop-tail limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueLimit {
    Packets(u64),
    Bytes(u64),
}

/// A resolved loss model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LossParams {
    Bernoulli(f64),
    GilbertElliott(GilbertElliott),
}

impl LossConfig {
    /// The Gilbert-Elliott parameters for `mean` loss rate and `burst` mean burst length, with
    /// loss only (and always) in the Bad state.
    pub fn gilbert_elliott_from_mean_burst(mean: f64, burst: f64) -> GilbertElliott {
        let p_bad_good = 1.0 / burst;
        GilbertElliott {
            p_good_bad: mean * p_bad_good / (1.0 - mean),
            p_bad_good,
            loss_good: 0.0,
            loss_bad: 1.0,
        }
    }

    pub(crate) fn resolve(&self) -> Result<LossParams, LinkConfigError> {
        match *self {
            LossConfig::Bernoulli { p } => {
                probability("loss.p", p)?;
                Ok(LossParams::Bernoulli(p))
            }
            LossConfig::GilbertElliott {
                p_good_bad,
                p_bad_good,
                loss_good,
                loss_bad,
                mean,
                burst,
            } => {
                let explicit = p_good_bad.is_some()
                    || p_bad_good.is_some()
                    || loss_good.is_some()
                    || loss_bad.is_some();
                let convenient = mean.is_some() || burst.is_some();
                let ge = match (explicit, convenient) {
                    (true, true) => return Err(LinkConfigError::GilbertElliottForm {
                        problem: "give either `p_good_bad`/`p_bad_good`/`loss_good`/`loss_bad` or `mean`/`burst`, not both",
                    }),
                    (false, false) => return Err(LinkConfigError::GilbertElliottForm {
                        problem: "set `p_good_bad` and `p_bad_good` (optionally `loss_good`, `loss_bad`), or `mean` and `burst`",
                    }),
                    (true, false) => {
                        let (Some(gb), Some(bg)) = (p_good_bad, p_bad_good) else {
                            return Err(LinkConfigError::GilbertElliottForm {
                                problem: "both `p_good_bad` and `p_bad_good` are required",
                            });
                        };
                        GilbertElliott {
                            p_good_bad: gb,
                            p_bad_good: bg,
                            loss_good: loss_good.unwrap_or(0.0),
                            loss_bad: loss_bad.unwrap_or(1.0),
                        }
                    }
                    (false, true) => {
                        let (Some(m), Some(b)) = (mean, burst) else {
                            return Err(LinkConfigError::GilbertElliottForm {
                                problem: "both `mean` and `burst` are required",
                            });
                        };
                        if !(0.0..1.0).contains(&m) {
                            return Err(invalid("loss.mean", m, "a loss rate in [0, 1)"));
                        }
                        if !(b >= 1.0 && b.is_finite()) {
                            return Err(invalid("loss.burst", b, "a mean burst length of at least 1 packet"));
                        }
                        let ge = Self::gilbert_elliott_from_mean_burst(m, b);
                        if ge.p_good_bad > 1.0 {
                            return Err(LinkConfigError::GilbertElliottForm {
                                problem: "`mean` is too high for this `burst` (needs mean / (1 - mean) <= burst); raise `burst` or lower `mean`",
                            });
                        }
                        ge
                    }
                };
                probability("loss.p_good_bad", ge.p_good_bad)?;
                probability("loss.p_bad_good", ge.p_bad_good)?;
                probability("loss.loss_good", ge.loss_good)?;
                probability("loss.loss_bad", ge.loss_bad)?;
                Ok(LossParams::GilbertElliott(ge))
            }
        }
    }
}

fn invalid(key: &str, value: f64, expected: &'static str) -> LinkConfigError {
    LinkConfigError::InvalidValue {
        key: key.to_owned(),
        value,
        expected,
    }
}

fn positive(key: &str, v: f64) -> Result<(), LinkConfigError> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(invalid(key, v, "a finite number greater than 0"))
    }
}

fn at_least_a_microsecond(key: &str, v: f64) -> Result<(), LinkConfigError> {
    if v >= 1e-6 && v.is_finite() {
        Ok(())
    } else {
        Err(invalid(
            key,
            v,
            "a finite number of seconds of at least 0.000001 (1 µs)",
        ))
    }
}

fn non_negative(key: &str, v: f64) -> Result<(), LinkConfigError> {
    if v >= 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(invalid(key, v, "a finite number of at least 0"))
    }
}

fn probability(key: &str, v: f64) -> Result<(), LinkConfigError> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(invalid(key, v, "a probability in [0, 1]"))
    }
}

fn at_least_one(key: &str, v: u64) -> Result<(), LinkConfigError> {
    if v >= 1 {
        Ok(())
    } else {
        Err(invalid(key, v as f64, "at least 1"))
    }
}
