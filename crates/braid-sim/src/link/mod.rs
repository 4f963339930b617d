//! A unidirectional link: a drop-tail queue in front of a transmitter of constant or
//! trace-driven capacity, then impairments on the air and a propagation delay.
//!
//! A packet offered with [`Link::send`] goes through, in order:
//!
//! 1. **Drop-tail queue.** The queue holds every packet that has not finished transmission
//!    (waiting, or partly sent). If adding the packet would exceed the limit (`queue_packets`,
//!    `queue_bytes` or `queue_ms`) it is dropped and counted, using no capacity.
//! 2. **Transmission.** With a constant rate, a packet starts when the link is free and takes
//!    size × 8 / rate. With a mahimahi trace, it takes bytes from delivery opportunities with
//!    mahimahi's link-queue semantics (see [`Trace`]). Because the queue is FIFO
//!    and the transmitter never idles while it has work, each packet's departure time is
//!    known the moment it arrives, and is computed then, in O(1) amortised.
//! 3. **On the air.** The packet used capacity; it is now lost if a blackout covers its
//!    departure time, or if the loss model (Bernoulli or Gilbert-Elliott) says so.
//!    Survivors may have bits flipped (`corruption`) and are still delivered.
//! 4. **Propagation.** Delivery time = departure + `delay_ms` + |N(0, `jitter_ms`)|, raised to
//!    the previous packet's delivery time unless `reorder` is set.
//!
//! Background traffic (`cross_traffic`, `cross.rs`) offers its packets to the same queue at
//! their own arrival times, each before the first of the link's own packets that arrives
//! later; they take capacity and queue space and are never delivered.
//!
//! Randomness comes from the one [`Rng`] given to [`Link::new`], split into separate streams
//! for loss, jitter, random blackouts and corruption, each drawn in send order, so the same
//! inputs and seed give the same deliveries, bit for bit.
//!
//! Driving contract: call [`Link::send`] with non-decreasing `now`; call
//! [`Link::poll_deliver`] until `None` whenever [`Link::poll_timeout`] has passed.

mod config;
pub mod convert;
mod cross;
mod impair;
mod trace;

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod tests;

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use braid_core::Instant;
use serde::Serialize;

use crate::{Packet, Rng};

pub use config::{
    BlackoutConfig, CorruptionConfig, CrossTrafficConfig, GilbertElliott, LinkConfig,
    LinkConfigError, LossConfig, RandomBlackoutConfig, DEFAULT_QUEUE_MIN_PACKETS, DEFAULT_QUEUE_MS,
    MTU_BYTES,
};
pub use trace::{read_trace_text, Trace, TraceCache};

use config::QueueLimit;
use cross::CrossTraffic;
use impair::{Blackouts, Corrupter, LossModel};
use trace::TraceServer;

/// One direction of a simulated path.
#[derive(Debug)]
pub struct Link {
    transmitter: Transmitter,
    limit: QueueLimit,
    delay_us: u64,
    jitter_us: f64,
    /// Departure time (µs) and size of each packet still in the queue, oldest first.
    queue: VecDeque<(u64, u64)>,
    queued_bytes: u64,
    loss: LossModel,
    blackouts: Blackouts,
    corrupter: Option<Corrupter>,
    cross: Option<CrossTraffic>,
    jitter_rng: Rng,
    in_flight: InFlight,
    /// Latest delivery time handed out so far, for FIFO delivery under jitter.
    last_delivery: Instant,
    last_send: Instant,
    next_seq: u64,
    counts: Counts,
}

#[derive(Clone, Debug, Default)]
struct Counts {
    packets_offered: u64,
    bytes_offered: u64,
    packets_delivered: u64,
    bytes_delivered: u64,
    packets_dropped_queue: u64,
    bytes_dropped_queue: u64,
    packets_lost_random: u64,
    packets_lost_blackout: u64,
    packets_corrupted: u64,
    bits_flipped: u64,
    packets_queued: u64,
    queue_delay_sum_us: u128,
    queue_delay_max_us: u64,
    cross_packets_offered: u64,
    cross_packets_dropped: u64,
}

/// What a link did so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinkStats {
    /// Packets and bytes given to [`Link::send`].
    pub packets_offered: u64,
    pub bytes_offered: u64,
    /// Packets and bytes handed out by [`Link::poll_deliver`] (corrupted ones included).
    pub packets_delivered: u64,
    pub bytes_delivered: u64,
    /// Dropped at the tail of a full queue.
    pub packets_dropped_queue: u64,
    pub bytes_dropped_queue: u64,
    /// Transmitted, then lost by the loss model.
    pub packets_lost_random: u64,
    /// Transmitted, then lost because their transmission ended in a blackout.
    pub packets_lost_blackout: u64,
    /// Delivered with at least one bit flipped, and the number of bits flipped in them.
    pub packets_corrupted: u64,
    pub bits_flipped: u64,
    /// Mean and largest time from offer to the end of transmission (waiting plus
    /// serialisation) over packets admitted to the queue, in milliseconds.
    pub queue_delay_mean_ms: f64,
    pub queue_delay_max_ms: f64,
    /// Background packets (`cross_traffic`) offered, and dropped at the full queue.
    #[serde(skip_serializing_if = "is_zero")]
    pub cross_packets_offered: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cross_packets_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LinkStats {
    /// Delivered bits per second over `elapsed`.
    pub fn delivered_rate_bps(&self, elapsed: Duration) -> f64 {
        let secs = elapsed.as_secs_f64();
        if secs > 0.0 {
            self.bytes_delivered as f64 * 8.0 / secs
        } else {
            0.0
        }
    }

    /// Fraction of offered packets dropped or lost (in-flight packets count as not lost).
    pub fn loss_fraction(&self) -> f64 {
        if self.packets_offered == 0 {
            return 0.0;
        }
        let lost =
            self.packets_dropped_queue + self.packets_lost_random + self.packets_lost_blackout;
        lost as f64 / self.packets_offered as f64
    }
}

/// Computes departure times.
#[derive(Clone, Debug)]
enum Transmitter {
    Rate(RateTransmitter),
    Trace(TraceServer),
}

/// A constant-rate transmitter. Time is kept in picoseconds so that rounding does not
/// accumulate over many packets.
#[derive(Clone, Debug)]
struct RateTransmitter {
    ps_per_byte: f64,
    /// When the last queued packet's last bit leaves, in picoseconds.
    free_ps: u128,
}

impl RateTransmitter {
    fn transmit(&mut self, arrival_us: u64, size: u64) -> u64 {
        let start = self.free_ps.max(u128::from(arrival_us) * 1_000_000);
        self.free_ps = start.saturating_add((size as f64 * self.ps_per_byte).round() as u128);
        self.free_ps
            .div_ceil(1_000_000)
            .try_into()
            .unwrap_or(u64::MAX)
    }
}

impl Transmitter {
    fn transmit(&mut self, arrival_us: u64, size: u64) -> u64 {
        match self {
            Transmitter::Rate(r) => r.transmit(arrival_us, size),
            Transmitter::Trace(t) => t.transmit(arrival_us, size),
        }
    }
}

/// A packet propagating towards the far end.
#[derive(Debug)]
struct Flight {
    at: Instant,
    seq: u64,
    flips: u64,
    /// Bytes of capacity it took (see [`Link::send_sized`]).
    size: u64,
    packet: Packet,
}

impl PartialEq for Flight {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Flight {}
impl PartialOrd for Flight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Flight {
    /// By delivery time, ties in send order.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Packets in propagation: already in delivery order without reordering, a heap with it.
#[derive(Debug)]
enum InFlight {
    Fifo(VecDeque<Flight>),
    Reorder(BinaryHeap<Reverse<Flight>>),
}

impl Link {
    /// Builds a link, loading its trace through `traces`. `rng` is this link's own generator.
    pub fn new(
        cfg: &LinkConfig,
        traces: &mut TraceCache,
        mut rng: Rng,
    ) -> Result<Link, LinkConfigError> {
        cfg.validate()?;
        let rate_bps = cfg.mean_rate_bps(traces)?;
        let transmitter = match cfg.trace_path() {
            Some(path) => Transmitter::Trace(TraceServer::new(
                traces.load(path)?,
                cfg.trace_offset_s.unwrap_or(0.0),
            )),
            None => Transmitter::Rate(RateTransmitter {
                ps_per_byte: 8e12 / rate_bps,
                free_ps: 0,
            }),
        };
        let loss = cfg.loss.as_ref().map(LossConfig::resolve).transpose()?;
        let base = rng.next_u64();
        Ok(Link {
            transmitter,
            limit: cfg.queue_limit(rate_bps),
            delay_us: (cfg.delay_ms * 1e3).round() as u64,
            jitter_us: cfg.jitter_ms * 1e3,
            queue: VecDeque::new(),
            queued_bytes: 0,
            loss: LossModel::new(loss, Rng::child(base, "loss")),
            blackouts: Blackouts::new(
                &cfg.blackouts,
                cfg.random_blackouts.as_ref(),
                Rng::child(base, "blackouts"),
            ),
            corrupter: cfg
                .corruption
                .as_ref()
                .and_then(|c| Corrupter::new(c.bit_error_rate, Rng::child(base, "corruption"))),
            cross: (cfg.cross_traffic.as_ref())
                .map(|c| CrossTraffic::new(c, Rng::child(base, "cross-traffic"))),
            jitter_rng: Rng::child(base, "jitter"),
            in_flight: if cfg.reorder {
                InFlight::Reorder(BinaryHeap::new())
            } else {
                InFlight::Fifo(VecDeque::new())
            },
            last_delivery: Instant::ZERO,
            last_send: Instant::ZERO,
            next_seq: 0,
            counts: Counts::default(),
        })
    }

    /// Offers `packet` to the link at `now`. `now` must not decrease between calls (an
    /// earlier `now` is treated as the latest one seen).
    pub fn send(&mut self, now: Instant, packet: Packet) {
        let size = packet.len();
        self.send_sized(now, packet, size);
    }

    /// Like [`Link::send`], but the packet occupies `wire_bytes` of the link's capacity and
    /// queue: its length plus the headers of an encapsulation the simulator does not build
    /// byte by byte (the UDP and IP headers around a braid datagram).
    pub fn send_sized(&mut self, now: Instant, mut packet: Packet, wire_bytes: usize) {
        let now = now.max(self.last_send);
        self.last_send = now;
        let now_us = now.as_micros();
        let size = wire_bytes as u64;
        self.counts.packets_offered += 1;
        self.counts.bytes_offered += size;
        self.offer_cross_traffic(now_us);

        let Some(departure) = self.enqueue(now_us, size) else {
            self.counts.packets_dropped_queue += 1;
            self.counts.bytes_dropped_queue += size;
            return;
        };
        let sojourn = departure.saturating_sub(now_us);
        self.counts.packets_queued += 1;
        self.counts.queue_delay_sum_us += u128::from(sojourn);
        self.counts.queue_delay_max_us = self.counts.queue_delay_max_us.max(sojourn);

        // Both are consulted for every transmitted packet so that each stream advances the
        // same way whatever the other decides.
        let blacked_out = self.blackouts.contains(departure);
        let lost = self.loss.lose();
        if blacked_out {
            self.counts.packets_lost_blackout += 1;
            return;
        }
        if lost {
            self.counts.packets_lost_random += 1;
            return;
        }

        let flips = match &mut self.corrupter {
            Some(c) => c.apply(&mut packet),
            None => 0,
        };
        let jitter_us = if self.jitter_us > 0.0 {
            (self.jitter_rng.normal().abs() * self.jitter_us).round() as u64
        } else {
            0
        };
        let at = Instant::from_micros(
            departure
                .saturating_add(self.delay_us)
                .saturating_add(jitter_us),
        );
        let seq = self.next_seq;
        self.next_seq += 1;
        match &mut self.in_flight {
            InFlight::Fifo(q) => {
                let at = at.max(self.last_delivery);
                self.last_delivery = at;
                q.push_back(Flight {
                    at,
                    seq,
                    flips,
                    size,
                    packet,
                });
            }
            InFlight::Reorder(heap) => heap.push(Reverse(Flight {
                at,
                seq,
                flips,
                size,
                packet,
            })),
        }
    }

    /// Takes `size` bytes arriving at `now_us` into the drop-tail queue and returns their
    /// departure time, or `None` when the queue is full.
    fn enqueue(&mut self, now_us: u64, size: u64) -> Option<u64> {
        while let Some(&(departure, bytes)) = self.queue.front() {
            if departure > now_us {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= bytes;
        }
        let fits = match self.limit {
            QueueLimit::Packets(n) => (self.queue.len() as u64) < n,
            QueueLimit::Bytes(b) => self.queued_bytes + size <= b,
        };
        if !fits {
            return None;
        }
        let departure = self.transmitter.transmit(now_us, size);
        self.queue.push_back((departure, size));
        self.queued_bytes += size;
        Some(departure)
    }

    /// Offers the background packets that arrived by `now_us`, each at its own time.
    fn offer_cross_traffic(&mut self, now_us: u64) {
        let Some(mut c) = self.cross.take() else {
            return;
        };
        while let Some(at) = c.next_by(now_us) {
            self.counts.cross_packets_offered += 1;
            if self.enqueue(at, c.packet_bytes).is_none() {
                self.counts.cross_packets_dropped += 1;
            }
        }
        self.cross = Some(c);
    }

    /// The next packet due by `now`, in delivery order. Call until `None`.
    pub fn poll_deliver(&mut self, now: Instant) -> Option<Packet> {
        self.poll_deliver_checked(now).map(|(p, _)| p)
    }

    /// Like [`Link::poll_deliver`], and says whether bits of the packet were flipped on the
    /// way (what a UDP checksum or an AEAD tag would catch).
    pub fn poll_deliver_checked(&mut self, now: Instant) -> Option<(Packet, bool)> {
        let flight = match &mut self.in_flight {
            InFlight::Fifo(q) => {
                if q.front()?.at > now {
                    return None;
                }
                q.pop_front()?
            }
            InFlight::Reorder(heap) => {
                if heap.peek()?.0.at > now {
                    return None;
                }
                heap.pop()?.0
            }
        };
        self.counts.packets_delivered += 1;
        self.counts.bytes_delivered += flight.size;
        let corrupted = flight.flips > 0;
        if corrupted {
            self.counts.packets_corrupted += 1;
            self.counts.bits_flipped += flight.flips;
        }
        Some((flight.packet, corrupted))
    }

    /// When the next packet is due; `None` when nothing is in flight.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.in_flight {
            InFlight::Fifo(q) => q.front().map(|f| f.at),
            InFlight::Reorder(heap) => heap.peek().map(|f| f.0.at),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        let c = &self.counts;
        let mean_us = if c.packets_queued > 0 {
            c.queue_delay_sum_us as f64 / c.packets_queued as f64
        } else {
            0.0
        };
        LinkStats {
            packets_offered: c.packets_offered,
            bytes_offered: c.bytes_offered,
            packets_delivered: c.packets_delivered,
            bytes_delivered: c.bytes_delivered,
            packets_dropped_queue: c.packets_dropped_queue,
            bytes_dropped_queue: c.bytes_dropped_queue,
            packets_lost_random: c.packets_lost_random,
            packets_lost_blackout: c.packets_lost_blackout,
            packets_corrupted: c.packets_corrupted,
            bits_flipped: c.bits_flipped,
            queue_delay_mean_ms: mean_us / 1e3,
            queue_delay_max_ms: c.queue_delay_max_us as f64 / 1e3,
            cross_packets_offered: c.cross_packets_offered,
            cross_packets_dropped: c.cross_packets_dropped,
        }
    }
}
