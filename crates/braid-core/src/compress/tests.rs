use proptest::prelude::*;

use super::*;

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

/// A TCP segment's fields, for building real IPv4/TCP packets with valid checksums.
#[derive(Clone)]
struct Seg {
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    ip_id: u16,
    ttl: u8,
    options: Vec<u8>,
    payload: Vec<u8>,
}

fn seg() -> Seg {
    Seg {
        src: [10, 0, 0, 2],
        dst: [192, 0, 2, 7],
        sport: 40000,
        dport: 443,
        seq: 1000,
        ack: 5000,
        flags: ACK,
        window: 502,
        ip_id: 7,
        ttl: 64,
        options: Vec::new(),
        payload: Vec::new(),
    }
}

impl Seg {
    fn packet(&self) -> Vec<u8> {
        assert_eq!(self.options.len() % 4, 0);
        let tcp_len = TCP + self.options.len() + self.payload.len();
        let total = IPV4 + tcp_len;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
        p[6] = 0x40;
        p[8] = self.ttl;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&self.src);
        p[16..20].copy_from_slice(&self.dst);
        let c = ip_checksum(&p);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let t = &mut p[IPV4..];
        t[0..2].copy_from_slice(&self.sport.to_be_bytes());
        t[2..4].copy_from_slice(&self.dport.to_be_bytes());
        t[4..8].copy_from_slice(&self.seq.to_be_bytes());
        t[8..12].copy_from_slice(&self.ack.to_be_bytes());
        t[12] = (((TCP + self.options.len()) / 4) as u8) << 4;
        t[13] = self.flags;
        t[14..16].copy_from_slice(&self.window.to_be_bytes());
        t[TCP..TCP + self.options.len()].copy_from_slice(&self.options);
        t[TCP + self.options.len()..].copy_from_slice(&self.payload);
        let acc = sum(&p[12..20], 0) + u64::from(PROTO_TCP) + tcp_len as u64;
        let c = !fold(sum(&p[IPV4..], acc));
        p[IPV4 + 16..IPV4 + 18].copy_from_slice(&c.to_be_bytes());
        assert!(tcp_checksum_ok(&p));
        p
    }
}

/// SYN options as Linux lays them out: MSS, SACK-permitted, timestamps, NOP, window scale.
fn syn_options() -> Vec<u8> {
    vec![
        2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 1, 0, 0, 0, 0, 0, 1, 3, 3, 7,
    ]
}

fn timestamps(val: u32, ecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&val.to_be_bytes());
    o.extend_from_slice(&ecr.to_be_bytes());
    o
}

fn sack(blocks: &[(u32, u32)]) -> Vec<u8> {
    let mut o = vec![1, 1, 5, (2 + 8 * blocks.len()) as u8];
    for (l, r) in blocks {
        o.extend_from_slice(&l.to_be_bytes());
        o.extend_from_slice(&r.to_be_bytes());
    }
    o
}

/// Compresses `p` as data packet `seq` and checks that it comes back intact.
fn round_trip(c: &mut Compressor, d: &mut Decompressor, seq: u32, p: &[u8]) -> usize {
    let mut b = p.to_vec();
    c.compress(seq, &mut b);
    let sent = b.len();
    assert!(sent <= p.len());
    d.restore(&mut b).expect("restores");
    assert_eq!(b, p);
    sent
}

#[test]
fn a_flow_is_established_in_full_then_compressed_once_acknowledged() {
    let (mut c, mut d) = (Compressor::default(), Decompressor::default());
    let mut s = seg();
    s.flags = SYN;
    s.options = syn_options();
    let syn = s.packet();
    let mut b = syn.clone();
    c.compress(0, &mut b);
    assert_eq!(b.len(), syn.len(), "the establishing form costs nothing");
    assert_eq!(b[0], FORM_ESTABLISH);
    d.restore(&mut b).unwrap();
    assert_eq!(b, syn);
    // Not yet acknowledged: still establishing.
    s.flags = ACK;
    s.options.clear();
    s.seq = 1001;
    let p = s.packet();
    let mut b = p.clone();
    c.compress(1, &mut b);
    assert_eq!(b[0], FORM_ESTABLISH);
    d.restore(&mut b).unwrap();
    assert_eq!(b, p);
    c.on_ack(0);
    // The second segment after the SYN still establishes: two in a row agree on the
    // references.
    let mut b = p.clone();
    c.compress(2, &mut b);
    assert_eq!(b[0], FORM_ESTABLISH);
    d.restore(&mut b).unwrap();
    assert_eq!(b, p);
    s.payload = vec![0xab; 1360];
    s.flags = ACK | PSH;
    let p = s.packet();
    // Same ack and window as the context's reference, the IP id's low byte: 9 bytes
    // instead of 40.
    assert_eq!(round_trip(&mut c, &mut d, 3, &p), p.len() - 31);
    s.ip_id = 8;
    s.ack = 5100;
    s.window = 400;
    s.seq = 2361;
    let p = s.packet();
    // The low 3 bytes of the ack, the window: 14 bytes.
    assert_eq!(round_trip(&mut c, &mut d, 4, &p), p.len() - 26);
    // Far from the references: absolute sequence and acknowledgement numbers.
    s.seq = 1001 + (1 << 24);
    s.ack = 4000;
    let p = s.packet();
    let mut b = p.clone();
    c.compress(5, &mut b);
    assert_eq!(b[0] & 0xf0, FORM_COMPRESSED_WIDE);
    assert_eq!(b.len(), p.len() - 24);
    d.restore(&mut b).unwrap();
    assert_eq!(b, p);
    assert_eq!(c.stats.compressed, 3);
    assert_eq!(c.stats.establishing, 3);
    assert_eq!(c.stats.bytes_saved, 31 + 26 + 24);
    assert_eq!(d.stats.decompressed, 3);
}

fn established() -> (Compressor, Decompressor, Seg) {
    let (mut c, mut d) = (Compressor::default(), Decompressor::default());
    let mut s = seg();
    s.flags = SYN | ACK;
    s.options = syn_options();
    round_trip(&mut c, &mut d, 0, &s.packet());
    c.on_ack(0);
    s.flags = ACK;
    s.options.clear();
    s.seq += 1;
    // The first two segments after the SYN set the references for the rest.
    for seq in 1..3 {
        let mut b = s.packet();
        c.compress(seq, &mut b);
        assert_eq!(b[0], FORM_ESTABLISH);
        d.restore(&mut b).unwrap();
    }
    (c, d, s)
}

#[test]
fn timestamps_and_sack_blocks_travel_verbatim() {
    let (mut c, mut d, mut s) = established();
    for i in 0..20u32 {
        s.ack = 6000 + 1000 * i;
        s.options = timestamps(100 + i, 9000 + i);
        if i % 3 == 0 {
            s.options.extend(sack(&[
                (s.ack + 2000, s.ack + 3000),
                (s.ack + 5000, s.ack + 6000),
            ]));
        }
        let p = s.packet();
        let sent = round_trip(&mut c, &mut d, 1 + i, &p);
        assert!(sent < p.len(), "ack {i} compressed");
    }
}

#[test]
fn fin_rst_and_retransmissions_travel_in_the_establishing_form() {
    let (mut c, mut d, mut s) = established();
    s.payload = vec![1; 500];
    let first = s.packet();
    assert!(round_trip(&mut c, &mut d, 1, &first) < first.len());
    s.seq += 500;
    assert!(round_trip(&mut c, &mut d, 2, &s.packet()) < first.len());
    // The first segment again: a retransmission, marked as one.
    let mut b = first.clone();
    c.compress(3, &mut b);
    assert_eq!(b[0], FORM_ESTABLISH);
    assert_eq!(b[3] & EST_RETRANSMIT, EST_RETRANSMIT);
    d.restore(&mut b).unwrap();
    assert_eq!(b, first);
    // The receiving end's next acknowledgement of the flow travels in full: its context
    // may be what the peer missed.
    let flow = d.take_established().expect("a retransmission");
    assert_eq!(d.take_established(), None);
    let (mut rc, mut rd) = (Compressor::default(), Decompressor::default());
    let mut r = seg();
    (r.src, r.dst, r.sport, r.dport) = (s.dst, s.src, s.dport, s.sport);
    r.flags = SYN | ACK;
    round_trip(&mut rc, &mut rd, 0, &r.packet());
    rc.on_ack(5);
    r.flags = ACK;
    r.seq += 1;
    // The first two after the SYN-ACK set the references, the fourth follows the refresh.
    for i in 1..6 {
        r.ack += 100;
        let mut b = r.packet();
        rc.compress(i, &mut b);
        let compressed = b[0] & 0xf0 == FORM_COMPRESSED;
        assert_eq!(compressed, i == 3 || i == 5, "ack {i}");
        if i == 3 {
            rc.refresh_reverse(&flow);
        }
    }
    for flags in [FIN | ACK, RST] {
        s.flags = flags;
        s.payload.clear();
        let p = s.packet();
        let mut b = p.clone();
        c.compress(4, &mut b);
        assert_eq!(b[0], FORM_ESTABLISH, "flags {flags:#x}");
        d.restore(&mut b).unwrap();
        assert_eq!(b, p);
    }
}

#[test]
fn compressed_packets_restore_in_any_order() {
    let (mut c, mut d, mut s) = established();
    let mut originals = Vec::new();
    let mut sent = Vec::new();
    for i in 0..50u32 {
        s.seq = 1001 + 1000 * i;
        s.ip_id = 7 + i as u16;
        s.ack = 5000 + (i / 7) * 10;
        s.payload = vec![i as u8; 1000];
        let p = s.packet();
        let mut b = p.clone();
        c.compress(1 + i, &mut b);
        originals.push(p);
        sent.push(b);
    }
    assert!(sent
        .iter()
        .all(|b| b[0] & 0xf0 == FORM_COMPRESSED || b[0] == FORM_ESTABLISH));
    // A fixed permutation (the order of a multipath arrival), and some lost.
    let mut order: Vec<usize> = (0..50).collect();
    order.reverse();
    order.swap(3, 40);
    for &i in order.iter().filter(|&&i| i % 11 != 5) {
        let mut b = sent[i].clone();
        d.restore(&mut b).unwrap();
        assert_eq!(b, originals[i], "packet {i}");
    }
    assert_eq!(d.stats.unknown_context + d.stats.failed, 0);
}

#[test]
fn a_compressed_packet_of_an_unknown_context_is_counted() {
    let (mut c, _, mut s) = established();
    s.payload = vec![3; 100];
    let mut b = s.packet();
    c.compress(1, &mut b);
    assert_eq!(b[0] & 0xf0, FORM_COMPRESSED);
    let mut fresh = Decompressor::default();
    assert_eq!(fresh.restore(&mut b), Err(RestoreError::UnknownContext));
    assert_eq!(fresh.stats.unknown_context, 1);
}

#[test]
fn a_context_reused_for_another_flow_fails_the_checksum_rather_than_mislead() {
    let (mut c, mut d, mut s) = established();
    s.payload = vec![5; 200];
    let mut late = s.packet();
    c.compress(1, &mut late);
    assert_eq!(late[0] & 0xf0, FORM_COMPRESSED);
    let ctx = late[1];
    // More flows than the table holds: the first flow's context is reused.
    let mut reused = false;
    for port in 1..2000u16 {
        let mut other = seg();
        other.sport = port;
        other.flags = SYN;
        let mut b = other.packet();
        c.compress(1 + u32::from(port), &mut b);
        if b[2] == ctx {
            d.restore(&mut b).unwrap();
            reused = true;
            break;
        }
    }
    assert!(reused, "the table never reused the context");
    assert_eq!(d.restore(&mut late), Err(RestoreError::Failed));
    assert_eq!(d.stats.failed, 1);
}

#[test]
fn the_table_evicts_the_least_recently_used_flow_and_stays_bounded() {
    let mut c = Compressor::default();
    for port in 0..3000u16 {
        let mut s = seg();
        s.sport = port;
        let mut b = s.packet();
        c.compress(u32::from(port), &mut b);
        assert_eq!(b[0], FORM_ESTABLISH);
    }
    assert!(c.table.iter().all(|t| t.used));
    // The most recent flow is still there.
    let mut s = seg();
    s.sport = 2999;
    assert!(c.slot(&compressible(&s.packet()).unwrap().0.addrs).1);
}

#[test]
fn what_cannot_be_compressed_travels_unchanged() {
    let (mut c, mut d, s) = established();
    let good = s.packet();
    let mut cases = Vec::new();
    let mut bad_tcp = good.clone();
    bad_tcp[IPV4 + 16] ^= 1;
    cases.push(bad_tcp);
    let mut bad_ip = good.clone();
    bad_ip[10] ^= 1;
    cases.push(bad_ip);
    let mut udp = good.clone();
    udp[9] = 17;
    cases.push(udp);
    let mut fragment = good.clone();
    fragment[6] = 0x20;
    cases.push(fragment);
    let mut options = good.clone();
    options[0] = 0x46;
    cases.push(options);
    let mut urgent = s.clone();
    urgent.flags |= 0x20;
    cases.push(urgent.packet());
    let mut v6 = vec![0x60; 60];
    v6[1] = 0;
    cases.push(v6);
    cases.push(good[..30].to_vec());
    for p in cases {
        let mut b = p.clone();
        c.compress(1, &mut b);
        assert_eq!(b, p);
        d.restore(&mut b).unwrap();
        assert_eq!(b, p);
    }
    assert_eq!(
        c.stats.compressed + c.stats.establishing,
        3,
        "only the SYN-ACK and the two ACKs after it"
    );
}

#[test]
fn a_context_is_refreshed_periodically() {
    let (mut c, mut d, mut s) = established();
    let mut forms = Vec::new();
    for i in 0..(2 * REFRESH_EVERY) {
        s.seq = 1001 + 10 * i;
        s.payload = vec![1; 10];
        let p = s.packet();
        let mut b = p.clone();
        c.compress(1 + i, &mut b);
        forms.push(b[0] & 0xf0);
        d.restore(&mut b).unwrap();
        assert_eq!(b, p);
    }
    let est = forms.iter().filter(|&&f| f == FORM_ESTABLISH).count();
    assert_eq!(est, 2);
}

proptest! {
    #[test]
    fn restoring_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), form in 0u8..4) {
        let (_, mut d, _) = established();
        let mut b = bytes;
        if let Some(f) = b.first_mut() {
            *f = (*f & 0x0f) | (form << 4);
        }
        let _ = d.restore(&mut b);
        let _ = d.flow_key(&b);
    }

    #[test]
    fn any_segment_round_trips(
        seqs in proptest::collection::vec((any::<u32>(), any::<u32>(), any::<u16>(), any::<u16>(), 0usize..3, 0usize..300, any::<u8>()), 1..30),
    ) {
        let (mut c, mut d, mut s) = established();
        for (i, (seq, ack, window, ip_id, opts, len, flags)) in seqs.into_iter().enumerate() {
            s.seq = seq;
            s.ack = ack;
            s.window = window;
            s.ip_id = ip_id;
            s.flags = flags & !0x20;
            s.options = match opts {
                0 => Vec::new(),
                1 => timestamps(seq, ack),
                _ => sack(&[(ack, ack.wrapping_add(100))]),
            };
            s.payload = vec![flags; len];
            let p = s.packet();
            let mut b = p.clone();
            c.compress(1 + i as u32, &mut b);
            prop_assert!(b.len() <= p.len());
            prop_assert!(d.restore(&mut b).is_ok());
            prop_assert_eq!(b, p);
        }
    }
}

#[test]
fn packets_delivered_late_across_a_change_of_references_restore_right() {
    let (mut c, mut d, mut s) = established();
    s.payload = vec![1; 100];
    let early = s.packet();
    let mut early_sent = early.clone();
    c.compress(3, &mut early_sent);
    assert_eq!(early_sent[0] & 0xf0, FORM_COMPRESSED);
    // A FIN with another window re-establishes, then a RST with yet another.
    s.seq += 100;
    s.payload.clear();
    s.window = 900;
    s.flags = FIN | ACK;
    let fin = s.packet();
    let mut fin_sent = fin.clone();
    c.compress(4, &mut fin_sent);
    s.window = 0;
    s.flags = RST;
    let mut rst_sent = s.packet();
    c.compress(5, &mut rst_sent);
    assert_eq!((fin_sent[0], rst_sent[0]), (FORM_ESTABLISH, FORM_ESTABLISH));
    // Delivered out of order: the RST, the compressed packet, then the FIN.
    d.restore(&mut rst_sent).unwrap();
    let ctx = usize::from(early_sent[1]);
    d.restore(&mut early_sent).unwrap();
    assert_eq!(early_sent, early);
    d.restore(&mut fin_sent).unwrap();
    assert_eq!(fin_sent, fin);
    // The late FIN did not take the context back to its older references.
    assert_eq!(d.table[ctx].refs.window, 0);
}

#[test]
fn the_ip_id_travels_as_its_low_byte_only_when_near_and_atomic() {
    let (mut c, mut d, mut s) = established();
    for (i, (ip_id, df, full)) in [
        (8u16, true, false),
        (300, true, true),
        (301, true, false),
        (250, true, false),
        (251, false, true),
    ]
    .into_iter()
    .enumerate()
    {
        s.seq += 10;
        s.payload = vec![2; 10];
        s.ip_id = ip_id;
        let mut p = s.packet();
        if !df {
            p[6] = 0;
            let c = ip_checksum(&p);
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let mut b = p.clone();
        c.compress(3 + i as u32, &mut b);
        if df {
            assert_eq!(b[0] & 0xf0, FORM_COMPRESSED, "packet {i}");
            assert_eq!(b[0] & F_IP_ID != 0, full, "packet {i}");
        } else {
            // Another IP flags value: the context is re-established.
            assert_eq!(b[0], FORM_ESTABLISH, "packet {i}");
        }
        d.restore(&mut b).unwrap();
        assert_eq!(b, p, "packet {i}");
    }
}

proptest! {
    #[test]
    fn the_wide_checksum_sum_matches_the_16_bit_reference(bytes in proptest::collection::vec(any::<u8>(), 0..100), acc in 0u64..1 << 40) {
        let mut reference = acc;
        for c in bytes.chunks(2) {
            reference += u64::from(c[0]) << 8 | c.get(1).map_or(0, |&b| u64::from(b));
        }
        prop_assert_eq!(fold(sum(&bytes, acc)), fold(reference));
    }
}

/// The flow table reads a received packet's flow and SYN/FIN/RST flags before it is
/// restored: from the establishing form's intact TCP header, and (flags aside) from the
/// context of a compressed one.
#[test]
fn flow_info_reads_both_forms_before_restoring() {
    let (mut c, d, mut s) = established();
    let key = crate::flow::parse::parse(&s.packet()).unwrap().key;
    s.payload = vec![1; 300];
    let mut b = s.packet();
    c.compress(3, &mut b);
    assert_eq!(b[0] & 0xf0, FORM_COMPRESSED);
    let info = d.flow_info(&b).expect("a known context");
    assert_eq!((info.key, info.tcp), (key, None));
    s.flags = FIN | ACK;
    s.payload.clear();
    s.seq += 300;
    let mut b = s.packet();
    c.compress(4, &mut b);
    assert_eq!(b[0], FORM_ESTABLISH);
    let info = d.flow_info(&b).unwrap();
    assert_eq!(info.key, key);
    let tcp = info
        .tcp
        .expect("the establishing form keeps the TCP header");
    assert!(tcp.fin && !tcp.syn && !tcp.rst, "{tcp:?}");
    assert_eq!((tcp.seq, tcp.payload_len), (s.seq, 0));
    // A compressed packet of a context the receiver never learned tells nothing.
    let mut other = Decompressor::default();
    s.flags = ACK;
    let mut b = s.packet();
    c.compress(5, &mut b);
    assert_eq!(other.flow_info(&b), None);
    other.restore(&mut b).unwrap_err();
}
