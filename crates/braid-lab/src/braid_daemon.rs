//! braid itself in the lab: `braid server` in the server's namespace and `braid gateway`
//! in the gateway's, one UDP path per emulated path, the client's traffic routed into the
//! gateway's TUN device and out of the server's.
//!
//! Until this build has the daemon, [`BraidTunnel::start`] says so, and the benchmarks
//! report that braid could not run instead of a number.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::{Lab, LabError};

/// The braid executable: `BRAID_BIN` if set, else the running program when it is `braid`.
pub fn executable() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BRAID_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    (exe.file_name()? == "braid").then_some(exe)
}

/// Why braid cannot run in the lab, or `None` when it can.
pub fn unavailable() -> Option<String> {
    let Some(exe) = executable() else {
        return Some(
            "no braid executable to start (run from `braid`, or set BRAID_BIN)".to_owned(),
        );
    };
    let has = |sub: &str| {
        Command::new(&exe)
            .args([sub, "--help"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if has("gateway") && has("server") {
        None
    } else {
        Some(
            "this build of braid has no daemon yet (`braid gateway` and `braid server`)".to_owned(),
        )
    }
}

/// braid's two daemons running over the lab's paths; stopped on drop.
#[derive(Debug)]
pub struct BraidTunnel {
    _private: (),
}

impl BraidTunnel {
    /// Starts the daemons with `scheduler` and waits until the tunnel carries traffic.
    pub fn start(_lab: &Lab, _scheduler: &str) -> Result<BraidTunnel, LabError> {
        match unavailable() {
            Some(why) => Err(LabError::BraidUnavailable(why)),
            None => Err(LabError::BraidUnavailable(
                "the lab does not yet know how to configure this build's daemon".to_owned(),
            )),
        }
    }
}
