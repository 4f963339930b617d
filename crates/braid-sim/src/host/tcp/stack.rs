//! One host's TCP model: its connections, found by (remote address, remote port, local
//! port); passive opens through the caller's `accept`; RSTs for segments that match no
//! connection (RFC 9293 §3.10.7.1); ephemeral ports; and connections lingering after
//! their flow ended.

use std::collections::BTreeMap;

use braid_core::time::earliest;
use braid_core::Instant;

use super::conn::{Config, Conn, State};
use super::send::SenderStats;
use super::seq::Seq;
use super::wire::{self, Header, ACK, RST, SYN};
use crate::host::packets::Packets;
use crate::host::ports::EphemeralPorts;
use crate::host::transport::Buffers;
use crate::{Packet, Rng};

/// How long a connection whose flow is over may take to finish closing before it is
/// dropped (when it has nothing left to send).
const LINGER_US: u64 = 60_000_000;

/// A connection's handle: its slot and the slot's generation, so a stale handle never
/// reaches a newer connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnId {
    index: u32,
    generation: u32,
}

/// Counters of segments the stack handled without a connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackStats {
    /// Not parsable as IPv4/TCP, bad checksum, or not addressed to this host.
    pub dropped: u64,
    /// RSTs sent for segments that matched no connection.
    pub resets: u64,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    conn: Option<Conn>,
    /// The ephemeral port to free when the connection goes (active opens).
    port: Option<u16>,
    /// The server's port: the remote one of an active open, the local one otherwise.
    service: u16,
}

#[derive(Debug)]
struct Lingering {
    id: ConnId,
    deadline: Instant,
}

type Key = ([u8; 4], u16, u16);

#[derive(Debug)]
pub struct Stack {
    addr: [u8; 4],
    mtu: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_key: BTreeMap<Key, u32>,
    rng: Rng,
    ports: EphemeralPorts,
    lingering: Vec<Lingering>,
    /// Connections the application closed since the last egress: they send first.
    closed_now: Vec<ConnId>,
    /// Sending counters of closed connections, by the workload's server port.
    closed_stats: BTreeMap<u16, SenderStats>,
    stats: StackStats,
    ip_id: u16,
}

impl Stack {
    /// A stack for a host at `addr` with IP MTU `mtu`; `rng` draws initial sequence
    /// numbers.
    pub fn new(addr: [u8; 4], mtu: usize, rng: Rng) -> Stack {
        Stack {
            addr,
            mtu,
            slots: Vec::new(),
            free: Vec::new(),
            by_key: BTreeMap::new(),
            rng,
            ports: EphemeralPorts::default(),
            lingering: Vec::new(),
            closed_now: Vec::new(),
            closed_stats: BTreeMap::new(),
            stats: StackStats::default(),
            ip_id: 0,
        }
    }

    fn config(&self, b: Buffers) -> Config {
        Config {
            mtu: self.mtu,
            rx_capacity: b.rx,
            tx_capacity: b.tx,
            nagle: b.nagle,
            initial_window: b.initial_window,
            prism: b.prism,
            sack: b.sack,
        }
    }

    /// Opens a connection from an ephemeral port to `remote:port`; `None` when no port is
    /// free.
    pub fn connect(&mut self, remote: [u8; 4], port: u16, buffers: Buffers) -> Option<ConnId> {
        let local = self.ports.allocate()?;
        let iss = Seq(self.rng.next_u64() as u32);
        let conn = Conn::connect(
            (self.addr, local),
            (remote, port),
            iss,
            self.config(buffers),
        );
        Some(self.insert(conn, Some(local), port))
    }

    fn insert(&mut self, conn: Conn, port: Option<u16>, service: u16) -> ConnId {
        let (addr, rport) = conn.remote();
        let key = (addr, rport, conn.local().1);
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    conn: None,
                    port: None,
                    service: 0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.conn = Some(conn);
        slot.port = port;
        slot.service = service;
        self.by_key.insert(key, index);
        ConnId {
            index,
            generation: slot.generation,
        }
    }

    /// Whether a connection (open or lingering) has this remote address and port and this
    /// local port.
    pub fn has_conn(&self, remote: [u8; 4], remote_port: u16, local_port: u16) -> bool {
        self.by_key.contains_key(&(remote, remote_port, local_port))
    }

    pub fn conn_ref(&self, id: ConnId) -> Option<&Conn> {
        let slot = self.slots.get(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.conn.as_ref()
    }

    pub fn conn(&mut self, id: ConnId) -> Option<&mut Conn> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.conn.as_mut()
    }

    /// Processes one received packet and sends the connection's response into `out`. A
    /// SYN for no connection is offered to `accept(local port, remote port)`, which
    /// returns the buffers of the connection to create, or `None` to refuse it (a RST).
    /// Returns the new connection with its local and remote ports.
    pub fn ingress(
        &mut self,
        now: Instant,
        packet: Packet,
        out: &mut Packets,
        accept: &mut dyn FnMut(u16, u16) -> Option<Buffers>,
    ) -> Option<(ConnId, u16, u16)> {
        self.ingress_checked(now, packet, false, out, accept)
    }

    /// [`Stack::ingress`] of a packet whose checksums are known to hold when
    /// `checksums_verified` ([`wire::parse_checked`]).
    pub fn ingress_checked(
        &mut self,
        now: Instant,
        packet: Packet,
        checksums_verified: bool,
        out: &mut Packets,
        accept: &mut dyn FnMut(u16, u16) -> Option<Buffers>,
    ) -> Option<(ConnId, u16, u16)> {
        let accepted = self.ingress_segment(now, &packet, checksums_verified, out, accept);
        out.recycle(packet);
        accepted
    }

    fn ingress_segment(
        &mut self,
        now: Instant,
        packet: &[u8],
        checksums_verified: bool,
        out: &mut Packets,
        accept: &mut dyn FnMut(u16, u16) -> Option<Buffers>,
    ) -> Option<(ConnId, u16, u16)> {
        let seg = match wire::parse_checked(packet, checksums_verified) {
            Ok(seg) if seg.header.dst == self.addr => seg,
            _ => {
                self.stats.dropped += 1;
                return None;
            }
        };
        let h = seg.header;
        if let Some(&index) = self.by_key.get(&(h.src, h.src_port, h.dst_port)) {
            if let Some(conn) = self
                .slots
                .get_mut(index as usize)
                .and_then(|s| s.conn.as_mut())
            {
                conn.on_segment(now, &seg);
                conn.transmit(now, out);
                return None;
            }
        }
        if h.has(SYN) && !h.has(ACK) && !h.has(RST) {
            if let Some(buffers) = accept(h.dst_port, h.src_port) {
                let iss = Seq(self.rng.next_u64() as u32);
                let mut conn = Conn::accept(&h, iss, self.config(buffers));
                conn.transmit(now, out);
                let id = self.insert(conn, None, h.dst_port);
                return Some((id, h.dst_port, h.src_port));
            }
        }
        if !h.has(RST) {
            self.reset(out, &h, seg.seq_len());
        }
        None
    }

    /// Answers a segment that matches no connection (RFC 9293 §3.10.7.1).
    fn reset(&mut self, out: &mut Packets, h: &Header, seg_len: u32) {
        let (seq, ack, flags) = if h.has(ACK) {
            (h.ack, Seq(0), RST)
        } else {
            (Seq(0), h.seq + seg_len, RST | ACK)
        };
        let rst = Header {
            src: self.addr,
            dst: h.src,
            src_port: h.dst_port,
            dst_port: h.src_port,
            seq,
            ack,
            flags,
            ..Header::default()
        };
        let mut buf = out.buffer();
        self.ip_id = self.ip_id.wrapping_add(1);
        wire::emit(&mut buf, &rst, self.ip_id, 0, |_| {});
        out.push_checked(buf);
        self.stats.resets += 1;
    }

    /// Fires due timers and lets every connection send what it can. Connections the
    /// application closed since the last egress send first: a kernel sends the FIN from
    /// the close() call itself, so it leaves before the SYN of a connection the
    /// application opens after closing (PluriBus §6.5.1's "a new flow starts when one
    /// terminated"); slot order would otherwise put a new connection in a reused lower
    /// slot ahead of it.
    ///
    /// Returns whether it did anything (fired a timer, or let a connection transmit):
    /// if not, a second call at the same `now` with nothing received between does nothing.
    pub fn egress(&mut self, now: Instant, out: &mut Packets) -> bool {
        let mut active = !self.closed_now.is_empty();
        let mut closed = std::mem::take(&mut self.closed_now);
        for id in closed.drain(..) {
            if let Some(conn) = self.conn(id) {
                conn.transmit(now, out);
            }
        }
        self.closed_now = closed;
        for slot in &mut self.slots {
            if let Some(conn) = slot.conn.as_mut() {
                if conn.deadline().is_some_and(|t| t <= now) {
                    active = true;
                    conn.on_timeout(now);
                }
                if conn.needs_transmit(now) {
                    active = true;
                    conn.transmit(now, out);
                }
            }
        }
        active
    }

    /// When the stack next needs [`Stack::egress`].
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        let mut at = None;
        for c in self.slots.iter().filter_map(|s| s.conn.as_ref()) {
            let due = if c.wants_transmit(now) {
                Some(now)
            } else {
                c.deadline()
            };
            at = earliest(at, due);
        }
        at
    }

    /// Closes a connection whose flow is over; it is removed once closed (or in
    /// TIME-WAIT), or after a while with nothing left to send (see [`Stack::reap`]).
    pub fn linger(&mut self, now: Instant, id: ConnId) {
        if let Some(conn) = self.conn(id) {
            conn.close();
            self.closed_now.push(id);
            self.lingering.push(Lingering {
                id,
                deadline: Instant::from_micros(now.as_micros().saturating_add(LINGER_US)),
            });
        }
    }

    /// Removes a connection at once, without a RST.
    pub fn discard(&mut self, id: ConnId) {
        let Some(slot) = self.slots.get_mut(id.index as usize) else {
            return;
        };
        if slot.generation != id.generation {
            return;
        }
        let Some(conn) = slot.conn.take() else { return };
        slot.generation = slot.generation.wrapping_add(1);
        if let Some(port) = slot.port.take() {
            self.ports.free(port);
        }
        let (addr, rport) = conn.remote();
        self.by_key.remove(&(addr, rport, conn.local().1));
        self.closed_stats
            .entry(slot.service)
            .or_default()
            .add(conn.stats());
        self.free.push(id.index);
    }

    /// Removes lingering connections that have closed or reached TIME-WAIT, or outstayed
    /// the deadline with nothing left to send; returns whether it removed any.
    pub fn reap(&mut self, now: Instant) -> bool {
        let before = self.lingering.len();
        let mut i = 0;
        while i < self.lingering.len() {
            let (id, deadline) = (self.lingering[i].id, self.lingering[i].deadline);
            let done = match self.conn(id) {
                None => true,
                Some(c) => {
                    matches!(c.state(), State::Closed | State::TimeWait)
                        || (now >= deadline && c.send_queue() == 0)
                }
            };
            if done {
                let l = self.lingering.swap_remove(i);
                self.discard(l.id);
            } else {
                i += 1;
            }
        }
        self.lingering.len() != before
    }

    pub fn lingering(&self) -> usize {
        self.lingering.len()
    }

    /// Connections held: open, being served, or lingering.
    pub fn connections(&self) -> usize {
        self.by_key.len()
    }

    pub fn stats(&self) -> &StackStats {
        &self.stats
    }

    /// Checks every connection's invariants and the table's (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let live = self.conns().count();
        assert_eq!(live, self.by_key.len());
        for conn in self.conns() {
            conn.check();
        }
    }

    /// Checks that every connection egress would skip at `now` has nothing to send (tests).
    #[cfg(test)]
    pub fn check_skipped(&mut self, now: Instant) {
        let mut out = Packets::default();
        for conn in self.slots.iter_mut().filter_map(|s| s.conn.as_mut()) {
            if !conn.needs_transmit(now) {
                conn.transmit(now, &mut out);
                assert!(out.pop().is_none(), "a skipped transmit would have sent");
            }
        }
    }

    /// Every connection held, in slot order.
    pub fn conns(&self) -> impl Iterator<Item = &Conn> {
        self.slots.iter().filter_map(|s| s.conn.as_ref())
    }

    /// Sending counters of every connection, past and present, whose server port is
    /// `port`.
    pub fn sender_stats(&self, port: u16) -> SenderStats {
        let mut total = self.closed_stats.get(&port).cloned().unwrap_or_default();
        for slot in self.slots.iter().filter(|s| s.service == port) {
            if let Some(conn) = &slot.conn {
                total.add(conn.stats());
            }
        }
        total
    }
}
