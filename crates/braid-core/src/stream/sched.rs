//! oSCTP §IV-D's schedulers over the per-path windows: which path the next chunk goes on.

use std::time::Duration;

/// Which path carries the next chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamScheduler {
    /// Strict alternation over the live paths: the next chunk waits for its path's window.
    RoundRobin,
    /// Stay on the current path until its window is exhausted, then move to the next.
    Lazy,
    /// The path with the smallest RTT whose window is open (oSCTP's default).
    #[default]
    SmallestRtt,
}

/// What the scheduler sees of one path.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    /// Live (or every path is failed) and may carry data at all.
    pub live: bool,
    /// Its window has room for another chunk.
    pub open: bool,
    pub srtt: Duration,
}

/// Scheduler state: the path in turn (round-robin) or in use (Lazy).
#[derive(Clone, Debug, Default)]
pub struct Picker {
    kind: StreamScheduler,
    current: usize,
}

impl Picker {
    pub fn new(kind: StreamScheduler) -> Self {
        Picker { kind, current: 0 }
    }

    /// The path for the next chunk, or None to wait. `avoid` is a path to pass over when
    /// another is open (a retransmission's previous path, RFC 4960 §6.4).
    pub fn pick(&mut self, paths: &[Candidate], avoid: Option<usize>) -> Option<usize> {
        let n = paths.len();
        if n == 0 {
            return None;
        }
        let usable = |i: usize| paths[i].live && paths[i].open;
        if let Some(a) = avoid {
            let others = (0..n).filter(|&i| i != a && usable(i));
            if let Some(i) = others.min_by_key(|&i| paths[i].srtt) {
                return Some(i);
            }
        }
        match self.kind {
            StreamScheduler::RoundRobin => {
                let turn = (0..n)
                    .map(|k| (self.current + k) % n)
                    .find(|&i| paths[i].live)?;
                if !paths[turn].open {
                    return None;
                }
                self.current = (turn + 1) % n;
                Some(turn)
            }
            StreamScheduler::Lazy => {
                let i = (0..n)
                    .map(|k| (self.current + k) % n)
                    .find(|&i| usable(i))?;
                self.current = i;
                Some(i)
            }
            StreamScheduler::SmallestRtt => {
                (0..n).filter(|&i| usable(i)).min_by_key(|&i| paths[i].srtt)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(open: bool, ms: u64) -> Candidate {
        Candidate {
            live: true,
            open,
            srtt: Duration::from_millis(ms),
        }
    }

    #[test]
    fn each_scheduler_picks_as_osctp_describes() {
        let mut rr = Picker::new(StreamScheduler::RoundRobin);
        let both = [c(true, 100), c(true, 50)];
        assert_eq!(rr.pick(&both, None), Some(0));
        assert_eq!(rr.pick(&both, None), Some(1));
        // path 0's turn, its window shut: wait even though path 1 is open
        assert_eq!(rr.pick(&[c(false, 100), c(true, 50)], None), None);

        let mut lazy = Picker::new(StreamScheduler::Lazy);
        assert_eq!(lazy.pick(&both, None), Some(0));
        assert_eq!(lazy.pick(&both, None), Some(0));
        assert_eq!(lazy.pick(&[c(false, 100), c(true, 50)], None), Some(1));
        assert_eq!(lazy.pick(&both, None), Some(1));

        let mut srtt = Picker::new(StreamScheduler::SmallestRtt);
        assert_eq!(srtt.pick(&both, None), Some(1));
        assert_eq!(srtt.pick(&[c(true, 100), c(false, 50)], None), Some(0));
        assert_eq!(srtt.pick(&both, Some(1)), Some(0));
    }
}
