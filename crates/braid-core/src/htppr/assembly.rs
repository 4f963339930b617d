//! The receiver's chunks: assembly from good blocks, the deferred quarter checks, in-order
//! delivery, and the store of completed chunks by id (HTPPR §3.1, §3.2, §4).

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::block::{self, BlockSet, Geometry};
use super::chunk::ChunkId;

/// A chunk being received.
struct ChunkRx {
    id: ChunkId,
    data: Vec<u8>,
    missing: BlockSet,
    /// Quarters that had bad blocks, to check by CRC-16 once they are all in.
    checks: Vec<QuarterCheck>,
}

/// A quarter of a damaged packet whose CRC-16 could not be checked on arrival (§3.2; the
/// paper drops it, see [`super::block`]).
struct QuarterCheck {
    blocks: Vec<u16>,
    crc: u16,
}

/// What storing a packet's good blocks found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// Blocks accepted earlier and now found wrong: missing again.
    pub reopened: Vec<u16>,
    /// The chunk was whole but its content did not match its id.
    pub hash_failed: bool,
}

/// Chunks offered and not yet delivered, and recently completed ones by id.
pub struct Assembly {
    chunks: BTreeMap<u32, ChunkRx>,
    /// Completed chunks not yet deliverable in order.
    completed: BTreeMap<u32, Vec<u8>>,
    next_deliver: u32,
    store: HashMap<ChunkId, Vec<u8>>,
    store_order: VecDeque<ChunkId>,
    store_limit: usize,
}

impl Assembly {
    /// Keeps up to `store_limit` completed chunks by id.
    pub fn new(store_limit: usize) -> Self {
        Assembly {
            chunks: BTreeMap::new(),
            completed: BTreeMap::new(),
            next_deliver: 0,
            store: HashMap::new(),
            store_order: VecDeque::new(),
            store_limit,
        }
    }

    /// Chunks held: being received or completed and not yet delivered.
    pub fn held(&self) -> usize {
        self.chunks.len() + self.completed.len()
    }

    /// The chunk number delivered next.
    pub fn next_deliver(&self) -> u32 {
        self.next_deliver
    }

    /// Whether nothing completed waits for delivery.
    pub fn drained(&self) -> bool {
        self.completed.is_empty()
    }

    /// Chunk `number` is offered: returns true if its content is held already (then it is
    /// complete at once), false if it is now being received.
    pub fn offer(&mut self, number: u32, id: ChunkId, len: usize, geometry: &Geometry) -> bool {
        if let Some(data) = self.store.get(&id).filter(|d| d.len() == len) {
            self.completed.insert(number, data.clone());
            return true;
        }
        self.chunks.insert(
            number,
            ChunkRx {
                id,
                data: vec![0; len],
                missing: BlockSet::full(geometry.blocks_in(len)),
                checks: Vec::new(),
            },
        );
        false
    }

    /// The id of chunk `number`, while it is being received.
    pub fn id(&self, number: u32) -> Option<ChunkId> {
        self.chunks.get(&number).map(|c| c.id)
    }

    /// The length of chunk `number`, while it is being received.
    pub fn len_of(&self, number: u32) -> Option<usize> {
        self.chunks.get(&number).map(|c| c.data.len())
    }

    /// The blocks chunk `number` still lacks, while it is being received.
    pub fn missing(&self, number: u32) -> Option<&BlockSet> {
        self.chunks.get(&number).map(|c| &c.missing)
    }

    /// Checks `blocks` of chunk `number` against `crc` once they are all in.
    pub fn defer_check(&mut self, number: u32, blocks: Vec<u16>, crc: u16) {
        if let Some(c) = self.chunks.get_mut(&number) {
            c.checks.push(QuarterCheck { blocks, crc });
        }
    }

    /// Copies the good blocks of a packet (`blocks`, back to back in `payload`) into chunk
    /// `number`, runs the quarter checks that have become possible, and completes the chunk
    /// if it is whole and matches its id.
    pub fn store(
        &mut self,
        geometry: &Geometry,
        number: u32,
        blocks: &[u16],
        payload: &[u8],
        good: &[bool],
    ) -> Stored {
        let mut out = Stored::default();
        let Some(rx) = self.chunks.get_mut(&number) else {
            return out;
        };
        let size = rx.data.len();
        let mut at = 0;
        for (&b, &ok) in blocks.iter().zip(good) {
            let range = geometry.block_range(size, b as usize);
            let len = range.len();
            if ok {
                if let Some(src) = payload.get(at..at + len) {
                    rx.data[range].copy_from_slice(src);
                    rx.missing.remove(b as usize);
                }
            }
            at += len;
        }
        // Quarters now whole are checked against their CRC-16; blocks of a failing one are
        // missing again, and so is every block of a chunk whose content fails its id.
        rx.checks.retain(|check| {
            if check
                .blocks
                .iter()
                .any(|&b| rx.missing.contains(b as usize))
            {
                return true;
            }
            let mut bytes = Vec::with_capacity(check.blocks.len() * geometry.block_size.bytes());
            for &b in &check.blocks {
                bytes.extend_from_slice(&rx.data[geometry.block_range(size, b as usize)]);
            }
            if block::quarter_crc(&bytes) != check.crc {
                out.reopened.extend_from_slice(&check.blocks);
            }
            false
        });
        if rx.missing.is_empty() && out.reopened.is_empty() && ChunkId::of(&rx.data) != rx.id {
            out.hash_failed = true;
            out.reopened
                .extend((0..geometry.blocks_in(size)).map(|b| b as u16));
        }
        if !out.reopened.is_empty() {
            out.reopened.sort_unstable();
            out.reopened.dedup();
            for &b in &out.reopened {
                rx.missing.insert(b as usize);
            }
            return out;
        }
        if rx.missing.is_empty() {
            if let Some(rx) = self.chunks.remove(&number) {
                self.remember(rx.id, &rx.data);
                self.completed.insert(number, rx.data);
            }
        }
        out
    }

    /// The next chunk in order: its number and bytes.
    pub fn poll_deliver(&mut self) -> Option<(u32, Vec<u8>)> {
        let data = self.completed.remove(&self.next_deliver)?;
        let n = self.next_deliver;
        self.next_deliver += 1;
        Some((n, data))
    }

    /// Keeps a completed chunk by id so that the same content offered again is not resent.
    fn remember(&mut self, id: ChunkId, data: &[u8]) {
        if self.store_limit == 0 || self.store.contains_key(&id) {
            return;
        }
        if self.store_order.len() >= self.store_limit {
            if let Some(old) = self.store_order.pop_front() {
                self.store.remove(&old);
            }
        }
        self.store.insert(id, data.to_vec());
        self.store_order.push_back(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htppr::block::{quarters, BlockSize, FineCrcs};

    fn geometry() -> Geometry {
        Geometry {
            block_size: BlockSize::B32,
            blocks_per_packet: 8,
            chunk_size: 256,
        }
    }

    #[test]
    fn a_quarter_with_a_fooled_crc8_is_reopened_once_repaired() {
        let g = geometry();
        let data: Vec<u8> = (0..=255).collect();
        let mut a = Assembly::new(4);
        assert!(!a.offer(0, ChunkId::of(&data), 256, &g));
        let blocks: Vec<u16> = (0..8).collect();
        let lens = [32; 8];
        let fine = FineCrcs::of(&data, &lens);
        // Block 0 is bad (caught), block 1 wrong but taken as good (a fooled CRC-8): the
        // first quarter (blocks 0-1) cannot be checked yet.
        let mut got = data.clone();
        got[5] ^= 1;
        got[40] ^= 1;
        let good = [false, true, true, true, true, true, true, true];
        for (q, range) in quarters(8).into_iter().enumerate() {
            if range.clone().any(|i| !good[i]) {
                a.defer_check(0, blocks[range].to_vec(), fine.quarters[q]);
            }
        }
        assert_eq!(a.store(&g, 0, &blocks, &got, &good), Stored::default());
        // Block 0 arrives whole: the quarter's CRC-16 now exposes block 1.
        let stored = a.store(&g, 0, &[0], &data[..32], &[true]);
        assert_eq!(stored.reopened, [0, 1]);
        assert_eq!(a.missing(0).map(BlockSet::len), Some(2));
        // Both again, right this time: the chunk completes and is delivered.
        let stored = a.store(&g, 0, &[0, 1], &data[..64], &[true, true]);
        assert_eq!(stored, Stored::default());
        assert_eq!(a.poll_deliver(), Some((0, data)));
    }

    #[test]
    fn a_whole_chunk_that_fails_its_id_is_asked_for_again() {
        let g = geometry();
        let data = vec![7u8; 100];
        let mut a = Assembly::new(4);
        a.offer(0, ChunkId::of(&data), 100, &g);
        let mut wrong = data.clone();
        wrong[99] = 8;
        let stored = a.store(&g, 0, &[0, 1, 2, 3], &wrong, &[true; 4]);
        assert!(stored.hash_failed);
        assert_eq!(stored.reopened, [0, 1, 2, 3]);
        assert_eq!(a.poll_deliver(), None);
    }

    #[test]
    fn held_content_is_complete_on_offer_and_delivered_in_order() {
        let g = geometry();
        let data = vec![1u8; 64];
        let mut a = Assembly::new(4);
        a.offer(0, ChunkId::of(&data), 64, &g);
        a.offer(1, ChunkId::of(b"other"), 5, &g);
        a.store(&g, 0, &[0, 1], &data, &[true, true]);
        assert!(a.offer(2, ChunkId::of(&data), 64, &g));
        assert_eq!(a.poll_deliver(), Some((0, data.clone())));
        // Chunk 2 waits for chunk 1.
        assert_eq!(a.poll_deliver(), None);
        a.store(&g, 1, &[0], b"other", &[true]);
        assert_eq!(a.poll_deliver(), Some((1, b"other".to_vec())));
        assert_eq!(a.poll_deliver(), Some((2, data)));
        assert!(a.drained());
    }
}
