//! A TCP model written against the RFCs that behaves like Linux's: Cubic with HyStart,
//! SACK, RACK and TLP, PRR, Linux's retransmission timeout and ACK policy. `braid bench
//! sim-vs-lab` checks it against kernel Cubic in the lab on the same scenario files.

mod conn;
mod cubic;
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
