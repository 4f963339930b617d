//! `braid send`/`receive` over HTPPR in the lab: the hare is an emulated path whose
//! emulator flips bits (BER 1e-4: about 2.5% of 32-byte blocks damaged), the tortoise a
//! clean path of 50 ms RTT. The file must arrive with the sender's SHA-256, repaired block
//! by block. Needs root and network namespaces; skipped with the reason otherwise.
#![expect(
    clippy::unwrap_used,
    reason = "the hashing helper is test code: a failure there fails the test"
)]

use std::process::Stdio;
use std::time::Duration;

use braid_lab::topology::server_path_addr;
use braid_lab::{Lab, PathSpec};
use braid_sim::link::{CorruptionConfig, LinkConfig};

fn link(mbps: f64, one_way_ms: f64, ber: f64) -> LinkConfig {
    LinkConfig {
        rate_mbps: Some(mbps),
        delay_ms: one_way_ms,
        corruption: (ber > 0.0).then_some(CorruptionConfig {
            bit_error_rate: ber,
        }),
        ..LinkConfig::default()
    }
}

#[test]
fn a_file_crosses_a_corrupting_hare_with_its_hash() {
    if let Err(e) = braid_lab::support::check(&[]) {
        braid_testkit::skip(e);
        return;
    }
    let dir = std::env::temp_dir().join(format!("braid-htppr-lab-{}", std::process::id()));
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    // 8 MB of a fixed pattern that does not repeat within a chunk.
    let data: Vec<u8> = (0u64..8 << 20)
        .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
        .collect();
    std::fs::write(src.join("eight.bin"), &data).unwrap();

    let paths = [
        PathSpec {
            name: "hare".into(),
            up: link(20.0, 2.0, 1e-4),
            down: link(20.0, 2.0, 0.0),
        },
        PathSpec {
            name: "tortoise".into(),
            up: link(5.0, 25.0, 0.0),
            down: link(5.0, 25.0, 0.0),
        },
    ];
    let lab = Lab::build(&paths, 1).unwrap();
    let hare = format!("{}:7400", server_path_addr(0));
    let tortoise = format!("{}:7401", server_path_addr(1));
    let bin = env!("CARGO_BIN_EXE_braid");
    let mut rx = lab.server.command(bin);
    rx.args([
        "receive",
        "--json",
        "--hare",
        &hare,
        "--tortoise",
        &tortoise,
    ])
    .arg(&dst)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let rx = lab.server.spawn(&mut rx).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut tx = lab.gateway.command(bin);
    tx.args(["send", "--json", "--hare", &hare, "--tortoise", &tortoise])
        .args(["--hare-mbps", "15"])
        .arg(src.join("eight.bin"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let tx = lab.gateway.spawn(&mut tx).unwrap();
    let sent = tx.wait_output(Duration::from_secs(120)).unwrap();
    let got = rx.wait_output(Duration::from_secs(10)).unwrap();
    let reports = lab.path_reports();
    drop(lab);
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(sent.status.success(), "send: {}", text(&sent));
    assert!(got.status.success(), "receive: {}", text(&got));
    let sent: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    let got: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    eprintln!(
        "sent {sent}\nreceived {got}\nhare up {:?}",
        reports[0].1.link
    );
    let want = sha256sum(&data);
    assert_eq!(sent["sha256"], want.as_str());
    assert_eq!(got["sha256"], want.as_str());
    assert_eq!(std::fs::read(dst.join("eight.bin")).unwrap(), data);
    // The emulator damaged hare packets, and the receiver repaired them block by block.
    assert!(
        reports[0].1.link.packets_corrupted > 100,
        "{:?}",
        reports[0].1
    );
    assert!(got["repairs"].as_u64().unwrap() > 100, "{got}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SHA-256 by `sha256sum`, so this test needs no hashing crate of its own.
fn sha256sum(data: &[u8]) -> String {
    use std::io::Write;
    let mut c = std::process::Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(data).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}
