//! The receiver's loop: one UDP socket; the first sender's session is served, its paths'
//! addresses learned from where their datagrams arrive; one file, then it returns.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_core::file_transfer::{FileReceiver, Status, TransferError};
use braid_core::{Instant, PathId};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};

use super::disk::PartSink;
use super::{per_path, transfer_config, StreamError, StreamProgress, StreamSummary};
use crate::clock::Clock;
use crate::split_tcp::service::{udp_socket, Envelope};

const TICK: Duration = Duration::from_millis(50);
const PROGRESS: Duration = Duration::from_millis(200);
/// After DONE (or a failure) the loop waits at most this long for the sender to
/// acknowledge it.
const LINGER: Duration = Duration::from_secs(3);

/// A receiver bound to its socket, not yet serving.
#[derive(Debug)]
pub struct BoundReceiver {
    socket: UdpSocket,
    dir: PathBuf,
    peer_timeout: Duration,
}

impl BoundReceiver {
    /// Binds `listen` and checks `dir`.
    pub fn bind(dir: &Path, listen: &str, peer_timeout: Duration) -> Result<Self, StreamError> {
        let at = crate::htppr::resolve("--listen", listen)
            .map_err(|e| StreamError::BadAddress(e.to_string()))?;
        PartSink::new(dir)?;
        let socket = udp_socket(at, None).map_err(|cause| StreamError::Bind {
            what: format!("--listen {at}"),
            cause,
        })?;
        Ok(BoundReceiver {
            socket,
            dir: dir.to_owned(),
            peer_timeout,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Serves the first sender until its file is written (or the transfer fails).
    pub fn run(
        mut self,
        progress: &mut dyn FnMut(&StreamProgress),
    ) -> Result<StreamSummary, StreamError> {
        let poll = Poll::new().map_err(StreamError::Poll)?;
        poll.registry()
            .register(&mut self.socket, Token(0), Interest::READABLE)
            .map_err(StreamError::Poll)?;
        let mut poll = poll;
        let clock = Clock::start();
        let mut s: Option<Served> = None;
        let mut events = Events::with_capacity(64);
        let mut buf = vec![0u8; 65_536];
        let (mut out, mut dgram) = (Vec::with_capacity(2048), Vec::with_capacity(2048));
        let mut next_progress = clock.now();
        let mut ended: Option<Instant> = None;
        loop {
            let now = clock.now();
            if let Some(sv) = s.as_mut() {
                sv.rx.drive(now);
                while let Some(p) = sv.rx.poll_transmit(now, &mut out) {
                    sv.send(&self.socket, p, &out, &mut dgram);
                }
                if now >= next_progress {
                    next_progress = now + PROGRESS;
                    let (done, total) = sv.rx.progress();
                    progress(&StreamProgress {
                        done,
                        total,
                        path_bytes: sv.bytes.clone(),
                        elapsed: now.saturating_duration_since(sv.start),
                    });
                }
                let status = sv.rx.status();
                if status != Status::Running {
                    let t = *ended.get_or_insert(now);
                    if sv.rx.flushed() || now.saturating_duration_since(t) >= LINGER {
                        return sv.finish(status, clock.now());
                    }
                }
            }
            let wake = s
                .as_ref()
                .and_then(|sv| sv.rx.poll_timeout())
                .unwrap_or(Instant::MAX)
                .min(next_progress);
            let timeout = wake.saturating_duration_since(now).min(TICK);
            if let Err(e) = poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(StreamError::Poll(e));
                }
            }
            let now = clock.now();
            loop {
                let (n, from) = match self.socket.recv_from(&mut buf) {
                    Ok(x) => x,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                let Some((e, chunk)) = Envelope::parse(&buf[..n]) else {
                    continue;
                };
                let sv = match s.as_mut() {
                    Some(sv) if sv.session == e.session => sv,
                    // One sender at a time; another's datagrams are ignored.
                    Some(_) => continue,
                    None => {
                        let sink = PartSink::new(&self.dir)?;
                        let paths = usize::from(e.paths);
                        tracing::info!(sender = %from, paths, "a sender");
                        s.insert(Served {
                            rx: FileReceiver::new(
                                transfer_config(self.peer_timeout),
                                paths,
                                sink,
                                now,
                            ),
                            session: e.session,
                            addrs: vec![None; paths],
                            bytes: vec![0; paths],
                            datagrams: vec![0; paths],
                            start: now,
                        })
                    }
                };
                let p = usize::from(e.path);
                if p >= sv.addrs.len() {
                    continue;
                }
                sv.addrs[p] = Some(from);
                sv.bytes[p] += n as u64;
                sv.datagrams[p] += 1;
                if chunk.is_empty() {
                    // A hello: answered, so the sender knows the receiver is there.
                    sv.send(&self.socket, e.path, &[], &mut dgram);
                } else {
                    sv.rx.handle_datagram(now, e.path, chunk);
                }
            }
            if let Some(sv) = s.as_mut() {
                sv.rx.handle_timeout(now);
            }
        }
    }
}

/// The sender being served.
struct Served {
    rx: FileReceiver<PartSink>,
    session: u32,
    /// Per path, the address its datagrams last came from.
    addrs: Vec<Option<SocketAddr>>,
    bytes: Vec<u64>,
    datagrams: Vec<u64>,
    start: Instant,
}

impl Served {
    fn send(&self, socket: &UdpSocket, p: PathId, chunk: &[u8], dgram: &mut Vec<u8>) {
        // A path not yet heard from has no address: its datagram is lost, and the stream
        // sends it again (the sender's hellos make this rare).
        let Some(Some(to)) = self.addrs.get(usize::from(p)) else {
            return;
        };
        let e = Envelope {
            flags: 0,
            path: p,
            paths: self.addrs.len() as u8,
            session: self.session,
        };
        dgram.clear();
        e.emit(dgram);
        dgram.extend_from_slice(chunk);
        let _ = socket.send_to(dgram, *to);
    }

    fn finish(&self, status: Status, now: Instant) -> Result<StreamSummary, StreamError> {
        if let Status::Failed(e) = status {
            return Err(StreamError::Transfer(e));
        }
        let secs = now.saturating_duration_since(self.start).as_secs_f64();
        let names: Vec<String> = self
            .addrs
            .iter()
            .map(|a| a.map_or("-".into(), |a| a.ip().to_string()))
            .collect();
        let offer = self.rx.offer().cloned();
        let size = offer.as_ref().map_or(0, |o| o.size);
        let path = self.rx.sink().kept.clone().unwrap_or_default();
        let sha256 = self
            .rx
            .sha256()
            .ok_or(StreamError::Transfer(TransferError::Protocol(
                "done without a hash".into(),
            )))?;
        Ok(StreamSummary {
            path,
            bytes: size,
            resumed_from: self.rx.resumed_from(),
            sha256,
            seconds: secs,
            mb_s: (size - self.rx.resumed_from()) as f64 / secs.max(1e-6) / 1e6,
            paths: per_path(&self.bytes, &self.datagrams, &names, secs),
            retransmitted_chunks: None,
            path_failures: None,
        })
    }
}
