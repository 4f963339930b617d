//! The short-flow web workload of PluriBus §6.1 on real sockets: the flows (Poisson
//! arrivals, SURGE sizes) come from the simulator's own arrival stream
//! ([`braid_sim::host::WebArrivals`]), so a seed runs the same flows in the lab as in
//! `braid sim`; each flow is an HTTP fetch of its size from the internet host, and its
//! flow completion time is recorded.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_core::Instant;
use braid_sim::metrics::Summary;
use serde::Serialize;

use super::http::{fetch, Fetch, Route};
use crate::clock::Clock;
use crate::netns::{interrupted, Netns};
use crate::LabError;

/// Threads (flows) open at once at most; later arrivals are rejected and counted.
pub const MAX_OPEN: usize = 1000;

/// What a web workload measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WebResult {
    pub started: u64,
    pub completed: u64,
    /// Reset or refused by the peer.
    pub resets: u64,
    /// Timed out or failed otherwise (including flows unfinished at the end).
    pub failed: u64,
    /// Arrivals while `MAX_OPEN` flows were open.
    pub rejected: u64,
    /// Flow completion times of completed flows.
    pub fct_ms: Summary,
}

/// Application bytes received, in bins of time on the lab's clock (shared by the flows
/// that feed it).
#[derive(Debug)]
pub struct Timeline {
    epoch: Instant,
    bin: Duration,
    bytes: Mutex<Vec<u64>>,
}

impl Timeline {
    /// `bins` bins of `bin` each from `epoch`; bytes after the last bin are not counted.
    pub fn new(epoch: Instant, bin: Duration, bins: usize) -> Timeline {
        Timeline {
            epoch,
            bin,
            bytes: Mutex::new(vec![0; bins]),
        }
    }

    /// Counts `n` bytes received at `now`.
    pub fn add(&self, now: Instant, n: u64) {
        let i = ((now - self.epoch).as_micros() / self.bin.as_micros().max(1)) as usize;
        if let Ok(mut b) = self.bytes.lock() {
            if let Some(x) = b.get_mut(i) {
                *x += n;
            }
        }
    }

    /// Goodput per bin in Mbit/s.
    pub fn mbps(&self) -> Vec<f64> {
        let secs = self.bin.as_secs_f64();
        self.bytes
            .lock()
            .map(|b| b.iter().map(|&x| x as f64 * 8.0 / secs / 1e6).collect())
            .unwrap_or_default()
    }
}

/// One web workload run.
pub struct WebRun<'t, I> {
    pub route: Route,
    pub server: SocketAddrV4,
    /// `(arrival, size)` with arrivals relative to the start of the run.
    pub arrivals: I,
    /// No arrivals after this long.
    pub stop_after: Duration,
    /// How long flows still open at `stop_after` may take to finish.
    pub grace: Duration,
    /// Where received bytes are counted over time, if anywhere.
    pub timeline: Option<&'t Timeline>,
}

impl<I: Iterator<Item = (Instant, u64)> + Send> WebRun<'_, I> {
    /// Runs the workload from a thread inside `client` (blocks until done).
    pub fn run(self, client: &Netns, clock: Clock) -> Result<WebResult, LabError> {
        client.enter_scoped(move || Ok(self.drive(clock)))
    }

    fn drive(self, clock: Clock) -> WebResult {
        let start = clock.now();
        let deadline = start + self.stop_after + self.grace;
        let results: Arc<Mutex<Vec<Fetch>>> = Arc::default();
        let open = Arc::new(AtomicUsize::new(0));
        let mut started = 0;
        let mut rejected = 0;
        std::thread::scope(|scope| {
            for (at, size) in self.arrivals {
                if Duration::from_micros(at.as_micros()) >= self.stop_after || interrupted() {
                    break;
                }
                let when = start + Duration::from_micros(at.as_micros());
                let wait = when.saturating_duration_since(clock.now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                if open.load(Ordering::Relaxed) >= MAX_OPEN {
                    rejected += 1;
                    continue;
                }
                started += 1;
                open.fetch_add(1, Ordering::Relaxed);
                let (results, flow_open) = (results.clone(), open.clone());
                let (route, server, timeline) = (self.route, self.server, self.timeline);
                let spawned = std::thread::Builder::new()
                    .name("web-flow".into())
                    .spawn_scoped(scope, move || {
                        let f = fetch(route, server, Some(size), &clock, deadline, |now, n| {
                            if let Some(t) = timeline {
                                t.add(now, n);
                            }
                        });
                        if let Ok(mut r) = results.lock() {
                            r.push(f);
                        }
                        flow_open.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::Relaxed);
                    started -= 1;
                    rejected += 1;
                }
            }
        });
        let results = results.lock().map(|r| r.clone()).unwrap_or_default();
        summarize(&results, started, rejected)
    }
}

/// Counts outcomes and summarizes completion times.
pub fn summarize(results: &[Fetch], started: u64, rejected: u64) -> WebResult {
    let mut fct: Vec<f64> = results
        .iter()
        .filter(|f| f.complete)
        .map(|f| f.fct.as_secs_f64() * 1e3)
        .collect();
    let completed = fct.len() as u64;
    let resets = results.iter().filter(|f| f.reset).count() as u64;
    WebResult {
        started,
        completed,
        resets,
        failed: started - completed - resets.min(started - completed),
        rejected,
        fct_ms: Summary::from_samples(&mut fct),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_counted_once() {
        let ok = |ms| Fetch {
            bytes: 10,
            fct: Duration::from_millis(ms),
            complete: true,
            ..Fetch::default()
        };
        let reset = Fetch {
            reset: true,
            ..Fetch::default()
        };
        let r = summarize(&[ok(100), ok(300), reset, ok(200)], 5, 1);
        assert_eq!((r.started, r.completed, r.resets, r.failed), (5, 3, 1, 1));
        assert_eq!(r.fct_ms.median, 200.0);
        assert_eq!(r.rejected, 1);
    }
}
