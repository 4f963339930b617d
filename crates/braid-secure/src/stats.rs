//! What the security layer did: every datagram it dropped, by reason, and what it accepted.
//! The daemon exports these (`braid status`, Prometheus).

use braid_core::PathId;
use serde::Serialize;

use crate::envelope::{EnvelopeError, MessageType};

/// Why a received datagram was dropped. Every drop is also counted in [`Stats`]; none
/// changes any state (in particular none moves a path's address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    #[error("malformed envelope: {0}")]
    Malformed(#[from] EnvelopeError),
    #[error("{0:?} message not expected at this end")]
    UnexpectedType(MessageType),
    #[error("no session {0:#010x}")]
    UnknownSession(u32),
    #[error("session {session:#010x} has no live keys of epoch {epoch}")]
    NoKeys { session: u32, epoch: u8 },
    #[error("failed authentication (forged, corrupted or truncated)")]
    Forged,
    #[error("replayed: path {path} counter {counter}")]
    Replayed { path: PathId, counter: u64 },
    #[error("too old for the replay window: path {path} counter {counter}")]
    TooOld { path: PathId, counter: u64 },
    #[error("counter beyond the key's limit")]
    CounterExhausted,
    #[error("path {0} would exceed the session's path limit")]
    TooManyPaths(PathId),
    #[error("handshake with an invalid mac1 (sender does not know the server's public key)")]
    BadMac1,
    #[error("handshake failed to authenticate")]
    HandshakeFailed,
    #[error("handshake from a key that is not allowed")]
    UnknownKey,
    #[error("handshake initiation not newer than the last one from that key (replay)")]
    HandshakeReplay,
    #[error("handshake initiations from one key too fast")]
    RateLimited,
    #[error("reply matches no pending handshake")]
    UnexpectedReply,
    #[error("cookie reply failed to authenticate")]
    BadCookieReply,
}

/// Counters of one endpoint ([`crate::Gateway`] or [`crate::Server`]), all since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Data datagrams authenticated and decrypted (keepalives included).
    pub opened: u64,
    /// Bytes of plaintext they carried.
    pub opened_bytes: u64,
    /// Data datagrams sealed (keepalives included).
    pub sealed: u64,
    /// Bytes of plaintext sealed.
    pub sealed_bytes: u64,
    /// Empty data datagrams (keepalives) opened.
    pub keepalives_received: u64,
    /// Handshakes completed: sessions established and rekeys.
    pub handshakes: u64,
    /// Handshake initiations sent (gateway; one per path per attempt) or received (server).
    pub initiations: u64,
    /// Cookie replies sent (server under load) or received (gateway).
    pub cookie_replies: u64,
    /// Copies of the latest handshake message that arrived again, over other paths (or
    /// replayed): the server answers them from its cache without new work or state, the
    /// gateway ignores them.
    pub duplicate_handshakes: u64,
    /// Sessions closed (replaced by a newer one from the same gateway, idle, or removed).
    pub sessions_closed: u64,
    /// Seal calls refused (no keys, buffer too small, path limit).
    pub seal_refused: u64,
    /// Events dropped because the caller did not poll them.
    pub events_dropped: u64,

    /// Drops, by reason (see [`Dropped`]).
    pub drop_malformed: u64,
    pub drop_unexpected_type: u64,
    pub drop_unknown_session: u64,
    pub drop_no_keys: u64,
    pub drop_forged: u64,
    pub drop_replayed: u64,
    pub drop_too_old: u64,
    pub drop_counter_exhausted: u64,
    pub drop_too_many_paths: u64,
    pub drop_bad_mac1: u64,
    pub drop_handshake_failed: u64,
    pub drop_unknown_key: u64,
    pub drop_handshake_replay: u64,
    pub drop_rate_limited: u64,
    pub drop_unexpected_reply: u64,
    pub drop_bad_cookie_reply: u64,
}

impl Stats {
    /// Counts a drop and hands it back.
    pub(crate) fn drop(&mut self, why: Dropped) -> Dropped {
        let c = match why {
            Dropped::Malformed(_) => &mut self.drop_malformed,
            Dropped::UnexpectedType(_) => &mut self.drop_unexpected_type,
            Dropped::UnknownSession(_) => &mut self.drop_unknown_session,
            Dropped::NoKeys { .. } => &mut self.drop_no_keys,
            Dropped::Forged => &mut self.drop_forged,
            Dropped::Replayed { .. } => &mut self.drop_replayed,
            Dropped::TooOld { .. } => &mut self.drop_too_old,
            Dropped::CounterExhausted => &mut self.drop_counter_exhausted,
            Dropped::TooManyPaths(_) => &mut self.drop_too_many_paths,
            Dropped::BadMac1 => &mut self.drop_bad_mac1,
            Dropped::HandshakeFailed => &mut self.drop_handshake_failed,
            Dropped::UnknownKey => &mut self.drop_unknown_key,
            Dropped::HandshakeReplay => &mut self.drop_handshake_replay,
            Dropped::RateLimited => &mut self.drop_rate_limited,
            Dropped::UnexpectedReply => &mut self.drop_unexpected_reply,
            Dropped::BadCookieReply => &mut self.drop_bad_cookie_reply,
        };
        *c += 1;
        why
    }

    /// All drops, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.drop_malformed
            + self.drop_unexpected_type
            + self.drop_unknown_session
            + self.drop_no_keys
            + self.drop_forged
            + self.drop_replayed
            + self.drop_too_old
            + self.drop_counter_exhausted
            + self.drop_too_many_paths
            + self.drop_bad_mac1
            + self.drop_handshake_failed
            + self.drop_unknown_key
            + self.drop_handshake_replay
            + self.drop_rate_limited
            + self.drop_unexpected_reply
            + self.drop_bad_cookie_reply
    }
}
