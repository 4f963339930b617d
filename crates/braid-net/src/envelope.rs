//! The boundary between braid datagrams and the wire: every datagram a session sends is
//! sealed at one call site, and every datagram it receives is opened at one, so that the
//! encryption layer plugs in at exactly these two places.

use braid_core::PathId;

/// Why a datagram was not opened (or sealed). Counted, never fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("datagram failed authentication")]
    Authentication,
    #[error("datagram replayed or too old")]
    Replay,
    #[error("datagram too short or malformed")]
    Malformed,
    #[error("output buffer too small")]
    BufferTooSmall,
    #[error("no keys yet")]
    NoKeys,
}

/// Seals and opens one session's datagrams.
pub trait Envelope {
    /// Bytes [`Envelope::seal`] adds to a datagram.
    fn overhead(&self) -> usize;

    /// Writes `plain`, sealed, to the front of `out`; returns its length.
    fn seal(&mut self, path: PathId, plain: &[u8], out: &mut [u8]) -> Result<usize, EnvelopeError>;

    /// Opens `datagram` in place and returns the braid datagram inside it.
    fn open<'a>(
        &mut self,
        path_hint: Option<PathId>,
        datagram: &'a mut [u8],
    ) -> Result<&'a [u8], EnvelopeError>;
}

/// No encryption: the braid datagram is the UDP payload. Only when a config says
/// `plaintext = true` (benchmarks of the bare data path).
#[derive(Clone, Copy, Debug, Default)]
pub struct Plaintext;

impl Envelope for Plaintext {
    fn overhead(&self) -> usize {
        0
    }

    fn seal(&mut self, _: PathId, plain: &[u8], out: &mut [u8]) -> Result<usize, EnvelopeError> {
        let dst = out
            .get_mut(..plain.len())
            .ok_or(EnvelopeError::BufferTooSmall)?;
        dst.copy_from_slice(plain);
        Ok(plain.len())
    }

    fn open<'a>(
        &mut self,
        _: Option<PathId>,
        datagram: &'a mut [u8],
    ) -> Result<&'a [u8], EnvelopeError> {
        Ok(datagram)
    }
}
