//! Whether the lab can run here, and if not, why (a test or the demo prints the reason
//! and skips, or falls back to the simulator).

use std::process::{Command, Stdio};

use crate::netns::Netns;
use crate::LabError;

/// What a lab run needs beyond root and network namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Namespaces, veths, the emulator (ip, ethtool, setpriv).
    Topology,
    /// iperf3 for bulk TCP and UDP.
    Iperf,
    /// ping for RTTs.
    Ping,
    /// Linux MPTCP (the kernel's, and mptcpize from mptcpd).
    Mptcp,
}

fn have(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// `Ok` when everything in `needs` is here; otherwise what is missing and how to get it.
pub fn check(needs: &[Need]) -> Result<(), LabError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(LabError::Unsupported(
            "not root (creating network namespaces needs CAP_SYS_ADMIN; run as root)".into(),
        ));
    }
    let apt = "apt-get install iproute2 ethtool util-linux iperf3 iputils-ping mptcpd";
    let mut missing = Vec::new();
    for need in needs.iter().copied().chain([Need::Topology]) {
        let tools: &[(&str, &str)] = match need {
            Need::Topology => &[
                ("ip", "-V"),
                ("ethtool", "--version"),
                ("setpriv", "--version"),
            ],
            Need::Iperf => &[("iperf3", "--version")],
            Need::Ping => &[("ping", "-V")],
            Need::Mptcp => &[("mptcpize", "--help")],
        };
        for (tool, arg) in tools {
            if !have(tool, arg) && !missing.contains(tool) {
                missing.push(*tool);
            }
        }
    }
    if !missing.is_empty() {
        return Err(LabError::Unsupported(format!(
            "missing {} (on Debian: {apt})",
            missing.join(", ")
        )));
    }
    if needs.contains(&Need::Mptcp)
        && std::fs::read_to_string("/proc/sys/net/mptcp/enabled").is_err()
    {
        return Err(LabError::Unsupported(
            "this kernel has no MPTCP (/proc/sys/net/mptcp/enabled is missing)".into(),
        ));
    }
    // The real test: can we make (and remove) a namespace?
    Netns::create(&format!("{}-probe", crate::netns::next_lab_id()))
        .map(drop)
        .map_err(|e| LabError::Unsupported(format!("cannot create a network namespace: {e}")))
}
