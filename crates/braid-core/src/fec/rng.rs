//! The engine's pseudo-random generator for coding choices (which packets a coded packet
//! combines, LT degrees): xoshiro256++ seeded through SplitMix64 from `Config::seed`, so a
//! session's choices are a pure function of its seed and inputs.

/// A small, fast, seedable generator. Not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut st = seed;
        Rng {
            s: [
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
                splitmix64(&mut st),
            ],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = (self.s[0].wrapping_add(self.s[3]))
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for the window
    /// sizes used here). `n` must be non-zero.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut hits = [0u32; 5];
        for _ in 0..10_000 {
            let x = a.below(5);
            assert_eq!(x, b.below(5));
            hits[x] += 1;
        }
        assert!(hits.iter().all(|&h| (1800..2200).contains(&h)), "{hits:?}");
        assert_ne!(Rng::new(8).next_u64(), Rng::new(7).next_u64());
        assert!((0..1000).map(|_| a.f64()).all(|x| (0.0..1.0).contains(&x)));
    }
}
