//! The lab's topology: namespaces, veths, addresses and routes, and the link emulators.
//!
//! ```text
//!  client ── gateway ══ path 0 (namespace p0: a ⇄ emulator ⇄ b) ══ server ── internet
//!  eth0       lan0  up0                                      dn0  wan0      eth0
//!                   up1 ══ path 1 …                          dn1
//! ```
//!
//! Addresses: the client has 10.0.0.2 (traffic for braid's tunnel) and 10.0.(k+1).2 for
//! each path k; the gateway routes by source address, so a socket bound to 10.0.(k+1).2
//! leaves by path k (the single-path baselines and MPTCP's subflows), and the server sends
//! 10.0.(k+1).0/24 back by path k. Path k is the segment 10.100.k.0/24 between the
//! gateway (10.100.k.1, `upk`) and the server (10.100.k.2, `dnk`); the emulator in
//! between forwards whole Ethernet frames, and both ends know each other's MAC address
//! statically, so no ARP crosses the emulated link. The internet host is 10.1.0.2 behind
//! the server. IPv6 is off everywhere, so nothing but the experiment's own packets crosses
//! the emulators.

use std::net::Ipv4Addr;

use braid_core::Instant;
use braid_sim::link::{LinkConfig, TraceCache};

use crate::clock::Clock;
use crate::emulator::{build_link, DirectionReport, PathEmulator};
use crate::netns::Netns;
use crate::{LabError, System};

/// Most paths a lab holds.
pub const MAX_PATHS: usize = 8;
/// The client's address for braid's tunnel (and its default).
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The internet host: HTTP and iperf3 servers.
pub const INTERNET: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
/// The server's address towards the internet host.
pub const SERVER_WAN: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
/// The gateway's address towards the client.
pub const GATEWAY_LAN: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The server's address for braid's datagrams, reachable over every path (the gateway's
/// rule for each path's source address sends it down that path).
pub const SERVER_ENDPOINT: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
/// Routing table of path k on the gateway is this plus k.
const TABLE_BASE: usize = 100;

/// The client's address whose traffic takes path `k`.
pub fn client_path_addr(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, k as u8 + 1, 2)
}

/// The gateway's address on path `k`.
pub fn gateway_path_addr(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 100, k as u8, 1)
}

/// The server's address on path `k`.
pub fn server_path_addr(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 100, k as u8, 2)
}

fn mac(k: usize, end: u8) -> String {
    format!("02:b1:00:00:{k:02x}:{end:02x}")
}

/// One emulated path: a name and its two directions (the scenario format's `[[path]]`).
#[derive(Clone, Debug)]
pub struct PathSpec {
    pub name: String,
    /// Gateway → server.
    pub up: LinkConfig,
    /// Server → gateway.
    pub down: LinkConfig,
}

/// A running lab; dropping it stops the emulators and deletes every namespace.
#[derive(Debug)]
pub struct Lab {
    // Field order is drop order: emulators stop before their namespaces go.
    emulators: Vec<PathEmulator>,
    paths: Vec<PathSpec>,
    clock: Clock,
    seed: u64,
    traces: TraceCache,
    pub client: Netns,
    pub gateway: Netns,
    pub server: Netns,
    pub internet: Netns,
    path_ns: Vec<Netns>,
    mptcp: Option<String>,
    mptcp_primary: usize,
    uplink_mbps: Vec<f64>,
    downlink_mbps: Vec<f64>,
}

impl Lab {
    /// Builds the topology for `paths` and starts their emulators. Link randomness is
    /// seeded from `seed` as in the simulator.
    pub fn build(paths: &[PathSpec], seed: u64) -> Result<Lab, LabError> {
        if paths.is_empty() || paths.len() > MAX_PATHS {
            return Err(LabError::Config(format!(
                "a lab needs 1 to {MAX_PATHS} paths, found {}",
                paths.len()
            )));
        }
        crate::netns::install_interrupt_handler();
        let clock = Clock::start();
        let id = crate::netns::next_lab_id();
        let client = Netns::create(&format!("{id}-client"))?;
        let gateway = Netns::create(&format!("{id}-gateway"))?;
        let server = Netns::create(&format!("{id}-server"))?;
        let internet = Netns::create(&format!("{id}-internet"))?;
        let mut path_ns = Vec::new();
        for k in 0..paths.len() {
            path_ns.push(Netns::create(&format!("{id}-p{k}"))?);
        }
        let mut lab = Lab {
            emulators: Vec::new(),
            paths: paths.to_vec(),
            clock,
            seed,
            traces: TraceCache::new(),
            client,
            gateway,
            server,
            internet,
            path_ns,
            mptcp: None,
            mptcp_primary: 0,
            uplink_mbps: Vec::new(),
            downlink_mbps: Vec::new(),
        };
        for p in paths {
            let bps = p.up.mean_rate_bps(&mut lab.traces).unwrap_or(0.0);
            lab.uplink_mbps.push(bps / 1e6);
            let bps = p.down.mean_rate_bps(&mut lab.traces).unwrap_or(0.0);
            lab.downlink_mbps.push(bps / 1e6);
        }
        lab.wire()?;
        lab.mptcp_primary = lab.best_path();
        lab.mptcp = crate::mptcp::configure(&lab, lab.mptcp_primary)
            .err()
            .map(|e| e.to_string());
        for (k, p) in paths.iter().enumerate() {
            let (up, down) = lab.links(k)?;
            let e = PathEmulator::start(&lab.path_ns[k], &p.name, up, down, lab.clock)?;
            lab.emulators.push(e);
        }
        Ok(lab)
    }

    fn links(
        &mut self,
        k: usize,
    ) -> Result<(braid_sim::link::Link, braid_sim::link::Link), LabError> {
        let p = self.paths[k].clone();
        self.links_for(&p)
    }

    fn links_for(
        &mut self,
        p: &PathSpec,
    ) -> Result<(braid_sim::link::Link, braid_sim::link::Link), LabError> {
        Ok((
            build_link(&p.up, &mut self.traces, self.seed, &p.name, "up")?,
            build_link(&p.down, &mut self.traces, self.seed, &p.name, "down")?,
        ))
    }

    /// Creates the veths, addresses, routes and static neighbours.
    fn wire(&self) -> Result<(), LabError> {
        let all = [&self.client, &self.gateway, &self.server, &self.internet];
        for ns in all.iter().copied().chain(self.path_ns.iter()) {
            ns.sysctl("ipv6/conf/all/disable_ipv6", "1")?;
            ns.sysctl("ipv6/conf/default/disable_ipv6", "1")?;
        }
        let (c, g, s, i) = (&self.client, &self.gateway, &self.server, &self.internet);
        c.ip(&[
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "lan0",
            "netns",
            g.name(),
        ])?;
        s.ip(&[
            "link",
            "add",
            "wan0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            i.name(),
        ])?;
        c.ip(&["addr", "add", "10.0.0.2/24", "dev", "eth0"])?;
        g.ip(&["addr", "add", "10.0.0.1/24", "dev", "lan0"])?;
        s.ip(&["addr", "add", "10.1.0.1/24", "dev", "wan0"])?;
        i.ip(&["addr", "add", "10.1.0.2/24", "dev", "eth0"])?;
        for (ns, dev) in [(c, "eth0"), (g, "lan0"), (s, "wan0"), (i, "eth0")] {
            ns.ip(&["link", "set", "dev", dev, "up"])?;
        }
        c.ip(&[
            "route", "add", "default", "via", "10.0.0.1", "src", "10.0.0.2",
        ])?;
        i.ip(&["route", "add", "default", "via", "10.1.0.1"])?;
        s.ip(&["addr", "add", &format!("{SERVER_ENDPOINT}/32"), "dev", "lo"])?;
        for ns in [g, s] {
            ns.sysctl("ipv4/ip_forward", "1")?;
            ns.sysctl("ipv4/conf/all/rp_filter", "0")?;
            ns.sysctl("ipv4/conf/default/rp_filter", "0")?;
        }
        for (k, pns) in self.path_ns.iter().enumerate() {
            let (up, dn) = (format!("up{k}"), format!("dn{k}"));
            let (gmac, smac) = (mac(k, 1), mac(k, 2));
            g.ip(&[
                "link",
                "add",
                &up,
                "address",
                &gmac,
                "type",
                "veth",
                "peer",
                "name",
                "a",
                "netns",
                pns.name(),
            ])?;
            s.ip(&[
                "link",
                "add",
                &dn,
                "address",
                &smac,
                "type",
                "veth",
                "peer",
                "name",
                "b",
                "netns",
                pns.name(),
            ])?;
            // Whole frames of at most the MTU, with real checksums, so the AF_PACKET
            // bridge sees what a wire would carry.
            for (ns, dev) in [(g, up.as_str()), (s, dn.as_str()), (pns, "a"), (pns, "b")] {
                ns.exec(
                    "ethtool",
                    &[
                        "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro",
                        "off",
                    ],
                )?;
                ns.ip(&["link", "set", "dev", dev, "up"])?;
            }
            let (ga, sa, ca) = (
                gateway_path_addr(k),
                server_path_addr(k),
                client_path_addr(k),
            );
            g.ip(&["addr", "add", &format!("{ga}/24"), "dev", &up])?;
            s.ip(&["addr", "add", &format!("{sa}/24"), "dev", &dn])?;
            g.ip(&[
                "neigh",
                "replace",
                &sa.to_string(),
                "lladdr",
                &smac,
                "dev",
                &up,
                "nud",
                "permanent",
            ])?;
            s.ip(&[
                "neigh",
                "replace",
                &ga.to_string(),
                "lladdr",
                &gmac,
                "dev",
                &dn,
                "nud",
                "permanent",
            ])?;
            // The client's path-k address, routed by source onto path k.
            c.ip(&["addr", "add", &format!("{ca}/24"), "dev", "eth0"])?;
            let gw_side = Ipv4Addr::new(10, 0, k as u8 + 1, 1);
            g.ip(&["addr", "add", &format!("{gw_side}/24"), "dev", "lan0"])?;
            let table = (TABLE_BASE + k).to_string();
            let net = format!("10.0.{}.0/24", k + 1);
            g.ip(&[
                "rule",
                "add",
                "from",
                &net,
                "lookup",
                &table,
                "priority",
                &(1000 + k).to_string(),
            ])?;
            g.ip(&[
                "route",
                "add",
                "default",
                "via",
                &sa.to_string(),
                "dev",
                &up,
                "table",
                &table,
            ])?;
            g.ip(&[
                "route",
                "add",
                "10.0.0.0/16",
                "dev",
                "lan0",
                "table",
                &table,
            ])?;
            s.ip(&["route", "add", &net, "via", &ga.to_string(), "dev", &dn])?;
            // Datagrams from the gateway's address on path k take path k, whatever their
            // destination (braid's uplink sockets are bound to these addresses).
            g.ip(&[
                "rule",
                "add",
                "from",
                &ga.to_string(),
                "lookup",
                &table,
                "priority",
                &(1100 + k).to_string(),
            ])?;
        }
        Ok(())
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn paths(&self) -> &[PathSpec] {
        &self.paths
    }

    /// Installs fresh links on every path, from `paths` (same count as built; the lab's
    /// own description stays as built), so a run starts with empty queues and its
    /// blackouts count from the returned instant.
    pub fn reset_links(&mut self, paths: &[PathSpec]) -> Result<Instant, LabError> {
        if paths.len() != self.paths.len() {
            return Err(LabError::Config(
                "reset_links: a different number of paths".into(),
            ));
        }
        let mut links = Vec::new();
        for p in paths {
            links.push(self.links_for(p)?);
        }
        let epoch = self.clock.now();
        for (k, (up, down)) in links.into_iter().enumerate() {
            self.emulators[k].replace(up, down, epoch)?;
        }
        Ok(epoch)
    }

    /// Mean capacity of path `k`'s uplink (gateway → server), Mbit/s: its rate, or its
    /// trace's mean rate.
    pub fn uplink_mbps(&self, k: usize) -> f64 {
        self.uplink_mbps.get(k).copied().unwrap_or(0.0)
    }

    /// Mean capacity of path `k`'s downlink (server → gateway), Mbit/s.
    pub fn downlink_mbps(&self, k: usize) -> f64 {
        self.downlink_mbps.get(k).copied().unwrap_or(0.0)
    }

    /// The path of highest mean downlink capacity (the first of equals).
    fn best_path(&mut self) -> usize {
        let mut best = (0, f64::MIN);
        for k in 0..self.paths.len() {
            let rate = self.paths[k]
                .down
                .mean_rate_bps(&mut self.traces)
                .unwrap_or(0.0);
            if rate > best.1 {
                best = (k, rate);
            }
        }
        best.0
    }

    /// Linux MPTCP as this lab runs it (first subflow on the best path).
    pub fn mptcp(&self) -> System {
        System::Mptcp {
            primary: self.mptcp_primary,
        }
    }

    /// Why Linux MPTCP cannot run in this lab, or `None` when it is configured.
    pub fn mptcp_unavailable(&self) -> Option<&str> {
        self.mptcp.as_deref()
    }

    /// The names of the lab's namespaces.
    pub fn namespaces(&self) -> Vec<String> {
        [&self.client, &self.gateway, &self.server, &self.internet]
            .into_iter()
            .chain(&self.path_ns)
            .map(|n| n.name().to_owned())
            .collect()
    }

    /// Each path's name and the latest (up, down) reports of its emulator.
    pub fn path_reports(&self) -> Vec<(String, DirectionReport, DirectionReport)> {
        self.emulators
            .iter()
            .map(|e| {
                let (u, d) = e.reports();
                (e.name().to_owned(), u, d)
            })
            .collect()
    }
}
