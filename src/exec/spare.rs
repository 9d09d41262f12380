//! A throw-away standalone `mongod` to restore into: loopback only, a free port, its
//! own temporary dbpath, the TTL monitor off, never `--fork`ed, always stopped.
//!
//! Layout of the temporary directory (`pitr-spare-XXXXXX`, under an optional parent):
//!
//! ```text
//! db/                 the dbpath
//! mongod.log          mongod's own log (--logpath; outside db/ so it can be kept alone)
//! mongod.stdout.log   its stdout/stderr (early option errors land here)
//! ```
//!
//! Ready means: the process is alive, its log (the part written by this start) says
//! "Waiting for connections", the port accepts a TCP connection, and, when the caller
//! gives one, a probe (a driver `ping`) succeeds. Requiring the log line guards
//! against the port having been taken by another server between picking it and
//! mongod binding it: that server would answer the connect, but our mongod's log
//! would not say it is listening.

use std::error::Error as StdError;
use std::ffi::OsString;
use std::future::Future;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::child::{ChildError, Command, Finished, Outcome, Running};
use super::output;
use super::signals::Cancel;
use crate::error::Hint;

/// mongod's exit code when it cannot bind its port (`SocketException`, "Address
/// already in use").
pub const EXIT_ADDRESS_IN_USE: i32 = 48;

/// Lines of mongod's log shown in errors.
const LOG_TAIL_LINES: usize = 20;
/// mongod's JSON log lines are long; enough of each to see `msg` and `attr.error`.
const LOG_LINE_CHARS: usize = 600;

/// An error from a readiness probe.
pub type ProbeError = Box<dyn StdError + Send + Sync>;
/// What a probe returns.
pub type ProbeFuture = Pin<Box<dyn Future<Output = Result<(), ProbeError>> + Send>>;
/// A caller-supplied readiness check (typically a driver `ping`), so this module needs
/// no driver. Called repeatedly until it succeeds or the start timeout passes.
pub type Probe = Arc<dyn Fn(ProbeTarget) -> ProbeFuture + Send + Sync>;

/// Which server a probe should talk to. A careful probe also checks that
/// `serverStatus.pid` equals `pid`.
#[derive(Clone, Debug)]
pub struct ProbeTarget {
    pub port: u16,
    pub pid: u32,
    pub uri: String,
}

/// How to start the spare.
#[derive(Clone)]
pub struct SpareOptions {
    /// The `mongod` binary (see [`super::binaries`]).
    pub mongod: PathBuf,
    /// Where to create the temporary directory; the system temp dir when `None`.
    pub parent_dir: Option<PathBuf>,
    /// A fixed port; by default a free one is picked, and picked again if another
    /// process takes it first.
    pub port: Option<u16>,
    /// How many picked ports to try before giving up.
    pub port_attempts: u32,
    /// mongod's log file; by default `mongod.log` in the temporary directory. Give a
    /// path outside it to keep the log after the spare is removed.
    pub log_path: Option<PathBuf>,
    /// How long starting may take, all attempts together.
    pub start_timeout: Duration,
    /// Between SIGTERM and SIGKILL when stopping it.
    pub grace: Duration,
    /// Keep the directory (data and logs) after shutdown and on errors.
    pub keep: bool,
    /// The log text (case-insensitive) that says mongod listens; `None` skips the check.
    pub ready_log_line: Option<String>,
    /// Extra mongod arguments, after pitr's own.
    pub extra_args: Vec<OsString>,
    /// Start on this existing dbpath (a copy of a snapshot backup's files) instead
    /// of an empty one in the temporary directory: used as it is, never emptied, and
    /// left in place at shutdown (the caller owns it).
    pub dbpath: Option<PathBuf>,
    /// Extra environment for mongod.
    pub env: Vec<(OsString, OsString)>,
    pub probe: Option<Probe>,
}

impl SpareOptions {
    pub fn new(mongod: impl Into<PathBuf>) -> SpareOptions {
        SpareOptions {
            mongod: mongod.into(),
            parent_dir: None,
            port: None,
            port_attempts: 5,
            log_path: None,
            start_timeout: Duration::from_secs(60),
            grace: super::child::DEFAULT_GRACE,
            keep: false,
            ready_log_line: Some("waiting for connections".into()),
            extra_args: Vec::new(),
            dbpath: None,
            env: Vec::new(),
            probe: None,
        }
    }
}

/// How to reach a spare that outlives pitr (`--keep`), and how to stop it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SpareConnection {
    pub uri: String,
    pub port: u16,
    pub pid: u32,
    pub dir: PathBuf,
    pub dbpath: PathBuf,
    pub log_path: PathBuf,
}

impl std::fmt::Display for SpareConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "spare mongod still running (pid {}): {}",
            self.pid, self.uri
        )?;
        writeln!(f, "  connect: mongosh '{}'", self.uri)?;
        writeln!(f, "  data:    {}", self.dbpath.display())?;
        writeln!(f, "  log:     {}", self.log_path.display())?;
        write!(
            f,
            "  stop:    kill {} (then remove {})",
            self.pid,
            self.dir.display()
        )
    }
}

/// How the spare ended.
#[derive(Debug)]
pub struct SpareStopped {
    pub finished: Finished,
    /// The directory, when it was kept.
    pub kept_dir: Option<PathBuf>,
}

impl SpareStopped {
    /// Stopped by SIGTERM within the grace period (or had already exited cleanly).
    pub fn clean(&self) -> bool {
        !self.finished.killed
            && matches!(
                self.finished.outcome,
                Outcome::Success
                    | Outcome::Signaled {
                        signal: libc::SIGTERM
                    }
            )
    }
}

/// A running spare mongod. Stop it with [`shutdown`](SpareMongod::shutdown) or leave
/// it running with [`detach`](SpareMongod::detach); dropping it kills it (SIGKILL to
/// its group) and removes its directory unless `keep`.
pub struct SpareMongod {
    child: Option<Running>,
    dir: Option<tempfile::TempDir>,
    dir_path: PathBuf,
    dbpath: PathBuf,
    log_path: PathBuf,
    port: u16,
    pid: u32,
    keep: bool,
}

/// Asks the OS for a free loopback port. It is released before mongod binds it, so
/// another process can take it in between; mongod then exits 48 and we pick again.
pub fn pick_free_port() -> io::Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(l.local_addr()?.port())
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

pub fn uri_for(port: u16) -> String {
    format!("mongodb://127.0.0.1:{port}/?directConnection=true")
}

/// Scans the part of a log written after `offset` for a line, keeping its place
/// between calls so each poll reads only what is new.
struct LogWatch {
    path: PathBuf,
    offset: u64,
    carry: String,
    needle: Option<String>,
    seen: bool,
}

impl LogWatch {
    fn new(path: &Path, needle: Option<&str>) -> LogWatch {
        LogWatch {
            path: path.to_path_buf(),
            offset: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            carry: String::new(),
            needle: needle.map(str::to_ascii_lowercase),
            seen: needle.is_none(),
        }
    }

    fn poll(&mut self) -> bool {
        if self.seen {
            return true;
        }
        let Some(needle) = &self.needle else {
            return true;
        };
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return false;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return false;
        }
        let mut buf = Vec::new();
        if f.take(4 * 1024 * 1024).read_to_end(&mut buf).is_err() {
            return false;
        }
        self.offset += buf.len() as u64;
        self.carry
            .push_str(&String::from_utf8_lossy(&buf).to_ascii_lowercase());
        if self.carry.contains(needle.as_str()) {
            self.seen = true;
        } else if let Some(nl) = self.carry.rfind('\n') {
            // Keep only the unfinished last line: the needle cannot span lines.
            self.carry.drain(..=nl);
        }
        self.seen
    }
}

/// How far a start got before its timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartStage {
    /// The log never said it was listening.
    NotListening,
    /// The log said so, but the port refused TCP connections.
    PortClosed,
    /// The port accepted connections but the probe kept failing.
    ProbeFailing(String),
}

impl std::fmt::Display for StartStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartStage::NotListening => {
                write!(f, "its log never said it was waiting for connections")
            }
            StartStage::PortClosed => write!(
                f,
                "its log says it listens, but the port refuses connections"
            ),
            StartStage::ProbeFailing(e) => write!(
                f,
                "the port accepts connections, but the readiness check keeps failing: {e}"
            ),
        }
    }
}

enum Attempt {
    Ready,
    Exited(Outcome),
    TimedOut(StartStage),
    Cancelled,
}

impl SpareMongod {
    /// Starts mongod and waits until it answers. On any error nothing is left behind:
    /// the process is stopped and the directory removed (unless `keep`).
    pub async fn start(opts: SpareOptions, cancel: &Cancel) -> Result<SpareMongod, SpareError> {
        let parent = opts.parent_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("pitr-spare-")
            .tempdir_in(&parent)
            .map_err(|source| SpareError::Dir {
                path: parent.clone(),
                source,
            })?;
        let dir_path = dir.path().to_path_buf();
        let dbpath = opts.dbpath.clone().unwrap_or_else(|| dir_path.join("db"));
        let log_path = opts
            .log_path
            .clone()
            .unwrap_or_else(|| dir_path.join("mongod.log"));
        let stdout_path = dir_path.join("mongod.stdout.log");
        let deadline = Instant::now() + opts.start_timeout;

        let mut spare = SpareMongod {
            child: None,
            dir: Some(dir),
            dir_path,
            dbpath,
            log_path,
            port: 0,
            pid: 0,
            keep: opts.keep,
        };
        let mut taken = Vec::new();
        let attempts = if opts.port.is_some() {
            1
        } else {
            opts.port_attempts.max(1)
        };
        for attempt in 1..=attempts {
            let port = match opts.port {
                Some(p) => {
                    if !port_is_free(p) {
                        return Err(SpareError::PortInUse {
                            ports: vec![p],
                            fixed: true,
                            log_tail: Vec::new(),
                        });
                    }
                    p
                }
                None => pick_free_port().map_err(SpareError::NoPort)?,
            };
            // A fresh, empty dbpath for each attempt: a failed start may leave files.
            // A caller's dbpath is never touched.
            if opts.dbpath.is_none() {
                if spare.dbpath.exists() {
                    let _ = std::fs::remove_dir_all(&spare.dbpath);
                }
                std::fs::create_dir(&spare.dbpath).map_err(|source| SpareError::Dir {
                    path: spare.dbpath.clone(),
                    source,
                })?;
            }
            let mut watch = LogWatch::new(&spare.log_path, opts.ready_log_line.as_deref());

            let mut cmd = Command::new(&opts.mongod)
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind_ip", "127.0.0.1"])
                .arg("--dbpath")
                .arg(&spare.dbpath)
                .arg("--logpath")
                .arg(&spare.log_path)
                // Appending keeps a caller's log from being rotated aside, and shows
                // every attempt in one file.
                .arg("--logappend")
                // TTL deletes during a restore would remove restored documents.
                .args(["--setParameter", "ttlMonitorEnabled=false"])
                .arg("--nounixsocket")
                .args(opts.extra_args.iter().cloned())
                .direct_output(&stdout_path)
                .grace(opts.grace);
            for (k, v) in &opts.env {
                cmd = cmd.env(k, v);
            }
            let mut running = cmd.spawn().map_err(SpareError::Spawn)?;
            spare.port = port;
            spare.pid = running.pid();

            match wait_ready(&mut running, &mut watch, port, deadline, &opts, cancel).await {
                Attempt::Ready => {
                    spare.child = Some(running);
                    return Ok(spare);
                }
                Attempt::Exited(outcome) => {
                    let log_tail = spare.log_tail();
                    let out_tail = running.stderr_tail();
                    // Already exited: this only collects it and its output.
                    running.stop(cancel).await;
                    let in_use = outcome
                        == (Outcome::Failed {
                            code: EXIT_ADDRESS_IN_USE,
                        })
                        || log_tail
                            .iter()
                            .chain(&out_tail)
                            .any(|l| l.to_ascii_lowercase().contains("address already in use"));
                    if in_use {
                        taken.push(port);
                        if attempt < attempts && Instant::now() < deadline {
                            continue;
                        }
                        return Err(SpareError::PortInUse {
                            ports: taken,
                            fixed: opts.port.is_some(),
                            log_tail,
                        });
                    }
                    return Err(SpareError::ExitedAtStart {
                        outcome,
                        port,
                        log_tail,
                        output_tail: out_tail,
                        log: spare.surviving_log(),
                    });
                }
                Attempt::TimedOut(stage) => {
                    let finished = running.stop(cancel).await;
                    return Err(SpareError::StartTimeout {
                        after: opts.start_timeout,
                        port,
                        stage,
                        killed: finished.killed,
                        log_tail: spare.log_tail(),
                        log: spare.surviving_log(),
                    });
                }
                Attempt::Cancelled => {
                    running.stop(cancel).await;
                    return Err(SpareError::Cancelled);
                }
            }
        }
        unreachable!("the last attempt always returns")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `mongodb://127.0.0.1:PORT/?directConnection=true`
    pub fn uri(&self) -> String {
        uri_for(self.port)
    }

    pub fn dbpath(&self) -> &Path {
        &self.dbpath
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The temporary directory holding dbpath and logs.
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    pub fn connection(&self) -> SpareConnection {
        SpareConnection {
            uri: self.uri(),
            port: self.port,
            pid: self.pid,
            dir: self.dir_path.clone(),
            dbpath: self.dbpath.clone(),
            log_path: self.log_path.clone(),
        }
    }

    /// The last lines of mongod's log.
    pub fn log_tail(&self) -> Vec<String> {
        output::read_file_tail(&self.log_path, LOG_TAIL_LINES, LOG_LINE_CHARS).unwrap_or_default()
    }

    /// `Some` when mongod has exited on its own (crashed during a restore, or after a
    /// `shutdown` command), without waiting.
    pub fn exited(&mut self) -> Option<Outcome> {
        self.child.as_mut().and_then(Running::try_exit)
    }

    /// Where the log will be after the directory is gone: only a caller-chosen path
    /// outside it, or anywhere when kept.
    fn surviving_log(&self) -> Option<PathBuf> {
        (self.keep || !self.log_path.starts_with(&self.dir_path)).then(|| self.log_path.clone())
    }

    /// Stops mongod (SIGTERM, the grace period, SIGKILL; if it already exited, e.g.
    /// after a `shutdown` command, just collects it) and removes the directory unless
    /// `keep`.
    pub async fn shutdown(mut self, cancel: &Cancel) -> Result<SpareStopped, SpareError> {
        let running = self
            .child
            .take()
            .expect("a started spare has a child until shut down");
        let finished = running.stop(cancel).await;
        let dir = self
            .dir
            .take()
            .expect("the directory is there until shutdown");
        let kept_dir = if self.keep {
            Some(dir.keep())
        } else {
            let path = dir.path().to_path_buf();
            dir.close()
                .map_err(|source| SpareError::RemoveDir { path, source })?;
            None
        };
        Ok(SpareStopped { finished, kept_dir })
    }

    /// Leaves mongod running and its directory in place (`--keep`), returning how to
    /// reach and stop it.
    pub fn detach(mut self) -> SpareConnection {
        let conn = self.connection();
        if let Some(c) = self.child.take() {
            c.detach();
        }
        if let Some(d) = self.dir.take() {
            let _ = d.keep();
        }
        conn
    }
}

impl Drop for SpareMongod {
    fn drop(&mut self) {
        // Kill and reap first (`Running`'s drop does both), so the directory is not
        // removed under a live mongod that would go on writing into it.
        drop(self.child.take());
        if let Some(d) = self.dir.take() {
            if self.keep {
                let _ = d.keep();
            }
        }
    }
}

async fn wait_ready(
    running: &mut Running,
    watch: &mut LogWatch,
    port: u16,
    deadline: Instant,
    opts: &SpareOptions,
    cancel: &Cancel,
) -> Attempt {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stage = StartStage::NotListening;
    let mut pause = Duration::from_millis(20);
    loop {
        if let Some(outcome) = running.try_exit() {
            return Attempt::Exited(outcome);
        }
        if cancel.is_cancelled() {
            return Attempt::Cancelled;
        }
        let now = Instant::now();
        if now >= deadline {
            return Attempt::TimedOut(stage);
        }
        if watch.poll() {
            stage = StartStage::PortClosed;
            let connect = tokio::time::timeout_at(
                deadline.min(now + Duration::from_secs(2)),
                tokio::net::TcpStream::connect(addr),
            )
            .await;
            if let Ok(Ok(_stream)) = connect {
                let probed = match &opts.probe {
                    None => Ok(()),
                    Some(probe) => {
                        let target = ProbeTarget {
                            port,
                            pid: running.pid(),
                            uri: uri_for(port),
                        };
                        let limit = deadline.min(Instant::now() + Duration::from_secs(10));
                        match tokio::time::timeout_at(limit, probe(target)).await {
                            Ok(r) => r.map_err(|e| e.to_string()),
                            Err(_) => Err("no answer within 10s".to_string()),
                        }
                    }
                };
                match probed {
                    // It may have died while we probed (or the answer came from
                    // another server): check once more.
                    Ok(()) => match running.try_exit() {
                        None => return Attempt::Ready,
                        Some(outcome) => return Attempt::Exited(outcome),
                    },
                    Err(e) => stage = StartStage::ProbeFailing(e),
                }
            }
        }
        let wake = deadline.min(Instant::now() + pause);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = cancel.cancelled() => {}
        }
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

fn lines_block(title: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut s = format!("\n  {title}:");
    for l in lines {
        s.push_str("\n    | ");
        s.push_str(l);
    }
    s
}

fn exited_at_start_message(
    outcome: &Outcome,
    port: &u16,
    log_tail: &[String],
    output_tail: &[String],
    log: &Option<PathBuf>,
) -> String {
    let mut s = format!("the spare mongod {outcome} during startup (port {port})");
    s.push_str(&lines_block("last lines of its log", log_tail));
    s.push_str(&lines_block("its stdout/stderr", output_tail));
    if let Some(l) = log {
        s.push_str(&format!("\n  log: `{}`", l.display()));
    }
    s
}

fn timeout_message(
    after: &Duration,
    port: &u16,
    stage: &StartStage,
    log_tail: &[String],
    log: &Option<PathBuf>,
) -> String {
    let mut s = format!(
        "the spare mongod did not become ready within {} on port {port}: {stage}",
        humantime::format_duration(*after)
    );
    s.push_str(&lines_block("last lines of its log", log_tail));
    if let Some(l) = log {
        s.push_str(&format!("\n  log: `{}`", l.display()));
    }
    s
}

fn port_in_use_message(ports: &[u16], fixed: &bool) -> String {
    if *fixed {
        format!("port {} on 127.0.0.1 is already in use", ports[0])
    } else {
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        format!(
            "could not start the spare mongod: each free port picked ({}) was taken before mongod could bind it",
            list.join(", ")
        )
    }
}

/// Why the spare could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum SpareError {
    #[error("cannot create the spare mongod's directory under `{}`", path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("cannot find a free port on 127.0.0.1")]
    NoPort(#[source] io::Error),

    #[error("cannot start the spare mongod")]
    Spawn(#[source] ChildError),

    #[error("{}", port_in_use_message(.ports, .fixed))]
    PortInUse {
        ports: Vec<u16>,
        fixed: bool,
        log_tail: Vec<String>,
    },

    #[error("{}", exited_at_start_message(.outcome, .port, .log_tail, .output_tail, .log))]
    ExitedAtStart {
        outcome: Outcome,
        port: u16,
        log_tail: Vec<String>,
        output_tail: Vec<String>,
        /// The log, when it outlives the failed start.
        log: Option<PathBuf>,
    },

    #[error("{}", timeout_message(.after, .port, .stage, .log_tail, .log))]
    StartTimeout {
        after: Duration,
        port: u16,
        stage: StartStage,
        /// Whether it had to be SIGKILLed after not answering SIGTERM.
        killed: bool,
        log_tail: Vec<String>,
        log: Option<PathBuf>,
    },

    #[error("starting the spare mongod was interrupted")]
    Cancelled,

    #[error("cannot remove the spare mongod's directory `{}`", path.display())]
    RemoveDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Hint for SpareError {
    fn hint(&self) -> Option<String> {
        let keep = "re-run with `--keep` to keep its directory and log for a closer look";
        match self {
            SpareError::Dir { .. } => Some("check that the directory exists, is writable, and has free space".into()),
            SpareError::NoPort(_) => None,
            SpareError::Spawn(e) => e.hint(),
            SpareError::PortInUse { fixed: true, .. } => {
                Some("stop whatever listens there (`ss -ltnp`), or let pitr pick a free port".into())
            }
            SpareError::PortInUse { fixed: false, .. } => {
                Some("something on this machine is grabbing ports quickly; try again".into())
            }
            SpareError::ExitedAtStart { outcome, .. } => Some(match outcome.shell_code() {
                Some(2) => "mongod rejected its options: this mongod version may not support one of them (see the lines above)".into(),
                Some(100) => "mongod could not use its data directory: check free space and permissions of the temporary directory".into(),
                Some(14) | Some(62) => format!("mongod hit an unrecoverable error at start (see the log lines above); {keep}"),
                _ => format!("the log lines above say why; {keep}"),
            }),
            SpareError::StartTimeout { .. } => Some(format!(
                "a slow disk or a large journal can delay start-up: raise the start timeout; {keep}"
            )),
            SpareError::Cancelled => None,
            SpareError::RemoveDir { path, .. } => Some(format!("remove `{}` by hand", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn picked_ports_are_free_loopback_ports() {
        let p = pick_free_port().unwrap();
        assert!(p > 0);
        assert!(port_is_free(p));
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        assert!(!port_is_free(held.local_addr().unwrap().port()));
        assert_eq!(
            uri_for(27999),
            "mongodb://127.0.0.1:27999/?directConnection=true"
        );
    }

    #[test]
    fn log_watch_sees_only_new_lines_even_when_split() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mongod.log");
        std::fs::write(&p, "{\"msg\":\"Waiting for connections\"} old run\n").unwrap();
        let mut w = LogWatch::new(&p, Some("waiting for connections"));
        assert!(!w.poll());
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        write!(f, "{{\"msg\":\"Waiting for conn").unwrap();
        assert!(!w.poll());
        writeln!(f, "ections\",\"attr\":{{\"port\":1}}}}").unwrap();
        assert!(w.poll());
        assert!(w.poll());
        let mut none = LogWatch::new(&dir.path().join("missing"), None);
        assert!(none.poll());
    }

    #[test]
    fn connection_text_says_how_to_connect_and_stop() {
        let c = SpareConnection {
            uri: uri_for(4000),
            port: 4000,
            pid: 77,
            dir: "/tmp/pitr-spare-x".into(),
            dbpath: "/tmp/pitr-spare-x/db".into(),
            log_path: "/tmp/pitr-spare-x/mongod.log".into(),
        };
        let t = c.to_string();
        assert!(t.contains("mongosh 'mongodb://127.0.0.1:4000/?directConnection=true'"));
        assert!(t.contains("kill 77 (then remove /tmp/pitr-spare-x)"));
    }
}
