//! The model under attack: two stacks exchanging data while an adversary injects garbage,
//! corrupted copies of real packets, and well-formed segments with valid checksums whose
//! fields (sequence and acknowledgment numbers, flags, window, options, SACK blocks,
//! payload) are random or near the connection's own. Nothing may panic, every
//! connection's invariants must hold after every packet, and state stays bounded.
//! Also the order of what the application's calls send: a FIN before a later SYN.

use std::collections::VecDeque;

use braid_core::Instant;

use super::wire::{self, Header, SackBlocks};
use super::{Seq, Stack};
use crate::host::packets::Packets;
use crate::host::transport::Buffers;
use crate::{Packet, Rng};

const ADDRS: [[u8; 4]; 2] = [[10, 0, 0, 2], [10, 1, 0, 2]];
const PORT: u16 = 80;
const MAX_ACCEPTED: usize = 16;
const BUFFERS: Buffers = Buffers {
    rx: 32_768,
    tx: 32_768,
    nagle: false,
    initial_window: None,
    prism: false,
    sack: true,
};

/// A packet shaped like `real` with fields moved at random: near the real numbers most of
/// the time, anywhere otherwise.
fn forge(rng: &mut Rng, real: &Header) -> Packet {
    let mut h = *real;
    let near = |rng: &mut Rng, s: Seq| match rng.below(4) {
        0 => Seq(rng.next_u64() as u32),
        _ => s + (rng.below(140_000) as u32).wrapping_sub(70_000),
    };
    h.seq = near(rng, h.seq);
    h.ack = near(rng, h.ack);
    if rng.chance(0.7) {
        h.flags = rng.below(64) as u8;
    }
    h.window = rng.below(65_536) as u16;
    h.mss = rng.chance(0.1).then(|| rng.below(65_536) as u16);
    h.window_shift = rng.chance(0.1).then(|| rng.below(20) as u8);
    h.sack_permitted = rng.chance(0.1);
    h.sack = SackBlocks::default();
    for _ in 0..rng.below(5) {
        let l = near(rng, real.ack);
        h.sack.push(l, l + rng.below(20_000) as u32);
    }
    let len = if rng.chance(0.5) {
        0
    } else {
        rng.below(1400) as usize
    };
    let mut buf = Vec::new();
    wire::emit(&mut buf, &h, 0, len, |p| p.fill(0xa5));
    buf
}

fn garbage(rng: &mut Rng, real: &[u8]) -> Packet {
    if rng.chance(0.5) || real.is_empty() {
        let mut p: Vec<u8> = (0..rng.below(120)).map(|_| rng.below(256) as u8).collect();
        if let Some(b) = p.first_mut() {
            *b = 0x45;
        }
        p
    } else {
        let mut p = real.to_vec();
        for _ in 0..=rng.below(3) {
            let bit = rng.below(p.len() as u64 * 8);
            p[(bit / 8) as usize] ^= 1 << (bit % 8);
        }
        p
    }
}

#[test]
fn hostile_packets_never_panic_and_keep_state_sound() {
    for seed in 0..4 {
        let mut rng = Rng::new(seed);
        let mut stacks = ADDRS.map(|a| Stack::new(a, 1400, Rng::new(seed ^ u64::from(a[1]))));
        let mut outs = [Packets::default(), Packets::default()];
        let mut wire_queue: VecDeque<(Instant, usize, Packet)> = VecDeque::new();
        let mut last_real: [Option<Packet>; 2] = [None, None];
        let mut conns = Vec::new();
        let mut accepted = Vec::new();
        let end = Instant::from_millis(5_000);
        let mut now = Instant::ZERO;
        let mut injected = 0;
        while now < end {
            // A new client connection now and then.
            if rng.chance(0.01) && conns.len() < 8 {
                conns.extend(stacks[0].connect(ADDRS[1], PORT, BUFFERS));
            }
            // Deliver what is due, and forge something.
            while wire_queue.front().is_some_and(|(t, _, _)| *t <= now) {
                let (_, to, p) = wire_queue.pop_front().unwrap();
                last_real[to] = Some(p.clone());
                let mut accept =
                    |port, _| (port == PORT && accepted.len() < MAX_ACCEPTED).then_some(BUFFERS);
                if let Some((id, _, _)) = stacks[to].ingress(now, p, &mut outs[to], &mut accept) {
                    accepted.push(id);
                }
                stacks[to].check();
            }
            for to in 0..2 {
                if !rng.chance(0.5) {
                    continue;
                }
                let real = last_real[to].clone().unwrap_or_default();
                let p = match wire::parse(&real) {
                    Ok(s) if rng.chance(0.7) => forge(&mut rng, &s.header),
                    _ => garbage(&mut rng, &real),
                };
                injected += 1;
                let mut accept =
                    |port, _| (port == PORT && accepted.len() < MAX_ACCEPTED).then_some(BUFFERS);
                if let Some((id, _, _)) = stacks[to].ingress(now, p, &mut outs[to], &mut accept) {
                    accepted.push(id);
                }
                stacks[to].check();
            }
            // The applications: send and read whatever they can.
            for (side, ids) in [(0, &conns), (1, &accepted)] {
                for &id in ids.iter() {
                    if let Some(c) = stacks[side].conn(id) {
                        c.write_zeros(50_000);
                        c.discard(usize::MAX);
                        if rng.chance(0.001) {
                            c.close();
                        }
                    }
                }
            }
            for side in 0..2 {
                stacks[side].egress(now, &mut outs[side]);
                stacks[side].check();
                stacks[side].check_skipped(now);
                while let Some((p, checked)) = outs[side].pop_checked() {
                    // What the model vouches for (header compression then skips the
                    // sums) verifies, RSTs to forged packets included.
                    assert!(checked && wire::parse(&p).is_ok());
                    wire_queue.push_back((now + std::time::Duration::from_millis(5), 1 - side, p));
                }
                assert!(stacks[side].connections() <= MAX_ACCEPTED + 8);
            }
            let next = [
                stacks[0].poll_at(now),
                stacks[1].poll_at(now),
                wire_queue.front().map(|(t, _, _)| *t),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
            // At least every millisecond: the adversary and the applications act on a tick.
            let tick = std::time::Duration::from_millis(1);
            now = next.clamp(now + tick / 10, now + tick);
        }
        println!(
            "seed {seed}: {injected} hostile packets, {} + {} connections, {:?} / {:?}",
            stacks[0].connections(),
            stacks[1].connections(),
            stacks[0].stats(),
            stacks[1].stats(),
        );
        assert!(injected > 4_000, "{injected}");
    }
}

/// Runs both stacks until nothing is left to deliver: packets cross at once.
fn exchange(stacks: &mut [Stack; 2], outs: &mut [Packets; 2], now: Instant) {
    let mut accept = |port, _| (port == PORT).then_some(BUFFERS);
    loop {
        let mut moved = false;
        for side in 0..2 {
            stacks[side].egress(now, &mut outs[side]);
            while let Some(p) = outs[side].pop() {
                moved = true;
                stacks[1 - side].ingress(now, p, &mut outs[1 - side], &mut accept);
            }
        }
        if !moved {
            break;
        }
    }
}

#[test]
fn a_closed_connection_sends_its_fin_before_a_connection_opened_after_it() {
    let mut stacks = ADDRS.map(|a| Stack::new(a, 1400, Rng::new(u64::from(a[1]))));
    let mut outs = [Packets::default(), Packets::default()];
    let now = Instant::ZERO;
    let a = stacks[0].connect(ADDRS[1], PORT, BUFFERS).unwrap();
    let b = stacks[0].connect(ADDRS[1], PORT, BUFFERS).unwrap();
    exchange(&mut stacks, &mut outs, now);
    // The first slot is free again, so the next connection takes the slot before b's.
    stacks[0].discard(a);
    stacks[0].linger(now, b);
    stacks[0].connect(ADDRS[1], PORT, BUFFERS).unwrap();
    stacks[0].egress(now, &mut outs[0]);
    let mut flags = Vec::new();
    while let Some(p) = outs[0].pop() {
        flags.push(wire::parse(&p).unwrap().header.flags & (wire::FIN | wire::SYN));
    }
    assert_eq!(flags, vec![wire::FIN, wire::SYN]);
}
