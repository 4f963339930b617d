//! HTPPR over real links (Badam et al., MobiHoc '11): a file crosses a fast lossy hare as
//! UDP-Lite datagrams whose damaged payloads still reach braid ([`udplite`]), while a slow
//! reliable tortoise, a TCP connection, carries the engine's metadata and feedback
//! ([`frame`]). The protocol itself is [`braid_core::htppr`]; this module only moves its
//! bytes, paces the hare and checks the file's SHA-256 at the end.
//!
//! - [`send`]: `braid send FILE --hare ADDR --tortoise ADDR`.
//! - [`receive`]: `braid receive DIR --hare ADDR --tortoise ADDR`; one file, then it returns.
//!
//! The hare's rate is not learned here: a socket cannot pick an 802.11 bit rate, so the
//! engine's autorate is off and the sender paces its datagrams at `hare_kbps`.

pub mod frame;
pub mod receive;
pub mod send;
mod tortoise;
pub mod udplite;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

pub use receive::{receive, BoundReceiver};
pub use send::send;

/// Where the two links go, and how the hare is driven.
#[derive(Clone, Debug)]
pub struct Options {
    /// The receiver's hare socket (UDP-Lite).
    pub hare: SocketAddr,
    /// The receiver's tortoise listener (TCP).
    pub tortoise: SocketAddr,
    /// The sender's pace on the hare, kbit/s of datagram bytes.
    pub hare_kbps: u32,
    /// How long either end waits without progress before it calls the peer gone.
    pub stall_timeout: Duration,
}

impl Options {
    /// Options from the command line's `--hare` and `--tortoise` (HOST:PORT each).
    pub fn parse(hare: &str, tortoise: &str, hare_mbps: f64) -> Result<Options, TransferError> {
        if !(hare_mbps.is_finite() && (0.01..=10_000.0).contains(&hare_mbps)) {
            return Err(TransferError::BadRate(hare_mbps));
        }
        Ok(Options {
            hare: resolve("--hare", hare)?,
            tortoise: resolve("--tortoise", tortoise)?,
            hare_kbps: (hare_mbps * 1000.0).round() as u32,
            stall_timeout: Duration::from_secs(30),
        })
    }
}

pub(crate) fn resolve(flag: &'static str, value: &str) -> Result<SocketAddr, TransferError> {
    let bad = |reason: String| TransferError::BadAddress {
        flag,
        value: value.to_owned(),
        reason,
    };
    let mut addrs = value
        .to_socket_addrs()
        .map_err(|e| bad(format!("{e}; expected HOST:PORT, e.g. 192.0.2.7:7400")))?;
    addrs
        .next()
        .ok_or_else(|| bad("it resolves to no address".into()))
}

/// What a transfer reports while it runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Bytes delivered (receiver) or answered for (sender).
    pub done: u64,
    /// The file's size (0 until the receiver has heard it).
    pub total: u64,
}

/// A finished transfer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    /// The file: its path at the sender, where it was written at the receiver.
    pub path: PathBuf,
    pub bytes: u64,
    /// SHA-256 of the file, hex; both ends checked it.
    pub sha256: String,
    pub seconds: f64,
    pub hare_packets: u64,
    pub hare_bytes: u64,
    pub tortoise_bytes: u64,
    /// Blocks sent again (sender) or packets repaired block by block (receiver's ARQs).
    pub repairs: u64,
}

/// Why a transfer failed; each message is one line naming the thing at fault.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("bad {flag} address '{value}': {reason}")]
    BadAddress {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("bad --hare-mbps {0}: expected a rate between 0.01 and 10000 Mbit/s")]
    BadRate(f64),
    // The io errors are part of each message (the peer is sent the message alone), so they
    // are not also chained as sources, which would print them twice.
    #[error("cannot open the {what} socket on {addr}: {cause}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("cannot reach the receiver's tortoise at {addr}: {cause} (is `braid receive` listening there?)")]
    Connect {
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("{path}: {cause}")]
    File {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{0} changed while it was being sent (its size or modification time moved); send it again once it is still")]
    FileChanged(PathBuf),
    #[error("the peer went away: {0}")]
    PeerGone(String),
    #[error("the tortoise connection failed: {0}")]
    Tortoise(std::io::Error),
    #[error("the hare socket failed: {0}")]
    Hare(std::io::Error),
    #[error("the peer broke the protocol: {0}")]
    Protocol(String),
    #[error("the receiver refused the file: {0}")]
    Refused(String),
    #[error("the sender gave up: {0}")]
    Aborted(String),
    #[error("SHA-256 mismatch: the sender's file is {expected}, the bytes received are {got}")]
    HashMismatch { expected: String, got: String },
}

impl TransferError {
    fn file(path: impl Into<PathBuf>, cause: std::io::Error) -> TransferError {
        TransferError::File {
            path: path.into(),
            cause,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
