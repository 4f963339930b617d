//! A TCP model written against the RFCs that behaves like Linux's: the TCP of every
//! simulated workload unless it asks for smoltcp (`tcp = "smoltcp"`).
//!
//! - `conn`: the RFC 9293 state machine, handshake options (MSS, window scale,
//!   SACK-permitted), RFC 5961's checks, teardown.
//! - `send`: what to send (initial window 10 or the workload's, Nagle, no pacing), loss
//!   detection (RACK with SACK, NewReno without), fast recovery with PRR, the tail loss
//!   probe, the RTO with backoff, zero-window probes; `scoreboard` and `rack` its state.
//! - congestion control: `braid_core::cubic`, slow start with HyStart's delay detection,
//!   then Cubic (RFC 9438, Reno-friendly growth as Linux's).
//! - `rtt`: SRTT, RTTVAR and Linux's RTO (SRTT plus a deviation of at least 200 ms).
//! - `recv`: reassembly, SACK and D-SACK blocks, the window, quick and 40 ms delayed ACKs.
//! - `stack`: a host's connections, passive opens, RSTs, ephemeral ports.
//! - `wire`: segment parsing and building; timestamps are read, never sent.
//!
//! `braid bench sim-vs-lab` checks it against kernel Cubic in the lab on the same scenario
//! files.

mod conn;
mod rack;
mod recv;
mod ring;
mod rtt;
mod scoreboard;
mod send;
mod seq;
mod stack;
pub mod wire;

#[cfg(test)]
mod tests;

pub use conn::{Conn, State};
pub use send::{CaState, SenderStats};
pub use seq::Seq;
pub use stack::{ConnId, Stack, StackStats};
