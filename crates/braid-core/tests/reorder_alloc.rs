//! The resequencing buffer allocates nothing per packet once warm (issue 5): the
//! `allocation-counter` crate's global allocator (this test binary only) watches a deterministic receive pattern of two paths with different
//! delays, a lost packet whose hole is given up by the timeout (thousands of packets wait,
//! then leave at once), and receive batches drained after each batch.

use std::time::Duration;

use braid_core::reorder::{Insert, Resequencer};
use braid_core::Instant;

/// One round of 20 000 sequence numbers from `base`, one every 10 µs from `t0_us`: even
/// ones on a fast path, odd ones on a path 2 ms (200 packets) slower; one packet per round
/// is lost, so everything behind it waits the 50 ms hole timeout (about 5000 packets, more
/// than the 256 buffers the pool used to keep). Packets are handed over in batches of 64,
/// each drained before the next, as the daemons do. Sizes vary (ACK-sized and full).
fn round(r: &mut Resequencer, base: u32, t0_us: u64, out: &mut Vec<u8>, payload: &[u8]) -> u64 {
    const N: u32 = 20_000;
    const SLOW: u32 = 200;
    const BATCH: u32 = 64;
    let lost = base + 7_001;
    let mut delivered = 0;
    // Arrival order: fast packet `s` at step `s`, slow packet `s` at step `s + SLOW`.
    let mut step = 0;
    while step < N + SLOW {
        for k in step..(step + BATCH).min(N + SLOW) {
            let now = Instant::from_micros(t0_us + u64::from(k) * 10);
            r.handle_timeout(now);
            let fast = (k.is_multiple_of(2) && k < N).then_some(k);
            let slow = (k >= SLOW && !(k - SLOW).is_multiple_of(2)).then(|| k - SLOW);
            for seq in fast.into_iter().chain(slow) {
                let s = base + seq;
                if s == lost {
                    continue;
                }
                let len = if s.is_multiple_of(3) {
                    52
                } else {
                    payload.len()
                };
                let res = r.insert(now, s, &payload[..len]);
                assert_ne!(res, Insert::TooOld);
            }
        }
        while r.poll_deliver(out) {
            delivered += 1;
        }
        step += BATCH;
    }
    let end = Instant::from_micros(t0_us + u64::from(N + SLOW) * 10 + 100_000);
    r.handle_timeout(end);
    while r.poll_deliver(out) {
        delivered += 1;
    }
    delivered
}

#[test]
fn no_allocation_per_packet_once_warm() {
    let mut r = Resequencer::new(Duration::from_millis(50), 8192);
    let mut out = Vec::new();
    let payload = vec![0xa5u8; 1400];
    let round_us = 20_200 * 10 + 100_000;
    // Warm-up: the pool grows to the buffering the pattern needs.
    let mut delivered = 0;
    for i in 0..2u32 {
        delivered += round(
            &mut r,
            i * 20_000,
            u64::from(i) * round_us,
            &mut out,
            &payload,
        );
    }
    assert_eq!(delivered, 2 * 19_999);
    let warm = r.stats();
    assert!(warm.released_by_timeout >= 2, "{warm:?}");
    assert!(warm.buffered > 4_000, "{warm:?}");
    assert!(r.pooled() <= r.pool_bound());
    let info = allocation_counter::measure(|| {
        for i in 2..6u32 {
            delivered += round(
                &mut r,
                i * 20_000,
                u64::from(i) * round_us,
                &mut out,
                &payload,
            );
        }
    });
    let during = info.count_total;
    assert_eq!(delivered, 6 * 19_999);
    let stats = r.stats();
    assert_eq!(stats.pool_misses, warm.pool_misses, "{stats:?}");
    assert_eq!(
        during, 0,
        "{during} allocations for 80 000 packets after warm-up"
    );
    assert!(r.pooled() <= r.pool_bound());
}
