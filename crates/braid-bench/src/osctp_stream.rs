//! What the benchmarks of the multipath reliable stream share (oSCTP §IV-B to IV-E,
//! issue 19): runs of `braid_sim::stream_world`, many at once, and the ideal they are
//! judged against.

use std::time::Duration;

use braid_core::stream::chunk::DATA_HEADER;
use braid_core::stream::{Failover, ReceiverConfig, RtoParams, StreamConfig};
use braid_sim::stream_world::{run_stream, StreamOutcome, StreamPath, StreamRun, WIRE_OVERHEAD};

use crate::{BenchError, Options};

/// The stream as braid runs it: every option at its default.
pub const BRAID_DEFAULTS: &str = "braid";

/// Stock SCTP's failover and RTO bounds (RFC 4960 §8.2, §15) in place of braid's, for the
/// failover baselines.
pub fn stock_sctp(failover: Failover, mut c: StreamConfig) -> StreamConfig {
    c.failover = failover;
    if failover != Failover::Osctp {
        c.rto = RtoParams::RFC4960;
    }
    c
}

/// Goodput the stream could reach over `mbps` of capacity: payload over wire bytes per
/// full DATA chunk (12 bytes of chunk header, 28 of IP and UDP).
pub fn ideal_mbps(mbps: f64) -> f64 {
    let mtu = StreamConfig::default().mtu as f64;
    mbps * mtu / (mtu + (DATA_HEADER + WIRE_OVERHEAD) as f64)
}

/// A bulk run without end over `paths` for `secs`, 100 ms bins.
pub fn bulk(sender: StreamConfig, paths: Vec<StreamPath>, secs: f64, seed: u64) -> StreamRun {
    StreamRun {
        sender,
        receiver: ReceiverConfig::default(),
        paths,
        bytes: None,
        duration: Duration::from_secs_f64(secs),
        seed,
        bin: Duration::from_millis(100),
    }
}

/// Runs every one of `runs` (deterministic each, so threads change only the wall time),
/// in order; a run that read a wrong byte is an error.
pub fn run_many(
    opts: &mut Options<'_>,
    label: &str,
    runs: Vec<StreamRun>,
) -> Result<Vec<StreamOutcome>, BenchError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let total = runs.len();
    let mut out: Vec<Option<StreamOutcome>> = (0..total).map(|_| None).collect();
    for (batch_no, batch) in runs.chunks(threads).enumerate() {
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = batch.iter().map(|r| s.spawn(|| run_stream(r))).collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| BenchError::Other("stream run panicked".into()))
                })
                .collect()
        });
        for (k, r) in results.into_iter().enumerate() {
            let o = r?.map_err(|e| BenchError::Other(e.to_string()))?;
            if !o.intact {
                return Err(BenchError::Other(format!(
                    "{label}: run {} delivered a wrong byte",
                    batch_no * threads + k
                )));
            }
            out[batch_no * threads + k] = Some(o);
        }
        let done = ((batch_no + 1) * threads).min(total);
        opts.progress(label, done as f64 / total.max(1) as f64);
    }
    Ok(out.into_iter().flatten().collect())
}

/// Time after `from` until the end of the longest stall (a run of bins with nothing read)
/// that begins within `stall_within` of it, and until every `window` starting later reads
/// at least `floor` Mbit/s, whichever is later; `None` if no whole window after that
/// reads the floor. The stall counts even where the burst released after it lifts the
/// window around it; later stalls (ordinary loss recovery) count only through the
/// windows.
pub fn recovery(
    o: &StreamOutcome,
    from: Duration,
    stall_within: Duration,
    window: Duration,
    floor: f64,
) -> Option<Duration> {
    let bin = o.bin.as_secs_f64();
    let bins = |d: Duration| (d.as_secs_f64() / bin).round() as usize;
    let w = bins(window).max(1);
    let start = bins(from);
    let floor_bytes = floor * 1e6 / 8.0 * w as f64 * bin;
    let d = &o.delivered;
    let (mut stall_end, mut longest, mut run) = (start, 0, 0);
    for (i, &b) in d.iter().enumerate().skip(start) {
        run = if b == 0 { run + 1 } else { 0 };
        if i + 1 - run >= start + bins(stall_within) {
            break;
        }
        if run > longest {
            (longest, stall_end) = (run, i + 1);
        }
    }
    let last_bad = (start..d.len().saturating_sub(w - 1))
        .rev()
        .find(|&i| (d[i..i + w].iter().sum::<u64>() as f64) < floor_bytes)
        .map_or(start, |i| i + 1);
    let end = stall_end.max(last_bad);
    if end + w > d.len() {
        return None;
    }
    Some(Duration::from_secs_f64((end - start) as f64 * bin))
}

/// The longest run of bins with nothing read that begins in `[from, to)`, ms.
pub fn longest_stall_ms(o: &StreamOutcome, from: Duration, to: Duration) -> f64 {
    let bin = o.bin.as_secs_f64();
    let (a, b) = (
        (from.as_secs_f64() / bin).round() as usize,
        (to.as_secs_f64() / bin).round() as usize,
    );
    let (mut longest, mut run) = (0usize, 0usize);
    for (i, &x) in o.delivered.iter().enumerate().skip(a) {
        run = if x == 0 { run + 1 } else { 0 };
        if i + 1 - run >= b {
            break;
        }
        longest = longest.max(run);
    }
    longest as f64 * bin * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(delivered: Vec<u64>) -> StreamOutcome {
        StreamOutcome {
            bytes_read: delivered.iter().sum(),
            intact: true,
            done_at: None,
            delivered,
            bin: Duration::from_millis(100),
            duration: Duration::from_secs(4),
            sender: Default::default(),
            receiver: Default::default(),
            links: Vec::new(),
            cwnd_trace: Vec::new(),
        }
    }

    const HALF: Duration = Duration::from_millis(500);

    #[test]
    fn recovery_is_where_the_trailing_window_stays_above_the_floor() {
        // 1 Mbit/s = 12 500 bytes per 100 ms bin; a 300 ms stall after bin 10.
        let mut d = vec![12_500u64; 40];
        for b in &mut d[10..13] {
            *b = 0;
        }
        let o = outcome(d);
        let r = recovery(&o, Duration::from_secs(1), HALF, HALF, 0.9);
        assert_eq!(r, Some(Duration::from_millis(300)));
        // A burst after the stall does not hide it.
        let mut d = vec![12_500u64; 40];
        d[10..13].fill(0);
        d[13] = 50_000;
        let r = recovery(&outcome(d), Duration::from_secs(1), HALF, HALF, 0.9);
        assert_eq!(r, Some(Duration::from_millis(300)));
        // Slow after the stall: recovered once the windows read the floor.
        let mut d = vec![12_500u64; 40];
        d[10..13].fill(0);
        d[13..20].fill(6_000);
        let r = recovery(&outcome(d), Duration::from_secs(1), HALF, HALF, 0.9);
        assert_eq!(r, Some(Duration::from_millis(1000)));
        // A longer stall a window later counts only through its window.
        let mut d = vec![12_500u64; 40];
        d[10..13].fill(0);
        d[20..24].fill(0);
        let r = recovery(&outcome(d), Duration::from_secs(1), HALF, HALF, 0.5);
        assert_eq!(r, Some(Duration::from_millis(1200)));
        let never = outcome(vec![0; 20]);
        assert_eq!(recovery(&never, Duration::ZERO, HALF, HALF, 0.5), None);
    }
}
