//! Overheard frames as a monitor-mode interface captures them (BaPu §3.1, "Packet
//! Overhearing" and "Packet Identification"): a radiotap header, an IEEE 802.11 data frame
//! from a station to its AP, LLC/SNAP, the IP packet. BaPu's APs capture in monitor mode
//! and write "a frame parser for the packet's MAC header to obtain the BSSID"; this is
//! that parser, with the checks a capture needs: a frame whose FCS is bad (by the
//! driver's flag or by its own CRC) is refused, as are encrypted, fragmented and
//! non-data frames and frames that are not station-to-AP (only those carry a sender's
//! upload). Zero-copy and never panics (fuzzed below).
//!
//! Radiotap: <https://www.radiotap.org> (version 0; fields aligned to their size from the
//! header's start, bit 31 of a presence word announcing another). IEEE 802.11-2020 §9.2
//! (MAC frame format) and §9.3.2.1 (data frames).

use crc::{Crc, CRC_32_ISO_HDLC};

/// The 802.11 FCS: CRC-32 as Ethernet's, sent least significant byte first.
const FCS: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);

/// Radiotap `flags` (field 1) bits.
const RT_FLAG_FCS_AT_END: u8 = 0x10;
const RT_FLAG_BAD_FCS: u8 = 0x40;

/// Frame control, second byte.
const FC_TO_DS: u8 = 0x01;
const FC_FROM_DS: u8 = 0x02;
const FC_MORE_FRAGMENTS: u8 = 0x04;
const FC_RETRY: u8 = 0x08;
const FC_PROTECTED: u8 = 0x40;
const FC_ORDER: u8 = 0x80;

/// Frame type 2: data; subtype bit 3: QoS; bit 2: no data (null frames).
const TYPE_DATA: u8 = 2;
const SUBTYPE_QOS: u8 = 0x8;
const SUBTYPE_NO_DATA: u8 = 0x4;

/// LLC/SNAP header before the EtherType (RFC 1042).
const SNAP: [u8; 6] = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00];
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// One overheard frame's upload: who sent it to which AP, and the IP packet it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UplinkFrame<'a> {
    /// The AP the station sent it to (address 1 of a to-DS frame).
    pub bssid: [u8; 6],
    /// The sending station (address 2).
    pub source: [u8; 6],
    /// The frame's final destination (address 3).
    pub destination: [u8; 6],
    /// A MAC retransmission (the retry bit): its IP ID repeats an earlier frame's.
    pub retry: bool,
    /// The 12-bit sequence number.
    pub sequence: u16,
    /// The received signal, dBm, when the radiotap header has it.
    pub signal_dbm: Option<i8>,
    /// The IPv4 or IPv6 packet.
    pub packet: &'a [u8],
}

/// Why a captured frame carries no upload to bunch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("cut short")]
    Truncated,
    #[error("radiotap version {0} (0 is known)")]
    RadiotapVersion(u8),
    #[error("radiotap length {0} shorter than its fields")]
    RadiotapLength(u16),
    #[error("bad FCS")]
    BadFcs,
    #[error("802.11 protocol version {0}")]
    ProtocolVersion(u8),
    #[error("not a data frame with data")]
    NotData,
    #[error("not from a station to its AP")]
    NotUplink,
    #[error("encrypted")]
    Protected,
    #[error("a fragment")]
    Fragment,
    #[error("not LLC/SNAP IPv4 or IPv6")]
    NotIp,
}

/// Reads a frame as a monitor interface of link type `IEEE802_11_RADIOTAP` (Linux's
/// `ARPHRD_IEEE80211_RADIOTAP`, 803) gives it.
pub fn parse_radiotap(frame: &[u8]) -> Result<UplinkFrame<'_>, FrameError> {
    let (flags, signal_dbm, mac) = radiotap(frame)?;
    if flags & RT_FLAG_BAD_FCS != 0 {
        return Err(FrameError::BadFcs);
    }
    let mut f = parse_80211(mac, flags & RT_FLAG_FCS_AT_END != 0)?;
    f.signal_dbm = signal_dbm;
    Ok(f)
}

/// Reads an 802.11 frame, with its 4-byte FCS at the end when `fcs` (checked).
pub fn parse_80211(frame: &[u8], fcs: bool) -> Result<UplinkFrame<'_>, FrameError> {
    let frame = if fcs {
        let (body, sum) = frame.split_last_chunk::<4>().ok_or(FrameError::Truncated)?;
        if FCS.checksum(body) != u32::from_le_bytes(*sum) {
            return Err(FrameError::BadFcs);
        }
        body
    } else {
        frame
    };
    let [fc0, fc1] = *frame.first_chunk::<2>().ok_or(FrameError::Truncated)?;
    if fc0 & 0x3 != 0 {
        return Err(FrameError::ProtocolVersion(fc0 & 0x3));
    }
    let (kind, subtype) = ((fc0 >> 2) & 0x3, fc0 >> 4);
    if kind != TYPE_DATA || subtype & SUBTYPE_NO_DATA != 0 {
        return Err(FrameError::NotData);
    }
    if fc1 & (FC_TO_DS | FC_FROM_DS) != FC_TO_DS {
        return Err(FrameError::NotUplink);
    }
    if fc1 & FC_PROTECTED != 0 {
        return Err(FrameError::Protected);
    }
    // Frame control, duration, three addresses, sequence control.
    let mut at = 24;
    let header = frame.get(..at).ok_or(FrameError::Truncated)?;
    let addr = |i: usize| -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&header[4 + 6 * i..10 + 6 * i]);
        a
    };
    let seq_ctrl = u16::from_le_bytes([header[22], header[23]]);
    if fc1 & FC_MORE_FRAGMENTS != 0 || seq_ctrl & 0xf != 0 {
        return Err(FrameError::Fragment);
    }
    if subtype & SUBTYPE_QOS != 0 {
        at += 2;
        // A QoS frame with the order bit has an HT control field.
        if fc1 & FC_ORDER != 0 {
            at += 4;
        }
    }
    let body = frame.get(at..).ok_or(FrameError::Truncated)?;
    let packet = match body.split_first_chunk::<8>() {
        Some((llc, packet)) if llc[..6] == SNAP => match u16::from_be_bytes([llc[6], llc[7]]) {
            ETHERTYPE_IPV4 if packet.first().is_some_and(|b| b >> 4 == 4) => packet,
            ETHERTYPE_IPV6 if packet.first().is_some_and(|b| b >> 4 == 6) => packet,
            _ => return Err(FrameError::NotIp),
        },
        Some(_) => return Err(FrameError::NotIp),
        None => return Err(FrameError::Truncated),
    };
    Ok(UplinkFrame {
        bssid: addr(0),
        source: addr(1),
        destination: addr(2),
        retry: fc1 & FC_RETRY != 0,
        sequence: seq_ctrl >> 4,
        signal_dbm: None,
        packet,
    })
}

/// The radiotap header's flags and antenna signal, and the 802.11 frame after it.
fn radiotap(frame: &[u8]) -> Result<(u8, Option<i8>, &[u8]), FrameError> {
    let head = frame.first_chunk::<8>().ok_or(FrameError::Truncated)?;
    if head[0] != 0 {
        return Err(FrameError::RadiotapVersion(head[0]));
    }
    let len = u16::from_le_bytes([head[2], head[3]]);
    let header = frame.get(..usize::from(len)).ok_or(FrameError::Truncated)?;
    let present = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    // Further presence words follow while bit 31 is set; the fields start after them.
    let mut at = 8;
    let mut word = present;
    while word & (1 << 31) != 0 {
        let next = header
            .get(at..at + 4)
            .ok_or(FrameError::RadiotapLength(len))?;
        word = u32::from_le_bytes([next[0], next[1], next[2], next[3]]);
        at += 4;
    }
    // The first namespace's fields up to the antenna signal (bit 5), in bit order, each
    // aligned to its alignment: TSFT u64, flags u8, rate u8, channel 2 x u16, FHSS 2 x u8,
    // antenna signal i8.
    const FIELDS: [(usize, usize); 6] = [(8, 8), (1, 1), (1, 1), (2, 4), (1, 2), (1, 1)];
    let (mut flags, mut signal) = (0, None);
    for (bit, &(align, size)) in FIELDS.iter().enumerate() {
        if present & (1 << bit) == 0 {
            continue;
        }
        at = at.next_multiple_of(align);
        let field = header
            .get(at..at + size)
            .ok_or(FrameError::RadiotapLength(len))?;
        match bit {
            1 => flags = field[0],
            5 => signal = Some(field[0] as i8),
            _ => {}
        }
        at += size;
    }
    Ok((flags, signal, &frame[usize::from(len)..]))
}

/// A station's to-DS data frame carrying `packet` (QoS data, LLC/SNAP), with a radiotap
/// header giving the flags (and the FCS at the end when `fcs`) and the signal: what a
/// monitor interface captures of a station's upload. For tests and the simulator.
pub fn build_uplink(
    bssid: [u8; 6],
    source: [u8; 6],
    destination: [u8; 6],
    sequence: u16,
    retry: bool,
    fcs: bool,
    packet: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(12 + 26 + 8 + packet.len() + 4);
    // Radiotap: version, pad, length 12, present = flags | antenna signal; flags at 8,
    // signal at 9, padded to 12.
    f.extend_from_slice(&[0, 0, 12, 0]);
    f.extend_from_slice(&((1u32 << 1) | (1 << 5)).to_le_bytes());
    f.push(if fcs { RT_FLAG_FCS_AT_END } else { 0 });
    f.push((-50i8) as u8);
    f.extend_from_slice(&[0, 0]);
    let mac = f.len();
    f.push((TYPE_DATA << 2) | (SUBTYPE_QOS << 4));
    f.push(FC_TO_DS | if retry { FC_RETRY } else { 0 });
    f.extend_from_slice(&[0, 0]);
    for a in [bssid, source, destination] {
        f.extend_from_slice(&a);
    }
    f.extend_from_slice(&((sequence & 0xfff) << 4).to_le_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&SNAP);
    let ethertype = if packet.first().is_some_and(|b| b >> 4 == 6) {
        ETHERTYPE_IPV6
    } else {
        ETHERTYPE_IPV4
    };
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(packet);
    if fcs {
        let sum = FCS.checksum(&f[mac..]);
        f.extend_from_slice(&sum.to_le_bytes());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const AP: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const STA: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const GW: [u8; 6] = [2, 0, 0, 0, 0, 3];

    fn ipv4() -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[9] = 17;
        p
    }

    #[test]
    fn an_uplink_frame_reads_back_with_and_without_its_fcs() {
        let p = ipv4();
        for fcs in [false, true] {
            let f = build_uplink(AP, STA, GW, 0x123, true, fcs, &p);
            let u = parse_radiotap(&f).unwrap();
            assert_eq!((u.bssid, u.source, u.destination), (AP, STA, GW));
            assert!(u.retry);
            assert_eq!(u.sequence, 0x123);
            assert_eq!(u.signal_dbm, Some(-50));
            assert_eq!(u.packet, &p[..]);
        }
    }

    #[test]
    fn a_damaged_or_foreign_frame_is_refused_with_its_reason() {
        let p = ipv4();
        let good = build_uplink(AP, STA, GW, 1, false, true, &p);
        let mac = 12;
        let with = |at: usize, f: &dyn Fn(&mut u8)| {
            let mut b = good.clone();
            f(&mut b[at]);
            parse_radiotap(&b).map(|_| ())
        };
        // A flipped bit in the payload fails the FCS; so does the driver's bad-FCS flag.
        assert_eq!(with(good.len() - 10, &|b| *b ^= 1), Err(FrameError::BadFcs));
        assert_eq!(with(0, &|_| {}), Ok(()));
        assert_eq!(with(8, &|b| *b |= RT_FLAG_BAD_FCS), Err(FrameError::BadFcs));
        let plain = build_uplink(AP, STA, GW, 1, false, false, &p);
        let edit = |at: usize, f: &dyn Fn(&mut u8)| {
            let mut b = plain.clone();
            f(&mut b[at]);
            parse_radiotap(&b).map(|_| ())
        };
        assert_eq!(edit(0, &|b| *b = 1), Err(FrameError::RadiotapVersion(1)));
        // A management frame; a null frame; from the AP; encrypted; a fragment.
        assert_eq!(edit(mac, &|b| *b = 0x80), Err(FrameError::NotData));
        assert_eq!(edit(mac, &|b| *b |= 0x40), Err(FrameError::NotData));
        assert_eq!(
            edit(mac + 1, &|b| *b = FC_FROM_DS),
            Err(FrameError::NotUplink)
        );
        assert_eq!(
            edit(mac + 1, &|b| *b |= FC_PROTECTED),
            Err(FrameError::Protected)
        );
        assert_eq!(edit(mac + 22, &|b| *b |= 1), Err(FrameError::Fragment));
        assert_eq!(edit(mac + 26, &|b| *b = 0), Err(FrameError::NotIp));
        // Not what the EtherType says.
        assert_eq!(edit(mac + 34, &|b| *b = 0x60), Err(FrameError::NotIp));
        assert_eq!(
            parse_radiotap(&plain[..mac + 20]).map(|_| ()),
            Err(FrameError::Truncated)
        );
        // A radiotap length past the frame.
        assert_eq!(edit(2, &|b| *b = 200), Err(FrameError::Truncated));
        assert_eq!(with(2, &|b| *b = 9), Err(FrameError::RadiotapLength(9)));
    }

    #[test]
    fn extended_presence_words_and_a_tsft_are_skipped() {
        let p = ipv4();
        let inner = build_uplink(AP, STA, GW, 7, false, false, &p);
        // Present: TSFT, flags, signal, and a second presence word (bit 31) with nothing.
        let mut f = vec![0, 0, 0, 0];
        f.extend_from_slice(&(1u32 | 2 | 1 << 5 | 1 << 31).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&[0xee; 8]); // TSFT, at 12 -> aligned to 16
        f.splice(12..12, [0; 4]);
        f.push(0); // flags
        f.push((-70i8) as u8);
        let len = f.len() as u16;
        f[2..4].copy_from_slice(&len.to_le_bytes());
        f.extend_from_slice(&inner[12..]);
        let u = parse_radiotap(&f).unwrap();
        assert_eq!((u.signal_dbm, u.sequence, u.packet), (Some(-70), 7, &p[..]));
    }

    proptest! {
        #[test]
        fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_radiotap(&bytes);
            let _ = parse_80211(&bytes, true);
            let _ = parse_80211(&bytes, false);
        }

        #[test]
        fn never_panics_on_mutated_frames(
            flips in proptest::collection::vec(any::<(usize, u8)>(), 1..4),
            cut in any::<usize>(),
            fcs in any::<bool>(),
        ) {
            let mut b = build_uplink(AP, STA, GW, 9, false, fcs, &ipv4());
            for (at, x) in flips {
                let at = at % b.len();
                b[at] ^= x;
            }
            let _ = parse_radiotap(&b);
            b.truncate(cut % (b.len() + 1));
            let _ = parse_radiotap(&b);
        }
    }
}
