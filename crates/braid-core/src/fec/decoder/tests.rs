//! The XOR decoder against a brute-force reference: which packets a sequence of data and
//! coded arrivals lets the receiver know, and their exact bytes.

use std::collections::BTreeMap;

use super::*;
use crate::fec::rng::Rng;
use crate::fec::xor::CodedBuilder;

#[derive(Default)]
struct Sink(BTreeMap<u32, Vec<u8>>);

impl RecoveredSink for Sink {
    fn recovered(&mut self, seq: u32, payload: &[u8]) {
        assert!(
            self.0.insert(seq, payload.to_vec()).is_none(),
            "{seq} twice"
        );
    }
}

fn packets(rng: &mut Rng, n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = rng.below(60);
            (0..len).map(|_| rng.next_u64() as u8).collect()
        })
        .collect()
}

enum Arrival {
    Data(u32),
    Coded(Vec<u32>),
}

/// The brute-force reference: a packet is known once it arrived, or once some coded packet
/// received so far has it as its only unknown member (immediately, or at any later time
/// when `peeling`).
fn reference(arrivals: &[Arrival], peeling: bool) -> Vec<u32> {
    let mut known = std::collections::BTreeSet::new();
    let mut recovered = Vec::new();
    let mut kept: Vec<&Vec<u32>> = Vec::new();
    for a in arrivals {
        match a {
            Arrival::Data(s) => {
                known.insert(*s);
            }
            Arrival::Coded(m) => {
                let unknown: Vec<_> = m.iter().filter(|s| !known.contains(*s)).collect();
                if unknown.len() == 1 {
                    known.insert(*unknown[0]);
                    recovered.push(*unknown[0]);
                } else if unknown.len() > 1 && peeling {
                    kept.push(m);
                }
            }
        }
        if peeling {
            loop {
                let next = kept.iter().find_map(|m| {
                    let u: Vec<_> = m.iter().filter(|s| !known.contains(*s)).collect();
                    (u.len() == 1).then(|| *u[0])
                });
                let Some(s) = next else { break };
                known.insert(s);
                recovered.push(s);
            }
        }
    }
    recovered.sort_unstable();
    recovered
}

fn run(seed: u64, peeling: bool) -> (usize, usize) {
    let mut rng = Rng::new(seed);
    let n = 30u32;
    let pk = packets(&mut rng, n);
    // Each packet arrives with probability 0.7; coded packets of 1 to 4 members (so no
    // coded packet misses more than the decoder keeps) arrive in between.
    let mut arrivals = Vec::new();
    for s in 0..n {
        if rng.f64() < 0.7 {
            arrivals.push(Arrival::Data(s));
        }
        if s >= 4 && rng.f64() < 0.6 {
            let x = 1 + rng.below(4);
            let mut m: Vec<u32> = Vec::new();
            while m.len() < x {
                let c = s - rng.below(5) as u32;
                if !m.contains(&c) {
                    m.push(c);
                }
            }
            arrivals.push(Arrival::Coded(m));
        }
    }
    let mode = if peeling {
        crate::XorDecoder::Peeling
    } else {
        crate::XorDecoder::Immediate
    };
    let mut dec = XorDecoder::new(mode);
    let mut sink = Sink::default();
    let mut st = LossRecoveryStats::default();
    let mut b = CodedBuilder::default();
    for a in &arrivals {
        match a {
            Arrival::Data(s) => dec.on_data(*s, &pk[*s as usize], &mut sink, &mut st),
            Arrival::Coded(m) => {
                let hi = *m.iter().max().unwrap();
                b.begin(hi);
                for &s in m {
                    assert!(b.add(s, &pk[s as usize]));
                }
                dec.on_coded(&b.coded(), &mut sink, &mut st);
            }
        }
    }
    let want = reference(&arrivals, peeling);
    assert_eq!(
        sink.0.keys().copied().collect::<Vec<_>>(),
        want,
        "seed {seed} peeling {peeling}"
    );
    for (s, bytes) in &sink.0 {
        assert_eq!(bytes, &pk[*s as usize], "seed {seed}: bytes of {s}");
    }
    assert_eq!(st.recovered as usize, want.len());
    (want.len(), st.coded_undecodable as usize)
}

#[test]
fn recovers_exactly_when_one_member_is_missing() {
    let (mut rec, mut undec) = (0, 0);
    for seed in 0..300 {
        let (r, u) = run(seed, false);
        rec += r;
        undec += u;
    }
    // The cases are not degenerate: both outcomes happen often.
    assert!(rec > 300 && undec > 300, "{rec} {undec}");
}

#[test]
fn peeling_recovers_what_the_reference_closure_recovers() {
    let (mut plain, mut peeled) = (0, 0);
    for seed in 0..300 {
        plain += run(seed, false).0;
        peeled += run(seed, true).0;
    }
    assert!(peeled > plain, "{peeled} {plain}");
}

#[test]
fn hostile_coded_packets_are_counted_not_fatal() {
    let mut dec = XorDecoder::new(crate::XorDecoder::Immediate);
    let mut sink = Sink::default();
    let mut st = LossRecoveryStats::default();
    dec.on_data(9, &[1, 2, 3, 4], &mut sink, &mut st);
    // Member 9 is longer than the coded payload; then a length beyond the payload.
    for (payload, len_xor) in [(&[0u8; 2][..], 0u16), (&[0u8; 8][..], 4 ^ 500)] {
        let c = Coded {
            seq: 10,
            len_xor,
            bitmap: &[1],
            payload,
        };
        dec.on_coded(&c, &mut sink, &mut st);
    }
    assert_eq!(st.coded_malformed, 2);
    assert!(sink.0.is_empty());
    // A full bitmap of unknown members is merely undecodable.
    let c = Coded {
        seq: 5000,
        len_xor: 0,
        bitmap: &[0xff; 255],
        payload: &[],
    };
    dec.on_coded(&c, &mut sink, &mut st);
    assert_eq!(st.coded_undecodable, 1);
}
