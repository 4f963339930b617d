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
//!   &buf[range])`. `seal` needs `buf.len() >= len + DATA_OVERHEAD` (so the engine gets
//!   `&mut buf[DATA_HEADER_LEN..buf.len() - TAG_LEN]`); after a failed `handle` the
//!   buffer's contents are unspecified. Handshake messages need [`MAX_HANDSHAKE_LEN`] bytes.
//!   A batch of datagrams is a batch of such calls on the slots of one batch buffer (GSO/GRO
//!   friendly: nothing is copied or allocated per datagram).
//! - The same in two steps, so that the AEAD of a batch can run on other threads:
//!   `seal_deferred` takes the path's counter and writes the header (in sending order) and
//!   returns a [`SealKey`] that encrypts `buf[..n]` later, anywhere; `handle_deferred`
//!   handles handshakes at once and, for data, makes the checks before the AEAD (session,
//!   keys, replay window) and returns [`Deferred::Open`] with an [`OpenKey`], whose
//!   [`Authenticated`] result goes to `finish_open`, which checks the window again, commits
//!   it and counts. Only `OpenKey::open` makes an [`Authenticated`], so a window moves only
//!   for a datagram that authenticated; a duplicate opened in the same batch is refused by
//!   `finish_open`.
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
//!
//! # Example
//!
//! A gateway with two paths and a server, with the network in between played by hand:
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//!
//! use braid_core::Instant;
//! use braid_secure::*;
//!
//! let gw_key = PrivateKey::generate_from_os()?;
//! let srv_key = PrivateKey::generate_from_os()?;
//! let now = Instant::from_millis(1);
//! let config = ServerConfig::new(srv_key.clone(), vec![gw_key.public_key()], Seed::from_os()?);
//! let mut server = Server::new(config, now)?;
//! let wall_clock = Duration::from_secs(1_700_000_000); // the daemon reads it once, at start
//! let config = GatewayConfig::new(gw_key, srv_key.public_key(), wall_clock, Seed::from_os()?);
//! let mut gateway = Gateway::new(config, &[0, 1], now)?;
//! let from = |path: u8| SocketAddr::from(([192, 0, 2, path], 4000));
//!
//! // The handshake, then the keepalives that confirm its keys: whatever the gateway wants
//! // sent goes to the server, whose replies go back.
//! let mut buf = [0u8; 2048];
//! let mut reply = [0u8; MAX_HANDSHAKE_LEN];
//! for _ in 0..2 {
//!     while let Some(t) = gateway.poll_transmit(now, &mut buf) {
//!         let datagram = &mut buf[..t.len];
//!         if let Ok(Received::Reply { len }) =
//!             server.handle(now, from(t.path), Load::Normal, datagram, &mut reply)
//!         {
//!             gateway.handle(now, t.path, &mut reply[..len])?;
//!         }
//!     }
//! }
//! let session = gateway.session().expect("the handshake completed");
//! assert!(matches!(server.poll_event(), Some(Event::Established { .. })));
//!
//! // Sending: the engine's datagram goes after room for the header; `seal` encrypts it in
//! // place and returns the length to send.
//! let inner = b"a datagram of the engine";
//! buf[DATA_HEADER_LEN..DATA_HEADER_LEN + inner.len()].copy_from_slice(inner);
//! let n = gateway.seal(now, 1, &mut buf, inner.len())?;
//!
//! // Receiving: `handle` decrypts in place and names the session and path; the engine gets
//! // `&buf[payload]`, and the daemon takes the source address as path 1's address.
//! match server.handle(now, from(1), Load::Normal, &mut buf[..n], &mut reply)? {
//!     Received::Data { session: s, path, payload } => {
//!         assert_eq!((s, path), (session, 1));
//!         assert_eq!(&buf[payload], inner);
//!     }
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cookie;
pub mod envelope;
mod gateway;
mod handshake;
mod keypair;
mod keyring;
pub mod keys;
pub mod lender;
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

pub use envelope::DataHeader;
pub use envelope::{
    session_id, DATA_HEADER_LEN, DATA_OVERHEAD, MAX_HANDSHAKE_LEN, MAX_HANDSHAKE_PAYLOAD, TAG_LEN,
};
pub use gateway::{Gateway, GatewayConfig};
pub use handshake::NOISE_PARAMS;
pub use keypair::{Authenticated, OpenKey, SealError, SealKey};
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

/// What `handle_deferred` made of a received datagram.
pub enum Deferred {
    /// Handled completely (a handshake message): as `handle` would have returned.
    Done(Received),
    /// A data message that passed the checks before the AEAD: open it with
    /// `key.open(&header, buf)` (on any thread) and hand the result to `finish_open`.
    Open { key: OpenKey, header: DataHeader },
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
