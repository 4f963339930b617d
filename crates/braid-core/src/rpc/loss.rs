//! Per-link loss detection from the scheduling history (PRISM §5.2.3): packets scheduled
//! on one link reach the receiver in the order sent, so once `threshold` segments sent on
//! a link after an unreported one are reported, that one is lost. The paper's threshold
//! is one (Figure 4, snapshot VI); TCP's is three duplicate ACKs; "any threshold can be
//! set", and a larger one tolerates links that reorder a little.

use std::collections::VecDeque;

use super::meta::{Identified, MetaState, Record, SegmentState};
use crate::PathId;

/// One link's transmissions in send order, and how many of them are reported.
#[derive(Clone, Debug, Default)]
struct LinkQueue {
    /// `(order, start, reported)`, orders increasing.
    sent: VecDeque<(u64, u64, bool)>,
    reported: usize,
}

/// Loss detection over every link of a flow.
#[derive(Clone, Debug)]
pub struct LossDetector {
    links: Vec<LinkQueue>,
    threshold: usize,
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
    pub fn new(threshold: usize, capacity: usize) -> Self {
        LossDetector {
            links: Vec::new(),
            threshold: threshold.max(1),
            capacity: capacity.max(1),
        }
    }

    pub fn on_sent(&mut self, link: PathId, order: u64, start: u64) {
        let i = usize::from(link);
        if self.links.len() <= i {
            self.links.resize_with(i + 1, LinkQueue::default);
        }
        let q = &mut self.links[i];
        q.sent.push_back((order, start, false));
        if q.sent.len() > self.capacity {
            if let Some((_, _, true)) = q.sent.pop_front() {
                q.reported -= 1;
            }
        }
    }

    /// After `identified` were reported, declares lost (in `meta` and on `out`) the
    /// segments of each link that at least `threshold` later ones on it overtook. Only
    /// those for which `own_arrival` holds count as overtaking: a report that may come
    /// from another copy of the segment says nothing about its link's order.
    pub fn detect(
        &mut self,
        meta: &mut MetaState,
        identified: &[Identified],
        own_arrival: impl Fn(&Identified) -> bool,
        out: &mut Vec<Lost>,
    ) {
        for d in identified.iter().filter(|d| own_arrival(d)) {
            let Some(q) = self.links.get_mut(usize::from(d.link)) else {
                continue;
            };
            if let Ok(i) = q.sent.binary_search_by_key(&d.order, |e| e.0) {
                if !q.sent[i].2 {
                    q.sent[i].2 = true;
                    q.reported += 1;
                }
            }
        }
        for q in &mut self.links {
            // Every reported entry lies after the front, so `reported` counts those that
            // overtook it.
            while let Some(&(order, start, reported)) = q.sent.front() {
                if reported {
                    q.reported -= 1;
                } else if meta
                    .record(start)
                    .is_some_and(|r| r.order == order && r.state == SegmentState::Outstanding)
                {
                    if q.reported < self.threshold {
                        break;
                    }
                    if let Some(record) = meta.mark_lost(start, order) {
                        out.push(Lost { start, record });
                    }
                }
                // Else it was acknowledged or resent elsewhere: nothing to judge.
                q.sent.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    fn send(m: &mut MetaState, d: &mut LossDetector, link: PathId, start: u64) {
        let o = m.on_sent(Instant::ZERO, link, start, start + 1).unwrap();
        d.on_sent(link, o, start);
    }

    #[test]
    fn a_later_arrival_on_the_same_link_reveals_the_loss() {
        let mut m = MetaState::new(0, 100);
        let mut d = LossDetector::new(1, 100);
        for s in 0..6 {
            send(&mut m, &mut d, (s % 2) as PathId, s);
        }
        let mut ids = Vec::new();
        let mut lost = Vec::new();
        // 3 arrives (link 1): 1 on link 1 is lost; nothing on link 0 is judged.
        m.identify(0, &[(3, 4)], &mut ids);
        d.detect(&mut m, &ids, |_| true, &mut lost);
        assert_eq!(lost.iter().map(|l| l.start).collect::<Vec<_>>(), vec![1]);
        assert_eq!(m.record(1).unwrap().state, SegmentState::Lost);
        // Its retransmission on link 0, then 4 (sent before it on link 0) arrives: no loss.
        send(&mut m, &mut d, 0, 1);
        ids.clear();
        lost.clear();
        m.identify(0, &[(4, 5), (3, 4)], &mut ids);
        d.detect(&mut m, &ids, |_| true, &mut lost);
        assert_eq!(lost.iter().map(|l| l.start).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(m.record(1).unwrap().state, SegmentState::Outstanding);
    }

    #[test]
    fn a_threshold_tolerates_reordering_within_a_link() {
        let mut m = MetaState::new(0, 100);
        let mut d = LossDetector::new(2, 100);
        for s in 0..4 {
            send(&mut m, &mut d, 0, s);
        }
        let mut ids = Vec::new();
        let mut lost = Vec::new();
        m.identify(0, &[(1, 2)], &mut ids);
        d.detect(&mut m, &ids, |_| true, &mut lost);
        assert!(lost.is_empty(), "one overtaking segment is not enough");
        ids.clear();
        m.identify(0, &[(1, 3)], &mut ids);
        d.detect(&mut m, &ids, |_| true, &mut lost);
        assert_eq!(lost.iter().map(|l| l.start).collect::<Vec<_>>(), vec![0]);
        // A segment reported before the front's verdict counts once the front goes.
        ids.clear();
        lost.clear();
        m.identify(4, &[], &mut ids);
        d.detect(&mut m, &ids, |_| true, &mut lost);
        assert!(lost.is_empty());
        assert!(d.links[0].sent.is_empty() && d.links[0].reported == 0);
    }
}
