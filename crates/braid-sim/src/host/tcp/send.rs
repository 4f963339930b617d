//! The send half of a connection: what to send next, what ACKs tell, loss recovery, the
//! congestion window and the retransmission timers. The handshake is the connection's
//! (`super::conn`); this starts once it is over.
//!
//! - Sending (RFC 9293 §3.8.6.2.1, RFC 896 with Minshall's variant as in Linux): a segment
//!   is full-sized unless it carries the last queued bytes; a sub-MSS segment waits while
//!   an earlier sub-MSS segment is unacknowledged (Nagle, when on) and a window-limited one
//!   waits for half the largest window the peer offered, unless nothing is in flight.
//!   The initial window is ten segments (RFC 6928), or what the workload sets
//!   ([`InitialWindow`], e.g. RFC 3390's for end hosts before 2011), one if the handshake
//!   needed more than one retransmission (as Linux does). No pacing: Linux's Cubic without the fq qdisc
//!   does not pace either.
//! - ACKs: window updates as Linux (`tcp_may_update_window`); SACK blocks mark the
//!   scoreboard (RFC 2018 §4); a first block below the cumulative ACK or inside the second
//!   is a D-SACK (RFC 2883 §4) and feeds RACK's reordering window and TLP. RTT samples come
//!   from never-retransmitted segments (RFC 6298 §3): the oldest newly delivered one for
//!   SRTT (as Linux's `seq_rtt_us`), the newest for the minimum RTT and HyStart.
//! - Loss detection with SACK: RACK (RFC 8985 §6); the DupThresh rule of RFC 6675 §5
//!   follows from RACK's zero reordering window once three segments are SACKed. Without
//!   SACK (a peer that does not offer it): NewReno (RFC 6582), counting duplicate ACKs as
//!   Linux does (`tcp_add_reno_sack`), the head marked lost after three and after each
//!   partial ACK in recovery.
//! - Recovery (RFC 6675 §5 with Linux's state machine): on the first loss the sender
//!   enters fast recovery until everything sent before it is acknowledged; ssthresh comes
//!   from Cubic and the window follows Proportional Rate Reduction (RFC 6937 §3, with
//!   Linux's SSRB bound, `tcp_cwnd_reduction`); lost segments are retransmitted first,
//!   then new data. Limited transmit (RFC 3042) follows from counting SACKed segments (and
//!   duplicate ACKs) out of the pipe, as in Linux. No undo of spurious reductions (Eifel,
//!   F-RTO, RFC 3522 / 5682 / 4015).
//! - Tail loss probe (RFC 8985 §7): with SACK and nothing in recovery, a PTO of 2·SRTT
//!   (plus 200 ms when one segment is in flight, at least 10 ms, at most the RTO) sends
//!   one new segment if the windows allow or retransmits the last one; an ACK showing
//!   that the probe repaired a loss reduces the window as Linux does (`tcp_process_tlp_ack`).
//! - Retransmission timeout (RFC 6298 §5): restarted when new data is acknowledged; on
//!   expiry every unSACKed segment is lost, the window is one segment, ssthresh is reduced
//!   once per episode (Linux `tcp_enter_loss`), and the timer backs off; after 15 expiries
//!   in a row the connection is aborted (Linux `tcp_retries2`).
//! - Zero window (RFC 9293 §3.8.6.1): a persist timer sends window probes with backoff.

use std::time::Duration;

use braid_core::cubic::Cubic;
use braid_core::Instant;
use serde::Serialize;

use super::rack::{Rack, DUP_THRESH};
use super::ring::Ring;
use super::rtt::RttEstimator;
use super::scoreboard::{Scoreboard, Sent};
use super::seq::Seq;
use super::wire::Header;
use crate::host::workload::InitialWindow;

/// Initial window in segments (RFC 6928).
pub const INITIAL_WINDOW: u32 = 10;
/// Consecutive RTO expiries before the connection is aborted (Linux `tcp_retries2`).
pub const MAX_RETRIES: u32 = 15;
/// Worst-case delayed-ACK time a PTO allows for (RFC 8985 §7.2, Linux `TCP_DELACK_MAX`).
const WC_DEL_ACK: Duration = Duration::from_millis(200);
/// Smallest PTO (Linux).
const MIN_PTO: Duration = Duration::from_millis(10);

/// Linux's congestion-avoidance states, as far as the model needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    Open,
    /// Fast recovery (RFC 6675) until `high_seq` is acknowledged.
    Recovery,
    /// After a retransmission timeout, until `high_seq` is acknowledged.
    Loss,
}

/// What the one retransmission timer of a connection is waiting for, as Linux multiplexes
/// it (`icsk_pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    Rto,
    /// Tail loss probe (RFC 8985 §7.2).
    Tlp,
    /// RACK's reordering window (RFC 8985 §6.3).
    Reorder,
    /// Zero-window probe (RFC 9293 §3.8.6.1).
    Persist,
}

/// The next segment to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tx {
    /// New data from `nxt`, and the FIN if `fin`.
    New { len: u32, fin: bool },
    /// The scoreboard's segment at this index, again.
    Retransmit(usize),
    /// A zero-window probe: an empty segment below the window, which the peer answers.
    WindowProbe,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    Tail,
    Window,
}

/// An outstanding tail loss probe (RFC 8985 §7.4).
#[derive(Clone, Copy, Debug)]
struct TlpEpisode {
    end: Seq,
    retrans: bool,
}

/// Counters of one connection's sending side.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct SenderStats {
    /// Data segments sent for the first time.
    pub data_segments: u64,
    /// Data segments sent again (fast retransmit, RTO recovery, tail loss probes).
    pub retransmits: u64,
    pub fast_recoveries: u64,
    pub timeouts: u64,
    pub loss_probes: u64,
    /// Negative ACKs TCP-PRISM acted on (`tcp_cc = "prism"`).
    #[serde(skip_serializing_if = "is_zero")]
    pub nacks: u64,
    /// Recoveries TCP-PRISM re-entered, with no cut, for segments still marked lost.
    #[serde(skip_serializing_if = "is_zero")]
    pub prism_resumed_recoveries: u64,
    /// Milliseconds spent in fast recovery or RTO recovery, where the window does not grow.
    #[serde(skip_serializing_if = "is_zero")]
    pub recovery_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SenderStats {
    pub fn add(&mut self, o: &SenderStats) {
        self.data_segments += o.data_segments;
        self.retransmits += o.retransmits;
        self.fast_recoveries += o.fast_recoveries;
        self.timeouts += o.timeouts;
        self.loss_probes += o.loss_probes;
        self.nacks += o.nacks;
        self.prism_resumed_recoveries += o.prism_resumed_recoveries;
        self.recovery_ms += o.recovery_ms;
    }
}

/// The connection must be aborted: the peer stopped acknowledging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abort;

#[derive(Debug)]
pub struct Sender {
    /// SND.UNA and SND.NXT.
    una: Seq,
    nxt: Seq,
    /// SND.WND (scaled), SND.WL1, SND.WL2, the largest window seen, the peer's shift.
    wnd: u32,
    wl1: Seq,
    wl2: Seq,
    max_wnd: u32,
    shift: u8,
    /// Bytes from `buf_start` (= SND.UNA until the FIN is acknowledged) onward.
    buf: Ring,
    buf_start: Seq,
    fin_queued: bool,
    fin_sent: bool,
    mss: u32,
    sack: bool,
    nagle: bool,
    /// The initial window, once the MSS is known; `None`: [`INITIAL_WINDOW`].
    initial_window: Option<InitialWindow>,
    /// End of the last sub-MSS segment sent (Minshall's Nagle).
    small_end: Seq,
    board: Scoreboard,
    cc: Cubic<Seq>,
    rtt: RttEstimator,
    rack: Rack,
    tlp: Option<TlpEpisode>,
    probe: Option<Probe>,
    ca: CaState,
    high_seq: Seq,
    prior_cwnd: u32,
    prr_delivered: u32,
    prr_out: u32,
    dupacks: u32,
    timer: Option<(Instant, Timer)>,
    backoff: u32,
    /// Linux's cwnd validation (`tcp_cwnd_validate`).
    cwnd_limited: bool,
    max_packets_out: u32,
    cwnd_usage_seq: Seq,
    blocked: bool,
    reo_wait: Option<Duration>,
    stats: SenderStats,
    /// TCP-PRISM (PRISM §6.2.2): act on the Reverse Path Controller's negative ACKs.
    prism: bool,
    /// The links whose loss cut the window in this recovery.
    prism_cut: Vec<u8>,
    /// When the current recovery (fast or RTO) began, for `SenderStats::recovery_ms`.
    recovering_since: Option<Instant>,
}

impl Sender {
    /// A sender whose first data byte is `iss + 1`, with a `capacity`-byte buffer.
    pub fn new(
        iss: Seq,
        capacity: usize,
        nagle: bool,
        initial_window: Option<InitialWindow>,
    ) -> Sender {
        let start = iss + 1;
        Sender {
            una: start,
            nxt: start,
            wnd: 0,
            wl1: Seq(0),
            wl2: start,
            max_wnd: 0,
            shift: 0,
            buf: Ring::new(capacity),
            buf_start: start,
            fin_queued: false,
            fin_sent: false,
            mss: 536,
            sack: false,
            nagle,
            initial_window,
            small_end: start,
            board: Scoreboard::default(),
            cc: Cubic::new(INITIAL_WINDOW),
            rtt: RttEstimator::default(),
            rack: Rack::new(start),
            tlp: None,
            probe: None,
            ca: CaState::Open,
            high_seq: start,
            prior_cwnd: 0,
            prr_delivered: 0,
            prr_out: 0,
            dupacks: 0,
            timer: None,
            backoff: 0,
            cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: start,
            blocked: false,
            reo_wait: None,
            stats: SenderStats::default(),
            prism: false,
            prism_cut: Vec::new(),
            recovering_since: None,
        }
    }

    /// Runs TCP-PRISM's loss response when `prism`.
    pub fn with_prism(mut self, prism: bool) -> Sender {
        self.prism = prism;
        self
    }

    /// The handshake is over: the peer's first window (`wnd`, unscaled as a SYN carries
    /// it, from a segment with sequence number `wl1`), its window scale `shift`, the MSS,
    /// whether SACK is in use, the handshake's RTT sample if it was not retransmitted,
    /// and how many times it was retransmitted.
    pub fn on_established(
        &mut self,
        (wnd, wl1): (u16, Seq),
        shift: u8,
        mss: u32,
        sack: bool,
        (syn_rtt, syn_retransmits): (Option<Duration>, u32),
    ) {
        self.wnd = u32::from(wnd);
        self.max_wnd = self.wnd;
        self.wl1 = wl1;
        self.wl2 = self.una;
        self.shift = shift;
        self.mss = mss.max(1);
        self.sack = sack;
        if let Some(rtt) = syn_rtt {
            self.rtt.on_sample(rtt, self.una, self.nxt);
        }
        if syn_retransmits > 1 {
            self.cc.set_window(1);
        } else if let Some(iw) = self.initial_window {
            self.cc.set_window(iw.segments(self.mss));
        }
    }

    pub fn una(&self) -> Seq {
        self.una
    }

    pub fn nxt(&self) -> Seq {
        self.nxt
    }

    pub fn mss(&self) -> u32 {
        self.mss
    }

    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    pub fn cwnd(&self) -> u32 {
        self.cc.window()
    }

    pub fn ca_state(&self) -> CaState {
        self.ca
    }

    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    pub fn max_window(&self) -> u32 {
        self.max_wnd
    }

    /// Bytes queued and not yet acknowledged.
    pub fn queued(&self) -> usize {
        self.buf.len()
    }

    /// Room for the application.
    pub fn free(&self) -> usize {
        self.buf.free()
    }

    pub fn fin_queued(&self) -> bool {
        self.fin_queued
    }

    /// Whether our FIN has been acknowledged.
    pub fn fin_acked(&self) -> bool {
        self.fin_sent && self.una == self.nxt
    }

    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.fin_queued {
            return 0;
        }
        self.buf.push(data)
    }

    /// Queues `n` bytes whose contents do not matter (zeros).
    pub fn write_zeros(&mut self, n: usize) -> usize {
        if self.fin_queued {
            return 0;
        }
        let n = self.buf.zero_at(0, n);
        self.buf.commit(n);
        n
    }

    /// Queues the FIN after the data.
    pub fn close(&mut self) {
        self.fin_queued = true;
    }

    /// Copies the payload of the segment from `seq` into `out`.
    pub fn payload(&self, seq: Seq, out: &mut [u8]) {
        let offset = seq.since(self.buf_start) as usize;
        self.buf.read_at(offset, out);
    }

    /// Like [`Sender::payload`] into a zeroed `out`; true if the payload is all zeros
    /// (the buffer never held anything else), which is then left as it is.
    pub fn payload_into_zeroed(&self, seq: Seq, out: &mut [u8]) -> bool {
        if self.buf.is_all_zeros() {
            return true;
        }
        self.payload(seq, out);
        false
    }

    /// The scoreboard segment at `i`.
    pub fn segment(&self, i: usize) -> Option<&Sent> {
        self.board.get(i)
    }

    /// Checks the scoreboard's counts and the sequence variables (tests).
    #[cfg(test)]
    pub fn check(&self) {
        self.board.check();
        assert!(self.una <= self.nxt);
        assert!(self.buf_start <= self.una || self.fin_acked());
        assert!(self.buf.len() <= self.buf.capacity());
    }

    /// Segments in flight (RFC 6675's pipe); duplicate ACKs count as SACKed without
    /// SACK, as in Linux.
    pub fn in_flight(&self) -> u32 {
        let reno_sacked = if self.sack {
            0
        } else {
            self.dupacks.min(
                self.board
                    .packets_out()
                    .saturating_sub(self.board.lost_out()),
            )
        };
        self.board.in_flight().saturating_sub(reno_sacked)
    }

    /// Processes the acknowledgment fields of an acceptable segment (RFC 9293 §3.10.7.4,
    /// "fifth, check the ACK field"). `seg_len` is the sequence space the segment
    /// occupies. Returns whether the ACK acknowledged our FIN just now.
    pub fn on_ack(&mut self, now: Instant, h: &Header, seg_len: u32) -> bool {
        let ack = h.ack;
        if ack < self.una || ack > self.nxt {
            return false;
        }
        let advanced = ack > self.una;
        let win = u32::from(h.window) << self.shift;
        let may_update =
            advanced || h.seq > self.wl1 || (h.seq == self.wl1 && (win > self.wnd || win == 0));
        let dupack = !advanced && !may_update && seg_len == 0 && !self.board.is_empty();
        if may_update {
            self.wl1 = h.seq;
            self.wl2 = ack;
            self.wnd = win;
            self.max_wnd = self.max_wnd.max(win);
        }

        // Delivery: the cumulative ACK, then SACK blocks in ascending order.
        let mut oldest: Option<Instant> = None;
        let mut newest: Option<Instant> = None;
        let min_rtt = self.rtt.min_rtt();
        let rack = &mut self.rack;
        let mut delivered_seg = |seg: &Sent| {
            rack.on_delivered(seg, now, min_rtt);
            if !seg.ever_retrans {
                oldest = Some(oldest.map_or(seg.xmit, |t| t.min(seg.xmit)));
                newest = Some(newest.map_or(seg.xmit, |t| t.max(seg.xmit)));
            }
        };
        let acked = self.board.ack(ack, &mut delivered_seg);
        let mut delivered = acked.delivered;
        let mut dsack = false;
        if self.sack && !h.sack.is_empty() {
            let blocks = h.sack.as_slice();
            let (l0, r0) = blocks[0];
            dsack = l0 < ack || blocks.get(1).is_some_and(|&(l1, r1)| l0 >= l1 && r0 <= r1);
            let mut sorted = [(Seq(0), Seq(0)); 4];
            let mut n = 0;
            for &(l, r) in &blocks[usize::from(dsack)..] {
                if l < r && r > ack && r <= self.nxt && n < sorted.len() {
                    sorted[n] = (l, r);
                    n += 1;
                }
            }
            let sorted = &mut sorted[..n];
            sorted.sort_unstable_by_key(|a| a.0);
            delivered += self.board.sack(sorted, &mut delivered_seg);
        }

        let mut fin_acked = false;
        if advanced {
            let data_end = self.buf_start + self.buf.len() as u32;
            let n = ack.min(data_end).since(self.buf_start);
            self.buf.consume(n as usize);
            self.buf_start = self.buf_start + n;
            fin_acked = acked.fin;
            self.una = ack;
            self.backoff = 0;
            self.dupacks = 0;
        }
        if let Some(t) = oldest {
            self.rtt.on_sample(now - t, self.una, self.nxt);
        }
        if let Some(t) = newest {
            self.rtt.on_min_sample(now - t);
        }
        if dsack {
            self.rack.on_dsack(self.una, self.nxt);
        }
        self.on_tlp_ack(ack, dsack, advanced || seg_len > 0 || delivered > 0);

        let nacked = match h.nack {
            Some((seq, share, link, resend)) if self.prism => {
                self.on_nack(seq, share, link, resend)
            }
            _ => 0,
        };
        // TCP-PRISM (PRISM §6.2.2) learns its losses from the negative ACKs alone: it
        // "does not wait for more duplicate ACKs, nor does retransmit all packets which
        // are ambiguously believed to have been lost", so neither RACK on the SACK blocks
        // nor duplicate ACKs mark anything (its retransmission timer still does).
        let newly_lost = nacked
            + if self.prism {
                0
            } else if self.sack {
                self.detect_loss(now)
            } else {
                if dupack {
                    self.dupacks += 1;
                    delivered += 1;
                }
                // RFC 6582 §3.2 steps 3-5: a partial ACK in recovery retransmits the new
                // head; a full ACK (one reaching `high_seq`) ends recovery and marks
                // nothing, as Linux checks the exit before `tcp_newreno_mark_lost`.
                let mark = match self.ca {
                    CaState::Recovery => advanced && ack < self.high_seq,
                    _ => self.dupacks >= DUP_THRESH,
                };
                u32::from(mark && self.board.mark_head_lost())
            };

        // Linux `tcp_fastretrans_alert` and `tcp_cong_control`.
        if self.ca != CaState::Open && self.una >= self.high_seq {
            if self.ca == CaState::Recovery {
                // Linux `tcp_end_cwnd_reduction`.
                self.cc.set_window(self.cc.ssthresh());
            }
            self.ca = CaState::Open;
            self.rack.on_recovery_end();
        }
        if self.ca == CaState::Open && (newly_lost > 0 || self.board.lost_out() > 0) {
            if self.prism {
                // Segments still marked lost when the last recovery ended (a resend
                // lost again): resent with no new cut; a NACK brings its own.
                self.resume_recovery();
            } else {
                self.enter_recovery();
            }
        }
        self.note_recovery(now);
        if self.ca == CaState::Recovery {
            self.reduce_window(delivered, newly_lost, advanced);
        } else if advanced && self.is_cwnd_limited() {
            let min_rtt = self.rtt.min_rtt().unwrap_or(Duration::ZERO);
            self.cc
                .on_rtt(ack, self.nxt, newest.map(|t| now - t), min_rtt);
            self.cc.on_ack(now, delivered, min_rtt);
        }
        self.rearm(now, advanced);
        fin_acked
    }

    /// RACK loss detection (RFC 8985 §6.2 step 5); remembers when to look again.
    fn detect_loss(&mut self, now: Instant) -> u32 {
        self.reo_wait = None;
        let Some((xmit, end)) = self.rack.last() else {
            return 0;
        };
        let srtt = self.rtt.srtt().unwrap_or(self.rack.rtt());
        let min_rtt = self.rtt.min_rtt().unwrap_or(srtt);
        let reo = self.rack.reo_wnd(
            self.ca != CaState::Open,
            self.board.sacked_out(),
            min_rtt,
            srtt,
        );
        let (lost, wait) = self
            .board
            .rack_detect(now, xmit, end, self.rack.rtt() + reo);
        self.reo_wait = wait;
        lost
    }

    /// TCP-PRISM (PRISM §6.2.2): the segment starting at `seq` was lost on a link with
    /// `share`/65535 of the bandwidth. It is marked for retransmission at once (no
    /// duplicate ACKs awaited) and the window's target cut by that share only, once per
    /// link that loses in the episode ("Additive Increase and Proportional Decrease": a
    /// burst of drops on one link is one cut, as in Reno); PRR then paces the window
    /// down to it. Returns the segments newly marked lost. Without `resend` the tunnel
    /// repairs the loss: only the window is cut.
    fn on_nack(&mut self, seq: Seq, share: u16, link: u8, resend: bool) -> u32 {
        let Some(i) = self.board.position_of(seq) else {
            return 0;
        };
        let marked = resend && self.board.mark_lost_once(i);
        if resend && !marked {
            return 0;
        }
        let marked = u32::from(marked);
        self.stats.nacks += 1;
        let share = f64::from(share) / 65535.0;
        let first_cut = self.ca == CaState::Open;
        if first_cut {
            self.prism_cut.clear();
        }
        if self.prism_cut.contains(&link) {
            // This link's loss episode has had its cut.
            return marked;
        }
        self.prism_cut.push(link);
        if first_cut {
            self.stats.fast_recoveries += 1;
            self.ca = CaState::Recovery;
            self.high_seq = self.nxt;
            self.prior_cwnd = self.cc.window();
            self.cc.on_proportional_decrease(share, self.cc.window());
            self.prr_delivered = 0;
            self.prr_out = 0;
            self.tlp = None;
        } else {
            let target = self.cc.ssthresh().min(self.prior_cwnd);
            self.cc.on_proportional_decrease(share, target);
        }
        marked
    }

    /// Accounts the time spent outside the Open state.
    fn note_recovery(&mut self, now: Instant) {
        match (self.ca == CaState::Open, self.recovering_since) {
            (false, None) => self.recovering_since = Some(now),
            (true, Some(t)) => {
                self.stats.recovery_ms += (now - t).as_millis() as u64;
                self.recovering_since = None;
            }
            _ => {}
        }
    }

    /// TCP-PRISM re-enters recovery for segments still marked lost, the window kept.
    fn resume_recovery(&mut self) {
        self.stats.prism_resumed_recoveries += 1;
        self.ca = CaState::Recovery;
        self.high_seq = self.nxt;
        self.prior_cwnd = self.cc.window();
        self.cc.on_proportional_decrease(0.0, self.cc.window());
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.tlp = None;
    }

    /// Linux `tcp_enter_recovery`: ssthresh from Cubic, PRR from here.
    fn enter_recovery(&mut self) {
        self.prism_cut.clear();
        self.stats.fast_recoveries += 1;
        self.ca = CaState::Recovery;
        self.high_seq = self.nxt;
        self.prior_cwnd = self.cc.window();
        self.cc.on_congestion();
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.tlp = None;
    }

    /// Proportional Rate Reduction (RFC 6937 §3, as Linux `tcp_cwnd_reduction`).
    fn reduce_window(&mut self, delivered: u32, newly_lost: u32, advanced: bool) {
        if delivered == 0 || self.prior_cwnd == 0 {
            return;
        }
        let ssthresh = i64::from(self.cc.ssthresh());
        let in_flight = i64::from(self.in_flight());
        self.prr_delivered += delivered;
        let delta = ssthresh - in_flight;
        let (prr_delivered, prr_out) = (i64::from(self.prr_delivered), i64::from(self.prr_out));
        let mut sndcnt = if delta < 0 {
            let prior = i64::from(self.prior_cwnd);
            (ssthresh * prr_delivered + prior - 1) / prior - prr_out
        } else {
            let mut n = (prr_delivered - prr_out).max(i64::from(delivered));
            if advanced && newly_lost == 0 {
                n += 1;
            }
            n.min(delta)
        };
        // Force a fast retransmit on entering recovery.
        if self.prr_out == 0 {
            sndcnt = sndcnt.max(1);
        }
        let cwnd = (in_flight + sndcnt.max(0)).clamp(1, i64::from(u32::MAX));
        self.cc.set_window(cwnd as u32);
    }

    /// Linux `tcp_process_tlp_ack` (RFC 8985 §7.4).
    fn on_tlp_ack(&mut self, ack: Seq, dsack: bool, not_dup: bool) {
        let Some(t) = self.tlp else { return };
        if ack < t.end {
            return;
        }
        if !t.retrans || dsack {
            self.tlp = None;
        } else if ack > t.end {
            // The probe repaired a loss: reduce as a congestion event, at once (CWR).
            self.tlp = None;
            self.cc.on_congestion();
            self.cc.set_window(self.cc.ssthresh());
        } else if !not_dup {
            // A pure duplicate: original and probe both arrived.
            self.tlp = None;
        }
    }

    /// Linux `tcp_is_cwnd_limited`.
    fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited
            || (self.cc.in_slow_start() && self.cc.window() < 2 * self.max_packets_out)
    }

    /// The next segment to send at `now`, if the windows allow one.
    pub fn poll(&mut self) -> Option<Tx> {
        match self.probe {
            Some(Probe::Window) => return Some(Tx::WindowProbe),
            Some(Probe::Tail) => {
                if let Some(tx) = self.next_new(true) {
                    return Some(tx);
                }
                // Retransmit the last segment not yet SACKed.
                let last = (0..self.board.packets_out() as usize)
                    .rev()
                    .find(|&i| self.board.get(i).is_some_and(|s| !s.sacked));
                match last {
                    Some(i) => return Some(Tx::Retransmit(i)),
                    None => self.probe = None,
                }
            }
            None => {}
        }
        let repair = self.board.next_to_repair();
        if self.in_flight() >= self.cc.window() {
            if repair.is_some() || self.next_new(false).is_some() {
                self.blocked = true;
            }
            return None;
        }
        if let Some(i) = repair {
            return Some(Tx::Retransmit(i));
        }
        self.next_new(false)
    }

    /// The next new segment the receive window, Nagle and SWS avoidance allow; `probe`
    /// ignores Nagle and SWS (a tail loss probe of new data).
    fn next_new(&self, probe: bool) -> Option<Tx> {
        if self.fin_sent {
            return None;
        }
        let sent = self.nxt.since(self.buf_start) as usize;
        let unsent = self.buf.len().saturating_sub(sent) as u32;
        if unsent == 0 {
            return (self.fin_queued && !probe).then_some(Tx::New { len: 0, fin: true });
        }
        let usable = (self.una + self.wnd).since(self.nxt);
        let len = self.mss.min(unsent).min(usable);
        if len == 0 {
            return None;
        }
        let idle = self.board.is_empty();
        if len < self.mss && !probe && !idle {
            if len < unsent {
                // RFC 9293 §3.8.6.2.1: wait for a useful window.
                if usable < self.max_wnd / 2 {
                    return None;
                }
            } else if self.nagle && !self.fin_queued && self.small_end > self.una {
                return None;
            }
        }
        Some(Tx::New {
            len,
            fin: self.fin_queued && len == unsent,
        })
    }

    /// Records that `tx` went out at `now`.
    pub fn on_sent(&mut self, now: Instant, tx: Tx) {
        let probe = self.probe.take();
        match tx {
            Tx::New { len, fin } => {
                let end = self.nxt + len + u32::from(fin);
                self.board.push(Sent::new(self.nxt, end, fin, now));
                self.nxt = end;
                self.fin_sent |= fin;
                if len < self.mss {
                    self.small_end = end;
                }
                if len > 0 {
                    self.stats.data_segments += 1;
                }
            }
            Tx::Retransmit(i) => {
                self.board.on_retransmit(i, now);
                self.stats.retransmits += 1;
                // Linux `tcp_xmit_retransmit_queue`: retransmitting the head restarts the
                // RTO, so RACK has a round trip to find that retransmission lost again.
                if i == 0 && !matches!(self.timer, Some((_, Timer::Reorder))) {
                    self.timer = Some((now + self.rtt.backed_off(self.backoff), Timer::Rto));
                }
            }
            Tx::WindowProbe => return,
        }
        if self.ca == CaState::Recovery {
            self.prr_out += 1;
        }
        if probe == Some(Probe::Tail) {
            self.tlp = Some(TlpEpisode {
                end: self.nxt,
                retrans: matches!(tx, Tx::Retransmit(_)),
            });
            self.timer = Some((now + self.rtt.backed_off(self.backoff), Timer::Rto));
        } else if self.timer.is_none() {
            // RFC 6298 (5.1).
            self.timer = Some((now + self.rtt.backed_off(self.backoff), Timer::Rto));
        }
    }

    /// After a round of sending: cwnd validation (Linux `tcp_cwnd_validate`), and the
    /// loss probe or persist timer. `sent_new` says whether new data went out.
    pub fn after_transmit(&mut self, now: Instant, sent_new: bool) {
        let limited = std::mem::take(&mut self.blocked);
        let out = self.board.packets_out();
        if self.una >= self.cwnd_usage_seq
            || limited
            || (!self.cwnd_limited && out > self.max_packets_out)
        {
            self.cwnd_limited = limited;
            self.max_packets_out = out;
            self.cwnd_usage_seq = self.nxt;
        }
        if sent_new && !matches!(self.timer, Some((_, Timer::Reorder))) {
            self.schedule_tlp(now, false);
        }
        self.arm_persist(now);
    }

    /// Arms the timer after an ACK (Linux `tcp_set_xmit_timer`); `restart` when new data
    /// was acknowledged (RFC 6298 (5.2)-(5.3)).
    fn rearm(&mut self, now: Instant, restart: bool) {
        if self.board.is_empty() {
            if !matches!(self.timer, Some((_, Timer::Persist))) {
                self.timer = None;
            }
            self.arm_persist(now);
            return;
        }
        if let Some(wait) = self.reo_wait {
            self.timer = Some((now + wait.max(Duration::from_micros(1)), Timer::Reorder));
            return;
        }
        if self.schedule_tlp(now, restart) {
            return;
        }
        let at = self.rto_deadline(now, restart);
        self.timer = Some((at, Timer::Rto));
    }

    /// When the retransmission timer expires: restarted from `now`, the running RTO kept,
    /// or counted from the oldest segment's transmission (after a probe or reordering
    /// timer, as Linux `tcp_rearm_rto`).
    fn rto_deadline(&self, now: Instant, restart: bool) -> Instant {
        let rto = self.rtt.backed_off(self.backoff);
        match self.timer {
            _ if restart => now + rto,
            Some((at, Timer::Rto)) => at,
            _ => {
                let head = self.board.first().map_or(now, |s| s.xmit);
                (head + rto).max(now + Duration::from_micros(1))
            }
        }
    }

    /// Arms the loss probe timer if a probe is allowed (RFC 8985 §7.2); false if not.
    fn schedule_tlp(&mut self, now: Instant, restart: bool) -> bool {
        if !self.sack || self.ca != CaState::Open || self.tlp.is_some() || self.board.is_empty() {
            return false;
        }
        let Some(srtt) = self.rtt.srtt() else {
            return false;
        };
        let mut pto = 2 * srtt;
        if self.in_flight() == 1 {
            pto += WC_DEL_ACK;
        }
        let at = (now + pto.max(MIN_PTO)).min(self.rto_deadline(now, restart));
        self.timer = Some((at, Timer::Tlp));
        true
    }

    /// Arms the persist timer when data waits for a window and nothing is in flight.
    fn arm_persist(&mut self, now: Instant) {
        let sent = self.nxt.since(self.buf_start) as usize;
        let waiting = self.buf.len() > sent;
        let closed = (self.una + self.wnd).since(self.nxt) == 0;
        if self.board.is_empty() && waiting && closed {
            if self.timer.is_none() {
                let at = now + self.rtt.backed_off(self.backoff);
                self.timer = Some((at, Timer::Persist));
            }
        } else if matches!(self.timer, Some((_, Timer::Persist))) {
            self.timer = None;
            self.backoff = 0;
        }
    }

    /// When the timer next needs [`Sender::on_timeout`].
    pub fn deadline(&self) -> Option<Instant> {
        self.timer.map(|(at, _)| at)
    }

    /// Fires the timer if it is due; `Err` when the connection must be aborted.
    pub fn on_timeout(&mut self, now: Instant) -> Result<(), Abort> {
        let Some((at, kind)) = self.timer else {
            return Ok(());
        };
        if at > now {
            return Ok(());
        }
        self.timer = None;
        match kind {
            Timer::Rto => {
                if self.board.is_empty() {
                    return Ok(());
                }
                if self.backoff >= MAX_RETRIES {
                    return Err(Abort);
                }
                self.enter_loss();
                self.note_recovery(now);
                self.backoff += 1;
                let at = now + self.rtt.backed_off(self.backoff);
                self.timer = Some((at, Timer::Rto));
            }
            Timer::Tlp => {
                self.stats.loss_probes += 1;
                self.probe = Some(Probe::Tail);
                // Rearmed when the probe is sent; if none can be, the RTO takes over.
                let at = self.rto_deadline(now, false);
                self.timer = Some((at, Timer::Rto));
            }
            Timer::Reorder => {
                let lost = self.detect_loss(now);
                if lost > 0 && self.ca == CaState::Open {
                    self.enter_recovery();
                    self.reduce_window(1, 0, false);
                }
                self.note_recovery(now);
                self.rearm(now, false);
            }
            Timer::Persist => {
                self.probe = Some(Probe::Window);
                self.backoff = (self.backoff + 1).min(MAX_RETRIES);
                let at = now + self.rtt.backed_off(self.backoff);
                self.timer = Some((at, Timer::Persist));
            }
        }
        Ok(())
    }

    /// Linux `tcp_enter_loss`: every unSACKed segment lost, one segment of window,
    /// ssthresh reduced unless this continues a recovery.
    fn enter_loss(&mut self) {
        self.stats.timeouts += 1;
        if self.ca == CaState::Open || self.una >= self.high_seq {
            self.cc.on_congestion();
        }
        self.board.mark_all_lost();
        self.cc.set_window(1);
        self.dupacks = 0;
        self.ca = CaState::Loss;
        self.high_seq = self.nxt;
        self.tlp = None;
        self.probe = None;
    }
}
