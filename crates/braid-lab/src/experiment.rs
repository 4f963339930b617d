//! The runs the lab benchmarks are made of: bulk TCP with iperf3, the short-flow web
//! workload, a path failure under load, and a path cut under a download and a video
//! stream, each for a group of systems. Systems in one
//! group run at the same time, so a group holds only systems that share no path (the
//! single-path baselines, one per path); MPTCP and braid each get a group of their own.
//! Every group starts with fresh links ([`Lab::reset_links`]): empty queues, and
//! blackouts counted from the group's start.

use std::net::SocketAddrV4;
use std::time::Duration;

use braid_core::Instant;
use braid_sim::host::{WebArrivals, WebConfig};
use braid_sim::link::BlackoutConfig;
use serde::Serialize;

use crate::apps::cbr::{self, CbrFlow, CbrResult};
use crate::apps::http::{self, Server, Transport};
use crate::apps::iperf::{self, IperfResult, IperfTest};
use crate::apps::web::{Timeline, WebResult, WebRun};
use crate::system::System;
use crate::topology::INTERNET;
use crate::{Lab, LabError, PathSpec};

/// The HTTP server's port on the internet host.
pub const HTTP_PORT: u16 = 80;
/// First iperf3 port; system `i` of a group uses this plus `i`.
pub const IPERF_PORT: u16 = 5201;
/// The CBR (video) source's UDP port on the internet host.
pub const CBR_PORT: u16 = 5301;

fn http_server(lab: &Lab) -> Result<Server, LabError> {
    let transport = if lab.mptcp_unavailable().is_none() {
        Transport::Mptcp
    } else {
        Transport::Tcp
    };
    Server::start(&lab.internet, HTTP_PORT, transport)
}

/// Bulk TCP downloads (iperf3, Cubic), one per system, all at once, `duration_s` long
/// after `omit_s` left out for slow start.
pub fn bulk(
    lab: &mut Lab,
    systems: &[System],
    duration_s: u32,
    omit_s: u32,
) -> Result<Vec<Result<IperfResult, LabError>>, LabError> {
    bulk_watched(lab, systems, duration_s, omit_s, &mut |_, _| {})
}

/// [`bulk`], calling `tick(lab, elapsed)` about every second while it runs.
pub fn bulk_watched(
    lab: &mut Lab,
    systems: &[System],
    duration_s: u32,
    omit_s: u32,
    tick: &mut dyn FnMut(&Lab, Duration),
) -> Result<Vec<Result<IperfResult, LabError>>, LabError> {
    let paths = lab.paths().to_vec();
    lab.reset_links(&paths)?;
    let mut servers = Vec::new();
    let mut tests = Vec::new();
    for (i, s) in systems.iter().enumerate() {
        let port = IPERF_PORT + i as u16;
        servers.push(iperf::start_server(&lab.internet, port, s.is_mptcp())?);
        let mut t = IperfTest::tcp(INTERNET, port, duration_s);
        t.omit_s = omit_s;
        t.bind = Some(s.source());
        t.mptcp = s.is_mptcp();
        t.interval_s = 1.0;
        tests.push(t);
    }
    let clients = tests
        .iter()
        .map(|t| iperf::start_client(&lab.client, t))
        .collect::<Result<Vec<_>, _>>()?;
    let lab = &*lab;
    let results = std::thread::scope(|scope| {
        let done = scope.spawn(|| {
            clients
                .into_iter()
                .zip(&tests)
                .map(|(c, t)| iperf::finish(c, t))
                .collect()
        });
        watch(lab, &|| done.is_finished(), tick);
        done.join()
            .unwrap_or_else(|_| vec![Err(LabError::App("the iperf3 thread panicked".into()))])
    });
    drop(servers);
    Ok(results)
}

/// Calls `tick(lab, elapsed)` about every second until `done()`.
fn watch(lab: &Lab, done: &dyn Fn() -> bool, tick: &mut dyn FnMut(&Lab, Duration)) {
    let clock = lab.clock();
    let start = clock.now();
    let mut next_tick = Duration::from_secs(1);
    while !done() {
        std::thread::sleep(Duration::from_millis(100));
        let elapsed = clock.now() - start;
        if elapsed >= next_tick {
            tick(lab, elapsed);
            next_tick += Duration::from_secs(1);
        }
    }
}

/// The web workload `web` (workload index 0 of a run seeded `seed`), its arrivals for
/// `stop_after`, run by every system at once; open flows get `grace` to finish.
pub fn web(
    lab: &mut Lab,
    systems: &[System],
    web: &WebConfig,
    seed: u64,
    stop_after: Duration,
    grace: Duration,
) -> Result<Vec<WebResult>, LabError> {
    web_watched(lab, systems, web, seed, stop_after, grace, &mut |_, _| {})
}

/// [`web`], calling `tick(lab, elapsed)` about every second while the flows run (for a
/// live view).
pub fn web_watched(
    lab: &mut Lab,
    systems: &[System],
    web: &WebConfig,
    seed: u64,
    stop_after: Duration,
    grace: Duration,
    tick: &mut dyn FnMut(&Lab, Duration),
) -> Result<Vec<WebResult>, LabError> {
    let paths = lab.paths().to_vec();
    lab.reset_links(&paths)?;
    let _server = http_server(lab)?;
    let end = Instant::ZERO + stop_after;
    let clock = lab.clock();
    let server = SocketAddrV4::new(INTERNET, HTTP_PORT);
    let lab = &*lab;
    let client = &lab.client;
    std::thread::scope(|scope| {
        let handles: Vec<_> = systems
            .iter()
            .map(|s| {
                let route = s.route();
                scope.spawn(move || {
                    let arrivals = WebArrivals::new(web, 0, seed, end)
                        .map_err(|e| LabError::Config(e.to_string()))?;
                    WebRun {
                        route,
                        server,
                        arrivals,
                        stop_after,
                        grace,
                        timeline: None,
                    }
                    .run(client, clock)
                })
            })
            .collect();
        watch(
            lab,
            &|| {
                handles
                    .iter()
                    .all(std::thread::ScopedJoinHandle::is_finished)
            },
            tick,
        );
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(LabError::App("a web workload thread panicked".into())))
            })
            .collect()
    })
}

/// What a path failure under load did to one system.
#[derive(Clone, Debug, Serialize)]
pub struct Failover {
    /// Width of a goodput bin, ms.
    pub bin_ms: u64,
    /// The client's goodput per bin (the bulk download and the short flows together),
    /// Mbit/s, from the start of the run.
    pub goodput_mbps: Vec<f64>,
    /// When the path failed, s from the start.
    pub fail_at_s: f64,
    /// Mean goodput before the failure (from 1 s in), Mbit/s.
    pub before_mbps: f64,
    /// Time from the failure to the first non-empty bin from which every window of
    /// `RECOVERY_WINDOW_MS` starting within `RECOVERY_HOLD_MS` has a goodput of at least
    /// half the surviving path's TCP capacity; `None` if there is none.
    pub recovery_ms: Option<f64>,
    /// Longest run of empty bins after the failure, ms.
    pub longest_stall_ms: f64,
    /// The bulk connection was reset or failed.
    pub bulk_reset: bool,
    /// The short flows running meanwhile.
    pub web: WebResult,
}

/// Goodput bins for failover timelines.
pub const BIN_MS: u64 = 50;
/// Window over which recovered goodput is judged.
pub const RECOVERY_WINDOW_MS: u64 = 300;
/// How long goodput must stay recovered (every window starting within it).
pub const RECOVERY_HOLD_MS: u64 = 2000;

/// Blackholes path `k` of `paths` both ways from `start_s` for `duration_s`.
fn blackhole(
    paths: &mut [PathSpec],
    k: usize,
    start_s: f64,
    duration_s: f64,
) -> Result<(), LabError> {
    let window = BlackoutConfig {
        start_s,
        duration_s,
    };
    let p = paths
        .get_mut(k)
        .ok_or_else(|| LabError::Config(format!("no path {k} to blackhole")))?;
    p.up.blackouts.push(window.clone());
    p.down.blackouts.push(window);
    Ok(())
}

/// Runs a bulk download (HTTP, unbounded) and the web workload `web` through `system`;
/// path `fail` is blackholed both ways from `fail_at_s` to the end of the run.
/// `surviving_mbps` is the TCP capacity left, which recovery is judged against. Goodput
/// counts every application byte the client receives (download and short flows), so a
/// system is not penalized for carrying the short flows beside the download.
#[expect(
    clippy::too_many_arguments,
    reason = "one experiment's knobs, named at the call"
)]
pub fn failover(
    lab: &mut Lab,
    system: &System,
    fail: usize,
    fail_at_s: f64,
    duration_s: f64,
    surviving_mbps: f64,
    web: &WebConfig,
    seed: u64,
) -> Result<Failover, LabError> {
    let mut paths = lab.paths().to_vec();
    blackhole(&mut paths, fail, fail_at_s, duration_s + 3600.0)?;
    let epoch = lab.reset_links(&paths)?;
    let _server = http_server(lab)?;
    let clock = lab.clock();
    let server = SocketAddrV4::new(INTERNET, HTTP_PORT);
    let run_for = Duration::from_secs_f64(duration_s);
    let deadline = epoch + run_for;
    let bins = (duration_s * 1000.0 / BIN_MS as f64).ceil() as usize;
    let timeline = Timeline::new(epoch, Duration::from_millis(BIN_MS), bins);
    let route = system.route();
    let client = &lab.client;
    let (bulk, web_result) = std::thread::scope(|scope| {
        let bulk = scope.spawn(|| {
            client.enter_scoped(|| {
                Ok(http::fetch(
                    route,
                    server,
                    None,
                    &clock,
                    deadline,
                    |now, n| {
                        timeline.add(now, n);
                    },
                ))
            })
        });
        let flows = scope.spawn(|| {
            let end = Instant::ZERO + run_for;
            let arrivals =
                WebArrivals::new(web, 0, seed, end).map_err(|e| LabError::Config(e.to_string()))?;
            WebRun {
                route,
                server,
                arrivals,
                stop_after: run_for.saturating_sub(Duration::from_secs(1)),
                grace: Duration::from_secs(10),
                timeline: Some(&timeline),
            }
            .run(client, clock)
        });
        (
            bulk.join()
                .unwrap_or_else(|_| Err(LabError::App("the bulk thread panicked".into()))),
            flows
                .join()
                .unwrap_or_else(|_| Err(LabError::App("the web thread panicked".into()))),
        )
    });
    let bulk = bulk?;
    let goodput = timeline.mbps();
    let fail_bin = (fail_at_s * 1000.0 / BIN_MS as f64) as usize;
    let (recovery_ms, longest_stall_ms) = recovery(&goodput, fail_bin, surviving_mbps);
    let first = (1000 / BIN_MS) as usize;
    let before = goodput.get(first..fail_bin).unwrap_or_default();
    Ok(Failover {
        bin_ms: BIN_MS,
        before_mbps: before.iter().sum::<f64>() / before.len().max(1) as f64,
        goodput_mbps: goodput,
        fail_at_s,
        recovery_ms,
        longest_stall_ms,
        bulk_reset: bulk.reset || bulk.failed,
        web: web_result?,
    })
}

/// Recovery time and longest stall after `fail_bin` in a goodput series of `BIN_MS` bins
/// (see [`Failover`]).
pub fn recovery(goodput: &[f64], fail_bin: usize, surviving_mbps: f64) -> (Option<f64>, f64) {
    let w = (RECOVERY_WINDOW_MS / BIN_MS) as usize;
    let stay = (RECOVERY_HOLD_MS / BIN_MS) as usize;
    let threshold = surviving_mbps / 2.0;
    let window_ok = |i: usize| goodput[i..i + w].iter().sum::<f64>() / w as f64 >= threshold;
    let last_start = goodput.len().saturating_sub(w);
    let recovered = (fail_bin..=last_start)
        .filter(|&i| goodput.get(i).is_some_and(|&g| g > 0.0))
        .find(|&i| (i..=(i + stay).min(last_start)).all(window_ok))
        .map(|i| ((i - fail_bin) as u64 * BIN_MS) as f64);
    (
        recovered,
        longest_stall_ms(goodput, fail_bin, goodput.len()),
    )
}

/// Longest run of empty `BIN_MS` bins in bins `from..to`, ms.
pub fn longest_stall_ms(goodput: &[f64], from: usize, to: usize) -> f64 {
    let mut longest = 0usize;
    let mut run = 0usize;
    for &g in goodput.get(from..to.min(goodput.len())).unwrap_or_default() {
        if g == 0.0 {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    (longest as u64 * BIN_MS) as f64
}

/// What cutting a path for a while did to a bulk download and a video stream beside it.
#[derive(Clone, Debug, Serialize)]
pub struct Cut {
    /// Width of a goodput bin, ms.
    pub bin_ms: u64,
    /// The bulk download's goodput per bin, Mbit/s, from the start of the run.
    pub bulk_mbps: Vec<f64>,
    /// How far into their traces the links started, s.
    pub trace_start_s: f64,
    /// When the path was cut and for how long, s from the start of the run.
    pub cut_at_s: f64,
    pub cut_s: f64,
    /// Mean bulk goodput before the cut (from 1 s in), Mbit/s.
    pub before_mbps: f64,
    /// Mean bulk goodput while the path was cut, Mbit/s.
    pub during_mbps: f64,
    /// Longest run of empty bins of the bulk download from the cut to `STALL_AFTER_S`
    /// after the path is back, ms.
    pub longest_stall_ms: f64,
    /// The bulk connection was reset or failed.
    pub bulk_reset: bool,
    /// The video stream (CBR UDP, downlink) over the run.
    pub video: CbrResult,
}

/// How long after a cut path is back its stalls still count: the path's return
/// (reordering, its queue refilling) is part of the cut; a stall long after it is not.
pub const STALL_AFTER_S: f64 = 3.0;

/// A path cut under a download and a video stream: what [`cut_under_video`] runs.
#[derive(Clone, Copy, Debug)]
pub struct CutPlan {
    /// The path cut.
    pub path: usize,
    /// Every trace-driven link starts this far into its trace, s (to place the cut on a
    /// chosen stretch of the recordings).
    pub trace_start_s: f64,
    /// When the path is cut (both ways) and for how long, s.
    pub cut_at_s: f64,
    pub cut_s: f64,
    /// The whole run, s.
    pub duration_s: f64,
    /// The video stream's rate (UDP payload), Mbit/s.
    pub video_mbps: f64,
}

/// Runs a bulk download (HTTP, unbounded) and a downlink CBR stream (1200-byte datagrams)
/// through `system` as `plan` says. The stream takes the system's route: braid's tunnel,
/// or for MPTCP and a single path the client's address on its (first) path, as a UDP
/// application's default route would. `tick(lab, elapsed)` is called about every second.
pub fn cut_under_video(
    lab: &mut Lab,
    system: &System,
    plan: &CutPlan,
    tick: &mut dyn FnMut(&Lab, Duration),
) -> Result<Cut, LabError> {
    let CutPlan {
        path,
        trace_start_s,
        cut_at_s,
        cut_s,
        duration_s,
        video_mbps,
    } = *plan;
    let mut paths = lab.paths().to_vec();
    for p in &mut paths {
        for l in [&mut p.up, &mut p.down] {
            if l.trace.is_some() && trace_start_s > 0.0 {
                l.trace_offset_s = Some(l.trace_offset_s.unwrap_or(0.0) + trace_start_s);
            }
        }
    }
    blackhole(&mut paths, path, cut_at_s, cut_s)?;
    let epoch = lab.reset_links(&paths)?;
    let _server = http_server(lab)?;
    let clock = lab.clock();
    let server = SocketAddrV4::new(INTERNET, HTTP_PORT);
    let run_for = Duration::from_secs_f64(duration_s);
    let deadline = epoch + run_for;
    let bins = (duration_s * 1000.0 / BIN_MS as f64).ceil() as usize;
    let timeline = Timeline::new(epoch, Duration::from_millis(BIN_MS), bins);
    let route = system.route();
    let video = CbrFlow {
        rate_mbps: video_mbps,
        packet_bytes: 1200,
        port: CBR_PORT,
        bind: system.source(),
        server: INTERNET,
    };
    let lab = &*lab;
    let (bulk, video) = std::thread::scope(|scope| {
        let bulk = scope.spawn(|| {
            lab.client.enter_scoped(|| {
                Ok(http::fetch(
                    route,
                    server,
                    None,
                    &clock,
                    deadline,
                    |now, n| timeline.add(now, n),
                ))
            })
        });
        let video =
            scope.spawn(|| cbr::run(&video, &lab.internet, &lab.client, clock, epoch, run_for));
        watch(lab, &|| bulk.is_finished() && video.is_finished(), tick);
        (
            bulk.join()
                .unwrap_or_else(|_| Err(LabError::App("the bulk thread panicked".into()))),
            video
                .join()
                .unwrap_or_else(|_| Err(LabError::App("the video thread panicked".into()))),
        )
    });
    let bulk = bulk?;
    let goodput = timeline.mbps();
    let bin = |s: f64| ((s * 1000.0 / BIN_MS as f64) as usize).min(goodput.len());
    let mean = |from: usize, to: usize| {
        let g = goodput.get(from..to.max(from)).unwrap_or_default();
        g.iter().sum::<f64>() / g.len().max(1) as f64
    };
    let (cut_bin, back_bin) = (bin(cut_at_s), bin(cut_at_s + cut_s));
    Ok(Cut {
        bin_ms: BIN_MS,
        before_mbps: mean(bin(1.0), cut_bin),
        during_mbps: mean(cut_bin, back_bin),
        longest_stall_ms: longest_stall_ms(
            &goodput,
            cut_bin,
            bin(cut_at_s + cut_s + STALL_AFTER_S),
        ),
        bulk_mbps: goodput,
        trace_start_s,
        cut_at_s,
        cut_s,
        bulk_reset: bulk.reset || bulk.failed,
        video: video?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_is_the_first_window_back_above_half_capacity() {
        // 10 Mbit/s before, failure at bin 4, a burst of data already in flight, 6 empty
        // bins, then 8 Mbit/s for good.
        let mut g = vec![10.0; 4];
        g.extend([30.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        g.extend([8.0; 60]);
        let (r, stall) = recovery(&g, 4, 10.0);
        assert_eq!(r, Some(350.0));
        assert_eq!(stall, 300.0);
        // A seamless failover recovers at once; a dead one never does.
        assert_eq!(recovery(&[10.0; 80], 4, 10.0).0, Some(0.0));
        assert_eq!(recovery(&[0.0; 20], 4, 10.0), (None, 800.0));
    }
}
