//! Engine configuration. Every field has a default taken from the papers where they give one.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which end of the tunnel this engine is. Both run the same protocol (PluriBus §4: identical
/// algorithms run in each direction); the role only matters for the hello/config exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The vehicle / home end with several uplinks (PluriBus's VanProxy).
    Gateway,
    /// The wired end (PluriBus's LanProxy).
    Server,
}

/// The path scheduler a session (or a traffic class) uses; see [`crate::sched`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    /// Each packet on the next usable path in turn.
    RoundRobin,
    /// Packets in proportion to the paths' capacities.
    WeightedRoundRobin,
    /// A new flow on the path with fewest active flows (PluriBus §6.1).
    MinConnPath,
    /// A flow on the path its 5-tuple hashes to.
    HashFlow,
    /// Each packet on the path that delivers it first (PluriBus §4.3).
    #[default]
    DelayBased,
    /// Fill one path's window, then the next (oSCTP §IV-D).
    Lazy,
    /// The smallest-RTT path with an open window (oSCTP §IV-D).
    SmallestRtt,
    /// Least in-flight utilization, ties by expected arrival (PRISM §4).
    Adas,
    /// Every packet on every usable path.
    Redundant,
    /// A usable path drawn at random for each packet (PRISM Figure 9's baseline).
    Random,
    /// The path with the smallest expected arrival time, half its RTT (PRISM Figure 9's
    /// hRTT-only: ADAS's rule 1 for every packet).
    HrttOnly,
    /// The path with the least in-flight utilization, ties to the lower id (PRISM Figure
    /// 9's U-only: ADAS's rule 2 without rules 1 and 3).
    UtilizationOnly,
}

/// The loss-recovery method a session uses, with its parameters (docs/scenarios.md,
/// `[engine]`). In TOML it is either a name, `loss_recovery = "evolution"`, which takes
/// every parameter's default, or a table naming the kind and any parameters,
/// `loss_recovery = { kind = "xor", redundancy_pct = 50 }`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LossRecoveryKind {
    /// No loss masking: losses reach the inner transport.
    None,
    /// Evolution codes sent opportunistically (PluriBus §4, §4.1).
    Evolution(EvolutionParams),
    /// LT codes (robust soliton degrees) sent opportunistically like Evolution (PluriBus
    /// §6.4.1's rateless baseline).
    Lt(LtParams),
    /// A coded packet after every `100 / K` data packets, XOR of those still unacknowledged
    /// (PluriBus §6.4.1's fixed-overhead baseline, a (K, 1) Maelstrom code).
    Xor(XorParams),
    /// Systematic Reed-Solomon over blocks of data packets, fixed overhead.
    ReedSolomon(ReedSolomonParams),
    /// Retransmission driven by the receiver's nacks (PluriBus §6.4.1's feedback baseline).
    Retransmit(RetransmitParams),
}

/// Retransmission is the default: a lossy path beside a clean one is then worth using, as
/// "never worse than the best link" asks. Its repairs cost capacity only for what was lost
/// (on clean paths, only what reordering makes it nack, which its per-path detection keeps
/// rare), and arrive a
/// round trip of the fastest path after the loss is seen, where a TCP inside without SACK
/// (the simulator's, many embedded stacks) waits for its timeout. Quick never-worse with it
/// against none: "three mixed" (10 ms clean, 100 ms 2%, 400 ms 10%) 1.23 x the best path
/// (0.94), "fast + slow lossy" 1.15 (0.97), "both lossy" 4.6 (3.5). Coding
/// (Evolution) masks losses without the round trip but sends coded packets whenever a
/// path idles; it stays selectable.
impl Default for LossRecoveryKind {
    fn default() -> Self {
        LossRecoveryKind::Retransmit(RetransmitParams::default())
    }
}

/// How a receiver uses coded (XOR) packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XorDecoder {
    /// PluriBus §4.1's assumption: a coded packet recovers its one missing member, or is
    /// discarded.
    #[default]
    Immediate,
    /// Undecodable coded packets are kept (bounded) and peeled as more members arrive.
    Peeling,
}

/// Which packets of W a coded packet combines (the number is the code's business).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemberChoice {
    /// Chosen at random (PluriBus §4.1).
    #[default]
    Random,
    /// The member of W that earlier coded packets covered least, with the most covered
    /// others (see [`crate::fec::opportunistic::choose_by_coverage`]).
    Coverage,
}

/// How Evolution estimates what the receiver holds, from which each coded packet's
/// members follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PresenceEstimate {
    /// PluriBus §4.1: one fraction `r` for all of W; `max(1, ⌊-1/ln r⌋)` members, chosen
    /// by [`MemberChoice`].
    Fraction,
    /// Sampled receivers (see [`crate::fec::sampled`]): members chosen greedily for the
    /// largest expected yield over them; [`MemberChoice`] is not used. braid's default, a
    /// documented deviation from §4.1 (`braid bench pluribus-fig10` shows both).
    #[default]
    Sampled,
}

/// Parameters of [`LossRecoveryKind::Evolution`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvolutionParams {
    /// Added to each path's loss estimate before the sender's `r` update uses it, clamped
    /// to [0, 1] (PluriBus §6.4.2, Fig 12). In [-1, 1].
    pub loss_offset: f64,
    pub decoder: XorDecoder,
    /// Which packets of W a coded packet combines (with `estimate = "fraction"`).
    pub members: MemberChoice,
    /// How the sender estimates what the receiver holds.
    pub estimate: PresenceEstimate,
}

/// Parameters of [`LossRecoveryKind::Lt`]: the robust soliton distribution's `c` and `δ`
/// (PluriBus §6.4.1 uses 0.9 and 0.1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LtParams {
    pub c: f64,
    pub delta: f64,
    pub decoder: XorDecoder,
}

/// Parameters of [`LossRecoveryKind::Xor`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XorParams {
    /// K: coded packets per 100 data packets, 1 to 100.
    pub redundancy_pct: u32,
    pub decoder: XorDecoder,
}

/// Parameters of [`LossRecoveryKind::ReedSolomon`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReedSolomonParams {
    /// Recovery shards per 100 data packets (rounded up per block), 1 to 100.
    pub redundancy_pct: u32,
    /// Data packets per block, 1 to 255.
    pub block: u32,
    /// A block still short of `block` packets is coded once no data was sent for this long,
    /// so the tail of a burst is protected too.
    pub flush_ms: f64,
}

/// Parameters of [`LossRecoveryKind::Retransmit`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetransmitParams {
    /// With [`NackTrigger::FixedDelay`], how long a gap in the data sequence must persist
    /// before the receiver nacks it, so that reordering between paths is not taken for loss;
    /// with [`NackTrigger::PerPath`], the reordering allowance left once every path has
    /// delivered a later packet.
    pub nack_delay_ms: f64,
    /// Nacks per missing packet at most (each after about one RTT without it).
    pub max_nacks: u32,
    /// When the receiver takes a gap for a loss.
    pub trigger: NackTrigger,
}

/// When the receiver of [`LossRecoveryKind::Retransmit`] takes a gap in the data sequence
/// for a loss and nacks it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NackTrigger {
    /// Loss is detected per path, like TCP's duplicate acks: each path delivers in the order
    /// it was sent, so a missing packet is lost once every path that carries data has
    /// delivered a later one (whichever path it was sent on has passed it), plus
    /// `nack_delay_ms` of reordering allowance; a gap still open after the largest
    /// smoothed RTT (or 1.5 times the reordering measured) is nacked anyway, and a path
    /// that delivered no data for four times that no longer counts.
    #[default]
    PerPath,
    /// A gap is nacked once it has lasted `nack_delay_ms`, whatever the paths did.
    FixedDelay,
}

impl Default for EvolutionParams {
    fn default() -> Self {
        EvolutionParams {
            loss_offset: 0.0,
            decoder: XorDecoder::Immediate,
            members: MemberChoice::Random,
            estimate: PresenceEstimate::Sampled,
        }
    }
}

impl EvolutionParams {
    /// Evolution as PluriBus §4.1 specifies it: one fraction `r`, random members, the
    /// immediate decoder.
    pub fn paper() -> EvolutionParams {
        EvolutionParams {
            loss_offset: 0.0,
            decoder: XorDecoder::Immediate,
            members: MemberChoice::Random,
            estimate: PresenceEstimate::Fraction,
        }
    }
}

impl Default for LtParams {
    fn default() -> Self {
        LtParams {
            c: 0.9,
            delta: 0.1,
            decoder: XorDecoder::Immediate,
        }
    }
}

impl Default for XorParams {
    fn default() -> Self {
        XorParams {
            redundancy_pct: 10,
            decoder: XorDecoder::Immediate,
        }
    }
}

impl Default for ReedSolomonParams {
    fn default() -> Self {
        ReedSolomonParams {
            redundancy_pct: 10,
            block: 10,
            flush_ms: 10.0,
        }
    }
}

impl Default for RetransmitParams {
    fn default() -> Self {
        RetransmitParams {
            nack_delay_ms: 5.0,
            max_nacks: 3,
            trigger: NackTrigger::PerPath,
        }
    }
}

/// The table form of [`LossRecoveryKind`]; the name form is handled by hand.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum LossRecoveryTable {
    None,
    Evolution(EvolutionParams),
    Lt(LtParams),
    Xor(XorParams),
    ReedSolomon(ReedSolomonParams),
    Retransmit(RetransmitParams),
}

impl LossRecoveryKind {
    /// Every kind's name, as written in configs.
    pub const NAMES: [&'static str; 6] = [
        "none",
        "evolution",
        "lt",
        "xor",
        "reed-solomon",
        "retransmit",
    ];

    /// The kind called `name`, with default parameters.
    pub fn from_name(name: &str) -> Option<LossRecoveryKind> {
        Some(match name {
            "none" => LossRecoveryKind::None,
            "evolution" => LossRecoveryKind::Evolution(EvolutionParams::default()),
            "lt" => LossRecoveryKind::Lt(LtParams::default()),
            "xor" => LossRecoveryKind::Xor(XorParams::default()),
            "reed-solomon" => LossRecoveryKind::ReedSolomon(ReedSolomonParams::default()),
            "retransmit" => LossRecoveryKind::Retransmit(RetransmitParams::default()),
            _ => return None,
        })
    }

    /// The kind's name, as written in configs.
    pub fn name(&self) -> &'static str {
        match self {
            LossRecoveryKind::None => "none",
            LossRecoveryKind::Evolution(_) => "evolution",
            LossRecoveryKind::Lt(_) => "lt",
            LossRecoveryKind::Xor(_) => "xor",
            LossRecoveryKind::ReedSolomon(_) => "reed-solomon",
            LossRecoveryKind::Retransmit(_) => "retransmit",
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::LossRecovery(m));
        let ms = |v: f64, key: &str| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                bad(format!("{key} = {v}: expected milliseconds >= 0"))
            }
        };
        match *self {
            LossRecoveryKind::None => Ok(()),
            LossRecoveryKind::Evolution(p) => {
                if (-1.0..=1.0).contains(&p.loss_offset) {
                    Ok(())
                } else {
                    bad(format!("loss_offset = {}: expected -1 to 1", p.loss_offset))
                }
            }
            LossRecoveryKind::Lt(p) => {
                if !(p.c.is_finite() && p.c > 0.0) {
                    bad(format!("c = {}: expected a number > 0", p.c))
                } else if !(p.delta > 0.0 && p.delta < 1.0) {
                    bad(format!("delta = {}: expected 0 < delta < 1", p.delta))
                } else {
                    Ok(())
                }
            }
            LossRecoveryKind::Xor(p) => pct(p.redundancy_pct),
            LossRecoveryKind::ReedSolomon(p) => {
                pct(p.redundancy_pct)?;
                if !(1..=255).contains(&p.block) {
                    return bad(format!("block = {}: expected 1 to 255 packets", p.block));
                }
                ms(p.flush_ms, "flush_ms")
            }
            LossRecoveryKind::Retransmit(p) => {
                if p.max_nacks == 0 {
                    return bad("max_nacks = 0: expected at least 1".to_owned());
                }
                ms(p.nack_delay_ms, "nack_delay_ms")
            }
        }
    }

    fn table(self) -> LossRecoveryTable {
        match self {
            LossRecoveryKind::None => LossRecoveryTable::None,
            LossRecoveryKind::Evolution(p) => LossRecoveryTable::Evolution(p),
            LossRecoveryKind::Lt(p) => LossRecoveryTable::Lt(p),
            LossRecoveryKind::Xor(p) => LossRecoveryTable::Xor(p),
            LossRecoveryKind::ReedSolomon(p) => LossRecoveryTable::ReedSolomon(p),
            LossRecoveryKind::Retransmit(p) => LossRecoveryTable::Retransmit(p),
        }
    }
}

fn pct(v: u32) -> Result<(), ConfigError> {
    if (1..=100).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError::LossRecovery(format!(
            "redundancy_pct = {v}: expected 1 to 100"
        )))
    }
}

impl From<LossRecoveryTable> for LossRecoveryKind {
    fn from(t: LossRecoveryTable) -> Self {
        match t {
            LossRecoveryTable::None => LossRecoveryKind::None,
            LossRecoveryTable::Evolution(p) => LossRecoveryKind::Evolution(p),
            LossRecoveryTable::Lt(p) => LossRecoveryKind::Lt(p),
            LossRecoveryTable::Xor(p) => LossRecoveryKind::Xor(p),
            LossRecoveryTable::ReedSolomon(p) => LossRecoveryKind::ReedSolomon(p),
            LossRecoveryTable::Retransmit(p) => LossRecoveryKind::Retransmit(p),
        }
    }
}

/// A label for reports: the name, then any parameter that differs from its default.
impl std::fmt::Display for LossRecoveryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        let dec = |d: XorDecoder| match d {
            XorDecoder::Immediate => "",
            XorDecoder::Peeling => " peeling",
        };
        match *self {
            LossRecoveryKind::None => Ok(()),
            LossRecoveryKind::Evolution(p) => {
                if p.loss_offset != 0.0 {
                    write!(f, " offset {:+}", p.loss_offset)?;
                }
                if p.members == MemberChoice::Coverage {
                    f.write_str(" coverage")?;
                }
                if p.estimate == PresenceEstimate::Fraction {
                    f.write_str(" fraction")?;
                }
                f.write_str(dec(p.decoder))
            }
            LossRecoveryKind::Lt(p) => {
                if p != LtParams::default() {
                    write!(f, " c {} delta {}", p.c, p.delta)?;
                }
                f.write_str(dec(p.decoder))
            }
            LossRecoveryKind::Xor(p) => write!(f, " {}%{}", p.redundancy_pct, dec(p.decoder)),
            LossRecoveryKind::ReedSolomon(p) => {
                write!(f, " {}% of {}", p.redundancy_pct, p.block)
            }
            LossRecoveryKind::Retransmit(_) => Ok(()),
        }
    }
}

/// A name when every parameter has its default (so configs written as names stay names),
/// otherwise the table.
impl Serialize for LossRecoveryKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match LossRecoveryKind::from_name(self.name()) {
            Some(d) if d == *self => s.serialize_str(self.name()),
            _ => self.table().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for LossRecoveryKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = LossRecoveryKind;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "a loss-recovery name ({}) or a table {{ kind = \"...\", ... }}",
                    LossRecoveryKind::NAMES.join(", ")
                )
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                LossRecoveryKind::from_name(v)
                    .ok_or_else(|| E::unknown_variant(v, &LossRecoveryKind::NAMES))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                let t = LossRecoveryTable::deserialize(
                    serde::de::value::MapAccessDeserializer::new(map),
                )?;
                let kind = LossRecoveryKind::from(t);
                kind.validate().map_err(serde::de::Error::custom)?;
                Ok(kind)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// What one end knows about one of its paths before measuring it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathConfig {
    /// The same id at both ends.
    pub id: crate::PathId,
    /// Expected capacity in bits per second of the direction this end sends on, used until
    /// the receiver's estimate arrives (PluriBus §4.2: "We bootstrap nodes with expected
    /// capacity of the paths"); 0 when unknown ([`crate::path::capacity::UNKNOWN_BPS`]
    /// stands in until the first estimate, with [`crate::path::START_WINDOW_BYTES`]).
    pub tx_capacity_bps: u64,
    /// Expected capacity of the direction this end receives on: the starting point of its
    /// capacity estimator; 0 when unknown (reported as unknown until measured, see
    /// [`crate::path::capacity::UNKNOWN_BPS`]).
    pub rx_capacity_bps: u64,
}

impl PathConfig {
    /// A path whose capacity nobody configured, as a gateway or server runs one by
    /// default: each direction is learned from the receiver's estimate, and
    /// [`crate::path::capacity::UNKNOWN_BPS`] stands in for the send direction until the
    /// first estimate arrives, with at most [`crate::path::START_WINDOW_BYTES`] in flight.
    pub fn learned(id: crate::PathId) -> PathConfig {
        PathConfig {
            id,
            tx_capacity_bps: 0,
            rx_capacity_bps: 0,
        }
    }
}

/// Session-wide settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Carried in every datagram so a load balancer can route by it.
    pub session_id: u32,
    pub scheduler: SchedulerKind,
    pub loss_recovery: LossRecoveryKind,
    /// How long the resequencing buffer holds packets behind a hole before releasing them
    /// (PluriBus §5: 50 ms).
    pub hole_timeout: Duration,
    /// Interval over which the receiver measures send and receive rates for the capacity
    /// estimate (PluriBus §4.2: 500 ms).
    pub capacity_interval: Duration,
    /// How often the receiver reports its per-path estimates to the sender.
    pub report_interval: Duration,
    /// Data that arrived this long ago without any datagram going back to carry its path
    /// ack (one-way traffic) gets a standalone ack, like TCP's delayed ACK.
    pub ack_delay: Duration,
    /// A heartbeat is sent on a path that carried nothing for this long (PluriBus §2.2 probes
    /// every 100 ms).
    pub heartbeat_interval: Duration,
    /// A path that received nothing for this long is declared down.
    pub path_timeout: Duration,
    /// Bytes each datagram carries on the wire besides braid's own (IPv4 + UDP: 28). The
    /// estimators count them: capacity is consumed by whole datagrams.
    pub datagram_overhead: usize,
    /// A path whose RTT was last measured longer ago than this gets the next report, so
    /// that its echo measures it (reports otherwise go on the fastest path).
    pub rtt_refresh: Duration,
    /// Largest inner packet accepted by `send`, in bytes.
    pub max_packet_size: usize,
    /// Bound on packets waiting in the send queue; beyond it new packets are dropped and
    /// counted.
    pub send_queue_limit: usize,
    /// Bound on packets held in the resequencing buffer.
    pub reorder_limit: usize,
    /// Seed for every random choice the engine makes (for example which packets a coded
    /// packet combines).
    pub seed: u64,
    /// Key of the flow table's hash (aHash, see [`crate::flow`]). It comes from outside the
    /// engine: the daemons draw it from the operating system's random source, so that the
    /// flows that collide in a table cannot be known (and crafted) from outside; the
    /// simulator derives it from the scenario seed, so that runs repeat exactly.
    pub flow_hash_seed: u64,
    /// How the hole timeout is set: fixed at `hole_timeout`, or adapted to the measured
    /// delay gap between paths (see [`crate::reorder::HoleTimeout`]).
    pub hole_timeout_mode: HoleTimeoutMode,
    /// Traffic classes, matched in order; unmatched flows use `scheduler`.
    pub classes: Vec<crate::class::ClassConfig>,
    /// How the TCP connections of flows in no class cross: split at the gateway and carried
    /// on the multipath stream (the default: bulk goodput and web completion times both
    /// measured better than the packet tunnel's, docs/benchmarks.md,
    /// [`crate::class::default_tcp_transport`]), or inside the packet
    /// tunnel. The engine itself carries packets only; the daemons and the simulator read
    /// this to decide which connections they split ([`crate::class::splits`]).
    pub tcp_transport: crate::class::Transport,
    /// Most inner flows tracked at once.
    pub max_flows: usize,
    /// A flow idle this long is forgotten.
    pub flow_idle_timeout: Duration,
    /// Set aside paths that lose far more than the best one (see
    /// [`crate::sched::guard`]).
    pub loss_guard: bool,
    /// Active queue management of the send queue: CoDel on the bond's standing queue
    /// (see `session/aqm.rs`). Off by default: it shortens the inner TCP's queues and
    /// recovery after a path failure, but costs a single long-RTT flow throughput
    /// (osctp-fig9, b-400: 0.90 -> 0.70 of capacity).
    pub aqm: bool,
    /// Keep the predicted delivery time of each data packet sent (a bounded log, for
    /// measuring the delay estimator's accuracy; PluriBus Fig 17).
    pub record_predictions: bool,
    /// Per-flow resequencing, beyond PluriBus §5 (which orders the whole session): a data
    /// packet is marked for delivery on arrival when nothing earlier of its inner flow can
    /// be waiting at the receiver (see [`crate::flow::FlowTable::deliver_on_arrival`]), so
    /// a hole holds back only the packets of other paths' flows, not every flow.
    pub flow_order: bool,
    /// Compress the inner IPv4/TCP headers of the packets this end sends (see
    /// [`crate::compress`]; beyond the papers). The receiving end always decompresses.
    pub header_compression: bool,
    /// Metered paths and what their bytes cost (oSCTP §III-A, §IV-F; see
    /// [`crate::metered`]); `None`: every path is cheap, as if there were no model.
    pub metering: Option<crate::metered::MeteringConfig>,
    /// How reordering between paths is hidden from the inner TCP: resequenced at the
    /// receiving end (PluriBus §5), or let through with the striping end's Reverse Path
    /// Controller fixing the sender's view of the ACKs (PRISM §5-6), or not at all.
    pub reordering: Reordering,
    /// Per-path congestion control in packet mode: the rate window alone, or with the
    /// loss/delay factor on it (see [`PathCc`]).
    pub path_cc: PathCc,
}

/// Per-path congestion control in packet mode (`crate::path::window`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathCc {
    /// Each path's window is its delivery rate times its feedback delay plus a queue
    /// allowance, in the style of BBR (`path/window.rs`).
    #[default]
    Rate,
    /// The rate window times a factor cut by [`crate::path::backoff::BETA`] on a loss at
    /// the path's own bottleneck or a long bottleneck wait, once per round trip, and grown
    /// back additively (`path/backoff.rs`).
    LossDelay,
}

/// How reordering between paths is hidden from the inner transport.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reordering {
    /// The receiving end holds packets behind a hole (`hole_timeout`) and delivers in order.
    #[default]
    Resequence,
    /// The receiving end delivers on arrival; the striping end runs PRISM's Reverse Path
    /// Controller ([`crate::rpc`]) on each striped TCP flow's returning ACKs and feeds the
    /// losses it detects per link to the scheduler (ADAS's link weights).
    Rpc,
    /// The receiving end delivers on arrival and nothing hides the reordering (PRISM's
    /// vanilla striping).
    None,
    /// As `rpc` with ACK re-sequencing only: no per-link loss detection, no negative ACKs,
    /// no state machine (PRISM Figure 11's middle system).
    AckResequencing,
}

/// How the resequencing buffer's hole timeout is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoleTimeoutMode {
    /// Always `hole_timeout` (PluriBus §5: 50 ms).
    Fixed,
    /// From the measured delay gap between paths, `hole_timeout` until measured.
    #[default]
    Adaptive,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            session_id: 1,
            scheduler: SchedulerKind::default(),
            loss_recovery: LossRecoveryKind::default(),
            hole_timeout: Duration::from_millis(50),
            capacity_interval: Duration::from_millis(500),
            report_interval: Duration::from_millis(100),
            ack_delay: Duration::from_millis(20),
            heartbeat_interval: Duration::from_millis(100),
            path_timeout: Duration::from_millis(500),
            datagram_overhead: 28,
            rtt_refresh: Duration::from_secs(1),
            max_packet_size: 1500,
            send_queue_limit: 4096,
            reorder_limit: 4096,
            seed: 0,
            flow_hash_seed: 0,
            hole_timeout_mode: HoleTimeoutMode::default(),
            classes: Vec::new(),
            tcp_transport: crate::class::Transport::SplitTcp,
            max_flows: 65_536,
            flow_idle_timeout: Duration::from_secs(120),
            record_predictions: false,
            loss_guard: true,
            flow_order: false,
            aqm: false,
            header_compression: true,
            metering: None,
            reordering: Reordering::default(),
            path_cc: PathCc::default(),
        }
    }
}

/// A configuration the engine cannot run with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("a session needs at least one path")]
    NoPaths,
    #[error("path id {0} is configured twice")]
    DuplicatePath(crate::PathId),
    #[error("{0} must be greater than zero")]
    Zero(&'static str),
    #[error("max_packet_size {0} is out of range: expected 1 to 65000 bytes")]
    PacketSize(usize),
    #[error("{0} traffic classes: at most 64 are supported")]
    TooManyClasses(usize),
    #[error(
        "traffic class '{0}' sets its own loss_recovery: classes share the session's loss \
         recovery for now; remove the key or set the same method as [engine]"
    )]
    ClassLossRecovery(String),
    #[error("loss_recovery: {0}")]
    LossRecovery(String),
    #[error("metering: {0}")]
    Metering(String),
}

impl Config {
    /// Checks the settings the engine depends on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let durations = [
            (self.capacity_interval, "capacity_interval"),
            (self.report_interval, "report_interval"),
            (self.ack_delay, "ack_delay"),
            (self.heartbeat_interval, "heartbeat_interval"),
            (self.path_timeout, "path_timeout"),
        ];
        for (d, name) in durations {
            if d.is_zero() {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.send_queue_limit == 0 {
            return Err(ConfigError::Zero("send_queue_limit"));
        }
        if self.reorder_limit == 0 {
            return Err(ConfigError::Zero("reorder_limit"));
        }
        if self.max_packet_size == 0 || self.max_packet_size > 65_000 {
            return Err(ConfigError::PacketSize(self.max_packet_size));
        }
        if self.max_flows == 0 {
            return Err(ConfigError::Zero("max_flows"));
        }
        if self.classes.len() > 64 {
            return Err(ConfigError::TooManyClasses(self.classes.len()));
        }
        if let Some(c) = self.classes.iter().find(|c| {
            c.loss_recovery
                .as_ref()
                .is_some_and(|l| *l != self.loss_recovery)
        }) {
            return Err(ConfigError::ClassLossRecovery(c.name.clone()));
        }
        if let Some(m) = &self.metering {
            m.validate()
                .map_err(|e| ConfigError::Metering(e.to_string()))?;
        }
        self.loss_recovery.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct Engine {
        loss_recovery: LossRecoveryKind,
    }

    fn parse(v: serde_json::Value) -> Result<LossRecoveryKind, String> {
        serde_json::from_value::<Engine>(serde_json::json!({ "loss_recovery": v }))
            .map(|e| e.loss_recovery)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn loss_recovery_is_a_name_or_a_table() {
        use serde_json::json;
        assert_eq!(
            parse(json!("evolution")),
            Ok(LossRecoveryKind::Evolution(EvolutionParams::default()))
        );
        assert_eq!(
            parse(json!({ "kind": "xor", "redundancy_pct": 50 })),
            Ok(LossRecoveryKind::Xor(XorParams {
                redundancy_pct: 50,
                ..XorParams::default()
            }))
        );
        assert_eq!(
            parse(json!({ "kind": "evolution", "loss_offset": -0.2, "decoder": "peeling" })),
            Ok(LossRecoveryKind::Evolution(EvolutionParams {
                loss_offset: -0.2,
                decoder: XorDecoder::Peeling,
                ..EvolutionParams::default()
            }))
        );
        let coverage = EvolutionParams {
            members: MemberChoice::Coverage,
            ..EvolutionParams::default()
        };
        assert_eq!(
            parse(json!({ "kind": "evolution", "members": "coverage" })),
            Ok(LossRecoveryKind::Evolution(coverage))
        );
        assert_eq!(
            LossRecoveryKind::Evolution(coverage).to_string(),
            "evolution coverage"
        );
        assert!(parse(json!({ "kind": "evolution", "members": "newest" })).is_err());
        assert_eq!(
            parse(json!({ "kind": "evolution", "estimate": "fraction" })),
            Ok(LossRecoveryKind::Evolution(EvolutionParams::paper()))
        );
        assert_eq!(
            LossRecoveryKind::Evolution(EvolutionParams::paper()).to_string(),
            "evolution fraction"
        );
        assert!(parse(json!({ "kind": "evolution", "estimate": "exact" })).is_err());
        let e = parse(json!("fountain")).unwrap_err();
        assert!(e.contains("reed-solomon"), "{e}");
        let e = parse(json!({ "kind": "xor", "redundancy_pct": 0 })).unwrap_err();
        assert!(e.contains("redundancy_pct = 0"), "{e}");
        let e = parse(json!({ "kind": "lt", "k": 3 })).unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
        // Defaults serialize as names, anything else as a table; both read back.
        for k in [
            LossRecoveryKind::None,
            LossRecoveryKind::Lt(LtParams::default()),
            LossRecoveryKind::ReedSolomon(ReedSolomonParams {
                block: 20,
                ..ReedSolomonParams::default()
            }),
        ] {
            let v = serde_json::to_value(Engine { loss_recovery: k }).unwrap();
            assert_eq!(parse(v["loss_recovery"].clone()), Ok(k));
        }
        assert_eq!(
            serde_json::to_value(LossRecoveryKind::None).unwrap(),
            json!("none")
        );
        assert_eq!(
            LossRecoveryKind::Xor(XorParams::default()).to_string(),
            "xor 10%"
        );
    }
}
