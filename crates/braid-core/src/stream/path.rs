//! The sender's view of one path: its window, RTO, what is in flight on it, its T3-rtx
//! timer and its failure state (oSCTP §IV-E1, RFC 4960 §8.2).

use std::collections::BTreeMap;
use std::time::Duration;

use super::congestion::{DelayBound, Window, WindowedMin};
use super::rack::Rack;
use super::rto::{RtoEstimator, RtoParams};
use crate::Instant;

/// When a path counts as failed, and what revives it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Failover {
    /// oSCTP §IV-E1: failed at its first T3-rtx expiry; revived by an acknowledgement of
    /// data sent on it or a heartbeat answer; heartbeats every second while failed (once
    /// per RTO with [`super::StreamConfig::fast_revival`]).
    #[default]
    Osctp,
    /// Stock SCTP (RFC 4960 §8.2): failed after `path_max_retrans` consecutive expiries;
    /// revived by a heartbeat answer only; heartbeats every 30 s while failed.
    Stock { path_max_retrans: u32 },
}

impl Failover {
    /// RFC 4960 §15's Path.Max.Retrans.
    pub const STOCK: Failover = Failover::Stock {
        path_max_retrans: 5,
    };

    pub fn heartbeat_interval(self) -> Duration {
        match self {
            Failover::Osctp => Duration::from_secs(1),
            Failover::Stock { .. } => Duration::from_secs(30),
        }
    }
}

/// The window before a fast retransmit cut it, restored once every chunk that recovery
/// episode fast-retransmitted on the path proves spurious ([`super::FastRetransmit::Rack`]).
#[derive(Clone, Copy, Debug)]
pub struct CutUndo {
    pub window: Window,
    pub episode: u64,
    /// Retransmissions of the episode not yet proven spurious.
    pub left: u32,
}

/// One path at the sender.
#[derive(Debug)]
pub struct SenderPath {
    pub window: Window,
    pub rto: RtoEstimator,
    /// Bytes sent on the path, not acknowledged and not marked for retransmission.
    pub flight: u64,
    /// Per-path send sequence of the next transmission (SD-FRT counts in this order).
    pub next_psn: u64,
    /// What is in flight on the path: psn -> TSN.
    pub outstanding: BTreeMap<u64, u64>,
    /// T3-rtx expiry, while data is in flight.
    pub t3: Option<Instant>,
    /// Consecutive T3 expiries without an acknowledgement (RFC 4960 §8.2 error counter).
    pub errors: u32,
    /// In fast recovery until a chunk sent at or after this psn is acknowledged.
    pub recover_psn: Option<u64>,
    /// Failed: carries no data; the next heartbeat is due at this time.
    pub failed: Option<Instant>,
    pub heartbeat_due: bool,
    /// Smallest and latest RTT samples (the queue estimate of [`super::StreamConfig::random_loss`]).
    pub min_rtt: Option<Duration>,
    /// Smallest RTT of a chunk whose SACK came back on this path: HyStart's baseline, as a
    /// SACK on another path adds that path's delay and the difference in delay reads as a
    /// queue (trace-stream's 5g-static+lte-walk: 15 ms one way against 30 ms).
    pub own_min_rtt: Option<Duration>,
    pub latest_rtt: Duration,
    /// The window and RTO before the first T3 expiry of a run of them, restored if the
    /// expiry proves spurious (Eifel's response, RFC 4015): until an acknowledgement of
    /// data sent after it settles the question.
    pub undo: Option<(Window, RtoEstimator)>,
    /// The window before the T3 expiries that failed the path.
    pub before_failure: Option<Window>,
    /// Minimum RTT over [`DelayBound::MIN_RTT_WINDOW`], and the psn from which the next
    /// delay cut may come (one per RTT), for [`super::StreamConfig::delay_bound`].
    pub windowed_min_rtt: WindowedMin,
    pub delay_cut_psn: u64,
    /// RFC 8985's time threshold ([`super::FastRetransmit::Rack`]).
    pub rack: Rack,
    /// Fast-retransmit cuts on the path so far; the latest one's undo state.
    pub episode: u64,
    pub cut_undo: Option<CutUndo>,
    /// Bytes of datagrams it may still carry, or no limit
    /// ([`super::StreamSender::set_allowance`]).
    pub allowance: Option<u64>,
}

impl SenderPath {
    /// Whether its allowance leaves no room for a whole chunk of `mtu` payload bytes.
    pub fn held(&self, mtu: u64) -> bool {
        self.allowance
            .is_some_and(|a| a < mtu + super::chunk::DATA_HEADER as u64)
    }

    pub fn new(window: Window, rto: RtoParams) -> Self {
        SenderPath {
            window,
            rto: RtoEstimator::new(rto),
            flight: 0,
            next_psn: 0,
            outstanding: BTreeMap::new(),
            t3: None,
            errors: 0,
            recover_psn: None,
            failed: None,
            heartbeat_due: false,
            min_rtt: None,
            own_min_rtt: None,
            latest_rtt: Duration::ZERO,
            undo: None,
            before_failure: None,
            windowed_min_rtt: WindowedMin::default(),
            delay_cut_psn: 0,
            rack: Rack::default(),
            episode: 0,
            cut_undo: None,
            allowance: None,
        }
    }

    /// An RTT sample of a chunk sent once.
    pub fn on_rtt(&mut self, rtt: Duration) {
        self.rto.on_sample(rtt);
        self.latest_rtt = rtt;
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    /// The delay bound after an acknowledgement of chunks up to `max_psn`: cuts the window
    /// if the smoothed RTT stands above the windowed minimum by more than the allowance,
    /// once per window of data sent (the chunks in flight at a cut must come back first).
    pub fn apply_delay_bound(&mut self, bound: DelayBound, max_psn: u64) -> bool {
        let (Some(srtt), Some(min)) = (self.rto.srtt(), self.windowed_min_rtt.get()) else {
            return false;
        };
        if max_psn < self.delay_cut_psn {
            return false;
        }
        let Some(cap) = bound.cap(self.window.cwnd(), srtt, min) else {
            return false;
        };
        self.window.cap(cap);
        self.delay_cut_psn = self.next_psn;
        true
    }

    /// Packets queued on the path by Veno's estimate: cwnd x (RTT - base RTT) / RTT.
    pub fn backlog_packets(&self, mtu: u64) -> f64 {
        let Some(base) = self.min_rtt else {
            return f64::INFINITY;
        };
        let rtt = self.latest_rtt.as_secs_f64().max(1e-6);
        let queued = (rtt - base.as_secs_f64()).max(0.0) / rtt;
        self.window.cwnd() as f64 / mtu as f64 * queued
    }

    /// RTT for scheduling and rate shares before any sample: the RTO.
    pub fn srtt(&self) -> Duration {
        self.rto.srtt().unwrap_or(self.rto.rto())
    }

    /// The delivery rate the window allows, bytes per second.
    pub fn rate(&self) -> f64 {
        self.window.cwnd() as f64 / self.srtt().as_secs_f64().max(1e-6)
    }

    /// Marks the path failed: a heartbeat goes now and every `interval` after.
    pub fn fail(&mut self, now: Instant, interval: Duration) {
        if self.failed.is_none() {
            self.failed = Some(now + interval);
            self.heartbeat_due = true;
            self.recover_psn = None;
        }
    }

    /// [`super::StreamConfig::fast_revival`]: a revived path slow-starts back to the
    /// window it had before it failed, or on until a loss if it had not left slow start.
    pub fn restart_after_failure(&mut self) {
        if let Some(w) = self.before_failure.take() {
            let ssthresh = if w.ssthresh() == u64::MAX {
                u64::MAX
            } else {
                w.cwnd()
            };
            self.window.restart_slow_start(ssthresh);
        }
    }

    pub fn revive(&mut self) {
        self.failed = None;
        self.heartbeat_due = false;
        self.errors = 0;
    }
}
