//! Recorded links as per-interval throughput series, for the prediction benchmarks
//! (`osctp-fig2`): every trace read with braid's trace reader (`braid trace convert`'s
//! formats, docs/traces.md) and its delivery opportunities counted per interval.
//!
//! `--quick` reads the repository's `traces/` (self-contained); the full run reads the
//! shared collection beside the repository (`../shared/traces`, its README describes every
//! file) and falls back to `traces/` when it is missing.

use std::path::{Path, PathBuf};

use braid_sim::link::convert::{convert_file, Options as ConvertOptions};

/// What kind of radio a trace recorded: predictions are judged per kind, as oSCTP Fig 2
/// judges WiFi and 3G apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Radio {
    Wifi,
    Cellular,
}

/// One recorded link's delivery opportunities.
#[derive(Clone, Debug)]
pub struct RecordedLink {
    /// The collection it came from (`traces/`, or a folder of the shared collection).
    pub source: String,
    /// The file's name.
    pub name: String,
    pub radio: Radio,
    /// Delivery opportunities of 1500 bytes, ms.
    pub opportunities_ms: Vec<u64>,
    pub duration_ms: u64,
}

impl RecordedLink {
    /// The throughput (bit/s) of each whole interval of `interval_ms` from the start.
    pub fn rates(&self, interval_ms: u64) -> Vec<f64> {
        let n = (self.duration_ms / interval_ms) as usize;
        let mut counts = vec![0u64; n];
        for &t in &self.opportunities_ms {
            // An opportunity at t ms serves the millisecond before it: bin by t − 1.
            let k = (t.saturating_sub(1) / interval_ms) as usize;
            if let Some(c) = counts.get_mut(k) {
                *c += 1;
            }
        }
        let secs = interval_ms as f64 / 1e3;
        counts
            .into_iter()
            .map(|c| c as f64 * 1500.0 * 8.0 / secs)
            .collect()
    }
}

/// The shared trace collection, if it is beside the repository.
pub fn shared_dir() -> Option<PathBuf> {
    [
        PathBuf::from("../shared/traces"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    ]
    .into_iter()
    .find(|p| p.join("multipath-wireless").is_dir())
}

/// Which files of a shared folder are read, by name.
type FileFilter = fn(&str) -> bool;

/// The files to read: (source, path, radio), in a fixed order.
fn files(quick: bool) -> (Vec<(String, PathBuf, Radio)>, Option<String>) {
    let mut out = Vec::new();
    let list = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let name = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned()
    };
    let shared = if quick { None } else { shared_dir() };
    let Some(shared) = shared else {
        let dir = crate::trace_sets::traces_dir();
        for p in list(&dir) {
            let n = name(&p);
            if !(n.ends_with(".down") || n.ends_with(".down.gz")) {
                continue;
            }
            let radio = if n.contains("-wifi") {
                Radio::Wifi
            } else {
                Radio::Cellular
            };
            out.push(("traces".to_owned(), p, radio));
        }
        let note = (!quick).then(|| {
            "the shared trace collection (../shared/traces) is missing: read the repository's \
             traces/ only"
                .to_owned()
        });
        return (out, note);
    };
    // Downlink capacity recordings of every shared folder the converter reads by itself;
    // 5Gophers (a column per carrier) and the Starlink and indigo copies are left out.
    let keep: &[(&str, FileFilter)] = &[
        ("multipath-wireless", |n| n.ends_with(".csv")),
        ("mahimahi", |n| n.ends_with(".down")),
        ("nyc-cellular-2018", |n| n.starts_with("downlink")),
        ("nyc-cellular-2019", |_| true),
        ("norway-hsdpa", |n| n.ends_with(".log")),
        ("ghent-4g", |n| n.ends_with(".log")),
        ("nyu-mets", |n| n.ends_with(".csv")),
        ("ucc-5g", |n| {
            n.starts_with("Download") && n.ends_with(".csv")
        }),
    ];
    for (folder, wanted) in keep {
        for p in list(&shared.join(folder)) {
            let n = name(&p);
            if !wanted(&n) {
                continue;
            }
            let radio = if n.contains("wifi") {
                Radio::Wifi
            } else {
                Radio::Cellular
            };
            out.push(((*folder).to_owned(), p, radio));
        }
    }
    (out, None)
}

/// Every recorded link of the run, and notes on what could not be read.
pub fn load(quick: bool) -> (Vec<RecordedLink>, Vec<String>) {
    let (files, note) = files(quick);
    let mut notes: Vec<String> = note.into_iter().collect();
    let mut links = Vec::new();
    let mut unread = Vec::new();
    for (source, path, radio) in files {
        match convert_file(&path, &ConvertOptions::default()) {
            Ok(c) => links.push(RecordedLink {
                source,
                name: (path.file_name())
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                radio,
                opportunities_ms: c.opportunities_ms,
                duration_ms: c.duration_ms,
            }),
            Err(e) => unread.push(format!("{e}")),
        }
    }
    if !unread.is_empty() {
        notes.push(format!(
            "{} files could not be read and were left out: {}",
            unread.len(),
            unread.join("; ")
        ));
    }
    (links, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_count_opportunities_per_whole_interval() {
        let link = RecordedLink {
            source: "test".into(),
            name: "test".into(),
            radio: Radio::Wifi,
            // 2 in the first second, 1 in the second, the partial third second dropped.
            opportunities_ms: vec![1, 1000, 1500, 2100, 2500],
            duration_ms: 2500,
        };
        assert_eq!(link.rates(1000), vec![24_000.0, 12_000.0]);
        assert_eq!(link.rates(2000), vec![18_000.0]);
    }
}
