//! The outer envelope around every braid datagram (docs/wire.md, "Envelope"): four message
//! types, each starting with the same 8 bytes so that the session id sits at bytes 4-7 of
//! every datagram, where an L4 load balancer can route by it (QUIC-LB style).
//!
//! ```text
//!  0        1        2        3        4                                 8
//! +--------+--------+--------+--------+--------+--------+--------+--------+
//! |  type  | epoch  |  path  |   0    |            session id             |
//! +--------+--------+--------+--------+--------+--------+--------+--------+
//! ```
//!
//! Parsing is zero-copy over the received bytes and never panics: a view is handed out only
//! after its length has been checked, and its accessors index within that length.

use braid_core::PathId;

/// Bytes of the cleartext header of a data message, also its associated data.
pub const DATA_HEADER_LEN: usize = 16;
/// Bytes of the Poly1305 tag after every ciphertext.
pub const TAG_LEN: usize = 16;
/// Bytes a data message adds to its payload: header and tag.
pub const DATA_OVERHEAD: usize = DATA_HEADER_LEN + TAG_LEN;
/// Most bytes of application payload a handshake message carries (the gateway's name and
/// version, for instance).
pub const MAX_HANDSHAKE_PAYLOAD: usize = 256;
/// Bytes of the cleartext header of a handshake message (initiation, response, cookie reply).
pub const HANDSHAKE_HEADER_LEN: usize = 12;
/// Bytes of the initiation's timestamp, first in its encrypted payload.
pub const TIMESTAMP_LEN: usize = 8;
/// Bytes of each of mac1 and mac2.
pub const MAC_LEN: usize = 16;
/// Noise IK message 1 without payload: ephemeral key, encrypted static key, payload tag.
const NOISE_INITIATION_LEN: usize = 32 + 32 + TAG_LEN + TAG_LEN;
/// Noise IK message 2 without payload: ephemeral key, payload tag.
const NOISE_RESPONSE_LEN: usize = 32 + TAG_LEN;
/// Smallest initiation: header, Noise message with the timestamp and no application
/// payload, mac1, mac2.
pub const MIN_INITIATION_LEN: usize =
    HANDSHAKE_HEADER_LEN + NOISE_INITIATION_LEN + TIMESTAMP_LEN + 2 * MAC_LEN;
/// Largest initiation.
pub const MAX_INITIATION_LEN: usize = MIN_INITIATION_LEN + MAX_HANDSHAKE_PAYLOAD;
/// Bytes that start a response's encrypted payload: the epoch and the session id.
pub const RESPONSE_FIELDS_LEN: usize = 5;
/// Smallest response: header and Noise message with the epoch and session id.
pub const MIN_RESPONSE_LEN: usize = HANDSHAKE_HEADER_LEN + NOISE_RESPONSE_LEN + RESPONSE_FIELDS_LEN;
/// Largest response.
pub const MAX_RESPONSE_LEN: usize = MIN_RESPONSE_LEN + MAX_HANDSHAKE_PAYLOAD;
/// Bytes of the nonce of a cookie reply (XChaCha20-Poly1305).
pub const COOKIE_NONCE_LEN: usize = 24;
/// Bytes of a cookie.
pub const COOKIE_LEN: usize = 16;
/// Bytes of a cookie reply: header, nonce, encrypted cookie and its tag.
pub const COOKIE_REPLY_LEN: usize = HANDSHAKE_HEADER_LEN + COOKIE_NONCE_LEN + COOKIE_LEN + TAG_LEN;
/// The largest datagram the security layer itself produces (handshake messages); a buffer
/// of this size is enough for [`crate::Gateway::poll_transmit`] and for the replies of
/// [`crate::Server::handle`].
pub const MAX_HANDSHAKE_LEN: usize = MAX_INITIATION_LEN;
const _: () =
    assert!(MAX_RESPONSE_LEN <= MAX_HANDSHAKE_LEN && COOKIE_REPLY_LEN <= MAX_HANDSHAKE_LEN);

/// The message types (byte 0). The envelope has no separate version byte: an incompatible
/// change takes new type numbers, as WireGuard's does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    /// Noise IK message 1, gateway to server.
    Initiation = 1,
    /// Noise IK message 2, server to gateway.
    Response = 2,
    /// The server's answer to an initiation under load: a cookie to prove address ownership.
    CookieReply = 3,
    /// An encrypted braid datagram (or an empty keepalive).
    Data = 4,
}

/// Why bytes are not an envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("empty datagram")]
    Empty,
    #[error("unknown message type {0}")]
    UnknownType(u8),
    #[error("{kind:?} message of {len} bytes (expected {min}..={max})")]
    Length {
        kind: MessageType,
        len: usize,
        min: usize,
        max: usize,
    },
    #[error("reserved header bits are set")]
    Reserved,
}

/// A checked view of a received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Envelope<'a> {
    Initiation(Initiation<'a>),
    Response(Response<'a>),
    CookieReply(CookieReply<'a>),
    Data(DataHeader),
}

impl<'a> Envelope<'a> {
    /// Checks the type, the length and the reserved bits of `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Envelope<'a>, EnvelopeError> {
        let &ty = bytes.first().ok_or(EnvelopeError::Empty)?;
        let (kind, min, max) = match ty {
            1 => (
                MessageType::Initiation,
                MIN_INITIATION_LEN,
                MAX_INITIATION_LEN,
            ),
            2 => (MessageType::Response, MIN_RESPONSE_LEN, MAX_RESPONSE_LEN),
            3 => (MessageType::CookieReply, COOKIE_REPLY_LEN, COOKIE_REPLY_LEN),
            4 => (MessageType::Data, DATA_OVERHEAD, usize::MAX),
            other => return Err(EnvelopeError::UnknownType(other)),
        };
        let len = bytes.len();
        if len < min || len > max {
            return Err(EnvelopeError::Length {
                kind,
                len,
                min,
                max,
            });
        }
        // Byte 3 is reserved in every type, byte 2 (path) in handshake messages, byte 1
        // (epoch) in initiations and cookie replies.
        let reserved = match kind {
            MessageType::Data => bytes[3],
            MessageType::Response => bytes[2] | bytes[3],
            MessageType::Initiation | MessageType::CookieReply => bytes[1] | bytes[2] | bytes[3],
        };
        if reserved != 0 {
            return Err(EnvelopeError::Reserved);
        }
        Ok(match kind {
            MessageType::Initiation => Envelope::Initiation(Initiation { bytes }),
            MessageType::Response => Envelope::Response(Response { bytes }),
            MessageType::CookieReply => Envelope::CookieReply(CookieReply { bytes }),
            MessageType::Data => Envelope::Data(DataHeader::read(bytes)),
        })
    }
}

/// The session id at bytes 4-7 of any datagram of at least 8 bytes, without further checks:
/// what a load balancer or a dispatcher over threads routes by. Zero in an initiation that
/// opens a new session.
pub fn session_id(datagram: &[u8]) -> Option<u32> {
    let b = datagram.get(4..8)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn be32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(b)
}

/// Writes the 12-byte header of a handshake message.
pub(crate) fn write_handshake_header(
    out: &mut [u8],
    kind: MessageType,
    epoch: u8,
    session: u32,
    sender: u32,
) {
    out[0] = kind as u8;
    out[1] = epoch;
    out[2] = 0;
    out[3] = 0;
    out[4..8].copy_from_slice(&session.to_be_bytes());
    out[8..12].copy_from_slice(&sender.to_be_bytes());
}

/// Noise IK message 1 (gateway to server).
///
/// ```text
/// | type 1 | 0 | 0 | 0 | session id (0: new) | sender index | Noise message | mac1 | mac2 |
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Initiation<'a> {
    bytes: &'a [u8],
}

impl<'a> Initiation<'a> {
    /// The session this handshake rekeys, or 0 for a new session.
    pub fn session(&self) -> u32 {
        be32(self.bytes, 4)
    }
    /// The gateway's random index of this handshake, echoed by the reply.
    pub fn sender(&self) -> u32 {
        be32(self.bytes, 8)
    }
    /// The cleartext header, bound into the handshake as part of the Noise prologue.
    pub fn header(&self) -> &'a [u8] {
        &self.bytes[..HANDSHAKE_HEADER_LEN]
    }
    /// The Noise message.
    pub fn noise(&self) -> &'a [u8] {
        &self.bytes[HANDSHAKE_HEADER_LEN..self.bytes.len() - 2 * MAC_LEN]
    }
    /// Everything mac1 covers.
    pub fn mac1_input(&self) -> &'a [u8] {
        &self.bytes[..self.bytes.len() - 2 * MAC_LEN]
    }
    /// Everything mac2 covers (mac1 included).
    pub fn mac2_input(&self) -> &'a [u8] {
        &self.bytes[..self.bytes.len() - MAC_LEN]
    }
    pub fn mac1(&self) -> &'a [u8] {
        let n = self.bytes.len();
        &self.bytes[n - 2 * MAC_LEN..n - MAC_LEN]
    }
    pub fn mac2(&self) -> &'a [u8] {
        &self.bytes[self.bytes.len() - MAC_LEN..]
    }
}

/// Noise IK message 2 (server to gateway).
///
/// ```text
/// | type 2 | epoch | 0 | 0 | session id | sender index echoed | Noise message |
/// ```
///
/// The Noise message's payload starts with the epoch (u8) and the session id (u32); the
/// gateway acts on those, authenticated, copies. The cleartext ones are there for
/// observers (a capture, a load balancer) and are not trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response<'a> {
    bytes: &'a [u8],
}

impl<'a> Response<'a> {
    /// The key epoch the new keys take (cleartext copy, not trusted).
    pub fn epoch(&self) -> u8 {
        self.bytes[1]
    }
    /// The session id the server chose or kept (cleartext copy, not trusted).
    pub fn session(&self) -> u32 {
        be32(self.bytes, 4)
    }
    /// The sender index of the initiation this answers.
    pub fn receiver(&self) -> u32 {
        be32(self.bytes, 8)
    }
    pub fn noise(&self) -> &'a [u8] {
        &self.bytes[HANDSHAKE_HEADER_LEN..]
    }
}

/// The server's answer to an initiation it will not process without proof that the sender
/// owns its address (WireGuard §5.4.7).
///
/// ```text
/// | type 3 | 0 | 0 | 0 | session id echoed | sender index echoed | nonce (24) | cookie (16) + tag (16) |
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieReply<'a> {
    bytes: &'a [u8],
}

impl<'a> CookieReply<'a> {
    pub fn session(&self) -> u32 {
        be32(self.bytes, 4)
    }
    pub fn receiver(&self) -> u32 {
        be32(self.bytes, 8)
    }
    pub fn nonce(&self) -> &'a [u8] {
        &self.bytes[HANDSHAKE_HEADER_LEN..HANDSHAKE_HEADER_LEN + COOKIE_NONCE_LEN]
    }
    pub fn sealed_cookie(&self) -> &'a [u8] {
        &self.bytes[HANDSHAKE_HEADER_LEN + COOKIE_NONCE_LEN..]
    }
}

/// The cleartext header of a data message; all of it is the AEAD's associated data.
///
/// ```text
/// | type 4 | epoch | path | 0 | session id | counter (u64) | ciphertext ... | tag (16) |
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Which of the session's keys sealed it (increments with every handshake, wraps).
    pub epoch: u8,
    /// The path it was sent on; its counter and replay window are that path's.
    pub path: PathId,
    pub session: u32,
    /// The path's message counter under this epoch's key.
    pub counter: u64,
}

impl DataHeader {
    /// Reads the header from the first [`DATA_HEADER_LEN`] bytes (checked by the caller).
    pub(crate) fn read(bytes: &[u8]) -> DataHeader {
        let mut c = [0u8; 8];
        c.copy_from_slice(&bytes[8..16]);
        DataHeader {
            epoch: bytes[1],
            path: bytes[2],
            session: be32(bytes, 4),
            counter: u64::from_be_bytes(c),
        }
    }

    /// Writes the header into the first [`DATA_HEADER_LEN`] bytes of `out`.
    pub fn write(&self, out: &mut [u8; DATA_HEADER_LEN]) {
        out[0] = MessageType::Data as u8;
        out[1] = self.epoch;
        out[2] = self.path;
        out[3] = 0;
        out[4..8].copy_from_slice(&self.session.to_be_bytes());
        out[8..16].copy_from_slice(&self.counter.to_be_bytes());
    }

    /// The AEAD nonce: the path id in the first four bytes, the counter in the last eight,
    /// so that every (path, counter) pair under one key is a distinct nonce.
    pub fn nonce(&self) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[3] = self.path;
        n[4..].copy_from_slice(&self.counter.to_be_bytes());
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_header_round_trips() {
        let h = DataHeader {
            epoch: 7,
            path: 3,
            session: 0xdead_beef,
            counter: 0x0102_0304_0506_0708,
        };
        let mut buf = [0u8; DATA_OVERHEAD];
        let (head, _) = buf.split_at_mut(DATA_HEADER_LEN);
        h.write(head.try_into().unwrap());
        assert_eq!(session_id(&buf), Some(0xdead_beef));
        assert_eq!(Envelope::parse(&buf), Ok(Envelope::Data(h)));
        assert_eq!(h.nonce(), [0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn lengths_and_reserved_bits_are_checked() {
        assert_eq!(Envelope::parse(&[]), Err(EnvelopeError::Empty));
        assert_eq!(
            Envelope::parse(&[9; 40]),
            Err(EnvelopeError::UnknownType(9))
        );
        assert!(matches!(
            Envelope::parse(&[4; 31]),
            Err(EnvelopeError::Length { .. })
        ));
        let mut d = [0u8; 32];
        d[0] = 4;
        d[3] = 1;
        assert_eq!(Envelope::parse(&d), Err(EnvelopeError::Reserved));
        let mut i = [0u8; MIN_INITIATION_LEN];
        i[0] = 1;
        assert!(matches!(Envelope::parse(&i), Ok(Envelope::Initiation(_))));
        i[2] = 1;
        assert_eq!(Envelope::parse(&i), Err(EnvelopeError::Reserved));
        let mut c = [0u8; COOKIE_REPLY_LEN + 1];
        c[0] = 3;
        assert!(matches!(
            Envelope::parse(&c),
            Err(EnvelopeError::Length { .. })
        ));
        assert!(matches!(
            Envelope::parse(&c[..COOKIE_REPLY_LEN]),
            Ok(Envelope::CookieReply(_))
        ));
    }

    /// The lengths docs/wire.md gives.
    #[test]
    fn message_lengths_are_as_documented() {
        assert_eq!(MIN_INITIATION_LEN, 148);
        assert_eq!(MAX_INITIATION_LEN, 148 + 256);
        assert_eq!(MIN_RESPONSE_LEN, 65);
        assert_eq!(COOKIE_REPLY_LEN, 68);
        assert_eq!(DATA_OVERHEAD, 32);
    }

    #[test]
    fn the_session_id_is_at_bytes_4_to_7_of_every_type() {
        for ty in 1..=4u8 {
            let mut b = [0u8; MAX_INITIATION_LEN];
            b[0] = ty;
            b[4..8].copy_from_slice(&42u32.to_be_bytes());
            assert_eq!(session_id(&b), Some(42));
        }
        assert_eq!(session_id(&[1, 2, 3]), None);
    }
}
