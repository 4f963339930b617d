//! A bulk TCP download whose payload carries its own send times, for the one-way delay of
//! delivered data: the internet host writes fixed-size records, each starting with the
//! time of its write on the lab's clock (`CLOCK_MONOTONIC`, one clock for every
//! namespace), and the client reads the stream and takes, for each record, its arrival at
//! the application less that stamp. The sender's socket keeps little unsent data
//! (`TCP_NOTSENT_LOWAT`), so a stamp is taken close to when its record can go out and the
//! delay is the network's, braid's and the receiving kernel's (its in-order delivery
//! included), not the sender's buffer.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::time::Duration;

use braid_sim::metrics::{Samples, Summary};
use braid_sim::rng::Rng;
use serde::Serialize;

use crate::apps::http::{new_socket, Route};
use crate::clock::Clock;
use crate::netns::{interrupted, Netns};
use crate::LabError;

/// Bytes per record; its first 8 are the write time, µs on the lab clock, big-endian.
pub const RECORD: usize = 1024;
/// Unsent bytes the sender's socket may hold (about 50 ms at 2.4 Mbit/s).
pub const NOTSENT_LOWAT: u32 = 16 * 1024;
/// How long the listener waits for the client.
const ACCEPT_WITHIN: Duration = Duration::from_secs(10);

/// What the client measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StampedResult {
    /// Bytes delivered to the application after the omitted start, over its time, Mbit/s.
    pub goodput_mbps: f64,
    /// Bytes delivered over the whole run.
    pub bytes: u64,
    /// One-way delay of the records delivered after the omitted start, ms.
    pub one_way_delay_ms: Summary,
    /// Whether the sender's `TCP_NOTSENT_LOWAT` was set (MPTCP sockets may refuse it).
    pub notsent_lowat: bool,
}

/// Downloads from `source_ns` (listening on `port`) to `sink_ns` over `route` for
/// `duration`, the first `omit` of it left out of the figures.
pub fn run(
    source_ns: &Netns,
    sink_ns: &Netns,
    clock: Clock,
    route: Route,
    server: SocketAddrV4,
    duration: Duration,
    omit: Duration,
) -> Result<StampedResult, LabError> {
    let port = server.port();
    let listener = source_ns.enter_scoped(|| {
        let s = new_socket(route.transport)
            .map_err(|e| LabError::io("opening the stamped listener", e))?;
        s.set_reuse_address(true)
            .and_then(|()| s.bind(&SocketAddr::from(([0, 0, 0, 0], port)).into()))
            .and_then(|()| s.listen(4))
            .and_then(|()| s.set_nonblocking(true))
            .map_err(|e| LabError::io(format!("listening on port {port}"), e))?;
        Ok(TcpListener::from(s))
    })?;
    std::thread::scope(|scope| {
        let sender = scope.spawn(|| send(&listener, clock, duration + Duration::from_secs(2)));
        let sink = sink_ns.enter_scoped(|| {
            receive(route, server, clock, duration, omit)
                .map_err(|e| LabError::io("the stamped download", e))
        });
        let lowat = sender
            .join()
            .unwrap_or_else(|_| Err(LabError::App("the stamped sender panicked".into())))?;
        let mut r = sink?;
        r.notsent_lowat = lowat;
        Ok(r)
    })
}

/// Accepts one connection and writes stamped records for `run_for` or until the client
/// goes away; returns whether `TCP_NOTSENT_LOWAT` was set.
fn send(listener: &TcpListener, clock: Clock, run_for: Duration) -> Result<bool, LabError> {
    let until = clock.now() + ACCEPT_WITHIN;
    let mut stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if clock.now() >= until || interrupted() {
                    return Err(LabError::App(
                        "the stamped download's client never connected".into(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(LabError::io("accepting the stamped download", e)),
        }
    };
    let io = |e| LabError::io("setting up the stamped sender", e);
    stream.set_nonblocking(false).map_err(io)?;
    let sock = socket2::SockRef::from(&stream);
    let _ = sock.set_tcp_congestion(crate::apps::http::CONGESTION);
    let lowat = sock.set_tcp_notsent_lowat(NOTSENT_LOWAT).is_ok();
    stream
        .set_write_timeout(Some(Duration::from_millis(200)))
        .map_err(io)?;
    let end = clock.now() + run_for;
    let mut record = vec![0x5au8; RECORD];
    let mut at = RECORD;
    while clock.now() < end && !interrupted() {
        if at == RECORD {
            record[..8].copy_from_slice(&clock.now().as_micros().to_be_bytes());
            at = 0;
        }
        match stream.write(&record[at..]) {
            Ok(n) => at += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    Ok(lowat)
}

/// Connects over `route` and reads for `duration`, measuring after `omit`.
fn receive(
    route: Route,
    server: SocketAddrV4,
    clock: Clock,
    duration: Duration,
    omit: Duration,
) -> io::Result<StampedResult> {
    let s = new_socket(route.transport)?;
    if let Some(b) = route.bind {
        s.bind(&SocketAddr::from((b, 0)).into())?;
    }
    s.connect_timeout(&SocketAddr::V4(server).into(), ACCEPT_WITHIN)?;
    let mut stream = TcpStream::from(s);
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let start = clock.now();
    let (measure_from, end) = (start + omit, start + duration);
    let mut delays = Samples::new(Samples::DEFAULT_CAPACITY, Rng::new(1));
    let mut r = StampedResult::default();
    let mut measured = 0u64;
    let mut stamp = Stamps::default();
    let mut buf = vec![0u8; 64 * 1024];
    while clock.now() < end && !interrupted() {
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e),
        };
        let now = clock.now();
        r.bytes += n as u64;
        let counted = now >= measure_from;
        if counted {
            measured += n as u64;
        }
        for sent in stamp.feed(&buf[..n]) {
            if counted {
                delays.push(now.as_micros().saturating_sub(sent) as f64 / 1e3);
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    r.goodput_mbps = measured as f64 * 8.0 / (duration - omit).as_secs_f64() / 1e6;
    r.one_way_delay_ms = delays.summary();
    Ok(r)
}

/// Reads the stamps out of a stream of records cut anywhere.
#[derive(Default)]
struct Stamps {
    /// Offset in the current record.
    at: usize,
    /// The current record's stamp bytes so far.
    head: [u8; 8],
}

impl Stamps {
    /// The stamps completed by `bytes`, in order.
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<u64> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            if self.at < 8 {
                let take = (8 - self.at).min(bytes.len());
                self.head[self.at..self.at + take].copy_from_slice(&bytes[..take]);
                self.at += take;
                bytes = &bytes[take..];
                if self.at == 8 {
                    out.push(u64::from_be_bytes(self.head));
                }
            } else {
                let take = (RECORD - self.at).min(bytes.len());
                self.at += take;
                bytes = &bytes[take..];
            }
            if self.at == RECORD {
                self.at = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_read_across_any_cut() {
        let mut stream = Vec::new();
        for t in [7u64, 1_000_000, 42] {
            let mut rec = vec![0u8; RECORD];
            rec[..8].copy_from_slice(&t.to_be_bytes());
            stream.extend(rec);
        }
        for cut in [1, 3, 8, 100, RECORD, RECORD + 5, 3 * RECORD] {
            let mut s = Stamps::default();
            let got: Vec<u64> = stream.chunks(cut).flat_map(|c| s.feed(c)).collect();
            assert_eq!(got, vec![7, 1_000_000, 42], "cut {cut}");
        }
    }
}
