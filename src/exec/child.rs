//! One supervised child process: the only way pitr starts a program.
//!
//! [`Command`] says what to run; [`Command::spawn`] starts it with stdin null, in its
//! own process group, its output drained while it runs; [`Running::wait`] waits with
//! the step's timeout and the cancellation token, stopping the whole group with
//! SIGTERM, the grace period, then SIGKILL when either fires. The result is a
//! [`Finished`] with a typed [`Outcome`]; [`Finished::into_result`] turns anything but
//! success into a [`ChildError`] that carries the (redacted) command line and the
//! last lines of stderr.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::output::{self, LineCallback, LogSink, Sinks, Stream, Tail};
use super::pgroup::{self, SIGKILL, SIGTERM};
use super::redact;
use super::signals::Cancel;
use crate::error::Hint;

/// How long a child gets between SIGTERM and SIGKILL unless told otherwise. mongod
/// needs a few seconds to checkpoint and close its data files cleanly.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// Lines of stderr kept for error messages.
pub const TAIL_LINES: usize = 40;

/// After the child's group is gone its pipes close at once; anything still holding
/// them (a process that left the group) is not worth waiting for longer than this.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// How pitr's own lines in a child's log start, to tell them from the child's output.
const PITR_MARK: &str = "# pitr: ";

/// What to run and how to supervise it. Build with the chained setters, then
/// [`spawn`](Command::spawn) or [`run`](Command::run).
pub struct Command {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    cwd: Option<PathBuf>,
    log: Option<PathBuf>,
    direct: Option<PathBuf>,
    on_line: Option<LineCallback>,
    timeout: Option<Duration>,
    grace: Duration,
    tail_lines: usize,
    stdin: Option<StdinFeed>,
}

/// What a child reads on its standard input: written by pitr on a thread of its own
/// while the child runs (a blocking writer: the pipe's end, closed when it returns).
pub type StdinFeed = Box<dyn FnOnce(&mut dyn io::Write) -> io::Result<()> + Send>;

impl Command {
    /// `program` should be a resolved path (see [`super::binaries`]); a bare name is
    /// looked up in PATH by the OS.
    pub fn new(program: impl Into<PathBuf>) -> Command {
        Command {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            log: None,
            direct: None,
            on_line: None,
            timeout: None,
            grace: DEFAULT_GRACE,
            tail_lines: TAIL_LINES,
            stdin: None,
        }
    }

    /// Feeds the child's standard input with what `feed` writes (else it is null).
    /// The child succeeds only if the feed did too: a child that read a cut input to
    /// its end could otherwise report success on half of it. A feed cut short because
    /// the child stopped reading (a broken pipe after it failed or was stopped) is the
    /// child's outcome, not the feed's.
    pub fn stdin_from(mut self, feed: StdinFeed) -> Command {
        self.stdin = Some(feed);
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Command {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets a variable on top of pitr's own environment.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Command {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    pub fn env_remove(mut self, key: impl Into<OsString>) -> Command {
        self.env.push((key.into(), None));
        self
    }

    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Command {
        self.cwd = Some(dir.into());
        self
    }

    /// Appends every line of stdout and stderr to this file (created if missing),
    /// framed by a start and an end line from pitr.
    pub fn log_file(mut self, path: impl Into<PathBuf>) -> Command {
        self.log = Some(path.into());
        self
    }

    /// Connects stdout and stderr straight to this file instead of pipes, for a child
    /// that may outlive pitr (a spare mongod kept with `--keep`): a pipe would break
    /// when pitr exits. No line callback then; the tail is read back from the file.
    /// Takes precedence over [`log_file`](Command::log_file).
    pub fn direct_output(mut self, path: impl Into<PathBuf>) -> Command {
        self.direct = Some(path.into());
        self
    }

    /// Called for each output line while the child runs (progress display).
    pub fn on_line(mut self, f: impl Fn(Stream, &str) + Send + Sync + 'static) -> Command {
        self.on_line = Some(Arc::new(f));
        self
    }

    /// The longest this step may run; then it is stopped and reported as timed out.
    pub fn timeout(mut self, timeout: Duration) -> Command {
        self.timeout = Some(timeout);
        self
    }

    /// Time between SIGTERM and SIGKILL when stopping it.
    pub fn grace(mut self, grace: Duration) -> Command {
        self.grace = grace;
        self
    }

    /// How many of the last stderr lines to keep for messages.
    pub fn tail_lines(mut self, n: usize) -> Command {
        self.tail_lines = n;
        self
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    pub fn get_args(&self) -> &[OsString] {
        &self.args
    }

    /// The command line for messages and logs, secrets redacted.
    pub fn command_line(&self) -> String {
        redact::command_line(&self.program, &self.args)
    }

    /// Starts the child. Must be called inside a tokio runtime (the output drainers
    /// are tasks).
    pub fn spawn(self) -> Result<Running, ChildError> {
        let command = self.command_line();
        let log_err = |path: &Path, source: io::Error| ChildError::Log {
            command: command.clone(),
            path: path.to_path_buf(),
            source,
        };
        let header = format!("{PITR_MARK}{} starting `{command}`", now());

        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            // Its own group: the terminal's Ctrl-C reaches pitr only, which then stops
            // children in order; and one signal reaches everything the child started.
            .process_group(0)
            // Dropping a `Running` kills the group itself (see `Drop`).
            .kill_on_drop(false);
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }

        let mut log = None;
        if let Some(path) = &self.direct {
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| log_err(path, e))?;
            let _ = writeln!(f, "{header}");
            let f2 = f.try_clone().map_err(|e| log_err(path, e))?;
            cmd.stdout(f).stderr(f2);
        } else {
            if let Some(path) = &self.log {
                let sink = LogSink::open(path).map_err(|e| log_err(path, e))?;
                sink.line(&header);
                log = Some(Arc::new(sink));
            }
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }

        let mut child = cmd.spawn().map_err(|source| ChildError::Spawn {
            command: command.clone(),
            program: self.program.clone(),
            source,
        })?;
        let started = Instant::now();
        let pid = child.id().expect("a child that was just spawned has a pid");
        let feeder = match (self.stdin, child.stdin.take()) {
            (Some(feed), Some(pipe)) => Some(feed_stdin(feed, pipe, &command)?),
            _ => None,
        };

        let stdout_tail = Arc::new(Mutex::new(Tail::new(self.tail_lines)));
        let stderr_tail = Arc::new(Mutex::new(Tail::new(self.tail_lines)));
        let mut drains = Vec::new();
        if let Some(out) = child.stdout.take() {
            drains.push(tokio::spawn(output::drain(
                out,
                Sinks {
                    stream: Stream::Stdout,
                    tail: stdout_tail.clone(),
                    log: log.clone(),
                    on_line: self.on_line.clone(),
                },
            )));
        }
        if let Some(err) = child.stderr.take() {
            drains.push(tokio::spawn(output::drain(
                err,
                Sinks {
                    stream: Stream::Stderr,
                    tail: stderr_tail.clone(),
                    log: log.clone(),
                    on_line: self.on_line.clone(),
                },
            )));
        }

        Ok(Running {
            child,
            pid,
            command,
            started,
            timeout: self.timeout,
            grace: self.grace,
            stdout_tail,
            stderr_tail,
            drains,
            log,
            log_path: self.direct.clone().or(self.log.clone()),
            direct: self.direct.is_some(),
            tail_lines: self.tail_lines,
            reaped: false,
            detached: false,
            feeder,
        })
    }

    /// Spawns, waits (timeout, cancellation), and returns `Ok` only on exit code 0.
    pub async fn run(self, cancel: &Cancel) -> Result<Finished, ChildError> {
        self.spawn()?.wait(cancel).await.into_result()
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exit code 0.
    Success,
    /// A non-zero exit code.
    Failed { code: i32 },
    /// Killed by a signal it did not survive (not one pitr sent to stop it).
    Signaled { signal: i32 },
    /// Ran past its timeout and was stopped.
    TimedOut { after: Duration },
    /// Stopped because pitr was interrupted (Ctrl-C, SIGTERM, or the token).
    Cancelled,
    /// Waiting for it failed; it was killed to be sure.
    Lost { error: String },
    /// It exited 0, but what pitr fed its standard input failed on pitr's side, so
    /// it read less than it should have.
    InputFailed { error: String },
}

impl Outcome {
    pub fn from_status(status: ExitStatus) -> Outcome {
        match (status.code(), status.signal()) {
            (Some(0), _) => Outcome::Success,
            (Some(code), _) => Outcome::Failed { code },
            (None, Some(signal)) => Outcome::Signaled { signal },
            (None, None) => Outcome::Lost {
                error: format!("unrecognised wait status {status:?}"),
            },
        }
    }

    pub fn is_success(&self) -> bool {
        *self == Outcome::Success
    }

    /// The code a shell would report: the exit code, or 128 + the signal number.
    pub fn shell_code(&self) -> Option<i32> {
        match self {
            Outcome::Success => Some(0),
            Outcome::Failed { code } => Some(*code),
            Outcome::Signaled { signal } => Some(128 + signal),
            _ => None,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Success => write!(f, "succeeded"),
            Outcome::Failed { code } => write!(f, "failed with exit code {code}"),
            Outcome::Signaled { signal } => {
                write!(f, "was killed by signal {signal}")?;
                if let Some(name) = pgroup::signal_name(*signal) {
                    write!(f, " ({name})")?;
                }
                write!(f, ", exit status {}", 128 + signal)
            }
            Outcome::TimedOut { after } => {
                write!(
                    f,
                    "did not finish within {}",
                    humantime::format_duration(*after)
                )
            }
            Outcome::Cancelled => write!(f, "was interrupted"),
            Outcome::Lost { error } => write!(f, "could not be waited for ({error})"),
            Outcome::InputFailed { error } => write!(
                f,
                "exited 0 but did not get all its input: feeding its standard input failed ({error})"
            ),
        }
    }
}

/// A child that has ended, with everything needed to report on it.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The redacted command line.
    pub command: String,
    pub pid: u32,
    pub outcome: Outcome,
    /// The raw wait status, when there was one.
    pub status: Option<ExitStatus>,
    /// Whether SIGKILL had to be sent (it outlived the grace period, or a second
    /// Ctrl-C asked for it).
    pub killed: bool,
    /// The grace period it was given when stopped.
    pub grace: Duration,
    pub duration: Duration,
    /// The last stderr lines (in direct-output mode: of the combined output file).
    pub stderr_tail: Vec<String>,
    pub stdout_tail: Vec<String>,
    /// Where the full output is.
    pub log: Option<PathBuf>,
}

impl Finished {
    pub fn is_success(&self) -> bool {
        self.outcome.is_success()
    }

    /// `Ok(self)` on success, otherwise the error to show.
    pub fn into_result(self) -> Result<Finished, ChildError> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(ChildError::Exited(Box::new(self)))
        }
    }

    /// The lines to show in an error: stderr's, or stdout's when stderr was silent
    /// (some tools, mongod among them, report on stdout).
    pub fn tail(&self) -> (&'static str, &[String]) {
        if self.stderr_tail.is_empty() && !self.stdout_tail.is_empty() {
            ("stdout", &self.stdout_tail)
        } else {
            ("stderr", &self.stderr_tail)
        }
    }
}

fn exited_message(f: &Finished) -> String {
    let mut s = format!("`{}` {}", f.command, f.outcome);
    let grace = humantime::format_duration(f.grace);
    match (&f.outcome, f.killed) {
        (Outcome::TimedOut { .. } | Outcome::Cancelled, false) => {
            let _ = write!(s, "; stopped it with SIGTERM");
        }
        (Outcome::TimedOut { .. } | Outcome::Cancelled, true) => {
            let _ = write!(
                s,
                "; sent SIGTERM, then SIGKILL (it was still running after the {grace} grace period, or a second Ctrl-C asked for it)"
            );
        }
        _ => {}
    }
    let (which, lines) = f.tail();
    if !lines.is_empty() {
        let _ = write!(
            s,
            "\n  last {} of its {which}:",
            crate::table::counted(lines.len() as u64, "line", "lines")
        );
        for l in lines {
            let _ = write!(s, "\n    | {}", output::cut(l, 2000));
        }
    }
    if let Some(log) = &f.log {
        let _ = write!(s, "\n  full output: `{}`", log.display());
    }
    s
}

/// Why a child could not be run to success.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error("cannot start `{command}`")]
    Spawn {
        command: String,
        program: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("cannot open the log file `{}` for `{command}`", path.display())]
    Log {
        command: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// It ran and did not succeed: failed, crashed, timed out or was interrupted.
    #[error("{}", exited_message(.0))]
    Exited(Box<Finished>),
}

impl ChildError {
    pub fn finished(&self) -> Option<&Finished> {
        match self {
            ChildError::Exited(f) => Some(f),
            _ => None,
        }
    }

    pub fn outcome(&self) -> Option<&Outcome> {
        self.finished().map(|f| &f.outcome)
    }

    /// Interrupted by the user rather than failed: the CLI exits 130, not 2.
    pub fn is_cancelled(&self) -> bool {
        self.outcome() == Some(&Outcome::Cancelled)
    }
}

impl Hint for ChildError {
    fn hint(&self) -> Option<String> {
        match self {
            ChildError::Spawn {
                program, source, ..
            } => {
                let p = program.display();
                match (source.kind(), source.raw_os_error()) {
                    (io::ErrorKind::NotFound, _) => Some(format!(
                        "check that `{p}` exists (for a script: that its `#!` interpreter exists too)"
                    )),
                    (io::ErrorKind::PermissionDenied, _) => {
                        Some(format!("make it executable: `chmod +x {p}`"))
                    }
                    (_, Some(libc::ENOEXEC)) => Some(format!(
                        "`{p}` is not a program this machine can run (another CPU architecture, or a script without `#!`)"
                    )),
                    _ => None,
                }
            }
            ChildError::Log { .. } => Some(
                "check that the directory exists, is writable, and the disk is not full".into(),
            ),
            ChildError::Exited(f) => {
                let log = f
                    .log
                    .as_ref()
                    .map(|l| format!("; the full output is in `{}`", l.display()))
                    .unwrap_or_default();
                match &f.outcome {
                    Outcome::Failed { .. } => Some(format!(
                        "the lines above are the end of the tool's own report of what went wrong{log}"
                    )),
                    Outcome::Signaled { signal } if *signal == SIGKILL => Some(format!(
                        "something outside pitr killed it; often the kernel's out-of-memory killer (see `dmesg`){log}"
                    )),
                    Outcome::Signaled { .. } => Some(format!("it crashed{log}")),
                    Outcome::TimedOut { .. } => Some(format!(
                        "if it was making progress, give the step more time; otherwise its output shows where it stalled{log}"
                    )),
                    Outcome::Lost { .. } => Some(format!("this is unexpected; please report it{log}")),
                    Outcome::InputFailed { .. } => Some(format!(
                        "what it restored is incomplete: the error above says why pitr could not give it all of its input (read the source again, or check its storage){log}"
                    )),
                    Outcome::Success | Outcome::Cancelled => None,
                }
            }
        }
    }
}

/// A started child. Dropping it without waiting kills its whole group (SIGKILL) and
/// reaps it, so no error path can leave an orphan behind.
pub struct Running {
    child: tokio::process::Child,
    pid: u32,
    command: String,
    started: Instant,
    timeout: Option<Duration>,
    grace: Duration,
    stdout_tail: Arc<Mutex<Tail>>,
    stderr_tail: Arc<Mutex<Tail>>,
    drains: Vec<JoinHandle<()>>,
    log: Option<Arc<LogSink>>,
    log_path: Option<PathBuf>,
    direct: bool,
    tail_lines: usize,
    reaped: bool,
    detached: bool,
    /// The thread writing its standard input ([`Command::stdin_from`]).
    feeder: Option<std::thread::JoinHandle<io::Result<()>>>,
}

/// Starts the thread that writes `feed` into the child's stdin pipe (as a blocking
/// file: the feed reads files and object storage synchronously).
fn feed_stdin(
    feed: StdinFeed,
    pipe: tokio::process::ChildStdin,
    command: &str,
) -> Result<std::thread::JoinHandle<io::Result<()>>, ChildError> {
    let fd = pipe.into_owned_fd().map_err(|source| ChildError::Spawn {
        command: command.to_string(),
        program: PathBuf::from(command),
        source,
    })?;
    std::thread::Builder::new()
        .name("pitr-stdin".into())
        .spawn(move || {
            let mut w = io::BufWriter::with_capacity(1 << 20, std::fs::File::from(fd));
            feed(&mut w)?;
            w.flush()
        })
        .map_err(|source| ChildError::Spawn {
            command: command.to_string(),
            program: PathBuf::from(command),
            source,
        })
}

/// Why we are stopping a child that is still running.
#[derive(Clone, Copy)]
enum StopReason {
    Timeout,
    Cancel,
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl Running {
    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The redacted command line.
    pub fn command_line(&self) -> &str {
        &self.command
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The last lines of stderr so far (direct-output mode: of the output file).
    pub fn stderr_tail(&self) -> Vec<String> {
        if self.direct {
            return self
                .log_path
                .as_deref()
                .and_then(|p| output::read_file_tail(p, self.tail_lines + 2, 2000).ok())
                .map(|lines| {
                    let mut lines: Vec<String> = lines
                        .into_iter()
                        .filter(|l| !l.starts_with(PITR_MARK))
                        .collect();
                    let extra = lines.len().saturating_sub(self.tail_lines);
                    lines.drain(..extra);
                    lines
                })
                .unwrap_or_default();
        }
        self.stderr_tail
            .lock()
            .map(|t| t.lines())
            .unwrap_or_default()
    }

    pub fn stdout_tail(&self) -> Vec<String> {
        self.stdout_tail
            .lock()
            .map(|t| t.lines())
            .unwrap_or_default()
    }

    /// Whether it has exited, without waiting. Once it has, the rest of its group is
    /// killed at once (see [`Running::wait`]).
    pub fn try_exit(&mut self) -> Option<Outcome> {
        match self.child.try_wait() {
            Ok(Some(status)) => {
                if !self.reaped {
                    self.reaped = true;
                    self.kill_leftovers();
                }
                Some(Outcome::from_status(status))
            }
            Ok(None) => None,
            Err(e) => Some(Outcome::Lost {
                error: e.to_string(),
            }),
        }
    }

    /// Waits for it to exit. When its timeout passes or `cancel` fires, stops the
    /// whole group: SIGTERM, the grace period (cut short by a second Ctrl-C), SIGKILL.
    pub async fn wait(mut self, cancel: &Cancel) -> Finished {
        let deadline = self.timeout.map(|t| self.started + t);
        let first = tokio::select! {
            // An exit that races with a timeout or Ctrl-C wins: it is the truth.
            biased;
            r = self.child.wait() => Ok(r),
            _ = until(deadline) => Err(StopReason::Timeout),
            _ = cancel.cancelled() => Err(StopReason::Cancel),
        };
        match first {
            Ok(r) => self.finish(r, None, false).await,
            Err(why) => {
                let (r, killed) = self.terminate(cancel).await;
                self.finish(r, Some(why), killed).await
            }
        }
    }

    /// Stops it on purpose (e.g. shutting a spare mongod down): SIGTERM to the group,
    /// the grace period (cut short when `cancel` escalates), then SIGKILL. The outcome
    /// is its real exit status (0 for a clean shutdown, or the signal).
    pub async fn stop(mut self, cancel: &Cancel) -> Finished {
        if let Ok(Some(status)) = self.child.try_wait() {
            return self.finish(Ok(status), None, false).await;
        }
        let (r, killed) = self.terminate(cancel).await;
        self.finish(r, None, killed).await
    }

    /// Leaves it running after pitr exits (`--keep`). Only sensible with
    /// [`Command::direct_output`]: piped output would break when pitr exits.
    pub fn detach(mut self) -> u32 {
        self.detached = true;
        self.pid
    }

    async fn terminate(&mut self, cancel: &Cancel) -> (io::Result<ExitStatus>, bool) {
        let _ = pgroup::signal_group(self.pid, SIGTERM);
        tokio::select! {
            biased;
            r = self.child.wait() => return (r, false),
            _ = tokio::time::sleep(self.grace) => {}
            _ = cancel.escalated() => {}
        }
        let _ = pgroup::signal_group(self.pid, SIGKILL);
        (self.child.wait().await, true)
    }

    /// The leader is gone; anything left in its group would be an orphan and would
    /// hold our pipes open. Done right after reaping, before the group id can be reused.
    fn kill_leftovers(&self) {
        if pgroup::group_exists(self.pid) {
            let _ = pgroup::signal_group(self.pid, SIGKILL);
        }
    }

    async fn finish(
        &mut self,
        r: io::Result<ExitStatus>,
        why: Option<StopReason>,
        killed: bool,
    ) -> Finished {
        if !self.reaped {
            self.reaped = true;
            self.kill_leftovers();
        }
        if r.is_err() {
            // Lost track of it: make sure it is gone all the same.
            let _ = pgroup::signal_group(self.pid, SIGKILL);
        }
        let deadline = Instant::now() + DRAIN_WAIT;
        for mut d in std::mem::take(&mut self.drains) {
            if tokio::time::timeout_at(deadline, &mut d).await.is_err() {
                d.abort();
            }
        }
        let status = r.as_ref().ok().copied();
        let mut outcome = match (why, r) {
            (Some(StopReason::Timeout), _) => Outcome::TimedOut {
                after: self.timeout.unwrap_or_default(),
            },
            (Some(StopReason::Cancel), _) => Outcome::Cancelled,
            (None, Ok(status)) => Outcome::from_status(status),
            (None, Err(e)) => Outcome::Lost {
                error: e.to_string(),
            },
        };
        // The child is gone, so its end of the pipe is closed: the feed ends soon (a
        // write fails with a broken pipe), unless it is blocked reading its source;
        // it is joined only when the child succeeded, to vouch for the input.
        if let Some(f) = self.feeder.take() {
            if outcome.is_success() {
                let fed = tokio::task::spawn_blocking(move || f.join()).await;
                let failed = match fed {
                    Ok(Ok(Ok(()))) => None,
                    Ok(Ok(Err(e))) => Some(e.to_string()),
                    Ok(Err(_)) | Err(_) => Some("the thread feeding it panicked".into()),
                };
                if let Some(error) = failed {
                    outcome = Outcome::InputFailed { error };
                }
            }
        }
        let duration = self.started.elapsed();
        // Before the footer goes in: the tail is the child's output, not ours.
        let stderr_tail = self.stderr_tail();
        let stdout_tail = self.stdout_tail();
        let footer = format!(
            "{PITR_MARK}{} `{}` {outcome}{} after {}",
            now(),
            self.command,
            if killed {
                " (SIGKILL after the grace period)"
            } else {
                ""
            },
            humantime::format_duration(Duration::from_millis(duration.as_millis() as u64)),
        );
        if let Some(log) = &self.log {
            log.line(&footer);
        } else if let (true, Some(p)) = (self.direct, &self.log_path) {
            if let Ok(mut f) = OpenOptions::new().append(true).open(p) {
                let _ = writeln!(f, "{footer}");
            }
        }
        Finished {
            command: self.command.clone(),
            pid: self.pid,
            outcome,
            status,
            killed,
            grace: self.grace,
            duration,
            stderr_tail,
            stdout_tail,
            log: self.log_path.clone(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for d in &self.drains {
            d.abort();
        }
        if self.reaped || self.detached {
            return;
        }
        // An error path dropped a live child: kill the group now and reap it, so that
        // whoever drops it next (a temp dir holding its files) finds it gone.
        let _ = pgroup::signal_group(self.pid, SIGKILL);
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < give_up {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(raw: i32) -> ExitStatus {
        ExitStatus::from_raw(raw)
    }

    #[test]
    fn outcomes_from_wait_status() {
        assert_eq!(Outcome::from_status(status(0)), Outcome::Success);
        assert_eq!(
            Outcome::from_status(status(3 << 8)),
            Outcome::Failed { code: 3 }
        );
        let segv = Outcome::from_status(status(libc::SIGSEGV));
        assert_eq!(segv, Outcome::Signaled { signal: 11 });
        assert_eq!(segv.shell_code(), Some(139));
        assert_eq!(
            segv.to_string(),
            "was killed by signal 11 (SIGSEGV), exit status 139"
        );
        assert_eq!(Outcome::Cancelled.shell_code(), None);
        assert_eq!(
            Outcome::TimedOut {
                after: Duration::from_secs(90)
            }
            .to_string(),
            "did not finish within 1m 30s"
        );
    }

    #[test]
    fn error_message_has_command_tail_and_log() {
        let f = Finished {
            command: "mongorestore --password <redacted>".into(),
            pid: 42,
            outcome: Outcome::Failed { code: 1 },
            status: Some(status(1 << 8)),
            killed: false,
            grace: DEFAULT_GRACE,
            duration: Duration::from_secs(1),
            stderr_tail: vec!["Failed: connection refused".into()],
            stdout_tail: vec!["ignored".into()],
            log: Some("/tmp/x.log".into()),
        };
        let e = f.into_result().unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("`mongorestore --password <redacted>` failed with exit code 1"));
        assert!(text.contains("last 1 line of its stderr:\n    | Failed: connection refused"));
        assert!(text.contains("full output: `/tmp/x.log`"));
        assert!(!text.contains("ignored"));
        assert!(e.hint().unwrap().contains("/tmp/x.log"));
        assert!(!e.is_cancelled());
    }
}
