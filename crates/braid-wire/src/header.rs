//! The common header that starts every braid datagram (docs/wire.md, "Common header").

use crate::cursor::{Reader, Writer};
use crate::{Error, Result};

/// The wire version this build speaks.
pub const VERSION: u8 = 1;
/// Length of the common header without the optional ack field.
pub const HEADER_LEN: usize = 16;
/// Flag bit: a 4-byte ack (highest data sequence number received) follows the header.
pub const FLAG_ACK: u8 = 0x01;
/// Flag bit: a 13-byte path ack ([`PathAck`]) follows the header (after the ack).
pub const FLAG_PATH_ACK: u8 = 0x02;
/// Flag bit: deliver this data packet on arrival, without resequencing. The sender keeps
/// its flow on one path, so the path's own order is the flow's order.
pub const FLAG_UNORDERED: u8 = 0x04;

/// What the sender of a datagram has received on one of its paths, piggybacked on any
/// datagram so that the peer's per-path in-flight estimates stay fresh between reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathAck {
    /// The path described (not necessarily the one the datagram travels on).
    pub path: u8,
    /// Highest path sequence number received on it.
    pub highest_seq: u32,
    /// Datagrams received on it (wrapping counter).
    pub received: u32,
    /// Queueing delay the datagram `highest_seq` saw at the path's bottleneck, µs, as the
    /// receiver measured it (arrival − send − propagation estimate − transmission time).
    pub queue_us: u32,
}

/// The message type byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    Data = 1,
    Coded = 2,
    Report = 3,
    Heartbeat = 4,
    Hello = 5,
    Config = 6,
    AddressChange = 7,
    Parity = 8,
    Nack = 9,
}

impl MessageType {
    pub fn from_u8(v: u8) -> Result<MessageType> {
        Ok(match v {
            1 => MessageType::Data,
            2 => MessageType::Coded,
            3 => MessageType::Report,
            4 => MessageType::Heartbeat,
            5 => MessageType::Hello,
            6 => MessageType::Config,
            7 => MessageType::AddressChange,
            8 => MessageType::Parity,
            9 => MessageType::Nack,
            other => return Err(Error::UnknownType(other)),
        })
    }
}

/// The common header. The message type is implied by the [`crate::Message`] it heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Fixed at bytes 4-7 of every datagram so a load balancer can route by it.
    pub session_id: u32,
    /// The path the datagram is sent on.
    pub path: u8,
    /// Next number of that path's own sequence space (PluriBus §5).
    pub path_seq: u32,
    /// Sender's clock, microseconds, low 32 bits.
    pub timestamp: u32,
    /// Highest data-level sequence number the sender has received from its peer.
    pub ack: Option<u32>,
    /// Per-path receive state of one path, piggybacked.
    pub path_ack: Option<PathAck>,
    /// Deliver on arrival (data only): see [`FLAG_UNORDERED`].
    pub unordered: bool,
}

impl Header {
    /// Bytes this header takes on the wire.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + if self.ack.is_some() { 4 } else { 0 }
            + if self.path_ack.is_some() { 13 } else { 0 }
    }

    /// Reads only the session id, as a load balancer would: no other validation.
    pub fn peek_session_id(bytes: &[u8]) -> Result<u32> {
        let b = bytes.get(4..8).ok_or(Error::Truncated)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<(Header, MessageType)> {
        let version = r.u8()?;
        if version != VERSION {
            return Err(Error::Version(version));
        }
        let kind = MessageType::from_u8(r.u8()?)?;
        let path = r.u8()?;
        let flags = r.u8()?;
        let session_id = r.u32()?;
        let path_seq = r.u32()?;
        let timestamp = r.u32()?;
        let ack = if flags & FLAG_ACK != 0 {
            Some(r.u32()?)
        } else {
            None
        };
        let path_ack = if flags & FLAG_PATH_ACK != 0 {
            Some(PathAck {
                path: r.u8()?,
                highest_seq: r.u32()?,
                received: r.u32()?,
                queue_us: r.u32()?,
            })
        } else {
            None
        };
        Ok((
            Header {
                session_id,
                path,
                path_seq,
                timestamp,
                ack,
                path_ack,
                unordered: flags & FLAG_UNORDERED != 0,
            },
            kind,
        ))
    }

    pub(crate) fn emit(&self, kind: MessageType, w: &mut Writer<'_>) -> Result<()> {
        w.u8(VERSION)?;
        w.u8(kind as u8)?;
        w.u8(self.path)?;
        let flags = if self.ack.is_some() { FLAG_ACK } else { 0 }
            | if self.path_ack.is_some() {
                FLAG_PATH_ACK
            } else {
                0
            }
            | if self.unordered { FLAG_UNORDERED } else { 0 };
        w.u8(flags)?;
        w.u32(self.session_id)?;
        w.u32(self.path_seq)?;
        w.u32(self.timestamp)?;
        if let Some(ack) = self.ack {
            w.u32(ack)?;
        }
        if let Some(pa) = self.path_ack {
            w.u8(pa.path)?;
            w.u32(pa.highest_seq)?;
            w.u32(pa.received)?;
            w.u32(pa.queue_us)?;
        }
        Ok(())
    }
}
