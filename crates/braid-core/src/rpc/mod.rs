//! PRISM's Reverse Path Controller (RPC, PRISM §5-6): ACK control at the striping end
//! that lets a striped TCP flow's data arrive out of order without the sender taking the
//! reordering for loss.
//!
//! Per flow, RPC keeps the meta-state of the receiver's buffer from the scheduling
//! history ([`meta`]), identifies what each returning ACK reports by SACK-block matching
//! and cumulative-ACK scanning (§5.2.1, Figure 4), detects losses per link from the
//! scheduling history ([`loss`], §5.2.3), holds and re-sequences duplicate ACKs
//! ([`resequence`], Algorithm 2) under the state machine of Figure 5 ([`state`]), and
//! reports each loss with the lossy link's share of the bandwidth ([`share`], §6.2.1) for
//! ADAS's link weights and TCP-PRISM's proportional decrease.
//!
//! Sans-IO, in the engine's style. Inputs: [`Rpc::on_data`] for each inner TCP packet
//! sent towards the receiver, with the link the scheduler chose; [`Rpc::on_ack`] for each
//! inner packet coming back; [`Rpc::handle_timeout`]. Outputs, pulled:
//! [`Rpc::poll_release`] (packets to forward to the sender now, possibly rewritten, with
//! checksums kept correct), [`Rpc::poll_loss`], [`Rpc::poll_timeout`]. Every call takes
//! `now`. Anything that is not a TCP segment RPC can read (IPv4 or IPv6, no fragments,
//! well-formed options) passes through untouched. Every ACK is released within
//! [`RpcConfig::max_hold`] if `handle_timeout` is called at `poll_timeout` (plus, with
//! link bandwidths set, its wait in the pacer: its turn among ACKs released together).

pub mod flow;
pub mod loss;
pub mod meta;
pub mod nack;
pub mod options;
pub mod resequence;
pub mod segment;
pub mod seq;
pub mod share;
pub mod state;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use self::flow::{RpcFlow, Sink};
use self::share::LinkShare;
use self::state::RpcState;
use crate::flow::parse::FlowKey;
use crate::time::Instant;
use crate::PathId;

/// RPC's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcConfig {
    /// The longest an ACK is held, whatever the links' delay gap (the paper's buffer has
    /// no bound; fig6a's links differ by up to 1 s of RTT, plus their queues).
    pub max_hold: Duration,
    /// The shortest bound on holding an ACK: each is held up to twice the links' delay
    /// gap (the slowest link's hRTT less the fastest's), at least this, at most
    /// `max_hold`. 500 ms, prism-fig11's links (equal delays, queues apart).
    pub min_hold: Duration,
    /// Held ACKs released together go out paced at this percentage of the links'
    /// aggregate rate (Algorithm 2, line 6: "with a peak rate"), each spaced by the bytes
    /// it acknowledges; 0 releases them at once. Only when link bandwidths are set.
    pub peak_rate_pct: u32,
    /// ACKs held per flow (the paper's 3 KB is 50 ACKs; braid's windows are larger).
    pub max_held: usize,
    /// Later segments on a link reported before an unreported one is lost (§5.2.3: one).
    pub loss_threshold: usize,
    /// Segments remembered per flow.
    pub history: usize,
    /// Flows tracked; the least recently active goes first.
    pub max_flows: usize,
    /// Ship each loss to the sender as a negative ACK ([`nack`], §6.2.1), ahead of the
    /// ACKs released on it.
    pub nack: bool,
    /// Detect losses per link (§5.2.3); without it RPC only re-sequences ACKs (PRISM
    /// Figure 11's "ACK re-sequencing only"): held ones go out when the cumulative ACK
    /// passes them or at `max_hold`.
    pub detect_losses: bool,
    /// The tunnel repairs its links' drops itself (braid's loss recovery): a first
    /// transmission found lost is reported as congestion only (a [`LossEvent`] of `len`
    /// 0: the sender cuts its window by the link's share and resends nothing), and the
    /// flow stays NORMAL, holding its duplicates until the repair fills the hole. Off in
    /// the session: braid's repair of a drop comes late (its nack waits for every path),
    /// the held ACKs reach their bound first and the sender resends from their SACK
    /// blocks anyway (docs/benchmarks.md, prism-fig6a).
    pub tunnel_repairs: bool,
}

impl Default for RpcConfig {
    fn default() -> Self {
        RpcConfig {
            max_hold: Duration::from_secs(4),
            min_hold: Duration::from_millis(500),
            peak_rate_pct: 125,
            max_held: 1024,
            loss_threshold: 1,
            history: 4096,
            max_flows: 1024,
            nack: false,
            detect_losses: true,
            tunnel_repairs: false,
        }
    }
}

/// A data segment RPC recorded: its flow, first sequence number and length (SYN and FIN
/// count one each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentSegment {
    pub key: FlowKey,
    pub seq: u32,
    pub len: u32,
}

/// A loss RPC detected: the negative ACK of §6.2.1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossEvent {
    /// The flow, in its data direction.
    pub flow: FlowKey,
    /// The link that lost it.
    pub link: PathId,
    /// The lost segment's sequence number and length; length 0 when the tunnel repairs
    /// it ([`RpcConfig::tunnel_repairs`]): congestion on `link`, nothing to resend.
    pub seq: u32,
    pub len: u32,
    /// The link's share of the bandwidth, `p` in §6.2.1: TCP-PRISM cuts its window by it.
    pub share: f64,
    pub at: Instant,
}

/// What RPC did, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcStats {
    /// ACKs held for re-sequencing.
    pub held: u64,
    /// Held ACKs released re-sequenced when the cumulative ACK passed them.
    pub released_resequenced: u64,
    /// Held ACKs released on entering LOSS.
    pub released_on_loss: u64,
    /// Held ACKs released at their bound.
    pub released_on_timeout: u64,
    /// Released ACKs that waited for the pacer (Algorithm 2, line 6).
    pub paced: u64,
    /// ACKs added to split a far jump of the cumulative ACK into paced steps.
    pub split_acks: u64,
    /// Released ACKs whose SACK blocks were cut at data still in flight.
    pub sack_clipped: u64,
    /// Held ACKs released because the flow's buffer was full or the flow went away.
    pub released_on_overflow: u64,
    /// ACKs released as they arrived.
    pub passed: u64,
    /// Bare ACKs older than one already released, dropped.
    pub stale_dropped: u64,
    /// Packets passed through untouched: not TCP, unreadable, or of no tracked flow.
    pub untouched: u64,
    /// Segments detected lost.
    pub losses: u64,
    /// Of those, the ones whose first transmission was reported later (reordering within
    /// a link taken for a loss, or a repair RPC did not see): the NACK was spurious.
    pub losses_spurious: u64,
    /// The tunnel's own resends of segments RPC had recorded ([`Rpc::on_resent`]).
    pub tunnel_resends: u64,
    /// Flows dropped because the table was full.
    pub flows_evicted: u64,
    /// Negative ACKs sent to the sender.
    pub nacks: u64,
    /// Losses reported as congestion only, the tunnel repairing them.
    pub losses_tunnel_repaired: u64,
    /// The longest any ACK was held (at most [`RpcConfig::max_hold`] when
    /// `handle_timeout` is called at `poll_timeout`).
    pub longest_hold: Duration,
    /// Sum over ACKs read of the re-sequencing distance after each, bytes from the
    /// receiver's cumulative ACK to the highest byte reported (PRISM Figure 12's buffer
    /// size), and the number of ACKs read: their ratio is the mean distance.
    pub distance_bytes_sum: u64,
    pub distance_samples: u64,
}

/// The Reverse Path Controller for all striped TCP flows of one tunnel end.
#[derive(Clone, Debug, Default)]
pub struct Rpc {
    cfg: RpcConfig,
    flows: HashMap<FlowKey, RpcFlow>,
    share: LinkShare,
    release: VecDeque<Vec<u8>>,
    losses: VecDeque<LossEvent>,
    stats: RpcStats,
}

impl Rpc {
    pub fn new(cfg: RpcConfig) -> Self {
        Rpc {
            cfg,
            ..Rpc::default()
        }
    }

    /// A packet sent towards the receiver on `link`. Returns the data segment recorded,
    /// for [`Rpc::on_resent`].
    pub fn on_data(&mut self, now: Instant, link: PathId, packet: &[u8]) -> Option<SentSegment> {
        let seg = segment::parse(packet).ok()?;
        if seg.rst() {
            self.remove(&seg.key);
            return None;
        }
        let len = seg.payload_len + u32::from(seg.syn()) + u32::from(seg.fin());
        if len == 0 {
            return None;
        }
        if !self.flows.contains_key(&seg.key) {
            self.make_room();
        }
        let cfg = self.cfg;
        self.flows
            .entry(seg.key)
            .or_insert_with(|| RpcFlow::new(&cfg, seg.key, seg.seq, now))
            .on_sent(now, link, seg.seq, len);
        Some(SentSegment {
            key: seg.key,
            seq: seg.seq,
            len,
        })
    }

    /// The tunnel sent a segment recorded by [`Rpc::on_data`] again, on `link` (braid's
    /// own loss recovery repairing a link's drop, or failover): in the history it replaces
    /// the first transmission, whose loss the tunnel has repaired, so RPC neither reports
    /// that loss to the sender nor takes the repair's late arrival for another.
    pub fn on_resent(&mut self, now: Instant, link: PathId, s: &SentSegment) {
        if let Some(flow) = self.flows.get_mut(&s.key) {
            flow.on_sent(now, link, s.seq, s.len);
            self.stats.tunnel_resends += 1;
        }
    }

    /// A packet coming back towards the sender: released now or held.
    pub fn on_ack(&mut self, now: Instant, packet: Vec<u8>) {
        let seg = match segment::parse(&packet) {
            Ok(seg) => seg,
            Err(_) => {
                self.stats.untouched += 1;
                self.release.push_back(packet);
                return;
            }
        };
        let key = seg.key.reversed();
        let Some(flow) = self.flows.get_mut(&key) else {
            self.stats.untouched += 1;
            self.release.push_back(packet);
            return;
        };
        let template = self.cfg.nack.then(|| packet[..seg.tcp_at + 20].to_vec());
        let (released_at, losses_at) = (self.release.len(), self.losses.len());
        flow.on_ack(
            now,
            packet,
            &seg,
            Sink {
                release: &mut self.release,
                losses: &mut self.losses,
                share: &mut self.share,
                stats: &mut self.stats,
            },
        );
        if let Some(template) = template {
            // The NACKs go ahead of the ACKs this one released (§6.2.1: loss information
            // first, then the ACKs on hold).
            let (ack, tsval) = flow.released();
            for (i, ev) in self.losses.range(losses_at..).enumerate() {
                let p = nack::packet(&template, &seg, ev, ack, tsval);
                self.release.insert(released_at + i, p);
                self.stats.nacks += 1;
            }
        }
        if seg.rst() {
            self.remove(&key);
        }
    }

    /// Releases the ACKs whose hold time is up.
    pub fn handle_timeout(&mut self, now: Instant) {
        for flow in self.flows.values_mut() {
            if flow.deadline().is_some_and(|d| d <= now) {
                flow.on_timeout(now, &mut self.release, &mut self.stats);
            }
        }
    }

    /// When [`Rpc::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.flows.values().filter_map(RpcFlow::deadline).min()
    }

    /// The next packet to forward to the sender.
    pub fn poll_release(&mut self) -> Option<Vec<u8>> {
        self.release.pop_front()
    }

    /// The next loss detected.
    pub fn poll_loss(&mut self) -> Option<LossEvent> {
        self.losses.pop_front()
    }

    /// Sets a link's bandwidth (bits per second) for the loss information's share; without
    /// it RPC uses the rate it saw delivered on each link.
    pub fn set_link_bandwidth(&mut self, link: PathId, bps: Option<f64>) {
        self.share.set_bandwidth(link, bps);
    }

    pub fn stats(&self) -> RpcStats {
        self.stats
    }

    /// The state of a flow (keyed by its data direction), if tracked.
    pub fn flow_state(&self, key: &FlowKey) -> Option<RpcState> {
        self.flows.get(key).map(RpcFlow::state)
    }

    /// ACKs held across all flows.
    pub fn held(&self) -> usize {
        self.flows.values().map(RpcFlow::held).sum()
    }

    fn remove(&mut self, key: &FlowKey) {
        if let Some(mut flow) = self.flows.remove(key) {
            self.stats.released_on_overflow += flow.held() as u64;
            flow.drain(&mut self.release, &mut self.stats);
        }
    }

    fn make_room(&mut self) {
        while self.flows.len() >= self.cfg.max_flows.max(1) {
            let Some(oldest) = self
                .flows
                .iter()
                .min_by_key(|(k, f)| (f.last_active, **k))
                .map(|(k, _)| *k)
            else {
                return;
            };
            self.remove(&oldest);
            self.stats.flows_evicted += 1;
        }
    }
}
