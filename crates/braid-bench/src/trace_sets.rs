//! The sets of recorded links that `trace-bulk`, `trace-web` and `trace-pairs` bond: two or
//! three downlink capacity traces from the repository's `traces/` (mahimahi format, the
//! converted ones gzip-compressed; traces/README.md names each file's source), each with
//! the one-way delay typical of its radio (LTE 25-35 ms, 3G 40-75 ms, WiFi 5-10 ms, 5G
//! 15-20 ms) and a constant uplink.

use std::path::{Path, PathBuf};

use braid_sim::TraceCache;

/// Each path's uplink, kbit/s: constant, as in issue 18's measurements, so that every
/// set is judged on its downlinks (most converted traces record no uplink).
pub const UPLINK_KBPS: f64 = 3000.0;

/// One recorded link.
#[derive(Clone, Copy, Debug)]
pub struct TraceLink {
    /// The path's name in the scenario and the reports.
    pub name: &'static str,
    /// The downlink trace, a file in `traces/`.
    pub trace: &'static str,
    /// Radio technology, for reports.
    pub radio: &'static str,
    /// One-way delay both ways, ms.
    pub delay_ms: f64,
}

/// Two or three links bonded together.
#[derive(Clone, Copy, Debug)]
pub struct TraceSet {
    pub name: &'static str,
    /// What was recorded and how the recorder moved.
    pub what: &'static str,
    pub links: &'static [TraceLink],
    /// Share of each benchmark's run time this set runs: below 1 where the links' rates
    /// make the simulator slow (an excerpt from the traces' start).
    pub time_share: f64,
}

const fn l(
    name: &'static str,
    trace: &'static str,
    radio: &'static str,
    delay_ms: f64,
) -> TraceLink {
    TraceLink {
        name,
        trace,
        radio,
        delay_ms,
    }
}

/// Issue 18's four pairs, with its delays: the first four sets, and `trace-pairs`.
pub const ISSUE_PAIRS: usize = 4;

/// Every set, issue 18's four pairs first.
pub const SETS: &[TraceSet] = &[
    TraceSet {
        name: "att+tmobile-lte",
        what: "LTE + LTE, driving (mahimahi)",
        links: &[
            l("att", "ATT-LTE-driving.down.gz", "LTE", 35.0),
            l("tmobile", "TMobile-LTE-driving.down.gz", "LTE", 25.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "verizon+tmobile-lte-short",
        what: "LTE + LTE, mobility not stated (mahimahi 'short')",
        links: &[
            l("verizon", "Verizon-LTE-short.down.gz", "LTE", 25.0),
            l("tmobile", "TMobile-LTE-short.down.gz", "LTE", 30.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "att+verizon-lte-2016",
        what: "LTE + LTE, driving (mahimahi, indigo): the demo's bus",
        links: &[
            l("att", "ATT-LTE-driving-2016.down", "LTE", 35.0),
            l("verizon", "Verizon-LTE-driving-60s.down", "LTE", 25.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "umts+evdo",
        what: "UMTS + EV-DO (3G), driving (mahimahi)",
        links: &[
            l("umts", "TMobile-UMTS-driving.down", "UMTS", 40.0),
            l("evdo", "Verizon-EVDO-driving.down", "EV-DO", 75.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "hsdpa-bus+tram",
        what: "HSDPA + HSDPA, bus and tram, Oslo",
        links: &[
            l("bus", "norway-bus.down.gz", "HSDPA", 60.0),
            l("tram", "norway-tram.down.gz", "HSDPA", 50.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "hsdpa-train+car",
        what: "HSDPA + HSDPA, train and car, Oslo",
        links: &[
            l("train", "norway-train.down.gz", "HSDPA", 55.0),
            l("car", "norway-car.down.gz", "HSDPA", 45.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "hsdpa-metro+ferry+bus",
        what: "three HSDPA links, metro, ferry and bus, Oslo",
        links: &[
            l("metro", "norway-metro.down.gz", "HSDPA", 70.0),
            l("ferry", "norway-ferry.down.gz", "HSDPA", 65.0),
            l("bus", "norway-bus.down.gz", "HSDPA", 60.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "nyc-subway-3g+4g",
        what: "3G + LTE, New York subway",
        links: &[
            l("3g", "nyc-3g-subway.down.gz", "3G", 60.0),
            l("4g", "nyc-4g-subway.down.gz", "LTE", 30.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "nyc-taxi+timessquare",
        what: "LTE + LTE, taxi and walking in Times Square, New York",
        links: &[
            l("taxi", "nyc-taxi.down.gz", "LTE", 30.0),
            l("timessquare", "nyc-timessquare.down.gz", "LTE", 25.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "nyu-bus+subway",
        what: "LTE + LTE, bus B57 and the 7 train, New York (NYU-METS)",
        links: &[
            l("bus", "nyu-bus.down.gz", "LTE", 30.0),
            l("subway", "nyu-subway.down.gz", "LTE", 35.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "ghent-car+foot",
        what: "LTE + LTE, car and walking, Ghent",
        links: &[
            l("car", "ghent-car.down.gz", "LTE", 30.0),
            l("foot", "ghent-foot.down.gz", "LTE", 25.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "5g-static+lte-walk",
        what: "5G NSA, still (Cork) + LTE, walking (Ghent)",
        links: &[
            l("5g", "ucc-5g-static.down.gz", "5G", 15.0),
            l("lte", "ghent-foot.down.gz", "LTE", 30.0),
        ],
        // 130 Mbit/s together: the web runs alone took 10-20 s of 120 simulated.
        time_share: 0.5,
    },
    TraceSet {
        name: "5g-drive+lte-drive",
        what: "5G NSA + LTE, driving (Cork; mahimahi T-Mobile)",
        links: &[
            l("5g", "ucc-5g-driving.down.gz", "5G", 20.0),
            l("lte", "TMobile-LTE-driving.down.gz", "LTE", 30.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "5gophers-3-carriers",
        what: "5G, Verizon + T-Mobile + Sprint recorded at once, driving (5Gophers, rates x0.1)",
        links: &[
            l("verizon", "5g-driving-verizon.down.gz", "5G", 15.0),
            l("tmobile", "5g-driving-tmobile.down.gz", "5G", 18.0),
            l("sprint", "5g-driving-sprint.down.gz", "5G", 20.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "5g+umts",
        what: "5G (T-Mobile, x0.1) + UMTS, driving",
        links: &[
            l("5g", "5g-driving-tmobile.down.gz", "5G", 18.0),
            l("umts", "TMobile-UMTS-driving.down", "UMTS", 45.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "mpw-7_1",
        what: "WiFi + cellular recorded together, walking out of WiFi range (multipath-wireless)",
        links: &[
            l("wifi", "mpw-7_1-wifi.down.gz", "WiFi", 7.0),
            l("cellular", "mpw-7_1-cellular.down.gz", "LTE", 30.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "mpw-8_1",
        what: "WiFi + cellular recorded together, library to outside (multipath-wireless)",
        links: &[
            l("wifi", "mpw-8_1-wifi.down.gz", "WiFi", 5.0),
            l("cellular", "mpw-8_1-cellular.down.gz", "LTE", 30.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "mpw-13_1",
        what: "WiFi + cellular recorded together, into a basement (multipath-wireless)",
        links: &[
            l("wifi", "mpw-13_1-wifi.down.gz", "WiFi", 8.0),
            l("cellular", "mpw-13_1-cellular.down.gz", "LTE", 35.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "mpw-21_1",
        what:
            "WiFi + cellular recorded together, outdoor bench into a library (multipath-wireless \
               12_1, shipped as mpw-21_1: every walk of paths 21-23 is under 60 s)",
        links: &[
            l("wifi", "mpw-21_1-wifi.down.gz", "WiFi", 10.0),
            l("cellular", "mpw-21_1-cellular.down.gz", "LTE", 30.0),
        ],
        time_share: 1.0,
    },
    TraceSet {
        name: "bus-lte+lte+umts",
        what: "a bus with three modems: LTE + LTE + UMTS, driving",
        links: &[
            l("att", "ATT-LTE-driving-2016.down", "LTE", 35.0),
            l("verizon", "Verizon-LTE-driving-60s.down", "LTE", 25.0),
            l("umts", "TMobile-UMTS-driving.down", "UMTS", 45.0),
        ],
        time_share: 1.0,
    },
];

/// The folder holding the traces: `traces/` of the working directory when run from the
/// repository, else of the repository this was built from.
pub fn traces_dir() -> PathBuf {
    let here = Path::new("traces");
    if here.join("ATT-LTE-driving-2016.down").exists() {
        here.to_path_buf()
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces")
    }
}

/// The trace files of `sets` missing from `dir`, each once, in order.
pub fn missing(sets: &[TraceSet], dir: &Path) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for link in sets.iter().flat_map(|s| s.links) {
        if !dir.join(link.trace).is_file() && !out.contains(&link.trace) {
            out.push(link.trace);
        }
    }
    out
}

/// Mean capacity (bit/s) of the trace at `path` over `duration_s` from `offset_s` into it,
/// the file looping as the link loops it.
pub fn window_rate_bps(
    traces: &mut TraceCache,
    path: &Path,
    offset_s: f64,
    duration_s: f64,
) -> Result<f64, braid_sim::link::LinkConfigError> {
    let t = traces.load(path)?;
    let period = t.period_ms();
    let ops = t.opportunities_ms();
    // Opportunities at or before `ms`, counting from the trace's start.
    let upto = |ms: u64| {
        (ms / period) * ops.len() as u64 + ops.partition_point(|&o| o <= ms % period) as u64
    };
    let start = (offset_s * 1000.0) as u64 % period;
    let n = upto(start + (duration_s * 1000.0) as u64) - if start == 0 { 0 } else { upto(start) };
    Ok(n as f64 * 1500.0 * 8.0 / duration_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sets_have_two_or_three_links() {
        for (i, s) in SETS.iter().enumerate() {
            assert!(SETS[..i].iter().all(|o| o.name != s.name), "{}", s.name);
            assert!((2..=3).contains(&s.links.len()), "{}", s.name);
            for (j, link) in s.links.iter().enumerate() {
                assert!(s.links[..j].iter().all(|o| o.name != link.name));
            }
        }
        assert!(SETS.len() >= 16);
    }

    #[test]
    fn window_rate_counts_whole_loops_and_the_part() {
        let mut traces = TraceCache::new();
        let p = Path::new("gen");
        // Two opportunities per 10 ms period: 2.4 Mbit/s.
        traces.insert(braid_sim::link::Trace::parse(p, "5\n10\n").unwrap());
        let r = window_rate_bps(&mut traces, p, 0.0, 1.0).unwrap();
        assert!((r - 2.4e6).abs() < 1.0, "{r}");
        // 25 ms: two whole periods and the first opportunity of the third.
        let r = window_rate_bps(&mut traces, p, 0.0, 0.025).unwrap();
        assert!((r - 5.0 * 12_000.0 / 0.025).abs() < 1.0, "{r}");
        // From 7 ms: the opportunities at 10, 15, 20, 25 and 30 ms.
        let r = window_rate_bps(&mut traces, p, 0.007, 0.025).unwrap();
        assert!((r - 5.0 * 12_000.0 / 0.025).abs() < 1.0, "{r}");
        // From 12 ms for 5 ms: only 15 ms; an offset past the period wraps.
        let r = window_rate_bps(&mut traces, p, 0.012, 0.005).unwrap();
        assert!((r - 12_000.0 / 0.005).abs() < 1.0, "{r}");
        let r2 = window_rate_bps(&mut traces, p, 0.102, 0.005).unwrap();
        assert_eq!(r, r2);
    }
}
