//! The sender's loop: one UDP socket per path towards the receiver, the engine's
//! [`FileSender`] between them and the file.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use braid_core::file_transfer::{FileSender, Status};
use braid_core::{Instant, PathId};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};

use super::disk::FileSource;
use super::{per_path, transfer_config, SendOptions, StreamError, StreamProgress, StreamSummary};
use crate::clock::Clock;
use crate::config::Binding;
use crate::split_tcp::service::{udp_socket, Envelope, NEW};

/// Hellos on every path this often (the receiver learns the paths' addresses).
const HELLO: Duration = Duration::from_secs(1);
/// The loop wakes at least this often.
const TICK: Duration = Duration::from_millis(50);
/// Progress is reported this often.
const PROGRESS: Duration = Duration::from_millis(200);
/// After DONE the loop stays this long, so the last SACK reaches the receiver.
const LINGER: Duration = Duration::from_millis(300);
/// A failed transfer waits at most this long for its ERROR frame to be acknowledged.
const ERROR_LINGER: Duration = Duration::from_secs(2);

/// The name of a path for reports.
fn name(b: &Binding) -> String {
    match b {
        Binding::Interface(d) => d.clone(),
        Binding::Address(a) => a.to_string(),
    }
}

/// Sends `path` to the receiver in `opts`, calling `progress` as it goes.
pub fn send(
    path: &Path,
    opts: &SendOptions,
    progress: &mut dyn FnMut(&StreamProgress),
) -> Result<StreamSummary, StreamError> {
    let (source, offer) = FileSource::open(path)?;
    let any: IpAddr = match opts.to {
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let bindings = if opts.via.is_empty() {
        vec![Binding::Address(any)]
    } else {
        opts.via.clone()
    };
    let names: Vec<String> = if opts.via.is_empty() {
        vec!["any".into()]
    } else {
        bindings.iter().map(name).collect()
    };
    let poll = Poll::new().map_err(StreamError::Poll)?;
    let mut sockets = Vec::new();
    for (i, b) in bindings.iter().enumerate() {
        let r = match b {
            Binding::Interface(d) => udp_socket(SocketAddr::new(any, 0), Some(d)),
            Binding::Address(a) => udp_socket(SocketAddr::new(*a, 0), None),
        };
        let mut s = r.map_err(|cause| StreamError::Bind {
            what: format!("--via {}", names[i]),
            cause,
        })?;
        poll.registry()
            .register(&mut s, Token(i), Interest::READABLE)
            .map_err(StreamError::Poll)?;
        sockets.push(s);
    }
    let clock = Clock::start();
    let start = clock.now();
    let n = sockets.len();
    let mut tx = FileSender::new(
        transfer_config(opts.peer_timeout),
        n,
        offer.clone(),
        source,
        start,
    );
    let mut lp = Loop {
        poll,
        sockets,
        to: opts.to,
        session: (crate::system::random_u64() as u32).max(1),
        confirmed: false,
        bytes: vec![0; n],
        datagrams: vec![0; n],
        send_errors: 0,
    };
    let mut next_hello = start;
    let mut next_progress = start;
    let mut ended: Option<Instant> = None;
    let mut events = Events::with_capacity(64);
    let mut buf = vec![0u8; 65_536];
    let (mut out, mut dgram) = (Vec::with_capacity(2048), Vec::with_capacity(2048));
    loop {
        let now = clock.now();
        tx.drive(now);
        while let Some(p) = tx.poll_transmit(now, &mut out) {
            lp.send(p, &out, &mut dgram);
        }
        if now >= next_hello {
            next_hello = now + HELLO;
            for p in 0..n {
                lp.send(p as PathId, &[], &mut dgram);
            }
        }
        if now >= next_progress {
            next_progress = now + PROGRESS;
            let (done, total) = tx.progress();
            progress(&StreamProgress {
                done,
                total,
                path_bytes: lp.bytes.clone(),
                elapsed: now.saturating_duration_since(start),
            });
        }
        match tx.status() {
            Status::Running => {}
            Status::Done => {
                let t = *ended.get_or_insert(now);
                if now.saturating_duration_since(t) >= LINGER {
                    break;
                }
            }
            Status::Failed(e) => {
                let t = *ended.get_or_insert(now);
                if tx.flushed() || now.saturating_duration_since(t) >= ERROR_LINGER {
                    return Err(e.into());
                }
            }
        }
        let wake = [tx.poll_timeout(), Some(next_hello), Some(next_progress)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(Instant::MAX);
        let timeout = wake.saturating_duration_since(now).min(TICK);
        if let Err(e) = lp.poll.poll(&mut events, Some(timeout)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(StreamError::Poll(e));
            }
        }
        let now = clock.now();
        for ev in events.iter() {
            let i = ev.token().0;
            lp.receive(i, &mut buf, |chunk| {
                tx.handle_datagram(now, i as PathId, chunk)
            });
        }
        tx.handle_timeout(now);
    }
    let secs = clock.now().saturating_duration_since(start).as_secs_f64();
    let st = tx.stream_stats();
    Ok(StreamSummary {
        path: path.to_owned(),
        bytes: offer.size,
        resumed_from: tx.resumed_from(),
        sha256: tx.sha256().unwrap_or_default(),
        seconds: secs,
        mb_s: (offer.size - tx.resumed_from()) as f64 / secs.max(1e-6) / 1e6,
        paths: per_path(&lp.bytes, &lp.datagrams, &names, secs),
        retransmitted_chunks: Some(st.retransmitted_chunks),
        path_failures: Some(st.failures),
    })
}

struct Loop {
    poll: Poll,
    sockets: Vec<UdpSocket>,
    to: SocketAddr,
    session: u32,
    /// The receiver has answered: NEW is no longer set.
    confirmed: bool,
    bytes: Vec<u64>,
    datagrams: Vec<u64>,
    /// Datagrams a socket refused (a path whose interface is down).
    send_errors: u64,
}

impl Loop {
    fn send(&mut self, p: PathId, chunk: &[u8], dgram: &mut Vec<u8>) {
        let i = usize::from(p);
        let Some(s) = self.sockets.get(i) else {
            return;
        };
        let e = Envelope {
            flags: if self.confirmed { 0 } else { NEW },
            path: p,
            paths: self.sockets.len() as u8,
            session: self.session,
        };
        dgram.clear();
        e.emit(dgram);
        dgram.extend_from_slice(chunk);
        match s.send_to(dgram, self.to) {
            Ok(n) => {
                self.bytes[i] += n as u64;
                self.datagrams[i] += 1;
            }
            Err(_) => self.send_errors += 1,
        }
    }

    /// Every datagram waiting on path `i`'s socket from the receiver, its chunk to `f`.
    fn receive(&mut self, i: usize, buf: &mut [u8], mut f: impl FnMut(&[u8])) {
        let Some(s) = self.sockets.get(i) else {
            return;
        };
        loop {
            match s.recv_from(buf) {
                // The receiver answers from whichever of its addresses routing picks, so
                // the session id, not the source, says a datagram is ours.
                Ok((n, _)) => {
                    let Some((e, chunk)) = Envelope::parse(&buf[..n]) else {
                        continue;
                    };
                    if e.session != self.session {
                        continue;
                    }
                    self.confirmed = true;
                    if !chunk.is_empty() {
                        f(chunk);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}
