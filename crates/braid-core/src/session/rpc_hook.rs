//! `reordering = "rpc" | "none"` (see [`crate::Reordering`]): data goes out marked for
//! delivery on arrival, and with `rpc` the striping end runs PRISM's Reverse Path
//! Controller ([`crate::rpc`], §5-6) on the inner TCP packets it delivers (the ACKs of the
//! flows it stripes): it holds and re-sequences the duplicates that striping causes, sends
//! the sender a negative ACK for each loss it detects from the scheduling history, and
//! tells the schedulers which link lost it (ADAS halves that link's weight, §4.2.3).
//!
//! With the default `resequence` none of this runs: every hook below is a no-op.

use std::collections::{HashMap, VecDeque};

use crate::rpc::{segment, Rpc, RpcConfig, RpcStats, SentSegment};
use crate::{Instant, Reordering};

use super::Session;

/// Data packets whose segment is remembered for braid's resends of them: more than the
/// loss recovery keeps to resend (4 RTTs, at least 1 s; 8 s of fig6a's 2.4 Mbit/s).
const CARRIED: usize = 8192;

/// The Reverse Path Controller of one session.
pub(super) struct RpcHook {
    rpc: Rpc,
    /// The TCP segment each recent data packet carried, by braid sequence number: braid's
    /// resends go out in compressed form, which RPC cannot read.
    carried: HashMap<u32, SentSegment>,
    order: VecDeque<u32>,
}

impl RpcHook {
    fn remember(&mut self, seq: u32, s: SentSegment) {
        if self.carried.insert(seq, s).is_none() {
            self.order.push_back(seq);
        }
        while self.order.len() > CARRIED {
            if let Some(old) = self.order.pop_front() {
                self.carried.remove(&old);
            }
        }
    }
}

impl RpcHook {
    /// The controller `reordering` asks for, if any.
    pub(super) fn build(reordering: Reordering) -> Option<RpcHook> {
        let full = match reordering {
            Reordering::Rpc => true,
            Reordering::AckResequencing => false,
            Reordering::Resequence | Reordering::None => return None,
        };
        Some(RpcHook {
            rpc: Rpc::new(RpcConfig {
                nack: full,
                detect_losses: full,
                ..RpcConfig::default()
            }),
            carried: HashMap::new(),
            order: VecDeque::new(),
        })
    }
}

impl Session {
    /// Data packet `seq` leaves on the path at position `pi`: RPC records which link
    /// carries it (a resend of `seq`, maybe compressed, as a resend of its segment).
    /// Returns whether it goes marked for delivery on arrival: everything but bare TCP
    /// ACKs does. ACKs stay in order, since RPC reads each link's losses from the order in
    /// which the receiver reports segments; an ACK overtaken on the way back would make the
    /// segments it reports look lost.
    pub(super) fn rpc_on_data(
        &mut self,
        now: Instant,
        pi: usize,
        seq: u32,
        packet: &[u8],
        unordered: bool,
    ) -> bool {
        if self.config.reordering == Reordering::Resequence {
            return unordered;
        }
        if let Some(h) = &mut self.rpc {
            let link = self.paths[pi].id();
            match h.rpc.on_data(now, link, packet) {
                Some(s) => h.remember(seq, s),
                None => self.rpc_on_resent(now, pi, seq),
            }
        }
        let bare_ack = segment::parse(packet).is_ok_and(|s| s.is_pure_ack());
        unordered || !bare_ack
    }

    /// Data packet `seq` is sent again on the path at position `pi` (a repair of the
    /// loss recovery, or a resend in compressed form).
    pub(super) fn rpc_on_resent(&mut self, now: Instant, pi: usize, seq: u32) {
        let Some(h) = &mut self.rpc else {
            return;
        };
        if let Some(s) = h.carried.get(&seq) {
            h.rpc.on_resent(now, self.paths[pi].id(), s);
        }
    }

    /// An inner packet is about to be delivered: RPC may hold it. Returns whether `out`
    /// holds a packet to deliver now (the same one or one RPC released).
    pub(super) fn rpc_filter_delivered(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(h) = &mut self.rpc else {
            return true;
        };
        let now = self.last_now;
        for p in &self.paths {
            let bps = p.capacity_bps();
            h.rpc
                .set_link_bandwidth(p.id(), (bps > 0).then_some(bps as f64));
        }
        h.rpc.on_ack(now, std::mem::take(out));
        self.rpc_losses(now);
        self.rpc_pop_release(out)
    }

    /// The next packet RPC released, into `out`, counted as delivered.
    pub(super) fn rpc_pop_release(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(p) = self.rpc.as_mut().and_then(|h| h.rpc.poll_release()) else {
            return false;
        };
        *out = p;
        self.wake();
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += out.len() as u64;
        true
    }

    /// When a held ACK's bound runs out.
    pub(super) fn rpc_timeout(&self) -> Option<Instant> {
        self.rpc.as_ref().and_then(|h| h.rpc.poll_timeout())
    }

    /// Releases the ACKs held to their bound (they are delivered by the next
    /// [`Session::poll_deliver`]).
    pub(super) fn rpc_handle_timeout(&mut self, now: Instant) {
        if let Some(h) = &mut self.rpc {
            h.rpc.handle_timeout(now);
        }
    }

    /// Each loss RPC detected is a loss on its link for the schedulers' weights.
    fn rpc_losses(&mut self, now: Instant) {
        let Some(h) = &mut self.rpc else {
            return;
        };
        while let Some(ev) = h.rpc.poll_loss() {
            for s in &mut self.scheduling.schedulers {
                s.on_feedback(now, ev.link, 0, 1);
            }
        }
    }

    /// What RPC did, when `reordering = "rpc"`.
    pub fn rpc_stats(&self) -> Option<RpcStats> {
        self.rpc.as_ref().map(|h| h.rpc.stats())
    }

    /// ACKs RPC holds now.
    pub fn rpc_held(&self) -> usize {
        self.rpc.as_ref().map_or(0, |h| h.rpc.held())
    }
}
