//! TCP sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 §3.4).

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, Sub};

/// A sequence number. Ordered by serial-number arithmetic: `a < b` when `b - a`, taken
/// modulo 2^32, is below 2^31. That order is only meaningful for numbers within 2^31 of
/// each other, which every window in flight is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// `self - earlier` as a distance, zero when `earlier` is ahead.
    pub fn since(self, earlier: Seq) -> u32 {
        if self >= earlier {
            self.0.wrapping_sub(earlier.0)
        } else {
            0
        }
    }

    pub fn max(self, other: Seq) -> Seq {
        if self >= other {
            self
        } else {
            other
        }
    }

    pub fn min(self, other: Seq) -> Seq {
        if self <= other {
            self
        } else {
            other
        }
    }
}

impl PartialOrd for Seq {
    fn partial_cmp(&self, other: &Seq) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Seq {
    /// Serial-number order (see [`Seq`]). Not a total order over all of `u32`, but a
    /// consistent one over any window narrower than 2^31.
    fn cmp(&self, other: &Seq) -> Ordering {
        (self.0.wrapping_sub(other.0) as i32).cmp(&0)
    }
}

impl Add<u32> for Seq {
    type Output = Seq;
    fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }
}

impl Sub<u32> for Seq {
    type Output = Seq;
    fn sub(self, n: u32) -> Seq {
        Seq(self.0.wrapping_sub(n))
    }
}

impl Sub<Seq> for Seq {
    type Output = i64;
    /// The signed distance from `rhs` to `self`.
    fn sub(self, rhs: Seq) -> i64 {
        i64::from(self.0.wrapping_sub(rhs.0) as i32)
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::Seq;

    #[test]
    fn order_wraps() {
        let a = Seq(u32::MAX - 5);
        let b = a + 10;
        assert_eq!(b.0, 4);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b - a, 10);
        assert_eq!(a - b, -10);
        assert_eq!(b.since(a), 10);
        assert_eq!(a.since(b), 0);
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
    }
}
