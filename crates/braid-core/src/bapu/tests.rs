//! Behaviour of BaPu's parts on packets built here.

use std::time::Duration;

use super::ap::{ApConfig, BapuAp};
use super::proactive_ack::{AckVerdict, ProactiveAck, ProactiveAckConfig};
use super::report::{Entry, Report};
use super::scheduler::{Scheduler, SchedulerConfig};
use super::simple_buffer::SimpleBuffer;
use crate::checksum;
use crate::rpc::segment::{self, tcp_sum};
use crate::Instant;

const SENDER: [u8; 4] = [192, 168, 1, 5];
const RECEIVER: [u8; 4] = [10, 1, 0, 2];
const BSSID: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn ms(v: u64) -> Instant {
    Instant::from_micros(v * 1000)
}

/// An IPv4 TCP packet with correct checksums.
#[allow(clippy::too_many_arguments)]
fn tcp(
    from_sender: bool,
    ip_id: u16,
    seq: u32,
    ack: Option<u32>,
    flags: u8,
    opts: &[u8],
    payload: usize,
    window: u16,
) -> Vec<u8> {
    let (src, dst, sp, dp) = if from_sender {
        (SENDER, RECEIVER, 40000u16, 5001u16)
    } else {
        (RECEIVER, SENDER, 5001, 40000)
    };
    let len = 40 + opts.len() + payload;
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[4..6].copy_from_slice(&ip_id.to_be_bytes());
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let s = !checksum::fold(checksum::sum(&p[..20], 0));
    p[10..12].copy_from_slice(&s.to_be_bytes());
    p[20..22].copy_from_slice(&sp.to_be_bytes());
    p[22..24].copy_from_slice(&dp.to_be_bytes());
    p[24..28].copy_from_slice(&seq.to_be_bytes());
    p[28..32].copy_from_slice(&ack.unwrap_or(0).to_be_bytes());
    p[32] = (((20 + opts.len()) / 4) as u8) << 4;
    p[33] = flags | if ack.is_some() { 0x10 } else { 0 };
    p[34..36].copy_from_slice(&window.to_be_bytes());
    p[40..40 + opts.len()].copy_from_slice(opts);
    let s = !tcp_sum(&p, 20);
    p[36..38].copy_from_slice(&s.to_be_bytes());
    p
}

fn entry(ip_id: u16, seq: u32, seq_len: u16) -> Entry {
    Entry {
        ip_id,
        home_only: false,
        seq,
        seq_len,
        bytes: seq_len + 40,
    }
}

fn report(ap: u8, free: u32, enqueued: u32, entries: Vec<Entry>) -> Report {
    Report {
        ap,
        session: 9,
        buffer_free: free,
        enqueued,
        entries,
    }
}

#[test]
fn scheduler_serves_first_reporter_with_room_and_keeps_first_packets_home() {
    let mut s = Scheduler::new(SchedulerConfig::new(9, 0, false));
    // UDP's first packet waits for the home AP (0) even though AP 2 reported it first.
    s.on_report(ms(0), &report(2, 10_000, 0, vec![entry(1, 0, 1000)]));
    assert!(s.poll_announce().is_none());
    s.on_report(ms(1), &report(0, 10_000, 0, vec![entry(1, 0, 1000)]));
    let a = s.poll_announce().unwrap();
    assert_eq!((a.forwarder, a.entries[0].ip_id), (0, 1));
    // Then first come, first served: AP 2 reports packet 2 first and gets it.
    s.on_report(ms(2), &report(2, 10_000, 0, vec![entry(2, 0, 1000)]));
    s.on_report(ms(3), &report(0, 10_000, 1040, vec![entry(2, 0, 1000)]));
    let a = s.poll_announce().unwrap();
    assert_eq!((a.forwarder, a.entries[0].ip_id), (2, 2));
    assert!(s.poll_announce().is_none());
    // AP 2 has room for about two more packets by what it reported less what it was
    // given since (1040 bytes it did not count yet).
    s.on_report(
        ms(4),
        &report(2, 3200, 0, vec![entry(3, 0, 1000), entry(4, 0, 1000)]),
    );
    let a = s.poll_announce().unwrap();
    assert_eq!((a.forwarder, a.entries.len()), (2, 2));
    s.on_report(ms(5), &report(2, 100, 0, vec![entry(5, 0, 1000)]));
    assert!(
        s.poll_announce().is_none(),
        "no reporter has room: packet 5 waits"
    );
    s.on_report(ms(6), &report(1, 5000, 0, vec![entry(5, 0, 1000)]));
    assert_eq!(s.poll_announce().unwrap().forwarder, 1);
    assert_eq!(s.stats().assigned, 5);
}

#[test]
fn scheduler_gives_an_undelivered_packet_to_another_reporter() {
    let mut cfg = SchedulerConfig::new(9, 0, true);
    cfg.reassign_after = Duration::from_millis(100);
    let mut s = Scheduler::new(cfg);
    s.on_report(ms(0), &report(1, 10_000, 0, vec![entry(7, 100, 1000)]));
    s.on_report(ms(1), &report(0, 10_000, 0, vec![entry(7, 100, 1000)]));
    assert_eq!(s.poll_announce().unwrap().forwarder, 1);
    assert_eq!(s.poll_timeout(), Some(ms(100)));
    s.handle_timeout(ms(100));
    assert_eq!(s.poll_announce().unwrap().forwarder, 0);
    assert_eq!(s.on_delivered(7), Some((0, ms(100))));
    let next = s.poll_timeout().unwrap();
    s.handle_timeout(next);
    assert_eq!(s.poll_timeout(), None, "nothing outstanding");
    // A TCP retransmission of an assigned range is not scheduled again.
    s.on_report(ms(200), &report(0, 10_000, 0, vec![entry(8, 1100, 1000)]));
    s.on_report(ms(201), &report(0, 10_000, 0, vec![entry(9, 100, 1000)]));
    assert_eq!(s.stats().duplicate_segments, 1);
}

#[test]
fn ap_reports_once_per_ip_id_and_forwards_what_it_is_given() {
    let mut ap = BapuAp::new(ApConfig::new(3));
    let p = tcp(true, 77, 1000, Some(1), 0, &[], 1200, 100);
    let id = ap.on_overheard(ms(0), BSSID, &p).unwrap();
    // A MAC retransmission: same IP ID.
    assert!(ap.on_overheard(ms(1), BSSID, &p).is_none());
    assert_eq!(ap.stats().duplicates, 1);
    assert!(ap.poll_report(ms(4), 5000).is_none(), "batched for 5 ms");
    assert_eq!(ap.poll_timeout(), Some(ms(5)));
    let r = ap.poll_report(ms(5), 5000).unwrap();
    assert_eq!((r.session, r.buffer_free, r.entries.len()), (id, 5000, 1));
    assert_eq!(
        (r.entries[0].ip_id, r.entries[0].seq, r.entries[0].seq_len),
        (77, 1000, 1200)
    );
    let a = super::report::Announce {
        forwarder: 3,
        session: id,
        entries: r.entries.clone(),
    };
    ap.on_announce(ms(6), &a);
    assert_eq!(ap.poll_forward(), Some((id, p)));
    ap.on_announce(ms(7), &a);
    assert_eq!(ap.stats().missing, 1);
}

/// Captured frames (radiotap, 802.11): a MAC retry is a duplicate by IP ID, the session
/// is the frame's BSSID's, and a frame with a bad FCS or from another direction is
/// counted, not reported.
#[test]
fn ap_takes_captured_frames() {
    use super::frame::build_uplink;
    let mut ap = BapuAp::new(ApConfig::new(3));
    let p = tcp(true, 77, 1000, Some(1), 0, &[], 1200, 100);
    let sta = [2, 0, 0, 0, 0, 2];
    let first = build_uplink(BSSID, sta, [2, 0, 0, 0, 0, 3], 5, false, true, &p);
    let retry = build_uplink(BSSID, sta, [2, 0, 0, 0, 0, 3], 5, true, true, &p);
    let (id, packet) = ap.on_frame(ms(0), &first).unwrap().unwrap();
    assert_eq!(packet, &p[..]);
    assert_eq!(ap.session_key(id).unwrap().bssid, BSSID);
    assert_eq!(ap.on_frame(ms(1), &retry), Ok(None));
    assert_eq!(ap.stats().duplicates, 1);
    let mut bad = first.clone();
    let last = bad.len() - 5;
    bad[last] ^= 0x20;
    assert_eq!(ap.on_frame(ms(2), &bad), Err(super::FrameError::BadFcs));
    // Without an FCS to break: from the AP to a station.
    let mut from_ap = build_uplink(BSSID, sta, [2, 0, 0, 0, 0, 3], 6, false, false, &p);
    from_ap[13] = 0x02;
    assert_eq!(
        ap.on_frame(ms(2), &from_ap),
        Err(super::FrameError::NotUplink)
    );
    assert_eq!(ap.stats().refused_frames, 2);
    assert_eq!(ap.stats().overheard, 1);
}

const WSCALE_SACK_TS: [u8; 20] = [
    2, 4, 5, 180, // MSS
    4, 2, // SACK permitted
    8, 10, 0, 0, 0, 9, 0, 0, 0, 0, // timestamps
    1, 3, 3, 7, // NOP, window scale 7
];

/// (ACK, window, timestamps, SACK blocks) of a spoofed ACK, its checksums checked.
type Ack = (u32, u16, Option<(u32, u32)>, Vec<(u32, u32)>);

fn parse_ack(p: &[u8]) -> Ack {
    let seg = segment::parse(p).unwrap();
    assert_eq!(tcp_sum(p, 20), 0xffff, "TCP checksum");
    assert_eq!(
        checksum::fold(checksum::sum(&p[..20], 0)),
        0xffff,
        "IP checksum"
    );
    let window = u16::from_be_bytes([p[34], p[35]]);
    let sack = seg
        .options
        .sack()
        .iter()
        .map(|b| (b.left, b.right))
        .collect();
    (seg.ack.unwrap(), window, seg.options.timestamps, sack)
}

#[test]
fn proactive_ack_acknowledges_what_is_held_and_replaces_real_acks() {
    let mut pa = ProactiveAck::new(ProactiveAckConfig::default());
    let isn = u32::MAX - 3000; // the sequence space wraps during the test
    pa.on_uplink(
        ms(0),
        &tcp(true, 1, isn, None, 0x02, &WSCALE_SACK_TS, 0, 65535),
    );
    // SYN-ACK: window scale 7, SACK, timestamps; its window (65535) is not scaled.
    let synack = tcp(
        false,
        1,
        5000,
        Some(isn.wrapping_add(1)),
        0x02,
        &WSCALE_SACK_TS,
        0,
        65535,
    );
    assert_eq!(pa.on_downlink(ms(10), &synack), AckVerdict::Pass);
    let s0 = isn.wrapping_add(1);
    // Three segments with timestamps.
    let ts = |v: u32| {
        let mut o = vec![1, 1, 8, 10];
        o.extend_from_slice(&v.to_be_bytes());
        o.extend_from_slice(&0u32.to_be_bytes());
        o
    };
    for i in 0..3u32 {
        let p = tcp(
            true,
            10 + i as u16,
            s0.wrapping_add(i * 1000),
            Some(5001),
            0,
            &ts(100 + i),
            1000,
            500,
        );
        pa.on_uplink(ms(11 + u64::from(i)), &p);
    }
    // The first segment is announced: the sender is told at once.
    pa.on_held(ms(20), &entry(10, s0, 1000));
    let (ack, win, tsopt, sack) = parse_ack(&pa.poll_ack().unwrap());
    assert_eq!(ack, s0.wrapping_add(1000));
    assert_eq!(
        win,
        (65535 - 1000) >> 7,
        "the SYN-ACK's right edge less the spoofed ACK"
    );
    assert_eq!(
        tsopt,
        Some((9, 100)),
        "the receiver's TSval, echoing the sender's"
    );
    assert!(sack.is_empty());
    // The real receiver acknowledges the first segment with window 600 << 7: dropped.
    let real = tcp(
        false,
        2,
        5001,
        Some(s0.wrapping_add(1000)),
        0,
        &ts(42),
        0,
        600,
    );
    assert_eq!(pa.on_downlink(ms(45), &real), AckVerdict::Drop);
    assert!(pa.poll_ack().is_none());
    // The third is held before the second: no ACK (no duplicate from reordering)...
    pa.on_held(ms(46), &entry(12, s0.wrapping_add(2000), 1000));
    assert!(pa.poll_ack().is_none());
    // ...until the second is, and then the ACK covers both; the window is the real right
    // edge less the spoofed ACK.
    pa.on_held(ms(47), &entry(11, s0.wrapping_add(1000), 1000));
    let (ack, win, tsopt, _) = parse_ack(&pa.poll_ack().unwrap());
    assert_eq!(ack, s0.wrapping_add(3000));
    assert_eq!(u32::from(win), (1000 + (600 << 7) - 3000) >> 7);
    assert_eq!(tsopt.map(|t| t.0), Some(42));
    assert_eq!(pa.stats().real_acks_dropped, 1);
}

#[test]
fn proactive_ack_sends_duplicate_acks_with_sack_for_a_hole_the_air_lost() {
    let mut pa = ProactiveAck::new(ProactiveAckConfig::default());
    pa.on_uplink(
        ms(0),
        &tcp(
            true,
            1,
            0,
            None,
            0x02,
            &[2, 4, 5, 180, 4, 2, 0, 0],
            0,
            65535,
        ),
    );
    pa.on_downlink(
        ms(10),
        &tcp(false, 1, 0, Some(1), 0x02, &[4, 2, 0, 0], 0, 60000),
    );
    // The home AP caught segments 1, 3 and 4; segment 2 was lost for everyone.
    for i in [0u32, 2, 3] {
        pa.on_uplink(
            ms(11),
            &tcp(true, 2 + i as u16, 1 + i * 1000, Some(1), 0, &[], 1000, 500),
        );
    }
    pa.on_held(ms(40), &entry(2, 1, 1000));
    assert!(pa.poll_ack().is_some());
    // Segment 2 (seq 1001) was lost on the air for every AP; 3 and 4 are held.
    pa.on_held(ms(41), &entry(4, 2001, 1000));
    pa.on_held(ms(42), &entry(5, 3001, 1000));
    assert!(pa.poll_ack().is_none());
    // Learned hold delay 29-31 ms: timeout = srtt + 4 rttvar.
    let due = pa.poll_timeout().unwrap();
    assert!(due > ms(41) && due < ms(200), "{due}");
    pa.handle_timeout(due);
    let mut dups = Vec::new();
    while let Some(p) = pa.poll_ack() {
        dups.push(parse_ack(&p));
    }
    assert_eq!(dups.len(), 3);
    for (ack, _, _, sack) in dups {
        assert_eq!(ack, 1001);
        assert_eq!(sack, vec![(2001, 4001)]);
    }
    // The retransmission is held: the ACK jumps past everything.
    pa.on_held(due + Duration::from_millis(30), &entry(9, 1001, 1000));
    assert_eq!(parse_ack(&pa.poll_ack().unwrap()).0, 4001);
    assert_eq!(pa.poll_timeout(), None);
}

#[test]
fn proactive_ack_sends_no_duplicate_acks_for_a_segment_the_home_ap_holds() {
    let mut pa = ProactiveAck::new(ProactiveAckConfig::default());
    pa.on_uplink(ms(0), &tcp(true, 1, 0, None, 0x02, &[4, 2, 0, 0], 0, 65535));
    pa.on_downlink(
        ms(10),
        &tcp(false, 1, 0, Some(1), 0x02, &[4, 2, 0, 0], 0, 60000),
    );
    for i in 0..3u32 {
        pa.on_uplink(
            ms(11),
            &tcp(true, 2 + i as u16, 1 + i * 1000, Some(1), 0, &[], 1000, 500),
        );
    }
    pa.on_held(ms(40), &entry(2, 1, 1000));
    assert!(pa.poll_ack().is_some());
    // Segment 2 waits at the home AP for room; segment 3 went out through a monitor.
    pa.on_held(ms(41), &entry(4, 2001, 1000));
    let due = pa.poll_timeout().unwrap();
    pa.handle_timeout(due);
    assert!(
        pa.poll_ack().is_none(),
        "reordering, not loss: no duplicate ACKs"
    );
    assert_eq!(pa.stats().holes_held_at_home, 1);
    pa.on_held(due, &entry(3, 1001, 1000));
    assert_eq!(parse_ack(&pa.poll_ack().unwrap()).0, 3001);
}

#[test]
fn simple_buffer_delivers_in_order_and_gives_up_on_a_hole() {
    let mut b = SimpleBuffer::new(100_000, Duration::from_millis(50));
    b.push(ms(0), tcp(true, 1, 0, None, 0x02, &[], 0, 100));
    assert!(b.poll_deliver().is_some());
    let seg = |i: u32| tcp(true, 2 + i as u16, 1 + i * 100, Some(1), 0, &[], 100, 100);
    b.push(ms(1), seg(1));
    b.push(ms(2), seg(2));
    assert!(b.poll_deliver().is_none());
    b.push(ms(3), seg(0));
    let order: Vec<u32> = std::iter::from_fn(|| b.poll_deliver())
        .map(|p| segment::parse(&p).unwrap().seq)
        .collect();
    assert_eq!(order, vec![1, 101, 201]);
    b.push(ms(10), seg(4));
    assert_eq!(b.poll_timeout(), Some(ms(60)));
    b.handle_timeout(ms(60));
    assert_eq!(segment::parse(&b.poll_deliver().unwrap()).unwrap().seq, 401);
    assert_eq!(b.holes_skipped, 1);
}

#[test]
fn an_ap_tells_the_gateway_when_its_full_buffer_drains() {
    let mut ap = BapuAp::new(ApConfig::new(1));
    let p = tcp(true, 5, 1000, Some(1), 0, &[], 1200, 100);
    let id = ap.on_overheard(ms(0), BSSID, &p).unwrap();
    // The buffer (64 KB, seen empty first) is nearly full when the capture is reported.
    assert!(ap.poll_report(ms(1), 65_536).is_none());
    let r = ap.poll_report(ms(5), 2_000).unwrap();
    assert_eq!((r.session, r.buffer_free, r.entries.len()), (id, 2_000, 1));
    // No new captures: nothing until a quarter of the buffer has drained.
    assert!(ap.poll_report(ms(10), 2_000 + 16_383).is_none());
    let r = ap.poll_report(ms(11), 2_000 + 16_384).unwrap();
    assert_eq!((r.session, r.buffer_free, r.entries.len()), (id, 18_384, 0));
    // Once told, the same level is not repeated; the next quarter is news while the last
    // report showed it over half full, and nothing after one showed it half empty.
    assert!(ap.poll_report(ms(12), 18_384).is_none());
    let r = ap.poll_report(ms(13), 34_768).unwrap();
    assert_eq!((r.buffer_free, r.entries.len()), (34_768, 0));
    assert!(ap.poll_report(ms(14), 65_536).is_none());
}

#[test]
fn the_gateway_delivers_again_what_the_receiver_keeps_asking_for() {
    use super::repair::{Repair, RepairConfig};
    let mut r = Repair::new(RepairConfig::default());
    let data = |seq: u32| tcp(true, seq as u16, seq, None, 0, &[], 100, 100);
    let ack = |a: u32| tcp(false, 1, 7, Some(a), 0, &[], 0, 100);
    for seq in (1000..1500).step_by(100) {
        r.on_delivered(ms(0), &data(seq));
    }
    assert_eq!(
        r.on_receiver_ack(ms(1), &ack(1100)),
        None,
        "news, not a request"
    );
    // Two duplicates are reordering; the third is a request, but the segment was given
    // only 3 ms ago (the receiver may not have had it yet).
    for t in 2..5 {
        assert_eq!(r.on_receiver_ack(ms(t), &ack(1100)), None);
    }
    let again = r
        .on_receiver_ack(ms(30), &ack(1100))
        .expect("delivered again");
    assert_eq!(segment::parse(&again).unwrap().seq, 1100);
    assert_eq!(
        r.on_receiver_ack(ms(31), &ack(1100)),
        None,
        "once per min_age"
    );
    assert!(r.on_receiver_ack(ms(60), &ack(1100)).is_some());
    assert_eq!(r.stats().resent, 2);
    // Everything acknowledged is let go; a hole the gateway never filled is not its to fill.
    assert_eq!(r.on_receiver_ack(ms(61), &ack(1500)), None);
    for t in 62..70 {
        assert_eq!(r.on_receiver_ack(ms(t * 10), &ack(1500)), None);
    }
    r.on_delivered(ms(100), &data(1600));
    for t in 0..5 {
        assert_eq!(r.on_receiver_ack(ms(200 + t), &ack(1500)), None);
    }
}
