//! Data on several paths: round trips, replays, reordering across paths, address changes.

use super::*;
use crate::replay::WINDOW;

#[test]
fn data_round_trips_on_several_paths_both_ways() {
    let mut n = Net::connected(&[0, 1, 7]);
    let session = n.gw.session().unwrap();
    for i in 0..50u32 {
        for p in [0, 1, 7] {
            let msg = format!("up {i} on {p}").into_bytes();
            let d = n.gw_seal(p, &msg);
            assert_eq!(d.len(), msg.len() + DATA_OVERHEAD);
            match n.up(p, d) {
                (
                    Ok(Received::Data {
                        session: s,
                        path,
                        payload,
                    }),
                    _,
                    buf,
                ) => {
                    assert_eq!((s, path), (session, p));
                    assert_eq!(&buf[payload], &msg[..]);
                }
                other => panic!("{other:?}"),
            }
            let msg = format!("down {i} on {p}").into_bytes();
            let d = n.srv_seal(p, &msg);
            assert_eq!(n.gateway_opens(p, d), Ok(msg));
        }
    }
    assert_eq!(n.srv.stats().dropped(), 0);
    assert_eq!(n.gw.stats().dropped(), 0);
    assert_eq!(n.srv.stats().opened, 150 + 3);
}

#[test]
fn replays_are_dropped_and_counted() {
    let mut n = Net::connected(&[0, 1]);
    let a = n.gw_seal(0, b"a");
    let b = n.gw_seal(1, b"b");
    assert!(n.server_opens(0, a.clone()).is_ok());
    assert!(n.server_opens(1, b.clone()).is_ok());
    assert!(matches!(
        n.server_opens(0, a.clone()),
        Err(Dropped::Replayed {
            path: 0,
            counter: 1
        })
    ));
    // A replay arriving from another address or "on" another path is the same replay.
    assert!(matches!(
        n.server_opens(1, a),
        Err(Dropped::Replayed { .. })
    ));
    assert!(matches!(
        n.server_opens(1, b),
        Err(Dropped::Replayed { .. })
    ));
    assert_eq!(n.srv.stats().drop_replayed, 3);
    let down = n.srv_seal(0, b"down");
    assert!(n.gateway_opens(0, down.clone()).is_ok());
    assert!(matches!(
        n.gateway_opens(0, down),
        Err(Dropped::Replayed { .. })
    ));
    assert_eq!(n.gw.stats().drop_replayed, 1);
}

/// Paths that differ in delay by hundreds of milliseconds at hundreds of Mbit/s: 1000 ms at
/// 300 Mbit/s is about 27,000 datagrams of 1400 bytes by which the fast paths run ahead. A
/// single WireGuard-size window would refuse the slow path's datagrams; per-path windows
/// take them all, and still catch every replay.
#[test]
fn cross_path_reordering_far_beyond_one_window_is_accepted() {
    let mut n = Net::connected(&[0, 1, 2]);
    let ahead = 3 * WINDOW as usize + 1000;
    assert!(ahead as u64 > 3 * WINDOW);
    // Sent round-robin over three paths; path 0 is the slow one.
    let mut slow = Vec::new();
    let mut fast = Vec::new();
    for i in 0..3 * ahead {
        let p = (i % 3) as PathId;
        let d = n.gw_seal(p, &(i as u32).to_be_bytes());
        if p == 0 {
            slow.push(d);
        } else {
            fast.push((p, d));
        }
    }
    // Everything on the fast paths arrives first, then the slow path's, in its own order.
    let mut got = 0;
    for (p, d) in fast {
        n.server_opens(p, d).unwrap();
        got += 1;
    }
    for d in slow.iter().cloned() {
        n.server_opens(0, d).unwrap();
        got += 1;
    }
    assert_eq!(got, 3 * ahead);
    assert_eq!(n.srv.stats().dropped(), 0);
    // Every datagram once more: all refused, as replays or as behind the window.
    for d in slow {
        assert!(matches!(
            n.server_opens(0, d),
            Err(Dropped::Replayed { .. } | Dropped::TooOld { .. })
        ));
    }
    let s = n.srv.stats();
    assert_eq!(s.drop_replayed, WINDOW);
    assert_eq!(s.drop_replayed + s.drop_too_old, ahead as u64);
}

#[test]
fn reordering_within_a_path_is_accepted_up_to_the_window() {
    let mut n = Net::connected(&[0]);
    let ds: Vec<_> = (0..WINDOW as usize + 10)
        .map(|i| n.gw_seal(0, &[i as u8]))
        .collect();
    // The newest first, then the rest newest to oldest: the oldest ones fall out.
    let mut ok = 0;
    let mut too_old = 0;
    for d in ds.into_iter().rev() {
        match n.server_opens(0, d) {
            Ok(_) => ok += 1,
            Err(Dropped::TooOld { .. }) => too_old += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(ok, WINDOW as usize);
    assert_eq!(too_old, 10);
    assert_eq!(n.srv.stats().drop_too_old, 10);
}

#[test]
fn a_path_that_changes_address_keeps_its_session() {
    let mut n = Net::connected(&[0, 1]);
    let session = n.gw.session().unwrap();
    // Path 1's modem reconnects: a new source address. Its datagrams still authenticate
    // and name their session and path, which is what the daemon updates the address by.
    n.from[1] = addr(1, 9);
    let d = n.gw_seal(1, b"after the move");
    match n.up(1, d) {
        (
            Ok(Received::Data {
                session: s, path, ..
            }),
            _,
            _,
        ) => assert_eq!((s, path), (session, 1)),
        other => panic!("{other:?}"),
    }
    // A forgery from yet another address authenticates nothing and names nothing.
    n.from[1] = addr(1, 10);
    let mut d = n.gw_seal(1, b"forged");
    let last = d.len() - 1;
    d[last] ^= 1;
    assert_eq!(n.up(1, d).0, Err(Dropped::Forged));
    // The rekey works from the new address too, into the same session.
    n.from[1] = addr(1, 9);
    n.advance(limits::REKEY_AFTER_TIME);
    n.exchange();
    assert_eq!(n.gw.session(), Some(session));
    assert_eq!(n.srv.session_count(), 1);
    let d = n.gw_seal(1, b"still here");
    assert_eq!(n.server_opens(1, d), Ok(b"still here".to_vec()));
}

#[test]
fn the_path_limit_is_enforced_on_both_sides() {
    let mut n = Net::new(&[0]);
    let mut c = server_config();
    c.max_paths = 2;
    n.srv = Server::new(c, n.now).unwrap();
    n.exchange();
    let d = n.gw_seal(1, b"x");
    assert!(n.server_opens(1, d).is_ok());
    let d = n.gw_seal(2, b"x");
    assert_eq!(n.server_opens(2, d), Err(Dropped::TooManyPaths(2)));
    let session = n.gw.session().unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(
        n.srv.seal(n.now, session, 3, &mut buf, 1),
        Err(SealError::TooManyPaths(3))
    );
}

#[test]
fn the_server_refuses_to_seal_for_unknown_sessions_and_small_buffers() {
    let mut n = Net::connected(&[0]);
    let session = n.gw.session().unwrap();
    let other = SessionId::new(session.get() ^ 1).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(
        n.srv.seal(n.now, other, 0, &mut buf, 8),
        Err(SealError::UnknownSession(other.get()))
    );
    assert_eq!(
        n.srv.seal(n.now, session, 0, &mut buf, 40),
        Err(SealError::BufferTooSmall { need: 72, have: 64 })
    );
    assert_eq!(n.srv.stats().seal_refused, 2);
}

proptest::proptest! {
    #![proptest_config(fixed(64))]

    /// Any interleaving of the paths' streams, each path reordered within its window and
    /// with duplicates thrown in, delivers every datagram exactly once.
    #[test]
    fn any_interleaving_of_paths_delivers_each_datagram_once(
        picks in proptest::collection::vec(0u8..3, 300..900),
        swaps in proptest::collection::vec((0usize..1000, 1usize..64), 0..60),
        dups in proptest::collection::vec(0usize..1000, 0..40),
    ) {
        let mut n = Net::connected(&[0, 1, 2]);
        let mut per_path: Vec<Vec<(u32, Vec<u8>)>> = vec![Vec::new(); 3];
        for (i, &p) in picks.iter().enumerate() {
            let d = n.gw_seal(p, &(i as u32).to_be_bytes());
            per_path[p as usize].push((i as u32, d));
        }
        // Reorder within each path by less than its window.
        for (at, by) in swaps {
            for q in &mut per_path {
                if q.len() > by {
                    let a = at % (q.len() - by);
                    q.swap(a, a + by);
                }
            }
        }
        // Interleave the paths in the order of the picks, then add duplicates.
        let mut cursors = [0usize; 3];
        let mut arrivals: Vec<(PathId, u32, Vec<u8>)> = Vec::new();
        for &p in &picks {
            let (i, d) = per_path[p as usize][cursors[p as usize]].clone();
            cursors[p as usize] += 1;
            arrivals.push((p, i, d));
        }
        for at in dups {
            let a = arrivals[at % arrivals.len()].clone();
            arrivals.push(a);
        }
        let mut seen = std::collections::BTreeSet::new();
        for (p, i, d) in arrivals {
            match n.server_opens(p, d) {
                Ok(plain) => {
                    proptest::prop_assert_eq!(plain, i.to_be_bytes().to_vec());
                    proptest::prop_assert!(seen.insert(i), "datagram {} twice", i);
                }
                Err(Dropped::Replayed { .. }) => proptest::prop_assert!(seen.contains(&i)),
                Err(e) => proptest::prop_assert!(false, "datagram {}: {}", i, e),
            }
        }
        proptest::prop_assert_eq!(seen.len(), picks.len());
    }
}
