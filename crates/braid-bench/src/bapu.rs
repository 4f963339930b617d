//! BaPu's figures (BaPu §4): a sender's upload bunched over the uplinks of its home AP
//! and its neighbours' monitor APs, in `braid_sim::bapu_world`.
//!
//! - `bapu-fig7`: UDP and TCP through 1-7 APs of 2 Mbit/s up, 32 ms RTT, BaPu without
//!   Proactive-ACK. Headline: UDP's aggregation efficiency at 7 APs.
//! - `bapu-fig10`: TCP with BaPu, SimpleBuffer, BaPu-Pro and braid (Proactive-ACK with the
//!   forwarder picked by earliest arrival). Headline: BaPu-Pro's efficiency at 7 APs.
//! - `bapu-fig12a` / `bapu-fig12b`: BaPu-Pro at RTT 32/96/192 ms and random 20-80 ms per
//!   AP; at monitor loss 20/40/60%. Headlines: efficiency at 192 ms and at 60%, 7 APs.
//! - `bapu-fig13`: a TCP stream at 11 Mbit/s through 7 APs: the coefficient of variation
//!   of the receiver's one-second throughput, beside an unlimited upload's.
//!
//! Aggregation efficiency (§4.1.3) is goodput over the most the uplinks carry with
//! BaPu's overhead, as in Table 4: each run's measured report traffic taken off the
//! capacity, and each forwarded packet costing its IP packet, BaPu's data header and the
//! tunnel's TCP/IP header.

use serde_json::json;

use braid_sim::bapu_world::{run_bapu, BapuReport, BapuSystem, BapuTraffic, BapuWorldConfig};

use crate::common::f;
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

const PAYLOAD: usize = 1350;

fn efficiency(r: &BapuReport) -> f64 {
    r.goodput_mbps / r.max_goodput_mbps(PAYLOAD)
}

/// Runs every world on all cores, in order.
fn run_all(
    opts: &mut Options<'_>,
    label: &str,
    cfgs: Vec<BapuWorldConfig>,
) -> Result<Vec<BapuReport>, BenchError> {
    let total = cfgs.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(total.max(1));
    let work = std::sync::Mutex::new(cfgs.into_iter().enumerate());
    let (tx, rx) = std::sync::mpsc::channel();
    let mut out: Vec<Option<Result<BapuReport, braid_sim::SimError>>> =
        (0..total).map(|_| None).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let work = &work;
            s.spawn(move || loop {
                let next = work.lock().map(|mut w| w.next());
                let Ok(Some((i, c))) = next else { break };
                if tx.send((i, run_bapu(&c))).is_err() {
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
    out.into_iter()
        .map(|r| match r {
            Some(r) => r.map_err(BenchError::from),
            None => Err(BenchError::Other("a simulation thread stopped".into())),
        })
        .collect()
}

fn ap_counts(quick: bool) -> Vec<usize> {
    if quick {
        vec![1, 4, 7]
    } else {
        (1..=7).collect()
    }
}

fn duration(quick: bool) -> f64 {
    if quick {
        10.0
    } else {
        60.0
    }
}

fn paper(
    n: usize,
    system: BapuSystem,
    traffic: BapuTraffic,
    opts: &Options<'_>,
) -> BapuWorldConfig {
    let mut c = BapuWorldConfig::paper(n, system, traffic, opts.seed);
    c.duration_s = duration(opts.quick);
    c
}

/// UDP offered at the uplinks' raw capacity (payload rate), above what they carry with
/// any overhead, as iperf's UDP test saturates them.
fn udp_at_capacity(n: usize) -> BapuTraffic {
    BapuTraffic::Udp {
        mbps: n as f64 * 2.0 * PAYLOAD as f64 / (PAYLOAD + 28) as f64,
    }
}

fn point(r: &BapuReport) -> serde_json::Value {
    json!({
        "goodput_mbps": r.goodput_mbps,
        "max_goodput_mbps": r.max_goodput_mbps(PAYLOAD),
        "efficiency": efficiency(r),
        "control_mbps": r.control_mbps,
        "retransmissions": r.retransmissions,
        "forwarded_bytes": r.forwarded_bytes,
        "air_lost": r.air_lost,
        "ap": r.ap,
        "scheduler": r.scheduler,
        "proactive_ack": r.proactive_ack,
    })
}

fn note(secs: f64) -> String {
    format!(
        "{} s per run; 1350-byte payloads; home AP tries each frame up to 13 times (10% loss \
         per try); efficiency = goodput / (capacity - report traffic) x payload / (IP packet \
         + {} B data header + {} B tunnel TCP/IP)",
        secs,
        braid_sim::bapu_world::DATA_HEADER,
        braid_sim::bapu_world::TUNNEL_HEADER
    )
}

pub struct Fig7;

impl Bench for Fig7 {
    fn name(&self) -> &'static str {
        "bapu-fig7"
    }

    fn summary(&self) -> &'static str {
        "BaPu Fig 7: UDP and TCP through 1-7 APs of 2 Mbit/s, 32 ms, without Proactive-ACK: goodput and aggregation efficiency"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let ns = ap_counts(opts.quick);
        let mut cfgs = Vec::new();
        for &n in &ns {
            cfgs.push(paper(n, BapuSystem::Bapu, udp_at_capacity(n), opts));
            cfgs.push(paper(n, BapuSystem::Bapu, BapuTraffic::Tcp, opts));
        }
        let reports = run_all(opts, "bapu-fig7", cfgs)?;
        let mut table = Table::new(["APs", "UDP Mbit/s", "UDP eff", "TCP Mbit/s", "TCP eff"]);
        let mut points = Vec::new();
        let mut udp7 = f64::NAN;
        for (k, &n) in ns.iter().enumerate() {
            let (u, t) = (&reports[2 * k], &reports[2 * k + 1]);
            table.row([
                n.to_string(),
                f(u.goodput_mbps, 2),
                f(efficiency(u), 3),
                f(t.goodput_mbps, 2),
                f(efficiency(t), 3),
            ]);
            points.push(json!({ "aps": n, "udp": point(u), "tcp": point(t) }));
            if n == 7 {
                udp7 = efficiency(u);
            }
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems: json!({ "BaPu": points }),
            headline: Headline::new("UDP aggregation efficiency at 7 APs, BaPu", udp7, Some(0.9), 0.98, true),
            headlines: Vec::new(),
            notes: vec![
                note(duration(opts.quick)),
                "paper (Fig 7): UDP 12.4 Mbit/s at 7 APs, efficiency above 0.9 at every count; TCP 6.83 Mbit/s (0.5)".into(),
            ],
            table,
        })
    }
}

pub struct Fig10;

const FIG10_SYSTEMS: [BapuSystem; 4] = [
    BapuSystem::Bapu,
    BapuSystem::SimpleBuffer,
    BapuSystem::BapuPro,
    BapuSystem::Braid,
];

impl Bench for Fig10 {
    fn name(&self) -> &'static str {
        "bapu-fig10"
    }

    fn summary(&self) -> &'static str {
        "BaPu Figs 9-10: TCP through 1-7 APs with BaPu, SimpleBuffer, BaPu-Pro (Proactive-ACK) and braid's scheduling: efficiency"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let ns = ap_counts(opts.quick);
        let mut cfgs = Vec::new();
        for &n in &ns {
            for s in FIG10_SYSTEMS {
                cfgs.push(paper(n, s, BapuTraffic::Tcp, opts));
            }
        }
        let reports = run_all(opts, "bapu-fig10", cfgs)?;
        let mut cols = vec!["APs".to_owned()];
        for s in FIG10_SYSTEMS {
            cols.push(format!("{} Mbit/s", s.label()));
            cols.push(format!("{} eff", s.label()));
        }
        let mut table = Table::new(cols);
        let mut systems = serde_json::Map::new();
        let mut pro7 = f64::NAN;
        for (k, &n) in ns.iter().enumerate() {
            let mut cells = vec![n.to_string()];
            for (j, s) in FIG10_SYSTEMS.iter().enumerate() {
                let r = &reports[k * FIG10_SYSTEMS.len() + j];
                cells.push(f(r.goodput_mbps, 2));
                cells.push(f(efficiency(r), 3));
                let mut p = point(r);
                p["aps"] = json!(n);
                if let Some(a) = systems
                    .entry(s.label())
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                {
                    a.push(p);
                }
                if n == 7 && *s == BapuSystem::BapuPro {
                    pro7 = efficiency(r);
                }
            }
            table.row(cells);
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems: serde_json::Value::Object(systems),
            headline: Headline::new("TCP aggregation efficiency at 7 APs, BaPu-Pro", pro7, Some(0.88), 0.95, true),
            headlines: Vec::new(),
            notes: vec![
                note(duration(opts.quick)),
                "paper: BaPu-Pro 11.04 Mbit/s (0.88) at 7 APs; BaPu 6.83; SimpleBuffer below BaPu (Fig 9)".into(),
                "braid = Proactive-ACK with each packet's forwarder picked by earliest expected arrival (backlog over measured rate plus the measured assign-to-arrival minimum)".into(),
            ],
            table,
        })
    }
}

/// A labelled change to the paper's setup.
type Setting = (String, Box<dyn Fn(&mut BapuWorldConfig)>);
/// The table, `systems`, efficiency per setting and AP count, and the AP counts.
type Fig12Result = (Table, serde_json::Value, Vec<Vec<f64>>, Vec<usize>);

/// Seconds per Fig 12 run. The figure plots steady efficiency; at 192 ms the TCP's slow
/// start to a ~350 KB window over the report-announce loop takes 1-2 s, which a 10 s quick
/// run counts as a sixth of its time (bapu-fig12a at 192 ms, 7 APs: 0.835 over 10 s,
/// 0.938 over 30 s, 0.966 over 60 s), so the quick runs are 30 s.
fn fig12_duration(quick: bool) -> f64 {
    if quick {
        30.0
    } else {
        duration(false)
    }
}

/// Fig 12's runs: BaPu-Pro TCP through `ns` APs for each setting.
fn fig12(
    opts: &mut Options<'_>,
    name: &str,
    settings: &[Setting],
) -> Result<Fig12Result, BenchError> {
    let ns = if opts.quick {
        vec![4, 7]
    } else {
        (1..=7).collect()
    };
    let mut cfgs = Vec::new();
    for (_, apply) in settings {
        for &n in &ns {
            let mut c = paper(n, BapuSystem::BapuPro, BapuTraffic::Tcp, opts);
            c.duration_s = fig12_duration(opts.quick);
            apply(&mut c);
            cfgs.push(c);
        }
    }
    let reports = run_all(opts, name, cfgs)?;
    let mut cols = vec!["setting".to_owned()];
    cols.extend(ns.iter().map(|n| format!("{n} APs Mbit/s (eff)")));
    let mut table = Table::new(cols);
    let mut systems = serde_json::Map::new();
    let mut effs = Vec::new();
    for (i, (label, _)) in settings.iter().enumerate() {
        let mut cells = vec![label.clone()];
        let mut pts = Vec::new();
        let mut e = Vec::new();
        for (k, &n) in ns.iter().enumerate() {
            let r = &reports[i * ns.len() + k];
            cells.push(format!(
                "{} ({})",
                f(r.goodput_mbps, 2),
                f(efficiency(r), 3)
            ));
            let mut p = point(r);
            p["aps"] = json!(n);
            pts.push(p);
            e.push(efficiency(r));
        }
        table.row(cells);
        systems.insert(label.clone(), json!(pts));
        effs.push(e);
    }
    Ok((table, json!({ "BaPu-Pro": systems }), effs, ns))
}

pub struct Fig12a;

impl Bench for Fig12a {
    fn name(&self) -> &'static str {
        "bapu-fig12a"
    }

    fn summary(&self) -> &'static str {
        "BaPu Fig 12a: BaPu-Pro TCP at RTT 32, 96, 192 ms and random 20-80 ms per AP: efficiency"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let seed = opts.seed;
        let mut settings: Vec<Setting> = Vec::new();
        for rtt in [32.0, 96.0, 192.0] {
            settings.push((
                format!("{rtt} ms"),
                Box::new(move |c: &mut BapuWorldConfig| {
                    c.aps.iter_mut().for_each(|a| a.rtt_ms = rtt)
                }),
            ));
        }
        settings.push((
            "random 20-80 ms".into(),
            Box::new(move |c: &mut BapuWorldConfig| {
                let mut rng = braid_sim::Rng::child(seed, "bapu-fig12a-rtt");
                c.aps
                    .iter_mut()
                    .for_each(|a| a.rtt_ms = (20.0 + 60.0 * rng.f64()).round());
            }),
        ));
        let (table, systems, effs, ns) = fig12(opts, self.name(), &settings)?;
        let at192 = effs[2][ns.len() - 1];
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems,
            headline: Headline::new("BaPu-Pro efficiency at 192 ms RTT, 7 APs", at192, None, 0.9, true),
            headlines: Vec::new(),
            notes: vec![
                note(fig12_duration(opts.quick)),
                "paper (Fig 12a): throughput declines slightly with RTT; random RTTs show no significant difference".into(),
            ],
            table,
        })
    }
}

pub struct Fig12b;

impl Bench for Fig12b {
    fn name(&self) -> &'static str {
        "bapu-fig12b"
    }

    fn summary(&self) -> &'static str {
        "BaPu Fig 12b: BaPu-Pro TCP with monitor APs missing 20, 40, 60% of frames: efficiency"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let mut settings: Vec<Setting> = Vec::new();
        for loss in [0.2, 0.4, 0.6] {
            settings.push((
                format!("{}%", loss * 100.0),
                Box::new(move |c: &mut BapuWorldConfig| {
                    c.aps.iter_mut().skip(1).for_each(|a| a.monitor_loss = loss)
                }),
            ));
        }
        let (table, systems, effs, ns) = fig12(opts, self.name(), &settings)?;
        let at60 = effs[2][ns.len() - 1];
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems,
            headline: Headline::new("BaPu-Pro efficiency at 60% monitor loss, 7 APs", at60, None, 0.9, true),
            headlines: Vec::new(),
            notes: vec![
                note(fig12_duration(opts.quick)),
                "loss applies to each try a monitor AP overhears; the home AP still gets every frame through MAC retries".into(),
                "paper (Fig 12b): very limited reduction; 7 APs do better at 60% than at 20%".into(),
            ],
            table,
        })
    }
}

pub struct Fig13;

/// Coefficient of variation of one-second samples, leaving out the first `skip`.
fn cov(series: &[f64], skip: usize) -> f64 {
    let s = series.get(skip..).unwrap_or(&[]);
    if s.len() < 2 {
        return f64::NAN;
    }
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / s.len() as f64;
    var.sqrt() / mean
}

impl Bench for Fig13 {
    fn name(&self) -> &'static str {
        "bapu-fig13"
    }

    fn summary(&self) -> &'static str {
        "BaPu Fig 13: an 11 Mbit/s TCP stream through 7 APs with BaPu-Pro: variation of the one-second throughput"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let dur = if opts.quick { 20.0 } else { 100.0 };
        let mk = |t| {
            let mut c = BapuWorldConfig::paper(7, BapuSystem::BapuPro, t, opts.seed);
            c.duration_s = dur;
            c
        };
        let cfgs = vec![
            mk(BapuTraffic::TcpPaced { mbps: 11.0 }),
            mk(BapuTraffic::Tcp),
        ];
        let reports = run_all(opts, self.name(), cfgs)?;
        // The first two seconds are slow start.
        let skip = 2;
        let (stream, bulk) = (&reports[0], &reports[1]);
        let (cs, cb) = (cov(&stream.series_mbps, skip), cov(&bulk.series_mbps, skip));
        let mut table = Table::new(["flow", "mean Mbit/s", "CoV of 1-s throughput"]);
        table.row([
            "11 Mbit/s stream".to_owned(),
            f(stream.goodput_mbps, 2),
            f(cs, 3),
        ]);
        table.row(["unlimited".to_owned(), f(bulk.goodput_mbps, 2), f(cb, 3)]);
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            systems: json!({
                "stream-11mbps": { "goodput_mbps": stream.goodput_mbps, "cov": cs, "series_mbps": stream.series_mbps },
                "unlimited": { "goodput_mbps": bulk.goodput_mbps, "cov": cb, "series_mbps": bulk.series_mbps },
            }),
            headline: Headline::new("CoV of the 11 Mbit/s stream's one-second throughput, 7 APs", cs, None, 0.1, false),
            headlines: Vec::new(),
            notes: vec![
                format!("{dur} s; the first {skip} s (slow start) left out; the stream is the sender's TCP paced to 11 Mbit/s before the air"),
                "paper (Fig 13): the stream is reasonably stable; the unlimited flow fluctuates more".into(),
            ],
            table,
        })
    }
}
