//! The receiver's capacity estimate for one path, from packet trains in the data itself
//! (PluriBus §4.2, "Estimating Queue Length", second half).
//!
//! PluriBus's insight: "if the sender sends a train of packets faster than the path
//! capacity, the receive rate corresponds to the path capacity", and bursty data (and
//! opportunistic coded packets) make such trains. The receiver measures rates over fixed
//! intervals (500 ms in the paper); when three qualifying intervals in a row show a receive
//! rate above the current estimate, the estimate becomes the average of itself and the
//! median of the three; likewise when three in a row show a rate below it. The new
//! estimate is reported to the sender.
//!
//! Where we differ, and why:
//! - The paper qualifies an interval when its overall send rate exceeds the estimate and
//!   then takes its overall receive rate. Real traffic interleaves trains with idle time,
//!   and an interval's overall receive rate then mixes the two; worse, with a wrong
//!   (too high) estimate the sender may never exceed it, so it is never corrected. We apply
//!   the insight per pair of consecutive datagrams instead: a datagram that arrived
//!   markedly further behind its predecessor than it was sent was spread out by a busy
//!   bottleneck, so its size over its arrival gap is a capacity sample. "Markedly" is
//!   [`SPREAD`] times the send gap for datagrams of about the same size, and twice the send
//!   gap otherwise (on an idle link a large datagram after a small one arrives later by
//!   the difference of their transmission times, which is not queueing). The interval's rate
//!   is the summed size over the summed arrival gaps of those *busy pairs*, and an interval
//!   qualifies with at least [`MIN_BUSY_PAIRS`] of them. The three-interval rule and the
//!   update are the paper's.
//! - A pair is only busy if its second datagram reached the bottleneck before the first had
//!   left it, the premise of a packet pair: the second's one-way delay (arrival less send
//!   timestamp, skew included) exceeds the path's smallest one by at least the arrival gap
//!   (equivalently, the second was sent at least the smallest one-way delay before the
//!   first arrived). The ratio test alone also took a *service gap* for a busy
//!   bottleneck: on a cellular link whose capacity comes in bursts of delivery
//!   opportunities (a mahimahi trace), a lone small datagram that just missed one
//!   opportunity waits for the next, tens of milliseconds later, and 60 bytes over 20 ms read
//!   as 24 kbit/s. Sparse uplink traffic (TCP ACKs and requests) made only such samples,
//!   and the averaging update walked the recorded LTE uplinks' estimates from their mean
//!   rates (1.9 and 6.5 Mbit/s) down to 9 and 51 kbit/s; the gateway's queue model then
//!   read a 300-byte request as 50 ms of queue and held short flows' packets in its send
//!   queue. `braid demo --sim --quick`, braid's median FCT 175 -> 166 ms (p95 638 -> 523;
//!   verizon alone 166), the uplinks now read 1.3 and 2.6 Mbit/s; `braid bench
//!   pluribus-fig17 --quick` 0.985 -> 0.988 of packets within 10 ms. The smallest one-way delay is the minimum over the last one to
//!   two [`MIN_DELAY_WINDOW`]s, so a drifting skew is followed.
//! - Datagrams that arrive at the very instant of a busy predecessor came out of the same
//!   delivery opportunity: their bytes count towards the interval's busy bytes (with no
//!   time of their own), so a link that delivers several small datagrams per opportunity
//!   is not read as one datagram per opportunity.
//! - Lost datagrams used the bottleneck's capacity before they were lost on the air
//!   ("capacity ... is different from throughput ... the two are equal in the absence of
//!   losses"), so a datagram that reveals a gap of `n` missing sequence numbers counts
//!   `n + 1` datagrams of its size; otherwise a path losing 5% would be estimated 5% slow.
//! - A capacity nobody configured is measured at once: the first interval that qualifies
//!   sets it, and closes as soon as it holds [`FIRST_BUSY_PAIRS`] busy pairs. Until then
//!   the sender assumes a fast link and overdrives the path (PluriBus bootstraps with the
//!   configured capacity instead); three full intervals kept that up for 1.5 s and more,
//!   and the bottleneck's drop-tail took hundreds of datagrams (prism-fig8 at 70%
//!   disparity). The paper's three-interval rule moves every later estimate.
//! - An estimate far below the path's capacity starves the path (the sender's queue model
//!   reads each datagram as a long wait), and a starved path makes no trains to correct
//!   it: trace-bulk's 5g-static+lte-walk kept its 5G path at 72 kbit/s for 20 s after an
//!   outage while its datagrams crossed with no queue. An interval that delivered at least
//!   [`RAISE`] times the estimate while no datagram waited more than [`QUIET`] beyond the
//!   smallest one-way delay sets the estimate to its receive rate (lost datagrams
//!   included): a lower bound of the capacity. The fall stays the paper's three intervals:
//!   taking one low interval at once overdrove nothing less and cut trace-bulk's umts+evdo
//!   from 0.77 to 0.68 of the links' sum.
//! - Intervals that do not qualify are skipped: they neither count towards nor break a run
//!   of three. A qualifying interval in the opposite direction starts a new run.

use std::time::Duration;

use crate::Instant;

/// Fewest busy pairs in an interval for its rate to count.
pub const MIN_BUSY_PAIRS: u32 = 3;
/// Qualifying intervals in a row needed to move the estimate.
pub const RUN: usize = 3;
/// Busy pairs after which the first interval of an unknown capacity closes.
pub const FIRST_BUSY_PAIRS: u32 = 8;
/// Arrival gap over send gap beyond which two datagrams of similar size queued at the
/// bottleneck (jitter alone stays below it).
pub const SPREAD: f64 = 1.25;
/// The smallest one-way delay is taken over the current and the previous window of this
/// length.
pub const MIN_DELAY_WINDOW: Duration = Duration::from_secs(10);
/// An interval that delivered at least this many times the estimate with no queue raises
/// the estimate to its receive rate (`braid bench trace-bulk --quick`: 1.5 and 2 alike;
/// the larger keeps noise from moving the estimate).
pub const RAISE: u64 = 2;
/// Longest wait beyond the smallest one-way delay that still counts as no queue: a
/// cellular link's wait for its next delivery opportunity (`trace-bulk --quick`: 20 and
/// 50 ms alike on the stuck path; 50 ms let mpw-13_1's drops per MB go 12 -> 31).
pub const QUIET: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Above,
    Below,
}

/// The current interval's busy pairs.
#[derive(Clone, Copy, Debug)]
struct Interval {
    start: Instant,
    busy_bytes: u64,
    busy_us: u64,
    busy_pairs: u32,
    /// Every byte that arrived (and was lost on the air) in the interval, when the last
    /// one arrived, and the longest any of them waited beyond the smallest one-way delay.
    all_bytes: u64,
    last_at: Instant,
    max_waited_us: i64,
}

/// Bytes other senders' datagrams brought on the path while an interval ran
/// ([`CapacityEstimator::note_foreign`]).
#[derive(Clone, Copy, Debug, Default)]
struct Foreign {
    bytes: u64,
}

/// Receiver-side capacity estimator of one path.
#[derive(Clone, Debug)]
pub struct CapacityEstimator {
    estimate_bps: u64,
    interval: Duration,
    current: Option<Interval>,
    /// Arrival, send timestamp and size of the previous datagram, and whether it was
    /// counted as busy.
    previous: Option<(Instant, u32, usize, bool)>,
    /// Smallest one-way delay (arrival clock less send timestamp, µs, wrapping) in the
    /// current [`MIN_DELAY_WINDOW`], the one before, and when the current one started.
    min_delay: Option<(u32, u32, Instant)>,
    run: Option<(Direction, [u64; RUN], usize)>,
    /// Whether the estimate is a configured expectation or a measurement, rather than
    /// [`UNKNOWN_BPS`] standing in for a capacity nobody configured.
    known: bool,
    /// Foreign bytes of the current interval.
    foreign: Foreign,
}

/// The working estimate of a path whose expected capacity was not configured (a server
/// knows nothing of its gateways' uplinks). Reported as unknown (0) until measured, so the
/// sender keeps its own configured capacity rather than adopting this stand-in: a gateway
/// whose 200 kbit/s uplink was reported at 100 Mbit/s paced Evolution's coded packets at
/// that rate for the 10-20 s the averaging update took to come down, and its uplink queues
/// overflowed (braid-lab, the bus links).
pub const UNKNOWN_BPS: u64 = 100_000_000;

impl CapacityEstimator {
    /// Starts from the configured expected capacity ("We bootstrap nodes with expected
    /// capacity of the paths"); 0 when none is configured: the estimate is then
    /// [`UNKNOWN_BPS`] until the first measurement, which it takes as is.
    pub fn new(initial_bps: u64, interval: Duration) -> Self {
        CapacityEstimator {
            estimate_bps: if initial_bps == 0 {
                UNKNOWN_BPS
            } else {
                initial_bps
            },
            interval,
            current: None,
            previous: None,
            min_delay: None,
            run: None,
            known: initial_bps != 0,
            foreign: Foreign::default(),
        }
    }

    /// Whether the estimate was configured or measured (see [`UNKNOWN_BPS`]).
    pub fn is_known(&self) -> bool {
        self.known
    }

    /// Current estimate, bits per second.
    pub fn estimate_bps(&self) -> u64 {
        self.estimate_bps
    }

    /// `bytes` of another sender's datagrams arrived on the path (split-TCP's stream beside
    /// the tunnel, on its own socket): they interleave with this path's datagrams at the
    /// bottleneck and spread its packet pairs, so a busy pair reads the share left over,
    /// not the capacity. An interval's own and foreign bytes over its length are a lower
    /// bound of the capacity (capacity >= throughput), which the estimate never falls
    /// under while foreign bytes are counted.
    pub fn note_foreign(&mut self, bytes: u64) {
        if self.current.is_some() {
            self.foreign.bytes += bytes;
        }
    }

    /// Accounts for a datagram of `wire_bytes` that arrived at `now` and was sent at the
    /// sender's timestamp `sent` (µs, wrapping), after `missing` datagrams of the path that
    /// never arrived. Returns the new estimate when it changed.
    pub fn on_datagram(
        &mut self,
        now: Instant,
        sent: u32,
        wire_bytes: usize,
        missing: u32,
    ) -> Option<u64> {
        let mut changed = None;
        if let Some(iv) = self.current {
            if now.saturating_duration_since(iv.start) >= self.interval {
                changed = self.close(iv, now);
                self.current = None;
            }
        }
        let delay = now.wire_timestamp().wrapping_sub(sent);
        let base = self.note_delay(now, delay);
        let iv = self.current.get_or_insert(Interval {
            start: now,
            busy_bytes: 0,
            busy_us: 0,
            busy_pairs: 0,
            all_bytes: 0,
            last_at: now,
            max_waited_us: 0,
        });
        let mut busy = false;
        if let Some((prev_at, prev_sent, prev_size, prev_busy)) = self.previous {
            let arrival_gap = now.saturating_duration_since(prev_at).as_micros() as u64;
            let send_gap = u64::from(sent.wrapping_sub(prev_sent));
            let similar = wire_bytes.abs_diff(prev_size) * 10 <= wire_bytes;
            let factor = if similar { SPREAD } else { 2.0 };
            // Queued behind the predecessor: waited at least the arrival gap beyond the
            // smallest one-way delay.
            let waited = i64::from(delay.wrapping_sub(base) as i32);
            let queued = waited >= 0 && waited as u64 >= arrival_gap;
            let bytes = wire_bytes as u64 * (1 + u64::from(missing.min(1000)));
            iv.all_bytes += bytes;
            iv.last_at = now;
            iv.max_waited_us = iv.max_waited_us.max(waited);
            // Spread by the bottleneck. (A send gap "in the future" means reordering or a
            // clock wrap: no sample.)
            if queued
                && arrival_gap > 0
                && send_gap < (1 << 31)
                && send_gap as f64 * factor <= arrival_gap as f64
            {
                iv.busy_bytes += bytes;
                iv.busy_us += arrival_gap;
                iv.busy_pairs += 1;
                busy = true;
            } else if queued && arrival_gap == 0 && prev_busy && iv.busy_us > 0 {
                // Out of the same delivery opportunity as a busy predecessor.
                iv.busy_bytes += bytes;
                busy = true;
            }
        }
        self.previous = Some((now, sent, wire_bytes, busy));
        if !self.known && iv.busy_pairs >= FIRST_BUSY_PAIRS {
            let iv = *iv;
            self.current = None;
            changed = self.close(iv, now).or(changed);
        }
        changed
    }

    /// Notes a datagram's one-way delay and returns the smallest over the last one to two
    /// [`MIN_DELAY_WINDOW`]s (wrapping comparison: delays on one path differ by far less
    /// than 2^31 µs).
    fn note_delay(&mut self, now: Instant, delay: u32) -> u32 {
        let lower = |a: u32, b: u32| if (a.wrapping_sub(b) as i32) < 0 { a } else { b };
        let (cur, prev, start) = self.min_delay.get_or_insert((delay, delay, now));
        if now.saturating_duration_since(*start) >= MIN_DELAY_WINDOW {
            *prev = *cur;
            *cur = delay;
            *start = now;
        } else {
            *cur = lower(*cur, delay);
        }
        lower(*cur, *prev)
    }

    /// The interval's receive rate, if it is at least [`RAISE`] times the estimate while
    /// nothing waited more than [`QUIET`] at the bottleneck over at least half an interval:
    /// what a path delivered without a queue, it can carry (capacity >= throughput).
    fn uncongested_rate(&self, iv: &Interval) -> Option<u64> {
        let span = iv.last_at.saturating_duration_since(iv.start);
        if !self.known || span * 2 < self.interval || iv.max_waited_us > QUIET.as_micros() as i64 {
            return None;
        }
        let rate = u64::try_from(
            u128::from(iv.all_bytes) * 8 * 1_000_000 / u128::from(span.as_micros() as u64),
        )
        .unwrap_or(u64::MAX);
        (rate >= self.estimate_bps.saturating_mul(RAISE)).then_some(rate)
    }

    /// The interval's own and foreign bytes over its length, when foreign bytes came.
    fn delivered_floor(&mut self, iv: &Interval, now: Instant) -> u64 {
        let foreign = std::mem::take(&mut self.foreign).bytes;
        let us = now.saturating_duration_since(iv.start).as_micros() as u64;
        if foreign == 0 || us == 0 {
            return 0;
        }
        u64::try_from(u128::from(iv.all_bytes + foreign) * 8 * 1_000_000 / u128::from(us))
            .unwrap_or(u64::MAX)
    }

    fn close(&mut self, iv: Interval, now: Instant) -> Option<u64> {
        let floor = self.delivered_floor(&iv, now);
        if floor > self.estimate_bps && self.known {
            self.run = None;
            self.estimate_bps = floor;
            return Some(floor);
        }
        if let Some(rate) = self.uncongested_rate(&iv) {
            self.run = None;
            self.estimate_bps = rate;
            return Some(rate);
        }
        if iv.busy_pairs < MIN_BUSY_PAIRS || iv.busy_us == 0 {
            return None;
        }
        let rate =
            u64::try_from(u128::from(iv.busy_bytes) * 8 * 1_000_000 / u128::from(iv.busy_us))
                .unwrap_or(u64::MAX)
                .max(floor);
        if !self.known {
            // The first measurement of an unknown capacity stands alone.
            self.known = true;
            self.estimate_bps = rate.max(1);
            return Some(self.estimate_bps);
        }
        let dir = match rate.cmp(&self.estimate_bps) {
            std::cmp::Ordering::Greater => Direction::Above,
            std::cmp::Ordering::Less => Direction::Below,
            std::cmp::Ordering::Equal => {
                self.run = None;
                return None;
            }
        };
        let (_, rates, n) = match &mut self.run {
            Some(run) if run.0 == dir => run,
            _ => self.run.insert((dir, [0; RUN], 0)),
        };
        rates[*n] = rate;
        *n += 1;
        if *n < RUN {
            return None;
        }
        let mut sorted = *rates;
        sorted.sort_unstable();
        let median = sorted[RUN / 2];
        self.run = None;
        let new = (((u128::from(self.estimate_bps) + u128::from(median)) / 2) as u64).max(1);
        if new == self.estimate_bps {
            None
        } else {
            self.estimate_bps = new;
            Some(new)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000;

    /// Feeds one 500 ms interval with a train: `n` datagrams of 1000 bytes sent every
    /// `send_gap_us` and arriving every `recv_gap_us`, starting at `t0_ms`.
    fn interval(
        c: &mut CapacityEstimator,
        t0_ms: u64,
        n: u64,
        send_gap_us: u64,
        recv_gap_us: u64,
    ) -> Option<u64> {
        let mut changed = None;
        for i in 0..n {
            let now = Instant::from_micros(t0_ms * MS + i * recv_gap_us);
            let sent = (t0_ms * MS + i * send_gap_us) as u32;
            if let Some(v) = c.on_datagram(now, sent, 1000, 0) {
                changed = Some(v);
            }
        }
        changed
    }

    #[test]
    fn foreign_bytes_keep_the_estimate_at_what_the_path_delivered() {
        // A 10 Mbit/s path; this sender's pairs leave 1 ms apart and arrive 4 ms apart,
        // spread by another sender's datagrams in between: read alone, 2 Mbit/s.
        let run = |foreign: u64| {
            let mut c = CapacityEstimator::new(10_000_000, Duration::from_millis(500));
            for k in 0..3 {
                interval(&mut c, 500 * k, 125, 1000, 4000);
                c.note_foreign(foreign);
            }
            interval(&mut c, 1500, 1, 1000, 4000);
            c.estimate_bps()
        };
        assert_eq!(run(0), 6_000_000, "alone, the pairs pull it down");
        // The other sender brought 500 kB an interval: 125 kB + 500 kB in 0.5 s.
        assert_eq!(run(500_000), 10_000_000);
    }

    #[test]
    fn three_intervals_above_raise_to_average_with_median() {
        // Estimate 1 Mbit/s; the path really carries 2 Mbit/s (1000 B every 4 ms) and the
        // sender sends at 8 Mbit/s (every 1 ms).
        let mut c = CapacityEstimator::new(1_000_000, Duration::from_millis(500));
        assert_eq!(interval(&mut c, 0, 100, 1000, 4000), None);
        assert_eq!(interval(&mut c, 500, 100, 1000, 4000), None);
        assert_eq!(interval(&mut c, 1000, 100, 1000, 4000), None);
        // The third interval is closed by the first datagram of the fourth.
        let changed = interval(&mut c, 1500, 1, 1000, 4000);
        assert_eq!(changed, Some(1_500_000));
        assert_eq!(c.estimate_bps(), 1_500_000);
    }

    #[test]
    fn an_unknown_capacity_takes_the_first_measurement_as_is() {
        let mut c = CapacityEstimator::new(0, Duration::from_millis(500));
        assert!(!c.is_known());
        assert_eq!(c.estimate_bps(), UNKNOWN_BPS);
        // Sent at 8 Mbit/s, received at 2 Mbit/s: 2, not the average with the stand-in, and
        // at once: after FIRST_BUSY_PAIRS busy pairs.
        // (The first pair is not busy: its second datagram had not waited the arrival gap.)
        let first = (0..100u64).find_map(|i| {
            let now = Instant::from_micros(i * 4 * MS);
            c.on_datagram(now, (i * MS) as u32, 1000, 0).map(|v| (i, v))
        });
        assert_eq!(first, Some((u64::from(FIRST_BUSY_PAIRS) + 1, 2_000_000)));
        assert!(c.is_known());
        // Later estimates move by the paper's rule: three intervals in a row.
        assert_eq!(interval(&mut c, 400, 60, 1000, 8000), None);
        assert_eq!(interval(&mut c, 900, 60, 1000, 8000), None);
        assert_eq!(interval(&mut c, 1400, 60, 1000, 8000), None);
        assert_eq!(interval(&mut c, 1900, 1, 1000, 8000), Some(1_500_000));
        assert!(CapacityEstimator::new(1, Duration::from_millis(500)).is_known());
    }

    #[test]
    fn three_intervals_below_lower_it() {
        let mut c = CapacityEstimator::new(4_000_000, Duration::from_millis(500));
        // Sent at 8 Mbit/s, received at 2 Mbit/s.
        for k in 0..3 {
            assert_eq!(interval(&mut c, k * 500, 100, 1000, 4000), None);
        }
        assert_eq!(interval(&mut c, 1500, 1, 1000, 4000), Some(3_000_000));
    }

    #[test]
    fn losses_inside_a_train_count_as_used_capacity() {
        // 2 Mbit/s path losing every 10th datagram: the receive rate of what arrives is
        // 1.8 Mbit/s, but the estimate must converge on 2.
        let mut c = CapacityEstimator::new(1_000_000, Duration::from_millis(500));
        for k in 0..60u64 {
            for i in 0..100u64 {
                if i % 10 == 9 {
                    continue;
                }
                let now = Instant::from_micros(k * 500 * MS + i * 4000);
                let sent = (k * 500 * MS + i * 1000) as u32;
                let missing = u32::from(i % 10 == 0 && i > 0);
                c.on_datagram(now, sent, 1000, missing);
            }
        }
        let err = (c.estimate_bps() as f64 - 2_000_000.0).abs() / 2_000_000.0;
        assert!(err < 0.01, "{}", c.estimate_bps());
    }

    #[test]
    fn compressed_trains_correct_an_overestimate() {
        // Estimate 10 Mbit/s, sender at 4 Mbit/s (2 ms gaps), path at 2 Mbit/s (4 ms): the
        // sender never exceeds the (wrong) estimate, but the pairs are spread twofold.
        let mut c = CapacityEstimator::new(10_000_000, Duration::from_millis(500));
        for k in 0..3 {
            assert_eq!(interval(&mut c, k * 500, 100, 2000, 4000), None);
        }
        assert_eq!(interval(&mut c, 1500, 1, 2000, 4000), Some(6_000_000));
    }

    #[test]
    fn idle_time_between_bursts_does_not_read_as_low_capacity() {
        // A 2 Mbit/s path (1000 B every 4 ms when busy), estimate right. Each 500 ms
        // interval: one lone datagram, 300 ms of silence, then a burst of 20 sent at once.
        let mut c = CapacityEstimator::new(2_000_000, Duration::from_millis(500));
        for k in 0..30u64 {
            let t0 = k * 500 * MS;
            c.on_datagram(Instant::from_micros(t0), t0 as u32, 1000, 0);
            let burst = t0 + 300 * MS;
            for i in 0..20u64 {
                let at = Instant::from_micros(burst + (i + 1) * 4000);
                assert_eq!(c.on_datagram(at, burst as u32, 1000, 0), None);
            }
        }
        assert_eq!(c.estimate_bps(), 2_000_000);
    }

    #[test]
    fn slow_senders_say_nothing() {
        // Sent at 1 Mbit/s, below the 4 Mbit/s estimate: never qualifies.
        let mut c = CapacityEstimator::new(4_000_000, Duration::from_millis(500));
        for k in 0..10 {
            assert_eq!(interval(&mut c, k * 500, 60, 8000, 8000), None);
        }
        assert_eq!(c.estimate_bps(), 4_000_000);
    }

    #[test]
    fn paced_senders_say_nothing_even_below_the_estimate() {
        // Sent and received 8 ms apart (1 Mbit/s): no pair was spread by a bottleneck, and
        // the rate is under twice the estimate.
        let mut c = CapacityEstimator::new(600_000, Duration::from_millis(500));
        for k in 0..10 {
            assert_eq!(interval(&mut c, k * 500, 60, 8000, 8000), None);
        }
        assert_eq!(c.estimate_bps(), 600_000);
    }

    /// Feeds `ms` milliseconds of 1000-byte datagrams sent every `gap_ms` from `t0_ms`,
    /// each arriving `base_ms` plus `extra_ms(i)` after it was sent.
    fn paced(
        c: &mut CapacityEstimator,
        t0_ms: u64,
        ms: u64,
        gap_ms: u64,
        base_ms: u64,
        extra_ms: impl Fn(u64) -> u64,
    ) -> Option<u64> {
        let mut changed = None;
        for i in 0..ms / gap_ms {
            let sent = (t0_ms + i * gap_ms) * MS;
            let now = Instant::from_micros(sent + (base_ms + extra_ms(i)) * MS);
            changed = c.on_datagram(now, sent as u32, 1000, 0).or(changed);
        }
        changed
    }

    #[test]
    fn an_uncongested_interval_at_twice_the_estimate_raises_it() {
        // Estimate 100 kbit/s; the path delivers 400 kbit/s (1000 B every 20 ms) with a
        // constant 30 ms delay: the first interval raises the estimate to its receive rate.
        let mut c = CapacityEstimator::new(100_000, Duration::from_millis(500));
        let raised = paced(&mut c, 0, 520, 20, 30, |_| 0).unwrap();
        assert!((380_000..=420_000).contains(&raised), "{raised}");
        // 1.5 times the new estimate: no change.
        let mut c = CapacityEstimator::new(270_000, Duration::from_millis(500));
        assert_eq!(paced(&mut c, 0, 2000, 20, 30, |_| 0), None);
    }

    #[test]
    fn a_queue_keeps_the_estimate_from_rising() {
        // The same rate, but each datagram waits 0-40 ms more than the smallest delay: the
        // first interval leaves it (later ones move it by the paper's three-interval rule).
        let mut c = CapacityEstimator::new(100_000, Duration::from_millis(500));
        assert_eq!(paced(&mut c, 0, 520, 20, 30, |i| (i * 7) % 41), None);
        // Waits up to QUIET are a cellular link's delivery opportunities, not a queue.
        let mut c = CapacityEstimator::new(100_000, Duration::from_millis(500));
        assert!(paced(&mut c, 0, 520, 20, 30, |i| (i * 7) % 19).is_some_and(|r| r >= 200_000));
    }

    #[test]
    fn skipped_intervals_do_not_break_a_run_but_opposite_ones_do() {
        let mut c = CapacityEstimator::new(1_000_000, Duration::from_millis(500));
        assert_eq!(interval(&mut c, 0, 100, 1000, 4000), None); // above
        assert_eq!(interval(&mut c, 500, 10, 40_000, 40_000), None); // slow sender: skipped
        assert_eq!(interval(&mut c, 1000, 100, 1000, 4000), None); // above
        assert_eq!(interval(&mut c, 1500, 30, 100, 16_000), None); // below: new run
        assert_eq!(interval(&mut c, 2000, 100, 1000, 4000), None); // above: new run (1)
        assert_eq!(interval(&mut c, 2500, 100, 1000, 4000), None); // (2)
        assert_eq!(interval(&mut c, 3000, 100, 1000, 4000), None); // (3), closed next
        assert_eq!(interval(&mut c, 3500, 1, 1000, 4000), Some(1_500_000));
    }

    #[test]
    fn converges_on_a_steady_path() {
        // Repeated runs halve the error each time.
        let mut c = CapacityEstimator::new(500_000, Duration::from_millis(500));
        for k in 0..60 {
            interval(&mut c, k * 500, 100, 1000, 4000);
        }
        let err = (c.estimate_bps() as f64 - 2_000_000.0).abs() / 2_000_000.0;
        assert!(err < 0.01, "{}", c.estimate_bps());
    }

    #[test]
    fn waits_for_a_delivery_opportunity_do_not_read_as_low_capacity() {
        // A bursty link (one delivery opportunity every 20 ms, each of 1500 bytes: 600
        // kbit/s, estimate right) carrying sparse 60-byte datagrams sent every 7 ms: each
        // waits for the next opportunity, and pairs that straddle one arrive 20 ms apart
        // though sent 7 ms apart. No datagram queued behind another: no sample.
        let mut c = CapacityEstimator::new(600_000, Duration::from_millis(500));
        for i in 0..3000u64 {
            let sent = i * 7 * MS;
            let arrival = (sent / (20 * MS) + 1) * 20 * MS + 5 * MS;
            assert_eq!(
                c.on_datagram(Instant::from_micros(arrival), sent as u32, 60, 0),
                None
            );
        }
        assert_eq!(c.estimate_bps(), 600_000);
    }

    #[test]
    fn datagrams_out_of_one_opportunity_count_together() {
        // A burst of 150 datagrams of 100 bytes sent at once each 500 ms; the link delivers
        // 15 of them (1500 bytes) every millisecond: 12 Mbit/s, estimate 1 Mbit/s.
        let mut c = CapacityEstimator::new(1_000_000, Duration::from_millis(500));
        let mut changed = None;
        for k in 0..4u64 {
            let t0 = k * 500 * MS;
            for i in 0..150u64 {
                let at = Instant::from_micros(t0 + (i / 15 + 1) * MS);
                changed = c.on_datagram(at, t0 as u32, 100, 0).or(changed);
            }
        }
        assert_eq!(changed, Some(6_500_000));
    }
}
