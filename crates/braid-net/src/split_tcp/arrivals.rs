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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use braid_core::PathId;
use braid_secure::PublicKey;

/// IPv4 and UDP header bytes around each stream datagram, as the tunnel counts its own.
pub const WIRE_OVERHEAD: u64 = 28;

/// How often at least the tunnel's loop takes the stream's traffic and gives back its
/// holds while a session meters: the stream may overrun a spent budget by what it sends in
/// this long (10 ms of a metered uplink, a few datagrams).
pub const METER_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// What the stream did on one path since the tunnel's loop last took it, for the tunnel's
/// metering (`Session::note_foreign_traffic`): bytes sent and acknowledged on the wire,
/// and whether its window there was full when last told.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub sent: u64,
    pub acked: u64,
    pub full: bool,
}

/// One uplink's counts, shared by the two loops.
#[derive(Debug, Default)]
struct Uplink {
    rx: AtomicU64,
    sent: AtomicU64,
    acked: AtomicU64,
    full: AtomicBool,
    /// What the tunnel's metering lets the stream send on it, bytes on the wire
    /// ([`NO_LIMIT`]: no limit).
    allowance: AtomicU64,
}

/// [`Uplink::allowance`] without a limit.
const NO_LIMIT: u64 = u64::MAX;

/// Bytes received per uplink and not yet taken, shared by the two loops, and the metering
/// exchange: the stream's traffic per uplink one way, the tunnel's allowances the other.
#[derive(Clone, Debug)]
pub struct Arrivals(Arc<[Uplink]>);

impl Arrivals {
    pub fn new(uplinks: usize) -> Arrivals {
        Arrivals(
            (0..uplinks)
                .map(|_| Uplink {
                    allowance: AtomicU64::new(NO_LIMIT),
                    ..Uplink::default()
                })
                .collect(),
        )
    }

    /// A datagram of `len` bytes arrived on uplink `i`.
    pub fn add(&self, i: usize, len: usize) {
        if let Some(a) = self.0.get(i) {
            a.rx.fetch_add(len as u64 + WIRE_OVERHEAD, Ordering::Relaxed);
        }
    }

    /// The bytes uplink `i` received since the last call.
    pub fn take(&self, i: usize) -> u64 {
        self.0.get(i).map_or(0, |a| a.rx.swap(0, Ordering::Relaxed))
    }

    /// The stream sent a datagram of `len` bytes on uplink `i`.
    pub fn sent(&self, i: usize, len: usize) {
        if let Some(a) = self.0.get(i) {
            a.sent
                .fetch_add(len as u64 + WIRE_OVERHEAD, Ordering::Relaxed);
        }
    }

    /// The stream's side: `acked` more bytes acknowledged on uplink `i` and whether its
    /// window there is full; returns what the stream may still send there (bytes on the
    /// wire, `None` for no limit): the tunnel's latest allowance less what the stream sent
    /// that the tunnel has not counted yet.
    pub fn exchange(&self, i: usize, acked: u64, full: bool) -> Option<u64> {
        let a = self.0.get(i)?;
        a.acked.fetch_add(acked, Ordering::Relaxed);
        a.full.store(full, Ordering::Relaxed);
        let allowance = a.allowance.load(Ordering::Relaxed);
        (allowance != NO_LIMIT).then(|| allowance.saturating_sub(a.sent.load(Ordering::Relaxed)))
    }

    /// The tunnel's side: uplink `i`'s traffic since the last call to `f`, which answers
    /// what the stream may send there from now (`Session::stream_allowance`).
    pub fn meter(&self, i: usize, f: impl FnOnce(Traffic) -> Option<u64>) {
        let Some(a) = self.0.get(i) else { return };
        let t = Traffic {
            sent: a.sent.swap(0, Ordering::Relaxed),
            acked: a.acked.swap(0, Ordering::Relaxed),
            full: a.full.load(Ordering::Relaxed),
        };
        a.allowance
            .store(f(t).unwrap_or(NO_LIMIT), Ordering::Relaxed);
    }
}

/// One gateway path's counts at the server.
#[derive(Clone, Copy, Debug, Default)]
struct PeerPath {
    rx: u64,
    traffic: Traffic,
    /// What the tunnel's metering lets the stream send, bytes on the wire.
    allowance: Option<u64>,
}

/// Bytes the server's stream received per gateway key and path, not yet taken, and the
/// metering exchange per gateway and path ([`Arrivals`]'s, keyed).
#[derive(Clone, Debug, Default)]
pub struct PeerArrivals(Arc<Mutex<HashMap<(PublicKey, PathId), PeerPath>>>);

impl PeerArrivals {
    /// Adds what one read of the socket brought (datagram lengths, without headers).
    pub fn add_all(&self, batch: &mut HashMap<(PublicKey, PathId), u64>) {
        if batch.is_empty() {
            return;
        }
        let Ok(mut m) = self.0.lock() else { return };
        for (k, n) in batch.drain() {
            m.entry(k).or_default().rx += n;
        }
    }

    /// The stream's side for gateway `key`'s `path`: what it sent and had acknowledged
    /// since the last call, and whether its window is full; returns what it may still send
    /// there (as [`Arrivals::exchange`]).
    pub fn exchange(&self, key: &PublicKey, path: PathId, t: Traffic) -> Option<u64> {
        let Ok(mut m) = self.0.lock() else {
            return None;
        };
        let e = m.entry((*key, path)).or_default();
        e.traffic.sent += t.sent;
        e.traffic.acked += t.acked;
        e.traffic.full = t.full;
        e.allowance.map(|a| a.saturating_sub(e.traffic.sent))
    }

    /// Hands every count to `f` (gateway key, path, bytes received on the wire, the
    /// stream's traffic) and clears them; `f` answers what the stream may send there.
    pub fn take_all(&self, mut f: impl FnMut(&PublicKey, PathId, u64, Traffic) -> Option<u64>) {
        let Ok(mut m) = self.0.lock() else { return };
        for ((k, p), e) in m.iter_mut() {
            e.allowance = f(k, *p, e.rx, e.traffic);
            e.rx = 0;
            e.traffic.sent = 0;
            e.traffic.acked = 0;
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
        a.take_all(|k, p, n, _| {
            got.push((*k == k1, p, n));
            None
        });
        got.sort();
        assert_eq!(got, vec![(false, 0, 128), (true, 0, 1066)]);
        let mut again = 0;
        a.take_all(|_, _, n, _| {
            again += n;
            None
        });
        assert_eq!(again, 0);
    }

    #[test]
    fn the_stream_tells_its_traffic_and_reads_the_tunnels_allowance() {
        let a = Arrivals::new(2);
        a.sent(1, 1000);
        a.sent(1, 72);
        assert_eq!(a.exchange(1, 500, true), None);
        let mut seen = None;
        a.meter(1, |t| {
            seen = Some(t);
            Some(10_000)
        });
        let t = Traffic {
            sent: 1072 + 2 * WIRE_OVERHEAD,
            acked: 500,
            full: true,
        };
        assert_eq!(seen, Some(t));
        assert_eq!(a.exchange(1, 0, false), Some(10_000));
        // Sent since the tunnel counted: taken off what is left.
        a.sent(1, 972);
        assert_eq!(a.exchange(1, 0, false), Some(9_000));
        assert_eq!(a.exchange(0, 0, false), None);
        a.meter(1, |t| {
            assert_eq!((t.sent, t.acked, t.full), (1000, 0, false));
            None
        });
        assert_eq!(a.exchange(1, 0, false), None);

        let p = PeerArrivals::default();
        let key = braid_secure::PrivateKey::from_bytes([3; 32]).public_key();
        assert_eq!(p.exchange(&key, 1, t), None);
        let mut got = Vec::new();
        p.take_all(|_, path, _, t| {
            got.push((path, t));
            Some(5000)
        });
        assert_eq!(got, vec![(1, t)]);
        assert_eq!(p.exchange(&key, 1, Traffic::default()), Some(5000));
        let more = Traffic {
            sent: 1500,
            ..Traffic::default()
        };
        assert_eq!(p.exchange(&key, 1, more), Some(3500));
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
