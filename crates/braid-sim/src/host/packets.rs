//! A host's outgoing packets and the pool of buffers they are built in, shared by its TCP
//! stacks and its UDP sources so that packets leave in the order they were made.

use std::collections::VecDeque;

use crate::Packet;

/// Packet buffers kept for reuse.
const POOL_LIMIT: usize = 256;

#[derive(Debug, Default)]
pub struct Packets {
    /// Each with whether its IPv4 and TCP checksums were written over it as it stands.
    tx: VecDeque<(Packet, bool)>,
    pool: Vec<Packet>,
}

impl Packets {
    /// An empty buffer for an outgoing packet.
    pub fn buffer(&mut self) -> Packet {
        self.pool.pop().unwrap_or_default()
    }

    /// Packets queued for the network.
    pub fn queued(&self) -> usize {
        self.tx.len()
    }

    /// Queues a packet for the network.
    pub fn push(&mut self, packet: Packet) {
        self.tx.push_back((packet, false));
    }

    /// Queues a packet whose IPv4 and TCP checksums were just written over it as it
    /// stands (the model's `wire::emit`), so that they hold.
    pub fn push_checked(&mut self, packet: Packet) {
        self.tx.push_back((packet, true));
    }

    /// The oldest queued packet.
    pub fn pop(&mut self) -> Option<Packet> {
        self.pop_checked().map(|(p, _)| p)
    }

    /// The oldest queued packet, with whether it was queued by [`Packets::push_checked`].
    pub fn pop_checked(&mut self) -> Option<(Packet, bool)> {
        self.tx.pop_front()
    }

    /// Returns a consumed packet's buffer to the pool.
    pub fn recycle(&mut self, packet: Packet) {
        if self.pool.len() < POOL_LIMIT && packet.capacity() > 0 {
            self.pool.push(packet);
        }
    }
}
