//! The userspace link emulator: this kernel has no netem, so each emulated path is a
//! namespace of its own holding two veths, one towards the gateway (`a`) and one towards
//! the server (`b`), and two threads bridging them with AF_PACKET sockets, one per
//! direction. Each direction runs the simulator's link model ([`braid_sim::link::Link`]:
//! rate or mahimahi trace, drop-tail queue, delay, jitter, Bernoulli and Gilbert-Elliott
//! loss, blackouts, corruption) in real time: the same code as `braid sim`, fed the
//! kernel's arrival timestamps and asked for deliveries at the lab's clock.
//!
//! - [`socket`]: the packet socket (the lab's one `unsafe` block builds its address).
//! - [`bridge`]: one direction's thread.
//! - [`timing`]: the delivery-error histogram that makes the emulator's own inaccuracy,
//!   CPU contention included, a measured figure.

pub mod bridge;
pub mod socket;
pub mod timing;

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use braid_core::Instant;
use braid_sim::link::{Link, LinkConfig, TraceCache};
use braid_sim::Rng;

use crate::clock::Clock;
use crate::netns::Netns;
use crate::LabError;

pub use bridge::DirectionReport;
use bridge::{Command, Direction};
pub use timing::{Histogram, TimingSummary};

/// The two directions of one path, running.
#[derive(Debug)]
pub struct PathEmulator {
    name: String,
    up: Handle,
    down: Handle,
}

#[derive(Debug)]
struct Handle {
    commands: Sender<Command>,
    snapshot: Arc<Mutex<DirectionReport>>,
    thread: Option<JoinHandle<Result<(), LabError>>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Replace(..) => f.write_str("Replace"),
            Command::Stop => f.write_str("Stop"),
        }
    }
}

/// Builds one direction's link with the simulator's labels, so a seed draws the same
/// losses in the lab as in `braid sim` (`path-<name>-<up|down>`).
pub fn build_link(
    cfg: &LinkConfig,
    traces: &mut TraceCache,
    seed: u64,
    path: &str,
    direction: &str,
) -> Result<Link, LabError> {
    let rng = Rng::child(seed, &format!("path-{path}-{direction}"));
    Link::new(cfg, traces, rng)
        .map_err(|e| LabError::Config(format!("path '{path}' ({direction}): {e}")))
}

impl PathEmulator {
    /// Starts the emulator of path `name` in namespace `ns`, between its interfaces `a`
    /// (gateway side) and `b` (server side).
    pub fn start(
        ns: &Netns,
        name: &str,
        up: Link,
        down: Link,
        clock: Clock,
    ) -> Result<PathEmulator, LabError> {
        Ok(PathEmulator {
            name: name.to_owned(),
            up: spawn(ns, "a", "b", up, clock, &format!("{name}-up"))?,
            down: spawn(ns, "b", "a", down, clock, &format!("{name}-down"))?,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Installs fresh links whose time starts at `epoch` on the lab's clock (queued frames
    /// are dropped).
    pub fn replace(&self, up: Link, down: Link, epoch: Instant) -> Result<(), LabError> {
        for (h, link) in [(&self.up, up), (&self.down, down)] {
            h.commands
                .send(Command::Replace(Box::new(link), epoch))
                .map_err(|_| {
                    LabError::App(format!("the emulator of path '{}' stopped", self.name))
                })?;
        }
        Ok(())
    }

    /// The latest snapshot of each direction (refreshed every 100 ms).
    pub fn reports(&self) -> (DirectionReport, DirectionReport) {
        let get = |h: &Handle| h.snapshot.lock().map(|s| s.clone()).unwrap_or_default();
        (get(&self.up), get(&self.down))
    }

    /// Stops both threads and returns their final reports, or the first thread error.
    pub fn stop(mut self) -> Result<(DirectionReport, DirectionReport), LabError> {
        self.up.stop()?;
        self.down.stop()?;
        Ok(self.reports())
    }
}

impl Handle {
    fn stop(&mut self) -> Result<(), LabError> {
        let _ = self.commands.send(Command::Stop);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(LabError::App("an emulator thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for PathEmulator {
    fn drop(&mut self) {
        let _ = self.up.stop();
        let _ = self.down.stop();
    }
}

fn spawn(
    ns: &Netns,
    input: &str,
    output: &str,
    link: Link,
    clock: Clock,
    label: &str,
) -> Result<Handle, LabError> {
    let (commands, rx) = mpsc::channel();
    let snapshot = Arc::new(Mutex::new(DirectionReport::default()));
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let ns_path = ns.name().to_owned();
    let (input, output) = (input.to_owned(), output.to_owned());
    let shared = snapshot.clone();
    let thread = std::thread::Builder::new()
        .name(format!("emu-{label}"))
        .spawn(move || {
            let opened = (|| {
                crate::netns::enter_by_name(&ns_path)?;
                Ok::<_, LabError>((PacketSocket::bind(&input)?, PacketSocket::bind(&output)?))
            })();
            let (input, output) = match opened {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let msg = e.to_string();
                    let _ = ready_tx.send(Err(e));
                    return Err(LabError::App(msg));
                }
            };
            Direction {
                input,
                output,
                link,
                clock,
                commands: rx,
                snapshot: shared,
            }
            .run()
        })
        .map_err(|e| LabError::io("starting an emulator thread", e))?;
    match ready_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(LabError::App(
                "an emulator thread died while starting".into(),
            ))
        }
    }
    Ok(Handle {
        commands,
        snapshot,
        thread: Some(thread),
    })
}

use socket::PacketSocket;

#[cfg(test)]
mod tests {
    use super::*;

    /// The emulator reads the gzip-compressed traces of traces/ through the simulator's
    /// link config, by their `.gz` name or by the name without it.
    #[test]
    fn builds_links_from_compressed_traces() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces/");
        let mut traces = TraceCache::new();
        for name in ["ghent-car.down.gz", "ghent-car.down"] {
            let cfg = LinkConfig::with_trace(format!("{dir}{name}"));
            build_link(&cfg, &mut traces, 1, "a", "down").unwrap();
            // 589228 opportunities of 1500 bytes in 180 s (traces/README.md).
            let mbps = cfg.mean_rate_bps(&mut traces).unwrap() / 1e6;
            assert!((mbps - 39.282).abs() < 0.001, "{name}: {mbps}");
        }
    }
}
