//! The exact optimizer: the rates over N paths that maximize the benefit
//! `H = U(Σ x_j) − Σ C_j(x_j)` with `0 <= x_j <= X_j` (oSCTP §III-A, for any of braid's
//! concave utilities and convex costs, not only Strategy 1's).
//!
//! Water-filling: every path's cost is piecewise linear, so the paths together offer rate
//! as stretches of constant price. Taking them cheapest first, a stretch is taken while
//! the utility's marginal value exceeds its price, and the last one up to where the two
//! meet ([`Utility::demand`]). Because prices only rise and the marginal utility only
//! falls, nothing later could pay, so this is the optimum, not an approximation. Free
//! stretches are always taken in full (the paper never throttles WiFi). Ties between
//! paths of equal price go to the lower path index.

use super::{Cost, Utility};

/// One path as the optimizer sees it for an interval.
#[derive(Clone, Copy, Debug)]
pub struct PathOffer<'a> {
    /// What the path can carry this interval (predicted or measured), bit/s.
    pub capacity_bps: f64,
    pub cost: &'a Cost,
}

/// The benefit-maximizing rate (bit/s) on each path, in the order given.
pub fn optimize(utility: &Utility, paths: &[PathOffer<'_>]) -> Vec<f64> {
    let mut stretches: Vec<(f64, usize, f64)> = paths
        .iter()
        .enumerate()
        .flat_map(|(j, p)| {
            p.cost
                .segments(p.capacity_bps)
                .into_iter()
                .filter(|s| s.width_bps > 0.0)
                .map(move |s| (s.price, j, s.width_bps))
        })
        .collect();
    // Stable and total: by price, then path; a path's own stretches are already in order.
    stretches.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut rates = vec![0.0; paths.len()];
    let mut total = 0.0;
    for (price, j, width) in stretches {
        let take = if price <= 0.0 {
            width
        } else {
            (utility.demand(price) - total).clamp(0.0, width)
        };
        rates[j] += take;
        total += take;
        if take < width {
            break;
        }
    }
    rates
}

/// The benefit `U(Σ x) − Σ C(x)` of `rates` on `paths`.
pub fn benefit(utility: &Utility, paths: &[PathOffer<'_>], rates: &[f64]) -> f64 {
    let total: f64 = rates.iter().sum();
    utility.value(total)
        - paths
            .iter()
            .zip(rates)
            .map(|(p, &x)| p.cost.value(x))
            .sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::super::{strategy1, Tier};
    use super::*;

    /// A deterministic generator for test instances (splitmix64).
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as f64 / u64::MAX as f64
        }
        fn range(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * self.next()
        }
    }

    #[test]
    fn matches_strategy1s_closed_form() {
        let mut g = Gen(20);
        for _ in 0..2000 {
            let cheap_max = if g.next() < 0.4 {
                0.0
            } else {
                g.range(0.0, 3e6)
            };
            let metered_max = g.range(0.0, 1.5e6);
            let k3 = g.range(1e-7, 1e-5); // per bit/s
            let target = g.range(100e3, 3e6);
            let utility = Utility::log_with_target(target, k3);
            let wifi = Cost::FixedPlusPerByte {
                fixed: g.range(0.0, 5.0),
                per_byte: 0.0,
            };
            let cell = Cost::FixedPlusPerByte {
                fixed: g.range(0.0, 5.0),
                per_byte: 8.0 * k3,
            };
            let paths = [
                PathOffer {
                    capacity_bps: cheap_max,
                    cost: &wifi,
                },
                PathOffer {
                    capacity_bps: metered_max,
                    cost: &cell,
                },
            ];
            let got = optimize(&utility, &paths);
            let want = strategy1(cheap_max, metered_max, target);
            assert_eq!(got[0], want.cheap_bps);
            let tol = 1e-6 * target;
            assert!(
                (got[1] - want.metered_bps).abs() <= tol,
                "{got:?} vs {want:?}"
            );
        }
    }

    fn random_cost(g: &mut Gen) -> Cost {
        match (g.next() * 3.0) as u32 {
            0 => Cost::PerByte {
                per_byte: g.range(0.0, 8e-6),
            },
            1 => Cost::FixedPlusPerByte {
                fixed: g.range(0.0, 2.0),
                per_byte: g.range(0.0, 8e-6),
            },
            _ => {
                let p1 = g.range(0.0, 4e-6);
                let p2 = p1 + g.range(0.0, 4e-6);
                let b1 = g.range(1e5, 1e6);
                Cost::Tiered {
                    tiers: vec![
                        Tier {
                            up_to_bps: b1,
                            per_byte: p1,
                        },
                        Tier {
                            up_to_bps: b1 + g.range(1e5, 1e6),
                            per_byte: p2,
                        },
                        Tier {
                            up_to_bps: f64::INFINITY,
                            per_byte: p2 + g.range(0.0, 8e-6),
                        },
                    ],
                }
            }
        }
    }

    fn random_utility(g: &mut Gen) -> Utility {
        match (g.next() * 3.0) as u32 {
            0 => Utility::Log {
                weight: g.range(0.01, 2.0),
            },
            1 => Utility::Threshold {
                target_bps: g.range(1e5, 3e6),
                weight: g.range(0.0, 1e-6),
            },
            _ => Utility::Linear {
                weight: g.range(0.0, 1e-6),
            },
        }
    }

    /// The best benefit on a grid of `steps + 1` rates per path.
    fn brute_force(utility: &Utility, paths: &[PathOffer<'_>], steps: usize) -> f64 {
        let mut best = f64::NEG_INFINITY;
        let n = paths.len();
        let mut idx = vec![0usize; n];
        loop {
            let rates: Vec<f64> = idx
                .iter()
                .zip(paths)
                .map(|(&i, p)| p.capacity_bps * i as f64 / steps as f64)
                .collect();
            best = best.max(benefit(utility, paths, &rates));
            let mut k = 0;
            while k < n {
                idx[k] += 1;
                if idx[k] <= steps {
                    break;
                }
                idx[k] = 0;
                k += 1;
            }
            if k == n {
                return best;
            }
        }
    }

    #[test]
    fn no_grid_point_beats_it() {
        let mut g = Gen(7);
        for case in 0..300 {
            let n = 1 + case % 3;
            let costs: Vec<Cost> = (0..n).map(|_| random_cost(&mut g)).collect();
            for c in &costs {
                c.validate().unwrap();
            }
            let caps: Vec<f64> = (0..n).map(|_| g.range(1e5, 3e6)).collect();
            let utility = random_utility(&mut g);
            let paths: Vec<PathOffer<'_>> = costs
                .iter()
                .zip(&caps)
                .map(|(cost, &capacity_bps)| PathOffer { capacity_bps, cost })
                .collect();
            let rates = optimize(&utility, &paths);
            for (x, p) in rates.iter().zip(&paths) {
                assert!(*x >= 0.0 && *x <= p.capacity_bps * (1.0 + 1e-12));
            }
            let ours = benefit(&utility, &paths, &rates);
            let steps = if n == 3 { 40 } else { 200 };
            let grid = brute_force(&utility, &paths, steps);
            let scale = grid.abs().max(1e-9);
            assert!(
                ours >= grid - 1e-9 * scale,
                "case {case}: optimizer {ours} < grid {grid} ({utility:?}, {costs:?}, {caps:?}, {rates:?})"
            );
        }
    }

    #[test]
    fn a_threshold_stream_takes_only_its_target_from_the_metered_path() {
        let utility = Utility::Threshold {
            target_bps: 2e6,
            weight: 1e-6,
        };
        let wifi = Cost::FREE;
        let cell = Cost::PerByte { per_byte: 1e-6 };
        let rates = optimize(
            &utility,
            &[
                PathOffer {
                    capacity_bps: 0.5e6,
                    cost: &wifi,
                },
                PathOffer {
                    capacity_bps: 5e6,
                    cost: &cell,
                },
            ],
        );
        assert_eq!(rates, vec![0.5e6, 1.5e6]);
    }
}
