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
//! Holes the failed path leaves at the receiver need no flush of their own here: the
//! adaptive hole timeout ([`crate::reorder::HoleTimeout`]) releases what waits behind them
//! within the paths' delay gap, and the resent packets, arriving after that, are delivered
//! at once as late packets.

use super::Session;
use crate::{Event, Instant};

/// Data packets remembered for resending (about 1.5 MB of 1500-byte packets): over a
/// second of in-flight data at 10 Mbit/s.
pub const RESEND_RING: usize = 1024;

struct Sent {
    /// Position of the path it went on.
    pi: usize,
    path_seq: u32,
    seq: u32,
    packet: Vec<u8>,
}

/// The data packets sent most recently, by send order.
#[derive(Default)]
pub(super) struct ResendRing {
    slots: Vec<Option<Sent>>,
    next: usize,
    scratch: Vec<(u32, Vec<u8>)>,
    /// Packets put back in the send queue because their path failed.
    pub(super) resent: u64,
}

impl ResendRing {
    /// Remembers `packet` (data sequence number `seq`) as sent on path position `pi` with
    /// path sequence number `path_seq`; returns the buffer it displaced, for recycling.
    fn push(&mut self, pi: usize, path_seq: u32, seq: u32, packet: Vec<u8>) -> Option<Vec<u8>> {
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
        })
        .map(|s| s.packet)
    }
}

impl Session {
    /// Keeps a data packet just sent on path position `pi` for resending should the path
    /// fail.
    pub(super) fn keep_sent(&mut self, pi: usize, seq: u32, packet: Vec<u8>) {
        let path_seq = self.paths[pi].last_seq_sent();
        if let Some(old) = self.failover.push(pi, path_seq, seq, packet) {
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
            let slowest_rtt = self
                .paths
                .iter()
                .filter(|o| o.is_live())
                .filter_map(|o| o.srtt())
                .max()
                .unwrap_or(grace);
            let late_by_own_clock = path
                .oldest_unacked_sent()
                .is_some_and(|sent| now.saturating_duration_since(sent) > slowest_rtt + grace);
            if late_by_own_clock && crate::path::liveness::is_overdue(oldest, others, grace) {
                self.paths[p].declare_stalled(now);
                let id = self.paths[p].id();
                self.push_event(Event::PathDown(id));
                self.resend_in_flight(p);
            }
        }
    }

    /// Puts the packets sent on path position `pi` that its peer has not acknowledged back
    /// at the front of the send queue, oldest first.
    fn resend_in_flight(&mut self, pi: usize) {
        let highest = self.paths[pi].peer_highest_seq();
        let ring = &mut self.failover;
        ring.scratch.clear();
        for slot in &mut ring.slots {
            let unacked = slot.as_ref().is_some_and(|s| {
                s.pi == pi && highest.is_none_or(|h| s.path_seq.wrapping_sub(h) as i32 > 0)
            });
            if unacked {
                if let Some(s) = slot.take() {
                    ring.scratch.push((s.seq, s.packet));
                }
            }
        }
        let next = self.next_data_seq;
        ring.scratch
            .sort_unstable_by_key(|&(seq, _)| seq.wrapping_sub(next) as i32);
        ring.resent += ring.scratch.len() as u64;
        while let Some(p) = ring.scratch.pop() {
            self.send_queue.push_front(p);
        }
    }
}

impl Session {
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
