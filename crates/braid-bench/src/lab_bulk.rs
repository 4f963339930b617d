//! `lab-bulk`: bulk TCP (iperf3, Cubic) over 2, 3 and 4 heterogeneous emulated paths
//! (2-20 Mbit/s, 20-200 ms RTT, one path with 1% loss), through braid, Linux MPTCP and
//! each path alone, in real kernels. Headline: braid's goodput over MPTCP's on the
//! hardest case (four paths).

use braid_lab::accuracy::TCP_PAYLOAD;
use braid_lab::braid_daemon::BraidSettings;
use braid_lab::support::Need;
use braid_lab::{Lab, PathSpec};
use serde_json::{json, Value};

use crate::common::f;
use crate::lab_common::{braid_unavailable, bulk_groups, delivery_note, num, path, ready};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabBulk;

/// The paths, in the order cases add them: (name, Mbit/s, RTT ms, loss).
const PATHS: [(&str, f64, f64, f64); 4] = [
    ("lte", 20.0, 40.0, 0.0),
    ("dsl", 10.0, 100.0, 0.01),
    ("umts", 5.0, 200.0, 0.0),
    ("edge", 2.0, 20.0, 0.0),
];

/// braid as a user runs it: an empty `[engine]` (delay-based scheduling, retransmission
/// driven by the receiver's per-path nacks, so that the dsl path's 1% loss does not reach
/// the inner TCP), capacities learned.
fn braid_settings() -> BraidSettings {
    BraidSettings::default()
}

fn paths(n: usize) -> Vec<PathSpec> {
    PATHS[..n]
        .iter()
        .map(|&(name, mbps, rtt, loss)| path(name, mbps, rtt, loss))
        .collect()
}

/// One case's figures: per system goodput, and the notes it raised.
struct Case {
    json: Value,
    row: Vec<String>,
    braid: f64,
    mptcp: f64,
    notes: Vec<String>,
}

fn run_case(
    n: usize,
    duration: u32,
    omit: u32,
    braid_why: &Option<String>,
) -> Result<Case, BenchError> {
    let specs = paths(n);
    let names: Vec<String> = specs.iter().map(|p| p.name.clone()).collect();
    let capacity: f64 = PATHS[..n].iter().map(|p| p.1).sum::<f64>() * TCP_PAYLOAD / 1500.0;
    let mut lab = Lab::build(&specs, 1)?;
    let mut notes = Vec::new();
    let settings = braid_settings();
    let run = bulk_groups(
        &mut lab,
        &format!("{n} paths"),
        duration,
        omit,
        braid_why.is_none().then_some(&settings),
        &mut notes,
        &mut |_, _| {},
    )?;
    let mut per_path = serde_json::Map::new();
    let mut best = (String::new(), f64::NAN);
    for (name, r) in names.iter().zip(&run.alone) {
        let g = r.goodput_mbps;
        per_path.insert(name.clone(), num(g));
        if g.is_finite() && (best.1.is_nan() || g > best.1) {
            best = (name.clone(), g);
        }
    }
    let singles_error = run.error_alone;
    let mptcp_error = run.error_mptcp;
    let mptcp_goodput = run.mptcp.goodput_mbps;
    let braid_goodput = run.braid.goodput_mbps;
    notes.push(delivery_note(
        &format!("{n} paths, MPTCP run"),
        &mptcp_error,
    ));

    let json = json!({
        "paths": PATHS[..n].iter().map(|p| json!({"name": p.0, "rate_mbps": p.1, "rtt_ms": p.2, "loss": p.3})).collect::<Vec<_>>(),
        "capacity_mbps": capacity,
        "single_path_mbps": per_path,
        "best_single": { "path": best.0, "goodput_mbps": num(best.1) },
        "mptcp": {
            "goodput_mbps": num(mptcp_goodput),
            "retransmits": run.mptcp.retransmits,
            "of_capacity": num(mptcp_goodput / capacity),
        },
        "braid": {
            "settings": braid_settings().label(),
            "goodput_mbps": num(braid_goodput),
            "of_capacity": num(braid_goodput / capacity),
            "unavailable": braid_why,
        },
        "emulator_delivery_error": { "single_paths": singles_error, "mptcp": mptcp_error },
    });
    let row = vec![
        format!("{n} ({})", names.join("+")),
        f(capacity, 1),
        format!("{} ({})", f(best.1, 2), best.0),
        f(mptcp_goodput, 2),
        f(braid_goodput, 2),
        f(braid_goodput / mptcp_goodput, 2),
    ];
    Ok(Case {
        json,
        row,
        braid: braid_goodput,
        mptcp: mptcp_goodput,
        notes,
    })
}

impl Bench for LabBulk {
    fn name(&self) -> &'static str {
        "lab-bulk"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "bulk TCP over 2-4 emulated paths in real kernels: braid vs Linux MPTCP vs the best single path (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Iperf, Need::Mptcp])?;
        let (duration, omit) = if opts.quick { (8, 2) } else { (30, 5) };
        let braid_why = braid_unavailable();
        let mut table = Table::new([
            "paths",
            "capacity Mbit/s",
            "best single Mbit/s",
            "MPTCP Mbit/s",
            "braid Mbit/s",
            "braid / MPTCP",
        ]);
        let mut systems = serde_json::Map::new();
        let mut notes = vec![format!(
            "iperf3 download, Cubic, {duration} s after {omit} s left out; capacity = summed \
             rates x 1448/1500 (TCP payload per IP packet); the single paths run at once, \
             one per path; MPTCP's first subflow is on the path of highest capacity (lte); queues 250 ms; \
             braid: its defaults, capacities learned"
        )];
        if let Some(why) = &braid_why {
            notes.push(format!(
                "braid cannot run in the lab yet ({why}): no braid figures"
            ));
        }
        let mut last = (f64::NAN, f64::NAN);
        for (i, n) in [2, 3, 4].into_iter().enumerate() {
            opts.progress("lab-bulk", i as f64 / 3.0);
            let case = run_case(n, duration, omit, &braid_why)?;
            table.row(case.row);
            systems.insert(format!("{n} paths"), case.json);
            notes.extend(case.notes);
            last = (case.braid, case.mptcp);
        }
        opts.progress("lab-bulk", 1.0);
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: Value::Object(systems),
            headline: Headline::new(
                "braid goodput / Linux MPTCP goodput over 4 paths",
                last.0 / last.1,
                None,
                1.5,
                true,
            ),
            notes,
            table,
        })
    }
}
