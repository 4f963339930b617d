//! The meta-state of a receiver's buffer (PRISM §5.2.1): the scheduling history of one
//! striped TCP flow (which data segment went on which link, its sequence range and send
//! time) and which of those segments the receiver has reported, by cumulative ACK or SACK.
//!
//! ACK identification: a new ACK's SACK blocks are matched against the history (A.1) and
//! the range between the old and new cumulative ACK is scanned (A.2); the segments newly
//! covered are the ACK's *identified* segments. Sequence numbers are 64-bit here
//! ([`super::seq`]). The paper keeps a circular buffer of packet slots; a map of byte
//! ranges does the same for segments of any size, retransmissions and resegmentation.

use std::collections::BTreeMap;

use crate::time::Instant;
use crate::PathId;

/// Where a scheduled segment stands in the receiver's buffer, as far as RPC knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentState {
    /// Sent, not yet reported.
    Outstanding,
    /// Reported in a SACK block.
    Sacked,
    /// Declared lost by [`super::loss`]; waiting for its retransmission to arrive.
    Lost,
}

/// One scheduled segment `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub end: u64,
    pub link: PathId,
    pub sent_at: Instant,
    /// Send order across the flow (each transmission gets a new one).
    pub order: u64,
    pub retransmitted: bool,
    pub state: SegmentState,
}

/// A segment newly reported by an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identified {
    pub start: u64,
    pub end: u64,
    pub link: PathId,
    pub sent_at: Instant,
    pub order: u64,
    pub retransmitted: bool,
    /// It had been declared lost: its loss is now repaired.
    pub was_lost: bool,
}

/// The meta-state of one flow's receiver buffer.
#[derive(Clone, Debug)]
pub struct MetaState {
    records: BTreeMap<u64, Record>,
    /// The receiver's cumulative ACK (`left` in Figure 4 once data is outstanding).
    cum: u64,
    next_order: u64,
    capacity: usize,
    /// Records dropped because the history was full (the oldest go first).
    pub evicted: u64,
}

impl MetaState {
    /// `cum` is the first byte not yet acknowledged; `capacity` bounds the history.
    pub fn new(cum: u64, capacity: usize) -> Self {
        MetaState {
            records: BTreeMap::new(),
            cum,
            next_order: 0,
            capacity: capacity.max(1),
            evicted: 0,
        }
    }

    /// The receiver's cumulative ACK.
    pub fn cum(&self) -> u64 {
        self.cum
    }

    /// The highest byte sent, plus one.
    pub fn highest_sent(&self) -> u64 {
        self.records
            .last_key_value()
            .map_or(self.cum, |(_, r)| r.end)
    }

    pub fn record(&self, start: u64) -> Option<&Record> {
        self.records.get(&start)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Records a data segment `[start, end)` sent on `link`; returns its send order.
    /// A segment over bytes already in the history replaces them (a retransmission),
    /// unless it resends exactly a segment already SACKed (then `None`).
    pub fn on_sent(&mut self, now: Instant, link: PathId, start: u64, end: u64) -> Option<u64> {
        let start = start.max(self.cum);
        if end <= start {
            return None;
        }
        if let Some(r) = self.records.get_mut(&start) {
            if r.end == end && r.state == SegmentState::Sacked {
                // The receiver has it already: nothing new is in flight.
                r.retransmitted = true;
                return None;
            }
        }
        let mut retransmitted = false;
        // Cut the new range out of any records it overlaps, keeping their other parts.
        let overlapping: Vec<u64> = self
            .records
            .range(..end)
            .rev()
            .take_while(|(&s, r)| r.end > start || s >= start)
            .filter(|(_, r)| r.end > start)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            let Some(r) = self.records.remove(&s) else {
                continue;
            };
            retransmitted = true;
            if s < start {
                self.records.insert(s, Record { end: start, ..r });
            }
            if r.end > end {
                self.records.insert(end, r);
            }
        }
        let order = self.next_order;
        self.next_order += 1;
        self.records.insert(
            start,
            Record {
                end,
                link,
                sent_at: now,
                order,
                retransmitted,
                state: SegmentState::Outstanding,
            },
        );
        while self.records.len() > self.capacity {
            self.records.pop_first();
            self.evicted += 1;
        }
        Some(order)
    }

    /// Marks `start` lost if it is still outstanding with send order `order`.
    pub fn mark_lost(&mut self, start: u64, order: u64) -> Option<Record> {
        let r = self.records.get_mut(&start)?;
        if r.order != order || r.state != SegmentState::Outstanding {
            return None;
        }
        r.state = SegmentState::Lost;
        Some(*r)
    }

    /// The start of the lowest segment sent once and not reported, nor declared lost: as
    /// far as RPC knows, still on its way. Data above it that the receiver holds came in
    /// out of order, and a SACK block reporting it would look like a loss to the sender.
    /// Retransmissions do not count: the sender is repairing below them, and needs the
    /// SACK blocks above them to find the other losses of its window.
    /// `on_time` says whether a segment may still arrive; one overdue is likely lost,
    /// and the SACK blocks above it are what tells the sender so.
    pub fn first_in_flight(&self, on_time: impl Fn(&Record) -> bool) -> Option<u64> {
        self.records
            .iter()
            .find(|(_, r)| r.state == SegmentState::Outstanding && !r.retransmitted && on_time(r))
            .map(|(&s, _)| s)
    }

    /// Segments declared lost and not yet reported.
    pub fn lost_count(&self) -> usize {
        self.records
            .values()
            .filter(|r| r.state == SegmentState::Lost)
            .count()
    }

    /// ACK identification (§5.2.1) for an ACK with cumulative ACK `ack` and SACK blocks
    /// `sack` (64-bit, `[left, right)`). Pushes the newly covered segments onto `out`,
    /// SACK matches first, in block order (the first block is the latest arrival).
    pub fn identify(&mut self, ack: u64, sack: &[(u64, u64)], out: &mut Vec<Identified>) {
        // A.1: SACK block matching. A segment counts once its whole range is covered.
        for &(left, right) in sack {
            let left = left.max(self.cum);
            if right <= left {
                continue;
            }
            let starts: Vec<u64> = self.records.range(left..right).map(|(&s, _)| s).collect();
            for s in starts {
                let Some(r) = self.records.get_mut(&s) else {
                    continue;
                };
                if r.end <= right && r.state != SegmentState::Sacked {
                    out.push(identified(s, r));
                    r.state = SegmentState::Sacked;
                }
            }
        }
        // A.2: cumulative ACK scanning.
        if ack > self.cum {
            while let Some(entry) = self.records.first_entry() {
                if *entry.key() >= ack {
                    break;
                }
                let s = *entry.key();
                let r = *entry.get();
                entry.remove();
                if r.end > ack {
                    // Partly acknowledged: the rest stays, as the same transmission.
                    self.records.insert(ack, r);
                    break;
                }
                if r.state != SegmentState::Sacked {
                    out.push(identified(s, &r));
                }
            }
            self.cum = ack;
        }
    }
}

fn identified(start: u64, r: &Record) -> Identified {
    Identified {
        start,
        end: r.end,
        link: r.link,
        sent_at: r.sent_at,
        order: r.order,
        retransmitted: r.retransmitted,
        was_lost: r.state == SegmentState::Lost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmission_replaces_the_overlapped_bytes() {
        let mut m = MetaState::new(0, 100);
        m.on_sent(Instant::ZERO, 0, 0, 100);
        m.on_sent(Instant::ZERO, 1, 100, 200);
        let o = m.on_sent(Instant::from_millis(5), 1, 50, 150).unwrap();
        let r = m.record(50).unwrap();
        assert_eq!((r.end, r.link, r.order, r.retransmitted), (150, 1, o, true));
        assert_eq!(m.record(0).unwrap().end, 50);
        assert_eq!(m.record(150).unwrap().end, 200);
        assert_eq!(m.len(), 3);
        assert_eq!(m.highest_sent(), 200);
    }

    #[test]
    fn partial_cumulative_ack_keeps_the_rest() {
        let mut m = MetaState::new(0, 100);
        m.on_sent(Instant::ZERO, 0, 0, 100);
        let mut out = Vec::new();
        m.identify(40, &[], &mut out);
        assert!(out.is_empty());
        assert_eq!(m.record(40).unwrap().end, 100);
        m.identify(100, &[], &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].start, out[0].end), (40, 100));
    }

    #[test]
    fn history_is_bounded() {
        let mut m = MetaState::new(0, 4);
        for i in 0..10 {
            m.on_sent(Instant::ZERO, 0, i * 10, i * 10 + 10);
        }
        assert_eq!((m.len(), m.evicted), (4, 6));
    }
}
