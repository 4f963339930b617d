//! The stream's arrivals per uplink, told to the packet tunnel beside it.
//!
//! Split-TCP's stream and the tunnel share each uplink's bottleneck but not a socket, so
//! the tunnel's receiver sees its own datagrams spread out by the stream's and its packet
//! pairs read the capacity left over, not the path's (PluriBus §4.2's estimator): the lab
//! demo with every TCP connection split dropped a third of the video in the server's send
//! queue, its scheduler holding for paths it thought slow. The gateway's stream loop
//! counts the bytes it receives on each uplink here; the tunnel's loop hands them to its
//! session (`Session::note_foreign_arrivals`), whose estimate then never falls under what
//! the path delivered. The server does the same per gateway ([`PeerArrivals`]): its
//! stream and tunnel sessions are apart, so the bytes are keyed by the gateway's key and
//! the path (without encryption there is no key to match, and nothing is counted).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use braid_core::PathId;
use braid_secure::PublicKey;

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

/// Bytes the server's stream received per gateway key and path, not yet taken.
#[derive(Clone, Debug, Default)]
pub struct PeerArrivals(Arc<Mutex<HashMap<(PublicKey, PathId), u64>>>);

impl PeerArrivals {
    /// Adds what one read of the socket brought (datagram lengths, without headers).
    pub fn add_all(&self, batch: &mut HashMap<(PublicKey, PathId), u64>) {
        if batch.is_empty() {
            return;
        }
        let Ok(mut m) = self.0.lock() else { return };
        for (k, n) in batch.drain() {
            *m.entry(k).or_default() += n;
        }
    }

    /// Hands every count to `f` (gateway key, path, bytes on the wire) and clears them.
    pub fn take_all(&self, mut f: impl FnMut(&PublicKey, PathId, u64)) {
        let Ok(mut m) = self.0.lock() else { return };
        for ((k, p), n) in m.drain() {
            f(&k, p, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_keys_bytes_by_gateway_and_path() {
        let a = PeerArrivals::default();
        let key = |b| braid_secure::PrivateKey::from_bytes([b; 32]).public_key();
        let (k1, k2) = (key(1), key(2));
        let mut batch = HashMap::new();
        *batch.entry((k1, 0)).or_default() += 1000 + WIRE_OVERHEAD;
        *batch.entry((k2, 0)).or_default() += 100 + WIRE_OVERHEAD;
        a.add_all(&mut batch);
        assert!(batch.is_empty());
        *batch.entry((k1, 0)).or_default() += 10 + WIRE_OVERHEAD;
        a.add_all(&mut batch);
        let mut got = Vec::new();
        a.take_all(|k, p, n| got.push((*k == k1, p, n)));
        got.sort();
        assert_eq!(got, vec![(false, 0, 128), (true, 0, 1066)]);
        let mut again = 0;
        a.take_all(|_, _, _| again += 1);
        assert_eq!(again, 0);
    }

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
