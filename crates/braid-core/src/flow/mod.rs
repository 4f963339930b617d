//! Inner flows: which 5-tuple a packet belongs to, and a bounded table of the flows this
//! end sends, for flow-level policies (MinConnPath, PluriBus §6.1; hash-by-flow), traffic
//! classes and the detection of inner TCP retransmissions (PRISM §4.2 Rule 1).
//!
//! - [`parse`]: reading the 5-tuple, DSCP and TCP header of an inner packet.
//!
//! The table is bounded (`max_flows`); entries idle for `idle_timeout` are swept, and when
//! the table is still full flows that have ended are dropped, and then a new flow is not
//! tracked (it is scheduled as a packet without a flow, and counted).
//!
//! A flow counts as *active* from its first packet until it ends, or until it has been
//! idle (no packet either way) for [`ACTIVE_IDLE`]: the "active connections" MinConnPath
//! balances (PluriBus §6.1: "a new connection is mapped to the path with the minimum number
//! of active connections"). A TCP connection ends when a FIN has been seen in each
//! direction (both ends closed; what is left is the last ACK), or at an RST in either
//! direction; a SYN on the same 5-tuple starts it again. The entry of an ended flow stays
//! until it idles out (its last ACK and any retransmitted FIN keep their path and do not
//! open a new flow), but it no longer counts. A connection is not held active through
//! TIME_WAIT as a connection tracker does: TIME_WAIT is one end's guard against stray
//! segments, not traffic, and counting it would balance the flows *started* in the last
//! seconds rather than those open now.
//! Each entry also remembers the path its reverse direction last arrived on, so that a
//! connection-level policy can answer on the path the connection came in on.
//!
//! The table hashes 5-tuples with aHash keyed by [`crate::Config::flow_hash_seed`], a seed
//! from outside the engine (the daemons draw it from the OS random source, the simulator
//! from the scenario seed). With a hash whose keys are known, flows that collide in the
//! table could be crafted on purpose to make every lookup slow (hash flooding); with
//! secret keys they cannot be told in advance. The same keys give the per-flow hash
//! ([`FlowMeta::hash`]) that hash-based placement uses, so that which path a flow lands on
//! is not predictable from outside either. aHash's output for given keys is stable within
//! one build (the simulator repeats exactly) but may differ between builds for different
//! CPU features (it uses AES instructions when compiled with them).

pub mod parse;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash};
use std::time::Duration;

use crate::{Instant, PathId};

pub use parse::{FlowKey, PacketInfo, TcpInfo};

/// A flow idle this long no longer counts as active.
pub const ACTIVE_IDLE: Duration = Duration::from_secs(5);

/// aHash keyed from the session's `flow_hash_seed` (see the module documentation).
/// Nothing here depends on iteration order.
type Hasher = ahash::RandomState;

/// A flow key with its aHash, worked out once per packet: the table's own lookups reuse
/// it instead of hashing the key again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hashed {
    hash: u64,
    key: FlowKey,
}

impl Hash for Hashed {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// The table's hasher: hands [`Hashed::hash`] through (also for maps keyed by
/// [`FlowTable::key_hash`]).
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else still hashes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The four aHash keys from one 64-bit seed (SplitMix64 steps, so that nearby seeds give
/// unrelated keys).
fn hasher(seed: u64) -> Hasher {
    let mut st = seed;
    let mut next = || {
        st = st.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = st;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    ahash::RandomState::with_seeds(next(), next(), next(), next())
}

/// One tracked flow.
#[derive(Clone, Debug)]
pub struct FlowEntry {
    /// Sequential id, unique for the table's lifetime.
    pub id: u64,
    /// Traffic class index (see [`crate::class`]).
    pub class: usize,
    /// The path a flow-level policy pinned the flow to.
    pub pinned: Option<PathId>,
    /// The path the reverse direction of this flow last arrived on.
    pub inbound: Option<PathId>,
    pub last_seen: Instant,
    /// A FIN was sent (this end closed its direction).
    pub fin_sent: bool,
    /// A FIN arrived from the peer (the reverse direction closed).
    pub fin_received: bool,
    /// An RST went either way.
    pub reset: bool,
    /// Packets of the flow sent so far (saturating).
    pub packets: u32,
    /// For TCP: the highest sequence number sent so far (end of the highest segment).
    snd_max: Option<u32>,
    /// The path of the flow's latest outgoing packet.
    last_path: Option<PathId>,
    /// Until then an earlier packet of the flow may be waiting in the peer's resequencing
    /// buffer (see [`FlowTable::deliver_on_arrival`]).
    ordered_until: Instant,
}

impl FlowEntry {
    /// The connection has ended: FINs both ways, or an RST.
    pub fn ended(&self) -> bool {
        self.reset || (self.fin_sent && self.fin_received)
    }

    fn is_active(&self, now: Instant) -> bool {
        !self.ended() && now.saturating_duration_since(self.last_seen) < ACTIVE_IDLE
    }

    /// Records the flags of a TCP segment of the flow, sent (`outgoing`) or received.
    fn note_tcp(&mut self, t: &TcpInfo, outgoing: bool) {
        if t.syn && !t.fin && !t.rst && self.ended() {
            // A new connection on the same 5-tuple.
            self.fin_sent = false;
            self.fin_received = false;
        }
        if t.rst {
            self.reset = true;
        } else if t.syn {
            self.reset = false;
        }
        if t.fin {
            if outgoing {
                self.fin_sent = true;
            } else {
                self.fin_received = true;
            }
        }
    }

    fn fresh(id: u64, class: usize, now: Instant) -> FlowEntry {
        FlowEntry {
            id,
            class,
            pinned: None,
            inbound: None,
            last_seen: now,
            fin_sent: false,
            fin_received: false,
            reset: false,
            packets: 0,
            snd_max: None,
            last_path: None,
            ordered_until: Instant::ZERO,
        }
    }
}

/// Whether `info` is a TCP segment with data that starts below data its flow already sent
/// (an inner retransmission, PRISM §4.2 Rule 1).
fn starts_below_sent(e: &FlowEntry, info: &PacketInfo) -> bool {
    info.tcp.is_some_and(|t| {
        t.payload_len > 0
            && e.snd_max
                .is_some_and(|max| (t.seq.wrapping_sub(max) as i32) < 0)
    })
}

/// What the table says about one outgoing packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowMeta {
    pub id: u64,
    pub class: usize,
    /// A hash of the 5-tuple, stable for the session (keyed by its `flow_hash_seed`), for
    /// hash-based placement.
    pub hash: u64,
    /// First packet of the flow seen here.
    pub new: bool,
    pub pinned: Option<PathId>,
    pub inbound: Option<PathId>,
    /// A TCP segment that starts below data already sent: an inner retransmission.
    pub retransmission: bool,
    /// Packets of the flow sent so far, this one included (saturating).
    pub packets: u32,
}

/// Counters of the flow table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlowStats {
    /// Flows tracked now.
    pub tracked: u64,
    /// Flows ever tracked.
    pub created: u64,
    /// Flows swept after idling, or dropped after ending when the table was full.
    pub expired: u64,
    /// Packets of new flows not tracked because the table was full.
    pub table_full: u64,
    /// Inner TCP retransmissions seen.
    pub retransmissions: u64,
}

/// The flows this end sends.
#[derive(Debug)]
pub struct FlowTable {
    map: HashMap<Hashed, FlowEntry, BuildHasherDefault<PassThrough>>,
    keys: Hasher,
    max_flows: usize,
    idle_timeout: Duration,
    next_sweep: Instant,
    next_id: u64,
    stats: FlowStats,
}

impl FlowTable {
    /// A table of at most `max_flows` flows, whose hash is keyed by `hash_seed`.
    pub fn new(max_flows: usize, idle_timeout: Duration, hash_seed: u64) -> FlowTable {
        FlowTable {
            map: HashMap::default(),
            keys: hasher(hash_seed),
            max_flows: max_flows.max(1),
            idle_timeout,
            next_sweep: Instant::ZERO,
            next_id: 0,
            stats: FlowStats::default(),
        }
    }

    pub fn stats(&self) -> FlowStats {
        FlowStats {
            tracked: self.map.len() as u64,
            ..self.stats
        }
    }

    fn hashed(&self, key: FlowKey) -> Hashed {
        Hashed {
            hash: self.key_hash(key),
            key,
        }
    }

    /// The table's keyed hash of `key` (seeded by `flow_hash_seed`).
    pub(crate) fn key_hash(&self, key: FlowKey) -> u64 {
        self.keys.hash_one(key)
    }

    fn sweep(&mut self, now: Instant) {
        let idle = self.idle_timeout;
        let before = self.map.len();
        self.map
            .retain(|_, e| now.saturating_duration_since(e.last_seen) < idle);
        self.stats.expired += (before - self.map.len()) as u64;
        self.next_sweep = now + idle / 4;
    }

    /// Whether a new flow fits: idle flows are swept, then flows that have ended dropped.
    fn make_room(&mut self, now: Instant) -> bool {
        if self.map.len() < self.max_flows {
            return true;
        }
        self.sweep(now);
        if self.map.len() >= self.max_flows {
            let before = self.map.len();
            self.map.retain(|_, e| !e.ended());
            self.stats.expired += (before - self.map.len()) as u64;
        }
        self.map.len() < self.max_flows
    }

    /// Whether a lookup at `now` would first sweep idle flows.
    pub fn sweep_due(&self, now: Instant) -> bool {
        now >= self.next_sweep
    }

    /// Records an outgoing packet as sent: [`FlowTable::lookup_outgoing`] then
    /// [`FlowTable::record_sent`]. `None` when the table is full and the flow is new.
    pub fn observe_outgoing(
        &mut self,
        now: Instant,
        info: &PacketInfo,
        classify: impl FnOnce(&PacketInfo) -> usize,
    ) -> Option<FlowMeta> {
        let meta = self.lookup_outgoing(now, info, classify)?;
        self.record_sent(now, info, &meta);
        Some(meta)
    }

    /// What the table says about an outgoing packet about to be scheduled, without
    /// counting it: a packet the scheduler holds is looked up again on every poll, and is
    /// counted once, when it is sent ([`FlowTable::record_sent`]). A new flow gets its
    /// entry here (`classify` gives its class). `None` when the table is full and the flow
    /// is new.
    pub fn lookup_outgoing(
        &mut self,
        now: Instant,
        info: &PacketInfo,
        classify: impl FnOnce(&PacketInfo) -> usize,
    ) -> Option<FlowMeta> {
        if now >= self.next_sweep {
            self.sweep(now);
        }
        let key = self.hashed(info.key);
        let hash = key.hash;
        let new = !self.map.contains_key(&key);
        if new && !self.make_room(now) {
            self.stats.table_full += 1;
            return None;
        }
        if new {
            self.stats.created += 1;
        }
        let id = self.next_id;
        let e = self
            .map
            .entry(key)
            .or_insert_with(|| FlowEntry::fresh(id, classify(info), now));
        if new {
            self.next_id += 1;
        }
        Some(FlowMeta {
            id: e.id,
            class: e.class,
            hash,
            new,
            pinned: e.pinned,
            inbound: e.inbound,
            retransmission: starts_below_sent(e, info),
            packets: e.packets.saturating_add(1),
        })
    }

    /// Counts the packet `info` of the flow `flow` (from [`FlowTable::lookup_outgoing`])
    /// as sent: the flow is active, its packet count grows, and for TCP its flags and
    /// highest sequence sent are noted and an inner retransmission counted.
    pub fn record_sent(&mut self, now: Instant, info: &PacketInfo, flow: &FlowMeta) {
        let key = Hashed {
            hash: flow.hash,
            key: info.key,
        };
        let Some(e) = self.map.get_mut(&key) else {
            return;
        };
        e.last_seen = now;
        e.packets = e.packets.saturating_add(1);
        if let Some(t) = info.tcp {
            if starts_below_sent(e, info) {
                self.stats.retransmissions += 1;
            }
            e.note_tcp(&t, true);
            let end = t
                .seq
                .wrapping_add(t.payload_len)
                .wrapping_add(u32::from(t.syn) + u32::from(t.fin));
            if e.snd_max
                .is_none_or(|max| (end.wrapping_sub(max) as i32) > 0)
            {
                e.snd_max = Some(end);
            }
        }
    }

    /// Without recording anything: packets the flow of `info` has sent so far, and whether
    /// `info` starts below data the flow already sent (an inner retransmission). `None`
    /// for a flow not tracked.
    pub fn peek(&self, info: &PacketInfo) -> Option<(u32, bool)> {
        let e = self.map.get(&self.hashed(info.key))?;
        Some((e.packets, starts_below_sent(e, info)))
    }

    /// Pins a flow to a path (a flow-level policy's decision).
    pub fn pin(&mut self, key: &FlowKey, path: PathId) {
        if let Some(e) = self.map.get_mut(&self.hashed(*key)) {
            e.pinned = Some(path);
        }
    }

    /// Records that a packet of the flow `key` arrived from the peer on `path`: the reverse
    /// flow (the one this end sends) learns its inbound path. Only already tracked flows and,
    /// space permitting, new ones are updated.
    /// Per-flow resequencing ([`crate::Config::flow_order`]): whether the packet of `key`
    /// just observed and now sent on `path` may be delivered on arrival, and records the
    /// send. It may when nothing earlier of its flow can still be on its way or waiting in
    /// the peer's resequencing buffer ahead of it: the flow's previous packet went on the
    /// same path (which keeps its order; were that packet lost, delivering this one is what
    /// the inner TCP would see without a tunnel), and every packet of the flow sent in order
    /// has had time to leave the buffer. A packet sent in order (the flow moved to another
    /// path) keeps the flow in order for `hold`, the longest such a packet can take to
    /// arrive and wait out its hole.
    pub fn deliver_on_arrival(
        &mut self,
        key: &FlowKey,
        now: Instant,
        path: PathId,
        hold: Duration,
    ) -> bool {
        let Some(e) = self.map.get_mut(&self.hashed(*key)) else {
            return false;
        };
        let same_path = e.last_path.is_none_or(|p| p == path);
        let free = same_path && now >= e.ordered_until;
        e.last_path = Some(path);
        if !free {
            e.ordered_until = e.ordered_until.max(now + hold);
        }
        free
    }

    /// Records a packet that arrived from the peer on `path`: the reverse flow (the one
    /// this end sends) learns its inbound path, is active again and, for TCP, notes the
    /// peer's FIN or RST.
    pub fn observe_incoming(&mut self, now: Instant, info: &PacketInfo, path: PathId) {
        self.observe_incoming_from(now, info, path, false);
    }

    /// Like [`FlowTable::observe_incoming`] for a packet the peer resent (a retransmission
    /// or a failover's resend): it took whatever path was fastest, not its flow's, so it
    /// names the flow's inbound path only if none is known yet.
    pub fn observe_resent_incoming(&mut self, now: Instant, info: &PacketInfo, path: PathId) {
        self.observe_incoming_from(now, info, path, true);
    }

    fn observe_incoming_from(
        &mut self,
        now: Instant,
        info: &PacketInfo,
        path: PathId,
        resent: bool,
    ) {
        let rev = self.hashed(info.key.reversed());
        if !self.map.contains_key(&rev) {
            if !self.make_room(now) {
                return;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.stats.created += 1;
            self.map.insert(rev, FlowEntry::fresh(id, 0, now));
        }
        if let Some(e) = self.map.get_mut(&rev) {
            if !resent || e.inbound.is_none() {
                e.inbound = Some(path);
            }
            e.last_seen = now;
            if let Some(t) = info.tcp {
                e.note_tcp(&t, false);
            }
        }
    }

    /// Active flows pinned to each path: `out[i]` for path id `ids[i]`.
    pub fn active_per_path(&self, now: Instant, ids: &[PathId], out: &mut Vec<u32>) {
        out.clear();
        out.resize(ids.len(), 0);
        for e in self.map.values() {
            if let Some(p) = e.pinned {
                if e.is_active(now) {
                    if let Some(i) = ids.iter().position(|&id| id == p) {
                        out[i] += 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
