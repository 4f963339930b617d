//! RACK's time threshold per path (RFC 8985 §6), the stream's reordering allowance
//! ([`super::FastRetransmit::Rack`]).
//!
//! A deviation from oSCTP §IV-C1, whose SD-FRT counts three later chunks of the same path
//! acknowledged: a path that reorders within itself (jitter on a radio link, a bonded
//! uplink, a router's parallel queues) then has most of its chunks fast-retransmitted.
//! RACK judges by time instead. Each path keeps the send time and RTT of the latest-sent
//! chunk of its own that was delivered; a chunk sent before it on the same path is lost
//! once `sent_at + rtt + reo_wnd` has passed, and a timer fires when that comes without a
//! further acknowledgement. `reo_wnd` (RFC 8985 §6.2 step 4):
//!
//! - before the path showed any reordering, zero once three later chunks of the path were
//!   delivered (SD-FRT's count, so a path that only loses recovers as fast as with SD-FRT),
//!   and a quarter of its minimum RTT before that (a loss near the tail is found without
//!   three later chunks);
//! - once a chunk of the path was delivered after a later-sent one, min_rtt / 4 times a
//!   multiplier, at most the smoothed RTT. The multiplier grows by one per round in
//!   which a fast retransmission of the path proves spurious (the receiver reports the
//!   chunk twice, the stream's DSACK, or the original is acknowledged before its copy
//!   left) and falls back to one after 16 loss detections without one.
//!
//! Only the time threshold is taken from RACK-TLP: the tail-loss probe is not (a tail
//! loss is left to the T3-rtx timer, as in oSCTP).

use std::time::Duration;

use crate::Instant;

/// RFC 8985 §6.2's DupThresh: chunks delivered beyond the path's lowest outstanding one
/// before a path without observed reordering takes a zero window.
pub const DUP_THRESH: u32 = 3;

/// Loss detections without a spurious retransmission after which the multiplier resets
/// (RFC 8985 §6.2 step 4's reo_wnd_persist).
const PERSIST: u32 = 16;

/// One path's RACK state.
#[derive(Clone, Debug)]
pub struct Rack {
    /// The latest-sent chunk of the path that was delivered: its psn, send time and RTT
    /// (RACK.fack, RACK.xmit_ts and RACK.rtt; psns follow send times on a path).
    latest: Option<(u64, Instant, Duration)>,
    /// A chunk of the path was delivered after a later-sent one (RACK.reord).
    reord: bool,
    mult: u32,
    persist: u32,
    /// Spurious retransmissions count once until a chunk sent from this psn on is
    /// delivered (RACK.dsack_round).
    spurious_round: Option<u64>,
    /// When the earliest chunk left waiting by [`Rack::detect`] is due.
    pub timer: Option<Instant>,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            latest: None,
            reord: false,
            mult: 1,
            persist: 0,
            spurious_round: None,
            timer: None,
        }
    }
}

/// A chunk of the path newly acknowledged by a SACK.
#[derive(Clone, Copy, Debug)]
pub struct Delivered {
    pub psn: u64,
    pub sent_at: Instant,
    /// Sent before as well (its acknowledgement may be the earlier copy's).
    pub retransmitted: bool,
}

impl Rack {
    /// The chunks of the path a SACK newly acknowledged (RFC 8985 §6.2 steps 2-3).
    pub fn on_ack(&mut self, now: Instant, delivered: &[Delivered], min_rtt: Option<Duration>) {
        let fack = self.latest.map(|l| l.0);
        for d in delivered {
            let rtt = now.saturating_duration_since(d.sent_at);
            // An RTT under the path's minimum acknowledges the earlier copy, not this one.
            if d.retransmitted && min_rtt.is_some_and(|m| rtt < m) {
                continue;
            }
            if fack.is_some_and(|f| d.psn < f) {
                self.reord = true;
            }
            if self.latest.is_none_or(|l| d.psn > l.0) {
                self.latest = Some((d.psn, d.sent_at, rtt));
            }
        }
        if let (Some(r), Some((psn, _, _))) = (self.spurious_round, self.latest) {
            if psn >= r {
                self.spurious_round = None;
            }
        }
    }

    /// A fast retransmission of the path proved spurious; `next_psn` is the path's next
    /// send sequence (the end of this round).
    pub fn on_spurious(&mut self, next_psn: u64) {
        self.reord = true;
        if self.spurious_round.is_none() {
            self.spurious_round = Some(next_psn);
            self.mult = self.mult.saturating_add(1);
            self.persist = PERSIST;
        }
    }

    /// The reordering window (RFC 8985 §6.2 step 4). `dup_thresh_met`: DupThresh chunks of
    /// the path were delivered beyond its lowest outstanding one.
    pub fn reo_wnd(
        &self,
        min_rtt: Option<Duration>,
        srtt: Duration,
        in_recovery: bool,
        dup_thresh_met: bool,
    ) -> Duration {
        let Some(min_rtt) = min_rtt else {
            return Duration::ZERO;
        };
        if !self.reord && (in_recovery || dup_thresh_met) {
            return Duration::ZERO;
        }
        (min_rtt / 4 * self.mult).min(srtt)
    }

    /// Chunks of the path sent before the latest delivered one, `(psn, send time, id)` in
    /// psn order: returns the ids of those lost, and arms [`Rack::timer`] for the first
    /// that is not yet (RFC 8985 §6.2 step 5).
    pub fn detect<T>(
        &mut self,
        now: Instant,
        reo_wnd: Duration,
        outstanding: impl Iterator<Item = (u64, Instant, T)>,
    ) -> Vec<T> {
        self.timer = None;
        let Some((fack, _, rtt)) = self.latest else {
            return Vec::new();
        };
        let mut lost = Vec::new();
        for (psn, sent_at, id) in outstanding {
            if psn >= fack {
                break;
            }
            let due = sent_at + rtt + reo_wnd;
            if due > now {
                // Send times rise with psn: the rest are due later still.
                self.timer = Some(due);
                break;
            }
            lost.push(id);
        }
        if !lost.is_empty() && self.persist > 0 {
            self.persist -= 1;
            if self.persist == 0 {
                self.mult = 1;
            }
        }
        lost
    }

    /// The reordering multiplier (for tests and stats).
    pub fn multiplier(&self) -> u32 {
        self.mult
    }

    pub fn reordering_seen(&self) -> bool {
        self.reord
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn d(psn: u64, sent: u64) -> Delivered {
        Delivered {
            psn,
            sent_at: at(sent),
            retransmitted: false,
        }
    }

    #[test]
    fn a_chunk_is_lost_once_the_window_passes_after_a_later_ones_rtt() {
        let mut r = Rack::default();
        // psn 0..4 sent 1 ms apart; 1 and 2 delivered at 41 and 42 ms (RTT 40 ms).
        r.on_ack(at(42), &[d(1, 1), d(2, 2)], Some(ms(40)));
        assert!(!r.reordering_seen());
        // No reordering seen and only two later chunks: a quarter of min RTT.
        let wnd = r.reo_wnd(Some(ms(40)), ms(40), false, false);
        assert_eq!(wnd, ms(10));
        let pending = [(0u64, at(0), 'a')];
        assert!(r.detect(at(42), wnd, pending.into_iter()).is_empty());
        // chunk 0 is due at 0 + 40 + 10 ms
        assert_eq!(r.timer, Some(at(50)));
        assert_eq!(r.detect(at(50), wnd, pending.into_iter()), vec!['a']);
        // With three later chunks delivered and no reordering: at once (SD-FRT's count).
        assert_eq!(r.reo_wnd(Some(ms(40)), ms(40), false, true), Duration::ZERO);
    }

    #[test]
    fn reordering_opens_the_window_and_spurious_rounds_grow_it() {
        let mut r = Rack::default();
        r.on_ack(at(43), &[d(3, 3)], Some(ms(40)));
        // psn 1 arrives after psn 3: reordering.
        r.on_ack(at(44), &[d(1, 1)], Some(ms(40)));
        assert!(r.reordering_seen());
        assert_eq!(r.reo_wnd(Some(ms(40)), ms(45), false, true), ms(10));
        r.on_spurious(10);
        // a second one in the same round does not count
        r.on_spurious(11);
        assert_eq!(r.multiplier(), 2);
        assert_eq!(r.reo_wnd(Some(ms(40)), ms(45), true, true), ms(20));
        // the round ends once psn 10 is delivered; the next spurious one counts
        r.on_ack(at(60), &[d(10, 15)], Some(ms(40)));
        r.on_spurious(20);
        assert_eq!(r.multiplier(), 3);
        // capped by the smoothed RTT
        assert_eq!(r.reo_wnd(Some(ms(40)), ms(25), false, false), ms(25));
        // 16 loss detections without a spurious one reset the multiplier
        for i in 0..16 {
            let lost = r.detect(at(1000), ms(0), [(0u64, at(i), ())].into_iter());
            assert_eq!(lost.len(), 1);
        }
        assert_eq!(r.multiplier(), 1);
    }

    #[test]
    fn an_ack_faster_than_the_path_is_the_earlier_copys() {
        let mut r = Rack::default();
        r.on_ack(at(45), &[d(5, 5)], Some(ms(40)));
        let resent = Delivered {
            psn: 9,
            sent_at: at(30),
            retransmitted: true,
        };
        // 15 ms after the resend on a 40 ms path: ignored.
        r.on_ack(at(45), &[resent], Some(ms(40)));
        assert_eq!(r.latest.map(|l| l.0), Some(5));
    }
}
