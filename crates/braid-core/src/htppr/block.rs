//! Blocks, the bursts that carry them, and the multi-resolution CRCs (HTPPR §3.1, §3.2).
//!
//! A chunk is cut into fixed-size blocks (32 bytes by default; 64 and 128 selectable, §5.2);
//! a hare packet carries up to 44 of them (1408 bytes, the paper's count after its header).
//! A burst is up to 5 packets of one chunk that carry the chunk's still-missing blocks in
//! increasing order (§3.1). Both ends know which blocks are missing once every packet of the
//! previous burst has been answered, so the burst's layout is not sent: each end computes it
//! with [`plan_burst`], and the burst notice carries a digest of it as a check.
//!
//! The CRCs (§3.2): a CRC-32 per packet goes on the tortoise with the burst notice; only for a
//! packet that fails it does the receiver ask for a CRC-8 per block and a CRC-16 per quarter
//! of the packet. A block is bad if its CRC-8 fails; a quarter whose blocks all pass their
//! CRC-8 but whose CRC-16 fails is bad as a whole. The paper asks for the CRC-16s in a second
//! request; braid sends both resolutions in one answer (8 bytes more per damaged packet
//! against one more tortoise round trip).
//!
//! Beyond the paper: a quarter with a bad block cannot be checked when it arrives, so in the
//! paper a block whose damage its CRC-8 misses (1 in 256 for multi-bit damage, or for a
//! packet read with a wrong sequence number) is accepted whenever another block of its
//! quarter is bad; without more, the 20 MB test's file arrived corrupted. The receiver keeps
//! such a quarter's CRC-16 and checks it once the quarter's blocks have all been repaired,
//! and checks each completed chunk against its id (see [`super::receiver`]).

use std::ops::Range;

use crc::{Crc, CRC_16_IBM_3740, CRC_32_ISCSI, CRC_8_AUTOSAR};

/// Payload bytes in a full hare packet: 44 blocks of 32 bytes (§5.2).
pub const DEFAULT_PAYLOAD_LEN: usize = 1408;

/// Packets in a burst (§4 "parameter selection": 5).
pub const DEFAULT_BURST_PACKETS: usize = 5;

/// The block sizes the paper measures (§5.2, Fig. 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BlockSize {
    /// 32 bytes: the paper's choice (§4).
    #[default]
    B32,
    B64,
    B128,
}

impl BlockSize {
    pub const fn bytes(self) -> usize {
        match self {
            BlockSize::B32 => 32,
            BlockSize::B64 => 64,
            BlockSize::B128 => 128,
        }
    }

    pub fn from_bytes(bytes: usize) -> Option<Self> {
        match bytes {
            32 => Some(BlockSize::B32),
            64 => Some(BlockSize::B64),
            128 => Some(BlockSize::B128),
            _ => None,
        }
    }
}

/// CRC-32C (Castagnoli) over a whole packet payload: the first resolution.
const PACKET_CRC: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);
/// CRC-16 over a quarter of a packet: the middle resolution.
const QUARTER_CRC: Crc<u16> = Crc::<u16>::new(&CRC_16_IBM_3740);
/// CRC-8 (polynomial 0x2F) per block: the finest resolution.
const BLOCK_CRC: Crc<u8> = Crc::<u8>::new(&CRC_8_AUTOSAR);

/// The layout both ends agree on for one transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub block_size: BlockSize,
    /// Blocks in a full packet.
    pub blocks_per_packet: usize,
    /// Bytes in a chunk (the last chunk of a transfer may be shorter).
    pub chunk_size: usize,
}

impl Geometry {
    /// Blocks in a chunk of `len` bytes.
    pub fn blocks_in(&self, len: usize) -> usize {
        len.div_ceil(self.block_size.bytes())
    }

    /// The byte range of `block` in a chunk of `len` bytes (the last block may be short).
    pub fn block_range(&self, len: usize, block: usize) -> Range<usize> {
        let size = self.block_size.bytes();
        let start = (block * size).min(len);
        start..(start + size).min(len)
    }
}

/// A set of block numbers of one chunk (at most `u16::MAX` blocks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSet {
    words: Vec<u64>,
    /// Blocks in the chunk: members are below it.
    n: usize,
    count: usize,
}

impl BlockSet {
    /// The set of all `n` blocks.
    pub fn full(n: usize) -> Self {
        let mut words = vec![u64::MAX; n.div_ceil(64)];
        if !n.is_multiple_of(64) {
            if let Some(last) = words.last_mut() {
                *last = (1u64 << (n % 64)) - 1;
            }
        }
        BlockSet { words, n, count: n }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn contains(&self, block: usize) -> bool {
        self.words
            .get(block / 64)
            .is_some_and(|w| w & (1 << (block % 64)) != 0)
    }

    /// Adds `block` (ignored beyond the set's range); whether it was new.
    pub fn insert(&mut self, block: usize) -> bool {
        if block >= self.n {
            return false;
        }
        match self.words.get_mut(block / 64) {
            Some(w) if *w & (1 << (block % 64)) == 0 => {
                *w |= 1 << (block % 64);
                self.count += 1;
                true
            }
            _ => false,
        }
    }

    /// Removes `block`; whether it was there.
    pub fn remove(&mut self, block: usize) -> bool {
        match self.words.get_mut(block / 64) {
            Some(w) if *w & (1 << (block % 64)) != 0 => {
                *w &= !(1 << (block % 64));
                self.count -= 1;
                true
            }
            _ => false,
        }
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + bit
                })
            })
        })
    }
}

/// The next burst of a chunk whose missing blocks are `missing`: up to `burst_packets`
/// packets of up to `blocks_per_packet` blocks each, in increasing block order (§3.1).
pub fn plan_burst(
    missing: &BlockSet,
    blocks_per_packet: usize,
    burst_packets: usize,
) -> Vec<Vec<u16>> {
    let take = blocks_per_packet.max(1) * burst_packets;
    let blocks: Vec<u16> = missing.iter().take(take).map(|b| b as u16).collect();
    blocks
        .chunks(blocks_per_packet.max(1))
        .map(<[u16]>::to_vec)
        .collect()
}

/// A digest of a burst's layout, carried in the burst notice so that a receiver whose view
/// of the missing blocks differs from the sender's finds out rather than mis-assembling.
pub fn plan_digest(plan: &[Vec<u16>]) -> u32 {
    let mut digest = PACKET_CRC.digest();
    for packet in plan {
        digest.update(&(packet.len() as u16).to_le_bytes());
        for block in packet {
            digest.update(&block.to_le_bytes());
        }
    }
    digest.finalize()
}

/// The first resolution: a CRC-32C over the whole payload.
pub fn packet_crc(payload: &[u8]) -> u32 {
    PACKET_CRC.checksum(payload)
}

/// The middle resolution: a CRC-16 over a quarter's bytes.
pub fn quarter_crc(bytes: &[u8]) -> u16 {
    QUARTER_CRC.checksum(bytes)
}

/// The quarters of a packet of `n` blocks, as block ranges (some empty when `n < 4`).
pub fn quarters(n: usize) -> [Range<usize>; 4] {
    let edge = |q: usize| q * n / 4;
    [
        edge(0)..edge(1),
        edge(1)..edge(2),
        edge(2)..edge(3),
        edge(3)..edge(4),
    ]
}

/// The finer resolutions of one packet: a CRC-8 per block and a CRC-16 per quarter (§3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FineCrcs {
    pub blocks: Vec<u8>,
    pub quarters: [u16; 4],
}

impl FineCrcs {
    /// The CRCs of a payload made of blocks of the given lengths.
    pub fn of(payload: &[u8], block_lens: &[usize]) -> Self {
        let spans = spans(block_lens);
        let blocks = spans
            .iter()
            .map(|r| BLOCK_CRC.checksum(payload.get(r.clone()).unwrap_or(&[])))
            .collect();
        let quarters = quarters(block_lens.len()).map(|q| {
            let bytes = match (spans.get(q.start), q.end.checked_sub(1)) {
                (Some(first), Some(last)) if q.end > q.start => first.start..spans[last].end,
                _ => 0..0,
            };
            QUARTER_CRC.checksum(payload.get(bytes).unwrap_or(&[]))
        });
        FineCrcs { blocks, quarters }
    }
}

/// The byte range of each block in a payload of blocks of these lengths.
fn spans(block_lens: &[usize]) -> Vec<Range<usize>> {
    let mut at = 0;
    block_lens
        .iter()
        .map(|&len| {
            let r = at..at + len;
            at += len;
            r
        })
        .collect()
}

/// Which blocks of a received payload are bad, judged with the sender's fine CRCs (§3.2):
/// a block whose CRC-8 fails; every block of a quarter whose CRC-8s all pass but whose
/// CRC-16 fails; and a block the payload is too short to hold. If every check passes
/// although the packet's CRC-32 failed (all finer checks fooled), every block is bad: the
/// paper does not say what to do then, and resending the packet is the safe answer.
pub fn judge(payload: &[u8], block_lens: &[usize], sent: &FineCrcs) -> Vec<bool> {
    let here = FineCrcs::of(payload, block_lens);
    let spans = spans(block_lens);
    let mut bad: Vec<bool> = (0..block_lens.len())
        .map(|i| {
            spans[i].end > payload.len()
                || sent.blocks.get(i) != here.blocks.get(i).copied().as_ref()
        })
        .collect();
    for (q, range) in quarters(block_lens.len()).into_iter().enumerate() {
        let fine_clean = range.clone().all(|i| !bad[i]);
        if fine_clean && sent.quarters[q] != here.quarters[q] {
            range.for_each(|i| bad[i] = true);
        }
    }
    if !bad.iter().any(|&b| b) {
        bad.iter_mut().for_each(|b| *b = true);
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Judging any received bytes against any CRCs (a damaged payload, a confused
        /// sender) never panics and names every block.
        #[test]
        fn judge_never_panics(
            payload in proptest::collection::vec(any::<u8>(), 0..600),
            lens in proptest::collection::vec(0usize..=128, 0..20),
            blocks in proptest::collection::vec(any::<u8>(), 0..20),
            quarters in any::<[u16; 4]>(),
        ) {
            let bad = judge(&payload, &lens, &FineCrcs { blocks, quarters });
            prop_assert_eq!(bad.len(), lens.len());
        }
    }

    fn payload(n_blocks: usize) -> (Vec<u8>, Vec<usize>) {
        let data = (0..n_blocks * 32).map(|i| (i * 7 + 3) as u8).collect();
        (data, vec![32; n_blocks])
    }

    #[test]
    fn block_set_and_plan() {
        let mut missing = BlockSet::full(100);
        assert_eq!(missing.len(), 100);
        for b in [0, 1, 5, 63, 64, 99] {
            assert!(missing.remove(b));
        }
        assert!(!missing.remove(5));
        assert!(!missing.contains(64) && missing.contains(65));
        assert!(missing.insert(64) && !missing.insert(64) && !missing.insert(100));
        assert!(missing.remove(64));
        let plan = plan_burst(&missing, 44, 5);
        assert_eq!(plan.len(), 3);
        assert_eq!(plan[0][..5], [2, 3, 4, 6, 7]);
        assert_eq!(plan.iter().map(Vec::len).sum::<usize>(), 94);
        assert_eq!(plan[2].len(), 6);
        let mut other = missing.clone();
        assert_eq!(plan_digest(&plan), plan_digest(&plan_burst(&other, 44, 5)));
        other.remove(2);
        assert_ne!(plan_digest(&plan), plan_digest(&plan_burst(&other, 44, 5)));
    }

    #[test]
    fn geometry_last_block_is_short() {
        let g = Geometry {
            block_size: BlockSize::B32,
            blocks_per_packet: 44,
            chunk_size: 32 * 1024,
        };
        assert_eq!(g.blocks_in(32 * 1024), 1024);
        assert_eq!(g.blocks_in(100), 4);
        assert_eq!(g.block_range(100, 3), 96..100);
    }

    #[test]
    fn clean_packet_passes_the_packet_crc() {
        let (data, _) = payload(44);
        let mut damaged = data.clone();
        damaged[700] ^= 0x10;
        assert_ne!(packet_crc(&data), packet_crc(&damaged));
    }

    #[test]
    fn crc8_finds_the_damaged_blocks() {
        let (data, lens) = payload(44);
        let sent = FineCrcs::of(&data, &lens);
        let mut got = data.clone();
        got[5 * 32 + 3] ^= 0x01;
        got[40 * 32] ^= 0x80;
        let bad = judge(&got, &lens, &sent);
        let bad_blocks: Vec<usize> = (0..44).filter(|&i| bad[i]).collect();
        assert_eq!(bad_blocks, [5, 40]);
    }

    #[test]
    fn crc16_catches_what_crc8_misses_and_condemns_the_quarter() {
        let (data, lens) = payload(44);
        let sent = FineCrcs::of(&data, &lens);
        // Find a change to block 12 (quarter 1: blocks 11..22) that its CRC-8 cannot see.
        let block = 12 * 32..13 * 32;
        let original = BLOCK_CRC.checksum(&data[block.clone()]);
        let mut got = data.clone();
        let fooled = (1u16..=u16::MAX).find(|v| {
            got[block.start..block.start + 2].copy_from_slice(&v.to_le_bytes());
            got[block.clone()] != data[block.clone()]
                && BLOCK_CRC.checksum(&got[block.clone()]) == original
        });
        assert!(fooled.is_some());
        let bad = judge(&got, &lens, &sent);
        let bad_blocks: Vec<usize> = (0..44).filter(|&i| bad[i]).collect();
        assert_eq!(bad_blocks, (11..22).collect::<Vec<_>>());
    }

    #[test]
    fn crc8_failure_in_a_quarter_does_not_condemn_the_rest_of_it() {
        let (data, lens) = payload(44);
        let sent = FineCrcs::of(&data, &lens);
        let mut got = data.clone();
        got[0] ^= 0xff;
        let bad = judge(&got, &lens, &sent);
        assert_eq!((0..44).filter(|&i| bad[i]).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn truncated_payload_loses_its_tail_blocks() {
        let (data, lens) = payload(8);
        let sent = FineCrcs::of(&data, &lens);
        let bad = judge(&data[..5 * 32 + 1], &lens, &sent);
        assert_eq!(bad, [false, false, false, false, false, true, true, true]);
    }

    #[test]
    fn all_checks_fooled_resends_everything() {
        let (data, lens) = payload(4);
        let sent = FineCrcs::of(&data, &lens);
        assert_eq!(judge(&data, &lens, &sent), [true; 4]);
    }

    #[test]
    fn short_last_block_and_tiny_packets() {
        let data: Vec<u8> = (0..70).collect();
        let lens = [32, 32, 6];
        let sent = FineCrcs::of(&data, &lens);
        let mut got = data.clone();
        got[66] ^= 4;
        assert_eq!(judge(&got, &lens, &sent), [false, false, true]);
    }
}
