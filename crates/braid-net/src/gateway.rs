//! `braid gateway`: the end with several uplinks. One event loop drives one engine
//! [`Session`]: inner packets from the TUN device go in with `send`, datagrams come out of
//! `poll_transmit` and leave on the uplink the engine chose, sealed at one call site;
//! datagrams arriving on an uplink are opened at one call site and handed to
//! `handle_datagram`, and what `poll_deliver` releases goes back to the TUN device.
//!
//! Uplinks come and go without a restart: the loop re-reads the interfaces when netlink
//! says something changed (and every few seconds); an uplink whose interface disappears or
//! goes down leaves the live session (its in-flight data resent on the others at once),
//! and joins again when its interface is back and its socket re-bound
//! (`gateway/membership.rs`). An uplink may reach the server through a relay (`relay =`
//! in its section): its datagrams go to the relay, which forwards them over its own
//! uplink; a relay that says it leaves takes the path out of the session the same way.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use braid_core::{Event, Instant, PathConfig, PathId, Role, Session};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::batch::{Dest, TxBatches};
use crate::clock::Clock;
use crate::config::{self, Binding, GatewayConfig};
use crate::crypto::{CryptoPool, RxOpen};
use crate::links::LinkWatch;
use crate::secure::{Deferred, GatewaySecurity, Opened};
use crate::status::{self, Drops, PathStatus, RateMeter, SessionStatus, Shared, Status};
use crate::tun::Tun;
use crate::udp::{RxBatch, UdpPath};
use crate::{mss, DaemonError, Shutdown};

mod membership;
mod meter;

const TUN: Token = Token(0);
const SIGNALS: Token = Token(1);
const NETLINK: Token = Token(2);
const UPLINK0: usize = 16;

/// Reads per source before the loop turns to the others (fairness; edge-triggered sources
/// left with data are revisited without waiting).
const BUDGET: usize = 64;
/// Interfaces are re-read at least this often.
const LINK_RESCAN: Duration = Duration::from_secs(2);
/// The status snapshot is refreshed this often.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(500);
/// A configured session that heard nothing for this long starts over with a new hello
/// (the server restarted and forgot it).
const SILENCE_RESTART: Duration = Duration::from_secs(10);
/// With encryption: an established session that heard nothing authenticated from the
/// server for this long starts a new handshake (at most once per this interval). The
/// engine's heartbeats are answered every 100 ms per path, so this is 50 missed answers on
/// every path: the server restarted (it then answers with a new session) or is
/// unreachable (the handshake retries until it answers).
const SERVER_SILENCE: Duration = Duration::from_secs(5);

struct Uplink {
    cfg: config::Uplink,
    ifindex: u32,
    link_up: bool,
    /// When a relay's path that left joins again (`gateway/membership.rs`).
    rejoin_at: Option<Instant>,
    tx_rate: RateMeter,
    rx_rate: RateMeter,
}

/// The running gateway.
pub struct Gateway {
    /// Split-TCP's stream bytes received per uplink, told to the session's capacity
    /// estimates (crate::split_tcp::arrivals).
    arrivals: Option<crate::split_tcp::arrivals::Arrivals>,
    cfg: GatewayConfig,
    clock: Clock,
    poll: Poll,
    tun: Tun,
    links: LinkWatch,
    uplinks: Vec<Uplink>,
    /// `sockets[i]`: uplink `i`'s socket, while its link exists.
    sockets: Vec<Option<UdpPath>>,
    /// The engine, once the handshake has given it a session id (at once without
    /// encryption).
    session: Option<Session>,
    session_started: Instant,
    sec: GatewaySecurity,
    tx: TxBatches,
    rx: RxBatch,
    /// Received data waiting for its AEAD (on two threads).
    rx_open: RxOpen<PathId>,
    scratch: Vec<u8>,
    deliver: Vec<u8>,
    last_rx: Instant,
    /// The earliest time the next handshake for [`SERVER_SILENCE`] may start.
    next_rehandshake: Instant,
    address: Option<(std::net::Ipv4Addr, u8)>,
    drops: Drops,
    udp_recvs: u64,
    udp_rx_datagrams: u64,
    shared: Shared,
    mss: u16,
    /// The metered uplinks' bytes this cap period (`gateway/meter.rs`).
    meter: crate::meter_ledger::Ledger,
    meter_saved: Instant,
}

impl Gateway {
    /// Takes split-TCP's stream arrivals per uplink from `a` into the session's capacity
    /// estimates.
    pub fn count_arrivals(&mut self, a: crate::split_tcp::arrivals::Arrivals) {
        self.arrivals = Some(a);
    }

    /// Sets everything up: TUN device, one socket per uplink, the security layer (which
    /// starts the handshake), the engine once the session is up. `mtu` is the checked inner
    /// MTU ([`GatewayConfig::check_system`]).
    pub fn new(cfg: GatewayConfig, mtu: u16, shared: Shared) -> Result<Gateway, DaemonError> {
        let clock = Clock::start();
        let now = clock.now();
        let sec = crate::secure::gateway_security(&cfg, now)?;
        let poll = Poll::new()?;
        let tun = Tun::open(&cfg.tun, mtu, None).map_err(|e| DaemonError::Tun {
            name: cfg.tun.clone(),
            source: e,
        })?;
        poll.registry()
            .register(&mut SourceFd(&tun.as_raw_fd()), TUN, Interest::READABLE)?;
        let links = LinkWatch::new()?;
        poll.registry().register(
            &mut SourceFd(&links.as_raw_fd()),
            NETLINK,
            Interest::READABLE,
        )?;
        let meter = crate::meter_ledger::Ledger::open(&cfg, Clock::unix_time().as_secs())
            .map_err(|e| DaemonError::Setup(format!("{}: {e}", cfg.file)))?;
        let session = match sec {
            GatewaySecurity::Plaintext => {
                Some(new_session(&cfg, mtu, 0, crate::system::random_u32(), now)?)
            }
            GatewaySecurity::Noise(_) => None,
        };
        let uplinks = cfg
            .uplinks
            .iter()
            .map(|u| Uplink {
                cfg: u.clone(),
                ifindex: 0,
                link_up: false,
                rejoin_at: None,
                tx_rate: RateMeter::default(),
                rx_rate: RateMeter::default(),
            })
            .collect();
        let scratch = vec![0; 256 + 2200 + usize::from(mtu) + braid_secure::MAX_HANDSHAKE_LEN];
        let mut g = Gateway {
            arrivals: None,
            mss: mss::mss_for_mtu(mtu),
            clock,
            poll,
            tun,
            links,
            sockets: (0..cfg.uplinks.len()).map(|_| None).collect(),
            uplinks,
            session,
            session_started: now,
            sec,
            tx: TxBatches::new(64, crypto_pool(&cfg, "braid-seal")?),
            rx: RxBatch::new(),
            rx_open: RxOpen::new(crypto_pool(&cfg, "braid-open")?),
            scratch,
            deliver: Vec::with_capacity(usize::from(mtu) + 64),
            last_rx: now,
            next_rehandshake: now,
            address: None,
            drops: Drops::default(),
            udp_recvs: 0,
            udp_rx_datagrams: 0,
            shared,
            meter,
            meter_saved: now,
            cfg,
        };
        g.give_caps(now, None);
        g.rescan_links();
        tracing::info!(
            tun = %g.cfg.tun,
            mtu,
            offload = g.tun.offload(),
            server = %g.cfg.server_endpoint,
            uplinks = g.uplinks.len(),
            encrypted = !g.cfg.plaintext,
            "gateway started"
        );
        Ok(g)
    }

    /// Runs until `shutdown` says stop (SIGINT or SIGTERM).
    pub fn run(&mut self, shutdown: &mut Shutdown) -> Result<(), DaemonError> {
        shutdown.register(self.poll.registry(), SIGNALS)?;
        let mut events = Events::with_capacity(64);
        let mut pending = vec![false; UPLINK0 + self.uplinks.len()];
        let mut next_rescan = self.clock.now() + LINK_RESCAN;
        let mut next_snapshot = self.clock.now();
        let mut next_rejoin = Instant::MAX;
        loop {
            let now = self.clock.now();
            let busy = pending.iter().any(|p| *p);
            let wake = self
                .session
                .as_ref()
                .and_then(Session::poll_timeout)
                .unwrap_or(Instant::MAX)
                .min(self.sec.timeout())
                .min(next_rescan)
                .min(next_rejoin)
                .min(next_snapshot)
                .min(if self.stream_metered() {
                    now + crate::split_tcp::arrivals::METER_TICK
                } else {
                    Instant::MAX
                });
            let timeout = if busy {
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
                        self.save_meter();
                        return Ok(());
                    }
                    NETLINK if self.links.drain() => self.rescan_links(),
                    SIGNALS if shutdown.take_reload() => {
                        tracing::info!("SIGHUP: the gateway re-reads nothing at runtime; restart it to apply a changed config")
                    }
                    SIGNALS | NETLINK => {}
                    Token(t) if t < pending.len() => pending[t] = true,
                    _ => {}
                }
            }
            let now = self.clock.now();
            if pending[TUN.0] {
                pending[TUN.0] = self.drain_tun(now)?;
            }
            for i in 0..self.uplinks.len() {
                if pending[UPLINK0 + i] {
                    pending[UPLINK0 + i] = self.drain_uplink(i, now);
                }
            }
            let now = self.clock.now();
            next_rejoin = self.rejoin_due(now);
            self.rehandshake_if_silent(now);
            if let GatewaySecurity::Noise(g) = &mut self.sec {
                g.handle_timeout(now);
            }
            if let Some(s) = self.session.as_mut() {
                s.handle_timeout(now);
            }
            self.meter_stream(now);
            self.transmit(now);
            self.deliver()?;
            self.handle_events();
            if now >= next_rescan {
                next_rescan = now + LINK_RESCAN;
                self.rescan_links();
            }
            if matches!(self.sec, GatewaySecurity::Plaintext)
                && now.saturating_duration_since(self.last_rx) > SILENCE_RESTART
            {
                self.restart_session(now)?;
            }
            if now >= next_snapshot {
                next_snapshot = now + SNAPSHOT_EVERY;
                self.snapshot(now);
            }
        }
    }

    /// Reads inner packets from the TUN device into the engine. True when the budget ran
    /// out with packets maybe still waiting.
    fn drain_tun(&mut self, now: Instant) -> Result<bool, DaemonError> {
        for _ in 0..BUDGET {
            let n = self.tun.read_batch()?;
            if n == 0 {
                self.tx.flush(&self.sockets);
                return Ok(false);
            }
            let Some(session) = self.session.as_mut() else {
                // No session yet (handshake under way): nowhere to send.
                self.drops.no_route += n as u64;
                continue;
            };
            for i in 0..n {
                let p = self.tun.packet(i);
                // `send` copies the packet; clamping needs it mutable, so clamp a copy of
                // SYNs only (rare), the rest go straight in.
                let r = if mss::is_tcp_syn(p) {
                    self.deliver.clear();
                    self.deliver.extend_from_slice(p);
                    mss::clamp(&mut self.deliver, self.mss);
                    session.send(now, &self.deliver)
                } else {
                    session.send(now, p)
                };
                if r.is_err() {
                    self.drops.no_route += 1;
                }
            }
            // GSO runs stay open across reads (a TSO super-packet of 48 datagrams would
            // otherwise leave as one full run and a short one); they leave when the device
            // is drained or the budget is spent.
            self.queue_transmits(now);
        }
        self.tx.flush(&self.sockets);
        Ok(true)
    }

    /// Hands split-TCP's stream traffic per uplink to the session's metering and gives
    /// back what it lets the stream send on each ([`crate::split_tcp::arrivals`]).
    fn meter_stream(&mut self, now: Instant) {
        let (Some(a), Some(s)) = (&self.arrivals, self.session.as_mut()) else {
            return;
        };
        for i in 0..self.uplinks.len() {
            let path = i as PathId;
            a.meter(i, |t| {
                s.note_foreign_traffic(now, path, t.sent, t.acked, t.full);
                s.stream_allowance(now, path)
            });
        }
    }

    /// Whether split-TCP's stream runs beside a metering session.
    fn stream_metered(&self) -> bool {
        self.arrivals.is_some() && self.session.as_ref().is_some_and(Session::is_metering)
    }

    /// Receives datagrams on uplink `i` into the engine. True when the budget ran out.
    fn drain_uplink(&mut self, i: usize, now: Instant) -> bool {
        let path = i as PathId;
        if let (Some(a), Some(s)) = (&self.arrivals, self.session.as_mut()) {
            let foreign = a.take(i);
            if foreign > 0 {
                s.note_foreign_arrivals(path, foreign);
            }
        }
        let mut rx = std::mem::take(&mut self.rx);
        let mut more = true;
        for _ in 0..BUDGET / 4 {
            let Some(sock) = self.sockets[i].as_ref() else {
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
                    tracing::debug!(uplink = %self.uplinks[i].cfg.name, error = %e, "receive failed");
                    more = false;
                    break;
                }
            };
            self.udp_recvs += 1;
            let mut ro = std::mem::take(&mut self.rx_open);
            let relay = self.uplinks[i].cfg.relay;
            let endpoint = self.uplinks[i].cfg.endpoint(self.cfg.server_endpoint);
            let mut relay_left = false;
            for g in 0..n {
                let (meta, range) = rx.group_range(g);
                if self.cfg.plaintext && meta.addr != endpoint {
                    self.drops.unknown_session += 1;
                    continue;
                }
                let stride = meta.stride.max(1);
                let mut start = range.start;
                while start < range.end {
                    let end = (start + stride).min(range.end);
                    self.udp_rx_datagrams += 1;
                    let d = &mut rx.bytes_mut()[start..end];
                    if let Some(leave) = membership::relay_says(relay, meta.addr, d) {
                        relay_left |= leave;
                        start = end;
                        continue;
                    }
                    // The one place received datagrams are opened: checked here, decrypted
                    // below for the whole batch at once, finished in arrival order.
                    match self.sec.open_deferred(now, path, d) {
                        Ok(Deferred::Ready(o)) => self.receive(now, path, d, Ok(o)),
                        Ok(Deferred::Open { key, header }) => {
                            ro.push(path, start..end, key, header)
                        }
                        Err(e) => self.receive(now, path, d, Err(e)),
                    }
                    start = end;
                }
            }
            if !ro.is_empty() {
                ro.open_all(rx.bytes_mut());
                for k in 0..ro.len() {
                    let (path, range, result) = ro.result(k);
                    let opened = self.sec.finish_open(now, result);
                    self.receive(now, path, &mut rx.bytes_mut()[range], opened);
                }
                ro.clear();
            }
            self.rx_open = ro;
            if relay_left {
                self.relay_left(i, now);
            }
            self.deliver_quiet();
            self.transmit(now);
        }
        self.rx = rx;
        more
    }

    /// One datagram from uplink `path`, opened (or not) by the security layer.
    fn receive(
        &mut self,
        now: Instant,
        path: PathId,
        d: &mut [u8],
        opened: Result<Opened, braid_secure::Dropped>,
    ) {
        match opened {
            Ok(Opened::Data { range, .. }) => {
                let Some(session) = self.session.as_mut() else {
                    self.drops.unknown_session += 1;
                    return;
                };
                if session.handle_datagram(now, path, &d[range]).is_ok() {
                    self.last_rx = now;
                } else {
                    self.drops.engine_rejected += 1;
                }
            }
            Ok(Opened::Keepalive { .. }) => self.last_rx = now,
            Ok(Opened::Handshake | Opened::Reply(_)) => self.security_events(now),
            Err(e) => crate::secure::count(&mut self.drops, &e),
        }
    }

    /// A new handshake after [`SERVER_SILENCE`] without anything from the server.
    fn rehandshake_if_silent(&mut self, now: Instant) {
        let GatewaySecurity::Noise(g) = &mut self.sec else {
            return;
        };
        let silent = now.saturating_duration_since(self.last_rx);
        if self.session.is_none() || silent < SERVER_SILENCE || now < self.next_rehandshake {
            return;
        }
        self.next_rehandshake = now + SERVER_SILENCE;
        if g.rehandshake(now) {
            tracing::warn!(
                silent_s = silent.as_secs(),
                "nothing heard from the server; handshaking again"
            );
        }
    }

    /// Sessions established and closed by the security layer: the engine follows.
    fn security_events(&mut self, now: Instant) {
        loop {
            let GatewaySecurity::Noise(g) = &mut self.sec else {
                return;
            };
            let Some(e) = g.poll_event() else {
                return;
            };
            match e {
                braid_secure::Event::Established { session, .. } => {
                    let id = session.get();
                    if self.session.as_ref().map(|s| s.config().session_id) == Some(id) {
                        continue;
                    }
                    tracing::info!(session = %session, "handshake done; session established");
                    match new_session(
                        &self.cfg,
                        self.tun.mtu(),
                        braid_secure::DATA_OVERHEAD,
                        id,
                        now,
                    ) {
                        Ok(s) => {
                            self.replace_session(Some(s), now);
                            self.session_started = now;
                            self.last_rx = now;
                        }
                        Err(e) => tracing::error!(error = %e, "cannot start the engine"),
                    }
                }
                braid_secure::Event::Closed { session, reason } => {
                    tracing::warn!(session = %session, ?reason, "session closed");
                    if self.session.as_ref().map(|s| s.config().session_id) == Some(session.get()) {
                        // The TUN device keeps its address: a new session gets the same.
                        self.replace_session(None, now);
                    }
                }
                braid_secure::Event::Rekeyed { session, epoch } => {
                    tracing::debug!(session = %session, epoch, "rekeyed")
                }
            }
        }
    }

    /// Moves everything the security layer and the engine want to send into GSO runs and
    /// sends them.
    fn transmit(&mut self, now: Instant) {
        self.queue_transmits(now);
        self.tx.flush(&self.sockets);
    }

    /// [`Gateway::transmit`] without sending the runs that are not full yet.
    fn queue_transmits(&mut self, now: Instant) {
        if let GatewaySecurity::Noise(g) = &mut self.sec {
            while let Some(t) = g.poll_transmit(now, &mut self.scratch) {
                let i = usize::from(t.path);
                if self.sockets.get(i).is_none_or(Option::is_none) {
                    continue;
                }
                let dest = Dest {
                    socket: i,
                    to: self.uplinks[i].cfg.endpoint(self.cfg.server_endpoint),
                    from: None,
                };
                let slot = self.tx.slot(dest, t.len, &self.sockets);
                let n = slot.len().min(t.len);
                slot[..n].copy_from_slice(&self.scratch[..n]);
                self.tx.commit(dest, n);
            }
            self.security_events(now);
        }
        let headroom = self.sec.headroom();
        let overhead = self.sec.overhead();
        if let Some(session) = self.session.as_mut() {
            while let Some(t) = session.poll_transmit(now, &mut self.scratch[headroom..]) {
                let i = usize::from(t.path);
                if self.sockets.get(i).is_none_or(Option::is_none) {
                    self.drops.send_errors += 1;
                    continue;
                }
                let dest = Dest {
                    socket: i,
                    to: self.uplinks[i].cfg.endpoint(self.cfg.server_endpoint),
                    from: None,
                };
                let slot = self.tx.slot(dest, t.len + overhead, &self.sockets);
                let n = (headroom + t.len).min(slot.len());
                slot[..n].copy_from_slice(&self.scratch[..n]);
                // The one place outgoing datagrams are sealed: counter and header now, the
                // encryption with the rest of the batch before it is sent.
                match self.sec.seal_deferred(now, t.path, slot, t.len) {
                    Some((n, Some(key))) => self.tx.commit_sealing(dest, n, key),
                    Some((n, None)) => self.tx.commit(dest, n),
                    None => self.drops.send_errors += 1,
                }
            }
        }
    }

    /// Hands delivered inner packets to the TUN device and writes them.
    fn deliver(&mut self) -> Result<(), DaemonError> {
        self.deliver_quiet();
        self.tun.flush()?;
        Ok(())
    }

    fn deliver_quiet(&mut self) {
        let Some(session) = self.session.as_mut() else {
            return;
        };
        while session.poll_deliver(&mut self.deliver) {
            if mss::is_tcp_syn(&self.deliver) {
                mss::clamp(&mut self.deliver, self.mss);
            }
            if self.tun.queue(&self.deliver).is_err() {
                self.drops.tun_errors += 1;
            }
        }
    }

    fn handle_events(&mut self) {
        while let Some(e) = self.session.as_mut().and_then(Session::poll_event) {
            match e {
                Event::Configured { address, mtu, .. } => {
                    tracing::info!(?address, ?mtu, "server configured the tunnel");
                    if let Some(a) = address {
                        self.set_address(a);
                    }
                }
                Event::PathUp(p) => tracing::info!(uplink = %self.path_name(p), "path up"),
                Event::PathDown(p) => tracing::warn!(uplink = %self.path_name(p), "path down"),
                Event::CapacityChanged { path, bps } => {
                    tracing::debug!(uplink = %self.path_name(path), bps, "capacity estimate")
                }
                _ => {}
            }
        }
    }

    fn path_name(&self, p: PathId) -> &str {
        self.uplinks
            .get(usize::from(p))
            .map_or("?", |u| u.cfg.name.as_str())
    }

    fn set_address(&mut self, a: (std::net::Ipv4Addr, u8)) {
        if self.address == Some(a) {
            return;
        }
        if let Err(e) = self.tun.add_address(a.0, a.1) {
            tracing::error!(address = %a.0, error = %e, "cannot set the tunnel address");
            return;
        }
        self.address = Some(a);
        for r in &self.cfg.routes {
            crate::system::route_replace(&r.to_string(), &self.cfg.tun);
        }
    }

    /// Re-reads the interfaces: (re)binds uplinks whose link appeared or changed; uplinks
    /// whose link went away leave the session, those whose link came back join it.
    fn rescan_links(&mut self) {
        let ifs = config::interfaces();
        let server = self.cfg.server_endpoint;
        let mut changed = Vec::new();
        for (i, (u, socket)) in self.uplinks.iter_mut().zip(&mut self.sockets).enumerate() {
            let (present, index, up) = match &u.cfg.binding {
                Binding::Interface(n) => match ifs.get(n) {
                    Some(info) => (true, info.index, info.up),
                    None => (false, 0, false),
                },
                Binding::Address(a) => match ifs.values().find(|f| f.addresses.contains(a)) {
                    Some(info) => (true, info.index, info.up),
                    None => (false, 0, false),
                },
            };
            if up != u.link_up {
                if up {
                    tracing::info!(uplink = %u.cfg.name, "link up");
                } else {
                    tracing::warn!(uplink = %u.cfg.name, "link down");
                }
                u.link_up = up;
                changed.push(i);
            }
            let rebind = present && (socket.is_none() || index != u.ifindex);
            if !present && socket.is_some() {
                tracing::warn!(uplink = %u.cfg.name, "link gone; socket closed");
                *socket = None;
                changed.push(i);
            }
            if rebind {
                match UdpPath::uplink(&u.cfg.binding, u.cfg.endpoint(server)) {
                    Ok(s) => {
                        let reg = self.poll.registry().register(
                            &mut SourceFd(&s.as_raw_fd()),
                            Token(UPLINK0 + i),
                            Interest::READABLE,
                        );
                        if let Err(e) = reg {
                            tracing::error!(uplink = %u.cfg.name, error = %e, "cannot watch socket");
                            continue;
                        }
                        tracing::info!(uplink = %u.cfg.name, local = ?s.local_addr().ok(), "uplink bound");
                        *socket = Some(s);
                        u.ifindex = index;
                        changed.push(i);
                    }
                    Err(e) => {
                        tracing::warn!(uplink = %u.cfg.name, error = %e, "cannot bind uplink yet");
                    }
                }
            }
        }
        let now = self.clock.now();
        changed.dedup();
        for i in changed {
            if self.uplinks[i].link_up && self.sockets[i].is_some() {
                self.join_path(i, now);
            } else {
                self.leave_path(i, now, "link gone or down");
            }
        }
    }

    fn restart_session(&mut self, now: Instant) -> Result<(), DaemonError> {
        tracing::warn!(
            silent_s = SILENCE_RESTART.as_secs(),
            "nothing heard from the server; starting a new session"
        );
        let s = new_session(
            &self.cfg,
            self.tun.mtu(),
            0,
            crate::system::random_u32(),
            now,
        )?;
        self.replace_session(Some(s), now);
        self.session_started = now;
        self.last_rx = now;
        Ok(())
    }

    fn snapshot(&mut self, now: Instant) {
        let st = self
            .session
            .as_ref()
            .map(Session::stats)
            .unwrap_or_default();
        let us = now.as_micros();
        self.meter_tick(now, &st.metered);
        let meters: Vec<_> = (0..self.uplinks.len())
            .map(|i| self.meter_status(i, &st.metered))
            .collect();
        let in_session: Vec<bool> = (0..self.uplinks.len())
            .map(|i| self.in_session(i))
            .collect();
        let left = braid_core::PathStats::default();
        let paths = (0..self.uplinks.len())
            .map(|i| {
                let p = st
                    .paths
                    .iter()
                    .find(|p| usize::from(p.id) == i)
                    .unwrap_or(&left);
                let has_socket = self.sockets[i].is_some();
                let u = &mut self.uplinks[i];
                let tx_bps = u.tx_rate.update(p.tx_bytes, us);
                let rx_bps = u.rx_rate.update(p.rx_bytes, us);
                let link = u.link_up && has_socket;
                PathStatus {
                    id: i as PathId,
                    name: u.cfg.name.clone(),
                    state: if link && !in_session[i] {
                        // A relay's path out of the session until it joins again.
                        "left"
                    } else {
                        status::path_state(p, link)
                    }
                    .to_owned(),
                    peer: Some(u.cfg.endpoint(self.cfg.server_endpoint).to_string()),
                    local: Some(match &u.cfg.binding {
                        Binding::Interface(n) => n.clone(),
                        Binding::Address(a) => a.to_string(),
                    }),
                    tx_bps,
                    rx_bps,
                    rtt_ms: p.srtt_ms,
                    tx_loss: p.tx_loss,
                    rx_loss: p.rx_loss,
                    capacity_bps: p.tx_capacity_bps,
                    tx_bytes: p.tx_bytes,
                    rx_bytes: p.rx_bytes,
                    tx_packets: p.tx_packets,
                    rx_packets: p.rx_packets,
                    metered: u.cfg.metered,
                    metered_bytes: if u.cfg.metered {
                        p.tx_bytes + p.rx_bytes
                    } else {
                        0
                    },
                    tx_stalls: p.tx_stalls,
                    tx_revivals: p.tx_revivals,
                    meter: meters.get(i).cloned().flatten(),
                }
            })
            .collect();
        let tun = self.tun.stats();
        let mut drops = self.drops.clone();
        drops.engine_rejected += st.malformed_datagrams + st.wrong_session + st.unknown_path;
        drops.no_route += st.send_queue_drops + st.oversize_drops;
        drops.send_errors += self.tx.stats.errors;
        drops.tun_errors += tun.tx_errors + tun.tx_oversize + tun.rx_errors;
        let s = Status {
            role: "gateway".to_owned(),
            tun: self.cfg.tun.clone(),
            mtu: self.tun.mtu(),
            encrypted: !self.cfg.plaintext,
            offload: self.tun.offload(),
            uptime_s: now.as_secs_f64() - 1.0,
            sessions: vec![SessionStatus {
                session_id: self.session.as_ref().map_or(0, |s| s.config().session_id),
                peer: self.cfg.server_endpoint.to_string(),
                tunnel_address: self.address.map(|(a, p)| format!("{a}/{p}")),
                established: self.session.is_some() && self.address.is_some(),
                uptime_s: now
                    .saturating_duration_since(self.session_started)
                    .as_secs_f64(),
                paths,
                inner_tx_packets: st.sent_packets,
                inner_tx_bytes: st.sent_bytes,
                inner_rx_packets: st.delivered_packets,
                inner_rx_bytes: st.delivered_bytes,
                recovered: st.recovered,
                holes_skipped: st.reorder.holes_skipped,
                failover_resent: st.failover_resent,
                engine: serde_json::to_value(&st).ok(),
            }],
            drops,
            security: match &self.sec {
                GatewaySecurity::Plaintext => None,
                GatewaySecurity::Noise(g) => serde_json::to_value(g.stats()).ok(),
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

/// The crypto thread `name` when the daemon encrypts.
fn crypto_pool(cfg: &GatewayConfig, name: &str) -> Result<Option<CryptoPool>, DaemonError> {
    if cfg.plaintext {
        return Ok(None);
    }
    Ok(Some(CryptoPool::new(name)?))
}

fn new_session(
    cfg: &GatewayConfig,
    mtu: u16,
    envelope_overhead: usize,
    session_id: u32,
    now: Instant,
) -> Result<Session, DaemonError> {
    let paths: Vec<PathConfig> = (cfg.uplinks.iter().enumerate())
        .map(|(i, u)| membership::path_config(u, i))
        .collect();
    let mut c = config::engine_config(&cfg.engine, mtu, session_id);
    c.metering = metered_uplinks(cfg, Clock::unix_time().as_secs());
    // As the split-TCP service decided it (`split_tcp::SplitTcp::gateway`).
    c.tcp_transport = config::tcp_transport(&cfg.engine);
    c.datagram_overhead = udp_overhead(cfg.server_endpoint) + envelope_overhead;
    c.seed = u64::from(crate::system::random_u32());
    c.flow_hash_seed = crate::system::random_u64();
    Ok(Session::new(c, Role::Gateway, &paths, now)?)
}

/// The engine's metering of the gateway's uplinks at `unix_s`, each cap whole: the
/// gateway then gives the session what the period left of it (`gateway/meter.rs`).
pub(crate) fn metered_uplinks(
    cfg: &GatewayConfig,
    unix_s: u64,
) -> Option<braid_core::metered::MeteringConfig> {
    let metered: Vec<_> = (cfg.uplinks.iter().enumerate())
        .filter_map(|(i, u)| {
            let m = u.metering?;
            Some(m.settings(i as PathId, unix_s, 0))
        })
        .collect();
    let mut c = braid_core::metered::MeteringSection::config(
        cfg.engine.metering.as_ref(),
        &cfg.engine.classes,
        &metered,
    )?;
    // The server budgets downloads on the metered uplinks from the Hello's metering.
    c.announce = !metered.is_empty();
    let classes = (c.classes_option(&cfg.engine.classes)).filter(|_| c.announce);
    if classes.is_some_and(|o| o.to_bytes().is_err()) {
        tracing::warn!(
            "the traffic classes' metered budgets do not fit the Hello (255 bytes, about 9 \
             classes with a port range each): the server budgets downloads for all the \
             traffic at once"
        );
    }
    Some(c)
}

/// IP and UDP header bytes for datagrams to `to`.
pub(crate) fn udp_overhead(to: SocketAddr) -> usize {
    match to.ip() {
        IpAddr::V4(_) => 28,
        IpAddr::V6(_) => 48,
    }
}
