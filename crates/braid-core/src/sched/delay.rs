//! PluriBus's delay-based path selection (§3.2 component 2, §4.3): each packet goes on the
//! path likely to deliver it first, the one minimizing
//! `PacketSize / PathCapacity + QueueLength + (d + δ)`, from the sender's queue model
//! (§4.2) and the receiver's reports of capacity and propagation delay plus skew. It keeps
//! using the shortest path until its queue brings its delay up to the next path's, then
//! spreads, which generalizes round-robin to paths of different delay and capacity and
//! keeps reordering small.
//!
//! Beyond the paper: the bottleneck queue is capped. When the path that would deliver first
//! already has [`QUEUE_CAP`] of queue in the sender's model, the packet waits in the
//! session's send queue instead of joining it; the send queue's backlog then counts in the predicted delivery of the paths
//! at the cap (it waits for them), so the next path takes over when the backlog brings their
//! delivery up to its own, as an uncapped queue would have. Waiting at the sender delivers a
//! packet no later than queueing at the bottleneck would, but the bottleneck's drop-tail queue (often
//! 250 ms or less) no longer overflows while the shortest path's queue grows towards the
//! next path's delay: on a 50 ms path beside a 400 ms one, equal delivery needs 350 ms of
//! queue, and without the cap the inner TCP sees drops at the short path's bottleneck before
//! the long path is ever used (osctp-fig9, panel b). When the send queue takes
//! [`HOLD_MAX`] to drain, the session refuses new packets until it shrinks: the congestion
//! signal comes from the sender's drop-tail instead of a burst into the bottleneck, which
//! the loss guard would also take for a lossy path. Refusing new packets rather than
//! dropping the waiting one keeps data sequence numbers free of holes.
//!
//! Also beyond the paper: each path's congestion window ([`crate::path::window`]) caps it
//! too. A path whose window is full counts as at the cap, so the packet waits or goes to a
//! path with room: the queue model (from the capacity estimate) and the window (from the
//! measured delivery rate) agree on a link of steady rate, and on a cellular link whose
//! rate just fell the window, clocked by acknowledgements, holds the packets the model
//! would still send (issue table of docs/benchmarks.md, "Real links": bottleneck drops per
//! MB delivered 54 -> 8 on the first recorded pair). The window's queue allowance grows
//! with the path's delay gap to the slowest usable path (from the window's 70 ms up to
//! [`QUEUE_CAP`]): equalizing a short path with a long one is what its queue is for.
//! Redundant copies of short flows heed the queue model only: a window sized by light
//! traffic would starve them.
//!
//! Also beyond the paper: the first [`SHORT_FLOW`] packets of a flow go redundantly (a copy
//! on every live path) while the loss guard ([`crate::sched::guard`]) has set aside a live
//! path of shorter delay than those left. A short flow's completion time is a few round trips,
//! and one loss costs it a retransmission timeout; the copies make it as fast as the
//! fastest path and as reliable as all of them together, for a few packets' capacity. Long
//! flows are placed as above (duplicating them would halve the bond's capacity), and the
//! loss guard keeps them off the lossy path (never-worse, "both lossy": a 30 ms path losing
//! 5% beside a 60 ms one losing 1%). The session sends a redundant packet's original on the
//! first live path and copies where [`DelayBased::wants_copy`] agrees, so a short flow goes
//! redundantly only while the first live path's queue is under the cap; otherwise it is
//! placed (or held) as above; the same holds for the loss-limited bond below. Originals
//! passing the cap overflowed the slower PluriBus bus link at high load, and the queue
//! model then counted queue its bottleneck had dropped: pluribus-fig17 fell from 0.95 to
//! 0.82 of packets within 10 ms of prediction (0.997 now).
//!
//! When every live path is so lossy that a TCP flow over it alone is limited by its losses
//! to less than half its capacity (the Mathis et al. bound `MSS / RTT · 1.22 / √p` over the
//! path's minimum RTT and long-term loss rate; the smoothed RTT would include the queue
//! braid's own sending builds, and under load that alone made a bond look loss-limited and
//! everything redundant: full pluribus-fig17 at scale 8 read 0.82, 0.91 with the minimum),
//! all packets go redundantly: the bond then loses
//! only what every path loses at once (0.05% for paths losing 5% and 1%), which the inner
//! TCP turns into far more goodput than any path alone gives, since what limits it is
//! loss, not capacity (never-worse, "both lossy", bulk).
//!
//! A path the peer has not yet reported a delay for is assumed as fast as the fastest known
//! path (so it gets tried and measured); before any report, all paths compare by queue and
//! transmission time alone.

use std::time::Duration;

use super::{Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::{Instant, PathId};

/// Packets of a flow sent redundantly when some path is lossy.
pub const SHORT_FLOW: u32 = 32;

/// Most queue, in drain time, the sender puts in front of a path's bottleneck.
pub const QUEUE_CAP: Duration = Duration::from_millis(150);
/// Most the send queue may take to drain (over the paths at the cap) while packets wait in
/// it: beyond, the session refuses new packets (a drop-tail at the sender).
pub const HOLD_MAX: Duration = Duration::from_millis(600);
/// A packet held because every path's window is full is offered again on feedback, or
/// after this long at the latest.
const WINDOW_RETRY: Duration = Duration::from_millis(10);

#[derive(Clone, Debug, Default)]
pub struct DelayBased {
    /// When a held packet should be offered again.
    retry_at: Option<Instant>,
    /// The send queue takes [`HOLD_MAX`] or more to drain.
    backlog_full: bool,
    /// Scratch: the candidate paths of the current decision.
    candidates: Vec<Candidate>,
    /// The latest decision was a hold that time alone does not end before `until`.
    hold: Option<Held>,
}

/// A hold kept until time alone may change it (see [`DelayBased::hold_until`]).
#[derive(Clone, Copy, Debug)]
struct Held {
    until: Instant,
    /// The chosen path's window is full (the retry is [`WINDOW_RETRY`] after each poll).
    window_full: bool,
    /// When the chosen path's queue drains, in the sender's model.
    drain_at: Instant,
    /// Every candidate was held (at the cap, or its window full): the send queue's
    /// backlog, added alike to all but those whose start window is full (which it cannot
    /// bring level with the others), changes neither the pick nor [`Held::until`], only
    /// whether the backlog is full.
    all_capped: bool,
    /// The held paths' summed rate and the head's size on the wire, which turn the
    /// backlog into time.
    capped_bps: u64,
    wire_bytes: usize,
}

/// What one decision needs of a candidate path, worked out once.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    /// Position in the session's paths.
    index: usize,
    /// The sender's model of its bottleneck queue, in drain time.
    queue: Duration,
    /// [`Path::start_window_full`].
    start_window_full: bool,
    /// Its window is full ([`window_full`]); only asked while its queue is under the cap,
    /// since the cap holds it anyway.
    window_full: bool,
}

impl Candidate {
    fn of(now: Instant, index: usize, p: &Path, slowest: Option<i64>) -> Candidate {
        let queue = p.queue_delay(now);
        Candidate {
            index,
            queue,
            start_window_full: p.start_window_full(),
            window_full: queue < QUEUE_CAP && window_full(now, p, slowest),
        }
    }

    /// The path takes no packet now: its queue is at the cap, or its start window or
    /// window is full.
    fn capped(&self) -> bool {
        self.queue >= QUEUE_CAP || self.start_window_full || self.window_full
    }

    /// [`predicted_delivery`] with the queue already known.
    fn predicted_delivery(&self, wire_bytes: usize, p: &Path, min_known: i64) -> i64 {
        let q = self.queue + p.transmission_time(wire_bytes);
        let q = i64::try_from(q.as_micros()).unwrap_or(i64::MAX / 2);
        q + p.delay_skew_us().unwrap_or(min_known)
    }
}

/// The smallest delay estimate among `paths` (µs, relative), 0 when none is known.
pub(crate) fn min_known_delay<'a>(paths: impl Iterator<Item = &'a Path>) -> i64 {
    paths.filter_map(Path::delay_skew_us).min().unwrap_or(0)
}

/// When a datagram of `wire_bytes` sent now on `p` would arrive (µs, relative): the queue
/// in the sender's model, its transmission time and `d + δ`, an unknown `d + δ` taken as
/// `min_known` (§4.3).
pub(crate) fn predicted_delivery(now: Instant, wire_bytes: usize, p: &Path, min_known: i64) -> i64 {
    let q = p.queue_delay(now) + p.transmission_time(wire_bytes);
    let q = i64::try_from(q.as_micros()).unwrap_or(i64::MAX / 2);
    q + p.delay_skew_us().unwrap_or(min_known)
}

/// Whether the loss guard has set aside a live path of shorter delay than every path left
/// usable (so that short flows lose speed with it).
fn lossy_bond(paths: &[Path]) -> bool {
    let live = || paths.iter().filter(|p| p.is_live());
    let usable = live()
        .filter(|p| !p.is_loss_guarded())
        .filter_map(Path::delay_skew_us)
        .min();
    let guarded = live()
        .filter(|p| p.is_loss_guarded())
        .filter_map(Path::delay_skew_us)
        .min();
    matches!((guarded, usable), (Some(g), Some(u)) if g < u)
}

/// The position where the session sends a redundant packet's original: the first live
/// path (the first path when none is live).
fn first_live(paths: &[Path]) -> Option<usize> {
    let any = paths.iter().any(Path::is_live);
    paths.iter().position(|p| !any || p.is_live())
}

/// The largest `d + δ` among the usable paths (µs, relative), when any is known.
fn slowest_delay(paths: &[Path]) -> Option<i64> {
    paths
        .iter()
        .filter(|p| p.is_usable())
        .filter_map(Path::delay_skew_us)
        .max()
}

/// Whether `p`'s congestion window is full, its queue allowance raised from the window's
/// own to as much as equalizing it with the slowest usable path (`slowest`, from
/// [`slowest_delay`]) needs, up to [`QUEUE_CAP`].
fn window_full(now: Instant, p: &Path, slowest: Option<i64>) -> bool {
    let gap = match (slowest, p.delay_skew_us()) {
        (Some(s), Some(d)) => Duration::from_micros(u64::try_from(s - d).unwrap_or(0)),
        _ => Duration::ZERO,
    };
    let allowance = gap.clamp(crate::path::window::QUEUE_TARGET, QUEUE_CAP);
    p.window_full_with(now, allowance)
}

/// TCP segment size assumed for the loss-limited rate, bytes.
const MSS: f64 = 1400.0;

/// Whether there are several live paths and TCP alone over any of them would be held by its
/// losses to less than half the path's capacity.
fn loss_limited_bond(paths: &[Path]) -> bool {
    let live = || paths.iter().filter(|p| p.is_live());
    live().count() > 1
        && live().all(|p| {
            let loss = p.long_loss_rate();
            // The path's own RTT, without the queue braid's sending builds on it: with the
            // smoothed RTT, queueing under load alone made a bond look loss-limited.
            let Some(rtt) = p.rtt().min() else {
                return false;
            };
            loss > 0.0 && {
                let rate = MSS * 8.0 / rtt.as_secs_f64().max(1e-3) * 1.22 / loss.sqrt();
                rate < p.capacity_bps() as f64 / 2.0
            }
        })
}

/// When a packet held for a path whose window is full (`window_full`) or whose queue is
/// `queue` is offered again: a full window opens with feedback, so the retry is only a
/// safety net then; a queue at the cap, once it is back under it.
fn hold_retry(now: Instant, window_full: bool, queue: Duration) -> Instant {
    let wait = if window_full {
        WINDOW_RETRY
    } else {
        queue.saturating_sub(QUEUE_CAP)
    };
    now + wait.max(Duration::from_millis(1))
}

/// The time the paths at the cap, at `capped_bps` together, take to carry `backlog`
/// packets of `wire_bytes`.
fn backlog_time(backlog: usize, wire_bytes: usize, capped_bps: u64) -> Duration {
    let bits = (backlog as u64).saturating_mul(wire_bytes as u64 * 8);
    Duration::from_secs_f64(bits as f64 / capped_bps.max(1) as f64)
}

impl DelayBased {
    /// After a hold at `now` on `pick` (predicted delivery `pick_t`): the first instant at
    /// which time alone may change the decision, with the paths, the packet and the send
    /// queue as they are. Between sends and acknowledgements only the queues in the
    /// sender's model drain (all at one rate, until empty) and delivery-rate samples age;
    /// so the decision stands while no queue crosses the cap or empties, no sample ages
    /// out, and no candidate whose queue drains overtakes a pick whose queue is empty
    /// (a pick whose queue drains only gains on the others). Conservative: any of these
    /// ends it.
    #[expect(
        clippy::too_many_arguments,
        reason = "the decision's own figures, worked out once in select"
    )]
    fn hold_until(
        &self,
        now: Instant,
        paths: &[Path],
        pick: &Candidate,
        pick_t: i64,
        wire_bytes: usize,
        min_known: i64,
        backlog_us: i64,
    ) -> Instant {
        let mut until = Instant::MAX;
        let mut end = |t: Instant| until = until.min(t);
        // The first live path's queue falling under the cap may send a packet redundantly.
        if let Some(p) = first_live(paths).map(|i| &paths[i]) {
            let q = p.queue_delay(now);
            if q >= QUEUE_CAP {
                end(now + (q - QUEUE_CAP));
            }
        }
        for c in &self.candidates {
            let p = &paths[c.index];
            if c.queue >= QUEUE_CAP {
                end(now + (c.queue - QUEUE_CAP));
            }
            if !c.queue.is_zero() {
                end(now + c.queue);
                if pick.queue.is_zero() {
                    // Its predicted delivery falls by the time passed; the pick's stays.
                    let t = c.predicted_delivery(wire_bytes, p, min_known);
                    let t = if c.start_window_full {
                        t.saturating_add(i64::MAX / 4)
                    } else if c.capped() {
                        t + backlog_us
                    } else {
                        t
                    };
                    let lead = u64::try_from(t.saturating_sub(pick_t)).unwrap_or(0);
                    end(now + Duration::from_micros(lead));
                }
            }
            if let Some(t) = p.delivery_rate_steady_until(now) {
                end(t);
            }
        }
        until
    }
}

impl Scheduler for DelayBased {
    fn select(&mut self, now: Instant, packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        self.retry_at = None;
        self.backlog_full = false;
        self.hold = None;
        // A redundant packet's original goes on the first live path: only while that path's
        // queue is under the cap, so that no original ever passes it (otherwise the packet
        // is placed, or held, as any other).
        let queue_capped = |p: &Path| p.queue_delay(now) >= QUEUE_CAP || p.start_window_full();
        if first_live(paths).is_some_and(|i| !queue_capped(&paths[i])) {
            let short = packet.flow.is_some_and(|f| f.packets <= SHORT_FLOW);
            if (short && lossy_bond(paths)) || loss_limited_bond(paths) {
                return Choice::Redundant;
            }
        }
        // Paths at the cap: the send queue's backlog waits for them, so it is part of their
        // queue (a packet at the back of it would be delivered that much later). The
        // candidates' state, their capacity at the cap and their smallest known delay, in
        // one pass (this runs on every poll while a packet is held).
        let slowest = slowest_delay(paths);
        let any_usable = paths.iter().any(Path::is_usable);
        let mut capped_bps: u64 = 0;
        let mut min_known: Option<i64> = None;
        self.candidates.clear();
        for (i, p) in paths.iter().enumerate() {
            if any_usable && !p.is_usable() {
                continue;
            }
            let c = Candidate::of(now, i, p, slowest);
            if c.capped() {
                // The measured rate, or the capacity estimate where that is higher (a
                // rate measured by light traffic reads low, and the send queue would refuse
                // a burst as hundreds of milliseconds of backlog).
                capped_bps += p.delivery_rate_bps(now).unwrap_or(0).max(p.capacity_bps());
            }
            if let Some(d) = p.delay_skew_us() {
                min_known = Some(min_known.map_or(d, |m| m.min(d)));
            }
            self.candidates.push(c);
        }
        let backlog = backlog_time(packet.backlog, packet.wire_bytes, capped_bps);
        let backlog_us = i64::try_from(backlog.as_micros()).unwrap_or(i64::MAX / 4);
        // Each candidate's predicted delivery ([`predicted_delivery`]), with the backlog
        // added at the cap; a path of unknown capacity whose start window is full takes
        // nothing while another can (its stand-in capacity would make it look first); the
        // earliest, ties to the lower id.
        let min_known = min_known.unwrap_or(0);
        let mut best: Option<(i64, PathId, Candidate)> = None;
        for &c in &self.candidates {
            let p = &paths[c.index];
            let t = c.predicted_delivery(packet.wire_bytes, p, min_known);
            let t = if c.start_window_full {
                t.saturating_add(i64::MAX / 4)
            } else if c.queue >= QUEUE_CAP || c.window_full {
                t + backlog_us
            } else {
                t
            };
            if best.is_none_or(|(bt, id, _)| (t, p.id()) < (bt, id)) {
                best = Some((t, p.id(), c));
            }
        }
        let pick = best.map_or_else(|| Candidate::of(now, 0, &paths[0], slowest), |b| b.2);
        if pick.capped() {
            self.backlog_full = backlog >= HOLD_MAX;
            let all_capped = self.candidates.iter().all(Candidate::capped);
            self.hold = best.map(|(t, _, c)| Held {
                until: self.hold_until(now, paths, &c, t, packet.wire_bytes, min_known, backlog_us),
                window_full: c.window_full,
                drain_at: now + c.queue,
                all_capped,
                capped_bps,
                wire_bytes: packet.wire_bytes,
            });
            self.retry_at = Some(hold_retry(now, pick.window_full, pick.queue));
            return Choice::Hold;
        }
        Choice::Path(paths[pick.index].id())
    }

    /// The same decision while nothing but the time changed, until [`Held::until`].
    fn renew_hold(&mut self, now: Instant) -> bool {
        let Some(h) = self.hold.filter(|h| now < h.until) else {
            self.hold = None;
            return false;
        };
        let queue = h.drain_at.saturating_duration_since(now);
        self.retry_at = Some(hold_retry(now, h.window_full, queue));
        true
    }

    fn renew_hold_backlog(&mut self, now: Instant, backlog: usize) -> bool {
        let Some(h) = self.hold.filter(|h| h.all_capped) else {
            self.hold = None;
            return false;
        };
        if !self.renew_hold(now) {
            return false;
        }
        self.backlog_full = backlog_time(backlog, h.wire_bytes, h.capped_bps) >= HOLD_MAX;
        true
    }

    fn backlog_full(&self) -> bool {
        self.backlog_full
    }

    /// At most [`QUEUE_CAP`] in front of each bottleneck.
    fn caps_bottleneck_queues(&self) -> bool {
        true
    }

    /// Copies only go where the queue is under the cap: a copy is never worth overflowing
    /// a bottleneck (and its drops would mislead the queue model and the loss guard).
    fn wants_copy(&self, now: Instant, path: &Path) -> bool {
        path.queue_delay(now) < QUEUE_CAP && !path.start_window_full()
    }

    fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    fn name(&self) -> &'static str {
        "delay-based"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    #[test]
    fn fills_the_short_path_until_its_queue_matches_the_long_one() {
        // 1.2 Mbit/s each; 1500-byte datagrams take 10 ms. Delays 20 ms and 50 ms.
        let mut ps = paths(&[
            PathSpec::new(0, 1_200_000).delay_ms(50),
            PathSpec::new(1, 1_200_000).delay_ms(20),
        ]);
        let mut s = DelayBased::default();
        let mut picks = Vec::new();
        for i in 0..8 {
            let Choice::Path(p) = s.select(T0, &meta(i), &ps) else {
                panic!()
            };
            picks.push(p);
            ps[usize::from(p)].send_for_test(T0, 1500);
        }
        // Path 1 predicts 30, 40, 50 ms (tie at 50 goes to the lower id, path 0: 60), ...
        assert_eq!(picks, vec![1, 1, 1, 0, 1, 0, 1, 0]);
    }

    #[test]
    fn a_path_of_unknown_capacity_takes_one_start_window_then_the_others_do() {
        // Capacity unknown on both (0: learned); path 1 is nearer. Its stand-in capacity
        // is fast, so it takes packets until START_WINDOW_BYTES are unacknowledged, then
        // path 0 does; with both windows full the packet waits.
        let mut ps = paths(&[
            PathSpec::new(0, 0).delay_ms(50),
            PathSpec::new(1, 0).delay_ms(20),
        ]);
        let window = (crate::path::START_WINDOW_BYTES / 1500) as usize;
        let mut s = DelayBased::default();
        let mut picks = Vec::new();
        for i in 0..2 * window as u32 {
            let Choice::Path(p) = s.select(T0, &meta(i), &ps) else {
                panic!("held at {i}")
            };
            picks.push(p);
            ps[usize::from(p)].send_for_test(T0, 1500);
        }
        let mut expected = vec![1; window];
        expected.extend(vec![0; window]);
        assert_eq!(picks, expected);
        assert_eq!(s.select(T0, &meta(99), &ps), Choice::Hold);
        // A configured capacity has no start window.
        let mut known = paths(&[PathSpec::new(0, 100_000_000).delay_ms(20)]);
        for _ in 0..2 * window {
            known[0].send_for_test(T0, 1500);
        }
        assert!(!known[0].start_window_full());
    }

    #[test]
    fn capacity_enters_as_transmission_time() {
        // Same delay; the fast path's queue drains 10x faster.
        let mut ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(10),
            PathSpec::new(1, 10_000_000).delay_ms(10),
        ]);
        let mut s = DelayBased::default();
        let mut on_slow = 0;
        for i in 0..110 {
            let Choice::Path(p) = s.select(T0, &meta(i), &ps) else {
                panic!()
            };
            on_slow += u32::from(p == 0);
            ps[usize::from(p)].send_for_test(T0, 1500);
        }
        assert_eq!(on_slow, 10);
    }

    #[test]
    fn unknown_delays_count_as_the_fastest_known() {
        let ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(40),
            PathSpec::new(1, 1_000_000),
        ]);
        // Equal: the tie goes to path 0.
        assert_eq!(
            DelayBased::default().select(T0, &meta(0), &ps),
            Choice::Path(0)
        );
        let ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(40),
            PathSpec::new(1, 2_000_000),
        ]);
        assert_eq!(
            DelayBased::default().select(T0, &meta(0), &ps),
            Choice::Path(1)
        );
    }

    #[test]
    fn a_renewed_hold_is_what_deciding_again_would_give() {
        // 1.2 Mbit/s each (10 ms per 1500-byte datagram), 50 and 400 ms: the short path's
        // queue is past the cap (200 ms), then time passes with nothing sent or
        // acknowledged. Wherever the hold is renewed, deciding again holds too, with the
        // same retry and backlog; it ends before the queue falls under the cap.
        let mut ps = paths(&[
            PathSpec::new(0, 1_200_000).delay_ms(50),
            PathSpec::new(1, 1_200_000).delay_ms(400),
        ]);
        for _ in 0..20 {
            ps[0].send_for_test(T0, 1500);
        }
        let mut m = meta(0);
        m.backlog = 10;
        let mut s = DelayBased::default();
        assert_eq!(s.select(T0, &m, &ps), Choice::Hold);
        let mut renewed = 0;
        let mut sent_at = None;
        for ms in 1..400 {
            let now = T0 + Duration::from_millis(ms);
            if s.renew_hold(now) {
                renewed += 1;
                let mut fresh = s.clone();
                assert_eq!(fresh.select(now, &m, &ps), Choice::Hold, "{ms} ms");
                assert_eq!(
                    (fresh.retry_at(), fresh.backlog_full()),
                    (s.retry_at(), s.backlog_full()),
                    "{ms} ms"
                );
            } else if s.select(now, &m, &ps) != Choice::Hold {
                sent_at = Some(ms);
                break;
            }
        }
        assert!(renewed >= 40, "{renewed}");
        assert_eq!(sent_at, Some(51));
    }

    #[test]
    fn a_hold_renewed_with_a_longer_backlog_is_what_deciding_again_would_give() {
        // 1.2 Mbit/s each (10 ms per 1500-byte datagram), both queues 250 ms, past the cap
        // (150 ms), while packets keep joining the send queue (5 ms of backlog each over
        // the two paths): wherever the hold is renewed, deciding again with the longer
        // backlog holds too, with the same retry and the same verdict on the backlog,
        // which turns full on the way (at 600 ms).
        let mut ps = paths(&[
            PathSpec::new(0, 1_200_000).delay_ms(50),
            PathSpec::new(1, 1_200_000).delay_ms(100),
        ]);
        for _ in 0..25 {
            ps[0].send_for_test(T0, 1500);
            ps[1].send_for_test(T0, 1500);
        }
        let mut m = meta(0);
        let mut s = DelayBased::default();
        assert_eq!(s.select(T0, &m, &ps), Choice::Hold);
        let (mut renewed, mut full) = (0, 0);
        for ms in 1..100 {
            let now = T0 + Duration::from_millis(ms);
            m.backlog = 1 + 3 * ms as usize;
            assert!(s.renew_hold_backlog(now, m.backlog), "{ms} ms");
            renewed += 1;
            full += usize::from(s.backlog_full());
            let mut fresh = s.clone();
            assert_eq!(fresh.select(now, &m, &ps), Choice::Hold, "{ms} ms");
            assert_eq!(
                (fresh.retry_at(), fresh.backlog_full()),
                (s.retry_at(), s.backlog_full()),
                "{ms} ms"
            );
        }
        assert_eq!(renewed, 99);
        assert!(full > 0 && full < 99, "{full}");
        // A path that could take the packet (its queue under the cap and its window open)
        // is not held: a longer backlog on the others may make it the pick.
        let mut ps = paths(&[
            PathSpec::new(0, 1_200_000).delay_ms(50),
            PathSpec::new(1, 1_200_000).delay_ms(400),
        ]);
        for _ in 0..20 {
            ps[0].send_for_test(T0, 1500);
        }
        m.backlog = 10;
        assert_eq!(s.select(T0, &m, &ps), Choice::Hold);
        assert!(!s.renew_hold_backlog(T0 + Duration::from_millis(1), 40));
    }

    #[test]
    fn holds_rather_than_overfill_the_bottleneck_queue() {
        // 1.2 Mbit/s: 10 ms per 1500-byte datagram. Delays 50 ms and 400 ms: the short path
        // delivers first until its queue reaches 350 ms, but the sender stops at the cap.
        let mut ps = paths(&[
            PathSpec::new(0, 1_200_000).delay_ms(50),
            PathSpec::new(1, 1_200_000).delay_ms(400),
        ]);
        let mut s = DelayBased::default();
        let mut m = meta(0);
        m.backlog = 10;
        for i in 0..15 {
            assert_eq!(s.select(T0, &m, &ps), Choice::Path(0), "{i}");
            ps[0].send_for_test(T0, 1500);
        }
        assert_eq!(s.select(T0, &m, &ps), Choice::Hold);
        assert_eq!(s.retry_at(), Some(T0 + Duration::from_millis(1)));
        // 20 ms later the queue is back under the cap.
        let later = T0 + Duration::from_millis(20);
        assert_eq!(s.select(later, &m, &ps), Choice::Path(0));
        assert_eq!(s.retry_at(), None);
        ps[0].send_for_test(later, 1500);
        assert!(!s.backlog_full());
        ps[0].send_for_test(later, 1500);
        // The send queue's backlog counts in the capped path's delivery: 40 packets waiting
        // (400 ms) bring it past the long path's.
        m.backlog = 40;
        assert_eq!(s.select(later, &m, &ps), Choice::Path(1));
        // A send queue that takes HOLD_MAX to drain over the capped paths is full.
        let mut one = paths(&[PathSpec::new(0, 1_200_000).delay_ms(50)]);
        for _ in 0..15 {
            one[0].send_for_test(T0, 1500);
        }
        m.backlog = 59;
        assert_eq!(s.select(T0, &m, &one), Choice::Hold);
        assert!(!s.backlog_full());
        m.backlog = 60;
        assert_eq!(s.select(T0, &m, &one), Choice::Hold);
        assert!(s.backlog_full());
    }

    #[test]
    fn short_flows_go_redundantly_over_a_lossy_bond() {
        let mut ps = paths(&[
            PathSpec::new(0, 5_000_000).delay_ms(30),
            PathSpec::new(1, 5_000_000).delay_ms(60),
        ]);
        let mut m = meta(0);
        m.flow = Some(crate::flow::FlowMeta {
            id: 0,
            class: 0,
            hash: 0,
            new: false,
            pinned: None,
            inbound: None,
            retransmission: false,
            packets: SHORT_FLOW,
        });
        let mut s = DelayBased::default();
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(0));
        ps[0].set_loss_for_test(0.05);
        crate::sched::guard::update(&mut ps, false);
        assert_eq!(s.select(T0, &m, &ps), Choice::Redundant);
        if let Some(f) = m.flow.as_mut() {
            f.packets = SHORT_FLOW + 1;
        }
        // A long flow stays off the guarded path.
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
        // The slower path guarded instead: short flows lose nothing by it.
        ps[0].set_loss_for_test(0.0);
        ps[1].set_loss_for_test(0.05);
        crate::sched::guard::update(&mut ps, false);
        if let Some(f) = m.flow.as_mut() {
            f.packets = 1;
        }
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(0));
        // The faster path guarded again, its queue (where the original would go) at the cap:
        // the packet is placed as any other, on the path left, rather than passing the cap.
        ps[0].set_loss_for_test(0.05);
        ps[1].set_loss_for_test(0.0);
        crate::sched::guard::update(&mut ps, false);
        assert_eq!(s.select(T0, &m, &ps), Choice::Redundant);
        while ps[0].queue_delay(T0) < QUEUE_CAP {
            ps[0].send_for_test(T0, 1500);
        }
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
    }

    #[test]
    fn everything_goes_redundantly_when_every_path_is_loss_limited() {
        // 5 Mbit/s paths, RTTs 60 and 120 ms: TCP over the second alone at 1% loss gets
        // 1400 B / 0.12 s · 1.22 / 0.1 = 1.14 Mbit/s, under half its capacity.
        let mut ps = paths(&[
            PathSpec::new(0, 5_000_000).delay_ms(30).rtt_ms(60),
            PathSpec::new(1, 5_000_000).delay_ms(60).rtt_ms(120),
        ]);
        ps[0].set_loss_for_test(0.05);
        let mut s = DelayBased::default();
        assert_eq!(s.select(T0, &meta(0), &ps), Choice::Path(0));
        ps[1].set_loss_for_test(0.01);
        assert_eq!(s.select(T0, &meta(0), &ps), Choice::Redundant);
        // At 0.01% TCP gets 11 Mbit/s over it: not loss-limited.
        ps[1].set_loss_for_test(0.0001);
        assert_eq!(s.select(T0, &meta(0), &ps), Choice::Path(0));
    }
}
