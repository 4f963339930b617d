//! The loss/delay controller of packet mode (`path_cc = "loss-delay"`): a multiplicative
//! factor on the rate window of [`super::window`], cut when the path's own bottleneck
//! shows congestion and grown back while it does not. The rate window alone has no loss
//! response: a path whose delivery-rate estimate runs ahead of its link (a slow EV-DO
//! uplink read at several times its rate from bunched acknowledgements) keeps its window
//! while its bottleneck drops and queues (docs/benchmarks.md, "Real links").
//!
//! Congestion is a datagram the peer's path acknowledgements skip past (a loss on this
//! path, outages left out) or a reported bottleneck wait above [`DELAY_LIMIT`]; either
//! cuts the factor by [`BETA`], at most once per round trip: a signal counts only when
//! the datagram acknowledged with it was sent after the last cut, as TCP's recovery
//! episode counts one loss per window. Each window's worth of acknowledged bytes without
//! a cut adds [`INCREASE`] back (additive increase, in units of the rate window), up to 1.

use std::time::Duration;

use crate::Instant;

/// Factor a congestion signal multiplies the window by (CUBIC's β).
pub const BETA: f64 = 0.7;
/// Smallest factor: the rate estimate is at worst a few times the link's rate.
pub const MIN_SCALE: f64 = 1.0 / 16.0;
/// Factor regained per window of acknowledged bytes without congestion.
pub const INCREASE: f64 = 0.1;
/// Reported bottleneck waits above this are congestion: four times the rate window's
/// queue allowance (`window::QUEUE_TARGET`), so that delay-based's longer allowance for
/// a short path beside a long one is not fought.
pub const DELAY_LIMIT: Duration = Duration::from_millis(280);

/// One path's loss/delay factor.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    scale: f64,
    /// When the last cut was made: signals about datagrams sent before it are not new.
    last_cut: Option<Instant>,
    cuts: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            scale: 1.0,
            last_cut: None,
            cuts: 0,
        }
    }
}

impl Backoff {
    /// The factor on the rate window, in [[`MIN_SCALE`], 1].
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Cuts made so far.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// The window `window` (bytes, from the rate model) scaled, never below `floor`
    /// unless the rate window itself is.
    pub fn apply(&self, window: u64, floor: u64) -> u64 {
        if window == u64::MAX {
            return window;
        }
        ((window as f64 * self.scale) as u64).max(floor.min(window))
    }

    /// An acknowledgement arrived at `now` covering `acked_bytes` newly, `lost` datagrams
    /// skipped past (outages left out by the caller), the newest acknowledged sent at
    /// `sent` and waiting `queue` at the bottleneck when the peer says; `window` is the
    /// scaled window in bytes.
    pub fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        acked_bytes: u64,
        lost: u32,
        queue: Option<Duration>,
        window: u64,
    ) {
        let congested = lost > 0 || queue.is_some_and(|q| q > DELAY_LIMIT);
        let fresh = self.last_cut.is_none_or(|c| sent >= c);
        if congested {
            if fresh {
                self.scale = (self.scale * BETA).max(MIN_SCALE);
                self.last_cut = Some(now);
                self.cuts += 1;
            }
            return;
        }
        if window > 0 && window != u64::MAX && self.scale < 1.0 {
            let grow = INCREASE * acked_bytes as f64 / window as f64;
            self.scale = (self.scale + grow).min(1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    #[test]
    fn a_loss_cuts_once_per_round_trip() {
        let mut b = Backoff::default();
        b.on_ack(ms(100), ms(50), 1500, 1, None, 100_000);
        assert!((b.scale() - BETA).abs() < 1e-9);
        // More losses of datagrams sent before the cut: the same episode.
        b.on_ack(ms(120), ms(90), 1500, 2, None, 70_000);
        assert!((b.scale() - BETA).abs() < 1e-9);
        assert_eq!(b.cuts(), 1);
        // A loss of a datagram sent after the cut is new congestion.
        b.on_ack(ms(250), ms(150), 1500, 1, None, 70_000);
        assert!((b.scale() - BETA * BETA).abs() < 1e-9);
        assert_eq!(b.cuts(), 2);
    }

    #[test]
    fn a_long_bottleneck_wait_cuts_and_a_short_one_does_not() {
        let mut b = Backoff::default();
        b.on_ack(
            ms(100),
            ms(50),
            0,
            0,
            Some(Duration::from_millis(200)),
            100_000,
        );
        assert_eq!(b.scale(), 1.0);
        b.on_ack(
            ms(110),
            ms(60),
            0,
            0,
            Some(Duration::from_millis(400)),
            100_000,
        );
        assert!((b.scale() - BETA).abs() < 1e-9);
    }

    #[test]
    fn a_window_of_clean_acknowledgements_adds_the_increase() {
        let mut b = Backoff::default();
        b.on_ack(ms(100), ms(50), 0, 1, None, 100_000);
        // 70 000 bytes acknowledged against a 70 000-byte window: + INCREASE.
        for t in 0..7 {
            b.on_ack(ms(200 + t), ms(150 + t), 10_000, 0, None, 70_000);
        }
        assert!(
            (b.scale() - (BETA + INCREASE)).abs() < 1e-9,
            "{}",
            b.scale()
        );
        // Never above 1.
        for t in 0..100 {
            b.on_ack(ms(300 + t), ms(250 + t), 70_000, 0, None, 70_000);
        }
        assert_eq!(b.scale(), 1.0);
    }

    #[test]
    fn the_factor_stops_at_its_floor_and_the_window_at_the_smallest() {
        let mut b = Backoff::default();
        for t in 0..40 {
            b.on_ack(ms(100 * t + 10), ms(100 * t + 5), 0, 1, None, 100_000);
        }
        assert_eq!(b.scale(), MIN_SCALE);
        assert_eq!(b.apply(160_000, 6_000), 10_000);
        assert_eq!(b.apply(32_000, 6_000), 6_000);
        assert_eq!(b.apply(4_000, 6_000), 4_000);
        assert_eq!(b.apply(u64::MAX, 6_000), u64::MAX);
    }

    #[test]
    fn a_loss_at_the_paths_bottleneck_shrinks_only_the_loss_delay_window() {
        use crate::path::{Path, SentKind};
        use crate::{PathCc, PathConfig};
        let path = |cc| {
            let mut p = Path::new(
                &PathConfig {
                    id: 0,
                    tx_capacity_bps: 10_000_000,
                    rx_capacity_bps: 10_000_000,
                },
                Duration::from_millis(500),
                Instant::ZERO,
            );
            p.set_cc(cc);
            p
        };
        let (mut rate, mut ld) = (path(PathCc::Rate), path(PathCc::LossDelay));
        for p in [&mut rate, &mut ld] {
            // 40 datagrams over 40 ms; the peer got the first 20, then 18 of the next 20.
            for i in 0..40 {
                p.on_send(ms(i), 1500, SentKind::Data);
            }
            p.on_path_ack(ms(60), 19, 20, Some(Duration::ZERO));
            p.on_path_ack(ms(80), 39, 38, Some(Duration::ZERO));
        }
        let now = ms(80);
        assert_eq!(rate.backoff(), (1.0, 0));
        assert_eq!(ld.backoff(), (BETA, 1));
        let full = rate.window(now);
        assert!(full > 10 * 1500 && full < u64::MAX, "{full}");
        assert_eq!(ld.window(now), ((full as f64 * BETA) as u64).max(6_000));
    }
}
