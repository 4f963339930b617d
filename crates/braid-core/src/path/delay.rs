//! The receiver's estimate of a path's propagation delay plus clock skew (PluriBus §4.3,
//! "Identifying Minimum Delay Path").
//!
//! A datagram sent at the sender's local time `s` on an empty queue arrives at the
//! receiver's local time `r = s + δ + d + size / capacity`, so `d + δ = r - s - size /
//! capacity`. The receiver keeps an exponential average of that quantity over datagrams
//! likely to have seen an empty queue: those arriving at least twice their own transmission
//! time after the previous datagram on the path. The skew δ is the same on every path, so
//! the sender can compare paths without synchronized clocks.
//!
//! A datagram lost on the air just before leaves the same gap as an idle link, though the
//! next one may have queued behind it, so the gap needed grows by one transmission time per
//! datagram missing in between (the path's sequence numbers tell). Without this, a lossy
//! path's propagation delay reads long by about a transmission time.
//!
//! Until the path's capacity has been measured (none configured: it is learned), the
//! empty-queue test cannot be made: at a stand-in capacity far above the link's, every
//! datagram passes it, and queueing delay enters the average, which then never comes down
//! on a saturated path, whose datagrams seldom see an empty queue (prism-fig8, three equal
//! links: one read 80 ms long and carried a third of its share). Meanwhile the estimate is
//! the smallest one-way delay seen, the datagram closest to an empty queue; the average
//! starts from it once the capacity is known.
//!
//! Times are 32-bit microsecond timestamps that wrap; the estimate is kept in the same
//! wrapping space and averaged with wrapping differences. The paper gives no weight for
//! the average; we use 1/8, as TCP does for its smoothed RTT.

use crate::path::queue::transmission_time;
use crate::Instant;

/// Weight of one sample.
pub const DELAY_EWMA_WEIGHT: f64 = 1.0 / 8.0;

/// Receiver-side propagation-delay-plus-skew estimator of one path.
#[derive(Clone, Debug, Default)]
pub struct DelayEstimator {
    /// `d + δ` in µs, wrapping; `None` before the first qualifying datagram.
    estimate: Option<u32>,
    last_arrival: Option<Instant>,
    samples: u64,
}

impl DelayEstimator {
    /// Current estimate of `d + δ`, µs, wrapping like timestamps.
    pub fn estimate(&self) -> Option<u32> {
        self.estimate
    }

    /// Datagrams that qualified as empty-queue samples.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Accounts for a datagram of `wire_bytes` sent at the sender's timestamp `sent` and
    /// received at `now`, on a path whose capacity is estimated at `capacity_bps` (`None`
    /// while it is unknown), after `missing` datagrams of the path that never arrived.
    pub fn on_datagram(
        &mut self,
        now: Instant,
        sent: u32,
        wire_bytes: usize,
        capacity_bps: Option<u64>,
        missing: u32,
    ) {
        let Some(capacity_bps) = capacity_bps else {
            self.last_arrival = Some(now);
            let sample = now.wire_timestamp().wrapping_sub(sent);
            self.samples += 1;
            self.estimate = Some(match self.estimate {
                Some(est) if (est.wrapping_sub(sample) as i32) < 0 => est,
                _ => sample,
            });
            return;
        };
        let tx = transmission_time(wire_bytes, capacity_bps);
        let qualifies = match self.last_arrival {
            None => true,
            Some(prev) => now.saturating_duration_since(prev) >= tx * (2 + missing.min(1000)),
        };
        self.last_arrival = Some(now);
        if !qualifies {
            return;
        }
        let tx_us = u32::try_from(tx.as_micros()).unwrap_or(u32::MAX);
        let sample = now.wire_timestamp().wrapping_sub(sent).wrapping_sub(tx_us);
        self.samples += 1;
        self.estimate = Some(match self.estimate {
            None => sample,
            Some(est) => {
                let diff = f64::from(sample.wrapping_sub(est) as i32);
                est.wrapping_add((diff * DELAY_EWMA_WEIGHT).round() as i32 as u32)
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_delay_plus_skew_from_spaced_datagrams() {
        // d = 40 ms, δ = -5 s (receiver clock behind), 1 Mbit/s, 1250 B (10 ms each).
        let mut e = DelayEstimator::default();
        let skew: i64 = -5_000_000;
        for i in 0..50u64 {
            let s = 10_000_000 + i * 100_000; // every 100 ms: queue always empty
            let r = (s as i64 + skew + 40_000 + 10_000) as u64;
            e.on_datagram(Instant::from_micros(r), s as u32, 1250, Some(1_000_000), 0);
        }
        let est = e.estimate().unwrap();
        assert_eq!(est, (40_000i64 + skew) as i32 as u32);
        assert_eq!(e.samples(), 50);
    }

    #[test]
    fn queued_datagrams_are_not_samples() {
        let mut e = DelayEstimator::default();
        // A back-to-back train on a 1 Mbit/s path: arrivals 10 ms apart = one transmission
        // time, less than twice it: only the first is a sample.
        for i in 0..10u64 {
            let s = 1_000_000u64; // all sent at once
            let r = s + 40_000 + (i + 1) * 10_000;
            e.on_datagram(Instant::from_micros(r), s as u32, 1250, Some(1_000_000), 0);
        }
        assert_eq!(e.samples(), 1);
        assert_eq!(e.estimate(), Some(40_000));
    }

    #[test]
    fn a_loss_before_a_queued_datagram_does_not_make_it_a_sample() {
        let mut e = DelayEstimator::default();
        // Back-to-back at 1 Mbit/s, 10 ms each; the second is lost, the third queued behind
        // it arrives 20 ms after the first: twice a transmission time, but not idle.
        e.on_datagram(
            Instant::from_micros(1_050_000),
            1_000_000,
            1250,
            Some(1_000_000),
            0,
        );
        e.on_datagram(
            Instant::from_micros(1_070_000),
            1_000_000,
            1250,
            Some(1_000_000),
            1,
        );
        assert_eq!(e.samples(), 1);
        assert_eq!(e.estimate(), Some(40_000));
    }

    #[test]
    fn an_unknown_capacity_takes_the_smallest_delay_then_averages_from_it() {
        let mut e = DelayEstimator::default();
        // A saturated 1 Mbit/s path (10 ms per datagram), sent back to back: the queue
        // grows by 5 ms a datagram. With the capacity unknown, the first (empty-queue)
        // delay stands.
        for i in 0..20u64 {
            let s = 1_000_000 + i * 5_000;
            let r = 1_000_000 + 40_000 + (i + 1) * 10_000;
            e.on_datagram(Instant::from_micros(r), s as u32, 1250, None, 0);
        }
        assert_eq!(e.estimate(), Some(50_000));
        // Known now: only spaced datagrams move it, towards d = 40 ms.
        for i in 0..120u64 {
            let s = 2_000_000 + i * 100_000;
            e.on_datagram(
                Instant::from_micros(s + 50_000),
                s as u32,
                1250,
                Some(1_000_000),
                0,
            );
        }
        // Within the average's rounding (a step below 1/8 µs × 8 rounds to nothing).
        let est = e.estimate().unwrap();
        assert!((40_000..=40_004).contains(&est), "{est}");
    }

    #[test]
    fn averages_across_the_wrap() {
        let mut e = DelayEstimator::default();
        // Samples alternate between u32::MAX - 999 and 1000 (i.e. -1000 and +1000 µs).
        for i in 0..200u64 {
            let r = 1_000_000 + i * 100_000;
            let off: i64 = if i % 2 == 0 { -1000 } else { 1000 };
            let s = (r as i64 - off) as u64 as u32;
            e.on_datagram(Instant::from_micros(r), s, 0, Some(1_000_000), 0);
        }
        let v = e.estimate().unwrap() as i32;
        assert!(v.abs() < 200, "{v}");
    }
}
