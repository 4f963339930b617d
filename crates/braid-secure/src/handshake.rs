//! The handshake: Noise IK (`Noise_IK_25519_ChaChaPoly_BLAKE2s`, WireGuard's choice of
//! primitives) through the `snow` crate. The gateway is the initiator and knows the server's
//! static public key in advance; the server learns and authenticates the gateway's static
//! key from message 1. One round trip gives both ends two transport keys (one per direction).
//!
//! What braid adds around Noise (docs/security.md, "Handshake"):
//!
//! - The initiation's cleartext header (type, session id, sender index) is part of the Noise
//!   prologue, so tampering with it fails the handshake. The response's payload starts with
//!   the key epoch and the session id, which the gateway takes from there: their cleartext
//!   copies are for observers only. (Comparing them instead would let a tampered copy of the
//!   genuine response use up the gateway's handshake state, which `snow` advances once the
//!   Noise message itself is authentic.)
//! - The initiation's payload starts with a timestamp (nanoseconds since the UNIX epoch,
//!   truncated as WireGuard's TAI64N is); the server accepts an initiation from a key only if
//!   its timestamp is newer than the last one accepted from that key, so a replayed
//!   initiation does nothing (WireGuard §5.4.2).
//! - Both messages may carry up to [`MAX_HANDSHAKE_PAYLOAD`] bytes of the caller's payload
//!   (the gateway's name and version; the server's), encrypted.

use braid_core::Instant;
use snow::params::NoiseParams;
use snow::{Builder, HandshakeState};
use zeroize::Zeroize;

use crate::cookie::MacKeys;
use crate::envelope::{
    write_handshake_header, Initiation, MessageType, Response, HANDSHAKE_HEADER_LEN, MAC_LEN,
    MAX_HANDSHAKE_PAYLOAD, MAX_INITIATION_LEN, RESPONSE_FIELDS_LEN, TIMESTAMP_LEN,
};
use crate::keypair::Keypair;
use crate::keys::{PrivateKey, PublicKey, KEY_LEN};
use crate::rng::Rng;
use crate::Dropped;

/// The Noise protocol name.
pub const NOISE_PARAMS: &str = "Noise_IK_25519_ChaChaPoly_BLAKE2s";
/// Starts the prologue; a handshake between different protocols or versions fails.
const PROLOGUE_LABEL: &[u8; 16] = b"braid-secure v1 ";

/// The parsed protocol name.
pub(crate) fn params() -> NoiseParams {
    #[expect(
        clippy::unwrap_used,
        reason = "a constant protocol name that the handshake tests parse"
    )]
    NOISE_PARAMS.parse().unwrap()
}

fn prologue(header: &[u8]) -> [u8; 16 + HANDSHAKE_HEADER_LEN] {
    let mut p = [0u8; 16 + HANDSHAKE_HEADER_LEN];
    p[..16].copy_from_slice(PROLOGUE_LABEL);
    p[16..].copy_from_slice(&header[..HANDSHAKE_HEADER_LEN]);
    p
}

/// Application payload of a handshake message, kept without allocation.
#[derive(Clone, PartialEq, Eq)]
pub struct Payload {
    len: u16,
    bytes: [u8; MAX_HANDSHAKE_PAYLOAD],
}

impl Payload {
    /// `bytes`, or `None` if longer than [`MAX_HANDSHAKE_PAYLOAD`].
    pub fn new(bytes: &[u8]) -> Option<Payload> {
        let mut p = Payload {
            len: 0,
            bytes: [0; MAX_HANDSHAKE_PAYLOAD],
        };
        p.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        p.len = bytes.len() as u16;
        Some(p)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// The gateway's handshake in flight: its Noise state and the initiation it sent.
pub(crate) struct PendingInitiation {
    state: HandshakeState,
    /// Random index the response and cookie reply echo.
    pub sender: u32,
    /// The session the initiation named (0: a new one), which a cookie reply echoes.
    pub session: u32,
    /// The initiation, with mac1 and a zero mac2.
    pub message: [u8; MAX_INITIATION_LEN],
    pub len: usize,
    pub mac1: [u8; MAC_LEN],
}

/// Builds an initiation to `server` naming `session` (0 for a new one).
pub(crate) fn initiate(
    local: &PrivateKey,
    server: &PublicKey,
    mac_keys: &MacKeys,
    rng: &mut Rng,
    session: u32,
    timestamp: u64,
    payload: &[u8],
) -> Result<PendingInitiation, snow::Error> {
    let sender = rng.nonzero_u32();
    let mut message = [0u8; MAX_INITIATION_LEN];
    write_handshake_header(&mut message, MessageType::Initiation, 0, session, sender);
    let mut state = Builder::with_resolver(params(), rng.resolver())
        .local_private_key(local.as_bytes())?
        .remote_public_key(server.as_bytes())?
        .prologue(&prologue(&message))?
        .build_initiator()?;
    let mut plain = [0u8; TIMESTAMP_LEN + MAX_HANDSHAKE_PAYLOAD];
    plain[..TIMESTAMP_LEN].copy_from_slice(&timestamp.to_be_bytes());
    let plain_len = TIMESTAMP_LEN + payload.len();
    plain
        .get_mut(TIMESTAMP_LEN..plain_len)
        .ok_or(snow::Error::Input)?
        .copy_from_slice(payload);
    let n = state.write_message(&plain[..plain_len], &mut message[HANDSHAKE_HEADER_LEN..])?;
    let mac_at = HANDSHAKE_HEADER_LEN + n;
    let mac1 = mac_keys.mac1(&message[..mac_at]);
    message[mac_at..mac_at + MAC_LEN].copy_from_slice(&mac1);
    Ok(PendingInitiation {
        state,
        sender,
        session,
        message,
        len: mac_at + 2 * MAC_LEN,
        mac1,
    })
}

/// What the gateway learns from the server's response.
pub(crate) struct Completed {
    pub keypair: Keypair,
    pub session: u32,
    pub payload: Payload,
}

impl PendingInitiation {
    /// Consumes the response to this initiation. On failure the Noise state is unchanged
    /// (`snow` rolls back), so the genuine response can still complete it.
    pub fn complete(
        &mut self,
        response: &Response<'_>,
        now: Instant,
        max_paths: usize,
    ) -> Result<Completed, Dropped> {
        let mut plain = [0u8; RESPONSE_FIELDS_LEN + MAX_HANDSHAKE_PAYLOAD];
        let n = self
            .state
            .read_message(response.noise(), &mut plain)
            .map_err(|_| Dropped::HandshakeFailed)?;
        // The server wrote at least the fields (the length is checked with the envelope),
        // so a short payload cannot pass authentication.
        let fields = plain
            .get(..RESPONSE_FIELDS_LEN)
            .filter(|_| n >= RESPONSE_FIELDS_LEN);
        let Some(&[epoch, a, b, c, d]) = fields else {
            return Err(Dropped::HandshakeFailed);
        };
        let session = u32::from_be_bytes([a, b, c, d]);
        let payload =
            Payload::new(&plain[RESPONSE_FIELDS_LEN..n]).ok_or(Dropped::HandshakeFailed)?;
        let (mut i2r, mut r2i) = self.state.dangerously_get_raw_split();
        let keypair = Keypair::new(epoch, now, &i2r, &r2i, max_paths);
        i2r.zeroize();
        r2i.zeroize();
        Ok(Completed {
            keypair,
            session,
            payload,
        })
    }
}

/// An initiation the server decrypted: who sent it, when, and the state to answer it with.
pub(crate) struct AcceptedInitiation {
    state: HandshakeState,
    pub remote: [u8; KEY_LEN],
    pub timestamp: u64,
    pub payload: Payload,
}

/// Decrypts an initiation (two Diffie-Hellman operations). The caller checks mac1 first and
/// the remote key against its peers after.
pub(crate) fn accept(
    local: &PrivateKey,
    rng: &mut Rng,
    init: &Initiation<'_>,
) -> Result<AcceptedInitiation, Dropped> {
    let fail = |_| Dropped::HandshakeFailed;
    let mut state = Builder::with_resolver(params(), rng.resolver())
        .local_private_key(local.as_bytes())
        .map_err(fail)?
        .prologue(&prologue(init.header()))
        .map_err(fail)?
        .build_responder()
        .map_err(fail)?;
    let mut plain = [0u8; TIMESTAMP_LEN + MAX_HANDSHAKE_PAYLOAD];
    let n = state.read_message(init.noise(), &mut plain).map_err(fail)?;
    let remote: [u8; KEY_LEN] = state
        .get_remote_static()
        .and_then(|r| r.try_into().ok())
        .ok_or(Dropped::HandshakeFailed)?;
    let mut ts = [0u8; TIMESTAMP_LEN];
    ts.copy_from_slice(plain.get(..TIMESTAMP_LEN).ok_or(Dropped::HandshakeFailed)?);
    if n < TIMESTAMP_LEN {
        return Err(Dropped::HandshakeFailed);
    }
    let payload = Payload::new(&plain[TIMESTAMP_LEN..n]).ok_or(Dropped::HandshakeFailed)?;
    Ok(AcceptedInitiation {
        state,
        remote,
        timestamp: u64::from_be_bytes(ts),
        payload,
    })
}

impl AcceptedInitiation {
    /// Writes the response into `out` (at least [`crate::envelope::MAX_RESPONSE_LEN`]
    /// bytes) and returns its length and the server's keys.
    #[expect(
        clippy::too_many_arguments,
        reason = "the response's fields, each used once"
    )]
    pub fn respond(
        mut self,
        epoch: u8,
        session: u32,
        receiver: u32,
        payload: &[u8],
        now: Instant,
        max_paths: usize,
        out: &mut [u8],
    ) -> Result<(usize, Keypair), Dropped> {
        let fail = |_| Dropped::HandshakeFailed;
        write_handshake_header(out, MessageType::Response, epoch, session, receiver);
        let mut plain = [0u8; RESPONSE_FIELDS_LEN + MAX_HANDSHAKE_PAYLOAD];
        plain[0] = epoch;
        plain[1..RESPONSE_FIELDS_LEN].copy_from_slice(&session.to_be_bytes());
        let plain_len = RESPONSE_FIELDS_LEN + payload.len();
        plain
            .get_mut(RESPONSE_FIELDS_LEN..plain_len)
            .ok_or(Dropped::HandshakeFailed)?
            .copy_from_slice(payload);
        let n = self
            .state
            .write_message(&plain[..plain_len], &mut out[HANDSHAKE_HEADER_LEN..])
            .map_err(fail)?;
        let (mut i2r, mut r2i) = self.state.dangerously_get_raw_split();
        let keypair = Keypair::new(epoch, now, &r2i, &i2r, max_paths);
        i2r.zeroize();
        r2i.zeroize();
        Ok((HANDSHAKE_HEADER_LEN + n, keypair))
    }
}
