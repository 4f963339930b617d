//! What a session is told about its metered paths: which paths cost what, the utility of
//! the traffic, and the data cap left on each metered path (the daemons turn a monthly cap
//! and its reset day into bytes left and time left; the engine has no calendar).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Cost, ModelError, PredictorKind, Utility, DEFAULT_INTERVAL};
use crate::PathId;

/// Metering of one session ([`crate::Config::metering`]); paths it does not list are
/// cheap (free and never throttled).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MeteringConfig {
    /// The scheduling interval (oSCTP §III-B: 1 s).
    pub interval: Duration,
    /// What throughput is worth (oSCTP §III-A).
    pub utility: Utility,
    /// How each cheap path's next interval is predicted.
    pub predictor: PredictorKind,
    /// The metered paths.
    pub paths: Vec<MeteredPath>,
    /// Keep a bounded log of each interval's budgets ([`IntervalRecord`]), for
    /// `osctp-fig16` and `osctp-table1`.
    pub record_intervals: bool,
    /// A gateway tells the server its metered paths (the Hello's metering option), and a
    /// server without metering of its own budgets its sends on them with the same model.
    pub announce: bool,
    /// Each traffic class's own utility, by class index (0 the traffic no class matches,
    /// `i + 1` the session's `classes[i]`), where some class sets a target or a utility:
    /// each class then gets its own budget on the metered paths, within the session's
    /// ([`MeteringSection::class_utilities`]). Empty: one budget for all the traffic.
    pub classes: Vec<Utility>,
    /// Which flows each of `classes[1..]` takes, when those are not the session's own
    /// traffic classes: a server budgets its downloads by the classes of the gateway's
    /// Hello (`MeteredClassesOpt`). `None`: the session's classes.
    pub class_matches: Option<Vec<crate::class::FlowMatch>>,
}

impl Default for MeteringConfig {
    fn default() -> Self {
        MeteringConfig {
            interval: DEFAULT_INTERVAL,
            utility: Utility::Linear { weight: 0.0 },
            predictor: PredictorKind::BRAID,
            paths: Vec::new(),
            record_intervals: false,
            announce: false,
            classes: Vec::new(),
            class_matches: None,
        }
    }
}

/// One metered path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeteredPath {
    pub id: PathId,
    pub cost: Cost,
    /// The data cap left, paced so that it lasts its period.
    #[serde(default)]
    pub cap: Option<CapPace>,
}

/// A data cap's remainder: `remaining_bytes` may be sent and received in the
/// `period_left` from the session's start; each end paces what it sends on the path at
/// what is left over the time left, so that the cap lasts the period, and sends nothing
/// once less than a datagram is left.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapPace {
    pub remaining_bytes: u64,
    pub period_left: Duration,
}

/// One interval of one path, as logged when [`MeteringConfig::record_intervals`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct IntervalRecord {
    pub path: PathId,
    pub metered: bool,
    /// Seconds since the session started, at the interval's start, and its length.
    pub start_s: f64,
    pub length_s: f64,
    /// Bytes the model gave a metered path for the interval (0 for a cheap one).
    pub budget_bytes: u64,
    /// Bytes the path sent in it, and those the peer acknowledged (delivered).
    pub sent_bytes: u64,
    pub delivered_bytes: u64,
    /// A cheap path's rate predicted for it, bit/s (0 before the first prediction).
    pub predicted_bps: f64,
}

impl MeteringConfig {
    /// Checks the utility, the costs, the predictor and the interval.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.interval.is_zero() {
            return Err(ModelError::Interval);
        }
        self.utility.validate()?;
        self.classes.iter().try_for_each(Utility::validate)?;
        self.predictor.validate()?;
        self.paths.iter().try_for_each(|p| p.cost.validate())
    }

    /// The metered path `id`, if it is one.
    pub fn path(&self, id: PathId) -> Option<&MeteredPath> {
        self.paths.iter().find(|p| p.id == id)
    }
}

/// What a traffic's throughput is worth, as a user says it: with a target rate, `log`
/// (oSCTP's Strategy 1: the metered link tops the cheap ones up towards the target as far
/// as its price allows) or `threshold` (the target and no more, whatever the price);
/// `linear`, the default without a target, carries all the traffic on the metered links
/// that the cheap ones cannot (paced by a cap, if one is set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UtilityKind {
    #[default]
    Log,
    Threshold,
    Linear,
}

/// A user's settings for one metered path (the daemons' `[[uplink]]`, a scenario's
/// `[[path]]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeteredSettings {
    pub id: PathId,
    /// Price per GB (10^9 bytes), in any currency: only ratios matter.
    pub cost_per_gb: f64,
    pub cap: Option<CapPace>,
}

/// `[engine.metering]` of a scenario or a daemon's config: the traffic's target and the
/// model's interval (oSCTP §III-A, §IV-F). Without it, metered paths carry whatever the
/// cheap ones cannot, paced by their caps. Traffic classes may add targets of their own
/// (`[[engine.class]] target_mbps`): the metered budget is the session's, for the sum.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeteringSection {
    /// The total rate the traffic wants, Mbit/s.
    pub target_mbps: Option<f64>,
    /// `log` (default), `threshold` or `linear`.
    #[serde(default)]
    pub utility: UtilityKind,
    /// How cheap paths' next interval is predicted (default braid's).
    pub predictor: Option<PredictorKind>,
    /// The scheduling interval, ms (default 1000).
    pub interval_ms: Option<f64>,
    /// Log every interval's budgets and bytes per path (for the osctp benchmarks).
    #[serde(default)]
    pub record_intervals: bool,
    /// The gateway tells the server its metered paths and the server budgets downloads on
    /// them from that ([`MeteringConfig::announce`]); a gateway daemon always does. In a
    /// scenario, the server then takes no metering settings of its own.
    #[serde(default)]
    pub announce: bool,
}

impl MeteringSection {
    /// The session's metering of `paths` with the targets of `classes` added, or `None`
    /// when there is nothing to meter and nothing asked.
    pub fn config(
        section: Option<&MeteringSection>,
        classes: &[crate::class::ClassConfig],
        paths: &[MeteredSettings],
    ) -> Option<MeteringConfig> {
        let class_target: Option<f64> = classes
            .iter()
            .filter_map(|c| c.target_mbps)
            .fold(None, |a, t| Some(a.unwrap_or(0.0) + t));
        if paths.is_empty() && section.is_none() {
            return None;
        }
        let s = section.cloned().unwrap_or_default();
        let target = match (s.target_mbps, class_target) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        let kind = if s.target_mbps.is_some() {
            s.utility
        } else {
            (classes.iter().find_map(|c| c.utility)).unwrap_or(s.utility)
        };
        let mut c = MeteringConfig::from_settings(target.map(|m| m * 1e6), kind, paths);
        if let Some(p) = s.predictor {
            c.predictor = p;
        }
        if let Some(v) = s.interval_ms {
            c.interval =
                Duration::from_secs_f64(if v.is_finite() { v.max(0.0) } else { 0.0 } / 1e3);
        }
        c.record_intervals = s.record_intervals;
        c.announce = s.announce;
        c.classes = MeteringSection::class_utilities(section, classes, paths);
        Some(c)
    }

    /// Each class's utility (issue 20: "a video call wants 2 Mbit/s and no more; a
    /// download wants what is cheap"), by class index, when some class sets a target or a
    /// utility; empty otherwise. A class with a target values it as the session's target
    /// would be (`log` by default: Strategy 1 at the target); `linear` without a target
    /// takes all the metered links give; a class with neither wants only what is cheap
    /// and gets no metered budget. The unmatched traffic (class 0) has the session's
    /// target, if `[engine.metering]` sets one, and otherwise wants what is cheap.
    pub fn class_utilities(
        section: Option<&MeteringSection>,
        classes: &[crate::class::ClassConfig],
        paths: &[MeteredSettings],
    ) -> Vec<Utility> {
        if classes
            .iter()
            .all(|c| c.target_mbps.is_none() && c.utility.is_none())
        {
            return Vec::new();
        }
        let of = |target_mbps: Option<f64>, kind: Option<UtilityKind>| match (target_mbps, kind) {
            (None, Some(UtilityKind::Linear)) | (Some(_), _) => {
                MeteringConfig::from_settings(
                    target_mbps.map(|m| m * 1e6),
                    kind.unwrap_or_default(),
                    paths,
                )
                .utility
            }
            (None, _) => Utility::Linear { weight: 0.0 },
        };
        let unmatched = section
            .and_then(|s| s.target_mbps.map(|t| of(Some(t), Some(s.utility))))
            .unwrap_or(Utility::Linear { weight: 0.0 });
        std::iter::once(unmatched)
            .chain(classes.iter().map(|c| of(c.target_mbps, c.utility)))
            .collect()
    }
}

impl MeteringConfig {
    /// The Hello's metered-classes option for `classes` (the session's traffic classes):
    /// each class's flows and utility, so that the server budgets downloads class by
    /// class too. `None` when the classes have no budgets of their own.
    pub fn classes_option(
        &self,
        classes: &[crate::class::ClassConfig],
    ) -> Option<braid_wire::MeteredClassesOpt> {
        let (unmatched, rest) = self.classes.split_first()?;
        if rest.len() != classes.len() {
            return None;
        }
        Some(braid_wire::MeteredClassesOpt {
            unmatched: (*unmatched).into(),
            classes: (classes.iter().zip(rest))
                .map(|(c, u)| braid_wire::MeteredClassOpt {
                    matcher: c.matcher.to_wire(),
                    utility: (*u).into(),
                })
                .collect(),
        })
    }
}

/// A bit worth this much (per second) is worth more than any tariff's price per bit.
const PRICELESS: f64 = 1.0;

impl MeteringConfig {
    /// The metering of `paths` for traffic whose target is `target_bps` (none: carry
    /// everything), worth `kind`.
    pub fn from_settings(
        target_bps: Option<f64>,
        kind: UtilityKind,
        paths: &[MeteredSettings],
    ) -> MeteringConfig {
        // Strategy 1's weight puts the optimum at the target for the dearest metered path.
        let price_per_bit = paths
            .iter()
            .map(|p| p.cost_per_gb / 1e9 / 8.0)
            .fold(0.0, f64::max);
        let utility = match (target_bps, kind) {
            (None, _) | (Some(_), UtilityKind::Linear) => Utility::Linear { weight: PRICELESS },
            (Some(t), UtilityKind::Log) if price_per_bit > 0.0 => {
                Utility::log_with_target(t, price_per_bit)
            }
            (Some(t), _) => Utility::Threshold {
                target_bps: t,
                weight: PRICELESS,
            },
        };
        MeteringConfig {
            utility,
            paths: paths
                .iter()
                .map(|p| MeteredPath {
                    id: p.id,
                    cost: Cost::PerByte {
                        per_byte: p.cost_per_gb / 1e9,
                    },
                    cap: p.cap,
                })
                .collect(),
            ..MeteringConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(target_mbps: Option<f64>, utility: Option<UtilityKind>) -> crate::class::ClassConfig {
        crate::class::ClassConfig {
            name: "c".into(),
            matcher: Default::default(),
            scheduler: Default::default(),
            loss_recovery: None,
            target_mbps,
            utility,
            transport: Default::default(),
        }
    }

    #[test]
    fn each_class_gets_its_own_utility_where_one_sets_a_target() {
        let p = MeteredSettings {
            id: 1,
            cost_per_gb: 8.0,
            cap: None,
        };
        // No class sets anything: one budget for all.
        let plain = [class(None, None)];
        assert!(MeteringSection::class_utilities(None, &plain, &[p]).is_empty());
        let c = MeteringSection::config(None, &plain, &[p]).unwrap();
        assert!(c.classes.is_empty());
        // A video call at 2 Mbit/s and no more, a download that wants what is cheap, and a
        // class that takes all the metered links give.
        let classes = [
            class(Some(2.0), Some(UtilityKind::Threshold)),
            class(None, None),
            class(None, Some(UtilityKind::Linear)),
        ];
        let u = MeteringSection::class_utilities(None, &classes, &[p]);
        assert_eq!(u.len(), 4);
        let price = 8.0 / 1e9 / 8.0;
        assert_eq!(u[0].demand(price), 0.0, "unmatched traffic: {:?}", u[0]);
        assert_eq!(u[1].demand(price), 2e6);
        assert_eq!(u[2].demand(price), 0.0);
        assert_eq!(u[3].demand(price), f64::INFINITY);
        // The unmatched traffic takes the session's target.
        let section = MeteringSection {
            target_mbps: Some(0.5),
            ..MeteringSection::default()
        };
        let u = MeteringSection::class_utilities(Some(&section), &classes, &[p]);
        assert!((u[0].demand(price) - 0.5e6).abs() < 1e-3, "{:?}", u[0]);
        let c = MeteringSection::config(Some(&section), &classes, &[p]).unwrap();
        assert_eq!(c.classes, u);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn a_target_with_a_price_is_strategy_1() {
        let p = MeteredSettings {
            id: 1,
            cost_per_gb: 8.0,
            cap: None,
        };
        let c = MeteringConfig::from_settings(Some(900e3), UtilityKind::Log, &[p]);
        assert!((c.utility.demand(8.0 / 1e9 / 8.0) - 900e3).abs() < 1e-3);
        assert!(c.validate().is_ok());
        let free = MeteredSettings {
            cost_per_gb: 0.0,
            ..p
        };
        let c = MeteringConfig::from_settings(Some(900e3), UtilityKind::Log, &[free]);
        assert_eq!(c.utility.demand(0.0), 900e3);
        let c = MeteringConfig::from_settings(None, UtilityKind::Log, &[p]);
        assert_eq!(c.utility.demand(1e-6), f64::INFINITY);
    }
}
