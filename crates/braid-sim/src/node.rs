//! The one interface every simulated thing that sends or receives packets implements.
//!
//! Hosts (TCP via the Linux-like model, UDP sources and sinks) and the two braid engines
//! are nodes; the world moves packets between them through links. Like the engine, a node
//! never reads a clock: time comes in as `now`, and output is pulled.

use braid_core::Instant;

/// A packet in flight in the simulator: an IPv4 packet between hosts and gateways, or a braid
/// datagram between the two engines.
pub type Packet = Vec<u8>;

/// A simulated endpoint.
pub trait Node {
    /// A packet arrives from the network at `now`.
    fn receive(&mut self, now: Instant, packet: Packet);
    /// The next packet this node wants to send at `now`, if any. Called until `None`.
    fn poll_transmit(&mut self, now: Instant) -> Option<Packet>;
    /// When the node next needs [`Node::handle_timeout`]; `None` when idle.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Lets timers fire. Harmless when called early.
    fn handle_timeout(&mut self, now: Instant);
}
