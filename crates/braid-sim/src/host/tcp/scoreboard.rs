//! The sender's scoreboard: every segment sent and not yet cumulatively acknowledged, with
//! what SACK and loss detection have learnt about it (RFC 6675 §3, with Linux's
//! per-segment flags).
//!
//! A segment keeps the boundaries it was first sent with; retransmissions resend it
//! whole. Counts are kept as Linux keeps them, in segments: `sacked_out`, `lost_out`, and
//! `retrans_out` (retransmissions in flight), so that the data in flight, RFC 6675's
//! "pipe", is `packets_out − sacked_out − lost_out + retrans_out` (Linux
//! `tcp_packets_in_flight`). A segment is marked SACKed only when a block covers it
//! entirely.

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;

use super::seq::Seq;

/// One segment in flight.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub start: Seq,
    /// One past the last sequence number, counting a FIN.
    pub end: Seq,
    pub fin: bool,
    /// The last (re)transmission.
    pub xmit: Instant,
    pub sacked: bool,
    /// Deemed lost and not yet repaired.
    pub lost: bool,
    /// A retransmission of it is in flight.
    pub retrans: bool,
    pub ever_retrans: bool,
}

impl Sent {
    pub fn new(start: Seq, end: Seq, fin: bool, xmit: Instant) -> Sent {
        Sent {
            start,
            end,
            fin,
            xmit,
            sacked: false,
            lost: false,
            retrans: false,
            ever_retrans: false,
        }
    }

    /// Payload bytes (the FIN takes a sequence number but carries none).
    pub fn data_len(&self) -> u32 {
        self.end.since(self.start) - u32::from(self.fin)
    }
}

/// RACK's "sent after" order (RFC 8985 §6.2): later transmission, ties broken by the
/// higher sequence number.
pub fn sent_after(t1: Instant, end1: Seq, t2: Instant, end2: Seq) -> bool {
    t1 > t2 || (t1 == t2 && end1 > end2)
}

#[derive(Debug, Default)]
pub struct Scoreboard {
    segs: VecDeque<Sent>,
    sacked: u32,
    lost: u32,
    retrans: u32,
    /// Lost and not retransmitted since.
    to_repair: u32,
}

/// What a cumulative ACK removed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Acked {
    /// Segments removed that had not been SACKed before: newly delivered.
    pub delivered: u32,
    /// Segments removed in all.
    pub removed: u32,
    pub fin: bool,
}

impl Scoreboard {
    pub fn push(&mut self, seg: Sent) {
        self.segs.push_back(seg);
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    pub fn packets_out(&self) -> u32 {
        self.segs.len() as u32
    }

    pub fn sacked_out(&self) -> u32 {
        self.sacked
    }

    pub fn lost_out(&self) -> u32 {
        self.lost
    }

    /// RFC 6675's pipe, in segments.
    pub fn in_flight(&self) -> u32 {
        (self.packets_out() + self.retrans).saturating_sub(self.sacked + self.lost)
    }

    pub fn get(&self, i: usize) -> Option<&Sent> {
        self.segs.get(i)
    }

    pub fn first(&self) -> Option<&Sent> {
        self.segs.front()
    }

    /// Removes what `una` acknowledges; `visit` sees each newly delivered segment.
    pub fn ack(&mut self, una: Seq, mut visit: impl FnMut(&Sent)) -> Acked {
        let mut acked = Acked::default();
        while let Some(front) = self.segs.front_mut() {
            if front.end <= una {
                let seg = *front;
                self.segs.pop_front();
                self.forget(&seg);
                acked.removed += 1;
                acked.fin |= seg.fin;
                if !seg.sacked {
                    acked.delivered += 1;
                    visit(&seg);
                }
            } else {
                if front.start < una {
                    // Part of a segment: keep the rest (the peer cut it to its window).
                    front.start = una;
                }
                break;
            }
        }
        acked
    }

    /// Marks the segments `blocks` cover entirely; `visit` sees each newly SACKed one.
    /// Returns how many were newly SACKed.
    pub fn sack(&mut self, blocks: &[(Seq, Seq)], mut visit: impl FnMut(&Sent)) -> u32 {
        let mut newly = 0;
        for &(left, right) in blocks {
            if right <= left {
                continue;
            }
            let mut i = self.segs.partition_point(|s| s.end <= left);
            while let Some(seg) = self.segs.get_mut(i) {
                if seg.end > right {
                    break;
                }
                if seg.start >= left && !seg.sacked {
                    let before = *seg;
                    seg.sacked = true;
                    seg.lost = false;
                    seg.retrans = false;
                    self.sacked += 1;
                    if before.lost {
                        self.lost -= 1;
                        if !before.retrans {
                            self.to_repair -= 1;
                        }
                    }
                    if before.retrans {
                        self.retrans -= 1;
                    }
                    newly += 1;
                    visit(&before);
                }
                i += 1;
            }
        }
        newly
    }

    /// Marks segment `i` lost (its retransmission too, if one was in flight); true if
    /// that changed anything.
    pub fn mark_lost(&mut self, i: usize) -> bool {
        let Some(seg) = self.segs.get_mut(i) else {
            return false;
        };
        if seg.sacked || (seg.lost && !seg.retrans) {
            return false;
        }
        if seg.retrans {
            seg.retrans = false;
            self.retrans -= 1;
        }
        if !seg.lost {
            seg.lost = true;
            self.lost += 1;
        }
        self.to_repair += 1;
        true
    }

    /// After a retransmission timeout every segment not SACKed is lost and no
    /// retransmission is in flight (Linux `tcp_timeout_mark_lost`).
    pub fn mark_all_lost(&mut self) {
        self.retrans = 0;
        self.lost = 0;
        self.to_repair = 0;
        for seg in &mut self.segs {
            seg.retrans = false;
            seg.lost = !seg.sacked;
            if seg.lost {
                self.lost += 1;
                self.to_repair += 1;
            }
        }
    }

    /// The position of the segment starting at `seq`.
    pub fn position_of(&self, seq: Seq) -> Option<usize> {
        let i = self.segs.partition_point(|s| s.start < seq);
        (self.segs.get(i)?.start == seq).then_some(i)
    }

    /// Marks segment `i` lost unless it is SACKed, already lost, or retransmitted before
    /// (a negative ACK names the original transmission). Whether it was marked.
    pub fn mark_lost_once(&mut self, i: usize) -> bool {
        let Some(seg) = self.segs.get(i) else {
            return false;
        };
        if seg.sacked || seg.lost || seg.ever_retrans {
            return false;
        }
        self.mark_lost(i)
    }

    /// The first segment that is lost and not yet retransmitted.
    pub fn next_to_repair(&self) -> Option<usize> {
        if self.to_repair == 0 {
            return None;
        }
        self.segs.iter().position(|s| s.lost && !s.retrans)
    }

    /// Records a retransmission of segment `i` at `now`.
    pub fn on_retransmit(&mut self, i: usize, now: Instant) {
        let Some(seg) = self.segs.get_mut(i) else {
            return;
        };
        if seg.sacked {
            return;
        }
        if !seg.retrans {
            seg.retrans = true;
            self.retrans += 1;
            if seg.lost {
                self.to_repair -= 1;
            }
        }
        seg.ever_retrans = true;
        seg.xmit = now;
    }

    /// RACK's loss detection (RFC 8985 §6.2 step 5): a segment in flight that was sent
    /// before the most recently sent delivered one (`rack_xmit`, `rack_end`) is lost once
    /// `window` (RACK.rtt + reo_wnd) has passed since its transmission. Returns the
    /// segments newly marked lost and how long until the next one could be.
    pub fn rack_detect(
        &mut self,
        now: Instant,
        rack_xmit: Instant,
        rack_end: Seq,
        window: Duration,
    ) -> (u32, Option<Duration>) {
        let mut newly = 0;
        let mut wait: Option<Duration> = None;
        let mut retrans_seen = 0;
        let retrans_total = self.retrans;
        for i in 0..self.segs.len() {
            let seg = self.segs[i];
            let in_flight = !seg.sacked && (!seg.lost || seg.retrans);
            if !in_flight {
                continue;
            }
            if seg.retrans {
                retrans_seen += 1;
            }
            if !sent_after(rack_xmit, rack_end, seg.xmit, seg.end) {
                // Never-retransmitted segments are in transmission order: once one was
                // sent after RACK's, so were all later ones but the retransmissions.
                if !seg.ever_retrans && retrans_seen == retrans_total {
                    break;
                }
                continue;
            }
            let deadline = seg.xmit + window;
            if deadline <= now {
                if self.mark_lost(i) {
                    newly += 1;
                }
            } else {
                let left = deadline - now;
                wait = Some(wait.map_or(left, |w| w.max(left)));
            }
        }
        (newly, wait)
    }

    /// Marks the first segment lost if nothing is yet (NewReno, RFC 6582, for peers
    /// without SACK: the head is what duplicate or partial ACKs point at).
    pub fn mark_head_lost(&mut self) -> bool {
        match self.segs.front() {
            Some(seg) if !seg.lost && !seg.retrans => self.mark_lost(0),
            _ => false,
        }
    }

    fn forget(&mut self, seg: &Sent) {
        if seg.sacked {
            self.sacked -= 1;
        }
        if seg.lost {
            self.lost -= 1;
            if !seg.retrans {
                self.to_repair -= 1;
            }
        }
        if seg.retrans {
            self.retrans -= 1;
        }
    }

    #[cfg(test)]
    pub fn check(&self) {
        let count = |f: fn(&Sent) -> bool| self.segs.iter().filter(|s| f(s)).count() as u32;
        assert_eq!(self.sacked, count(|s| s.sacked));
        assert_eq!(self.lost, count(|s| s.lost));
        assert_eq!(self.retrans, count(|s| s.retrans));
        assert_eq!(self.to_repair, count(|s| s.lost && !s.retrans));
        assert!(self
            .segs
            .iter()
            .all(|s| !(s.sacked && (s.lost || s.retrans))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rng;

    fn board(n: u32) -> Scoreboard {
        let mut b = Scoreboard::default();
        for i in 0..n {
            let t = Instant::from_millis(u64::from(i));
            b.push(Sent::new(Seq(i * 100), Seq(i * 100 + 100), false, t));
        }
        b
    }

    #[test]
    fn sack_then_ack_counts_delivery_once() {
        let mut b = board(10);
        let mut seen = Vec::new();
        let n = b.sack(&[(Seq(300), Seq(600)), (Seq(750), Seq(900))], |s| {
            seen.push(s.start.0)
        });
        assert_eq!(n, 4, "300, 400, 500 and 800; 700 is only half covered");
        assert_eq!(seen, vec![300, 400, 500, 800]);
        assert_eq!(b.in_flight(), 6);
        let a = b.ack(Seq(600), |_| {});
        assert_eq!((a.removed, a.delivered), (6, 3));
        assert_eq!(b.sacked_out(), 1);
        b.check();
        let a = b.ack(Seq(650), |_| {});
        assert_eq!(a.removed, 0);
        assert_eq!(b.first().unwrap().start, Seq(650));
    }

    #[test]
    fn rack_marks_older_segments_after_the_window() {
        let mut b = board(10);
        b.sack(&[(Seq(500), Seq(600))], |_| {});
        let rack = (Instant::from_millis(5), Seq(600));
        let w = Duration::from_millis(10);
        // At 12 ms: segments sent at 0-2 ms are past the window, 3-4 ms not yet.
        let (lost, wait) = b.rack_detect(Instant::from_millis(12), rack.0, rack.1, w);
        assert_eq!(lost, 3);
        assert_eq!(wait, Some(Duration::from_millis(2)));
        assert_eq!(b.next_to_repair(), Some(0));
        b.on_retransmit(0, Instant::from_millis(12));
        assert_eq!(b.next_to_repair(), Some(1));
        assert_eq!(b.in_flight(), 10 - 1 - 3 + 1);
        b.check();
        // Delivering 9 (sent at 9 ms) condemns 3, 4 and 6-8, not the retransmission.
        b.sack(&[(Seq(900), Seq(1000))], |_| {});
        let at = Instant::from_millis(40);
        let (lost, _) = b.rack_detect(at, Instant::from_millis(9), Seq(1000), w);
        assert_eq!(lost, 5);
        assert!(b.get(0).unwrap().retrans);
        // The retransmission is itself lost once something sent after it is delivered.
        b.push(Sent::new(
            Seq(1000),
            Seq(1100),
            false,
            Instant::from_millis(13),
        ));
        b.sack(&[(Seq(1000), Seq(1100))], |_| {});
        let (lost, _) = b.rack_detect(at, Instant::from_millis(13), Seq(1100), w);
        assert_eq!(lost, 1);
        assert_eq!(b.next_to_repair(), Some(0));
        b.check();
    }

    #[test]
    fn random_operations_keep_the_counts() {
        let mut rng = Rng::new(8);
        for _ in 0..200 {
            let mut b = board(40);
            let mut una = Seq(0);
            for step in 0..60 {
                let now = Instant::from_millis(100 + step);
                match rng.below(6) {
                    0 => {
                        una = una + rng.below(500) as u32;
                        b.ack(una, |_| {});
                    }
                    1 => {
                        let l = Seq(rng.below(4000) as u32);
                        b.sack(&[(l, l + rng.below(800) as u32)], |_| {});
                    }
                    2 => {
                        let i = rng.below(45) as usize;
                        b.mark_lost(i);
                    }
                    3 => {
                        if let Some(i) = b.next_to_repair() {
                            b.on_retransmit(i, now);
                        }
                    }
                    4 => {
                        let t = Instant::from_millis(rng.below(150));
                        b.rack_detect(
                            now,
                            t,
                            Seq(rng.below(4000) as u32),
                            Duration::from_millis(5),
                        );
                    }
                    _ => b.mark_all_lost(),
                }
                b.check();
                assert!(b.in_flight() <= 2 * b.packets_out());
            }
        }
    }
}
