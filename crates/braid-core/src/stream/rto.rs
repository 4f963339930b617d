//! One path's retransmission timeout, by RFC 6298 §2 (the estimator RFC 4960 §6.3.1 uses):
//! SRTT and RTTVAR from samples of chunks sent once (Karn), RTO = SRTT + 4 RTTVAR clamped to
//! [min, max], doubled on each expiry until the next sample.

use std::time::Duration;

/// RTO bounds and initial value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtoParams {
    pub initial: Duration,
    pub min: Duration,
    pub max: Duration,
}

impl RtoParams {
    /// RFC 4960 §15's RTO.Min 1 s and RTO.Max 60 s (stock SCTP's; Linux SCTP's rto_min),
    /// with RFC 6298's 1 s initial value.
    pub const RFC4960: RtoParams = RtoParams {
        initial: Duration::from_secs(1),
        min: Duration::from_secs(1),
        max: Duration::from_secs(60),
    };
}

impl Default for RtoParams {
    /// The stream's: a 200 ms floor, Linux TCP's TCP_RTO_MIN (RFC 6298 §2.4 allows a
    /// lower one than 1 s). oSCTP fails a path at its first expiry, so the floor is the
    /// failover stall: 1 s kept osctp-fig11's recovery above a second. Each chunk sent
    /// once gives an RTT sample, so RTTVAR follows a growing queue and a spurious expiry
    /// costs a window, the failed path coming back on the next ack of its data.
    fn default() -> Self {
        RtoParams {
            min: Duration::from_millis(200),
            ..RtoParams::RFC4960
        }
    }
}

/// SRTT, RTTVAR and the current (possibly backed-off) RTO.
#[derive(Clone, Copy, Debug)]
pub struct RtoEstimator {
    params: RtoParams,
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
}

impl RtoEstimator {
    pub fn new(params: RtoParams) -> Self {
        RtoEstimator {
            params,
            srtt: None,
            rttvar: Duration::ZERO,
            rto: params.initial,
        }
    }

    /// RFC 6298 §2.2-2.3: alpha 1/8, beta 1/4, K 4.
    pub fn on_sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(r);
                self.rttvar = self.rttvar * 3 / 4 + diff / 4;
                self.srtt = Some(s * 7 / 8 + r / 8);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + self.rttvar * 4).clamp(self.params.min, self.params.max);
    }

    /// RFC 6298 §5.5: back off after an expiry.
    pub fn back_off(&mut self) {
        self.rto = (self.rto * 2).min(self.params.max);
    }

    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// RTTVAR: the mean deviation of the samples from SRTT.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_rfc_6298() {
        let mut e = RtoEstimator::new(RtoParams {
            min: Duration::from_millis(10),
            ..RtoParams::default()
        });
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        // 100 + 4 * 50
        assert_eq!(e.rto(), Duration::from_millis(300));
        e.on_sample(Duration::from_millis(100));
        // rttvar 37.5, srtt 100
        assert_eq!(e.rto(), Duration::from_micros(250_000));
        e.back_off();
        assert_eq!(e.rto(), Duration::from_millis(500));
        for _ in 0..20 {
            e.back_off();
        }
        assert_eq!(e.rto(), Duration::from_secs(60));
    }
}
