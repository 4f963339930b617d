//! Round-robin striping: each packet on the next usable path in turn, the baseline that
//! PluriBus §2.2.2 and oSCTP §IV-D measure against. It ignores capacities and delays.

use super::{PacketMeta, Scheduler};
use crate::path::Path;
use crate::{Instant, PathId};

/// Each packet on the next usable path in turn; when no path is usable, on the next path
/// regardless, so that traffic keeps probing.
#[derive(Clone, Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl Scheduler for RoundRobin {
    fn select(
        &mut self,
        _now: Instant,
        _packet: &PacketMeta<'_>,
        paths: &[Path],
    ) -> Option<PathId> {
        let n = paths.len();
        let start = self.next % n.max(1);
        let pick = (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| paths[i].is_usable())
            .unwrap_or(start);
        self.next = pick + 1;
        paths.get(pick).map(Path::id)
    }

    fn name(&self) -> &'static str {
        "round-robin"
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::PathConfig;

    fn paths(n: u8) -> Vec<Path> {
        (0..n)
            .map(|id| {
                Path::new(
                    &PathConfig {
                        id,
                        tx_capacity_bps: 1_000_000,
                        rx_capacity_bps: 1_000_000,
                    },
                    Duration::from_millis(500),
                )
            })
            .collect()
    }

    fn meta() -> PacketMeta<'static> {
        PacketMeta {
            seq: 0,
            wire_bytes: 100,
            packet: &[],
        }
    }

    #[test]
    fn cycles_over_usable_paths() {
        let mut rr = RoundRobin::default();
        let mut ps = paths(3);
        let picks: Vec<_> = (0..6)
            .map(|_| rr.select(Instant::ZERO, &meta(), &ps).unwrap())
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        // Path 1 goes down: skipped.
        ps[1].check_liveness(
            Instant::from_millis(2000),
            Instant::ZERO,
            Duration::from_secs(1),
        );
        assert!(!ps[1].is_usable());
        let picks: Vec<_> = (0..4)
            .map(|_| rr.select(Instant::ZERO, &meta(), &ps).unwrap())
            .collect();
        assert_eq!(picks, vec![0, 2, 0, 2]);
    }

    #[test]
    fn keeps_probing_when_nothing_is_usable() {
        let mut rr = RoundRobin::default();
        let mut ps = paths(2);
        for p in &mut ps {
            p.check_liveness(
                Instant::from_millis(2000),
                Instant::ZERO,
                Duration::from_secs(1),
            );
        }
        let picks: Vec<_> = (0..4)
            .map(|_| rr.select(Instant::ZERO, &meta(), &ps).unwrap())
            .collect();
        assert_eq!(picks, vec![0, 1, 0, 1]);
    }
}
