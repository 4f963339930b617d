//! The HTPPR sender (§3.1-3.3): chunks in a sliding window, bursts of blocks on the hare,
//! metadata on the tortoise.
//!
//! Driving contract (all sans-IO; `now` only moves forward):
//! - [`Sender::write`] takes data while [`Sender::writable`] says there is room, and
//!   [`Sender::finish`] marks its end.
//! - [`Sender::poll_hare`] gives the next hare packet and the bit rate to send it at; call it
//!   whenever the hare can take a packet, until it gives `None`.
//! - [`Sender::poll_tortoise`] gives the next tortoise message; call it until `None`.
//! - [`Sender::handle_tortoise`] takes a message from the receiver.
//!
//! The sender keeps no timers: the tortoise is reliable and the receiver answers every
//! packet (a lost one with a NACK after its own timeout), so every burst is answered.
//!
//! A chunk's life: offered with its id (`Offer`); skipped if the receiver already holds the
//! content (`Have`), else sent in bursts once it is wanted (`Want`). A burst is up to 5
//! packets carrying the chunk's missing blocks in order; its notice (`Burst`: the sequence
//! numbers, the rate and each packet's CRC-32) goes on the tortoise when its last packet
//! leaves. Once every packet of the burst is answered the chunk's missing blocks are known
//! to both ends, the autorate takes a step (§3.3) and the chunk's next burst can go.
//!
//! Beyond the paper: the paper's sender names the next chunk and sends at once (§3.1); braid
//! waits for `Want` so that content the receiver holds is never sent (§4's redundancy
//! elimination). That costs each chunk one tortoise round trip of latency, which the window
//! hides from the hare's throughput. The burst notice goes when the burst's last packet has
//! been handed over, not "in parallel" with the first, so that it cannot overtake a burst
//! still queued for the hare.
//!
//! Also beyond the paper: the finer CRCs (§3.2) go with the notice, unasked, when the
//! receiver's BIER says most packets will fail their CRC-32 (at least
//! [`SenderConfig::fine_unasked_above`] of them, 0.9 by default: `1 − (1 − b)^n` for `n`
//! blocks a packet). Asked for, they cost a damaged packet a second tortoise round trip
//! before its ARQ, and a chunk's bursts go one after the other, so on a noisy hare each burst
//! took two round trips (htppr-fig9). Unasked they cost the CRCs of the packets that pass:
//! at 0.9 about 5% more tortoise bytes than the requests and replies they replace. On a thin
//! tortoise the extra bytes still slow the transfer (htppr-5-5's 0.75 Mbit/s uplink); a
//! threshold above 1 keeps the paper's request always.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::autorate::Autorate;
use super::block::{self, BlockSet, FineCrcs, Geometry};
use super::chunk::ChunkId;
use super::hare;
use super::seqcode;
use super::tortoise::{self, ToReceiver, ToSender, TortoiseError};
use super::SenderConfig;
use crate::Instant;

/// The share of packets expected to fail their CRC-32 at and above which their finer CRCs go
/// with the burst notice instead of on request (the default of
/// [`SenderConfig::fine_unasked_above`]). With 44 blocks a packet they cost 56 bytes a packet
/// unasked, against 59 a damaged packet asked (request and reply): at 0.9 about 5% more.
pub const FINE_UNASKED_ABOVE: f64 = 0.9;

/// The largest tortoise message the sender builds; items beyond it wait for the next one.
const MAX_MESSAGE: usize = 16 * 1024;

/// A hare packet made by [`Sender::poll_hare`], in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HareTransmit {
    /// Send it at this bit rate, kbit/s.
    pub rate_kbps: u32,
    /// The rate as an index into the configured rates.
    pub rate: usize,
    /// Bytes written into the buffer.
    pub len: usize,
}

/// A message from the receiver that the sender cannot use.
#[derive(Debug, thiserror::Error)]
pub enum SenderError {
    #[error("malformed tortoise message: {0}")]
    Tortoise(#[from] TortoiseError),
}

/// Counters of one sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SenderStats {
    pub hare_packets: u64,
    pub hare_bytes: u64,
    /// Blocks sent again after an ARQ or NACK.
    pub blocks_resent: u64,
    pub tortoise_messages: u64,
    pub tortoise_bytes: u64,
    pub acks: u64,
    pub arqs: u64,
    pub nacks: u64,
    pub crc_requests: u64,
    /// Packets whose finer CRCs went with their notice, unasked.
    pub fine_unasked: u64,
    /// `Reopen` items: accepted blocks the receiver found wrong later.
    pub reopens: u64,
    /// Chunks the receiver already held (§4).
    pub chunks_skipped: u64,
    pub chunks_done: u64,
    pub rate_changes: u64,
    /// Bursts whose every packet has been answered: the autorate's decision points (§3.3).
    pub bursts_answered: u64,
    /// Feedback naming a packet that is not outstanding, ignored.
    pub unexpected_feedback: u64,
}

#[derive(Debug)]
enum ChunkState {
    /// Offered; waiting for `Want` or `Have`.
    Offered,
    /// Wanted; no burst in flight.
    Ready,
    /// A burst is in flight with this many packets unanswered.
    InBurst {
        unanswered: usize,
    },
    Done,
}

#[derive(Debug)]
struct ChunkTx {
    id: ChunkId,
    data: Vec<u8>,
    missing: BlockSet,
    /// Blocks never sent yet.
    unsent: BlockSet,
    state: ChunkState,
}

/// A packet sent and not yet answered.
#[derive(Debug)]
struct InFlight {
    chunk: u32,
    blocks: Vec<u16>,
    rate: usize,
}

/// The sending end of one HTPPR transfer.
#[derive(Debug)]
pub struct Sender {
    cfg: SenderConfig,
    geometry: Geometry,
    autorate: Autorate,
    /// Data written and not yet cut into chunks.
    input: Vec<u8>,
    input_finished: bool,
    /// The chunk number the next chunk gets.
    next_chunk: u32,
    /// The window: chunks offered and not yet done, by number.
    chunks: BTreeMap<u32, ChunkTx>,
    in_flight: HashMap<u64, InFlight>,
    next_seq: u64,
    /// Packets of the burst being put on the hare, and the burst's notice once they are out.
    emitting: VecDeque<u64>,
    notice: Option<ToReceiver>,
    /// The finer CRCs sent after the notice, when sent unasked.
    notice_fine: Vec<ToReceiver>,
    tortoise_out: VecDeque<ToReceiver>,
    hello_sent: bool,
    finish_queued: bool,
    /// The receiver's latest BIER report: (rate index, BIER, samples).
    bier: Option<(usize, f64, u32)>,
    stats: SenderStats,
}

impl Sender {
    pub fn new(cfg: SenderConfig) -> Self {
        let blocks_per_packet = (cfg.payload_len / cfg.block_size.bytes()).clamp(1, 255);
        let chunk_size = cfg.chunk_size.clamp(
            cfg.block_size.bytes(),
            u16::MAX as usize * cfg.block_size.bytes(),
        );
        let geometry = Geometry {
            block_size: cfg.block_size,
            blocks_per_packet,
            chunk_size,
        };
        let autorate = Autorate::new(cfg.rates_kbps.clone(), cfg.start_rate, cfg.autorate)
            .with_header_blocks(
                super::receiver::LOST_HEADER_BYTES as f64 / cfg.block_size.bytes() as f64,
            );
        let first_seq = u64::from(cfg.first_seq);
        let cfg = SenderConfig {
            burst_packets: cfg.burst_packets.clamp(1, 255),
            max_window_chunks: cfg.max_window_chunks.max(1),
            ..cfg
        };
        Sender {
            cfg,
            geometry,
            autorate,
            input: Vec::new(),
            input_finished: false,
            next_chunk: 0,
            chunks: BTreeMap::new(),
            in_flight: HashMap::new(),
            next_seq: first_seq,
            emitting: VecDeque::new(),
            notice: None,
            notice_fine: Vec::new(),
            tortoise_out: VecDeque::new(),
            hello_sent: false,
            finish_queued: false,
            bier: None,
            stats: SenderStats::default(),
        }
    }

    /// The layout of this transfer.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Bytes [`Sender::write`] would take now: enough to fill the window, plus one chunk.
    pub fn writable(&self) -> usize {
        let room = self.cfg.max_window_chunks.saturating_sub(self.chunks.len()) + 1;
        (room * self.geometry.chunk_size).saturating_sub(self.input.len())
    }

    /// Takes up to [`Sender::writable`] bytes of `data`; returns how many.
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.input_finished {
            return 0;
        }
        let n = data.len().min(self.writable());
        self.input.extend_from_slice(&data[..n]);
        self.open_chunks();
        n
    }

    /// No more data: the last chunk may be short.
    pub fn finish(&mut self) {
        self.input_finished = true;
        self.open_chunks();
    }

    /// Whether every chunk has been answered for and `Finish` has been handed out.
    pub fn is_done(&self) -> bool {
        self.finish_queued && self.tortoise_out.is_empty()
    }

    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// The hare's bit rate now, as an index into the configured rates.
    pub fn rate(&self) -> usize {
        self.autorate.rate()
    }

    /// Burst ends on which the autorate judged the rate so far.
    pub fn rate_decisions(&self) -> u64 {
        self.autorate.decisions()
    }

    /// Writes the next hare packet into `out` (cleared first).
    pub fn poll_hare(&mut self, _now: Instant, out: &mut Vec<u8>) -> Option<HareTransmit> {
        loop {
            if let Some(seq) = self.emitting.pop_front() {
                if self.emitting.is_empty() {
                    if let Some(notice) = self.notice.take() {
                        self.tortoise_out.push_back(notice);
                        self.tortoise_out.extend(self.notice_fine.drain(..));
                    }
                }
                // A packet answered before it left (only a confused receiver does that).
                let Some(packet) = self.in_flight.get(&seq) else {
                    continue;
                };
                let Some(chunk) = self.chunks.get(&packet.chunk) else {
                    continue;
                };
                // Straight into the caller's buffer: no allocation per packet once it is warm.
                hare::emit_header(out, &chunk.id, seq as u16);
                for &b in &packet.blocks {
                    let range = self.geometry.block_range(chunk.data.len(), b as usize);
                    out.extend_from_slice(&chunk.data[range]);
                }
                let rate = packet.rate;
                self.stats.hare_packets += 1;
                self.stats.hare_bytes += out.len() as u64;
                return Some(HareTransmit {
                    rate_kbps: self.autorate.kbps(rate),
                    rate,
                    len: out.len(),
                });
            }
            // The oldest wanted chunk with nothing in flight sends its next burst.
            let next = self
                .chunks
                .iter()
                .find(|(_, c)| matches!(c.state, ChunkState::Ready))
                .map(|(&n, _)| n)?;
            self.plan_burst(next);
        }
    }

    /// Writes the next tortoise message into `out` (cleared first).
    pub fn poll_tortoise(&mut self, _now: Instant, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        if !self.hello_sent {
            self.hello_sent = true;
            tortoise::emit_to_receiver(
                out,
                &ToReceiver::Hello {
                    version: tortoise::VERSION,
                    block_size: self.geometry.block_size.bytes(),
                    blocks_per_packet: self.geometry.blocks_per_packet,
                    chunk_size: self.geometry.chunk_size,
                },
            );
        }
        while out.len() < MAX_MESSAGE {
            let Some(item) = self.tortoise_out.pop_front() else {
                break;
            };
            tortoise::emit_to_receiver(out, &item);
        }
        if out.is_empty() {
            return None;
        }
        self.stats.tortoise_messages += 1;
        self.stats.tortoise_bytes += out.len() as u64;
        Some(out.len())
    }

    /// Takes a message from the receiver.
    pub fn handle_tortoise(&mut self, _now: Instant, bytes: &[u8]) -> Result<(), SenderError> {
        for item in tortoise::parse_to_sender(bytes)? {
            match item {
                ToSender::Want { chunk } => {
                    if let Some(c) = self.chunks.get_mut(&chunk) {
                        if matches!(c.state, ChunkState::Offered) {
                            c.state = ChunkState::Ready;
                        }
                    }
                }
                ToSender::Have { chunk } => {
                    if let Some(c) = self.chunks.get_mut(&chunk) {
                        if matches!(c.state, ChunkState::Offered) {
                            c.state = ChunkState::Done;
                            self.stats.chunks_skipped += 1;
                        }
                    }
                }
                ToSender::Bier {
                    rate,
                    bier,
                    samples,
                } => {
                    self.bier = Some((rate as usize, bier as f64 / 65535.0, samples as u32));
                }
                ToSender::Reopen { chunk, blocks } => {
                    // Comes right after the answer that exposed the blocks, in one message,
                    // so the chunk is still in the window even if that answer finished it.
                    if let Some(c) = self.chunks.get_mut(&chunk) {
                        for b in blocks {
                            c.missing.insert(b as usize);
                        }
                        if matches!(c.state, ChunkState::Done) && !c.missing.is_empty() {
                            c.state = ChunkState::Ready;
                        }
                        self.stats.reopens += 1;
                    }
                }
                ToSender::CrcRequest { seq } => {
                    self.stats.crc_requests += 1;
                    let seq = seqcode::extend(seq, self.next_seq);
                    match self.in_flight.get(&seq) {
                        Some(p) => {
                            let fine = self.fine_crcs(p.chunk, &p.blocks);
                            self.tortoise_out.push_back(ToReceiver::Fine {
                                seq: seq as u16,
                                blocks: fine.blocks,
                                quarters: fine.quarters,
                            });
                        }
                        None => self.stats.unexpected_feedback += 1,
                    }
                }
                ToSender::Ack { seq } => {
                    self.stats.acks += 1;
                    self.answered(seq, |_| false);
                }
                ToSender::Nack { seq } => {
                    self.stats.nacks += 1;
                    self.answered(seq, |_| true);
                }
                ToSender::Arq { seq, bad } => {
                    self.stats.arqs += 1;
                    self.answered(seq, |i| bad.get(i).copied().unwrap_or(true));
                }
            }
        }
        self.slide_window();
        Ok(())
    }

    /// Cuts written data into chunks and offers them while the window has room.
    fn open_chunks(&mut self) {
        let size = self.geometry.chunk_size;
        while self.chunks.len() < self.cfg.max_window_chunks
            && (self.input.len() >= size || (self.input_finished && !self.input.is_empty()))
        {
            let rest = self.input.split_off(self.input.len().min(size));
            let data = std::mem::replace(&mut self.input, rest);
            let id = ChunkId::of(&data);
            let number = self.next_chunk;
            self.next_chunk += 1;
            self.tortoise_out.push_back(ToReceiver::Offer {
                chunk: number,
                id,
                len: data.len() as u32,
            });
            let missing = BlockSet::full(self.geometry.blocks_in(data.len()));
            self.chunks.insert(
                number,
                ChunkTx {
                    id,
                    data,
                    unsent: missing.clone(),
                    missing,
                    state: ChunkState::Offered,
                },
            );
        }
        self.queue_finish();
    }

    fn queue_finish(&mut self) {
        if self.input_finished
            && self.input.is_empty()
            && self.chunks.is_empty()
            && !self.finish_queued
        {
            self.finish_queued = true;
            self.tortoise_out.push_back(ToReceiver::Finish {
                chunks: self.next_chunk,
            });
        }
    }

    /// Lays out chunk `number`'s next burst and queues its packets for the hare.
    fn plan_burst(&mut self, number: u32) {
        let Some(chunk) = self.chunks.get_mut(&number) else {
            return;
        };
        let plan = block::plan_burst(
            &chunk.missing,
            self.geometry.blocks_per_packet,
            self.cfg.burst_packets,
        );
        if plan.is_empty() {
            chunk.state = ChunkState::Done;
            return;
        }
        for &b in plan.iter().flatten() {
            if !chunk.unsent.remove(b as usize) {
                self.stats.blocks_resent += 1;
            }
        }
        chunk.state = ChunkState::InBurst {
            unanswered: plan.len(),
        };
        let rate = self.autorate.rate();
        let first_seq = self.next_seq;
        let mut crcs = Vec::with_capacity(plan.len());
        let eager = self.fine_unasked();
        for (i, blocks) in plan.iter().enumerate() {
            let chunk = &self.chunks[&number];
            let payload = self.payload(chunk, blocks);
            crcs.push(block::packet_crc(&payload));
            if eager {
                let fine = self.fine_crcs_of(chunk, blocks, &payload);
                self.stats.fine_unasked += 1;
                self.notice_fine.push(ToReceiver::Fine {
                    seq: (first_seq + i as u64) as u16,
                    blocks: fine.blocks,
                    quarters: fine.quarters,
                });
            }
        }
        self.notice = Some(ToReceiver::Burst {
            chunk: number,
            first_seq: first_seq as u16,
            rate: rate as u8,
            plan_digest: block::plan_digest(&plan),
            crcs,
        });
        for blocks in plan {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.emitting.push_back(seq);
            self.in_flight.insert(
                seq,
                InFlight {
                    chunk: number,
                    blocks,
                    rate,
                },
            );
        }
    }

    /// Whether the next burst's finer CRCs go with its notice: the latest BIER says at least
    /// `fine_unasked_above` of full packets will fail their CRC-32.
    fn fine_unasked(&self) -> bool {
        let Some((_, bier, _)) = self.bier else {
            return false;
        };
        let n = self.geometry.blocks_per_packet as i32;
        1.0 - (1.0 - bier).powi(n) >= self.cfg.fine_unasked_above
    }

    /// The blocks of `chunk` listed in `blocks`, back to back.
    fn payload(&self, chunk: &ChunkTx, blocks: &[u16]) -> Vec<u8> {
        let mut out = Vec::with_capacity(blocks.len() * self.geometry.block_size.bytes());
        for &b in blocks {
            let range = self.geometry.block_range(chunk.data.len(), b as usize);
            out.extend_from_slice(&chunk.data[range]);
        }
        out
    }

    /// The finer CRCs (§3.2) of the packet carrying `blocks` of chunk `chunk`.
    fn fine_crcs(&self, chunk: u32, blocks: &[u16]) -> FineCrcs {
        let chunk = &self.chunks[&chunk];
        self.fine_crcs_of(chunk, blocks, &self.payload(chunk, blocks))
    }

    /// [`Self::fine_crcs`] of a packet whose `payload` is built.
    fn fine_crcs_of(&self, chunk: &ChunkTx, blocks: &[u16], payload: &[u8]) -> FineCrcs {
        let lens: Vec<usize> = blocks
            .iter()
            .map(|&b| {
                self.geometry
                    .block_range(chunk.data.len(), b as usize)
                    .len()
            })
            .collect();
        FineCrcs::of(payload, &lens)
    }

    /// Packet `seq` has its final answer: block `i` of it is bad when `bad(i)`.
    fn answered(&mut self, seq: u16, bad: impl Fn(usize) -> bool) {
        let seq = seqcode::extend(seq, self.next_seq);
        let Some(packet) = self.in_flight.remove(&seq) else {
            self.stats.unexpected_feedback += 1;
            return;
        };
        let Some(chunk) = self.chunks.get_mut(&packet.chunk) else {
            return;
        };
        for (i, &b) in packet.blocks.iter().enumerate() {
            if !bad(i) {
                chunk.missing.remove(b as usize);
            }
        }
        if let ChunkState::InBurst { unanswered } = &mut chunk.state {
            *unanswered -= 1;
            if *unanswered == 0 {
                chunk.state = if chunk.missing.is_empty() {
                    ChunkState::Done
                } else {
                    ChunkState::Ready
                };
                // The end of a burst: one autorate step (§3.3).
                self.stats.bursts_answered += 1;
                if let Some((rate, bier, samples)) = self.bier {
                    if self.autorate.on_burst_end(rate, bier, samples).is_some() {
                        self.stats.rate_changes += 1;
                    }
                }
            }
        }
    }

    /// Drops done chunks from the front of the window and opens new ones.
    fn slide_window(&mut self) {
        while let Some(entry) = self.chunks.first_entry() {
            if !matches!(entry.get().state, ChunkState::Done) {
                break;
            }
            entry.remove();
            self.stats.chunks_done += 1;
        }
        self.open_chunks();
    }
}
