//! Path schedulers: which path carries each data packet.
//!
//! Every scheduler implements [`Scheduler`]; the session calls it once per data packet with
//! the current per-path state and what the flow table knows of the packet's flow.
//!
//! | name | module | policy |
//! |---|---|---|
//! | `round-robin` | [`round_robin`] | each packet on the next usable path |
//! | `weighted-round-robin` | [`weighted`] | smooth WRR, weights from capacity estimates |
//! | `min-conn-path` | [`flow_level`] | a new flow on the path with fewest active flows (PluriBus §6.1) |
//! | `hash-flow` | [`flow_level`] | a flow on the path its 5-tuple hashes to |
//! | `delay-based` | [`delay`] | each packet on the path that delivers it first (PluriBus §3.2, §4.3) |
//! | `lazy` | [`window`] | fill the current path's window, then move on (oSCTP §IV-D) |
//! | `smallest-rtt` | [`window`] | the smallest-RTT path with an open window (oSCTP §IV-D) |
//! | `adas` | [`adas`] | least in-flight utilization, ties by expected arrival (PRISM §4) |
//! | `redundant` | [`redundant`] | every packet on every usable path |
//!
//! Schedulers only choose; the session sends and updates the path estimators, and tells
//! the scheduler about sends and per-path feedback.

pub mod adas;
pub mod delay;
pub mod flow_level;
pub mod guard;
pub mod prism_baselines;
pub mod redundant;
pub mod round_robin;
pub mod weighted;
pub mod window;

pub use adas::Adas;
pub use delay::DelayBased;
pub use flow_level::{HashFlow, MinConnPath};
pub use redundant::Redundant;
pub use round_robin::RoundRobin;
pub use weighted::WeightedRoundRobin;
pub use window::{Lazy, SmallestRtt};

use crate::flow::FlowMeta;
use crate::path::Path;
use crate::{Instant, PathId};

/// What a scheduler knows about the packet it places.
#[derive(Clone, Copy, Debug)]
pub struct PacketMeta<'a> {
    /// Data-level sequence number.
    pub seq: u32,
    /// Bytes the datagram carrying it will take on the wire (encapsulation included).
    pub wire_bytes: usize,
    /// The inner packet (an IP packet in the tunnel).
    pub packet: &'a [u8],
    /// Its flow, when the flow table tracks it.
    pub flow: Option<FlowMeta>,
    /// For a new flow: active flows pinned to each path, indexed like `paths`. Empty
    /// otherwise.
    pub active_flows: &'a [u32],
    /// Packets waiting in the session's send queue, this one included.
    pub backlog: usize,
}

/// A scheduler's decision for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Send it on this path.
    Path(PathId),
    /// Send a copy on every usable path.
    Redundant,
    /// Keep it queued; offer it again on the next `poll_transmit` (window-limited
    /// schedulers wait for feedback).
    Hold,
}

/// A path scheduler.
pub trait Scheduler: Send {
    /// Chooses for `packet`. `paths` is never empty.
    fn select(&mut self, now: Instant, packet: &PacketMeta<'_>, paths: &[Path]) -> Choice;

    /// The packet was sent on `path` (after a [`Choice::Path`]).
    fn on_sent(&mut self, _now: Instant, _path: PathId, _packet: &PacketMeta<'_>) {}

    /// The peer's feedback on `path`: `acked` more datagrams received, `lost` more inferred
    /// lost (gaps in the path's sequence numbers).
    fn on_feedback(&mut self, _now: Instant, _path: PathId, _acked: u32, _lost: u32) {}

    /// After a [`Choice::Hold`] that no feedback may end: when to offer the packet again.
    fn retry_at(&self) -> Option<Instant> {
        None
    }

    /// After a [`Choice::Hold`], with nothing changed since but the time (no send, no
    /// feedback, no change to the paths or the send queue, and the same packet at its
    /// head): whether the packet is still held at `now`, without deciding again. `true`
    /// only where [`Scheduler::select`] would hold it too, with the same
    /// [`Scheduler::retry_at`] and [`Scheduler::backlog_full`] (which this updates);
    /// `false` to be asked again. A session polled often while a packet waits (the
    /// simulator polls every engine at every instant) decides once instead of every time.
    fn renew_hold(&mut self, _now: Instant) -> bool {
        false
    }

    /// [`Scheduler::renew_hold`] after inner packets joined the back of the send queue,
    /// which now holds `backlog`: `true` only where [`Scheduler::select`] would hold the
    /// head with the longer queue behind it too, with the same retry and the
    /// [`Scheduler::backlog_full`] this updates.
    fn renew_hold_backlog(&mut self, _now: Instant, _backlog: usize) -> bool {
        false
    }

    /// After a [`Choice::Hold`]: whether the packets waiting are already too many, so that
    /// the session should refuse new ones until they shrink.
    fn backlog_full(&self) -> bool {
        false
    }

    /// After a [`Choice::Redundant`]: whether a copy should also go on `path` (every live
    /// path by default).
    fn wants_copy(&self, _now: Instant, _path: &Path) -> bool {
        true
    }

    /// Whether the scheduler never puts more than a bounded queue in front of a path's
    /// bottleneck (so that a path's losses are its own, not overflow of the bond's
    /// traffic): the loss guard's loss-limited rule applies only then
    /// ([`guard::update_with_loss_limited`]).
    fn caps_bottleneck_queues(&self) -> bool {
        false
    }

    /// Whether a [`Choice::Path`] pins the packet's flow to that path (flow-level policies).
    fn pins_flows(&self) -> bool {
        false
    }

    /// Short name for reports.
    fn name(&self) -> &'static str;
}

/// Builds the scheduler a config names.
pub fn build(kind: crate::SchedulerKind) -> Box<dyn Scheduler> {
    use crate::SchedulerKind as K;
    match kind {
        K::RoundRobin => Box::new(RoundRobin::default()),
        K::WeightedRoundRobin => Box::new(WeightedRoundRobin::default()),
        K::MinConnPath => Box::new(MinConnPath),
        K::HashFlow => Box::new(HashFlow),
        K::DelayBased => Box::new(DelayBased::default()),
        K::Lazy => Box::new(Lazy::default()),
        K::SmallestRtt => Box::new(SmallestRtt),
        K::Adas => Box::new(Adas::default()),
        K::Redundant => Box::new(Redundant),
        K::Random => Box::new(prism_baselines::Random::default()),
        K::HrttOnly => Box::new(Adas::only(adas::Rules::HrttOnly)),
        K::UtilizationOnly => Box::new(Adas::only(adas::Rules::UtilizationOnly)),
    }
}

/// Positions of the usable paths, or of all paths when none is usable (so that traffic
/// keeps probing).
pub(crate) fn candidates(paths: &[Path]) -> impl Iterator<Item = (usize, &Path)> {
    let any_usable = paths.iter().any(Path::is_usable);
    paths
        .iter()
        .enumerate()
        .filter(move |(_, p)| !any_usable || p.is_usable())
}

#[cfg(test)]
pub(crate) mod testing;
