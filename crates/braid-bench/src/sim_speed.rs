//! `sim-speed`: how much faster than real time the simulator runs, so that every paper
//! figure fits in CI. Two workloads over two paths (10 and 5 Mbit/s, 20 and 80 ms one way):
//! UDP offered above the summed capacity, and 8 concurrent bulk TCP flows, both through
//! braid. The figure is virtual seconds simulated per wall-clock second.

use std::path::Path;

use braid_sim::{Scenario, TraceCache};
use serde_json::json;

use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct SimSpeed;

const PATHS: &str = r#"
[[path]]
name = "fast"
up = { rate_mbps = 10, delay_ms = 20 }
down = { rate_mbps = 10, delay_ms = 20 }

[[path]]
name = "slow"
up = { rate_mbps = 5, delay_ms = 80 }
down = { rate_mbps = 5, delay_ms = 80 }
"#;

fn scenario(
    name: &str,
    duration_s: f64,
    seed: u64,
    workload: &str,
) -> Result<Scenario, BenchError> {
    let text =
        format!("name = \"{name}\"\nduration_s = {duration_s}\nseed = {seed}\n{PATHS}\n{workload}");
    Ok(Scenario::parse(
        &text,
        name,
        Path::new("."),
        &mut TraceCache::new(),
    )?)
}

impl Bench for SimSpeed {
    fn name(&self) -> &'static str {
        "sim-speed"
    }

    fn summary(&self) -> &'static str {
        "simulated seconds per wall-clock second: saturating UDP, and 8 bulk TCP flows, over two paths"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let duration = if opts.quick { 10.0 } else { 60.0 };
        let cases = [
            (
                "udp-saturated",
                "[[workload]]\nkind = \"udp-cbr\"\ndirection = \"down\"\nrate_mbps = 16\n",
            ),
            (
                "tcp-8-flows",
                "[[workload]]\nkind = \"bulk\"\ndirection = \"down\"\nflows = 8\n",
            ),
        ];
        let mut systems = serde_json::Map::new();
        let mut table = Table::new([
            "workload",
            "virtual s",
            "wall s",
            "sim/wall",
            "events",
            "goodput Mbit/s",
        ]);
        let mut worst = f64::INFINITY;
        for (name, workload) in cases {
            let sc = scenario(name, duration, opts.seed, workload)?;
            let mut traces = TraceCache::new();
            let mut cb = |done: f64| opts.progress(name, done);
            let (report, wall) = timed(|| braid_sim::run(&sc, &mut traces, Some(&mut cb)))?;
            let ratio = report.virtual_s / wall.max(1e-9);
            worst = worst.min(ratio);
            let goodput: f64 = report
                .workloads
                .iter()
                .map(crate::summary::goodput_mbps)
                .sum();
            table.row([
                name.to_owned(),
                format!("{:.1}", report.virtual_s),
                format!("{wall:.2}"),
                format!("{ratio:.0}"),
                report.events.to_string(),
                format!("{goodput:.2}"),
            ]);
            systems.insert(
                name.to_owned(),
                json!({
                    "virtual_s": report.virtual_s,
                    "wall_s": wall,
                    "sim_per_wall": ratio,
                    "events": report.events,
                    "events_per_wall_s": report.events as f64 / wall.max(1e-9),
                    "goodput_mbps": goodput,
                }),
            );
        }
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: serde_json::Value::Object(systems),
            headline: Headline::new(
                "simulated seconds per wall-clock second, worst of the two workloads",
                worst,
                None,
                // Every figure and development loop runs on the simulator: 300x lets the
                // full runs of every paper figure fit in CI on 2 cores.
                300.0,
                true,
            ),
            notes: vec![
                "wall-clock figure: depends on the machine; the goal is set for 2 cores".to_owned(),
            ],
            table,
        })
    }
}

/// Runs `f` and measures its wall-clock seconds.
#[expect(
    clippy::disallowed_methods,
    reason = "a speed benchmark measures wall-clock time; it never feeds the engine"
)]
fn timed<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<(T, f64), E> {
    let start = std::time::Instant::now();
    let v = f()?;
    Ok((v, start.elapsed().as_secs_f64()))
}
