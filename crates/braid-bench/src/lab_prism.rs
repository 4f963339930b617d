//! `lab-prism`: PRISM's fig6a links in the lab (two links of 1800 and 600 kbit/s, 500 ms of
//! RTT, the slow link's RTT raised by the disparity), one real Linux TCP download (Cubic,
//! sender and receiver unmodified) through braid's packet tunnel with its resequencer (the
//! default reordering; `tcp_transport = "packet"`, as RPC needs), through
//! braid with PRISM's Reverse Path Controller (`reordering = "rpc"`, the far end
//! delivering on arrival), and over Linux MPTCP. Beside goodput, the one-way delay of the
//! delivered data, from stamps the sender writes into the payload (`apps::stamped`).
//! Headline: RPC's goodput over the resequencer's at 400 ms of disparity.

use std::net::SocketAddrV4;
use std::time::Duration;

use braid_core::Reordering;
use braid_lab::accuracy::TCP_PAYLOAD;
use braid_lab::apps::stamped::{self, StampedResult};
use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::support::Need;
use braid_lab::topology::INTERNET;
use braid_lab::{Lab, LabError, PathSpec, System};
use serde_json::{json, Value};

use crate::common::f;
use crate::lab_common::{
    braid_unavailable, delivery_error, delivery_note, load_average, num, path, ready,
};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabPrism;

/// The stamped download's port on the internet host.
const PORT: u16 = 5401;
/// The links: (name, kbit/s); 500 ms of RTT each, the slow one's raised.
const LINKS: [(&str, f64); 2] = [("fast", 1800.0), ("slow", 600.0)];
const RTT_MS: f64 = 500.0;

fn paths(disparity_ms: f64) -> Vec<PathSpec> {
    vec![
        path(LINKS[0].0, LINKS[0].1 / 1000.0, RTT_MS, 0.0),
        path(LINKS[1].0, LINKS[1].1 / 1000.0, RTT_MS + disparity_ms, 0.0),
    ]
}

/// The compared systems: a label, and braid's settings (`None`: Linux MPTCP).
fn systems() -> [(&'static str, Option<BraidSettings>); 3] {
    [
        // RPC works on the TCP inside the packet tunnel: both braids carry it there.
        (
            "braid resequencer (default reordering)",
            Some(BraidSettings::packet_tunnel()),
        ),
        (
            "braid RPC",
            Some(BraidSettings {
                reordering: Some(Reordering::Rpc),
                ..BraidSettings::packet_tunnel()
            }),
        ),
        ("Linux MPTCP", None),
    ]
}

/// One system's download on fresh links.
fn download(
    lab: &mut Lab,
    system: &System,
    duration: Duration,
    omit: Duration,
) -> Result<StampedResult, LabError> {
    let paths = lab.paths().to_vec();
    lab.reset_links(&paths)?;
    stamped::run(
        &lab.internet,
        &lab.client,
        lab.clock(),
        system.route(),
        SocketAddrV4::new(INTERNET, PORT),
        duration,
        omit,
    )
}

/// One disparity's runs: per system (goodput Mbit/s, p95 one-way delay ms), the JSON.
fn run_point(
    disparity: f64,
    duration: Duration,
    omit: Duration,
    notes: &mut Vec<String>,
) -> Result<(Vec<(f64, f64)>, Value), BenchError> {
    let mut lab = Lab::build(&paths(disparity), 1)?;
    let braid_why = braid_unavailable();
    let mut out = Vec::new();
    let mut json = serde_json::Map::new();
    for (label, settings) in systems() {
        let r = match &settings {
            Some(s) => match &braid_why {
                Some(why) => Err(LabError::BraidUnavailable(why.clone())),
                None => BraidTunnel::start_with(&lab, s).and_then(|_tunnel| {
                    download(&mut lab, &System::Braid(s.label()), duration, omit)
                }),
            },
            None => match lab.mptcp_unavailable() {
                Some(why) => Err(LabError::App(format!("Linux MPTCP unavailable: {why}"))),
                None => {
                    let system = lab.mptcp();
                    download(&mut lab, &system, duration, omit)
                }
            },
        };
        let error = delivery_error(&lab);
        notes.push(delivery_note(
            &format!("{disparity:.0} ms, {label}"),
            &error,
        ));
        match r {
            Ok(r) => {
                out.push((r.goodput_mbps, r.one_way_delay_ms.p95));
                json.insert(
                    label.into(),
                    json!({
                        "settings": settings.as_ref().map(BraidSettings::label),
                        "goodput_mbps": num(r.goodput_mbps),
                        "bytes": r.bytes,
                        "one_way_delay_ms": r.one_way_delay_ms,
                        "sender_notsent_lowat": r.notsent_lowat,
                        "emulator_delivery_error": error,
                    }),
                );
            }
            Err(e) => {
                notes.push(format!("{disparity:.0} ms, {label} failed: {e}"));
                out.push((f64::NAN, f64::NAN));
                json.insert(label.into(), json!({ "failed": e.to_string() }));
            }
        }
    }
    Ok((out, Value::Object(json)))
}

impl Bench for LabPrism {
    fn name(&self) -> &'static str {
        "lab-prism"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "PRISM fig6a's links in real kernels: braid's resequencer vs RPC vs Linux MPTCP, goodput and one-way delay (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Topology, Need::Mptcp])?;
        let disparities: &[f64] = if opts.quick {
            &[400.0]
        } else {
            &[0.0, 200.0, 400.0, 700.0]
        };
        let (duration, omit) = if opts.quick {
            (Duration::from_secs(22), Duration::from_secs(7))
        } else {
            (Duration::from_secs(60), Duration::from_secs(15))
        };
        let capacity = LINKS.iter().map(|l| l.1).sum::<f64>() / 1000.0 * TCP_PAYLOAD / 1500.0;
        let mut notes = vec![format!(
            "one TCP download (Cubic, unmodified sender and receiver) per system, {} s, the \
             first {} s left out; capacity = summed rates x 1448/1500; links {} and {} \
             kbit/s, {RTT_MS} ms of RTT, the slow link's RTT raised by the disparity, queues \
             250 ms; braid: its defaults but TCP in the packet tunnel (tcp_transport = \
             \"packet\": RPC works on the tunnel's TCP), capacities learned, RPC with \
             `reordering = \"rpc\"` only; one-way delay: the sender stamps each {}-byte record with its write time on \
             the lab's clock (one CLOCK_MONOTONIC for every namespace, TCP_NOTSENT_LOWAT {} \
             bytes so stamps are taken near sending), the receiving application reads it out \
             on arrival; load average before: {}",
            duration.as_secs(),
            omit.as_secs(),
            LINKS[0].1,
            LINKS[1].1,
            stamped::RECORD,
            stamped::NOTSENT_LOWAT,
            load_average()
        )];
        notes.push(
            "Linux MPTCP's sender socket takes TCP_NOTSENT_LOWAT too (`sender_notsent_lowat`), \
             but the lab does not check that MPTCP's scheduler holds to it: its one-way delay \
             may include time in the sender's buffer"
                .to_owned(),
        );
        if let Some(why) = braid_unavailable() {
            notes.push(format!(
                "braid cannot run in the lab ({why}): no braid figures"
            ));
        }
        let names: Vec<&str> = systems().iter().map(|s| s.0).collect();
        let mut columns = vec!["RTT disparity".to_owned()];
        for n in &names {
            columns.push(format!("{n} Mbit/s"));
            columns.push(format!("{n} p95 delay ms"));
        }
        columns.push("RPC / resequencer".into());
        let mut table = Table::new(columns);
        let mut points = Vec::new();
        let mut headline = (f64::NAN, f64::NAN, f64::NAN);
        for (i, &d) in disparities.iter().enumerate() {
            opts.progress("lab-prism", i as f64 / disparities.len() as f64);
            let (figures, json) = run_point(d, duration, omit, &mut notes)?;
            let ratio = figures[1].0 / figures[0].0;
            let mut row = vec![format!("{d:.0} ms")];
            for (g, p95) in &figures {
                row.push(f(*g, 3));
                row.push(f(*p95, 0));
            }
            row.push(f(ratio, 3));
            table.row(row);
            if (d - 400.0).abs() < 1e-9 {
                headline = (ratio, figures[0].1, figures[1].1);
            }
            points.push(json!({
                "disparity_ms": d,
                "systems": json,
                "rpc_over_resequencer": num(ratio),
                "of_capacity": figures.iter().zip(&names)
                    .map(|((g, _), n)| (n.to_string(), num(g / capacity)))
                    .collect::<serde_json::Map<_, _>>(),
            }));
        }
        opts.progress("lab-prism", 1.0);
        notes.push(format!("load average at the end {}", load_average()));
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({
                "links": LINKS.iter().map(|l| json!({"name": l.0, "rate_kbps": l.1})).collect::<Vec<_>>(),
                "rtt_ms": RTT_MS,
                "capacity_mbps": capacity,
                "points": points,
            }),
            headline: Headline::new(
                format!(
                    "RPC goodput / resequencer goodput at 400 ms of RTT disparity (p95 one-way \
                     delay of delivered data: resequencer {} ms, RPC {} ms)",
                    f(headline.1, 0),
                    f(headline.2, 0)
                ),
                headline.0,
                None,
                1.0,
                true,
            ),
            notes,
            table,
        })
    }
}
