//! Round-trip time estimation and the retransmission timeout, in microseconds, as Linux
//! computes them (`tcp_rtt_estimator`, `__tcp_set_rto`).
//!
//! SRTT follows RFC 6298 §2 with α = 1/8. The timeout is SRTT + RTTVAR, where RTTVAR is
//! the largest 4·mean deviation of the last round trip (deviation updated with β = 1/4, and
//! only an eighth of that when the RTT falls), never below 200 ms (`TCP_RTO_MIN`) and
//! decaying by a quarter a round trip towards the current one; at most 120 s
//! (`TCP_RTO_MAX`); before any sample 1 s (RFC 6298 §2.1). So the timeout is at least
//! SRTT + 200 ms: RFC 6298's max(SRTT + 4·RTTVAR, 200 ms), which the model used before,
//! fired 200 ms after a send on a steady path and took braid's resequencing holds for
//! losses (sim-vs-lab's lossy path: one spurious timeout in 12 s, none in Linux). Samples
//! are taken only from segments never retransmitted (Karn's algorithm, RFC 6298 §3), by
//! the sender from its own transmit times (no timestamp option). The minimum RTT seen is
//! kept for RACK (RFC 8985 §6.2) and Cubic.

use std::time::Duration;

use super::seq::Seq;

pub const MIN_RTO: Duration = Duration::from_millis(200);
pub const MAX_RTO: Duration = Duration::from_secs(120);
pub const INITIAL_RTO: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, Default)]
pub struct RttEstimator {
    smoothed: Option<Smoothed>,
    min: Option<u64>,
    latest: u64,
}

/// Linux's estimator state, in µs; the deviations are 4·mean deviation, as Linux keeps
/// them (`mdev_us`, `mdev_max_us`, `rttvar_us`).
#[derive(Clone, Copy, Debug)]
struct Smoothed {
    srtt: u64,
    mdev: u64,
    /// The largest `mdev` of this round trip (at least 200 ms).
    mdev_max: u64,
    /// What the timeout adds to SRTT.
    rttvar: u64,
    /// The round trip ends once this is acknowledged (`rtt_seq`).
    rtt_seq: Seq,
}

impl RttEstimator {
    /// Takes one RTT measurement; `una` and `nxt` are the sender's after the ACK that gave
    /// it (they delimit Linux's per-round-trip update of RTTVAR).
    pub fn on_sample(&mut self, sample: Duration, una: Seq, nxt: Seq) {
        let r = micros(sample);
        let floor = micros(MIN_RTO);
        self.latest = r;
        self.min = Some(self.min.map_or(r, |m| m.min(r)));
        let Some(s) = &mut self.smoothed else {
            let rttvar = (2 * r).max(floor);
            self.smoothed = Some(Smoothed {
                srtt: r,
                mdev: 2 * r,
                mdev_max: rttvar,
                rttvar,
                rtt_seq: nxt,
            });
            return;
        };
        let err = r as i64 - s.srtt as i64;
        s.srtt = (s.srtt as i64 + err / 8).max(1) as u64;
        let mut m = err.abs() - (s.mdev / 4) as i64;
        if err < 0 && m > 0 {
            m /= 8;
        }
        s.mdev = (s.mdev as i64 + m).max(0) as u64;
        if s.mdev > s.mdev_max {
            s.mdev_max = s.mdev;
            s.rttvar = s.rttvar.max(s.mdev_max);
        }
        if una > s.rtt_seq {
            if s.mdev_max < s.rttvar {
                s.rttvar -= (s.rttvar - s.mdev_max) / 4;
            }
            s.rtt_seq = nxt;
            s.mdev_max = floor;
        }
    }

    /// A sample that only counts towards the minimum RTT: from the most recently sent
    /// segment an ACK delivered, which did not wait for the delayed-ACK timer (Linux
    /// `ca_rtt_us`).
    pub fn on_min_sample(&mut self, sample: Duration) {
        let r = micros(sample);
        self.min = Some(self.min.map_or(r, |m| m.min(r)));
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.smoothed.map(|s| Duration::from_micros(s.srtt))
    }

    /// What the timeout adds to SRTT (Linux `rttvar_us`).
    pub fn rttvar(&self) -> Option<Duration> {
        self.smoothed.map(|s| Duration::from_micros(s.rttvar))
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min.map(Duration::from_micros)
    }

    pub fn latest(&self) -> Duration {
        Duration::from_micros(self.latest)
    }

    /// The retransmission timeout before backoff.
    pub fn rto(&self) -> Duration {
        match self.smoothed {
            None => INITIAL_RTO,
            Some(s) => Duration::from_micros(s.srtt + s.rttvar).min(MAX_RTO),
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
    fn times_out_srtt_plus_at_least_200_ms_as_linux() {
        let mut r = RttEstimator::default();
        assert_eq!(r.rto(), INITIAL_RTO);
        let (mut una, mut nxt) = (Seq(0), Seq(1000));
        r.on_sample(ms(100), una, nxt);
        assert_eq!(r.srtt(), Some(ms(100)));
        // First sample: SRTT + max(2·RTT, 200 ms), three RTTs here as RFC 6298's.
        assert_eq!(r.rto(), ms(300));
        for _ in 0..50 {
            una = nxt + 1;
            nxt = una + 1000;
            r.on_sample(ms(100), una, nxt);
        }
        // A steady path: the deviation decays and the 200 ms floor takes over, above SRTT.
        assert_eq!(r.rto(), ms(300));
        r.on_sample(ms(500), una, nxt);
        assert_eq!(r.srtt(), Some(ms(150)));
        // The deviation (as 4·mean deviation: |500 − 100|) lifts the timeout at once.
        assert!(r.rto().abs_diff(ms(550)) < ms(1), "{:?}", r.rto());
        assert_eq!(r.min_rtt(), Some(ms(100)));
        assert_eq!(r.backed_off(1), r.rto() * 2);
        assert_eq!(r.backed_off(30), MAX_RTO);
    }

    #[test]
    fn a_falling_rtt_raises_the_deviation_an_eighth_as_much() {
        let (mut up, mut down) = (RttEstimator::default(), RttEstimator::default());
        for r in [&mut up, &mut down] {
            r.on_sample(ms(1000), Seq(0), Seq(10));
        }
        // ±1 s: 3/4 of 2 s plus 1 s, or plus an eighth of that rise.
        up.on_sample(ms(2000), Seq(0), Seq(10));
        down.on_sample(ms(0), Seq(0), Seq(10));
        assert_eq!(up.rttvar(), Some(ms(2500)));
        assert_eq!(down.rttvar(), Some(Duration::from_micros(2_062_499)));
    }

    #[test]
    fn keeps_microseconds() {
        let mut r = RttEstimator::default();
        r.on_sample(Duration::from_micros(1234), Seq(0), Seq(1));
        assert_eq!(r.srtt(), Some(Duration::from_micros(1234)));
    }
}
