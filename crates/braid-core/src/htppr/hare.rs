//! The hare packet (HTPPR §3.1, Fig. 2): a chunk id, the coded sequence number, and blocks.
//!
//! ```text
//! 0        20        24                       24 + n·block
//! | chunk id | seq ×2 | block | block | …    |
//! ```
//!
//! Nothing else: which blocks the payload holds follows from the sequence number and the
//! burst notice on the tortoise, and every byte here may arrive damaged. The header is read
//! fuzzily (the id) and through a code (the sequence number), never trusted.

use super::chunk::{ChunkId, CHUNK_ID_LEN};
use super::seqcode;

/// Header bytes before the blocks: the paper's 44 blocks of 32 bytes fill 1408 of them.
pub const HEADER_LEN: usize = CHUNK_ID_LEN + seqcode::CODED_LEN;

/// A hare packet too short to hold a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("hare packet of {0} bytes is shorter than its {HEADER_LEN}-byte header")]
pub struct Truncated(pub usize);

/// A view of a received hare packet; the fields are as received, possibly damaged.
#[derive(Clone, Copy, Debug)]
pub struct HarePacket<'a> {
    bytes: &'a [u8],
}

impl<'a> HarePacket<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Truncated> {
        if bytes.len() < HEADER_LEN {
            return Err(Truncated(bytes.len()));
        }
        Ok(HarePacket { bytes })
    }

    /// The chunk id as received.
    pub fn chunk_id(&self) -> ChunkId {
        let mut id = [0u8; CHUNK_ID_LEN];
        id.copy_from_slice(&self.bytes[..CHUNK_ID_LEN]);
        ChunkId(id)
    }

    /// The values the sequence number may have had (see [`seqcode::candidates`]).
    pub fn seq_candidates(&self) -> Vec<u16> {
        let mut coded = [0u8; seqcode::CODED_LEN];
        coded.copy_from_slice(&self.bytes[CHUNK_ID_LEN..HEADER_LEN]);
        seqcode::candidates(coded)
    }

    /// The blocks, back to back.
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[HEADER_LEN..]
    }
}

/// Writes a hare packet's header into `out` (cleared first); the blocks follow it.
pub fn emit_header(out: &mut Vec<u8>, chunk: &ChunkId, seq: u16) {
    out.clear();
    out.extend_from_slice(&chunk.0);
    out.extend_from_slice(&seqcode::encode(seq));
}

/// Writes a hare packet into `out` (cleared first).
pub fn emit(out: &mut Vec<u8>, chunk: &ChunkId, seq: u16, payload: &[u8]) {
    emit_header(out, chunk, seq);
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let id = ChunkId::of(b"x");
        let mut out = Vec::new();
        emit(&mut out, &id, 300, &[9; 64]);
        assert_eq!(out.len(), HEADER_LEN + 64);
        let p = HarePacket::parse(&out).unwrap();
        assert_eq!(p.chunk_id(), id);
        assert_eq!(p.seq_candidates(), [300]);
        assert_eq!(p.payload(), &[9; 64]);
        assert_eq!(HarePacket::parse(&out[..23]).unwrap_err(), Truncated(23));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = HarePacket::parse(&bytes) {
                let _ = (p.chunk_id(), p.seq_candidates(), p.payload());
            }
        }
    }
}
