//! Static keys: X25519 private and public keys, written as base64 of their 32 bytes, the
//! format of `wg genkey` and `wg pubkey` (so a key made by either tool works in the other).

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use curve25519_dalek::montgomery::MontgomeryPoint;
use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroize;

/// Bytes in an X25519 key.
pub const KEY_LEN: usize = 32;
/// Characters in a key's base64 form (with its one `=` of padding).
pub const KEY_BASE64_LEN: usize = 44;

/// Why a key did not parse. Each message names the problem and what a key looks like.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the key is empty (a key is 44 base64 characters, as `braid genkey` prints)")]
    Empty,
    #[error(
        "the key is not base64: character {character:?} at position {position} (a key is 44 \
         base64 characters, as `braid genkey` prints)"
    )]
    InvalidCharacter { character: char, position: usize },
    #[error(
        "the key is {0} characters long; a key is 44 base64 characters (32 bytes), as `braid \
         genkey` prints"
    )]
    WrongLength(usize),
    #[error("the key's last base64 character is not canonical (was it cut or edited?)")]
    NotCanonical,
    #[error(
        "the public key is a low-order point, which would make every shared secret zero; it \
         cannot come from `braid pubkey`"
    )]
    LowOrder,
}

/// An X25519 private key. Zeroed when dropped; its `Debug` output hides it.
#[derive(Clone)]
pub struct PrivateKey([u8; KEY_LEN]);

/// An X25519 public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey([u8; KEY_LEN]);

impl PrivateKey {
    /// A new random key from `rng`, clamped as X25519 uses it (RFC 7748 §5), which is also
    /// what `wg genkey` prints.
    pub fn generate<R: RngCore + CryptoRng>(rng: &mut R) -> PrivateKey {
        let mut bytes = [0u8; KEY_LEN];
        rng.fill_bytes(&mut bytes);
        PrivateKey::from_bytes(bytes)
    }

    /// A new key from the operating system's random source.
    pub fn generate_from_os() -> Result<PrivateKey, getrandom::Error> {
        let mut bytes = [0u8; KEY_LEN];
        getrandom::fill(&mut bytes)?;
        Ok(PrivateKey::from_bytes(bytes))
    }

    /// The key with these bytes, clamped.
    pub fn from_bytes(mut bytes: [u8; KEY_LEN]) -> PrivateKey {
        bytes[0] &= 248;
        bytes[31] &= 127;
        bytes[31] |= 64;
        PrivateKey(bytes)
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(MontgomeryPoint::mul_base_clamped(self.0).to_bytes())
    }

    /// The raw bytes, for the handshake.
    pub(crate) fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// The base64 form (`braid genkey` output). The caller decides where a secret may go.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }
}

impl PublicKey {
    /// The key with these bytes, refused if it is a low-order point.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Result<PublicKey, KeyError> {
        // A low-order point times any clamped scalar (a multiple of the cofactor 8) is the
        // identity, so one scalar multiplication tells.
        let probe = MontgomeryPoint(bytes).mul_clamped([0x55; KEY_LEN]);
        if probe.to_bytes() == [0u8; KEY_LEN] {
            return Err(KeyError::LowOrder);
        }
        Ok(PublicKey(bytes))
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// The base64 form (`braid pubkey` output).
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }
}

/// Decodes 44 characters of base64 into 32 bytes, with an error that names the problem.
/// Surrounding whitespace (a trailing newline from a file or a pipe) is ignored.
fn decode(text: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(KeyError::Empty);
    }
    if let Some((position, character)) = text.char_indices().find(|&(i, c)| {
        !(c.is_ascii_alphanumeric() || c == '+' || c == '/' || (c == '=' && i >= 42))
    }) {
        return Err(KeyError::InvalidCharacter {
            character,
            position,
        });
    }
    if text.len() != KEY_BASE64_LEN || !text.ends_with('=') || text.ends_with("==") {
        return Err(KeyError::WrongLength(text.chars().count()));
    }
    let mut out = [0u8; KEY_LEN];
    match STANDARD.decode_slice(text, &mut out) {
        Ok(KEY_LEN) => Ok(out),
        Ok(_) => Err(KeyError::WrongLength(text.len())),
        Err(_) => Err(KeyError::NotCanonical),
    }
}

impl FromStr for PrivateKey {
    type Err = KeyError;

    /// Parses base64. The bytes are clamped (a key from `wg genkey` already is).
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let mut bytes = decode(s)?;
        let key = PrivateKey::from_bytes(bytes);
        bytes.zeroize();
        Ok(key)
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, KeyError> {
        PublicKey::from_bytes(decode(s)?)
    }
}

impl Drop for PrivateKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey(public {})", self.public_key())
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    /// RFC 7748 §6.1's test vector: Alice's private and public keys.
    const ALICE_PRIVATE: &str = "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=";
    const ALICE_PUBLIC: &str = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";

    #[test]
    fn rfc7748_vector_gives_the_public_key() {
        let private: PrivateKey = ALICE_PRIVATE.parse().unwrap();
        assert_eq!(private.public_key().to_base64(), ALICE_PUBLIC);
        let public: PublicKey = ALICE_PUBLIC.parse().unwrap();
        assert_eq!(private.public_key(), public);
    }

    #[test]
    fn generated_keys_round_trip_through_base64() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        for _ in 0..20 {
            let k = PrivateKey::generate(&mut rng);
            let text = k.to_base64();
            assert_eq!(text.len(), KEY_BASE64_LEN);
            let back: PrivateKey = format!("{text}\n").parse().unwrap();
            assert_eq!(back.as_bytes(), k.as_bytes());
            let p = k.public_key();
            assert_eq!(p.to_base64().parse::<PublicKey>().unwrap(), p);
        }
    }

    #[test]
    fn parse_errors_name_the_problem() {
        assert_eq!("".parse::<PublicKey>(), Err(KeyError::Empty));
        assert_eq!(" \n".parse::<PublicKey>(), Err(KeyError::Empty));
        assert_eq!(
            "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo".parse::<PublicKey>(),
            Err(KeyError::WrongLength(43))
        );
        assert_eq!(
            "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmoA=".parse::<PublicKey>(),
            Err(KeyError::WrongLength(45))
        );
        assert_eq!(
            "hSDwCYkwp1R0i33ctD73Wg2-Og0mOBr066SpjqqbTmo=".parse::<PublicKey>(),
            Err(KeyError::InvalidCharacter {
                character: '-',
                position: 23
            })
        );
        assert_eq!(
            "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmp=".parse::<PublicKey>(),
            Err(KeyError::NotCanonical)
        );
        let msg = "hSDw".parse::<PublicKey>().unwrap_err().to_string();
        assert!(msg.contains("44 base64 characters"), "{msg}");
    }

    #[test]
    fn low_order_public_keys_are_refused() {
        assert_eq!(PublicKey::from_bytes([0; 32]), Err(KeyError::LowOrder));
        let mut one = [0u8; 32];
        one[0] = 1;
        assert_eq!(PublicKey::from_bytes(one), Err(KeyError::LowOrder));
    }

    #[test]
    fn debug_hides_the_private_key() {
        let k: PrivateKey = ALICE_PRIVATE.parse().unwrap();
        let shown = format!("{k:?}");
        assert!(!shown.contains(ALICE_PRIVATE), "{shown}");
        assert!(shown.contains(ALICE_PUBLIC), "{shown}");
    }
}
