//! The code on a hare packet's sequence number (HTPPR §3.1, §3.1.1).
//!
//! The paper names two codes: a (16,9) Reed-Solomon code in §3.1 and a (2,1) code that
//! "increases the overhead only by two bytes" in §3.1.1. braid takes the (2,1) code, the
//! 16-bit sequence number sent twice, because the receiver has side information that a
//! code of its own would duplicate: the tortoise has told it which sequence numbers are
//! outstanding and the CRC-32 of each packet. Where the two copies differ in a few bits, every
//! mix of them is a candidate, and the candidates are narrowed to the outstanding sequence
//! numbers whose chunk id matches and, if more than one is left, to the one whose CRC-32
//! the payload passes. A (16,9) RS code needs a hand-made decoder over a small field (no
//! crate offers one) and corrects only what the candidates already resolve; the repetition
//! code costs the same two bytes.

/// Bytes of the coded sequence number on the wire.
pub const CODED_LEN: usize = 4;

/// Copies may differ in at most this many bits before the number is given up as unreadable:
/// 16 candidates at most.
pub const MAX_DIFFERING_BITS: u32 = 4;

/// The two copies of `seq`.
pub fn encode(seq: u16) -> [u8; CODED_LEN] {
    let b = seq.to_be_bytes();
    [b[0], b[1], b[0], b[1]]
}

/// Every value the sent number may have been: the one value when the copies agree, every mix
/// of them when they differ in at most [`MAX_DIFFERING_BITS`] bits, none otherwise.
pub fn candidates(coded: [u8; CODED_LEN]) -> Vec<u16> {
    let a = u16::from_be_bytes([coded[0], coded[1]]);
    let b = u16::from_be_bytes([coded[2], coded[3]]);
    let diff = a ^ b;
    if diff.count_ones() > MAX_DIFFERING_BITS {
        return Vec::new();
    }
    // Walk the subsets of the differing bits: each is the set of bits taken from `b`.
    let mut out = Vec::with_capacity(1 << diff.count_ones());
    let mut subset: u16 = 0;
    loop {
        out.push((a & !subset) | (b & subset));
        if subset == diff {
            break;
        }
        subset = subset.wrapping_sub(diff) & diff;
    }
    out
}

/// The full sequence number whose low 16 bits are `wire`, nearest to `reference`
/// (serial-number arithmetic: right while fewer than 32768 packets are outstanding).
pub fn extend(wire: u16, reference: u64) -> u64 {
    let base = reference & !0xffff;
    let options = [
        base.wrapping_sub(0x1_0000) | wire as u64,
        base | wire as u64,
        base.wrapping_add(0x1_0000) | wire as u64,
    ];
    options
        .into_iter()
        .filter(|&s| s <= u64::MAX - 0x1_0000)
        .min_by_key(|&s| s.abs_diff(reference))
        .unwrap_or(wire as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreeing_copies_give_one_candidate() {
        assert_eq!(candidates(encode(0xbeef)), [0xbeef]);
    }

    #[test]
    fn one_flipped_bit_gives_both_values() {
        let mut coded = encode(1234);
        coded[1] ^= 0x04;
        let c = candidates(coded);
        assert_eq!(c.len(), 2);
        assert!(c.contains(&1234) && c.contains(&(1234 ^ 0x04)));
    }

    #[test]
    fn bits_flipped_in_both_copies_still_hold_the_sent_value() {
        let mut coded = encode(0x0f0f);
        coded[0] ^= 0x80;
        coded[3] ^= 0x01;
        let c = candidates(coded);
        assert_eq!(c.len(), 4);
        assert!(c.contains(&0x0f0f));
    }

    #[test]
    fn too_many_differences_are_unreadable() {
        let mut coded = encode(7);
        coded[2] ^= 0xf8;
        assert!(candidates(coded).is_empty());
    }

    #[test]
    fn extension_follows_the_reference_across_wraps() {
        assert_eq!(extend(5, 0), 5);
        assert_eq!(extend(0xfffe, 0x1_0003), 0xfffe);
        assert_eq!(extend(2, 0x1_fff0), 0x2_0002);
        assert_eq!(extend(0x1234, 0x7_1200), 0x7_1234);
    }
}
