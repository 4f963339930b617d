//! SimpleBuffer (BaPu §3.3 "Solution", §4.2): the gateway holds a TCP upload's segments
//! until the sequence is continuous and passes them to the receiver in order. BaPu found
//! it does not help (the sender still sees a doubled RTT and timeouts); it is the baseline
//! Proactive-ACK is measured against.
//!
//! Bounded: beyond `limit` bytes held, or when the oldest held segment waited
//! `hole_timeout`, the hole is given up on and everything up to the next hole goes out.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::unwrap_seq as unwrap;
use crate::rpc::segment;
use crate::Instant;

pub struct SimpleBuffer {
    limit: usize,
    hole_timeout: Duration,
    next: Option<u64>,
    held: BTreeMap<u64, (Instant, Vec<u8>, u64)>,
    held_bytes: usize,
    /// (arrival, start) of held segments in arrival order; entries of released ones are
    /// dropped lazily.
    arrivals: VecDeque<(Instant, u64)>,
    out: VecDeque<Vec<u8>>,
    /// Holes given up on (timeout or full).
    pub holes_skipped: u64,
}

impl SimpleBuffer {
    pub fn new(limit: usize, hole_timeout: Duration) -> SimpleBuffer {
        SimpleBuffer {
            limit,
            hole_timeout,
            next: None,
            held: BTreeMap::new(),
            held_bytes: 0,
            arrivals: VecDeque::new(),
            out: VecDeque::new(),
            holes_skipped: 0,
        }
    }

    /// A packet for the receiver. TCP data of the session is resequenced; anything else
    /// (and everything before the SYN is seen) passes at once.
    pub fn push(&mut self, now: Instant, packet: Vec<u8>) {
        let Ok(seg) = segment::parse(&packet) else {
            self.out.push_back(packet);
            return;
        };
        if seg.syn() {
            self.next = Some(u64::from(seg.seq.wrapping_add(1)));
            self.out.push_back(packet);
            return;
        }
        let len = u64::from(seg.payload_len) + u64::from(seg.fin());
        let Some(next) = self.next else {
            self.out.push_back(packet);
            return;
        };
        if len == 0 {
            self.out.push_back(packet);
            return;
        }
        let start = unwrap(next, seg.seq);
        if start + len <= next || self.held.contains_key(&start) {
            // Old data (a retransmission): the receiver answers it with a duplicate ACK.
            self.out.push_back(packet);
            return;
        }
        self.held_bytes += packet.len();
        self.held.insert(start, (now, packet, start + len));
        self.arrivals.push_back((now, start));
        self.release();
        while self.held_bytes > self.limit {
            self.skip_hole();
        }
    }

    fn release(&mut self) {
        let Some(mut next) = self.next else { return };
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() > next {
                break;
            }
            let (_, p, end) = entry.remove();
            self.held_bytes -= p.len();
            next = next.max(end);
            self.out.push_back(p);
        }
        self.next = Some(next);
        while let Some(&(at, start)) = self.arrivals.front() {
            if self.held.get(&start).is_some_and(|h| h.0 == at) {
                break;
            }
            self.arrivals.pop_front();
        }
    }

    fn skip_hole(&mut self) {
        if let Some((&start, _)) = self.held.first_key_value() {
            self.next = Some(start);
            self.holes_skipped += 1;
            self.release();
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.held
            .values()
            .map(|(at, _, _)| *at)
            .min()
            .map(|t| t + self.hole_timeout)
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        while self.poll_timeout().is_some_and(|t| t <= now) {
            self.skip_hole();
        }
    }

    /// The next packet for the receiver.
    pub fn poll_deliver(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }
}
