//! Scenario loading: the examples load, and each kind of mistake gets an error naming the
//! key or file and what is expected.

use std::path::{Path, PathBuf};

use super::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const PATH: &str = r#"
[[path]]
name = "a"
up = { rate_mbps = 1, delay_ms = 10 }
down = { rate_mbps = 1, delay_ms = 10 }
"#;

const WORKLOAD: &str = "[[workload]]\nkind = \"bulk\"\n";

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, "test.toml", Path::new("."), &mut TraceCache::new())
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_example_loads() {
    let dir = repo().join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let s = Scenario::load(&path, &mut TraceCache::new())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!s.name.is_empty());
            n += 1;
        }
    }
    assert!(n >= 4, "only {n} examples in {}", dir.display());
}

#[test]
fn minimal_scenario_takes_defaults() {
    let s = parse(&format!("duration_s = 5\n{PATH}{WORKLOAD}")).unwrap();
    assert_eq!((s.seed, s.mtu), (1, 1400));
    let c = s.engine_config();
    assert_eq!(c.hole_timeout, Duration::from_millis(50));
    assert_eq!(c.max_packet_size, 1400);
}

#[test]
fn unknown_keys_are_named() {
    let e = err(&format!("duration_s = 5\ncolour = 1\n{PATH}{WORKLOAD}"));
    assert!(e.contains("colour") && e.contains("test.toml"), "{e}");
    let e = err(&format!(
        "duration_s = 5\n[engine]\nschedular = \"round-robin\"\n{PATH}{WORKLOAD}"
    ));
    assert!(e.contains("schedular"), "{e}");
    let e = err(&format!(
        "duration_s = 5\n{}{WORKLOAD}",
        PATH.replace("delay_ms", "dealy_ms")
    ));
    assert!(e.contains("dealy_ms"), "{e}");
    let e = err(&format!(
        "duration_s = 5\n{PATH}[[workload]]\nkind = \"bulk\"\nflow = 2\n"
    ));
    assert!(e.contains("flow"), "{e}");
    let e = err(&format!(
        "duration_s = 5\n[engine]\nscheduler = \"fastest\"\n{PATH}{WORKLOAD}"
    ));
    assert!(e.contains("fastest") && e.contains("round-robin"), "{e}");
}

#[test]
fn bad_values_are_named() {
    let e = err(&format!(
        "duration_s = 5\n{}{WORKLOAD}",
        PATH.replace("rate_mbps = 1, delay", "rate_mbps = -2, delay")
    ));
    assert!(
        e.contains("rate_mbps") && e.contains("path 'a' (up)"),
        "{e}"
    );
    let e = err(&format!("duration_s = -1\n{PATH}{WORKLOAD}"));
    assert!(e.contains("duration_s"), "{e}");
    let e = err(&format!("duration_s = 5\nmtu = 20\n{PATH}{WORKLOAD}"));
    assert!(e.contains("mtu"), "{e}");
    let e = err(&format!(
        "duration_s = 5\n[engine]\nhole_timeout_ms = -3\n{PATH}{WORKLOAD}"
    ));
    assert!(e.contains("hole_timeout_ms"), "{e}");
    let e = err(&format!("duration_s = 5\n{WORKLOAD}"));
    assert!(e.contains("[[path]]"), "{e}");
    let e = err(&format!("duration_s = 5\n{PATH}"));
    assert!(e.contains("[[workload]]"), "{e}");
    let e = err(&format!("duration_s = 5\n{PATH}{PATH}{WORKLOAD}"));
    assert!(e.contains("'a'") && e.contains("unique"), "{e}");
    let e = err(&format!(
        "duration_s = 5\n[engine]\ndirect = \"b\"\n{PATH}{WORKLOAD}"
    ));
    assert!(e.contains("direct") && e.contains("paths: a"), "{e}");
}

#[test]
fn missing_trace_file_is_named_relative_to_the_scenario() {
    let dir = braid_testkit::Scratch::new("scenario-test");
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        format!(
            "duration_s = 5\n[[path]]\nname = \"a\"\nup = {{ trace = \"nope.up\" }}\n\
             down = {{ rate_mbps = 1 }}\n{WORKLOAD}"
        ),
    )
    .unwrap();
    let e = Scenario::load(&file, &mut TraceCache::new())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&dir.join("nope.up").display().to_string()),
        "{e}"
    );
    let e = Scenario::load(&dir.join("absent.toml"), &mut TraceCache::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.toml"), "{e}");
}
