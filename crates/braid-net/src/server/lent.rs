//! The server's side of relays (BaPu §2's neighbouring APs, PRISM §3.3's community): a
//! relay's lender envelope is opened at the [`LenderGate`] (the relay's own key, from a
//! `[[relay]]` section), the datagram inside is handled as the gateway's own, and the
//! session's paths follow the relays: a path a relay carries for the first time joins the
//! live session with that relay as its lender (`Session::add_path`), and a relay that says
//! it leaves takes its paths out (`Session::remove_path`: what they had in flight goes to
//! the other paths, as in failover). A relay that vanishes says nothing: its paths fail by
//! the engine's liveness checks like any dead path, and come back when it does.
//!
//! Refused and counted (`drops.lent_refused`): every envelope the gate refuses (unknown,
//! revoked, forged, replayed, malformed), a relay carrying a session whose owner did not
//! authorize it, and a relay carrying a path another relay lends.

use std::collections::HashMap;
use std::ops::Range;

use braid_core::{Instant, LenderId, PathConfig, PathId, Session};
use braid_secure::lender::{Kind, LenderGate};
use braid_secure::{PrivateKey, PublicKey};

use super::{Server, MAX_PATHS};
use crate::config::{self, ServerConfig};
use crate::DaemonError;

/// The gate and the relays' names, for the logs.
pub(super) struct Lenders {
    gate: LenderGate,
    /// The server's static key, to authorize relays a re-read config adds.
    key: PrivateKey,
    names: HashMap<LenderId, String>,
}

impl Lenders {
    /// The gate for the config's `[[relay]]` sections; `None` when there are none.
    pub(super) fn new(cfg: &ServerConfig) -> Result<Option<Lenders>, DaemonError> {
        if cfg.relays.is_empty() {
            return Ok(None);
        }
        let key = config::load_private_key(&cfg.file, &cfg.private_key_file)?;
        let gate = LenderGate::new(&key, &[]).map_err(|e| setup(cfg, e.to_string()))?;
        let mut l = Lenders {
            gate,
            key,
            names: HashMap::new(),
        };
        l.apply(cfg)?;
        tracing::info!(relays = cfg.relays.len(), "relays authorized");
        Ok(Some(l))
    }

    /// Makes the gate follow `cfg`'s `[[relay]]` sections: each listed relay is authorized
    /// for its gateway's sessions (a known one keeps its replay window), and a relay marked
    /// `revoked` or no longer listed is revoked. Returns the relays revoked by this call.
    fn apply(&mut self, cfg: &ServerConfig) -> Result<Vec<LenderId>, DaemonError> {
        let mut keep = Vec::with_capacity(cfg.relays.len());
        for r in &cfg.relays {
            let owner = cfg
                .peers
                .iter()
                .find(|p| p.name == r.gateway)
                .map(|p| config::parse_public_key(&p.public_key))
                .ok_or_else(|| {
                    setup(
                        cfg,
                        format!("relay '{}': no gateway '{}'", r.name, r.gateway),
                    )
                })?
                .map_err(|e| setup(cfg, format!("gateway '{}': public_key: {e}", r.gateway)))?;
            let id = (self.gate)
                .authorize(&self.key, r.public_key, owner)
                .map_err(|e| setup(cfg, e.to_string()))?;
            self.names.insert(id, r.name.clone());
            if !r.revoked {
                keep.push(r.public_key);
            }
        }
        Ok(self.gate.revoke_all_but(&keep))
    }

    fn name(&self, id: LenderId) -> &str {
        self.names.get(&id).map_or("?", String::as_str)
    }
}

fn setup(cfg: &ServerConfig, m: String) -> DaemonError {
    DaemonError::Setup(format!("{}: {m}", cfg.file))
}

/// What to do with a datagram on a path, given who lends the path now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admit {
    /// Handle it.
    Accept,
    /// The path is not in the session: it joins, lent by this lender (or the gateway's).
    Join,
    /// A path of the session's start, carried by a relay for the first time: record it.
    Record,
    /// Refuse and count it.
    Refuse,
}

/// The rule: `current` is `None` when the path is not in the session, else who lends it;
/// `lender` who carried the datagram; `authorized` whether the session's owner authorized
/// that lender.
fn admit(current: Option<Option<LenderId>>, lender: Option<LenderId>, authorized: bool) -> Admit {
    match (current, lender) {
        (_, Some(_)) if !authorized => Admit::Refuse,
        (None, _) => Admit::Join,
        (Some(None), Some(_)) => Admit::Record,
        (Some(Some(now)), Some(l)) if now != l => Admit::Refuse,
        // The gateway's own datagrams are its own on any path; a relay on its own path.
        (Some(_), _) => Admit::Accept,
    }
}

fn in_session(s: &Session, path: PathId) -> bool {
    s.paths().iter().any(|p| p.id() == path)
}

impl Server {
    /// Opens a lender envelope: the carried datagram's place in it and its lender, or
    /// `None` when there is nothing more to do (refused, a registration, a leave).
    pub(super) fn unwrap_lent(&mut self, now: Instant, d: &[u8]) -> Option<(Range<usize>, u32)> {
        let Some(l) = self.lenders.as_mut() else {
            self.drops.lent_refused += 1;
            return None;
        };
        let opened = match l.gate.open(d) {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!(error = %e, "relay datagram refused");
                self.drops.lent_refused += 1;
                return None;
            }
        };
        match opened.kind {
            Kind::Data => Some((opened.datagram, opened.lender)),
            Kind::Register => {
                tracing::debug!(relay = l.name(opened.lender), "relay registered");
                None
            }
            Kind::Leave => {
                self.relay_left(now, opened.lender, "relay left");
                None
            }
        }
    }

    /// Whether session `id` takes a datagram on `path` carried by `lender` (`None`: the
    /// gateway's own); a path new to the session joins it here.
    pub(super) fn admit_path(
        &mut self,
        now: Instant,
        id: u32,
        path: PathId,
        lender: Option<u32>,
    ) -> bool {
        let owner = |l: u32| -> Option<PublicKey> {
            self.lenders.as_ref().and_then(|g| g.gate.owner(l).copied())
        };
        let authorized = lender.is_none_or(|l| {
            let Some(p) = self.peers.get(&id) else {
                return false;
            };
            p.owner.is_some() && p.owner == owner(l)
        });
        let Some(p) = self.peers.get_mut(&id) else {
            return false;
        };
        let current = in_session(&p.session, path).then(|| p.session.lender(path));
        let name = |l: Option<u32>| {
            l.map_or("the gateway".to_owned(), |l| {
                self.lenders
                    .as_ref()
                    .map_or("?".to_owned(), |g| g.name(l).to_owned())
            })
        };
        match admit(current, lender, authorized) {
            Admit::Accept => true,
            Admit::Record => {
                let ok = p.session.set_lender(path, lender).is_ok();
                if ok {
                    tracing::info!(gateway = %p.name, path, relay = name(lender), "relay carries the path");
                } else {
                    self.drops.lent_refused += 1;
                }
                ok
            }
            Admit::Join if path < MAX_PATHS => {
                match p.session.add_path(now, &PathConfig::learned(path), lender) {
                    Ok(()) => {
                        tracing::info!(gateway = %p.name, path, relay = name(lender), "path joined");
                        true
                    }
                    Err(e) => {
                        tracing::warn!(gateway = %p.name, path, error = %e, "path cannot join");
                        self.drops.lent_refused += u64::from(lender.is_some());
                        self.drops.engine_rejected += u64::from(lender.is_none());
                        false
                    }
                }
            }
            Admit::Join => {
                self.drops.engine_rejected += 1;
                false
            }
            Admit::Refuse => {
                tracing::debug!(gateway = %p.name, path, relay = name(lender), "relay not authorized for the path");
                self.drops.lent_refused += 1;
                false
            }
        }
    }

    /// Re-reads the config file's `[[relay]]` sections (on SIGHUP): relays added are
    /// authorized, and the paths of relays revoked or removed leave their sessions at once
    /// (their data fails over). A config that does not load changes nothing. Other sections
    /// need a restart.
    pub(super) fn reload_relays(&mut self, now: Instant) {
        let cfg = match ServerConfig::load(std::path::Path::new(&self.cfg.file)) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP: the config does not load; the relays stay as they were");
                return;
            }
        };
        let revoked = match self.lenders.as_mut() {
            Some(l) => l.apply(&cfg),
            None => Lenders::new(&cfg).map(|l| {
                self.lenders = l;
                Vec::new()
            }),
        };
        let revoked = match revoked {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP: the relays stay as they were");
                return;
            }
        };
        for &id in &revoked {
            self.relay_left(now, id, "relay revoked");
        }
        tracing::info!(
            relays = cfg.relays.len(),
            revoked_now = revoked.len(),
            "SIGHUP: relays re-read"
        );
        self.cfg.relays = cfg.relays;
    }

    /// Relay `lender` leaves (`why`, for the log): the paths it lends leave the sessions of
    /// its owner.
    fn relay_left(&mut self, now: Instant, lender: u32, why: &str) {
        let name = self
            .lenders
            .as_ref()
            .map_or("?".to_owned(), |g| g.name(lender).to_owned());
        for (id, p) in self.peers.iter_mut() {
            let lent: Vec<PathId> = (p.session.paths().iter().map(|x| x.id()))
                .filter(|&x| p.session.lender(x) == Some(lender))
                .collect();
            for path in lent {
                match p.session.remove_path(now, path) {
                    Ok(()) => {
                        tracing::info!(gateway = %p.name, path, relay = %name, "{why}; path removed");
                        if let Some(slot) = p.remotes.get_mut(usize::from(path)) {
                            *slot = None;
                        }
                        if self.touched.last() != Some(id) {
                            self.touched.push(*id);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(gateway = %p.name, path, relay = %name, error = %e, "{why}; path kept")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relays_join_record_and_are_refused_by_the_rule() {
        // An unauthorized relay is refused whatever the path.
        assert_eq!(admit(None, Some(7), false), Admit::Refuse);
        assert_eq!(admit(Some(None), Some(7), false), Admit::Refuse);
        // A path new to the session joins, lent or the gateway's own.
        assert_eq!(admit(None, Some(7), true), Admit::Join);
        assert_eq!(admit(None, None, true), Admit::Join);
        // A start path carried by a relay for the first time records the relay.
        assert_eq!(admit(Some(None), Some(7), true), Admit::Record);
        // The path's own relay and the gateway itself are accepted; another relay is not.
        assert_eq!(admit(Some(Some(7)), Some(7), true), Admit::Accept);
        assert_eq!(admit(Some(Some(7)), None, true), Admit::Accept);
        assert_eq!(admit(Some(Some(7)), Some(8), true), Admit::Refuse);
        assert_eq!(admit(Some(None), None, true), Admit::Accept);
    }
}
