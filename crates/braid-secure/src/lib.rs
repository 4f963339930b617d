//! braid's security layer, sans-IO: a Noise IK handshake with static X25519 keys,
//! ChaCha20-Poly1305 on every datagram with a counter and replay window per path, WireGuard's
//! cookies under load, and rekeying on WireGuard's timers. The threat model and the design
//! are in docs/security.md; the envelope's bytes in docs/wire.md ("Envelope").
//!
//! Two endpoints: [`Gateway`] (the initiator: one session to one server) and [`Server`] (the
//! responder: sessions with many gateways). Neither reads a clock, touches a socket or
//! allocates per datagram; the daemon's event loop drives them.
//!
//! # Driving contract (both endpoints)
//!
//! - Time comes in as `now` ([`braid_core::Instant`], the engine's clock) on every call and
//!   only moves forward (an earlier `now` is taken as the latest seen). Timers are
//!   `poll_timeout()` (the next instant there is work) and `handle_timeout(now)` (harmless
//!   when early).
//! - Buffers belong to the caller. To send, the caller writes the engine's datagram at
//!   `buf[DATA_HEADER_LEN..]` (the engine's `poll_transmit` can write straight there) and
//!   calls `seal(now, .., path, buf, len)`, which encrypts in place, writes the 16-byte
//!   header before the payload and the 16-byte tag after it, and returns the length to send
//!   (`len + DATA_OVERHEAD`). To receive, the caller passes the datagram to `handle`, which
//!   decrypts in place and returns a [`Received`]: for data, the session, the path, and the
//!   payload's range in the buffer, which goes to the engine's `handle_datagram(now, path,
//!   &buf[range])`.
//! - Outputs the endpoint makes itself are pulled: [`Gateway::poll_transmit`] (handshake
//!   initiations and keepalives, one path each) and `poll_event()` (sessions established,
//!   rekeyed, closed). The server answers handshakes synchronously from [`Server::handle`]
//!   into a reply buffer ([`Received::Reply`]), to the datagram's source address.
//! - Every datagram that is malformed, forged, corrupted, truncated, replayed, for an unknown
//!   session, or from an unknown key is dropped: `handle` returns a [`Dropped`] reason, and
//!   the endpoint counts it in [`Stats`]. Nothing on that path panics or changes state.
//! - Roaming: authentication is by keys and session id, never by address. A [`Received`]
//!   of data or keepalive names the session and path it authenticated for; the caller then
//!   takes the datagram's source address as that path's current address. A drop moves
//!   nothing.
//!
//! A typical server loop, per received batch: `handle` each datagram (sending any reply to
//! its source), hand data to the session's engine, then for each engine `poll_transmit`
//! into `buf[DATA_HEADER_LEN..]` and `seal` it for the engine's session and path; then
//! `poll_event` and `poll_timeout`.

pub mod cookie;
pub mod envelope;
mod gateway;
mod handshake;
mod keypair;
mod keyring;
pub mod keys;
pub mod limits;
pub mod replay;
mod rng;
mod server;
mod stats;

#[cfg(test)]
mod tests;

use std::fmt;
use std::num::NonZeroU32;
use std::ops::Range;

use braid_core::PathId;

pub use envelope::{
    session_id, DATA_HEADER_LEN, DATA_OVERHEAD, MAX_HANDSHAKE_LEN, MAX_HANDSHAKE_PAYLOAD, TAG_LEN,
};
pub use gateway::{Gateway, GatewayConfig};
pub use handshake::NOISE_PARAMS;
pub use keypair::SealError;
pub use keys::{KeyError, PrivateKey, PublicKey};
pub use rng::Seed;
pub use server::{Load, Server, ServerConfig, SessionIdPrefix, MAX_PEERS};
pub use stats::{Dropped, Stats};

/// Paths a session may use unless configured otherwise.
pub const DEFAULT_MAX_PATHS: usize = 16;
/// Most events kept for the caller; beyond it they are dropped and counted.
const MAX_EVENTS: usize = 1024;

/// A session's id: chosen by the server, unique among its live sessions, carried in
/// cleartext at bytes 4-7 of every datagram and kept across rekeys. The engine's
/// `Config::session_id` should be set to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(NonZeroU32);

impl SessionId {
    pub(crate) const MAX: SessionId = SessionId(NonZeroU32::MAX);

    /// The id `v`, if non-zero (zero means "no session" on the wire).
    pub fn new(v: u32) -> Option<SessionId> {
        NonZeroU32::new(v).map(SessionId)
    }

    pub fn get(self) -> u32 {
        self.0.get()
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

/// What an authenticated datagram was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// Transport data, decrypted in place: `buf[payload]` is the engine's datagram, which
    /// arrived on `path` of `session`.
    Data {
        session: SessionId,
        path: PathId,
        payload: Range<usize>,
    },
    /// An authenticated empty datagram (the gateway confirms new keys with these): nothing
    /// to deliver, but the path's address may be updated as for data.
    Keepalive { session: SessionId, path: PathId },
    /// Server: send `reply[..len]` back to the datagram's source address (a handshake
    /// response, or a cookie reply under load).
    Reply { len: usize },
    /// A handshake message was consumed; poll events and transmits.
    Handshake,
}

/// One datagram the gateway wants sent: `buf[..len]` on `path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    pub len: usize,
}

/// Something the caller should know about a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A session is up. On the server, `peer` is the gateway's key and `payload` what its
    /// initiation carried (its name and version); on the gateway, `peer` is the server's key
    /// and `payload` what the response carried. The caller creates the session's engine.
    Established {
        session: SessionId,
        peer: PublicKey,
        payload: Vec<u8>,
    },
    /// The session has new keys (a rekey): nothing changes for the caller.
    Rekeyed { session: SessionId, epoch: u8 },
    /// The session is gone; the caller drops its engine and addresses.
    Closed {
        session: SessionId,
        reason: CloseReason,
    },
}

/// Why a session closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The same gateway opened a new session (it restarted), or the server answered the
    /// gateway's rekey with a new session (it had forgotten the old one).
    Replaced,
    /// Server: nothing authenticated arrived for the idle timeout.
    Idle,
    /// Server: the gateway's key was removed from the configuration.
    PeerRemoved,
}

/// A configuration the endpoints refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("handshake payload of {0} bytes; at most {MAX_HANDSHAKE_PAYLOAD} fit")]
    PayloadTooLong(usize),
    #[error("max_paths = {0}; it must be 1 to 255")]
    MaxPaths(usize),
    #[error("more than {0} paths")]
    TooManyPaths(usize),
    #[error("more than {0} gateway keys")]
    TooManyPeers(usize),
    #[error(
        "session id prefix of {bits} bits with value {value}: at most 16 bits, value below 2^bits"
    )]
    SessionIdPrefix { bits: u8, value: u32 },
}
