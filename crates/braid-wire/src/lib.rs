//! braid's wire format, version 1: zero-copy parse and emit of every datagram the two
//! engines exchange. The layout is specified in docs/wire.md.
//!
//! In the style of smoltcp's `wire` module: [`Datagram::parse`] borrows the payload from
//! the input and never panics on any input (a property test over random bytes and a
//! cargo-fuzz target check it); [`Datagram::emit`] writes into a caller-owned buffer and
//! allocates nothing.
//!
//! - [`header`]: the 16-byte common header every message starts with.
//! - [`message`]: the message bodies (data, coded, report, heartbeat, hello, config,
//!   address change, Reed-Solomon parity, nack).
//! - [`metering`]: the Hello's metering options (a gateway's metered paths and classes).

mod cursor;
pub mod header;
pub mod message;
pub mod metering;

pub use header::{
    Header, MessageType, PathAck, FLAG_ACK, FLAG_PATH_ACK, FLAG_UNORDERED, HEADER_LEN, VERSION,
};
pub use message::{
    Coded, ConfigMsg, Datagram, Hello, Message, Nack, Parity, PathEntries, PathEntry,
    CAP_RESTORES_HEADERS, CODED_FIXED_LEN, DATA_FIXED_LEN, MAX_BITMAP_LEN, NACK_FIXED_LEN,
    PARITY_FIXED_LEN, PATH_ENTRY_LEN,
};
pub use metering::{
    ClassMatchOpt, MeteredClassOpt, MeteredClassesOpt, MeteredPathOpt, MeteringOpt, UtilityOpt,
    MAX_METERED_PATHS,
};

/// Why a datagram could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The datagram ends before a field it must hold.
    #[error("datagram truncated")]
    Truncated,
    /// The version byte is not one this implementation speaks.
    #[error("unsupported wire version {0} (this build speaks version {VERSION})")]
    Version(u8),
    /// The type byte names no message type.
    #[error("unknown message type {0}")]
    UnknownType(u8),
    /// A field holds a value the format does not allow.
    #[error("malformed datagram: {0}")]
    Malformed(&'static str),
    /// The output buffer is too small for the datagram being emitted.
    #[error("output buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall { need: usize, have: usize },
}

/// Result of parsing or emitting.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests;
