//! The server side of the TCP workloads on the internet host: accepting connections on
//! each workload's port and answering the protocol described in `super::client`.

use std::collections::BTreeMap;

use braid_core::Instant;

use crate::metrics::IntervalSeries;

use super::client::{
    buffers, data_buffer, MAX_FLOW_BUFFER, MAX_SERIES_BINS, REPLY_BYTES, REQUEST_BYTES,
};
use super::transport::{Buffers, Conn, Socket, Stacks};
use super::workload::{Direction, Shape, SizeModel, Spec, TcpCc};

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
            buffers: Buffers {
                initial_window: spec.initial_window,
                prism: spec.direction == Direction::Down && spec.tcp_cc == TcpCc::Prism,
                sack: spec.sack,
                ..buffers(
                    spec.direction == Direction::Down,
                    data,
                    matches!(spec.shape, Shape::Bulk { .. }),
                )
            },
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
    conn: Conn,
    phase: Phase,
    request: [u8; REQUEST_BYTES],
    got: usize,
    size: u64,
    id: u32,
    progress: u64,
    reply_sent: usize,
    /// The socket's version when the connection was last serviced: a service of an
    /// unchanged socket does nothing (each runs its protocol as far as the socket lets
    /// it), so it is skipped.
    seen: Option<u64>,
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

    /// Whether to accept a connection from `client_port` to `server_port`: the buffers
    /// to give it, or `None` when the port is not a workload's, the connection is already
    /// known (a retransmitted SYN its own socket answers), or the workload has `max_open`
    /// connections (counted as refused).
    pub fn admit(&mut self, server_port: u16, client_port: u16) -> Option<Buffers> {
        let workload = usize::from(server_port.checked_sub(self.base_port)?);
        let part = self.parts.get_mut(workload)?.as_mut()?;
        if self.connections.contains_key(&(server_port, client_port)) {
            return None;
        }
        if part.open >= part.max_open {
            part.stats.refused += 1;
            return None;
        }
        Some(part.buffers)
    }

    /// A connection `admit` allowed has been opened.
    pub fn on_accepted(&mut self, conn: Conn, server_port: u16, client_port: u16) {
        let Some(workload) = server_port.checked_sub(self.base_port).map(usize::from) else {
            return;
        };
        if let Some(Some(part)) = self.parts.get_mut(workload) {
            part.open += 1;
            part.stats.accepted += 1;
        }
        self.connections.insert(
            (server_port, client_port),
            Connection {
                workload,
                conn,
                phase: Phase::Request,
                request: [0; REQUEST_BYTES],
                got: 0,
                size: 0,
                id: 0,
                progress: 0,
                reply_sent: 0,
                seen: None,
            },
        );
    }

    /// Runs every connection's protocol after the stack has processed input at `now`.
    pub fn service(&mut self, stacks: &mut Stacks, now: Instant) {
        for (key, conn) in self.connections.iter_mut() {
            let Some(Some(part)) = self.parts.get_mut(conn.workload) else {
                continue;
            };
            let socket = match stacks.socket(conn.conn) {
                Some(socket) if !socket.is_closed() => socket,
                _ => {
                    self.done.push((*key, false));
                    continue;
                }
            };
            let version = socket.version();
            if version.is_some() && version == conn.seen {
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
            conn.seen = socket.version();
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
                stacks.linger(now, conn.conn);
            } else {
                stacks.discard(conn.conn);
            }
        }
    }
}

/// Advances one connection; true when the server's part is over (the socket then closes,
/// sending what is still queued first).
fn service_connection(
    conn: &mut Connection,
    socket: &mut dyn Socket,
    direction: Direction,
    mut on_upload: impl FnMut(u32, u64),
) -> bool {
    if let Phase::Request = conn.phase {
        while conn.got < REQUEST_BYTES && socket.can_recv() {
            match socket.recv_slice(&mut conn.request[conn.got..]) {
                0 => break,
                n => conn.got += n,
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
        let n = socket.recv_discard();
        if n > 0 {
            conn.progress += n;
            on_upload(conn.id, n);
        }
        if conn.progress >= conn.size {
            conn.phase = Phase::Replying;
        }
    }
    match conn.phase {
        Phase::Sending if socket.may_send() => {
            conn.progress += socket.send_filler(conn.size - conn.progress);
            if conn.progress >= conn.size {
                return true;
            }
        }
        Phase::Replying if socket.may_send() => {
            let reply = [0x5a; REPLY_BYTES];
            conn.reply_sent += socket.send_slice(&reply[conn.reply_sent..]);
            if conn.reply_sent == REPLY_BYTES {
                return true;
            }
        }
        _ => {}
    }
    // The client went away before the request or upload was complete.
    !socket.is_connecting()
        && !socket.may_recv()
        && matches!(conn.phase, Phase::Request | Phase::Receiving)
}
