//! The engine: one tunnel between a gateway and a server over many paths.

use std::collections::VecDeque;
use std::time::Duration;

use braid_wire::{
    ConfigMsg, Datagram, Header, Hello, Message, PathAck, PathEntries, PathEntry, CODED_FIXED_LEN,
    HEADER_LEN, MAX_BITMAP_LEN, PATH_ENTRY_LEN,
};

use crate::config::ConfigError;
use crate::fec::{LossRecovery, RecoveredSink};
use crate::path::{Path, SentKind};
use crate::reorder::{Insert, Resequencer};
use crate::sched::Scheduler;
use crate::time::earliest;
use crate::{Config, Event, Instant, PathConfig, PathId, Role, SessionStats};

mod aqm;
mod failover;
mod membership;
mod metering;
mod rpc_hook;
mod schedule;
mod send_queue;

pub use membership::{LenderId, MembershipError, MembershipStats, MAX_REVOKED};
pub use schedule::Prediction;

/// Most events kept for the driver; older ones are dropped (and counted) beyond it.
const MAX_EVENTS: usize = 1024;
/// Most recycled packet buffers kept.
pub(crate) const MAX_POOL: usize = 1024;

/// One datagram ready to go out on a path; its bytes are at the front of the buffer passed
/// to [`Session::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    pub len: usize,
}

/// Why a received datagram was dropped. Every drop is also counted in [`SessionStats`].
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error("malformed datagram: {0}")]
    Malformed(#[from] braid_wire::Error),
    #[error("datagram for session {got}, this session is {expected}")]
    WrongSession { expected: u32, got: u32 },
    #[error("datagram names path {0}, which this session does not have")]
    UnknownPath(PathId),
    #[error("datagram names path {named} but arrived on path {arrived}")]
    PathMismatch { named: PathId, arrived: PathId },
    #[error("datagram on path {path}, lent by revoked lender {lender:#010x}")]
    Revoked { path: PathId, lender: LenderId },
}

/// Why [`Session::send`] refused an inner packet. Every refusal is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("packet of {len} bytes exceeds the tunnel's maximum of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("send queue full ({0} packets)")]
    QueueFull(usize),
}

/// The sans-IO bonding engine: one session between a gateway and a server.
///
/// # Driving contract
///
/// The engine never reads a clock, never touches a socket and never spawns a thread. The
/// driver (the daemon's event loop, or the simulator) feeds it inputs and pulls outputs:
///
/// - inputs: [`Session::send`] (an inner packet from the LAN or TUN),
///   [`Session::handle_datagram`] (a datagram that arrived on a path) and
///   [`Session::handle_timeout`] (the instant from [`Session::poll_timeout`] was reached;
///   calling it early is harmless);
/// - outputs, after any input: [`Session::poll_transmit`] until `None` (datagrams to send
///   on paths), [`Session::poll_deliver`] until `false` (inner packets for the LAN, in
///   order), [`Session::poll_event`] until `None`, then [`Session::poll_timeout`] for the
///   next wake-up.
///
/// Every call takes `now`; time only moves forward. Both ends run the same protocol
/// (PluriBus §4: "Identical algorithms run in each direction"); the [`Role`] only decides
/// who says hello and who configures.
pub struct Session {
    config: Config,
    role: Role,
    created: Instant,
    last_now: Instant,
    paths: Vec<Path>,
    /// `index[id]` is the position of path `id` in `paths`.
    index: [Option<u8>; 256],
    scheduling: schedule::Scheduling,
    recovery: Box<dyn LossRecovery>,
    /// `ack_dirty[i]`: path `i` received something not yet described in a path ack.
    ack_dirty: Vec<bool>,
    ack_cursor: usize,
    /// Data arrived and its path ack has not gone out yet, since this instant.
    ack_pending_since: Option<Instant>,
    /// New loss estimates arrived: re-evaluate the loss guard before scheduling.
    guard_due: bool,
    /// Inner packets waiting for a path, in two lanes (`session/send_queue.rs`). A packet
    /// gets its data sequence number when it leaves, so that one can be dropped from the
    /// queue without leaving a hole at the peer (`session/failover.rs`); a failover resend
    /// keeps the number it first went out with.
    send_queue: send_queue::SendQueue,
    /// Data packets sent, kept for resending when their path fails.
    failover: failover::ResendRing,
    /// Active queue management of the send queue.
    aqm: aqm::Codel,
    /// Inner header compression of what we send, and decompression of what we deliver.
    compressor: crate::compress::Compressor,
    /// The peer announced [`braid_wire::CAP_RESTORES_HEADERS`] (in its Hello or Config):
    /// only then are inner headers compressed towards it.
    peer_restores_headers: bool,
    decompressor: crate::compress::Decompressor,
    /// The packet the latest [`Session::poll_deliver`] returned was rebuilt from the
    /// compressed form, whose checksums the rebuild verified and wrote.
    delivered_checksums_verified: bool,
    pool: Vec<Vec<u8>>,
    next_data_seq: u32,
    reseq: Resequencer,
    /// Reference for the peers' `d + δ` reports: the first one received. Relative delays are
    /// small numbers whatever the clocks' skew.
    delay_base: Option<u32>,
    /// Highest data sequence number received from the peer (our ack).
    highest_rx_data: Option<u32>,
    /// Send timestamp of the newest data packet received: a packet numbered below the
    /// highest but sent after it is a resend, not reordering.
    newest_rx_sent: Option<u32>,
    next_report_at: Instant,
    rx_since_report: bool,
    /// Gateway: the server's config has arrived. Server: always true.
    configured: bool,
    /// Server: a hello arrived on this path and wants a config in reply.
    config_due: Option<PathId>,
    /// Server: the tunnel address (and prefix length) the gateway is given in the config.
    tunnel_address: Option<(std::net::Ipv4Addr, u8)>,
    events: VecDeque<Event>,
    entries: Vec<PathEntry>,
    stats: SessionStats,
    /// `poll_transmit` found nothing to send at this instant, and no input has arrived
    /// since: asked again at the same instant, it has nothing either (see
    /// [`Session::poll_transmit`]).
    quiet_at: Option<Instant>,
    /// After a poll that found nothing, and with no input since: a poll before this
    /// instant can do nothing but renew or decide again the held head of the send queue
    /// (see [`Session::quiet_bound`]).
    quiet_until: Option<Instant>,
    /// [`Session::poll_timeout`] but for the held head of the send queue's retry, while
    /// nothing it depends on changed (`None`: not known). A poll before `quiet_until`
    /// changes none of it.
    timeout_rest: std::cell::Cell<Option<Option<Instant>>>,
    /// PRISM's Reverse Path Controller, with `reordering = "rpc"` (`session/rpc_hook.rs`).
    rpc: Option<rpc_hook::RpcHook>,
    /// Metered paths' budgets (`session/metering.rs`); `None` without metering.
    metering: Option<metering::Metering>,
    /// A server's metering taken from the gateway's Hello (whose later Hellos update it).
    metering_from_peer: bool,
    /// A gateway's caps changed since its last Hello: the next heartbeat is a Hello.
    announce_due: bool,
    /// When a gateway last sent a Hello (see [`Session::hello_due`]).
    hello_sent_at: Option<Instant>,
    /// Who lends each path, and revoked lenders (`session/membership.rs`).
    membership: membership::Membership,
}

impl Session {
    /// Starts a session at `now` over `paths`.
    pub fn new(
        config: Config,
        role: Role,
        paths: &[PathConfig],
        now: Instant,
    ) -> Result<Session, ConfigError> {
        config.validate()?;
        if paths.is_empty() {
            return Err(ConfigError::NoPaths);
        }
        let mut index = [None; 256];
        let mut list = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            let slot = &mut index[usize::from(p.id)];
            if slot.is_some() {
                return Err(ConfigError::DuplicatePath(p.id));
            }
            // At most 256 distinct ids, so the position fits in a u8.
            *slot = Some(i as u8);
            let mut path = Path::new(p, config.capacity_interval, now);
            path.set_cc(config.path_cc);
            list.push(path);
        }
        let mut session = Session {
            scheduling: schedule::Scheduling::new(&config),
            recovery: crate::fec::build(config.loss_recovery, config.seed),
            ack_dirty: vec![false; list.len()],
            ack_cursor: 0,
            ack_pending_since: None,
            guard_due: false,
            reseq: Resequencer::with_mode(
                config.hole_timeout_mode,
                config.hole_timeout,
                config.reorder_limit,
            ),
            send_queue: send_queue::SendQueue::default(),
            next_report_at: now + config.report_interval,
            configured: role == Role::Server,
            entries: Vec::with_capacity(list.len()),
            config,
            role,
            created: now,
            last_now: now,
            paths: list,
            index,
            pool: Vec::new(),
            failover: failover::ResendRing::default(),
            aqm: aqm::Codel::default(),
            compressor: crate::compress::Compressor::default(),
            peer_restores_headers: false,
            decompressor: crate::compress::Decompressor::default(),
            delivered_checksums_verified: false,
            next_data_seq: 0,
            highest_rx_data: None,
            newest_rx_sent: None,
            delay_base: None,
            rx_since_report: false,
            config_due: None,
            tunnel_address: None,
            events: VecDeque::new(),
            stats: SessionStats::default(),
            quiet_at: None,
            quiet_until: None,
            timeout_rest: std::cell::Cell::new(None),
            rpc: None,
            metering: None,
            metering_from_peer: false,
            announce_due: false,
            hello_sent_at: None,
            membership: membership::Membership::default(),
        };
        session.rpc = rpc_hook::RpcHook::build(session.config.reordering);
        if let Some(m) = session.config.metering.clone() {
            session.start_metering(&m, now)?;
        }
        session.sync_queues_capped();
        Ok(session)
    }

    /// Tells the loss recovery whether the schedulers cap the queue in front of each
    /// bottleneck (see [`Session::queues_capped`]).
    fn sync_queues_capped(&mut self) {
        let capped = self.queues_capped();
        self.recovery.set_queues_capped(capped);
    }

    /// (Server) The tunnel address and prefix length to give the gateway in the config
    /// message that answers its hello (docs/wire.md, Config option 1).
    pub fn set_tunnel_address(&mut self, address: Option<(std::net::Ipv4Addr, u8)>) {
        self.wake();
        self.tunnel_address = address;
    }

    /// Replaces the default class's path scheduler (for experiments that compare
    /// policies).
    pub fn set_scheduler(&mut self, scheduler: Box<dyn Scheduler>) {
        self.inputs_changed();
        self.scheduling.schedulers[0] = scheduler;
        self.sync_queues_capped();
    }

    /// Replaces the loss-recovery method.
    pub fn set_loss_recovery(&mut self, recovery: Box<dyn LossRecovery>) {
        self.inputs_changed();
        self.recovery = recovery;
        self.sync_queues_capped();
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// `bytes` of datagrams that are not this session's arrived on `path` (split-TCP's
    /// stream on its own socket): counted in the path's capacity estimate, whose packet
    /// pairs they spread ([`crate::path::capacity::CapacityEstimator::note_foreign`]).
    pub fn note_foreign_arrivals(&mut self, path: PathId, bytes: u64) {
        if let Some(pi) = self.index.get(usize::from(path)).copied().flatten() {
            self.paths[usize::from(pi)].note_foreign_arrivals(bytes);
        }
    }

    /// What split-TCP's stream did on `path` since the last call (its own socket beside
    /// the tunnel's): `sent` and `acked` bytes (on the wire, as the tunnel counts its own),
    /// and whether its window on the path is full. A metered path's budget and cap count
    /// the stream's bytes, a cheap path's predicted rate counts what the stream delivered,
    /// and a cheap path has room only if both engines have room on it; what the stream may
    /// send next is [`Session::stream_allowance`]. Without metering only the counters move.
    pub fn note_foreign_traffic(
        &mut self,
        now: Instant,
        path: PathId,
        sent: u64,
        acked: u64,
        full: bool,
    ) {
        let Some(pi) = self.index.get(usize::from(path)).copied().flatten() else {
            return;
        };
        let pi = usize::from(pi);
        self.paths[pi].note_foreign_traffic(sent, acked, full);
        if let Some(m) = &mut self.metering {
            // The stream carries TCP in no class: class 0's budget, where classes have own.
            m.on_class_sent(0, pi, sent);
            // A hold lifted lets the tunnel send on the path too.
            if self.meter(now) {
                self.wake();
            }
        }
    }

    /// What split-TCP's stream may still send on `path` (bytes on the wire, the stream's
    /// datagrams with their UDP and IP headers), `None` for no limit: on a metered path
    /// nothing while the session holds it, else the least of what is left of its budget
    /// this interval, of the budget of the class of TCP in no class where classes have
    /// their own, and of its cap less what heartbeats will need
    /// ([`Session::note_foreign_traffic`]). A snapshot: the stream counts its datagrams
    /// against it until the next call (`StreamSender::set_allowance`).
    pub fn stream_allowance(&self, now: Instant, path: PathId) -> Option<u64> {
        let pi = self.index.get(usize::from(path)).copied().flatten()?;
        self.metering
            .as_ref()?
            .stream_allowance(now, usize::from(pi))
    }

    /// Whether the session meters paths (its own configuration, or the gateway's
    /// announcement at the server).
    pub fn is_metering(&self) -> bool {
        self.metering.is_some()
    }

    /// The session's paths, in configuration order.
    pub fn paths(&self) -> &[Path] {
        &self.paths
    }

    /// The receiver-clock value (µs, wrapping) that [`Path::delay_skew_us`] and
    /// [`Path::predicted_delivery_us`] are relative to.
    pub fn delay_base(&self) -> u32 {
        self.delay_base.unwrap_or(0)
    }

    /// A buffer this long holds any datagram [`Session::poll_transmit`] writes.
    pub fn transmit_buffer_len(&self) -> usize {
        let data = HEADER_LEN + 4 + CODED_FIXED_LEN + MAX_BITMAP_LEN + self.config.max_packet_size;
        let report = HEADER_LEN + 4 + 1 + PATH_ENTRY_LEN * self.paths.len();
        data.max(report).max(HEADER_LEN + 4 + 300)
    }

    /// Hands the engine an inner packet to carry to the peer.
    pub fn send(&mut self, now: Instant, packet: &[u8]) -> Result<(), SendError> {
        self.send_checked(now, packet, false)
    }

    /// [`Session::send`] of a packet whose IPv4 and TCP checksums the caller knows to hold
    /// when `checksums_verified` (it has just written them): header compression then takes
    /// them as verified instead of summing the packet. A compressed packet vouched for
    /// wrongly fails its rebuilt checksum at the peer and is dropped, where it would have
    /// been sent in full and delivered as it was.
    pub fn send_checked(
        &mut self,
        now: Instant,
        packet: &[u8],
        checksums_verified: bool,
    ) -> Result<(), SendError> {
        let (lane, held) = self.admit_send(now, packet)?;
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(packet);
        self.enqueue(lane, held, buf, checksums_verified);
        Ok(())
    }

    /// [`Session::send_checked`] that takes the packet's buffer instead of copying it: once
    /// queued, `packet` holds a spare buffer of the engine's (empty) for the caller's next
    /// packet. A refused packet is left as it was.
    pub fn send_buffer(
        &mut self,
        now: Instant,
        packet: &mut Vec<u8>,
        checksums_verified: bool,
    ) -> Result<(), SendError> {
        let (lane, held) = self.admit_send(now, packet)?;
        let mut spare = self.pool.pop().unwrap_or_default();
        spare.clear();
        let buf = std::mem::replace(packet, spare);
        self.enqueue(lane, held, buf, checksums_verified);
        Ok(())
    }

    /// Whether an inner packet may join the send queue (what refuses it is counted), with
    /// its lane and the hold that stood before it.
    fn admit_send(
        &mut self,
        now: Instant,
        packet: &[u8],
    ) -> Result<(send_queue::Admission, Option<usize>), SendError> {
        self.advance(now);
        // A packet joining the queue behind its head leaves the head's hold to be renewed
        // with the longer backlog (the scheduler says whether that is a new decision).
        let held = self.scheduling.held_class;
        self.inputs_changed();
        if packet.len() > self.config.max_packet_size {
            self.stats.oversize_drops += 1;
            return Err(SendError::TooLarge {
                len: packet.len(),
                max: self.config.max_packet_size,
            });
        }
        // Only the bulk lane is refused for a full backlog (`session/send_queue.rs`).
        let lane = self.send_queue.admit(packet, &self.scheduling.flows);
        let full = !lane.priority && self.scheduling.backlog_full;
        if self.send_queue.len() >= self.config.send_queue_limit || full {
            self.stats.send_queue_drops += 1;
            return Err(SendError::QueueFull(self.send_queue.len()));
        }
        if self.aqm_refuses(now, packet) {
            self.stats.aqm_drops += 1;
            return Err(SendError::QueueFull(self.send_queue.len()));
        }
        Ok((lane, held))
    }

    /// Queues an admitted packet's buffer.
    fn enqueue(
        &mut self,
        lane: send_queue::Admission,
        held: Option<usize>,
        buf: Vec<u8>,
        checksums_verified: bool,
    ) {
        let len = buf.len();
        // A packet that does not become the head (`session/send_queue.rs`) leaves its
        // hold to be renewed with the longer backlog.
        let keeps_head = self.send_queue.keeps_head(lane);
        self.send_queue.push(lane, buf, checksums_verified);
        if held.is_some() && keeps_head {
            self.scheduling.held_class = held;
            self.scheduling.backlog_grew = true;
        }
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += len as u64;
    }

    /// Processes a datagram that arrived on `path`.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        path: PathId,
        datagram: &[u8],
    ) -> Result<(), HandleError> {
        self.advance(now);
        self.inputs_changed();
        let d = match Datagram::parse(datagram) {
            Ok(d) => d,
            Err(e) => {
                self.stats.malformed_datagrams += 1;
                return Err(e.into());
            }
        };
        if d.header.session_id != self.config.session_id {
            self.stats.wrong_session += 1;
            return Err(HandleError::WrongSession {
                expected: self.config.session_id,
                got: d.header.session_id,
            });
        }
        if d.header.path != path {
            self.stats.unknown_path += 1;
            return Err(HandleError::PathMismatch {
                named: d.header.path,
                arrived: path,
            });
        }
        if let Some(lender) = self.membership.refuses(path) {
            return Err(HandleError::Revoked { path, lender });
        }
        let Some(pi) = self.index[usize::from(path)].map(usize::from) else {
            self.stats.unknown_path += 1;
            return Err(HandleError::UnknownPath(path));
        };
        let wire_bytes = datagram.len() + self.config.datagram_overhead;
        let (came_up, _) =
            self.paths[pi].on_receive(now, d.header.path_seq, d.header.timestamp, wire_bytes);
        if came_up {
            self.push_event(Event::PathUp(path));
        }
        self.rx_since_report = true;
        self.ack_dirty[pi] = true;
        if matches!(d.message, Message::Data { .. } | Message::Coded(_)) {
            self.ack_pending_since.get_or_insert(now);
        }
        if let Some(ack) = d.header.ack {
            self.recovery.on_ack(now, ack);
            self.compressor.on_ack(ack);
        }
        if let Some(pa) = d.header.path_ack {
            if let Some(i) = self.index[usize::from(pa.path)].map(usize::from) {
                self.apply_path_ack(now, i, pa.highest_seq, pa.received, Some(pa.queue_us));
                self.paths[i].on_queue_report(now, pa.highest_seq, pa.queue_us);
            }
        }
        match d.message {
            Message::Data { seq, payload } => {
                let resent = self.is_resent(seq, d.header.timestamp);
                self.note_arrival(now, path, seq, payload, resent);
                if !resent {
                    self.recovery
                        .on_data_path(now, seq, path, d.header.timestamp);
                }
                self.accept_data(now, seq, payload, d.header.unordered, resent);
            }
            m @ (Message::Coded(_) | Message::Parity(_) | Message::Nack(_)) => {
                self.accept_repair(now, &m)
            }
            Message::Report(entries) => {
                self.stats.reports_received += 1;
                self.guard_due = true;
                for e in entries.iter() {
                    let Some(i) = self.index[usize::from(e.path)].map(usize::from) else {
                        continue;
                    };
                    if self.delay_base.is_none() {
                        self.delay_base = e.delay_us;
                    }
                    let base = self.delay_base.unwrap_or(0);
                    let out = self.paths[i].on_report(now, &e, e.path == path, base);
                    if e.received != 0 {
                        self.apply_path_ack(now, i, e.highest_seq, e.received, None);
                    }
                    if let Some(bps) = out.capacity_changed {
                        self.push_event(Event::CapacityChanged { path: e.path, bps });
                    }
                }
            }
            Message::Heartbeat => {}
            Message::Hello(h) => {
                if self.role == Role::Server {
                    self.peer_restores_headers = h
                        .capabilities
                        .is_some_and(|c| c & braid_wire::CAP_RESTORES_HEADERS != 0);
                    self.config_due = Some(path);
                    if let Some(m) = h.metering {
                        self.adopt_peer_metering(now, m, h.metered_classes);
                    }
                    self.push_event(Event::PeerHello { paths: h.paths });
                }
            }
            Message::Config(c) => {
                if self.role == Role::Gateway {
                    self.peer_restores_headers = c
                        .capabilities
                        .is_some_and(|c| c & braid_wire::CAP_RESTORES_HEADERS != 0);
                }
                if self.role == Role::Gateway && !self.configured {
                    self.configured = true;
                    let hole = c.hole_timeout_ms.map(|ms| Duration::from_millis(ms.into()));
                    if let Some(h) = hole {
                        self.reseq.set_hole_timeout(h);
                    }
                    self.push_event(Event::Configured {
                        address: c.address,
                        mtu: c.mtu,
                        hole_timeout: hole,
                    });
                }
            }
            Message::AddressChange(addr) => self.push_event(Event::AddressChanged { path, addr }),
        }
        Ok(())
    }

    /// A data packet from the peer: to the resequencing buffer (or straight out, when
    /// `unordered`), and to the loss-recovery method (decoders keep it).
    fn accept_data(
        &mut self,
        now: Instant,
        seq: u32,
        payload: &[u8],
        unordered: bool,
        resent: bool,
    ) {
        let mut sink = Accept {
            reseq: &mut self.reseq,
            highest: &mut self.highest_rx_data,
            recovered: &mut self.stats.recovered,
            now,
        };
        if resent {
            sink.reseq.insert_resent(now, seq, payload);
        } else if unordered {
            sink.note_highest(seq);
            sink.reseq.insert_unordered(now, seq, payload);
        } else {
            sink.accept(seq, payload);
        }
        self.recovery.on_data_received(now, seq, payload, &mut sink);
    }

    /// A coded packet, recovery shard or nack: the loss-recovery method's business.
    fn accept_repair(&mut self, now: Instant, message: &Message<'_>) {
        let mut sink = Accept {
            reseq: &mut self.reseq,
            highest: &mut self.highest_rx_data,
            recovered: &mut self.stats.recovered,
            now,
        };
        self.recovery.on_repair_received(now, message, &mut sink);
    }

    /// Writes the next datagram to send into `buf` (at least
    /// [`Session::transmit_buffer_len`] bytes) and says which path it goes on.
    ///
    /// A poll that finds nothing leaves the engine as a second poll at the same instant
    /// would find it (what it updates, such as the loss recovery's bookkeeping, depends
    /// only on the state and the instant), so until an input arrives or time moves it
    /// would find nothing again: a driver that polls again at the same instant (the
    /// simulator settles each instant by polling every component until none moves) gets
    /// `None` at once. Most polls find nothing: while the scheduler holds the head of the
    /// send queue, each would look it up and ask again.
    ///
    /// Likewise at a later instant with no input since: until the first timer that may
    /// make a poll send or change something ([`Session::quiet_bound`]), a poll only asks
    /// the scheduler again about the head of the send queue (which time alone may let go,
    /// as queues drain), and skips the rest.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.quiet_at == Some(now) {
            return None;
        }
        let quiet = self.quiet_until.is_some_and(|q| now < q);
        let t = if quiet {
            self.advance(now);
            self.poll_data(now, buf)
        } else {
            self.timeout_rest.set(None);
            self.poll_transmit_now(now, buf)
        };
        if t.is_none() {
            self.quiet_at = Some(now);
            if !quiet {
                self.quiet_until = self.quiet_bound(now);
            }
        } else {
            // What was sent changed its path's queue and window.
            self.scheduling.held_class = None;
            self.quiet_until = None;
            self.timeout_rest.set(None);
        }
        t
    }

    /// After a poll at `now` that sent nothing: the first instant at which a poll, with no
    /// input before it, may do more than [`Session::poll_data`] does (a report, ack,
    /// heartbeat or hello falls due, or the loss recovery's own
    /// [`LossRecovery::quiet_until`]); `None` when any poll may (metering, which moves
    /// with time, owed copies or config, a path never sent on).
    fn quiet_bound(&self, now: Instant) -> Option<Instant> {
        if self.metering.is_some()
            || self.scheduling.has_copies()
            || self.config_due.is_some()
            || self.guard_due
        {
            return None;
        }
        let mut until = self.recovery.quiet_until(now, &self.paths);
        if self.rx_since_report {
            until = until.min(self.next_report_at);
        }
        if let Some(t) = self.ack_pending_since {
            until = until.min(t + self.config.ack_delay);
        }
        for p in &self.paths {
            p.last_tx()?;
            until = until.min(self.heartbeat_due(p));
        }
        if let Some(t) = self.hello_due() {
            until = until.min(t);
        }
        (until > now).then_some(until)
    }

    /// An input arrived: what was decided without it may no longer hold.
    fn inputs_changed(&mut self) {
        self.wake();
        self.scheduling.held_class = None;
    }

    /// Something changed that a poll may act on: the next poll is a full one.
    fn wake(&mut self) {
        self.quiet_at = None;
        self.quiet_until = None;
        self.timeout_rest.set(None);
    }

    fn poll_transmit_now(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.advance(now);
        self.meter(now);
        if self.guard_due {
            self.guard_due = false;
            if self.config.loss_guard {
                let masked = self.config.loss_recovery != crate::LossRecoveryKind::None;
                let capped = self.queues_capped();
                crate::sched::guard::update_with_loss_limited(&mut self.paths, masked, capped);
            }
        }
        if let Some(t) = self.poll_config(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.poll_report(now, buf) {
            return Some(t);
        }
        // Retransmissions first when windows bound the paths: one fills the hole that holds
        // everything after it, so it takes the first room an acknowledgement opens. (Coded
        // packets are opportunistic: they take what room data leaves.)
        let repair_first = self.queues_capped()
            && matches!(
                self.config.loss_recovery,
                crate::LossRecoveryKind::Retransmit(_)
            );
        if repair_first {
            if let Some(t) = self.poll_repair(now, buf) {
                return Some(t);
            }
        }
        if let Some(t) = self.poll_data(now, buf) {
            return Some(t);
        }
        if !repair_first {
            if let Some(t) = self.poll_repair(now, buf) {
                return Some(t);
            }
        }
        if let Some(t) = self.poll_ack(now, buf) {
            return Some(t);
        }
        self.poll_heartbeat(now, buf)
    }

    fn header(
        &mut self,
        now: Instant,
        pi: usize,
        wire_len: usize,
        kind: SentKind,
        path_ack: Option<PathAck>,
        unordered: bool,
    ) -> Header {
        let wire_bytes = wire_len + self.config.datagram_overhead;
        let path = &mut self.paths[pi];
        let path_seq = path.on_send(now, wire_bytes, kind);
        Header {
            session_id: self.config.session_id,
            path: path.id(),
            path_seq,
            timestamp: now.wire_timestamp(),
            ack: self.highest_rx_data,
            path_ack,
            unordered,
        }
    }

    /// The path ack to piggyback next: the next path, in rotation, that received something
    /// since its last one.
    fn take_path_ack(&mut self) -> Option<PathAck> {
        let n = self.paths.len();
        for k in 0..n {
            let i = (self.ack_cursor + k) % n;
            if self.ack_dirty[i] {
                self.ack_dirty[i] = false;
                self.ack_cursor = i + 1;
                if !self.ack_dirty.contains(&true) {
                    self.ack_pending_since = None;
                }
                return self.paths[i].path_ack();
            }
        }
        self.ack_pending_since = None;
        None
    }

    /// A standalone ack when data arrived `ack_delay` ago and nothing carried its path ack
    /// back since (one-way traffic): a heartbeat on the fastest usable path, carrying it.
    fn poll_ack(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let since = self.ack_pending_since?;
        if now < since + self.config.ack_delay {
            return None;
        }
        let pi = self
            .paths
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_live())
            .min_by_key(|(_, p)| p.predicted_delivery_us(now, 64).unwrap_or(i64::MAX))
            .map_or(0, |(i, _)| i);
        self.emit(now, pi, Message::Heartbeat, SentKind::Control, buf)
    }

    /// Emits `message` on path index `pi`.
    fn emit(
        &mut self,
        now: Instant,
        pi: usize,
        message: Message<'_>,
        kind: SentKind,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        self.emit_flagged(now, pi, message, kind, buf, false)
    }

    /// Emits `message` on path index `pi`, marked for delivery on arrival if `unordered`.
    fn emit_flagged(
        &mut self,
        now: Instant,
        pi: usize,
        message: Message<'_>,
        kind: SentKind,
        buf: &mut [u8],
        unordered: bool,
    ) -> Option<Transmit> {
        // A control datagram with no fresh path ack to carry repeats its own path's: the
        // fresh ones may have gone out on a path that has just failed, and this one is how
        // the peer learns that the path it travels on still delivers (`path/liveness.rs`).
        let path_ack = self
            .take_path_ack()
            .or_else(|| (kind == SentKind::Control).then(|| self.paths[pi].path_ack())?);
        let probe = Datagram {
            header: Header {
                session_id: 0,
                path: 0,
                path_seq: 0,
                timestamp: 0,
                ack: self.highest_rx_data,
                path_ack,
                unordered: false,
            },
            message,
        };
        let len = probe.buffer_len();
        let header = self.header(now, pi, len, kind, path_ack, unordered);
        let d = Datagram { header, message };
        match d.emit(buf) {
            Ok(len) => Some(Transmit {
                path: header.path,
                len,
            }),
            // The caller's buffer is shorter than `transmit_buffer_len`: a driver bug. The
            // datagram is lost like any other and counted on the path.
            Err(_) => None,
        }
    }

    fn poll_config(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let path = self.config_due.take()?;
        let pi = self.index[usize::from(path)].map(usize::from)?;
        let msg = Message::Config(ConfigMsg {
            address: self.tunnel_address,
            mtu: u16::try_from(self.config.max_packet_size).ok(),
            hole_timeout_ms: u16::try_from(self.config.hole_timeout.as_millis()).ok(),
            capabilities: Some(braid_wire::CAP_RESTORES_HEADERS),
            ..ConfigMsg::default()
        });
        self.emit(now, pi, msg, SentKind::Control, buf)
    }

    fn poll_report(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if !self.rx_since_report || now < self.next_report_at {
            return None;
        }
        let pi = self.report_path(now);
        if let Some(p) = self.paths.get_mut(pi) {
            p.on_report_sent(now);
        }
        self.rx_since_report = false;
        self.next_report_at = now + self.config.report_interval;
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        entries.extend(self.paths.iter().map(|p| p.report_entry(now)));
        self.stats.reports_sent += 1;
        let t = self.emit(
            now,
            pi,
            Message::Report(PathEntries::Slice(&entries)),
            SentKind::Control,
            buf,
        );
        self.entries = entries;
        t
    }

    /// The path a report goes on: a usable path that has carried no report for
    /// `rtt_refresh` (the report's echo is what measures the path's RTT at the peer), else
    /// the usable path with the earliest predicted delivery. Staleness is judged by the
    /// reports we sent, not by our own RTT samples: those come from the peer's reports, so
    /// a path fresh here can be stale at the peer, whose RTT for it then froze (a download's
    /// slower path kept a 297 ms SRTT for 10 s of trace-bulk's 5g-drive+lte-drive).
    fn report_path(&self, now: Instant) -> usize {
        let usable = || self.paths.iter().enumerate().filter(|(_, p)| p.is_live());
        let stale = usable().find(|(_, p)| {
            p.last_report()
                .is_none_or(|t| now.saturating_duration_since(t) >= self.config.rtt_refresh)
        });
        if let Some((i, _)) = stale {
            return i;
        }
        usable()
            .min_by_key(|(_, p)| p.predicted_delivery_us(now, 100).unwrap_or(i64::MAX))
            .map_or(0, |(i, _)| i)
    }

    fn poll_repair(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let repair = self.recovery.poll_repair(now, &self.paths)?;
        let pi = self.index[usize::from(repair.path)].map(usize::from)?;
        let resent = match repair.body {
            crate::fec::RepairBody::Retransmit { seq, .. } => Some(seq),
            _ => None,
        };
        let message = repair.body.message();
        let kind = match repair.body {
            b if b.is_feedback() => SentKind::Control,
            crate::fec::RepairBody::Coded(_) => SentKind::Coded,
            _ => SentKind::Repair,
        };
        // `emit` needs `&mut self` while `message` borrows the recovery's buffers: emit
        // through a split borrow of the fields it touches.
        let wire_len = Datagram {
            header: Header {
                session_id: 0,
                path: 0,
                path_seq: 0,
                timestamp: 0,
                ack: self.highest_rx_data,
                path_ack: None,
                unordered: false,
            },
            message,
        }
        .buffer_len();
        let path = &mut self.paths[pi];
        let path_seq = path.on_send(now, wire_len + self.config.datagram_overhead, kind);
        let header = Header {
            session_id: self.config.session_id,
            path: path.id(),
            path_seq,
            timestamp: now.wire_timestamp(),
            ack: self.highest_rx_data,
            path_ack: None,
            unordered: false,
        };
        let t = Datagram { header, message }
            .emit(buf)
            .ok()
            .map(|len| Transmit {
                path: header.path,
                len,
            });
        self.recovery.on_repair_sent(now);
        if let Some(seq) = resent {
            self.rpc_on_resent(now, pi, seq);
        }
        if matches!(kind, SentKind::Repair | SentKind::Coded) {
            self.stats.repair_sent += 1;
        }
        t
    }

    fn heartbeat_due(&self, p: &Path) -> Instant {
        p.last_tx().unwrap_or(self.created) + self.config.heartbeat_interval
    }

    /// When an unconfigured gateway's next Hello is due: a heartbeat interval after its last,
    /// whatever else it sends. Hellos ride on heartbeats, which other traffic defers: a
    /// gateway that reports every 100 ms (the server's heartbeats give it something to
    /// report) never sent one again, and a lost first Config left it unconfigured for good
    /// (the lab's 2%-loss path, once in a CI run).
    fn hello_due(&self) -> Option<Instant> {
        (self.role == Role::Gateway && !self.configured).then(|| {
            self.hello_sent_at
                .map_or(self.created, |t| t + self.config.heartbeat_interval)
        })
    }

    fn poll_heartbeat(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let first_tx = |p: &Path| p.last_tx().is_none();
        let due = self
            .paths
            .iter()
            .position(|p| first_tx(p) || self.heartbeat_due(p) <= now);
        let hello_now = self.hello_due().is_some_and(|t| t <= now);
        let pi = match due {
            Some(pi) => pi,
            None if hello_now => self.paths.iter().position(Path::is_live).unwrap_or(0),
            None => return None,
        };
        if self.paths.is_empty() {
            return None;
        }
        let hello = !self.configured || self.announce_due;
        if hello && self.role == Role::Gateway {
            self.hello_sent_at = Some(now);
        }
        self.announce_due = false;
        let announcement = self.metering_announcement(now).filter(|_| hello);
        let classes = announcement
            .as_ref()
            .and_then(|_| self.metered_classes_announcement());
        let msg = if hello {
            Message::Hello(Hello {
                paths: u8::try_from(self.paths.len()).ok(),
                capabilities: Some(braid_wire::CAP_RESTORES_HEADERS),
                name: None,
                metering: announcement.as_deref(),
                metered_classes: classes.as_deref(),
            })
        } else {
            Message::Heartbeat
        };
        self.emit(now, pi, msg, SentKind::Control, buf)
    }

    /// Moves the next in-order inner packet into `out`, replacing its contents.
    ///
    /// Packets that travelled with compressed headers are rebuilt here, after resequencing,
    /// so that in the data-sequence order the packet establishing a context comes before
    /// the compressed ones that use it (`compress.rs`). One that cannot be rebuilt is
    /// dropped and counted in [`SessionStats::header_compression`].
    pub fn poll_deliver(&mut self, out: &mut Vec<u8>) -> bool {
        self.delivered_checksums_verified = false;
        if self.rpc_pop_release(out) {
            return true;
        }
        while self.reseq.poll_deliver(out) {
            self.wake();
            let rebuilt = crate::compress::is_compressed(out);
            if self.decompressor.restore(out).is_err() {
                continue;
            }
            if let Some(flow) = self.decompressor.take_established() {
                self.compressor.refresh_reverse(&flow);
            }
            if !self.rpc_filter_delivered(out) {
                continue;
            }
            // RPC may have handed out another packet than the one rebuilt.
            self.delivered_checksums_verified = rebuilt && self.rpc.is_none();
            self.stats.delivered_packets += 1;
            self.stats.delivered_bytes += out.len() as u64;
            return true;
        }
        false
    }

    /// Whether the packet the latest [`Session::poll_deliver`] returned was rebuilt from
    /// the compressed form: its TCP checksum was verified after the rebuild and its IPv4
    /// header checksum written, so a receiver may take both as verified without summing
    /// the packet again.
    pub fn delivered_checksums_verified(&self) -> bool {
        self.delivered_checksums_verified
    }

    /// When the engine next needs [`Session::handle_timeout`] (or [`Session::poll_transmit`]
    /// for a due heartbeat or report).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let retry = (self.scheduling.retry_at).filter(|_| !self.send_queue.is_empty());
        let rest = match self.timeout_rest.get() {
            Some(rest) => rest,
            None => {
                let rest = self.poll_timeout_rest();
                self.timeout_rest.set(Some(rest));
                rest
            }
        };
        earliest(retry, rest)
    }

    /// [`Session::poll_timeout`] but for the held packet's retry: everything that only an
    /// input, a full poll or a send changes.
    fn poll_timeout_rest(&self) -> Option<Instant> {
        let mut next = Instant::MAX;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = next.min(t);
            }
        };
        let recovery = &self.recovery;
        consider(
            self.reseq
                .poll_timeout_repairing(|seq| recovery.repair_expected(seq)),
        );
        consider(self.recovery.poll_timeout(self.last_now, &self.paths));
        if self.rx_since_report {
            consider(Some(self.next_report_at));
        }
        consider(self.ack_pending_since.map(|t| t + self.config.ack_delay));
        consider(self.rpc_timeout());
        consider(self.metering.as_ref().map(metering::Metering::poll_timeout));
        for p in &self.paths {
            consider(Some(self.heartbeat_due(p)));
        }
        consider(self.hello_due());
        for i in 0..self.paths.len() {
            // Only a live path has a deadline (and its timeout scans the other paths).
            if self.paths[i].rx_live() {
                let timeout = self.silence_timeout(i);
                consider(self.paths[i].liveness_deadline(self.created, timeout));
            }
        }
        (next != Instant::MAX).then_some(next)
    }

    /// Whether every scheduler caps the queue it puts in front of each bottleneck, so that
    /// what a path loses is its own loss and not the bond's overflow: the loss guard's
    /// loss-limited rule and the loss recovery's repair hold depend on it.
    fn queues_capped(&self) -> bool {
        (self.scheduling.schedulers.iter()).all(|s| s.caps_bottleneck_queues())
    }

    /// Lets timers fire: hole timeouts in the resequencing buffer, path liveness, loss
    /// recovery. Harmless when called early.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.inputs_changed();
        self.meter(now);
        let recovery = &self.recovery;
        self.reseq
            .handle_timeout_repairing(now, |seq| recovery.repair_expected(seq));
        self.recovery.handle_timeout(now);
        self.rpc_handle_timeout(now);
        for i in 0..self.paths.len() {
            let timeout = self.silence_timeout(i);
            let stalled = self.paths[i].liveness().is_stalled();
            if self.paths[i].check_liveness(now, self.created, timeout) {
                let id = self.paths[i].id();
                self.push_event(Event::PathDown(id));
                self.recovery.on_path_failed(now);
                // Silence can tell first (short queues leave the stalled-ack rule little
                // lead): what was in flight on the path is resent all the same.
                if !stalled {
                    self.resend_in_flight(i);
                }
            }
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Counters and current estimates.
    pub fn stats(&self) -> SessionStats {
        let mut s = self.stats.clone();
        s.failover_resent = self.failover.resent;
        s.failover_left = self.failover.left;
        s.paths = self.paths.iter().map(|p| p.stats(self.last_now)).collect();
        s.reorder = self.reseq.stats();
        s.flows = self.scheduling.flows.stats();
        s.loss_recovery = self.recovery.stats();
        if let Some(m) = &self.metering {
            s.metered = m.stats(self.last_now);
        }
        let (tx, rx) = (self.compressor.stats, self.decompressor.stats);
        s.header_compression = crate::compress::CompressStats {
            decompressed: rx.decompressed,
            unknown_context: rx.unknown_context,
            failed: rx.failed,
            ..tx
        };
        s
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    fn advance(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
    }
}

/// Hands data packets (received or recovered) to the resequencing buffer.
struct Accept<'a> {
    reseq: &'a mut Resequencer,
    highest: &'a mut Option<u32>,
    recovered: &'a mut u64,
    now: Instant,
}

impl Accept<'_> {
    fn note_highest(&mut self, seq: u32) {
        if self.highest.is_none_or(|h| seq.wrapping_sub(h) as i32 > 0) {
            *self.highest = Some(seq);
        }
    }

    fn accept(&mut self, seq: u32, payload: &[u8]) -> Insert {
        self.note_highest(seq);
        self.reseq.insert(self.now, seq, payload)
    }
}

impl RecoveredSink for Accept<'_> {
    fn recovered(&mut self, seq: u32, payload: &[u8]) {
        if self.accept(seq, payload) != Insert::Duplicate {
            *self.recovered += 1;
        }
    }
}

#[cfg(test)]
mod metering_tests;
#[cfg(test)]
mod sched_tests;
#[cfg(test)]
mod tests;
