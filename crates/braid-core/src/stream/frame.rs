//! The frames that multiplex split-TCP's connections on one stream each way (the daemons'
//! `braid_net::split_tcp` and the simulator's model of it).
//!
//! ```text
//! frame   = kind:u8 conn:u32 len:u16 payload[len]      (big-endian)
//! OPEN    gateway -> server: payload = address (4 bytes IPv4, 16 IPv6), port:u16
//! DATA    payload = the connection's bytes
//! FIN     no payload: this side's TCP peer finished sending
//! RESET   no payload: abort (destination refused, a side reset or failed)
//! CREDIT  payload = n:u32: the sender's peer wrote n more bytes into its TCP socket
//! ```
//!
//! Parsing never panics: [`Frames`] takes whatever bytes the stream delivers and yields
//! whole frames.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Header bytes before a frame's payload.
pub const HEADER: usize = 7;
/// Largest DATA payload.
pub const MAX_DATA: usize = 16 * 1024;

const OPEN: u8 = 1;
const DATA: u8 = 2;
const FIN: u8 = 3;
const RESET: u8 = 4;
const CREDIT: u8 = 5;

/// OPEN's payload to an IPv4 and to an IPv6 destination.
const OPEN_V4: usize = 6;
const OPEN_V6: usize = 18;

fn open_len(to: &SocketAddr) -> usize {
    match to {
        SocketAddr::V4(_) => OPEN_V4,
        SocketAddr::V6(_) => OPEN_V6,
    }
}

/// One frame, borrowing DATA's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Open { conn: u32, to: SocketAddr },
    Data { conn: u32, bytes: &'a [u8] },
    Fin { conn: u32 },
    Reset { conn: u32 },
    Credit { conn: u32, bytes: u32 },
}

/// Why the stream's bytes are not frames: the peer is broken or hostile; the session is
/// dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("unknown split-TCP frame kind {0}")]
    UnknownKind(u8),
    #[error("split-TCP frame of kind {kind} has a bad length {len}")]
    BadLength { kind: u8, len: usize },
}

impl Frame<'_> {
    /// Bytes the frame takes on the stream.
    pub fn wire_len(&self) -> usize {
        HEADER
            + match self {
                Frame::Open { to, .. } => open_len(to),
                Frame::Data { bytes, .. } => bytes.len(),
                Frame::Fin { .. } | Frame::Reset { .. } => 0,
                Frame::Credit { .. } => 4,
            }
    }

    /// Appends the frame to `out`. A DATA payload must be at most [`MAX_DATA`].
    pub fn emit(&self, out: &mut Vec<u8>) {
        self.emit_header(out);
        match self {
            Frame::Open { to, .. } => {
                match to.ip() {
                    IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                    IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
                }
                out.extend_from_slice(&to.port().to_be_bytes());
            }
            Frame::Data { bytes, .. } => out.extend_from_slice(bytes),
            Frame::Credit { bytes, .. } => out.extend_from_slice(&bytes.to_be_bytes()),
            Frame::Fin { .. } | Frame::Reset { .. } => {}
        }
    }

    /// Appends the frame's [`HEADER`] bytes alone, for a writer that sends a DATA
    /// payload from where it lies.
    pub fn emit_header(&self, out: &mut Vec<u8>) {
        let (kind, conn) = match self {
            Frame::Open { conn, .. } => (OPEN, conn),
            Frame::Data { conn, .. } => (DATA, conn),
            Frame::Fin { conn } => (FIN, conn),
            Frame::Reset { conn } => (RESET, conn),
            Frame::Credit { conn, .. } => (CREDIT, conn),
        };
        out.push(kind);
        out.extend_from_slice(&conn.to_be_bytes());
        out.extend_from_slice(&((self.wire_len() - HEADER) as u16).to_be_bytes());
    }

    /// The frame at the start of `b` and its length; `Ok(None)` when `b` holds only part.
    pub fn parse(b: &[u8]) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
        if b.len() < HEADER {
            return Ok(None);
        }
        let kind = b[0];
        let conn = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
        let len = usize::from(u16::from_be_bytes([b[5], b[6]]));
        let want = match kind {
            OPEN if len == OPEN_V6 => Some(OPEN_V6),
            OPEN => Some(OPEN_V4),
            DATA => None,
            FIN | RESET => Some(0),
            CREDIT => Some(4),
            k => return Err(FrameError::UnknownKind(k)),
        };
        if want.is_some_and(|w| w != len) || len > MAX_DATA {
            return Err(FrameError::BadLength { kind, len });
        }
        if b.len() < HEADER + len {
            return Ok(None);
        }
        let p = &b[HEADER..HEADER + len];
        let frame = match kind {
            OPEN => {
                let (a, port) = p.split_at(len - 2);
                let ip = match <[u8; 16]>::try_from(a) {
                    Ok(v6) => IpAddr::V6(Ipv6Addr::from(v6)),
                    Err(_) => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
                };
                Frame::Open {
                    conn,
                    to: SocketAddr::new(ip, u16::from_be_bytes([port[0], port[1]])),
                }
            }
            DATA => Frame::Data { conn, bytes: p },
            FIN => Frame::Fin { conn },
            RESET => Frame::Reset { conn },
            _ => Frame::Credit {
                conn,
                bytes: u32::from_be_bytes([p[0], p[1], p[2], p[3]]),
            },
        };
        Ok(Some((frame, HEADER + len)))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn every_kind_round_trips_and_partial_frames_wait() {
        let frames = [
            Frame::Open {
                conn: 7,
                to: "10.1.0.2:8080".parse().unwrap(),
            },
            Frame::Data {
                conn: 7,
                bytes: b"GET / HTTP/1.1\r\n",
            },
            Frame::Open {
                conn: 8,
                to: "[2001:db8::2]:443".parse().unwrap(),
            },
            Frame::Fin { conn: 7 },
            Frame::Reset { conn: u32::MAX },
            Frame::Credit {
                conn: 1,
                bytes: 1 << 20,
            },
        ];
        let mut all = Vec::new();
        for f in &frames {
            f.emit(&mut all);
        }
        let mut at = 0;
        for f in &frames {
            assert_eq!(Frame::parse(&all[at..at + f.wire_len() - 1]), Ok(None));
            let (g, n) = Frame::parse(&all[at..]).unwrap().unwrap();
            assert_eq!((&g, n), (f, f.wire_len()));
            at += n;
        }
        assert_eq!(at, all.len());
    }

    #[test]
    fn bad_kinds_and_lengths_are_errors() {
        assert_eq!(
            Frame::parse(&[9, 0, 0, 0, 1, 0, 0]),
            Err(FrameError::UnknownKind(9))
        );
        assert_eq!(
            Frame::parse(&[FIN, 0, 0, 0, 1, 0, 2, 0, 0]),
            Err(FrameError::BadLength { kind: FIN, len: 2 })
        );
        assert!(Frame::parse(&[DATA, 0, 0, 0, 1, 0xff, 0xff]).is_err());
        assert_eq!(
            Frame::parse(&[OPEN, 0, 0, 0, 1, 0, 10]),
            Err(FrameError::BadLength {
                kind: OPEN,
                len: 10
            }),
            "an OPEN is 6 or 18 bytes"
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Frame::parse(&b);
        }
    }
}
