//! Split-TCP in the simulator, as the daemons run it (docs/architecture.md, "Split-TCP
//! mode"): the TCP connections of a class with `transport = "split-tcp"` end at the
//! gateway, their bytes cross on braid's multipath stream (one congestion window per
//! path, `braid_core::stream` with the daemons' settings, `stream::split`), framed as
//! `braid_net::split_tcp` frames them, and the server opens the connection to the
//! internet host and relays.
//!
//! Each end is a TCP stack of the Linux-like model: the gateway's answers the client host
//! as the internet host (a transparent redirect), the server's connects to the internet
//! host from the server's own address ([`SERVER_ADDR`]), as the daemons do. The LAN hops
//! are ideal, as for the packet tunnel. Where the model is simpler than the daemons: no
//! per-connection CREDIT (the simulated hosts read at once, so a connection's bytes never
//! wait long for its socket), and no handshake or keys.
//!
//! The stream's datagrams share the paths' links with the tunnel's, tagged with
//! [`TAG`] before the chunk (the tunnel's start with the wire version); each end's
//! receiver counts them into its tunnel session's capacity estimates, as the daemons do
//! (`Session::note_foreign_arrivals`).

use std::collections::VecDeque;
use std::net::SocketAddr;

use braid_core::class::{ClassConfig, Transport};
use braid_core::stream::frame::{Frame, MAX_DATA};
use braid_core::stream::split::{
    acked_wire_bytes, receiver_config, stream_bytes_of_wire, stream_config, unsent_limit,
    STREAM_BUFFER,
};
use braid_core::stream::{StreamReceiver, StreamSender};
use braid_core::time::earliest;
use braid_core::{Instant, PathId};

use super::path_id;

use crate::host::packets::Packets;
use crate::host::tcp::{ConnId, Stack, State};
use crate::host::transport::Buffers;
use crate::host::INTERNET_ADDR;
use crate::{Packet, Rng};

/// The first byte of a stream datagram on a link (a tunnel datagram starts with the wire
/// version, 1).
pub const TAG: u8 = 0xB7;

/// The server's own address on the internet host's side: its connections to the internet
/// host come from it, as the daemon's come from the server's address, so they never
/// share ports with the client host's connections through the tunnel.
pub const SERVER_ADDR: [u8; 4] = [10, 1, 0, 1];

/// Socket buffers of the relayed connections' LAN legs.
const BUFFER: usize = 4 << 20;

fn buffers() -> Buffers {
    Buffers {
        rx: BUFFER,
        tx: BUFFER,
        nagle: false,
        initial_window: None,
        prism: false,
        sack: true,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Gateway,
    Server,
}

/// One relayed connection.
#[derive(Debug)]
struct Relay {
    /// The connection's number on the stream.
    conn: u32,
    id: ConnId,
    /// Dropped during this `relay` pass; removed at its end.
    gone: bool,
    /// The far end's bytes not yet taken by the socket.
    to_tcp: VecDeque<u8>,
    fin_received: bool,
    fin_sent: bool,
    closed: bool,
}

/// Counts of one end, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SplitStats {
    pub opened: u64,
    pub bytes_to_stream: u64,
    pub bytes_to_tcp: u64,
    pub broken_frames: u64,
}

/// One end of split-TCP.
pub struct SplitEnd {
    end: End,
    classes: Vec<ClassConfig>,
    tcp_transport: Transport,
    stack: Stack,
    /// The stack's packets towards the LAN host.
    out: Packets,
    tx: StreamSender,
    rx: StreamReceiver,
    inbuf: Vec<u8>,
    frame: Vec<u8>,
    relays: Relays,
    next_conn: u32,
    /// The connection whose bytes went onto the stream last.
    last_read: u32,
    read_buf: Vec<u8>,
    emit_buf: Vec<u8>,
    /// The instant of the latest `relay`, if it changed nothing and nothing reached this
    /// end since: `relay` would change nothing again ([`SplitEnd::relay`]).
    quiet: Option<Instant>,
    stats: SplitStats,
    /// Per path, what the stream sent and had acknowledged since [`SplitEnd::meter`].
    meter: Vec<Meter>,
}

/// One path's stream traffic not yet told to the tunnel's session ([`SplitEnd::meter`]).
#[derive(Clone, Copy, Debug, Default)]
struct Meter {
    sent: u64,
    datagrams: u64,
    /// The stream's acknowledged payload bytes when last told.
    acked: u64,
}

impl SplitEnd {
    /// The end `end` of split-TCP for `classes` and unclassified TCP crossing as
    /// `tcp_transport`, over `paths` paths, or `None` when nothing is split.
    pub fn new(
        end: End,
        classes: &[ClassConfig],
        tcp_transport: Transport,
        paths: usize,
        mtu: usize,
        seed: u64,
    ) -> Option<SplitEnd> {
        if !braid_core::class::any_split(classes, tcp_transport) {
            return None;
        }
        let (addr, label) = match end {
            End::Gateway => (INTERNET_ADDR, "split-gateway"),
            End::Server => (SERVER_ADDR, "split-server"),
        };
        Some(SplitEnd {
            end,
            classes: classes.to_vec(),
            tcp_transport,
            stack: Stack::new(addr, mtu, Rng::child(seed, label)),
            out: Packets::default(),
            tx: StreamSender::new(stream_config(), paths),
            rx: StreamReceiver::new(receiver_config()),
            inbuf: Vec::new(),
            frame: Vec::with_capacity(MAX_DATA + 16),
            relays: Relays::default(),
            next_conn: 1,
            last_read: 0,
            read_buf: Vec::new(),
            emit_buf: Vec::with_capacity(MAX_DATA + 16),
            quiet: None,
            stats: SplitStats::default(),
            meter: vec![Meter::default(); paths],
        })
    }

    pub fn stats(&self) -> SplitStats {
        self.stats
    }

    /// Whether a packet from this end's LAN host is split-TCP's: at the gateway, TCP that
    /// crosses as split-TCP (its first matching class's transport, or the session's for
    /// TCP in no class, as the daemons' redirect); at the
    /// server, the internet host's answer on one of this end's connections.
    pub fn claims(&self, packet: &[u8]) -> bool {
        let Some(info) = braid_core::flow::parse::parse(packet) else {
            return false;
        };
        if info.key.protocol != braid_core::flow::parse::PROTO_TCP {
            return false;
        }
        match self.end {
            End::Gateway => braid_core::class::splits(&self.classes, self.tcp_transport, &info),
            // Lingering connections included: their last segments are this end's too.
            End::Server => {
                info.key.dst == std::net::IpAddr::from(SERVER_ADDR)
                    && self
                        .stack
                        .has_conn(INTERNET_ADDR, info.key.src_port, info.key.dst_port)
            }
        }
    }

    /// A claimed packet from the LAN host, with whether its checksums hold as written
    /// (the LAN hop is ideal: then they need no verifying).
    pub fn ingress(&mut self, now: Instant, packet: Packet, checksums_verified: bool) {
        self.quiet = None;
        let accepted = self.stack.ingress_checked(
            now,
            packet,
            checksums_verified,
            &mut self.out,
            &mut |_, _| Some(buffers()),
        );
        if let (End::Gateway, Some((id, port, _))) = (self.end, accepted) {
            let conn = self.next_conn;
            self.next_conn += 1;
            let to = SocketAddr::from((INTERNET_ADDR, port));
            if self.emit(&Frame::Open { conn, to }) {
                self.stats.opened += 1;
                self.relays.insert(relay(conn, id));
            } else {
                self.stack.discard(id);
            }
        }
    }

    /// The next packet towards the LAN host, with whether its checksums hold as written.
    pub fn poll_lan(&mut self) -> Option<(Packet, bool)> {
        self.out.pop_checked()
    }

    /// A stream datagram (after [`TAG`]) that arrived on `path`.
    pub fn handle_chunk(&mut self, now: Instant, path: PathId, chunk: &[u8]) {
        self.quiet = None;
        match chunk.first() {
            Some(1 | 3) => self.rx.handle_datagram(now, path, chunk),
            Some(2 | 4) => self.tx.handle_datagram(now, path, chunk),
            _ => {}
        }
    }

    /// The next stream datagram, [`TAG`] first, into `out`, and its path.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PathId> {
        let path = self
            .rx
            .poll_transmit(now, &mut self.frame)
            .or_else(|| self.tx.poll_transmit(now, &mut self.frame))?;
        self.quiet = None;
        out.clear();
        out.push(TAG);
        out.extend_from_slice(&self.frame);
        if let Some(m) = self.meter.get_mut(usize::from(path)) {
            m.sent += out.len() as u64;
            m.datagrams += 1;
        }
        Some(path)
    }

    /// Tells this end's tunnel `session` what the stream did on each path since the last
    /// call (bytes on the wire with [`TAG`] and `overhead` per datagram) and limits each path to what
    /// its metering allows, as the daemons do (`braid_net::split_tcp`'s metered uplinks).
    /// Only where the session meters.
    pub fn meter(&mut self, now: Instant, session: &mut braid_core::Session, overhead: usize) {
        if !session.is_metering() {
            return;
        }
        for (i, m) in self.meter.iter_mut().enumerate() {
            let acked = self.tx.stats().acked_bytes[i];
            let acked_wire = acked_wire_bytes(acked - m.acked, overhead + 1);
            let sent = m.sent + m.datagrams * overhead as u64;
            m.acked = acked;
            (m.sent, m.datagrams) = (0, 0);
            let full = self.tx.window_full(i);
            session.note_foreign_traffic(now, path_id(i), sent, acked_wire, full);
            let allowance = (session.stream_allowance(now, path_id(i)))
                .map(|wire| stream_bytes_of_wire(wire, overhead + 1));
            let was = self.tx.is_held(i);
            self.tx.set_allowance(i, allowance);
            if self.tx.is_held(i) != was {
                self.quiet = None;
            }
        }
    }

    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let stream = earliest(self.tx.poll_timeout(), self.rx.poll_timeout());
        earliest(stream, self.stack.poll_at(now))
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.quiet = None;
        self.tx.handle_timeout(now);
        self.rx.handle_timeout(now);
        self.stack.egress(now, &mut self.out);
    }

    /// Moves bytes between the stream and the connections; true if anything moved.
    ///
    /// The simulation calls it at every round of moving packets at an instant; a call
    /// that changed nothing (no bytes read or written, no frame, no close, no timer or
    /// transmission in the stack) is not repeated at that instant until something reaches
    /// this end, since it would change nothing again.
    pub fn relay(&mut self, now: Instant) -> bool {
        if self.quiet == Some(now) {
            // Debug builds (the tests) run the pass anyway and check that it changes nothing.
            #[cfg(debug_assertions)]
            {
                let before = self.fingerprint();
                let moved = self.relay_pass(now);
                assert!(
                    !moved && self.quiet == Some(now) && self.fingerprint() == before,
                    "a split-TCP relay pass skipped as quiet would have changed something"
                );
            }
            return false;
        }
        self.relay_pass(now)
    }

    /// What a relay pass may change, for the debug check of [`SplitEnd::relay`]'s skip.
    #[cfg(debug_assertions)]
    fn fingerprint(&self) -> (SplitStats, usize, usize, usize, usize, usize, usize) {
        (
            self.stats,
            self.tx.buffered(),
            self.tx.unsent(),
            self.tx.waiting_beyond(),
            self.relays.len(),
            self.out.queued(),
            self.stack.lingering(),
        )
    }

    /// [`SplitEnd::relay`]'s work; sets `quiet` if it changed nothing.
    fn relay_pass(&mut self, now: Instant) -> bool {
        let before = (self.stats, self.tx.buffered(), self.relays.len());
        let waiting_before = self.tx.waiting_beyond();
        let mut changed = self.read_frames();
        // Reused buffer: `relay` runs at every step of the simulation. The relays are
        // visited by index; one dropped during the pass is marked and removed at its end.
        let mut buf = std::mem::take(&mut self.read_buf);
        buf.resize(MAX_DATA, 0);
        let n = self.relays.len();
        for i in 0..n {
            changed |= self.write_tcp(now, i);
        }
        // One frame per connection in turn, while the stream's unsent bytes are few; the
        // turn goes on where it stopped, so that a download does not take every opening.
        let start = self.relays.0.partition_point(|r| r.conn <= self.last_read);
        let mut idle = 0;
        for i in (start..n).chain(0..start).cycle() {
            if self.tx.unsent() >= unsent_limit(&self.tx) || idle == n {
                break;
            }
            if self.read_tcp(i, &mut buf) {
                self.last_read = self.relays.0[i].conn;
                idle = 0;
            } else {
                idle += 1;
            }
        }
        let waiting: usize = (self.relays.0.iter())
            .filter(|r| !r.gone)
            .filter_map(|r| self.stack.conn_ref(r.id).map(|c| c.readable()))
            .sum();
        self.tx.set_waiting_beyond(waiting);
        for i in 0..n {
            self.finish(i);
        }
        self.relays.0.retain(|r| !r.gone);
        self.read_buf = buf;
        changed |= self.stack.egress(now, &mut self.out);
        changed |= self.stack.reap(now);
        let moved = before != (self.stats, self.tx.buffered(), self.relays.len());
        changed |= moved || waiting != waiting_before;
        self.quiet = (!changed).then_some(now);
        moved
    }

    /// The far end's bytes into relay `i`'s socket, and its FIN once they are written; the
    /// relay is dropped when the connection is gone. True if it closed the socket (what
    /// else it does shows in the counts).
    fn write_tcp(&mut self, now: Instant, i: usize) -> bool {
        let r = &mut self.relays.0[i];
        if r.gone {
            return false;
        }
        let Some(c) = self.stack.conn(r.id) else {
            // Gone (reset by its host): the far end resets its side.
            r.gone = true;
            let conn = r.conn;
            self.emit(&Frame::Reset { conn });
            return true;
        };
        while !r.to_tcp.is_empty() {
            let (a, _) = r.to_tcp.as_slices();
            let n = c.write(a);
            if n == 0 {
                break;
            }
            r.to_tcp.drain(..n);
            self.stats.bytes_to_tcp += n as u64;
        }
        if r.to_tcp.is_empty() && r.fin_received && !r.closed {
            r.closed = true;
            self.stack.linger(now, r.id);
            return true;
        }
        false
    }

    /// One frame of relay `i`'s socket bytes onto the stream; true if one went.
    fn read_tcp(&mut self, i: usize, buf: &mut [u8]) -> bool {
        let r = &self.relays.0[i];
        if r.gone {
            return false;
        }
        let conn = r.conn;
        let Some(c) = self.stack.conn(r.id) else {
            return false;
        };
        let room = STREAM_BUFFER.saturating_sub(self.tx.buffered());
        if c.readable() == 0 || room < MAX_DATA + 16 {
            return false;
        }
        let n = c.read(buf);
        if n == 0 {
            return false;
        }
        self.stats.bytes_to_stream += n as u64;
        self.emit(&Frame::Data {
            conn,
            bytes: &buf[..n],
        })
    }

    /// FIN once relay `i`'s host finished sending and everything it sent is on the
    /// stream; the relay is dropped once the connection is over both ways.
    fn finish(&mut self, i: usize) {
        let Relay {
            conn,
            id,
            fin_sent,
            closed,
            gone,
            ..
        } = self.relays.0[i];
        if gone {
            return;
        }
        if fin_sent {
            if closed {
                self.relays.0[i].gone = true;
            }
            return;
        }
        let eof = self.stack.conn(id).is_none_or(|c| {
            c.readable() == 0
                && matches!(
                    c.state(),
                    State::CloseWait
                        | State::LastAck
                        | State::Closing
                        | State::TimeWait
                        | State::Closed
                )
        });
        if eof && self.emit(&Frame::Fin { conn }) {
            if closed {
                self.relays.0[i].gone = true;
            } else {
                self.relays.0[i].fin_sent = true;
            }
        }
    }

    /// The stream's bytes, framed: OPEN connects (server), DATA waits for its socket, FIN
    /// closes it once written, RESET drops it. True if any bytes came off the stream.
    fn read_frames(&mut self) -> bool {
        // Read straight into the frame buffer.
        if self.rx.read_append(&mut self.inbuf) == 0 {
            // Every whole frame in `inbuf` was taken when its last byte came.
            return false;
        }
        let mut at = 0;
        let mut opens = Vec::new();
        loop {
            let frame = match Frame::parse(&self.inbuf[at..]) {
                Ok(Some((f, n))) => {
                    at += n;
                    f
                }
                Ok(None) => break,
                Err(_) => {
                    // Never from this model's own frames; counted, and the rest dropped.
                    self.stats.broken_frames += 1;
                    at = self.inbuf.len();
                    break;
                }
            };
            match frame {
                Frame::Open { conn, to } => opens.push((conn, to.port())),
                Frame::Data { conn, bytes } => {
                    if let Some(r) = self.relays.get_mut(&conn) {
                        // Into the socket at once when nothing waits before it, the rest
                        // queued for `write_tcp` (the same bytes in the same order).
                        let mut n = 0;
                        if r.to_tcp.is_empty() {
                            if let Some(c) = self.stack.conn(r.id) {
                                n = c.write(bytes);
                                self.stats.bytes_to_tcp += n as u64;
                            }
                        }
                        r.to_tcp.extend(&bytes[n..]);
                    }
                }
                Frame::Fin { conn } => {
                    if let Some(r) = self.relays.get_mut(&conn) {
                        r.fin_received = true;
                    }
                }
                Frame::Reset { conn } => {
                    if let Some(r) = self.relays.remove(&conn) {
                        self.stack.discard(r.id);
                    }
                }
                Frame::Credit { .. } => {}
            }
            // An OPEN's connection must exist before the frames that follow it.
            for (conn, port) in opens.drain(..) {
                if let Some(id) = self.stack.connect(INTERNET_ADDR, port, buffers()) {
                    self.stats.opened += 1;
                    self.relays.insert(relay(conn, id));
                } else {
                    self.emit(&Frame::Reset { conn });
                }
            }
        }
        self.inbuf.drain(..at);
        true
    }

    /// Writes one frame onto the stream if it fits whole (a DATA payload straight from
    /// the caller's buffer).
    fn emit(&mut self, f: &Frame<'_>) -> bool {
        if STREAM_BUFFER.saturating_sub(self.tx.buffered()) < f.wire_len() {
            return false;
        }
        self.emit_buf.clear();
        if let Frame::Data { bytes, .. } = f {
            f.emit_header(&mut self.emit_buf);
            let n = self.tx.write(&self.emit_buf);
            return n == self.emit_buf.len() && self.tx.write(bytes) == bytes.len();
        }
        f.emit(&mut self.emit_buf);
        self.tx.write(&self.emit_buf) == self.emit_buf.len()
    }
}

fn relay(conn: u32, id: ConnId) -> Relay {
    Relay {
        conn,
        id,
        gone: false,
        to_tcp: VecDeque::new(),
        fin_received: false,
        fin_sent: false,
        closed: false,
    }
}

/// The relayed connections in the order of their stream connection numbers: a sorted
/// `Vec`, as `relay` visits each one several times at every step of the simulation and a
/// handful are open at once.
#[derive(Debug, Default)]
struct Relays(Vec<Relay>);

impl Relays {
    fn find(&self, conn: u32) -> Result<usize, usize> {
        self.0.binary_search_by_key(&conn, |r| r.conn)
    }

    fn get_mut(&mut self, conn: &u32) -> Option<&mut Relay> {
        self.find(*conn).ok().map(|i| &mut self.0[i])
    }

    fn insert(&mut self, relay: Relay) {
        match self.find(relay.conn) {
            Ok(i) => self.0[i] = relay,
            Err(i) => self.0.insert(i, relay),
        }
    }

    fn remove(&mut self, conn: &u32) -> Option<Relay> {
        self.find(*conn).ok().map(|i| self.0.remove(i))
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}
