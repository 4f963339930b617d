//! PluriBus's delay-based path selection (§3.2 component 2, §4.3): each packet goes on the
//! path likely to deliver it first, the one minimizing
//! `PacketSize / PathCapacity + QueueLength + (d + δ)`, from the sender's queue model
//! (§4.2) and the receiver's reports of capacity and propagation delay plus skew. It keeps
//! using the shortest path until its queue brings its delay up to the next path's, then
//! spreads, which generalizes round-robin to paths of different delay and capacity and
//! keeps reordering small.
//!
//! A path the peer has not yet reported a delay for is assumed as fast as the fastest known
//! path (so it gets tried and measured); before any report, all paths compare by queue and
//! transmission time alone.

use super::{candidates, Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::Instant;

#[derive(Clone, Copy, Debug, Default)]
pub struct DelayBased;

/// The predicted delivery of a datagram of `wire_bytes` on each candidate, with unknown
/// delays replaced by the smallest known one. Yields (position, µs).
pub(crate) fn predictions(
    now: Instant,
    wire_bytes: usize,
    paths: &[Path],
) -> impl Iterator<Item = (usize, i64)> + '_ {
    let min_known = candidates(paths)
        .filter_map(|(_, p)| p.delay_skew_us())
        .min()
        .unwrap_or(0);
    candidates(paths).map(move |(i, p)| {
        let q = p.queue_delay(now) + p.transmission_time(wire_bytes);
        let q = i64::try_from(q.as_micros()).unwrap_or(i64::MAX / 2);
        (i, q + p.delay_skew_us().unwrap_or(min_known))
    })
}

impl Scheduler for DelayBased {
    fn select(&mut self, now: Instant, packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        let pick = predictions(now, packet.wire_bytes, paths)
            .min_by_key(|&(i, t)| (t, paths[i].id()))
            .map_or(0, |(i, _)| i);
        Choice::Path(paths[pick].id())
    }

    fn name(&self) -> &'static str {
        "delay-based"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    #[test]
    fn fills_the_short_path_until_its_queue_matches_the_long_one() {
        // 1.2 Mbit/s each; 1500-byte datagrams take 10 ms. Delays 20 ms and 50 ms.
        let mut ps = paths(&[
            PathSpec::new(0, 1_200_000).delay_ms(50),
            PathSpec::new(1, 1_200_000).delay_ms(20),
        ]);
        let mut s = DelayBased;
        let mut picks = Vec::new();
        for i in 0..8 {
            let Choice::Path(p) = s.select(T0, &meta(i), &ps) else {
                panic!()
            };
            picks.push(p);
            ps[usize::from(p)].send_for_test(T0, 1500);
        }
        // Path 1 predicts 30, 40, 50 ms (tie at 50 goes to the lower id, path 0: 60), ...
        assert_eq!(picks, vec![1, 1, 1, 0, 1, 0, 1, 0]);
    }

    #[test]
    fn capacity_enters_as_transmission_time() {
        // Same delay; the fast path's queue drains 10x faster.
        let mut ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(10),
            PathSpec::new(1, 10_000_000).delay_ms(10),
        ]);
        let mut s = DelayBased;
        let mut on_slow = 0;
        for i in 0..110 {
            let Choice::Path(p) = s.select(T0, &meta(i), &ps) else {
                panic!()
            };
            on_slow += u32::from(p == 0);
            ps[usize::from(p)].send_for_test(T0, 1500);
        }
        assert_eq!(on_slow, 10);
    }

    #[test]
    fn unknown_delays_count_as_the_fastest_known() {
        let ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(40),
            PathSpec::new(1, 1_000_000),
        ]);
        // Equal: the tie goes to path 0.
        assert_eq!(DelayBased.select(T0, &meta(0), &ps), Choice::Path(0));
        let ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(40),
            PathSpec::new(1, 2_000_000),
        ]);
        assert_eq!(DelayBased.select(T0, &meta(0), &ps), Choice::Path(1));
    }
}
