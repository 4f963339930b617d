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

    /// Accounts for a datagram of `wire_bytes` (including the encapsulation's headers) sent at
    /// `now` on a path of `capacity_bps`.
    pub fn on_send(&mut self, now: Instant, wire_bytes: usize, capacity_bps: u64) {
        self.drain_at = self.drain_at.max(now) + transmission_time(wire_bytes, capacity_bps);
    }
}

/// `PacketSize / PathCapacity`: the time to serialize `wire_bytes` at `capacity_bps`. A zero
/// capacity counts as one bit per second rather than dividing by zero.
pub fn transmission_time(wire_bytes: usize, capacity_bps: u64) -> Duration {
    let bits = wire_bytes as u128 * 8;
    let us = bits * 1_000_000 / u128::from(capacity_bps.max(1));
    Duration::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
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
    fn transmission_time_is_exact() {
        assert_eq!(
            transmission_time(1250, 10_000_000),
            Duration::from_micros(1000)
        );
        assert_eq!(transmission_time(0, 0), Duration::ZERO);
        assert_eq!(transmission_time(1, 0), Duration::from_secs(8));
    }
}
