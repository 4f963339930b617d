//! The server's end: the Noise responder for many gateways. It answers handshakes from the
//! gateways it knows, gives each session an id, and seals and opens every session's
//! datagrams. It keeps nothing for a sender until that sender has authenticated.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use braid_core::{Instant, PathId};

use crate::cookie::{CookieChecker, MacKeys};
use crate::envelope::{
    Envelope, Initiation, MessageType, COOKIE_REPLY_LEN, MAX_HANDSHAKE_LEN, MAX_HANDSHAKE_PAYLOAD,
    MAX_INITIATION_LEN, MAX_RESPONSE_LEN,
};
use crate::handshake::accept;
use crate::keypair::{Authenticated, SealKey};
use crate::keyring::Keyring;
use crate::keys::{PrivateKey, PublicKey};
use crate::limits::{MIN_INITIATION_INTERVAL, REJECT_AFTER_TIME, REKEY_TIMEOUT};
use crate::rng::{Rng, Seed};
use crate::{
    CloseReason, ConfigError, Deferred, Dropped, Event, Received, SealError, SessionId, Stats,
    MAX_EVENTS,
};

/// Most gateways one server accepts: session ids must stay easy to find among 2^16 or more.
pub const MAX_PEERS: usize = 1 << 15;
/// How often idle sessions and expired keys are swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Whether the server is under load, as the caller judges it (its rate of handshake
/// initiations, say). Under load, an initiation without a valid mac2 gets a cookie reply
/// instead of a handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    Normal,
    High,
}

/// The top bits of every session id this server gives out, so that an L4 load balancer
/// in front of several servers can route by the session id alone (as QUIC-LB encodes a
/// server id in connection ids). `bits` 0 (the default) uses the whole id at random.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionIdPrefix {
    /// How many top bits are fixed, 0 to 16.
    pub bits: u8,
    /// Their value, below `2^bits`.
    pub value: u32,
}

/// How a server is set up.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The server's static key (`braid genkey`).
    pub private_key: PrivateKey,
    /// The gateways allowed to connect, by static public key.
    pub peers: Vec<PublicKey>,
    /// Sent encrypted in every response, at most [`MAX_HANDSHAKE_PAYLOAD`] bytes.
    pub payload: Vec<u8>,
    /// Most paths a session uses (1 to 255).
    pub max_paths: usize,
    /// A session (its id, and the engine state the caller keeps under it) is kept this long
    /// after its last authenticated datagram, so that a gateway back from an outage rekeys
    /// into the same session. Its keys expire long before.
    pub idle_timeout: Duration,
    pub session_id_prefix: SessionIdPrefix,
    /// The random stream's seed: [`Seed::from_os`] in the daemon.
    pub seed: Seed,
}

impl ServerConfig {
    /// A configuration with the defaults: 16 paths, sessions kept 540 s idle (three times
    /// the keys' lifetime, when WireGuard erases everything), random session ids.
    pub fn new(private_key: PrivateKey, peers: Vec<PublicKey>, seed: Seed) -> ServerConfig {
        ServerConfig {
            private_key,
            peers,
            payload: Vec::new(),
            max_paths: crate::DEFAULT_MAX_PATHS,
            idle_timeout: REJECT_AFTER_TIME * 3,
            session_id_prefix: SessionIdPrefix::default(),
            seed,
        }
    }
}

/// What the server remembers of a gateway it is configured to accept.
struct Peer {
    /// Timestamp of the last initiation accepted from it (replay protection).
    last_timestamp: u64,
    last_initiation: Option<Instant>,
    session: Option<SessionId>,
    /// The last handshake, to answer its copies from other paths.
    last: Option<Box<LastHandshake>>,
}

/// A gateway sends the same initiation on every path; the first copy to arrive is
/// processed, and the others are answered with the same response, so the handshake
/// completes if any one path works both ways. Recognising a copy takes no Diffie-Hellman
/// work: it is the same bytes (up to mac1) as the last initiation with that ephemeral key.
struct LastHandshake {
    /// Its ephemeral public key, the key of `Server::recent`.
    ephemeral: [u8; 32],
    initiation: [u8; MAX_INITIATION_LEN],
    initiation_len: usize,
    response: [u8; MAX_RESPONSE_LEN],
    response_len: usize,
    at: Instant,
}

struct ServerSession {
    peer: PublicKey,
    keys: Keyring,
    last_epoch: u8,
    last_received: Instant,
}

/// The server's end of every session (Noise responder).
///
/// # Driving contract
///
/// No clock, no socket, no thread; every call takes `now`, and time only moves forward.
///
/// - Inputs: [`Server::handle`] with every datagram that arrived, its source address and
///   the current [`Load`]: it decrypts in place, or writes a handshake reply for the source
///   address into `reply`; [`Server::seal`] with every datagram an engine wants sent;
///   [`Server::handle_timeout`] at [`Server::poll_timeout`] (early calls are harmless);
///   [`Server::add_peer`] / [`Server::remove_peer`] when the configuration changes.
/// - Outputs: the return value of [`Server::handle`], then [`Server::poll_event`] until
///   `None`, then [`Server::poll_timeout`]. The server sends nothing of its own accord.
///
/// Roaming: a [`Received::Data`] or [`Received::Keepalive`] names the session and path of
/// a datagram that authenticated; the caller then takes the datagram's source address as
/// that path's address (a gateway's uplink that changed address keeps its session). A
/// datagram that did not authenticate returns an error and must move nothing.
///
/// State: one entry per configured gateway (its last handshake timestamp) and at most one
/// session per gateway. Nothing is kept for a sender before its initiation authenticated
/// (under load, not even the Diffie-Hellman work is done before it proved its address).
pub struct Server {
    local: PrivateKey,
    payload: Vec<u8>,
    max_paths: usize,
    idle_timeout: Duration,
    prefix: SessionIdPrefix,
    cookies: CookieChecker,
    rng: Rng,
    last_now: Instant,
    next_sweep: Instant,
    peers: HashMap<PublicKey, Peer>,
    /// Ephemeral key of each peer's last handshake → the peer (at most one per peer).
    recent: HashMap<[u8; 32], PublicKey>,
    sessions: HashMap<u32, ServerSession>,
    events: std::collections::VecDeque<Event>,
    stats: Stats,
}

impl Server {
    pub fn new(config: ServerConfig, now: Instant) -> Result<Server, ConfigError> {
        if config.payload.len() > MAX_HANDSHAKE_PAYLOAD {
            return Err(ConfigError::PayloadTooLong(config.payload.len()));
        }
        if !(1..=255).contains(&config.max_paths) {
            return Err(ConfigError::MaxPaths(config.max_paths));
        }
        let p = config.session_id_prefix;
        if p.bits > 16 || (p.bits < 32 && u64::from(p.value) >= 1u64 << p.bits) {
            return Err(ConfigError::SessionIdPrefix {
                bits: p.bits,
                value: p.value,
            });
        }
        let mac_keys = MacKeys::new(&config.private_key.public_key());
        let mut s = Server {
            rng: Rng::new(&config.seed),
            local: config.private_key,
            payload: config.payload,
            max_paths: config.max_paths,
            idle_timeout: config.idle_timeout,
            prefix: p,
            cookies: CookieChecker::new(mac_keys),
            last_now: now,
            next_sweep: now + SWEEP_INTERVAL,
            peers: HashMap::new(),
            recent: HashMap::new(),
            sessions: HashMap::new(),
            events: Default::default(),
            stats: Stats::default(),
        };
        for k in config.peers {
            s.add_peer(k)?;
        }
        Ok(s)
    }

    /// Allows a gateway's key. A key removed and added again starts with no record of its
    /// last initiation (as in WireGuard), so an initiation of it captured before could be
    /// replayed once; the replay gets no keys (its ephemeral secret is the gateway's).
    pub fn add_peer(&mut self, key: PublicKey) -> Result<(), ConfigError> {
        if self.peers.len() >= MAX_PEERS && !self.peers.contains_key(&key) {
            return Err(ConfigError::TooManyPeers(MAX_PEERS));
        }
        self.peers.entry(key).or_insert(Peer {
            last_timestamp: 0,
            last_initiation: None,
            session: None,
            last: None,
        });
        Ok(())
    }

    /// Disallows a gateway's key and closes its session.
    pub fn remove_peer(&mut self, key: &PublicKey) {
        if let Some(peer) = self.peers.remove(key) {
            if let Some(last) = &peer.last {
                self.recent.remove(&last.ephemeral);
            }
            if let Some(s) = peer.session {
                self.close(s, CloseReason::PeerRemoved);
            }
        }
    }

    /// Counters since start.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Live sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Entries in every table the server keeps: configured peers, the handshakes cached
    /// for them, the index of those, sessions. Tests check it does not grow for strangers.
    #[cfg(test)]
    pub(crate) fn state_size(&self) -> usize {
        let cached = self.peers.values().filter(|p| p.last.is_some()).count();
        self.peers.len() + cached + self.recent.len() + self.sessions.len() + self.events.len()
    }

    /// The gateway key a session belongs to.
    pub fn session_peer(&self, session: SessionId) -> Option<PublicKey> {
        self.sessions.get(&session.get()).map(|s| s.peer)
    }

    /// Handles a datagram from `from`. Data is authenticated and decrypted in place; a
    /// handshake initiation is answered in `reply` ([`Received::Reply`]: send
    /// `reply[..len]` back to `from`). Anything else is dropped, counted, and changes
    /// nothing. [`Server::handle_deferred`] does the same in steps.
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        load: Load,
        buf: &mut [u8],
        reply: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<Received, Dropped> {
        match self.handle_deferred(now, from, load, buf, reply)? {
            Deferred::Done(r) => Ok(r),
            Deferred::Open { key, header } => {
                let opened = key.open(&header, buf);
                self.finish_open(now, opened)
            }
        }
    }

    /// [`Server::handle`] in steps, so that the AEAD of data can run on another thread (as
    /// [`crate::Gateway::handle_deferred`]): handshakes are answered at once; for data the
    /// checks before the AEAD are made and the key given; the AEAD's result goes to
    /// [`Server::finish_open`], in arrival order, on this endpoint's thread.
    pub fn handle_deferred(
        &mut self,
        now: Instant,
        from: SocketAddr,
        load: Load,
        buf: &mut [u8],
        reply: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<Deferred, Dropped> {
        let now = self.advance(now);
        let env = match Envelope::parse(buf) {
            Ok(e) => e,
            Err(e) => return Err(self.stats.drop(e.into())),
        };
        match env {
            Envelope::Data(h) => {
                let Some(session) = self.sessions.get_mut(&h.session) else {
                    return Err(self.stats.drop(Dropped::UnknownSession(h.session)));
                };
                match session.keys.open_check(now, &h) {
                    Ok(k) => Ok(Deferred::Open {
                        key: k.clone(),
                        header: h,
                    }),
                    Err(e) => Err(self.stats.drop(e)),
                }
            }
            Envelope::Initiation(init) => {
                self.stats.initiations += 1;
                self.initiation(now, from, load, &init, reply)
                    .map(Deferred::Done)
                    .map_err(|e| self.stats.drop(e))
            }
            Envelope::Response(_) => Err(self
                .stats
                .drop(Dropped::UnexpectedType(MessageType::Response))),
            Envelope::CookieReply(_) => Err(self
                .stats
                .drop(Dropped::UnexpectedType(MessageType::CookieReply))),
        }
    }

    /// The end of [`Server::handle_deferred`] for data: commits the replay window (or
    /// counts the drop) and says what the datagram was.
    pub fn finish_open(
        &mut self,
        now: Instant,
        opened: Result<Authenticated, Dropped>,
    ) -> Result<Received, Dropped> {
        let now = self.advance(now);
        let opened = opened.map_err(|e| self.stats.drop(e))?;
        let h = opened.header;
        let Some(session) = self.sessions.get_mut(&h.session) else {
            return Err(self.stats.drop(Dropped::UnknownSession(h.session)));
        };
        if let Err(e) = session.keys.open_commit(now, &h) {
            return Err(self.stats.drop(e));
        }
        session.last_received = now;
        // `h.session` is non-zero: sessions are stored under their non-zero id.
        let id = SessionId::new(h.session).ok_or(Dropped::UnknownSession(0))?;
        let range = opened.payload;
        self.stats.opened += 1;
        self.stats.opened_bytes += range.len() as u64;
        if range.is_empty() {
            self.stats.keepalives_received += 1;
            return Ok(Received::Keepalive {
                session: id,
                path: h.path,
            });
        }
        Ok(Received::Data {
            session: id,
            path: h.path,
            payload: range,
        })
    }

    /// WireGuard §5.4.7's order: mac1 (cheap, no state), then under load mac2 or a cookie
    /// reply (cheap, no state), then the Noise work, then the key, replay and rate checks.
    fn initiation(
        &mut self,
        now: Instant,
        from: SocketAddr,
        load: Load,
        init: &Initiation<'_>,
        reply: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<Received, Dropped> {
        if !self.cookies.keys().verify_mac1(init) {
            return Err(Dropped::BadMac1);
        }
        if load == Load::High && !self.cookies.verify_mac2(now, &mut self.rng, from, init) {
            let out: &mut [u8; COOKIE_REPLY_LEN] = (&mut reply[..COOKIE_REPLY_LEN])
                .try_into()
                .map_err(|_| Dropped::HandshakeFailed)?;
            let len = self
                .cookies
                .write_reply(now, &mut self.rng, from, init, out);
            self.stats.cookie_replies += 1;
            return Ok(Received::Reply { len });
        }
        if let Some(len) = self.copy_of_last(now, init, reply) {
            self.stats.duplicate_handshakes += 1;
            return Ok(Received::Reply { len });
        }
        let accepted = accept(&self.local, &mut self.rng, init)?;
        let Ok(remote) = PublicKey::from_bytes(accepted.remote) else {
            return Err(Dropped::UnknownKey);
        };
        let Some(peer) = self.peers.get_mut(&remote) else {
            return Err(Dropped::UnknownKey);
        };
        if accepted.timestamp <= peer.last_timestamp {
            return Err(Dropped::HandshakeReplay);
        }
        if peer
            .last_initiation
            .is_some_and(|t| now.saturating_duration_since(t) < MIN_INITIATION_INTERVAL)
        {
            return Err(Dropped::RateLimited);
        }
        peer.last_timestamp = accepted.timestamp;
        peer.last_initiation = Some(now);
        let previous = peer.session;

        // A rekey names the session it renews; anything else opens a new session, which
        // replaces the gateway's old one.
        let rekey = SessionId::new(init.session()).filter(|id| {
            self.sessions
                .get(&id.get())
                .is_some_and(|s| s.peer == remote)
        });
        let (id, epoch) = match rekey {
            Some(id) => {
                let s = self
                    .sessions
                    .get(&id.get())
                    .ok_or(Dropped::HandshakeFailed)?;
                // A repeated handshake replaces keys the gateway never used, under their
                // epoch; otherwise the epoch moves on.
                let epoch = if s.keys.next.is_some() {
                    s.last_epoch
                } else {
                    s.last_epoch.wrapping_add(1)
                };
                (id, epoch)
            }
            None => (self.new_session_id(), 0),
        };
        let gateway_payload = accepted.payload.as_bytes().to_vec();
        let (len, keypair) = accepted.respond(
            epoch,
            id.get(),
            init.sender(),
            &self.payload,
            now,
            self.max_paths,
            reply,
        )?;
        if rekey.is_none() {
            if let Some(old) = previous {
                self.close(old, CloseReason::Replaced);
            }
            self.sessions.insert(
                id.get(),
                ServerSession {
                    peer: remote,
                    keys: Keyring::default(),
                    last_epoch: 0,
                    last_received: now,
                },
            );
            if let Some(peer) = self.peers.get_mut(&remote) {
                peer.session = Some(id);
            }
            self.push_event(Event::Established {
                session: id,
                peer: remote,
                payload: gateway_payload,
            });
        } else {
            self.push_event(Event::Rekeyed { session: id, epoch });
        }
        if let Some(s) = self.sessions.get_mut(&id.get()) {
            s.keys.install_next(keypair);
            s.last_epoch = epoch;
            s.last_received = now;
        }
        self.remember(now, remote, init, &reply[..len]);
        self.stats.handshakes += 1;
        Ok(Received::Reply { len })
    }

    /// If `init` is a copy of a peer's last initiation (within [`REKEY_TIMEOUT`]), writes
    /// the response again into `reply` and returns its length.
    fn copy_of_last(
        &self,
        now: Instant,
        init: &Initiation<'_>,
        reply: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Option<usize> {
        let ephemeral: &[u8; 32] = init.noise().get(..32)?.try_into().ok()?;
        let last = self.peers.get(self.recent.get(ephemeral)?)?.last.as_ref()?;
        let copy = init.mac1_input() == &last.initiation[..last.initiation_len]
            && now.saturating_duration_since(last.at) < REKEY_TIMEOUT;
        if !copy {
            return None;
        }
        reply
            .get_mut(..last.response_len)?
            .copy_from_slice(&last.response[..last.response_len]);
        Some(last.response_len)
    }

    /// Keeps `remote`'s handshake to answer its copies.
    fn remember(
        &mut self,
        now: Instant,
        remote: PublicKey,
        init: &Initiation<'_>,
        response: &[u8],
    ) {
        let (Some(peer), Some(ephemeral)) = (
            self.peers.get_mut(&remote),
            init.noise()
                .get(..32)
                .and_then(|e| <[u8; 32]>::try_from(e).ok()),
        ) else {
            return;
        };
        let last = peer.last.get_or_insert_with(|| {
            Box::new(LastHandshake {
                ephemeral,
                initiation: [0; MAX_INITIATION_LEN],
                initiation_len: 0,
                response: [0; MAX_RESPONSE_LEN],
                response_len: 0,
                at: now,
            })
        });
        self.recent.remove(&last.ephemeral);
        let m = init.mac1_input();
        last.ephemeral = ephemeral;
        last.initiation[..m.len()].copy_from_slice(m);
        last.initiation_len = m.len();
        last.response[..response.len()].copy_from_slice(response);
        last.response_len = response.len();
        last.at = now;
        self.recent.insert(ephemeral, remote);
    }

    /// Encrypts the datagram at `buf[DATA_HEADER_LEN..DATA_HEADER_LEN + len]` in place for
    /// `path` of `session`; returns the length of the datagram to send, `buf[..n]`.
    pub fn seal(
        &mut self,
        now: Instant,
        session: SessionId,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<usize, SealError> {
        let (n, key) = self.seal_deferred(now, session, path, buf, len)?;
        key.seal(&mut buf[..n])?;
        Ok(n)
    }

    /// [`Server::seal`] in two steps, as [`crate::Gateway::seal_deferred`].
    pub fn seal_deferred(
        &mut self,
        now: Instant,
        session: SessionId,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<(usize, SealKey), SealError> {
        let now = self.advance(now);
        let result = match self.sessions.get_mut(&session.get()) {
            Some(s) => s
                .keys
                .seal_deferred(now, session.get(), path, buf, len)
                .map(|(n, k)| (n, k.clone())),
            None => Err(SealError::UnknownSession(session.get())),
        };
        match result {
            Ok(_) => {
                self.stats.sealed += 1;
                self.stats.sealed_bytes += len as u64;
            }
            Err(_) => self.stats.seal_refused += 1,
        }
        result
    }

    /// The next instant [`Server::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (!self.sessions.is_empty()).then_some(self.next_sweep)
    }

    /// Expires old keys and closes idle sessions.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + SWEEP_INTERVAL;
        let idle = self.idle_timeout;
        let mut closing = Vec::new();
        for (&id, s) in &mut self.sessions {
            s.keys.expire(now);
            if now.saturating_duration_since(s.last_received) >= idle {
                closing.push(id);
            }
        }
        for id in closing {
            if let Some(id) = SessionId::new(id) {
                self.close(id, CloseReason::Idle);
            }
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn close(&mut self, id: SessionId, reason: CloseReason) {
        if let Some(s) = self.sessions.remove(&id.get()) {
            if let Some(p) = self.peers.get_mut(&s.peer) {
                if p.session == Some(id) {
                    p.session = None;
                }
            }
            self.stats.sessions_closed += 1;
            self.push_event(Event::Closed {
                session: id,
                reason,
            });
        }
    }

    /// A fresh session id under the configured prefix: random, then, should random picks
    /// keep colliding, the first free one (there are at least 2^16 ids and at most 2^15
    /// sessions, so one is free).
    fn new_session_id(&mut self) -> SessionId {
        let free_bits = 32 - u32::from(self.prefix.bits);
        let mask = if free_bits == 32 {
            u32::MAX
        } else {
            (1u32 << free_bits) - 1
        };
        let high = if free_bits == 32 {
            0
        } else {
            self.prefix.value << free_bits
        };
        let free = |s: &Self, id: u32| id != 0 && !s.sessions.contains_key(&id);
        for _ in 0..64 {
            let id = high | (self.rng.u32() & mask);
            if free(self, id) {
                if let Some(id) = SessionId::new(id) {
                    return id;
                }
            }
        }
        (0..=mask)
            .map(|low| high | low)
            .find(|&id| free(self, id))
            .and_then(SessionId::new)
            .unwrap_or(SessionId::MAX)
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.stats.events_dropped += 1;
            return;
        }
        self.events.push_back(e);
    }

    fn advance(&mut self, now: Instant) -> Instant {
        self.last_now = self.last_now.max(now);
        self.last_now
    }
}
