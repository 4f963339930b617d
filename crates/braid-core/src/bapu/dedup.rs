//! Duplicate removal by IPv4 identification (BaPu §3.1, Duplicate Elimination): a MAC
//! retransmission repeats the frame with the same IP ID, so an AP that overheard two
//! tries of one frame reports and forwards it once. TCP's sequence number would not do:
//! a TCP retransmission is a new packet with a new IP ID that must get through.

use std::collections::VecDeque;

/// IP IDs seen recently: the last `window` of them, in a 65 536-bit set (8 KiB) with a
/// FIFO to forget the oldest. Bounded whatever arrives.
#[derive(Clone, Debug)]
pub struct IpIdFilter {
    seen: Vec<u64>,
    order: VecDeque<u16>,
    window: usize,
    duplicates: u64,
}

impl IpIdFilter {
    /// Remembers the last `window` IDs (at most 32 768, half the ID space, so an ID that
    /// wrapped around is new again).
    pub fn new(window: usize) -> IpIdFilter {
        IpIdFilter {
            seen: vec![0; 1024],
            order: VecDeque::new(),
            window: window.clamp(1, 32_768),
            duplicates: 0,
        }
    }

    /// Whether `ip_id` is new; remembers it.
    pub fn insert(&mut self, ip_id: u16) -> bool {
        let (word, bit) = (usize::from(ip_id >> 6), 1u64 << (ip_id & 63));
        if self.seen[word] & bit != 0 {
            self.duplicates += 1;
            return false;
        }
        self.seen[word] |= bit;
        self.order.push_back(ip_id);
        if self.order.len() > self.window {
            if let Some(old) = self.order.pop_front() {
                self.seen[usize::from(old >> 6)] &= !(1u64 << (old & 63));
            }
        }
        true
    }

    /// Duplicates refused so far.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_repeats_within_the_window_and_forgets_beyond_it() {
        let mut f = IpIdFilter::new(4);
        assert!(f.insert(7));
        assert!(!f.insert(7));
        for id in 8..12 {
            assert!(f.insert(id));
        }
        // 7 fell out of the window of four.
        assert!(f.insert(7));
        assert!(!f.insert(11));
        assert_eq!(f.duplicates(), 2);
        // IDs wrap: 65535 then 0 are both new.
        assert!(f.insert(u16::MAX));
        assert!(f.insert(0));
    }
}
