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
    pub tx_capacity_bps: u64,
    /// Expected capacity of the direction this end receives on: the starting point of its
    /// capacity estimator.
    pub rx_capacity_bps: u64,
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
            path_timeout: Duration::from_millis(500),
            datagram_overhead: 28,
            rtt_refresh: Duration::from_secs(1),
            max_packet_size: 1500,
            send_queue_limit: 4096,
            reorder_limit: 4096,
            seed: 0,
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
}

impl Config {
    /// Checks the settings the engine depends on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let durations = [
            (self.capacity_interval, "capacity_interval"),
            (self.report_interval, "report_interval"),
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
        Ok(())
    }
}
