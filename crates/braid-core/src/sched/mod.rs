//! Path schedulers: which path carries each data packet.
//!
//! Every scheduler implements [`Scheduler`]; the session calls it once per data packet with
//! the current per-path state. Implementations:
//! - [`RoundRobin`]: each packet on the next usable path in turn.
//!
//! Schedulers only choose; the session sends, and updates the path estimators.

mod round_robin;

pub use round_robin::RoundRobin;

use crate::path::Path;
use crate::{Instant, PathId};

/// What a scheduler knows about the packet it places.
#[derive(Clone, Copy, Debug)]
pub struct PacketMeta<'a> {
    /// Data-level sequence number.
    pub seq: u32,
    /// Bytes the datagram carrying it will take on the wire (encapsulation included).
    pub wire_bytes: usize,
    /// The inner packet (an IP packet in the tunnel), for flow-aware policies.
    pub packet: &'a [u8],
}

/// A path scheduler.
pub trait Scheduler: Send {
    /// Chooses the path for `packet`, or `None` to hold it back (it is then offered again
    /// on the next `poll_transmit`). `paths` is never empty.
    fn select(&mut self, now: Instant, packet: &PacketMeta<'_>, paths: &[Path]) -> Option<PathId>;

    /// Short name for reports.
    fn name(&self) -> &'static str;
}

/// Builds the scheduler a config names.
pub fn build(kind: crate::SchedulerKind) -> Box<dyn Scheduler> {
    match kind {
        crate::SchedulerKind::RoundRobin => Box::new(RoundRobin::default()),
    }
}
