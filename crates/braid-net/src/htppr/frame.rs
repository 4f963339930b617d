//! Frames on the tortoise's TCP connection: the engine's messages, and around them what a
//! file transfer adds (the file's name and size, its SHA-256, the receiver's verdict).
//!
//! ```text
//! | kind u8 | length u32 | body |
//! ```
//!
//! | kind | frame | body |
//! |---|---|---|
//! | 1 | `Start` | magic "BRHT", version u8, size u64, name (UTF-8) |
//! | 2 | `Engine` | one message of [`braid_core::htppr`]'s tortoise protocol |
//! | 3 | `End` | SHA-256 of the bytes sent (32) |
//! | 4 | `Done` | ok u8, message (UTF-8): the receiver's verdict |
//! | 5 | `Abort` | message (UTF-8): the sender gave up |

/// Start of every `Start` frame: a connection from something else is told apart at once.
pub const MAGIC: &[u8; 4] = b"BRHT";
/// The version in `Start`.
pub const VERSION: u8 = 1;
/// Bytes before a frame's body.
pub const HEADER: usize = 5;
/// The longest body read; the engine's messages stay under 17 KB.
pub const MAX_BODY: usize = 1 << 20;

/// One frame on the tortoise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Start { size: u64, name: String },
    Engine(Vec<u8>),
    End { sha256: [u8; 32] },
    Done { ok: bool, message: String },
    Abort { message: String },
}

/// A frame that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a tortoise frame of {0} bytes is longer than the {MAX_BODY} allowed")]
    TooLong(usize),
    #[error("unknown tortoise frame kind {0}")]
    UnknownKind(u8),
    #[error("a tortoise frame of kind {0} is malformed")]
    Malformed(u8),
    #[error("the tortoise peer is not a braid transfer (bad magic or version)")]
    NotBraid,
}

/// Appends `frame` to `out`.
pub fn emit(out: &mut Vec<u8>, frame: &Frame) {
    let (kind, body): (u8, Vec<u8>) = match frame {
        Frame::Start { size, name } => {
            let mut b = MAGIC.to_vec();
            b.push(VERSION);
            b.extend_from_slice(&size.to_be_bytes());
            b.extend_from_slice(name.as_bytes());
            (1, b)
        }
        Frame::Engine(m) => return push(out, 2, m),
        Frame::End { sha256 } => (3, sha256.to_vec()),
        Frame::Done { ok, message } => {
            let mut b = vec![u8::from(*ok)];
            b.extend_from_slice(message.as_bytes());
            (4, b)
        }
        Frame::Abort { message } => (5, message.as_bytes().to_vec()),
    };
    push(out, kind, &body);
}

fn push(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
}

/// Takes the first whole frame off `buf`: `Ok(None)` when it has not all arrived yet.
pub fn parse(buf: &mut Vec<u8>) -> Result<Option<Frame>, FrameError> {
    let Some(header) = buf.get(..HEADER) else {
        return Ok(None);
    };
    let kind = header[0];
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_BODY {
        return Err(FrameError::TooLong(len));
    }
    let Some(body) = buf.get(HEADER..HEADER + len) else {
        return Ok(None);
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let frame = match kind {
        1 => {
            if body.len() < 13 || &body[..4] != MAGIC || body[4] != VERSION {
                return Err(FrameError::NotBraid);
            }
            let mut size = [0u8; 8];
            size.copy_from_slice(&body[5..13]);
            let name = std::str::from_utf8(&body[13..]).map_err(|_| FrameError::Malformed(1))?;
            Frame::Start {
                size: u64::from_be_bytes(size),
                name: name.to_owned(),
            }
        }
        2 => Frame::Engine(body.to_vec()),
        3 => Frame::End {
            sha256: body.try_into().map_err(|_| FrameError::Malformed(3))?,
        },
        4 => match body.split_first() {
            Some((&ok, msg)) if ok <= 1 => Frame::Done {
                ok: ok == 1,
                message: text(msg),
            },
            _ => return Err(FrameError::Malformed(4)),
        },
        5 => Frame::Abort {
            message: text(body),
        },
        k => return Err(FrameError::UnknownKind(k)),
    };
    buf.drain(..HEADER + len);
    Ok(Some(frame))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn frames_round_trip_byte_by_byte() {
        let frames = [
            Frame::Start {
                size: 20 << 20,
                name: "a file.bin".into(),
            },
            Frame::Engine(vec![1, 2, 3]),
            Frame::End { sha256: [7; 32] },
            Frame::Done {
                ok: false,
                message: "no space left".into(),
            },
            Frame::Abort {
                message: "changed".into(),
            },
        ];
        let mut wire = Vec::new();
        for f in &frames {
            emit(&mut wire, f);
        }
        // Arriving one byte at a time, as TCP may hand it over.
        let (mut buf, mut got) = (Vec::new(), Vec::new());
        for b in wire {
            buf.push(b);
            while let Some(f) = parse(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, frames);
        assert!(buf.is_empty());
    }

    #[test]
    fn a_stranger_is_told_apart() {
        let mut buf = b"GET / HTTP/1.1\r\n\r\n".to_vec();
        assert!(parse(&mut buf).is_err());
        let mut buf = vec![1, 0, 0, 0, 13];
        buf.extend_from_slice(b"XXXX\x01\0\0\0\0\0\0\0\0");
        assert_eq!(parse(&mut buf), Err(FrameError::NotBraid));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut buf = bytes;
            while let Ok(Some(_)) = parse(&mut buf) {}
        }
    }
}
