//! SampleRate (Bicket, MIT MS thesis 2005): the 802.11 bit-rate selection the HTPPR paper's
//! TCP baseline ran with (§5.3-5.4), as Madwifi runs it on Atheros cards.
//!
//! It sends at the rate with the lowest average transmission time per delivered packet over
//! the last 10 s (retries, backoff and ACKs included); every tenth packet it samples another
//! rate whose lossless transmission time beats that average (at most two steps above the
//! current one), skipping rates that failed 4 packets in a row. Before anything is
//! delivered it starts at the highest rate up to 36 Mbit/s that has not failed. Each packet
//! goes with Madwifi's multi-rate retry series: 2 tries at the chosen rate, 3 at the current
//! best rate (the lowest if that has delivered nothing), 3 at the lowest rate; only the
//! first series' tries count against the chosen rate, so a sample at a bad rate costs two
//! attempts, not the packet (Madwifi `ath_rate_sample`: `findrate`, `setupxtxdesc`,
//! `tx_complete`).

use std::collections::VecDeque;

use braid_core::Instant;

use super::medium::{Series, RETRY_LIMIT};
use super::phy;
use crate::Rng;

/// The window of history, µs.
const WINDOW_US: u64 = 10_000_000;
/// Every this many packets, one goes at a sampled rate.
const SAMPLE_EVERY: u64 = 10;
/// A rate that failed this many packets in a row is not sampled.
const MAX_SUCCESSIVE_FAILURES: u32 = 4;
/// Tries of each retry series: the chosen rate, the current best, the lowest (Madwifi).
const SERIES_TRIES: [u32; 3] = [2, 3, 3];
/// The highest rate tried before anything is delivered: 36 Mbit/s (Madwifi).
const START_MAX: usize = 5;
/// A sample goes at most this many rate steps above the current rate (Madwifi).
const SAMPLE_MAX_STEPS: usize = 2;

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
    /// The retry series of the last packet chosen.
    series: Series,
}

impl SampleRate {
    pub fn new(seed: u64, bytes: usize) -> SampleRate {
        SampleRate {
            rates: vec![RateStats::default(); phy::OFDM_RATES],
            packets: 0,
            rng: Rng::new(seed),
            bytes,
            series: [
                (0, SERIES_TRIES[0]),
                (0, SERIES_TRIES[1]),
                (0, SERIES_TRIES[2]),
            ],
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

    /// The rate index for the next packet; its retry series is then [`SampleRate::series`].
    pub fn choose(&mut self, now: Instant) -> usize {
        let rate = self.pick(now);
        let current = self.best().map_or(0, |(k, _)| k);
        self.series = [
            (rate, SERIES_TRIES[0]),
            (current, SERIES_TRIES[1]),
            (0, SERIES_TRIES[2]),
        ];
        rate
    }

    /// The multi-rate retry series of the packet last chosen.
    pub fn series(&self) -> Series {
        self.series
    }

    /// The usable rate with the least average airtime per delivered packet.
    fn best(&self) -> Option<(usize, f64)> {
        (0..phy::OFDM_RATES)
            .filter(|&k| self.rates[k].successive_failures < MAX_SUCCESSIVE_FAILURES)
            .filter_map(|k| self.average_us(k).map(|a| (k, a)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    fn pick(&mut self, _now: Instant) -> usize {
        self.packets += 1;
        let Some((best, avg)) = self.best() else {
            // Nothing delivered yet: the highest rate up to 36 Mbit/s that has not failed.
            return (0..=START_MAX)
                .rev()
                .find(|&k| self.rates[k].successive_failures == 0)
                .unwrap_or(0);
        };
        if self.packets.is_multiple_of(SAMPLE_EVERY) {
            let candidates: Vec<usize> = (0..phy::OFDM_RATES)
                .filter(|&k| k != best && k <= best + SAMPLE_MAX_STEPS)
                .filter(|&k| self.rates[k].successive_failures < MAX_SUCCESSIVE_FAILURES)
                .filter(|&k| (self.lossless_us(k) as f64) < avg)
                .collect();
            if !candidates.is_empty() {
                return candidates[self.rng.below(candidates.len() as u64) as usize];
            }
        }
        best
    }

    /// The last packet chosen took `attempts` through its series and `airtime_us` in all,
    /// and was `delivered` or not. Its first rate is charged the whole airtime and fails
    /// if the packet needed more than the first series; each later series reached is
    /// charged its own attempts and judged by the outcome alone (Madwifi's `tx_complete`).
    /// A frame sent without retries (`attempts` 1, no series used) is the first case.
    pub fn on_result(
        &mut self,
        now: Instant,
        rate: usize,
        delivered: bool,
        attempts: u32,
        airtime_us: u64,
    ) {
        let series = if self.series[0].0 == rate {
            self.series
        } else {
            [(rate, RETRY_LIMIT), (rate, 0), (rate, 0)]
        };
        let now = now.as_micros();
        let mut before = 0;
        for (j, &(k, tries)) in series.iter().enumerate() {
            if tries == 0 || attempts <= before {
                break;
            }
            let (spent, ok) = if j == 0 {
                (airtime_us, delivered && attempts <= tries)
            } else {
                let n = u64::from(attempts - before);
                (n * self.lossless_us(k), delivered)
            };
            self.record(now, k, spent, ok);
            before += tries;
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

    fn record(&mut self, now: u64, rate: usize, airtime_us: u64, ok: bool) {
        let Some(r) = self.rates.get_mut(rate) else {
            return;
        };
        r.history.push_back((now, airtime_us, ok));
        r.tx_us += airtime_us;
        if ok {
            r.successes += 1;
            r.successive_failures = 0;
        } else {
            r.successive_failures += 1;
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

    /// Packets through the retry series at `snr`, as the medium sends them; the packets
    /// lost after every try and the rate chosen most.
    fn through_series(snr: f64, packets: u64) -> (u64, usize) {
        let mut s = SampleRate::new(3, 1500);
        let mut rng = Rng::new(4);
        let mut used = [0u32; phy::OFDM_RATES];
        let mut lost = 0;
        for i in 0..packets {
            let now = Instant::from_micros(i * 2000);
            let k = s.choose(now);
            used[k] += 1;
            let series = s.series();
            let (mut n, mut spent, mut ok) = (0, 0, false);
            while let Some(r) = crate::wifi::medium::rate_of_attempt(&series, n) {
                n += 1;
                spent += s.lossless_us(r);
                if phy::clean(1500, phy::ber(r, snr), &mut rng) {
                    ok = true;
                    break;
                }
            }
            lost += u64::from(!ok);
            s.on_result(now, k, ok, n, spent);
        }
        let top = (0..phy::OFDM_RATES).max_by_key(|&k| used[k]).unwrap();
        (lost, top)
    }

    #[test]
    fn a_bad_rate_costs_tries_not_packets() {
        // 10 dB: only 6 Mbit/s works (PER 53% a try); the start at 36 and the samples above
        // fall back within the packet, so few packets are lost after all 8 tries.
        let (lost, top) = through_series(10.0, 2000);
        assert_eq!(top, 0);
        assert!(lost < 20, "{lost} of 2000 lost");
        // 22 dB: the series does not hold SampleRate back from 24 or 36 Mbit/s.
        let (lost, top) = through_series(22.0, 5000);
        assert!((4..=5).contains(&top), "{top}");
        assert!(lost < 5, "{lost}");
    }
}
