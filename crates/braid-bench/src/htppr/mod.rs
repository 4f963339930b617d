//! HTPPR's figures (Badam et al., MobiHoc '11, §5) on braid-sim's 802.11g-like hare
//! (`braid_sim::wifi`): HTPPR against UDP, TCP Cubic with SampleRate, Hop BestRate and a
//! ZipTx-like block recovery, each over the same simulated links.
//!
//! - [`micro`]: `htppr-5-1` (a clean hare), `htppr-fig3` (goodput against block size) and
//!   `htppr-fig4` (tortoise use).
//! - [`links`]: the 25 links of §5.3-5.4: `htppr-fig5`, `htppr-fig6`, `htppr-fig8`,
//!   `htppr-ziptx` and `htppr-fig9`.
//! - [`neighbours`]: `htppr-5-5`, two neighbours fetching two files (§5.5).

pub mod links;
pub mod micro;
pub mod neighbours;

use braid_core::htppr::BlockSize;
use braid_core::Instant;
use braid_sim::wifi::flows::hop::{HopReceiver, HopSender};
use braid_sim::wifi::flows::htppr::{sender_config, HtpprReceiver, HtpprSender};
use braid_sim::wifi::flows::tcp::TcpEnd;
use braid_sim::wifi::flows::udp::{UdpSender, UdpSink};
use braid_sim::wifi::flows::{pair, FileSource, RateChange, RateLog, SharedLog};
use braid_sim::wifi::{self, Errors, Member, TortoiseLink, WorldReport};

use crate::Options;

/// The tortoise of §5.1-5.4: 100 Mbit/s Ethernet, 10 ms one way (§5.4's 20 ms ping).
pub const TORTOISE: TortoiseLink = TortoiseLink {
    rate_kbps: 100_000.0,
    one_way_ms: 10.0,
};

/// A system compared on the hare.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum System {
    /// braid's HTPPR: block size, start rate index, autorate on or off.
    Htppr(BlockSize, usize, bool),
    /// The same engine with metadata and feedback on the hare (§5.4's ZipTx-like).
    ZipTx,
    Tcp,
    /// Hop at a fixed rate index.
    Hop(usize),
    /// iperf UDP at a fixed rate index (one-way; never done, run to a time limit).
    Udp(usize),
}

/// One flow's outcome.
#[derive(Clone, Debug, Default)]
pub struct FlowResult {
    pub mbps: f64,
    /// Mean tortoise use over the run, sender and receiver, Mbit/s.
    pub tortoise_tx_mbps: [f64; 2],
    /// The busiest second of the tortoise, sender and receiver, Mbit/s.
    pub tortoise_peak_mbps: [f64; 2],
    /// Chunk latencies, s (HTPPR and TCP with a log).
    pub chunk_latency_s: Vec<f64>,
    /// HTPPR's start rate and rate changes (Fig. 5); empty for the other systems.
    pub rates: Vec<RateChange>,
}

/// The two stations of `system` moving `len` bytes, as members `base` and `base + 1`.
#[allow(clippy::too_many_arguments)]
fn members(
    system: System,
    len: u64,
    seed: u64,
    snr: f64,
    base: usize,
    log: Option<SharedLog>,
    rate_log: RateLog,
    tortoise: TortoiseLink,
) -> [Member; 2] {
    match system {
        System::Htppr(block, start, autorate) => {
            let cfg = sender_config(block, start, autorate, seed);
            let mut s = HtpprSender::new(cfg, FileSource::new(len, seed), false, seed)
                .with_rate_log(rate_log);
            let mut r = HtpprReceiver::new(false, seed + 1);
            if let Some(l) = log {
                s = s.with_log(l.clone());
                r = r.with_log(l);
            }
            pair(Box::new(s), Box::new(r), base, snr, Some(tortoise))
        }
        System::ZipTx => {
            let cfg = sender_config(BlockSize::B32, 7, true, seed);
            let s = HtpprSender::new(cfg, FileSource::new(len, seed), true, seed);
            let r = HtpprReceiver::new(true, seed + 1);
            pair(Box::new(s), Box::new(r), base, snr, None)
        }
        System::Tcp => {
            let mut s = TcpEnd::sender(len, seed);
            let mut r = TcpEnd::receiver(len, seed);
            if let Some(l) = log {
                s = s.with_log(l.clone());
                r = r.with_log(l);
            }
            pair(Box::new(s), Box::new(r), base, snr, None)
        }
        System::Hop(rate) => pair(
            Box::new(HopSender::new(len, rate)),
            Box::new(HopReceiver::new(len, rate)),
            base,
            snr,
            None,
        ),
        System::Udp(rate) => pair(
            Box::new(UdpSender::new(u64::MAX, Some(rate), seed)),
            Box::new(UdpSink {
                received: 0,
                expected: u64::MAX,
            }),
            base,
            snr,
            None,
        ),
    }
}

/// Runs `flows` (system, bytes, SNR) at once on one medium; a flow's goodput is its bytes
/// over the time its receiver finished (or, for UDP, the bytes it got by `limit_s`).
pub fn run_flows(
    flows: &[(System, u64, f64)],
    errors: Errors,
    seed: u64,
    limit_s: f64,
    latency: bool,
) -> Vec<FlowResult> {
    run_flows_over(flows, errors, seed, limit_s, latency, TORTOISE)
}

/// [`run_flows`] with HTPPR's tortoise as given (every station its own, towards its peer).
pub fn run_flows_over(
    flows: &[(System, u64, f64)],
    errors: Errors,
    seed: u64,
    limit_s: f64,
    latency: bool,
    tortoise: TortoiseLink,
) -> Vec<FlowResult> {
    let mut all = Vec::new();
    let mut logs = Vec::new();
    let mut rate_logs: Vec<RateLog> = Vec::new();
    for (i, &(system, len, snr)) in flows.iter().enumerate() {
        let log: Option<SharedLog> = latency.then(Default::default);
        logs.push(log.clone());
        rate_logs.push(RateLog::default());
        let fseed = seed.wrapping_mul(31).wrapping_add(i as u64 * 1000 + 1);
        all.extend(members(
            system,
            len,
            fseed,
            snr,
            2 * i,
            log,
            rate_logs[i].clone(),
            tortoise,
        ));
    }
    let limit = Instant::from_micros((limit_s * 1e6) as u64);
    let (members, report) = wifi::run(all, errors, seed, limit);
    let _ = members;
    flows
        .iter()
        .enumerate()
        .map(|(i, &(system, len, _))| FlowResult {
            rates: rate_logs[i].borrow().clone(),
            ..result(system, len, &report, 2 * i, logs[i].as_ref(), limit_s)
        })
        .collect()
}

fn result(
    system: System,
    len: u64,
    report: &WorldReport,
    s: usize,
    log: Option<&SharedLog>,
    limit_s: f64,
) -> FlowResult {
    let done = report.stations[s + 1].done_at;
    let end_s = done
        .map_or(report.end.as_secs_f64(), |t| t.as_secs_f64())
        .max(1e-6);
    let mbps = match system {
        System::Udp(_) => {
            report.stations[s].frames as f64 * braid_sim::wifi::flows::udp::DATAGRAM as f64 * 8.0
                / limit_s
                / 1e6
        }
        _ if done.is_some() => len as f64 * 8.0 / end_s / 1e6,
        _ => 0.0,
    };
    let st = |k: usize| &report.stations[s + k];
    FlowResult {
        mbps,
        tortoise_tx_mbps: [0, 1].map(|k| st(k).tortoise_bytes as f64 * 8.0 / end_s / 1e6),
        tortoise_peak_mbps: [0, 1].map(|k| st(k).peak_tortoise_bps() / 1e6),
        chunk_latency_s: log.map(|l| l.borrow().latencies_s()).unwrap_or_default(),
        rates: Vec::new(),
    }
}

/// Runs `jobs` on all cores, in order.
pub fn parallel<T: Send, R: Send>(
    opts: &mut Options<'_>,
    label: &str,
    jobs: Vec<T>,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let total = jobs.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(total.max(1));
    let work = std::sync::Mutex::new(jobs.into_iter().enumerate());
    let (tx, rx) = std::sync::mpsc::channel();
    let mut out: Vec<Option<R>> = (0..total).map(|_| None).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let work = &work;
            let f = &f;
            s.spawn(move || loop {
                let next = work.lock().map(|mut w| w.next());
                let Ok(Some((i, job))) = next else { break };
                if tx.send((i, f(job))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut done = 0;
        opts.progress(label, 0.0);
        for (i, r) in rx {
            out[i] = Some(r);
            done += 1;
            opts.progress(label, done as f64 / total as f64);
        }
    });
    out.into_iter().map(|r| r.expect("every job ran")).collect()
}

/// Mean of `v` (NaN when empty).
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}
