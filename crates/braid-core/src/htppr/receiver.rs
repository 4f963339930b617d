//! The HTPPR receiver (§3.1-3.3): matches hare packets to the tortoise's notices, judges
//! them with the multi-resolution CRCs and answers each with ACK, ARQ or NACK.
//!
//! Driving contract (sans-IO; `now` only moves forward):
//! - [`Receiver::handle_hare`] takes a hare packet, damaged or not.
//! - [`Receiver::handle_tortoise`] takes a message from the sender; an error means the
//!   sender broke the protocol and the transfer should be abandoned.
//! - [`Receiver::poll_tortoise`] gives the next feedback message; call it until `None`.
//! - [`Receiver::poll_deliver`] gives completed chunks in order.
//! - [`Receiver::poll_timeout`] / [`Receiver::handle_timeout`]: the NACK timer.
//!
//! A hare packet usually arrives before its burst's notice, so it waits in a bounded queue
//! until the notice says which sequence numbers are out, which chunk they belong to, and
//! each packet's CRC-32. Its sequence number is read through the (2,1) code: every candidate
//! value must be outstanding and belong to a chunk whose id matches the packet's fuzzily
//! (§3.1.1); if several do, the one whose CRC-32 the payload passes wins. A packet that
//! passes its CRC-32 is ACKed; one that fails it has its CRC-8s and CRC-16s fetched and is
//! answered with an ARQ naming its bad blocks (§3.2). A packet is NACKed when a later one
//! arrives first (a sequence gap) or when it has not come `nack_timeout` after its burst's
//! notice (the maximum-sequence notice of §3.1).

use std::collections::{BTreeMap, VecDeque};

use super::assembly::Assembly;
use super::bier::{BierEstimator, BlockWindow};
use super::block::{self, FineCrcs, Geometry};
use super::chunk::ChunkId;
use super::hare::HarePacket;
use super::seqcode;
use super::tortoise::{self, ToReceiver, ToSender, TortoiseError};
use super::{BlockSize, ReceiverConfig};
use crate::Instant;

/// Bytes in front of a hare packet's blocks whose damage loses the whole packet (MAC, IP
/// and UDP-Lite headers, about 64). A lost packet enters the BIER as that many bytes of bad
/// blocks: losses are evidence of bit errors (at a high rate every packet may be lost, and
/// without them the estimate is blind: htppr-fig6), but a packet lost to a collision says
/// nothing about its blocks, so it weighs as its header, not as all its blocks.
pub const LOST_HEADER_BYTES: usize = 64;
/// Candidate sequence numbers further than this beyond the last notice are taken as misreads.
const SEQ_HORIZON: u64 = 4096;

/// The most packets outstanding at once (well inside the 16-bit sequence space).
const MAX_OUTSTANDING: usize = 16 * 1024;

/// The largest feedback message built; items beyond it wait for the next one.
const MAX_MESSAGE: usize = 16 * 1024;

/// A message from the sender that breaks the protocol.
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    #[error("malformed tortoise message: {0}")]
    Tortoise(#[from] TortoiseError),
    #[error("sender's Hello is unusable ({0}); braid speaks version {v}", v = tortoise::VERSION)]
    BadHello(&'static str),
    #[error("sender sent {0} before its Hello")]
    NoHello(&'static str),
    #[error("chunk {got} offered out of order (expected {expected}) or with a bad length")]
    BadOffer { got: u32, expected: u32 },
    #[error("sender exceeded the receiver's window of {0} chunks")]
    WindowFull(usize),
    #[error("burst for chunk {0}, which is not being received")]
    UnknownChunk(u32),
    #[error("burst for chunk {0} does not match the blocks this receiver is missing")]
    PlanMismatch(u32),
    #[error("more than {MAX_OUTSTANDING} packets outstanding")]
    TooManyOutstanding,
}

/// Counters of one receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReceiverStats {
    pub hare_packets: u64,
    pub hare_bytes: u64,
    pub acks: u64,
    pub arqs: u64,
    pub nacks: u64,
    /// NACKs sent by the timeout rather than a sequence gap.
    pub nacks_by_timeout: u64,
    pub crc_requests: u64,
    /// Packets whose header was damaged and still matched (fuzzy id or coded sequence number).
    pub headers_repaired: u64,
    /// Packets too short for a header or whose sequence number copies disagree too much.
    pub unreadable: u64,
    /// Packets that matched nothing outstanding (late, duplicated, or misread), dropped.
    pub unmatched: u64,
    /// Packets that matched several outstanding sequence numbers and no CRC, dropped.
    pub ambiguous: u64,
    /// Packets dropped because the queue awaiting notices was full.
    pub pending_dropped: u64,
    /// Blocks accepted by their CRC-8 and later found wrong by their quarter's CRC-16 or
    /// their chunk's hash, and asked for again.
    pub blocks_reopened: u64,
    /// Completed chunks whose content did not match their id (every block asked for again).
    pub chunk_hash_failures: u64,
    /// Chunks the receiver already held when offered (§4).
    pub chunks_deduplicated: u64,
    pub chunks_delivered: u64,
    pub tortoise_messages: u64,
    pub tortoise_bytes: u64,
}

enum ExpectState {
    Waiting,
    /// Failed its CRC-32; the finer CRCs were asked for.
    Judging {
        payload: Vec<u8>,
        weight: f64,
    },
}

/// A packet announced by a burst notice and not yet answered.
struct Expect {
    chunk: u32,
    blocks: Vec<u16>,
    crc: u32,
    rate: u8,
    state: ExpectState,
    /// The finer CRCs, when the sender sent them with the notice (see [`super::sender`]).
    fine: Option<FineCrcs>,
}

/// A hare packet waiting for its notice.
struct Pending {
    bytes: Vec<u8>,
    weight: f64,
}

enum Resolution {
    /// Used or dropped.
    Done,
    /// Not decidable until more notices arrive.
    Wait,
}

/// The receiving end of one HTPPR transfer.
pub struct Receiver {
    cfg: ReceiverConfig,
    geometry: Option<Geometry>,
    next_offer: u32,
    assembly: Assembly,
    expects: BTreeMap<u64, Expect>,
    max_announced: Option<u64>,
    /// Every `Waiting` packet below this has been NACKed or answered.
    gap_floor: u64,
    pending: VecDeque<Pending>,
    /// (deadline, last sequence number) of each burst notice, in arrival order.
    deadlines: VecDeque<(Instant, u64)>,
    out: VecDeque<ToSender>,
    bier: BierEstimator,
    bier_window: BlockWindow,
    bier_rate: Option<u8>,
    bier_reported: bool,
    /// Samples of judged packets waiting for an earlier packet's judgement, by sequence
    /// number; `None` for a packet still waiting for its finer CRCs.
    held_samples: BTreeMap<u64, Option<Sample>>,
    finish: Option<u32>,
    stats: ReceiverStats,
}

/// One packet's entry into equation 3: rate index, weight, bad and total blocks.
type Sample = (u8, f64, usize, usize);

/// The most samples held behind an unjudged packet; beyond it the oldest entry goes in (or,
/// still unjudged, is dropped) so that one stuck packet cannot freeze the estimate.
const MAX_HELD_SAMPLES: usize = 512;

impl Receiver {
    pub fn new(cfg: ReceiverConfig) -> Self {
        Receiver {
            assembly: Assembly::new(cfg.dedup_chunks),
            cfg,
            geometry: None,
            next_offer: 0,
            expects: BTreeMap::new(),
            max_announced: None,
            gap_floor: 0,
            pending: VecDeque::new(),
            deadlines: VecDeque::new(),
            out: VecDeque::new(),
            bier: BierEstimator::new(),
            bier_window: BlockWindow::default(),
            bier_rate: None,
            bier_reported: true,
            held_samples: BTreeMap::new(),
            finish: None,
            stats: ReceiverStats::default(),
        }
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// The receiver's BIER estimate (§3.3) and the rate index it was measured at.
    pub fn bier(&self) -> Option<(u8, f64)> {
        Some((self.bier_rate?, self.bier.estimate()?))
    }

    /// Whether the sender said it was done and every chunk has been delivered.
    pub fn is_finished(&self) -> bool {
        self.finish == Some(self.assembly.next_deliver()) && self.assembly.drained()
    }

    /// Takes a hare packet that arrived at `now`, damaged or not.
    pub fn handle_hare(&mut self, now: Instant, bytes: &[u8]) {
        self.stats.hare_packets += 1;
        self.stats.hare_bytes += bytes.len() as u64;
        if HarePacket::parse(bytes).is_err() {
            self.stats.unreadable += 1;
            return;
        }
        let weight = self.bier.on_arrival(now);
        let pending = Pending {
            bytes: bytes.to_vec(),
            weight,
        };
        if let Resolution::Wait = self.resolve(&pending) {
            if self.pending.len() >= self.cfg.max_pending.max(1) {
                self.pending.pop_front();
                self.stats.pending_dropped += 1;
            }
            self.pending.push_back(pending);
        }
    }

    /// Takes a message from the sender.
    pub fn handle_tortoise(&mut self, now: Instant, bytes: &[u8]) -> Result<(), ReceiverError> {
        for item in tortoise::parse_to_receiver(bytes)? {
            match item {
                ToReceiver::Hello {
                    version,
                    block_size,
                    blocks_per_packet,
                    chunk_size,
                } => {
                    if version != tortoise::VERSION {
                        return Err(ReceiverError::BadHello("version"));
                    }
                    if self.geometry.is_some() {
                        return Err(ReceiverError::BadHello("sent twice"));
                    }
                    let block_size = BlockSize::from_bytes(block_size)
                        .ok_or(ReceiverError::BadHello("block size"))?;
                    if blocks_per_packet == 0 {
                        return Err(ReceiverError::BadHello("blocks per packet"));
                    }
                    if chunk_size == 0 || chunk_size / block_size.bytes() > u16::MAX as usize {
                        return Err(ReceiverError::BadHello("chunk size"));
                    }
                    self.geometry = Some(Geometry {
                        block_size,
                        blocks_per_packet,
                        chunk_size,
                    });
                }
                ToReceiver::Offer { chunk, id, len } => self.on_offer(chunk, id, len as usize)?,
                ToReceiver::Burst {
                    chunk,
                    first_seq,
                    rate,
                    plan_digest,
                    crcs,
                } => self.on_burst(now, chunk, first_seq, rate, plan_digest, crcs)?,
                ToReceiver::Fine {
                    seq,
                    blocks,
                    quarters,
                } => self.on_fine(seq, FineCrcs { blocks, quarters }),
                ToReceiver::Finish { chunks } => self.finish = Some(chunks),
            }
        }
        if !self.pending.is_empty() {
            self.resolve_pending();
        }
        Ok(())
    }

    /// When [`Receiver::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.front().map(|&(at, _)| at)
    }

    /// NACKs the packets of every burst whose notice is `nack_timeout` old and that have not
    /// arrived. Harmless when early.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, last)) = self.deadlines.front() {
            if at > now {
                break;
            }
            self.deadlines.pop_front();
            let before = self.stats.nacks;
            self.nack_waiting_below(last + 1);
            self.stats.nacks_by_timeout += self.stats.nacks - before;
        }
    }

    /// Writes the next feedback message into `out` (cleared first).
    pub fn poll_tortoise(&mut self, _now: Instant, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        if self.out.is_empty() {
            return None;
        }
        if !self.bier_reported {
            if let (Some(rate), Some(b)) = (self.bier_rate, self.bier.estimate()) {
                tortoise::emit_to_sender(
                    out,
                    &ToSender::Bier {
                        rate,
                        bier: (b * 65535.0).round() as u16,
                        samples: self.bier.samples().min(u16::MAX as u32) as u16,
                    },
                );
            }
            self.bier_reported = true;
        }
        // A `Reopen` stays in the message of the answer before it.
        while out.len() < MAX_MESSAGE || matches!(self.out.front(), Some(ToSender::Reopen { .. })) {
            let Some(item) = self.out.pop_front() else {
                break;
            };
            tortoise::emit_to_sender(out, &item);
        }
        self.stats.tortoise_messages += 1;
        self.stats.tortoise_bytes += out.len() as u64;
        Some(out.len())
    }

    /// The next chunk in order: its number and bytes.
    pub fn poll_deliver(&mut self) -> Option<(u32, Vec<u8>)> {
        let chunk = self.assembly.poll_deliver()?;
        self.stats.chunks_delivered += 1;
        Some(chunk)
    }

    fn on_offer(&mut self, chunk: u32, id: ChunkId, len: usize) -> Result<(), ReceiverError> {
        let geometry = self.geometry.ok_or(ReceiverError::NoHello("an offer"))?;
        if chunk != self.next_offer || len == 0 || len > geometry.chunk_size {
            return Err(ReceiverError::BadOffer {
                got: chunk,
                expected: self.next_offer,
            });
        }
        if self.assembly.held() >= self.cfg.max_window_chunks {
            return Err(ReceiverError::WindowFull(self.cfg.max_window_chunks));
        }
        self.next_offer += 1;
        if self.assembly.offer(chunk, id, len, &geometry) {
            self.stats.chunks_deduplicated += 1;
            self.out.push_back(ToSender::Have { chunk });
        } else {
            self.out.push_back(ToSender::Want { chunk });
        }
        Ok(())
    }

    fn on_burst(
        &mut self,
        now: Instant,
        chunk: u32,
        first_seq: u16,
        rate: u8,
        plan_digest: u32,
        crcs: Vec<u32>,
    ) -> Result<(), ReceiverError> {
        let geometry = self.geometry.ok_or(ReceiverError::NoHello("a burst"))?;
        let missing = self
            .assembly
            .missing(chunk)
            .ok_or(ReceiverError::UnknownChunk(chunk))?;
        let plan = block::plan_burst(missing, geometry.blocks_per_packet, crcs.len());
        if plan.len() != crcs.len() || block::plan_digest(&plan) != plan_digest {
            return Err(ReceiverError::PlanMismatch(chunk));
        }
        if self.expects.len() + plan.len() > MAX_OUTSTANDING {
            return Err(ReceiverError::TooManyOutstanding);
        }
        let reference = self.max_announced.map_or(0, |m| m + 1);
        let first = seqcode::extend(first_seq, reference);
        let count = plan.len() as u64;
        for (i, (blocks, crc)) in plan.into_iter().zip(crcs).enumerate() {
            self.expects.insert(
                first + i as u64,
                Expect {
                    chunk,
                    blocks,
                    crc,
                    rate,
                    state: ExpectState::Waiting,
                    fine: None,
                },
            );
        }
        let Some(last) = (first + count).checked_sub(1) else {
            return Ok(());
        };
        self.max_announced = Some(self.max_announced.map_or(last, |m| m.max(last)));
        self.deadlines
            .push_back((now + self.cfg.nack_timeout, last));
        Ok(())
    }

    /// Places the packets that beat the notices over the hare, in arrival order. Called once
    /// a whole message is read, so that finer CRCs sent with a notice are known when its
    /// damaged packets are judged.
    fn resolve_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            if let Resolution::Wait = self.resolve(&p) {
                self.pending.push_back(p);
            }
        }
    }

    /// Places a hare packet: answers it, or drops it, or says it must wait for notices.
    fn resolve(&mut self, p: &Pending) -> Resolution {
        let Ok(packet) = HarePacket::parse(&p.bytes) else {
            return Resolution::Done;
        };
        let candidates = packet.seq_candidates();
        if candidates.is_empty() {
            self.stats.unreadable += 1;
            return Resolution::Done;
        }
        let Some(max) = self.max_announced else {
            return Resolution::Wait;
        };
        let id = packet.chunk_id();
        let mut future = false;
        let mut plausible = Vec::new();
        for c in &candidates {
            let seq = seqcode::extend(*c, max);
            if seq > max {
                future |= seq - max <= SEQ_HORIZON;
                continue;
            }
            let Some(e) = self.expects.get(&seq) else {
                continue;
            };
            let id_matches = self
                .assembly
                .id(e.chunk)
                .is_some_and(|c| c.fuzzy_matches(&id));
            if matches!(e.state, ExpectState::Waiting) && id_matches {
                plausible.push(seq);
            }
        }
        let crc_passes = |r: &Self, seq: u64| {
            r.expects.get(&seq).is_some_and(|e| {
                let len = r.payload_len(e);
                packet.payload().len() == len && block::packet_crc(packet.payload()) == e.crc
            })
        };
        let chosen = match plausible.as_slice() {
            [] if future => return Resolution::Wait,
            [] => {
                self.stats.unmatched += 1;
                return Resolution::Done;
            }
            [only] if !future => Some(*only),
            _ => plausible.iter().copied().find(|&s| crc_passes(self, s)),
        };
        let Some(seq) = chosen else {
            if future {
                return Resolution::Wait;
            }
            self.stats.ambiguous += 1;
            return Resolution::Done;
        };
        let clean_header = candidates.len() == 1
            && self
                .expects
                .get(&seq)
                .and_then(|e| self.assembly.id(e.chunk))
                .is_some_and(|c| c == id);
        if !clean_header {
            self.stats.headers_repaired += 1;
        }
        // Everything announced before this packet and still missing was lost (§3.1).
        self.nack_waiting_below(seq);
        self.accept(seq, packet.payload(), p.weight);
        Resolution::Done
    }

    /// Judges packet `seq` by its CRC-32: ACK, or ask for the finer CRCs.
    fn accept(&mut self, seq: u64, payload: &[u8], weight: f64) {
        let Some(e) = self.expects.get(&seq) else {
            return;
        };
        let len = self.payload_len(e);
        if payload.len() == len && block::packet_crc(payload) == e.crc {
            let mut reopen = None;
            if let Some(e) = self.expects.remove(&seq) {
                let good = vec![true; e.blocks.len()];
                reopen = self.store(&e, payload, &good);
                self.sample_in_order(seq, Some((e.rate, weight, 0, e.blocks.len())));
            }
            self.stats.acks += 1;
            self.out.push_back(ToSender::Ack { seq: seq as u16 });
            self.out.extend(reopen);
        } else {
            if let Some(e) = self.expects.get_mut(&seq) {
                e.state = ExpectState::Judging {
                    payload: payload.to_vec(),
                    weight,
                };
                if let Some(fine) = e.fine.take() {
                    self.judge(seq, fine);
                    return;
                }
                self.sample_in_order(seq, None);
            }
            self.stats.crc_requests += 1;
            self.out.push_back(ToSender::CrcRequest { seq: seq as u16 });
        }
    }

    /// The finer CRCs of a packet that failed its CRC-32: answer it with an ARQ (§3.2).
    /// A packet not yet arrived keeps them for when it does (sent with the notice).
    fn on_fine(&mut self, seq: u16, fine: FineCrcs) {
        let reference = self.max_announced.unwrap_or(0);
        let seq = seqcode::extend(seq, reference);
        match self.expects.get_mut(&seq) {
            Some(e) if matches!(e.state, ExpectState::Waiting) => e.fine = Some(fine),
            Some(_) => self.judge(seq, fine),
            None => {}
        }
    }

    /// Judges a packet that failed its CRC-32 with its finer CRCs: answers it with an ARQ.
    fn judge(&mut self, seq: u64, fine: FineCrcs) {
        if !matches!(
            self.expects.get(&seq).map(|e| &e.state),
            Some(ExpectState::Judging { .. })
        ) {
            return;
        }
        let Some(e) = self.expects.remove(&seq) else {
            return;
        };
        let ExpectState::Judging { payload, weight } = &e.state else {
            return;
        };
        let lens = self.block_lens(&e);
        let bad = if fine.blocks.len() == lens.len() {
            block::judge(payload, &lens, &fine)
        } else {
            vec![true; lens.len()]
        };
        if fine.blocks.len() == lens.len() {
            for (q, range) in block::quarters(lens.len()).into_iter().enumerate() {
                if range.clone().any(|i| bad[i]) {
                    let blocks = e.blocks[range].to_vec();
                    self.assembly.defer_check(e.chunk, blocks, fine.quarters[q]);
                }
            }
        }
        let good: Vec<bool> = bad.iter().map(|b| !b).collect();
        let reopen = self.store(&e, payload, &good);
        let n_bad = bad.iter().filter(|&&b| b).count();
        self.sample_in_order(seq, Some((e.rate, *weight, n_bad, bad.len())));
        self.stats.arqs += 1;
        self.out.push_back(ToSender::Arq {
            seq: seq as u16,
            bad,
        });
        self.out.extend(reopen);
    }

    /// NACKs every announced packet below `seq` that has not arrived.
    fn nack_waiting_below(&mut self, seq: u64) {
        if seq <= self.gap_floor {
            return;
        }
        let lost: Vec<(u64, u8)> = self
            .expects
            .range(self.gap_floor..seq)
            .filter(|(_, e)| matches!(e.state, ExpectState::Waiting))
            .map(|(&s, e)| (s, e.rate))
            .collect();
        let header_blocks = self
            .geometry
            .map_or(1, |g| LOST_HEADER_BYTES.div_ceil(g.block_size.bytes()));
        for (s, rate) in lost {
            self.expects.remove(&s);
            self.stats.nacks += 1;
            self.out.push_back(ToSender::Nack { seq: s as u16 });
            self.sample_in_order(s, Some((rate, 1.0, header_blocks, header_blocks)));
        }
        self.gap_floor = seq;
    }

    /// Copies the good blocks of a packet into its chunk. Returns a `Reopen` for blocks found
    /// wrong, to be sent after the packet's answer: the sender applies the answer and then
    /// the reopening, as the receiver did.
    #[must_use]
    fn store(&mut self, e: &Expect, payload: &[u8], good: &[bool]) -> Option<ToSender> {
        let geometry = self.geometry?;
        let stored = self
            .assembly
            .store(&geometry, e.chunk, &e.blocks, payload, good);
        self.stats.chunk_hash_failures += u64::from(stored.hash_failed);
        if stored.reopened.is_empty() {
            return None;
        }
        self.stats.blocks_reopened += stored.reopened.len() as u64;
        Some(ToSender::Reopen {
            chunk: e.chunk,
            blocks: stored.reopened,
        })
    }

    /// Packet `seq`'s sample (`None`: judged later, once its finer CRCs come), applied in
    /// packet order: eq. 3 runs over packets as received, but a clean packet is judged on
    /// arrival and a damaged one a tortoise round trip later, so taken as judged the first
    /// samples at a new rate would be its clean packets and the BIER would read low (the
    /// autorate then stepped up on them: htppr-fig5's rate paths).
    fn sample_in_order(&mut self, seq: u64, sample: Option<Sample>) {
        match sample {
            None => {
                self.held_samples.insert(seq, None);
            }
            Some(s) => {
                let first = self.held_samples.keys().next().copied();
                if first.is_none_or(|f| seq < f) {
                    self.sample(s);
                } else {
                    self.held_samples.insert(seq, Some(s));
                }
            }
        }
        loop {
            let stuck = self.held_samples.len() > MAX_HELD_SAMPLES;
            let Some(entry) = self.held_samples.first_entry() else {
                break;
            };
            match *entry.get() {
                Some(s) => {
                    entry.remove();
                    self.sample(s);
                }
                None if stuck => {
                    entry.remove();
                }
                None => break,
            }
        }
    }

    /// Equation 3 for a judged packet sent at rate index `rate` with `bad` of its `total`
    /// blocks bad (§3.3).
    fn sample(&mut self, (rate, weight, bad, total): Sample) {
        if self.bier_rate != Some(rate) {
            self.bier.reset();
            self.bier_window.clear();
            self.bier_rate = Some(rate);
        }
        let b = self.bier_window.push(bad as u32, total as u32);
        self.bier.on_sample(weight, b);
        self.bier_reported = false;
    }

    fn block_lens(&self, e: &Expect) -> Vec<usize> {
        let (Some(geometry), Some(len)) = (self.geometry, self.assembly.len_of(e.chunk)) else {
            return vec![0; e.blocks.len()];
        };
        e.blocks
            .iter()
            .map(|&b| geometry.block_range(len, b as usize).len())
            .collect()
    }

    fn payload_len(&self, e: &Expect) -> usize {
        self.block_lens(e).iter().sum()
    }
}
