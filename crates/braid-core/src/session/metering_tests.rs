//! Metered paths between two engines: a held metered path still carries the control
//! traffic that keeps it alive at both ends; only data is metered.

use super::tests::{config, packet, udp, Net, Pipe};
use super::*;
use crate::metered::{MeteredSettings, MeteringConfig, UtilityKind};

/// The gateway daemon's metering of an uplink with `metered = true` and nothing else:
/// no target, no price, announced to the server.
fn metered_path_1() -> Config {
    let mut m = MeteringConfig::from_settings(
        None,
        UtilityKind::Log,
        &[MeteredSettings {
            id: 1,
            cost_per_gb: 0.0,
            cap: None,
        }],
    );
    m.announce = true;
    Config {
        metering: Some(m),
        ..config()
    }
}

#[test]
fn a_held_metered_path_stays_alive_and_up_at_both_ends() {
    let mut net = Net::new(
        metered_path_1(),
        vec![Pipe::new(10, Some(50_000_000)), Pipe::new(20, None)],
        vec![Pipe::new(10, Some(50_000_000)), Pipe::new(20, None)],
    );
    net.run_until(net.at(1000));
    // A light load the cheap path carries alone: the metered path is held throughout.
    let mut next = 0;
    for ms in (1000..6000).step_by(10) {
        net.gw.send(net.now, &packet(next, 200)).unwrap();
        net.srv.send(net.now, &packet(next, 200)).unwrap();
        next += 1;
        net.run_until(net.at(ms + 10));
    }
    net.run_until(net.at(8000));
    for (side, s, events) in [
        ("gateway", &net.gw, &net.gw_events),
        ("server", &net.srv, &net.srv_events),
    ] {
        assert!(
            !events.contains(&Event::PathDown(1)),
            "{side}: path 1 went down: {events:?}"
        );
        let p = &s.paths()[1];
        assert!(p.is_live(), "{side}: path 1 not live");
        assert!(p.is_metered_hold(), "{side}: path 1 not held");
        let st = &s.stats().paths[1];
        assert!(st.usable && st.rx_live, "{side}: {st:?}");
        assert_eq!(st.tx_data_packets, 0, "{side}: data on the held path");
    }
    assert_eq!(net.at_server.len(), next as usize);
    assert_eq!(net.at_gateway.len(), next as usize);
}

/// A gateway's class budgets reach a server that has no classes of its own (the Hello's
/// metered-classes option): with the cheap path dark, the server sends the video class
/// (source port 7000, a 0.5 Mbit/s target) on the metered path and refuses the rest,
/// which wants only what is cheap, as the gateway does for uploads.
#[test]
fn the_server_budgets_downloads_by_the_gateways_classes() {
    use crate::class::{ClassConfig, FlowMatch, PortRange, Protocol};
    let mut gw = metered_path_1();
    gw.classes = vec![ClassConfig {
        name: "video".into(),
        matcher: FlowMatch {
            protocol: Some(Protocol::Udp),
            ports: vec![PortRange {
                low: 7000,
                high: 7000,
            }],
            dscp: Vec::new(),
        },
        scheduler: crate::SchedulerKind::DelayBased,
        loss_recovery: None,
        target_mbps: Some(0.5),
        utility: Some(UtilityKind::Threshold),
        transport: Default::default(),
    }];
    let section = crate::metered::MeteringSection {
        announce: true,
        ..Default::default()
    };
    let settings = [MeteredSettings {
        id: 1,
        cost_per_gb: 10.0,
        cap: None,
    }];
    gw.metering = crate::metered::MeteringSection::config(Some(&section), &gw.classes, &settings);
    let announced = |learns: bool| {
        let mut g = gw.clone();
        if !learns {
            // The same budget for all the traffic: the gateway's session target.
            g.metering.as_mut().unwrap().classes.clear();
        }
        let mut dark = Pipe::new(10, Some(5_000_000));
        dark.down = true;
        let mut net = Net::pair(
            g,
            config(),
            vec![dark, Pipe::new(20, Some(5_000_000))],
            vec![dark, Pipe::new(20, Some(5_000_000))],
        );
        net.run_until(net.at(1000));
        // 5 s of 400 kbit/s each: video from port 7000, the rest from port 8000.
        for (i, ms) in (1000..6000).step_by(20).enumerate() {
            let i = i as u32;
            net.srv.send(net.now, &udp(7000, i, 1000)).unwrap();
            net.srv.send(net.now, &udp(8000, i, 1000)).unwrap();
            net.run_until(net.at(ms + 20));
        }
        net.run_until(net.at(7000));
        let from = |port: u16| {
            (net.at_gateway.iter())
                .filter(|p| p[20..22] == port.to_be_bytes())
                .count()
        };
        (from(7000), from(8000), net.srv.stats().class_budget_drops)
    };
    let (video, rest, drops) = announced(true);
    eprintln!("by class: video {video} of 250, rest {rest} of 250, {drops} dropped");
    assert!(video >= 240, "video {video} of 250");
    assert!(rest <= 10, "the rest {rest} of 250 on the metered path");
    assert!(drops >= 240, "{drops}");
    let (video, rest, _) = announced(false);
    eprintln!("one budget: video {video}, rest {rest}");
    assert!(rest >= 50, "one budget for all: the rest {rest} of 250");
}
