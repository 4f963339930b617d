//! The stream's arrivals per uplink, told to the packet tunnel beside it.
//!
//! Split-TCP's stream and the tunnel share each uplink's bottleneck but not a socket, so
//! the tunnel's receiver sees its own datagrams spread out by the stream's and its packet
//! pairs read the capacity left over, not the path's (PluriBus §4.2's estimator): the lab
//! demo with every TCP connection split dropped a third of the video in the server's send
//! queue, its scheduler holding for paths it thought slow. The gateway's stream loop
//! counts the bytes it receives on each uplink here; the tunnel's loop hands them to its
//! session (`Session::note_foreign_arrivals`), whose estimate then never falls under what
//! the path delivered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// IPv4 and UDP header bytes around each stream datagram, as the tunnel counts its own.
pub const WIRE_OVERHEAD: u64 = 28;

/// Bytes received per uplink and not yet taken, shared by the two loops.
#[derive(Clone, Debug)]
pub struct Arrivals(Arc<[AtomicU64]>);

impl Arrivals {
    pub fn new(uplinks: usize) -> Arrivals {
        Arrivals((0..uplinks).map(|_| AtomicU64::new(0)).collect())
    }

    /// A datagram of `len` bytes arrived on uplink `i`.
    pub fn add(&self, i: usize, len: usize) {
        if let Some(a) = self.0.get(i) {
            a.fetch_add(len as u64 + WIRE_OVERHEAD, Ordering::Relaxed);
        }
    }

    /// The bytes uplink `i` received since the last call.
    pub fn take(&self, i: usize) -> u64 {
        self.0.get(i).map_or(0, |a| a.swap(0, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_taken_once_per_uplink() {
        let a = Arrivals::new(2);
        let b = a.clone();
        a.add(0, 1000);
        a.add(0, 100);
        a.add(1, 72);
        a.add(5, 1);
        assert_eq!(b.take(0), 1100 + 2 * WIRE_OVERHEAD);
        assert_eq!(b.take(0), 0);
        assert_eq!(b.take(1), 100);
        assert_eq!(b.take(5), 0);
    }
}
