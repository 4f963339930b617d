//! Web flow sizes after the SURGE model (Barford & Crovella, "Generating Representative Web
//! Workloads for Network and Server Performance Evaluation", SIGMETRICS 1998, Table 3):
//! a lognormal body (μ = 9.357, σ = 1.318) with probability 0.93 and a Pareto tail
//! (α = 1.1, k = 133 000 bytes) with probability 0.07.
//!
//! The tail as published has infinite variance (α < 2) and a mean that converges slowly,
//! so it is truncated at a cap (default 2 MB): the tail is the Pareto distribution
//! conditioned on `x ≤ cap`, sampled by inverting its CDF; the rare body samples above the
//! cap are clamped to it. With the default cap:
//!
//! - mean flow size 51 245 bytes (body 27 560, tail 365 910),
//! - median 13 115 bytes,
//!
//! checked against 10⁶ samples in `surge_mean_and_median_match_the_model`. PluriBus Table 1
//! has 286 MB in 4 629 flows (62 kB per flow), the same order.

use crate::Rng;

/// Lognormal body: mean of ln(size in bytes).
pub const BODY_MU: f64 = 9.357;
/// Lognormal body: standard deviation of ln(size in bytes).
pub const BODY_SIGMA: f64 = 1.318;
/// Probability that a flow's size comes from the Pareto tail.
pub const TAIL_PROBABILITY: f64 = 0.07;
/// Pareto tail shape α.
pub const TAIL_ALPHA: f64 = 1.1;
/// Pareto tail scale k (its smallest value), in bytes.
pub const TAIL_K_BYTES: f64 = 133_000.0;
/// Default truncation of the tail, in bytes.
pub const DEFAULT_CAP_BYTES: u64 = 2_000_000;
/// Mean flow size with the default cap, in bytes.
pub const DEFAULT_MEAN_BYTES: f64 = 51_245.0;
/// Median flow size with the default cap, in bytes.
pub const DEFAULT_MEDIAN_BYTES: f64 = 13_115.0;

/// The SURGE size distribution with the tail truncated at `cap_bytes` (≥ k).
#[derive(Clone, Copy, Debug)]
pub struct SurgeSizes {
    cap: f64,
    /// P(Pareto ≤ cap) = 1 − (k / cap)^α, the mass the truncated tail keeps.
    tail_mass: f64,
}

impl SurgeSizes {
    pub fn new(cap_bytes: u64) -> SurgeSizes {
        let cap = (cap_bytes as f64).max(TAIL_K_BYTES);
        SurgeSizes {
            cap,
            tail_mass: 1.0 - (TAIL_K_BYTES / cap).powf(TAIL_ALPHA),
        }
    }

    /// One flow size in bytes, at least 1.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let x = if rng.chance(TAIL_PROBABILITY) {
            // Inverse CDF of the Pareto tail conditioned on x ≤ cap.
            let u = rng.f64() * self.tail_mass;
            TAIL_K_BYTES / (1.0 - u).powf(1.0 / TAIL_ALPHA)
        } else {
            (BODY_MU + BODY_SIGMA * rng.normal()).exp()
        };
        x.round().clamp(1.0, self.cap) as u64
    }

    /// The analytic mean in bytes: the body's mean with clamping at the cap, plus the
    /// truncated Pareto mean `α k^α (cap^(1−α) − k^(1−α)) / ((1−α) · tail_mass)`.
    pub fn mean(&self) -> f64 {
        let (mu, s) = (BODY_MU, BODY_SIGMA);
        let z = (self.cap.ln() - mu) / s;
        let body = (mu + s * s / 2.0).exp() * normal_cdf(z - s) + self.cap * (1.0 - normal_cdf(z));
        let (a, k) = (TAIL_ALPHA, TAIL_K_BYTES);
        let tail = a * k.powf(a) * (self.cap.powf(1.0 - a) - k.powf(1.0 - a))
            / ((1.0 - a) * self.tail_mass);
        (1.0 - TAIL_PROBABILITY) * body + TAIL_PROBABILITY * tail
    }
}

/// Standard normal CDF, through the complementary error function (Numerical Recipes
/// `erfcc`, relative error below 1.2e-7).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - erfc / 2.0
    } else {
        erfc / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::quantile_sorted;

    #[test]
    fn analytic_mean_matches_the_documented_value() {
        let m = SurgeSizes::new(DEFAULT_CAP_BYTES).mean();
        assert!((m - DEFAULT_MEAN_BYTES).abs() < 5.0, "{m}");
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-4);
    }

    #[test]
    fn surge_mean_and_median_match_the_model() {
        let sizes = SurgeSizes::new(DEFAULT_CAP_BYTES);
        let mut rng = Rng::child(1, "surge-test");
        let n = 1_000_000;
        let mut xs: Vec<f64> = (0..n).map(|_| sizes.sample(&mut rng) as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        xs.sort_unstable_by(f64::total_cmp);
        let median = quantile_sorted(&xs, 0.5);
        // Standard error of the mean is ≈ 170 bytes at 10⁶ samples.
        assert!((mean - DEFAULT_MEAN_BYTES).abs() < 1_000.0, "mean {mean}");
        assert!(
            (median - DEFAULT_MEDIAN_BYTES).abs() < 150.0,
            "median {median}"
        );
        assert!(xs[0] >= 1.0);
        assert!(xs[n - 1] <= DEFAULT_CAP_BYTES as f64);
        let tail = xs.iter().filter(|&&x| x >= TAIL_K_BYTES).count() as f64 / n as f64;
        // The tail's 7 % plus the body's own mass above k (0.93 · 3.2 %).
        assert!((tail - 0.0998).abs() < 0.002, "tail share {tail}");
    }
}
