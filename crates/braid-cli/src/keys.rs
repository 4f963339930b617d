//! `braid genkey` and `braid pubkey`: static keys as `wg genkey` and `wg pubkey` make them
//! (base64 of 32 bytes; a key from either tool works in the other).
//!
//! ```sh
//! braid genkey > gateway.key
//! braid pubkey < gateway.key > gateway.pub
//! ```

use std::io::Read;

use anyhow::Context;
use braid_secure::PrivateKey;

use crate::emit;

#[derive(clap::Subcommand)]
pub enum KeyCommand {
    /// Print a new private key (base64) to standard output.
    Genkey,
    /// Read a private key from standard input and print its public key.
    Pubkey,
}

pub fn run(c: KeyCommand) -> anyhow::Result<()> {
    match c {
        KeyCommand::Genkey => genkey(),
        KeyCommand::Pubkey => pubkey(),
    }
}

fn genkey() -> anyhow::Result<()> {
    warn_if_world_readable();
    let key = PrivateKey::generate_from_os()
        .map_err(|e| anyhow::anyhow!("the system's random source failed: {e}"))?;
    emit(&(key.to_base64() + "\n"))
}

fn pubkey() -> anyhow::Result<()> {
    let mut text = String::new();
    std::io::stdin()
        .take(1024)
        .read_to_string(&mut text)
        .context("reading a private key from standard input")?;
    let key: PrivateKey = text
        .parse()
        .context("reading a private key from standard input")?;
    emit(&(key.public_key().to_base64() + "\n"))
}

/// As `wg genkey` does: a private key written to a file others can read deserves a warning.
fn warn_if_world_readable() {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata("/proc/self/fd/1") {
        if m.is_file() && m.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "braid: warning: writing a private key to a file others can read; consider \
                 `umask 077` first"
            );
        }
    }
}
