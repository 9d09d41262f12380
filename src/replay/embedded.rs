//! `pitr replay --engine embedded`: the same plan as `pitr plan`, built with whole
//! documents ([`crate::engine::replica`]), then the state just before the limit
//! written to `--out` as a mongodump dump. No process is started, no network used.
//!
//! Also written: the documents the incident at the limit would destroy (a dropped
//! collection's documents, a delete burst's deleted documents) as a second dump
//! beside `--out` (`<out>-destroyed`), so they can be restored on their own; and the
//! work dir's `report.md`/`report.json` (`engine: "embedded"`, per namespace the
//! documents in the backup, at its end and at the limit, with the `dbHash` the
//! engine computed).
//!
//! Temporary storage (the on-disk document store past `--memory`) lives in the work
//! dir and is removed at the end, also on error and on Ctrl-C.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::replica::cold;
use crate::engine::replica::dump::{self, DumpFormat, Dumped};
use crate::engine::replica::{
    interrupt, CollInfo, Content, Meter, Replica, ReplicaError, ReplicaOptions,
};
use crate::engine::IdKey;
use crate::error::Failure;
use crate::oplog::{self, Op, ReadOptions, Ts};
use crate::plan::stake::Stake;
use crate::plan::{self, ContentOptions, PlanRequest, Progress, RestorePlan, Unit};

use super::describe::{self, Item, Section, Table};
use super::handover::{self, DumpForm, HandoverCommand};
use super::report::{BackupBrief, ErrorRecord, RestorePoint, ResultKind};
use super::WorkDir;
use crate::storage::Location;

/// What to run.
pub struct EmbeddedRun<'a> {
    pub req: PlanRequest,
    pub work: &'a WorkDir,
    pub out: PathBuf,
    pub format: DumpFormat,
    /// Memory for documents, and where that figure came from.
    pub memory: crate::memory::Budget,
    /// The restore may replay critical or high incidents without failing
    /// (`--accept-incidents`).
    pub accept_incidents: bool,
    /// `--out` is this URL (and `out` its [`Location::display_path`]): the dump is
    /// streamed there as it is written, readable once complete
    /// ([`crate::engine::replica::dump`]), with no copy on local disk.
    pub upload: Option<Location>,
    /// The process ends after this run (the CLI): the replica's memory is left to
    /// the operating system instead of being freed document by document, which
    /// took about 1 s for the 2.3 million documents of the 1 GiB bench. Only when
    /// the documents are in memory (an on-disk store is closed and removed).
    pub process_exits_after: bool,
}

/// Per namespace, as the report shows it.
#[derive(Clone, Debug, Serialize)]
pub struct NsRow {
    pub ns: String,
    pub backup_documents: Option<u64>,
    pub backup_end_documents: Option<u64>,
    pub documents: u64,
    pub exists: bool,
    pub md5: Option<String>,
    /// Why there is no `md5` (the engine could not predict the server's order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub md5_not_predicted: Option<String>,
}

impl NsRow {
    /// The row as the summary and report.md show it: namespace, documents in the
    /// backup, at the backup's end, at the limit (`absent` when it does not exist),
    /// dbHash; `-` where there is no value.
    fn cells(&self) -> [String; 5] {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
        [
            self.ns.clone(),
            opt(self.backup_documents),
            opt(self.backup_end_documents),
            if self.exists {
                self.documents.to_string()
            } else {
                "absent".into()
            },
            self.md5
                .clone()
                .or_else(|| self.md5_not_predicted.clone())
                .unwrap_or_else(|| "-".into()),
        ]
    }
}

/// What the incident at the limit would destroy.
#[derive(Clone, Debug, Serialize)]
pub struct Destroyed {
    pub kind: String,
    pub ns: String,
    pub ts: Ts,
    /// Documents the incident removes from the state at the limit.
    pub documents: u64,
    /// `numRecords` the drop recorded (a cross-check), when it did.
    pub num_records: Option<i64>,
    /// Where they were written (a mongodump directory), when any.
    pub out: Option<String>,
}

/// How the engine ran.
#[derive(Clone, Debug, Serialize)]
pub struct EngineStats {
    pub entries_applied: u64,
    /// Backup-oplog entries whose document was already in a later state.
    pub tolerated_idempotent: u64,
    /// Commands that found nothing to act on (an "acceptable" error on the server).
    pub tolerated_acceptable: u64,
    /// Indexes built on time-series buckets that `listIndexes` on the time-series
    /// collection does not show, so neither mongodump nor the engine dumps them.
    pub unlisted_timeseries_indexes: u64,
    pub memory_budget: usize,
    /// Where the budget came from: `flag` (--memory), `available` (half of the
    /// memory available at start, see [`crate::memory`]), `unknown` (the fallback).
    pub memory_budget_source: &'static str,
    /// The budget as the summary explains it.
    pub memory_budget_why: String,
    /// Estimated peak of the documents held in memory.
    pub peak_memory_estimate: usize,
    /// Documents moved to the on-disk store.
    pub spilled_to_disk: bool,
    /// Writer threads the in-memory apply used (`PITR_APPLY_WRITERS`, default the
    /// number of cores; 1: sequential).
    pub writers: usize,
    /// Entries of `entries_applied` the writer threads applied (the others, such as
    /// commands, transactions and anything past the budget, were applied alone).
    pub entries_on_writers: u64,
    /// Writes (backup documents and CRUD entries) deferred to the sort-merge store
    /// past the budget (`engine::replica::sorted`): sorted by `_id` and merged with
    /// the documents, not applied one at a time.
    pub entries_deferred: u64,
    /// Collections no entry touched, left in the backup's data files until the dump
    /// copied them (`engine::replica::cold`): never in memory, never in the
    /// on-disk store. And the bytes of their documents.
    pub collections_from_backup_files: usize,
    pub bytes_from_backup_files: u64,
    pub seconds: f64,
}

/// `report.json` of an embedded replay (`pitr-replay-report/1`, `engine: "embedded"`).
/// `result`: `restored` (applied and hashed: nothing was verified against a
/// server), `incident_replayed` (restored, but the range holds a critical or high
/// incident and `--accept-incidents` was not given: exit 1), `error`, `interrupted`.
/// `stake`: what the restore replays and leaves out (the plan's); `handover`: the
/// ready-to-paste mongorestore commands.
#[derive(Clone, Debug, Serialize)]
pub struct EmbeddedReport {
    pub format: &'static str,
    pub engine: &'static str,
    pub pitr_version: &'static str,
    pub result: ResultKind,
    pub exit_code: u8,
    pub accept_incidents: bool,
    pub stake: Stake,
    pub handover: Vec<HandoverCommand>,
    pub workdir: String,
    pub plan_file: String,
    pub report_md: String,
    pub restore_point: RestorePoint,
    pub backup: BackupBrief,
    /// The oplog's entries applied after the backup (the plan's); `kept` says
    /// whether `WORKDIR/plan/oplog.bson` holds them (`--keep-slice`).
    pub slice: plan::SliceSection,
    pub lint: Vec<plan::LintItem>,
    pub out: Option<String>,
    pub out_format: String,
    pub dumped: Vec<Dumped>,
    pub namespaces: Vec<NsRow>,
    pub destroyed: Option<Destroyed>,
    pub engine_stats: Option<EngineStats>,
    pub error: Option<ErrorRecord>,
}

/// Runs the embedded engine; returns the report (also written to the work dir) or
/// the failure (the report then says why).
///
/// All or nothing: `--out` and `<out>-destroyed` are both written under temporary
/// names and renamed into place together at the very end, so an error or a
/// Ctrl-C (SIGINT, SIGTERM: every long loop checks, see
/// [`crate::engine::replica::interrupt`]) leaves neither, and a rerun with the same
/// `--out` works. A signal that arrives once both are in place changes nothing in
/// them: the run still exits 128+n, and says they are complete.
pub fn run(
    r: EmbeddedRun<'_>,
    progress: &dyn Progress,
) -> (Option<EmbeddedReport>, Result<(), Failure>) {
    interrupt::install();
    let started = std::time::Instant::now();
    // Refused before any work: pitr never overwrites a dump.
    let destroyed_out = sibling(&r.out, DESTROYED_SUFFIX);
    if let Err(e) =
        dump::check_new(&r.out, r.format).and_then(|()| dump::check_new(&destroyed_out, r.format))
    {
        return (None, Err(Failure::from(e)));
    }
    let spill = match tempfile::Builder::new()
        .prefix(".pitr-engine-")
        .tempdir_in(&r.work.root)
    {
        Ok(d) => d,
        Err(e) => return (None, Err(Failure::from(e))),
    };
    let mut req = r.req;
    let memory = r.memory.bytes as usize;
    let cold_copies = ColdStaging::beside(&r.out, r.format, !req.ns.is_empty());
    req.content = Some(ContentOptions {
        memory,
        spill_dir: spill.path().to_path_buf(),
        strict: true,
        // Hashed while the dump is written (below), on the other cores.
        defer_hashes: true,
        config_server: false,
        cold_copies: cold_copies.copy_ahead(),
    });
    let (mut plan, mut model) = match plan::build_with_model(&req, progress) {
        Ok(x) => x,
        Err(e) => return (None, Err(plan_failure(e, &req, &r.out))),
    };
    let filter = plan::filter::NsFilter::new(&req.ns).ok().flatten();
    let include = |ns: &str| filter.as_ref().is_none_or(|f| f.matches(ns));
    let server_version = plan
        .versions
        .as_ref()
        .map(|v| v.mongod.clone())
        .unwrap_or_else(|| "unknown".into());
    let mut report = report_of(&plan, r.work, &r.out, r.format);
    report.accept_incidents = r.accept_incidents;
    // With --ns, the table shows what --out holds.
    let ns_rows = |plan: &RestorePlan, replica: &Replica| -> Vec<NsRow> {
        rows(plan, replica)
            .into_iter()
            .filter(|n| include(&n.ns) || include(&view_name(&n.ns)))
            .collect()
    };
    report.namespaces = ns_rows(&plan, model.replica());
    // Whether `--out` (and `<out>-destroyed`) are in place.
    let mut committed = false;
    let timer = plan::build::PhaseTimer::start();
    let result = (|| -> Result<(), Failure> {
        model.flush().map_err(replica_failure)?;
        let items = dump::select(model.replica(), &|it| {
            include(&format!("{}.{}", it.db, it.coll))
        })
        .map_err(replica_failure)?;
        let state = hash_and_dump(
            &model,
            &mut plan,
            &items,
            (&r.out, r.format, &server_version),
            progress,
        )?;
        // The plan's expectations now carry the hashes.
        plan::build::rewrite_plan_json(&r.work.plan_dir(), &plan)?;
        report.namespaces = ns_rows(&plan, model.replica());
        timer.mark("hashed and dump written");
        let (lost, lost_dump) = destroyed(
            &Context {
                plan: &plan,
                req: &req,
                out: &r.out,
                format: r.format,
                spill: spill.path(),
                memory,
                server_version: &server_version,
                progress,
            },
            model.replica_mut(),
        )?;
        timer.mark("destroyed documents written");
        // The last moment a Ctrl-C leaves nothing behind; from here on the two
        // renames are all that is left.
        interrupt::check().map_err(replica_failure)?;
        report.dumped = state.commit().map_err(dump_failure)?;
        if let Some(d) = lost_dump {
            test_pause_between_commits();
            if let Err(e) = d.commit() {
                // Both or neither: take the state back out rather than leave half.
                remove_dump(&r.out);
                report.dumped.clear();
                return Err(dump_failure(e));
            }
        }
        report.destroyed = lost;
        committed = true;
        Ok(())
    })();
    timer.mark("outputs in place");
    release_replica(
        model,
        (r.memory, r.process_exits_after),
        started,
        &mut report,
    );
    drop(spill);
    drop(cold_copies);
    timer.mark("replica freed");
    let result = verdict(
        result,
        &mut report,
        &plan,
        (r.accept_incidents, r.format, filter.is_some()),
        committed,
    );
    if let Some(url) = &r.upload {
        report.handover = downloaded_first(url, r.format, std::mem::take(&mut report.handover));
    }
    if let Err(e) = write_report(&report, r.work) {
        eprintln!("warning: cannot write the report: {e}");
    }
    (Some(report), result)
}

/// The engine's statistics into the report, then the replica let go: freed, or left
/// to the operating system when the process ends next and the documents are in
/// memory (freeing 2.3 million documents one by one took about 1 s).
fn release_replica(
    model: plan::expect::Model,
    (budget, process_exits_after): (crate::memory::Budget, bool),
    started: std::time::Instant,
    report: &mut EmbeddedReport,
) {
    let mut replica = model.into_replica();
    // Before the copies' staging directory goes (a replica left to the exit would
    // keep its thread copying).
    replica.stop_cold_work();
    report.engine_stats = Some(EngineStats {
        entries_applied: replica.applied,
        tolerated_idempotent: replica.tolerated.idempotent,
        tolerated_acceptable: replica.tolerated.acceptable,
        unlisted_timeseries_indexes: replica.tolerated.unlisted_indexes,
        memory_budget: budget.bytes as usize,
        memory_budget_source: budget.source.as_str(),
        memory_budget_why: budget.to_string(),
        peak_memory_estimate: replica.store().peak_memory(),
        spilled_to_disk: replica.store().spilled(),
        writers: replica.store().partitions(),
        entries_on_writers: replica.on_writers,
        entries_deferred: replica.deferred_writes,
        collections_from_backup_files: replica.cold_collections(),
        bytes_from_backup_files: replica.cold_bytes(),
        seconds: started.elapsed().as_secs_f64(),
    });
    if process_exits_after && !replica.store().spilled() {
        std::mem::forget(replica);
    } else {
        drop(replica);
    }
}

/// The dump of the state at the limit, written while the other cores compute the
/// `dbHash` of every collection for the plan's expectations (both only read the
/// replica; the MD5s are most of the hashing time, and the dump's writes most of its
/// time, so on two cores they take about as long as the longer of the two). One
/// phase for both: its documents are those hashed plus those written.
fn hash_and_dump(
    model: &plan::expect::Model,
    plan: &mut RestorePlan,
    items: &[dump::Item],
    (out, format, server_version): (&Path, DumpFormat, &str),
    progress: &dyn Progress,
) -> Result<dump::Pending, Failure> {
    let replica = model.replica();
    let expected = plan.expected.as_deref_mut().unwrap_or_default();
    let hashed: u64 = expected.iter().map(|e| replica.count(&e.ns)).sum();
    let meter = Meter::new();
    let _phase = progress.phase(
        "hashing and writing the dump",
        Unit::Documents,
        Some(hashed + dump::documents(replica, items)),
        &meter,
    );
    let (state, hashes) = model.hash_alongside(expected, &meter, |replica| {
        dump::prepare_flushed(replica, out, format, items, server_version, &meter)
    });
    hashes.map_err(replica_failure)?;
    state.map_err(dump_failure)
}

/// The run's verdict in the report: interrupted once both outputs were in place
/// (they stay, and say so), an incident replayed without `--accept-incidents`
/// (exit 1), an error or an interruption; the handover commands when it restored.
fn verdict(
    result: Result<(), Failure>,
    report: &mut EmbeddedReport,
    plan: &RestorePlan,
    (accept_incidents, format, ns_filtered): (bool, DumpFormat, bool),
    committed: bool,
) -> Result<(), Failure> {
    let out_display = report.out.clone().unwrap_or_default();
    let result = match result {
        Ok(()) if interrupt::requested() => Err(Failure::new(format!(
            "interrupted by {} after the output was complete: `{}`{} {} complete and restorable",
            interrupt::signal_name(),
            out_display,
            report
                .destroyed
                .as_ref()
                .and_then(|d| d.out.as_ref())
                .map(|o| format!(" and `{o}`"))
                .unwrap_or_default(),
            if report.destroyed.as_ref().is_some_and(|d| d.out.is_some()) {
                "are"
            } else {
                "is"
            }
        ))
        .with_exit_code(interrupt::exit_code())),
        other => other,
    };
    if result.is_ok() {
        report.handover = handover_commands(plan, report, format, ns_filtered);
        if report.stake.has_incidents() && !accept_incidents {
            report.result = ResultKind::IncidentReplayed;
            report.exit_code = 1;
        }
    }
    if let Err(f) = &result {
        let was_interrupted = f.exit_code() >= 128;
        report.result = if was_interrupted {
            ResultKind::Interrupted
        } else {
            ResultKind::Error
        };
        report.exit_code = f.exit_code();
        if !committed {
            report.out = None;
        }
        report.error = Some(ErrorRecord {
            message: f.message().to_string(),
            hint: f.hint().map(str::to_string),
        });
    }
    result
}

/// A time-series collection's name for its buckets namespace (as `--ns` names it).
fn view_name(ns: &str) -> String {
    crate::forensics::namespaces::timeseries_view(ns).unwrap_or_else(|| ns.to_string())
}

/// The mongorestore commands for the dump: the incident's namespaces when the
/// restore point is one, else (with --ns) the namespaces the dump holds, else all.
fn handover_commands(
    plan: &RestorePlan,
    report: &EmbeddedReport,
    format: DumpFormat,
    ns_filtered: bool,
) -> Vec<HandoverCommand> {
    let Some(out) = &report.out else {
        return Vec::new();
    };
    let form = match format {
        DumpFormat::Directory { gzip } => DumpForm {
            archive: false,
            gzip,
        },
        DumpFormat::Archive { gzip } => DumpForm {
            archive: true,
            gzip,
        },
    };
    let affected: Vec<String> = match (&plan.until.finding, ns_filtered) {
        (Some(f), _) if f.oplog_limit == plan.until.limit => handover::affected(f),
        (_, true) => {
            let mut v: Vec<String> = report
                .namespaces
                .iter()
                .filter(|n| n.exists)
                .map(|n| view_name(&n.ns))
                .collect();
            v.dedup();
            v
        }
        _ => Vec::new(),
    };
    handover::commands(out, form, &affected)
}

/// A `--skip`ped drop whose collection the application re-created: the server
/// would stop at the `create`; the way that works is two restores, ready to paste.
fn recreated_after_skip(req: &PlanRequest, out: &Path, e: ReplicaError) -> Failure {
    let ReplicaError::CreateOverExisting { ts, ref ns, .. } = e else {
        return Failure::from(e);
    };
    let drop = req.skip.iter().map(|s| s.ts).filter(|s| *s < ts).max();
    let Some(drop) = drop else {
        return Failure::from(e);
    };
    let q = |s: &str| crate::plan::steps::shell_line(&[s.to_string()]);
    let backup = q(&req.backup.display().to_string());
    let oplog = q(&req.oplog);
    let name = out.display().to_string();
    let coll = ns.split_once('.').map_or(ns.as_str(), |(_, c)| c);
    let first = format!(
        "pitr replay --backup {backup} --oplog {oplog} --until {drop} --ns {} --out {}",
        q(ns),
        q(&format!("{name}-{coll}-before-drop"))
    );
    let mut second = format!(
        "pitr replay --backup {backup} --oplog {oplog} --until {} --accept-incidents --out {}",
        q(&req.until.to_string()),
        q(&name)
    );
    for s in req.skip.iter().filter(|s| s.ts != drop) {
        second.push_str(&format!(" --skip {}", s.ts));
    }
    let message = format!(
        "{e}: --skip {drop} left out the drop of `{ns}`, but the application re-created `{ns}` at {ts}"
    );
    Failure::new(message).with_hint(format!(
        "restore the dropped collection on its own to just before its drop, and the rest to the later point \
         (where `{ns}` is the re-created collection), then hand over the first under a new name:\n  {first}\n  {second}"
    ))
}

/// The handover commands for a dump in a bucket: download it first (mongorestore
/// reads local files only), then the same commands on the local copy.
fn downloaded_first(
    url: &Location,
    format: DumpFormat,
    cmds: Vec<HandoverCommand>,
) -> Vec<HandoverCommand> {
    if cmds.is_empty() {
        return cmds;
    }
    let name = url.local_name();
    let archive = matches!(format, DumpFormat::Archive { .. });
    let download = download_command(url, archive);
    let mut out = vec![HandoverCommand {
        what: "download the dump first (mongorestore reads local files only)".into(),
        command: download,
    }];
    let whole = url.to_string();
    out.extend(cmds.into_iter().map(|c| HandoverCommand {
        what: c.what,
        command: c.command.replace(&whole, &name),
    }));
    out
}

/// The command that downloads the dump at `url` (an `archive` file, or a directory
/// prefix) into the current directory under its own name: mongorestore reads
/// local files only.
pub fn download_command(url: &Location, archive: bool) -> String {
    let name = url.local_name();
    match (url, archive) {
        (
            Location::Object {
                scheme: crate::storage::Scheme::Gcs,
                ..
            },
            false,
        ) => {
            format!("gsutil -m cp -r {url} .")
        }
        (
            Location::Object {
                scheme: crate::storage::Scheme::Gcs,
                ..
            },
            true,
        ) => {
            format!("gsutil cp {url} {name}")
        }
        (
            Location::Object {
                scheme: crate::storage::Scheme::Azure,
                ..
            },
            _,
        ) => {
            format!("azcopy copy --recursive '<https URL of {url}>' .")
        }
        (_, false) => format!("aws s3 cp --recursive {url} {name}"),
        (_, true) => format!("aws s3 cp {url} {name}"),
    }
}

/// Beside `--out`: the documents the incident at the limit destroys.
pub const DESTROYED_SUFFIX: &str = "-destroyed";

fn interrupted() -> Failure {
    Failure::new(format!(
        "interrupted by {}: nothing was written to --out; temporary files were removed",
        interrupt::signal_name()
    ))
    .with_exit_code(interrupt::exit_code())
}

/// A replica failure, or the interrupt it carries.
fn replica_failure(e: ReplicaError) -> Failure {
    match e {
        ReplicaError::Interrupted => interrupted(),
        e => Failure::from(e),
    }
}

fn dump_failure(e: dump::DumpError) -> Failure {
    match e {
        dump::DumpError::Replica(e) => replica_failure(e),
        e => Failure::from(e),
    }
}

fn report_of(plan: &RestorePlan, work: &WorkDir, out: &Path, format: DumpFormat) -> EmbeddedReport {
    let u = &plan.until;
    EmbeddedReport {
        format: super::report::FORMAT,
        engine: "embedded",
        pitr_version: env!("CARGO_PKG_VERSION"),
        result: ResultKind::Restored,
        exit_code: 0,
        accept_incidents: false,
        stake: plan.stake.clone(),
        handover: Vec::new(),
        workdir: work.root.display().to_string(),
        plan_file: work.plan_dir().join("plan.json").display().to_string(),
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
        slice: plan.slice.clone(),
        lint: plan.lint.clone(),
        out: Some(out.display().to_string()),
        out_format: match format {
            DumpFormat::Directory { gzip: false } => "directory",
            DumpFormat::Directory { gzip: true } => "directory (gzip)",
            DumpFormat::Archive { gzip: false } => "archive",
            DumpFormat::Archive { gzip: true } => "archive (gzip)",
        }
        .into(),
        dumped: Vec::new(),
        namespaces: Vec::new(),
        destroyed: None,
        engine_stats: None,
        error: None,
    }
}

fn rows(plan: &RestorePlan, replica: &Replica) -> Vec<NsRow> {
    let Some(exp) = &plan.expected else {
        return replica
            .namespaces()
            .into_iter()
            .filter(|(ns, _)| plan::expect::is_checked_ns(ns))
            .map(|(ns, c)| NsRow {
                ns: ns.to_string(),
                backup_documents: c.backup_documents,
                backup_end_documents: None,
                documents: replica.count(ns),
                exists: true,
                md5: None,
                md5_not_predicted: None,
            })
            .collect();
    };
    exp.iter()
        .map(|e| NsRow {
            ns: e.ns.clone(),
            backup_documents: e.backup_documents,
            backup_end_documents: e.backup_end_documents,
            documents: e.documents,
            exists: e.exists,
            md5: e.md5.clone(),
            md5_not_predicted: e.md5_not_predicted.clone(),
        })
        .collect()
}

/// What [`destroyed`] needs of the run.
struct Context<'a> {
    plan: &'a RestorePlan,
    req: &'a PlanRequest,
    out: &'a Path,
    format: DumpFormat,
    spill: &'a Path,
    memory: usize,
    server_version: &'a str,
    progress: &'a dyn Progress,
}

/// Memory for a delete burst's documents before they move to disk: a slice of
/// `--memory` (the state's replica still holds up to `--memory`).
fn burst_budget(memory: usize) -> usize {
    (memory / 8).clamp(1 << 20, 32 << 20)
}

/// The documents the incident at the limit removes, written as their own dump
/// (not yet in place: see [`run`]). Memory stays within `--memory`: a dropped
/// collection's documents are written straight from the state's store, in `_id`
/// order, as the state itself is; a delete burst's (or wiping update's) documents,
/// as they stood at the limit, go through a replica of their own that moves them to
/// disk past a slice of the budget ([`burst_budget`]).
fn destroyed(
    cx: &Context<'_>,
    replica: &mut Replica,
) -> Result<(Option<Destroyed>, Option<dump::Pending>), Failure> {
    let u = &cx.plan.until;
    let limit = u.limit;
    // What the entry at the limit (or the finding starting there) removes.
    let (kind, ns, namespaces, num_records, last_ts): (
        String,
        String,
        Vec<String>,
        Option<i64>,
        Ts,
    ) = match (&u.finding, &u.entry_at_limit) {
        (Some(f), _) if f.oplog_limit == limit => {
            let list = match f.kind.as_str() {
                "dropDatabase" => f.collections.clone(),
                "drop" | "renameDropTarget" | "emptycapped" | "deleteBurst" | "wipingUpdate" => {
                    vec![f.ns.clone()]
                }
                _ => return Ok((None, None)),
            };
            (
                f.kind.clone(),
                f.ns.clone(),
                list,
                f.num_records,
                f.last_ts.unwrap_or(f.ts),
            )
        }
        (_, Some(e)) if e.ts == limit => match e.command.as_deref() {
            Some("drop") | Some("renameCollection") | Some("emptycapped") => {
                let t = e.target.clone().unwrap_or_default();
                (
                    e.command.clone().unwrap_or_default(),
                    t.clone(),
                    vec![t],
                    e.num_records,
                    e.ts,
                )
            }
            _ => return Ok((None, None)),
        },
        _ => return Ok((None, None)),
    };
    let data_ns = |r: &Replica, n: &str| -> String {
        // A time-series collection's documents live in its buckets.
        match r.get(n) {
            Some(_) => n.to_string(),
            None => {
                let (db, c) = n.split_once('.').unwrap_or((n, ""));
                format!("{db}.system.buckets.{c}")
            }
        }
    };
    let target = sibling(cx.out, DESTROYED_SUFFIX);
    let by_entry = matches!(kind.as_str(), "deleteBurst" | "wipingUpdate");
    let (total, pending) = if !by_entry {
        // Every document of the dropped namespaces, as the state holds them.
        let data: HashSet<String> = namespaces
            .iter()
            .map(|n| data_ns(replica, n))
            .filter(|n| replica.exists(n))
            .collect();
        let total: u64 = data.iter().map(|n| replica.count(n)).sum();
        let pending = if total > 0 {
            let items = dump::select(replica, &|it| match &it.data_ns {
                Some(d) => data.contains(d),
                // A dropped database's views are documents of its `system.views`.
                None => data.contains(&format!("{}.system.views", it.db)),
            })
            .map_err(replica_failure)?;
            Some(write_destroyed(cx, replica, &target, &items, total)?)
        } else {
            None
        };
        (total, pending)
    } else {
        let n = data_ns(replica, &ns);
        let mut lost = burst_documents(cx, replica, &n, limit, last_ts)?;
        let total = lost.count(&n);
        let pending = if total > 0 {
            let items = dump::select(&lost, &|_| true).map_err(replica_failure)?;
            Some(write_destroyed(cx, &mut lost, &target, &items, total)?)
        } else {
            None
        };
        (total, pending)
    };
    Ok((
        Some(Destroyed {
            kind,
            ns,
            ts: limit,
            documents: total,
            num_records,
            out: pending.as_ref().map(|p| p.out().display().to_string()),
        }),
        pending,
    ))
}

fn write_destroyed(
    cx: &Context<'_>,
    r: &mut Replica,
    target: &Path,
    items: &[dump::Item],
    total: u64,
) -> Result<dump::Pending, Failure> {
    let meter = Meter::new();
    let _phase = cx.progress.phase(
        "writing the destroyed documents",
        Unit::Documents,
        Some(total),
        &meter,
    );
    dump::prepare(r, target, cx.format, items, cx.server_version, &meter).map_err(dump_failure)
}

/// The documents a delete burst (or wiping update) from the limit to `last_ts`
/// removes from `n`, each as it stood at the limit, in a replica of their own.
fn burst_documents(
    cx: &Context<'_>,
    replica: &Replica,
    n: &str,
    limit: Ts,
    last_ts: Ts,
) -> Result<Replica, Failure> {
    let dir = cx.spill.join("destroyed");
    std::fs::create_dir_all(&dir).map_err(Failure::from)?;
    let mut lost = Replica::new(ReplicaOptions {
        content: Content::Documents,
        memory: burst_budget(cx.memory),
        spill_dir: Some(dir),
        update: Default::default(),
        writers: 1,
    });
    let Some(c) = replica.get(n) else {
        return Ok(lost);
    };
    let slot = c.slot;
    let info = c.clone();
    lost.seed_namespace(n, move |slot| CollInfo {
        slot,
        backup_documents: None,
        no_id: Vec::new(),
        ..info
    });
    let mut r = oplog::open(
        &cx.req.oplog,
        ReadOptions {
            allow_truncated: cx.req.allow_truncated,
        },
    )
    .map_err(Failure::from)?;
    let (counter, bytes) = r.progress();
    let mut tick = cx.progress.pass(
        "finding the documents the incident destroys",
        counter,
        bytes,
    );
    let sorted = cx.plan.oplog.sorted;
    let mut buf = Vec::new();
    let mut failed: Option<Failure> = None;
    while let Some(e) = r.next_entry().map_err(Failure::from)? {
        if e.index % 4096 == 0 {
            tick();
            interrupt::check().map_err(replica_failure)?;
        }
        if e.ts > last_ts && sorted {
            break;
        }
        if e.ts < limit || e.ts > last_ts {
            continue;
        }
        let mut visit = |leaf: &crate::oplog::Entry<'_>| -> Result<(), crate::oplog::EntryError> {
            if failed.is_some() || leaf.ns != n {
                return Ok(());
            }
            let key_doc = match leaf.op {
                Op::Delete => leaf.o,
                Op::Update => leaf.o2,
                _ => None,
            };
            let Some(k) = key_doc else { return Ok(()) };
            let key = match IdKey::from_document_id(k) {
                Ok(key) => key,
                Err(err) => {
                    failed = Some(Failure::new(format!(
                        "the {} entry {} on `{n}` names no usable `_id` ({err}), so the documents the incident destroys cannot all be found",
                        leaf.op.as_str(),
                        leaf.ts
                    )));
                    return Ok(());
                }
            };
            buf.clear();
            // Absent at the limit: inserted during the burst, then deleted.
            let found = replica.store().get(slot, &key, &mut buf);
            let stored = found.map_err(ReplicaError::from).and_then(|found| {
                if !found {
                    return Ok(());
                }
                let d = bson::RawDocument::from_bytes(&buf).map_err(|err| ReplicaError::Seed {
                    ns: n.to_string(),
                    index: 0,
                    why: err.to_string(),
                })?;
                lost.seed_document(n, d, 0)
            });
            if let Err(err) = stored {
                failed = Some(replica_failure(err));
            }
            Ok(())
        };
        e.for_each_leaf(&mut visit)
            .map_err(|err| Failure::new(err.to_string()))?;
        if let Some(f) = failed.take() {
            return Err(f);
        }
    }
    Ok(lost)
}

/// What a failed plan means for the run: Ctrl-C, a `--skip` whose collection is
/// created again later, or the plan's own error.
fn plan_failure(e: plan::PlanError, req: &PlanRequest, out: &Path) -> Failure {
    match e {
        plan::PlanError::Replica(ReplicaError::Interrupted) => interrupted(),
        plan::PlanError::Replica(e @ ReplicaError::CreateOverExisting { .. }) => {
            recreated_after_skip(req, out, e)
        }
        e => e.into(),
    }
}

/// The staging directory beside `--out` where collections left cold are copied
/// while the oplog is applied, so that a plain directory dump renames them into
/// place instead of writing them in its last phase. Removed when dropped, with
/// whatever copies were not renamed into the dump (a collection loaded after all,
/// an error, Ctrl-C).
struct ColdStaging(Option<(tempfile::TempDir, cold::CopyAhead)>);

impl ColdStaging {
    /// None for a compressed or archive dump, for one in a bucket (streamed there
    /// from the backup's file), with `--ns` (`ns_filtered`: the dump
    /// leaves most collections out, and a copy of one it leaves out would be
    /// written for nothing), or when `out`'s parent does not exist yet (the dump
    /// copies them). Whether copies are made, and from what size on, is
    /// [`cold::copy_ahead_from_bytes`]'s.
    fn beside(out: &Path, format: DumpFormat, ns_filtered: bool) -> ColdStaging {
        ColdStaging(Self::make(out, format, ns_filtered))
    }

    fn make(
        out: &Path,
        format: DumpFormat,
        ns_filtered: bool,
    ) -> Option<(tempfile::TempDir, cold::CopyAhead)> {
        if !matches!(format, DumpFormat::Directory { gzip: false })
            || ns_filtered
            || cold::disabled()
            || Location::in_bucket(out).is_some()
        {
            return None;
        }
        let from_bytes = cold::copy_ahead_from_bytes()?;
        let (parent, name) = dump::beside(out);
        let dir = tempfile::Builder::new()
            .prefix(&format!(".{name}.pitr-cold-"))
            .tempdir_in(parent)
            .ok()?;
        let copy = cold::CopyAhead {
            dir: dir.path().to_path_buf(),
            from_bytes,
        };
        Some((dir, copy))
    }

    fn copy_ahead(&self) -> Option<cold::CopyAhead> {
        self.0.as_ref().map(|(_, c)| c.clone())
    }
}

impl Drop for ColdStaging {
    /// The thread that copies into the directory was told to stop
    /// ([`Replica::stop_cold_work`], or the plan's end) and does at its next
    /// block: a copy it started just as the directory was emptied would keep it
    /// from going, so the removal is tried again for up to a second (nothing is
    /// left beside the dump).
    fn drop(&mut self) {
        let Some((dir, _)) = self.0.take() else {
            return;
        };
        let path = dir.keep();
        for _ in 0..40 {
            match std::fs::remove_dir_all(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                _ => return,
            }
        }
    }
}

/// For tests only: `PITR_TEST_PAUSE_BETWEEN_COMMITS=<duration>` waits this long
/// after the state is put in place and before the destroyed documents are, so that
/// a test can make the second fail (something put at `<out>-destroyed` meanwhile)
/// and see the state taken back out. Unset (always, outside tests), nothing.
fn test_pause_between_commits() {
    if let Some(d) = std::env::var("PITR_TEST_PAUSE_BETWEEN_COMMITS")
        .ok()
        .and_then(|v| humantime::parse_duration(v.trim()).ok())
    {
        std::thread::sleep(d);
    }
}

/// `<out><suffix>` beside `out` (for an archive file, before its extension).
/// Removes a dump put in place (best effort): a local file or directory, or
/// every object of one in a bucket.
fn remove_dump(out: &Path) {
    match Location::of_path(out) {
        Ok(Location::Local(p)) => {
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
        Ok(url) => {
            let s = crate::storage::global();
            let _ = s.delete(&url);
            for o in s.list(&url).unwrap_or_default() {
                let _ = s.delete(&o.location);
            }
        }
        Err(_) => {}
    }
}

fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let (_, name) = dump::beside(out);
    out.with_file_name(format!("{name}{suffix}"))
}

fn write_report(r: &EmbeddedReport, work: &WorkDir) -> std::io::Result<()> {
    let mut json = serde_json::to_string_pretty(r).map_err(std::io::Error::other)?;
    json.push('\n');
    std::fs::write(work.report_json(), json)?;
    std::fs::write(work.report_md(), markdown(r))
}

/// `report.md` of an embedded replay: the same sections as the summary, and the
/// details kept for the post-mortem.
pub fn markdown(r: &EmbeddedReport) -> String {
    describe::markdown("pitr replay (engine: embedded)", &sections(r))
}

/// The slice the engine applied, and where it is kept if it is (report only).
fn slice_section(s: &plan::SliceSection) -> Section {
    let entries = format!(
        "{} entries ({}) with ts > `{}` and < `{}`",
        s.entries,
        crate::size::human(s.bytes),
        s.from_exclusive,
        s.to_exclusive
    );
    let text = match s.kept {
        true => format!("{entries}, applied and kept in `{}`", s.oplog_file),
        false => format!(
            "{entries}, applied as they were read and not kept (`--keep-slice` writes them to `{}`, as `pitr plan` does)",
            s.oplog_file
        ),
    };
    Section::new("Slice", text).report_only()
}

/// The summary printed on stdout.
pub fn summary(r: &EmbeddedReport) -> String {
    describe::text(&sections(r))
}

/// The one description of an embedded replay ([`describe`]).
fn sections(r: &EmbeddedReport) -> Vec<Section> {
    let p = &r.restore_point;
    let mut v = vec![Section::new(
        "Engine",
        "embedded (in-process; no mongod, no mongorestore)",
    )];
    v.push(super::summary::restore_point_section(p, false));
    v.push(
        Section::new("Explained", p.explanation.clone())
            .titled("Why this limit")
            .report_only(),
    );
    v.push(
        Section::new(
            "Backup",
            format!(
                "`{}`, complete up to `{}` ({}); pitr applied it and the oplog itself, as the source's \
                 secondaries apply them: nothing was verified against a server",
                r.backup.dir, r.backup.end_ts, r.backup.end_utc
            ),
        )
        .report_only(),
    );
    v.push(slice_section(&r.slice));
    let mut stake = Section::new("At stake", "").report_only().item(Item::Pre(
        r.stake.text_lines(p.limit).into_iter().skip(1).collect(),
    ));
    if r.accept_incidents && r.stake.has_incidents() {
        stake = stake.line("the incidents above were replayed deliberately (`--accept-incidents`)");
    }
    v.push(stake);
    v.push(
        Section::new("", "")
            .titled("Namespaces")
            .item(Item::Table(namespace_table(r))),
    );
    if let Some(d) = &r.destroyed {
        v.push(Section::new("Incident", destroyed_sentence(d)));
    }
    if let (Some(o), None) = (&r.out, &r.error) {
        v.push(
            Section::new(
                "Output",
                format!(
                    "the state just before {} is in {o} ({})",
                    p.limit, r.out_format
                ),
            )
            .item(Item::Commands(
                r.handover
                    .iter()
                    .map(|c| (c.what.clone(), c.command.clone()))
                    .collect(),
            )),
        );
    }
    if r.stake.has_incidents() {
        let list: Vec<String> = r.stake.incidents.iter().map(|i| i.describe()).collect();
        v.push(Section::new(
            "Replayed",
            format!(
                "{} incident{}{}: {}",
                list.len(),
                plural(list.len() as u64, "", "s"),
                if r.accept_incidents {
                    " on purpose (--accept-incidents)"
                } else {
                    ", NOT undone"
                },
                list.join("; ")
            ),
        ));
    }
    let about_inputs: Vec<&plan::LintItem> =
        r.lint.iter().filter(|l| l.about_the_inputs()).collect();
    if !about_inputs.is_empty() {
        let mut w = Section::new("", "").titled("Warnings");
        for l in about_inputs {
            w = w.line(format!("warning: {}", l.message));
        }
        v.push(w);
    }
    if let Some(st) = &r.engine_stats {
        v.push(Section::new("Statistics", engine_stats(st)).report_only());
    }
    if !r.lint.is_empty() {
        let mut lint = Section::new(
            "Lint",
            "about a mongorestore replay; the embedded engine applies as a secondary",
        )
        .report_only();
        for l in &r.lint {
            lint = lint.line(format!("{:?} `{}`: {}", l.severity, l.code, l.message));
        }
        v.push(lint);
    }
    if let Some(e) = &r.error {
        let mut err = Section::new("Error", e.message.clone()).report_only();
        if let Some(h) = &e.hint {
            err = err.line(format!("hint: {h}"));
        }
        v.push(err);
    }
    v.push(Section::new("Report", r.report_md.clone()).summary_only());
    v.push(Section::new(
        "Result",
        match &r.error {
            Some(e) => format!(
                "{}: {} (exit {})",
                r.result.headline(),
                e.message,
                r.exit_code
            ),
            None => format!("{} (exit {})", r.result.headline(), r.exit_code),
        },
    ));
    v
}

/// Per namespace: documents in the backup, at its end, at the limit, and the dbHash.
fn namespace_table(r: &EmbeddedReport) -> Table {
    Table {
        header: [
            "NAMESPACE",
            "IN BACKUP",
            "AT BACKUP END",
            "AT LIMIT",
            "DBHASH",
        ]
        .map(String::from)
        .to_vec(),
        rows: r.namespaces.iter().map(|n| n.cells().to_vec()).collect(),
        right: vec![false, true, true, true, false],
    }
}

/// How the engine ran, in a sentence.
fn engine_stats(st: &EngineStats) -> String {
    format!(
        "{} operation{} applied {}{}; {} backup-oplog entr{} found their document already in a later state; \
         {} command{} found nothing to act on;{} memory budget {}, peak estimate {} MiB{}{}",
        st.entries_applied,
        plural(st.entries_applied, "", "s"),
        super::progress::took_time(std::time::Duration::from_secs_f64(st.seconds)),
        match st.writers {
            0 | 1 => String::new(),
            // Past the budget the queue fed the sort-merge store, not the threads.
            _ if st.entries_on_writers == 0 && st.entries_deferred > 0 => String::new(),
            w => format!(" ({} on {w} writer threads)", st.entries_on_writers),
        },
        st.tolerated_idempotent,
        plural(st.tolerated_idempotent, "y", "ies"),
        st.tolerated_acceptable,
        plural(st.tolerated_acceptable, "", "s"),
        match st.unlisted_timeseries_indexes {
            0 => String::new(),
            n => format!(
                " {n} index{} built on time-series buckets {} not dumped (listIndexes on \
                 the time-series collection does not show them, so mongodump would not dump them either);",
                plural(n, "", "es"),
                plural(n, "is", "are")
            ),
        },
        st.memory_budget_why,
        st.peak_memory_estimate >> 20,
        match (st.spilled_to_disk, st.entries_deferred) {
            (false, _) => String::new(),
            (true, 0) => ", documents moved to disk".to_string(),
            (true, n) => format!(
                ", documents moved to disk ({n} write{} sorted by _id and merged with them)",
                plural(n, "", "s")
            ),
        },
        match st.collections_from_backup_files {
            0 => String::new(),
            n => format!(
                "; {n} collection{} that no entry touches ({} MiB) copied from the backup's files, never held in memory",
                plural(n as u64, "", "s"),
                st.bytes_from_backup_files >> 20
            ),
        }
    )
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// `the drop of shop.orders at 1795223165:1 destroys 113 documents (numRecords
/// 113); they alone are in ...`
fn destroyed_sentence(d: &Destroyed) -> String {
    format!(
        "the {} of {} at {} destroys {} document{}{}{}",
        d.kind,
        d.ns,
        d.ts,
        d.documents,
        plural(d.documents, "", "s"),
        d.num_records
            .map(|n| format!(" (the entry recorded numRecords {n})"))
            .unwrap_or_default(),
        d.out
            .as_ref()
            .map(|o| format!("; they alone are in {o}"))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::download_command;
    use crate::storage::Location;

    /// The download lands where the handover's mongorestore looks: under the URL's
    /// last segment, or the bucket's name for a dump at a bucket's root (the
    /// command used to end with an empty name there).
    #[test]
    fn the_download_names_where_it_lands() {
        let cmd = |u: &str, archive| download_command(&Location::parse(u).unwrap(), archive);
        assert_eq!(
            cmd("s3://bkt/restored/2026-11-21", false),
            "aws s3 cp --recursive s3://bkt/restored/2026-11-21 2026-11-21"
        );
        assert_eq!(cmd("s3://bkt", false), "aws s3 cp --recursive s3://bkt bkt");
        assert_eq!(
            cmd("s3://bkt/r.archive", true),
            "aws s3 cp s3://bkt/r.archive r.archive"
        );
        assert_eq!(
            cmd("gs://bkt/r.archive", true),
            "gsutil cp gs://bkt/r.archive r.archive"
        );
    }
}
