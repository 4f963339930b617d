//! What a relay lends: a rate (token bucket) and bytes per calendar month (UTC), the month's
//! count kept in a file so that a restart does not reset it.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A token bucket of `rate_bps` with a burst of `burst` bytes.
#[derive(Clone, Debug)]
pub struct RateCap {
    bytes_per_s: f64,
    burst: f64,
    tokens: f64,
    last: Duration,
}

impl RateCap {
    /// A bucket of `rate_bps`, its burst 50 ms of the rate (at least two 1500-byte
    /// datagrams), starting full at `now`.
    pub fn new(rate_bps: u64, now: Duration) -> RateCap {
        let bytes_per_s = rate_bps as f64 / 8.0;
        let burst = (bytes_per_s * 0.05).max(3000.0);
        RateCap {
            bytes_per_s,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Whether `bytes` may go at `now` (monotonic); takes them if so.
    pub fn take(&mut self, now: Duration, bytes: usize) -> bool {
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.bytes_per_s).min(self.burst);
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }
}

/// The calendar month (UTC) of a Unix time: months since January 1970.
pub fn month_of(unix: Duration) -> u32 {
    // Howard Hinnant's civil_from_days.
    let z = (unix.as_secs() / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    ((year - 1970) * 12 + month - 1) as u32
}

/// Bytes lent this month against a monthly cap, persisted in `file`.
#[derive(Debug)]
pub struct MonthlyCap {
    cap: u64,
    month: u32,
    used: u64,
    file: PathBuf,
    dirty: bool,
}

impl MonthlyCap {
    /// The cap of `cap` bytes a month, resuming this month's count from `file` (written as
    /// `month used`); a missing or unreadable file starts at zero.
    pub fn load(cap: u64, file: &Path, unix_now: Duration) -> MonthlyCap {
        let month = month_of(unix_now);
        let used = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| {
                let mut it = s.split_whitespace().map(str::parse::<u64>);
                match (it.next(), it.next()) {
                    (Some(Ok(m)), Some(Ok(u))) if m == u64::from(month) => Some(u),
                    _ => None,
                }
            })
            .unwrap_or(0);
        MonthlyCap {
            cap,
            month,
            used,
            file: file.to_owned(),
            dirty: false,
        }
    }

    /// Whether `bytes` more fit this month (a new month starts from zero); counts them if
    /// so.
    pub fn take(&mut self, unix_now: Duration, bytes: usize) -> bool {
        let month = month_of(unix_now);
        if month != self.month {
            self.month = month;
            self.used = 0;
            self.dirty = true;
        }
        if self.used + bytes as u64 > self.cap {
            return false;
        }
        self.used += bytes as u64;
        self.dirty = true;
        true
    }

    pub fn used(&self) -> u64 {
        self.used
    }

    /// Writes the count if it changed since the last save.
    pub fn save(&mut self) -> std::io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        if let Some(d) = self.file.parent() {
            std::fs::create_dir_all(d)?;
        }
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, format!("{} {}\n", self.month, self.used))?;
        std::fs::rename(&tmp, &self.file)?;
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_calendar_months() {
        assert_eq!(month_of(Duration::ZERO), 0);
        // 2026-11-27 and 2026-11-30 23:59:59 are month (2026-1970)*12+10; 2026-12-01 next.
        assert_eq!(month_of(Duration::from_secs(1_795_737_600)), 56 * 12 + 10);
        assert_eq!(month_of(Duration::from_secs(1_796_083_199)), 56 * 12 + 10);
        assert_eq!(month_of(Duration::from_secs(1_796_083_200)), 56 * 12 + 11);
    }

    #[test]
    fn the_rate_cap_passes_its_rate_and_no_more() {
        let mut c = RateCap::new(8_000_000, Duration::ZERO);
        let mut sent = 0;
        for ms in 0..1000 {
            while c.take(Duration::from_millis(ms), 1000) {
                sent += 1000;
            }
        }
        // 1 MB/s for a second, plus the 50 ms burst.
        assert!((1_000_000..=1_060_000).contains(&sent), "{sent}");
    }

    #[test]
    fn the_monthly_cap_survives_a_restart_and_resets_with_the_month() {
        let dir = std::env::temp_dir().join(format!("braid-cap-{}", std::process::id()));
        let file = dir.join("usage");
        let t = Duration::from_secs(1_795_737_600);
        let mut c = MonthlyCap::load(10_000, &file, t);
        assert!(c.take(t, 6_000));
        c.save().unwrap();
        let mut c = MonthlyCap::load(10_000, &file, t);
        assert_eq!(c.used(), 6_000);
        assert!(!c.take(t, 5_000), "over the cap");
        assert!(
            c.take(t + Duration::from_secs(5 * 86_400), 5_000),
            "a new month"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
