//! oSCTP's window-based schedulers (§IV-D), in packet mode.
//!
//! oSCTP schedules on a path "as long as the congestion window on the path is open". braid
//! carries packets, not a byte stream with its own congestion control, so each path gets a
//! window derived from its estimates instead: its capacity over the time a datagram counts
//! as in flight, plus a feedback allowance (feedback comes piggybacked or in reports, so its
//! lag varies by up to a report interval), with 25% headroom and at least [`MIN_WINDOW`]
//! datagrams:
//!
//! `window = max(MIN_WINDOW, 1.25 · capacity · (feedback delay + FEEDBACK_ALLOWANCE) / 1500 B)`
//!
//! In flight is counted from the peer's feedback (reports, and path acks piggybacked on
//! every datagram): datagrams sent on the path after the highest path sequence number the
//! peer reported ([`Path::unacked_datagrams`]). The time a datagram counts is the path's
//! feedback delay ([`Path::feedback_delay`], the smallest recent one): the path's one-way
//! delay plus the feedback's way back, which may be on a faster path. Deviation from a
//! literal "bandwidth-delay product over the RTT": the smoothed RTT includes the queue the
//! window builds (so the window grows with the queue it fills, until the bottleneck drops),
//! and on paths of unequal delay it counts the slow path's delay twice where its feedback
//! returns over a fast path. Before the first feedback the smallest RTT measured stands in,
//! then [`DEFAULT_RTT`]. When no window is open the packet is held until feedback opens
//! one.
//!
//! - [`Lazy`]: keep sending on the current path until its window is full, then switch to the
//!   next path with an open window.
//! - [`SmallestRtt`]: always the path with the smallest RTT whose window is open (oSCTP's
//!   default and best scheduler). Paths not yet measured count as fastest, to measure them.

use std::time::Duration;

use super::{candidates, Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::Instant;

/// Smallest window, datagrams.
pub const MIN_WINDOW: u32 = 4;
/// Feedback lag added to the RTT.
pub const FEEDBACK_ALLOWANCE: Duration = Duration::from_millis(50);
/// RTT assumed before the first measurement.
pub const DEFAULT_RTT: Duration = Duration::from_millis(100);

/// The packet-mode window of `p`, datagrams.
pub fn window(p: &Path) -> u32 {
    let base = p
        .feedback_delay()
        .or_else(|| p.rtt().min())
        .unwrap_or(DEFAULT_RTT);
    let rtt = base + FEEDBACK_ALLOWANCE;
    let bytes = p.capacity_bps() as f64 / 8.0 * rtt.as_secs_f64() * 1.25;
    ((bytes / 1500.0).ceil() as u32).max(MIN_WINDOW)
}

fn open(p: &Path) -> bool {
    p.unacked_datagrams() < window(p)
}

#[derive(Clone, Debug, Default)]
pub struct Lazy {
    current: usize,
}

impl Scheduler for Lazy {
    fn select(&mut self, _now: Instant, _packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        let n = paths.len();
        let start = self.current % n.max(1);
        let usable: Vec<usize> = candidates(paths).map(|(i, _)| i).collect();
        let pick = (0..n)
            .map(|k| (start + k) % n)
            .find(|i| usable.contains(i) && open(&paths[*i]));
        match pick {
            Some(i) => {
                self.current = i;
                Choice::Path(paths[i].id())
            }
            None => Choice::Hold,
        }
    }

    fn name(&self) -> &'static str {
        "lazy"
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct SmallestRtt;

impl Scheduler for SmallestRtt {
    fn select(&mut self, _now: Instant, _packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        candidates(paths)
            .filter(|(_, p)| open(p))
            .min_by_key(|(_, p)| (p.srtt().unwrap_or(Duration::ZERO), p.id()))
            .map_or(Choice::Hold, |(_, p)| Choice::Path(p.id()))
    }

    fn name(&self) -> &'static str {
        "smallest-rtt"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    #[test]
    fn window_is_the_bdp_with_feedback_allowance() {
        // 1.2 Mbit/s, 150 ms RTT: 150 kB/s × 0.2 s × 1.25 = 37.5 kB = 25 datagrams.
        let p = PathSpec::new(0, 1_200_000).rtt_ms(150).build();
        assert_eq!(window(&p), 25);
        // A slow, short path still gets the minimum.
        let p = PathSpec::new(0, 64_000).rtt_ms(10).build();
        assert_eq!(window(&p), MIN_WINDOW);
    }

    #[test]
    fn smallest_rtt_takes_the_fastest_open_window() {
        let ps = paths(&[
            PathSpec::new(0, 1_200_000).rtt_ms(150),
            PathSpec::new(1, 1_200_000).rtt_ms(50).in_flight(5),
        ]);
        // Path 1's window: 150 kB/s × 0.1 s × 1.25 = 12.5 of 1500 B → 13; 5 in flight: open.
        assert_eq!(SmallestRtt.select(T0, &meta(0), &ps), Choice::Path(1));
        let ps = paths(&[
            PathSpec::new(0, 1_200_000).rtt_ms(150),
            PathSpec::new(1, 1_200_000).rtt_ms(50).in_flight(13),
        ]);
        assert_eq!(SmallestRtt.select(T0, &meta(0), &ps), Choice::Path(0));
        let ps = paths(&[
            PathSpec::new(0, 1_200_000).rtt_ms(150).in_flight(25),
            PathSpec::new(1, 1_200_000).rtt_ms(50).in_flight(13),
        ]);
        assert_eq!(SmallestRtt.select(T0, &meta(0), &ps), Choice::Hold);
    }

    #[test]
    fn lazy_stays_until_the_window_fills() {
        let mut s = Lazy::default();
        let ps = paths(&[
            PathSpec::new(0, 1_200_000).rtt_ms(150).in_flight(3),
            PathSpec::new(1, 1_200_000).rtt_ms(50),
        ]);
        assert_eq!(s.select(T0, &meta(0), &ps), Choice::Path(0));
        let ps = paths(&[
            PathSpec::new(0, 1_200_000).rtt_ms(150).in_flight(25),
            PathSpec::new(1, 1_200_000).rtt_ms(50),
        ]);
        assert_eq!(s.select(T0, &meta(1), &ps), Choice::Path(1));
        // Now path 1 is current, and stays so while open even though path 0 reopened.
        let ps = paths(&[
            PathSpec::new(0, 1_200_000).rtt_ms(150),
            PathSpec::new(1, 1_200_000).rtt_ms(50).in_flight(12),
        ]);
        assert_eq!(s.select(T0, &meta(2), &ps), Choice::Path(1));
    }
}
