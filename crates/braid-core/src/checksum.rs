//! The Internet checksum (RFC 1071): the inner IPv4 and TCP checksums that header
//! compression verifies and restores, and those of the simulator's hosts.

/// Adds `data` to `acc`, a ones'-complement sum of big-endian 16-bit words (an odd tail
/// padded with zero), without folding: the result is congruent to that sum modulo
/// 2^16 − 1, which is all [`fold`] keeps, and zero only when `data` and `acc` are.
///
/// Eight bytes at a time in native (little-endian) order, folded and byte-swapped at the
/// end: 2^16 ≡ 1 modulo 2^16 − 1, and a byte-swapped sum is the sum of the byte-swapped
/// words (RFC 1071 §2(B)).
pub fn sum(data: &[u8], acc: u64) -> u64 {
    let word = |w: &[u8]| match *w {
        [a, b, c, d, e, f, g, h] => u128::from(u64::from_le_bytes([a, b, c, d, e, f, g, h])),
        _ => 0,
    };
    let mut wide: u128 = 0;
    // Four words per turn: the loop's own instructions weigh less.
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        wide += word(&b[..8]) + word(&b[8..16]) + word(&b[16..24]) + word(&b[24..]);
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        wide += word(w);
    }
    let rest = words.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    wide += u128::from(u64::from_le_bytes(tail));
    let swapped = u64::from(fold(add_carry(wide as u64, (wide >> 64) as u64)).swap_bytes());
    add_carry(acc, swapped)
}

/// Folds a sum into 16 bits with end-around carry.
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// `a + b` with end-around carry (2^64 ≡ 1 modulo 2^16 − 1).
fn add_carry(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + u64::from(carry)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071's reference: 16-bit words, one at a time.
    fn reference(data: &[u8], acc: u32) -> u16 {
        let mut acc = acc;
        for w in data.chunks(2) {
            acc += (u32::from(w[0]) << 8) | u32::from(*w.get(1).unwrap_or(&0));
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn matches_the_16_bit_reference() {
        let mut x: u64 = 1;
        let mut byte = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        for len in 0..300 {
            for fill in [None, Some(0u8), Some(0xff)] {
                let data: Vec<u8> = (0..len).map(|_| fill.unwrap_or_else(&mut byte)).collect();
                for acc in [
                    0,
                    1,
                    0xfffe,
                    0xffff,
                    u32::from(byte()) << 8 | u32::from(byte()),
                ] {
                    assert_eq!(
                        fold(sum(&data, u64::from(acc))),
                        reference(&data, acc),
                        "{len} {fill:?} {acc}"
                    );
                }
            }
        }
        assert_eq!(fold(sum(&[], 0)), 0);
        assert_eq!(fold(sum(&[0; 9], 0)), 0);
    }
}
