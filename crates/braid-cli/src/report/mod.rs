//! `braid report`: every benchmark's result on one static HTML page that works offline: a
//! headline table (benchmark, paper, goal, braid, met), then per benchmark its plots
//! (inline SVG from plotters), headline, notes and the command that reproduces it.

pub mod all;
mod plot;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use all::{headline_text, headlines, Entry, Outcome, Plan};
use plot::{Reference, Series};

#[derive(clap::Args)]
pub struct Args {
    /// Folder to write index.html into (made if missing).
    #[arg(long)]
    out: PathBuf,
    /// Read the JSON lines `braid bench all --json` saved instead of running the benchmarks.
    #[arg(long)]
    from: Option<PathBuf>,
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
    let entries = match &a.from {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            all::parse_lines(&text).with_context(|| format!("reading {}", file.display()))?
        }
        None => all::run_all(
            Plan {
                quick: a.quick,
                seed: a.seed,
                skip_lab: a.skip_lab,
            },
            |_, _| {},
        ),
    };
    let page = write_report(&entries, &a.out)?;
    eprintln!("wrote {}", page.display());
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
overflow-x:auto}svg{max-width:100%;height:auto;display:block;margin:1em 0}";

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
        let name = esc(&e.bench);
        match &e.outcome {
            Outcome::Ran(r) => {
                let hl = headlines(r)[0];
                let cmp = if hl["higher_is_better"].as_bool() == Some(false) {
                    "≤"
                } else {
                    "≥"
                };
                let met = hl["met"].as_bool() == Some(true);
                let _ = writeln!(
                    h,
                    "<tr><td><a href=\"#{name}\">{name}</a></td><td>{}</td><td class=\"n\">{}</td>\
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
                    "<tr><td><a href=\"#{name}\">{name}</a></td><td colspan=\"4\"></td>\
                     <td class=\"other\">{what}</td></tr>"
                );
            }
        }
    }
    h += "</table>\n";
    for e in entries {
        section(&mut h, e);
    }
    h += "</body></html>\n";
    h
}

fn count(entries: &[Entry], f: impl Fn(&Outcome) -> bool) -> usize {
    entries.iter().filter(|e| f(&e.outcome)).count()
}

/// One benchmark's section: summary, headlines, plots, notes, command.
fn section(h: &mut String, e: &Entry) {
    let name = esc(&e.bench);
    let _ = writeln!(h, "<section id=\"{name}\"><h2>{name}</h2>");
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
    let hl = headlines(r)[0];
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
        // oSCTP Fig 9: fraction of ideal at each pair of paths, per scheduler.
        "osctp-fig9" => out.push(osctp_fig9(sys, &refs())),
        _ => {
            if let Some(p) = generic_points(sys) {
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
            let p = (x(i, row), y);
            match series.iter_mut().find(|s| &s.name == name) {
                Some(s) => s.points.push(p),
                None => series.push(Series {
                    name: name.clone(),
                    points: vec![p],
                }),
            }
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

/// Names that make a good x axis, in order of preference.
const X_KEYS: [&str; 10] = [
    "links",
    "paths",
    "disparity",
    "load_scale",
    "load",
    "loss",
    "offset",
    "rtt_difference_ms",
    "delay_ms",
    "ms",
];

/// Where `systems.points` rows hold an object of per-system numbers: a line per system.
fn generic_points(sys: &Value) -> Option<anyhow::Result<String>> {
    let rows = sys["points"].as_array()?;
    let first = rows.first()?.as_object()?;
    let y_key = first
        .iter()
        .find(|(_, v)| {
            v.as_object()
                .is_some_and(|o| o.values().all(Value::is_number))
        })
        .map(|(k, _)| k.clone())?;
    let x_key = X_KEYS
        .iter()
        .find(|k| first.get(**k).is_some_and(Value::is_number))
        .copied();
    let series = series_of(rows, &y_key, |i, row| {
        x_key.and_then(|k| row[k].as_f64()).unwrap_or(i as f64)
    });
    Some(plot::lines(
        &format!("{y_key} per system"),
        x_key.unwrap_or("point"),
        &y_key,
        &series,
        None,
        &[],
    ))
}

/// Objects of two or more flat numbers in `systems` (itself or one level down), as bars.
fn flat_numbers(sys: &Value) -> Vec<(String, Vec<(String, f64)>)> {
    let bars = |o: &serde_json::Map<String, Value>| -> Option<Vec<(String, f64)>> {
        (o.len() >= 2 && o.values().all(Value::is_number)).then(|| {
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
