//! A progress bar on standard error for long runs; silent when asked (JSON output) or when
//! standard error is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shows the fraction done of the current run.
pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    pub fn new(enabled: bool) -> Bar {
        let bar = enabled.then(|| {
            let b = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{spinner} {msg:24} [{bar:40}] {percent:>3}%")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b
        });
        Bar { bar }
    }

    pub fn update(&mut self, label: &str, done: f64) {
        if let Some(b) = &self.bar {
            if b.message() != label {
                b.set_message(label.to_owned());
            }
            b.set_position((done.clamp(0.0, 1.0) * 1000.0) as u64);
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// Progress through a list of benchmarks: which one runs, how many are done, time taken
/// and left. Lines printed through it stay above the bar.
pub struct ListBar {
    bar: ProgressBar,
    total: usize,
}

/// Steps per benchmark, so that a benchmark's own progress moves the bar between them.
const STEPS: u64 = 1000;

impl ListBar {
    pub fn new(total: usize) -> ListBar {
        let bar =
            ProgressBar::with_draw_target(Some(total as u64 * STEPS), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] [{bar:20}] {msg:32!} ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        ListBar { bar, total }
    }

    /// Benchmark `index` (from 0) called `name` is `done` of the way through, at `label`.
    pub fn update(&self, index: usize, name: &str, label: &str, done: f64) {
        let msg = if label.is_empty() || label == name {
            format!("{}/{} {name}", index + 1, self.total)
        } else {
            format!("{}/{} {name}: {label}", index + 1, self.total)
        };
        if self.bar.message() != msg {
            self.bar.set_message(msg);
        }
        let pos = index as u64 * STEPS + (done.clamp(0.0, 1.0) * STEPS as f64) as u64;
        // A benchmark's progress may restart per phase; the bar only moves forward.
        if pos > self.bar.position() {
            self.bar.set_position(pos);
        }
    }

    /// Prints `line` on standard error above the bar (also when the bar is hidden).
    pub fn println(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// Runs `f` with the bar hidden, for output on standard output or error.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
