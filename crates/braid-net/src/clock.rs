//! The daemon's one clock read: a monotonic clock mapped onto the engine's [`Instant`]
//! (microseconds from when the daemon started).

use braid_core::Instant;

/// Monotonic time since the daemon started.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    #[expect(
        clippy::disallowed_methods,
        reason = "the I/O layer's one clock read; the engine is handed `now`"
    )]
    fn read() -> std::time::Instant {
        std::time::Instant::now()
    }

    pub fn start() -> Clock {
        Clock {
            epoch: Self::read(),
        }
    }

    /// Wall-clock time since the UNIX epoch, read once at start for the handshake's
    /// timestamps (braid-secure counts on from it with the monotonic clock).
    #[expect(
        clippy::disallowed_methods,
        reason = "the handshake needs wall-clock time once, at start"
    )]
    pub fn unix_time() -> std::time::Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }

    /// Now, for the engine. Starts at one second so that no instant is the epoch.
    pub fn now(&self) -> Instant {
        let us = Self::read().duration_since(self.epoch).as_micros();
        Instant::from_micros(1_000_000 + u64::try_from(us).unwrap_or(u64::MAX / 2))
    }
}
