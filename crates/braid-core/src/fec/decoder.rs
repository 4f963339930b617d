//! The receiver's side of XOR coding (PluriBus §5: "Each PluriBus proxy caches all data
//! packets arriving from other proxies for a brief window of time so that coded packets can
//! be decoded").
//!
//! [`PacketCache`] keeps the most recent data packets (received or recovered) in a fixed
//! ring indexed by sequence number. [`XorDecoder`] recovers a missing packet from a coded
//! packet when exactly one of its members is missing: its bytes are the coded payload XOR
//! the other members, its length `len_xor` XOR theirs (§4.1: "a coded packet can recover at
//! most one data packet"). With [`crate::XorDecoder::Peeling`] an undecodable coded packet
//! with few missing members is kept, with the present members already XORed out, and
//! peeled as its missing members arrive; otherwise it is discarded, as §4.1 assumes.

use braid_wire::Coded;

use super::xor::xor_into;
use super::RecoveredSink;
use crate::stats::LossRecoveryStats;

/// Data packets the cache holds (a power of two): more than a window can hold, so every
/// member a sender can name is still here unless it was lost.
pub const CACHE_SLOTS: usize = 2048;
/// Undecodable coded packets kept for peeling.
const MAX_HELD: usize = 64;
/// A coded packet missing more members than this is not worth keeping.
const MAX_HELD_MISSING: usize = 4;

#[derive(Clone, Debug, Default)]
struct Slot {
    seq: Option<u32>,
    packet: Vec<u8>,
}

/// The most recent data packets by sequence number, in a fixed ring.
#[derive(Clone, Debug)]
pub struct PacketCache {
    slots: Vec<Slot>,
}

impl Default for PacketCache {
    fn default() -> Self {
        PacketCache {
            slots: vec![Slot::default(); CACHE_SLOTS],
        }
    }
}

impl PacketCache {
    pub fn insert(&mut self, seq: u32, packet: &[u8]) {
        let s = &mut self.slots[seq as usize % CACHE_SLOTS];
        s.seq = Some(seq);
        s.packet.clear();
        s.packet.extend_from_slice(packet);
    }

    pub fn get(&self, seq: u32) -> Option<&[u8]> {
        let s = &self.slots[seq as usize % CACHE_SLOTS];
        (s.seq == Some(seq)).then_some(s.packet.as_slice())
    }

    /// Forgets data packet `seq`.
    pub fn remove(&mut self, seq: u32) {
        let s = &mut self.slots[seq as usize % CACHE_SLOTS];
        if s.seq == Some(seq) {
            s.seq = None;
        }
    }

    pub fn contains(&self, seq: u32) -> bool {
        self.slots[seq as usize % CACHE_SLOTS].seq == Some(seq)
    }
}

/// A coded packet kept for peeling: the payload with its present members already removed.
#[derive(Clone, Debug, Default)]
struct Held {
    missing: Vec<u32>,
    len_xor: u16,
    payload: Vec<u8>,
}

/// Decodes coded packets against a [`PacketCache`].
#[derive(Clone, Debug, Default)]
pub struct XorDecoder {
    pub cache: PacketCache,
    peeling: bool,
    held: Vec<Held>,
    spare: Vec<Held>,
    out: Vec<u8>,
    work: Vec<u32>,
}

impl XorDecoder {
    pub fn new(mode: crate::XorDecoder) -> XorDecoder {
        XorDecoder {
            peeling: mode == crate::XorDecoder::Peeling,
            ..XorDecoder::default()
        }
    }

    /// A data packet arrived.
    pub fn on_data(
        &mut self,
        seq: u32,
        payload: &[u8],
        sink: &mut dyn RecoveredSink,
        st: &mut LossRecoveryStats,
    ) {
        if self.cache.contains(seq) {
            return;
        }
        self.cache.insert(seq, payload);
        if !self.held.is_empty() {
            self.work.clear();
            self.work.push(seq);
            self.peel(sink, st);
        }
    }

    /// A coded packet arrived: recovers its one missing member, or keeps or drops it.
    pub fn on_coded(
        &mut self,
        coded: &Coded<'_>,
        sink: &mut dyn RecoveredSink,
        st: &mut LossRecoveryStats,
    ) {
        st.coded_received += 1;
        let mut missing = None;
        let mut count = 0;
        for m in coded.members() {
            if !self.cache.contains(m) {
                count += 1;
                missing = Some(m);
                if count > MAX_HELD_MISSING || (count > 1 && !self.peeling) {
                    break;
                }
            }
        }
        let Some(target) = missing else {
            st.coded_redundant += 1;
            return;
        };
        if count == 1 {
            self.out.clear();
            self.out.extend_from_slice(coded.payload);
            let mut len = coded.len_xor;
            for m in coded.members().filter(|&m| m != target) {
                let Some(p) = self.cache.get(m) else { continue };
                if p.len() > self.out.len() {
                    st.coded_malformed += 1;
                    return;
                }
                xor_into(&mut self.out, p);
                len ^= p.len() as u16;
            }
            let len = usize::from(len);
            if len > self.out.len() {
                st.coded_malformed += 1;
                return;
            }
            self.cache.insert(target, &self.out[..len]);
            st.recovered += 1;
            sink.recovered(target, &self.out[..len]);
            if !self.held.is_empty() {
                self.work.clear();
                self.work.push(target);
                self.peel(sink, st);
            }
            return;
        }
        st.coded_undecodable += 1;
        if self.peeling && count <= MAX_HELD_MISSING {
            self.hold(coded, st);
        }
    }

    fn hold(&mut self, coded: &Coded<'_>, st: &mut LossRecoveryStats) {
        if self.held.len() >= MAX_HELD {
            let old = self.held.remove(0);
            self.spare.push(old);
            st.held_evicted += 1;
        }
        let mut h = self.spare.pop().unwrap_or_default();
        h.missing.clear();
        h.payload.clear();
        h.payload.extend_from_slice(coded.payload);
        h.len_xor = coded.len_xor;
        for m in coded.members() {
            match self.cache.get(m) {
                Some(p) if p.len() <= h.payload.len() => {
                    xor_into(&mut h.payload, p);
                    h.len_xor ^= p.len() as u16;
                }
                Some(_) => {
                    st.coded_malformed += 1;
                    self.spare.push(h);
                    return;
                }
                None => h.missing.push(m),
            }
        }
        self.held.push(h);
    }

    /// Removes newly available packets (`self.work`) from held coded packets, recovering
    /// those left with one missing member, until nothing more comes free.
    fn peel(&mut self, sink: &mut dyn RecoveredSink, st: &mut LossRecoveryStats) {
        while let Some(seq) = self.work.pop() {
            let mut i = 0;
            while i < self.held.len() {
                let h = &mut self.held[i];
                let Some(pos) = h.missing.iter().position(|&m| m == seq) else {
                    i += 1;
                    continue;
                };
                let Some(p) = self.cache.get(seq) else {
                    i += 1;
                    continue;
                };
                if p.len() > h.payload.len() {
                    st.coded_malformed += 1;
                    let h = self.held.swap_remove(i);
                    self.spare.push(h);
                    continue;
                }
                xor_into(&mut h.payload, p);
                h.len_xor ^= p.len() as u16;
                h.missing.swap_remove(pos);
                if h.missing.len() > 1 {
                    i += 1;
                    continue;
                }
                let h = self.held.swap_remove(i);
                if h.missing.is_empty() {
                    self.spare.push(h);
                    continue;
                }
                let target = h.missing[0];
                let len = usize::from(h.len_xor);
                if len <= h.payload.len() && !self.cache.contains(target) {
                    self.cache.insert(target, &h.payload[..len]);
                    st.recovered += 1;
                    st.recovered_by_peeling += 1;
                    sink.recovered(target, &h.payload[..len]);
                    self.work.push(target);
                }
                self.spare.push(h);
            }
        }
    }
}

#[cfg(test)]
mod tests;
