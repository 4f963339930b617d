//! The stations that run over the simulated hare: each system the HTPPR paper compares, as a
//! sending and a receiving [`Station`](super::Station).
//!
//! - [`htppr`]: braid's HTPPR engine, metadata and feedback on the tortoise; or, as the
//!   ZipTx-like baseline of §5.4, the same engine with them on the hare in MAC-acked frames.
//! - [`udp`]: a saturating UDP sender (iperf), §5.1's baseline.
//! - [`tcp`]: braid-sim's Linux-like TCP Cubic, each segment a MAC-acked frame at the rate
//!   SampleRate picks.
//! - [`hop`]: Hop (Li et al., MobiCom '09): whole packets in blocks without MAC ACKs, one
//!   block ACK per block, at a fixed rate.

pub mod hop;
pub mod htppr;
pub mod tcp;
pub mod udp;

use std::cell::RefCell;
use std::rc::Rc;

use braid_core::Instant;

use crate::Rng;

/// A file of pseudo-random bytes made as it is read, so that no chunk repeats.
pub struct FileSource {
    rng: Rng,
    left: u64,
    buf: Vec<u8>,
}

impl FileSource {
    pub fn new(len: u64, seed: u64) -> FileSource {
        FileSource {
            rng: Rng::new(seed),
            left: len,
            buf: Vec::new(),
        }
    }

    /// Up to `max` next bytes, in a buffer valid until the next call; empty at the end.
    pub fn next(&mut self, max: usize) -> &[u8] {
        let n = (max as u64).min(self.left) as usize;
        self.buf.clear();
        while self.buf.len() < n {
            let w = self.rng.next_u64().to_le_bytes();
            let take = (n - self.buf.len()).min(8);
            self.buf.extend_from_slice(&w[..take]);
        }
        self.left -= n as u64;
        &self.buf
    }

    pub fn left(&self) -> u64 {
        self.left
    }
}

/// When each 32 KB chunk of a transfer first went on the air and when it was delivered, for
/// chunk latency (HTPPR Fig. 9); shared by a flow's two stations.
#[derive(Debug, Default)]
pub struct ChunkLog {
    pub first_sent: Vec<Option<Instant>>,
    pub delivered: Vec<Option<Instant>>,
}

/// A [`ChunkLog`] both ends of a flow hold.
pub type SharedLog = Rc<RefCell<ChunkLog>>;

impl ChunkLog {
    pub fn sent(&mut self, chunk: usize, now: Instant) {
        if self.first_sent.len() <= chunk {
            self.first_sent.resize(chunk + 1, None);
        }
        self.first_sent[chunk].get_or_insert(now);
    }

    pub fn delivered(&mut self, chunk: usize, now: Instant) {
        if self.delivered.len() <= chunk {
            self.delivered.resize(chunk + 1, None);
        }
        self.delivered[chunk].get_or_insert(now);
    }

    /// Latency of every chunk both sent and delivered, seconds.
    pub fn latencies_s(&self) -> Vec<f64> {
        self.first_sent
            .iter()
            .zip(&self.delivered)
            .filter_map(|(s, d)| Some(d.as_ref()?.as_secs_f64() - s.as_ref()?.as_secs_f64()))
            .collect()
    }
}

/// The HTPPR sender's rate at the start and at every change (HTPPR Fig. 5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateChange {
    pub at: Instant,
    /// Bursts answered so far.
    pub bursts: u64,
    /// Bursts on which the autorate judged the rate so far.
    pub decisions: u64,
    /// The new rate, an index into `phy::RATES_KBPS`.
    pub rate: usize,
}

/// A sender's [`RateChange`]s, shared with whoever reads them after the run.
pub type RateLog = Rc<RefCell<Vec<RateChange>>>;

/// A flow's two stations as members `base` and `base + 1` of a world: frames and tortoise
/// messages go from each to the other, over a link of `snr_db`.
pub fn pair(
    sender: Box<dyn super::Station>,
    receiver: Box<dyn super::Station>,
    base: usize,
    snr_db: f64,
    tortoise: Option<super::TortoiseLink>,
) -> [super::Member; 2] {
    [
        super::Member {
            station: sender,
            peer: base + 1,
            snr_db,
            tortoise,
        },
        super::Member {
            station: receiver,
            peer: base,
            snr_db,
            tortoise,
        },
    ]
}
