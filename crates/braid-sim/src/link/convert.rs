//! Conversion of recorded throughput logs into mahimahi traces (`braid trace convert`).
//!
//! Every supported format is read into consecutive intervals of known length and byte
//! count, then turned into delivery opportunities: each interval's bytes are spread evenly
//! over it, and the k-th 1500-byte opportunity of the whole trace falls at the first
//! millisecond by which k × 1500 bytes have arrived. The fraction of a packet left at the end
//! of an interval carries into the next, so the output's mean rate equals the input's to
//! within one packet over the whole trace. A mahimahi input is kept as it is (an excerpt or
//! a scaling only drops or repeats its opportunities), so converting it with no options is
//! the identity. The formats and their quirks are those of the shared trace collection's
//! README; docs/traces.md describes the command.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::config::{LinkConfigError, MTU_BYTES};
use super::trace::{read_trace_text, Trace};

/// Bytes of one delivery opportunity.
const PACKET_BYTES: f64 = MTU_BYTES as f64;

/// A per-second sample is one second long.
const SECOND_MS: u64 = 1000;

/// An input format `braid trace convert` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One millisecond timestamp per 1500-byte delivery opportunity.
    Mahimahi,
    /// Norway HSDPA and Ghent 4G logs: `time ms_counter lat lon bytes ms_since_previous`.
    SixColumn,
    /// NYU-METS: `value,unit` per second (unit bits/sec, Kbits/sec or Mbits/sec), or the
    /// multivariate rows whose first of 8 columns is Mbit/s.
    NyuMets,
    /// UCC 5G G-NetTrack export: a header, one row per second, `DL_bitrate` in kbit/s.
    Ucc5g,
    /// 5Gophers: a header, one row per second, `*throughput_mbps` columns.
    FiveGophers,
    /// Multipath-wireless: `time_s,bytes_per_second`, one row per second.
    MultipathWireless,
}

impl Format {
    pub const ALL: [Format; 6] = [
        Format::Mahimahi,
        Format::SixColumn,
        Format::NyuMets,
        Format::Ucc5g,
        Format::FiveGophers,
        Format::MultipathWireless,
    ];

    /// The name used by `--format`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Mahimahi => "mahimahi",
            Format::SixColumn => "six-column",
            Format::NyuMets => "nyu-mets",
            Format::Ucc5g => "ucc-5g",
            Format::FiveGophers => "5gophers",
            Format::MultipathWireless => "multipath-wireless",
        }
    }

    /// The format named `name` (as printed by [`Format::name`]).
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    fn names() -> String {
        Format::ALL.map(Format::name).join(", ")
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to convert and how: the options of `braid trace convert`.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The input format; `None` detects it from the content.
    pub format: Option<Format>,
    /// The column holding the rate (UCC 5G: default `DL_bitrate`; 5Gophers: needed when the
    /// file has several `*throughput_mbps` columns).
    pub column: Option<String>,
    /// Skip this many seconds of the input.
    pub start_s: f64,
    /// Keep this many seconds after `start_s`; `None` keeps the rest.
    pub duration_s: Option<f64>,
    /// Multiply every rate by this factor.
    pub scale: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            format: None,
            column: None,
            start_s: 0.0,
            duration_s: None,
            scale: 1.0,
        }
    }
}

/// A finished conversion: the mahimahi opportunities and what went into them.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversion {
    /// The input format (given or detected).
    pub format: Format,
    /// The column read, for formats with several.
    pub column: Option<String>,
    /// Delivery opportunity times, ms: non-decreasing, the last one = the duration.
    pub opportunities_ms: Vec<u64>,
    /// Length of the converted part of the input, ms.
    pub duration_ms: u64,
    /// Mean rate of the converted part of the input before scaling, bit/s.
    pub input_mean_bps: f64,
    /// Things the reader did that a user should know (lines skipped, gaps closed up).
    pub notes: Vec<String>,
}

impl Conversion {
    /// Mean rate of the output: opportunities × 1500 bytes over the duration, bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * PACKET_BYTES * 8.0 * 1e3 / self.duration_ms as f64
    }

    /// The output in mahimahi's text form: one timestamp per line.
    pub fn to_mahimahi(&self) -> String {
        let mut s = String::with_capacity(self.opportunities_ms.len() * 8);
        for ms in &self.opportunities_ms {
            s.push_str(&ms.to_string());
            s.push('\n');
        }
        s
    }
}

/// Why a conversion failed. Each message names the file (and line) at fault and what was
/// expected there.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("cannot read `{}`: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("`{}`, line {line}: {problem}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    #[error("`{}`: {problem}", path.display())]
    File { path: PathBuf, problem: String },
    #[error("{0}")]
    Option(String),
}

/// Reads `path` (gunzipped when its name ends in `.gz`) and converts it.
pub fn convert_file(path: &Path, opts: &Options) -> Result<Conversion, ConvertError> {
    let text = match read_trace_text(path) {
        Ok((_, text)) => text,
        Err(LinkConfigError::TraceIo { path, error }) => {
            return Err(ConvertError::Io { path, error });
        }
        Err(e) => {
            return Err(ConvertError::File {
                path: path.to_owned(),
                problem: e.to_string(),
            })
        }
    };
    convert(path, &text, opts)
}

/// Converts `text`, the content of `path` (which only names the file in errors).
pub fn convert(path: &Path, text: &str, opts: &Options) -> Result<Conversion, ConvertError> {
    check_options(opts)?;
    let format = match opts.format {
        Some(f) => f,
        None => detect(path, text)?,
    };
    if opts.column.is_some() && !matches!(format, Format::Ucc5g | Format::FiveGophers) {
        return Err(ConvertError::Option(format!(
            "--column applies only to ucc-5g and 5gophers files, not to {format}"
        )));
    }
    let mut notes = Vec::new();
    let (intervals, column) = match format {
        Format::Mahimahi => return convert_mahimahi(path, text, opts),
        Format::SixColumn => (parse_six_column(path, text)?, None),
        Format::NyuMets => (parse_nyu_mets(path, text, &mut notes)?, None),
        Format::Ucc5g => {
            let (iv, col) = parse_ucc_5g(path, text, opts.column.as_deref(), &mut notes)?;
            (iv, Some(col))
        }
        Format::FiveGophers => {
            let (iv, col) = parse_5gophers(path, text, opts.column.as_deref(), &mut notes)?;
            (iv, Some(col))
        }
        Format::MultipathWireless => (parse_multipath(path, text, &mut notes)?, None),
    };
    let total_ms: u64 = intervals.iter().map(|i| i.ms).sum();
    if total_ms == 0 {
        return Err(file_error(path, "no samples found"));
    }
    let (start_ms, end_ms) = window(opts, total_ms)?;
    let intervals = cut(&intervals, start_ms, end_ms);
    let duration_ms = end_ms - start_ms;
    let bytes: f64 = intervals.iter().map(|i| i.bytes).sum();
    let opportunities_ms = spread(&intervals, opts.scale);
    let opportunities_ms = close_period(opportunities_ms, duration_ms).ok_or_else(|| {
        file_error(
            path,
            &format!(
                "the converted part ({} s at {:.3} Mbit/s, scaled by {}) holds less than one \
                 1500-byte packet",
                duration_ms as f64 / 1e3,
                bytes * 8.0 / duration_ms as f64 / 1e3,
                opts.scale
            ),
        )
    })?;
    Ok(Conversion {
        format,
        column,
        opportunities_ms,
        duration_ms,
        input_mean_bps: bytes * 8.0 * 1e3 / duration_ms as f64,
        notes,
    })
}

/// Guesses the format from the first lines of `text`; an error when no format fits or the
/// first data lines disagree.
pub fn detect(path: &Path, text: &str) -> Result<Format, ConvertError> {
    let mut found: Option<(Format, usize)> = None;
    let mut looked = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let Some(f) = classify(line) else {
            if found.is_some() {
                // A malformed line after recognised ones: the parser names what is wrong.
                break;
            }
            return Err(ConvertError::Line {
                path: path.to_owned(),
                line: i + 1,
                problem: format!(
                    "cannot tell the format from `{}`; name it with --format ({})",
                    shorten(line),
                    Format::names()
                ),
            });
        };
        // A header settles the format; so do three data lines that agree.
        if found.is_none() && is_header(line) {
            return Ok(f);
        }
        match found {
            Some((g, at)) if g != f => {
                return Err(ConvertError::Line {
                    path: path.to_owned(),
                    line: i + 1,
                    problem: format!(
                        "looks like {f}, but line {at} looks like {g}; name the format with \
                         --format"
                    ),
                })
            }
            Some(_) => {}
            None => found = Some((f, i + 1)),
        }
        looked += 1;
        if looked == 3 {
            break;
        }
    }
    found
        .map(|(f, _)| f)
        .ok_or_else(|| file_error(path, "the file is empty"))
}

/// Whether `line` is a header row (of UCC 5G, 5Gophers or NYU-METS's ferry files).
fn is_header(line: &str) -> bool {
    line.split(',')
        .next()
        .is_some_and(|f| f.trim().parse::<f64>().is_err())
        && line.contains(',')
}

/// The format one line belongs to, if any.
fn classify(line: &str) -> Option<Format> {
    let lower = line.to_ascii_lowercase();
    if lower.starts_with("timestamp,") && lower.contains("bitrate") {
        return Some(Format::Ucc5g);
    }
    if lower.contains("throughput_mbps") {
        return Some(Format::FiveGophers);
    }
    if lower.starts_with("value,unit") {
        return Some(Format::NyuMets);
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() == 1 && !line.contains(',') && line.parse::<u64>().is_ok() {
        return Some(Format::Mahimahi);
    }
    if words.len() == 6 && words.iter().all(|w| w.parse::<f64>().is_ok()) {
        return Some(Format::SixColumn);
    }
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    if fields.len() >= 2 && fields[0].parse::<f64>().is_ok() && unit_bps(fields[1]).is_some() {
        return Some(Format::NyuMets);
    }
    let numeric = fields.iter().all(|f| f.parse::<f64>().is_ok());
    if numeric && fields.len() == 8 {
        return Some(Format::NyuMets);
    }
    if numeric && fields.len() == 2 && fields[0].parse::<u64>().is_ok() {
        return Some(Format::MultipathWireless);
    }
    None
}

/// A stretch of the input: `ms` long, carrying `bytes` spread evenly over it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Interval {
    ms: u64,
    bytes: f64,
}

impl Interval {
    fn second(bytes: f64) -> Interval {
        Interval {
            ms: SECOND_MS,
            bytes,
        }
    }
}

fn check_options(opts: &Options) -> Result<(), ConvertError> {
    if !(opts.start_s.is_finite() && opts.start_s >= 0.0) {
        return Err(ConvertError::Option(format!(
            "--start is {}, expected a number of seconds >= 0",
            opts.start_s
        )));
    }
    if let Some(d) = opts.duration_s {
        if !(d.is_finite() && d > 0.0) {
            return Err(ConvertError::Option(format!(
                "--duration is {d}, expected a number of seconds > 0"
            )));
        }
    }
    if !(opts.scale.is_finite() && opts.scale > 0.0) {
        return Err(ConvertError::Option(format!(
            "--scale is {}, expected a factor > 0",
            opts.scale
        )));
    }
    Ok(())
}

/// The kept part `[start, end)` of an input `total_ms` long, in ms.
fn window(opts: &Options, total_ms: u64) -> Result<(u64, u64), ConvertError> {
    let start_ms = (opts.start_s * 1e3).round() as u64;
    if start_ms >= total_ms {
        return Err(ConvertError::Option(format!(
            "--start {} s is at or past the end of the input ({} s long)",
            opts.start_s,
            total_ms as f64 / 1e3
        )));
    }
    let end_ms = match opts.duration_s {
        None => total_ms,
        Some(d) => {
            let end = start_ms + ((d * 1e3).round() as u64).max(1);
            if end > total_ms {
                return Err(ConvertError::Option(format!(
                    "--start {} s with --duration {d} s ends past the end of the input ({} s \
                     long); shorten --duration or leave it out to keep the rest",
                    opts.start_s,
                    total_ms as f64 / 1e3
                )));
            }
            end
        }
    };
    Ok((start_ms, end_ms))
}

/// The intervals covering `[start_ms, end_ms)`, the two at the edges cut to it (keeping the
/// share of their bytes that falls inside, since bytes are spread evenly).
fn cut(intervals: &[Interval], start_ms: u64, end_ms: u64) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut t = 0;
    for iv in intervals {
        let (a, b) = (t, t + iv.ms);
        t = b;
        let (lo, hi) = (a.max(start_ms), b.min(end_ms));
        if lo >= hi {
            continue;
        }
        let share = (hi - lo) as f64 / iv.ms as f64;
        out.push(Interval {
            ms: hi - lo,
            bytes: iv.bytes * share,
        });
    }
    out
}

/// Places the opportunities: the k-th at the first whole millisecond by which the intervals,
/// each spreading its bytes evenly, have carried k × 1500 bytes.
fn spread(intervals: &[Interval], scale: f64) -> Vec<u64> {
    // Slack for float error in the running sums, far below one byte.
    const EPS: f64 = 1e-6;
    let mut out = Vec::new();
    let mut t0 = 0u64;
    let mut carried = 0.0; // bytes delivered before the current interval
    let mut next = PACKET_BYTES; // byte count at which the next opportunity falls
    for iv in intervals {
        let bytes = iv.bytes * scale;
        if bytes > 0.0 {
            while carried + bytes >= next - EPS {
                let frac = ((next - carried) / bytes).clamp(0.0, 1.0);
                let t = t0 as f64 + frac * iv.ms as f64;
                let ms = ((t - EPS).ceil().max(t0 as f64) as u64).min(t0 + iv.ms);
                out.push(ms);
                next += PACKET_BYTES;
            }
        }
        carried += bytes;
        t0 += iv.ms;
    }
    out
}

/// mahimahi loops a trace with period = its last timestamp, so the last opportunity is moved
/// to the end of the trace when the input ended in a lull. `None` when there is none at all.
fn close_period(mut ops: Vec<u64>, duration_ms: u64) -> Option<Vec<u64>> {
    let last = ops.last_mut()?;
    *last = duration_ms;
    Some(ops)
}

/// A mahimahi input: keeps the opportunities from start to start + duration (both ends
/// included, shifted to begin at 0), each repeated `scale` times on average with the
/// fraction carried over.
fn convert_mahimahi(path: &Path, text: &str, opts: &Options) -> Result<Conversion, ConvertError> {
    let trace = Trace::parse(path, text).map_err(|e| match e {
        LinkConfigError::TraceFormat {
            path,
            line,
            problem,
        } => ConvertError::Line {
            path,
            line,
            problem,
        },
        other => file_error(path, &other.to_string()),
    })?;
    let period = trace.period_ms();
    let (start_ms, end_ms) = window(opts, period)?;
    let kept: Vec<u64> = trace
        .opportunities_ms()
        .iter()
        .filter(|&&t| t >= start_ms && t <= end_ms)
        .map(|&t| t - start_ms)
        .collect();
    let duration_ms = end_ms - start_ms;
    let input_mean_bps = kept.len() as f64 * PACKET_BYTES * 8.0 * 1e3 / duration_ms as f64;
    let mut out = Vec::with_capacity((kept.len() as f64 * opts.scale) as usize + 1);
    let mut owed = 0.0;
    for &t in &kept {
        owed += opts.scale;
        // Slack for float error in the running sum.
        while owed >= 1.0 - 1e-9 {
            out.push(t);
            owed -= 1.0;
        }
    }
    let opportunities_ms = close_period(out, duration_ms).ok_or_else(|| {
        file_error(
            path,
            "the converted part holds less than one delivery opportunity",
        )
    })?;
    Ok(Conversion {
        format: Format::Mahimahi,
        column: None,
        opportunities_ms,
        duration_ms,
        input_mean_bps,
        notes: Vec::new(),
    })
}

/// Norway HSDPA / Ghent 4G: `time ms_counter lat lon bytes ms_since_previous`; a sample's
/// bytes arrived over the `ms_since_previous` before it. Time comes from column 6 summed,
/// since column 2 jumps and resets in some Norway logs.
fn parse_six_column(path: &Path, text: &str) -> Result<Vec<Interval>, ConvertError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let err = |problem: String| line_error(path, i + 1, problem);
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() != 6 {
            return Err(err(format!(
                "{} fields in `{}`; expected 6: time ms_counter latitude longitude bytes \
                 ms_since_previous",
                words.len(),
                shorten(line)
            )));
        }
        let bytes: u64 = words[4].parse().map_err(|_| {
            err(format!(
                "bytes (column 5) `{}` is not a non-negative integer",
                words[4]
            ))
        })?;
        let ms: u64 = words[5].parse().map_err(|_| {
            err(format!(
                "interval (column 6) `{}` is not a non-negative integer of ms",
                words[5]
            ))
        })?;
        if ms == 0 {
            return Err(err(
                "interval (column 6) is 0 ms; a sample must cover some time".into(),
            ));
        }
        out.push(Interval {
            ms,
            bytes: bytes as f64,
        });
    }
    Ok(out)
}

/// A throughput unit of NYU-METS (iperf's) in bits per second.
fn unit_bps(unit: &str) -> Option<f64> {
    match unit {
        "bits/sec" => Some(1.0),
        "Kbits/sec" => Some(1e3),
        "Mbits/sec" => Some(1e6),
        "Gbits/sec" => Some(1e9),
        _ => None,
    }
}

/// NYU-METS: one second per `value,unit` line (extra empty fields allowed); lines without a
/// number (the `Value,Unit` header, iperf's reconnect messages, `,`) are skipped and counted.
/// Multivariate rows (8 numeric columns) give Mbit/s in the first.
fn parse_nyu_mets(
    path: &Path,
    text: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<Interval>, ConvertError> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let err = |problem: String| line_error(path, i + 1, problem);
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let value = fields[0].parse::<f64>();
        let unit = fields.get(1).and_then(|u| unit_bps(u));
        let bps = match (value, unit) {
            (Ok(v), Some(u)) => v * u,
            (Ok(v), None)
                if fields.len() == 8 && fields.iter().all(|f| f.parse::<f64>().is_ok()) =>
            {
                v * 1e6
            }
            (Ok(_), None) => {
                return Err(err(format!(
                    "`{}`: a number without a known unit; expected `value,unit` with unit \
                     bits/sec, Kbits/sec or Mbits/sec (or a multivariate row of 8 numbers)",
                    shorten(line)
                )))
            }
            (Err(_), Some(_)) => {
                return Err(err(format!(
                    "`{}` is not a number (the rate before the unit)",
                    fields[0]
                )))
            }
            (Err(_), None) => {
                skipped.push(i + 1);
                continue;
            }
        };
        if !(bps.is_finite() && bps >= 0.0) {
            return Err(err(format!(
                "rate `{}` is negative or not finite",
                fields[0]
            )));
        }
        out.push(Interval::second(bps / 8.0));
    }
    if !skipped.is_empty() {
        notes.push(format!(
            "skipped {} line(s) holding no sample (header or iperf messages): line(s) {}",
            skipped.len(),
            list_lines(&skipped)
        ));
    }
    Ok(out)
}

/// UCC 5G (G-NetTrack): a header, then one row per second; `column` (default `DL_bitrate`)
/// in kbit/s. Rows are taken as consecutive seconds: the logger's timestamps step by 0 to 4
/// s around one second each, so they are only checked not to go back.
fn parse_ucc_5g(
    path: &Path,
    text: &str,
    column: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<(Vec<Interval>, String), ConvertError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hi, header)) = lines.next() else {
        return Err(file_error(path, "the file is empty"));
    };
    let names: Vec<&str> = header.trim().split(',').map(str::trim).collect();
    let want = column.unwrap_or("DL_bitrate");
    let find = |n: &str| names.iter().position(|c| c.eq_ignore_ascii_case(n));
    let Some(ts_col) = find("Timestamp") else {
        return Err(line_error(
            path,
            hi + 1,
            "no `Timestamp` column in the header".into(),
        ));
    };
    let col = match find(want) {
        Some(c) if names[c].to_ascii_lowercase().ends_with("_bitrate") => c,
        _ => {
            let rates: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| n.to_ascii_lowercase().ends_with("_bitrate"))
                .collect();
            return Err(line_error(
                path,
                hi + 1,
                format!(
                    "no bitrate column `{want}` in the header; --column may be one of: {}",
                    rates.join(", ")
                ),
            ));
        }
    };
    let mut out = Vec::new();
    let mut prev: Option<i64> = None;
    let mut first: Option<i64> = None;
    let mut longest_step = 0;
    for (i, raw) in lines {
        let err = |problem: String| line_error(path, i + 1, problem);
        let fields: Vec<&str> = raw.trim().split(',').map(str::trim).collect();
        if fields.len() != names.len() {
            return Err(err(format!(
                "{} fields, but the header has {}",
                fields.len(),
                names.len()
            )));
        }
        let t = ucc_timestamp_s(fields[ts_col]).ok_or_else(|| {
            err(format!(
                "timestamp `{}` is not YYYY.MM.DD_hh.mm.ss",
                fields[ts_col]
            ))
        })?;
        if let Some(p) = prev {
            if t < p {
                return Err(err(format!(
                    "timestamp `{}` is earlier than the row before",
                    fields[ts_col]
                )));
            }
            longest_step = longest_step.max(t - p);
        }
        prev = Some(t);
        first.get_or_insert(t);
        let v = fields[col];
        let kbps: f64 = v.parse().map_err(|_| {
            err(format!(
                "{} `{v}` is not a number of kbit/s{}",
                names[col],
                if v == "-" { " (`-`: not logged)" } else { "" }
            ))
        })?;
        if !(kbps.is_finite() && kbps >= 0.0) {
            return Err(err(format!(
                "{} `{v}` is negative or not finite",
                names[col]
            )));
        }
        out.push(Interval::second(kbps * 1e3 / 8.0));
    }
    if let (Some(a), Some(b)) = (first, prev) {
        notes.push(format!(
            "{} rows taken as {} consecutive seconds; their timestamps span {} s (largest \
             step {} s)",
            out.len(),
            out.len(),
            b - a + 1,
            longest_step
        ));
    }
    Ok((out, names[col].to_owned()))
}

/// Seconds since 1970 of a G-NetTrack timestamp `YYYY.MM.DD_hh.mm.ss`.
fn ucc_timestamp_s(s: &str) -> Option<i64> {
    let (date, time) = s.split_once('_')?;
    let d: Vec<i64> = date
        .split('.')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i64> = time
        .split('.')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let (&[y, m, day], &[h, mi, sec]) = (d.as_slice(), t.as_slice()) else {
        return None;
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from civil (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec)
}

/// 5Gophers: a header, then one row per second; the rate (Mbit/s) in `column` or the one
/// `*throughput_mbps` column. Seconds missing from `seq_num` are closed up and reported.
fn parse_5gophers(
    path: &Path,
    text: &str,
    column: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<(Vec<Interval>, String), ConvertError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hi, header)) = lines.next() else {
        return Err(file_error(path, "the file is empty"));
    };
    let names: Vec<&str> = header.trim().split(',').map(str::trim).collect();
    let rates: Vec<usize> = (0..names.len())
        .filter(|&c| names[c].to_ascii_lowercase().ends_with("throughput_mbps"))
        .collect();
    let choices = || {
        rates
            .iter()
            .map(|&c| names[c])
            .collect::<Vec<_>>()
            .join(", ")
    };
    let col = match column {
        Some(want) => {
            let w = want.to_ascii_lowercase();
            rates.iter().copied().find(|&c| {
                let n = names[c].to_ascii_lowercase();
                n == w || n == format!("{w}_throughput_mbps")
            })
        }
        None if rates.len() == 1 => Some(rates[0]),
        None => None,
    };
    let Some(col) = col else {
        let problem = match (column, rates.len()) {
            (_, 0) => "no `*throughput_mbps` column in the header".to_owned(),
            (Some(w), _) => format!("no column `{w}`; --column may be one of: {}", choices()),
            (None, _) => format!(
                "several rate columns; pick one with --column ({}; a carrier name such as \
                 `Verizon` also works)",
                choices()
            ),
        };
        return Err(line_error(path, hi + 1, problem));
    };
    let seq_col = names.iter().position(|n| n.eq_ignore_ascii_case("seq_num"));
    let mut out = Vec::new();
    let mut prev_seq: Option<i64> = None;
    let mut gaps = Vec::new();
    for (i, raw) in lines {
        let err = |problem: String| line_error(path, i + 1, problem);
        let fields: Vec<&str> = raw.trim().split(',').map(str::trim).collect();
        let Some(v) = fields.get(col) else {
            return Err(err(format!(
                "{} fields, but the header puts {} in field {}",
                fields.len(),
                names[col],
                col + 1
            )));
        };
        if let Some(sc) = seq_col {
            let s = fields.get(sc).copied().unwrap_or("");
            let seq: i64 = s
                .parse()
                .map_err(|_| err(format!("seq_num `{s}` is not an integer")))?;
            if let Some(p) = prev_seq {
                if seq <= p {
                    return Err(err(format!(
                        "seq_num goes from {p} back to {seq}: the file holds several runs; \
                         convert a file of one run"
                    )));
                }
                if seq > p + 1 {
                    gaps.push(format!("{}..{}", p + 1, seq - 1));
                }
            }
            prev_seq = Some(seq);
        }
        let mbps: f64 = v
            .parse()
            .map_err(|_| err(format!("{} `{v}` is not a number of Mbit/s", names[col])))?;
        if !(mbps.is_finite() && mbps >= 0.0) {
            return Err(err(format!(
                "{} `{v}` is negative or not finite",
                names[col]
            )));
        }
        out.push(Interval::second(mbps * 1e6 / 8.0));
    }
    if !gaps.is_empty() {
        notes.push(format!(
            "seconds missing from seq_num closed up (not filled): {}",
            gaps.join(", ")
        ));
    }
    Ok((out, names[col].to_owned()))
}

/// Multipath-wireless: `time_s,bytes_per_second`, one row per second; seconds missing from
/// the time column are closed up and reported.
fn parse_multipath(
    path: &Path,
    text: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<Interval>, ConvertError> {
    let mut out = Vec::new();
    let mut prev: Option<u64> = None;
    let mut gaps = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let err = |problem: String| line_error(path, i + 1, problem);
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [t, b] = fields[..] else {
            return Err(err(format!(
                "`{}`: expected `time_s,bytes_per_second`",
                shorten(line)
            )));
        };
        let t: u64 = t
            .parse()
            .map_err(|_| err(format!("time `{t}` is not a whole number of seconds")))?;
        let bytes: f64 = b
            .parse()
            .map_err(|_| err(format!("bytes per second `{b}` is not a number")))?;
        if !(bytes.is_finite() && bytes >= 0.0) {
            return Err(err(format!(
                "bytes per second `{b}` is negative or not finite"
            )));
        }
        if let Some(p) = prev {
            if t <= p {
                return Err(err(format!(
                    "time {t} s does not follow the previous row's {p} s"
                )));
            }
            if t > p + 1 {
                gaps.push(format!("{}..{}", p + 1, t - 1));
            }
        }
        prev = Some(t);
        out.push(Interval::second(bytes));
    }
    if !gaps.is_empty() {
        notes.push(format!(
            "seconds missing from the time column closed up (not filled): {}",
            gaps.join(", ")
        ));
    }
    Ok(out)
}

/// Writes `text` to `path`, gzip-compressed when the name ends in `.gz` (deterministic: no
/// time or name in the gzip header).
pub fn write_trace_file(path: &Path, text: &str) -> Result<(), ConvertError> {
    let io = |error| ConvertError::Io {
        path: path.to_owned(),
        error,
    };
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut enc = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::best());
        enc.write_all(text.as_bytes()).map_err(io)?;
        enc.finish().map_err(io)?
    } else {
        text.as_bytes().to_vec()
    };
    std::fs::write(path, bytes).map_err(io)
}

fn line_error(path: &Path, line: usize, problem: String) -> ConvertError {
    ConvertError::Line {
        path: path.to_owned(),
        line,
        problem,
    }
}

fn file_error(path: &Path, problem: &str) -> ConvertError {
    ConvertError::File {
        path: path.to_owned(),
        problem: problem.to_owned(),
    }
}

/// A line cut to a length fit for an error message.
fn shorten(line: &str) -> String {
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_owned(),
    }
}

/// Line numbers for a note, the first ten then a count.
fn list_lines(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(10).map(usize::to_string).collect();
    match lines.len() {
        n if n > 10 => format!("{} and {} more", shown.join(", "), n - 10),
        _ => shown.join(", "),
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
