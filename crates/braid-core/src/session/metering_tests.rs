//! Metered paths between two engines: a held metered path still carries the control
//! traffic that keeps it alive at both ends; only data is metered.

use super::tests::{config, packet, Net, Pipe};
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
