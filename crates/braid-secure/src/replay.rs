//! The anti-replay window of one path: a sliding bitmap over the path's message counters,
//! RFC 6479's ring of 64-bit blocks (the structure WireGuard and boringtun use).
//!
//! Every path of a session has its own counter and its own window (`keypair.rs`), so the
//! window only has to absorb reordering *within* a path. Paths of a bonded session differ in
//! delay by hundreds of milliseconds at up to hundreds of Mbit/s (500 ms at 200 Mbit/s is
//! about 9000 datagrams of 1400 bytes), which would overrun a single session-wide window of
//! WireGuard's size; per path, a datagram is only overtaken by its own path's reordering,
//! which is small. Small, not nil: a cellular path's link-layer retransmissions and a
//! receiver's queues reorder by up to hundreds of ms, which at 150 Mbit/s is more than
//! 2000 datagrams, so the ring is WireGuard's 8192 bits, per path (docs/security.md,
//! "Replay"; `braid bench replay-window` measures both).

/// 64-bit blocks in the ring.
const BLOCKS: usize = 128;
/// Bits in the ring.
const RING_BITS: u64 = BLOCKS as u64 * 64;
/// How far behind the highest counter seen a counter may be and still be accepted: one
/// block less than the ring, so a block is never reused while any of its bits is in range.
pub const WINDOW: u64 = RING_BITS - 64;

/// Why a counter was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayError {
    /// The counter was accepted before.
    Replayed,
    /// The counter is [`WINDOW`] or more behind the highest accepted.
    TooOld,
}

/// Which counters of one path were accepted.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    /// One more than the highest accepted counter; 0 before the first.
    next: u64,
    ring: [u64; BLOCKS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            next: 0,
            ring: [0; BLOCKS],
        }
    }
}

impl ReplayWindow {
    /// Whether `counter` would be accepted. Does not change the window: the caller commits
    /// only after the datagram authenticated, so forgeries cannot move it.
    pub fn check(&self, counter: u64) -> Result<(), ReplayError> {
        if counter >= self.next {
            return Ok(());
        }
        if self.next - 1 - counter >= WINDOW {
            return Err(ReplayError::TooOld);
        }
        let (block, bit) = Self::position(counter);
        if self.ring[block] & (1 << bit) != 0 {
            Err(ReplayError::Replayed)
        } else {
            Ok(())
        }
    }

    /// Records `counter` as accepted (after [`ReplayWindow::check`] said it may be).
    pub fn commit(&mut self, counter: u64) {
        if counter >= self.next {
            let new_top = counter / 64;
            // Blocks above the old top block start empty; with nothing accepted yet the ring
            // is already empty.
            if self.next > 0 {
                let old_top = (self.next - 1) / 64;
                let fresh = (new_top - old_top).min(BLOCKS as u64);
                for b in 1..=fresh {
                    self.ring[((old_top + b) % BLOCKS as u64) as usize] = 0;
                }
            }
            self.next = counter.saturating_add(1);
        }
        let (block, bit) = Self::position(counter);
        self.ring[block] |= 1 << bit;
    }

    /// The highest counter accepted, if any.
    pub fn highest(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }

    fn position(counter: u64) -> (usize, u64) {
        (((counter / 64) % BLOCKS as u64) as usize, counter % 64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The reference model: every accepted counter in a set.
    #[derive(Default)]
    struct Model {
        seen: BTreeSet<u64>,
    }

    impl Model {
        fn accept(&mut self, c: u64) -> Result<(), ReplayError> {
            if let Some(&top) = self.seen.last() {
                if c < top && top - c >= WINDOW {
                    return Err(ReplayError::TooOld);
                }
            }
            if !self.seen.insert(c) {
                return Err(ReplayError::Replayed);
            }
            Ok(())
        }
    }

    fn accept(w: &mut ReplayWindow, c: u64) -> Result<(), ReplayError> {
        w.check(c)?;
        w.commit(c);
        Ok(())
    }

    #[test]
    fn in_order_duplicates_and_the_edge_of_the_window() {
        let mut w = ReplayWindow::default();
        assert_eq!(w.highest(), None);
        let top = WINDOW + 1000;
        for c in 0..=top {
            assert_eq!(accept(&mut w, c), Ok(()));
            assert_eq!(accept(&mut w, c), Err(ReplayError::Replayed));
        }
        assert_eq!(w.highest(), Some(top));
        assert_eq!(w.check(top - (WINDOW - 1)), Err(ReplayError::Replayed));
        assert_eq!(w.check(top - WINDOW), Err(ReplayError::TooOld));
    }

    #[test]
    fn late_counters_within_the_window_are_accepted_once() {
        let mut w = ReplayWindow::default();
        // Every fourth counter arrives late, up to WINDOW - 1 behind.
        let top = 10_001;
        for c in (0..=top).filter(|c| c % 4 != 0) {
            accept(&mut w, c).unwrap();
        }
        for c in (0..=top).filter(|c| c % 4 == 0) {
            let want = if top - c >= WINDOW {
                Err(ReplayError::TooOld)
            } else {
                Ok(())
            };
            assert_eq!(accept(&mut w, c), want, "counter {c}");
        }
    }

    #[test]
    fn a_jump_beyond_the_ring_clears_it() {
        let mut w = ReplayWindow::default();
        for c in 0..100 {
            accept(&mut w, c).unwrap();
        }
        accept(&mut w, 1_000_000).unwrap();
        // The ring's blocks were reused: counters near the new top are fresh.
        for c in 1_000_000 - WINDOW + 1..1_000_000 {
            assert_eq!(w.check(c), Ok(()), "counter {c}");
        }
        assert_eq!(w.check(99), Err(ReplayError::TooOld));
    }

    #[test]
    fn the_largest_counters_do_not_overflow() {
        let mut w = ReplayWindow::default();
        accept(&mut w, u64::MAX - 1).unwrap();
        assert_eq!(accept(&mut w, u64::MAX - 1), Err(ReplayError::Replayed));
        accept(&mut w, u64::MAX - 2).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(11), ..ProptestConfig::default() })]
        /// The ring agrees with the set on every counter of a random walk that moves
        /// forward, jumps, and falls back by up to twice the window.
        #[test]
        fn agrees_with_the_reference_model(steps in proptest::collection::vec((0u8..4, 0u64..2 * WINDOW), 1..600)) {
            let mut w = ReplayWindow::default();
            let mut m = Model::default();
            let mut cursor = 0u64;
            for (kind, amount) in steps {
                let c = match kind {
                    0 => { cursor += 1; cursor }
                    1 => { cursor += amount; cursor }
                    2 => cursor.saturating_sub(amount),
                    _ => cursor.saturating_sub(amount % 70),
                };
                prop_assert_eq!(accept(&mut w, c), m.accept(c), "counter {}", c);
            }
        }
    }
}
