//! `secure-transport`: how fast the security layer seals and opens 1400-byte datagrams, against
//! the bare AEAD call in the same run, so the envelope's cost (header, session lookup, the
//! path's counter and replay window, statistics) shows as a ratio. Also the RustCrypto
//! `chacha20poly1305` crate on the same buffers, the alternative to `ring` that the layer
//! does not use, and the rate of full handshakes.
//!
//! Each round fills a batch of 256 buffers with plaintext (not timed), seals the batch
//! (timed), then opens it (timed), as a batched event loop would; braid's datagrams go
//! round-robin over four paths.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

use braid_core::Instant;
use braid_secure::{
    Gateway, GatewayConfig, Load, PrivateKey, Received, Seed, Server, ServerConfig,
    DATA_HEADER_LEN, DATA_OVERHEAD, MAX_HANDSHAKE_LEN, TAG_LEN,
};
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{ChaCha20Poly1305, KeyInit};
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, CHACHA20_POLY1305};
use serde_json::json;

use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct SecureTransport;

/// Plaintext bytes per datagram.
const SIZE: usize = 1400;
/// Datagrams per batch.
const BATCH: usize = 256;
/// Paths braid's datagrams go round-robin over.
const PATHS: u8 = 4;

/// One system under test: seals a batch in place, opens it in place.
trait Crypto {
    /// Seals `buf[DATA_HEADER_LEN..DATA_HEADER_LEN + SIZE]` in place.
    fn seal(&mut self, i: u64, buf: &mut [u8]);
    /// Opens in place; false if it does not authenticate.
    fn open(&mut self, buf: &mut [u8]) -> bool;
}

/// ChaCha20-Poly1305 through `ring`: the bare AEAD call, with a 16-byte header as
/// associated data and a counter nonce. The baseline.
struct RingAead {
    key: LessSafeKey,
    counter: u64,
}

fn nonce(c: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&c.to_be_bytes());
    n
}

impl Crypto for RingAead {
    fn seal(&mut self, i: u64, buf: &mut [u8]) {
        let (head, rest) = buf.split_at_mut(DATA_HEADER_LEN);
        head[8..16].copy_from_slice(&i.to_be_bytes());
        let aad: [u8; DATA_HEADER_LEN] = head.try_into().unwrap_or_default();
        let (body, tail) = rest.split_at_mut(SIZE);
        if let Ok(tag) = self.key.seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce(i)),
            Aad::from(aad),
            body,
        ) {
            tail[..TAG_LEN].copy_from_slice(tag.as_ref());
        }
    }

    fn open(&mut self, buf: &mut [u8]) -> bool {
        let aad: [u8; DATA_HEADER_LEN] = buf[..DATA_HEADER_LEN].try_into().unwrap_or_default();
        self.counter = u64::from_be_bytes(aad[8..16].try_into().unwrap_or_default());
        let n = buf.len();
        let Ok(tag) = Tag::try_from(&buf[n - TAG_LEN..]) else {
            return false;
        };
        self.key
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce(self.counter)),
                Aad::from(aad),
                tag,
                &mut buf[DATA_HEADER_LEN..n - TAG_LEN],
                0..,
            )
            .is_ok()
    }
}

/// The same through the RustCrypto crate.
struct RustCryptoAead {
    key: ChaCha20Poly1305,
}

impl Crypto for RustCryptoAead {
    fn seal(&mut self, i: u64, buf: &mut [u8]) {
        let (head, rest) = buf.split_at_mut(DATA_HEADER_LEN);
        head[8..16].copy_from_slice(&i.to_be_bytes());
        let (body, tail) = rest.split_at_mut(SIZE);
        if let Ok(tag) = self
            .key
            .encrypt_in_place_detached(&nonce(i).into(), head, body)
        {
            tail[..TAG_LEN].copy_from_slice(&tag);
        }
    }

    fn open(&mut self, buf: &mut [u8]) -> bool {
        let n = buf.len();
        let c = u64::from_be_bytes(buf[8..16].try_into().unwrap_or_default());
        let (head, rest) = buf.split_at_mut(DATA_HEADER_LEN);
        let (body, tag) = rest.split_at_mut(n - DATA_OVERHEAD);
        self.key
            .decrypt_in_place_detached(&nonce(c).into(), head, body, (&*tag).into())
            .is_ok()
    }
}

/// braid's security layer: a gateway seals, the server opens, over a live session.
struct Braid {
    gw: Gateway,
    srv: Server,
    now: Instant,
    from: SocketAddr,
    reply: [u8; MAX_HANDSHAKE_LEN],
}

impl Braid {
    fn new() -> Result<Braid, BenchError> {
        let err = |e: braid_secure::ConfigError| BenchError::Other(e.to_string());
        let gw_key = PrivateKey::from_bytes([1; 32]);
        let srv_key = PrivateKey::from_bytes([2; 32]);
        let now = Instant::from_millis(1);
        let mut srv = Server::new(
            ServerConfig::new(
                srv_key.clone(),
                vec![gw_key.public_key()],
                Seed::from_u64(2),
            ),
            now,
        )
        .map_err(err)?;
        let paths: Vec<u8> = (0..PATHS).collect();
        let config = GatewayConfig::new(
            gw_key,
            srv_key.public_key(),
            Duration::from_secs(1 << 30),
            Seed::from_u64(1),
        );
        let mut gw = Gateway::new(config, &paths, now).map_err(err)?;
        let from = SocketAddr::from(([127, 0, 0, 1], 4000));
        let mut reply = [0; MAX_HANDSHAKE_LEN];
        handshake(&mut gw, &mut srv, now, from, &mut reply);
        if gw.session().is_none() {
            return Err(BenchError::Other("the handshake did not complete".into()));
        }
        Ok(Braid {
            gw,
            srv,
            now,
            from,
            reply,
        })
    }
}

/// Moves handshake messages and keepalives between the two until nothing moves.
fn handshake(
    gw: &mut Gateway,
    srv: &mut Server,
    now: Instant,
    from: SocketAddr,
    reply: &mut [u8; MAX_HANDSHAKE_LEN],
) {
    let mut buf = [0u8; 2048];
    for _ in 0..4 {
        gw.handle_timeout(now);
        while let Some(t) = gw.poll_transmit(now, &mut buf) {
            if let Ok(Received::Reply { len }) =
                srv.handle(now, from, Load::Normal, &mut buf[..t.len], reply)
            {
                let _ = gw.handle(now, t.path, &mut reply[..len]);
            }
        }
    }
}

impl Crypto for Braid {
    fn seal(&mut self, i: u64, buf: &mut [u8]) {
        let _ = self.gw.seal(self.now, (i % PATHS as u64) as u8, buf, SIZE);
    }

    fn open(&mut self, buf: &mut [u8]) -> bool {
        matches!(
            self.srv
                .handle(self.now, self.from, Load::Normal, buf, &mut self.reply),
            Ok(Received::Data { .. })
        )
    }
}

fn median(v: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// GB/s sealing, GB/s opening, GB/s and Mpps of seal + open.
struct Rates {
    seal_gbps: f64,
    open_gbps: f64,
    both_gbps: f64,
    both_mpps: f64,
}

#[expect(
    clippy::disallowed_methods,
    reason = "a speed benchmark measures wall-clock time; it never feeds the engine"
)]
fn measure(c: &mut dyn Crypto, budget: Duration) -> Result<Rates, BenchError> {
    let plain: Vec<u8> = (0..SIZE).map(|i| (i * 7) as u8).collect();
    let mut batch = vec![vec![0u8; SIZE + DATA_OVERHEAD]; BATCH];
    let (mut seal_t, mut open_t) = (Duration::ZERO, Duration::ZERO);
    let mut datagrams = 0u64;
    let mut i = 0u64;
    let start = std::time::Instant::now();
    let mut rounds = 0;
    while start.elapsed() < budget || rounds < 3 {
        for b in &mut batch {
            b[DATA_HEADER_LEN..DATA_HEADER_LEN + SIZE].copy_from_slice(&plain);
        }
        let t = std::time::Instant::now();
        for b in &mut batch {
            c.seal(i, black_box(b));
            i += 1;
        }
        let sealed = t.elapsed();
        let t = std::time::Instant::now();
        let mut ok = 0;
        for b in &mut batch {
            ok += usize::from(c.open(black_box(b)));
        }
        let opened = t.elapsed();
        if ok != BATCH || batch[BATCH - 1][DATA_HEADER_LEN..DATA_HEADER_LEN + SIZE] != plain[..] {
            return Err(BenchError::Other(format!(
                "only {ok} of {BATCH} datagrams opened to the plaintext"
            )));
        }
        // The first round warms caches and tables up.
        rounds += 1;
        if rounds > 1 {
            seal_t += sealed;
            open_t += opened;
            datagrams += BATCH as u64;
        }
    }
    let bytes = datagrams as f64 * SIZE as f64;
    let both = (seal_t + open_t).as_secs_f64();
    Ok(Rates {
        seal_gbps: bytes / seal_t.as_secs_f64() / 1e9,
        open_gbps: bytes / open_t.as_secs_f64() / 1e9,
        both_gbps: bytes / both / 1e9,
        both_mpps: datagrams as f64 / both / 1e6,
    })
}

/// Full handshakes (a rekey each: the gateway's initiation, the server's response, the
/// gateway's completion) per second.
#[expect(
    clippy::disallowed_methods,
    reason = "a speed benchmark measures wall-clock time; it never feeds the engine"
)]
fn handshakes_per_s(b: &mut Braid, budget: Duration) -> Result<f64, BenchError> {
    let before = b.gw.stats().handshakes;
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget || n < 10 {
        b.now += braid_secure::limits::REKEY_AFTER_TIME;
        handshake(&mut b.gw, &mut b.srv, b.now, b.from, &mut b.reply);
        n += 1;
    }
    let done = b.gw.stats().handshakes - before;
    if done != n {
        return Err(BenchError::Other(format!(
            "{done} of {n} handshakes completed"
        )));
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

impl Bench for SecureTransport {
    fn name(&self) -> &'static str {
        "secure-transport"
    }

    fn summary(&self) -> &'static str {
        "seal + open GB/s of 1400-byte datagrams through braid-secure vs the bare AEAD (ring, RustCrypto)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        // Systems take turns in short slices, so that the load of a shared machine falls
        // on all of them alike; each figure is the median over the slices.
        let slice = Duration::from_millis(50);
        let turns = if opts.quick { 5 } else { 40 };
        let key = [9u8; 32];
        let ring_key = UnboundKey::new(&CHACHA20_POLY1305, &key)
            .map_err(|_| BenchError::Other("ring refused the key".into()))?;
        let mut systems: Vec<(&str, Box<dyn Crypto>)> = vec![
            (
                "aead-ring",
                Box::new(RingAead {
                    key: LessSafeKey::new(ring_key),
                    counter: 0,
                }),
            ),
            (
                "aead-rustcrypto",
                Box::new(RustCryptoAead {
                    key: ChaCha20Poly1305::new(&key.into()),
                }),
            ),
            ("braid-secure", Box::new(Braid::new()?)),
        ];
        let mut samples: Vec<Vec<Rates>> = systems.iter().map(|_| Vec::new()).collect();
        for turn in 0..turns {
            opts.progress("sealing and opening", turn as f64 / (turns as f64 + 1.0));
            for (i, (_, sys)) in systems.iter_mut().enumerate() {
                samples[i].push(measure(sys.as_mut(), slice)?);
            }
        }
        let mut table = Table::new(["system", "seal GB/s", "open GB/s", "seal+open GB/s", "Mpps"]);
        let mut out = serde_json::Map::new();
        let mut both = Vec::new();
        for ((name, _), s) in systems.iter().zip(&samples) {
            let r = Rates {
                seal_gbps: median(s.iter().map(|r| r.seal_gbps)),
                open_gbps: median(s.iter().map(|r| r.open_gbps)),
                both_gbps: median(s.iter().map(|r| r.both_gbps)),
                both_mpps: median(s.iter().map(|r| r.both_mpps)),
            };
            table.row([
                name.to_string(),
                format!("{:.2}", r.seal_gbps),
                format!("{:.2}", r.open_gbps),
                format!("{:.2}", r.both_gbps),
                format!("{:.2}", r.both_mpps),
            ]);
            out.insert(
                name.to_string(),
                json!({
                    "seal_gbps": r.seal_gbps,
                    "open_gbps": r.open_gbps,
                    "seal_open_gbps": r.both_gbps,
                    "seal_open_mpps": r.both_mpps,
                }),
            );
            both.push(r.both_gbps);
        }
        let budget = slice * turns.min(10);
        opts.progress("handshakes", turns as f64 / (turns as f64 + 1.0));
        let mut braid = Braid::new()?;
        let hs = handshakes_per_s(&mut braid, budget)?;
        out.insert("handshakes".into(), json!({ "per_s": hs }));
        opts.progress("done", 1.0);
        let ratio = both[2] / both[0];
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: serde_json::Value::Object(out),
            headline: Headline::new(
                "braid-secure seal+open GB/s over the bare ring AEAD's, 1400-byte datagrams",
                ratio,
                None,
                0.9,
                true,
            ),
            notes: vec![
                format!("wall-clock figures from one core of a shared machine, medians of {turns} slices of 50 ms per system taken in turns; the ratios are what compare"),
                format!(
                    "ring over RustCrypto chacha20poly1305: {:.2}x; full handshakes (rekeys): {hs:.0} per second",
                    both[0] / both[1]
                ),
                "braid-secure includes the envelope header, the session lookup, the path's counter and replay window and the statistics, both ends".to_owned(),
            ],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every system's datagrams open to their plaintext (the measurement checks it), and
    /// handshakes complete; no speed is asserted.
    #[test]
    fn every_system_round_trips() {
        let key = [5u8; 32];
        let mut ring = RingAead {
            key: LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).unwrap()),
            counter: 0,
        };
        let mut rc = RustCryptoAead {
            key: ChaCha20Poly1305::new(&key.into()),
        };
        let mut braid = Braid::new().unwrap();
        for sys in [&mut ring as &mut dyn Crypto, &mut rc, &mut braid] {
            measure(sys, Duration::ZERO).unwrap();
        }
        assert!(handshakes_per_s(&mut braid, Duration::ZERO).unwrap() > 0.0);
        assert_eq!(braid.srv.stats().dropped(), 0);
    }
}
