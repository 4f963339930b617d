//! `braid demo`: the main job a new user runs first.
//!
//! What bonding is for, on the bus's two recorded LTE links (scenarios/bus-lte.toml),
//! through each link alone, Linux MPTCP and braid with its defaults: (a) riders' web
//! flows, (b) one bulk download against the links' summed capacity, (c) a video stream
//! beside a download while the better link is cut for 10 s. Where the lab can run (root,
//! network namespaces, iperf3/mptcpd tools, this build's daemon) it runs there, in real
//! time with real kernels, showing each path live; otherwise it says why and runs the same
//! three parts in the simulator.

use std::io::IsTerminal;

use crate::progress::Bar;

#[derive(clap::Args)]
pub struct Args {
    /// A shorter run.
    #[arg(long)]
    quick: bool,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run in the simulator even where the lab could run.
    #[arg(long)]
    sim: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let why = if a.sim {
        Some("--sim asked for the simulator".to_owned())
    } else {
        braid_bench::lab_demo::unavailable()
    };
    match why {
        None => lab(&a),
        Some(why) => sim(&a, &why),
    }
}

const INTRO: &str = "braid demo: a bus with two LTE modems (AT&T and Verizon, recorded while \
                     driving; bursty loss on AT&T),\nthrough each link alone, Linux MPTCP and \
                     braid with its defaults, the same traffic for each:\n  (a) riders' short \
                     web flows: median completion time\n  (b) one bulk download: goodput \
                     against the links' alone goodputs summed\n  (c) a 2 Mbit/s video stream \
                     beside a download while the better link is cut for 10 s:\n      the \
                     download's longest stall and the video lost\n";

fn lab(a: &Args) -> anyhow::Result<()> {
    braid_lab::netns::install_interrupt_handler();
    let tty = std::io::stdout().is_terminal() && !a.json;
    if !a.json {
        crate::emit(&format!(
            "{INTRO}In the lab: network namespaces, the links emulated in real time, real TCP \
             and UDP. About {}.\n\n",
            if a.quick { "90 s" } else { "5 minutes" }
        ))?;
    }
    let mut last_label = String::new();
    let mut n = 0u64;
    let mut live = |line: &str| {
        if a.json {
            return;
        }
        // A live line starts with its part's label in 26 columns.
        let label: String = line.chars().take(26).collect();
        let new_group = label != last_label;
        n += 1;
        let text = if tty {
            format!(
                "{}\r\x1b[2K{line}",
                if new_group && !last_label.is_empty() {
                    "\n"
                } else {
                    ""
                }
            )
        } else if new_group || n.is_multiple_of(5) {
            format!("{line}\n")
        } else {
            String::new()
        };
        last_label = label;
        let _ = crate::emit(&text);
    };
    let mut opts = braid_bench::Options {
        quick: a.quick,
        seed: a.seed,
        trace_offset_s: 0.0,
        progress: None,
    };
    let report = braid_bench::lab_demo::run(&mut opts, &mut live)?;
    if tty {
        crate::emit("\n\n")?;
    }
    crate::print_report(&report, a.json)
}

fn sim(a: &Args, why: &str) -> anyhow::Result<()> {
    if !a.json {
        crate::emit(&format!(
            "{INTRO}The lab cannot run here ({why}),\nso these are the same three parts in \
             the simulator (Linux MPTCP runs only in the lab).\n\n"
        ))?;
    }
    let mut bar = Bar::new(!a.json);
    let mut cb = |label: &str, done: f64| bar.update(label, done);
    let mut opts = braid_bench::Options {
        quick: a.quick,
        seed: a.seed,
        trace_offset_s: 0.0,
        progress: Some(&mut cb),
    };
    let mut report = braid_bench::demo::run(&mut opts)?;
    bar.finish();
    // With --json the intro is not printed: the reason goes to stderr and into the notes,
    // so a run that fell back to the simulator is never read as a lab run.
    if a.json {
        eprintln!("braid demo: in the simulator: {why}");
    }
    report
        .notes
        .push(format!("in the simulator, not the lab: {why}"));
    crate::print_report(&report, a.json)
}
