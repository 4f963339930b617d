//! TCP sequence numbers extended to 64 bits, so that the meta-state never compares across
//! a 2^32 wrap.

/// Where a flow's first sequence number lands: far enough from zero that a number a little
/// below it still unwraps without underflow.
pub const BASE: u64 = 1 << 32;

/// The 64-bit number nearest `reference` whose low 32 bits are `seq` (RFC 1982 arithmetic).
pub fn extend(seq: u32, reference: u64) -> u64 {
    let diff = seq.wrapping_sub(reference as u32) as i32;
    reference.saturating_add_signed(i64::from(diff))
}

/// The low 32 bits, as carried on the wire.
pub const fn wire(seq: u64) -> u32 {
    seq as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_across_the_wrap() {
        let r = BASE + u64::from(u32::MAX) - 10;
        assert_eq!(extend(5, r), BASE + (1 << 32) + 5);
        assert_eq!(extend(u32::MAX - 20, r), r - 10);
        assert_eq!(extend(wire(r), r), r);
        assert_eq!(extend(7, 3), 7);
        assert_eq!(extend(u32::MAX, 0), 0, "saturates rather than underflows");
    }
}
