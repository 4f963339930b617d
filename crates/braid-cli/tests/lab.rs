//! braid itself in the lab, as a user runs it: `braid lab run` starts the daemons over the
//! emulated paths and a real TCP download crosses the tunnel over every path. Needs root
//! and network namespaces (and the lab's tools); skipped with the reason otherwise.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn braid_carries_a_download_over_every_emulated_path() {
    if let Err(e) = braid_lab::support::check(&[braid_lab::support::Need::Iperf]) {
        braid_testkit::skip(e);
        return;
    }
    let dir = std::env::temp_dir().join(format!("braid-lab-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file: PathBuf = dir.join("two.toml");
    std::fs::write(
        &file,
        "duration_s = 5\n\
         [[path]]\nname = \"a\"\nup = { rate_mbps = 10, delay_ms = 10 }\ndown = { rate_mbps = 10, delay_ms = 10 }\n\
         [[path]]\nname = \"b\"\nup = { rate_mbps = 10, delay_ms = 20 }\ndown = { rate_mbps = 10, delay_ms = 20 }\n\
         [[workload]]\nkind = \"bulk\"\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["lab", "run", "--systems", "braid:round-robin", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = &v[0];
    assert_eq!(run["system"], "braid (round-robin)", "{v}");
    let goodput = run["workloads"][0]["result"]["goodput_mbps"].as_f64();
    assert!(goodput.is_some_and(|g| g > 1.0), "{v}");
    // Round-robin puts the download on both paths.
    for p in run["paths"].as_array().unwrap() {
        let bytes = p["down"]["link"]["bytes_delivered"].as_u64().unwrap();
        assert!(bytes > 500_000, "path {}: {bytes} bytes", p["name"]);
    }
}
