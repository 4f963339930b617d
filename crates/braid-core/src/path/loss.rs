//! The receiver's loss-rate estimate for one path: an exponentially weighted moving average
//! over the path's sequence numbers (PluriBus §4.1: "Receivers estimate p using an
//! exponential averaging of past behavior and periodically inform the sender").
//!
//! Each datagram received is a sample 0; each path sequence number skipped is a sample 1.
//! The paper gives no weight; we use 1/32 per datagram, a memory of a few dozen datagrams,
//! which matches the horizon PluriBus Fig 11 judges the estimate on (the next twenty
//! packets) while smoothing single losses. A datagram arriving after a higher one was
//! already seen (reordered within the path) was counted as lost; it is counted back, so
//! reordering does not read as loss.
//!
//! A run of consecutive missing sequence numbers too long for the current loss rate is an
//! outage (a blackout, a modem reconnect), which path liveness handles, not a loss rate: it
//! is counted apart and leaves the rate alone, so a path that comes back from a blackout is
//! not judged lossy for the next hundred datagrams. "Too long" is [`OUTAGE_GAP`] on a clean
//! path and grows with the estimate: a run of k losses is an outage once independent losses
//! at the estimated rate p would make it less likely than [`OUTAGE_CHANCE`] (p^k below it),
//! up to [`OUTAGE_GAP_MAX`]. A fixed gap of 8 counted a quarter of all losses at 70%
//! Bernoulli loss (0.7^8 = 6% of runs) as outages, so the estimate read 0.50-0.62 there
//! and Evolution, which sizes its coded packets from it (PluriBus §4.1, and Fig 12: an
//! underestimate hurts), coded too thin (`braid bench pluribus-fig10`).

/// Weight of one sample.
pub const LOSS_EWMA_WEIGHT: f64 = 1.0 / 32.0;
/// Consecutive missing sequence numbers from which a gap is an outage on a clean path.
pub const OUTAGE_GAP: u32 = 8;
/// Longest gap that may still be read as independent losses, whatever the estimate.
pub const OUTAGE_GAP_MAX: u32 = 64;
/// How unlikely a run must be under independent losses at the estimated rate to be an outage.
pub const OUTAGE_CHANCE: f64 = 1e-3;

/// Per-path loss EWMA driven by path sequence numbers.
#[derive(Clone, Debug, Default)]
pub struct LossEstimator {
    rate: f64,
    /// The next path sequence number expected; `None` before the first datagram.
    expected: Option<u32>,
    /// Datagrams received and inferred lost, for stats.
    received: u64,
    lost: u64,
    reordered: u64,
    outage_lost: u64,
}

impl LossEstimator {
    /// Current loss-rate estimate in [0, 1].
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Path sequence numbers inferred lost so far (net of late arrivals).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Datagrams that arrived after a higher sequence number.
    pub fn reordered(&self) -> u64 {
        self.reordered
    }

    /// Sequence numbers missing in outages (runs of at least [`Self::outage_gap`]).
    pub fn outage_lost(&self) -> u64 {
        self.outage_lost
    }

    /// Consecutive missing sequence numbers from which a gap is an outage at the current
    /// estimate: the smallest k with rate^k < [`OUTAGE_CHANCE`], within
    /// [[`OUTAGE_GAP`], [`OUTAGE_GAP_MAX`]].
    pub fn outage_gap(&self) -> u32 {
        if self.rate <= 0.0 {
            return OUTAGE_GAP;
        }
        if self.rate >= 1.0 {
            return OUTAGE_GAP_MAX;
        }
        let k = (OUTAGE_CHANCE.ln() / self.rate.ln()).ceil();
        (k as u32).clamp(OUTAGE_GAP, OUTAGE_GAP_MAX)
    }

    /// Accounts for a datagram carrying path sequence number `seq`. Returns how many
    /// sequence numbers it showed missing (the gap before it).
    pub fn on_datagram(&mut self, seq: u32) -> u32 {
        self.received += 1;
        let Some(expected) = self.expected else {
            self.expected = Some(seq.wrapping_add(1));
            self.sample(0.0);
            return 0;
        };
        let gap = seq.wrapping_sub(expected) as i32;
        if gap >= 0 {
            let missing = gap as u32;
            if missing >= self.outage_gap() {
                self.outage_lost += u64::from(missing);
            } else if missing > 0 {
                self.lost += u64::from(missing);
                // `missing` samples of 1 at once: 1 - rate decays by (1 - w)^missing.
                let keep = (1.0 - LOSS_EWMA_WEIGHT).powi(missing.min(10_000) as i32);
                self.rate = 1.0 - (1.0 - self.rate) * keep;
            }
            self.sample(0.0);
            self.expected = Some(seq.wrapping_add(1));
            missing
        } else {
            // Late: it was counted as a loss when the gap was seen. Undo one loss sample.
            self.reordered += 1;
            self.lost = self.lost.saturating_sub(1);
            self.rate = (self.rate - LOSS_EWMA_WEIGHT).max(0.0);
            0
        }
    }

    fn sample(&mut self, x: f64) {
        self.rate += LOSS_EWMA_WEIGHT * (x - self.rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_loss_stays_zero() {
        let mut l = LossEstimator::default();
        for s in 0..1000 {
            l.on_datagram(s);
        }
        assert_eq!(l.rate(), 0.0);
        assert_eq!(l.lost(), 0);
    }

    #[test]
    fn gap_counts_as_that_many_losses() {
        let mut l = LossEstimator::default();
        l.on_datagram(0);
        l.on_datagram(3); // 1 and 2 lost
        let w = LOSS_EWMA_WEIGHT;
        let after_two = 1.0 - (1.0 - w) * (1.0 - w);
        let expected = after_two * (1.0 - w);
        assert!(
            (l.rate() - expected).abs() < 1e-12,
            "{} vs {expected}",
            l.rate()
        );
        assert_eq!(l.lost(), 2);
    }

    #[test]
    fn converges_to_the_true_rate() {
        // Every 10th datagram lost: 10%.
        let mut l = LossEstimator::default();
        let mut sum = 0.0;
        let mut n = 0.0;
        for s in 0..20_000u32 {
            if s % 10 != 0 {
                l.on_datagram(s);
            }
            if s > 1000 {
                sum += l.rate();
                n += 1.0;
            }
        }
        let mean = sum / n;
        assert!((mean - 0.1).abs() < 0.01, "{mean}");
    }

    #[test]
    fn outages_are_not_loss_rate() {
        let mut l = LossEstimator::default();
        l.on_datagram(0);
        l.on_datagram(100);
        assert_eq!(l.rate(), 0.0);
        assert_eq!((l.lost(), l.outage_lost()), (0, 99));
        // Seven in a row still count as losses.
        l.on_datagram(108);
        assert!(l.rate() > 0.15);
    }

    #[test]
    fn the_outage_gap_grows_with_the_loss_rate() {
        let mut l = LossEstimator::default();
        assert_eq!(l.outage_gap(), OUTAGE_GAP);
        // ln(0.001) / ln(0.5) = 9.97: ten in a row at 50% is a 1-in-1024 run.
        l.rate = 0.5;
        assert_eq!(l.outage_gap(), 10);
        // ln(0.001) / ln(0.7) = 19.37.
        l.rate = 0.7;
        assert_eq!(l.outage_gap(), 20);
        l.rate = 0.2;
        assert_eq!(l.outage_gap(), OUTAGE_GAP);
        l.rate = 0.99;
        assert_eq!(l.outage_gap(), OUTAGE_GAP_MAX);
    }

    #[test]
    fn converges_at_heavy_bernoulli_loss() {
        // 70% independent loss (a fixed-seed LCG): runs of 8-19 are losses, not outages.
        let mut l = LossEstimator::default();
        let mut x: u64 = 12345;
        let (mut sum, mut n) = (0.0, 0.0);
        for s in 0..200_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (x >> 33) as f64 / f64::from(1u32 << 31) >= 0.7 {
                l.on_datagram(s);
            }
            if s > 5000 {
                sum += l.rate();
                n += 1.0;
            }
        }
        let mean = sum / n;
        assert!((mean - 0.7).abs() < 0.03, "{mean}");
    }

    #[test]
    fn reordering_is_not_loss() {
        let mut l = LossEstimator::default();
        l.on_datagram(0);
        l.on_datagram(2);
        l.on_datagram(1);
        assert_eq!(l.lost(), 0);
        assert_eq!(l.reordered(), 1);
        assert!(l.rate() < 0.01);
    }

    #[test]
    fn wraps() {
        let mut l = LossEstimator::default();
        l.on_datagram(u32::MAX);
        l.on_datagram(0);
        assert_eq!(l.lost(), 0);
    }
}
