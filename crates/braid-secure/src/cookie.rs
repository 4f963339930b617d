//! Denial-of-service protection for the handshake, as WireGuard does it (WireGuard paper
//! §5.4.4 and §5.4.7):
//!
//! - **mac1**, a keyed BLAKE2s over the initiation with a key derived from the server's
//!   public key: the server checks it before any Diffie-Hellman work, so only senders that
//!   know its public key make it spend any.
//! - Under load (the caller says so), the server does not process an initiation without a
//!   valid **mac2**, keyed by a *cookie*: a MAC of the sender's address under a secret that
//!   changes every two minutes. It answers with a **cookie reply** instead, the cookie
//!   encrypted (XChaCha20-Poly1305) under a key derived from its public key, with the
//!   initiation's mac1 as associated data, so only the sender of that initiation can read
//!   it. A sender that can receive at its address can then prove it; a spoofer cannot. The
//!   server keeps no state per sender for any of this: the cookie is recomputed from the
//!   address on every check.
//!
//! Cookies are per address, so the gateway keeps one per path.

use std::net::SocketAddr;

use blake2::digest::consts::U16;
use blake2::digest::{FixedOutput, Mac as _};
use blake2::{Blake2s256, Blake2sMac, Digest};
use braid_core::Instant;
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};

use crate::envelope::{
    write_handshake_header, CookieReply, Initiation, MessageType, COOKIE_LEN, COOKIE_NONCE_LEN,
    COOKIE_REPLY_LEN, HANDSHAKE_HEADER_LEN, MAC_LEN, TAG_LEN,
};
use crate::keys::PublicKey;
use crate::limits::COOKIE_LIFETIME;
use crate::rng::Rng;

const LABEL_MAC1: &[u8] = b"mac1----";
const LABEL_COOKIE: &[u8] = b"cookie--";

/// The keys derived from a server's public key: for mac1, and for sealing cookies.
#[derive(Clone)]
pub(crate) struct MacKeys {
    mac1: [u8; 32],
    cookie: [u8; 32],
}

impl MacKeys {
    pub fn new(server: &PublicKey) -> MacKeys {
        MacKeys {
            mac1: hash(LABEL_MAC1, server.as_bytes()),
            cookie: hash(LABEL_COOKIE, server.as_bytes()),
        }
    }

    /// mac1 over `data` (the initiation up to its mac1 field).
    pub fn mac1(&self, data: &[u8]) -> [u8; MAC_LEN] {
        mac(&self.mac1, data)
    }

    /// Whether the initiation's mac1 is right (compared in constant time).
    pub fn verify_mac1(&self, init: &Initiation<'_>) -> bool {
        verify(&self.mac1, init.mac1_input(), init.mac1())
    }

    /// The cookie in a reply to the initiation whose mac1 was `mac1`, if the reply
    /// authenticates.
    pub fn open_reply(
        &self,
        reply: &CookieReply<'_>,
        mac1: &[u8; MAC_LEN],
    ) -> Option<[u8; COOKIE_LEN]> {
        let aead = XChaCha20Poly1305::new((&self.cookie).into());
        let sealed = reply.sealed_cookie();
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(&sealed[..COOKIE_LEN]);
        aead.decrypt_in_place_detached(
            XNonce::from_slice(reply.nonce()),
            mac1,
            &mut cookie,
            sealed[COOKIE_LEN..].into(),
        )
        .ok()?;
        Some(cookie)
    }
}

/// mac2 over `data` (the initiation up to its mac2 field) with `cookie`.
pub(crate) fn mac2(cookie: &[u8; COOKIE_LEN], data: &[u8]) -> [u8; MAC_LEN] {
    mac(cookie, data)
}

/// The server's side: the rotating secret cookies are made from.
pub(crate) struct CookieChecker {
    keys: MacKeys,
    secret: [u8; 32],
    born: Option<Instant>,
}

impl CookieChecker {
    pub fn new(keys: MacKeys) -> CookieChecker {
        CookieChecker {
            keys,
            secret: [0; 32],
            born: None,
        }
    }

    pub fn keys(&self) -> &MacKeys {
        &self.keys
    }

    /// The cookie for `from` at `now`, drawing a new secret when the current one is older
    /// than [`COOKIE_LIFETIME`].
    fn cookie(&mut self, now: Instant, rng: &mut Rng, from: SocketAddr) -> [u8; COOKIE_LEN] {
        let stale = self
            .born
            .is_none_or(|b| now.saturating_duration_since(b) >= COOKIE_LIFETIME);
        if stale {
            rng.fill(&mut self.secret);
            self.born = Some(now);
        }
        let mut addr = [0u8; 18];
        let n = match from {
            SocketAddr::V4(a) => {
                addr[..4].copy_from_slice(&a.ip().octets());
                4
            }
            SocketAddr::V6(a) => {
                addr[..16].copy_from_slice(&a.ip().octets());
                16
            }
        };
        addr[n..n + 2].copy_from_slice(&from.port().to_be_bytes());
        mac(&self.secret, &addr[..n + 2])
    }

    /// Whether the initiation's mac2 proves that its sender received a cookie at `from`.
    pub fn verify_mac2(
        &mut self,
        now: Instant,
        rng: &mut Rng,
        from: SocketAddr,
        init: &Initiation<'_>,
    ) -> bool {
        let cookie = self.cookie(now, rng, from);
        verify(&cookie, init.mac2_input(), init.mac2())
    }

    /// Writes the cookie reply to `init`, from `from`, into `out`; returns its length.
    pub fn write_reply(
        &mut self,
        now: Instant,
        rng: &mut Rng,
        from: SocketAddr,
        init: &Initiation<'_>,
        out: &mut [u8; COOKIE_REPLY_LEN],
    ) -> usize {
        let mut cookie = self.cookie(now, rng, from);
        write_handshake_header(
            out,
            MessageType::CookieReply,
            0,
            init.session(),
            init.sender(),
        );
        let mut nonce = [0u8; COOKIE_NONCE_LEN];
        rng.fill(&mut nonce);
        let aead = XChaCha20Poly1305::new((&self.keys.cookie).into());
        let tag = aead
            .encrypt_in_place_detached(XNonce::from_slice(&nonce), init.mac1(), &mut cookie)
            // XChaCha20-Poly1305 refuses only messages beyond 256 GiB.
            .unwrap_or_default();
        let at = HANDSHAKE_HEADER_LEN;
        out[at..at + COOKIE_NONCE_LEN].copy_from_slice(&nonce);
        let at = at + COOKIE_NONCE_LEN;
        out[at..at + COOKIE_LEN].copy_from_slice(&cookie);
        out[at + COOKIE_LEN..at + COOKIE_LEN + TAG_LEN].copy_from_slice(&tag);
        COOKIE_REPLY_LEN
    }
}

fn hash(label: &[u8], key: &[u8]) -> [u8; 32] {
    let mut h = Blake2s256::new();
    Digest::update(&mut h, label);
    Digest::update(&mut h, key);
    h.finalize().into()
}

fn keyed(key: &[u8]) -> Blake2sMac<U16> {
    // Keys here are 16 or 32 bytes; BLAKE2s takes keys up to 32.
    #[expect(
        clippy::unwrap_used,
        reason = "new_from_slice fails only on keys over 32 bytes"
    )]
    <Blake2sMac<U16> as blake2::digest::KeyInit>::new_from_slice(key).unwrap()
}

fn mac(key: &[u8], data: &[u8]) -> [u8; MAC_LEN] {
    let mut m = keyed(key);
    m.update(data);
    m.finalize_fixed().into()
}

fn verify(key: &[u8], data: &[u8], tag: &[u8]) -> bool {
    let mut m = keyed(key);
    m.update(data);
    m.verify_slice(tag).is_ok()
}
