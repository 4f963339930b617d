//! Chunks and their 20-byte ids (HTPPR §3.1 "chunk-based recovery", §3.1.1 fuzzy matching).
//!
//! Data moves in chunks of 32 KB. A chunk's id is its content's hash, so the ids are
//! content addresses (§4, Ditto-like redundancy elimination): a receiver that already holds
//! a chunk with that id need not receive it again. The paper does not name the hash; a
//! 20-byte id suggests SHA-1, which is broken for collisions, so braid takes the first 160
//! bits of SHA-256.

use sha2::{Digest, Sha256};

/// Bytes in a chunk id (§3.1: "each chunk has a unique 20-byte identifier").
pub const CHUNK_ID_LEN: usize = 20;

/// Default chunk size: 32 KB (§3.1, §4 "parameter selection").
pub const DEFAULT_CHUNK_SIZE: usize = 32 * 1024;

/// How many of the id's 160 bits may be wrong in a hare packet's header and still match
/// (§3.1.1: "only 120 of the 160 bits must be correctly received").
pub const FUZZY_MAX_WRONG_BITS: u32 = 40;

/// A chunk's content address: the first 160 bits of the SHA-256 of its bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId(pub [u8; CHUNK_ID_LEN]);

impl ChunkId {
    /// The id of a chunk holding `data`.
    pub fn of(data: &[u8]) -> Self {
        let digest = Sha256::digest(data);
        let mut id = [0u8; CHUNK_ID_LEN];
        id.copy_from_slice(&digest[..CHUNK_ID_LEN]);
        ChunkId(id)
    }

    /// Bits in which `self` and `other` differ.
    pub fn distance(&self, other: &ChunkId) -> u32 {
        self.0
            .iter()
            .zip(other.0.iter())
            .map(|(a, b)| (a ^ b).count_ones())
            .sum()
    }

    /// Whether `received` (read off a possibly corrupted hare header) is close enough to be
    /// this id: at most [`FUZZY_MAX_WRONG_BITS`] bits differ (§3.1.1). Two distinct SHA-256
    /// prefixes differ in 80 bits on average, so a false match needs 40 bits to go one way;
    /// the packet CRCs catch one that happens anyway.
    pub fn fuzzy_matches(&self, received: &ChunkId) -> bool {
        self.distance(received) <= FUZZY_MAX_WRONG_BITS
    }
}

impl std::fmt::Debug for ChunkId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.0[..6] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flip(id: &ChunkId, bits: impl IntoIterator<Item = usize>) -> ChunkId {
        let mut out = *id;
        for bit in bits {
            out.0[bit / 8] ^= 1 << (bit % 8);
        }
        out
    }

    #[test]
    fn id_is_a_content_address() {
        assert_eq!(ChunkId::of(b"hare"), ChunkId::of(b"hare"));
        assert_ne!(ChunkId::of(b"hare"), ChunkId::of(b"tortoise"));
    }

    #[test]
    fn fuzzy_match_accepts_up_to_40_wrong_bits() {
        let id = ChunkId::of(b"chunk 0");
        assert!(id.fuzzy_matches(&id));
        // Spread over the id and bunched in a few bytes: only the count matters.
        let spread = flip(&id, (0..40).map(|i| i * 4));
        assert_eq!(id.distance(&spread), 40);
        assert!(id.fuzzy_matches(&spread));
        let bunched = flip(&id, 0..40);
        assert!(id.fuzzy_matches(&bunched));
        let too_many = flip(&id, 0..41);
        assert_eq!(id.distance(&too_many), 41);
        assert!(!id.fuzzy_matches(&too_many));
    }

    #[test]
    fn fuzzy_match_rejects_other_chunks() {
        // Distinct ids sit ~80 bits apart: none of 2000 neighbours matches chunk 0.
        let id = ChunkId::of(&0u32.to_le_bytes());
        let closest = (1u32..2000)
            .map(|i| id.distance(&ChunkId::of(&i.to_le_bytes())))
            .min()
            .unwrap();
        assert!(
            closest > FUZZY_MAX_WRONG_BITS,
            "closest other id {closest} bits away"
        );
    }
}
