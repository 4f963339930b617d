//! Scenarios: a TOML description of one simulated experiment (paths and their links,
//! workloads, the engine's scheduler and loss recovery, duration, seed). The format is
//! documented in docs/scenarios.md; examples are in scenarios/.
//!
//! Loading is strict: an unknown key, a missing trace file or a negative rate is an error
//! that names the key or file and what is expected.

use std::path::{Path as FsPath, PathBuf};
use std::time::Duration;

use braid_core::class::ClassConfig;
use braid_core::{Config, HoleTimeoutMode, LossRecoveryKind, SchedulerKind};
use serde::{Deserialize, Serialize};

use crate::host::WorkloadConfig;
use crate::link::{LinkConfig, LinkConfigError, TraceCache};

/// Why a scenario could not be loaded. Each message carries the inner error's text, so the
/// inner error is not also a `source`: an error chain printed whole (`{:#}`) would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{path}: path '{name}' ({direction}): {error}")]
    Link {
        path: String,
        name: String,
        direction: &'static str,
        error: LinkConfigError,
    },
}

/// One simulated experiment.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Shown in reports; defaults to the file name without extension.
    #[serde(default)]
    pub name: String,
    /// Free text shown by `braid sim`.
    #[serde(default)]
    pub description: String,
    /// Virtual seconds to simulate.
    pub duration_s: f64,
    /// Seed of every random choice in the run (links, workloads, engine).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// IP MTU of the end hosts, bytes: the largest inner packet the tunnel carries.
    #[serde(default = "default_mtu")]
    pub mtu: usize,
    /// The braid engines between the hosts.
    #[serde(default)]
    pub engine: EngineSection,
    /// The paths between gateway and server, in path-id order.
    #[serde(rename = "path", default)]
    pub paths: Vec<PathSection>,
    /// What the hosts do.
    #[serde(rename = "workload", default)]
    pub workloads: Vec<WorkloadConfig>,
}

fn default_seed() -> u64 {
    1
}

fn default_mtu() -> usize {
    1400
}

/// `[engine]`: how the two braid engines run. Every field has the engine's default.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    /// Path scheduler.
    #[serde(default)]
    pub scheduler: SchedulerKind,
    /// Loss-recovery method.
    #[serde(default)]
    pub loss_recovery: LossRecoveryKind,
    /// Resequencing buffer's hole timeout, ms (PluriBus §5: 50); with the adaptive mode,
    /// the value used until reordering has been measured.
    pub hole_timeout_ms: Option<f64>,
    /// `adaptive` (default) or `fixed`.
    #[serde(default)]
    pub hole_timeout_mode: HoleTimeoutMode,
    /// Traffic classes (`[[engine.class]]`), each with its own scheduler.
    #[serde(rename = "class", default)]
    pub classes: Vec<ClassConfig>,
    /// How TCP in no class crosses: `split-tcp` (default) or `packet` (the tunnel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_transport: Option<braid_core::class::Transport>,
    /// Set aside paths that lose far more than the best one (default true).
    pub loss_guard: Option<bool>,
    /// Resequence each inner flow on its own instead of the whole session (default false).
    pub flow_order: Option<bool>,
    /// Active queue management of the send queue (default false; `session/aqm.rs`).
    pub aqm: Option<bool>,
    /// Inner IPv4/TCP header compression (default true; `compress.rs`).
    pub header_compression: Option<bool>,
    /// Per-path congestion control: `rate` (default) or `loss-delay` (`path/backoff.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_cc: Option<braid_core::PathCc>,
    /// `resequence` (default), `rpc` (PRISM's Reverse Path Controller at the striping
    /// end, delivery on arrival) or `none` (delivery on arrival).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reordering: Option<braid_core::Reordering>,
    /// Log each data packet's predicted and actual delivery (for analyses of the delay
    /// estimator; costs memory on long runs).
    #[serde(default)]
    pub record_predictions: bool,
    /// Receiver's report interval, ms.
    pub report_interval_ms: Option<f64>,
    /// Heartbeat interval on idle paths, ms.
    pub heartbeat_interval_ms: Option<f64>,
    /// Silence after which a path is declared down, ms.
    pub path_timeout_ms: Option<f64>,
    /// Capacity estimator interval, ms (PluriBus §4.2: 500).
    pub capacity_interval_ms: Option<f64>,
    /// Configure each engine with its links' mean rates as expected capacities, as a
    /// user who knows them would (default false: learned, as the daemons run without
    /// `capacity_mbps`).
    pub capacity_hint: Option<bool>,
    /// Bypass braid: the hosts talk directly over the path of this name (the single-link
    /// baselines of PluriBus Fig 8).
    pub direct: Option<String>,
    /// `[engine.metering]`: how metered paths (`[[path]] metered = true`) are used.
    pub metering: Option<braid_core::metered::MeteringSection>,
}

/// `[[path]]`: one path, its two directions as separate links.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PathSection {
    pub name: String,
    /// Gateway → server.
    pub up: LinkConfig,
    /// Server → gateway.
    pub down: LinkConfig,
    /// Its bytes cost money: both ends budget them (`[engine.metering]`).
    #[serde(default)]
    pub metered: bool,
    /// Price per GB of a metered path.
    #[serde(default)]
    pub cost_per_gb: f64,
    /// A data cap, GB, that must last `cap_period_s` of virtual time (a month compressed);
    /// each end paces what it sends to it.
    pub cap_gb: Option<f64>,
    pub cap_period_s: Option<f64>,
}

impl Scenario {
    /// Reads and validates a scenario file. Trace paths are resolved relative to the
    /// scenario file's folder.
    pub fn load(path: &FsPath, traces: &mut TraceCache) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Read {
            path: path.to_owned(),
            error,
        })?;
        let base = path.parent().unwrap_or(FsPath::new("."));
        let mut s = Scenario::parse(&text, &path.display().to_string(), base, traces)?;
        if s.name.is_empty() {
            s.name = path
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        Ok(s)
    }

    /// Parses and validates scenario text; `origin` names it in errors and `base` is the
    /// folder relative trace paths start from.
    pub fn parse(
        text: &str,
        origin: &str,
        base: &FsPath,
        traces: &mut TraceCache,
    ) -> Result<Scenario, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: origin.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        for p in &mut s.paths {
            for link in [&mut p.up, &mut p.down] {
                if let Some(t) = &mut link.trace {
                    if t.is_relative() {
                        *t = base.join(&*t);
                    }
                }
            }
        }
        s.validate(origin, traces)?;
        Ok(s)
    }

    /// Checks everything a run depends on, loading traces on the way.
    pub fn validate(&self, origin: &str, traces: &mut TraceCache) -> Result<(), ScenarioError> {
        let invalid = |message: String| ScenarioError::Invalid {
            path: origin.to_owned(),
            message,
        };
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(invalid(format!(
                "duration_s = {}: expected a positive number of seconds",
                self.duration_s
            )));
        }
        if !(68..=65_000).contains(&self.mtu) {
            return Err(invalid(format!(
                "mtu = {}: expected 68 to 65000 bytes",
                self.mtu
            )));
        }
        if self.paths.is_empty() {
            return Err(invalid(
                "no [[path]]: a scenario needs at least one path".to_owned(),
            ));
        }
        if self.paths.len() > 255 {
            return Err(invalid(format!(
                "{} paths: at most 255 are supported",
                self.paths.len()
            )));
        }
        for (i, p) in self.paths.iter().enumerate() {
            if self.paths[..i].iter().any(|q| q.name == p.name) {
                return Err(invalid(format!(
                    "two paths are named '{}': path names must be unique",
                    p.name
                )));
            }
            for (cfg, direction) in [(&p.up, "up"), (&p.down, "down")] {
                let err = |error| ScenarioError::Link {
                    path: origin.to_owned(),
                    name: p.name.clone(),
                    direction,
                    error,
                };
                cfg.validate().map_err(err)?;
                cfg.mean_rate_bps(traces).map_err(err)?;
            }
        }
        if let Some(d) = &self.engine.direct {
            if !self.paths.iter().any(|p| &p.name == d) {
                let names: Vec<_> = self.paths.iter().map(|p| p.name.as_str()).collect();
                return Err(invalid(format!(
                    "engine.direct = '{d}': no path has that name (paths: {})",
                    names.join(", ")
                )));
            }
        }
        let ms = [
            ("hole_timeout_ms", self.engine.hole_timeout_ms, true),
            ("report_interval_ms", self.engine.report_interval_ms, false),
            (
                "heartbeat_interval_ms",
                self.engine.heartbeat_interval_ms,
                false,
            ),
            ("path_timeout_ms", self.engine.path_timeout_ms, false),
            (
                "capacity_interval_ms",
                self.engine.capacity_interval_ms,
                false,
            ),
        ];
        for (key, v, zero_ok) in ms {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) {
                    return Err(invalid(format!(
                        "engine.{key} = {v}: expected a positive number of milliseconds"
                    )));
                }
            }
        }
        if self.workloads.is_empty() {
            return Err(invalid(
                "no [[workload]]: a scenario needs at least one workload".to_owned(),
            ));
        }
        Ok(())
    }

    /// The engine configuration both braid ends run with.
    pub fn engine_config(&self) -> Config {
        let mut c = Config {
            scheduler: self.engine.scheduler,
            loss_recovery: self.engine.loss_recovery,
            hole_timeout_mode: self.engine.hole_timeout_mode,
            classes: self.engine.classes.clone(),
            record_predictions: self.engine.record_predictions,
            seed: self.seed,
            // Derived from the scenario seed so that a run repeats exactly.
            flow_hash_seed: self.seed ^ 0x666c_6f77_6861_7368,
            max_packet_size: self.mtu,
            ..Config::default()
        };
        let ms = |v: f64| Duration::from_secs_f64(v / 1e3);
        if let Some(g) = self.engine.loss_guard {
            c.loss_guard = g;
        }
        if let Some(f) = self.engine.flow_order {
            c.flow_order = f;
        }
        if let Some(a) = self.engine.aqm {
            c.aqm = a;
        }
        if let Some(h) = self.engine.header_compression {
            c.header_compression = h;
        }
        if let Some(p) = self.engine.path_cc {
            c.path_cc = p;
        }
        if let Some(r) = self.engine.reordering {
            c.reordering = r;
        }
        if let Some(v) = self.engine.hole_timeout_ms {
            c.hole_timeout = ms(v);
        }
        if let Some(v) = self.engine.report_interval_ms {
            c.report_interval = ms(v);
        }
        if let Some(v) = self.engine.heartbeat_interval_ms {
            c.heartbeat_interval = ms(v);
        }
        if let Some(v) = self.engine.path_timeout_ms {
            c.path_timeout = ms(v);
        }
        if let Some(v) = self.engine.capacity_interval_ms {
            c.capacity_interval = ms(v);
        }
        c.metering = self.metering_config();
        c.tcp_transport = self
            .engine
            .tcp_transport
            .unwrap_or_else(braid_core::class::default_tcp_transport);
        c
    }

    /// The engines' metering: with `[engine.metering]` or any metered path.
    fn metering_config(&self) -> Option<braid_core::metered::MeteringConfig> {
        use braid_core::metered::{CapPace, MeteredSettings};

        let metered: Vec<MeteredSettings> = (self.paths.iter().enumerate())
            .filter(|(_, p)| p.metered)
            .map(|(i, p)| MeteredSettings {
                id: braid_core::PathId::try_from(i).unwrap_or(braid_core::PathId::MAX),
                cost_per_gb: p.cost_per_gb,
                cap: p.cap_gb.map(|gb| CapPace {
                    remaining_bytes: (gb * 1e9) as u64,
                    period_left: Duration::from_secs_f64(
                        p.cap_period_s.unwrap_or(self.duration_s).max(0.0),
                    ),
                }),
            })
            .collect();
        braid_core::metered::MeteringSection::config(
            self.engine.metering.as_ref(),
            &self.engine.classes,
            &metered,
        )
    }
}

#[cfg(test)]
mod tests;
