//! A gateway's metered uplinks (`[[uplink]] metered`, `cost_per_gb`, `monthly_cap_gb`,
//! `cap_reset_day`; docs/daemon.md): their checks, and the cap's period on the calendar
//! (UTC), which the engine, having no calendar, gets as bytes left and time left.

use std::time::Duration;

use braid_core::metered::{CapPace, MeteredSettings};

/// A metered uplink's settings as written.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Metered {
    pub cost_per_gb: f64,
    pub monthly_cap_gb: Option<f64>,
    /// Day of the month (1 to 31; past a short month's end, its last day) on which the
    /// cap starts over, at 00:00 UTC.
    pub cap_reset_day: Option<u8>,
}

/// Checks one uplink's metering keys; the error is one line naming the key.
pub fn check(
    name: &str,
    metered: bool,
    cost_per_gb: Option<f64>,
    monthly_cap_gb: Option<f64>,
    cap_reset_day: Option<u8>,
) -> Result<Option<Metered>, String> {
    let key = if cost_per_gb.is_some() {
        Some("cost_per_gb")
    } else if monthly_cap_gb.is_some() {
        Some("monthly_cap_gb")
    } else if cap_reset_day.is_some() {
        Some("cap_reset_day")
    } else {
        None
    };
    if !metered {
        return match key {
            Some(k) => Err(format!(
                "uplink '{name}': {k} is set but metered is not: add metered = true"
            )),
            None => Ok(None),
        };
    }
    let cost = cost_per_gb.unwrap_or(0.0);
    if !(cost.is_finite() && cost >= 0.0) {
        return Err(format!(
            "uplink '{name}': cost_per_gb = {cost}: expected a price of 0 or more per GB"
        ));
    }
    if let Some(cap) = monthly_cap_gb {
        if !(cap.is_finite() && cap > 0.0) {
            return Err(format!(
                "uplink '{name}': monthly_cap_gb = {cap}: expected a number of GB above 0"
            ));
        }
    }
    match (monthly_cap_gb, cap_reset_day) {
        (Some(_), None) => Err(format!(
            "uplink '{name}': monthly_cap_gb needs cap_reset_day, the day of the month (1 to 31) the cap starts over"
        )),
        (None, Some(_)) => Err(format!(
            "uplink '{name}': cap_reset_day is set without monthly_cap_gb: add the cap or remove the day"
        )),
        (_, Some(d)) if !(1..=31).contains(&d) => Err(format!(
            "uplink '{name}': cap_reset_day = {d}: expected a day of the month, 1 to 31"
        )),
        _ => Ok(Some(Metered {
            cost_per_gb: cost,
            monthly_cap_gb,
            cap_reset_day,
        })),
    }
}

impl Metered {
    /// The engine's settings for path `id` at `unix_s` (seconds since 1970, UTC), with
    /// `used_bytes` of the cap already spent this period.
    pub fn settings(
        &self,
        id: braid_core::PathId,
        unix_s: u64,
        used_bytes: u64,
    ) -> MeteredSettings {
        let cap = self
            .monthly_cap_gb
            .zip(self.cap_reset_day)
            .map(|(gb, day)| {
                let (_, end) = cap_period(unix_s, day);
                CapPace {
                    remaining_bytes: ((gb * 1e9) as u64).saturating_sub(used_bytes),
                    period_left: Duration::from_secs(end.saturating_sub(unix_s)),
                }
            });
        MeteredSettings {
            id,
            cost_per_gb: self.cost_per_gb,
            cap,
        }
    }
}

/// The cap period holding `unix_s`: from the latest reset (day `day` of a month, 00:00
/// UTC, the month's last day where it is shorter) to the next, both in seconds since 1970.
pub fn cap_period(unix_s: u64, day: u8) -> (u64, u64) {
    let days = (unix_s / 86_400) as i64;
    let (y, m, _) = civil_from_days(days);
    let reset = |y: i64, m: u32| -> u64 {
        let d = u32::from(day).min(days_in_month(y, m));
        (days_from_civil(y, m, d) * 86_400) as u64
    };
    let prev = |y: i64, m: u32| if m == 1 { (y - 1, 12) } else { (y, m - 1) };
    let next = |y: i64, m: u32| if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    let this = reset(y, m);
    if unix_s >= this {
        let (ny, nm) = next(y, m);
        (this, reset(ny, nm))
    } else {
        let (py, pm) = prev(y, m);
        (reset(py, pm), this)
    }
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    #[test]
    fn the_period_runs_from_the_last_reset_day_to_the_next() {
        // 2026-11-27 12:00 UTC; 2026-11-15 is day 20772, 2026-12-15 day 20802.
        let now = 20_784 * DAY + 12 * 3600;
        assert_eq!(civil_from_days(20_784), (2026, 11, 27));
        assert_eq!(cap_period(now, 15), (20_772 * DAY, 20_802 * DAY));
        // Before this month's reset day: from last month's.
        assert_eq!(cap_period(now, 28), (20_754 * DAY, 20_785 * DAY));
        // Day 31 in a 30-day month is its last day; February 2027 has 28.
        let (start, end) = cap_period(now, 31);
        assert_eq!(civil_from_days((start / DAY) as i64), (2026, 10, 31));
        assert_eq!(civil_from_days((end / DAY) as i64), (2026, 11, 30));
        let feb = days_from_civil(2027, 2, 10) as u64 * DAY;
        let (_, end) = cap_period(feb, 31);
        assert_eq!(civil_from_days((end / DAY) as i64), (2027, 2, 28));
    }

    #[test]
    fn bad_keys_get_one_line_naming_them() {
        let e = check("lte", true, None, Some(10.0), None).unwrap_err();
        assert!(e.contains("cap_reset_day") && !e.contains('\n'), "{e}");
        let e = check("lte", true, Some(-1.0), None, None).unwrap_err();
        assert!(e.contains("cost_per_gb = -1"), "{e}");
        let e = check("lte", false, Some(1.0), None, None).unwrap_err();
        assert!(e.contains("metered = true"), "{e}");
        let e = check("lte", true, None, Some(10.0), Some(0)).unwrap_err();
        assert!(e.contains("cap_reset_day = 0"), "{e}");
        let e = check("lte", true, None, None, Some(3)).unwrap_err();
        assert!(e.contains("without monthly_cap_gb"), "{e}");
        let m = check("lte", true, Some(5.0), Some(10.0), Some(1))
            .unwrap()
            .unwrap();
        let s = m.settings(1, 20_784 * DAY, 4_000_000_000);
        let cap = s.cap.unwrap();
        assert_eq!(cap.remaining_bytes, 6_000_000_000);
        assert_eq!(cap.period_left, Duration::from_secs(4 * DAY));
        assert_eq!(check("eth", false, None, None, None), Ok(None));
    }
}
