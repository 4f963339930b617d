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
