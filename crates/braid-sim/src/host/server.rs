//! The server side of the TCP workloads on the internet host: accepting connections on
//! each workload's port and answering the protocol described in `super::client`.
//!
//! smoltcp gives each connection its own socket and a listening socket becomes the
//! connection it accepts, so a server needs a fresh listener per connection. A listener
//! left waiting would also take a retransmitted SYN meant for a connection already in
//! SYN-RECEIVED (smoltcp hands a packet to the first socket that accepts it). So the
//! host looks at each packet before the stack does: a SYN for a connection it does not
//! know gets a listener created for it alone, and a listener that did not take its SYN
//! (a corrupted packet) is removed at once.

use std::collections::BTreeMap;

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use braid_core::Instant;

use crate::metrics::IntervalSeries;

use super::client::{
    buffers, data_buffer, MAX_FLOW_BUFFER, MAX_SERIES_BINS, REPLY_BYTES, REQUEST_BYTES,
};
use super::stack::{Buffers, Stack};
use super::workload::{Direction, Shape, SizeModel, Spec};

/// What the server side measured for one workload.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub accepted: u64,
    /// SYNs turned away because `max_open` connections were open.
    pub refused: u64,
    /// Application bytes received per bulk flow (up).
    pub bulk_bytes: Vec<u64>,
    /// Goodput over time of a bulk upload.
    pub series: Option<IntervalSeries>,
}

/// The server side of one TCP workload.
#[derive(Debug)]
pub struct ServerPart {
    pub direction: Direction,
    buffers: Buffers,
    max_open: usize,
    open: usize,
    pub stats: ServerStats,
}

impl ServerPart {
    pub fn new(spec: &Spec, end: Instant) -> ServerPart {
        // Buffers are fixed when the listener is made, before the request names the size:
        // size them for the largest transfer of the workload. Untouched buffer pages cost
        // no memory.
        let (data, max_open, bulk) = match spec.shape {
            Shape::Web { size, max_open, .. } => {
                let largest = match size {
                    SizeModel::Fixed(n) => n,
                    SizeModel::Surge { cap_bytes } => cap_bytes,
                };
                (data_buffer(largest, MAX_FLOW_BUFFER), max_open, 0)
            }
            Shape::FetchLoop {
                concurrency,
                size_bytes,
            } => (
                data_buffer(size_bytes, MAX_FLOW_BUFFER),
                concurrency as usize,
                0,
            ),
            Shape::Bulk {
                flows,
                bytes,
                buffer_bytes,
                ..
            } => (
                data_buffer(bytes.unwrap_or(u64::MAX), buffer_bytes),
                flows as usize,
                flows as usize,
            ),
            // Invariant: `build_hosts` gives CBR workloads a source and a sink instead.
            Shape::Cbr { .. } => unreachable!("CBR workloads have no TCP server"),
        };
        let series = match spec.shape {
            Shape::Bulk { sample_us, .. } if spec.direction == Direction::Up => Some(
                IntervalSeries::new(spec.start, end, sample_us, MAX_SERIES_BINS),
            ),
            _ => None,
        };
        ServerPart {
            direction: spec.direction,
            buffers: buffers(
                spec.direction == Direction::Down,
                data,
                matches!(spec.shape, Shape::Bulk { .. }),
            ),
            // Room for connections the client has given up on but the server not yet.
            max_open: max_open.saturating_mul(2),
            open: 0,
            stats: ServerStats {
                bulk_bytes: vec![0; bulk],
                series,
                ..ServerStats::default()
            },
        }
    }
}

#[derive(Debug)]
enum Phase {
    Request,
    Sending,
    Receiving,
    Replying,
}

/// One accepted connection.
#[derive(Debug)]
struct Connection {
    workload: usize,
    handle: SocketHandle,
    phase: Phase,
    request: [u8; REQUEST_BYTES],
    got: usize,
    size: u64,
    id: u32,
    progress: u64,
    reply_sent: usize,
}

/// A listener created for one SYN, checked after the stack has processed it.
pub struct PendingSyn {
    key: (u16, u16),
    workload: usize,
    handle: SocketHandle,
}

/// Every server-side workload of the internet host and their connections.
#[derive(Debug, Default)]
pub struct Server {
    base_port: u16,
    pub parts: Vec<Option<ServerPart>>,
    /// Keyed by (server port, client port): one client host, so that names a connection.
    connections: BTreeMap<(u16, u16), Connection>,
    done: Vec<((u16, u16), bool)>,
}

impl Server {
    pub fn new(base_port: u16, parts: Vec<Option<ServerPart>>) -> Server {
        Server {
            base_port,
            parts,
            connections: BTreeMap::new(),
            done: Vec::new(),
        }
    }

    /// Before `packet` enters the stack: when it opens a new connection to a workload's
    /// port, creates the listener that will take it.
    pub fn before_ingress(&mut self, stack: &mut Stack, packet: &[u8]) -> Option<PendingSyn> {
        let (client_port, server_port) = pure_syn(packet)?;
        let workload = usize::from(server_port.checked_sub(self.base_port)?);
        let part = self.parts.get_mut(workload)?.as_mut()?;
        let key = (server_port, client_port);
        if self.connections.contains_key(&key) {
            // A retransmitted SYN: the connection's own socket answers it.
            return None;
        }
        if part.open >= part.max_open {
            part.stats.refused += 1;
            return None;
        }
        let handle = stack.new_socket(part.buffers);
        if stack.socket(handle).listen(server_port).is_err() {
            stack.discard(handle, None);
            return None;
        }
        Some(PendingSyn {
            key,
            workload,
            handle,
        })
    }

    /// After the stack has processed the SYN: keeps the connection, or drops the listener
    /// if the SYN did not reach it.
    pub fn after_ingress(&mut self, stack: &mut Stack, pending: PendingSyn) {
        let state = stack.socket(pending.handle).state();
        if matches!(state, tcp::State::Listen | tcp::State::Closed) {
            stack.discard(pending.handle, None);
            return;
        }
        if let Some(Some(part)) = self.parts.get_mut(pending.workload) {
            part.open += 1;
            part.stats.accepted += 1;
        }
        self.connections.insert(
            pending.key,
            Connection {
                workload: pending.workload,
                handle: pending.handle,
                phase: Phase::Request,
                request: [0; REQUEST_BYTES],
                got: 0,
                size: 0,
                id: 0,
                progress: 0,
                reply_sent: 0,
            },
        );
    }

    /// Runs every connection's protocol after the stack has processed input at `now`.
    pub fn service(&mut self, stack: &mut Stack, now: Instant) {
        for (key, conn) in self.connections.iter_mut() {
            let Some(Some(part)) = self.parts.get_mut(conn.workload) else {
                continue;
            };
            let socket = stack.socket(conn.handle);
            if socket.state() == tcp::State::Closed {
                self.done.push((*key, false));
                continue;
            }
            let stats = &mut part.stats;
            let finished = service_connection(conn, socket, part.direction, |id, n| {
                if let Some(bytes) = stats.bulk_bytes.get_mut(id as usize) {
                    *bytes += n;
                }
                if let Some(series) = &mut stats.series {
                    series.add(now, n);
                }
            });
            if finished {
                self.done.push((*key, true));
            }
        }
        for (key, graceful) in self.done.drain(..) {
            let Some(conn) = self.connections.remove(&key) else {
                continue;
            };
            if let Some(Some(part)) = self.parts.get_mut(conn.workload) {
                part.open = part.open.saturating_sub(1);
            }
            if graceful {
                stack.linger(now, conn.handle, None);
            } else {
                stack.discard(conn.handle, None);
            }
        }
    }
}

/// Advances one connection; true when the server's part is over (the socket then closes,
/// sending what is still queued first).
fn service_connection(
    conn: &mut Connection,
    socket: &mut tcp::Socket<'static>,
    direction: Direction,
    mut on_upload: impl FnMut(u32, u64),
) -> bool {
    if let Phase::Request = conn.phase {
        while conn.got < REQUEST_BYTES && socket.can_recv() {
            match socket.recv_slice(&mut conn.request[conn.got..]) {
                Ok(n) if n > 0 => conn.got += n,
                _ => break,
            }
        }
        if conn.got == REQUEST_BYTES {
            let mut size = [0u8; 8];
            size.copy_from_slice(&conn.request[..8]);
            let mut id = [0u8; 4];
            id.copy_from_slice(&conn.request[8..]);
            conn.size = u64::from_be_bytes(size);
            conn.id = u32::from_be_bytes(id);
            conn.phase = match direction {
                Direction::Down => Phase::Sending,
                Direction::Up => Phase::Receiving,
            };
        }
    }
    if let Phase::Receiving = conn.phase {
        while socket.can_recv() {
            let n = socket.recv(|buf| (buf.len(), buf.len())).unwrap_or(0);
            if n == 0 {
                break;
            }
            conn.progress += n as u64;
            on_upload(conn.id, n as u64);
        }
        if conn.progress >= conn.size {
            conn.phase = Phase::Replying;
        }
    }
    match conn.phase {
        Phase::Sending if socket.may_send() => {
            // The download's contents do not matter: enqueue without writing.
            while conn.progress < conn.size {
                let left = conn.size - conn.progress;
                let n = socket
                    .send(|buf| {
                        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                        (n, n)
                    })
                    .unwrap_or(0);
                if n == 0 {
                    break;
                }
                conn.progress += n as u64;
            }
            if conn.progress >= conn.size {
                return true;
            }
        }
        Phase::Replying if socket.may_send() => {
            let reply = [0x5a; REPLY_BYTES];
            if let Ok(n) = socket.send_slice(&reply[conn.reply_sent..]) {
                conn.reply_sent += n;
            }
            if conn.reply_sent == REPLY_BYTES {
                return true;
            }
        }
        _ => {}
    }
    // The client went away before the request or upload was complete.
    let connecting = socket.state() == tcp::State::SynReceived;
    !connecting && !socket.may_recv() && matches!(conn.phase, Phase::Request | Phase::Receiving)
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
