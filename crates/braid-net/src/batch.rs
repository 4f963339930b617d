//! Gathers outgoing datagrams into GSO runs: datagrams for the same socket and destination
//! are written back to back into one buffer and leave in one `sendmsg` with a segment size,
//! as long as they are all that size (the last may be shorter; that is GSO's rule). A few
//! runs are open at once so that a session alternating between paths still batches on
//! each.

use std::net::{IpAddr, SocketAddr};

use braid_secure::SealKey;

use crate::crypto::{CryptoPool, SharedPtr};
use crate::udp::UdpPath;

/// Largest GSO run, bytes (the kernel's limit is 64 KB including headers).
const RUN_BYTES: usize = 65_000;
/// Runs open at once.
const RUNS: usize = 4;

/// Counters of the sending side.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct TxStats {
    /// `sendmsg` calls.
    pub sends: u64,
    pub datagrams: u64,
    pub bytes: u64,
    /// Datagrams the socket refused (buffer full, link down, no route): lost.
    pub errors: u64,
}

/// Where a run goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    /// Index of the socket in the caller's list.
    pub socket: usize,
    pub to: SocketAddr,
    pub from: Option<IpAddr>,
}

struct Run {
    dest: Option<Dest>,
    buf: Vec<u8>,
    used: usize,
    segment: usize,
    count: usize,
    /// The last datagram was shorter than `segment`: nothing may follow it.
    closed: bool,
    /// Order of last use, for choosing which run to send when all are busy.
    touched: u64,
}

/// A datagram in a run whose header is written but whose encryption is still to do.
struct PendingSeal {
    run: usize,
    start: usize,
    len: usize,
    key: SealKey,
}

/// The open GSO runs.
pub struct TxBatches {
    runs: Vec<Run>,
    clock: u64,
    max_segments: usize,
    /// Datagrams to encrypt before their run leaves: all at once, on two threads.
    pending: Vec<PendingSeal>,
    crypto: Option<CryptoPool>,
    pub stats: TxStats,
}

impl TxBatches {
    /// Runs of at most `max_segments` datagrams; datagrams committed with
    /// [`TxBatches::commit_sealing`] are encrypted on `crypto`'s two threads (or inline).
    pub fn new(max_segments: usize, crypto: Option<CryptoPool>) -> TxBatches {
        TxBatches {
            runs: (0..RUNS)
                .map(|_| Run {
                    dest: None,
                    buf: vec![0; RUN_BYTES],
                    used: 0,
                    segment: 0,
                    count: 0,
                    closed: false,
                    touched: 0,
                })
                .collect(),
            clock: 0,
            max_segments: max_segments.max(1),
            pending: Vec::with_capacity(RUNS * 64),
            crypto,
            stats: TxStats::default(),
        }
    }

    /// Space for the next datagram of exactly `len` bytes to `dest`; fill it, then call
    /// [`TxBatches::commit`]. Runs that cannot take it are sent first through `sockets`.
    pub fn slot(&mut self, dest: Dest, len: usize, sockets: &[Option<UdpPath>]) -> &mut [u8] {
        self.clock += 1;
        let len = len.min(RUN_BYTES);
        let i = match self.runs.iter().position(|r| r.dest == Some(dest)) {
            Some(i) => {
                let r = &self.runs[i];
                let fits = !r.closed
                    && len <= r.segment
                    && r.count < self.max_segments
                    && r.used + len <= RUN_BYTES;
                if !fits {
                    self.send(i, sockets);
                }
                i
            }
            None => {
                let i = match self.runs.iter().position(|r| r.dest.is_none()) {
                    Some(i) => i,
                    None => {
                        let oldest = (0..self.runs.len())
                            .min_by_key(|&i| self.runs[i].touched)
                            .unwrap_or(0);
                        self.send(oldest, sockets);
                        oldest
                    }
                };
                self.runs[i].dest = Some(dest);
                i
            }
        };
        let r = &mut self.runs[i];
        r.dest = Some(dest);
        r.touched = self.clock;
        let start = r.used;
        &mut r.buf[start..start + len]
    }

    /// Records the datagram written into the last [`TxBatches::slot`] for `dest`.
    pub fn commit(&mut self, dest: Dest, len: usize) {
        let Some(r) = self.runs.iter_mut().find(|r| r.dest == Some(dest)) else {
            return;
        };
        if r.count == 0 {
            r.segment = len;
        } else if len < r.segment {
            r.closed = true;
        }
        r.used += len;
        r.count += 1;
    }

    /// Records the datagram written into the last [`TxBatches::slot`] for `dest`, whose
    /// header `seal_deferred` wrote: `key` encrypts it before its run is sent.
    pub fn commit_sealing(&mut self, dest: Dest, len: usize, key: SealKey) {
        let Some(run) = self.runs.iter().position(|r| r.dest == Some(dest)) else {
            return;
        };
        let start = self.runs[run].used;
        self.commit(dest, len);
        self.pending.push(PendingSeal {
            run,
            start,
            len,
            key,
        });
    }

    /// Encrypts every pending datagram, on both threads when there is a crypto thread.
    fn seal_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut bases = [SharedPtr(std::ptr::null_mut::<u8>()); RUNS];
        for (b, r) in bases.iter_mut().zip(&mut self.runs) {
            *b = SharedPtr(r.buf.as_mut_ptr());
        }
        let pending = &self.pending;
        let seal = move |i: usize| {
            let p = &pending[i];
            // SAFETY: each pending datagram is its own range `start..start + len` of its
            // run's buffer (ranges of one run follow each other and lie within its
            // `RUN_BYTES`, checked when the slot was handed out); the buffers are not
            // touched otherwise until `run` returns.
            let d =
                unsafe { std::slice::from_raw_parts_mut(bases[p.run].get().add(p.start), p.len) };
            // Cannot fail: `seal_deferred` checked the length.
            let _ = p.key.seal(d);
        };
        match self.crypto.as_mut() {
            Some(pool) => pool.run(pending.len(), &seal),
            None => (0..pending.len()).for_each(seal),
        }
        self.pending.clear();
    }

    /// Sends every open run.
    pub fn flush(&mut self, sockets: &[Option<UdpPath>]) {
        self.seal_pending();
        for i in 0..self.runs.len() {
            self.send(i, sockets);
        }
    }

    fn send(&mut self, i: usize, sockets: &[Option<UdpPath>]) {
        if self.pending.iter().any(|p| p.run == i) {
            self.seal_pending();
        }
        let r = &mut self.runs[i];
        let Some(dest) = r.dest.take() else {
            return;
        };
        if r.count > 0 {
            let segment = (r.count > 1).then_some(r.segment);
            self.stats.sends += 1;
            let ok = sockets
                .get(dest.socket)
                .and_then(Option::as_ref)
                .map(|s| s.send(dest.to, dest.from, &r.buf[..r.used], segment));
            match ok {
                Some(Ok(())) => {
                    self.stats.datagrams += r.count as u64;
                    self.stats.bytes += r.used as u64;
                }
                Some(Err(e)) => {
                    self.stats.errors += r.count as u64;
                    tracing::trace!(error = %e, to = %dest.to, "send failed");
                }
                None => self.stats.errors += r.count as u64,
            }
        }
        r.used = 0;
        r.count = 0;
        r.segment = 0;
        r.closed = false;
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use braid_core::Instant;
    use braid_secure::{
        Gateway, GatewayConfig, Load, PrivateKey, Received, Seed, Server, ServerConfig,
        DATA_HEADER_LEN, DATA_OVERHEAD, MAX_HANDSHAKE_LEN,
    };

    use super::*;
    use crate::config::Binding;
    use crate::udp::RxBatch;

    /// A gateway and a server with a completed handshake on path 0.
    pub(super) fn connected(now: Instant) -> (Gateway, Server) {
        let gw_key = PrivateKey::generate_from_os().unwrap();
        let srv_key = PrivateKey::generate_from_os().unwrap();
        let from = SocketAddr::from(([192, 0, 2, 1], 4000));
        let config = ServerConfig::new(
            srv_key.clone(),
            vec![gw_key.public_key()],
            Seed::from_u64(1),
        );
        let mut server = Server::new(config, now).unwrap();
        let config = GatewayConfig::new(
            gw_key,
            srv_key.public_key(),
            Duration::from_secs(1_700_000_000),
            Seed::from_u64(2),
        );
        let mut gateway = Gateway::new(config, &[0], now).unwrap();
        let mut buf = [0u8; 2048];
        let mut reply = [0u8; MAX_HANDSHAKE_LEN];
        for _ in 0..2 {
            while let Some(t) = gateway.poll_transmit(now, &mut buf) {
                if let Ok(Received::Reply { len }) =
                    server.handle(now, from, Load::Normal, &mut buf[..t.len], &mut reply)
                {
                    gateway.handle(now, t.path, &mut reply[..len]).unwrap();
                }
            }
        }
        assert!(gateway.session().is_some());
        (gateway, server)
    }

    /// Datagrams whose encryption was deferred leave encrypted (by both threads), in GSO
    /// runs, in the order their counters were taken, and open at the other end.
    #[test]
    fn deferred_seals_leave_encrypted_in_order_in_gso_runs() {
        let now = Instant::from_millis(1);
        let (mut gw, mut srv) = connected(now);
        let rx = UdpPath::listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let to = rx.local_addr().unwrap();
        let tx = UdpPath::uplink(&Binding::Address("127.0.0.1".parse().unwrap()), to).unwrap();
        let sockets = vec![Some(tx)];
        let mut batches = TxBatches::new(64, Some(CryptoPool::new("test-seal").unwrap()));
        let dest = Dest {
            socket: 0,
            to,
            from: None,
        };
        const COUNT: usize = 150;
        const LEN: usize = 1000;
        for i in 0..COUNT {
            let slot = batches.slot(dest, LEN + DATA_OVERHEAD, &sockets);
            slot[DATA_HEADER_LEN..DATA_HEADER_LEN + LEN].fill(i as u8);
            let (n, key) = gw.seal_deferred(now, 0, slot, LEN).unwrap();
            batches.commit_sealing(dest, n, key);
        }
        batches.flush(&sockets);
        assert_eq!(batches.stats.datagrams, COUNT as u64);
        assert!(
            batches.stats.sends < COUNT as u64 / 10,
            "{} sends",
            batches.stats.sends
        );
        let mut got = Vec::new();
        let mut rb = RxBatch::new();
        let mut reply = [0u8; MAX_HANDSHAKE_LEN];
        // Up to 5 s of empty polls for the loopback to deliver.
        let mut tries = 1000;
        while got.len() < COUNT && tries > 0 {
            tries -= 1;
            let n = rx.recv(&mut rb).unwrap();
            if n == 0 {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            for g in 0..n {
                let (meta, bytes) = rb.group(g);
                let from = meta.addr;
                for d in bytes.chunks_mut(meta.stride.max(1)) {
                    match srv.handle(now, from, Load::Normal, d, &mut reply) {
                        Ok(Received::Data { payload, .. }) => got.push(d[payload].to_vec()),
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
        assert_eq!(got.len(), COUNT);
        for (i, p) in got.iter().enumerate() {
            assert_eq!(p.len(), LEN);
            assert!(p.iter().all(|&b| b == i as u8), "datagram {i} out of order");
        }
    }
}

#[cfg(test)]
mod rx_tests {
    use std::net::SocketAddr;

    use braid_core::Instant;
    use braid_secure::{Deferred, Dropped, Load, Received, DATA_HEADER_LEN, DATA_OVERHEAD};

    use crate::crypto::{CryptoPool, RxOpen};

    /// A received batch opened on two threads: finished in arrival order, a duplicate in
    /// the same batch refused by the replay window, a corrupted datagram refused, the rest
    /// delivered intact.
    #[test]
    fn a_batch_opens_on_two_threads_with_the_replay_window_intact() {
        let now = Instant::from_millis(1);
        let (mut gw, mut srv) = super::tests::connected(now);
        const LEN: usize = 600;
        const SLOT: usize = LEN + DATA_OVERHEAD;
        let mut buf = vec![0u8; SLOT * 42];
        for i in 0..40 {
            let d = &mut buf[i * SLOT..(i + 1) * SLOT];
            d[DATA_HEADER_LEN..DATA_HEADER_LEN + LEN].fill(i as u8);
            assert_eq!(gw.seal(now, 0, d, LEN), Ok(SLOT));
        }
        // Slot 40 repeats datagram 7; slot 41 is datagram 39 with a flipped byte.
        buf.copy_within(7 * SLOT..8 * SLOT, 40 * SLOT);
        buf.copy_within(39 * SLOT..40 * SLOT, 41 * SLOT);
        buf[41 * SLOT + DATA_HEADER_LEN] ^= 1;
        let from = SocketAddr::from(([192, 0, 2, 1], 4000));
        let mut reply = [0u8; braid_secure::MAX_HANDSHAKE_LEN];
        let mut ro: RxOpen<usize> = RxOpen::new(Some(CryptoPool::new("test-open").unwrap()));
        for i in 0..42 {
            let range = i * SLOT..(i + 1) * SLOT;
            match srv.handle_deferred(now, from, Load::Normal, &mut buf[range.clone()], &mut reply)
            {
                Ok(Deferred::Open { key, header }) => ro.push(i, range, key, header),
                other => panic!("{i}: {:?}", other.err()),
            }
        }
        ro.open_all(&mut buf);
        let mut delivered = Vec::new();
        for k in 0..ro.len() {
            let (i, range, result) = ro.result(k);
            match srv.finish_open(now, result) {
                Ok(Received::Data { payload, .. }) => {
                    let d = &buf[range][payload];
                    assert!(d.iter().all(|&b| b == i as u8) && d.len() == LEN);
                    delivered.push(i);
                }
                Err(Dropped::Replayed { .. }) => assert_eq!(i, 40),
                Err(Dropped::Forged) => assert_eq!(i, 41),
                other => panic!("{i}: {other:?}"),
            }
        }
        assert_eq!(delivered, (0..40).collect::<Vec<_>>());
        assert_eq!(srv.stats().drop_replayed, 1);
        assert_eq!(srv.stats().drop_forged, 1);
    }
}
