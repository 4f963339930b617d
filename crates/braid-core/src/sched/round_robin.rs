//! Round-robin striping: each packet on the next usable path in turn, the baseline that
//! PluriBus §2.2.2 and oSCTP §IV-D measure against. It ignores capacities and delays.

use super::{Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::Instant;

/// Each packet on the next usable path in turn; when no path is usable, on the next path
/// regardless, so that traffic keeps probing.
#[derive(Clone, Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl Scheduler for RoundRobin {
    fn select(&mut self, _now: Instant, _packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        let n = paths.len();
        let start = self.next % n.max(1);
        let pick = (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| paths[i].is_usable())
            .unwrap_or(start);
        self.next = pick + 1;
        Choice::Path(paths[pick].id())
    }

    fn name(&self) -> &'static str {
        "round-robin"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    fn picks(s: &mut dyn Scheduler, ps: &[Path], n: usize) -> Vec<Choice> {
        (0..n).map(|i| s.select(T0, &meta(i as u32), ps)).collect()
    }

    #[test]
    fn cycles_over_usable_paths() {
        let mut rr = RoundRobin::default();
        let mut ps = paths(&[
            PathSpec::new(0, 1_000_000),
            PathSpec::new(1, 1_000_000),
            PathSpec::new(2, 1_000_000),
        ]);
        let p = |i| Choice::Path(i);
        assert_eq!(
            picks(&mut rr, &ps, 6),
            vec![p(0), p(1), p(2), p(0), p(1), p(2)]
        );
        ps[1].set_usable_for_test(false);
        assert_eq!(picks(&mut rr, &ps, 4), vec![p(0), p(2), p(0), p(2)]);
    }

    #[test]
    fn keeps_probing_when_nothing_is_usable() {
        let mut rr = RoundRobin::default();
        let mut ps = paths(&[PathSpec::new(0, 1), PathSpec::new(1, 1)]);
        for p in &mut ps {
            p.set_usable_for_test(false);
        }
        let p = |i| Choice::Path(i);
        assert_eq!(picks(&mut rr, &ps, 4), vec![p(0), p(1), p(0), p(1)]);
    }
}
