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
    /// How the hole timeout is set: fixed at `hole_timeout`, or adapted to the measured
    /// delay gap between paths (see [`crate::reorder::HoleTimeout`]).
    pub hole_timeout_mode: HoleTimeoutMode,
    /// Traffic classes, matched in order; unmatched flows use `scheduler`.
    pub classes: Vec<crate::class::ClassConfig>,
    /// Most inner flows tracked at once.
    pub max_flows: usize,
    /// A flow idle this long is forgotten.
    pub flow_idle_timeout: Duration,
    /// Set aside paths that lose far more than the best one (see
    /// [`crate::sched::guard`]).
    pub loss_guard: bool,
    /// Keep the predicted delivery time of each data packet sent (a bounded log, for
    /// measuring the delay estimator's accuracy; PluriBus Fig 17).
    pub record_predictions: bool,
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
            hole_timeout_mode: HoleTimeoutMode::default(),
            classes: Vec::new(),
            max_flows: 65_536,
            flow_idle_timeout: Duration::from_secs(120),
            record_predictions: false,
            loss_guard: true,
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
        if let Some(c) = self
            .classes
            .iter()
            .find(|c| c.loss_recovery.is_some_and(|l| l != self.loss_recovery))
        {
            return Err(ConfigError::ClassLossRecovery(c.name.clone()));
        }
        Ok(())
    }
}
