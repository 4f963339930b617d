//! §5.1-5.2's microbenchmarks on one link.
//!
//! - `htppr-5-1`: a clean hare (40 dB, no bit errors to speak of at 54 Mbit/s): HTPPR
//!   against iperf's UDP. HTPPR's frames carry no MAC ACK and its receiver never takes the
//!   medium; UDP's frames are MAC-acked.
//! - `htppr-fig3`: goodput against bit rate for 32, 64 and 128-byte blocks, with bit errors
//!   at 5 and 15 per full hare packet (§5.2's induced errors; a fixed count per packet would
//!   never let a short resent packet through), autorate off.
//! - `htppr-fig4`: peak tortoise use of the sender and the receiver in the same runs.

use braid_core::htppr::BlockSize;
use braid_sim::wifi::{phy, Errors};
use serde_json::{json, Map, Value};

use super::{parallel, run_flows, System};
use crate::common::f;
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct Htppr51;
pub struct HtpprFig3;
pub struct HtpprFig4;

const CLEAN_SNR: f64 = 40.0;
const TOP: usize = 7;

impl Bench for Htppr51 {
    fn name(&self) -> &'static str {
        "htppr-5-1"
    }

    fn summary(&self) -> &'static str {
        "HTPPR vs UDP on a clean 802.11g hare, feedback on the tortoise (HTPPR §5.1)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let len: u64 = if opts.quick { 16 << 20 } else { 100 << 20 };
        let udp_s = if opts.quick { 2.0 } else { 10.0 };
        let seed = opts.seed;
        let jobs = vec![
            (System::Htppr(BlockSize::B32, TOP, true), len, udp_s),
            (System::Udp(TOP), 0, udp_s),
        ];
        let r = parallel(opts, "htppr-5-1", jobs, |(sys, len, limit)| {
            let limit = if matches!(sys, System::Udp(_)) {
                limit
            } else {
                3600.0
            };
            run_flows(&[(sys, len, CLEAN_SNR)], Errors::Snr, seed, limit, false).remove(0)
        });
        let (h, u) = (&r[0], &r[1]);
        let ratio = h.mbps / u.mbps;
        let mut table = Table::new([
            "system",
            "goodput Mbit/s",
            "tortoise tx Mbit/s (sender)",
            "(receiver)",
        ]);
        table.row([
            "htppr".into(),
            f(h.mbps, 2),
            f(h.tortoise_tx_mbps[0], 3),
            f(h.tortoise_tx_mbps[1], 3),
        ]);
        table.row(["udp (iperf)".into(), f(u.mbps, 2), "-".into(), "-".into()]);
        // The bound: airtime per frame with and without the MAC ACK, and data per frame.
        let per = |bytes: usize, ack: bool| {
            (phy::DIFS_US + phy::SLOT_US * u64::from(phy::CW_MIN) / 2 + phy::frame_us(TOP, bytes))
                as f64
                + if ack {
                    (phy::SIFS_US + phy::ack_us(TOP)) as f64
                } else {
                    0.0
                }
        };
        let htppr_ideal = 1408.0 * 8.0 / per(1432 + phy::MAC_OVERHEAD + phy::UDP_OVERHEAD, false);
        let udp_ideal = 1470.0 * 8.0 / per(1470 + phy::MAC_OVERHEAD + phy::UDP_OVERHEAD, true);
        Ok(BenchReport {
            bench: self.name().into(),
            seed,
            quick: opts.quick,
            systems: json!({
                "htppr": {"goodput_mbps": h.mbps, "tortoise_sender_mbps": h.tortoise_tx_mbps[0],
                          "tortoise_receiver_mbps": h.tortoise_tx_mbps[1], "bytes": len,
                          "ideal_mbps": htppr_ideal},
                "udp": {"goodput_mbps": u.mbps, "seconds": udp_s, "ideal_mbps": udp_ideal},
                "paper": {"htppr_mbps": 37.5, "udp_mbps": 33.33, "tortoise_sender_mbps": 0.95,
                          "tortoise_receiver_mbps": 0.21},
            }),
            headline: Headline::new("HTPPR goodput over UDP's on a clean hare", ratio, Some(1.125), 1.125, true),
            headlines: Vec::new(),
            notes: vec![
                format!("802.11g at 54 Mbit/s, SNR {CLEAN_SNR} dB; tortoise 100 Mbit/s, 10 ms one way"),
                format!(
                    "airtime bound (DIFS, mean backoff, frame, and SIFS + ACK for UDP): HTPPR {:.2}, UDP {:.2} Mbit/s, ratio {:.3}",
                    htppr_ideal,
                    udp_ideal,
                    htppr_ideal / udp_ideal
                ),
                "HTPPR's 1408 data bytes a frame (44 blocks of 32) against UDP's 1470 cost it 4% of the MAC-ACK gain".into(),
            ],
            table,
        })
    }
}

/// Block sizes of Fig. 3 and 4.
const BLOCKS: [BlockSize; 3] = [BlockSize::B32, BlockSize::B64, BlockSize::B128];

/// Goodput and tortoise use for every (errors, block, rate).
fn grid(
    opts: &mut Options<'_>,
    name: &str,
    errors: &[u32],
) -> Vec<(u32, BlockSize, usize, super::FlowResult)> {
    let len: u64 = if opts.quick { 2 << 20 } else { 32 << 20 };
    let seed = opts.seed;
    let mut jobs = Vec::new();
    for &e in errors {
        for b in BLOCKS {
            for k in 0..phy::OFDM_RATES {
                jobs.push((e, b, k));
            }
        }
    }
    let results = parallel(opts, name, jobs.clone(), |(e, b, k)| {
        run_flows(
            &[(System::Htppr(b, k, false), len, CLEAN_SNR)],
            Errors::PayloadBer(f64::from(e) / (1432.0 * 8.0)),
            seed,
            3600.0,
            false,
        )
        .remove(0)
    });
    jobs.into_iter()
        .zip(results)
        .map(|((e, b, k), r)| (e, b, k, r))
        .collect()
}

impl Bench for HtpprFig3 {
    fn name(&self) -> &'static str {
        "htppr-fig3"
    }

    fn summary(&self) -> &'static str {
        "HTPPR goodput vs bit rate for 32/64/128-byte blocks, 5 and 15 bit errors a packet (HTPPR Fig. 3)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let g = grid(opts, "htppr-fig3", &[5, 15]);
        let mut table = Table::new([
            "errors",
            "block",
            "6",
            "9",
            "12",
            "18",
            "24",
            "36",
            "48",
            "54 Mbit/s",
        ]);
        let mut systems = Map::new();
        for e in [5u32, 15] {
            for b in BLOCKS {
                let row: Vec<f64> = g
                    .iter()
                    .filter(|x| x.0 == e && x.1 == b)
                    .map(|x| x.3.mbps)
                    .collect();
                let mut cells = vec![e.to_string(), format!("{} B", b.bytes())];
                cells.extend(row.iter().map(|v| f(*v, 2)));
                table.row(cells);
                systems.insert(
                    format!("errors{e}_block{}", b.bytes()),
                    json!({"goodput_mbps": row}),
                );
            }
        }
        let at = |b: BlockSize| -> Vec<f64> {
            g.iter()
                .filter(|x| x.0 == 15 && x.1 == b)
                .map(|x| x.3.mbps)
                .collect()
        };
        let (g32, g128) = (at(BlockSize::B32), at(BlockSize::B128));
        let ratio = super::mean(
            &g32.iter()
                .zip(&g128)
                .map(|(a, b)| a / b)
                .collect::<Vec<_>>(),
        );
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            systems: Value::Object(systems),
            headline: Headline::new("goodput of 32-byte blocks over 128-byte blocks, 15 errors a packet (mean over rates)", ratio, None, 1.0, true),
            headlines: Vec::new(),
            notes: vec![
                "N errors a packet: independent bit errors in every hare payload at N per full 1432-byte packet (§5.2's induced errors), resent blocks included; autorate off".into(),
                format!("one flow, SNR {CLEAN_SNR} dB otherwise; tortoise 100 Mbit/s, 10 ms one way"),
            ],
            table,
        })
    }
}

impl Bench for HtpprFig4 {
    fn name(&self) -> &'static str {
        "htppr-fig4"
    }

    fn summary(&self) -> &'static str {
        "HTPPR peak tortoise use of sender and receiver vs bit rate and block size, 15 errors a packet (HTPPR Fig. 4)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        let g = grid(opts, "htppr-fig4", &[15]);
        let mut table = Table::new([
            "block",
            "rate Mbit/s",
            "goodput",
            "sender tx peak",
            "receiver tx peak",
            "sender tx / goodput",
        ]);
        let mut systems = Map::new();
        let mut worst = 0.0f64;
        for (_, b, k, r) in &g {
            let share = r.tortoise_peak_mbps[0] / r.mbps;
            if *b == BlockSize::B32 && *k == TOP {
                worst = share;
            }
            table.row([
                format!("{} B", b.bytes()),
                (phy::RATES_KBPS[*k] / 1000).to_string(),
                f(r.mbps, 2),
                f(r.tortoise_peak_mbps[0], 3),
                f(r.tortoise_peak_mbps[1], 3),
                f(share, 4),
            ]);
            systems.insert(
                format!("block{}_rate{}", b.bytes(), phy::RATES_KBPS[*k] / 1000),
                json!({"goodput_mbps": r.mbps, "sender_peak_mbps": r.tortoise_peak_mbps[0],
                       "receiver_peak_mbps": r.tortoise_peak_mbps[1]}),
            );
        }
        Ok(BenchReport {
            bench: self.name().into(),
            seed: opts.seed,
            quick: opts.quick,
            systems: Value::Object(systems),
            headline: Headline::new(
                "sender's peak tortoise use over hare goodput, 32-byte blocks, 15 errors, 54 Mbit/s",
                worst,
                Some(1.4 / 33.0),
                0.02,
                false,
            ),
            headlines: Vec::new(),
            notes: vec![
                "peak: the busiest second; tortoise bytes count a 2-byte length prefix per message".into(),
                "paper: at most 1.4 (sender) and 0.7 Mbit/s (receiver) for about 33 Mbit/s of goodput".into(),
            ],
            table,
        })
    }
}
