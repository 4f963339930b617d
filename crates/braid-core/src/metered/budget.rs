//! A metered path's budget for one scheduling interval (oSCTP §IV-F: "the 3G path is used
//! only until `x_g^i` bits are transmitted in each scheduling interval").

/// Bytes a metered path may still send in the current interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalBudget {
    allowance: u64,
    spent: u64,
}

impl IntervalBudget {
    /// A budget of `allowance` bytes, nothing spent.
    pub fn new(allowance: u64) -> IntervalBudget {
        IntervalBudget {
            allowance,
            spent: 0,
        }
    }

    /// The budget of `rate_bps` held for `interval_s` seconds, in whole bytes.
    pub fn for_rate(rate_bps: f64, interval_s: f64) -> IntervalBudget {
        let bytes = (rate_bps.max(0.0) * interval_s.max(0.0) / 8.0).floor();
        IntervalBudget::new(if bytes.is_finite() {
            bytes.min(u64::MAX as f64) as u64
        } else {
            0
        })
    }

    /// The budget re-planned part way through its interval: what was spent stays spent,
    /// and `rate_bps` is allowed for the `rest_s` seconds left.
    pub fn replanned(&self, rate_bps: f64, rest_s: f64) -> IntervalBudget {
        IntervalBudget {
            allowance: self
                .spent
                .saturating_add(IntervalBudget::for_rate(rate_bps, rest_s).allowance),
            spent: self.spent,
        }
    }

    /// Whether a datagram of `bytes` fits in what is left.
    pub fn may_send(&self, bytes: u64) -> bool {
        self.spent.saturating_add(bytes) <= self.allowance
    }

    /// Counts `bytes` sent.
    pub fn on_sent(&mut self, bytes: u64) {
        self.spent = self.spent.saturating_add(bytes);
    }

    pub fn allowance(&self) -> u64 {
        self.allowance
    }

    pub fn spent(&self) -> u64 {
        self.spent
    }

    pub fn remaining(&self) -> u64 {
        self.allowance.saturating_sub(self.spent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_the_allowance() {
        let mut b = IntervalBudget::for_rate(400e3, 1.0);
        assert_eq!(b.allowance(), 50_000);
        let mut sent = 0;
        while b.may_send(1500) {
            b.on_sent(1500);
            sent += 1;
        }
        assert_eq!(sent, 33);
        assert_eq!(b.remaining(), 500);
        assert!(b.may_send(500));
        assert!(!IntervalBudget::for_rate(f64::NAN, 1.0).may_send(1));
        // Re-planned half way at 800 kbit/s: what was spent, and 50 kB more.
        let r = b.replanned(800e3, 0.5);
        assert_eq!((r.spent(), r.allowance()), (49_500, 99_500));
        assert_eq!(IntervalBudget::new(10).replanned(0.0, 1.0).allowance(), 0);
    }
}
