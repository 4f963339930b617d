//! A split-TCP server session learns its paths' addresses one by one: the stream's
//! datagrams for a path it has not heard from yet wait, and leave when the gateway's first
//! datagram on that path arrives, instead of being lost (which cost the stream an RTO and
//! the path's window: lab-split-tcp). On 127.0.0.1 without encryption, no root needed.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use braid_core::stream::{StreamConfig, StreamSender};
use braid_core::Instant;
use braid_net::secure::ServerSecurity;
use braid_net::split_tcp::frame::Frame;
use braid_net::split_tcp::service::{ServerLoop, ENVELOPE};

const NEW: u8 = 1;
const SESSION: u32 = 0x0BAD_CAFE;
/// The stream chunk type of DATA (braid_core::stream::chunk).
const DATA: u8 = 1;

/// The envelope of path `path` of 2, and `chunk`.
fn enveloped(flags: u8, path: u8, chunk: &[u8]) -> Vec<u8> {
    let mut d = vec![0xB7, flags, path, 2];
    d.extend_from_slice(&SESSION.to_be_bytes());
    d.extend_from_slice(chunk);
    d
}

/// The DATA chunks' envelope paths among the datagrams `sock` receives until it has
/// waited `quiet` times 50 ms in all without one (the download is finite).
fn data_paths(sock: &UdpSocket, quiet: u32) -> Vec<u8> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("a read timeout");
    let mut paths = Vec::new();
    let mut buf = [0u8; 2048];
    let mut waited = 0;
    while waited < quiet {
        match sock.recv(&mut buf) {
            Ok(n) if n > ENVELOPE && buf[0] == 0xB7 && buf[ENVELOPE] == DATA => paths.push(buf[2]),
            Ok(_) => {}
            Err(_) => waited += 1,
        }
    }
    paths
}

#[test]
fn datagrams_for_a_path_not_yet_heard_from_wait_for_its_address() {
    let mut lp = ServerLoop::new(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        ServerSecurity::Plaintext,
    )
    .unwrap();
    let at = lp.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        lp.run(&s);
        lp
    });

    // The destination sends 64 KB as soon as the server connects: more than both paths'
    // initial windows, so the stream sends on both.
    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = dest.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut c, _) = dest.accept().unwrap();
        c.write_all(&[0x5A; 64 * 1024]).unwrap();
        std::thread::sleep(Duration::from_secs(3));
    });

    // The gateway's OPEN on path 0 only; path 1 has not spoken yet.
    let mut tx = StreamSender::new(StreamConfig::default(), 1);
    let mut frame = Vec::new();
    Frame::Open { conn: 1, to }.emit(&mut frame);
    tx.write(&frame);
    let mut chunk = Vec::new();
    tx.poll_transmit(Instant::from_millis(1), &mut chunk)
        .unwrap();
    let path0 = UdpSocket::bind("127.0.0.1:0").unwrap();
    path0.connect(at).unwrap();
    let path1 = UdpSocket::bind("127.0.0.1:0").unwrap();
    path1.connect(at).unwrap();
    path0.send(&enveloped(NEW, 0, &chunk)).unwrap();
    let on0 = data_paths(&path0, 6);
    assert!(!on0.is_empty(), "the download started on path 0");
    assert!(on0.iter().all(|&p| p == 0));

    // Path 1's first datagram (a keepalive) gives its address: what the stream sent on
    // it meanwhile arrives now, not after an RTO (1 s) that fails the path.
    path1.send(&enveloped(0, 1, &[])).unwrap();
    let on1 = data_paths(&path1, 10);
    assert!(
        !on1.is_empty() && on1.iter().all(|&p| p == 1),
        "path 1's DATA waited for its address: {on1:?}"
    );

    stop.store(true, Ordering::Relaxed);
    let lp = thread.join().unwrap();
    server.join().unwrap();
    let c = lp.counts();
    assert_eq!(c.sessions, 1);
    assert_eq!(c.refused.send_errors, 0, "{:?}", c.refused);
}
