//! The multipath reliable stream (oSCTP §III-IV, issue 19): an ordered, reliable byte
//! stream over N paths, sans-IO like the rest of the engine.
//!
//! One TSN space spans the paths; the receiver ([`StreamReceiver`]) reassembles in TSN
//! order and answers with SACKs (cumulative TSN, gap blocks, receive window). The sender
//! ([`StreamSender`]) keeps per path a congestion window, slow-start threshold, RTO
//! (RFC 4960 §6.3, §7.2; RFC 6298) and the chunks in flight on it. The choices oSCTP
//! studies are options of [`StreamConfig`]: fast retransmit driven by cumulative acks or
//! per path by SACKs (§IV-C1), window advance by cumulative ack alone or by SACK as well
//! (§IV-C2), the loss response (halving, PRISM §6's proportional decrease, RFC 6356 LIA),
//! the scheduler (§IV-D) and failover (§IV-E1).
//!
//! Both ends are driven the same way: `handle_datagram(now, path, bytes)`,
//! `poll_transmit(now, buf) -> Option<path>` until None, `poll_timeout()` and
//! `handle_timeout(now)`; the application calls `write`/`finish` and `read`.
//!
//! - [`chunk`]: the wire format (DATA, SACK, HEARTBEAT, HEARTBEAT-ACK).
//! - [`rto`]: RFC 6298's retransmission timeout.
//! - [`congestion`]: one path's window and the loss responses.
//! - [`sched`]: round-robin, Lazy, Smallest-RTT and braid's delay-based.
//! - [`path`]: the sender's per-path state and failover modes.
//! - [`rack`]: RFC 8985's time threshold, braid's reordering allowance.
//! - [`sender`], [`receiver`]: the two ends.

pub mod chunk;
pub mod congestion;
pub mod frame;
pub mod hystart;
pub mod path;
pub mod rack;
pub mod receiver;
pub mod rto;
pub mod sched;
pub mod sender;
pub mod split;

#[cfg(test)]
pub(crate) mod link;
#[cfg(test)]
mod reordering_tests;
#[cfg(test)]
mod tests;

pub use congestion::{DelayBound, LossResponse, SlowStart};
pub use path::Failover;
pub use receiver::{AckPath, ReceiverConfig, ReceiverStats, StreamReceiver};
pub use rto::RtoParams;
pub use sched::StreamScheduler;
pub use sender::{SenderStats, StreamSender};

/// What triggers a fast retransmit (oSCTP §IV-C1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FastRetransmit {
    /// CD-FRT: three duplicate cumulative acks retransmit the lowest unacknowledged TSN.
    CumulativeDriven,
    /// SD-FRT: a chunk is lost once three chunks sent after it on the same path are
    /// acknowledged, by cumulative ack or gap block.
    #[default]
    SackDriven,
    /// A deviation from oSCTP §IV-C1, braid's own choice (split-TCP, `braid send`): SD-FRT's
    /// per-path view with RACK's time threshold (RFC 8985 §6, [`rack`]) in place of the
    /// count of three. A chunk is lost once a chunk sent after it on the same path is
    /// acknowledged and a reordering window has passed since; the window is a quarter of
    /// the path's minimum RTT once the path has reordered, grown by fast retransmissions
    /// proven spurious (the receiver's duplicate-TSN report, RFC 4960 §3.3.4's, or the
    /// original acknowledged before its copy left), and zero after three later chunks on
    /// a path that never reordered, so that a path that only loses recovers as with
    /// SD-FRT. A retransmission proven spurious also undoes the window cut it caused
    /// (RFC 4015's response, after Linux's DSACK undo). With SD-FRT a path that reorders
    /// within itself has most of its chunks sent twice (docs/benchmarks.md, `braid send`
    /// with 1-2 ms of jitter on one of three paths).
    Rack,
}

/// What lets a path's window grow (oSCTP §IV-C2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WindowAdvance {
    /// CD-CWA: only a SACK that advances the cumulative TSN (RFC 4960 §7.2.1).
    CumulativeDriven,
    /// SD+CD-CWA: also a SACK that acknowledges the path's lowest outstanding chunk.
    #[default]
    SackAndCumulativeDriven,
}

/// The sender's options. Defaults are oSCTP's choices.
#[derive(Clone, Copy, Debug)]
pub struct StreamConfig {
    /// Payload bytes per DATA chunk.
    pub mtu: usize,
    pub fast_retransmit: FastRetransmit,
    pub window_advance: WindowAdvance,
    pub loss_response: LossResponse,
    pub slow_start: SlowStart,
    pub scheduler: StreamScheduler,
    pub failover: Failover,
    pub rto: RtoParams,
    /// Bytes written and not yet acknowledged, at most.
    pub send_buffer: usize,
    /// The peer's receive window assumed before its first SACK.
    pub initial_peer_rwnd: usize,
    /// A fast retransmit on a path whose queue holds fewer than 3 packets (Veno's backlog
    /// estimate from the RTT samples) keeps the window: a link's random loss, not
    /// congestion. Off for the oSCTP figures; split-TCP turns it on (lab-split-tcp: the
    /// 1% loss dsl path otherwise carries ~60% of its rate). The in-crate two-path model
    /// loses goodput with it (tests.rs): an open question, docs/benchmarks.md.
    pub random_loss: bool,
    /// A deviation from oSCTP §IV-E1, off by default (off reproduces the paper): a failed path is
    /// probed by a heartbeat once per RTO (at most 1 s apart) rather than every second,
    /// and once revived it slow-starts back to its window before the failure, or on until
    /// a loss if it had not yet left slow start, where RFC 4960's T3 response would leave
    /// it in congestion avoidance from 4 MTU. With oSCTP failover only. trace-stream with
    /// SACKs in turn over the paths: 5g-static+lte-walk (its 5G path out for the first
    /// 7 s) 0.655 -> 0.920; with the latest path's SACKs the mpw sets fall (0.75 -> 0.69).
    pub fast_revival: bool,
    /// A delay bound on each path's window ([`DelayBound`], TCP Vegas's cut): the
    /// bottleneck queue is kept near the allowance instead of filled by the loss-based
    /// window, which shortens the RTO and a failover's resend (osctp-fig11). None: the
    /// windows are loss-based alone, as in oSCTP: the default, since with a 30 ms
    /// allowance fig11 gains (740 -> 440 ms) but trace-stream and fig7 lose
    /// (docs/benchmarks.md).
    pub delay_bound: Option<DelayBound>,
    /// A T3-rtx expiry while the peer's latest SACK shut its window is not the path's
    /// failure (RFC 4960 §6.1: probes into a zero window are not errors): its chunks were
    /// most likely dropped by the full receive buffer, so they go again with the timer
    /// backed off, with no cut and no failover. Off by default, split-TCP included
    /// ([`split::stream_config`] says why; docs/benchmarks.md has the measurements).
    pub zero_window_probe: bool,
    /// Opportunistic retransmission (MPTCP's, Raiciu et al., NSDI 2012, §4.2): while the
    /// peer's window is shut, the chunk holding its cumulative TSN back goes again on
    /// another path with room, once per TSN. Without that paper's penalization of the
    /// slow path, which cut paths only briefly slow (trace-stream). Off by default,
    /// split-TCP included ([`split::stream_config`]).
    pub opportunistic_retransmit: bool,
}

/// The delay bound's default allowance: the queueing delay a path may hold.
pub const DELAY_BOUND_ALLOWANCE: std::time::Duration = std::time::Duration::from_millis(30);

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            mtu: 1200,
            fast_retransmit: FastRetransmit::default(),
            window_advance: WindowAdvance::default(),
            loss_response: LossResponse::default(),
            slow_start: SlowStart::default(),
            scheduler: StreamScheduler::default(),
            failover: Failover::default(),
            rto: RtoParams::default(),
            send_buffer: 1 << 20,
            initial_peer_rwnd: 1 << 20,
            random_loss: false,
            fast_revival: false,
            delay_bound: None,
            zero_window_probe: false,
            opportunistic_retransmit: false,
        }
    }
}
