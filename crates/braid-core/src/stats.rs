//! Counters and estimator snapshots, for status views, metrics and the simulator's reports.

use serde::Serialize;

use crate::reorder::ReorderStats;
use crate::PathId;

/// One path's counters and current estimates.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PathStats {
    pub id: PathId,
    /// Schedulers may use it (we hear it, the peer hears it, the loss guard allows it).
    pub usable: bool,
    /// Set aside by the loss guard.
    pub loss_guarded: bool,
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
    /// Sender's queue estimate at the latest instant the engine saw.
    pub queue_ms: f64,
}

/// The whole session's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionStats {
    pub paths: Vec<PathStats>,
    /// Inner packets accepted by `send`.
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// Inner packets refused by `send` because the send queue was full.
    pub send_queue_drops: u64,
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
    pub reports_sent: u64,
    pub reports_received: u64,
    /// Events not pulled before the event queue filled.
    pub events_dropped: u64,
    pub reorder: ReorderStats,
    pub flows: crate::flow::FlowStats,
}
