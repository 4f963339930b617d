//! The engine's clock: instants are microseconds from an arbitrary, caller-chosen epoch.
//!
//! The simulator starts at zero; the daemon maps a monotonic clock onto it. The engine only
//! ever compares instants it was given, so the epoch does not matter.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in microseconds from the caller's epoch. Time only moves forward.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// Far in the future; never reached.
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_micros(us: u64) -> Self {
        Instant(us)
    }

    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms * 1000)
    }

    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Seconds from the epoch, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// The low 32 bits, as carried in a datagram's timestamp field (wraps every ~71 min).
    pub const fn wire_timestamp(self) -> u32 {
        self.0 as u32
    }
}

/// The earlier of two optional deadlines (`None`: no deadline). A plain `match`: the
/// simulator asks every component for its deadline at each step, and an iterator chain
/// of `flatten().min()` there compiled to kilobytes of code.
#[inline]
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(d.as_micros().min(u64::MAX as u128) as u64),
        )
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_sub(d.as_micros().min(u64::MAX as u128) as u64),
        )
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero when `rhs` is later.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}
