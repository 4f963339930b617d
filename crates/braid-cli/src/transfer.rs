//! `braid send` and `braid receive`: one file between two hosts. The transport is chosen by
//! flags: `--hare` and `--tortoise` select HTPPR (a lossy fast link and a slow reliable one,
//! docs/htppr.md); another transport joins as another flag of the same group.

use std::path::PathBuf;

use anyhow::Context;
use braid_net::htppr::{self, Options, Progress, Summary};
use clap::ArgGroup;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How the file travels; exactly one transport.
#[derive(clap::Args)]
#[command(group(ArgGroup::new("transport").required(true).args(["hare"])))]
pub struct Transport {
    /// HTPPR's hare: the receiver's UDP-Lite socket (HOST:PORT) on the fast lossy link;
    /// damaged datagrams are repaired block by block.
    #[arg(long, value_name = "ADDR", requires = "tortoise")]
    hare: Option<String>,
    /// HTPPR's tortoise: the receiver's TCP socket (HOST:PORT) on the slow reliable link
    /// that carries metadata and feedback.
    #[arg(long, value_name = "ADDR", requires = "hare")]
    tortoise: Option<String>,
    /// HTPPR: the sender's pace on the hare, Mbit/s (set it near the hare's capacity).
    #[arg(long, value_name = "MBIT/S", default_value_t = 20.0)]
    hare_mbps: f64,
}

#[derive(clap::Args)]
pub struct SendArgs {
    /// The file to send.
    file: PathBuf,
    #[command(flatten)]
    transport: Transport,
    /// Print the summary as JSON (and no progress bar).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct ReceiveArgs {
    /// The directory the file is written into (under the sender's file name).
    dir: PathBuf,
    #[command(flatten)]
    transport: Transport,
    /// Print the summary as JSON (and no progress bar).
    #[arg(long)]
    json: bool,
}

impl Transport {
    fn htppr(&self) -> anyhow::Result<Options> {
        let (Some(hare), Some(tortoise)) = (&self.hare, &self.tortoise) else {
            anyhow::bail!("choose a transport: --hare ADDR --tortoise ADDR");
        };
        Ok(Options::parse(hare, tortoise, self.hare_mbps)?)
    }
}

pub fn send(a: SendArgs) -> anyhow::Result<()> {
    let opts = a.transport.htppr()?;
    let bar = bar(!a.json, "sending");
    let s = htppr::send(&a.file, &opts, &mut |p| show(&bar, p))
        .with_context(|| format!("sending {}", a.file.display()));
    bar.finish_and_clear();
    report(s?, a.json, "sent")
}

pub fn receive(a: ReceiveArgs) -> anyhow::Result<()> {
    let opts = a.transport.htppr()?;
    let bound = htppr::BoundReceiver::bind(&a.dir, &opts)?;
    if !a.json {
        let (hare, tortoise) = bound.addrs();
        eprintln!("waiting for a sender: hare {hare} (UDP-Lite), tortoise {tortoise} (TCP)");
    }
    let bar = bar(!a.json, "receiving");
    let s = bound.run(&mut |p| show(&bar, p));
    bar.finish_and_clear();
    report(s?, a.json, "received")
}

fn bar(enabled: bool, what: &str) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    b.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    b.set_message(what.to_owned());
    b
}

fn show(bar: &ProgressBar, p: Progress) {
    if bar.length() != Some(p.total) {
        bar.set_length(p.total);
    }
    bar.set_position(p.done);
}

fn report(s: Summary, json: bool, verb: &str) -> anyhow::Result<()> {
    if json {
        return crate::emit(&(serde_json::to_string(&s)? + "\n"));
    }
    crate::emit(&format!(
        "{verb} {} ({} bytes) in {:.1} s, {:.1} Mbit/s; SHA-256 {} matches\n",
        s.path.display(),
        s.bytes,
        s.seconds,
        s.bytes as f64 * 8.0 / s.seconds.max(1e-6) / 1e6,
        s.sha256,
    ))
}
