//! The daemons with relays, in namespaces (root): `braid bench lab-relay --quick` runs a TCP
//! upload from a gateway whose only paths are two `braid relay`s; relay B joins a third of
//! the way in and relay A leaves (SIGTERM) at two thirds. The stream must arrive whole,
//! both daemons must take A's path out of the session when A says it leaves, the server
//! must take B's path on, and the upload must go on over B alone. Then B is revoked by a
//! config edit and SIGHUP: the server must refuse it and see its path go down. Skipped, with the reason
//! printed, where root, namespaces, tc or python3 are missing.

use braid_net::testbed;

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

#[test]
fn an_upload_survives_a_relay_leaving_and_another_joining() {
    if let Some(why) = testbed::unavailable(&["tc", "python3", "ping"]) {
        braid_testkit::skip(why);
        return;
    }
    let out = std::process::Command::new(BRAID)
        .args(["bench", "lab-relay", "--quick", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lab-relay failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["systems"];
    println!(
        "lab-relay: {} of the lent capacity; per second {}; events {}",
        v["headline"]["value"], s["per_second_mbps"], s["events"]
    );
    let e = &s["events"];
    for key in [
        "stream_intact",
        "relay_a_exited_cleanly",
        "server_removed_relay_a_path",
        "gateway_removed_relay_a_path",
        "server_saw_relay_b",
        "server_revoked_relay_b",
        "relay_b_silenced",
    ] {
        assert_eq!(e[key], true, "{key}: {e}");
    }
    // After A left, the upload went on over B alone.
    let per_second: Vec<f64> = s["per_second_mbps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    let left = e["relay_a_left_s"].as_f64().unwrap().ceil() as usize;
    assert!(
        per_second[left + 1..].iter().all(|g| *g > 0.0),
        "nothing arrived in a second after relay A left: {per_second:?}"
    );
}
