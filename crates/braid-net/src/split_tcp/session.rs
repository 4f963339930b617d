//! One split-TCP session: a stream each way over the session's paths and the TCP
//! connections multiplexed on them ([`super::frame`]), relayed between the streams and
//! their sockets. The same at both ends; the event loop ([`super::service`]) owns the
//! sockets that carry the stream's datagrams.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use braid_core::stream::{StreamReceiver, StreamSender};
use braid_core::{Instant, PathId};
use mio::net::TcpStream;

use super::frame::{Frame, FrameError, HEADER, MAX_DATA};
pub use braid_core::stream::split::{
    receiver_config, stream_config, unsent_limit, CHUNK_PAYLOAD, GAP_BLOCKS, STREAM_BUFFER,
};

/// Bytes one connection may have in flight towards the peer's socket before the peer
/// reports them written (its CREDIT frames): the per-connection flow-control window, so a
/// slow reader never blocks the stream the other connections share. 8 MB covers lab-bulk's
/// summed 37 Mbit/s over its 200 ms path with 250 ms queues (lab-split-tcp).
pub const CONN_WINDOW: u64 = 8 << 20;
/// Written bytes are reported to the peer in CREDIT frames of at least this.
const CREDIT_STEP: u64 = 64 * 1024;
/// One relayed TCP connection.
#[derive(Debug)]
pub struct Conn {
    pub tcp: TcpStream,
    pub mio_token: mio::Token,
    /// The server's connect to the destination has finished (always true at the gateway).
    pub connected: bool,
    pub readable: bool,
    pub writable: bool,
    to_tcp: VecDeque<u8>,
    /// Bytes we may still send to the peer.
    credit: u64,
    /// Bytes written into the socket not yet reported in a CREDIT frame.
    consumed: u64,
    read_eof: bool,
    fin_sent: bool,
    fin_received: bool,
    write_shut: bool,
    reset: bool,
}

impl Conn {
    pub fn new(tcp: TcpStream, mio_token: mio::Token, connected: bool) -> Conn {
        Conn {
            tcp,
            mio_token,
            connected,
            readable: connected,
            writable: connected,
            to_tcp: VecDeque::new(),
            credit: CONN_WINDOW,
            consumed: 0,
            read_eof: false,
            fin_sent: false,
            fin_received: false,
            write_shut: false,
            reset: false,
        }
    }

    fn done(&self) -> bool {
        self.fin_sent && self.write_shut
    }
}

/// Counters shown in logs.
#[derive(Clone, Copy, Debug, Default)]
pub struct SessionStats {
    pub opened: u64,
    pub resets: u64,
    /// Bytes read from the sockets onto the stream.
    pub bytes_from_tcp: u64,
    /// Bytes written from the stream into the sockets.
    pub bytes_to_tcp: u64,
}

/// The stream pair and the connections on it.
#[derive(Debug)]
pub struct Session {
    tx: StreamSender,
    rx: StreamReceiver,
    inbuf: Vec<u8>,
    scratch: Vec<u8>,
    pub conns: HashMap<u32, Conn>,
    /// Connections refused before they had a socket, to be reset at the gateway.
    rejects: Vec<u32>,
    pub last_heard: Instant,
    pub stats: SessionStats,
    paths: usize,
    /// The connection whose bytes went onto the stream last.
    last_read: u32,
    /// Per path, the stream's acknowledged payload bytes when [`Session::meter`] last read
    /// them.
    acked_marks: Vec<u64>,
}

/// What the loop must do for a session beyond relaying.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// The server opens connection `conn` to `to`.
    Open { conn: u32, to: SocketAddr },
}

impl Session {
    pub fn new(paths: usize, now: Instant) -> Session {
        Session {
            tx: StreamSender::new(stream_config(), paths),
            rx: StreamReceiver::new(receiver_config()),
            inbuf: Vec::new(),
            scratch: Vec::with_capacity(HEADER + MAX_DATA),
            conns: HashMap::new(),
            rejects: Vec::new(),
            last_heard: now,
            stats: SessionStats::default(),
            paths,
            last_read: 0,
            acked_marks: vec![0; paths],
        }
    }

    /// For the tunnel's metering (`Session::note_foreign_traffic` in braid-core): the
    /// payload bytes the stream had acknowledged on `path` since the last call, and whether
    /// its window there is full.
    pub fn meter(&mut self, path: usize) -> (u64, bool) {
        let acked = self.tx.stats().acked_bytes.get(path).copied().unwrap_or(0);
        let Some(mark) = self.acked_marks.get_mut(path) else {
            return (0, false);
        };
        let delta = acked.saturating_sub(*mark);
        *mark = acked;
        (delta, self.tx.window_full(path))
    }

    /// Limits what the stream may send on `path` (bytes of its datagrams; a metered
    /// uplink's budget or cap left), `None` for no limit.
    pub fn set_allowance(&mut self, path: usize, bytes: Option<u64>) {
        self.tx.set_allowance(path, bytes);
    }

    /// Whether the stream is held on any path.
    pub fn any_held(&self) -> bool {
        (0..self.paths).any(|p| self.tx.is_held(p))
    }

    /// A stream chunk arrived on `path`: DATA and HEARTBEAT go to the receiving end, SACK
    /// and HEARTBEAT-ACK to the sending end (braid_core::stream::chunk's types).
    pub fn handle_chunk(&mut self, now: Instant, path: PathId, chunk: &[u8]) {
        self.last_heard = now;
        match chunk.first() {
            Some(1 | 3) => self.rx.handle_datagram(now, path, chunk),
            Some(2 | 4) => self.tx.handle_datagram(now, path, chunk),
            _ => {}
        }
    }

    /// The next datagram of either end into `out`, and its path.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PathId> {
        self.rx
            .poll_transmit(now, out)
            .or_else(|| self.tx.poll_transmit(now, out))
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.tx.poll_timeout(), self.rx.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.tx.handle_timeout(now);
        self.rx.handle_timeout(now);
    }

    /// Starts connection `conn` at the gateway: tells the server where to connect.
    pub fn open(&mut self, conn: u32, to: SocketAddr, c: Conn) -> bool {
        if !self.emit(&Frame::Open { conn, to }) {
            return false;
        }
        self.stats.opened += 1;
        self.conns.insert(conn, c);
        true
    }

    /// The server's connect to the destination of `conn` failed: the gateway resets the
    /// client's connection.
    pub fn refuse(&mut self, conn: u32) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.reset = true;
        }
    }

    /// The server could not even start connection `conn`: the gateway resets it.
    pub fn reject(&mut self, conn: u32) {
        self.rejects.push(conn);
    }

    /// Frames from the stream, dispatched, up to and including the first OPEN, which goes
    /// to `requests` (the loop opens it and calls again). An error means the peer's frames
    /// are broken: the loop drops the session.
    pub fn read_frames(
        &mut self,
        requests: &mut Vec<Request>,
        closed: &mut Vec<mio::Token>,
    ) -> Result<(), FrameError> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = self.rx.read(&mut buf);
            if n == 0 {
                break;
            }
            self.inbuf.extend_from_slice(&buf[..n]);
        }
        let mut at = 0;
        while let Some((frame, n)) = Frame::parse(&self.inbuf[at..])? {
            at += n;
            match frame {
                Frame::Open { conn, to } => {
                    // The loop makes the connection before the frames that follow (its
                    // first DATA) are read.
                    requests.push(Request::Open { conn, to });
                    break;
                }
                Frame::Data { conn, bytes } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.to_tcp.extend(bytes);
                        if c.to_tcp.len() as u64 > CONN_WINDOW {
                            // The peer ignored its credit.
                            c.reset = true;
                        }
                    }
                }
                Frame::Fin { conn } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.fin_received = true;
                    }
                }
                Frame::Reset { conn } => {
                    if let Some(c) = self.conns.remove(&conn) {
                        self.stats.resets += 1;
                        abort(&c.tcp);
                        closed.push(c.mio_token);
                    }
                }
                Frame::Credit { conn, bytes } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.credit = (c.credit + u64::from(bytes)).min(CONN_WINDOW);
                    }
                }
            }
        }
        self.inbuf.drain(..at);
        Ok(())
    }

    /// Moves bytes between the connections' sockets and the stream; the mio tokens of
    /// connections that ended go to `closed` (their sockets are closed).
    pub fn relay(&mut self, closed: &mut Vec<mio::Token>) {
        while let Some(&conn) = self.rejects.last() {
            if !self.emit(&Frame::Reset { conn }) {
                break;
            }
            self.stats.resets += 1;
            self.rejects.pop();
        }
        let mut ids: Vec<u32> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        let mut buf = vec![0u8; MAX_DATA];
        for &id in &ids {
            if let Some(mut c) = self.conns.remove(&id) {
                if c.connected && !c.reset {
                    self.write_tcp(id, &mut c);
                }
                self.conns.insert(id, c);
            }
        }
        // One frame per connection in turn while the stream's unsent bytes are few
        // ([`unsent_limit`]), the turn going on where it stopped: a download does not take
        // every opening, and a new connection's bytes are not queued behind megabytes.
        let start = ids.partition_point(|&c| c <= self.last_read);
        let mut idle = 0;
        for &id in ids[start..].iter().chain(&ids[..start]).cycle() {
            if idle == ids.len() || self.tx.unsent() >= unsent_limit(&self.tx) {
                break;
            }
            let Some(mut c) = self.conns.remove(&id) else {
                idle += 1;
                continue;
            };
            let read = c.connected && !c.reset && self.read_one(id, &mut c, &mut buf);
            self.conns.insert(id, c);
            if read {
                self.last_read = id;
                idle = 0;
            } else {
                idle += 1;
            }
        }
        // Sockets still readable hold more (how much, the kernel knows): as much again as
        // the stream holds unsent, for the scheduler's backlog.
        let more = self.conns.values().any(|c| c.readable && !c.read_eof);
        let waiting = if more { unsent_limit(&self.tx) } else { 0 };
        self.tx.set_waiting_beyond(waiting);
        for id in ids {
            let Some(mut c) = self.conns.remove(&id) else {
                continue;
            };
            if !c.reset && c.read_eof && !c.fin_sent && self.emit(&Frame::Fin { conn: id }) {
                c.fin_sent = true;
            }
            if c.reset {
                if self.emit(&Frame::Reset { conn: id }) {
                    self.stats.resets += 1;
                    abort(&c.tcp);
                    closed.push(c.mio_token);
                    continue;
                }
            } else if c.done() {
                closed.push(c.mio_token);
                continue;
            }
            self.conns.insert(id, c);
        }
    }

    fn write_tcp(&mut self, id: u32, c: &mut Conn) {
        while c.writable && !c.to_tcp.is_empty() {
            let (a, _) = c.to_tcp.as_slices();
            match c.tcp.write(a) {
                Ok(n) => {
                    c.to_tcp.drain(..n);
                    c.consumed += n as u64;
                    self.stats.bytes_to_tcp += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => c.writable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    c.reset = true;
                    return;
                }
            }
        }
        if c.consumed >= CREDIT_STEP || (c.consumed > 0 && c.to_tcp.is_empty()) {
            let bytes = c.consumed.min(u64::from(u32::MAX)) as u32;
            if self.emit(&Frame::Credit { conn: id, bytes }) {
                c.consumed -= u64::from(bytes);
            }
        }
        if c.fin_received && c.to_tcp.is_empty() && !c.write_shut {
            let _ = c.tcp.shutdown(Shutdown::Write);
            c.write_shut = true;
        }
    }

    /// Reads one frame's worth of the socket onto the stream (as far as the peer's credit
    /// and the stream's room allow); true if a frame went.
    fn read_one(&mut self, id: u32, c: &mut Conn, buf: &mut [u8]) -> bool {
        while c.readable && !c.read_eof {
            let room = self.room().saturating_sub(HEADER);
            let want = (c.credit.min(room as u64) as usize).min(buf.len());
            if want == 0 {
                return false;
            }
            match c.tcp.read(&mut buf[..want]) {
                Ok(0) => c.read_eof = true,
                Ok(n) => {
                    c.credit -= n as u64;
                    let sent = self.emit(&Frame::Data {
                        conn: id,
                        bytes: &buf[..n],
                    });
                    debug_assert!(sent, "room was checked");
                    self.stats.bytes_from_tcp += n as u64;
                    return true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => c.readable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    c.reset = true;
                    return false;
                }
            }
        }
        false
    }

    /// Bytes the stream accepts now.
    fn room(&self) -> usize {
        STREAM_BUFFER.saturating_sub(self.tx.buffered())
    }

    /// Queues a whole frame on the stream, or nothing when it does not fit.
    fn emit(&mut self, f: &Frame<'_>) -> bool {
        if f.wire_len() > self.room() {
            return false;
        }
        self.scratch.clear();
        f.emit(&mut self.scratch);
        let n = self.tx.write(&self.scratch);
        debug_assert_eq!(n, self.scratch.len());
        true
    }

    /// Every connection aborted (the session ends).
    /// A line of state for debug logs.
    pub fn describe(&self) -> String {
        let conns: Vec<String> = self
            .conns
            .iter()
            .map(|(id, c)| {
                format!(
                    "{id}:{}{}{} credit {} to_tcp {} eof {} fin_rx {}",
                    if c.connected { "c" } else { "-" },
                    if c.readable { "r" } else { "-" },
                    if c.writable { "w" } else { "-" },
                    c.credit,
                    c.to_tcp.len(),
                    c.read_eof,
                    c.fin_received
                )
            })
            .collect();
        format!(
            "stream buffered {} cwnd {:?} failed {:?} sender {:?} receiver {:?}; conns [{}]",
            self.tx.buffered(),
            (0..self.paths).map(|p| self.tx.cwnd(p)).collect::<Vec<_>>(),
            (0..self.paths)
                .map(|p| self.tx.is_failed(p))
                .collect::<Vec<_>>(),
            self.tx.stats(),
            self.rx.stats(),
            conns.join(", ")
        )
    }

    pub fn abort_all(&mut self, closed: &mut Vec<mio::Token>) {
        for (_, c) in self.conns.drain() {
            abort(&c.tcp);
            closed.push(c.mio_token);
        }
    }
}

/// Makes the socket's close a reset: SO_LINGER 0, so the peer sees RST, not FIN, once
/// the caller drops it.
fn abort(tcp: &TcpStream) {
    let _ = socket2::SockRef::from(tcp).set_linger(Some(Duration::ZERO));
}
