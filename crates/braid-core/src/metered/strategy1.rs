//! oSCTP's Strategy 1 in closed form (§III-A, equation 1): log utility, a cheap path of
//! constant cost and a metered one of cost `K2 + K3 x`.
//!
//! Use the cheap path to the full (`x_w = X_w`); if it falls short of the combined
//! throughput target `K4 / K3`, fill the slack from the metered path and no more:
//! `x_g = min(X_g, K4/K3 − X_w)` when `X_w < K4/K3`, else 0. (The paper writes the target
//! `1/K3`, taking `K4 = 1`.) [`super::optimize`] reaches the same rates for these functions
//! and any others; this is the reference it is tested against.

/// The rates (bit/s) Strategy 1 sets on the cheap path and the metered one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Strategy1 {
    pub cheap_bps: f64,
    pub metered_bps: f64,
}

/// Strategy 1 for a cheap path that can carry `cheap_max_bps`, a metered one that can
/// carry `metered_max_bps`, and the combined throughput target `target_bps` (`K4 / K3`).
pub fn strategy1(cheap_max_bps: f64, metered_max_bps: f64, target_bps: f64) -> Strategy1 {
    let metered_bps = if cheap_max_bps < target_bps {
        metered_max_bps.min(target_bps - cheap_max_bps)
    } else {
        0.0
    };
    Strategy1 {
        cheap_bps: cheap_max_bps,
        metered_bps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_the_slack_and_no_more() {
        assert_eq!(strategy1(3e6, 700e3, 900e3).metered_bps, 0.0);
        assert_eq!(strategy1(500e3, 700e3, 900e3).metered_bps, 400e3);
        // The metered link lacks capacity: all of it.
        assert_eq!(strategy1(0.0, 700e3, 2e6).metered_bps, 700e3);
        assert_eq!(strategy1(0.0, 700e3, 2e6).cheap_bps, 0.0);
    }
}
