//! braid itself in the lab, as a user runs it: `braid lab run` starts the daemons over the
//! emulated paths and a real TCP download crosses the tunnel over every path. Needs root
//! and network namespaces (and the lab's tools); skipped with the reason otherwise.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

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

/// The metered uplink's bytes this cap period survive a crash: a bulk upload counts bytes
/// on the metered uplink, the gateway is killed with SIGKILL (nothing runs at exit) and
/// started again, and its count resumes from the state file, within what one save
/// interval can miss. Its cap, lowered to just above that count, then holds: a second
/// upload and a download cross on the cheap uplink while the metered one carries only
/// heartbeats. TCP crosses as split-TCP (the default), whose stream both daemons hold on
/// the metered uplink.
#[test]
fn metered_counts_survive_a_crash_and_the_cap_holds() {
    use braid_lab::apps::iperf;
    use braid_lab::braid_daemon::{BraidSettings, BraidTunnel, GatewayKeys};
    use braid_lab::topology::INTERNET;

    if let Err(e) = braid_lab::support::check(&[braid_lab::support::Need::Iperf]) {
        braid_testkit::skip(e);
        return;
    }
    std::env::set_var("BRAID_BIN", env!("CARGO_BIN_EXE_braid"));
    let path = |name: &str, mbps: f64| {
        let l = braid_sim::link::LinkConfig {
            rate_mbps: Some(mbps),
            delay_ms: 10.0,
            ..braid_sim::link::LinkConfig::default()
        };
        braid_lab::PathSpec {
            name: name.into(),
            up: l.clone(),
            down: l,
        }
    };
    let lab = braid_lab::Lab::build(&[path("cheap", 4.0), path("lte", 4.0)], 1).unwrap();
    // The cap starts over tomorrow: a 50 GB cap paces the metered uplink at about
    // 4.6 Mbit/s over the day left, so it carries what the cheap one cannot.
    let out = Command::new("date")
        .args(["-u", "-d", "tomorrow", "+%d"])
        .output()
        .unwrap();
    let day: u8 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let metered = |cap_gb: f64| {
        format!(
            "metered = true\ncost_per_gb = 5\nmonthly_cap_gb = {cap_gb}\ncap_reset_day = {day}\n"
        )
    };
    let keys = GatewayKeys {
        interface: "meter_state = \"{dir}/meter.json\"\n".into(),
        uplinks: vec![String::new(), metered(50.0)],
    };
    let mut tunnel = BraidTunnel::start_configured(&lab, &BraidSettings::default(), &keys).unwrap();
    let state = tunnel.dir().join("meter.json");
    let transfer = |port: u16, download: bool| {
        let server = iperf::start_server(&lab.internet, port, false).unwrap();
        let mut test = iperf::IperfTest::tcp(INTERNET, port, 4);
        test.download = download;
        let r = iperf::run(&lab.client, &test);
        drop(server);
        r.unwrap()
    };
    let upload = |port: u16| transfer(port, false);
    let lte = |t: &BraidTunnel| {
        let s = t.status("gateway").unwrap();
        let m = s["sessions"][0]["paths"][1]["meter"].clone();
        assert!(m.is_object(), "{s}");
        m
    };
    let r = upload(5201);
    assert!(r.goodput_mbps > 1.0, "{r:?}");
    // Every byte counted is saved within one save interval (and the status snapshot's).
    std::thread::sleep(braid_net::meter_ledger::SAVE_EVERY + Duration::from_secs(2));
    let before = lte(&tunnel)["period_bytes"].as_u64().unwrap();
    assert!(
        before > 500_000,
        "the metered uplink carried {before} bytes"
    );
    tunnel.kill_gateway();
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let saved = saved["uplinks"][0]["used_bytes"].as_u64().unwrap();
    // Heartbeats alone between the last save and the kill: a few kB.
    let slack = 64_000;
    assert!(
        saved + slack >= before && saved <= before,
        "saved {saved}, counted {before}"
    );

    // The cap lowered to just above the count: the count resumes, and the cap holds.
    let cfg = tunnel.dir().join("gateway.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let cap_gb = (before + 1_000_000) as f64 / 1e9;
    std::fs::write(
        &cfg,
        text.replace("monthly_cap_gb = 50", &format!("monthly_cap_gb = {cap_gb}")),
    )
    .unwrap();
    tunnel.restart_gateway(&lab).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let resumed = lte(&tunnel);
    let after_restart = resumed["period_bytes"].as_u64().unwrap();
    assert!(
        after_restart >= saved && after_restart < saved + slack,
        "resumed at {after_restart}, saved {saved}"
    );
    assert_eq!(resumed["held"], true, "{resumed}");
    let r = upload(5202);
    assert!(r.goodput_mbps > 1.0, "{r:?}");
    // A download too: the server keeps to the cap the gateway announced, counted both
    // ways at the gateway.
    let down = transfer(5203, true);
    assert!(down.goodput_mbps > 1.0, "{down:?}");
    let end = lte(&tunnel)["period_bytes"].as_u64().unwrap();
    assert!(
        end < after_restart + slack,
        "the held uplink carried {} bytes",
        end - after_restart
    );
    let cap = (cap_gb * 1e9) as u64;
    assert!(end <= cap, "{end} over the cap {cap}");
    eprintln!(
        "metered uplink: counted {before} B, saved {saved} B, resumed at {after_restart} B, \
         {end} B after a second upload of {:.2} Mbit/s and a download of {:.2} (cap {cap} B)",
        r.goodput_mbps, down.goodput_mbps
    );
}
