//! The frames of a file transfer, carried in order on the stream each way:
//!
//! ```text
//! type:u8 len:u32 payload[len]
//! OFFER  1  size:u64 mtime_ns:u64 name:utf8        sender → receiver
//! ACCEPT 2  offset:u64 prefix_sha256:[32]          receiver → sender: bytes it holds
//! START  3  offset:u64                             sender: DATA continues from here
//! DATA   4  bytes
//! END    5  sha256:[32]                            sender: the whole file's hash
//! DONE   6  (empty)                                receiver: hash matched, file kept
//! ERROR  7  message:utf8                           either end gives up, and why
//! ```

/// Header bytes before a frame's payload.
pub const HEADER: usize = 5;
/// Largest payload accepted; DATA frames are at most [`MAX_DATA`].
pub const MAX_PAYLOAD: usize = 128 * 1024;
/// DATA payload per frame at most.
pub const MAX_DATA: usize = 64 * 1024;
/// Longest file name offered (bytes).
pub const MAX_NAME: usize = 255;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Offer {
        size: u64,
        mtime_ns: u64,
        name: &'a str,
    },
    Accept {
        offset: u64,
        prefix: [u8; 32],
    },
    Start {
        offset: u64,
    },
    Data(&'a [u8]),
    End([u8; 32]),
    Done,
    Error(&'a str),
}

/// A frame the peer should not have sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("unknown frame type {0}")]
    UnknownType(u8),
    #[error("frame of type {kind} has a bad length {len}")]
    BadLength { kind: u8, len: usize },
    #[error("a text field is not UTF-8")]
    NotUtf8,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn hash_at(b: &[u8], at: usize) -> [u8; 32] {
    let mut a = [0u8; 32];
    a.copy_from_slice(&b[at..at + 32]);
    a
}

impl<'a> Frame<'a> {
    /// The first whole frame of `b` and its length on the wire; None while incomplete.
    pub fn parse(b: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, FrameError> {
        if b.len() < HEADER {
            return Ok(None);
        }
        let kind = b[0];
        let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(FrameError::BadLength { kind, len });
        }
        if b.len() < HEADER + len {
            return Ok(None);
        }
        let p = &b[HEADER..HEADER + len];
        let bad = FrameError::BadLength { kind, len };
        let text = |t: &'a [u8]| std::str::from_utf8(t).map_err(|_| FrameError::NotUtf8);
        let f = match kind {
            1 if len >= 16 && len - 16 <= MAX_NAME => Frame::Offer {
                size: u64_at(p, 0),
                mtime_ns: u64_at(p, 8),
                name: text(&p[16..])?,
            },
            2 if len == 40 => Frame::Accept {
                offset: u64_at(p, 0),
                prefix: hash_at(p, 8),
            },
            3 if len == 8 => Frame::Start {
                offset: u64_at(p, 0),
            },
            4 if len <= MAX_DATA => Frame::Data(p),
            5 if len == 32 => Frame::End(hash_at(p, 0)),
            6 if len == 0 => Frame::Done,
            7 => Frame::Error(text(p)?),
            1..=7 => return Err(bad),
            k => return Err(FrameError::UnknownType(k)),
        };
        Ok(Some((f, HEADER + len)))
    }

    /// Bytes on the wire.
    pub fn wire_len(&self) -> usize {
        HEADER
            + match self {
                Frame::Offer { name, .. } => 16 + name.len(),
                Frame::Accept { .. } => 40,
                Frame::Start { .. } => 8,
                Frame::Data(b) => b.len(),
                Frame::End(_) => 32,
                Frame::Done => 0,
                Frame::Error(m) => m.len(),
            }
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        let kind = match self {
            Frame::Offer { .. } => 1,
            Frame::Accept { .. } => 2,
            Frame::Start { .. } => 3,
            Frame::Data(_) => 4,
            Frame::End(_) => 5,
            Frame::Done => 6,
            Frame::Error(_) => 7,
        };
        out.push(kind);
        out.extend_from_slice(&((self.wire_len() - HEADER) as u32).to_be_bytes());
        match self {
            Frame::Offer {
                size,
                mtime_ns,
                name,
            } => {
                out.extend_from_slice(&size.to_be_bytes());
                out.extend_from_slice(&mtime_ns.to_be_bytes());
                out.extend_from_slice(name.as_bytes());
            }
            Frame::Accept { offset, prefix } => {
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(prefix);
            }
            Frame::Start { offset } => out.extend_from_slice(&offset.to_be_bytes()),
            Frame::Data(b) => out.extend_from_slice(b),
            Frame::End(h) => out.extend_from_slice(h),
            Frame::Done => {}
            Frame::Error(m) => out.extend_from_slice(m.as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_broken_ones_are_errors() {
        let frames = [
            Frame::Offer {
                size: 5,
                mtime_ns: 7,
                name: "a.bin",
            },
            Frame::Accept {
                offset: 3,
                prefix: [9; 32],
            },
            Frame::Start { offset: 3 },
            Frame::Data(b"xyz"),
            Frame::End([1; 32]),
            Frame::Done,
            Frame::Error("disk full"),
        ];
        let mut b = Vec::new();
        for f in &frames {
            f.emit(&mut b);
        }
        let mut at = 0;
        for f in &frames {
            assert_eq!(Frame::parse(&b[at..at + 2]), Ok(None));
            let (g, n) = Frame::parse(&b[at..]).unwrap().unwrap();
            assert_eq!(&g, f);
            assert_eq!(n, f.wire_len());
            at += n;
        }
        assert_eq!(
            Frame::parse(&[9, 0, 0, 0, 0]),
            Err(FrameError::UnknownType(9))
        );
        assert_eq!(
            Frame::parse(&[3, 0, 0, 0, 1, 0]),
            Err(FrameError::BadLength { kind: 3, len: 1 })
        );
        assert!(Frame::parse(&[4, 0xff, 0, 0, 0]).is_err());
        assert_eq!(
            Frame::parse(&[7, 0, 0, 0, 1, 0xff]),
            Err(FrameError::NotUtf8)
        );
    }
}
