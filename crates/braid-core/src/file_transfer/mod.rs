//! One file over the multipath reliable stream (issue 19 item 4): `braid send FILE` and
//! `braid receive DIR` in the stream mode. Sans-IO like the rest of the engine: both ends
//! are driven with `handle_datagram(now, path, chunk)`, `poll_transmit(now, buf)`,
//! `poll_timeout()` and `handle_timeout(now)`, plus `drive(now)`, which moves file bytes;
//! the file itself is reached through [`Source`] and [`Sink`], so a test holds it in
//! memory and the daemon on disk.
//!
//! Each end owns a stream pair ([`crate::stream`]: one congestion window per path, SACK,
//! oSCTP failover), one direction each way, and speaks the frames of [`frame`]. The sender
//! offers the file (name, size, mtime); the receiver answers with the bytes it already
//! holds of that same offer and their SHA-256; the sender checks the hash of its own
//! prefix and starts there, or from 0 when it differs. At the end the sender sends the
//! whole file's SHA-256 and the receiver keeps the file only if its own hash matches.
//! Either end's failure (a write error, the file changed, a mismatch) crosses to the
//! other as an ERROR frame; silence for [`TransferConfig::peer_timeout`] is the peer gone.

pub mod frame;
#[cfg(test)]
mod tests;

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::stream::{ReceiverConfig, StreamConfig, StreamReceiver, StreamSender};
use crate::{Instant, PathId};
use frame::{Frame, FrameError, HEADER, MAX_DATA};

/// Stream buffer the sender's DATA leaves free, so that an ERROR frame always fits.
const RESERVE: usize = 1100;

/// What is offered: the sender's file as the receiver will know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// The file's name, without directories.
    pub name: String,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch: with the name and size, what
    /// makes a partial file at the receiver the same file (resume).
    pub mtime_ns: u64,
}

/// The sender's file.
pub trait Source {
    /// Bytes at `offset` into `buf`; 0 before the offered size means the file shrank.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, String>;
    /// An error when the file is no longer the one offered (its size or mtime moved).
    fn check(&mut self) -> Result<(), String>;
}

/// The receiver's file.
pub trait Sink {
    /// Prepares to receive `offer`: the bytes already held of this same offer (a partial
    /// file from an interrupted transfer) and the SHA-256 state over them.
    fn open(&mut self, offer: &Offer) -> Result<(u64, Sha256), String>;
    /// Drops the bytes held: the sender's prefix differs.
    fn restart(&mut self) -> Result<(), String>;
    /// Appends `bytes`.
    fn write(&mut self, bytes: &[u8]) -> Result<(), String>;
    /// Every byte arrived; `matched` says whether the hashes agree. With a match the file
    /// is kept under its name; without, the partial file is dropped.
    fn finish(&mut self, matched: bool) -> Result<(), String>;
}

/// Options of both ends.
#[derive(Clone, Copy, Debug)]
pub struct TransferConfig {
    pub stream: StreamConfig,
    pub receiver: ReceiverConfig,
    /// Nothing heard from the peer this long: the peer is gone.
    pub peer_timeout: Duration,
    /// How often the sender checks that its file is unchanged.
    pub check_every: Duration,
}

impl TransferConfig {
    pub fn new(stream: StreamConfig, receiver: ReceiverConfig) -> Self {
        TransferConfig {
            stream,
            receiver,
            peer_timeout: Duration::from_secs(10),
            check_every: Duration::from_secs(1),
        }
    }
}

/// Why a transfer failed: each message one line naming the thing at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("the peer went away: nothing heard for {0} s")]
    PeerGone(u64),
    #[error("{0}")]
    Local(String),
    #[error("the peer gave up: {0}")]
    Remote(String),
    #[error("the peer broke the protocol: {0}")]
    Protocol(String),
    #[error("SHA-256 mismatch: the sender's file is {expected}, the bytes received are {got}; the partial file was removed")]
    HashMismatch { expected: String, got: String },
}

/// Where a transfer stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Running,
    /// The file crossed and both hashes agree.
    Done,
    Failed(TransferError),
}

/// The stream pair of one end and the frames on it.
#[derive(Debug)]
struct Duplex {
    tx: StreamSender,
    rx: StreamReceiver,
    inbuf: Vec<u8>,
    scratch: Vec<u8>,
    last_heard: Instant,
    peer_timeout: Duration,
    paths: usize,
    send_buffer: usize,
}

impl Duplex {
    fn new(config: &TransferConfig, paths: usize, now: Instant) -> Duplex {
        Duplex {
            tx: StreamSender::new(config.stream, paths),
            rx: StreamReceiver::new(config.receiver),
            inbuf: Vec::new(),
            scratch: Vec::with_capacity(HEADER + MAX_DATA),
            last_heard: now,
            peer_timeout: config.peer_timeout,
            paths,
            send_buffer: config.stream.send_buffer,
        }
    }

    /// DATA and HEARTBEAT chunks to the receiving half, SACK and HEARTBEAT-ACK to the
    /// sending half (crate::stream::chunk's types).
    fn handle_datagram(&mut self, now: Instant, path: PathId, chunk: &[u8]) {
        if usize::from(path) >= self.paths {
            return;
        }
        self.last_heard = now;
        match chunk.first() {
            Some(1 | 3) => self.rx.handle_datagram(now, path, chunk),
            Some(2 | 4) => self.tx.handle_datagram(now, path, chunk),
            _ => {}
        }
    }

    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PathId> {
        self.rx
            .poll_transmit(now, out)
            .or_else(|| self.tx.poll_transmit(now, out))
    }

    /// The streams' timers, and the peer deadline while the transfer runs.
    fn poll_timeout(&self, running: bool) -> Option<Instant> {
        [
            self.tx.poll_timeout(),
            self.rx.poll_timeout(),
            running.then(|| self.last_heard + self.peer_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.tx.handle_timeout(now);
        self.rx.handle_timeout(now);
    }

    fn peer_gone(&self, now: Instant) -> Option<TransferError> {
        (now.saturating_duration_since(self.last_heard) >= self.peer_timeout)
            .then_some(TransferError::PeerGone(self.peer_timeout.as_secs()))
    }

    /// Bytes the stream accepts now.
    fn room(&self) -> usize {
        self.send_buffer.saturating_sub(self.tx.buffered())
    }

    /// Queues a whole frame, or nothing when it does not fit.
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

    /// Tells the peer why we fail (at most 1024 bytes, cut on a character boundary);
    /// not the peer's own failure, which it knows.
    fn emit_error(&mut self, e: &TransferError) {
        if matches!(e, TransferError::Remote(_)) {
            return;
        }
        let m = e.to_string();
        let mut end = m.len().min(1024);
        while !m.is_char_boundary(end) {
            end -= 1;
        }
        self.emit(&Frame::Error(&m[..end]));
    }

    /// Everything written has been acknowledged.
    fn flushed(&self) -> bool {
        self.tx.buffered() == 0
    }

    fn fill(&mut self) {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = self.rx.read(&mut buf);
            if n == 0 {
                return;
            }
            self.inbuf.extend_from_slice(&buf[..n]);
        }
    }

    /// Bytes each path carried (DATA chunks sent, first copies and retransmissions).
    fn chunks_sent(&self) -> Vec<u64> {
        self.tx.stats().chunks_sent.clone()
    }
}

fn hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(h: &Sha256) -> [u8; 32] {
    h.clone().finalize().into()
}

#[derive(Debug)]
enum SendState {
    /// OFFER queued or sent; waiting for ACCEPT.
    Offered,
    Sending {
        pos: u64,
    },
    /// END sent; waiting for DONE.
    Ended,
    Done,
    /// Failed; the ERROR frame (if any) is on its way.
    Failed(TransferError),
}

/// The sending end.
#[derive(Debug)]
pub struct FileSender<S: Source> {
    io: Duplex,
    source: S,
    offer: Offer,
    hasher: Sha256,
    state: SendState,
    /// Where the receiver resumed (0 for a fresh transfer).
    resumed_from: u64,
    next_check: Instant,
    check_every: Duration,
    buf: Vec<u8>,
}

impl<S: Source> FileSender<S> {
    /// A sender of `offer`, read from `source`, over `paths` paths; the OFFER is queued.
    pub fn new(
        config: TransferConfig,
        paths: usize,
        offer: Offer,
        source: S,
        now: Instant,
    ) -> Self {
        let mut io = Duplex::new(&config, paths, now);
        let queued = io.emit(&Frame::Offer {
            size: offer.size,
            mtime_ns: offer.mtime_ns,
            name: &offer.name,
        });
        debug_assert!(queued, "an empty stream takes the offer");
        FileSender {
            io,
            source,
            offer,
            hasher: Sha256::new(),
            state: SendState::Offered,
            resumed_from: 0,
            next_check: now,
            check_every: config.check_every,
            buf: vec![0u8; MAX_DATA],
        }
    }

    pub fn handle_datagram(&mut self, now: Instant, path: PathId, chunk: &[u8]) {
        self.io.handle_datagram(now, path, chunk);
    }

    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PathId> {
        self.io.poll_transmit(now, out)
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let check = matches!(self.state, SendState::Sending { .. }).then_some(self.next_check);
        let running = !matches!(self.state, SendState::Done | SendState::Failed(_));
        [self.io.poll_timeout(running), check]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.io.handle_timeout(now);
    }

    /// Reads the receiver's frames and writes file bytes onto the stream while it has room.
    pub fn drive(&mut self, now: Instant) {
        if matches!(self.state, SendState::Done | SendState::Failed(_)) {
            return;
        }
        if let Err(e) = self.frames() {
            self.fail(e);
            return;
        }
        if let Some(e) = self.io.peer_gone(now) {
            self.state = SendState::Failed(e);
            return;
        }
        if let SendState::Sending { pos } = self.state {
            if let Err(e) = self.pump(now, pos) {
                self.fail(e);
            }
        }
    }

    fn frames(&mut self) -> Result<(), TransferError> {
        self.io.fill();
        let mut at = 0;
        let mut result = Ok(());
        let inbuf = std::mem::take(&mut self.io.inbuf);
        loop {
            let (f, n) = match Frame::parse(&inbuf[at..]) {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    result = Err(protocol(e));
                    break;
                }
            };
            at += n;
            let r = match (f, &self.state) {
                (Frame::Accept { offset, prefix }, SendState::Offered) => {
                    self.accept(offset, prefix)
                }
                (Frame::Done, SendState::Ended) => {
                    self.state = SendState::Done;
                    Ok(())
                }
                (Frame::Error(m), _) => Err(TransferError::Remote(m.to_owned())),
                (f, _) => Err(TransferError::Protocol(format!(
                    "unexpected {f:?} from the receiver"
                ))),
            };
            if r.is_err() {
                result = r;
                break;
            }
        }
        self.io.inbuf = inbuf;
        self.io.inbuf.drain(..at);
        result
    }

    /// The receiver holds `offset` bytes whose hash is `prefix`: resume there if our own
    /// first `offset` bytes hash the same, else from the start.
    fn accept(&mut self, offset: u64, prefix: [u8; 32]) -> Result<(), TransferError> {
        let mut start = 0;
        if offset > 0 && offset <= self.offer.size {
            let mut h = Sha256::new();
            let mut pos = 0;
            while pos < offset {
                let want = (offset - pos).min(self.buf.len() as u64) as usize;
                let n = self.read(pos, want)?;
                h.update(&self.buf[..n]);
                pos += n as u64;
            }
            if digest(&h) == prefix {
                start = offset;
                self.hasher = h;
            }
        }
        self.resumed_from = start;
        self.io.emit(&Frame::Start { offset: start });
        self.state = SendState::Sending { pos: start };
        Ok(())
    }

    fn read(&mut self, pos: u64, want: usize) -> Result<usize, TransferError> {
        let n = self
            .source
            .read_at(pos, &mut self.buf[..want])
            .map_err(TransferError::Local)?;
        if n == 0 {
            return Err(TransferError::Local(format!(
                "{} changed while it was being sent (it shrank below {} bytes); send it again once it is still",
                self.offer.name, self.offer.size
            )));
        }
        Ok(n)
    }

    fn pump(&mut self, now: Instant, mut pos: u64) -> Result<(), TransferError> {
        if now >= self.next_check {
            self.next_check = now + self.check_every;
            self.source.check().map_err(TransferError::Local)?;
        }
        while pos < self.offer.size {
            let room = self.io.room().saturating_sub(HEADER + RESERVE);
            let want = (self.offer.size - pos).min(room.min(MAX_DATA) as u64) as usize;
            // Small writes cost a frame header each; wait for room for a whole frame.
            if want == 0 || (want < MAX_DATA && (want as u64) < self.offer.size - pos) {
                break;
            }
            let n = self.read(pos, want)?;
            self.hasher.update(&self.buf[..n]);
            let data = std::mem::take(&mut self.buf);
            let queued = self.io.emit(&Frame::Data(&data[..n]));
            self.buf = data;
            debug_assert!(queued, "room was checked");
            pos += n as u64;
        }
        self.state = SendState::Sending { pos };
        if pos == self.offer.size && self.io.room() >= HEADER + 32 + RESERVE {
            // The file must still be the one offered once every byte was read.
            self.source.check().map_err(TransferError::Local)?;
            self.io.emit(&Frame::End(digest(&self.hasher)));
            self.state = SendState::Ended;
        }
        Ok(())
    }

    /// Our own failure: the receiver hears why (and keeps its partial file).
    fn fail(&mut self, e: TransferError) {
        self.io.emit_error(&e);
        self.state = SendState::Failed(e);
    }

    pub fn status(&self) -> Status {
        match &self.state {
            SendState::Done => Status::Done,
            SendState::Failed(e) => Status::Failed(e.clone()),
            _ => Status::Running,
        }
    }

    /// Everything queued (an ERROR frame, say) has been acknowledged.
    pub fn flushed(&self) -> bool {
        self.io.flushed()
    }

    /// File bytes the receiver has acknowledged, and the file's size.
    pub fn progress(&self) -> (u64, u64) {
        let done = match self.state {
            SendState::Offered => 0,
            SendState::Sending { pos } => pos.saturating_sub(self.io.tx.buffered() as u64),
            _ => self.offer.size.saturating_sub(self.io.tx.buffered() as u64),
        };
        (done.max(self.resumed_from), self.offer.size)
    }

    /// Where the transfer resumed (0: from the start).
    pub fn resumed_from(&self) -> u64 {
        self.resumed_from
    }

    /// The whole file's SHA-256, hex, once every byte was read.
    pub fn sha256(&self) -> Option<String> {
        matches!(self.state, SendState::Ended | SendState::Done).then(|| hex(&digest(&self.hasher)))
    }

    /// DATA chunks sent per path (first copies and retransmissions).
    pub fn chunks_sent(&self) -> Vec<u64> {
        self.io.chunks_sent()
    }

    pub fn stream_stats(&self) -> &crate::stream::SenderStats {
        self.io.tx.stats()
    }

    /// Whether path `p` is failed (oSCTP §IV-E1).
    pub fn is_failed(&self, p: usize) -> bool {
        self.io.tx.is_failed(p)
    }
}

#[derive(Debug)]
enum RecvState {
    /// Waiting for OFFER.
    Waiting,
    /// ACCEPT sent for `held` bytes; waiting for START.
    Accepted {
        held: u64,
    },
    Receiving {
        pos: u64,
    },
    Done,
    Failed(TransferError),
}

/// The receiving end.
#[derive(Debug)]
pub struct FileReceiver<K: Sink> {
    io: Duplex,
    sink: K,
    offer: Option<Offer>,
    hasher: Sha256,
    state: RecvState,
    resumed_from: u64,
}

impl<K: Sink> FileReceiver<K> {
    /// A receiver over `paths` paths (as many as the sender's first datagram names).
    pub fn new(config: TransferConfig, paths: usize, sink: K, now: Instant) -> Self {
        FileReceiver {
            io: Duplex::new(&config, paths, now),
            sink,
            offer: None,
            hasher: Sha256::new(),
            state: RecvState::Waiting,
            resumed_from: 0,
        }
    }

    pub fn handle_datagram(&mut self, now: Instant, path: PathId, chunk: &[u8]) {
        self.io.handle_datagram(now, path, chunk);
    }

    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PathId> {
        self.io.poll_transmit(now, out)
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let running = !matches!(self.state, RecvState::Done | RecvState::Failed(_));
        self.io.poll_timeout(running)
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.io.handle_timeout(now);
    }

    /// Reads the sender's frames into the file.
    pub fn drive(&mut self, now: Instant) {
        if matches!(self.state, RecvState::Done | RecvState::Failed(_)) {
            return;
        }
        if let Err(e) = self.frames() {
            self.fail(e);
            return;
        }
        if !matches!(self.state, RecvState::Done | RecvState::Failed(_)) {
            if let Some(e) = self.io.peer_gone(now) {
                self.state = RecvState::Failed(e);
            }
        }
    }

    fn frames(&mut self) -> Result<(), TransferError> {
        self.io.fill();
        let inbuf = std::mem::take(&mut self.io.inbuf);
        let mut at = 0;
        let mut result = Ok(());
        loop {
            let (f, n) = match Frame::parse(&inbuf[at..]) {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    result = Err(protocol(e));
                    break;
                }
            };
            at += n;
            if let Err(e) = self.frame(f) {
                result = Err(e);
                break;
            }
            if matches!(self.state, RecvState::Done) {
                break;
            }
        }
        self.io.inbuf = inbuf;
        self.io.inbuf.drain(..at);
        result
    }

    fn frame(&mut self, f: Frame<'_>) -> Result<(), TransferError> {
        let size = self.offer.as_ref().map_or(0, |o| o.size);
        match (f, &self.state) {
            (
                Frame::Offer {
                    size,
                    mtime_ns,
                    name,
                },
                RecvState::Waiting,
            ) => {
                let offer = Offer {
                    name: name.to_owned(),
                    size,
                    mtime_ns,
                };
                let (held, hasher) = self.sink.open(&offer).map_err(TransferError::Local)?;
                let held = held.min(size);
                self.io.emit(&Frame::Accept {
                    offset: held,
                    prefix: digest(&hasher),
                });
                self.hasher = hasher;
                self.offer = Some(offer);
                self.state = RecvState::Accepted { held };
            }
            (Frame::Start { offset }, &RecvState::Accepted { held }) => {
                if offset != held {
                    if offset != 0 {
                        return Err(TransferError::Protocol(format!(
                            "START at {offset}, neither 0 nor the {held} bytes held"
                        )));
                    }
                    self.sink.restart().map_err(TransferError::Local)?;
                    self.hasher = Sha256::new();
                }
                self.resumed_from = offset;
                self.state = RecvState::Receiving { pos: offset };
            }
            (Frame::Data(b), &RecvState::Receiving { pos }) => {
                let pos = pos + b.len() as u64;
                if pos > size {
                    return Err(TransferError::Protocol(format!(
                        "more bytes than the {size} offered"
                    )));
                }
                self.sink.write(b).map_err(TransferError::Local)?;
                self.hasher.update(b);
                self.state = RecvState::Receiving { pos };
            }
            (Frame::End(want), &RecvState::Receiving { pos }) if pos == size => {
                let got = digest(&self.hasher);
                let matched = got == want;
                self.sink.finish(matched).map_err(TransferError::Local)?;
                if !matched {
                    return Err(TransferError::HashMismatch {
                        expected: hex(&want),
                        got: hex(&got),
                    });
                }
                self.io.emit(&Frame::Done);
                self.state = RecvState::Done;
            }
            (Frame::Error(m), _) => return Err(TransferError::Remote(m.to_owned())),
            (f, s) => {
                let f = match f {
                    Frame::Data(b) => format!("DATA of {} bytes", b.len()),
                    f => format!("{f:?}"),
                };
                return Err(TransferError::Protocol(format!(
                    "unexpected {f} from the sender in state {s:?}"
                )));
            }
        }
        Ok(())
    }

    fn fail(&mut self, e: TransferError) {
        self.io.emit_error(&e);
        self.state = RecvState::Failed(e);
    }

    pub fn status(&self) -> Status {
        match &self.state {
            RecvState::Done => Status::Done,
            RecvState::Failed(e) => Status::Failed(e.clone()),
            _ => Status::Running,
        }
    }

    /// Everything queued (DONE or an ERROR frame) has been acknowledged.
    pub fn flushed(&self) -> bool {
        self.io.flushed()
    }

    /// The offer once heard.
    pub fn offer(&self) -> Option<&Offer> {
        self.offer.as_ref()
    }

    /// File bytes held, and the file's size (0 before the offer).
    pub fn progress(&self) -> (u64, u64) {
        let size = self.offer.as_ref().map_or(0, |o| o.size);
        let done = match self.state {
            RecvState::Waiting => 0,
            RecvState::Accepted { held } => held,
            RecvState::Receiving { pos } => pos,
            RecvState::Done => size,
            RecvState::Failed(_) => 0,
        };
        (done, size)
    }

    pub fn resumed_from(&self) -> u64 {
        self.resumed_from
    }

    /// The file's SHA-256, hex, once it matched.
    pub fn sha256(&self) -> Option<String> {
        matches!(self.state, RecvState::Done).then(|| hex(&digest(&self.hasher)))
    }

    pub fn sink(&self) -> &K {
        &self.sink
    }
}

fn protocol(e: FrameError) -> TransferError {
    TransferError::Protocol(e.to_string())
}
