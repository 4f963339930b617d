//! Reed-Solomon blocks against the brute-force rule of an MDS code: a block comes back
//! whole exactly when any `k` of its `k + m` shards arrive, with the exact bytes and lengths.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::fec::rng::Rng;
use crate::PathConfig;

fn path() -> Path {
    Path::new(
        &PathConfig {
            id: 3,
            tx_capacity_bps: 10_000_000,
            rx_capacity_bps: 10_000_000,
        },
        Duration::from_millis(500),
        crate::Instant::ZERO,
    )
}

#[derive(Default)]
struct Sink(BTreeMap<u32, Vec<u8>>);

impl RecoveredSink for Sink {
    fn recovered(&mut self, seq: u32, payload: &[u8]) {
        assert!(self.0.insert(seq, payload.to_vec()).is_none());
    }
}

type Shard = (u32, u8, u8, u8, Vec<u8>);

fn parity_of(rs: &mut ReedSolomon, now: Instant) -> Vec<Shard> {
    let mut out = Vec::new();
    while let Some(rep) = rs.poll_repair(now, &[]) {
        assert_eq!(rep.path, 3);
        let RepairBody::Parity(p) = rep.body else {
            panic!("not parity")
        };
        out.push((
            p.first,
            p.data_count,
            p.parity_count,
            p.index,
            p.shard.to_vec(),
        ));
    }
    out
}

#[test]
fn a_block_returns_exactly_when_k_shards_arrive() {
    let p = path();
    let mut decoded_blocks = 0;
    for seed in 0..200u64 {
        let mut rng = Rng::new(seed);
        let k = 1 + rng.below(20);
        let pct = [10, 25, 50, 100][rng.below(4)];
        let params = ReedSolomonParams {
            redundancy_pct: pct,
            block: k as u32,
            flush_ms: 10.0,
        };
        let m = (k * pct as usize).div_ceil(100);
        let mut tx = ReedSolomon::new(params);
        let first = u32::MAX - 3; // wraps inside some blocks
        let pk: Vec<Vec<u8>> = (0..k)
            .map(|_| vec![rng.next_u64() as u8; rng.below(300)])
            .collect();
        for (i, d) in pk.iter().enumerate() {
            tx.on_data_sent(Instant::ZERO, first.wrapping_add(i as u32), &p, d);
        }
        let shards = parity_of(&mut tx, Instant::ZERO);
        assert_eq!(shards.len(), m, "k {k} pct {pct}");
        let mut rx = ReedSolomon::new(params);
        let mut sink = Sink::default();
        let keep = |rng: &mut Rng| rng.f64() < 0.7;
        let data_kept: Vec<usize> = (0..k).filter(|_| keep(&mut rng)).collect();
        let parity_kept: Vec<&Shard> = shards.iter().filter(|_| keep(&mut rng)).collect();
        // Parity first for half the cases, data first for the others. The reference: the
        // block is rebuilt the moment k shards (one of them parity) are in; what had not
        // arrived by then is recovered.
        let mut events: Vec<Option<usize>> = data_kept.iter().map(|&i| Some(i)).collect();
        let parity_events = vec![None; parity_kept.len()];
        if seed % 2 == 0 {
            events.splice(0..0, parity_events);
        } else {
            events.extend(parity_events);
        }
        let mut want: Option<Vec<u32>> = None;
        let (mut shards_in, mut parity_in) = (0, 0);
        let mut arrived = Vec::new();
        let mut next_parity = parity_kept.iter();
        for ev in &events {
            match ev {
                Some(i) => {
                    rx.on_data_received(
                        Instant::ZERO,
                        first.wrapping_add(*i as u32),
                        &pk[*i],
                        &mut sink,
                    );
                    arrived.push(*i);
                }
                None => {
                    let (f, dc, pc, idx, shard) = next_parity.next().unwrap();
                    let msg = Message::Parity(Parity {
                        first: *f,
                        data_count: *dc,
                        parity_count: *pc,
                        index: *idx,
                        shard,
                    });
                    rx.on_repair_received(Instant::ZERO, &msg, &mut sink);
                    parity_in += 1;
                }
            }
            shards_in += 1;
            if want.is_none() && shards_in >= k && parity_in > 0 {
                want = Some(
                    (0..k)
                        .filter(|i| !arrived.contains(i))
                        .map(|i| first.wrapping_add(i as u32))
                        .collect(),
                );
            }
        }
        let mut want = want.unwrap_or_default();
        want.sort_unstable();
        assert_eq!(
            sink.0.keys().copied().collect::<Vec<_>>(),
            want,
            "seed {seed}"
        );
        for (s, bytes) in &sink.0 {
            assert_eq!(bytes, &pk[s.wrapping_sub(first) as usize]);
        }
        if !want.is_empty() {
            decoded_blocks += 1;
        }
    }
    assert!(decoded_blocks > 30, "{decoded_blocks}");
}

#[test]
fn a_short_block_is_flushed_after_the_quiet_time() {
    let p = path();
    let params = ReedSolomonParams {
        redundancy_pct: 50,
        block: 10,
        flush_ms: 10.0,
    };
    let mut tx = ReedSolomon::new(params);
    for s in 0..3 {
        tx.on_data_sent(Instant::from_millis(100), s, &p, &[s as u8; 50]);
    }
    assert!(parity_of(&mut tx, Instant::from_millis(105)).is_empty());
    assert_eq!(
        tx.poll_timeout(Instant::ZERO, &[]),
        Some(Instant::from_millis(110))
    );
    let shards = parity_of(&mut tx, Instant::from_millis(110));
    // ⌈3 × 50 / 100⌉ = 2 shards over packets 0..3.
    assert_eq!(shards.len(), 2);
    assert!(shards.iter().all(|s| (s.0, s.1, s.2) == (0, 3, 2)));
    assert_eq!(tx.poll_timeout(Instant::ZERO, &[]), None);
}

#[test]
fn inconsistent_shards_are_counted_not_fatal() {
    let mut rx = ReedSolomon::new(ReedSolomonParams::default());
    let mut sink = Sink::default();
    // A 4-byte shard, then a 6-byte one for the same block; then a data packet too long
    // for the block's shards.
    for shard in [&[0u8; 4][..], &[0u8; 6][..]] {
        let msg = Message::Parity(Parity {
            first: 0,
            data_count: 2,
            parity_count: 2,
            index: 0,
            shard,
        });
        rx.on_repair_received(Instant::ZERO, &msg, &mut sink);
    }
    rx.on_data_received(Instant::ZERO, 0, &[1; 100], &mut sink);
    let st = rx.stats();
    assert_eq!(st.coded_malformed, 2);
    assert!(sink.0.is_empty());
}
