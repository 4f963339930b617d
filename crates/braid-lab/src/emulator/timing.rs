//! How late the emulator is: a histogram of errors in microseconds.
//!
//! The emulator never sends a frame before the model's delivery time, so the delivery error
//! is how late the frame left compared to the model: the thread's wake-up latency, CPU
//! contention, the time to send the frames due before it. The model's times are computed
//! from the kernel's receive timestamps, so a frame read late (the thread was not
//! scheduled) shows up as a delivery error too, never silently as a longer link delay.

use serde::Serialize;

/// Bins: 10 µs wide up to 1 ms, 1 ms wide up to 100 ms, then one overflow bin.
const FINE_BINS: usize = 100;
const COARSE_BINS: usize = 99;
const BINS: usize = FINE_BINS + COARSE_BINS + 1;

/// A histogram of non-negative errors in microseconds, with exact count, mean and maximum.
#[derive(Clone, Debug)]
pub struct Histogram {
    bins: Vec<u64>,
    count: u64,
    sum_us: u128,
    max_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            bins: vec![0; BINS],
            count: 0,
            sum_us: 0,
            max_us: 0,
        }
    }
}

fn bin_of(us: u64) -> usize {
    if us < 1000 {
        (us / 10) as usize
    } else if us < 100_000 {
        FINE_BINS + (us / 1000) as usize - 1
    } else {
        BINS - 1
    }
}

/// Upper edge of bin `i`, in microseconds (the overflow bin reports the maximum).
fn upper_edge(i: usize, max_us: u64) -> u64 {
    if i < FINE_BINS {
        (i as u64 + 1) * 10
    } else if i < BINS - 1 {
        (i - FINE_BINS + 2) as u64 * 1000
    } else {
        max_us
    }
}

impl Histogram {
    pub fn add(&mut self, us: u64) {
        self.bins[bin_of(us)] += 1;
        self.count += 1;
        self.sum_us += u128::from(us);
        self.max_us = self.max_us.max(us);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.bins.iter_mut().zip(&other.bins) {
            *a += b;
        }
        self.count += other.count;
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The q-quantile as the upper edge of the bin that holds it (an upper bound within
    /// the bin's width: 10 µs below 1 ms, 1 ms below 100 ms), never above the maximum.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.bins.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return upper_edge(i, self.max_us).min(self.max_us);
            }
        }
        self.max_us
    }

    /// Fraction of samples at most `us` (counted by whole bins, so `us` should be a bin
    /// edge: a multiple of 10 below 1 ms, of 1000 below 100 ms).
    pub fn fraction_within(&self, us: u64) -> f64 {
        if self.count == 0 {
            return 1.0;
        }
        let n: u64 = self
            .bins
            .iter()
            .enumerate()
            .filter(|&(i, _)| i < BINS - 1 && upper_edge(i, 0) <= us)
            .map(|(_, &n)| n)
            .sum();
        n as f64 / self.count as f64
    }

    pub fn summary(&self) -> TimingSummary {
        TimingSummary {
            samples: self.count,
            mean_us: if self.count > 0 {
                (self.sum_us as f64 / self.count as f64).round()
            } else {
                0.0
            },
            p50_us: self.quantile_us(0.5),
            p90_us: self.quantile_us(0.9),
            p99_us: self.quantile_us(0.99),
            p999_us: self.quantile_us(0.999),
            max_us: self.max_us,
            within_100us: self.fraction_within(100),
            within_1ms: self.fraction_within(1000),
        }
    }
}

/// A timing error distribution for reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimingSummary {
    pub samples: u64,
    pub mean_us: f64,
    /// Quantiles as bin upper edges (10 µs resolution below 1 ms).
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Fraction of samples within 100 µs and within 1 ms.
    pub within_100us: f64,
    pub within_1ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_follow_the_reference_within_a_bin() {
        let mut h = Histogram::default();
        let mut xs: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 50_000).collect();
        for &x in &xs {
            h.add(x);
        }
        xs.sort_unstable();
        for q in [0.5, 0.9, 0.99] {
            let exact = xs[((q * xs.len() as f64).ceil() as usize).max(1) - 1];
            let got = h.quantile_us(q);
            let width = if exact < 1000 { 10 } else { 1000 };
            assert!(
                got >= exact && got <= exact + width,
                "q {q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.quantile_us(1.0), xs[xs.len() - 1]);
        let s = h.summary();
        assert_eq!(s.samples, 10_000);
        assert!((s.within_1ms - 0.02).abs() < 0.001, "{}", s.within_1ms);
    }

    #[test]
    fn overflow_and_merge() {
        let mut a = Histogram::default();
        a.add(5);
        a.add(250_000);
        let mut b = Histogram::default();
        b.add(15);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.quantile_us(1.0), 250_000);
        assert_eq!(a.quantile_us(0.3), 10);
        assert!((a.fraction_within(100) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(
            Histogram::default().summary(),
            TimingSummary {
                within_100us: 1.0,
                within_1ms: 1.0,
                ..TimingSummary::default()
            }
        );
    }
}
