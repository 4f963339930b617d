//! Home traffic keeps priority on a lent uplink (BaPu §5): Linux HTB classes on the
//! uplink's egress.
//!
//! ```text
//! b7:   htb, default b7:20 (anything unclassified is the home's)
//! └ b7:1   the uplink's rate
//!   ├ b7:10  home TCP ACKs    prio 0  rate  ACK_SHARE of the uplink, ceil the uplink
//!   ├ b7:20  home traffic     prio 1  rate  the rest,                 ceil the uplink
//!   └ b7:30  shared traffic   prio 2  rate  the guarantee,            ceil the lent rate
//! each leaf: sfq (BaPu's "Stochastic Fair Queuing ... within the same class"), else
//! fq_codel, else HTB's own FIFO where the kernel has neither
//! ```
//!
//! Shared traffic is what the relay sends from its uplink port (a u32 filter on the UDP
//! source port); home ACKs are bare TCP ACKs (IP length under 64, flags exactly ACK). HTB
//! lends the home classes' idle rate to the shared class up to its ceiling, and takes it
//! back packet by packet when home traffic returns; the shared class never falls below its
//! guarantee. The relay installs the classes at start and deletes them at exit. A crash
//! leaves them behind: the root qdisc's handle `b7:` marks them as the relay's, and a state
//! file names the device, so the next start removes them before anything else.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The root qdisc's handle: what marks the classes as the relay's.
pub const HANDLE: &str = "b7:";
/// Share of the uplink guaranteed to the home's bare ACKs: a 20 Mbit/s download, ACKed
/// every other segment, needs about 0.5 Mbit/s; at prio 0 they borrow more when needed.
pub const ACK_SHARE: f64 = 0.05;

/// What to install.
#[derive(Clone, Debug, PartialEq)]
pub struct Shaping {
    /// The uplink's egress device.
    pub device: String,
    /// The uplink's rate, bits per second.
    pub uplink_bps: u64,
    /// The shared class's guarantee (BaPu §5 used 500 kbit/s; the default is 3% of the
    /// uplink, `relay/mod.rs`).
    pub guarantee_bps: u64,
    /// The shared class's ceiling: what the relay lends at most.
    pub lend_bps: u64,
    /// The relay's uplink UDP port: its traffic is the shared class.
    pub shared_port: u16,
}

/// Why `tc` failed.
#[derive(Debug, thiserror::Error)]
pub enum HtbError {
    #[error("`tc {args}` failed: {message} (the relay needs root or CAP_NET_ADMIN, and the sch_htb and sch_sfq modules)")]
    Tc { args: String, message: String },
    #[error("state file {path}: {source}")]
    State {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("shaping: {0}")]
    Invalid(String),
}

fn tc(args: &[&str]) -> Result<String, HtbError> {
    let out = Command::new("tc")
        .args(args)
        .output()
        .map_err(|e| HtbError::Tc {
            args: args.join(" "),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(HtbError::Tc {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The state file that names the shaped device while the classes exist.
fn state_file(dir: &Path) -> PathBuf {
    dir.join("htb-device")
}

impl Shaping {
    pub fn validate(&self) -> Result<(), HtbError> {
        let bad = |m: &str| Err(HtbError::Invalid(m.to_owned()));
        if self.device.is_empty() || self.device.len() > 15 {
            return bad("device must be an interface name of 1 to 15 characters");
        }
        if self.uplink_bps < 64_000 {
            return bad("uplink_mbit must be at least 0.064");
        }
        if self.guarantee_bps == 0 || self.guarantee_bps * 2 > self.uplink_bps {
            return bad("guarantee_kbit must be above 0 and at most half the uplink");
        }
        if self.lend_bps < self.guarantee_bps {
            return bad("the lent rate must be at least the guarantee");
        }
        Ok(())
    }

    /// The `tc` commands that build the classes, in order.
    pub fn commands(&self) -> Vec<Vec<String>> {
        let dev = self.device.as_str();
        let up = self.uplink_bps;
        let ack = ((up as f64 * ACK_SHARE) as u64).max(8_000);
        let home = up.saturating_sub(ack + self.guarantee_bps).max(8_000);
        let lend = self.lend_bps.min(up);
        let bit = |b: u64| format!("{b}bit");
        let class = |id: &str, rate: u64, ceil: u64, prio: u8| {
            format!(
                "class add dev {dev} parent b7:1 classid b7:{id} htb rate {} ceil {} prio {prio} quantum 1514",
                bit(rate),
                bit(ceil)
            )
        };
        let mut c = vec![
            format!("qdisc add dev {dev} root handle {HANDLE} htb default 20"),
            format!(
                "class add dev {dev} parent b7: classid b7:1 htb rate {} ceil {} quantum 1514",
                bit(up),
                bit(up)
            ),
            class("10", ack, up, 0),
            class("20", home, up, 1),
            class("30", self.guarantee_bps, lend, 2),
        ];
        c.push(format!(
            "filter add dev {dev} parent b7: protocol ip prio 1 u32 match ip protocol 17 0xff match ip sport {} 0xffff flowid b7:30",
            self.shared_port
        ));
        c.push(format!(
            "filter add dev {dev} parent b7: protocol ip prio 2 u32 match ip protocol 6 0xff match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 flowid b7:10"
        ));
        c.into_iter()
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .collect()
    }

    /// The fair queue for each leaf class, in order of preference.
    pub fn leaf_commands(&self, leaf: &str) -> [Vec<String>; 2] {
        let dev = self.device.as_str();
        let base = format!("qdisc add dev {dev} parent b7:{leaf} handle b{leaf}:");
        [format!("{base} sfq perturb 10"), format!("{base} fq_codel")]
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
    }
}

/// The classes on a device while the relay runs; deleted on drop.
pub struct Installed {
    device: String,
    state: PathBuf,
}

impl Installed {
    /// Removes what a previous run left behind (its state file, and the relay's root qdisc
    /// on that device and on `shaping.device`), then installs the classes, recording the
    /// device in `state_dir` first so that a crash at any point is undone next time.
    pub fn install(shaping: &Shaping, state_dir: &Path) -> Result<Installed, HtbError> {
        shaping.validate()?;
        clean_leftovers(state_dir, Some(&shaping.device))?;
        let state = state_file(state_dir);
        std::fs::create_dir_all(state_dir)
            .and_then(|()| std::fs::write(&state, format!("{}\n", shaping.device)))
            .map_err(|source| HtbError::State {
                path: state.clone(),
                source,
            })?;
        let installed = Installed {
            device: shaping.device.clone(),
            state,
        };
        for cmd in shaping.commands() {
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            // On failure `installed` drops here and removes what was made.
            tc(&args)?;
        }
        for leaf in ["10", "20", "30"] {
            let fair = shaping.leaf_commands(leaf).iter().any(|cmd| {
                let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
                tc(&args).is_ok()
            });
            if !fair {
                tracing::warn!(
                    class = leaf,
                    "neither sfq nor fq_codel in this kernel: the class keeps HTB's FIFO"
                );
            }
        }
        Ok(installed)
    }

    pub fn device(&self) -> &str {
        &self.device
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if let Err(e) = remove(&self.device) {
            tracing::warn!("removing the relay's tc classes: {e}");
        }
        let _ = std::fs::remove_file(&self.state);
    }
}

/// Whether the relay's classes are on `device`.
pub fn present(device: &str) -> Result<bool, HtbError> {
    let out = tc(&["qdisc", "show", "dev", device])?;
    Ok(out
        .lines()
        .any(|l| l.starts_with(&format!("qdisc htb {HANDLE} root"))))
}

/// Deletes the relay's root qdisc (and with it its classes and filters) from `device`, if
/// it is there; a device that no longer exists has nothing left.
pub fn remove(device: &str) -> Result<(), HtbError> {
    match present(device) {
        Ok(true) => tc(&["qdisc", "del", "dev", device, "root"]).map(|_| ()),
        Ok(false) => Ok(()),
        Err(_) if !Path::new("/sys/class/net").join(device).exists() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the classes a crashed run left: on the device its state file names, and on
/// `device`. Returns the devices cleaned.
pub fn clean_leftovers(state_dir: &Path, device: Option<&str>) -> Result<Vec<String>, HtbError> {
    let state = state_file(state_dir);
    let recorded = std::fs::read_to_string(&state).ok();
    let mut devices: Vec<String> = recorded
        .iter()
        .flat_map(|s| s.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    devices.extend(device.map(str::to_owned));
    devices.dedup();
    let mut cleaned = Vec::new();
    for d in devices {
        if present(&d).unwrap_or(false) {
            remove(&d)?;
            cleaned.push(d);
        }
    }
    if recorded.is_some() {
        std::fs::remove_file(&state).map_err(|source| HtbError::State {
            path: state,
            source,
        })?;
    }
    Ok(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaping() -> Shaping {
        Shaping {
            device: "eth0".into(),
            uplink_bps: 20_000_000,
            guarantee_bps: 500_000,
            lend_bps: 10_000_000,
            shared_port: 7001,
        }
    }

    #[test]
    fn classes_give_home_priority_and_shared_its_guarantee() {
        let c: Vec<String> = shaping().commands().iter().map(|c| c.join(" ")).collect();
        assert_eq!(c[0], "qdisc add dev eth0 root handle b7: htb default 20");
        assert!(c[2].contains("classid b7:10 htb rate 1000000bit ceil 20000000bit prio 0"));
        assert!(c[3].contains("classid b7:20 htb rate 18500000bit ceil 20000000bit prio 1"));
        assert!(c[4].contains("classid b7:30 htb rate 500000bit ceil 10000000bit prio 2"));
        assert!(c
            .iter()
            .any(|l| l.contains("match ip sport 7001 0xffff flowid b7:30")));
        assert!(c.iter().any(|l| l.ends_with("at 33 flowid b7:10")));
        let leaf = shaping().leaf_commands("30")[0].join(" ");
        assert_eq!(
            leaf,
            "qdisc add dev eth0 parent b7:30 handle b30: sfq perturb 10"
        );
    }

    #[test]
    fn bad_shaping_is_refused() {
        let mut s = shaping();
        s.guarantee_bps = 15_000_000;
        assert!(s.validate().is_err());
        let mut s = shaping();
        s.lend_bps = 100;
        assert!(s.validate().is_err());
        let mut s = shaping();
        s.device = "a-very-long-interface-name".into();
        assert!(s.validate().is_err());
        assert!(shaping().validate().is_ok());
    }
}
