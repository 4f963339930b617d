//! The TCP options RPC reads and rewrites: SACK blocks (RFC 2018) and timestamps
//! (RFC 7323). braid's flow parser (`flow::parse`) stops at the fixed header.

use thiserror::Error;

/// At most four SACK blocks fit in 40 bytes of options.
pub const MAX_SACK_BLOCKS: usize = 4;

const KIND_EOL: u8 = 0;
const KIND_NOP: u8 = 1;
const KIND_SACK: u8 = 5;
const KIND_TIMESTAMPS: u8 = 8;

/// Why an options area was not understood; the segment then passes through untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum OptionError {
    #[error("TCP option at byte {0} runs past the header")]
    Truncated(usize),
    #[error("TCP option at byte {0} has a bad length")]
    BadLength(usize),
}

/// One SACK block as on the wire: `[left, right)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlock {
    pub left: u32,
    pub right: u32,
}

/// What RPC needs from a segment's options, with where each lives in the options area.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    blocks: [SackBlock; MAX_SACK_BLOCKS],
    block_count: u8,
    /// Offset and length of the SACK option within the options area.
    pub sack_at: Option<(usize, usize)>,
    /// TSval and TSecr.
    pub timestamps: Option<(u32, u32)>,
    /// Offset of the timestamps option within the options area.
    pub timestamps_at: Option<usize>,
}

impl Options {
    /// The SACK blocks in wire order (the first holds the most recent arrival, RFC 2018 §4).
    pub fn sack(&self) -> &[SackBlock] {
        &self.blocks[..usize::from(self.block_count)]
    }
}

fn be32(b: &[u8]) -> u32 {
    match *b {
        [a, b, c, d, ..] => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// Parses a TCP options area (the bytes between the fixed header and the data offset).
/// Unknown options are skipped by their length; total on any input.
pub fn parse(opts: &[u8]) -> Result<Options, OptionError> {
    let mut out = Options::default();
    let mut at = 0;
    while let Some(&kind) = opts.get(at) {
        match kind {
            KIND_EOL => break,
            KIND_NOP => {
                at += 1;
                continue;
            }
            _ => {}
        }
        let len = usize::from(*opts.get(at + 1).ok_or(OptionError::Truncated(at))?);
        if len < 2 {
            return Err(OptionError::BadLength(at));
        }
        let body = opts
            .get(at + 2..at + len)
            .ok_or(OptionError::Truncated(at))?;
        match kind {
            KIND_SACK => {
                if body.is_empty()
                    || !body.len().is_multiple_of(8)
                    || body.len() / 8 > MAX_SACK_BLOCKS
                {
                    return Err(OptionError::BadLength(at));
                }
                for (i, b) in body.chunks_exact(8).enumerate() {
                    out.blocks[i] = SackBlock {
                        left: be32(b),
                        right: be32(&b[4..]),
                    };
                }
                out.block_count = (body.len() / 8) as u8;
                out.sack_at = Some((at, len));
            }
            KIND_TIMESTAMPS => {
                if body.len() != 8 {
                    return Err(OptionError::BadLength(at));
                }
                out.timestamps = Some((be32(body), be32(&body[4..])));
                out.timestamps_at = Some(at);
            }
            _ => {}
        }
        at += len;
    }
    Ok(out)
}

/// Encodes options for tests: NOP NOP TS, then NOP NOP SACK.
#[cfg(test)]
pub(crate) fn encode(ts: Option<(u32, u32)>, sack: &[SackBlock]) -> Vec<u8> {
    let mut o = Vec::new();
    if let Some((val, ecr)) = ts {
        o.extend_from_slice(&[KIND_NOP, KIND_NOP, KIND_TIMESTAMPS, 10]);
        o.extend_from_slice(&val.to_be_bytes());
        o.extend_from_slice(&ecr.to_be_bytes());
    }
    if !sack.is_empty() {
        o.extend_from_slice(&[KIND_NOP, KIND_NOP, KIND_SACK, (2 + 8 * sack.len()) as u8]);
        for b in sack {
            o.extend_from_slice(&b.left.to_be_bytes());
            o.extend_from_slice(&b.right.to_be_bytes());
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sack_and_timestamps() {
        let blocks = [
            SackBlock { left: 5, right: 9 },
            SackBlock {
                left: 20,
                right: 30,
            },
        ];
        let o = parse(&encode(Some((77, 66)), &blocks)).unwrap();
        assert_eq!(o.sack(), &blocks);
        assert_eq!(o.timestamps, Some((77, 66)));
        assert_eq!(o.timestamps_at, Some(2));
        assert_eq!(o.sack_at, Some((14, 18)));
        assert_eq!(parse(&[]).unwrap(), Options::default());
        // An unknown option (MSS) is skipped; EOL ends the list.
        let o = parse(&[2, 4, 5, 0xb4, 0, 5, 0xff]).unwrap();
        assert_eq!(o, Options::default());
    }

    #[test]
    fn rejects_malformed_options() {
        assert_eq!(parse(&[5]), Err(OptionError::Truncated(0)));
        assert_eq!(parse(&[1, 5, 1]), Err(OptionError::BadLength(1)));
        assert_eq!(parse(&[5, 10, 0, 0]), Err(OptionError::Truncated(0)));
        assert_eq!(parse(&[5, 6, 0, 0, 0, 0]), Err(OptionError::BadLength(0)));
        assert_eq!(parse(&[8, 6, 0, 0, 0, 0]), Err(OptionError::BadLength(0)));
        let five = encode(None, &[SackBlock::default(); 5]);
        assert!(parse(&five).is_err());
    }
}
