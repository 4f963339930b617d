//! A deterministic discrete-event simulator that drives braid's engine in virtual time.
//!
//! - [`bapu_world`]: BaPu's shared WiFi medium, monitor APs and their uplinks (BaPu §2-4).
//! - [`rng`]: the simulator's own seeded PRNG.
//! - [`link`]: link models (rate or mahimahi trace, delay, jitter, Bernoulli and
//!   Gilbert-Elliott loss, blackouts, bit corruption, queue limits).
//! - [`host`]: end hosts (TCP through a Linux-like model, or smoltcp on request; UDP
//!   constant-bit-rate) and workloads (bulk, the short-flow web workload of PluriBus §6.1).
//! - [`metrics`]: summaries of samples, goodput and goodput over time, for reports.
//! - [`node`]: the interface hosts and engines share.
//! - [`world`]: the event loop that moves packets between hosts, engines and links.
//! - [`scenario`]: the TOML scenario format (docs/scenarios.md).
//! - [`stream_world`]: the two ends of the multipath reliable stream over simulated paths.

pub mod bapu_world;
pub mod host;
pub mod link;
pub mod membership_world;
pub mod metrics;
pub mod node;
pub mod rng;
pub mod scenario;
pub mod stream_world;
pub mod wifi;
pub mod world;

pub use link::TraceCache;
pub use node::{Node, Packet};
pub use rng::Rng;
pub use scenario::{Scenario, ScenarioError};
pub use world::{run, run_keeping_engines, EnginePair, PathReport, Report, SimError};
