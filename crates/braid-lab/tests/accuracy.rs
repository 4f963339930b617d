//! The emulator's accuracy seen from outside: a 10 Mbit/s, 50 ms RTT emulated path must
//! give ping and iperf3 what the model says, within 3%. Needs root and network namespaces;
//! skipped with the reason otherwise.

use braid_lab::support::{check, Need};

#[test]
fn ten_megabit_fifty_ms_path_measures_within_three_percent() {
    if let Err(e) = check(&[Need::Iperf, Need::Ping]) {
        braid_testkit::skip(e);
        return;
    }
    let a = braid_lab::accuracy::measure(10.0, 50.0, 40, 8).expect("lab run");
    eprintln!("{}", serde_json::to_string_pretty(&a).unwrap_or_default());
    assert!(
        a.rtt_error.abs() <= 0.03,
        "ping median RTT {:.2} ms vs model {:.2} ms",
        a.ping.median_ms,
        a.expected_rtt_ms
    );
    assert!(
        a.goodput_error.abs() <= 0.03,
        "iperf3 goodput {:.2} Mbit/s vs model {:.2} Mbit/s",
        a.goodput_mbps,
        a.expected_goodput_mbps
    );
    assert_eq!(a.ping.received, a.ping.sent, "the path has no loss");
}
