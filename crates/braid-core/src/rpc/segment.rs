//! A TCP segment inside an inner IPv4 or IPv6 packet, as RPC sees it: the flow, sequence
//! and ACK numbers, flags, SACK blocks and timestamps, and where each lives so that an ACK
//! can be rewritten in place with its checksum kept correct.

use thiserror::Error;

use super::options::{self, OptionError, Options, SackBlock, MAX_SACK_BLOCKS};
use crate::checksum;
use crate::flow::parse::{self as flow_parse, FlowKey, PROTO_TCP};

const FLAG_FIN: u8 = 0x01;
const FLAG_SYN: u8 = 0x02;
const FLAG_RST: u8 = 0x04;
const FLAG_ACK: u8 = 0x10;

/// Why a packet is not a segment RPC can work on; it then passes through untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum SegmentError {
    #[error("not an IPv4 or IPv6 packet")]
    NotIp,
    #[error("not TCP (or IPv6 extension headers before it)")]
    NotTcp,
    #[error("an IPv4 fragment")]
    Fragment,
    #[error("the IP length field disagrees with the packet's length")]
    Length,
    #[error("the TCP header is truncated or its data offset is bad")]
    Header,
    #[error("bad TCP options: {0}")]
    Options(#[from] OptionError),
}

/// A parsed TCP segment. Offsets are from the start of the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub key: FlowKey,
    pub seq: u32,
    /// The cumulative ACK, if the ACK flag is set.
    pub ack: Option<u32>,
    pub flags: u8,
    pub payload_len: u32,
    pub options: Options,
    /// Where the TCP header starts.
    pub tcp_at: usize,
    /// Where the options area starts (`tcp_at + 20`).
    pub options_at: usize,
}

impl Segment {
    pub fn syn(&self) -> bool {
        self.flags & FLAG_SYN != 0
    }

    pub fn fin(&self) -> bool {
        self.flags & FLAG_FIN != 0
    }

    pub fn rst(&self) -> bool {
        self.flags & FLAG_RST != 0
    }

    /// A bare acknowledgement: ACK set, no data, no SYN, FIN or RST. Only these are held;
    /// anything else is passed on at once (after being read).
    pub fn is_pure_ack(&self) -> bool {
        self.ack.is_some()
            && self.payload_len == 0
            && self.flags & (FLAG_SYN | FLAG_FIN | FLAG_RST) == 0
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Parses an inner packet carrying TCP. Total: never panics, whatever the bytes.
pub fn parse(packet: &[u8]) -> Result<Segment, SegmentError> {
    let info = flow_parse::parse(packet).ok_or(SegmentError::NotIp)?;
    if info.key.protocol != PROTO_TCP {
        return Err(SegmentError::NotTcp);
    }
    let tcp_at = match packet[0] >> 4 {
        4 => {
            if be16(packet, 6).ok_or(SegmentError::Header)? & 0x3fff != 0 {
                return Err(SegmentError::Fragment);
            }
            if usize::from(be16(packet, 2).ok_or(SegmentError::Length)?) != packet.len() {
                return Err(SegmentError::Length);
            }
            usize::from(packet[0] & 0x0f) * 4
        }
        _ => {
            if usize::from(be16(packet, 4).ok_or(SegmentError::Length)?) + 40 != packet.len() {
                return Err(SegmentError::Length);
            }
            40
        }
    };
    let tcp = info.tcp.ok_or(SegmentError::Header)?;
    let off_flags = be16(packet, tcp_at + 12).ok_or(SegmentError::Header)?;
    let header_len = usize::from(off_flags >> 12) * 4;
    if header_len < 20 || packet.len() < tcp_at + header_len {
        return Err(SegmentError::Header);
    }
    let flags = off_flags as u8;
    let options_at = tcp_at + 20;
    let options = options::parse(&packet[options_at..tcp_at + header_len])?;
    let ack = be32(packet, tcp_at + 8).ok_or(SegmentError::Header)?;
    Ok(Segment {
        key: info.key,
        seq: tcp.seq,
        ack: (flags & FLAG_ACK != 0).then_some(ack),
        flags,
        payload_len: tcp.payload_len,
        options,
        tcp_at,
        options_at,
    })
}

/// How an ACK is changed on its way out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rewrite {
    /// A new cumulative ACK number.
    pub ack: Option<u32>,
    /// Replace the SACK option by NOPs (same length, so nothing else moves).
    pub strip_sack: bool,
    /// Replace the SACK option's blocks by these (at most as many as it had; the bytes
    /// freed become NOPs). None left is [`Rewrite::strip_sack`].
    pub sack_blocks: Option<([SackBlock; MAX_SACK_BLOCKS], usize)>,
    /// A new TSval.
    pub tsval: Option<u32>,
}

impl Rewrite {
    pub fn is_empty(&self) -> bool {
        *self == Rewrite::default()
    }
}

/// Applies `rw` to the packet `seg` was parsed from and recomputes the TCP checksum.
/// The IP header does not change (lengths stay), so its checksum stays correct.
pub fn rewrite(packet: &mut [u8], seg: &Segment, rw: Rewrite) {
    if rw.is_empty() {
        return;
    }
    if let Some(ack) = rw.ack {
        packet[seg.tcp_at + 8..seg.tcp_at + 12].copy_from_slice(&ack.to_be_bytes());
    }
    if let (true, Some((at, len))) = (rw.strip_sack, seg.options.sack_at) {
        packet[seg.options_at + at..seg.options_at + at + len].fill(1);
    } else if let (Some((blocks, n)), Some((at, len))) = (rw.sack_blocks, seg.options.sack_at) {
        let opt = &mut packet[seg.options_at + at..seg.options_at + at + len];
        let n = n.min((len - 2) / 8).min(MAX_SACK_BLOCKS);
        opt.fill(1);
        if n > 0 {
            opt[0] = 5;
            opt[1] = (2 + 8 * n) as u8;
            for (i, b) in blocks[..n].iter().enumerate() {
                opt[2 + 8 * i..6 + 8 * i].copy_from_slice(&b.left.to_be_bytes());
                opt[6 + 8 * i..10 + 8 * i].copy_from_slice(&b.right.to_be_bytes());
            }
        }
    }
    if let (Some(tsval), Some(at)) = (rw.tsval, seg.options.timestamps_at) {
        let at = seg.options_at + at + 2;
        packet[at..at + 4].copy_from_slice(&tsval.to_be_bytes());
    }
    packet[seg.tcp_at + 16..seg.tcp_at + 18].fill(0);
    let sum = !tcp_sum(packet, seg.tcp_at);
    packet[seg.tcp_at + 16..seg.tcp_at + 18].copy_from_slice(&sum.to_be_bytes());
}

/// The folded sum of the TCP pseudo-header and segment (RFC 9293 §3.1, RFC 8200 §8.1);
/// 0xffff when the checksum field is right.
pub fn tcp_sum(packet: &[u8], tcp_at: usize) -> u16 {
    let tcp_len = (packet.len() - tcp_at) as u64;
    let mut acc = u64::from(PROTO_TCP) + tcp_len;
    acc = if packet[0] >> 4 == 4 {
        checksum::sum(&packet[12..20], acc)
    } else {
        checksum::sum(&packet[8..40], acc)
    };
    checksum::fold(checksum::sum(&packet[tcp_at..], acc))
}

/// Builds an IPv4 or IPv6 TCP packet with a correct checksum, for tests.
#[cfg(test)]
pub(crate) fn build(v6: bool, seq: u32, ack: Option<u32>, opts: &[u8], payload: usize) -> Vec<u8> {
    let mut opts = opts.to_vec();
    while !opts.len().is_multiple_of(4) {
        opts.push(0);
    }
    let ip = if v6 { 40 } else { 20 };
    let tcp_len = 20 + opts.len();
    let mut p = vec![0u8; ip + tcp_len + payload];
    let len = p.len();
    if v6 {
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        p[6] = PROTO_TCP;
        p[7] = 64;
        p[8..24].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p[24..40].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&[10, 0, 0, 2]);
        p[16..20].copy_from_slice(&[10, 1, 0, 2]);
        let sum = !checksum::fold(checksum::sum(&p[..20], 0));
        p[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    p[ip..ip + 2].copy_from_slice(&40000u16.to_be_bytes());
    p[ip + 2..ip + 4].copy_from_slice(&80u16.to_be_bytes());
    p[ip + 4..ip + 8].copy_from_slice(&seq.to_be_bytes());
    p[ip + 8..ip + 12].copy_from_slice(&ack.unwrap_or(0).to_be_bytes());
    p[ip + 12] = ((tcp_len / 4) as u8) << 4;
    p[ip + 13] = if ack.is_some() { FLAG_ACK } else { 0 };
    p[ip + 14..ip + 16].copy_from_slice(&65535u16.to_be_bytes());
    p[ip + 20..ip + tcp_len].copy_from_slice(&opts);
    for (i, b) in p[ip + tcp_len..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let sum = !tcp_sum(&p, ip);
    p[ip + 16..ip + 18].copy_from_slice(&sum.to_be_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::super::options::{encode, SackBlock};
    use super::*;

    #[test]
    fn reads_and_rewrites_v4_and_v6_acks() {
        for v6 in [false, true] {
            let sack = [
                SackBlock {
                    left: 3000,
                    right: 4000,
                },
                SackBlock {
                    left: 5000,
                    right: 6000,
                },
            ];
            let mut p = build(v6, 9, Some(1000), &encode(Some((500, 400)), &sack), 0);
            assert_eq!(tcp_sum(&p, if v6 { 40 } else { 20 }), 0xffff);
            let seg = parse(&p).unwrap();
            assert_eq!(seg.ack, Some(1000));
            assert!(seg.is_pure_ack());
            assert_eq!(seg.options.sack(), &sack);
            assert_eq!(seg.options.timestamps, Some((500, 400)));
            // Cutting the SACK option to its first block: NOPs fill the rest.
            let mut cut = p.clone();
            let mut blocks = [SackBlock::default(); MAX_SACK_BLOCKS];
            blocks[0] = sack[0];
            let rw = Rewrite {
                sack_blocks: Some((blocks, 1)),
                ..Rewrite::default()
            };
            rewrite(&mut cut, &seg, rw);
            assert_eq!(tcp_sum(&cut, seg.tcp_at), 0xffff);
            let after = parse(&cut).unwrap();
            assert_eq!(after.options.sack(), &sack[..1]);
            assert_eq!(after.options.timestamps, Some((500, 400)));
            let rw = Rewrite {
                ack: Some(2000),
                strip_sack: true,
                tsval: Some(501),
                sack_blocks: None,
            };
            rewrite(&mut p, &seg, rw);
            assert_eq!(tcp_sum(&p, seg.tcp_at), 0xffff, "checksum kept correct");
            let after = parse(&p).unwrap();
            assert_eq!(after.ack, Some(2000));
            assert!(after.options.sack().is_empty());
            assert_eq!(after.options.timestamps, Some((501, 400)));
            if !v6 {
                assert_eq!(checksum::fold(checksum::sum(&p[..20], 0)), 0xffff);
            }
        }
    }

    #[test]
    fn reads_data_segments() {
        let p = build(false, 12345, Some(1), &[], 1000);
        let seg = parse(&p).unwrap();
        assert_eq!((seg.seq, seg.payload_len), (12345, 1000));
        assert!(!seg.is_pure_ack());
    }

    #[test]
    fn refuses_what_it_cannot_rewrite() {
        let p = build(false, 1, Some(1), &[], 10);
        assert_eq!(parse(&p[..p.len() - 1]), Err(SegmentError::Length));
        let mut frag = p.clone();
        frag[6] = 0x20; // more fragments
        assert_eq!(parse(&frag), Err(SegmentError::Fragment));
        let mut udp = p.clone();
        udp[9] = 17;
        assert_eq!(parse(&udp), Err(SegmentError::NotTcp));
        let mut bad_off = p.clone();
        bad_off[32] = 0xf0;
        assert_eq!(parse(&bad_off), Err(SegmentError::Header));
        assert_eq!(parse(&[]), Err(SegmentError::NotIp));
    }
}
