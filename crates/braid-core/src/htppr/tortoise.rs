//! Messages on the tortoise (HTPPR §3.1-3.3, Fig. 2): metadata from the sender, feedback
//! from the receiver.
//!
//! The tortoise is reliable and in order (a TCP connection): the I/O layer frames each
//! message with its length and hands it over whole. A message is a run of items, so one
//! frame can carry every answer that piled up since the last one. Integers are big-endian;
//! sequence numbers are the low 16 bits, extended by each end (see
//! [`super::seqcode::extend`]). The paper encodes these messages with Protocol Buffers (§4);
//! braid's fixed layouts are smaller, which matters because tortoise bytes are the cost
//! HTPPR pays (§5.2, Fig. 4).
//!
//! Sender to receiver ([`ToReceiver`]):
//!
//! | tag | item | body |
//! |---|---|---|
//! | 1 | `Hello` | version u8, block size u8 (÷ 8), blocks per packet u8, chunk size u32 |
//! | 2 | `Offer` | chunk u32, id (20 bytes), length u32 |
//! | 3 | `Burst` | chunk u32, first seq u16, rate u8, plan digest u32, n u8, n × CRC-32 |
//! | 4 | `Fine` | seq u16, n u8, n × CRC-8, 4 × CRC-16 |
//! | 5 | `Finish` | chunks u32 |
//!
//! Receiver to sender ([`ToSender`]):
//!
//! | tag | item | body |
//! |---|---|---|
//! | 0x81 | `Ack` | seq u16 |
//! | 0x82 | `Nack` | seq u16 |
//! | 0x83 | `CrcRequest` | seq u16 |
//! | 0x84 | `Arq` | seq u16, n u8, ⌈n/8⌉ bytes of bad-block bitmap (bit i of byte i/8, LSB first) |
//! | 0x85 | `Want` | chunk u32 |
//! | 0x86 | `Have` | chunk u32 |
//! | 0x87 | `Bier` | rate u8, BIER u16 (÷ 65535), samples u16 |
//! | 0x88 | `Reopen` | chunk u32, n u16, n × block u16 |

use super::chunk::{ChunkId, CHUNK_ID_LEN};

/// The version in `Hello`.
pub const VERSION: u8 = 1;

/// A tortoise message that cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TortoiseError {
    #[error("tortoise item with tag {0:#04x} is cut short")]
    Truncated(u8),
    #[error("unknown tortoise item tag {0:#04x}")]
    UnknownTag(u8),
}

/// An item from the sender to the receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToReceiver {
    /// The transfer's layout (§4 "parameter selection").
    Hello {
        version: u8,
        block_size: usize,
        blocks_per_packet: usize,
        chunk_size: usize,
    },
    /// Chunk number `chunk` of the transfer has this id and length: does the receiver want
    /// it, or does it hold that content already (§4, content-based redundancy elimination)?
    Offer { chunk: u32, id: ChunkId, len: u32 },
    /// A burst of `crcs.len()` packets of `chunk` from `first_seq` on was sent on the hare
    /// at rate index `rate`, laid out as [`super::block::plan_burst`] gives (checked by
    /// `plan_digest`); each packet's CRC-32. Its last sequence number is the burst's
    /// maximum-sequence notice (§3.1, step 1 of Fig. 2).
    Burst {
        chunk: u32,
        first_seq: u16,
        rate: u8,
        plan_digest: u32,
        crcs: Vec<u32>,
    },
    /// The finer CRCs of packet `seq`, asked for by a `CrcRequest` (§3.2).
    Fine {
        seq: u16,
        blocks: Vec<u8>,
        quarters: [u16; 4],
    },
    /// The transfer has `chunks` chunks and they have all been answered for.
    Finish { chunks: u32 },
}

/// An item from the receiver to the sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToSender {
    /// Packet `seq` arrived whole (§3.1).
    Ack { seq: u16 },
    /// Packet `seq` is lost: resend all of it (§3.1).
    Nack { seq: u16 },
    /// Packet `seq` failed its CRC-32: send its finer CRCs (§3.2).
    CrcRequest { seq: u16 },
    /// Packet `seq` arrived with these blocks bad, by position in the packet (§3.1).
    Arq { seq: u16, bad: Vec<bool> },
    /// The receiver wants chunk `chunk`.
    Want { chunk: u32 },
    /// The receiver holds chunk `chunk`'s content already.
    Have { chunk: u32 },
    /// The receiver's block-error-rate estimate (§3.3, eqs. 1-3) at rate index `rate`, over
    /// `samples` packets.
    Bier { rate: u8, bier: u16, samples: u16 },
    /// Blocks of `chunk` accepted earlier turned out wrong (a quarter's CRC-16 or the chunk's
    /// hash failed once they were all in): they are missing again. Sent before the answer
    /// to the packet whose arrival exposed them, so both ends agree on the next burst.
    Reopen { chunk: u32, blocks: Vec<u16> },
}

/// Appends the encoding of `items` to `out`.
pub fn emit_to_receiver(out: &mut Vec<u8>, item: &ToReceiver) {
    match item {
        ToReceiver::Hello {
            version,
            block_size,
            blocks_per_packet,
            chunk_size,
        } => {
            out.push(1);
            out.push(*version);
            out.push((block_size / 8) as u8);
            out.push(*blocks_per_packet as u8);
            out.extend_from_slice(&(*chunk_size as u32).to_be_bytes());
        }
        ToReceiver::Offer { chunk, id, len } => {
            out.push(2);
            out.extend_from_slice(&chunk.to_be_bytes());
            out.extend_from_slice(&id.0);
            out.extend_from_slice(&len.to_be_bytes());
        }
        ToReceiver::Burst {
            chunk,
            first_seq,
            rate,
            plan_digest,
            crcs,
        } => {
            out.push(3);
            out.extend_from_slice(&chunk.to_be_bytes());
            out.extend_from_slice(&first_seq.to_be_bytes());
            out.push(*rate);
            out.extend_from_slice(&plan_digest.to_be_bytes());
            out.push(crcs.len() as u8);
            for crc in crcs {
                out.extend_from_slice(&crc.to_be_bytes());
            }
        }
        ToReceiver::Fine {
            seq,
            blocks,
            quarters,
        } => {
            out.push(4);
            out.extend_from_slice(&seq.to_be_bytes());
            out.push(blocks.len() as u8);
            out.extend_from_slice(blocks);
            for q in quarters {
                out.extend_from_slice(&q.to_be_bytes());
            }
        }
        ToReceiver::Finish { chunks } => {
            out.push(5);
            out.extend_from_slice(&chunks.to_be_bytes());
        }
    }
}

/// Appends the encoding of `item` to `out`.
pub fn emit_to_sender(out: &mut Vec<u8>, item: &ToSender) {
    match item {
        ToSender::Ack { seq } => {
            out.push(0x81);
            out.extend_from_slice(&seq.to_be_bytes());
        }
        ToSender::Nack { seq } => {
            out.push(0x82);
            out.extend_from_slice(&seq.to_be_bytes());
        }
        ToSender::CrcRequest { seq } => {
            out.push(0x83);
            out.extend_from_slice(&seq.to_be_bytes());
        }
        ToSender::Arq { seq, bad } => {
            out.push(0x84);
            out.extend_from_slice(&seq.to_be_bytes());
            out.push(bad.len() as u8);
            for byte in bad.chunks(8) {
                let bits = byte
                    .iter()
                    .enumerate()
                    .fold(0u8, |acc, (i, &b)| acc | (u8::from(b) << i));
                out.push(bits);
            }
        }
        ToSender::Want { chunk } => {
            out.push(0x85);
            out.extend_from_slice(&chunk.to_be_bytes());
        }
        ToSender::Have { chunk } => {
            out.push(0x86);
            out.extend_from_slice(&chunk.to_be_bytes());
        }
        ToSender::Bier {
            rate,
            bier,
            samples,
        } => {
            out.push(0x87);
            out.push(*rate);
            out.extend_from_slice(&bier.to_be_bytes());
            out.extend_from_slice(&samples.to_be_bytes());
        }
        ToSender::Reopen { chunk, blocks } => {
            out.push(0x88);
            out.extend_from_slice(&chunk.to_be_bytes());
            out.extend_from_slice(&(blocks.len() as u16).to_be_bytes());
            for b in blocks {
                out.extend_from_slice(&b.to_be_bytes());
            }
        }
    }
}

/// Reads every item of a message from the sender.
pub fn parse_to_receiver(bytes: &[u8]) -> Result<Vec<ToReceiver>, TortoiseError> {
    let mut r = Reader { bytes, at: 0 };
    let mut items = Vec::new();
    while let Some(tag) = r.tag() {
        let item = match tag {
            1 => ToReceiver::Hello {
                version: r.u8(tag)?,
                block_size: r.u8(tag)? as usize * 8,
                blocks_per_packet: r.u8(tag)? as usize,
                chunk_size: r.u32(tag)? as usize,
            },
            2 => ToReceiver::Offer {
                chunk: r.u32(tag)?,
                id: {
                    let mut id = [0u8; CHUNK_ID_LEN];
                    id.copy_from_slice(r.take(tag, CHUNK_ID_LEN)?);
                    ChunkId(id)
                },
                len: r.u32(tag)?,
            },
            3 => {
                let chunk = r.u32(tag)?;
                let first_seq = r.u16(tag)?;
                let rate = r.u8(tag)?;
                let plan_digest = r.u32(tag)?;
                let n = r.u8(tag)? as usize;
                let crcs = (0..n).map(|_| r.u32(tag)).collect::<Result<_, _>>()?;
                ToReceiver::Burst {
                    chunk,
                    first_seq,
                    rate,
                    plan_digest,
                    crcs,
                }
            }
            4 => {
                let seq = r.u16(tag)?;
                let n = r.u8(tag)? as usize;
                let blocks = r.take(tag, n)?.to_vec();
                let mut quarters = [0u16; 4];
                for q in &mut quarters {
                    *q = r.u16(tag)?;
                }
                ToReceiver::Fine {
                    seq,
                    blocks,
                    quarters,
                }
            }
            5 => ToReceiver::Finish {
                chunks: r.u32(tag)?,
            },
            other => return Err(TortoiseError::UnknownTag(other)),
        };
        items.push(item);
    }
    Ok(items)
}

/// Reads every item of a message from the receiver.
pub fn parse_to_sender(bytes: &[u8]) -> Result<Vec<ToSender>, TortoiseError> {
    let mut r = Reader { bytes, at: 0 };
    let mut items = Vec::new();
    while let Some(tag) = r.tag() {
        let item = match tag {
            0x81 => ToSender::Ack { seq: r.u16(tag)? },
            0x82 => ToSender::Nack { seq: r.u16(tag)? },
            0x83 => ToSender::CrcRequest { seq: r.u16(tag)? },
            0x84 => {
                let seq = r.u16(tag)?;
                let n = r.u8(tag)? as usize;
                let bits = r.take(tag, n.div_ceil(8))?;
                let bad = (0..n).map(|i| bits[i / 8] & (1 << (i % 8)) != 0).collect();
                ToSender::Arq { seq, bad }
            }
            0x85 => ToSender::Want { chunk: r.u32(tag)? },
            0x86 => ToSender::Have { chunk: r.u32(tag)? },
            0x87 => ToSender::Bier {
                rate: r.u8(tag)?,
                bier: r.u16(tag)?,
                samples: r.u16(tag)?,
            },
            0x88 => {
                let chunk = r.u32(tag)?;
                let n = r.u16(tag)? as usize;
                let blocks = (0..n).map(|_| r.u16(tag)).collect::<Result<_, _>>()?;
                ToSender::Reopen { chunk, blocks }
            }
            other => return Err(TortoiseError::UnknownTag(other)),
        };
        items.push(item);
    }
    Ok(items)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn tag(&mut self) -> Option<u8> {
        let tag = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(tag)
    }

    fn take(&mut self, tag: u8, n: usize) -> Result<&'a [u8], TortoiseError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(TortoiseError::Truncated(tag))?;
        let out = self
            .bytes
            .get(self.at..end)
            .ok_or(TortoiseError::Truncated(tag))?;
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self, tag: u8) -> Result<u8, TortoiseError> {
        Ok(self.take(tag, 1)?[0])
    }

    fn u16(&mut self, tag: u8) -> Result<u16, TortoiseError> {
        let b = self.take(tag, 2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, tag: u8) -> Result<u32, TortoiseError> {
        let b = self.take(tag, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn items_round_trip() {
        let to_receiver = vec![
            ToReceiver::Hello {
                version: VERSION,
                block_size: 32,
                blocks_per_packet: 44,
                chunk_size: 32768,
            },
            ToReceiver::Offer {
                chunk: 7,
                id: ChunkId::of(b"c"),
                len: 32768,
            },
            ToReceiver::Burst {
                chunk: 7,
                first_seq: 65534,
                rate: 3,
                plan_digest: 0xdead_beef,
                crcs: vec![1, 2, 3, 4, 5],
            },
            ToReceiver::Fine {
                seq: 9,
                blocks: vec![1; 44],
                quarters: [1, 2, 3, 4],
            },
            ToReceiver::Finish { chunks: 640 },
        ];
        let mut out = Vec::new();
        to_receiver
            .iter()
            .for_each(|i| emit_to_receiver(&mut out, i));
        assert_eq!(parse_to_receiver(&out).unwrap(), to_receiver);

        let to_sender = vec![
            ToSender::Ack { seq: 1 },
            ToSender::Nack { seq: 2 },
            ToSender::CrcRequest { seq: 3 },
            ToSender::Arq {
                seq: 4,
                bad: (0..44).map(|i| i % 5 == 0).collect(),
            },
            ToSender::Want { chunk: 5 },
            ToSender::Have { chunk: 6 },
            ToSender::Bier {
                rate: 7,
                bier: 3277,
                samples: 12,
            },
            ToSender::Reopen {
                chunk: 8,
                blocks: vec![11, 12, 13],
            },
        ];
        let mut out = Vec::new();
        to_sender.iter().for_each(|i| emit_to_sender(&mut out, i));
        assert_eq!(parse_to_sender(&out).unwrap(), to_sender);
        // An ARQ of 44 blocks is 9 bytes: the bitmap keeps feedback small (§5.2).
        let mut arq = Vec::new();
        emit_to_sender(&mut arq, &to_sender[3]);
        assert_eq!(arq.len(), 1 + 2 + 1 + 6);
    }

    #[test]
    fn errors_name_the_item() {
        assert_eq!(
            parse_to_sender(&[0x81, 0]),
            Err(TortoiseError::Truncated(0x81))
        );
        assert_eq!(parse_to_receiver(&[9]), Err(TortoiseError::UnknownTag(9)));
        assert_eq!(parse_to_receiver(&[]), Ok(vec![]));
    }

    proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_to_receiver(&bytes);
            let _ = parse_to_sender(&bytes);
        }

        #[test]
        fn parsers_never_panic_on_valid_tags(
            tag in prop_oneof![1u8..=5, 0x81u8..=0x88],
            body in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let mut bytes = vec![tag];
            bytes.extend(body);
            let _ = parse_to_receiver(&bytes);
            let _ = parse_to_sender(&bytes);
        }
    }
}
