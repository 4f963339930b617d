//! Active queue management at the session's send queue: CoDel (Nichols and Jacobson,
//! RFC 8289) on the bond's standing queue, so that the inner TCP backs off while the queue
//! it builds is still short, instead of filling every path's bottleneck queue to the
//! delay-based scheduler's cap and then the send queue to its drop-tail.
//!
//! Beyond the papers. Without it an inner TCP with a large receive window (Linux tunes it
//! to megabytes) keeps the bottleneck queues at the cap (150 ms) and the send queue up to
//! [`crate::sched::delay::HOLD_MAX`] (500 ms) behind them: its round trip grows from the
//! paths' 40-60 ms to several hundred, every later loss holds in-order delivery that long,
//! and after a path fails the survivor's full queue delays the lost segments'
//! retransmissions by as much (`docs/lab.md`, "Path failure").
//!
//! What is measured is the delay a packet arriving now will wait *beyond what spreading
//! over the paths needs*: the least, over the usable paths, of the wait the delay-based
//! scheduler predicts there (the queue estimate of PluriBus §4.2, plus the send queue's
//! backlog for a path at the scheduler's cap, which the backlog waits for). The scheduler
//! deliberately queues on a short path until its delivery matches a longer path's, at the
//! sender once the short path's bottleneck queue is at the cap; that wait is not standing
//! as long as the longer path's is short, so the least wait is the one no path needed.
//! CoDel's control law runs on that estimate at arrival (RFC 8289 drops at dequeue, where
//! the sojourn time is known; a packet refused here never gets a data sequence number, so
//! the receiver sees no hole): once it has stayed above the target for the interval, a
//! packet is refused, and the next ones at intervals shrinking with the square root of the
//! drop count, until it falls below the target.
//! Only TCP segments carrying data are refused (ACKs, SYNs and other protocols pass): they
//! are what a loss slows down; of those, only long flows' first transmissions: a short
//! flow's loss costs it a timeout, a lost retransmission any flow.
//!
//! An engine option ([`crate::Config::aqm`]), off by default. What it does, measured:
//! `lab-failover` recovers in 250-350 ms with it against 1400-2300 ms without (the inner
//! TCP's queues stay short, so no loss after the failover holds delivery for long); the
//! simulated lab failover's web flows beside the download finish with a median of 149 ms
//! against 804 ms (44 of 46 done in the 12 s run against 36), the download getting
//! 17.2 Mbit/s before the failure against 18.2. But a single TCP flow over a 50 ms and a
//! 400 ms path (osctp-fig9, b-400) gets 0.70 of the capacity against 0.90 (0.63-0.65 with
//! earlier versions of the interval and the standing queue). With it on for every quick
//! simulator benchmark, a lone TCP flow over slow links cannot keep them busy with the
//! short queue it is held to (prism-fig7 0.825, osctp-fig9 0.864), so it stays off
//! (docs/architecture.md, "An open trade-off").

use std::time::Duration;

use braid_wire::{DATA_FIXED_LEN, HEADER_LEN};

use super::Session;
use crate::Instant;

/// Least standing queue CoDel tolerates (RFC 8289 uses 5 ms; the queue here is a model
/// with errors of a few packets' transmission time, and the paths' own delay varies by
/// more). It is also at least a tenth of the interval (RFC 8289 §4.4: 5-10%).
pub const TARGET: Duration = Duration::from_millis(20);
/// The target is also at least this many full packets' transmission time on the slowest
/// usable path: on a 1 Mbit/s path 20 ms is less than two packets, and a single TCP flow
/// whose queue is held that short leaves the path idle after each window reduction
/// (osctp-fig9 with the AQM, panel a: 0.85-0.89 of capacity with the 20 ms target alone,
/// 0.93-0.97 with this).
pub const TARGET_PACKETS: u32 = 4;
/// Least time the standing queue must stay above the target before a drop. RFC 8289 sets
/// the interval to a round trip of the flows served (100 ms on the Internet): here it is at
/// least the longest minimum RTT among the usable paths, since the inner TCP's round trip
/// is at least that when it uses them all.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// CoDel's state (RFC 8289 §5).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Codel {
    /// When the standing queue, above the target since, may first cause a drop.
    first_above: Option<Instant>,
    dropping: bool,
    drop_next: Instant,
    count: u32,
    last_count: u32,
    /// Packets refused.
    pub(super) drops: u64,
}

/// RFC 8289 §5.5: the next drop comes `interval / √count` after `t`.
fn control_law(t: Instant, count: u32, interval: Duration) -> Instant {
    t + interval.div_f64(f64::from(count.max(1)).sqrt())
}

impl Codel {
    /// Whether to refuse a data segment arriving at `now`, with `standing` the standing
    /// queue it would wait in, under CoDel's `target` and `interval`.
    pub(super) fn should_drop(
        &mut self,
        now: Instant,
        standing: Duration,
        target: Duration,
        interval: Duration,
    ) -> bool {
        if standing < target {
            self.first_above = None;
            self.dropping = false;
            return false;
        }
        let ok_to_drop = match self.first_above {
            None => {
                self.first_above = Some(now + interval);
                false
            }
            Some(t) => now >= t,
        };
        let drop = if self.dropping {
            if now < self.drop_next {
                return false;
            }
            self.count = self.count.saturating_add(1);
            self.drop_next = control_law(self.drop_next, self.count, interval);
            true
        } else if ok_to_drop {
            self.dropping = true;
            // Dropping again soon after the last episode: resume near its rate (§5.4).
            let delta = self.count.saturating_sub(self.last_count);
            let recent = now.saturating_duration_since(self.drop_next) < interval * 16;
            self.count = if delta > 1 && recent { delta } else { 1 };
            self.last_count = self.count;
            self.drop_next = control_law(now, self.count, interval);
            true
        } else {
            false
        };
        if drop {
            self.drops += 1;
        }
        drop
    }
}

/// Whether `packet` is a TCP segment carrying the data of a long flow, and not a
/// retransmission: what the send queue may drop. Short flows and retransmissions pass:
/// a short flow's loss costs it a timeout rather than slowing it, and a lost
/// retransmission costs any flow one.
pub(super) fn is_bulk_data(flows: &crate::flow::FlowTable, packet: &[u8]) -> bool {
    let Some(info) = crate::flow::parse::parse(packet) else {
        return false;
    };
    info.tcp
        .is_some_and(|t| t.payload_len > 0 && !t.syn && !t.fin && !t.rst)
        && flows.peek(&info).is_some_and(|(packets, retransmission)| {
            packets > crate::sched::delay::SHORT_FLOW && !retransmission
        })
}

impl Session {
    /// The standing queue a packet of `wire_bytes` arriving at `now` would wait in: the
    /// least, over the usable paths (the live ones if none is usable), of the wait the
    /// delay-based scheduler predicts on the path, its queue estimate and, for a path at
    /// the scheduler's cap ([`crate::sched::delay::QUEUE_CAP`]), the send queue's backlog
    /// drained over the paths at the cap (it waits for them).
    fn standing_queue(&self, now: Instant, wire_bytes: usize) -> Duration {
        let usable = self.paths.iter().any(crate::path::Path::is_usable);
        let candidates = || {
            self.paths
                .iter()
                .filter(move |p| if usable { p.is_usable() } else { p.is_live() })
        };
        let cap = crate::sched::delay::QUEUE_CAP;
        let capped_bps: u64 = candidates()
            .filter(|p| p.queue_delay(now) >= cap)
            .map(crate::path::Path::capacity_bps)
            .sum();
        let bits = (self.send_queue.len() as u64).saturating_mul(wire_bytes as u64 * 8);
        let backlog = Duration::from_secs_f64(bits as f64 / capped_bps.max(1) as f64);
        candidates()
            .map(|p| {
                let q = p.queue_delay(now);
                if q >= cap {
                    q + backlog
                } else {
                    q
                }
            })
            .min()
            .unwrap_or(Duration::ZERO)
    }

    /// Whether the active queue management refuses the inner packet `packet` arriving at
    /// `now`: a TCP segment carrying data while CoDel calls for a drop.
    pub(super) fn aqm_refuses(&mut self, now: Instant, packet: &[u8]) -> bool {
        if !self.config.aqm {
            return false;
        }
        if !is_bulk_data(&self.scheduling.flows, packet) {
            return false;
        }
        let wire_bytes =
            HEADER_LEN + 4 + DATA_FIXED_LEN + packet.len() + self.config.datagram_overhead;
        let standing = self.standing_queue(now, wire_bytes);
        let interval = self
            .paths
            .iter()
            .filter(|p| p.is_usable())
            .filter_map(|p| p.rtt().min())
            .fold(INTERVAL, Duration::max);
        let slowest_packet = self
            .paths
            .iter()
            .filter(|p| p.is_usable())
            .map(|p| p.transmission_time(1500))
            .max()
            .unwrap_or(Duration::ZERO);
        let target = TARGET
            .max(interval / 10)
            .max(slowest_packet * TARGET_PACKETS);
        self.aqm.should_drop(now, standing, target, interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_only_after_an_interval_above_target_then_faster() {
        let mut c = Codel::default();
        let ms = Instant::from_millis;
        let high = Duration::from_millis(50);
        // Below the target: never.
        assert!(!c.should_drop(ms(0), Duration::from_millis(19), TARGET, INTERVAL));
        // Above it, but for less than an interval.
        assert!(!c.should_drop(ms(10), high, TARGET, INTERVAL));
        assert!(!c.should_drop(ms(109), high, TARGET, INTERVAL));
        // A full interval above: the first drop, then one 100 ms later, then 100/√2.
        assert!(c.should_drop(ms(110), high, TARGET, INTERVAL));
        assert!(!c.should_drop(ms(150), high, TARGET, INTERVAL));
        assert!(c.should_drop(ms(210), high, TARGET, INTERVAL));
        assert!(!c.should_drop(ms(280), high, TARGET, INTERVAL));
        assert!(c.should_drop(ms(281), high, TARGET, INTERVAL));
        assert_eq!(c.drops, 3);
        // Back under the target: dropping stops at once, and starts over only after
        // another interval above.
        assert!(!c.should_drop(ms(300), Duration::from_millis(5), TARGET, INTERVAL));
        assert!(!c.should_drop(ms(310), high, TARGET, INTERVAL));
        assert!(!c.should_drop(ms(400), high, TARGET, INTERVAL));
        assert!(c.should_drop(ms(410), high, TARGET, INTERVAL));
    }
}
