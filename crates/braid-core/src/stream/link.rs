//! A tiny deterministic link model for the stream's end-to-end tests: a rate, a one-way
//! delay, a drop-tail queue limit in time, Bernoulli loss from a seeded xorshift, and
//! down intervals during which whatever is sent or arrives is lost.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use crate::Instant;

#[derive(Clone, Debug)]
pub struct LinkParams {
    pub bits_per_sec: u64,
    pub delay: Duration,
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Extra delay drawn uniformly up to this, per datagram: reorders.
    pub jitter: Duration,
    /// Extra delay |N(0, σ)| per datagram (a half-normal draw, as braid-sim's and the
    /// lab's `jitter_ms` with `reorder`): reorders.
    pub jitter_sigma: Duration,
    /// Longest wait in the queue before drop-tail.
    pub queue: Duration,
    pub down: Vec<(Instant, Instant)>,
}

impl LinkParams {
    pub fn new(mbit: f64, delay_ms: u64) -> Self {
        LinkParams {
            bits_per_sec: (mbit * 1e6) as u64,
            delay: Duration::from_millis(delay_ms),
            loss: 0.0,
            duplicate: 0.0,
            jitter: Duration::ZERO,
            jitter_sigma: Duration::ZERO,
            queue: Duration::from_millis(200),
            down: Vec::new(),
        }
    }

    pub fn loss(mut self, p: f64) -> Self {
        self.loss = p;
        self
    }

    pub fn down(mut self, from: Instant, to: Instant) -> Self {
        self.down.push((from, to));
        self
    }

    fn is_down(&self, t: Instant) -> bool {
        self.down.iter().any(|&(a, b)| a <= t && t < b)
    }
}

#[derive(Debug)]
pub struct Link {
    params: LinkParams,
    free_at: Instant,
    rng: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
}

impl Link {
    pub fn new(params: LinkParams, seed: u64) -> Self {
        Link {
            params,
            free_at: Instant::ZERO,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            seq: 0,
            queue: BinaryHeap::new(),
        }
    }

    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn send(&mut self, now: Instant, bytes: &[u8]) {
        let lost = self.uniform() < self.params.loss;
        if self.params.is_down(now) {
            return;
        }
        let start = self.free_at.max(now);
        if start - now > self.params.queue {
            return;
        }
        // 28 bytes of IP and UDP header on the wire.
        let bits = (bytes.len() as u64 + 28) * 8;
        self.free_at = start + Duration::from_micros(bits * 1_000_000 / self.params.bits_per_sec);
        if lost {
            return;
        }
        let copies = if self.uniform() < self.params.duplicate {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut jitter = self.params.jitter.mul_f64(self.uniform());
            if !self.params.jitter_sigma.is_zero() {
                // Box-Muller.
                let (u1, u2) = (self.uniform().max(1e-12), self.uniform());
                let n = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                jitter += self.params.jitter_sigma.mul_f64(n.abs());
            }
            self.seq += 1;
            let at = self.free_at + self.params.delay + jitter;
            self.queue.push(Reverse((at, self.seq, bytes.to_vec())));
        }
    }

    pub fn next_arrival(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The next datagram arriving at or before `now`.
    pub fn arrive(&mut self, now: Instant) -> Option<Vec<u8>> {
        loop {
            if self.next_arrival()? > now {
                return None;
            }
            let Reverse((t, _, b)) = self.queue.pop()?;
            if !self.params.is_down(t) {
                return Some(b);
            }
        }
    }
}
