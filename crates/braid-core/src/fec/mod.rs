//! Loss recovery: how the sender masks path losses from the inner transport.
//!
//! Every method implements [`LossRecovery`]; the session feeds it what is sent and
//! acknowledged and what arrives, and asks it for repair datagrams (coded packets, recovery
//! shards, retransmissions, nacks) after data. Implementations:
//! - [`NoRecovery`]: losses reach the inner transport.
//! - [`Evolution`]: Evolution codes sent opportunistically (PluriBus §4, §4.1), the method
//!   PluriBus proposes; by default with braid's sampled estimate of what the receiver
//!   holds ([`sampled`]), §4.1's single fraction `r` selectable.
//! - [`Lt`]: LT codes with robust soliton degrees, sent opportunistically (§6.4.1).
//! - [`FixedXor`]: a coded packet after every `100 / K` data packets (§6.4.1, Maelstrom).
//! - [`ReedSolomon`]: systematic Reed-Solomon over fixed blocks, fixed overhead.
//! - [`Retransmit`]: retransmission driven by the receiver's nacks (§6.4.1).
//!
//! Shared parts: [`window`] (the sender's W), [`xor`] (coding), [`decoder`] (the receiver's
//! packet cache and XOR decoder), [`rng`] (seeded choices).

mod arq;
pub mod decoder;
mod fixed;
mod none;
pub mod opportunistic;
pub mod rng;
pub mod rs;
pub mod sampled;
pub mod window;
pub mod xor;

pub use arq::Retransmit;
pub use fixed::FixedXor;
pub use none::NoRecovery;
pub use opportunistic::{evolution_degree, robust_soliton_cdf, Evolution, Lt};
pub use rs::ReedSolomon;

use braid_wire::{Coded, Message, Nack, Parity};

use crate::path::Path;
use crate::stats::LossRecoveryStats;
use crate::{Instant, LossRecoveryKind, PathId};

/// A repair datagram the loss-recovery method wants sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repair<'a> {
    /// The path to send it on.
    pub path: PathId,
    pub body: RepairBody<'a>,
}

/// The body of a repair datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairBody<'a> {
    /// A coded packet: the XOR of data packets (docs/wire.md, "Coded").
    Coded(Coded<'a>),
    /// A data packet sent again.
    Retransmit { seq: u32, payload: &'a [u8] },
    /// A Reed-Solomon recovery shard (docs/wire.md, "Parity").
    Parity(Parity<'a>),
    /// The receiver's request for missing packets (docs/wire.md, "Nack").
    Nack(Nack<'a>),
}

impl<'a> RepairBody<'a> {
    /// The wire message that carries it.
    pub fn message(&self) -> Message<'a> {
        match *self {
            RepairBody::Coded(c) => Message::Coded(c),
            RepairBody::Retransmit { seq, payload } => Message::Data { seq, payload },
            RepairBody::Parity(p) => Message::Parity(p),
            RepairBody::Nack(n) => Message::Nack(n),
        }
    }

    /// Feedback to the peer's sender rather than redundancy for our data.
    pub fn is_feedback(&self) -> bool {
        matches!(self, RepairBody::Nack(_))
    }
}

/// A packet the receiver side recovered, handed back to the session for resequencing.
pub trait RecoveredSink {
    fn recovered(&mut self, seq: u32, payload: &[u8]);
}

/// A loss-recovery method. Sender-side and receiver-side hooks live in one object because
/// each end of a session both sends and receives.
pub trait LossRecovery: Send {
    /// A data packet was sent on `path`.
    fn on_data_sent(&mut self, _now: Instant, _seq: u32, _path: &Path, _payload: &[u8]) {}

    /// The peer reports it has received data packets up to `highest` (PluriBus §4.1 iii).
    fn on_ack(&mut self, _now: Instant, _highest: u32) {}

    /// Offers the chance to send a repair datagram now. Called repeatedly until `None`; a
    /// returned repair is sent.
    fn poll_repair(&mut self, _now: Instant, _paths: &[Path]) -> Option<Repair<'_>> {
        None
    }

    /// After a [`LossRecovery::poll_repair`] at `now` that returned `None`, and with no
    /// other call since, the first instant at which `poll_repair` may return a repair or
    /// change anything: until then a poll is a no-op and may be skipped. `now` when the
    /// method cannot tell (every later poll counts).
    fn quiet_until(&self, now: Instant, _paths: &[Path]) -> Instant {
        now
    }

    /// A repair datagram was sent (after [`LossRecovery::poll_repair`] returned it).
    fn on_repair_sent(&mut self, _now: Instant) {}

    /// A data packet sent once (not a retransmission) arrived from the peer on `path`,
    /// sent at `sent_us` (the peer's clock, the datagram's timestamp); called before
    /// [`LossRecovery::on_data_received`]. Retransmission detects loss per path with it.
    fn on_data_path(&mut self, _now: Instant, _seq: u32, _path: PathId, _sent_us: u32) {}

    /// A data packet arrived from the peer (kept by decoders to recover others; it may
    /// complete earlier repair packets, whose recoveries go to `sink`).
    fn on_data_received(
        &mut self,
        _now: Instant,
        _seq: u32,
        _payload: &[u8],
        _sink: &mut dyn RecoveredSink,
    ) {
    }

    /// A repair or feedback message (Coded, Parity, Nack) arrived; packets it recovers go
    /// to `sink`. Other messages are ignored.
    fn on_repair_received(
        &mut self,
        _now: Instant,
        _message: &Message<'_>,
        _sink: &mut dyn RecoveredSink,
    ) {
    }

    /// When the method next wants [`LossRecovery::handle_timeout`] or
    /// [`LossRecovery::poll_repair`], as of `now`: a timer, or the instant a path's queue
    /// estimate drains while opportunistic coding is wanted.
    fn poll_timeout(&self, _now: Instant, _paths: &[Path]) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    /// A path failed at `now` (either end of the session noticed): what the method would
    /// repair of what was sent before, the peer resent or left to the inner transport
    /// (`session/failover.rs`), so the receiver side stops waiting for it.
    fn on_path_failed(&mut self, _now: Instant) {}

    /// Data packet `seq` was lost with a failed path and is left to the inner transport
    /// to recover (see `session/failover.rs`): the method does not repair it.
    fn leave_to_transport(&mut self, _seq: u32) {}

    /// Whether the peer's schedulers cap the queue they put in front of each bottleneck
    /// (both ends run the same engine configuration), so that a path's delay varies
    /// within known bounds.
    fn set_queues_capped(&mut self, _capped: bool) {}

    /// Until when a repair of the missing data packet `seq` is still expected: the
    /// resequencing buffer holds the hole open that long, past its hole timeout, rather
    /// than give it up to the inner transport as a loss just before the repair arrives.
    /// `None` when the method repairs no such hole (or has given it up).
    fn repair_expected(&self, _seq: u32) -> Option<Instant> {
        None
    }

    /// Counters and state.
    fn stats(&self) -> LossRecoveryStats {
        LossRecoveryStats {
            method: self.name(),
            ..LossRecoveryStats::default()
        }
    }

    /// Short name for reports.
    fn name(&self) -> &'static str;
}

/// Builds the loss-recovery method a config names; its random choices come from `seed`.
pub fn build(kind: LossRecoveryKind, seed: u64) -> Box<dyn LossRecovery> {
    match kind {
        LossRecoveryKind::None => Box::new(NoRecovery),
        LossRecoveryKind::Evolution(p) => Box::new(Evolution::new(p, seed)),
        LossRecoveryKind::Lt(p) => Box::new(Lt::new(p, seed)),
        LossRecoveryKind::Xor(p) => Box::new(FixedXor::new(p)),
        LossRecoveryKind::ReedSolomon(p) => Box::new(ReedSolomon::new(p)),
        LossRecoveryKind::Retransmit(p) => Box::new(Retransmit::new(p)),
    }
}

/// The usable path expected to deliver a small datagram sent now first (PluriBus §4.3's
/// estimate, or the shortest queue before delays are known): where retransmissions and
/// nacks go.
pub(crate) fn fastest_path(now: Instant, paths: &[Path]) -> Option<&Path> {
    fastest_where(now, paths, |_| true)
}

/// [`fastest_path`] among the paths whose congestion window has room
/// ([`Path::window_full`], the window's own queue allowance: with the delay-based
/// scheduler's larger one for paths faster than the slowest, quick trace-bulk's worst set
/// fell from 0.68 to 0.58 of its links).
pub(crate) fn fastest_path_with_room(now: Instant, paths: &[Path]) -> Option<&Path> {
    fastest_where(now, paths, |p| !p.window_full(now))
}

fn fastest_where(now: Instant, paths: &[Path], ok: impl Fn(&Path) -> bool) -> Option<&Path> {
    paths
        .iter()
        .filter(|p| p.is_usable() && ok(p))
        .min_by_key(|p| {
            (
                p.predicted_delivery_us(now, 100).unwrap_or(i64::MAX),
                p.queue_delay(now),
            )
        })
}

#[cfg(test)]
mod tests;
