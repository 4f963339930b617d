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
//! - A held ACK that reaches `max_hold` goes out the same way (a bound the paper lacks).
//!
//! Never does a released ACK acknowledge more than the receiver has. TSval is raised to
//! the highest already released on the flow, since re-sequenced ACKs may carry older
//! ones and the sender's PAWS check (RFC 7323 §5) drops those. An ACK older than the
//! receiver's cumulative ACK (reordered on the way back) is read and then dropped if it
//! is a bare ACK, since a newer one was already released.

use std::collections::VecDeque;
use std::time::Duration;

use super::loss::{LossDetector, Lost};
use super::meta::{Identified, MetaState};
use super::resequence::{Held, Resequencer};
use super::segment::{self, Rewrite, Segment};
use super::seq;
use super::share::LinkShare;
use super::state::{Input, RpcState};
use super::{LossEvent, RpcConfig, RpcStats};
use crate::flow::parse::FlowKey;
use crate::time::Instant;
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
    /// The end of the highest segment any ACK reported.
    highest_reported: u64,
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
            reseq: Resequencer::new(cfg.max_hold, cfg.max_held),
            state: RpcState::Normal,
            recovery_point: base,
            released_ack: base,
            released_tsval: None,
            last_active: now,
            ids: Vec::new(),
            lost: Vec::new(),
            detect_losses: cfg.detect_losses,
            highest_reported: base,
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

    /// A data segment sent on `link`.
    pub fn on_data(&mut self, now: Instant, link: PathId, seg: &Segment) {
        self.last_active = now;
        let len = u64::from(seg.payload_len) + u64::from(seg.syn()) + u64::from(seg.fin());
        let start = seq::extend(seg.seq, self.meta.highest_sent());
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
            sink.share.on_delivered(now, d.link, d.end - d.start);
        }
        if self.detect_losses {
            self.loss.detect(&mut self.meta, &self.ids, &mut self.lost);
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
            for l in &self.lost {
                self.recovery_point = self.recovery_point.max(l.record.end);
                sink.losses.push_back(LossEvent {
                    flow: self.key,
                    link: l.record.link,
                    seq: seq::wire(l.start),
                    len: (l.record.end - l.start) as u32,
                    share: sink.share.share(now, l.record.link),
                    at: now,
                });
            }
            sink.stats.losses += self.lost.len() as u64;
            self.state = self.state.on(Input::LossDetected).to;
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
                self.release(h.packet, Form::Original, sink.release);
            }
        }
        if ack < old_cum && seg.is_pure_ack() {
            sink.stats.stale_dropped += 1;
            return;
        }
        if self.state != RpcState::Normal || before != RpcState::Normal {
            // LOSS, or leaving it on this ACK: pass it on.
            sink.stats.passed += 1;
            self.release(packet, Form::Original, sink.release);
            return;
        }
        let key = self.ids.iter().map(|d| d.end).max().unwrap_or(old_cum);
        if !advanced {
            if !seg.is_pure_ack() {
                sink.stats.passed += 1;
                self.release(packet, Form::Resequenced(self.meta.cum()), sink.release);
                return;
            }
            sink.stats.held += 1;
            let pushed = self.reseq.hold(Held {
                packet,
                key,
                held_at: now,
            });
            if let Some(h) = pushed {
                sink.stats.released_on_overflow += 1;
                note_hold(sink.stats, now, std::slice::from_ref(&h));
                self.release(h.packet, Form::Original, sink.release);
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
        });
        batch.sort_by_key(|h| h.key);
        let n = batch.len();
        for (i, h) in batch.into_iter().enumerate() {
            let to = if i + 1 == n { ack } else { h.key.min(ack) };
            self.release(h.packet, Form::Resequenced(to), sink.release);
        }
    }

    /// Releases the ACKs held for `max_hold` by `now`: how many, and the longest held.
    pub(super) fn on_timeout(
        &mut self,
        now: Instant,
        release: &mut VecDeque<Vec<u8>>,
    ) -> (u64, Duration) {
        let mut expired = Vec::new();
        self.reseq.take_expired(now, &mut expired);
        let n = expired.len() as u64;
        let longest = longest_hold(now, &expired);
        for h in expired {
            self.release(h.packet, Form::Original, release);
        }
        (n, longest)
    }

    /// Releases every held ACK (the flow is going away).
    pub(super) fn drain(&mut self, release: &mut VecDeque<Vec<u8>>) {
        let mut all = Vec::new();
        self.reseq.take_all(&mut all);
        for h in all {
            self.release(h.packet, Form::Original, release);
        }
    }

    /// The highest cumulative ACK released (as on the wire) and the highest TSval.
    pub fn released(&self) -> (u32, Option<u32>) {
        (seq::wire(self.released_ack), self.released_tsval)
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.reseq.deadline()
    }

    /// Rewrites `packet` to `form` (never past the receiver's cumulative ACK, never below
    /// what was released) with a TSval no older than one released, and queues it.
    fn release(&mut self, mut packet: Vec<u8>, form: Form, out: &mut VecDeque<Vec<u8>>) {
        let Ok(seg) = segment::parse(&packet) else {
            out.push_back(packet);
            return;
        };
        let mut rw = Rewrite::default();
        if let Some(wire_ack) = seg.ack {
            let own = seq::extend(wire_ack, self.meta.cum());
            let cum = self.meta.cum();
            let to = match form {
                Form::Resequenced(to) => to,
                Form::Original => own.max(cum),
            }
            .clamp(self.released_ack.min(cum), cum);
            self.released_ack = self.released_ack.max(to);
            if to != own {
                rw.ack = Some(seq::wire(to));
            }
            rw.strip_sack = matches!(form, Form::Resequenced(_)) && seg.options.sack_at.is_some();
        }
        if let Some((tsval, _)) = seg.options.timestamps {
            match self.released_tsval {
                Some(top) if (tsval.wrapping_sub(top) as i32) < 0 => rw.tsval = Some(top),
                _ => self.released_tsval = Some(tsval),
            }
        }
        segment::rewrite(&mut packet, &seg, rw);
        out.push_back(packet);
    }
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
