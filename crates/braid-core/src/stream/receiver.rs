//! The receiving end: reassembles DATA chunks in TSN order into a bounded buffer, answers
//! with SACKs (cumulative TSN, gap blocks, receive window: RFC 4960 §6.2) and echoes
//! heartbeats on the path they came on.
//!
//! A SACK leaves at once for a chunk that arrives out of order, fills a gap or repeats
//! one (oSCTP §IV-C1: each packet after a gap is acknowledged), otherwise for every second
//! chunk or after the ack delay. It goes on the path the latest chunk arrived on
//! (oSCTP §IV-E2), on a fixed path (stock SCTP), or spread over the paths that delivered
//! lately when SACKs come fast.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::chunk::{Chunk, Sack, MAX_DUPS, MAX_GAPS};
use crate::{Instant, PathId};

/// [`AckPath::Spread`]: a path carries at most one SACK per this while another path that
/// delivered within [`RECENT_ARRIVAL`] has not; at the oSCTP figures' 2-4 Mbit/s SACKs
/// are further apart, so they stay on the latest arrival's path.
const SACK_SPACING: Duration = Duration::from_millis(2);
const RECENT_ARRIVAL: Duration = Duration::from_millis(100);

/// Bytes each chunk held out of order is charged beyond its payload, so that empty or
/// tiny chunks far ahead cannot grow the reassembly map past the buffer's bound.
const HELD_OVERHEAD: usize = 64;

/// [`ReceiverConfig::ack_ratio`]: the SACK bytes that may leave at once before the budget
/// holds SACKs back, and the IP and UDP header charged on each datagram.
const SACK_BURST: i64 = 4096;
const DATAGRAM_OVERHEAD: usize = 28;

/// Which path acknowledgements leave on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPath {
    /// The path the latest DATA chunk arrived on (oSCTP §IV-E2).
    Latest,
    /// Always this path (stock SCTP: the IP layer's choice).
    Fixed(PathId),
    /// A deviation from oSCTP §IV-E2 for fast paths (not yet the default: it lowers the
    /// in-crate loss-response test's proportional/halving margin): the latest arrival's
    /// path, unless it carried a SACK in the last 2 ms; then the next path in turn that
    /// delivered in the last 100 ms and did not. Only paths that deliver carry SACKs, as
    /// in oSCTP, and at high rates the SACKs share the uplinks. trace-stream: on mpw-8_1
    /// the latest path's 3 Mbit/s uplink dropped 1462 SACKs and queued them 48 ms on
    /// average (0.751 -> 0.906 of the capacity with SACKs strictly in turn, which however
    /// sent half the SACKs of osctp-fig7's 100 ms path over the 200 ms one: 1.06 -> 1.00).
    Spread,
}

/// Receiver options.
#[derive(Clone, Copy, Debug)]
pub struct ReceiverConfig {
    /// Bytes held (out of order or not yet read) at most: the flow-control window.
    pub buffer: usize,
    pub ack_path: AckPath,
    /// RFC 4960 §6.2: at most 500 ms; 200 ms is usual.
    pub ack_delay: Duration,
    /// A deviation from oSCTP §IV-C1 and RFC 4960 §6.7 (a SACK for each chunk after a
    /// gap), off by default: SACK bytes are held to `1/n` of the DATA bytes received
    /// (datagram headers included), with a burst of 4 kB. A SACK due beyond the budget
    /// waits for more data or for `ack_delay`, and leaves then with everything since, so the
    /// return path's load follows the forward rate as TCP's delayed acks do (RFC 5690's
    /// ack ratio, fixed here). Without it an 80 Mbit/s download acknowledges each chunk
    /// once a hole opens, up to 1 kB of gap blocks a SACK, and the SACKs fill a 3 Mbit/s
    /// uplink's queue (trace-stream, docs/benchmarks.md).
    pub ack_ratio: Option<u32>,
    /// Gap blocks one SACK reports at most (with its duplicate TSNs, never more than
    /// [`MAX_GAPS`]).
    pub gap_blocks: usize,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            buffer: 1 << 20,
            ack_path: AckPath::Latest,
            ack_delay: Duration::from_millis(200),
            ack_ratio: None,
            gap_blocks: MAX_GAPS,
        }
    }
}

/// Counters of the receiving end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    pub chunks: u64,
    pub duplicates: u64,
    /// Chunks dropped for want of buffer space.
    pub dropped: u64,
    pub sacks: u64,
    /// SACK bytes sent, datagram headers included.
    pub sack_bytes: u64,
    /// SACKs held back by [`ReceiverConfig::ack_ratio`] (each hold counted once).
    pub sacks_held: u64,
}

/// Arrivals remembered for the next SACKs' blocks: more than fit in one.
const FRESH_MAX: usize = 4 * MAX_GAPS;
/// SACKs that report a new arrival's block before the highest others, so that one lost
/// SACK does not hide it (RFC 2018 §4 repeats each block in several).
const FRESH_SACKS: u8 = 3;

/// The receiving end of one stream.
#[derive(Debug)]
pub struct StreamReceiver {
    config: ReceiverConfig,
    /// Next TSN expected.
    cum: u64,
    ahead: BTreeMap<u64, (Vec<u8>, bool)>,
    /// The TSNs in `ahead` as ascending, disjoint, non-adjacent runs `[lo, hi)`: the gap
    /// blocks, kept as chunks arrive so that a SACK does not walk the whole map.
    runs: VecDeque<(u64, u64)>,
    ahead_bytes: usize,
    ready: VecDeque<u8>,
    fin_reached: bool,
    latest_path: PathId,
    /// Per path, when a DATA chunk last arrived on it.
    arrivals: Vec<Option<Instant>>,
    /// Per path, when a SACK last left on it.
    sacks_sent: Vec<Option<Instant>>,
    ack_turn: usize,
    in_order_unacked: u32,
    sack_now: bool,
    ack_deadline: Option<Instant>,
    last_rwnd: usize,
    heartbeat_acks: VecDeque<(PathId, u64)>,
    /// TSNs taken out of order, each with the SACKs left that report its block first
    /// ([`FRESH_SACKS`]; the latest [`FRESH_MAX`]).
    fresh: VecDeque<(u64, u8)>,
    /// TSNs received again since the last SACK, for its duplicate report (at most
    /// [`MAX_DUPS`]; more are counted in the stats only).
    dups: Vec<u64>,
    /// The SACK last sent, its vectors reused for the next.
    sack_buf: Sack,
    /// [`ReceiverConfig::ack_ratio`]'s budget, bytes (negative: overspent).
    sack_credit: i64,
    /// The SACK now due is held by the budget (counted once).
    held: bool,
    stats: ReceiverStats,
}

impl StreamReceiver {
    pub fn new(config: ReceiverConfig) -> Self {
        StreamReceiver {
            config,
            cum: 0,
            ahead: BTreeMap::new(),
            runs: VecDeque::new(),
            fresh: VecDeque::new(),
            ahead_bytes: 0,
            ready: VecDeque::new(),
            fin_reached: false,
            latest_path: 0,
            arrivals: Vec::new(),
            sacks_sent: Vec::new(),
            ack_turn: 0,

            in_order_unacked: 0,
            sack_now: false,
            ack_deadline: None,
            last_rwnd: config.buffer,
            heartbeat_acks: VecDeque::new(),
            dups: Vec::new(),
            sack_buf: Sack::default(),
            sack_credit: SACK_BURST,
            held: false,
            stats: ReceiverStats::default(),
        }
    }

    /// A datagram arrived on `path`. Anything that is not a chunk for a receiver is ignored.
    pub fn handle_datagram(&mut self, now: Instant, path: PathId, bytes: &[u8]) {
        match Chunk::parse(bytes) {
            Ok(Chunk::Data {
                tsn, fin, payload, ..
            }) => {
                if let Some(n) = self.config.ack_ratio {
                    let earned = ((bytes.len() + DATAGRAM_OVERHEAD) / n.max(1) as usize) as i64;
                    self.sack_credit = (self.sack_credit + earned).min(SACK_BURST);
                }
                self.on_data(now, path, tsn, fin, payload)
            }
            Ok(Chunk::Heartbeat { nonce, .. }) => self.heartbeat_acks.push_back((path, nonce)),
            _ => {}
        }
    }

    fn on_data(&mut self, now: Instant, path: PathId, tsn: u64, fin: bool, payload: &[u8]) {
        self.stats.chunks += 1;
        self.latest_path = path;
        if self.arrivals.len() <= path as usize {
            self.arrivals.resize(path as usize + 1, None);
            self.sacks_sent.resize(path as usize + 1, None);
        }
        self.arrivals[path as usize] = Some(now);
        if tsn < self.cum || self.fin_reached || self.ahead.contains_key(&tsn) {
            self.stats.duplicates += 1;
            if self.dups.len() < MAX_DUPS {
                self.dups.push(tsn);
            }
            self.sack_now = true;
            return;
        }
        // The next chunk in order is always taken: it is what frees the buffer.
        if tsn != self.cum && self.used() + payload.len() + HELD_OVERHEAD > self.config.buffer {
            self.stats.dropped += 1;
            self.sack_now = true;
            return;
        }
        let had_gaps = !self.ahead.is_empty();
        let in_order = tsn == self.cum;
        if in_order {
            self.take_in_order(payload, fin);
        } else {
            self.ahead_bytes += payload.len() + HELD_OVERHEAD;
            self.ahead.insert(tsn, (payload.to_vec(), fin));
            self.add_to_runs(tsn);
            if self.fresh.len() == FRESH_MAX {
                self.fresh.pop_front();
            }
            self.fresh.push_back((tsn, FRESH_SACKS));
        }
        while !self.fin_reached && self.runs.front().is_some_and(|r| r.0 == self.cum) {
            let Some((data, fin)) = self.ahead.remove(&self.cum) else {
                break;
            };
            self.ahead_bytes -= data.len() + HELD_OVERHEAD;
            self.runs[0].0 += 1;
            if self.runs[0].0 == self.runs[0].1 {
                self.runs.pop_front();
            }
            self.take_in_order(&data, fin);
        }
        if !in_order || had_gaps || !self.ahead.is_empty() || self.fin_reached {
            self.sack_now = true;
        } else {
            self.in_order_unacked += 1;
            if self.in_order_unacked >= 2 {
                self.sack_now = true;
            } else if self.ack_deadline.is_none() {
                self.ack_deadline = Some(now + self.config.ack_delay);
            }
        }
    }

    /// The chunk at the cumulative TSN joins the bytes ready to read.
    fn take_in_order(&mut self, payload: &[u8], fin: bool) {
        self.ready.extend(payload);
        self.cum += 1;
        if fin {
            self.fin_reached = true;
            self.ahead.clear();
            self.runs.clear();
            self.ahead_bytes = 0;
        }
    }

    /// `tsn`, new in `ahead`, joins its run, merging the runs either side.
    fn add_to_runs(&mut self, tsn: u64) {
        let i = self.runs.partition_point(|r| r.1 < tsn);
        let joins_left = i < self.runs.len() && self.runs[i].1 == tsn;
        let next = if joins_left { i + 1 } else { i };
        let joins_right = next < self.runs.len() && self.runs[next].0 == tsn + 1;
        match (joins_left, joins_right) {
            (true, true) => {
                self.runs[i].1 = self.runs[next].1;
                self.runs.remove(next);
            }
            (true, false) => self.runs[i].1 = tsn + 1,
            (false, true) => self.runs[next].0 = tsn,
            (false, false) => self.runs.insert(i, (tsn, tsn + 1)),
        }
    }

    fn used(&self) -> usize {
        self.ahead_bytes + self.ready.len()
    }

    fn rwnd(&self) -> usize {
        self.config.buffer.saturating_sub(self.used())
    }

    /// Reads in-order bytes; returns how many were copied.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.ready.len());
        let (a, b) = self.ready.as_slices();
        let k = n.min(a.len());
        buf[..k].copy_from_slice(&a[..k]);
        buf[k..n].copy_from_slice(&b[..n - k]);
        self.ready.drain(..n);
        self.after_read(n);
        n
    }

    /// Reads every in-order byte onto the end of `out`; returns how many.
    pub fn read_append(&mut self, out: &mut Vec<u8>) -> usize {
        let (a, b) = self.ready.as_slices();
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        let n = self.ready.len();
        self.ready.clear();
        self.after_read(n);
        n
    }

    /// Window update (RFC 4960 §6.2) once reading reopens a window the sender saw shut.
    fn after_read(&mut self, n: usize) {
        if n > 0 && self.last_rwnd < self.config.buffer / 4 && self.rwnd() >= self.config.buffer / 2
        {
            self.sack_now = true;
        }
    }

    /// The sender finished and every byte has been read.
    pub fn is_finished(&self) -> bool {
        self.fin_reached && self.ready.is_empty()
    }

    /// The next datagram to send: a heartbeat answer or a SACK. Writes it into `out`
    /// (cleared first) and returns its path.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PathId> {
        out.clear();
        if let Some((path, nonce)) = self.heartbeat_acks.pop_front() {
            Chunk::HeartbeatAck { path, nonce }.emit(out);
            return Some(path);
        }
        let deadline_passed = self.ack_deadline.is_some_and(|d| d <= now);
        if !self.sack_now && !deadline_passed {
            return None;
        }
        if self.budget_holds() && !deadline_passed {
            if !self.held {
                self.held = true;
                self.stats.sacks_held += 1;
            }
            if self.ack_deadline.is_none() {
                self.ack_deadline = Some(now + self.config.ack_delay);
            }
            return None;
        }
        let path = match self.config.ack_path {
            AckPath::Latest => self.latest_path,
            AckPath::Spread => self.spread_path(now),
            AckPath::Fixed(p) => p,
        };
        if let Some(t) = self.sacks_sent.get_mut(path as usize) {
            *t = Some(now);
        }
        let mut sack = std::mem::take(&mut self.sack_buf);
        self.fill_sack(path, &mut sack);
        let chunk = Chunk::Sack(sack);
        chunk.emit(out);
        if let Chunk::Sack(sack) = chunk {
            self.sack_buf = sack;
        }
        let bytes = out.len() + DATAGRAM_OVERHEAD;
        self.stats.sack_bytes += bytes as u64;
        if self.config.ack_ratio.is_some() {
            self.sack_credit -= bytes as i64;
        }
        self.held = false;
        self.fresh.retain_mut(|(_, left)| {
            *left -= 1;
            *left > 0
        });
        self.dups.clear();
        self.sack_now = false;
        self.ack_deadline = None;
        self.in_order_unacked = 0;
        self.last_rwnd = self.rwnd();
        self.stats.sacks += 1;
        Some(path)
    }

    /// [`ReceiverConfig::ack_ratio`]'s budget is spent.
    fn budget_holds(&self) -> bool {
        self.config.ack_ratio.is_some() && self.sack_credit < 0
    }

    /// [`AckPath::Spread`]'s choice.
    fn spread_path(&mut self, now: Instant) -> PathId {
        let latest = self.latest_path as usize;
        let since = |t: Option<Instant>, d: Duration| {
            t.is_some_and(|t| now.saturating_duration_since(t) < d)
        };
        if !since(self.sacks_sent.get(latest).copied().flatten(), SACK_SPACING) {
            return self.latest_path;
        }
        let n = self.arrivals.len();
        for k in 1..=n {
            let i = (self.ack_turn + k) % n;
            if i != latest
                && since(self.arrivals[i], RECENT_ARRIVAL)
                && !since(self.sacks_sent[i], SACK_SPACING)
            {
                self.ack_turn = i;
                return i as PathId;
            }
        }
        self.latest_path
    }

    /// The SACK to send, with the duplicates since the last, into `s` (its vectors
    /// reused). Past [`MAX_GAPS`] blocks (less one per duplicate, and at most the
    /// configured `gap_blocks`) it reports first the blocks holding what arrived since the
    /// last [`FRESH_SACKS`] SACKs, latest first, then the highest others: the sender treats
    /// gap-acknowledged chunks as delivered (we never renege), so an arrival reported once
    /// is known, and one never reported is taken for a loss by RACK's time threshold and
    /// SD-FRT's count alike (a retransmission filling a low hole while higher blocks fill
    /// the SACK). Reporting only the one block of the latest arrival left 4366 of
    /// 5gophers-3-carriers' 6072 fast retransmissions spurious in trace-stream.
    fn fill_sack(&self, path: PathId, s: &mut Sack) {
        let off = |&(lo, hi): &(u64, u64)| {
            let at = |tsn: u64| (tsn - self.cum).min(u32::MAX as u64) as u32;
            (at(lo), at(hi))
        };
        let room = (MAX_GAPS - self.dups.len()).min(self.config.gap_blocks.max(1));
        s.gaps.clear();
        if self.runs.len() <= room {
            s.gaps.extend(self.runs.iter().map(off));
        } else {
            let holding = |tsn: u64| {
                let i = self.runs.partition_point(|r| r.1 <= tsn);
                self.runs.get(i).filter(|r| r.0 <= tsn)
            };
            let fresh = self.fresh.iter().rev().filter_map(|&(t, _)| holding(t));
            for g in fresh.chain(self.runs.iter().rev()).map(off) {
                if s.gaps.len() == room {
                    break;
                }
                if !s.gaps.contains(&g) {
                    s.gaps.push(g);
                }
            }
            s.gaps.sort_unstable();
        }
        s.path = path;
        s.cum = self.cum;
        s.a_rwnd = self.rwnd().min(u32::MAX as usize) as u32;
        s.dups.clear();
        s.dups.extend_from_slice(&self.dups);
    }

    /// When [`Self::handle_timeout`] next has work: the delayed ack.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if (self.sack_now && !self.budget_holds()) || !self.heartbeat_acks.is_empty() {
            return None;
        }
        self.ack_deadline
    }

    /// Nothing to do but let [`Self::poll_transmit`] see the delayed ack is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.ack_deadline.is_some_and(|d| d <= now) {
            self.sack_now = true;
        }
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }
}
