//! The systems a lab run compares on the same emulated paths: one path alone, Linux MPTCP,
//! and braid (its daemons over the paths, applications unchanged).

use std::net::Ipv4Addr;

use serde::Serialize;

use crate::apps::http::{Route, Transport};
use crate::topology::{client_path_addr, CLIENT};

/// How the client's traffic reaches the internet host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    /// Plain TCP over path `k` only (the source address the gateway routes onto it).
    Path(usize),
    /// Linux MPTCP: the first subflow on path `primary` (the lab picks the path of
    /// highest mean downlink capacity, as a user would make the best modem the default
    /// route), one more subflow per other path.
    Mptcp { primary: usize },
    /// Through braid's tunnel with this scheduler (a braid-core scheduler name).
    Braid(String),
}

impl System {
    /// Source address and transport of the client's sockets.
    pub fn route(&self) -> Route {
        match self {
            System::Path(k) => Route {
                transport: Transport::Tcp,
                bind: Some(client_path_addr(*k)),
            },
            System::Mptcp { primary } => Route {
                transport: Transport::Mptcp,
                bind: Some(client_path_addr(*primary)),
            },
            System::Braid(_) => Route {
                transport: Transport::Tcp,
                bind: Some(CLIENT),
            },
        }
    }

    /// The client's source address.
    pub fn source(&self) -> Ipv4Addr {
        self.route().bind.unwrap_or(CLIENT)
    }

    pub fn is_mptcp(&self) -> bool {
        matches!(self, System::Mptcp { .. })
    }

    /// A label for tables, with path names from `paths`.
    pub fn label(&self, paths: &[String]) -> String {
        match self {
            System::Path(k) => format!(
                "{} only",
                paths
                    .get(*k)
                    .map_or_else(|| format!("path {k}"), Clone::clone)
            ),
            System::Mptcp { .. } => "Linux MPTCP".into(),
            System::Braid(s) => format!("braid ({s})"),
        }
    }
}
