//! `pitr replay --cluster FILE --until V --out DIR --engine mongod`: one spare
//! `mongod` per member (the config server and every shard), each restored by the
//! real `mongorestore --oplogReplay --oplogLimit` from the member's backup and its
//! **resolved slice** ([`crate::cluster::mongod_slice`]), verified by counts and
//! dbHash against the embedded engine's prediction for that member at the limit
//! (the single-replica-set `--engine mongod` steps, [`crate::replay::execute`]),
//! then `mongodump`ed (the real tool); the dumps, loaded back as the members'
//! states, are merged by the same [`Merge`] as the embedded engine's states, so the
//! merged dump in `--out` is made of the servers' own bytes.
//!
//! The spares run one after the other, or `--jobs N` at once; each is bound to
//! 127.0.0.1 on a free port and is stopped (its dbpath removed) at its end, unless
//! `--keep`. The merge runs after every spare passed: the config server's dump
//! first (its routing decides ownership), then the shards, the databases' primaries
//! first.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use crate::cluster;
use crate::cluster::mongod_slice::{self, MongodMember, SpareBrief, Verification};
use crate::cluster::restore::{self, MemberJob, MemberReport, Merge, NsCount};
use crate::engine::replica::hash::CollHash;
use crate::error::Failure;
use crate::exec::binaries::ToolSearch;
use crate::exec::signals::listen_for_signals;
use crate::exec::Cancel;
use crate::plan::versions::VersionHints;
use crate::plan::{ContentOptions, Quiet, RestorePlan};
use crate::replay::progress::Console;
use crate::replay::report::Timing;
use crate::replay::tools::{self, Tools};
use crate::replay::{dry_run, execute, Execution, ReplayReport, Settings, WorkDir};
use crate::verify::compare::Status;
use crate::verify::DEFAULT_CONNECT_TIMEOUT;

use super::cluster_restore::Prepared;
use super::replay::{notice, runtime, ReplayArgs};

/// One member planned for its spare.
struct Planned<'a> {
    member: &'a cluster::Member,
    work: WorkDir,
    plan: RestorePlan,
    report: MemberReport,
    slice: mongod_slice::ResolvedSlice,
    /// The config server: its routing collections as the embedded engine predicts
    /// them at the limit ([`restore::routing_hashes`]).
    routing: Vec<CollHash>,
}

/// The whole `--engine mongod` run; returns the members' reports and the merged
/// dump's counts, as the embedded engine's replay does.
pub(super) fn replay_members(
    p: &Prepared,
    a: &ReplayArgs,
    (tools, hints): (Tools, VersionHints),
    (cwd, out): (&Path, &Path),
    memory: usize,
) -> Result<(Vec<MemberReport>, Vec<NsCount>), Failure> {
    let started = std::time::Instant::now();
    let started_utc = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let rt = runtime()?;
    let console = Console::prefixed("pitr replay --cluster: ");
    let work = WorkDir::create(a.workdir.as_deref(), cwd).map_err(Failure::from)?;
    console.line(&format!(
        "limit {} (exclusive, one for every member), work dir {}",
        p.limit,
        work.root.display()
    ));
    let planned = plan_members(p, a, cwd, memory, &work, hints, &console)?;
    let jobs = usize::from(a.jobs.unwrap_or(1)).max(1);
    let cancel = Cancel::new();
    let pitr = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("pitr"));
    let dumps = work.root.join("member-dumps");
    std::fs::create_dir_all(&dumps)?;
    let settings_of = |id: &str| Settings {
        keep: a.keep,
        out: Some(dumps.join(id)),
        step_timeout: a.step_timeout,
        start_timeout: a.start_timeout,
        grace: a.grace,
        port: None,
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        pitr: pitr.clone(),
        dbpath: None,
    };
    // After a member fails, the members not yet started are not started (their
    // spares would be of no use: nothing is merged).
    let failed = std::sync::atomic::AtomicBool::new(false);
    let ran: Vec<(usize, Option<Execution>)> = rt.block_on(async {
        listen_for_signals(&cancel, Some(notice(console.clone(), a.grace)))?;
        let runs = stream::iter(planned.iter().enumerate())
            .map(|(k, m)| {
                let settings = settings_of(&m.member.id);
                let cancel = &cancel;
                let tools = &tools;
                let failed = &failed;
                async move {
                    let console = Console::prefixed(&format!("member `{}`: ", m.member.id));
                    if cancel.is_cancelled() {
                        console.line("not started: interrupted");
                        return (k, None);
                    }
                    if failed.load(std::sync::atomic::Ordering::SeqCst) {
                        console.line("not started: another member failed");
                        return (k, None);
                    }
                    console.line(&format!(
                        "starting its spare mongod: restore with --oplogLimit {} ({} entries after the backup's end, {} commit entr{} appended), verify, mongodump",
                        m.slice.oplog_limit,
                        m.slice.entries,
                        m.slice.commits_appended.len(),
                        if m.slice.commits_appended.len() == 1 { "y" } else { "ies" }
                    ));
                    let ex = execute(&m.plan, &m.work, tools, &settings, cancel, &console).await;
                    if ex.error.is_some()
                        || ex.interrupted
                        || ex.verify.as_ref().is_some_and(|v| !v.passed)
                    {
                        failed.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    (k, Some(ex))
                }
            })
            .buffer_unordered(jobs)
            .collect::<Vec<_>>()
            .await;
        Ok::<_, Failure>(runs)
    })?;
    drop(rt);
    let mut ran = ran;
    ran.sort_by_key(|(k, _)| *k);
    let interrupted = cancel.is_cancelled();
    let mut reports = Vec::new();
    let mut first_error: Option<Failure> = None;
    let routing: Vec<CollHash> = planned
        .iter()
        .flat_map(|m| m.routing.iter().cloned())
        .collect();
    for ((_, ex), m) in ran.into_iter().zip(planned) {
        let Some(mut ex) = ex else {
            reports.push(not_run(m));
            continue;
        };
        let timing = Timing {
            started_utc: started_utc.clone(),
            duration_ms: started.elapsed().as_millis() as u64,
        };
        let report = ReplayReport::build(
            &m.plan,
            &m.work,
            &tools,
            &ex,
            timing,
            interrupted.then(|| cancel.exit_code().unwrap_or(130)),
            true,
        );
        let _ = report.write(&m.work);
        let failure = member_outcome(&m.member.id, &m.work.root, &mut ex);
        let rep = member_report(m, &ex);
        if let Some(kept) = &ex.kept {
            console.line(&format!(
                "member `{}`: --keep: its spare is left running: mongosh 'mongodb://127.0.0.1:{}/'; stop: kill {}",
                rep.member, kept.port, kept.pid
            ));
        }
        if first_error.is_none() {
            first_error = failure;
        }
        reports.push(rep);
    }
    if interrupted {
        return Err(Failure::new(
            "interrupted: the running steps and the spare mongods were stopped and their data directories removed",
        )
        .with_exit_code(cancel.exit_code().unwrap_or(130)));
    }
    if let Some(f) = first_error {
        return Err(f);
    }
    let counts = merge_dumps(p, a, (&mut reports, &routing), &dumps, memory, &work, out)?;
    if !a.per_member {
        let _ = std::fs::remove_dir_all(&dumps);
    }
    Ok((reports, counts))
}

/// One member of `replay --cluster --engine mongod --dry-run`. JSON: `member`,
/// `role`, `oplog_limit` (its spare's mongorestore `--oplogLimit`), `entries` (of
/// its resolved slice, after its backup's end), `commits_appended` (commit entries
/// past the limit appended to its slice), `workdir`, `dry_run` (what `pitr replay
/// --engine mongod --dry-run --json` shows for one replica set, with this member's
/// plan and commands).
#[derive(serde::Serialize)]
pub(super) struct MemberDryRun {
    pub member: String,
    pub role: cluster::Role,
    pub oplog_limit: crate::oplog::Ts,
    pub entries: u64,
    pub commits_appended: usize,
    pub workdir: String,
    pub dry_run: serde_json::Value,
    /// The member's commands as text ([`dry_run::commands_text`]).
    #[serde(skip)]
    pub commands: String,
}

/// `replay --cluster --engine mongod --dry-run`: every member planned as the real
/// run plans it (its plan and resolved slice written in the work dir, its lint
/// checked), and the commands its spare would run; nothing is started. Returns the
/// work dir, the programs' text (once for every member) and the members, in the
/// order the real run takes them.
pub(super) fn dry_run_members(
    p: &Prepared,
    a: &ReplayArgs,
    (tools, hints): (Tools, VersionHints),
    cwd: &Path,
    memory: usize,
) -> Result<(PathBuf, String, Vec<MemberDryRun>), Failure> {
    let console = Console::prefixed("pitr replay --cluster --dry-run: ");
    let work = WorkDir::create(a.workdir.as_deref(), cwd).map_err(Failure::from)?;
    let planned = plan_members(p, a, cwd, memory, &work, hints, &console)?;
    let pitr = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("pitr"));
    let probed = tools.as_probed();
    let dumps = work.root.join("member-dumps");
    // Incidents are the cluster's verdict, not a member's.
    let allow = dry_run::Allow {
        ignore_lint_errors: a.ignore_lint_errors,
        accept_incidents: true,
    };
    let mut binaries = String::new();
    let mut members = Vec::new();
    for m in &planned {
        let d = dry_run::prepare(
            &m.plan,
            &m.work,
            &probed,
            Some(&dumps.join(&m.member.id)),
            None,
            &pitr,
            allow,
        );
        if binaries.is_empty() {
            binaries = dry_run::binaries_text(&d);
        }
        members.push(MemberDryRun {
            member: m.member.id.clone(),
            role: m.member.role,
            oplog_limit: m.slice.oplog_limit,
            entries: m.slice.entries,
            commits_appended: m.slice.commits_appended.len(),
            workdir: m.work.root.display().to_string(),
            commands: dry_run::commands_text(&d),
            dry_run: serde_json::to_value(&d).map_err(|e| Failure::new(e.to_string()))?,
        });
    }
    Ok((work.root.clone(), binaries, members))
}

/// A member not started (another failed first).
fn not_run(m: Planned<'_>) -> MemberReport {
    let mut rep = m.report;
    rep.mongod = Some(MongodMember {
        work_dir: m.work.root.display().to_string(),
        spare: None,
        slice: m.slice,
        verification: None,
    });
    rep
}

/// The member's report with its spare, resolved slice and verification.
fn member_report(m: Planned<'_>, ex: &Execution) -> MemberReport {
    let mut rep = m.report;
    rep.mongod = Some(MongodMember {
        work_dir: m.work.root.display().to_string(),
        spare: ex.spare.as_ref().map(|s| SpareBrief {
            uri: s.uri.clone(),
            port: s.port,
            pid: s.pid,
            log: s.log.clone(),
            kept: s.kept,
            stopped: s.stopped.clone(),
        }),
        slice: m.slice,
        verification: ex.verify.as_ref().map(|v| Verification {
            passed: v.passed,
            checked: v.checked,
            failed: v.failed,
            failed_namespaces: v
                .rows
                .iter()
                .filter(|r| r.status == Status::Fail)
                .map(|r| r.ns.clone())
                .collect(),
            server_version: v.server.version.clone(),
            standin: v.server.standin,
            routing_checked: Vec::new(),
        }),
    });
    rep
}

/// The programs (missing ones named, with --mongodb-bin and PITR_MONGODB_BIN,
/// before any work, even before the members' oplogs are read), announced, and what
/// their versions tell the plans.
pub(super) fn programs(a: &ReplayArgs) -> Result<(Tools, VersionHints), Failure> {
    let console = Console::prefixed("pitr replay --cluster: ");
    let search = ToolSearch::from_env(a.mongodb_bin.clone());
    let probed = runtime()?.block_on(tools::probe(&search, true, &Cancel::new()));
    let hints = tools::version_hints(&probed);
    let tools = Tools::from_probe(probed).map_err(Failure::from)?;
    for b in tools.all() {
        console.line(&format!("  {}", tools::describe(b)));
    }
    let standins = tools.standins();
    if !standins.is_empty() {
        console.line(&format!(
            "*** {}: {} ***",
            crate::replay::STANDIN_BANNER,
            standins.join(", ")
        ));
    }
    Ok((tools, hints))
}

/// The member's failure, if any: a failed step, or a verification that failed
/// (exit 2, naming the member and each namespace that differs).
fn member_outcome(id: &str, work: &Path, ex: &mut Execution) -> Option<Failure> {
    let work = work.display();
    if let Some(f) = ex.error.take() {
        return Some(
            Failure::new(format!("member `{id}`: {}", f.message()))
                .with_hint(f.hint().unwrap_or_default().to_string()),
        );
    }
    let v = ex.verify.as_ref()?;
    if v.passed {
        return None;
    }
    let rows: Vec<String> = v
        .rows
        .iter()
        .filter(|r| r.status == Status::Fail)
        .map(|r| {
            format!(
                "`{}` ({} documents expected, {} found; dbHash {} expected, {} found)",
                r.ns,
                r.expected_documents.map_or("?".into(), |n| n.to_string()),
                r.documents.map_or("none".into(), |n| n.to_string()),
                r.expected_md5.as_deref().unwrap_or("-"),
                r.md5.as_deref().unwrap_or("-"),
            )
        })
        .collect();
    Some(
        Failure::new(format!(
            "member `{id}`: its spare does not hold what the embedded engine predicts for it at the limit: {}",
            rows.join(", ")
        ))
        .with_hint(format!("nothing was merged; the member's plan, logs and report are in `{work}`: mongorestore may have skipped or refused entries of its slice"))
        .with_exit_code(crate::error::exit::ERROR),
    )
}

/// Each member's plan at the limit for mongorestore, and its resolved slice.
fn plan_members<'a>(
    p: &'a Prepared,
    a: &ReplayArgs,
    cwd: &Path,
    memory: usize,
    work: &WorkDir,
    hints: VersionHints,
    console: &Arc<Console>,
) -> Result<Vec<Planned<'a>>, Failure> {
    let mut out = Vec::new();
    for m in restore::order(&p.file, &[]) {
        let r = p
            .ranges
            .iter()
            .find(|r| r.member == m.id)
            .expect("a range per member");
        let mw = WorkDir::create(Some(&work.root.join("members").join(&m.id)), cwd)
            .map_err(Failure::from)?;
        let predict = tempfile::Builder::new()
            .prefix(".pitr-engine-")
            .tempdir_in(&mw.root)?;
        console.line(&format!("member `{}`: planning", m.id));
        let (mut plan, model, rep) = restore::member_plan(
            MemberJob {
                member: m,
                range: r,
                limit: p.limit,
                dir: mw.plan_dir(),
                cwd: cwd.to_path_buf(),
                allow_truncated: a.plan.allow_truncated,
                content: Some((memory, predict.path().to_path_buf())),
                txns: &p.txns,
                mongod: Some(hints.clone()),
                keep_slice: true,
                // Every member's slice was counted before any was planned, but not
                // the sorted runs beside one out of order.
                sort_room: (!a.no_space_check && !a.dry_run)
                    .then(|| super::room::sort_room_in(mw.root.clone(), 0, &super::room::REPLAY)),
            },
            &Quiet,
        )?;
        let routing = if m.role == cluster::Role::Config {
            restore::routing_hashes(model.replica())
                .map_err(|e| e.in_context(format!("member `{}`", m.id)))?
        } else {
            Vec::new()
        };
        drop(model);
        drop(predict);
        if plan.lint_errors() > 0 && !a.ignore_lint_errors {
            return Err(Failure::new(format!(
                "member `{}`: its plan's lint found {} error(s): what mongorestore would refuse or get wrong (see `{}`)",
                m.id,
                plan.lint_errors(),
                mw.plan_dir().join("plan.json").display()
            ))
            .with_hint("`pitr plan --cluster` shows each member's plan; --ignore-lint-errors replays anyway, or use the embedded engine"));
        }
        let commits = p
            .txns
            .commits_past_limit(&m.id, &plan.prepared_at_limit, p.limit);
        let slice = mongod_slice::resolve(
            &mongod_slice::Member {
                id: &m.id,
                role: m.role,
                oplog: &r.oplog,
                opts: crate::oplog::ReadOptions {
                    allow_truncated: a.plan.allow_truncated,
                },
                commits,
            },
            &mut plan,
            &mw.plan_dir(),
        )?;
        crate::plan::build::rewrite_plan_json(&mw.plan_dir(), &plan).map_err(Failure::from)?;
        out.push(Planned {
            member: m,
            work: mw,
            plan,
            report: rep,
            slice,
            routing,
        });
    }
    Ok(out)
}

/// The members' dumps loaded back as their states at the limit and merged: the
/// config server first, then the shards, the databases' primaries first.
fn merge_dumps(
    p: &Prepared,
    a: &ReplayArgs,
    (reports, routing): (&mut [MemberReport], &[CollHash]),
    dumps: &Path,
    memory: usize,
    work: &WorkDir,
    out: &Path,
) -> Result<Vec<NsCount>, Failure> {
    let mut merge: Option<Merge> = None;
    let mut order: Vec<&cluster::Member> = restore::order(&p.file, &[]);
    let mut k = 0;
    while k < order.len() {
        let m = order[k];
        k += 1;
        let context = format!("member `{}`", m.id);
        let spill = tempfile::Builder::new()
            .prefix(".pitr-merge-")
            .tempdir_in(&work.root)?;
        let model = crate::plan::load_dump(
            &dumps.join(&m.id),
            &ContentOptions {
                memory,
                spill_dir: spill.path().to_path_buf(),
                strict: false,
                defer_hashes: true,
                config_server: m.role == cluster::Role::Config,
                cold_copies: None,
            },
            &Quiet,
        )
        .map_err(|e| Failure::from(e).in_context(&context))?;
        if a.per_member {
            let r = model.replica();
            let n: u64 = r.namespaces().into_iter().map(|(ns, _)| r.count(ns)).sum();
            if let Some(rep) = reports.iter_mut().find(|x| x.member == m.id) {
                rep.dump = Some(
                    out.join(restore::MEMBERS_DIR)
                        .join(&m.id)
                        .display()
                        .to_string(),
                );
                rep.dump_documents = Some(n);
            }
        }
        if merge.is_none() {
            check_routing(routing, model.replica(), reports)?;
        }
        super::cluster_restore::merge_step(p, &mut merge, &mut order, &m.id, model.replica())?;
    }
    let merge = merge.expect("the config server comes first");
    merge.write(out, p.limit, a.per_member.then_some(dumps))
}

/// The config spare's routing collections (from its dump) against the embedded
/// engine's prediction for the config server at the limit: a difference is exit 2
/// naming the member and the namespace (the merge would route documents by them).
fn check_routing(
    predicted: &[CollHash],
    dumped: &crate::engine::replica::Replica,
    reports: &mut [MemberReport],
) -> Result<(), Failure> {
    let work = reports
        .iter()
        .find(|r| r.role == cluster::Role::Config)
        .and_then(|r| r.mongod.as_ref())
        .map_or(String::new(), |m| m.work_dir.clone());
    let found = restore::routing_hashes(dumped).map_err(|e| e.in_context("member `config`"))?;
    let mut names: Vec<&str> = predicted
        .iter()
        .chain(&found)
        .map(|h| h.ns.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut differ = Vec::new();
    for ns in &names {
        let p = predicted.iter().find(|h| h.ns == *ns);
        let f = found.iter().find(|h| h.ns == *ns);
        let same = match (p, f) {
            (Some(p), Some(f)) => p.documents == f.documents && p.md5 == f.md5,
            (Some(p), None) | (None, Some(p)) => p.documents == 0,
            (None, None) => true,
        };
        if !same {
            differ.push(format!(
                "`{ns}` ({} documents predicted, {} in the spare's dump)",
                p.map_or(0, |h| h.documents),
                f.map_or(0, |h| h.documents)
            ));
        }
    }
    if let Some(v) = reports
        .iter_mut()
        .find(|r| r.role == cluster::Role::Config)
        .and_then(|r| r.mongod.as_mut())
        .and_then(|m| m.verification.as_mut())
    {
        v.routing_checked = names.iter().map(|n| n.to_string()).collect();
        v.checked += names.len();
        v.failed += differ.len();
        v.passed = v.passed && differ.is_empty();
    }
    if differ.is_empty() {
        return Ok(());
    }
    Err(Failure::new(format!(
        "member `config`: its spare's routing table does not match what the embedded engine predicts at the limit: {}",
        differ.join(", ")
    ))
    .with_hint(format!("nothing was merged; the config member's plan, logs and report are in `{work}`"))
    .with_exit_code(crate::error::exit::ERROR))
}
