//! The sender's estimate of a path's bottleneck queue, kept as the time it needs to drain
//! (PluriBus §4.2, "Estimating Queue Length").
//!
//! The paper updates `Q_new = max(0, Q_old - TimeSinceLastUpdate)` when polled and adds
//! `PacketSize / PathCapacity` after each send. Keeping the instant at which the queue
//! will have drained, `drain_at`, is the same recurrence in closed form: the queue length
//! at `now` is `max(0, drain_at - now)`, and a send moves `drain_at` to
//! `max(drain_at, now) + size / capacity`. No polling is needed to keep it current.

use std::time::Duration;

use crate::Instant;

/// Queue length in drain time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueEstimate {
    drain_at: Instant,
    /// Sum of all corrections applied to `drain_at`, µs (see [`QueueEstimate::correct`]).
    shifted_us: i64,
}

impl QueueEstimate {
    /// Time the bottleneck queue needs to drain at `now` (zero when empty).
    pub fn length(&self, now: Instant) -> Duration {
        self.drain_at.saturating_duration_since(now)
    }

    /// Whether the queue is estimated empty at `now`.
    pub fn is_empty(&self, now: Instant) -> bool {
        self.drain_at <= now
    }

    /// Sum of the corrections applied so far, µs. A datagram's predicted wait plus the
    /// corrections applied since it was sent is what the model now thinks it waited.
    pub fn shifted_us(&self) -> i64 {
        self.shifted_us
    }

    /// Corrects the model by what the receiver saw: a datagram sent at `sent`, for which
    /// the model (as corrected since) predicted a wait of `predicted`, really waited
    /// `actual` at the bottleneck. The difference is applied to the drain instant (the
    /// model and the queue drain at the same rate from there on). PluriBus §4.2 relies on idle periods to reset the
    /// model; under sustained load, drop-tail drops (which the model cannot see) and
    /// capacity errors would otherwise make it drift without bound. Differences within
    /// `tolerance` are noise of the estimates and ignored.
    pub fn correct(
        &mut self,
        now: Instant,
        sent: Instant,
        predicted: Duration,
        actual: Duration,
        tx: Duration,
        tolerance: Duration,
    ) {
        let before = self.drain_at;
        self.apply(now, sent, predicted, actual, tx, tolerance);
        self.shifted_us += self.drain_at.as_micros() as i64 - before.as_micros() as i64;
    }

    fn apply(
        &mut self,
        now: Instant,
        sent: Instant,
        predicted: Duration,
        actual: Duration,
        tx: Duration,
        tolerance: Duration,
    ) {
        if actual + tolerance < predicted {
            // Phantom queue: drain earlier, never below "empty now".
            let shifted = self.drain_at - (predicted - actual);
            self.drain_at = shifted.max(now.min(self.drain_at));
        } else if actual > predicted + tolerance {
            if self.drain_at > now {
                self.drain_at += actual - predicted;
            } else {
                // The model went idle, but the queue held that datagram at least until it
                // was sent.
                self.drain_at = self.drain_at.max(sent + actual + tx);
            }
        }
    }

    /// Starts afresh at `now` with an empty queue (a path that failed and came back: what
    /// was queued is gone). Counted as a correction, so predictions made before stay
    /// comparable.
    pub fn reset(&mut self, now: Instant) {
        let before = self.drain_at;
        self.drain_at = now;
        self.shifted_us += self.drain_at.as_micros() as i64 - before.as_micros() as i64;
    }

    /// Accounts for a datagram of `wire_bytes` (including the encapsulation's headers) sent at
    /// `now` on a path of `capacity_bps`.
    pub fn on_send(&mut self, now: Instant, wire_bytes: usize, capacity_bps: u64) {
        self.drain_at = self.drain_at.max(now) + transmission_time(wire_bytes, capacity_bps);
    }
}

/// `PacketSize / PathCapacity`: the time to serialize `wire_bytes` at `capacity_bps`. A zero
/// capacity counts as one bit per second rather than dividing by zero.
pub fn transmission_time(wire_bytes: usize, capacity_bps: u64) -> Duration {
    let capacity = capacity_bps.max(1);
    // In 64 bits whenever the product fits (any datagram): a 128-bit division is a
    // library call, and this runs for every path on every scheduling decision.
    let us = match (wire_bytes as u64).checked_mul(8_000_000) {
        Some(bit_us) => bit_us / capacity,
        None => {
            let us = wire_bytes as u128 * 8_000_000 / u128::from(capacity);
            u64::try_from(us).unwrap_or(u64::MAX)
        }
    };
    Duration::from_micros(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_papers_recurrence() {
        let mut q = QueueEstimate::default();
        let t0 = Instant::from_millis(1000);
        assert!(q.is_empty(t0));
        // 1500 bytes at 1.2 Mbit/s take 10 ms.
        q.on_send(t0, 1500, 1_200_000);
        assert_eq!(q.length(t0), Duration::from_millis(10));
        q.on_send(t0, 1500, 1_200_000);
        assert_eq!(q.length(t0), Duration::from_millis(20));
        // Polled 5 ms later: Q = max(0, 20 - 5).
        assert_eq!(
            q.length(t0 + Duration::from_millis(5)),
            Duration::from_millis(15)
        );
        // Sent 30 ms later, after the queue drained: Q = 0 + 10.
        let t1 = t0 + Duration::from_millis(30);
        assert!(q.is_empty(t1));
        q.on_send(t1, 1500, 1_200_000);
        assert_eq!(q.length(t1), Duration::from_millis(10));
    }

    #[test]
    fn corrections_follow_the_receivers_observation() {
        let ms = Duration::from_millis;
        let t0 = Instant::from_millis(1000);
        let mut q = QueueEstimate::default();
        // The model thinks 100 ms are queued (say drop-tail dropped some of it)...
        for _ in 0..10 {
            q.on_send(t0, 1500, 1_200_000);
        }
        assert_eq!(q.length(t0), ms(100));
        // ...but a datagram sent at t0 - 10 ms when the model predicted 40 ms waited 10.
        q.correct(t0, t0 - ms(10), ms(40), ms(10), ms(10), ms(2));
        assert_eq!(q.length(t0), ms(70));
        // Small differences are noise.
        q.correct(t0, t0, ms(70), ms(69), ms(10), ms(2));
        assert_eq!(q.length(t0), ms(70));
        // A larger real queue pushes the drain later.
        q.correct(t0, t0, ms(70), ms(90), ms(10), ms(2));
        assert_eq!(q.length(t0), ms(90));
        // A correction never makes the queue negative.
        q.correct(t0, t0, ms(500), ms(0), ms(10), ms(2));
        assert!(q.is_empty(t0));
        // An idle model learns the queue held the datagram until it was sent.
        let mut q = QueueEstimate::default();
        q.correct(t0, t0 - ms(5), ms(0), ms(20), ms(10), ms(2));
        assert_eq!(q.length(t0), ms(25));
    }

    #[test]
    fn transmission_time_is_exact() {
        assert_eq!(
            transmission_time(1250, 10_000_000),
            Duration::from_micros(1000)
        );
        assert_eq!(transmission_time(0, 0), Duration::ZERO);
        assert_eq!(transmission_time(1, 0), Duration::from_secs(8));
        // Past 64 bits, as exact.
        let huge = usize::try_from(u64::MAX / 1000).unwrap_or(usize::MAX);
        let want = huge as u128 * 8_000_000 / 3;
        assert_eq!(
            transmission_time(huge, 3),
            Duration::from_micros(u64::try_from(want).unwrap_or(u64::MAX))
        );
        assert_eq!(
            transmission_time(huge, 1 << 40),
            Duration::from_micros((huge as u128 * 8_000_000 / (1 << 40)) as u64)
        );
    }
}
