//! One direction of an emulated path: frames read from one interface go through a
//! [`braid_sim::link::Link`] (the simulator's own model code) in real time and leave by
//! the other interface when the model delivers them.
//!
//! The thread's loop: deliver every frame the model says is due (recording how late each
//! one leaves), read every frame waiting (offered to the model at its kernel arrival
//! timestamp), then sleep in `ppoll` until the next delivery or the next frame, with the
//! thread's timer slack at 1 ns so the sleep ends when asked. The model's time is the
//! lab's clock minus the link's epoch (the moment the link was installed), so a scenario's
//! blackout at `start_s` means that many seconds after the run began.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_core::Instant;
use braid_sim::link::{Link, LinkStats};
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use serde::Serialize;

use super::socket::PacketSocket;
use super::timing::{Histogram, TimingSummary};
use crate::clock::Clock;
use crate::LabError;

/// Bytes of the Ethernet header: the link model charges the IP packet (what a rate in
/// Mbit/s means at the IP layer), as the simulator charges its IP packets.
pub const ETHERNET_HEADER: usize = 14;
/// Longest sleep, so commands (a new link, stop) are seen promptly.
const MAX_SLEEP: Duration = Duration::from_millis(20);
/// Frames read per loop before delivering again.
const READ_BATCH: usize = 256;
/// How often the live snapshot is refreshed.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(100);

/// What the direction's thread is told.
pub(crate) enum Command {
    /// Install a fresh link whose time starts at the given instant on the lab's clock
    /// (frames still in the old one are lost).
    Replace(Box<Link>, Instant),
    Stop,
}

/// One direction's measurements since its link was installed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DirectionReport {
    /// The model's counters (offered, delivered, dropped at the queue, lost, corrupted).
    pub link: LinkStats,
    /// How late frames left compared to the model's delivery time.
    pub delivery_error: TimingSummary,
    /// How long frames waited in the socket before the emulator read them (already part
    /// of the delivery error; shown to tell CPU contention from wake-up latency).
    pub read_lag: TimingSummary,
    /// Frames that could not be sent on the outgoing interface.
    pub send_errors: u64,
    /// Frames larger than the emulator's buffer, dropped.
    pub oversize_drops: u64,
    /// Seconds since the link was installed.
    pub elapsed_s: f64,
    /// The delivery errors themselves, for merging across directions.
    #[serde(skip)]
    pub delivery_hist: Histogram,
}

/// Everything one direction's thread needs.
pub(crate) struct Direction {
    pub input: PacketSocket,
    pub output: PacketSocket,
    pub link: Link,
    pub clock: Clock,
    pub commands: Receiver<Command>,
    pub snapshot: Arc<Mutex<DirectionReport>>,
}

impl Direction {
    /// Runs until told to stop (or the command channel closes).
    pub fn run(mut self) -> Result<(), LabError> {
        // A 1 ns slack makes ppoll's wake-up as precise as the kernel's timers allow; the
        // default 50 µs would be added to every delivery.
        let _ = nix::sys::prctl::set_timerslack(1);
        let mut buf = vec![0u8; 65_536];
        let mut epoch = self.clock.now();
        let mut state = State::default();
        let mut last_snapshot = epoch;
        loop {
            match self.commands.try_recv() {
                Ok(Command::Replace(link, at)) => {
                    self.link = *link;
                    epoch = at;
                    state = State::default();
                }
                Ok(Command::Stop) | Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {}
            }
            let now = self.clock.now();
            self.deliver(now, epoch, &mut state);
            self.read(&mut buf, epoch, &mut state)?;
            let now = self.clock.now();
            if now - last_snapshot >= SNAPSHOT_EVERY {
                last_snapshot = now;
                self.publish(&state, now - epoch);
            }
            let mut sleep = MAX_SLEEP;
            if let Some(due) = self.link.poll_timeout() {
                sleep = sleep.min((epoch + to_duration(due)).saturating_duration_since(now));
            }
            if sleep > Duration::ZERO {
                let mut fds = [PollFd::new(self.input.fd(), PollFlags::POLLIN)];
                match ppoll(&mut fds, Some(TimeSpec::from(sleep)), None) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(LabError::io("waiting for frames", e.into())),
                }
            }
        }
        let now = self.clock.now();
        self.publish(&state, now - epoch);
        Ok(())
    }

    /// Sends every frame the model says is due at `now`.
    fn deliver(&mut self, now: Instant, epoch: Instant, state: &mut State) {
        let link_now = since(now, epoch);
        while let Some(due) = self.link.poll_timeout() {
            if due > link_now {
                break;
            }
            let Some(frame) = self.link.poll_deliver(link_now) else {
                break;
            };
            if self.output.send(&frame).is_err() {
                state.send_errors += 1;
            }
            let sent = since(self.clock.now(), epoch);
            let late = sent.as_micros().saturating_sub(due.as_micros());
            state.delivery.add(late);
        }
    }

    /// Offers every waiting frame (up to a batch) to the model at its arrival time.
    fn read(&mut self, buf: &mut [u8], epoch: Instant, state: &mut State) -> Result<(), LabError> {
        for _ in 0..READ_BATCH {
            let Some(rx) = self.input.recv(buf)? else {
                return Ok(());
            };
            let now = self.clock.now();
            if rx.len > buf.len() {
                state.oversize_drops += 1;
                continue;
            }
            let arrived = rx.stamp.map_or(now, |ts| self.clock.from_realtime(ts));
            state
                .read_lag
                .add(now.as_micros().saturating_sub(arrived.as_micros()));
            let frame = buf[..rx.len].to_vec();
            let ip_bytes = rx.len.saturating_sub(ETHERNET_HEADER).max(1);
            self.link.send_sized(since(arrived, epoch), frame, ip_bytes);
        }
        Ok(())
    }

    fn publish(&self, state: &State, elapsed: Duration) {
        let report = DirectionReport {
            link: self.link.stats(),
            delivery_error: state.delivery.summary(),
            read_lag: state.read_lag.summary(),
            send_errors: state.send_errors,
            oversize_drops: state.oversize_drops,
            elapsed_s: elapsed.as_secs_f64(),
            delivery_hist: state.delivery.clone(),
        };
        if let Ok(mut s) = self.snapshot.lock() {
            *s = report;
        }
    }
}

#[derive(Default)]
struct State {
    delivery: Histogram,
    read_lag: Histogram,
    send_errors: u64,
    oversize_drops: u64,
}

/// `t` on a link whose time starts at `epoch`.
fn since(t: Instant, epoch: Instant) -> Instant {
    Instant::from_micros(t.as_micros().saturating_sub(epoch.as_micros()))
}

fn to_duration(t: Instant) -> Duration {
    Duration::from_micros(t.as_micros())
}
