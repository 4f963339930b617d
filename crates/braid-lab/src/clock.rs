//! The lab's clock: the one place braid-lab reads time.
//!
//! Everything in a lab run (the link emulators, the applications' timestamps, the reports)
//! uses one epoch, the moment the lab started, expressed as a [`braid_core::Instant`], so
//! the simulator's link model can be driven with real time unchanged. The source is
//! `CLOCK_MONOTONIC`; packet timestamps from the kernel (`SO_TIMESTAMPNS`, which are
//! `CLOCK_REALTIME`) are mapped onto it with the offset between the two clocks read at the
//! same moment.

use std::time::Duration;

use braid_core::Instant;
use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, ClockId};

/// Real time since the lab's epoch.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Duration,
}

fn read(id: ClockId) -> Duration {
    // CLOCK_MONOTONIC and CLOCK_REALTIME are always available on Linux; a failure would
    // leave time at zero rather than take the lab down.
    clock_gettime(id).map_or(Duration::ZERO, Duration::from)
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Clock {
        Clock {
            epoch: read(ClockId::CLOCK_MONOTONIC),
        }
    }

    /// Now, relative to the epoch.
    pub fn now(&self) -> Instant {
        let d = read(ClockId::CLOCK_MONOTONIC).saturating_sub(self.epoch);
        Instant::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    /// A `CLOCK_REALTIME` timestamp (as the kernel stamps received packets) on this
    /// clock. Never later than now.
    pub fn from_realtime(&self, ts: TimeSpec) -> Instant {
        let real_now = read(ClockId::CLOCK_REALTIME);
        let now = self.now();
        let ts = Duration::from(ts);
        let ago = real_now.saturating_sub(ts);
        now - ago
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_timestamps_map_to_the_past() {
        let c = Clock::start();
        let real = clock_gettime(ClockId::CLOCK_REALTIME).unwrap();
        let t = c.from_realtime(real);
        assert!(t <= c.now());
        // A timestamp from the future is clamped to now.
        let later = real + TimeSpec::from(Duration::from_secs(5));
        assert!(c.from_realtime(later) <= c.now());
    }
}
