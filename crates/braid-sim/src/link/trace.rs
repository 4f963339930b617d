//! Trace-driven capacity in the mahimahi format, with mahimahi's link-queue semantics.
//!
//! A trace file holds one integer per line: a millisecond timestamp at which one delivery
//! opportunity of 1500 bytes occurs. Timestamps never decrease; a timestamp repeats when
//! several opportunities fall in the same millisecond; the file loops with period = its last
//! timestamp (Netravali et al., "Mahimahi: Accurate Record-and-Replay for HTTP", USENIX ATC
//! 2015; `LinkQueue` in mahimahi's `src/packet/link_queue.cc`). [`TraceServer`] reproduces
//! `LinkQueue::rationalize` packet by packet:
//!
//! - opportunities at or before a packet's arrival time are burnt before it is queued, so a
//!   packet can only use opportunities strictly after it arrived;
//! - bytes of an opportunity that the queue cannot fill (it ran empty) are lost;
//! - a packet is sent partly in one opportunity and finishes in a later one, and the bytes it
//!   leaves over go to the packet behind it if that one is already queued;
//! - the packet leaves at the time of the opportunity that carries its last byte.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{LinkConfigError, MTU_BYTES};

/// Largest accepted timestamp (about 31 years), so that times in microseconds cannot overflow.
const MAX_TIMESTAMP_MS: u64 = 1 << 40;

/// A parsed mahimahi trace: delivery opportunities of 1500 bytes at millisecond timestamps,
/// looping with period = the last timestamp. A link driven by it behaves like mahimahi's
/// link queue: a packet uses only opportunities after its arrival, may be split across
/// opportunities, passes leftover bytes to the packet queued behind it, and bytes the empty
/// queue cannot use are lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    path: PathBuf,
    /// Non-empty, non-decreasing, last element > 0.
    opportunities_ms: Vec<u64>,
}

impl Trace {
    /// Parses mahimahi text. `path` only names the file in error messages. Like mahimahi,
    /// rejects empty lines, non-integers, decreasing timestamps, an empty file and a trace
    /// whose last timestamp is 0; surrounding whitespace on a line is ignored.
    pub fn parse(path: &Path, text: &str) -> Result<Trace, LinkConfigError> {
        let error = |line: usize, problem: String| LinkConfigError::TraceFormat {
            path: path.to_owned(),
            line,
            problem,
        };
        let mut opportunities_ms = Vec::new();
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            last_line = line;
            let s = raw.trim();
            if s.is_empty() {
                return Err(error(
                    line,
                    "empty line; expected a millisecond timestamp".into(),
                ));
            }
            let ms: u64 = s.parse().map_err(|_| {
                error(
                    line,
                    format!("`{s}` is not a millisecond timestamp (a non-negative integer)"),
                )
            })?;
            if ms > MAX_TIMESTAMP_MS {
                return Err(error(
                    line,
                    format!("timestamp {ms} ms is too large (at most {MAX_TIMESTAMP_MS})"),
                ));
            }
            if let Some(&prev) = opportunities_ms.last() {
                if ms < prev {
                    return Err(error(
                        line,
                        format!("timestamp {ms} is smaller than the previous one ({prev}); timestamps must not decrease"),
                    ));
                }
            }
            opportunities_ms.push(ms);
        }
        match opportunities_ms.last() {
            None => Err(error(
                1,
                "no timestamps; expected one millisecond timestamp per line".into(),
            )),
            Some(0) => Err(error(
                last_line,
                "the last timestamp is 0; a trace must last a non-zero time (its period)".into(),
            )),
            Some(_) => Ok(Trace {
                path: path.to_owned(),
                opportunities_ms,
            }),
        }
    }

    /// The file this trace was read from (or the name given to [`Trace::parse`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Delivery opportunity times within one period, in milliseconds.
    pub fn opportunities_ms(&self) -> &[u64] {
        &self.opportunities_ms
    }

    /// The loop period: the last timestamp, in milliseconds.
    pub fn period_ms(&self) -> u64 {
        // Non-empty by construction.
        self.opportunities_ms.last().copied().unwrap_or(1)
    }

    /// Mean capacity: opportunities × 1500 bytes per period, in bits per second.
    pub fn mean_rate_bps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * (MTU_BYTES * 8) as f64 * 1e3 / self.period_ms() as f64
    }
}

/// Reads a trace file as text: a name ending in `.gz` is gunzipped, and a missing `NAME`
/// whose `NAME.gz` exists is read from that (traces/ ships its larger files compressed).
/// Returns the file actually read with its text.
pub fn read_trace_text(path: &Path) -> Result<(PathBuf, String), LinkConfigError> {
    let gz_sibling = {
        let mut s = path.as_os_str().to_owned();
        s.push(".gz");
        PathBuf::from(s)
    };
    let file = if !path.exists() && gz_sibling.is_file() {
        gz_sibling
    } else {
        path.to_owned()
    };
    let io = |error| LinkConfigError::TraceIo {
        path: file.clone(),
        error,
    };
    let bytes = std::fs::read(&file).map_err(io)?;
    let bytes = if file.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .map_err(io)?;
        out
    } else {
        bytes
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ))
    })?;
    Ok((file, text))
}

/// Loads each trace file once, keyed by its path as given, and shares it between links.
#[derive(Debug, Default)]
pub struct TraceCache {
    traces: HashMap<PathBuf, Arc<Trace>>,
}

impl TraceCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The trace at `path`, read and parsed on first use (gzip-aware: [`read_trace_text`]).
    pub fn load(&mut self, path: &Path) -> Result<Arc<Trace>, LinkConfigError> {
        if let Some(t) = self.traces.get(path) {
            return Ok(Arc::clone(t));
        }
        let (file, text) = read_trace_text(path)?;
        let trace = Arc::new(Trace::parse(&file, &text)?);
        self.traces.insert(path.to_owned(), Arc::clone(&trace));
        Ok(trace)
    }

    /// Makes `trace` the one [`TraceCache::load`] returns for its path, so generated traces
    /// need no file.
    pub fn insert(&mut self, trace: Trace) -> Arc<Trace> {
        let trace = Arc::new(trace);
        self.traces
            .insert(trace.path().to_owned(), Arc::clone(&trace));
        trace
    }
}

/// The transmitter of a trace-driven link: a cursor on the looping opportunity schedule that
/// stands just after the last byte of the last packet queued.
#[derive(Clone, Debug)]
pub(crate) struct TraceServer {
    trace: Arc<Trace>,
    period_us: i64,
    /// Virtual time of the current loop's zero (negative when starting part-way in).
    loop_base_us: i64,
    /// Index of the current opportunity in the schedule.
    idx: usize,
    /// Bytes still free in the current opportunity.
    left: u64,
}

impl TraceServer {
    /// Starts `offset_s` seconds into the trace (modulo its period).
    pub(crate) fn new(trace: Arc<Trace>, offset_s: f64) -> TraceServer {
        // The period is at most MAX_TIMESTAMP_MS, so this fits in i64.
        let period_us = trace.period_ms() as i64 * 1000;
        let offset_us = ((offset_s * 1e6).round() as i64).rem_euclid(period_us);
        TraceServer {
            trace,
            period_us,
            loop_base_us: -offset_us,
            idx: 0,
            left: MTU_BYTES,
        }
    }

    fn opportunity_us(&self) -> i64 {
        self.loop_base_us + self.trace.opportunities_ms[self.idx] as i64 * 1000
    }

    /// Moves to the next opportunity; the loop restarts after the last one, shifted by the
    /// period (mahimahi's `use_a_delivery_opportunity`).
    fn advance(&mut self) {
        self.idx += 1;
        if self.idx == self.trace.opportunities_ms.len() {
            self.idx = 0;
            self.loop_base_us += self.period_us;
        }
        self.left = MTU_BYTES;
    }

    /// Moves to the first opportunity strictly after `t_us`, in O(log n). Requires the
    /// current opportunity to be at or before `t_us`.
    fn seek_after(&mut self, t_us: i64) {
        let since_base = t_us - self.loop_base_us;
        let loops = since_base.div_euclid(self.period_us);
        let within = since_base.rem_euclid(self.period_us);
        self.loop_base_us += loops * self.period_us;
        // The last opportunity is at the period, which is > `within`, so this is in range.
        self.idx = self
            .trace
            .opportunities_ms
            .partition_point(|&ms| (ms as i64) * 1000 <= within);
        self.left = MTU_BYTES;
    }

    /// Queues `size` bytes arriving at `arrival_us` behind everything queued before and
    /// returns the time its last byte leaves, in microseconds. Arrivals must not go back in
    /// time. O(1 + size / 1500) amortised, O(log n) after an idle gap.
    pub(crate) fn transmit(&mut self, arrival_us: u64, size: u64) -> u64 {
        let arrival = arrival_us.min(i64::MAX as u64 / 2) as i64;
        if self.opportunity_us() <= arrival {
            // The queue ran empty: what is left of past opportunities was wasted.
            self.seek_after(arrival);
        }
        let mut need = size;
        loop {
            let take = need.min(self.left);
            need -= take;
            self.left -= take;
            if need == 0 {
                // After `arrival` >= 0, so non-negative.
                return self.opportunity_us().max(0) as u64;
            }
            self.advance();
        }
    }
}
