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
//! Storage is a ring of `limit` slots indexed by sequence number and timers are a FIFO of
//! arrivals (arrival times only grow). Packet buffers are recycled through a pool: each
//! buffer handed out by [`Resequencer::poll_deliver`] gives back the caller's previous one,
//! and a buffer is taken from the pool for each packet kept. The pool keeps up to
//! [`Resequencer::pool_bound`] buffers (`limit + POOL_SLACK`): the most packets that can wait
//! behind holes at once (`limit - 1`) plus a receive batch's worth made ready before the
//! caller drains them. So once the buffering has reached its high-water mark nothing
//! allocates; a pool miss (an allocation or growth of a buffer) is counted in
//! [`ReorderStats::pool_misses`]. Memory held is bounded by that many buffers of the largest
//! inner packet seen.

mod timeout;

use std::collections::VecDeque;
use std::time::Duration;

use crate::config::HoleTimeoutMode;
use crate::Instant;

pub use timeout::HoleTimeout;
/// The longest hole timeout the adaptive mode sets.
pub const MAX_HOLE_TIMEOUT: Duration = timeout::MAX;

/// Counters of the resequencing buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
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
    /// The hole timeout in force at the last instant the buffer saw, ms.
    pub hole_timeout_ms: f64,
    /// Packets copied into a buffer that had to be allocated or grown (the pool was empty
    /// or its buffer too small): 0 per packet once warm.
    pub pool_misses: u64,
}

/// Buffers the pool keeps beyond the `limit` that can wait behind holes: packets made ready
/// in one receive batch before the caller drains them with `poll_deliver`.
pub const POOL_SLACK: usize = 256;

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
    /// Already delivered on arrival (unordered): the slot only marks the sequence number
    /// as received, so it is no hole.
    delivered: bool,
}

/// The resequencing buffer.
#[derive(Debug)]
pub struct Resequencer {
    hole_timeout: HoleTimeout,
    /// When the latest hole was given up, for late-arrival samples.
    last_skip_at: Option<Instant>,
    last_now: Instant,
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
    /// The largest packet copied so far: the size new buffers are allocated at.
    largest: usize,
    stats: ReorderStats,
    /// Cleared while a resent packet is inserted: it says nothing about reordering.
    sampling: bool,
}

impl Resequencer {
    /// A buffer holding up to `limit` sequence numbers ahead of the delivery point (at least
    /// 2), starting at sequence number 0.
    pub fn new(hole_timeout: Duration, limit: usize) -> Resequencer {
        Resequencer::with_mode(HoleTimeoutMode::Fixed, hole_timeout, limit)
    }

    /// A buffer whose hole timeout is fixed or adaptive (see [`HoleTimeout`]).
    pub fn with_mode(mode: HoleTimeoutMode, hole_timeout: Duration, limit: usize) -> Resequencer {
        let limit = u32::try_from(limit.max(2))
            .unwrap_or(u32::MAX / 2)
            .min(1 << 20);
        Resequencer {
            hole_timeout: HoleTimeout::new(mode, hole_timeout),
            last_skip_at: None,
            last_now: Instant::ZERO,
            limit,
            next: 0,
            slots: (0..limit).map(|_| None).collect(),
            delivered: vec![false; limit as usize],
            waiting: VecDeque::new(),
            ready: VecDeque::new(),
            pool: Vec::new(),
            largest: 0,
            stats: ReorderStats::default(),
            sampling: true,
        }
    }

    pub fn stats(&self) -> ReorderStats {
        ReorderStats {
            hole_timeout_ms: self.current_timeout().as_secs_f64() * 1e3,
            ..self.stats
        }
    }

    /// The hole timeout in force at the latest instant seen.
    pub fn current_timeout(&self) -> Duration {
        self.hole_timeout.current(self.last_now)
    }

    /// Changes the configured hole timeout (for waiting packets too).
    pub fn set_hole_timeout(&mut self, t: Duration) {
        self.hole_timeout.set_base(t);
    }

    /// The measured delay gap between the paths that carry data (see [`HoleTimeout`]).
    pub fn set_delay_gap(&mut self, gap: Duration) {
        self.hole_timeout.set_delay_gap(gap);
    }

    /// Packets waiting behind holes.
    pub fn waiting(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.as_ref().is_some_and(|s| !s.delivered))
            .count()
    }

    /// The next sequence number expected in order.
    pub fn next_expected(&self) -> u32 {
        self.next
    }

    fn idx(&self, seq: u32) -> usize {
        (seq % self.limit) as usize
    }

    /// Most buffers the pool keeps: `limit + POOL_SLACK` (see the module documentation).
    pub fn pool_bound(&self) -> usize {
        self.limit as usize + POOL_SLACK
    }

    /// Buffers in the pool now.
    pub fn pooled(&self) -> usize {
        self.pool.len()
    }

    fn copy(&mut self, payload: &[u8]) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        if b.capacity() < payload.len() {
            // Allocated at the largest size seen, so that a buffer first used for a small
            // packet need not grow again for a large one.
            self.stats.pool_misses += 1;
            self.largest = self.largest.max(payload.len());
            b.reserve_exact(self.largest);
        }
        b.extend_from_slice(payload);
        b
    }

    /// Hands a packet with data sequence number `seq` to the buffer.
    pub fn insert(&mut self, now: Instant, seq: u32, payload: &[u8]) -> Insert {
        self.last_now = self.last_now.max(now);
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
            if let Some(at) = self.last_skip_at.filter(|_| self.sampling) {
                let late = self.hole_timeout.current(now) + now.saturating_duration_since(at);
                self.hole_timeout.sample(now, late);
            }
            let b = self.copy(payload);
            self.ready.push_back(b);
            return Insert::Ready;
        }
        let ahead = ahead as u32;
        if ahead == 0 {
            let i = self.idx(seq);
            if self.slots[i]
                .as_ref()
                .is_some_and(|s| s.seq == seq && s.delivered)
            {
                self.stats.duplicates += 1;
                return Insert::Duplicate;
            }
            // A hole filled: the oldest packet behind it waited this long.
            let oldest = self.waiting.iter().find(|&&(_, s)| self.is_waiting(s));
            if let Some(&(at, _)) = oldest.filter(|_| self.sampling) {
                self.hole_timeout
                    .sample(now, now.saturating_duration_since(at));
            }
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
        self.slots[i] = Some(Slot {
            seq,
            buf,
            delivered: false,
        });
        self.waiting.push_back((now, seq));
        self.stats.buffered += 1;
        self.trim_waiting();
        Insert::Buffered
    }

    /// Hands over a packet the sender sent again after a later-numbered one (its path
    /// failed, or a retransmission): like [`Resequencer::insert`], but how late it is, or
    /// how long the packets behind its hole waited, measures the resend, not the paths'
    /// reordering, so the adaptive hole timeout takes no sample from it.
    pub fn insert_resent(&mut self, now: Instant, seq: u32, payload: &[u8]) -> Insert {
        self.sampling = false;
        let r = self.insert(now, seq, payload);
        self.sampling = true;
        r
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

    /// Hands a packet over for delivery on arrival, without waiting for the packets before
    /// it (its flow keeps its own order on one path). Its sequence number is marked
    /// received so that it is neither a hole for the packets after it nor delivered twice.
    pub fn insert_unordered(&mut self, now: Instant, seq: u32, payload: &[u8]) -> Insert {
        self.last_now = self.last_now.max(now);
        let ahead = seq.wrapping_sub(self.next) as i32;
        if ahead <= 0 {
            // At or behind the delivery point: the ordered path handles it (in order, late,
            // or duplicate).
            return self.insert(now, seq, payload);
        }
        let ahead = ahead as u32;
        if ahead >= self.limit {
            let new_next = seq.wrapping_sub(self.limit - 1);
            self.advance_to(new_next);
            self.drain_in_order();
        }
        let i = self.idx(seq);
        if self.slots[i].as_ref().is_some_and(|s| s.seq == seq) {
            self.stats.duplicates += 1;
            return Insert::Duplicate;
        }
        if self.slots[i].is_none() {
            let b = self.copy(payload);
            self.ready.push_back(b);
            self.slots[i] = Some(Slot {
                seq,
                buf: Vec::new(),
                delivered: true,
            });
            return Insert::Ready;
        }
        // The slot is taken by a packet further ahead (only after a wrap of the window):
        // deliver without marking.
        let b = self.copy(payload);
        self.ready.push_back(b);
        Insert::Ready
    }

    /// Delivers `buf` as sequence number `next` and moves past it.
    fn deliver_next(&mut self, buf: Vec<u8>) {
        let i = self.idx(self.next);
        self.delivered[i] = true;
        self.ready.push_back(buf);
        self.next = self.next.wrapping_add(1);
    }

    /// Moves past `next`, which was delivered on arrival.
    fn pass_next(&mut self) {
        let i = self.idx(self.next);
        self.delivered[i] = true;
        self.next = self.next.wrapping_add(1);
    }

    /// Delivers waiting packets that are now in order.
    fn drain_in_order(&mut self) {
        loop {
            let i = self.idx(self.next);
            match self.slots[i].take() {
                Some(slot) if slot.seq == self.next && slot.delivered => self.pass_next(),
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
                Some(slot) if slot.seq == self.next && slot.delivered => self.pass_next(),
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
        self.poll_timeout_repairing(|_| None)
    }

    /// Like [`Resequencer::poll_timeout`], with the holes `expected` holds open (see
    /// [`Resequencer::handle_timeout_repairing`]).
    pub fn poll_timeout_repairing(
        &self,
        expected: impl Fn(u32) -> Option<Instant>,
    ) -> Option<Instant> {
        let base = self
            .waiting
            .iter()
            .find(|&&(_, seq)| self.is_waiting(seq))
            .map(|&(at, _)| at + self.current_timeout())?;
        Some(match expected(self.next) {
            Some(d) if d > base => d,
            _ => base,
        })
    }

    /// The first hole below `seq` whose repair is still expected after `now`.
    fn first_repairing_hole(
        &self,
        seq: u32,
        now: Instant,
        expected: &impl Fn(u32) -> Option<Instant>,
    ) -> Option<u32> {
        let mut s = self.next;
        while s != seq {
            let present = matches!(&self.slots[self.idx(s)], Some(x) if x.seq == s);
            if !present && expected(s).is_some_and(|d| d > now) {
                return Some(s);
            }
            s = s.wrapping_add(1);
        }
        None
    }

    fn is_waiting(&self, seq: u32) -> bool {
        let ahead = seq.wrapping_sub(self.next) as i32;
        ahead > 0 && matches!(&self.slots[self.idx(seq)], Some(s) if s.seq == seq && !s.delivered)
    }

    /// Releases every packet that has waited the hole timeout, giving up the holes below it.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.handle_timeout_repairing(now, |_| None);
    }

    /// Like [`Resequencer::handle_timeout`], but a hole whose repair `expected` says is
    /// still on its way (until the instant it returns) is held open past the hole timeout:
    /// packets before it are delivered, it and those behind it wait.
    pub fn handle_timeout_repairing(
        &mut self,
        now: Instant,
        expected: impl Fn(u32) -> Option<Instant>,
    ) {
        self.last_now = self.last_now.max(now);
        // As it is on entry, worked out only once a packet waits (it takes an `exp`).
        let hole_timeout = self.hole_timeout;
        let mut timeout = None;
        while let Some(&(at, seq)) = self.waiting.front() {
            if !self.is_waiting(seq) {
                self.waiting.pop_front();
                continue;
            }
            if at + *timeout.get_or_insert_with(|| hole_timeout.current(now)) > now {
                break;
            }
            if let Some(hole) = self.first_repairing_hole(seq, now, &expected) {
                if hole != self.next {
                    self.advance_to(hole);
                    self.drain_in_order();
                }
                break;
            }
            self.waiting.pop_front();
            self.stats.released_by_timeout += 1;
            self.last_skip_at = Some(now);
            self.advance_to(seq);
            self.drain_in_order();
        }
    }

    /// Moves the next deliverable packet into `out` (its previous contents are recycled).
    pub fn poll_deliver(&mut self, out: &mut Vec<u8>) -> bool {
        match self.ready.pop_front() {
            Some(mut b) => {
                std::mem::swap(out, &mut b);
                // An empty caller buffer (a fresh `Vec`) is not worth keeping.
                if b.capacity() > 0 && self.pool.len() < self.pool_bound() {
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
