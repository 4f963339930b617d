//! braid's wire format v1. See docs/wire.md.

/// A datagram that could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("datagram truncated")]
    Truncated,
}
