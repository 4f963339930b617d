//! RACK state (RFC 8985 §6): the most recently sent segment known delivered, its RTT, and
//! the reordering window.
//!
//! Loss detection itself walks the scoreboard (`Scoreboard::rack_detect`, §6.2 step 5).
//! Here: step 1-2 (`on_delivered`: RACK.xmit_ts, RACK.end_seq, RACK.rtt, skipping
//! retransmissions acknowledged faster than the minimum RTT, which may be spurious), step
//! 3 (reordering seen: a never-retransmitted segment delivered below RACK.fack), and step
//! 4 (`reo_wnd`: zero while no reordering was seen and the sender is in recovery or three
//! segments are SACKed, otherwise min(mult · min_RTT / 4, SRTT), where D-SACKs raise
//! `mult` for 16 recoveries).

use std::time::Duration;

use braid_core::Instant;

use super::scoreboard::{sent_after, Sent};
use super::seq::Seq;

/// RFC 5681's duplicate-ACK threshold.
pub const DUP_THRESH: u32 = 3;
/// Recoveries a widened reordering window persists (RFC 8985 §6.2 step 4).
const REO_WND_PERSIST: u32 = 16;

#[derive(Clone, Debug)]
pub struct Rack {
    /// (RACK.xmit_ts, RACK.end_seq) of the most recently sent delivered segment.
    last: Option<(Instant, Seq)>,
    rtt: Duration,
    /// Highest sequence number delivered (RACK.fack).
    fack: Seq,
    reordering_seen: bool,
    dsack_round: Option<Seq>,
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
}

impl Rack {
    pub fn new(iss: Seq) -> Rack {
        Rack {
            last: None,
            rtt: Duration::ZERO,
            fack: iss,
            reordering_seen: false,
            dsack_round: None,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
        }
    }

    /// Steps 2-3 for one newly delivered (cumulatively or selectively acknowledged)
    /// segment.
    pub fn on_delivered(&mut self, seg: &Sent, now: Instant, min_rtt: Option<Duration>) {
        let rtt = now - seg.xmit;
        if seg.ever_retrans && min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        if seg.end < self.fack && !seg.ever_retrans {
            self.reordering_seen = true;
        }
        self.fack = self.fack.max(seg.end);
        let newer = match self.last {
            None => true,
            Some((t, end)) => sent_after(seg.xmit, seg.end, t, end),
        };
        if newer {
            self.last = Some((seg.xmit, seg.end));
            self.rtt = rtt;
        }
    }

    /// The most recently sent delivered segment, if any.
    pub fn last(&self) -> Option<(Instant, Seq)> {
        self.last
    }

    pub fn rtt(&self) -> Duration {
        self.rtt
    }

    /// A D-SACK arrived (step 4): widen the window once per round trip.
    pub fn on_dsack(&mut self, una: Seq, nxt: Seq) {
        if self.dsack_round.is_some_and(|r| una >= r) {
            self.dsack_round = None;
        }
        if self.dsack_round.is_none() {
            self.dsack_round = Some(nxt);
            self.reo_wnd_mult = self.reo_wnd_mult.saturating_add(1).min(64);
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// Fast or RTO recovery ended (step 4).
    pub fn on_recovery_end(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// RACK.reo_wnd (step 4).
    pub fn reo_wnd(
        &self,
        in_recovery: bool,
        sacked_out: u32,
        min_rtt: Duration,
        srtt: Duration,
    ) -> Duration {
        if !self.reordering_seen && (in_recovery || sacked_out >= DUP_THRESH) {
            return Duration::ZERO;
        }
        (min_rtt / 4 * self.reo_wnd_mult).min(srtt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(start: u32, xmit_ms: u64) -> Sent {
        Sent::new(
            Seq(start),
            Seq(start + 100),
            false,
            Instant::from_millis(xmit_ms),
        )
    }

    #[test]
    fn tracks_the_most_recently_sent_delivery() {
        let mut r = Rack::new(Seq(0));
        let now = Instant::from_millis(50);
        r.on_delivered(&seg(100, 10), now, None);
        r.on_delivered(&seg(0, 5), now, None);
        assert_eq!(r.last(), Some((Instant::from_millis(10), Seq(200))));
        assert_eq!(r.rtt(), Duration::from_millis(40));
        assert!(r.reordering_seen, "0 was delivered after 100");
    }

    #[test]
    fn ignores_suspiciously_fast_retransmissions() {
        let mut r = Rack::new(Seq(0));
        let mut s = seg(0, 10);
        s.ever_retrans = true;
        r.on_delivered(
            &s,
            Instant::from_millis(12),
            Some(Duration::from_millis(20)),
        );
        assert_eq!(r.last(), None);
    }

    #[test]
    fn reordering_window() {
        let mut r = Rack::new(Seq(0));
        let (min, srtt) = (Duration::from_millis(40), Duration::from_millis(50));
        assert_eq!(r.reo_wnd(false, 0, min, srtt), Duration::from_millis(10));
        assert_eq!(r.reo_wnd(false, 3, min, srtt), Duration::ZERO);
        assert_eq!(r.reo_wnd(true, 0, min, srtt), Duration::ZERO);
        r.reordering_seen = true;
        r.on_dsack(Seq(0), Seq(1000));
        assert_eq!(r.reo_wnd(true, 5, min, srtt), Duration::from_millis(20));
        r.on_dsack(Seq(500), Seq(2000));
        assert_eq!(r.reo_wnd_mult, 2, "one widening per round trip");
        for _ in 0..REO_WND_PERSIST {
            r.on_recovery_end();
        }
        assert_eq!(r.reo_wnd(true, 5, min, srtt), Duration::from_millis(10));
    }
}
