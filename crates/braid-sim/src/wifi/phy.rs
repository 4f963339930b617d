//! The 802.11g physical layer of the simulated hare: bit rates, frame airtime and the bit
//! error rate at a given SNR.
//!
//! Error model: a log-linear fit, `log10 BER = −5 − (SNR − SNR_k) / 2.5 dB`, where `SNR_k`
//! is the SNR rate `k` needs for a BER of 1e-5 (≈8% PER on a 1000-byte frame, the PER at
//! which 802.11 states receiver sensitivity). The `SNR_k` differ as the minimum receiver
//! sensitivities of IEEE 802.11-2012 Table 18-14 (−82, −81, −79, −77, −74, −70, −66, −65
//! dBm for 6…54 Mbit/s), anchored at 12 dB for 6 Mbit/s. 2.5 dB per decade is the slope of
//! measured 802.11a/g BER-SNR curves in SoftRate (Vutukuru et al., SIGCOMM '09, Fig. 2),
//! which is also where HTPPR's heuristic comes from: at one SNR the BER rises about tenfold
//! per rate step (here 2.5x-40x, geometric mean 9.4x). 802.11b's 11 Mbit/s CCK (Hop's lowest
//! rate) sits at its own sensitivity, −76 dBm (802.11-2012 Table 17-4, 8% PER at 1024 B).

use crate::Rng;

/// 802.11g OFDM rates and 802.11b's 11 Mbit/s, kbit/s.
pub const RATES_KBPS: [u32; 9] = [6000, 9000, 12000, 18000, 24000, 36000, 48000, 54000, 11000];
/// The index of 802.11b's 11 Mbit/s in [`RATES_KBPS`] (not in the OFDM ladder).
pub const RATE_11B: usize = 8;
/// The OFDM ladder, lowest first: indices 0..8 of [`RATES_KBPS`].
pub const OFDM_RATES: usize = 8;
/// Minimum receiver sensitivity, dBm (802.11-2012 Tables 18-14 and 17-4).
const SENSITIVITY_DBM: [f64; 9] = [
    -82.0, -81.0, -79.0, -77.0, -74.0, -70.0, -66.0, -65.0, -76.0,
];
/// Data bits per 4 µs OFDM symbol (N_DBPS).
const BITS_PER_SYMBOL: [u64; 8] = [24, 36, 48, 72, 96, 144, 192, 216];
/// SNR at which 6 Mbit/s has a BER of 1e-5: links of 10-22 dB (HTPPR §5.4) then span best
/// rates from 6 to 36 Mbit/s.
pub const SNR_6MBPS_DB: f64 = 12.0;
/// dB of SNR per decade of BER.
pub const DB_PER_DECADE: f64 = 2.5;

/// 802.11g timing (OFDM, short slot), µs.
pub const SLOT_US: u64 = 9;
pub const SIFS_US: u64 = 10;
pub const DIFS_US: u64 = SIFS_US + 2 * SLOT_US;
pub const CW_MIN: u32 = 15;
pub const CW_MAX: u32 = 1023;
/// MAC header and FCS, bytes.
pub const MAC_OVERHEAD: usize = 28;
/// LLC/SNAP, IPv4 and UDP headers in front of a datagram's payload, bytes.
pub const UDP_OVERHEAD: usize = 8 + 20 + 8;
/// LLC/SNAP in front of an IP packet, bytes.
pub const LLC: usize = 8;

/// The SNR rate `k` needs for a BER of 1e-5, dB.
pub fn required_snr_db(k: usize) -> f64 {
    SNR_6MBPS_DB + SENSITIVITY_DBM[k] - SENSITIVITY_DBM[0]
}

/// The bit error rate at rate index `k` on a link of `snr_db`.
pub fn ber(k: usize, snr_db: f64) -> f64 {
    let log = -5.0 - (snr_db - required_snr_db(k)) / DB_PER_DECADE;
    10f64.powf(log).min(0.5)
}

/// Airtime of a frame of `bytes` (MAC header and FCS included) at rate index `k`, µs:
/// PLCP preamble and SIGNAL (20 µs), whole symbols, and the 6 µs signal extension of 802.11g;
/// 802.11b with the short preamble (96 µs).
pub fn frame_us(k: usize, bytes: usize) -> u64 {
    if k == RATE_11B {
        return 96 + (bytes as u64 * 8 * 1000).div_ceil(RATES_KBPS[k] as u64);
    }
    let bits = 16 + 8 * bytes as u64 + 6;
    20 + 4 * bits.div_ceil(BITS_PER_SYMBOL[k]) + 6
}

/// Airtime of a MAC ACK (14 bytes at 24 Mbit/s, or at the data rate if lower).
pub fn ack_us(data_rate: usize) -> u64 {
    let k = if data_rate == RATE_11B {
        4
    } else {
        data_rate.min(4)
    };
    frame_us(k, 14)
}

/// Flips bits of `bytes[from..]` independently with probability `ber`; returns how many.
/// Draws the gaps between errors (geometric), so a clean link costs one draw per frame.
pub fn corrupt(bytes: &mut [u8], from: usize, ber: f64, rng: &mut Rng) -> u32 {
    if ber <= 0.0 || from >= bytes.len() {
        return 0;
    }
    let bits = (bytes.len() - from) as u64 * 8;
    let ln_q = (1.0 - ber.min(0.5)).ln();
    let mut pos = 0u64;
    let mut flips = 0;
    loop {
        let u = 1.0 - rng.f64();
        let gap = (u.ln() / ln_q).floor();
        if !gap.is_finite() || gap >= (bits - pos) as f64 {
            return flips;
        }
        pos += gap as u64;
        let bit = from as u64 * 8 + pos;
        bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
        flips += 1;
        pos += 1;
        if pos >= bits {
            return flips;
        }
    }
}

/// Whether `n` bytes at `ber` get through without a bit error (for frames whose content is
/// not simulated byte by byte).
pub fn clean(n: usize, ber: f64, rng: &mut Rng) -> bool {
    rng.f64() < (1.0 - ber).powf(n as f64 * 8.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ber_rises_about_tenfold_per_step() {
        let snr = 20.0;
        let steps: Vec<f64> = (1..OFDM_RATES)
            .map(|k| ber(k, snr) / ber(k - 1, snr))
            .collect();
        assert!(
            steps.iter().all(|&r| (2.0..=40.0).contains(&r)),
            "{steps:?}"
        );
        let mean = steps.iter().map(|r| r.ln()).sum::<f64>() / steps.len() as f64;
        assert!((8.0..12.0).contains(&mean.exp()), "{}", mean.exp());
        assert!((ber(0, SNR_6MBPS_DB) - 1e-5).abs() < 1e-9);
        assert_eq!(ber(7, -50.0), 0.5);
    }

    #[test]
    fn airtime_of_a_full_frame() {
        // 1500 bytes at 54 Mbit/s: 12022 bits, 56 symbols.
        assert_eq!(frame_us(7, 1500), 20 + 4 * 56 + 6);
        assert_eq!(frame_us(0, 14), 20 + 4 * 6 + 6);
        assert!(frame_us(RATE_11B, 1500) > frame_us(4, 1500));
    }

    #[test]
    fn corruption_matches_the_ber() {
        let mut rng = Rng::new(1);
        let mut flips = 0u64;
        for _ in 0..2000 {
            let mut b = vec![0u8; 1000];
            flips += u64::from(corrupt(&mut b, 10, 1e-3, &mut rng));
            assert!(b[..10].iter().all(|&x| x == 0));
        }
        let expected = 2000.0 * 990.0 * 8.0 * 1e-3;
        assert!((flips as f64 / expected - 1.0).abs() < 0.05, "{flips}");
        let mut b = vec![0u8; 100];
        assert_eq!(corrupt(&mut b, 0, 0.0, &mut rng), 0);
    }
}
