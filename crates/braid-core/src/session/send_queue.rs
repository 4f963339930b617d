//! The send queue: inner packets waiting for a path, in two lanes served in order.
//!
//! Beyond the papers (PluriBus §4 queues at the sender in one FIFO): braid's schedulers keep
//! the bottlenecks' queues short ([`crate::sched::delay::QUEUE_CAP`]), so when the bond is
//! full the standing queue is this one, and a FIFO makes every flow wait behind the bulk
//! flows' backlog and be refused with them once it takes
//! [`crate::sched::delay::HOLD_MAX`] to drain. A *priority lane* served first takes the
//! packets of a *sparse* flow, one with nothing waiting in the bulk
//! lane and fewer than [`SPARSE_PACKETS`] in this one (fq_codel's new flows, RFC 8290
//! §4.1): a video call, a game, a request, the reverse direction's ACKs, which never build
//! a queue of their own.
//!
//! A flow never overtakes its own queued packets (a packet goes to the priority lane only
//! while its flow has nothing in the bulk lane), so only packets of different flows are
//! reordered; data sequence numbers are given when a packet leaves, so the peer sees no
//! holes. Only the bulk lane is refused when the scheduler reports its backlog full: the
//! priority lane is bounded by [`PRIORITY_LIMIT`]. A failover resend goes to the front of
//! the bulk lane (`session/failover.rs`).
//!
//! The demo's part (c) (a 2 Mbit/s video beside a download while the better link is cut,
//! `braid demo --sim`) and trace-web measured it (docs/benchmarks.md, "Two lanes").

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use crate::flow::{parse, FlowTable, PassThrough};

/// Most packets of one flow in the priority lane. Set on trace-web and the demo's part
/// (c) (docs/benchmarks.md, "Two lanes": 2, 4 and 8 measured).
pub const SPARSE_PACKETS: u32 = 4;
/// Most packets in the priority lane; beyond, packets go to the bulk lane.
pub const PRIORITY_LIMIT: usize = 128;

/// A packet waiting for a path.
struct Queued {
    /// The data sequence number of a failover resend; others get theirs when they leave.
    fixed: Option<u32>,
    packet: Vec<u8>,
    /// Its flow's [`FlowTable::key_hash`], when counted in [`SendQueue::flows`].
    flow: Option<u64>,
    /// Its sender vouched that its IPv4 and TCP checksums hold
    /// ([`crate::Session::send_checked`]).
    checked: bool,
}

/// What one flow has waiting.
#[derive(Clone, Copy, Debug, Default)]
struct FlowQueued {
    priority: u32,
    bulk: u32,
}

/// Where a new packet goes ([`SendQueue::admit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Admission {
    pub(crate) priority: bool,
    flow: Option<u64>,
}

/// The two lanes.
#[derive(Default)]
pub(crate) struct SendQueue {
    priority: VecDeque<Queued>,
    bulk: VecDeque<Queued>,
    /// By [`FlowTable::key_hash`] (already a keyed hash: handed through).
    flows: HashMap<u64, FlowQueued, BuildHasherDefault<PassThrough>>,
}

impl SendQueue {
    /// Which lane `packet` would join (nothing is changed until [`SendQueue::push`]); its
    /// flow is keyed by `flows`' hash.
    pub(crate) fn admit(&self, packet: &[u8], flows: &FlowTable) -> Admission {
        let Some(info) = parse::parse(packet) else {
            return Admission {
                priority: false,
                flow: None,
            };
        };
        let hash = flows.key_hash(info.key);
        let q = self.flows.get(&hash).copied().unwrap_or_default();
        Admission {
            priority: q.bulk == 0
                && q.priority < SPARSE_PACKETS
                && self.priority.len() < PRIORITY_LIMIT,
            flow: Some(hash),
        }
    }

    /// Queues `packet` where [`SendQueue::admit`] said; `checked`: its checksums are known
    /// to hold.
    pub(crate) fn push(&mut self, a: Admission, packet: Vec<u8>, checked: bool) {
        if let Some(hash) = a.flow {
            let q = self.flows.entry(hash).or_default();
            if a.priority {
                q.priority += 1;
            } else {
                q.bulk += 1;
            }
        }
        let lane = if a.priority {
            &mut self.priority
        } else {
            &mut self.bulk
        };
        lane.push_back(Queued {
            fixed: None,
            packet,
            flow: a.flow,
            checked,
        });
    }

    /// Whether a packet admitted as `a` leaves the head of the queue as it is.
    pub(crate) fn keeps_head(&self, a: Admission) -> bool {
        !a.priority || !self.priority.is_empty()
    }

    /// Puts a failover resend, numbered `seq`, at the front of the bulk lane.
    pub(crate) fn push_resend(&mut self, seq: u32, packet: Vec<u8>) {
        self.bulk.push_front(Queued {
            fixed: Some(seq),
            packet,
            flow: None,
            checked: false,
        });
    }

    /// The packet that leaves next: its fixed sequence number (a resend's) and bytes.
    pub(crate) fn front(&self) -> Option<(Option<u32>, &[u8])> {
        let q = self.priority.front().or_else(|| self.bulk.front())?;
        Some((q.fixed, &q.packet))
    }

    /// Takes the packet [`SendQueue::front`] shows, with whether its checksums are known
    /// to hold.
    pub(crate) fn pop_front_checked(&mut self) -> Option<(Option<u32>, Vec<u8>, bool)> {
        let (q, priority) = match self.priority.pop_front() {
            Some(q) => (q, true),
            None => (self.bulk.pop_front()?, false),
        };
        self.uncount(q.flow, priority);
        Some((q.fixed, q.packet, q.checked))
    }

    /// Takes the packet [`SendQueue::front`] shows.
    pub(crate) fn pop_front(&mut self) -> Option<(Option<u32>, Vec<u8>)> {
        self.pop_front_checked().map(|(fixed, p, _)| (fixed, p))
    }

    fn uncount(&mut self, flow: Option<u64>, priority: bool) {
        let Some(hash) = flow else { return };
        if let Entry::Occupied(mut e) = self.flows.entry(hash) {
            let q = e.get_mut();
            if priority {
                q.priority = q.priority.saturating_sub(1);
            } else {
                q.bulk = q.bulk.saturating_sub(1);
            }
            if q.priority == 0 && q.bulk == 0 {
                e.remove();
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.priority.len() + self.bulk.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.priority.is_empty() && self.bulk.is_empty()
    }

    /// Bytes waiting in both lanes.
    pub(crate) fn bytes(&self) -> usize {
        let sum = |l: &VecDeque<Queued>| l.iter().map(|q| q.packet.len()).sum::<usize>();
        sum(&self.priority) + sum(&self.bulk)
    }

    /// Drops the bulk lane's packets for which `drop` says so, front to back (with the
    /// fixed sequence number and bytes); returns them for recycling.
    pub(crate) fn drop_bulk(
        &mut self,
        mut drop: impl FnMut(Option<u32>, &[u8]) -> bool,
    ) -> Vec<Vec<u8>> {
        let mut dropped = Vec::new();
        let mut kept = VecDeque::with_capacity(self.bulk.len());
        while let Some(q) = self.bulk.pop_front() {
            if drop(q.fixed, &q.packet) {
                self.uncount(q.flow, false);
                dropped.push(q.packet);
            } else {
                kept.push_back(q);
            }
        }
        self.bulk = kept;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::flow::tests::tcp as segment;

    fn tcp(port: u16, seq: u32, len: usize) -> Vec<u8> {
        segment(port, seq, 0x10, len)
    }

    fn push(q: &mut SendQueue, p: Vec<u8>) -> bool {
        let a = q.admit(
            &p,
            &FlowTable::new(64, std::time::Duration::from_secs(60), 7),
        );
        q.push(a, p, false);
        a.priority
    }

    fn pop_port(q: &mut SendQueue) -> (u16, u32) {
        let (_, p) = q.pop_front().unwrap();
        let info = parse::parse(&p).unwrap();
        (info.key.src_port, info.tcp.unwrap().seq)
    }

    #[test]
    fn a_sparse_flow_goes_ahead_of_a_backlog_and_a_flow_keeps_its_order() {
        let mut q = SendQueue::default();
        // A bulk flow: its first SPARSE_PACKETS go to the priority lane, the rest wait.
        for i in 0..20 {
            let prio = push(&mut q, tcp(1, 1000 * i, 1000));
            assert_eq!(prio, i < SPARSE_PACKETS, "{i}");
        }
        // A sparse flow's packet goes ahead of the bulk flow's backlog.
        assert!(push(&mut q, tcp(2, 5, 100)));
        for i in 0..SPARSE_PACKETS {
            assert_eq!(pop_port(&mut q), (1, 1000 * i));
        }
        assert_eq!(pop_port(&mut q), (2, 5));
        // The bulk flow's new data never passes its own queued data.
        assert!(!push(&mut q, tcp(1, 20_000, 1000)));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop_front())
            .map(|(_, p)| parse::parse(&p).unwrap().tcp.unwrap().seq)
            .collect();
        assert_eq!(
            order,
            (SPARSE_PACKETS..=20).map(|i| 1000 * i).collect::<Vec<_>>()
        );
        assert!(q.is_empty());
        assert!(q.flows.is_empty(), "counts return to zero");
    }

    #[test]
    fn a_flow_with_a_backlog_stays_in_the_bulk_lane() {
        let mut q = SendQueue::default();
        for i in 0..20 {
            push(&mut q, tcp(1, 1000 * i, 1000));
        }
        for _ in 0..SPARSE_PACKETS {
            q.pop_front();
        }
        // Its retransmission waits behind its queued data like any of its packets (see
        // docs/benchmarks.md: retransmissions ahead of the backlog cost the bulk figures).
        assert!(!push(&mut q, tcp(1, 3000, 1000)));
        assert_eq!(pop_port(&mut q), (1, 1000 * SPARSE_PACKETS));
        // Once its backlog is gone, it is sparse again.
        while q.pop_front().is_some() {}
        assert!(push(&mut q, tcp(1, 21_000, 1000)));
    }

    #[test]
    fn the_priority_lane_is_bounded_and_resends_lead_the_bulk_lane() {
        let mut q = SendQueue::default();
        let admitted = (0..PRIORITY_LIMIT as u16 + 10)
            .filter(|&port| push(&mut q, tcp(port + 1, 0, 10)))
            .count();
        assert_eq!(admitted, PRIORITY_LIMIT);
        q.push_resend(7, vec![1, 2, 3]);
        for _ in 0..PRIORITY_LIMIT {
            assert_eq!(q.pop_front().unwrap().0, None);
        }
        assert_eq!(q.pop_front().unwrap(), (Some(7), vec![1, 2, 3]));
        // Not IP: bulk lane.
        assert!(!push(&mut q, vec![0u8; 10]));
        let dropped = q.drop_bulk(|fixed, _| fixed.is_none());
        assert_eq!(dropped.len(), 10 + 1);
        assert!(q.is_empty() && q.flows.is_empty());
    }
}
