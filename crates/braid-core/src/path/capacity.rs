//! The receiver's capacity estimate for one path, from packet trains in the data itself
//! (PluriBus §4.2, "Estimating Queue Length", second half).
//!
//! The receiver measures, over fixed intervals (500 ms in the paper), the rate at which
//! datagrams arrive and the rate at which they were sent (from the send timestamps the
//! sender embeds). Only intervals whose send rate exceeds the current estimate say anything
//! about capacity: then the path was the bottleneck and the receive rate is its capacity.
//! When three such intervals in a row show a receive rate above the estimate, the estimate
//! becomes the average of itself and the median of the three; likewise when three in a row
//! show a rate below it. The new estimate is reported to the sender.
//!
//! Two choices the paper leaves open, made here:
//! - Rates are measured over the train inside the interval: bytes after the first datagram
//!   divided by the span from the first to the last arrival (and from the first to the last
//!   send timestamp), so a train that fills only part of an interval is not diluted by the
//!   idle rest. At least [`MIN_TRAIN`] datagrams are needed.
//! - Intervals that do not qualify are skipped: they neither count towards nor break a run
//!   of three. A qualifying interval in the opposite direction starts a new run.
//!
//! One deviation: an interval also qualifies when its send rate exceeds its receive rate by
//! [`COMPRESSION`] (the path slowed the train down, so it was the bottleneck). Under the
//! paper's rule alone an over-estimate is never corrected while the sender stays below the
//! (wrong) estimate, even as the real path queues up behind it; the session tests show the
//! case (`capacity_estimate_follows_a_slower_path`).

use std::time::Duration;

use crate::Instant;

/// Fewest datagrams in an interval for its rates to count.
pub const MIN_TRAIN: u32 = 3;
/// Qualifying intervals in a row needed to move the estimate.
pub const RUN: usize = 3;
/// A train sent this much faster than it arrived shows the path's capacity.
pub const COMPRESSION: f64 = 1.2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Above,
    Below,
}

/// One interval's train.
#[derive(Clone, Copy, Debug)]
struct Train {
    start: Instant,
    first_arrival: Instant,
    last_arrival: Instant,
    first_sent: u32,
    last_sent: u32,
    /// Bytes of every datagram after the first.
    bytes: u64,
    count: u32,
}

/// Receiver-side capacity estimator of one path.
#[derive(Clone, Debug)]
pub struct CapacityEstimator {
    estimate_bps: u64,
    interval: Duration,
    train: Option<Train>,
    run: Option<(Direction, [u64; RUN], usize)>,
}

impl CapacityEstimator {
    /// Starts from the configured expected capacity ("We bootstrap nodes with expected
    /// capacity of the paths").
    pub fn new(initial_bps: u64, interval: Duration) -> Self {
        CapacityEstimator {
            estimate_bps: initial_bps.max(1),
            interval,
            train: None,
            run: None,
        }
    }

    /// Current estimate, bits per second.
    pub fn estimate_bps(&self) -> u64 {
        self.estimate_bps
    }

    /// Accounts for a datagram of `wire_bytes` that arrived at `now` and was sent at the
    /// sender's timestamp `sent` (µs, wrapping). Returns the new estimate when it changed.
    pub fn on_datagram(&mut self, now: Instant, sent: u32, wire_bytes: usize) -> Option<u64> {
        let mut changed = None;
        if let Some(t) = self.train {
            if now.saturating_duration_since(t.start) >= self.interval {
                changed = self.close(t);
                self.train = None;
            }
        }
        match &mut self.train {
            None => {
                self.train = Some(Train {
                    start: now,
                    first_arrival: now,
                    last_arrival: now,
                    first_sent: sent,
                    last_sent: sent,
                    bytes: 0,
                    count: 1,
                })
            }
            Some(t) => {
                t.last_arrival = now;
                t.last_sent = sent;
                t.bytes += wire_bytes as u64;
                t.count += 1;
            }
        }
        changed
    }

    fn close(&mut self, t: Train) -> Option<u64> {
        if t.count < MIN_TRAIN {
            return None;
        }
        let recv_us = t
            .last_arrival
            .saturating_duration_since(t.first_arrival)
            .as_micros();
        let sent_us = u128::from(t.last_sent.wrapping_sub(t.first_sent));
        if recv_us == 0 {
            return None;
        }
        let bits = u128::from(t.bytes) * 8;
        let receive_bps = u64::try_from(bits * 1_000_000 / recv_us).unwrap_or(u64::MAX);
        // A train sent within one microsecond was sent faster than any capacity.
        let send_bps = (bits * 1_000_000)
            .checked_div(sent_us)
            .map_or(u64::MAX, |v| u64::try_from(v).unwrap_or(u64::MAX));
        let compressed = send_bps as f64 > receive_bps as f64 * COMPRESSION;
        if send_bps <= self.estimate_bps && !compressed {
            return None;
        }
        let dir = match receive_bps.cmp(&self.estimate_bps) {
            std::cmp::Ordering::Greater => Direction::Above,
            std::cmp::Ordering::Less => Direction::Below,
            std::cmp::Ordering::Equal => {
                self.run = None;
                return None;
            }
        };
        let (run_dir, rates, n) = match &mut self.run {
            Some(run) if run.0 == dir => run,
            _ => self.run.insert((dir, [0; RUN], 0)),
        };
        debug_assert_eq!(*run_dir, dir);
        rates[*n] = receive_bps;
        *n += 1;
        if *n < RUN {
            return None;
        }
        let mut sorted = *rates;
        sorted.sort_unstable();
        let median = sorted[RUN / 2];
        self.run = None;
        let new = ((u128::from(self.estimate_bps) + u128::from(median)) / 2) as u64;
        let new = new.max(1);
        if new == self.estimate_bps {
            None
        } else {
            self.estimate_bps = new;
            Some(new)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000;

    /// Feeds one 500 ms interval with a train: `n` datagrams of 1000 bytes sent every
    /// `send_gap_us` and arriving every `recv_gap_us`, starting at `t0_ms`.
    fn interval(
        c: &mut CapacityEstimator,
        t0_ms: u64,
        n: u64,
        send_gap_us: u64,
        recv_gap_us: u64,
    ) -> Option<u64> {
        let mut changed = None;
        for i in 0..n {
            let now = Instant::from_micros(t0_ms * MS + i * recv_gap_us);
            let sent = (t0_ms * MS + i * send_gap_us) as u32;
            if let Some(v) = c.on_datagram(now, sent, 1000) {
                changed = Some(v);
            }
        }
        changed
    }

    #[test]
    fn three_intervals_above_raise_to_average_with_median() {
        // Estimate 1 Mbit/s; the path really carries 2 Mbit/s (1000 B every 4 ms) and the
        // sender sends at 8 Mbit/s (every 1 ms).
        let mut c = CapacityEstimator::new(1_000_000, Duration::from_millis(500));
        assert_eq!(interval(&mut c, 0, 100, 1000, 4000), None);
        assert_eq!(interval(&mut c, 500, 100, 1000, 4000), None);
        assert_eq!(interval(&mut c, 1000, 100, 1000, 4000), None);
        // The third interval is closed by the first datagram of the fourth.
        let changed = interval(&mut c, 1500, 1, 1000, 4000);
        assert_eq!(changed, Some(1_500_000));
        assert_eq!(c.estimate_bps(), 1_500_000);
    }

    #[test]
    fn three_intervals_below_lower_it() {
        let mut c = CapacityEstimator::new(4_000_000, Duration::from_millis(500));
        // Sent at 8 Mbit/s, received at 2 Mbit/s.
        for k in 0..3 {
            assert_eq!(interval(&mut c, k * 500, 100, 1000, 4000), None);
        }
        assert_eq!(interval(&mut c, 1500, 1, 1000, 4000), Some(3_000_000));
    }

    #[test]
    fn compressed_trains_correct_an_overestimate() {
        // Estimate 10 Mbit/s, sender at 4 Mbit/s (2 ms gaps), path at 2 Mbit/s (4 ms).
        let mut c = CapacityEstimator::new(10_000_000, Duration::from_millis(500));
        for k in 0..3 {
            assert_eq!(interval(&mut c, k * 500, 100, 2000, 4000), None);
        }
        assert_eq!(interval(&mut c, 1500, 1, 2000, 4000), Some(6_000_000));
    }

    #[test]
    fn slow_senders_say_nothing() {
        // Sent at 1 Mbit/s, below the 4 Mbit/s estimate: never qualifies.
        let mut c = CapacityEstimator::new(4_000_000, Duration::from_millis(500));
        for k in 0..10 {
            assert_eq!(interval(&mut c, k * 500, 60, 8000, 8000), None);
        }
        assert_eq!(c.estimate_bps(), 4_000_000);
    }

    #[test]
    fn skipped_intervals_do_not_break_a_run_but_opposite_ones_do() {
        let mut c = CapacityEstimator::new(1_000_000, Duration::from_millis(500));
        assert_eq!(interval(&mut c, 0, 100, 1000, 4000), None); // above
        assert_eq!(interval(&mut c, 500, 10, 40_000, 40_000), None); // slow sender: skipped
        assert_eq!(interval(&mut c, 1000, 100, 1000, 4000), None); // above
        assert_eq!(interval(&mut c, 1500, 30, 100, 16_000), None); // below: new run
        assert_eq!(interval(&mut c, 2000, 100, 1000, 4000), None); // above: new run (1)
        assert_eq!(interval(&mut c, 2500, 100, 1000, 4000), None); // (2)
        assert_eq!(interval(&mut c, 3000, 100, 1000, 4000), None); // (3), closed next
        assert_eq!(interval(&mut c, 3500, 1, 1000, 4000), Some(1_500_000));
    }

    #[test]
    fn converges_on_a_steady_path() {
        // Repeated runs halve the error each time.
        let mut c = CapacityEstimator::new(500_000, Duration::from_millis(500));
        for k in 0..60 {
            interval(&mut c, k * 500, 100, 1000, 4000);
        }
        let err = (c.estimate_bps() as f64 - 2_000_000.0).abs() / 2_000_000.0;
        assert!(err < 0.01, "{}", c.estimate_bps());
    }
}
