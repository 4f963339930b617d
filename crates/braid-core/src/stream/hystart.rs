//! HyStart++ (RFC 9406): slow start that leaves on a rise of the round's minimum RTT, with
//! a Conservative Slow Start (CSS) phase after it that returns to slow start if the rise
//! was not a queue.
//!
//! Per round (one window of data, ended by the acknowledgement of the first packet sent
//! after the round began), the minimum RTT of at least [`N_RTT_SAMPLE`] samples is
//! compared with the previous round's (§4.2): a rise of clamp(last / 8, 4 ms, 16 ms) ends
//! slow start and enters CSS, where the window grows at a quarter of slow start's pace
//! (`CSS_GROWTH_DIVISOR`). A CSS round whose minimum falls below the one that ended slow
//! start was jitter, not a queue, and slow start resumes (judged from the round after the
//! one that entered CSS, where the RFC's per-ACK check flips the phase at each lower
//! sample, the round's minimum only falling); after [`CSS_ROUNDS`] rounds of
//! CSS, congestion avoidance begins. Linux's HyStart ([`crate::cubic::HyStart`]) compares
//! with the connection's minimum and ends slow start for good on one round's rise, which
//! a real-time path's jitter (a loaded gateway, a cellular scheduler) gives often.

use std::time::Duration;

/// RFC 9406 §4.3's constants.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
pub const N_RTT_SAMPLE: u32 = 8;
pub const CSS_GROWTH_DIVISOR: u64 = 4;
pub const CSS_ROUNDS: u32 = 5;
/// Segments one ACK may grow the window by at most in slow start, for a sender that does
/// not pace (§4.3's L).
pub const L: u64 = 8;

/// §4.2's RttThresh over a round minimum.
fn threshold(min: Duration) -> Duration {
    (min / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH)
}

/// Where slow start stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    SlowStart,
    /// Conservative Slow Start: `baseline` is the round minimum that ended slow start,
    /// `rounds` the CSS rounds begun.
    Css {
        baseline: Duration,
        rounds: u32,
    },
    /// Congestion avoidance: HyStart++ is done.
    Done,
}

/// What a sample decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Continue,
    /// CSS ended: slow start is over at the current window.
    Exit,
}

/// One path's HyStart++ state; rounds are marked by a sequence number of the path's own
/// (a stream path's PSN).
#[derive(Clone, Copy, Debug)]
pub struct HyStartPp {
    phase: Phase,
    round_end: Option<u64>,
    current_min: Option<Duration>,
    last_min: Option<Duration>,
    samples: u32,
}

impl Default for HyStartPp {
    fn default() -> Self {
        HyStartPp {
            phase: Phase::SlowStart,
            round_end: None,
            current_min: None,
            last_min: None,
            samples: 0,
        }
    }
}

impl HyStartPp {
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Divisor of slow start's growth now: 1 in slow start, [`CSS_GROWTH_DIVISOR`] in CSS.
    pub fn growth_divisor(&self) -> u64 {
        match self.phase {
            Phase::Css { .. } => CSS_GROWTH_DIVISOR,
            _ => 1,
        }
    }

    /// An RTT sample of the packet `seq`, acknowledged while `next_seq` is the next to
    /// send (§4.2's per-ACK processing).
    pub fn on_rtt(&mut self, seq: u64, next_seq: u64, rtt: Duration) -> Verdict {
        if self.phase == Phase::Done {
            return Verdict::Continue;
        }
        if self.round_end.is_none_or(|end| seq >= end) {
            // A new round.
            self.round_end = Some(next_seq);
            self.last_min = self.current_min;
            self.current_min = None;
            self.samples = 0;
            if let Phase::Css { baseline, rounds } = self.phase {
                if rounds + 1 > CSS_ROUNDS {
                    self.phase = Phase::Done;
                    return Verdict::Exit;
                }
                self.phase = Phase::Css {
                    baseline,
                    rounds: rounds + 1,
                };
            }
        }
        self.current_min = Some(self.current_min.map_or(rtt, |m| m.min(rtt)));
        self.samples += 1;
        if self.samples < N_RTT_SAMPLE {
            return Verdict::Continue;
        }
        let current = self.current_min.unwrap_or(rtt);
        match self.phase {
            Phase::SlowStart => {
                if let Some(last) = self.last_min {
                    if current >= last + threshold(last) {
                        self.phase = Phase::Css {
                            baseline: current,
                            rounds: 1,
                        };
                    }
                }
            }
            Phase::Css { baseline, rounds } if rounds > 1 && current < baseline => {
                // The rise was spurious: back to slow start (§4.2). Judged from the next
                // round on: within the round that entered CSS, the minimum only falls, and
                // each lower sample would flip the phase back and forth.
                self.phase = Phase::SlowStart;
            }
            _ => {}
        }
        Verdict::Continue
    }

    /// A loss or a timeout ends slow start and HyStart++ with it (§4.2).
    pub fn finish(&mut self) {
        self.phase = Phase::Done;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Feeds one round of `n` samples at `rtt`, the round covering sequence numbers from
    /// `*seq`; returns the verdicts.
    fn round(h: &mut HyStartPp, seq: &mut u64, n: u64, rtt: Duration) -> Vec<Verdict> {
        let start = *seq;
        let out = (0..n)
            .map(|i| h.on_rtt(start + i, start + 2 * n, rtt))
            .collect();
        *seq = start + 2 * n;
        out
    }

    #[test]
    fn a_rise_enters_css_and_five_rounds_end_slow_start() {
        let mut h = HyStartPp::default();
        let mut seq = 0;
        round(&mut h, &mut seq, 10, ms(100));
        round(&mut h, &mut seq, 10, ms(101));
        assert_eq!(h.phase(), Phase::SlowStart);
        // 101 ms / 8 = 12.6 ms: 115 ms is a rise.
        round(&mut h, &mut seq, 10, ms(115));
        assert_eq!(
            h.phase(),
            Phase::Css {
                baseline: ms(115),
                rounds: 1
            }
        );
        assert_eq!(h.growth_divisor(), CSS_GROWTH_DIVISOR);
        for _ in 0..4 {
            assert!(round(&mut h, &mut seq, 10, ms(120))
                .iter()
                .all(|v| *v == Verdict::Continue));
        }
        assert_eq!(round(&mut h, &mut seq, 10, ms(120))[0], Verdict::Exit);
        assert_eq!(h.phase(), Phase::Done);
        assert_eq!(round(&mut h, &mut seq, 10, ms(90))[0], Verdict::Continue);
    }

    #[test]
    fn jitter_that_falls_back_resumes_slow_start() {
        let mut h = HyStartPp::default();
        let mut seq = 0;
        round(&mut h, &mut seq, 10, ms(50));
        // 50 ms / 8 = 6.25 ms: 60 ms is a rise.
        // Within the round that entered CSS a lower minimum changes nothing.
        let start = seq;
        for (i, rtt) in [62, 61, 61, 60, 60, 60, 60, 60, 59, 58]
            .into_iter()
            .enumerate()
        {
            h.on_rtt(start + i as u64, start + 20, ms(rtt));
        }
        seq = start + 20;
        assert_eq!(
            h.phase(),
            Phase::Css {
                baseline: ms(60),
                rounds: 1
            }
        );
        round(&mut h, &mut seq, 10, ms(52));
        assert_eq!(h.phase(), Phase::SlowStart);
        assert_eq!(h.growth_divisor(), 1);
    }

    #[test]
    fn too_few_samples_decide_nothing() {
        let mut h = HyStartPp::default();
        let mut seq = 0;
        round(&mut h, &mut seq, 10, ms(50));
        round(&mut h, &mut seq, N_RTT_SAMPLE as u64 - 1, ms(90));
        assert_eq!(h.phase(), Phase::SlowStart);
        h.finish();
        assert_eq!(h.phase(), Phase::Done);
    }
}
