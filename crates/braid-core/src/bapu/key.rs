//! What identifies a BaPu session and what an AP reads from each packet it overhears
//! (BaPu §3.1, Packet Identification): senders in different WLANs may use the same private
//! address, so the BSSID of the frame is part of the key.

use crate::flow::parse::{self, FlowKey, PROTO_TCP, PROTO_UDP};

use super::SessionId;

/// <BSSID, protocol, source, destination, source port, destination port>.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    pub bssid: [u8; 6],
    pub flow: FlowKey,
}

impl SessionKey {
    /// The session's number on the wire: FNV-1a over the key's bytes.
    pub fn id(&self) -> SessionId {
        let mut h: u32 = 0x811c_9dc5;
        let mut eat = |b: u8| {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        };
        self.bssid.iter().copied().for_each(&mut eat);
        eat(self.flow.protocol);
        for addr in [self.flow.src, self.flow.dst] {
            match addr {
                std::net::IpAddr::V4(a) => a.octets().into_iter().for_each(&mut eat),
                std::net::IpAddr::V6(a) => a.octets().into_iter().for_each(&mut eat),
            }
        }
        for port in [self.flow.src_port, self.flow.dst_port] {
            port.to_be_bytes().into_iter().for_each(&mut eat);
        }
        h
    }
}

/// One overheard IPv4 packet as the reports describe it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overheard {
    pub key: SessionKey,
    /// IPv4 identification: the same on every MAC retransmission of a frame (§3.1).
    pub ip_id: u16,
    /// Must take the home AP so NAT state exists along the default path (§3.2): a TCP
    /// SYN or a segment without data (the handshake's last ACK). UDP's first packet is
    /// known only to the gateway, which sees the whole session.
    pub home_only: bool,
    /// TCP: first sequence number and sequence space (data, SYN, FIN); UDP: zero.
    pub seq: u32,
    pub seq_len: u16,
    /// The IP packet's length.
    pub bytes: u16,
}

/// Reads an overheard IPv4 TCP or UDP packet; `None` for anything else (IPv6 has no IP
/// ID to remove duplicates by; fragments are not bunched). Never panics.
pub fn classify(bssid: [u8; 6], packet: &[u8]) -> Option<Overheard> {
    if packet.first()? >> 4 != 4 || packet.len() > usize::from(u16::MAX) {
        return None;
    }
    let info = parse::parse(packet)?;
    if info.key.protocol != PROTO_TCP && info.key.protocol != PROTO_UDP {
        return None;
    }
    let frag = u16::from_be_bytes([*packet.get(6)?, *packet.get(7)?]);
    if frag & 0x3fff != 0 {
        return None;
    }
    let ip_id = u16::from_be_bytes([packet[4], packet[5]]);
    let (seq, seq_len, home_only) = match info.tcp {
        Some(t) => {
            let len = t.payload_len + u32::from(t.syn) + u32::from(t.fin);
            (t.seq, u16::try_from(len).ok()?, t.syn || len == 0)
        }
        None if info.key.protocol == PROTO_TCP => return None,
        None => (0, 0, false),
    };
    Some(Overheard {
        key: SessionKey {
            bssid,
            flow: info.key,
        },
        ip_id,
        home_only,
        seq,
        seq_len,
        bytes: packet.len() as u16,
    })
}
