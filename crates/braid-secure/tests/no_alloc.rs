//! Sealing and opening allocate nothing: the hot path of the daemon's event loop, counted by
//! the `allocation-counter` crate's global allocator (this test binary only).

use std::net::SocketAddr;
use std::time::Duration;

use braid_core::Instant;
use braid_secure::*;

#[test]
fn seal_and_open_allocate_nothing() {
    let gw_key = PrivateKey::from_bytes([1; 32]);
    let srv_key = PrivateKey::from_bytes([2; 32]);
    let now = Instant::from_millis(1);
    let config = ServerConfig::new(
        srv_key.clone(),
        vec![gw_key.public_key()],
        Seed::from_u64(2),
    );
    let mut server = Server::new(config, now).expect("a valid config");
    let config = GatewayConfig::new(
        gw_key,
        srv_key.public_key(),
        Duration::ZERO,
        Seed::from_u64(1),
    );
    let mut gateway = Gateway::new(config, &[0, 1, 2, 3], now).expect("a valid config");
    let from = SocketAddr::from(([192, 0, 2, 1], 4000));
    let mut buf = vec![0u8; 2048];
    let mut reply = [0u8; MAX_HANDSHAKE_LEN];
    for _ in 0..2 {
        while let Some(t) = gateway.poll_transmit(now, &mut buf) {
            if let Ok(Received::Reply { len }) =
                server.handle(now, from, Load::Normal, &mut buf[..t.len], &mut reply)
            {
                gateway
                    .handle(now, t.path, &mut reply[..len])
                    .expect("the response completes the handshake");
            }
        }
    }
    let session = gateway.session().expect("connected");
    let mut round = |n: usize, now: Instant| {
        let mut ok = 0;
        for i in 0..n {
            let path = (i % 4) as u8;
            let n = gateway.seal(now, path, &mut buf, 1400).expect("sealed");
            if let Ok(Received::Data { .. }) =
                server.handle(now, from, Load::Normal, &mut buf[..n], &mut reply)
            {
                ok += 1;
            }
            let n = server
                .seal(now, session, path, &mut buf, 1400)
                .expect("sealed");
            if let Ok(Received::Data { .. }) = gateway.handle(now, path, &mut buf[..n]) {
                ok += 1;
            }
        }
        ok
    };
    // Every path's state is made on its first datagram; after that, nothing.
    assert_eq!(round(8, now), 16);
    let mut opened = 0;
    let info = allocation_counter::measure(|| opened = round(4000, now + Duration::from_secs(1)));
    assert_eq!(opened, 8000);
    assert_eq!(info.count_total, 0, "{info:?}");
    // The counter does see allocations (a handshake makes several).
    let info = allocation_counter::measure(|| {
        gateway.handle_timeout(now + Duration::from_secs(200));
    });
    assert!(info.count_total > 0);
}
