//! Per-path congestion control in packet mode: how many bytes may be unacknowledged on a
//! path. The window is the path's delivery rate times its feedback delay plus a queue
//! allowance, `rate × (feedback + QUEUE_TARGET)`: each path keeps about [`QUEUE_TARGET`]
//! of queue at its bottleneck whatever its rate does, and what no path has room for waits
//! in the session's send queue, whose drop-tail gives the inner TCP its congestion signal,
//! instead of overflowing a bottleneck whose rate just fell. Sending is clocked by the
//! acknowledgements, so a path that slows tenfold is sent a tenth as much within a round
//! trip, where the receiver's capacity estimate (PluriBus §4.2, over 500 ms intervals and
//! three of them to move) takes seconds.
//!
//! The delivery rate is measured as BBR measures it (draft-cheng-iccrg-delivery-rate-
//! estimation): each datagram remembers, when sent, the bytes acknowledged so far and when;
//! when the peer's acknowledgement of it arrives, the bytes acknowledged since over the
//! longer of the send and the acknowledgement intervals is one sample. The estimate is the
//! largest sample of the last [`RATE_WINDOW`] (bunched acknowledgements make single
//! samples read low), not BBR's ten round trips: a cellular link's rate falls tenfold
//! within a second. A sample measures the link only when the path was busy, its window
//! nearly full when the datagram was sent; other samples only raise the estimate.
//!
//! While the bottleneck shows no queue (the peer reports the wait of the datagram it
//! acknowledges) the window also allows the path's capacity estimate
//! (the peer's, once measured): light traffic (web flows) delivers at its own pace, and a
//! window from those samples alone held the next burst back (never-worse, capacity 20:1,
//! web 0.93 -> 0.87 of the best path). A standing queue means the samples measure the link,
//! and the window follows them alone.
//!
//! The queue allowance is [`QUEUE_TARGET`] unless the scheduler asks for more: delay-based
//! lets a path keep as much queue as equalizing it with the slowest live path needs, up to
//! its queue cap (`sched::delay`). [`QUEUE_TARGET`] and the send queue's limit
//! (`sched::delay::HOLD_MAX`) were set on the recorded pairs of issue 18's table against
//! never-worse (docs/benchmarks.md, "Real links"): 40-70 ms drops least at cellular
//! bottlenecks (whose drop-tail, sized at the trace's mean rate, is short in time when
//! the rate is high), but a short path beside a long one (never-worse's fast + slow lossy,
//! 5 and 400 ms) needs its queue: held to 70 ms, braid fell to 0.83 of the fast path
//! alone, its queue moved into the send queue, which the inner TCP overflowed.
//!
//! This is the `path_cc = "rate"` controller, the default. `"loss-delay"` multiplies its
//! window by the factor of [`super::backoff`], which a loss at the path's own bottleneck
//! or a long bottleneck wait cuts: this window has no loss response of its own.

use std::time::Duration;

use crate::Instant;

/// Queue each path's window leaves at its bottleneck, beyond the delivery rate's
/// feedback delay.
pub const QUEUE_TARGET: Duration = Duration::from_millis(70);
/// How long a delivery-rate sample counts towards the estimate (its largest sample).
pub const RATE_WINDOW: Duration = Duration::from_millis(400);
/// Reported bottleneck waits below this count as no queue: a lone datagram on a recorded
/// LTE link waits up to a few milliseconds for the link's next delivery opportunity
/// (`sparse_uplink_traffic_keeps_a_recorded_lte_uplinks_capacity` in braid-sim: with 5 ms
/// the demo's sparse uplink traffic sized its windows by its own pace).
pub const NO_QUEUE: Duration = Duration::from_millis(20);
/// The smallest window, bytes: a path always carries a few datagrams, so that its rate
/// and liveness keep being measured.
pub const MIN_WINDOW: u64 = 4 * 1500;

const SLOTS: usize = 4;

/// One path's delivery rate and the window it gives.
#[derive(Clone, Copy, Debug, Default)]
pub struct PathWindow {
    /// Largest sample per quarter of [`RATE_WINDOW`]: (slot start, bytes per second).
    slots: [(Option<Instant>, f64); SLOTS],
    /// Whether the latest acknowledged datagram waited at the bottleneck.
    queued: bool,
}

/// What a datagram recorded when it was sent, for its delivery-rate sample.
#[derive(Clone, Copy, Debug)]
pub struct SendState {
    /// Bytes acknowledged on the path when it was sent.
    pub delivered: u64,
    /// When the newest acknowledgement before its send arrived (its send instant if none).
    pub delivered_at: Instant,
    /// When the datagram that acknowledgement named was sent (its send instant if none).
    pub first_sent: Instant,
    /// Whether the path's window was (nearly) full when it was sent.
    pub window_limited: bool,
}

impl PathWindow {
    /// The delivery-rate estimate, bytes per second; `None` before the first sample.
    pub fn rate(&self, now: Instant) -> Option<f64> {
        self.slots
            .iter()
            .filter(|(at, _)| at.is_some_and(|t| now.saturating_duration_since(t) < RATE_WINDOW))
            .map(|&(_, r)| r)
            .reduce(f64::max)
            .or_else(|| self.latest())
    }

    /// Until when [`PathWindow::rate`] keeps its value at `now` with no new sample: the
    /// next instant a sample leaves [`RATE_WINDOW`]. `None` when none will.
    pub fn rate_steady_until(&self, now: Instant) -> Option<Instant> {
        self.slots
            .iter()
            .filter_map(|&(at, _)| Some(at? + RATE_WINDOW))
            .filter(|&end| end > now)
            .min()
    }

    /// The newest sample kept, whatever its age (a path idle for longer than the window
    /// keeps its last rate).
    fn latest(&self) -> Option<f64> {
        self.slots
            .iter()
            .filter_map(|&(at, r)| Some((at?, r)))
            .max_by_key(|&(at, _)| at)
            .map(|(_, r)| r)
    }

    /// The window, bytes, for a path whose feedback delay is `feedback` and whose capacity
    /// (bytes per second) is `capacity` once known, leaving `allowance` of queue. Before the first sample: no bound when
    /// the capacity is known (configured: the queue model alone bounds the path), else
    /// `start` bytes.
    pub fn window(
        &self,
        now: Instant,
        feedback: Option<Duration>,
        start: u64,
        capacity: Option<f64>,
        allowance: Duration,
    ) -> u64 {
        let (Some(rate), Some(fb)) = (self.rate(now), feedback) else {
            return if capacity.is_some() { u64::MAX } else { start };
        };
        let rate = match capacity {
            Some(c) if !self.queued => rate.max(c),
            _ => rate,
        };
        let span = (fb + allowance).as_secs_f64();
        ((rate * span) as u64).max(MIN_WINDOW)
    }

    /// An acknowledgement arrived at `now`: `delivered` bytes acknowledged on the path in
    /// all, the newest acknowledged datagram sent at `sent` with `state`, and the wait it
    /// saw at the bottleneck when the peer says.
    pub fn on_ack(
        &mut self,
        now: Instant,
        delivered: u64,
        sent: Instant,
        state: &SendState,
        queue: Option<Duration>,
    ) {
        if let Some(q) = queue {
            self.queued = q >= NO_QUEUE;
        }
        let send_elapsed = sent.saturating_duration_since(state.first_sent);
        let ack_elapsed = now.saturating_duration_since(state.delivered_at);
        let interval = send_elapsed.max(ack_elapsed);
        let bytes = delivered.saturating_sub(state.delivered);
        if interval < Duration::from_millis(1) || bytes == 0 {
            return;
        }
        let rate = bytes as f64 / interval.as_secs_f64();
        // A sample the sender held low says only that the path carries at least this much.
        let measures_link = state.window_limited;
        if !measures_link && self.rate(now).is_some_and(|r| rate <= r) {
            return;
        }
        let slot_len = RATE_WINDOW / SLOTS as u32;
        let newest = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, &(at, _))| Some((i, at?)))
            .max_by_key(|&(_, at)| at);
        match newest {
            Some((i, at)) if now.saturating_duration_since(at) < slot_len => {
                self.slots[i].1 = self.slots[i].1.max(rate);
            }
            _ => {
                // A new slot replaces the oldest (or an empty one).
                let oldest = (0..SLOTS)
                    .min_by_key(|&i| self.slots[i].0.unwrap_or(Instant::ZERO))
                    .unwrap_or(0);
                self.slots[oldest] = (Some(now), rate);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    fn state(delivered: u64, at: u64, first: u64, limited: bool) -> SendState {
        SendState {
            delivered,
            delivered_at: ms(at),
            first_sent: ms(first),
            window_limited: limited,
        }
    }

    const FB: Option<Duration> = Some(Duration::from_millis(50));

    #[test]
    fn before_the_first_sample_the_start_window_or_no_bound() {
        let w = PathWindow::default();
        assert_eq!(w.window(ms(0), FB, 15_000, None, QUEUE_TARGET), 15_000);
        assert_eq!(
            w.window(ms(0), FB, 15_000, Some(1e6), QUEUE_TARGET),
            u64::MAX
        );
    }

    #[test]
    fn window_is_rate_times_feedback_plus_target() {
        let mut w = PathWindow::default();
        // 125 000 bytes acknowledged over 100 ms: 1.25 MB/s (10 Mbit/s); queue reported.
        w.on_ack(
            ms(200),
            125_000,
            ms(150),
            &state(0, 100, 50, true),
            Some(Duration::from_millis(20)),
        );
        let r = w.rate(ms(200)).unwrap();
        assert!((r - 1_250_000.0).abs() < 1.0, "{r}");
        // (50 ms + 70 ms) × 1.25 MB/s; with a queue the capacity estimate does not count.
        assert_eq!(w.window(ms(200), FB, 15_000, None, QUEUE_TARGET), 150_000);
        assert_eq!(
            w.window(ms(200), FB, 15_000, Some(2.5e6), QUEUE_TARGET),
            150_000
        );
    }

    #[test]
    fn without_a_queue_the_capacity_estimate_is_a_floor() {
        let mut w = PathWindow::default();
        w.on_ack(
            ms(200),
            125_000,
            ms(150),
            &state(0, 100, 50, true),
            Some(Duration::ZERO),
        );
        assert_eq!(
            w.window(ms(200), FB, 15_000, Some(2.5e6), QUEUE_TARGET),
            300_000
        );
        assert_eq!(
            w.window(ms(200), FB, 15_000, Some(0.5e6), QUEUE_TARGET),
            150_000
        );
    }

    #[test]
    fn a_rate_that_fell_takes_over_after_the_rate_window() {
        let mut w = PathWindow::default();
        let q = Some(Duration::from_millis(30));
        w.on_ack(ms(200), 125_000, ms(150), &state(0, 100, 50, true), q);
        // The link slows to a tenth: samples of 125 kB/s.
        let mut delivered = 125_000;
        for t in (300..=1000).step_by(100) {
            delivered += 12_500;
            w.on_ack(
                ms(t),
                delivered,
                ms(t - 50),
                &state(delivered - 12_500, t - 100, t - 150, true),
                q,
            );
        }
        let r = w.rate(ms(1000)).unwrap();
        assert!((r - 125_000.0).abs() < 1.0, "{r}");
        assert_eq!(
            w.window(ms(1000), FB, 15_000, Some(1.25e6), QUEUE_TARGET),
            15_000
        );
    }

    #[test]
    fn samples_the_sender_held_low_only_raise_the_estimate() {
        let mut w = PathWindow::default();
        w.on_ack(
            ms(200),
            125_000,
            ms(150),
            &state(0, 100, 50, true),
            Some(Duration::from_millis(20)),
        );
        // Light traffic, no queue, window not full: 12.5 kB/s says nothing about the link.
        w.on_ack(
            ms(300),
            126_250,
            ms(250),
            &state(125_000, 200, 150, false),
            Some(Duration::ZERO),
        );
        assert!((w.rate(ms(300)).unwrap() - 1_250_000.0).abs() < 1.0);
        // Long after, with no sample since, the last rate stands.
        assert!((w.rate(ms(5_000)).unwrap() - 1_250_000.0).abs() < 1.0);
    }
}
