//! The negative ACK RPC ships to the sender (PRISM §6.2.1): the lost segment's sequence
//! number and the lossy link's share of the bandwidth, in a TCP option of an ACK made
//! from the one that revealed the loss.
//!
//! The option is an experimental one (kind 253, RFC 6994) with braid's experiment id:
//! `253, 15, 0x50 0x52 ('P' 'R'), seq (4), len (4), share (2, in 1/65535), link (1)`. A sender that
//! does not know it skips it by its length (RFC 9293 §3.1) and sees one more duplicate
//! ACK, which in LOSS state (where RPC releases every duplicate) changes nothing;
//! TCP-PRISM (the simulator's `tcp_cc = "prism"`) retransmits `seq` at once and cuts its
//! window by `share` only (§6.2.2). A `len` of 0 says the tunnel repairs the loss
//! itself: the window is cut, nothing is resent.

use super::segment::{self, Segment};
use super::LossEvent;
use crate::checksum;

/// RFC 6994's shared experimental option kind.
pub const KIND_EXPERIMENT: u8 = 253;
/// braid's experiment id for the PRISM negative ACK.
pub const EXID: [u8; 2] = *b"PR";
/// Length of the option.
pub const LEN: usize = 15;

/// What a NACK option says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Nack {
    pub seq: u32,
    /// 0: the tunnel repairs it, congestion only.
    pub len: u32,
    /// The lossy link's share of the bandwidth, `p` in §6.2.1, in `[0, 1]`.
    pub share: f64,
    /// The lossy link, so that a sender cuts once per link and loss episode.
    pub link: u8,
}

/// The option's bytes.
pub fn encode(n: &Nack) -> [u8; LEN] {
    let mut o = [0u8; LEN];
    o[0] = KIND_EXPERIMENT;
    o[1] = LEN as u8;
    o[2..4].copy_from_slice(&EXID);
    o[4..8].copy_from_slice(&n.seq.to_be_bytes());
    o[8..12].copy_from_slice(&n.len.to_be_bytes());
    let share = (n.share.clamp(0.0, 1.0) * 65535.0).round() as u16;
    o[12..14].copy_from_slice(&share.to_be_bytes());
    o[14] = n.link;
    o
}

/// Finds a NACK in a TCP options area; total on any input.
pub fn find(opts: &[u8]) -> Option<Nack> {
    let mut at = 0;
    while let Some(&kind) = opts.get(at) {
        match kind {
            0 => return None,
            1 => at += 1,
            _ => {
                let len = usize::from(*opts.get(at + 1)?);
                if len < 2 || at + len > opts.len() {
                    return None;
                }
                let o = &opts[at..at + len];
                if kind == KIND_EXPERIMENT && len == LEN && o[2..4] == EXID {
                    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                    return Some(Nack {
                        seq: be(&o[4..8]),
                        len: be(&o[8..12]),
                        share: f64::from(u16::from_be_bytes([o[12], o[13]])) / 65535.0,
                        link: o[14],
                    });
                }
                at += len;
            }
        }
    }
    None
}

/// A pure ACK to the sender carrying `ev`, made from `template` (an ACK of the flow,
/// parsed as `seg`): same addresses, ports, window; acknowledging `ack` with TSval
/// `tsval` where the template has timestamps; SACK left out. Checksums are computed.
pub fn packet(
    template: &[u8],
    seg: &Segment,
    ev: &LossEvent,
    ack: u32,
    tsval: Option<u32>,
) -> Vec<u8> {
    let mut opts = Vec::with_capacity(28);
    if let Some((own, ecr)) = seg.options.timestamps {
        opts.extend_from_slice(&[1, 1, 8, 10]);
        opts.extend_from_slice(&tsval.unwrap_or(own).to_be_bytes());
        opts.extend_from_slice(&ecr.to_be_bytes());
    }
    opts.extend_from_slice(&encode(&Nack {
        seq: ev.seq,
        len: ev.len,
        share: ev.share,
        link: ev.link,
    }));
    while !opts.len().is_multiple_of(4) {
        opts.push(1);
    }
    let tcp_at = seg.tcp_at;
    let mut p = Vec::with_capacity(tcp_at + 20 + opts.len());
    p.extend_from_slice(&template[..tcp_at + 20]);
    p.extend_from_slice(&opts);
    let tcp_len = 20 + opts.len();
    // Data offset, flags: a pure ACK.
    p[tcp_at + 12] = ((tcp_len / 4) as u8) << 4;
    p[tcp_at + 13] = 0x10;
    p[tcp_at + 8..tcp_at + 12].copy_from_slice(&ack.to_be_bytes());
    p[tcp_at + 18..tcp_at + 20].fill(0);
    if p[0] >> 4 == 4 {
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[10..12].fill(0);
        let sum = !checksum::fold(checksum::sum(&p[..tcp_at], 0));
        p[10..12].copy_from_slice(&sum.to_be_bytes());
    } else {
        let payload = (p.len() - 40) as u16;
        p[4..6].copy_from_slice(&payload.to_be_bytes());
    }
    p[tcp_at + 16..tcp_at + 18].fill(0);
    let sum = !segment::tcp_sum(&p, tcp_at);
    p[tcp_at + 16..tcp_at + 18].copy_from_slice(&sum.to_be_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::super::options::{encode as encode_opts, SackBlock};
    use super::*;
    use crate::Instant;

    #[test]
    fn nack_packets_parse_with_correct_checksums_on_v4_and_v6() {
        for v6 in [false, true] {
            let ts = Some((7, 9));
            let sack = [SackBlock {
                left: 3000,
                right: 4000,
            }];
            let ack = segment::build(v6, 1, Some(1000), &encode_opts(ts, &sack), 0);
            let seg = segment::parse(&ack).unwrap();
            let ev = LossEvent {
                flow: seg.key.reversed(),
                link: 2,
                seq: 1000,
                len: 1448,
                share: 0.25,
                at: Instant::ZERO,
            };
            let p = packet(&ack, &seg, &ev, 1000, Some(11));
            let back = segment::parse(&p).unwrap();
            assert_eq!(back.key, seg.key);
            assert_eq!(back.ack, Some(1000));
            assert_eq!(back.payload_len, 0);
            assert_eq!(back.options.timestamps, Some((11, 9)));
            assert!(back.options.sack().is_empty());
            assert_eq!(segment::tcp_sum(&p, back.tcp_at), 0xffff);
            if !v6 {
                assert_eq!(checksum::fold(checksum::sum(&p[..20], 0)), 0xffff);
            }
            let n = find(&p[back.options_at..]).unwrap();
            assert_eq!((n.seq, n.len, n.link), (1000, 1448, 2));
            assert!((n.share - 0.25).abs() < 1e-4);
        }
    }

    #[test]
    fn find_is_total_and_skips_other_options() {
        assert_eq!(find(&[]), None);
        assert_eq!(find(&[253]), None);
        assert_eq!(find(&[253, 1, 0]), None);
        assert_eq!(
            find(&[253, 15, b'X', b'Y', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None
        );
        let mut o = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        o.extend_from_slice(&encode(&Nack {
            seq: 5,
            len: 6,
            share: 1.0,
            link: 3,
        }));
        let n = find(&o).map(|n| (n.seq, n.len, n.share, n.link));
        assert_eq!(n, Some((5, 6, 1.0, 3)));
    }
}
