//! A relay's own authentication to the server: a node that lends its uplink to a session
//! (BaPu §2's neighbouring AP, PRISM §3.3's community member) proves who it is on every
//! datagram it forwards, so the server can hold it to what the session's owner authorized
//! and refuse it once revoked.
//!
//! The relay cannot read the session (gateway and server seal it end to end); it wraps each
//! datagram it carries towards the server in a lender envelope:
//!
//! ```text
//! 0      1      2      4            8                 16                    16+n   16+n+16
//! | type | kind | zero | lender id  | counter (LE)    | the session's datagram | tag |
//! ```
//!
//! `type` is [`LENDER_TYPE`], beside the session envelope's types; `kind` a [`Kind`]
//! (a datagram carried, or the relay registering or leaving, with nothing carried); the
//! lender id is the
//! first four bytes of BLAKE2s of the relay's public key; the tag is ChaCha20-Poly1305's
//! over the whole (header and datagram as associated data), with the key both ends derive
//! from the X25519 of the relay's and the server's static keys (WireGuard's static-static
//! term), and the counter as nonce, checked against a replay window. The server knows each
//! relay from its config, where the session's owner (the gateway's public key) names the
//! relays it accepts; it strips a valid envelope and handles the datagram inside as if it
//! came straight from the gateway. A revoked relay's datagrams, and every forged,
//! replayed, unknown or truncated one, are refused and counted in [`LenderStats`].

use std::collections::HashMap;
use std::ops::Range;

use blake2::{Blake2s256, Digest};
use curve25519_dalek::montgomery::MontgomeryPoint;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};

use crate::keys::{PrivateKey, PublicKey};
use crate::replay::ReplayWindow;

/// The envelope's first byte for a datagram a relay forwards (the session envelope uses
/// 1 to 4).
pub const LENDER_TYPE: u8 = 5;
/// Bytes before the carried datagram.
pub const LENDER_HEADER_LEN: usize = 16;
/// Bytes the envelope adds: header and tag.
pub const LENDER_OVERHEAD: usize = LENDER_HEADER_LEN + 16;
const TAG_LEN: usize = 16;

/// What a lender envelope says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// It carries a session's datagram.
    Data = 0,
    /// The relay registers (and keeps its NAT mapping open): it carries nothing.
    Register = 1,
    /// The relay leaves: the session should remove the paths it lends.
    Leave = 2,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Data),
            1 => Some(Kind::Register),
            2 => Some(Kind::Leave),
            _ => None,
        }
    }
}

/// A lender envelope that passed the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    pub lender: u32,
    pub kind: Kind,
    /// Where the carried datagram lies in the envelope (empty but for [`Kind::Data`]).
    pub datagram: Range<usize>,
}
const LABEL: &[u8] = b"braid lender v1";

/// A lender's short id: the first four bytes of BLAKE2s of its public key.
pub fn lender_id(key: &PublicKey) -> u32 {
    let h = Blake2s256::digest(key.as_bytes());
    u32::from_le_bytes([h[0], h[1], h[2], h[3]])
}

/// Why a lender envelope was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LenderDrop {
    #[error("not a lender envelope, or truncated")]
    Malformed,
    #[error("lender {0:#010x} is not authorized in the server's config")]
    Unknown(u32),
    #[error("lender {0:#010x} is revoked")]
    Revoked(u32),
    #[error("lender {0:#010x}: the tag does not verify (forged or corrupted)")]
    Forged(u32),
    #[error("lender {0:#010x}: counter replayed or too old")]
    Replayed(u32),
}

/// Why a lender or the gate could not be set up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LenderError {
    #[error("the key exchange with {0} gives the all-zero secret (a low-order public key)")]
    WeakKey(PublicKey),
    #[error("lenders {0} and {1} have the same short id; generate another key for one")]
    IdCollision(PublicKey, PublicKey),
    #[error("buffer of {have} bytes cannot hold a {need}-byte lender envelope")]
    BufferTooShort { have: usize, need: usize },
    #[error("the lender's counter is exhausted; restart it with a new key")]
    CounterExhausted,
}

/// Counters of the gate, per outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LenderStats {
    pub accepted: u64,
    pub malformed: u64,
    pub unknown: u64,
    pub revoked: u64,
    pub forged: u64,
    pub replayed: u64,
}

fn derive_key(
    private: &PrivateKey,
    peer: &PublicKey,
    lender: &PublicKey,
    server: &PublicKey,
) -> Result<LessSafeKey, LenderError> {
    let shared = MontgomeryPoint(*peer.as_bytes()).mul_clamped(*private.as_bytes());
    if shared.as_bytes() == &[0u8; 32] {
        return Err(LenderError::WeakKey(*peer));
    }
    let mut h = Blake2s256::new();
    h.update(LABEL);
    h.update(shared.as_bytes());
    h.update(lender.as_bytes());
    h.update(server.as_bytes());
    let key = h.finalize();
    // 32 bytes is ChaCha20-Poly1305's key length: `new` cannot fail.
    let unbound = UnboundKey::new(&CHACHA20_POLY1305, &key).expect("a 32-byte key");
    Ok(LessSafeKey::new(unbound))
}

fn nonce(counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&counter.to_le_bytes());
    Nonce::assume_unique_for_key(n)
}

/// The relay's end: wraps the datagrams it forwards to the server.
pub struct Lender {
    id: u32,
    key: LessSafeKey,
    counter: u64,
}

impl Lender {
    /// The relay with static key `private`, lending towards the server whose public key is
    /// `server`.
    pub fn new(private: &PrivateKey, server: &PublicKey) -> Result<Lender, LenderError> {
        let public = private.public_key();
        Ok(Lender {
            id: lender_id(&public),
            key: derive_key(private, server, &public, server)?,
            counter: 0,
        })
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// Wraps the `len`-byte datagram at `buf[LENDER_HEADER_LEN..]` (`len` 0 for a
    /// registration or a leave): writes the header before it and the tag after it;
    /// returns the envelope's length.
    pub fn wrap(&mut self, kind: Kind, buf: &mut [u8], len: usize) -> Result<usize, LenderError> {
        let need = len + LENDER_OVERHEAD;
        if buf.len() < need {
            return Err(LenderError::BufferTooShort {
                have: buf.len(),
                need,
            });
        }
        if self.counter == u64::MAX {
            return Err(LenderError::CounterExhausted);
        }
        let counter = self.counter;
        self.counter += 1;
        buf[0] = LENDER_TYPE;
        buf[1] = kind as u8;
        buf[2..4].fill(0);
        buf[4..8].copy_from_slice(&self.id.to_le_bytes());
        buf[8..16].copy_from_slice(&counter.to_le_bytes());
        let end = LENDER_HEADER_LEN + len;
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(counter), Aad::from(&buf[..end]), &mut [])
            // Sealing nothing cannot exceed the AEAD's length limit.
            .expect("sealing an empty plaintext");
        buf[end..end + TAG_LEN].copy_from_slice(tag.as_ref());
        Ok(need)
    }
}

/// One relay as the server knows it.
struct Authorized {
    key: LessSafeKey,
    public: PublicKey,
    /// The session owner (gateway key) it lends to.
    owner: PublicKey,
    revoked: bool,
    window: ReplayWindow,
}

/// The server's end: the relays the sessions' owners authorized, by short id.
pub struct LenderGate {
    lenders: HashMap<u32, Authorized>,
    stats: LenderStats,
}

impl LenderGate {
    /// A gate for the server with static key `private` and the relays `authorized`, each
    /// as (relay key, the gateway key of the session owner who authorized it).
    pub fn new(
        private: &PrivateKey,
        authorized: &[(PublicKey, PublicKey)],
    ) -> Result<LenderGate, LenderError> {
        let mut gate = LenderGate {
            lenders: HashMap::new(),
            stats: LenderStats::default(),
        };
        for &(public, owner) in authorized {
            gate.authorize(private, public, owner)?;
        }
        Ok(gate)
    }

    /// Authorizes relay `public` to lend to the sessions of `owner` (a gateway key) from now
    /// on, and returns its short id. A relay the gate knows keeps its replay window (its old
    /// datagrams stay refused) and is taken back from revocation; this is how a server
    /// applies a re-read config without a restart.
    pub fn authorize(
        &mut self,
        private: &PrivateKey,
        public: PublicKey,
        owner: PublicKey,
    ) -> Result<u32, LenderError> {
        let id = lender_id(&public);
        match self.lenders.get_mut(&id) {
            Some(l) if l.public != public => Err(LenderError::IdCollision(l.public, public)),
            Some(l) => {
                l.owner = owner;
                l.revoked = false;
                Ok(id)
            }
            None => {
                let server = private.public_key();
                let key = derive_key(private, &public, &public, &server)?;
                self.lenders.insert(
                    id,
                    Authorized {
                        key,
                        public,
                        owner,
                        revoked: false,
                        window: ReplayWindow::default(),
                    },
                );
                Ok(id)
            }
        }
    }

    /// Revokes every relay whose key is not in `keep`; returns the short ids revoked now
    /// (not those revoked before).
    pub fn revoke_all_but(&mut self, keep: &[PublicKey]) -> Vec<u32> {
        let mut now = Vec::new();
        for (&id, l) in self.lenders.iter_mut() {
            if !l.revoked && !keep.contains(&l.public) {
                l.revoked = true;
                now.push(id);
            }
        }
        now.sort_unstable();
        now
    }

    /// Whether `datagram` is a lender envelope (rather than the gateway's own).
    pub fn is_lent(datagram: &[u8]) -> bool {
        datagram.first() == Some(&LENDER_TYPE)
    }

    /// Checks a lender envelope. Every refusal is counted.
    pub fn open(&mut self, datagram: &[u8]) -> Result<Opened, LenderDrop> {
        let r = self.check(datagram);
        let s = &mut self.stats;
        match r {
            Ok(_) => s.accepted += 1,
            Err(LenderDrop::Malformed) => s.malformed += 1,
            Err(LenderDrop::Unknown(_)) => s.unknown += 1,
            Err(LenderDrop::Revoked(_)) => s.revoked += 1,
            Err(LenderDrop::Forged(_)) => s.forged += 1,
            Err(LenderDrop::Replayed(_)) => s.replayed += 1,
        }
        r
    }

    fn check(&mut self, d: &[u8]) -> Result<Opened, LenderDrop> {
        if d.len() < LENDER_OVERHEAD || d[0] != LENDER_TYPE || d[2..4] != [0, 0] {
            return Err(LenderDrop::Malformed);
        }
        let kind = Kind::from_byte(d[1]).ok_or(LenderDrop::Malformed)?;
        let id = u32::from_le_bytes([d[4], d[5], d[6], d[7]]);
        let mut c = [0u8; 8];
        c.copy_from_slice(&d[8..16]);
        let counter = u64::from_le_bytes(c);
        let l = self.lenders.get_mut(&id).ok_or(LenderDrop::Unknown(id))?;
        if l.revoked {
            return Err(LenderDrop::Revoked(id));
        }
        l.window
            .check(counter)
            .map_err(|_| LenderDrop::Replayed(id))?;
        let end = d.len() - TAG_LEN;
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&d[end..]);
        l.key
            .open_in_place(nonce(counter), Aad::from(&d[..end]), &mut tag)
            .map_err(|_| LenderDrop::Forged(id))?;
        l.window.commit(counter);
        Ok(Opened {
            lender: id,
            kind,
            datagram: LENDER_HEADER_LEN..end,
        })
    }

    /// The session owner who authorized lender `id`.
    pub fn owner(&self, id: u32) -> Option<&PublicKey> {
        self.lenders.get(&id).map(|l| &l.owner)
    }

    /// Revokes `key`: its datagrams are refused from now on. Returns its short id, or
    /// `None` when it was not authorized.
    pub fn revoke(&mut self, key: &PublicKey) -> Option<u32> {
        let id = lender_id(key);
        let l = self.lenders.get_mut(&id).filter(|l| &l.public == key)?;
        l.revoked = true;
        Some(id)
    }

    pub fn stats(&self) -> LenderStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> PrivateKey {
        PrivateKey::from_bytes([b; 32])
    }

    fn wrapped(lender: &mut Lender, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; payload.len() + LENDER_OVERHEAD];
        buf[LENDER_HEADER_LEN..LENDER_HEADER_LEN + payload.len()].copy_from_slice(payload);
        let n = lender.wrap(Kind::Data, &mut buf, payload.len()).unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn an_authorized_lender_passes_and_a_revoked_one_is_refused_and_counted() {
        let (server, relay, owner) = (key(1), key(2), key(3));
        let mut gate =
            LenderGate::new(&server, &[(relay.public_key(), owner.public_key())]).unwrap();
        let mut lender = Lender::new(&relay, &server.public_key()).unwrap();
        let d = wrapped(&mut lender, b"a session datagram");
        assert!(LenderGate::is_lent(&d));
        let o = gate.open(&d).unwrap();
        let id = o.lender;
        assert_eq!((id, o.kind), (lender.id(), Kind::Data));
        assert_eq!(&d[o.datagram], b"a session datagram");
        let mut leave = vec![0u8; LENDER_OVERHEAD];
        let n = lender.wrap(Kind::Leave, &mut leave, 0).unwrap();
        let o = gate.open(&leave[..n]).unwrap();
        assert_eq!((o.kind, o.datagram.len()), (Kind::Leave, 0));
        assert_eq!(gate.owner(id), Some(&owner.public_key()));
        assert_eq!(gate.open(&d), Err(LenderDrop::Replayed(id)), "replay");
        assert_eq!(gate.revoke(&relay.public_key()), Some(id));
        for _ in 0..3 {
            let d = wrapped(&mut lender, b"after revocation");
            assert_eq!(gate.open(&d), Err(LenderDrop::Revoked(id)));
        }
        let s = gate.stats();
        assert_eq!((s.accepted, s.replayed, s.revoked), (2, 1, 3));
    }

    #[test]
    fn a_relay_authorized_again_keeps_its_replay_window() {
        let server = key(1);
        let (ra, rb, owner) = (key(2), key(3), key(4).public_key());
        let mut gate = LenderGate::new(&server, &[(ra.public_key(), owner)]).unwrap();
        let mut a = Lender::new(&ra, &server.public_key()).unwrap();
        let mut b = Lender::new(&rb, &server.public_key()).unwrap();
        let first = wrapped(&mut a, b"one");
        assert!(gate.open(&first).is_ok());
        // B is unknown until authorized; A revoked by leaving the list.
        assert!(matches!(
            gate.open(&wrapped(&mut b, b"x")),
            Err(LenderDrop::Unknown(_))
        ));
        let idb = gate.authorize(&server, rb.public_key(), owner).unwrap();
        assert_eq!(gate.revoke_all_but(&[rb.public_key()]), vec![a.id()]);
        assert_eq!(gate.revoke_all_but(&[rb.public_key()]), Vec::<u32>::new());
        assert!(matches!(
            gate.open(&wrapped(&mut a, b"two")),
            Err(LenderDrop::Revoked(_))
        ));
        assert_eq!(gate.open(&wrapped(&mut b, b"y")).unwrap().lender, idb);
        // A back: new datagrams pass, its old one is still a replay.
        gate.authorize(&server, ra.public_key(), owner).unwrap();
        assert!(gate.open(&wrapped(&mut a, b"three")).is_ok());
        assert!(matches!(gate.open(&first), Err(LenderDrop::Replayed(_))));
    }

    #[test]
    fn forged_unknown_and_truncated_envelopes_are_refused() {
        let (server, relay, stranger) = (key(1), key(2), key(4));
        let mut gate =
            LenderGate::new(&server, &[(relay.public_key(), key(3).public_key())]).unwrap();
        let mut lender = Lender::new(&relay, &server.public_key()).unwrap();
        let mut d = wrapped(&mut lender, b"payload");
        d[LENDER_HEADER_LEN] ^= 1;
        assert_eq!(gate.open(&d), Err(LenderDrop::Forged(lender.id())));
        let mut other = Lender::new(&stranger, &server.public_key()).unwrap();
        let d = wrapped(&mut other, b"payload");
        assert_eq!(gate.open(&d), Err(LenderDrop::Unknown(other.id())));
        // A relay that claims an authorized id without its key.
        let mut d = wrapped(&mut other, b"payload");
        d[4..8].copy_from_slice(&lender.id().to_le_bytes());
        assert_eq!(gate.open(&d), Err(LenderDrop::Forged(lender.id())));
        assert_eq!(
            gate.open(&d[..LENDER_OVERHEAD - 1]),
            Err(LenderDrop::Malformed)
        );
        assert_eq!(gate.stats().accepted, 0);
    }

    #[test]
    fn random_bytes_never_panic_the_gate() {
        let server = key(1);
        let mut gate =
            LenderGate::new(&server, &[(key(2).public_key(), key(3).public_key())]).unwrap();
        let mut x: u64 = 0x1234_5678;
        for n in 0..2000usize {
            let len = n % 80;
            let d: Vec<u8> = (0..len)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if i == 0 && n % 2 == 0 {
                        LENDER_TYPE
                    } else {
                        x as u8
                    }
                })
                .collect();
            assert!(gate.open(&d).is_err());
        }
    }
}
