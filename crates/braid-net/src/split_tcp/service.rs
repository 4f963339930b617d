//! The split-TCP event loops, one thread beside each daemon's: at the gateway the
//! redirect listener, the relayed connections and one UDP socket per uplink; at the server
//! one UDP socket, a session per gateway and the connections to the destinations.
//!
//! The channel is keyed like the tunnel: each loop runs its own braid-secure endpoint
//! (Noise IK with the daemons' static keys, ChaCha20-Poly1305 per datagram, per-path
//! replay windows; docs/security.md) on the split-TCP port, a session of its own beside
//! the tunnel's. Every datagram is a braid-secure datagram; inside its encryption an
//! envelope comes before the stream chunk:
//!
//! ```text
//! magic:u8=0xB7 flags:u8 path:u8 paths:u8 session:u32   chunk (braid_core::stream::chunk), or none
//! ```
//!
//! `session` is the braid-secure session (with `plaintext = true`, a random id per
//! gateway run, and the envelope is all there is; path and session sit where the tunnel's
//! plaintext header has them); `path` the gateway uplink the datagram crossed (the server
//! answers to the address it last heard on that path). A gateway sends NEW until the
//! server has answered; the server starts a session only on an authenticated NEW and
//! answers anything else it does not know with GONE, which makes the gateway reset its
//! connections and start over. A chunk-less datagram is the gateway's keepalive, on every
//! uplink as soon as the session exists and every second after, which the server echoes
//! (until a path's first datagram arrives the server keeps that path's, up to `WAITING`):
//! a gateway that hears nothing for [`SERVER_SILENCE`] handshakes again (the server
//! restarted and forgot the keys).
//! Nothing that fails authentication reaches a session: no connection is opened for it,
//! and it is counted and logged.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use braid_core::stream::split::{acked_wire_bytes, stream_bytes_of_wire};
use braid_core::{Instant, PathId};
use braid_secure::MAX_HANDSHAKE_LEN;
use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Protocol, Socket, Type};

use super::arrivals::{Arrivals, PeerArrivals, Traffic, METER_TICK, WIRE_OVERHEAD};
use super::redirect::{original_destination, Ports};
use super::session::{Conn, Request, Session};
use crate::clock::Clock;
use crate::config::Binding;
use crate::secure::{GatewaySecurity, HandshakeRate, Opened, ServerSecurity};
use crate::status::Drops;

/// Bytes around each of the stream's datagrams on the wire: the envelope, `sealing` bytes
/// of the security layer, UDP and IP.
fn outside(sealing: usize) -> usize {
    WIRE_OVERHEAD as usize + ENVELOPE + sealing
}

/// The stream's own datagram bytes in an allowance of `wire` bytes on the wire.
fn stream_bytes(wire: u64, sealing: usize) -> u64 {
    stream_bytes_of_wire(wire, outside(sealing))
}

const MAGIC: u8 = 0xB7;
pub(crate) const NEW: u8 = 1;
const GONE: u8 = 2;
/// Envelope bytes before the chunk.
pub const ENVELOPE: usize = 8;
/// The loop wakes at least this often (to see the stop flag).
const TICK: Duration = Duration::from_millis(50);
/// Gateway keepalives, per uplink.
const KEEPALIVE: Duration = Duration::from_secs(1);
/// A gateway that hears nothing authenticated from the server this long handshakes again
/// (as the tunnel's gateway does).
pub const SERVER_SILENCE: Duration = Duration::from_secs(5);
/// A server session silent this long is dropped with its connections.
const IDLE: Duration = Duration::from_secs(60);
/// The sessions' state is logged this often at debug level.
const DEBUG_EVERY: Duration = Duration::from_secs(1);
/// Refused datagrams are logged at most this often (a flood makes one line).
const REFUSED_LOG_EVERY: Duration = Duration::from_secs(10);
/// Relayed connections per session at most; more are refused.
const MAX_CONNS: usize = 4096;
/// Datagrams a server session holds per path until the gateway's first datagram on it
/// arrives. A new session learns its paths' addresses one by one (the OPEN may arrive on
/// a 20 ms path, the gateway's first keepalive on a 200 ms one 90 ms later); datagrams
/// dropped meanwhile cost the stream an RTO and the path's window (lab-split-tcp,
/// docs/benchmarks.md). The initial window is 4 chunks, so this never fills on a live
/// path.
const WAITING: usize = 64;
/// UDP socket buffers: a window of the fastest lab path's bursts.
const UDP_BUFFER: usize = 4 << 20;

const LISTENER: Token = Token(0);
const LISTENER6: Token = Token(1);
const UDP0: usize = 2;
const CONN0: usize = 64;

/// The envelope before a stream chunk (also `braid send`'s stream mode, crate::stream_file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub flags: u8,
    pub path: PathId,
    pub paths: u8,
    pub session: u32,
}

impl Envelope {
    pub(crate) fn parse(b: &[u8]) -> Option<(Envelope, &[u8])> {
        if b.len() < ENVELOPE || b[0] != MAGIC {
            return None;
        }
        let e = Envelope {
            flags: b[1],
            path: b[2],
            paths: b[3],
            session: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        };
        (e.paths > 0 && e.path < e.paths).then_some((e, &b[ENVELOPE..]))
    }

    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[MAGIC, self.flags, self.path, self.paths]);
        out.extend_from_slice(&self.session.to_be_bytes());
    }
}

/// `out` becomes the envelope and `chunk` at `headroom`, with `overhead` bytes of room in
/// all for the security layer; the plaintext's length.
fn pack(out: &mut Vec<u8>, headroom: usize, overhead: usize, e: &Envelope, chunk: &[u8]) -> usize {
    out.clear();
    out.resize(headroom, 0);
    e.emit(out);
    out.extend_from_slice(chunk);
    let len = out.len() - headroom;
    out.resize(out.len() + overhead - headroom, 0);
    len
}

/// Datagrams the security layer refused, and datagrams not sent (`send_errors`: no keys to
/// seal with, no address for the path, a socket error), logged when they grow (at most
/// every [`REFUSED_LOG_EVERY`]).
#[derive(Debug, Default)]
struct Refused {
    drops: Drops,
    logged: u64,
    next_log: Option<Instant>,
}

impl Refused {
    fn count(&mut self, e: &braid_secure::Dropped) {
        crate::secure::count(&mut self.drops, e);
    }

    fn total(&self) -> u64 {
        let d = &self.drops;
        d.unauthenticated
            + d.replayed
            + d.unknown_session
            + d.unknown_key
            + d.engine_rejected
            + d.send_errors
    }

    fn log(&mut self, now: Instant) {
        let total = self.total();
        if total == self.logged || self.next_log.is_some_and(|t| now < t) {
            return;
        }
        self.logged = total;
        self.next_log = Some(now + REFUSED_LOG_EVERY);
        let d = &self.drops;
        tracing::warn!(
            total,
            unauthenticated = d.unauthenticated,
            unknown_key = d.unknown_key,
            unknown_session = d.unknown_session,
            replayed = d.replayed,
            rejected = d.engine_rejected,
            not_sent = d.send_errors,
            "split-TCP: datagrams refused (no connection is opened for them) or not sent"
        );
    }
}

pub(crate) fn udp_socket(bind: SocketAddr, device: Option<&str>) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))?;
    if let Some(d) = device {
        s.bind_device(Some(d.as_bytes()))?;
    }
    let _ = s.set_send_buffer_size(UDP_BUFFER);
    let _ = s.set_recv_buffer_size(UDP_BUFFER);
    s.set_nonblocking(true)?;
    s.bind(&bind.into())?;
    Ok(UdpSocket::from_std(s.into()))
}

/// The IPv6 listener on an ephemeral port, IPv6 only (IPv4 has its own listener).
fn listener_v6() -> std::io::Result<TcpListener> {
    let s = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    s.set_only_v6(true)?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)).into())?;
    s.listen(1024)?;
    Ok(TcpListener::from_std(s.into()))
}

/// Reads every waiting datagram of `sock`, calling `f(from, bytes)`.
fn drain(sock: &UdpSocket, buf: &mut [u8], mut f: impl FnMut(SocketAddr, &mut [u8])) {
    loop {
        match sock.recv_from(buf) {
            Ok((n, from)) => f(from, &mut buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The gateway's loop.
pub struct GatewayLoop {
    poll: Poll,
    clock: Clock,
    listener: TcpListener,
    /// The IPv6 listener (IPv6-only), when the host has IPv6.
    listener6: Option<TcpListener>,
    bindings: Vec<Binding>,
    sockets: Vec<Option<UdpSocket>>,
    server: SocketAddr,
    sec: GatewaySecurity,
    /// The session in envelopes: the braid-secure session (0 until the handshake is
    /// done), or a random id without encryption.
    id: u32,
    confirmed: bool,
    session: Session,
    next_conn: u32,
    next_token: usize,
    tokens: HashMap<Token, u32>,
    /// Datagrams refused on receipt, and those not sent (no keys, socket error).
    refused: Refused,
    /// When something from the server last authenticated.
    last_rx: Instant,
    next_rehandshake: Instant,
    /// When the keepalives go out next on every uplink; `now` as soon as the session has
    /// an id, so the server learns every uplink's address before the stream needs it.
    next_keepalive: Instant,
    /// Bytes received per uplink, for the packet tunnel's capacity estimates.
    arrivals: Option<Arrivals>,
}

impl GatewayLoop {
    /// The listener on an ephemeral port of every address (the redirect's target) and one
    /// socket per uplink towards `server` (the server's split-TCP port), keyed by `sec`.
    pub fn new(
        bindings: Vec<Binding>,
        server: SocketAddr,
        sec: GatewaySecurity,
    ) -> std::io::Result<GatewayLoop> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let mut listener6 = listener_v6().ok();
        if let Some(l) = listener6.as_mut() {
            poll.registry().register(l, LISTENER6, Interest::READABLE)?;
        }
        let clock = Clock::start();
        let now = clock.now();
        let n = bindings.len();
        let id = match sec {
            GatewaySecurity::Plaintext => random_id(),
            GatewaySecurity::Noise(_) => 0,
        };
        let mut g = GatewayLoop {
            poll,
            clock,
            listener,
            listener6,
            sockets: (0..n).map(|_| None).collect(),
            bindings,
            server,
            sec,
            id,
            confirmed: false,
            session: Session::new(n, now),
            next_conn: 1,
            next_token: CONN0,
            tokens: HashMap::new(),
            refused: Refused::default(),
            last_rx: now,
            next_rehandshake: now,
            next_keepalive: now,
            arrivals: None,
        };
        g.bind_uplinks();
        Ok(g)
    }

    /// Counts the bytes received per uplink into `a` ([`super::arrivals`]).
    pub fn with_arrivals(mut self, a: Arrivals) -> GatewayLoop {
        self.arrivals = Some(a);
        self
    }

    /// The redirect's target ports.
    pub fn ports(&self) -> std::io::Result<Ports> {
        Ok(Ports {
            v4: self.listener.local_addr()?.port(),
            v6: match &self.listener6 {
                Some(l) => Some(l.local_addr()?.port()),
                None => None,
            },
        })
    }

    fn bind_uplinks(&mut self) {
        let any: IpAddr = Ipv4Addr::UNSPECIFIED.into();
        for (i, b) in self.bindings.iter().enumerate() {
            if self.sockets[i].is_some() {
                continue;
            }
            let r = match b {
                Binding::Interface(d) => udp_socket(SocketAddr::new(any, 0), Some(d)),
                Binding::Address(a) => udp_socket(SocketAddr::new(*a, 0), None),
            };
            let Ok(mut s) = r else { continue };
            if self
                .poll
                .registry()
                .register(&mut s, Token(UDP0 + i), Interest::READABLE)
                .is_ok()
            {
                self.sockets[i] = Some(s);
            }
        }
    }

    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(256);
        let mut buf = vec![0u8; 65_536];
        let mut out = Vec::with_capacity(2048);
        let mut dgram = Vec::with_capacity(2048);
        let mut requests = Vec::new();
        let mut closed = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let now = self.clock.now();
            let wake = self
                .session
                .poll_timeout()
                .unwrap_or(Instant::MAX)
                .min(self.next_keepalive)
                .min(self.sec.timeout());
            // A held uplink is looked at again soon: its hold lifts with the next interval.
            let tick = if self.session.any_held() {
                METER_TICK
            } else {
                TICK
            };
            let timeout = wake.saturating_duration_since(now).min(tick);
            if self.poll.poll(&mut events, Some(timeout)).is_err() {
                continue;
            }
            let now = self.clock.now();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(false),
                    LISTENER6 => self.accept(true),
                    Token(t) if (UDP0..CONN0).contains(&t) => self.receive(now, t - UDP0, &mut buf),
                    t => {
                        if let Some(c) = self
                            .tokens
                            .get(&t)
                            .and_then(|id| self.session.conns.get_mut(id))
                        {
                            c.readable |= ev.is_readable() || ev.is_read_closed() || ev.is_error();
                            c.writable |= ev.is_writable() || ev.is_write_closed() || ev.is_error();
                        }
                    }
                }
            }
            if let GatewaySecurity::Noise(g) = &mut self.sec {
                g.handle_timeout(now);
            }
            self.rehandshake_if_silent(now);
            self.security_events(now);
            self.session.handle_timeout(now);
            requests.clear();
            if let Err(e) = self.session.read_frames(&mut requests, &mut closed) {
                tracing::warn!(error = %e, "split-TCP: broken frames from the server");
                self.restart(now, "broken frames", self.id);
            }
            self.session.relay(&mut closed);
            for t in closed.drain(..) {
                self.tokens.remove(&t);
            }
            // Keepalives before the stream's datagrams: the first ones announce every
            // uplink to the server.
            if now >= self.next_keepalive {
                self.next_keepalive = now + KEEPALIVE;
                self.bind_uplinks();
                self.refused.log(now);
                tracing::debug!(state = %self.session.describe(), "split-TCP");
                if self.id != 0 {
                    for i in 0..self.sockets.len() {
                        self.send_sealed(now, i as PathId, &[], &mut dgram);
                    }
                }
            }
            self.transmit(now, &mut out, &mut dgram);
        }
        tracing::info!(stats = ?self.session.stats, drops = ?self.refused.drops, "split-TCP stopped");
    }

    /// Every datagram waiting on uplink `i`'s socket.
    fn receive(&mut self, now: Instant, i: usize, buf: &mut [u8]) {
        let Some(sock) = self.sockets.get(i).and_then(Option::as_ref) else {
            return;
        };
        let (id, session, confirmed, sec, refused, last_rx, arrivals) = (
            self.id,
            &mut self.session,
            &mut self.confirmed,
            &mut self.sec,
            &mut self.refused,
            &mut self.last_rx,
            &self.arrivals,
        );
        let mut gone = false;
        drain(sock, buf, |_, d| {
            if let Some(a) = arrivals {
                a.add(i, d.len());
            }
            let range = match sec.open(now, i as PathId, d) {
                Ok(Opened::Data { range, .. }) => range,
                Ok(Opened::Keepalive { .. }) => {
                    *last_rx = now;
                    return;
                }
                Ok(Opened::Handshake | Opened::Reply(_)) => return,
                Err(e) => {
                    refused.count(&e);
                    return;
                }
            };
            let Some((e, chunk)) = Envelope::parse(&d[range]) else {
                refused.drops.engine_rejected += 1;
                return;
            };
            if id == 0 || e.session != id {
                return;
            }
            *last_rx = now;
            if e.flags & GONE != 0 {
                gone = true;
                return;
            }
            *confirmed = true;
            if !chunk.is_empty() {
                session.handle_chunk(now, i as PathId, chunk);
            }
        });
        if gone {
            self.restart(now, "the server forgot this session (restarted)", self.id);
        }
    }

    /// A new handshake after [`SERVER_SILENCE`] without anything from the server.
    fn rehandshake_if_silent(&mut self, now: Instant) {
        let GatewaySecurity::Noise(g) = &mut self.sec else {
            return;
        };
        let silent = now.saturating_duration_since(self.last_rx);
        if self.id == 0 || silent < SERVER_SILENCE || now < self.next_rehandshake {
            return;
        }
        self.next_rehandshake = now + SERVER_SILENCE;
        if g.rehandshake(now) {
            tracing::warn!(
                silent_s = silent.as_secs(),
                "split-TCP: nothing heard from the server; handshaking again"
            );
        }
    }

    /// Handshakes done: a new braid-secure session is a new split-TCP session (the
    /// server's relayed connections belonged to the old one).
    fn security_events(&mut self, now: Instant) {
        loop {
            let GatewaySecurity::Noise(g) = &mut self.sec else {
                return;
            };
            let Some(e) = g.poll_event() else {
                return;
            };
            if let braid_secure::Event::Established { session, .. } = e {
                let id = session.get();
                if id == self.id {
                    continue;
                }
                tracing::info!(session = %session, "split-TCP: handshake done");
                self.last_rx = now;
                self.next_keepalive = now;
                if self.id == 0 {
                    self.id = id;
                } else {
                    self.restart(now, "a new secure session", id);
                }
            }
        }
    }

    /// Seals the envelope of `path` and `chunk` into `dgram` and sends it on that uplink.
    fn send_sealed(&mut self, now: Instant, path: PathId, chunk: &[u8], dgram: &mut Vec<u8>) {
        let e = Envelope {
            flags: if self.confirmed { 0 } else { NEW },
            path,
            paths: self.sockets.len() as u8,
            session: self.id,
        };
        let len = pack(dgram, self.sec.headroom(), self.sec.overhead(), &e, chunk);
        match self.sec.seal(now, path, dgram, len) {
            Some(n) => self.send(usize::from(path), &dgram[..n]),
            None => self.refused.drops.send_errors += 1,
        }
    }

    fn send(&mut self, i: usize, d: &[u8]) {
        let ok = self.sockets[i]
            .as_ref()
            .is_some_and(|s| s.send_to(d, self.server).is_ok());
        if !ok {
            self.refused.drops.send_errors += 1;
        } else if let Some(a) = &self.arrivals {
            a.sent(i, d.len());
        }
    }

    /// Tells the tunnel's loop what the stream delivered on each uplink and whether its
    /// window there is full, and limits each uplink to what the tunnel's metering allows.
    fn exchange_meters(&mut self) {
        let Some(a) = &self.arrivals else { return };
        let sealing = self.sec.overhead();
        for i in 0..self.sockets.len() {
            let (acked, full) = self.session.meter(i);
            let wire = acked_wire_bytes(acked, outside(sealing));
            let allowance = a.exchange(i, wire, full);
            (self.session).set_allowance(i, allowance.map(|w| stream_bytes(w, sealing)));
        }
    }

    fn transmit(&mut self, now: Instant, out: &mut Vec<u8>, dgram: &mut Vec<u8>) {
        if let GatewaySecurity::Noise(g) = &mut self.sec {
            dgram.resize(MAX_HANDSHAKE_LEN, 0);
            let mut handshakes = Vec::new();
            while let Some(t) = g.poll_transmit(now, dgram) {
                handshakes.push((t.path, dgram[..t.len].to_vec()));
            }
            for (path, d) in handshakes {
                if usize::from(path) < self.sockets.len() {
                    self.send(usize::from(path), &d);
                }
            }
        }
        // Nothing of the stream leaves before the session has keys.
        if self.id == 0 {
            return;
        }
        self.exchange_meters();
        while let Some(p) = self.session.poll_transmit(now, out) {
            if usize::from(p) >= self.sockets.len() {
                continue;
            }
            self.send_sealed(now, p, out, dgram);
        }
    }

    /// Accepts the connections waiting on the IPv4 or the IPv6 listener.
    fn accept(&mut self, v6: bool) {
        loop {
            let listener = match (v6, &self.listener6) {
                (false, _) => &self.listener,
                (true, Some(l)) => l,
                (true, None) => return,
            };
            let (mut tcp, _) = match listener.accept() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let Ok(to) = original_destination(&tcp, v6) else {
                continue;
            };
            // Not redirected (a connection straight to the listener): refused.
            if self.session.conns.len() >= MAX_CONNS
                || listener
                    .local_addr()
                    .is_ok_and(|l| l.port() == to.port() && to.ip().is_loopback())
            {
                continue;
            }
            let _ = tcp.set_nodelay(true);
            let token = Token(self.next_token);
            self.next_token += 1;
            if self
                .poll
                .registry()
                .register(&mut tcp, token, Interest::READABLE | Interest::WRITABLE)
                .is_err()
            {
                continue;
            }
            let id = self.next_conn;
            self.next_conn = self.next_conn.wrapping_add(1).max(1);
            if self.session.open(id, to, Conn::new(tcp, token, true)) {
                self.tokens.insert(token, id);
                tracing::debug!(conn = id, to = %to, "split-TCP connection");
            }
        }
    }

    /// A new session `id`: every relayed connection is reset.
    fn restart(&mut self, now: Instant, why: &str, id: u32) {
        tracing::warn!(
            why,
            "split-TCP: resetting the relayed connections, new session"
        );
        let mut closed = Vec::new();
        self.session.abort_all(&mut closed);
        self.tokens.clear();
        self.session = Session::new(self.sockets.len(), now);
        self.id = match self.sec {
            GatewaySecurity::Plaintext => random_id(),
            GatewaySecurity::Noise(_) => id,
        };
        self.confirmed = false;
        self.next_keepalive = now;
    }
}

/// A non-zero random session id (no encryption).
fn random_id() -> u32 {
    (crate::system::random_u64() as u32).max(1)
}

struct Peer {
    session: Session,
    addrs: Vec<Option<SocketAddr>>,
    /// Per path, the stream's datagrams sent before the gateway's first datagram on that
    /// path told its address (at most [`WAITING`]); they leave when it arrives.
    waiting: Vec<Vec<(u8, Vec<u8>)>>,
    /// Per path, bytes sent since the tunnel's loop was last told ([`super::arrivals`]).
    sent: Vec<u64>,
}

impl Peer {
    fn new(paths: u8, now: Instant) -> Peer {
        let n = usize::from(paths);
        Peer {
            session: Session::new(n, now),
            addrs: vec![None; n],
            waiting: vec![Vec::new(); n],
            sent: vec![0; n],
        }
    }

    /// Path `path` is heard from `from`; whether it had no address before.
    fn heard(&mut self, path: PathId, from: SocketAddr) -> bool {
        match self.addrs.get_mut(usize::from(path)) {
            Some(a) => a.replace(from).is_none(),
            None => false,
        }
    }
}

/// The server's loop.
pub struct ServerLoop {
    poll: Poll,
    clock: Clock,
    socket: UdpSocket,
    sec: ServerSecurity,
    reply: Box<[u8; MAX_HANDSHAKE_LEN]>,
    /// Handshakes answered this second.
    handshakes: HandshakeRate,
    /// By envelope session: the braid-secure session, or the gateway's id without
    /// encryption.
    peers: HashMap<u32, Peer>,
    tokens: HashMap<Token, (u32, u32)>,
    next_token: usize,
    refused: Refused,
    /// Bytes received per gateway key and path, for the packet tunnel's capacity
    /// estimates, and the current read's counts before they go there.
    arrivals: Option<PeerArrivals>,
    batch: HashMap<(braid_secure::PublicKey, PathId), u64>,
}

/// What the server's loop counted, for tests and logs.
#[derive(Clone, Debug, Default)]
pub struct ServerCounts {
    /// Datagrams the security layer refused.
    pub refused: Drops,
    /// Sessions live now.
    pub sessions: usize,
    /// Connections opened towards destinations, over all sessions live now.
    pub opened: u64,
}

impl ServerLoop {
    /// The loop on `listen`, keyed by `sec`.
    pub fn new(listen: SocketAddr, sec: ServerSecurity) -> std::io::Result<ServerLoop> {
        let poll = Poll::new()?;
        let mut socket = udp_socket(listen, None)?;
        poll.registry()
            .register(&mut socket, Token(UDP0), Interest::READABLE)?;
        let clock = Clock::start();
        Ok(ServerLoop {
            poll,
            clock,
            socket,
            sec,
            reply: Box::new([0; MAX_HANDSHAKE_LEN]),
            handshakes: HandshakeRate::default(),
            peers: HashMap::new(),
            tokens: HashMap::new(),
            next_token: CONN0,
            refused: Refused::default(),
            arrivals: None,
            batch: HashMap::new(),
        })
    }

    /// Counts the bytes received per gateway and path into `a` ([`super::arrivals`]).
    pub fn with_arrivals(mut self, a: PeerArrivals) -> ServerLoop {
        self.arrivals = Some(a);
        self
    }

    /// The address the loop listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn counts(&self) -> ServerCounts {
        ServerCounts {
            refused: self.refused.drops.clone(),
            sessions: self.peers.len(),
            opened: self.peers.values().map(|p| p.session.stats.opened).sum(),
        }
    }

    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(256);
        let mut buf = vec![0u8; 65_536];
        let mut out = Vec::with_capacity(2048);
        let mut dgram = Vec::with_capacity(2048);
        let mut requests = Vec::new();
        let mut closed = Vec::new();
        let mut next_debug = self.clock.now();
        while !stop.load(Ordering::Relaxed) {
            let now = self.clock.now();
            let sec_wake = match &self.sec {
                ServerSecurity::Noise(s) => s.poll_timeout(),
                ServerSecurity::Plaintext => None,
            };
            let wake = self
                .peers
                .values()
                .filter_map(|p| p.session.poll_timeout())
                .chain(sec_wake)
                .min()
                .unwrap_or(Instant::MAX);
            let held = self.peers.values().any(|p| p.session.any_held());
            let tick = if held { METER_TICK } else { TICK };
            let timeout = wake.saturating_duration_since(now).min(tick);
            if self.poll.poll(&mut events, Some(timeout)).is_err() {
                continue;
            }
            let now = self.clock.now();
            for ev in events.iter() {
                match ev.token() {
                    Token(UDP0) => self.receive(now, &mut buf, &mut dgram),
                    t => self.connection_event(t, ev),
                }
            }
            if let ServerSecurity::Noise(s) = &mut self.sec {
                s.handle_timeout(now);
            }
            self.security_events(&mut closed);
            let ids: Vec<u32> = self.peers.keys().copied().collect();
            let debug_due = now >= next_debug;
            for pid in ids {
                let Some(mut peer) = self.peers.remove(&pid) else {
                    continue;
                };
                let s = &mut peer.session;
                if now.saturating_duration_since(s.last_heard) > IDLE {
                    tracing::info!(stats = ?s.stats, "split-TCP session idle; dropped");
                    s.abort_all(&mut closed);
                    for t in closed.drain(..) {
                        self.tokens.remove(&t);
                    }
                    continue;
                }
                s.handle_timeout(now);
                let broken = loop {
                    requests.clear();
                    if let Err(e) = s.read_frames(&mut requests, &mut closed) {
                        break Some(e);
                    }
                    if requests.is_empty() {
                        break None;
                    }
                    for r in requests.drain(..) {
                        let Request::Open { conn, to } = r;
                        self.connect(pid, s, conn, to);
                    }
                };
                if let Some(e) = broken {
                    tracing::warn!(error = %e, "split-TCP: broken frames; session dropped");
                    s.abort_all(&mut closed);
                    for t in closed.drain(..) {
                        self.tokens.remove(&t);
                    }
                    continue;
                }
                if debug_due {
                    tracing::debug!(session = pid, state = %s.describe(), "split-TCP");
                }
                s.relay(&mut closed);
                for t in closed.drain(..) {
                    self.tokens.remove(&t);
                }
                self.exchange_meters(pid, &mut peer);
                while let Some(path) = peer.session.poll_transmit(now, &mut out) {
                    self.send_sealed(now, pid, &mut peer, 0, path, &out, &mut dgram);
                }
                self.peers.insert(pid, peer);
            }
            if debug_due {
                next_debug = now + DEBUG_EVERY;
                self.refused.log(now);
            }
        }
    }

    /// Every datagram waiting on the socket: opened by the security layer, handshakes
    /// answered, data to its session.
    fn receive(&mut self, now: Instant, buf: &mut [u8], dgram: &mut Vec<u8>) {
        let load = self.handshakes.load(now);
        let mut answers: Vec<(u32, PathId, u8, SocketAddr)> = Vec::new();
        let mut addressed: Vec<(u32, PathId)> = Vec::new();
        let (socket, sec, reply, peers, refused, handshakes, batch) = (
            &self.socket,
            &mut self.sec,
            &mut self.reply,
            &mut self.peers,
            &mut self.refused,
            &mut self.handshakes,
            &mut self.batch,
        );
        let counting = self.arrivals.is_some();
        drain(socket, buf, |from, d| {
            let len = d.len() as u64;
            let opened = sec.open(now, from, load, d, reply);
            if let (true, Ok(Opened::Data { session, path, .. })) = (counting, &opened) {
                if let Some(k) = sec.session_peer(*session) {
                    *batch.entry((k, *path)).or_default() += len + super::arrivals::WIRE_OVERHEAD;
                }
            }
            let (session, path, range) = match opened {
                Ok(Opened::Data {
                    session,
                    path,
                    range,
                }) => (session, path, range),
                Ok(Opened::Keepalive { session, path }) => {
                    if peers.get_mut(&session).is_some_and(|p| p.heard(path, from)) {
                        addressed.push((session, path));
                    }
                    return;
                }
                Ok(Opened::Reply(len)) => {
                    handshakes.count();
                    let _ = socket.send_to(&reply[..len.min(reply.len())], from);
                    return;
                }
                Ok(Opened::Handshake) => {
                    handshakes.count();
                    return;
                }
                Err(e) => {
                    refused.count(&e);
                    return;
                }
            };
            let Some((e, chunk)) = Envelope::parse(&d[range]) else {
                refused.drops.engine_rejected += 1;
                return;
            };
            if e.path != path {
                refused.drops.engine_rejected += 1;
                return;
            }
            let peer = match peers.get_mut(&session) {
                Some(p) => p,
                None if e.flags & NEW != 0 => {
                    tracing::info!(gateway = %from, paths = e.paths, session, "split-TCP session");
                    peers.entry(session).or_insert(Peer::new(e.paths, now))
                }
                None => {
                    answers.push((session, path, GONE, from));
                    return;
                }
            };
            if usize::from(path) >= peer.addrs.len() {
                refused.drops.engine_rejected += 1;
                return;
            }
            if peer.heard(path, from) {
                addressed.push((session, path));
            }
            peer.session.last_heard = now;
            if chunk.is_empty() {
                answers.push((session, path, 0, from));
            } else {
                peer.session.handle_chunk(now, path, chunk);
            }
        });
        if let Some(a) = &self.arrivals {
            a.add_all(&mut self.batch);
        }
        for a in answers {
            self.answer(now, a, dgram);
        }
        for (session, path) in addressed {
            self.send_waiting(now, session, path, dgram);
        }
    }

    /// The datagrams that waited for `path`'s address, now that it is known.
    fn send_waiting(&mut self, now: Instant, session: u32, path: PathId, dgram: &mut Vec<u8>) {
        let Some(mut peer) = self.peers.remove(&session) else {
            return;
        };
        let waiting = peer
            .waiting
            .get_mut(usize::from(path))
            .map(std::mem::take)
            .unwrap_or_default();
        if !waiting.is_empty() {
            tracing::debug!(
                session,
                path,
                datagrams = waiting.len(),
                "split-TCP: the path's address is known; its waiting datagrams leave"
            );
        }
        for (flags, chunk) in waiting {
            self.send_sealed(now, session, &mut peer, flags, path, &chunk, dgram);
        }
        self.peers.insert(session, peer);
    }

    /// A keepalive's echo (`flags` 0) or GONE, back to the authenticated datagram's source.
    fn answer(
        &mut self,
        now: Instant,
        (session, path, flags, to): (u32, PathId, u8, SocketAddr),
        dgram: &mut Vec<u8>,
    ) {
        let paths = self
            .peers
            .get(&session)
            .map_or(path.saturating_add(1), |p| p.addrs.len() as u8);
        let e = Envelope {
            flags,
            path,
            paths,
            session,
        };
        let len = pack(dgram, self.sec.headroom(), self.sec.overhead(), &e, &[]);
        match self.sec.seal(now, session, path, dgram, len) {
            Some(n) if self.socket.send_to(&dgram[..n], to).is_ok() => {}
            _ => self.refused.drops.send_errors += 1,
        }
    }

    /// Seals `chunk` of `session` for `path` and sends it to the path's address, or keeps
    /// it until the path has one ([`WAITING`]). A datagram that cannot be kept, sealed or
    /// sent is counted in `send_errors`.
    #[allow(clippy::too_many_arguments)]
    fn send_sealed(
        &mut self,
        now: Instant,
        session: u32,
        peer: &mut Peer,
        flags: u8,
        path: PathId,
        chunk: &[u8],
        dgram: &mut Vec<u8>,
    ) {
        let p = usize::from(path);
        let Some(&Some(to)) = peer.addrs.get(p) else {
            match peer.waiting.get_mut(p) {
                Some(w) if w.len() < WAITING => w.push((flags, chunk.to_vec())),
                _ => self.refused.drops.send_errors += 1,
            }
            return;
        };
        let e = Envelope {
            flags,
            path,
            paths: peer.addrs.len() as u8,
            session,
        };
        let len = pack(dgram, self.sec.headroom(), self.sec.overhead(), &e, chunk);
        match self.sec.seal(now, session, path, dgram, len) {
            Some(n) if self.socket.send_to(&dgram[..n], to).is_ok() => {
                if let Some(s) = peer.sent.get_mut(p) {
                    *s += n as u64 + WIRE_OVERHEAD;
                }
            }
            _ => self.refused.drops.send_errors += 1,
        }
    }

    /// Tells the tunnel's loop what gateway session `pid`'s stream sent and delivered on
    /// each path and whether its window there is full, and limits each path to what the
    /// tunnel's metering allows ([`super::arrivals`]).
    fn exchange_meters(&self, pid: u32, peer: &mut Peer) {
        let Some(a) = &self.arrivals else { return };
        let Some(key) = self.sec.session_peer(pid) else {
            return;
        };
        let sealing = self.sec.overhead();
        for (i, sent) in peer.sent.iter_mut().enumerate() {
            let (acked, full) = peer.session.meter(i);
            let t = Traffic {
                sent: std::mem::take(sent),
                acked: acked_wire_bytes(acked, outside(sealing)),
                full,
            };
            let Ok(path) = PathId::try_from(i) else { break };
            let allowance = a.exchange(&key, path, t);
            (peer.session).set_allowance(i, allowance.map(|w| stream_bytes(w, sealing)));
        }
    }

    /// Sessions the security layer closed (the gateway restarted or went idle) take their
    /// connections with them.
    fn security_events(&mut self, closed: &mut Vec<mio::Token>) {
        loop {
            let ServerSecurity::Noise(s) = &mut self.sec else {
                return;
            };
            let Some(e) = s.poll_event() else {
                return;
            };
            if let braid_secure::Event::Closed { session, reason } = e {
                if let Some(mut p) = self.peers.remove(&session.get()) {
                    tracing::info!(session = %session, ?reason, stats = ?p.session.stats, "split-TCP session closed");
                    p.session.abort_all(closed);
                    for t in closed.drain(..) {
                        self.tokens.remove(&t);
                    }
                }
            }
        }
    }

    fn connection_event(&mut self, t: Token, ev: &mio::event::Event) {
        let Some(&(p, id)) = self.tokens.get(&t) else {
            return;
        };
        let Some(peer) = self.peers.get_mut(&p) else {
            return;
        };
        let Some(c) = peer.session.conns.get_mut(&id) else {
            return;
        };
        if !c.connected {
            match (c.tcp.take_error(), c.tcp.peer_addr()) {
                (Ok(None), Ok(_)) => {
                    c.connected = true;
                    c.readable = true;
                    c.writable = true;
                }
                (Ok(Some(_)) | Err(_), _) => peer.session.refuse(id),
                (Ok(None), Err(e))
                    if e.kind() == std::io::ErrorKind::NotConnected && ev.is_error() =>
                {
                    peer.session.refuse(id)
                }
                _ => {}
            }
            return;
        }
        c.readable |= ev.is_readable() || ev.is_read_closed() || ev.is_error();
        c.writable |= ev.is_writable() || ev.is_write_closed() || ev.is_error();
    }

    fn connect(&mut self, pid: u32, s: &mut Session, conn: u32, to: SocketAddr) {
        if s.conns.contains_key(&conn) {
            return;
        }
        let token = Token(self.next_token);
        self.next_token += 1;
        let tcp = TcpStream::connect(to).and_then(|mut t| {
            self.poll.registry().register(
                &mut t,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            let _ = t.set_nodelay(true);
            Ok(t)
        });
        match tcp {
            Ok(t) if s.conns.len() < MAX_CONNS => {
                s.conns.insert(conn, Conn::new(t, token, false));
                s.stats.opened += 1;
                self.tokens.insert(token, (pid, conn));
            }
            Ok(_) => s.reject(conn),
            Err(e) => {
                tracing::debug!(to = %to, error = %e, "split-TCP connect failed");
                s.reject(conn);
            }
        }
    }
}

/// Runs `f` on a thread until the returned flag is set.
pub fn spawn(
    name: &str,
    f: impl FnOnce(&AtomicBool) + Send + 'static,
) -> std::io::Result<(Arc<AtomicBool>, std::thread::JoinHandle<()>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let t = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || f(&s))?;
    Ok((stop, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_bad_ones_are_ignored() {
        let e = Envelope {
            flags: NEW,
            path: 3,
            paths: 4,
            session: 0x0102_0304,
        };
        let mut out = Vec::new();
        e.emit(&mut out);
        out.extend_from_slice(b"chunk");
        assert_eq!(Envelope::parse(&out), Some((e, &b"chunk"[..])));
        out[2] = 4;
        assert_eq!(Envelope::parse(&out), None, "path beyond the count");
        out[2] = 3;
        out[0] = 0;
        assert_eq!(Envelope::parse(&out), None);
        assert_eq!(Envelope::parse(&out[..5]), None);
    }
}
