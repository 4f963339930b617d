//! XOR coding primitives shared by Evolution, LT and fixed-overhead XOR: the wide-word XOR,
//! and the builder of a coded packet in the wire's form (docs/wire.md, "Coded": highest
//! member, XOR of lengths, bitmap, payload zero-padded to the longest member).

use braid_wire::{Coded, MAX_BITMAP_LEN};

/// Packets below the highest member a coded packet's bitmap can name.
pub const BITMAP_REACH: u32 = 8 * MAX_BITMAP_LEN as u32;

/// `dst[i] ^= src[i]` for every `i` below the shorter length, 32 bytes (four `u64`s) at a
/// time, so the compiler keeps it in wide registers.
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let mut d = dst.chunks_exact_mut(32);
    let mut s = src.chunks_exact(32);
    for (a, b) in (&mut d).zip(&mut s) {
        for k in 0..4 {
            let r = 8 * k..8 * k + 8;
            let x = word(&a[r.clone()]) ^ word(&b[r.clone()]);
            a[r].copy_from_slice(&x.to_ne_bytes());
        }
    }
    for (a, b) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *a ^= *b;
    }
}

#[inline(always)]
fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_ne_bytes(w)
}

/// Builds one coded packet in reusable buffers: no allocation once they have grown to the
/// largest packet.
#[derive(Clone, Debug, Default)]
pub struct CodedBuilder {
    seq: u32,
    len_xor: u16,
    bitmap: Vec<u8>,
    payload: Vec<u8>,
    members: usize,
}

impl CodedBuilder {
    /// Starts a coded packet whose highest member will be `highest`.
    pub fn begin(&mut self, highest: u32) {
        self.seq = highest;
        self.len_xor = 0;
        self.bitmap.clear();
        self.payload.clear();
        self.members = 0;
    }

    /// Adds data packet `seq` (at most [`BITMAP_REACH`] below the highest). Returns false,
    /// adding nothing, when it is out of reach.
    pub fn add(&mut self, seq: u32, packet: &[u8]) -> bool {
        if seq != self.seq {
            let off = self.seq.wrapping_sub(seq).wrapping_sub(1);
            if off >= BITMAP_REACH {
                return false;
            }
            let byte = (off / 8) as usize;
            if self.bitmap.len() <= byte {
                self.bitmap.resize(byte + 1, 0);
            }
            self.bitmap[byte] |= 1 << (off % 8);
        }
        if self.payload.len() < packet.len() {
            self.payload.resize(packet.len(), 0);
        }
        xor_into(&mut self.payload, packet);
        // Inner packets are at most 65000 bytes (`Config::max_packet_size`).
        self.len_xor ^= packet.len() as u16;
        self.members += 1;
        true
    }

    /// Members added since [`CodedBuilder::begin`].
    pub fn members(&self) -> usize {
        self.members
    }

    /// The coded packet as the wire carries it.
    pub fn coded(&self) -> Coded<'_> {
        Coded {
            seq: self.seq,
            len_xor: self.len_xor,
            bitmap: &self.bitmap,
            payload: &self.payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_matches_bytewise_at_every_length() {
        for n in 0..100 {
            let a: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let b: Vec<u8> = (0..n + 5).map(|i| (i * 13 + 1) as u8).collect();
            let mut x = a.clone();
            xor_into(&mut x, &b);
            let want: Vec<u8> = a.iter().zip(&b).map(|(p, q)| p ^ q).collect();
            assert_eq!(x, want);
        }
    }

    #[test]
    fn builder_pads_and_names_members() {
        let mut c = CodedBuilder::default();
        c.begin(20);
        assert!(c.add(20, &[1, 2, 3]));
        assert!(c.add(17, &[0xff]));
        assert!(c.add(4, &[1, 1, 1, 1, 1]));
        assert!(!c.add(20u32.wrapping_sub(BITMAP_REACH + 1), &[9]));
        let k = c.coded();
        assert_eq!(k.members().collect::<Vec<_>>(), vec![20, 17, 4]);
        assert_eq!(k.payload, &[1 ^ 0xff ^ 1, 2 ^ 1, 3 ^ 1, 1, 1]);
        assert_eq!(k.len_xor, 3 ^ 1 ^ 5);
        assert_eq!(c.members(), 3);
        // The farthest reachable member sets the last bit of a full bitmap.
        c.begin(5000);
        assert!(c.add(5000 - BITMAP_REACH, &[]));
        assert_eq!(c.coded().bitmap.len(), MAX_BITMAP_LEN);
        assert_eq!(c.coded().bitmap[MAX_BITMAP_LEN - 1], 0x80);
    }
}
