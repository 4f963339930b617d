//! `braid receive DIR --hare ADDR --tortoise ADDR`: the receiving end's event loop.
//!
//! Binds both sockets first (so a bad address or a busy port fails at once), accepts one
//! sender on the tortoise, and feeds the engine every hare datagram, damaged or not, and
//! every tortoise frame. Chunks go to `DIR/.NAME.braid-part` in order, hashed on the way;
//! once the engine has every chunk and the sender's SHA-256 matches, the file is renamed to
//! `DIR/NAME` and the sender is told. On any failure the partial file is removed and the
//! sender is told why.

use std::fs::File;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_core::htppr::{Receiver, ReceiverConfig};
use mio::{Events, Interest, Poll, Token};

use super::frame::Frame;
use super::tortoise::{Tortoise, HIGH_WATER};
use super::{hex, udplite, Options, Progress, Summary, TransferError};
use crate::clock::Clock;

const TORTOISE: Token = Token(0);
const HARE: Token = Token(1);
/// Hare datagrams taken in one turn of the loop before the tortoise gets its turn.
const HARE_BATCH: usize = 256;
/// The longest wait when nothing is due.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// A receiver with its sockets bound, not yet accepting.
pub struct BoundReceiver {
    dir: PathBuf,
    opts: Options,
    listener: TcpListener,
    hare: UdpSocket,
}

/// Binds both sockets and receives one file into `dir`.
pub fn receive(
    dir: &Path,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, TransferError> {
    BoundReceiver::bind(dir, opts)?.run(progress)
}

impl BoundReceiver {
    /// Checks that `dir` is a writable directory and binds the hare and tortoise sockets.
    pub fn bind(dir: &Path, opts: &Options) -> Result<BoundReceiver, TransferError> {
        let meta = std::fs::metadata(dir).map_err(|e| TransferError::file(dir, e))?;
        if !meta.is_dir() {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "not a directory");
            return Err(TransferError::file(dir, e));
        }
        let probe = dir.join(format!(".braid-probe-{}", std::process::id()));
        File::create(&probe).map_err(|e| TransferError::file(dir, e))?;
        let _ = std::fs::remove_file(&probe);
        let hare = udplite::socket(opts.hare).map_err(|cause| TransferError::Bind {
            what: "hare (UDP-Lite)",
            addr: opts.hare,
            cause,
        })?;
        let listener = TcpListener::bind(opts.tortoise).map_err(|cause| TransferError::Bind {
            what: "tortoise (TCP)",
            addr: opts.tortoise,
            cause,
        })?;
        let mut opts = opts.clone();
        opts.hare = hare.local_addr().map_err(TransferError::Hare)?;
        opts.tortoise = listener.local_addr().map_err(TransferError::Tortoise)?;
        Ok(BoundReceiver {
            dir: dir.to_owned(),
            opts,
            listener,
            hare,
        })
    }

    /// The bound addresses: (hare, tortoise).
    pub fn addrs(&self) -> (SocketAddr, SocketAddr) {
        (self.opts.hare, self.opts.tortoise)
    }

    /// Waits for one sender and receives its file.
    pub fn run(self, progress: &mut dyn FnMut(Progress)) -> Result<Summary, TransferError> {
        let (stream, _) = self.listener.accept().map_err(TransferError::Tortoise)?;
        stream.set_nodelay(true).map_err(TransferError::Tortoise)?;
        stream
            .set_nonblocking(true)
            .map_err(TransferError::Tortoise)?;
        let mut t = Transfer {
            dir: self.dir,
            clock: Clock::start(),
            tortoise: Tortoise::new(mio::net::TcpStream::from_std(stream)),
            file: None,
            expected: None,
            hasher: ring::digest::Context::new(&ring::digest::SHA256),
            written: 0,
            hare_packets: 0,
            hare_bytes: 0,
        };
        let result = t.run(self.hare, &self.opts, progress);
        if let Err(e) = &result {
            if let Some(out) = t.file.take() {
                let _ = std::fs::remove_file(&out.part);
            }
            // The sender hears why, unless it is the one that left or gave up.
            if !matches!(e, TransferError::PeerGone(_) | TransferError::Aborted(_)) {
                t.tortoise.queue(&Frame::Done {
                    ok: false,
                    message: e.to_string(),
                });
                t.drain(Duration::from_secs(1));
            }
        }
        result
    }
}

/// The file being written.
struct Output {
    part: PathBuf,
    path: PathBuf,
    size: u64,
    file: File,
}

struct Transfer {
    dir: PathBuf,
    clock: Clock,
    tortoise: Tortoise,
    file: Option<Output>,
    expected: Option<[u8; 32]>,
    hasher: ring::digest::Context,
    written: u64,
    hare_packets: u64,
    hare_bytes: u64,
}

impl Transfer {
    fn run(
        &mut self,
        hare: UdpSocket,
        opts: &Options,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, TransferError> {
        let started = self.clock.now();
        let mut hare = mio::net::UdpSocket::from_std(hare);
        let mut poll = Poll::new().map_err(TransferError::Tortoise)?;
        let registry = poll.registry();
        registry
            .register(
                &mut self.tortoise.stream,
                TORTOISE,
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(TransferError::Tortoise)?;
        registry
            .register(&mut hare, HARE, Interest::READABLE)
            .map_err(TransferError::Hare)?;
        let mut receiver = Receiver::new(ReceiverConfig::default());
        let mut events = Events::with_capacity(16);
        let mut buf = vec![0u8; 65536];
        let mut msg = Vec::new();
        let mut last_move = started;
        let mut last_report = started;
        loop {
            let now = self.clock.now();
            let mut more_hare = true;
            for _ in 0..HARE_BATCH {
                match hare.recv(&mut buf) {
                    Ok(n) => {
                        self.hare_packets += 1;
                        self.hare_bytes += n as u64;
                        receiver.handle_hare(now, &buf[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        more_hare = false;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(TransferError::Hare(e)),
                }
            }

            if self.tortoise.fill()? {
                last_move = now;
            }
            while let Some(f) = self.tortoise.next()? {
                match f {
                    Frame::Start { size, name } => self.start(size, &name)?,
                    Frame::Engine(m) => receiver
                        .handle_tortoise(now, &m)
                        .map_err(|e| TransferError::Protocol(e.to_string()))?,
                    Frame::End { sha256 } => self.expected = Some(sha256),
                    Frame::Abort { message } => return Err(TransferError::Aborted(message)),
                    Frame::Done { .. } => {
                        return Err(TransferError::Protocol(
                            "the sender sent a receiver's frame".into(),
                        ))
                    }
                }
            }
            if receiver.poll_timeout().is_some_and(|t| t <= now) {
                receiver.handle_timeout(now);
            }
            while self.tortoise.queued() < HIGH_WATER
                && receiver.poll_tortoise(now, &mut msg).is_some()
            {
                self.tortoise
                    .queue(&Frame::Engine(std::mem::take(&mut msg)));
            }
            while let Some((_, chunk)) = receiver.poll_deliver() {
                self.write(&chunk)?;
                last_move = now;
            }
            self.tortoise.flush()?;

            if receiver.is_finished() && self.expected.is_some() {
                return self.finish(started, receiver.stats().arqs, progress);
            }
            if self.tortoise.closed() {
                return Err(TransferError::PeerGone(
                    "the sender closed the tortoise connection before the file was complete".into(),
                ));
            }
            if now - last_move > opts.stall_timeout {
                return Err(TransferError::PeerGone(format!(
                    "nothing heard from the sender for {} s",
                    opts.stall_timeout.as_secs()
                )));
            }
            if now - last_report > Duration::from_millis(100) {
                last_report = now;
                let total = self.file.as_ref().map_or(0, |o| o.size);
                progress(Progress {
                    done: self.written,
                    total,
                });
            }
            let wait = if more_hare {
                Duration::ZERO
            } else {
                receiver
                    .poll_timeout()
                    .map_or(IDLE_WAIT, |t| t.saturating_duration_since(now))
                    .min(IDLE_WAIT)
            };
            if let Err(e) = poll.poll(&mut events, Some(wait)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(TransferError::Tortoise(e));
                }
            }
        }
    }

    /// The sender's `Start`: where the file goes.
    fn start(&mut self, size: u64, name: &str) -> Result<(), TransferError> {
        if self.file.is_some() {
            return Err(TransferError::Protocol("a second Start".into()));
        }
        // A bare file name only: nothing the sender says can write outside DIR.
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
            return Err(TransferError::Protocol(format!(
                "the sender's file name '{name}' is not a plain file name"
            )));
        }
        let path = self.dir.join(name);
        if path.exists() {
            let e = io::Error::new(
                io::ErrorKind::AlreadyExists,
                "already exists; move it away or receive into another directory",
            );
            return Err(TransferError::file(path, e));
        }
        let part = self.dir.join(format!(".{name}.braid-part"));
        let file = File::create(&part).map_err(|e| TransferError::file(&part, e))?;
        self.file = Some(Output {
            part,
            path,
            size,
            file,
        });
        Ok(())
    }

    fn write(&mut self, chunk: &[u8]) -> Result<(), TransferError> {
        let Some(out) = self.file.as_mut() else {
            return Err(TransferError::Protocol(
                "data came before the file's name".into(),
            ));
        };
        out.file
            .write_all(chunk)
            .map_err(|e| TransferError::file(&out.part, e))?;
        self.hasher.update(chunk);
        self.written += chunk.len() as u64;
        if self.written > out.size {
            return Err(TransferError::Protocol(format!(
                "the sender sent more than the {} bytes it announced",
                out.size
            )));
        }
        Ok(())
    }

    /// Every chunk is in: check size and hash, move the file into place, tell the sender.
    fn finish(
        &mut self,
        started: braid_core::Instant,
        repairs: u64,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, TransferError> {
        let Some(out) = self.file.as_mut() else {
            return Err(TransferError::Protocol(
                "the sender never named the file".into(),
            ));
        };
        if self.written != out.size {
            return Err(TransferError::Protocol(format!(
                "the sender announced {} bytes and sent {}",
                out.size, self.written
            )));
        }
        // A full disk may only show when the data is flushed.
        out.file
            .sync_all()
            .map_err(|e| TransferError::file(&out.part, e))?;
        let hasher = std::mem::replace(
            &mut self.hasher,
            ring::digest::Context::new(&ring::digest::SHA256),
        );
        let got = hasher.finish();
        let expected = self.expected.unwrap_or_default();
        if got.as_ref() != expected {
            return Err(TransferError::HashMismatch {
                expected: hex(&expected),
                got: hex(got.as_ref()),
            });
        }
        std::fs::rename(&out.part, &out.path).map_err(|e| TransferError::file(&out.path, e))?;
        let out = self.file.take().map(|o| (o.path, o.size));
        let (path, size) = out.unwrap_or_default();
        progress(Progress {
            done: size,
            total: size,
        });
        self.tortoise.queue(&Frame::Done {
            ok: true,
            message: hex(&expected),
        });
        self.drain(Duration::from_secs(5));
        Ok(Summary {
            path,
            bytes: size,
            sha256: hex(&expected),
            seconds: (self.clock.now() - started).as_secs_f64(),
            hare_packets: self.hare_packets,
            hare_bytes: self.hare_bytes,
            tortoise_bytes: self.tortoise.bytes,
            repairs,
        })
    }

    /// Best effort: writes what is queued on the tortoise, for up to `limit`.
    fn drain(&mut self, limit: Duration) {
        let until = self.clock.now() + limit;
        while self.tortoise.queued() > 0 && self.clock.now() < until {
            if self.tortoise.flush().is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
