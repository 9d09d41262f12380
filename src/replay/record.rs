//! What happened in each step, for the summary and the report.

use serde::Serialize;

use crate::exec::child::{Finished, Outcome};

/// Which of the plan's steps this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    StartSpare,
    RestoreBackup,
    ReplayOplog,
    Verify,
    Dump,
    Shutdown,
}

impl StepKind {
    /// For log file names: `logs/<n>-<slug>.log`.
    pub fn slug(self) -> &'static str {
        match self {
            StepKind::StartSpare => "start-spare",
            StepKind::RestoreBackup => "restore-backup",
            StepKind::ReplayOplog => "replay-oplog",
            StepKind::Verify => "verify",
            StepKind::Dump => "dump",
            StepKind::Shutdown => "shutdown",
        }
    }

    /// The kinds of a plan's steps, in the order [`crate::plan::steps::steps`]
    /// makes them.
    pub fn sequence(has_slice: bool) -> Vec<StepKind> {
        let mut v = vec![StepKind::StartSpare, StepKind::RestoreBackup];
        if has_slice {
            v.push(StepKind::ReplayOplog);
        }
        v.extend([StepKind::Verify, StepKind::Dump, StepKind::Shutdown]);
        v
    }
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not reached (an earlier step failed, or pitr was interrupted before it).
    NotRun,
    Ok,
    Failed,
    /// Stopped by Ctrl-C.
    Interrupted,
    /// Deliberately not run (`--out` not given, verification failed, ...).
    Skipped,
    /// `--keep`: the spare was left running.
    Kept,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::NotRun => "not run",
            StepStatus::Ok => "ok",
            StepStatus::Failed => "FAILED",
            StepStatus::Interrupted => "interrupted",
            StepStatus::Skipped => "skipped",
            StepStatus::Kept => "kept",
        }
    }
}

/// One step. JSON: `number`, `kind`, `title`, `commands` (shell lines as run,
/// secrets redacted), `status`, `started_utc`, `duration_ms`, `exit_code` (a
/// child's exit code, or 128+n for a signal), `pids`, `log`, `detail`,
/// `stderr_tail` (a failed child's last lines).
#[derive(Clone, Debug, Serialize)]
pub struct StepRecord {
    pub number: u32,
    pub kind: StepKind,
    pub title: String,
    pub commands: Vec<String>,
    pub status: StepStatus,
    pub started_utc: Option<String>,
    pub duration_ms: Option<u64>,
    pub exit_code: Option<i32>,
    pub pids: Vec<u32>,
    pub log: Option<String>,
    pub detail: Option<String>,
    pub stderr_tail: Vec<String>,
}

impl StepRecord {
    pub fn new(number: u32, kind: StepKind, title: &str) -> StepRecord {
        StepRecord {
            number,
            kind,
            title: title.to_string(),
            commands: Vec::new(),
            status: StepStatus::NotRun,
            started_utc: None,
            duration_ms: None,
            exit_code: None,
            pids: Vec::new(),
            log: None,
            detail: None,
            stderr_tail: Vec::new(),
        }
    }

    /// Adds a finished child's facts: pid, exit code, duration, tail when it failed.
    pub fn child(&mut self, f: &Finished) {
        self.pids.push(f.pid);
        self.exit_code = f.outcome.shell_code();
        let ms = f.duration.as_millis() as u64;
        self.duration_ms = Some(self.duration_ms.unwrap_or(0) + ms);
        if !f.is_success() {
            let (_, tail) = f.tail();
            self.stderr_tail = tail.to_vec();
            self.status = match f.outcome {
                Outcome::Cancelled => StepStatus::Interrupted,
                _ => StepStatus::Failed,
            };
            let killed = if f.killed {
                "; SIGKILL after the grace period"
            } else {
                ""
            };
            self.detail = Some(format!("{}{killed}", f.outcome));
        }
    }
}
