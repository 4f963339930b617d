//! Background traffic that shares a link's queue: an on/off source whose bursts last a
//! Pareto-distributed time and whose idle periods are fixed (PRISM §8.3.2's "On/Off
//! background traffic ... burst-time ... with a Pareto distribution and a fixed idle-time",
//! the shape of ns-2's `Application/Traffic/Pareto`). During a burst it offers packets at a
//! constant rate; they wait in the same drop-tail queue as the link's own packets and take
//! capacity, so the link's rate and queueing delay both swing, and are never delivered.

use crate::Rng;

use super::config::CrossTrafficConfig;

/// The source's packet arrivals, drawn in order from its own generator.
#[derive(Clone, Debug)]
pub(crate) struct CrossTraffic {
    interval_us: f64,
    pub(crate) packet_bytes: u64,
    idle_us: f64,
    /// Pareto scale (minimum burst) in µs and shape.
    scale_us: f64,
    shape: f64,
    /// The next packet's arrival, and the end of the burst it belongs to, in µs.
    next_us: f64,
    burst_end_us: f64,
    rng: Rng,
}

impl CrossTraffic {
    pub(crate) fn new(cfg: &CrossTrafficConfig, rng: Rng) -> CrossTraffic {
        let packet_bytes = cfg.packet_bytes.unwrap_or(1500);
        let mut c = CrossTraffic {
            interval_us: packet_bytes as f64 * 8.0 / (cfg.rate_kbps * 1e3) * 1e6,
            packet_bytes,
            idle_us: cfg.idle_s * 1e6,
            // A Pareto of shape a > 1 and mean m has scale m (a - 1) / a.
            scale_us: cfg.burst_s * 1e6 * (cfg.shape - 1.0) / cfg.shape,
            shape: cfg.shape,
            next_us: 0.0,
            burst_end_us: 0.0,
            rng,
        };
        // The first burst comes after one idle period.
        c.start_burst(0.0);
        c
    }

    fn start_burst(&mut self, after_us: f64) {
        let u = 1.0 - self.rng.f64(); // (0, 1]
        let burst = self.scale_us / u.powf(1.0 / self.shape);
        self.next_us = after_us + self.idle_us;
        self.burst_end_us = self.next_us + burst;
    }

    /// The arrival time (µs) of the next background packet if it is at or before `now_us`,
    /// and moves past it; `None` once the next one is later.
    pub(crate) fn next_by(&mut self, now_us: u64) -> Option<u64> {
        if self.next_us > now_us as f64 {
            return None;
        }
        let at = self.next_us.round() as u64;
        self.next_us += self.interval_us;
        if self.next_us >= self.burst_end_us {
            self.start_burst(self.burst_end_us);
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(burst_s: f64) -> CrossTrafficConfig {
        CrossTrafficConfig {
            rate_kbps: 400.0,
            burst_s,
            idle_s: 1.0,
            shape: 1.5,
            packet_bytes: None,
        }
    }

    #[test]
    fn offers_its_rate_during_bursts_and_the_expected_mean_over_a_long_run() {
        let mut c = CrossTraffic::new(&cfg(5.0), Rng::new(7));
        let end_us = 20_000_000_000u64; // 20,000 s
        let mut arrivals = Vec::new();
        while let Some(t) = c.next_by(end_us) {
            arrivals.push(t);
        }
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]));
        // Nothing in the first idle second; inside a burst packets are 30 ms apart.
        assert!(arrivals[0] >= 1_000_000);
        assert_eq!(arrivals[1] - arrivals[0], 30_000);
        // Long-run rate: 400 kbit/s × burst / (burst + idle) = 333 kbit/s for a mean burst of
        // 5 s; the Pareto tail (shape 1.5, infinite variance) makes the sample mean wander,
        // so the bound is loose.
        let kbps = arrivals.len() as f64 * 1500.0 * 8.0 / 20_000.0 / 1e3;
        assert!((250.0..400.0).contains(&kbps), "{kbps}");
    }

    #[test]
    fn longer_bursts_mean_more_background_traffic() {
        let count = |burst| {
            let mut c = CrossTraffic::new(&cfg(burst), Rng::new(3));
            std::iter::from_fn(|| c.next_by(2_000_000_000)).count()
        };
        assert!(count(0.5) < count(2.0));
        assert!(count(2.0) < count(10.0));
    }
}
