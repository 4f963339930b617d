//! The schedulers over the per-path windows: which path the next chunk goes on. oSCTP
//! §IV-D's round-robin, Lazy and Smallest-RTT, and braid's delay-based one (the default).

use std::time::Duration;

/// Which path carries the next chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamScheduler {
    /// Strict alternation over the live paths: the next chunk waits for its path's window.
    RoundRobin,
    /// Stay on the current path until its window is exhausted, then move to the next.
    Lazy,
    /// The path with the smallest RTT whose window is open (oSCTP's default).
    SmallestRtt,
    /// braid's: the path that delivers the chunk earliest. An open path delivers it after
    /// its one-way delay (SRTT / 2); waiting instead for the faster paths delivers it once
    /// they have drained the backlog ahead of it at their window rates (cwnd / SRTT). A
    /// slower open path is used only when it is the earlier of the two by a margin of its
    /// delay's variation (ECF's; [`margin`]), so a bulk backlog
    /// fills every window and a short write stays on the fastest path (the PluriBus
    /// delay-based idea, and ECF's test, over the stream's windows).
    #[default]
    DelayBased,
}

/// What the scheduler sees of one path.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    /// Live (or every path is failed) and may carry data at all.
    pub live: bool,
    /// Its window has room for another chunk.
    pub open: bool,
    pub srtt: Duration,
    /// The RTT's mean deviation (RFC 6298's RTTVAR).
    pub rttvar: Duration,
    /// The delivery rate its window allows, bytes per second.
    pub rate: f64,
}

/// Scheduler state: the path in turn (round-robin) or in use (Lazy).
#[derive(Clone, Debug, Default)]
pub struct Picker {
    kind: StreamScheduler,
    current: usize,
    /// [`StreamScheduler::DelayBased`]'s live paths by SRTT, kept between picks.
    order: Vec<usize>,
}

impl Picker {
    pub fn new(kind: StreamScheduler) -> Self {
        Picker {
            kind,
            current: 0,
            order: Vec::new(),
        }
    }

    /// The path for the next chunk, or None to wait. `avoid` is a path to pass over when
    /// another is open (a retransmission's previous path, RFC 4960 §6.4). `backlog` is the
    /// bytes waiting to be sent, this chunk's included.
    pub fn pick(
        &mut self,
        paths: &[Candidate],
        avoid: Option<usize>,
        backlog: u64,
    ) -> Option<usize> {
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
            StreamScheduler::DelayBased => delay_based(paths, backlog, &mut self.order),
        }
    }
}

/// What a slower path must win by: ECF's δ, the larger RTTVAR of the two paths (Lim et al.,
/// CoNEXT 2017), halved as the comparison is of one-way delays. A chunk sent on a path
/// whose delay swings arrives late as often as early, and the ordered stream holds every
/// connection's later bytes behind it: without the margin, trace-web's 3G pair (EV-DO at
/// 0.16 Mbit/s beside UMTS) took 5638 ms for its median web flow, the UMTS link alone 5416.
fn margin(fastest: &Candidate, slower: &Candidate) -> f64 {
    fastest.rttvar.max(slower.rttvar).as_secs_f64() / 2.0
}

/// See [`StreamScheduler::DelayBased`].
fn delay_based(paths: &[Candidate], backlog: u64, live: &mut Vec<usize>) -> Option<usize> {
    live.clear();
    live.extend((0..paths.len()).filter(|&i| paths[i].live));
    live.sort_by_key(|&i| paths[i].srtt);
    let fastest = *live.first()?;
    let owd = |i: usize| paths[i].srtt.as_secs_f64() / 2.0;
    let mut faster_rate = 0.0;
    for (k, &i) in live.iter().enumerate() {
        if paths[i].open {
            if k == 0 {
                return Some(i);
            }
            // Waiting for the faster paths: the backlog drains at their summed rate, then
            // the chunk takes the fastest one-way delay.
            let wait = backlog as f64 / faster_rate + owd(fastest);
            if owd(i) + margin(&paths[fastest], &paths[i]) <= wait {
                return Some(i);
            }
        }
        faster_rate += paths[i].rate.max(1.0);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(open: bool, ms: u64) -> Candidate {
        Candidate {
            live: true,
            open,
            srtt: Duration::from_millis(ms),
            rttvar: Duration::ZERO,
            rate: 100_000.0,
        }
    }

    #[test]
    fn a_slower_path_must_win_by_its_delays_variation() {
        let mut d = Picker::new(StreamScheduler::DelayBased);
        // The fast path's window is shut; 3500 bytes ahead drain at 100 kB/s in 35 ms, then
        // 25 ms one way: 60 ms. The slow path delivers in 50 ms.
        let steady = [c(false, 50), c(true, 100)];
        assert_eq!(d.pick(&steady, None, 3500), Some(1));
        // The same path with an RTTVAR of 40 ms must win by 20 ms: it waits.
        let mut swinging = steady;
        swinging[1].rttvar = Duration::from_millis(40);
        assert_eq!(d.pick(&swinging, None, 3500), None);
        // With a longer backlog it is worth it again.
        assert_eq!(d.pick(&swinging, None, 5000), Some(1));
    }

    #[test]
    fn each_scheduler_picks_as_osctp_describes() {
        let mut rr = Picker::new(StreamScheduler::RoundRobin);
        let both = [c(true, 100), c(true, 50)];
        assert_eq!(rr.pick(&both, None, 0), Some(0));
        assert_eq!(rr.pick(&both, None, 0), Some(1));
        // path 0's turn, its window shut: wait even though path 1 is open
        assert_eq!(rr.pick(&[c(false, 100), c(true, 50)], None, 0), None);

        let mut lazy = Picker::new(StreamScheduler::Lazy);
        assert_eq!(lazy.pick(&both, None, 0), Some(0));
        assert_eq!(lazy.pick(&both, None, 0), Some(0));
        assert_eq!(lazy.pick(&[c(false, 100), c(true, 50)], None, 0), Some(1));
        assert_eq!(lazy.pick(&both, None, 0), Some(1));

        let mut srtt = Picker::new(StreamScheduler::SmallestRtt);
        assert_eq!(srtt.pick(&both, None, 0), Some(1));
        assert_eq!(srtt.pick(&[c(true, 100), c(false, 50)], None, 0), Some(0));
        assert_eq!(srtt.pick(&both, Some(1), 0), Some(0));
    }

    #[test]
    fn delay_based_waits_for_the_fast_path_unless_the_backlog_is_long() {
        let mut d = Picker::new(StreamScheduler::DelayBased);
        // Fast path (50 ms RTT) full, slow path (400 ms) open; the fast path drains
        // 100 kB/s. One chunk: waiting costs 12 ms + 25 ms, less than 200 ms: wait.
        let paths = [c(false, 50), c(true, 400)];
        assert_eq!(d.pick(&paths, None, 1200), None);
        // 20 kB ahead: 200 ms + 25 ms of waiting, more than 200 ms: the slow path.
        assert_eq!(d.pick(&paths, None, 20_000), Some(1));
        // The fast path open: always it.
        assert_eq!(d.pick(&[c(true, 50), c(true, 400)], None, 1 << 20), Some(0));
        // A failed fast path does not hold chunks back.
        let mut failed = c(false, 50);
        failed.live = false;
        assert_eq!(d.pick(&[failed, c(true, 400)], None, 1200), Some(1));
    }
}
