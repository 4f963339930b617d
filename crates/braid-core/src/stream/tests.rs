//! End-to-end tests of the stream over the deterministic two-path link model, and unit
//! tests of the sender's failure state machine and SD-FRT's per-path counting.

use std::time::Duration;

use proptest::prelude::*;

use super::chunk::{Chunk, Sack};
use super::link::{Link, LinkParams};
use super::*;
use crate::Instant;

struct Outcome {
    data: Vec<u8>,
    done_at: Option<Instant>,
    sender: SenderStats,
    receiver: ReceiverStats,
    /// (time, bytes read) per read.
    reads: Vec<(Instant, usize)>,
}

impl Outcome {
    /// Goodput of the whole transfer, Mbit/s.
    fn mbit(&self) -> f64 {
        let secs = self.done_at.map_or(f64::INFINITY, |t| t.as_secs_f64());
        self.data.len() as f64 * 8.0 / secs / 1e6
    }

    /// Bytes read in `[from, to)`.
    fn read_between(&self, from: Instant, to: Instant) -> usize {
        self.reads
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, n)| n)
            .sum()
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Sends `total` bytes from a sender over `fwd` to a receiver whose SACKs return over `rev`.
fn run(
    config: StreamConfig,
    rconfig: ReceiverConfig,
    fwd: Vec<LinkParams>,
    rev: Vec<LinkParams>,
    total: usize,
    seed: u64,
    limit: Duration,
) -> Outcome {
    let data = pattern(total);
    let mut s = StreamSender::new(config, fwd.len());
    let mut r = StreamReceiver::new(rconfig);
    let mut fwd: Vec<Link> = fwd
        .into_iter()
        .enumerate()
        .map(|(i, p)| Link::new(p, seed * 31 + i as u64))
        .collect();
    let mut rev: Vec<Link> = rev
        .into_iter()
        .enumerate()
        .map(|(i, p)| Link::new(p, seed * 31 + 17 + i as u64))
        .collect();
    let limit = Instant::ZERO + limit;
    let (mut now, mut written, mut buf) = (Instant::ZERO, 0, Vec::new());
    let mut out = Vec::with_capacity(total);
    let mut reads = Vec::new();
    let mut done_at = None;
    let mut scratch = vec![0u8; 64 * 1024];
    for _ in 0..10_000_000 {
        written += s.write(&data[written..]);
        if written == total {
            s.finish();
        }
        while let Some(p) = s.poll_transmit(now, &mut buf) {
            fwd[p as usize].send(now, &buf);
        }
        loop {
            let n = r.read(&mut scratch);
            if n == 0 {
                break;
            }
            out.extend_from_slice(&scratch[..n]);
            reads.push((now, n));
        }
        while let Some(p) = r.poll_transmit(now, &mut buf) {
            rev[p as usize].send(now, &buf);
        }
        if r.is_finished() && done_at.is_none() {
            done_at = Some(now);
        }
        if done_at.is_some() && s.is_done() {
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
                r.handle_datagram(now, i as u8, &b);
            }
        }
        for (i, l) in rev.iter_mut().enumerate() {
            while let Some(b) = l.arrive(now) {
                s.handle_datagram(now, i as u8, &b);
            }
        }
        s.handle_timeout(now);
        r.handle_timeout(now);
    }
    Outcome {
        data: out,
        done_at,
        sender: s.stats().clone(),
        receiver: r.stats(),
        reads,
    }
}

fn two(a: LinkParams, b: LinkParams) -> Vec<LinkParams> {
    vec![a, b]
}

fn config(
    fast_retransmit: FastRetransmit,
    window_advance: WindowAdvance,
    loss_response: LossResponse,
    scheduler: StreamScheduler,
) -> StreamConfig {
    StreamConfig {
        fast_retransmit,
        window_advance,
        loss_response,
        scheduler,
        ..StreamConfig::default()
    }
}

const MB: usize = 1 << 20;

#[test]
fn every_option_delivers_a_megabyte_intact_and_in_order() {
    let expected = pattern(MB);
    for frt in [FastRetransmit::CumulativeDriven, FastRetransmit::SackDriven] {
        for cwa in [
            WindowAdvance::CumulativeDriven,
            WindowAdvance::SackAndCumulativeDriven,
        ] {
            for loss in [
                LossResponse::Halving,
                LossResponse::Proportional,
                LossResponse::Lia,
            ] {
                for sched in [
                    StreamScheduler::RoundRobin,
                    StreamScheduler::Lazy,
                    StreamScheduler::SmallestRtt,
                ] {
                    let o = run(
                        config(frt, cwa, loss, sched),
                        ReceiverConfig::default(),
                        two(
                            LinkParams::new(2.0, 50).loss(0.01),
                            LinkParams::new(1.0, 150).loss(0.02),
                        ),
                        two(
                            LinkParams::new(2.0, 50).loss(0.01),
                            LinkParams::new(1.0, 150).loss(0.01),
                        ),
                        MB,
                        1,
                        Duration::from_secs(300),
                    );
                    let name = format!("{frt:?} {cwa:?} {loss:?} {sched:?}");
                    assert!(o.done_at.is_some(), "{name}: unfinished");
                    assert!(o.data == expected, "{name}: bytes differ");
                }
            }
        }
    }
}

#[test]
fn a_small_receive_window_still_delivers() {
    let o = run(
        StreamConfig::default(),
        ReceiverConfig {
            buffer: 16 * 1024,
            ..ReceiverConfig::default()
        },
        two(
            LinkParams::new(2.0, 50).loss(0.01),
            LinkParams::new(1.0, 100),
        ),
        two(LinkParams::new(2.0, 50), LinkParams::new(1.0, 100)),
        MB / 4,
        3,
        Duration::from_secs(300),
    );
    assert!(o.data == pattern(MB / 4));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every byte once and in order under any loss, duplication and reordering.
    #[test]
    fn delivers_every_byte_once_in_order(
        seed in 0u64..1000,
        loss in 0.0f64..0.3,
        dup in 0.0f64..0.3,
        jitter_ms in 0u64..200,
        frt in prop_oneof![Just(FastRetransmit::CumulativeDriven), Just(FastRetransmit::SackDriven)],
    ) {
        let impair = |mbit, ms| {
            let mut p = LinkParams::new(mbit, ms).loss(loss);
            p.duplicate = dup;
            p.jitter = Duration::from_millis(jitter_ms);
            p
        };
        let o = run(
            StreamConfig { fast_retransmit: frt, ..StreamConfig::default() },
            ReceiverConfig::default(),
            two(impair(2.0, 30), impair(1.0, 80)),
            two(impair(2.0, 30), impair(1.0, 80)),
            40_000,
            seed,
            Duration::from_secs(3600),
        );
        prop_assert!(o.done_at.is_some());
        prop_assert!(o.data == pattern(40_000));
    }
}
