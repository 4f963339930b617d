//! The sender's window of recently sent data packets: W of PluriBus §4.1 (the packets
//! "sent within the previous round trip time" that coded packets combine), also the
//! unacknowledged group of fixed-overhead XOR and the retransmission buffer.
//!
//! Entries are in data-sequence order (the session sends data in sequence order), so the
//! ack (highest data sequence the peer received, §4.1 iii) and age both trim a prefix. The
//! window is bounded; the oldest entry makes way for a new one and is counted. Packet
//! buffers are recycled, so a warm window allocates nothing.

use std::collections::VecDeque;
use std::time::Duration;

use crate::path::Path;
use crate::Instant;

/// Round trip assumed before any path has measured one.
pub const DEFAULT_RTT: Duration = Duration::from_millis(500);

/// The "round trip time" of PluriBus §4.1 for the session: the largest smoothed RTT among
/// usable paths (a packet on the slowest path is acknowledged last), or [`DEFAULT_RTT`].
pub fn round_trip(paths: &[Path]) -> Duration {
    paths
        .iter()
        .filter(|p| p.is_usable())
        .filter_map(Path::srtt)
        .max()
        .unwrap_or(DEFAULT_RTT)
}

#[derive(Clone, Debug)]
struct Entry {
    seq: u32,
    expires: Instant,
    packet: Vec<u8>,
    /// Coded packets this entry has been a member of.
    covered: u32,
    /// The sampled receiver states in which this packet is missing, one bit per sample
    /// (Evolution's sampled estimate, [`super::sampled`]).
    missing: u64,
    /// Left to the inner transport: [`Window::find`] no longer gives it.
    forgotten: bool,
}

/// A bounded, sequence-ordered window of sent data packets.
#[derive(Clone, Debug)]
pub struct Window {
    entries: VecDeque<Entry>,
    pool: Vec<Vec<u8>>,
    limit: usize,
    drops: u64,
}

/// `a <= b` in wrapping sequence space.
pub fn seq_le(a: u32, b: u32) -> bool {
    b.wrapping_sub(a) as i32 >= 0
}

impl Window {
    pub fn new(limit: usize) -> Window {
        Window {
            entries: VecDeque::new(),
            pool: Vec::new(),
            limit: limit.max(1),
            drops: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries pushed out by newer ones while the window was full.
    pub fn drops(&self) -> u64 {
        self.drops
    }

    /// Adds data packet `seq`, to leave the window at `expires` at the latest.
    pub fn push(&mut self, seq: u32, expires: Instant, packet: &[u8]) {
        if self.entries.len() >= self.limit {
            self.pop_front();
            self.drops += 1;
        }
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(packet);
        self.entries.push_back(Entry {
            seq,
            expires,
            packet: buf,
            covered: 0,
            missing: 0,
            forgotten: false,
        });
    }

    /// Removes packets with sequence numbers up to `highest` (PluriBus §4.1 iii).
    pub fn ack(&mut self, highest: u32) {
        while self.entries.front().is_some_and(|e| seq_le(e.seq, highest)) {
            self.pop_front();
        }
    }

    /// Removes packets whose time is up at `now`.
    pub fn expire(&mut self, now: Instant) {
        while self.entries.front().is_some_and(|e| e.expires <= now) {
            self.pop_front();
        }
    }

    /// Empties the window.
    pub fn clear(&mut self) {
        while !self.entries.is_empty() {
            self.pop_front();
        }
    }

    /// The `i`-th oldest entry: its sequence number and bytes.
    pub fn get(&self, i: usize) -> Option<(u32, &[u8])> {
        self.entries.get(i).map(|e| (e.seq, e.packet.as_slice()))
    }

    /// How many coded packets the `i`-th oldest entry has been a member of.
    pub fn coverage(&self, i: usize) -> u32 {
        self.entries.get(i).map_or(0, |e| e.covered)
    }

    /// Counts one more coded packet for the `i`-th oldest entry.
    pub fn cover(&mut self, i: usize) {
        if let Some(e) = self.entries.get_mut(i) {
            e.covered = e.covered.saturating_add(1);
        }
    }

    /// The samples in which the `i`-th oldest entry is missing (0 when out of range).
    pub fn missing(&self, i: usize) -> u64 {
        self.entries.get(i).map_or(0, |e| e.missing)
    }

    /// Sets the samples in which the `i`-th oldest entry is missing.
    pub fn set_missing(&mut self, i: usize, mask: u64) {
        if let Some(e) = self.entries.get_mut(i) {
            e.missing = mask;
        }
    }

    /// The entry for data packet `seq`, if the window holds it (and it was not forgotten).
    pub fn find(&self, seq: u32) -> Option<&[u8]> {
        let front = self.entries.front()?.seq;
        let i = seq.wrapping_sub(front) as usize;
        self.entries
            .get(i)
            .filter(|e| e.seq == seq && !e.forgotten)
            .map(|e| e.packet.as_slice())
    }

    /// Stops giving data packet `seq` to [`Window::find`] (it is left to the inner
    /// transport to recover).
    pub fn forget(&mut self, seq: u32) {
        let Some(front) = self.entries.front().map(|e| e.seq) else {
            return;
        };
        let i = seq.wrapping_sub(front) as usize;
        if let Some(e) = self.entries.get_mut(i).filter(|e| e.seq == seq) {
            e.forgotten = true;
        }
    }

    fn pop_front(&mut self) {
        if let Some(e) = self.entries.pop_front() {
            if self.pool.len() < self.limit {
                self.pool.push(e.packet);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_age_and_bound_trim_the_front() {
        let t = Instant::from_millis;
        let mut w = Window::new(3);
        w.push(u32::MAX, t(10), &[1]);
        w.push(0, t(20), &[2]);
        w.push(1, t(30), &[3]);
        assert_eq!(w.find(0), Some(&[2][..]));
        assert_eq!(w.find(5), None);
        w.push(2, t(40), &[4]);
        assert_eq!((w.len(), w.drops()), (3, 1));
        assert_eq!(w.get(0), Some((0, &[2][..])));
        // The ack wraps: u32::MAX < 0.
        w.ack(0);
        assert_eq!(w.get(0).map(|e| e.0), Some(1));
        w.expire(t(30));
        assert_eq!(w.get(0).map(|e| e.0), Some(2));
        w.ack(100);
        assert!(w.is_empty());
    }

    #[test]
    fn coverage_counts_per_entry_and_starts_at_zero() {
        let mut w = Window::new(4);
        for s in 0..3 {
            w.push(s, Instant::from_millis(100), &[s as u8]);
        }
        w.cover(1);
        w.cover(1);
        w.cover(2);
        w.cover(9); // out of range: ignored
        assert_eq!((w.coverage(0), w.coverage(1), w.coverage(2)), (0, 2, 1));
        // Counts follow their entry as the front is trimmed; a recycled buffer starts at 0.
        w.ack(0);
        assert_eq!((w.coverage(0), w.coverage(1)), (2, 1));
        w.push(3, Instant::from_millis(100), &[3]);
        assert_eq!(w.coverage(2), 0);
    }
}
