//! The sending end: cuts the byte stream into DATA chunks of one TSN space, schedules them
//! over the paths' windows, and recovers losses from SACKs per path (oSCTP §IV-C) or by
//! each path's T3-rtx timer, failing paths over as oSCTP §IV-E1 or stock SCTP does.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::chunk::{Chunk, Sack};
use super::congestion::{Coupling, DelayBound, LossResponse, Window};
use super::path::{CutUndo, Failover, SenderPath};
use super::rack::{Delivered, DUP_THRESH};
use super::sched::{Candidate, Picker};
use super::{FastRetransmit, StreamConfig, WindowAdvance};
use crate::time::earliest;
use crate::{Instant, PathId};

/// Three: RFC 4960 §7.2.4's (and oSCTP's) miss indications before a fast retransmit.
const FAST_RETRANSMIT_THRESHOLD: u32 = 3;

/// Fast-retransmitted TSNs remembered for the receiver's duplicate report
/// ([`FastRetransmit::Rack`]); the oldest are forgotten first.
const RESENT_MAX: usize = 4096;

/// Veno's threshold (TCP Veno, Fu & Liew 2003): a loss while fewer packets than this sit
/// in the path's queue is taken as random, not congestion.
const RANDOM_LOSS_BACKLOG: f64 = 3.0;

/// Counters of the sending end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Chunks sent per path, retransmissions included.
    pub chunks_sent: Vec<u64>,
    /// Payload bytes newly acknowledged per path (each chunk counted on the path its
    /// acknowledged copy went on): what each path delivered, for metering's prediction of
    /// a cheap path's rate (`Session::note_foreign_traffic`).
    pub acked_bytes: Vec<u64>,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    pub retransmitted_chunks: u64,
    pub failures: u64,
    pub revivals: u64,
    /// T3 expiries undone: a chunk they marked lost was acknowledged before it was sent
    /// again, so the original arrived (RFC 4015's detection, with the retransmission queue
    /// in place of timestamps).
    pub spurious_timeouts: u64,
    /// Windows cut by [`StreamConfig::delay_bound`].
    pub delay_cuts: u64,
    /// Fast retransmissions proven spurious: reported received twice, or acknowledged
    /// before the copy left ([`FastRetransmit::Rack`] only).
    pub spurious_retransmits: u64,
    /// Fast-retransmit window cuts undone, every retransmission of theirs spurious.
    pub undone_cuts: u64,
    /// Chunks sent again because they held the peer's window shut
    /// ([`StreamConfig::opportunistic_retransmit`]).
    pub reinjections: u64,
}

#[derive(Debug)]
struct Sent {
    payload: Vec<u8>,
    fin: bool,
    path: usize,
    psn: u64,
    sent_at: Instant,
    retransmitted: bool,
    /// Queued for retransmission; not counted in any path's flight.
    lost: bool,
    /// Queued by a fast retransmit to leave at once whatever the windows (RFC 4960 §7.2.4).
    fast: bool,
    misses: u32,
}

/// The sending end of one stream over `paths` paths.
#[derive(Debug)]
pub struct StreamSender {
    config: StreamConfig,
    paths: Vec<SenderPath>,
    picker: Picker,
    pending: VecDeque<u8>,
    finish: bool,
    fin_sent: bool,
    next_tsn: u64,
    /// Every TSN below it is acknowledged.
    cum: u64,
    outstanding: BTreeMap<u64, Sent>,
    /// Payload bytes in `outstanding`.
    outstanding_bytes: usize,
    retransmit: BTreeSet<u64>,
    peer_rwnd: u64,
    dup_cum: u32,
    /// [`FastRetransmit::Rack`]: fast-retransmitted TSNs -> the path they were lost on and
    /// its cut episode (if they belong to one), for the spurious-retransmission checks.
    resent: BTreeMap<u64, (usize, Option<u64>)>,
    stats: SenderStats,
    /// Bytes the writer holds back beyond `pending` ([`StreamSender::set_waiting_beyond`]).
    waiting_beyond: usize,
    /// The paths as the scheduler sees them, kept between calls of `poll_transmit`.
    candidates: Vec<Candidate>,
    /// The latest SACK's window had no room for a chunk.
    window_shut: bool,
    /// The latest TSN [`StreamSender::reinject_blocking`] marked.
    reinjected: Option<u64>,
    /// The latest SACK's gap blocks as TSN ranges, clipped to the TSNs sent: every TSN
    /// in them left `outstanding` then, and none can return, so a block within one of
    /// them acknowledges nothing new and is not looked up again.
    acked_blocks: Vec<(u64, u64)>,
    /// `on_sack`'s working space, kept between SACKs.
    scratch: SackScratch,
}

/// Per-SACK working space of [`StreamSender::on_sack`], per path where indexed.
#[derive(Debug, Default)]
struct SackScratch {
    acked: Vec<u64>,
    blocks: Vec<(u64, u64)>,
    flight_before: Vec<u64>,
    lowest_before: Vec<Option<u64>>,
    bytes: Vec<u64>,
    acked_psns: Vec<Vec<u64>>,
    lowest_acked: Vec<bool>,
    delivered: Vec<Vec<Delivered>>,
    spurious: Vec<(usize, Option<u64>)>,
}

impl StreamSender {
    pub fn new(config: StreamConfig, paths: usize) -> Self {
        let mtu = config.mtu as u64;
        StreamSender {
            paths: (0..paths.min(PathId::MAX as usize + 1))
                .map(|_| SenderPath::new(Window::new(mtu, config.slow_start), config.rto))
                .collect(),
            picker: Picker::new(config.scheduler),
            pending: VecDeque::new(),
            finish: false,
            fin_sent: false,
            next_tsn: 0,
            cum: 0,
            outstanding: BTreeMap::new(),
            outstanding_bytes: 0,
            retransmit: BTreeSet::new(),
            peer_rwnd: config.initial_peer_rwnd as u64,
            dup_cum: 0,
            resent: BTreeMap::new(),
            waiting_beyond: 0,
            candidates: Vec::with_capacity(paths),
            window_shut: false,
            reinjected: None,
            acked_blocks: Vec::new(),
            scratch: SackScratch::default(),
            stats: SenderStats {
                chunks_sent: vec![0; paths],
                acked_bytes: vec![0; paths],
                ..SenderStats::default()
            },
            config,
        }
    }

    /// Queues bytes; returns how many fit in the send buffer.
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.finish {
            return 0;
        }
        let room = self.config.send_buffer.saturating_sub(self.buffered());
        let n = room.min(data.len());
        self.pending.extend(&data[..n]);
        n
    }

    /// No more bytes will be written; the last chunk carries FIN.
    pub fn finish(&mut self) {
        self.finish = true;
    }

    /// Bytes written and not yet acknowledged.
    pub fn buffered(&self) -> usize {
        self.pending.len() + self.outstanding_bytes
    }

    /// The live paths' congestion windows together, bytes.
    pub fn window_sum(&self) -> u64 {
        self.paths
            .iter()
            .filter(|p| p.failed.is_none())
            .map(|p| p.window.cwnd())
            .sum()
    }

    /// Bytes the writer has waiting that it has not written yet (split-TCP's relay keeps
    /// them in the sockets, [`super::split::unsent_limit`]): counted in the backlog the
    /// delay-based scheduler weighs, which decides whether the slower paths are worth
    /// using. Without it a capped backlog read as a short one, and lab-split-tcp's slow
    /// paths went unused.
    pub fn set_waiting_beyond(&mut self, bytes: usize) {
        self.waiting_beyond = bytes;
    }

    pub fn waiting_beyond(&self) -> usize {
        self.waiting_beyond
    }

    /// Bytes written and not yet sent once.
    pub fn unsent(&self) -> usize {
        self.pending.len()
    }

    /// Every byte and the FIN are acknowledged.
    pub fn is_done(&self) -> bool {
        self.fin_sent && self.outstanding.is_empty()
    }

    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Path `p`'s congestion window, bytes.
    pub fn cwnd(&self, p: usize) -> u64 {
        self.paths[p].window.cwnd()
    }

    pub fn is_failed(&self, p: usize) -> bool {
        self.paths[p].failed.is_some()
    }

    /// Limits what path `p` may carry to `bytes` of datagrams from now (a metered path's
    /// budget or cap left: oSCTP §IV-F, `Session::stream_allowance`), or lifts the limit
    /// (`None`). A path without room for a whole chunk is held: it takes no chunk, new or
    /// resent, not even a fast retransmission; what it has in flight is acknowledged or
    /// recovered as before, and its heartbeats still go. With every live path held the
    /// stream waits, as packet mode's send queue does. Each datagram sent on the path
    /// counts against the allowance until the next call.
    pub fn set_allowance(&mut self, p: usize, bytes: Option<u64>) {
        if let Some(path) = self.paths.get_mut(p) {
            path.allowance = bytes;
        }
    }

    /// Holds path `p` (an allowance of nothing) or lifts its limit.
    pub fn set_held(&mut self, p: usize, held: bool) {
        self.set_allowance(p, held.then_some(0));
    }

    pub fn is_held(&self, p: usize) -> bool {
        let mtu = self.config.mtu as u64;
        self.paths.get(p).is_some_and(|p| p.held(mtu))
    }

    /// Whether path `p`'s window is full (its flight at or above its window): a cheap path
    /// with room means the stream has nothing more for it, so metered paths are not needed
    /// (`Session::note_foreign_traffic`).
    pub fn window_full(&self, p: usize) -> bool {
        self.paths
            .get(p)
            .is_some_and(|p| p.flight >= p.window.cwnd())
    }

    /// The next datagram to send, into `out` (cleared first); returns its path.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PathId> {
        out.clear();
        if let Some(p) = self.paths.iter().position(|p| p.heartbeat_due) {
            self.paths[p].heartbeat_due = false;
            Chunk::Heartbeat {
                path: p as PathId,
                nonce: now.as_micros(),
            }
            .emit(out);
            return Some(p as PathId);
        }
        let all_failed = self.paths.iter().all(|p| p.failed.is_some());
        let fast = self
            .retransmit
            .first()
            .and_then(|t| self.outstanding.get(t))
            .is_some_and(|s| s.fast);
        let (tsn, avoid) = if let Some(&tsn) = self.retransmit.iter().next() {
            (tsn, self.outstanding.get(&tsn).map(|s| s.path))
        } else {
            let len = self.pending.len().min(self.config.mtu);
            let flight: u64 = self.paths.iter().map(|p| p.flight).sum();
            let fin_due = self.finish && !self.fin_sent && self.pending.len() <= self.config.mtu;
            if len == 0 && !fin_due {
                return None;
            }
            // Flow control (RFC 4960 §6.1 rule A), with a zero-window probe when idle.
            if len as u64 > self.peer_rwnd && flight > 0 {
                if self.config.opportunistic_retransmit && self.reinject_blocking() {
                    return self.poll_transmit(now, out);
                }
                return None;
            }
            (self.next_tsn, None)
        };
        // No window open and nothing that bypasses them: every scheduler waits (a pick
        // with no open path changes nothing), so the backlog need not be weighed.
        let mtu = self.config.mtu as u64;
        if (self.paths.iter()).all(|p| p.held(mtu) || (!fast && p.flight >= p.window.cwnd())) {
            return None;
        }
        let backlog = (self.pending.len() + self.waiting_beyond) as u64
            + self
                .retransmit
                .iter()
                .filter_map(|t| self.outstanding.get(t))
                .map(|s| s.payload.len() as u64)
                .sum::<u64>();
        // Reused: this runs for every chunk sent.
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.clear();
        candidates.extend(self.paths.iter().map(|p| Candidate {
            live: !p.held(mtu) && (p.failed.is_none() || all_failed),
            open: !p.held(mtu) && (fast || p.flight < p.window.cwnd()),
            srtt: p.srtt(),
            rttvar: p.rto.rttvar(),
            rate: p.rate(),
        }));
        let picked = self.picker.pick(&candidates, avoid, backlog.max(1));
        self.candidates = candidates;
        let p = picked?;
        if tsn == self.next_tsn && !self.retransmit.contains(&tsn) {
            let len = self.pending.len().min(self.config.mtu);
            let mut payload = Vec::with_capacity(len);
            let (a, b) = self.pending.as_slices();
            let k = len.min(a.len());
            payload.extend_from_slice(&a[..k]);
            payload.extend_from_slice(&b[..len - k]);
            self.pending.drain(..len);
            let fin = self.finish && self.pending.is_empty();
            self.peer_rwnd = self.peer_rwnd.saturating_sub(len as u64);
            self.fin_sent |= fin;
            self.next_tsn += 1;
            self.outstanding_bytes += payload.len();
            self.outstanding.insert(
                tsn,
                Sent {
                    payload,
                    fin,
                    path: p,
                    psn: 0,
                    sent_at: now,
                    retransmitted: false,
                    lost: false,
                    fast: false,
                    misses: 0,
                },
            );
        } else {
            self.retransmit.remove(&tsn);
            self.stats.retransmitted_chunks += 1;
        }
        let path = &mut self.paths[p];
        let sent = self.outstanding.get_mut(&tsn)?;
        if sent.lost {
            sent.retransmitted = true;
        }
        sent.lost = false;
        sent.fast = false;
        sent.path = p;
        sent.psn = path.next_psn;
        sent.sent_at = now;
        sent.misses = 0;
        path.next_psn += 1;
        path.outstanding.insert(sent.psn, tsn);
        path.flight += sent.payload.len() as u64;
        if path.t3.is_none() {
            path.t3 = Some(now + path.rto.rto());
        }
        self.stats.chunks_sent[p] += 1;
        Chunk::Data {
            path: p as PathId,
            tsn,
            fin: sent.fin,
            payload: &sent.payload,
        }
        .emit(out);
        if let Some(a) = self.paths[p].allowance.as_mut() {
            *a = a.saturating_sub(out.len() as u64);
        }
        Some(p as PathId)
    }

    /// A datagram arrived on `path`: a SACK or a heartbeat answer. Anything else is ignored.
    pub fn handle_datagram(&mut self, now: Instant, via: PathId, bytes: &[u8]) {
        match Chunk::parse(bytes) {
            Ok(Chunk::Sack(sack)) => self.on_sack(now, via as usize, &sack),
            Ok(Chunk::HeartbeatAck { path, nonce }) => {
                let fast_revival = self.fast_revival();
                let Some(p) = self.paths.get_mut(path as usize) else {
                    return;
                };
                if nonce <= now.as_micros() {
                    p.rto
                        .on_sample(now.saturating_duration_since(Instant::from_micros(nonce)));
                }
                if p.failed.is_some() {
                    p.revive();
                    if fast_revival {
                        p.restart_after_failure();
                    }
                    self.stats.revivals += 1;
                }
            }
            _ => {}
        }
    }

    /// A SACK that came on path `via`.
    fn on_sack(&mut self, now: Instant, via: usize, sack: &Sack) {
        // A SACK older than one already seen (it came back on a slower path) is dropped
        // (RFC 4960 §6.2.1 D), except with RACK: its gap blocks still stand, as the
        // receiver never reneges, and may hold the only report of an arrival (the newer
        // SACK's gap blocks reach only [`super::chunk::MAX_GAPS`] deep).
        let stale = sack.cum < self.cum;
        if (stale && self.config.fast_retransmit != FastRetransmit::Rack)
            || sack.cum > self.next_tsn
        {
            return;
        }
        let n = self.paths.len();
        let fast_revival = self.fast_revival();
        let mut scratch = std::mem::take(&mut self.scratch);
        let SackScratch {
            acked,
            blocks,
            flight_before,
            lowest_before,
            bytes,
            acked_psns,
            lowest_acked,
            delivered,
            spurious,
        } = &mut scratch;
        flight_before.clear();
        flight_before.extend(self.paths.iter().map(|p| p.flight));
        lowest_before.clear();
        lowest_before.extend(
            self.paths
                .iter()
                .map(|p| p.outstanding.keys().next().copied()),
        );
        // Newly acknowledged chunks: below the new cumulative TSN, then in the gap blocks.
        acked.clear();
        acked.extend(self.outstanding.range(..sack.cum).map(|(&t, _)| t));
        blocks.clear();
        // Both lists ascend (a SACK's blocks do), so one pass finds the block that may
        // hold each; a block out of order is merely looked up.
        let mut j = 0;
        for &(start, end) in &sack.gaps {
            let lo = sack.cum + start as u64;
            let hi = (sack.cum + end as u64).min(self.next_tsn);
            if lo >= hi {
                continue;
            }
            blocks.push((lo, hi));
            while j < self.acked_blocks.len() && self.acked_blocks[j].1 < hi {
                j += 1;
            }
            let seen = (self.acked_blocks.get(j)).is_some_and(|&(a, _)| a <= lo);
            if !seen {
                acked.extend(self.outstanding.range(lo..hi).map(|(&t, _)| t));
            }
        }
        std::mem::swap(&mut self.acked_blocks, blocks);
        if self.config.fast_retransmit == FastRetransmit::Rack {
            for tsn in &sack.dups {
                if let Some((p, episode)) = self.resent.remove(tsn) {
                    self.on_spurious(p, episode);
                }
            }
        }
        let cum_advanced = sack.cum > self.cum;
        self.cum = self.cum.max(sack.cum);
        bytes.clear();
        bytes.resize(n, 0);
        acked_psns.resize_with(n, Vec::new);
        acked_psns.iter_mut().for_each(Vec::clear);
        lowest_acked.clear();
        lowest_acked.resize(n, false);
        delivered.resize_with(n, Vec::new);
        delivered.iter_mut().for_each(Vec::clear);
        spurious.clear();
        for &tsn in acked.iter() {
            let Some(s) = self.outstanding.remove(&tsn) else {
                continue;
            };
            self.outstanding_bytes -= s.payload.len();
            let path = &mut self.paths[s.path];
            path.errors = 0;
            if path.failed.is_some() && self.config.failover == Failover::Osctp {
                path.revive();
                if fast_revival {
                    path.restart_after_failure();
                }
                self.stats.revivals += 1;
            }
            if s.lost {
                self.retransmit.remove(&tsn);
                if !s.retransmitted {
                    // Acknowledged before its copy left: the original arrived.
                    spurious.extend(self.resent.remove(&tsn));
                    if let Some((window, rto)) = path.undo.take() {
                        path.window = window;
                        path.rto = rto;
                        self.stats.spurious_timeouts += 1;
                    }
                }
                continue;
            }
            if !s.retransmitted {
                // Data sent after the expiry arrived: it stands.
                path.undo = None;
            }
            path.flight -= s.payload.len() as u64;
            path.outstanding.remove(&s.psn);
            bytes[s.path] += s.payload.len() as u64;
            self.stats.acked_bytes[s.path] += s.payload.len() as u64;
            acked_psns[s.path].push(s.psn);
            delivered[s.path].push(Delivered {
                psn: s.psn,
                sent_at: s.sent_at,
                retransmitted: s.retransmitted,
            });
            lowest_acked[s.path] |= lowest_before[s.path] == Some(s.psn);
            if !s.retransmitted {
                let rtt = now - s.sent_at;
                path.on_rtt(rtt);
                if via == s.path {
                    let min = path.own_min_rtt.map_or(rtt, |m| m.min(rtt));
                    path.own_min_rtt = Some(min);
                    path.window.on_rtt(s.psn, path.next_psn, rtt, min);
                }
                path.windowed_min_rtt
                    .update(now, now - s.sent_at, DelayBound::MIN_RTT_WINDOW);
            }
        }
        for &(p, episode) in spurious.iter() {
            self.on_spurious(p, episode);
        }
        let flight: u64 = self.paths.iter().map(|p| p.flight).sum();
        if !stale {
            self.peer_rwnd = (sack.a_rwnd as u64).saturating_sub(flight);
            self.window_shut = (sack.a_rwnd as usize) < self.config.mtu;
        }

        // Window advance (RFC 4960 §7.2.1; oSCTP §IV-C2).
        let coupling = (self.config.loss_response == LossResponse::Lia).then(|| {
            Coupling::new(
                self.paths
                    .iter()
                    .filter(|p| p.failed.is_none())
                    .map(|p| (p.window.cwnd() as f64, p.srtt().as_secs_f64().max(1e-3))),
            )
        });
        for p in 0..n {
            let max_psn = acked_psns[p].iter().max().copied();
            let path = &mut self.paths[p];
            if let (Some(r), Some(m)) = (path.recover_psn, max_psn) {
                if m >= r {
                    path.recover_psn = None;
                }
            }
            let may_advance = match self.config.window_advance {
                WindowAdvance::CumulativeDriven => cum_advanced,
                WindowAdvance::SackAndCumulativeDriven => cum_advanced || lowest_acked[p],
            };
            let was_full = flight_before[p] + self.config.mtu as u64 >= path.window.cwnd();
            if bytes[p] > 0 && may_advance && was_full && path.recover_psn.is_none() {
                path.window.on_ack(bytes[p], coupling);
            }
            // A metered path's queue is paid for: bounded there whatever the config says.
            let metered = path.allowance.map(|_| DelayBound::METERED);
            if let (Some(bound), Some(m)) = (self.config.delay_bound.or(metered), max_psn) {
                if path.failed.is_none() && path.apply_delay_bound(bound, m) {
                    self.stats.delay_cuts += 1;
                }
            }
            // T3-rtx (RFC 4960 §6.3.2 R2-R3).
            if path.flight == 0 {
                path.t3 = None;
            } else if lowest_acked[p] {
                path.t3 = Some(now + path.rto.rto());
            }
        }

        // Fast retransmit.
        let mut lost: Vec<u64> = Vec::new();
        match self.config.fast_retransmit {
            FastRetransmit::CumulativeDriven => {
                if cum_advanced {
                    self.dup_cum = 0;
                } else if !sack.gaps.is_empty() {
                    self.dup_cum += 1;
                    if self.dup_cum == FAST_RETRANSMIT_THRESHOLD {
                        lost.extend(
                            self.outstanding
                                .iter()
                                .find(|(_, s)| !s.lost)
                                .map(|(&t, _)| t),
                        );
                    }
                }
            }
            FastRetransmit::SackDriven => lost = self.count_misses(acked_psns),
            FastRetransmit::Rack => {
                // The count still tells a path that never reordered when to stop waiting.
                self.count_misses(acked_psns);
                for (p, d) in delivered.iter().enumerate() {
                    if !d.is_empty() {
                        let min_rtt = self.paths[p].min_rtt;
                        self.paths[p].rack.on_ack(now, d, min_rtt);
                        lost.extend(self.rack_detect(p, now));
                    }
                }
            }
        }
        for (i, tsn) in lost.into_iter().enumerate() {
            self.fast_retransmit(tsn, i == 0);
        }
        self.scratch = scratch;
    }

    /// SD-FRT's count (oSCTP §IV-C1): each chunk outstanding on a path gains a miss per
    /// chunk sent after it there and newly acknowledged; returns those at the threshold.
    fn count_misses(&mut self, acked_psns: &mut [Vec<u64>]) -> Vec<u64> {
        let mut lost = Vec::new();
        for (p, psns) in acked_psns.iter_mut().enumerate() {
            let Some(&max) = psns.iter().max() else {
                continue;
            };
            psns.sort_unstable();
            let path = &self.paths[p];
            for (&psn, &tsn) in path.outstanding.range(..max) {
                let later = psns.len() - psns.partition_point(|&q| q <= psn);
                if let Some(s) = self.outstanding.get_mut(&tsn) {
                    s.misses += later as u32;
                    if s.misses >= FAST_RETRANSMIT_THRESHOLD {
                        lost.push(tsn);
                    }
                }
            }
        }
        lost
    }

    /// RACK's loss detection on path `p` ([`super::rack`]): the TSNs now lost there.
    fn rack_detect(&mut self, p: usize, now: Instant) -> Vec<u64> {
        let outstanding = &self.outstanding;
        let path = &mut self.paths[p];
        let dup_thresh_met = path
            .outstanding
            .values()
            .next()
            .and_then(|t| outstanding.get(t))
            .is_some_and(|s| s.misses >= DUP_THRESH);
        let reo_wnd = path.rack.reo_wnd(
            path.min_rtt,
            path.srtt(),
            path.recover_psn.is_some(),
            dup_thresh_met,
        );
        let chunks = path
            .outstanding
            .iter()
            .filter_map(|(&psn, &tsn)| outstanding.get(&tsn).map(|s| (psn, s.sent_at, tsn)));
        path.rack.detect(now, reo_wnd, chunks)
    }

    /// A fast retransmission of a chunk lost on path `p` proved spurious: the path's
    /// reordering window grows, and the cut of its episode is undone once the last of
    /// the episode's retransmissions proves spurious too.
    fn on_spurious(&mut self, p: usize, episode: Option<u64>) {
        self.stats.spurious_retransmits += 1;
        let path = &mut self.paths[p];
        path.rack.on_spurious(path.next_psn);
        let Some(u) = path.cut_undo.as_mut() else {
            return;
        };
        if Some(u.episode) != episode {
            return;
        }
        u.left = u.left.saturating_sub(1);
        if u.left == 0 {
            path.window.undo(u.window);
            path.recover_psn = None;
            path.cut_undo = None;
            self.stats.undone_cuts += 1;
        }
    }

    /// Marks `tsn` for retransmission and applies the loss response on the path it was
    /// sent on, once per recovery period there. The first chunk a SACK marks leaves at once
    /// whatever the windows (RFC 4960 §7.2.4: one packet), the rest as windows open.
    fn fast_retransmit(&mut self, tsn: u64, bypass: bool) {
        let total_rate: f64 = self
            .paths
            .iter()
            .filter(|p| p.failed.is_none())
            .map(|p| p.rate())
            .sum();
        let Some(s) = self.outstanding.get_mut(&tsn) else {
            return;
        };
        if s.lost {
            return;
        }
        self.stats.fast_retransmits += 1;
        s.fast = bypass;
        let p = s.path;
        let path = &mut self.paths[p];
        mark_lost(path, s, tsn, &mut self.retransmit);
        let random = self.config.random_loss
            && path.backlog_packets(self.config.mtu as u64) < RANDOM_LOSS_BACKLOG;
        if path.recover_psn.is_none() && !random {
            let share = path.rate() / total_rate.max(1e-9);
            let prior = path.window;
            path.window.on_loss(self.config.loss_response.keep(share));
            path.recover_psn = Some(path.next_psn);
            path.episode += 1;
            path.cut_undo = Some(CutUndo {
                window: prior,
                episode: path.episode,
                left: 0,
            });
        }
        if self.config.fast_retransmit == FastRetransmit::Rack {
            let episode = match path.cut_undo.as_mut() {
                Some(u) if path.recover_psn.is_some() && u.episode == path.episode => {
                    u.left += 1;
                    Some(u.episode)
                }
                _ => None,
            };
            self.resent.insert(tsn, (p, episode));
            if self.resent.len() > RESENT_MAX {
                self.resent.pop_first();
            }
        }
        if path.flight == 0 {
            path.t3 = None;
        }
    }

    /// [`StreamConfig::opportunistic_retransmit`]: with the peer's window shut, the chunk
    /// holding the cumulative TSN back is marked for sending again, on another path (the
    /// retransmission avoids its last), once per TSN and only if another live path has
    /// room. True if it was marked.
    fn reinject_blocking(&mut self) -> bool {
        let Some((&tsn, s)) = self.outstanding.iter_mut().next() else {
            return false;
        };
        if s.lost || self.reinjected.is_some_and(|r| r >= tsn) {
            return false;
        }
        let q = s.path;
        let other = self
            .paths
            .iter()
            .enumerate()
            .any(|(i, p)| i != q && p.failed.is_none() && p.flight < p.window.cwnd());
        if !other {
            return false;
        }
        self.reinjected = Some(tsn);
        self.stats.reinjections += 1;
        let path = &mut self.paths[q];
        mark_lost(path, s, tsn, &mut self.retransmit);
        if path.flight == 0 {
            path.t3 = None;
        }
        true
    }

    /// [`StreamConfig::fast_revival`], which applies to oSCTP failover only.
    fn fast_revival(&self) -> bool {
        self.config.fast_revival && self.config.failover == Failover::Osctp
    }

    /// The earliest T3-rtx expiry, heartbeat or RACK reordering timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.paths.iter().fold(None, |at, p| {
            earliest(earliest(at, p.t3), earliest(p.failed, p.rack.timer))
        })
    }

    /// Runs the timers due at `now`; harmless when early.
    pub fn handle_timeout(&mut self, now: Instant) {
        let base = self.config.failover.heartbeat_interval();
        let fast_revival = self.fast_revival();
        for p in 0..self.paths.len() {
            if self.paths[p].rack.timer.is_some_and(|t| t <= now) {
                let lost = self.rack_detect(p, now);
                for (i, tsn) in lost.into_iter().enumerate() {
                    self.fast_retransmit(tsn, i == 0);
                }
            }
        }
        for i in 0..self.paths.len() {
            let path = &mut self.paths[i];
            let interval = if fast_revival {
                path.rto.rto().min(base)
            } else {
                base
            };
            if let Some(at) = path.failed {
                if at <= now {
                    path.heartbeat_due = true;
                    path.failed = Some(now + interval);
                }
            }
            if path.t3.is_none_or(|t| t > now) {
                continue;
            }
            if self.config.zero_window_probe && self.window_shut {
                // Probes into a shut window (StreamConfig::zero_window_probe): sent again,
                // the timer backed off; no error, no cut, no failover.
                path.t3 = None;
                path.rto.back_off();
                mark_all_lost(path, &mut self.outstanding, &mut self.retransmit);
                continue;
            }
            // RFC 4960 §6.3.3: back off, one MTU of window, everything on the path is lost.
            self.stats.timeouts += 1;
            path.t3 = None;
            if path.undo.is_none() {
                path.undo = Some((path.window, path.rto));
            }
            path.rto.back_off();
            path.window.on_timeout();
            path.recover_psn = None;
            path.cut_undo = None;
            path.errors += 1;
            mark_all_lost(path, &mut self.outstanding, &mut self.retransmit);
            let fail = match self.config.failover {
                Failover::Osctp => true,
                Failover::Stock { path_max_retrans } => path.errors > path_max_retrans,
            };
            if fail && path.failed.is_none() {
                path.before_failure = path.undo.map(|u| u.0);
                path.fail(now, interval);
                self.stats.failures += 1;
            }
        }
    }
}

fn mark_lost(path: &mut SenderPath, s: &mut Sent, tsn: u64, retransmit: &mut BTreeSet<u64>) {
    s.lost = true;
    path.flight -= s.payload.len() as u64;
    path.outstanding.remove(&s.psn);
    retransmit.insert(tsn);
}

/// Everything in flight on `path` is lost (a T3-rtx expiry).
fn mark_all_lost(
    path: &mut SenderPath,
    outstanding: &mut BTreeMap<u64, Sent>,
    retransmit: &mut BTreeSet<u64>,
) {
    for (_, tsn) in std::mem::take(&mut path.outstanding) {
        if let Some(s) = outstanding.get_mut(&tsn) {
            mark_lost(path, s, tsn, retransmit);
        }
    }
}
