//! The two links of oSCTP's hybrid-access drives (§V), rebuilt from a recorded trace, for
//! `osctp-table1`, `osctp-fig15` and `osctp-fig16`.
//!
//! The cheap link (the paper's WiFi): the repository's `TMobile-UMTS-driving` downlink
//! (a recorded drive, 2.0 Mbit/s on average, bursts near 3 Mbit/s: the paper's "close to
//! 3 Mbps" when in coverage) turned off about 40% of the time ("zero WiFi throughput for
//! about 40% of times", §V-A) by coverage gaps of 3 to 17 s between stretches of 5 to 25 s,
//! drawn from the seed. The metered link (the paper's 3G): 700 kbit/s ("approximately
//! 700 kbps if only 3G link used", Table I). 20 and 60 ms one way. A bulk TCP download.

use std::path::PathBuf;

use braid_sim::link::convert::{convert_file, Options as ConvertOptions};
use braid_sim::{Report, Scenario};

use crate::common::scenario;
use crate::BenchError;

/// The recorded drive the cheap link replays.
pub const CHEAP_TRACE: &str = "TMobile-UMTS-driving.down";
/// The metered link's rate, kbit/s.
pub const METERED_KBPS: f64 = 700.0;
/// Price of the metered link per GB: any positive price; only the target matters to
/// Strategy 1's log utility.
pub const COST_PER_GB: f64 = 10.0;

/// Virtual seconds of one run.
pub fn duration_s(quick: bool) -> f64 {
    if quick {
        300.0
    } else {
        900.0
    }
}

/// The cheap link's coverage gaps over `duration_s`, (start, length) in seconds, drawn
/// from `seed` (a xorshift, so that the gaps are known outside the simulator).
pub fn gaps(seed: u64, duration_s: f64) -> Vec<(f64, f64)> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut uniform = |lo: f64, hi: f64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lo + (hi - lo) * ((x >> 11) as f64 / (1u64 << 53) as f64)
    };
    let mut out = Vec::new();
    let mut t = uniform(5.0, 25.0).round();
    while t < duration_s {
        let len = uniform(3.0, 17.0).round();
        out.push((t, len));
        t += len + uniform(5.0, 25.0).round();
    }
    out
}

fn trace_path() -> PathBuf {
    crate::trace_sets::traces_dir().join(CHEAP_TRACE)
}

/// The two paths as scenario TOML; `metered_keys` go in the metered path's table.
fn paths(seed: u64, duration_s: f64, metered_keys: &str) -> String {
    let blackouts: Vec<String> = gaps(seed, duration_s)
        .iter()
        .map(|(s, d)| format!("{{ start_s = {s}, duration_s = {d} }}"))
        .collect();
    let blackouts = blackouts.join(", ");
    let trace = trace_path().display().to_string();
    let cheap = format!("{{ trace = \"{trace}\", delay_ms = 20, blackouts = [{blackouts}] }}");
    // The way up (the download's acknowledgements) shares the coverage gaps.
    let fast_up = format!("{{ rate_mbps = 2, delay_ms = 20, blackouts = [{blackouts}] }}");
    let metered = format!("{{ rate_kbps = {METERED_KBPS}, delay_ms = 60 }}");
    format!(
        "[[path]]\nname = \"cheap\"\nup = {fast_up}\ndown = {cheap}\n\
         [[path]]\nname = \"metered\"\nup = {metered}\ndown = {metered}\n{metered_keys}\n"
    )
}

/// A bulk download over both links; `target_mbps`: Strategy 1 towards that target with
/// the metered link metered, `None`: striping alone. Every interval is logged.
pub fn both_links(
    name: &str,
    seed: u64,
    quick: bool,
    target_mbps: Option<f64>,
) -> Result<Scenario, BenchError> {
    let d = duration_s(quick);
    let (engine, keys) = match target_mbps {
        Some(t) => (
            format!("[engine.metering]\ntarget_mbps = {t}\nrecord_intervals = true\n"),
            format!("metered = true\ncost_per_gb = {COST_PER_GB}\n"),
        ),
        None => (
            "[engine.metering]\nrecord_intervals = true\n".to_owned(),
            String::new(),
        ),
    };
    scenario(
        name,
        d,
        seed,
        &engine,
        &paths(seed, d, &keys),
        "[[workload]]\nkind = \"bulk\"\nsample_ms = 1000\n",
    )
}

/// A bulk download over one link alone, without braid (`direct`): what the link gives TCP.
pub fn one_link(name: &str, seed: u64, quick: bool, link: &str) -> Result<Scenario, BenchError> {
    let d = duration_s(quick);
    scenario(
        name,
        d,
        seed,
        &format!("direct = \"{link}\""),
        &paths(seed, d, ""),
        "[[workload]]\nkind = \"bulk\"\nsample_ms = 1000\n",
    )
}

/// The cheap link's capacity in each whole second, bytes (the trace's delivery
/// opportunities of 1500 bytes, looped, none in a coverage gap): what a hindsight oracle
/// knows in advance.
pub fn cheap_capacity_bytes(seed: u64, quick: bool) -> Result<Vec<f64>, BenchError> {
    let d = duration_s(quick);
    let c = convert_file(&trace_path(), &ConvertOptions::default())
        .map_err(|e| BenchError::Other(format!("{CHEAP_TRACE}: {e}")))?;
    let n = d as usize;
    let mut bytes = vec![0.0; n];
    let period = c.duration_ms.max(1);
    let mut base = 0;
    'outer: loop {
        for &t in &c.opportunities_ms {
            let at = base + t.saturating_sub(1);
            let k = (at / 1000) as usize;
            if k >= n {
                break 'outer;
            }
            bytes[k] += 1500.0;
        }
        base += period;
    }
    for (s, len) in gaps(seed, d) {
        for (k, b) in bytes.iter_mut().enumerate() {
            let (a, e) = (k as f64, k as f64 + 1.0);
            let dark = (e.min(s + len) - a.max(s)).max(0.0);
            *b *= 1.0 - dark;
        }
    }
    Ok(bytes)
}

/// One interval of a run, both links: the server's log (it sends the download).
#[derive(Clone, Copy, Debug, Default)]
pub struct Second {
    pub cheap_delivered: f64,
    pub cheap_predicted_bps: f64,
    pub metered_sent: f64,
    pub metered_delivered: f64,
    pub metered_budget: f64,
}

/// The server's per-interval log, one entry per whole second.
pub fn seconds(r: &Report) -> Vec<Second> {
    let n = r.duration_s as usize;
    let mut out = vec![Second::default(); n];
    for i in &r.server_intervals {
        let Some(s) = out.get_mut(i.start_s.round() as usize) else {
            continue;
        };
        if i.metered {
            s.metered_sent += i.sent_bytes as f64;
            s.metered_delivered += i.delivered_bytes as f64;
            s.metered_budget += i.budget_bytes as f64;
        } else if i.path == 0 {
            s.cheap_delivered += i.delivered_bytes as f64;
            s.cheap_predicted_bps += i.predicted_bps;
        } else {
            // Striping alone: the second path is the one a model would meter.
            s.metered_sent += i.sent_bytes as f64;
            s.metered_delivered += i.delivered_bytes as f64;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gaps_take_about_forty_percent() {
        let d = 3000.0;
        let dark: f64 = gaps(1, d).iter().map(|g| g.1).sum();
        let share = dark / d;
        assert!((0.3..0.5).contains(&share), "{share}");
        assert_eq!(gaps(1, d), gaps(1, d));
    }
}
