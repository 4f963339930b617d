//! The session's scheduling features end to end: redundant copies, flow-level pinning that
//! follows the reverse direction, traffic classes, piggybacked path acks, holding for
//! windows, and the adaptive hole timeout.

use std::time::Duration;

use super::tests::{config, ids, packet, Net, Pipe};
use crate::class::{ClassConfig, FlowMatch, Protocol};
use crate::{Config, HoleTimeoutMode, Instant, SchedulerKind};

/// An IPv4 packet of `protocol` from `sport` to `dport` carrying `id` first.
fn ip(protocol: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, id: u32) -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[0] = 0x45;
    p[9] = protocol;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    if protocol == 6 {
        p[32] = 5 << 4;
        p[33] = 0x10;
    }
    p[40..44].copy_from_slice(&id.to_be_bytes());
    p
}

fn id_of(p: &[u8]) -> u32 {
    u32::from_be_bytes([p[40], p[41], p[42], p[43]])
}

fn two_paths(cfg: Config, d0: u64, d1: u64) -> Net {
    let mut net = Net::new(
        cfg,
        vec![Pipe::new(d0, None), Pipe::new(d1, None)],
        vec![Pipe::new(d0, None), Pipe::new(d1, None)],
    );
    net.run_until(net.at(500));
    net
}

#[test]
fn redundant_sends_every_packet_on_every_path_and_delivers_once() {
    let mut net = two_paths(
        Config {
            scheduler: SchedulerKind::Redundant,
            ..config()
        },
        20,
        40,
    );
    for i in 0..100 {
        net.gw.send(net.now, &packet(i, 200)).unwrap();
    }
    net.run_until(net.at(1000));
    assert_eq!(ids(&net.at_server), (0..100).collect::<Vec<_>>());
    let gw = net.gw.stats();
    assert!(gw.paths.iter().all(|p| p.tx_data_packets == 100));
    assert_eq!(net.srv.stats().reorder.duplicates, 100);
}

#[test]
fn redundant_masks_a_dead_path_without_loss() {
    let mut net = two_paths(
        Config {
            scheduler: SchedulerKind::Redundant,
            ..config()
        },
        20,
        20,
    );
    net.up[0].down = true;
    for i in 0..50 {
        net.gw.send(net.now, &packet(i, 200)).unwrap();
        let t = net.now + Duration::from_millis(2);
        net.run_until(t);
    }
    net.run_until(net.at(1500));
    assert_eq!(ids(&net.at_server), (0..50).collect::<Vec<_>>());
}

#[test]
fn min_conn_path_pins_flows_and_replies_follow_the_inbound_path() {
    let mut net = two_paths(
        Config {
            scheduler: SchedulerKind::MinConnPath,
            ..config()
        },
        20,
        30,
    );
    let (c, s) = ([10, 0, 0, 2], [10, 1, 0, 2]);
    // Four client flows, interleaved.
    for i in 0..40u32 {
        let port = 1000 + (i % 4) as u16;
        net.gw.send(net.now, &ip(6, c, s, port, 80, i)).unwrap();
        let t = net.now + Duration::from_millis(1);
        net.run_until(t);
    }
    net.run_until(net.now + Duration::from_millis(100));
    let gw = net.gw.stats();
    // Balanced: two flows per path, ten packets each.
    assert_eq!(
        gw.paths
            .iter()
            .map(|p| p.tx_data_packets)
            .collect::<Vec<_>>(),
        vec![20, 20]
    );
    assert_eq!(net.srv.stats().reorder.buffered, 0);
    // Replies from the server go back on the path each flow came in on.
    let before: Vec<u64> = net
        .srv
        .stats()
        .paths
        .iter()
        .map(|p| p.tx_data_packets)
        .collect();
    for i in 0..8u32 {
        let port = 1000 + (i % 4) as u16;
        net.srv.send(net.now, &ip(6, s, c, 80, port, i)).unwrap();
    }
    net.run_until(net.now + Duration::from_millis(100));
    let after: Vec<u64> = net
        .srv
        .stats()
        .paths
        .iter()
        .map(|p| p.tx_data_packets)
        .collect();
    assert_eq!((after[0] - before[0], after[1] - before[1]), (4, 4));
    assert_eq!(net.at_gateway.len(), 8);
}

#[test]
fn min_conn_path_counts_only_connections_that_have_not_ended() {
    let mut net = two_paths(
        Config {
            scheduler: SchedulerKind::MinConnPath,
            ..config()
        },
        20,
        30,
    );
    let (c, s) = ([10, 0, 0, 2], [10, 1, 0, 2]);
    let with_flags = |mut p: Vec<u8>, flags: u8| {
        p[33] = flags;
        p
    };
    let sent = |net: &Net| -> Vec<u64> {
        net.gw
            .stats()
            .paths
            .iter()
            .map(|p| p.tx_data_packets)
            .collect()
    };
    // Flows 1000 and 1001 open: one on each path (ties to the first).
    net.gw
        .send(net.now, &with_flags(ip(6, c, s, 1000, 80, 0), 0x02))
        .unwrap();
    net.gw
        .send(net.now, &with_flags(ip(6, c, s, 1001, 80, 1), 0x02))
        .unwrap();
    net.run_until(net.now + Duration::from_millis(100));
    assert_eq!(sent(&net), vec![1, 1]);
    // Flow 1001 (on path 1) ends: the server's FIN comes back, the client's FIN goes out.
    net.srv
        .send(net.now, &with_flags(ip(6, s, c, 80, 1001, 2), 0x11))
        .unwrap();
    net.run_until(net.now + Duration::from_millis(100));
    net.gw
        .send(net.now, &with_flags(ip(6, c, s, 1001, 80, 3), 0x11))
        .unwrap();
    net.run_until(net.now + Duration::from_millis(100));
    assert_eq!(sent(&net), vec![1, 2]);
    // A new flow goes to path 1, now without an open connection, well within the idle
    // time that would otherwise have kept 1001 counted there.
    net.gw
        .send(net.now, &with_flags(ip(6, c, s, 1002, 80, 4), 0x02))
        .unwrap();
    net.run_until(net.now + Duration::from_millis(100));
    assert_eq!(sent(&net), vec![1, 3]);
    // And the next one to path 0: one open connection on each again, ties to the first.
    net.gw
        .send(net.now, &with_flags(ip(6, c, s, 1003, 80, 5), 0x02))
        .unwrap();
    net.run_until(net.now + Duration::from_millis(100));
    assert_eq!(sent(&net), vec![2, 3]);
}

#[test]
fn traffic_classes_schedule_each_class_its_own_way() {
    let voice = ClassConfig {
        name: "voice".into(),
        matcher: FlowMatch {
            protocol: Some(Protocol::Udp),
            ports: vec![crate::class::PortRange {
                low: 5060,
                high: 5060,
            }],
            dscp: vec![],
        },
        scheduler: SchedulerKind::Redundant,
        loss_recovery: None,
        target_mbps: None,
        utility: None,
        transport: crate::class::Transport::Packet,
    };
    let mut net = two_paths(
        Config {
            scheduler: SchedulerKind::RoundRobin,
            classes: vec![voice],
            ..config()
        },
        20,
        20,
    );
    let (c, s) = ([10, 0, 0, 2], [10, 1, 0, 2]);
    for i in 0..10u32 {
        net.gw.send(net.now, &ip(17, c, s, 7000, 5060, i)).unwrap();
        net.gw
            .send(net.now, &ip(6, c, s, 40000, 443, 100 + i))
            .unwrap();
    }
    net.run_until(net.now + Duration::from_millis(100));
    let gw = net.gw.stats();
    // 10 voice packets twice (20) plus 10 web packets round-robin: 15 per path.
    assert_eq!(
        gw.paths
            .iter()
            .map(|p| p.tx_data_packets)
            .collect::<Vec<_>>(),
        vec![15, 15]
    );
    let mut got: Vec<u32> = net.at_server.iter().map(|p| id_of(p)).collect();
    got.sort_unstable();
    assert_eq!(got.len(), 20);
    assert_eq!(net.gw.scheduler_names(), vec!["round-robin", "redundant"]);
}

#[test]
fn path_acks_keep_in_flight_fresh_between_reports() {
    // Reports only every 10 s: in-flight counts can only come from piggybacked path acks.
    let mut net = two_paths(
        Config {
            report_interval: Duration::from_secs(10),
            ..config()
        },
        20,
        20,
    );
    for i in 0..20 {
        net.gw.send(net.now, &packet(i, 200)).unwrap();
    }
    net.run_until(net.now + Duration::from_millis(5));
    let sent: u32 = net.gw.paths().iter().map(|p| p.unacked_datagrams()).sum();
    assert!(sent >= 20, "{sent}");
    // Without reverse traffic, standalone acks (after the 20 ms ack delay) bring them back.
    net.run_until(net.now + Duration::from_millis(80));
    let left: u32 = net.gw.paths().iter().map(|p| p.unacked_datagrams()).sum();
    assert!(left <= 2, "{left}");
    // With reverse traffic, the path acks ride on it and no standalone ack is needed.
    let control_before = net
        .srv
        .stats()
        .paths
        .iter()
        .map(|p| p.tx_control_packets)
        .sum::<u64>();
    for i in 0..20 {
        net.gw.send(net.now, &packet(i, 200)).unwrap();
        let t = net.now + Duration::from_millis(5);
        net.run_until(t);
        net.srv.send(net.now, &packet(i, 100)).unwrap();
    }
    net.run_until(net.now + Duration::from_millis(50));
    let left: u32 = net.gw.paths().iter().map(|p| p.unacked_datagrams()).sum();
    assert!(left <= 2, "{left}");
    let control = net
        .srv
        .stats()
        .paths
        .iter()
        .map(|p| p.tx_control_packets)
        .sum::<u64>();
    assert!(
        control - control_before <= 3,
        "{}",
        control - control_before
    );
    assert_eq!(net.gw.stats().reports_received, 0);
}

#[test]
fn smallest_rtt_holds_when_windows_are_full_and_loses_nothing() {
    let mut net = Net::new(
        Config {
            scheduler: SchedulerKind::SmallestRtt,
            ..config()
        },
        vec![
            Pipe::new(20, Some(1_000_000)),
            Pipe::new(60, Some(1_000_000)),
        ],
        vec![Pipe::new(20, None), Pipe::new(60, None)],
    );
    net.gw.paths[0].tx_capacity_for_test(1_000_000);
    net.gw.paths[1].tx_capacity_for_test(1_000_000);
    net.run_until(net.at(2000));
    // 300 packets at once: far more than both windows.
    for i in 0..300 {
        net.gw.send(net.now, &packet(i, 1000)).unwrap();
    }
    net.run_until(net.now + Duration::from_millis(20));
    let in_flight: u32 = net.gw.paths().iter().map(|p| p.unacked_datagrams()).sum();
    assert!(in_flight < 60, "{in_flight}");
    net.run_until(net.now + Duration::from_secs(5));
    // All arrive exactly once (some late: the 40 ms delay gap plus queueing exceeds the
    // initial hole timeout before it adapts).
    let mut got = ids(&net.at_server);
    got.sort_unstable();
    assert_eq!(got, (0..300).collect::<Vec<_>>());
    // Both paths were kept busy: the windows cover each path's bandwidth-delay product.
    let gw = net.gw.stats();
    let (a, b) = (gw.paths[0].tx_data_packets, gw.paths[1].tx_data_packets);
    assert!(a.abs_diff(b) <= 30, "{a} {b}");
}

#[test]
fn adaptive_hole_timeout_learns_a_large_delay_gap() {
    // Round-robin over 20 ms and 120 ms paths: packets from the slow path come 100 ms late.
    let run = |mode| {
        let mut net = two_paths(
            Config {
                scheduler: SchedulerKind::RoundRobin,
                hole_timeout_mode: mode,
                ..config()
            },
            20,
            120,
        );
        for i in 0..2000 {
            net.gw.send(net.now, &packet(i, 200)).unwrap();
            let t = net.now + Duration::from_millis(2);
            net.run_until(t);
        }
        net.run_until(net.now + Duration::from_secs(1));
        assert_eq!(net.at_server.len(), 2000);
        net.srv.stats().reorder
    };
    let fixed = run(HoleTimeoutMode::Fixed);
    let adaptive = run(HoleTimeoutMode::Adaptive);
    // Fixed 50 ms gives up nearly every hole and delivers the slow path's packets late.
    assert!(fixed.late_delivered > 900, "{fixed:?}");
    // Adaptive learns the gap within a few samples.
    assert!(adaptive.late_delivered < 20, "{adaptive:?}");
    assert!(adaptive.hole_timeout_ms > 100.0, "{adaptive:?}");
    let _ = Instant::ZERO;
}
