//! Opening a session: the IK round trip, payloads, session ids, key confirmation, restarts.

use super::*;
use crate::envelope::{Envelope, MessageType};

#[test]
fn handshake_round_trip_establishes_one_session_on_both_ends() {
    let mut n = Net::new(&[0, 1, 2]);
    assert!(!n.gw.is_connected(n.now));
    let mut buf = [0u8; 64];
    assert_eq!(
        n.gw.seal(n.now, 0, &mut buf, 8),
        Err(SealError::NotConnected)
    );

    // The same initiation goes out on every path.
    let tx = n.gw_transmits();
    assert_eq!(tx.iter().map(|t| t.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(tx.windows(2).all(|w| w[0].1 == w[1].1));
    assert!(matches!(
        Envelope::parse(&tx[0].1),
        Ok(Envelope::Initiation(_))
    ));
    assert_eq!(session_id(&tx[0].1), Some(0), "a new session names none");

    // The first copy opens the session; the others are answered with the same response,
    // from a cache, without new work or state.
    let mut copies = tx.into_iter();
    let (p0, first) = copies.next().unwrap();
    let (r, reply, _) = n.up(p0, first);
    let reply = reply.expect("a response");
    assert!(matches!(r, Ok(Received::Reply { .. })));
    let mut other_replies = Vec::new();
    for (p, d) in copies {
        let (r, again, _) = n.up(p, d);
        assert!(matches!(r, Ok(Received::Reply { .. })));
        assert_eq!(again.as_ref(), Some(&reply));
        other_replies.push((p, again.unwrap()));
    }
    assert_eq!(n.srv.stats().duplicate_handshakes, 2);
    assert_eq!(n.srv.session_count(), 1);
    let srv_events = n.srv_events();
    let [Event::Established {
        session,
        peer,
        payload,
    }] = &srv_events[..]
    else {
        panic!("{srv_events:?}")
    };
    assert_eq!(*peer, key(GW_KEY).public_key());
    assert_eq!(payload, b"bus-17 braid/0.1");
    assert_eq!(session_id(&reply), Some(session.get()));

    // The server cannot send before the gateway used the new keys.
    let mut buf = [0u8; 64];
    assert_eq!(
        n.srv.seal(n.now, *session, 0, &mut buf, 8),
        Err(SealError::NoKeys)
    );

    assert_eq!(n.down(p0, reply).0, Ok(Received::Handshake));
    assert_eq!(n.gw.session(), Some(*session));
    // The copies of the response that came back on the other paths change nothing.
    for (p, d) in other_replies {
        assert_eq!(n.down(p, d).0, Ok(Received::Handshake));
    }
    assert_eq!(n.gw.stats().duplicate_handshakes, 2);
    assert!(n.gw.is_connected(n.now));
    let gw_events = n.gw_events();
    assert_eq!(
        gw_events,
        vec![Event::Established {
            session: *session,
            peer: key(SRV_KEY).public_key(),
            payload: b"server-a".to_vec()
        }]
    );

    // Key confirmation: a keepalive on every path, which the server accepts.
    let keepalives = n.gw_transmits();
    assert_eq!(keepalives.len(), 3);
    for (p, d) in keepalives {
        assert_eq!(d.len(), DATA_OVERHEAD);
        assert_eq!(
            n.up(p, d).0,
            Ok(Received::Keepalive {
                session: *session,
                path: p
            })
        );
    }
    assert!(n.srv.seal(n.now, *session, 0, &mut buf, 8).is_ok());
    assert_eq!(n.srv.stats().handshakes, 1);
    assert_eq!(n.gw.stats().handshakes, 1);
    assert_eq!(n.srv.stats().dropped(), 0);
    assert_eq!(n.gw.stats().dropped(), 0);
    assert_eq!(n.gw_events(), vec![]);
}

#[test]
fn handshakes_are_deterministic_under_a_fixed_seed() {
    let a = Net::new(&[0]).gw_transmits();
    let b = Net::new(&[0]).gw_transmits();
    assert_eq!(a, b);
}

#[test]
fn the_session_id_is_at_bytes_4_to_7_of_every_message_after_the_handshake() {
    let mut n = Net::connected(&[0, 1]);
    let id = n.gw.session().unwrap().get();
    let d = n.gw_seal(1, b"payload");
    assert_eq!(session_id(&d), Some(id));
    let d = n.srv_seal(0, b"payload");
    assert_eq!(session_id(&d), Some(id));
    // A rekey initiation names the session, so a load balancer routes it to its server.
    n.advance(limits::REKEY_AFTER_TIME);
    n.gw.handle_timeout(n.now);
    let tx = n.gw_transmits();
    assert!(!tx.is_empty());
    for (_, d) in &tx {
        assert_eq!(d[0], MessageType::Initiation as u8);
        assert_eq!(session_id(d), Some(id));
    }
    let (_, reply, _) = n.up(tx[0].0, tx[0].1.clone());
    let reply = reply.unwrap();
    assert_eq!(reply[0], MessageType::Response as u8);
    assert_eq!(session_id(&reply), Some(id));
}

#[test]
fn a_restarted_gateway_replaces_its_old_session() {
    let mut n = Net::connected(&[0]);
    let old = n.gw.session().unwrap();
    let old_datagram = n.gw_seal(0, b"old");
    n.srv_events();
    n.advance(Duration::from_secs(3));
    // The same key, a new process: its clock reads later than at the first start.
    let mut c = gateway_config(GW_KEY);
    c.unix_time += Duration::from_secs(4);
    c.seed = Seed::from_u64(999);
    n.gw = Gateway::new(c, &[0], n.now).unwrap();
    n.exchange();
    let new = n.gw.session().unwrap();
    assert_ne!(new, old);
    assert_eq!(n.srv.session_count(), 1);
    let ev = n.srv_events();
    assert!(ev.contains(&Event::Closed {
        session: old,
        reason: CloseReason::Replaced
    }));
    assert!(matches!(ev.last(), Some(Event::Established { session, .. }) if *session == new));
    // The old session's datagrams are now for an unknown session; the new one carries data.
    assert_eq!(
        n.server_opens(0, old_datagram),
        Err(Dropped::UnknownSession(old.get()))
    );
    let d = n.gw_seal(0, b"x");
    assert_eq!(n.server_opens(0, d), Ok(b"x".to_vec()));
}

#[test]
fn a_restarted_gateway_with_a_clock_behind_is_refused_until_it_catches_up() {
    let mut n = Net::connected(&[0]);
    n.advance(Duration::from_secs(1));
    let mut c = gateway_config(GW_KEY);
    c.unix_time -= Duration::from_secs(60);
    n.gw = Gateway::new(c, &[0], n.now).unwrap();
    n.exchange();
    assert_eq!(n.gw.session(), None);
    assert!(n.srv.stats().drop_handshake_replay >= 1);
}

#[test]
fn a_replayed_initiation_changes_nothing() {
    let mut n = Net::new(&[0]);
    let tx = n.gw_transmits();
    let (_, first, _) = n.up(0, tx[0].1.clone());
    assert!(first.is_some());
    assert_eq!(n.srv_events().len(), 1);
    // Soon after, it is taken for a copy from another path: the same response again.
    n.advance(Duration::from_secs(1));
    let (_, again, _) = n.up(0, tx[0].1.clone());
    assert_eq!(again, first);
    // Later, it is a replay: dropped.
    n.advance(limits::REKEY_TIMEOUT);
    let (r, reply, _) = n.up(0, tx[0].1.clone());
    assert_eq!(r, Err(Dropped::HandshakeReplay));
    assert!(reply.is_none());
    assert_eq!(n.srv_events().len(), 0);
    assert_eq!(n.srv.session_count(), 1);
    assert_eq!(n.srv.stats().handshakes, 1);
}

#[test]
fn a_gateway_retries_on_every_path_until_answered() {
    let mut n = Net::new(&[0, 1]);
    let first = n.gw_transmits();
    assert_eq!(first.len(), 2);
    // Lost. Nothing more until the retry timer.
    n.gw.handle_timeout(n.now);
    assert!(n.gw_transmits().is_empty());
    let t = n.gw.poll_timeout().unwrap();
    let wait = t.saturating_duration_since(n.now);
    assert!(wait >= limits::REKEY_TIMEOUT && wait <= limits::REKEY_TIMEOUT + limits::REKEY_JITTER);
    n.now = t;
    n.gw.handle_timeout(n.now);
    let second = n.gw_transmits();
    assert_eq!(second.len(), 2);
    assert_ne!(second[0].1, first[0].1, "a retry is a new handshake");
    // A response to the first, late, matches nothing pending.
    let (_, reply, _) = n.up(0, first[0].1.clone());
    assert_eq!(n.down(0, reply.unwrap()).0, Err(Dropped::UnexpectedReply));
    // The retry's response completes it (the server replaced the session it opened for the
    // first initiation).
    n.advance(Duration::from_millis(50));
    let (_, reply, _) = n.up(1, second[1].1.clone());
    assert_eq!(n.down(1, reply.unwrap()).0, Ok(Received::Handshake));
    assert!(n.gw.is_connected(n.now));
    assert_eq!(n.srv.session_count(), 1);
}

#[test]
fn paths_added_later_get_the_pending_initiation() {
    let mut n = Net::new(&[]);
    assert!(n.gw_transmits().is_empty());
    n.gw.add_path(4).unwrap();
    n.paths = vec![4];
    n.from = vec![addr(4, 0)];
    let tx = n.gw_transmits();
    assert_eq!(tx.len(), 1);
    assert_eq!(tx[0].0, 4);
    let (_, reply, _) = n.up(4, tx[0].1.clone());
    assert_eq!(n.down(4, reply.unwrap()).0, Ok(Received::Handshake));
    n.gw.remove_path(4);
    assert!(
        n.gw_transmits().is_empty(),
        "no keepalive for a removed path"
    );
    assert!(n.gw.is_connected(n.now));
}

#[test]
fn configurations_are_checked() {
    let mut c = gateway_config(GW_KEY);
    c.payload = vec![0; MAX_HANDSHAKE_PAYLOAD + 1];
    assert!(matches!(
        Gateway::new(c, &[0], Instant::ZERO),
        Err(ConfigError::PayloadTooLong(_))
    ));
    let mut c = gateway_config(GW_KEY);
    c.max_paths = 0;
    assert!(Gateway::new(c, &[0], Instant::ZERO).is_err());
    let mut c = gateway_config(GW_KEY);
    c.max_paths = 2;
    assert_eq!(
        Gateway::new(c, &[0, 1, 2], Instant::ZERO).err(),
        Some(ConfigError::TooManyPaths(2))
    );
    let mut c = server_config();
    c.session_id_prefix = SessionIdPrefix { bits: 4, value: 16 };
    assert!(Server::new(c, Instant::ZERO).is_err());
    let mut c = server_config();
    c.session_id_prefix = SessionIdPrefix { bits: 17, value: 1 };
    assert!(Server::new(c, Instant::ZERO).is_err());
}

#[test]
fn session_ids_carry_the_configured_prefix() {
    let mut n = Net::new(&[0]);
    let mut c = server_config();
    c.session_id_prefix = SessionIdPrefix {
        bits: 8,
        value: 0xa5,
    };
    n.srv = Server::new(c, n.now).unwrap();
    n.exchange();
    let id = n.gw.session().unwrap().get();
    assert_eq!(id >> 24, 0xa5);
}

#[test]
fn removing_a_peer_closes_its_session_and_refuses_it() {
    let mut n = Net::connected(&[0]);
    let session = n.gw.session().unwrap();
    n.srv_events();
    let gw_key = key(GW_KEY).public_key();
    assert_eq!(n.srv.session_peer(session), Some(gw_key));
    n.srv.remove_peer(&gw_key);
    assert_eq!(
        n.srv_events(),
        vec![Event::Closed {
            session,
            reason: CloseReason::PeerRemoved
        }]
    );
    let d = n.gw_seal(0, b"x");
    assert_eq!(
        n.server_opens(0, d),
        Err(Dropped::UnknownSession(session.get()))
    );
    // Its next handshake is from an unknown key; once allowed again, it gets through.
    n.advance(limits::REKEY_AFTER_TIME);
    n.exchange();
    assert_eq!(n.srv.stats().drop_unknown_key, 1);
    n.srv.add_peer(gw_key).unwrap();
    n.advance(limits::REKEY_TIMEOUT + limits::REKEY_JITTER);
    n.exchange();
    assert_eq!(n.srv.session_count(), 1);
    let d = n.gw_seal(0, b"y");
    assert_eq!(n.server_opens(0, d), Ok(b"y".to_vec()));
}
