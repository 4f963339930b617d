//! Fast path-failure detection and revival (oSCTP §IV-E, "Resilience to Path Failure").
//!
//! oSCTP declares a path failed on its first retransmission timeout instead of stock
//! SCTP's four, and revives it when a heartbeat (every second) or any outstanding packet
//! is acknowledged on it. braid has no per-path retransmission timer, so the failure rule
//! is stated on what the sender does have, the peer's per-path acknowledgements:
//!
//! > a path is *stalled* when its oldest unacknowledged datagram should have reached the
//! > peer more than `grace` before the newest datagram the peer has since acknowledged on
//! > another path.
//!
//! Arrivals are the sender's predictions of PluriBus §4.3, `sent + queue wait + (d + δ)`
//! (the queue wait as the model, corrected since, now sees it), so paths of different delay
//! and queue compare fairly, and the clock skew in `d + δ` cancels. Comparing with another
//! path's *acknowledged* datagram, not with a timer, makes the rule immune to slow
//! feedback: reports and path acks for both paths come back on the same return paths, so
//! a congested or slow return direction delays the evidence for both alike, and nothing is
//! declared while the peer is silent on every path (a single path never stalls).
//! Path acks do not always come back on the same return path, though: they rotate over
//! all of them, so beside a path of 400 ms the evidence for a 10 ms path can arrive 400 ms
//! late while another path's arrives at once. So a stalled path must also be late by the
//! clock: its oldest outstanding datagram unacknowledged for the largest smoothed RTT among
//! the live paths plus the grace (`session/failover.rs`). On paths of similar delay this
//! adds little; beside a slow lossy path it is what keeps a clean path in use.
//! At least [`STALL_MIN_UNACKED`] datagrams must be outstanding, so that a lost tail
//! datagram or heartbeat is no failure.
//! `grace = max(STALL_RTTS × min RTT, STALL_FLOOR)` absorbs the queue model's errors and
//! the rotation of piggybacked path acks. With paths of 40 and 60 ms RTT and 130 ms of
//! queue this declares a blackholed path about 200 ms after it fails, where the receive
//! side's path timeout (500 ms of silence) would take over half a second more.
//!
//! A stalled path counts as not live (schedulers, reports and acks avoid it), the data in
//! flight on it is resent on the live paths (see `session/failover.rs`), and heartbeats,
//! which go on every path idle for the heartbeat interval (100 ms rather than oSCTP's 1 s),
//! probe it. The first acknowledgement of a datagram sent on it since it was declared stalled (a
//! probe) revives it, with its queue
//! estimate reset: what was queued when it failed is gone.

use std::time::Duration;

use crate::Instant;

/// A stalled path's grace in multiples of its minimum RTT.
pub const STALL_RTTS: u32 = 2;
/// The least grace, for paths of a few milliseconds' RTT: piggybacked path acks rotate
/// over the paths, and the queue model errs by a few packets' transmission time.
pub const STALL_FLOOR: Duration = Duration::from_millis(60);

/// Datagrams that must be outstanding before a path can be declared stalled: one lost
/// datagram at the tail of a burst, or a lost heartbeat on an idle path, leaves a single
/// overdue datagram and no failure (the next heartbeat settles it).
pub const STALL_MIN_UNACKED: u32 = 3;

/// One path's failure state as the sender sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct TxLiveness {
    /// Declared stalled at this instant, until revived.
    stalled_since: Option<Instant>,
    /// Predicted arrival (µs, sender's clock plus the relative `d + δ`) of the newest
    /// datagram the peer acknowledged on this path.
    newest_acked_arrival: Option<i64>,
    /// Times the path was declared stalled, and revived.
    stalls: u64,
    revivals: u64,
}

impl TxLiveness {
    /// Whether the path is declared stalled.
    pub fn is_stalled(&self) -> bool {
        self.stalled_since.is_some()
    }

    /// When the path was declared stalled.
    pub fn stalled_since(&self) -> Option<Instant> {
        self.stalled_since
    }

    /// Predicted arrival of the newest datagram the peer acknowledged on the path.
    pub fn newest_acked_arrival(&self) -> Option<i64> {
        self.newest_acked_arrival
    }

    /// Times declared stalled.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }

    /// Times revived.
    pub fn revivals(&self) -> u64 {
        self.revivals
    }

    /// The peer acknowledged `acked` more datagrams, the newest of them sent at `sent` and
    /// predicted to have arrived at `arrival`. Returns true when this revives a stalled
    /// path: only a datagram sent since the path was declared stalled (a probe) does; a
    /// late acknowledgement of older ones says nothing about the path now.
    pub(crate) fn on_ack(
        &mut self,
        acked: u32,
        sent: Option<Instant>,
        arrival: Option<i64>,
    ) -> bool {
        if acked == 0 {
            return false;
        }
        if let Some(a) = arrival {
            self.newest_acked_arrival = Some(self.newest_acked_arrival.map_or(a, |n| n.max(a)));
        }
        match (self.stalled_since, sent) {
            (Some(since), Some(sent)) if sent >= since => {
                self.stalled_since = None;
                self.revivals += 1;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn declare_stalled(&mut self, now: Instant) {
        if self.stalled_since.is_none() {
            self.stalled_since = Some(now);
            self.stalls += 1;
        }
    }
}

/// What another live path whose RTT has not been measured yet counts for in the clock
/// condition (RFC 6298 §2.1's initial retransmission timeout, which oSCTP's path timer
/// starts from).
///
/// Path acks rotate over the return paths, so before another path's first RTT sample
/// nothing bounds how late the evidence for this path, riding on that one, may come back.
/// Counting such a path as nothing (as braid first did) let the clock condition fall to
/// the fast path's RTT alone: in never-worse's "fast + slow lossy" (5 ms beside a lossy
/// 400 ms path, whose RTT the gateway had not measured 1.2 s into the run) the gateway
/// declared the clean 5 ms path stalled, its path acks being late on the 400 ms return
/// path, and the inner TCP's ACKs went over the lossy path into a retransmission timeout.
/// Once every live path is measured this bound is gone and detection is as fast as
/// before.
///
/// The path under judgement itself, while unmeasured, still counts for nothing: before its
/// first RTT sample it has delivered nothing the sender knows of, and a slow path declared
/// stalled at start-up is revived by its first acknowledged probe with its queue estimate
/// reset. (never-worse's "fibre + satellite" depends on that reset: counting the satellite
/// path's own unmeasured RTT too kept it from stalling, its start-up queue estimate stayed
/// inflated, and braid fell from 31.3 to 17.8 Mbit/s, below the fibre's 19.4.)
pub const UNMEASURED_RTT: Duration = Duration::from_secs(1);

/// The clock condition's RTT for a path whose smoothed RTT is `own`, beside other live
/// paths with `others`: the largest of them, another path not measured yet counting as
/// [`UNMEASURED_RTT`] and the path itself, unmeasured, as nothing.
pub fn slowest_rtt(
    own: Option<Duration>,
    others: impl Iterator<Item = Option<Duration>>,
) -> Duration {
    others
        .map(|s| s.unwrap_or(UNMEASURED_RTT))
        .chain(own)
        .max()
        .unwrap_or(Duration::ZERO)
}

/// The grace of a path whose minimum RTT is `min_rtt` (unknown: the floor).
pub fn grace(min_rtt: Option<Duration>) -> Duration {
    min_rtt.map_or(STALL_FLOOR, |r| (r * STALL_RTTS).max(STALL_FLOOR))
}

/// Whether a path whose oldest unacknowledged datagram was predicted to arrive at
/// `oldest_arrival` is stalled, given the newest acknowledged arrival on any *other* live
/// path, `others_newest` (µs, same scale), and the path's `grace`.
pub fn is_overdue(oldest_arrival: i64, others_newest: Option<i64>, grace: Duration) -> bool {
    let grace = i64::try_from(grace.as_micros()).unwrap_or(i64::MAX / 2);
    others_newest.is_some_and(|n| n > oldest_arrival.saturating_add(grace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overdue_only_against_later_evidence_beyond_the_grace() {
        let g = grace(Some(Duration::from_millis(40)));
        assert_eq!(g, Duration::from_millis(80));
        assert_eq!(grace(Some(Duration::from_millis(5))), STALL_FLOOR);
        assert_eq!(grace(None), STALL_FLOOR);
        // Oldest unacked due at 1.000 s; the other path's newest ack arrived at 1.080 s:
        // within the grace. At 1.081 s: overdue.
        assert!(!is_overdue(1_000_000, Some(1_080_000), g));
        assert!(is_overdue(1_000_000, Some(1_080_001), g));
        // No other path delivers: never overdue.
        assert!(!is_overdue(1_000_000, None, g));
    }

    /// never-worse's "fast + slow lossy" at start-up, as the gateway saw it 1.2 s into the
    /// run: the 5 ms path (smoothed RTT 41 ms under the download's queue, grace 60 ms) had
    /// its oldest datagram outstanding for 103 ms, its path acks coming back late on the
    /// 400 ms path, whose RTT was not measured yet. Taking the largest *measured* RTT, 41 ms,
    /// declared the clean path stalled (103 > 41 + 60); the unmeasured path now counts as
    /// [`UNMEASURED_RTT`].
    #[test]
    fn an_unmeasured_path_keeps_the_clock_condition_from_a_clean_path() {
        let ms = Duration::from_millis;
        let grace = grace(Some(ms(10)));
        let outstanding = ms(103);
        let measured_only = [Some(ms(41))].into_iter().flatten().max().unwrap();
        assert!(outstanding > measured_only + grace, "the false stall");
        let bound = slowest_rtt(Some(ms(41)), [None].into_iter());
        assert_eq!(bound, UNMEASURED_RTT);
        assert!(outstanding <= bound + grace);
        // Once measured, the slow path's own RTT is the bound.
        assert_eq!(
            slowest_rtt(Some(ms(41)), [Some(ms(810))].into_iter()),
            ms(810)
        );
        // A path not measured itself counts for nothing beside measured ones (the rule for
        // a slow path at start-up, and for a blackhole, is unchanged).
        assert_eq!(slowest_rtt(None, [Some(ms(10))].into_iter()), ms(10));
        assert_eq!(slowest_rtt(None, std::iter::empty()), Duration::ZERO);
    }

    #[test]
    fn first_ack_revives_and_counts() {
        let mut l = TxLiveness::default();
        let t = Instant::from_millis;
        assert!(!l.on_ack(0, Some(t(1)), Some(5)));
        l.declare_stalled(t(10));
        l.declare_stalled(t(20));
        assert_eq!(l.stalled_since(), Some(t(10)));
        assert!(l.is_stalled());
        assert!(!l.on_ack(0, Some(t(30)), None));
        // A late ack of a datagram sent before the stall: still stalled.
        assert!(!l.on_ack(3, Some(t(9)), Some(6)));
        assert!(l.is_stalled());
        // The ack of a probe sent since: revived.
        assert!(l.on_ack(1, Some(t(10)), Some(7)));
        assert!(!l.is_stalled());
        assert_eq!((l.stalls(), l.revivals()), (1, 1));
        assert_eq!(l.newest_acked_arrival(), Some(7));
        l.on_ack(1, Some(t(40)), Some(3));
        assert_eq!(l.newest_acked_arrival(), Some(7));
    }
}
