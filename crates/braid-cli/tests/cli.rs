//! The `braid` command as a user runs it.

use std::path::PathBuf;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn braid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("braid runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn sim_json_is_byte_identical_for_a_seed_and_differs_across_seeds() {
    let a = braid(&["sim", "scenarios/bus.toml", "--json"]);
    assert!(a.status.success(), "{}", stderr(&a));
    let b = braid(&["sim", "scenarios/bus.toml", "--json"]);
    assert_eq!(a.stdout, b.stdout);
    let c = braid(&["sim", "scenarios/bus.toml", "--json", "--seed", "2"]);
    assert!(c.status.success());
    assert_ne!(a.stdout, c.stdout);
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["seed"], 1);
    assert!(v["workloads"][0]["flows"]["completed"].as_u64().unwrap() > 50);
}

#[test]
fn sim_prints_a_summary() {
    let o = braid(&["sim", "scenarios/two-path-udp.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(
        s.contains("udp-cbr-0") && s.contains("fast") && s.contains("slow"),
        "{s}"
    );
}

#[test]
fn a_wrong_scenario_is_one_clear_error() {
    let dir = braid_testkit::Scratch::new("cli-test");
    let f = dir.join("bad.toml");
    std::fs::write(
        &f,
        "duration_s = 5\n[[path]]\nname = \"a\"\nup = { rate_mbps = -1 }\ndown = { rate_mbps = 1 }\n\
         [[workload]]\nkind = \"bulk\"\n",
    )
    .unwrap();
    let o = braid(&["sim", f.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("rate_mbps") && e.contains("bad.toml"), "{e}");
    let o = braid(&["sim", "no/such/file.toml"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no/such/file.toml"));
}

#[test]
fn bench_list_and_json_contract() {
    let o = braid(&["bench", "--list"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("sim-speed"));
    let o = braid(&["bench", "sim-speed", "--quick", "--json", "--seed", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bench"], "sim-speed");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["quick"], true);
    assert!(
        v["systems"]["udp-saturated"]["sim_per_wall"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let h = &v["headline"];
    assert!(h["metric"].is_string() && h["value"].is_number() && h["goal"].is_number());
    assert!(h["paper"].is_null() && h["higher_is_better"].is_boolean());
    let o = braid(&["bench", "no-such-bench"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--list"));
}

#[test]
fn demo_prints_the_table() {
    let o = braid(&["demo", "--quick", "--sim"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    for row in ["att only", "verizon only", "braid"] {
        assert!(s.contains(row), "{s}");
    }
    // With --json the fallback to the simulator is said on stderr and in the notes.
    let o = braid(&["demo", "--quick", "--sim", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("in the simulator"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("not the lab: --sim")),
        "{v}"
    );
}

#[test]
fn a_wrong_daemon_config_is_one_line_and_a_failure() {
    let dir = braid_testkit::Scratch::new("cli-daemon");
    let f = dir.join("gateway.toml");
    let text = std::fs::read_to_string(repo().join("examples/gateway.toml"))
        .unwrap()
        .replace("metered = true", "meterd = true");
    std::fs::write(&f, text).unwrap();
    for role in ["gateway", "server"] {
        let o = braid(&[role, "--config", f.to_str().unwrap(), "--check"]);
        assert!(!o.status.success());
        let e = stderr(&o);
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        assert!(e.contains("gateway.toml:"), "{e}");
    }
    let o = braid(&["gateway", "--config", f.to_str().unwrap(), "--check"]);
    assert!(
        stderr(&o).contains("unknown key `meterd`"),
        "{}",
        stderr(&o)
    );
    let o = braid(&[
        "status",
        "--socket",
        dir.join("none.sock").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot reach a braid daemon"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn trace_convert_writes_a_trace_and_explains_itself() {
    let dir = std::env::temp_dir().join(format!("braid-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("walk.csv");
    // Two seconds of multipath-wireless: 150000 then 0 bytes per second.
    std::fs::write(&input, "1,150000\n2,0\n").unwrap();
    let out = dir.join("walk.down.gz");
    let (i, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    let r = braid(&["trace", "convert", i, "-o", o, "--scale", "2"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(
        stderr(&r).contains("multipath-wireless -> 200 opportunities, 2.0 s"),
        "{}",
        stderr(&r)
    );
    // The simulator reads the compressed trace back: 200 packets, the period 2 s.
    let mut cache = braid_sim::TraceCache::new();
    let t = cache.load(&out).unwrap();
    assert_eq!(t.opportunities_ms().len(), 200);
    assert_eq!(t.period_ms(), 2000);
    // A bad line is one error naming file and line.
    std::fs::write(&input, "1,150000\n2,lots\n").unwrap();
    let r = braid(&["trace", "convert", i, "-o", o]);
    assert!(!r.status.success());
    let e = stderr(&r);
    assert!(
        e.contains("walk.csv`, line 2") && e.contains("not a number"),
        "{e}"
    );
    // --help names every option.
    let h = stdout(&braid(&["trace", "convert", "--help"]));
    for opt in [
        "--format",
        "--column",
        "--start",
        "--duration",
        "--scale",
        "--output",
    ] {
        assert!(h.contains(opt), "{opt} missing from:\n{h}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_from_saved_lines_writes_the_page_and_bad_input_is_named() {
    let saved = "crates/braid-cli/src/report/testdata/bench-all-quick.jsonl";
    let out = std::env::temp_dir().join(format!("braid-cli-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = braid(&["report", "--from", saved, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert_eq!(html.matches("<section id=").count(), 3);
    assert!(html.contains("<section id=\"prism-fig7\">"));

    let bad = out.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"bench\": \"prism-fig7\", \"headline\": {}}\nnot json\n",
    )
    .unwrap();
    let o = braid(&[
        "report",
        "--from",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("line 2"), "{}", stderr(&o));
    let o = braid(&[
        "report",
        "--from",
        "no/such.jsonl",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no/such.jsonl"), "{}", stderr(&o));
    std::fs::remove_dir_all(out).unwrap();

    let o = braid(&["bench", "prism-fig7", "--skip-lab"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("bench all"), "{}", stderr(&o));

    // A trace offset only moves the recorded-trace benchmarks, and is a time.
    let o = braid(&["bench", "prism-fig7", "--trace-offset", "12"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("trace-bulk"), "{}", stderr(&o));
    let o = braid(&["bench", "trace-bulk", "--trace-offset=-1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("number of seconds"), "{}", stderr(&o));
}

#[test]
fn send_and_receive_refuse_mixed_modes_and_name_what_is_wrong() {
    let mixed = braid(&[
        "send",
        "x.bin",
        "--to",
        "127.0.0.1:9",
        "--hare",
        "127.0.0.1:1",
        "--tortoise",
        "127.0.0.1:2",
    ]);
    assert!(!mixed.status.success());
    assert!(stderr(&mixed).contains("HTPPR mode"), "{}", stderr(&mixed));
    assert!(stderr(&mixed).contains("stream mode"), "{}", stderr(&mixed));
    let mixed = braid(&[
        "receive",
        ".",
        "--listen",
        "127.0.0.1:0",
        "--hare",
        "127.0.0.1:1",
        "--tortoise",
        "127.0.0.1:2",
    ]);
    assert!(stderr(&mixed).contains("HTPPR mode"), "{}", stderr(&mixed));
    let plain = braid(&["send", "x.bin", "--to", "127.0.0.1:9"]);
    assert!(stderr(&plain).contains("--insecure"), "{}", stderr(&plain));
    let bad = braid(&["send", "x.bin", "--to", "nohost", "--insecure"]);
    assert!(stderr(&bad).contains("bad --to"), "{}", stderr(&bad));
    let missing = braid(&[
        "send",
        "/nonexistent/x.bin",
        "--to",
        "127.0.0.1:9",
        "--insecure",
    ]);
    assert!(
        stderr(&missing).contains("/nonexistent/x.bin"),
        "{}",
        stderr(&missing)
    );
    let help = stdout(&braid(&["send", "--help"]));
    assert!(
        help.contains("Stream mode") && help.contains("HTPPR mode"),
        "{help}"
    );
}

#[test]
fn a_send_with_no_receiver_ends_with_the_peer_gone() {
    let dir = std::env::temp_dir().join(format!("braid-cli-send-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("f.bin");
    std::fs::write(&file, vec![7u8; 100_000]).unwrap();
    // A port nothing listens on: the datagrams go nowhere, nothing answers.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sock.local_addr().unwrap().to_string();
    drop(sock);
    let o = braid(&[
        "send",
        file.to_str().unwrap(),
        "--to",
        &to,
        "--insecure",
        "--timeout",
        "1",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("went away"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
