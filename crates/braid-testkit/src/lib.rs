//! Test support shared by the workspace's crates.
//!
//! A test that needs what this machine lacks (root, network namespaces, a tool the lab
//! drives) calls [`skip`] and returns. Cargo's harness captures a passing test's output,
//! and such a test passes, so the marker line alone would be lost: [`skip`] also appends
//! the test and the reason to the file named by [`LOG_VAR`], which `./dev test` sets,
//! counts and lists under its summary.
//!
//! A test's files go in a [`Scratch`] folder, removed when the test passes and kept
//! (with its path printed) when it fails, for the logs in it.

use std::fmt::Display;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The environment variable naming the file skips are appended to, one line each.
pub const LOG_VAR: &str = "BRAID_SKIP_LOG";

/// Reports the calling test as skipped for `why` (it needs root, network namespaces or
/// the lab's tools); the test then returns. Prints `SKIPPED (need root): TEST: WHY` to
/// stderr and, when [`LOG_VAR`] is set, appends `TEST: WHY` to that file. Panics if the
/// file cannot be written, so a skip is never silently left out of the count.
pub fn skip(why: impl Display) {
    let thread = std::thread::current();
    // libtest runs each test on a thread named after it.
    let test = thread.name().unwrap_or("unnamed test");
    let why = why.to_string().replace('\n', " ");
    eprintln!("SKIPPED (need root): {test}: {why}");
    if let Some(path) = std::env::var_os(LOG_VAR) {
        let path = Path::new(&path);
        if let Err(e) = record(path, test, &why) {
            panic!("cannot record the skip in {}: {e}", path.display());
        }
    }
}

/// Appends `test: why` to `path` in one write, so that lines from tests running in
/// parallel (and from test binaries one after another) never interleave.
fn record(path: &Path, test: &str, why: &str) -> io::Result<()> {
    let line = format!("{test}: {why}\n");
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

/// A fresh folder under the system's temporary folder, named after `name`, the process
/// and a counter (tests run in parallel), removed on drop unless the test is failing.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates the folder; panics if it cannot, as a test could not go on.
    pub fn new(name: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "braid-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("cannot create {}: {e}", dir.display());
        }
        Scratch(dir)
    }
}

impl Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for the failed test: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_folder_is_removed_when_the_test_passes_and_kept_when_it_fails() {
        let a = Scratch::new("testkit-scratch");
        let b = Scratch::new("testkit-scratch");
        assert_ne!(a.to_path_buf(), b.to_path_buf());
        std::fs::write(a.join("f"), "x").unwrap();
        let kept = a.to_path_buf();
        drop(a);
        assert!(!kept.exists());
        let failing = std::thread::spawn(|| {
            let s = Scratch::new("testkit-scratch");
            let path = s.to_path_buf();
            std::fs::write(s.join("log"), "why").unwrap();
            // Unwinding drops `s` while the thread panics.
            std::panic::panic_any(path);
        })
        .join()
        .unwrap_err();
        let path = failing.downcast::<PathBuf>().unwrap();
        assert!(path.join("log").exists());
        std::fs::remove_dir_all(*path).unwrap();
        drop(b);
    }

    #[test]
    fn parallel_skips_each_leave_one_whole_line() {
        let path = std::env::temp_dir().join(format!("braid-testkit-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        std::thread::scope(|s| {
            for i in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for j in 0..50 {
                        record(path, &format!("test_{i}_{j}"), "no root (reason: here)").unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 400);
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), 400);
        assert!(lines
            .iter()
            .all(|l| l.starts_with("test_") && l.ends_with(": no root (reason: here)")));
    }
}
