//! A TCP model written against the RFCs that behaves like Linux's (placeholder doc).

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
