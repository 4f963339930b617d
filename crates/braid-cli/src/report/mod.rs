//! `braid report`: every benchmark's result on one static HTML page that works offline: a
//! headline table (benchmark, paper, goal, braid, met), then per benchmark its plots
//! (inline SVG from plotters), headline, notes and the command that reproduces it.

pub mod all;
mod plot;
pub mod table;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use all::{headline_text, headlines, Entry, Outcome, Plan};
use plot::{Reference, Series};

#[derive(clap::Args)]
pub struct Args {
    /// Folder to write index.html into (made if missing).
    #[arg(long, required_unless_present = "docs")]
    out: Option<PathBuf>,
    /// Rewrite the headline table of this markdown file (docs/benchmarks.md), between its
    /// marker lines, from the same results.
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Read the JSON lines `braid bench all --json` (or `--save`) saved instead of running
    /// the benchmarks. Repeat it to combine files (say, the lab's from a root machine):
    /// per benchmark and mode the last result that ran or failed counts, and a later
    /// `skipped` never hides an earlier result.
    #[arg(long)]
    from: Vec<PathBuf>,
    /// Run the smaller versions (ignored with --from).
    #[arg(long)]
    quick: bool,
    /// Seed of every simulated run (ignored with --from).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Leave out the lab benchmarks (ignored with --from).
    #[arg(long)]
    skip_lab: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let entries = if a.from.is_empty() {
        all::run_all(
            Plan {
                quick: a.quick,
                seed: a.seed,
                skip_lab: a.skip_lab,
            },
            |_, _| {},
        )
    } else {
        let mut lines = Vec::new();
        for file in &a.from {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            lines.extend(
                all::parse_lines(&text).with_context(|| format!("reading {}", file.display()))?,
            );
        }
        all::merge(lines)
    };
    let summary = format!(
        "{} ran, {} failed, {} skipped",
        count(&entries, |o| matches!(o, Outcome::Ran(_))),
        count(&entries, |o| matches!(o, Outcome::Failed(_))),
        count(&entries, |o| matches!(o, Outcome::Skipped(_))),
    );
    if let Some(out) = &a.out {
        let page = write_report(&entries, out)?;
        eprintln!("wrote {}: {summary}", page.display());
    }
    if let Some(doc) = &a.docs {
        let text =
            std::fs::read_to_string(doc).with_context(|| format!("reading {}", doc.display()))?;
        let new = table::splice(&text, &table::markdown(&entries))
            .with_context(|| format!("{}", doc.display()))?;
        std::fs::write(doc, new).with_context(|| format!("writing {}", doc.display()))?;
        eprintln!("wrote the headline table of {}: {summary}", doc.display());
    }
    Ok(())
}

/// Writes `dir/index.html` for `entries` and returns its path.
pub fn write_report(entries: &[Entry], dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let page = dir.join("index.html");
    std::fs::write(&page, render(entries))
        .with_context(|| format!("writing {}", page.display()))?;
    Ok(page)
}

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn num(v: &Value) -> String {
    v.as_f64().map_or_else(|| "—".to_owned(), plot::trim_number)
}

const STYLE: &str = "body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em;\
color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}\
td.n{text-align:right}.met{color:#060}.not{color:#b00}.other{color:#666}\
section{border-top:1px solid #ccc;margin-top:2em}pre{background:#f4f4f4;padding:6px;\
overflow-x:auto}.key{font-size:85%;color:#444}svg{max-width:100%;height:auto;display:block;margin:1em 0}";

/// The whole page.
pub fn render(entries: &[Entry]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>braid benchmarks</title><style>{STYLE}</style></head><body>\n\
         <h1>braid benchmarks</h1>\n<p>{} benchmarks: {} ran, {} failed, {} skipped. \
         Each one compares systems side by side in one run (docs/benchmarks.md).</p>\n",
        entries.len(),
        count(entries, |o| matches!(o, Outcome::Ran(_))),
        count(entries, |o| matches!(o, Outcome::Failed(_))),
        count(entries, |o| matches!(o, Outcome::Skipped(_))),
    );
    h += "<table><tr><th>benchmark</th><th>metric</th><th>paper</th><th>goal</th>\
          <th>braid</th><th>met</th></tr>\n";
    for e in entries {
        let (id, name) = anchor(e, entries);
        match &e.outcome {
            Outcome::Ran(r) => {
                let hl = &r["headline"];
                let cmp = if hl["higher_is_better"].as_bool() == Some(false) {
                    "≤"
                } else {
                    "≥"
                };
                let met = hl["met"].as_bool() == Some(true);
                let _ = writeln!(
                    h,
                    "<tr><td><a href=\"#{id}\">{name}</a></td><td>{}</td><td class=\"n\">{}</td>\
                     <td class=\"n\">{cmp} {}</td><td class=\"n\">{}</td><td class=\"{}\">{}</td></tr>",
                    esc(hl["metric"].as_str().unwrap_or("")),
                    num(&hl["paper"]),
                    num(&hl["goal"]),
                    num(&hl["value"]),
                    if met { "met" } else { "not" },
                    if met { "met" } else { "not met" },
                );
            }
            Outcome::Failed(_) | Outcome::Skipped(_) => {
                let what = if matches!(e.outcome, Outcome::Failed(_)) {
                    "failed"
                } else {
                    "skipped"
                };
                let _ = writeln!(
                    h,
                    "<tr><td><a href=\"#{id}\">{name}</a></td><td colspan=\"4\"></td>\
                     <td class=\"other\">{what}</td></tr>"
                );
            }
        }
    }
    h += "</table>\n";
    for e in entries {
        section(&mut h, e, anchor(e, entries));
    }
    h += "</body></html>\n";
    h
}

fn count(entries: &[Entry], f: impl Fn(&Outcome) -> bool) -> usize {
    entries.iter().filter(|e| f(&e.outcome)).count()
}

/// One benchmark's section: summary, headlines, plots, notes, command.
/// A benchmark's section id and its name as shown: its name, with the mode added where the
/// entries hold it both quick and in full.
fn anchor(e: &Entry, entries: &[Entry]) -> (String, String) {
    let name = esc(&e.bench);
    if entries
        .iter()
        .any(|o| o.bench == e.bench && o.quick != e.quick)
    {
        let mode = if e.quick { "quick" } else { "full" };
        (format!("{name}-{mode}"), format!("{name} ({mode})"))
    } else {
        (name.clone(), name)
    }
}

fn section(h: &mut String, e: &Entry, (id, name): (String, String)) {
    let _ = writeln!(h, "<section id=\"{id}\"><h2>{name}</h2>");
    if let Ok(b) = braid_bench::find(&e.bench) {
        let _ = writeln!(h, "<p>{}</p>", esc(b.summary()));
    }
    match &e.outcome {
        Outcome::Ran(r) => {
            h.push_str("<ul>");
            for hl in headlines(r) {
                let _ = write!(h, "<li>{}</li>", esc(&headline_text(hl)));
            }
            h.push_str("</ul>\n");
            for p in plots(&e.bench, r) {
                match p {
                    Ok(svg) => h.push_str(strip_xml_declaration(&svg)),
                    Err(err) => {
                        let _ = writeln!(
                            h,
                            "<p class=\"other\">no plot: {}</p>",
                            esc(&err.to_string())
                        );
                    }
                }
                h.push('\n');
            }
            let notes = r["notes"].as_array().cloned().unwrap_or_default();
            if !notes.is_empty() {
                h.push_str("<p>Notes:</p><ul>");
                for n in notes {
                    let _ = write!(h, "<li>{}</li>", esc(n.as_str().unwrap_or("")));
                }
                h.push_str("</ul>\n");
            }
        }
        Outcome::Failed(why) => {
            let _ = writeln!(h, "<p class=\"not\">Failed: {}</p>", esc(why));
        }
        Outcome::Skipped(why) => {
            let _ = writeln!(h, "<p class=\"other\">Skipped: {}</p>", esc(why));
        }
    }
    let _ = writeln!(
        h,
        "<p>Reproduce ({:.1} s here):</p><pre>{}</pre></section>",
        e.wall_s,
        esc(&e.command())
    );
}

fn strip_xml_declaration(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

/// The plots of one benchmark: the headline against the paper and the goal, then the
/// paper's own form where this page knows it, else the per-system values it finds.
fn plots(bench: &str, r: &Value) -> Vec<anyhow::Result<String>> {
    let hl = &r["headline"];
    let mut out = vec![headline_plot(bench, hl)];
    let refs = || {
        let mut refs = vec![Reference {
            label: "goal".into(),
            value: hl["goal"].as_f64().unwrap_or(f64::NAN),
        }];
        if let Some(p) = hl["paper"].as_f64() {
            refs.push(Reference {
                label: "paper".into(),
                value: p,
            });
        }
        refs
    };
    let sys = &r["systems"];
    match bench {
        // PRISM Fig 7: aggregation against the number of links, per scheduler.
        "prism-fig7" => out.push(points_plot(
            "fraction of the sum of single-link TCP vs links",
            sys,
            "links",
            "fraction_of_sum",
            "links",
            &refs(),
        )),
        // PRISM Fig 9: goodput against the background's mean burst time, per scheduler.
        "prism-fig9" => out.push(points_plot(
            "goodput (Mbit/s) vs mean burst time of the background traffic (s)",
            sys,
            "burst_s",
            "goodput_mbps",
            "burst time (s)",
            &[],
        )),
        // oSCTP Fig 9: fraction of ideal at each pair of paths, per scheduler.
        "osctp-fig9" => out.push(osctp_fig9(sys, &refs())),
        // Simulated seconds per wall-clock second, per workload, against the goal.
        "sim-speed" => out.push(per_system_bars(sys, "sim_per_wall", &refs()[..1])),
        // PluriBus Fig 8: median FCT per system, the paper's beside ours.
        "pluribus-fig8" => out.push(pluribus_fig8(sys)),
        // PluriBus Fig 9: median FCT against load scale, MinConnPath and PluriBus.
        "pluribus-fig9" => out.push(pluribus_fig9(sys)),
        // PluriBus Fig 14: share of coded packets against load scale.
        "pluribus-fig14" => out.push(pluribus_fig14(sys)),
        _ => {
            if let Some(p) = generic_rows(sys) {
                out.push(p);
            }
            for (key, bars) in flat_numbers(sys).into_iter().take(2) {
                out.push(plot::bars(&format!("systems.{key}"), &key, &bars, &[]));
            }
        }
    }
    out
}

/// Bars of braid's value, the baseline's (where the report has one) and the paper's
/// number, with the goal as a line.
fn headline_plot(bench: &str, hl: &Value) -> anyhow::Result<String> {
    let mut bars = vec![("braid".to_owned(), hl["value"].as_f64().unwrap_or(f64::NAN))];
    if let Some(b) = hl["baseline"].as_object() {
        if let Some(v) = b.get("value").and_then(Value::as_f64) {
            bars.push((b["system"].as_str().unwrap_or("baseline").to_owned(), v));
        }
    }
    if let Some(p) = hl["paper"].as_f64() {
        bars.push(("paper".to_owned(), p));
    }
    let goal = Reference {
        label: "goal".into(),
        value: hl["goal"].as_f64().unwrap_or(f64::NAN),
    };
    let metric = hl["metric"].as_str().unwrap_or("headline");
    plot::bars(
        &format!("{bench}: headline"),
        &short(metric, 48),
        &bars,
        &[goal],
    )
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// Lines from `systems.points`: x from each row's `x_key`, one series per system in the
/// row's `y_key` object.
fn points_plot(
    title: &str,
    sys: &Value,
    x_key: &str,
    y_key: &str,
    x_desc: &str,
    refs: &[Reference],
) -> anyhow::Result<String> {
    let rows = sys["points"].as_array().context("no systems.points")?;
    let series = series_of(rows, y_key, |i, row| {
        row[x_key].as_f64().unwrap_or(i as f64)
    });
    plot::lines(title, x_desc, y_key, &series, None, refs)
}

/// One series per key of each row's `y_key` object, in first-seen order.
fn series_of(rows: &[Value], y_key: &str, x: impl Fn(usize, &Value) -> f64) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let Some(obj) = row[y_key].as_object() else {
            continue;
        };
        for (name, v) in obj {
            let Some(y) = v.as_f64() else { continue };
            push_point(&mut series, name.clone(), (x(i, row), y));
        }
    }
    series
}

fn osctp_fig9(sys: &Value, refs: &[Reference]) -> anyhow::Result<String> {
    let rows = sys["points"].as_array().context("no systems.points")?;
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            // "a 1+0.5M 50ms": the panel, both rates in Mbit/s, path 2's delay.
            let mbit = |v: &Value| {
                v.as_f64()
                    .map_or("?".into(), |k| plot::trim_number(k / 1000.0))
            };
            format!(
                "{} {}+{}M {}ms",
                r["panel"].as_str().unwrap_or("?"),
                mbit(&r["path1_kbps"]),
                mbit(&r["path2_kbps"]),
                num(&r["path2_delay_ms"])
            )
        })
        .collect();
    let series = series_of(rows, "fraction_of_ideal", |i, _| i as f64);
    plot::lines(
        "fraction of ideal per pair of paths (panel, rates, path 2's delay)",
        "paths",
        "fraction of ideal",
        &series,
        Some(&labels),
        refs,
    )
}

/// Bars of one field of each per-system object in `systems`.
fn per_system_bars(sys: &Value, field: &str, refs: &[Reference]) -> anyhow::Result<String> {
    let obj = sys.as_object().context("systems is not an object")?;
    let bars: Vec<(String, f64)> = obj
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v[field].as_f64()?)))
        .collect();
    plot::bars(&format!("{field} per system"), field, &bars, refs)
}

/// The median FCT of a flows report (`flows.fct_ms.median`).
fn median_fct(flows: &Value) -> Option<f64> {
    flows["fct_ms"]["median"].as_f64()
}

fn pluribus_fig8(sys: &Value) -> anyhow::Result<String> {
    let obj = sys.as_object().context("systems is not an object")?;
    let names: Vec<String> = obj.keys().cloned().collect();
    let mut ours = Series {
        name: "braid's simulation".into(),
        points: Vec::new(),
    };
    let mut paper = Series {
        name: "paper".into(),
        points: Vec::new(),
    };
    for (i, v) in obj.values().enumerate() {
        if let Some(y) = median_fct(&v["flows"]) {
            ours.points.push((i as f64, y));
        }
        if let Some(y) = v["paper_median_ms"].as_f64() {
            paper.points.push((i as f64, y));
        }
    }
    plot::lines(
        "median flow completion time per system",
        "system",
        "median FCT, ms",
        &[ours, paper],
        Some(&names),
        &[],
    )
}

fn pluribus_fig9(sys: &Value) -> anyhow::Result<String> {
    let rows = sys["points"].as_array().context("no systems.points")?;
    let mut series = Vec::new();
    for r in rows {
        let Some(x) = r["scale"].as_f64() else {
            continue;
        };
        for (key, name) in [("min_conn_path", "MinConnPath"), ("pluribus", "PluriBus")] {
            if let Some(y) = median_fct(&r[key]) {
                push_point(&mut series, name.to_owned(), (x, y));
            }
        }
    }
    plot::lines(
        "median flow completion time against load scale",
        "load scale",
        "median FCT, ms",
        &series,
        None,
        &[],
    )
}

fn pluribus_fig14(sys: &Value) -> anyhow::Result<String> {
    let rows = sys["points"].as_array().context("no systems.points")?;
    let points = rows
        .iter()
        .filter_map(|r| Some((r["scale"].as_f64()?, r["coded_share"].as_f64()?)))
        .collect();
    plot::lines(
        "share of coded packets against load scale",
        "load scale",
        "coded share",
        &[Series {
            name: "PluriBus".into(),
            points,
        }],
        None,
        &[],
    )
}

/// Names that make a good numeric x axis, in order of preference.
const X_KEYS: [&str; 12] = [
    "links",
    "paths",
    "disparity",
    "scale",
    "load_scale",
    "load",
    "loss",
    "offset",
    "rtt_difference_ms",
    "delay_difference_ms",
    "delay_ms",
    "ms",
];

/// Names that label a categorical x axis, in order of preference.
const LABEL_KEYS: [&str; 5] = ["case", "set", "end_hosts", "panel", "name"];

type Row = serde_json::Map<String, Value>;

/// Rows of a benchmark's figures, each at an x position.
struct Rows<'a> {
    /// Where they were found in `systems`.
    name: String,
    x_desc: String,
    x_key: Option<String>,
    xs: Vec<f64>,
    /// Category names where the x axis is not numeric.
    labels: Option<Vec<String>>,
    /// Where the x axis is numeric and rows fall in groups (panels, kinds of end host):
    /// each row's group, so that a series is drawn per group.
    groups: Option<Vec<String>>,
    rows: Vec<&'a Row>,
}

/// The first table in `systems`: `points`, else another array of objects, else the
/// objects it holds per system (keyed by name).
fn find_rows(sys: &Value) -> Option<Rows<'_>> {
    let obj = sys.as_object()?;
    let arrays = std::iter::once(("points", &sys["points"])).chain(
        obj.iter()
            .filter(|(k, _)| k.as_str() != "points")
            .map(|(k, v)| (k.as_str(), v)),
    );
    for (name, v) in arrays {
        let Some(rows) = v.as_array() else { continue };
        let rows: Vec<&Row> = rows.iter().filter_map(Value::as_object).collect();
        let Some(first) = rows.first() else { continue };
        let x_key = X_KEYS
            .iter()
            .find(|k| first.get(**k).is_some_and(Value::is_number))
            .map(|k| (*k).to_owned());
        let group_key = LABEL_KEYS.iter().copied().find(|k| {
            let mut names = rows
                .iter()
                .filter_map(|r| r.get(*k).and_then(Value::as_str));
            names.next().is_some_and(|a| names.any(|b| b != a))
        });
        let groups = x_key.as_ref().and(group_key).map(|k| {
            rows.iter()
                .map(|r| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned())
                .collect()
        });
        let (xs, labels, x_desc) = match &x_key {
            Some(k) => (
                rows.iter()
                    .map(|r| r[k].as_f64().unwrap_or(f64::NAN))
                    .collect(),
                None,
                k.clone(),
            ),
            None => {
                let label_key = LABEL_KEYS
                    .iter()
                    .find(|k| first.get(**k).is_some_and(Value::is_string))
                    .copied();
                let labels = rows
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        label_key
                            .and_then(|k| r[k].as_str())
                            .map_or_else(|| i.to_string(), str::to_owned)
                    })
                    .collect();
                (
                    (0..rows.len()).map(|i| i as f64).collect(),
                    Some(labels),
                    label_key.unwrap_or("row").to_owned(),
                )
            }
        };
        return Some(Rows {
            name: name.to_owned(),
            x_desc,
            x_key,
            xs,
            labels,
            groups,
            rows,
        });
    }
    // Per-system objects: one row per system, the systems as categories.
    let per: Vec<(&String, &Row)> = obj
        .iter()
        .filter_map(|(k, v)| Some((k, v.as_object()?)))
        .collect();
    (per.len() >= 2).then(|| Rows {
        name: "systems".to_owned(),
        x_desc: "system".to_owned(),
        x_key: None,
        xs: (0..per.len()).map(|i| i as f64).collect(),
        labels: Some(per.iter().map(|(k, _)| (*k).clone()).collect()),
        groups: None,
        rows: per.into_iter().map(|(_, r)| r).collect(),
    })
}

/// Series from rows: a per-system object of numbers in each row; else the numeric fields
/// that differ only in their prefix (`braid_mbps`, `best_single_mbps`); else every numeric
/// field, when there are few.
fn row_series(t: &Rows<'_>) -> Option<(String, Vec<Series>)> {
    let first = t.rows.first()?;
    let at = |i: usize| t.xs[i];
    if let Some((key, _)) = first.iter().find(|(_, v)| {
        v.as_object()
            .is_some_and(|o| !o.is_empty() && o.values().all(Value::is_number))
    }) {
        let mut series = Vec::new();
        for (i, r) in t.rows.iter().enumerate() {
            for (name, v) in r.get(key).and_then(Value::as_object).into_iter().flatten() {
                if let Some(y) = v.as_f64() {
                    push_point(&mut series, group_name(t, i, name), (at(i), y));
                }
            }
        }
        return Some((key.clone(), series));
    }
    let fields: Vec<&String> = first
        .iter()
        .filter(|(k, v)| v.is_number() && Some(*k) != t.x_key.as_ref())
        .map(|(k, _)| k)
        .collect();
    // The suffix shared by the most fields (the longest among equals).
    let mut best: Option<(&str, Vec<(&String, &str)>)> = None;
    for f in &fields {
        for (i, _) in f.match_indices('_') {
            let suffix = &f[i..];
            let members: Vec<(&String, &str)> = fields
                .iter()
                .filter(|g| g.ends_with(suffix) && g.len() > suffix.len())
                .map(|g| (*g, &g[..g.len() - suffix.len()]))
                .collect();
            let better = match &best {
                None => members.len() >= 2,
                Some((s, m)) => {
                    members.len() > m.len() || (members.len() == m.len() && suffix.len() > s.len())
                }
            };
            if better {
                best = Some((suffix, members));
            }
        }
    }
    let (y_desc, picked): (String, Vec<(&String, String)>) = match best {
        Some((suffix, members)) => (
            suffix.trim_start_matches('_').to_owned(),
            members
                .into_iter()
                .map(|(f, p)| (f, p.to_owned()))
                .collect(),
        ),
        None if (1..=6).contains(&fields.len()) => (
            "value".to_owned(),
            fields.iter().map(|f| (*f, (*f).clone())).collect(),
        ),
        None => return None,
    };
    let mut series = Vec::new();
    for (field, name) in picked {
        for (i, r) in t.rows.iter().enumerate() {
            if let Some(y) = r.get(field).and_then(Value::as_f64) {
                push_point(&mut series, group_name(t, i, &name), (at(i), y));
            }
        }
    }
    Some((y_desc, series))
}

/// A series' name, with row `i`'s group where the rows have groups.
fn group_name(t: &Rows<'_>, i: usize, name: &str) -> String {
    match &t.groups {
        Some(g) => format!("{name} ({})", g[i]),
        None => name.to_owned(),
    }
}

/// Adds `p` to the series called `name`, made if new (series keep first-seen order).
fn push_point(series: &mut Vec<Series>, name: String, p: (f64, f64)) {
    match series.iter_mut().find(|s| s.name == name) {
        Some(s) => s.points.push(p),
        None => series.push(Series {
            name,
            points: vec![p],
        }),
    }
}

/// A line per series found in the first table of `systems`; where its categories are
/// numbered, a key to them follows the plot.
fn generic_rows(sys: &Value) -> Option<anyhow::Result<String>> {
    let t = find_rows(sys)?;
    let (y_desc, series) = row_series(&t)?;
    let key = match &t.labels {
        Some(names) if names.len() > plot::MAX_NAMED => {
            let items: Vec<String> = names
                .iter()
                .enumerate()
                .map(|(i, n)| format!("{} {}", i + 1, esc(n)))
                .collect();
            format!(
                "<p class=\"key\">{}: {}</p>",
                esc(&t.x_desc),
                items.join(", ")
            )
        }
        _ => String::new(),
    };
    let plot = plot::lines(
        &if t.name == "systems" {
            y_desc.clone()
        } else {
            format!("{}: {y_desc}", t.name)
        },
        &t.x_desc,
        &y_desc,
        &series,
        t.labels.as_deref(),
        &[],
    );
    Some(plot.map(|svg| svg + &key))
}

/// Objects of two or more flat numbers keyed by system (one key is braid's), in `systems`
/// or one level down, as bars.
fn flat_numbers(sys: &Value) -> Vec<(String, Vec<(String, f64)>)> {
    let bars = |o: &Row| -> Option<Vec<(String, f64)>> {
        (o.len() >= 2
            && o.values().all(Value::is_number)
            && o.keys().any(|k| k.starts_with("braid")))
        .then(|| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                .collect()
        })
    };
    let Some(obj) = sys.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(b) = bars(obj) {
        out.push(("(all)".to_owned(), b));
    }
    for (k, v) in obj {
        if let Some(b) = v.as_object().and_then(bars) {
            out.push((k.clone(), b));
        }
    }
    out
}

#[cfg(test)]
mod tests;
