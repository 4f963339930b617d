//! BaPu's uplink bunching (BaPu §2-3): a sender's upload, overheard on the air by its
//! home AP and by neighbouring monitor APs, is forwarded to a gateway over all their
//! uplinks at once; the gateway picks one forwarder per packet.
//!
//! Sans-IO like the rest of the engine: every entry point takes `now`, output is pulled.
//! One idea per module:
//! - [`frame`]: the radiotap and 802.11 parser for frames a monitor interface captures.
//! - [`key`]: a session's key <BSSID, protocol, source, destination, ports> and what an AP
//!   reads from each overheard packet.
//! - [`report`]: the reception reports (with each AP's send-buffer level) and the
//!   gateway's forwarder announcements, on the wire.
//! - [`dedup`]: duplicate removal by IPv4 identification (MAC retransmissions, §3.1).
//! - [`ap`]: a BaPu-AP (home or monitor): captures, reports, forwards what it is told to.
//! - [`scheduler`]: the gateway's first-come-first-served forwarder choice (§3.4), with
//!   the first packets of a session on the home AP (§3.2, NAT state).
//! - [`proactive_ack`]: Proactive-ACK at the home AP (§3.3).
//! - [`repair`]: the gateway's local repair of what the receiver dropped after
//!   Proactive-ACK acknowledged it (braid's addition).
//! - [`simple_buffer`]: SimpleBuffer, resequencing at the gateway (§3.3, §4.2), the
//!   baseline Proactive-ACK is measured against.

pub mod ap;
pub mod dedup;
pub mod frame;
pub mod key;
pub mod proactive_ack;
pub mod repair;
pub mod report;
pub mod scheduler;
pub mod simple_buffer;

pub use ap::{ApStats, BapuAp};
pub use dedup::IpIdFilter;
pub use frame::{FrameError, UplinkFrame};
pub use key::{Overheard, SessionKey};
pub use proactive_ack::{AckVerdict, ProactiveAck, ProactiveAckStats};
pub use report::{Announce, Entry, Message, Report, ReportError};
pub use scheduler::{Choice, Scheduler, SchedulerConfig, SchedulerStats};
pub use simple_buffer::SimpleBuffer;

/// A BaPu-AP's identifier within a session (BaPu's APID, §3.2).
pub type ApId = u8;

/// A session's number on the wire: a hash of its [`SessionKey`], so every AP names a
/// session the same way without asking the gateway.
pub type SessionId = u32;

/// A 32-bit TCP sequence number as a 64-bit offset near `reference` (the nearest of its
/// wraps), so held ranges and holes compare across a wrap.
pub(crate) fn unwrap_seq(reference: u64, seq: u32) -> u64 {
    let d = seq.wrapping_sub(reference as u32) as i32;
    (reference as i64 + i64::from(d)).max(0) as u64
}

/// Most APs a session can bunch (reporters are kept in a 64-bit set).
pub const MAX_APS: usize = 64;

#[cfg(test)]
mod tests;
