//! `braid send FILE --to HOST:PORT [--via ADDR|IFACE]...` and `braid receive DIR --listen
//! ADDR`: one file over the multipath reliable stream (braid_core::file_transfer over
//! braid_core::stream, the transport split-TCP mode uses), one UDP socket per `--via`
//! path at the sender, one socket at the receiver, which learns each path's address from
//! where its datagrams arrive (as split-TCP's server does).
//!
//! Every datagram is split-TCP's envelope (`magic flags path paths session`,
//! crate::split_tcp::service) and a stream chunk, or no chunk: the sender's hello, sent on
//! every path at once and every second after, so the receiver knows every path's address
//! before the stream needs it. There is no encryption in this mode (`--insecure` says so
//! on the command line; docs/daemon.md): the file's SHA-256 is checked end to end, but
//! its bytes cross in the clear.
//!
//! - [`disk`]: the file at each end: the sender's source, checked for changes, and the
//!   receiver's `NAME.part` with its `NAME.part.state` (resume).
//! - [`send`], [`receive`]: the two event loops.

pub mod disk;
pub mod receive;
pub mod send;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use braid_core::file_transfer::TransferConfig;

pub use receive::BoundReceiver;
pub use send::send;

use crate::config::Binding;

/// The sender's options.
#[derive(Clone, Debug)]
pub struct SendOptions {
    /// The receiver's socket.
    pub to: SocketAddr,
    /// One path per binding; empty means one path from any local address.
    pub via: Vec<Binding>,
    /// Nothing heard from the receiver this long: it is gone.
    pub peer_timeout: Duration,
}

impl SendOptions {
    /// Options from `--to` and the `--via` values (addresses or interface names).
    pub fn parse(to: &str, via: &[String], peer_timeout: Duration) -> Result<Self, StreamError> {
        let to = crate::htppr::resolve("--to", to)
            .map_err(|e| StreamError::BadAddress(e.to_string()))?;
        let mut bindings = Vec::new();
        for v in via {
            if v.is_empty() || v.contains(':') && v.parse::<IpAddr>().is_err() {
                return Err(StreamError::BadAddress(format!(
                    "bad --via '{v}': expected a local address (192.0.2.7) or an interface name (wwan0)"
                )));
            }
            bindings.push(match v.parse::<IpAddr>() {
                Ok(a) => Binding::Address(a),
                Err(_) => Binding::Interface(v.clone()),
            });
        }
        if bindings.len() > 32 {
            return Err(StreamError::BadAddress("at most 32 --via paths".into()));
        }
        Ok(SendOptions {
            to,
            via: bindings,
            peer_timeout,
        })
    }
}

/// The transfer's options at both ends: split-TCP's stream settings (1400-byte chunks,
/// 8 MB windows, lab-split-tcp) and the peer timeout.
pub fn transfer_config(peer_timeout: Duration) -> TransferConfig {
    let mut c = TransferConfig::new(
        crate::split_tcp::session::stream_config(),
        crate::split_tcp::session::receiver_config(),
    );
    c.peer_timeout = peer_timeout;
    c
}

/// What a transfer reports while it runs.
#[derive(Clone, Debug, Default)]
pub struct StreamProgress {
    /// File bytes acknowledged (sender) or written (receiver).
    pub done: u64,
    /// The file's size (0 until the receiver has the offer).
    pub total: u64,
    /// Datagram bytes sent (sender) or received (receiver) per path so far.
    pub path_bytes: Vec<u64>,
    /// Since the loop started.
    pub elapsed: Duration,
}

/// One path of a finished transfer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PathSummary {
    /// The sender's `--via` (or "any"); at the receiver, the path's last source address.
    pub via: String,
    /// Datagram bytes sent (sender) or received (receiver) on this path.
    pub bytes: u64,
    pub datagrams: u64,
    /// Mbit/s over the whole transfer.
    pub mbit_s: f64,
}

/// A finished transfer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StreamSummary {
    /// The file: its path at the sender, where it was written at the receiver.
    pub path: PathBuf,
    pub bytes: u64,
    /// Bytes the receiver already held (resumed transfer); 0 from the start.
    pub resumed_from: u64,
    /// SHA-256 of the file, hex; both ends checked it.
    pub sha256: String,
    pub seconds: f64,
    /// File bytes crossed in this run over the seconds, MB/s.
    pub mb_s: f64,
    pub paths: Vec<PathSummary>,
    /// The sender's stream: chunks sent again, and paths failed (oSCTP §IV-E1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmitted_chunks: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_failures: Option<u64>,
}

/// Why a transfer failed; each message is one line naming the thing at fault.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("{0}")]
    BadAddress(String),
    #[error("cannot open the socket of {what}: {cause}")]
    Bind { what: String, cause: std::io::Error },
    #[error("{path}: {cause}")]
    File {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Transfer(#[from] braid_core::file_transfer::TransferError),
    #[error("the event loop failed: {0}")]
    Poll(std::io::Error),
}

fn per_path(bytes: &[u64], datagrams: &[u64], names: &[String], secs: f64) -> Vec<PathSummary> {
    bytes
        .iter()
        .zip(datagrams)
        .zip(names)
        .map(|((&b, &d), n)| PathSummary {
            via: n.clone(),
            bytes: b,
            datagrams: d,
            mbit_s: b as f64 * 8.0 / secs.max(1e-6) / 1e6,
        })
        .collect()
}
