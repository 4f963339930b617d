//! The simulated world: hosts, the two braid engines and the links between them, driven by
//! one virtual clock.
//!
//! ```text
//! client host ── gateway Session ══ path i: up link (gateway→server) ══ server Session ── internet host
//!                                 ══ path i: down link (server→gateway) ══
//! ```
//! The two LAN hops (client↔gateway, server↔internet) are ideal: packets cross them at the
//! instant they are emitted. In `direct` mode (the single-link baselines of PluriBus Fig 8)
//! the engines are bypassed and the hosts talk over one path's two links.
//!
//! The loop is a discrete-event simulation in the sans-IO style: every component exposes
//! `poll_timeout`, and the clock jumps to the earliest one. At each instant the world moves
//! packets between components until nothing more happens, always visiting components in
//! the same order, so a run is a pure function of the scenario and its seed.

use std::time::Duration;

use braid_core::time::earliest;
use braid_core::{Instant, PathConfig, Role, Session, SessionStats};
use serde::Serialize;

use crate::host::{self, Host, WorkloadReport};
use crate::link::{Link, LinkConfigError, LinkStats, TraceCache};
use crate::scenario::Scenario;
use crate::{Node, Rng};

/// Why a scenario could not be simulated.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    // The messages carry the inner error's text, so the inner error is not also a
    // `source`: an error chain printed whole (`{:#}`) would repeat it.
    #[error("path '{path}' ({direction}): {error}")]
    Link {
        path: String,
        direction: &'static str,
        error: LinkConfigError,
    },
    #[error("{0}")]
    Workload(host::WorkloadError),
    #[error("engine.direct names path '{0}', which the scenario does not have")]
    UnknownDirectPath(String),
    #[error("engine: {0}")]
    Engine(braid_core::ConfigError),
}

impl From<host::WorkloadError> for SimError {
    fn from(e: host::WorkloadError) -> SimError {
        SimError::Workload(e)
    }
}

impl From<braid_core::ConfigError> for SimError {
    fn from(e: braid_core::ConfigError) -> SimError {
        SimError::Engine(e)
    }
}

/// Everything measured in one run. Contains no wall-clock quantity, so the same scenario
/// and seed always serialize to the same bytes.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    /// "braid <scheduler>/<loss recovery>" or "direct <path>".
    pub system: String,
    pub workloads: Vec<WorkloadReport>,
    pub paths: Vec<PathReport>,
    pub gateway: Option<SessionStats>,
    pub server: Option<SessionStats>,
    /// Each end's per-interval metering log (`[engine.metering] record_intervals`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateway_intervals: Vec<braid_core::metered::IntervalRecord>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_intervals: Vec<braid_core::metered::IntervalRecord>,
    /// Split-TCP's gateway and server ends, when a class asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<[split::SplitStats; 2]>,
    /// Simulator steps taken (instants visited).
    pub events: u64,
    /// Virtual seconds simulated.
    pub virtual_s: f64,
}

/// One path's two directions.
#[derive(Clone, Debug, Serialize)]
pub struct PathReport {
    pub name: String,
    pub up: LinkStats,
    pub down: LinkStats,
    /// Corrupted braid datagrams dropped before the engine (up, down), as the UDP checksum
    /// (and, in the daemon, the AEAD tag) would drop them.
    pub checksum_drops: (u64, u64),
}

struct SimPath {
    name: String,
    up: Link,
    down: Link,
    checksum_drops: (u64, u64),
}

/// The two braid engines and their reusable buffers.
struct Engines {
    gateway: Session,
    server: Session,
    /// Split-TCP's two ends, when a class asks for it ([`split`]).
    split: Option<(split::SplitEnd, split::SplitEnd)>,
    tx_buf: Vec<u8>,
    deliver_buf: Vec<u8>,
    /// Buffers of datagrams the engines consumed, for the next ones they send (a
    /// datagram's bytes are otherwise allocated per packet).
    spare: Vec<Vec<u8>>,
}

/// Most buffers kept in [`Engines::spare`].
const MAX_SPARE: usize = 256;

impl Engines {
    /// The transmit buffer cut to its first `len` bytes; a recycled buffer of the full
    /// length takes its place.
    fn datagram(&mut self, len: usize) -> Vec<u8> {
        let full = self.tx_buf.len();
        let mut next = self.spare.pop().unwrap_or_default();
        next.resize(full, 0);
        let mut d = std::mem::replace(&mut self.tx_buf, next);
        d.truncate(len);
        d
    }

    fn recycle(&mut self, d: Vec<u8>) {
        if self.spare.len() < MAX_SPARE {
            self.spare.push(d);
        }
    }
}

/// Runs a scenario to its end. `progress`, when given, is called with the fraction of the
/// virtual duration done, at most about a hundred times.
pub fn run(
    scenario: &Scenario,
    traces: &mut TraceCache,
    progress: Option<&mut dyn FnMut(f64)>,
) -> Result<Report, SimError> {
    let mut world = World::new(scenario, traces)?;
    world.run(progress);
    Ok(world.report())
}

/// Like [`run`], and hands back the two engines as they were at the end (in braid mode),
/// for analyses that read their logs (for example [`Session::take_predictions`]).
pub fn run_keeping_engines(
    scenario: &Scenario,
    traces: &mut TraceCache,
    progress: Option<&mut dyn FnMut(f64)>,
) -> Result<(Report, Option<EnginePair>), SimError> {
    let mut world = World::new(scenario, traces)?;
    world.run(progress);
    let report = world.report();
    let engines = world.engines.take().map(|e| EnginePair {
        gateway: e.gateway,
        server: e.server,
    });
    Ok((report, engines))
}

/// The gateway's and the server's engines after a run.
pub struct EnginePair {
    pub gateway: Session,
    pub server: Session,
}

struct World {
    scenario_name: String,
    seed: u64,
    system: String,
    end: Instant,
    now: Instant,
    events: u64,
    client: Host,
    internet: Host,
    paths: Vec<SimPath>,
    /// `None` in direct mode.
    engines: Option<Engines>,
    /// In direct mode, the index of the path the hosts use.
    direct: usize,
    /// Bytes of UDP and IP headers around each braid datagram on a link.
    overhead: usize,
}

/// The components' timeouts at one step (see [`World::timeouts`]).
struct Timeouts {
    client: Option<Instant>,
    internet: Option<Instant>,
    gateway: Option<Instant>,
    server: Option<Instant>,
    /// Split-TCP's two ends.
    split: Option<Instant>,
    /// The earliest of the links'.
    links: Option<Instant>,
}

impl Timeouts {
    /// The earliest of them all.
    fn next(&self) -> Option<Instant> {
        let hosts = earliest(self.client, self.internet);
        let engines = earliest(self.gateway, self.server);
        earliest(earliest(hosts, engines), earliest(self.split, self.links))
    }
}

impl World {
    fn new(scenario: &Scenario, traces: &mut TraceCache) -> Result<World, SimError> {
        let seed = scenario.seed;
        let end = Instant::ZERO + Duration::from_secs_f64(scenario.duration_s);
        let (client, internet) = host::build_hosts(&scenario.workloads, seed, end, scenario.mtu)?;
        let mut paths = Vec::with_capacity(scenario.paths.len());
        let mut rates = Vec::with_capacity(scenario.paths.len());
        for p in &scenario.paths {
            let link = |cfg: &crate::link::LinkConfig,
                        traces: &mut TraceCache,
                        direction: &'static str|
             -> Result<(Link, f64), SimError> {
                let err = |error| SimError::Link {
                    path: p.name.clone(),
                    direction,
                    error,
                };
                let rng = Rng::child(seed, &format!("path-{}-{direction}", p.name));
                let rate = cfg.mean_rate_bps(traces).map_err(err)?;
                Ok((Link::new(cfg, traces, rng).map_err(err)?, rate))
            };
            let (up, up_bps) = link(&p.up, traces, "up")?;
            let (down, down_bps) = link(&p.down, traces, "down")?;
            paths.push(SimPath {
                name: p.name.clone(),
                up,
                down,
                checksum_drops: (0, 0),
            });
            rates.push((up_bps as u64, down_bps as u64));
        }

        let (engines, direct, system) = match &scenario.engine.direct {
            Some(name) => {
                let idx = scenario
                    .paths
                    .iter()
                    .position(|p| &p.name == name)
                    .ok_or_else(|| SimError::UnknownDirectPath(name.clone()))?;
                (None, idx, format!("direct {name}"))
            }
            None => {
                let config = scenario.engine_config();
                // As the daemons run by default, each end learns its paths' capacities;
                // `capacity_hint` configures the links' mean rates instead.
                let hinted = scenario.engine.capacity_hint.unwrap_or(false);
                let (gw_paths, srv_paths): (Vec<PathConfig>, Vec<PathConfig>) = rates
                    .iter()
                    .enumerate()
                    .map(|(i, &(up, down))| {
                        let id = path_id(i);
                        if hinted {
                            let gw = PathConfig {
                                id,
                                tx_capacity_bps: up,
                                rx_capacity_bps: down,
                            };
                            let srv = PathConfig {
                                id,
                                tx_capacity_bps: down,
                                rx_capacity_bps: up,
                            };
                            (gw, srv)
                        } else {
                            (PathConfig::learned(id), PathConfig::learned(id))
                        }
                    })
                    .unzip();
                let system = format!(
                    "braid {}/{}",
                    kebab(&config.scheduler),
                    config.loss_recovery
                );
                let gateway =
                    Session::new(config.clone(), Role::Gateway, &gw_paths, Instant::ZERO)?;
                let mut config = config;
                // A server told the metered paths and the classes' budgets by the
                // gateway's Hello has none of its own (it keeps the interval, predictor and
                // logging).
                if let Some(m) = config.metering.as_mut().filter(|m| m.announce) {
                    m.paths.clear();
                    m.classes.clear();
                }
                let split = split::SplitEnd::new(
                    split::End::Gateway,
                    &config.classes,
                    config.tcp_transport,
                    rates.len(),
                    scenario.mtu,
                    seed,
                )
                .zip(split::SplitEnd::new(
                    split::End::Server,
                    &config.classes,
                    config.tcp_transport,
                    rates.len(),
                    scenario.mtu,
                    seed,
                ));
                let server = Session::new(config, Role::Server, &srv_paths, Instant::ZERO)?;
                let tx_buf = vec![
                    0;
                    gateway
                        .transmit_buffer_len()
                        .max(server.transmit_buffer_len())
                ];
                (
                    Some(Engines {
                        gateway,
                        server,
                        split,
                        tx_buf,
                        deliver_buf: Vec::with_capacity(2048),
                        spare: Vec::new(),
                    }),
                    0,
                    system,
                )
            }
        };
        Ok(World {
            scenario_name: scenario.name.clone(),
            seed,
            system,
            end,
            now: Instant::ZERO,
            events: 0,
            client,
            internet,
            paths,
            engines,
            direct,
            overhead: scenario.engine_config().datagram_overhead,
        })
    }

    fn run(&mut self, mut progress: Option<&mut dyn FnMut(f64)>) {
        let total = self.end.as_micros().max(1) as f64;
        let mut next_report = 0.0;
        let mut fired_at: Option<Instant> = None;
        loop {
            self.settle();
            let due = self.timeouts();
            let Some(mut next) = due.next() else {
                break;
            };
            // A component asking again for an instant already handled is visited 1 µs
            // later, so the clock always moves forward.
            if let Some(f) = fired_at.filter(|&f| next <= f) {
                next = f + Duration::from_micros(1);
            }
            if next > self.end {
                break;
            }
            self.now = self.now.max(next);
            fired_at = Some(self.now);
            self.events += 1;
            self.fire_timeouts(&due);
            if let Some(cb) = progress.as_deref_mut() {
                let done = self.now.as_micros() as f64 / total;
                if done >= next_report {
                    cb(done.min(1.0));
                    next_report = done + 0.01;
                }
            }
        }
        self.now = self.end;
        if let Some(cb) = progress {
            cb(1.0);
        }
    }

    /// Moves packets between components at `now` until none moves.
    fn settle(&mut self) {
        let now = self.now;
        loop {
            let mut moved = false;
            // Hosts emit onto the LAN (into the engines) or, in direct mode, onto the path.
            while let Some((mut p, checked)) = self.client.poll_transmit_checked(now) {
                moved = true;
                match &mut self.engines {
                    Some(Engines {
                        split: Some((g, _)),
                        ..
                    }) if g.claims(&p) => g.ingress(now, p, checked),
                    // A refused packet (queue full, too large) is counted by the engine.
                    Some(e) => {
                        let _ = e.gateway.send_buffer(now, &mut p, checked);
                        self.client.recycle(p);
                    }
                    None => self.paths[self.direct].up.send(now, p),
                }
            }
            while let Some((mut p, checked)) = self.internet.poll_transmit_checked(now) {
                moved = true;
                match &mut self.engines {
                    Some(Engines {
                        split: Some((_, sv)),
                        ..
                    }) if sv.claims(&p) => sv.ingress(now, p, checked),
                    Some(e) => {
                        let _ = e.server.send_buffer(now, &mut p, checked);
                        self.internet.recycle(p);
                    }
                    None => self.paths[self.direct].down.send(now, p),
                }
            }
            if let Some(e) = &mut self.engines {
                let overhead = self.overhead;
                while let Some(t) = e.gateway.poll_transmit(now, &mut e.tx_buf) {
                    moved = true;
                    if let Some(path) = self.paths.get_mut(usize::from(t.path)) {
                        let d = e.datagram(t.len);
                        path.up.send_sized(now, d, t.len + overhead);
                    }
                }
                while let Some(t) = e.server.poll_transmit(now, &mut e.tx_buf) {
                    moved = true;
                    if let Some(path) = self.paths.get_mut(usize::from(t.path)) {
                        let d = e.datagram(t.len);
                        path.down.send_sized(now, d, t.len + overhead);
                    }
                }
                if let Some((g, sv)) = &mut e.split {
                    g.meter(now, &mut e.gateway, overhead);
                    sv.meter(now, &mut e.server, overhead);
                    moved |= g.relay(now) | sv.relay(now);
                    while let Some((p, checked)) = g.poll_lan() {
                        moved = true;
                        self.client.receive_checked(now, p, checked);
                    }
                    while let Some((p, checked)) = sv.poll_lan() {
                        moved = true;
                        self.internet.receive_checked(now, p, checked);
                    }
                    let mut d = Vec::new();
                    while let Some(path) = g.poll_transmit(now, &mut d) {
                        moved = true;
                        if let Some(sp) = self.paths.get_mut(usize::from(path)) {
                            let len = d.len();
                            sp.up
                                .send_sized(now, std::mem::take(&mut d), len + overhead);
                        }
                    }
                    while let Some(path) = sv.poll_transmit(now, &mut d) {
                        moved = true;
                        if let Some(sp) = self.paths.get_mut(usize::from(path)) {
                            let len = d.len();
                            sp.down
                                .send_sized(now, std::mem::take(&mut d), len + overhead);
                        }
                    }
                }
            }
            // Links deliver to the far end. Corrupted braid datagrams are dropped as the UDP
            // checksum would drop them; in direct mode the hosts' own IP and TCP checksums
            // catch corruption.
            for (i, path) in self.paths.iter_mut().enumerate() {
                while let Some((p, corrupted)) = path.up.poll_deliver_checked(now) {
                    moved = true;
                    match &mut self.engines {
                        Some(e) if corrupted => {
                            path.checksum_drops.0 += 1;
                            e.recycle(p);
                        }
                        Some(Engines {
                            server,
                            split: Some((_, sv)),
                            ..
                        }) if p.first() == Some(&split::TAG) => {
                            server.note_foreign_arrivals(
                                path_id(i),
                                (p.len() + self.overhead) as u64,
                            );
                            sv.handle_chunk(now, path_id(i), &p[1..]);
                        }
                        // Malformed datagrams are counted by the engine.
                        Some(e) => {
                            drop(e.server.handle_datagram(now, path_id(i), &p));
                            e.recycle(p);
                        }
                        None => self.internet.receive(now, p),
                    }
                }
                while let Some((p, corrupted)) = path.down.poll_deliver_checked(now) {
                    moved = true;
                    match &mut self.engines {
                        Some(e) if corrupted => {
                            path.checksum_drops.1 += 1;
                            e.recycle(p);
                        }
                        Some(Engines {
                            gateway,
                            split: Some((g, _)),
                            ..
                        }) if p.first() == Some(&split::TAG) => {
                            gateway.note_foreign_arrivals(
                                path_id(i),
                                (p.len() + self.overhead) as u64,
                            );
                            g.handle_chunk(now, path_id(i), &p[1..]);
                        }
                        Some(e) => {
                            drop(e.gateway.handle_datagram(now, path_id(i), &p));
                            e.recycle(p);
                        }
                        None => self.client.receive(now, p),
                    }
                }
            }
            // Engines hand in-order packets to their LAN.
            if let Some(e) = &mut self.engines {
                while e.gateway.poll_deliver(&mut e.deliver_buf) {
                    moved = true;
                    let verified = e.gateway.delivered_checksums_verified();
                    let p = self.client.buffer_with(&e.deliver_buf);
                    self.client.receive_checked(now, p, verified);
                }
                while e.server.poll_deliver(&mut e.deliver_buf) {
                    moved = true;
                    let verified = e.server.delivered_checksums_verified();
                    let p = self.internet.buffer_with(&e.deliver_buf);
                    self.internet.receive_checked(now, p, verified);
                }
                while e.gateway.poll_event().is_some() {}
                while e.server.poll_event().is_some() {}
            }
            if !moved {
                break;
            }
        }
    }

    /// Every component's next timeout, asked once per step: nothing changes between
    /// choosing the instant and firing what is due at it, and an engine's
    /// `poll_timeout` scans its timers.
    fn timeouts(&self) -> Timeouts {
        let (gateway, server) = match &self.engines {
            Some(e) => (e.gateway.poll_timeout(), e.server.poll_timeout()),
            None => (None, None),
        };
        let split = (self.engines.as_ref())
            .and_then(|e| e.split.as_ref())
            .and_then(|(g, sv)| earliest(g.poll_timeout(self.now), sv.poll_timeout(self.now)));
        Timeouts {
            split,
            client: self.client.poll_timeout(),
            internet: self.internet.poll_timeout(),
            gateway,
            server,
            links: (self.paths.iter()).fold(None, |at, p| {
                earliest(at, earliest(p.up.poll_timeout(), p.down.poll_timeout()))
            }),
        }
    }

    fn fire_timeouts(&mut self, due: &Timeouts) {
        let now = self.now;
        if due.client.is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        if due.internet.is_some_and(|t| t <= now) {
            self.internet.handle_timeout(now);
        }
        if let Some(e) = &mut self.engines {
            if due.gateway.is_some_and(|t| t <= now) {
                e.gateway.handle_timeout(now);
            }
            if due.server.is_some_and(|t| t <= now) {
                e.server.handle_timeout(now);
            }
            if let (Some((g, sv)), true) = (&mut e.split, due.split.is_some_and(|t| t <= now)) {
                g.handle_timeout(now);
                sv.handle_timeout(now);
            }
        }
        // Links need no timeout call: `settle` polls their deliveries at `now`.
    }

    fn report(&self) -> Report {
        Report {
            scenario: self.scenario_name.clone(),
            seed: self.seed,
            duration_s: self.end.as_secs_f64(),
            system: self.system.clone(),
            workloads: host::report(&self.client, &self.internet, self.end),
            paths: self
                .paths
                .iter()
                .map(|p| PathReport {
                    name: p.name.clone(),
                    up: p.up.stats(),
                    down: p.down.stats(),
                    checksum_drops: p.checksum_drops,
                })
                .collect(),
            gateway: self.engines.as_ref().map(|e| e.gateway.stats()),
            server: self.engines.as_ref().map(|e| e.server.stats()),
            gateway_intervals: (self.engines.iter())
                .flat_map(|e| e.gateway.metering_log().copied())
                .collect(),
            server_intervals: (self.engines.iter())
                .flat_map(|e| e.server.metering_log().copied())
                .collect(),
            split: (self.engines.as_ref())
                .and_then(|e| e.split.as_ref())
                .map(|(g, sv)| [g.stats(), sv.stats()]),
            events: self.events,
            virtual_s: self.now.as_secs_f64(),
        }
    }
}

/// Scenario path index → wire path id. Scenarios are validated to have at most 255 paths.
fn path_id(index: usize) -> braid_core::PathId {
    braid_core::PathId::try_from(index).unwrap_or(braid_core::PathId::MAX)
}

/// The serde (kebab-case) name of a config enum, for report labels.
fn kebab<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

pub mod split;

#[cfg(test)]
mod rpc_tests;
#[cfg(test)]
mod tests;
