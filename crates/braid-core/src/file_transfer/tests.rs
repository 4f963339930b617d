//! The transfer protocol end to end over the stream's deterministic link model
//! (crate::stream::link; fixed seeds): three paths, one failing midway and one
//! reordering; resume after an interruption; and each end's failures reaching the other.

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::*;
use crate::stream::link::{Link, LinkParams};
use crate::stream::FastRetransmit;

/// The sender's file in memory; `change_after` reads, `check` reports it changed.
struct Mem {
    data: Vec<u8>,
    reads: usize,
    change_after: Option<usize>,
}

impl Source for Mem {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, String> {
        self.reads += 1;
        let at = (offset as usize).min(self.data.len());
        let n = buf.len().min(self.data.len() - at);
        buf[..n].copy_from_slice(&self.data[at..at + n]);
        Ok(n)
    }

    fn check(&mut self) -> Result<(), String> {
        match self.change_after {
            Some(n) if self.reads > n => Err("f.bin changed while it was being sent".into()),
            _ => Ok(()),
        }
    }
}

/// The receiver's directory in memory: the partial file and, once matched, the file.
#[derive(Default)]
struct Dir {
    part: Vec<u8>,
    /// The offer the partial belongs to.
    part_of: Option<Offer>,
    kept: Option<Vec<u8>>,
    /// Writes fail once the partial file would exceed this (a full disk).
    capacity: Option<usize>,
}

impl Sink for Dir {
    fn open(&mut self, offer: &Offer) -> Result<(u64, Sha256), String> {
        if self.part_of.as_ref() != Some(offer) {
            self.part.clear();
            self.part_of = Some(offer.clone());
        }
        let mut h = Sha256::new();
        h.update(&self.part);
        Ok((self.part.len() as u64, h))
    }

    fn restart(&mut self) -> Result<(), String> {
        self.part.clear();
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        if self
            .capacity
            .is_some_and(|c| self.part.len() + bytes.len() > c)
        {
            return Err("writing f.bin.part: No space left on device (os error 28)".into());
        }
        self.part.extend_from_slice(bytes);
        Ok(())
    }

    fn finish(&mut self, matched: bool) -> Result<(), String> {
        let part = std::mem::take(&mut self.part);
        self.part_of = None;
        if matched {
            self.kept = Some(part);
        }
        Ok(())
    }
}

fn config() -> TransferConfig {
    let stream = StreamConfig {
        mtu: 1400,
        send_buffer: 8 << 20,
        initial_peer_rwnd: 8 << 20,
        random_loss: true,
        fast_retransmit: FastRetransmit::Rack,
        ..StreamConfig::default()
    };
    let receiver = ReceiverConfig {
        buffer: 8 << 20,
        ack_delay: Duration::from_millis(20),
        ..ReceiverConfig::default()
    };
    TransferConfig::new(stream, receiver)
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn offer(data: &[u8]) -> Offer {
    Offer {
        name: "f.bin".into(),
        size: data.len() as u64,
        mtime_ns: 1_700_000_000_000_000_000,
    }
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Three paths: 40 Mbit/s at 10 ms; 30 Mbit/s at 30 ms, down both ways from `fail` on;
/// 20 Mbit/s at 20 ms with up to 1 ms of jitter per datagram (reordering within the path).
fn three_paths(fail: Instant) -> Vec<LinkParams> {
    let mut reorder = LinkParams::new(20.0, 20);
    reorder.jitter = Duration::from_millis(1);
    vec![
        LinkParams::new(40.0, 10),
        LinkParams::new(30.0, 30).down(fail, Instant::MAX),
        reorder,
    ]
}

struct Run {
    sender: FileSender<Mem>,
    receiver: FileReceiver<Dir>,
    /// Virtual time at the end.
    now: Instant,
}

/// Drives both ends over `links` (each both ways) until both stop, `stop(receiver)` says
/// so (an interruption), or `limit`.
fn run(
    source: Mem,
    dir: Dir,
    links: Vec<LinkParams>,
    seed: u64,
    limit: Duration,
    stop: impl Fn(&FileReceiver<Dir>) -> bool,
) -> Run {
    let n = links.len();
    let o = offer(&source.data);
    let mut s = FileSender::new(config(), n, o, source, Instant::ZERO);
    let mut r = FileReceiver::new(config(), n, dir, Instant::ZERO);
    let mut fwd: Vec<Link> = links
        .iter()
        .enumerate()
        .map(|(i, p)| Link::new(p.clone(), seed * 31 + i as u64))
        .collect();
    let mut rev: Vec<Link> = links
        .into_iter()
        .enumerate()
        .map(|(i, p)| Link::new(p, seed * 31 + 17 + i as u64))
        .collect();
    let limit = Instant::ZERO + limit;
    let mut now = Instant::ZERO;
    let mut buf = Vec::new();
    loop {
        s.drive(now);
        r.drive(now);
        while let Some(p) = s.poll_transmit(now, &mut buf) {
            fwd[usize::from(p)].send(now, &buf);
        }
        while let Some(p) = r.poll_transmit(now, &mut buf) {
            rev[usize::from(p)].send(now, &buf);
        }
        let ended = |st: Status, flushed: bool| st != Status::Running && flushed;
        if (ended(s.status(), s.flushed()) && ended(r.status(), r.flushed())) || stop(&r) {
            break;
        }
        let next = [s.poll_timeout(), r.poll_timeout()]
            .into_iter()
            .chain(fwd.iter().chain(&rev).map(Link::next_arrival))
            .flatten()
            .min();
        match next {
            Some(t) if t <= limit => now = now.max(t),
            _ => break,
        }
        for (i, l) in fwd.iter_mut().enumerate() {
            while let Some(b) = l.arrive(now) {
                r.handle_datagram(now, i as PathId, &b);
            }
        }
        for (i, l) in rev.iter_mut().enumerate() {
            while let Some(b) = l.arrive(now) {
                s.handle_datagram(now, i as PathId, &b);
            }
        }
        s.handle_timeout(now);
        r.handle_timeout(now);
    }
    Run {
        sender: s,
        receiver: r,
        now,
    }
}

fn mem(data: Vec<u8>) -> Mem {
    Mem {
        data,
        reads: 0,
        change_after: None,
    }
}

fn sha(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

#[test]
fn fifty_megabytes_cross_three_paths_one_failing_one_reordering() {
    let data = pattern(50 << 20, 7);
    let want = sha(&data);
    let r = run(
        mem(data.clone()),
        Dir::default(),
        three_paths(at(2000)),
        1,
        Duration::from_secs(120),
        |_| false,
    );
    assert_eq!(r.sender.status(), Status::Done, "at {:?}", r.now);
    assert_eq!(r.receiver.status(), Status::Done);
    assert_eq!(r.sender.sha256().as_deref(), Some(want.as_str()));
    assert_eq!(r.receiver.sha256().as_deref(), Some(want.as_str()));
    assert!(r.receiver.sink().kept.as_ref() == Some(&data));
    let st = r.sender.stream_stats();
    // Path 1 failed over (oSCTP §IV-E1) and the other two carried the rest.
    assert!(st.failures >= 1, "{st:?}");
    assert!(r.sender.is_failed(1));
    let chunks = r.sender.chunks_sent();
    assert!(chunks.iter().all(|&c| c > 1000), "{chunks:?}");
    // 50 MB at 90 Mbit/s, 60 after the failure at 2 s: about 6.3 s at best.
    assert!(r.now < at(12_000), "took {:?}", r.now);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let go = || {
        let r = run(
            mem(pattern(2 << 20, 3)),
            Dir::default(),
            three_paths(at(150)),
            5,
            Duration::from_secs(60),
            |_| false,
        );
        (r.now, r.sender.chunks_sent(), r.sender.status())
    };
    let a = go();
    assert_eq!(a.2, Status::Done);
    assert_eq!(a, go());
}

#[test]
fn an_interrupted_transfer_resumes_where_the_receiver_stopped() {
    let data = pattern(6 << 20, 11);
    let first = run(
        mem(data.clone()),
        Dir::default(),
        three_paths(Instant::MAX),
        2,
        Duration::from_secs(60),
        |r| r.progress().0 >= 2 << 20,
    );
    assert_eq!(first.receiver.status(), Status::Running);
    let dir = first.receiver.sink;
    let held = dir.part.len() as u64;
    assert!(held >= 2 << 20 && held < data.len() as u64, "{held}");
    let second = run(
        mem(data.clone()),
        dir,
        three_paths(Instant::MAX),
        3,
        Duration::from_secs(60),
        |_| false,
    );
    assert_eq!(second.sender.status(), Status::Done);
    assert_eq!(second.sender.resumed_from(), held);
    assert_eq!(second.receiver.resumed_from(), held);
    assert!(second.receiver.sink().kept.as_ref() == Some(&data));
    assert_eq!(second.receiver.sha256(), Some(sha(&data)));
}

#[test]
fn a_partial_file_whose_prefix_differs_is_sent_again_from_the_start() {
    let data = pattern(3 << 20, 13);
    let mut dir = Dir {
        part: data[..1 << 20].to_vec(),
        part_of: Some(offer(&data)),
        ..Dir::default()
    };
    dir.part[1000] ^= 1;
    let r = run(
        mem(data.clone()),
        dir,
        three_paths(Instant::MAX),
        4,
        Duration::from_secs(60),
        |_| false,
    );
    assert_eq!(r.sender.status(), Status::Done);
    assert_eq!(r.sender.resumed_from(), 0);
    assert!(r.receiver.sink().kept.as_ref() == Some(&data));
}

#[test]
fn a_full_disk_at_the_receiver_is_reported_to_the_sender() {
    let dir = Dir {
        capacity: Some(1 << 20),
        ..Dir::default()
    };
    let r = run(
        mem(pattern(4 << 20, 17)),
        dir,
        three_paths(Instant::MAX),
        6,
        Duration::from_secs(60),
        |_| false,
    );
    let Status::Failed(TransferError::Remote(m)) = r.sender.status() else {
        panic!("{:?}", r.sender.status());
    };
    assert!(m.contains("No space left on device"), "{m}");
    assert!(matches!(
        r.receiver.status(),
        Status::Failed(TransferError::Local(_))
    ));
    // Well before the peer timeout: the error crossed on the stream.
    assert!(r.now < at(5000), "{:?}", r.now);
}

#[test]
fn a_file_changed_during_the_send_stops_both_ends() {
    let mut source = mem(pattern(4 << 20, 19));
    source.change_after = Some(20);
    let r = run(
        source,
        Dir::default(),
        three_paths(Instant::MAX),
        8,
        Duration::from_secs(60),
        |_| false,
    );
    let Status::Failed(TransferError::Local(m)) = r.sender.status() else {
        panic!("{:?}", r.sender.status());
    };
    assert!(m.contains("changed"), "{m}");
    let Status::Failed(TransferError::Remote(m2)) = r.receiver.status() else {
        panic!("{:?}", r.receiver.status());
    };
    assert_eq!(m, m2);
    // The receiver keeps its partial file for a later resume.
    assert!(!r.receiver.sink().part.is_empty());
    assert!(r.receiver.sink().kept.is_none());
}

#[test]
fn a_silent_peer_is_gone_after_the_timeout() {
    let down = |p: LinkParams| p.down(at(500), Instant::MAX);
    let links = three_paths(Instant::MAX).into_iter().map(down).collect();
    let r = run(
        mem(pattern(8 << 20, 23)),
        Dir::default(),
        links,
        9,
        Duration::from_secs(60),
        |_| false,
    );
    assert_eq!(
        r.sender.status(),
        Status::Failed(TransferError::PeerGone(10))
    );
    assert_eq!(
        r.receiver.status(),
        Status::Failed(TransferError::PeerGone(10))
    );
}

#[test]
fn a_long_error_with_wide_characters_is_cut_on_a_character_boundary() {
    // 1100 three-byte characters: byte 1024 falls inside one of them.
    let mut io = Duplex::new(&config(), 1, Instant::ZERO);
    io.emit_error(&TransferError::Local("€".repeat(1100)));
    let queued = io.tx.buffered();
    assert!(queued > 1000 && queued <= 1024 + 16, "{queued}");
    // The peer's own failure is not sent back to it.
    let before = io.tx.buffered();
    io.emit_error(&TransferError::Remote("x".into()));
    assert_eq!(io.tx.buffered(), before);
}
