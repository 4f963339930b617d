//! What `braid status`, the metrics endpoint and the logs show: a snapshot of the daemon,
//! refreshed by the event loop and read by the control and metrics threads.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// One path, as a bonding product shows it (OpenMPTCProuter, Speedify): state, rates,
/// RTT, loss, bytes and the bytes that cost money.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PathStatus {
    pub id: u8,
    pub name: String,
    /// `up` (works both ways; a metered path its budget holds from data is up too), `down` (nothing heard), `no-link` (interface missing or down),
    /// `guarded` (set aside by the loss guard), `one-way` (we hear it, the peer does not).
    pub state: String,
    /// Where its datagrams go (the server) or come from (a gateway).
    pub peer: Option<String>,
    /// The local interface or address it is bound to (gateway).
    pub local: Option<String>,
    pub tx_bps: f64,
    pub rx_bps: f64,
    pub rtt_ms: Option<f64>,
    /// Loss of the direction we send on (the peer's estimate), 0 to 1.
    pub tx_loss: f64,
    /// Loss of the direction we receive on, 0 to 1.
    pub rx_loss: f64,
    pub capacity_bps: u64,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub metered: bool,
    /// Bytes sent and received on a metered path (what the operator pays for).
    pub metered_bytes: u64,
    /// Times the path was declared failed because its acknowledgements stalled while
    /// other paths delivered (its packets in flight were resent elsewhere), and times it
    /// came back (braid-core's failover detection).
    #[serde(default)]
    pub tx_stalls: u64,
    #[serde(default)]
    pub tx_revivals: u64,
    /// A gateway's metered uplink: this cap period's bytes, the cap, and the engine's
    /// budget (none for a cheap uplink, and at a server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meter: Option<MeterStatus>,
}

/// A metered uplink's use of its cap and its budget for the current scheduling interval
/// (oSCTP §IV-F; docs/daemon.md).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MeterStatus {
    /// Bytes sent and received this cap period, over every session and restart
    /// (`crate::meter_ledger`).
    pub period_bytes: u64,
    /// The cap, bytes, when one is set.
    pub cap_bytes: Option<u64>,
    /// The cap period's start and end, UNIX seconds (with a cap).
    pub period_start: Option<u64>,
    pub period_end: Option<u64>,
    /// `period_bytes` at the rate of the period so far, carried to its end.
    pub projected_bytes: Option<u64>,
    /// This interval's budget and what was sent of it.
    pub budget_bytes: u64,
    pub interval_sent_bytes: u64,
    /// Whether the engine holds the uplink now (its budget or cap spent), and for how long
    /// in all this session, ms.
    pub held: bool,
    pub throttled_ms: f64,
}

/// One session: a gateway's tunnel (at the server, one per gateway).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SessionStatus {
    pub session_id: u32,
    /// Gateway name (server side) or the server's endpoint (gateway side).
    pub peer: String,
    pub tunnel_address: Option<String>,
    pub established: bool,
    pub uptime_s: f64,
    pub paths: Vec<PathStatus>,
    pub inner_tx_packets: u64,
    pub inner_tx_bytes: u64,
    pub inner_rx_packets: u64,
    pub inner_rx_bytes: u64,
    pub recovered: u64,
    /// Holes in the data sequence given up after the hole timeout.
    pub holes_skipped: u64,
    /// Data packets resent on another path because the path they were sent on stalled.
    #[serde(default)]
    pub failover_resent: u64,
    /// Every counter of the session's engine ([`braid_core::SessionStats`]: per-path
    /// estimates, resequencer, loss recovery, send queue), for `braid status --json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<serde_json::Value>,
}

/// Counters of datagrams and packets dropped before or around the engines.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Drops {
    /// Datagrams that failed authentication (corrupted, forged, unknown key).
    pub unauthenticated: u64,
    /// Datagrams replayed or too old.
    pub replayed: u64,
    /// Datagrams for no known session (dropped without keeping any state).
    pub unknown_session: u64,
    /// Handshakes from keys not in the config.
    pub unknown_key: u64,
    /// Datagrams the engine refused (malformed, wrong path).
    pub engine_rejected: u64,
    /// Inner packets whose source address is not the sender's (a gateway spoofing another).
    pub spoofed: u64,
    /// Inner packets for no gateway's address (server) or refused by the engine's queue.
    pub no_route: u64,
    /// Datagrams the sockets refused to send.
    pub send_errors: u64,
    /// Inner packets the TUN device refused.
    pub tun_errors: u64,
    /// Gateways refused because the table was full.
    pub table_full: u64,
    /// Datagrams a relay carried that were refused: unknown, revoked, forged or replayed
    /// lender envelopes, and relays lending to a session whose owner did not authorize
    /// them (server) or a path another relay lends.
    #[serde(default)]
    pub lent_refused: u64,
}

/// The whole daemon.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// `gateway` or `server`.
    pub role: String,
    pub tun: String,
    pub mtu: u16,
    pub encrypted: bool,
    pub offload: bool,
    pub uptime_s: f64,
    pub sessions: Vec<SessionStatus>,
    pub drops: Drops,
    /// The security layer's counters (handshakes, datagrams opened and sealed, drops by
    /// reason); absent without encryption.
    pub security: Option<serde_json::Value>,
    /// System calls and batching, to see the offloads at work.
    pub io: IoStatus,
}

/// Batching counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IoStatus {
    pub tun_reads: u64,
    pub tun_rx_packets: u64,
    pub tun_writes: u64,
    pub tun_tx_packets: u64,
    pub udp_sends: u64,
    pub udp_tx_datagrams: u64,
    pub udp_recvs: u64,
    pub udp_rx_datagrams: u64,
}

/// The snapshot shared with the control and metrics threads.
pub type Shared = Arc<Mutex<Status>>;

/// Rates from successive byte counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct RateMeter {
    last_bytes: u64,
    last_at_us: u64,
    rate_bps: f64,
}

impl RateMeter {
    /// Updates with the counter's value at `now_us`; returns bit/s over the interval.
    pub fn update(&mut self, bytes: u64, now_us: u64) -> f64 {
        let dt = now_us.saturating_sub(self.last_at_us);
        if self.last_at_us != 0 && dt > 0 {
            let db = bytes.saturating_sub(self.last_bytes);
            self.rate_bps = db as f64 * 8.0 * 1e6 / dt as f64;
        }
        self.last_bytes = bytes;
        self.last_at_us = now_us;
        self.rate_bps
    }
}

/// The path's state word from the engine's view of it.
pub fn path_state(p: &braid_core::PathStats, link_up: bool) -> &'static str {
    if !link_up {
        "no-link"
    } else if p.loss_guarded {
        "guarded"
    } else if p.usable {
        "up"
    } else if p.rx_live {
        "one-way"
    } else {
        "down"
    }
}
