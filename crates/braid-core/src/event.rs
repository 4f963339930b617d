//! What the engine tells its driver, pulled with [`crate::Session::poll_event`].

use std::net::SocketAddr;
use std::time::Duration;

use crate::PathId;

/// A notable change in the session. Events are informational: the engine has already acted.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The path received traffic after being down (or for the first time).
    PathUp(PathId),
    /// Nothing was received on the path for the path timeout.
    PathDown(PathId),
    /// The peer reported a new capacity estimate for the direction we send on.
    CapacityChanged { path: PathId, bps: u64 },
    /// (Server) a gateway said hello.
    PeerHello { paths: Option<u8> },
    /// (Gateway) the server's configuration arrived and was applied.
    Configured {
        /// The tunnel address and prefix length the server gave this gateway.
        address: Option<(std::net::Ipv4Addr, u8)>,
        mtu: Option<u16>,
        hole_timeout: Option<Duration>,
    },
    /// The peer's address on a path changed.
    AddressChanged { path: PathId, addr: SocketAddr },
}
