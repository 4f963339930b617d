//! `braid lab run FILE`: a scenario file (docs/scenarios.md) run in the lab instead of the
//! simulator. Its paths become emulated paths with the same link models; its workloads run
//! on real sockets (bulk and UDP CBR through iperf3, web flows through the lab's HTTP client
//! and server with the simulator's arrival stream); each compared system gets the whole
//! scenario in turn, on fresh links.

use std::net::SocketAddrV4;
use std::time::Duration;

use braid_core::Instant;
use braid_sim::host::{Direction, WebArrivals, WorkloadConfig};
use braid_sim::Scenario;
use serde::Serialize;
use serde_json::{json, Value};

use crate::apps::http::{Server, Transport};
use crate::apps::iperf::{self, IperfTest};
use crate::apps::web::WebRun;
use crate::braid_daemon::{BraidSettings, BraidTunnel};
use crate::emulator::DirectionReport;
use crate::experiment::{HTTP_PORT, IPERF_PORT};
use crate::topology::INTERNET;
use crate::{Lab, LabError, PathSpec, System};

/// What one system did with the scenario.
#[derive(Clone, Debug, Serialize)]
pub struct SystemRun {
    pub system: String,
    /// Per workload, in file order: its name, kind and figures (or why it failed).
    pub workloads: Vec<Value>,
    /// Per path: the emulator's report for each direction.
    pub paths: Vec<Value>,
}

/// The scenario's paths as lab paths.
pub fn paths(sc: &Scenario) -> Vec<PathSpec> {
    sc.paths
        .iter()
        .map(|p| PathSpec {
            name: p.name.clone(),
            up: p.up.clone(),
            down: p.down.clone(),
        })
        .collect()
}

/// Runs `sc` through each of `systems` in a lab built from its paths (MPTCP's first
/// subflow goes on the lab's best path, whatever `primary` says). braid runs with the
/// scenario's `[engine] loss_recovery` and the scheduler its system names.
pub fn run(sc: &Scenario, systems: &[System]) -> Result<Vec<SystemRun>, LabError> {
    for w in &sc.workloads {
        if let WorkloadConfig::FetchLoop(_) = w {
            return Err(LabError::Config(
                "the lab runs web, bulk and udp-cbr workloads; fetch-loop is simulator-only for now"
                    .into(),
            ));
        }
    }
    let mut lab = Lab::build(&paths(sc), sc.seed)?;
    let names: Vec<String> = sc.paths.iter().map(|p| p.name.clone()).collect();
    let mut out = Vec::new();
    for system in systems {
        let system = &match system {
            System::Mptcp { .. } => lab.mptcp(),
            other => other.clone(),
        };
        let label = system.label(&names);
        let _tunnel = match system {
            System::Braid(s) => Some(BraidTunnel::start_with(
                &lab,
                &BraidSettings {
                    scheduler: Some(s.clone()),
                    loss_recovery: Some(sc.engine.loss_recovery),
                    aqm: sc.engine.aqm,
                    tcp_transport: sc.engine.tcp_transport,
                    reordering: None,
                },
            )?),
            System::Mptcp { .. } => {
                if let Some(why) = lab.mptcp_unavailable() {
                    return Err(LabError::Unsupported(format!("Linux MPTCP: {why}")));
                }
                None
            }
            System::Path(_) => None,
        };
        let workloads = run_system(&mut lab, sc, system)?;
        let paths = lab
            .path_reports()
            .into_iter()
            .map(|(name, up, down)| path_json(&name, &up, &down))
            .collect();
        out.push(SystemRun {
            system: label,
            workloads,
            paths,
        });
    }
    Ok(out)
}

fn path_json(name: &str, up: &DirectionReport, down: &DirectionReport) -> Value {
    json!({ "name": name, "up": up, "down": down })
}

fn run_system(lab: &mut Lab, sc: &Scenario, system: &System) -> Result<Vec<Value>, LabError> {
    let base = lab.paths().to_vec();
    let epoch = lab.reset_links(&base)?;
    let transport = if system.is_mptcp() {
        Transport::Mptcp
    } else {
        Transport::Tcp
    };
    let _http = Server::start(&lab.internet, HTTP_PORT, transport)?;
    let duration = Duration::from_secs_f64(sc.duration_s);
    let clock = lab.clock();
    let lab = &*lab;
    std::thread::scope(|scope| {
        let handles: Vec<_> = sc
            .workloads
            .iter()
            .enumerate()
            .map(|(i, w)| {
                scope.spawn(move || {
                    let r = run_workload(lab, sc, system, i, w, epoch, duration, clock);
                    r.unwrap_or_else(|e| json!({ "error": e.to_string() }))
                })
            })
            .collect();
        Ok(handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| json!({ "error": "panicked" })))
            .collect())
    })
}

#[expect(
    clippy::too_many_arguments,
    reason = "one workload's context, named at the call"
)]
fn run_workload(
    lab: &Lab,
    sc: &Scenario,
    system: &System,
    index: usize,
    w: &WorkloadConfig,
    epoch: Instant,
    duration: Duration,
    clock: crate::clock::Clock,
) -> Result<Value, LabError> {
    let start_s = match w {
        WorkloadConfig::Web(c) => c.start_s,
        WorkloadConfig::Bulk(c) => c.start_s,
        WorkloadConfig::UdpCbr(c) => c.start_s,
        WorkloadConfig::FetchLoop(c) => c.start_s,
    };
    let start = epoch + Duration::from_secs_f64(start_s);
    std::thread::sleep(start.saturating_duration_since(clock.now()));
    let left = duration.saturating_sub(Duration::from_secs_f64(start_s));
    let name = w.kind().label();
    let port = IPERF_PORT + index as u16;
    let iperf_test = |udp: Option<(f64, usize)>, parallel: u32, down: bool| {
        let mut t = IperfTest::tcp(INTERNET, port, left.as_secs().max(1) as u32);
        t.bind = Some(system.source());
        t.mptcp = system.is_mptcp() && udp.is_none();
        t.parallel = parallel;
        t.download = down;
        t.interval_s = 1.0;
        if let Some((rate, len)) = udp {
            t.udp_rate_bps = Some(rate);
            t.udp_len = len;
        }
        t
    };
    let result = match w {
        WorkloadConfig::Bulk(c) => {
            let t = iperf_test(None, c.flows, c.direction == Direction::Down);
            let _server = iperf::start_server(&lab.internet, port, t.mptcp)?;
            json!(iperf::run(&lab.client, &t)?)
        }
        WorkloadConfig::UdpCbr(c) => {
            let rate = c
                .rate_mbps
                .map_or_else(|| c.rate_kbps.unwrap_or(0.0) * 1e3, |m| m * 1e6);
            let t = iperf_test(
                Some((rate, c.packet_bytes)),
                1,
                c.direction == Direction::Down,
            );
            let _server = iperf::start_server(&lab.internet, port, false)?;
            json!(iperf::run(&lab.client, &t)?)
        }
        WorkloadConfig::Web(c) => {
            if c.direction == Direction::Up {
                return Err(LabError::Config(
                    "web uploads are simulator-only for now".into(),
                ));
            }
            let end = Instant::ZERO + duration;
            let arrivals = WebArrivals::new(c, index, sc.seed, end)
                .map_err(|e| LabError::Config(e.to_string()))?
                .map(move |(at, size)| {
                    (
                        Instant::from_micros(at.as_micros().saturating_sub((start_s * 1e6) as u64)),
                        size,
                    )
                });
            let r = WebRun {
                route: system.route(),
                server: SocketAddrV4::new(INTERNET, HTTP_PORT),
                arrivals,
                stop_after: left,
                grace: Duration::from_secs(30),
                timeline: None,
            }
            .run(&lab.client, clock)?;
            json!(r)
        }
        WorkloadConfig::FetchLoop(_) => {
            return Err(LabError::Config(
                "fetch-loop is simulator-only for now".into(),
            ))
        }
    };
    Ok(json!({ "workload": index, "kind": name, "result": result }))
}
