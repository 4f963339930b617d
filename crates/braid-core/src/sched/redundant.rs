//! Redundant scheduling ("WAN smoothing" in commercial bonding products): every packet on
//! every usable path; the receiver's resequencing buffer drops the duplicates. It trades
//! capacity for the lowest delay and loss the paths can give together, for voice, games
//! and other latency-critical flows.

use super::{Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::Instant;

#[derive(Clone, Copy, Debug, Default)]
pub struct Redundant;

impl Scheduler for Redundant {
    fn select(&mut self, _now: Instant, _packet: &PacketMeta<'_>, _paths: &[Path]) -> Choice {
        Choice::Redundant
    }

    fn name(&self) -> &'static str {
        "redundant"
    }
}
