//! `htppr-5-5` (§5.5, "Impact on the user"): two neighbours each need the same two 100 MB
//! files, each home on broadband of 7.1 Mbit/s down and 0.75 Mbit/s up, a CDN mirror behind
//! the broadband. Paper: 178 s with HTPPR, 450 s BBCDN, 1066 s BBPeer.
//!
//! - BBCDN: each home fetches both files from the CDN over its own downlink.
//! - BBPeer: each home fetches one file from the CDN and the other from its neighbour, whose
//!   uplink carries it (BitTorrent-like, all at once).
//! - HTPPR: each home fetches one file from the CDN and sends it to its neighbour over the
//!   hare (15 dB, both transfers at once on one medium), the tortoise being the two homes'
//!   broadband; a home's uplink carries its own transfer's metadata, its feedback for the
//!   other transfer and its CDN download's TCP ACKs.
//!
//! The broadband is a fluid model: a bulk TCP download fills its bottleneck at 1448/1500 of
//! its rate (no slow start: it favours the broadband baselines). The hare is braid-sim's
//! 802.11g medium running braid's HTPPR engine, each station's tortoise its share of its
//! home's uplink. HTPPR's time is the later of the CDN download and the hare transfers: the
//! CDN delivers a home's file (6.9 Mbit/s) faster than the hare forwards it, so the hare
//! never waits for data after its first chunk.

use braid_core::htppr::BlockSize;
use braid_sim::wifi::{Errors, TortoiseLink};
use serde_json::json;

use super::{parallel, run_flows_over, System};
use crate::common::f;
use crate::{Bench, BenchError, BenchReport, Headline, Options, Table};

pub struct Htppr55;

/// Broadband down and up, kbit/s (§5.5).
const DOWN_KBPS: f64 = 7100.0;
const UP_KBPS: f64 = 750.0;
/// One way between two homes over their broadband: two access links of 10 ms each.
const NEIGHBOUR_ONE_WAY_MS: f64 = 20.0;
/// The hare between the two homes (§5.5: 15 dB).
const SNR_DB: f64 = 15.0;
/// TCP payload over wire bytes for a full 1500-byte segment with timestamps.
const TCP_EFFICIENCY: f64 = 1448.0 / 1500.0;
/// Bytes on the uplink per delayed ACK (40 bytes of headers, 12 of timestamps), one per two
/// full segments.
const ACK_BYTES_PER_SEGMENTS: f64 = 52.0 / 2.0;

/// Seconds to move `bytes` through a bottleneck of `kbps` by TCP.
fn tcp_s(bytes: f64, kbps: f64) -> f64 {
    bytes * 8.0 / (kbps * 1e3 * TCP_EFFICIENCY)
}

impl Bench for Htppr55 {
    fn name(&self) -> &'static str {
        "htppr-5-5"
    }

    fn summary(&self) -> &'static str {
        "two neighbours fetching two files: HTPPR over the hare vs BBCDN and BBPeer over 7.1/0.75 Mbit/s broadband (HTPPR §5.5)"
    }

    fn run(&self, opts: &mut Options<'_>) -> Result<BenchReport, BenchError> {
        // The paper's MB are 10^6 bytes (1066 s = 100 MB at 0.75 Mbit/s).
        let file: u64 = if opts.quick { 8_000_000 } else { 100_000_000 };
        let size = file as f64;
        let seed = opts.seed;

        let cdn_one = tcp_s(size, DOWN_KBPS);
        let bbcdn = tcp_s(2.0 * size, DOWN_KBPS);
        let bbpeer = cdn_one.max(tcp_s(size, UP_KBPS));

        // A home's uplink while its CDN download runs: the download's ACKs, then the rest
        // split evenly between its two HTPPR roles (sender of its file, receiver of the other).
        let ack_kbps = DOWN_KBPS * TCP_EFFICIENCY / 1448.0 * ACK_BYTES_PER_SEGMENTS;
        let role_kbps = (UP_KBPS - ack_kbps) / 2.0;
        let tortoise = TortoiseLink {
            rate_kbps: role_kbps,
            one_way_ms: NEIGHBOUR_ONE_WAY_MS,
        };
        let htppr = System::Htppr(BlockSize::B32, 7, true);
        let flows = vec![(htppr, file, SNR_DB), (htppr, file, SNR_DB)];
        let runs = parallel(opts, self.name(), vec![flows], |flows| {
            run_flows_over(&flows, Errors::Snr, seed, 7200.0, false, tortoise)
        })
        .remove(0);
        let hare_s: Vec<f64> = runs
            .iter()
            .map(|r| {
                if r.mbps > 0.0 {
                    size * 8.0 / (r.mbps * 1e6)
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        let hare_done = hare_s.iter().copied().fold(0.0, f64::max);
        let htppr_s = cdn_one.max(hare_done);
        let hare_aggregate: f64 = runs.iter().map(|r| r.mbps).sum();
        // Uplink use of home 0: its transfer's sender side and flow 1's receiver side.
        let home_up_mean = runs[0].tortoise_tx_mbps[0] + runs[1].tortoise_tx_mbps[1];
        let home_up_peak = runs[0].tortoise_peak_mbps[0] + runs[1].tortoise_peak_mbps[1];
        let tortoise_bytes: f64 = runs
            .iter()
            .zip(&hare_s)
            .map(|(r, &t)| (r.tortoise_tx_mbps[0] + r.tortoise_tx_mbps[1]) * 1e6 / 8.0 * t)
            .sum();
        let mb = |b: f64| b / 1e6;
        let broadband = [
            ("htppr", htppr_s, 2.0 * size + tortoise_bytes),
            ("bbcdn", bbcdn, 4.0 * size),
            ("bbpeer", bbpeer, 4.0 * size),
        ];
        let mut table = Table::new(["system", "seconds", "broadband MB", "paper s"]);
        for ((name, s, bytes), paper) in broadband.iter().zip([178.0, 450.0, 1066.0]) {
            table.row([
                name.to_string(),
                f(*s, 1),
                f(mb(*bytes), 1),
                if opts.quick {
                    "-".to_string()
                } else {
                    f(paper, 0)
                },
            ]);
        }
        let ratio = bbcdn / htppr_s;
        // Each home must bring one file's worth through its own downlink (the neighbourhood
        // has neither file), so no system beats the CDN download of one file.
        let bound = bbcdn / cdn_one;
        Ok(BenchReport {
            bench: self.name().into(),
            seed,
            quick: opts.quick,
            systems: json!({
                "file_bytes": file,
                "htppr_s": htppr_s, "bbcdn_s": bbcdn, "bbpeer_s": bbpeer,
                "cdn_one_file_s": cdn_one,
                "hare_s": hare_s, "hare_aggregate_mbps": hare_aggregate,
                "home_uplink_mean_mbps": home_up_mean, "home_uplink_peak_mbps": home_up_peak,
                "uplink_acks_kbps": ack_kbps, "tortoise_role_kbps": role_kbps,
                "broadband_mb": {"htppr": mb(2.0 * size + tortoise_bytes), "bbcdn": mb(4.0 * size), "bbpeer": mb(4.0 * size)},
                "bound_bbcdn_over_any": bound,
            }),
            headline: Headline::new("BBCDN's time over HTPPR's", ratio, Some(450.0 / 178.0), 2.5, true),
            headlines: Vec::new(),
            notes: vec![
                format!(
                    "two files of {} MB; broadband {} down / {} up Mbit/s, TCP at 1448/1500 of it (fluid); hare {SNR_DB} dB, both transfers at once, autorate from 54 Mbit/s",
                    file / 1_000_000,
                    DOWN_KBPS / 1e3,
                    UP_KBPS / 1e3
                ),
                format!(
                    "hare: {:.2} Mbit/s for both transfers ({:.1} and {:.1} s); a home's tortoise use {:.3} Mbit/s mean, {:.3} peak, of {:.3} left beside its CDN ACKs ({:.0} kbit/s)",
                    hare_aggregate,
                    hare_s[0],
                    hare_s[1],
                    home_up_mean,
                    home_up_peak,
                    2.0 * role_kbps / 1e3,
                    ack_kbps
                ),
                format!(
                    "bound: both files must come through the homes' downlinks once, one file each, so no system takes less than {cdn_one:.1} s and BBCDN over any system is at most {bound:.2}; the paper's 2.53 (450/178 s) is 400 MB through one 7.1 Mbit/s link against 200 MB through a 9.1 Mbit/s hare, leaving out HTPPR's own CDN download"
                ),
            ],
            table,
        })
    }
}
