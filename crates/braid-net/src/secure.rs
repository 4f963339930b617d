//! The boundary between the engine's datagrams and the wire. Every datagram a session
//! sends is sealed at one call site and every datagram received is opened at one, through
//! the types here: `braid-secure` (Noise IK, ChaCha20-Poly1305 per datagram, per-path
//! replay windows, cookies; docs/security.md) by default, or no encryption at all when a
//! config says `plaintext = true` (for measuring the bare data path).
//!
//! Layout: the engine writes its datagram at `buf[headroom()..]`; `seal` turns
//! `buf[..headroom() + len + ...]` into the datagram to send, `overhead()` bytes longer.

use std::net::SocketAddr;
use std::ops::Range;

use braid_core::{Instant, PathId};
use braid_secure::{
    Authenticated, DataHeader, Dropped, Load, OpenKey, Received, SealKey, SessionId,
    DATA_HEADER_LEN, DATA_OVERHEAD, MAX_HANDSHAKE_LEN,
};

use crate::config::{self, GatewayConfig, ServerConfig};
use crate::status::Drops;
use crate::DaemonError;

/// The version byte of the handshake payload a gateway sends.
const PAYLOAD_VERSION: u8 = 1;

/// What a gateway tells the server in its handshake: how many paths it has, its name.
pub fn gateway_payload(paths: u8, name: &str) -> Vec<u8> {
    let mut p = vec![PAYLOAD_VERSION, paths];
    p.extend(name.bytes().take(braid_secure::MAX_HANDSHAKE_PAYLOAD - 2));
    p
}

/// The path count in a gateway's handshake payload (1 if absent).
pub fn payload_paths(payload: &[u8]) -> u8 {
    match payload {
        [PAYLOAD_VERSION, n, ..] => (*n).max(1),
        _ => 1,
    }
}

/// The gateway's security from its config: its key, the server's, and the handshake
/// payload. The tunnel and the split-TCP channel each run a session keyed so.
pub fn gateway_security(cfg: &GatewayConfig, now: Instant) -> Result<GatewaySecurity, DaemonError> {
    if cfg.plaintext {
        return Ok(GatewaySecurity::Plaintext);
    }
    let key = config::load_private_key(&cfg.file, &cfg.private_key_file)?;
    let server = config::parse_public_key(&cfg.server_public_key)
        .map_err(|e| DaemonError::Setup(format!("{}: server.public_key: {e}", cfg.file)))?;
    let seed = braid_secure::Seed::from_os()
        .map_err(|e| DaemonError::Setup(format!("no random numbers: {e}")))?;
    let mut sc =
        braid_secure::GatewayConfig::new(key, server, crate::clock::Clock::unix_time(), seed);
    sc.max_paths = cfg.uplinks.len();
    sc.payload = gateway_payload(cfg.uplinks.len() as u8, &cfg.tun);
    let ids: Vec<PathId> = (0..cfg.uplinks.len()).map(|i| i as PathId).collect();
    Ok(GatewaySecurity::Noise(Box::new(
        braid_secure::Gateway::new(sc, &ids, now)
            .map_err(|e| DaemonError::Setup(format!("security: {e}")))?,
    )))
}

/// The server's security from its config: its key and the gateways' keys.
pub fn server_security(cfg: &ServerConfig, now: Instant) -> Result<ServerSecurity, DaemonError> {
    if cfg.plaintext {
        return Ok(ServerSecurity::Plaintext);
    }
    let key = config::load_private_key(&cfg.file, &cfg.private_key_file)?;
    let mut peers = Vec::with_capacity(cfg.peers.len());
    for p in &cfg.peers {
        peers.push(config::parse_public_key(&p.public_key).map_err(|e| {
            DaemonError::Setup(format!(
                "{}: gateway '{}': public_key: {e}",
                cfg.file, p.name
            ))
        })?);
    }
    let seed = braid_secure::Seed::from_os()
        .map_err(|e| DaemonError::Setup(format!("no random numbers: {e}")))?;
    let sc = braid_secure::ServerConfig::new(key, peers, seed);
    Ok(ServerSecurity::Noise(Box::new(
        braid_secure::Server::new(sc, now)
            .map_err(|e| DaemonError::Setup(format!("{}: {e}", cfg.file)))?,
    )))
}

/// Counts a dropped datagram under its reason.
pub fn count(d: &mut Drops, e: &Dropped) {
    match e {
        Dropped::Replayed { .. } | Dropped::TooOld { .. } | Dropped::HandshakeReplay => {
            d.replayed += 1
        }
        Dropped::UnknownSession(_) | Dropped::NoKeys { .. } => d.unknown_session += 1,
        Dropped::UnknownKey => d.unknown_key += 1,
        Dropped::RateLimited | Dropped::TooManyPaths(_) | Dropped::CounterExhausted => {
            d.engine_rejected += 1
        }
        Dropped::Malformed(_)
        | Dropped::UnexpectedType(_)
        | Dropped::Forged
        | Dropped::BadMac1
        | Dropped::HandshakeFailed
        | Dropped::UnexpectedReply
        | Dropped::BadCookieReply => d.unauthenticated += 1,
    }
}

/// What an opened datagram holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// An engine datagram of `session` on `path` at `buf[range]`.
    Data {
        session: u32,
        path: PathId,
        range: Range<usize>,
    },
    /// Authenticated, nothing for the engine (a keepalive).
    Keepalive { session: u32, path: PathId },
    /// Send `reply[..len]` back to the source (server: a handshake response).
    Reply(usize),
    /// A handshake message was consumed: poll events.
    Handshake,
}

/// A received datagram after the checks that come before its AEAD.
pub enum Deferred {
    /// Nothing left to do but act on it (handshakes; everything without encryption).
    Ready(Opened),
    /// Data to open with `key` (on the crypto thread), then `finish_open`.
    Open { key: OpenKey, header: DataHeader },
}

fn from_deferred(d: braid_secure::Deferred) -> Deferred {
    match d {
        braid_secure::Deferred::Done(r) => Deferred::Ready(from_received(r)),
        braid_secure::Deferred::Open { key, header } => Deferred::Open { key, header },
    }
}

fn from_received(r: Received) -> Opened {
    match r {
        Received::Data {
            session,
            path,
            payload,
        } => Opened::Data {
            session: session.get(),
            path,
            range: payload,
        },
        Received::Keepalive { session, path } => Opened::Keepalive {
            session: session.get(),
            path,
        },
        Received::Reply { len } => Opened::Reply(len),
        Received::Handshake => Opened::Handshake,
    }
}

/// The gateway's end.
pub enum GatewaySecurity {
    Plaintext,
    Noise(Box<braid_secure::Gateway>),
}

/// Handshakes a second above which a server answers with cookies first (WireGuard's
/// "under load").
const HANDSHAKES_UNDER_LOAD: u32 = 200;

/// A server's count of the handshakes it answered this second, which says whether it is
/// under load.
#[derive(Clone, Copy, Debug, Default)]
pub struct HandshakeRate {
    second: Instant,
    count: u32,
}

impl HandshakeRate {
    /// One handshake answered.
    pub fn count(&mut self) {
        self.count += 1;
    }

    /// Whether handshakes arrive fast enough at `now` to demand cookies first.
    pub fn load(&mut self, now: Instant) -> braid_secure::Load {
        if now.saturating_duration_since(self.second) >= std::time::Duration::from_secs(1) {
            *self = HandshakeRate {
                second: now,
                count: 0,
            };
        }
        if self.count > HANDSHAKES_UNDER_LOAD {
            braid_secure::Load::High
        } else {
            braid_secure::Load::Normal
        }
    }
}

impl GatewaySecurity {
    /// When the security layer next needs a timer (never without encryption).
    pub fn timeout(&self) -> Instant {
        match self {
            GatewaySecurity::Plaintext => Instant::MAX,
            GatewaySecurity::Noise(g) => g.poll_timeout().unwrap_or(Instant::MAX),
        }
    }

    pub fn headroom(&self) -> usize {
        match self {
            GatewaySecurity::Plaintext => 0,
            GatewaySecurity::Noise(_) => DATA_HEADER_LEN,
        }
    }

    pub fn overhead(&self) -> usize {
        match self {
            GatewaySecurity::Plaintext => 0,
            GatewaySecurity::Noise(_) => DATA_OVERHEAD,
        }
    }

    /// Seals the engine datagram at `buf[headroom()..headroom() + len]` for `path`; the
    /// length of `buf[..n]` to send, or `None` (no keys yet: counted by the caller).
    pub fn seal(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Option<usize> {
        match self {
            GatewaySecurity::Plaintext => Some(len),
            GatewaySecurity::Noise(g) => g.seal(now, path, buf, len).ok(),
        }
    }

    /// [`GatewaySecurity::seal`]'s bookkeeping: the length to send and the key that still
    /// has to encrypt `buf[..n]` (none without encryption).
    pub fn seal_deferred(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Option<(usize, Option<SealKey>)> {
        match self {
            GatewaySecurity::Plaintext => Some((len, None)),
            GatewaySecurity::Noise(g) => g
                .seal_deferred(now, path, buf, len)
                .ok()
                .map(|(n, k)| (n, Some(k))),
        }
    }

    /// [`GatewaySecurity::open`] up to the AEAD.
    pub fn open_deferred(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut [u8],
    ) -> Result<Deferred, Dropped> {
        match self {
            GatewaySecurity::Plaintext => self.open(now, path, buf).map(Deferred::Ready),
            GatewaySecurity::Noise(g) => g.handle_deferred(now, path, buf).map(from_deferred),
        }
    }

    /// After the AEAD of a [`Deferred::Open`] datagram.
    pub fn finish_open(
        &mut self,
        now: Instant,
        opened: Result<Authenticated, Dropped>,
    ) -> Result<Opened, Dropped> {
        match self {
            GatewaySecurity::Plaintext => Err(Dropped::Forged),
            GatewaySecurity::Noise(g) => g.finish_open(now, opened).map(from_received),
        }
    }

    /// Opens a datagram that arrived on `path`, in place.
    pub fn open(&mut self, now: Instant, path: PathId, buf: &mut [u8]) -> Result<Opened, Dropped> {
        match self {
            GatewaySecurity::Plaintext => Ok(Opened::Data {
                session: session_of(buf).unwrap_or(0),
                path,
                range: 0..buf.len(),
            }),
            GatewaySecurity::Noise(g) => g.handle(now, path, buf).map(from_received),
        }
    }
}

/// The session id at its fixed place, bytes 4-7 (docs/wire.md), in cleartext both in the
/// engine's header and in the envelope.
pub fn session_of(d: &[u8]) -> Option<u32> {
    let b: [u8; 4] = d.get(4..8)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

/// The server's end.
pub enum ServerSecurity {
    Plaintext,
    Noise(Box<braid_secure::Server>),
}

impl ServerSecurity {
    pub fn headroom(&self) -> usize {
        match self {
            ServerSecurity::Plaintext => 0,
            ServerSecurity::Noise(_) => DATA_HEADER_LEN,
        }
    }

    pub fn overhead(&self) -> usize {
        match self {
            ServerSecurity::Plaintext => 0,
            ServerSecurity::Noise(_) => DATA_OVERHEAD,
        }
    }

    /// Seals for `session`'s `path`; see [`GatewaySecurity::seal`].
    pub fn seal(
        &mut self,
        now: Instant,
        session: u32,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Option<usize> {
        match self {
            ServerSecurity::Plaintext => Some(len),
            ServerSecurity::Noise(s) => {
                let id = SessionId::new(session)?;
                s.seal(now, id, path, buf, len).ok()
            }
        }
    }

    /// [`ServerSecurity::seal`]'s bookkeeping, as [`GatewaySecurity::seal_deferred`].
    pub fn seal_deferred(
        &mut self,
        now: Instant,
        session: u32,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Option<(usize, Option<SealKey>)> {
        match self {
            ServerSecurity::Plaintext => Some((len, None)),
            ServerSecurity::Noise(s) => {
                let id = SessionId::new(session)?;
                s.seal_deferred(now, id, path, buf, len)
                    .ok()
                    .map(|(n, k)| (n, Some(k)))
            }
        }
    }

    /// [`ServerSecurity::open`] up to the AEAD.
    pub fn open_deferred(
        &mut self,
        now: Instant,
        from: SocketAddr,
        load: Load,
        buf: &mut [u8],
        reply: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<Deferred, Dropped> {
        match self {
            ServerSecurity::Plaintext => {
                self.open(now, from, load, buf, reply).map(Deferred::Ready)
            }
            ServerSecurity::Noise(s) => s
                .handle_deferred(now, from, load, buf, reply)
                .map(from_deferred),
        }
    }

    /// After the AEAD of a [`Deferred::Open`] datagram.
    pub fn finish_open(
        &mut self,
        now: Instant,
        opened: Result<Authenticated, Dropped>,
    ) -> Result<Opened, Dropped> {
        match self {
            ServerSecurity::Plaintext => Err(Dropped::Forged),
            ServerSecurity::Noise(s) => s.finish_open(now, opened).map(from_received),
        }
    }

    /// The gateway key `session` belongs to (none without encryption).
    pub fn session_peer(&self, session: u32) -> Option<braid_secure::PublicKey> {
        match self {
            ServerSecurity::Plaintext => None,
            ServerSecurity::Noise(s) => s.session_peer(SessionId::new(session)?),
        }
    }

    /// Opens a datagram from `from` in place; a handshake answer goes into `reply`.
    pub fn open(
        &mut self,
        now: Instant,
        from: SocketAddr,
        load: Load,
        buf: &mut [u8],
        reply: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<Opened, Dropped> {
        match self {
            ServerSecurity::Plaintext => {
                let session = session_of(buf).ok_or(Dropped::UnknownSession(0))?;
                let path = *buf.get(2).ok_or(Dropped::UnknownSession(session))?;
                Ok(Opened::Data {
                    session,
                    path,
                    range: 0..buf.len(),
                })
            }
            ServerSecurity::Noise(s) => s.handle(now, from, load, buf, reply).map(from_received),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_carries_the_path_count() {
        assert_eq!(payload_paths(&gateway_payload(3, "bus-17")), 3);
        assert_eq!(payload_paths(&[]), 1);
        assert_eq!(payload_paths(&[9, 4]), 1);
    }
}
