//! `braid relay`: lend this node's uplink to a braid session (crates/braid-net `relay`).

use std::path::PathBuf;

use braid_net::relay::{self, htb, RelayConfig};

#[derive(clap::Args)]
pub struct Args {
    /// The config file (docs/daemon.md, "relay").
    #[arg(short, long, default_value = "/etc/braid/relay.toml")]
    config: PathBuf,
    /// Check the config and exit.
    #[arg(long)]
    check: bool,
    /// Remove the tc classes a crashed run left behind, and exit.
    #[arg(long)]
    clean: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cfg = RelayConfig::load(&a.config)?;
    if a.check {
        println!("{}: ok", a.config.display());
        return Ok(());
    }
    if a.clean {
        let device = cfg.shaping.as_ref().map(|s| s.device.as_str());
        let cleaned = htb::clean_leftovers(&cfg.state_dir, device)?;
        println!("removed the relay's tc classes from: {cleaned:?}");
        return Ok(());
    }
    let stats = relay::run(&cfg)?;
    println!("{}", serde_json::to_string(&stats)?);
    Ok(())
}
