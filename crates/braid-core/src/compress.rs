//! Inner IPv4/TCP header compression between gateway and server.
//!
//! braid's own improvement over the papers (none of PluriBus, PRISM, oSCTP compresses the
//! tunnelled headers): a full-size inner TCP segment pays 40 bytes of IPv4 and TCP headers
//! on top of braid's 65, against the 40 of direct TCP. The scheme follows Van Jacobson
//! (RFC 1144) and ROHC-TCP (RFC 6846) in keeping the static fields (addresses, ports, TOS,
//! TTL, IP flags) in a context named by a one-byte context id, but it is built for braid's
//! multipath delivery, where packets arrive out of order, are lost, or are skipped by the
//! hole timeout:
//!
//! - **No deltas against a previous packet.** The acknowledgement number, window and TCP
//!   data offset are either carried or equal to the context's
//!   *reference* values, which only a packet in the establishing form sets (RFC 1144 and
//!   ROHC-TCP encode them against the previous packet, which a lost packet breaks). A
//!   field is left out only when the two latest establishing packets agree on it, so a
//!   receiver that missed the latest one (lost, or skipped by the hole timeout) still
//!   restores it; establishing packets carry a 7-bit generation, so one delivered late
//!   does not take the receiver's references back; and a compressed packet delivered late,
//!   after an establishing packet changed the references, is rebuilt with the previous
//!   ones when the current ones fail its checksum. The
//!   sequence and acknowledgement numbers travel as their low 24 bits, which the
//!   decompressor completes to the value nearest the latest one it restored for the flow
//!   (ROHC's W-LSB with a window of 2^23: it takes megabytes of one flow lost or
//!   reordered to break it, not one packet); a number farther than 2^22 from the previous
//!   packet's travels in full. The IP identification of an atomic datagram (DF set)
//!   travels likewise as its low byte, completed within ±128 of the latest restored;
//!   beyond that (more than 64 packets of one flow lost in a row) it could be restored
//!   wrong, which RFC 6864 §4.1 allows for atomic datagrams (the field means nothing in
//!   them); without DF it travels in full.
//! - **The TCP checksum is carried**, as in RFC 1144 and RFC 6846, and the decompressor
//!   verifies the rebuilt segment against it: a packet decompressed with the wrong context
//!   (a context reused for another flow, or refreshed, while the packet was late) is caught
//!   and counted, never delivered with a recomputed, fake-valid checksum. Only packets
//!   whose IPv4 and TCP checksums verify are compressed; the others travel in full, so a
//!   segment the inner sender corrupted reaches the inner receiver as it was sent. The IPv4
//!   header checksum is recomputed (it verified at the compressor, and the envelope
//!   authenticates the bytes in between).
//! - **Options and payload travel verbatim** (timestamps, SACK blocks); lengths follow from
//!   the packet length.
//! - **Establishing packets cost nothing**: the establishing form is the full packet with
//!   its first four bytes rewritten (version/IHL, always `0x45` here, and the total length,
//!   implied by the packet length, give way to the form, the context id and a flag), so it
//!   never exceeds the inner MTU.
//!
//! Context establishment: the compressor sends a flow's packets in the establishing form
//! until the peer's acknowledgement (its highest data sequence number received) reaches
//! the first of them; the resequencer delivers in data-sequence order and decompression
//! runs after it (`Session::poll_deliver`), so the context precedes the compressed packets
//! that use it. SYN, FIN and RST segments, the first two segments after a SYN (whose window
//! and options differ from the rest), inner TCP retransmissions (a segment that does not
//! advance the flow's sequence space) and every [`REFRESH_EVERY`]th packet of a context
//! travel in the establishing form too. A retransmission is flagged as one, and the
//! receiving end then sends its next packet of the reverse flow (an acknowledgement) in
//! the establishing form as well: so if a receiver ever lacks a context (all of a flow's
//! establishing packets lost and not recovered), the inner TCP's own retransmission
//! restores it in both directions, and the loss costs what the inner TCP repairs. A
//! compressed packet whose context is unknown is dropped and counted
//! ([`CompressStats::unknown_context`]).
//!
//! Wire forms (docs/wire.md, "Inner header compression"); the first nibble is never 4 or 6,
//! so an uncompressed IP packet passes through unchanged:
//!
//! ```text
//! establishing: | 0x10 | TOS | context id | generation (7 bits) << 1 | retransmission |
//!               | IPv4 header bytes 4-19 | TCP segment ... |
//! compressed:   | 0x20 + W 0x10 + O 8 + I 4 + D 2 + A 1 | context id |
//!               | [TCP offset byte if O] | TCP flags |
//!               | seq (3, or 4 if W) | [ack (3, or 4 if W) if A] | [window (2) if D] |
//!               | IP id (2 if I, else its low byte) | TCP checksum (2) |
//!               | TCP options | payload |
//! ```
//!
//! A full-size data segment of a bulk download compresses to 9 bytes of header instead of
//! 40; a pure acknowledgement to 12-14 (and its options).
//!
//! Both tables are fixed arrays ([`CONTEXTS`] entries per direction); nothing on the hot
//! path allocates (decompression grows the caller's buffer by at most 31 bytes).

use std::net::{IpAddr, Ipv4Addr};

use crate::checksum::{fold, sum};
use crate::flow::parse::{FlowKey, PacketInfo, TcpInfo, PROTO_TCP};

/// Contexts per direction: the context id is one byte.
pub const CONTEXTS: usize = 256;
/// Slots probed for a flow's context (from its hash); the least recently used is reused.
const PROBE: usize = 8;
/// Every this many packets of a context, one travels in the establishing form.
pub const REFRESH_EVERY: u32 = 256;
/// First byte of the establishing form.
pub const FORM_ESTABLISH: u8 = 0x10;
/// In the establishing form's fourth byte: the packet is an inner TCP retransmission. The
/// other seven bits are the generation.
const EST_RETRANSMIT: u8 = 1;
/// First nibble of the compressed form (with 3-byte sequence and acknowledgement offsets).
pub const FORM_COMPRESSED: u8 = 0x20;
/// First nibble of the compressed form with absolute sequence and acknowledgement numbers.
pub const FORM_COMPRESSED_WIDE: u8 = FORM_COMPRESSED | WIDE;
const F_ACK: u8 = 1;
const F_WINDOW: u8 = 2;
const F_IP_ID: u8 = 4;
const F_OFFSET: u8 = 8;
/// In the first byte of the compressed form: sequence and acknowledgement numbers are
/// absolute (4 bytes), not 3-byte offsets from the references.
const WIDE: u8 = 0x10;
/// Shortest compressed form: form, context id, flags, 3-byte seq, IP id, checksum.
const COMPRESSED_MIN: usize = 9;
/// Longest compressed header.
const COMPRESSED_MAX: usize = 18;
/// A sequence or acknowledgement number travels in 3 bytes (its low 24 bits) when it is
/// within this distance of the one in the flow's previous packet; the receiver takes the
/// value nearest the one in the latest packet of the flow it restored, which is right
/// while the two are within 2^23 (4 MB of the flow lost or reordered in between would be
/// needed to break it, and the checksum catches that).
const NARROW: u32 = 1 << 22;
const IPV4: usize = 20;
const TCP: usize = 20;
const URG: u8 = 0x20;
const TCP_SYN: u8 = 0x02;
/// IPv4 "don't fragment".
const DF: u16 = 0x4000;
const SYN_FIN_RST: u8 = 0x07;

/// Counters of both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompressStats {
    /// Packets sent in the compressed form, and the bytes that saved.
    pub compressed: u64,
    pub bytes_saved: u64,
    /// Packets sent in the establishing form.
    pub establishing: u64,
    /// Packets received in the compressed form and rebuilt.
    pub decompressed: u64,
    /// Compressed packets dropped: their context was never established here.
    pub unknown_context: u64,
    /// Compressed packets dropped: the rebuilt segment's checksum did not match the one
    /// carried (a context reused while the packet was late), or the form was malformed.
    pub failed: u64,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The IPv4 header checksum of `ip` (20 bytes) with its checksum field taken as zero.
pub(crate) fn ip_checksum(ip: &[u8]) -> u16 {
    let acc = sum(&ip[..10], 0) + sum(&ip[12..IPV4], 0);
    !fold(acc)
}

/// Whether the TCP checksum of the IPv4 packet `p` (20-byte header) verifies.
pub(crate) fn tcp_checksum_ok(p: &[u8]) -> bool {
    let tcp_len = (p.len() - IPV4) as u64;
    let acc = sum(&p[12..20], 0) + u64::from(PROTO_TCP) + tcp_len;
    fold(sum(&p[IPV4..], acc)) == 0xffff
}

/// The static part of a flow's headers, and the reference values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Static {
    /// IPv4 source and destination, TCP source and destination ports (IPv4 bytes 12-19,
    /// TCP bytes 0-3).
    addrs: [u8; 12],
    tos: u8,
    /// IPv4 flags and fragment offset (always a non-fragment).
    frag: u16,
    ttl: u8,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Refs {
    seq: u32,
    ack: u32,
    window: u16,
    ip_id: u16,
    /// TCP data offset and reserved bits (byte 12).
    offset: u8,
}

/// Reads the fields of a compressible packet: IPv4 without options, not a fragment, TCP
/// without URG, total length equal to the packet's, data offset within it. `None` for
/// anything else.
fn compressible(p: &[u8]) -> Option<(Static, Refs, usize)> {
    if p.len() < IPV4 + TCP || p[0] != 0x45 || p[9] != PROTO_TCP {
        return None;
    }
    if usize::from(be16(p, 2)) != p.len() || be16(p, 6) & 0x3fff != 0 {
        return None;
    }
    let tcp = &p[IPV4..];
    let off = usize::from(tcp[12] >> 4) * 4;
    if off < TCP || off > tcp.len() || tcp[13] & URG != 0 || be16(tcp, 18) != 0 {
        return None;
    }
    let mut addrs = [0; 12];
    addrs[..8].copy_from_slice(&p[12..20]);
    addrs[8..].copy_from_slice(&tcp[..4]);
    let st = Static {
        addrs,
        tos: p[1],
        frag: be16(p, 6),
        ttl: p[8],
    };
    let refs = Refs {
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        window: be16(tcp, 14),
        ip_id: be16(p, 4),
        offset: tcp[12],
    };
    Some((st, refs, off))
}

/// The value both references hold, if they agree.
fn agreed<T: PartialEq>(a: T, b: T) -> Option<T> {
    (a == b).then_some(a)
}

fn hash(addrs: &[u8; 12]) -> usize {
    // FNV-1a: the table is small and the flows are the peer's, not an attacker's choice
    // (a collision only costs compression).
    let mut h: u32 = 0x811c_9dc5;
    for &b in addrs {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h ^ (h >> 16)) as usize
}

#[derive(Clone, Copy, Debug, Default)]
struct TxContext {
    used: bool,
    st: Static,
    refs: Refs,
    /// The data sequence number of the first establishing packet; `None` once the peer's
    /// acknowledgement has passed it.
    pending: Option<u32>,
    /// The end of the flow's sequence space sent so far (seq + payload length).
    snd_nxt: u32,
    /// The sequence and acknowledgement numbers of the latest packet sent.
    prev_seq: u32,
    prev_ack: u32,
    prev_ip_id: u16,
    /// The references came from a SYN, whose window and options differ from the rest.
    /// Packets still to send in the establishing form after a SYN (whose window and
    /// options differ from the rest), so that two in a row agree on the references.
    settle: u8,
    /// The references of the establishing packet before the latest: a field is left out
    /// only when both agree on it, so a receiver that missed the latest establishing
    /// packet (lost, or skipped by the hole timeout) still restores it right.
    prev_refs: Refs,
    /// Packets since the last establishing one.
    since_refresh: u32,
    last_used: u64,
}

/// The sending side: compresses the inner packets of one direction.
pub struct Compressor {
    table: Box<[TxContext; CONTEXTS]>,
    /// Per slot: the generation (7 bits) of its latest establishing packet.
    generation: Box<[u8; CONTEXTS]>,
    clock: u64,
    /// The peer's acknowledgement: the highest data sequence number it received.
    peer_ack: Option<u32>,
    pub(crate) stats: CompressStats,
}

impl Default for Compressor {
    fn default() -> Self {
        Compressor {
            table: Box::new([TxContext::default(); CONTEXTS]),
            generation: Box::new([0; CONTEXTS]),
            clock: 0,
            peer_ack: None,
            stats: CompressStats::default(),
        }
    }
}

impl Compressor {
    /// The peer acknowledged data sequence numbers up to `ack` (its highest received).
    pub fn on_ack(&mut self, ack: u32) {
        if self.peer_ack.is_none_or(|a| ack.wrapping_sub(a) as i32 > 0) {
            self.peer_ack = Some(ack);
        }
    }

    /// The peer retransmitted a segment of the reverse of flow `addrs` (IPv4 addresses,
    /// then ports, as the peer sent them): what we sent of the flow (acknowledgements) may
    /// not have got through, possibly for want of our context.
    /// The next packet of ours of the flow travels in the establishing form.
    pub fn refresh_reverse(&mut self, addrs: &[u8; 12]) {
        let mut rev = [0u8; 12];
        rev[..4].copy_from_slice(&addrs[4..8]);
        rev[4..8].copy_from_slice(&addrs[..4]);
        rev[8..10].copy_from_slice(&addrs[10..12]);
        rev[10..12].copy_from_slice(&addrs[8..10]);
        if let (i, true) = self.slot(&rev) {
            self.table[i].since_refresh = REFRESH_EVERY;
        }
    }

    /// The context slot of a flow: its own, or the one to (re)use.
    fn slot(&self, addrs: &[u8; 12]) -> (usize, bool) {
        let h = hash(addrs);
        let mut victim = h % CONTEXTS;
        for k in 0..PROBE {
            let i = (h + k) % CONTEXTS;
            let c = &self.table[i];
            if c.used && c.st.addrs == *addrs {
                return (i, true);
            }
            let v = &self.table[victim];
            if v.used && (!c.used || c.last_used < v.last_used) {
                victim = i;
            }
        }
        (victim, false)
    }

    /// Rewrites `packet`, the inner packet of data sequence number `seq`, into the
    /// establishing or the compressed form when it is a compressible IPv4/TCP packet whose
    /// checksums verify; leaves anything else untouched. Never grows the packet.
    pub fn compress(&mut self, seq: u32, packet: &mut Vec<u8>) {
        self.compress_checked(seq, packet, false);
    }

    /// [`Compressor::compress`] of a packet whose checksums are known to hold when
    /// `checksums_verified` (they are then not summed again).
    pub fn compress_checked(&mut self, seq: u32, packet: &mut Vec<u8>, checksums_verified: bool) {
        let Some((st, refs, off)) = compressible(packet) else {
            return;
        };
        if !checksums_verified
            && (ip_checksum(packet) != be16(packet, 10) || !tcp_checksum_ok(packet))
        {
            return;
        }
        self.clock += 1;
        let (i, found) = self.slot(&st.addrs);
        let tcp = &packet[IPV4..];
        let (tcp_seq, ack) = (be32(tcp, 4), be32(tcp, 8));
        let flags = tcp[13];
        let payload = (tcp.len() - off) as u32;
        let end = tcp_seq.wrapping_add(payload);
        let c = &mut self.table[i];
        let mut refresh = c.since_refresh + 1 >= REFRESH_EVERY;
        let mut retransmit = false;
        if found {
            // An inner TCP retransmission (a segment that does not advance the sequence
            // space): the peer may miss the context.
            retransmit = payload > 0 && end.wrapping_sub(c.snd_nxt) as i32 <= 0;
            refresh |= retransmit;
            if end.wrapping_sub(c.snd_nxt) as i32 > 0 {
                c.snd_nxt = end;
            }
            if let (Some(first), Some(a)) = (c.pending, self.peer_ack) {
                if a.wrapping_sub(first) as i32 >= 0 {
                    c.pending = None;
                }
            }
            c.since_refresh += 1;
        }
        c.last_used = self.clock;
        let syn = flags & TCP_SYN != 0;
        let establish = !found
            || c.pending.is_some()
            || c.st != st
            || flags & SYN_FIN_RST != 0
            || (c.settle > 0 && !syn)
            || refresh;
        if establish {
            if !found {
                *c = TxContext {
                    used: true,
                    pending: Some(seq),
                    snd_nxt: end,
                    last_used: self.clock,
                    ..TxContext::default()
                };
            }
            c.st = st;
            c.prev_refs = if found { c.refs } else { refs };
            c.refs = refs;
            (c.prev_seq, c.prev_ack, c.prev_ip_id) = (tcp_seq, ack, refs.ip_id);
            c.settle = if syn { 2 } else { c.settle.saturating_sub(1) };
            c.since_refresh = 0;
            packet[0] = FORM_ESTABLISH;
            packet[2] = i as u8;
            // Generations count the establishing packets of a slot, whichever flow holds
            // it, so a late one is known for old.
            self.generation[i] = self.generation[i].wrapping_add(1) & 0x7f;
            packet[3] = self.generation[i] << 1 | u8::from(retransmit);
            self.stats.establishing += 1;
            return;
        }
        // Compressed: build the header in a stack buffer, then move the options and
        // payload down behind it.
        // What the receiver restores an absent field to, whichever of the two latest
        // establishing packets it got; `None` when they differ.
        let (r, p) = (c.refs, c.prev_refs);
        let ack_ref = agreed(r.ack, p.ack);
        let near = |v: u32, latest: u32| v.wrapping_sub(latest).wrapping_add(NARROW) < 2 * NARROW;
        let wide = !near(tcp_seq, c.prev_seq) || (ack_ref != Some(ack) && !near(ack, c.prev_ack));
        // The IP identification of an atomic datagram (DF, RFC 6864) travels as its low
        // byte when within 64 of the previous packet's.
        let ip_id_narrow =
            st.frag & DF != 0 && refs.ip_id.wrapping_sub(c.prev_ip_id).wrapping_add(64) < 128;
        (c.prev_seq, c.prev_ack, c.prev_ip_id) = (tcp_seq, ack, refs.ip_id);
        let mut h = [0u8; COMPRESSED_MAX];
        let mut f = if wide { WIDE } else { 0 };
        h[1] = i as u8;
        let mut n = 2;
        let mut put = |h: &mut [u8; COMPRESSED_MAX], bytes: &[u8]| {
            h[n..n + bytes.len()].copy_from_slice(bytes);
            n += bytes.len();
        };
        if agreed(r.offset, p.offset) != Some(tcp[12]) {
            f |= F_OFFSET;
            put(&mut h, &[tcp[12]]);
        }
        put(&mut h, &[flags]);
        let from = if wide { 0 } else { 1 };
        put(&mut h, &tcp_seq.to_be_bytes()[from..]);
        if ack_ref != Some(ack) {
            f |= F_ACK;
            put(&mut h, &ack.to_be_bytes()[from..]);
        }
        if agreed(r.window, p.window) != Some(refs.window) {
            f |= F_WINDOW;
            put(&mut h, &tcp[14..16]);
        }
        if ip_id_narrow {
            put(&mut h, &packet[5..6]);
        } else {
            f |= F_IP_ID;
            put(&mut h, &packet[4..6]);
        }
        put(&mut h, &tcp[16..18]);
        h[0] = FORM_COMPRESSED | f;
        let rest = IPV4 + TCP;
        let len = packet.len();
        packet.copy_within(rest..len, n);
        packet[..n].copy_from_slice(&h[..n]);
        packet.truncate(len - rest + n);
        self.stats.compressed += 1;
        self.stats.bytes_saved += (rest - n) as u64;
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct RxContext {
    used: bool,
    st: Static,
    refs: Refs,
    /// The references before the latest establishing packet changed them.
    prev_refs: Refs,
    /// The sequence and acknowledgement numbers of the latest packet restored: what the
    /// low 24 bits of a narrow compressed packet are completed against.
    latest_seq: u32,
    latest_ack: u32,
    latest_ip_id: u16,
    /// The generation of the establishing packet the context came from.
    generation: u8,
}

/// The number with low 24 bits `low` nearest `latest`.
fn complete(low: u32, latest: u32) -> u32 {
    let d = low.wrapping_sub(latest) & 0x00ff_ffff;
    // Sign-extend the 24-bit difference.
    latest.wrapping_add(((d << 8) as i32 >> 8) as u32)
}

/// Why a received inner packet could not be rebuilt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// A compressed packet whose context this end never received.
    UnknownContext,
    /// Too short, a bad form, or a rebuilt segment whose checksum does not match.
    Failed,
}

/// Whether `packet` is in the compressed form: [`Decompressor::restore`] rebuilds it and
/// verifies the rebuilt TCP segment's checksum, and writes its IPv4 header checksum.
pub fn is_compressed(packet: &[u8]) -> bool {
    matches!(
        packet.first().map(|b| b & 0xf0),
        Some(FORM_COMPRESSED | FORM_COMPRESSED_WIDE)
    )
}

/// The receiving side: rebuilds the inner packets of one direction.
pub struct Decompressor {
    table: Box<[RxContext; CONTEXTS]>,
    /// The flow of the latest retransmission restored from the establishing form, until
    /// taken.
    established: Option<[u8; 12]>,
    pub(crate) stats: CompressStats,
}

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor {
            table: Box::new([RxContext::default(); CONTEXTS]),
            established: None,
            stats: CompressStats::default(),
        }
    }
}

impl Decompressor {
    /// The flow of a received inner packet in either form, if its context is known (for
    /// the flow table's reverse-direction learning before delivery).
    pub fn flow_key(&self, packet: &[u8]) -> Option<FlowKey> {
        let a = match *packet.first()? & 0xf0 {
            FORM_ESTABLISH => {
                let mut a = [0u8; 12];
                a[..8].copy_from_slice(packet.get(12..20)?);
                a[8..].copy_from_slice(packet.get(IPV4..IPV4 + 4)?);
                a
            }
            FORM_COMPRESSED | FORM_COMPRESSED_WIDE => {
                let c = &self.table[usize::from(*packet.get(1)?)];
                if !c.used {
                    return None;
                }
                c.st.addrs
            }
            _ => return None,
        };
        Some(FlowKey {
            protocol: PROTO_TCP,
            src: IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            dst: IpAddr::V4(Ipv4Addr::new(a[4], a[5], a[6], a[7])),
            src_port: u16::from_be_bytes([a[8], a[9]]),
            dst_port: u16::from_be_bytes([a[10], a[11]]),
        })
    }

    /// What a received inner packet in either form tells about its flow, for the flow
    /// table (MinConnPath's open-connection count needs the SYN, FIN and RST flags). SYN,
    /// FIN and RST segments always travel in the establishing form, whose TCP header is
    /// intact; a compressed packet carries none of them, so it reports no TCP flags.
    pub fn flow_info(&self, packet: &[u8]) -> Option<PacketInfo> {
        let key = self.flow_key(packet)?;
        if *packet.first()? & 0xf0 != FORM_ESTABLISH {
            return Some(PacketInfo {
                key,
                dscp: 0,
                tcp: None,
            });
        }
        let tcp = packet.get(IPV4..)?;
        let offset = usize::from(*tcp.get(12)? >> 4) * 4;
        let flags = *tcp.get(13)?;
        Some(PacketInfo {
            key,
            dscp: packet[1] >> 2,
            tcp: Some(TcpInfo {
                seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
                syn: flags & 0x02 != 0,
                fin: flags & 0x01 != 0,
                rst: flags & 0x04 != 0,
                payload_len: u32::try_from(tcp.len().saturating_sub(offset)).unwrap_or(0),
            }),
        })
    }

    /// The flow (IPv4 addresses, then ports) of the latest inner TCP retransmission restored
    /// from the establishing form, once: for [`Compressor::refresh_reverse`].
    pub fn take_established(&mut self) -> Option<[u8; 12]> {
        self.established.take()
    }

    /// Rebuilds `packet` in place into the inner packet it stands for. Packets in neither
    /// form (their first nibble is not 1 or 2: IP packets) are left as they are. Never
    /// panics, whatever the bytes.
    pub fn restore(&mut self, packet: &mut Vec<u8>) -> Result<(), RestoreError> {
        let r = match packet.first().map(|b| b & 0xf0) {
            Some(FORM_ESTABLISH) => self.establish(packet),
            Some(FORM_COMPRESSED | FORM_COMPRESSED_WIDE) => self.decompress(packet),
            _ => return Ok(()),
        };
        match r {
            Ok(()) => {}
            Err(RestoreError::UnknownContext) => self.stats.unknown_context += 1,
            Err(RestoreError::Failed) => self.stats.failed += 1,
        }
        r
    }

    fn establish(&mut self, p: &mut [u8]) -> Result<(), RestoreError> {
        if p[0] != FORM_ESTABLISH || p.len() < IPV4 + TCP || p.len() > usize::from(u16::MAX) {
            return Err(RestoreError::Failed);
        }
        let ctx = usize::from(p[2]);
        let retransmit = p[3] & EST_RETRANSMIT != 0;
        let generation = p[3] >> 1;
        p[0] = 0x45;
        let len = p.len() as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        let Some((st, refs, _)) = compressible(p) else {
            return Err(RestoreError::Failed);
        };
        if retransmit {
            self.established = Some(st.addrs);
        }
        let c = &mut self.table[ctx];
        // An establishing packet delivered late (after the hole timeout gave it up, a few
        // generations at most) must not take the context back to older references: one
        // up to 31 generations behind is old; anything else is taken as newer, so a
        // receiver that missed many establishing packets in a row still catches up.
        let newer = generation.wrapping_sub(c.generation) & 0x7f;
        if !c.used || (1..=96).contains(&newer) {
            let prev_refs = if c.used && c.st.addrs == st.addrs {
                c.refs
            } else {
                refs
            };
            *c = RxContext {
                used: true,
                st,
                refs,
                prev_refs,
                latest_seq: refs.seq,
                latest_ack: refs.ack,
                latest_ip_id: refs.ip_id,
                generation,
            };
        }
        Ok(())
    }

    fn decompress(&mut self, p: &mut Vec<u8>) -> Result<(), RestoreError> {
        let f = p[0] & 0x1f;
        if p.len() < COMPRESSED_MIN {
            return Err(RestoreError::Failed);
        }
        let ctx = p[1];
        let c = self.table[usize::from(ctx)];
        if !c.used {
            return Err(RestoreError::UnknownContext);
        }
        let mut n = 2;
        let mut field = |len: usize| -> Result<u32, RestoreError> {
            let b = p.get(n..n + len).ok_or(RestoreError::Failed)?;
            n += len;
            Ok(b.iter().fold(0u32, |v, &x| v << 8 | u32::from(x)))
        };
        let offset = if f & F_OFFSET != 0 {
            Some(field(1)? as u8)
        } else {
            None
        };
        let flags = field(1)? as u8;
        let number = |field: &mut dyn FnMut(usize) -> Result<u32, RestoreError>,
                      latest: u32|
         -> Result<u32, RestoreError> {
            if f & WIDE != 0 {
                field(4)
            } else {
                Ok(complete(field(3)?, latest))
            }
        };
        let seq = number(&mut field, c.latest_seq)?;
        let ack = if f & F_ACK != 0 {
            Some(number(&mut field, c.latest_ack)?)
        } else {
            None
        };
        let window = if f & F_WINDOW != 0 {
            Some(field(2)? as u16)
        } else {
            None
        };
        let ip_id = if f & F_IP_ID != 0 {
            field(2)? as u16
        } else {
            // The value with this low byte nearest the latest restored.
            let d = (field(1)? as u16).wrapping_sub(c.latest_ip_id) as u8 as i8;
            c.latest_ip_id.wrapping_add(d as i16 as u16)
        };
        let checksum = field(2)? as u16;
        let rest = p.len() - n;
        let total = IPV4 + TCP + rest;
        if total > usize::from(u16::MAX) || flags & URG != 0 {
            return Err(RestoreError::Failed);
        }
        p.resize(total, 0);
        p.copy_within(n..n + rest, IPV4 + TCP);
        // The fields left out are the context's references; a packet delivered late, after
        // an establishing packet that changed them, was compressed against the previous
        // ones: the checksum tells which.
        let mut tried = None;
        for r in [c.refs, c.prev_refs] {
            if tried == Some(r) {
                break;
            }
            tried = Some(r);
            let offset = offset.unwrap_or(r.offset);
            let off = usize::from(offset >> 4) * 4;
            if off < TCP || off - TCP > rest {
                continue;
            }
            let ack = ack.unwrap_or(r.ack);
            let ip = &mut p[..IPV4];
            ip[0] = 0x45;
            ip[1] = c.st.tos;
            ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
            ip[6..8].copy_from_slice(&c.st.frag.to_be_bytes());
            ip[8] = c.st.ttl;
            ip[9] = PROTO_TCP;
            ip[10..12].fill(0);
            ip[12..20].copy_from_slice(&c.st.addrs[..8]);
            let ipc = ip_checksum(ip);
            ip[10..12].copy_from_slice(&ipc.to_be_bytes());
            let tcp = &mut p[IPV4..IPV4 + TCP];
            tcp[..4].copy_from_slice(&c.st.addrs[8..]);
            tcp[4..8].copy_from_slice(&seq.to_be_bytes());
            tcp[8..12].copy_from_slice(&ack.to_be_bytes());
            tcp[12] = offset;
            tcp[13] = flags;
            tcp[14..16].copy_from_slice(&window.unwrap_or(r.window).to_be_bytes());
            tcp[16..18].copy_from_slice(&checksum.to_be_bytes());
            tcp[18..20].fill(0);
            if tcp_checksum_ok(p) {
                let latest = &mut self.table[usize::from(ctx)];
                latest.latest_seq = seq;
                latest.latest_ack = ack;
                latest.latest_ip_id = ip_id;
                self.stats.decompressed += 1;
                return Ok(());
            }
        }
        Err(RestoreError::Failed)
    }
}

#[cfg(test)]
mod tests;
