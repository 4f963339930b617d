//! Retransmission driven by receiver feedback, PluriBus §6.4.1's baseline ("retransmits
//! lost packets based on receiver feedback"; §3.2 explains why it is slow: a loss costs
//! about 1.5 inter-proxy RTTs to repair).
//!
//! Feedback: the receiver watches the data sequence. A gap that persists for `nack_delay`
//! (reordering between paths is not loss) is reported in a Nack (docs/wire.md) on the
//! fastest path; a packet still missing about one RTT after its nack is nacked again, up to
//! `max_nacks` times. The sender keeps its recently sent packets (bounded, and for a few
//! RTTs) and sends nacked ones again as ordinary data, on the fastest path. Acks (the
//! highest data sequence received) cannot drive it alone: they say nothing of holes below.

use std::collections::VecDeque;
use std::time::Duration;

use braid_wire::{Message, Nack, MAX_BITMAP_LEN};

use super::window::{round_trip, seq_le, Window, DEFAULT_RTT};
use super::xor::BITMAP_REACH;
use super::{fastest_path, LossRecovery, RecoveredSink, Repair, RepairBody};
use crate::path::Path;
use crate::stats::LossRecoveryStats;
use crate::{Instant, RetransmitParams};

/// Sent packets kept for retransmission at most.
const MAX_SENT: usize = 1024;
/// Retransmissions waiting at most.
const MAX_PENDING: usize = 1024;
/// Missing packets tracked at most.
const MAX_MISSING: usize = 1024;

#[derive(Clone, Copy, Debug)]
struct Missing {
    seq: u32,
    due: Instant,
    nacks: u32,
}

/// Nack-driven retransmission.
pub struct Retransmit {
    nack_delay: Duration,
    max_nacks: u32,
    sent: Window,
    pending: VecDeque<u32>,
    /// Receiver: highest data sequence seen, and the holes below it, in sequence order.
    highest: Option<u32>,
    missing: VecDeque<Missing>,
    bitmap: [u8; MAX_BITMAP_LEN],
    stats: LossRecoveryStats,
}

impl Retransmit {
    pub fn new(p: RetransmitParams) -> Retransmit {
        Retransmit {
            nack_delay: Duration::from_secs_f64(p.nack_delay_ms.max(0.0) / 1e3),
            max_nacks: p.max_nacks.max(1),
            sent: Window::new(MAX_SENT),
            pending: VecDeque::new(),
            highest: None,
            missing: VecDeque::new(),
            bitmap: [0; MAX_BITMAP_LEN],
            stats: LossRecoveryStats::default(),
        }
    }

    /// Packets the receiver side currently misses (for tests).
    pub fn missing(&self) -> impl Iterator<Item = u32> + '_ {
        self.missing.iter().map(|m| m.seq)
    }

    fn on_arrival(&mut self, now: Instant, seq: u32) {
        let Some(h) = self.highest else {
            self.highest = Some(seq);
            return;
        };
        if seq_le(seq, h) {
            if let Some(i) = self.missing.iter().position(|m| m.seq == seq) {
                self.missing.remove(i);
            }
            return;
        }
        let gap = seq.wrapping_sub(h).wrapping_sub(1);
        let skip = gap.saturating_sub(MAX_MISSING as u32);
        self.stats.nack_gave_up += u64::from(skip);
        for k in skip..gap {
            if self.missing.len() >= MAX_MISSING {
                self.missing.pop_front();
                self.stats.nack_gave_up += 1;
            }
            self.missing.push_back(Missing {
                seq: h.wrapping_add(1 + k),
                due: now + self.nack_delay,
                nacks: 0,
            });
        }
        self.highest = Some(seq);
    }

    /// Builds a nack of every missing packet due at `now`, from the lowest, within the
    /// bitmap's reach; returns its first sequence number and bitmap length.
    fn build_nack(&mut self, now: Instant, rtt: Duration) -> Option<(u32, usize)> {
        let max = self.max_nacks;
        let before = self.missing.len();
        self.missing.retain(|m| m.nacks < max || m.due > now);
        self.stats.nack_gave_up += (before - self.missing.len()) as u64;
        let first = self.missing.iter().find(|m| m.due <= now)?.seq;
        let mut len = 0;
        self.bitmap = [0; MAX_BITMAP_LEN];
        let again = now + rtt + rtt / 4 + self.nack_delay;
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
        let path = fastest_path(now, paths)?.id();
        if let Some((first, len)) = self.build_nack(now, round_trip(paths)) {
            self.stats.nacks_sent += 1;
            return Some(Repair {
                path,
                body: RepairBody::Nack(Nack {
                    first,
                    bitmap: &self.bitmap[..len],
                }),
            });
        }
        while let Some(seq) = self.pending.pop_front() {
            if self.sent.find(seq).is_none() {
                self.stats.nacked_unavailable += 1;
                continue;
            }
            self.stats.retransmissions_sent += 1;
            let payload = self.sent.find(seq)?;
            return Some(Repair {
                path,
                body: RepairBody::Retransmit { seq, payload },
            });
        }
        None
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
        fastest_path(now, paths)?;
        self.missing
            .iter()
            .map(|m| m.due)
            .filter(|&t| t > now)
            .min()
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
