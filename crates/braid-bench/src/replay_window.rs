//! `replay-window`: braid's replay window per path against today's WireGuard window per key.
//! Two paths whose one-way delays differ by `Δ` carry one session's datagrams round-robin at
//! a total rate; each datagram is also held back on its path by a uniform random extra delay
//! of up to `J` (jitter, so that a path reorders its own datagrams too). Datagrams arrive in
//! the order of their arrival times. The same arrivals go (a) through braid's security layer
//! (a gateway seals, a server opens: a counter and an 8128-counter window per path) and (b)
//! through WireGuard's window over one session-wide counter: wireguard-go's
//! `replay/replay.go`, an RFC 6479 ring of 128 blocks of 64 bits accepting a counter up to
//! 8128 behind the newest (the Linux module's `COUNTER_WINDOW_SIZE` is the same). Counted:
//! legitimate datagrams refused as too old or replayed. Deterministic: no clock, the jitter
//! drawn from the seed.

use std::net::SocketAddr;
use std::time::Duration;

use braid_core::Instant;
use braid_secure::replay::WINDOW;
use braid_secure::{
    Dropped, Gateway, GatewayConfig, Load, PrivateKey, Received, Seed, Server, ServerConfig,
    DATA_HEADER_LEN, DATA_OVERHEAD, MAX_HANDSHAKE_LEN,
};
use braid_sim::Rng;
use serde_json::json;

use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct ReplayWindowBench;

const SIZE: usize = 1400;
/// One-way delay of the fast path.
const BASE_DELAY_MS: u64 = 20;

/// WireGuard's anti-replay filter (wireguard-go `replay/replay.go`, RFC 6479): a ring of
/// [`WG_BLOCKS`] 64-bit blocks over one counter per key; a counter more than
/// [`WG_WINDOW`] behind the newest is refused, as is one seen before.
struct WireGuardFilter {
    /// The newest counter accepted (0 before any).
    newest: u64,
    ring: [u64; WG_BLOCKS],
}

const WG_BLOCKS: usize = 128;
/// `CounterWindowSize`: the ring less one block.
const WG_WINDOW: u64 = (WG_BLOCKS as u64 - 1) * 64;

impl WireGuardFilter {
    fn new() -> Self {
        WireGuardFilter {
            newest: 0,
            ring: [0; WG_BLOCKS],
        }
    }

    /// Whether `counter` is accepted; marks it seen if so.
    fn validate(&mut self, counter: u64) -> bool {
        let block = counter / 64;
        if counter > self.newest {
            // Clear the blocks the window moves onto.
            let top = self.newest / 64;
            for b in 1..=(block - top).min(WG_BLOCKS as u64) {
                self.ring[((top + b) % WG_BLOCKS as u64) as usize] = 0;
            }
            self.newest = counter;
        } else if self.newest - counter > WG_WINDOW {
            return false;
        }
        let slot = &mut self.ring[(block % WG_BLOCKS as u64) as usize];
        let bit = 1u64 << (counter % 64);
        let fresh = *slot & bit == 0;
        *slot |= bit;
        fresh
    }
}

/// Refused datagrams of one cell, of `sent`.
struct Cell {
    sent: u64,
    braid_refused: u64,
    wireguard_refused: u64,
    /// The most any datagram fell behind the newest of its own path on arrival (counters).
    max_path_lag: u64,
    /// The same over the session-wide counter.
    max_session_lag: u64,
}

fn connected() -> Result<(Gateway, Server), BenchError> {
    let err = |e: braid_secure::ConfigError| BenchError::Other(e.to_string());
    let gw_key = PrivateKey::from_bytes([1; 32]);
    let srv_key = PrivateKey::from_bytes([2; 32]);
    let now = Instant::from_millis(1);
    let config = ServerConfig::new(
        srv_key.clone(),
        vec![gw_key.public_key()],
        Seed::from_u64(2),
    );
    let mut srv = Server::new(config, now).map_err(err)?;
    let config = GatewayConfig::new(
        gw_key,
        srv_key.public_key(),
        Duration::ZERO,
        Seed::from_u64(1),
    );
    let mut gw = Gateway::new(config, &[0, 1], now).map_err(err)?;
    let from = SocketAddr::from(([192, 0, 2, 1], 4000));
    let mut buf = [0u8; 2048];
    let mut reply = [0u8; MAX_HANDSHAKE_LEN];
    for _ in 0..2 {
        while let Some(t) = gw.poll_transmit(now, &mut buf) {
            if let Ok(Received::Reply { len }) =
                srv.handle(now, from, Load::Normal, &mut buf[..t.len], &mut reply)
            {
                let _ = gw.handle(now, t.path, &mut reply[..len]);
            }
        }
    }
    if gw.session().is_none() {
        return Err(BenchError::Other("the handshake did not complete".into()));
    }
    Ok((gw, srv))
}

/// One cell: `delta_ms` between the paths, `jitter_ms` of reordering within each, at
/// `rate_mbps` in total for `seconds`.
fn run_cell(
    delta_ms: u64,
    jitter_ms: u64,
    rate_mbps: u64,
    seconds: u64,
    seed: u64,
) -> Result<Cell, BenchError> {
    let (mut gw, mut srv) = connected()?;
    let mut rng = Rng::child(
        seed,
        &format!("replay-window-{delta_ms}-{jitter_ms}-{rate_mbps}"),
    );
    let interval_ns = (SIZE as u64 * 8 * 1000) / rate_mbps; // ns between datagrams
    let sent = seconds * 1_000_000_000 / interval_ns;
    // (arrival ns, session-wide number, path, path counter, sealed datagram)
    let mut arrivals: Vec<(u64, u64, u8, u64, Vec<u8>)> = Vec::with_capacity(sent as usize);
    let now = Instant::from_millis(2);
    let mut path_counter = [0u64; 2];
    for i in 0..sent {
        let path = (i % 2) as u8;
        let delay = (BASE_DELAY_MS + if path == 1 { delta_ms } else { 0 }) * 1_000_000;
        let jitter = rng.below(jitter_ms * 1_000_000 + 1);
        // The datagrams are spaced as 1400-byte ones at the rate; what they carry does not
        // matter to the windows, so only a number is sealed.
        let mut buf = vec![0u8; 8 + DATA_OVERHEAD];
        buf[DATA_HEADER_LEN..DATA_HEADER_LEN + 8].copy_from_slice(&i.to_be_bytes());
        let n = gw
            .seal(now, path, &mut buf, 8)
            .map_err(|e| BenchError::Other(e.to_string()))?;
        buf.truncate(n);
        let c = path_counter[usize::from(path)];
        path_counter[usize::from(path)] += 1;
        arrivals.push((i * interval_ns + delay + jitter, i, path, c, buf));
    }
    arrivals.sort_by_key(|a| (a.0, a.1));
    let from = SocketAddr::from(([192, 0, 2, 1], 4000));
    let mut reply = [0u8; MAX_HANDSHAKE_LEN];
    let mut wireguard = WireGuardFilter::new();
    let mut cell = Cell {
        sent,
        braid_refused: 0,
        wireguard_refused: 0,
        max_path_lag: 0,
        max_session_lag: 0,
    };
    let mut newest_path: [Option<u64>; 2] = [None; 2];
    let mut newest_session: Option<u64> = None;
    for (_, i, path, c, mut d) in arrivals {
        let top = &mut newest_path[usize::from(path)];
        cell.max_path_lag = cell
            .max_path_lag
            .max(top.map_or(0, |t| t.saturating_sub(c)));
        *top = Some(top.map_or(c, |t| t.max(c)));
        cell.max_session_lag = cell
            .max_session_lag
            .max(newest_session.map_or(0, |t| t.saturating_sub(i)));
        newest_session = Some(newest_session.map_or(i, |t| t.max(i)));
        match srv.handle(now, from, Load::Normal, &mut d, &mut reply) {
            Ok(Received::Data { .. }) => {}
            Err(Dropped::TooOld { .. } | Dropped::Replayed { .. }) => cell.braid_refused += 1,
            other => return Err(BenchError::Other(format!("datagram {i}: {other:?}"))),
        }
        if !wireguard.validate(i) {
            cell.wireguard_refused += 1;
        }
    }
    Ok(cell)
}

impl Bench for ReplayWindowBench {
    fn name(&self) -> &'static str {
        "replay-window"
    }

    fn summary(&self) -> &'static str {
        "legitimate datagrams refused under reordering across and within paths: braid's window per path vs WireGuard's per key"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let deltas: &[u64] = if opts.quick {
            &[100, 1000]
        } else {
            &[10, 100, 300, 600, 1000]
        };
        let jitters: &[u64] = if opts.quick {
            &[0, 200]
        } else {
            &[0, 10, 50, 200]
        };
        let rates: &[u64] = if opts.quick {
            &[100, 300]
        } else {
            &[20, 100, 300]
        };
        let seconds = if opts.quick { 1 } else { 2 };
        let mut table = Table::new([
            "delay difference ms",
            "jitter ms",
            "rate Mbit/s",
            "datagrams",
            "refused: braid (per path)",
            "refused: WireGuard (per key)",
            "worst lag: path / session",
        ]);
        let mut cells = Vec::new();
        let (mut worst_braid, mut worst_wg) = (0.0f64, 0.0f64);
        let grid: Vec<(u64, u64, u64)> = deltas
            .iter()
            .flat_map(|&d| {
                jitters
                    .iter()
                    .flat_map(move |&j| rates.iter().map(move |&r| (d, j, r)))
            })
            .collect();
        let total = grid.len() as f64;
        for (k, &(d, j, r)) in grid.iter().enumerate() {
            opts.progress(
                &format!("{d} ms, jitter {j} ms, {r} Mbit/s"),
                k as f64 / total,
            );
            let c = run_cell(d, j, r, seconds, opts.seed)?;
            let braid = c.braid_refused as f64 / c.sent as f64;
            let wg = c.wireguard_refused as f64 / c.sent as f64;
            worst_braid = worst_braid.max(braid);
            worst_wg = worst_wg.max(wg);
            table.row([
                d.to_string(),
                j.to_string(),
                r.to_string(),
                c.sent.to_string(),
                format!("{:.2}%", 100.0 * braid),
                format!("{:.2}%", 100.0 * wg),
                format!("{} / {}", c.max_path_lag, c.max_session_lag),
            ]);
            cells.push(json!({
                "delay_difference_ms": d,
                "jitter_ms": j,
                "rate_mbps": r,
                "datagrams": c.sent,
                "refused_braid": c.braid_refused,
                "refused_wireguard": c.wireguard_refused,
                "max_path_lag": c.max_path_lag,
                "max_session_lag": c.max_session_lag,
            }));
        }
        opts.progress("done", 1.0);
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({
                "cells": cells,
                "braid_window": WINDOW,
                "wireguard_window": WG_WINDOW,
                "worst_refused_braid": worst_braid,
                "worst_refused_wireguard": worst_wg,
            }),
            headline: Headline::new(
                "fraction of legitimate datagrams braid refuses as replays, worst cell",
                worst_braid,
                None,
                0.0,
                false,
            ),
            notes: vec![
                format!(
                    "WireGuard's window ({WG_WINDOW} counters behind the newest, one counter per key) refuses up to {:.1}% in the same cells; braid's per-path window is {WINDOW} counters",
                    100.0 * worst_wg
                ),
                format!("two paths, round-robin, 1400-byte datagrams, fast path {BASE_DELAY_MS} ms one way, no loss; jitter: each datagram held back by a uniform 0 to J ms on its own path"),
            ],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// WireGuard's filter against a set of every accepted counter: accepted at most
    /// [`WG_WINDOW`] behind the newest, once.
    #[test]
    fn the_wireguard_filter_matches_its_reference_model() {
        let mut rng = Rng::child(1, "wg-filter");
        let mut filter = WireGuardFilter::new();
        let mut seen = BTreeSet::new();
        let mut top = 0u64;
        for _ in 0..200_000 {
            // Mostly forward, sometimes far back, sometimes a jump.
            let c = match rng.below(10) {
                0 => top.saturating_sub(rng.below(2 * WG_WINDOW)),
                1 => top + rng.below(3 * WG_WINDOW),
                _ => (top + 8).saturating_sub(rng.below(64)),
            };
            let expect = (c > top || top - c <= WG_WINDOW) && !seen.contains(&c);
            assert_eq!(filter.validate(c), expect, "counter {c}, newest {top}");
            if expect {
                seen.insert(c);
                top = top.max(c);
            }
        }
        let mut f = WireGuardFilter::new();
        assert!(f.validate(WG_WINDOW + 10));
        assert!(f.validate(10));
        assert!(!f.validate(9));
        assert!(!f.validate(10));
    }

    /// Across paths only: WireGuard's 8128 counters absorb 300 ms between two paths at
    /// 100 Mbit/s (about 2700 counters) as per-path windows do; at 1000 ms (about 8900) its
    /// window refuses the slow path's first datagrams and braid's refuse nothing.
    #[test]
    fn cross_path_reordering_refuses_only_beyond_wireguards_window() {
        let c = run_cell(300, 0, 100, 1, 1).unwrap();
        assert_eq!((c.braid_refused, c.wireguard_refused), (0, 0));
        assert!(
            c.max_session_lag > 2600 && c.max_path_lag == 0,
            "{}",
            c.max_session_lag
        );
        let c = run_cell(1000, 0, 100, 1, 1).unwrap();
        assert_eq!(c.braid_refused, 0);
        assert!(c.max_session_lag > WG_WINDOW);
        assert!(c.wireguard_refused > 0);
    }

    /// Within a path: 200 ms of jitter at 300 Mbit/s puts datagrams up to about 2700 of
    /// their path's counters behind, inside braid's per-path window (8128, WireGuard's
    /// size), so nothing is refused; 1000 ms of jitter puts them about 13,000 behind, past
    /// it, and braid refuses some.
    #[test]
    fn within_path_reordering_is_refused_only_past_the_window() {
        let c = run_cell(100, 200, 300, 1, 1).unwrap();
        assert!(
            c.max_path_lag > 2600 && c.max_path_lag < WINDOW,
            "{}",
            c.max_path_lag
        );
        assert_eq!((c.braid_refused, c.wireguard_refused), (0, 0));
        let c = run_cell(100, 1000, 300, 1, 1).unwrap();
        assert!(c.max_path_lag > WINDOW, "{}", c.max_path_lag);
        assert!(c.braid_refused > 0);
    }
}
