//! TCP Cubic over the hare: braid-sim's Linux-like TCP model at each end, every segment a
//! MAC-acked frame at the rate SampleRate picks, queued in a 100-frame drop-tail interface
//! queue. The receiver's ACKs contend for the medium like any frame.

use std::collections::VecDeque;

use braid_core::Instant;

use super::SharedLog;
use crate::host::packets::Packets;
use crate::host::tcp::{wire, ConnId, Seq, Stack};
use crate::host::transport::Buffers;
use crate::wifi::medium::{Frame, Station, TxOutcome};
use crate::wifi::phy;
use crate::wifi::samplerate::SampleRate;
use crate::{Packet, Rng};

const SENDER_ADDR: [u8; 4] = [10, 0, 0, 1];
const RECEIVER_ADDR: [u8; 4] = [10, 0, 0, 2];
const PORT: u16 = 5001;
const MTU: usize = 1500;
/// Frames the interface queue holds (about ath9k's per-queue limit).
const QUEUE: usize = 100;
const BUFFERS: Buffers = Buffers {
    rx: 4 << 20,
    tx: 4 << 20,
    nagle: true,
    initial_window: None,
    prism: false,
    sack: true,
};
/// Bytes per chunk for [`SharedLog`] (HTPPR's 32 KB chunks).
const CHUNK: u64 = 32 * 1024;

/// One end of a bulk TCP transfer over the hare.
pub struct TcpEnd {
    stack: Stack,
    out: Packets,
    queue: VecDeque<Packet>,
    conn: Option<ConnId>,
    sender: bool,
    /// Sender: bytes still to write. Receiver: bytes expected.
    total: u64,
    left: u64,
    received: u64,
    rate: SampleRate,
    /// Sender: the first data byte's sequence number, learnt from the SYN.
    data_start: Option<Seq>,
    log: Option<SharedLog>,
    pub queue_drops: u64,
}

impl TcpEnd {
    /// The sending end of a `total`-byte transfer.
    pub fn sender(total: u64, seed: u64) -> TcpEnd {
        let mut stack = Stack::new(SENDER_ADDR, MTU, Rng::new(seed));
        let conn = stack.connect(RECEIVER_ADDR, PORT, BUFFERS);
        Self::with(stack, conn, true, total, seed)
    }

    /// The receiving end.
    pub fn receiver(total: u64, seed: u64) -> TcpEnd {
        let stack = Stack::new(RECEIVER_ADDR, MTU, Rng::new(seed ^ 0x5a5a));
        Self::with(stack, None, false, total, seed ^ 0xa5a5)
    }

    fn with(stack: Stack, conn: Option<ConnId>, sender: bool, total: u64, seed: u64) -> TcpEnd {
        TcpEnd {
            stack,
            out: Packets::default(),
            queue: VecDeque::new(),
            conn,
            sender,
            total,
            left: total,
            received: 0,
            rate: SampleRate::new(seed, MTU + phy::MAC_OVERHEAD + phy::LLC),
            data_start: None,
            log: None,
            queue_drops: 0,
        }
    }

    /// Records chunk boundaries' first transmission (sender) or delivery (receiver).
    pub fn with_log(mut self, log: SharedLog) -> Self {
        self.log = Some(log);
        self
    }

    /// Bytes the receiving application read.
    pub fn received(&self) -> u64 {
        self.received
    }

    fn pump(&mut self, now: Instant) {
        if let Some(id) = self.conn {
            if let Some(c) = self.stack.conn(id) {
                if self.sender && self.left > 0 {
                    let n = c.write_zeros(self.left.min(1 << 20) as usize);
                    self.left -= n as u64;
                    if self.left == 0 {
                        c.close();
                    }
                }
                if !self.sender {
                    let before = self.received;
                    self.received += c.discard(usize::MAX) as u64;
                    if let Some(log) = &self.log {
                        // Chunk k is whole once min((k + 1)·CHUNK, total) bytes are read.
                        let mut k = before / CHUNK;
                        while ((k + 1) * CHUNK).min(self.total) <= self.received
                            && k * CHUNK < self.total
                        {
                            log.borrow_mut().delivered(k as usize, now);
                            k += 1;
                        }
                    }
                }
            }
        }
        self.stack.egress(now, &mut self.out);
        while let Some(p) = self.out.pop() {
            self.stamp(now, &p);
            if self.queue.len() < QUEUE {
                self.queue.push_back(p);
            } else {
                self.queue_drops += 1;
            }
        }
    }

    /// Logs the chunks a sender's data segment starts.
    fn stamp(&mut self, now: Instant, p: &[u8]) {
        let (Some(log), true) = (&self.log, self.sender) else {
            return;
        };
        let Ok(seg) = wire::parse(p) else { return };
        if seg.header.has(wire::SYN) {
            self.data_start = Some(seg.header.seq + 1);
            return;
        }
        let Some(start) = self.data_start else { return };
        if seg.payload.is_empty() {
            return;
        }
        let from = u64::from(seg.header.seq.since(start));
        let to = from + seg.payload.len() as u64;
        for k in from.div_ceil(CHUNK)..to.div_ceil(CHUNK) {
            if k * CHUNK >= from {
                log.borrow_mut().sent(k as usize, now);
            }
        }
    }
}

impl Station for TcpEnd {
    fn poll_frame(&mut self, now: Instant) -> Option<Frame> {
        self.pump(now);
        let p = self.queue.pop_front()?;
        Some(Frame {
            payload: p,
            overhead: phy::MAC_OVERHEAD + phy::LLC,
            protected: 0,
            rate: self.rate.choose(now),
            acked: true,
            series: Some(self.rate.series()),
        })
    }

    fn on_tx_done(&mut self, now: Instant, o: TxOutcome) {
        self.rate
            .on_result(now, o.rate, o.delivered, o.attempts, o.airtime_us);
    }

    fn on_frame(&mut self, now: Instant, payload: Vec<u8>) {
        let mut accept = |port: u16, _| (port == PORT).then_some(BUFFERS);
        if let Some((id, _, _)) = self.stack.ingress(now, payload, &mut self.out, &mut accept) {
            self.conn = Some(id);
        }
        self.pump(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.stack.conns().filter_map(|c| c.deadline()).min()
    }

    fn on_timeout(&mut self, now: Instant) {
        self.pump(now);
    }

    fn is_done(&self) -> bool {
        self.sender || self.received >= self.total
    }
}
