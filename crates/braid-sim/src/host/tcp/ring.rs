//! A bounded byte ring: the send and receive buffers of one connection.
//!
//! `len` bytes from `head` are *committed* (readable by the application, or queued to
//! send); the receive side may also write beyond them, at an offset, before the bytes in
//! between arrive (out-of-order data), and commit them later. Storage grows on demand up to
//! the capacity, so a 4 MiB socket buffer costs memory only once it holds that much.

/// Smallest storage allocated once anything is written.
const MIN_STORAGE: usize = 4096;

#[derive(Debug)]
pub struct Ring {
    buf: Vec<u8>,
    head: usize,
    len: usize,
    capacity: usize,
    /// Only [`Ring::zero_at`] ever wrote: the storage holds nothing but zeros (a bulk
    /// sender's buffer), so zeros need not be written again.
    all_zeros: bool,
}

impl Ring {
    pub fn new(capacity: usize) -> Ring {
        Ring {
            buf: Vec::new(),
            head: 0,
            len: 0,
            capacity,
            all_zeros: true,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the storage holds nothing but zeros.
    pub fn is_all_zeros(&self) -> bool {
        self.all_zeros
    }

    /// Committed bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Room after the committed bytes.
    pub fn free(&self) -> usize {
        self.capacity - self.len
    }

    /// Writes `data` at `offset` bytes past the committed ones, clipped to the capacity;
    /// returns how many bytes were written.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> usize {
        let n = self.reserve(offset, data.len());
        self.all_zeros &= n == 0;
        let mut at = self.index(self.len + offset);
        let mut rest = &data[..n];
        while !rest.is_empty() {
            let run = rest.len().min(self.buf.len() - at);
            self.buf[at..at + run].copy_from_slice(&rest[..run]);
            rest = &rest[run..];
            at = 0;
        }
        n
    }

    /// Like [`Ring::write_at`] with zeros.
    pub fn zero_at(&mut self, offset: usize, len: usize) -> usize {
        let n = self.reserve(offset, len);
        if self.all_zeros {
            return n;
        }
        let mut at = self.index(self.len + offset);
        let mut rest = n;
        while rest > 0 {
            let run = rest.min(self.buf.len() - at);
            self.buf[at..at + run].fill(0);
            rest -= run;
            at = 0;
        }
        n
    }

    /// Makes `n` more bytes committed (at most up to the capacity).
    pub fn commit(&mut self, n: usize) {
        self.len = (self.len + n).min(self.capacity);
    }

    /// Appends and commits; returns how many bytes fit.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let n = self.write_at(0, data);
        self.commit(n);
        n
    }

    /// Copies committed bytes from `offset` into `out` (as many as there are).
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> usize {
        let n = out.len().min(self.len.saturating_sub(offset));
        if n == 0 {
            return 0;
        }
        let mut at = self.index(offset);
        let mut done = 0;
        while done < n {
            let run = (n - done).min(self.buf.len() - at);
            out[done..done + run].copy_from_slice(&self.buf[at..at + run]);
            done += run;
            at = 0;
        }
        n
    }

    /// Drops up to `n` committed bytes from the front.
    pub fn consume(&mut self, n: usize) -> usize {
        let n = n.min(self.len);
        if n > 0 {
            // The head moves even when nothing committed is left: bytes written beyond
            // the committed ones keep their place.
            self.head = self.index(n);
            self.len -= n;
        }
        n
    }

    /// The storage position of logical offset `offset` from the head.
    fn index(&self, offset: usize) -> usize {
        if self.buf.is_empty() {
            return 0;
        }
        let i = self.head + offset;
        if i >= self.buf.len() {
            i - self.buf.len()
        } else {
            i
        }
    }

    /// Grows storage so that `len` bytes at `offset` past the committed ones fit, clipped
    /// to the capacity; returns how many fit.
    fn reserve(&mut self, offset: usize, len: usize) -> usize {
        let room = self.free().saturating_sub(offset);
        let n = len.min(room);
        let need = self.len + offset + n;
        if n > 0 && need > self.buf.len() {
            let size = need
                .max(MIN_STORAGE)
                .checked_next_power_of_two()
                .unwrap_or(usize::MAX)
                .min(self.capacity);
            let mut grown = vec![0u8; size];
            // Keep everything the old storage held, in logical order from the head.
            let old = self.buf.len();
            let first = old - self.head;
            grown[..first].copy_from_slice(&self.buf[self.head..]);
            grown[first..old].copy_from_slice(&self.buf[..self.head]);
            self.buf = grown;
            self.head = 0;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rng;
    use std::collections::VecDeque;

    #[test]
    fn behaves_like_a_deque() {
        let mut rng = Rng::new(5);
        for capacity in [1, 7, 4096, 5000, 10_000] {
            let mut ring = Ring::new(capacity);
            let mut model: VecDeque<u8> = VecDeque::new();
            let mut next = 0u8;
            for _ in 0..2000 {
                match rng.below(3) {
                    0 => {
                        let data: Vec<u8> = (0..rng.below(3000))
                            .map(|_| {
                                next = next.wrapping_add(1);
                                next
                            })
                            .collect();
                        let n = ring.push(&data);
                        assert_eq!(n, data.len().min(capacity - model.len()));
                        model.extend(&data[..n]);
                    }
                    1 => {
                        let n = rng.below(3000) as usize;
                        let n = ring.consume(n);
                        model.drain(..n);
                    }
                    _ => {
                        let off = rng.below(model.len() as u64 + 1) as usize;
                        let mut out = vec![0; rng.below(2000) as usize];
                        let n = ring.read_at(off, &mut out);
                        let want: Vec<u8> =
                            model.iter().skip(off).take(out.len()).copied().collect();
                        assert_eq!(&out[..n], &want[..]);
                    }
                }
                assert_eq!(ring.len(), model.len());
                assert!(ring.buf.len() <= capacity.max(1));
            }
        }
    }

    #[test]
    fn out_of_order_writes_commit_later() {
        let mut ring = Ring::new(10);
        assert_eq!(ring.write_at(4, b"efgh"), 4);
        assert_eq!(ring.len(), 0);
        assert_eq!(ring.write_at(0, b"abcd"), 4);
        ring.commit(8);
        let mut out = [0; 8];
        assert_eq!(ring.read_at(0, &mut out), 8);
        assert_eq!(&out, b"abcdefgh");
        assert_eq!(ring.write_at(1, b"xyz"), 1, "clipped to the capacity");
        assert_eq!(ring.zero_at(0, 5), 2);
        // Reading everything committed keeps what lies beyond in place.
        assert_eq!(ring.consume(8), 8);
        assert_eq!(ring.write_at(3, b"QR"), 2);
        assert_eq!(ring.write_at(0, b"NOP"), 3);
        ring.commit(5);
        let mut out = [0; 5];
        ring.read_at(0, &mut out);
        assert_eq!(&out, b"NOPQR");
    }

    #[test]
    fn zeros_overwrite_earlier_data() {
        let mut ring = Ring::new(4096);
        assert_eq!(ring.zero_at(0, 1000), 1000);
        ring.commit(1000);
        assert_eq!(ring.push(&[7; 2000]), 2000);
        assert_eq!(ring.consume(3000), 3000);
        // Wraps over where the 7s were.
        assert_eq!(ring.zero_at(0, 4000), 4000);
        ring.commit(4000);
        let mut out = vec![1; 4000];
        assert_eq!(ring.read_at(0, &mut out), 4000);
        assert!(out.iter().all(|&b| b == 0));
    }
}
