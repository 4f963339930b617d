//! The tortoise's TCP connection, non-blocking: frames in, frames out, both buffered.

use std::io::{self, Read, Write};

use mio::net::TcpStream;

use super::frame::{self, Frame};
use super::TransferError;

/// Bytes queued for the tortoise beyond which the engine is not polled for more.
pub(super) const HIGH_WATER: usize = 256 * 1024;

pub(super) struct Tortoise {
    pub(super) stream: TcpStream,
    rx: Vec<u8>,
    tx: Vec<u8>,
    /// Bytes written to and read from the connection.
    pub(super) bytes: u64,
    closed: bool,
}

impl Tortoise {
    pub(super) fn new(stream: TcpStream) -> Tortoise {
        Tortoise {
            stream,
            rx: Vec::new(),
            tx: Vec::new(),
            bytes: 0,
            closed: false,
        }
    }

    pub(super) fn queue(&mut self, f: &Frame) {
        frame::emit(&mut self.tx, f);
    }

    pub(super) fn queued(&self) -> usize {
        self.tx.len()
    }

    /// Writes what the socket takes now.
    pub(super) fn flush(&mut self) -> Result<(), TransferError> {
        while !self.tx.is_empty() {
            match self.stream.write(&self.tx) {
                Ok(0) => return Err(gone("the tortoise connection closed")),
                Ok(n) => {
                    self.bytes += n as u64;
                    self.tx.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(classify(e)),
            }
        }
        Ok(())
    }

    /// Reads what has arrived; `Ok(true)` if anything did.
    pub(super) fn fill(&mut self) -> Result<bool, TransferError> {
        let mut buf = [0u8; 64 * 1024];
        let mut any = false;
        while !self.closed {
            match self.stream.read(&mut buf) {
                Ok(0) => self.closed = true,
                Ok(n) => {
                    any = true;
                    self.bytes += n as u64;
                    self.rx.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(classify(e)),
            }
        }
        Ok(any)
    }

    /// The next whole frame read, if any.
    pub(super) fn next(&mut self) -> Result<Option<Frame>, TransferError> {
        frame::parse(&mut self.rx).map_err(|e| TransferError::Protocol(e.to_string()))
    }

    /// Whether the peer closed its side and every frame it sent has been taken.
    pub(super) fn closed(&self) -> bool {
        self.closed && self.rx.len() < frame::HEADER
    }
}

fn gone(what: &str) -> TransferError {
    TransferError::PeerGone(what.to_owned())
}

fn classify(e: io::Error) -> TransferError {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionAborted => {
            TransferError::PeerGone(format!("the tortoise connection broke ({e})"))
        }
        _ => TransferError::Tortoise(e),
    }
}
