//! HTPPR's two ends as stations. With `control_on_hare` the tortoise messages travel on the
//! hare instead, coalesced into MAC-acked frames at the rate SampleRate picks, all-or-nothing
//! under the frame's CRC: the ZipTx-like baseline of HTPPR §5.4 ("we send the metadata over
//! the hare link with all-or-nothing packet level CRC protection"). A one-byte tag then tells
//! data from control; it is under UDP-Lite's checksum, so a damaged tag loses the frame.

use std::collections::{HashMap, VecDeque};

use braid_core::htppr::{self, ChunkId, Receiver, ReceiverConfig, Sender, SenderConfig};
use braid_core::Instant;

use super::{FileSource, RateChange, RateLog, SharedLog};
use crate::wifi::medium::{Frame, Station, TxOutcome};
use crate::wifi::phy;
use crate::wifi::samplerate::SampleRate;

const DATA_TAG: u8 = 0xD0;
const CONTROL_TAG: u8 = 0xC7;
/// The most tortoise-message bytes coalesced into one control frame on the hare.
const CONTROL_FRAME: usize = 1400;

/// Tortoise messages carried on the hare (ZipTx-like mode).
struct OnHare {
    queue: VecDeque<Vec<u8>>,
    /// The control frame the MAC holds, to send again if it fails.
    in_mac: Option<Vec<u8>>,
    rate: SampleRate,
}

impl OnHare {
    fn new(seed: u64) -> OnHare {
        OnHare {
            queue: VecDeque::new(),
            in_mac: None,
            rate: SampleRate::new(seed, 200),
        }
    }

    fn frame(&mut self, now: Instant) -> Option<Frame> {
        let payload = match self.in_mac.take() {
            Some(p) => p,
            None => {
                let first = self.queue.front()?;
                let mut p = vec![CONTROL_TAG];
                let _ = first;
                while let Some(m) = self.queue.front() {
                    if p.len() > 1 && p.len() + 2 + m.len() > CONTROL_FRAME {
                        break;
                    }
                    let m = self.queue.pop_front().expect("front exists");
                    p.extend_from_slice(&(m.len() as u16).to_be_bytes());
                    p.extend_from_slice(&m);
                }
                p
            }
        };
        self.in_mac = Some(payload.clone());
        Some(Frame {
            payload,
            overhead: phy::MAC_OVERHEAD + phy::UDP_OVERHEAD,
            protected: 0,
            rate: self.rate.choose(now),
            acked: true,
            series: Some(self.rate.series()),
        })
    }

    /// The MAC is done with a frame; `true` if it was this control frame.
    fn on_tx_done(&mut self, now: Instant, o: TxOutcome, was_control: bool) {
        if !was_control {
            return;
        }
        self.rate
            .on_result(now, o.rate, o.delivered, o.attempts, o.airtime_us);
        if o.delivered {
            self.in_mac = None;
        }
    }

    /// Splits a control frame into messages.
    fn messages(payload: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let mut rest = &payload[1..];
        while rest.len() >= 2 {
            let n = u16::from_be_bytes([rest[0], rest[1]]) as usize;
            if rest.len() < 2 + n {
                break;
            }
            out.push(&rest[2..2 + n]);
            rest = &rest[2 + n..];
        }
        out
    }
}

/// The sending end.
pub struct HtpprSender {
    sender: Sender,
    file: FileSource,
    chunk_size: usize,
    /// The chunk being written, to learn its id.
    partial: Vec<u8>,
    ids: HashMap<ChunkId, usize>,
    written_chunks: usize,
    buf: Vec<u8>,
    msg: Vec<u8>,
    on_hare: Option<OnHare>,
    last_was_control: bool,
    log: Option<SharedLog>,
    rate_log: Option<RateLog>,
}

impl HtpprSender {
    pub fn new(cfg: SenderConfig, file: FileSource, control_on_hare: bool, seed: u64) -> Self {
        HtpprSender {
            chunk_size: cfg.chunk_size,
            sender: Sender::new(cfg),
            file,
            partial: Vec::new(),
            ids: HashMap::new(),
            written_chunks: 0,
            buf: Vec::new(),
            msg: Vec::new(),
            on_hare: control_on_hare.then(|| OnHare::new(seed)),
            last_was_control: false,
            log: None,
            rate_log: None,
        }
    }

    /// Records each chunk's first hare packet in `log`.
    pub fn with_log(mut self, log: SharedLog) -> Self {
        self.log = Some(log);
        self
    }

    /// Records the start rate and every rate change in `log`.
    pub fn with_rate_log(mut self, log: RateLog) -> Self {
        log.borrow_mut().push(RateChange {
            at: Instant::from_micros(0),
            bursts: 0,
            decisions: 0,
            rate: self.sender.rate(),
        });
        self.rate_log = Some(log);
        self
    }

    pub fn engine(&self) -> &Sender {
        &self.sender
    }

    fn fill(&mut self) {
        while self.file.left() > 0 && self.sender.writable() > 0 {
            let want = self
                .sender
                .writable()
                .min(self.chunk_size - self.partial.len());
            let data = self.file.next(want);
            let n = self.sender.write(data);
            debug_assert_eq!(n, data.len(), "the sender takes what it calls writable");
            self.partial.extend_from_slice(&data[..n]);
            if self.partial.len() == self.chunk_size || self.file.left() == 0 {
                self.ids
                    .insert(ChunkId::of(&self.partial), self.written_chunks);
                self.written_chunks += 1;
                self.partial.clear();
            }
            if self.file.left() == 0 {
                self.sender.finish();
            }
        }
    }

    fn feedback(&mut self, now: Instant, msg: &[u8]) {
        // A malformed message cannot come from braid's own receiver over a reliable link.
        let _ = self.sender.handle_tortoise(now, msg);
        if let Some(log) = &self.rate_log {
            let rate = self.sender.rate();
            let mut log = log.borrow_mut();
            if log.last().map(|e| e.rate) != Some(rate) {
                log.push(RateChange {
                    at: now,
                    bursts: self.sender.stats().bursts_answered,
                    decisions: self.sender.rate_decisions(),
                    rate,
                });
            }
        }
    }
}

impl Station for HtpprSender {
    fn poll_frame(&mut self, now: Instant) -> Option<Frame> {
        self.fill();
        if let Some(h) = &mut self.on_hare {
            while self.sender.poll_tortoise(now, &mut self.msg).is_some() {
                h.queue.push_back(self.msg.clone());
            }
            if let Some(f) = h.frame(now) {
                self.last_was_control = true;
                return Some(f);
            }
        }
        let tx = self.sender.poll_hare(now, &mut self.buf)?;
        self.last_was_control = false;
        if let Some(log) = &self.log {
            let mut id = [0u8; 20];
            id.copy_from_slice(&self.buf[..20]);
            if let Some(&n) = self.ids.get(&ChunkId(id)) {
                log.borrow_mut().sent(n, now);
            }
        }
        let mut payload = Vec::with_capacity(tx.len + 1);
        if self.on_hare.is_some() {
            payload.push(DATA_TAG);
        }
        payload.extend_from_slice(&self.buf[..tx.len]);
        Some(Frame {
            protected: usize::from(self.on_hare.is_some()),
            payload,
            overhead: phy::MAC_OVERHEAD + phy::UDP_OVERHEAD,
            rate: tx.rate,
            acked: false,
            series: None,
        })
    }

    fn on_tx_done(&mut self, now: Instant, o: TxOutcome) {
        if let Some(h) = &mut self.on_hare {
            h.on_tx_done(now, o, self.last_was_control);
        }
    }

    fn on_frame(&mut self, now: Instant, payload: Vec<u8>) {
        if self.on_hare.is_some() && payload.first() == Some(&CONTROL_TAG) {
            for m in OnHare::messages(&payload) {
                self.feedback(now, m);
            }
        }
    }

    fn poll_tortoise(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.on_hare.is_some() {
            return None;
        }
        self.fill();
        self.sender.poll_tortoise(now, &mut self.msg)?;
        Some(self.msg.clone())
    }

    fn on_tortoise(&mut self, now: Instant, msg: Vec<u8>) {
        self.feedback(now, &msg);
    }

    fn is_done(&self) -> bool {
        self.sender.is_done()
    }
}

/// The receiving end.
pub struct HtpprReceiver {
    receiver: Receiver,
    delivered: u64,
    chunks: usize,
    msg: Vec<u8>,
    on_hare: Option<OnHare>,
    last_was_control: bool,
    log: Option<SharedLog>,
}

impl HtpprReceiver {
    pub fn new(control_on_hare: bool, seed: u64) -> Self {
        HtpprReceiver {
            receiver: Receiver::new(ReceiverConfig::default()),
            delivered: 0,
            chunks: 0,
            msg: Vec::new(),
            on_hare: control_on_hare.then(|| OnHare::new(seed)),
            last_was_control: false,
            log: None,
        }
    }

    /// Records each chunk's delivery in `log`.
    pub fn with_log(mut self, log: SharedLog) -> Self {
        self.log = Some(log);
        self
    }

    pub fn engine(&self) -> &Receiver {
        &self.receiver
    }

    /// Bytes delivered in order.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    fn drain(&mut self, now: Instant) {
        while let Some((_, chunk)) = self.receiver.poll_deliver() {
            self.delivered += chunk.len() as u64;
            if let Some(log) = &self.log {
                log.borrow_mut().delivered(self.chunks, now);
            }
            self.chunks += 1;
        }
    }

    fn metadata(&mut self, now: Instant, msg: &[u8]) {
        // From braid's own sender over a reliable link: never malformed.
        let _ = self.receiver.handle_tortoise(now, msg);
        self.drain(now);
    }
}

impl Station for HtpprReceiver {
    fn poll_frame(&mut self, now: Instant) -> Option<Frame> {
        let h = self.on_hare.as_mut()?;
        while self.receiver.poll_tortoise(now, &mut self.msg).is_some() {
            h.queue.push_back(self.msg.clone());
        }
        let f = h.frame(now);
        self.last_was_control = f.is_some();
        f
    }

    fn on_tx_done(&mut self, now: Instant, o: TxOutcome) {
        if let Some(h) = &mut self.on_hare {
            h.on_tx_done(now, o, self.last_was_control);
        }
    }

    fn on_frame(&mut self, now: Instant, payload: Vec<u8>) {
        if self.on_hare.is_none() {
            self.receiver.handle_hare(now, &payload);
        } else {
            match payload.first() {
                Some(&DATA_TAG) => self.receiver.handle_hare(now, &payload[1..]),
                Some(&CONTROL_TAG) => {
                    for m in OnHare::messages(&payload) {
                        let m = m.to_vec();
                        self.metadata(now, &m);
                    }
                }
                _ => {}
            }
        }
        self.drain(now);
    }

    fn poll_tortoise(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.on_hare.is_some() {
            return None;
        }
        self.receiver.poll_tortoise(now, &mut self.msg)?;
        Some(self.msg.clone())
    }

    fn on_tortoise(&mut self, now: Instant, msg: Vec<u8>) {
        self.metadata(now, &msg);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.receiver.poll_timeout()
    }

    fn on_timeout(&mut self, now: Instant) {
        self.receiver.handle_timeout(now);
        self.drain(now);
    }

    fn is_done(&self) -> bool {
        self.receiver.is_finished()
    }
}

/// The default sender settings with `block_size`, rate and autorate as given.
pub fn sender_config(
    block: htppr::BlockSize,
    start_rate: usize,
    autorate: bool,
    seed: u64,
) -> SenderConfig {
    SenderConfig {
        block_size: block,
        start_rate,
        autorate,
        first_seq: seed as u16,
        ..SenderConfig::default()
    }
}
