//! The metered uplinks' bytes this cap period, kept across restarts and crashes: a small
//! JSON file (`[interface] meter_state`, docs/daemon.md) written atomically (a temporary
//! file, fsync, rename) every [`SAVE_EVERY`] and at exit, read at start. A crash loses at
//! most the bytes of one save interval. A count from an earlier period starts over at 0.
//!
//! The engine counts each session's bytes per metered path (sent and received, as a
//! tariff does); the ledger adds them to what earlier sessions and runs used.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_core::metered::MeteredSettings;
use braid_core::PathId;
use serde::{Deserialize, Serialize};

use crate::config::metering::{cap_period, Metered};
use crate::config::GatewayConfig;

/// How often the counts are written: at most this much is lost to a crash (the issue asks
/// at least once a minute).
pub const SAVE_EVERY: Duration = Duration::from_secs(10);

/// The file's version field: a file of another version is refused, not misread.
const VERSION: u32 = 1;

/// The state file as written.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    version: u32,
    uplinks: Vec<SavedUplink>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedUplink {
    name: String,
    /// Start of the cap period the count belongs to (UNIX seconds; 0 without a cap).
    period_start: u64,
    used_bytes: u64,
}

/// One metered uplink's count.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    metering: Metered,
    /// The current cap period (UNIX seconds); `(0, u64::MAX)` without a cap.
    period: (u64, u64),
    /// Bytes counted before the current session's.
    base: u64,
    /// The current session's count when last read, and the part of it that belongs to an
    /// earlier period (the period turned during the session).
    session_seen: u64,
    session_mark: u64,
}

impl Entry {
    fn used(&self) -> u64 {
        self.base + self.session_seen.saturating_sub(self.session_mark)
    }
}

/// One metered uplink as `braid status` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UplinkCount {
    pub used_bytes: u64,
    pub cap_bytes: Option<u64>,
    /// The period's bounds, UNIX seconds (none without a cap).
    pub period: Option<(u64, u64)>,
}

/// The counts of a gateway's metered uplinks, by uplink position.
#[derive(Debug)]
pub struct Ledger {
    file: Option<PathBuf>,
    entries: Vec<Option<Entry>>,
    /// Changed since last written.
    dirty: bool,
}

impl Ledger {
    /// The ledger of `cfg`'s metered uplinks at `unix_s`, with the counts `cfg.meter_state`
    /// holds for the current periods. No file is read or written without a metered
    /// uplink. An unreadable file is an error naming it (starting from 0 would overspend
    /// the cap).
    pub fn open(cfg: &GatewayConfig, unix_s: u64) -> Result<Ledger, String> {
        let entries: Vec<Option<Entry>> = (cfg.uplinks.iter())
            .map(|u| {
                let m = u.metering?;
                Some(Entry {
                    name: u.name.clone(),
                    metering: m,
                    period: period_of(&m, unix_s),
                    base: 0,
                    session_seen: 0,
                    session_mark: 0,
                })
            })
            .collect();
        if entries.iter().all(Option::is_none) {
            return Ok(Ledger {
                file: None,
                entries,
                dirty: false,
            });
        }
        let mut ledger = Ledger {
            file: Some(cfg.meter_state.clone()),
            entries,
            dirty: true,
        };
        let saved = read(&cfg.meter_state)?;
        for s in saved.uplinks {
            let e = ledger
                .entries
                .iter_mut()
                .flatten()
                .find(|e| e.name == s.name);
            if let Some(e) = e.filter(|e| e.period.0 == s.period_start) {
                e.base = s.used_bytes;
            }
        }
        Ok(ledger)
    }

    /// The engine's settings for metered uplink `i` at `unix_s`: its cap less what this
    /// period used.
    pub fn settings(&self, i: usize, unix_s: u64) -> Option<MeteredSettings> {
        let e = self.entries.get(i)?.as_ref()?;
        Some(e.metering.settings(i as PathId, unix_s, e.used()))
    }

    /// Uplink `i`'s count, when it is metered.
    pub fn count(&self, i: usize) -> Option<UplinkCount> {
        let e = self.entries.get(i)?.as_ref()?;
        let cap = e.metering.monthly_cap_gb.map(|gb| (gb * 1e9) as u64);
        Some(UplinkCount {
            used_bytes: e.used(),
            cap_bytes: cap,
            period: cap.map(|_| e.period),
        })
    }

    /// The current session has counted `session_bytes` on uplink `i` so far.
    pub fn observe(&mut self, i: usize, session_bytes: u64) {
        if let Some(Some(e)) = self.entries.get_mut(i) {
            if session_bytes != e.session_seen {
                e.session_seen = session_bytes.max(e.session_seen);
                self.dirty = true;
            }
        }
    }

    /// The session ended (its last counts observed): a new one counts from 0.
    pub fn end_session(&mut self) {
        for e in self.entries.iter_mut().flatten() {
            e.base = e.used();
            e.session_seen = 0;
            e.session_mark = 0;
        }
    }

    /// Starts the periods that have ended by `unix_s` at 0. Returns the uplinks whose
    /// period turned, for the engine to be given their caps afresh.
    pub fn roll(&mut self, unix_s: u64) -> Vec<usize> {
        let mut turned = Vec::new();
        for (i, e) in self.entries.iter_mut().enumerate() {
            let Some(e) = e else { continue };
            if unix_s < e.period.1 {
                continue;
            }
            e.period = period_of(&e.metering, unix_s);
            e.base = 0;
            e.session_mark = e.session_seen;
            self.dirty = true;
            turned.push(i);
        }
        turned
    }

    /// Writes the counts if they changed: a temporary file beside the state file, synced,
    /// renamed over it (a crash leaves the old file or the new, never half of one).
    pub fn save(&mut self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        if !self.dirty {
            return Ok(());
        }
        let state = StateFile {
            version: VERSION,
            uplinks: (self.entries.iter().flatten())
                .map(|e| SavedUplink {
                    name: e.name.clone(),
                    period_start: e.period.0,
                    used_bytes: e.used(),
                })
                .collect(),
        };
        write_atomic(path, &serde_json::to_vec_pretty(&state).unwrap_or_default())
            .map_err(|e| format!("cannot write the metering state {}: {e}", path.display()))?;
        self.dirty = false;
        Ok(())
    }
}

fn period_of(m: &Metered, unix_s: u64) -> (u64, u64) {
    m.cap_reset_day
        .filter(|_| m.monthly_cap_gb.is_some())
        .map_or((0, u64::MAX), |d| cap_period(unix_s, d))
}

/// The state file's counts; none when it does not exist yet.
fn read(path: &Path) -> Result<StateFile, String> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(StateFile::default()),
        Err(e) => {
            return Err(format!(
                "cannot read the metering state {}: {e}",
                path.display()
            ))
        }
    };
    let s: StateFile = serde_json::from_slice(&text).map_err(|e| {
        format!(
            "metering state {} is damaged ({e}): fix it, or delete it to count this period from 0",
            path.display()
        )
    })?;
    if s.version != VERSION {
        return Err(format!(
            "metering state {} is version {}, this braid reads {VERSION}: delete it to count this period from 0",
            path.display(),
            s.version
        ));
    }
    Ok(s)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(d) = dir {
        std::fs::create_dir_all(d)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    // The rename itself survives a power cut once the folder is synced.
    if let Some(d) = dir {
        std::fs::File::open(d)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;
    /// 2026-11-27 00:00 UTC.
    const NOV27: u64 = 20_784 * DAY;

    fn config(state: &Path) -> GatewayConfig {
        let text = format!(
            "[interface]\nprivate_key_file = \"k\"\nplaintext = true\nmeter_state = \"{}\"\n\
             [server]\nendpoint = \"192.0.2.1:51820\"\npublic_key = \"x\"\n\
             [[uplink]]\ninterface = \"eth0\"\n\
             [[uplink]]\nname = \"lte\"\ninterface = \"wwan0\"\nmetered = true\n\
             monthly_cap_gb = 1\ncap_reset_day = 1\n",
            state.display()
        );
        GatewayConfig::parse("gw.toml", &text).unwrap()
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("braid-ledger-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d.join("state.json")
    }

    /// Counts of two sessions and a restart add up; the cap the engine gets is what is
    /// left of it.
    #[test]
    fn counts_survive_sessions_and_restarts() {
        let path = temp("restart");
        let cfg = config(&path);
        let mut l = Ledger::open(&cfg, NOV27).unwrap();
        assert_eq!(l.count(0), None);
        l.observe(1, 1000);
        l.end_session();
        l.observe(1, 500);
        assert_eq!(l.count(1).unwrap().used_bytes, 1500);
        l.save().unwrap();
        l.observe(1, 700);
        // A crash: the last 200 bytes were never saved.
        drop(l);
        let l = Ledger::open(&cfg, NOV27 + 3600).unwrap();
        let c = l.count(1).unwrap();
        assert_eq!(c.used_bytes, 1500);
        assert_eq!(c.cap_bytes, Some(1_000_000_000));
        assert_eq!(
            c.period,
            Some((cap_period(NOV27, 1).0, cap_period(NOV27, 1).1))
        );
        let s = l.settings(1, NOV27 + 3600).unwrap();
        assert_eq!(s.cap.unwrap().remaining_bytes, 1_000_000_000 - 1500);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    /// A new period starts at 0, both for a saved count and for a running session.
    #[test]
    fn a_new_period_starts_over() {
        let path = temp("period");
        let cfg = config(&path);
        let mut l = Ledger::open(&cfg, NOV27).unwrap();
        l.observe(1, 4000);
        l.save().unwrap();
        assert!(l.roll(NOV27 + DAY).is_empty());
        // December 1st.
        let dec1 = NOV27 + 4 * DAY;
        assert_eq!(l.roll(dec1), vec![1]);
        assert_eq!(l.count(1).unwrap().used_bytes, 0);
        l.observe(1, 4300);
        assert_eq!(l.count(1).unwrap().used_bytes, 300);
        // A file from November read in December counts nothing.
        let l = Ledger::open(&cfg, dec1).unwrap();
        assert_eq!(l.count(1).unwrap().used_bytes, 0);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    /// A damaged file stops the daemon with a line naming it and the fix.
    #[test]
    fn a_damaged_file_is_refused() {
        let path = temp("damaged");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{\"version\":1,\"uplinks\":[").unwrap();
        let e = Ledger::open(&config(&path), NOV27).unwrap_err();
        assert!(e.contains("damaged") && e.contains("delete it"), "{e}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
