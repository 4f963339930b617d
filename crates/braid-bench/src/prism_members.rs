//! `prism-fig6c`: PRISM's community (§3.3, Figure 6c) in the simulator: one TCP transfer
//! striped over members' WWAN links while members leave and join. M-I (360 kbit/s, 300 ms
//! RTT) and M-II (1080 kbit/s, 100 ms, 0.6% loss) from the start; M-II leaves at 40 s;
//! M-III (1800 kbit/s, 100 ms) joins at 60 s; 90 s in all. The members' paths leave and
//! join the live session (`Session::remove_path` / `add_path`, braid-core
//! `session/membership.rs`), as relays do for the daemons.
//!
//! Systems: braid's defaults; vanilla TCP striping (PRISM's baseline: ADAS striping,
//! packets delivered as they arrive, `reordering = "none"`); PRISM's Reverse Path
//! Controller over ADAS (`reordering = "rpc"`, unmodified TCP). Headline: braid's
//! goodput over vanilla striping's in 0-40 s (paper 4.1x, "310% more"); the 60-90 s ratio
//! (paper 3.08x) beside it.

use std::time::Duration;

use braid_core::{Config, Reordering, SchedulerKind};
use braid_sim::link::{LinkConfig, LossConfig};
use braid_sim::membership_world::{run_membership, Change, LentPath, MembershipRun};
use serde_json::json;

use crate::common::{f, BRAID_DEFAULTS};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct PrismFig6c;

/// A member's link both ways: kbit/s, RTT ms, loss.
fn member(id: u8, kbps: f64, rtt_ms: f64, loss: f64) -> LentPath {
    let l = LinkConfig {
        rate_kbps: Some(kbps),
        delay_ms: rtt_ms / 2.0,
        loss: (loss > 0.0).then_some(LossConfig::Bernoulli { p: loss }),
        ..LinkConfig::default()
    };
    LentPath {
        id,
        // Each member lends its own link.
        lender: Some(0x100 + u32::from(id)),
        up: l.clone(),
        down: l,
    }
}

/// The compared systems: name and engine configuration.
fn systems() -> [(&'static str, Config); 3] {
    let adas = |reordering| Config {
        scheduler: SchedulerKind::Adas,
        reordering,
        ..Config::default()
    };
    [
        (BRAID_DEFAULTS, Config::default()),
        ("vanilla-striping", adas(Reordering::None)),
        ("rpc", adas(Reordering::Rpc)),
    ]
}

const SECS: f64 = 90.0;
const LEAVE_S: f64 = 40.0;
const JOIN_S: f64 = 60.0;

/// Mean goodput, Mbit/s, over [a, b) seconds of a series of bytes per 100 ms.
fn mbps(series: &[usize], a: f64, b: f64) -> f64 {
    let (i, j) = ((a * 10.0) as usize, (b * 10.0) as usize);
    let bytes: usize = series
        .get(i..j.min(series.len()))
        .unwrap_or(&[])
        .iter()
        .sum();
    bytes as f64 * 8.0 / (b - a) / 1e6
}

impl Bench for PrismFig6c {
    fn name(&self) -> &'static str {
        "prism-fig6c"
    }

    fn summary(&self) -> &'static str {
        "one TCP striped over community members' links while one leaves and another joins: braid vs vanilla striping vs RPC"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let seed = opts.seed;
        let run_of = |config: Config| MembershipRun {
            paths: vec![
                member(0, 360.0, 300.0, 0.0),
                member(1, 1080.0, 100.0, 0.006),
            ],
            changes: vec![
                (Duration::from_secs_f64(LEAVE_S), Change::Leave(1)),
                (
                    Duration::from_secs_f64(JOIN_S),
                    Change::Join(Box::new(member(2, 1800.0, 100.0, 0.0))),
                ),
            ],
            // More than 90 s of the links can carry: the transfer runs throughout.
            file_bytes: 40_000_000,
            duration: Duration::from_secs_f64(SECS),
            seed,
            config,
        };
        let mut table = Table::new([
            "system",
            "0-40 s Mbit/s",
            "40-60 s Mbit/s",
            "60-90 s Mbit/s",
            "hash intact",
        ]);
        let mut out = serde_json::Map::new();
        let mut windows = Vec::new();
        let all = systems();
        for (k, (name, config)) in all.iter().enumerate() {
            opts.progress("prism-fig6c", k as f64 / all.len() as f64);
            let o = run_membership(&run_of(config.clone()))
                .map_err(|e| BenchError::Other(e.to_string()))?;
            let w = [
                mbps(&o.goodput_series, 0.0, LEAVE_S),
                mbps(&o.goodput_series, LEAVE_S, JOIN_S),
                mbps(&o.goodput_series, JOIN_S, SECS),
            ];
            // The bytes read so far must be the file's first bytes: hash what arrived.
            let intact = o.received_bytes > 0 && o.received_prefix_intact;
            table.row([
                name.to_string(),
                f(w[0], 3),
                f(w[1], 3),
                f(w[2], 3),
                intact.to_string(),
            ]);
            out.insert(
                name.to_string(),
                json!({
                    "mbps_0_40": w[0],
                    "mbps_40_60": w[1],
                    "mbps_60_90": w[2],
                    "received_bytes": o.received_bytes,
                    "intact": intact,
                    "failover_resent": o.failover_resent,
                    "failover_left": o.failover_left,
                }),
            );
            windows.push(w);
        }
        opts.progress("prism-fig6c", 1.0);
        let (braid, vanilla, rpc) = (windows[0], windows[1], windows[2]);
        let early = braid[0] / vanilla[0];
        let late = braid[2] / vanilla[2];
        out.insert(
            "ratios".into(),
            json!({
                "braid_over_vanilla_0_40": early,
                "braid_over_vanilla_60_90": late,
                "rpc_over_vanilla_0_40": rpc[0] / vanilla[0],
                "rpc_over_vanilla_60_90": rpc[2] / vanilla[2],
            }),
        );
        // The members' summed rates in each window, and braid's share of them.
        let aggregate = [1.44, 0.36, 2.16];
        out.insert(
            "aggregate_mbps".into(),
            json!({"0_40": aggregate[0], "40_60": aggregate[1], "60_90": aggregate[2]}),
        );
        out.insert(
            "braid_of_aggregate".into(),
            json!({
                "0_40": braid[0] / aggregate[0],
                "40_60": braid[1] / aggregate[1],
                "60_90": braid[2] / aggregate[2],
            }),
        );
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: vec![Headline::new(
                "braid goodput / vanilla TCP striping, 60-90 s (M-III joined)",
                late,
                Some(3.08),
                3.08,
                true,
            )],
            systems: serde_json::Value::Object(out),
            headline: Headline::new(
                "braid goodput / vanilla TCP striping, 0-40 s (M-I + M-II)",
                early,
                Some(4.1),
                4.1,
                true,
            ),
            notes: vec![format!(
                "M-I 360 kbit/s 300 ms RTT; M-II 1080 kbit/s 100 ms 0.6% loss, leaves at \
                 {LEAVE_S} s; M-III 1800 kbit/s 100 ms joins at {JOIN_S} s; one simulated \
                 Linux TCP (Cubic, SACK) upload for {SECS} s; each member's path leaves and \
                 joins the live session; the same run with --quick"
            )],
            table,
        })
    }
}
