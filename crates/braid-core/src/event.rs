//! What the engine tells its driver, pulled with [`crate::Session::poll_event`].

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
}
