//! The interval planner: oSCTP §IV-F's loop, sans-IO. Every scheduling interval it takes
//! each cheap path's measured rate (bytes delivered over the interval), predicts the next
//! interval's, asks [`optimize`] for the benefit-maximizing rates and gives each metered
//! path the bytes its rate allows for the interval. Cheap paths are never throttled.

use std::time::Duration;

use super::{
    optimize, Cost, IntervalBudget, ModelError, PathOffer, PredictorKind, RatePredictor, Utility,
};
use crate::Instant;

/// oSCTP's scheduling interval (§III-B, chosen by Fig 2: shorter predicts better).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// What the model knows of one path.
#[derive(Clone, Debug, PartialEq)]
pub struct PathModel {
    pub cost: Cost,
    /// Whether the path's bytes are to be saved (oSCTP's "primary path"): it gets a budget.
    pub metered: bool,
}

#[derive(Clone, Debug)]
struct Planned {
    model: PathModel,
    predictor: RatePredictor,
    delivered: u64,
    budget: IntervalBudget,
    /// The rate the optimizer set for this interval, bit/s.
    planned_bps: f64,
    /// A cheap path's rate as seen part way through the interval, where it contradicts
    /// the prediction ([`Planner::replan`]); cleared when the interval closes.
    seen_bps: Option<f64>,
}

/// Budgets per scheduling interval for the metered paths of one session.
#[derive(Clone, Debug)]
pub struct Planner {
    interval: Duration,
    utility: Utility,
    paths: Vec<Planned>,
    started: Instant,
}

impl Planner {
    /// A planner whose first interval starts at `now`. Until the first interval closes,
    /// nothing is predicted for the cheap paths, so the metered ones get the whole demand.
    pub fn new(
        now: Instant,
        interval: Duration,
        utility: Utility,
        predictor: PredictorKind,
        paths: Vec<PathModel>,
    ) -> Result<Planner, ModelError> {
        utility.validate()?;
        if interval.is_zero() {
            return Err(ModelError::Interval);
        }
        let paths = paths
            .into_iter()
            .map(|model| {
                model.cost.validate()?;
                Ok(Planned {
                    model,
                    predictor: RatePredictor::new(predictor)?,
                    delivered: 0,
                    budget: IntervalBudget::default(),
                    planned_bps: 0.0,
                    seen_bps: None,
                })
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        Ok(Planner {
            interval,
            utility,
            paths,
            started: now,
        })
    }

    /// When the current interval ends.
    pub fn poll_timeout(&self) -> Instant {
        self.started + self.interval
    }

    /// Counts `bytes` delivered (acknowledged) on `path` in the current interval.
    pub fn on_delivered(&mut self, path: usize, bytes: u64) {
        if let Some(p) = self.paths.get_mut(path) {
            p.delivered = p.delivered.saturating_add(bytes);
        }
    }

    /// Counts `bytes` sent on `path` against its budget.
    pub fn on_sent(&mut self, path: usize, bytes: u64) {
        if let Some(p) = self.paths.get_mut(path) {
            p.budget.on_sent(bytes);
        }
    }

    /// Whether `path` may send `bytes` now: always for a cheap path, within the
    /// interval's budget for a metered one.
    pub fn may_send(&self, path: usize, bytes: u64) -> bool {
        self.paths
            .get(path)
            .is_some_and(|p| !p.model.metered || p.budget.may_send(bytes))
    }

    /// The current interval's budget of a metered path; `None` for a cheap one.
    pub fn budget(&self, path: usize) -> Option<IntervalBudget> {
        let p = self.paths.get(path)?;
        p.model.metered.then_some(p.budget)
    }

    /// The rate predicted for cheap `path` in the current interval, bit/s (`None` for a
    /// metered path, or before the first interval closed).
    pub fn predicted_bps(&self, path: usize) -> Option<f64> {
        let p = self.paths.get(path)?;
        if p.model.metered {
            None
        } else {
            p.predictor.predict()
        }
    }

    /// The rate the model set on `path` for the current interval, bit/s.
    pub fn planned_bps(&self, path: usize) -> Option<f64> {
        self.paths.get(path).map(|p| p.planned_bps)
    }

    /// Closes the interval if it is over: each cheap path's measured rate feeds its
    /// predictor; `metered_capacity_bps[j]` is what metered path `j` could carry (its
    /// capacity estimate; its own throttled rate says nothing of that). Harmless when
    /// early. Returns whether a new interval began.
    pub fn handle_timeout(&mut self, now: Instant, metered_capacity_bps: &[f64]) -> bool {
        if now < self.poll_timeout() {
            return false;
        }
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        for p in &mut self.paths {
            if !p.model.metered {
                p.predictor.observe(p.delivered as f64 * 8.0 / elapsed);
            }
            p.delivered = 0;
            p.seen_bps = None;
            p.budget = IntervalBudget::default();
        }
        self.started = now;
        self.plan_rest(now, metered_capacity_bps);
        true
    }

    /// Re-plans the rest of the current interval at `now`, where a cheap path is seen to
    /// carry other than predicted: `seen_bps[j]` for cheap path `j` (0 for one found
    /// down, its rate for one that came back), `None` to keep the prediction. What a
    /// metered path has spent stays spent; the rest of the interval gets the new rate.
    /// The prediction can only know a coverage gap's edge an interval late; this is the
    /// feedback within the interval that catches it (`osctp-table1`).
    pub fn replan(&mut self, now: Instant, seen_bps: &[Option<f64>], metered_capacity_bps: &[f64]) {
        for (j, p) in self.paths.iter_mut().enumerate() {
            if !p.model.metered {
                p.seen_bps = seen_bps.get(j).copied().flatten();
            }
        }
        self.plan_rest(now, metered_capacity_bps);
    }

    /// Sets each path's rate from the model for the rest of the interval.
    fn plan_rest(&mut self, now: Instant, metered_capacity_bps: &[f64]) {
        let offers: Vec<PathOffer<'_>> = self
            .paths
            .iter()
            .enumerate()
            .map(|(j, p)| PathOffer {
                capacity_bps: if p.model.metered {
                    metered_capacity_bps.get(j).copied().unwrap_or(0.0)
                } else {
                    p.seen_bps.or_else(|| p.predictor.predict()).unwrap_or(0.0)
                },
                cost: &p.model.cost,
            })
            .collect();
        let rates = optimize(&self.utility, &offers);
        let rest_s = self
            .poll_timeout()
            .saturating_duration_since(now)
            .as_secs_f64();
        for (p, rate) in self.paths.iter_mut().zip(rates) {
            p.planned_bps = rate;
            p.budget = p.budget.replanned(rate, rest_s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planner() -> Planner {
        // Target 900 kbit/s: log utility at the metered path's price.
        let price = 1e-6;
        Planner::new(
            Instant::ZERO,
            DEFAULT_INTERVAL,
            Utility::log_with_target(900e3, price / 8.0),
            PredictorKind::LastValue,
            vec![
                PathModel {
                    cost: Cost::FREE,
                    metered: false,
                },
                PathModel {
                    cost: Cost::PerByte { per_byte: price },
                    metered: true,
                },
            ],
        )
        .unwrap()
    }

    #[test]
    fn the_metered_path_fills_what_the_cheap_one_carried_short_of_the_target() {
        let mut p = planner();
        assert!(!p.handle_timeout(Instant::from_millis(500), &[0.0, 700e3]));
        // The cheap path carried 500 kbit/s over the first second.
        p.on_delivered(0, 62_500);
        assert!(p.handle_timeout(Instant::from_millis(1000), &[0.0, 700e3]));
        let b = p.budget(1).unwrap();
        assert_eq!(b.allowance(), 400_000 / 8);
        assert!(p.budget(0).is_none());
        assert!(p.may_send(0, 1500));
        let mut sent = 0;
        while p.may_send(1, 1500) {
            p.on_sent(1, 1500);
            sent += 1500;
        }
        assert!(sent <= 50_000 && sent > 50_000 - 1500);
        // A cheap second above the target: the metered path is off.
        p.on_delivered(0, 250_000);
        p.handle_timeout(Instant::from_millis(2000), &[0.0, 700e3]);
        assert_eq!(p.budget(1).unwrap().allowance(), 0);
        assert!(!p.may_send(1, 1));
        // The cheap path went dark: all the metered path can carry, up to the target.
        p.handle_timeout(Instant::from_millis(3000), &[0.0, 700e3]);
        assert_eq!(p.planned_bps(1), Some(700e3));
    }

    #[test]
    fn a_replan_part_way_gives_the_rest_of_the_interval_the_new_rate() {
        let mut p = planner();
        // A dark second: the metered path gets its whole capacity (700 kbit/s).
        p.handle_timeout(Instant::from_millis(1000), &[0.0, 700e3]);
        assert_eq!(p.budget(1).unwrap().allowance(), 87_500);
        p.on_sent(1, 30_000);
        // 400 ms in, the cheap path is back at 2 Mbit/s: nothing more on the metered one.
        p.replan(
            Instant::from_millis(1400),
            &[Some(2e6), None],
            &[0.0, 700e3],
        );
        let b = p.budget(1).unwrap();
        assert_eq!((b.spent(), b.allowance()), (30_000, 30_000));
        assert!(!p.may_send(1, 1));
        // Back at 500 kbit/s instead: 400 kbit/s for the 0.6 s left.
        p.replan(
            Instant::from_millis(1400),
            &[Some(500e3), None],
            &[0.0, 700e3],
        );
        assert_eq!(p.budget(1).unwrap().allowance(), 30_000 + 30_000);
        // The next interval forgets what was seen and goes by the prediction again (the
        // cheap path delivered nothing in the last one).
        p.handle_timeout(Instant::from_millis(2000), &[0.0, 700e3]);
        assert_eq!(p.budget(1).unwrap().allowance(), 87_500);
        assert_eq!(p.budget(1).unwrap().spent(), 0);
    }

    #[test]
    fn a_zero_interval_is_refused() {
        assert!(matches!(
            Planner::new(
                Instant::ZERO,
                Duration::ZERO,
                Utility::Linear { weight: 1.0 },
                PredictorKind::BRAID,
                vec![]
            ),
            Err(ModelError::Interval)
        ));
    }
}
