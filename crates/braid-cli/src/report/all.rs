//! `braid bench all`: every registered benchmark in turn. Each result is one JSON line
//! (the benchmark's report, or why it failed or was skipped), which `braid report --from`
//! reads back.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use anyhow::Context;
use serde_json::{json, Value};

use crate::progress::ListBar;

/// How `bench all` runs.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub quick: bool,
    pub seed: u64,
    /// Leave out the benchmarks that run in the lab (root, namespaces, real time).
    pub skip_lab: bool,
}

/// What became of one benchmark.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Its report, as `braid bench NAME --json` prints it.
    Ran(Value),
    /// Why it failed.
    Failed(String),
    /// Why it did not run.
    Skipped(String),
}

/// One benchmark's line.
#[derive(Clone, Debug)]
pub struct Entry {
    pub bench: String,
    pub quick: bool,
    pub seed: u64,
    /// Wall-clock seconds it took (0 when skipped).
    pub wall_s: f64,
    pub outcome: Outcome,
    /// The report as `braid bench NAME` prints it, with its table (runs here only).
    pub text: Option<String>,
}

impl Entry {
    /// The JSON line: the report with `wall_s` added, or `bench` with `error` or `skipped`.
    pub fn to_json(&self) -> Value {
        let mut v = match &self.outcome {
            Outcome::Ran(r) => r.clone(),
            Outcome::Failed(e) => json!({ "bench": self.bench, "error": e }),
            Outcome::Skipped(why) => json!({ "bench": self.bench, "skipped": why }),
        };
        if let Some(o) = v.as_object_mut() {
            o.insert("quick".into(), json!(self.quick));
            o.insert("seed".into(), json!(self.seed));
            o.insert("wall_s".into(), json!(self.wall_s));
        }
        v
    }

    /// Reads a line [`Entry::to_json`] wrote (or one `braid bench NAME --json` printed).
    pub fn from_json(v: Value) -> anyhow::Result<Entry> {
        let bench = v["bench"]
            .as_str()
            .context("no \"bench\" field: not a line of `braid bench all --json`")?
            .to_owned();
        let outcome = if let Some(e) = v["error"].as_str() {
            Outcome::Failed(e.to_owned())
        } else if let Some(s) = v["skipped"].as_str() {
            Outcome::Skipped(s.to_owned())
        } else if v["headline"].is_object() {
            Outcome::Ran(v.clone())
        } else {
            anyhow::bail!("benchmark {bench}: neither a report (headline) nor error nor skipped");
        };
        Ok(Entry {
            bench,
            quick: v["quick"].as_bool().unwrap_or(false),
            seed: v["seed"].as_u64().unwrap_or(1),
            wall_s: v["wall_s"].as_f64().unwrap_or(0.0),
            outcome,
            text: None,
        })
    }

    /// The command that reproduces it.
    pub fn command(&self) -> String {
        format!(
            "braid bench {}{} --seed {} --json",
            self.bench,
            if self.quick { " --quick" } else { "" },
            self.seed
        )
    }
}

/// The entries of several saved files (or runs) as one: per benchmark and mode (quick or
/// full) the last entry that ran or failed, else the last skipped one, so that a later
/// file's `skipped` (a run without root) never hides an earlier file's lab result. Entries
/// keep the order in which each (benchmark, mode) first appeared.
pub fn merge(entries: Vec<Entry>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    for e in entries {
        match out
            .iter_mut()
            .find(|o| o.bench == e.bench && o.quick == e.quick)
        {
            None => out.push(e),
            Some(o) => {
                if !matches!(e.outcome, Outcome::Skipped(_))
                    || matches!(o.outcome, Outcome::Skipped(_))
                {
                    *o = e;
                }
            }
        }
    }
    out
}

/// Appends `entry`'s JSON line to `file` (made if missing): what `--save FILE` keeps for
/// `braid report --from FILE`.
pub fn save(file: &std::path::Path, entry: &Entry) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .with_context(|| format!("opening {}", file.display()))?;
    writeln!(f, "{}", entry.to_json()).with_context(|| format!("writing {}", file.display()))
}

/// Reads the lines `bench all --json` wrote; blank lines are skipped.
pub fn parse_lines(text: &str) -> anyhow::Result<Vec<Entry>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l).with_context(|| format!("line {}", i + 1))?;
            Entry::from_json(v).with_context(|| format!("line {}", i + 1))
        })
        .collect()
}

/// Runs every benchmark in the registry's order, calling `each` as each one ends.
pub fn run_all(plan: Plan, each: impl FnMut(&Entry, &ListBar)) -> Vec<Entry> {
    run_list(braid_bench::list(), plan, each)
}

/// Runs the benchmarks of `list` in turn: a failed or panicking one is recorded and the
/// rest still run.
pub fn run_list(
    list: &[&dyn braid_bench::Bench],
    plan: Plan,
    mut each: impl FnMut(&Entry, &ListBar),
) -> Vec<Entry> {
    let bar = ListBar::new(list.len());
    // Whether the lab can run here, asked once and only if a lab benchmark would run.
    let mut lab: Option<Result<(), String>> = None;
    let mut entries = Vec::with_capacity(list.len());
    for (i, b) in list.iter().enumerate() {
        let name = b.name();
        bar.update(i, name, "", 0.0);
        let skip = if !b.needs_root() {
            None
        } else if plan.skip_lab {
            Some("--skip-lab: runs in the lab (root, network namespaces, real time)".to_owned())
        } else {
            lab.get_or_insert_with(|| braid_lab::support::check(&[]).map_err(|e| e.to_string()))
                .clone()
                .err()
        };
        #[expect(
            clippy::disallowed_methods,
            reason = "how long a benchmark took, for the report: the CLI's own wall clock"
        )]
        let start = Instant::now();
        let mut text = None;
        let outcome = match skip {
            Some(why) => Outcome::Skipped(why),
            None => {
                let mut cb = |label: &str, done: f64| bar.update(i, name, label, done);
                let mut opts = braid_bench::Options {
                    quick: plan.quick,
                    seed: plan.seed,
                    trace_offset_s: 0.0,
                    progress: Some(&mut cb),
                };
                // A panic in one benchmark is its failure, not the end of the run.
                match catch_unwind(AssertUnwindSafe(|| b.run(&mut opts))) {
                    Ok(Ok(report)) => match serde_json::to_value(&report) {
                        Ok(v) => {
                            text = Some(crate::report_text(&report));
                            Outcome::Ran(v)
                        }
                        Err(e) => Outcome::Failed(format!("its report is not JSON: {e}")),
                    },
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(p) => Outcome::Failed(format!("panicked: {}", panic_text(&*p))),
                }
            }
        };
        let entry = Entry {
            bench: name.to_owned(),
            quick: plan.quick,
            seed: plan.seed,
            wall_s: if matches!(outcome, Outcome::Skipped(_)) {
                0.0
            } else {
                start.elapsed().as_secs_f64()
            },
            outcome,
            text,
        };
        bar.update(i, name, "", 1.0);
        bar.println(&status_line(&entry));
        each(&entry, &bar);
        entries.push(entry);
    }
    bar.finish();
    entries
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// One line for standard error: the benchmark, what became of it and its headline.
fn status_line(e: &Entry) -> String {
    match &e.outcome {
        Outcome::Ran(r) => format!(
            "{:<18} {:>6.1} s  {}  {:.3} (goal {})",
            e.bench,
            e.wall_s,
            if r["headline"]["met"].as_bool() == Some(true) {
                "met    "
            } else {
                "NOT met"
            },
            r["headline"]["value"].as_f64().unwrap_or(f64::NAN),
            r["headline"]["goal"]
        ),
        Outcome::Failed(err) => format!("{:<18} {:>6.1} s  FAILED: {err}", e.bench, e.wall_s),
        Outcome::Skipped(why) => format!("{:<18}           skipped: {why}", e.bench),
    }
}

/// `braid bench all`: JSON lines or each report's table on standard output, progress on
/// standard error; fails (after running the rest) when any benchmark failed.
pub fn bench_all(plan: Plan, json: bool, save_to: Option<&std::path::Path>) -> anyhow::Result<()> {
    let mut out_err: Option<anyhow::Error> = None;
    let entries = run_all(plan, |entry, bar| {
        if out_err.is_some() {
            return;
        }
        let printed = match (&entry.outcome, json) {
            (_, true) => crate::emit(&(entry.to_json().to_string() + "\n")),
            (_, false) => match &entry.text {
                Some(text) => bar.suspend(|| crate::emit(&(text.clone() + "\n"))),
                None => Ok(()),
            },
        }
        .and_then(|()| save_to.map_or(Ok(()), |f| save(f, entry)));
        if let Err(e) = printed {
            out_err = Some(e);
        }
    });
    if let Some(e) = out_err {
        return Err(e);
    }
    let failed: Vec<&str> = entries
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Failed(_)))
        .map(|e| e.bench.as_str())
        .collect();
    let ran = entries
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Ran(_)))
        .count();
    let skipped = entries.len() - ran - failed.len();
    eprintln!(
        "{ran} ran, {} failed, {skipped} skipped of {} benchmarks",
        failed.len(),
        entries.len()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("{} failed: {}", failed.len(), failed.join(", "))
    }
}

/// A report's headlines: `headlines` where it has several, else `headline`.
pub fn headlines(v: &Value) -> Vec<&Value> {
    match v["headlines"].as_array() {
        Some(hs) if !hs.is_empty() => hs.iter().collect(),
        _ => vec![&v["headline"]],
    }
}

/// A headline in words, as `braid bench` prints it.
pub fn headline_text(h: &Value) -> String {
    let cmp = if h["higher_is_better"].as_bool() == Some(false) {
        "<="
    } else {
        ">="
    };
    let mut s = format!(
        "{}: {:.3}",
        h["metric"].as_str().unwrap_or("?"),
        h["value"].as_f64().unwrap_or(f64::NAN)
    );
    if let Some(p) = h["paper"].as_f64() {
        s += &format!(" (paper {p})");
    }
    if let Some(b) = h["baseline"].as_object() {
        match b.get("value").and_then(Value::as_f64) {
            Some(x) => s += &format!(" ({} {x:.3})", b["system"].as_str().unwrap_or("?")),
            None => s += &format!(" ({} did not run)", b["system"].as_str().unwrap_or("?")),
        }
    }
    s + &format!(
        ", goal {cmp} {}: {}",
        h["goal"],
        if h["met"].as_bool() == Some(true) {
            "met"
        } else {
            "NOT met"
        }
    )
}
