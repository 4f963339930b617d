//! braid's real I/O on Linux: the daemon around the sans-IO engine.
//!
//! This is the one crate that touches the operating system (the engine and the simulator
//! never do): TUN devices, UDP sockets, netlink, signals, the clock.
//!
//! - [`config`]: the gateway's and the server's TOML configuration, checked at start.
//! - [`tun`]: the TUN device with TSO/GRO offloads (super-packets split and coalesced).
//! - [`udp`]: UDP sockets with GSO/GRO and `recvmmsg` through quinn-udp.
//! - [`batch`]: outgoing datagrams gathered into GSO runs.
//! - [`secure`]: the seal/open boundary every datagram crosses once each way (braid-secure).
//! - [`gateway`], [`server`]: the two event loops.
//! - [`split_tcp`]: split-TCP mode: the transparent proxy and its multipath stream.
//! - [`htppr`]: `braid send`/`receive` over a UDP-Lite hare and a TCP tortoise (HTPPR).
//! - [`links`]: netlink notifications of link and address changes.
//! - [`mss`]: TCP MSS clamping.
//! - [`status`], [`control`], [`metrics`], [`web`]: what the daemon shows (`braid status`,
//!   Prometheus, the live web dashboard).
//! - [`system`]: routes, forwarding and nftables, undone at shutdown.
//! - [`clock`]: the one clock read.
//! - [`testbed`]: network namespaces for the end-to-end test and the throughput benchmark.

pub mod batch;
pub mod clock;
pub mod config;
pub mod control;
pub mod crypto;
pub mod gateway;
pub mod htppr;
pub mod links;
pub mod meter_ledger;
pub mod metrics;
pub mod mss;
pub mod relay;
pub mod secure;
pub mod server;
pub mod split_tcp;
pub mod status;
pub mod stream_file;
pub mod system;
pub mod testbed;
pub mod tun;
pub mod udp;
pub mod web;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;

/// Why the daemon stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("cannot create TUN device '{name}': {source} (run as root, or with CAP_NET_ADMIN, and check that /dev/net/tun exists)")]
    Tun {
        name: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
    #[error("engine: {0}")]
    Engine(#[from] braid_core::ConfigError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// SIGINT and SIGTERM (stop) and SIGHUP (re-read what can change at runtime), watched by
/// the event loop.
pub struct Shutdown {
    signals: Signals,
    reload: bool,
}

impl Shutdown {
    pub fn new() -> std::io::Result<Shutdown> {
        Ok(Shutdown {
            signals: Signals::new([SIGINT, SIGTERM, SIGHUP])?,
            reload: false,
        })
    }

    pub(crate) fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
    ) -> std::io::Result<()> {
        registry.register(&mut self.signals, token, mio::Interest::READABLE)
    }

    /// Whether a SIGHUP arrived since the last call (read with [`Self::requested`]).
    pub(crate) fn take_reload(&mut self) -> bool {
        std::mem::take(&mut self.reload)
    }

    /// Whether a stop signal arrived; a SIGHUP among the pending signals is kept for
    /// [`Self::take_reload`].
    pub(crate) fn requested(&mut self) -> bool {
        let mut stop = false;
        for s in self.signals.pending() {
            if s == SIGHUP {
                self.reload = true;
            } else {
                stop = true;
            }
        }
        stop
    }
}
