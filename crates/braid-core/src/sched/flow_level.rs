//! Flow-level policies: every packet of a flow on one path, so no flow is ever reordered,
//! at the price of coarse load balance.
//!
//! - [`MinConnPath`] (PluriBus §6.1): a new flow goes to the path with the fewest active
//!   flows (connections not yet ended nor idle, as [`crate::flow`] counts them) and stays
//!   there; a flow whose reverse direction arrived on some path answers on
//!   that path, so a connection uses one path both ways, as connection-level striping over
//!   separately addressed uplinks does. PluriBus's "state-of-the-art for vehicular striping"
//!   baseline. §6.1 leaves ties open; they go to the path that would deliver the flow's
//!   first packet first (the delay-based scheduler's prediction, §4.3), never to the path
//!   listed first: on an idle bond nearly every flow is a tie. It places on every live
//!   path, loss-guarded or not: §6.1 has no loss guard, and the guard's reason (a lossy
//!   path slows every flow striped over it) does not hold when a flow keeps to one path.
//! - [`HashFlow`]: a flow goes to the path its 5-tuple hashes to (ECMP-style).
//!
//! A flow whose path stops being usable (for MinConnPath: live) is moved, once, to another.
//! Packets the flow table does not track (non-IP, or the table is full) go to the usable
//! (live) path with the fewest datagrams in flight.

use super::delay::{min_known_delay, predicted_delivery};
use super::{candidates, Choice, PacketMeta, Scheduler};
use crate::path::Path;
use crate::Instant;

fn usable(paths: &[Path], id: crate::PathId) -> bool {
    paths.iter().any(|p| p.id() == id && p.is_usable())
}

/// Live and not held by a metered budget (a held path would only make the packet wait;
/// `session/metering.rs`).
fn open(p: &Path) -> bool {
    p.is_live() && !p.is_metered_hold()
}

fn live(paths: &[Path], id: crate::PathId) -> bool {
    paths.iter().any(|p| p.id() == id && open(p))
}

/// Positions of the open paths, else of the live ones, else of all: MinConnPath's
/// candidates, loss-guarded or not.
fn live_candidates(paths: &[Path]) -> impl Iterator<Item = (usize, &Path)> {
    let any_open = paths.iter().any(open);
    let any_live = paths.iter().any(Path::is_live);
    paths.iter().enumerate().filter(move |(_, p)| {
        if any_open {
            open(p)
        } else {
            !any_live || p.is_live()
        }
    })
}

/// The candidate with the fewest datagrams in flight.
fn least_in_flight<'a>(
    candidates: impl Iterator<Item = (usize, &'a Path)>,
    paths: &[Path],
) -> Choice {
    let pick = candidates
        .min_by_key(|(_, p)| (p.unacked_datagrams(), p.id()))
        .map_or(0, |(i, _)| i);
    Choice::Path(paths[pick].id())
}

/// PluriBus's connection-level baseline.
#[derive(Clone, Copy, Debug, Default)]
pub struct MinConnPath;

impl Scheduler for MinConnPath {
    fn select(&mut self, now: Instant, packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        let Some(flow) = packet.flow else {
            return least_in_flight(live_candidates(paths), paths);
        };
        if let Some(p) = flow.pinned.filter(|&p| live(paths, p)) {
            return Choice::Path(p);
        }
        if let Some(p) = flow.inbound.filter(|&p| live(paths, p)) {
            return Choice::Path(p);
        }
        if packet.active_flows.len() != paths.len() {
            return least_in_flight(live_candidates(paths), paths);
        }
        // Fewest active flows; ties to the path that would deliver the packet first (the
        // delay-based scheduler's prediction, §4.3), so that an idle bond starts each
        // connection on its fastest path rather than on the first one listed.
        let min_known = min_known_delay(live_candidates(paths).map(|(_, p)| p));
        let pick = live_candidates(paths)
            .min_by_key(|(i, p)| {
                (
                    packet.active_flows[*i],
                    predicted_delivery(now, packet.wire_bytes, p, min_known),
                    p.id(),
                )
            })
            .map_or(0, |(i, _)| i);
        Choice::Path(paths[pick].id())
    }

    fn pins_flows(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "min-conn-path"
    }
}

/// A flow on the path its 5-tuple hashes to among the usable paths.
#[derive(Clone, Copy, Debug, Default)]
pub struct HashFlow;

impl Scheduler for HashFlow {
    fn select(&mut self, _now: Instant, packet: &PacketMeta<'_>, paths: &[Path]) -> Choice {
        let Some(flow) = packet.flow else {
            return least_in_flight(candidates(paths), paths);
        };
        if let Some(p) = flow.pinned.filter(|&p| usable(paths, p)) {
            return Choice::Path(p);
        }
        let n = candidates(paths).count().max(1) as u64;
        let k = (flow.hash % n) as usize;
        let pick = candidates(paths).nth(k).map_or(0, |(i, _)| i);
        Choice::Path(paths[pick].id())
    }

    fn pins_flows(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "hash-flow"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowMeta;
    use crate::sched::testing::{meta, paths, PathSpec, T0};

    fn flow(pinned: Option<u8>, inbound: Option<u8>, hash: u64) -> FlowMeta {
        FlowMeta {
            id: 0,
            class: 0,
            hash,
            new: pinned.is_none(),
            pinned,
            inbound,
            retransmission: false,
            packets: 1,
        }
    }

    #[test]
    fn min_conn_path_moves_off_a_metered_path_its_budget_holds() {
        let mut ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(75),
            PathSpec::new(1, 1_000_000).delay_ms(20),
        ]);
        ps[1].set_metered_hold(true);
        let mut s = MinConnPath;
        let mut m = meta(0);
        m.flow = Some(flow(None, None, 0));
        m.active_flows = &[3, 0];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(0));
        // A flow pinned to the held path goes to the open one rather than wait.
        m.flow = Some(flow(Some(1), None, 0));
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(0));
        // Nothing open: the live paths, held or not (the session makes the packet wait).
        ps[0].set_metered_hold(true);
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
    }

    #[test]
    fn min_conn_path_balances_new_flows_and_keeps_old_ones() {
        let mut ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(75),
            PathSpec::new(1, 1_000_000).delay_ms(20),
        ]);
        let mut s = MinConnPath;
        let mut m = meta(0);
        // Equal counts: the path that delivers first, whatever the order.
        m.flow = Some(flow(None, None, 0));
        m.active_flows = &[0, 0];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
        m.active_flows = &[1, 1];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
        m.active_flows = &[0, 1];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(0));
        m.active_flows = &[2, 1];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
        // The short path's queue (12 ms a datagram) past the 55 ms difference: the long
        // path delivers first.
        for _ in 0..5 {
            ps[1].send_for_test(T0, 1500);
        }
        m.active_flows = &[0, 0];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(0));
        // Pinned flows stay, even when the counts say otherwise.
        m.flow = Some(flow(Some(1), None, 0));
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
        // The reverse direction's path wins over balance.
        m.flow = Some(flow(None, Some(1), 0));
        m.active_flows = &[0, 5];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
        assert!(s.pins_flows());
        // The same paths listed the other way round: the same choices.
        let ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(20),
            PathSpec::new(1, 1_000_000).delay_ms(75),
        ]);
        m.flow = Some(flow(None, None, 0));
        m.active_flows = &[0, 0];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(0));
        m.active_flows = &[1, 0];
        assert_eq!(s.select(T0, &m, &ps), Choice::Path(1));
    }

    #[test]
    fn min_conn_path_keeps_using_a_loss_guarded_path() {
        let mut ps = paths(&[
            PathSpec::new(0, 1_000_000).delay_ms(75),
            PathSpec::new(1, 1_000_000).delay_ms(20),
        ]);
        ps[0].set_loss_for_test(0.005);
        ps[1].set_loss_for_test(0.05);
        crate::sched::guard::update(&mut ps, false);
        assert!(ps[1].is_loss_guarded());
        let mut m = meta(0);
        m.flow = Some(flow(None, None, 0));
        m.active_flows = &[0, 0];
        assert_eq!(MinConnPath.select(T0, &m, &ps), Choice::Path(1));
        m.flow = Some(flow(Some(1), None, 0));
        m.active_flows = &[];
        assert_eq!(MinConnPath.select(T0, &m, &ps), Choice::Path(1));
        // Hash-by-flow still leaves it aside.
        assert_eq!(HashFlow.select(T0, &m, &ps), Choice::Path(0));
    }

    #[test]
    fn a_flow_on_a_dead_path_moves() {
        let mut ps = paths(&[PathSpec::new(0, 1_000_000), PathSpec::new(1, 1_000_000)]);
        ps[1].set_usable_for_test(false);
        let mut m = meta(0);
        m.flow = Some(flow(Some(1), None, 0));
        assert_eq!(MinConnPath.select(T0, &m, &ps), Choice::Path(0));
        assert_eq!(HashFlow.select(T0, &m, &ps), Choice::Path(0));
    }

    #[test]
    fn hash_flow_is_stable_per_flow() {
        let ps = paths(&[
            PathSpec::new(0, 1),
            PathSpec::new(1, 1),
            PathSpec::new(2, 1),
        ]);
        let mut m = meta(0);
        for h in 0..6u64 {
            m.flow = Some(flow(None, None, h));
            assert_eq!(HashFlow.select(T0, &m, &ps), Choice::Path((h % 3) as u8));
        }
    }
}
