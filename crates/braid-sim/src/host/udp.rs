//! Constant-bit-rate UDP: a source that emits IPv4/UDP packets on a fixed schedule and a
//! sink that measures loss, one-way delay and reordering.
//!
//! Packets are built by hand (RFC 791 header with checksum, RFC 768 UDP with checksum).
//! Each payload starts with the packet's sequence number and its send time in microseconds,
//! both big-endian `u64`; the rest is zeros. Source and sink share the simulator's clock,
//! so one-way delay is exact.

use braid_core::checksum::{fold, sum};
use braid_core::Instant;

use crate::metrics::{goodput_mbps, Samples, Summary};
use crate::{Packet, Rng};

use super::workload::CBR_HEADER_BYTES;

const IPV4_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
const PROTO_UDP: u8 = 17;

/// Sends packets `k = 0, 1, …` at `start + k · interval` while that is before `stop`.
#[derive(Clone, Debug)]
pub struct CbrSource {
    src: [u8; 4],
    dst: [u8; 4],
    port: u16,
    payload_bytes: usize,
    start: Instant,
    stop: Instant,
    interval_us: f64,
    next_seq: u64,
}

impl CbrSource {
    pub fn new(
        src: [u8; 4],
        dst: [u8; 4],
        port: u16,
        payload_bytes: usize,
        (start, stop): (Instant, Instant),
        interval_us: f64,
    ) -> CbrSource {
        CbrSource {
            src,
            dst,
            port,
            payload_bytes: payload_bytes.max(CBR_HEADER_BYTES),
            start,
            stop,
            interval_us,
            next_seq: 0,
        }
    }

    /// When the next packet is due, or `None` once the schedule has ended.
    pub fn next_due(&self) -> Option<Instant> {
        let offset = (self.next_seq as f64 * self.interval_us).round() as u64;
        let at = Instant::from_micros(self.start.as_micros().saturating_add(offset));
        (at < self.stop).then_some(at)
    }

    /// Writes the next packet into `buf` if it is due at `now`; false when none is due.
    pub fn pop_due(&mut self, now: Instant, buf: &mut Packet) -> bool {
        if self.next_due().is_none_or(|at| at > now) {
            return false;
        }
        build_udp(
            buf,
            (self.src, self.dst),
            self.port,
            self.next_seq,
            now,
            self.payload_bytes,
        );
        self.next_seq += 1;
        true
    }

    /// Packets sent so far.
    pub fn sent(&self) -> u64 {
        self.next_seq
    }

    pub fn payload_bytes(&self) -> usize {
        self.payload_bytes
    }
}

/// Writes an IPv4/UDP packet carrying `seq` and `now` into `buf` (replacing its contents).
fn build_udp(
    buf: &mut Packet,
    (src, dst): ([u8; 4], [u8; 4]),
    port: u16,
    seq: u64,
    now: Instant,
    payload_bytes: usize,
) {
    let udp_len = UDP_HEADER + payload_bytes;
    let total = IPV4_HEADER + udp_len;
    buf.clear();
    buf.resize(total, 0);
    // IPv4 header: version 4, IHL 5, DF, TTL 64.
    buf[0] = 0x45;
    buf[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    buf[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    buf[6] = 0x40;
    buf[8] = 64;
    buf[9] = PROTO_UDP;
    buf[12..16].copy_from_slice(&src);
    buf[16..20].copy_from_slice(&dst);
    let csum = !fold(sum(&buf[..IPV4_HEADER], 0));
    buf[10..12].copy_from_slice(&csum.to_be_bytes());
    // UDP header and payload.
    let udp = &mut buf[IPV4_HEADER..];
    udp[0..2].copy_from_slice(&port.to_be_bytes());
    udp[2..4].copy_from_slice(&port.to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[8..16].copy_from_slice(&seq.to_be_bytes());
    udp[16..24].copy_from_slice(&now.as_micros().to_be_bytes());
    // The payload past the CBR header is zeros, which add nothing to the sum (the headers
    // are a whole number of 16-bit words).
    let written = &udp[..UDP_HEADER + CBR_HEADER_BYTES];
    let mut csum = !fold(sum(written, pseudo_header(src, dst, udp_len)));
    if csum == 0 {
        csum = 0xffff;
    }
    udp[6..8].copy_from_slice(&csum.to_be_bytes());
}

/// A UDP datagram addressed to this host, as far as the demultiplexer needs it.
pub struct UdpDatagram<'a> {
    pub dst_port: u16,
    pub payload: &'a [u8],
    /// False when the UDP checksum is present and wrong.
    pub checksum_ok: bool,
}

/// Parses an unfragmented IPv4/UDP packet to `local` with a valid IPv4 header. Anything
/// else (TCP, malformed, corrupted header) returns `None` and is left to the TCP stack.
pub fn parse_udp(packet: &[u8], local: [u8; 4]) -> Option<UdpDatagram<'_>> {
    let header = packet.get(..IPV4_HEADER)?;
    let ihl = usize::from(header[0] & 0x0f) * 4;
    if header[0] >> 4 != 4 || ihl < IPV4_HEADER || header[9] != PROTO_UDP {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([header[2], header[3]]));
    let ip = packet.get(..total)?;
    if total < ihl + UDP_HEADER || fold(sum(ip.get(..ihl)?, 0)) != 0xffff {
        return None;
    }
    // More-fragments flag or a fragment offset: not ours to reassemble.
    if u16::from_be_bytes([header[6], header[7]]) & 0x3fff != 0 || header[16..20] != local {
        return None;
    }
    let udp = &ip[ihl..];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_HEADER || udp_len > udp.len() {
        return None;
    }
    let udp = &udp[..udp_len];
    let stored = u16::from_be_bytes([udp[6], udp[7]]);
    let checksum_ok = stored == 0 || {
        let mut src = [0; 4];
        src.copy_from_slice(&header[12..16]);
        fold(sum(udp, pseudo_header(src, local, udp_len))) == 0xffff
    };
    Some(UdpDatagram {
        dst_port: u16::from_be_bytes([udp[2], udp[3]]),
        payload: &udp[UDP_HEADER..],
        checksum_ok,
    })
}

/// The ones'-complement sum of the UDP pseudo-header (RFC 768).
fn pseudo_header(src: [u8; 4], dst: [u8; 4], udp_len: usize) -> u64 {
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src);
    pseudo[4..8].copy_from_slice(&dst);
    pseudo[9] = PROTO_UDP;
    pseudo[10..12].copy_from_slice(&(udp_len as u16).to_be_bytes());
    sum(&pseudo, 0)
}

/// How far behind the highest sequence number duplicates are recognized.
const DUP_WINDOW: u64 = 4096;

/// Receives a CBR stream: counts packets, loss (sequence numbers below the highest one seen
/// that never arrived), reorder events (a packet arriving after a higher sequence number),
/// duplicates (within the last 4096 sequence numbers) and corrupted packets (bad UDP
/// checksum), and records one-way delays.
#[derive(Clone, Debug)]
pub struct CbrSink {
    received: u64,
    payload_bytes: u64,
    reorders: u64,
    duplicates: u64,
    corrupted: u64,
    max_seq: Option<u64>,
    seen: Box<[u64; (DUP_WINDOW / 64) as usize]>,
    delay_ms: Samples,
    first_at: Option<Instant>,
    last_at: Option<Instant>,
}

impl CbrSink {
    pub fn new(rng: Rng) -> CbrSink {
        CbrSink {
            received: 0,
            payload_bytes: 0,
            reorders: 0,
            duplicates: 0,
            corrupted: 0,
            max_seq: None,
            seen: Box::new([0; (DUP_WINDOW / 64) as usize]),
            delay_ms: Samples::new(Samples::DEFAULT_CAPACITY, rng),
            first_at: None,
            last_at: None,
        }
    }

    pub fn on_datagram(&mut self, now: Instant, datagram: &UdpDatagram<'_>) {
        let p = datagram.payload;
        if !datagram.checksum_ok || p.len() < CBR_HEADER_BYTES {
            self.corrupted += 1;
            return;
        }
        let mut word = [0u8; 8];
        word.copy_from_slice(&p[0..8]);
        let seq = u64::from_be_bytes(word);
        word.copy_from_slice(&p[8..16]);
        let sent_us = u64::from_be_bytes(word);
        match self.max_seq {
            Some(max) if seq <= max => {
                if max - seq < DUP_WINDOW && self.bit(seq) {
                    self.duplicates += 1;
                    return;
                }
                self.reorders += 1;
            }
            Some(max) => {
                // Clear the bits of the sequence numbers the window moves over.
                if seq - max >= DUP_WINDOW {
                    self.seen.fill(0);
                } else {
                    for s in max + 1..seq {
                        self.clear_bit(s);
                    }
                }
                self.max_seq = Some(seq);
            }
            None => {
                self.max_seq = Some(seq);
            }
        }
        self.set_bit(seq);
        self.received += 1;
        self.payload_bytes += p.len() as u64;
        let delay_us = now.as_micros().saturating_sub(sent_us);
        self.delay_ms.push(delay_us as f64 / 1000.0);
        self.first_at.get_or_insert(now);
        self.last_at = Some(now);
    }

    fn bit(&self, seq: u64) -> bool {
        let i = (seq % DUP_WINDOW) as usize;
        self.seen[i / 64] & (1 << (i % 64)) != 0
    }

    fn set_bit(&mut self, seq: u64) {
        let i = (seq % DUP_WINDOW) as usize;
        self.seen[i / 64] |= 1 << (i % 64);
    }

    fn clear_bit(&mut self, seq: u64) {
        let i = (seq % DUP_WINDOW) as usize;
        self.seen[i / 64] &= !(1 << (i % 64));
    }

    /// The sink's measurements, with the source's count of packets sent.
    pub fn report(&self, sent: u64, source_payload_bytes: usize) -> CbrStats {
        let expected = self.max_seq.map_or(0, |m| m + 1);
        let lost = expected.saturating_sub(self.received);
        let active_s = match (self.first_at, self.last_at) {
            (Some(a), Some(b)) => (b - a).as_secs_f64(),
            _ => 0.0,
        };
        // Goodput over the span of arrivals, counting the first packet's interval.
        let per_packet_s = if self.received > 1 {
            active_s / (self.received - 1) as f64
        } else {
            0.0
        };
        CbrStats {
            packets_sent: sent,
            packets_received: self.received,
            packets_lost: lost,
            loss_rate: if expected > 0 {
                lost as f64 / expected as f64
            } else {
                0.0
            },
            reorder_events: self.reorders,
            duplicates: self.duplicates,
            corrupted: self.corrupted,
            packet_bytes: source_payload_bytes,
            payload_bytes_received: self.payload_bytes,
            goodput_mbps: goodput_mbps(self.payload_bytes, active_s + per_packet_s),
            one_way_delay_ms: self.delay_ms.summary(),
        }
    }
}

/// What a CBR sink measured.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct CbrStats {
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Sequence numbers below the highest received that never arrived; packets still in
    /// flight at the end of the run are not counted.
    pub packets_lost: u64,
    /// `packets_lost` over the sequence numbers up to the highest received.
    pub loss_rate: f64,
    /// Packets that arrived after a packet with a higher sequence number.
    pub reorder_events: u64,
    pub duplicates: u64,
    /// Packets dropped for a bad UDP checksum.
    pub corrupted: u64,
    /// UDP payload bytes per packet.
    pub packet_bytes: usize,
    pub payload_bytes_received: u64,
    /// Payload goodput over the span of arrivals.
    pub goodput_mbps: f64,
    pub one_way_delay_ms: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::workload::UDP_OVERHEAD;

    const A: [u8; 4] = [10, 0, 0, 2];
    const B: [u8; 4] = [10, 1, 0, 2];

    fn packet(seq: u64, at: u64) -> Packet {
        let mut p = Vec::new();
        build_udp(&mut p, (A, B), 7001, seq, Instant::from_micros(at), 100);
        p
    }

    #[test]
    fn packets_round_trip_and_checksums_catch_corruption() {
        let p = packet(5, 1234);
        assert_eq!(p.len(), 100 + UDP_OVERHEAD);
        let d = parse_udp(&p, B).unwrap();
        assert_eq!(d.dst_port, 7001);
        assert!(d.checksum_ok);
        assert_eq!(d.payload[..8], 5u64.to_be_bytes());
        assert!(parse_udp(&p, A).is_none(), "not addressed to A");
        let mut bad = p.clone();
        bad[40] ^= 1;
        assert!(!parse_udp(&bad, B).unwrap().checksum_ok);
        let mut bad_ip = p.clone();
        bad_ip[8] ^= 1;
        assert!(parse_udp(&bad_ip, B).is_none());
        for n in 0..p.len() {
            let _ = parse_udp(&p[..n], B);
        }
    }

    /// The checksum, summed over the headers only, is that of the whole datagram.
    #[test]
    fn the_checksum_covers_the_zero_payload() {
        for payload in (CBR_HEADER_BYTES..200).chain([1199, 1200, 1472]) {
            let mut p = Vec::new();
            build_udp(
                &mut p,
                (A, B),
                7001,
                77,
                Instant::from_micros(123_457),
                payload,
            );
            let udp = &p[IPV4_HEADER..];
            assert_eq!(
                fold(sum(udp, pseudo_header(A, B, udp.len()))),
                0xffff,
                "{payload}"
            );
        }
    }

    #[test]
    fn sink_counts_loss_reorder_and_duplicates() {
        let mut sink = CbrSink::new(Rng::new(1));
        for (seq, at) in [(0, 10), (2, 20), (1, 30), (2, 40), (5, 50)] {
            let p = packet(seq, at - 5);
            sink.on_datagram(Instant::from_micros(at), &parse_udp(&p, B).unwrap());
        }
        let r = sink.report(6, 100);
        assert_eq!(r.packets_received, 4);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.reorder_events, 1);
        assert_eq!(r.packets_lost, 2, "3 and 4");
        assert_eq!(r.one_way_delay_ms.max, 0.005);
    }

    #[test]
    fn source_keeps_its_schedule() {
        let mut s = CbrSource::new(
            A,
            B,
            7001,
            1200,
            (Instant::from_millis(1), Instant::from_millis(100)),
            9600.0,
        );
        assert_eq!(s.next_due(), Some(Instant::from_millis(1)));
        let mut buf = Vec::new();
        let mut n = 0;
        while s.pop_due(Instant::from_micros(20_200), &mut buf) {
            n += 1;
        }
        assert_eq!(n, 3);
        assert_eq!(s.next_due(), Some(Instant::from_micros(29_800)));
        while s.pop_due(Instant::from_millis(1000), &mut buf) {}
        assert_eq!(s.sent(), 11, "packets at 1 ms + k·9.6 ms before 100 ms");
        assert_eq!(s.next_due(), None);
    }
}
