//! The replay report: `report.json` (machine, format `pitr-replay-report/1`) and
//! `report.md` (for the post-mortem, see [`super::summary`]), both in the work dir.
//!
//! JSON keys: `format`, `pitr_version`, `result` (`passed`, `incident_replayed`,
//! `verify_failed`, `error`, `interrupted`), `exit_code`, `accept_incidents`,
//! `stake` (the plan's: incidents replayed, writes left out), `standin` (a stand-in program or server
//! took part: NOT a real MongoDB result), `standin_warning`, `started_utc`,
//! `finished_utc`, `duration_ms`, `workdir`, `logs_dir`, `plan_file`, `report_md`,
//! `restore_point` (`until`, `limit`, `limit_utc`, `exclusive`, `explanation`,
//! `finding`, `entry_at_limit`), `backup` (`dir`, `end_ts`, `end_utc`, `end_source`,
//! `documents`), `oplog` (the plan's), `coverage`, `lint`, `slice`, `binaries`
//! (`tool`, `path`, `origin`, `version`, `version_line`, `is_standin`), `steps`
//! (see [`StepRecord`]), `spare`, `kept` (how to reach a `--keep` spare), `verify`
//! (`pitr-verify/1`), `dump`, `warnings`, `error` (`message`, `hint`).

use std::path::Path;

use serde::Serialize;

use crate::exec::binaries::ToolBinary;
use crate::exec::spare::SpareConnection;
use crate::oplog::Ts;
use crate::plan::scan::EntryRef;
use crate::plan::until::FindingRef;
use crate::plan::{Coverage, LintItem, OplogRange, RestorePlan, SliceSection};
use crate::verify::VerifyReport;

use super::error::ReplayError;
use super::record::StepRecord;
use super::run::{DumpRecord, Execution, SpareRecord};
use super::tools::{Tools, STANDIN_BANNER};
use super::workdir::WorkDir;

/// The `format` of `report.json`.
pub const FORMAT: &str = "pitr-replay-report/1";

/// How the replay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultKind {
    /// `--engine mongod`: restored, replayed and verified against the spare.
    Passed,
    /// The embedded engine: applied and hashed in-process; no server checked it.
    Restored,
    /// Restored, but the replayed range holds a critical or high incident and
    /// `--accept-incidents` was not given: the restore holds its damage (exit 1).
    IncidentReplayed,
    VerifyFailed,
    Error,
    Interrupted,
}

impl ResultKind {
    pub fn headline(self) -> &'static str {
        match self {
            ResultKind::Passed => "PASSED: restored, replayed and verified",
            ResultKind::Restored => {
                "RESTORED AND HASHED: applied in-process and hashed (no server verified it)"
            }
            ResultKind::IncidentReplayed => {
                "INCIDENT REPLAYED: the restore holds the damage of the incident(s) under `At stake`; \
                 choose an earlier --until, or pass --accept-incidents if this is what you want"
            }
            ResultKind::VerifyFailed => {
                "VERIFY FAILED: restored and replayed, but the counts do not match the plan"
            }
            ResultKind::Error => "ERROR: a step failed",
            ResultKind::Interrupted => "INTERRUPTED",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RestorePoint {
    pub until: String,
    pub limit: Ts,
    pub limit_utc: String,
    pub exclusive: bool,
    pub explanation: String,
    pub finding: Option<FindingRef>,
    pub entry_at_limit: Option<EntryRef>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BackupBrief {
    pub dir: String,
    pub end_ts: Ts,
    pub end_utc: String,
    pub end_source: String,
    pub documents: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ErrorRecord {
    pub message: String,
    pub hint: Option<String>,
}

/// See the module documentation.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    pub format: &'static str,
    /// The engine that restored: `mongod` here (`embedded`: see `replay::embedded`).
    pub engine: &'static str,
    pub pitr_version: &'static str,
    pub result: ResultKind,
    pub exit_code: u8,
    /// `--accept-incidents` was given.
    pub accept_incidents: bool,
    /// What the restore replays and leaves out (the plan's `stake`).
    pub stake: crate::plan::stake::Stake,
    pub standin: bool,
    pub standin_warning: Option<String>,
    pub started_utc: String,
    pub finished_utc: String,
    pub duration_ms: u64,
    pub workdir: String,
    pub logs_dir: String,
    pub plan_file: String,
    pub report_md: String,
    pub restore_point: RestorePoint,
    pub backup: BackupBrief,
    /// What the verification's expected counts and dbHash were predicted from.
    pub prediction: String,
    pub oplog: OplogRange,
    pub coverage: Coverage,
    pub lint: Vec<LintItem>,
    pub slice: SliceSection,
    pub binaries: Vec<ToolBinary>,
    pub steps: Vec<StepRecord>,
    pub spare: Option<SpareRecord>,
    pub kept: Option<SpareConnection>,
    pub verify: Option<VerifyReport>,
    pub dump: Option<DumpRecord>,
    pub warnings: Vec<String>,
    pub error: Option<ErrorRecord>,
}

/// What the verification compares with: the backup rolled forward by the embedded
/// engine; for a snapshot backup (issue 23) the backup is the mongodump of the
/// recovered copy, the only logical view of data files short of reading them.
fn prediction(plan: &RestorePlan) -> String {
    if plan.restore.backup_in_spare {
        format!(
            "a mongodump of the recovered snapshot backup (its data at {}, {}) rolled forward to the limit by the \
             embedded engine",
            plan.backup.end_ts, plan.backup.dir
        )
    } else {
        "the backup rolled forward to the limit by the embedded engine".into()
    }
}

/// When the replay ran.
pub struct Timing {
    pub started_utc: String,
    pub duration_ms: u64,
}

impl ReplayReport {
    /// The report of a finished execution. `interrupted_code`: pitr's exit code
    /// when a signal stopped it (130 for Ctrl-C).
    pub fn build(
        plan: &RestorePlan,
        work: &WorkDir,
        tools: &Tools,
        ex: &Execution,
        timing: Timing,
        interrupted_code: Option<u8>,
        accept_incidents: bool,
    ) -> ReplayReport {
        let verify_failed = ex.verify.as_ref().is_some_and(|v| !v.passed);
        let (result, exit_code) = match interrupted_code {
            Some(code) => (ResultKind::Interrupted, code),
            None if ex.error.is_some() => (ResultKind::Error, 2),
            None if verify_failed => (ResultKind::VerifyFailed, 1),
            None if plan.stake.has_incidents() && !accept_incidents => {
                (ResultKind::IncidentReplayed, 1)
            }
            None => (ResultKind::Passed, 0),
        };
        let mut who: Vec<&str> = tools.standins();
        if ex.verify.as_ref().is_some_and(|v| v.server.standin) && !who.contains(&"mongod") {
            who.push("mongod");
        }
        let standin = !who.is_empty();
        let u = &plan.until;
        ReplayReport {
            format: FORMAT,
            engine: "mongod",
            pitr_version: env!("CARGO_PKG_VERSION"),
            result,
            exit_code,
            accept_incidents,
            stake: plan.stake.clone(),
            standin,
            standin_warning: standin.then(|| {
                format!(
                    "{STANDIN_BANNER} ({} {} pitr's test stand-in{})",
                    who.join(", "),
                    if who.len() == 1 { "is" } else { "are" },
                    if who.len() == 1 { "" } else { "s" }
                )
            }),
            started_utc: timing.started_utc,
            finished_utc: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            duration_ms: timing.duration_ms,
            workdir: work.root.display().to_string(),
            logs_dir: work.logs().display().to_string(),
            plan_file: plan.restore.plan_file.clone(),
            report_md: work.report_md().display().to_string(),
            restore_point: RestorePoint {
                until: u.input.clone(),
                limit: u.limit,
                limit_utc: u.limit_utc.clone(),
                exclusive: u.exclusive,
                explanation: u.explanation.clone(),
                finding: u.finding.clone(),
                entry_at_limit: u.entry_at_limit.clone(),
            },
            backup: BackupBrief {
                dir: plan.backup.dir.clone(),
                end_ts: plan.backup.end_ts,
                end_utc: plan.backup.end_utc.clone(),
                end_source: plan.backup.end_source.clone(),
                documents: plan.backup.documents,
            },
            prediction: prediction(plan),
            oplog: plan.oplog.clone(),
            coverage: plan.coverage.clone(),
            lint: plan.lint.clone(),
            slice: plan.slice.clone(),
            binaries: tools.all().into_iter().cloned().collect(),
            steps: ex.steps.clone(),
            spare: ex.spare.clone(),
            kept: ex.kept.clone(),
            verify: ex.verify.clone(),
            dump: ex.dump.clone(),
            warnings: ex.warnings.clone(),
            error: ex.error.as_ref().map(|f| ErrorRecord {
                message: f.message().to_string(),
                hint: f.hint().map(str::to_string),
            }),
        }
    }

    /// Writes `report.json` and `report.md` into the work dir.
    pub fn write(&self, work: &WorkDir) -> Result<(), ReplayError> {
        let mut json = serde_json::to_string_pretty(self).map_err(|e| ReplayError::Report {
            path: work.report_json(),
            source: e.into(),
        })?;
        json.push('\n');
        write_file(&work.report_json(), &json)?;
        write_file(&work.report_md(), &super::summary::markdown(self))
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), ReplayError> {
    std::fs::write(path, text).map_err(|source| ReplayError::Report {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Failure;
    use crate::exec::binaries::{Origin, Tool};
    use crate::plan::{self, PlanRequest, Quiet, UntilSpec};
    use crate::replay::record::{StepKind, StepRecord, StepStatus};

    fn binary(tool: Tool, standin: bool) -> ToolBinary {
        ToolBinary {
            tool,
            path: format!("/opt/bin/{}", tool.name()).into(),
            origin: Origin::Flag,
            version: Some("7.0.14".into()),
            version_line: "db version v7.0.14".into(),
            is_standin: standin,
        }
    }

    #[test]
    fn result_exit_code_banner_and_markdown() {
        let tmp = tempfile::tempdir().unwrap();
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/incident");
        let work = WorkDir::create(Some(&tmp.path().join("w")), tmp.path()).unwrap();
        let plan = plan::build(
            &PlanRequest {
                out: Some(work.plan_dir()),
                id_cap: 1_000_000,
                sort_memory: 1 << 20,
                ..PlanRequest::new(
                    fixture.join("backup"),
                    fixture.join("oplog.bson").display().to_string(),
                    UntilSpec::Auto,
                    tmp.path().to_path_buf(),
                )
            },
            &Quiet,
        )
        .unwrap();
        let tools = Tools {
            mongod: binary(Tool::Mongod, true),
            mongorestore: binary(Tool::Mongorestore, false),
            mongodump: None,
        };
        let mut step = StepRecord::new(2, StepKind::RestoreBackup, "Restore the backup");
        step.status = StepStatus::Failed;
        step.exit_code = Some(1);
        step.commands = vec!["/opt/bin/mongorestore --host 127.0.0.1 --port 1 | x".into()];
        step.stderr_tail = vec!["Failed: boom".into()];
        let ex = Execution {
            steps: vec![step],
            spare: None,
            kept: None,
            verify: None,
            dump: None,
            error: Some(Failure::new("step 2 (Restore the backup) failed: boom").with_hint("look")),
            interrupted: false,
            warnings: vec!["careful".into()],
        };
        let timing = || Timing {
            started_utc: "2026-11-22T00:00:00.000Z".into(),
            duration_ms: 1500,
        };
        let r = ReplayReport::build(&plan, &work, &tools, &ex, timing(), None, false);
        assert_eq!((r.result, r.exit_code), (ResultKind::Error, 2));
        assert_eq!(
            r.standin_warning.as_deref(),
            Some("STAND-IN: not a real MongoDB result (mongod is pitr's test stand-in)")
        );
        assert_eq!(r.restore_point.limit.to_string(), "1795223165:1");
        let md = super::super::summary::markdown(&r);
        for needle in [
            "> **STAND-IN: not a real MongoDB result",
            "**Result: ERROR: a step failed (exit 2)**",
            "gave the limit `1795223165:1`",
            "exclusive: entries with ts < 1795223165:1 applied",
            "| 2. | Restore the backup | FAILED | - | 1 |",
            "mongorestore --host 127.0.0.1 --port 1 | x",
            "Failed: boom",
            "- warning: careful",
            "- hint: look",
            "| mongod | 7.0.14 | `/opt/bin/mongod` | --mongodb-bin | **YES",
            "| mongorestore | 7.0.14 | `/opt/bin/mongorestore` | --mongodb-bin | no |",
        ] {
            assert!(md.contains(needle), "{needle}\n{md}");
        }
        let text = super::super::summary::text(&r);
        assert!(text.starts_with("*** STAND-IN"), "{text}");
        assert!(
            text.contains("Result    ERROR: a step failed (exit 2)"),
            "{text}"
        );
        let r = ReplayReport::build(&plan, &work, &tools, &ex, timing(), Some(130), false);
        assert_eq!((r.result, r.exit_code), (ResultKind::Interrupted, 130));
        r.write(&work).unwrap();
        let back: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(work.report_json()).unwrap()).unwrap();
        assert_eq!(back["format"], FORMAT);
        assert_eq!(back["result"], "interrupted");
        assert_eq!(back["steps"][0]["kind"], "restore_backup");
        assert!(work.report_md().is_file());
    }
}
