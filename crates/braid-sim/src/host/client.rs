//! The client side of the TCP workloads: when flows open (Poisson arrivals, a fetch loop,
//! bulk flows at a start time), and each flow's application protocol.
//!
//! Protocol, the same for every TCP workload: the client connects to the workload's server
//! port and sends a 12-byte request, the transfer size (`u64`, `u64::MAX` for unbounded)
//! and a flow id (`u32`), big-endian. Down: the server sends `size` bytes and closes. Up:
//! the client sends `size` bytes after the request and the server answers with an 8-byte
//! reply. The flow completes when the client has read the last byte (down) or the reply
//! (up); its completion time runs from the connect call.

use braid_core::Instant;

use crate::metrics::{IntervalSeries, Samples};
use crate::Rng;

use super::arrivals::WebArrivals;
use super::transport::{Buffers, Conn, Socket, Stacks};
use super::workload::{Direction, InitialWindow, Shape, Spec, Tcp, TcpCc};
use super::INTERNET_ADDR;

/// Bytes of the request a client sends first.
pub const REQUEST_BYTES: usize = 12;
/// Bytes of the server's reply to an upload.
pub const REPLY_BYTES: usize = 8;
/// Socket buffer for the direction that carries only a request or a reply.
pub const CONTROL_BUFFER: usize = 2048;
/// Smallest buffer on the data direction.
const MIN_DATA_BUFFER: usize = 4096;
/// Largest buffer on the data direction of a web or fetch-loop flow: sized to the flow,
/// so short flows stay small.
pub const MAX_FLOW_BUFFER: usize = 4 << 20;
/// Most goodput intervals kept per workload.
pub const MAX_SERIES_BINS: usize = 100_000;

/// A buffer large enough for a transfer of `size` bytes and its request, within
/// `[4 KiB, max]`.
pub fn data_buffer(size: u64, max: usize) -> usize {
    let want = size
        .saturating_add(REQUEST_BYTES as u64)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX);
    usize::try_from(want)
        .unwrap_or(usize::MAX)
        .clamp(MIN_DATA_BUFFER, max.max(MIN_DATA_BUFFER))
}

/// Socket buffers for one end of a flow; `data` is the buffer on the data direction.
/// Bulk flows use Nagle's algorithm (see [`Buffers::nagle`]).
pub fn buffers(sends_data: bool, data: usize, bulk: bool) -> Buffers {
    let (rx, tx) = if sends_data {
        (CONTROL_BUFFER, data)
    } else {
        (data, CONTROL_BUFFER)
    };
    Buffers {
        rx,
        tx,
        nagle: bulk,
        initial_window: None,
        prism: false,
        sack: true,
    }
}

/// When a workload's flows open.
#[derive(Debug)]
enum Driver {
    /// PluriBus §6.1: Poisson arrivals, SURGE or fixed sizes.
    Poisson(WebArrivals),
    /// PluriBus §6.5.1: `concurrency` flows, each replaced when it completes.
    FetchLoop {
        concurrency: u32,
        size: u64,
        begun: bool,
    },
    /// Bulk flows, all opened at the start.
    Bulk {
        flows: u32,
        bytes: Option<u64>,
        buffer: usize,
        begun: bool,
    },
}

/// One open flow.
#[derive(Debug)]
struct Flow {
    conn: Conn,
    id: u32,
    size: u64,
    started: Instant,
    request_sent: usize,
    uploaded: u64,
    received: u64,
}

/// A bulk flow's progress as seen by the client.
#[derive(Clone, Debug, Default)]
pub struct BulkRecord {
    pub started: Option<Instant>,
    pub completed: Option<Instant>,
    /// Application bytes received (down).
    pub bytes_received: u64,
}

/// What the client side measured for one workload.
#[derive(Debug)]
pub struct ClientStats {
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    pub rejected: u64,
    pub bytes_requested: u64,
    pub fct_ms: Samples,
    pub size_bytes: Samples,
    pub bulk: Vec<BulkRecord>,
    /// Goodput over time of a bulk download.
    pub series: Option<IntervalSeries>,
}

/// The client side of one TCP workload.
#[derive(Debug)]
pub struct ClientPart {
    pub direction: Direction,
    tcp: Tcp,
    initial_window: Option<InitialWindow>,
    tcp_cc: TcpCc,
    sack: bool,
    server_port: u16,
    start: Instant,
    stop: Instant,
    max_open: usize,
    driver: Driver,
    flows: Vec<Flow>,
    next_id: u32,
    pub stats: ClientStats,
}

/// What servicing a flow found.
enum Outcome {
    Open,
    Completed,
    Failed,
}

impl ClientPart {
    pub fn new(spec: &Spec, server_port: u16, seed: u64, end: Instant) -> ClientPart {
        let label = format!("workload/{}", spec.index);
        let (driver, max_open) = match spec.shape {
            Shape::Web { max_open, .. } => {
                // Invariant: the shape is Web, so there are arrivals.
                let arrivals = WebArrivals::from_spec(spec, seed).expect("a web workload");
                (Driver::Poisson(arrivals), max_open)
            }
            Shape::FetchLoop {
                concurrency,
                size_bytes,
            } => (
                Driver::FetchLoop {
                    concurrency,
                    size: size_bytes,
                    begun: false,
                },
                concurrency as usize,
            ),
            Shape::Bulk {
                flows,
                bytes,
                buffer_bytes,
                ..
            } => (
                Driver::Bulk {
                    flows,
                    bytes,
                    buffer: buffer_bytes,
                    begun: false,
                },
                flows as usize,
            ),
            // Invariant: `build_hosts` gives CBR workloads a source and a sink instead.
            Shape::Cbr { .. } => unreachable!("CBR workloads have no TCP client"),
        };
        let series = match spec.shape {
            Shape::Bulk { sample_us, .. } if spec.direction == Direction::Down => Some(
                IntervalSeries::new(spec.start, end, sample_us, MAX_SERIES_BINS),
            ),
            _ => None,
        };
        let bulk = match spec.shape {
            Shape::Bulk { flows, .. } => vec![BulkRecord::default(); flows as usize],
            _ => Vec::new(),
        };
        let samples = |what: &str| {
            Samples::new(
                Samples::DEFAULT_CAPACITY,
                Rng::child(seed, &format!("{label}/{what}")),
            )
        };
        ClientPart {
            direction: spec.direction,
            tcp: spec.tcp.unwrap_or_default(),
            initial_window: spec.initial_window,
            tcp_cc: spec.tcp_cc,
            sack: spec.sack,
            server_port,
            start: spec.start,
            stop: spec.stop,
            max_open,
            driver,
            flows: Vec::new(),
            next_id: 0,
            stats: ClientStats {
                started: 0,
                completed: 0,
                failed: 0,
                rejected: 0,
                bytes_requested: 0,
                fct_ms: samples("fct"),
                size_bytes: samples("size"),
                bulk,
                series,
            },
        }
    }

    /// Flows open now.
    pub fn open_flows(&self) -> usize {
        self.flows.len()
    }

    /// When this workload next wants to open flows.
    pub fn next_timer(&self) -> Option<Instant> {
        match &self.driver {
            Driver::Poisson(arrivals) => arrivals.peek(),
            Driver::FetchLoop { begun: false, .. } | Driver::Bulk { begun: false, .. } => {
                (self.start < self.stop).then_some(self.start)
            }
            _ => None,
        }
    }

    /// Opens the flows due at `now`.
    pub fn fire(&mut self, stacks: &mut Stacks, now: Instant) {
        match &mut self.driver {
            Driver::Poisson(arrivals) => {
                let mut due = Vec::new();
                while arrivals.peek().is_some_and(|at| at <= now) {
                    if let Some((_, size)) = arrivals.pop() {
                        due.push(size);
                    }
                }
                for size in due {
                    self.open(stacks, now, size, None);
                }
            }
            Driver::FetchLoop {
                concurrency,
                size,
                begun,
            } => {
                if !*begun && now >= self.start {
                    *begun = true;
                    let (n, size) = (*concurrency, *size);
                    if now < self.stop {
                        for _ in 0..n {
                            self.open(stacks, now, size, None);
                        }
                    }
                }
            }
            Driver::Bulk {
                flows,
                bytes,
                buffer,
                begun,
            } => {
                if !*begun && now >= self.start {
                    *begun = true;
                    let (n, size, buffer) = (*flows, bytes.unwrap_or(u64::MAX), *buffer);
                    for id in 0..n {
                        self.open(stacks, now, size, Some((id, buffer)));
                    }
                }
            }
        }
    }

    /// Opens one flow of `size` bytes; `bulk` names the bulk flow and its buffer.
    fn open(&mut self, stacks: &mut Stacks, now: Instant, size: u64, bulk: Option<(u32, usize)>) {
        if self.flows.len() >= self.max_open {
            self.stats.rejected += 1;
            return;
        }
        let (id, max_buffer) = match bulk {
            Some((id, buffer)) => (id, buffer),
            None => (self.next_id, MAX_FLOW_BUFFER),
        };
        let sends = self.direction == Direction::Up;
        let buffers = Buffers {
            initial_window: self.initial_window,
            prism: sends && self.tcp_cc == TcpCc::Prism,
            sack: self.sack,
            ..buffers(sends, data_buffer(size, max_buffer), bulk.is_some())
        };
        let Some(conn) = stacks.connect(self.tcp, INTERNET_ADDR, self.server_port, buffers) else {
            self.stats.rejected += 1;
            return;
        };
        self.next_id = self.next_id.wrapping_add(1);
        self.flows.push(Flow {
            conn,
            id,
            size,
            started: now,
            request_sent: 0,
            uploaded: 0,
            received: 0,
        });
        self.stats.started += 1;
        if size != u64::MAX {
            self.stats.bytes_requested = self.stats.bytes_requested.saturating_add(size);
            self.stats.size_bytes.push(size as f64);
        }
        if let Some(record) = self.stats.bulk.get_mut(id as usize) {
            record.started = Some(now);
        }
    }

    /// Runs every open flow's protocol after the stack has processed input at `now`.
    pub fn service(&mut self, stacks: &mut Stacks, now: Instant) {
        let mut i = 0;
        let mut replace = 0;
        while i < self.flows.len() {
            let flow = &mut self.flows[i];
            let stats = &mut self.stats;
            let id = flow.id as usize;
            let outcome = match stacks.socket(flow.conn) {
                Some(socket) => service_flow(flow, socket, self.direction, |n| {
                    if let Some(record) = stats.bulk.get_mut(id) {
                        record.bytes_received += n;
                    }
                    if let Some(series) = &mut stats.series {
                        series.add(now, n);
                    }
                }),
                None => Outcome::Failed,
            };
            match outcome {
                Outcome::Open => i += 1,
                Outcome::Completed => {
                    let flow = self.flows.swap_remove(i);
                    let fct = now - flow.started;
                    self.stats.completed += 1;
                    self.stats.fct_ms.push(fct.as_secs_f64() * 1e3);
                    if let Some(record) = self.stats.bulk.get_mut(flow.id as usize) {
                        record.completed = Some(now);
                    }
                    stacks.linger(now, flow.conn);
                    replace += 1;
                }
                Outcome::Failed => {
                    let flow = self.flows.swap_remove(i);
                    self.stats.failed += 1;
                    stacks.discard(flow.conn);
                    replace += 1;
                }
            }
        }
        if let Driver::FetchLoop { size, .. } = self.driver {
            if now < self.stop {
                for _ in 0..replace {
                    self.open(stacks, now, size, None);
                }
            }
        }
    }
}

/// Advances one flow: sends the request (and upload), reads what arrived.
fn service_flow(
    flow: &mut Flow,
    socket: &mut dyn Socket,
    direction: Direction,
    mut on_download: impl FnMut(u64),
) -> Outcome {
    if socket.may_send() {
        if flow.request_sent < REQUEST_BYTES {
            let mut request = [0u8; REQUEST_BYTES];
            request[..8].copy_from_slice(&flow.size.to_be_bytes());
            request[8..].copy_from_slice(&flow.id.to_be_bytes());
            flow.request_sent += socket.send_slice(&request[flow.request_sent..]);
        }
        if direction == Direction::Up && flow.request_sent == REQUEST_BYTES {
            flow.uploaded += socket.send_filler(flow.size - flow.uploaded);
        }
    }
    let n = socket.recv_discard();
    if n > 0 {
        flow.received += n;
        if direction == Direction::Down {
            on_download(n);
        }
    }
    let done = match direction {
        Direction::Down => flow.received >= flow.size,
        Direction::Up => flow.received >= REPLY_BYTES as u64,
    };
    if done {
        return Outcome::Completed;
    }
    if !socket.is_connecting() && !socket.may_recv() {
        // Reset, or the server closed before the transfer was complete.
        return Outcome::Failed;
    }
    Outcome::Open
}
