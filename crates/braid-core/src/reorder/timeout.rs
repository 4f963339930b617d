//! The hole timeout: fixed, as in PluriBus §5 (50 ms), or adapted to the reordering the
//! paths actually produce.
//!
//! A fixed timeout is wrong both ways: on paths whose delays differ by more than it (a 600 ms
//! satellite beside a 20 ms fibre), packets from the slow path arrive after their holes were
//! given up, and the inner TCP sees reordering as loss; on paths of equal delay, a real loss
//! holds everything behind it for the full timeout. The adaptive timeout measures instead:
//! - when a hole fills, the oldest packet waiting behind it has waited `w`: a sample `w`;
//! - when a packet arrives after its hole was given up, the timeout was too short by the
//!   time since the give-up: a sample `timeout + (now - given_up_at)`.
//!
//! The estimate is the largest recent sample, decaying with a time constant of
//! [`DECAY`], and the timeout is `GAIN × estimate + MARGIN`, clamped to
//! [`MIN`, `MAX`]. Before the first sample it is the configured timeout. Real losses never
//! fill their hole and produce no sample, so they do not inflate it.
//!
//! Samples only show the reordering that already happened, and they decay: a slow path that
//! carries a packet now and then (a window scheduler spilling onto it) makes holes longer
//! than the decayed estimate, the hole is given up, and the inner TCP takes the late packet
//! for a loss. So the adaptive timeout also has a floor from the measured delay gap between
//! the paths that carry data ([`HoleTimeout::set_delay_gap`]): the longest a packet can trail
//! the packets sent after it on the fastest path, `GAIN × gap + MARGIN`.

use std::time::Duration;

use crate::config::HoleTimeoutMode;
use crate::Instant;

/// Time constant of the estimate's decay.
pub const DECAY: Duration = Duration::from_secs(10);
/// Headroom over the estimate.
pub const GAIN: f64 = 1.25;
/// Added to absorb jitter the samples have not shown yet.
pub const MARGIN: Duration = Duration::from_millis(5);
/// Shortest adaptive timeout.
pub const MIN: Duration = Duration::from_millis(10);
/// Longest adaptive timeout.
pub const MAX: Duration = Duration::from_secs(1);

/// The hole timeout in force.
#[derive(Clone, Copy, Debug)]
pub struct HoleTimeout {
    mode: HoleTimeoutMode,
    base: Duration,
    /// Largest recent lateness, µs, as of `at`.
    estimate: Option<(f64, Instant)>,
    samples: u64,
    /// Delay gap between the paths that carry data.
    gap: Duration,
}

impl HoleTimeout {
    pub fn new(mode: HoleTimeoutMode, base: Duration) -> HoleTimeout {
        HoleTimeout {
            mode,
            base,
            estimate: None,
            samples: 0,
            gap: Duration::ZERO,
        }
    }

    /// Replaces the configured timeout (the server's config, or a fixed setting).
    pub fn set_base(&mut self, base: Duration) {
        self.base = base;
    }

    /// The measured delay gap between the paths that carry data: the latest arrival offset
    /// (one-way delay plus queue) of any of them less the smallest one-way delay among
    /// them. Sets the adaptive timeout's floor.
    pub fn set_delay_gap(&mut self, gap: Duration) {
        self.gap = gap;
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    fn decayed(&self, now: Instant) -> Option<f64> {
        self.estimate.map(|(us, at)| {
            let dt = now.saturating_duration_since(at).as_secs_f64();
            us * (-dt / DECAY.as_secs_f64()).exp()
        })
    }

    /// The timeout at `now`.
    pub fn current(&self, now: Instant) -> Duration {
        match (self.mode, self.decayed(now)) {
            (HoleTimeoutMode::Fixed, _) => self.base,
            (HoleTimeoutMode::Adaptive, None) if self.gap.is_zero() => self.base,
            (HoleTimeoutMode::Adaptive, estimate) => {
                let floor = self.gap.mul_f64(GAIN) + MARGIN;
                let t = estimate.map_or(self.base, |us| {
                    Duration::from_secs_f64(GAIN * us / 1e6) + MARGIN
                });
                t.max(floor).clamp(MIN, MAX)
            }
        }
    }

    /// A packet waited `lateness` for a hole (or arrived that late after a give-up).
    pub fn sample(&mut self, now: Instant, lateness: Duration) {
        self.samples += 1;
        let us = lateness.as_secs_f64() * 1e6;
        let kept = self.decayed(now).unwrap_or(0.0);
        self.estimate = Some((us.max(kept), now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    #[test]
    fn fixed_ignores_samples() {
        let mut t = HoleTimeout::new(HoleTimeoutMode::Fixed, Duration::from_millis(50));
        t.sample(ms(0), Duration::from_millis(300));
        assert_eq!(t.current(ms(0)), Duration::from_millis(50));
    }

    #[test]
    fn adaptive_follows_the_largest_recent_lateness_and_decays() {
        let mut t = HoleTimeout::new(HoleTimeoutMode::Adaptive, Duration::from_millis(50));
        assert_eq!(t.current(ms(0)), Duration::from_millis(50));
        t.sample(ms(1000), Duration::from_millis(80));
        t.sample(ms(1000), Duration::from_millis(40));
        assert_eq!(t.current(ms(1000)), Duration::from_millis(105));
        // One time constant later the estimate is 80/e.
        let later = t.current(ms(11_000)).as_secs_f64() * 1e3;
        assert!(
            (later - (1.25 * 80.0 / std::f64::consts::E + 5.0)).abs() < 0.01,
            "{later}"
        );
        // Long quiet: the floor.
        assert_eq!(t.current(ms(200_000)), MIN);
        t.sample(ms(0), Duration::from_secs(5));
        assert_eq!(t.current(ms(0)), MAX);
    }

    #[test]
    fn the_delay_gap_is_a_floor() {
        let mut t = HoleTimeout::new(HoleTimeoutMode::Adaptive, Duration::from_millis(50));
        t.set_delay_gap(Duration::from_millis(400));
        // Before any sample: the floor, above the configured 50 ms.
        assert_eq!(t.current(ms(0)), Duration::from_millis(505));
        // A small lateness does not bring it below the floor; a larger one raises it.
        t.sample(ms(1000), Duration::from_millis(80));
        assert_eq!(t.current(ms(1000)), Duration::from_millis(505));
        t.sample(ms(1000), Duration::from_millis(600));
        assert_eq!(t.current(ms(1000)), Duration::from_millis(755));
        // Paths of equal delay: the samples decide.
        t.set_delay_gap(Duration::ZERO);
        assert_eq!(t.current(ms(1000)), Duration::from_millis(755));
        let mut f = HoleTimeout::new(HoleTimeoutMode::Fixed, Duration::from_millis(50));
        f.set_delay_gap(Duration::from_millis(400));
        assert_eq!(f.current(ms(0)), Duration::from_millis(50));
    }
}
