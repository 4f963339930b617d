//! braid's named benchmarks. Each one reproduces a paper figure or measures a speed, runs
//! every compared system side by side in one run, and reports a headline figure against the
//! paper's number and our goal (the JSON contract is in docs/benchmarks.md).
//!
//! Benchmarks are not tests: tests assert behaviour and determinism; benchmarks measure.
//! `--quick` runs a smaller version that finishes in seconds.
//!
//! - [`report`]: the report every benchmark returns, and its table.
//! - [`registry`]: the list of benchmarks by name.

mod bapu;
mod bapu_home;
mod cap_month;
mod common;
pub mod demo;
mod fec_codec;
mod htppr;
mod hybrid_links;
mod lab_bulk;
mod lab_bus;
mod lab_common;
pub mod lab_demo;
mod lab_emulator;
mod lab_failover;
mod lab_prism;
mod lab_relay;
mod lab_split_tcp;
mod lab_traces;
mod never_worse;
mod osctp_fig11;
mod osctp_fig13;
mod osctp_fig14;
mod osctp_fig15;
mod osctp_fig16;
mod osctp_fig2;
mod osctp_fig6;
mod osctp_fig7;
mod osctp_fig9;
mod osctp_fig9_stream;
mod osctp_stream;
mod osctp_table1;
mod pluribus_bus;
mod pluribus_coding;
mod pluribus_fig15;
mod pluribus_fig17;
mod prism;
mod prism_fig9;
mod prism_members;
mod prism_rpc;
mod rate_series;
pub mod registry;
mod replay_window;
pub mod report;
mod secure_transport;
mod sim_speed;
mod sim_vs_lab;
pub mod summary;
mod trace_bench;
pub mod trace_sets;
mod trace_stream;
mod tunnel_throughput;
mod udp_aggregation;

pub use registry::{find, list};
pub use report::{BenchReport, Headline, Table};
pub use summary::summarize;

/// The serde (kebab-case) name of a config enum, for labels.
pub fn kebab<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// A progress listener: a label and the fraction done.
pub type Progress<'a> = &'a mut dyn FnMut(&str, f64);

/// How a benchmark runs.
pub struct Options<'a> {
    /// The smaller version, for tests and CI.
    pub quick: bool,
    /// Seed of every simulated run.
    pub seed: u64,
    /// How far into its trace every recorded link starts, seconds (modulo the trace's
    /// length), in the benchmarks of [`TRACE_OFFSET_BENCHES`]; 0 elsewhere.
    pub trace_offset_s: f64,
    /// Called with a label and the fraction done, for progress display.
    pub progress: Option<Progress<'a>>,
}

/// The benchmarks that take [`Options::trace_offset_s`]: the recorded-trace sets of
/// `trace_bench`, run over another stretch of their recordings (the traces hold no
/// randomness, so the seed alone leaves their bulk runs unchanged).
pub const TRACE_OFFSET_BENCHES: [&str; 3] = ["trace-bulk", "trace-web", "trace-pairs"];

impl Options<'_> {
    /// Reports progress, if anyone listens.
    pub fn progress(&mut self, label: &str, done: f64) {
        if let Some(p) = self.progress.as_deref_mut() {
            p(label, done);
        }
    }
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("unknown benchmark '{0}' (braid bench --list shows them all)")]
    Unknown(String),
    #[error(transparent)]
    Sim(#[from] braid_sim::SimError),
    #[error(transparent)]
    Scenario(#[from] braid_sim::ScenarioError),
    #[error("{0}")]
    Other(String),
}

/// A named benchmark.
pub trait Bench: Sync {
    /// The name `braid bench NAME` takes.
    fn name(&self) -> &'static str;
    /// One line: what it measures and against what.
    fn summary(&self) -> &'static str;
    /// Whether it runs in the lab (root, network namespaces, real time), so that
    /// `braid bench all --skip-lab` and runs without root leave it out.
    fn needs_root(&self) -> bool {
        false
    }
    /// Runs it.
    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError>;
}
