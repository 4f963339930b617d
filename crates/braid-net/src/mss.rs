//! TCP MSS clamping: a SYN crossing the tunnel has its maximum segment size lowered to
//! what fits the tunnel's MTU, so inner TCP never sends segments the tunnel would have to
//! drop (path MTU discovery is often broken by middleboxes on cellular networks). The
//! checksum is updated incrementally (RFC 1624).

/// Whether `p` is an IPv4 or IPv6 TCP segment with SYN set (IPv6 without extension headers).
pub fn is_tcp_syn(p: &[u8]) -> bool {
    tcp_offset(p).is_some_and(|t| p.get(t + 13).is_some_and(|f| f & 0x02 != 0))
}

/// The MSS for an inner MTU (IPv4: 20 bytes of IP, 20 of TCP).
pub fn mss_for_mtu(mtu: u16) -> u16 {
    mtu.saturating_sub(40)
}

/// Offset of the TCP header, if `p` is TCP.
fn tcp_offset(p: &[u8]) -> Option<usize> {
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let frag = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]) & 0x1fff;
            (ihl >= 20 && *p.get(9)? == 6 && frag == 0 && p.len() >= ihl + 20).then_some(ihl)
        }
        6 => (*p.get(6)? == 6 && p.len() >= 60).then_some(40),
        _ => None,
    }
}

/// Lowers the MSS option of a SYN to `mss` (less 20 for IPv6's larger header); returns
/// whether it changed.
pub fn clamp(p: &mut [u8], mss: u16) -> bool {
    let Some(t) = tcp_offset(p) else {
        return false;
    };
    let limit = if p[0] >> 4 == 6 {
        mss.saturating_sub(20)
    } else {
        mss
    };
    let data_off = usize::from(p[t + 12] >> 4) * 4;
    let end = (t + data_off).min(p.len());
    let mut i = t + 20;
    while i < end {
        match p[i] {
            0 => return false,
            1 => i += 1,
            kind => {
                let Some(&len) = p.get(i + 1) else {
                    return false;
                };
                let len = usize::from(len);
                if len < 2 || i + len > end {
                    return false;
                }
                if kind == 2 && len == 4 {
                    let old = u16::from_be_bytes([p[i + 2], p[i + 3]]);
                    if old <= limit {
                        return false;
                    }
                    p[i + 2..i + 4].copy_from_slice(&limit.to_be_bytes());
                    let sum = u16::from_be_bytes([p[t + 16], p[t + 17]]);
                    let new = checksum_update(sum, old, limit);
                    p[t + 16..t + 18].copy_from_slice(&new.to_be_bytes());
                    return true;
                }
                i += len;
            }
        }
    }
    false
}

/// RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`.
fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut s = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One's-complement sum over the TCP pseudo-header and segment, as a receiver checks it.
    fn tcp_checksum_ok(p: &[u8]) -> bool {
        let t = 20;
        let len = p.len() - t;
        let mut s: u32 = 0;
        let mut add = |b: &[u8]| {
            for c in b.chunks(2) {
                s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
        };
        add(&p[12..20]);
        add(&[0, 6]);
        add(&(len as u16).to_be_bytes());
        add(&p[t..]);
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s == 0xffff
    }

    fn syn(mss: u16) -> Vec<u8> {
        let mut p = vec![0u8; 20 + 24];
        p[0] = 0x45;
        p[3] = 44;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&1234u16.to_be_bytes());
        p[22..24].copy_from_slice(&80u16.to_be_bytes());
        p[32] = 6 << 4;
        p[33] = 0x02;
        p[40..44].copy_from_slice(&[2, 4, (mss >> 8) as u8, mss as u8]);
        // Checksum.
        let mut s: u32 = 0;
        let mut add = |b: &[u8]| {
            for c in b.chunks(2) {
                s += u32::from(u16::from_be_bytes([c[0], c[1]]));
            }
        };
        add(&p[12..20]);
        add(&[0, 6, 0, 24]);
        add(&p[20..]);
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        let c = !(s as u16);
        p[36..38].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn a_large_mss_is_lowered_and_the_checksum_stays_valid() {
        let mut p = syn(1460);
        assert!(tcp_checksum_ok(&p));
        assert!(is_tcp_syn(&p));
        assert!(clamp(&mut p, 1340));
        assert_eq!(u16::from_be_bytes([p[42], p[43]]), 1340);
        assert!(tcp_checksum_ok(&p));
    }

    #[test]
    fn a_small_mss_and_other_packets_are_left_alone() {
        let mut p = syn(1200);
        let before = p.clone();
        assert!(!clamp(&mut p, 1340));
        assert_eq!(p, before);
        let mut udp = syn(1460);
        udp[9] = 17;
        assert!(!is_tcp_syn(&udp));
        assert!(!clamp(&mut udp, 1340));
        for n in 0..44 {
            let mut short = syn(1460)[..n].to_vec();
            clamp(&mut short, 1000);
            let _ = is_tcp_syn(&short);
        }
    }
}
