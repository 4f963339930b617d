//! Fixed-overhead Reed-Solomon, the conventional erasure code PluriBus §3.2 and §6.4.1
//! compare against: "fixed overhead codes such as Reed-Solomon for which the fraction of
//! coded to pure packets is fixed, independent of prevailing workload and available
//! capacity". The sender groups consecutive data packets into blocks of `block` packets and
//! sends `⌈n K / 100⌉` recovery shards (docs/wire.md, "Parity") right behind a block's last
//! packet, on its path; a block still short when no data was sent for `flush_ms` is coded as
//! it is, so a burst's tail is protected too. The code is the `reed-solomon-simd` crate's
//! systematic code over GF(2^16); a data packet enters it as its length (u16) and bytes,
//! zero-padded to the block's shard length. The receiver rebuilds a block's missing packets
//! once it holds any `n` of its `n + m` shards.

use std::collections::VecDeque;
use std::time::Duration;

use braid_wire::{Message, Parity};
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

use super::decoder::PacketCache;
use super::{LossRecovery, RecoveredSink, Repair, RepairBody};
use crate::path::Path;
use crate::stats::LossRecoveryStats;
use crate::{Instant, PathId, ReedSolomonParams};

/// Blocks the receiver keeps shards for at most.
const MAX_BLOCKS: usize = 16;

/// The shard length for packets of at most `max_len` bytes: length prefix, bytes, rounded
/// up to even (the code's symbols are 16 bits).
pub fn shard_len(max_len: usize) -> usize {
    (2 + max_len).next_multiple_of(2)
}

/// Writes `packet` as an original shard of `len` bytes into `out`. False if it does not fit.
pub fn original_shard(packet: &[u8], len: usize, out: &mut Vec<u8>) -> bool {
    let Ok(n) = u16::try_from(packet.len()) else {
        return false;
    };
    if 2 + packet.len() > len {
        return false;
    }
    out.clear();
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(packet);
    out.resize(len, 0);
    true
}

/// The packet an original shard holds, if its length prefix fits.
pub fn packet_of_shard(shard: &[u8]) -> Option<&[u8]> {
    let n = usize::from(u16::from_be_bytes([*shard.first()?, *shard.get(1)?]));
    shard.get(2..2 + n)
}

#[derive(Clone, Debug, Default)]
struct RxBlock {
    first: u32,
    data_count: u8,
    parity_count: u8,
    shard_len: usize,
    /// (index, shard) of the recovery shards received.
    shards: Vec<(u8, Vec<u8>)>,
}

/// Reed-Solomon with a fixed overhead.
pub struct ReedSolomon {
    pct: u32,
    block: usize,
    flush: Duration,
    // Sender: the block being filled.
    first: u32,
    packets: Vec<Vec<u8>>,
    count: usize,
    path: PathId,
    last_data: Instant,
    encoder: Option<ReedSolomonEncoder>,
    // Sender: recovery shards ready to go.
    parity: Vec<Vec<u8>>,
    parity_block: (u32, u8, u8),
    parity_path: PathId,
    parity_next: usize,
    // Receiver.
    cache: PacketCache,
    blocks: VecDeque<RxBlock>,
    decoder: Option<ReedSolomonDecoder>,
    scratch: Vec<u8>,
    stats: LossRecoveryStats,
}

impl ReedSolomon {
    pub fn new(p: ReedSolomonParams) -> ReedSolomon {
        let block = p.block.clamp(1, 255) as usize;
        ReedSolomon {
            pct: p.redundancy_pct.clamp(1, 100),
            block,
            flush: Duration::from_secs_f64(p.flush_ms.max(0.0) / 1e3),
            first: 0,
            packets: vec![Vec::new(); block],
            count: 0,
            path: 0,
            last_data: Instant::ZERO,
            encoder: None,
            parity: Vec::new(),
            parity_block: (0, 0, 0),
            parity_path: 0,
            parity_next: 0,
            cache: PacketCache::default(),
            blocks: VecDeque::new(),
            decoder: None,
            scratch: Vec::new(),
            stats: LossRecoveryStats::default(),
        }
    }

    /// Codes the block being filled: its recovery shards become ready to send.
    fn encode(&mut self) {
        let n = std::mem::take(&mut self.count);
        if n == 0 {
            return;
        }
        let m = (n * self.pct as usize).div_ceil(100).clamp(1, 255);
        let len = shard_len(self.packets[..n].iter().map(Vec::len).max().unwrap_or(0));
        let enc = match self.encoder.take() {
            Some(mut e) => e.reset(n, m, len).map(|()| e),
            None => ReedSolomonEncoder::new(n, m, len),
        };
        let Ok(mut enc) = enc else { return };
        for p in &self.packets[..n] {
            if !original_shard(p, len, &mut self.scratch)
                || enc.add_original_shard(&self.scratch).is_err()
            {
                self.encoder = Some(enc);
                return;
            }
        }
        if let Ok(result) = enc.encode() {
            self.parity.resize_with(m, Vec::new);
            for (i, shard) in result.recovery_iter().enumerate().take(m) {
                self.parity[i].clear();
                self.parity[i].extend_from_slice(shard);
            }
            // n and m are at most 255.
            self.parity_block = (self.first, n as u8, m as u8);
            self.parity_path = self.path;
            self.parity_next = 0;
        }
        self.encoder = Some(enc);
    }

    fn flush_due(&self) -> Option<Instant> {
        (self.count > 0).then(|| self.last_data + self.flush)
    }

    /// Rebuilds block `i`'s missing packets if enough shards are in.
    fn try_decode(&mut self, i: usize, sink: &mut dyn RecoveredSink) {
        let Some(b) = self.blocks.get(i) else { return };
        let k = usize::from(b.data_count);
        let members = (0..b.data_count).map(|j| b.first.wrapping_add(u32::from(j)));
        let present = members.clone().filter(|&s| self.cache.contains(s)).count();
        if present == k {
            self.blocks.remove(i);
            return;
        }
        if present + b.shards.len() < k {
            return;
        }
        let (m, len) = (usize::from(b.parity_count), b.shard_len);
        let dec = match self.decoder.take() {
            Some(mut d) => d.reset(k, m, len).map(|()| d),
            None => ReedSolomonDecoder::new(k, m, len),
        };
        let Ok(mut dec) = dec else {
            self.blocks.remove(i);
            self.stats.coded_malformed += 1;
            return;
        };
        let mut ok = true;
        for (j, s) in members.enumerate() {
            if let Some(p) = self.cache.get(s) {
                ok &= original_shard(p, len, &mut self.scratch)
                    && dec.add_original_shard(j, &self.scratch).is_ok();
            }
        }
        for (j, shard) in &b.shards {
            ok &= dec.add_recovery_shard(usize::from(*j), shard).is_ok();
        }
        let first = b.first;
        self.blocks.remove(i);
        match dec.decode() {
            Ok(result) if ok => {
                for (j, shard) in result.restored_original_iter() {
                    let seq = first.wrapping_add(j as u32);
                    match packet_of_shard(shard) {
                        Some(p) if !self.cache.contains(seq) => {
                            self.cache.insert(seq, p);
                            self.stats.recovered += 1;
                            sink.recovered(seq, p);
                        }
                        Some(_) => {}
                        None => self.stats.coded_malformed += 1,
                    }
                }
            }
            _ => self.stats.coded_malformed += 1,
        }
        self.decoder = Some(dec);
    }

    fn on_parity(&mut self, p: &Parity<'_>, sink: &mut dyn RecoveredSink) {
        self.stats.parity_received += 1;
        let key = (p.first, p.data_count, p.parity_count);
        let i = match self
            .blocks
            .iter()
            .position(|b| (b.first, b.data_count, b.parity_count) == key)
        {
            Some(i) => i,
            None => {
                if self.blocks.len() >= MAX_BLOCKS {
                    self.blocks.pop_front();
                    self.stats.parity_blocks_failed += 1;
                }
                self.blocks.push_back(RxBlock {
                    first: p.first,
                    data_count: p.data_count,
                    parity_count: p.parity_count,
                    shard_len: p.shard.len(),
                    shards: Vec::new(),
                });
                self.blocks.len() - 1
            }
        };
        let b = &mut self.blocks[i];
        if b.shard_len != p.shard.len() {
            self.stats.coded_malformed += 1;
            return;
        }
        if !b.shards.iter().any(|(j, _)| *j == p.index) {
            b.shards.push((p.index, p.shard.to_vec()));
        }
        self.try_decode(i, sink);
    }
}

impl LossRecovery for ReedSolomon {
    fn on_data_sent(&mut self, now: Instant, seq: u32, path: &Path, payload: &[u8]) {
        if self.count > 0 && seq != self.first.wrapping_add(self.count as u32) {
            self.encode();
        }
        if self.count == 0 {
            self.first = seq;
        }
        self.packets[self.count].clear();
        self.packets[self.count].extend_from_slice(payload);
        self.count += 1;
        self.path = path.id();
        self.last_data = now;
        if self.count == self.block {
            self.encode();
        }
    }

    fn poll_repair(&mut self, now: Instant, _paths: &[Path]) -> Option<Repair<'_>> {
        if self.flush_due().is_some_and(|t| t <= now) {
            self.encode();
        }
        let (first, data_count, parity_count) = self.parity_block;
        let i = self.parity_next;
        if i >= usize::from(parity_count) {
            return None;
        }
        self.parity_next += 1;
        self.stats.parity_sent += 1;
        Some(Repair {
            path: self.parity_path,
            body: RepairBody::Parity(Parity {
                first,
                data_count,
                parity_count,
                // Below parity_count, a u8.
                index: i as u8,
                shard: self.parity.get(i)?,
            }),
        })
    }

    fn poll_timeout(&self, _now: Instant, _paths: &[Path]) -> Option<Instant> {
        self.flush_due()
    }

    fn on_data_received(
        &mut self,
        _now: Instant,
        seq: u32,
        payload: &[u8],
        sink: &mut dyn RecoveredSink,
    ) {
        if self.cache.contains(seq) {
            return;
        }
        self.cache.insert(seq, payload);
        let i = self.blocks.iter().position(|b| {
            seq.wrapping_sub(b.first) < u32::from(b.data_count) && !b.shards.is_empty()
        });
        if let Some(i) = i {
            self.try_decode(i, sink);
        }
    }

    fn on_repair_received(
        &mut self,
        _now: Instant,
        message: &Message<'_>,
        sink: &mut dyn RecoveredSink,
    ) {
        if let Message::Parity(p) = message {
            self.on_parity(p, sink);
        }
    }

    fn stats(&self) -> LossRecoveryStats {
        LossRecoveryStats {
            method: "reed-solomon",
            window: self.count as u64,
            ..self.stats.clone()
        }
    }

    fn name(&self) -> &'static str {
        "reed-solomon"
    }
}

#[cfg(test)]
mod tests;
