//! A minimal HTTP/1.1 server and client for the lab's short flows and timed downloads.
//!
//! The server answers `GET /<n>` with `n` bytes (`GET /inf`: until the client goes away)
//! and closes; the client connects (plain TCP or MPTCP, from a chosen source address,
//! Cubic set on the socket), asks, reads to the end, and reports the flow completion time
//! (from the connect call to the last byte, as the simulator measures it) and whether the
//! connection was reset.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use braid_core::Instant;
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::clock::Clock;
use crate::netns::Netns;
use crate::LabError;

/// Connections the server serves at once; more are refused (and counted).
const MAX_CONNECTIONS: usize = 4096;
/// Largest request the server reads.
const MAX_REQUEST: usize = 4096;
const CHUNK: usize = 64 * 1024;
/// Congestion control of every lab socket: a namespace other than the initial one cannot
/// set the default, so each socket asks for it.
pub const CONGESTION: &[u8] = b"cubic";

/// Plain TCP or Linux MPTCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Mptcp,
}

pub(crate) fn new_socket(transport: Transport) -> io::Result<Socket> {
    let proto = match transport {
        Transport::Tcp => Protocol::TCP,
        Transport::Mptcp => Protocol::MPTCP,
    };
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(proto))?;
    s.set_tcp_congestion(CONGESTION)?;
    Ok(s)
}

/// The HTTP server, running on a thread inside a namespace until dropped.
#[derive(Debug)]
pub struct Server {
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `port` of every address in `ns` (MPTCP listeners accept plain TCP too).
    pub fn start(ns: &Netns, port: u16, transport: Transport) -> Result<Server, LabError> {
        let listener = ns.enter_scoped(|| {
            let s =
                new_socket(transport).map_err(|e| LabError::io("opening the HTTP listener", e))?;
            s.set_reuse_address(true)
                .and_then(|()| s.bind(&SocketAddr::from(([0, 0, 0, 0], port)).into()))
                .and_then(|()| s.listen(1024))
                .and_then(|()| s.set_nonblocking(true))
                .map_err(|e| LabError::io(format!("listening on port {port}"), e))?;
            Ok(TcpListener::from(s))
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicUsize::new(0));
        let (stop2, refused2) = (stop.clone(), refused.clone());
        let thread = std::thread::Builder::new()
            .name("http-server".into())
            .spawn(move || serve(&listener, &stop2, &refused2))
            .map_err(|e| LabError::io("starting the HTTP server", e))?;
        Ok(Server {
            stop,
            refused,
            thread: Some(thread),
        })
    }

    /// Connections refused because `MAX_CONNECTIONS` were open.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, stop: &Arc<AtomicBool>, refused: &AtomicUsize) {
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    refused.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                open.fetch_add(1, Ordering::Relaxed);
                let (open, stop) = (open.clone(), stop.clone());
                let spawned =
                    std::thread::Builder::new()
                        .name("http-conn".into())
                        .spawn(move || {
                            let _ = answer(stream, &stop);
                            open.fetch_sub(1, Ordering::Relaxed);
                        });
                if spawned.is_err() {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// Serves one request.
fn answer(mut stream: TcpStream, stop: &AtomicBool) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let _ = SockRef::from(&stream).set_tcp_congestion(CONGESTION);
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 || req.len() + n > MAX_REQUEST {
            return Ok(());
        }
        req.extend_from_slice(&buf[..n]);
    }
    let Some(size) = requested_size(&req) else {
        stream.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    };
    let header = match size {
        Some(n) => format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"),
        None => "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_owned(),
    };
    stream.write_all(header.as_bytes())?;
    let chunk = vec![0x5au8; CHUNK];
    let mut left = size.unwrap_or(u64::MAX);
    stream.set_write_timeout(Some(Duration::from_millis(200)))?;
    while left > 0 && !stop.load(Ordering::Relaxed) {
        let n = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
        match stream.write(&chunk[..n]) {
            Ok(0) => break,
            Ok(w) => left -= w as u64,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    stream.flush()
}

/// `GET /<n>` → `Some(Some(n))`, `GET /inf` → `Some(None)`, anything else `None`.
fn requested_size(req: &[u8]) -> Option<Option<u64>> {
    let line = req.split(|&b| b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    if parts.next()? != "GET" {
        return None;
    }
    let path = parts.next()?.strip_prefix('/')?;
    if path == "inf" {
        return Some(None);
    }
    path.parse().ok().map(Some)
}

/// How a client connection is made.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    pub transport: Transport,
    /// Source address (selects the path, or MPTCP's first subflow); `None` lets routing
    /// choose (braid's tunnel).
    pub bind: Option<Ipv4Addr>,
}

/// One finished fetch.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fetch {
    /// Body bytes received.
    pub bytes: u64,
    /// From the connect call to the last byte.
    pub fct: Duration,
    /// Whether every requested byte arrived.
    pub complete: bool,
    /// The connection was reset (or refused) by the peer.
    pub reset: bool,
    /// It failed some other way (timeout, unreachable).
    pub failed: bool,
}

/// Fetches `size` bytes (`None`: until `until` on the lab clock) from `server:port`,
/// calling `on_data(now, n)` as body bytes arrive. Must run on a thread inside the client's
/// namespace. Gives up at `deadline` on the lab clock.
pub fn fetch(
    route: Route,
    server: SocketAddrV4,
    size: Option<u64>,
    clock: &Clock,
    deadline: Instant,
    mut on_data: impl FnMut(Instant, u64),
) -> Fetch {
    let start = clock.now();
    let mut f = Fetch::default();
    let result = (|| -> io::Result<()> {
        let s = new_socket(route.transport)?;
        if let Some(b) = route.bind {
            s.bind(&SocketAddr::from((b, 0)).into())?;
        }
        let left = deadline
            .saturating_duration_since(start)
            .max(Duration::from_millis(1));
        s.connect_timeout(&SocketAddr::V4(server).into(), left)?;
        let mut stream = TcpStream::from(s);
        let path = size.map_or_else(|| "inf".to_owned(), |n| n.to_string());
        stream.write_all(format!("GET /{path} HTTP/1.1\r\nHost: lab\r\n\r\n").as_bytes())?;
        let mut buf = vec![0u8; CHUNK];
        let mut header_done = false;
        let mut header = Vec::new();
        loop {
            let now = clock.now();
            if now >= deadline {
                return Err(io::Error::new(ErrorKind::TimedOut, "deadline"));
            }
            stream.set_read_timeout(Some(
                deadline
                    .saturating_duration_since(now)
                    .clamp(Duration::from_millis(1), Duration::from_millis(100)),
            ))?;
            let n = match stream.read(&mut buf) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    continue
                }
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Ok(());
            }
            let mut body = &buf[..n];
            if !header_done {
                header.extend_from_slice(body);
                match header.windows(4).position(|w| w == b"\r\n\r\n") {
                    Some(p) => {
                        header_done = true;
                        let extra = header.len() - (p + 4);
                        body = &buf[n - extra..n];
                    }
                    None if header.len() > MAX_REQUEST => {
                        return Err(io::Error::new(ErrorKind::InvalidData, "header too long"))
                    }
                    None => continue,
                }
            }
            if !body.is_empty() {
                f.bytes += body.len() as u64;
                on_data(clock.now(), body.len() as u64);
            }
            if size.is_some_and(|s| f.bytes >= s) {
                return Ok(());
            }
        }
    })();
    f.fct = clock.now() - start;
    match result {
        Ok(()) => f.complete = size.is_some_and(|s| f.bytes >= s),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionRefused
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
            ) =>
        {
            f.reset = true
        }
        Err(e) if e.kind() == ErrorKind::TimedOut && size.is_none() => {}
        Err(_) => f.failed = true,
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        assert_eq!(
            requested_size(b"GET /1234 HTTP/1.1\r\n\r\n"),
            Some(Some(1234))
        );
        assert_eq!(requested_size(b"GET /inf HTTP/1.1\r\n\r\n"), Some(None));
        assert_eq!(requested_size(b"POST /1 HTTP/1.1\r\n\r\n"), None);
        assert_eq!(requested_size(b"GET /x HTTP/1.1\r\n\r\n"), None);
        assert_eq!(requested_size(b""), None);
    }
}
