//! `replay-window`: why braid keeps a replay window per path where WireGuard keeps one per
//! key. Two paths whose one-way delays differ by `Δ` carry one session's datagrams
//! round-robin at a total rate; datagrams arrive in the order of their arrival times, so the
//! fast path's overtake the slow path's. The same arrivals go (a) through braid's security
//! layer (a gateway seals, a server opens: a counter and window per path) and (b) through a
//! single WireGuard-size window over one session-wide counter. Counted: legitimate datagrams
//! refused as too old. Deterministic: no clock, no randomness.

use std::net::SocketAddr;
use std::time::Duration;

use braid_core::Instant;
use braid_secure::replay::{ReplayWindow, WINDOW};
use braid_secure::{
    Dropped, Gateway, GatewayConfig, Load, PrivateKey, Received, Seed, Server, ServerConfig,
    DATA_HEADER_LEN, DATA_OVERHEAD, MAX_HANDSHAKE_LEN,
};
use serde_json::json;

use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct ReplayWindowBench;

const SIZE: usize = 1400;
/// One-way delay of the fast path.
const BASE_DELAY_MS: u64 = 20;

/// Refused datagrams of one cell: (braid per-path windows, one WireGuard window), of `sent`.
struct Cell {
    sent: u64,
    per_path_refused: u64,
    single_refused: u64,
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

fn run_cell(delta_ms: u64, rate_mbps: u64, seconds: u64) -> Result<Cell, BenchError> {
    let (mut gw, mut srv) = connected()?;
    let interval_ns = (SIZE as u64 * 8 * 1000) / rate_mbps; // ns between datagrams
    let sent = seconds * 1_000_000_000 / interval_ns;
    // (arrival ns, session-wide number, path, sealed datagram)
    let mut arrivals: Vec<(u64, u64, u8, Vec<u8>)> = Vec::with_capacity(sent as usize);
    let now = Instant::from_millis(2);
    for i in 0..sent {
        let path = (i % 2) as u8;
        let delay = (BASE_DELAY_MS + if path == 1 { delta_ms } else { 0 }) * 1_000_000;
        // The datagrams are spaced as 1400-byte ones at the rate; what they carry does not
        // matter to the windows, so only a number is sealed.
        let mut buf = vec![0u8; 8 + DATA_OVERHEAD];
        buf[DATA_HEADER_LEN..DATA_HEADER_LEN + 8].copy_from_slice(&i.to_be_bytes());
        let n = gw
            .seal(now, path, &mut buf, 8)
            .map_err(|e| BenchError::Other(e.to_string()))?;
        buf.truncate(n);
        arrivals.push((i * interval_ns + delay, i, path, buf));
    }
    arrivals.sort_by_key(|a| (a.0, a.1));
    let from = SocketAddr::from(([192, 0, 2, 1], 4000));
    let mut reply = [0u8; MAX_HANDSHAKE_LEN];
    let mut single = ReplayWindow::default();
    let mut cell = Cell {
        sent,
        per_path_refused: 0,
        single_refused: 0,
    };
    for (_, i, _, mut d) in arrivals {
        match srv.handle(now, from, Load::Normal, &mut d, &mut reply) {
            Ok(Received::Data { .. }) => {}
            Err(Dropped::TooOld { .. } | Dropped::Replayed { .. }) => cell.per_path_refused += 1,
            other => return Err(BenchError::Other(format!("datagram {i}: {other:?}"))),
        }
        if single.check(i).is_ok() {
            single.commit(i);
        } else {
            cell.single_refused += 1;
        }
    }
    Ok(cell)
}

impl Bench for ReplayWindowBench {
    fn name(&self) -> &'static str {
        "replay-window"
    }

    fn summary(&self) -> &'static str {
        "legitimate datagrams refused under cross-path reordering: braid's window per path vs one WireGuard window"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let deltas: &[u64] = if opts.quick {
            &[100, 500]
        } else {
            &[10, 50, 100, 300, 600]
        };
        let rates: &[u64] = if opts.quick { &[100] } else { &[20, 100, 300] };
        let seconds = if opts.quick { 1 } else { 2 };
        let mut table = Table::new([
            "delay difference ms",
            "rate Mbit/s",
            "datagrams",
            "refused: per path",
            "refused: one window",
        ]);
        let mut cells = Vec::new();
        let mut worst_per_path = 0.0f64;
        let mut worst_single = 0.0f64;
        let total = (deltas.len() * rates.len()) as f64;
        for (k, (&d, &r)) in deltas
            .iter()
            .flat_map(|d| rates.iter().map(move |r| (d, r)))
            .enumerate()
        {
            opts.progress(&format!("{d} ms, {r} Mbit/s"), k as f64 / total);
            let c = run_cell(d, r, seconds)?;
            let pp = c.per_path_refused as f64 / c.sent as f64;
            let single = c.single_refused as f64 / c.sent as f64;
            worst_per_path = worst_per_path.max(pp);
            worst_single = worst_single.max(single);
            table.row([
                d.to_string(),
                r.to_string(),
                c.sent.to_string(),
                format!("{:.2}%", 100.0 * pp),
                format!("{:.2}%", 100.0 * single),
            ]);
            cells.push(json!({
                "delay_difference_ms": d,
                "rate_mbps": r,
                "datagrams": c.sent,
                "refused_per_path": c.per_path_refused,
                "refused_single_window": c.single_refused,
            }));
        }
        opts.progress("done", 1.0);
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "cells": cells }),
            headline: Headline::new(
                "fraction of legitimate datagrams braid refuses as replays, worst cell",
                worst_per_path,
                None,
                0.0,
                false,
            ),
            notes: vec![
                format!(
                    "one WireGuard window ({WINDOW} counters behind the newest) over a session-wide counter refuses up to {:.1}% in the same cells",
                    100.0 * worst_single
                ),
                format!("two paths, round-robin, 1400-byte datagrams, fast path {BASE_DELAY_MS} ms one way, no loss, no jitter"),
            ],
            table,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 300 ms of delay difference at 100 Mbit/s: the slow path falls about 2700 datagrams
    /// behind, beyond one WireGuard window; per-path windows take everything.
    #[test]
    fn per_path_windows_refuse_nothing_where_one_window_refuses_the_slow_path() {
        let c = run_cell(300, 100, 1).unwrap();
        assert_eq!(c.per_path_refused, 0);
        assert!(
            c.single_refused > c.sent / 3,
            "{} of {}",
            c.single_refused,
            c.sent
        );
        let c = run_cell(50, 100, 1).unwrap();
        assert_eq!((c.per_path_refused, c.single_refused), (0, 0));
    }
}
