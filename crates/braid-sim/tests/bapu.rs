//! BaPu's simulated world: small deterministic runs (seconds in the debug profile).

use braid_sim::bapu_world::{run_bapu, BapuSystem, BapuTraffic, BapuWorldConfig};

fn small(n: usize, system: BapuSystem, traffic: BapuTraffic) -> BapuWorldConfig {
    let mut c = BapuWorldConfig::paper(n, system, traffic, 7);
    c.duration_s = 4.0;
    c.aps.iter_mut().skip(1).for_each(|a| a.monitor_loss = 0.3);
    c
}

#[test]
fn udp_is_bunched_over_every_uplink_without_duplicates() {
    let r = run_bapu(&small(3, BapuSystem::Bapu, BapuTraffic::Udp { mbps: 5.8 })).unwrap();
    let eff = r.goodput_mbps / r.max_goodput_mbps(1350);
    println!(
        "UDP 3 APs: {:.2} Mbit/s, efficiency {eff:.3}, {r:?}",
        r.goodput_mbps
    );
    // Every AP forwards a share; monitors overheard MAC retries and dropped them by IP ID.
    assert!(
        r.forwarded_bytes.iter().all(|&b| b > 100_000),
        "{:?}",
        r.forwarded_bytes
    );
    assert!(r.ap.duplicates > 0);
    assert_eq!(r.gateway_duplicates, 0);
    let udp = r.workloads[0].udp.as_ref().unwrap();
    assert_eq!(udp.duplicates, 0);
    assert!(eff > 0.85, "efficiency {eff}");
}

#[test]
fn proactive_ack_lifts_tcp_over_plain_bapu_and_runs_are_deterministic() {
    let plain = run_bapu(&small(3, BapuSystem::Bapu, BapuTraffic::Tcp)).unwrap();
    let pro = run_bapu(&small(3, BapuSystem::BapuPro, BapuTraffic::Tcp)).unwrap();
    println!(
        "TCP 3 APs: BaPu {:.2} Mbit/s, BaPu-Pro {:.2} Mbit/s (max {:.2}); {:?}",
        plain.goodput_mbps,
        pro.goodput_mbps,
        pro.max_goodput_mbps(1350),
        pro.proactive_ack
    );
    assert!(pro.goodput_mbps > 1.3 * plain.goodput_mbps);
    let pa = pro.proactive_ack.clone().unwrap();
    assert!(pa.spoofed_acks > 100 && pa.real_acks_dropped > 100);
    let again = run_bapu(&small(3, BapuSystem::BapuPro, BapuTraffic::Tcp)).unwrap();
    assert_eq!(
        serde_json::to_string(&again).unwrap(),
        serde_json::to_string(&pro).unwrap()
    );
}

#[test]
fn a_hole_the_air_made_is_repaired_by_duplicate_acks() {
    // The home AP loses most tries and every frame at most twice: some frames are lost
    // for every AP, and the sender must retransmit them on Proactive-ACK's duplicates.
    let mut c = small(2, BapuSystem::BapuPro, BapuTraffic::Tcp);
    c.home_loss = 0.5;
    c.mac_tries = 2;
    c.aps[1].monitor_loss = 0.9;
    let r = run_bapu(&c).unwrap();
    let pa = r.proactive_ack.clone().unwrap();
    println!(
        "air lost {}, {:?}, retransmissions {:?}, {:.2} Mbit/s",
        r.air_lost, pa, r.retransmissions, r.goodput_mbps
    );
    assert!(r.air_lost > 0);
    assert!(pa.dupacks_sent > 0 && pa.holes > 0);
    assert!(r.retransmissions.unwrap() > 0);
    // A quarter of the frames miss the home AP and 90% of those the monitor too: TCP
    // crawls (0.15 Mbit/s measured), but it moves.
    assert!(r.goodput_mbps > 0.1, "{}", r.goodput_mbps);
}

#[test]
fn a_packet_only_full_aps_hold_does_not_stall_the_upload() {
    // Two APs, the monitor missing a fifth of the tries: some segments only the home AP
    // holds. When both buffers are full and the sender waits on such a segment, only a
    // buffer update from the APs lets the gateway place it (before them: the first
    // retransmission timeout at 3.9 s, then 0.12 of the uplinks over 60 s).
    let mut c = BapuWorldConfig::paper(2, BapuSystem::BapuPro, BapuTraffic::Tcp, 1);
    c.duration_s = 12.0;
    c.aps[1].monitor_loss = 0.2;
    let r = run_bapu(&c).unwrap();
    let eff = r.goodput_mbps / r.max_goodput_mbps(1350);
    println!(
        "2 APs, 20% monitor loss: {:.2} Mbit/s, efficiency {eff:.3}, retransmissions {:?}, per second {:?}",
        r.goodput_mbps, r.retransmissions, r.series_mbps
    );
    assert_eq!(r.retransmissions, Some(0));
    assert!(eff > 0.9, "efficiency {eff}");
    // No second of the run after the start carries less than half the uplinks.
    assert!(
        r.series_mbps.iter().skip(2).all(|&m| m > 1.9),
        "{:?}",
        r.series_mbps
    );
}

#[test]
fn what_the_receiver_drops_after_proactive_ack_is_repaired_by_the_gateway() {
    // Two APs, the monitor missing 60% of the tries: arrivals so scattered that the
    // receiver drops segments (more than 64 out-of-order ranges) Proactive-ACK already
    // acknowledged. Without the gateway's repair the upload stops for good at 7.3 s.
    let mut c = BapuWorldConfig::paper(2, BapuSystem::BapuPro, BapuTraffic::Tcp, 1);
    c.duration_s = 12.0;
    c.aps[1].monitor_loss = 0.6;
    let r = run_bapu(&c).unwrap();
    println!(
        "2 APs, 60% monitor loss: {:?}, per second {:?}",
        r.repair, r.series_mbps
    );
    assert!(r.repair.as_ref().unwrap().resent > 0);
    assert!(
        r.series_mbps.iter().skip(1).all(|&m| m > 1.0),
        "{:?}",
        r.series_mbps
    );
}
