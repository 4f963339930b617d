//! How faithful the emulator is: one path of a given rate and RTT, measured from outside
//! by ping (idle RTT) and iperf3 (TCP goodput against the rate the model gives TCP's
//! payload), and from inside by the emulator's own delivery-error histogram.

use std::time::Duration;

use braid_sim::link::LinkConfig;
use serde::Serialize;

use crate::apps::{iperf, ping};
use crate::emulator::{Histogram, TimingSummary};
use crate::topology::{client_path_addr, INTERNET};
use crate::{Lab, LabError, PathSpec};

/// Bytes of TCP payload in a full 1500-byte IP packet with timestamps (1500 - 20 - 32).
pub const TCP_PAYLOAD: f64 = 1448.0;
/// Bytes of an ICMP echo as ping sends it by default (56 + 8 + 20).
const PING_BYTES: f64 = 84.0;

/// One accuracy measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Accuracy {
    pub rate_mbps: f64,
    pub rtt_ms: f64,
    /// The RTT the model gives a ping (propagation plus serialization both ways).
    pub expected_rtt_ms: f64,
    pub ping: ping::PingStats,
    /// ping's median RTT relative to the model, minus 1 (the median, so that a reply
    /// delayed by a busy machine does not decide).
    pub rtt_error: f64,
    /// TCP goodput the model allows: the rate times payload per IP packet.
    pub expected_goodput_mbps: f64,
    pub goodput_mbps: f64,
    /// iperf3's goodput relative to the model, minus 1.
    pub goodput_error: f64,
    pub sender_congestion: Option<String>,
    /// Delivery error over both directions during the whole measurement.
    pub delivery_error: TimingSummary,
    /// Of which, time frames waited in the socket before the emulator read them (down).
    pub read_lag: TimingSummary,
}

/// Measures a symmetric path of `rate_mbps` and `rtt_ms` with `pings` pings and a TCP
/// download of `seconds` (after 2 s left out for slow start).
pub fn measure(
    rate_mbps: f64,
    rtt_ms: f64,
    pings: u32,
    seconds: u32,
) -> Result<Accuracy, LabError> {
    let link = LinkConfig {
        rate_mbps: Some(rate_mbps),
        delay_ms: rtt_ms / 2.0,
        ..LinkConfig::default()
    };
    let lab = Lab::build(
        &[PathSpec {
            name: "path".into(),
            up: link.clone(),
            down: link,
        }],
        1,
    )?;
    let src = client_path_addr(0);
    // One ping first so any first-packet effects are out of the way.
    let _ = ping::ping(&lab.client, src, INTERNET, 1, 0.2);
    let p = ping::ping(&lab.client, src, INTERNET, pings, 0.05)?;
    let expected_rtt_ms = rtt_ms + 2.0 * PING_BYTES * 8.0 / (rate_mbps * 1e6) * 1e3;

    let _server = iperf::start_server(&lab.internet, 5201, false)?;
    let mut test = iperf::IperfTest::tcp(INTERNET, 5201, seconds);
    test.bind = Some(src);
    test.omit_s = 2;
    let r = iperf::run(&lab.client, &test)?;
    std::thread::sleep(Duration::from_millis(150));
    let reports = lab.path_reports();
    let (_, up, down) = &reports[0];
    let mut hist = Histogram::default();
    hist.merge(&up.delivery_hist);
    hist.merge(&down.delivery_hist);
    let expected_goodput_mbps = rate_mbps * TCP_PAYLOAD / 1500.0;
    Ok(Accuracy {
        rate_mbps,
        rtt_ms,
        expected_rtt_ms,
        ping: p,
        rtt_error: p.median_ms / expected_rtt_ms - 1.0,
        expected_goodput_mbps,
        goodput_mbps: r.goodput_mbps,
        goodput_error: r.goodput_mbps / expected_goodput_mbps - 1.0,
        sender_congestion: r.sender_congestion,
        delivery_error: hist.summary(),
        read_lag: down.read_lag.clone(),
    })
}
