//! Fixed-overhead XOR coding, PluriBus §6.4.1's baseline: "To implement a fixed-overhead
//! code with K% redundancy, we send a coded packet after every 100/K-th pure packet. Each
//! coded packet codes over packets in the current unacknowledged window since the last coded
//! packet." It is a (K, 1) Maelstrom code. Coded packets go out right behind the data that
//! triggers them, on the same path, whatever the queue: that is what tells it from the
//! opportunistic methods.

use braid_wire::Message;

use super::decoder::XorDecoder;
use super::window::Window;
use super::xor::CodedBuilder;
use super::{LossRecovery, RecoveredSink, Repair, RepairBody};
use crate::path::Path;
use crate::stats::LossRecoveryStats;
use crate::{Instant, PathId, XorParams};

/// Most packets one coded packet combines (K = 1 groups 100).
const MAX_GROUP: usize = 100;

/// A coded packet after every `100 / K` data packets.
pub struct FixedXor {
    pct: u32,
    /// K per data packet accumulates here; at 100 a coded packet is due.
    credit: u32,
    group: Window,
    due: Option<PathId>,
    builder: CodedBuilder,
    decoder: XorDecoder,
    stats: LossRecoveryStats,
}

impl FixedXor {
    pub fn new(p: XorParams) -> FixedXor {
        FixedXor {
            pct: p.redundancy_pct.clamp(1, 100),
            credit: 0,
            group: Window::new(MAX_GROUP),
            due: None,
            builder: CodedBuilder::default(),
            decoder: XorDecoder::new(p.decoder),
            stats: LossRecoveryStats::default(),
        }
    }
}

impl LossRecovery for FixedXor {
    fn on_data_sent(&mut self, _now: Instant, seq: u32, path: &Path, payload: &[u8]) {
        self.group.push(seq, Instant::MAX, payload);
        self.credit += self.pct;
        if self.credit >= 100 {
            self.credit -= 100;
            self.due = Some(path.id());
        }
    }

    fn on_ack(&mut self, _now: Instant, highest: u32) {
        self.group.ack(highest);
    }

    fn poll_repair(&mut self, _now: Instant, _paths: &[Path]) -> Option<Repair<'_>> {
        let path = self.due.take()?;
        let n = self.group.len();
        let (highest, _) = self.group.get(n.checked_sub(1)?)?;
        self.builder.begin(highest);
        for i in 0..n {
            if let Some((seq, packet)) = self.group.get(i) {
                self.builder.add(seq, packet);
            }
        }
        self.group.clear();
        self.stats.coded_sent += 1;
        self.stats.coded_members += self.builder.members() as u64;
        Some(Repair {
            path,
            body: RepairBody::Coded(self.builder.coded()),
        })
    }

    fn on_data_received(
        &mut self,
        _now: Instant,
        seq: u32,
        payload: &[u8],
        sink: &mut dyn RecoveredSink,
    ) {
        self.decoder.on_data(seq, payload, sink, &mut self.stats);
    }

    fn on_repair_received(
        &mut self,
        _now: Instant,
        message: &Message<'_>,
        sink: &mut dyn RecoveredSink,
    ) {
        if let Message::Coded(c) = message {
            self.decoder.on_coded(c, sink, &mut self.stats);
        }
    }

    fn stats(&self) -> LossRecoveryStats {
        LossRecoveryStats {
            method: "xor",
            window: self.group.len() as u64,
            window_drops: self.group.drops(),
            ..self.stats.clone()
        }
    }

    fn name(&self) -> &'static str {
        "xor"
    }
}
