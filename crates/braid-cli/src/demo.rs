//! `braid demo`: the main job a new user runs first.
//!
//! Until the lab (real kernels in network namespaces) exists, the demo runs the bus
//! scenario in the simulator: each link alone, then braid over both, and prints the table.

use crate::progress::Bar;

#[derive(clap::Args)]
pub struct Args {
    /// A shorter run (seconds instead of a minute).
    #[arg(long)]
    quick: bool,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
    /// Seed of every simulated run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if !a.json {
        crate::emit(
            "braid demo: the PluriBus bus (an EVDO-like link with 150 ms RTT and a lossy \
             WiMax-like link with 40 ms RTT,\nshort web flows), each link alone and bonded \
             by braid. Simulated: the lab with real kernels comes later.\n\n",
        )?;
    }
    let mut bar = Bar::new(!a.json);
    let mut cb = |label: &str, done: f64| bar.update(label, done);
    let mut opts = braid_bench::Options {
        quick: a.quick,
        seed: a.seed,
        progress: Some(&mut cb),
    };
    let report = braid_bench::demo::run(&mut opts)?;
    bar.finish();
    crate::print_report(&report, a.json)
}
