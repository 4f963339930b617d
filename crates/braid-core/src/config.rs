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

/// The path scheduler a session uses. Later issues add the rest behind [`crate::sched::Scheduler`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    /// Each packet on the next live path in turn.
    #[default]
    RoundRobin,
}

/// The loss-recovery method a session uses. Later issues add the rest behind
/// [`crate::fec::LossRecovery`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossRecoveryKind {
    /// No loss masking: losses reach the inner transport.
    #[default]
    None,
}

/// What one end knows about one of its paths before measuring it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathConfig {
    /// The same id at both ends.
    pub id: crate::PathId,
    /// Expected capacity in bits per second of the direction this end sends on, used until
    /// the receiver's estimate arrives (PluriBus §4.2: "We bootstrap nodes with expected
    /// capacity of the paths").
    pub expected_capacity_bps: u64,
}

/// Session-wide settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// A heartbeat is sent on a path that carried nothing for this long (PluriBus §2.2 probes
    /// every 100 ms).
    pub heartbeat_interval: Duration,
    /// A path that received nothing for this long is declared down.
    pub path_timeout: Duration,
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
            heartbeat_interval: Duration::from_millis(100),
            path_timeout: Duration::from_millis(1000),
            max_packet_size: 1500,
            send_queue_limit: 4096,
            reorder_limit: 4096,
            seed: 0,
        }
    }
}
