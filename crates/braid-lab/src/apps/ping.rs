//! `ping`, for round-trip times across the emulated paths.

use std::net::Ipv4Addr;

use crate::netns::Netns;
use crate::LabError;

/// What `ping` reported, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PingStats {
    pub sent: u32,
    pub received: u32,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    pub mdev_ms: f64,
    /// The median of the replies' RTTs (robust to the odd reply delayed by CPU
    /// contention on a shared machine); 0 without replies.
    pub median_ms: f64,
}

/// Pings `to` from `ns`, `count` times every `interval_s`, from source address `from`.
pub fn ping(
    ns: &Netns,
    from: Ipv4Addr,
    to: Ipv4Addr,
    count: u32,
    interval_s: f64,
) -> Result<PingStats, LabError> {
    let out = ns.exec(
        "ping",
        &[
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            &format!("{interval_s}"),
            "-I",
            &from.to_string(),
            "-W",
            "2",
            &to.to_string(),
        ],
    )?;
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// Parses ping's summary lines.
pub fn parse(text: &str) -> Result<PingStats, LabError> {
    let bad = || LabError::App(format!("cannot read ping's summary:\n{text}"));
    let mut stats = PingStats::default();
    let mut rtts: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    rtts.sort_unstable_by(f64::total_cmp);
    if !rtts.is_empty() {
        stats.median_ms = braid_sim::metrics::quantile_sorted(&rtts, 0.5);
    }
    for line in text.lines() {
        if line.contains("packets transmitted") {
            let nums: Vec<u32> = line
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect();
            stats.sent = *nums.first().ok_or_else(bad)?;
            stats.received = *nums.get(1).ok_or_else(bad)?;
        }
        if let Some(rest) = line.split(" = ").nth(1).filter(|_| line.starts_with("rtt")) {
            let v: Vec<f64> = rest
                .split(" ms")
                .next()
                .unwrap_or_default()
                .split('/')
                .filter_map(|x| x.trim().parse().ok())
                .collect();
            let [min, avg, max, mdev] = v[..] else {
                return Err(bad());
            };
            (stats.min_ms, stats.avg_ms, stats.max_ms, stats.mdev_ms) = (min, avg, max, mdev);
        }
    }
    if stats.sent == 0 {
        return Err(bad());
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iputils_summary() {
        let text = "PING 10.1.0.2 (10.1.0.2) from 10.0.1.2 : 56(84) bytes of data.\n\
                    64 bytes from 10.1.0.2: icmp_seq=1 ttl=62 time=50.3 ms\n\
                    64 bytes from 10.1.0.2: icmp_seq=2 ttl=62 time=58.1 ms\n\
                    64 bytes from 10.1.0.2: icmp_seq=3 ttl=62 time=50.1 ms\n\n\
                    --- 10.1.0.2 ping statistics ---\n\
                    20 packets transmitted, 19 received, 5% packet loss, time 3805ms\n\
                    rtt min/avg/max/mdev = 50.112/50.254/50.731/0.131 ms, pipe 2\n";
        let s = parse(text).unwrap();
        assert_eq!((s.sent, s.received), (20, 19));
        assert_eq!(s.avg_ms, 50.254);
        assert_eq!(s.mdev_ms, 0.131);
        assert_eq!(s.median_ms, 50.3);
        assert!(parse("garbage").is_err());
    }
}
