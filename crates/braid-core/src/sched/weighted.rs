//! Weighted round-robin: packets spread in proportion to the paths' capacities (the WRR
//! that PRISM §4.2.1 derives ADAS's link utilization from and compares against in Fig 7).
//! Smooth WRR (as in nginx): each pick adds every path's weight to its credit, takes the
//! path with the most credit and charges it the total, which interleaves paths evenly
//! instead of sending bursts. Weights are the current capacity estimates (configured until
//! the peer's first report).

use super::{candidates, Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::Instant;

#[derive(Clone, Debug, Default)]
pub struct WeightedRoundRobin {
    credit: Vec<i64>,
}

impl Scheduler for WeightedRoundRobin {
    fn select(&mut self, _now: Instant, _packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        self.credit.resize(paths.len(), 0);
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for (i, p) in candidates(paths) {
            let w = (p.capacity_bps() / 1000).max(1) as i64;
            total += w;
            self.credit[i] += w;
            if best.is_none_or(|b| self.credit[i] > self.credit[b]) {
                best = Some(i);
            }
        }
        let b = best.unwrap_or(0);
        self.credit[b] -= total;
        Choice::Path(paths[b].id())
    }

    fn name(&self) -> &'static str {
        "weighted-round-robin"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    #[test]
    fn spreads_in_proportion_to_capacity_and_interleaves() {
        let ps = paths(&[PathSpec::new(0, 3_000_000), PathSpec::new(1, 1_000_000)]);
        let mut s = WeightedRoundRobin::default();
        let picks: Vec<_> = (0..8)
            .map(|i| match s.select(T0, &meta(i), &ps) {
                Choice::Path(p) => p,
                c => panic!("{c:?}"),
            })
            .collect();
        assert_eq!(picks, vec![0, 0, 1, 0, 0, 0, 1, 0]);
    }
}
