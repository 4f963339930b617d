//! The order in which a scenario lists its paths changes nothing a user sees: the bus
//! scenarios with their paths listed the other way round give the same median flow
//! completion time, for braid's default scheduler and for MinConnPath (PluriBus §6.1), whose
//! ties once went to the path listed first (on scenarios/bus.toml: 260 against 229 ms, seed 1).
//!
//! Links draw their randomness from their names, so both orders see the same losses and the
//! same workload: what differs is only what the engine does with the order.

use std::path::Path;

use braid_core::SchedulerKind;
use braid_sim::{run, Scenario, TraceCache};

const SEEDS: [u64; 3] = [1, 2, 3];

/// The scenario file `name` from scenarios/, shortened to `duration_s`.
fn scenario(name: &str, duration_s: f64, traces: &mut TraceCache) -> Scenario {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    let mut s = Scenario::load(&file, traces).expect("the scenario loads");
    s.duration_s = duration_s;
    s
}

/// The median flow completion time over [`SEEDS`], averaged, ms.
fn mean_median_ms(
    base: &Scenario,
    scheduler: SchedulerKind,
    reversed: bool,
    traces: &mut TraceCache,
) -> f64 {
    let mut sum = 0.0;
    for seed in SEEDS {
        let mut s = base.clone();
        s.seed = seed;
        s.engine.scheduler = scheduler;
        // The packet schedulers' ties (the web's TCP in the tunnel they spread).
        s.engine.tcp_transport = Some(braid_core::class::Transport::Packet);
        if reversed {
            s.paths.reverse();
        }
        let r = run(&s, traces, None).expect("the scenario runs");
        let flows = r.workloads[0].flows.as_ref().expect("a web workload");
        assert!(
            flows.completed > 20,
            "seed {seed}: {} flows",
            flows.completed
        );
        sum += flows.fct_ms.median;
    }
    sum / SEEDS.len() as f64
}

/// Both schedulers' mean medians agree across the two orders within `tolerance_ms`.
fn same_medians_either_way(name: &str, duration_s: f64, tolerance_ms: f64) {
    let mut traces = TraceCache::new();
    let base = scenario(name, duration_s, &mut traces);
    for scheduler in [SchedulerKind::DelayBased, SchedulerKind::MinConnPath] {
        let listed = mean_median_ms(&base, scheduler, false, &mut traces);
        let reversed = mean_median_ms(&base, scheduler, true, &mut traces);
        assert!(
            (listed - reversed).abs() <= tolerance_ms,
            "{name}, {scheduler:?}: {listed:.1} ms as listed, {reversed:.1} reversed"
        );
    }
}

/// The tolerances are the seeds' spread: the standard deviation of a scheduler's median
/// over seeds 1-8 (the larger of the two schedulers'), divided by √3 for the mean of three
/// seeds. bus: delay-based 17.1 ms, MinConnPath 31.6; bus-lte: 13.4 and 11.4.
#[test]
fn bus_medians_do_not_depend_on_path_order() {
    same_medians_either_way("bus.toml", BUS_S, BUS_TOLERANCE_MS);
}

#[test]
fn bus_lte_medians_do_not_depend_on_path_order() {
    same_medians_either_way("bus-lte.toml", BUS_LTE_S, BUS_LTE_TOLERANCE_MS);
}

const BUS_S: f64 = 300.0;
const BUS_TOLERANCE_MS: f64 = 18.0;
const BUS_LTE_S: f64 = 60.0;
const BUS_LTE_TOLERANCE_MS: f64 = 8.0;
