//! Metered links: oSCTP's utility-and-cost model (§III-A), throughput prediction per
//! scheduling interval (§III-B) and the metered paths' budgets (§IV-F).
//!
//! A cheap link that comes and goes (WiFi, a neighbour's broadband) and an expensive one
//! (cellular with a data cap): the expensive link should carry only what the cheap one
//! cannot and only as far as the traffic's utility pays for it. Each scheduling interval
//! the [`Planner`] predicts every cheap path's rate ([`RatePredictor`]), finds the rates
//! that maximize utility minus cost ([`optimize`]; [`strategy1`] is the paper's closed
//! form it is tested against) and gives each metered path the bytes of its rate
//! ([`IntervalBudget`]). Nothing here reads a clock; the caller passes `now`.
//!
//! - [`utility`]: log, threshold, linear utilities of the total rate.
//! - [`cost`]: per-byte, fixed plus per-byte, tiered costs of one path's rate.
//! - [`strategy1`]: equation 1, log utility and linear cost, in closed form.
//! - [`optimize`]: the exact water-filling optimizer over N paths.
//! - [`predict`]: last value, AR(1), EWMA, min and median of the last few intervals.
//! - [`budget`]: a metered path's bytes for one interval.
//! - [`config`]: what a session is told: costs, utility, caps.
//! - [`plan`]: the per-interval loop that ties them together.

pub mod budget;
pub mod config;
pub mod cost;
pub mod optimize;
pub mod plan;
pub mod predict;
pub mod strategy1;
pub mod utility;

pub use budget::IntervalBudget;
pub use config::{
    CapPace, IntervalRecord, MeteredPath, MeteredSettings, MeteringConfig, MeteringSection,
    UtilityKind,
};
pub use cost::{Cost, Segment, Tier};
pub use optimize::{benefit, optimize, PathOffer};
pub use plan::{PathModel, Planner, DEFAULT_INTERVAL};
pub use predict::{PredictorKind, RatePredictor, HISTORY};
pub use strategy1::{strategy1, Strategy1};
pub use utility::Utility;

/// Why a model's parameters were refused; each names the key at fault.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("`{0}` must be a finite number, zero or more (got {1})")]
    Negative(&'static str, f64),
    #[error("a tiered cost needs at least one tier")]
    NoTiers,
    #[error("tiers must rise in `up_to_bps` and must not get cheaper per byte (the cost must be convex)")]
    TiersNotConvex,
    #[error("an EWMA's `gain` must be in (0, 1] (got {0})")]
    Gain(f64),
    #[error("a predictor's window `n` must be 1 to {HISTORY} intervals (got {0})")]
    Window(usize),
    #[error("the scheduling interval must be longer than zero")]
    Interval,
}
