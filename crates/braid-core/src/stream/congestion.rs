//! One path's congestion window (RFC 4960 §7.2) and the loss responses the stream offers.
//!
//! Slow start grows the window by at most one MTU per SACK, congestion avoidance by about
//! one MTU per window acknowledged; either only while the window was fully used (§7.2.1).
//! The increase is Reno's, or RFC 6356's coupled LIA, whose per-ack step is capped by the
//! aggregate window so that the paths together take no more than one TCP would.

use std::time::Duration;

use super::hystart::{self, HyStartPp, Verdict};
use crate::cubic::HyStart;

/// How a path's window answers a fast retransmit on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LossResponse {
    /// Reno's: ssthresh = cwnd / 2 (RFC 4960 §7.2.3), uncoupled increase.
    Halving,
    /// PRISM §6.2.2's Additive Increase, Proportional Decrease, per path: the window is cut
    /// by half the path's share of the summed rate, so a lone path halves as Reno does and a
    /// path carrying little of the total barely slows. (The paper's formula for p is
    /// garbled in our copy; this is the reading that agrees with Reno on one link.)
    /// braid's default: the slow long path of osctp-fig9-stream's panel b halves its
    /// window at each overflow of its queue, where it carries a third of the total.
    #[default]
    Proportional,
    /// RFC 6356's Linked Increases: halving, with the coupled increase.
    Lia,
}

/// A delay bound on a path's window (TCP Vegas's rule, Brakmo & Peterson 1994, applied
/// as a cut): once the smoothed RTT exceeds the path's minimum RTT of the last
/// [`DelayBound::MIN_RTT_WINDOW`] by more than `allowance`, the window falls to what the
/// path delivers at that RTT times min RTT + allowance (cwnd x target / srtt, the delivery
/// rate being cwnd / srtt), at most once per RTT. The loss responses stay as they are;
/// this keeps the bottleneck queue near `allowance` instead of full, so RTTs, RTOs and a
/// failover's resend stay short (osctp-fig11).
#[derive(Clone, Copy, Debug)]
pub struct DelayBound {
    /// Queueing delay the path may hold above its minimum RTT.
    pub allowance: Duration,
}

impl DelayBound {
    /// The bound on a metered path (one with an allowance, `StreamSender::set_allowance`):
    /// its bytes cost, and a loss-based window that overflows its queue pays for the drops.
    /// osctp-table1 (quick, seeds 1, 2, 4): metered bytes sent and never delivered 245-441 kB
    /// a run without it, 0-19 kB with 60 ms, and metered bytes over the oracle 1.043-1.049
    /// -> 1.023-1.033 at the same goodput; 30 ms cost 3-5% of the goodput, 100 ms left
    /// 17-78 kB undelivered.
    pub const METERED: DelayBound = DelayBound {
        allowance: Duration::from_millis(60),
    };

    /// How long a minimum RTT counts (BBR's 10 s window), so that a path whose base delay
    /// grew is not cut for ever.
    pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);

    /// The window a path may keep at `srtt` over `min_rtt`, or None if under the bound.
    pub fn cap(self, cwnd: u64, srtt: Duration, min_rtt: Duration) -> Option<u64> {
        let target = min_rtt + self.allowance;
        (srtt > target)
            .then(|| (cwnd as f64 * target.as_secs_f64() / srtt.as_secs_f64().max(1e-6)) as u64)
    }
}

/// A minimum over a sliding window, kept in two halves: the minimum of the current half
/// and of the one before, so a sample older than the window to 1.5 windows is forgotten.
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowedMin {
    /// (start of the half, its minimum)
    current: Option<(crate::Instant, Duration)>,
    previous: Option<Duration>,
}

impl WindowedMin {
    pub fn update(&mut self, now: crate::Instant, sample: Duration, window: Duration) {
        match self.current {
            Some((start, min)) if now.saturating_duration_since(start) < window / 2 => {
                self.current = Some((start, min.min(sample)));
            }
            Some((_, min)) => {
                self.previous = Some(min);
                self.current = Some((now, sample));
            }
            None => self.current = Some((now, sample)),
        }
    }

    pub fn get(&self) -> Option<Duration> {
        let cur = self.current.map(|c| c.1);
        match (cur, self.previous) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// How a path's window grows in slow start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlowStart {
    /// RFC 4960 §7.2.1: by at most one MTU per SACK, until the first loss. oSCTP's.
    #[default]
    PerSack,
    /// A deviation from oSCTP, selectable: by every byte newly acknowledged (RFC 3465's
    /// byte counting with no per-ack limit, as Linux counts), left once HyStart sees the
    /// path's RTT grow ([`crate::cubic::HyStart`]). The receiver spaces SACKs, about six
    /// chunks each on a fast path, so one MTU per SACK fills such a path slowly
    /// (trace-stream's mpw-7_1). Not split-TCP's: the lab demo's short download fell with
    /// it ([`super::split::stream_config`]).
    HyStart,
    /// A deviation from oSCTP, selectable: byte-counted as [`SlowStart::HyStart`] (at
    /// most 8 MTU per SACK, RFC 9406's L for an unpaced sender), left by RFC 9406's
    /// HyStart++ ([`super::hystart`]): a round's RTT rise enters Conservative Slow Start,
    /// which returns to slow start if the rise was jitter. Not split-TCP's either: it
    /// lifted the recorded sets and the lab demo's short download, but on lab-split-tcp's
    /// four paths most paths saw too few of their own SACKs per round to decide, so slow
    /// start ended by loss, and the figure fell (docs/benchmarks.md).
    HyStartPlusPlus,
}

/// One path's window state, bytes.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    mtu: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Fractional congestion-avoidance increase not yet added, bytes.
    credit: f64,
    /// How slow start grows and ends, with its detector's state.
    slow_start: SlowStartState,
}

/// [`SlowStart`] with its exit detector's state.
#[derive(Clone, Copy, Debug)]
enum SlowStartState {
    PerSack,
    HyStart(HyStart<u64>),
    HyStartPp(HyStartPp),
}

/// RFC 6356 §3's coupling inputs, over the live paths.
#[derive(Clone, Copy, Debug)]
pub struct Coupling {
    pub alpha: f64,
    pub total_cwnd: f64,
}

impl Coupling {
    /// alpha = cwnd_total * max(cwnd_i / rtt_i^2) / (sum cwnd_i / rtt_i)^2, from
    /// `(cwnd bytes, rtt seconds)` per live path.
    pub fn new(paths: impl Iterator<Item = (f64, f64)> + Clone) -> Self {
        let total: f64 = paths.clone().map(|(c, _)| c).sum();
        let best = paths.clone().map(|(c, r)| c / (r * r)).fold(0.0, f64::max);
        let sum: f64 = paths.map(|(c, r)| c / r).sum();
        let alpha = if sum > 0.0 {
            total * best / (sum * sum)
        } else {
            1.0
        };
        Coupling {
            alpha,
            total_cwnd: total.max(1.0),
        }
    }
}

impl Window {
    /// RFC 4960 §7.2.1: initial cwnd min(4 MTU, max(2 MTU, 4380)), ssthresh unbounded.
    pub fn new(mtu: u64, slow_start: SlowStart) -> Self {
        Window {
            mtu,
            cwnd: (4 * mtu).min((2 * mtu).max(4380)),
            ssthresh: u64::MAX,
            credit: 0.0,
            slow_start: match slow_start {
                SlowStart::PerSack => SlowStartState::PerSack,
                SlowStart::HyStart => SlowStartState::HyStart(HyStart::default()),
                SlowStart::HyStartPlusPlus => SlowStartState::HyStartPp(HyStartPp::default()),
            },
        }
    }

    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// `bytes` newly acknowledged on the path by a SACK that may advance the window.
    pub fn on_ack(&mut self, bytes: u64, coupling: Option<Coupling>) {
        if self.cwnd <= self.ssthresh {
            // Byte-counted growth stops at the threshold (one MTU more at it, as RFC 4960
            // has it).
            let cap = self.ssthresh.max(self.cwnd + self.mtu);
            self.cwnd = match self.slow_start {
                SlowStartState::PerSack => self.cwnd + bytes.min(self.mtu),
                SlowStartState::HyStart(_) => (self.cwnd + bytes).min(cap),
                SlowStartState::HyStartPp(h) => {
                    let grown = bytes.min(hystart::L * self.mtu) / h.growth_divisor();
                    (self.cwnd + grown).min(cap)
                }
            };
            return;
        }
        let (b, m, w) = (bytes as f64, self.mtu as f64, self.cwnd as f64);
        let reno = b * m / w;
        self.credit += match coupling {
            None => reno,
            Some(c) => (c.alpha * b * m / c.total_cwnd).min(reno),
        };
        let whole = self.credit.floor();
        self.cwnd += whole as u64;
        self.credit -= whole;
    }

    /// [`SlowStart::HyStart`] and [`SlowStart::HyStartPlusPlus`]: a chunk sent once as
    /// `psn` was acknowledged after `rtt` by a SACK that came back on the path itself;
    /// `next_psn` is the path's next to send and `min_rtt` the least such sample. Slow
    /// start ends where HyStart (or HyStart++) says.
    pub fn on_rtt(&mut self, psn: u64, next_psn: u64, rtt: Duration, min_rtt: Duration) {
        if self.cwnd > self.ssthresh {
            return;
        }
        let segments = (self.cwnd / self.mtu.max(1)) as f64;
        let exit = match &mut self.slow_start {
            SlowStartState::PerSack => false,
            SlowStartState::HyStart(h) => h.on_rtt(segments, psn, next_psn, Some(rtt), min_rtt),
            SlowStartState::HyStartPp(h) => h.on_rtt(psn, next_psn, rtt) == Verdict::Exit,
        };
        if exit {
            self.ssthresh = self.cwnd;
        }
    }

    /// A fast retransmit on this path: the window keeps `keep` of itself, at least 4 MTU.
    pub fn on_loss(&mut self, keep: f64) {
        self.ssthresh = ((self.cwnd as f64 * keep) as u64).max(4 * self.mtu);
        self.cwnd = self.ssthresh;
        self.credit = 0.0;
        self.end_hystart_pp();
    }

    /// Slow start again up to `ssthresh` at least (a path revived after a failure).
    pub fn restart_slow_start(&mut self, ssthresh: u64) {
        self.ssthresh = self.ssthresh.max(ssthresh);
    }

    /// The delay bound's cut ([`DelayBound`]): the window falls to `cap` (at least 4 MTU)
    /// and slow start ends there, as TCP Vegas leaves slow start at its expected rate.
    pub fn cap(&mut self, cap: u64) {
        let cap = cap.max(4 * self.mtu);
        if self.cwnd > cap {
            self.cwnd = cap;
            self.credit = 0.0;
        }
        self.ssthresh = self.ssthresh.min(self.cwnd);
        self.end_hystart_pp();
    }

    fn end_hystart_pp(&mut self) {
        if let SlowStartState::HyStartPp(h) = &mut self.slow_start {
            h.finish();
        }
    }

    /// Undoes a cut proven needless: back to `prior`'s window and threshold where they
    /// are larger (RFC 4015 §3.2's restore, as Linux undoes on DSACK).
    pub fn undo(&mut self, prior: Window) {
        if prior.cwnd > self.cwnd {
            self.cwnd = prior.cwnd;
            self.credit = 0.0;
        }
        if prior.ssthresh > self.ssthresh {
            // Back in slow start: its detector as it was before the cut.
            self.slow_start = prior.slow_start;
        }
        self.ssthresh = self.ssthresh.max(prior.ssthresh);
    }

    /// RFC 4960 §7.2.3: a T3-rtx expiry leaves one MTU.
    pub fn on_timeout(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(4 * self.mtu);
        self.cwnd = self.mtu;
        self.credit = 0.0;
        self.end_hystart_pp();
    }
}

impl LossResponse {
    /// The share of its window a path keeps on a loss, given its share of the summed rate.
    pub fn keep(self, rate_share: f64) -> f64 {
        match self {
            LossResponse::Halving | LossResponse::Lia => 0.5,
            LossResponse::Proportional => 1.0 - rate_share.clamp(0.0, 1.0) / 2.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_avoidance() {
        let mut w = Window::new(1000, SlowStart::PerSack);
        assert_eq!(w.cwnd(), 4000);
        w.on_ack(3000, None);
        assert_eq!(w.cwnd(), 5000);
        w.on_loss(0.5);
        assert_eq!((w.cwnd(), w.ssthresh()), (4000, 4000));
        // cwnd <= ssthresh is still slow start (RFC 4960 §7.2.1): one MTU
        w.on_ack(1000, None);
        assert_eq!(w.cwnd(), 5000);
        for _ in 0..5 {
            w.on_ack(1000, None);
        }
        // then about one MTU per window acknowledged
        assert!(w.cwnd() > 5800 && w.cwnd() < 6000, "{}", w.cwnd());
        w.on_timeout();
        assert_eq!(w.cwnd(), 1000);
    }

    #[test]
    fn hystart_slow_start_counts_bytes_and_ends_when_the_rtt_grows() {
        let ms = Duration::from_millis;
        let mut per_sack = Window::new(1000, SlowStart::PerSack);
        let mut hystart = Window::new(1000, SlowStart::HyStart);
        // A SACK of six chunks: one MTU, or all six.
        per_sack.on_ack(6000, None);
        hystart.on_ack(6000, None);
        assert_eq!((per_sack.cwnd(), hystart.cwnd()), (5000, 10_000));
        for _ in 0..3 {
            hystart.on_ack(10_000, None);
        }
        assert_eq!(hystart.cwnd(), 40_000);
        // A round of samples at the path's minimum, then one 20 ms above it.
        for psn in 0..10 {
            hystart.on_rtt(psn, 40, ms(100), ms(100));
        }
        assert_eq!(hystart.ssthresh(), u64::MAX);
        for psn in 41..50 {
            hystart.on_rtt(psn, 80, ms(120), ms(100));
        }
        assert_eq!(hystart.ssthresh(), 40_000);
        // Congestion avoidance from there.
        hystart.on_ack(40_000, None);
        assert_eq!(hystart.cwnd(), 41_000);
    }

    #[test]
    fn hystart_pp_counts_bytes_slows_in_css_and_ends_on_loss() {
        let ms = Duration::from_millis;
        let mut w = Window::new(1000, SlowStart::HyStartPlusPlus);
        // Every byte, at most 8 MTU per SACK (RFC 9406's L).
        w.on_ack(6000, None);
        assert_eq!(w.cwnd(), 10_000);
        w.on_ack(20_000, None);
        assert_eq!(w.cwnd(), 18_000);
        // Two rounds, the second 20 ms above the first: Conservative Slow Start.
        for psn in 0..10 {
            w.on_rtt(psn, 20, ms(100), ms(100));
        }
        for psn in 20..30 {
            w.on_rtt(psn, 40, ms(120), ms(100));
        }
        assert_eq!(w.ssthresh(), u64::MAX);
        w.on_ack(8000, None);
        assert_eq!(w.cwnd(), 20_000);
        // A loss ends slow start for good.
        w.on_loss(0.5);
        w.on_ack(10_000, None);
        assert_eq!(w.ssthresh(), 10_000);
        for psn in 40..50 {
            w.on_rtt(psn, 60, ms(90), ms(90));
        }
        w.on_ack(10_000, None);
        assert!(w.cwnd() < 12_000, "{}", w.cwnd());
    }

    #[test]
    fn delay_bound_cuts_to_the_target_rtt() {
        let ms = Duration::from_millis;
        let b = DelayBound { allowance: ms(20) };
        // 100 ms base, 20 ms allowed: at 120 ms nothing, at 240 ms the window halves.
        assert_eq!(b.cap(48_000, ms(120), ms(100)), None);
        assert_eq!(b.cap(48_000, ms(240), ms(100)), Some(24_000));
        let mut w = Window::new(1000, SlowStart::PerSack);
        for _ in 0..40 {
            w.on_ack(1000, None);
        }
        assert_eq!(w.cwnd(), 44_000);
        w.cap(24_000);
        // slow start ends at the cap; the floor is 4 MTU
        assert_eq!((w.cwnd(), w.ssthresh()), (24_000, 24_000));
        w.cap(100);
        assert_eq!(w.cwnd(), 4000);
    }

    #[test]
    fn windowed_min_forgets_old_samples() {
        let ms = Duration::from_millis;
        let at = |s: u64| crate::Instant::from_micros(s * 1_000_000);
        let mut m = WindowedMin::default();
        m.update(at(0), ms(50), Duration::from_secs(10));
        m.update(at(3), ms(80), Duration::from_secs(10));
        assert_eq!(m.get(), Some(ms(50)));
        m.update(at(6), ms(90), Duration::from_secs(10));
        assert_eq!(m.get(), Some(ms(50)));
        m.update(at(12), ms(95), Duration::from_secs(10));
        assert_eq!(m.get(), Some(ms(90)));
    }

    #[test]
    fn proportional_decrease_follows_the_share() {
        assert_eq!(LossResponse::Proportional.keep(1.0), 0.5);
        assert_eq!(LossResponse::Proportional.keep(0.2), 0.9);
        assert_eq!(LossResponse::Halving.keep(0.2), 0.5);
    }

    #[test]
    fn lia_takes_no_more_than_one_path_would() {
        // Two equal paths: alpha = 2 * (c/r^2) / (2c/r)^2 * c = 1/2 of total... the step
        // is alpha/total per byte = half of Reno's on each path.
        let c = Coupling::new([(10_000.0, 0.1), (10_000.0, 0.1)].into_iter());
        assert!((c.alpha - 0.5).abs() < 1e-9);
        let mut coupled = Window::new(1000, SlowStart::PerSack);
        let mut reno = Window::new(1000, SlowStart::PerSack);
        coupled.on_loss(0.5);
        reno.on_loss(0.5);
        for _ in 0..100 {
            coupled.on_ack(1000, Some(c));
            reno.on_ack(1000, None);
        }
        assert!(coupled.cwnd() < reno.cwnd());
    }
}
