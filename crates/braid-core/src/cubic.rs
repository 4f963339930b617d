//! Congestion control: slow start with HyStart, then Cubic (RFC 9438), in segments as
//! Linux counts them: the simulator's Linux-like TCP runs it, and the stream's paths
//! take HyStart from it ([`crate::stream::SlowStart::HyStart`]).
//!
//! - Slow start (RFC 5681 §3.1): the window grows by the segments each ACK newly
//!   delivers, up to `ssthresh`; what is left of the ACK goes to congestion avoidance.
//! - HyStart, delay detection as Linux's `tcp_cubic` does it: once the window reaches 16
//!   segments, each round's minimum RTT over at least 8 samples is compared with the
//!   connection's minimum; an increase of clamp(min / 8, 4 ms, 16 ms) ends slow start
//!   (`ssthresh = cwnd`). The RTT thresholds are those of RFC 9406 §4.2, but without its
//!   Conservative Slow Start phase; Linux's ACK-train detection is not modelled.
//! - Cubic (RFC 9438 §4): C = 0.4, β = 0.7; W_cubic(t) = C·(t − K)³ + W_max with
//!   K = ∛((W_max − cwnd_epoch) / C) (§4.2); the target is W_cubic(t + min RTT) as in
//!   Linux (the RFC uses SRTT there), clamped to [cwnd, 1.5·cwnd] (§4.2), and the window
//!   grows by (target − cwnd) / cwnd per delivered segment (§4.4-4.5). Reno-friendly
//!   region (§4.3): W_est grows by α = 3(1 − β)/(1 + β) segments per window, and the window
//!   follows W_est when W_cubic is below it. α stays there once W_est passes the last
//!   W_max, as in Linux (`tcp_friendliness`); RFC 9438's switch to α = 1 there made the
//!   model 17% faster than Linux under 2% random loss (sim-vs-lab's lossy path). Fast
//!   convergence (§4.7). Before the first loss the increase is at least one segment per 20
//!   delivered, as Linux bounds it (`cnt ≤ 20`).
//! - On a congestion event (§4.6): W_max is the window at the event (less with fast
//!   convergence), ssthresh = max(β·cwnd, 2), and a new epoch begins. The window itself is
//!   brought down by the caller (PRR in fast recovery, one segment after an RTO).

use std::time::Duration;

use crate::Instant;

const C: f64 = 0.4;
const BETA: f64 = 0.7;
/// The Reno-friendly region's additive increase, 3(1 − β)/(1 + β) segments a window.
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);
/// HyStart is active from this window (Linux `hystart_low_window`).
const HYSTART_LOW_WINDOW: f64 = 16.0;
/// RTT samples per round before HyStart decides (Linux `HYSTART_MIN_SAMPLES`).
const HYSTART_MIN_SAMPLES: u32 = 8;
const HYSTART_DELAY_MIN: Duration = Duration::from_millis(4);
const HYSTART_DELAY_MAX: Duration = Duration::from_millis(16);
/// Largest window, in segments: far beyond any buffer the hosts allow.
const MAX_WINDOW: f64 = 1e6;

/// Cubic over segments; `S` marks HyStart's rounds: a sequence number ordered as the
/// caller's sequence space is (the simulator's wrapping TCP sequence, a stream path's).
#[derive(Clone, Debug)]
pub struct Cubic<S> {
    /// The congestion window in segments; fractional growth accumulates here.
    cwnd: f64,
    ssthresh: f64,
    /// W_max: the window before the last reduction; 0 before any loss.
    w_max: f64,
    k: f64,
    /// The window the cubic curve starts from (W_max, or cwnd above it).
    origin: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch: Option<Instant>,
    /// W_est of the Reno-friendly region.
    w_est: f64,
    hystart: HyStart<S>,
}

/// HyStart's delay detection (see the module's notes): ends slow start once a round's
/// minimum RTT stands clamp(min / 8, 4 ms, 16 ms) above the connection's minimum.
#[derive(Clone, Copy, Debug)]
pub struct HyStart<S> {
    /// The round ends when this sequence number is acknowledged.
    round_end: Option<S>,
    round_min: Option<Duration>,
    samples: u32,
    done: bool,
}

impl<S> Default for HyStart<S> {
    fn default() -> Self {
        HyStart {
            round_end: None,
            round_min: None,
            samples: 0,
            done: false,
        }
    }
}

impl<S: PartialOrd + Copy> HyStart<S> {
    /// One RTT sample in slow start at a window of `cwnd` segments: `ack` is what the
    /// sample acknowledged, `snd_nxt` the next sequence number to send. True once, when
    /// slow start should end.
    pub fn on_rtt(
        &mut self,
        cwnd: f64,
        ack: S,
        snd_nxt: S,
        rtt: Option<Duration>,
        min_rtt: Duration,
    ) -> bool {
        if self.done {
            return false;
        }
        if self.round_end.is_none_or(|end| ack > end) {
            self.round_end = Some(snd_nxt);
            self.round_min = None;
            self.samples = 0;
        }
        let Some(rtt) = rtt else { return false };
        if cwnd < HYSTART_LOW_WINDOW {
            return false;
        }
        self.round_min = Some(self.round_min.map_or(rtt, |m| m.min(rtt)));
        self.samples += 1;
        if self.samples >= HYSTART_MIN_SAMPLES {
            let threshold = (min_rtt / 8).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX);
            if self.round_min.is_some_and(|m| m > min_rtt + threshold) {
                self.done = true;
                return true;
            }
        }
        false
    }
}

impl<S: PartialOrd + Copy> Cubic<S> {
    /// A window of `initial` segments and no slow-start threshold.
    pub fn new(initial: u32) -> Cubic<S> {
        Cubic {
            cwnd: f64::from(initial.max(1)),
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            k: 0.0,
            origin: 0.0,
            epoch: None,
            w_est: 0.0,
            hystart: HyStart::default(),
        }
    }

    /// The congestion window in whole segments (at least one).
    pub fn window(&self) -> u32 {
        (self.cwnd.floor() as u32).max(1)
    }

    /// The slow-start threshold in segments (`u32::MAX` while unset).
    pub fn ssthresh(&self) -> u32 {
        if self.ssthresh.is_finite() {
            self.ssthresh as u32
        } else {
            u32::MAX
        }
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Sets the window (PRR, the end of recovery, an RTO).
    pub fn set_window(&mut self, segments: u32) {
        self.cwnd = f64::from(segments.max(1));
    }

    /// HyStart's per-ACK bookkeeping, while in slow start: `ack` is the cumulative ACK,
    /// `snd_nxt` the next sequence number to send, `rtt` this ACK's sample.
    pub fn on_rtt(&mut self, ack: S, snd_nxt: S, rtt: Option<Duration>, min_rtt: Duration) {
        if self.cwnd >= self.ssthresh {
            return;
        }
        if self.hystart.on_rtt(self.cwnd, ack, snd_nxt, rtt, min_rtt) {
            self.ssthresh = self.cwnd.floor();
        }
    }

    /// Grows the window for `acked` newly delivered segments (RFC 9438 §4.2-4.5); the
    /// caller calls it only when the window was the limit.
    pub fn on_ack(&mut self, now: Instant, mut acked: u32, min_rtt: Duration) {
        if self.cwnd < self.ssthresh {
            let room = (self.ssthresh - self.cwnd).max(0.0);
            let grow = f64::from(acked).min(room);
            self.cwnd += grow;
            acked -= grow as u32;
            if acked == 0 {
                return;
            }
        }
        let epoch = *self.epoch.get_or_insert_with(|| {
            // §4.2: a new epoch starts at the first ACK in congestion avoidance.
            if self.cwnd < self.w_max {
                self.k = ((self.w_max - self.cwnd) / C).cbrt();
                self.origin = self.w_max;
            } else {
                self.k = 0.0;
                self.origin = self.cwnd;
            }
            self.w_est = self.cwnd;
            now
        });
        let t = (now - epoch + min_rtt).as_secs_f64();
        let target = (self.origin + C * (t - self.k).powi(3)).clamp(self.cwnd, 1.5 * self.cwnd);
        let acked = f64::from(acked);
        let mut grow = acked * (target - self.cwnd) / self.cwnd;
        if self.w_max == 0.0 {
            grow = grow.max(acked / 20.0);
        }
        // §4.3: the Reno-friendly estimate, with Linux's α throughout.
        self.w_est += ALPHA * acked / self.cwnd;
        let cubic = self.cwnd + grow;
        self.cwnd = cubic.max(self.w_est.min(1.5 * self.cwnd)).min(MAX_WINDOW);
    }

    /// TCP-PRISM's proportional decrease (PRISM §6.2.2): of `from` segments, only the
    /// lossy link's `share` is reduced as a loss reduces a whole window, so ssthresh
    /// becomes `from · (1 − (1 − β) · share)` (at least two; a single link, share 1, is
    /// Cubic's own cut), W_max `from`; the epoch and slow start end.
    pub fn on_proportional_decrease(&mut self, share: f64, from: u32) {
        let from = f64::from(from);
        let keep = 1.0 - (1.0 - BETA) * share.clamp(0.0, 1.0);
        self.w_max = from;
        self.ssthresh = (from * keep).floor().max(2.0);
        self.epoch = None;
        self.hystart.done = true;
    }

    /// A congestion event (§4.6-4.7): records W_max, lowers ssthresh, ends the epoch and
    /// slow start. Returns the new ssthresh.
    pub fn on_congestion(&mut self) -> u32 {
        let cwnd = self.cwnd.floor();
        self.w_max = if cwnd < self.w_max {
            cwnd * (1.0 + BETA) / 2.0
        } else {
            cwnd
        };
        self.ssthresh = (cwnd * BETA).floor().max(2.0);
        self.epoch = None;
        self.hystart.done = true;
        self.ssthresh as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(100);

    type Cubic = super::Cubic<u64>;

    #[test]
    fn slow_start_doubles_per_round_and_stops_at_ssthresh() {
        let mut c = Cubic::new(10);
        c.on_ack(Instant::ZERO, 10, RTT);
        assert_eq!(c.window(), 20);
        c.ssthresh = 25.0;
        c.on_ack(Instant::ZERO, 10, RTT);
        assert!(c.window() >= 25 && c.window() < 27, "{}", c.window());
    }

    #[test]
    fn loss_reduces_to_beta_and_cubic_regrows_to_w_max_in_k() {
        let mut c = Cubic::new(100);
        c.ssthresh = 100.0;
        assert_eq!(c.on_congestion(), 70);
        c.set_window(70);
        // K = cbrt(30 / 0.4) ≈ 4.2 s: the window is back near W_max then.
        let mut now = Instant::ZERO;
        let step = Duration::from_millis(10);
        while now < Instant::from_millis(4100) {
            let w = c.window();
            c.on_ack(now, w / 10, RTT);
            now += step;
        }
        let w = c.window();
        assert!((95..=101).contains(&w), "{w}");
        // Then convex growth beyond it.
        while now < Instant::from_millis(8000) {
            let w = c.window();
            c.on_ack(now, w / 10, RTT);
            now += step;
        }
        assert!(c.window() > 120, "{}", c.window());
    }

    #[test]
    fn reno_friendly_growth_stays_linux_alpha_past_w_max() {
        let mut c = Cubic::new(10);
        c.ssthresh = 10.0;
        c.on_congestion();
        c.set_window(7);
        // One window acknowledged per 100 ms for 4 s: W_est gains α ≈ 0.53 a round trip
        // (to about 28) while the cubic curve is still near W_max (about 14). RFC 9438's
        // α = 1 past W_max would reach about 44.
        let mut now = Instant::ZERO;
        for _ in 0..40 {
            let w = c.window();
            c.on_ack(now, w, RTT);
            now += RTT;
        }
        assert!((26..=30).contains(&c.window()), "{}", c.window());
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = Cubic::new(100);
        c.on_congestion();
        c.set_window(80);
        c.on_congestion();
        assert_eq!(c.w_max, 80.0 * 0.85);
    }

    #[test]
    fn hystart_leaves_slow_start_when_the_rtt_grows() {
        let mut c = Cubic::new(32);
        let min = RTT;
        let mut ack = 0u64;
        for _ in 0..20 {
            ack += 1000;
            c.on_rtt(ack, ack + 100_000, Some(min), min);
        }
        assert!(c.in_slow_start());
        // A new round with samples 20 ms above the minimum.
        ack += 200_000;
        for _ in 0..8 {
            ack += 10;
            c.on_rtt(
                ack,
                ack + 100_000,
                Some(min + Duration::from_millis(20)),
                min,
            );
        }
        assert!(!c.in_slow_start());
        assert_eq!(c.ssthresh(), 32);
    }
}
