//! Split-TCP mode in the lab: `curl` in the client's namespace downloads a file from an
//! HTTP server on the internet host through the gateway's transparent proxy and the
//! server's relay; the hash must match. A refused destination resets the client. The
//! redirect table is gone once the gateway exits, and a gateway killed with SIGKILL leaves
//! a table the next start replaces. Needs root and the lab's tools; skipped otherwise.

#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a real-time lab test: a failed step ends it with its message; its waits read the wall clock"
)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use braid_lab::braid_daemon::{BraidSettings, BraidTunnel};
use braid_lab::topology::INTERNET;
use braid_lab::{Lab, PathSpec};
use braid_sim::link::LinkConfig;

const TABLE: &str = "braid_split_braid0";

fn path(name: &str, mbps: f64, rtt_ms: f64) -> PathSpec {
    let l = LinkConfig {
        rate_mbps: Some(mbps),
        delay_ms: rtt_ms / 2.0,
        ..LinkConfig::default()
    };
    PathSpec {
        name: name.into(),
        up: l.clone(),
        down: l,
    }
}

fn sha256(file: &std::path::Path) -> String {
    let o = Command::new("sha256sum").arg(file).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn table_exists(lab: &Lab) -> bool {
    lab.gateway
        .command("nft")
        .args(["list", "table", "inet", TABLE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn table(lab: &Lab) -> String {
    let o = lab
        .gateway
        .exec("nft", &["list", "table", "inet", TABLE])
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Waits up to 5 s for the table to go.
fn table_goes(lab: &Lab) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if !table_exists(lab) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The daemons' logs, for a failure's message.
fn logs(t: &BraidTunnel) -> String {
    ["gateway.log", "server.log"]
        .iter()
        .map(|n| {
            let text = std::fs::read_to_string(t.dir().join(n)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            format!(
                "--- {n}\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `curl` from the client: (exit status, seconds taken).
fn curl(lab: &Lab, url: &str, out: &std::path::Path) -> (Option<i32>, f64) {
    let t = Instant::now();
    let s = lab
        .client
        .command("curl")
        .args(["-s", "--max-time", "60", "-o"])
        .arg(out)
        .arg(url)
        .status()
        .unwrap();
    (s.code(), t.elapsed().as_secs_f64())
}

#[test]
fn curl_downloads_through_split_tcp_and_the_redirect_leaves_with_the_gateway() {
    if let Err(e) = braid_lab::support::check(&[braid_lab::support::Need::Topology]) {
        braid_testkit::skip(e);
        return;
    }
    for tool in ["curl", "python3", "nft", "sha256sum"] {
        let ok = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !ok {
            braid_testkit::skip(format!("{tool} is missing"));
            return;
        }
    }
    std::env::set_var("BRAID_BIN", env!("CARGO_BIN_EXE_braid"));
    let dir = std::env::temp_dir().join(format!("braid-split-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 4 MB of bytes from a fixed seed (xorshift), so the hash means something.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let data: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let file = dir.join("file.bin");
    std::fs::write(&file, &data).unwrap();
    let want = sha256(&file);

    let lab = Lab::build(&[path("a", 20.0, 20.0), path("b", 10.0, 60.0)], 1).unwrap();
    let mut http = lab.internet.command("python3");
    http.args(["-m", "http.server", "8080", "--bind", &INTERNET.to_string()])
        .arg("--directory")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _http = lab.internet.spawn(&mut http).unwrap();
    let index = format!("http://{INTERNET}:8080/");
    let until = Instant::now() + Duration::from_secs(10);
    while lab
        .internet
        .command("curl")
        .args(["-s", "-o", "/dev/null", &index])
        .status()
        .map_or(true, |s| !s.success())
    {
        assert!(Instant::now() < until, "the HTTP server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The defaults: every TCP connection split.
    let settings = BraidSettings::default();
    let url = format!("http://{INTERNET}:8080/file.bin");
    let got = dir.join("got.bin");
    {
        let tunnel = BraidTunnel::start_with(&lab, &settings).unwrap();
        assert!(table(&lab).contains("redirect to"), "{}", table(&lab));
        let (code, secs) = curl(&lab, &url, &got);
        assert_eq!(
            code,
            Some(0),
            "curl failed after {secs:.1} s\n{}",
            logs(&tunnel)
        );
        assert_eq!(sha256(&got), want, "the download's hash differs");
        // The redirect carried it: its rule counted the connection's packets.
        let t = table(&lab);
        assert!(!t.contains("counter packets 0 "), "{t}");
        // A refused destination resets the client's connection at once.
        let (code, secs) = curl(&lab, &format!("http://{INTERNET}:8081/"), &got);
        assert!(code.is_some_and(|c| c != 0 && c != 28), "curl: {code:?}");
        assert!(secs < 20.0, "the refusal took {secs:.1} s");

        // SIGTERM: the gateway removes its table as it exits.
        let (gateway, _) = tunnel.pids();
        let pid = gateway.unwrap().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        assert!(
            table_goes(&lab),
            "the redirect outlived the gateway: {}\n{}",
            table(&lab),
            logs(&tunnel)
        );
    }
    {
        // SIGKILL leaves the table behind...
        let tunnel = BraidTunnel::start_with(&lab, &settings).unwrap();
        let (gateway, _) = tunnel.pids();
        let pid = gateway.unwrap().to_string();
        assert!(Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap()
            .success());
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            table_exists(&lab),
            "a killed gateway cannot have removed its table"
        );
    }
    {
        // ...which the next start replaces (one rule, towards the new listener), and the
        // download works again.
        let tunnel = BraidTunnel::start_with(&lab, &settings).unwrap();
        let t = table(&lab);
        assert_eq!(t.matches("redirect to").count(), 1, "{t}");
        let _ = std::fs::remove_file(&got);
        let (code, secs) = curl(&lab, &url, &got);
        assert_eq!(
            code,
            Some(0),
            "curl failed after {secs:.1} s\n{}",
            logs(&tunnel)
        );
        assert_eq!(sha256(&got), want);
        let (gateway, _) = tunnel.pids();
        let pid = gateway.unwrap().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        assert!(table_goes(&lab), "{}", table(&lab));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
