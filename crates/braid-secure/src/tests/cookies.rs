//! Under load: cookie replies instead of handshakes, mac2, and no state for spoofers.

use super::*;
use crate::envelope::{MessageType, COOKIE_REPLY_LEN, MAC_LEN};

#[test]
fn under_load_the_server_answers_with_a_cookie_and_the_gateway_proves_its_address() {
    let mut n = Net::new(&[0, 1]);
    n.load = Load::High;
    let tx = n.gw_transmits();
    assert_eq!(
        tx[0].1[tx[0].1.len() - MAC_LEN..],
        [0u8; MAC_LEN],
        "no cookie yet"
    );
    let (r, reply, _) = n.up(0, tx[0].1.clone());
    let cookie_reply = reply.unwrap();
    assert_eq!(
        r,
        Ok(Received::Reply {
            len: COOKIE_REPLY_LEN
        })
    );
    assert_eq!(cookie_reply[0], MessageType::CookieReply as u8);
    assert!(cookie_reply.len() < tx[0].1.len(), "no amplification");
    // No Diffie-Hellman work, no session, no event, no state.
    assert_eq!(n.srv.session_count(), 0);
    assert_eq!(n.srv.state_size(), 1, "only the configured peer");
    assert!(n.srv_events().is_empty());
    assert_eq!(n.srv.stats().cookie_replies, 1);

    // The gateway stores the cookie for path 0 and resends at once, with mac2.
    assert_eq!(n.down(0, cookie_reply).0, Ok(Received::Handshake));
    let again = n.gw_transmits();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].0, 0);
    assert_ne!(again[0].1[again[0].1.len() - MAC_LEN..], [0u8; MAC_LEN]);
    let (r, reply, _) = n.up(0, again[0].1.clone());
    assert!(matches!(r, Ok(Received::Reply { len }) if len > COOKIE_REPLY_LEN));
    assert_eq!(n.down(0, reply.unwrap()).0, Ok(Received::Handshake));
    assert!(n.gw.is_connected(n.now));
    assert_eq!(n.srv.session_count(), 1);
}

#[test]
fn a_cookie_is_bound_to_the_address_it_was_sent_to() {
    let mut n = Net::new(&[0, 1]);
    n.load = Load::High;
    let tx = n.gw_transmits();
    let (_, reply, _) = n.up(0, tx[0].1.clone());
    let _ = n.down(0, reply.unwrap());
    let again = n.gw_transmits().remove(0).1;
    // The same proof from another address (a spoofer replaying it, or another path) is
    // worth nothing: another cookie reply, still no state.
    let (r, reply, _) = n.up(1, again.clone());
    assert_eq!(
        r,
        Ok(Received::Reply {
            len: COOKIE_REPLY_LEN
        })
    );
    assert_eq!(reply.unwrap()[0], MessageType::CookieReply as u8);
    assert_eq!(n.srv.session_count(), 0);
    // From the right address it is accepted.
    let (r, _, _) = n.up(0, again);
    assert!(matches!(r, Ok(Received::Reply { len }) if len > COOKIE_REPLY_LEN));
    assert_eq!(n.srv.session_count(), 1);
}

#[test]
fn cookies_expire_with_the_servers_secret() {
    let mut n = Net::new(&[0]);
    n.load = Load::High;
    let tx = n.gw_transmits();
    let (_, reply, _) = n.up(0, tx[0].1.clone());
    let _ = n.down(0, reply.unwrap());
    let again = n.gw_transmits().remove(0).1;
    // Two minutes later the server's secret has changed: the old proof earns a new cookie.
    n.advance(limits::COOKIE_LIFETIME);
    let (r, _, _) = n.up(0, again);
    assert_eq!(
        r,
        Ok(Received::Reply {
            len: COOKIE_REPLY_LEN
        })
    );
    assert_eq!(n.srv.session_count(), 0);
    // The gateway keeps retrying and gets through with the new cookie.
    for _ in 0..4 {
        n.exchange();
        if n.gw.is_connected(n.now) {
            break;
        }
        n.advance(limits::REKEY_TIMEOUT + limits::REKEY_JITTER);
    }
    assert!(n.gw.is_connected(n.now));
}

#[test]
fn forged_cookie_replies_are_dropped() {
    let mut n = Net::new(&[0]);
    n.load = Load::High;
    let tx = n.gw_transmits();
    let (_, reply, _) = n.up(0, tx[0].1.clone());
    let reply = reply.unwrap();
    for i in 0..reply.len() {
        let mut bad = reply.clone();
        bad[i] ^= 4;
        assert!(n.down(0, bad).0.is_err(), "byte {i}");
    }
    assert!(n.gw.stats().drop_bad_cookie_reply > 0);
    assert!(n.gw_transmits().is_empty(), "no resend on a forged cookie");
    assert_eq!(n.down(0, reply).0, Ok(Received::Handshake));
}

#[test]
fn only_one_immediate_resend_per_handshake() {
    let mut n = Net::new(&[0]);
    n.load = Load::High;
    n.advance(Duration::ZERO);
    let tx = n.gw_transmits();
    let (_, reply, _) = n.up(0, tx[0].1.clone());
    let reply = reply.unwrap();
    assert_eq!(n.down(0, reply.clone()).0, Ok(Received::Handshake));
    assert_eq!(n.gw_transmits().len(), 1);
    // The same cookie reply again (or a second one) does not make the gateway send more.
    assert_eq!(n.down(0, reply).0, Ok(Received::Handshake));
    assert!(n.gw_transmits().is_empty());
}
