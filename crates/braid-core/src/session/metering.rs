//! Metered paths in packet mode (oSCTP §IV-F): every scheduling interval the
//! [`Planner`] predicts each cheap path's rate from what it delivered in the last one and
//! gives each metered path the bytes the model buys for the next; once a metered path has
//! sent its budget it stops being usable ([`crate::path::Path::is_usable`]) until the next
//! interval, so the schedulers put packets on the cheap paths or hold them, as for a full
//! window. A data cap paces its path: the model never sees more of the path's capacity
//! than what is left of the cap over the time left.
//!
//! The session's own code only calls [`Session::meter`] before scheduling and after a
//! timeout, and asks [`crate::path::Path::is_metered_hold`] of the path a scheduler chose.

use std::collections::VecDeque;
use std::time::Duration;

use super::Session;
use braid_wire::{MeteredClassesOpt, MeteredPathOpt, MeteringOpt};

use crate::class::{first_match, FlowMatch};
use crate::flow::PacketInfo;
use crate::metered::{
    CapPace, Cost, IntervalRecord, MeteredPath, MeteringConfig, PathModel, Planner,
};
use crate::path::Path;
use crate::{ConfigError, Instant, MeteredStats};

/// Most interval records kept (oldest dropped first).
const MAX_RECORDS: usize = 1 << 20;

/// Per-path state, by position in the session's paths.
#[derive(Clone, Debug)]
struct Meter {
    metered: bool,
    /// The path's byte counters when last read.
    sent_mark: u64,
    acked_mark: u64,
    received_mark: u64,
    /// Counted in the current interval.
    interval_sent: u64,
    interval_acked: u64,
    /// Cap left and when its period ends.
    cap: Option<(u64, Instant)>,
    /// Held with the budget spent since.
    held_since: Option<Instant>,
    /// A cheap path's state where it contradicts its prediction, as last planned with.
    seen: Seen,
    /// Held by the session's budget or cap (a class's own budget may hold it too).
    hold: bool,
    stats: MeteredStats,
}

/// What a cheap path is seen to do now, against its prediction for the interval.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    /// As predicted (or nothing to go on).
    Predicted,
    /// Down, though predicted to carry something: it carries nothing for now.
    Down,
    /// Up, though predicted dark: it carries what its capacity estimate says.
    Back(f64),
}

impl Meter {
    /// What the cap leaves for sending once heartbeats have what they will need
    /// (`control_bytes_per_s`) over the rest of its period; `None` without a cap.
    fn cap_room(&self, now: Instant, control_bytes_per_s: f64) -> Option<u64> {
        self.cap.map(|(left, ends)| {
            let t = ends.saturating_duration_since(now).as_secs_f64();
            left.saturating_sub((control_bytes_per_s * t) as u64)
        })
    }
}

impl Seen {
    /// What `p`, a cheap path predicted to carry `predicted` bit/s, carries now. A path
    /// that came back mid-interval is judged by its capacity estimate, the engine's own
    /// measure of it (learned before the gap, and from packet trains since).
    fn of(p: &Path, predicted: Option<f64>) -> Seen {
        let predicted = predicted.unwrap_or(0.0);
        let capacity = p.capacity_bps() as f64;
        if !p.is_live() {
            if predicted > 0.0 {
                Seen::Down
            } else {
                Seen::Predicted
            }
        } else if predicted <= 0.0 && capacity > 0.0 {
            Seen::Back(capacity)
        } else {
            Seen::Predicted
        }
    }

    fn bps(self) -> Option<f64> {
        match self {
            Seen::Predicted => None,
            Seen::Down => Some(0.0),
            Seen::Back(bps) => Some(bps),
        }
    }

    /// Whether the two call for different plans (a capacity estimate's drift does not).
    fn differs(self, other: Seen) -> bool {
        std::mem::discriminant(&self) != std::mem::discriminant(&other)
    }
}

/// The metering of one session.
pub(super) struct Metering {
    planner: Planner,
    /// Each traffic class's own budgets, by class index, where classes have them
    /// ([`MeteringConfig::classes`]): a class sends on a metered path only within both its
    /// own budget and the session's. Fed the bytes each class sends on each path.
    classes: Vec<Planner>,
    /// Which flows each of `classes[1..]` takes where they are the gateway's classes, not
    /// the session's ([`MeteringConfig::class_matches`]).
    class_matches: Option<Vec<FlowMatch>>,
    interval: Duration,
    created: Instant,
    interval_start: Instant,
    meters: Vec<Meter>,
    /// The largest datagram the session sends: a capped path whose cap has less left
    /// sends nothing more.
    max_datagram: u64,
    /// Bytes a second a held path still carries both ways (heartbeats), kept back from a
    /// cap for the rest of its period so that they too fit in it (`cap-month`).
    control_bytes_per_s: f64,
    record: bool,
    pub(super) log: VecDeque<IntervalRecord>,
}

impl Metering {
    pub(super) fn new(
        config: &MeteringConfig,
        paths: &[Path],
        max_datagram: u64,
        control_bytes_per_s: f64,
        now: Instant,
    ) -> Result<Metering, ConfigError> {
        let invalid = |e: crate::metered::ModelError| ConfigError::Metering(e.to_string());
        config.validate().map_err(invalid)?;
        let models: Vec<PathModel> = paths
            .iter()
            .map(|p| match config.path(p.id()) {
                Some(m) => PathModel {
                    cost: m.cost.clone(),
                    metered: true,
                },
                None => PathModel {
                    cost: Cost::FREE,
                    metered: false,
                },
            })
            .collect();
        let classes = (config.classes.iter())
            .map(|u| Planner::new(now, config.interval, *u, config.predictor, models.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let planner = Planner::new(
            now,
            config.interval,
            config.utility,
            config.predictor,
            models,
        )
        .map_err(invalid)?;
        let meters = paths
            .iter()
            .map(|p| {
                let m = config.path(p.id());
                Meter {
                    metered: m.is_some(),
                    sent_mark: p.tx_bytes(),
                    acked_mark: p.acked_bytes(),
                    received_mark: p.rx_bytes(),
                    interval_sent: 0,
                    interval_acked: 0,
                    cap: m
                        .and_then(|m| m.cap)
                        .map(|c| (c.remaining_bytes, now + c.period_left)),
                    held_since: None,
                    seen: Seen::Predicted,
                    hold: false,
                    stats: MeteredStats {
                        id: p.id(),
                        cap_remaining_bytes: m.and_then(|m| m.cap).map(|c| c.remaining_bytes),
                        ..MeteredStats::default()
                    },
                }
            })
            .collect();
        Ok(Metering {
            planner,
            classes,
            class_matches: config.class_matches.clone(),
            interval: config.interval,
            created: now,
            interval_start: now,
            meters,
            max_datagram,
            control_bytes_per_s,
            record: config.record_intervals,
            log: VecDeque::new(),
        })
    }

    /// When the current interval ends.
    pub(super) fn poll_timeout(&self) -> Instant {
        self.planner.poll_timeout()
    }

    /// Counts what each path sent and delivered since the last call, closes the interval
    /// if it is over, and holds each metered path whose budget (or cap) is spent. Returns
    /// whether any path's hold changed.
    fn update(&mut self, now: Instant, paths: &mut [Path]) -> bool {
        for (i, (m, p)) in self.meters.iter_mut().zip(paths.iter()).enumerate() {
            let sent = p.tx_bytes().saturating_sub(m.sent_mark);
            let acked = p.acked_bytes().saturating_sub(m.acked_mark);
            let received = p.rx_bytes().saturating_sub(m.received_mark);
            m.sent_mark = p.tx_bytes();
            m.acked_mark = p.acked_bytes();
            m.received_mark = p.rx_bytes();
            m.interval_sent += sent;
            m.interval_acked += acked;
            self.planner.on_sent(i, sent);
            self.planner.on_delivered(i, acked);
            if m.metered {
                m.stats.sent_bytes += sent;
                m.stats.received_bytes += received;
                // A tariff counts both ways: so does the cap.
                if let Some((left, _)) = &mut m.cap {
                    *left = left.saturating_sub(sent + received);
                    m.stats.cap_remaining_bytes = Some(*left);
                }
            }
        }
        let mut changed = false;
        if now >= self.planner.poll_timeout() {
            self.close_interval(now, paths);
            changed = true;
        }
        self.replan_if_seen_otherwise(now, paths);
        // The metered paths carry only what the cheap ones cannot: while a usable cheap
        // path has room in its window, they are held, whatever their budget. Without it a
        // scheduler that judges a cheap path by a capacity estimate learned in a slow
        // stretch spends the budget on the metered path while the cheap one, recovered,
        // sits idle (osctp-table1: 1.062 of the oracle without, most of the excess in
        // lit seconds with room on the cheap link).
        // Split-TCP's stream beside the tunnel must have room on it too.
        let cheap_has_room = (self.meters.iter().zip(paths.iter()))
            .any(|(m, p)| !m.metered && p.is_usable() && !p.window_full(now) && !p.foreign_full());
        for (i, (m, p)) in self.meters.iter_mut().zip(paths.iter_mut()).enumerate() {
            if !m.metered {
                continue;
            }
            let cap_spent = (m.cap_room(now, self.control_bytes_per_s))
                .is_some_and(|room| room < self.max_datagram);
            // Only whole datagrams within the budget: a metered byte past it is one the
            // model did not buy (osctp-table1: 1.079 of the oracle with one datagram of
            // slack per interval).
            let throttled = cap_spent || !self.planner.may_send(i, self.max_datagram);
            let hold = throttled || cheap_has_room;
            m.hold = hold;
            if hold != p.is_metered_hold() {
                p.set_metered_hold(hold);
                changed = true;
            }
            // Throttled time is the budget's or the cap's, not the cheap path's turn.
            if throttled {
                m.held_since.get_or_insert(now);
            } else if let Some(since) = m.held_since.take() {
                m.stats.throttled_ms += now.saturating_duration_since(since).as_secs_f64() * 1e3;
            }
        }
        changed
    }

    /// Re-plans the rest of the interval when a cheap path is seen down though predicted
    /// up, or up though predicted dark (a coverage gap's edges, which the last interval's
    /// rate only learns an interval late), or back to what was predicted.
    fn replan_if_seen_otherwise(&mut self, now: Instant, paths: &[Path]) {
        let mut differs = false;
        let mut seen = Vec::with_capacity(paths.len());
        for (i, (m, p)) in self.meters.iter_mut().zip(paths).enumerate() {
            if m.metered {
                seen.push(None);
                continue;
            }
            let s = Seen::of(p, self.planner.predicted_bps(i));
            differs |= s.differs(m.seen);
            m.seen = s;
            seen.push(s.bps());
        }
        if differs {
            let capacity = self.metered_capacity(now, paths);
            self.planner.replan(now, &seen, &capacity);
            for c in &mut self.classes {
                c.replan(now, &seen, &capacity);
            }
        }
    }

    /// What split-TCP's stream may still send on path position `pi`
    /// ([`Session::stream_allowance`]).
    pub(super) fn stream_allowance(&self, now: Instant, pi: usize) -> Option<u64> {
        let m = self.meters.get(pi).filter(|m| m.metered)?;
        if m.hold {
            return Some(0);
        }
        let left = |p: &Planner| p.budget(pi).map_or(0, |b| b.remaining());
        let mut allowance = left(&self.planner);
        if let Some(class) = self.classes.first() {
            allowance = allowance.min(left(class));
        }
        if let Some(room) = m.cap_room(now, self.control_bytes_per_s) {
            allowance = allowance.min(room);
        }
        Some(allowance)
    }

    /// Whether the path at position `pi` is metered (its bytes cost).
    pub(super) fn is_metered(&self, pi: usize) -> bool {
        self.meters.get(pi).is_some_and(|m| m.metered)
    }

    /// The class whose budget a packet of scheduling class `class` spends: the same,
    /// unless the budgets are by the gateway's classes.
    pub(super) fn budget_class(&self, class: usize, info: &Option<PacketInfo>) -> usize {
        match (&self.class_matches, info) {
            (None, _) => class,
            (Some(m), Some(info)) => first_match(m, info),
            (Some(_), None) => 0,
        }
    }

    /// Whether traffic class `class` may send a datagram on path position `pi` within its
    /// own budget (always where classes have none).
    pub(super) fn class_may_send(&self, class: usize, pi: usize) -> bool {
        (self.classes.get(class)).is_none_or(|p| p.may_send(pi, self.max_datagram))
    }

    /// Whether `class`'s own budget alone leaves it no usable path: some path is usable,
    /// but every usable one is metered with the class's budget spent.
    pub(super) fn class_blocked(&self, class: usize, paths: &[Path]) -> bool {
        !self.classes.is_empty()
            && paths.iter().any(Path::is_usable)
            && !(paths.iter().enumerate())
                .any(|(i, p)| p.is_usable() && self.class_may_send(class, i))
    }

    /// Holds, for a scheduler of `class` to choose among, each metered path that the
    /// session's budget holds or the class's own; [`Self::restore_holds`] undoes it.
    pub(super) fn hold_for_class(&self, class: usize, paths: &mut [Path]) {
        if self.classes.is_empty() {
            return;
        }
        for (i, (m, p)) in self.meters.iter().zip(paths.iter_mut()).enumerate() {
            if m.metered {
                p.set_metered_hold(m.hold || !self.class_may_send(class, i));
            }
        }
    }

    /// Puts back the session's holds after [`Self::hold_for_class`].
    pub(super) fn restore_holds(&self, paths: &mut [Path]) {
        if self.classes.is_empty() {
            return;
        }
        for (m, p) in self.meters.iter().zip(paths.iter_mut()) {
            if m.metered {
                p.set_metered_hold(m.hold);
            }
        }
    }

    /// Counts `bytes` that traffic class `class` sent on path position `pi`: against its
    /// budget on a metered path, as its rate on a cheap one.
    pub(super) fn on_class_sent(&mut self, class: usize, pi: usize, bytes: u64) {
        if let Some(c) = self.classes.get_mut(class) {
            c.on_sent(pi, bytes);
            c.on_delivered(pi, bytes);
        }
    }

    /// What each metered path could carry for the model: its capacity estimate, paced by
    /// its cap (what is left over the time left, at least one interval, less what the
    /// heartbeats will take until the period ends).
    fn metered_capacity(&self, now: Instant, paths: &[Path]) -> Vec<f64> {
        (self.meters.iter().zip(paths))
            .map(|(m, p)| {
                let pace = m.cap.map_or(f64::INFINITY, |(left, ends)| {
                    let t = ends.saturating_duration_since(now).max(self.interval);
                    let t = t.as_secs_f64();
                    (left as f64 - self.control_bytes_per_s * t).max(0.0) * 8.0 / t
                });
                (p.capacity_bps() as f64).min(pace)
            })
            .collect()
    }

    /// Ends the interval: logs it, then plans the next.
    fn close_interval(&mut self, now: Instant, paths: &[Path]) {
        let length_s = now
            .saturating_duration_since(self.interval_start)
            .as_secs_f64();
        let start_s = self
            .interval_start
            .saturating_duration_since(self.created)
            .as_secs_f64();
        let capacity = self.metered_capacity(now, paths);
        for (i, (m, p)) in self.meters.iter_mut().zip(paths).enumerate() {
            if self.record {
                if self.log.len() >= MAX_RECORDS {
                    self.log.pop_front();
                }
                self.log.push_back(IntervalRecord {
                    path: p.id(),
                    metered: m.metered,
                    start_s,
                    length_s,
                    budget_bytes: self.planner.budget(i).map_or(0, |b| b.allowance()),
                    sent_bytes: m.interval_sent,
                    delivered_bytes: m.interval_acked,
                    predicted_bps: self.planner.predicted_bps(i).unwrap_or(0.0),
                });
            }
            if let Some(since) = m.held_since.take() {
                m.stats.throttled_ms += now.saturating_duration_since(since).as_secs_f64() * 1e3;
            }
            m.interval_sent = 0;
            m.interval_acked = 0;
            m.seen = Seen::Predicted;
        }
        self.planner.handle_timeout(now, &capacity);
        for c in &mut self.classes {
            c.handle_timeout(now, &capacity);
        }
        self.interval_start = now;
        for (i, m) in self.meters.iter_mut().enumerate() {
            if m.metered {
                let budget = self.planner.budget(i).unwrap_or_default();
                m.stats.intervals += 1;
                m.stats.intervals_used += u64::from(budget.allowance() > 0);
            }
        }
    }

    /// Starts metered path `id`'s cap afresh (a new period, or the cap changed): `None`
    /// lifts it. False when `id` is not metered.
    fn set_cap(&mut self, id: crate::PathId, cap: Option<CapPace>, now: Instant) -> bool {
        let Some(m) = self
            .meters
            .iter_mut()
            .find(|m| m.metered && m.stats.id == id)
        else {
            return false;
        };
        m.cap = cap.map(|c| (c.remaining_bytes, now + c.period_left));
        m.stats.cap_remaining_bytes = cap.map(|c| c.remaining_bytes);
        true
    }

    /// Each metered path's stats.
    pub(super) fn stats(&self, now: Instant) -> Vec<MeteredStats> {
        (self.meters.iter().enumerate())
            .filter(|(_, m)| m.metered)
            .map(|(i, m)| {
                let budget = self.planner.budget(i).unwrap_or_default();
                let held = m.held_since.map_or(0.0, |s| {
                    now.saturating_duration_since(s).as_secs_f64() * 1e3
                });
                MeteredStats {
                    budget_bytes: budget.allowance(),
                    interval_sent_bytes: budget.spent(),
                    planned_bps: self.planner.planned_bps(i).unwrap_or(0.0),
                    throttled_ms: m.stats.throttled_ms + held,
                    held: m.held_since.is_some(),
                    ..m.stats.clone()
                }
            })
            .collect()
    }
}

impl Session {
    /// Starts metering the paths `config` names.
    pub(super) fn start_metering(
        &mut self,
        config: &MeteringConfig,
        now: Instant,
    ) -> Result<(), ConfigError> {
        let max_datagram = (self.config.max_packet_size
            + braid_wire::HEADER_LEN
            + 4
            + braid_wire::DATA_FIXED_LEN
            + self.config.datagram_overhead) as u64;
        // While a path is idle, each way a heartbeat and a path ack or report per
        // heartbeat interval (cap-month measured about 1.2 kB/s each way at 100 ms).
        let datagram = (braid_wire::HEADER_LEN
            + braid_wire::PATH_ENTRY_LEN
            + self.config.datagram_overhead) as f64;
        let control = 4.0 * datagram / self.config.heartbeat_interval.as_secs_f64();
        self.metering = Some(Metering::new(
            config,
            &self.paths,
            max_datagram,
            control,
            now,
        )?);
        Ok(())
    }

    /// What a gateway that announces its metering ([`MeteringConfig::announce`]) tells
    /// the server in its Hello: the utility, and each metered path's price and what is
    /// left of its cap at `now`.
    pub(super) fn metering_announcement(&self, now: Instant) -> Option<Vec<u8>> {
        let config = self.config.metering.as_ref().filter(|c| c.announce)?;
        let m = self.metering.as_ref()?;
        if self.role != crate::Role::Gateway {
            return None;
        }
        let utility = config.utility.into();
        let paths = (config.paths.iter().take(braid_wire::MAX_METERED_PATHS))
            .map(|p| {
                let cap = (m.meters.iter())
                    .find(|x| x.metered && x.stats.id == p.id)
                    .and_then(|x| x.cap)
                    .map(|(left, ends)| {
                        let secs = ends.saturating_duration_since(now).as_secs();
                        (left, u32::try_from(secs).unwrap_or(u32::MAX))
                    });
                MeteredPathOpt {
                    path: p.id,
                    per_byte: p.cost.base_per_byte(),
                    cap,
                }
            })
            .collect();
        MeteringOpt { utility, paths }.to_bytes().ok()
    }

    /// What an announcing gateway whose classes have budgets of their own tells the server
    /// beside [`Self::metering_announcement`] ([`MeteringConfig::classes_option`]); `None`
    /// when the classes do not fit the option's 255 bytes (9 with a port range each; the
    /// server then budgets downloads for all the traffic at once).
    pub(super) fn metered_classes_announcement(&self) -> Option<Vec<u8>> {
        let config = self.config.metering.as_ref().filter(|c| c.announce)?;
        if self.role != crate::Role::Gateway {
            return None;
        }
        config.classes_option(&self.config.classes)?.to_bytes().ok()
    }

    /// A server's answer to the metering in a gateway's Hello: without metering of its
    /// own it budgets what it sends on those paths with the same model (oSCTP §IV-F for
    /// the downloads); a later Hello brings the caps up to date. A malformed or invalid
    /// announcement is counted and ignored. (A server with metered paths of its own, as in
    /// a scenario without `announce`, keeps them.)
    pub(super) fn adopt_peer_metering(
        &mut self,
        now: Instant,
        value: &[u8],
        classes: Option<&[u8]>,
    ) {
        let Ok(opt) = MeteringOpt::parse(value) else {
            self.stats.malformed_datagrams += 1;
            return;
        };
        let cap = |c: Option<(u64, u32)>| {
            c.map(|(left, secs)| CapPace {
                remaining_bytes: left,
                period_left: Duration::from_secs(u64::from(secs)),
            })
        };
        if self.metering_from_peer {
            if let Some(m) = &mut self.metering {
                for p in &opt.paths {
                    m.set_cap(p.path, cap(p.cap), now);
                }
            }
            return;
        }
        if (self.metering.iter()).any(|m| m.meters.iter().any(|x| x.metered)) {
            return;
        }
        // The server's own interval, predictor and logging, if it has them; the gateway's
        // classes' budgets where it sends them, else the server's own classes'.
        let mut own = self.config.metering.clone().unwrap_or_default();
        match classes.map(MeteredClassesOpt::parse) {
            Some(Ok(c)) => {
                own.classes = std::iter::once(c.unmatched.into())
                    .chain(c.classes.iter().map(|c| c.utility.into()))
                    .collect();
                own.class_matches = Some(
                    (c.classes.iter())
                        .map(|c| FlowMatch::from_wire(&c.matcher))
                        .collect(),
                );
            }
            Some(Err(_)) => self.stats.malformed_datagrams += 1,
            None => {}
        }
        let config = MeteringConfig {
            utility: opt.utility.into(),
            paths: (opt.paths.iter())
                .map(|p| MeteredPath {
                    id: p.path,
                    cost: Cost::PerByte {
                        per_byte: p.per_byte,
                    },
                    cap: cap(p.cap),
                })
                .collect(),
            announce: false,
            ..own
        };
        match self.start_metering(&config, now) {
            Ok(()) => self.metering_from_peer = true,
            Err(_) => self.stats.malformed_datagrams += 1,
        }
    }

    /// Brings the metered paths' budgets up to `now` (nothing without metering); a change
    /// of hold ends a scheduler's standing decision.
    /// Returns whether a hold changed.
    pub(super) fn meter(&mut self, now: Instant) -> bool {
        let changed = (self.metering.as_mut()).is_some_and(|m| m.update(now, &mut self.paths));
        if changed {
            self.scheduling.held_class = None;
        }
        changed
    }

    /// Starts metered path `id`'s data cap afresh at `now` with `cap` (the daemon's
    /// calendar says a new period began, or its saved count changed); `None` lifts it.
    /// False when `id` is not a metered path of this session.
    pub fn set_cap(&mut self, now: Instant, id: crate::PathId, cap: Option<CapPace>) -> bool {
        let set = self
            .metering
            .as_mut()
            .is_some_and(|m| m.set_cap(id, cap, now));
        if set {
            self.meter(now);
            self.announce_due = self.role == crate::Role::Gateway;
            self.timeout_rest.set(None);
        }
        set
    }

    /// The per-interval log of the metered paths' budgets, oldest first (kept when
    /// [`MeteringConfig::record_intervals`]).
    pub fn metering_log(&self) -> impl Iterator<Item = &IntervalRecord> {
        self.metering.iter().flat_map(|m| m.log.iter())
    }
}
