//! PRISM's reordering figures (§8.1-8.3): striping one TCP flow without resequencing the
//! data, its ACKs fixed by the Reverse Path Controller (`reordering = "rpc"`) and its
//! losses answered by TCP-PRISM (`tcp_cc = "prism"`), beside braid's resequencer.
//!
//! - `prism-fig6a`: two links of 1800 and 600 kbit/s, 500 ms of RTT; the slow link's
//!   RTT raised by up to 1000 ms.
//! - `prism-fig6b`: 1080 and 360 kbit/s, 300 ms of RTT; loss on the slow link from
//!   0.001% to 1%.
//! - `prism-fig11`: fig8's three links of 1.4 Mbit/s ± d%: no RPC, ACK re-sequencing
//!   only, full RPC.
//!
//! PRISM's systems run its scheduler (ADAS) over braid's default loss recovery. Without
//! it (`loss_recovery = "none"`, the paper's proxy) ADAS, which does not cap the queue in
//! front of each link, lets the TCP overflow them, and every drop reaches the TCP: fig11's
//! 0% point with RPC and TCP-PRISM read 0.50 of the ideal. braid's defaults run beside.
//! Goodput is taken after a warm-up (the slow start over round trips of up to 1.5 s),
//! as the paper's long transfers measure it.

use serde_json::json;

use crate::common::{
    braid_tcp_ideal_mbps, f, scenario, symmetric_path, BRAID_DEFAULTS, PACKET_TCP,
};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct PrismFig6a;
pub struct PrismFig6b;
pub struct PrismFig11;

/// One compared system: its `[engine]` lines and the bulk workload's extra lines.
struct System {
    name: &'static str,
    engine: &'static str,
    bulk: &'static str,
}

const PRISM_ENGINE: &str = "scheduler = \"adas\"\ntcp_transport = \"packet\"\n";

const BRAID: System = System {
    name: BRAID_DEFAULTS,
    engine: "",
    bulk: "",
};
const VANILLA_SACK: System = System {
    name: "vanilla-sack",
    engine: "scheduler = \"adas\"\nreordering = \"none\"\ntcp_transport = \"packet\"\n",
    bulk: "",
};
const VANILLA_NOSACK: System = System {
    name: "vanilla-nosack",
    engine: "scheduler = \"adas\"\nreordering = \"none\"\ntcp_transport = \"packet\"\n",
    bulk: "sack = false\n",
};
const ACK_RESEQUENCING: System = System {
    name: "ack-resequencing",
    engine: "scheduler = \"adas\"\nreordering = \"ack-resequencing\"\ntcp_transport = \"packet\"\n",
    bulk: "tcp_cc = \"prism\"\n",
};
const RPC_UNMODIFIED: System = System {
    name: "rpc-unmodified",
    engine: "scheduler = \"adas\"\nreordering = \"rpc\"\ntcp_transport = \"packet\"\n",
    bulk: "",
};
/// RPC with TCP-PRISM over braid's own scheduler, which caps the queue it builds in front
/// of each link (ADAS does not, and its TCP overflows them).
const BRAID_RPC_PRISM: System = System {
    name: "braid-sched-rpc-tcp-prism",
    engine: "reordering = \"rpc\"\ntcp_transport = \"packet\"\n",
    bulk: "tcp_cc = \"prism\"\n",
};
const RPC_PRISM: System = System {
    name: "rpc-tcp-prism",
    engine: "scheduler = \"adas\"\nreordering = \"rpc\"\ntcp_transport = \"packet\"\n",
    bulk: "tcp_cc = \"prism\"\n",
};

/// One point of a figure: its label, its value on the x axis, and its links as
/// (kbit/s, one-way ms, extra link keys).
struct Point {
    label: String,
    x: f64,
    links: Vec<(f64, f64, String)>,
}

/// A figure's runs and its table: each system's goodput after `warm_s` as a fraction of
/// the ideal over the point's links.
struct Figure {
    bench: &'static str,
    duration: f64,
    warm_s: f64,
    systems: &'static [System],
    points: Vec<Point>,
}

struct Measured {
    /// `fractions[point][system]`.
    fractions: Vec<Vec<f64>>,
    table: Table,
    rows: Vec<serde_json::Value>,
}

/// What RPC did in a run, for the JSON.
fn rpc_json(st: braid_core::rpc::RpcStats) -> serde_json::Value {
    json!({
        "held": st.held,
        "released_resequenced": st.released_resequenced,
        "released_on_loss": st.released_on_loss,
        "released_on_timeout": st.released_on_timeout,
        "released_on_overflow": st.released_on_overflow,
        "paced": st.paced,
        "split_acks": st.split_acks,
        "sack_clipped": st.sack_clipped,
        "losses": st.losses,
        "losses_spurious": st.losses_spurious,
        "tunnel_resends": st.tunnel_resends,
        "losses_tunnel_repaired": st.losses_tunnel_repaired,
        "nacks": st.nacks,
        "longest_hold_ms": st.longest_hold.as_secs_f64() * 1e3,
    })
}

/// Mean goodput of the run's bulk workload from `warm_s` to the end.
fn steady_mbps(r: &braid_sim::Report, warm_s: f64) -> f64 {
    let Some(b) = r.workloads.iter().find_map(|w| w.bulk.as_ref()) else {
        return f64::NAN;
    };
    let skip = (warm_s * 1000.0 / b.series_interval_ms).ceil() as usize;
    let tail = b.goodput_mbps_series.get(skip..).unwrap_or(&[]);
    if tail.is_empty() {
        return f64::NAN;
    }
    tail.iter().sum::<f64>() / tail.len() as f64
}

impl Figure {
    fn run(&self, opts: &mut Options<'_>, x_name: &str) -> Result<Measured, BenchError> {
        let mut scenarios = Vec::new();
        for (k, p) in self.points.iter().enumerate() {
            let paths: String = (p.links.iter().enumerate())
                .map(|(i, (r, d, extra))| symmetric_path(&format!("l{i}"), *r, *d, extra))
                .collect();
            for s in self.systems {
                let bulk = format!("[[workload]]\nkind = \"bulk\"\n{}", s.bulk);
                scenarios.push(scenario(
                    &format!("{}-{k}-{}", self.bench, s.name),
                    self.duration,
                    opts.seed,
                    s.engine,
                    &paths,
                    &bulk,
                )?);
            }
        }
        let mtu = scenarios.first().map_or(1400, |s| s.mtu);
        let runs = crate::common::run_all_keeping(opts, self.bench, scenarios)?;
        let mut columns = vec![x_name.to_owned()];
        columns.extend(self.systems.iter().map(|s| s.name.to_owned()));
        let mut table = Table::new(columns);
        let (mut fractions, mut rows) = (Vec::new(), Vec::new());
        for (k, p) in self.points.iter().enumerate() {
            let capacity: f64 = p.links.iter().map(|l| l.0).sum();
            let ideal = braid_tcp_ideal_mbps(capacity, mtu);
            let mut cells = vec![p.label.clone()];
            let mut fr = serde_json::Map::new();
            let mut detail = serde_json::Map::new();
            let mut row = Vec::new();
            for (j, s) in self.systems.iter().enumerate() {
                let (r, engines) = &runs[k * self.systems.len() + j];
                let v = steady_mbps(r, self.warm_s) / ideal;
                cells.push(f(v, 3));
                fr.insert(s.name.to_owned(), json!(v));
                let rpc = engines.as_ref().and_then(|e| e.server.rpc_stats());
                let sender = (r.workloads.iter())
                    .find_map(|w| w.tcp.as_ref().and_then(|t| t.sender.clone()));
                // Where the losses came from: the links' queues and loss models, and
                // what braid's own loss recovery resent.
                let drops: Vec<_> = (r.paths.iter())
                    .map(|p| {
                        json!({
                            "path": p.name,
                            "queue": p.down.packets_dropped_queue,
                            "random": p.down.packets_lost_random,
                        })
                    })
                    .collect();
                let braid_resent = (r.server.as_ref())
                    .map(|st| st.loss_recovery.retransmissions_sent + st.failover_resent);
                detail.insert(
                    s.name.to_owned(),
                    json!({
                        "tcp_sender": sender,
                        "rpc": rpc.map(rpc_json),
                        "down_drops": drops,
                        "braid_resent": braid_resent,
                    }),
                );
                row.push(v);
            }
            table.row(cells);
            rows.push(json!({
                x_name: p.x, "ideal_mbps": ideal, "fraction_of_ideal": fr, "runs": detail,
            }));
            fractions.push(row);
        }
        Ok(Measured {
            fractions,
            table,
            rows,
        })
    }

    fn at(&self, m: &Measured, x: f64, system: &str) -> f64 {
        let k = self.points.iter().position(|p| (p.x - x).abs() < 1e-9);
        let j = self.systems.iter().position(|s| s.name == system);
        k.zip(j).map_or(f64::NAN, |(k, j)| m.fractions[k][j])
    }
}

fn report(
    opts: &Options<'_>,
    fig: &Figure,
    m: Measured,
    headline: Headline,
    note: String,
) -> BenchReport {
    BenchReport {
        bench: fig.bench.to_owned(),
        seed: opts.seed,
        quick: opts.quick,
        headlines: Vec::new(),
        systems: json!({
            "systems": fig.systems.iter().map(|s| json!({
                "name": s.name, "engine": s.engine, "bulk": s.bulk,
            })).collect::<Vec<_>>(),
            "points": m.rows,
        }),
        headline,
        notes: vec![
            note,
            format!(
                "{} s of one bulk TCP download per run; goodput from {} s to the end over the \
                 ideal through braid (capacity less headers)",
                fig.duration, fig.warm_s
            ),
            format!("PRISM's systems: {}", PRISM_ENGINE.replace('\n', "; ")),
        ],
        table: m.table,
    }
}

impl Bench for PrismFig6a {
    fn name(&self) -> &'static str {
        "prism-fig6a"
    }

    fn summary(&self) -> &'static str {
        "one TCP over 1800 + 600 kbit/s with 0-1000 ms of delay disparity: vanilla striping, braid's resequencer, RPC"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let disparities: Vec<f64> = if opts.quick {
            vec![0.0, 200.0, 400.0, 700.0]
        } else {
            (0..=20).map(|i| f64::from(i) * 50.0).collect()
        };
        // 500 ms of RTT on each link; the disparity is added to the slow link's RTT.
        let points = disparities
            .iter()
            .map(|&d| Point {
                label: format!("{d:.0} ms"),
                x: d,
                links: vec![
                    (1800.0, 250.0, String::new()),
                    (600.0, 250.0 + d / 2.0, String::new()),
                ],
            })
            .collect();
        let fig = Figure {
            bench: "prism-fig6a",
            duration: if opts.quick { 90.0 } else { 300.0 },
            warm_s: 30.0,
            systems: &[
                VANILLA_NOSACK,
                VANILLA_SACK,
                BRAID,
                RPC_UNMODIFIED,
                RPC_PRISM,
                BRAID_RPC_PRISM,
            ],
            points,
        };
        let m = fig.run(opts, "RTT disparity")?;
        let value = fig.at(&m, 400.0, RPC_PRISM.name);
        let braid = fig.at(&m, 400.0, BRAID.name);
        let headline = Headline::new(
            format!(
                "RPC with TCP-PRISM at 400 ms of RTT disparity, as a fraction of the aggregate \
                 (braid's defaults: {})",
                f(braid, 3)
            ),
            value,
            Some(0.95),
            0.97,
            true,
        );
        let note = "links 1800 and 600 kbit/s, 250 ms one way; the 600 kbit/s link's RTT is \
                    raised by the disparity"
            .to_owned();
        Ok(report(opts, &fig, m, headline, note))
    }
}

impl Bench for PrismFig6b {
    fn name(&self) -> &'static str {
        "prism-fig6b"
    }

    fn summary(&self) -> &'static str {
        "one TCP over 1080 + 360 kbit/s with 0.001-1% loss on the slow link: vanilla striping, braid, RPC"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let losses: &[f64] = if opts.quick {
            &[0.001, 0.1, 0.8]
        } else {
            &[0.001, 0.01, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0]
        };
        let points = losses
            .iter()
            .map(|&pct| Point {
                label: format!("{pct}%"),
                x: pct,
                links: vec![
                    (1080.0, 150.0, String::new()),
                    (
                        360.0,
                        150.0,
                        format!("loss = {{ model = \"bernoulli\", p = {} }}", pct / 100.0),
                    ),
                ],
            })
            .collect();
        let fig = Figure {
            bench: "prism-fig6b",
            duration: if opts.quick { 90.0 } else { 300.0 },
            warm_s: 20.0,
            systems: &[
                VANILLA_SACK,
                BRAID,
                RPC_UNMODIFIED,
                RPC_PRISM,
                BRAID_RPC_PRISM,
            ],
            points,
        };
        let m = fig.run(opts, "loss on the slow link")?;
        let value = fig.at(&m, 0.8, RPC_PRISM.name);
        let braid = fig.at(&m, 0.8, BRAID.name);
        let headline = Headline::new(
            format!(
                "RPC with TCP-PRISM at 0.8% loss on the slow link, as a fraction of the \
                 aggregate (braid's defaults: {})",
                f(braid, 3)
            ),
            value,
            Some(0.94),
            0.96,
            true,
        );
        let note = "links 1080 and 360 kbit/s, 150 ms one way; Bernoulli loss on the 360 \
                    kbit/s link, both directions"
            .to_owned();
        Ok(report(opts, &fig, m, headline, note))
    }
}

impl Bench for PrismFig11 {
    fn name(&self) -> &'static str {
        "prism-fig11"
    }

    fn summary(&self) -> &'static str {
        "one TCP over three links of 1.4 Mbit/s ± d%: no RPC, ACK re-sequencing only, full RPC"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let ds: &[f64] = if opts.quick {
            &[0.0, 0.3, 0.7]
        } else {
            &[0.0, 0.1, 0.3, 0.5, 0.7]
        };
        let points = ds
            .iter()
            .map(|&d| Point {
                label: format!("{:.0}%", d * 100.0),
                x: d,
                links: vec![
                    (1400.0 * (1.0 - d), 60.0, String::new()),
                    (1400.0, 60.0, String::new()),
                    (1400.0 * (1.0 + d), 60.0, String::new()),
                ],
            })
            .collect();
        let fig = Figure {
            bench: "prism-fig11",
            duration: if opts.quick { 40.0 } else { 120.0 },
            warm_s: 5.0,
            systems: &[
                VANILLA_SACK,
                ACK_RESEQUENCING,
                RPC_PRISM,
                BRAID,
                BRAID_RPC_PRISM,
            ],
            points,
        };
        let m = fig.run(opts, "bandwidth disparity")?;
        let value = fig.at(&m, 0.7, RPC_PRISM.name);
        let none = fig.at(&m, 0.7, VANILLA_SACK.name);
        let headline = Headline::new(
            format!(
                "full RPC (with TCP-PRISM) at 70% bandwidth disparity, as a fraction of the ideal \
                 (no RPC: {})",
                f(none, 3)
            ),
            value,
            Some(1.0),
            0.97,
            true,
        );
        let note =
            "links 1400·(1-d), 1400 and 1400·(1+d) kbit/s, 60 ms one way (fig8's)".to_owned();
        Ok(report(opts, &fig, m, headline, note))
    }
}

pub struct PrismFig12;

impl Bench for PrismFig12 {
    fn name(&self) -> &'static str {
        "prism-fig12"
    }

    fn summary(&self) -> &'static str {
        "one TCP over 620/720/720/860 kbit/s under RPC: the re-sequencing distance with ADAS and WRR"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 40.0 } else { 200.0 };
        let links = [620.0, 720.0, 720.0, 860.0];
        let paths: String = (links.iter().enumerate())
            .map(|(i, &r)| symmetric_path(&format!("l{i}"), r, 60.0, ""))
            .collect();
        let schedulers = ["adas", "weighted-round-robin"];
        let mut scenarios = Vec::new();
        for s in schedulers {
            let engine = format!("scheduler = \"{s}\"\nreordering = \"rpc\"\n{PACKET_TCP}\n");
            scenarios.push(scenario(
                &format!("prism12-{s}"),
                duration,
                opts.seed,
                &engine,
                &paths,
                "[[workload]]\nkind = \"bulk\"\ntcp_cc = \"prism\"\n",
            )?);
        }
        let mss = scenarios.first().map_or(1360, |s| s.mtu - 40) as f64;
        let runs = crate::common::run_all_keeping(opts, "prism-fig12", scenarios)?;
        let mut table = Table::new([
            "scheduler",
            "mean re-sequencing distance (segments)",
            "ACKs read",
            "goodput Mbit/s",
        ]);
        let mut means = Vec::new();
        let mut rows = Vec::new();
        for (s, (r, engines)) in schedulers.iter().zip(&runs) {
            let stats = engines.as_ref().and_then(|e| e.server.rpc_stats());
            let (sum, n) = stats.map_or((0, 0), |st| (st.distance_bytes_sum, st.distance_samples));
            let mean = if n == 0 {
                f64::NAN
            } else {
                sum as f64 / n as f64 / mss
            };
            let goodput = crate::common::bulk_mbps(r);
            table.row([s.to_string(), f(mean, 2), n.to_string(), f(goodput, 3)]);
            rows.push(json!({
                "scheduler": s, "mean_distance_segments": mean, "acks": n, "goodput_mbps": goodput,
            }));
            means.push(mean);
        }
        let ratio = means[1] / means[0];
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "links_kbps": links, "runs": rows }),
            headline: Headline::new(
                "WRR's mean re-sequencing distance over ADAS's, under RPC".to_owned(),
                ratio,
                Some(1.5),
                1.5,
                true,
            ),
            notes: vec![
                format!(
                    "{duration} s of one bulk TCP-PRISM download per run; links 60 ms one way; \
                     reordering = \"rpc\""
                ),
                "distance: from the receiver's cumulative ACK to the highest byte any ACK \
                 reported, after each ACK RPC reads (PRISM: left to highest of the \
                 re-sequencing buffer), averaged over ACKs"
                    .to_owned(),
            ],
            table,
        })
    }
}
