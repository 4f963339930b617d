//! Utility functions: what a traffic class's throughput is worth to its user (oSCTP §III-A).
//!
//! `U(x)` is worth per second at a total throughput of `x` bit/s. All three are concave, so
//! the benefit `U(Σ x) − Σ C(x)` has one maximum that [`super::optimize`] finds exactly.

use serde::{Deserialize, Serialize};

use super::ModelError;

/// A concave utility of the total throughput `x` (bit/s).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Utility {
    /// `weight · ln(x)`: elastic traffic such as a download (oSCTP §III-A, `K4 log x`).
    Log { weight: f64 },
    /// `weight · min(x, target_bps)`: a stream that wants `target_bps` and no more (a video
    /// call); the paper's "simple thresholding", made concave by a linear ramp to the target.
    Threshold { target_bps: f64, weight: f64 },
    /// `weight · x`: every bit worth the same.
    Linear { weight: f64 },
}

/// As the Hello's metering options carry it.
impl From<Utility> for braid_wire::UtilityOpt {
    fn from(u: Utility) -> Self {
        match u {
            Utility::Log { weight } => Self::Log { weight },
            Utility::Threshold { target_bps, weight } => Self::Threshold { target_bps, weight },
            Utility::Linear { weight } => Self::Linear { weight },
        }
    }
}

impl From<braid_wire::UtilityOpt> for Utility {
    fn from(u: braid_wire::UtilityOpt) -> Self {
        use braid_wire::UtilityOpt as U;
        match u {
            U::Log { weight } => Utility::Log { weight },
            U::Threshold { target_bps, weight } => Utility::Threshold { target_bps, weight },
            U::Linear { weight } => Utility::Linear { weight },
        }
    }
}

impl Utility {
    /// The log utility whose optimum with a metered link at `price_per_bit` is a total of
    /// `target_bps`: oSCTP's "combined throughput target" `K4 / K3`.
    pub fn log_with_target(target_bps: f64, price_per_bit: f64) -> Utility {
        Utility::Log {
            weight: target_bps * price_per_bit,
        }
    }

    /// Checks that the weights and target are finite and not negative.
    pub fn validate(&self) -> Result<(), ModelError> {
        let (name, v) = match *self {
            Utility::Log { weight } | Utility::Linear { weight } => ("weight", weight),
            Utility::Threshold { target_bps, weight } => {
                if !(target_bps.is_finite() && target_bps >= 0.0) {
                    return Err(ModelError::Negative("target_bps", target_bps));
                }
                ("weight", weight)
            }
        };
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(ModelError::Negative(name, v))
        }
    }

    /// `U(x)`; the log of zero is minus infinity.
    pub fn value(&self, x: f64) -> f64 {
        match *self {
            Utility::Log { weight } => weight * x.ln(),
            Utility::Threshold { target_bps, weight } => weight * x.min(target_bps),
            Utility::Linear { weight } => weight * x,
        }
    }

    /// The total throughput this utility buys at a marginal price of `price` per bit/s:
    /// where `U'(x)` falls to `price` (the maximizer of `U(x) − price · x`). At a tie the
    /// smaller, so that a metered link is not used for nothing; infinite when every bit
    /// is worth more than the price.
    pub fn demand(&self, price: f64) -> f64 {
        match *self {
            Utility::Log { weight } => {
                if price <= 0.0 {
                    f64::INFINITY
                } else {
                    weight / price
                }
            }
            Utility::Threshold { target_bps, weight } => {
                if weight > price {
                    target_bps
                } else {
                    0.0
                }
            }
            Utility::Linear { weight } => {
                if weight > price {
                    f64::INFINITY
                } else {
                    0.0
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_is_where_the_marginal_utility_meets_the_price() {
        let log = Utility::Log { weight: 2e3 };
        assert_eq!(log.demand(1e-3), 2e6);
        assert_eq!(log.demand(0.0), f64::INFINITY);
        // The marginal utility at the demand is the price.
        let x = log.demand(4e-3);
        let h = 1.0;
        let marginal = (log.value(x + h) - log.value(x - h)) / (2.0 * h);
        assert!((marginal - 4e-3).abs() < 1e-9, "{marginal}");

        let t = Utility::Threshold {
            target_bps: 2e6,
            weight: 1.0,
        };
        assert_eq!(t.demand(0.5), 2e6);
        assert_eq!(t.demand(1.0), 0.0);
        assert_eq!(t.value(3e6), 2e6);
        let lin = Utility::Linear { weight: 1.0 };
        assert_eq!(lin.demand(0.5), f64::INFINITY);
        assert_eq!(lin.demand(2.0), 0.0);
    }

    #[test]
    fn log_with_target_buys_the_target() {
        let u = Utility::log_with_target(900e3, 1e-6);
        assert!((u.demand(1e-6) - 900e3).abs() < 1e-6);
    }

    #[test]
    fn negative_weights_are_refused() {
        assert!(Utility::Log { weight: -1.0 }.validate().is_err());
        assert!(Utility::Threshold {
            target_bps: -1.0,
            weight: 1.0
        }
        .validate()
        .is_err());
        assert!(Utility::Linear { weight: 1.0 }.validate().is_ok());
    }
}
