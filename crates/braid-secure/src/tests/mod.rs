//! End-to-end tests of a gateway and a server talking through an in-memory network: every
//! datagram either endpoint sends is handed to the other by the test, which can delay,
//! reorder, replay, corrupt or drop it, and change the address it comes from.

mod adversary;
mod cookies;
mod handshake;
mod rekey;
mod transport;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use braid_core::{Instant, PathId};
use rand_chacha::rand_core::SeedableRng;

use crate::*;

/// A key from a fixed seed.
pub fn key(n: u64) -> PrivateKey {
    PrivateKey::generate(&mut rand_chacha::ChaCha20Rng::seed_from_u64(n))
}

/// The source address of a gateway's path `p` (optionally after `moves` address changes).
pub fn addr(p: PathId, moves: u8) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(10, moves, p, 2), 40000 + p as u16))
}

/// A gateway and a server that allows it, over `paths`.
pub struct Net {
    pub gw: Gateway,
    pub srv: Server,
    pub now: Instant,
    pub paths: Vec<PathId>,
    /// Each path's current source address as the server sees it.
    pub from: Vec<SocketAddr>,
    pub load: Load,
}

pub const GW_KEY: u64 = 1;
pub const SRV_KEY: u64 = 2;

pub fn gateway_config(gw_key: u64) -> GatewayConfig {
    let mut c = GatewayConfig::new(
        key(gw_key),
        key(SRV_KEY).public_key(),
        Duration::from_secs(1_700_000_000),
        Seed::from_u64(100 + gw_key),
    );
    c.payload = b"bus-17 braid/0.1".to_vec();
    c
}

pub fn server_config() -> ServerConfig {
    let mut c = ServerConfig::new(
        key(SRV_KEY),
        vec![key(GW_KEY).public_key()],
        Seed::from_u64(200),
    );
    c.payload = b"server-a".to_vec();
    c
}

impl Net {
    pub fn new(paths: &[PathId]) -> Net {
        let now = Instant::from_millis(1000);
        Net {
            gw: Gateway::new(gateway_config(GW_KEY), paths, now).unwrap(),
            srv: Server::new(server_config(), now).unwrap(),
            now,
            paths: paths.to_vec(),
            from: paths.iter().map(|&p| addr(p, 0)).collect(),
            load: Load::Normal,
        }
    }

    /// A connected pair: the handshake done and confirmed on every path.
    pub fn connected(paths: &[PathId]) -> Net {
        let mut n = Net::new(paths);
        n.exchange();
        assert!(n.gw.session().is_some(), "handshake completed");
        n
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    pub fn from(&self, path: PathId) -> SocketAddr {
        let i = self.paths.iter().position(|&p| p == path).unwrap_or(0);
        self.from[i]
    }

    /// Everything the gateway wants to send right now.
    pub fn gw_transmits(&mut self) -> Vec<(PathId, Vec<u8>)> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        while let Some(t) = self.gw.poll_transmit(self.now, &mut buf) {
            out.push((t.path, buf[..t.len].to_vec()));
        }
        out
    }

    /// Hands a datagram to the server as arriving on `path`; returns what it said and the
    /// reply it wrote, if any.
    pub fn up(
        &mut self,
        path: PathId,
        mut d: Vec<u8>,
    ) -> (Result<Received, Dropped>, Option<Vec<u8>>, Vec<u8>) {
        let mut reply = [0u8; MAX_HANDSHAKE_LEN];
        let from = self.from(path);
        let r = self
            .srv
            .handle(self.now, from, self.load, &mut d, &mut reply);
        let rep = match r {
            Ok(Received::Reply { len }) => Some(reply[..len].to_vec()),
            _ => None,
        };
        (r, rep, d)
    }

    pub fn down(&mut self, path: PathId, mut d: Vec<u8>) -> (Result<Received, Dropped>, Vec<u8>) {
        let r = self.gw.handle(self.now, path, &mut d);
        (r, d)
    }

    /// Runs the timers and moves every datagram both ways until nothing moves.
    pub fn exchange(&mut self) {
        for _ in 0..10 {
            self.gw.handle_timeout(self.now);
            self.srv.handle_timeout(self.now);
            let tx = self.gw_transmits();
            if tx.is_empty() {
                return;
            }
            for (path, d) in tx {
                if let (_, Some(reply), _) = self.up(path, d) {
                    let _ = self.down(path, reply);
                }
            }
        }
    }

    /// A data datagram from the gateway on `path`.
    pub fn gw_seal(&mut self, path: PathId, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; payload.len() + DATA_OVERHEAD];
        buf[DATA_HEADER_LEN..DATA_HEADER_LEN + payload.len()].copy_from_slice(payload);
        let n = self
            .gw
            .seal(self.now, path, &mut buf, payload.len())
            .unwrap();
        buf.truncate(n);
        buf
    }

    /// A data datagram from the server on `path`.
    pub fn srv_seal(&mut self, path: PathId, payload: &[u8]) -> Vec<u8> {
        let session = self.gw.session().unwrap();
        let mut buf = vec![0u8; payload.len() + DATA_OVERHEAD];
        buf[DATA_HEADER_LEN..DATA_HEADER_LEN + payload.len()].copy_from_slice(payload);
        let n = self
            .srv
            .seal(self.now, session, path, &mut buf, payload.len())
            .unwrap();
        buf.truncate(n);
        buf
    }

    /// Delivers a gateway datagram to the server and returns the plaintext it yielded.
    pub fn server_opens(&mut self, path: PathId, d: Vec<u8>) -> Result<Vec<u8>, Dropped> {
        match self.up(path, d) {
            (Ok(Received::Data { payload, .. }), _, buf) => Ok(buf[payload].to_vec()),
            (Ok(Received::Keepalive { .. }), _, _) => Ok(Vec::new()),
            (Ok(other), _, _) => panic!("unexpected {other:?}"),
            (Err(e), _, _) => Err(e),
        }
    }

    pub fn gateway_opens(&mut self, path: PathId, d: Vec<u8>) -> Result<Vec<u8>, Dropped> {
        match self.down(path, d) {
            (Ok(Received::Data { payload, .. }), buf) => Ok(buf[payload].to_vec()),
            (Ok(Received::Keepalive { .. }), _) => Ok(Vec::new()),
            (Ok(other), _) => panic!("unexpected {other:?}"),
            (Err(e), _) => Err(e),
        }
    }

    pub fn gw_events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.gw.poll_event()).collect()
    }

    pub fn srv_events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.srv.poll_event()).collect()
    }
}

/// Proptest settings with a fixed seed, so every run tries the same cases.
pub fn fixed(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0xb4a1d),
        failure_persistence: None,
        ..Default::default()
    }
}

/// The daemon may run each endpoint on a thread of its own.
#[test]
fn endpoints_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<Gateway>();
    send::<Server>();
    send::<Stats>();
    send::<Event>();
}
