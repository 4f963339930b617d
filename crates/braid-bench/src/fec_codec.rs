//! `fec-codec`: how fast the engine codes. Evolution's XOR coding (the engine's coded-packet
//! builder and decoder) against the `reed-solomon-simd` crate, on the same packets in the
//! same run. Both produce one repair packet over a window of 10 data packets: a coded packet
//! of 9 members (the degree Evolution settles on over such a window, PluriBus §4.1) and the
//! one recovery shard of a 10% RS(10, 1) block. Decoding rebuilds one missing packet from
//! that repair packet and the 9 others. Throughput is data bytes covered per second of
//! coding: members × packet size for XOR, block × packet size for RS.

use std::hint::black_box;
use std::time::Duration;

use braid_core::fec::decoder::XorDecoder;
use braid_core::fec::rs::{original_shard, shard_len};
use braid_core::fec::xor::CodedBuilder;
use braid_core::fec::RecoveredSink;
use braid_core::LossRecoveryStats;
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
use serde_json::json;

use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct FecCodec;

/// Data packets a repair packet covers.
const WINDOW: usize = 10;

/// Counts what the decoder hands back.
struct Count(u64);

impl RecoveredSink for Count {
    fn recovered(&mut self, _seq: u32, payload: &[u8]) {
        self.0 += payload.len() as u64;
    }
}

/// Runs `op` (which covers `bytes` data bytes) for about `budget` of wall-clock time;
/// returns GB/s.
#[expect(
    clippy::disallowed_methods,
    reason = "a speed benchmark measures wall-clock time; it never feeds the engine"
)]
fn rate(budget: Duration, bytes: usize, mut op: impl FnMut()) -> f64 {
    for _ in 0..100 {
        op();
    }
    let start = std::time::Instant::now();
    let mut n = 0u64;
    let mut batch = 64u64;
    while start.elapsed() < budget {
        for _ in 0..batch {
            op();
        }
        n += batch;
        batch = (batch * 2).min(1 << 14);
    }
    (n as f64 * bytes as f64) / start.elapsed().as_secs_f64() / 1e9
}

fn packets(size: usize) -> Vec<Vec<u8>> {
    (0..WINDOW)
        .map(|i| {
            (0..size)
                .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i as u8))
                .collect()
        })
        .collect()
}

/// GB/s of (encode, decode) for Evolution's XOR with `size`-byte packets.
fn xor_rates(size: usize, budget: Duration) -> Result<(f64, f64), BenchError> {
    let pk = packets(size);
    let members = WINDOW - 1;
    let mut b = CodedBuilder::default();
    let enc = rate(budget, members * size, || {
        b.begin(8);
        for (s, p) in pk.iter().enumerate().take(members) {
            b.add(s as u32, black_box(p));
        }
        black_box(b.coded());
    });
    // Decoding: packets 0..8 are cached; the coded packet over 0..=8 minus 3, plus 9... the
    // receiver lacks packet 4 and rebuilds it each round.
    let mut dec = XorDecoder::new(braid_core::XorDecoder::Immediate);
    let mut st = LossRecoveryStats::default();
    let mut sink = Count(0);
    for (s, p) in pk.iter().enumerate().take(members) {
        dec.on_data(s as u32, p, &mut sink, &mut st);
    }
    dec.cache.remove(4);
    b.begin(8);
    for (s, p) in pk.iter().enumerate().take(members) {
        b.add(s as u32, p);
    }
    let coded = b.coded();
    let decode = rate(budget, members * size, || {
        dec.on_coded(black_box(&coded), &mut sink, &mut st);
        dec.cache.remove(4);
    });
    if st.recovered == 0 || sink.0 != st.recovered * size as u64 {
        return Err(BenchError::Other("XOR decoding recovered nothing".into()));
    }
    Ok((enc, decode))
}

/// GB/s of (encode, decode) for RS(10, 1) with `size`-byte packets, shards prepared as the
/// engine prepares them (length prefix, padding), encoder and decoder reused.
fn rs_rates(size: usize, budget: Duration) -> Result<(f64, f64), BenchError> {
    let pk = packets(size);
    let len = shard_len(size);
    let err = |e: reed_solomon_simd::Error| BenchError::Other(format!("reed-solomon: {e}"));
    let mut enc = ReedSolomonEncoder::new(WINDOW, 1, len).map_err(err)?;
    let mut shard = Vec::with_capacity(len);
    let mut recovery = vec![0u8; len];
    let mut failed = false;
    let encode = rate(budget, WINDOW * size, || {
        failed |= enc.reset(WINDOW, 1, len).is_err();
        for p in &pk {
            failed |= !original_shard(black_box(p), len, &mut shard);
            failed |= enc.add_original_shard(&shard).is_err();
        }
        match enc.encode() {
            Ok(r) => recovery.copy_from_slice(r.recovery(0).unwrap_or(&[])),
            Err(_) => failed = true,
        }
        black_box(&recovery);
    });
    let mut dec = ReedSolomonDecoder::new(WINDOW, 1, len).map_err(err)?;
    let mut out = vec![0u8; size];
    let decode = rate(budget, WINDOW * size, || {
        failed |= dec.reset(WINDOW, 1, len).is_err();
        for (i, p) in pk.iter().enumerate() {
            if i != 4 {
                failed |= !original_shard(black_box(p), len, &mut shard);
                failed |= dec.add_original_shard(i, &shard).is_err();
            }
        }
        failed |= dec.add_recovery_shard(0, &recovery).is_err();
        match dec.decode() {
            Ok(r) => match r.restored_original(4).and_then(|s| s.get(2..2 + size)) {
                Some(p) => out.copy_from_slice(p),
                None => failed = true,
            },
            Err(_) => failed = true,
        }
        black_box(&out);
    });
    if failed || out != pk[4] {
        return Err(BenchError::Other(
            "reed-solomon did not restore the packet".into(),
        ));
    }
    Ok((encode, decode))
}

impl Bench for FecCodec {
    fn name(&self) -> &'static str {
        "fec-codec"
    }

    fn summary(&self) -> &'static str {
        "encode and decode GB/s: Evolution's XOR coding vs Reed-Solomon (reed-solomon-simd), same packets"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let budget = Duration::from_millis(if opts.quick { 100 } else { 1000 });
        let sizes: &[usize] = if opts.quick { &[1200] } else { &[200, 1200] };
        let mut table = Table::new([
            "packet bytes",
            "xor encode GB/s",
            "rs encode GB/s",
            "xor decode GB/s",
            "rs decode GB/s",
        ]);
        let mut rows = Vec::new();
        let mut headline = 0.0;
        for (i, &size) in sizes.iter().enumerate() {
            opts.progress(&format!("{size} bytes"), i as f64 / sizes.len() as f64);
            let (xe, xd) = xor_rates(size, budget)?;
            let (re, rd) = rs_rates(size, budget)?;
            table.row([
                size.to_string(),
                format!("{xe:.2}"),
                format!("{re:.2}"),
                format!("{xd:.2}"),
                format!("{rd:.2}"),
            ]);
            rows.push(json!({
                "packet_bytes": size,
                "evolution_xor": { "encode_gbps": xe, "decode_gbps": xd },
                "reed_solomon": { "encode_gbps": re, "decode_gbps": rd },
            }));
            if size == 1200 {
                headline = xe / re;
            }
        }
        opts.progress("done", 1.0);
        Ok(BenchReport {
            bench: self.name().to_owned(),
            seed: opts.seed,
            quick: opts.quick,
            headlines: Vec::new(),
            systems: json!({ "sizes": rows }),
            headline: Headline::new(
                "Evolution XOR encode GB/s over Reed-Solomon encode GB/s, 1200-byte packets, one repair packet per 10",
                headline,
                None,
                2.0,
                true,
            ),
            notes: vec![
                "wall-clock figures from one machine; only the ratio is meaningful".to_owned(),
                "GB/s counts data bytes covered by the repair packet (9 x size for XOR, 10 x size for RS)".to_owned(),
                "RS timing includes preparing shards as the engine does (length prefix, zero padding)".to_owned(),
            ],
            table,
        })
    }
}
