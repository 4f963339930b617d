//! The system changes the daemon makes besides its own devices and sockets: routes,
//! forwarding, nftables masquerading. Each is undone by what [`Undo`] records.

use std::io::Write;
use std::process::{Command, Stdio};

/// Four random bytes from the kernel (session ids, seeds).
pub fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok();
    let v = u32::from_ne_bytes(b);
    if ok && v != 0 {
        v
    } else {
        std::process::id() | 1
    }
}

/// 64 random bits from the kernel (the flow table's hash key).
pub fn random_u64() -> u64 {
    (u64::from(random_u32()) << 32) | u64::from(random_u32())
}

/// `ip route replace PREFIX dev DEV`; logs a failure.
pub fn route_replace(prefix: &str, dev: &str) {
    run("ip", &["route", "replace", prefix, "dev", dev]);
}

fn run(cmd: &str, args: &[&str]) -> bool {
    match Command::new(cmd).args(args).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            tracing::error!(
                command = %format!("{cmd} {}", args.join(" ")),
                stderr = %String::from_utf8_lossy(&o.stderr).trim(),
                "system command failed"
            );
            false
        }
        Err(e) => {
            tracing::error!(command = cmd, error = %e, "cannot run system command");
            false
        }
    }
}

/// Applies an nftables ruleset (`nft -f -`).
pub fn nft(ruleset: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run nft (install nftables): {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(ruleset.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr)
            .trim()
            .replace('\n', " "))
    }
}

/// What the server set up and takes down at shutdown.
#[derive(Debug, Default)]
pub struct Undo {
    /// The nftables table to delete.
    pub nft_table: Option<String>,
    /// `net.ipv4.ip_forward` before we set it.
    pub ip_forward: Option<String>,
}

const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

impl Undo {
    /// Turns on IPv4 forwarding, remembering the old value.
    pub fn enable_forwarding(&mut self) {
        let old = std::fs::read_to_string(IP_FORWARD).unwrap_or_default();
        if old.trim() != "1" {
            if let Err(e) = std::fs::write(IP_FORWARD, "1") {
                tracing::error!(error = %e, "cannot enable IPv4 forwarding");
                return;
            }
            self.ip_forward = Some(old.trim().to_owned());
        }
    }

    /// Undoes everything recorded.
    pub fn undo(&mut self) {
        if let Some(t) = self.nft_table.take() {
            if let Err(e) = nft(&format!("delete table inet {t}\n")) {
                tracing::warn!(table = %t, error = %e, "cannot delete nftables table");
            }
        }
        if let Some(v) = self.ip_forward.take() {
            let _ = std::fs::write(IP_FORWARD, v);
        }
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        self.undo();
    }
}
