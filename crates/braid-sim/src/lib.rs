//! A deterministic discrete-event simulator that drives braid's engine in virtual time.
//!
//! - [`rng`]: the simulator's own seeded PRNG.
//! - [`link`]: link models (rate or mahimahi trace, delay, jitter, Bernoulli and
//!   Gilbert-Elliott loss, blackouts, bit corruption, queue limits).
//! - [`host`]: end hosts (real TCP through smoltcp, UDP constant-bit-rate) and workloads
//!   (bulk, the short-flow web workload of PluriBus §6.1).
//! - [`metrics`]: summaries of samples, goodput and goodput over time, for reports.
//! - [`node`]: the interface hosts and engines share.

pub mod host;
pub mod link;
pub mod metrics;
pub mod node;
pub mod rng;

pub use node::{Node, Packet};
pub use rng::Rng;
