//! PRISM Figure 9's random scheduler: each packet on a usable path drawn uniformly. The
//! figure's other baselines, hRTT-only and U-only, are ADAS reduced to one rule
//! ([`super::adas::Rules`]).

use super::{candidates, Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::Instant;

/// A usable path drawn uniformly for each packet, from a fixed-seed xorshift so that runs
/// repeat.
#[derive(Clone, Debug)]
pub struct Random {
    state: u64,
}

impl Default for Random {
    fn default() -> Self {
        Random {
            state: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

impl Random {
    fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }
}

impl Scheduler for Random {
    fn select(&mut self, _now: Instant, _packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        let n = candidates(paths).count();
        if n == 0 {
            return Choice::Hold;
        }
        let k = (self.next() % n as u64) as usize;
        candidates(paths)
            .nth(k)
            .map_or(Choice::Hold, |(_, p)| Choice::Path(p.id()))
    }

    fn name(&self) -> &'static str {
        "random"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    #[test]
    fn random_uses_every_path_about_equally() {
        let ps = paths(&[
            PathSpec::new(0, 1_000_000),
            PathSpec::new(1, 4_000_000),
            PathSpec::new(2, 2_000_000),
        ]);
        let mut s = Random::default();
        let mut count = [0u32; 3];
        for i in 0..3000 {
            match s.select(T0, &meta(i), &ps) {
                Choice::Path(id) => count[usize::from(id)] += 1,
                c => panic!("{c:?}"),
            }
        }
        for c in count {
            assert!((850..1150).contains(&c), "{count:?}");
        }
    }
}
