//! Proactive-ACK (BaPu §3.3) at the sender's home AP, for one TCP upload.
//!
//! The sender's segments reach the receiver through several uplinks, out of order and a
//! backhaul round trip later than a direct path would take. So the home AP acknowledges
//! to the sender, in the receiver's name, every byte that some AP holds and the gateway
//! has given a forwarder (the announcements it hears, [`ProactiveAck::on_held`]): the
//! relays' tunnels are reliable, so held data will arrive. The receiver's own ACKs are
//! dropped (their news is older, and their duplicates mean reordering, not loss), except
//! that they still carry the receiver's window. When the next expected sequence is not
//! held in time while later data is, the data was lost on the air for every AP: the
//! home AP sends duplicate ACKs, with SACK for what is held, to make the sender
//! retransmit at once; not when the home AP caught that segment itself (it then waits
//! for a forwarder with room: reordering, not loss).
//!
//! Kept correct: the window advertised is the receiver's right edge (its last real ACK
//! plus its scaled window) less the spoofed ACK; timestamps echo the sender's TSval of
//! the segment that moved the ACK (RFC 7323 §4.3) with the receiver's latest TSval; SACK
//! blocks name only held data, and only on the duplicate ACKs. "In time" is learned: the
//! delay from the home AP seeing a segment to hearing it held, smoothed as TCP smooths
//! RTT, plus four deviations.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use super::report::Entry;
use super::unwrap_seq as unwrap;
use crate::checksum;
use crate::flow::parse::FlowKey;
use crate::rpc::segment::{self, tcp_sum};
use crate::Instant;

const ACK: u8 = 0x10;

/// Settings of Proactive-ACK.
#[derive(Clone, Debug)]
pub struct ProactiveAckConfig {
    /// Duplicate ACKs sent for a hole (the sender's fast-retransmit threshold).
    pub dupacks: u8,
    /// The hole timeout never goes below this.
    pub min_hole_timeout: Duration,
    /// Held ranges and seen segments tracked at once.
    pub max_ranges: usize,
}

impl Default for ProactiveAckConfig {
    fn default() -> Self {
        ProactiveAckConfig {
            dupacks: 3,
            min_hole_timeout: Duration::from_millis(20),
            max_ranges: 4096,
        }
    }
}

/// What to do with a packet from the receiver to the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckVerdict {
    /// Deliver it to the sender.
    Pass,
    /// A real ACK Proactive-ACK has replaced.
    Drop,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProactiveAckStats {
    pub spoofed_acks: u64,
    pub dupacks_sent: u64,
    pub real_acks_dropped: u64,
    /// Real ACKs beyond the spoofed one (data that reached the receiver unannounced).
    pub real_acks_ahead: u64,
    pub holes: u64,
    /// Holes that outlived the timeout while the home AP held the segment (no DUPACKs).
    pub holes_held_at_home: u64,
}

#[derive(Clone, Copy, Debug)]
struct Seen {
    start: u64,
    at: Instant,
    tsval: Option<u32>,
}

/// Proactive-ACK for one TCP flow (sender → receiver).
pub struct ProactiveAck {
    cfg: ProactiveAckConfig,
    /// The data direction, once the sender's SYN is seen.
    flow: Option<FlowKey>,
    established: bool,
    /// Next byte the sender expects acknowledged (unwrapped, from the sender's ISN).
    acked: u64,
    held: BTreeMap<u64, u64>,
    seen: VecDeque<Seen>,
    ts_recent: u32,
    highest_sent: u64,
    // The receiver's side.
    rcv_seq: u32,
    rcv_shift: u8,
    sack_ok: bool,
    timestamps: bool,
    rcv_tsval: u32,
    right_edge: u64,
    advertised_edge: u64,
    // Hole detection.
    srtt: Option<Duration>,
    rttvar: Duration,
    hole_since: Option<Instant>,
    dup_at: Option<(u64, Instant)>,
    ip_id: u16,
    out: VecDeque<Vec<u8>>,
    stats: ProactiveAckStats,
}

/// Window scale, SACK-permitted and timestamps from a SYN's options. Total.
fn syn_options(opts: &[u8]) -> (Option<u8>, bool, bool) {
    let (mut shift, mut sack, mut ts) = (None, false, false);
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => i += 1,
            _ => {
                let Some(&len) = opts.get(i + 1) else { break };
                let len = usize::from(len);
                if len < 2 || i + len > opts.len() {
                    break;
                }
                match (kind, len) {
                    (3, 3) => shift = Some(opts[i + 2].min(14)),
                    (4, 2) => sack = true,
                    (8, 10) => ts = true,
                    _ => {}
                }
                i += len;
            }
        }
    }
    (shift, sack, ts)
}

impl ProactiveAck {
    pub fn new(cfg: ProactiveAckConfig) -> ProactiveAck {
        ProactiveAck {
            cfg,
            flow: None,
            established: false,
            acked: 0,
            held: BTreeMap::new(),
            seen: VecDeque::new(),
            ts_recent: 0,
            highest_sent: 0,
            rcv_seq: 0,
            rcv_shift: 0,
            sack_ok: false,
            timestamps: false,
            rcv_tsval: 0,
            right_edge: 0,
            advertised_edge: 0,
            srtt: None,
            rttvar: Duration::ZERO,
            hole_since: None,
            dup_at: None,
            ip_id: 0,
            out: VecDeque::new(),
            stats: ProactiveAckStats::default(),
        }
    }

    pub fn stats(&self) -> &ProactiveAckStats {
        &self.stats
    }

    /// The next sequence number the sender has been told is received (its low 32 bits).
    pub fn acked(&self) -> u32 {
        self.acked as u32
    }

    /// How long a hole may last before duplicate ACKs.
    pub fn hole_timeout(&self) -> Duration {
        let learned = self
            .srtt
            .map_or(Duration::from_millis(200), |s| s + 4 * self.rttvar);
        learned.max(self.cfg.min_hole_timeout)
    }

    /// A packet from the sender, as the home AP receives it.
    pub fn on_uplink(&mut self, now: Instant, packet: &[u8]) {
        let Ok(seg) = segment::parse(packet) else {
            return;
        };
        if seg.syn() && seg.ack.is_none() {
            self.flow = Some(seg.key);
            self.acked = u64::from(seg.seq) + 1;
            self.highest_sent = self.acked;
            self.established = false;
            self.held.clear();
            self.seen.clear();
            return;
        }
        if self.flow != Some(seg.key) || seg.payload_len == 0 {
            return;
        }
        let start = unwrap(self.acked, seg.seq);
        let end = start + u64::from(seg.payload_len) + u64::from(seg.fin());
        self.highest_sent = self.highest_sent.max(end);
        if self.seen.len() >= self.cfg.max_ranges {
            self.seen.pop_front();
        }
        self.seen.push_back(Seen {
            start,
            at: now,
            tsval: seg.options.timestamps.map(|t| t.0),
        });
    }

    /// A segment the gateway announced a forwarder for (an entry of this flow).
    pub fn on_held(&mut self, now: Instant, e: &Entry) {
        if !self.established || e.seq_len == 0 {
            return;
        }
        let start = unwrap(self.acked, e.seq);
        let end = start + u64::from(e.seq_len);
        if let Some(i) = self.seen.iter().position(|s| s.start == start) {
            let s = self.seen[i];
            self.sample(now.saturating_duration_since(s.at));
            if start <= self.acked {
                if let Some(ts) = s.tsval {
                    self.ts_recent = ts;
                }
            }
            self.seen.remove(i);
        }
        if end <= self.acked {
            return;
        }
        self.insert(start.max(self.acked), end);
        let before = self.acked;
        while let Some((&s, &e)) = self.held.first_key_value() {
            if s > self.acked {
                break;
            }
            self.acked = self.acked.max(e);
            self.held.pop_first();
        }
        if self.acked > before {
            let acked = self.acked;
            self.seen.retain(|s| s.start >= acked);
            self.hole_since = None;
            self.dup_at = None;
            self.emit(false);
            self.stats.spoofed_acks += 1;
        }
        if !self.held.is_empty() && self.hole_since.is_none() {
            self.hole_since = Some(now);
        }
    }

    fn insert(&mut self, mut start: u64, mut end: u64) {
        // Merge with overlapping or touching neighbours.
        let overlapping: Vec<(u64, u64)> = self
            .held
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.held.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.held.insert(start, end);
        while self.held.len() > self.cfg.max_ranges {
            self.held.pop_last();
        }
    }

    fn sample(&mut self, d: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(d);
                self.rttvar = d / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(d);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + d) / 8);
            }
        }
    }

    /// A packet from the receiver to the sender: whether it goes on.
    pub fn on_downlink(&mut self, now: Instant, packet: &[u8]) -> AckVerdict {
        let Ok(seg) = segment::parse(packet) else {
            return AckVerdict::Pass;
        };
        let Some(flow) = self.flow else {
            return AckVerdict::Pass;
        };
        if seg.key != flow.reversed() {
            return AckVerdict::Pass;
        }
        let Some(ack) = seg.ack else {
            return AckVerdict::Pass;
        };
        let ack = unwrap(self.acked, ack);
        if let Some(ts) = seg.options.timestamps {
            self.rcv_tsval = ts.0;
        }
        if seg.syn() {
            let header = usize::from(packet[seg.tcp_at + 12] >> 4) * 4;
            let opts = packet
                .get(seg.options_at..seg.tcp_at + header)
                .unwrap_or(&[]);
            let (shift, sack, ts) = syn_options(opts);
            self.rcv_shift = shift.unwrap_or(0);
            self.sack_ok = sack;
            self.timestamps = ts;
            self.rcv_seq = seg.seq.wrapping_add(1);
            // A SYN's window is never scaled (RFC 7323 §2.2).
            self.right_edge = ack + u64::from(window_field(packet, &seg));
            self.advertised_edge = self.right_edge;
            self.established = true;
            return AckVerdict::Pass;
        }
        self.right_edge = self
            .right_edge
            .max(ack + (u64::from(window_field(packet, &seg)) << self.rcv_shift));
        if seg.rst() || seg.fin() || seg.payload_len > 0 || !self.established {
            return AckVerdict::Pass;
        }
        if ack > self.acked {
            // The receiver has data no announcement covered: catch up to it.
            self.stats.real_acks_ahead += 1;
            self.acked = ack;
            while let Some((&s, &e)) = self.held.first_key_value() {
                if s > self.acked {
                    break;
                }
                self.acked = self.acked.max(e);
                self.held.pop_first();
            }
            self.hole_since = (!self.held.is_empty()).then_some(now);
            self.emit(false);
            self.stats.spoofed_acks += 1;
        } else if self.advertised_edge <= self.highest_sent
            && self.right_edge > self.advertised_edge
        {
            // The sender has filled the window we last showed: tell it the window grew.
            self.emit(false);
            self.stats.spoofed_acks += 1;
        }
        self.stats.real_acks_dropped += 1;
        AckVerdict::Drop
    }

    /// When [`ProactiveAck::handle_timeout`] has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let since = self.hole_since?;
        let t = since + self.hole_timeout();
        Some(match self.dup_at {
            Some((a, at)) if a == self.acked => t.max(at + 2 * self.hole_timeout()),
            _ => t,
        })
    }

    /// Sends duplicate ACKs for a hole that outlived the hole timeout (again after twice
    /// the timeout, should the retransmission be lost too).
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(due) = self.poll_timeout() else {
            return;
        };
        if now < due || self.held.is_empty() {
            return;
        }
        if self.seen.iter().any(|s| s.start == self.acked) {
            // The home AP caught the missing segment itself: it waits for a forwarder
            // with room, it was not lost on the air. Look again a timeout later.
            self.hole_since = Some(now);
            self.stats.holes_held_at_home += 1;
            return;
        }
        self.stats.holes += 1;
        for _ in 0..self.cfg.dupacks {
            self.emit(true);
            self.stats.dupacks_sent += 1;
        }
        self.dup_at = Some((self.acked, now));
    }

    /// The next spoofed ACK for the sender.
    pub fn poll_ack(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// Builds an ACK from the receiver to the sender for `self.acked`.
    fn emit(&mut self, with_sack: bool) {
        let Some(flow) = self.flow else { return };
        let (IpAddr::V4(sender), IpAddr::V4(receiver)) = (flow.src, flow.dst) else {
            return;
        };
        let mut opts: Vec<u8> = Vec::with_capacity(40);
        if self.timestamps {
            opts.extend_from_slice(&[1, 1, 8, 10]);
            opts.extend_from_slice(&self.rcv_tsval.to_be_bytes());
            opts.extend_from_slice(&self.ts_recent.to_be_bytes());
        }
        if with_sack && self.sack_ok {
            let max = if self.timestamps { 3 } else { 4 };
            let blocks: Vec<(u64, u64)> =
                self.held.iter().take(max).map(|(&s, &e)| (s, e)).collect();
            if !blocks.is_empty() {
                opts.extend_from_slice(&[1, 1, 5, (2 + 8 * blocks.len()) as u8]);
                for (s, e) in blocks {
                    opts.extend_from_slice(&(s as u32).to_be_bytes());
                    opts.extend_from_slice(&(e as u32).to_be_bytes());
                }
            }
        }
        let window = (self.right_edge.saturating_sub(self.acked) >> self.rcv_shift).min(65_535);
        self.advertised_edge = self.acked + (window << self.rcv_shift);
        let len = 40 + opts.len();
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        p[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
        p[6] = 0x40;
        p[8] = 64;
        p[9] = crate::flow::parse::PROTO_TCP;
        p[12..16].copy_from_slice(&receiver.octets());
        p[16..20].copy_from_slice(&sender.octets());
        let ip_sum = !checksum::fold(checksum::sum(&p[..20], 0));
        p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
        p[20..22].copy_from_slice(&flow.dst_port.to_be_bytes());
        p[22..24].copy_from_slice(&flow.src_port.to_be_bytes());
        p[24..28].copy_from_slice(&self.rcv_seq.to_be_bytes());
        p[28..32].copy_from_slice(&(self.acked as u32).to_be_bytes());
        p[32] = (((20 + opts.len()) / 4) as u8) << 4;
        p[33] = ACK;
        p[34..36].copy_from_slice(&(window as u16).to_be_bytes());
        p[40..].copy_from_slice(&opts);
        let sum = !tcp_sum(&p, 20);
        p[36..38].copy_from_slice(&sum.to_be_bytes());
        self.out.push_back(p);
    }
}

fn window_field(packet: &[u8], seg: &segment::Segment) -> u16 {
    u16::from_be_bytes([packet[seg.tcp_at + 14], packet[seg.tcp_at + 15]])
}
