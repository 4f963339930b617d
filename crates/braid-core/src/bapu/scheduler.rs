//! The gateway's forwarder choice (BaPu §3.4): for each packet some APs reported, pick
//! one of them to forward it and announce the choice to all. First come, first served:
//! packets are served in the order they were first reported, each by the first reporter
//! whose send buffer has room, so an AP contributes what its uplink can carry.
//!
//! An AP's room is its last reported free send buffer less the bytes assigned to it that
//! the report did not yet count (assigned minus the AP's `enqueued` counter). A packet no
//! reporter has room for waits until one has. The first packets of a session (UDP's first,
//! TCP's handshake) wait for the home AP (§3.2: NAT state along the default path). A
//! packet that does not arrive within `reassign_after` of its assignment is given to
//! another reporter (an AP that vanished).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::report::{Announce, Entry, Report};
use super::unwrap_seq as unwrap;
use super::{ApId, SessionId, MAX_APS};
use crate::Instant;

/// How the gateway picks among the reporters of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// BaPu §3.4: the first reporter with room.
    FirstCome,
    /// The reporter with room whose uplink would deliver it soonest: queued bytes over
    /// the AP's measured rate plus its one-way delay (PluriBus's delay-based scheduling
    /// carried over to forwarders).
    EarliestArrival,
}

#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    pub session: SessionId,
    /// The sender's home AP.
    pub home: ApId,
    pub choice: Choice,
    pub reassign_after: Duration,
    /// Unassigned packets older than this are dropped (their capture is gone by then).
    pub give_up_after: Duration,
    /// Packets tracked at once; the oldest are dropped beyond this.
    pub max_packets: usize,
    /// Whether the session is TCP: then a segment whose sequence range was already
    /// assigned is not scheduled again.
    pub tcp: bool,
}

impl SchedulerConfig {
    pub fn new(session: SessionId, home: ApId, tcp: bool) -> SchedulerConfig {
        SchedulerConfig {
            session,
            home,
            choice: Choice::FirstCome,
            reassign_after: Duration::from_secs(2),
            // A TCP segment is never given up on (the sender would only send it again).
            give_up_after: Duration::from_secs(if tcp { 3600 } else { 1 }),
            max_packets: 16_384,
            tcp,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SchedulerStats {
    pub reports: u64,
    pub assigned: u64,
    pub reassigned: u64,
    /// TCP segments whose range was already assigned (the sender retransmitted).
    pub duplicate_segments: u64,
    /// Packets dropped unassigned (too old, or too many tracked).
    pub dropped: u64,
    /// Reports from APs beyond [`MAX_APS`].
    pub refused_reports: u64,
}

#[derive(Clone, Debug, Default)]
struct ApView {
    buffer_free: u32,
    /// The most free space ever reported: the send buffer's size.
    capacity: u32,
    enqueued: u32,
    assigned_bytes: u32,
    /// Delivery-rate estimate (bytes/s) and one-way delay, for [`Choice::EarliestArrival`].
    rate: f64,
    delay: Duration,
}

impl ApView {
    fn room(&self) -> i64 {
        i64::from(self.buffer_free) - i64::from(self.assigned_bytes.wrapping_sub(self.enqueued))
    }
}

#[derive(Clone, Debug)]
struct Slot {
    entry: Entry,
    first_seen: Instant,
    /// Reporters in the order their reports came.
    reporters: Vec<ApId>,
    assigned: Option<(ApId, Instant)>,
    home_only: bool,
    done: bool,
}

/// One session's forwarder scheduler.
pub struct Scheduler {
    cfg: SchedulerConfig,
    aps: Vec<ApView>,
    slots: VecDeque<Slot>,
    /// Serial number of `slots[0]`.
    base: u64,
    by_id: HashMap<u16, u64>,
    /// Highest TCP sequence number assigned so far, unwrapped.
    tcp_high: Option<u64>,
    /// Start and length of the last `max_packets` TCP segments assigned.
    assigned_segments: HashMap<u32, u16>,
    segment_order: VecDeque<u32>,
    any_assigned: bool,
    /// Serial of the first slot that may be unassigned.
    cursor: u64,
    next_check: Option<Instant>,
    out: VecDeque<Announce>,
    stats: SchedulerStats,
}

impl Scheduler {
    pub fn new(cfg: SchedulerConfig) -> Scheduler {
        Scheduler {
            cfg,
            aps: Vec::new(),
            slots: VecDeque::new(),
            base: 0,
            by_id: HashMap::new(),
            tcp_high: None,
            assigned_segments: HashMap::new(),
            segment_order: VecDeque::new(),
            any_assigned: false,
            cursor: 0,
            next_check: None,
            out: VecDeque::new(),
            stats: SchedulerStats::default(),
        }
    }

    pub fn stats(&self) -> &SchedulerStats {
        &self.stats
    }

    /// Tells the earliest-arrival choice an AP's uplink rate (bytes/s) and one-way delay;
    /// the I/O layer measures them from the data the AP delivers.
    pub fn set_path_estimate(&mut self, ap: ApId, rate: f64, delay: Duration) {
        if let Some(v) = self.view(ap) {
            v.rate = rate;
            v.delay = delay;
        }
    }

    fn view(&mut self, ap: ApId) -> Option<&mut ApView> {
        let i = usize::from(ap);
        if i >= MAX_APS {
            return None;
        }
        if self.aps.len() <= i {
            self.aps.resize(i + 1, ApView::default());
        }
        self.aps.get_mut(i)
    }

    /// A reception report arrived.
    pub fn on_report(&mut self, now: Instant, r: &Report) {
        let Some(v) = self.view(r.ap) else {
            self.stats.refused_reports += 1;
            return;
        };
        v.buffer_free = r.buffer_free;
        v.capacity = v.capacity.max(r.buffer_free);
        v.enqueued = r.enqueued;
        self.stats.reports += 1;
        for e in &r.entries {
            match self.by_id.get(&e.ip_id) {
                Some(&serial) => {
                    if let Some(slot) = self.slots.get_mut((serial - self.base) as usize) {
                        if !slot.reporters.contains(&r.ap) {
                            slot.reporters.push(r.ap);
                        }
                    }
                }
                None => {
                    if self.cfg.tcp && e.seq_len > 0 && !e.home_only {
                        if let Some(high) = self.tcp_high {
                            if unwrap(high, e.seq) + u64::from(e.seq_len) <= high {
                                // Already assigned whole: a retransmission of held data.
                                // A true hole is below `high` too, so only ranges that
                                // were themselves assigned are skipped.
                                if self.range_assigned(e.seq, e.seq_len) {
                                    self.stats.duplicate_segments += 1;
                                    continue;
                                }
                            }
                        }
                    }
                    let home_only = e.home_only || (!self.cfg.tcp && !self.any_assigned);
                    let serial = self.base + self.slots.len() as u64;
                    self.by_id.insert(e.ip_id, serial);
                    self.slots.push_back(Slot {
                        entry: *e,
                        first_seen: now,
                        reporters: vec![r.ap],
                        assigned: None,
                        home_only,
                        done: false,
                    });
                }
            }
        }
        self.trim(now);
        self.assign(now, None);
    }

    fn range_assigned(&self, seq: u32, len: u16) -> bool {
        self.assigned_segments.get(&seq).is_some_and(|&l| l >= len)
    }

    /// Drops finished packets at the front, and unassigned ones too old or too many.
    fn trim(&mut self, now: Instant) {
        while let Some(front) = self.slots.front() {
            let stale = front.assigned.is_none()
                && now.saturating_duration_since(front.first_seen) > self.cfg.give_up_after;
            let over = self.slots.len() > self.cfg.max_packets;
            if !(front.done || stale || over) {
                break;
            }
            if !front.done && front.assigned.is_none() {
                self.stats.dropped += 1;
            }
            let ip_id = front.entry.ip_id;
            if self.by_id.get(&ip_id) == Some(&self.base) {
                self.by_id.remove(&ip_id);
            }
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// Assigns waiting packets in first-report order while some AP has room. `avoid`
    /// excludes an AP (one that failed to deliver).
    fn assign(&mut self, now: Instant, avoid: Option<ApId>) {
        let mut batches: Vec<(ApId, Vec<Entry>)> = Vec::new();
        let home = self.cfg.home;
        let give_up = self.cfg.give_up_after;
        // Everything before the cursor is assigned or finished.
        let mut i = self.cursor.saturating_sub(self.base) as usize;
        while self
            .slots
            .get(i)
            .is_some_and(|s| s.assigned.is_some() || s.done)
        {
            i += 1;
        }
        self.cursor = self.base + i as u64;
        for i in i..self.slots.len() {
            if !self.aps.iter().any(|a| a.room() > 0) {
                break;
            }
            let slot = &mut self.slots[i];
            if slot.assigned.is_some() || slot.done {
                continue;
            }
            if now.saturating_duration_since(slot.first_seen) > give_up {
                // Too old to be held still (or to matter): given up.
                slot.done = true;
                self.stats.dropped += 1;
                continue;
            }
            let slot = &self.slots[i];
            let bytes = i64::from(slot.entry.bytes);
            let candidates = slot
                .reporters
                .iter()
                .copied()
                .filter(|&a| !slot.home_only || a == home)
                .filter(|&a| Some(a) != avoid)
                .filter(|&a| {
                    self.aps
                        .get(usize::from(a))
                        .is_some_and(|v| v.room() >= bytes)
                });
            let pick = match self.cfg.choice {
                Choice::FirstCome => candidates.into_iter().next(),
                Choice::EarliestArrival => candidates.min_by(|&a, &b| {
                    let eta = |x: ApId| {
                        let v = &self.aps[usize::from(x)];
                        let unseen = v.assigned_bytes.wrapping_sub(v.enqueued);
                        let queued = v.capacity.saturating_sub(v.buffer_free);
                        f64::from(unseen.saturating_add(queued)) / v.rate.max(1.0)
                            + v.delay.as_secs_f64()
                    };
                    eta(a).total_cmp(&eta(b))
                }),
            };
            let Some(ap) = pick else { continue };
            let entry = slot.entry;
            let v = &mut self.aps[usize::from(ap)];
            v.assigned_bytes = v.assigned_bytes.wrapping_add(u32::from(entry.bytes));
            let slot = &mut self.slots[i];
            slot.assigned = Some((ap, now));
            self.next_check.get_or_insert(now + self.cfg.reassign_after);
            self.any_assigned = true;
            self.stats.assigned += 1;
            if self.cfg.tcp && entry.seq_len > 0 {
                let end = match self.tcp_high {
                    Some(h) => unwrap(h, entry.seq) + u64::from(entry.seq_len),
                    None => u64::from(entry.seq) + u64::from(entry.seq_len),
                };
                self.tcp_high = Some(self.tcp_high.map_or(end, |h| h.max(end)));
                if self
                    .assigned_segments
                    .insert(entry.seq, entry.seq_len)
                    .is_none()
                {
                    self.segment_order.push_back(entry.seq);
                    if self.segment_order.len() > self.cfg.max_packets {
                        if let Some(old) = self.segment_order.pop_front() {
                            self.assigned_segments.remove(&old);
                        }
                    }
                }
            }
            match batches.iter_mut().find(|(a, _)| *a == ap) {
                Some((_, b)) => b.push(entry),
                None => batches.push((ap, vec![entry])),
            }
        }
        for (forwarder, entries) in batches {
            for chunk in entries.chunks(super::report::MAX_ENTRIES) {
                self.out.push_back(Announce {
                    forwarder,
                    session: self.cfg.session,
                    entries: chunk.to_vec(),
                });
            }
        }
    }

    /// A forwarded packet reached the gateway: its forwarder and when it was assigned,
    /// if it was still tracked.
    pub fn on_delivered(&mut self, ip_id: u16) -> Option<(ApId, Instant)> {
        let &serial = self.by_id.get(&ip_id)?;
        let slot = self.slots.get_mut((serial - self.base) as usize)?;
        slot.done = true;
        slot.assigned
    }

    /// The next announcement to send to every AP of the session.
    pub fn poll_announce(&mut self) -> Option<Announce> {
        self.out.pop_front()
    }

    /// When [`Scheduler::handle_timeout`] next looks for late packets: a quarter of
    /// `reassign_after` apart while any assignment is outstanding.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_check
    }

    /// Gives packets whose forwarder did not deliver in time to another reporter.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_check.is_none_or(|t| now < t) {
            return;
        }
        let late: Vec<(usize, ApId)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.done)
            .filter_map(|(i, s)| {
                let (ap, at) = s.assigned?;
                (now >= at + self.cfg.reassign_after).then_some((i, ap))
            })
            .collect();
        for (i, ap) in late {
            let slot = &mut self.slots[i];
            if slot.reporters.len() < 2 {
                // Nobody else holds it: forget it rather than retry forever.
                slot.done = true;
                self.stats.dropped += 1;
                continue;
            }
            slot.reporters.retain(|&a| a != ap);
            slot.assigned = None;
            self.cursor = self.cursor.min(self.base + i as u64);
            self.stats.reassigned += 1;
            self.assign(now, Some(ap));
        }
        self.trim(now);
        let outstanding = self.slots.iter().any(|s| !s.done && s.assigned.is_some());
        self.next_check = outstanding.then(|| now + self.cfg.reassign_after / 4);
    }
}
