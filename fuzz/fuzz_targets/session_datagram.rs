//! Hostile datagrams never take the engine down: the input is split into datagrams, each
//! fed to a server session on the path it names, with time moving forward.
#![no_main]

use braid_core::{Config, Instant, PathConfig, Role, Session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let paths: Vec<PathConfig> = (0..3)
        .map(|id| PathConfig {
            id,
            tx_capacity_bps: 1_000_000,
            rx_capacity_bps: 1_000_000,
        })
        .collect();
    let config = Config {
        session_id: 0,
        ..Config::default()
    };
    let Ok(mut s) = Session::new(config, Role::Server, &paths, Instant::ZERO) else {
        return;
    };
    let mut buf = vec![0u8; s.transmit_buffer_len()];
    let mut out = Vec::new();
    let mut now = Instant::ZERO;
    // Each chunk: one byte of time step (ms), then a datagram up to the next 0xFF 0xFF.
    for chunk in data.split(|&b| b == 0xff) {
        let Some((&step, datagram)) = chunk.split_first() else {
            continue;
        };
        now = Instant::from_micros(now.as_micros() + u64::from(step) * 1000);
        let path = datagram.get(2).copied().unwrap_or(0);
        let _ = s.handle_datagram(now, path, datagram);
        s.handle_timeout(now);
        while s.poll_transmit(now, &mut buf).is_some() {}
        while s.poll_deliver(&mut out) {}
        while s.poll_event().is_some() {}
        let _ = s.send(now, datagram);
    }
    let _ = s.stats();
});
