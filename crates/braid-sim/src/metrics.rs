//! Measurements for reports: summaries of samples (flow completion times, one-way delays),
//! bounded sample collectors, goodput and goodput time series.
//!
//! Everything here serializes to deterministic JSON: no maps with random iteration order,
//! and never NaN or infinity (an empty summary is all zeros with `count` 0).

use serde::Serialize;

use braid_core::Instant;

use crate::Rng;

/// The distribution of a set of samples, in the unit named by the field that holds it
/// (`fct_ms: Summary` holds milliseconds).
///
/// Percentiles use linear interpolation between closest ranks (Hyndman & Fan type 7, the
/// default of R and NumPy): over the `n` sorted samples `x[0..n]`, the q-quantile is
/// `x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋+1] − x[⌊h⌋])` with `h = q(n − 1)`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub p95: f64,
    pub max: f64,
}

impl Summary {
    /// Summarizes `samples`, sorting them in place. Non-finite samples (NaN, ±∞) are not
    /// counted; with no finite sample the summary is all zeros.
    pub fn from_samples(samples: &mut [f64]) -> Summary {
        // Move the finite samples to the front, then sort only those.
        let mut finite = 0;
        for i in 0..samples.len() {
            if samples[i].is_finite() {
                samples.swap(i, finite);
                finite += 1;
            }
        }
        let xs = &mut samples[..finite];
        if xs.is_empty() {
            return Summary::default();
        }
        xs.sort_unstable_by(f64::total_cmp);
        let sum: f64 = xs.iter().sum();
        Summary {
            count: xs.len() as u64,
            mean: sum / xs.len() as f64,
            min: xs[0],
            p25: quantile_sorted(xs, 0.25),
            median: quantile_sorted(xs, 0.5),
            p75: quantile_sorted(xs, 0.75),
            p95: quantile_sorted(xs, 0.95),
            max: xs[xs.len() - 1],
        }
    }
}

/// The q-quantile (0 ≤ q ≤ 1) of non-empty, sorted, finite samples, by linear interpolation
/// (type 7; see [`Summary`]).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let Some(&last) = sorted.last() else {
        return 0.0;
    };
    let h = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = h.floor() as usize;
    let Some(&next) = sorted.get(lo + 1) else {
        return last;
    };
    sorted[lo] + (h - lo as f64) * (next - sorted[lo])
}

/// A bounded collector of samples: count, mean, min and max are exact over every sample;
/// percentiles come from a uniform reservoir sample (Vitter's Algorithm R) of at most
/// `capacity` samples, drawn with the simulator's seeded [`Rng`] so runs stay reproducible.
/// Below `capacity` samples the percentiles are exact too.
#[derive(Clone, Debug)]
pub struct Samples {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    reservoir: Vec<f64>,
    capacity: usize,
    rng: Rng,
}

impl Samples {
    /// Percentiles are exact up to this many samples.
    pub const DEFAULT_CAPACITY: usize = 100_000;

    pub fn new(capacity: usize, rng: Rng) -> Samples {
        Samples {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            reservoir: Vec::new(),
            capacity: capacity.max(1),
            rng,
        }
    }

    /// Records one sample; non-finite samples are ignored.
    pub fn push(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        self.count += 1;
        self.sum += x;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        if self.reservoir.len() < self.capacity {
            self.reservoir.push(x);
        } else {
            let j = self.rng.below(self.count);
            if let Some(slot) = self.reservoir.get_mut(j as usize) {
                *slot = x;
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The summary: exact count, mean, min and max; percentiles from the reservoir.
    pub fn summary(&self) -> Summary {
        if self.count == 0 {
            return Summary::default();
        }
        let mut kept = self.reservoir.clone();
        let mut s = Summary::from_samples(&mut kept);
        s.count = self.count;
        s.mean = self.sum / self.count as f64;
        s.min = self.min;
        s.max = self.max;
        s
    }
}

/// Goodput in Mbit/s of `bytes` over `seconds`; zero when no time has passed.
pub fn goodput_mbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        bytes as f64 * 8.0 / seconds / 1e6
    } else {
        0.0
    }
}

/// Bytes per fixed interval from `start`, for goodput over time (recovery after a path
/// failure, say). Holds at most `max_bins` intervals; bytes after the last bin are counted in
/// [`IntervalSeries::overflow_bytes`] so nothing vanishes silently.
#[derive(Clone, Debug)]
pub struct IntervalSeries {
    start: Instant,
    interval_us: u64,
    bins: Vec<u64>,
    max_bins: usize,
    overflow_bytes: u64,
}

impl IntervalSeries {
    /// A series over `[start, end)` in intervals of at least `interval_us`, widened so that
    /// the series has at most `max_bins` bins.
    pub fn new(start: Instant, end: Instant, interval_us: u64, max_bins: usize) -> IntervalSeries {
        let span = end.as_micros().saturating_sub(start.as_micros());
        let max_bins = max_bins.max(1);
        let min_interval = span.div_ceil(max_bins as u64);
        let interval_us = interval_us.max(min_interval).max(1);
        IntervalSeries {
            start,
            interval_us,
            bins: Vec::new(),
            max_bins,
            overflow_bytes: 0,
        }
    }

    /// Counts `bytes` arriving at `now`; arrivals before `start` count in the first bin.
    pub fn add(&mut self, now: Instant, bytes: u64) {
        let offset = now.as_micros().saturating_sub(self.start.as_micros());
        let bin = (offset / self.interval_us) as usize;
        if bin >= self.max_bins {
            self.overflow_bytes += bytes;
            return;
        }
        if self.bins.len() <= bin {
            self.bins.resize(bin + 1, 0);
        }
        self.bins[bin] += bytes;
    }

    pub fn interval_us(&self) -> u64 {
        self.interval_us
    }

    pub fn overflow_bytes(&self) -> u64 {
        self.overflow_bytes
    }

    /// Goodput per interval in Mbit/s, for every whole interval from `start` up to `end`.
    pub fn mbps_until(&self, end: Instant) -> Vec<f64> {
        let span = end.as_micros().saturating_sub(self.start.as_micros());
        let n = ((span / self.interval_us) as usize).min(self.max_bins);
        let secs = self.interval_us as f64 / 1e6;
        (0..n)
            .map(|i| goodput_mbps(self.bins.get(i).copied().unwrap_or(0), secs))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_summary_is_zeros() {
        let s = Summary::from_samples(&mut []);
        assert_eq!(s, Summary::default());
        let s = Summary::from_samples(&mut [f64::NAN, f64::INFINITY]);
        assert_eq!(s.count, 0);
        assert_eq!(s.mean, 0.0);
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("null"), "{json}");
    }

    #[test]
    fn summary_interpolates() {
        let mut xs = [4.0, 1.0, 3.0, 2.0, f64::NAN, 5.0];
        let s = Summary::from_samples(&mut xs);
        assert_eq!(s.count, 5);
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.p25, 2.0);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.p75, 4.0);
        assert!((s.p95 - 4.8).abs() < 1e-12, "{}", s.p95);
        assert_eq!(s.max, 5.0);
        let s = Summary::from_samples(&mut [1.0, 2.0]);
        assert_eq!(s.median, 1.5);
    }

    #[test]
    fn reservoir_is_exact_below_capacity_and_bounded_above() {
        let mut a = Samples::new(1000, Rng::new(1));
        for i in 0..1000 {
            a.push(f64::from(i));
        }
        let s = a.summary();
        assert_eq!(s.median, 499.5);
        let mut b = Samples::new(1000, Rng::new(1));
        for i in 0..100_000 {
            b.push(f64::from(i));
        }
        let s = b.summary();
        assert_eq!(s.count, 100_000);
        assert_eq!(s.mean, 49_999.5);
        assert_eq!(s.max, 99_999.0);
        assert!((s.median - 50_000.0).abs() < 5_000.0, "{}", s.median);
        assert_eq!(b.reservoir.len(), 1000);
    }

    #[test]
    fn interval_series_bins_and_widens() {
        let mut s = IntervalSeries::new(Instant::ZERO, Instant::from_millis(1000), 100_000, 100);
        s.add(Instant::from_millis(50), 12_500);
        s.add(Instant::from_millis(150), 25_000);
        let v = s.mbps_until(Instant::from_millis(1000));
        assert_eq!(v.len(), 10);
        assert_eq!(v[0], 1.0);
        assert_eq!(v[1], 2.0);
        assert_eq!(v[2], 0.0);
        let wide = IntervalSeries::new(Instant::ZERO, Instant::from_millis(1000), 1000, 4);
        assert_eq!(wide.interval_us(), 250_000);
        assert_eq!(goodput_mbps(1, 0.0), 0.0);
    }
}
