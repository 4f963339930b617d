//! RPC for one striped TCP flow (PRISM §5-6): the meta-state, loss detection, the ACK
//! re-sequencing buffer and the state machine, applied to each ACK in turn.
//!
//! What a released ACK looks like:
//! - NORMAL (§5.2.2): duplicates are held; when the cumulative ACK advances, the held ACKs
//!   it covers and the new one go out in identified order, each acknowledging the end of
//!   the segment it identified (the last one the receiver's cumulative ACK), with the
//!   SACK option replaced by NOPs: the sender sees the ACKs in-order arrival would have
//!   produced. The paper rewrites the held ACK's number the same way.
//! - LOSS (§6.2.1): every ACK, and on entry every held one, goes out in its original form
//!   (SACK kept), raised to the receiver's current cumulative ACK, so that an unmodified
//!   SACK sender (RACK or three segments SACKed) retransmits at once. No duplicate ACK is
//!   invented: the paper's sender is SACK-capable.
//! - A held ACK that reaches its bound goes out the same way (a bound the paper lacks):
//!   twice the links' delay gap (the slowest link's hRTT less the fastest's), within
//!   [`RpcConfig::min_hold`] and [`RpcConfig::max_hold`].
//! - Whatever goes out in original form has its SACK blocks cut at the lowest segment
//!   the meta-state knows to be still in flight (not reported, not lost): data above it
//!   came in out of order, and a sender shown it SACKed would take the segment below for
//!   lost (RACK, or three SACKed segments above it). Real losses are below that point, so
//!   an unmodified sender still sees them. The paper does not say what the SACK option of
//!   an ACK released in original form shows; this is the loss it means to report.
//! - In NORMAL state released ACKs go out paced (Algorithm 2, line 6): the held ones
//!   released together, and any behind them, spaced by the bytes each acknowledges at
//!   [`RpcConfig::peak_rate_pct`] of the links' aggregate rate, so that the sender's reply
//!   to a filled hole is not one burst. Entering LOSS sends what waits at once. A
//!   released ACK that acknowledges more than two segments beyond the one before it goes
//!   out as a paced series of copies, each acknowledging two more (the paper paces only
//!   the held ACKs; a jump with none held would otherwise release a window at once).
//!
//! Never does a released ACK acknowledge more than the receiver has. TSval is raised to
//! the highest already released on the flow, since re-sequenced ACKs may carry older
//! ones and the sender's PAWS check (RFC 7323 §5) drops those. An ACK older than the
//! receiver's cumulative ACK (reordered on the way back) is read and then dropped if it
//! is a bare ACK, since a newer one was already released.

use std::collections::VecDeque;
use std::time::Duration;

use super::loss::{LossDetector, Lost};
use super::meta::{Identified, MetaState, Record};
use super::options::{SackBlock, MAX_SACK_BLOCKS};
use super::resequence::{Held, Resequencer};
use super::segment::{self, Rewrite, Segment};
use super::seq;
use super::share::LinkShare;
use super::state::{Input, RpcState};
use super::{LossEvent, RpcConfig, RpcStats};
use crate::flow::parse::FlowKey;
use crate::time::{earliest, Instant};
use crate::PathId;

/// RPC's state for one flow, keyed by its data direction.
#[derive(Clone, Debug)]
pub struct RpcFlow {
    key: FlowKey,
    meta: MetaState,
    loss: LossDetector,
    reseq: Resequencer,
    state: RpcState,
    /// The end of the highest segment lost in this loss episode: a full ACK reaches it.
    recovery_point: u64,
    /// The highest cumulative ACK released.
    released_ack: u64,
    /// The highest TSval released.
    released_tsval: Option<u32>,
    pub(super) last_active: Instant,
    ids: Vec<Identified>,
    lost: Vec<Lost>,
    detect_losses: bool,
    tunnel_repairs: bool,
    /// The end of the highest segment any ACK reported.
    highest_reported: u64,
    min_hold: Duration,
    max_hold: Duration,
    /// How long a duplicate ACK arriving now may be held.
    hold_bound: Duration,
    peak_rate: f64,
    /// The pacer's rate, bits per second (`None`: no pacing).
    pace_bps: Option<f64>,
    /// Released ACKs waiting for the pacer, with the bytes each newly acknowledges.
    paced: VecDeque<(Vec<u8>, u64)>,
    /// When the pacer may send the next one.
    pace_next: Instant,
    /// Each link's hRTT when the last ACK was read, by link id.
    srtts: Vec<Option<Duration>>,
}

/// Where an ACK's effects go.
pub(super) struct Sink<'a> {
    pub release: &'a mut VecDeque<Vec<u8>>,
    pub losses: &'a mut VecDeque<LossEvent>,
    pub share: &'a mut LinkShare,
    pub stats: &'a mut RpcStats,
}

/// How a released ACK is changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// Acknowledging this (64-bit) number, SACK stripped.
    Resequenced(u64),
    /// Its own number raised to the receiver's cumulative ACK, SACK kept.
    Original,
}

impl RpcFlow {
    /// A flow whose first data byte seen is `seq`.
    pub fn new(cfg: &RpcConfig, key: FlowKey, seq: u32, now: Instant) -> Self {
        let base = seq::BASE + u64::from(seq);
        RpcFlow {
            key,
            meta: MetaState::new(base, cfg.history),
            loss: LossDetector::new(cfg.loss_threshold, cfg.history),
            reseq: Resequencer::new(cfg.max_held),
            state: RpcState::Normal,
            recovery_point: base,
            released_ack: base,
            released_tsval: None,
            last_active: now,
            ids: Vec::new(),
            lost: Vec::new(),
            detect_losses: cfg.detect_losses,
            tunnel_repairs: cfg.tunnel_repairs,
            highest_reported: base,
            min_hold: cfg.min_hold,
            max_hold: cfg.max_hold,
            hold_bound: cfg.min_hold.min(cfg.max_hold),
            peak_rate: f64::from(cfg.peak_rate_pct) / 100.0,
            pace_bps: None,
            paced: VecDeque::new(),
            pace_next: now,
            srtts: Vec::new(),
        }
    }

    pub fn state(&self) -> RpcState {
        self.state
    }

    pub fn held(&self) -> usize {
        self.reseq.len()
    }

    pub fn meta(&self) -> &MetaState {
        &self.meta
    }

    /// A data segment of `len` sequence numbers from `wire_seq`, sent on `link`.
    pub fn on_sent(&mut self, now: Instant, link: PathId, wire_seq: u32, len: u32) {
        self.last_active = now;
        let start = seq::extend(wire_seq, self.meta.highest_sent());
        let len = u64::from(len);
        if let Some(order) = self.meta.on_sent(now, link, start, start + len) {
            self.loss.on_sent(link, order, start.max(self.meta.cum()));
        }
    }

    /// An ACK coming back: identify it, detect losses, then hold or release it.
    pub(super) fn on_ack(&mut self, now: Instant, packet: Vec<u8>, seg: &Segment, sink: Sink) {
        self.last_active = now;
        let Some(ack) = seg.ack else {
            sink.release.push_back(packet);
            return;
        };
        let old_cum = self.meta.cum();
        let ack = seq::extend(ack, old_cum);
        let sack: Vec<(u64, u64)> = seg
            .options
            .sack()
            .iter()
            .map(|b| (seq::extend(b.left, old_cum), seq::extend(b.right, old_cum)))
            .collect();
        self.ids.clear();
        self.lost.clear();
        self.meta.identify(ack, &sack, &mut self.ids);
        for d in &self.ids {
            sink.stats.losses_spurious += u64::from(d.was_lost);
            sink.share.on_delivered(now, d.link, d.end - d.start);
            if !d.retransmitted {
                sink.share
                    .on_rtt(d.link, now.saturating_duration_since(d.sent_at));
            }
        }
        sink.share.srtts(&mut self.srtts);
        let gap = sink.share.delay_gap().unwrap_or(Duration::ZERO);
        self.hold_bound = (gap * 2).max(self.min_hold).min(self.max_hold);
        self.pace_bps = (self.peak_rate > 0.0)
            .then(|| sink.share.aggregate_bps(now))
            .flatten()
            .map(|b| b * self.peak_rate);
        if self.detect_losses {
            // A resent segment reported sooner than its link's quickest round trip was
            // reported by an earlier copy (a spurious resend, or the original after the
            // tunnel's repair): it says nothing about the order on the resend's link, and
            // taken as an arrival there it made every resend sent before it look lost.
            let share = &*sink.share;
            let own_arrival = |d: &Identified| {
                !d.retransmitted
                    || share
                        .min_rtt(d.link)
                        .is_none_or(|m| now.saturating_duration_since(d.sent_at) >= m * 7 / 8)
            };
            self.loss
                .detect(&mut self.meta, &self.ids, own_arrival, &mut self.lost);
        }
        // The re-sequencing buffer's size (PRISM Figure 12): from the left edge to the
        // highest byte reported.
        let top = self.ids.iter().map(|d| d.end).max().unwrap_or(0);
        self.highest_reported = self.highest_reported.max(top);
        let distance = self
            .highest_reported
            .saturating_sub(self.meta.cum().max(ack));
        sink.stats.distance_bytes_sum += distance;
        sink.stats.distance_samples += 1;

        let before = self.state;
        if !self.lost.is_empty() {
            let mut to_resend = false;
            for l in &self.lost {
                // The tunnel resends a first transmission's drop; a resend's drop is left
                // to the sender, in case the tunnel has given up on it.
                let repaired = self.tunnel_repairs && !l.record.retransmitted;
                if !repaired {
                    to_resend = true;
                    self.recovery_point = self.recovery_point.max(l.record.end);
                }
                sink.stats.losses_tunnel_repaired += u64::from(repaired);
                sink.losses.push_back(LossEvent {
                    flow: self.key,
                    link: l.record.link,
                    seq: seq::wire(l.start),
                    len: if repaired {
                        0
                    } else {
                        (l.record.end - l.start) as u32
                    },
                    share: sink.share.share(now, l.record.link),
                    at: now,
                });
            }
            sink.stats.losses += self.lost.len() as u64;
            if to_resend {
                self.state = self.state.on(Input::LossDetected).to;
            }
        }
        let advanced = ack > old_cum;
        let input = if advanced {
            Input::AdvancingAck {
                full: ack >= self.recovery_point,
            }
        } else {
            Input::DuplicateAck
        };
        self.state = self.state.on(input).to;

        if before == RpcState::Normal && self.state != RpcState::Normal {
            // Entering LOSS: the held duplicates go out as they are (§6.2.1).
            let mut held = Vec::new();
            self.reseq.take_all(&mut held);
            sink.stats.released_on_loss += held.len() as u64;
            note_hold(sink.stats, now, &held);
            for h in held {
                self.release(now, h.packet, Form::Original, sink.release, sink.stats);
            }
        }
        if ack < old_cum && seg.is_pure_ack() {
            sink.stats.stale_dropped += 1;
            return;
        }
        if self.state != RpcState::Normal || before != RpcState::Normal {
            // LOSS, or leaving it on this ACK: pass it on.
            sink.stats.passed += 1;
            self.release(now, packet, Form::Original, sink.release, sink.stats);
            return;
        }
        let key = self.ids.iter().map(|d| d.end).max().unwrap_or(old_cum);
        if !advanced {
            if !seg.is_pure_ack() {
                sink.stats.passed += 1;
                self.release(
                    now,
                    packet,
                    Form::Resequenced(self.meta.cum()),
                    sink.release,
                    sink.stats,
                );
                return;
            }
            sink.stats.held += 1;
            let pushed = self.reseq.hold(Held {
                packet,
                key,
                held_at: now,
                until: now + self.hold_bound,
            });
            if let Some(h) = pushed {
                sink.stats.released_on_overflow += 1;
                note_hold(sink.stats, now, std::slice::from_ref(&h));
                self.release(now, h.packet, Form::Original, sink.release, sink.stats);
            }
            return;
        }
        // Algorithm 2, lines 3-6: release the held ACKs up to the new left edge.
        let mut batch = Vec::new();
        self.reseq.take_up_to(ack, &mut batch);
        sink.stats.released_resequenced += batch.len() as u64;
        note_hold(sink.stats, now, &batch);
        sink.stats.passed += 1;
        batch.push(Held {
            packet,
            key,
            held_at: now,
            until: now,
        });
        batch.sort_by_key(|h| h.key);
        let n = batch.len();
        for (i, h) in batch.into_iter().enumerate() {
            let to = if i + 1 == n { ack } else { h.key.min(ack) };
            self.release(
                now,
                h.packet,
                Form::Resequenced(to),
                sink.release,
                sink.stats,
            );
        }
    }

    /// Sends what the pacer holds that is due, then releases the ACKs whose bound is up.
    pub(super) fn on_timeout(
        &mut self,
        now: Instant,
        release: &mut VecDeque<Vec<u8>>,
        stats: &mut RpcStats,
    ) {
        self.pace(now, release);
        let mut expired = Vec::new();
        self.reseq.take_expired(now, &mut expired);
        stats.released_on_timeout += expired.len() as u64;
        note_hold(stats, now, &expired);
        for h in expired {
            self.release(now, h.packet, Form::Original, release, stats);
        }
    }

    /// Releases every held ACK (the flow is going away), the pacer's first.
    pub(super) fn drain(&mut self, release: &mut VecDeque<Vec<u8>>, stats: &mut RpcStats) {
        self.pace_bps = None;
        release.extend(self.paced.drain(..).map(|(p, _)| p));
        let mut all = Vec::new();
        self.reseq.take_all(&mut all);
        for h in all {
            self.release(h.held_at, h.packet, Form::Original, release, stats);
        }
    }

    /// The highest cumulative ACK released (as on the wire) and the highest TSval.
    pub fn released(&self) -> (u32, Option<u32>) {
        (seq::wire(self.released_ack), self.released_tsval)
    }

    pub fn deadline(&self) -> Option<Instant> {
        let pacer = (!self.paced.is_empty()).then_some(self.pace_next);
        earliest(self.reseq.deadline(), pacer)
    }

    /// Queues a released packet that newly acknowledges `acked` bytes: in NORMAL state
    /// through the pacer, else at once behind whatever the pacer held.
    fn emit(
        &mut self,
        now: Instant,
        packet: Vec<u8>,
        acked: u64,
        out: &mut VecDeque<Vec<u8>>,
        stats: &mut RpcStats,
    ) {
        let Some(bps) = self.pace_bps.filter(|_| self.state == RpcState::Normal) else {
            out.extend(self.paced.drain(..).map(|(p, _)| p));
            out.push_back(packet);
            return;
        };
        if self.paced.is_empty() && self.pace_next <= now {
            self.pace_next = now + pace_gap(acked, bps);
            out.push_back(packet);
            return;
        }
        stats.paced += 1;
        self.paced.push_back((packet, acked));
    }

    /// Sends the paced packets that are due by `now`.
    fn pace(&mut self, now: Instant, out: &mut VecDeque<Vec<u8>>) {
        let bps = self.pace_bps.unwrap_or(f64::INFINITY);
        while self.pace_next <= now {
            let Some((p, acked)) = self.paced.pop_front() else {
                break;
            };
            out.push_back(p);
            self.pace_next += pace_gap(acked, bps);
        }
    }

    /// Rewrites `packet` to `form` (never past the receiver's cumulative ACK, never below
    /// what was released) with a TSval no older than one released, and queues it.
    fn release(
        &mut self,
        now: Instant,
        mut packet: Vec<u8>,
        form: Form,
        out: &mut VecDeque<Vec<u8>>,
        stats: &mut RpcStats,
    ) {
        let Ok(seg) = segment::parse(&packet) else {
            self.emit(now, packet, 0, out, stats);
            return;
        };
        let before = self.released_ack;
        let mut rw = Rewrite::default();
        let mut to_ack = None;
        if let Some(wire_ack) = seg.ack {
            let own = seq::extend(wire_ack, self.meta.cum());
            let cum = self.meta.cum();
            let to = match form {
                Form::Resequenced(to) => to,
                Form::Original => own.max(cum),
            }
            .clamp(self.released_ack.min(cum), cum);
            to_ack = Some(to);
            self.released_ack = self.released_ack.max(to);
            if to != own {
                rw.ack = Some(seq::wire(to));
            }
            rw.strip_sack = matches!(form, Form::Resequenced(_)) && seg.options.sack_at.is_some();
            if form == Form::Original && seg.options.sack_at.is_some() {
                rw.sack_blocks = self.clip_sack(now, &seg, stats);
            }
        }
        if let Some((tsval, _)) = seg.options.timestamps {
            match self.released_tsval {
                Some(top) if (tsval.wrapping_sub(top) as i32) < 0 => rw.tsval = Some(top),
                _ => self.released_tsval = Some(tsval),
            }
        }
        // A cumulative ACK that jumps far (a hole filled with no duplicates held behind
        // it, or the full ACK ending LOSS) goes out as a paced series of ACKs, each
        // acknowledging at most `SPLIT_BYTES` more: released at once it would let the
        // sender send a whole window at once into the links' queues. The paper paces the
        // held ACKs only (Algorithm 2, line 6); this paces the same jump when none are
        // held.
        let mut at = before;
        if let Some(to) = to_ack.filter(|_| self.paces()) {
            while to > at + SPLIT_BYTES {
                at += SPLIT_BYTES;
                let mut copy = packet.clone();
                let step = Rewrite {
                    ack: Some(seq::wire(at)),
                    ..rw
                };
                segment::rewrite(&mut copy, &seg, step);
                stats.split_acks += 1;
                self.emit(now, copy, SPLIT_BYTES, out, stats);
            }
        }
        segment::rewrite(&mut packet, &seg, rw);
        let acked = self.released_ack.saturating_sub(at);
        self.emit(now, packet, acked, out, stats);
    }

    /// Whether released ACKs go through the pacer now.
    fn paces(&self) -> bool {
        self.pace_bps.is_some() && self.state == RpcState::Normal
    }

    /// `seg`'s SACK blocks cut at the lowest segment still in flight, if that changes
    /// them (D-SACK blocks, below the cumulative ACK, stay).
    fn clip_sack(
        &self,
        now: Instant,
        seg: &Segment,
        stats: &mut RpcStats,
    ) -> Option<([SackBlock; MAX_SACK_BLOCKS], usize)> {
        // Overdue: older than its link's hRTT and a quarter more (RACK's reordering
        // window, RFC 8985 §6.2).
        let on_time = |r: &Record| {
            let srtt = self.srtts.get(usize::from(r.link)).copied().flatten();
            srtt.is_none_or(|rtt| now.saturating_duration_since(r.sent_at) <= rtt * 5 / 4)
        };
        let clip = self.meta.first_in_flight(on_time)?;
        let cum = self.meta.cum();
        let mut blocks = [SackBlock::default(); MAX_SACK_BLOCKS];
        let mut n = 0;
        let mut changed = false;
        for b in seg.options.sack() {
            let (left, right) = (seq::extend(b.left, cum), seq::extend(b.right, cum));
            if left >= clip {
                changed = true;
                continue;
            }
            if right > clip {
                changed = true;
            }
            blocks[n] = SackBlock {
                left: b.left,
                right: seq::wire(right.min(clip)),
            };
            n += 1;
        }
        if !changed {
            return None;
        }
        stats.sack_clipped += 1;
        Some((blocks, n))
    }
}

/// The most a released ACK acknowledges beyond the one before it when paced: two
/// full-sized segments, as a delayed ACK does.
const SPLIT_BYTES: u64 = 2 * 1460;

/// How long `bytes` take at `bps`.
fn pace_gap(bytes: u64, bps: f64) -> Duration {
    Duration::from_secs_f64((bytes as f64 * 8.0 / bps).clamp(0.0, 1.0))
}

fn longest_hold(now: Instant, held: &[Held]) -> Duration {
    held.iter()
        .map(|h| now.saturating_duration_since(h.held_at))
        .max()
        .unwrap_or(Duration::ZERO)
}

fn note_hold(stats: &mut RpcStats, now: Instant, held: &[Held]) {
    stats.longest_hold = stats.longest_hold.max(longest_hold(now, held));
}
