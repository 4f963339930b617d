//! The resequencing buffer (PluriBus §5): data packets leave in data-sequence order; a
//! packet above a hole waits until the hole fills (directly or by recovery) or until it has
//! waited the hole timeout (50 ms in the paper), then it and everything in order behind it
//! leave and the hole is given up.
//!
//! Beyond the paper:
//! - A packet that arrives after its hole was given up is delivered at once rather than
//!   dropped: to the inner TCP it is reordering, not loss.
//! - Duplicates (from redundant scheduling, retransmission or recovery racing the original)
//!   are recognised in a window of `limit` sequence numbers behind the delivery point and
//!   dropped.
//! - The buffer is bounded: a packet `limit` or more ahead of the delivery point forces the
//!   oldest holes to be given up. Everything given up or dropped is counted.
//!
//! Storage is a ring of `limit` slots indexed by sequence number, buffers are recycled, and
//! timers are a FIFO of arrivals (arrival times only grow), so nothing allocates once warm.

use std::collections::VecDeque;
use std::time::Duration;

use crate::Instant;

/// Counters of the resequencing buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReorderStats {
    /// Packets that arrived above a hole and waited.
    pub buffered: u64,
    /// Sequence numbers given up (hole timeout or buffer full).
    pub holes_skipped: u64,
    /// Packets delivered after their hole had been given up.
    pub late_delivered: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Packets too old to tell whether they are duplicates, dropped.
    pub too_old: u64,
    /// Packets released by the hole timeout.
    pub released_by_timeout: u64,
}

/// Outcome of [`Resequencer::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// Ready for delivery now (in order, or late).
    Ready,
    /// Waiting behind a hole.
    Buffered,
    /// Already delivered or already waiting.
    Duplicate,
    /// Older than the duplicate window.
    TooOld,
}

#[derive(Debug)]
struct Slot {
    seq: u32,
    buf: Vec<u8>,
}

/// The resequencing buffer.
#[derive(Debug)]
pub struct Resequencer {
    hole_timeout: Duration,
    limit: u32,
    /// Next sequence number to deliver in order.
    next: u32,
    /// `slots[seq % limit]` holds a packet waiting with `next < seq < next + limit`.
    slots: Vec<Option<Slot>>,
    /// `delivered[seq % limit]` for `next - limit <= seq < next`: whether it was delivered.
    delivered: Vec<bool>,
    /// Arrival time and sequence number of each packet that was buffered, oldest first.
    waiting: VecDeque<(Instant, u32)>,
    ready: VecDeque<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    stats: ReorderStats,
}

impl Resequencer {
    /// A buffer holding up to `limit` sequence numbers ahead of the delivery point (at least
    /// 2), starting at sequence number 0.
    pub fn new(hole_timeout: Duration, limit: usize) -> Resequencer {
        let limit = u32::try_from(limit.max(2))
            .unwrap_or(u32::MAX / 2)
            .min(1 << 20);
        Resequencer {
            hole_timeout,
            limit,
            next: 0,
            slots: (0..limit).map(|_| None).collect(),
            delivered: vec![false; limit as usize],
            waiting: VecDeque::new(),
            ready: VecDeque::new(),
            pool: Vec::new(),
            stats: ReorderStats::default(),
        }
    }

    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    pub fn hole_timeout(&self) -> Duration {
        self.hole_timeout
    }

    /// Changes the hole timeout (for packets buffered from now on as well as waiting ones).
    pub fn set_hole_timeout(&mut self, t: Duration) {
        self.hole_timeout = t;
    }

    /// Packets waiting behind holes.
    pub fn waiting(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// The next sequence number expected in order.
    pub fn next_expected(&self) -> u32 {
        self.next
    }

    fn idx(&self, seq: u32) -> usize {
        (seq % self.limit) as usize
    }

    fn copy(&mut self, payload: &[u8]) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(payload);
        b
    }

    /// Hands a packet with data sequence number `seq` to the buffer.
    pub fn insert(&mut self, now: Instant, seq: u32, payload: &[u8]) -> Insert {
        let ahead = seq.wrapping_sub(self.next) as i32;
        if ahead < 0 {
            let behind = ahead.unsigned_abs();
            if behind > self.limit {
                self.stats.too_old += 1;
                return Insert::TooOld;
            }
            let i = self.idx(seq);
            if self.delivered[i] {
                self.stats.duplicates += 1;
                return Insert::Duplicate;
            }
            self.delivered[i] = true;
            self.stats.late_delivered += 1;
            let b = self.copy(payload);
            self.ready.push_back(b);
            return Insert::Ready;
        }
        let ahead = ahead as u32;
        if ahead == 0 {
            let b = self.copy(payload);
            self.deliver_next(b);
            self.drain_in_order();
            self.trim_waiting();
            return Insert::Ready;
        }
        if ahead >= self.limit {
            // Make room: give up the oldest sequence numbers until seq fits.
            let new_next = seq.wrapping_sub(self.limit - 1);
            self.advance_to(new_next);
            self.drain_in_order();
            if seq == self.next {
                let b = self.copy(payload);
                self.deliver_next(b);
                self.drain_in_order();
                return Insert::Ready;
            }
        }
        let i = self.idx(seq);
        if self.slots[i].is_some() {
            self.stats.duplicates += 1;
            return Insert::Duplicate;
        }
        let buf = self.copy(payload);
        self.slots[i] = Some(Slot { seq, buf });
        self.waiting.push_back((now, seq));
        self.stats.buffered += 1;
        self.trim_waiting();
        Insert::Buffered
    }

    /// Drops timer entries of packets that no longer wait, from the front.
    fn trim_waiting(&mut self) {
        while let Some(&(_, seq)) = self.waiting.front() {
            if self.is_waiting(seq) {
                break;
            }
            self.waiting.pop_front();
        }
    }

    /// Delivers `buf` as sequence number `next` and moves past it.
    fn deliver_next(&mut self, buf: Vec<u8>) {
        let i = self.idx(self.next);
        self.delivered[i] = true;
        self.ready.push_back(buf);
        self.next = self.next.wrapping_add(1);
    }

    /// Delivers waiting packets that are now in order.
    fn drain_in_order(&mut self) {
        loop {
            let i = self.idx(self.next);
            match self.slots[i].take() {
                Some(slot) if slot.seq == self.next => self.deliver_next(slot.buf),
                other => {
                    self.slots[i] = other;
                    break;
                }
            }
        }
    }

    /// Gives up every sequence number below `target`, delivering waiting packets among them
    /// in order.
    fn advance_to(&mut self, target: u32) {
        let distance = target.wrapping_sub(self.next);
        if distance as i32 > 0 && distance > self.limit {
            // Everything waiting lies within `limit` of `next`: walk those slots once, then
            // jump, so a far jump costs O(limit), not O(distance).
            let end = self.next.wrapping_add(self.limit);
            self.advance_to(end);
            let rest = target.wrapping_sub(self.next);
            self.stats.holes_skipped += u64::from(rest);
            // Nothing in [end, target) was delivered: clear those of them that fall in the
            // new duplicate window [target - limit, target).
            let mut s = if rest >= self.limit {
                target.wrapping_sub(self.limit)
            } else {
                end
            };
            while s != target {
                let i = self.idx(s);
                self.delivered[i] = false;
                s = s.wrapping_add(1);
            }
            self.next = target;
            return;
        }
        while (target.wrapping_sub(self.next) as i32) > 0 {
            let i = self.idx(self.next);
            match self.slots[i].take() {
                Some(slot) if slot.seq == self.next => self.deliver_next(slot.buf),
                other => {
                    self.slots[i] = other;
                    self.delivered[i] = false;
                    self.stats.holes_skipped += 1;
                    self.next = self.next.wrapping_add(1);
                }
            }
        }
    }

    /// When the oldest waiting packet's hole timeout expires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.waiting
            .iter()
            .find(|&&(_, seq)| self.is_waiting(seq))
            .map(|&(at, _)| at + self.hole_timeout)
    }

    fn is_waiting(&self, seq: u32) -> bool {
        let ahead = seq.wrapping_sub(self.next) as i32;
        ahead > 0 && matches!(&self.slots[self.idx(seq)], Some(s) if s.seq == seq)
    }

    /// Releases every packet that has waited the hole timeout, giving up the holes below it.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, seq)) = self.waiting.front() {
            if !self.is_waiting(seq) {
                self.waiting.pop_front();
                continue;
            }
            if at + self.hole_timeout > now {
                break;
            }
            self.waiting.pop_front();
            self.stats.released_by_timeout += 1;
            self.advance_to(seq);
            self.drain_in_order();
        }
    }

    /// Moves the next deliverable packet into `out` (its previous contents are recycled).
    pub fn poll_deliver(&mut self, out: &mut Vec<u8>) -> bool {
        match self.ready.pop_front() {
            Some(mut b) => {
                std::mem::swap(out, &mut b);
                if self.pool.len() < 256 {
                    self.pool.push(b);
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;
