//! Linux MPTCP as the peer to beat: the client and the internet host are MPTCP hosts over
//! the very same emulated paths. The client opens the first subflow from the primary
//! path's address (a socket bound to it, as that path's single-path baseline is; the
//! primary is the path of highest mean downlink capacity); the kernel's
//! in-kernel path manager adds one subflow from each other path's address (a `subflow`
//! endpoint per address, and the gateway's source-address rules put each subflow on its
//! path); the scheduler is the kernel's default. Applications use MPTCP through their
//! socket's protocol (the lab's own HTTP client and server) or `mptcpize run` (iperf3).

use crate::topology::client_path_addr;
use crate::{Lab, LabError};

/// Most subflows and accepted addresses per connection we ask the kernel for.
const LIMIT: &str = "8";

/// Sets MPTCP's limits on both hosts and a subflow endpoint on the client for every path
/// but the primary.
pub fn configure(lab: &Lab, primary: usize) -> Result<(), LabError> {
    for ns in [&lab.client, &lab.internet] {
        ns.sysctl("mptcp/enabled", "1")?;
        ns.ip(&[
            "mptcp",
            "limits",
            "set",
            "subflow",
            LIMIT,
            "add_addr_accepted",
            LIMIT,
        ])?;
    }
    for k in (0..lab.paths().len()).filter(|&k| k != primary) {
        lab.client.ip(&[
            "mptcp",
            "endpoint",
            "add",
            &client_path_addr(k).to_string(),
            "dev",
            "eth0",
            "subflow",
        ])?;
    }
    Ok(())
}
