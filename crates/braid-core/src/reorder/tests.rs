//! The resequencing buffer against a sorted-list reference, and its corner cases.

use proptest::prelude::*;

use super::*;

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn drain(r: &mut Resequencer) -> Vec<u32> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while r.poll_deliver(&mut buf) {
        out.push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
    }
    out
}

fn insert(r: &mut Resequencer, now: Instant, seq: u32) -> Insert {
    r.insert(now, seq, &seq.to_be_bytes())
}

#[test]
fn in_order_passes_straight_through() {
    let mut r = Resequencer::new(Duration::from_millis(50), 64);
    for s in 0..10 {
        assert_eq!(insert(&mut r, ms(s.into()), s), Insert::Ready);
    }
    assert_eq!(drain(&mut r), (0..10).collect::<Vec<_>>());
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn hole_filled_before_timeout() {
    let mut r = Resequencer::new(Duration::from_millis(50), 64);
    insert(&mut r, ms(0), 0);
    assert_eq!(insert(&mut r, ms(1), 2), Insert::Buffered);
    assert_eq!(insert(&mut r, ms(2), 3), Insert::Buffered);
    assert_eq!(drain(&mut r), vec![0]);
    assert_eq!(r.poll_timeout(), Some(ms(51)));
    assert_eq!(insert(&mut r, ms(10), 1), Insert::Ready);
    assert_eq!(drain(&mut r), vec![1, 2, 3]);
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(r.stats().holes_skipped, 0);
}

#[test]
fn hole_timeout_releases_and_late_packet_still_delivered() {
    let mut r = Resequencer::new(Duration::from_millis(50), 64);
    insert(&mut r, ms(0), 0);
    insert(&mut r, ms(1), 2);
    insert(&mut r, ms(30), 4);
    // Early timeout call is harmless.
    r.handle_timeout(ms(40));
    assert_eq!(drain(&mut r), vec![0]);
    // At 51 ms packet 2 has waited 50 ms: hole 1 is given up, 2 leaves; 4 still waits on 3.
    r.handle_timeout(ms(51));
    assert_eq!(drain(&mut r), vec![2]);
    assert_eq!(r.poll_timeout(), Some(ms(80)));
    r.handle_timeout(ms(80));
    assert_eq!(drain(&mut r), vec![4]);
    assert_eq!(r.stats().holes_skipped, 2);
    // 1 arrives late: delivered once; a second copy is a duplicate.
    assert_eq!(insert(&mut r, ms(90), 1), Insert::Ready);
    assert_eq!(insert(&mut r, ms(91), 1), Insert::Duplicate);
    assert_eq!(insert(&mut r, ms(92), 2), Insert::Duplicate);
    assert_eq!(drain(&mut r), vec![1]);
    assert_eq!(r.stats().late_delivered, 1);
    assert_eq!(r.stats().duplicates, 2);
}

#[test]
fn full_buffer_gives_up_oldest_holes() {
    let mut r = Resequencer::new(Duration::from_secs(10), 4);
    insert(&mut r, ms(0), 1); // waits for 0
    insert(&mut r, ms(0), 2);
    // 5 is 5 ahead of next = 0 with limit 4: 0 and 1 must go (1 delivered, 0 given up).
    assert_eq!(insert(&mut r, ms(0), 5), Insert::Buffered);
    assert_eq!(drain(&mut r), vec![1, 2]);
    assert_eq!(r.next_expected(), 3);
    assert_eq!(insert(&mut r, ms(0), 0), Insert::Ready); // late, still within the window
    assert_eq!(insert(&mut r, ms(0), 100), Insert::Buffered);
    assert_eq!(drain(&mut r), vec![0, 5]);
    assert_eq!(insert(&mut r, ms(0), 3), Insert::TooOld);
}

#[test]
fn wraps_around_u32() {
    let mut r = Resequencer::new(Duration::from_millis(50), 16);
    r.next = u32::MAX - 1;
    insert(&mut r, ms(0), 0);
    insert(&mut r, ms(0), u32::MAX);
    insert(&mut r, ms(0), u32::MAX - 1);
    assert_eq!(drain(&mut r), vec![u32::MAX - 1, u32::MAX, 0]);
}

proptest! {
    /// Packets displaced by at most `d` positions, some lost, one arriving per millisecond,
    /// with a hole timeout longer than any displacement: the output is exactly the sorted
    /// list of distinct packets received, whatever the losses and duplicates.
    #[test]
    fn matches_sorted_reference(
        n in 1usize..400,
        d in 0usize..20,
        seed in any::<u64>(),
        loss_pct in 0u64..30,
        dup_pct in 0u64..10,
    ) {
        let mut rng = seed | 1;
        let mut next_rand = move || { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; rng };
        // Displace by sorting on (index + random jitter in [0, d]).
        let mut order: Vec<(usize, u32)> = (0..n as u32)
            .map(|s| (s as usize + (next_rand() as usize % (d + 1)), s))
            .collect();
        order.sort();
        let mut arrivals = Vec::new();
        for (_, s) in order {
            if next_rand() % 100 < loss_pct { continue; }
            arrivals.push(s);
            if next_rand() % 100 < dup_pct { arrivals.push(s); }
        }
        // A packet arrives at most d positions late, each position taking at most two
        // arrivals (a duplicate): 2 d ms.
        let mut r = Resequencer::new(Duration::from_millis(2 * d as u64 + 5), 64);
        let mut out = Vec::new();
        for (t, &s) in arrivals.iter().enumerate() {
            let now = ms(t as u64);
            r.handle_timeout(now);
            insert(&mut r, now, s);
            out.extend(drain(&mut r));
        }
        r.handle_timeout(ms(1_000_000));
        out.extend(drain(&mut r));
        let mut reference: Vec<u32> = arrivals.clone();
        reference.sort_unstable();
        reference.dedup();
        prop_assert_eq!(out, reference);
        prop_assert_eq!(r.waiting(), 0);
    }

    /// Arbitrary arrivals and timer calls: every distinct packet within the window is
    /// delivered exactly once, and nothing waits longer than the hole timeout.
    #[test]
    fn delivers_each_packet_once_and_on_time(
        seqs in proptest::collection::vec(0u32..200, 1..300),
        limit in 2usize..80,
    ) {
        let timeout = Duration::from_millis(50);
        let mut r = Resequencer::new(timeout, limit);
        let mut seen = std::collections::BTreeSet::new();
        let mut delivered = std::collections::BTreeSet::new();
        let mut dropped = 0usize;
        for (t, &s) in seqs.iter().enumerate() {
            let now = ms(10 * t as u64);
            r.handle_timeout(now);
            if let Some(deadline) = r.poll_timeout() {
                prop_assert!(deadline > now);
            }
            match insert(&mut r, now, s) {
                Insert::TooOld => dropped += 1,
                Insert::Duplicate => prop_assert!(seen.contains(&s)),
                _ => {}
            }
            seen.insert(s);
            for d in drain(&mut r) {
                prop_assert!(delivered.insert(d), "{} delivered twice", d);
            }
        }
        r.handle_timeout(ms(1_000_000));
        for d in drain(&mut r) {
            prop_assert!(delivered.insert(d), "{} delivered twice", d);
        }
        prop_assert!(delivered.is_subset(&seen));
        prop_assert!(seen.len() - delivered.len() <= dropped);
    }
}

#[test]
fn a_far_jump_costs_the_window_not_the_distance() {
    let mut r = Resequencer::new(Duration::from_millis(50), 8);
    insert(&mut r, ms(0), 0);
    insert(&mut r, ms(0), 2);
    // 2^31 - 1 ahead: must not loop two billion times. It waits at the top of the window
    // (limit 8) for the holes just below it; everything older is given up.
    let far = i32::MAX as u32;
    assert_eq!(insert(&mut r, ms(0), far), Insert::Buffered);
    assert_eq!(drain(&mut r), vec![0, 2]);
    assert_eq!(r.next_expected(), far - 7);
    assert_eq!(r.stats().holes_skipped, u64::from(far) - 9);
    r.handle_timeout(ms(50));
    assert_eq!(drain(&mut r), vec![far]);
    // The packet just delivered is recognised as a duplicate; old ones are too old.
    assert_eq!(insert(&mut r, ms(60), far), Insert::Duplicate);
    assert_eq!(insert(&mut r, ms(60), 2), Insert::TooOld);
}

#[test]
fn unordered_packets_leave_at_once_and_are_no_holes() {
    let mut r = Resequencer::new(Duration::from_millis(50), 64);
    insert(&mut r, ms(0), 0);
    // 2 and 3 belong to flows pinned to a fast path: delivered on arrival.
    assert_eq!(
        r.insert_unordered(ms(1), 2, &2u32.to_be_bytes()),
        Insert::Ready
    );
    assert_eq!(
        r.insert_unordered(ms(1), 3, &3u32.to_be_bytes()),
        Insert::Ready
    );
    // 4 is ordered: it waits for 1 only.
    assert_eq!(insert(&mut r, ms(2), 4), Insert::Buffered);
    assert_eq!(drain(&mut r), vec![0, 2, 3]);
    assert_eq!(insert(&mut r, ms(3), 1), Insert::Ready);
    assert_eq!(drain(&mut r), vec![1, 4]);
    assert_eq!(r.next_expected(), 5);
    // Copies of 2 and 3, ordered or not, are duplicates.
    assert_eq!(insert(&mut r, ms(4), 2), Insert::Duplicate);
    assert_eq!(
        r.insert_unordered(ms(4), 3, &3u32.to_be_bytes()),
        Insert::Duplicate
    );
    assert_eq!(
        r.insert_unordered(ms(5), 7, &7u32.to_be_bytes()),
        Insert::Ready
    );
    assert_eq!(insert(&mut r, ms(5), 7), Insert::Duplicate);
    assert_eq!(r.stats().holes_skipped, 0);
    assert_eq!(r.poll_timeout(), None);
}

/// A hole whose repair is still expected is held past the hole timeout: packets before it
/// leave, it and those behind it wait until the repair arrives or is no longer expected.
#[test]
fn a_hole_under_repair_is_held_past_the_timeout() {
    let mut r = Resequencer::new(Duration::from_millis(50), 64);
    insert(&mut r, ms(0), 0);
    insert(&mut r, ms(1), 2);
    insert(&mut r, ms(2), 4);
    insert(&mut r, ms(3), 5);
    assert_eq!(drain(&mut r), vec![0]);
    // Hole 1 was given up by the repair; hole 3's repair is expected until 120 ms.
    let expected = |s: u32| (s == 3).then(|| ms(120));
    assert_eq!(r.poll_timeout_repairing(expected), Some(ms(51)));
    r.handle_timeout_repairing(ms(60), expected);
    assert_eq!(drain(&mut r), vec![2]);
    assert_eq!(r.poll_timeout_repairing(expected), Some(ms(120)));
    r.handle_timeout_repairing(ms(100), expected);
    assert!(drain(&mut r).is_empty());
    // The repair arrives: everything behind it follows, and only hole 1 was skipped.
    assert_eq!(
        r.insert_resent(ms(110), 3, &3u32.to_be_bytes()),
        Insert::Ready
    );
    assert_eq!(drain(&mut r), vec![3, 4, 5]);
    assert_eq!(r.stats().holes_skipped, 1);

    // A repair that never comes: the hole is given up once it is no longer expected.
    let mut r = Resequencer::new(Duration::from_millis(50), 64);
    insert(&mut r, ms(0), 0);
    insert(&mut r, ms(1), 2);
    assert_eq!(drain(&mut r), vec![0]);
    r.handle_timeout_repairing(ms(60), |s| (s == 1).then(|| ms(120)));
    assert!(drain(&mut r).is_empty());
    r.handle_timeout_repairing(ms(120), |s| (s == 1).then(|| ms(120)));
    assert_eq!(drain(&mut r), vec![2]);
    assert_eq!(r.stats().holes_skipped, 1);
}
