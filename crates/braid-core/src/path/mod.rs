//! Per-path state: what this end knows about sending on a path (the *tx* side, fed by the
//! peer's reports) and what it measures about receiving on it (the *rx* side), with the
//! estimators of PluriBus §4.2-4.3.
//!
//! - [`queue`]: the bottleneck queue kept as drain time (sender side, §4.2).
//! - [`capacity`]: capacity from packet trains over 500 ms intervals (receiver side, §4.2).
//! - [`delay`]: propagation delay plus clock skew (receiver side, §4.3).
//! - [`loss`]: loss-rate EWMA over path sequence numbers (receiver side, §4.1).
//! - [`rtt`]: round-trip time from report echoes.
//! - [`liveness`]: fast failure detection from stalled acknowledgements, and revival
//!   (oSCTP §IV-E).
//!
//! Receiver-side estimates travel to the sender in reports (docs/wire.md, "Report"); the
//! sender's [`Path`] holds the latest of them for its schedulers and loss recovery.

pub mod backoff;
pub mod capacity;
pub mod delay;
pub mod feedback;
pub mod liveness;

/// Most bytes a path whose capacity is still unknown carries unacknowledged: TCP's initial
/// window of ten segments (RFC 6928). The stand-in capacity
/// ([`capacity::UNKNOWN_BPS`]) is fast, so light traffic (requests, ACKs) takes the path
/// of least delay as if it were measured, while a burst spreads over the paths instead of
/// flooding one (prism-fig8 at 70% disparity: 58 drops in the first second on a 0.42
/// Mbit/s link; udp-aggregation: 4.5% of 20 s lost); one window sent back to back gives
/// the peer the busy pairs of its first estimate. A slow stand-in (1 Mbit/s) instead was
/// never corrected where traffic never filled the path, and held short flows' packets on
/// a 20 Mbit/s uplink as if it were slow (never-worse, capacity 20:1, web 96 -> 104 ms).
pub const START_WINDOW_BYTES: u64 = 10 * 1500;

/// Datagrams whose predicted wait is remembered for queue-model corrections.
pub const SENT_RING: usize = 4096;
/// Differences between predicted and observed waits below this are estimation noise.
pub const QUEUE_TOLERANCE: Duration = Duration::from_millis(2);
/// Share of a loss-guarded path's capacity its probe copies take ([`Path::take_probe`]):
/// trace-bulk's quick sets over eight trace offsets, 0.863 of the links' sum with them
/// against 0.860 (docs/benchmarks.md, "Real links").
pub const PROBE_SHARE: f64 = 0.25;
/// Weight per datagram of the sender's long-term loss average (memory of a few hundred
/// datagrams), from the peer's per-path acknowledgements.
pub const LONG_LOSS_WEIGHT: f64 = 1.0 / 256.0;
/// The long-term average starts at zero, so over a path's first datagrams it reads low by
/// the weight it has not gathered yet (after 150 datagrams at 5% loss it read 2.2%): it is
/// divided by the weight gathered, as if this many lossless datagrams came first, so that
/// one early loss does not read as a lossy path.
pub const LONG_LOSS_PRIOR: i32 = 64;
pub mod loss;
pub mod queue;
pub mod rtt;
pub mod window;

use std::time::Duration;

use braid_wire::PathEntry;

use crate::stats::PathStats;
use crate::{Instant, PathCc, PathConfig, PathId};

use backoff::Backoff;
use capacity::CapacityEstimator;
use delay::DelayEstimator;
use feedback::FeedbackDelay;
use liveness::TxLiveness;
use loss::LossEstimator;
use queue::{transmission_time, QueueEstimate};
use rtt::RttEstimator;
use window::{PathWindow, SendState};

/// One path as the engine sees it. Schedulers and loss recovery read it through the
/// accessor methods.
#[derive(Clone, Debug)]
pub struct Path {
    id: PathId,
    tx: TxState,
    rx: RxState,
}

/// A path's send numbering: its next path sequence number and the peer's latest
/// acknowledgement of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Numbering {
    next_seq: u32,
    peer_highest_seq: Option<u32>,
    peer_received: u32,
}

/// What we know about sending on the path.
#[derive(Clone, Debug)]
struct TxState {
    capacity_bps: u64,
    /// When the capacity stopped being the stand-in for one nobody configured (at once
    /// when configured); `None` until the peer's first estimate.
    capacity_known_at: Option<Instant>,
    queue: QueueEstimate,
    /// The peer's latest `d + δ` for this path, µs, relative to the session's delay base.
    delay_skew: Option<i64>,
    loss: f64,
    rtt: RttEstimator,
    /// From sending a datagram until the peer's feedback reports it.
    feedback: FeedbackDelay,
    /// The peer hears this path (from its latest report; true until it says otherwise).
    peer_live: bool,
    /// Set aside by the loss guard.
    loss_guarded: bool,
    /// While guarded: when the next probe copy may go ([`Path::take_probe`]).
    probe_at: Option<Instant>,
    /// A metered path whose budget for the interval is spent (`session/metering.rs`).
    metered_hold: bool,
    /// What split-TCP's stream beside the tunnel did on the path ([`Foreign`]).
    foreign: Foreign,
    /// Declared failed by stalled acknowledgements ([`liveness`]).
    liveness: TxLiveness,
    /// Long-term loss rate of our direction, from the peer's acknowledgements (an average
    /// started at zero: see [`LONG_LOSS_PRIOR`]).
    long_loss: f64,
    /// Weight the average has gathered: 1 − (1 − [`LONG_LOSS_WEIGHT`])^datagrams.
    long_loss_weight: f64,
    /// The peer's latest report of the highest path sequence number it received.
    peer_highest_seq: Option<u32>,
    peer_received: u32,
    next_seq: u32,
    last_tx: Option<Instant>,
    /// When we last sent a report on the path: its echo is what refreshes the peer's RTT.
    last_report: Option<Instant>,
    /// The model's predicted wait and the send instant of recent datagrams, by path
    /// sequence number modulo [`SENT_RING`], to compare with what the receiver saw, and
    /// the bytes sent on the path up to and including it.
    sent_ring: Vec<Sent>,
    /// Bytes sent up to and including the newest datagram the peer acknowledged.
    acked_bytes: u64,
    /// The same two counts for what the congestion window counts (all but opportunistic
    /// coded packets).
    window_bytes: u64,
    acked_window_bytes: u64,
    /// When that acknowledgement arrived, and when its datagram was sent.
    acked_at: Option<(Instant, Instant)>,
    /// The congestion window ([`window`]).
    window: PathWindow,
    /// Which controller sizes it, and the loss/delay factor on it ([`backoff`]).
    cc: PathCc,
    backoff: Backoff,
    /// Queue model corrections applied.
    queue_corrections: u64,
    /// Changes of `capacity_bps` from reports, and the smallest value it took.
    capacity_changes: u64,
    capacity_min: u64,
    packets: u64,
    bytes: u64,
    data_packets: u64,
    repair_packets: u64,
    control_packets: u64,
}

/// Split-TCP's stream on the path beside the tunnel (its own socket, `stream::split`):
/// its bytes count against a metered path's budget and cap as the tunnel's do, and what it
/// delivered on a cheap path is that path's rate for metering's prediction. Cumulative
/// bytes, on the wire as the tunnel counts its own.
#[derive(Clone, Copy, Debug, Default)]
struct Foreign {
    tx: u64,
    acked: u64,
    rx: u64,
    /// The stream's window on the path was full when last told.
    full: bool,
}

/// A datagram sent on the path, remembered by its path sequence number modulo
/// [`SENT_RING`].
#[derive(Clone, Copy, Debug)]
struct Sent {
    seq: u32,
    at: Instant,
    /// The queue model's predicted wait, and its correction offset then.
    predicted: Duration,
    shifted: i64,
    /// Bytes sent on the path up to and including it, all and those the window counts.
    bytes: u64,
    window_bytes: u64,
    /// For its delivery-rate sample.
    state: SendState,
}

impl Sent {
    const EMPTY: Sent = Sent {
        seq: u32::MAX,
        at: Instant::ZERO,
        predicted: Duration::ZERO,
        shifted: 0,
        bytes: 0,
        window_bytes: 0,
        state: SendState {
            delivered: 0,
            delivered_at: Instant::ZERO,
            first_sent: Instant::ZERO,
            window_limited: false,
        },
    };
}

/// What we measure about receiving on the path.
#[derive(Clone, Debug)]
struct RxState {
    live: bool,
    last_rx: Option<Instant>,
    capacity: CapacityEstimator,
    delay: DelayEstimator,
    loss: LossEstimator,
    highest_seq: Option<u32>,
    received: u32,
    /// Send timestamp of the latest datagram, and when it arrived (for the report echo).
    echo: Option<(u32, Instant)>,
    /// Queueing delay the highest-numbered datagram saw, µs.
    latest_queue_us: u32,
    /// When a data datagram last arrived on the path, or, before the first, when the path
    /// was first heard (until then it may carry data any moment).
    last_data_rx: Option<Instant>,
    packets: u64,
    bytes: u64,
}

/// What a report entry changed on the tx side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReportOutcome {
    pub capacity_changed: Option<u64>,
}

impl Path {
    pub(crate) fn new(cfg: &PathConfig, capacity_interval: Duration, now: Instant) -> Path {
        let tx_capacity = match cfg.tx_capacity_bps {
            0 => capacity::UNKNOWN_BPS,
            c => c,
        };
        Path {
            id: cfg.id,
            tx: TxState {
                capacity_bps: tx_capacity,
                capacity_known_at: (cfg.tx_capacity_bps != 0).then_some(now),
                queue: QueueEstimate::default(),
                delay_skew: None,
                loss: 0.0,
                rtt: RttEstimator::default(),
                feedback: FeedbackDelay::default(),
                peer_live: true,
                loss_guarded: false,
                probe_at: None,
                metered_hold: false,
                foreign: Foreign::default(),
                liveness: TxLiveness::default(),
                long_loss: 0.0,
                long_loss_weight: 0.0,
                peer_highest_seq: None,
                peer_received: 0,
                next_seq: 0,
                last_tx: None,
                last_report: None,
                sent_ring: Vec::new(),
                acked_bytes: 0,
                window_bytes: 0,
                acked_window_bytes: 0,
                acked_at: None,
                window: PathWindow::default(),
                cc: PathCc::default(),
                backoff: Backoff::default(),
                queue_corrections: 0,
                capacity_changes: 0,
                capacity_min: tx_capacity,
                packets: 0,
                bytes: 0,
                data_packets: 0,
                repair_packets: 0,
                control_packets: 0,
            },
            rx: RxState {
                // Optimistic until the path timeout says otherwise.
                live: true,
                last_rx: None,
                capacity: CapacityEstimator::new(cfg.rx_capacity_bps, capacity_interval),
                delay: DelayEstimator::default(),
                loss: LossEstimator::default(),
                highest_seq: None,
                received: 0,
                echo: None,
                latest_queue_us: 0,
                last_data_rx: None,
                packets: 0,
                bytes: 0,
            },
        }
    }

    pub fn id(&self) -> PathId {
        self.id
    }

    /// Whether the path works both ways: we hear it, the peer has not reported that it
    /// no longer hears it, and its acknowledgements have not stalled ([`liveness`]).
    pub fn is_live(&self) -> bool {
        self.rx.live && self.tx.peer_live && !self.tx.liveness.is_stalled()
    }

    /// Where the path's sequence numbering stands, for a path that leaves and may join
    /// again under the same id while its peer kept it (`session/membership.rs`).
    pub(crate) fn numbering(&self) -> Numbering {
        Numbering {
            next_seq: self.tx.next_seq,
            peer_highest_seq: self.tx.peer_highest_seq,
            peer_received: self.tx.peer_received,
        }
    }

    /// Continues the numbering a path of this id had when it left.
    pub(crate) fn resume_numbering(&mut self, n: Numbering) {
        self.tx.next_seq = n.next_seq;
        self.tx.peer_highest_seq = n.peer_highest_seq;
        self.tx.peer_received = n.peer_received;
    }

    /// Marks the path not heard yet: it carries only heartbeats until the peer answers on
    /// it (a path that joins where nobody may be listening yet).
    pub(crate) fn mark_unheard(&mut self) {
        self.rx.live = false;
    }

    /// Failure detection state of the direction we send on.
    pub fn liveness(&self) -> &TxLiveness {
        &self.tx.liveness
    }

    /// PluriBus §4.3's predicted arrival of our datagram `seq`, if it is still remembered:
    /// its send instant plus the queue wait the model (as corrected since) gives it plus
    /// `d + δ`, in µs on the sender's clock shifted by the relative `d + δ` (comparable
    /// across paths, see [`liveness`]).
    pub fn predicted_arrival(&self, seq: u32) -> Option<i64> {
        let e = self.sent(seq)?;
        let since = self.tx.queue.shifted_us() - e.shifted;
        let wait = (e.predicted.as_micros() as i64 + since).max(0);
        Some(e.at.as_micros() as i64 + wait + self.tx.delay_skew.unwrap_or(0))
    }

    /// What the sent ring remembers of datagram `seq`.
    fn sent(&self, seq: u32) -> Option<&Sent> {
        self.tx
            .sent_ring
            .get(seq as usize % SENT_RING)
            .filter(|e| e.seq == seq)
    }

    /// The predicted arrival of the oldest datagram the peer has not acknowledged yet;
    /// `None` when everything sent was acknowledged (or is no longer remembered).
    pub fn oldest_unacked_arrival(&self) -> Option<i64> {
        if self.unacked_datagrams() == 0 {
            return None;
        }
        self.predicted_arrival(self.tx.peer_highest_seq.map_or(0, |h| h.wrapping_add(1)))
    }

    /// When the oldest datagram the peer has not acknowledged yet was sent; `None` when
    /// everything sent was acknowledged (or is no longer remembered).
    pub fn oldest_unacked_sent(&self) -> Option<Instant> {
        if self.unacked_datagrams() == 0 {
            return None;
        }
        let seq = self.tx.peer_highest_seq.map_or(0, |h| h.wrapping_add(1));
        self.sent(seq).map(|e| e.at)
    }

    /// Path sequence number of the newest datagram the peer acknowledged.
    pub fn peer_highest_seq(&self) -> Option<u32> {
        self.tx.peer_highest_seq
    }

    /// Declares the path failed (its acknowledgements stalled): it stops being live.
    pub(crate) fn declare_stalled(&mut self, now: Instant) {
        self.tx.liveness.declare_stalled(now);
    }

    /// Feeds the failure detector `acked` newly acknowledged datagrams, the newest `highest`.
    /// Returns true when this revived the path; its queue estimate starts afresh then (what
    /// was queued when it failed is gone).
    pub(crate) fn on_liveness_ack(&mut self, now: Instant, acked: u32, highest: u32) -> bool {
        let arrival = self.predicted_arrival(highest);
        let sent = self.sent(highest).map(|e| e.at);
        let revived = self.tx.liveness.on_ack(acked, sent, arrival);
        if revived {
            self.tx.queue.reset(now);
        }
        revived
    }

    /// Whether schedulers should put new packets on this path: it is live, the loss
    /// guard ([`crate::sched::guard`]) has not set it aside and, if metered, its budget
    /// for the interval is not spent ([`crate::metered`]).
    pub fn is_usable(&self) -> bool {
        self.is_live() && !self.tx.loss_guarded && !self.tx.metered_hold
    }

    /// Whether the path is metered and its budget for the interval is spent.
    pub fn is_metered_hold(&self) -> bool {
        self.tx.metered_hold
    }

    pub(crate) fn set_metered_hold(&mut self, hold: bool) {
        self.tx.metered_hold = hold;
    }

    /// Bytes sent on the path, every kind of datagram and its overhead counted.
    pub(crate) fn tx_bytes(&self) -> u64 {
        self.tx.bytes + self.tx.foreign.tx
    }

    /// Bytes received on the path, every kind of datagram and its overhead counted, the
    /// stream's beside the tunnel included.
    pub(crate) fn rx_bytes(&self) -> u64 {
        self.rx.bytes + self.tx.foreign.rx
    }

    /// Bytes sent up to the newest datagram the peer acknowledged: what the path delivered
    /// (the stream's acknowledged bytes included).
    pub(crate) fn acked_bytes(&self) -> u64 {
        self.tx.acked_bytes + self.tx.foreign.acked
    }

    /// Split-TCP's stream sent `sent` bytes on the path and had `acked` acknowledged since
    /// the last call; `full`: its window on the path is full.
    pub(crate) fn note_foreign_traffic(&mut self, sent: u64, acked: u64, full: bool) {
        let f = &mut self.tx.foreign;
        f.tx += sent;
        f.acked += acked;
        f.full = full;
    }

    /// Whether split-TCP's stream has filled its window on the path (metering's "a cheap
    /// path has room" asks both engines).
    pub(crate) fn foreign_full(&self) -> bool {
        self.tx.foreign.full
    }

    /// Whether the loss guard has set the path aside.
    pub fn is_loss_guarded(&self) -> bool {
        self.tx.loss_guarded
    }

    pub(crate) fn set_loss_guarded(&mut self, guarded: bool) {
        self.tx.loss_guarded = guarded;
        self.tx.probe_at = None;
    }

    /// Whether a guarded path may carry a probe copy of `wire_bytes` now, and if so books
    /// it: copies of data sent elsewhere at [`PROBE_SHARE`] of its capacity estimate, so
    /// that its loss rate is measured at a load that cannot overflow its queue. Without
    /// them a path guarded for the drops of its own overdriven queue carried heartbeats
    /// alone, and its long-term loss rate, averaged per datagram, held it aside for tens
    /// of seconds (trace-bulk, hsdpa-train+car at 31 s: 24 s of 60).
    pub(crate) fn take_probe(&mut self, now: Instant, wire_bytes: usize) -> bool {
        if !self.tx.loss_guarded || !self.is_live() || self.tx.metered_hold {
            return false;
        }
        if self.tx.probe_at.is_some_and(|at| now < at) {
            return false;
        }
        let rate = (self.tx.capacity_bps as f64 * PROBE_SHARE) as u64;
        self.tx.probe_at = Some(now + transmission_time(wire_bytes, rate.max(1)));
        true
    }

    /// Capacity of the direction we send on, bits per second: the peer's estimate, or the
    /// configured expectation before its first report.
    pub fn capacity_bps(&self) -> u64 {
        self.tx.capacity_bps
    }

    /// The sender's estimate of the bottleneck queue, in drain time (PluriBus §4.2).
    pub fn queue_delay(&self, now: Instant) -> Duration {
        self.tx.queue.length(now)
    }

    /// Whether the path's capacity is still unknown and [`START_WINDOW_BYTES`] are
    /// unacknowledged on it: schedulers that cap bottleneck queues send no more until an
    /// acknowledgement or the first estimate.
    pub fn start_window_full(&self) -> bool {
        self.tx.capacity_known_at.is_none()
            && self.tx.bytes.saturating_sub(self.tx.acked_bytes) >= START_WINDOW_BYTES
    }

    /// When the peer's acknowledgements on this path last moved forward.
    pub fn last_ack_advance(&self) -> Option<Instant> {
        self.tx.acked_at.map(|(at, _)| at)
    }

    /// Bytes sent on the path and not yet acknowledged by the peer (datagrams it skipped
    /// past count as no longer in flight).
    /// Opportunistic coded packets do not count: they go only where the queue is empty and
    /// give way to data, and counting them held the next burst of data back for their
    /// acknowledgement.
    pub fn in_flight_bytes(&self) -> u64 {
        self.tx
            .window_bytes
            .saturating_sub(self.tx.acked_window_bytes)
    }

    /// The path's congestion window, bytes ([`window`]), with the queue allowance
    /// [`window::QUEUE_TARGET`]: [`START_WINDOW_BYTES`] until the first delivery-rate
    /// sample.
    pub fn window(&self, now: Instant) -> u64 {
        self.window_with(now, window::QUEUE_TARGET)
    }

    /// [`Path::window`] with a queue allowance of `allowance`.
    pub fn window_with(&self, now: Instant, allowance: Duration) -> u64 {
        let w = self.rate_window(now, allowance);
        match self.tx.cc {
            PathCc::Rate => w,
            PathCc::LossDelay => self.tx.backoff.apply(w, window::MIN_WINDOW),
        }
    }

    /// Selects the path's congestion controller (`Config::path_cc`).
    pub(crate) fn set_cc(&mut self, cc: PathCc) {
        self.tx.cc = cc;
    }

    /// The loss/delay factor on the window and its cuts so far ([`backoff`]).
    pub fn backoff(&self) -> (f64, u64) {
        (self.tx.backoff.scale(), self.tx.backoff.cuts())
    }

    /// The rate model's window alone ([`window`]).
    fn rate_window(&self, now: Instant, allowance: Duration) -> u64 {
        let capacity = self
            .tx
            .capacity_known_at
            .map(|_| self.tx.capacity_bps as f64 / 8.0);
        self.tx.window.window(
            now,
            self.tx.feedback.min(),
            START_WINDOW_BYTES,
            capacity,
            allowance,
        )
    }

    /// Whether the path's window is full: schedulers that cap bottleneck queues send no
    /// more on it until an acknowledgement.
    pub fn window_full(&self, now: Instant) -> bool {
        self.in_flight_bytes() >= self.window(now)
    }

    /// [`Path::window_full`] with a queue allowance of `allowance`.
    pub fn window_full_with(&self, now: Instant, allowance: Duration) -> bool {
        self.in_flight_bytes() >= self.window_with(now, allowance)
    }

    /// The measured delivery rate, bits per second, once sampled ([`window`]).
    pub fn delivery_rate_bps(&self, now: Instant) -> Option<u64> {
        self.tx.window.rate(now).map(|r| (r * 8.0) as u64)
    }

    /// Until when [`Path::delivery_rate_bps`] (and so [`Path::window`]) keeps its value at
    /// `now` if nothing is sent or acknowledged: the next instant a rate sample ages out.
    pub fn delivery_rate_steady_until(&self, now: Instant) -> Option<Instant> {
        self.tx.window.rate_steady_until(now)
    }

    /// Whether the bottleneck queue is estimated empty (the condition for opportunistic
    /// coded packets, PluriBus §4).
    pub fn queue_is_empty(&self, now: Instant) -> bool {
        self.tx.queue.is_empty(now)
    }

    /// `PacketSize / PathCapacity` for a datagram of `wire_bytes`.
    pub fn transmission_time(&self, wire_bytes: usize) -> Duration {
        transmission_time(wire_bytes, self.tx.capacity_bps)
    }

    /// The peer's estimate of propagation delay plus clock skew for our direction, in µs
    /// relative to an arbitrary base shared by all paths of the session (PluriBus §4.3: only
    /// differences between paths matter, so the skew and the base cancel). Add
    /// [`crate::Session::delay_base`] to get the receiver-clock value.
    pub fn delay_skew_us(&self) -> Option<i64> {
        self.tx.delay_skew
    }

    /// PluriBus §4.3's estimate of when a datagram of `wire_bytes` sent now would reach the
    /// peer: `size / capacity + queue + (d + δ)`, µs relative to `now` and the delay base.
    /// `None` before the peer has reported a delay for this path.
    pub fn predicted_delivery_us(&self, now: Instant, wire_bytes: usize) -> Option<i64> {
        let d = self.tx.delay_skew?;
        let q = self.queue_delay(now) + self.transmission_time(wire_bytes);
        Some(i64::try_from(q.as_micros()).unwrap_or(i64::MAX / 2) + d)
    }

    /// Loss rate of our direction as the peer measured it (a short average, PluriBus §4.1).
    pub fn loss_rate(&self) -> f64 {
        self.tx.loss
    }

    /// Loss rate of our direction over the last few hundred datagrams, from the peer's
    /// acknowledgements (outages and the path's set-up, before the peer's first
    /// acknowledgement, excluded): a steadier figure for decisions that should not flap,
    /// such as the loss guard.
    pub fn long_loss_rate(&self) -> f64 {
        let prior = 1.0 - (1.0 - LONG_LOSS_WEIGHT).powi(LONG_LOSS_PRIOR);
        self.tx.long_loss / self.tx.long_loss_weight.max(prior)
    }

    /// Smoothed round-trip time, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.tx.rtt.srtt()
    }

    /// The RTT estimator (smoothed, variation, minimum).
    pub fn rtt(&self) -> &RttEstimator {
        &self.tx.rtt
    }

    /// The smallest recent delay from sending a datagram on the path until the peer's
    /// feedback reports it ([`feedback`]): how long a datagram counts in
    /// [`Path::unacked_datagrams`] when the path's queue is empty.
    pub fn feedback_delay(&self) -> Option<Duration> {
        self.tx.feedback.min()
    }

    /// Datagrams sent on the path that the peer had not yet reported received, by path
    /// sequence numbers (lost ones included until a report moves past them).
    pub fn unacked_datagrams(&self) -> u32 {
        match self.tx.peer_highest_seq {
            Some(h) => self.tx.next_seq.wrapping_sub(h.wrapping_add(1)),
            None => self.tx.next_seq,
        }
    }

    /// Path sequence number of the latest datagram sent on the path.
    pub(crate) fn last_seq_sent(&self) -> u32 {
        self.tx.next_seq.wrapping_sub(1)
    }

    /// When we last sent on the path.
    pub fn last_tx(&self) -> Option<Instant> {
        self.tx.last_tx
    }

    /// When we last sent a report on the path.
    pub fn last_report(&self) -> Option<Instant> {
        self.tx.last_report
    }

    pub(crate) fn on_report_sent(&mut self, now: Instant) {
        self.tx.last_report = Some(now);
    }

    /// When we last received on the path.
    pub fn last_rx(&self) -> Option<Instant> {
        self.rx.last_rx
    }

    /// Notes that a data datagram arrived on the path now.
    pub(crate) fn note_data_rx(&mut self, now: Instant) {
        self.rx.last_data_rx = Some(now);
    }

    /// For a path that carried data within `recent` of `now` (or was first heard then): our receive-side estimate of
    /// `d + δ` (µs, wrapping like timestamps) and the queueing delay the latest datagram
    /// saw (µs).
    pub(crate) fn rx_data_delay(&self, now: Instant, recent: Duration) -> Option<(u32, u32)> {
        let at = self.rx.last_data_rx?;
        // A path we no longer hear (it failed) carries nothing that could trail the rest.
        if !self.rx.live || now.saturating_duration_since(at) > recent {
            return None;
        }
        Some((self.rx.delay.estimate()?, self.rx.latest_queue_us))
    }

    /// Whether we hear the path (rx side liveness).
    pub fn rx_live(&self) -> bool {
        self.rx.live
    }

    /// Our receive-side loss estimate (what we report to the peer).
    pub fn rx_loss_rate(&self) -> f64 {
        self.rx.loss.rate()
    }

    /// Our receive-side capacity estimate (what we report to the peer).
    pub fn rx_capacity_bps(&self) -> u64 {
        self.rx.capacity.estimate_bps()
    }

    /// Takes the next path sequence number and accounts for a datagram of `wire_bytes` sent
    /// now: the queue estimate grows by its transmission time.
    pub(crate) fn on_send(&mut self, now: Instant, wire_bytes: usize, kind: SentKind) -> u32 {
        let seq = self.tx.next_seq;
        self.tx.next_seq = seq.wrapping_add(1);
        let predicted = self.tx.queue.length(now);
        if self.tx.sent_ring.len() < SENT_RING {
            self.tx.sent_ring.resize(SENT_RING, Sent::EMPTY);
        }
        let shifted = self.tx.queue.shifted_us();
        let in_flight = self.in_flight_bytes() + wire_bytes as u64;
        // After an idle spell the interval starts now (as BBR's rate sampling does when
        // nothing is in flight), or the idle time would read as a slow link.
        let (delivered_at, first_sent) = match self.tx.acked_at {
            Some(at) if self.in_flight_bytes() > 0 => at,
            _ => (now, now),
        };
        let state = SendState {
            delivered: self.tx.acked_bytes,
            delivered_at,
            first_sent,
            // Against the rate window alone: a window the loss/delay factor holds below it
            // paces the path, and its samples would shrink the rate with the factor.
            window_limited: in_flight.saturating_mul(4)
                >= self
                    .rate_window(now, window::QUEUE_TARGET)
                    .saturating_mul(3),
        };
        self.tx.bytes += wire_bytes as u64;
        if kind != SentKind::Coded {
            self.tx.window_bytes += wire_bytes as u64;
        }
        self.tx.sent_ring[seq as usize % SENT_RING] = Sent {
            seq,
            at: now,
            predicted,
            shifted,
            bytes: self.tx.bytes,
            window_bytes: self.tx.window_bytes,
            state,
        };
        self.tx.queue.on_send(now, wire_bytes, self.tx.capacity_bps);
        self.tx.last_tx = Some(now);
        self.tx.packets += 1;
        match kind {
            SentKind::Data => self.tx.data_packets += 1,
            SentKind::Repair | SentKind::Coded => self.tx.repair_packets += 1,
            SentKind::Control => self.tx.control_packets += 1,
        }
        seq
    }

    /// Another sender's bytes arrived on the path ([`CapacityEstimator::note_foreign`]).
    pub(crate) fn note_foreign_arrivals(&mut self, bytes: u64) {
        self.rx.capacity.note_foreign(bytes);
        self.tx.foreign.rx += bytes;
    }

    /// Accounts for a datagram received on the path. Returns whether the path came back up,
    /// and the capacity estimate if it changed.
    pub(crate) fn on_receive(
        &mut self,
        now: Instant,
        path_seq: u32,
        sent: u32,
        wire_bytes: usize,
    ) -> (bool, Option<u64>) {
        let came_up = !self.rx.live || self.rx.last_rx.is_none();
        self.rx.last_data_rx.get_or_insert(now);
        self.rx.live = true;
        self.rx.last_rx = Some(now);
        self.rx.packets += 1;
        self.rx.bytes += wire_bytes as u64;
        self.rx.received = self.rx.received.wrapping_add(1);
        let missing = self.rx.loss.on_datagram(path_seq);
        let newer = self
            .rx
            .highest_seq
            .is_none_or(|h| path_seq.wrapping_sub(h) as i32 > 0);
        // An outage's gap says nothing about capacity.
        let missing_in_train = if missing >= loss::OUTAGE_GAP {
            0
        } else {
            missing
        };
        let cap = self
            .rx
            .capacity
            .on_datagram(now, sent, wire_bytes, missing_in_train);
        let known = self.rx.capacity.is_known();
        self.rx.delay.on_datagram(
            now,
            sent,
            wire_bytes,
            known.then(|| self.rx.capacity.estimate_bps()),
            missing,
        );
        if newer {
            self.rx.highest_seq = Some(path_seq);
            self.rx.echo = Some((sent, now));
            // What it waited at the bottleneck: arrival − send − (d + δ) − size / capacity.
            self.rx.latest_queue_us = self.rx.delay.estimate().map_or(0, |d| {
                let tx = transmission_time(wire_bytes, self.rx.capacity.estimate_bps());
                let tx = u32::try_from(tx.as_micros()).unwrap_or(u32::MAX);
                let q = now
                    .wire_timestamp()
                    .wrapping_sub(sent)
                    .wrapping_sub(d)
                    .wrapping_sub(tx);
                (q as i32).max(0) as u32
            });
        }
        (came_up, cap)
    }

    /// Applies the peer's feedback on this path (from a report entry or a piggybacked path
    /// ack): the highest path sequence number it received and its count of datagrams
    /// received. Returns the datagrams newly acknowledged and newly inferred lost (the
    /// sequence numbers the highest one moved past, less those that arrived). Stale
    /// feedback (an older highest) changes nothing.
    /// Also samples the feedback delay of the datagram `highest` names.
    /// `queue` is the wait the peer saw for `highest` at the bottleneck, when it says.
    pub(crate) fn on_path_ack(
        &mut self,
        now: Instant,
        highest: u32,
        received: u32,
        queue: Option<Duration>,
    ) -> (u32, u32) {
        match self.tx.peer_highest_seq {
            Some(h) if (highest.wrapping_sub(h) as i32) <= 0 => (0, 0),
            prev => {
                // Before any feedback, everything from the first sequence number counts.
                let advanced = match prev {
                    Some(h) => highest.wrapping_sub(h),
                    None => highest.wrapping_add(1),
                };
                let arrived = received.wrapping_sub(self.tx.peer_received);
                let arrived = if arrived > advanced.saturating_mul(2) {
                    // The counter is from before our first feedback: trust the sequence.
                    advanced
                } else {
                    arrived
                };
                self.tx.peer_highest_seq = Some(highest);
                self.tx.peer_received = received;
                let mut overdriven = self.tx.capacity_known_at.is_none();
                let newly_acked = self.sent(highest).map(|e| {
                    (
                        e.at,
                        e.window_bytes.saturating_sub(self.tx.acked_window_bytes),
                    )
                });
                if let Some(&e) = self.sent(highest) {
                    self.tx.acked_bytes = e.bytes;
                    self.tx.acked_window_bytes = e.window_bytes;
                    self.tx.acked_at = Some((now, e.at));
                    self.tx
                        .feedback
                        .sample(now, now.saturating_duration_since(e.at));
                    self.tx.window.on_ack(now, e.bytes, e.at, &e.state, queue);
                    overdriven |= self.tx.capacity_known_at.is_some_and(|k| e.at < k);
                }
                let (acked, lost) = (arrived.min(advanced), advanced.saturating_sub(arrived));
                if let (PathCc::LossDelay, Some((sent, bytes))) = (self.tx.cc, newly_acked) {
                    // A loss at this path's bottleneck; outages and the losses of set-up
                    // and of a stand-in capacity (below) are not its congestion.
                    let bottleneck_lost =
                        if lost < loss::OUTAGE_GAP && prev.is_some() && !overdriven {
                            lost
                        } else {
                            0
                        };
                    let w = self.window(now);
                    self.tx
                        .backoff
                        .on_ack(now, sent, bytes, bottleneck_lost, queue, w);
                }
                let n = acked + lost;
                // The first feedback covers the path's set-up: datagrams sent before the
                // peer had heard the path (a gateway's first datagrams on an uplink that
                // do not get through yet, a server's on a path it has no address for).
                // They are not the path's loss rate, and in the unbiased long-term
                // average a few of them read as 10% and more, which set the path aside
                // ([`crate::sched::guard`]) for seconds of heartbeats.
                // Likewise what was sent while the capacity was a stand-in: the sender
                // overdrove the path, and the bottleneck's drops were its own doing (three
                // links at 0.42-2.38 Mbit/s: 58 such drops set the slowest aside).
                if n > 0 && lost < loss::OUTAGE_GAP && prev.is_some() && !overdriven {
                    let keep = (1.0 - LONG_LOSS_WEIGHT).powi(n.min(100_000) as i32);
                    let target = f64::from(lost) / f64::from(n);
                    self.tx.long_loss += (1.0 - keep) * (target - self.tx.long_loss);
                    self.tx.long_loss_weight = 1.0 - keep * (1.0 - self.tx.long_loss_weight);
                }
                (acked, lost)
            }
        }
    }

    /// Corrects the queue model with the wait the peer observed for datagram `seq`.
    pub(crate) fn on_queue_report(&mut self, now: Instant, seq: u32, queue_us: u32) {
        let Some(&Sent {
            at: sent,
            predicted,
            shifted,
            ..
        }) = self.sent(seq)
        else {
            return;
        };
        // The prediction as the model sees it now, after corrections made since the send.
        let since = self.tx.queue.shifted_us() - shifted;
        let predicted_us = (predicted.as_micros() as i64 + since).max(0) as u64;
        let predicted = Duration::from_micros(predicted_us);
        let actual = Duration::from_micros(u64::from(queue_us));
        let before = self.tx.queue.length(now);
        let tx = self.transmission_time(1500);
        self.tx
            .queue
            .correct(now, sent, predicted, actual, tx, QUEUE_TOLERANCE);
        if self.tx.queue.length(now) != before {
            self.tx.queue_corrections += 1;
        }
    }

    /// The path ack this end would piggyback for this path, if it received anything.
    pub(crate) fn path_ack(&self) -> Option<braid_wire::PathAck> {
        Some(braid_wire::PathAck {
            path: self.id,
            highest_seq: self.rx.highest_seq?,
            received: self.rx.received,
            queue_us: self.rx.latest_queue_us,
        })
    }

    /// Declares the rx side down if nothing arrived for `timeout`. Returns true when it
    /// went down now.
    pub(crate) fn check_liveness(
        &mut self,
        now: Instant,
        since: Instant,
        timeout: Duration,
    ) -> bool {
        if !self.rx.live {
            return false;
        }
        let last = self.rx.last_rx.unwrap_or(since);
        if now.saturating_duration_since(last) >= timeout {
            self.rx.live = false;
            return true;
        }
        false
    }

    /// When the rx side will be declared down if nothing arrives.
    pub(crate) fn liveness_deadline(&self, since: Instant, timeout: Duration) -> Option<Instant> {
        self.rx
            .live
            .then(|| self.rx.last_rx.unwrap_or(since) + timeout)
    }

    /// Our report entry for this path, as of `now`.
    pub(crate) fn report_entry(&self, now: Instant) -> PathEntry {
        let (echo_timestamp, echo_hold_us) = match self.rx.echo {
            Some((ts, at)) => (
                ts,
                u32::try_from(now.saturating_duration_since(at).as_micros()).unwrap_or(u32::MAX),
            ),
            None => (0, u32::MAX),
        };
        PathEntry {
            path: self.id,
            live: self.rx.live,
            loss: PathEntry::encode_loss(self.rx.loss.rate()),
            // 0: not configured and not measured yet (docs/wire.md).
            capacity_kbps: if self.rx.capacity.is_known() {
                u32::try_from(self.rx.capacity.estimate_bps().div_ceil(1000))
                    .unwrap_or(u32::MAX)
                    .max(1)
            } else {
                0
            },
            delay_us: self.rx.delay.estimate(),
            highest_seq: self.rx.highest_seq.unwrap_or(0),
            received: self.rx.received,
            echo_timestamp,
            echo_hold_us,
        }
    }

    /// Applies the peer's report entry for this path. `same_path` is true when the report
    /// travelled on this very path, so its echo measures this path's RTT.
    /// `delay_base` is the session's reference for relative delays.
    pub(crate) fn on_report(
        &mut self,
        now: Instant,
        e: &PathEntry,
        same_path: bool,
        delay_base: u32,
    ) -> ReportOutcome {
        let mut out = ReportOutcome::default();
        // 0: the peer has no estimate yet; keep ours.
        let cap = u64::from(e.capacity_kbps).saturating_mul(1000);
        if cap != 0 && self.tx.capacity_known_at.is_none() {
            self.tx.capacity_known_at = Some(now);
        }
        if cap != 0 && cap != self.tx.capacity_bps {
            self.tx.capacity_bps = cap;
            self.tx.capacity_changes += 1;
            self.tx.capacity_min = self.tx.capacity_min.min(cap);
            out.capacity_changed = Some(cap);
        }
        self.tx.loss = e.loss_fraction();
        self.tx.peer_live = e.live;
        if let Some(d) = e.delay_us {
            self.tx.delay_skew = Some(i64::from(d.wrapping_sub(delay_base) as i32));
        }
        if same_path && e.echo_hold_us != u32::MAX {
            self.tx.rtt.on_echo(now, e.echo_timestamp, e.echo_hold_us);
        }
        out
    }

    pub(crate) fn stats(&self, now: Instant) -> PathStats {
        PathStats {
            id: self.id,
            // A metered path held by its budget still works both ways: it is up, and
            // `metered_hold` says why it carries no data.
            usable: self.is_live() && !self.tx.loss_guarded,
            metered_hold: self.tx.metered_hold,
            loss_guarded: self.tx.loss_guarded,
            tx_stalls: self.tx.liveness.stalls(),
            tx_revivals: self.tx.liveness.revivals(),
            rx_live: self.rx.live,
            tx_packets: self.tx.packets,
            tx_bytes: self.tx.bytes,
            tx_data_packets: self.tx.data_packets,
            tx_repair_packets: self.tx.repair_packets,
            tx_control_packets: self.tx.control_packets,
            rx_packets: self.rx.packets,
            rx_bytes: self.rx.bytes,
            tx_capacity_bps: self.tx.capacity_bps,
            tx_capacity_changes: self.tx.capacity_changes,
            queue_corrections: self.tx.queue_corrections,
            tx_capacity_min_bps: self.tx.capacity_min,
            rx_capacity_bps: self.rx.capacity.estimate_bps(),
            tx_loss: self.tx.loss,
            tx_long_loss: self.long_loss_rate(),
            rx_loss: self.rx.loss.rate(),
            rx_lost: self.rx.loss.lost(),
            rx_reordered: self.rx.loss.reordered(),
            srtt_ms: self.tx.rtt.srtt().map(|d| d.as_secs_f64() * 1e3),
            feedback_ms: self.tx.feedback.min().map(|d| d.as_secs_f64() * 1e3),
            queue_ms: self.tx.queue.length(now).as_secs_f64() * 1e3,
        }
    }
}

/// What kind of datagram a send was, for the per-path counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SentKind {
    Data,
    /// A retransmission or a fixed-overhead recovery packet.
    Repair,
    /// An opportunistic coded packet (Evolution, LT).
    Coded,
    Control,
}

#[cfg(test)]
impl Path {
    pub(crate) fn tx_capacity_for_test(&mut self, bps: u64) {
        self.tx.capacity_bps = bps;
    }

    pub(crate) fn rx_capacity_for_test(&mut self, bps: u64) {
        self.rx.capacity = CapacityEstimator::new(bps, Duration::from_millis(500));
    }
}

#[cfg(test)]
impl Path {
    /// Sets the tx side's estimates as a scheduler test needs them.
    pub(crate) fn set_for_test(
        &mut self,
        delay_us: Option<i64>,
        rtt: Option<Duration>,
        in_flight: u32,
    ) {
        self.tx.delay_skew = delay_us;
        if let Some(r) = rtt {
            self.tx.rtt.sample(Instant::ZERO, r);
        }
        self.tx.next_seq = 1000 + in_flight;
        self.tx.peer_highest_seq = Some(999);
    }

    pub(crate) fn set_loss_for_test(&mut self, loss: f64) {
        self.tx.loss = loss;
        self.tx.long_loss = loss;
        self.tx.long_loss_weight = 1.0;
    }

    pub(crate) fn set_usable_for_test(&mut self, usable: bool) {
        self.rx.live = usable;
    }

    pub(crate) fn send_for_test(&mut self, now: Instant, wire_bytes: usize) {
        self.on_send(now, wire_bytes, SentKind::Data);
    }
}
