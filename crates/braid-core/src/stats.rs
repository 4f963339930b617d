//! Counters and estimator snapshots, for status views, metrics and the simulator's reports.

use serde::Serialize;

use crate::reorder::ReorderStats;
use crate::PathId;

/// One path's counters and current estimates.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PathStats {
    pub id: PathId,
    /// It works both ways and the loss guard allows it (we hear it, the peer hears it).
    pub usable: bool,
    /// Metered, and held from data by its budget or by a cheap path with room: it still
    /// carries heartbeats, reports and acks (`session/metering.rs`).
    pub metered_hold: bool,
    /// Set aside by the loss guard.
    pub loss_guarded: bool,
    /// Times the path was declared failed because its acknowledgements stalled while
    /// other paths delivered, and times it was revived (oSCTP §IV-E).
    pub tx_stalls: u64,
    pub tx_revivals: u64,
    /// We hear it.
    pub rx_live: bool,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_data_packets: u64,
    pub tx_repair_packets: u64,
    pub tx_control_packets: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Capacity of the direction we send on (the peer's estimate).
    pub tx_capacity_bps: u64,
    /// How often the peer's estimate changed, and its smallest value.
    pub tx_capacity_changes: u64,
    /// Times the sender's queue model was corrected by the peer's observations.
    pub queue_corrections: u64,
    pub tx_capacity_min_bps: u64,
    /// Our estimate of the direction we receive on.
    pub rx_capacity_bps: u64,
    /// Loss of the direction we send on (the peer's estimate).
    pub tx_loss: f64,
    /// The same over the last few hundred datagrams, from acknowledgements.
    pub tx_long_loss: f64,
    /// Our loss estimate of the direction we receive on.
    pub rx_loss: f64,
    /// Path sequence numbers we inferred lost.
    pub rx_lost: u64,
    /// Datagrams that arrived out of order within the path.
    pub rx_reordered: u64,
    pub srtt_ms: Option<f64>,
    /// Smallest recent delay from a send until the peer's feedback reported it.
    pub feedback_ms: Option<f64>,
    /// Sender's queue estimate at the latest instant the engine saw.
    pub queue_ms: f64,
}

/// The whole session's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionStats {
    pub paths: Vec<PathStats>,
    /// Inner header compression, both directions (`compress.rs`).
    pub header_compression: crate::compress::CompressStats,
    /// Inner packets accepted by `send`.
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// Inner packets refused by `send` because the send queue was full.
    pub send_queue_drops: u64,
    /// Inner packets dropped at the head of the send queue because their traffic class's
    /// own metered budget was spent and no cheap path could take them: held, they would
    /// have blocked every class behind them (`session/metering.rs`).
    pub class_budget_drops: u64,
    /// Inner packets refused by `send` because they exceed `max_packet_size`.
    pub oversize_drops: u64,
    /// Inner packets handed out by `poll_deliver`.
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    /// Datagrams dropped because they did not parse.
    pub malformed_datagrams: u64,
    /// Datagrams for another session.
    pub wrong_session: u64,
    /// Datagrams naming a path this session does not have.
    pub unknown_path: u64,
    /// Repair datagrams (coded packets, retransmissions) sent.
    pub repair_sent: u64,
    /// Data packets recovered from repair datagrams.
    pub recovered: u64,
    /// Data packets put back in the send queue because the path they went on failed
    /// before the peer acknowledged them (see `session/failover.rs`).
    pub failover_resent: u64,
    /// Inner TCP data segments refused by the send queue's active queue management
    /// (`session/aqm.rs`).
    pub aqm_drops: u64,
    /// Data packets outstanding on a failed path and not resent, because a later segment
    /// of the same inner TCP flow went on a live path (its own retransmission recovers
    /// them, see `session/failover.rs`).
    pub failover_left: u64,
    /// Queued inner TCP data dropped from the send queue when a path failed: the failed
    /// path's share of it (see `session/failover.rs`).
    pub failover_trimmed: u64,
    pub reports_sent: u64,
    pub reports_received: u64,
    /// Events not pulled before the event queue filled.
    pub events_dropped: u64,
    pub reorder: ReorderStats,
    pub flows: crate::flow::FlowStats,
    /// The loss-recovery method's counters and state.
    pub loss_recovery: LossRecoveryStats,
    /// Each metered path's budget and use; empty without metering.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metered: Vec<MeteredStats>,
}

/// One metered path's budget and use (oSCTP §IV-F; `session/metering.rs`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MeteredStats {
    pub id: PathId,
    /// The current interval's budget, and what the path sent of it.
    pub budget_bytes: u64,
    pub interval_sent_bytes: u64,
    /// The rate the model set for the current interval, bit/s.
    pub planned_bps: f64,
    /// Bytes sent and received on the path since the session started, every kind of
    /// datagram (a cap counts both).
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// Scheduling intervals closed, and those in which the model gave the path a budget
    /// (oSCTP Table I's "3G fired").
    pub intervals: u64,
    pub intervals_used: u64,
    /// Time the path was held with its budget spent, ms.
    pub throttled_ms: f64,
    /// Whether it is held now (budget or cap spent).
    pub held: bool,
    /// What is left of its data cap, when it has one.
    pub cap_remaining_bytes: Option<u64>,
}

/// Counters and state of the session's loss-recovery method (`crate::fec`). Sender-side
/// fields describe what this end sent; receiver-side fields what it received from the peer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LossRecoveryStats {
    /// The method's name.
    pub method: &'static str,
    /// Coded (XOR) packets sent.
    pub coded_sent: u64,
    /// Data packets combined into them, summed (over `coded_sent`: the mean degree).
    pub coded_members: u64,
    /// Reed-Solomon recovery shards sent.
    pub parity_sent: u64,
    /// Data packets sent again after a nack.
    pub retransmissions_sent: u64,
    /// Nacked packets no longer held for retransmission.
    pub nacked_unavailable: u64,
    /// Nacks sent, and received.
    pub nacks_sent: u64,
    pub nacks_received: u64,
    /// W of PluriBus §4.1: data packets in the sender's coding window now.
    pub window: u64,
    /// Packets pushed out of a full window.
    pub window_drops: u64,
    /// r of PluriBus §4.1: the estimated fraction of W present at the receiver.
    pub present_fraction: f64,
    /// Coded packets received.
    pub coded_received: u64,
    /// Coded packets with no missing member.
    pub coded_redundant: u64,
    /// Coded packets with more than one missing member on arrival.
    pub coded_undecodable: u64,
    /// Coded or parity packets inconsistent with the packets they name.
    pub coded_malformed: u64,
    /// Reed-Solomon recovery shards received.
    pub parity_received: u64,
    /// Blocks given up with packets still missing.
    pub parity_blocks_failed: u64,
    /// Data packets recovered (from coded packets or recovery shards).
    pub recovered: u64,
    /// Of those, recovered from coded packets kept for peeling.
    pub recovered_by_peeling: u64,
    /// Kept coded packets pushed out by newer ones.
    pub held_evicted: u64,
    /// Missing packets given up after the last nack.
    pub nack_gave_up: u64,
}
