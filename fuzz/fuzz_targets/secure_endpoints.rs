//! Hostile datagrams never take the security layer down, and neither end of a live session
//! accepts them as data. The input is split into datagrams (at 0xFF), each handed to a
//! connected server and gateway with time moving forward, under load every other one.
#![no_main]

use std::net::SocketAddr;
use std::time::Duration;

use braid_core::Instant;
use braid_secure::envelope::Envelope;
use braid_secure::{
    session_id, Gateway, GatewayConfig, Load, PrivateKey, Received, Seed, Server, ServerConfig,
    MAX_HANDSHAKE_LEN,
};
use libfuzzer_sys::fuzz_target;

fn key(b: u8) -> PrivateKey {
    PrivateKey::from_bytes([b; 32])
}

/// A gateway and a server with the handshake done, the same every run.
fn connected(now: Instant, from: SocketAddr) -> (Gateway, Server) {
    let gw_key = key(1);
    let srv_key = key(2);
    let mut srv = Server::new(
        ServerConfig::new(srv_key.clone(), vec![gw_key.public_key()], Seed::from_u64(2)),
        now,
    )
    .expect("a valid server config");
    let mut gw = Gateway::new(
        GatewayConfig::new(gw_key, srv_key.public_key(), Duration::from_secs(1 << 30), Seed::from_u64(1)),
        &[0],
        now,
    )
    .expect("a valid gateway config");
    let mut buf = [0u8; 2048];
    let mut reply = [0u8; MAX_HANDSHAKE_LEN];
    for _ in 0..3 {
        while let Some(t) = gw.poll_transmit(now, &mut buf) {
            if let Ok(Received::Reply { len }) =
                srv.handle(now, from, Load::Normal, &mut buf[..t.len], &mut reply)
            {
                let _ = gw.handle(now, t.path, &mut reply[..len]);
            }
        }
    }
    (gw, srv)
}

fuzz_target!(|data: &[u8]| {
    let from = SocketAddr::from(([192, 0, 2, 1], 4000));
    let mut now = Instant::from_millis(1000);
    let (mut gw, mut srv) = connected(now, from);
    assert!(gw.session().is_some());
    let mut reply = [0u8; MAX_HANDSHAKE_LEN];
    for (i, chunk) in data.split(|&b| b == 0xff).enumerate() {
        let _ = Envelope::parse(chunk);
        let _ = session_id(chunk);
        now = Instant::from_micros(now.as_micros() + 1000 * u64::from(chunk.len() as u8));
        let load = if i % 2 == 0 { Load::Normal } else { Load::High };
        let mut d = chunk.to_vec();
        let r = srv.handle(now, from, load, &mut d, &mut reply);
        // Random bytes cannot be data: that would need the session's keys.
        assert!(!matches!(r, Ok(Received::Data { .. } | Received::Keepalive { .. })));
        let mut d = chunk.to_vec();
        let r = gw.handle(now, 0, &mut d);
        assert!(!matches!(r, Ok(Received::Data { .. } | Received::Keepalive { .. })));
        gw.handle_timeout(now);
        srv.handle_timeout(now);
    }
    let _ = (gw.stats(), srv.stats());
});
