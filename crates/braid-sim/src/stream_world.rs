//! Two ends of braid's multipath reliable stream (`braid_core::stream`) over simulated
//! paths, in virtual time: the harness of the oSCTP benchmarks (issue 19).
//!
//! Each path is a pair of [`Link`]s (data forward, SACKs and heartbeat answers back) with
//! the simulator's link models: rate, one-way delay, loss, queue limit, and blackouts for a
//! path that goes down and comes back. A bulk source writes as fast as the send buffer
//! takes bytes (a fixed length, or without end until the run's duration); the receiving
//! application reads at once and checks every byte against the source's pattern. Each
//! datagram occupies its length plus 28 bytes of IP and UDP header on the wire.
//!
//! Deterministic: every link draws from its own child of the seed, the loop runs in
//! event order, and nothing reads a clock.

use std::time::Duration;

use braid_core::stream::{
    ReceiverConfig, ReceiverStats, SenderStats, StreamConfig, StreamReceiver, StreamSender,
};
use braid_core::Instant;

use crate::link::{Link, LinkConfig, LinkConfigError, LinkStats};
use crate::{Rng, TraceCache};

/// IP and UDP header bytes around each stream datagram.
pub const WIRE_OVERHEAD: usize = 28;

/// One path: its two directions.
#[derive(Clone, Debug)]
pub struct StreamPath {
    /// Sender to receiver: DATA and HEARTBEAT.
    pub forward: LinkConfig,
    /// Receiver to sender: SACK and HEARTBEAT-ACK.
    pub reverse: LinkConfig,
}

impl StreamPath {
    /// Both directions `mbps` at `delay_ms` one way, other keys at the simulator's defaults.
    pub fn symmetric(mbps: f64, delay_ms: f64) -> StreamPath {
        let l = LinkConfig {
            delay_ms,
            ..LinkConfig::with_rate_mbps(mbps)
        };
        StreamPath {
            forward: l.clone(),
            reverse: l,
        }
    }

    /// This path down (both directions) from `start_s` for `duration_s`.
    pub fn down(mut self, start_s: f64, duration_s: f64) -> StreamPath {
        for l in [&mut self.forward, &mut self.reverse] {
            l.blackouts.push(crate::link::BlackoutConfig {
                start_s,
                duration_s,
            });
        }
        self
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct StreamRun {
    pub sender: StreamConfig,
    pub receiver: ReceiverConfig,
    pub paths: Vec<StreamPath>,
    /// Bytes to send, or `None` for a source without end.
    pub bytes: Option<u64>,
    /// Virtual time the run stops at, done or not.
    pub duration: Duration,
    pub seed: u64,
    /// Width of the bins of [`StreamOutcome::delivered`].
    pub bin: Duration,
}

/// What happened.
#[derive(Clone, Debug)]
pub struct StreamOutcome {
    /// Bytes the application read, in order and checked.
    pub bytes_read: u64,
    /// Every byte read matched the source at its offset.
    pub intact: bool,
    /// When the receiver read the FIN, for a fixed length.
    pub done_at: Option<Instant>,
    /// Bytes read in each bin of `bin` from time zero.
    pub delivered: Vec<u64>,
    pub bin: Duration,
    /// The run's duration.
    pub duration: Duration,
    pub sender: SenderStats,
    pub receiver: ReceiverStats,
    /// Per path, forward then reverse.
    pub links: Vec<(LinkStats, LinkStats)>,
    /// (time, path, cwnd bytes) each time a path's window changed.
    pub cwnd_trace: Vec<(Instant, usize, u64)>,
}

impl StreamOutcome {
    /// Goodput over `[from, to)`, Mbit/s (whole bins).
    pub fn mbps_between(&self, from: Duration, to: Duration) -> f64 {
        let b = self.bin.as_nanos().max(1);
        let (i, j) = ((from.as_nanos() / b) as usize, (to.as_nanos() / b) as usize);
        let j = j.min(self.delivered.len());
        if j <= i {
            return 0.0;
        }
        let bytes: u64 = self.delivered[i..j].iter().sum();
        bytes as f64 * 8.0 / ((j - i) as f64 * self.bin.as_secs_f64()) / 1e6
    }

    /// Goodput over the whole run, Mbit/s.
    pub fn mean_mbps(&self) -> f64 {
        self.bytes_read as f64 * 8.0 / self.duration.as_secs_f64().max(1e-9) / 1e6
    }

    /// Goodput of a fixed-length transfer from start to FIN, Mbit/s (0 if unfinished).
    pub fn transfer_mbps(&self) -> f64 {
        match self.done_at {
            Some(t) if t > Instant::ZERO => self.bytes_read as f64 * 8.0 / t.as_secs_f64() / 1e6,
            _ => 0.0,
        }
    }
}

/// The source's byte at `offset`: not periodic at any small stride, so that a chunk out
/// of place is caught.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset.wrapping_mul(7) + offset / 251) as u8
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StreamRunError {
    #[error("stream path {path}: {error}")]
    Link { path: usize, error: LinkConfigError },
    #[error("a stream run needs 1 to 256 paths, got {0}")]
    Paths(usize),
}

/// Runs the two ends until the transfer is done or `duration` has passed.
pub fn run_stream(run: &StreamRun) -> Result<StreamOutcome, StreamRunError> {
    let n = run.paths.len();
    if n == 0 || n > 256 {
        return Err(StreamRunError::Paths(n));
    }
    let mut traces = TraceCache::default();
    let mut fwd = Vec::with_capacity(n);
    let mut rev = Vec::with_capacity(n);
    for (i, p) in run.paths.iter().enumerate() {
        let link = |cfg: &LinkConfig, label: &str, traces: &mut TraceCache| {
            Link::new(
                cfg,
                traces,
                Rng::child(run.seed, &format!("stream-path-{i}-{label}")),
            )
            .map_err(|error| StreamRunError::Link { path: i, error })
        };
        fwd.push(link(&p.forward, "forward", &mut traces)?);
        rev.push(link(&p.reverse, "reverse", &mut traces)?);
    }
    let mut s = StreamSender::new(run.sender, n);
    let mut r = StreamReceiver::new(run.receiver);
    let end = Instant::ZERO + run.duration;
    let bin_ns = run.bin.as_nanos().max(1);
    let mut delivered = vec![0u64; (run.duration.as_nanos() / bin_ns) as usize + 1];
    let mut cwnds: Vec<u64> = (0..n).map(|p| s.cwnd(p)).collect();
    let mut cwnd_trace: Vec<(Instant, usize, u64)> = cwnds
        .iter()
        .enumerate()
        .map(|(p, &c)| (Instant::ZERO, p, c))
        .collect();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut scratch = vec![0u8; 64 * 1024];
    let mut buf = Vec::new();
    let (mut written, mut read, mut intact) = (0u64, 0u64, true);
    let (mut chunk_start, mut chunk_end) = (0u64, 0u64);
    let mut done_at = None;
    let mut now = Instant::ZERO;
    loop {
        // The source: as much as the send buffer takes, from a window of the pattern
        // generated once per 64 kB.
        loop {
            if written == chunk_end {
                let left = run.bytes.map_or(u64::MAX, |b| b - written);
                let len = (chunk.len() as u64).min(left) as usize;
                if len == 0 {
                    break;
                }
                for (k, b) in chunk[..len].iter_mut().enumerate() {
                    *b = pattern_byte(written + k as u64);
                }
                chunk_start = written;
                chunk_end = written + len as u64;
            }
            let from = (written - chunk_start) as usize;
            let avail = (chunk_end - written) as usize;
            let took = s.write(&chunk[from..from + avail]);
            written += took as u64;
            if took < avail || took == 0 {
                break;
            }
        }
        if run.bytes == Some(written) {
            s.finish();
        }
        while let Some(p) = s.poll_transmit(now, &mut buf) {
            let size = buf.len() + WIRE_OVERHEAD;
            fwd[p as usize].send_sized(now, buf.clone(), size);
        }
        loop {
            let k = r.read(&mut scratch);
            if k == 0 {
                break;
            }
            for (j, &b) in scratch[..k].iter().enumerate() {
                intact &= b == pattern_byte(read + j as u64);
            }
            read += k as u64;
            let idx = (u128::from(now.as_micros()) * 1000 / bin_ns) as usize;
            if let Some(d) = delivered.get_mut(idx) {
                *d += k as u64;
            }
        }
        while let Some(p) = r.poll_transmit(now, &mut buf) {
            let size = buf.len() + WIRE_OVERHEAD;
            rev[p as usize].send_sized(now, buf.clone(), size);
        }
        for (p, c) in cwnds.iter_mut().enumerate() {
            if s.cwnd(p) != *c {
                *c = s.cwnd(p);
                cwnd_trace.push((now, p, *c));
            }
        }
        if done_at.is_none() && r.is_finished() {
            done_at = Some(now);
        }
        if done_at.is_some() && s.is_done() {
            break;
        }
        let next = [s.poll_timeout(), r.poll_timeout()]
            .into_iter()
            .chain(fwd.iter().chain(&rev).map(Link::poll_timeout))
            .flatten()
            .min();
        match next {
            Some(t) if t <= end => now = now.max(t),
            _ => break,
        }
        for (i, l) in fwd.iter_mut().enumerate() {
            while let Some(b) = l.poll_deliver(now) {
                r.handle_datagram(now, i as u8, &b);
            }
        }
        for (i, l) in rev.iter_mut().enumerate() {
            while let Some(b) = l.poll_deliver(now) {
                s.handle_datagram(now, i as u8, &b);
            }
        }
        s.handle_timeout(now);
        r.handle_timeout(now);
    }
    Ok(StreamOutcome {
        bytes_read: read,
        intact,
        done_at,
        delivered,
        bin: run.bin,
        duration: run.duration,
        sender: s.stats().clone(),
        receiver: r.stats(),
        links: fwd
            .iter()
            .zip(&rev)
            .map(|(f, r)| (f.stats(), r.stats()))
            .collect(),
        cwnd_trace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(paths: Vec<StreamPath>, secs: u64, seed: u64) -> StreamRun {
        StreamRun {
            sender: StreamConfig::default(),
            receiver: ReceiverConfig::default(),
            paths,
            bytes: None,
            duration: Duration::from_secs(secs),
            seed,
            bin: Duration::from_millis(100),
        }
    }

    #[test]
    fn a_fixed_transfer_arrives_intact_and_the_same_seed_gives_the_same_run() {
        let mut lossy = StreamPath::symmetric(2.0, 30.0);
        lossy.forward.loss = Some(crate::link::LossConfig::Bernoulli { p: 0.02 });
        let mut run = bulk(vec![lossy, StreamPath::symmetric(1.0, 80.0)], 120, 7);
        run.bytes = Some(300_000);
        let a = run_stream(&run).unwrap();
        assert!(a.intact && a.bytes_read == 300_000 && a.done_at.is_some());
        assert!(a.sender.fast_retransmits > 0);
        let b = run_stream(&run).unwrap();
        assert_eq!((a.done_at, &a.delivered), (b.done_at, &b.delivered));
    }

    #[test]
    fn a_path_down_carries_nothing_and_the_other_carries_on() {
        let run = bulk(
            vec![
                StreamPath::symmetric(2.0, 50.0).down(3.0, 100.0),
                StreamPath::symmetric(2.0, 50.0),
            ],
            8,
            1,
        );
        let o = run_stream(&run).unwrap();
        assert!(o.intact);
        assert_eq!(o.sender.failures, 1);
        let late = o.mbps_between(Duration::from_secs(6), Duration::from_secs(8));
        assert!(late > 1.5 && late < 2.0, "{late}");
    }

    #[test]
    fn the_delay_bound_keeps_the_queues_short() {
        // Two unlike paths behind 250 ms drop-tail queues: loss-based windows fill them
        // (mean queueing 153 and 187 ms), the delay bound holds it at 70-80 ms.
        let paths = vec![
            StreamPath::symmetric(2.0, 50.0),
            StreamPath::symmetric(1.0, 100.0),
        ];
        let mut run = bulk(paths, 30, 1);
        run.sender.delay_bound = None;
        let loss_based = run_stream(&run).unwrap();
        run.sender.delay_bound = Some(braid_core::stream::DelayBound {
            allowance: braid_core::stream::DELAY_BOUND_ALLOWANCE,
        });
        let bounded = run_stream(&run).unwrap();
        assert!(loss_based.intact && bounded.intact);
        assert!(bounded.sender.delay_cuts > 0);
        for (i, (f, _)) in bounded.links.iter().enumerate() {
            let full = loss_based.links[i].0.queue_delay_mean_ms;
            println!(
                "path {i}: mean queue {full:.1} ms loss-based, {:.1} ms bounded",
                f.queue_delay_mean_ms
            );
            assert!(f.queue_delay_mean_ms < 100.0, "path {i}: {f:?}");
            assert!(full > 2.0 * f.queue_delay_mean_ms, "path {i}: {full}");
        }
        // and the paths stay busy
        let late = bounded.mbps_between(Duration::from_secs(10), Duration::from_secs(30));
        assert!(late > 0.9 * 3.0 * 1200.0 / 1240.0, "{late}");
    }
}
