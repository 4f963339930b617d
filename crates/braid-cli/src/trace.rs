//! `braid trace convert`: recorded throughput logs to mahimahi traces (docs/traces.md). The
//! parsing and conversion live in `braid_sim::link::convert`.

use std::path::PathBuf;

use anyhow::Context;
use braid_sim::link::convert::{self, Format, Options};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Convert a recorded throughput log into a mahimahi trace.
    ///
    /// Reads mahimahi, Norway/Ghent 6-column logs, NYU-METS, UCC 5G, 5Gophers and
    /// multipath-wireless files and writes one millisecond timestamp per 1500-byte delivery
    /// opportunity: each sample's bytes spread evenly over its interval, the rounding
    /// carried over so the mean rate is kept. A mahimahi input with no options comes out
    /// unchanged. Prints notes about the input and the output's duration and mean rate on
    /// standard error. Details: docs/traces.md.
    Convert(ConvertArgs),
}

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The file to convert (read gunzipped when its name ends in `.gz`).
    input: PathBuf,
    /// Where to write the mahimahi trace; a name ending in `.gz` is written gzip-compressed
    /// (the simulator and the lab read it transparently).
    #[arg(short, long)]
    output: PathBuf,
    /// The input's format: auto, mahimahi, six-column (Norway, Ghent), nyu-mets, ucc-5g,
    /// 5gophers or multipath-wireless; `auto` tells it from the content and stops with an
    /// error when unsure.
    #[arg(long, default_value = "auto", value_parser = parse_format)]
    format: FormatArg,
    /// The column holding the rate: for ucc-5g `DL_bitrate` (the default) or `UL_bitrate`;
    /// for 5gophers a `*_throughput_mbps` column or its carrier (`Verizon`), needed when
    /// the file records several carriers.
    #[arg(long)]
    column: Option<String>,
    /// Skip this many seconds of the input (an excerpt).
    #[arg(long, default_value_t = 0.0, value_name = "S")]
    start: f64,
    /// Keep this many seconds from --start on (an error if the input is shorter); the rest
    /// of the input by default.
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Multiply every rate by F (e.g. 0.1 to bring a 300 Mbit/s 5G trace within what the
    /// simulator runs quickly).
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    scale: f64,
}

/// `--format`: a format name or `auto`.
#[derive(Clone, Copy)]
struct FormatArg(Option<Format>);

fn parse_format(s: &str) -> Result<FormatArg, String> {
    if s == "auto" {
        return Ok(FormatArg(None));
    }
    Format::from_name(s)
        .map(|f| FormatArg(Some(f)))
        .ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown format; expected auto, {}", names.join(", "))
        })
}

pub fn run(c: Command) -> anyhow::Result<()> {
    match c {
        Command::Convert(a) => convert_cmd(a),
    }
}

fn convert_cmd(a: ConvertArgs) -> anyhow::Result<()> {
    if a.input == a.output {
        anyhow::bail!(
            "the output `{}` is the input; write the trace elsewhere",
            a.output.display()
        );
    }
    let opts = Options {
        format: a.format.0,
        column: a.column,
        start_s: a.start,
        duration_s: a.duration,
        scale: a.scale,
    };
    let c = convert::convert_file(&a.input, &opts)?;
    convert::write_trace_file(&a.output, &c.to_mahimahi())
        .with_context(|| format!("writing {}", a.output.display()))?;
    for n in &c.notes {
        eprintln!("note: {n}");
    }
    eprintln!(
        "{}: {}{} -> {} opportunities, {:.1} s, mean {:.3} Mbit/s (input {:.3} Mbit/s)",
        a.output.display(),
        c.format,
        c.column
            .as_ref()
            .map(|col| format!(" column {col}"))
            .unwrap_or_default(),
        c.opportunities_ms.len(),
        c.duration_ms as f64 / 1e3,
        c.mean_rate_bps() / 1e6,
        c.input_mean_bps / 1e6,
    );
    Ok(())
}
