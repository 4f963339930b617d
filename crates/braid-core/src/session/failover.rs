//! Failover: what the session does when a path's acknowledgements stall (detection in
//! [`crate::path::liveness`], oSCTP §IV-E).
//!
//! oSCTP observes that the packets scheduled on a failed path leave holes in the
//! receiver's buffer until the sender re-schedules them on the live path. braid keeps the
//! data packets it sent, with the path and path sequence number they went on, in a bounded
//! ring ([`RESEND_RING`] packets, recycled into the buffer pool as they fall out of it).
//! When a path is declared failed, the packets in the ring that the peer has not
//! acknowledged on it go back to the front of the send queue, oldest first, and the
//! schedulers put them on the live paths; the peer's resequencing buffer drops any copy that
//! did arrive as a duplicate. The inner TCP then sees reordering where it would have seen
//! the loss of a whole window (and a retransmission timeout).
//!
//! Only packets the inner transport cannot recover by itself in about a round trip are
//! resent (beyond oSCTP, which resends everything outstanding; oSCTP carries one SCTP
//! association, braid carries the user's own TCP). A TCP segment is left out when a later
//! segment of the same flow that occupies sequence space (a pure ACK: any later segment)
//! went on a live path: the inner receiver gets that later segment, its SACKs tell the
//! inner sender what the failed path lost, and the sender retransmits it within a round
//! trip on its own (RACK, RFC 8985). Resending it as well doubled what the surviving path
//! had to carry right when it became the only one: in the simulated lab failover the
//! download's TCP retransmitted 616 segments on top of braid's 244 resends, and goodput
//! took 1250-1550 ms to recover (5 of 6 seeds; 6550 ms in the sixth) against 300-450 ms
//! without the duplicates. What is resent is the tail of each flow (the last segments a
//! short flow sent, which TCP would otherwise recover only by a tail-loss probe or a
//! retransmission timeout) and everything that is not TCP.
//!
//! What the inner TCP recovers by itself it recovers only once its retransmissions leave
//! the send queue, and with per-path windows the queue its window builds waits there: a
//! queue sized for the paths before the failure takes that much longer to drain over the
//! survivors (in the simulated lab failover, 250 packets, 300 ms on the surviving 10 Mbit/s
//! path). So when a failure leaves segments to the inner TCP and took at least a quarter
//! of the delivery rate with it, the long flows' queued first transmissions are dropped
//! from the head of the send queue until the rest drains within [`TRIM_TARGET`]. The
//! inner TCP counts them lost in the same recovery as the failed path's segments (they were
//! sent before its retransmissions), so its window is cut once, as it would be anyway.
//! A packet gets its data sequence number only when it leaves the send queue, so a
//! dropped one leaves no hole at the peer.
//!
//! Holes the failed path leaves at the receiver need no flush of their own here: the
//! adaptive hole timeout ([`crate::reorder::HoleTimeout`]) releases what waits behind them
//! within the paths' delay gap, and the resent packets, arriving after that, are delivered
//! at once as late packets.

use std::time::Duration;

use super::aqm::is_bulk_data;
use super::Session;
use crate::{Event, Instant};

/// What the send queue may hold after a path fails, in time at the surviving paths'
/// delivery rate: the windows' queue allowance ([`crate::path::window::QUEUE_TARGET`]).
/// Simulated lab failover (`braid-sim/tests/failover.rs`): recovery 500 ms untrimmed, 350
/// trimming the failed path's share of the queue, 300 with this.
pub const TRIM_TARGET: Duration = Duration::from_millis(70);
/// The send queue is trimmed only when the failed path carried at least `1 /
/// TRIM_SHARE_INV` of the delivery rate: a lesser loss barely slows the queue, and a
/// trim then only costs the inner TCP. trace-bulk's 5g-static+lte-walk, whose 5G link is
/// declared failed 0.4 s into the download while carrying a twentieth of the rate: 0.36 of
/// the links' sum trimming there (a TCP in slow start cut), 0.68 without.
pub const TRIM_SHARE_INV: u64 = 4;

/// Data packets remembered for resending (about 1.5 MB of 1500-byte packets): over a
/// second of in-flight data at 10 Mbit/s.
pub const RESEND_RING: usize = 1024;

struct Sent {
    /// Position of the path it went on.
    pi: usize,
    path_seq: u32,
    seq: u32,
    packet: Vec<u8>,
    segment: Option<TcpSegment>,
}

/// What the resend rule needs to know of a TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TcpSegment {
    /// The flow table's id of its flow.
    flow: u64,
    /// It carries payload, SYN or FIN: the receiver acknowledges it, so its loss shows in
    /// the SACKs of the segments after it.
    seq_space: bool,
}

impl TcpSegment {
    pub(super) fn new(flow: u64, seq_space: bool) -> TcpSegment {
        TcpSegment { flow, seq_space }
    }
}

/// The data packets sent most recently, by send order.
#[derive(Default)]
pub(super) struct ResendRing {
    slots: Vec<Option<Sent>>,
    next: usize,
    scratch: Vec<(u32, Vec<u8>)>,
    /// Flows with a later segment on a live path: (flow id, one of them occupies sequence
    /// space).
    covered: Vec<(u64, bool)>,
    /// Packets put back in the send queue because their path failed.
    pub(super) resent: u64,
    /// Packets outstanding on a failed path left to the inner TCP's own recovery.
    pub(super) left: u64,
    /// Their data sequence numbers, from the last failure (scratch).
    left_seqs: Vec<u32>,
}

impl ResendRing {
    /// Remembers `packet` (data sequence number `seq`) as sent on path position `pi` with
    /// path sequence number `path_seq`; returns the buffer it displaced, for recycling.
    fn push(
        &mut self,
        pi: usize,
        path_seq: u32,
        seq: u32,
        packet: Vec<u8>,
        segment: Option<TcpSegment>,
    ) -> Option<Vec<u8>> {
        if self.slots.len() < RESEND_RING {
            self.slots.resize_with(RESEND_RING, || None);
        }
        let slot = &mut self.slots[self.next];
        self.next = (self.next + 1) % RESEND_RING;
        slot.replace(Sent {
            pi,
            path_seq,
            seq,
            packet,
            segment,
        })
        .map(|s| s.packet)
    }

    /// Path position `pi` left the session (`session/membership.rs`): forgets what went
    /// on it (returned, for recycling) and renumbers the positions after it.
    pub(super) fn forget(&mut self, pi: usize) -> Vec<Vec<u8>> {
        let mut freed = Vec::new();
        for slot in &mut self.slots {
            match slot {
                Some(s) if s.pi == pi => freed.extend(slot.take().map(|s| s.packet)),
                Some(s) if s.pi > pi => s.pi -= 1,
                _ => {}
            }
        }
        freed
    }
}

impl Session {
    /// Keeps a data packet just sent on path position `pi` for resending should the path
    /// fail; `segment` when it is a TCP segment of a tracked flow.
    pub(super) fn keep_sent(
        &mut self,
        pi: usize,
        seq: u32,
        packet: Vec<u8>,
        segment: Option<TcpSegment>,
    ) {
        let path_seq = self.paths[pi].last_seq_sent();
        if let Some(old) = self.failover.push(pi, path_seq, seq, packet, segment) {
            self.recycle(old);
        }
    }

    /// Feeds the failure detector an acknowledgement on path position `pi` and checks
    /// every path for a stall (see [`crate::path::liveness`]).
    pub(super) fn on_liveness_ack(&mut self, now: Instant, pi: usize, acked: u32, highest: u32) {
        if acked == 0 {
            return;
        }
        if self.paths[pi].on_liveness_ack(now, acked, highest) {
            let id = self.paths[pi].id();
            self.push_event(Event::PathUp(id));
        }
        for p in 0..self.paths.len() {
            let path = &self.paths[p];
            if !path.is_live()
                || path.unacked_datagrams() < crate::path::liveness::STALL_MIN_UNACKED
            {
                continue;
            }
            let Some(oldest) = path.oldest_unacked_arrival() else {
                continue;
            };
            let others = self
                .paths
                .iter()
                .enumerate()
                .filter(|&(q, o)| q != p && o.is_live())
                .filter_map(|(_, o)| o.liveness().newest_acked_arrival())
                .max();
            let grace = crate::path::liveness::grace(path.rtt().min());
            // The predictions can be off on lossy or long paths, and path acks rotate over
            // the return paths, so the evidence for this path may come back on the slowest
            // one: the path must also be late by the clock, its oldest outstanding datagram
            // unacknowledged for the largest smoothed RTT among the live paths plus the
            // grace. Without this a clean 10 ms path beside a lossy 400 ms one was declared
            // stalled over a hundred times in two minutes (never-worse, three mixed).
            // Another live path whose RTT is not measured yet counts as
            // [`UNMEASURED_RTT`](crate::path::liveness::UNMEASURED_RTT), not as nothing.
            let slowest_rtt = crate::path::liveness::slowest_rtt(
                path.srtt(),
                self.paths
                    .iter()
                    .enumerate()
                    .filter(|&(q, o)| q != p && o.is_live())
                    .map(|(_, o)| o.srtt()),
            );
            let late_by_own_clock = path
                .oldest_unacked_sent()
                .is_some_and(|sent| now.saturating_duration_since(sent) > slowest_rtt + grace);
            // And its acknowledgements must have stopped for the grace: a cellular link
            // whose rate fell keeps acknowledging, slowly, and is no failure (its window
            // follows the rate). (This check runs only when another path's acknowledgement
            // arrives, so a longer bound went unchecked once the inner TCP, waiting for
            // what the failed path held, stopped sending: the simulated failover waited
            // for the 500 ms path timeout.)
            let no_progress = path
                .last_ack_advance()
                .is_none_or(|t| now.saturating_duration_since(t) > grace);
            if late_by_own_clock
                && no_progress
                && crate::path::liveness::is_overdue(oldest, others, grace)
            {
                self.paths[p].declare_stalled(now);
                let id = self.paths[p].id();
                self.push_event(Event::PathDown(id));
                self.recovery.on_path_failed(now);
                self.resend_in_flight(p);
            }
        }
    }

    /// Puts the packets sent on path position `pi` that its peer has not acknowledged, and
    /// that the inner transport will not recover by itself (see the module's text), back
    /// at the front of the send queue, oldest first.
    pub(super) fn resend_in_flight(&mut self, pi: usize) {
        let left_before = self.failover.left;
        let highest = self.paths[pi].peer_highest_seq();
        let paths = &self.paths;
        let ring = &mut self.failover;
        ring.scratch.clear();
        ring.covered.clear();
        let n = ring.slots.len();
        // Newest first, so that every later segment of a flow is known when an older one
        // is judged.
        for k in (0..n).map(|k| (ring.next + n - 1 - k) % n) {
            let Some(s) = ring.slots[k].as_ref() else {
                continue;
            };
            if s.pi != pi {
                if let Some(seg) = s.segment.filter(|_| paths[s.pi].is_live()) {
                    match ring.covered.iter_mut().find(|(f, _)| *f == seg.flow) {
                        Some(c) => c.1 |= seg.seq_space,
                        None => ring.covered.push((seg.flow, seg.seq_space)),
                    }
                }
                continue;
            }
            // Acknowledged by the peer: it arrived.
            if highest.is_some_and(|h| s.path_seq.wrapping_sub(h) as i32 <= 0) {
                continue;
            }
            let recovered_by_tcp = s.segment.is_some_and(|seg| {
                ring.covered
                    .iter()
                    .any(|&(f, space)| f == seg.flow && (space || !seg.seq_space))
            });
            if recovered_by_tcp {
                ring.left += 1;
                ring.left_seqs.push(s.seq);
                continue;
            }
            if let Some(s) = ring.slots[k].take() {
                ring.scratch.push((s.seq, s.packet));
            }
        }
        let next = self.next_data_seq;
        // What is left to the inner TCP is left to it by the loss recovery too: repairing
        // it would hide from the TCP that the bond lost a path's worth of capacity.
        for &seq in &ring.left_seqs {
            self.recovery.leave_to_transport(seq);
        }
        ring.left_seqs.clear();
        if self.failover.left > left_before {
            self.trim_send_queue(pi);
        }
        let ring = &mut self.failover;
        ring.scratch
            .sort_unstable_by_key(|&(seq, _)| seq.wrapping_sub(next) as i32);
        ring.resent += ring.scratch.len() as u64;
        while let Some((seq, packet)) = ring.scratch.pop() {
            self.send_queue.push_resend(seq, packet);
        }
    }
}

impl Session {
    /// Drops long TCP flows' queued data from the head of the send queue until the rest
    /// drains over the surviving paths within [`TRIM_TARGET`].
    fn trim_send_queue(&mut self, pi: usize) {
        let now = self.last_now;
        let survivors: u64 = self
            .paths
            .iter()
            .enumerate()
            .filter(|&(q, o)| q != pi && o.is_live())
            .map(|(_, o)| o.delivery_rate_bps(now).unwrap_or_else(|| o.capacity_bps()))
            .sum();
        let failed = self.paths[pi].delivery_rate_bps(now).unwrap_or(0);
        if survivors == 0 || failed.saturating_mul(TRIM_SHARE_INV - 1) < survivors {
            return;
        }
        let budget = (survivors as f64 / 8.0 * TRIM_TARGET.as_secs_f64()) as usize;
        let mut queued = self.send_queue.bytes();
        if queued <= budget {
            return;
        }
        let flows = &self.scheduling.flows;
        let dropped = self.send_queue.drop_bulk(|fixed, p| {
            let drop = queued > budget && fixed.is_none() && is_bulk_data(flows, p);
            if drop {
                queued -= p.len();
            }
            drop
        });
        self.stats.failover_trimmed += dropped.len() as u64;
        for p in dropped {
            self.recycle(p);
        }
    }

    /// Whether the data packet `seq`, sent at `sent` (the peer's clock, µs), is a resend:
    /// numbered below the newest data packet received but sent after it. The sender sends
    /// new data in sequence order, so only a resend (or a retransmission) does that. Updates
    /// the newest packet's send time.
    pub(super) fn is_resent(&mut self, seq: u32, sent: u32) -> bool {
        let newer = self
            .highest_rx_data
            .is_none_or(|h| seq.wrapping_sub(h) as i32 > 0);
        if newer {
            self.newest_rx_sent = Some(sent);
            return false;
        }
        self.newest_rx_sent
            .is_some_and(|t| sent.wrapping_sub(t) as i32 > 0)
    }
}

impl Session {
    /// How long path position `pi` may stay silent before its receive side is declared
    /// down: the path timeout, or, while another path has been heard since this one last
    /// was, one heartbeat interval (the peer sends at least that often on every path it
    /// thinks alive) plus the path's stall grace (see [`crate::path::liveness`]).
    pub(super) fn silence_timeout(&self, pi: usize) -> std::time::Duration {
        let p = &self.paths[pi];
        let last = p.last_rx();
        let others_heard_since = self
            .paths
            .iter()
            .enumerate()
            .any(|(q, o)| q != pi && o.rx_live() && o.last_rx() > last);
        if !others_heard_since || last.is_none() {
            return self.config.path_timeout;
        }
        let fast = self.config.heartbeat_interval + crate::path::liveness::grace(p.rtt().min());
        fast.min(self.config.path_timeout)
    }
}
