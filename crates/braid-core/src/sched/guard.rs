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
//! as they improve. Beyond the paper's striping: while guarded, a path also carries probe
//! copies of data sent on the others ([`Path::take_probe`], a quarter of its capacity), so
//! that its loss rate keeps being measured at a load that cannot overflow its queue: the
//! drops of a queue braid itself overdrove also guard a path, and with heartbeats alone
//! its per-datagram average took tens of seconds to release it (not on a metered path,
//! whose bytes cost). At least one path is always left unguarded.
//!
//! Beyond the absolute and relative thresholds, and only when no loss-recovery method
//! masks losses: a path on which TCP alone would be held by its losses to less than half
//! the path's capacity (the Mathis et al. bound `MSS / RTT · 1.22 / √p` over the path's
//! minimum RTT and long-term loss rate, the test delay-based uses for a loss-limited bond)
//! is guarded too, as long as some live path is not loss-limited. Such a path cannot add
//! to a TCP flow's rate, and each of its losses halves the whole flow's window: a 5 Mbit/s
//! path of 200 ms RTT losing 2% (under the 3% threshold) caps a TCP flow over it at
//! 0.5 Mbit/s, and striping a bulk flow over it beside a clean 10 Mbit/s path made the
//! bond slower than the clean path alone (never-worse, "three mixed"). Losses under
//! [`MATHIS_MIN_LOSS`] never count: one early loss on a clean path is no loss rate.
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
/// Loss rates up to this never make a path loss-limited for the guard.
pub const MATHIS_MIN_LOSS: f64 = 0.01;
/// TCP segment size assumed for the loss-limited rate, bytes.
const MSS: f64 = 1400.0;

/// Whether TCP alone over `p` would be held by a loss rate of `loss` to less than `share`
/// of the path's capacity (Mathis et al.), over the path's minimum RTT.
fn loss_limited(p: &Path, loss: f64, share: f64) -> bool {
    let Some(rtt) = p.rtt().min() else {
        return false;
    };
    loss > 0.0 && {
        let rate = MSS * 8.0 / rtt.as_secs_f64().max(1e-3) * 1.22 / loss.sqrt();
        rate < p.capacity_bps() as f64 * share
    }
}

/// Whether `p` is loss-limited for the guard; `guarded` for the release side of the
/// hysteresis (the loss must fall to [`RELEASE`] of what guards it).
fn mathis_guarded(p: &Path, guarded: bool) -> bool {
    let loss = p.long_loss_rate();
    if guarded {
        loss > MATHIS_MIN_LOSS * RELEASE && loss_limited(p, loss / RELEASE, 0.5)
    } else {
        loss > MATHIS_MIN_LOSS && loss_limited(p, loss, 0.5)
    }
}

/// Updates every path's guard from the current loss estimates; `masked` when a
/// loss-recovery method is active. Returns whether any path changed state. The
/// loss-limited rule is off: see [`update_with_loss_limited`].
pub fn update(paths: &mut [Path], masked: bool) -> bool {
    update_with_loss_limited(paths, masked, false)
}

/// [`update`], with the loss-limited rule when `loss_limited_rule`: only for schedulers
/// that cap the queue they put in front of each bottleneck
/// ([`super::Scheduler::caps_bottleneck_queues`]), so that the losses a path shows are its
/// own and not the overflow of the bond's traffic. Under ADAS, whose windows overflow a
/// slow link's queue, the rule set aside links that only needed less traffic
/// (prism-fig8 fell from 0.96 to 0.57 of ideal).
pub fn update_with_loss_limited(paths: &mut [Path], masked: bool, loss_limited_rule: bool) -> bool {
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
    // The loss-limited rule, while some live path is not loss-limited.
    let mathis = loss_limited_rule
        && !masked
        && paths
            .iter()
            .any(|p| p.is_live() && !loss_limited(p, p.long_loss_rate(), 0.5));
    let mut changed = false;
    for p in paths.iter_mut() {
        let loss = p.long_loss_rate();
        let was = p.is_loss_guarded();
        let guarded = if was {
            loss > threshold * RELEASE
        } else {
            loss > threshold
        } || (mathis && mathis_guarded(p, was));
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
    use crate::sched::testing::{paths, PathSpec, T0};

    #[test]
    fn a_guarded_path_takes_probe_copies_at_a_share_of_its_capacity() {
        let mut ps = paths(&[PathSpec::new(0, 10_000_000), PathSpec::new(1, 1_000_000)]);
        ps[1].set_loss_for_test(0.30);
        assert!(!ps[1].take_probe(T0, 1250), "not guarded yet");
        update(&mut ps, false);
        assert!(ps[1].is_loss_guarded() && !ps[0].is_loss_guarded());
        assert!(!ps[0].take_probe(T0, 1250));
        // 1250 B at a quarter of 1 Mbit/s: one probe per 40 ms.
        assert!(ps[1].take_probe(T0, 1250));
        let ms = std::time::Duration::from_millis;
        assert!(!ps[1].take_probe(T0 + ms(39), 1250));
        assert!(ps[1].take_probe(T0 + ms(40), 1250));
        // Released: no more probes.
        ps[1].set_loss_for_test(0.0);
        update(&mut ps, false);
        assert!(!ps[1].take_probe(T0 + ms(200), 1250));
    }

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

    #[test]
    fn a_loss_limited_path_is_guarded_beside_one_that_is_not() {
        // 5 Mbit/s, 200 ms RTT, 2%: TCP over it alone gets 1400 B / 0.2 s · 1.22 / 0.141 =
        // 0.48 Mbit/s, under half its capacity, though 2% is under the 3% threshold.
        let mut ps = paths(&[
            PathSpec::new(0, 10_000_000).rtt_ms(20),
            PathSpec::new(1, 5_000_000).rtt_ms(200),
        ]);
        ps[1].set_loss_for_test(0.02);
        // Not for schedulers that may overflow bottleneck queues.
        assert!(!update(&mut ps, false));
        assert!(update_with_loss_limited(&mut ps, false, true));
        assert!(!ps[0].is_loss_guarded() && ps[1].is_loss_guarded());
        // Hysteresis: 0.8% still guards it, 0.6% releases it.
        ps[1].set_loss_for_test(0.008);
        update_with_loss_limited(&mut ps, false, true);
        assert!(ps[1].is_loss_guarded());
        ps[1].set_loss_for_test(0.006);
        update_with_loss_limited(&mut ps, false, true);
        assert!(!ps[1].is_loss_guarded());
        // Under 1% the rule never guards, however long the RTT.
        ps[1].set_loss_for_test(0.009);
        update_with_loss_limited(&mut ps, false, true);
        assert!(!ps[1].is_loss_guarded());
        // Masked losses: the rule is off.
        ps[1].set_loss_for_test(0.02);
        update_with_loss_limited(&mut ps, true, true);
        assert!(!ps[1].is_loss_guarded());
        // Every path loss-limited: nothing to prefer, the rule is off (the relative rule
        // decides: 2% against 2% guards nothing).
        let mut ps = paths(&[
            PathSpec::new(0, 10_000_000).rtt_ms(200),
            PathSpec::new(1, 5_000_000).rtt_ms(200),
        ]);
        ps[0].set_loss_for_test(0.02);
        ps[1].set_loss_for_test(0.02);
        update_with_loss_limited(&mut ps, false, true);
        assert!(ps.iter().all(|p| !p.is_loss_guarded()));
        // A short-RTT path at 2% is not loss-limited (10 ms: 9.7 Mbit/s of its 10).
        let mut ps = paths(&[
            PathSpec::new(0, 10_000_000).rtt_ms(10),
            PathSpec::new(1, 10_000_000).rtt_ms(10),
        ]);
        ps[1].set_loss_for_test(0.02);
        update_with_loss_limited(&mut ps, false, true);
        assert!(!ps[1].is_loss_guarded());
    }

    #[test]
    fn the_long_loss_rate_is_not_biased_low_over_the_first_datagrams() {
        // A path that has carried only heartbeats: 150 datagrams, one in 20 lost. The
        // average started at zero read 2.2% here and left the path unguarded for some 20 s
        // of heartbeats; divided by the weight it gathered it reads about 5%.
        let mut ps = paths(&[
            PathSpec::new(0, 10_000_000).rtt_ms(10),
            PathSpec::new(1, 5_000_000).rtt_ms(800),
        ]);
        let mut received = 0;
        for k in 1..=150u32 {
            if k % 20 != 0 {
                received += 1;
            }
            ps[1].on_path_ack(T0, 999 + k, received, None);
        }
        let loss = ps[1].long_loss_rate();
        assert!((0.04..0.06).contains(&loss), "{loss}");
        update(&mut ps, false);
        assert!(ps[1].is_loss_guarded());
        // One loss among a path's first ten datagrams is no loss rate: it counts against 64
        // lossless ones (1.5%), under the absolute threshold.
        let mut ps = paths(&[
            PathSpec::new(0, 1).rtt_ms(10),
            PathSpec::new(1, 1).rtt_ms(10),
        ]);
        ps[1].on_path_ack(T0, 1009, 9, None);
        let loss = ps[1].long_loss_rate();
        assert!((0.01..0.02).contains(&loss), "{loss}");
        update(&mut ps, false);
        assert!(!ps[1].is_loss_guarded());
    }

    #[test]
    fn losses_before_the_first_acknowledgement_are_the_paths_set_up() {
        // A fresh path whose first six datagrams never reached the peer (sent before the
        // peer had heard the path): its first feedback acknowledges the seventh. Counted,
        // they read 9% (6 against 64), and the guard set a clean path aside.
        let fresh = || {
            Path::new(
                &crate::config::PathConfig {
                    id: 0,
                    tx_capacity_bps: 10_000_000,
                    rx_capacity_bps: 10_000_000,
                },
                std::time::Duration::from_millis(500),
                crate::Instant::ZERO,
            )
        };
        let mut p = fresh();
        assert_eq!(p.on_path_ack(T0, 6, 1, None), (1, 6));
        assert_eq!(p.long_loss_rate(), 0.0);
        // From then on losses count: one in the next ten.
        p.on_path_ack(T0, 16, 10, None);
        let loss = p.long_loss_rate();
        assert!((0.01..0.02).contains(&loss), "{loss}");
    }
}
