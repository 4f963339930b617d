//! PRISM's ADAS scheduler (§4, Algorithm 1).
//!
//! Each link i has a weight W_i (its share of bandwidth) and N_i datagrams in flight;
//! its utilization is U_i = N_i / W_i.
//! - Rule 1: an inner TCP retransmission goes on the link with the smallest expected
//!   arrival time (hRTT), to repair the hole fast.
//! - Rule 2: otherwise the link with the smallest U_i, the one with the most room.
//! - Rule 3: among links tied at the smallest U_i, the one with the smallest hRTT.
//!
//! Dynamic weight adjustment (§4.2.3, AIMD): a loss on link i halves its current weight
//! (at most once per RTT, like one congestion event per window); each acknowledged datagram
//! grows it additively, without exceeding the original weight. PRISM leaves the increment
//! open; we add one hundredth of the original weight per acknowledged datagram, so a halved
//! weight recovers after fifty datagrams reach the peer on that link.
//!
//! Mapping to braid: W_i is the capacity estimate in units of the smallest link's
//! (PRISM: "the ratio of the link bandwidth to the least common denominator of all links'
//! bandwidths"); N_i comes from the peer's per-path feedback
//! ([`Path::unacked_datagrams`]); hRTT is half the smoothed RTT; loss information comes
//! from gaps in the path's sequence numbers reported back (PRISM gets it from its RPC).
//! Utilizations are compared exactly (cross-multiplied), so ties happen as in PRISM's
//! integer arithmetic.

use std::time::Duration;

use super::{candidates, Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::{Instant, PathId};

/// Per-link AIMD state.
#[derive(Clone, Copy, Debug)]
struct Link {
    id: PathId,
    /// Current weight as a fraction of the original (0, 1].
    scale: f64,
    last_cut: Option<Instant>,
}

#[derive(Clone, Debug, Default)]
pub struct Adas {
    links: Vec<Link>,
    rules: Rules,
}

/// Which of ADAS's rules apply: all, or one alone (PRISM Figure 9's baselines).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rules {
    #[default]
    All,
    /// Rule 1 for every packet: the smallest hRTT.
    HrttOnly,
    /// Rule 2 for every packet, ties to the lower id: the smallest U.
    UtilizationOnly,
}

impl Adas {
    /// ADAS reduced to some of its rules.
    pub fn only(rules: Rules) -> Adas {
        Adas {
            rules,
            ..Adas::default()
        }
    }

    fn link(&mut self, id: PathId) -> &mut Link {
        if let Some(i) = self.links.iter().position(|l| l.id == id) {
            return &mut self.links[i];
        }
        self.links.push(Link {
            id,
            scale: 1.0,
            last_cut: None,
        });
        let last = self.links.len() - 1;
        &mut self.links[last]
    }

    fn scale(&self, id: PathId) -> f64 {
        self.links
            .iter()
            .find(|l| l.id == id)
            .map_or(1.0, |l| l.scale)
    }

    /// Current weight of `p` given the smallest capacity among the candidates.
    fn weight(&self, p: &Path, unit_bps: u64) -> f64 {
        p.capacity_bps() as f64 / unit_bps.max(1) as f64 * self.scale(p.id())
    }
}

fn hrtt(p: &Path) -> Duration {
    p.srtt().unwrap_or(Duration::ZERO) / 2
}

impl Scheduler for Adas {
    fn select(&mut self, _now: Instant, packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        let retransmission = packet.flow.is_some_and(|f| f.retransmission);
        if (retransmission && self.rules == Rules::All) || self.rules == Rules::HrttOnly {
            // Rule 1.
            return candidates(paths)
                .min_by_key(|(_, p)| (hrtt(p), p.id()))
                .map_or(Choice::Hold, |(_, p)| Choice::Path(p.id()));
        }
        let unit = candidates(paths)
            .map(|(_, p)| p.capacity_bps())
            .min()
            .unwrap_or(1);
        // Rules 2 and 3: smallest U = N / W, then smallest hRTT. U is compared as
        // N_a · W_b against N_b · W_a, on weights scaled to integers.
        let mut best: Option<(u128, u128, Duration, PathId)> = None;
        for (_, p) in candidates(paths) {
            let w = (self.weight(p, unit) * 1_000_000.0).round().max(1.0) as u128;
            let n = u128::from(p.unacked_datagrams());
            let h = match self.rules {
                Rules::UtilizationOnly => Duration::ZERO,
                _ => hrtt(p),
            };
            let better = match best {
                None => true,
                Some((bn, bw, bh, bid)) => {
                    let (lhs, rhs) = (n * bw, bn * w);
                    lhs < rhs || (lhs == rhs && (h, p.id()) < (bh, bid))
                }
            };
            if better {
                best = Some((n, w, h, p.id()));
            }
        }
        best.map_or(Choice::Hold, |(_, _, _, id)| Choice::Path(id))
    }

    fn on_feedback(&mut self, now: Instant, path: PathId, acked: u32, lost: u32) {
        let l = self.link(path);
        if lost > 0 {
            // One cut per RTT-ish: a burst of losses is one congestion event.
            let recent = l
                .last_cut
                .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_millis(200));
            if !recent {
                l.scale = (l.scale / 2.0).max(1.0 / 64.0);
                l.last_cut = Some(now);
            }
        } else if acked > 0 {
            l.scale = (l.scale + 0.01 * f64::from(acked)).min(1.0);
        }
    }

    fn name(&self) -> &'static str {
        match self.rules {
            Rules::All => "adas",
            Rules::HrttOnly => "hrtt-only",
            Rules::UtilizationOnly => "utilization-only",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowMeta;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    /// PRISM Fig 3 Case A: weights 1:2; p1 on l1, p2 on l2; an ACK shows p1... here: l2
    /// has one datagram in flight and l1 one: U1 = 1/1 > U2 = 1/2, so the third packet goes
    /// on l2 (WRR would have put it on l1).
    #[test]
    fn case_a_least_utilization_wins() {
        let ps = paths(&[
            PathSpec::new(1, 1_000_000).rtt_ms(100).in_flight(1),
            PathSpec::new(2, 2_000_000).rtt_ms(100).in_flight(1),
        ]);
        assert_eq!(Adas::default().select(T0, &meta(3), &ps), Choice::Path(2));
    }

    /// Case B: equal utilization; the link whose hRTT grew loses the tie.
    #[test]
    fn case_b_ties_go_to_the_smaller_expected_arrival() {
        let ps = paths(&[
            PathSpec::new(1, 1_000_000).rtt_ms(100).in_flight(2),
            PathSpec::new(2, 2_000_000).rtt_ms(300).in_flight(4),
        ]);
        assert_eq!(Adas::default().select(T0, &meta(8), &ps), Choice::Path(1));
        let ps = paths(&[
            PathSpec::new(1, 1_000_000).rtt_ms(300).in_flight(2),
            PathSpec::new(2, 2_000_000).rtt_ms(100).in_flight(4),
        ]);
        assert_eq!(Adas::default().select(T0, &meta(8), &ps), Choice::Path(2));
    }

    /// Figure 9's one-rule baselines: hRTT-only ignores utilization, U-only ignores hRTT.
    #[test]
    fn one_rule_baselines_ignore_the_other_rules() {
        let ps = paths(&[
            PathSpec::new(1, 1_000_000).rtt_ms(300).in_flight(2),
            PathSpec::new(2, 2_000_000).rtt_ms(100).in_flight(4),
            PathSpec::new(3, 1_000_000).rtt_ms(50).in_flight(9),
        ]);
        let hrtt = Adas::only(Rules::HrttOnly).select(T0, &meta(8), &ps);
        assert_eq!(hrtt, Choice::Path(3));
        let u = Adas::only(Rules::UtilizationOnly).select(T0, &meta(8), &ps);
        assert_eq!(u, Choice::Path(1));
        assert_eq!(Adas::default().select(T0, &meta(8), &ps), Choice::Path(2));
    }

    /// Case C: a loss on l2 halves its weight, so l1 takes the next packet although the
    /// original weights favoured l2; acknowledgements restore it gradually.
    #[test]
    fn case_c_loss_halves_the_weight_and_acks_restore_it() {
        let ps = paths(&[
            PathSpec::new(1, 1_000_000).rtt_ms(100).in_flight(2),
            PathSpec::new(2, 2_000_000).rtt_ms(100).in_flight(3),
        ]);
        let mut s = Adas::default();
        assert_eq!(s.select(T0, &meta(11), &ps), Choice::Path(2));
        s.on_feedback(T0, 2, 0, 1);
        assert_eq!(s.select(T0, &meta(11), &ps), Choice::Path(1));
        // A second loss within the same RTT is the same congestion event.
        s.on_feedback(T0, 2, 0, 1);
        assert!((s.scale(2) - 0.5).abs() < 1e-12);
        s.on_feedback(T0, 2, 30, 0);
        assert!((s.scale(2) - 0.8).abs() < 1e-12);
        s.on_feedback(T0, 2, 100, 0);
        assert_eq!(s.scale(2), 1.0);
    }

    #[test]
    fn rule_1_retransmissions_take_the_fastest_link() {
        let ps = paths(&[
            PathSpec::new(1, 1_000_000).rtt_ms(50).in_flight(50),
            PathSpec::new(2, 2_000_000).rtt_ms(100),
        ]);
        let mut m = meta(0);
        m.flow = Some(FlowMeta {
            id: 0,
            class: 0,
            hash: 0,
            new: false,
            pinned: None,
            inbound: None,
            retransmission: true,
            packets: 10,
        });
        assert_eq!(Adas::default().select(T0, &m, &ps), Choice::Path(1));
    }
}
