//! The engine: one tunnel between a gateway and a server over many paths.

use crate::{Config, Event, Instant, PathConfig, PathId, Role, SessionStats};

/// One datagram ready to go out on a path; its bytes are in the buffer passed to
/// [`Session::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    pub len: usize,
}

/// Why a received datagram was dropped. Every drop is also counted in [`SessionStats`].
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error("malformed datagram: {0}")]
    Malformed(#[from] braid_wire::Error),
    #[error("datagram for session {got}, this session is {expected}")]
    WrongSession { expected: u32, got: u32 },
    #[error("datagram on unknown path {0}")]
    UnknownPath(PathId),
}

/// The sans-IO bonding engine. See the crate docs for the driving contract.
pub struct Session {
    _config: Config,
}

impl Session {
    pub fn new(config: Config, _role: Role, _paths: &[PathConfig], _now: Instant) -> Session {
        Session { _config: config }
    }

    pub fn handle_datagram(
        &mut self,
        _now: Instant,
        _path: PathId,
        _datagram: &[u8],
    ) -> Result<(), HandleError> {
        todo!()
    }

    pub fn send(&mut self, _now: Instant, _packet: &[u8]) {
        todo!()
    }

    pub fn poll_transmit(&mut self, _now: Instant, _buf: &mut [u8]) -> Option<Transmit> {
        todo!()
    }

    pub fn poll_deliver(&mut self, _out: &mut Vec<u8>) -> bool {
        todo!()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!()
    }

    pub fn handle_timeout(&mut self, _now: Instant) {
        todo!()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        todo!()
    }

    pub fn stats(&self) -> SessionStats {
        todo!()
    }
}
