//! Workload configuration: one `[[workload]]` table each in a scenario file, checked into
//! the specifications the hosts run.
//!
//! ```toml
//! [[workload]]
//! kind = "web"          # PluriBus §6.1 short flows, SURGE sizes, Poisson arrivals
//! scale = 2.0
//!
//! [[workload]]
//! kind = "bulk"
//! flows = 8
//! tcp = "smoltcp"       # TCP workloads: "linux" (the default) or "smoltcp"
//!
//! [[workload]]
//! kind = "fetch-loop"
//! initial_window = "rfc3390"  # the Linux model's initial window: segments, or "rfc3390"
//!
//! [[workload]]
//! kind = "udp-cbr"
//! rate_mbps = 1.0
//! direction = "up"
//!
//! [[workload]]
//! kind = "fetch-loop"   # PluriBus §6.5.1
//! concurrency = 2
//! size_bytes = 10000
//! ```

use serde::{Deserialize, Serialize};
use thiserror::Error;

use braid_core::Instant;

use super::surge;

/// Which way the application data of a workload flows.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// From the internet host to the client host (a download).
    #[default]
    Down,
    /// From the client host to the internet host (an upload).
    Up,
}

/// Which TCP implementation carries a workload's connections (`tcp = "linux"` or
/// `"smoltcp"`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Tcp {
    /// The model written against the RFCs that behaves like Linux: initial window 10,
    /// Cubic with HyStart, SACK with RACK-TLP and PRR, 200 ms minimum RTO (`super::tcp`).
    #[default]
    Linux,
    /// smoltcp 0.14 with Cubic (`super::smol`).
    Smoltcp,
}

/// The initial congestion window of the Linux model's senders (`initial_window = 4` or
/// `"rfc3390"`); without it the model's default of ten segments (RFC 6928, Linux since
/// 2.6.39). Only `tcp = "linux"` takes it: smoltcp's is fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialWindow {
    /// This many segments, whatever the MSS.
    Segments(u32),
    /// RFC 3390 §1: min(4·MSS, max(2·MSS, 4380 bytes)), the initial window of end hosts
    /// before RFC 6928 (Linux before 2.6.39, 2011): three segments at an MSS of 1096 to
    /// 2190 bytes, four below, two above.
    Rfc3390,
}

impl InitialWindow {
    /// Most segments `Segments` may ask for.
    pub const MAX_SEGMENTS: u32 = 1000;

    /// The window in segments for a connection with this MSS.
    pub fn segments(self, mss: u32) -> u32 {
        match self {
            InitialWindow::Segments(n) => n,
            InitialWindow::Rfc3390 => {
                let mss = mss.max(1);
                (4 * mss).min((2 * mss).max(4380)) / mss
            }
        }
    }
}

impl Serialize for InitialWindow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            InitialWindow::Segments(n) => s.serialize_u32(*n),
            InitialWindow::Rfc3390 => s.serialize_str("rfc3390"),
        }
    }
}

impl<'de> Deserialize<'de> for InitialWindow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = InitialWindow;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number of segments or \"rfc3390\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<InitialWindow, E> {
                Ok(InitialWindow::Segments(
                    u32::try_from(n).unwrap_or(u32::MAX),
                ))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<InitialWindow, E> {
                u64::try_from(n)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
                    .and_then(|n| self.visit_u64(n))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<InitialWindow, E> {
                match s {
                    "rfc3390" => Ok(InitialWindow::Rfc3390),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// One workload: one `[[workload]]` table in a scenario file, selected by `kind`.
///
/// Unknown keys are errors, and every error names its key (see `super::de`, which
/// implements `Deserialize` for this type).
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WorkloadConfig {
    Web(WebConfig),
    Bulk(BulkConfig),
    UdpCbr(UdpCbrConfig),
    FetchLoop(FetchLoopConfig),
}

/// `kind = "web"`: the short-flow web workload of PluriBus §6.1.
///
/// Flows arrive as a Poisson process with mean inter-arrival `mean_interarrival_s / scale`:
/// PluriBus scales load by dividing inter-arrival times and keeps the size distribution.
/// Each flow opens a TCP connection from the client host, sends a small request naming the
/// size, and the internet host sends that many bytes and closes (`direction = "down"`); with
/// `"up"` the client uploads the bytes and the internet host answers with a small reply.
/// Flow completion time runs from the client's connect to the client receiving the last
/// byte (or the reply).
///
/// Sizes follow the SURGE web model (Barford & Crovella, SIGMETRICS 1998; see
/// [`surge`](super::surge)): mean 51 245 bytes, median 13 115 bytes with the default
/// 2 MB cap. With the default 2.6 s mean inter-arrival (PluriBus Table 1: 4 629 flows in
/// 3.34 h) the offered load at scale 1 is 19.7 kB/s ≈ 158 kbit/s, close to the 190 kbit/s
/// mean of the PluriBus traces.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// Label in the report; default `web-<index>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `"down"` (default) or `"up"`.
    pub direction: Direction,
    /// Mean inter-arrival time at scale 1, in seconds (default 2.6).
    pub mean_interarrival_s: f64,
    /// Load scale factor: inter-arrival times are divided by it (default 1).
    pub scale: f64,
    /// Fixes every flow's size in bytes instead of drawing it from SURGE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Largest flow drawn from SURGE, in bytes (default 2 000 000): the Pareto tail is
    /// truncated here.
    pub size_cap_bytes: u64,
    /// First arrivals after this time, in seconds (default 0).
    pub start_s: f64,
    /// No new flows after this time, in seconds (default: the end of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
    /// At most this many flows are started (default: unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_flows: Option<u64>,
    /// At most this many flows open at once; later arrivals are counted as `rejected`
    /// (default 10 000).
    pub max_open: usize,
    /// The TCP implementation (default `"linux"`).
    pub tcp: Tcp,
    /// The Linux model's initial window (default ten segments; see [`InitialWindow`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_window: Option<InitialWindow>,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            name: None,
            direction: Direction::Down,
            mean_interarrival_s: 2.6,
            scale: 1.0,
            size_bytes: None,
            size_cap_bytes: surge::DEFAULT_CAP_BYTES,
            start_s: 0.0,
            stop_s: None,
            max_flows: None,
            max_open: DEFAULT_MAX_OPEN,
            tcp: Tcp::Linux,
            initial_window: None,
        }
    }
}

/// `kind = "bulk"`: long-lived TCP flows moving data as fast as TCP allows.
///
/// All flows open at `start_s`. Without `bytes` they run to the end; with it each moves that
/// many bytes and reports its completion time. Goodput is application bytes received over
/// the time from connect to the last byte (or to the end of the run), per flow and in
/// total, with a time series per `sample_ms`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BulkConfig {
    /// Label in the report; default `bulk-<index>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Number of parallel connections (default 1).
    pub flows: u32,
    /// `"down"` (default) or `"up"`.
    pub direction: Direction,
    /// Bytes each flow moves; default: unbounded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// When the flows open, in seconds (default 0).
    pub start_s: f64,
    /// Socket buffer on the data path of each flow, in bytes (default 4 MiB): the receive
    /// window, so 4 MiB keeps one flow from being window-limited up to ~100 Mbit/s × 300 ms.
    pub buffer_bytes: usize,
    /// Interval of the goodput time series, in milliseconds (default 100; widened so a
    /// run has at most 100 000 intervals).
    pub sample_ms: u64,
    /// The TCP implementation (default `"linux"`).
    pub tcp: Tcp,
    /// The Linux model's initial window (default ten segments; see [`InitialWindow`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_window: Option<InitialWindow>,
    /// The Linux model's congestion control (default `"cubic"`; see [`TcpCc`]).
    #[serde(skip_serializing_if = "TcpCc::is_cubic")]
    pub tcp_cc: TcpCc,
    /// The Linux model offers SACK (default true; PRISM's vanilla TCP without SACK).
    #[serde(skip_serializing_if = "is_true")]
    pub sack: bool,
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The Linux model's congestion control (`tcp_cc`, bulk workloads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TcpCc {
    /// Cubic with SACK, RACK and PRR, as Linux.
    #[default]
    Cubic,
    /// TCP-PRISM (PRISM §6.2.2): Cubic, and on the negative ACK of PRISM's Reverse Path
    /// Controller (`reordering = "rpc"`) the lost segment is retransmitted at once and the
    /// window cut by the lossy link's share of the bandwidth only.
    Prism,
}

impl TcpCc {
    fn is_cubic(&self) -> bool {
        *self == TcpCc::Cubic
    }
}

impl Default for BulkConfig {
    fn default() -> Self {
        BulkConfig {
            name: None,
            flows: 1,
            direction: Direction::Down,
            bytes: None,
            start_s: 0.0,
            buffer_bytes: 4 << 20,
            sample_ms: 100,
            tcp: Tcp::Linux,
            initial_window: None,
            tcp_cc: TcpCc::Cubic,
            sack: true,
        }
    }
}

/// `kind = "udp-cbr"`: constant-bit-rate UDP, measured at the sink for loss, one-way
/// delay and reordering.
///
/// The rate counts UDP payload bits, as iperf does. Every payload carries a sequence number
/// and the send time.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UdpCbrConfig {
    /// Label in the report; default `udp-cbr-<index>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Payload rate in Mbit/s; set this or `rate_kbps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_mbps: Option<f64>,
    /// Payload rate in kbit/s; set this or `rate_mbps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_kbps: Option<f64>,
    /// UDP payload bytes per packet (default 1200; at least 16, at most MTU − 28).
    pub packet_bytes: usize,
    /// `"down"` (default) or `"up"`.
    pub direction: Direction,
    /// First packet at this time, in seconds (default 0).
    pub start_s: f64,
    /// No packets after this time, in seconds (default: the end of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
}

impl Default for UdpCbrConfig {
    fn default() -> Self {
        UdpCbrConfig {
            name: None,
            rate_mbps: None,
            rate_kbps: None,
            packet_bytes: 1200,
            direction: Direction::Down,
            start_s: 0.0,
            stop_s: None,
        }
    }
}

/// `kind = "fetch-loop"`: `concurrency` flows of `size_bytes` each, a new one starting as
/// soon as one completes (PluriBus §6.5.1: "two simultaneous TCP flows, each downloads
/// 10 KB, a new flow starts when one terminated").
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FetchLoopConfig {
    /// Label in the report; default `fetch-loop-<index>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Flows kept open at once (default 2).
    pub concurrency: u32,
    /// Bytes per flow (default 10 000).
    pub size_bytes: u64,
    /// `"down"` (default) or `"up"`.
    pub direction: Direction,
    /// When the first flows open, in seconds (default 0).
    pub start_s: f64,
    /// No new flows after this time, in seconds (default: the end of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
    /// The TCP implementation (default `"linux"`).
    pub tcp: Tcp,
    /// The Linux model's initial window (default ten segments; see [`InitialWindow`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_window: Option<InitialWindow>,
}

impl Default for FetchLoopConfig {
    fn default() -> Self {
        FetchLoopConfig {
            name: None,
            concurrency: 2,
            size_bytes: 10_000,
            direction: Direction::Down,
            start_s: 0.0,
            stop_s: None,
            tcp: Tcp::Linux,
            initial_window: None,
        }
    }
}

/// Default bound on concurrently open flows of one workload.
pub const DEFAULT_MAX_OPEN: usize = 10_000;
/// Most workloads in one run (each takes a server port).
pub const MAX_WORKLOADS: usize = 1000;
/// Most parallel flows of one bulk or fetch-loop workload.
pub const MAX_PARALLEL: u32 = 1000;
/// Smallest and largest socket buffer a bulk flow may ask for (smoltcp caps at 1 GiB).
const BUFFER_RANGE: (usize, usize) = (1 << 12, 1 << 30);
/// Bytes of a CBR payload's sequence number and send time.
pub const CBR_HEADER_BYTES: usize = 16;
/// IPv4 + UDP header bytes.
pub const UDP_OVERHEAD: usize = 28;
/// Smallest IP MTU the hosts accept (IPv4's minimum datagram every host must take).
pub const MIN_MTU: usize = 576;

/// A workload configuration that cannot run; the message names the key and what it needs.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum WorkloadError {
    #[error("workload {index} ({kind}): `{key}` must be {expected}, found {found}")]
    Invalid {
        index: usize,
        kind: &'static str,
        key: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error("workload {index} (udp-cbr): set exactly one of `rate_mbps` or `rate_kbps`")]
    Rate { index: usize },
    #[error(
        "workload {index} (udp-cbr): `packet_bytes` = {packet_bytes} does not fit the MTU of \
         {mtu} bytes; at most {max} bytes of UDP payload fit"
    )]
    PacketTooLarge {
        index: usize,
        packet_bytes: usize,
        mtu: usize,
        max: usize,
    },
    #[error("`mtu` must be between {MIN_MTU} and 65535 bytes, found {mtu}")]
    Mtu { mtu: usize },
    #[error("{count} workloads configured; at most {MAX_WORKLOADS} are supported")]
    TooMany { count: usize },
}

/// What kind of workload a specification runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Web,
    Bulk,
    UdpCbr,
    FetchLoop,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Web => "web",
            Kind::Bulk => "bulk",
            Kind::UdpCbr => "udp-cbr",
            Kind::FetchLoop => "fetch-loop",
        }
    }
}

/// A checked workload, in the hosts' units (microseconds, bytes).
#[derive(Clone, Debug)]
pub struct Spec {
    pub index: usize,
    pub name: String,
    pub kind: Kind,
    pub direction: Direction,
    pub start: Instant,
    pub stop: Instant,
    pub shape: Shape,
    /// The TCP implementation of a TCP workload.
    pub tcp: Option<Tcp>,
    /// The Linux model's initial window, when the workload sets one.
    pub initial_window: Option<InitialWindow>,
    /// The Linux model's congestion control.
    pub tcp_cc: TcpCc,
    /// The Linux model uses SACK.
    pub sack: bool,
}

/// The part of a [`Spec`] that differs by kind.
#[derive(Clone, Debug)]
pub enum Shape {
    Web {
        mean_interarrival_us: f64,
        size: SizeModel,
        max_flows: u64,
        max_open: usize,
    },
    Bulk {
        flows: u32,
        bytes: Option<u64>,
        buffer_bytes: usize,
        sample_us: u64,
    },
    Cbr {
        packet_bytes: usize,
        /// Microseconds between packets.
        interval_us: f64,
    },
    FetchLoop {
        concurrency: u32,
        size_bytes: u64,
    },
}

/// How a web flow's size is chosen.
#[derive(Clone, Copy, Debug)]
pub enum SizeModel {
    Fixed(u64),
    Surge { cap_bytes: u64 },
}

impl WorkloadConfig {
    pub fn kind(&self) -> Kind {
        match self {
            WorkloadConfig::Web(_) => Kind::Web,
            WorkloadConfig::Bulk(_) => Kind::Bulk,
            WorkloadConfig::UdpCbr(_) => Kind::UdpCbr,
            WorkloadConfig::FetchLoop(_) => Kind::FetchLoop,
        }
    }

    /// Checks the configuration of workload `index` for a run ending at `end` over hosts
    /// with IP MTU `mtu`.
    pub fn to_spec(&self, index: usize, end: Instant, mtu: usize) -> Result<Spec, WorkloadError> {
        let kind = self.kind();
        let check = Check { index, kind };
        let (name, direction, start_s, stop_s, tcp) = match self {
            WorkloadConfig::Web(c) => (&c.name, c.direction, c.start_s, c.stop_s, Some(c.tcp)),
            WorkloadConfig::Bulk(c) => (&c.name, c.direction, c.start_s, None, Some(c.tcp)),
            WorkloadConfig::UdpCbr(c) => (&c.name, c.direction, c.start_s, c.stop_s, None),
            WorkloadConfig::FetchLoop(c) => {
                (&c.name, c.direction, c.start_s, c.stop_s, Some(c.tcp))
            }
        };
        let initial_window = match self {
            WorkloadConfig::Web(c) => c.initial_window,
            WorkloadConfig::Bulk(c) => c.initial_window,
            WorkloadConfig::UdpCbr(_) => None,
            WorkloadConfig::FetchLoop(c) => c.initial_window,
        };
        let (tcp_cc, sack) = match self {
            WorkloadConfig::Bulk(c) => (c.tcp_cc, c.sack),
            _ => (TcpCc::Cubic, true),
        };
        if (tcp_cc != TcpCc::Cubic || !sack) && tcp != Some(Tcp::Linux) {
            return Err(check.invalid(
                "tcp_cc",
                "\"cubic\" and sack = true with tcp = \"smoltcp\" (only the Linux model takes them)",
                format!("{tcp_cc:?}, sack = {sack}"),
            ));
        }
        if let Some(iw) = initial_window {
            if tcp != Some(Tcp::Linux) {
                return Err(check.invalid(
                    "initial_window",
                    "unset with tcp = \"smoltcp\" (only the Linux model takes it)",
                    match iw {
                        InitialWindow::Segments(n) => n.to_string(),
                        InitialWindow::Rfc3390 => "\"rfc3390\"".to_owned(),
                    },
                ));
            }
            if let InitialWindow::Segments(n) = iw {
                if !(1..=InitialWindow::MAX_SEGMENTS).contains(&n) {
                    return Err(check.invalid(
                        "initial_window",
                        "between 1 and 1000 segments, or \"rfc3390\"",
                        n,
                    ));
                }
            }
        }
        let start = check.time("start_s", start_s)?;
        let stop = match stop_s {
            Some(s) => check.time("stop_s", s)?,
            None => end,
        };
        let shape = match self {
            WorkloadConfig::Web(c) => {
                check.positive("mean_interarrival_s", c.mean_interarrival_s)?;
                check.positive("scale", c.scale)?;
                let size = match c.size_bytes {
                    Some(bytes) => SizeModel::Fixed(check.nonzero("size_bytes", bytes)?),
                    None => {
                        if c.size_cap_bytes < surge::TAIL_K_BYTES as u64 {
                            return Err(check.invalid(
                                "size_cap_bytes",
                                "at least the Pareto scale of 133000 bytes",
                                c.size_cap_bytes,
                            ));
                        }
                        SizeModel::Surge {
                            cap_bytes: c.size_cap_bytes,
                        }
                    }
                };
                if c.max_open == 0 {
                    return Err(check.invalid("max_open", "at least 1", c.max_open));
                }
                Shape::Web {
                    mean_interarrival_us: c.mean_interarrival_s * 1e6 / c.scale,
                    size,
                    max_flows: c.max_flows.unwrap_or(u64::MAX),
                    max_open: c.max_open,
                }
            }
            WorkloadConfig::Bulk(c) => {
                check.parallel("flows", c.flows)?;
                if let Some(bytes) = c.bytes {
                    check.nonzero("bytes", bytes)?;
                }
                if !(BUFFER_RANGE.0..=BUFFER_RANGE.1).contains(&c.buffer_bytes) {
                    return Err(check.invalid(
                        "buffer_bytes",
                        "between 4096 and 1073741824 bytes",
                        c.buffer_bytes,
                    ));
                }
                Shape::Bulk {
                    flows: c.flows,
                    bytes: c.bytes,
                    buffer_bytes: c.buffer_bytes,
                    sample_us: check
                        .nonzero("sample_ms", c.sample_ms)?
                        .saturating_mul(1000),
                }
            }
            WorkloadConfig::UdpCbr(c) => {
                let rate_bps = match (c.rate_mbps, c.rate_kbps) {
                    (Some(m), None) => check.positive("rate_mbps", m)? * 1e6,
                    (None, Some(k)) => check.positive("rate_kbps", k)? * 1e3,
                    _ => return Err(WorkloadError::Rate { index }),
                };
                let max = mtu.saturating_sub(UDP_OVERHEAD);
                if c.packet_bytes < CBR_HEADER_BYTES {
                    return Err(check.invalid(
                        "packet_bytes",
                        "at least 16 (sequence number and send time)",
                        c.packet_bytes,
                    ));
                }
                if c.packet_bytes > max {
                    return Err(WorkloadError::PacketTooLarge {
                        index,
                        packet_bytes: c.packet_bytes,
                        mtu,
                        max,
                    });
                }
                let interval_us = c.packet_bytes as f64 * 8.0 / rate_bps * 1e6;
                if interval_us < 1.0 {
                    return Err(check.invalid(
                        "rate_mbps",
                        "at most one packet per microsecond",
                        rate_bps / 1e6,
                    ));
                }
                Shape::Cbr {
                    packet_bytes: c.packet_bytes,
                    interval_us,
                }
            }
            WorkloadConfig::FetchLoop(c) => {
                check.parallel("concurrency", c.concurrency)?;
                Shape::FetchLoop {
                    concurrency: c.concurrency,
                    size_bytes: check.nonzero("size_bytes", c.size_bytes)?,
                }
            }
        };
        Ok(Spec {
            index,
            name: name
                .clone()
                .unwrap_or_else(|| format!("{}-{index}", kind.label())),
            kind,
            direction,
            start,
            stop,
            shape,
            tcp,
            initial_window,
            tcp_cc,
            sack,
        })
    }
}

/// Builds errors that name the workload and key.
struct Check {
    index: usize,
    kind: Kind,
}

impl Check {
    fn invalid(
        &self,
        key: &'static str,
        expected: &'static str,
        found: impl ToString,
    ) -> WorkloadError {
        WorkloadError::Invalid {
            index: self.index,
            kind: self.kind.label(),
            key,
            expected,
            found: found.to_string(),
        }
    }

    fn positive(&self, key: &'static str, x: f64) -> Result<f64, WorkloadError> {
        if x.is_finite() && x > 0.0 {
            Ok(x)
        } else {
            Err(self.invalid(key, "a positive number", x))
        }
    }

    fn nonzero(&self, key: &'static str, x: u64) -> Result<u64, WorkloadError> {
        if x > 0 {
            Ok(x)
        } else {
            Err(self.invalid(key, "at least 1", x))
        }
    }

    fn parallel(&self, key: &'static str, n: u32) -> Result<u32, WorkloadError> {
        if (1..=MAX_PARALLEL).contains(&n) {
            Ok(n)
        } else {
            Err(self.invalid(key, "between 1 and 1000", n))
        }
    }

    /// Seconds from the start of the run.
    fn time(&self, key: &'static str, s: f64) -> Result<Instant, WorkloadError> {
        if s.is_finite() && (0.0..1e9).contains(&s) {
            Ok(Instant::from_micros((s * 1e6).round() as u64))
        } else {
            Err(self.invalid(key, "a time in seconds, 0 or more", s))
        }
    }
}
