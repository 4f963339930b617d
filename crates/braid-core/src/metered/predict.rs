//! Per-interval rate prediction (oSCTP §III-B, §IV-F): the rate a cheap path will carry in
//! the next scheduling interval, from the rates it carried in the past ones.
//!
//! oSCTP predicts interval `i` with an autoregressive model and, in its implementation,
//! uses the last interval's measured rate as is. Both are here, beside the candidates
//! `osctp-fig2` measured them against on the recorded traces (docs/benchmarks.md):
//! an EWMA, the minimum and the median of the last few intervals.
//! [`PredictorKind::BRAID`] is the one that won.

use serde::{Deserialize, Serialize};

use super::ModelError;

/// Intervals of history a predictor keeps, the most any windowed kind may look back.
pub const HISTORY: usize = 8;

/// Memory of the AR(1) fit, in intervals: its sums forget by `1 − 1/AR1_MEMORY` per
/// interval, so that the fit follows a link whose character changes (a minute at 1 s).
pub const AR1_MEMORY: f64 = 60.0;

/// How the next interval's rate is predicted.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PredictorKind {
    /// The last interval's rate (oSCTP §IV-F: "the measured value of `X_w^{i-1}`").
    LastValue,
    /// AR(1) (oSCTP §III-B): `x̂_i = μ + φ (x_{i−1} − μ)`, with `μ` and `φ` fitted by least
    /// squares over the past intervals as they come ([`AR1_MEMORY`]).
    Ar1,
    /// Exponentially weighted moving average: `x̂ ← x̂ + gain (x − x̂)`.
    Ewma { gain: f64 },
    /// The smallest of the last `n` rates: a cautious guess.
    MinOfLast { n: usize },
    /// The median of the last `n` rates: ignores a single outlying interval.
    MedianOfLast { n: usize },
}

impl PredictorKind {
    /// braid's predictor: the lowest median error of all the kinds above on the recorded
    /// WiFi and cellular traces at 1, 2, 5 and 10 s (`osctp-fig2`; 0.100 against the
    /// AR(1)'s 0.111 on WiFi at 1 s), and a dark link is predicted dark.
    pub const BRAID: PredictorKind = PredictorKind::LastValue;

    /// Checks the parameters: a gain in (0, 1], a window of 1 to [`HISTORY`] intervals.
    pub fn validate(&self) -> Result<(), ModelError> {
        match *self {
            PredictorKind::Ewma { gain } if !(gain > 0.0 && gain <= 1.0) => {
                Err(ModelError::Gain(gain))
            }
            PredictorKind::MinOfLast { n } | PredictorKind::MedianOfLast { n }
                if !(1..=HISTORY).contains(&n) =>
            {
                Err(ModelError::Window(n))
            }
            _ => Ok(()),
        }
    }

    /// A short name for reports: `last-value`, `ar1`, `ewma-0.5`, `min-3`, `median-3`.
    pub fn label(&self) -> String {
        match *self {
            PredictorKind::LastValue => "last-value".into(),
            PredictorKind::Ar1 => "ar1".into(),
            PredictorKind::Ewma { gain } => format!("ewma-{gain}"),
            PredictorKind::MinOfLast { n } => format!("min-{n}"),
            PredictorKind::MedianOfLast { n } => format!("median-{n}"),
        }
    }
}

/// Forgetting least-squares sums for the AR(1) fit of `y = x_i` on `x = x_{i−1}`.
#[derive(Clone, Copy, Debug, Default)]
struct Ar1Fit {
    w: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Ar1Fit {
    fn add(&mut self, x: f64, y: f64) {
        let keep = 1.0 - 1.0 / AR1_MEMORY;
        self.w = self.w * keep + 1.0;
        self.x = self.x * keep + x;
        self.y = self.y * keep + y;
        self.xx = self.xx * keep + x * x;
        self.xy = self.xy * keep + x * y;
    }

    /// The prediction after `last`; `None` while the fit has too little to go on.
    fn predict(&self, last: f64) -> Option<f64> {
        if self.w < 3.0 {
            return None;
        }
        let (mx, my) = (self.x / self.w, self.y / self.w);
        let var = self.xx / self.w - mx * mx;
        if var <= 1e-9 * mx * mx + f64::MIN_POSITIVE {
            return None;
        }
        let phi = ((self.xy / self.w - mx * my) / var).clamp(0.0, 1.0);
        Some(my + phi * (last - mx))
    }
}

/// One path's rate predictor. Feed it each interval's measured rate with
/// [`observe`](Self::observe); [`predict`](Self::predict) gives the next interval's.
#[derive(Clone, Debug)]
pub struct RatePredictor {
    kind: PredictorKind,
    /// The last rates, newest at `(head + HISTORY − 1) % HISTORY`.
    history: [f64; HISTORY],
    head: usize,
    len: usize,
    ewma: Option<f64>,
    fit: Ar1Fit,
}

impl RatePredictor {
    pub fn new(kind: PredictorKind) -> Result<RatePredictor, ModelError> {
        kind.validate()?;
        Ok(RatePredictor {
            kind,
            history: [0.0; HISTORY],
            head: 0,
            len: 0,
            ewma: None,
            fit: Ar1Fit::default(),
        })
    }

    pub fn kind(&self) -> PredictorKind {
        self.kind
    }

    /// Records the rate (bit/s) measured over the interval that just ended.
    pub fn observe(&mut self, rate: f64) {
        let rate = if rate.is_finite() { rate.max(0.0) } else { 0.0 };
        if let Some(last) = self.last() {
            self.fit.add(last, rate);
        }
        self.history[(self.head + self.len) % HISTORY] = rate;
        if self.len < HISTORY {
            self.len += 1;
        } else {
            self.head = (self.head + 1) % HISTORY;
        }
        self.ewma = Some(match (self.ewma, self.kind) {
            (Some(e), PredictorKind::Ewma { gain }) => e + gain * (rate - e),
            _ => rate,
        });
    }

    /// The predicted rate (bit/s) of the next interval; `None` before any was observed.
    pub fn predict(&self) -> Option<f64> {
        let last = self.last()?;
        let p = match self.kind {
            PredictorKind::LastValue => last,
            PredictorKind::Ar1 => self.fit.predict(last).unwrap_or(last),
            PredictorKind::Ewma { .. } => self.ewma.unwrap_or(last),
            PredictorKind::MinOfLast { n } => self.recent(n).fold(f64::INFINITY, f64::min),
            PredictorKind::MedianOfLast { n } => {
                let mut v = [0.0; HISTORY];
                let mut k = 0;
                for r in self.recent(n) {
                    v[k] = r;
                    k += 1;
                }
                let v = &mut v[..k];
                v.sort_by(f64::total_cmp);
                if k % 2 == 1 {
                    v[k / 2]
                } else {
                    (v[k / 2 - 1] + v[k / 2]) / 2.0
                }
            }
        };
        Some(p.max(0.0))
    }

    fn last(&self) -> Option<f64> {
        (self.len > 0).then(|| self.history[(self.head + self.len - 1) % HISTORY])
    }

    /// The last `n` rates (fewer while the history is short).
    fn recent(&self, n: usize) -> impl Iterator<Item = f64> + '_ {
        let k = n.min(self.len);
        (self.len - k..self.len).map(move |i| self.history[(self.head + i) % HISTORY])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: PredictorKind, rates: &[f64]) -> Vec<Option<f64>> {
        let mut p = RatePredictor::new(kind).unwrap();
        let mut out = vec![p.predict()];
        for &r in rates {
            p.observe(r);
            out.push(p.predict());
        }
        out
    }

    #[test]
    fn windowed_predictors_look_back_as_far_as_told() {
        let rates = [5.0, 1.0, 4.0, 3.0, 9.0];
        assert_eq!(run(PredictorKind::LastValue, &rates)[5], Some(9.0));
        let min3 = run(PredictorKind::MinOfLast { n: 3 }, &rates);
        assert_eq!(min3[0], None);
        assert_eq!(min3[2], Some(1.0));
        assert_eq!(min3[5], Some(3.0));
        let med3 = run(PredictorKind::MedianOfLast { n: 3 }, &rates);
        assert_eq!(med3[2], Some(3.0));
        assert_eq!(med3[5], Some(4.0));
        // More than HISTORY rates: the window slides.
        let long: Vec<f64> = (0..20).map(f64::from).collect();
        let min8 = run(PredictorKind::MinOfLast { n: 8 }, &long);
        assert_eq!(min8[20], Some(12.0));
    }

    #[test]
    fn ewma_moves_by_its_gain() {
        let e = run(PredictorKind::Ewma { gain: 0.5 }, &[4.0, 8.0, 8.0]);
        assert_eq!(&e[1..], &[Some(4.0), Some(6.0), Some(7.0)]);
    }

    #[test]
    fn ar1_learns_the_mean_and_the_correlation() {
        // x_i = 100 + 0.5 (x_{i-1} − 100) + noise, then one interval far above the mean.
        let mut p = RatePredictor::new(PredictorKind::Ar1).unwrap();
        let (mut x, mut seed) = (100.0, 1u64);
        for _ in 0..300 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = ((seed >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 40.0;
            x = 100.0 + 0.5 * (x - 100.0) + noise;
            p.observe(x);
        }
        p.observe(160.0);
        // The model's next value is 130, not the last rate.
        let got = p.predict().unwrap();
        assert!((got - 130.0).abs() < 12.0, "{got}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(RatePredictor::new(PredictorKind::Ewma { gain: 0.0 }).is_err());
        assert!(RatePredictor::new(PredictorKind::MinOfLast { n: 0 }).is_err());
        assert!(RatePredictor::new(PredictorKind::MedianOfLast { n: HISTORY + 1 }).is_err());
    }
}
