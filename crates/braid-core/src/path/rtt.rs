//! Round-trip time of one path, from the echo in the peer's reports: a report that travels
//! on the path it describes returns the send timestamp of the latest datagram the peer
//! received there and how long the peer held it, so `RTT = now - echo - hold`. Smoothed as
//! in RFC 6298 (SRTT with gain 1/8, RTTVAR with gain 1/4); the minimum is kept too.

use std::time::Duration;

use crate::Instant;

/// Smoothed RTT of one path.
#[derive(Clone, Copy, Debug, Default)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    min: Option<Duration>,
    last_sample_at: Option<Instant>,
}

impl RttEstimator {
    /// Smoothed RTT, `None` before the first sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation (RFC 6298 RTTVAR).
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// Smallest sample seen.
    pub fn min(&self) -> Option<Duration> {
        self.min
    }

    /// When the last sample was taken.
    pub fn last_sample_at(&self) -> Option<Instant> {
        self.last_sample_at
    }

    /// Takes a sample from an echo: `echo` is our own send timestamp returned by the peer,
    /// `hold_us` the time the peer held it. Samples that come out negative or above a
    /// minute (a stale or corrupted echo) are ignored.
    pub fn on_echo(&mut self, now: Instant, echo: u32, hold_us: u32) {
        let elapsed = now.wire_timestamp().wrapping_sub(echo);
        let Some(rtt_us) = elapsed.checked_sub(hold_us) else {
            return;
        };
        if rtt_us > 60_000_000 {
            return;
        }
        self.sample(now, Duration::from_micros(u64::from(rtt_us)));
    }

    /// Takes one RTT sample.
    pub fn sample(&mut self, now: Instant, rtt: Duration) {
        self.last_sample_at = Some(now);
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + err) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_gives_rtt_net_of_hold() {
        let mut r = RttEstimator::default();
        // Sent at 1.000 s, held 5 ms by the peer, back at 1.105 s: RTT 100 ms.
        r.on_echo(Instant::from_micros(1_105_000), 1_000_000, 5_000);
        assert_eq!(r.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(r.rttvar(), Duration::from_millis(50));
        r.on_echo(Instant::from_micros(2_060_000), 2_000_000, 0);
        assert_eq!(r.srtt(), Some(Duration::from_micros(95_000)));
        assert_eq!(r.min(), Some(Duration::from_millis(60)));
        // A hold longer than the elapsed time is ignored.
        r.on_echo(Instant::from_micros(3_000_000), 2_999_000, 5_000);
        assert_eq!(r.srtt(), Some(Duration::from_micros(95_000)));
    }
}
