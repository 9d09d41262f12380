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

use crate::engine::replica::dump::{self, DumpFormat, Dumped};
use crate::engine::replica::{interrupt, CollInfo, Content, Replica, ReplicaError, ReplicaOptions};
use crate::engine::IdKey;
use crate::error::Failure;
use crate::oplog::{self, Op, ReadOptions, Ts};
use crate::plan::stake::Stake;
use crate::plan::{self, ContentOptions, PlanRequest, Progress, RestorePlan};

use super::handover::{self, DumpForm, HandoverCommand};
use super::report::{BackupBrief, ErrorRecord, RestorePoint, ResultKind};
use super::WorkDir;

/// What to run.
pub struct EmbeddedRun<'a> {
    pub req: PlanRequest,
    pub work: &'a WorkDir,
    pub out: PathBuf,
    pub format: DumpFormat,
    pub memory: usize,
    /// The restore may replay critical or high incidents without failing
    /// (`--accept-incidents`).
    pub accept_incidents: bool,
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
    /// Estimated peak of the documents held in memory.
    pub peak_memory_estimate: usize,
    /// Documents moved to the on-disk store.
    pub spilled_to_disk: bool,
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
pub fn run(
    r: EmbeddedRun<'_>,
    progress: &dyn Progress,
) -> (Option<EmbeddedReport>, Result<(), Failure>) {
    interrupt::install();
    let started = std::time::Instant::now();
    let spill = match tempfile::Builder::new()
        .prefix(".pitr-engine-")
        .tempdir_in(&r.work.root)
    {
        Ok(d) => d,
        Err(e) => return (None, Err(Failure::from(e))),
    };
    let mut req = r.req;
    req.content = Some(ContentOptions {
        memory: r.memory,
        spill_dir: spill.path().to_path_buf(),
        strict: true,
    });
    let (plan, model) = match plan::build_with_model(&req, progress) {
        Ok(x) => x,
        Err(plan::PlanError::Replica(ReplicaError::Interrupted)) => {
            return (None, Err(interrupted()));
        }
        Err(plan::PlanError::Replica(e @ ReplicaError::CreateOverExisting { .. })) => {
            return (None, Err(recreated_after_skip(&req, &r.out, e)));
        }
        Err(e) => return (None, Err(e.into())),
    };
    let mut replica = model.into_replica();
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
    report.namespaces = rows(&plan, &replica)
        .into_iter()
        .filter(|n| include(&n.ns) || include(&view_name(&n.ns)))
        .collect();
    let result = (|| -> Result<(), Failure> {
        if plan.lint_errors() > 0 {
            // The lint's errors are about mongorestore and the spare mongod; the
            // embedded engine applies what a secondary applies and fails on its own.
            report.lint.retain(|_| true);
        }
        report.dumped = dump::write(&mut replica, &r.out, r.format, &include, &server_version)
            .map_err(|e| match e {
                dump::DumpError::Replica(ReplicaError::Interrupted) => interrupted(),
                e => Failure::from(e),
            })?;
        report.destroyed = destroyed(&plan, &req, &replica, &r.out, r.format, spill.path())?;
        Ok(())
    })();
    report.engine_stats = Some(EngineStats {
        entries_applied: replica.applied,
        tolerated_idempotent: replica.tolerated.idempotent,
        tolerated_acceptable: replica.tolerated.acceptable,
        unlisted_timeseries_indexes: replica.tolerated.unlisted_indexes,
        memory_budget: r.memory,
        peak_memory_estimate: replica.store().peak_memory(),
        spilled_to_disk: replica.store().spilled(),
        seconds: started.elapsed().as_secs_f64(),
    });
    drop(replica);
    drop(spill);
    if result.is_ok() {
        report.handover = handover_commands(&plan, &report, r.format, filter.is_some());
        if report.stake.has_incidents() && !r.accept_incidents {
            report.result = ResultKind::IncidentReplayed;
            report.exit_code = 1;
        }
    }
    if let Err(f) = &result {
        let interrupted = f.exit_code() >= 128;
        report.result = if interrupted {
            ResultKind::Interrupted
        } else {
            ResultKind::Error
        };
        report.exit_code = if interrupted { f.exit_code() } else { 2 };
        report.out = None;
        report.error = Some(ErrorRecord {
            message: f.message().to_string(),
            hint: f.hint().map(str::to_string),
        });
    }
    if let Err(e) = write_report(&report, r.work) {
        eprintln!("warning: cannot write the report: {e}");
    }
    (Some(report), result)
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

fn interrupted() -> Failure {
    Failure::new("interrupted: nothing was written to --out; temporary files were removed")
        .with_exit_code(interrupt::exit_code())
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

/// The documents the incident at the limit removes, written as their own dump.
fn destroyed(
    plan: &RestorePlan,
    req: &PlanRequest,
    replica: &Replica,
    out: &Path,
    format: DumpFormat,
    spill: &Path,
) -> Result<Option<Destroyed>, Failure> {
    let u = &plan.until;
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
                _ => return Ok(None),
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
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let data_ns = |n: &str| -> String {
        // A time-series collection's documents live in its buckets.
        match replica.get(n) {
            Some(_) => n.to_string(),
            None => {
                let (db, c) = n.split_once('.').unwrap_or((n, ""));
                format!("{db}.system.buckets.{c}")
            }
        }
    };
    let dir = spill.join("destroyed");
    std::fs::create_dir_all(&dir).map_err(Failure::from)?;
    let mut lost = Replica::new(ReplicaOptions {
        content: Content::Documents,
        memory: usize::MAX / 2,
        spill_dir: Some(dir),
        update: Default::default(),
    });
    let by_entry = matches!(kind.as_str(), "deleteBurst" | "wipingUpdate");
    let mut total = 0u64;
    let mut seeded: HashSet<String> = HashSet::new();
    let mut seed = |lost: &mut Replica, n: &str, c: &CollInfo| {
        if seeded.insert(n.to_string()) {
            let info = c.clone();
            lost.seed_namespace(n, move |slot| CollInfo {
                slot,
                backup_documents: None,
                no_id: Vec::new(),
                ..info
            });
        }
    };
    if !by_entry {
        for n in &namespaces {
            let n = data_ns(n);
            let Some(c) = replica.get(&n) else { continue };
            seed(&mut lost, &n, c);
            let mut i = 0;
            replica
                .for_each_document(&n, &mut |doc| {
                    i += 1;
                    let d = bson::RawDocument::from_bytes(doc).map_err(|e| ReplicaError::Seed {
                        ns: n.clone(),
                        index: i,
                        why: e.to_string(),
                    })?;
                    lost.seed_document(&n, d, i)
                })
                .map_err(Failure::from)?;
            total += lost.count(&n);
        }
    } else {
        // The burst's entries from the limit to its last entry: each deleted (or
        // wiped) document as it stood at the limit.
        let n = data_ns(&ns);
        if let Some(c) = replica.get(&n) {
            seed(&mut lost, &n, c);
        }
        let mut r = oplog::open(
            &req.oplog,
            ReadOptions {
                allow_truncated: req.allow_truncated,
            },
        )
        .map_err(Failure::from)?;
        let mut buf = Vec::new();
        let slot = replica.get(&n).map(|c| c.slot);
        while let Some(e) = r.next_entry().map_err(Failure::from)? {
            if e.ts < limit || e.ts > last_ts {
                continue;
            }
            let mut visit =
                |leaf: &crate::oplog::Entry<'_>| -> Result<(), crate::oplog::EntryError> {
                    if leaf.ns != n {
                        return Ok(());
                    }
                    let key_doc = match leaf.op {
                        Op::Delete => leaf.o,
                        Op::Update => leaf.o2,
                        _ => None,
                    };
                    if let (Some(k), Some(slot)) = (key_doc, slot) {
                        if let Ok(key) = IdKey::from_document_id(k) {
                            buf.clear();
                            if replica.store().get(slot, &key, &mut buf).unwrap_or(false) {
                                if let Ok(d) = bson::RawDocument::from_bytes(&buf) {
                                    let _ = lost.seed_document(&n, d, 0);
                                }
                            }
                        }
                    }
                    Ok(())
                };
            e.for_each_leaf(&mut visit)
                .map_err(|err| Failure::new(err.to_string()))?;
        }
        total = lost.count(&n);
    }
    let target = sibling(out, "-destroyed");
    let written = if total > 0 {
        dump::write(&mut lost, &target, format, &|_| true, "unknown").map_err(Failure::from)?;
        Some(target.display().to_string())
    } else {
        None
    };
    Ok(Some(Destroyed {
        kind,
        ns,
        ts: limit,
        documents: total,
        num_records,
        out: written,
    }))
}

/// `<out><suffix>` beside `out` (for an archive file, before its extension).
fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dump".into());
    out.with_file_name(format!("{name}{suffix}"))
}

fn write_report(r: &EmbeddedReport, work: &WorkDir) -> std::io::Result<()> {
    let mut json = serde_json::to_string_pretty(r).map_err(std::io::Error::other)?;
    json.push('\n');
    std::fs::write(work.report_json(), json)?;
    std::fs::write(work.report_md(), markdown(r))
}

/// `report.md` of an embedded replay.
pub fn markdown(r: &EmbeddedReport) -> String {
    let mut s = String::new();
    let p = &r.restore_point;
    s.push_str(&format!(
        "# pitr replay (engine: embedded)\n\n**Result: {}** (exit code {})\n\n",
        r.result.headline(),
        r.exit_code
    ));
    s.push_str(&format!(
        "Restore point: limit `{}` ({}), exclusive: entries with ts < {} applied. {}\n\n",
        p.limit, p.limit_utc, p.limit, p.explanation
    ));
    s.push_str(&format!(
        "Backup `{}`, complete up to `{}` ({}).\n\n",
        r.backup.dir, r.backup.end_ts, r.backup.end_utc
    ));
    s.push_str("Engine: **embedded** (pitr applied the backup and the oplog itself, as the source's secondaries apply them; no mongod, no mongorestore; nothing was verified against a server).\n\n");
    s.push_str("## At stake\n\n```\n");
    for line in r.stake.text_lines(p.limit).iter().skip(1) {
        s.push_str(line);
        s.push('\n');
    }
    s.push_str("```\n\n");
    if r.accept_incidents && r.stake.has_incidents() {
        s.push_str("The incidents above were replayed deliberately (`--accept-incidents`).\n\n");
    }
    if let Some(o) = &r.out {
        s.push_str(&format!("Output: `{o}` ({}).\n\n", r.out_format));
    }
    s.push_str("| namespace | in backup | at backup end | at limit | dbHash (md5) |\n|---|---|---|---|---|\n");
    for n in &r.namespaces {
        let [ns, backup, end, limit, md5] = n.cells();
        s.push_str(&format!("| {ns} | {backup} | {end} | {limit} | {md5} |\n"));
    }
    if let Some(d) = &r.destroyed {
        let sentence = destroyed_sentence(d);
        s.push_str(&format!("\nT{}.\n", &sentence[1..]));
    }
    if !r.handover.is_empty() {
        s.push_str("\n## Hand over\n\nAdd the target's connection (e.g. `--uri`); mongorestore defaults to localhost:27017.\n\n```sh\n");
        for c in &r.handover {
            s.push_str(&format!("# {}\n{}\n", c.what, c.command));
        }
        s.push_str("```\n");
    }
    if let Some(st) = &r.engine_stats {
        s.push_str(&format!(
            "\nEngine: {} operation{} applied in {:.1} s; {} backup-oplog entr{} found their document already in a later state; \
             {} command{} found nothing to act on;{} memory budget {} MiB, peak estimate {} MiB{}.\n",
            st.entries_applied,
            plural(st.entries_applied, "", "s"),
            st.seconds,
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
            st.memory_budget >> 20,
            st.peak_memory_estimate >> 20,
            if st.spilled_to_disk { ", documents moved to disk" } else { "" }
        ));
    }
    if !r.lint.is_empty() {
        s.push_str("\n## Lint (about a mongorestore replay; the embedded engine applies as a secondary)\n\n");
        for l in &r.lint {
            s.push_str(&format!("- {:?} `{}`: {}\n", l.severity, l.code, l.message));
        }
    }
    if let Some(e) = &r.error {
        s.push_str(&format!("\n## Error\n\n{}\n", e.message));
        if let Some(h) = &e.hint {
            s.push_str(&format!("\nhint: {h}\n"));
        }
    }
    s
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

/// The summary printed on stdout.
pub fn summary(r: &EmbeddedReport) -> String {
    let mut s = String::new();
    let p = &r.restore_point;
    s.push_str(&format!(
        "Engine    embedded (in-process; no mongod, no mongorestore)\nReplay    limit {} ({}), exclusive: entries with ts < {} applied\n",
        p.limit, p.limit_utc, p.limit
    ));
    if let Some(f) = &p.finding {
        s.push_str(&format!(
            "  stops just before the {} of {} at {} ({})\n",
            f.kind, f.ns, f.ts, f.details
        ));
    }
    let w = r
        .namespaces
        .iter()
        .map(|n| n.ns.len())
        .max()
        .unwrap_or(9)
        .max(9);
    s.push_str(&format!(
        "{:<w$}  {:>9}  {:>13}  {:>9}  DBHASH\n",
        "NAMESPACE", "IN BACKUP", "AT BACKUP END", "AT LIMIT"
    ));
    for n in &r.namespaces {
        let [ns, backup, end, limit, md5] = n.cells();
        s.push_str(&format!(
            "{ns:<w$}  {backup:>9}  {end:>13}  {limit:>9}  {md5}\n"
        ));
    }
    if let Some(d) = &r.destroyed {
        s.push_str(&format!("Incident  {}\n", destroyed_sentence(d)));
    }
    if let (Some(o), None) = (&r.out, &r.error) {
        s.push_str(&format!(
            "Output    the state just before {} is in {o} ({})\n",
            p.limit, r.out_format
        ));
        for line in handover::text_lines(o, &r.handover).iter().skip(1) {
            s.push_str(&format!("  {}\n", line.trim_start()));
        }
    }
    if r.stake.has_incidents() {
        let list: Vec<String> = r.stake.incidents.iter().map(|i| i.describe()).collect();
        s.push_str(&format!(
            "Replayed  {} incident{}{}: {}\n",
            list.len(),
            plural(list.len() as u64, "", "s"),
            if r.accept_incidents {
                " on purpose (--accept-incidents)"
            } else {
                ", NOT undone"
            },
            list.join("; ")
        ));
    }
    s.push_str(&format!("Report    {}\n", r.report_md));
    match &r.error {
        Some(e) => s.push_str(&format!(
            "Result    {}: {} (exit {})\n",
            r.result.headline(),
            e.message,
            r.exit_code
        )),
        None => s.push_str(&format!(
            "Result    {} (exit {})\n",
            r.result.headline(),
            r.exit_code
        )),
    }
    s
}
