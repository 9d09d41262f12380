//! The replay itself: the plan's steps, run with real values.
//!
//! 1. start the spare ([`SpareMongod`]: loopback, free port, temp dbpath in the
//!    work dir, TTL monitor off, ready = log line + TCP + a driver `ping` whose
//!    `serverStatus.pid` is ours);
//! 2. restore the backup and 3. replay the slice, exactly
//!    [`steps::restore_backup_argv`] and [`steps::replay_slice_argv`];
//! 4. verify in-process (what [`steps::verify_argv`] would run);
//! 5. with `--out`, [`steps::dump_argvs`] into a temporary directory beside OUT,
//!    renamed into place when complete;
//! 6. stop the spare (SIGTERM to its group, the grace period, SIGKILL) and remove
//!    its directory, or with `--keep` leave it running.
//!
//! Step 6 runs whatever happened before it: after a failed step, after a failed
//! verification, and after Ctrl-C (which always stops the spare, `--keep` or not;
//! a second Ctrl-C kills at once). Every child goes through
//! [`crate::exec::child::Command`], so none outlives pitr unless `--keep` asks.

use std::error::Error as StdError;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Failure, Hint};
use crate::exec::child::Command;
use crate::exec::spare::{SpareConnection, SpareError, SpareMongod, SpareOptions};
use crate::exec::Cancel;
use crate::plan::steps::{self, shell_line, CommandValues};
use crate::plan::RestorePlan;
use crate::verify::{self, VerifyError, VerifyReport};

use super::commands::{self, Values};
use super::progress::{seconds, Console};
use super::record::{StepKind, StepRecord, StepStatus};
use super::restore_log;
use super::tools::Tools;
use super::workdir::WorkDir;

/// Lines of a failed step's stderr shown in the error (the log has everything).
const STEP_TAIL_LINES: usize = 20;

/// How to run the steps (from the command line).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Leave the spare running at the end (not after Ctrl-C).
    pub keep: bool,
    /// Dump the restored namespaces here.
    pub out: Option<PathBuf>,
    /// The longest a restore, replay, verify or dump step may run.
    pub step_timeout: Option<Duration>,
    /// The longest the spare may take to become ready.
    pub start_timeout: Duration,
    /// Between SIGTERM and SIGKILL when stopping a child.
    pub grace: Duration,
    /// A fixed port for the spare instead of a free one.
    pub port: Option<u16>,
    /// Server selection / connect timeout of the verification.
    pub connect_timeout: Duration,
    /// This pitr binary (for the verify command line shown).
    pub pitr: PathBuf,
    /// Start the spare on this existing dbpath (a recovered snapshot backup, whose
    /// data is the backup: the plan then says `backup_in_spare`).
    pub dbpath: Option<PathBuf>,
}

/// The spare mongod. JSON: `port`, `pid`, `uri`, `dir`, `dbpath`, `log`, `kept`,
/// `stopped` (how it ended, null when kept).
#[derive(Clone, Debug, Serialize)]
pub struct SpareRecord {
    pub port: u16,
    pub pid: u32,
    pub uri: String,
    pub dir: String,
    pub dbpath: String,
    pub log: String,
    pub kept: bool,
    pub stopped: Option<String>,
}

/// The hand-over dump. JSON: `dir`, `namespaces` (empty: everything), `files`, `bytes`.
#[derive(Clone, Debug, Serialize)]
pub struct DumpRecord {
    pub dir: String,
    pub namespaces: Vec<String>,
    pub files: u64,
    pub bytes: u64,
}

/// Everything that happened.
pub struct Execution {
    pub steps: Vec<StepRecord>,
    pub spare: Option<SpareRecord>,
    /// `--keep`: how to reach and stop the spare.
    pub kept: Option<SpareConnection>,
    pub verify: Option<VerifyReport>,
    pub dump: Option<DumpRecord>,
    /// The step failure that ends the replay with exit code 2.
    pub error: Option<Failure>,
    pub interrupted: bool,
    pub warnings: Vec<String>,
}

/// Why the steps stopped early.
enum Stop {
    Error(Failure),
    Interrupted,
    VerifyFailed,
}

/// `prefix: <error>`, keeping the error's hint and its cause chain.
fn failure<E: StdError + Hint + Send + Sync + 'static>(prefix: &str, e: E) -> Failure {
    let mut f = Failure::new(format!("{prefix}: {e}"));
    if let Some(h) = e.hint() {
        f = f.with_hint(h);
    }
    f.with_cause(e)
}

/// Runs the plan's steps; see the module documentation. Never panics on a child's
/// failure: the result says what happened.
pub async fn execute(
    plan: &RestorePlan,
    work: &WorkDir,
    tools: &Tools,
    settings: &Settings,
    cancel: &Cancel,
    console: &Arc<Console>,
) -> Execution {
    let kinds = StepKind::sequence(plan.restore.slice_dir.is_some());
    let mongod_log = work.mongod_log();
    let placeholder = commands::values(&Values {
        mongod: &tools.mongod.path,
        mongorestore: &tools.mongorestore.path,
        mongodump: tools.mongodump.as_ref().map(|b| b.path.as_path()),
        pitr: &settings.pitr,
        port: settings.port,
        dbpath: None,
        logpath: &mongod_log,
        dump_dir: None,
    });
    let plan_steps = steps::steps(&plan.restore, &placeholder);
    let records: Vec<StepRecord> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let (number, title) = match plan_steps.get(i) {
                Some(s) if plan_steps.len() == kinds.len() => (s.number, s.title.clone()),
                _ => (i as u32 + 1, k.slug().to_string()),
            };
            StepRecord::new(number, *k, &title)
        })
        .collect();
    let mut r = Runner {
        plan,
        work,
        tools,
        s: settings,
        cancel,
        console: console.clone(),
        values: placeholder,
        ex: Execution {
            steps: records,
            spare: None,
            kept: None,
            verify: None,
            dump: None,
            error: None,
            interrupted: false,
            warnings: Vec::new(),
        },
    };
    r.run().await;
    r.ex
}

struct Runner<'a> {
    plan: &'a RestorePlan,
    work: &'a WorkDir,
    tools: &'a Tools,
    s: &'a Settings,
    cancel: &'a Cancel,
    console: Arc<Console>,
    values: CommandValues,
    ex: Execution,
}

impl Runner<'_> {
    async fn run(&mut self) {
        let mut spare = match self.start().await {
            Ok(sp) => sp,
            Err(stop) => {
                let i = self.index(StepKind::Shutdown);
                self.ex.steps[i].status = StepStatus::Skipped;
                self.ex.steps[i].detail = Some("the spare mongod is not running".into());
                self.stopped(stop);
                return;
            }
        };
        let stop = self.middle(&mut spare).await.err();
        self.shutdown(spare).await;
        if let Some(stop) = stop {
            self.stopped(stop);
        }
    }

    fn stopped(&mut self, stop: Stop) {
        match stop {
            Stop::Error(f) => {
                if self.ex.error.is_none() {
                    self.ex.error = Some(f);
                }
            }
            Stop::Interrupted => self.ex.interrupted = true,
            Stop::VerifyFailed => {}
        }
    }

    fn total(&self) -> usize {
        self.ex.steps.len()
    }

    fn index(&self, kind: StepKind) -> usize {
        self.ex
            .steps
            .iter()
            .position(|s| s.kind == kind)
            .expect("every kind in the sequence has a record")
    }

    fn prefix(&self, i: usize) -> String {
        let s = &self.ex.steps[i];
        format!("step {} ({}) failed", s.number, s.title)
    }

    /// Marks step `i` as started, unless pitr is being interrupted.
    fn begin(&mut self, i: usize) -> Result<(), Stop> {
        if self.cancel.is_cancelled() {
            return Err(Stop::Interrupted);
        }
        let total = self.total();
        let rec = &mut self.ex.steps[i];
        rec.started_utc = Some(now());
        self.console.step_started(rec.number, total, &rec.title);
        Ok(())
    }

    /// Reports step `i`'s end on the console.
    fn end(&self, i: usize) {
        let rec = &self.ex.steps[i];
        self.console.step_finished(
            rec.number,
            self.total(),
            &rec.title,
            rec.status.as_str(),
            rec.duration_ms.map(Duration::from_millis),
            rec.detail.as_deref().unwrap_or(""),
        );
    }

    fn skip(&mut self, kind: StepKind, why: &str) {
        let i = self.index(kind);
        let rec = &mut self.ex.steps[i];
        rec.status = StepStatus::Skipped;
        rec.detail = Some(why.to_string());
        self.end(i);
    }

    async fn start(&mut self) -> Result<SpareMongod, Stop> {
        let i = self.index(StepKind::StartSpare);
        self.begin(i)?;
        self.ex.steps[i].commands = vec![shell_line(&commands::spare_mongod_argv(&self.values))];
        self.ex.steps[i].log = Some(self.work.mongod_log().display().to_string());
        let mut opts = SpareOptions::new(&self.tools.mongod.path);
        opts.parent_dir = Some(self.work.root.clone());
        opts.port = self.s.port;
        opts.log_path = Some(self.work.mongod_log());
        opts.start_timeout = self.s.start_timeout;
        opts.grace = self.s.grace;
        opts.keep = false;
        opts.probe = Some(verify::spare_probe());
        opts.dbpath = self.s.dbpath.clone();
        let t = Instant::now();
        let r = SpareMongod::start(opts, self.cancel).await;
        self.ex.steps[i].duration_ms = Some(t.elapsed().as_millis() as u64);
        match r {
            Ok(spare) => {
                let dbpath = spare.dbpath().to_path_buf();
                self.values = commands::values(&Values {
                    mongod: &self.tools.mongod.path,
                    mongorestore: &self.tools.mongorestore.path,
                    mongodump: self.tools.mongodump.as_ref().map(|b| b.path.as_path()),
                    pitr: &self.s.pitr,
                    port: Some(spare.port()),
                    dbpath: Some(&dbpath),
                    logpath: &self.work.mongod_log(),
                    dump_dir: None,
                });
                let rec = &mut self.ex.steps[i];
                rec.commands = vec![shell_line(&commands::spare_mongod_argv(&self.values))];
                rec.status = StepStatus::Ok;
                rec.pids = vec![spare.pid()];
                rec.detail = Some(format!("pid {}, port {}", spare.pid(), spare.port()));
                self.ex.spare = Some(SpareRecord {
                    port: spare.port(),
                    pid: spare.pid(),
                    uri: spare.uri(),
                    dir: spare.dir().display().to_string(),
                    dbpath: dbpath.display().to_string(),
                    log: spare.log_path().display().to_string(),
                    kept: false,
                    stopped: None,
                });
                self.end(i);
                Ok(spare)
            }
            Err(SpareError::Cancelled) => {
                self.ex.steps[i].status = StepStatus::Interrupted;
                self.end(i);
                Err(Stop::Interrupted)
            }
            Err(e) => {
                let rec = &mut self.ex.steps[i];
                rec.status = StepStatus::Failed;
                match &e {
                    SpareError::ExitedAtStart {
                        outcome,
                        log_tail,
                        output_tail,
                        ..
                    } => {
                        rec.exit_code = outcome.shell_code();
                        rec.stderr_tail = if output_tail.is_empty() {
                            log_tail.clone()
                        } else {
                            output_tail.clone()
                        };
                        rec.detail = Some(format!("mongod {outcome} during startup"));
                    }
                    SpareError::StartTimeout { log_tail, .. } => {
                        rec.stderr_tail = log_tail.clone();
                        rec.detail = Some("did not become ready in time".into());
                    }
                    other => rec.detail = Some(first_line(&other.to_string())),
                }
                self.end(i);
                let prefix = self.prefix(i);
                Err(Stop::Error(failure(&prefix, e)))
            }
        }
    }

    async fn middle(&mut self, spare: &mut SpareMongod) -> Result<(), Stop> {
        if self.plan.restore.backup_in_spare {
            self.skip(
                StepKind::RestoreBackup,
                "the spare runs on the recovered snapshot backup: its data is the backup",
            );
        } else {
            let restore = steps::restore_backup_argv(&self.plan.restore, &self.values);
            self.child_step(StepKind::RestoreBackup, vec![restore], spare)
                .await?;
        }
        if let Some(a) = steps::replay_slice_argv(&self.plan.restore, &self.values) {
            self.child_step(StepKind::ReplayOplog, vec![a], spare)
                .await?;
        }
        self.verify_step(spare).await?;
        self.dump_step(spare).await
    }

    /// Runs `argvs` one after the other as step `kind`, all output into its log.
    async fn child_step(
        &mut self,
        kind: StepKind,
        argvs: Vec<Vec<String>>,
        spare: &mut SpareMongod,
    ) -> Result<(), Stop> {
        let i = self.index(kind);
        self.begin(i)?;
        self.run_children(i, argvs, spare).await?;
        if matches!(kind, StepKind::RestoreBackup | StepKind::ReplayOplog) {
            self.check_restore_log(i)?;
        }
        self.ex.steps[i].status = StepStatus::Ok;
        self.end(i);
        Ok(())
    }

    /// mongorestore exits 0 although documents failed to restore: its log says so
    /// (see [`super::restore_log`]), and such a restore is not the backup.
    fn check_restore_log(&mut self, i: usize) -> Result<(), Stop> {
        let Some(log) = self.ex.steps[i].log.clone() else {
            return Ok(());
        };
        let text = fs::read_to_string(&log).unwrap_or_default();
        let Some(n) = restore_log::failed_documents(&text).filter(|n| *n > 0) else {
            return Ok(());
        };
        let why = restore_log::first_error(&text)
            .map(|e| format!("; the first: {e}"))
            .unwrap_or_default();
        self.ex.steps[i].status = StepStatus::Failed;
        self.ex.steps[i].detail = Some(format!(
            "mongorestore exited 0 but reported {n} document(s) failed to restore"
        ));
        self.end(i);
        let prefix = self.prefix(i);
        Err(Stop::Error(
            Failure::new(format!(
                "{prefix}: mongorestore exited 0 but {n} document(s) failed to restore{why}; the spare does not hold the backup"
            ))
            .with_hint(format!(
                "see `{log}`: duplicate _ids mean the spare was not empty or the backup holds a document twice; the \
                 restored data must not be handed over as it is"
            )),
        ))
    }

    async fn run_children(
        &mut self,
        i: usize,
        argvs: Vec<Vec<String>>,
        spare: &mut SpareMongod,
    ) -> Result<(), Stop> {
        let (number, kind) = (self.ex.steps[i].number, self.ex.steps[i].kind);
        let log = self.work.step_log(number, kind.slug());
        self.ex.steps[i].log = Some(log.display().to_string());
        let total = self.total();
        for argv in argvs {
            let Some((program, args)) = argv.split_first() else {
                continue;
            };
            let console = self.console.clone();
            let mut cmd = Command::new(program)
                .args(args)
                .log_file(&log)
                .tail_lines(STEP_TAIL_LINES)
                .grace(self.s.grace)
                .on_line(move |_, l| console.child_output(l));
            if let Some(t) = self.s.step_timeout {
                cmd = cmd.timeout(t);
            }
            if kind == StepKind::RestoreBackup {
                if let Some(st) = self.plan.restore.stream.clone() {
                    cmd = cmd.stdin_from(stdin_feed(st));
                }
            }
            self.ex.steps[i].commands.push(cmd.command_line());
            let name = Path::new(program)
                .file_name()
                .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
            let running = match cmd.spawn() {
                Ok(r) => r,
                Err(e) => {
                    self.ex.steps[i].status = StepStatus::Failed;
                    self.ex.steps[i].detail = Some(format!("cannot start `{name}`"));
                    self.end(i);
                    let prefix = self.prefix(i);
                    return Err(Stop::Error(failure(&prefix, e)));
                }
            };
            self.console
                .child_started(number, total, &name, running.pid());
            let finished = running.wait(self.cancel).await;
            self.ex.steps[i].child(&finished);
            let err = match finished.into_result() {
                Ok(_) => continue,
                Err(e) => e,
            };
            let interrupted = self.ex.steps[i].status == StepStatus::Interrupted;
            let mongod_died = spare.exited();
            if let Some(o) = &mongod_died {
                let d = self.ex.steps[i].detail.take().unwrap_or_default();
                self.ex.steps[i].detail = Some(format!("{d}; the spare mongod {o}"));
            }
            self.end(i);
            if interrupted {
                return Err(Stop::Interrupted);
            }
            let prefix = self.prefix(i);
            let mut f = failure(&prefix, err);
            if let Some(o) = mongod_died {
                f = Failure::new(format!(
                    "{}\n  meanwhile the spare mongod itself {o}; its log: `{}`",
                    f.message(),
                    spare.log_path().display()
                ))
                .with_hint(f.hint().unwrap_or_default().to_string());
            }
            return Err(Stop::Error(f));
        }
        Ok(())
    }

    async fn verify_step(&mut self, spare: &mut SpareMongod) -> Result<(), Stop> {
        let i = self.index(StepKind::Verify);
        self.begin(i)?;
        let argv = steps::verify_argv(&self.plan.restore, &self.values);
        self.ex.steps[i].commands = vec![format!("{} (run inside this pitr)", shell_line(&argv))];
        let t = Instant::now();
        let uri = spare.uri();
        let fut = verify::verify(
            &uri,
            self.plan,
            Some(&self.plan.restore.plan_file),
            self.s.connect_timeout,
            // The step's own line on the console says it runs.
            &crate::plan::Quiet,
        );
        let limited = async {
            match self.s.step_timeout {
                Some(limit) => tokio::time::timeout(limit, fut)
                    .await
                    .unwrap_or(Err(VerifyError::TimedOut(limit))),
                None => fut.await,
            }
        };
        let r = tokio::select! {
            r = limited => r,
            _ = self.cancel.cancelled() => Err(VerifyError::Cancelled),
        };
        self.ex.steps[i].duration_ms = Some(t.elapsed().as_millis() as u64);
        match r {
            Ok(report) => {
                let passed = report.passed;
                let rec = &mut self.ex.steps[i];
                rec.detail = Some(format!(
                    "{} of {} passed",
                    report.checked - report.failed,
                    crate::table::counted(report.checked as u64, "check", "checks")
                ));
                rec.status = if passed {
                    StepStatus::Ok
                } else {
                    StepStatus::Failed
                };
                self.ex.verify = Some(report);
                self.end(i);
                if passed {
                    Ok(())
                } else {
                    self.skip(
                        StepKind::Dump,
                        "the verification failed: nothing is handed over",
                    );
                    Err(Stop::VerifyFailed)
                }
            }
            Err(VerifyError::Cancelled) => {
                self.ex.steps[i].status = StepStatus::Interrupted;
                self.end(i);
                Err(Stop::Interrupted)
            }
            Err(e) => {
                self.ex.steps[i].status = StepStatus::Failed;
                self.ex.steps[i].detail = Some(first_line(&e.to_string()));
                self.end(i);
                let prefix = self.prefix(i);
                Err(Stop::Error(failure(&prefix, e)))
            }
        }
    }

    async fn dump_step(&mut self, spare: &mut SpareMongod) -> Result<(), Stop> {
        let Some(out) = self.s.out.clone() else {
            self.skip(StepKind::Dump, "no --out given");
            return Ok(());
        };
        let i = self.index(StepKind::Dump);
        self.begin(i)?;
        let prefix = self.prefix(i);
        let fail = |this: &mut Self, f: Failure| {
            this.ex.steps[i].status = StepStatus::Failed;
            this.end(i);
            Err(Stop::Error(f))
        };
        let parent = crate::storage::parent_dir(&out).to_path_buf();
        if let Err(e) = fs::create_dir_all(&parent) {
            return fail(
                self,
                failure(&prefix, e).with_hint("check that --out's parent is writable"),
            );
        }
        // Beside OUT, so the final rename stays on one filesystem.
        let tmp = match tempfile::Builder::new()
            .prefix(".pitr-dump-")
            .tempdir_in(&parent)
        {
            Ok(t) => t,
            Err(e) => {
                return fail(
                    self,
                    failure(&prefix, e).with_hint("check that --out's parent is writable"),
                )
            }
        };
        self.values.dump_dir = tmp.path().display().to_string();
        let argvs = steps::dump_argvs(&self.plan.restore, &self.values);
        self.run_children(i, argvs, spare).await?;
        // Complete: into place. OUT was checked to be new or empty before anything ran.
        if out.is_dir() {
            if let Err(e) = fs::remove_dir(&out) {
                return fail(
                    self,
                    failure(&prefix, e).with_hint(format!(
                        "`{}` is no longer empty; the dump was not moved there",
                        out.display()
                    )),
                );
            }
        }
        let done = tmp.keep();
        if let Err(e) = fs::rename(&done, &out) {
            let _ = fs::remove_dir_all(&done);
            return fail(self, failure(&prefix, e));
        }
        let (files, bytes) = tree_size(&out);
        self.ex.dump = Some(DumpRecord {
            dir: out.display().to_string(),
            namespaces: self.plan.restore.dump_namespaces.clone(),
            files,
            bytes,
        });
        let rec = &mut self.ex.steps[i];
        rec.status = StepStatus::Ok;
        rec.detail = Some(format!(
            "{}, {} in {} (renamed into place when complete)",
            crate::table::counted(files, "file", "files"),
            crate::table::counted(bytes, "byte", "bytes"),
            out.display()
        ));
        self.end(i);
        Ok(())
    }

    async fn shutdown(&mut self, mut spare: SpareMongod) {
        let i = self.index(StepKind::Shutdown);
        let died = spare.exited();
        if let Some(o) = &died {
            self.ex.warnings.push(format!(
                "the spare mongod exited on its own during the replay: it {o} (see `{}`)",
                spare.log_path().display()
            ));
        }
        if self.s.keep && !self.cancel.is_cancelled() && died.is_none() {
            let total = self.total();
            let rec = &mut self.ex.steps[i];
            rec.started_utc = Some(now());
            self.console.step_started(rec.number, total, &rec.title);
            let conn = spare.detach();
            rec.status = StepStatus::Kept;
            rec.duration_ms = Some(0);
            rec.detail = Some(format!(
                "--keep: left running (pid {}); connect: mongosh 'mongodb://127.0.0.1:{}/'; stop: kill {}",
                conn.pid, conn.port, conn.pid
            ));
            if let Some(sp) = &mut self.ex.spare {
                sp.kept = true;
            }
            self.ex.kept = Some(conn);
            self.end(i);
            return;
        }
        let total = self.total();
        let pid = spare.pid();
        let dir = spare.dir().to_path_buf();
        {
            let rec = &mut self.ex.steps[i];
            rec.started_utc = Some(now());
            rec.commands = vec![format!("kill -TERM -- -{pid}   # what `mongod --dbpath ... --shutdown` does; SIGKILL after {}", seconds(self.s.grace))];
            self.console.step_started(rec.number, total, &rec.title);
        }
        let t = Instant::now();
        let r = spare.shutdown(self.cancel).await;
        let rec = &mut self.ex.steps[i];
        rec.duration_ms = Some(t.elapsed().as_millis() as u64);
        match r {
            Ok(stopped) => {
                let f = &stopped.finished;
                rec.pids = vec![f.pid];
                rec.exit_code = f.outcome.shell_code();
                let how = if died.is_some() {
                    format!("had already exited: it {}", f.outcome)
                } else if stopped.clean() {
                    match f.outcome.shell_code() {
                        Some(0) => "stopped cleanly on SIGTERM (exit 0)".to_string(),
                        _ => format!("stopped by SIGTERM (it {})", f.outcome),
                    }
                } else if f.killed && self.cancel.is_escalated() {
                    "killed with SIGKILL (second Ctrl-C)".to_string()
                } else if f.killed {
                    let w = format!(
                        "the spare mongod did not stop within the {} grace period after SIGTERM: killed with SIGKILL",
                        seconds(self.s.grace)
                    );
                    self.ex.warnings.push(w.clone());
                    w
                } else {
                    format!("stopped: it {}", f.outcome)
                };
                rec.status = StepStatus::Ok;
                rec.detail = Some(format!("{how}; removed {}", dir.display()));
                if let Some(sp) = &mut self.ex.spare {
                    sp.stopped = Some(how);
                }
                self.end(i);
            }
            Err(e) => {
                rec.status = StepStatus::Failed;
                rec.detail = Some(first_line(&e.to_string()));
                self.end(i);
                let prefix = self.prefix(i);
                if self.ex.error.is_none() {
                    self.ex.error = Some(failure(&prefix, e));
                }
            }
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// Files and bytes under `dir`.
fn tree_size(dir: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => {
                    files += 1;
                    bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
                }
                Err(_) => {}
            }
        }
    }
    (files, bytes)
}

/// The restore step's standard input for a streamed archive backup
/// ([`steps::StreamSpec`]): the archive re-encoded as it is read, the slice appended
/// for one run. Its errors end the feed, which fails the step
/// ([`crate::exec::child::Outcome::InputFailed`]).
fn stdin_feed(st: steps::StreamSpec) -> crate::exec::child::StdinFeed {
    Box::new(move |w| {
        let slice = st.slice.as_deref().map(Path::new);
        crate::plan::onerun::stream_archive(&st.backup, slice, w, "mongorestore's standard input")
            .map_err(|e| std::io::Error::other(format!("streaming the archive {}: {e}", st.backup)))
    })
}
