//! The data path's scheduling: each queued inner packet is looked up in the flow table,
//! put in its traffic class, and handed to that class's scheduler; redundant copies and
//! per-path feedback are handled here, and predicted delivery times are logged when asked.

use std::collections::VecDeque;
use std::time::Duration;

use braid_wire::{Message, DATA_FIXED_LEN, HEADER_LEN};

use super::Session;
use crate::class::classify;
use crate::flow::{self, FlowTable};
use crate::path::SentKind;
use crate::sched::{Choice, PacketMeta, Scheduler};
use crate::{Config, Instant, PathId, Transmit};

/// Positions of the live paths (loss-guarded ones included: a redundant copy on a lossy
/// path still helps), or of all paths when none is live.
fn live_positions(paths: &[crate::path::Path]) -> impl Iterator<Item = usize> + '_ {
    let any = paths.iter().any(crate::path::Path::is_live);
    paths
        .iter()
        .enumerate()
        .filter(move |(_, p)| !any || p.is_live())
        .map(|(i, _)| i)
}

/// A path that carried data this recently counts in the delay gap that sizes the hole
/// timeout.
const GAP_MEMORY: Duration = Duration::from_secs(5);

/// Most predictions kept (oldest dropped first).
const MAX_PREDICTIONS: usize = 1 << 20;

/// The predicted delivery of one data packet (PluriBus §4.3), for measuring accuracy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    pub seq: u32,
    pub path: PathId,
    /// When the sender sent it, its own clock (µs, low 32 bits).
    pub sent: u32,
    /// `sent + size / capacity + queue + (d + δ)`: the receiver's clock (µs, low 32 bits)
    /// at which it should arrive. `None` before the path's delay is known.
    pub predicted: Option<u32>,
}

/// A data packet still owed copies on more paths (redundant scheduling).
struct Copies {
    seq: u32,
    packet: Vec<u8>,
    /// Path positions still to send on.
    remaining: VecDeque<usize>,
}

/// Scheduling state: the flow table, one scheduler per traffic class, scratch space.
pub(super) struct Scheduling {
    pub(super) flows: FlowTable,
    /// `schedulers[0]` serves the default class; `schedulers[i]` serves `config.classes[i-1]`.
    pub(super) schedulers: Vec<Box<dyn Scheduler>>,
    copies: Option<Copies>,
    active: Vec<u32>,
    ids: Vec<PathId>,
    pub(super) predictions: VecDeque<Prediction>,
    /// Data arrivals logged at this end (seq, path, receive clock µs low 32 bits).
    pub(super) arrivals: VecDeque<(u32, PathId, u32)>,
    /// The head of the send queue was held until this instant (no feedback may end it).
    pub(super) retry_at: Option<Instant>,
    /// The scheduler holds the head of the send queue and the queue is too long: refuse new
    /// packets.
    pub(super) backlog_full: bool,
    /// The class whose scheduler held the head of the send queue, while nothing but the
    /// time has changed since (no input, nothing sent): that scheduler may renew its hold
    /// without deciding again ([`Scheduler::renew_hold`]).
    pub(super) held_class: Option<usize>,
    /// Inner packets joined the send queue behind the held head since the hold was
    /// decided or renewed: it is renewed with the new backlog
    /// ([`Scheduler::renew_hold_backlog`]).
    pub(super) backlog_grew: bool,
}

impl Scheduling {
    pub(super) fn new(config: &Config) -> Scheduling {
        let mut schedulers = vec![crate::sched::build(config.scheduler)];
        schedulers.extend(
            config
                .classes
                .iter()
                .map(|c| crate::sched::build(c.scheduler)),
        );
        Scheduling {
            flows: FlowTable::new(
                config.max_flows,
                config.flow_idle_timeout,
                config.flow_hash_seed,
            ),
            schedulers,
            copies: None,
            active: Vec::new(),
            ids: Vec::new(),
            predictions: VecDeque::new(),
            arrivals: VecDeque::new(),
            retry_at: None,
            backlog_full: false,
            held_class: None,
            backlog_grew: false,
        }
    }
}

impl Scheduling {
    /// A redundantly scheduled packet still owes copies.
    pub(super) fn has_copies(&self) -> bool {
        self.copies.is_some()
    }

    /// Path position `pi` left the session (`session/membership.rs`): no copy owed goes
    /// there, the positions after it are renumbered, and any hold is decided again.
    pub(super) fn forget(&mut self, pi: usize) {
        if let Some(c) = &mut self.copies {
            c.remaining.retain(|&q| q != pi);
            for q in &mut c.remaining {
                if *q > pi {
                    *q -= 1;
                }
            }
        }
        self.retry_at = None;
        self.held_class = None;
    }
}

impl Session {
    /// Sends the next queued data packet, or the next redundant copy owed.
    pub(super) fn poll_data(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(t) = self.poll_copy(now, buf) {
            return Some(t);
        }
        let (fixed, packet) = self.send_queue.front()?;
        if let Some(class) = self.scheduling.held_class.take() {
            let sch = &mut self.scheduling;
            let scheduler = &mut sch.schedulers[class];
            let grew = std::mem::take(&mut sch.backlog_grew);
            // A lookup would sweep the flow table first: decide again.
            let renewed = !sch.flows.sweep_due(now)
                && if grew {
                    scheduler.renew_hold_backlog(now, self.send_queue.len())
                } else {
                    scheduler.renew_hold(now)
                };
            if renewed {
                sch.retry_at = scheduler.retry_at();
                sch.backlog_full = scheduler.backlog_full();
                sch.held_class = Some(class);
                return None;
            }
        }
        let seq = fixed.unwrap_or(self.next_data_seq);
        let wire_bytes =
            HEADER_LEN + 4 + DATA_FIXED_LEN + packet.len() + self.config.datagram_overhead;
        let info = flow::parse::parse(packet);
        let classes = &self.config.classes;
        let sch = &mut self.scheduling;
        let flow = info.and_then(|i| sch.flows.lookup_outgoing(now, &i, |i| classify(classes, i)));
        let class = flow.map_or(0, |f| f.class).min(sch.schedulers.len() - 1);
        // The class whose metered budget it spends: the same one, unless the budgets are
        // the gateway's classes (a server metering downloads by the gateway's Hello).
        let budget_class = (self.metering.as_ref()).map_or(class, |m| m.budget_class(class, &info));
        let scheduler = &mut sch.schedulers[class];
        let needs_counts =
            scheduler.pins_flows() && flow.is_some_and(|f| f.new || f.pinned.is_none());
        if needs_counts {
            sch.ids.clear();
            sch.ids.extend(self.paths.iter().map(|p| p.id()));
            sch.flows.active_per_path(now, &sch.ids, &mut sch.active);
        } else {
            sch.active.clear();
        }
        let meta = PacketMeta {
            seq,
            wire_bytes,
            packet,
            flow,
            active_flows: &sch.active,
            backlog: self.send_queue.len(),
        };
        // A class whose own metered budget alone leaves it no usable path: waiting would
        // block every class behind it in the one send queue, so its packet is dropped, as
        // by a full queue (the class is policed at its budget), and the next one is tried
        // at once. (A resend with its sequence fixed leaves a hole the peer's hole timeout
        // closes, as a loss would.)
        let blocked =
            (self.metering.as_ref()).is_some_and(|m| m.class_blocked(budget_class, &self.paths));
        if blocked {
            sch.retry_at = Some(now);
            sch.backlog_full = false;
            if let Some((_, packet)) = self.send_queue.pop_front() {
                self.recycle(packet);
                self.stats.class_budget_drops += 1;
            }
            return None;
        }
        // A class with a metered budget of its own sees its paths held by it.
        if let Some(m) = &self.metering {
            m.hold_for_class(budget_class, &mut self.paths);
        }
        let choice = scheduler.select(now, &meta, &self.paths);
        if let Some(m) = &self.metering {
            m.restore_holds(&mut self.paths);
        }
        sch.retry_at = None;
        sch.backlog_full = false;
        let (pi, redundant) = match choice {
            Choice::Hold => {
                sch.retry_at = scheduler.retry_at();
                sch.backlog_full = scheduler.backlog_full();
                // Unless the lookup counted something (a new flow refused by a full table)
                // or the scheduler counts active flows (which age with time).
                let counted = info.is_some() && flow.is_none();
                if !counted && !scheduler.pins_flows() {
                    sch.held_class = Some(class);
                }
                return None;
            }
            Choice::Path(id) => (self.index[usize::from(id)].map(usize::from)?, false),
            Choice::Redundant => {
                // The original on the first live path that a metered budget does not hold.
                let held = |i: usize| {
                    self.paths[i].is_metered_hold()
                        || (self.metering.as_ref())
                            .is_some_and(|m| !m.class_may_send(budget_class, i))
                };
                let first = live_positions(&self.paths)
                    .find(|&i| !held(i))
                    .or_else(|| live_positions(&self.paths).next())?;
                (first, true)
            }
        };
        // A metered path whose budget is spent, chosen when no other path was usable:
        // the packet waits for the next interval (`session/metering.rs`).
        let class_held =
            (self.metering.as_ref()).is_some_and(|m| !m.class_may_send(budget_class, pi));
        if self.paths[pi].is_metered_hold() || class_held {
            sch.retry_at = self.metering.as_ref().map(|m| m.poll_timeout());
            return None;
        }
        // Counted once, now that it is sent (a held packet is looked up on every poll).
        if let Some((i, f)) = info.zip(flow) {
            sch.flows.record_sent(now, &i, &f);
        }
        let pinned_here =
            scheduler.pins_flows() && flow.is_some_and(|f| f.pinned != Some(self.paths[pi].id()));
        scheduler.on_sent(now, self.paths[pi].id(), &meta);
        if pinned_here {
            if let Some(i) = info {
                sch.flows.pin(&i.key, self.paths[pi].id());
            }
        }
        let mut unordered = scheduler.pins_flows() && flow.is_some();
        if self.config.flow_order && !unordered {
            if let Some(i) = info {
                let p = &self.paths[pi];
                // The longest an in-order packet sent now can take to arrive (its queue and
                // at most a round trip) and then wait for its hole.
                let hold_at_peer = match self.config.hole_timeout_mode {
                    crate::HoleTimeoutMode::Fixed => self.config.hole_timeout,
                    crate::HoleTimeoutMode::Adaptive => crate::reorder::MAX_HOLE_TIMEOUT,
                };
                let hold = p.queue_delay(now)
                    + p.srtt().unwrap_or(crate::fec::window::DEFAULT_RTT)
                    + hold_at_peer;
                unordered = sch.flows.deliver_on_arrival(&i.key, now, p.id(), hold);
            }
        }
        let segment = flow.zip(info.and_then(|i| i.tcp)).map(|(f, t)| {
            super::failover::TcpSegment::new(f.id, t.payload_len > 0 || t.syn || t.fin)
        });
        let (fixed, mut packet, checked) = self.send_queue.pop_front_checked()?;
        let unordered = self.rpc_on_data(now, pi, seq, &packet, unordered);
        if fixed.is_none() {
            self.next_data_seq = seq.wrapping_add(1);
        }
        // Compressed once, when it leaves the queue: copies, coded packets and resends all
        // carry the same bytes (a resend re-queued in compressed form passes unchanged).
        if self.config.header_compression && self.peer_restores_headers {
            self.compressor.compress_checked(seq, &mut packet, checked);
        }
        let t = self.send_data(now, pi, seq, &packet, buf, unordered);
        if let (Some(m), Some(t)) = (&mut self.metering, &t) {
            m.on_class_sent(budget_class, pi, t.len as u64);
        }
        self.recovery
            .on_data_sent(now, seq, &self.paths[pi], &packet);
        if redundant {
            let scheduler = &self.scheduling.schedulers[class];
            let remaining: VecDeque<usize> = live_positions(&self.paths)
                .filter(|&i| i != pi && !self.paths[i].is_metered_hold())
                .filter(|&i| {
                    (self.metering.as_ref()).is_none_or(|m| m.class_may_send(budget_class, i))
                })
                .filter(|&i| scheduler.wants_copy(now, &self.paths[i]))
                .collect();
            if !remaining.is_empty() {
                self.scheduling.copies = Some(Copies {
                    seq,
                    packet,
                    remaining,
                });
                return t;
            }
        }
        if t.is_some() && !redundant {
            let wire = t.as_ref().map_or(0, |t| t.len);
            // Not on a metered path: its bytes cost, and a copy is paid for twice.
            let metered = |i: usize| (self.metering.as_ref()).is_some_and(|m| m.is_metered(i));
            let probe = (0..self.paths.len())
                .find(|&i| i != pi && !metered(i) && self.paths[i].take_probe(now, wire));
            if let Some(j) = probe {
                let mut copy = self.pool.pop().unwrap_or_default();
                copy.clear();
                copy.extend_from_slice(&packet);
                self.scheduling.copies = Some(Copies {
                    seq,
                    packet: copy,
                    remaining: VecDeque::from([j]),
                });
            }
        }
        if t.is_some() {
            self.keep_sent(pi, seq, packet, segment);
        } else {
            self.recycle(packet);
        }
        t
    }

    /// The next copy of a redundantly scheduled packet.
    fn poll_copy(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let c = self.scheduling.copies.as_mut()?;
        let Some(pi) = c.remaining.pop_front() else {
            if let Some(c) = self.scheduling.copies.take() {
                self.recycle(c.packet);
            }
            return None;
        };
        let seq = c.seq;
        let packet = std::mem::take(&mut c.packet);
        let t = self.send_data(now, pi, seq, &packet, buf, false);
        match &mut self.scheduling.copies {
            Some(c) if !c.remaining.is_empty() => c.packet = packet,
            _ => {
                self.scheduling.copies = None;
                self.recycle(packet);
            }
        }
        t
    }

    fn send_data(
        &mut self,
        now: Instant,
        pi: usize,
        seq: u32,
        packet: &[u8],
        buf: &mut [u8],
        unordered: bool,
    ) -> Option<Transmit> {
        if self.config.record_predictions {
            let wire_bytes =
                HEADER_LEN + 4 + DATA_FIXED_LEN + packet.len() + self.config.datagram_overhead;
            let p = &self.paths[pi];
            let base = self.delay_base();
            let predicted = p.predicted_delivery_us(now, wire_bytes).map(|rel| {
                base.wrapping_add(now.wire_timestamp())
                    .wrapping_add(rel as u32)
            });
            let log = &mut self.scheduling.predictions;
            if log.len() >= MAX_PREDICTIONS {
                log.pop_front();
            }
            log.push_back(Prediction {
                seq,
                path: p.id(),
                sent: now.wire_timestamp(),
                predicted,
            });
        }
        self.emit_flagged(
            now,
            pi,
            Message::Data {
                seq,
                payload: packet,
            },
            SentKind::Data,
            buf,
            unordered,
        )
    }

    /// Applies the peer's feedback on the path at position `pi` and tells the schedulers.
    /// `queue_us`: the wait the peer saw for `highest` at the bottleneck, when it says.
    pub(super) fn apply_path_ack(
        &mut self,
        now: Instant,
        pi: usize,
        highest: u32,
        received: u32,
        queue_us: Option<u32>,
    ) {
        let queue = queue_us.map(|q| Duration::from_micros(u64::from(q)));
        let (acked, lost) = self.paths[pi].on_path_ack(now, highest, received, queue);
        if lost > 0 {
            self.guard_due = true;
        }
        if acked > 0 || lost > 0 {
            let id = self.paths[pi].id();
            for s in &mut self.scheduling.schedulers {
                s.on_feedback(now, id, acked, lost);
            }
        }
        self.on_liveness_ack(now, pi, acked, highest);
    }

    /// Records a data packet that arrived from the peer on `path`: the flow table learns
    /// the reverse direction's path, the resequencing buffer the delay gap between the
    /// paths that carry data, and the arrival is logged when predictions are.
    pub(super) fn note_arrival(
        &mut self,
        now: Instant,
        path: PathId,
        seq: u32,
        packet: &[u8],
        resent: bool,
    ) {
        if let Some(pi) = self.index[usize::from(path)].map(usize::from) {
            self.paths[pi].note_data_rx(now);
        }
        self.reseq.set_delay_gap(self.data_delay_gap(now));
        // A resent packet (a retransmission, or a failover's resend) took whatever path was
        // fastest, not its flow's: replies keep following the path the flow came in on.
        let info = flow::parse::parse(packet).or_else(|| self.decompressor.flow_info(packet));
        if let Some(info) = info {
            if resent {
                self.scheduling
                    .flows
                    .observe_resent_incoming(now, &info, path);
            } else {
                self.scheduling.flows.observe_incoming(now, &info, path);
            }
        }
        if self.config.record_predictions {
            let log = &mut self.scheduling.arrivals;
            if log.len() >= MAX_PREDICTIONS {
                log.pop_front();
            }
            log.push_back((seq, path, now.wire_timestamp()));
        }
    }

    /// The longest a data packet can trail the packets sent after it: the latest arrival
    /// offset (`d + δ` plus queue) among the paths that carried data within
    /// [`GAP_MEMORY`], less the smallest `d + δ` among them. Zero with one such path.
    fn data_delay_gap(&self, now: Instant) -> Duration {
        let mut base: Option<u32> = None;
        let mut offsets = [0i64; 2];
        let mut n = 0;
        for p in &self.paths {
            let Some((d, q)) = p.rx_data_delay(now, GAP_MEMORY) else {
                continue;
            };
            // Relative to the first path's estimate: differences are small, whatever the
            // wrapping clocks' skew.
            let b = *base.get_or_insert(d);
            let rel = i64::from(d.wrapping_sub(b) as i32);
            let late = rel + i64::from(q);
            if n == 0 {
                offsets = [rel, late];
            } else {
                offsets = [offsets[0].min(rel), offsets[1].max(late)];
            }
            n += 1;
        }
        if n < 2 {
            return Duration::ZERO;
        }
        Duration::from_micros(u64::try_from(offsets[1] - offsets[0]).unwrap_or(0))
    }

    /// Takes the predictions logged so far (with `record_predictions`).
    pub fn take_predictions(&mut self) -> Vec<Prediction> {
        self.scheduling.predictions.drain(..).collect()
    }

    /// Takes the data arrivals logged so far (with `record_predictions`): data sequence
    /// number, path, and this end's clock at arrival (µs, low 32 bits).
    pub fn take_arrivals(&mut self) -> Vec<(u32, PathId, u32)> {
        self.scheduling.arrivals.drain(..).collect()
    }

    /// Names of the schedulers in use: the default class first, then each class's.
    pub fn scheduler_names(&self) -> Vec<&'static str> {
        self.scheduling
            .schedulers
            .iter()
            .map(|s| s.name())
            .collect()
    }

    pub(super) fn recycle(&mut self, packet: Vec<u8>) {
        if self.pool.len() < super::MAX_POOL {
            self.pool.push(packet);
        }
    }
}
