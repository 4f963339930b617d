//! Split-TCP mode (issue 19 item 3; oSCTP §III's transport put to work), the default for
//! TCP (`[engine] tcp_transport`; a traffic class with `transport = "split-tcp"` asks for
//! it too): TCP connections are terminated at the gateway by a
//! transparent proxy (an nftables redirect, [`redirect`]), their bytes carried on the
//! multipath reliable stream (braid_core::stream: one congestion window per path) and the
//! connection to the destination opened by the server, which relays. The client and the
//! destination are unmodified TCP hosts; each TCP leg runs over one short, clean hop.
//!
//! - [`frame`]: the frames that multiplex a session's connections on one stream each way.
//! - [`session`]: the stream pair and the relay between it and the sockets.
//! - [`service`]: the two event loops, each on its own thread beside the daemon's.
//! - [`redirect`]: the gateway's nftables table and `SO_ORIGINAL_DST`.
//!
//! The stream's datagrams travel on their own UDP port (the server's listen port + 1),
//! from one socket per uplink bound like the tunnel's, in a braid-secure session of their
//! own keyed by the daemons' keys ([`service`]). docs/architecture.md gives the connection
//! setup and its round trips.

pub mod arrivals;
pub use braid_core::stream::frame;
pub mod redirect;
pub mod service;
pub mod session;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use braid_core::class::Transport;

use crate::config::{tcp_transport, EngineSection, GatewayConfig, ServerConfig};
use crate::DaemonError;

/// The split-TCP port beside a daemon's tunnel port.
pub fn port_beside(tunnel: SocketAddr) -> SocketAddr {
    SocketAddr::new(tunnel.ip(), tunnel.port().wrapping_add(1))
}

/// Whether `e` asks for split-TCP in so many words (a class, or `tcp_transport`), rather
/// than by default: then a split-TCP that cannot start is an error, not a warning.
fn asked_for(e: &EngineSection) -> bool {
    e.tcp_transport == Some(Transport::SplitTcp)
        || e.classes.iter().any(|c| c.transport == Transport::SplitTcp)
}

/// The running split-TCP service; stopped, and the gateway's redirect removed, on drop.
#[derive(Debug)]
pub struct SplitTcp {
    /// The stream's bytes received per uplink (the gateway's) or per gateway and path
    /// (the server's), for the tunnel's capacity estimates ([`arrivals`]).
    arrivals: Option<arrivals::Arrivals>,
    peer_arrivals: Option<arrivals::PeerArrivals>,
    redirect: Option<redirect::Redirect>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SplitTcp {
    /// The gateway's service when any TCP crosses as split-TCP: the listener, the uplinks'
    /// sockets and the redirect (a stale table of a crashed run is replaced). Split-TCP by
    /// default only (no class or `tcp_transport` asking for it) steps aside with a warning
    /// where it cannot run (no routed prefix, no nftables, an uplink through a relay): TCP
    /// then crosses in the tunnel.
    pub fn gateway(cfg: &GatewayConfig) -> Result<Option<SplitTcp>, DaemonError> {
        let transport = tcp_transport(&cfg.engine);
        if !braid_core::class::any_split(&cfg.engine.classes, transport) {
            return Ok(None);
        }
        match Self::start_gateway(cfg, transport) {
            Err(e) if !asked_for(&cfg.engine) => {
                tracing::warn!(
                    "split-TCP (the default for TCP) is off, TCP crosses in the packet tunnel: {e}"
                );
                Ok(None)
            }
            r => r.map(Some),
        }
    }

    fn start_gateway(cfg: &GatewayConfig, transport: Transport) -> Result<SplitTcp, DaemonError> {
        if cfg.routes.is_empty() {
            return Err(DaemonError::Setup(format!(
                "{}: split-TCP needs at least one prefix in interface.routes",
                cfg.file
            )));
        }
        // The stream's sockets send straight to the server's port + 1; a relay forwards
        // the tunnel's port only.
        if let Some(u) = cfg.uplinks.iter().find(|u| u.relay.is_some()) {
            return Err(DaemonError::Setup(format!(
                "{}: uplink '{}' goes through a relay, which split-TCP's stream does not cross",
                cfg.file, u.name
            )));
        }
        let table = redirect::table_name(&cfg.tun);
        let bindings = cfg.uplinks.iter().map(|u| u.binding.clone()).collect();
        let sec = crate::secure::gateway_security(cfg, crate::clock::Clock::start().now())?;
        let arrivals = arrivals::Arrivals::new(cfg.uplinks.len());
        let mut lp = service::GatewayLoop::new(bindings, port_beside(cfg.server_endpoint), sec)
            .map_err(|e| DaemonError::Setup(format!("split-TCP listener: {e}")))?
            .with_arrivals(arrivals.clone());
        let ports = lp.ports()?;
        let classes = &cfg.engine.classes;
        let rules = redirect::ruleset(&table, &cfg.tun, &cfg.routes, classes, transport, ports)
            .map_err(|e| DaemonError::Setup(format!("{}: {e}", cfg.file)))?;
        let redirect = redirect::Redirect::install(&table, &rules)
            .map_err(|e| DaemonError::Setup(format!("split-TCP needs nftables: {e}")))?;
        let (stop, thread) = service::spawn("braid-split-tcp", move |stop| lp.run(stop))?;
        tracing::info!(
            table,
            port = ports.v4,
            port6 = ports.v6,
            classes = classes.len(),
            unclassified = ?transport,
            "split-TCP redirect installed"
        );
        Ok(SplitTcp {
            arrivals: Some(arrivals),
            peer_arrivals: None,
            redirect: Some(redirect),
            stop,
            thread: Some(thread),
        })
    }

    /// The server's service when any TCP crosses as split-TCP: a UDP socket on the listen
    /// port + 1.
    pub fn server(cfg: &ServerConfig) -> Result<Option<SplitTcp>, DaemonError> {
        if !braid_core::class::any_split(&cfg.engine.classes, tcp_transport(&cfg.engine)) {
            return Ok(None);
        }
        let at = port_beside(cfg.listen);
        let sec = crate::secure::server_security(cfg, crate::clock::Clock::start().now())?;
        let peer_arrivals = arrivals::PeerArrivals::default();
        let mut lp = service::ServerLoop::new(at, sec)
            .map_err(|e| DaemonError::Setup(format!("split-TCP socket {at}: {e}")))?
            .with_arrivals(peer_arrivals.clone());
        let (stop, thread) = service::spawn("braid-split-tcp", move |stop| lp.run(stop))?;
        tracing::info!(listen = %at, "split-TCP relay listening");
        Ok(Some(SplitTcp {
            arrivals: None,
            peer_arrivals: Some(peer_arrivals),
            redirect: None,
            stop,
            thread: Some(thread),
        }))
    }
}

impl SplitTcp {
    /// What the gateway's stream receives per uplink, for the tunnel's loop to take.
    pub fn arrivals(&self) -> Option<arrivals::Arrivals> {
        self.arrivals.clone()
    }

    /// What the server's stream receives per gateway and path, for the tunnel's loop.
    pub fn peer_arrivals(&self) -> Option<arrivals::PeerArrivals> {
        self.peer_arrivals.clone()
    }
}

impl Drop for SplitTcp {
    fn drop(&mut self) {
        // Rules first, so no new connection is sent to a listener about to close.
        self.redirect.take();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
