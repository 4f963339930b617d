//! iperf3: bulk TCP (Cubic, set per socket with `-C cubic` because a namespace other than
//! the initial one cannot change the default congestion control) and UDP constant bit
//! rate, optionally through `mptcpize` for Linux MPTCP.

use std::net::Ipv4Addr;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::netns::{LabProcess, Netns};
use crate::LabError;

/// One iperf3 test, run from the client host against the internet host.
#[derive(Clone, Debug)]
pub struct IperfTest {
    pub server: Ipv4Addr,
    pub port: u16,
    /// Source address (selects the path, or MPTCP's first subflow).
    pub bind: Option<Ipv4Addr>,
    /// Through `mptcpize run` on both ends.
    pub mptcp: bool,
    pub duration_s: u32,
    /// Seconds at the start left out of the result (slow start).
    pub omit_s: u32,
    /// Data from the internet host to the client (`-R`), as a download.
    pub download: bool,
    pub parallel: u32,
    /// UDP at this payload rate (bit/s) instead of TCP.
    pub udp_rate_bps: Option<f64>,
    /// UDP payload bytes per datagram.
    pub udp_len: usize,
    pub interval_s: f64,
}

impl IperfTest {
    pub fn tcp(server: Ipv4Addr, port: u16, duration_s: u32) -> IperfTest {
        IperfTest {
            server,
            port,
            bind: None,
            mptcp: false,
            duration_s,
            omit_s: 0,
            download: true,
            parallel: 1,
            udp_rate_bps: None,
            udp_len: 1200,
            interval_s: 0.5,
        }
    }
}

/// What the receiving side measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IperfResult {
    /// Receiver goodput over the test (omitted seconds excluded).
    pub goodput_mbps: f64,
    /// Receiver goodput per interval: (end of the interval in s, Mbit/s).
    pub series: Vec<(f64, f64)>,
    /// TCP retransmissions by the sender, when reported.
    pub retransmits: Option<u64>,
    /// UDP: datagrams lost (%) and jitter (ms).
    pub lost_percent: Option<f64>,
    pub jitter_ms: Option<f64>,
    /// The congestion control the sender used, as iperf3 reports it.
    pub sender_congestion: Option<String>,
}

fn program(mptcp: bool) -> (&'static str, Vec<&'static str>) {
    if mptcp {
        ("mptcpize", vec!["run", "iperf3"])
    } else {
        ("iperf3", vec![])
    }
}

/// Starts a one-off iperf3 server on `port` in `ns`.
pub fn start_server(ns: &Netns, port: u16, mptcp: bool) -> Result<LabProcess, LabError> {
    let (prog, pre) = program(mptcp);
    let mut cmd = ns.command(prog);
    cmd.args(pre)
        .args(["-s", "-1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let p = ns.spawn(&mut cmd)?;
    // Give it time to listen; the client retries a refused connection anyway.
    std::thread::sleep(Duration::from_millis(150));
    Ok(p)
}

/// Spawns the client of `test` in `ns`; collect it with [`finish`].
pub fn start_client(ns: &Netns, test: &IperfTest) -> Result<LabProcess, LabError> {
    let (prog, pre) = program(test.mptcp);
    let mut cmd = ns.command(prog);
    cmd.args(pre).args([
        "-c",
        &test.server.to_string(),
        "-p",
        &test.port.to_string(),
        "-t",
        &test.duration_s.to_string(),
        "-O",
        &test.omit_s.to_string(),
        "-i",
        &format!("{}", test.interval_s),
        "-P",
        &test.parallel.to_string(),
        "-J",
        "--connect-timeout",
        "3000",
    ]);
    if let Some(b) = test.bind {
        cmd.args(["-B", &b.to_string()]);
    }
    if test.download {
        cmd.arg("-R");
    }
    match test.udp_rate_bps {
        Some(rate) => {
            cmd.args([
                "-u",
                "-b",
                &format!("{rate:.0}"),
                "-l",
                &test.udp_len.to_string(),
            ]);
        }
        None => {
            cmd.args(["-C", "cubic"]);
        }
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    ns.spawn(&mut cmd)
}

/// Waits for a client started by [`start_client`] and reads its report. An iperf3 error
/// (a reset, a refused connection) is an `App` error carrying iperf3's message.
pub fn finish(client: LabProcess, test: &IperfTest) -> Result<IperfResult, LabError> {
    let limit = Duration::from_secs(u64::from(test.duration_s + test.omit_s) + 20);
    let out = client.wait_output(limit)?;
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// Runs `test` to completion.
pub fn run(ns: &Netns, test: &IperfTest) -> Result<IperfResult, LabError> {
    finish(start_client(ns, test)?, test)
}

/// Reads iperf3's `-J` report.
pub fn parse(text: &str) -> Result<IperfResult, LabError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| LabError::App(format!("iperf3 printed no JSON report ({e})")))?;
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        return Err(LabError::App(format!("iperf3: {err}")));
    }
    let end = &v["end"];
    let received = if end.get("sum_received").is_some() {
        &end["sum_received"]
    } else {
        &end["sum"]
    };
    let bps = received["bits_per_second"]
        .as_f64()
        .ok_or_else(|| LabError::App("iperf3's report has no receiver rate".into()))?;
    let series = v["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|i| !i["sum"]["omitted"].as_bool().unwrap_or(false))
                .filter_map(|i| {
                    Some((
                        i["sum"]["end"].as_f64()?,
                        i["sum"]["bits_per_second"].as_f64()? / 1e6,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(IperfResult {
        goodput_mbps: bps / 1e6,
        series,
        retransmits: end["sum_sent"]["retransmits"].as_u64(),
        lost_percent: end["sum"]["lost_percent"].as_f64(),
        jitter_ms: end["sum"]["jitter_ms"].as_f64(),
        sender_congestion: end["sender_tcp_congestion"].as_str().map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_tcp_report_and_errors() {
        let text = r#"{"intervals":[{"sum":{"end":0.5,"bits_per_second":9.1e6,"omitted":false}}],
            "end":{"sum_sent":{"retransmits":3},"sum_received":{"bits_per_second":9.6e6},
            "sender_tcp_congestion":"cubic"}}"#;
        let r = parse(text).unwrap();
        assert!((r.goodput_mbps - 9.6).abs() < 1e-9);
        assert_eq!(r.series, vec![(0.5, 9.1)]);
        assert_eq!(r.retransmits, Some(3));
        assert_eq!(r.sender_congestion.as_deref(), Some("cubic"));
        let err = parse(r#"{"error":"unable to connect to server"}"#).unwrap_err();
        assert!(err.to_string().contains("unable to connect"));
        assert!(parse("").is_err());
    }
}
