//! End hosts: a client host behind the braid gateway and an internet host behind the braid
//! server, exchanging raw IPv4 packets, and the workloads they run.
//!
//! TCP: each workload's connections run on the Linux-like model of [`tcp`] (`tcp =
//! "linux"`, the default: initial window 10, HyStart and Cubic, SACK with RACK-TLP and PRR,
//! 200 ms minimum RTO, 40 ms delayed ACKs) or, on request, on smoltcp 0.14 (`tcp =
//! "smoltcp"`, `smol`: 2048-byte initial window, 1 s minimum RTO, no SACK). A host holds
//! the stacks its workloads need, each over the host's packet queues, one filled by
//! [`Node::receive`] and one drained by [`Node::poll_transmit`]. The client host opens
//! every TCP connection; the internet host serves them. UDP constant-bit-rate traffic is
//! built and measured by hand beside the stacks: the host hands UDP datagrams for a CBR
//! port to its sink and everything else to TCP.
//!
//! Workloads ([`WorkloadConfig`]): `web`, the short-flow workload of PluriBus §6.1 with
//! SURGE flow sizes; `bulk`; `udp-cbr`; and `fetch-loop` (PluriBus §6.5.1). Workload `i`
//! serves TCP on port `TCP_PORT_BASE + i` and sends CBR on UDP port `UDP_PORT_BASE + i`,
//! so flows of different workloads are told apart; client ports are ephemeral, handed
//! out in turn so a port is reused only after every other one has been.
//!
//! Driving contract (see [`Node`]): time comes in as `now` and never goes back. After
//! [`Node::receive`], the next [`Node::poll_transmit`] processes what arrived; timers
//! (TCP's retransmissions and delayed ACKs, flow arrivals, CBR packets) fire in
//! [`Node::handle_timeout`] at [`Node::poll_timeout`]. Everything is seeded from the run's
//! seed, so the same seed gives the same packets.

mod arrivals;
mod client;
mod de;
pub(crate) mod packets;
mod ports;
mod report;
mod server;
mod smol;
pub mod surge;
pub mod tcp;
pub(crate) mod transport;
mod udp;
mod workload;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fmt;

use serde::Serialize;

use braid_core::time::earliest;
use braid_core::Instant;

use crate::{Node, Packet, Rng};

use client::ClientPart;
use packets::Packets;
use server::{Server, ServerPart};
use transport::Stacks;
use udp::{parse_udp, CbrSink, CbrSource};
use workload::{Shape, Spec, MAX_WORKLOADS, MIN_MTU};

pub use arrivals::WebArrivals;
pub use report::{BulkFlowStats, BulkStats, FlowStats, TcpReport, WorkloadReport};
pub use udp::CbrStats;
pub use workload::{
    BulkConfig, Direction, FetchLoopConfig, InitialWindow, Kind, Tcp, TcpCc, UdpCbrConfig,
    WebConfig, WorkloadConfig, WorkloadError,
};

/// The client host's address (behind the braid gateway).
pub const CLIENT_ADDR: [u8; 4] = [10, 0, 0, 2];
/// The internet host's address (behind the braid server).
pub const INTERNET_ADDR: [u8; 4] = [10, 1, 0, 2];
/// Workload `i` serves TCP on this port plus `i`.
pub const TCP_PORT_BASE: u16 = 5001;
/// Workload `i` sends CBR on this UDP port plus `i` (source and destination).
pub const UDP_PORT_BASE: u16 = 7001;
/// Received packets waiting for processing beyond this many are dropped and counted.
const RX_LIMIT: usize = 65_536;

/// Which end a host is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Client,
    Internet,
}

/// Packet counters of one host.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct HostStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    /// Received while `RX_LIMIT` packets already waited.
    pub packets_dropped: u64,
}

/// A simulated end host: a TCP/IP stack and its part of every workload.
pub struct Host {
    role: Role,
    addr: [u8; 4],
    specs: Vec<Spec>,
    stacks: Stacks,
    /// Packets waiting for the network, and spare buffers.
    out: Packets,
    /// Received packets, each with whether its checksums are known to hold.
    rx: VecDeque<(Packet, bool)>,
    /// When the oldest unprocessed packet arrived.
    rx_since: Option<Instant>,
    /// Client side of each TCP workload, by workload index (client host only).
    clients: Vec<Option<ClientPart>>,
    /// Server side of the TCP workloads (internet host only).
    server: Server,
    sources: Vec<(usize, CbrSource)>,
    /// (UDP port, workload index, sink).
    sinks: Vec<(u16, usize, CbrSink)>,
    next_timeout: Option<Instant>,
    stats: HostStats,
}

/// Builds the client host and the internet host for `workloads`, checking each.
///
/// `seed` seeds every random choice (TCP's initial sequence numbers, arrivals, sizes); `end`
/// is when the run stops (the default `stop_s`); `mtu` is both hosts' IP MTU, the tunnel's
/// inner MTU, from which TCP's MSS follows (MTU − 40).
pub fn build_hosts(
    workloads: &[WorkloadConfig],
    seed: u64,
    end: Instant,
    mtu: usize,
) -> Result<(Host, Host), WorkloadError> {
    build_hosts_with(workloads, seed, end, mtu, |_, tcp| tcp)
}

/// [`build_hosts`], with `tcp(role, configured)` choosing each host's TCP for each TCP
/// workload (tests run one implementation against the other this way).
fn build_hosts_with(
    workloads: &[WorkloadConfig],
    seed: u64,
    end: Instant,
    mtu: usize,
    tcp: impl Fn(Role, Tcp) -> Tcp,
) -> Result<(Host, Host), WorkloadError> {
    if !(MIN_MTU..=usize::from(u16::MAX)).contains(&mtu) {
        return Err(WorkloadError::Mtu { mtu });
    }
    if workloads.len() > MAX_WORKLOADS {
        return Err(WorkloadError::TooMany {
            count: workloads.len(),
        });
    }
    let specs = workloads
        .iter()
        .enumerate()
        .map(|(i, w)| w.to_spec(i, end, mtu))
        .collect::<Result<Vec<_>, _>>()?;
    let for_role = |role| {
        let mut specs = specs.clone();
        for spec in &mut specs {
            spec.tcp = spec.tcp.map(|t| tcp(role, t));
        }
        specs
    };
    let client_specs = for_role(Role::Client);
    let mut client = Host::new(Role::Client, CLIENT_ADDR, &client_specs, seed, mtu);
    let mut internet = Host::new(
        Role::Internet,
        INTERNET_ADDR,
        &for_role(Role::Internet),
        seed,
        mtu,
    );
    let mut server_parts = Vec::with_capacity(specs.len());
    for spec in &client_specs {
        // Invariant: at most MAX_WORKLOADS (1000) workloads, so ports stay below 9000.
        let offset = u16::try_from(spec.index).expect("workload count is bounded");
        match spec.shape {
            Shape::Cbr {
                packet_bytes,
                interval_us,
            } => {
                let port = UDP_PORT_BASE + offset;
                let (from, to) = match spec.direction {
                    Direction::Up => (&mut client, &mut internet),
                    Direction::Down => (&mut internet, &mut client),
                };
                let source = CbrSource::new(
                    from.addr,
                    to.addr,
                    port,
                    packet_bytes,
                    (spec.start, spec.stop),
                    interval_us,
                );
                from.sources.push((spec.index, source));
                let rng = Rng::child(seed, &format!("workload/{}/delay", spec.index));
                to.sinks.push((port, spec.index, CbrSink::new(rng)));
                client.clients.push(None);
                server_parts.push(None);
            }
            _ => {
                let port = TCP_PORT_BASE + offset;
                client
                    .clients
                    .push(Some(ClientPart::new(spec, port, seed, end)));
                server_parts.push(Some(ServerPart::new(spec, end)));
            }
        }
    }
    internet.server = Server::new(TCP_PORT_BASE, server_parts);
    client.refresh_timeout(Instant::ZERO);
    internet.refresh_timeout(Instant::ZERO);
    Ok((client, internet))
}

/// One report per workload, in configuration order, from the two hosts `build_hosts`
/// returned, at the end of the run.
pub fn report(client: &Host, internet: &Host, end: Instant) -> Vec<WorkloadReport> {
    client
        .specs
        .iter()
        .filter_map(|spec| {
            if spec.kind == Kind::UdpCbr {
                let (from, to) = match spec.direction {
                    Direction::Up => (client, internet),
                    Direction::Down => (internet, client),
                };
                let source = from.sources.iter().find(|(i, _)| *i == spec.index)?;
                let sink = to.sinks.iter().find(|(_, i, _)| *i == spec.index)?;
                let stats = sink.2.report(source.1.sent(), source.1.payload_bytes());
                Some(report::cbr_report(spec, stats))
            } else {
                let c = client.clients.get(spec.index)?.as_ref()?;
                let s = internet.server.parts.get(spec.index)?.as_ref()?;
                let sender = match spec.direction {
                    Direction::Down => internet,
                    Direction::Up => client,
                };
                let tcp = sender.tcp_report(spec);
                Some(report::tcp_report(spec, c, s, tcp, end))
            }
        })
        .collect()
}

impl Host {
    fn new(role: Role, addr: [u8; 4], specs: &[Spec], seed: u64, mtu: usize) -> Host {
        let label = match role {
            Role::Client => "host/client",
            Role::Internet => "host/internet",
        };
        let kinds: Vec<Tcp> = specs.iter().filter_map(|s| s.tcp).collect();
        Host {
            role,
            addr,
            specs: specs.to_vec(),
            stacks: Stacks::new(addr, mtu, &kinds, Rng::child(seed, label)),
            out: Packets::default(),
            rx: VecDeque::new(),
            rx_since: None,
            clients: Vec::new(),
            server: Server::default(),
            sources: Vec::new(),
            sinks: Vec::new(),
            next_timeout: None,
            stats: HostStats::default(),
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn addr(&self) -> [u8; 4] {
        self.addr
    }

    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// Flows of workload `index` this host has open as a client (0 on the internet host).
    pub fn open_flows(&self, index: usize) -> usize {
        self.clients
            .get(index)
            .and_then(Option::as_ref)
            .map_or(0, ClientPart::open_flows)
    }

    /// Sockets of finished flows still closing.
    pub fn lingering_sockets(&self) -> usize {
        self.stacks.lingering()
    }

    /// Sockets in the stacks: open flows, connections being served, and lingering ones.
    pub fn sockets(&self) -> usize {
        self.stacks.sockets()
    }

    /// The TCP implementation and, for the model, the sending counters of `spec`'s
    /// connections on this host.
    fn tcp_report(&self, spec: &Spec) -> Option<TcpReport> {
        let stack = spec.tcp?;
        let port = TCP_PORT_BASE + u16::try_from(spec.index).ok()?;
        let sender = match (stack, &self.stacks.linux) {
            (Tcp::Linux, Some(s)) => Some(s.sender_stats(port)),
            _ => None,
        };
        Some(TcpReport { stack, sender })
    }

    /// Which stack takes a received packet: that of the workload whose server port it
    /// carries, or the default one.
    fn route(&self, packet: &[u8]) -> Option<Tcp> {
        let claimed = tcp_ports(packet).and_then(|(src, dst)| {
            let server = match self.role {
                Role::Client => src,
                Role::Internet => dst,
            };
            let index = usize::from(server.checked_sub(TCP_PORT_BASE)?);
            self.specs.get(index)?.tcp
        });
        claimed.or_else(|| self.stacks.default_kind())
    }

    /// Opens due flows, emits due CBR packets, processes received packets, runs the
    /// workloads' protocols, and lets the stacks transmit.
    fn drive(&mut self, now: Instant) {
        for part in self.clients.iter_mut().flatten() {
            part.fire(&mut self.stacks, now);
        }
        for (_, source) in &mut self.sources {
            loop {
                let mut buf = self.out.buffer();
                if !source.pop_due(now, &mut buf) {
                    self.out.recycle(buf);
                    break;
                }
                self.out.push(buf);
            }
        }
        // Each segment is answered before the next is read, as a kernel does: packets that
        // arrive at the same instant still get an ACK for every second segment, which
        // clocks the sender's slow start.
        while let Some((packet, checksums_verified)) = self.rx.pop_front() {
            let kind = self.route(&packet);
            let server = &mut self.server;
            let mut admit = |local, remote| server.admit(local, remote);
            let accepted = self.stacks.ingress(
                kind,
                now,
                packet,
                checksums_verified,
                &mut self.out,
                &mut admit,
            );
            if let Some((conn, local, remote)) = accepted {
                self.server.on_accepted(conn, local, remote);
            }
        }
        self.rx_since = None;
        for part in self.clients.iter_mut().flatten() {
            part.service(&mut self.stacks, now);
        }
        self.server.service(&mut self.stacks, now);
        self.stacks.egress(now, &mut self.out);
        self.stacks.reap(now);
        self.refresh_timeout(now);
    }

    fn refresh_timeout(&mut self, now: Instant) {
        let timers = self
            .clients
            .iter()
            .flatten()
            .filter_map(ClientPart::next_timer)
            .chain(self.sources.iter().filter_map(|(_, s)| s.next_due()));
        let next = self.stacks.poll_at(now).into_iter().chain(timers).min();
        // Whatever was due has just run; a deadline not in the future means "as soon as
        // time moves", never "again at the same instant".
        let soonest = Instant::from_micros(now.as_micros().saturating_add(1));
        self.next_timeout = next.map(|t| t.max(soonest));
    }

    /// A copy of `bytes` in one of the host's spare buffers (the world hands it packets
    /// this way, and they return to the pool once consumed).
    pub(crate) fn buffer_with(&mut self, bytes: &[u8]) -> Packet {
        let mut p = self.out.buffer();
        p.clear();
        p.extend_from_slice(bytes);
        p
    }

    /// Takes back a packet the host sent, once the world has consumed it.
    pub(crate) fn recycle(&mut self, packet: Packet) {
        self.out.recycle(packet);
    }

    /// [`Node::poll_transmit`], with whether the packet's IPv4 and TCP checksums were
    /// written over it as it stands (the TCP model's segments), so that they hold.
    pub(crate) fn poll_transmit_checked(&mut self, now: Instant) -> Option<(Packet, bool)> {
        if !self.rx.is_empty() {
            self.drive(now);
        }
        let packet = self.out.pop_checked()?;
        self.stats.packets_sent += 1;
        Some(packet)
    }

    /// [`Node::receive`] of a packet whose IPv4 and TCP checksums are known to hold when
    /// `checksums_verified` (one the engine rebuilt from header compression:
    /// [`braid_core::Session::delivered_checksums_verified`]).
    pub(crate) fn receive_checked(
        &mut self,
        now: Instant,
        packet: Packet,
        checksums_verified: bool,
    ) {
        self.stats.packets_received += 1;
        if let Some(datagram) = parse_udp(&packet, self.addr) {
            if let Some((_, _, sink)) = self
                .sinks
                .iter_mut()
                .find(|(port, _, _)| *port == datagram.dst_port)
            {
                sink.on_datagram(now, &datagram);
                self.out.recycle(packet);
                return;
            }
        }
        if self.rx.len() >= RX_LIMIT {
            self.stats.packets_dropped += 1;
            return;
        }
        self.rx.push_back((packet, checksums_verified));
        self.rx_since.get_or_insert(now);
    }
}

impl Node for Host {
    fn receive(&mut self, now: Instant, packet: Packet) {
        self.receive_checked(now, packet, false);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Packet> {
        self.poll_transmit_checked(now).map(|(p, _)| p)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.rx_since, self.next_timeout)
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.drive(now);
    }
}

/// The (source, destination) ports of an IPv4 TCP segment, read only as far as it can be
/// bounds-checked; the stack checks the rest.
fn tcp_ports(packet: &[u8]) -> Option<(u16, u16)> {
    let first = *packet.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || *packet.get(9)? != tcp::wire::PROTO_TCP {
        return None;
    }
    let ports = packet.get(ihl..ihl.checked_add(4)?)?;
    Some((
        u16::from_be_bytes([ports[0], ports[1]]),
        u16::from_be_bytes([ports[2], ports[3]]),
    ))
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("role", &self.role)
            .field("addr", &self.addr)
            .field("workloads", &self.specs.len())
            .field("stats", &self.stats)
            .field("next_timeout", &self.next_timeout)
            .finish_non_exhaustive()
    }
}
