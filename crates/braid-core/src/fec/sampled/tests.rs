//! The sampled estimate: its masks, the greedy choice against hand-worked windows, the
//! repair of samples by a coded packet, and Evolution choosing by it.

use super::*;
use crate::Instant;

/// A window whose entries (sequence numbers 0, 1, ...) are missing in `masks`.
fn window(masks: &[u64]) -> Window {
    let mut w = Window::new(64);
    for (i, &m) in masks.iter().enumerate() {
        w.push(i as u32, Instant::from_millis(1000), &[i as u8]);
        w.set_missing(i, m);
    }
    w
}

#[test]
fn loss_masks_have_the_loss_rate() {
    let mut rng = Rng::new(5);
    assert_eq!(loss_mask(0.0, &mut rng), 0);
    assert_eq!(loss_mask(-0.1, &mut rng), 0);
    assert_eq!(loss_mask(f64::NAN, &mut rng), 0);
    assert_eq!(loss_mask(1.0, &mut rng), u64::MAX);
    for p in [0.05, 0.3, 0.7] {
        let draws = 2000;
        let ones: u32 = (0..draws)
            .map(|_| loss_mask(p, &mut rng).count_ones())
            .sum();
        let mean = f64::from(ones) / f64::from(draws * SAMPLES);
        assert!((mean - p).abs() < 0.01, "p {p}: {mean}");
    }
    // Every bit position is used.
    let all = (0..200).fold(0u64, |acc, _| acc | loss_mask(0.5, &mut rng));
    assert_eq!(all, u64::MAX);
}

#[test]
fn greedy_choice_maximises_samples_with_one_missing() {
    let (mut cand, mut picks) = (Vec::new(), Vec::new());
    // Nothing missing anywhere: no yield, no members.
    let w = window(&[0, 0, 0]);
    assert_eq!(choose(&w, &mut cand, &mut picks), 0);
    assert!(picks.is_empty());
    // Entry 1 is missing in samples 0-3, entry 2 in 4-5, entry 0 in 0 and 4. Alone, entry 1
    // repairs in 4 samples; adding entry 2 (disjoint) makes 6; adding entry 0 then would
    // turn samples 0 and 4 into two missing: 4. So {1, 2}, 6 samples.
    let w = window(&[0b1_0001, 0b1111, 0b11_0000, 0]);
    assert_eq!(choose(&w, &mut cand, &mut picks), 6);
    assert_eq!(picks, vec![1, 2]);
    // Ties go to the oldest entry.
    let w = window(&[0, 0b0011, 0b1100]);
    // {1, 2} repairs in 4 samples; with |W| = 3 the cap (2) allows it.
    assert_eq!(choose(&w, &mut cand, &mut picks), 4);
    assert_eq!(picks, vec![1, 2]);
    let w = window(&[0b0011, 0b0011, 0]);
    assert_eq!(choose(&w, &mut cand, &mut picks), 2);
    assert_eq!(picks, vec![0]);
    // Never all of W when |W| > 1 (§4.1's cap): disjoint losses would all be worth adding.
    let w = window(&[0b0001, 0b0010, 0b0100]);
    assert_eq!(choose(&w, &mut cand, &mut picks), 2);
    assert_eq!(picks, vec![0, 1]);
    // A single entry is its own coded packet.
    let w = window(&[0b0110]);
    assert_eq!(choose(&w, &mut cand, &mut picks), 2);
    assert_eq!(picks, vec![0]);
}

#[test]
fn a_coded_packet_repairs_samples_with_one_member_missing() {
    let mut rng = Rng::new(1);
    // Sample 0: entries 0 and 1 missing (two: no repair). Sample 1: entry 0 only. Sample 2:
    // entry 1 only. Sample 3: entry 2 only (not a member).
    let masks = [0b0011, 0b0101, 0b1000];
    let mut w = window(&masks);
    on_coded_sent(&mut w, &[0, 1], 0.0, &mut rng);
    assert_eq!(
        (w.missing(0), w.missing(1), w.missing(2)),
        (0b0001, 0b0001, 0b1000)
    );
    assert!((present_fraction(&w) - (1.0 - 3.0 / (3.0 * 64.0))).abs() < 1e-12);
    // A coded packet lost in every sample repairs nothing.
    let mut w = window(&masks);
    on_coded_sent(&mut w, &[0, 1], 1.0, &mut rng);
    assert_eq!((w.missing(0), w.missing(1)), (0b0011, 0b0101));
    // At p = 0.5 about half the repairable samples are repaired.
    let mut repaired = 0;
    for _ in 0..1000 {
        let mut w = window(&[u64::MAX]);
        on_coded_sent(&mut w, &[0], 0.5, &mut rng);
        repaired += (!w.missing(0)).count_ones();
    }
    assert!((31_000..33_000).contains(&repaired), "{repaired}");
    assert_eq!(present_fraction(&window(&[])), 1.0);
}
