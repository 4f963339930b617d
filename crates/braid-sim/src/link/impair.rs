//! Impairments applied after a packet's transmission: random loss (Bernoulli or
//! Gilbert-Elliott), blackouts, and bit corruption. Each owns its own generator, so turning
//! one on does not change the draws of another.

use crate::Rng;

use super::config::{BlackoutConfig, GilbertElliott, LossParams, RandomBlackoutConfig};

/// Random loss on the air.
#[derive(Clone, Debug)]
pub(crate) struct LossModel {
    params: Option<LossParams>,
    /// Gilbert-Elliott state; the channel starts Good.
    bad: bool,
    rng: Rng,
}

impl LossModel {
    pub(crate) fn new(params: Option<LossParams>, rng: Rng) -> LossModel {
        LossModel {
            params,
            bad: false,
            rng,
        }
    }

    /// Whether the next transmitted packet is lost. Gilbert-Elliott: the loss is drawn with
    /// the current state's probability, then the state makes its transition.
    pub(crate) fn lose(&mut self) -> bool {
        match self.params {
            None => false,
            Some(LossParams::Bernoulli(p)) => self.rng.chance(p),
            Some(LossParams::GilbertElliott(GilbertElliott {
                p_good_bad,
                p_bad_good,
                loss_good,
                loss_bad,
            })) => {
                let lost = self.rng.chance(if self.bad { loss_bad } else { loss_good });
                let flip = self
                    .rng
                    .chance(if self.bad { p_bad_good } else { p_good_bad });
                self.bad ^= flip;
                lost
            }
        }
    }
}

/// Scheduled and random outages, queried with non-decreasing times.
#[derive(Clone, Debug)]
pub(crate) struct Blackouts {
    /// Half-open windows [start, end) in microseconds, sorted by start.
    fixed: Vec<(u64, u64)>,
    /// Windows before this index end at or before the last query.
    next_fixed: usize,
    random: Option<RandomBlackouts>,
}

/// An endless sequence of outages drawn in order from its own generator, so the sequence does
/// not depend on when it is queried.
#[derive(Clone, Debug)]
struct RandomBlackouts {
    mean_interval_s: f64,
    mean_duration_s: f64,
    start_us: u64,
    end_us: u64,
    rng: Rng,
}

fn secs_to_us(s: f64) -> u64 {
    (s * 1e6).round() as u64
}

impl RandomBlackouts {
    fn new(cfg: &RandomBlackoutConfig, rng: Rng) -> RandomBlackouts {
        let mut r = RandomBlackouts {
            mean_interval_s: cfg.mean_interval_s,
            mean_duration_s: cfg.mean_duration_s,
            start_us: 0,
            end_us: 0,
            rng,
        };
        r.draw_next();
        r
    }

    /// The outage after the current one: an exponential gap after its end, then an
    /// exponential duration.
    fn draw_next(&mut self) {
        // At least 1 µs apart, so that the sequence always moves forward.
        let gap = secs_to_us(self.rng.exp(self.mean_interval_s)).max(1);
        let duration = secs_to_us(self.rng.exp(self.mean_duration_s));
        self.start_us = self.end_us.saturating_add(gap);
        self.end_us = self.start_us.saturating_add(duration);
    }

    fn contains(&mut self, t_us: u64) -> bool {
        while t_us >= self.end_us && self.end_us < u64::MAX {
            self.draw_next();
        }
        t_us >= self.start_us && t_us < self.end_us
    }
}

impl Blackouts {
    pub(crate) fn new(
        fixed: &[BlackoutConfig],
        random: Option<&RandomBlackoutConfig>,
        rng: Rng,
    ) -> Blackouts {
        let mut fixed: Vec<(u64, u64)> = fixed
            .iter()
            .map(|b| {
                let start = secs_to_us(b.start_s);
                (start, start.saturating_add(secs_to_us(b.duration_s)))
            })
            .collect();
        fixed.sort_unstable();
        Blackouts {
            fixed,
            next_fixed: 0,
            random: random.map(|cfg| RandomBlackouts::new(cfg, rng)),
        }
    }

    /// Whether the link is out at `t_us`. Calls must not go back in time. O(1) amortised.
    pub(crate) fn contains(&mut self, t_us: u64) -> bool {
        // Windows are sorted by start; skip those over. The first window still open is the
        // only fixed one that can contain `t_us`: later ones start no earlier than it.
        while let Some(&(_, end)) = self.fixed.get(self.next_fixed) {
            if end > t_us {
                break;
            }
            self.next_fixed += 1;
        }
        let in_fixed = self
            .fixed
            .get(self.next_fixed)
            .is_some_and(|&(start, _)| start <= t_us);
        // Query the random sequence regardless, so it advances the same way either way.
        let in_random = self.random.as_mut().is_some_and(|r| r.contains(t_us));
        in_fixed || in_random
    }
}

/// Independent bit errors at a fixed rate. Instead of a draw per bit, it draws the gap to the
/// next flipped bit from the geometric distribution, P(gap >= k) = (1 - ber)^k, and carries
/// the gap from packet to packet, so the cost is one draw per flipped bit.
#[derive(Clone, Debug)]
pub(crate) struct Corrupter {
    /// ln(1 - ber), negative.
    ln_keep: f64,
    /// Error-free bits before the next flip.
    gap: u64,
    rng: Rng,
}

impl Corrupter {
    /// `None` when `ber` is 0.
    pub(crate) fn new(ber: f64, rng: Rng) -> Option<Corrupter> {
        if ber <= 0.0 {
            return None;
        }
        let mut c = Corrupter {
            ln_keep: (-ber).ln_1p(),
            gap: 0,
            rng,
        };
        c.gap = c.draw_gap();
        Some(c)
    }

    fn draw_gap(&mut self) -> u64 {
        // u in (0, 1]; ln(u) / ln(1 - ber) is >= 0 (and 0 when ber = 1).
        let u = 1.0 - self.rng.f64();
        (u.ln() / self.ln_keep) as u64
    }

    /// Flips bits of `packet` in place; returns how many.
    pub(crate) fn apply(&mut self, packet: &mut [u8]) -> u64 {
        let bits = packet.len() as u64 * 8;
        let mut pos = 0u64;
        let mut flips = 0;
        loop {
            let remaining = bits - pos;
            if self.gap >= remaining {
                self.gap -= remaining;
                return flips;
            }
            pos += self.gap;
            // pos < bits, so the byte index is in range.
            if let Some(byte) = packet.get_mut((pos / 8) as usize) {
                *byte ^= 0x80 >> (pos % 8);
            }
            pos += 1;
            flips += 1;
            self.gap = self.draw_gap();
        }
    }
}
