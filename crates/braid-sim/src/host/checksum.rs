//! The Internet checksum (RFC 1071) of the hosts' IPv4, UDP and TCP headers.

/// Adds `data` to a ones'-complement sum, not folded: big-endian 64-bit words (the odd tail
/// padded with zeros) summed wide. 2^16 ≡ 1 modulo 2^16 − 1, so this is congruent to the
/// sum of 16-bit words, which is all [`fold`] keeps, and it is zero only when `data` and
/// `acc` are.
pub(crate) fn sum(data: &[u8], acc: u64) -> u64 {
    let mut wide = u128::from(acc);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        if let &[a, b, c, d, e, f, g, h] = w {
            wide += u128::from(u64::from_be_bytes([a, b, c, d, e, f, g, h]));
        }
    }
    let rest = words.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    wide += u128::from(u64::from_be_bytes(tail));
    // End-around carry: 2^64 ≡ 1 as well.
    let (s, carry) = (wide as u64).overflowing_add((wide >> 64) as u64);
    s + u64::from(carry)
}

/// Folds a sum into 16 bits with end-around carry.
pub(crate) fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rng;

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
        let mut rng = Rng::new(1);
        for len in 0..300 {
            for fill in [None, Some(0u8), Some(0xff)] {
                let data: Vec<u8> = (0..len)
                    .map(|_| fill.unwrap_or_else(|| rng.below(256) as u8))
                    .collect();
                let acc = rng.below(0x1_0000) as u32;
                assert_eq!(
                    fold(sum(&data, u64::from(acc))),
                    reference(&data, acc),
                    "{len} {fill:?}"
                );
            }
        }
        assert_eq!(fold(sum(&[], 0)), 0);
    }
}
