//! Loss recovery: how the sender masks path losses from the inner transport.
//!
//! Every method implements [`LossRecovery`]; the session feeds it what is sent and
//! acknowledged and what arrives, and asks it for repair datagrams (coded packets or
//! retransmissions) whenever data has been sent. Implementations:
//! - [`NoRecovery`]: losses reach the inner transport.

mod none;

pub use none::NoRecovery;

use crate::path::Path;
use crate::{Instant, PathId};

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
    Coded {
        seq: u32,
        len_xor: u16,
        bitmap: &'a [u8],
        payload: &'a [u8],
    },
    /// A data packet sent again.
    Retransmit { seq: u32, payload: &'a [u8] },
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

    /// Offers the chance to send a repair datagram now. Called repeatedly until `None`.
    fn poll_repair(&mut self, _now: Instant, _paths: &[Path]) -> Option<Repair<'_>> {
        None
    }

    /// A repair datagram was sent (after [`LossRecovery::poll_repair`] returned it).
    fn on_repair_sent(&mut self, _now: Instant) {}

    /// A data packet arrived from the peer (kept by decoders to recover others later).
    fn on_data_received(&mut self, _now: Instant, _seq: u32, _payload: &[u8]) {}

    /// A coded packet arrived; packets it recovers go to `sink`.
    fn on_coded_received(
        &mut self,
        _now: Instant,
        _coded: &braid_wire::Coded<'_>,
        _sink: &mut dyn RecoveredSink,
    ) {
    }

    /// When the method next needs [`LossRecovery::handle_timeout`].
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    /// Short name for reports.
    fn name(&self) -> &'static str;
}

/// Builds the loss-recovery method a config names.
pub fn build(kind: crate::LossRecoveryKind) -> Box<dyn LossRecovery> {
    match kind {
        crate::LossRecoveryKind::None => Box::new(NoRecovery),
    }
}
