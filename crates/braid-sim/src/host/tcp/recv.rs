//! The receive half of a connection: reassembly, SACK and D-SACK generation, the
//! advertised window, and when to acknowledge.
//!
//! - Reassembly: in-order bytes are committed to the receive buffer at once; out-of-order
//!   bytes are written where they belong in the same buffer and their ranges remembered
//!   (at most [`MAX_OOO_RANGES`]; a segment that would need another range is dropped).
//! - SACK blocks (RFC 2018 §4): the first block holds the segment that triggered the ACK,
//!   the others the most recently reported blocks; a duplicate segment is reported first as
//!   a D-SACK block (RFC 2883 §4). At most four blocks, all the option space allows
//!   without timestamps.
//! - Window (RFC 9293 §3.8.6.2.2): the free buffer space, the right edge moved only in
//!   steps of min(buffer / 2, MSS) (receiver-side silly-window avoidance) and never back.
//!   Linux instead grows its window from ten segments as data arrives (`tcp_grow_window`);
//!   here the whole free buffer is offered from the start.
//! - ACKs as Linux sends them (`__tcp_ack_snd_check`): at once for the first segments of a
//!   connection (quick-ACK mode, up to 16), while out-of-order data is held or a hole is
//!   filled, for a duplicate, for a FIN, and once more than one full-sized segment is
//!   unacknowledged; otherwise after the 40 ms delayed-ACK timer (`TCP_DELACK_MIN`; Linux
//!   adapts it between 40 and 200 ms, here it is fixed).

use std::time::Duration;

use braid_core::Instant;

use super::ring::Ring;
use super::seq::Seq;
use super::wire::{SackBlocks, MAX_SACK_BLOCKS};

/// Most out-of-order ranges held.
pub const MAX_OOO_RANGES: usize = 64;
/// Delayed-ACK timeout (Linux `TCP_DELACK_MIN`).
pub const DELAYED_ACK: Duration = Duration::from_millis(40);
/// Most segments acknowledged at once in quick-ACK mode (Linux `TCP_MAX_QUICKACKS`).
const MAX_QUICKACKS: u32 = 16;
/// Linux's first guess of the peer's segment size (`TCP_MSS_DEFAULT`).
const DEFAULT_RCV_MSS: u32 = 536;

#[derive(Debug)]
pub struct Receiver {
    /// RCV.NXT.
    nxt: Seq,
    buf: Ring,
    /// Out-of-order ranges above `nxt`: sorted, disjoint and not touching.
    ooo: Vec<(Seq, Seq)>,
    /// SACK blocks in the order RFC 2018 §4 reports them, most recent first.
    recent: Vec<(Seq, Seq)>,
    /// A duplicate to report once as a D-SACK block.
    dsack: Option<(Seq, Seq)>,
    /// Sequence number of the peer's FIN once it has arrived (in order or not).
    fin: Option<Seq>,
    fin_received: bool,
    /// Our window scale shift (what we announced in our SYN).
    shift: u8,
    /// Right edge of the window last advertised.
    edge: Seq,
    /// Largest segment seen, as Linux's `rcv_mss`.
    rcv_mss: u32,
    /// Our MSS: the step of window updates.
    mss: u32,
    /// In-order bytes received since the last ACK.
    unacked: u32,
    /// ACKs still to be sent at once (quick-ACK mode).
    quick: u32,
    data_seen: bool,
    ack_now: bool,
    delayed_ack: Option<Instant>,
    /// Whether the peer takes SACK options.
    sack: bool,
}

/// What a received segment changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Bytes newly readable by the application.
    pub readable: u32,
    /// The peer's FIN was consumed by this segment.
    pub fin: bool,
}

impl Receiver {
    /// `irs` is the peer's initial sequence number; `shift` our window scale, 0 when the
    /// peer does not scale; `sack` whether SACK was negotiated.
    pub fn new(irs: Seq, capacity: usize, shift: u8, mss: u32, sack: bool) -> Receiver {
        let nxt = irs + 1;
        Receiver {
            nxt,
            buf: Ring::new(capacity),
            ooo: Vec::new(),
            recent: Vec::new(),
            dsack: None,
            fin: None,
            fin_received: false,
            shift,
            edge: nxt,
            rcv_mss: DEFAULT_RCV_MSS.min(mss),
            mss,
            unacked: 0,
            quick: 0,
            data_seen: false,
            ack_now: false,
            delayed_ack: None,
            sack,
        }
    }

    pub fn nxt(&self) -> Seq {
        self.nxt
    }

    /// The right edge of the receive window: segments may reach up to here.
    pub fn edge(&self) -> Seq {
        self.edge.max(self.nxt)
    }

    /// Bytes the application may read.
    pub fn readable(&self) -> usize {
        self.buf.len()
    }

    /// Out-of-order ranges held.
    #[cfg(test)]
    pub fn ooo_ranges(&self) -> usize {
        self.ooo.len()
    }

    #[cfg(test)]
    pub fn fin_received(&self) -> bool {
        self.fin_received
    }

    /// Checks the reassembly state (tests).
    #[cfg(test)]
    pub fn check(&self) {
        assert!(self.ooo.len() <= MAX_OOO_RANGES);
        assert!(self.recent.len() <= MAX_SACK_BLOCKS);
        for w in self.ooo.windows(2) {
            assert!(
                w[0].1 < w[1].0,
                "ranges sorted, disjoint, apart: {:?}",
                self.ooo
            );
        }
        assert!(self.ooo.iter().all(|&(l, r)| l > self.nxt && l < r));
        assert!(self.buf.len() <= self.buf.capacity());
    }

    /// Takes one segment's data that passed the acceptability test (RFC 9293 §3.10.7.4).
    pub fn on_segment(&mut self, now: Instant, seq: Seq, payload: &[u8], fin: bool) -> Arrival {
        let len = payload.len() as u32;
        let end = seq + len;
        let had_ooo = !self.ooo.is_empty();
        let mut arrival = Arrival::default();
        if len > 0 {
            self.rcv_mss = self.rcv_mss.max(len.min(self.mss));
            if !self.data_seen {
                // Linux `tcp_incr_quickack`: quick ACKs for about half a window's segments.
                self.data_seen = true;
                let window = self.edge().since(self.nxt).max(self.buf.free() as u32);
                self.quick = (window / (2 * self.rcv_mss.max(1))).clamp(2, MAX_QUICKACKS);
            }
        }
        if len > 0 && end <= self.nxt {
            // Entirely old: a retransmission we already have.
            self.dsack = Some((seq, end));
            self.ack_now = true;
        } else if len > 0 {
            let (start, data) = if seq < self.nxt {
                self.dsack = Some((seq, self.nxt));
                self.ack_now = true;
                let skip = self.nxt.since(seq) as usize;
                (self.nxt, &payload[skip.min(payload.len())..])
            } else {
                (seq, payload)
            };
            let offset = start.since(self.nxt) as usize;
            let fits = offset == 0 || self.can_hold(start, start + data.len() as u32);
            let written = if fits {
                self.buf.write_at(offset, data)
            } else {
                0
            };
            if written < data.len() {
                // Beyond the buffer: what did not fit is dropped, and a FIN after it too.
                self.ack_now = true;
            } else if fin {
                self.fin = Some(end);
            }
            let stop = start + written as u32;
            if offset == 0 {
                arrival.readable = self.advance(stop);
            } else if written > 0 {
                self.insert(start, stop);
                self.ack_now = true;
            }
        } else if fin && seq == self.nxt {
            self.fin = Some(seq);
        }
        if had_ooo {
            // Out-of-order data held, or a hole just filled: ACK at once.
            self.ack_now = true;
        }
        if self.fin == Some(self.nxt) && !self.fin_received {
            self.nxt = self.nxt + 1;
            self.fin_received = true;
            self.ack_now = true;
            arrival.fin = true;
        }
        self.unacked = self.unacked.saturating_add(arrival.readable);
        if arrival.readable > 0 || len > 0 {
            if self.quick > 0 || self.unacked > self.rcv_mss {
                self.ack_now = true;
            } else if self.delayed_ack.is_none() {
                self.delayed_ack = Some(now + DELAYED_ACK);
            }
        }
        arrival
    }

    /// Whether an out-of-order range [start, stop) can be remembered.
    fn can_hold(&self, start: Seq, stop: Seq) -> bool {
        self.ooo.len() < MAX_OOO_RANGES || self.ooo.iter().any(|&(l, r)| start <= r && stop >= l)
    }

    /// Commits in-order bytes up to `stop` and any out-of-order ranges that now follow;
    /// returns the bytes made readable.
    fn advance(&mut self, stop: Seq) -> u32 {
        let mut nxt = stop;
        while let Some(&(l, r)) = self.ooo.first() {
            if l > nxt {
                break;
            }
            nxt = nxt.max(r);
            self.ooo.remove(0);
        }
        let n = nxt.since(self.nxt);
        self.buf.commit(n as usize);
        self.nxt = nxt;
        self.recent.retain(|&(_, r)| r > nxt);
        n
    }

    /// Adds an out-of-order range and makes its block the first to report.
    fn insert(&mut self, start: Seq, stop: Seq) {
        let (mut l, mut r) = (start, stop);
        let mut i = 0;
        while i < self.ooo.len() {
            let (a, b) = self.ooo[i];
            if b < l {
                i += 1;
            } else if a > r {
                break;
            } else {
                l = l.min(a);
                r = r.max(b);
                self.ooo.remove(i);
            }
        }
        self.ooo.insert(i, (l, r));
        // RFC 2018 §4: the block holding this segment first, then the earlier ones.
        self.recent.retain(|&(a, b)| b < l || a > r);
        self.recent.insert(0, (l, r));
        self.recent.truncate(MAX_SACK_BLOCKS);
    }

    /// The SACK blocks for the next ACK: a D-SACK block first if any, then the most recent
    /// blocks. Empty when SACK is not in use.
    pub fn sack_blocks(&self) -> SackBlocks {
        let mut blocks = SackBlocks::default();
        if !self.sack {
            return blocks;
        }
        if let Some((l, r)) = self.dsack {
            blocks.push(l, r);
        }
        for &(l, r) in &self.recent {
            // The range may have grown since it was reported.
            let current = self
                .ooo
                .iter()
                .find(|&&(a, b)| a <= l && r <= b)
                .copied()
                .unwrap_or((l, r));
            if !blocks.push(current.0, current.1) {
                break;
            }
        }
        blocks
    }

    /// Whether an ACK should go out now.
    pub fn ack_due(&self, now: Instant) -> bool {
        self.ack_now || self.delayed_ack.is_some_and(|t| t <= now)
    }

    /// When the delayed ACK is due.
    pub fn deadline(&self) -> Option<Instant> {
        if self.ack_now {
            None
        } else {
            self.delayed_ack
        }
    }

    /// Asks for an ACK at once (e.g. for an unacceptable segment).
    pub fn force_ack(&mut self) {
        self.ack_now = true;
    }

    /// Records that a segment carrying our ACK (and window) went out; returns the window
    /// field to put in it (scaled).
    pub fn on_ack_sent(&mut self) -> u16 {
        self.ack_now = false;
        self.delayed_ack = None;
        self.unacked = 0;
        self.quick = self.quick.saturating_sub(1);
        self.dsack = None;
        self.advertise()
    }

    /// The window to advertise, in the scaled units of the header, moving the right edge.
    fn advertise(&mut self) -> u16 {
        let free = self.buf.free() as u32;
        let current = self.edge().since(self.nxt);
        let step = (self.buf.capacity() as u32 / 2).min(self.mss).max(1);
        let wnd = if free >= current.saturating_add(step) || current == 0 && free > 0 {
            free
        } else {
            current
        };
        let max = u32::from(u16::MAX) << self.shift;
        let field = wnd.min(max) >> self.shift;
        self.edge = self.edge().max(self.nxt + (field << self.shift));
        field as u16
    }

    /// The window for a SYN or SYN-ACK: never scaled (RFC 7323 §2.2).
    pub fn syn_window(&mut self) -> u16 {
        let wnd = (self.buf.free() as u32).min(u32::from(u16::MAX));
        self.edge = self.nxt + wnd;
        wnd as u16
    }

    /// Reads up to `out.len()` bytes.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = self.buf.read_at(0, out);
        self.consume(n)
    }

    /// Drops up to `n` readable bytes as if read.
    pub fn consume(&mut self, n: usize) -> usize {
        let n = self.buf.consume(n);
        if n > 0 {
            // Linux `tcp_cleanup_rbuf`: announce a window that at least doubled.
            let current = self.edge().since(self.nxt);
            let free = self.buf.free() as u32;
            if 2 * current <= self.buf.capacity() as u32
                && free >= 2 * current
                && free - current >= self.mss.min(self.buf.capacity() as u32 / 2)
            {
                self.ack_now = true;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx() -> Receiver {
        let mut r = Receiver::new(Seq(999), 10_000, 0, 1000, true);
        r.syn_window();
        r
    }

    fn data(n: usize, fill: u8) -> Vec<u8> {
        vec![fill; n]
    }

    const T: Instant = Instant::ZERO;

    #[test]
    fn in_order_data_is_readable_and_acked_every_second_segment() {
        let mut r = rx();
        r.quick = 0;
        r.data_seen = true;
        r.rcv_mss = 1000;
        let a = r.on_segment(T, Seq(1000), &data(1000, 1), false);
        assert_eq!(a.readable, 1000);
        assert!(!r.ack_due(T));
        assert_eq!(r.deadline(), Some(T + DELAYED_ACK));
        r.on_segment(T, Seq(2000), &data(1000, 2), false);
        assert!(r.ack_due(T), "two full segments");
        r.on_ack_sent();
        assert!(!r.ack_due(T + DELAYED_ACK));
        let mut out = [0; 1500];
        assert_eq!(r.read(&mut out), 1500);
        assert_eq!((out[999], out[1000]), (1, 2));
    }

    #[test]
    fn first_segments_are_acked_at_once() {
        let mut r = rx();
        r.on_segment(T, Seq(1000), &data(100, 1), false);
        assert!(r.ack_due(T));
        assert!(r.quick >= 2);
    }

    #[test]
    fn holes_produce_sack_blocks_most_recent_first() {
        let mut r = rx();
        r.on_segment(T, Seq(2000), &data(1000, 2), false);
        r.on_segment(T, Seq(4000), &data(1000, 4), false);
        assert!(r.ack_due(T));
        let b = r.sack_blocks();
        assert_eq!(
            b.as_slice(),
            &[(Seq(4000), Seq(5000)), (Seq(2000), Seq(3000))]
        );
        r.on_ack_sent();
        // Extending the older block reports it first again.
        r.on_segment(T, Seq(3000), &data(500, 3), false);
        assert_eq!(
            r.sack_blocks().as_slice(),
            &[(Seq(2000), Seq(3500)), (Seq(4000), Seq(5000))]
        );
        // Filling the first hole makes everything up to 3500 readable.
        let a = r.on_segment(T, Seq(1000), &data(1000, 1), false);
        assert_eq!(a.readable, 2500);
        assert_eq!(r.nxt(), Seq(3500));
        assert_eq!(r.sack_blocks().as_slice(), &[(Seq(4000), Seq(5000))]);
        assert!(r.ack_due(T));
        let mut out = vec![0; 2500];
        r.read(&mut out);
        assert_eq!((out[0], out[1000], out[2499]), (1, 2, 3));
    }

    #[test]
    fn duplicates_are_reported_as_dsack() {
        let mut r = rx();
        r.on_segment(T, Seq(1000), &data(1000, 1), false);
        r.on_ack_sent();
        r.on_segment(T, Seq(1000), &data(1000, 1), false);
        assert!(r.ack_due(T));
        assert_eq!(r.sack_blocks().as_slice(), &[(Seq(1000), Seq(2000))]);
        r.on_ack_sent();
        assert!(r.sack_blocks().is_empty());
    }

    #[test]
    fn fin_is_consumed_in_order_only() {
        let mut r = rx();
        let a = r.on_segment(T, Seq(2000), &data(10, 2), true);
        assert!(!a.fin);
        let a = r.on_segment(T, Seq(1000), &data(1000, 1), false);
        assert!(a.fin && r.fin_received());
        assert_eq!(a.readable, 1010);
        assert_eq!(r.nxt(), Seq(2011));
    }

    #[test]
    fn window_never_exceeds_free_space_nor_shrinks() {
        let mut r = Receiver::new(Seq(0), 8000, 2, 1000, false);
        assert_eq!(r.syn_window(), 8000);
        r.on_segment(T, Seq(1), &data(6000, 0), false);
        assert_eq!(u32::from(r.on_ack_sent()) << 2, 2000);
        assert_eq!(r.edge(), Seq(8001));
        r.consume(100);
        // 100 freed bytes are less than one MSS: the edge stays.
        assert!(!r.ack_due(T));
        assert_eq!(u32::from(r.on_ack_sent()) << 2, 2000);
        r.consume(2900);
        assert!(r.ack_due(T), "the window more than doubled");
        assert_eq!(u32::from(r.on_ack_sent()) << 2, 5000);
        assert_eq!(r.edge(), Seq(11_001));
        // A segment beyond the buffer is cut to it.
        let a = r.on_segment(T, Seq(6001), &data(9000, 0), false);
        assert_eq!(a.readable, 5000);
    }

    #[test]
    fn out_of_order_ranges_are_bounded() {
        let mut r = Receiver::new(Seq(0), 1 << 20, 5, 1000, true);
        r.syn_window();
        for i in 0..(MAX_OOO_RANGES as u32 + 10) {
            r.on_segment(T, Seq(1 + 2000 * (i + 1)), &data(1000, 0), false);
        }
        assert_eq!(r.ooo_ranges(), MAX_OOO_RANGES);
        assert!(r.sack_blocks().len() <= MAX_SACK_BLOCKS);
    }
}
