//! `lab-failover`: one of two emulated paths is blackholed (both ways, for good) during a
//! bulk download and a stream of short web flows: how long until the download's goodput
//! recovers, and whether any connection was reset, for Linux MPTCP and braid's defaults.
//! Headline: braid's recovery time.

use braid_lab::accuracy::TCP_PAYLOAD;
use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::experiment::{self, Failover, RECOVERY_HOLD_MS, RECOVERY_WINDOW_MS};
use braid_lab::support::Need;
use braid_lab::{Lab, System};
use braid_sim::host::WebConfig;
use serde_json::{json, Value};

use crate::common::f;
use crate::lab_common::{braid_unavailable, delivery_error, delivery_note, num, path, ready};
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct LabFailover;

/// The path that fails (MPTCP's first subflow is on it) and the one that survives.
const FAILING: (&str, f64, f64) = ("a", 10.0, 40.0);
const SURVIVING: (&str, f64, f64) = ("b", 10.0, 60.0);

fn row(label: &str, r: &Failover) -> Vec<String> {
    vec![
        label.to_owned(),
        f(r.before_mbps, 1),
        r.recovery_ms
            .map_or_else(|| "never".to_owned(), |ms| f(ms, 0)),
        f(r.longest_stall_ms, 0),
        if r.bulk_reset { "yes" } else { "no" }.to_owned(),
        format!("{}/{}", r.web.completed, r.web.started),
        (r.web.resets + r.web.failed).to_string(),
    ]
}

impl Bench for LabFailover {
    fn name(&self) -> &'static str {
        "lab-failover"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn summary(&self) -> &'static str {
        "one of two emulated paths blackholed under load: recovery time and resets, MPTCP vs braid (root)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        ready(&[Need::Mptcp])?;
        let (duration, fail_at) = if opts.quick {
            (12.0, 5.0)
        } else {
            (30.0, 10.0)
        };
        let surviving = SURVIVING.1 * TCP_PAYLOAD / 1500.0;
        let web = WebConfig {
            scale: 10.0,
            ..WebConfig::default()
        };
        let paths = [
            path(FAILING.0, FAILING.1, FAILING.2, 0.0),
            path(SURVIVING.0, SURVIVING.1, SURVIVING.2, 0.0),
        ];
        let mut lab = Lab::build(&paths, opts.seed)?;
        let braid_why = braid_unavailable();
        let mut table = Table::new([
            "system",
            "before Mbit/s",
            "recovery ms",
            "longest stall ms",
            "bulk reset",
            "short flows done",
            "short reset/failed",
        ]);
        let mut systems = serde_json::Map::new();
        let mut notes =
            vec![format!(
            "paths {} ({} Mbit/s, {} ms RTT) and {} ({} Mbit/s, {} ms RTT); {} blackholed both \
             ways at {fail_at} s of {duration} s; an HTTP download without end and web flows \
             (scale {}) meanwhile; recovery = from the failure to the first non-empty {} ms \
             bin from which every {RECOVERY_WINDOW_MS} ms window starting within \
             {RECOVERY_HOLD_MS} ms has at least half of {}'s TCP capacity ({surviving:.2} \
             Mbit/s)",
            FAILING.0, FAILING.1, FAILING.2, SURVIVING.0, SURVIVING.1, SURVIVING.2, FAILING.0,
            web.scale, experiment::BIN_MS, SURVIVING.0
        )];
        let seed = opts.seed;
        let run = |lab: &mut Lab, system: &System| {
            experiment::failover(lab, system, 0, fail_at, duration, surviving, &web, seed)
        };

        opts.progress("lab-failover", 0.0);
        match lab.mptcp_unavailable() {
            Some(why) => notes.push(format!("Linux MPTCP unavailable: {why}")),
            None => {
                let system = lab.mptcp();
                let r = run(&mut lab, &system)?;
                table.row(row("Linux MPTCP", &r));
                notes.push(delivery_note("MPTCP", &delivery_error(&lab)));
                systems.insert("Linux MPTCP".into(), json!(r));
            }
        }
        opts.progress("lab-failover", 0.5);
        let mut headline = f64::NAN;
        let mut reset = false;
        // braid's goodput before the failure; a bond slower than the surviving path alone
        // loses little when a path fails, so its recovery time shows no failover.
        let mut before = f64::NAN;
        match &braid_why {
            Some(why) => {
                notes.push(format!(
                    "braid cannot run in the lab yet ({why}): no braid figures"
                ));
                systems.insert("braid".into(), json!({ "unavailable": why }));
            }
            None => {
                // braid as a user runs it: an empty [engine], capacities learned.
                let settings = BraidSettings::default();
                let _tunnel = BraidTunnel::start_with(&lab, &settings)?;
                let r = run(&mut lab, &System::Braid(settings.label()))?;
                let label = format!("braid ({})", settings.label());
                table.row(row(&label, &r));
                headline = r.recovery_ms.unwrap_or(f64::INFINITY);
                reset = r.bulk_reset || r.web.resets > 0;
                before = r.before_mbps;
                systems.insert(label, json!(r));
            }
        }
        opts.progress("lab-failover", 1.0);
        if reset {
            notes.push("braid: a connection was reset, so the goal is not met".into());
        }
        let mut h = Headline::new(
            "braid recovery time after a path failure (ms)",
            headline,
            None,
            300.0,
            false,
        );
        h.met &= !reset;
        if before < surviving {
            notes.push(format!(
                "braid carried {} Mbit/s before the failure, less than path b alone ({} Mbit/s): \
                 a bond that slow loses little when a path fails, so the goal is not met",
                f(before, 1),
                f(surviving, 2)
            ));
            h.met = false;
        }
        systems.insert("settings".into(), json!({ "duration_s": duration, "fail_at_s": fail_at, "surviving_tcp_mbps": num(surviving) }));
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: Value::Object(systems),
            headline: h,
            notes,
            table,
        })
    }
}
