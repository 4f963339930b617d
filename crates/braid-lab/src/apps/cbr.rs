//! A constant-bit-rate UDP flow on real sockets, the shape of a live video stream: the
//! internet host sends fixed-size datagrams at a fixed rate to the client, each carrying a
//! sequence number and its send time on the lab's clock (one clock for every namespace,
//! so one-way delays are exact), and the client counts every datagram: per-packet loss,
//! duplicates, one-way delay and the longest gap between arrivals. The client opens the
//! flow with a request datagram (and repeats it each second), so the flow crosses NATs
//! the way a real stream's does: braid's gateway masquerades the client.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use braid_core::Instant;
use braid_sim::metrics::{Samples, Summary};
use braid_sim::rng::Rng;
use serde::Serialize;

use crate::clock::Clock;
use crate::netns::{interrupted, Netns};
use crate::LabError;

/// Sequence number and send time (µs on the lab clock), big-endian, at the payload's start.
const HEADER: usize = 16;
/// How long the source waits for the client's request before giving up.
const REQUEST_WITHIN: Duration = Duration::from_secs(5);
/// How often the client repeats its request (keeps NAT state fresh).
const REQUEST_EVERY: Duration = Duration::from_secs(1);
/// Datagrams the sink tracks at most (22 hours of 2 Mbit/s in 1200-byte datagrams).
const MAX_TRACKED: usize = 1 << 24;
/// Loss runs reported at most.
const MAX_LOSS_RUNS: usize = 200;
/// How long the sink keeps listening after the source's last datagram.
const DRAIN: Duration = Duration::from_secs(2);

/// One CBR flow, downlink (internet host → client).
#[derive(Clone, Copy, Debug)]
pub struct CbrFlow {
    /// UDP payload rate, Mbit/s (as iperf counts it).
    pub rate_mbps: f64,
    /// UDP payload bytes per datagram (at least 16).
    pub packet_bytes: usize,
    /// The source's UDP port on the internet host.
    pub port: u16,
    /// The client's source address (selects the path, or braid's tunnel).
    pub bind: Ipv4Addr,
    /// The internet host's address.
    pub server: Ipv4Addr,
}

/// What the sink measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CbrResult {
    pub rate_mbps: f64,
    pub packet_bytes: usize,
    pub packets_sent: u64,
    /// Distinct datagrams received.
    pub packets_received: u64,
    /// Sent and never received (within the drain time after the last was sent).
    pub packets_lost: u64,
    /// `packets_lost / packets_sent`.
    pub loss_rate: f64,
    pub duplicates: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    pub one_way_delay_ms: Summary,
    /// Longest time between two arrivals while the source was sending, ms.
    pub longest_gap_ms: f64,
    /// Runs of consecutive datagrams lost: (send time of the first, s from `epoch`, count),
    /// the first `MAX_LOSS_RUNS`.
    pub lost_runs: Vec<(f64, u64)>,
}

/// Runs `flow` from `source_ns` to `sink_ns` for `duration`, blocking until done; loss
/// runs are timed from `epoch`.
pub fn run(
    flow: &CbrFlow,
    source_ns: &Netns,
    sink_ns: &Netns,
    clock: Clock,
    epoch: Instant,
    duration: Duration,
) -> Result<CbrResult, LabError> {
    if flow.packet_bytes < HEADER || flow.rate_mbps <= 0.0 {
        return Err(LabError::Config(format!(
            "a CBR flow needs a positive rate and at least {HEADER}-byte datagrams"
        )));
    }
    let port = flow.port;
    let source = source_ns.enter_scoped(|| {
        UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .map_err(|e| LabError::io(format!("binding the CBR source to port {port}"), e))
    })?;
    let bind = flow.bind;
    let sink = sink_ns.enter_scoped(|| {
        UdpSocket::bind(SocketAddrV4::new(bind, 0))
            .map_err(|e| LabError::io(format!("binding the CBR sink to {bind}"), e))
    })?;
    let io = |what: &str, e| LabError::io(format!("CBR {what}"), e);
    source
        .set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| io("source", e))?;
    sink.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| io("sink", e))?;
    let sending = AtomicBool::new(true);
    let server = SocketAddrV4::new(flow.server, port);
    std::thread::scope(|scope| {
        let src = scope.spawn(|| {
            let sent = send(&source, flow, clock, duration);
            sending.store(false, Ordering::Relaxed);
            sent
        });
        let sink = scope.spawn(|| receive(&sink, server, clock, &sending));
        let (sent, start, interval) = src
            .join()
            .unwrap_or_else(|_| Err(LabError::App("the CBR source panicked".into())))?;
        let (mut r, seen) = sink
            .join()
            .unwrap_or_else(|_| Err(LabError::App("the CBR sink panicked".into())))?;
        let offset = start.saturating_duration_since(epoch).as_secs_f64();
        r.lost_runs = loss_runs(&seen, sent)
            .take(MAX_LOSS_RUNS)
            .map(|(first, n)| (offset + interval.as_secs_f64() * first as f64, n))
            .collect();
        r.rate_mbps = flow.rate_mbps;
        r.packet_bytes = flow.packet_bytes;
        r.packets_sent = sent;
        r.packets_lost = sent.saturating_sub(r.packets_received);
        r.loss_rate = r.packets_lost as f64 / sent.max(1) as f64;
        Ok(r)
    })
}

/// Waits for the client's request, then sends for `duration`; returns datagrams sent,
/// when the first was due and the interval between them.
fn send(
    socket: &UdpSocket,
    flow: &CbrFlow,
    clock: Clock,
    duration: Duration,
) -> Result<(u64, Instant, Duration), LabError> {
    let mut buf = [0u8; 64];
    let until = clock.now() + REQUEST_WITHIN;
    let client = loop {
        if clock.now() >= until || interrupted() {
            return Err(LabError::App(format!(
                "the CBR source heard no request from the client within {} s",
                REQUEST_WITHIN.as_secs()
            )));
        }
        match socket.recv_from(&mut buf) {
            Ok((_, from)) => break from,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(LabError::io("CBR source receiving the request", e)),
        }
    };
    let interval = Duration::from_secs_f64(flow.packet_bytes as f64 * 8.0 / (flow.rate_mbps * 1e6));
    let mut payload = vec![0x5au8; flow.packet_bytes];
    let start = clock.now();
    let end = start + duration;
    let mut seq = 0u64;
    loop {
        let due = start + interval * u32::try_from(seq).unwrap_or(u32::MAX);
        if due >= end || interrupted() {
            break;
        }
        let wait = due.saturating_duration_since(clock.now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        payload[..8].copy_from_slice(&seq.to_be_bytes());
        payload[8..HEADER].copy_from_slice(&clock.now().as_micros().to_be_bytes());
        // A full socket buffer or an unreachable route loses the datagram, as a stream's
        // source would; it still counts as sent.
        let _ = socket.send_to(&payload, client);
        seq += 1;
    }
    Ok((seq, start, interval))
}

/// Runs of sequence numbers below `sent` not `seen`: (first, count).
fn loss_runs(seen: &[bool], sent: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut i = 0u64;
    std::iter::from_fn(move || {
        let got = |k: u64| usize::try_from(k).ok().and_then(|k| seen.get(k)).copied() == Some(true);
        while i < sent && got(i) {
            i += 1;
        }
        if i >= sent {
            return None;
        }
        let first = i;
        while i < sent && !got(i) {
            i += 1;
        }
        Some((first, i - first))
    })
}

/// Requests the flow and counts what arrives until the source is done and `DRAIN` passed.
fn receive(
    socket: &UdpSocket,
    server: SocketAddrV4,
    clock: Clock,
    sending: &AtomicBool,
) -> Result<(CbrResult, Vec<bool>), LabError> {
    let mut seen: Vec<bool> = Vec::new();
    let mut r = CbrResult::default();
    let mut delays = Samples::new(Samples::DEFAULT_CAPACITY, Rng::new(1));
    let mut highest: Option<u64> = None;
    let mut last_arrival: Option<Instant> = None;
    let mut next_request = clock.now();
    let mut drain_until: Option<Instant> = None;
    let mut buf = vec![0u8; 65_536];
    loop {
        let now = clock.now();
        if !sending.load(Ordering::Relaxed) {
            let d = *drain_until.get_or_insert(now + DRAIN);
            if now >= d {
                break;
            }
        }
        if interrupted() {
            break;
        }
        if now >= next_request {
            let _ = socket.send_to(b"cbr", SocketAddr::V4(server));
            next_request = now + REQUEST_EVERY;
        }
        let n = match socket.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) => return Err(LabError::io("CBR sink receiving", e)),
        };
        let (Some(seq), Some(sent)) = (word(&buf[..n], 0), word(&buf[..n], 8)) else {
            continue;
        };
        let now = clock.now();
        // Bounded: at most MAX_TRACKED datagrams are counted.
        let Ok(i) = usize::try_from(seq) else {
            continue;
        };
        if i >= MAX_TRACKED {
            continue;
        }
        if seen.len() <= i {
            seen.resize(i + 1, false);
        }
        if seen[i] {
            r.duplicates += 1;
            continue;
        }
        seen[i] = true;
        r.packets_received += 1;
        if highest.is_some_and(|h| seq < h) {
            r.reordered += 1;
        }
        highest = Some(highest.map_or(seq, |h| h.max(seq)));
        delays.push(now.as_micros().saturating_sub(sent) as f64 / 1e3);
        if let (Some(last), true) = (last_arrival, sending.load(Ordering::Relaxed)) {
            r.longest_gap_ms = r.longest_gap_ms.max((now - last).as_secs_f64() * 1e3);
        }
        last_arrival = Some(now);
    }
    r.one_way_delay_ms = delays.summary();
    Ok((r, seen))
}

/// The big-endian u64 at `at` in `b`.
fn word(b: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_runs_cover_every_missing_datagram() {
        let seen = [true, false, false, true, true, false];
        let runs: Vec<_> = loss_runs(&seen, 8).collect();
        // 1-2 lost, 5 lost, 6-7 never reached the sink's table.
        assert_eq!(runs, vec![(1, 2), (5, 3)]);
        assert_eq!(loss_runs(&[true; 4], 4).count(), 0);
        assert_eq!(word(&[0, 0, 0, 0, 0, 0, 1, 2], 0), Some(258));
        assert_eq!(word(&[0; 7], 0), None);
    }
}
