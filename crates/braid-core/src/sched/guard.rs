//! The loss guard: part of "never worse than the best link".
//!
//! A path that loses far more than the others hurts every flow striped over it: the inner
//! TCP reads each loss as congestion and halves its window, so a 10 Mbit/s path losing 30%
//! beside a clean one makes the bond slower than the clean path alone (and PluriBus Fig 16
//! shows delay-based striping losing to MinConnPath on lossy links without coding). The
//! guard sets such a path aside for new data: a path is guarded while its long-term loss
//! rate ([`Path::long_loss_rate`], over a few hundred datagrams) exceeds both [`ABSOLUTE`] and [`RELATIVE`] times the
//! lowest loss rate among the live paths, and released when it falls below
//! [`RELEASE`] of that threshold (hysteresis, so it does not flap). Guarded paths keep
//! their heartbeats, reports and measurements, carry redundant copies, and return as soon
//! as they improve. At least one path is always left unguarded.
//!
//! When a loss-recovery method masks losses (Evolution codes, retransmission, ...), a
//! moderately lossy path is worth using, as PluriBus uses its 5%-loss WiMax link: the
//! absolute threshold is then [`ABSOLUTE_MASKED`] instead.

use crate::path::Path;

/// Loss rates up to this never trigger the guard.
pub const ABSOLUTE: f64 = 0.03;
/// The same when a loss-recovery method masks losses.
pub const ABSOLUTE_MASKED: f64 = 0.15;
/// A path must lose this many times more than the best path to be guarded.
pub const RELATIVE: f64 = 3.0;
/// A guarded path is released below this fraction of its threshold.
pub const RELEASE: f64 = 0.7;

/// Updates every path's guard from the current loss estimates; `masked` when a
/// loss-recovery method is active. Returns whether any path changed state.
pub fn update(paths: &mut [Path], masked: bool) -> bool {
    let best = paths
        .iter()
        .filter(|p| p.is_live())
        .map(Path::long_loss_rate)
        .fold(f64::INFINITY, f64::min);
    if !best.is_finite() {
        return false;
    }
    let absolute = if masked { ABSOLUTE_MASKED } else { ABSOLUTE };
    let threshold = absolute.max(RELATIVE * best);
    let mut changed = false;
    for p in paths.iter_mut() {
        let loss = p.long_loss_rate();
        let guarded = if p.is_loss_guarded() {
            loss > threshold * RELEASE
        } else {
            loss > threshold
        };
        if guarded != p.is_loss_guarded() {
            p.set_loss_guarded(guarded);
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::testing::{paths, PathSpec};

    #[test]
    fn guards_only_paths_much_worse_than_the_best() {
        let mut ps = paths(&[
            PathSpec::new(0, 1),
            PathSpec::new(1, 1),
            PathSpec::new(2, 1),
        ]);
        ps[0].set_loss_for_test(0.001);
        ps[1].set_loss_for_test(0.02);
        ps[2].set_loss_for_test(0.30);
        assert!(update(&mut ps, false));
        assert_eq!(
            ps.iter().map(Path::is_loss_guarded).collect::<Vec<_>>(),
            vec![false, false, true]
        );
        assert!(!ps[2].is_usable() && ps[2].is_live());
        // Everyone equally lossy: nobody is guarded.
        for p in &mut ps {
            p.set_loss_for_test(0.2);
        }
        update(&mut ps, false);
        assert!(ps.iter().all(|p| !p.is_loss_guarded()));
    }

    #[test]
    fn masking_raises_the_bar() {
        let mut ps = paths(&[PathSpec::new(0, 1), PathSpec::new(1, 1)]);
        ps[0].set_loss_for_test(0.005);
        ps[1].set_loss_for_test(0.05);
        update(&mut ps, true);
        assert!(!ps[1].is_loss_guarded());
        update(&mut ps, false);
        assert!(ps[1].is_loss_guarded());
        ps[1].set_loss_for_test(0.3);
        update(&mut ps, true);
        assert!(ps[1].is_loss_guarded());
    }

    #[test]
    fn releases_with_hysteresis() {
        let mut ps = paths(&[PathSpec::new(0, 1), PathSpec::new(1, 1)]);
        ps[0].set_loss_for_test(0.0);
        ps[1].set_loss_for_test(0.05);
        update(&mut ps, false);
        assert!(ps[1].is_loss_guarded());
        // Threshold 3%: 2.5% is below it but above 70% of it: still guarded.
        ps[1].set_loss_for_test(0.025);
        update(&mut ps, false);
        assert!(ps[1].is_loss_guarded());
        ps[1].set_loss_for_test(0.02);
        update(&mut ps, false);
        assert!(!ps[1].is_loss_guarded());
    }
}
