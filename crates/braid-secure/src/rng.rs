//! Randomness: one ChaCha20 stream per endpoint, seeded by the caller. The daemon seeds it
//! from the operating system ([`Seed::from_os`]); tests seed it with a constant, so a test's
//! handshakes are the same bytes on every run. Noise's ephemeral keys come from the same
//! stream, through a `snow` resolver that hands it a child generator per handshake.

use std::time::Duration;

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{BoxedCryptoResolver, CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use zeroize::Zeroize;

/// The 32 bytes an endpoint's random stream starts from.
#[derive(Clone)]
pub struct Seed([u8; 32]);

impl Seed {
    /// A seed from the operating system's random source: what the daemon uses.
    pub fn from_os() -> Result<Seed, getrandom::Error> {
        let mut s = [0u8; 32];
        getrandom::fill(&mut s)?;
        Ok(Seed(s))
    }

    /// A fixed seed, for tests and simulations only: keys and ephemerals derived from it are
    /// predictable.
    pub fn from_u64(n: u64) -> Seed {
        let mut s = [0u8; 32];
        ChaCha20Rng::seed_from_u64(n).fill_bytes(&mut s);
        Seed(s)
    }
}

impl Drop for Seed {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(..)")
    }
}

/// An endpoint's random stream.
pub(crate) struct Rng(ChaCha20Rng);

impl Rng {
    pub fn new(seed: &Seed) -> Rng {
        Rng(ChaCha20Rng::from_seed(seed.0))
    }

    pub fn u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    /// A random non-zero u32 (sender indices; zero means "none" on the wire).
    pub fn nonzero_u32(&mut self) -> u32 {
        loop {
            let v = self.0.next_u32();
            if v != 0 {
                return v;
            }
        }
    }

    pub fn fill(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest);
    }

    /// A uniform duration in `[0, max]` at microsecond resolution.
    pub fn jitter(&mut self, max: Duration) -> Duration {
        let us = max.as_micros() as u64;
        Duration::from_micros(self.0.next_u64() % (us + 1))
    }

    /// A `snow` resolver whose generator is a child of this stream.
    pub fn resolver(&mut self) -> BoxedCryptoResolver {
        let mut seed = [0u8; 32];
        self.0.fill_bytes(&mut seed);
        let resolver = SeededResolver {
            rng: ChaCha20Rng::from_seed(seed),
        };
        seed.zeroize();
        Box::new(resolver)
    }
}

/// `snow`'s default primitives with our generator.
struct SeededResolver {
    rng: ChaCha20Rng,
}

struct SeededRandom(ChaCha20Rng);

impl Random for SeededRandom {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRandom(self.rng.clone())))
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }

    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}
