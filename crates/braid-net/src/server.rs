//! `braid server`: the wired end, serving many gateways from one UDP socket and one TUN
//! device. Each gateway has its own engine [`Session`], keyed by the session id every
//! datagram carries at a fixed place (docs/wire.md), its own envelope, and an inner
//! address from the pool. A datagram for no known session is dropped and counted without
//! keeping anything. Sessions are isolated: an inner packet from a gateway whose source is
//! not that gateway's address is dropped (no gateway can send as another), and traffic
//! between gateways is not forwarded.
//!
//! Relays (`braid relay`) carry a gateway's paths over their own uplinks: each datagram a
//! relay forwards comes in its lender envelope (braid-secure `lender`), checked against
//! the `[[relay]]` sections (the relay's key, authorized by the session's owner) before the
//! datagram inside is handled as the gateway's own; see `server/lent.rs`.
//!
//! A gateway's path address is whatever the last datagram that opened on that path came
//! from, so a NAT rebinding or a modem reconnect moves the path without ending the
//! session.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use braid_core::{Event, Instant, PathConfig, Role, Session};
use braid_wire::{Datagram, Message};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::batch::{Dest, TxBatches};
use crate::clock::Clock;
use crate::config::{self, ServerConfig};
use crate::crypto::{CryptoPool, RxOpen};
use crate::gateway::udp_overhead;
use crate::secure::{Deferred, HandshakeRate, Opened, ServerSecurity};
use crate::status::{self, Drops, PathStatus, RateMeter, SessionStatus, Shared, Status};
use crate::system::Undo;
use crate::tun::Tun;
use crate::udp::{RxBatch, UdpPath};
use crate::{mss, DaemonError, Shutdown};

mod lent;

const TUN: Token = Token(0);
const SIGNALS: Token = Token(1);
const UDP: Token = Token(2);
const BUDGET: usize = 64;
const SNAPSHOT_EVERY: Duration = Duration::from_millis(500);
/// A gateway silent this long is forgotten and its address returns to the pool.
const IDLE_EXPIRY: Duration = Duration::from_secs(180);
/// Most paths a gateway may announce.
const MAX_PATHS: u8 = config::MAX_UPLINKS as u8;

/// One gateway's session.
struct Peer {
    name: String,
    session: Session,
    address: Ipv4Addr,
    /// Per path: where the gateway's datagrams came from last, and our address they came to.
    remotes: Vec<Option<(SocketAddr, Option<IpAddr>)>>,
    started: Instant,
    last_rx: Instant,
    rates: Vec<(RateMeter, RateMeter)>,
    /// The gateway's key (the session's owner, who authorizes relays); `None` without
    /// encryption.
    owner: Option<braid_secure::PublicKey>,
}

/// The running server.
pub struct Server {
    /// Split-TCP's stream bytes received per gateway and path, told to the sessions'
    /// capacity estimates (crate::split_tcp::arrivals).
    arrivals: Option<crate::split_tcp::arrivals::PeerArrivals>,
    cfg: ServerConfig,
    clock: Clock,
    poll: Poll,
    tun: Tun,
    sockets: Vec<Option<UdpPath>>,
    peers: HashMap<u32, Peer>,
    by_address: HashMap<Ipv4Addr, u32>,
    free: Vec<Ipv4Addr>,
    sec: ServerSecurity,
    reply: Box<[u8; braid_secure::MAX_HANDSHAKE_LEN]>,
    /// Handshake messages in the current second, for [`braid_secure::Load`].
    handshakes: HandshakeRate,
    /// Sessions touched in this turn of the loop (their output is pulled).
    touched: Vec<u32>,
    /// The list being worked through while `touched` fills again (kept to reuse its memory).
    touched_now: Vec<u32>,
    tx: TxBatches,
    rx: RxBatch,
    /// Received data waiting for its AEAD (on two threads): source and our address.
    rx_open: RxOpen<(SocketAddr, Option<IpAddr>, Option<u32>)>,
    /// The relays' gate, when the config authorizes any.
    lenders: Option<lent::Lenders>,
    scratch: Vec<u8>,
    deliver: Vec<u8>,
    drops: Drops,
    udp_recvs: u64,
    udp_rx_datagrams: u64,
    shared: Shared,
    undo: Undo,
    mss: u16,
}

impl Server {
    /// Takes split-TCP's stream arrivals per gateway and path from `a` into the sessions'
    /// capacity estimates.
    pub fn count_arrivals(&mut self, a: crate::split_tcp::arrivals::PeerArrivals) {
        self.arrivals = Some(a);
    }

    /// Hands the stream's arrivals and traffic to the session of the gateway they came
    /// from, and back what its metering lets the stream send on each path.
    fn take_arrivals(&mut self, now: Instant) {
        let Some(a) = &self.arrivals else { return };
        let (sec, peers, touched) = (&self.sec, &mut self.peers, &mut self.touched);
        a.take_all(|key, path, bytes, t| {
            let (id, p) = peers
                .iter_mut()
                .find(|(id, _)| sec.session_peer(**id).as_ref() == Some(key))?;
            if bytes > 0 {
                p.session.note_foreign_arrivals(path, bytes);
            }
            if p.session.is_metering() {
                // A hold lifted may let the tunnel send too.
                touched.push(*id);
            }
            p.session
                .note_foreign_traffic(now, path, t.sent, t.acked, t.full);
            p.session.stream_allowance(now, path)
        });
    }

    /// Whether split-TCP's stream runs beside a metering session: its allowances are then
    /// exchanged at least every [`crate::split_tcp::arrivals::METER_TICK`].
    fn stream_metered(&self) -> bool {
        self.arrivals.is_some() && self.peers.values().any(|p| p.session.is_metering())
    }

    /// Sets everything up: the TUN device with the server's address, the UDP socket,
    /// forwarding and nftables rules (undone at shutdown).
    pub fn new(cfg: ServerConfig, shared: Shared) -> Result<Server, DaemonError> {
        let clock = Clock::start();
        let sec = crate::secure::server_security(&cfg, clock.now())?;
        let lenders = lent::Lenders::new(&cfg)?;
        let poll = Poll::new()?;
        let socket = UdpPath::listen(cfg.listen).map_err(|e| {
            DaemonError::Setup(format!(
                "{}: interface.listen: cannot bind {}: {e}",
                cfg.file, cfg.listen
            ))
        })?;
        poll.registry()
            .register(&mut SourceFd(&socket.as_raw_fd()), UDP, Interest::READABLE)?;
        let tun = Tun::open(
            &cfg.tun,
            cfg.mtu,
            Some((cfg.address.addr(), cfg.address.prefix_len())),
        )
        .map_err(|e| DaemonError::Tun {
            name: cfg.tun.clone(),
            source: e,
        })?;
        poll.registry()
            .register(&mut SourceFd(&tun.as_raw_fd()), TUN, Interest::READABLE)?;
        let mut undo = Undo::default();
        undo.enable_forwarding();
        let table = format!("braid_{}", cfg.tun.replace(['-', '.'], "_"));
        let mut rules = format!(
            "table inet {table} {{\n  chain forward {{\n    type filter hook forward priority filter; policy accept;\n    iifname \"{tun}\" oifname \"{tun}\" drop\n  }}\n",
            tun = cfg.tun
        );
        if let Some(out) = &cfg.masquerade {
            rules += &format!(
                "  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    ip saddr {} oifname \"{out}\" masquerade\n  }}\n",
                cfg.address.trunc()
            );
        }
        rules += "}\n";
        // Replace a table left by a daemon that did not stop cleanly. `delete`, not
        // `destroy` (nft 1.0.8 and later): on older nft `destroy` is a syntax error, the
        // old table stayed and the new rules were appended to it. Its error when there
        // is no such table is expected.
        let _ = crate::system::nft(&format!("delete table inet {table}\n"));
        match crate::system::nft(&rules) {
            Ok(()) => undo.nft_table = Some(table),
            Err(e) if cfg.masquerade.is_some() => {
                return Err(DaemonError::Setup(format!(
                    "{}: interface.masquerade needs nftables: {e}",
                    cfg.file
                )))
            }
            Err(e) => {
                tracing::warn!(error = %e, "nftables unavailable: traffic between gateways is not blocked")
            }
        }
        let reserved: Vec<Ipv4Addr> = cfg.peers.iter().filter_map(|p| p.address).collect();
        let mut free: Vec<Ipv4Addr> = cfg
            .address
            .hosts()
            .filter(|a| *a != cfg.address.addr() && !reserved.contains(a))
            .collect();
        free.reverse();
        let scratch_len = 256 + usize::from(cfg.mtu) + 2100;
        tracing::info!(
            listen = %cfg.listen,
            tun = %cfg.tun,
            address = %cfg.address,
            mtu = cfg.mtu,
            offload = tun.offload(),
            masquerade = ?cfg.masquerade,
            encrypted = !cfg.plaintext,
            "server started"
        );
        Ok(Server {
            arrivals: None,
            mss: mss::mss_for_mtu(cfg.mtu),
            clock,
            poll,
            tun,
            sockets: vec![Some(socket)],
            peers: HashMap::new(),
            by_address: HashMap::new(),
            free,
            sec,
            reply: Box::new([0; braid_secure::MAX_HANDSHAKE_LEN]),
            handshakes: HandshakeRate::default(),
            touched: Vec::with_capacity(64),
            touched_now: Vec::with_capacity(64),
            tx: TxBatches::new(64, crypto_pool(&cfg, "braid-seal")?),
            rx: RxBatch::new(),
            rx_open: RxOpen::new(crypto_pool(&cfg, "braid-open")?),
            lenders,
            scratch: vec![0; scratch_len],
            deliver: Vec::with_capacity(usize::from(cfg.mtu) + 64),
            drops: Drops::default(),
            udp_recvs: 0,
            udp_rx_datagrams: 0,
            shared,
            undo,
            cfg,
        })
    }

    /// Runs until SIGINT or SIGTERM, then undoes its system changes; SIGHUP re-reads the
    /// config's `[[relay]]` sections.
    pub fn run(&mut self, shutdown: &mut Shutdown) -> Result<(), DaemonError> {
        shutdown.register(self.poll.registry(), SIGNALS)?;
        let mut events = Events::with_capacity(64);
        let mut pending = [false; 3];
        let mut next_snapshot = self.clock.now();
        loop {
            let now = self.clock.now();
            let wake = self
                .peers
                .values()
                .filter_map(|p| p.session.poll_timeout())
                .min()
                .unwrap_or(Instant::MAX)
                .min(next_snapshot)
                .min(if self.stream_metered() {
                    now + crate::split_tcp::arrivals::METER_TICK
                } else {
                    Instant::MAX
                })
                .min(match &self.sec {
                    ServerSecurity::Noise(s) => s.poll_timeout().unwrap_or(Instant::MAX),
                    ServerSecurity::Plaintext => Instant::MAX,
                });
            let timeout = if pending.iter().any(|p| *p) {
                Duration::ZERO
            } else {
                wake.saturating_duration_since(now)
            };
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
            for ev in events.iter() {
                match ev.token() {
                    SIGNALS if shutdown.requested() => {
                        tracing::info!("shutting down");
                        self.undo.undo();
                        return Ok(());
                    }
                    SIGNALS if shutdown.take_reload() => self.reload_relays(self.clock.now()),
                    SIGNALS => {}
                    Token(t) if t < pending.len() => pending[t] = true,
                    _ => {}
                }
            }
            let now = self.clock.now();
            if pending[UDP.0] {
                pending[UDP.0] = self.drain_udp(now);
            }
            if pending[TUN.0] {
                pending[TUN.0] = self.drain_tun(now)?;
            }
            let now = self.clock.now();
            if let ServerSecurity::Noise(s) = &mut self.sec {
                s.handle_timeout(now);
            }
            self.security_events(now);
            self.take_arrivals(now);
            for (id, p) in self.peers.iter_mut() {
                if p.session.poll_timeout().is_some_and(|t| t <= now) {
                    p.session.handle_timeout(now);
                    self.touched.push(*id);
                }
            }
            self.output(now);
            self.tun.flush()?;
            if now >= next_snapshot {
                next_snapshot = now + SNAPSHOT_EVERY;
                self.expire(now);
                self.snapshot(now);
            }
        }
    }

    fn drain_udp(&mut self, now: Instant) -> bool {
        self.take_arrivals(now);
        let mut rx = std::mem::take(&mut self.rx);
        let mut more = true;
        for _ in 0..BUDGET / 4 {
            let Some(sock) = self.sockets[0].as_ref() else {
                more = false;
                break;
            };
            let n = match sock.recv(&mut rx) {
                Ok(0) => {
                    more = false;
                    break;
                }
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(error = %e, "receive failed");
                    more = false;
                    break;
                }
            };
            self.udp_recvs += 1;
            let mut ro = std::mem::take(&mut self.rx_open);
            for g in 0..n {
                let (meta, range) = rx.group_range(g);
                let from = meta.addr;
                let local = meta.dst_ip;
                let stride = meta.stride.max(1);
                let mut start = range.start;
                while start < range.end {
                    let end = (start + stride).min(range.end);
                    self.udp_rx_datagrams += 1;
                    // A relay's envelope first: what it carries goes on as if the gateway
                    // had sent it, with the lender beside it.
                    let (inner, lender) =
                        if braid_secure::lender::LenderGate::is_lent(&rx.bytes_mut()[start..end]) {
                            match self.unwrap_lent(now, &rx.bytes_mut()[start..end]) {
                                Some((r, l)) => (start + r.start..start + r.end, Some(l)),
                                None => {
                                    start = end;
                                    continue;
                                }
                            }
                        } else {
                            (start..end, None)
                        };
                    let d = &mut rx.bytes_mut()[inner.clone()];
                    // The one place received datagrams are opened: checked here, decrypted
                    // below for the whole batch at once, finished in arrival order.
                    let load = self.handshakes.load(now);
                    match self.sec.open_deferred(now, from, load, d, &mut self.reply) {
                        Ok(Deferred::Open { key, header }) => {
                            ro.push((from, local, lender), inner, key, header)
                        }
                        Ok(Deferred::Ready(o)) => self.receive(now, from, local, lender, d, Ok(o)),
                        Err(e) => self.receive(now, from, local, lender, d, Err(e)),
                    }
                    start = end;
                }
            }
            if !ro.is_empty() {
                ro.open_all(rx.bytes_mut());
                for k in 0..ro.len() {
                    let ((from, local, lender), range, result) = ro.result(k);
                    let opened = self.sec.finish_open(now, result);
                    self.receive(now, from, local, lender, &mut rx.bytes_mut()[range], opened);
                }
                ro.clear();
            }
            self.rx_open = ro;
            self.output(now);
        }
        self.rx = rx;
        more
    }

    /// One datagram from `from` (to our address `local`), carried by `lender` or straight
    /// from the gateway, opened (or not) by the security layer. Nothing is kept for a
    /// datagram that does not open.
    fn receive(
        &mut self,
        now: Instant,
        from: SocketAddr,
        local: Option<IpAddr>,
        lender: Option<u32>,
        d: &mut [u8],
        opened: Result<Opened, braid_secure::Dropped>,
    ) {
        let (id, path, range) = match opened {
            Ok(Opened::Data {
                session,
                path,
                range,
            }) => (session, path, Some(range)),
            Ok(Opened::Keepalive { session, path }) => (session, path, None),
            Ok(Opened::Reply(len)) => {
                self.handshakes.count();
                if let Some(sock) = self.sockets[0].as_ref() {
                    let n = len.min(self.reply.len());
                    if sock.send(from, local, &self.reply[..n], None).is_err() {
                        self.drops.send_errors += 1;
                    }
                }
                self.security_events(now);
                return;
            }
            Ok(Opened::Handshake) => {
                self.handshakes.count();
                self.security_events(now);
                return;
            }
            Err(e) => {
                crate::secure::count(&mut self.drops, &e);
                return;
            }
        };
        if !self.peers.contains_key(&id) {
            // Without encryption a hello opens a session; with it the handshake did.
            let admitted = matches!(self.sec, ServerSecurity::Plaintext)
                && hello_paths(d).is_some_and(|paths| {
                    self.open_session(now, id, format!("gateway-{id:08x}"), None, paths, from)
                });
            if !admitted {
                self.drops.unknown_session += 1;
                return;
            }
        }
        if !self.admit_path(now, id, path, lender) {
            return;
        }
        let Some(p) = self.peers.get_mut(&id) else {
            return;
        };
        if let Some(range) = range {
            if p.session.handle_datagram(now, path, &d[range]).is_err() {
                self.drops.engine_rejected += 1;
                return;
            }
        }
        p.last_rx = now;
        if p.remotes.len() <= usize::from(path) {
            p.remotes.resize(usize::from(path) + 1, None);
        }
        if let Some(slot) = p.remotes.get_mut(usize::from(path)) {
            if let Some((old, _)) = *slot {
                if old != from {
                    tracing::info!(gateway = %p.name, path, %old, new = %from, "path address changed");
                }
            }
            *slot = Some((from, local));
        }
        if self.touched.last() != Some(&id) {
            self.touched.push(id);
        }
    }

    /// Sessions the security layer established or closed: engines follow.
    fn security_events(&mut self, now: Instant) {
        loop {
            let e = match &mut self.sec {
                ServerSecurity::Noise(s) => s.poll_event(),
                ServerSecurity::Plaintext => None,
            };
            let Some(e) = e else { break };
            match e {
                braid_secure::Event::Established {
                    session,
                    peer,
                    payload,
                } => {
                    let id = session.get();
                    if self.peers.contains_key(&id) {
                        continue;
                    }
                    let Some(cfg) = self
                        .cfg
                        .peers
                        .iter()
                        .find(|p| config::parse_public_key(&p.public_key).ok() == Some(peer))
                    else {
                        continue;
                    };
                    let (name, fixed) = (cfg.name.clone(), cfg.address);
                    let paths = crate::secure::payload_paths(&payload);
                    // The source is learnt from the first data datagram.
                    let any = SocketAddr::from(([0, 0, 0, 0], 0));
                    if self.open_session(now, id, name, fixed, paths, any) {
                        if let Some(p) = self.peers.get_mut(&id) {
                            p.owner = Some(peer);
                        }
                    }
                }
                braid_secure::Event::Closed { session, reason } => {
                    if let Some(p) = self.peers.remove(&session.get()) {
                        tracing::info!(gateway = %p.name, session = %session, ?reason, "session closed");
                        self.release(&p);
                    }
                }
                braid_secure::Event::Rekeyed { .. } => {}
            }
        }
    }

    fn release(&mut self, p: &Peer) {
        if self
            .by_address
            .get(&p.address)
            .is_some_and(|id| !self.peers.contains_key(id))
        {
            self.by_address.remove(&p.address);
        }
        let fixed = self.cfg.peers.iter().any(|c| c.address == Some(p.address));
        if !fixed && !self.by_address.contains_key(&p.address) {
            self.free.push(p.address);
        }
    }

    fn drain_tun(&mut self, now: Instant) -> Result<bool, DaemonError> {
        for _ in 0..BUDGET {
            let n = self.tun.read_batch()?;
            if n == 0 {
                self.tx.flush(&self.sockets);
                return Ok(false);
            }
            for i in 0..n {
                let p = self.tun.packet(i);
                let Some(dst) = ipv4_dst(p) else {
                    self.drops.no_route += 1;
                    continue;
                };
                let Some(id) = self.by_address.get(&dst).copied() else {
                    self.drops.no_route += 1;
                    continue;
                };
                let Some(peer) = self.peers.get_mut(&id) else {
                    self.drops.no_route += 1;
                    continue;
                };
                let r = if mss::is_tcp_syn(p) {
                    self.deliver.clear();
                    self.deliver.extend_from_slice(p);
                    mss::clamp(&mut self.deliver, self.mss);
                    peer.session.send(now, &self.deliver)
                } else {
                    peer.session.send(now, p)
                };
                if r.is_err() {
                    self.drops.no_route += 1;
                }
                if self.touched.last() != Some(&id) {
                    self.touched.push(id);
                }
            }
            // GSO runs stay open across reads (TCP ACKs come one per read and would
            // otherwise leave one per sendmsg); they leave when the device is drained or
            // the budget is spent.
            self.output_queued(now);
        }
        self.tx.flush(&self.sockets);
        Ok(true)
    }

    /// Pulls datagrams, deliveries and events out of every session touched this turn, and
    /// sends.
    fn output(&mut self, now: Instant) {
        self.output_queued(now);
        self.tx.flush(&self.sockets);
    }

    /// [`Server::output`] without sending the GSO runs that are not full yet.
    fn output_queued(&mut self, now: Instant) {
        self.touched.sort_unstable();
        self.touched.dedup();
        std::mem::swap(&mut self.touched, &mut self.touched_now);
        self.touched.clear();
        for k in 0..self.touched_now.len() {
            let id = self.touched_now[k];
            let Some(p) = self.peers.get_mut(&id) else {
                continue;
            };
            let headroom = self.sec.headroom();
            let overhead = self.sec.overhead();
            while let Some(t) = p.session.poll_transmit(now, &mut self.scratch[headroom..]) {
                let Some(Some((to, from))) = p.remotes.get(usize::from(t.path)).copied() else {
                    // The gateway has not been heard on this path yet.
                    continue;
                };
                let dest = Dest {
                    socket: 0,
                    to,
                    from,
                };
                let slot = self.tx.slot(dest, t.len + overhead, &self.sockets);
                let n = (headroom + t.len).min(slot.len());
                slot[..n].copy_from_slice(&self.scratch[..n]);
                // The one place outgoing datagrams are sealed: counter and header now, the
                // encryption with the rest of the batch before it is sent.
                match self.sec.seal_deferred(now, id, t.path, slot, t.len) {
                    Some((n, Some(key))) => self.tx.commit_sealing(dest, n, key),
                    Some((n, None)) => self.tx.commit(dest, n),
                    None => self.drops.send_errors += 1,
                }
            }
            while p.session.poll_deliver(&mut self.deliver) {
                // Isolation: a gateway sends only as its own address.
                if ipv4_src(&self.deliver) != Some(p.address) {
                    self.drops.spoofed += 1;
                    continue;
                }
                if mss::is_tcp_syn(&self.deliver) {
                    mss::clamp(&mut self.deliver, self.mss);
                }
                if self.tun.queue(&self.deliver).is_err() {
                    self.drops.tun_errors += 1;
                }
            }
            while let Some(e) = p.session.poll_event() {
                match e {
                    Event::PathUp(path) => {
                        tracing::info!(gateway = %p.name, path, "path up")
                    }
                    Event::PathDown(path) => {
                        tracing::warn!(gateway = %p.name, path, "path down")
                    }
                    _ => {}
                }
            }
        }
    }

    /// Without encryption, sessions silent for [`IDLE_EXPIRY`] end (with it, the security
    /// layer closes idle sessions).
    fn expire(&mut self, now: Instant) {
        if !matches!(self.sec, ServerSecurity::Plaintext) {
            return;
        }
        let idle: Vec<u32> = self
            .peers
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.last_rx) > IDLE_EXPIRY)
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            if let Some(p) = self.peers.remove(&id) {
                tracing::info!(gateway = %p.name, session = id, "gateway idle; session ended");
                self.release(&p);
            }
        }
    }

    fn snapshot(&mut self, now: Instant) {
        let us = now.as_micros();
        let mut sessions: Vec<SessionStatus> = self
            .peers
            .iter_mut()
            .map(|(id, p)| {
                let st = p.session.stats();
                let paths = st
                    .paths
                    .iter()
                    .map(|ps| {
                        let i = usize::from(ps.id);
                        if p.rates.len() <= i {
                            p.rates.resize(i + 1, Default::default());
                        }
                        let (tx, rx) = &mut p.rates[i];
                        let remote = p.remotes.get(i).copied().flatten();
                        PathStatus {
                            id: ps.id,
                            name: format!("path {}", ps.id),
                            state: status::path_state(ps, remote.is_some()).to_owned(),
                            peer: remote.map(|(a, _)| a.to_string()),
                            local: remote.and_then(|(_, l)| l).map(|l| l.to_string()),
                            tx_bps: tx.update(ps.tx_bytes, us),
                            rx_bps: rx.update(ps.rx_bytes, us),
                            rtt_ms: ps.srtt_ms,
                            tx_loss: ps.tx_loss,
                            rx_loss: ps.rx_loss,
                            capacity_bps: ps.tx_capacity_bps,
                            tx_bytes: ps.tx_bytes,
                            rx_bytes: ps.rx_bytes,
                            tx_packets: ps.tx_packets,
                            rx_packets: ps.rx_packets,
                            metered: false,
                            metered_bytes: 0,
                            tx_stalls: ps.tx_stalls,
                            tx_revivals: ps.tx_revivals,
                            meter: None,
                        }
                    })
                    .collect();
                SessionStatus {
                    session_id: *id,
                    peer: p.name.clone(),
                    tunnel_address: Some(p.address.to_string()),
                    established: true,
                    uptime_s: now.saturating_duration_since(p.started).as_secs_f64(),
                    paths,
                    inner_tx_packets: st.sent_packets,
                    inner_tx_bytes: st.sent_bytes,
                    inner_rx_packets: st.delivered_packets,
                    inner_rx_bytes: st.delivered_bytes,
                    recovered: st.recovered,
                    holes_skipped: st.reorder.holes_skipped,
                    failover_resent: st.failover_resent,
                    engine: serde_json::to_value(&st).ok(),
                }
            })
            .collect();
        sessions.sort_by(|a, b| a.peer.cmp(&b.peer));
        let tun = self.tun.stats();
        let mut drops = self.drops.clone();
        drops.send_errors += self.tx.stats.errors;
        drops.tun_errors += tun.tx_errors + tun.tx_oversize + tun.rx_errors;
        let s = Status {
            role: "server".to_owned(),
            tun: self.cfg.tun.clone(),
            mtu: self.cfg.mtu,
            encrypted: !self.cfg.plaintext,
            offload: self.tun.offload(),
            uptime_s: now.as_secs_f64() - 1.0,
            sessions,
            drops,
            security: match &self.sec {
                ServerSecurity::Plaintext => None,
                ServerSecurity::Noise(s) => serde_json::to_value(s.stats()).ok(),
            },
            io: status::IoStatus {
                tun_reads: tun.reads,
                tun_rx_packets: tun.rx_packets,
                tun_writes: tun.writes,
                tun_tx_packets: tun.tx_packets,
                udp_sends: self.tx.stats.sends,
                udp_tx_datagrams: self.tx.stats.datagrams,
                udp_recvs: self.udp_recvs,
                udp_rx_datagrams: self.udp_rx_datagrams,
            },
        };
        if let Ok(mut g) = self.shared.lock() {
            *g = s;
        }
    }
}

impl Server {
    /// Makes a session for gateway `name` (id `id`) with `paths` paths.
    fn open_session(
        &mut self,
        now: Instant,
        id: u32,
        name: String,
        fixed: Option<Ipv4Addr>,
        paths: u8,
        from: SocketAddr,
    ) -> bool {
        if self.peers.len() >= self.cfg.max_gateways {
            self.drops.table_full += 1;
            return false;
        }
        let address = match fixed {
            Some(a) => a,
            None => match self.free.pop() {
                Some(a) => a,
                None => {
                    self.drops.table_full += 1;
                    tracing::warn!(gateway = %name, "address pool exhausted");
                    return false;
                }
            },
        };
        let mut c = config::engine_config(&self.cfg.engine, self.cfg.mtu, id);
        c.datagram_overhead = udp_overhead(from) + self.sec.overhead();
        c.seed = u64::from(crate::system::random_u32());
        c.flow_hash_seed = crate::system::random_u64();
        let n = paths.clamp(1, MAX_PATHS);
        let pc: Vec<PathConfig> = (0..n)
            // Learned: the gateway's reports carry its hints or its measurements, and what
            // arrives here is measured (reported as unknown until then).
            .map(PathConfig::learned)
            .collect();
        let Ok(mut session) = Session::new(c, Role::Server, &pc, now) else {
            return false;
        };
        session.set_tunnel_address(Some((address, self.cfg.address.prefix_len())));
        tracing::info!(gateway = %name, session = id, %address, paths = n, %from, "gateway connected");
        if let Some(old) = self.by_address.insert(address, id) {
            // The same gateway (fixed address) reconnected with a new session.
            self.peers.remove(&old);
        }
        self.peers.insert(
            id,
            Peer {
                name,
                session,
                address,
                remotes: vec![None; usize::from(n)],
                started: now,
                last_rx: now,
                rates: Vec::new(),
                owner: None,
            },
        );
        true
    }
}

/// The crypto thread `name` when the daemon encrypts.
fn crypto_pool(cfg: &ServerConfig, name: &str) -> Result<Option<CryptoPool>, DaemonError> {
    if cfg.plaintext {
        return Ok(None);
    }
    Ok(Some(CryptoPool::new(name)?))
}

fn ipv4_dst(p: &[u8]) -> Option<Ipv4Addr> {
    (p.first()? >> 4 == 4).then_some(())?;
    let b: [u8; 4] = p.get(16..20)?.try_into().ok()?;
    Some(Ipv4Addr::from(b))
}

fn ipv4_src(p: &[u8]) -> Option<Ipv4Addr> {
    (p.first()? >> 4 == 4).then_some(())?;
    let b: [u8; 4] = p.get(12..16)?.try_into().ok()?;
    Some(Ipv4Addr::from(b))
}

/// For the plaintext mode: the hello's path count, if `d` is a hello.
fn hello_paths(d: &[u8]) -> Option<u8> {
    match Datagram::parse(d).ok()?.message {
        Message::Hello(h) => Some(h.paths.unwrap_or(1)),
        _ => None,
    }
}
