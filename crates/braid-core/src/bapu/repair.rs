//! Local repair at the gateway for Proactive-ACK (braid's addition to BaPu §3.3, after
//! Snoop's local retransmission).
//!
//! Proactive-ACK acknowledges data to the sender in the receiver's name once an AP holds
//! it, so the sender forgets it. If the receiver then drops a segment the gateway gave it
//! (a receiver prunes its out-of-order queue under memory pressure; the simulator's
//! receiver keeps at most 64 out-of-order ranges), nobody would send it again and the
//! receiver's window would close for good. So the gateway keeps each segment it
//! delivered until the receiver's own cumulative ACK passes it, and when the receiver
//! keeps asking for a segment the gateway delivered a while ago (duplicate ACKs for its
//! start), it delivers that segment again. What the gateway never delivered it cannot
//! repair: that is a hole on the air, which Proactive-ACK's duplicate ACKs to the sender
//! handle.

use std::collections::BTreeMap;
use std::time::Duration;

use super::unwrap_seq as unwrap;
use crate::flow::parse::FlowKey;
use crate::rpc::segment;
use crate::Instant;

/// Settings of the repair buffer.
#[derive(Clone, Debug)]
pub struct RepairConfig {
    /// Duplicate ACKs for one sequence number before the segment there is delivered again.
    pub dupacks: u32,
    /// A segment is delivered again only this long after its last delivery (the LAN's
    /// round trip is far shorter; ACKs sent before it arrived do not count).
    pub min_age: Duration,
    /// Bytes kept at most (the receiver's window is the natural bound); the highest
    /// sequence numbers go first beyond it.
    pub max_bytes: usize,
}

impl Default for RepairConfig {
    fn default() -> Self {
        RepairConfig {
            dupacks: 3,
            min_age: Duration::from_millis(20),
            max_bytes: 8 << 20,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RepairStats {
    /// Segments delivered again on the receiver's duplicate ACKs.
    pub resent: u64,
    /// Segments let go beyond `max_bytes`.
    pub evicted: u64,
}

/// The gateway's copies of one TCP flow's delivered segments.
pub struct Repair {
    cfg: RepairConfig,
    flow: Option<FlowKey>,
    /// Receiver's cumulative ACK, unwrapped (0 until the first ACK).
    acked: u64,
    reference: Option<u64>,
    /// Start (unwrapped) -> (end, last delivered, packet).
    segs: BTreeMap<u64, (u64, Instant, Vec<u8>)>,
    bytes: usize,
    dups: u32,
    stats: RepairStats,
}

impl Repair {
    pub fn new(cfg: RepairConfig) -> Repair {
        Repair {
            cfg,
            flow: None,
            acked: 0,
            reference: None,
            segs: BTreeMap::new(),
            bytes: 0,
            dups: 0,
            stats: RepairStats::default(),
        }
    }

    pub fn stats(&self) -> &RepairStats {
        &self.stats
    }

    /// A data packet the gateway delivers to the receiver.
    pub fn on_delivered(&mut self, now: Instant, packet: &[u8]) {
        let Ok(seg) = segment::parse(packet) else {
            return;
        };
        if seg.payload_len == 0 {
            return;
        }
        let flow = *self.flow.get_or_insert(seg.key);
        if seg.key != flow {
            return;
        }
        let reference = *self.reference.get_or_insert(u64::from(seg.seq));
        let start = unwrap(self.acked.max(reference), seg.seq);
        let end = start + u64::from(seg.payload_len);
        if self.acked != 0 && end <= self.acked {
            return;
        }
        if let Some(old) = self.segs.insert(start, (end, now, packet.to_vec())) {
            self.bytes -= old.2.len();
        }
        self.bytes += packet.len();
        while self.bytes > self.cfg.max_bytes {
            let Some((_, (_, _, p))) = self.segs.pop_last() else {
                break;
            };
            self.bytes -= p.len();
            self.stats.evicted += 1;
        }
    }

    /// A packet from the receiver towards the sender: a segment to deliver to the receiver
    /// again, if its ACKs keep asking for one the gateway delivered.
    pub fn on_receiver_ack(&mut self, now: Instant, packet: &[u8]) -> Option<Vec<u8>> {
        let seg = segment::parse(packet).ok()?;
        let flow = self.flow?;
        if seg.key != flow.reversed() || seg.syn() || seg.rst() {
            return None;
        }
        let reference = self.reference?;
        let ack = unwrap(self.acked.max(reference), seg.ack?);
        if ack > self.acked {
            self.acked = ack;
            self.dups = 0;
            while let Some(e) = self.segs.first_entry() {
                if e.get().0 > ack {
                    break;
                }
                self.bytes -= e.remove().2.len();
            }
            return None;
        }
        if ack < self.acked || seg.payload_len > 0 {
            return None;
        }
        self.dups += 1;
        if self.dups < self.cfg.dupacks {
            return None;
        }
        let (_, (end, at, packet)) = self.segs.range_mut(..=ack).next_back()?;
        if *end <= ack || now.saturating_duration_since(*at) < self.cfg.min_age {
            return None;
        }
        *at = now;
        self.stats.resent += 1;
        Some(packet.clone())
    }
}
