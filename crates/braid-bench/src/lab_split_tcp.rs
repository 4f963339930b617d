//! `lab-split-tcp`: one real Linux TCP download (iperf3, Cubic) over lab-bulk's four
//! paths (2-20 Mbit/s, 20-200 ms RTT, 1% loss on one), through braid's split-TCP mode
//! (the gateway's transparent proxy and the multipath stream), through braid's packet
//! tunnel (its defaults) and over Linux MPTCP, capacities learned. Headline: split-TCP's
//! goodput over the summed capacity (issue 19).

use braid_lab::accuracy::TCP_PAYLOAD;
use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::support::Need;
use braid_lab::{experiment, Lab, PathSpec, System};
use serde_json::{json, Value};

use crate::common::f;
use crate::lab_common::{
    braid_unavailable, delivery_error, delivery_note, load_average, num, path, ready,
};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabSplitTcp;

/// lab-bulk's four paths: (name, Mbit/s, RTT ms, loss).
const PATHS: [(&str, f64, f64, f64); 4] = [
    ("lte", 20.0, 40.0, 0.0),
    ("dsl", 10.0, 100.0, 0.01),
    ("umts", 5.0, 200.0, 0.0),
    ("edge", 2.0, 20.0, 0.0),
];

fn paths() -> Vec<PathSpec> {
    PATHS
        .iter()
        .map(|&(name, mbps, rtt, loss)| path(name, mbps, rtt, loss))
        .collect()
}

/// Per downlink over the lab's last run: bytes delivered, drops at the queue, random
/// losses and the mean queueing delay (where a shortfall comes from).
fn downlinks(lab: &Lab) -> (Value, String) {
    let mut v = serde_json::Map::new();
    let mut text = Vec::new();
    for (name, _, down) in lab.path_reports() {
        let l = &down.link;
        v.insert(
            name.clone(),
            json!({
                "bytes_delivered": l.bytes_delivered,
                "packets_dropped_queue": l.packets_dropped_queue,
                "packets_lost_random": l.packets_lost_random,
                "queue_delay_mean_ms": l.queue_delay_mean_ms,
            }),
        );
        text.push(format!(
            "{name} {:.1} MB, {} queue drops, {} random losses, queue {:.0} ms",
            l.bytes_delivered as f64 / 1e6,
            l.packets_dropped_queue,
            l.packets_lost_random,
            l.queue_delay_mean_ms
        ));
    }
    (Value::Object(v), text.join("; "))
}

/// One system's download: goodput, or NaN and a note.
fn download(
    lab: &mut Lab,
    system: System,
    label: &str,
    duration: u32,
    omit: u32,
    notes: &mut Vec<String>,
) -> Result<f64, BenchError> {
    let r = experiment::bulk(lab, &[system], duration, omit)?.remove(0);
    Ok(match r {
        Ok(r) => r.goodput_mbps,
        Err(e) => {
            notes.push(format!("{label} failed: {e}"));
            f64::NAN
        }
    })
}

impl Bench for LabSplitTcp {
    fn name(&self) -> &'static str {
        "lab-split-tcp"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "one TCP download over lab-bulk's 4 paths: split-TCP vs braid's packet tunnel vs Linux MPTCP (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Iperf, Need::Mptcp])?;
        let (duration, omit) = if opts.quick { (8, 2) } else { (30, 5) };
        let capacity: f64 = PATHS.iter().map(|p| p.1).sum::<f64>() * TCP_PAYLOAD / 1500.0;
        let mut notes = vec![format!(
            "iperf3 download, Cubic, {duration} s after {omit} s left out; capacity = summed \
             rates x 1448/1500; queues 250 ms; braid: capacities learned; split-TCP: braid's \
             defaults (every TCP connection split); packet tunnel: tcp_transport = \
             \"packet\"; load average before: {}",
            load_average()
        )];
        let braid_why = braid_unavailable();
        let mut lab = Lab::build(&paths(), 1)?;
        let mut table = Table::new(["system", "goodput Mbit/s", "of capacity"]);
        let mut systems = serde_json::Map::new();

        opts.progress("lab-split-tcp", 0.0);
        let mptcp = match lab.mptcp_unavailable() {
            Some(why) => {
                notes.push(format!("Linux MPTCP unavailable: {why}"));
                f64::NAN
            }
            None => {
                let system = lab.mptcp();
                download(&mut lab, system, "MPTCP", duration, omit, &mut notes)?
            }
        };
        notes.push(delivery_note("MPTCP run", &delivery_error(&lab)));
        let run_braid = |lab: &mut Lab, settings: &BraidSettings, notes: &mut Vec<String>| {
            if let Some(why) = &braid_why {
                notes.push(format!("braid cannot run in the lab ({why})"));
                return Ok::<f64, BenchError>(f64::NAN);
            }
            let _tunnel = BraidTunnel::start_with(lab, settings)?;
            let label = settings.label();
            download(
                lab,
                System::Braid(label.clone()),
                &label,
                duration,
                omit,
                notes,
            )
        };
        opts.progress("lab-split-tcp", 1.0 / 3.0);
        let tunnel = run_braid(&mut lab, &BraidSettings::packet_tunnel(), &mut notes)?;
        notes.push(delivery_note("packet tunnel run", &delivery_error(&lab)));
        let (tunnel_links, text) = downlinks(&lab);
        notes.push(format!("packet tunnel run, downlinks: {text}"));
        opts.progress("lab-split-tcp", 2.0 / 3.0);
        let split = run_braid(&mut lab, &BraidSettings::default(), &mut notes)?;
        notes.push(delivery_note("split-TCP run", &delivery_error(&lab)));
        let (split_links, text) = downlinks(&lab);
        notes.push(format!("split-TCP run, downlinks: {text}"));
        opts.progress("lab-split-tcp", 1.0);

        for (name, g) in [
            ("braid split-TCP (defaults)", split),
            ("braid packet tunnel", tunnel),
            ("Linux MPTCP", mptcp),
        ] {
            table.row([name.to_owned(), f(g, 2), f(g / capacity, 3)]);
            systems.insert(
                name.into(),
                json!({ "goodput_mbps": num(g), "of_capacity": num(g / capacity) }),
            );
        }
        systems.insert(
            "paths".into(),
            Value::Array(
                PATHS
                    .iter()
                    .map(|p| json!({"name": p.0, "rate_mbps": p.1, "rtt_ms": p.2, "loss": p.3}))
                    .collect(),
            ),
        );
        systems.insert("capacity_mbps".into(), json!(capacity));
        systems.insert(
            "downlinks".into(),
            json!({ "split-TCP": split_links, "packet tunnel": tunnel_links }),
        );
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: Value::Object(systems),
            headline: Headline::new(
                "split-TCP goodput / summed capacity over 4 paths",
                split / capacity,
                None,
                0.95,
                true,
            ),
            notes,
            table,
        })
    }
}
