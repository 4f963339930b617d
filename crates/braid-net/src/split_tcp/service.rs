//! The split-TCP event loops, one thread beside each daemon's: at the gateway the
//! redirect listener, the relayed connections and one UDP socket per uplink; at the server
//! one UDP socket, a session per gateway and the connections to the destinations.
//!
//! Every datagram carries an envelope before its stream chunk:
//!
//! ```text
//! magic:u8=0xB7 flags:u8 paths:u8 path:u8 session:u64   chunk (braid_core::stream::chunk), or none
//! ```
//!
//! `session` is the gateway's random id for this run; `path` the gateway uplink the
//! datagram crossed (the server answers to the address it last heard on that path). A
//! gateway sends NEW until the server has answered; the server starts a session only on
//! NEW and answers anything else it does not know with GONE, which makes the gateway reset
//! its connections and start over (the server restarted). A chunk-less datagram is the
//! gateway's keepalive, every second on every uplink.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use braid_core::{Instant, PathId};
use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Protocol, Socket, Type};

use super::redirect::original_destination;
use super::session::{Conn, Request, Session};
use crate::clock::Clock;
use crate::config::Binding;

const MAGIC: u8 = 0xB7;
const NEW: u8 = 1;
const GONE: u8 = 2;
/// Envelope bytes before the chunk.
pub const ENVELOPE: usize = 12;
/// The loop wakes at least this often (to see the stop flag).
const TICK: Duration = Duration::from_millis(50);
/// Gateway keepalives, per uplink.
const KEEPALIVE: Duration = Duration::from_secs(1);
/// A server session silent this long is dropped with its connections.
const IDLE: Duration = Duration::from_secs(60);
/// The sessions' state is logged this often at debug level.
const DEBUG_EVERY: Duration = Duration::from_secs(1);
/// Relayed connections per session at most; more are refused.
const MAX_CONNS: usize = 4096;
/// UDP socket buffers: a window of the fastest lab path's bursts.
const UDP_BUFFER: usize = 4 << 20;

const LISTENER: Token = Token(0);
const UDP0: usize = 1;
const CONN0: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Envelope {
    flags: u8,
    paths: u8,
    path: PathId,
    session: u64,
}

impl Envelope {
    fn parse(b: &[u8]) -> Option<(Envelope, &[u8])> {
        if b.len() < ENVELOPE || b[0] != MAGIC {
            return None;
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[4..12]);
        let e = Envelope {
            flags: b[1],
            paths: b[2],
            path: b[3],
            session: u64::from_be_bytes(id),
        };
        (e.paths > 0 && e.path < e.paths).then_some((e, &b[ENVELOPE..]))
    }

    fn emit(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&[MAGIC, self.flags, self.paths, self.path]);
        out.extend_from_slice(&self.session.to_be_bytes());
    }
}

fn udp_socket(bind: SocketAddr, device: Option<&str>) -> std::io::Result<UdpSocket> {
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

/// Reads every waiting datagram of `sock`, calling `f(from, bytes)`.
fn drain(sock: &UdpSocket, buf: &mut [u8], mut f: impl FnMut(SocketAddr, &[u8])) {
    loop {
        match sock.recv_from(buf) {
            Ok((n, from)) => f(from, &buf[..n]),
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
    bindings: Vec<Binding>,
    sockets: Vec<Option<UdpSocket>>,
    server: SocketAddr,
    id: u64,
    confirmed: bool,
    session: Session,
    next_conn: u32,
    next_token: usize,
    tokens: HashMap<Token, u32>,
    dropped_sends: u64,
}

impl GatewayLoop {
    /// The listener on an ephemeral port of every address (the redirect's target) and one
    /// socket per uplink towards `server` (the server's split-TCP port).
    pub fn new(bindings: Vec<Binding>, server: SocketAddr) -> std::io::Result<GatewayLoop> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let clock = Clock::start();
        let now = clock.now();
        let n = bindings.len();
        let mut g = GatewayLoop {
            poll,
            clock,
            listener,
            sockets: (0..n).map(|_| None).collect(),
            bindings,
            server,
            id: crate::system::random_u64(),
            confirmed: false,
            session: Session::new(n, now),
            next_conn: 1,
            next_token: CONN0,
            tokens: HashMap::new(),
            dropped_sends: 0,
        };
        g.bind_uplinks();
        Ok(g)
    }

    /// The redirect's target port.
    pub fn port(&self) -> std::io::Result<u16> {
        Ok(self.listener.local_addr()?.port())
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
        let mut next_keepalive = self.clock.now();
        while !stop.load(Ordering::Relaxed) {
            let now = self.clock.now();
            let wake = self
                .session
                .poll_timeout()
                .unwrap_or(Instant::MAX)
                .min(next_keepalive);
            let timeout = wake.saturating_duration_since(now).min(TICK);
            if self.poll.poll(&mut events, Some(timeout)).is_err() {
                continue;
            }
            let now = self.clock.now();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    Token(t) if (UDP0..CONN0).contains(&t) => {
                        let i = t - UDP0;
                        let Some(sock) = self.sockets.get(i).and_then(Option::as_ref) else {
                            continue;
                        };
                        let (id, session, confirmed) =
                            (self.id, &mut self.session, &mut self.confirmed);
                        let mut gone = false;
                        drain(sock, &mut buf, |_, d| {
                            let Some((e, chunk)) = Envelope::parse(d) else {
                                return;
                            };
                            if e.session != id {
                                return;
                            }
                            if e.flags & GONE != 0 {
                                gone = true;
                                return;
                            }
                            *confirmed = true;
                            session.handle_chunk(now, i as PathId, chunk);
                        });
                        if gone {
                            self.restart(now, "the server forgot this session (restarted)");
                        }
                    }
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
            self.session.handle_timeout(now);
            requests.clear();
            if let Err(e) = self.session.read_frames(&mut requests, &mut closed) {
                tracing::warn!(error = %e, "split-TCP: broken frames from the server");
                self.restart(now, "broken frames");
            }
            self.session.relay(&mut closed);
            for t in closed.drain(..) {
                self.tokens.remove(&t);
            }
            self.transmit(now, &mut out, &mut dgram);
            if now >= next_keepalive {
                next_keepalive = now + KEEPALIVE;
                self.bind_uplinks();
                tracing::debug!(state = %self.session.describe(), "split-TCP");
                for i in 0..self.sockets.len() {
                    self.envelope(i as PathId).emit(&mut dgram);
                    self.send(i, &dgram);
                }
            }
        }
        tracing::info!(stats = ?self.session.stats, dropped_sends = self.dropped_sends, "split-TCP stopped");
    }

    fn envelope(&self, path: PathId) -> Envelope {
        Envelope {
            flags: if self.confirmed { 0 } else { NEW },
            paths: self.sockets.len() as u8,
            path,
            session: self.id,
        }
    }

    fn send(&mut self, i: usize, d: &[u8]) {
        let ok = self.sockets[i]
            .as_ref()
            .is_some_and(|s| s.send_to(d, self.server).is_ok());
        if !ok {
            self.dropped_sends += 1;
        }
    }

    fn transmit(&mut self, now: Instant, out: &mut Vec<u8>, dgram: &mut Vec<u8>) {
        while let Some(p) = self.session.poll_transmit(now, out) {
            let i = usize::from(p);
            if i >= self.sockets.len() {
                continue;
            }
            self.envelope(p).emit(dgram);
            dgram.extend_from_slice(out);
            self.send(i, dgram);
        }
    }

    fn accept(&mut self) {
        loop {
            let (mut tcp, _) = match self.listener.accept() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let Ok(to) = original_destination(&tcp) else {
                continue;
            };
            if self.session.conns.len() >= MAX_CONNS
                || self
                    .listener
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

    /// A new session: every relayed connection is reset.
    fn restart(&mut self, now: Instant, why: &str) {
        tracing::warn!(
            why,
            "split-TCP: resetting the relayed connections, new session"
        );
        let mut closed = Vec::new();
        self.session.abort_all(&mut closed);
        self.tokens.clear();
        self.session = Session::new(self.sockets.len(), now);
        self.id = crate::system::random_u64();
        self.confirmed = false;
    }
}

struct Peer {
    session: Session,
    addrs: Vec<Option<SocketAddr>>,
}

/// The server's loop.
pub struct ServerLoop {
    poll: Poll,
    clock: Clock,
    socket: UdpSocket,
    peers: HashMap<u64, Peer>,
    tokens: HashMap<Token, (u64, u32)>,
    next_token: usize,
}

impl ServerLoop {
    pub fn new(listen: SocketAddr) -> std::io::Result<ServerLoop> {
        let poll = Poll::new()?;
        let mut socket = udp_socket(listen, None)?;
        poll.registry()
            .register(&mut socket, Token(UDP0), Interest::READABLE)?;
        Ok(ServerLoop {
            poll,
            clock: Clock::start(),
            socket,
            peers: HashMap::new(),
            tokens: HashMap::new(),
            next_token: CONN0,
        })
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
            let wake = self
                .peers
                .values()
                .filter_map(|p| p.session.poll_timeout())
                .min()
                .unwrap_or(Instant::MAX);
            let timeout = wake.saturating_duration_since(now).min(TICK);
            if self.poll.poll(&mut events, Some(timeout)).is_err() {
                continue;
            }
            let now = self.clock.now();
            for ev in events.iter() {
                match ev.token() {
                    Token(UDP0) => {
                        let mut gone = Vec::new();
                        let peers = &mut self.peers;
                        drain(&self.socket, &mut buf, |from, d| {
                            let Some((e, chunk)) = Envelope::parse(d) else {
                                return;
                            };
                            let peer = match peers.get_mut(&e.session) {
                                Some(p) => p,
                                None if e.flags & NEW != 0 => {
                                    tracing::info!(gateway = %from, paths = e.paths, "split-TCP session");
                                    peers.entry(e.session).or_insert(Peer {
                                        session: Session::new(usize::from(e.paths), now),
                                        addrs: vec![None; usize::from(e.paths)],
                                    })
                                }
                                None => {
                                    gone.push((from, e));
                                    return;
                                }
                            };
                            let Some(a) = peer.addrs.get_mut(usize::from(e.path)) else {
                                return;
                            };
                            *a = Some(from);
                            peer.session.handle_chunk(now, e.path, chunk);
                        });
                        for (to, mut e) in gone {
                            e.flags = GONE;
                            e.emit(&mut dgram);
                            let _ = self.socket.send_to(&dgram, to);
                        }
                    }
                    t => {
                        let Some((p, id)) = self.tokens.get(&t) else {
                            continue;
                        };
                        let Some(c) = self
                            .peers
                            .get_mut(p)
                            .and_then(|p| p.session.conns.get_mut(id))
                        else {
                            continue;
                        };
                        if !c.connected {
                            match (c.tcp.take_error(), c.tcp.peer_addr()) {
                                (Ok(None), Ok(_)) => {
                                    c.connected = true;
                                    c.readable = true;
                                    c.writable = true;
                                }
                                (Ok(Some(_)) | Err(_), _) => {
                                    let id = *id;
                                    if let Some(peer) = self.peers.get_mut(p) {
                                        peer.session.refuse(id);
                                    }
                                }
                                (Ok(None), Err(e))
                                    if e.kind() == std::io::ErrorKind::NotConnected
                                        && ev.is_error() =>
                                {
                                    let id = *id;
                                    if let Some(peer) = self.peers.get_mut(p) {
                                        peer.session.refuse(id);
                                    }
                                }
                                _ => {}
                            }
                            continue;
                        }
                        c.readable |= ev.is_readable() || ev.is_read_closed() || ev.is_error();
                        c.writable |= ev.is_writable() || ev.is_write_closed() || ev.is_error();
                    }
                }
            }
            let ids: Vec<u64> = self.peers.keys().copied().collect();
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
                while let Some(path) = s.poll_transmit(now, &mut out) {
                    let Some(Some(to)) = peer.addrs.get(usize::from(path)) else {
                        continue;
                    };
                    Envelope {
                        flags: 0,
                        paths: peer.addrs.len() as u8,
                        path,
                        session: pid,
                    }
                    .emit(&mut dgram);
                    dgram.extend_from_slice(&out);
                    let _ = self.socket.send_to(&dgram, *to);
                }
                self.peers.insert(pid, peer);
            }
            if debug_due {
                next_debug = now + DEBUG_EVERY;
            }
        }
    }

    fn connect(&mut self, pid: u64, s: &mut Session, conn: u32, to: std::net::SocketAddrV4) {
        if s.conns.contains_key(&conn) {
            return;
        }
        let token = Token(self.next_token);
        self.next_token += 1;
        let tcp = TcpStream::connect(SocketAddr::V4(to)).and_then(|mut t| {
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
            paths: 4,
            path: 3,
            session: 0x0102_0304_0506_0708,
        };
        let mut out = Vec::new();
        e.emit(&mut out);
        out.extend_from_slice(b"chunk");
        assert_eq!(Envelope::parse(&out), Some((e, &b"chunk"[..])));
        out[3] = 4;
        assert_eq!(Envelope::parse(&out), None, "path beyond the count");
        out[3] = 3;
        out[0] = 0;
        assert_eq!(Envelope::parse(&out), None);
        assert_eq!(Envelope::parse(&out[..5]), None);
    }
}
