//! Cost functions: what carrying `x` bit/s on one path costs per second (oSCTP §III-A).
//!
//! All are convex and piecewise linear in the rate, so a path's cost is a list of
//! [`Segment`]s of rising price that [`super::optimize`] fills cheapest first. Prices are
//! per byte as a tariff states them; a rate of `x` bit/s carries `x / 8` bytes a second.

use serde::{Deserialize, Serialize};

use super::ModelError;

/// One price band of a tiered cost: the rate up to `up_to_bps` (from the previous band's
/// end) costs `per_byte`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    /// Where the band ends, bit/s; infinite for the last.
    pub up_to_bps: f64,
    pub per_byte: f64,
}

/// A convex cost of one path's rate `x` (bit/s), per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Cost {
    /// `per_byte · x / 8`.
    PerByte { per_byte: f64 },
    /// `fixed + per_byte · x / 8`: the paper's `K2 + K3 x` (and `K1` for WiFi with a zero
    /// per-byte price). `fixed` is paid whether or not the path carries anything (a plan's
    /// fee), so it enters the benefit but never the choice of rates.
    FixedPlusPerByte { fixed: f64, per_byte: f64 },
    /// Bands of rising price (convex): a tiered plan, where more costs more per byte.
    Tiered { tiers: Vec<Tier> },
}

/// A stretch of rate at one marginal price.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// Price per bit/s carried for a second (per byte / 8).
    pub price: f64,
    /// Rate in the stretch, bit/s.
    pub width_bps: f64,
}

impl Cost {
    /// Nothing to pay.
    pub const FREE: Cost = Cost::PerByte { per_byte: 0.0 };

    /// The price per byte of the path's first bytes: what a peer is told of it (a
    /// tiered plan's first band).
    pub fn base_per_byte(&self) -> f64 {
        match self {
            Cost::PerByte { per_byte } | Cost::FixedPlusPerByte { per_byte, .. } => *per_byte,
            Cost::Tiered { tiers } => tiers.first().map_or(0.0, |t| t.per_byte),
        }
    }

    /// Checks that prices are finite and not negative and that tiers rise in both rate and
    /// price (a tiered plan that gets cheaper with volume is not convex).
    pub fn validate(&self) -> Result<(), ModelError> {
        let price = |name: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(ModelError::Negative(name, v))
            }
        };
        match self {
            Cost::PerByte { per_byte } => price("per_byte", *per_byte),
            Cost::FixedPlusPerByte { fixed, per_byte } => {
                price("fixed", *fixed)?;
                price("per_byte", *per_byte)
            }
            Cost::Tiered { tiers } => {
                if tiers.is_empty() {
                    return Err(ModelError::NoTiers);
                }
                let mut prev: Option<Tier> = None;
                for t in tiers {
                    price("per_byte", t.per_byte)?;
                    if t.up_to_bps.is_nan() || t.up_to_bps <= 0.0 {
                        return Err(ModelError::Negative("up_to_bps", t.up_to_bps));
                    }
                    if let Some(p) = prev {
                        if t.up_to_bps <= p.up_to_bps || t.per_byte < p.per_byte {
                            return Err(ModelError::TiersNotConvex);
                        }
                    }
                    prev = Some(*t);
                }
                Ok(())
            }
        }
    }

    /// The cost per second of carrying `x` bit/s. Beyond the last tier the last price holds.
    pub fn value(&self, x: f64) -> f64 {
        let fixed = match self {
            Cost::FixedPlusPerByte { fixed, .. } => *fixed,
            _ => 0.0,
        };
        let mut rest = x.max(0.0);
        let mut total = fixed;
        for s in self.segments(f64::INFINITY) {
            let take = rest.min(s.width_bps);
            total += s.price * take;
            rest -= take;
            if rest <= 0.0 {
                break;
            }
        }
        total
    }

    /// The path's rate up to `capacity_bps` as stretches of non-decreasing price.
    pub fn segments(&self, capacity_bps: f64) -> Vec<Segment> {
        let cap = capacity_bps.max(0.0);
        match self {
            Cost::PerByte { per_byte } | Cost::FixedPlusPerByte { per_byte, .. } => {
                vec![Segment {
                    price: per_byte / 8.0,
                    width_bps: cap,
                }]
            }
            Cost::Tiered { tiers } => {
                let mut out = Vec::with_capacity(tiers.len());
                let mut from = 0.0;
                for (i, t) in tiers.iter().enumerate() {
                    let last = i + 1 == tiers.len();
                    let to = if last { cap } else { t.up_to_bps.min(cap) };
                    if to > from {
                        out.push(Segment {
                            price: t.per_byte / 8.0,
                            width_bps: to - from,
                        });
                        from = to;
                    }
                    if from >= cap {
                        break;
                    }
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiered() -> Cost {
        Cost::Tiered {
            tiers: vec![
                Tier {
                    up_to_bps: 1e6,
                    per_byte: 8e-9,
                },
                Tier {
                    up_to_bps: 3e6,
                    per_byte: 16e-9,
                },
                Tier {
                    up_to_bps: f64::INFINITY,
                    per_byte: 80e-9,
                },
            ],
        }
    }

    #[test]
    fn costs_add_up_per_band() {
        let c = Cost::FixedPlusPerByte {
            fixed: 5.0,
            per_byte: 8.0,
        };
        assert_eq!(c.value(0.0), 5.0);
        assert_eq!(c.value(10.0), 15.0);
        let t = tiered();
        assert!((t.value(2e6) - (1e6 * 1e-9 + 1e6 * 2e-9)).abs() < 1e-12);
        assert!((t.value(4e6) - (1e-3 + 4e-3 + 1e6 * 1e-8)).abs() < 1e-12);
        let s = t.segments(2e6);
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].width_bps, 1e6);
    }

    #[test]
    fn tiers_must_rise_and_prices_must_not_be_negative() {
        assert!(tiered().validate().is_ok());
        let cheaper_with_volume = Cost::Tiered {
            tiers: vec![
                Tier {
                    up_to_bps: 1e6,
                    per_byte: 2.0,
                },
                Tier {
                    up_to_bps: f64::INFINITY,
                    per_byte: 1.0,
                },
            ],
        };
        assert!(matches!(
            cheaper_with_volume.validate(),
            Err(ModelError::TiersNotConvex)
        ));
        assert!(Cost::PerByte { per_byte: -1.0 }.validate().is_err());
        assert!(Cost::Tiered { tiers: vec![] }.validate().is_err());
    }
}
