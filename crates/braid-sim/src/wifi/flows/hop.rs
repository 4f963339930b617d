//! Hop (Li et al., MobiCom '09) over one hop, as HTPPR §5.4 runs it: whole packets sent in
//! blocks without MAC ACKs, then a block SYN (BSYN); the receiver answers with a block ACK
//! (BACK, a bitmap of the packets it holds) and the sender resends the rest. BSYN and BACK
//! are MAC-acked frames; a sender that hears no BACK for 50 ms sends the BSYN again. Hop has
//! no autorate: it runs at one fixed rate, and the benchmark keeps the best of 11, 24, 36 and
//! 54 Mbit/s (Hop BestRate).

use braid_core::Instant;

use crate::wifi::medium::{Frame, Station, TxOutcome};
use crate::wifi::phy;

/// Packets per block.
pub const BLOCK: usize = 64;
/// Data bytes per packet (as iperf's datagrams).
pub const PACKET: usize = 1470;
const BSYN_TIMEOUT_US: u64 = 50_000;
const DATA: u8 = 1;
const BSYN: u8 = 2;
const BACK: u8 = 3;

/// The sending end.
pub struct HopSender {
    rate: usize,
    total: u64,
    /// The block being sent: its number and which of its packets the receiver lacks.
    block: u32,
    missing: Vec<bool>,
    /// Next packet of the block to send in this round.
    cursor: usize,
    bsyn_due: bool,
    waiting_since: Option<Instant>,
    done: bool,
}

impl HopSender {
    pub fn new(total: u64, rate: usize) -> HopSender {
        let mut s = HopSender {
            rate,
            total,
            block: 0,
            missing: Vec::new(),
            cursor: 0,
            bsyn_due: false,
            waiting_since: None,
            done: total == 0,
        };
        s.open_block();
        s
    }

    fn packets_in(&self, block: u32) -> usize {
        let start = u64::from(block) * (BLOCK * PACKET) as u64;
        (self.total.saturating_sub(start).div_ceil(PACKET as u64) as usize).min(BLOCK)
    }

    fn open_block(&mut self) {
        let n = self.packets_in(self.block);
        if n == 0 {
            self.done = true;
        }
        self.missing = vec![true; n];
        self.cursor = 0;
    }

    fn packet_len(&self, i: usize) -> usize {
        let start = (u64::from(self.block) * BLOCK as u64 + i as u64) * PACKET as u64;
        (self.total - start).min(PACKET as u64) as usize
    }
}

impl Station for HopSender {
    fn poll_frame(&mut self, now: Instant) -> Option<Frame> {
        if self.done || self.waiting_since.is_some() {
            return None;
        }
        while self.cursor < self.missing.len() && !self.missing[self.cursor] {
            self.cursor += 1;
        }
        let (payload, acked) = if self.cursor < self.missing.len() {
            let i = self.cursor;
            self.cursor += 1;
            let mut p = vec![DATA];
            p.extend_from_slice(&self.block.to_be_bytes());
            p.push(i as u8);
            p.resize(6 + self.packet_len(i), 0);
            if self.cursor >= self.missing.len() {
                self.bsyn_due = true;
            }
            (p, false)
        } else {
            self.bsyn_due = false;
            self.waiting_since = Some(now);
            let mut p = vec![BSYN];
            p.extend_from_slice(&self.block.to_be_bytes());
            (p, true)
        };
        Some(Frame {
            protected: payload.len(),
            payload,
            overhead: phy::MAC_OVERHEAD + phy::UDP_OVERHEAD,
            rate: self.rate,
            acked,
            series: None,
        })
    }

    fn on_tx_done(&mut self, _now: Instant, o: TxOutcome) {
        // A BSYN the MAC gave up on goes again at once.
        if !o.delivered && self.waiting_since.is_some() {
            self.waiting_since = None;
        }
    }

    fn on_frame(&mut self, _now: Instant, p: Vec<u8>) {
        if p.len() < 5 || p[0] != BACK || p[1..5] != self.block.to_be_bytes() {
            return;
        }
        for (i, m) in self.missing.iter_mut().enumerate() {
            let held = p.get(5 + i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
            if held {
                *m = false;
            }
        }
        self.waiting_since = None;
        if self.missing.iter().all(|m| !m) {
            self.block += 1;
            self.open_block();
        } else {
            self.cursor = 0;
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.waiting_since
            .map(|t| Instant::from_micros(t.as_micros() + BSYN_TIMEOUT_US))
    }

    fn on_timeout(&mut self, now: Instant) {
        if self
            .waiting_since
            .is_some_and(|t| now.as_micros() >= t.as_micros() + BSYN_TIMEOUT_US)
        {
            self.waiting_since = None;
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

/// The receiving end: holds which packets of the current block arrived whole.
pub struct HopReceiver {
    rate: usize,
    block: u32,
    held: [u8; BLOCK / 8],
    back_due: bool,
    pub received: u64,
    expected: u64,
}

impl HopReceiver {
    pub fn new(total: u64, rate: usize) -> HopReceiver {
        HopReceiver {
            rate,
            block: 0,
            held: [0; BLOCK / 8],
            back_due: false,
            received: 0,
            expected: total,
        }
    }
}

impl Station for HopReceiver {
    fn poll_frame(&mut self, _now: Instant) -> Option<Frame> {
        if !self.back_due {
            return None;
        }
        self.back_due = false;
        let mut p = vec![BACK];
        p.extend_from_slice(&self.block.to_be_bytes());
        p.extend_from_slice(&self.held);
        Some(Frame {
            protected: p.len(),
            payload: p,
            overhead: phy::MAC_OVERHEAD + phy::UDP_OVERHEAD,
            rate: self.rate,
            acked: true,
            series: None,
        })
    }

    fn on_frame(&mut self, _now: Instant, p: Vec<u8>) {
        if p.len() < 5 {
            return;
        }
        let block = u32::from_be_bytes([p[1], p[2], p[3], p[4]]);
        if block > self.block {
            // The sender moved on: the previous block is whole.
            self.block = block;
            self.held = [0; BLOCK / 8];
        }
        if block != self.block {
            // A BSYN of a block already complete: its BACK was lost, say it again.
            if p[0] == BSYN {
                self.back_due = true;
            }
            return;
        }
        match p[0] {
            DATA if p.len() > 6 => {
                let i = usize::from(p[5]) % BLOCK;
                if self.held[i / 8] & (1 << (i % 8)) == 0 {
                    self.held[i / 8] |= 1 << (i % 8);
                    self.received += (p.len() - 6) as u64;
                }
            }
            BSYN => self.back_due = true,
            _ => {}
        }
    }

    fn is_done(&self) -> bool {
        self.received >= self.expected
    }
}
