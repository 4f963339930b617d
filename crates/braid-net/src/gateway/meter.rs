//! The gateway's metered uplinks across sessions and restarts: each session's counts go
//! into the [`Ledger`], every new session is given what is left of each cap, a cap
//! period's turn starts the engine's cap afresh, and the ledger is saved every
//! [`crate::meter_ledger::SAVE_EVERY`] and at exit.

use braid_core::{Instant, MeteredStats, PathId, Session};

use super::Gateway;
use crate::clock::Clock;
use crate::meter_ledger::{Ledger, SAVE_EVERY};
use crate::status::MeterStatus;

impl Gateway {
    /// Replaces the engine (`None`: no session): what the old one counted stays in the
    /// ledger, and the new one's caps are what this period left of them.
    pub(super) fn replace_session(&mut self, session: Option<Session>, now: Instant) {
        if let Some(s) = &self.session {
            observe(&mut self.meter, &s.stats().metered);
        }
        self.meter.end_session();
        self.session = session;
        self.give_caps(now, None);
    }

    /// Tells the engine the caps left (of `only` that uplink, or of all).
    pub(super) fn give_caps(&mut self, now: Instant, only: Option<usize>) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let unix_s = Clock::unix_time().as_secs();
        for i in 0..self.uplinks.len() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            if let Some(m) = self.meter.settings(i, unix_s) {
                s.set_cap(now, i as PathId, m.cap);
            }
        }
    }

    /// With each status snapshot: the session's counts into the ledger, a new cap period
    /// where one began, and the ledger saved when due.
    pub(super) fn meter_tick(&mut self, now: Instant, metered: &[MeteredStats]) {
        observe(&mut self.meter, metered);
        for i in self.meter.roll(Clock::unix_time().as_secs()) {
            tracing::info!(uplink = %self.uplinks[i].cfg.name, "a new cap period began");
            self.give_caps(now, Some(i));
        }
        if now >= self.meter_saved + SAVE_EVERY {
            self.meter_saved = now;
            self.save_meter();
        }
    }

    /// Writes the ledger (at exit, and every save interval); a failure is logged, since a
    /// full disk should not take the tunnel down.
    pub(super) fn save_meter(&mut self) {
        if let Some(s) = &self.session {
            observe(&mut self.meter, &s.stats().metered);
        }
        if let Err(e) = self.meter.save() {
            tracing::error!(error = %e, "metering state not saved");
        }
    }

    /// Uplink `i`'s line in the status, when it is metered.
    pub(super) fn meter_status(&self, i: usize, metered: &[MeteredStats]) -> Option<MeterStatus> {
        let c = self.meter.count(i)?;
        let e = metered.iter().find(|m| usize::from(m.id) == i);
        let projected = c.period.and_then(|(start, end)| {
            let unix_s = Clock::unix_time().as_secs();
            let elapsed = unix_s.saturating_sub(start);
            (elapsed > 0)
                .then(|| (c.used_bytes as f64 * (end - start) as f64 / elapsed as f64) as u64)
        });
        Some(MeterStatus {
            period_bytes: c.used_bytes,
            cap_bytes: c.cap_bytes,
            period_start: c.period.map(|p| p.0),
            period_end: c.period.map(|p| p.1),
            projected_bytes: projected,
            budget_bytes: e.map_or(0, |e| e.budget_bytes),
            interval_sent_bytes: e.map_or(0, |e| e.interval_sent_bytes),
            held: e.is_some_and(|e| e.held),
            throttled_ms: e.map_or(0.0, |e| e.throttled_ms),
        })
    }
}

/// A session's counts (sent and received on each metered path) into the ledger.
fn observe(ledger: &mut Ledger, metered: &[MeteredStats]) {
    for m in metered {
        ledger.observe(usize::from(m.id), m.sent_bytes + m.received_bytes);
    }
}
