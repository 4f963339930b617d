//! One host's smoltcp stack: an [`Interface`] over a device made of the host's packet
//! queue, its [`SocketSet`], ephemeral ports, and sockets lingering after their flow ended.
//!
//! The device holds at most one received packet at a time: the host feeds packets one by
//! one through [`Interface::poll_ingress_single`], so it can prepare a listening socket for
//! exactly the SYN about to be processed. smoltcp gives each connection its own socket and
//! a listening socket becomes the connection it accepts, so a server needs a fresh listener
//! per connection. A listener left waiting would also take a retransmitted SYN meant for a
//! connection already in SYN-RECEIVED (smoltcp hands a packet to the first socket that
//! accepts it). So [`Stack::ingress`] looks at each packet before smoltcp does: a SYN the
//! host's `accept` wants gets a listener created for it alone, and a listener that did not
//! take its SYN (a corrupted packet) is removed at once. Transmitted packets go to the
//! host's queue, whose buffers are recycled, so the steady state allocates nothing per
//! packet.
//!
//! smoltcp's TCP as used here (0.14): initial window 2048 bytes, slow start growing by one
//! MSS per ACK, delayed ACKs of at most 10 ms (every second full segment is ACKed at
//! once), a minimum retransmission timeout of 1 s, and fast retransmit of only the first
//! missing segment (no SACK-based or NewReno recovery), so a burst of losses in one
//! window costs a timeout.

use std::collections::BTreeMap;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SmolDuration, Instant as SmolInstant};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use braid_core::Instant;

use super::packets::Packets;
use super::ports::EphemeralPorts;
use super::transport::{self, Buffers, Socket};
use crate::Packet;

/// How long a socket whose flow is over may take to finish closing before it is dropped.
const LINGER_US: u64 = 60_000_000;
/// Delayed-ACK timer, as smoltcp's default.
const ACK_DELAY_MS: u64 = 10;
/// Closed sockets kept for reuse. Zeroing fresh megabyte buffers for every short flow
/// (and faulting their pages in) would otherwise cost more than the flow's packets.
const SOCKET_POOL_LIMIT: usize = 32;

fn smol(now: Instant) -> SmolInstant {
    SmolInstant::from_micros(now.as_micros().min(i64::MAX as u64) as i64)
}

/// The device: the packet on offer, if any, and the host's outgoing queue.
struct Device<'a> {
    mtu: usize,
    rx: Option<&'a [u8]>,
    out: &'a mut Packets,
}

struct RxToken<'a> {
    packet: &'a [u8],
}

struct TxToken<'a> {
    out: &'a mut Packets,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.packet)
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = self.out.buffer();
        buf.clear();
        buf.resize(len, 0);
        let r = f(&mut buf);
        self.out.push(buf);
        r
    }
}

impl phy::Device for Device<'_> {
    type RxToken<'t>
        = RxToken<'t>
    where
        Self: 't;
    type TxToken<'t>
        = TxToken<'t>
    where
        Self: 't;

    fn receive(&mut self, _: SmolInstant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        let packet = self.rx.take()?;
        Some((RxToken { packet }, TxToken { out: self.out }))
    }

    fn transmit(&mut self, _: SmolInstant) -> Option<TxToken<'_>> {
        Some(TxToken { out: self.out })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        caps
    }
}

/// A socket whose flow is over, kept until its connection has closed.
struct Lingering {
    handle: SocketHandle,
    /// The ephemeral port to free, on the client.
    port: Option<u16>,
    deadline: Instant,
}

pub struct Stack {
    iface: Interface,
    sockets: SocketSet<'static>,
    mtu: usize,
    ports: EphemeralPorts,
    /// Ephemeral ports of open connections.
    port_of: BTreeMap<SocketHandle, u16>,
    lingering: Vec<Lingering>,
    socket_pool: Vec<tcp::Socket<'static>>,
}

impl Stack {
    /// A stack with address `addr`/24, a default route via `.1` of that subnet, and IP MTU
    /// `mtu`. `seed` seeds smoltcp's generator (initial sequence numbers, IP ids).
    pub fn new(addr: [u8; 4], mtu: usize, seed: u64) -> Stack {
        let mut scratch = Packets::default();
        let mut device = Device {
            mtu,
            rx: None,
            out: &mut scratch,
        };
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = seed;
        let mut iface = Interface::new(config, &mut device, SmolInstant::ZERO);
        let [a, b, c, d] = addr;
        iface.update_ip_addrs(|addrs| {
            // Invariant: a fresh interface has room for one address.
            addrs
                .push(IpCidr::new(IpAddress::v4(a, b, c, d), 24))
                .expect("a fresh interface holds one address");
        });
        // Invariant: a fresh route table has room for the default route.
        iface
            .routes_mut()
            .add_default_ipv4_route(Ipv4Address::new(a, b, c, 1))
            .expect("a fresh route table holds the default route");
        Stack {
            iface,
            sockets: SocketSet::new(Vec::new()),
            mtu,
            ports: EphemeralPorts::default(),
            port_of: BTreeMap::new(),
            lingering: Vec::new(),
            socket_pool: Vec::new(),
        }
    }

    /// A new TCP socket with Cubic congestion control.
    fn new_socket(&mut self, buffers: Buffers) -> SocketHandle {
        let pooled = self
            .socket_pool
            .iter()
            .position(|s| s.recv_capacity() == buffers.rx && s.send_capacity() == buffers.tx);
        let mut socket = match pooled {
            Some(i) => self.socket_pool.swap_remove(i),
            None => tcp::Socket::new(
                tcp::SocketBuffer::new(vec![0; buffers.rx]),
                tcp::SocketBuffer::new(vec![0; buffers.tx]),
            ),
        };
        // A fresh controller: `listen` and `connect` reset everything else.
        socket.set_congestion_control(tcp::CongestionControl::Cubic);
        socket.set_nagle_enabled(buffers.nagle);
        socket.set_ack_delay(Some(SmolDuration::from_millis(ACK_DELAY_MS)));
        self.sockets.add(socket)
    }

    fn tcp(&mut self, handle: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(handle)
    }

    /// Offers `packet` to smoltcp and processes it.
    fn ingress_one(&mut self, now: Instant, packet: &[u8], out: &mut Packets) {
        let mut device = Device {
            mtu: self.mtu,
            rx: Some(packet),
            out,
        };
        self.iface
            .poll_ingress_single(smol(now), &mut device, &mut self.sockets);
    }

    /// Closes a socket whose flow is over and hands it to the reaper, which removes it once
    /// the connection has closed (see [`Stack::reap`]) and then frees `port`.
    fn linger_socket(&mut self, now: Instant, handle: SocketHandle, port: Option<u16>) {
        self.tcp(handle).close();
        self.lingering.push(Lingering {
            handle,
            port,
            deadline: Instant::from_micros(now.as_micros().saturating_add(LINGER_US)),
        });
    }

    /// Removes a socket at once, freeing `port`; the socket is kept for reuse by
    /// [`Stack::new_socket`] (`listen` and `connect` reset its state).
    fn discard_socket(&mut self, handle: SocketHandle, port: Option<u16>) {
        if let smoltcp::socket::Socket::Tcp(mut socket) = self.sockets.remove(handle) {
            // Keep the most recent sockets: they have the sizes current flows use.
            if self.socket_pool.len() >= SOCKET_POOL_LIMIT {
                self.socket_pool.remove(0);
            }
            socket.abort();
            self.socket_pool.push(socket);
        }
        if let Some(port) = port {
            self.ports.free(port);
        }
    }
}

impl transport::Stack for Stack {
    type Handle = SocketHandle;

    fn connect(&mut self, remote: [u8; 4], port: u16, buffers: Buffers) -> Option<SocketHandle> {
        let local_port = self.ports.allocate()?;
        let handle = self.new_socket(buffers);
        let [a, b, c, d] = remote;
        let socket = self.sockets.get_mut::<tcp::Socket>(handle);
        match socket.connect(
            self.iface.context(),
            (IpAddress::v4(a, b, c, d), port),
            local_port,
        ) {
            Ok(()) => {
                self.port_of.insert(handle, local_port);
                Some(handle)
            }
            Err(_) => {
                self.discard_socket(handle, Some(local_port));
                None
            }
        }
    }

    fn socket(&mut self, handle: SocketHandle) -> Option<&mut dyn Socket> {
        Some(self.tcp(handle))
    }

    fn ingress(
        &mut self,
        now: Instant,
        packet: Packet,
        out: &mut Packets,
        accept: &mut dyn FnMut(u16, u16) -> Option<Buffers>,
    ) -> Option<(SocketHandle, u16, u16)> {
        let listener = pure_syn(&packet).and_then(|(client_port, server_port)| {
            let buffers = accept(server_port, client_port)?;
            let handle = self.new_socket(buffers);
            if self.tcp(handle).listen(server_port).is_err() {
                self.discard_socket(handle, None);
                return None;
            }
            Some((handle, server_port, client_port))
        });
        self.ingress_one(now, &packet, out);
        out.recycle(packet);
        let accepted = listener.and_then(|(handle, server_port, client_port)| {
            let state = self.tcp(handle).state();
            if matches!(state, tcp::State::Listen | tcp::State::Closed) {
                self.discard_socket(handle, None);
                None
            } else {
                Some((handle, server_port, client_port))
            }
        });
        self.egress(now, out);
        accepted
    }

    /// Lets every socket transmit what it can at `now` (data, ACKs, retransmissions).
    fn egress(&mut self, now: Instant, out: &mut Packets) {
        let mut device = Device {
            mtu: self.mtu,
            rx: None,
            out,
        };
        let now = smol(now);
        while self.iface.poll_egress(now, &mut device, &mut self.sockets)
            == smoltcp::iface::PollResult::SocketStateChanged
        {}
    }

    fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        self.iface
            .poll_at(smol(now), &self.sockets)
            .map(|t| Instant::from_micros(t.total_micros().max(0) as u64))
    }

    fn linger(&mut self, now: Instant, handle: SocketHandle) {
        let port = self.port_of.remove(&handle);
        self.linger_socket(now, handle, port);
    }

    fn discard(&mut self, handle: SocketHandle) {
        let port = self.port_of.remove(&handle);
        self.discard_socket(handle, port);
    }

    /// Removes lingering sockets that have closed (or entered TIME-WAIT: the peer's
    /// retransmitted FIN then meets a RST, which closes it too), or that outstayed the
    /// deadline with nothing left to send. A socket still delivering the tail of a
    /// transfer is kept however long that takes.
    fn reap(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.lingering.len() {
            let l = &self.lingering[i];
            let socket = self.sockets.get::<tcp::Socket>(l.handle);
            let closed = matches!(socket.state(), tcp::State::Closed | tcp::State::TimeWait);
            let stale = now >= l.deadline && socket.send_queue() == 0;
            if closed || stale {
                let l = self.lingering.swap_remove(i);
                self.discard_socket(l.handle, l.port);
            } else {
                i += 1;
            }
        }
    }

    fn lingering(&self) -> usize {
        self.lingering.len()
    }

    fn sockets(&self) -> usize {
        self.sockets.iter().count()
    }
}

impl Socket for tcp::Socket<'static> {
    fn is_connecting(&self) -> bool {
        matches!(self.state(), tcp::State::SynSent | tcp::State::SynReceived)
    }

    fn is_closed(&self) -> bool {
        self.state() == tcp::State::Closed
    }

    fn may_send(&self) -> bool {
        tcp::Socket::may_send(self)
    }

    fn may_recv(&self) -> bool {
        tcp::Socket::may_recv(self)
    }

    fn can_recv(&self) -> bool {
        tcp::Socket::can_recv(self)
    }

    fn send_slice(&mut self, data: &[u8]) -> usize {
        tcp::Socket::send_slice(self, data).unwrap_or(0)
    }

    fn send_filler(&mut self, max: u64) -> u64 {
        // The contents do not matter: enqueue without writing.
        let mut sent = 0;
        while sent < max {
            let left = max - sent;
            let n = self
                .send(|buf| {
                    let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    (n, n)
                })
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            sent += n as u64;
        }
        sent
    }

    fn recv_slice(&mut self, buf: &mut [u8]) -> usize {
        tcp::Socket::recv_slice(self, buf).unwrap_or(0)
    }

    fn recv_discard(&mut self) -> u64 {
        let mut total = 0;
        while tcp::Socket::can_recv(self) {
            let n = self.recv(|buf| (buf.len(), buf.len())).unwrap_or(0);
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        total
    }
}

/// The (source, destination) ports of an IPv4 TCP segment with SYN set and ACK and RST
/// clear. Reads only what it can bounds-check; the stack verifies checksums afterwards.
fn pure_syn(packet: &[u8]) -> Option<(u16, u16)> {
    let first = *packet.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || ihl < 20 || *packet.get(9)? != 6 {
        return None;
    }
    let tcp = packet.get(ihl..)?;
    let flags = *tcp.get(13)?;
    // SYN = 0x02, RST = 0x04, ACK = 0x10.
    if flags & 0x16 != 0x02 {
        return None;
    }
    Some((
        u16::from_be_bytes([tcp[0], tcp[1]]),
        u16::from_be_bytes([tcp[2], tcp[3]]),
    ))
}

#[cfg(test)]
mod tests {
    use super::pure_syn;

    #[test]
    fn pure_syn_reads_only_what_is_there() {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[9] = 6;
        p[20..22].copy_from_slice(&50000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5001u16.to_be_bytes());
        p[33] = 0x02;
        assert_eq!(pure_syn(&p), Some((50000, 5001)));
        p[33] = 0x12;
        assert_eq!(pure_syn(&p), None, "SYN-ACK");
        for n in 0..p.len() {
            let _ = pure_syn(&p[..n]);
        }
        assert_eq!(pure_syn(&[0x4f; 30]), None);
    }
}
