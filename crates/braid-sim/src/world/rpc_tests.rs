//! `reordering = "rpc"` end to end: a striped TCP download over links of unlike delay.

use std::path::Path;

use super::*;
use crate::TraceCache;

/// Two links of 40 and 160 ms one way: every window is striped across a 240 ms difference
/// of round trip, so most of the receiver's ACKs are duplicates that striping caused.
const STRIPED: &str = r#"
duration_s = 20
seed = 3
[engine]
scheduler = "adas"
reordering = "rpc"
tcp_transport = "packet"
[[path]]
name = "near"
up = { rate_mbps = 1.8, delay_ms = 40 }
down = { rate_mbps = 1.8, delay_ms = 40 }
[[path]]
name = "far"
up = { rate_mbps = 0.6, delay_ms = 160 }
down = { rate_mbps = 0.6, delay_ms = 160 }
[[workload]]
kind = "bulk"
bytes = 1500000
"#;

fn run_striped(reordering: &str) -> (Report, EnginePair) {
    let text = STRIPED.replace(
        "reordering = \"rpc\"",
        &format!("reordering = \"{reordering}\""),
    );
    let s = Scenario::parse(&text, "rpc", Path::new("."), &mut TraceCache::new()).unwrap();
    let (r, e) = run_keeping_engines(&s, &mut TraceCache::new(), None).unwrap();
    (r, e.unwrap())
}

#[test]
fn a_striped_download_under_rpc_delivers_every_byte_and_holds_no_ack_past_its_bound() {
    let (r, e) = run_striped("rpc");
    let bulk = r.workloads[0].bulk.as_ref().unwrap();
    assert_eq!(bulk.bytes_received, 1_500_000);
    assert!(bulk.per_flow[0].completion_ms.is_some());
    // Both links carried the download.
    for p in &r.paths {
        assert!(p.down.bytes_delivered > 200_000, "{}", p.name);
    }
    // The server stripes the download: its RPC held duplicates and released each in time.
    let stats = e.server.rpc_stats().unwrap();
    println!("{stats:?}");
    assert!(stats.held > 0, "{stats:?}");
    assert!(stats.released_resequenced > 0, "{stats:?}");
    let bound = braid_core::rpc::RpcConfig::default().max_hold;
    assert!(stats.longest_hold <= bound, "{stats:?}");
    assert_eq!(e.server.rpc_held(), 0);
}

#[test]
fn without_rpc_the_same_download_has_no_controller() {
    let (r, e) = run_striped("resequence");
    assert_eq!(
        r.workloads[0].bulk.as_ref().unwrap().bytes_received,
        1_500_000
    );
    assert!(e.server.rpc_stats().is_none());
}

/// The same links, 1% loss on the far one, no loss masking in braid: the losses reach the
/// inner TCP, and RPC ships each to the sender as a negative ACK.
fn run_lossy(tcp_cc: &str) -> Report {
    let text = STRIPED
        .replace(
            "[engine]\n",
            "[engine]\nloss_recovery = \"none\"\nloss_guard = false\n",
        )
        .replace(
            "rate_mbps = 0.6, delay_ms = 160 }",
            "rate_mbps = 0.6, delay_ms = 160, loss = { model = \"bernoulli\", p = 0.01 } }",
        )
        .replace(
            "bytes = 1500000\n",
            &format!("bytes = 1500000\ntcp_cc = \"{tcp_cc}\"\n"),
        );
    let s = Scenario::parse(&text, "prism", Path::new("."), &mut TraceCache::new()).unwrap();
    run(&s, &mut TraceCache::new(), None).unwrap()
}

#[test]
fn tcp_prism_acts_on_rpcs_negative_acks_and_cubic_ignores_them() {
    for cc in ["prism", "cubic"] {
        let r = run_lossy(cc);
        let w = &r.workloads[0];
        assert_eq!(w.bulk.as_ref().unwrap().bytes_received, 1_500_000, "{cc}");
        let sender = w.tcp.as_ref().unwrap().sender.as_ref().unwrap();
        println!("{cc}: {sender:?}");
        assert!(sender.retransmits > 0, "{cc}");
        if cc == "prism" {
            assert!(sender.nacks > 0, "{sender:?}");
        } else {
            assert_eq!(sender.nacks, 0);
        }
    }
}
