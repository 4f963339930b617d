//! HTPPR: partial packet recovery over a hare and a tortoise (Badam et al., MobiHoc '11).
//!
//! A fast link that corrupts packets (the hare, e.g. 802.11) is made efficient by a slow
//! reliable link (the tortoise, e.g. broadband over TCP) that carries only metadata and
//! feedback. Data moves in 32 KB content-addressed chunks ([`chunk`]); hare packets carry
//! 32-byte blocks of a chunk and a header read fuzzily ([`hare`], [`seqcode`]); the sender
//! puts each packet's CRC-32 on the tortoise and, for a damaged packet, a CRC-8 per block and
//! a CRC-16 per quarter ([`block`], §3.2); the receiver answers every packet with ACK, ARQ
//! (a bitmap of bad blocks) or NACK on the tortoise ([`tortoise`]), and the sender resends
//! only bad blocks, in bursts of 5 packets, over a sliding window of chunks. The receiver
//! estimates the block error rate with equations 1-3 ([`bier`]) and the sender picks the
//! hare's bit rate from it ([`autorate`], §3.3).
//!
//! Sans-IO like the rest of the engine: [`Sender`] and [`Receiver`] take bytes and `now`
//! and are polled for bytes to put on each link; the caller frames tortoise messages (a
//! length prefix on TCP) and sends hare packets as datagrams at the rate the sender names.
//!
//! Real I/O is in `braid-net` (UDP-Lite hare, TCP tortoise), the 802.11 hare in `braid-sim`
//! (`wifi`). Not here yet: precomputed CRCs served by several neighbours (§5.5, Fig. 10).

pub mod assembly;
pub mod autorate;
pub mod bier;
pub mod block;
pub mod chunk;
pub mod hare;
pub mod receiver;
pub mod sender;
pub mod seqcode;
pub mod tortoise;

#[cfg(test)]
mod e2e_tests;
#[cfg(test)]
mod exchange_tests;

use std::time::Duration;

pub use block::BlockSize;
pub use chunk::ChunkId;
pub use receiver::{Receiver, ReceiverError, ReceiverStats};
pub use sender::{HareTransmit, Sender, SenderError, SenderStats};

/// The sender's settings; the receiver learns the layout from the sender's `Hello`.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// Block size (§3.2, §5.2: 32 bytes is best).
    pub block_size: BlockSize,
    /// Payload bytes in a full hare packet (1408: 44 blocks of 32 bytes, §5.2); rounded down
    /// to whole blocks, at most 255 blocks.
    pub payload_len: usize,
    /// Bytes in a chunk (32 KB, §3.1).
    pub chunk_size: usize,
    /// Packets in a burst (5, §4).
    pub burst_packets: usize,
    /// The most chunks in flight at once: the sliding window that keeps the hare busy while
    /// the tortoise is slow (§3.1). Chunks open as soon as there is room; bursts go oldest
    /// chunk first, so a wide window costs memory (window × chunk size), not the older
    /// chunks' latency. 256 × 32 KB covers a 54 Mbit/s hare with a tortoise of 80 ms RTT
    /// (a chunk needs about 11 tortoise round trips).
    pub max_window_chunks: usize,
    /// The hare's bit rates, kbit/s, lowest first (802.11g by default).
    pub rates_kbps: Vec<u32>,
    /// The rate to start at, as an index into `rates_kbps` (the top one by default).
    pub start_rate: usize,
    /// Whether the BIER autorate of §3.3 moves the rate.
    pub autorate: bool,
    /// The share of packets expected to fail their CRC-32 (from the receiver's BIER) at and
    /// above which their finer CRCs go with the burst notice, unasked (see [`sender`]); above
    /// 1, never.
    pub fine_unasked_above: f64,
    /// The first hare sequence number (16 bits on the wire, extended by both ends). A random
    /// one keeps a previous transfer's late hare packets from matching this one's.
    pub first_seq: u16,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            block_size: BlockSize::B32,
            payload_len: block::DEFAULT_PAYLOAD_LEN,
            chunk_size: chunk::DEFAULT_CHUNK_SIZE,
            burst_packets: block::DEFAULT_BURST_PACKETS,
            max_window_chunks: 256,
            rates_kbps: autorate::RATES_80211G_KBPS.to_vec(),
            start_rate: autorate::RATES_80211G_KBPS.len() - 1,
            autorate: true,
            fine_unasked_above: sender::FINE_UNASKED_ABOVE,
            first_seq: 0,
        }
    }
}

/// The receiver's settings.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// How long after a burst's notice (its maximum sequence number, §3.1) a packet of it
    /// that has not arrived is NACKed. The paper gives no value; 20 ms covers a full burst at
    /// 6 Mbit/s behind the notice.
    pub nack_timeout: Duration,
    /// Hare packets kept while their burst notice has not come yet (the hare usually beats
    /// the tortoise); beyond it the oldest is dropped and counted.
    pub max_pending: usize,
    /// The most chunks the receiver holds at once (offered and not yet delivered).
    pub max_window_chunks: usize,
    /// Completed chunks kept by id so that content offered again is not sent again (§4).
    pub dedup_chunks: usize,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            nack_timeout: Duration::from_millis(20),
            max_pending: 4096,
            max_window_chunks: 1024,
            dedup_chunks: 256,
        }
    }
}
