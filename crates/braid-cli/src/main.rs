//! `braid`: the command-line front end. Subcommands run the daemon (`gateway`, `server`,
//! `status`), the simulator (`sim`), trace conversion (`trace`), the named benchmarks (`bench`,
//! `bench all`), the report of them all (`report`), the lab (`lab`) and the demo (`demo`).

mod daemon;
mod demo;
mod keys;
mod lab;
mod overhear;
mod progress;
mod relay;
mod report;
mod sim;
mod trace;
mod transfer;

use std::io::Write;

use clap::{Parser, Subcommand};

/// braid bonds many weak links into one strong one: a gateway with several uplinks and a
/// server on the wired Internet cooperate so that clients behind the gateway see one fast,
/// low-delay, nearly lossless link.
#[derive(Parser)]
#[command(name = "braid", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway: the end with several uplinks (config: docs/daemon.md).
    Gateway(daemon::DaemonArgs),
    /// Run the server: the wired end that serves many gateways (config: docs/daemon.md).
    Server(daemon::DaemonArgs),
    /// Lend this node's uplink to a braid session, home traffic first (docs/daemon.md,
    /// "relay").
    Relay(relay::Args),
    /// What a BaPu AP here would overhear: the uploads in 802.11 frames from a monitor
    /// interface (radiotap) or a pcap file, by session, MAC retries removed, and the
    /// frames refused and why (docs/daemon.md, "overhear").
    Overhear(overhear::Args),
    /// Show a running gateway's or server's paths: state, rate, RTT, loss, bytes.
    Status(daemon::StatusArgs),
    /// Run the demo: two recorded LTE links through each alone, Linux MPTCP and braid:
    /// web flows, a bulk download, and video while the better link is cut.
    Demo(demo::Args),
    /// Run a scenario file in the deterministic simulator (format: docs/scenarios.md).
    Sim(sim::Args),
    /// Work on link trace files (`braid trace convert`: docs/traces.md).
    #[command(subcommand)]
    Trace(trace::Command),
    /// Run a named benchmark (see --list), comparing systems side by side in one run;
    /// `braid bench all` runs every one in turn.
    Bench(BenchArgs),
    /// Run every benchmark (or read `braid bench all --json` lines) and write a static HTML
    /// page with the headline table and a plot per benchmark.
    Report(report::Args),
    /// The real testbed: network namespaces, emulated links, real TCP, Linux MPTCP beside
    /// braid (needs root; docs/lab.md).
    Lab(lab::Args),
    /// Send a file to `braid receive`: over the multipath stream (--to HOST:PORT [--via ADDR]... --insecure; resumable) or over HTPPR (--hare ADDR --tortoise ADDR).
    Send(transfer::SendArgs),
    /// Receive one file from `braid send` into a directory: stream mode (--listen ADDR:PORT --insecure) or HTPPR mode (--hare ADDR --tortoise ADDR).
    Receive(transfer::ReceiveArgs),
    #[command(flatten)]
    Keys(keys::KeyCommand),
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Benchmark name (see --list), or `all` for every one in turn.
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// List the benchmarks and exit.
    #[arg(long)]
    list: bool,
    /// The smaller version that finishes in seconds (what tests and CI run).
    #[arg(long)]
    quick: bool,
    /// Print one JSON object (fields in docs/benchmarks.md) instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed of every simulated run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// With `all`: leave out the benchmarks that run in the lab (root, namespaces, real
    /// time). Without root they are skipped anyway, with the reason.
    #[arg(long)]
    skip_lab: bool,
    /// Also append each result as one JSON line (the form `bench all --json` prints) to
    /// FILE, for `braid report --from FILE` (e.g. the lab's results from a root machine
    /// beside the simulated ones from another).
    #[arg(long, value_name = "FILE")]
    save: Option<std::path::PathBuf>,
    /// With trace-bulk, trace-web or trace-pairs: start every recorded link this many
    /// seconds into its trace (modulo the trace's length), to run the same sets over
    /// another stretch of their recordings.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0, value_parser = non_negative_seconds)]
    trace_offset: f64,
}

/// A finite, non-negative number of seconds.
fn non_negative_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds (0 or more)")),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Gateway(a) => daemon::gateway(a),
        Command::Server(a) => daemon::server(a),
        Command::Relay(a) => relay::run(a),
        Command::Overhear(a) => overhear::run(a),
        Command::Status(a) => daemon::status(a),
        Command::Demo(a) => demo::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Trace(c) => trace::run(c),
        Command::Bench(a) => bench(a),
        Command::Report(a) => report::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Send(a) => transfer::send(a),
        Command::Receive(a) => transfer::receive(a),
        Command::Keys(c) => keys::run(c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("braid: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Writes `text` to standard output. A closed pipe (`braid ... | head`) ends the output
/// quietly instead of failing.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Prints a benchmark-style report: JSON, or the table, headline and notes.
pub fn print_report(report: &braid_bench::BenchReport, json: bool) -> anyhow::Result<()> {
    if json {
        return emit(&(serde_json::to_string_pretty(report)? + "\n"));
    }
    emit(&report_text(report))
}

/// A report's table, headline(s) and notes, as `braid bench NAME` prints them.
pub fn report_text(report: &braid_bench::BenchReport) -> String {
    let mut s = format!(
        "{} ({}seed {})\n\n{}\n",
        report.bench,
        if report.quick { "quick, " } else { "" },
        report.seed,
        report.table,
    );
    if report.headlines.is_empty() {
        s += &format!("{}\n", report.headline);
    }
    for h in &report.headlines {
        s += &format!("{h}\n");
    }
    for n in &report.notes {
        s += &format!("note: {n}\n");
    }
    s
}

fn bench(a: BenchArgs) -> anyhow::Result<()> {
    if a.list {
        let list = braid_bench::list();
        let width = list.iter().map(|b| b.name().len()).max().unwrap_or(0);
        let text: String = list
            .iter()
            .map(|b| format!("{:<width$}  {}\n", b.name(), b.summary()))
            .collect();
        return emit(&text);
    }
    let Some(name) = a.name else {
        anyhow::bail!("name a benchmark (braid bench --list shows them)");
    };
    let offset_taken = braid_bench::TRACE_OFFSET_BENCHES.contains(&name.as_str());
    if a.trace_offset != 0.0 && !offset_taken {
        anyhow::bail!(
            "--trace-offset goes with one of {}, not `{name}`",
            braid_bench::TRACE_OFFSET_BENCHES.join(", ")
        );
    }
    if name == "all" {
        let plan = report::all::Plan {
            quick: a.quick,
            seed: a.seed,
            skip_lab: a.skip_lab,
        };
        return report::all::bench_all(plan, a.json, a.save.as_deref());
    }
    if a.skip_lab {
        anyhow::bail!("--skip-lab goes with `braid bench all`");
    }
    let b = braid_bench::find(&name)?;
    let mut bar = progress::Bar::new(!a.json);
    let mut cb = |label: &str, done: f64| bar.update(label, done);
    let mut opts = braid_bench::Options {
        quick: a.quick,
        seed: a.seed,
        trace_offset_s: a.trace_offset,
        progress: Some(&mut cb),
    };
    #[expect(
        clippy::disallowed_methods,
        reason = "how long the benchmark took, for --save: the CLI's own wall clock"
    )]
    let start = std::time::Instant::now();
    let report = b.run(&mut opts)?;
    bar.finish();
    if let Some(file) = &a.save {
        let entry = report::all::Entry {
            bench: report.bench.clone(),
            quick: a.quick,
            seed: a.seed,
            wall_s: start.elapsed().as_secs_f64(),
            outcome: report::all::Outcome::Ran(serde_json::to_value(&report)?),
            text: None,
        };
        report::all::save(file, &entry)?;
    }
    print_report(&report, a.json)
}
