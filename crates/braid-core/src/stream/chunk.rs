//! The stream's wire format: one chunk per datagram, big-endian.
//!
//! ```text
//! DATA           type=1 flags(bit0 FIN) path 0  tsn:u64  payload...
//! SACK           type=2 n_dups path n_gaps      cum:u64  a_rwnd:u32  n_gaps x (start:u32 end:u32)
//!                                               n_dups x tsn:u64
//! HEARTBEAT      type=3 0 path 0                nonce:u64
//! HEARTBEAT-ACK  type=4 0 path 0                nonce:u64
//! ```
//!
//! `path` is the path the chunk was sent on. In a SACK, `cum` is the next TSN the receiver
//! expects (every TSN below it arrived) and each gap block covers the TSNs
//! `cum + start .. cum + end` that arrived beyond it (RFC 4960 §3.3.4, with 64-bit TSNs so
//! that no serial arithmetic is needed and an exclusive end). The duplicate TSNs are
//! chunks received again since the previous SACK (RFC 4960 §3.3.4's, at most
//! [`MAX_DUPS`]): they tell the sender a retransmission was spurious. A SACK without them
//! has `n_dups` 0, the byte's value before they existed, and a parser that does not know
//! them ignores the bytes after the gap blocks. Parsing never panics.

use thiserror::Error;

use crate::PathId;

const DATA: u8 = 1;
const SACK: u8 = 2;
const HEARTBEAT: u8 = 3;
const HEARTBEAT_ACK: u8 = 4;
const FIN: u8 = 1;

/// Bytes before a DATA chunk's payload.
pub const DATA_HEADER: usize = 12;
/// Gap blocks and duplicate TSNs one SACK carries at most together (a SACK stays under
/// 1000 bytes): each duplicate TSN takes a gap block's room.
pub const MAX_GAPS: usize = 120;
/// Duplicate TSNs one SACK reports at most.
pub const MAX_DUPS: usize = 8;

/// Why a datagram is not a stream chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ChunkError {
    #[error("stream chunk truncated")]
    Truncated,
    #[error("unknown stream chunk type {0}")]
    UnknownType(u8),
    #[error("SACK gap blocks out of order, empty or overflowing")]
    BadGaps,
}

/// One parsed chunk, borrowing its payload from the datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    Data {
        path: PathId,
        tsn: u64,
        fin: bool,
        payload: &'a [u8],
    },
    Sack(Sack),
    Heartbeat {
        path: PathId,
        nonce: u64,
    },
    HeartbeatAck {
        path: PathId,
        nonce: u64,
    },
}

/// A selective acknowledgement: cumulative TSN, receive window and gap blocks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sack {
    /// The path the SACK was sent on.
    pub path: PathId,
    /// Next TSN expected: all below it arrived.
    pub cum: u64,
    /// Receive window advertised, bytes.
    pub a_rwnd: u32,
    /// `(start, end)` offsets from `cum`, ascending, disjoint, `1 <= start < end`.
    pub gaps: Vec<(u32, u32)>,
    /// TSNs received again since the previous SACK.
    pub dups: Vec<u64>,
}

impl<'a> Chunk<'a> {
    pub fn parse(b: &'a [u8]) -> Result<Chunk<'a>, ChunkError> {
        if b.len() < 12 {
            return Err(ChunkError::Truncated);
        }
        let path = b[2];
        let word = u64::from_be_bytes([b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11]]);
        match b[0] {
            DATA => Ok(Chunk::Data {
                path,
                tsn: word,
                fin: b[1] & FIN != 0,
                payload: &b[DATA_HEADER..],
            }),
            SACK => {
                let n = b[3] as usize;
                if b.len() < 16 + 8 * n {
                    return Err(ChunkError::Truncated);
                }
                let a_rwnd = u32::from_be_bytes([b[12], b[13], b[14], b[15]]);
                let mut gaps = Vec::with_capacity(n);
                let mut prev_end = 0u32;
                for g in b[16..16 + 8 * n].chunks_exact(8) {
                    let start = u32::from_be_bytes([g[0], g[1], g[2], g[3]]);
                    let end = u32::from_be_bytes([g[4], g[5], g[6], g[7]]);
                    if start <= prev_end || end <= start || word.checked_add(end as u64).is_none() {
                        return Err(ChunkError::BadGaps);
                    }
                    prev_end = end;
                    gaps.push((start, end));
                }
                let d = b[1] as usize;
                let at = 16 + 8 * n;
                if b.len() < at + 8 * d {
                    return Err(ChunkError::Truncated);
                }
                let dups = b[at..at + 8 * d]
                    .chunks_exact(8)
                    .map(|t| u64::from_be_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]))
                    .collect();
                Ok(Chunk::Sack(Sack {
                    path,
                    cum: word,
                    a_rwnd,
                    gaps,
                    dups,
                }))
            }
            HEARTBEAT => Ok(Chunk::Heartbeat { path, nonce: word }),
            HEARTBEAT_ACK => Ok(Chunk::HeartbeatAck { path, nonce: word }),
            t => Err(ChunkError::UnknownType(t)),
        }
    }

    /// Appends the chunk to `out`. A SACK's duplicates are cut to [`MAX_DUPS`], its gap
    /// list to [`MAX_GAPS`] less the duplicates.
    pub fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Chunk::Data {
                path,
                tsn,
                fin,
                payload,
            } => {
                out.extend_from_slice(&[DATA, if *fin { FIN } else { 0 }, *path, 0]);
                out.extend_from_slice(&tsn.to_be_bytes());
                out.extend_from_slice(payload);
            }
            Chunk::Sack(s) => {
                let d = s.dups.len().min(MAX_DUPS);
                let n = s.gaps.len().min(MAX_GAPS - d);
                out.extend_from_slice(&[SACK, d as u8, s.path, n as u8]);
                out.extend_from_slice(&s.cum.to_be_bytes());
                out.extend_from_slice(&s.a_rwnd.to_be_bytes());
                for &(start, end) in &s.gaps[..n] {
                    out.extend_from_slice(&start.to_be_bytes());
                    out.extend_from_slice(&end.to_be_bytes());
                }
                for tsn in &s.dups[..d] {
                    out.extend_from_slice(&tsn.to_be_bytes());
                }
            }
            Chunk::Heartbeat { path, nonce } => {
                out.extend_from_slice(&[HEARTBEAT, 0, *path, 0]);
                out.extend_from_slice(&nonce.to_be_bytes());
            }
            Chunk::HeartbeatAck { path, nonce } => {
                out.extend_from_slice(&[HEARTBEAT_ACK, 0, *path, 0]);
                out.extend_from_slice(&nonce.to_be_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn roundtrip(c: &Chunk<'_>) {
        let mut out = Vec::new();
        c.emit(&mut out);
        assert_eq!(&Chunk::parse(&out).unwrap(), c);
    }

    #[test]
    fn every_kind_round_trips() {
        roundtrip(&Chunk::Data {
            path: 2,
            tsn: 1 << 40,
            fin: true,
            payload: b"hello",
        });
        roundtrip(&Chunk::Sack(Sack {
            path: 1,
            cum: 77,
            a_rwnd: 65536,
            gaps: vec![(2, 5), (7, 8)],
            dups: vec![3, 1 << 40],
        }));
        roundtrip(&Chunk::Heartbeat { path: 0, nonce: 9 });
        roundtrip(&Chunk::HeartbeatAck { path: 3, nonce: 9 });
    }

    #[test]
    fn overlapping_gaps_are_rejected() {
        let mut out = Vec::new();
        Chunk::Sack(Sack {
            path: 0,
            cum: 1,
            a_rwnd: 1,
            gaps: vec![(2, 5), (4, 8)],
            dups: Vec::new(),
        })
        .emit(&mut out);
        assert_eq!(Chunk::parse(&out), Err(ChunkError::BadGaps));
        assert_eq!(Chunk::parse(&out[..15]), Err(ChunkError::Truncated));
    }

    proptest! {
        #[test]
        fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..700)) {
            let _ = Chunk::parse(&b);
        }

        #[test]
        fn sacks_round_trip(cum in 0u64..u64::MAX / 2, a_rwnd in any::<u32>(),
                            lens in proptest::collection::vec((1u32..50, 1u32..50), 0..MAX_GAPS - MAX_DUPS),
                            dups in proptest::collection::vec(any::<u64>(), 0..=MAX_DUPS)) {
            let mut gaps = Vec::new();
            let mut at = 0u32;
            for (skip, len) in lens {
                gaps.push((at + skip, at + skip + len));
                at += skip + len;
            }
            roundtrip(&Chunk::Sack(Sack { path: 1, cum, a_rwnd, gaps, dups }));
        }
    }
}
