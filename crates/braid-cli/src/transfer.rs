//! `braid send` and `braid receive`: one file between two hosts, in one of two modes chosen
//! by flags. `--to`/`--via` (send) and `--listen` (receive) select the multipath reliable
//! stream (one congestion window per path, resumable, braid_net::stream_file);
//! `--hare`/`--tortoise` select HTPPR (a lossy fast link and a slow reliable one,
//! docs/htppr.md). Mixing the two is refused.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use braid_net::htppr::{self, Options, Progress, Summary};
use braid_net::stream_file::{self, SendOptions, StreamProgress, StreamSummary};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// HTPPR's flags.
#[derive(clap::Args)]
pub struct Htppr {
    /// HTPPR mode: the receiver's UDP-Lite socket (HOST:PORT) on the fast lossy link;
    /// damaged datagrams are repaired block by block.
    #[arg(
        long,
        value_name = "ADDR",
        requires = "tortoise",
        help_heading = "HTPPR mode"
    )]
    hare: Option<String>,
    /// HTPPR mode: the receiver's TCP socket (HOST:PORT) on the slow reliable link that
    /// carries metadata and feedback.
    #[arg(
        long,
        value_name = "ADDR",
        requires = "hare",
        help_heading = "HTPPR mode"
    )]
    tortoise: Option<String>,
    /// HTPPR mode: the sender's pace on the hare, Mbit/s (set it near the hare's capacity).
    #[arg(
        long,
        value_name = "MBIT/S",
        default_value_t = 20.0,
        help_heading = "HTPPR mode"
    )]
    hare_mbps: f64,
}

impl Htppr {
    fn chosen(&self) -> bool {
        self.hare.is_some() || self.tortoise.is_some()
    }

    fn options(&self) -> anyhow::Result<Options> {
        let (Some(hare), Some(tortoise)) = (&self.hare, &self.tortoise) else {
            anyhow::bail!("HTPPR mode needs both --hare ADDR and --tortoise ADDR");
        };
        Ok(Options::parse(hare, tortoise, self.hare_mbps)?)
    }
}

/// The stream mode's flags common to both ends.
#[derive(clap::Args)]
pub struct StreamFlags {
    /// Stream mode: send in the clear. The stream mode has no encryption yet (the file's
    /// SHA-256 is still checked end to end); this flag says you know.
    #[arg(long, help_heading = "Stream mode")]
    insecure: bool,
    /// Stream mode: seconds without a datagram from the peer before it is called gone.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 10,
        help_heading = "Stream mode"
    )]
    timeout: u64,
}

impl StreamFlags {
    fn timeout(&self) -> anyhow::Result<Duration> {
        if !self.insecure {
            anyhow::bail!(
                "the stream mode sends the file unencrypted (its SHA-256 is still checked); pass --insecure to accept that"
            );
        }
        if !(1..=3600).contains(&self.timeout) {
            anyhow::bail!("bad --timeout {}: expected 1 to 3600 seconds", self.timeout);
        }
        Ok(Duration::from_secs(self.timeout))
    }
}

const MIXED: &str = "--hare/--tortoise select HTPPR mode and --to/--via/--listen select the multipath stream mode; use the flags of one mode";

#[derive(clap::Args)]
pub struct SendArgs {
    /// The file to send.
    file: PathBuf,
    /// Stream mode: the receiver's socket (HOST:PORT); the file crosses on braid's
    /// multipath reliable stream over every --via path, and resumes where a receiver's
    /// partial file ends.
    #[arg(long, value_name = "HOST:PORT", help_heading = "Stream mode")]
    to: Option<String>,
    /// Stream mode: one path per --via, a local address (192.0.2.7) or an interface name
    /// (wwan0); repeat for more paths. Without it, one path.
    #[arg(long, value_name = "ADDR_OR_IFACE", help_heading = "Stream mode")]
    via: Vec<String>,
    #[command(flatten)]
    stream: StreamFlags,
    #[command(flatten)]
    htppr: Htppr,
    /// Print the summary as JSON (and no progress bar).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct ReceiveArgs {
    /// The directory the file is written into (under the sender's file name).
    dir: PathBuf,
    /// Stream mode: the UDP socket to receive on (ADDR:PORT, e.g. 0.0.0.0:7500); the
    /// sender's paths are learned from where its datagrams arrive. A partial file stays as
    /// DIR/NAME.part (with NAME.part.state) for the next send of the same file to resume.
    #[arg(long, value_name = "ADDR:PORT", help_heading = "Stream mode")]
    listen: Option<String>,
    #[command(flatten)]
    stream: StreamFlags,
    #[command(flatten)]
    htppr: Htppr,
    /// Print the summary as JSON (and no progress bar).
    #[arg(long)]
    json: bool,
}

pub fn send(a: SendArgs) -> anyhow::Result<()> {
    let stream_mode = a.to.is_some() || !a.via.is_empty();
    if stream_mode && a.htppr.chosen() {
        anyhow::bail!(MIXED);
    }
    if stream_mode {
        let Some(to) = &a.to else {
            anyhow::bail!("--via needs --to HOST:PORT (the receiver's socket)");
        };
        let opts = SendOptions::parse(to, &a.via, a.stream.timeout()?)?;
        let mut bar = StreamBar::new(!a.json, "sending");
        let s = stream_file::send(&a.file, &opts, &mut |p| bar.show(p))
            .with_context(|| format!("sending {}", a.file.display()));
        bar.finish();
        return report_stream(s?, a.json, "sent");
    }
    if !a.htppr.chosen() {
        anyhow::bail!(
            "choose a mode: --to HOST:PORT [--via ADDR]... --insecure (multipath stream) or --hare ADDR --tortoise ADDR (HTPPR)"
        );
    }
    let opts = a.htppr.options()?;
    let bar = bar(!a.json, "sending");
    let s = htppr::send(&a.file, &opts, &mut |p| show(&bar, p))
        .with_context(|| format!("sending {}", a.file.display()));
    bar.finish_and_clear();
    report(s?, a.json, "sent")
}

pub fn receive(a: ReceiveArgs) -> anyhow::Result<()> {
    if a.listen.is_some() && a.htppr.chosen() {
        anyhow::bail!(MIXED);
    }
    if let Some(listen) = &a.listen {
        let bound = stream_file::BoundReceiver::bind(&a.dir, listen, a.stream.timeout()?)?;
        if !a.json {
            eprintln!(
                "waiting for a sender on {} (UDP, multipath stream)",
                bound.local_addr()?
            );
        }
        let mut bar = StreamBar::new(!a.json, "receiving");
        let s = bound.run(&mut |p| bar.show(p));
        bar.finish();
        return report_stream(
            s.with_context(|| format!("receiving into {}", a.dir.display()))?,
            a.json,
            "received",
        );
    }
    if !a.htppr.chosen() {
        anyhow::bail!(
            "choose a mode: --listen ADDR:PORT --insecure (multipath stream) or --hare ADDR --tortoise ADDR (HTPPR)"
        );
    }
    let opts = a.htppr.options()?;
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

/// The stream mode's bar: bytes, total rate, and each path's rate over the last second.
struct StreamBar {
    bar: ProgressBar,
    /// (when, bytes per path) of recent updates, the oldest first.
    history: std::collections::VecDeque<(Duration, Vec<u64>)>,
}

impl StreamBar {
    fn new(enabled: bool, what: &str) -> StreamBar {
        let b = bar(enabled, what);
        if enabled {
            b.set_style(
                ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} | {prefix}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
        }
        StreamBar {
            bar: b,
            history: Default::default(),
        }
    }

    fn show(&mut self, p: &StreamProgress) {
        if self.bar.is_hidden() {
            return;
        }
        if self.bar.length() != Some(p.total) {
            self.bar.set_length(p.total);
        }
        self.bar.set_position(p.done);
        let now = p.elapsed;
        self.history.push_back((now, p.path_bytes.clone()));
        while self.history.len() > 2
            && now.saturating_sub(self.history[0].0) > Duration::from_secs(1)
        {
            self.history.pop_front();
        }
        let (t0, b0) = &self.history[0];
        let dt = now.saturating_sub(*t0).as_secs_f64();
        if dt > 0.0 && b0.len() == p.path_bytes.len() {
            let rates: Vec<String> = p
                .path_bytes
                .iter()
                .zip(b0)
                .enumerate()
                .map(|(i, (b, a))| format!("p{i} {:.1}", (b - a) as f64 * 8.0 / dt / 1e6))
                .collect();
            self.bar.set_prefix(format!("{} Mbit/s", rates.join(" ")));
        }
    }

    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

fn report_stream(s: StreamSummary, json: bool, verb: &str) -> anyhow::Result<()> {
    if json {
        return crate::emit(&(serde_json::to_string(&s)? + "\n"));
    }
    let resumed = if s.resumed_from > 0 {
        format!(", resumed at byte {}", s.resumed_from)
    } else {
        String::new()
    };
    let paths: Vec<String> = s
        .paths
        .iter()
        .map(|p| format!("{} {:.1} Mbit/s", p.via, p.mbit_s))
        .collect();
    crate::emit(&format!(
        "{verb} {} ({} bytes{resumed}) in {:.1} s, {:.2} MB/s over {} path(s): {}; SHA-256 {} matches\n",
        s.path.display(),
        s.bytes,
        s.seconds,
        s.mb_s,
        s.paths.len(),
        paths.join(", "),
        s.sha256,
    ))
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
