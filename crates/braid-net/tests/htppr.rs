//! `braid send`/`receive` over HTPPR on loopback, with the links' faults made by relays in
//! this process: the hare relay flips one bit in 5% of 32-byte blocks, the tortoise relay
//! delays each direction by 25 ms (50 ms RTT). Real UDP-Lite and TCP sockets, no root.
#![expect(
    clippy::unwrap_used,
    reason = "the relays and fixtures are test code: a failure there fails the test"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use braid_net::htppr::{self, udplite, BoundReceiver, Options, TransferError};

#[expect(
    clippy::disallowed_methods,
    reason = "the test's relays run in real time"
)]
fn now() -> std::time::Instant {
    std::time::Instant::now()
}

/// xorshift64*: the relay's faults are the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-htppr-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_file(dir: &Path, name: &str, len: usize, seed: u64) -> (PathBuf, Vec<u8>) {
    let mut rng = Rng(seed);
    let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    let path = dir.join(name);
    std::fs::write(&path, &data).unwrap();
    (path, data)
}

fn sha256_hex(data: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Forwards hare datagrams to `to`, flipping one bit in each 32-byte stretch with
/// probability `block_corruption`; returns the relay's address.
fn hare_relay(to: SocketAddr, block_corruption: f64, stop: Arc<AtomicBool>) -> SocketAddr {
    let s = udplite::socket("127.0.0.1:0".parse().unwrap()).unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let out = udplite::socket("127.0.0.1:0".parse().unwrap()).unwrap();
    out.set_nonblocking(false).unwrap();
    let addr = s.local_addr().unwrap();
    thread::spawn(move || {
        let mut rng = Rng(0x5eed);
        let mut buf = [0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            let Ok(n) = s.recv(&mut buf) else { continue };
            for stretch in buf[..n].chunks_mut(32) {
                if rng.f64() < block_corruption {
                    let bit = (rng.next() % (stretch.len() as u64 * 8)) as usize;
                    stretch[bit / 8] ^= 1 << (bit % 8);
                }
            }
            let _ = out.send_to(&buf[..n], to);
        }
    });
    addr
}

/// Copies `from` to `to`, each read delivered `delay` after it arrived.
fn delayed_copy(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(std::time::Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.send((now(), buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    thread::spawn(move || {
        for (at, bytes) in rx {
            let due = at + delay;
            let t = now();
            if due > t {
                thread::sleep(due - t);
            }
            if to.write_all(&bytes).is_err() {
                return;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// A TCP relay to `to` adding `one_way` in each direction, for one connection.
fn tortoise_relay(to: SocketAddr, one_way: Duration) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        let (a, _) = l.accept().unwrap();
        let b = TcpStream::connect(to).unwrap();
        a.set_nodelay(true).unwrap();
        b.set_nodelay(true).unwrap();
        delayed_copy(a.try_clone().unwrap(), b.try_clone().unwrap(), one_way);
        delayed_copy(b, a, one_way);
    });
    addr
}

fn local_opts() -> Options {
    let mut o = Options::parse("127.0.0.1:0", "127.0.0.1:0", 200.0).unwrap();
    o.stall_timeout = Duration::from_secs(20);
    o
}

#[test]
fn twenty_megabytes_over_a_corrupting_hare_arrive_whole() {
    let src = temp_dir("src");
    let dst = temp_dir("dst");
    let (path, data) = write_file(&src, "twenty.bin", 20 << 20, 7);
    let receiver = BoundReceiver::bind(&dst, &local_opts()).unwrap();
    let (hare, tortoise) = receiver.addrs();
    let rx = thread::spawn(move || receiver.run(&mut |_| {}));
    let stop = Arc::new(AtomicBool::new(false));
    let mut opts = local_opts();
    opts.hare = hare_relay(hare, 0.05, stop.clone());
    opts.tortoise = tortoise_relay(tortoise, Duration::from_millis(25));
    let sent = htppr::send(&path, &opts, &mut |_| {}).unwrap();
    let got = rx.join().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    println!("sent {sent:?}\nreceived {got:?}");
    let want = sha256_hex(&data);
    assert_eq!(sent.sha256, want);
    assert_eq!(got.sha256, want);
    assert_eq!(std::fs::read(dst.join("twenty.bin")).unwrap(), data);
    // 0.95^44: nearly every packet was damaged and repaired block by block, not resent.
    assert!(got.repairs > 1000, "{got:?}");
    assert!(sent.hare_bytes < data.len() as u64 * 13 / 10, "{sent:?}");
    assert!(!dst.join(".twenty.bin.braid-part").exists());
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_dir_all(&dst);
}

#[test]
fn an_existing_file_is_refused_with_a_reason_at_both_ends() {
    let src = temp_dir("src-exists");
    let dst = temp_dir("dst-exists");
    let (path, _) = write_file(&src, "same.bin", 100_000, 3);
    std::fs::write(dst.join("same.bin"), b"keep me").unwrap();
    let receiver = BoundReceiver::bind(&dst, &local_opts()).unwrap();
    let (hare, tortoise) = receiver.addrs();
    let rx = thread::spawn(move || receiver.run(&mut |_| {}));
    let opts = Options {
        hare,
        tortoise,
        ..local_opts()
    };
    let e = htppr::send(&path, &opts, &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::Refused(_)), "{e}");
    assert!(e.to_string().contains("already exists"), "{e}");
    let e = rx.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(std::fs::read(dst.join("same.bin")).unwrap(), b"keep me");
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_dir_all(&dst);
}

#[test]
fn a_missing_receiver_and_bad_addresses_are_one_line_errors() {
    let src = temp_dir("src-gone");
    let (path, _) = write_file(&src, "x.bin", 1000, 5);
    // A port nobody listens on: bind one, note it, close it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let opts = Options {
        hare: port,
        tortoise: port,
        ..local_opts()
    };
    let e = htppr::send(&path, &opts, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("cannot reach the receiver"), "{e}");
    let e = Options::parse("nohost", "127.0.0.1:1", 20.0).unwrap_err();
    assert!(
        e.to_string().starts_with("bad --hare address 'nohost'"),
        "{e}"
    );
    let e = htppr::send(&src.join("absent"), &local_opts(), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("absent"), "{e}");
    assert!(!e.to_string().contains('\n'));
    let _ = std::fs::remove_dir_all(&src);
}
