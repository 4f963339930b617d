//! `trace-stream`: the multipath stream that split-TCP carries a TCP connection on
//! (`braid_net::split_tcp`, oSCTP §III-IV), alone over every set of recorded links of
//! `trace-bulk`, as one long download.
//!
//! Split-TCP ends the client's TCP at the gateway and the server's at braid's server, so a
//! download's goodput is the stream's between them: this measures it in virtual time
//! (`braid_sim::stream_world`) with split-TCP's own stream options, each path its set's
//! downlink trace one way and trace-bulk's constant uplink the other, queues as trace-bulk
//! has them. It is the ruler for whether split-TCP should carry bulk TCP by default: the
//! packet tunnel's own figure over the same sets is `trace-bulk`'s.

use std::time::Duration;

use serde_json::json;

use braid_net::split_tcp::session::{receiver_config, stream_config};
use braid_sim::link::LinkConfig;
use braid_sim::stream_world::{StreamPath, StreamRun};
use braid_sim::TraceCache;

use crate::common::f;
use crate::osctp_stream::run_many;
use crate::trace_bench::{check_traces, median, worst};
use crate::trace_sets::{self, TraceSet, SETS, UPLINK_KBPS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct TraceStream;

/// The goal: what trace-bulk asks of the bonded download (0.95 of the links' summed goodput
/// alone) times what one kernel TCP gets of a recorded link's capacity alone (0.95-0.96 in
/// trace-bulk's runs: headers and the link's own variation).
pub const GOAL: f64 = 0.9;

/// One set's run: its links as stream paths for `secs`.
fn run_of(set: &TraceSet, dir: &std::path::Path, secs: f64, seed: u64) -> StreamRun {
    let paths = set
        .links
        .iter()
        .map(|l| StreamPath {
            forward: LinkConfig {
                trace: Some(dir.join(l.trace)),
                delay_ms: l.delay_ms,
                ..LinkConfig::default()
            },
            reverse: LinkConfig {
                rate_kbps: Some(UPLINK_KBPS),
                delay_ms: l.delay_ms,
                ..LinkConfig::default()
            },
        })
        .collect();
    StreamRun {
        sender: stream_config(),
        receiver: receiver_config(),
        paths,
        bytes: None,
        duration: Duration::from_secs_f64(secs),
        seed,
        bin: Duration::from_millis(100),
    }
}

impl Bench for TraceStream {
    fn name(&self) -> &'static str {
        "trace-stream"
    }

    fn summary(&self) -> &'static str {
        "split-TCP's multipath stream alone over trace-bulk's recorded link sets: goodput over the summed capacity"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let dir = trace_sets::traces_dir();
        check_traces(self.name(), SETS, &dir)?;
        let base_s = if opts.quick { 60.0 } else { 120.0 };
        let secs: Vec<f64> = SETS.iter().map(|s| base_s * s.time_share).collect();
        let runs = SETS
            .iter()
            .zip(&secs)
            .map(|(s, &d)| run_of(s, &dir, d, opts.seed))
            .collect();
        let outcomes = run_many(opts, "trace-stream", runs)?;
        let mut traces = TraceCache::default();
        let mut table = Table::new([
            "set",
            "capacity Mbit/s",
            "stream Mbit/s",
            "of capacity",
            "fast rtx",
            "timeouts",
            "failures",
        ]);
        let (mut ratios, mut rows) = (Vec::new(), Vec::new());
        for ((set, o), &d) in SETS.iter().zip(&outcomes).zip(&secs) {
            let mut capacity = 0.0;
            for l in set.links {
                capacity += trace_sets::window_rate_bps(&mut traces, &dir.join(l.trace), 0.0, d)
                    .map_err(|e| BenchError::Other(format!("{}: {e}", l.trace)))?
                    / 1e6;
            }
            let mbps = o.mean_mbps();
            let ratio = mbps / capacity;
            ratios.push(ratio);
            let s = &o.sender;
            table.row([
                set.name.to_string(),
                f(capacity, 2),
                f(mbps, 2),
                f(ratio, 3),
                s.fast_retransmits.to_string(),
                s.timeouts.to_string(),
                s.failures.to_string(),
            ]);
            // The SACKs' return path: packets dropped at each uplink's full queue, and their
            // mean wait there.
            let uplink_dropped: Vec<u64> =
                o.links.iter().map(|l| l.1.packets_dropped_queue).collect();
            let uplink_queue_ms: Vec<f64> =
                o.links.iter().map(|l| l.1.queue_delay_mean_ms).collect();
            rows.push(json!({
                "set": set.name, "capacity_mbps": capacity, "goodput_mbps": mbps,
                "of_capacity": ratio, "fast_retransmits": s.fast_retransmits,
                "timeouts": s.timeouts, "failures": s.failures, "revivals": s.revivals,
                "chunks_sent": s.chunks_sent, "seconds": d,
                "spurious_timeouts": s.spurious_timeouts,
                "spurious_retransmits": s.spurious_retransmits,
                "reinjections": s.reinjections,
                "sacks": o.receiver.sacks,
                "sack_bytes": o.receiver.sack_bytes,
                "sacks_held": o.receiver.sacks_held,
                "uplink_dropped": uplink_dropped, "uplink_queue_ms": uplink_queue_ms,
            }));
        }
        let (w, m) = (worst(&ratios), median(&ratios));
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "sets": rows, "median_of_capacity": m }),
            headline: Headline::new(
                "worst set's stream goodput over the summed capacity of its recorded downlinks",
                w,
                None,
                GOAL,
                true,
            ),
            notes: vec![
                format!(
                    "one download without end, {base_s} s per set (less where trace-bulk runs an \
                     excerpt); split-TCP's stream options; each downlink its trace with the \
                     set's one-way delay, each uplink a constant {UPLINK_KBPS} kbit/s, queues \
                     250 ms at the link's mean rate; capacity = the traces' mean over the run"
                ),
                format!("median over the sets: {}", f(m, 3)),
                "datagrams carry 28 bytes of IP and UDP beyond the stream's chunk; split-TCP's \
                 envelope and encryption (40 bytes more) are not modeled"
                    .into(),
            ],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set's run is split-TCP's stream over its links: intact, and every path used.
    #[test]
    fn a_set_runs_over_every_link_intact() {
        let dir = trace_sets::traces_dir();
        let set = SETS.iter().find(|s| s.name == "umts+evdo").unwrap();
        let o = braid_sim::stream_world::run_stream(&run_of(set, &dir, 10.0, 1)).unwrap();
        assert!(o.intact);
        assert!(o.bytes_read > 0);
        assert!(
            o.sender.chunks_sent.iter().all(|&c| c > 0),
            "{:?}",
            o.sender.chunks_sent
        );
    }
}
