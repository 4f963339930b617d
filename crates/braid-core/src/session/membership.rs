//! Paths that join and leave a live session: a neighbour's uplink lent for a while (BaPu
//! §2), a fellow traveller's cellular link (PRISM §3.3 "community"), a modem plugged into
//! the gateway.
//!
//! A path joins with [`Session::add_path`] and starts at once as a fresh path does at the
//! start of a session (hello or heartbeat, capacity learned). It leaves with
//! [`Session::remove_path`]: what it had in flight and the peer has not acknowledged is
//! handed to the other paths exactly as when a path fails (`session/failover.rs`), and
//! its state is dropped. Flows, the data sequence numbers and the resequencing buffer are
//! untouched, so the inner transport sees reordering, not a reset. Both ends are told by
//! their drivers (a relay that leaves tells the gateway and the server; one that vanishes
//! is failed by the liveness checks like any dead path, and its driver may then remove
//! it).
//!
//! A path that joins again under an id it had continues that id's send numbering, so a
//! peer that kept the path (a hot-plugged modem leaves only the gateway's session) sees a
//! gap, not sequence numbers running backwards. [`Session::add_path_unheard`] joins a path
//! that may have nobody at its far end yet (a relay that left, a modem that reappeared): it
//! carries heartbeats only until the peer answers on it.
//!
//! A path may carry who lends it, a [`LenderId`]. A revoked lender's paths are removed,
//! and every datagram that arrives later on a path it lent is refused and counted
//! ([`MembershipStats::revoked_refused`]); authenticating the lender itself is the
//! daemons' (braid-secure `lender`).

use crate::path::{Numbering, Path};
use crate::{Instant, PathConfig, PathId};

use super::Session;

/// Who lends a path: the short id of a relay's key (braid-secure `lender`). A path without
/// one belongs to the session's own gateway.
pub type LenderId = u32;

/// Most lenders remembered as revoked; the oldest is forgotten beyond it.
pub const MAX_REVOKED: usize = 256;

/// Why a path could not join or leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    #[error("path {0} is already in the session")]
    DuplicatePath(PathId),
    #[error("path {0} is not in the session")]
    UnknownPath(PathId),
    #[error("path {0} is the session's last: a session needs at least one path")]
    LastPath(PathId),
    #[error("lender {0:#010x} is revoked; authorize it again in the server's config")]
    Revoked(LenderId),
    #[error("paths cannot join or leave a session with metering (its plan is per path)")]
    Metered,
}

/// Counters of paths joining and leaving.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MembershipStats {
    pub paths_added: u64,
    pub paths_removed: u64,
    /// Datagrams refused because they arrived on a path of a revoked lender.
    pub revoked_refused: u64,
}

/// Who lends each path, and the lenders revoked.
pub(super) struct Membership {
    /// `lenders[id]`: who lends (or last lent) path `id`.
    lenders: Box<[Option<LenderId>; 256]>,
    /// `numbering[id]`: where path `id`'s send numbering stood when it left.
    numbering: Box<[Option<Numbering>; 256]>,
    revoked: Vec<LenderId>,
    pub(super) stats: MembershipStats,
}

impl Default for Membership {
    fn default() -> Membership {
        Membership {
            lenders: Box::new([None; 256]),
            numbering: Box::new([None; 256]),
            revoked: Vec::new(),
            stats: MembershipStats::default(),
        }
    }
}

impl Membership {
    /// Whether a datagram on `path` is refused: its lender is revoked. Counts it.
    pub(super) fn refuses(&mut self, path: PathId) -> Option<LenderId> {
        let lender = self.lenders[usize::from(path)]?;
        if self.revoked.contains(&lender) {
            self.stats.revoked_refused += 1;
            return Some(lender);
        }
        None
    }
}

impl Session {
    /// Adds a path to the live session at `now`, lent by `lender` (`None`: the gateway's
    /// own). The peer must add it too (its driver hears of it from the relay or from the
    /// first datagram, see the module's text).
    pub fn add_path(
        &mut self,
        now: Instant,
        path: &PathConfig,
        lender: Option<LenderId>,
    ) -> Result<(), MembershipError> {
        self.advance(now);
        if self.metering.is_some() {
            return Err(MembershipError::Metered);
        }
        if self.index[usize::from(path.id)].is_some() {
            return Err(MembershipError::DuplicatePath(path.id));
        }
        if let Some(l) = lender.filter(|l| self.membership.revoked.contains(l)) {
            return Err(MembershipError::Revoked(l));
        }
        self.inputs_changed();
        let capacity_interval = self.config.capacity_interval;
        let mut p = Path::new(path, capacity_interval, now);
        p.set_cc(self.config.path_cc);
        if let Some(n) = self.membership.numbering[usize::from(path.id)] {
            p.resume_numbering(n);
        }
        self.paths.push(p);
        self.ack_dirty.push(false);
        self.reindex();
        self.membership.lenders[usize::from(path.id)] = lender;
        self.membership.stats.paths_added += 1;
        self.sync_queues_capped();
        Ok(())
    }

    /// [`Session::add_path`] for a path that may have nobody at its far end yet: it
    /// carries heartbeats only, until the peer answers on it.
    pub fn add_path_unheard(
        &mut self,
        now: Instant,
        path: &PathConfig,
        lender: Option<LenderId>,
    ) -> Result<(), MembershipError> {
        self.add_path(now, path, lender)?;
        if let Some(p) = self.paths.last_mut() {
            p.mark_unheard();
        }
        Ok(())
    }

    /// Removes a path from the live session at `now`. What it carried that the peer has
    /// not acknowledged goes to the other paths, as for a failed path.
    pub fn remove_path(&mut self, now: Instant, id: PathId) -> Result<(), MembershipError> {
        self.advance(now);
        if self.metering.is_some() {
            return Err(MembershipError::Metered);
        }
        let pi = self.index[usize::from(id)]
            .map(usize::from)
            .ok_or(MembershipError::UnknownPath(id))?;
        if self.paths.len() == 1 {
            return Err(MembershipError::LastPath(id));
        }
        self.inputs_changed();
        self.recovery.on_path_failed(now);
        self.resend_in_flight(pi);
        self.membership.numbering[usize::from(id)] = Some(self.paths[pi].numbering());
        self.paths.remove(pi);
        self.ack_dirty.remove(pi);
        if self.ack_cursor >= self.paths.len() {
            self.ack_cursor = 0;
        }
        if !self.ack_dirty.contains(&true) {
            self.ack_pending_since = None;
        }
        let freed = self.failover.forget(pi);
        for packet in freed {
            self.recycle(packet);
        }
        self.scheduling.forget(pi);
        if self.config_due == Some(id) {
            self.config_due = None;
        }
        self.reindex();
        self.membership.stats.paths_removed += 1;
        Ok(())
    }

    /// Revokes `lender` at `now`: its paths leave the session (their in-flight data resent
    /// on the others), it cannot lend again, and later datagrams on its paths are refused
    /// and counted. Returns the paths removed. The session's last path stays (refusing
    /// all its datagrams) rather than leave the session without one.
    pub fn revoke_lender(&mut self, now: Instant, lender: LenderId) -> Vec<PathId> {
        if !self.membership.revoked.contains(&lender) {
            if self.membership.revoked.len() >= MAX_REVOKED {
                self.membership.revoked.remove(0);
            }
            self.membership.revoked.push(lender);
        }
        let lent: Vec<PathId> = (self.paths.iter().map(Path::id))
            .filter(|&id| self.membership.lenders[usize::from(id)] == Some(lender))
            .collect();
        lent.into_iter()
            .filter(|&id| self.remove_path(now, id).is_ok())
            .collect()
    }

    /// Records that `lender` lends path `id` (`None`: the gateway's own), for the paths a
    /// session starts with.
    pub fn set_lender(
        &mut self,
        id: PathId,
        lender: Option<LenderId>,
    ) -> Result<(), MembershipError> {
        self.index[usize::from(id)].ok_or(MembershipError::UnknownPath(id))?;
        if let Some(l) = lender.filter(|l| self.membership.revoked.contains(l)) {
            return Err(MembershipError::Revoked(l));
        }
        self.membership.lenders[usize::from(id)] = lender;
        Ok(())
    }

    /// Who lends path `id`; `None` for the gateway's own paths and unknown ones.
    pub fn lender(&self, id: PathId) -> Option<LenderId> {
        self.index[usize::from(id)]?;
        self.membership.lenders[usize::from(id)]
    }

    pub fn membership_stats(&self) -> MembershipStats {
        self.membership.stats
    }

    /// Rebuilds `index` from `paths`.
    fn reindex(&mut self) {
        self.index = [None; 256];
        for (i, p) in self.paths.iter().enumerate() {
            // At most 256 distinct ids, so the position fits in a u8.
            self.index[usize::from(p.id())] = Some(i as u8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, HandleError, Role};

    fn session(ids: &[PathId]) -> Session {
        let paths: Vec<PathConfig> = ids.iter().map(|&id| PathConfig::learned(id)).collect();
        Session::new(Config::default(), Role::Server, &paths, Instant::ZERO).unwrap()
    }

    #[test]
    fn paths_join_and_leave_with_their_lenders() {
        let now = Instant::from_millis(10);
        let mut s = session(&[0, 1]);
        s.add_path(now, &PathConfig::learned(7), Some(42)).unwrap();
        assert_eq!(s.lender(7), Some(42));
        assert_eq!(s.lender(0), None);
        assert_eq!(
            s.add_path(now, &PathConfig::learned(7), None),
            Err(MembershipError::DuplicatePath(7))
        );
        s.remove_path(now, 0).unwrap();
        let ids: Vec<PathId> = s.paths().iter().map(Path::id).collect();
        assert_eq!(ids, vec![1, 7]);
        assert_eq!(s.remove_path(now, 0), Err(MembershipError::UnknownPath(0)));
        s.remove_path(now, 1).unwrap();
        assert_eq!(s.remove_path(now, 7), Err(MembershipError::LastPath(7)));
        let stats = s.membership_stats();
        assert_eq!((stats.paths_added, stats.paths_removed), (1, 2));
    }

    #[test]
    fn a_revoked_lender_cannot_lend_again_and_its_datagrams_are_refused() {
        let now = Instant::from_millis(10);
        let mut s = session(&[0]);
        s.add_path(now, &PathConfig::learned(3), Some(9)).unwrap();
        assert_eq!(s.revoke_lender(now, 9), vec![3]);
        assert_eq!(
            s.add_path(now, &PathConfig::learned(4), Some(9)),
            Err(MembershipError::Revoked(9))
        );
        // A datagram on the revoked path: a gateway's heartbeat on path 3.
        let mut gw = Session::new(
            Config::default(),
            Role::Gateway,
            &[PathConfig::learned(0), PathConfig::learned(3)],
            Instant::ZERO,
        )
        .unwrap();
        let mut buf = vec![0; gw.transmit_buffer_len()];
        let mut refused = 0;
        while let Some(t) = gw.poll_transmit(now, &mut buf) {
            if let Err(HandleError::Revoked { path, lender }) =
                s.handle_datagram(now, t.path, &buf[..t.len])
            {
                assert_eq!((path, lender), (3, 9));
                refused += 1;
            }
        }
        assert!(refused > 0);
        assert_eq!(s.membership_stats().revoked_refused, refused);
    }

    #[test]
    fn a_path_that_joins_again_continues_its_numbering_and_an_unheard_one_waits() {
        let mut now = Instant::from_millis(10);
        let mut gw = Session::new(
            Config::default(),
            Role::Gateway,
            &[PathConfig::learned(0), PathConfig::learned(1)],
            Instant::ZERO,
        )
        .unwrap();
        let mut buf = vec![0; gw.transmit_buffer_len()];
        for _ in 0..20 {
            now += std::time::Duration::from_millis(50);
            gw.handle_timeout(now);
            while gw.poll_transmit(now, &mut buf).is_some() {}
        }
        let numbering = |s: &Session| {
            let p = s.paths().iter().find(|p| p.id() == 1).unwrap();
            (p.numbering(), p.is_live())
        };
        let (before, _) = numbering(&gw);
        let fresh = Path::new(&PathConfig::learned(1), gw.config().capacity_interval, now);
        assert_ne!(before, fresh.numbering(), "the path sent something");
        gw.remove_path(now, 1).unwrap();
        gw.add_path_unheard(now, &PathConfig::learned(1), None)
            .unwrap();
        let (after, live) = numbering(&gw);
        assert_eq!(after, before, "the numbering continues");
        assert!(!live, "an unheard path waits for the peer");
        // A path never seen before starts afresh and optimistic.
        gw.add_path(now, &PathConfig::learned(2), None).unwrap();
        let p = gw.paths().iter().find(|p| p.id() == 2).unwrap();
        assert!(p.is_live());
    }
}
