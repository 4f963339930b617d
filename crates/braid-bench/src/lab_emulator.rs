//! `lab-emulator`: how faithful the lab's link emulator is. One path at 10 and at
//! 100 Mbit/s with a 50 ms RTT, measured from outside (ping's RTT and iperf3's TCP goodput
//! against what the link model gives) and from inside (the emulator's delivery error:
//! how late each frame left compared to the model's delivery time).

use braid_lab::accuracy;
use braid_lab::support::Need;
use serde_json::json;

use crate::common::f;
use crate::lab_common::ready;
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabEmulator;

impl Bench for LabEmulator {
    fn name(&self) -> &'static str {
        "lab-emulator"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "the lab's link emulator at 10 and 100 Mbit/s: ping and iperf3 vs the model, delivery error (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Iperf, Need::Ping])?;
        let (pings, seconds) = if opts.quick { (20, 5) } else { (100, 20) };
        let mut table = Table::new([
            "rate Mbit/s",
            "ping median ms (model)",
            "goodput Mbit/s (model)",
            "delivery error p50/p99/max µs",
            "within 100 µs",
        ]);
        let mut systems = serde_json::Map::new();
        let mut worst: f64 = 0.0;
        for (i, rate) in [10.0, 100.0].into_iter().enumerate() {
            opts.progress("lab-emulator", i as f64 / 2.0);
            let a = accuracy::measure(rate, 50.0, pings, seconds)?;
            worst = worst.max(a.rtt_error.abs()).max(a.goodput_error.abs());
            let d = &a.delivery_error;
            table.row([
                f(rate, 0),
                format!("{} ({})", f(a.ping.median_ms, 2), f(a.expected_rtt_ms, 2)),
                format!(
                    "{} ({})",
                    f(a.goodput_mbps, 2),
                    f(a.expected_goodput_mbps, 2)
                ),
                format!("{}/{}/{}", d.p50_us, d.p99_us, d.max_us),
                format!("{:.1}%", d.within_100us * 100.0),
            ]);
            systems.insert(format!("{rate} Mbit/s"), json!(a));
        }
        opts.progress("lab-emulator", 1.0);
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: serde_json::Value::Object(systems),
            headline: Headline::new(
                "largest relative error of ping RTT or iperf3 goodput against the link model",
                worst,
                None,
                0.03,
                false,
            ),
            notes: vec![
                format!(
                    "one path, 50 ms RTT, {pings} pings then {seconds} s of iperf3 (Cubic) after 2 s \
                     left out; model goodput = rate x 1448/1500 (TCP payload per IP packet)"
                ),
                "delivery error: how late frames left the emulator compared to the model's \
                 delivery time, both directions; quantiles are bin edges (10 µs below 1 ms, 1 ms \
                 above); the machine is shared, so the tail measures CPU contention too"
                    .into(),
            ],
            table,
        })
    }
}
