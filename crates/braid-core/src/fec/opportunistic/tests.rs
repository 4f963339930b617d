//! Evolution's `r` and W updates against hand-computed values, its degree rule, and the
//! opportunistic conditions (empty queue, new data within the last RTT); LT's robust
//! soliton and its packets decoded against a brute-force reference.

use std::collections::BTreeMap;
use std::time::Duration;

use braid_wire::PathEntry;

use super::*;
use crate::path::SentKind;
use crate::{MemberChoice, PathConfig, PathId};

/// A path of 1.2 Mbit/s (1500 bytes take 10 ms) whose peer reports loss `loss` / 65535.
fn path(id: PathId, loss: u16) -> Path {
    let mut p = Path::new(
        &PathConfig {
            id,
            tx_capacity_bps: 1_200_000,
            rx_capacity_bps: 1_200_000,
        },
        Duration::from_millis(500),
        crate::Instant::ZERO,
    );
    let e = PathEntry {
        path: id,
        live: true,
        loss,
        capacity_kbps: 1200,
        ..PathEntry::default()
    };
    p.on_report(Instant::ZERO, &e, false, 0);
    p
}

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn r_of(e: &Evolution) -> f64 {
    e.degree_policy().present_fraction()
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

/// Members of a coded repair, highest first.
fn members(rep: &Repair<'_>) -> Vec<u32> {
    match rep.body {
        RepairBody::Coded(c) => c.members().collect(),
        other => panic!("not coded: {other:?}"),
    }
}

#[test]
fn degree_rule_of_section_4_1() {
    // max(1, ⌊-1/ln r⌋), capped at |W| - 1 when |W| > 1.
    let cases = [
        (0.0, 50, 1),
        (0.3, 50, 1), // -1/ln 0.3 = 0.83
        (0.5, 50, 1), // 1.44
        (0.7, 50, 2), // 2.80
        (0.9, 50, 9), // 9.49
        (0.95, 50, 19),
        (0.99, 50, 49), // 99.5, capped at 49
        (0.9, 10, 9),
        (0.9, 9, 8),
        (1.0, 7, 6),
        (1.0, 1, 1),
        (0.2, 1, 1),
        (0.99, 2, 1),
        (f64::NAN, 5, 1),
    ];
    for (r, n, want) in cases {
        assert_eq!(evolution_degree(r, n), want, "r {r} |W| {n}");
    }
    // Eq. 1 at r = 0.7 peaks at x = 2.8, between 2 and 3; the paper rounds down (§4.1:
    // "including fewer data packets is safer").
    assert!(expected_yield(2, 0.7) > expected_yield(1, 0.7));
    assert!(expected_yield(3, 0.7) > expected_yield(4, 0.7));
    close(expected_yield(2, 0.7), 2.0 * 0.3 * 0.7);
}

#[test]
fn r_and_w_follow_the_papers_updates() {
    let mut a = path(0, 13107); // p = 0.2
    let mut b = path(1, 32768); // p = 0.500008
    let (pa, pb) = (a.loss_rate(), b.loss_rate());
    close(pa, 0.2);
    let mut e = Evolution::new(EvolutionParams::paper(), 1);
    let t = ms(1000);
    // (i) on data: r = ((|W| - 1) r + (1 - p)) / |W|.
    e.on_data_sent(t, 0, &a, &[0; 100]);
    close(r_of(&e), 1.0 - pa);
    e.on_data_sent(t, 1, &b, &[1; 100]);
    let r2 = ((1.0 - pa) + (1.0 - pb)) / 2.0;
    close(r_of(&e), r2);
    e.on_data_sent(t, 2, &a, &[2; 100]);
    let r3 = (2.0 * r2 + (1.0 - pa)) / 3.0;
    close(r_of(&e), r3);
    assert_eq!(e.window_len(), 3);
    // Data went out on both paths: their queues are not empty, so no coded packet yet.
    a.on_send(t, 1000, SentKind::Data);
    b.on_send(t, 1000, SentKind::Data);
    assert!(e.poll_repair(t, &[a.clone(), b.clone()]).is_none());
    // (ii) on a coded packet of x = ⌊-1/ln r3⌋ = 2 packets, sent on path 0 once it drains.
    let t1 = t + Duration::from_millis(20);
    let paths = [a.clone(), b.clone()];
    let rep = e.poll_repair(t1, &paths).unwrap();
    assert_eq!(rep.path, 0);
    assert_eq!(members(&rep).len(), 2);
    let r4 = (3.0 * r3 + (1.0 - pa) * 2.0 * (1.0 - r3) * r3) / 3.0;
    close(r_of(&e), r4);
    // The next: -1/ln r4 = 4.8, capped at |W| - 1 = 2; path 1 this time (path 0 now queued).
    a.on_send(t1, 200, SentKind::Repair);
    let rep = e.poll_repair(t1, &[a.clone(), b.clone()]).unwrap();
    assert_eq!((rep.path, members(&rep).len()), (1, 2));
    let r5 = (3.0 * r4 + (1.0 - pb) * 2.0 * (1.0 - r4) * r4) / 3.0;
    close(r_of(&e), r5);
    b.on_send(t1, 200, SentKind::Repair);
    // (iii) an ack of 1 leaves W = {2}; r unchanged. The coded packet then carries one.
    e.on_ack(t1, 1);
    assert_eq!(e.window_len(), 1);
    close(r_of(&e), r5);
    let t2 = t1 + Duration::from_millis(5);
    let rep = e.poll_repair(t2, &[a, b]).unwrap();
    assert_eq!(members(&rep), vec![2]);
    let st = e.stats();
    assert_eq!((st.coded_sent, st.coded_members, st.window), (3, 5, 1));
    close(st.present_fraction, r_of(&e));
}

#[test]
fn loss_offset_shifts_p_and_is_clamped() {
    let a = path(0, 13107);
    let up = EvolutionParams {
        loss_offset: 0.1,
        ..EvolutionParams::paper()
    };
    let mut e = Evolution::new(up, 1);
    e.on_data_sent(ms(0), 0, &a, &[0]);
    close(r_of(&e), 1.0 - (a.loss_rate() + 0.1));
    let down = EvolutionParams {
        loss_offset: -0.5,
        ..EvolutionParams::paper()
    };
    let mut e = Evolution::new(down, 1);
    e.on_data_sent(ms(0), 0, &a, &[0]);
    close(r_of(&e), 1.0);
}

#[test]
fn coded_only_on_an_empty_queue_and_while_data_is_new() {
    let mut a = path(0, 6553);
    let mut e = Evolution::new(EvolutionParams::paper(), 3);
    // As the session does: the path accounts for the datagram, then recovery hears of it.
    for s in 0..5 {
        a.on_send(ms(0), 1500, SentKind::Data);
        e.on_data_sent(ms(0), s, &a, &[s as u8; 1000]);
    }
    // Five 1500-byte datagrams at 1.2 Mbit/s: the queue drains at 50 ms.
    for t in [0, 10, 49] {
        assert!(e.poll_repair(ms(t), std::slice::from_ref(&a)).is_none());
        assert_eq!(
            e.poll_timeout(ms(t), std::slice::from_ref(&a)),
            Some(ms(50))
        );
    }
    // Drained: a coded packet; it occupies the queue in turn (one at a time).
    let rep = e.poll_repair(ms(50), std::slice::from_ref(&a)).unwrap();
    assert_eq!(rep.path, 0);
    let RepairBody::Coded(c) = rep.body else {
        panic!()
    };
    let wire = c.payload.len() + c.bitmap.len() + 55;
    a.on_send(ms(50), wire, SentKind::Repair);
    assert!(e.poll_repair(ms(50), std::slice::from_ref(&a)).is_none());
    // The next waits for the drain plus 5% of the coded packet's transmission time, so
    // the real queue gets idle moments that absorb estimate errors.
    let tx = a.transmission_time(wire);
    let rested = ms(50) + tx + tx.mul_f64(CODED_HEADROOM);
    assert!(rested > ms(50) + tx);
    assert_eq!(
        e.poll_timeout(ms(50), std::slice::from_ref(&a)),
        Some(rested)
    );
    assert!(e
        .poll_repair(ms(50) + tx, std::slice::from_ref(&a))
        .is_none());
    assert!(e.poll_repair(rested, std::slice::from_ref(&a)).is_some());
    a.on_send(rested, wire, SentKind::Repair);
    // Without an RTT sample the round trip is 500 ms, counted from when each packet leaves
    // the queue (the last at 50 ms): at 550 ms the data is no longer new and W has aged
    // out; nothing is sent and nothing is waited for.
    assert!(e.poll_repair(ms(549), std::slice::from_ref(&a)).is_some());
    assert_eq!(e.window_len(), 1);
    assert!(e.poll_repair(ms(550), std::slice::from_ref(&a)).is_none());
    assert_eq!(e.window_len(), 0);
    assert_eq!(e.poll_timeout(ms(550), std::slice::from_ref(&a)), None);
    // An unusable path never carries one.
    let mut down = path(1, 0);
    down.on_report(
        ms(600),
        &PathEntry {
            path: 1,
            live: false,
            capacity_kbps: 1200,
            ..PathEntry::default()
        },
        false,
        0,
    );
    e.on_data_sent(ms(600), 5, &a, &[1]);
    assert!(e.poll_repair(ms(700), &[down.clone()]).is_none());
    assert_eq!(e.poll_timeout(ms(700), &[down]), None);
}

#[test]
fn members_are_random_distinct_and_never_all_of_w() {
    let a = path(0, 0);
    let mut e = Evolution::new(EvolutionParams::paper(), 9);
    for s in 100..110 {
        e.on_data_sent(ms(0), s, &a, &[s as u8; 10]);
    }
    // p = 0 drives r to 1: x is capped at |W| - 1 = 9.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        e.unrest();
        let m = members(&e.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap());
        assert_eq!(m.len(), 9);
        let mut d = m.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 9);
        assert!(m.iter().all(|s| (100..110).contains(s)));
        seen.insert(d);
    }
    // The left-out packet varies: the same coded packet is not repeated forever.
    assert!(seen.len() >= 5, "{}", seen.len());
    // Same seed, same choices.
    let mut again = Evolution::new(EvolutionParams::paper(), 9);
    let mut first = Evolution::new(EvolutionParams::paper(), 9);
    for s in 0..10 {
        again.on_data_sent(ms(0), s, &a, &[1]);
        first.on_data_sent(ms(0), s, &a, &[1]);
    }
    for _ in 0..10 {
        again.unrest();
        first.unrest();
        let x = members(&again.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap());
        let y = members(&first.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap());
        assert_eq!(x, y);
    }
}

#[test]
fn robust_soliton_matches_its_definition() {
    let (k, c, delta) = (20usize, 0.9, 0.1);
    let mut cdf = Vec::new();
    robust_soliton_cdf(k, c, delta, &mut cdf);
    assert_eq!(cdf.len(), k);
    close(cdf[k - 1], 1.0);
    assert!(cdf.windows(2).all(|w| w[0] <= w[1]));
    // R = 0.9 ln(200) √20 = 21.3 > k: the spike k/R rounds down to 0, clamped to 1, so
    // τ is all at degree 1.
    let kf = k as f64;
    let r = c * (kf / delta).ln() * kf.sqrt();
    let mass = |d: usize| {
        let df = d as f64;
        let rho = if d == 1 {
            1.0 / kf
        } else {
            1.0 / (df * (df - 1.0))
        };
        let tau = if d == 1 {
            r * (r / delta).ln() / kf
        } else {
            0.0
        };
        rho + tau
    };
    let beta: f64 = (1..=k).map(mass).sum();
    close(cdf[0], mass(1) / beta);
    close(cdf[2] - cdf[1], mass(3) / beta);
    // A large window has the spike inside: k = 1000, R = 0.9 ln(10^4) √1000 = 262, k/R = 3.
    robust_soliton_cdf(1000, c, delta, &mut cdf);
    let k = 1000.0f64;
    let r = c * (k / delta).ln() * k.sqrt();
    let spike = (k / r).floor() as usize;
    assert_eq!(spike, 3);
    let p = |d: usize| {
        if d == 1 {
            cdf[0]
        } else {
            cdf[d - 1] - cdf[d - 2]
        }
    };
    // ρ(2) + τ(2) against ρ(4): the ratio is fixed by the definition, whatever β is.
    let m2 = 1.0 / 2.0 + r / (2.0 * k);
    let m4 = 1.0 / 12.0;
    close(p(2) / p(4), m2 / m4);
    // An LT sender draws degrees with these frequencies.
    let a = path(0, 0);
    let mut lt = Lt::new(LtParams::default(), 5);
    for s in 0..20 {
        lt.on_data_sent(ms(0), s, &a, &[1]);
    }
    let mut counts = BTreeMap::new();
    let n = 20_000;
    for _ in 0..n {
        lt.unrest();
        let d = members(&lt.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap()).len();
        *counts.entry(d).or_insert(0u32) += 1;
    }
    robust_soliton_cdf(20, c, delta, &mut cdf);
    let f1 = f64::from(counts[&1]) / f64::from(n);
    let f2 = f64::from(counts[&2]) / f64::from(n);
    assert!((f1 - cdf[0]).abs() < 0.015, "{f1} vs {}", cdf[0]);
    assert!((f2 - (cdf[1] - cdf[0])).abs() < 0.015, "{f2}");
}

/// Members, bitmap, XOR of lengths, payload.
type OwnedCoded = (Vec<u32>, Vec<u8>, u16, Vec<u8>);

#[derive(Default)]
struct Sink(BTreeMap<u32, Vec<u8>>);

impl RecoveredSink for Sink {
    fn recovered(&mut self, seq: u32, payload: &[u8]) {
        self.0.insert(seq, payload.to_vec());
    }
}

#[test]
fn lt_packets_decode_like_the_reference_closure() {
    // A window of 30 packets; the receiver got each with probability 0.6 and then some LT
    // packets. The peeling decoder must know exactly what the closure of "a coded packet
    // with one unknown member determines it" knows; the immediate one at most that.
    let a = path(0, 0);
    for seed in 0..40u64 {
        let mut rng = super::Rng::new(seed);
        let pk: Vec<Vec<u8>> = (0..30u32)
            .map(|s| vec![s as u8; 1 + rng.below(40)])
            .collect();
        let mut lt = Lt::new(LtParams::default(), seed);
        for (s, p) in pk.iter().enumerate() {
            lt.on_data_sent(ms(0), s as u32, &a, p);
        }
        let got: Vec<u32> = (0..30).filter(|_| rng.f64() < 0.6).collect();
        let mut coded: Vec<OwnedCoded> = Vec::new();
        for _ in 0..15 {
            lt.unrest();
            let rep = lt.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap();
            let RepairBody::Coded(c) = rep.body else {
                panic!()
            };
            coded.push((
                c.members().collect(),
                c.bitmap.to_vec(),
                c.len_xor,
                c.payload.to_vec(),
            ));
        }
        let mut known: std::collections::BTreeSet<u32> = got.iter().copied().collect();
        loop {
            let next = coded.iter().find_map(|(m, ..)| {
                let u: Vec<_> = m.iter().filter(|s| !known.contains(*s)).collect();
                (u.len() == 1).then(|| *u[0])
            });
            let Some(s) = next else { break };
            known.insert(s);
        }
        for mode in [crate::XorDecoder::Immediate, crate::XorDecoder::Peeling] {
            let mut dec = XorDecoder::new(mode);
            let mut sink = Sink::default();
            let mut st = LossRecoveryStats::default();
            for &s in &got {
                dec.on_data(s, &pk[s as usize], &mut sink, &mut st);
            }
            for (m, bitmap, len_xor, payload) in &coded {
                let c = braid_wire::Coded {
                    seq: m[0],
                    len_xor: *len_xor,
                    bitmap,
                    payload,
                };
                dec.on_coded(&c, &mut sink, &mut st);
            }
            for (s, bytes) in &sink.0 {
                assert_eq!(bytes, &pk[*s as usize]);
                assert!(known.contains(s));
            }
            let all: std::collections::BTreeSet<u32> =
                got.iter().copied().chain(sink.0.keys().copied()).collect();
            if mode == crate::XorDecoder::Peeling {
                assert_eq!(all, known, "seed {seed}");
            } else {
                assert!(all.is_subset(&known));
            }
        }
    }
}

#[test]
fn coverage_choice_pairs_the_least_covered_with_the_most_covered() {
    let mut w = Window::new(16);
    for s in 0..6 {
        w.push(s, ms(100), &[s as u8]);
    }
    w.push(6, ms(100), &[6]);
    // Coverage by index: 3, 0, 2, 5, 1, 0, 1.
    for (i, c) in [3, 0, 2, 5, 1, 0, 1].into_iter().enumerate() {
        for _ in 0..c {
            w.cover(i);
        }
    }
    let mut rng = Rng::new(5);
    let (mut keys, mut picks) = (Vec::new(), Vec::new());
    let mut firsts = std::collections::BTreeSet::new();
    for _ in 0..40 {
        choose_by_coverage(&w, 3, &mut rng, &mut keys, &mut picks);
        assert_eq!(picks.len(), 3);
        // First the least covered (1 and 5 tie, chosen at random), then the two most
        // covered: 3 (5 times) and 0 (3 times).
        assert!([1, 5].contains(&picks[0]), "{picks:?}");
        firsts.insert(picks[0]);
        let mut rest = picks[1..].to_vec();
        rest.sort_unstable();
        assert_eq!(rest, vec![0, 3]);
    }
    assert_eq!(firsts.len(), 2, "ties are broken at random");
    choose_by_coverage(&w, 1, &mut rng, &mut keys, &mut picks);
    assert!(picks == [1] || picks == [5], "{picks:?}");
    // When x = |W| - 1 the others are random, so the packet left out varies.
    let mut left_out = std::collections::BTreeSet::new();
    for _ in 0..40 {
        choose_by_coverage(&w, 6, &mut rng, &mut keys, &mut picks);
        assert!([1, 5].contains(&picks[0]));
        let mut d = picks.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 6);
        left_out.extend((0..7).filter(|i| !picks.contains(i)));
    }
    assert!(left_out.len() >= 4, "{left_out:?}");
}

#[test]
fn coverage_choice_keeps_x_r_and_the_cap_and_rotates_the_window() {
    let a = path(0, 13107); // p = 0.2
    let cov = EvolutionParams {
        members: MemberChoice::Coverage,
        ..EvolutionParams::paper()
    };
    let mut c = Evolution::new(cov, 4);
    let mut r = Evolution::new(EvolutionParams::paper(), 4);
    for s in 0..5 {
        c.on_data_sent(ms(0), s, &a, &[s as u8; 10]);
        r.on_data_sent(ms(0), s, &a, &[s as u8; 10]);
    }
    let mut left_out = std::collections::BTreeSet::new();
    for k in 0..30 {
        c.unrest();
        r.unrest();
        let mc = members(&c.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap());
        let mr = members(&r.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap());
        // Same x (and so the same r) as the random choice; never all of W.
        assert_eq!(mc.len(), mr.len(), "packet {k}");
        close(r_of(&c), r_of(&r));
        assert!(mc.len() < 5);
        if mc.len() == 4 {
            left_out.extend((0..5).filter(|s| !mc.contains(s)));
        }
    }
    // r climbs to x = |W| - 1 = 4; which packet is left out varies.
    assert!(left_out.len() >= 3, "{left_out:?}");
    assert_eq!(c.stats().coded_sent, 30);
}

#[test]
fn sampled_estimate_sizes_packets_by_loss_and_falls_back_to_r() {
    let sampled = EvolutionParams::default();
    assert_eq!(sampled.estimate, crate::PresenceEstimate::Sampled);
    // 50% loss, ten packets: every sample misses several, so the best packet is one packet
    // alone; as coded packets repair samples, small combinations follow, and successive
    // packets spread over W instead of repeating one.
    let a = path(0, 32768);
    let mut e = Evolution::new(sampled, 2);
    for s in 0..10 {
        e.on_data_sent(ms(0), s, &a, &[s as u8; 10]);
    }
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..8 {
        e.unrest();
        let m = members(&e.poll_repair(ms(1), std::slice::from_ref(&a)).unwrap());
        assert!(m.len() <= if k == 0 { 1 } else { 3 }, "{k}: {m:?}");
        seen.extend(m);
    }
    assert!(seen.len() >= 7, "{seen:?}");
    let st = e.stats();
    assert!(
        st.present_fraction > 0.5 && st.present_fraction < 0.9,
        "{st:?}"
    );
    // 2% loss: few samples miss anything, and the packet combines the entries missing in
    // them (more than one), never all of W.
    let b = path(0, 1311);
    let mut e = Evolution::new(sampled, 3);
    for s in 0..40 {
        e.on_data_sent(ms(0), s, &b, &[s as u8; 10]);
    }
    let m = members(&e.poll_repair(ms(1), std::slice::from_ref(&b)).unwrap());
    assert!(m.len() > 1 && m.len() < 40, "{m:?}");
    // No loss: no sample misses anything, and §4.1's rule decides (r = 1: |W| - 1).
    let c = path(0, 0);
    let mut e = Evolution::new(sampled, 4);
    for s in 0..10 {
        e.on_data_sent(ms(0), s, &c, &[s as u8; 10]);
    }
    let m = members(&e.poll_repair(ms(1), std::slice::from_ref(&c)).unwrap());
    assert_eq!(m.len(), 9);
    close(e.stats().present_fraction, 1.0);
}

#[test]
fn coverage_cap_follows_the_loss_rate() {
    // The fewest k with p^k <= 1e-5, between 1 and 8.
    assert_eq!(coverage_cap(0.0), 1);
    assert_eq!(coverage_cap(0.005), 3);
    assert_eq!(coverage_cap(0.05), 4);
    assert_eq!(coverage_cap(0.09), 5);
    assert_eq!(coverage_cap(0.5), MAX_COVERAGE);
    assert_eq!(coverage_cap(1.0), MAX_COVERAGE);
}

#[test]
fn a_lone_packet_is_coded_only_up_to_the_cap() {
    // 10% loss: the cap is 5 coded packets per packet of W.
    let mut a = path(0, 6553);
    let mut e = Evolution::new(EvolutionParams::paper(), 3);
    a.on_send(ms(0), 100, SentKind::Data);
    e.on_data_sent(ms(0), 0, &a, &[7; 60]);
    let mut sent = 0;
    for t in (10..400).step_by(10) {
        if let Some(rep) = e.poll_repair(ms(t), std::slice::from_ref(&a)) {
            assert_eq!(members(&rep), vec![0]);
            sent += 1;
        }
    }
    assert_eq!(sent, coverage_cap(a.loss_rate()));
    assert_eq!(sent, 5);
    // Nothing more to wait for either, though the data is still new.
    assert_eq!(e.poll_timeout(ms(400), std::slice::from_ref(&a)), None);
    // A new packet opens coding again, for the packets not yet covered enough.
    e.on_data_sent(ms(400), 1, &a, &[8; 60]);
    assert!(e.poll_repair(ms(410), std::slice::from_ref(&a)).is_some());
}
