//! The hare's socket: UDP-Lite (RFC 3828) whose checksum covers only its own 8-byte header,
//! so a datagram whose payload was damaged on the way still reaches braid (plain UDP would
//! drop it whole, which is what HTPPR exists to avoid).
//!
//! Coverage stops before braid's hare header on purpose: that header is built to be read
//! damaged (fuzzy chunk ids, the coded sequence number: HTPPR §3.1.1), so covering it would
//! turn a packet the engine can use into a loss. The UDP-Lite header itself (the ports) is
//! covered, so a damaged one cannot reach the wrong socket.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

/// `UDPLITE_SEND_CSCOV` and `UDPLITE_RECV_CSCOV` from linux/udp.h (libc does not name them).
const UDPLITE_SEND_CSCOV: libc::c_int = 10;
const UDPLITE_RECV_CSCOV: libc::c_int = 11;
/// Checksum coverage: the UDP-Lite header alone, the least RFC 3828 allows.
pub const COVERAGE: libc::c_int = 8;
/// Socket buffers: a few hundred hare packets, so a busy receiver does not drop them.
const BUFFER: usize = 4 << 20;

/// A non-blocking UDP-Lite socket with header-only coverage, bound to `bind`.
pub fn socket(bind: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let s = Socket::new(
        Domain::for_address(bind),
        Type::DGRAM,
        Some(Protocol::UDPLITE),
    )?;
    set_coverage(&s, UDPLITE_SEND_CSCOV)?;
    set_coverage(&s, UDPLITE_RECV_CSCOV)?;
    // Best effort: a smaller buffer only costs drops under load.
    let _ = s.set_recv_buffer_size(BUFFER);
    let _ = s.set_send_buffer_size(BUFFER);
    s.set_nonblocking(true)?;
    s.bind(&bind.into())?;
    Ok(s.into())
}

fn set_coverage(s: &Socket, option: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let value = COVERAGE;
    // SAFETY: `s` is an open socket; the option value is a c_int that lives across the call
    // and its size is passed alongside, as setsockopt(2) requires.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_UDPLITE,
            option,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The unspecified address of `peer`'s family, port 0: where a sender binds its hare socket.
pub fn any_for(peer: SocketAddr) -> SocketAddr {
    match peer {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram damaged past the covered header still arrives (a plain UDP socket would
    /// see nothing: that is checked by the kernel, not here).
    #[test]
    fn header_only_coverage_is_set() {
        let s = socket("127.0.0.1:0".parse().unwrap()).unwrap();
        let r = socket("127.0.0.1:0".parse().unwrap()).unwrap();
        s.send_to(&[9; 1000], r.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 2000];
        let n = loop {
            match r.recv(&mut buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(n, 1000);
    }
}
