//! A session's keys across rekeys, as WireGuard keeps them (WireGuard paper §6.1, §6.3):
//!
//! - `current`: seals everything sent, and opens;
//! - `previous`: the keys `current` replaced, kept until they expire so that datagrams
//!   already in flight under them still open;
//! - `next` (server only): keys of a handshake the server answered but the gateway has not
//!   yet used. The server does not seal with them until the first datagram under them
//!   arrives (key confirmation); then they become `current`.
//!
//! A data message names its keys by epoch (byte 1), which increments with every handshake
//! of the session; the three live epochs are always distinct.

use braid_core::{Instant, PathId};

use crate::envelope::DataHeader;
use crate::keypair::{Keypair, OpenKey, SealError, SealKey};
use crate::Dropped;

#[derive(Default)]
pub(crate) struct Keyring {
    pub current: Option<Keypair>,
    pub previous: Option<Keypair>,
    pub next: Option<Keypair>,
}

impl Keyring {
    /// Installs keys the gateway completed: they become current at once.
    pub fn install_current(&mut self, keys: Keypair) {
        self.previous = self.current.replace(keys);
    }

    /// Installs keys the server answered with: they wait for confirmation. A repeated
    /// handshake for the same epoch replaces an unconfirmed one.
    pub fn install_next(&mut self, keys: Keypair) {
        self.next = Some(keys);
    }

    /// Seals with the current keys (see [`Keypair::seal`]).
    pub fn seal(
        &mut self,
        now: Instant,
        session: u32,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<usize, SealError> {
        match self.current.as_mut() {
            Some(k) if !k.expired(now) => k.seal(session, path, buf, len),
            _ => Err(SealError::NoKeys),
        }
    }

    /// [`Keyring::seal`] without the encryption (see [`Keypair::seal_deferred`]).
    pub fn seal_deferred(
        &mut self,
        now: Instant,
        session: u32,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<(usize, &SealKey), SealError> {
        match self.current.as_mut() {
            Some(k) if !k.expired(now) => k.seal_deferred(session, path, buf, len),
            _ => Err(SealError::NoKeys),
        }
    }

    /// The keys of the datagram's epoch, live at `now`, and whether they are `next`.
    fn slot(&mut self, now: Instant, header: &DataHeader) -> Result<(&mut Keypair, bool), Dropped> {
        let no_keys = Dropped::NoKeys {
            session: header.session,
            epoch: header.epoch,
        };
        let is = |k: &Option<Keypair>| k.as_ref().is_some_and(|k| k.epoch == header.epoch);
        let (slot, confirms) = if is(&self.current) {
            (&mut self.current, false)
        } else if is(&self.previous) {
            (&mut self.previous, false)
        } else if is(&self.next) {
            (&mut self.next, true)
        } else {
            return Err(no_keys);
        };
        let keys = slot.as_mut().ok_or(no_keys)?;
        if keys.expired(now) {
            return Err(no_keys);
        }
        Ok((keys, confirms))
    }

    /// The checks before the AEAD (see [`Keypair::open_check`]); nothing changes.
    pub fn open_check(&mut self, now: Instant, header: &DataHeader) -> Result<&OpenKey, Dropped> {
        let (keys, _) = self.slot(now, header)?;
        keys.open_check(header)
    }

    /// After the AEAD: commits the replay window of the datagram's keys and, if they were
    /// `next`, makes them current (key confirmation). Whether they were.
    pub fn open_commit(&mut self, now: Instant, header: &DataHeader) -> Result<bool, Dropped> {
        let (keys, confirms) = self.slot(now, header)?;
        keys.open_commit(header)?;
        if confirms {
            self.previous = self.current.take();
            self.current = self.next.take();
        }
        Ok(confirms)
    }

    /// Drops keys that expired by `now`.
    pub fn expire(&mut self, now: Instant) {
        for slot in [&mut self.current, &mut self.previous, &mut self.next] {
            if slot.as_ref().is_some_and(|k| k.expired(now)) {
                *slot = None;
            }
        }
    }

    /// When the next keys expire.
    pub fn next_expiry(&self) -> Option<Instant> {
        [&self.current, &self.previous, &self.next]
            .into_iter()
            .flatten()
            .map(Keypair::expires_at)
            .min()
    }
}
