//! A child's output: drained line by line while it runs, appended to a log file,
//! forwarded to a progress callback, and the last lines kept for error messages.
//!
//! Draining both pipes concurrently with waiting is what keeps a chatty child from
//! blocking forever on a full pipe (64 KiB on Linux) while we wait for it to exit.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Which of a child's streams a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Called for every line of a child's output (without the newline), e.g. to show
/// mongorestore's progress.
pub type LineCallback = Arc<dyn Fn(Stream, &str) + Send + Sync>;

/// Lines longer than this are cut into pieces, so a child printing megabytes without
/// a newline cannot make us buffer it all.
pub const MAX_LINE: usize = 64 * 1024;

/// The last `cap` lines of a stream.
#[derive(Debug, Clone)]
pub struct Tail {
    lines: VecDeque<String>,
    cap: usize,
    /// Lines seen in total, to say how many were left out.
    pub total: u64,
}

impl Tail {
    pub fn new(cap: usize) -> Tail {
        Tail {
            lines: VecDeque::with_capacity(cap.min(64)),
            cap,
            total: 0,
        }
    }

    pub fn push(&mut self, line: &str) {
        if self.cap == 0 {
            return;
        }
        if self.lines.len() == self.cap {
            self.lines.pop_front();
        }
        self.lines.push_back(line.to_string());
        self.total += 1;
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

/// An append-only log shared by a child's two drainers. Lines are written whole, one
/// `write` each, so stdout and stderr interleave by line, never mid-line.
pub struct LogSink {
    file: Mutex<File>,
}

impl LogSink {
    pub fn open(path: &Path) -> io::Result<LogSink> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(LogSink {
            file: Mutex::new(file),
        })
    }

    /// Writes one line. A failing log (disk full) must not stop the child or lose its
    /// exit status, so errors are dropped here; the tail still has the last lines.
    pub fn line(&self, line: &str) {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        if let Ok(mut f) = self.file.lock() {
            let _ = f.write_all(&buf);
        }
    }
}

/// Where drained lines go.
#[derive(Clone)]
pub struct Sinks {
    pub stream: Stream,
    pub tail: Arc<Mutex<Tail>>,
    pub log: Option<Arc<LogSink>>,
    pub on_line: Option<LineCallback>,
}

impl Sinks {
    fn emit(&self, raw: &[u8]) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = String::from_utf8_lossy(raw);
        if let Some(log) = &self.log {
            log.line(&line);
        }
        if let Ok(mut t) = self.tail.lock() {
            t.push(&line);
        }
        if let Some(cb) = &self.on_line {
            cb(self.stream, &line);
        }
    }
}

/// Reads `reader` to its end, line by line, into `sinks`. Returns at EOF, i.e. when
/// every process holding the write end has closed it (or died).
pub async fn drain<R: AsyncRead + Unpin>(reader: R, sinks: Sinks) {
    let mut reader = BufReader::with_capacity(MAX_LINE, reader);
    let mut line: Vec<u8> = Vec::new();
    // A read error on a pipe means the child's side is gone: keep what we have.
    while let Ok(buf) = reader.fill_buf().await {
        if buf.is_empty() {
            break;
        }
        let (take, complete) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = MAX_LINE - line.len();
        let take = take.min(room);
        let complete = complete && take > 0 && buf[take - 1] == b'\n';
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if complete {
            line.pop();
            sinks.emit(&line);
            line.clear();
        } else if line.len() >= MAX_LINE {
            sinks.emit(&line);
            line.clear();
        }
    }
    if !line.is_empty() {
        sinks.emit(&line);
    }
}

/// The last `max_lines` lines of a file (reading at most its last 256 KiB), for
/// showing the end of a log in an error. Each line is cut to `max_chars`.
pub fn read_file_tail(path: &Path, max_lines: usize, max_chars: usize) -> io::Result<Vec<String>> {
    const WINDOW: u64 = 256 * 1024;
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(WINDOW);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.take(WINDOW).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    // A window that starts mid-file starts mid-line: drop the fragment.
    if start > 0 {
        lines.next();
    }
    let lines: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(max_lines);
    Ok(lines[from..].iter().map(|l| cut(l, max_chars)).collect())
}

/// At most `max_chars` characters of `s`, marking the cut.
pub fn cut(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &'static [u8]) -> (Vec<String>, u64) {
        let tail = Arc::new(Mutex::new(Tail::new(1000)));
        let sinks = Sinks {
            stream: Stream::Stderr,
            tail: tail.clone(),
            log: None,
            on_line: None,
        };
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(drain(input, sinks));
        let t = tail.lock().unwrap();
        (t.lines(), t.total)
    }

    #[test]
    fn splits_lines_and_keeps_the_unterminated_last_one() {
        let (lines, n) = collect(b"one\r\ntwo\n\nthree");
        assert_eq!(lines, ["one", "two", "", "three"]);
        assert_eq!(n, 4);
        let (lines, _) = collect(b"caf\xc3\xa9 \xff\n");
        assert_eq!(lines, ["café \u{fffd}"]);
    }

    #[test]
    fn very_long_lines_are_cut() {
        static BIG: [u8; MAX_LINE * 2 + 10] = [b'x'; MAX_LINE * 2 + 10];
        let (lines, _) = collect(&BIG);
        assert_eq!(
            lines.iter().map(String::len).collect::<Vec<_>>(),
            [MAX_LINE, MAX_LINE, 10]
        );
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut t = Tail::new(3);
        for i in 0..10 {
            t.push(&i.to_string());
        }
        assert_eq!(t.lines(), ["7", "8", "9"]);
        assert_eq!(t.total, 10);
    }

    #[test]
    fn file_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str("\n  \n");
        std::fs::write(&p, text).unwrap();
        assert_eq!(read_file_tail(&p, 2, 100).unwrap(), ["line 98", "line 99"]);
        assert_eq!(read_file_tail(&p, 1, 4).unwrap(), ["line…"]);
        assert!(read_file_tail(&dir.path().join("missing"), 3, 10).is_err());
    }
}
