//! One handshake's transport keys: ChaCha20-Poly1305 (RFC 8439) in place on every datagram,
//! with a message counter and a replay window per path.
//!
//! WireGuard keeps one counter and one window per key (8128 counters in wireguard-go and the
//! Linux module). A bonded session sends over several paths at once whose delays differ by
//! hundreds of milliseconds, so datagrams of a fast path overtake those of a slow one by
//! thousands of counter values, and at high rates a single window refuses legitimate late
//! datagrams. Here each path counts on its own and keeps its own window; the path id is
//! bound into the nonce (and the header, the associated data, carries it), so a (path,
//! counter) pair is used once per key and a datagram cannot be moved to another path's
//! counter space. The cost is about 1 KB per path in use. `braid bench replay-window`
//! measures both: with 1000 ms between two paths at 100 Mbit/s WireGuard's window refuses
//! part of the slow path's datagrams and per-path windows none.
//!
//! The AEAD is `ring`'s: measured on the project's machine it seals 1400-byte datagrams about
//! four times as fast as the RustCrypto `chacha20poly1305` crate (docs/benchmarks.md,
//! `secure-transport`).

use std::ops::Range;
use std::sync::Arc;

use braid_core::{Instant, PathId};
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, CHACHA20_POLY1305};

use crate::envelope::{DataHeader, DATA_HEADER_LEN, DATA_OVERHEAD, TAG_LEN};
use crate::limits::{REJECT_AFTER_MESSAGES, REJECT_AFTER_TIME};
use crate::replay::{ReplayError, ReplayWindow};
use crate::Dropped;

/// Why a datagram could not be sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("no session is established yet")]
    NotConnected,
    #[error("no session {0:#010x}")]
    UnknownSession(u32),
    #[error("the session has no live keys (expired; a new handshake is due)")]
    NoKeys,
    #[error("buffer of {have} bytes cannot hold the {need}-byte datagram")]
    BufferTooSmall { need: usize, have: usize },
    #[error("path {0} would exceed the session's path limit")]
    TooManyPaths(PathId),
    #[error("the path's counter reached the key's limit")]
    CounterExhausted,
}

/// Per-path state under one key.
#[derive(Clone, Debug, Default)]
struct PathCrypto {
    /// Counter of the next datagram sealed on the path.
    send_next: u64,
    window: ReplayWindow,
}

/// Path id → per-path state, for at most `max` paths; allocated on first use of a path, not
/// per datagram.
#[derive(Clone, Debug)]
struct PathTable {
    /// `index[path]` is the slot of `path`, or `NONE`.
    index: [u8; 256],
    slots: Vec<PathCrypto>,
    max: usize,
}

const NONE: u8 = u8::MAX;

impl PathTable {
    fn new(max: usize) -> PathTable {
        PathTable {
            index: [NONE; 256],
            slots: Vec::new(),
            max: max.min(NONE as usize),
        }
    }

    fn get(&self, path: PathId) -> Option<&PathCrypto> {
        self.slots.get(self.index[path as usize] as usize)
    }

    fn get_or_insert(&mut self, path: PathId) -> Option<&mut PathCrypto> {
        let i = self.index[path as usize];
        if i == NONE {
            if self.slots.len() >= self.max {
                return None;
            }
            self.index[path as usize] = self.slots.len() as u8;
            self.slots.push(PathCrypto::default());
            return self.slots.last_mut();
        }
        self.slots.get_mut(i as usize)
    }
}

/// The keys of one completed handshake and what each path did with them.
pub(crate) struct Keypair {
    /// Which handshake of the session made these keys (increments, wraps).
    pub epoch: u8,
    /// When the handshake completed at this end.
    pub created: Instant,
    /// Messages sealed on all paths, for the rekey-after-messages rule.
    pub sent: u64,
    send: SealKey,
    recv: OpenKey,
    paths: PathTable,
}

/// The sending key of a session's keys, detached from its counters so that the AEAD work of a
/// datagram can run on another thread than its bookkeeping (the daemon seals a batch on two
/// cores). The counter and header were fixed by the endpoint's `seal_deferred`, in order;
/// this only encrypts. Cloning shares the key (an `Arc`), it does not copy it.
#[derive(Clone)]
pub struct SealKey(Arc<LessSafeKey>);

/// The receiving key of a session's keys, detached as [`SealKey`] is: [`OpenKey::open`]
/// authenticates and decrypts; the replay window is committed by the endpoint's
/// `finish_open`, in the daemon's thread, so the window's semantics are unchanged.
#[derive(Clone)]
pub struct OpenKey(Arc<LessSafeKey>);

/// A datagram that [`OpenKey::open`] authenticated and decrypted: only this proves to
/// `finish_open` that the replay window may move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authenticated {
    pub(crate) header: DataHeader,
    pub(crate) payload: Range<usize>,
}

impl Authenticated {
    /// The plaintext's range in the datagram's buffer.
    pub fn payload(&self) -> Range<usize> {
        self.payload.clone()
    }
}

impl SealKey {
    /// Encrypts `datagram` (the whole message: the header a `seal_deferred` wrote, the
    /// payload, room for the tag) in place.
    pub fn seal(&self, datagram: &mut [u8]) -> Result<(), SealError> {
        let have = datagram.len();
        if have < DATA_OVERHEAD {
            return Err(SealError::BufferTooSmall {
                need: DATA_OVERHEAD,
                have,
            });
        }
        let mut aad = [0u8; DATA_HEADER_LEN];
        aad.copy_from_slice(&datagram[..DATA_HEADER_LEN]);
        let nonce = DataHeader::read(&aad).nonce();
        let (body, tail) = datagram[DATA_HEADER_LEN..].split_at_mut(have - DATA_OVERHEAD);
        let tag = self
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), body)
            // ring refuses only inputs beyond ChaCha20's 256 GiB per-nonce limit.
            .map_err(|_| SealError::BufferTooSmall {
                need: have,
                have: 0,
            })?;
        tail[..TAG_LEN].copy_from_slice(tag.as_ref());
        Ok(())
    }
}

impl OpenKey {
    /// Authenticates and decrypts the data message `datagram` in place (the header was
    /// checked by the endpoint's `handle_deferred`, which gave this key).
    pub fn open(&self, header: &DataHeader, datagram: &mut [u8]) -> Result<Authenticated, Dropped> {
        let n = datagram.len();
        if n < DATA_OVERHEAD {
            return Err(Dropped::Forged);
        }
        let mut aad = [0u8; DATA_HEADER_LEN];
        aad.copy_from_slice(&datagram[..DATA_HEADER_LEN]);
        if DataHeader::read(&aad) != *header {
            return Err(Dropped::Forged);
        }
        let tag = Tag::try_from(&datagram[n - TAG_LEN..]).map_err(|_| Dropped::Forged)?;
        self.0
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(header.nonce()),
                Aad::from(aad),
                tag,
                &mut datagram[DATA_HEADER_LEN..n - TAG_LEN],
                0..,
            )
            .map_err(|_| Dropped::Forged)?;
        Ok(Authenticated {
            header: *header,
            payload: DATA_HEADER_LEN..n - TAG_LEN,
        })
    }
}

impl Keypair {
    /// Keys from a handshake's split: `send` seals, `recv` opens.
    pub fn new(
        epoch: u8,
        created: Instant,
        send: &[u8; 32],
        recv: &[u8; 32],
        max_paths: usize,
    ) -> Keypair {
        Keypair {
            epoch,
            created,
            sent: 0,
            send: SealKey(Arc::new(aead_key(send))),
            recv: OpenKey(Arc::new(aead_key(recv))),
            paths: PathTable::new(max_paths),
        }
    }

    /// Whether the keys are past [`REJECT_AFTER_TIME`] at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.created) >= REJECT_AFTER_TIME
    }

    /// When the keys expire.
    pub fn expires_at(&self) -> Instant {
        self.created + REJECT_AFTER_TIME
    }

    /// Seals `buf[DATA_HEADER_LEN..DATA_HEADER_LEN + len]` in place as a data message of
    /// `session` on `path`: writes the header before it and the tag after it, and returns
    /// the datagram's length (`len + DATA_OVERHEAD`).
    pub fn seal(
        &mut self,
        session: u32,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<usize, SealError> {
        let (total, key) = self.seal_deferred(session, path, buf, len)?;
        key.seal(&mut buf[..total])?;
        Ok(total)
    }

    /// [`Keypair::seal`]'s bookkeeping without the encryption: takes the path's next
    /// counter, writes the header, and returns the datagram's length and the key that
    /// encrypts `buf[..n]` (at once or on another thread; until then it is not sendable).
    pub fn seal_deferred(
        &mut self,
        session: u32,
        path: PathId,
        buf: &mut [u8],
        len: usize,
    ) -> Result<(usize, &SealKey), SealError> {
        let total = len.saturating_add(DATA_OVERHEAD);
        let have = buf.len();
        if have < total {
            return Err(SealError::BufferTooSmall { need: total, have });
        }
        let state = self
            .paths
            .get_or_insert(path)
            .ok_or(SealError::TooManyPaths(path))?;
        let counter = state.send_next;
        if counter >= REJECT_AFTER_MESSAGES {
            return Err(SealError::CounterExhausted);
        }
        state.send_next += 1;
        self.sent += 1;
        let header = DataHeader {
            epoch: self.epoch,
            path,
            session,
            counter,
        };
        let mut head = [0u8; DATA_HEADER_LEN];
        header.write(&mut head);
        buf[..DATA_HEADER_LEN].copy_from_slice(&head);
        Ok((total, &self.send))
    }

    /// Authenticates and decrypts a data message in place; on success the plaintext is
    /// `buf[range]`. The replay window is checked before and committed after the AEAD, so a
    /// forgery changes nothing; a path gets its state only once a datagram on it
    /// authenticated. (The endpoints go through [`Keypair::open_check`], [`OpenKey::open`]
    /// and [`Keypair::open_commit`], the same steps.)
    #[cfg(test)]
    pub fn open(&mut self, header: &DataHeader, buf: &mut [u8]) -> Result<Range<usize>, Dropped> {
        let opened = self.open_check(header)?.open(header, buf)?;
        self.open_commit(header)?;
        Ok(opened.payload)
    }

    /// The checks before the AEAD (counter limit, replay window, path limit), changing
    /// nothing; the key to open with.
    pub fn open_check(&self, header: &DataHeader) -> Result<&OpenKey, Dropped> {
        let (path, counter) = (header.path, header.counter);
        if counter >= REJECT_AFTER_MESSAGES {
            return Err(Dropped::CounterExhausted);
        }
        match self.paths.get(path) {
            Some(state) => state.window.check(counter).map_err(|e| match e {
                ReplayError::Replayed => Dropped::Replayed { path, counter },
                ReplayError::TooOld => Dropped::TooOld { path, counter },
            })?,
            None if self.paths.slots.len() >= self.paths.max => {
                return Err(Dropped::TooManyPaths(path))
            }
            None => {}
        }
        Ok(&self.recv)
    }

    /// After the AEAD: checks the window again (a duplicate opened in the same batch is
    /// refused here) and commits the counter.
    pub fn open_commit(&mut self, header: &DataHeader) -> Result<(), Dropped> {
        let (path, counter) = (header.path, header.counter);
        let state = self
            .paths
            .get_or_insert(path)
            .ok_or(Dropped::TooManyPaths(path))?;
        state.window.check(counter).map_err(|e| match e {
            ReplayError::Replayed => Dropped::Replayed { path, counter },
            ReplayError::TooOld => Dropped::TooOld { path, counter },
        })?;
        state.window.commit(counter);
        Ok(())
    }

    /// Moves a path's send counter, so tests can reach the message limits.
    #[cfg(test)]
    pub fn set_send_counter(&mut self, path: PathId, counter: u64) {
        if let Some(s) = self.paths.get_or_insert(path) {
            s.send_next = counter;
        }
    }
}

fn aead_key(bytes: &[u8; 32]) -> LessSafeKey {
    // A 32-byte key is always accepted by ChaCha20-Poly1305.
    #[expect(
        clippy::unwrap_used,
        reason = "UnboundKey::new fails only on a key length other than 32"
    )]
    LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, bytes).unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Envelope;

    /// A sender that may use 16 paths and a receiver that accepts 4.
    fn pair() -> (Keypair, Keypair) {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        (
            Keypair::new(0, Instant::ZERO, &a, &b, 16),
            Keypair::new(0, Instant::ZERO, &b, &a, 4),
        )
    }

    fn seal(k: &mut Keypair, path: PathId, msg: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; msg.len() + DATA_OVERHEAD];
        buf[DATA_HEADER_LEN..DATA_HEADER_LEN + msg.len()].copy_from_slice(msg);
        let n = k.seal(9, path, &mut buf, msg.len()).unwrap();
        buf.truncate(n);
        buf
    }

    fn open(k: &mut Keypair, mut d: Vec<u8>) -> Result<Vec<u8>, Dropped> {
        let Ok(Envelope::Data(h)) = Envelope::parse(&d) else {
            panic!("not data")
        };
        let r = k.open(&h, &mut d)?;
        Ok(d[r].to_vec())
    }

    #[test]
    fn round_trip_on_several_paths_with_their_own_counters() {
        let (mut a, mut b) = pair();
        for i in 0..10u8 {
            for path in [0, 3, 200] {
                let d = seal(&mut a, path, &[i, path]);
                let Ok(Envelope::Data(h)) = Envelope::parse(&d) else {
                    panic!()
                };
                assert_eq!((h.path, h.counter, h.session), (path, i as u64, 9));
                assert_eq!(open(&mut b, d).unwrap(), vec![i, path]);
            }
        }
        assert_eq!(a.sent, 30);
    }

    #[test]
    fn moving_a_datagram_to_another_path_fails_authentication() {
        let (mut a, mut b) = pair();
        let mut d = seal(&mut a, 1, b"hello");
        d[2] = 2;
        assert_eq!(open(&mut b, d), Err(Dropped::Forged));
        // The forgery gave path 2 no state: the table still has room for four paths.
        for p in 10..14 {
            let d = seal(&mut a, p, b"x");
            assert!(open(&mut b, d).is_ok());
        }
        let d = seal(&mut a, 1, b"x");
        assert_eq!(open(&mut b, d), Err(Dropped::TooManyPaths(1)));
    }

    /// The steps a daemon takes to seal and open on another thread: counters in order at
    /// `seal_deferred`, encryption later in any order; a duplicate opened in the same batch
    /// passes the check before the AEAD but is refused when the window is committed.
    #[test]
    fn deferred_steps_keep_the_order_and_the_replay_window() {
        let (mut a, mut b) = pair();
        let mut bufs: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 8 + DATA_OVERHEAD]).collect();
        let mut keys = Vec::new();
        for (i, buf) in bufs.iter_mut().enumerate() {
            buf[DATA_HEADER_LEN..DATA_HEADER_LEN + 8].fill(i as u8);
            let (n, k) = a.seal_deferred(9, 1, buf, 8).unwrap();
            assert_eq!(n, buf.len());
            keys.push(k.clone());
        }
        // Encrypted in reverse order: each datagram keeps the counter it was given.
        for (buf, k) in bufs.iter_mut().zip(&keys).rev() {
            k.seal(buf).unwrap();
        }
        let headers: Vec<DataHeader> = bufs
            .iter()
            .map(|d| match Envelope::parse(d) {
                Ok(Envelope::Data(h)) => h,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            headers.iter().map(|h| h.counter).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        let mut dup = bufs[1].clone();
        let key = b.open_check(&headers[1]).unwrap().clone();
        let first = key.open(&headers[1], &mut bufs[1]).unwrap();
        assert!(b.open_check(&headers[1]).is_ok(), "nothing committed yet");
        let second = key.open(&headers[1], &mut dup).unwrap();
        assert_eq!(first, second);
        assert_eq!(b.open_commit(&headers[1]), Ok(()));
        assert_eq!(
            b.open_commit(&headers[1]),
            Err(Dropped::Replayed {
                path: 1,
                counter: 1
            })
        );
        assert_eq!(&bufs[1][first.payload()], &[1u8; 8]);
        // A datagram whose header does not match the checked one is not opened.
        let mut forged = bufs[2].clone();
        assert_eq!(key.open(&headers[0], &mut forged), Err(Dropped::Forged));
    }

    #[test]
    fn the_send_counter_stops_at_the_limit() {
        let (mut a, _) = pair();
        a.set_send_counter(0, REJECT_AFTER_MESSAGES - 1);
        let mut buf = [0u8; 64];
        assert!(a.seal(1, 0, &mut buf, 8).is_ok());
        assert_eq!(a.seal(1, 0, &mut buf, 8), Err(SealError::CounterExhausted));
        assert_eq!(
            a.seal(1, 0, &mut buf, 40),
            Err(SealError::BufferTooSmall { need: 72, have: 64 })
        );
    }
}
