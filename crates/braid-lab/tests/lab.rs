//! The lab end to end: topology and cleanup, MPTCP's subflows on their paths, the web
//! workload over real sockets. Needs root and network namespaces; each test is skipped with
//! the reason otherwise. Tests assert behaviour (which paths carry traffic, that flows
//! complete, that nothing is left behind), never speed.

use std::process::Command;
use std::time::Duration;

use braid_lab::experiment;
use braid_lab::support::{check, Need};
use braid_lab::{Lab, PathSpec, System};
use braid_sim::host::WebConfig;
use braid_sim::link::LinkConfig;

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

fn existing(names: &[String]) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| names.iter().any(|m| m == n))
        .map(str::to_owned)
        .collect()
}

#[test]
fn mptcp_uses_every_path_and_single_paths_stay_on_theirs() {
    if let Err(e) = check(&[Need::Iperf, Need::Mptcp]) {
        braid_testkit::skip(e);
        return;
    }
    let mut lab = Lab::build(&[path("a", 20.0, 20.0), path("b", 10.0, 80.0)], 1).unwrap();
    assert_eq!(lab.mptcp_unavailable(), None);

    // Path b alone: nothing crosses path a.
    let r = experiment::bulk(&mut lab, &[System::Path(1)], 4, 1).unwrap();
    let single = r[0].as_ref().unwrap().goodput_mbps;
    let reports = lab.path_reports();
    assert!(
        reports[0].2.link.bytes_delivered < 10_000,
        "{:?}",
        reports[0].2.link
    );
    assert!(reports[1].2.link.bytes_delivered > 1_000_000);
    assert!(single > 5.0, "{single}");

    // MPTCP: both paths carry the download.
    let mptcp = lab.mptcp();
    let r = experiment::bulk(&mut lab, &[mptcp], 6, 2).unwrap();
    let mptcp = r[0].as_ref().unwrap();
    let reports = lab.path_reports();
    eprintln!(
        "MPTCP {mptcp:?}, paths {:#?}",
        reports
            .iter()
            .map(|r| r.2.link.bytes_delivered)
            .collect::<Vec<_>>()
    );
    for (name, _, down) in &reports {
        assert!(
            down.link.bytes_delivered > 1_000_000,
            "path {name}: {:?}",
            down.link
        );
    }
    let names = lab.namespaces();
    assert_eq!(existing(&names).len(), names.len());
    drop(lab);
    assert!(
        existing(&names).is_empty(),
        "left behind: {:?}",
        existing(&names)
    );
}

#[test]
fn web_flows_complete_over_a_path() {
    if let Err(e) = check(&[]) {
        braid_testkit::skip(e);
        return;
    }
    let mut lab = Lab::build(&[path("a", 10.0, 40.0)], 1).unwrap();
    let web = WebConfig {
        scale: 10.0,
        ..WebConfig::default()
    };
    let r = experiment::web(
        &mut lab,
        &[System::Path(0)],
        &web,
        1,
        Duration::from_secs(4),
        Duration::from_secs(10),
    )
    .unwrap();
    let w = &r[0];
    assert!(w.started >= 3, "{w:?}");
    assert_eq!(w.completed, w.started, "{w:?}");
    // Even the fastest flow pays the handshake and request: two RTTs.
    assert!(w.fct_ms.min >= 80.0, "{w:?}");
}

/// A path cut under a download and a CBR stream, each on the other path's address: the
/// stream over the cut path loses what was sent while it was dark, and only that; the
/// download over the cut path stalls for the cut.
#[test]
fn a_cut_loses_the_stream_on_the_cut_path_for_its_length() {
    if let Err(e) = check(&[Need::Mptcp]) {
        eprintln!("skipped: {e}");
        return;
    }
    let mut lab = Lab::build(&[path("a", 20.0, 20.0), path("b", 10.0, 40.0)], 1).unwrap();
    let plan = experiment::CutPlan {
        path: 0,
        trace_start_s: 0.0,
        cut_at_s: 1.0,
        cut_s: 1.0,
        duration_s: 3.0,
        video_mbps: 2.0,
    };
    // Both over path a (cut): a second of 2 Mbit/s in 1200-byte datagrams, ~208 lost.
    let r = experiment::cut_under_video(&mut lab, &System::Path(0), &plan, &mut |_, _| {}).unwrap();
    let v = &r.video;
    assert!(v.packets_sent > 500, "{v:?}");
    assert!((150..=260).contains(&v.packets_lost), "{v:?}");
    assert_eq!(v.packets_received + v.packets_lost, v.packets_sent);
    assert!(
        v.lost_runs.iter().all(|&(at, _)| (0.9..2.2).contains(&at)),
        "{v:?}"
    );
    assert!(r.longest_stall_ms >= 800.0, "{}", r.longest_stall_ms);
    // Over path b, which stays up: nothing lost.
    let r = experiment::cut_under_video(&mut lab, &System::Path(1), &plan, &mut |_, _| {}).unwrap();
    assert_eq!(r.video.packets_lost, 0, "{:?}", r.video);
    assert_eq!(r.video.duplicates, 0);
}
