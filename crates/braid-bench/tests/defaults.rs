//! The simulator runs braid as the daemons do: a scenario's `[engine]` and a daemon's
//! `[engine]` give the engine the same configuration, so a benchmark measured with the
//! simulator's defaults measures what `braid gateway` and `braid server` run.

use std::path::Path;

use braid_core::Config;
use braid_net::config::{engine_config, EngineSection};
use braid_sim::{Scenario, TraceCache};

/// The engine configuration a scenario with this `[engine]` table runs, and the one a
/// daemon with the same table runs, less what each run draws or learns for itself.
fn both(engine: &str) -> (Config, Config) {
    let text = format!(
        "name = \"defaults\"\nduration_s = 1\n[engine]\n{engine}\n\
         [[path]]\nname = \"a\"\nup = {{ rate_kbps = 1000, delay_ms = 10 }}\n\
         down = {{ rate_kbps = 1000, delay_ms = 10 }}\n\
         [[workload]]\nkind = \"bulk\"\n"
    );
    let sc = Scenario::parse(&text, "defaults", Path::new("."), &mut TraceCache::new())
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let mut sim = sc.engine_config();
    let section: EngineSection =
        toml::from_str(engine).unwrap_or_else(|e| panic!("daemon [engine] {engine}: {e}"));
    let mut daemon = engine_config(&section, sc.mtu as u16, sim.session_id);
    // Drawn per run (the daemon from the system's RNG, the simulator from its seed).
    for c in [&mut sim, &mut daemon] {
        c.seed = 0;
        c.flow_hash_seed = 0;
    }
    (sim, daemon)
}

#[test]
fn an_empty_engine_table_is_the_same_engine_in_the_simulator_and_the_daemons() {
    let (sim, daemon) = both("");
    assert_eq!(sim, daemon);
    // And both are the engine's own defaults, at the scenario's MTU.
    let defaults = Config {
        max_packet_size: sim.max_packet_size,
        ..Config::default()
    };
    let (mut sim, mut defaults) = (sim, defaults);
    sim.seed = 0;
    sim.flow_hash_seed = 0;
    defaults.seed = 0;
    defaults.flow_hash_seed = 0;
    assert_eq!(sim, defaults);
}

#[test]
fn every_key_the_daemons_take_means_the_same_in_a_scenario() {
    let table = "scheduler = \"min-conn-path\"\nloss_recovery = \"evolution\"\n\
                 hole_timeout_ms = 80\nhole_timeout_mode = \"fixed\"\nloss_guard = false\n\
                 aqm = true\nheader_compression = false\nreport_interval_ms = 40\n\
                 heartbeat_interval_ms = 150\npath_timeout_ms = 900\n\
                 capacity_interval_ms = 250\ntcp_transport = \"packet\"\n";
    let (sim, daemon) = both(table);
    assert_eq!(sim, daemon);
    assert_ne!(sim, both("").0, "the keys must change something");
}
