//! The one interface the workloads speak TCP through, whichever implementation carries
//! it: [`Stack`] is what the host drives (packets in and out, timers, connections opened,
//! accepted and closed), [`Socket`] what a workload does with one connection. smoltcp
//! (`super::smol`) and the Linux-like model (`super::tcp`) both implement them; [`Stacks`]
//! holds a host's two and routes each packet and handle to the right one.

use braid_core::time::earliest;
use braid_core::Instant;
use smoltcp::iface::SocketHandle;

use super::packets::Packets;
use super::workload::{InitialWindow, Tcp};
use super::{smol, tcp};
use crate::{Packet, Rng};

/// Socket buffer sizes and options of one connection.
#[derive(Clone, Copy, Debug)]
pub struct Buffers {
    pub rx: usize,
    pub tx: usize,
    /// Nagle's algorithm. In smoltcp it is also the sender's only silly-window avoidance:
    /// without it a window-limited bulk sender fills every small window opening with a
    /// small segment. Off for request/response flows, as web servers and clients set
    /// TCP_NODELAY.
    pub nagle: bool,
    /// The Linux model's initial window; `None` for its default (smoltcp ignores it).
    pub initial_window: Option<InitialWindow>,
    /// The Linux model's sender runs TCP-PRISM (`tcp_cc = "prism"`).
    pub prism: bool,
    /// The Linux model offers and accepts SACK (`sack = false` turns it off).
    pub sack: bool,
}

/// What a workload does with one connection.
pub trait Socket {
    /// The handshake is not over yet.
    fn is_connecting(&self) -> bool;
    fn is_closed(&self) -> bool;
    /// The application may queue data (the connection is open for sending).
    fn may_send(&self) -> bool;
    /// More data may arrive, or some is waiting to be read.
    fn may_recv(&self) -> bool;
    /// Data is waiting to be read.
    fn can_recv(&self) -> bool;
    /// Queues what fits of `data`; returns how much.
    fn send_slice(&mut self, data: &[u8]) -> usize;
    /// Queues up to `max` bytes whose contents do not matter; returns how many.
    fn send_filler(&mut self, max: u64) -> u64;
    /// Reads into `buf`; returns how much.
    fn recv_slice(&mut self, buf: &mut [u8]) -> usize;
    /// Reads and drops everything waiting; returns how much.
    fn recv_discard(&mut self) -> u64;
    /// A count that moves whenever what the application sees may have changed (state,
    /// data to read, room to send); `None` when the stack keeps none.
    fn version(&self) -> Option<u64> {
        None
    }
}

/// A TCP stack as a host drives it.
pub trait Stack {
    type Handle: Copy;
    /// Opens a connection from an ephemeral port to `remote:port`; `None` when that is not
    /// possible (no free port).
    fn connect(&mut self, remote: [u8; 4], port: u16, buffers: Buffers) -> Option<Self::Handle>;
    fn socket(&mut self, handle: Self::Handle) -> Option<&mut dyn Socket>;
    /// Processes one received packet and sends any immediate response into `out`. A SYN
    /// that would open a new connection is offered to `accept(local port, remote port)`,
    /// which returns its buffers or `None` to refuse it. Returns an accepted connection
    /// with its local and remote ports.
    fn ingress(
        &mut self,
        now: Instant,
        packet: Packet,
        out: &mut Packets,
        accept: &mut dyn FnMut(u16, u16) -> Option<Buffers>,
    ) -> Option<(Self::Handle, u16, u16)>;
    /// Fires due timers and sends what every connection can.
    fn egress(&mut self, now: Instant, out: &mut Packets);
    /// When the stack next needs [`Stack::egress`].
    fn poll_at(&mut self, now: Instant) -> Option<Instant>;
    /// Closes a connection whose flow is over; it is removed once it has closed.
    fn linger(&mut self, now: Instant, handle: Self::Handle);
    /// Removes a connection at once.
    fn discard(&mut self, handle: Self::Handle);
    /// Removes lingering connections that are done.
    fn reap(&mut self, now: Instant);
    fn lingering(&self) -> usize;
    fn sockets(&self) -> usize;
}

/// A connection of either stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conn {
    Smoltcp(SocketHandle),
    Linux(tcp::ConnId),
}

/// A host's TCP stacks: each exists when some workload uses it.
pub struct Stacks {
    pub smoltcp: Option<smol::Stack>,
    pub linux: Option<tcp::Stack>,
}

impl Stacks {
    /// The stacks `kinds` need, for a host at `addr` with IP MTU `mtu`; `rng` seeds them.
    pub fn new(addr: [u8; 4], mtu: usize, kinds: &[Tcp], mut rng: Rng) -> Stacks {
        // Drawn in a fixed order whatever is built, so each stack's seed depends only on
        // the host's.
        let smol_seed = rng.next_u64();
        let linux_seed = rng.next_u64();
        Stacks {
            smoltcp: kinds
                .contains(&Tcp::Smoltcp)
                .then(|| smol::Stack::new(addr, mtu, smol_seed)),
            linux: kinds
                .contains(&Tcp::Linux)
                .then(|| tcp::Stack::new(addr, mtu, Rng::new(linux_seed))),
        }
    }

    /// The stack that takes packets no workload claims: the model if there is one.
    pub fn default_kind(&self) -> Option<Tcp> {
        if self.linux.is_some() {
            Some(Tcp::Linux)
        } else if self.smoltcp.is_some() {
            Some(Tcp::Smoltcp)
        } else {
            None
        }
    }

    pub fn connect(
        &mut self,
        kind: Tcp,
        remote: [u8; 4],
        port: u16,
        buffers: Buffers,
    ) -> Option<Conn> {
        match kind {
            Tcp::Smoltcp => self
                .smoltcp
                .as_mut()?
                .connect(remote, port, buffers)
                .map(Conn::Smoltcp),
            Tcp::Linux => self
                .linux
                .as_mut()?
                .connect(remote, port, buffers)
                .map(Conn::Linux),
        }
    }

    pub fn socket(&mut self, conn: Conn) -> Option<&mut dyn Socket> {
        match conn {
            Conn::Smoltcp(h) => self.smoltcp.as_mut()?.socket(h),
            Conn::Linux(h) => Stack::socket(self.linux.as_mut()?, h),
        }
    }

    /// Hands `packet` to the stack `kind` (dropping it if there is none), then lets that
    /// stack answer. `checksums_verified`: the packet's checksums are known to hold (the
    /// model then skips summing it; smoltcp checks them as always).
    pub fn ingress(
        &mut self,
        kind: Option<Tcp>,
        now: Instant,
        packet: Packet,
        checksums_verified: bool,
        out: &mut Packets,
        accept: &mut dyn FnMut(u16, u16) -> Option<Buffers>,
    ) -> Option<(Conn, u16, u16)> {
        match (kind, &mut self.smoltcp, &mut self.linux) {
            (Some(Tcp::Smoltcp), Some(s), _) => s
                .ingress(now, packet, out, accept)
                .map(|(h, l, r)| (Conn::Smoltcp(h), l, r)),
            (Some(Tcp::Linux), _, Some(s)) => s
                .ingress_checked(now, packet, checksums_verified, out, accept)
                .map(|(h, l, r)| (Conn::Linux(h), l, r)),
            _ => {
                out.recycle(packet);
                None
            }
        }
    }

    pub fn egress(&mut self, now: Instant, out: &mut Packets) {
        if let Some(s) = &mut self.smoltcp {
            s.egress(now, out);
        }
        if let Some(s) = &mut self.linux {
            s.egress(now, out);
        }
    }

    pub fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        let a = self.smoltcp.as_mut().and_then(|s| s.poll_at(now));
        let b = self.linux.as_mut().and_then(|s| Stack::poll_at(s, now));
        earliest(a, b)
    }

    pub fn linger(&mut self, now: Instant, conn: Conn) {
        match (conn, &mut self.smoltcp, &mut self.linux) {
            (Conn::Smoltcp(h), Some(s), _) => s.linger(now, h),
            (Conn::Linux(h), _, Some(s)) => Stack::linger(s, now, h),
            _ => {}
        }
    }

    pub fn discard(&mut self, conn: Conn) {
        match (conn, &mut self.smoltcp, &mut self.linux) {
            (Conn::Smoltcp(h), Some(s), _) => s.discard(h),
            (Conn::Linux(h), _, Some(s)) => Stack::discard(s, h),
            _ => {}
        }
    }

    pub fn reap(&mut self, now: Instant) {
        if let Some(s) = &mut self.smoltcp {
            s.reap(now);
        }
        if let Some(s) = &mut self.linux {
            Stack::reap(s, now);
        }
    }

    pub fn lingering(&self) -> usize {
        self.smoltcp.as_ref().map_or(0, Stack::lingering)
            + self.linux.as_ref().map_or(0, Stack::lingering)
    }

    pub fn sockets(&self) -> usize {
        self.smoltcp.as_ref().map_or(0, Stack::sockets)
            + self.linux.as_ref().map_or(0, Stack::sockets)
    }
}

impl Stack for tcp::Stack {
    type Handle = tcp::ConnId;

    fn connect(&mut self, remote: [u8; 4], port: u16, buffers: Buffers) -> Option<tcp::ConnId> {
        tcp::Stack::connect(self, remote, port, buffers)
    }

    fn socket(&mut self, handle: tcp::ConnId) -> Option<&mut dyn Socket> {
        self.conn(handle).map(|c| c as &mut dyn Socket)
    }

    fn ingress(
        &mut self,
        now: Instant,
        packet: Packet,
        out: &mut Packets,
        accept: &mut dyn FnMut(u16, u16) -> Option<Buffers>,
    ) -> Option<(tcp::ConnId, u16, u16)> {
        tcp::Stack::ingress(self, now, packet, out, accept)
    }

    fn egress(&mut self, now: Instant, out: &mut Packets) {
        tcp::Stack::egress(self, now, out);
    }

    fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        tcp::Stack::poll_at(self, now)
    }

    fn linger(&mut self, now: Instant, handle: tcp::ConnId) {
        tcp::Stack::linger(self, now, handle);
    }

    fn discard(&mut self, handle: tcp::ConnId) {
        tcp::Stack::discard(self, handle);
    }

    fn reap(&mut self, now: Instant) {
        tcp::Stack::reap(self, now);
    }

    fn lingering(&self) -> usize {
        tcp::Stack::lingering(self)
    }

    fn sockets(&self) -> usize {
        self.connections()
    }
}

impl Socket for tcp::Conn {
    fn is_connecting(&self) -> bool {
        matches!(self.state(), tcp::State::SynSent | tcp::State::SynReceived)
    }

    fn is_closed(&self) -> bool {
        self.state() == tcp::State::Closed
    }

    fn may_send(&self) -> bool {
        tcp::Conn::may_send(self)
    }

    fn may_recv(&self) -> bool {
        tcp::Conn::may_recv(self)
    }

    fn can_recv(&self) -> bool {
        self.readable() > 0
    }

    fn send_slice(&mut self, data: &[u8]) -> usize {
        self.write(data)
    }

    fn send_filler(&mut self, max: u64) -> u64 {
        self.write_zeros(usize::try_from(max).unwrap_or(usize::MAX)) as u64
    }

    fn recv_slice(&mut self, buf: &mut [u8]) -> usize {
        self.read(buf)
    }

    fn recv_discard(&mut self) -> u64 {
        self.discard(usize::MAX) as u64
    }

    fn version(&self) -> Option<u64> {
        Some(tcp::Conn::version(self))
    }
}
