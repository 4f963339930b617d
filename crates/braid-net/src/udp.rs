//! UDP sockets with batched I/O: `quinn-udp` sends a run of equal-sized datagrams to one
//! destination as one GSO `sendmsg`, and receives with `recvmmsg` and GRO, so that one
//! system call moves tens of datagrams. Each gateway uplink has its own socket, bound to
//! its interface (`SO_BINDTODEVICE`) or source address; the server has one socket for all.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, RawFd};

use quinn_udp::{RecvMeta, Transmit, UdpSocketState, BATCH_SIZE};
use socket2::{Domain, Protocol, Socket, Type};

use crate::config::Binding;

/// Receive buffer per datagram group: a GRO run of up to 64 KB.
pub const RX_SLOT: usize = 65_536;
/// Socket buffer sizes asked for (the kernel's limits are raised when we are root).
const SOCKET_BUFFER: usize = 8 << 20;

/// A UDP socket with quinn-udp's batched send and receive.
pub struct UdpPath {
    socket: std::net::UdpSocket,
    state: UdpSocketState,
}

impl UdpPath {
    /// A socket for an uplink, bound as `binding` says, of the family of `peer`.
    pub fn uplink(binding: &Binding, peer: SocketAddr) -> io::Result<UdpPath> {
        let domain = Domain::for_address(peer);
        let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        let any: IpAddr = if peer.is_ipv4() {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        };
        match binding {
            Binding::Interface(name) => {
                socket.bind_device(Some(name.as_bytes()))?;
                socket.bind(&SocketAddr::new(any, 0).into())?;
            }
            Binding::Address(a) => socket.bind(&SocketAddr::new(*a, 0).into())?,
        }
        Self::finish(socket)
    }

    /// The server's listening socket.
    pub fn listen(addr: SocketAddr) -> io::Result<UdpPath> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        if addr.is_ipv6() && addr.ip().is_unspecified() {
            // Serve IPv4 gateways too.
            socket.set_only_v6(false)?;
        }
        socket.bind(&addr.into())?;
        Self::finish(socket)
    }

    fn finish(socket: Socket) -> io::Result<UdpPath> {
        socket.set_nonblocking(true)?;
        let socket: std::net::UdpSocket = socket.into();
        let state = UdpSocketState::new((&socket).into())?;
        // Large buffers absorb bursts between event-loop turns; forced past the sysctl
        // limits when we may (root), else as large as allowed.
        let fd = socket.as_fd();
        if nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::SndBufForce, &SOCKET_BUFFER)
            .is_err()
        {
            let _ = state.set_send_buffer_size((&socket).into(), SOCKET_BUFFER);
        }
        if nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::RcvBufForce, &SOCKET_BUFFER)
            .is_err()
        {
            let _ = state.set_recv_buffer_size((&socket).into(), SOCKET_BUFFER);
        }
        Ok(UdpPath { socket, state })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Most datagrams one GSO send may carry.
    pub fn max_segments(&self) -> usize {
        self.state.max_gso_segments().clamp(1, 64)
    }

    /// Sends `contents` to `to`: one datagram, or several of `segment` bytes each (the last
    /// may be shorter) when `segment` is given. `from`: the local address to send from
    /// (the server answers from the address a gateway wrote to).
    pub fn send(
        &self,
        to: SocketAddr,
        from: Option<IpAddr>,
        contents: &[u8],
        segment: Option<usize>,
    ) -> io::Result<()> {
        let t = Transmit {
            destination: to,
            ecn: None,
            contents,
            segment_size: segment,
            src_ip: from,
        };
        self.state.try_send((&self.socket).into(), &t)
    }

    /// Receives a batch into `rx`; `Ok(0)` when nothing is waiting.
    pub fn recv(&self, rx: &mut RxBatch) -> io::Result<usize> {
        if rx.meta.len() < BATCH_SIZE {
            return Ok(0);
        }
        let mut chunks = rx.buf.chunks_mut(RX_SLOT);
        let mut iovs: [IoSliceMut<'_>; BATCH_SIZE] =
            std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
        match self
            .state
            .recv((&self.socket).into(), &mut iovs, &mut rx.meta)
        {
            Ok(n) => {
                rx.count = n;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                rx.count = 0;
                Ok(0)
            }
            Err(e) => {
                rx.count = 0;
                Err(e)
            }
        }
    }
}

impl AsRawFd for UdpPath {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

/// Receive buffers for one batch: [`BATCH_SIZE`] groups of up to [`RX_SLOT`] bytes.
pub struct RxBatch {
    buf: Vec<u8>,
    meta: Vec<RecvMeta>,
    count: usize,
}

/// An empty batch (no buffers), to swap in while the real one is in use.
impl Default for RxBatch {
    fn default() -> Self {
        RxBatch {
            buf: Vec::new(),
            meta: Vec::new(),
            count: 0,
        }
    }
}

impl RxBatch {
    /// Buffers for a full batch.
    pub fn new() -> RxBatch {
        RxBatch {
            buf: vec![0; RX_SLOT * BATCH_SIZE],
            meta: vec![RecvMeta::default(); BATCH_SIZE],
            count: 0,
        }
    }

    /// Groups received in the last batch.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Group `i`'s metadata and the range of its bytes in [`RxBatch::bytes_mut`].
    pub fn group_range(&self, i: usize) -> (RecvMeta, std::ops::Range<usize>) {
        let m = self.meta[i];
        let start = i * RX_SLOT;
        (m, start..start + m.len.min(RX_SLOT))
    }

    /// The whole receive buffer.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// Group `i`: its metadata (source, local address, segment size) and its bytes, which
    /// hold `len / stride` datagrams (rounded up) of `stride` bytes each.
    pub fn group(&mut self, i: usize) -> (&RecvMeta, &mut [u8]) {
        let m = &self.meta[i];
        let start = i * RX_SLOT;
        let len = m.len.min(RX_SLOT);
        (m, &mut self.buf[start..start + len])
    }
}
