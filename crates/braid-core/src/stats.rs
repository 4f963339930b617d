//! Counters and estimator snapshots, for status views, metrics and the simulator's reports.

use serde::Serialize;

use crate::PathId;

/// One path's counters and current estimates.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PathStats {
    pub id: PathId,
    pub live: bool,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
}

/// The whole session's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionStats {
    pub paths: Vec<PathStats>,
    /// Inner packets accepted by `send`.
    pub sent_packets: u64,
    /// Inner packets handed out by `poll_deliver`.
    pub delivered_packets: u64,
    /// Datagrams dropped because they did not parse or did not belong here.
    pub malformed_datagrams: u64,
}
