//! An AF_PACKET socket bound to one interface: whole Ethernet frames in and out, each
//! received frame stamped by the kernel on arrival.
//!
//! Frames the socket itself (or anyone in this namespace) transmits on the interface are
//! dropped in the kernel by a classic BPF filter, so the bridge reads only what arrives
//! from the wire.

use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};
use nix::sys::time::TimeSpec;
use socket2::{Domain, Protocol, SockAddr, SockFilter, Socket, Type};

use crate::LabError;

/// `ETH_P_ALL`: every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// `PACKET_OUTGOING`, the packet type of frames this host transmitted.
const PACKET_OUTGOING: u32 = 4;
/// Socket buffers: 4 MiB holds a few hundred ms at 100 Mbit/s, so bursts are not lost
/// while the emulator's thread sleeps.
const SOCKET_BUFFER: usize = 4 << 20;

/// A frame read from the socket: its length and the kernel's arrival timestamp.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub len: usize,
    pub stamp: Option<TimeSpec>,
}

/// A packet socket bound to one interface.
#[derive(Debug)]
pub struct PacketSocket {
    socket: Socket,
    cmsg: Vec<u8>,
}

impl PacketSocket {
    /// Opens a non-blocking packet socket on interface `ifname` of the calling thread's
    /// namespace.
    pub fn bind(ifname: &str) -> Result<PacketSocket, LabError> {
        let io = |what: &str, e: io::Error| LabError::io(format!("{what} on {ifname}"), e);
        let index = nix::net::if_::if_nametoindex(ifname)
            .map_err(|e| io("looking up the interface", e.into()))?;
        let socket = Socket::new(
            Domain::PACKET,
            Type::RAW,
            Some(Protocol::from(i32::from(ETH_P_ALL.to_be()))),
        )
        .map_err(|e| io("opening a packet socket", e))?;
        // ld pkttype (BPF_LD|BPF_W|BPF_ABS at SKF_AD_OFF + SKF_AD_PKTTYPE); jeq OUTGOING → ret 0
        // (drop); else ret 256 KiB (the whole frame).
        let filter = [
            SockFilter::new(0x20, 0, 0, 0xffff_f004),
            SockFilter::new(0x15, 0, 1, PACKET_OUTGOING),
            SockFilter::new(0x06, 0, 0, 0),
            SockFilter::new(0x06, 0, 0, 0x0004_0000),
        ];
        socket
            .attach_filter(&filter)
            .map_err(|e| io("attaching the outgoing-frame filter", e))?;
        socket
            .bind(&link_address(index)?)
            .map_err(|e| io("binding the packet socket", e))?;
        socket
            .set_recv_buffer_size(SOCKET_BUFFER)
            .map_err(|e| io("sizing the receive buffer", e))?;
        socket
            .set_send_buffer_size(SOCKET_BUFFER)
            .map_err(|e| io("sizing the send buffer", e))?;
        socket
            .set_nonblocking(true)
            .map_err(|e| io("making the socket non-blocking", e))?;
        setsockopt(&socket, sockopt::ReceiveTimestampns, &true)
            .map_err(|e| io("asking for receive timestamps", e.into()))?;
        Ok(PacketSocket {
            socket,
            cmsg: nix::cmsg_space!(TimeSpec),
        })
    }

    /// Reads one frame into `buf`; `Ok(None)` when nothing is waiting.
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<Option<Received>, LabError> {
        let fd = self.socket.as_raw_fd();
        let mut iov = [IoSliceMut::new(buf)];
        match recvmsg::<()>(fd, &mut iov, Some(&mut self.cmsg), MsgFlags::MSG_TRUNC) {
            Ok(msg) => {
                let mut stamp = None;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmTimestampns(ts) = c {
                            stamp = Some(ts);
                        }
                    }
                }
                Ok(Some(Received {
                    len: msg.bytes,
                    stamp,
                }))
            }
            Err(nix::errno::Errno::EAGAIN) => Ok(None),
            Err(nix::errno::Errno::EINTR) => Ok(None),
            Err(e) => Err(LabError::io("reading a frame", e.into())),
        }
    }

    /// Transmits one whole Ethernet frame on the bound interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        self.socket.send(frame)
    }

    /// The socket, for polling.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// `sockaddr_ll` for binding to interface `index`, all protocols.
#[expect(
    unsafe_code,
    reason = "neither socket2 nor nix can build a sockaddr_ll safely; binding a packet socket needs one"
)]
fn link_address(index: u32) -> Result<SockAddr, LabError> {
    let ifindex = i32::try_from(index)
        .map_err(|_| LabError::Config(format!("interface index {index} out of range")))?;
    // SAFETY: `try_init` hands us zeroed storage of `sockaddr_storage` size (128 bytes,
    // aligned for any socket address), larger than and at least as aligned as
    // `sockaddr_ll` (20 bytes, align 4). We write one whole, initialised `sockaddr_ll` at
    // its start and report exactly its size as the address length, which is what
    // `try_init` requires of the closure. No other memory is touched.
    let ((), addr) = unsafe {
        SockAddr::try_init(|storage, len| {
            storage
                .cast::<libc::sockaddr_ll>()
                .write(libc::sockaddr_ll {
                    sll_family: libc::AF_PACKET as u16,
                    sll_protocol: ETH_P_ALL.to_be(),
                    sll_ifindex: ifindex,
                    sll_hatype: 0,
                    sll_pkttype: 0,
                    sll_halen: 0,
                    sll_addr: [0; 8],
                });
            *len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            Ok(())
        })
    }
    .map_err(|e| LabError::io("building a link-layer address", e))?;
    Ok(addr)
}
