//! BIER-based autorate (HTPPR §3.3), SoftRate-like.
//!
//! The heuristic assumes that at a given SNR the block error rate grows tenfold with each
//! step up in bit rate. At rate `r_k` with BIER `b` the goodput is about `r_k·(1 − b)`:
//! - step down when `r_k·(1 − b) < r_{k−1}` (the lower rate, whose error will be ten times
//!   smaller, already does better): at 12 Mbit/s, `b > 1/4`;
//! - step up when `r_{k+1}·(1 − 10·b) > r_k`, i.e. `b < (1 − r_k/r_{k+1})/10`: at 12 Mbit/s,
//!   `b < 1/30`.
//!
//! Both thresholds are the paper's worked examples exactly. One step per burst, decided at
//! the end of each burst (§3.3), and only on an estimate of at least [`MIN_SAMPLES`] packets
//! taken at the current rate ("spreading error rate over 4 and 8 packets", §3.3), so that a
//! fall from 54 to 6 Mbit/s takes 7 steps (the paper converges in 7-8 bursts, Fig. 5).
//!
//! Beyond the paper, a packet's headers: braid's hare loses a packet whose MAC, IP and
//! UDP-Lite headers (64 bytes, [`super::receiver::LOST_HEADER_BYTES`]) take a bit error, where
//! the paper's monitor-mode receiver took it anyway. With `h` header blocks a packet's good
//! blocks arrive with probability about `(1 − b)^(1+h)`, so the goodput now is
//! `r_k·(1 − b)^(1+h)` and the rate steps down when `b > 1 − (r_{k−1}/r_k)^(1/(1+h))`
//! (`h = 0` gives the paper's). At 19 dB, 36 Mbit/s with b = 0.23 lost 40% of its packets to
//! their headers and kept its rate (0.23 < 1/3) at 7.4 Mbit/s against 24 Mbit/s's 12.6
//! (htppr-fig5). The step up keeps the paper's threshold: it is a probe of a rate whose
//! losses are unknown, and with `h` in it too (about 1% instead of 2.5-3.3%) a link whose
//! damage does not fall with the rate (interference) could never climb back after a dip.
//!
//! Also beyond the paper: a step up is a probe, and a probe the next decision undoes (the rate
//! above erred far more than tenfold, as 36 to 48 Mbit/s does on a real 802.11g ladder)
//! doubles the number of decisions the rate below must hold before it probes again, up to
//! [`MAX_PROBE_WAIT`]; a probe that holds resets it (AARF, Lacage et al., MSWiM '04). Without
//! it the rate swung up every other estimate and each swing cost a tortoise round trip of
//! packets at the rate above (htppr-fig6).

/// 802.11g's OFDM rates, kbit/s: the hare's rate ladder by default.
pub const RATES_80211G_KBPS: [u32; 8] = [6000, 9000, 12000, 18000, 24000, 36000, 48000, 54000];

/// Packets an estimate must cover before it moves the rate (§3.3: 4 packets give a
/// 1%-granular BIER with 31 blocks a packet).
pub const MIN_SAMPLES: u32 = 4;

/// The most decisions a rate waits before probing the rate above again (a burst ends every
/// few ms, so about a second at 36 Mbit/s; htppr-fig6).
pub const MAX_PROBE_WAIT: u32 = 512;

/// The rate chooser of one sender.
#[derive(Clone, Debug)]
pub struct Autorate {
    rates_kbps: Vec<u32>,
    current: usize,
    enabled: bool,
    /// Per rate: decisions it must hold before it may step up.
    probe_wait: Vec<u32>,
    /// Decisions the current rate has held since it was entered.
    held: u32,
    /// The rate a step up left, until the first decision at the new rate.
    probing_from: Option<usize>,
    /// Decisions taken: burst ends with a fresh enough estimate at the current rate.
    decisions: u64,
    /// Blocks' worth of headers that must be clean for a packet to arrive (`h` above).
    header_blocks: f64,
}

impl Autorate {
    /// Starts at `start` (an index into `rates_kbps`, clamped). With `enabled` false the rate
    /// never moves (the static-rate baseline of Fig. 6a).
    pub fn new(rates_kbps: Vec<u32>, start: usize, enabled: bool) -> Self {
        let rates_kbps = if rates_kbps.is_empty() {
            RATES_80211G_KBPS.to_vec()
        } else {
            rates_kbps
        };
        let current = start.min(rates_kbps.len() - 1);
        Autorate {
            probe_wait: vec![1; rates_kbps.len()],
            rates_kbps,
            current,
            enabled,
            held: 0,
            probing_from: None,
            decisions: 0,
            header_blocks: 0.0,
        }
    }

    /// Counts `blocks` blocks' worth of headers a packet loses itself to (0 by default: §3.3's
    /// thresholds exactly).
    pub fn with_header_blocks(mut self, blocks: f64) -> Self {
        self.header_blocks = blocks.max(0.0);
        self
    }

    /// Burst ends so far on which the rate was judged (moved or kept), HTPPR Fig. 5's bursts.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// The index of the rate in use.
    pub fn rate(&self) -> usize {
        self.current
    }

    /// The rate in use, kbit/s.
    pub fn rate_kbps(&self) -> u32 {
        self.rates_kbps[self.current]
    }

    /// Rate `k` in kbit/s (the top rate for an index beyond it).
    pub fn kbps(&self, k: usize) -> u32 {
        self.rates_kbps[k.min(self.rates_kbps.len() - 1)]
    }

    /// The band of BIER in which rate `k` is kept: `(step-up below, step-down above)`.
    pub fn band(&self, k: usize) -> (f64, f64) {
        let r = |i: usize| self.rates_kbps[i] as f64;
        let root = |x: f64| x.powf(1.0 / (1.0 + self.header_blocks));
        let up = match self.rates_kbps.get(k + 1) {
            Some(_) => (1.0 - r(k) / r(k + 1)) / 10.0,
            None => 0.0,
        };
        let down = match k.checked_sub(1) {
            Some(lower) => 1.0 - root(r(lower) / r(k)),
            None => 1.0,
        };
        (up, down)
    }

    /// A burst ended; the receiver's latest estimate is `bier` over `samples` packets sent at
    /// rate index `rate`. Returns the new rate index if it changed.
    pub fn on_burst_end(&mut self, rate: usize, bier: f64, samples: u32) -> Option<usize> {
        if !self.enabled || rate != self.current || samples < MIN_SAMPLES {
            return None;
        }
        self.decisions += 1;
        let (up, down) = self.band(self.current);
        let next = if bier > down {
            Some(self.current - 1)
        } else if bier < up {
            Some(self.current + 1)
        } else {
            None
        };
        // The first decision after a probe judges it.
        if let Some(from) = self.probing_from.take() {
            let w = &mut self.probe_wait[from];
            *w = if next == Some(from) {
                (*w * 2).min(MAX_PROBE_WAIT)
            } else {
                1
            };
        }
        let next = match next {
            Some(n) if n > self.current && self.held + 1 < self.probe_wait[self.current] => None,
            n => n,
        };
        let Some(next) = next else {
            self.held += 1;
            return None;
        };
        if next > self.current {
            self.probing_from = Some(self.current);
        }
        self.current = next;
        self.held = 0;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(start: usize) -> Autorate {
        Autorate::new(RATES_80211G_KBPS.to_vec(), start, true)
    }

    #[test]
    fn the_papers_examples_at_12_mbits() {
        let a = g(2);
        assert_eq!(a.rate_kbps(), 12000);
        let (up, down) = a.band(2);
        assert!((down - 0.25).abs() < 1e-12);
        assert!((up - 1.0 / 30.0).abs() < 1e-12);
        let mut down_case = g(2);
        assert_eq!(down_case.on_burst_end(2, 0.26, 8), Some(1));
        assert_eq!(down_case.rate_kbps(), 9000);
        let mut up_case = g(2);
        assert_eq!(up_case.on_burst_end(2, 0.03, 8), Some(3));
        assert_eq!(up_case.rate_kbps(), 18000);
        let mut stay = g(2);
        assert_eq!(stay.on_burst_end(2, 0.1, 8), None);
    }

    #[test]
    fn headers_that_lose_the_packet_narrow_the_band() {
        let a = g(5).with_header_blocks(2.0);
        // 36 Mbit/s: down above 1 − (24/36)^(1/3) = 0.126; up below the paper's (1 − 36/48)/10.
        let (up, down) = a.band(5);
        assert!((down - (1.0 - (24.0f64 / 36.0).cbrt())).abs() < 1e-12);
        assert!((up - 0.025).abs() < 1e-12);
        // At 19 dB's 36 Mbit/s (b = 0.23) it steps down; the paper's band keeps it.
        assert_eq!(
            g(5).with_header_blocks(2.0).on_burst_end(5, 0.23, 8),
            Some(4)
        );
        assert_eq!(g(5).on_burst_end(5, 0.23, 8), None);
    }

    #[test]
    fn needs_fresh_samples_at_the_current_rate() {
        let mut a = g(7);
        assert_eq!(a.on_burst_end(7, 0.9, MIN_SAMPLES - 1), None);
        assert_eq!(a.on_burst_end(6, 0.9, 50), None);
        assert_eq!(a.on_burst_end(7, 0.9, MIN_SAMPLES), Some(6));
        // Only the last call judged the rate.
        assert_eq!(a.decisions(), 1);
        let mut off = Autorate::new(RATES_80211G_KBPS.to_vec(), 7, false);
        assert_eq!(off.on_burst_end(7, 0.9, 50), None);
    }

    #[test]
    fn falls_from_54_to_6_in_seven_bursts_and_stays_at_the_edges() {
        let mut a = g(7);
        let mut bursts = 0;
        while a.on_burst_end(a.rate(), 0.5, 8).is_some() {
            bursts += 1;
        }
        assert_eq!((bursts, a.rate_kbps()), (7, 6000));
        let mut top = g(7);
        assert_eq!(top.on_burst_end(7, 0.0, 8), None);
    }

    #[test]
    fn settles_where_a_tenfold_error_ladder_peaks() {
        // A channel whose BIER is 0.3 at 54 and ten times smaller per step down: goodput
        // r·(1 − b) is best at 48 Mbit/s (46.6 against 37.8 at 54 and 35.9 at 36).
        let bier_at = |k: usize| (0.3 / 10f64.powi(7 - k as i32)).min(1.0);
        let mut a = g(0);
        for _ in 0..20 {
            let k = a.rate();
            a.on_burst_end(k, bier_at(k), 8);
        }
        let best = (0..8)
            .max_by(|&x, &y| {
                let gp = |k: usize| RATES_80211G_KBPS[k] as f64 * (1.0 - bier_at(k));
                gp(x).total_cmp(&gp(y))
            })
            .unwrap();
        assert_eq!(a.rate(), best);
    }

    #[test]
    fn a_probe_that_is_undone_waits_longer_next_time() {
        // 36 Mbit/s is clean enough to probe 48, where blocks are half lost.
        let bier_at = |k: usize| if k >= 6 { 0.5 } else { 0.01 };
        let mut a = g(5);
        let mut at_48 = 0;
        for _ in 0..2000 {
            let k = a.rate();
            at_48 += u32::from(k == 6);
            a.on_burst_end(k, bier_at(k), 8);
        }
        // Probes back off to one per MAX_PROBE_WAIT decisions: a handful of the 2000.
        assert!(at_48 < 20, "{at_48} decisions at 48 Mbit/s");
        assert_eq!(a.rate(), 5);
        // A probe that holds resets the wait: the channel improves and 48 stays.
        let mut b = g(5);
        for _ in 0..100 {
            let k = b.rate();
            b.on_burst_end(k, bier_at(k), 8);
        }
        for _ in 0..(MAX_PROBE_WAIT + 2) {
            let k = b.rate();
            b.on_burst_end(k, if k == 6 { 0.05 } else { 0.01 }, 8);
        }
        assert_eq!(b.rate(), 6);
    }
}
