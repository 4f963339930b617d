//! Watches the machine's links: a netlink socket subscribed to link and address changes
//! wakes the event loop, which then re-reads the interfaces (the messages themselves are
//! not parsed: `getifaddrs` is the truth). The loop also re-reads them every few seconds,
//! so a missed message only delays a change.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// Link and address change notifications.
pub struct LinkWatch {
    socket: Socket,
    buf: Vec<u8>,
}

impl LinkWatch {
    pub fn new() -> io::Result<LinkWatch> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        let groups =
            (libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR) as u32;
        socket.bind(&SocketAddr::new(0, groups))?;
        socket.set_non_blocking(true)?;
        Ok(LinkWatch {
            socket,
            buf: vec![0; 16 * 1024],
        })
    }

    /// Reads every pending notification; true when there was any (or the kernel dropped
    /// some: re-read the interfaces either way).
    pub fn drain(&mut self) -> bool {
        let mut any = false;
        loop {
            match self.socket.recv(&mut &mut self.buf[..], 0) {
                Ok(0) => return any,
                Ok(_) => any = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return any,
                // ENOBUFS: notifications were lost.
                Err(_) => return true,
            }
        }
    }
}

impl AsRawFd for LinkWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}
