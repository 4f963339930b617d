//! One connection: the state machine of RFC 9293 §3.3.2 and its segment processing
//! (§3.10.7), joining the send half (`super::send`) and the receive half (`super::recv`).
//!
//! - Handshake (§3.5): SYN and SYN-ACK carry MSS, window scale and SACK-permitted; each
//!   option is used only if both ends sent it (RFC 7323 §2.2, RFC 2018 §2). The SYN is
//!   retransmitted after 1 s, doubling, six times (Linux `tcp_syn_retries`; five for a
//!   SYN-ACK, `tcp_synack_retries`); the handshake gives the first RTT sample if it was
//!   not retransmitted. A SYN-ACK that acknowledges the wrong number gets a RST.
//! - Acceptability (§3.10.7.4): a segment outside the receive window is answered with an
//!   ACK (a D-SACK if it repeats data) and dropped. RST and SYN are checked as RFC 5961
//!   §3-4 asks: a RST counts only at exactly RCV.NXT, otherwise, like a SYN on an open
//!   connection, it draws a challenge ACK; an ACK for data not yet sent, or older than a
//!   window, draws an ACK and is dropped (§5). ACKs answering invalid segments without
//!   data are sent at most every 500 ms, as Linux limits them (`tcp_invalid_ratelimit`).
//! - Teardown (§3.6): FIN after the queued data; FIN-WAIT-1/2, CLOSING, TIME-WAIT,
//!   CLOSE-WAIT, LAST-ACK. TIME-WAIT is entered but not held for 2·MSL: the host reaps the
//!   connection, and a retransmitted FIN then meets a RST, which ends the peer's LAST-ACK
//!   as well.

use std::time::Duration;

use braid_core::time::earliest;
use braid_core::Instant;

use super::recv::Receiver;
use super::send::{Sender, SenderStats, Tx};
use super::seq::Seq;
use super::wire::{self, Header, Segment, ACK, FIN, HEADERS, MAX_WINDOW_SHIFT, PSH, RST, SYN};
use crate::host::packets::Packets;
use crate::host::workload::InitialWindow;

/// The MSS assumed when the peer sends none (RFC 9293 §3.7.1).
const DEFAULT_MSS: u32 = 536;
/// SYN retransmissions before giving up (Linux `tcp_syn_retries`, `tcp_synack_retries`).
const SYN_RETRIES: u32 = 6;
const SYNACK_RETRIES: u32 = 5;
const SYN_RTO: Duration = Duration::from_secs(1);
/// Least time between ACKs answering invalid segments (Linux `tcp_invalid_ratelimit`).
const OOW_ACK_INTERVAL: Duration = Duration::from_millis(500);

/// RFC 9293 §3.3.2 (LISTEN is the stack's; CLOSED ends a connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
    Closed,
}

/// Buffer sizes and options of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// IP MTU: our MSS is MTU − 40.
    pub mtu: usize,
    pub rx_capacity: usize,
    pub tx_capacity: usize,
    pub nagle: bool,
    /// `None`: [`super::send::INITIAL_WINDOW`].
    pub initial_window: Option<InitialWindow>,
    /// The sender runs TCP-PRISM (`send.rs`).
    pub prism: bool,
    /// SACK is offered and accepted.
    pub sack: bool,
}

/// What the peer's SYN offered.
#[derive(Clone, Copy, Debug)]
struct PeerSyn {
    seq: Seq,
    window: u16,
    mss: u32,
    shift: Option<u8>,
    sack: bool,
}

#[derive(Debug)]
pub struct Conn {
    local: ([u8; 4], u16),
    remote: ([u8; 4], u16),
    state: State,
    iss: Seq,
    our_mss: u16,
    our_shift: u8,
    rx_capacity: usize,
    snd: Sender,
    /// The receive half, once the peer's initial sequence number is known.
    rcv: Option<Receiver>,
    peer: Option<PeerSyn>,
    syn_pending: bool,
    syn_sent_at: Option<Instant>,
    syn_retransmits: u32,
    syn_timer: Option<Instant>,
    /// A RST to send: (sequence number, acknowledgment number if any).
    rst: Option<(Seq, Option<Seq>)>,
    /// When an ACK last answered an invalid segment.
    last_oow_ack: Option<Instant>,
    reset: bool,
    ip_id: u16,
    sack_ok: bool,
    /// Something changed since the last [`Conn::transmit`]: a segment, a timer, the
    /// application. Until then a transmit finds nothing to send but a due ACK (it is
    /// idempotent), so the stack's egress skips it ([`Conn::needs_transmit`]).
    changed: bool,
    /// Counts the changes the application may see ([`Conn::version`]).
    version: u64,
}

impl Conn {
    /// An active open (RFC 9293 §3.10.1): SYN-SENT, the SYN goes out on the next transmit.
    pub fn connect(local: ([u8; 4], u16), remote: ([u8; 4], u16), iss: Seq, cfg: Config) -> Conn {
        Conn::new(local, remote, iss, cfg, State::SynSent)
    }

    /// A passive open from the peer's `syn` (RFC 9293 §3.10.7.2): SYN-RECEIVED, the
    /// SYN-ACK goes out on the next transmit.
    pub fn accept(syn: &Header, iss: Seq, cfg: Config) -> Conn {
        let mut c = Conn::new(
            (syn.dst, syn.dst_port),
            (syn.src, syn.src_port),
            iss,
            cfg,
            State::SynReceived,
        );
        c.on_peer_syn(syn);
        c
    }

    fn new(
        local: ([u8; 4], u16),
        remote: ([u8; 4], u16),
        iss: Seq,
        cfg: Config,
        state: State,
    ) -> Conn {
        let our_mss = cfg
            .mtu
            .saturating_sub(HEADERS)
            .clamp(64, usize::from(u16::MAX)) as u16;
        // The smallest shift that lets the whole buffer be offered (RFC 7323 §2.3).
        let mut our_shift = 0;
        while (cfg.rx_capacity >> our_shift) > usize::from(u16::MAX) && our_shift < MAX_WINDOW_SHIFT
        {
            our_shift += 1;
        }
        Conn {
            local,
            remote,
            state,
            iss,
            our_mss,
            our_shift,
            rx_capacity: cfg.rx_capacity,
            snd: Sender::new(iss, cfg.tx_capacity, cfg.nagle, cfg.initial_window)
                .with_prism(cfg.prism),
            rcv: None,
            peer: None,
            syn_pending: true,
            syn_sent_at: None,
            syn_retransmits: 0,
            syn_timer: None,
            rst: None,
            last_oow_ack: None,
            reset: false,
            ip_id: (iss.0 >> 16) as u16,
            sack_ok: cfg.sack,
            changed: true,
            version: 0,
        }
    }

    /// Takes the peer's SYN options and starts the receive half.
    fn on_peer_syn(&mut self, h: &Header) {
        let both_scale = h.window_shift.is_some();
        let rcv_shift = if both_scale { self.our_shift } else { 0 };
        let sack = h.sack_permitted && self.sack_ok;
        let mut rcv = Receiver::new(
            h.seq,
            self.rx_capacity,
            rcv_shift,
            u32::from(self.our_mss),
            sack,
        );
        if self.state == State::SynSent {
            // The window our SYN offered.
            rcv.syn_window();
        }
        self.rcv = Some(rcv);
        self.peer = Some(PeerSyn {
            seq: h.seq,
            window: h.window,
            mss: h
                .mss
                .map_or(DEFAULT_MSS, u32::from)
                .min(u32::from(self.our_mss)),
            shift: h.window_shift,
            sack,
        });
    }

    /// The handshake completed at `now`.
    fn establish(&mut self, now: Instant) {
        let Some(p) = self.peer else { return };
        let rtt = match (self.syn_retransmits, self.syn_sent_at) {
            (0, Some(at)) => Some(now - at),
            _ => None,
        };
        self.snd.on_established(
            (p.window, p.seq),
            p.shift.unwrap_or(0),
            p.mss,
            p.sack,
            (rtt, self.syn_retransmits),
        );
        self.syn_timer = None;
        self.state = if self.snd.fin_queued() {
            State::FinWait1
        } else {
            State::Established
        };
    }

    pub fn local(&self) -> ([u8; 4], u16) {
        self.local
    }

    pub fn remote(&self) -> ([u8; 4], u16) {
        self.remote
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Whether the connection ended by a RST or by giving up.
    pub fn was_reset(&self) -> bool {
        self.reset
    }

    pub fn sender(&self) -> &Sender {
        &self.snd
    }

    pub fn stats(&self) -> &SenderStats {
        self.snd.stats()
    }

    /// Checks both halves' invariants (tests).
    #[cfg(test)]
    pub fn check(&self) {
        self.snd.check();
        if let Some(r) = &self.rcv {
            r.check();
        }
    }

    fn on_reset(&mut self) {
        self.state = State::Closed;
        self.reset = true;
    }

    /// Processes one segment addressed to this connection (RFC 9293 §3.10.7).
    pub fn on_segment(&mut self, now: Instant, seg: &Segment<'_>) {
        self.touch();
        let h = &seg.header;
        match self.state {
            State::Closed => return,
            State::SynSent => return self.on_segment_syn_sent(now, seg),
            _ => {}
        }
        let Some(rcv) = self.rcv.as_mut() else { return };
        let len = seg.seq_len();
        if self.state == State::SynReceived && h.has(SYN) && !h.has(ACK) && h.seq + 1 == rcv.nxt() {
            // The peer did not get our SYN-ACK.
            self.syn_pending = true;
            return;
        }
        // First: the sequence number.
        if !acceptable(rcv.nxt(), rcv.edge(), h.seq, len) {
            if h.has(RST) {
                return;
            }
            if !seg.payload.is_empty() {
                if h.seq + seg.payload.len() as u32 <= rcv.nxt() {
                    // A repeat of data we have: report it (D-SACK), which also ACKs.
                    rcv.on_segment(now, h.seq, seg.payload, false);
                }
                rcv.force_ack();
            } else {
                self.oow_ack(now);
            }
            return;
        }
        // Second: RST (RFC 5961 §3.2).
        if h.has(RST) {
            if h.seq == rcv.nxt() {
                self.on_reset();
            } else {
                self.oow_ack(now);
            }
            return;
        }
        // Fourth: SYN on a synchronized connection (RFC 5961 §4).
        if h.has(SYN) {
            self.oow_ack(now);
            return;
        }
        // Fifth: ACK.
        if !h.has(ACK) {
            return;
        }
        if self.state == State::SynReceived {
            if h.ack != self.snd.una() {
                self.rst = Some((h.ack, None));
                return;
            }
            self.establish(now);
        }
        let oldest = self.snd.una() - self.snd.max_window();
        if h.ack > self.snd.nxt() || h.ack < oldest {
            self.oow_ack(now);
            return;
        }
        self.snd.on_ack(now, h, len);
        let Some(rcv) = self.rcv.as_mut() else { return };
        if self.snd.fin_acked() {
            self.state = match self.state {
                State::FinWait1 => State::FinWait2,
                State::Closing => State::TimeWait,
                State::LastAck => State::Closed,
                s => s,
            };
        }
        // Seventh: data and FIN.
        if matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            let arrival = rcv.on_segment(now, h.seq, seg.payload, h.has(FIN));
            if arrival.fin {
                self.state = match self.state {
                    State::Established => State::CloseWait,
                    State::FinWait1 => State::Closing,
                    _ => State::TimeWait,
                };
            }
        } else if len > 0 {
            // A repeated FIN (or data after it): ACK again.
            rcv.force_ack();
        }
    }

    /// ACKs an invalid segment without data, at most once per 500 ms, so that two ends
    /// that disagree (after an injected segment, say) cannot ACK each other forever
    /// (Linux `tcp_oow_rate_limited`, RFC 5961 §7).
    fn oow_ack(&mut self, now: Instant) {
        if self
            .last_oow_ack
            .is_some_and(|t| now - t < OOW_ACK_INTERVAL)
        {
            return;
        }
        self.last_oow_ack = Some(now);
        if let Some(rcv) = self.rcv.as_mut() {
            rcv.force_ack();
        }
    }

    /// SYN-SENT (RFC 9293 §3.10.7.3).
    fn on_segment_syn_sent(&mut self, now: Instant, seg: &Segment<'_>) {
        let h = &seg.header;
        if h.has(ACK) && h.ack != self.iss + 1 {
            if !h.has(RST) {
                self.rst = Some((h.ack, None));
            }
            return;
        }
        if h.has(RST) {
            if h.has(ACK) {
                self.on_reset();
            }
            return;
        }
        if !h.has(SYN) {
            return;
        }
        self.on_peer_syn(h);
        if h.has(ACK) {
            self.establish(now);
            if let Some(rcv) = self.rcv.as_mut() {
                rcv.force_ack();
            }
        } else {
            // Simultaneous open: answer with a SYN-ACK.
            self.state = State::SynReceived;
            self.syn_pending = true;
        }
    }

    /// The application is done sending (RFC 9293 §3.10.4).
    pub fn close(&mut self) {
        self.touch();
        match self.state {
            State::SynSent => self.state = State::Closed,
            State::SynReceived => self.snd.close(),
            State::Established => {
                self.snd.close();
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.snd.close();
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// When the connection next needs [`Conn::on_timeout`] or [`Conn::transmit`].
    pub fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::Closed => None,
            State::SynSent | State::SynReceived => self.syn_timer,
            _ => {
                let rcv = self.rcv.as_ref().and_then(Receiver::deadline);
                earliest(self.snd.deadline(), rcv)
            }
        }
    }

    /// Whether something must go out without waiting for a timer.
    pub fn wants_transmit(&self, now: Instant) -> bool {
        self.rst.is_some()
            || (self.syn_pending && matches!(self.state, State::SynSent | State::SynReceived))
            || self.rcv.as_ref().is_some_and(|r| r.ack_due(now))
    }

    /// Fires whatever timer is due.
    pub fn on_timeout(&mut self, now: Instant) {
        self.touch();
        match self.state {
            State::Closed => {}
            State::SynSent | State::SynReceived => {
                if self.syn_timer.is_some_and(|t| t <= now) {
                    let limit = if self.state == State::SynSent {
                        SYN_RETRIES
                    } else {
                        SYNACK_RETRIES
                    };
                    if self.syn_retransmits >= limit {
                        self.on_reset();
                    } else {
                        self.syn_retransmits += 1;
                        self.syn_pending = true;
                    }
                }
            }
            _ => {
                if self.snd.on_timeout(now).is_err() {
                    self.on_reset();
                }
            }
        }
    }

    /// Something changed: a transmit is due, and the application may see it.
    fn touch(&mut self) {
        self.changed = true;
        self.version = self.version.wrapping_add(1);
    }

    /// Moves whenever the connection's state, its data to read or its room to send may
    /// have changed (a segment, a timer, the application's own calls); a transmit changes
    /// none of these.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether [`Conn::transmit`] at `now` may send or change anything: not if nothing
    /// changed since the last one and no ACK, SYN or RST is due.
    pub fn needs_transmit(&self, now: Instant) -> bool {
        self.changed || self.wants_transmit(now)
    }

    /// Sends what is due at `now` into `out`: a RST, the SYN or SYN-ACK, retransmissions
    /// and new data as the windows allow, and an ACK if one is owed.
    pub fn transmit(&mut self, now: Instant, out: &mut Packets) {
        self.changed = false;
        if let Some((seq, ack)) = self.rst.take() {
            self.emit_rst(out, seq, ack);
        }
        match self.state {
            State::Closed => return,
            State::SynSent | State::SynReceived => {
                if self.syn_pending {
                    self.emit_syn(now, out);
                }
                return;
            }
            State::Established
            | State::CloseWait
            | State::FinWait1
            | State::Closing
            | State::LastAck => {
                let mut sent_new = false;
                while let Some(tx) = self.snd.poll() {
                    self.emit_tx(out, tx);
                    sent_new |= matches!(tx, Tx::New { .. });
                    self.snd.on_sent(now, tx);
                }
                self.snd.after_transmit(now, sent_new);
            }
            State::FinWait2 | State::TimeWait => {}
        }
        if self.rcv.as_ref().is_some_and(|r| r.ack_due(now)) {
            let seq = self.snd.nxt();
            self.emit_segment(out, seq, ACK, 0);
        }
    }

    fn emit_tx(&mut self, out: &mut Packets, tx: Tx) {
        match tx {
            Tx::New { len, fin } => {
                let seq = self.snd.nxt();
                let last = self.snd.queued() == (seq + len).since(self.snd.una()) as usize;
                let flags = ACK | if fin { FIN } else { 0 } | if last && len > 0 { PSH } else { 0 };
                self.emit_segment(out, seq, flags, len);
            }
            Tx::Retransmit(i) => {
                let Some(seg) = self.snd.segment(i).copied() else {
                    return;
                };
                let flags = ACK | if seg.fin { FIN } else { 0 };
                self.emit_segment(out, seg.start, flags, seg.data_len());
            }
            Tx::WindowProbe => {
                let seq = self.snd.una() - 1;
                self.emit_segment(out, seq, ACK, 0);
            }
        }
    }

    /// Emits a segment of an established connection, with our ACK, window and as many SACK
    /// blocks as fit beside the payload within the MSS.
    fn emit_segment(&mut self, out: &mut Packets, seq: Seq, flags: u8, len: u32) {
        let Some(rcv) = self.rcv.as_mut() else { return };
        let mut sack = rcv.sack_blocks();
        let room = (self.snd.mss() as usize).saturating_sub(len as usize);
        sack.truncate(room.saturating_sub(4) / 8);
        let h = Header {
            src: self.local.0,
            dst: self.remote.0,
            src_port: self.local.1,
            dst_port: self.remote.1,
            seq,
            ack: rcv.nxt(),
            flags,
            window: rcv.on_ack_sent(),
            sack,
            ..Header::default()
        };
        let mut buf = out.buffer();
        let id = self.next_ip_id();
        let snd = &self.snd;
        wire::emit_payload(&mut buf, &h, id, len as usize, |p| {
            snd.payload_into_zeroed(seq, p)
        });
        out.push_checked(buf);
    }

    fn emit_syn(&mut self, now: Instant, out: &mut Packets) {
        self.syn_pending = false;
        let peer = self.peer;
        let mut h = Header {
            src: self.local.0,
            dst: self.remote.0,
            src_port: self.local.1,
            dst_port: self.remote.1,
            seq: self.iss,
            flags: SYN,
            mss: Some(self.our_mss),
            ..Header::default()
        };
        match (self.state, self.rcv.as_mut(), peer) {
            (State::SynReceived, Some(rcv), Some(p)) => {
                h.flags |= ACK;
                h.ack = rcv.nxt();
                h.window = rcv.syn_window();
                h.window_shift = p.shift.map(|_| self.our_shift);
                h.sack_permitted = p.sack;
            }
            _ => {
                h.window = self.rx_capacity.min(usize::from(u16::MAX)) as u16;
                h.window_shift = Some(self.our_shift);
                h.sack_permitted = self.sack_ok;
            }
        }
        let mut buf = out.buffer();
        let id = self.next_ip_id();
        wire::emit(&mut buf, &h, id, 0, |_| {});
        out.push_checked(buf);
        if self.syn_sent_at.is_none() {
            self.syn_sent_at = Some(now);
        }
        let backoff = 1u32 << self.syn_retransmits.min(16);
        self.syn_timer = Some(now + SYN_RTO * backoff);
    }

    fn emit_rst(&mut self, out: &mut Packets, seq: Seq, ack: Option<Seq>) {
        let h = Header {
            src: self.local.0,
            dst: self.remote.0,
            src_port: self.local.1,
            dst_port: self.remote.1,
            seq,
            ack: ack.unwrap_or_default(),
            flags: RST | if ack.is_some() { ACK } else { 0 },
            ..Header::default()
        };
        let mut buf = out.buffer();
        let id = self.next_ip_id();
        wire::emit(&mut buf, &h, id, 0, |_| {});
        out.push_checked(buf);
    }

    fn next_ip_id(&mut self) -> u16 {
        self.ip_id = self.ip_id.wrapping_add(1);
        self.ip_id
    }

    // The application's side.

    pub fn may_send(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait) && !self.snd.fin_queued()
    }

    pub fn may_recv(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) || self.readable() > 0
    }

    pub fn readable(&self) -> usize {
        self.rcv.as_ref().map_or(0, Receiver::readable)
    }

    /// Queues bytes to send; returns how many fit.
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.may_send() {
            let n = self.snd.write(data);
            if n > 0 {
                self.touch();
            }
            n
        } else {
            0
        }
    }

    /// Queues up to `n` bytes whose contents do not matter.
    pub fn write_zeros(&mut self, n: usize) -> usize {
        if self.may_send() {
            let n = self.snd.write_zeros(n);
            if n > 0 {
                self.touch();
            }
            n
        } else {
            0
        }
    }

    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = self.rcv.as_mut().map_or(0, |r| r.read(out));
        if n > 0 {
            self.touch();
        }
        n
    }

    /// Drops up to `n` received bytes as if read.
    pub fn discard(&mut self, n: usize) -> usize {
        let n = self.rcv.as_mut().map_or(0, |r| r.consume(n));
        if n > 0 {
            self.touch();
        }
        n
    }

    /// Bytes queued to send and not yet acknowledged.
    pub fn send_queue(&self) -> usize {
        self.snd.queued()
    }
}

/// RFC 9293 §3.10.7.4's acceptability test against the window [`nxt`, `edge`).
fn acceptable(nxt: Seq, edge: Seq, seq: Seq, len: u32) -> bool {
    let wnd = edge.since(nxt);
    let inside = |s: Seq| s >= nxt && s < nxt + wnd;
    match (len, wnd) {
        (0, 0) => seq == nxt,
        (0, _) => inside(seq),
        (_, 0) => false,
        _ => inside(seq) || inside(seq + len - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptability_follows_rfc_9293() {
        let (nxt, edge) = (Seq(100), Seq(200));
        assert!(acceptable(nxt, edge, Seq(100), 0));
        assert!(acceptable(nxt, edge, Seq(199), 0));
        assert!(!acceptable(nxt, edge, Seq(200), 0));
        assert!(
            !acceptable(nxt, edge, Seq(99), 0),
            "a window probe draws an ACK"
        );
        assert!(acceptable(nxt, edge, Seq(50), 51), "overlaps the left edge");
        assert!(!acceptable(nxt, edge, Seq(50), 50), "entirely old");
        assert!(
            acceptable(nxt, edge, Seq(150), 100),
            "overlaps the right edge"
        );
        assert!(acceptable(nxt, nxt, Seq(100), 0));
        assert!(
            !acceptable(nxt, nxt, Seq(100), 1),
            "zero window takes no data"
        );
    }
}
