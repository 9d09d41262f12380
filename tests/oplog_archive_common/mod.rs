//! What the oplog archive tests share (`tests/oplog_archive.rs` on a local directory,
//! `tests/archive_bucket.rs` on a bucket): a running `pitr archive` and what it
//! prints, the entries of an oplog source, and the check that an archive holds
//! exactly the server's entries, each once.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pitr::oplog::{OplogReader, ReadOptions, Ts};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `pitr archive` running in the background, its stderr in a file.
pub struct Archiver {
    pub child: Child,
    err: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Archiver {
    /// Runs `cmd` (a `pitr archive ...` command line), stdout piped, stderr to a file.
    pub fn spawn(mut cmd: Command) -> Archiver {
        let tmp = tempfile::tempdir().unwrap();
        let err = tmp.path().join("stderr");
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start pitr archive");
        Archiver {
            child,
            err,
            _tmp: tmp,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits until stderr contains `needle`.
    pub fn wait_for(&mut self, needle: &str, within: Duration) {
        self.wait_for_n(needle, 1, within);
    }

    /// Waits until stderr holds `needle` `times` times.
    pub fn wait_for_n(&mut self, needle: &str, times: usize, within: Duration) {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if self.stderr().matches(needle).count() >= times {
                return;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!(
                    "pitr archive exited ({st}) before `{needle}`:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "no `{needle}` x{times} within {within:?}:\n{}",
            self.stderr()
        );
    }

    pub fn sigkill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr()
    }

    /// SIGTERM, then the exit code, stdout and stderr.
    pub fn stop(self) -> (i32, String, String) {
        // SAFETY: signalling a child we own.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.exit_within(Duration::from_secs(20), "did not stop on SIGTERM")
    }

    /// The exit code, stdout and stderr of an archiver that stops by itself (an
    /// error) within `within`.
    pub fn wait_exit(self, within: Duration) -> (i32, String, String) {
        self.exit_within(within, "did not exit")
    }

    fn exit_within(mut self, within: Duration, what: &str) -> (i32, String, String) {
        let end = Instant::now() + within;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                panic!("pitr archive {what} within {within:?}:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        if let Some(o) = self.child.stdout.as_mut() {
            for l in BufReader::new(o).lines() {
                out.push_str(&l.unwrap());
                out.push('\n');
            }
        }
        (status.code().unwrap_or(-1), out, self.stderr())
    }
}

impl Drop for Archiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every entry of an oplog source (a file, or an archive directory): (ts, bytes).
pub fn entries_of(spec: &Path) -> Vec<(Ts, Vec<u8>)> {
    let mut r: OplogReader =
        pitr::oplog::open(spec.to_str().unwrap(), ReadOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(e) = r.next_entry().unwrap() {
        out.push((e.ts, e.raw.as_bytes().to_vec()));
    }
    out
}

/// The archive holds exactly `want`, in order, each once.
pub fn assert_same_entries(archive: &[(Ts, Vec<u8>)], want: &[(Ts, Vec<u8>)], what: &str) {
    let mut seen = std::collections::HashSet::new();
    for (t, _) in archive {
        assert!(seen.insert(*t), "{what}: {t} archived twice");
    }
    assert_eq!(archive.len(), want.len(), "{what}: entry counts differ");
    for (n, (a, w)) in archive.iter().zip(want).enumerate() {
        assert_eq!(a.0, w.0, "{what}: entry {n}: ts");
        assert!(a.1 == w.1, "{what}: entry {n} at {}: bytes differ", a.0);
    }
}
