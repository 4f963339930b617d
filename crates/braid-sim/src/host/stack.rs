//! One host's TCP/IP stack: a smoltcp [`Interface`] over a device made of two packet
//! queues, its [`SocketSet`], ephemeral ports, and sockets lingering after their flow ended.
//!
//! The device holds at most one received packet at a time: the host feeds packets one by
//! one through [`Interface::poll_ingress_single`], so it can prepare a listening socket for
//! exactly the SYN about to be processed (see `super::server`). Transmitted packets queue
//! until the world pulls them. Packet buffers are recycled through a small pool, so the
//! steady state allocates nothing per packet.

use std::collections::VecDeque;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SmolDuration, Instant as SmolInstant};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use braid_core::Instant;

use crate::Packet;

/// Packet buffers kept for reuse.
const POOL_LIMIT: usize = 256;
/// First and last ephemeral port (RFC 6335 dynamic range).
const EPHEMERAL: (u16, u16) = (49152, 65535);
/// How long a socket whose flow is over may take to finish closing before it is dropped.
const LINGER_US: u64 = 60_000_000;
/// Delayed-ACK timer, as smoltcp's default.
const ACK_DELAY_MS: u64 = 10;
/// Closed sockets kept for reuse. Zeroing fresh megabyte buffers for every short flow
/// (and faulting their pages in) would otherwise cost more than the flow's packets.
const SOCKET_POOL_LIMIT: usize = 32;

pub fn smol(now: Instant) -> SmolInstant {
    SmolInstant::from_micros(now.as_micros().min(i64::MAX as u64) as i64)
}

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
}

/// The device: one received packet on offer, a transmit queue, a buffer pool.
struct Queues {
    mtu: usize,
    rx: Packet,
    rx_ready: bool,
    tx: VecDeque<Packet>,
    pool: Vec<Packet>,
}

struct RxToken<'a> {
    packet: &'a [u8],
}

struct TxToken<'a> {
    tx: &'a mut VecDeque<Packet>,
    pool: &'a mut Vec<Packet>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.packet)
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.resize(len, 0);
        let r = f(&mut buf);
        self.tx.push_back(buf);
        r
    }
}

impl phy::Device for Queues {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: SmolInstant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        if !self.rx_ready {
            return None;
        }
        self.rx_ready = false;
        Some((
            RxToken { packet: &self.rx },
            TxToken {
                tx: &mut self.tx,
                pool: &mut self.pool,
            },
        ))
    }

    fn transmit(&mut self, _: SmolInstant) -> Option<TxToken<'_>> {
        Some(TxToken {
            tx: &mut self.tx,
            pool: &mut self.pool,
        })
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
    pub sockets: SocketSet<'static>,
    device: Queues,
    ports_in_use: Vec<u64>,
    next_port: u16,
    lingering: Vec<Lingering>,
    socket_pool: Vec<tcp::Socket<'static>>,
}

impl Stack {
    /// A stack with address `addr`/24, a default route via `.1` of that subnet, and IP MTU
    /// `mtu`. `seed` seeds smoltcp's generator (initial sequence numbers, IP ids).
    pub fn new(addr: [u8; 4], mtu: usize, seed: u64) -> Stack {
        let mut device = Queues {
            mtu,
            rx: Vec::new(),
            rx_ready: false,
            tx: VecDeque::new(),
            pool: Vec::new(),
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
            device,
            ports_in_use: vec![0; 1024],
            next_port: EPHEMERAL.0,
            lingering: Vec::new(),
            socket_pool: Vec::new(),
        }
    }

    /// A new TCP socket with Cubic congestion control.
    pub fn new_socket(&mut self, buffers: Buffers) -> SocketHandle {
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

    /// Opens a connection from an ephemeral port to `remote:port`; `None` when every
    /// ephemeral port is taken or the address is unusable.
    pub fn connect(
        &mut self,
        remote: [u8; 4],
        port: u16,
        buffers: Buffers,
    ) -> Option<(SocketHandle, u16)> {
        let local_port = self.allocate_port()?;
        let handle = self.new_socket(buffers);
        let [a, b, c, d] = remote;
        let socket = self.sockets.get_mut::<tcp::Socket>(handle);
        match socket.connect(
            self.iface.context(),
            (IpAddress::v4(a, b, c, d), port),
            local_port,
        ) {
            Ok(()) => Some((handle, local_port)),
            Err(_) => {
                self.discard(handle, Some(local_port));
                None
            }
        }
    }

    pub fn socket(&mut self, handle: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(handle)
    }

    /// Offers `packet` to smoltcp and processes it.
    pub fn ingress_one(&mut self, now: Instant, packet: Packet) {
        let old = std::mem::replace(&mut self.device.rx, packet);
        self.recycle(old);
        self.device.rx_ready = true;
        self.iface
            .poll_ingress_single(smol(now), &mut self.device, &mut self.sockets);
        self.device.rx_ready = false;
    }

    /// Lets every socket transmit what it can at `now` (data, ACKs, retransmissions).
    pub fn egress(&mut self, now: Instant) {
        let now = smol(now);
        while self
            .iface
            .poll_egress(now, &mut self.device, &mut self.sockets)
            == smoltcp::iface::PollResult::SocketStateChanged
        {}
    }

    /// When smoltcp next needs polling.
    pub fn poll_at(&mut self, now: Instant) -> Option<Instant> {
        self.iface
            .poll_at(smol(now), &self.sockets)
            .map(|t| Instant::from_micros(t.total_micros().max(0) as u64))
    }

    pub fn pop_transmit(&mut self) -> Option<Packet> {
        self.device.tx.pop_front()
    }

    pub fn push_transmit(&mut self, packet: Packet) {
        self.device.tx.push_back(packet);
    }

    /// An empty buffer for an outgoing packet.
    pub fn buffer(&mut self) -> Packet {
        self.device.pool.pop().unwrap_or_default()
    }

    /// Returns a consumed packet's buffer to the pool.
    pub fn recycle(&mut self, packet: Packet) {
        if self.device.pool.len() < POOL_LIMIT && packet.capacity() > 0 {
            self.device.pool.push(packet);
        }
    }

    /// Closes a socket whose flow is over and hands it to the reaper, which removes it once
    /// the connection has closed (see [`Stack::reap`]) and then frees `port`.
    pub fn linger(&mut self, now: Instant, handle: SocketHandle, port: Option<u16>) {
        self.sockets.get_mut::<tcp::Socket>(handle).close();
        self.lingering.push(Lingering {
            handle,
            port,
            deadline: Instant::from_micros(now.as_micros().saturating_add(LINGER_US)),
        });
    }

    /// Removes a socket at once, freeing `port`; the socket is kept for reuse by
    /// [`Stack::new_socket`] (`listen` and `connect` reset its state).
    pub fn discard(&mut self, handle: SocketHandle, port: Option<u16>) {
        if let smoltcp::socket::Socket::Tcp(mut socket) = self.sockets.remove(handle) {
            // Keep the most recent sockets: they have the sizes current flows use.
            if self.socket_pool.len() >= SOCKET_POOL_LIMIT {
                self.socket_pool.remove(0);
            }
            socket.abort();
            self.socket_pool.push(socket);
        }
        if let Some(port) = port {
            self.free_port(port);
        }
    }

    /// Removes lingering sockets that have closed (or entered TIME-WAIT: the peer's
    /// retransmitted FIN then meets a RST, which closes it too), or that outstayed the
    /// deadline with nothing left to send. A socket still delivering the tail of a
    /// transfer is kept however long that takes.
    pub fn reap(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.lingering.len() {
            let l = &self.lingering[i];
            let socket = self.sockets.get::<tcp::Socket>(l.handle);
            let closed = matches!(socket.state(), tcp::State::Closed | tcp::State::TimeWait);
            let stale = now >= l.deadline && socket.send_queue() == 0;
            if closed || stale {
                let l = self.lingering.swap_remove(i);
                self.discard(l.handle, l.port);
            } else {
                i += 1;
            }
        }
    }

    pub fn lingering(&self) -> usize {
        self.lingering.len()
    }

    /// The next free ephemeral port after the last one handed out, so a port is reused
    /// only after all others have been.
    fn allocate_port(&mut self) -> Option<u16> {
        let span = u32::from(EPHEMERAL.1 - EPHEMERAL.0) + 1;
        for _ in 0..span {
            let port = self.next_port;
            self.next_port = if port == EPHEMERAL.1 {
                EPHEMERAL.0
            } else {
                port + 1
            };
            let (word, bit) = (usize::from(port) / 64, port % 64);
            if self.ports_in_use[word] & (1 << bit) == 0 {
                self.ports_in_use[word] |= 1 << bit;
                return Some(port);
            }
        }
        None
    }

    fn free_port(&mut self, port: u16) {
        self.ports_in_use[usize::from(port) / 64] &= !(1 << (port % 64));
    }
}
