//! A host's outgoing packets and the pool of buffers they are built in, shared by its TCP
//! stacks and its UDP sources so that packets leave in the order they were made.

use std::collections::VecDeque;

use crate::Packet;

/// Packet buffers kept for reuse.
const POOL_LIMIT: usize = 256;

#[derive(Debug, Default)]
pub struct Packets {
    tx: VecDeque<Packet>,
    pool: Vec<Packet>,
}

impl Packets {
    /// An empty buffer for an outgoing packet.
    pub fn buffer(&mut self) -> Packet {
        self.pool.pop().unwrap_or_default()
    }

    /// Queues a packet for the network.
    pub fn push(&mut self, packet: Packet) {
        self.tx.push_back(packet);
    }

    /// The oldest queued packet.
    pub fn pop(&mut self) -> Option<Packet> {
        self.tx.pop_front()
    }

    /// Returns a consumed packet's buffer to the pool.
    pub fn recycle(&mut self, packet: Packet) {
        if self.pool.len() < POOL_LIMIT && packet.capacity() > 0 {
            self.pool.push(packet);
        }
    }
}
