//! The gateway's end: the Noise initiator. It opens a session with the server, rekeys it
//! before its keys get old, and seals and opens the session's datagrams.

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::{Instant, PathId};

use crate::cookie::{mac2, MacKeys};
use crate::envelope::{Envelope, COOKIE_LEN, DATA_OVERHEAD, MAC_LEN, MAX_HANDSHAKE_PAYLOAD};
use crate::handshake::{initiate, PendingInitiation};
use crate::keypair::{Authenticated, SealKey};
use crate::keyring::Keyring;
use crate::keys::{PrivateKey, PublicKey};
use crate::limits::{
    COOKIE_LIFETIME, REKEY_AFTER_MESSAGES, REKEY_AFTER_TIME, REKEY_JITTER, REKEY_TIMEOUT,
    TIMESTAMP_GRANULARITY_NS,
};
use crate::rng::{Rng, Seed};
use crate::{
    CloseReason, ConfigError, Deferred, Dropped, Event, Received, SealError, SessionId, Stats,
    Transmit, MAX_EVENTS,
};

/// How a gateway is set up.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The gateway's static key (`braid genkey`).
    pub private_key: PrivateKey,
    /// The server's static public key.
    pub server_public_key: PublicKey,
    /// Sent encrypted in every initiation, at most [`MAX_HANDSHAKE_PAYLOAD`] bytes: the
    /// gateway's name and version, say. The server hands it to its caller.
    pub payload: Vec<u8>,
    /// The wall-clock time (since the UNIX epoch) at the `now` given to [`Gateway::new`].
    /// Initiation timestamps count on from it; the server ignores an initiation that is not
    /// newer than the last it accepted from this key, so a restarted gateway must start
    /// later than it last did (the daemon reads the system clock once, at start).
    pub unix_time: Duration,
    /// Most paths the session uses (1 to 255); each path costs a few hundred bytes of
    /// counters and replay window per key.
    pub max_paths: usize,
    /// The random stream's seed: [`Seed::from_os`] in the daemon.
    pub seed: Seed,
}

impl GatewayConfig {
    /// A configuration with the defaults: no payload, 16 paths.
    pub fn new(
        private_key: PrivateKey,
        server_public_key: PublicKey,
        unix_time: Duration,
        seed: Seed,
    ) -> GatewayConfig {
        GatewayConfig {
            private_key,
            server_public_key,
            payload: Vec::new(),
            unix_time,
            max_paths: crate::DEFAULT_MAX_PATHS,
            seed,
        }
    }
}

/// The gateway's end of a session (Noise initiator).
///
/// # Driving contract
///
/// Like the engine's `Session` (quinn-proto style): no clock, no socket, no thread. Every
/// call takes `now`, and time only moves forward.
///
/// - Inputs: [`Gateway::handle`] with every datagram that arrived on an uplink, decrypted in
///   place; [`Gateway::seal`] with every datagram the engine wants sent, encrypted in place;
///   [`Gateway::handle_timeout`] when [`Gateway::poll_timeout`]'s instant is reached (early
///   calls are harmless); [`Gateway::add_path`] / [`Gateway::remove_path`] as uplinks come
///   and go.
/// - Outputs, after any input: [`Gateway::poll_transmit`] until `None` (handshake
///   initiations and keepalives, each for one path), [`Gateway::poll_event`] until `None`,
///   then [`Gateway::poll_timeout`].
///
/// The gateway initiates as soon as it is created, and again (on every path) every
/// [`REKEY_TIMEOUT`] until the server answers; it rekeys when its keys are
/// [`REKEY_AFTER_TIME`] old. Until a session is up, [`Gateway::seal`] refuses with
/// [`SealError::NotConnected`].
///
/// Buffers belong to the caller. [`Gateway::seal`] takes the plaintext at
/// `buf[DATA_HEADER_LEN..DATA_HEADER_LEN + len]` and needs [`DATA_OVERHEAD`] bytes of room
/// around it; [`Gateway::handle`] leaves the plaintext at `buf[range]`. Nothing is allocated
/// per datagram.
pub struct Gateway {
    local: PrivateKey,
    server: PublicKey,
    payload: Vec<u8>,
    unix_time: Duration,
    max_paths: usize,
    mac_keys: MacKeys,
    rng: Rng,
    started: Instant,
    last_now: Instant,
    /// Timestamp of the last initiation, so the next is strictly newer.
    last_timestamp: u64,
    paths: Vec<PathId>,
    session: Option<SessionId>,
    keys: Keyring,
    pending: Option<PendingInitiation>,
    /// Sender index of the last completed handshake: its response's copies are ignored.
    completed: Option<u32>,
    /// When to start the next handshake: a retry while one is pending, the rekey time
    /// otherwise.
    handshake_at: Instant,
    /// Immediate resend of the pending initiation after a cookie reply: done once.
    cookie_resent: bool,
    /// Per path: the latest cookie and when it arrived.
    cookies: Vec<(PathId, [u8; COOKIE_LEN], Instant)>,
    /// Paths still to get the pending initiation.
    tx_initiation: Vec<PathId>,
    /// Paths still to get a keepalive under new keys (key confirmation).
    tx_keepalive: Vec<PathId>,
    events: VecDeque<Event>,
    stats: Stats,
}

impl Gateway {
    /// A gateway over `paths` at `now`; its first initiation is queued at once.
    pub fn new(
        config: GatewayConfig,
        paths: &[PathId],
        now: Instant,
    ) -> Result<Gateway, ConfigError> {
        if config.payload.len() > MAX_HANDSHAKE_PAYLOAD {
            return Err(ConfigError::PayloadTooLong(config.payload.len()));
        }
        if !(1..=255).contains(&config.max_paths) {
            return Err(ConfigError::MaxPaths(config.max_paths));
        }
        let mut g = Gateway {
            mac_keys: MacKeys::new(&config.server_public_key),
            rng: Rng::new(&config.seed),
            local: config.private_key,
            server: config.server_public_key,
            payload: config.payload,
            unix_time: config.unix_time,
            max_paths: config.max_paths,
            started: now,
            last_now: now,
            last_timestamp: 0,
            paths: Vec::new(),
            session: None,
            keys: Keyring::default(),
            pending: None,
            completed: None,
            handshake_at: now,
            cookie_resent: false,
            cookies: Vec::new(),
            tx_initiation: Vec::new(),
            tx_keepalive: Vec::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        };
        for &p in paths {
            g.add_path(p)?;
        }
        g.start_handshake(now);
        Ok(g)
    }

    /// Adds an uplink: handshakes go out on it from now on (the pending one too).
    pub fn add_path(&mut self, path: PathId) -> Result<(), ConfigError> {
        if self.paths.contains(&path) {
            return Ok(());
        }
        if self.paths.len() >= self.max_paths {
            return Err(ConfigError::TooManyPaths(self.max_paths));
        }
        self.paths.push(path);
        if self.pending.is_some() {
            self.tx_initiation.push(path);
        }
        Ok(())
    }

    /// Removes an uplink. Its keys' counters stay, so a path that comes back continues them.
    pub fn remove_path(&mut self, path: PathId) {
        self.paths.retain(|&p| p != path);
        self.tx_initiation.retain(|&p| p != path);
        self.tx_keepalive.retain(|&p| p != path);
    }

    /// The established session, if any.
    pub fn session(&self) -> Option<SessionId> {
        self.session
    }

    /// Whether the gateway has keys to seal with at `now`.
    pub fn is_connected(&self, now: Instant) -> bool {
        self.session.is_some() && self.keys.current.as_ref().is_some_and(|k| !k.expired(now))
    }

    /// Counters since start.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Encrypts the datagram at `buf[DATA_HEADER_LEN..DATA_HEADER_LEN + len]` in place for
    /// `path`; returns the length of the datagram to send, `buf[..n]`.
    pub fn seal(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<usize, SealError> {
        let (n, key) = self.seal_deferred(now, path, buf, len)?;
        key.seal(&mut buf[..n])?;
        Ok(n)
    }

    /// [`Gateway::seal`] in two steps: this one takes the path's counter and writes the
    /// header, in the order datagrams are sent; the returned key then encrypts `buf[..n]`,
    /// on any thread, before it is sent.
    pub fn seal_deferred(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<(usize, SealKey), SealError> {
        let now = self.advance(now);
        let Some(session) = self.session else {
            self.stats.seal_refused += 1;
            return Err(SealError::NotConnected);
        };
        match self.keys.seal_deferred(now, session.get(), path, buf, len) {
            Ok((n, key)) => {
                self.stats.sealed += 1;
                self.stats.sealed_bytes += len as u64;
                Ok((n, key.clone()))
            }
            Err(e) => {
                self.stats.seal_refused += 1;
                Err(e)
            }
        }
    }

    /// Authenticates and decrypts a datagram that arrived on uplink `path`, in place.
    /// Anything that does not authenticate is dropped (and counted) and changes nothing.
    pub fn handle(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut [u8],
    ) -> Result<Received, Dropped> {
        match self.handle_deferred(now, path, buf)? {
            Deferred::Done(r) => Ok(r),
            Deferred::Open { key, header } => {
                let opened = key.open(&header, buf);
                self.finish_open(now, opened)
            }
        }
    }

    /// [`Gateway::handle`] in steps, so that the AEAD of data can run on another thread:
    /// handshake messages are handled at once ([`Deferred::Done`]); for data the checks
    /// before the AEAD are made and [`Deferred::Open`] gives the key, whose
    /// [`crate::OpenKey::open`] result goes to [`Gateway::finish_open`] (in the order
    /// datagrams arrived, on this endpoint's thread).
    pub fn handle_deferred(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut [u8],
    ) -> Result<Deferred, Dropped> {
        let now = self.advance(now);
        let env = match Envelope::parse(buf) {
            Ok(e) => e,
            Err(e) => return Err(self.stats.drop(e.into())),
        };
        if let Envelope::Data(h) = env {
            if self.session.is_none_or(|s| s.get() != h.session) {
                return Err(self.stats.drop(Dropped::UnknownSession(h.session)));
            }
            let key = match self.keys.open_check(now, &h) {
                Ok(k) => k.clone(),
                Err(e) => return Err(self.stats.drop(e)),
            };
            return Ok(Deferred::Open { key, header: h });
        }
        self.handle_handshake(now, path, env).map(Deferred::Done)
    }

    /// The end of [`Gateway::handle_deferred`] for data: commits the replay window (or
    /// counts the drop) and says what the datagram was.
    pub fn finish_open(
        &mut self,
        now: Instant,
        opened: Result<Authenticated, Dropped>,
    ) -> Result<Received, Dropped> {
        let now = self.advance(now);
        let opened = opened.map_err(|e| self.stats.drop(e))?;
        let h = opened.header;
        let Some(session) = self.session.filter(|s| s.get() == h.session) else {
            return Err(self.stats.drop(Dropped::UnknownSession(h.session)));
        };
        if let Err(e) = self.keys.open_commit(now, &h) {
            return Err(self.stats.drop(e));
        }
        let range = opened.payload;
        self.stats.opened += 1;
        self.stats.opened_bytes += range.len() as u64;
        if range.is_empty() {
            self.stats.keepalives_received += 1;
            return Ok(Received::Keepalive {
                session,
                path: h.path,
            });
        }
        Ok(Received::Data {
            session,
            path: h.path,
            payload: range,
        })
    }

    /// Handshake messages (responses, cookie replies).
    fn handle_handshake(
        &mut self,
        now: Instant,
        path: PathId,
        env: Envelope<'_>,
    ) -> Result<Received, Dropped> {
        match env {
            Envelope::Data(h) => Err(self.stats.drop(Dropped::UnknownSession(h.session))),
            Envelope::Response(r) => {
                if self.completed == Some(r.receiver()) {
                    self.stats.duplicate_handshakes += 1;
                    return Ok(Received::Handshake);
                }
                let Some(pending) = self.pending.as_mut().filter(|p| p.sender == r.receiver())
                else {
                    return Err(self.stats.drop(Dropped::UnexpectedReply));
                };
                let done = pending
                    .complete(&r, now, self.max_paths)
                    .map_err(|e| self.stats.drop(e))?;
                self.completed = Some(pending.sender);
                self.pending = None;
                self.tx_initiation.clear();
                let Some(id) = SessionId::new(done.session) else {
                    return Err(self.stats.drop(Dropped::HandshakeFailed));
                };
                if self.session == Some(id) {
                    self.push_event(Event::Rekeyed {
                        session: id,
                        epoch: done.keypair.epoch,
                    });
                } else {
                    if let Some(old) = self.session {
                        self.stats.sessions_closed += 1;
                        self.push_event(Event::Closed {
                            session: old,
                            reason: CloseReason::Replaced,
                        });
                    }
                    self.keys = Keyring::default();
                    self.session = Some(id);
                    self.push_event(Event::Established {
                        session: id,
                        peer: self.server,
                        payload: done.payload.as_bytes().to_vec(),
                    });
                }
                self.keys.install_current(done.keypair);
                self.stats.handshakes += 1;
                self.handshake_at = now + REKEY_AFTER_TIME;
                self.tx_keepalive.clear();
                self.tx_keepalive.extend_from_slice(&self.paths);
                Ok(Received::Handshake)
            }
            Envelope::CookieReply(c) => {
                let Some(pending) = self
                    .pending
                    .as_ref()
                    .filter(|p| p.sender == c.receiver() && p.session == c.session())
                else {
                    return Err(self.stats.drop(Dropped::UnexpectedReply));
                };
                let Some(cookie) = self.mac_keys.open_reply(&c, &pending.mac1) else {
                    return Err(self.stats.drop(Dropped::BadCookieReply));
                };
                self.stats.cookie_replies += 1;
                self.cookies.retain(|&(p, _, _)| p != path);
                self.cookies.push((path, cookie, now));
                // The server kept nothing of the initiation: send it again at once with
                // the proof, once per handshake (a server that keeps answering with cookies
                // is retried at the usual pace).
                if !self.cookie_resent && !self.tx_initiation.contains(&path) {
                    self.cookie_resent = true;
                    self.tx_initiation.push(path);
                }
                Ok(Received::Handshake)
            }
            Envelope::Initiation(_) => Err(self.stats.drop(Dropped::UnexpectedType(
                crate::envelope::MessageType::Initiation,
            ))),
        }
    }

    /// The next handshake message or keepalive to send, written into `buf` (at least
    /// [`crate::MAX_HANDSHAKE_LEN`] bytes; a smaller buffer gets `None` and the message stays
    /// queued).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let now = self.advance(now);
        if let Some(pending) = &self.pending {
            if let Some(&path) = self.tx_initiation.last() {
                let out = buf.get_mut(..pending.len)?;
                self.tx_initiation.pop();
                out.copy_from_slice(&pending.message[..pending.len]);
                let mac2_at = pending.len - MAC_LEN;
                let cookie = self.cookies.iter().find(|&&(p, _, at)| {
                    p == path && now.saturating_duration_since(at) < COOKIE_LIFETIME
                });
                if let Some((_, cookie, _)) = cookie {
                    let m = mac2(cookie, &out[..mac2_at]);
                    out[mac2_at..].copy_from_slice(&m);
                }
                self.stats.initiations += 1;
                return Some(Transmit {
                    path,
                    len: pending.len,
                });
            }
        }
        while let Some(&path) = self.tx_keepalive.last() {
            let session = self.session?;
            let out = buf.get_mut(..DATA_OVERHEAD)?;
            self.tx_keepalive.pop();
            if let Ok(len) = self.keys.seal(now, session.get(), path, out, 0) {
                self.stats.sealed += 1;
                return Some(Transmit { path, len });
            }
        }
        None
    }

    /// The next instant [`Gateway::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let rekey_by_messages = self
            .keys
            .current
            .as_ref()
            .is_some_and(|k| k.sent >= REKEY_AFTER_MESSAGES);
        let handshake = if self.pending.is_none() && rekey_by_messages {
            self.last_now
        } else {
            self.handshake_at
        };
        Some(match self.keys.next_expiry() {
            Some(t) => t.min(handshake),
            None => handshake,
        })
    }

    /// Runs the timers due at `now`: expiring keys, retrying or starting handshakes.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        self.keys.expire(now);
        self.cookies
            .retain(|&(_, _, at)| now.saturating_duration_since(at) < COOKIE_LIFETIME);
        let rekey_by_messages = self
            .keys
            .current
            .as_ref()
            .is_some_and(|k| k.sent >= REKEY_AFTER_MESSAGES);
        if now >= self.handshake_at || (self.pending.is_none() && rekey_by_messages) {
            self.start_handshake(now);
        }
    }

    /// Starts a new handshake now unless one is under way: the daemon calls this when
    /// nothing authenticated arrived from the server for a while although the session is up
    /// (WireGuard §6.2 starts one after `KEEPALIVE_TIMEOUT + REKEY_TIMEOUT` without an
    /// answer; braid's engine hears from the server every heartbeat, so its daemon can ask
    /// sooner). A server that restarted and forgot the session answers with a new one
    /// ([`Event::Closed`] with [`CloseReason::Replaced`], then [`Event::Established`]).
    /// Whether a handshake started.
    pub fn rehandshake(&mut self, now: Instant) -> bool {
        let now = self.advance(now);
        if self.pending.is_some() {
            return false;
        }
        self.start_handshake(now);
        self.pending.is_some()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn start_handshake(&mut self, now: Instant) {
        let wall = self.unix_time + now.saturating_duration_since(self.started);
        let ts = wall.as_nanos().min(u64::MAX as u128) as u64 & !(TIMESTAMP_GRANULARITY_NS - 1);
        let ts = ts.max(self.last_timestamp + TIMESTAMP_GRANULARITY_NS);
        self.last_timestamp = ts;
        let session = self.session.map_or(0, SessionId::get);
        let retry = REKEY_TIMEOUT + self.rng.jitter(REKEY_JITTER);
        self.handshake_at = now + retry;
        match initiate(
            &self.local,
            &self.server,
            &self.mac_keys,
            &mut self.rng,
            session,
            ts,
            &self.payload,
        ) {
            Ok(p) => {
                self.pending = Some(p);
                self.cookie_resent = false;
                self.tx_initiation.clear();
                self.tx_initiation.extend(self.paths.iter().rev());
            }
            // snow fails here only on a payload too long, which the config refused.
            Err(_) => self.pending = None,
        }
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

    /// Moves the current keys' send counter on `path`, so tests reach the message limits.
    #[cfg(test)]
    pub(crate) fn set_send_counter(&mut self, path: PathId, counter: u64, sent: u64) {
        if let Some(k) = self.keys.current.as_mut() {
            k.set_send_counter(path, counter);
            k.sent = sent;
        }
    }
}
