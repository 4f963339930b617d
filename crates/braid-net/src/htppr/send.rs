//! `braid send FILE --hare ADDR --tortoise ADDR`: the sending end's event loop.
//!
//! One thread, one mio poll: the file is read into the engine as its window takes it and
//! hashed on the way; the engine's tortoise messages go out framed on TCP; its hare packets
//! go out as UDP-Lite datagrams paced at `hare_kbps` (a token bucket 2 ms deep, since the
//! poll wakes with millisecond resolution). The transfer ends when the receiver's `Done`
//! says the SHA-256 matched.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use braid_core::htppr::{Sender, SenderConfig};
use mio::{Events, Interest, Poll, Token};

use super::frame::Frame;
use super::tortoise::{Tortoise, HIGH_WATER};
use super::{hex, udplite, Options, Progress, Summary, TransferError};
use crate::clock::Clock;

const TORTOISE: Token = Token(0);
/// How far the pacer may fall behind and catch up in one burst.
const PACE_SLACK: Duration = Duration::from_millis(2);
/// The longest wait for the tortoise when the hare has nothing to send.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// Sends the file at `path`; returns once the receiver has confirmed its SHA-256.
pub fn send(
    path: &Path,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, TransferError> {
    let clock = Clock::start();
    let started = clock.now();
    let mut file = File::open(path).map_err(|e| TransferError::file(path, e))?;
    let meta = file.metadata().map_err(|e| TransferError::file(path, e))?;
    if !meta.is_file() {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
        return Err(TransferError::file(path, e));
    }
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "the file name is not UTF-8");
        return Err(TransferError::file(path, e));
    };
    let total = meta.len();
    let stamp = (meta.len(), meta.modified().ok());

    let connect = |cause| TransferError::Connect {
        addr: opts.tortoise,
        cause,
    };
    let stream = std::net::TcpStream::connect_timeout(&opts.tortoise, Duration::from_secs(10))
        .map_err(connect)?;
    // Feedback is small and latency is what the tortoise costs: no Nagle.
    stream.set_nodelay(true).map_err(TransferError::Tortoise)?;
    stream
        .set_nonblocking(true)
        .map_err(TransferError::Tortoise)?;
    let mut tortoise = Tortoise::new(mio::net::TcpStream::from_std(stream));
    let local = udplite::any_for(opts.hare);
    let hare = udplite::socket(local).map_err(|cause| TransferError::Bind {
        what: "hare",
        addr: local,
        cause,
    })?;
    hare.connect(opts.hare).map_err(TransferError::Hare)?;

    let mut poll = Poll::new().map_err(TransferError::Tortoise)?;
    poll.registry()
        .register(
            &mut tortoise.stream,
            TORTOISE,
            Interest::READABLE | Interest::WRITABLE,
        )
        .map_err(TransferError::Tortoise)?;

    let mut sender = Sender::new(SenderConfig {
        rates_kbps: vec![opts.hare_kbps.max(1)],
        start_rate: 0,
        autorate: false,
        // A fresh start keeps an earlier transfer's late hare packets from matching.
        first_seq: Clock::unix_time().subsec_nanos() as u16,
        ..SenderConfig::default()
    });
    let chunk_size = sender.geometry().chunk_size as u64;
    tortoise.queue(&Frame::Start {
        size: total,
        name: name.to_owned(),
    });

    let mut run = Run {
        hasher: ring::digest::Context::new(&ring::digest::SHA256),
        read: 0,
        input_done: false,
        sha256: None,
        end_queued: false,
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut msg = Vec::new();
    let mut pkt = Vec::new();
    let mut pkt_ready = false;
    let mut next_send = started;
    let mut refused = 0u64;
    let (mut last_done, mut last_move) = (0u64, started);
    let mut last_report = started;
    let mut events = Events::with_capacity(16);
    let result = loop {
        let now = clock.now();
        // The file into the engine, as far as its window takes it.
        if let Err(e) = run.feed(&mut file, path, &mut buf, &mut sender, total, stamp) {
            break Err(e);
        }
        if let (Some(sha256), false) = (run.sha256, run.end_queued) {
            tortoise.queue(&Frame::End { sha256 });
            run.end_queued = true;
        }

        // Feedback from the receiver.
        if let Err(e) = tortoise.fill() {
            break Err(e);
        }
        let mut verdict = None;
        loop {
            match tortoise.next() {
                Ok(Some(Frame::Engine(m))) => {
                    if let Err(e) = sender.handle_tortoise(now, &m) {
                        break verdict = Some(Err(TransferError::Protocol(e.to_string())));
                    }
                }
                Ok(Some(Frame::Done { ok: true, message })) => {
                    // The receiver names the SHA-256 it checked: it must be this file's.
                    let ours = run.sha256.map(|d| hex(&d)).unwrap_or_default();
                    let v = if message == ours {
                        Ok(())
                    } else {
                        Err(TransferError::HashMismatch {
                            expected: ours,
                            got: message,
                        })
                    };
                    break verdict = Some(v);
                }
                Ok(Some(Frame::Done { ok: false, message })) => {
                    break verdict = Some(Err(TransferError::Refused(message)))
                }
                Ok(Some(_)) => {
                    let e = TransferError::Protocol("the receiver sent a sender's frame".into());
                    break verdict = Some(Err(e));
                }
                Ok(None) => break,
                Err(e) => break verdict = Some(Err(e)),
            }
        }
        if let Some(v) = verdict {
            break v;
        }
        if tortoise.closed() {
            break Err(TransferError::PeerGone(
                "the receiver closed the tortoise connection before the file was complete".into(),
            ));
        }

        // Metadata out on the tortoise.
        while tortoise.queued() < HIGH_WATER && sender.poll_tortoise(now, &mut msg).is_some() {
            tortoise.queue(&Frame::Engine(std::mem::take(&mut msg)));
        }
        if let Err(e) = tortoise.flush() {
            break Err(e);
        }

        // Data out on the hare, paced.
        if next_send + PACE_SLACK < now {
            next_send = now - PACE_SLACK;
        }
        let mut hare_idle = false;
        let mut hare_error = None;
        while next_send <= now {
            if !pkt_ready {
                if sender.poll_hare(now, &mut pkt).is_none() {
                    hare_idle = true;
                    break;
                }
                pkt_ready = true;
            }
            match hare.send(&pkt) {
                Ok(_) => {
                    pkt_ready = false;
                    next_send += airtime(pkt.len(), opts.hare_kbps);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // An ICMP port unreachable from an earlier datagram: the receiver's hare
                // socket is not there (yet, or any more). The packet counts as lost.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    refused += 1;
                    pkt_ready = false;
                    next_send += airtime(pkt.len(), opts.hare_kbps);
                }
                Err(e) => {
                    hare_error = Some(TransferError::Hare(e));
                    break;
                }
            }
        }
        if let Some(e) = hare_error {
            break Err(e);
        }

        // Progress, and the stall watchdog.
        let s = sender.stats();
        let done = s.chunks_done + s.chunks_skipped;
        if done != last_done {
            (last_done, last_move) = (done, now);
        } else if now - last_move > opts.stall_timeout {
            let why = if refused > 0 {
                format!("the receiver's hare port {} refuses datagrams", opts.hare)
            } else {
                "check that --hare reaches the receiver".into()
            };
            break Err(TransferError::PeerGone(format!(
                "no chunk answered for {} s ({why})",
                opts.stall_timeout.as_secs()
            )));
        }
        if now - last_report > Duration::from_millis(100) {
            last_report = now;
            progress(Progress {
                done: (done * chunk_size).min(total),
                total,
            });
        }

        let wait = if hare_idle || pkt_ready && next_send <= now {
            IDLE_WAIT
        } else {
            (next_send - now).min(IDLE_WAIT)
        };
        let wait = if run.input_done || sender.writable() == 0 {
            wait
        } else {
            Duration::ZERO
        };
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() != io::ErrorKind::Interrupted {
                break Err(TransferError::Tortoise(e));
            }
        }
    };
    if let Err(e) = result {
        // Tell the receiver why, so it can say so too and drop its partial file.
        if !matches!(e, TransferError::PeerGone(_) | TransferError::Refused(_)) {
            tortoise.queue(&Frame::Abort {
                message: e.to_string(),
            });
            drain(&mut tortoise, &clock);
        }
        return Err(e);
    }
    progress(Progress { done: total, total });
    let _ = tortoise.stream.shutdown(std::net::Shutdown::Write);
    let s = sender.stats();
    Ok(Summary {
        path: path.to_owned(),
        bytes: total,
        sha256: run.sha256.map(|d| hex(&d)).unwrap_or_default(),
        seconds: (clock.now() - started).as_secs_f64(),
        hare_packets: s.hare_packets,
        hare_bytes: s.hare_bytes,
        tortoise_bytes: tortoise.bytes,
        repairs: s.blocks_resent,
    })
}

/// Reading and hashing the file.
struct Run {
    hasher: ring::digest::Context,
    read: u64,
    input_done: bool,
    /// The digest, once read to the end.
    sha256: Option<[u8; 32]>,
    end_queued: bool,
}

impl Run {
    fn feed(
        &mut self,
        file: &mut File,
        path: &Path,
        buf: &mut [u8],
        sender: &mut Sender,
        total: u64,
        stamp: (u64, Option<std::time::SystemTime>),
    ) -> Result<(), TransferError> {
        while !self.input_done {
            let room = sender.writable().min(buf.len());
            if room == 0 {
                return Ok(());
            }
            let n = loop {
                match file.read(&mut buf[..room]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(TransferError::file(path, e)),
                }
            };
            self.read += n as u64;
            if self.read > total {
                return Err(TransferError::FileChanged(path.to_owned()));
            }
            if n == 0 {
                let meta = file.metadata().map_err(|e| TransferError::file(path, e))?;
                if self.read != total || (meta.len(), meta.modified().ok()) != stamp {
                    return Err(TransferError::FileChanged(path.to_owned()));
                }
                sender.finish();
                self.input_done = true;
                let digest = std::mem::replace(
                    &mut self.hasher,
                    ring::digest::Context::new(&ring::digest::SHA256),
                )
                .finish();
                let mut sha256 = [0u8; 32];
                sha256.copy_from_slice(digest.as_ref());
                self.sha256 = Some(sha256);
                return Ok(());
            }
            self.hasher.update(&buf[..n]);
            let taken = sender.write(&buf[..n]);
            // `n` is at most what `writable` allowed, so the engine takes all of it.
            debug_assert_eq!(taken, n);
        }
        Ok(())
    }
}

/// Time on the hare for `len` bytes at `kbps`.
fn airtime(len: usize, kbps: u32) -> Duration {
    Duration::from_micros(len as u64 * 8 * 1000 / u64::from(kbps.max(1)))
}

/// Best effort: writes what is queued on the tortoise for up to a second.
fn drain(tortoise: &mut Tortoise, clock: &Clock) {
    let until = clock.now() + Duration::from_secs(1);
    while tortoise.queued() > 0 && clock.now() < until {
        if tortoise.flush().is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
