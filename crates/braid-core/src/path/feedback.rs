//! Feedback delay of one path: from sending a datagram on the path until the peer's feedback
//! (a path ack or report entry) says it arrived. This is the time a datagram counts in
//! [`super::Path::unacked_datagrams`], so it is what a window over that count must cover:
//! the path's one-way delay, the peer's ack delay, and the feedback's own trip back (on
//! whichever path carried it, often a faster one than the path itself). The path's RTT is
//! the wrong measure for it on paths of unequal delay: a 400 ms path whose feedback returns
//! over a 50 ms path clears its datagrams after about 450 ms, not 800 ms.
//!
//! Samples are taken when the peer's highest path sequence number advances, for the
//! datagram it names (its send instant is in the path's sent ring). The estimate is the
//! smallest sample of the last [`WINDOW`], so that the queue a window builds does not inflate
//! the window itself (the smoothed RTT, which includes the queue, would: a window of
//! `capacity × srtt` grows with the queue it fills).

use std::time::Duration;

use crate::Instant;

/// How long the smallest sample is remembered; a new, larger minimum takes over after it
/// (a path whose delay grew for good).
pub const WINDOW: Duration = Duration::from_secs(10);

/// Windowed minimum of the feedback delay.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeedbackDelay {
    /// Minimum of the current window, and when it was taken.
    min: Option<(Duration, Instant)>,
    /// Minimum since the current one was taken: replaces it when it expires.
    next: Option<Duration>,
    samples: u64,
}

impl FeedbackDelay {
    /// The smallest recent feedback delay, `None` before the first sample.
    pub fn min(&self) -> Option<Duration> {
        self.min.map(|(d, _)| d)
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Takes one sample at `now`.
    pub fn sample(&mut self, now: Instant, d: Duration) {
        self.samples += 1;
        match self.min {
            Some((m, _)) if d <= m => {
                self.min = Some((d, now));
                self.next = None;
            }
            Some((m, at)) if now.saturating_duration_since(at) >= WINDOW => {
                let n = self.next.map_or(d, |n| n.min(d));
                self.min = Some((n.max(m), now));
                self.next = None;
            }
            Some(_) => self.next = Some(self.next.map_or(d, |n| n.min(d))),
            None => self.min = Some((d, now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn keeps_the_smallest_recent_sample() {
        let mut f = FeedbackDelay::default();
        assert_eq!(f.min(), None);
        f.sample(Instant::from_millis(0), ms(120));
        f.sample(Instant::from_millis(100), ms(100));
        f.sample(Instant::from_millis(200), ms(300));
        assert_eq!(f.min(), Some(ms(100)));
        // The queue grows for a long time: after the window, the smallest sample taken since
        // the old minimum takes over.
        f.sample(Instant::from_millis(5_000), ms(250));
        f.sample(Instant::from_millis(10_200), ms(280));
        assert_eq!(f.min(), Some(ms(250)));
        assert_eq!(f.samples(), 5);
    }
}
