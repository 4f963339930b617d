//! SampleRate (Bicket, MIT MS thesis 2005): the 802.11 bit-rate selection the HTPPR paper's
//! TCP baseline ran with (§5.3-5.4).
//!
//! It sends at the rate with the lowest average transmission time per delivered packet over
//! the last 10 s (retries, backoff and ACKs included); every tenth packet it samples another
//! rate whose lossless transmission time beats that average, skipping rates that failed 4
//! times in a row. It starts at the top rate. Simplified: every attempt of a packet goes at
//! the one rate chosen (no multi-rate retry chain), and each failed attempt counts as a
//! failure.

use std::collections::VecDeque;

use braid_core::Instant;

use super::phy;
use crate::Rng;

/// The window of history, µs.
const WINDOW_US: u64 = 10_000_000;
/// Every this many packets, one goes at a sampled rate.
const SAMPLE_EVERY: u64 = 10;
/// A rate that failed this many packets in a row is not sampled.
const MAX_SUCCESSIVE_FAILURES: u32 = 4;

#[derive(Clone, Default)]
struct RateStats {
    history: VecDeque<(u64, u64, bool)>,
    tx_us: u64,
    successes: u64,
    successive_failures: u32,
}

/// The rate chooser of one station.
pub struct SampleRate {
    rates: Vec<RateStats>,
    packets: u64,
    rng: Rng,
    /// Packet size the lossless times are figured for.
    bytes: usize,
}

impl SampleRate {
    pub fn new(seed: u64, bytes: usize) -> SampleRate {
        SampleRate {
            rates: vec![RateStats::default(); phy::OFDM_RATES],
            packets: 0,
            rng: Rng::new(seed),
            bytes,
        }
    }

    fn lossless_us(&self, k: usize) -> u64 {
        phy::DIFS_US
            + phy::SLOT_US * u64::from(phy::CW_MIN) / 2
            + phy::frame_us(k, self.bytes)
            + phy::SIFS_US
            + phy::ack_us(k)
    }

    fn average_us(&self, k: usize) -> Option<f64> {
        let r = &self.rates[k];
        (r.successes > 0).then(|| r.tx_us as f64 / r.successes as f64)
    }

    /// The rate index for the next packet.
    pub fn choose(&mut self, _now: Instant) -> usize {
        self.packets += 1;
        let best = (0..phy::OFDM_RATES)
            .filter(|&k| self.rates[k].successive_failures < MAX_SUCCESSIVE_FAILURES)
            .filter_map(|k| self.average_us(k).map(|a| (k, a)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let Some((best, avg)) = best else {
            // Nothing delivered yet: the highest rate that has not failed repeatedly.
            return (0..phy::OFDM_RATES)
                .rev()
                .find(|&k| self.rates[k].successive_failures < MAX_SUCCESSIVE_FAILURES)
                .unwrap_or(0);
        };
        if self.packets.is_multiple_of(SAMPLE_EVERY) {
            let candidates: Vec<usize> = (0..phy::OFDM_RATES)
                .filter(|&k| k != best)
                .filter(|&k| self.rates[k].successive_failures < MAX_SUCCESSIVE_FAILURES)
                .filter(|&k| (self.lossless_us(k) as f64) < avg)
                .collect();
            if !candidates.is_empty() {
                return candidates[self.rng.below(candidates.len() as u64) as usize];
            }
        }
        best
    }

    /// A packet sent at `rate` took `airtime_us` over `attempts` and was `delivered` or not.
    /// Failed attempts count as failures one by one, so that a rate that loses every attempt
    /// of one packet is left at once (Madwifi's retry chain falls back within the packet).
    pub fn on_result(
        &mut self,
        now: Instant,
        rate: usize,
        delivered: bool,
        attempts: u32,
        airtime_us: u64,
    ) {
        let Some(r) = self.rates.get_mut(rate) else {
            return;
        };
        let now = now.as_micros();
        r.history.push_back((now, airtime_us, delivered));
        r.tx_us += airtime_us;
        if delivered {
            r.successes += 1;
            r.successive_failures = 0;
        } else {
            r.successive_failures += attempts.max(1);
        }
        for r in &mut self.rates {
            while r.history.front().is_some_and(|h| h.0 + WINDOW_US < now) {
                let (_, us, ok) = r.history.pop_front().expect("front exists");
                r.tx_us -= us;
                r.successes -= u64::from(ok);
            }
            // A rate whose failures aged out may be tried again.
            if r.history.is_empty() {
                r.successive_failures = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settles_on_the_rate_with_the_least_airtime() {
        let mut s = SampleRate::new(1, 1500);
        let mut rng = Rng::new(2);
        let snr = 22.0;
        let mut used = [0u32; phy::OFDM_RATES];
        for i in 0..5000u64 {
            let now = Instant::from_micros(i * 500);
            let k = s.choose(now);
            used[k] += 1;
            let per_attempt = s.lossless_us(k);
            let mut spent = 0;
            let mut ok = false;
            for _ in 0..7 {
                spent += per_attempt;
                if phy::clean(1500, phy::ber(k, snr), &mut rng) {
                    ok = true;
                    break;
                }
            }
            s.on_result(now, k, ok, 1, spent);
        }
        // At 22 dB the best expected airtime per delivered packet is at 24 or 36 Mbit/s.
        let top = (0..phy::OFDM_RATES).max_by_key(|&k| used[k]).unwrap();
        assert!((4..=5).contains(&top), "{used:?}");
    }
}
