//! Per-link loss detection from the scheduling history (PRISM §5.2.3): packets scheduled
//! on one link reach the receiver in the order sent, so when a segment sent on a link is
//! reported, every segment sent earlier on that link and still unreported is lost
//! (Figure 4, snapshot VI). This is the paper's threshold of one; TCP's is three
//! duplicate ACKs.

use std::collections::VecDeque;

use super::meta::{Identified, MetaState, Record};
use crate::PathId;

/// One link's transmissions in send order: `(order, start)`.
#[derive(Clone, Debug, Default)]
pub struct LossDetector {
    links: Vec<VecDeque<(u64, u64)>>,
    capacity: usize,
}

/// A segment declared lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lost {
    pub start: u64,
    pub record: Record,
}

impl LossDetector {
    /// `capacity` bounds each link's queue (the meta-state's capacity is enough).
    pub fn new(capacity: usize) -> Self {
        LossDetector {
            links: Vec::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn on_sent(&mut self, link: PathId, order: u64, start: u64) {
        let i = usize::from(link);
        if self.links.len() <= i {
            self.links.resize_with(i + 1, VecDeque::new);
        }
        let q = &mut self.links[i];
        q.push_back((order, start));
        if q.len() > self.capacity {
            q.pop_front();
        }
    }

    /// After `identified` were reported, declares lost (in `meta` and on `out`) the
    /// segments sent earlier on the same link that are still outstanding.
    pub fn detect(&mut self, meta: &mut MetaState, identified: &[Identified], out: &mut Vec<Lost>) {
        for (i, q) in self.links.iter_mut().enumerate() {
            let Some(latest) = identified
                .iter()
                .filter(|d| usize::from(d.link) == i)
                .map(|d| d.order)
                .max()
            else {
                continue;
            };
            while let Some(&(order, start)) = q.front() {
                if order > latest {
                    break;
                }
                q.pop_front();
                if order < latest {
                    if let Some(record) = meta.mark_lost(start, order) {
                        out.push(Lost { start, record });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::meta::SegmentState;
    use super::*;
    use crate::time::Instant;

    fn send(m: &mut MetaState, d: &mut LossDetector, link: PathId, start: u64) {
        let o = m.on_sent(Instant::ZERO, link, start, start + 1).unwrap();
        d.on_sent(link, o, start);
    }

    #[test]
    fn a_later_arrival_on_the_same_link_reveals_the_loss() {
        let mut m = MetaState::new(0, 100);
        let mut d = LossDetector::new(100);
        for s in 0..6 {
            send(&mut m, &mut d, (s % 2) as PathId, s);
        }
        let mut ids = Vec::new();
        let mut lost = Vec::new();
        // 3 arrives (link 1): 1 on link 1 is lost; nothing on link 0 is judged.
        m.identify(0, &[(3, 4)], &mut ids);
        d.detect(&mut m, &ids, &mut lost);
        assert_eq!(lost.iter().map(|l| l.start).collect::<Vec<_>>(), vec![1]);
        assert_eq!(m.record(1).unwrap().state, SegmentState::Lost);
        // Its retransmission on link 0, then 4 (sent before it on link 0) arrives: no loss.
        send(&mut m, &mut d, 0, 1);
        ids.clear();
        lost.clear();
        m.identify(0, &[(4, 5), (3, 4)], &mut ids);
        d.detect(&mut m, &ids, &mut lost);
        assert_eq!(lost.iter().map(|l| l.start).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(m.record(1).unwrap().state, SegmentState::Outstanding);
    }
}
