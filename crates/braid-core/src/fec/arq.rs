//! Retransmission driven by receiver feedback, PluriBus §6.4.1's baseline ("retransmits
//! lost packets based on receiver feedback"; §3.2 explains why it is slow: a loss costs
//! about 1.5 inter-proxy RTTs to repair).
//!
//! Feedback: the receiver watches the data sequence. A gap is reported in a Nack
//! (docs/wire.md) on the fastest path once it is taken for a loss; a packet still missing
//! about one RTT after its nack is nacked again, up to `max_nacks` times.
//!
//! When a gap is a loss ([`NackTrigger`]). Striping reorders packets between paths by their
//! delay difference (tens of ms), so a fixed wait either takes reordering for loss (5 ms:
//! in the lab's 4-path lab-bulk, 16,588 retransmissions for some 300 losses) or delays every
//! repair. By default (braid's addition; the paper does not say how its baseline detects
//! loss) the receiver detects loss per path, as TCP does with duplicate acks: each path
//! delivers in the order it was sent (PluriBus §5's per-path sequence), so once every path
//! that carries data has delivered a data packet later than a missing one, the path it was
//! sent on has passed it and it is lost; `nack_delay` is then the reordering allowance. A
//! gap still open after the fallback (the largest smoothed RTT, or 1.5 times the reordering
//! measured) is nacked anyway, and a path that delivered no data for four fallbacks no
//! longer counts (it carries none now). The receiver does not know which path a missing
//! packet was sent on; requiring all paths to have passed it costs, for a loss on a fast
//! path, the paths' delay difference, which is what a fixed wait must cover too. The fixed
//! wait stays selectable.
//!
//! The sender keeps its recently sent packets (bounded, and for a few RTTs) and sends nacked ones again as ordinary data, on the fastest path. Acks (the
//! highest data sequence received) cannot drive it alone: they say nothing of holes below.

use std::cell::Cell;
use std::collections::VecDeque;
use std::time::Duration;

use braid_wire::{Message, Nack, MAX_BITMAP_LEN};

use super::window::{round_trip, seq_le, Window, DEFAULT_RTT};

/// `a` before `b` in sequence order.
fn seq_lt(a: u32, b: u32) -> bool {
    a != b && seq_le(a, b)
}
use super::xor::BITMAP_REACH;
use super::{
    fastest_path, fastest_path_with_room, LossRecovery, RecoveredSink, Repair, RepairBody,
};
use crate::path::Path;
use crate::stats::LossRecoveryStats;
use crate::{Instant, NackTrigger, PathId, RetransmitParams};

/// Sent packets kept for retransmission at most.
const MAX_SENT: usize = 1024;
/// Retransmissions waiting at most.
const MAX_PENDING: usize = 1024;
/// Missing packets tracked at most.
const MAX_MISSING: usize = 1024;
/// How long a path's largest arrival offset is remembered at least (two such windows).
const OFFSET_WINDOW: Duration = Duration::from_secs(1);
/// Slack over a path's delay and queue cap before a gap counts as passed by it: a
/// packet's transmission time and the queue model's error.
const PASS_MARGIN: Duration = Duration::from_millis(20);

/// The receiver's clock, µs, low 32 bits (as the peer's timestamps are).
fn clock32(now: Instant) -> u32 {
    now.as_micros() as u32
}

/// The later of two wrapping µs values.
fn later_of(a: u32, b: u32) -> u32 {
    if (a.wrapping_sub(b) as i32) > 0 {
        a
    } else {
        b
    }
}

/// Longest a hole is held open for its repair, from when it opened (the adaptive hole
/// timeout's own ceiling, [`crate::reorder::MAX_HOLE_TIMEOUT`]).
const REPAIR_HOLD_MAX: Duration = crate::reorder::MAX_HOLE_TIMEOUT;
/// Per path: a path that delivered no data for this many fallbacks no longer holds gaps
/// back. Short idle spells are common under delay-based striping (a slow path gets packets
/// only while the fast one's queue is long), and a path that resumes must still count.
const SILENT_FALLBACKS: u32 = 4;

/// Receiver: what a path delivered of the data sequence.
#[derive(Clone, Copy, Debug)]
struct PathRx {
    path: PathId,
    /// Highest data sequence it delivered (sent once, not a retransmission).
    highest: u32,
    /// When it last delivered data.
    last: Instant,
    /// Least arrival time less send timestamp of its data packets, µs: its propagation
    /// delay plus the clocks' offset (receiver clock less sender clock, wrapping; the
    /// clocks' offset is the same on every path, so these compare between paths).
    offset: u32,
    /// Largest arrival time less send timestamp in the current and the previous
    /// [`OFFSET_WINDOW`] of its arrivals, and when the current one began.
    max_offset: [u32; 2],
    window_start: Instant,
}

impl PathRx {
    fn new(path: PathId, highest: u32, now: Instant, offset: u32) -> PathRx {
        PathRx {
            path,
            highest,
            last: now,
            offset,
            max_offset: [offset; 2],
            window_start: now,
        }
    }

    /// Notes an arrival with this `offset` at `now`.
    fn note_offset(&mut self, now: Instant, offset: u32) {
        if later_of(offset, self.offset) != offset {
            self.offset = offset;
        }
        if now >= self.window_start + OFFSET_WINDOW {
            self.max_offset = [offset, self.max_offset[0]];
            self.window_start = now;
        } else {
            self.max_offset[0] = later_of(offset, self.max_offset[0]);
        }
    }

    /// The latest a packet sent now may arrive, relative to its send time (µs, wrapping):
    /// the path's delay plus the most queue the sender puts in front of its bottleneck
    /// ([`crate::sched::delay::QUEUE_CAP`]), or the largest offset seen recently if later
    /// (the sender's queue model errs).
    fn latest_offset(&self) -> u32 {
        let cap = crate::sched::delay::QUEUE_CAP.as_micros() as u32;
        later_of(
            self.offset.wrapping_add(cap),
            later_of(self.max_offset[0], self.max_offset[1]),
        )
    }
}

#[derive(Clone, Copy, Debug)]
struct Missing {
    seq: u32,
    /// When the gap opened.
    seen: Instant,
    due: Instant,
    nacks: u32,
}

/// Nack-driven retransmission.
pub struct Retransmit {
    nack_delay: Duration,
    max_nacks: u32,
    trigger: NackTrigger,
    /// Per path: how long a gap may stay open before it is nacked anyway: the largest
    /// smoothed RTT, or 1.5 times the reordering measured if longer. A path counts until it
    /// delivered no data for [`SILENT_FALLBACKS`] times this.
    fallback: Duration,
    /// Per path: the longest recent time from a gap opening to its filling (reordering
    /// between paths), decaying.
    lag: Duration,
    /// Per path: the data packet [`LossRecovery::on_data_path`] announced last (sent once).
    fresh: Option<u32>,
    /// Per path: the paths that delivered data, and how far.
    rx_paths: Vec<PathRx>,
    /// Per path: every missing packet below this was passed by all paths carrying data.
    passed: Option<u32>,
    sent: Window,
    pending: VecDeque<u32>,
    /// Receiver: highest data sequence seen, and the holes below it, in sequence order.
    highest: Option<u32>,
    missing: VecDeque<Missing>,
    /// The earliest `due` in `missing` (`Some(None)`: none missing), or `None` when not
    /// known; kept exact where cheap, otherwise worked out again when asked. Polls ask on
    /// every call whether anything is due, and the packets missing while a slower path
    /// catches up are many.
    earliest_due: Cell<Option<Option<Instant>>>,
    /// Time from a nack to the next one for the same packet (its repair is expected
    /// within it): one round trip over the fastest path, a quarter more, and `nack_delay`.
    renack: Duration,
    /// Send timestamp of the last data packet sent once that arrived.
    last_sent: Option<u32>,
    /// The sender caps its bottleneck queues: paths' arrival offsets tell when they have
    /// passed a gap ([`Retransmit::all_passed_at`]).
    queues_capped: bool,
    /// Gaps opened before this are not held for their repair (a path failed).
    no_hold_before: Option<Instant>,
    bitmap: [u8; MAX_BITMAP_LEN],
    stats: LossRecoveryStats,
}

impl Retransmit {
    pub fn new(p: RetransmitParams) -> Retransmit {
        Retransmit {
            nack_delay: Duration::from_secs_f64(p.nack_delay_ms.max(0.0) / 1e3),
            max_nacks: p.max_nacks.max(1),
            trigger: p.trigger,
            fallback: DEFAULT_RTT,
            lag: Duration::ZERO,
            fresh: None,
            rx_paths: Vec::new(),
            passed: None,
            sent: Window::new(MAX_SENT),
            pending: VecDeque::new(),
            highest: None,
            missing: VecDeque::new(),
            earliest_due: Cell::new(Some(None)),
            renack: DEFAULT_RTT + DEFAULT_RTT / 4,
            last_sent: None,
            queues_capped: false,
            no_hold_before: None,
            bitmap: [0; MAX_BITMAP_LEN],
            stats: LossRecoveryStats::default(),
        }
    }

    /// Packets the receiver side currently misses (for tests).
    pub fn missing(&self) -> impl Iterator<Item = u32> + '_ {
        self.missing.iter().map(|m| m.seq)
    }

    /// The earliest instant a missing packet is due (see [`Retransmit::earliest_due`]'s
    /// field).
    fn earliest_due(&self) -> Option<Instant> {
        if let Some(known) = self.earliest_due.get() {
            return known;
        }
        let min = self.missing.iter().map(|m| m.due).min();
        self.earliest_due.set(Some(min));
        min
    }

    /// Removes the missing packet at position `i`.
    fn remove_missing(&mut self, i: usize) {
        if let Some(m) = self.missing.remove(i) {
            self.forget_due(m.due);
        }
    }

    /// A missing packet due at `due` left: the earliest is still known unless it was it.
    fn forget_due(&mut self, due: Instant) {
        if self.earliest_due.get().flatten().is_none_or(|e| due <= e) {
            self.earliest_due.set(None);
        }
    }

    /// A data packet sent once arrived on `path` at `now`, sent at `sent_us` (per-path
    /// detection).
    fn on_path_arrival(&mut self, now: Instant, seq: u32, path: PathId, sent_us: u32) {
        self.last_sent = Some(sent_us);
        if self.trigger != NackTrigger::PerPath {
            return;
        }
        self.fresh = Some(seq);
        let offset = clock32(now).wrapping_sub(sent_us);
        match self.rx_paths.iter_mut().find(|p| p.path == path) {
            Some(p) => {
                if seq_le(p.highest, seq) {
                    p.highest = seq;
                }
                p.last = now;
                p.note_offset(now, offset);
            }
            None => self.rx_paths.push(PathRx::new(path, seq, now, offset)),
        }
    }

    /// Per path: when every path carrying data will have delivered anything sent before
    /// `sent_before` (the sender's clock): [`PathRx::latest_offset`] and [`PASS_MARGIN`]
    /// later; `None` without a path to tell.
    fn all_passed_at(&self, now: Instant, sent_before: u32) -> Option<Instant> {
        let now32 = clock32(now);
        let silent = self.fallback * SILENT_FALLBACKS;
        self.rx_paths
            .iter()
            .filter(|p| p.last + silent > now)
            .map(|p| {
                let at = sent_before.wrapping_add(p.latest_offset());
                let ahead = at.wrapping_sub(now32) as i32;
                now + Duration::from_micros(u64::from(ahead.max(0).unsigned_abs()))
            })
            .max()
            .map(|t| t + PASS_MARGIN)
    }

    /// Per path: the lowest of the highest data sequences delivered by the paths that
    /// delivered data within `fallback`: every data packet below it was passed by its path.
    fn passed_floor(&self, now: Instant) -> Option<u32> {
        let mut floor: Option<u32> = None;
        let silent = self.fallback * SILENT_FALLBACKS;
        for p in self.rx_paths.iter().filter(|p| p.last + silent > now) {
            floor = Some(match floor {
                Some(f) if seq_le(f, p.highest) => f,
                _ => p.highest,
            });
        }
        floor
    }

    /// Per path: missing packets every path carrying data has passed are lost; they are
    /// due after the reordering allowance.
    fn confirm_passed(&mut self, now: Instant) {
        if self.trigger != NackTrigger::PerPath {
            return;
        }
        let Some(floor) = self.passed_floor(now) else {
            return;
        };
        let from = match self.passed {
            Some(p) if seq_le(floor, p) => return,
            Some(p) => self.missing.partition_point(|m| seq_lt(m.seq, p)),
            None => 0,
        };
        self.passed = Some(floor);
        let due = now + self.nack_delay;
        let mut lowered = false;
        for m in self.missing.range_mut(from..) {
            if !seq_lt(m.seq, floor) {
                break;
            }
            lowered |= due < m.due;
            m.due = m.due.min(due);
        }
        if lowered {
            let e = self.earliest_due.get();
            self.earliest_due
                .set(e.map(|e| Some(e.map_or(due, |e| e.min(due)))));
        }
    }

    fn on_arrival(&mut self, now: Instant, seq: u32) {
        let Some(h) = self.highest else {
            self.highest = Some(seq);
            return;
        };
        if seq_le(seq, h) {
            if let Some(i) = self.missing.iter().position(|m| m.seq == seq) {
                if self.fresh != Some(seq) {
                    // A retransmission: its delay is the repair's, not reordering.
                    self.remove_missing(i);
                    self.confirm_passed(now);
                    return;
                }
                let lag = now.saturating_duration_since(self.missing[i].seen);
                self.lag = if lag >= self.lag {
                    lag
                } else {
                    self.lag - self.lag / 64 + lag / 64
                };
                self.remove_missing(i);
            }
            // A slower path delivering may have passed gaps.
            self.confirm_passed(now);
            return;
        }
        let gap = seq.wrapping_sub(h).wrapping_sub(1);
        let skip = gap.saturating_sub(MAX_MISSING as u32);
        let sent_before = self.last_sent.unwrap_or(0);
        let due = match self.trigger {
            NackTrigger::FixedDelay => now + self.nack_delay,
            NackTrigger::PerPath => {
                let fallback = now + self.fallback.max(self.nack_delay);
                let passed = self
                    .queues_capped
                    .then(|| self.all_passed_at(now, sent_before))
                    .flatten();
                passed.map_or(fallback, |t| (t + self.nack_delay).min(fallback))
            }
        };
        self.stats.nack_gave_up += u64::from(skip);
        for k in skip..gap {
            if self.missing.len() >= MAX_MISSING {
                if let Some(m) = self.missing.pop_front() {
                    self.forget_due(m.due);
                }
                self.stats.nack_gave_up += 1;
            }
            self.missing.push_back(Missing {
                seq: h.wrapping_add(1 + k),
                due,
                seen: now,
                nacks: 0,
            });
            let e = self.earliest_due.get();
            self.earliest_due
                .set(e.map(|e| Some(e.map_or(due, |e| e.min(due)))));
        }
        self.highest = Some(seq);
        self.confirm_passed(now);
    }

    /// Builds a nack of every missing packet due at `now`, from the lowest, within the
    /// bitmap's reach; returns its first sequence number and bitmap length.
    fn build_nack(&mut self, now: Instant, rtt: Duration) -> Option<(u32, usize)> {
        // Nothing due: nothing to give up on or to nack (the common case, checked first).
        if self.earliest_due().is_none_or(|t| t > now) {
            return None;
        }
        self.earliest_due.set(None);
        let max = self.max_nacks;
        let before = self.missing.len();
        self.missing.retain(|m| m.nacks < max || m.due > now);
        self.stats.nack_gave_up += (before - self.missing.len()) as u64;
        let first = self.missing.iter().find(|m| m.due <= now)?.seq;
        let mut len = 0;
        self.bitmap = [0; MAX_BITMAP_LEN];
        self.renack = rtt + rtt / 4 + self.nack_delay;
        let again = now + self.renack;
        for m in self.missing.iter_mut().filter(|m| m.due <= now) {
            let off = m.seq.wrapping_sub(first);
            if off != 0 {
                let off = off - 1;
                if off >= BITMAP_REACH {
                    continue;
                }
                let byte = (off / 8) as usize;
                self.bitmap[byte] |= 1 << (off % 8);
                len = len.max(byte + 1);
            }
            m.nacks += 1;
            m.due = again;
        }
        Some((first, len))
    }
}

impl LossRecovery for Retransmit {
    fn on_data_sent(&mut self, now: Instant, seq: u32, path: &Path, payload: &[u8]) {
        let keep = (4 * path.srtt().unwrap_or(DEFAULT_RTT)).max(Duration::from_secs(1));
        self.sent.expire(now);
        self.sent.push(seq, now + keep, payload);
    }

    fn poll_repair(&mut self, now: Instant, paths: &[Path]) -> Option<Repair<'_>> {
        // Which path is fastest matters only once there is something to send.
        if !paths.iter().any(Path::is_usable) {
            return None;
        }
        let rtt = round_trip(paths);
        self.fallback = rtt.max(self.lag + self.lag / 2);
        self.confirm_passed(now);
        if let Some((first, len)) = self.build_nack(now, rtt) {
            let path = fastest_path(now, paths)?.id();
            self.stats.nacks_sent += 1;
            return Some(Repair {
                path,
                body: RepairBody::Nack(Nack {
                    first,
                    bitmap: &self.bitmap[..len],
                }),
            });
        }
        while let Some(&seq) = self.pending.front() {
            if self.sent.find(seq).is_none() {
                self.pending.pop_front();
                self.stats.nacked_unavailable += 1;
                continue;
            }
            // Under schedulers that cap the bottleneck queues, a retransmission waits for
            // a path with room in its window like any data packet: sent regardless, a burst
            // of them overflowed the bottleneck of a path whose rate had just fallen and
            // made the next losses.
            let path = if self.queues_capped {
                fastest_path_with_room(now, paths)?.id()
            } else {
                fastest_path(now, paths)?.id()
            };
            self.pending.pop_front();
            self.stats.retransmissions_sent += 1;
            let payload = self.sent.find(seq)?;
            return Some(Repair {
                path,
                body: RepairBody::Retransmit { seq, payload },
            });
        }
        None
    }

    /// Time alone changes a poll's outcome only when a missing packet falls due (a nack)
    /// or a path carrying data falls silent (it no longer holds the passed floor down);
    /// the fallback and the floor otherwise depend on the paths and the arrivals, which
    /// are inputs. A waiting retransmission waits for a path with room, which draining
    /// queues open: every poll counts then.
    fn quiet_until(&self, now: Instant, paths: &[Path]) -> Instant {
        if !paths.iter().any(Path::is_usable) {
            return Instant::MAX;
        }
        if !self.pending.is_empty() {
            return now;
        }
        let mut until = self.earliest_due().unwrap_or(Instant::MAX);
        if self.trigger == NackTrigger::PerPath {
            let silent = self.fallback * SILENT_FALLBACKS;
            for p in &self.rx_paths {
                let t = p.last + silent;
                if t > now {
                    until = until.min(t);
                }
            }
        }
        until
    }

    /// Gaps open now, and those opening within the fallback (a round trip: packets sent
    /// on the failed path before the peer noticed are still being passed), are not held
    /// for a repair: the peer repairs only what it did not leave to the inner transport,
    /// and a hole held for an answer that never comes stalls the bond.
    fn on_path_failed(&mut self, now: Instant) {
        self.no_hold_before = Some(now + self.fallback);
    }

    fn leave_to_transport(&mut self, seq: u32) {
        self.sent.forget(seq);
    }

    fn set_queues_capped(&mut self, capped: bool) {
        self.queues_capped = capped;
    }

    fn on_data_path(&mut self, now: Instant, seq: u32, path: PathId, sent_us: u32) {
        self.on_path_arrival(now, seq, path, sent_us);
    }

    fn on_data_received(
        &mut self,
        now: Instant,
        seq: u32,
        _payload: &[u8],
        _sink: &mut dyn RecoveredSink,
    ) {
        self.on_arrival(now, seq);
    }

    fn on_repair_received(
        &mut self,
        now: Instant,
        message: &Message<'_>,
        _sink: &mut dyn RecoveredSink,
    ) {
        let Message::Nack(n) = message else { return };
        self.stats.nacks_received += 1;
        self.sent.expire(now);
        for seq in n.missing() {
            if self.pending.len() >= MAX_PENDING {
                self.stats.nacked_unavailable += 1;
                continue;
            }
            self.pending.push_back(seq);
        }
    }

    fn poll_timeout(&self, now: Instant, paths: &[Path]) -> Option<Instant> {
        if !paths.iter().any(Path::is_usable) {
            return None;
        }
        // Usually nothing is due at `now` (the last poll nacked it): then the earliest due.
        match self.earliest_due() {
            Some(t) if t > now => Some(t),
            _ => self
                .missing
                .iter()
                .map(|m| m.due)
                .filter(|&t| t > now)
                .min(),
        }
    }

    /// A missing packet's repair is expected until one re-nack interval after `due` (its
    /// next nack, when the answer to its last is due), so a repair that was lost once
    /// still arrives in time, and at most [`REPAIR_HOLD_MAX`] after its gap opened. Without it the
    /// resequencing buffer gave holes up at its hole timeout, which measures reordering
    /// between paths and knows nothing of repairs: never-worse's "both lossy" (5% and 1%
    /// loss) released 61 holes before their retransmission arrived. Waiting for every
    /// nack's answer (`max_nacks`) changed none of never-worse's cells, and a nack the
    /// peer does not answer (it left the packet to the inner transport) stalls the bond
    /// that much longer; not waiting past `due` did worse ("both lossy" 5.60 -> 4.14
    /// Mbit/s). Gaps that opened around a path failure are not held (see
    /// [`LossRecovery::on_path_failed`]).
    ///
    /// Only when the schedulers cap their bottleneck queues: their congestion signal to
    /// the inner transport is the send queue's drop-tail, which no repair masks (a refused
    /// packet takes no data sequence number), so what a repair masks is the paths' own
    /// loss. A window scheduler (ADAS) overflows a slow link's queue instead, and masking
    /// those drops blinds the inner TCP to the congestion it causes: with the hold,
    /// prism-fig8's three links of 0.42-2.38 Mbit/s carried 3967 retransmissions in 30 s
    /// (39 without) and the bulk flow fell from 3.86 to 3.45 Mbit/s.
    fn repair_expected(&self, seq: u32) -> Option<Instant> {
        if !self.queues_capped {
            return None;
        }
        let i = self.missing.partition_point(|m| seq_lt(m.seq, seq));
        let m = self.missing.get(i).filter(|m| m.seq == seq)?;
        if self.no_hold_before.is_some_and(|t| m.seen < t) {
            return None;
        }
        let to_come = self.max_nacks.saturating_sub(m.nacks).min(1);
        Some((m.due + self.renack * to_come).min(m.seen + REPAIR_HOLD_MAX))
    }

    fn stats(&self) -> LossRecoveryStats {
        LossRecoveryStats {
            method: "retransmit",
            window: self.sent.len() as u64,
            window_drops: self.sent.drops(),
            ..self.stats.clone()
        }
    }

    fn name(&self) -> &'static str {
        "retransmit"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    fn arq(trigger: NackTrigger) -> Retransmit {
        let mut a = Retransmit::new(RetransmitParams {
            trigger,
            ..RetransmitParams::default()
        });
        a.fallback = Duration::from_millis(200);
        a.queues_capped = true;
        a
    }

    /// Delivers data packet `seq` on `path` at `t` ms, as the session does; it was sent 1 ms
    /// before on path 1, 41 ms before on others.
    fn arrive(a: &mut Retransmit, t: u64, seq: u32, path: PathId) {
        let delay = if path == 1 { 1 } else { 41 };
        arrive_sent(a, t, seq, path, t as i64 - delay);
    }

    /// Delivers data packet `seq` on `path` at `t` ms, sent at `sent` ms.
    fn arrive_sent(a: &mut Retransmit, t: u64, seq: u32, path: PathId, sent: i64) {
        a.on_path_arrival(ms(t), seq, path, (sent * 1000) as u32);
        a.on_arrival(ms(t), seq);
    }

    fn nacked(a: &mut Retransmit, t: u64) -> Vec<u32> {
        let Some((first, len)) = a.build_nack(ms(t), Duration::from_millis(100)) else {
            return Vec::new();
        };
        Nack {
            first,
            bitmap: &a.bitmap[..len],
        }
        .missing()
        .collect()
    }

    /// The earliest due instant kept between polls is always the one a scan of the
    /// missing packets gives, through gaps opening, filling out of order, per-path passes
    /// lowering dues, nacks re-arming them and the oldest being dropped.
    #[test]
    fn the_earliest_due_kept_is_the_scanned_one() {
        for trigger in [NackTrigger::PerPath, NackTrigger::FixedDelay] {
            let mut a = arq(trigger);
            let mut x: u32 = 7;
            let mut next = 0u32;
            let mut held: Vec<u32> = Vec::new();
            for t in 0..3000u64 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                match x % 4 {
                    // A packet on the fast path, sometimes after a gap (held on the slow one).
                    0 | 1 => {
                        let skip = (x >> 8) % 6;
                        held.extend(next..next + skip);
                        next += skip;
                        arrive(&mut a, t, next, 1);
                        next += 1;
                    }
                    // The slow path delivers one it held.
                    2 if !held.is_empty() => {
                        let seq = held.remove((x as usize >> 8) % held.len());
                        arrive(&mut a, t, seq, 2);
                    }
                    _ => {
                        nacked(&mut a, t);
                    }
                }
                let scanned = a.missing.iter().map(|m| m.due).min();
                assert_eq!(a.earliest_due(), scanned, "{trigger:?} at {t} ms");
            }
        }
    }

    /// Packets in flight on a slower path are not nacked while that path has not passed
    /// them, however long the fixed delay would have waited; once it delivers a later
    /// packet they are (after the reordering allowance).
    #[test]
    fn per_path_waits_for_every_path_to_pass_a_gap() {
        let mut a = arq(NackTrigger::PerPath);
        // Fast path 1 carries 0, 2, 4; slow path 2 carries 1, 3, 5 (3 lost).
        arrive(&mut a, 0, 0, 1);
        arrive(&mut a, 1, 2, 1);
        arrive(&mut a, 2, 4, 1);
        assert_eq!(a.missing().collect::<Vec<_>>(), [1, 3]);
        // Path 2 has delivered nothing yet, so only path 1 counts: 1 and 3 look passed.
        // That is the single-path case; a second path counts once it delivered data.
        assert_eq!(nacked(&mut a, 8), [1, 3]);

        let mut a = arq(NackTrigger::PerPath);
        arrive(&mut a, 0, 0, 1);
        arrive(&mut a, 0, 1, 2);
        arrive(&mut a, 1, 2, 1);
        arrive(&mut a, 2, 4, 1);
        arrive(&mut a, 3, 6, 1);
        // 3 and 5 are in flight on path 2 (40 ms behind): no nack at 10 or 40 ms.
        assert!(nacked(&mut a, 10).is_empty());
        assert!(nacked(&mut a, 40).is_empty());
        // Path 2 delivers 5: it passed 3, which is lost; 3 is due 5 ms later.
        arrive(&mut a, 41, 5, 2);
        assert_eq!(a.missing().collect::<Vec<_>>(), [3]);
        assert!(nacked(&mut a, 45).is_empty());
        assert_eq!(nacked(&mut a, 46), [3]);
        // The fixed 5 ms delay takes the reordering for loss.
        let mut f = arq(NackTrigger::FixedDelay);
        for (t, seq, path) in [(0, 0, 1), (0, 1, 2), (1, 2, 1), (2, 4, 1), (3, 6, 1)] {
            arrive(&mut f, t, seq, path);
        }
        assert_eq!(nacked(&mut f, 10), [3, 5]);
    }

    /// A path that stopped delivering data no longer holds gaps back, and a gap open for
    /// the fallback (the largest smoothed RTT) is nacked anyway.
    #[test]
    fn per_path_fallbacks() {
        let mut a = arq(NackTrigger::PerPath);
        arrive(&mut a, 0, 10, 2);
        arrive(&mut a, 0, 11, 1);
        // Path 2 goes silent for four fallbacks; path 1 goes on and skips 13.
        arrive(&mut a, 800, 12, 1);
        arrive(&mut a, 801, 14, 1);
        assert!(nacked(&mut a, 805).is_empty());
        assert_eq!(nacked(&mut a, 806), [13]);

        // Path 2 still counts (it delivered 1 ms ago) and has not passed 12, but its
        // propagation delay is 41 ms: with at most 150 ms of queue before its bottleneck,
        // it would have delivered 12, sent before 13 (at 0 ms), by 191 ms; 12 is nacked
        // after the margin (20 ms) and the reordering allowance (5 ms), before the
        // fallback (here 1 s).
        let mut a = arq(NackTrigger::PerPath);
        a.fallback = Duration::from_secs(1);
        arrive(&mut a, 0, 10, 2);
        arrive(&mut a, 0, 11, 1);
        arrive(&mut a, 1, 13, 1);
        assert!(nacked(&mut a, 215).is_empty());
        assert_eq!(nacked(&mut a, 216), [12]);
        // A path that takes longer than the fallback to deliver: 200 ms after the gap
        // opened it is nacked, path 2 or not.
        let mut a = arq(NackTrigger::PerPath);
        arrive_sent(&mut a, 0, 10, 2, -500);
        arrive(&mut a, 0, 11, 1);
        arrive(&mut a, 1, 13, 1);
        assert!(nacked(&mut a, 10).is_empty());
        assert!(nacked(&mut a, 200).is_empty());
        assert_eq!(nacked(&mut a, 201), [12]);

        // The reordering measured: a gap filled by a path 90 ms later, not a retransmission
        // 300 ms later.
        let mut a = arq(NackTrigger::PerPath);
        arrive(&mut a, 0, 0, 1);
        arrive(&mut a, 10, 2, 1);
        arrive(&mut a, 100, 1, 2);
        assert_eq!(a.lag, Duration::from_millis(90));
        arrive(&mut a, 110, 4, 1);
        a.on_arrival(ms(410), 3);
        assert_eq!(a.lag, Duration::from_millis(90));
        assert!(a.missing().next().is_none());
    }

    /// On one path the per-path trigger is the fixed one: a gap is due `nack_delay` after
    /// a later packet arrived.
    #[test]
    fn per_path_on_one_path_is_the_fixed_delay() {
        for trigger in [NackTrigger::PerPath, NackTrigger::FixedDelay] {
            let mut a = arq(trigger);
            arrive(&mut a, 0, 0, 1);
            arrive(&mut a, 1, 3, 1);
            assert!(nacked(&mut a, 5).is_empty(), "{trigger:?}");
            assert_eq!(nacked(&mut a, 6), [1, 2], "{trigger:?}");
            // Nacked again about one RTT later (100 + 25 + 5 ms).
            assert!(nacked(&mut a, 135).is_empty(), "{trigger:?}");
            assert_eq!(nacked(&mut a, 136), [1, 2], "{trigger:?}");
        }
    }

    /// A nacked packet's repair is expected until the answer to its next nack is due, and
    /// no longer once it arrived; never more than [`REPAIR_HOLD_MAX`] after its gap opened.
    #[test]
    fn a_repair_is_expected_until_the_next_nack_is_answered() {
        let mut a = arq(NackTrigger::PerPath);
        arrive(&mut a, 0, 0, 1);
        arrive(&mut a, 1, 3, 1);
        assert_eq!(nacked(&mut a, 6), [1, 2]);
        // Nacked once at 6 ms: answered by 136 ms, when a second nack would go; that one
        // is answered by 266 ms.
        assert_eq!(a.repair_expected(1), Some(ms(266)));
        assert_eq!(a.repair_expected(0), None);
        assert_eq!(a.repair_expected(4), None);
        // Its retransmission arrives: no longer expected.
        a.on_arrival(ms(50), 1);
        assert_eq!(a.repair_expected(1), None);
        assert_eq!(a.repair_expected(2), Some(ms(266)));
        // Slow round trips: the gap's age caps the wait.
        assert_eq!(a.build_nack(ms(136), Duration::from_secs(2)), Some((2, 0)));
        assert_eq!(a.repair_expected(2), Some(ms(1) + REPAIR_HOLD_MAX));
        // A path fails: gaps opened until a fallback (200 ms) later are not held.
        a.on_path_failed(ms(150));
        assert_eq!(a.repair_expected(2), None);
        arrive(&mut a, 340, 5, 1);
        assert_eq!(a.repair_expected(4), None);
        arrive(&mut a, 360, 7, 1);
        assert!(a.repair_expected(6).is_some());
    }
}
