//! The ACK re-sequencing buffer (PRISM §5.2.2, Algorithm 2): duplicate ACKs held in
//! NORMAL state, each under the sequence number it identified, released in identified
//! order once the cumulative ACK passes that number.
//!
//! Bounded in time and size, which the paper's buffer is not: each ACK is held until its
//! own deadline (set by the flow from the links' delay gap, see `flow`), and at most
//! `capacity` are held (the oldest goes out first). Pacing the released ACKs at a peak
//! rate (Algorithm 2, line 6) is the flow's.

use std::collections::BTreeMap;

use crate::time::Instant;

/// A held ACK: its packet, what it identified, and when it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub packet: Vec<u8>,
    /// The end of the highest segment it identified (its in-order cumulative ACK), or the
    /// cumulative ACK at arrival if it identified nothing.
    pub key: u64,
    pub held_at: Instant,
    /// When it must be released at the latest.
    pub until: Instant,
}

/// The re-sequencing buffer of one flow.
#[derive(Clone, Debug)]
pub struct Resequencer {
    /// By (key, arrival number): identified order, ties in arrival order.
    held: BTreeMap<(u64, u64), Held>,
    arrivals: u64,
    capacity: usize,
}

impl Resequencer {
    pub fn new(capacity: usize) -> Self {
        Resequencer {
            held: BTreeMap::new(),
            arrivals: 0,
            capacity: capacity.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Holds `held`; returns an ACK pushed out because the buffer was full.
    pub fn hold(&mut self, held: Held) -> Option<Held> {
        self.held.insert((held.key, self.arrivals), held);
        self.arrivals += 1;
        if self.held.len() > self.capacity {
            let oldest = self
                .held
                .iter()
                .min_by_key(|(&(_, n), _)| n)
                .map(|(&k, _)| k)?;
            return self.held.remove(&oldest);
        }
        None
    }

    /// Takes, in identified order, the ACKs whose key is at most `left`.
    pub fn take_up_to(&mut self, left: u64, out: &mut Vec<Held>) {
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > left {
                break;
            }
            out.push(entry.remove());
        }
    }

    /// Takes every held ACK in arrival order (entering LOSS: release in original form).
    pub fn take_all(&mut self, out: &mut Vec<Held>) {
        let mut all: Vec<((u64, u64), Held)> = std::mem::take(&mut self.held).into_iter().collect();
        all.sort_by_key(|((_, n), _)| *n);
        out.extend(all.into_iter().map(|(_, h)| h));
    }

    /// Takes, in arrival order, the ACKs whose deadline is `now` or earlier.
    pub fn take_expired(&mut self, now: Instant, out: &mut Vec<Held>) {
        let mut expired: Vec<(u64, u64)> = self
            .held
            .iter()
            .filter(|(_, h)| h.until <= now)
            .map(|(&k, _)| k)
            .collect();
        expired.sort_by_key(|&(_, n)| n);
        out.extend(expired.into_iter().filter_map(|k| self.held.remove(&k)));
    }

    /// When the oldest held ACK must be released.
    pub fn deadline(&self) -> Option<Instant> {
        self.held.values().map(|h| h.until).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(key: u64, ms: u64) -> Held {
        Held {
            packet: vec![key as u8],
            key,
            held_at: Instant::from_millis(ms),
            until: Instant::from_millis(ms + 100),
        }
    }

    #[test]
    fn releases_in_identified_order_up_to_left() {
        let mut r = Resequencer::new(10);
        r.hold(held(30, 0));
        r.hold(held(10, 1));
        r.hold(held(20, 2));
        let mut out = Vec::new();
        r.take_up_to(20, &mut out);
        assert_eq!(out.iter().map(|h| h.key).collect::<Vec<_>>(), vec![10, 20]);
        assert_eq!(r.len(), 1);
        assert_eq!(r.deadline(), Some(Instant::from_millis(100)));
    }

    #[test]
    fn bounds_time_and_size() {
        let mut r = Resequencer::new(2);
        assert_eq!(r.hold(held(30, 0)), None);
        assert_eq!(r.hold(held(10, 5)), None);
        assert_eq!(r.hold(held(20, 9)).map(|h| h.key), Some(30));
        let mut out = Vec::new();
        r.take_expired(Instant::from_millis(104), &mut out);
        assert!(out.is_empty());
        r.take_expired(Instant::from_millis(105), &mut out);
        assert_eq!(out.iter().map(|h| h.key).collect::<Vec<_>>(), vec![10]);
        out.clear();
        r.hold(held(5, 200));
        r.take_all(&mut out);
        assert_eq!(out.iter().map(|h| h.key).collect::<Vec<_>>(), vec![20, 5]);
        assert!(r.is_empty() && r.deadline().is_none());
    }
}
