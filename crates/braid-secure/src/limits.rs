//! Key lifetimes and handshake timing: WireGuard's constants (WireGuard paper §6.1, and its
//! protocol page's table), which braid keeps unchanged except where said.

use std::time::Duration;

/// A gateway starts a new handshake once its current keys are this old.
pub const REKEY_AFTER_TIME: Duration = Duration::from_secs(120);
/// Keys this old are neither used to send nor accepted on receipt.
pub const REJECT_AFTER_TIME: Duration = Duration::from_secs(180);
/// A gateway starts a new handshake once it has sent this many messages under one key.
pub const REKEY_AFTER_MESSAGES: u64 = 1 << 60;
/// No path's counter under one key reaches this (WireGuard: 2^64 - 2^13 - 1); a received
/// counter at or above it is refused before any work.
pub const REJECT_AFTER_MESSAGES: u64 = u64::MAX - (1 << 13);
/// A handshake unanswered for this long is retried with a new one.
pub const REKEY_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this much random jitter is added to each retry, so that gateways that lost their
/// server together do not retry in lockstep.
pub const REKEY_JITTER: Duration = Duration::from_millis(333);
/// A cookie is used for mac2 for this long after it arrived; the server's cookie secret
/// changes this often.
pub const COOKIE_LIFETIME: Duration = Duration::from_secs(120);
/// A server processes at most one initiation from the same gateway per this interval
/// (WireGuard: 50 per second).
pub const MIN_INITIATION_INTERVAL: Duration = Duration::from_millis(20);
/// The gateway's initiation timestamps are truncated to multiples of this many nanoseconds
/// (about 16.8 ms), as WireGuard's are, so they do not give away the exact clock.
pub const TIMESTAMP_GRANULARITY_NS: u64 = 1 << 24;
