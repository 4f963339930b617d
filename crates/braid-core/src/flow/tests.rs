//! The flow table: activity, pinning, reverse-path learning, retransmission detection and
//! its bounds.

use super::*;

/// An IPv4 TCP segment from port `sport` to 80 with `flags` and `payload` bytes.
pub(crate) fn tcp(sport: u16, seq: u32, flags: u8, payload: usize) -> Vec<u8> {
    let mut p = vec![0u8; 40 + payload];
    p[0] = 0x45;
    p[9] = parse::PROTO_TCP;
    p[12..16].copy_from_slice(&[10, 0, 0, 2]);
    p[16..20].copy_from_slice(&[10, 1, 0, 2]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&80u16.to_be_bytes());
    p[24..28].copy_from_slice(&seq.to_be_bytes());
    p[32] = 5 << 4;
    p[33] = flags;
    p
}

fn info(p: &[u8]) -> PacketInfo {
    parse::parse(p).unwrap()
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

#[test]
fn tracks_activity_and_pins() {
    let mut t = FlowTable::new(100, Duration::from_secs(60), 7);
    let a = info(&tcp(1000, 0, 0x02, 0));
    let m = t.observe_outgoing(at(0), &a, |_| 3).unwrap();
    assert!(m.new && m.pinned.is_none());
    assert_eq!(m.class, 3);
    t.pin(&a.key, 1);
    let m = t.observe_outgoing(at(10), &a, |_| 0).unwrap();
    assert!(!m.new);
    assert_eq!((m.pinned, m.class), (Some(1), 3));
    let b = info(&tcp(1001, 0, 0x02, 0));
    t.observe_outgoing(at(10), &b, |_| 0).unwrap();
    t.pin(&b.key, 0);
    let mut out = Vec::new();
    t.active_per_path(at(20), &[0, 1, 2], &mut out);
    assert_eq!(out, vec![1, 1, 0]);
    // Idling ends activity.
    t.active_per_path(at(10 + 4999), &[0, 1, 2], &mut out);
    assert_eq!(out, vec![1, 1, 0]);
    t.active_per_path(at(10 + 5000), &[0, 1, 2], &mut out);
    assert_eq!(out, vec![0, 0, 0]);
}

/// The packet `p` as it arrives from the peer: the reverse direction of its flow.
fn reverse(p: &[u8]) -> PacketInfo {
    let i = info(p);
    PacketInfo {
        key: i.key.reversed(),
        ..i
    }
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const FIN_ACK: u8 = 0x11;
const RST: u8 = 0x04;

fn counts(t: &FlowTable, ms: u64) -> Vec<u32> {
    let mut out = Vec::new();
    t.active_per_path(at(ms), &[0, 1], &mut out);
    out
}

#[test]
fn a_connection_ends_at_fins_both_ways_not_at_one() {
    let mut t = FlowTable::new(100, Duration::from_secs(60), 7);
    // A client's connection on path 1: SYN out, SYN-ACK in, request out, response in.
    let a = info(&tcp(1000, 0, SYN, 0));
    t.observe_outgoing(at(0), &a, |_| 0).unwrap();
    t.pin(&a.key, 1);
    t.observe_incoming(at(50), &reverse(&tcp(1000, 0, SYN | ACK, 0)), 1);
    t.observe_outgoing(at(50), &info(&tcp(1000, 1, ACK, 100)), |_| 0);
    t.observe_incoming(at(100), &reverse(&tcp(1000, 1, ACK, 1400)), 1);
    assert_eq!(counts(&t, 100), vec![0, 1]);
    // The server closes: half closed, still active (the client may still send).
    t.observe_incoming(at(150), &reverse(&tcp(1000, 1401, FIN_ACK, 0)), 1);
    assert_eq!(counts(&t, 150), vec![0, 1]);
    // The client closes too: ended, at once, though it was not idle.
    t.observe_outgoing(at(150), &info(&tcp(1000, 101, FIN_ACK, 0)), |_| 0);
    assert_eq!(counts(&t, 150), vec![0, 0]);
    // The server's last ACK neither reopens the flow nor creates another; the entry
    // keeps its path for it.
    t.observe_incoming(at(200), &reverse(&tcp(1000, 1402, ACK, 0)), 1);
    assert_eq!(counts(&t, 200), vec![0, 0]);
    let m = t
        .observe_outgoing(at(200), &info(&tcp(1000, 102, ACK, 0)), |_| 0)
        .unwrap();
    assert_eq!((m.new, m.pinned), (false, Some(1)));
    assert_eq!(counts(&t, 200), vec![0, 0]);
    assert_eq!(t.stats().created, 1);
    // A new connection on the same 5-tuple is active again.
    t.observe_outgoing(at(300), &info(&tcp(1000, 5000, SYN, 0)), |_| 0);
    assert_eq!(counts(&t, 300), vec![0, 1]);
}

#[test]
fn an_rst_either_way_ends_a_connection() {
    let mut t = FlowTable::new(100, Duration::from_secs(60), 7);
    let a = info(&tcp(1000, 0, SYN, 0));
    let b = info(&tcp(1001, 0, SYN, 0));
    t.observe_outgoing(at(0), &a, |_| 0);
    t.pin(&a.key, 0);
    t.observe_outgoing(at(0), &b, |_| 0);
    t.pin(&b.key, 1);
    assert_eq!(counts(&t, 1), vec![1, 1]);
    // The peer resets a; this end resets b.
    t.observe_incoming(at(10), &reverse(&tcp(1000, 0, RST, 0)), 0);
    assert_eq!(counts(&t, 10), vec![0, 1]);
    t.observe_outgoing(at(20), &info(&tcp(1001, 1, RST, 0)), |_| 0);
    assert_eq!(counts(&t, 20), vec![0, 0]);
}

#[test]
fn a_full_table_drops_ended_flows_before_refusing_new_ones() {
    let mut t = FlowTable::new(2, Duration::from_secs(60), 7);
    t.observe_outgoing(at(0), &info(&tcp(1, 0, SYN, 0)), |_| 0);
    t.observe_outgoing(at(0), &info(&tcp(2, 0, SYN, 0)), |_| 0);
    // Full of open flows: a new one is refused.
    assert!(t
        .observe_outgoing(at(1), &info(&tcp(3, 0, SYN, 0)), |_| 0)
        .is_none());
    // Flow 1 ends (FINs both ways): its entry makes room, flow 2's stays.
    t.observe_outgoing(at(2), &info(&tcp(1, 1, FIN_ACK, 0)), |_| 0);
    t.observe_incoming(at(3), &reverse(&tcp(1, 1, FIN_ACK, 0)), 0);
    assert!(t
        .observe_outgoing(at(4), &info(&tcp(3, 0, SYN, 0)), |_| 0)
        .is_some());
    let s = t.stats();
    assert_eq!((s.tracked, s.expired, s.table_full), (2, 1, 1));
    assert!(t.peek(&info(&tcp(2, 1, ACK, 0))).is_some());
    assert!(t.peek(&info(&tcp(1, 2, ACK, 0))).is_none());
}

#[test]
fn learns_the_inbound_path_of_the_reverse_flow() {
    let mut t = FlowTable::new(100, Duration::from_secs(60), 7);
    // A SYN arrives from the peer on path 2; our SYN-ACK belongs to the reverse flow.
    let syn = info(&tcp(4000, 0, 0x02, 0));
    t.observe_incoming(at(0), &syn, 2);
    let reply = PacketInfo {
        key: syn.key.reversed(),
        ..syn
    };
    let m = t.observe_outgoing(at(1), &reply, |_| 0).unwrap();
    assert_eq!(m.inbound, Some(2));
    assert!(!m.new);
}

#[test]
fn detects_inner_retransmissions() {
    let mut t = FlowTable::new(100, Duration::from_secs(60), 7);
    let mut seen = Vec::new();
    for (seq, len) in [
        (1u32, 100usize),
        (101, 100),
        (201, 100),
        (101, 100),
        (301, 0),
    ] {
        let m = t
            .observe_outgoing(at(0), &info(&tcp(5, seq, 0x10, len)), |_| 0)
            .unwrap();
        seen.push(m.retransmission);
    }
    assert_eq!(seen, vec![false, false, false, true, false]);
    assert_eq!(t.stats().retransmissions, 1);
}

#[test]
fn a_held_packet_looked_up_again_is_counted_once_when_sent() {
    // A scheduler that holds the head of the send queue sees it on every poll: each
    // lookup describes it the same way, and only its send counts.
    let mut t = FlowTable::new(100, Duration::from_secs(60), 7);
    let first = info(&tcp(5, 1, 0x10, 100));
    t.observe_outgoing(at(0), &first, |_| 0).unwrap();
    let held = info(&tcp(5, 101, 0x10, 100));
    let looks: Vec<FlowMeta> = (0..5)
        .map(|ms| t.lookup_outgoing(at(ms), &held, |_| 0).unwrap())
        .collect();
    assert!(looks.iter().all(|m| *m == looks[0]));
    assert_eq!((looks[0].packets, looks[0].retransmission), (2, false));
    assert_eq!(t.peek(&held), Some((1, false)));
    t.record_sent(at(5), &held, &looks[0]);
    assert_eq!(t.peek(&held), Some((2, true)));
    assert_eq!(t.stats().retransmissions, 0);
    // A segment sent again (the inner TCP's retransmission) is one.
    let again = t.lookup_outgoing(at(6), &held, |_| 0).unwrap();
    assert_eq!((again.packets, again.retransmission), (3, true));
    t.record_sent(at(6), &held, &again);
    assert_eq!(t.stats().retransmissions, 1);
}

#[test]
fn is_bounded_and_sweeps_idle_flows() {
    let mut t = FlowTable::new(3, Duration::from_secs(10), 7);
    for port in 0..3 {
        assert!(t
            .observe_outgoing(at(0), &info(&tcp(port, 0, 0x02, 0)), |_| 0)
            .is_some());
    }
    assert!(t
        .observe_outgoing(at(1), &info(&tcp(9, 0, 0x02, 0)), |_| 0)
        .is_none());
    assert_eq!(t.stats().table_full, 1);
    // After the idle timeout the old flows are swept and new ones fit.
    assert!(t
        .observe_outgoing(at(11_000), &info(&tcp(9, 0, 0x02, 0)), |_| 0)
        .is_some());
    let s = t.stats();
    assert_eq!((s.tracked, s.expired), (1, 3));
}

#[test]
fn hash_is_keyed_by_the_seed() {
    let keys: Vec<PacketInfo> = (0..64u16)
        .map(|s| info(&tcp(1000 + s, 0, 0x02, 0)))
        .collect();
    let hashes = |seed: u64| -> Vec<u64> {
        let mut t = FlowTable::new(100, Duration::from_secs(60), seed);
        keys.iter()
            .map(|i| t.observe_outgoing(at(0), i, |_| 0).unwrap().hash)
            .collect()
    };
    // The same seed gives the same hashes (the simulator repeats); another seed gives
    // other hashes, so collisions found under one key say nothing about another.
    assert_eq!(hashes(1), hashes(1));
    let (a, b) = (hashes(1), hashes(2));
    assert!(a.iter().zip(&b).all(|(x, y)| x != y), "{a:?} {b:?}");
    // Nearby seeds are unrelated keys: the hashes do not differ in a fixed pattern.
    let xor: Vec<u64> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
    assert!(xor.windows(2).any(|w| w[0] != w[1]));
}

#[test]
fn a_flow_is_delivered_on_arrival_while_it_keeps_to_one_path() {
    let mut t = FlowTable::new(100, Duration::from_secs(60), 7);
    let a = info(&tcp(1000, 0, 0x10, 100));
    let hold = Duration::from_millis(100);
    // Unknown flows are left in order.
    assert!(!t.deliver_on_arrival(&a.key, at(0), 1, hold));
    t.observe_outgoing(at(0), &a, |_| 0);
    // The first packet, then more on the same path: nothing earlier can be waiting.
    assert!(t.deliver_on_arrival(&a.key, at(0), 1, hold));
    assert!(t.deliver_on_arrival(&a.key, at(5), 1, hold));
    // Moving to another path: in order, and so is everything for `hold` after it, on
    // either path, since that packet may still be waiting at the peer.
    assert!(!t.deliver_on_arrival(&a.key, at(10), 0, hold));
    assert!(!t.deliver_on_arrival(&a.key, at(20), 0, hold));
    assert!(!t.deliver_on_arrival(&a.key, at(30), 1, hold));
    // The last in-order packet went at 30 ms on path 1: free from 130 ms on path 1 (each
    // packet sent in order extends the hold).
    assert!(t.deliver_on_arrival(&a.key, at(130), 1, hold));
    assert!(!t.deliver_on_arrival(&a.key, at(300), 0, hold));
    // Another flow is not held by this one.
    let b = info(&tcp(1001, 0, 0x10, 100));
    t.observe_outgoing(at(300), &b, |_| 0);
    assert!(t.deliver_on_arrival(&b.key, at(300), 0, hold));
}
