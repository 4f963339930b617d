//! The block-level error rate (BIER) estimator of HTPPR §3.3, equations 1-3.
//!
//! For the i-th packet received at `t_i` with `b_i` of its blocks bad:
//!
//! ```text
//! V_i = β·|t_i − t_{i−1} − T_{i−1}| + (1 − β)·V_{i−1}          (1)
//! T_i = α·(t_i − t_{i−1}) + (1 − α)·T_{i−1}                    (2)
//! w_i = exp(−|t_i − t_{i−1} − T_i| / V_i)
//! B_i = w_i·b_i + (1 − w_i)·B_{i−1}                            (3)
//! ```
//!
//! with α = 1/8 and β = 1/4 (§3.3). A packet whose spacing is typical counts fully; one that
//! came after an unusual gap counts less. The paper leaves the start open: braid takes
//! `B_0 = b_0`, and on the first interval `T = Δ`, `V = Δ/2` (as RFC 6298 starts RTTVAR);
//! with `V = 0` (only after gaps all equal) the weight is 1. Since `V_i ≥ β·|Δ − T_{i−1}|`
//! and `|Δ − T_i| = (1 − α)·|Δ − T_{i−1}|`, a weight is never below `e^{−(1−α)/β}` ≈ 0.03.
//!
//! `b_i` is the fraction of bad blocks over the last [`SAMPLE_PACKETS`] judged packets
//! ([`BlockWindow`]), not over packet i alone: §3.3 says a single packet's blocks are too few,
//! that "4 packets worth allows a 1%-granularity estimate", and calls the whole an EWMA "over
//! a small window of recently received packets". Taken alone, eq. 3 gives a packet of typical
//! spacing weight ~1, so `B` would follow single packets (at 3% of 44 blocks bad, a quarter of
//! packets have none) and the autorate would step up after every clean one.
//!
//! The paper computes the instantaneous BIER "using ACKs and ARQs", at the sender; braid runs
//! the estimator at the receiver, which knows `t_i`, and reports `B` in its feedback (a 6-byte
//! `Bier` item per message). As in the paper, NACKed (lost) packets are not samples.
//!
//! `t_i` is known when the packet arrives but `b_i` only once its CRCs are judged, which for a
//! damaged packet is a tortoise round trip later; so [`BierEstimator::on_arrival`] applies
//! equations 1-2 and returns `w_i`, and [`BierEstimator::on_sample`] applies equation 3. The
//! receiver holds a judged packet's sample until every earlier packet is judged, so that
//! samples enter eq. 3 in packet order.

use crate::Instant;

/// α of equation 2 (§3.3).
pub const ALPHA: f64 = 1.0 / 8.0;
/// β of equation 1 (§3.3).
pub const BETA: f64 = 1.0 / 4.0;

/// Packets over which the instantaneous `b_i` is taken (§3.3: 4 packets give 1% granularity).
pub const SAMPLE_PACKETS: usize = 4;

/// The instantaneous block error rate `b_i`: bad blocks over blocks in the last
/// [`SAMPLE_PACKETS`] judged packets.
#[derive(Clone, Debug, Default)]
pub struct BlockWindow {
    /// (bad, total) per packet, oldest first.
    packets: std::collections::VecDeque<(u32, u32)>,
}

impl BlockWindow {
    /// Adds a packet with `bad` of its `total` blocks bad; returns `b_i`.
    pub fn push(&mut self, bad: u32, total: u32) -> f64 {
        if self.packets.len() == SAMPLE_PACKETS {
            self.packets.pop_front();
        }
        self.packets.push_back((bad.min(total), total));
        let (bad, total) = self.packets.iter().fold((0u64, 0u64), |(b, t), &(pb, pt)| {
            (b + pb as u64, t + pt as u64)
        });
        if total == 0 {
            0.0
        } else {
            bad as f64 / total as f64
        }
    }

    pub fn clear(&mut self) {
        self.packets.clear();
    }
}

/// Equations 1-3 for one sender-receiver pair at one bit rate.
#[derive(Clone, Debug, Default)]
pub struct BierEstimator {
    last_arrival: Option<Instant>,
    /// T_i, seconds.
    mean_gap: Option<f64>,
    /// V_i, seconds.
    gap_dev: f64,
    /// B_i.
    bier: Option<f64>,
    samples: u32,
}

impl BierEstimator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Equations 1 and 2 for a packet that arrived at `t`; returns its weight `w_i` in eq. 3.
    pub fn on_arrival(&mut self, t: Instant) -> f64 {
        let Some(last) = self.last_arrival.replace(t) else {
            return 1.0;
        };
        let gap = (t - last).as_secs_f64();
        let Some(mean) = self.mean_gap else {
            self.mean_gap = Some(gap);
            self.gap_dev = gap / 2.0;
            return 1.0;
        };
        self.gap_dev = BETA * (gap - mean).abs() + (1.0 - BETA) * self.gap_dev;
        let mean = ALPHA * gap + (1.0 - ALPHA) * mean;
        self.mean_gap = Some(mean);
        let deviation = (gap - mean).abs();
        if self.gap_dev > 0.0 {
            (-deviation / self.gap_dev).exp()
        } else {
            1.0
        }
    }

    /// Equation 3: the packet whose arrival gave `weight` had a fraction `bad` of bad blocks.
    pub fn on_sample(&mut self, weight: f64, bad: f64) {
        let bad = bad.clamp(0.0, 1.0);
        let weight = weight.clamp(0.0, 1.0);
        self.bier = Some(match self.bier {
            None => bad,
            Some(prev) => weight * bad + (1.0 - weight) * prev,
        });
        self.samples = self.samples.saturating_add(1);
    }

    /// B_i, once a sample has been taken.
    pub fn estimate(&self) -> Option<f64> {
        self.bier
    }

    /// Samples taken since the last reset.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Forgets the BIER and its sample count (the bit rate changed: the old BIER says little
    /// about the new one). The arrival statistics stay: they describe the channel's timing.
    pub fn reset(&mut self) {
        self.bier = None;
        self.samples = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn follows_equations_1_to_3_by_hand() {
        let mut e = BierEstimator::new();
        // t0 = 0: B_0 = b_0.
        let w = e.on_arrival(at(0));
        e.on_sample(w, 0.1);
        assert_eq!(e.estimate(), Some(0.1));
        // t1 = 10 ms: T = 10, V = 5, w = 1.
        let w = e.on_arrival(at(10));
        assert_eq!(w, 1.0);
        e.on_sample(w, 0.2);
        assert!((e.estimate().unwrap() - 0.2).abs() < 1e-12);
        // t2 = 20 ms: V = 0.25·0 + 0.75·5 = 3.75 ms, T = 10 ms, w = e^0 = 1.
        let w = e.on_arrival(at(20));
        assert!((w - 1.0).abs() < 1e-12);
        e.on_sample(w, 0.0);
        assert!(e.estimate().unwrap().abs() < 1e-12);
        // t3 = 35 ms: V = 0.25·5 + 0.75·3.75 = 4.0625 ms, T = 15/8 + 70/8 = 10.625 ms,
        // w = exp(−4.375 / 4.0625) = 0.340642…; B = w·0.5 + (1 − w)·0 = 0.170321…
        let w = e.on_arrival(at(35));
        assert!((w - 0.340_642).abs() < 1e-6, "w = {w}");
        e.on_sample(w, 0.5);
        assert!((e.estimate().unwrap() - 0.170_321).abs() < 1e-6);
        assert_eq!(e.samples(), 4);
    }

    #[test]
    fn an_unusual_gap_counts_less() {
        let mut regular = BierEstimator::new();
        let mut late = BierEstimator::new();
        for i in 0..20 {
            for e in [&mut regular, &mut late] {
                let w = e.on_arrival(at(i * 2 + (i % 2)));
                e.on_sample(w, 0.05);
            }
        }
        // The same damage, after a typical gap and after a gap ten times too long.
        let w = regular.on_arrival(at(40));
        regular.on_sample(w, 0.5);
        let w_late = late.on_arrival(at(60));
        late.on_sample(w_late, 0.5);
        assert!(w_late < 0.1 && w > 0.3, "w {w}, late {w_late}");
        assert!(regular.estimate().unwrap() > 0.2);
        assert!(late.estimate().unwrap() < 0.08);
    }

    #[test]
    fn settles_on_a_steady_error_rate() {
        let mut e = BierEstimator::new();
        // Jittered arrivals, a repeating pattern of damage averaging 1/20.
        let pattern = [0.0, 0.1, 0.0, 0.05, 0.1, 0.0, 0.0, 0.15, 0.0, 0.1];
        let mut t = 0;
        for i in 0..400 {
            t += 1000 + (i * 37 % 200);
            let w = e.on_arrival(Instant::from_micros(t));
            e.on_sample(w, pattern[i as usize % pattern.len()]);
        }
        let b = e.estimate().unwrap();
        assert!((0.0..=0.15).contains(&b));
        e.reset();
        assert_eq!((e.estimate(), e.samples()), (None, 0));
    }

    #[test]
    fn the_instantaneous_rate_spans_the_last_four_packets() {
        let mut w = BlockWindow::default();
        assert_eq!(w.push(0, 44), 0.0);
        assert_eq!(w.push(4, 44), 4.0 / 88.0);
        w.push(0, 44);
        assert_eq!(w.push(0, 20), 4.0 / 152.0);
        // The fifth packet pushes out the first, the sixth the one with 4 bad blocks.
        assert_eq!(w.push(2, 44), 6.0 / 152.0);
        assert_eq!(w.push(0, 44), 2.0 / 152.0);
        w.clear();
        assert_eq!(w.push(0, 0), 0.0);
    }

    #[test]
    fn weights_lie_between_the_floor_and_one() {
        let mut e = BierEstimator::new();
        // Gaps of exactly 0: V stays 0 and the weight 1.
        for _ in 0..3 {
            assert_eq!(e.on_arrival(at(5)), 1.0);
        }
        // Any gap after that is as far from typical as can be: the floor.
        let floor = (-(1.0 - ALPHA) / BETA).exp();
        assert!((e.on_arrival(at(6)) - floor).abs() < 1e-12);
    }
}
