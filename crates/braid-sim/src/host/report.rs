//! What each workload measured, assembled from both hosts at the end of a run.

use serde::Serialize;

use braid_core::Instant;

use crate::metrics::{goodput_mbps, Summary};

use super::client::ClientPart;
use super::server::ServerPart;
use super::tcp::SenderStats;
use super::udp::CbrStats;
use super::workload::{Direction, Kind, Spec, Tcp};

/// One workload's results. Serializes to deterministic JSON; the sections present depend
/// on the kind: `flows` for every TCP workload, `bulk` for bulk, `udp` for udp-cbr.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WorkloadReport {
    pub name: String,
    pub kind: Kind,
    pub direction: Direction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<FlowStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulk: Option<BulkStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<CbrStats>,
    /// Which TCP carried a TCP workload, and what its senders did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpReport>,
}

/// The TCP of a TCP workload.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TcpReport {
    /// `"linux"` (the model) or `"smoltcp"`.
    pub stack: Tcp,
    /// With the model: the data sender's counters over all the workload's connections
    /// (the internet host's for downloads, the client host's for uploads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<SenderStats>,
}

/// Flow counts and completion times of a TCP workload.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FlowStats {
    /// Connections opened.
    pub started: u64,
    pub completed: u64,
    /// Still open at the end of the run.
    pub incomplete: u64,
    /// Reset, refused, or closed by the server before completing.
    pub failed: u64,
    /// Arrivals not started: `max_open` flows were open, or no ephemeral port was free.
    pub rejected: u64,
    /// SYNs the server turned away (the client counts those flows as failed).
    pub refused_by_server: u64,
    /// Bytes of the bounded flows started.
    pub bytes_requested: u64,
    /// `bytes_requested` over the time from the workload's start to the end of the run.
    pub offered_load_mbps: f64,
    /// Completion time of completed flows: connect to last byte (down) or reply (up).
    pub fct_ms: Summary,
    /// Sizes of the bounded flows started.
    pub size_bytes: Summary,
}

/// Goodput of a bulk workload: application bytes at the receiver.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BulkStats {
    pub bytes_received: u64,
    /// All flows' bytes over the span from the first connect to the last flow's end
    /// (its completion, or the end of the run).
    pub goodput_mbps: f64,
    pub per_flow: Vec<BulkFlowStats>,
    /// Interval of `goodput_mbps_series`.
    pub series_interval_ms: f64,
    /// All flows' goodput per interval from the workload's start.
    pub goodput_mbps_series: Vec<f64>,
    /// Bytes that arrived after the last interval the series holds.
    pub series_overflow_bytes: u64,
}

/// One bulk flow.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BulkFlowStats {
    pub bytes_received: u64,
    /// From connect to completion, or to the end of the run.
    pub active_s: f64,
    pub goodput_mbps: f64,
    /// Connect to the last byte (down) or to the server's reply (up), for flows with
    /// `bytes`; null while incomplete.
    pub completion_ms: Option<f64>,
}

/// The report of a TCP workload from its client and server sides.
pub fn tcp_report(
    spec: &Spec,
    client: &ClientPart,
    server: &ServerPart,
    tcp: Option<TcpReport>,
    end: Instant,
) -> WorkloadReport {
    let c = &client.stats;
    let span = (end - spec.start).as_secs_f64();
    let flows = FlowStats {
        started: c.started,
        completed: c.completed,
        incomplete: client.open_flows() as u64,
        failed: c.failed,
        rejected: c.rejected,
        refused_by_server: server.stats.refused,
        bytes_requested: c.bytes_requested,
        offered_load_mbps: goodput_mbps(c.bytes_requested, span),
        fct_ms: c.fct_ms.summary(),
        size_bytes: c.size_bytes.summary(),
    };
    let bulk = (spec.kind == Kind::Bulk).then(|| bulk_stats(spec, client, server, end));
    WorkloadReport {
        name: spec.name.clone(),
        kind: spec.kind,
        direction: spec.direction,
        flows: Some(flows),
        bulk,
        udp: None,
        tcp,
    }
}

fn bulk_stats(spec: &Spec, client: &ClientPart, server: &ServerPart, end: Instant) -> BulkStats {
    let records = &client.stats.bulk;
    let mut per_flow = Vec::with_capacity(records.len());
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    for (i, r) in records.iter().enumerate() {
        let bytes = match spec.direction {
            Direction::Down => r.bytes_received,
            Direction::Up => server.stats.bulk_bytes.get(i).copied().unwrap_or(0),
        };
        total += bytes;
        let (active_s, completion_ms) = match r.started {
            Some(start) => {
                let stop = r.completed.unwrap_or(end);
                first = Some(first.map_or(start, |f| f.min(start)));
                last = Some(last.map_or(stop, |l| l.max(stop)));
                let done = r.completed.map(|t| (t - start).as_secs_f64() * 1e3);
                ((stop - start).as_secs_f64(), done)
            }
            None => (0.0, None),
        };
        per_flow.push(BulkFlowStats {
            bytes_received: bytes,
            active_s,
            goodput_mbps: goodput_mbps(bytes, active_s),
            completion_ms,
        });
    }
    let span = match (first, last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    let series = match spec.direction {
        Direction::Down => client.stats.series.as_ref(),
        Direction::Up => server.stats.series.as_ref(),
    };
    BulkStats {
        bytes_received: total,
        goodput_mbps: goodput_mbps(total, span),
        per_flow,
        series_interval_ms: series.map_or(0.0, |s| s.interval_us() as f64 / 1e3),
        goodput_mbps_series: series.map_or_else(Vec::new, |s| s.mbps_until(end)),
        series_overflow_bytes: series.map_or(0, |s| s.overflow_bytes()),
    }
}

/// The report of a UDP CBR workload.
pub fn cbr_report(spec: &Spec, stats: CbrStats) -> WorkloadReport {
    WorkloadReport {
        name: spec.name.clone(),
        kind: spec.kind,
        direction: spec.direction,
        flows: None,
        bulk: None,
        udp: Some(stats),
        tcp: None,
    }
}
