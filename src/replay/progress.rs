//! Progress of a replay on stderr. One reporter owns the terminal: a spinner line
//! per step (showing the running child's last output line) when stderr is a
//! terminal and the output is not JSON; plain `[n/N] ...` lines otherwise, which is
//! what logs and tests see. Data (the summary, `--json`) goes to stdout.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::exec::output::cut;

/// The reporter; shared with output callbacks and the signal notice.
pub struct Console {
    fancy: bool,
    bar: Mutex<Option<ProgressBar>>,
    /// Put before every line (`member `shard0`: ` when several spares share the
    /// terminal).
    prefix: String,
}

impl Console {
    /// A spinner only when stderr is a terminal and `json` is off.
    pub fn for_stderr(json: bool) -> Arc<Console> {
        Console::new(!json && std::io::stderr().is_terminal())
    }

    pub fn new(fancy: bool) -> Arc<Console> {
        Arc::new(Console {
            fancy,
            bar: Mutex::new(None),
            prefix: String::new(),
        })
    }

    /// Plain lines, each starting with `prefix` (no spinner: several of these may
    /// share the terminal).
    pub fn prefixed(prefix: &str) -> Arc<Console> {
        Arc::new(Console {
            fancy: false,
            bar: Mutex::new(None),
            prefix: prefix.to_string(),
        })
    }

    /// A line on stderr that does not tear the spinner.
    pub fn line(&self, text: &str) {
        let text = &format!("{}{text}", self.prefix);
        let bar = self.bar.lock().ok().and_then(|b| b.clone());
        match bar {
            Some(b) => b.println(text),
            None => {
                let mut e = std::io::stderr().lock();
                let _ = writeln!(e, "{text}");
            }
        }
    }

    /// Step `n` of `total` begins.
    pub fn step_started(&self, n: u32, total: usize, title: &str) {
        if !self.fancy {
            self.line(&format!("[{n}/{total}] {title}"));
            return;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} [{elapsed}] {wide_msg}")
                .expect("static template"),
        );
        bar.set_prefix(format!("[{n}/{total}] {title}"));
        bar.enable_steady_tick(Duration::from_millis(120));
        if let Ok(mut b) = self.bar.lock() {
            if let Some(old) = b.replace(bar) {
                old.finish_and_clear();
            }
        }
    }

    /// A child of step `n` was started.
    pub fn child_started(&self, n: u32, total: usize, program: &str, pid: u32) {
        if !self.fancy {
            self.line(&format!("[{n}/{total}] started `{program}` (pid {pid})"));
        }
    }

    /// One line of a child's output: shown in the spinner (the log has them all).
    pub fn child_output(&self, line: &str) {
        if !self.fancy {
            return;
        }
        if let Ok(b) = self.bar.lock() {
            if let Some(b) = b.as_ref() {
                // The database tools start each line with a timestamp and a tab.
                let l = match line.split_once('\t') {
                    Some((ts, rest))
                        if ts.len() >= 19 && ts.starts_with(|c: char| c.is_ascii_digit()) =>
                    {
                        rest
                    }
                    _ => line,
                }
                .trim();
                if !l.is_empty() {
                    b.set_message(cut(l, 200));
                }
            }
        }
    }

    /// Step `n` ended: `status` (`ok`, `FAILED`, ...) and what to add.
    pub fn step_finished(
        &self,
        n: u32,
        total: usize,
        title: &str,
        status: &str,
        took: Option<Duration>,
        detail: &str,
    ) {
        if let Ok(mut b) = self.bar.lock() {
            if let Some(old) = b.take() {
                old.finish_and_clear();
            }
        }
        let took = took.map_or_else(String::new, |d| format!(" {}", took_time(d)));
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        };
        if self.fancy {
            self.line(&format!("[{n}/{total}] {title}: {status}{took}{detail}"));
        } else {
            self.line(&format!("[{n}/{total}] {status}{took}{detail}"));
        }
    }
}

/// `in 1.23s`, `in 2m 5s`, `in under 0.01s`: how long something took, never
/// "in 0.00s".
pub fn took_time(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        "in under 0.01s".into()
    } else {
        format!("in {}", seconds(d))
    }
}

/// `1.23s`, `2m 5s`: short and stable enough for logs.
pub fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 60_000 {
        format!("{:.2}s", ms as f64 / 1000.0)
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}
