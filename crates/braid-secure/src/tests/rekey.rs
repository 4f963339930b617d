//! Rekeying on WireGuard's timers, with datagrams in flight across the change; expiry.

use super::*;
use crate::envelope::{Envelope, MessageType};

fn epoch(d: &[u8]) -> u8 {
    match Envelope::parse(d) {
        Ok(Envelope::Data(h)) => h.epoch,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rekey_keeps_the_session_and_datagrams_in_flight_still_open() {
    let mut n = Net::connected(&[0, 1]);
    let session = n.gw.session().unwrap();
    n.srv_events();
    n.gw_events();
    // In flight under the first keys, both ways, when the rekey happens.
    let up_old: Vec<_> = (0..5).map(|i| n.gw_seal(i % 2, &[i])).collect();
    let down_old: Vec<_> = (0..5).map(|i| n.srv_seal(i % 2, &[i])).collect();
    assert!(up_old.iter().chain(&down_old).all(|d| epoch(d) == 0));

    n.advance(limits::REKEY_AFTER_TIME - Duration::from_millis(1));
    n.gw.handle_timeout(n.now);
    assert!(n.gw_transmits().is_empty(), "not yet");
    n.advance(Duration::from_millis(1));
    assert_eq!(n.gw.poll_timeout(), Some(n.now));
    n.gw.handle_timeout(n.now);
    let init = n.gw_transmits();
    assert_eq!(init.len(), 2);
    assert_eq!(init[0].1[0], MessageType::Initiation as u8);
    let (_, reply, _) = n.up(0, init[0].1.clone());
    assert_eq!(n.srv_events(), vec![Event::Rekeyed { session, epoch: 1 }]);

    // The server keeps sealing under the old keys until the gateway uses the new ones.
    let down_mid = n.srv_seal(0, b"mid");
    assert_eq!(epoch(&down_mid), 0);

    assert_eq!(n.down(0, reply.unwrap()).0, Ok(Received::Handshake));
    assert_eq!(n.gw_events(), vec![Event::Rekeyed { session, epoch: 1 }]);
    assert_eq!(n.gw.session(), Some(session));
    let up_new = n.gw_seal(1, b"new");
    assert_eq!(epoch(&up_new), 1);

    // Old datagrams from the gateway still open at the server (its current keys), the
    // gateway's first new-key datagram confirms the new keys, and then old ones still
    // open (its previous keys).
    assert!(n.server_opens(0, up_old[0].clone()).is_ok());
    assert_eq!(n.server_opens(1, up_new), Ok(b"new".to_vec()));
    for d in &up_old[1..] {
        assert!(n.server_opens(d[2], d.clone()).is_ok());
    }
    // The gateway opens the server's old-key datagrams with its previous keys.
    for d in down_old.iter().chain([&down_mid]) {
        assert!(n.gateway_opens(d[2], d.clone()).is_ok());
    }
    let down_new = n.srv_seal(0, b"down new");
    assert_eq!(epoch(&down_new), 1);
    assert_eq!(n.gateway_opens(0, down_new), Ok(b"down new".to_vec()));
    assert_eq!(n.srv.stats().dropped() + n.gw.stats().dropped(), 0);
}

#[test]
fn old_keys_are_refused_once_they_expire() {
    let mut n = Net::connected(&[0]);
    let late = n.gw_seal(0, b"late");
    n.advance(limits::REKEY_AFTER_TIME);
    n.exchange();
    let d = n.gw_seal(0, b"new");
    assert!(n.server_opens(0, d).is_ok());
    n.advance(limits::REJECT_AFTER_TIME - limits::REKEY_AFTER_TIME);
    n.exchange();
    assert!(matches!(
        n.server_opens(0, late),
        Err(Dropped::NoKeys { epoch: 0, .. })
    ));
}

#[test]
fn without_answers_the_keys_expire_and_the_gateway_keeps_trying() {
    let mut n = Net::connected(&[0]);
    let session = n.gw.session().unwrap();
    n.advance(limits::REKEY_AFTER_TIME);
    // The server is unreachable for a while: every initiation is lost.
    let mut attempts = 0;
    while n.now < Instant::from_millis(1000) + limits::REJECT_AFTER_TIME + Duration::from_secs(10) {
        n.gw.handle_timeout(n.now);
        attempts += n.gw_transmits().len();
        n.now = n.gw.poll_timeout().unwrap();
    }
    assert!(attempts >= 12, "{attempts} attempts in 70 s");
    assert!(!n.gw.is_connected(n.now));
    let mut buf = [0u8; 64];
    assert_eq!(n.gw.seal(n.now, 0, &mut buf, 8), Err(SealError::NoKeys));
    // Back in reach: the next attempt rekeys into the same session (the server kept it).
    n.advance(limits::REKEY_TIMEOUT + limits::REKEY_JITTER);
    n.exchange();
    assert!(n.gw.is_connected(n.now));
    assert_eq!(n.gw.session(), Some(session));
    let d = n.gw_seal(0, b"back");
    assert_eq!(n.server_opens(0, d), Ok(b"back".to_vec()));
}

#[test]
fn an_idle_session_is_closed_and_the_gateway_gets_a_new_one() {
    let mut n = Net::connected(&[0]);
    let old = n.gw.session().unwrap();
    n.srv_events();
    n.gw_events();
    let idle = server_config().idle_timeout;
    n.advance(idle);
    n.srv.handle_timeout(n.now);
    assert_eq!(
        n.srv_events(),
        vec![Event::Closed {
            session: old,
            reason: CloseReason::Idle
        }]
    );
    assert_eq!(n.srv.session_count(), 0);
    // The gateway's next handshake names the forgotten session and gets a new one.
    n.exchange();
    let new = n.gw.session().unwrap();
    assert_ne!(new, old);
    let ev = n.gw_events();
    assert_eq!(
        ev[0],
        Event::Closed {
            session: old,
            reason: CloseReason::Replaced
        }
    );
    assert!(matches!(ev[1], Event::Established { session, .. } if session == new));
}

#[test]
fn a_rekey_is_due_after_so_many_messages() {
    let mut n = Net::connected(&[0]);
    n.advance(Duration::from_secs(1));
    n.gw.set_send_counter(0, 100, limits::REKEY_AFTER_MESSAGES);
    assert!(n.gw.poll_timeout().unwrap() <= n.now, "due at once");
    n.gw.handle_timeout(n.now);
    let tx = n.gw_transmits();
    assert_eq!(tx.len(), 1);
    assert_eq!(tx[0].1[0], MessageType::Initiation as u8);
    // Until the new keys come, sealing goes on under the old ones.
    let d = n.gw_seal(0, b"x");
    assert_eq!(epoch(&d), 0);
    let (_, reply, _) = n.up(0, tx[0].1.clone());
    assert_eq!(n.down(0, reply.unwrap()).0, Ok(Received::Handshake));
    let d = n.gw_seal(0, b"x");
    assert_eq!(epoch(&d), 1);
}

#[test]
fn epochs_wrap_around_over_many_rekeys() {
    let mut n = Net::connected(&[0, 1]);
    let session = n.gw.session().unwrap();
    for i in 1..=300u32 {
        n.advance(limits::REKEY_AFTER_TIME);
        n.exchange();
        let up = n.gw_seal((i % 2) as PathId, b"up");
        assert_eq!(epoch(&up), i as u8);
        assert_eq!(n.server_opens((i % 2) as PathId, up), Ok(b"up".to_vec()));
        let down = n.srv_seal(0, b"down");
        assert_eq!(n.gateway_opens(0, down), Ok(b"down".to_vec()));
    }
    assert_eq!(n.gw.session(), Some(session));
    assert_eq!(n.srv.stats().handshakes, 301);
}

#[test]
fn a_gateway_that_hears_nothing_can_handshake_again_at_once_and_a_restarted_server_gives_a_new_session(
) {
    let mut n = Net::connected(&[0, 1]);
    let old = n.gw.session().unwrap();
    n.gw_events();
    // The server restarts: it forgets every session (and draws new random numbers).
    let mut config = server_config();
    config.seed = Seed::from_u64(201);
    n.srv = Server::new(config, n.now).unwrap();
    let d = n.gw_seal(0, b"lost");
    assert!(
        n.server_opens(0, d).is_err(),
        "the new server knows no session"
    );
    // Long before the rekey timer, the daemon sees the silence and asks for a handshake.
    n.advance(Duration::from_secs(5));
    assert!(
        n.gw.poll_timeout().unwrap() > n.now,
        "no timer would start one yet"
    );
    assert!(n.gw.rehandshake(n.now));
    assert!(!n.gw.rehandshake(n.now), "one is already under way");
    n.exchange();
    let new = n.gw.session().unwrap();
    assert_ne!(new, old);
    let ev = n.gw_events();
    assert_eq!(
        ev[0],
        Event::Closed {
            session: old,
            reason: CloseReason::Replaced
        }
    );
    assert!(matches!(ev[1], Event::Established { session, .. } if session == new));
    let d = n.gw_seal(1, b"again");
    assert_eq!(n.server_opens(1, d), Ok(b"again".to_vec()));
}
