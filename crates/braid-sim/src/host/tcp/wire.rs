//! IPv4 and TCP headers as the model sends and reads them: a checked parse that never
//! panics and an emit that writes both checksums.
//!
//! - IPv4 (RFC 791): 20-byte header without options, DF set, TTL 64. Received packets may
//!   carry options; fragments are refused (the hosts never fragment).
//! - TCP (RFC 9293 §3.1) with the options of the handshake and of loss recovery: MSS
//!   (RFC 9293 §3.7.1), window scale (RFC 7323 §2), SACK-permitted and SACK (RFC 2018 §2-3).
//!   Timestamps (RFC 7323 §3) are read but never sent. Options are laid out as Linux lays
//!   them out without timestamps: `MSS, NOP, NOP, SACK-permitted, NOP, window scale` on a
//!   SYN, and `NOP, NOP, SACK` on an ACK.
//! - Checksums: the IPv4 header checksum (RFC 791) and the TCP checksum over the
//!   pseudo-header (RFC 9293 §3.1), both verified on receipt.

use braid_core::checksum::{fold, sum};
use thiserror::Error;

use super::seq::Seq;

pub const IPV4_HEADER: usize = 20;
pub const TCP_HEADER: usize = 20;
/// IPv4 and TCP headers without options.
pub const HEADERS: usize = IPV4_HEADER + TCP_HEADER;
pub const PROTO_TCP: u8 = 6;
/// Most SACK blocks in one segment: 4 fit in the 40 option bytes without timestamps.
pub const MAX_SACK_BLOCKS: usize = 4;
/// The largest window scale shift (RFC 7323 §2.3).
pub const MAX_WINDOW_SHIFT: u8 = 14;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_WSCALE: u8 = 3;
const OPT_SACK_PERMITTED: u8 = 4;
const OPT_SACK: u8 = 5;
const OPT_TIMESTAMP: u8 = 8;

/// Why a packet was not taken as a TCP segment.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("packet shorter than its headers say")]
    Truncated,
    #[error("not an IPv4 packet")]
    NotIpv4,
    #[error("not a TCP segment")]
    NotTcp,
    #[error("IPv4 fragment")]
    Fragment,
    #[error("bad IPv4 header checksum")]
    IpChecksum,
    #[error("bad TCP checksum")]
    TcpChecksum,
}

/// Up to [`MAX_SACK_BLOCKS`] SACK blocks, each `[left, right)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlocks {
    blocks: [(Seq, Seq); MAX_SACK_BLOCKS],
    len: u8,
}

impl SackBlocks {
    /// Adds a block; false when full.
    pub fn push(&mut self, left: Seq, right: Seq) -> bool {
        let i = usize::from(self.len);
        if i >= MAX_SACK_BLOCKS {
            return false;
        }
        self.blocks[i] = (left, right);
        self.len += 1;
        true
    }

    pub fn as_slice(&self) -> &[(Seq, Seq)] {
        &self.blocks[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n as u8);
    }
}

/// The fields of an IPv4 + TCP header the model reads or writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: Seq,
    pub ack: Seq,
    /// [`FIN`], [`SYN`], [`RST`], [`PSH`], [`ACK`] or'ed together.
    pub flags: u8,
    /// The window field as carried (unscaled).
    pub window: u16,
    pub mss: Option<u16>,
    pub window_shift: Option<u8>,
    pub sack_permitted: bool,
    pub sack: SackBlocks,
    /// (TSval, TSecr) when the segment carries timestamps; never emitted.
    pub timestamp: Option<(u32, u32)>,
    /// The negative ACK of PRISM's Reverse Path Controller (`braid_core::rpc::nack`): the
    /// lost segment's sequence number, the lossy link's share in 1/65535, the lossy link,
    /// and whether the segment is to be resent (not when the tunnel repairs it); never
    /// emitted.
    pub nack: Option<(Seq, u16, u8, bool)>,
}

impl Header {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Bytes of TCP options [`emit`] writes for this header.
    pub fn options_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.sack_permitted {
            n += 4;
        }
        if self.window_shift.is_some() {
            n += 4;
        }
        if !self.sack.is_empty() {
            n += 4 + 8 * self.sack.len();
        }
        n
    }
}

/// A parsed segment: its header and payload.
#[derive(Clone, Copy, Debug)]
pub struct Segment<'a> {
    pub header: Header,
    pub payload: &'a [u8],
}

impl Segment<'_> {
    /// Sequence space the segment occupies: payload, plus one each for SYN and FIN.
    pub fn seq_len(&self) -> u32 {
        self.payload.len() as u32
            + u32::from(self.header.has(SYN))
            + u32::from(self.header.has(FIN))
    }
}

/// Parses an IPv4 packet carrying a TCP segment, verifying both checksums. Never panics.
pub fn parse(packet: &[u8]) -> Result<Segment<'_>, WireError> {
    parse_checked(packet, false)
}

/// [`parse`], with both checksums taken as verified when `checksums_verified` (a packet
/// the engine rebuilt from header compression, which verified them: the sums would hold).
pub fn parse_checked(packet: &[u8], checksums_verified: bool) -> Result<Segment<'_>, WireError> {
    let ip = packet.get(..IPV4_HEADER).ok_or(WireError::Truncated)?;
    if ip[0] >> 4 != 4 {
        return Err(WireError::NotIpv4);
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ihl < IPV4_HEADER || total < ihl + TCP_HEADER || total > packet.len() {
        return Err(WireError::Truncated);
    }
    if ip[9] != PROTO_TCP {
        return Err(WireError::NotTcp);
    }
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return Err(WireError::Fragment);
    }
    if !checksums_verified && fold(sum(&packet[..ihl], 0)) != 0xffff {
        return Err(WireError::IpChecksum);
    }
    let mut src = [0; 4];
    src.copy_from_slice(&ip[12..16]);
    let mut dst = [0; 4];
    dst.copy_from_slice(&ip[16..20]);
    let tcp = &packet[ihl..total];
    let offset = usize::from(tcp[12] >> 4) * 4;
    if offset < TCP_HEADER || offset > tcp.len() {
        return Err(WireError::Truncated);
    }
    if !checksums_verified && fold(sum(tcp, pseudo_header(src, dst, tcp.len()))) != 0xffff {
        return Err(WireError::TcpChecksum);
    }
    let word = |i: usize| u32::from_be_bytes([tcp[i], tcp[i + 1], tcp[i + 2], tcp[i + 3]]);
    let mut header = Header {
        src,
        dst,
        src_port: u16::from_be_bytes([tcp[0], tcp[1]]),
        dst_port: u16::from_be_bytes([tcp[2], tcp[3]]),
        seq: Seq(word(4)),
        ack: Seq(word(8)),
        flags: tcp[13] & 0x3f,
        window: u16::from_be_bytes([tcp[14], tcp[15]]),
        ..Header::default()
    };
    parse_options(&tcp[TCP_HEADER..offset], &mut header);
    header.nack = braid_core::rpc::nack::find(&tcp[TCP_HEADER..offset]).map(|n| {
        let share = (n.share * 65535.0).round() as u16;
        (Seq(n.seq), share, n.link, n.len > 0)
    });
    Ok(Segment {
        header,
        payload: &tcp[offset..],
    })
}

/// Reads the options it knows; an option of the wrong length is ignored and a malformed
/// length ends the list, as Linux does (`tcp_parse_options`).
fn parse_options(mut opts: &[u8], h: &mut Header) {
    while let Some(&kind) = opts.first() {
        match kind {
            OPT_END => return,
            OPT_NOP => {
                opts = &opts[1..];
                continue;
            }
            _ => {}
        }
        let Some(&len) = opts.get(1) else { return };
        let len = usize::from(len);
        let Some(body) = opts.get(2..len) else { return };
        if len < 2 {
            return;
        }
        match (kind, body.len()) {
            (OPT_MSS, 2) => h.mss = Some(u16::from_be_bytes([body[0], body[1]])),
            (OPT_WSCALE, 1) => h.window_shift = Some(body[0].min(MAX_WINDOW_SHIFT)),
            (OPT_SACK_PERMITTED, 0) => h.sack_permitted = true,
            (OPT_SACK, n) if n % 8 == 0 => {
                for b in body.chunks_exact(8) {
                    let left = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                    let right = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                    if !h.sack.push(Seq(left), Seq(right)) {
                        break;
                    }
                }
            }
            (OPT_TIMESTAMP, 8) => {
                let val = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
                let ecr = u32::from_be_bytes([body[4], body[5], body[6], body[7]]);
                h.timestamp = Some((val, ecr));
            }
            _ => {}
        }
        opts = &opts[len..];
    }
}

/// Writes `h` and a payload of `payload_len` bytes, filled by `fill`, into `buf` as one
/// IPv4 packet (replacing its contents). `ip_id` goes in the IPv4 identification field.
pub fn emit(
    buf: &mut Vec<u8>,
    h: &Header,
    ip_id: u16,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]),
) {
    emit_payload(buf, h, ip_id, payload_len, |p| {
        fill(p);
        false
    });
}

/// Like [`emit`]; `fill` gets the payload zeroed and returns true if it left it so (a
/// bulk sender's filler), whose words then add nothing to the TCP checksum.
pub fn emit_payload(
    buf: &mut Vec<u8>,
    h: &Header,
    ip_id: u16,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> bool,
) {
    let options = h.options_len();
    let tcp_len = TCP_HEADER + options + payload_len;
    let total = IPV4_HEADER + tcp_len;
    buf.clear();
    buf.resize(total, 0);
    buf[0] = 0x45;
    buf[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    buf[4..6].copy_from_slice(&ip_id.to_be_bytes());
    buf[6] = 0x40;
    buf[8] = 64;
    buf[9] = PROTO_TCP;
    buf[12..16].copy_from_slice(&h.src);
    buf[16..20].copy_from_slice(&h.dst);
    let csum = !fold(sum(&buf[..IPV4_HEADER], 0));
    buf[10..12].copy_from_slice(&csum.to_be_bytes());

    let tcp = &mut buf[IPV4_HEADER..];
    tcp[0..2].copy_from_slice(&h.src_port.to_be_bytes());
    tcp[2..4].copy_from_slice(&h.dst_port.to_be_bytes());
    tcp[4..8].copy_from_slice(&h.seq.0.to_be_bytes());
    tcp[8..12].copy_from_slice(&h.ack.0.to_be_bytes());
    tcp[12] = (((TCP_HEADER + options) / 4) as u8) << 4;
    tcp[13] = h.flags;
    tcp[14..16].copy_from_slice(&h.window.to_be_bytes());
    let mut o = TCP_HEADER;
    if let Some(mss) = h.mss {
        tcp[o..o + 2].copy_from_slice(&[OPT_MSS, 4]);
        tcp[o + 2..o + 4].copy_from_slice(&mss.to_be_bytes());
        o += 4;
    }
    if h.sack_permitted {
        tcp[o..o + 4].copy_from_slice(&[OPT_NOP, OPT_NOP, OPT_SACK_PERMITTED, 2]);
        o += 4;
    }
    if let Some(shift) = h.window_shift {
        tcp[o..o + 4].copy_from_slice(&[OPT_NOP, OPT_WSCALE, 3, shift]);
        o += 4;
    }
    if !h.sack.is_empty() {
        let len = 2 + 8 * h.sack.len();
        tcp[o..o + 4].copy_from_slice(&[OPT_NOP, OPT_NOP, OPT_SACK, len as u8]);
        o += 4;
        for &(left, right) in h.sack.as_slice() {
            tcp[o..o + 4].copy_from_slice(&left.0.to_be_bytes());
            tcp[o + 4..o + 8].copy_from_slice(&right.0.to_be_bytes());
            o += 8;
        }
    }
    let zeros = fill(&mut tcp[o..]);
    // The headers are a whole number of 16-bit words, so zeros after them add nothing.
    let summed = if zeros { &tcp[..o] } else { &tcp[..] };
    let csum = !fold(sum(summed, pseudo_header(h.src, h.dst, tcp_len)));
    tcp[16..18].copy_from_slice(&csum.to_be_bytes());
}

/// The sum of the TCP pseudo-header (RFC 9293 §3.1).
fn pseudo_header(src: [u8; 4], dst: [u8; 4], tcp_len: usize) -> u64 {
    let mut p = [0u8; 12];
    p[0..4].copy_from_slice(&src);
    p[4..8].copy_from_slice(&dst);
    p[9] = PROTO_TCP;
    p[10..12].copy_from_slice(&(tcp_len as u16).to_be_bytes());
    sum(&p, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rng;

    fn syn() -> Header {
        Header {
            src: [10, 0, 0, 2],
            dst: [10, 1, 0, 2],
            src_port: 49152,
            dst_port: 5001,
            seq: Seq(0xdead_beef),
            flags: SYN,
            window: 65535,
            mss: Some(1360),
            window_shift: Some(7),
            sack_permitted: true,
            ..Header::default()
        }
    }

    /// RFC 1071's reference: 16-bit words, one at a time.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut acc = 0u32;
        for w in data.chunks(2) {
            let hi = u32::from(w[0]) << 8;
            acc += hi | u32::from(*w.get(1).unwrap_or(&0));
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn checksum_matches_the_16_bit_reference() {
        let mut rng = Rng::new(1);
        for len in 0..100 {
            let data: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            assert_eq!(fold(sum(&data, 0)), reference_sum(&data), "{len}");
        }
    }

    #[test]
    fn segments_round_trip() {
        let mut buf = Vec::new();
        let h = syn();
        emit(&mut buf, &h, 7, 0, |_| {});
        assert_eq!(buf.len(), HEADERS + 12);
        assert_eq!(&buf[40..52], &[2, 4, 0x05, 0x50, 1, 1, 4, 2, 1, 3, 3, 7]);
        let s = parse(&buf).unwrap();
        assert_eq!(s.header, h);
        assert_eq!(s.seq_len(), 1);

        let mut ack = Header {
            flags: ACK | PSH | FIN,
            ack: Seq(17),
            ..syn()
        };
        ack.mss = None;
        ack.window_shift = None;
        ack.sack_permitted = false;
        for i in 0..4 {
            assert!(ack.sack.push(Seq(100 * i), Seq(100 * i + 50)));
        }
        assert!(!ack.sack.push(Seq(1), Seq(2)));
        emit(&mut buf, &ack, 8, 5, |p| p.copy_from_slice(b"hello"));
        assert_eq!(buf.len(), HEADERS + 36 + 5);
        let s = parse(&buf).unwrap();
        assert_eq!(s.header, ack);
        assert_eq!(s.payload, b"hello");
        assert_eq!(s.seq_len(), 6);
    }

    #[test]
    fn a_payload_left_zero_is_summed_as_zeros() {
        let mut h = syn();
        h.flags = ACK;
        h.mss = None;
        for len in [0, 1, 2, 7, 1360] {
            for sack in [0, 3] {
                let mut h = h;
                for i in 0..sack {
                    assert!(h.sack.push(Seq(1000 * i), Seq(1000 * i + 10)));
                }
                let (mut full, mut skipped) = (Vec::new(), Vec::new());
                emit(&mut full, &h, 9, len, |p| p.fill(0));
                skipped.extend_from_slice(&[0xee; 40]);
                emit_payload(&mut skipped, &h, 9, len, |_| true);
                assert_eq!(full, skipped, "len {len}, {sack} SACK blocks");
                assert_eq!(parse(&skipped).unwrap().payload.len(), len);
            }
        }
    }

    #[test]
    fn corruption_is_caught() {
        let mut buf = Vec::new();
        emit(&mut buf, &syn(), 1, 3, |p| p.copy_from_slice(b"abc"));
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            // Every single-bit flip is caught by one checksum or by a header check.
            assert!(parse(&bad).is_err(), "bit {bit} slipped through");
        }
        for n in 0..buf.len() {
            assert_eq!(parse(&buf[..n]).unwrap_err(), WireError::Truncated, "{n}");
        }
    }

    #[test]
    fn malformed_options_never_panic() {
        let mut rng = Rng::new(2);
        for _ in 0..20_000 {
            let n = rng.below(41) as usize;
            let opts: Vec<u8> = (0..n)
                .map(|_| match rng.below(4) {
                    0 => rng.below(10) as u8,
                    _ => rng.below(256) as u8,
                })
                .collect();
            let mut h = Header::default();
            parse_options(&opts, &mut h);
            assert!(h.sack.len() <= MAX_SACK_BLOCKS);
            assert!(h.window_shift.is_none_or(|s| s <= MAX_WINDOW_SHIFT));
        }
    }
}
