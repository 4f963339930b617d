//! Reading what flow-aware policies need from an inner IP packet: the 5-tuple, the DSCP,
//! and for TCP the flags and sequence number. Zero-copy and total: anything that is not a
//! well-formed IPv4 or IPv6 packet carrying TCP or UDP yields a key with no ports (or no
//! key at all), never a panic.

use std::net::IpAddr;

/// IP protocol numbers we look inside.
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// Identifies an inner flow in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub protocol: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Zero for protocols without ports and for non-first fragments.
    pub src_port: u16,
    pub dst_port: u16,
}

impl FlowKey {
    /// The same flow seen in the other direction.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            protocol: self.protocol,
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
        }
    }
}

/// TCP details of a segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub seq: u32,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    /// Bytes of payload.
    pub payload_len: u32,
}

/// What a packet tells about its flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    pub key: FlowKey,
    /// Differentiated services code point (the top six bits of the TOS / traffic class).
    pub dscp: u8,
    pub tcp: Option<TcpInfo>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        *b.get(at + 3)?,
    ]))
}

/// Parses an inner packet; `None` if it is not IPv4 or IPv6.
pub fn parse(packet: &[u8]) -> Option<PacketInfo> {
    let version = packet.first()? >> 4;
    let (protocol, src, dst, dscp, l4, first_fragment) = match version {
        4 => {
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            if ihl < 20 || packet.len() < ihl {
                return None;
            }
            let tos = packet[1];
            let frag = be16(packet, 6)? & 0x1fff;
            let src: [u8; 4] = packet.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
            (
                packet[9],
                IpAddr::from(src),
                IpAddr::from(dst),
                tos >> 2,
                &packet[ihl..],
                frag == 0,
            )
        }
        6 => {
            if packet.len() < 40 {
                return None;
            }
            let tc = ((packet[0] & 0x0f) << 4) | (packet[1] >> 4);
            let src: [u8; 16] = packet.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
            // Extension headers are not walked: a flow behind them is keyed without ports.
            (
                packet[6],
                IpAddr::from(src),
                IpAddr::from(dst),
                tc >> 2,
                &packet[40..],
                true,
            )
        }
        _ => return None,
    };
    let mut key = FlowKey {
        protocol,
        src,
        dst,
        src_port: 0,
        dst_port: 0,
    };
    let mut tcp = None;
    if first_fragment && (protocol == PROTO_TCP || protocol == PROTO_UDP) {
        if let (Some(sp), Some(dp)) = (be16(l4, 0), be16(l4, 2)) {
            key.src_port = sp;
            key.dst_port = dp;
        }
        if protocol == PROTO_TCP {
            if let (Some(seq), Some(off_flags)) = (be32(l4, 4), be16(l4, 12)) {
                let data_offset = usize::from(off_flags >> 12) * 4;
                let flags = off_flags & 0x3f;
                tcp = Some(TcpInfo {
                    seq,
                    syn: flags & 0x02 != 0,
                    fin: flags & 0x01 != 0,
                    rst: flags & 0x04 != 0,
                    payload_len: l4.len().saturating_sub(data_offset) as u32,
                });
            }
        }
    }
    Some(PacketInfo { key, dscp, tcp })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal IPv4 + TCP packet.
    pub(crate) fn tcp4(sport: u16, dport: u16, seq: u32, flags: u8, payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 40 + payload];
        p[0] = 0x45;
        p[1] = 46 << 2; // DSCP EF
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&[10, 0, 0, 2]);
        p[16..20].copy_from_slice(&[10, 1, 0, 2]);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags;
        p
    }

    #[test]
    fn reads_ipv4_tcp() {
        let p = tcp4(40000, 80, 1234, 0x02, 0);
        let info = parse(&p).unwrap();
        assert_eq!(info.key.protocol, PROTO_TCP);
        assert_eq!((info.key.src_port, info.key.dst_port), (40000, 80));
        assert_eq!(info.dscp, 46);
        let t = info.tcp.unwrap();
        assert!(t.syn && !t.fin && !t.rst);
        assert_eq!((t.seq, t.payload_len), (1234, 0));
        let p = tcp4(1, 2, 5, 0x11, 100);
        let t = parse(&p).unwrap().tcp.unwrap();
        assert!(t.fin && !t.syn);
        assert_eq!(t.payload_len, 100);
        assert_eq!(parse(&p).unwrap().key.reversed().dst_port, 1);
    }

    #[test]
    fn reads_ipv6_udp() {
        let mut p = vec![0u8; 48];
        p[0] = 0x60 | (0xb8 >> 4);
        p[1] = (0xb8 & 0x0f) << 4;
        p[6] = PROTO_UDP;
        p[40..42].copy_from_slice(&5060u16.to_be_bytes());
        p[42..44].copy_from_slice(&9u16.to_be_bytes());
        let info = parse(&p).unwrap();
        assert_eq!(info.dscp, 46);
        assert_eq!((info.key.src_port, info.key.dst_port), (5060, 9));
        assert!(info.key.src.is_ipv6() && info.tcp.is_none());
    }

    #[test]
    fn tolerates_anything() {
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[0x45; 10]), None);
        assert_eq!(parse(&[0x20; 60]), None);
        // A truncated TCP header still keys the flow by addresses.
        let p = tcp4(1, 2, 3, 0, 0);
        let info = parse(&p[..22]).unwrap();
        assert_eq!((info.key.src_port, info.tcp), (0, None));
        for len in 0..p.len() {
            let _ = parse(&p[..len]);
        }
    }
}
