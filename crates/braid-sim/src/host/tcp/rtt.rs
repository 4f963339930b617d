//! Round-trip time estimation and the retransmission timeout (RFC 6298), in microseconds.
//!
//! SRTT and RTTVAR follow RFC 6298 §2 with α = 1/8 and β = 1/4; RTO = SRTT + 4·RTTVAR,
//! bounded below by Linux's 200 ms (`TCP_RTO_MIN`, instead of RFC 6298's 1 s) and above by
//! 120 s (`TCP_RTO_MAX`); before any sample it is 1 s (RFC 6298 §2.1). Linux computes
//! SRTT + max(RTTVAR-like deviation, 200 ms) instead, which is up to 200 ms longer on
//! paths whose RTT is steady; the model keeps the RFC's form with Linux's floor. Samples
//! are taken only from segments never retransmitted (Karn's algorithm, RFC 6298 §3), by
//! the sender from its own transmit times (no timestamp option). The minimum RTT seen is
//! kept for RACK (RFC 8985 §6.2) and Cubic.

use std::time::Duration;

pub const MIN_RTO: Duration = Duration::from_millis(200);
pub const MAX_RTO: Duration = Duration::from_secs(120);
pub const INITIAL_RTO: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, Default)]
pub struct RttEstimator {
    /// (SRTT, RTTVAR) in µs once a sample arrived.
    smoothed: Option<(u64, u64)>,
    min: Option<u64>,
    latest: u64,
}

impl RttEstimator {
    /// Takes one RTT measurement (RFC 6298 §2.2-2.3).
    pub fn on_sample(&mut self, sample: Duration) {
        let r = micros(sample);
        self.latest = r;
        self.min = Some(self.min.map_or(r, |m| m.min(r)));
        self.smoothed = Some(match self.smoothed {
            None => (r, r / 2),
            Some((srtt, rttvar)) => {
                let rttvar = (3 * rttvar + srtt.abs_diff(r)) / 4;
                let srtt = (7 * srtt + r) / 8;
                (srtt, rttvar)
            }
        });
    }

    /// A sample that only counts towards the minimum RTT: from the most recently sent
    /// segment an ACK delivered, which did not wait for the delayed-ACK timer (Linux
    /// `ca_rtt_us`).
    pub fn on_min_sample(&mut self, sample: Duration) {
        let r = micros(sample);
        self.min = Some(self.min.map_or(r, |m| m.min(r)));
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.smoothed.map(|(s, _)| Duration::from_micros(s))
    }

    pub fn rttvar(&self) -> Option<Duration> {
        self.smoothed.map(|(_, v)| Duration::from_micros(v))
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min.map(Duration::from_micros)
    }

    pub fn latest(&self) -> Duration {
        Duration::from_micros(self.latest)
    }

    /// The retransmission timeout before backoff (RFC 6298 §2).
    pub fn rto(&self) -> Duration {
        match self.smoothed {
            None => INITIAL_RTO,
            Some((srtt, rttvar)) => {
                Duration::from_micros(srtt + 4 * rttvar).clamp(MIN_RTO, MAX_RTO)
            }
        }
    }

    /// The timeout after `backoff` consecutive expirations (RFC 6298 §5.5), at most 120 s.
    pub fn backed_off(&self, backoff: u32) -> Duration {
        let factor = 1u32 << backoff.min(16);
        self.rto().saturating_mul(factor).min(MAX_RTO)
    }
}

fn micros(d: Duration) -> u64 {
    (d.as_micros().min(u128::from(u64::MAX / 8)) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn follows_rfc_6298_with_a_200_ms_floor() {
        let mut r = RttEstimator::default();
        assert_eq!(r.rto(), INITIAL_RTO);
        r.on_sample(ms(100));
        assert_eq!((r.srtt(), r.rttvar()), (Some(ms(100)), Some(ms(50))));
        assert_eq!(r.rto(), ms(300));
        for _ in 0..50 {
            r.on_sample(ms(100));
        }
        // A steady path: RTTVAR decays and the floor takes over.
        assert_eq!(r.rto(), MIN_RTO);
        r.on_sample(ms(180));
        assert_eq!(r.srtt(), Some(ms(110)));
        assert_eq!(r.min_rtt(), Some(ms(100)));
        assert_eq!(r.backed_off(1), r.rto() * 2);
        assert_eq!(r.backed_off(30), MAX_RTO);
    }

    #[test]
    fn keeps_microseconds() {
        let mut r = RttEstimator::default();
        r.on_sample(Duration::from_micros(1234));
        assert_eq!(r.srtt(), Some(Duration::from_micros(1234)));
    }
}
