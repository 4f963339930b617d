//! Evolution's sampled estimate of what the receiver holds, braid's deviation from PluriBus
//! §4.1 (selected with `estimate = "sampled"`).
//!
//! §4.1 keeps one number, `r`, the fraction of W present at the receiver, and assumes every
//! packet of W present with that same probability, independently ("For tractability ...
//! In practice, the probabilities of different packets may differ based on the contents of
//! earlier packets"). Under that assumption the best coded packet XORs `-1/ln r` random
//! packets, and every coded packet sent raises `r` by its expected yield. The assumption
//! fails exactly where coding matters: after a few coded packets the packets they covered
//! are likelier present than the others, and the states with two or more missing packets
//! among a coded packet's members (which it cannot repair) keep their probability while
//! `r` climbs towards 1 regardless; the degree then grows to `|W| - 1` and the coded
//! packets, at high loss, can repair nothing (§6.4.2 reports the effect: "coded packets
//! that are sometimes too complex to be decidable").
//!
//! The sampled estimate keeps the paper's aim, each coded packet greedily maximises its
//! expected yield given the sender's estimate of what the receiver holds, but estimates
//! that without the independence assumption: it simulates [`SAMPLES`] possible receivers.
//! Each data packet sent is missing in each sample with the path's loss estimate `p` (plus
//! the configured offset, as `r`'s updates use it); each coded packet sent reaches each
//! sample with probability `1 - p` and, where exactly one of its members is missing there,
//! repairs it (the immediate decoder of §4.1). A sample is a bit, so an entry of W carries a
//! 64-bit mask of the samples missing it. The next coded packet's members are chosen
//! greedily: start with none, repeatedly add the entry of W that most increases the number
//! of samples in which exactly one member is missing (ties to the oldest, whose loss TCP
//! feels first), and stop when no entry increases it (or at `|W| - 1`, §4.1's cap). Both
//! the number of members and which ones follow from the estimate: at high loss the samples
//! are missing several packets, and the choice is a single packet no earlier coded packet
//! covered; at low loss, many packets with one likely missing.
//!
//! When no sample misses anything the estimate sees no yield anywhere; the coded packet
//! is then chosen as §4.1 does (random members, `max(1, ⌊-1/ln r⌋)` of them).

use super::rng::Rng;
use super::window::Window;

/// Possible receivers simulated: one bit each of a `u64`.
pub const SAMPLES: u32 = 64;

/// A mask with each of the [`SAMPLES`] bits set with probability `p`.
pub fn loss_mask(p: f64, rng: &mut Rng) -> u64 {
    if p.is_nan() || p <= 0.0 {
        return 0;
    }
    if p >= 1.0 {
        return u64::MAX;
    }
    // Two 32-bit uniforms per random word, each against p scaled to 2^32.
    let t = (p * 4_294_967_296.0) as u64;
    let mut m = 0u64;
    for pair in 0..SAMPLES / 2 {
        let w = rng.next_u64();
        let bits = u64::from((w & 0xffff_ffff) < t) | u64::from((w >> 32) < t) << 1;
        m |= bits << (2 * pair);
    }
    m
}

/// Chooses the members of the next coded packet from W by the samples, greedily (module
/// docs); writes their indices (oldest first) to `picks` and returns the number of samples
/// in which the packet would repair one (0: no sample misses anything; `picks` empty).
/// `cand` is scratch space.
pub fn choose(window: &Window, cand: &mut Vec<u16>, picks: &mut Vec<u16>) -> u32 {
    picks.clear();
    cand.clear();
    let n = window.len();
    cand.extend((0..n).filter(|&i| window.missing(i) != 0).map(|i| i as u16));
    let cap = if n > 1 { n - 1 } else { 1 };
    // Samples with no member missing, and with exactly one.
    let (mut zero, mut one) = (u64::MAX, 0u64);
    while picks.len() < cap {
        let mut best = None;
        let mut best_count = one.count_ones();
        for (k, &i) in cand.iter().enumerate() {
            let b = window.missing(usize::from(i));
            let c = ((one & !b) | (zero & b)).count_ones();
            if c > best_count {
                best = Some(k);
                best_count = c;
            }
        }
        let Some(k) = best else { break };
        // `cand` stays in index order, so ties keep going to the oldest.
        let i = cand.remove(k);
        let b = window.missing(usize::from(i));
        one = (one & !b) | (zero & b);
        zero &= !b;
        picks.push(i);
    }
    picks.sort_unstable();
    one.count_ones()
}

/// A coded packet of the entries `picks` was sent on a path with loss `p`: in each sample
/// it reaches (probability `1 - p`) with exactly one member missing, that member is
/// repaired.
pub fn on_coded_sent(window: &mut Window, picks: &[u16], p: f64, rng: &mut Rng) {
    let (mut zero, mut one) = (u64::MAX, 0u64);
    for &i in picks {
        let b = window.missing(usize::from(i));
        one = (one & !b) | (zero & b);
        zero &= !b;
    }
    let repaired = one & !loss_mask(p, rng);
    if repaired == 0 {
        return;
    }
    for &i in picks {
        let i = usize::from(i);
        window.set_missing(i, window.missing(i) & !repaired);
    }
}

/// The estimated fraction of W present at the receiver (the sampled counterpart of `r`).
pub fn present_fraction(window: &Window) -> f64 {
    let n = window.len();
    if n == 0 {
        return 1.0;
    }
    let missing: u64 = (0..n)
        .map(|i| u64::from(window.missing(i).count_ones()))
        .sum();
    1.0 - missing as f64 / (n as f64 * f64::from(SAMPLES))
}

#[cfg(test)]
mod tests;
