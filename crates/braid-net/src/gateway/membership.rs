//! The gateway's paths joining and leaving its live session (braid-core
//! `session/membership.rs`): a relay that says it leaves, and uplinks whose interface
//! disappears or goes down (a modem unplugged) and comes back.
//!
//! A path leaves with `Session::remove_path`, so what it had in flight is resent on the
//! others at once, as in failover, instead of after the liveness timeout. It joins again
//! with `Session::add_path_unheard`: heartbeats only, until the server answers on it. An
//! uplink rejoins when its link is back and its socket bound; a relay's path after
//! [`REJOIN_HOLD`], whether the relay is back or not (the gateway cannot know: a relay that
//! is not there simply never answers, as a relay that vanished).
//!
//! A relay's leave is its lender envelope of kind leave from the relay's address. The
//! gateway cannot check the relay's tag (only the server shares its key), so a forged one
//! from that address costs at most a failover and [`REJOIN_HOLD`] without the path.

use std::time::Duration;

use braid_core::{Instant, PathConfig, PathId, Session};
use braid_secure::lender::{Kind, LENDER_TYPE};

use super::Gateway;
use crate::config;

/// How long a relay's path stays out after the relay said it leaves.
pub(super) const REJOIN_HOLD: Duration = Duration::from_secs(1);

/// Whether `d`, from `from` on an uplink through the relay at `relay`, is that relay's
/// word that it leaves. Other lender envelopes (registrations) are the relay's too and
/// carry nothing for the gateway: `Some(false)`. `None`: not the relay's own.
pub(super) fn relay_says(
    relay: Option<std::net::SocketAddr>,
    from: std::net::SocketAddr,
    d: &[u8],
) -> Option<bool> {
    if relay != Some(from) || d.first() != Some(&LENDER_TYPE) {
        return None;
    }
    Some(d.get(1) == Some(&(Kind::Leave as u8)))
}

/// The engine's configuration of uplink `i`'s path: its hints, else learned.
pub(super) fn path_config(u: &config::Uplink, i: usize) -> PathConfig {
    let learned = PathConfig::learned(i as PathId);
    PathConfig {
        tx_capacity_bps: u.capacity_bps.unwrap_or(learned.tx_capacity_bps),
        rx_capacity_bps: u
            .down_capacity_bps
            .or(u.capacity_bps)
            .unwrap_or(learned.rx_capacity_bps),
        ..learned
    }
}

fn has_path(s: &Session, path: PathId) -> bool {
    s.paths().iter().any(|p| p.id() == path)
}

impl Gateway {
    /// Uplink `i`'s path leaves the session (`why` for the log).
    pub(super) fn leave_path(&mut self, i: usize, now: Instant, why: &str) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let path = i as PathId;
        if !has_path(s, path) {
            return;
        }
        let name = &self.uplinks[i].cfg.name;
        match s.remove_path(now, path) {
            Ok(()) => tracing::info!(uplink = %name, why, "path left the session"),
            Err(e) => tracing::warn!(uplink = %name, why, error = %e, "path stays"),
        }
    }

    /// Uplink `i`'s path joins the session again, unheard, if its socket is bound.
    pub(super) fn join_path(&mut self, i: usize, now: Instant) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let path = i as PathId;
        let u = &self.uplinks[i];
        if has_path(s, path) || self.sockets[i].is_none() || !u.link_up {
            return;
        }
        match s.add_path_unheard(now, &path_config(&u.cfg, i), None) {
            Ok(()) => tracing::info!(uplink = %u.cfg.name, "path joins the session"),
            Err(e) => tracing::warn!(uplink = %u.cfg.name, error = %e, "path cannot join"),
        }
    }

    /// The relay of uplink `i` said it leaves.
    pub(super) fn relay_left(&mut self, i: usize, now: Instant) {
        self.leave_path(i, now, "relay left");
        self.uplinks[i].rejoin_at = Some(now + REJOIN_HOLD);
    }

    /// Relays' paths whose hold is over join again. The next such instant.
    pub(super) fn rejoin_due(&mut self, now: Instant) -> Instant {
        let mut next = Instant::MAX;
        for i in 0..self.uplinks.len() {
            match self.uplinks[i].rejoin_at {
                Some(t) if t <= now => {
                    self.uplinks[i].rejoin_at = None;
                    self.join_path(i, now);
                }
                Some(t) => next = next.min(t),
                None => {}
            }
        }
        next
    }

    /// Whether uplink `i`'s path is in the session.
    pub(super) fn in_session(&self, i: usize) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| has_path(s, i as PathId))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_relays_own_envelopes_are_its_word() {
        let relay: std::net::SocketAddr = "192.0.2.1:7000".parse().unwrap();
        let other: std::net::SocketAddr = "192.0.2.9:7000".parse().unwrap();
        let mut leave = [0u8; braid_secure::lender::LENDER_OVERHEAD];
        leave[0] = LENDER_TYPE;
        leave[1] = Kind::Leave as u8;
        let mut register = leave;
        register[1] = Kind::Register as u8;
        assert_eq!(relay_says(Some(relay), relay, &leave), Some(true));
        assert_eq!(relay_says(Some(relay), relay, &register), Some(false));
        assert_eq!(relay_says(Some(relay), other, &leave), None);
        assert_eq!(relay_says(None, relay, &leave), None);
        // The server's datagrams forwarded by the relay are the session's.
        assert_eq!(relay_says(Some(relay), relay, &[1, 2, 0, 0]), None);
        assert_eq!(relay_says(Some(relay), relay, &[]), None);
    }
}
