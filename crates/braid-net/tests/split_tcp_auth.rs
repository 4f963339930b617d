//! The split-TCP server opens connections only for a gateway whose key it knows: a
//! stranger's handshake, a datagram in the clear and a replayed datagram are refused and
//! counted, and none of them reaches the destination; the same OPEN sealed by the allowed
//! gateway does. On 127.0.0.1, no root needed.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use braid_core::stream::{StreamConfig, StreamSender};
use braid_core::Instant;
use braid_net::secure::ServerSecurity;
use braid_net::split_tcp::frame::Frame;
use braid_net::split_tcp::service::ServerLoop;
use braid_secure::{
    Gateway, GatewayConfig, PrivateKey, Seed, ServerConfig, DATA_HEADER_LEN, DATA_OVERHEAD,
    MAX_HANDSHAKE_LEN,
};

const NEW: u8 = 1;

/// A stream chunk carrying OPEN of connection 1 to `to`.
fn open_chunk(to: SocketAddr) -> Vec<u8> {
    let mut tx = StreamSender::new(StreamConfig::default(), 1);
    let mut frame = Vec::new();
    Frame::Open { conn: 1, to }.emit(&mut frame);
    assert_eq!(tx.write(&frame), frame.len());
    let mut chunk = Vec::new();
    tx.poll_transmit(Instant::from_millis(1), &mut chunk)
        .expect("a chunk within the first window");
    chunk
}

/// The envelope the split-TCP gateway puts before a chunk: NEW, path 0 of 1, `session`.
fn enveloped(session: u32, chunk: &[u8]) -> Vec<u8> {
    let mut d = vec![0xB7, NEW, 0, 1];
    d.extend_from_slice(&session.to_be_bytes());
    d.extend_from_slice(chunk);
    d
}

/// Runs `key`'s handshake with the server over `sock`; the gateway endpoint after it.
fn handshake(sock: &UdpSocket, key: PrivateKey, server: &PrivateKey, seed: u8) -> Gateway {
    let now = Instant::from_millis(1000);
    let config = GatewayConfig::new(
        key,
        server.public_key(),
        Duration::from_secs(1_700_000_000),
        Seed::from_u64(u64::from(seed)),
    );
    let mut g = Gateway::new(config, &[0], now).expect("a gateway endpoint");
    let mut buf = [0u8; 2048];
    while let Some(t) = g.poll_transmit(now, &mut buf) {
        sock.send(&buf[..t.len]).expect("a handshake sent");
    }
    // The server answers an allowed key; a stranger gets nothing.
    if let Ok(n) = sock.recv(&mut buf) {
        let _ = g.handle(now, 0, &mut buf[..n]);
        while let Some(t) = g.poll_transmit(now, &mut buf) {
            sock.send(&buf[..t.len]).expect("a handshake sent");
        }
    }
    g
}

fn accepted(dest: &TcpListener, wait: Duration) -> usize {
    let mut n = 0;
    let step = Duration::from_millis(20);
    let mut waited = Duration::ZERO;
    while waited < wait {
        match dest.accept() {
            Ok(_) => n += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(step);
                waited += step;
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
    n
}

#[test]
fn only_an_authenticated_gateway_makes_the_server_connect() {
    let server_key = PrivateKey::from_bytes([7; 32]);
    let allowed = PrivateKey::from_bytes([8; 32]);
    let stranger = PrivateKey::from_bytes([9; 32]);
    let config = ServerConfig::new(
        server_key.clone(),
        vec![allowed.public_key()],
        Seed::from_u64(1),
    );
    let sec = ServerSecurity::Noise(Box::new(
        braid_secure::Server::new(config, Instant::from_millis(1000)).unwrap(),
    ));
    let mut lp = ServerLoop::new(SocketAddr::from(([127, 0, 0, 1], 0)), sec).unwrap();
    let at = lp.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        lp.run(&s);
        lp
    });

    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    dest.set_nonblocking(true).unwrap();
    let to = dest.local_addr().unwrap();
    let chunk = open_chunk(to);

    // A stranger: its handshake is refused, so it has no keys; what it sends in the clear
    // (the envelope and the OPEN as they were before the channel was keyed) is not a
    // datagram of any session.
    let bad = UdpSocket::bind("127.0.0.1:0").unwrap();
    bad.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    bad.connect(at).unwrap();
    let g = handshake(&bad, stranger, &server_key, 2);
    assert!(g.session().is_none(), "the server answered a stranger");
    bad.send(&enveloped(1, &chunk)).unwrap();

    // The allowed gateway, with the same OPEN sealed in its session.
    let good = UdpSocket::bind("127.0.0.1:0").unwrap();
    good.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    good.connect(at).unwrap();
    let mut g = handshake(&good, allowed, &server_key, 3);
    let session = g.session().expect("the allowed key's handshake").get();
    let plain = enveloped(session, &chunk);
    let mut buf = vec![0u8; plain.len() + DATA_OVERHEAD];
    buf[DATA_HEADER_LEN..DATA_HEADER_LEN + plain.len()].copy_from_slice(&plain);
    let n = g
        .seal(Instant::from_millis(1001), 0, &mut buf, plain.len())
        .unwrap();
    good.send(&buf[..n]).unwrap();
    assert_eq!(
        accepted(&dest, Duration::from_secs(3)),
        1,
        "the sealed OPEN, and only it, reached the destination"
    );

    // The stranger replays the sealed datagram it saw, and tampers with a copy.
    bad.send(&buf[..n]).unwrap();
    // A copy with a counter never seen (its last byte changed): its tag fails.
    let mut forged = buf[..n].to_vec();
    forged[15] ^= 0x40;
    bad.send(&forged).unwrap();
    // A keepalive of the allowed gateway is echoed once the server has handled all before.
    let keep = enveloped(session, &[]);
    let mut kbuf = vec![0u8; keep.len() + DATA_OVERHEAD];
    kbuf[DATA_HEADER_LEN..DATA_HEADER_LEN + keep.len()].copy_from_slice(&keep);
    let kn = g
        .seal(Instant::from_millis(1002), 0, &mut kbuf, keep.len())
        .unwrap();
    good.send(&kbuf[..kn]).unwrap();
    let mut reply = [0u8; MAX_HANDSHAKE_LEN];
    let rn = good.recv(&mut reply).expect("the keepalive's echo");
    assert!(g
        .handle(Instant::from_millis(1003), 0, &mut reply[..rn])
        .is_ok());
    assert_eq!(accepted(&dest, Duration::from_millis(200)), 0);

    stop.store(true, Ordering::Relaxed);
    let lp = thread.join().unwrap();
    let c = lp.counts();
    assert_eq!(c.sessions, 1, "only the allowed gateway has a session");
    assert_eq!(c.opened, 1);
    assert!(c.refused.unknown_key >= 1, "{:?}", c.refused);
    assert!(c.refused.replayed >= 1, "{:?}", c.refused);
    // The clear-text datagram and the tampered copy.
    assert!(c.refused.unauthenticated >= 2, "{:?}", c.refused);
}
