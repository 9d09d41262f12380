//! Progress on stderr for long scans. One reporter owns the terminal: data goes to
//! stdout, the bar to stderr, and the bar is hidden when stderr is not a terminal
//! or when the input is small.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::oplog::reader::ByteCounter;

/// Inputs smaller than this finish before a bar is worth drawing.
pub const MIN_BYTES_FOR_BAR: u64 = 64 * 1024 * 1024;

/// A byte-progress bar over a reader's source, or nothing.
pub struct ScanProgress {
    bar: Option<ProgressBar>,
    counter: ByteCounter,
}

impl ScanProgress {
    /// Shows a bar when stderr is a terminal, `enabled` is set and the source is
    /// known to be large (or of unknown size, e.g. stdin).
    pub fn new(counter: ByteCounter, total: Option<u64>, enabled: bool) -> ScanProgress {
        let big = total.is_none_or(|t| t >= MIN_BYTES_FOR_BAR);
        let show = enabled && big && std::io::stderr().is_terminal();
        let bar = show.then(|| {
            let bar = match total {
                Some(t) => ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr()),
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            };
            let style = if total.is_some() {
                "{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}"
            } else {
                "{spinner} {msg} {bytes} {binary_bytes_per_sec}"
            };
            bar.set_style(
                ProgressStyle::with_template(style)
                    .expect("static template")
                    .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        ScanProgress { bar, counter }
    }

    pub fn set_message(&self, msg: impl Into<std::borrow::Cow<'static, str>>) {
        if let Some(b) = &self.bar {
            b.set_message(msg);
        }
    }

    /// Cheap enough to call every few thousand entries.
    pub fn tick(&self) {
        if let Some(b) = &self.bar {
            b.set_position(self.counter.get());
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for ScanProgress {
    fn drop(&mut self) {
        self.finish();
    }
}
