//! Hand-built path states for scheduler tests.

use std::time::Duration;

use super::PacketMeta;
use crate::path::Path;
use crate::{Instant, PathConfig, PathId};

/// A path with the given id and capacity, optionally given a delay estimate (µs, relative),
/// an RTT, and a number of datagrams in flight.
pub struct PathSpec {
    pub id: PathId,
    pub capacity_bps: u64,
    pub delay_us: Option<i64>,
    pub rtt_ms: Option<u64>,
    pub in_flight: u32,
}

impl PathSpec {
    pub fn new(id: PathId, capacity_bps: u64) -> PathSpec {
        PathSpec {
            id,
            capacity_bps,
            delay_us: None,
            rtt_ms: None,
            in_flight: 0,
        }
    }

    pub fn delay_ms(mut self, ms: i64) -> Self {
        self.delay_us = Some(ms * 1000);
        self
    }

    pub fn rtt_ms(mut self, ms: u64) -> Self {
        self.rtt_ms = Some(ms);
        self
    }

    pub fn in_flight(mut self, n: u32) -> Self {
        self.in_flight = n;
        self
    }

    pub fn build(&self) -> Path {
        let mut p = Path::new(
            &PathConfig {
                id: self.id,
                tx_capacity_bps: self.capacity_bps,
                rx_capacity_bps: self.capacity_bps,
            },
            Duration::from_millis(500),
            crate::Instant::ZERO,
        );
        p.set_for_test(
            self.delay_us,
            self.rtt_ms.map(Duration::from_millis),
            self.in_flight,
        );
        p
    }
}

pub fn paths(specs: &[PathSpec]) -> Vec<Path> {
    specs.iter().map(PathSpec::build).collect()
}

pub fn meta(seq: u32) -> PacketMeta<'static> {
    PacketMeta {
        seq,
        wire_bytes: 1500,
        packet: &[],
        flow: None,
        active_flows: &[],
        backlog: 1,
    }
}

pub const T0: Instant = Instant::from_millis(10_000);
