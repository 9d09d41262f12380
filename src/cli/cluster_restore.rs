//! `pitr plan --cluster FILE --until V` and `pitr replay --cluster FILE --until V
//! --out DIR`: one exclusive limit for every member of a sharded cluster, each
//! member's own plan at it, and (replay) the members' states at it merged into one
//! logical dump ([`crate::cluster::restore`]).

use std::io::{self, Write};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::cluster::limit::{self, Asked, LimitError, MemberRange};
use crate::cluster::restore::{self, MemberJob, MemberReport, Merge, NsCount};
use crate::cluster::txns::{CrossShardTxn, TxnTable};
use crate::cluster::{self, ClusterFile};
use crate::error::Failure;
use crate::oplog::{ReadOptions, Ts};
use crate::plan::{Quiet, UntilSpec};
use crate::replay::preflight;
use crate::table::counted;

use super::plan::{PlanArgs, PlanInputArgs};
use super::replay::{Engine, ReplayArgs};

mod out;
mod space;

/// The limit and everything checked before any member is planned.
pub(super) struct Prepared {
    pub(super) file: ClusterFile,
    pub(super) ranges: Vec<MemberRange>,
    /// Every member's decisions of prepared transactions (rule R2).
    pub(super) txns: TxnTable,
    pub(super) limit: Ts,
    explanation: String,
    /// Critical and high cluster incidents after every backup's end and before the
    /// limit: the restore holds their damage.
    replayed: Vec<Replayed>,
}

/// A cluster incident the restore replays. JSON: `kind`, `ns`, `ts`, `oplog_limit`.
#[derive(Clone, Debug, Serialize)]
struct Replayed {
    kind: &'static str,
    ns: String,
    ts: Ts,
    oplog_limit: Ts,
}

/// The cluster file `--cluster` names (loaded once per command: the free-space check
/// and the plan read the same one).
fn load(input: &PlanInputArgs) -> Result<ClusterFile, Failure> {
    let path = input.cluster.as_deref().expect("called with --cluster");
    Ok(cluster::file::load(path)?)
}

fn prepare(input: &PlanInputArgs, file: ClusterFile) -> Result<Prepared, Failure> {
    let path = input.cluster.clone().expect("called with --cluster");
    let asked = match &input.until {
        UntilSpec::Time(tv) if tv.is_exact_position() => Asked::Exact(tv.ts),
        UntilSpec::Time(tv) => Asked::Time {
            ts: tv.ts,
            input: tv.input.clone(),
        },
        UntilSpec::Auto => Asked::Auto,
        UntilSpec::End => return Err(LimitError::End.into()),
    };
    let target = match &asked {
        Asked::Time { ts, .. } => Some(*ts),
        _ => None,
    };
    let opts = ReadOptions {
        allow_truncated: input.allow_truncated,
    };
    let ranges = file
        .members()
        .map(|m| limit::member_range(m, target, opts))
        .collect::<Result<Vec<_>, _>>()?;
    let mut txns = TxnTable::default();
    for r in &ranges {
        txns.add(&r.member, &r.decisions)?;
    }
    let (findings, reshards) =
        super::find_drop_cluster::cluster_findings(&path, &file, input.allow_truncated)?;
    let limit = limit::resolve(&asked, &ranges, &findings)?;
    limit::check_coverage(&ranges, limit)?;
    limit::check_ddl(&findings, limit)?;
    limit::check_resharding(&reshards, &ranges, limit)?;
    let explanation = match &asked {
        Asked::Exact(_) => "the exact position given".to_string(),
        Asked::Time { input, .. } => {
            format!("the first entry at or after `{input}` on any member")
        }
        Asked::Auto => {
            let f = findings
                .iter()
                .find(|f| f.finding.oplog_limit == limit)
                .map(|f| format!("{} of `{}`", f.finding.kind.as_str(), f.finding.ns))
                .unwrap_or_default();
            format!("just before the first critical or high incident after every backup's end: {f}")
        }
    };
    let latest = ranges
        .iter()
        .filter_map(|r| r.backup_end)
        .max()
        .unwrap_or(Ts::ZERO);
    let replayed = findings
        .iter()
        .map(|f| &f.finding)
        .filter(|f| f.ts > latest && f.ts < limit && !f.is_routine())
        .filter(|f| f.severity >= crate::forensics::Severity::High)
        .map(|f| Replayed {
            kind: f.kind.as_str(),
            ns: f.ns.clone(),
            ts: f.ts,
            oplog_limit: f.oplog_limit,
        })
        .collect();
    Ok(Prepared {
        file,
        ranges,
        txns,
        limit,
        explanation,
        replayed,
    })
}

/// `cluster-plan.json` (`pitr-cluster-plan/1`) and `--json` of `plan --cluster`.
#[derive(Serialize)]
struct ClusterPlan {
    format: &'static str,
    cluster: String,
    limit: Ts,
    limit_utc: String,
    exclusive: bool,
    explanation: String,
    incidents_replayed: Vec<Replayed>,
    members: Vec<MemberReport>,
    /// Cross-shard transactions open at the limit on some member, and whether the
    /// restore holds each (on every participant, or on none).
    transactions_at_limit: Vec<CrossShardTxn>,
    shards_at_limit: Vec<String>,
    sharded_collections: Vec<ShardedBrief>,
    out: String,
}

#[derive(Serialize)]
struct ShardedBrief {
    ns: String,
    key: serde_json::Value,
    unique: bool,
    chunks: usize,
    command: String,
}

/// A new directory beside `out`, renamed to it when complete.
fn staging(out: &Path) -> Result<tempfile::TempDir, Failure> {
    if out.exists() && std::fs::read_dir(out).map_or(true, |mut d| d.next().is_some()) {
        return Err(Failure::new(format!("`{}` already exists", out.display()))
            .with_hint("choose another --out, or remove the old one"));
    }
    let parent = crate::storage::parent_dir(out);
    std::fs::create_dir_all(parent)?;
    let name = out
        .file_name()
        .map_or("out".into(), |n| n.to_string_lossy().into_owned());
    Ok(tempfile::Builder::new()
        .prefix(&format!(".{name}.pitr-"))
        .tempdir_in(parent)?)
}

pub fn plan(a: PlanArgs) -> Result<u8, Failure> {
    let cwd = std::env::current_dir()?;
    let budget = crate::memory::budget(None);
    let file = load(&a.input)?;
    if !a.no_space_check {
        let parent = match &a.out {
            Some(o) => cwd.join(o).parent().unwrap_or(&cwd).to_path_buf(),
            None => cwd.clone(),
        };
        space::check_plan(&file, &parent, budget.bytes)?;
    }
    let p = prepare(&a.input, file)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| cwd.join(format!("pitr-cluster-plan-{}-{}", p.limit.t, p.limit.i)));
    let tmp = staging(&out)?;
    let mut sort_rooms = match a.no_space_check {
        false => space::plan_sort_rooms(&p.file, tmp.path(), budget.bytes),
        true => vec![],
    }
    .into_iter();
    let mut members = Vec::new();
    let mut routing = None;
    for (m, r) in p.file.members().zip(&p.ranges) {
        let dir = tmp.path().join("members").join(&m.id);
        let spill = tempfile::tempdir_in(tmp.path())?;
        let is_config = m.role == cluster::Role::Config;
        let (_, model, mut rep) = restore::member_plan(
            MemberJob {
                member: m,
                range: r,
                limit: p.limit,
                dir,
                cwd: cwd.clone(),
                allow_truncated: a.input.allow_truncated,
                content: is_config.then(|| (budget.bytes as usize, spill.path().to_path_buf())),
                txns: &p.txns,
                mongod: None,
                keep_slice: true,
                // Every slice was counted up front (at most its oplog's bytes), as
                // `pitr plan` counts its own; one out of order asks again for its
                // sort's peak.
                sort_room: sort_rooms.next(),
            },
            &Quiet,
        )?;
        if is_config {
            let rt = cluster::owner::Routing::from_config(model.replica())
                .map_err(|e| Failure::from(e).in_context("member `config`"))?;
            let ids: Vec<&str> = p.file.shards.iter().map(|s| s.id.as_str()).collect();
            limit::check_shards(&rt.shards, &ids, p.limit)?;
            routing = Some(rt);
        }
        rep.plan_dir = out.join("members").join(&m.id).display().to_string();
        members.push(rep);
    }
    let routing = routing.unwrap_or_default();
    let transactions_at_limit = p.txns.at_limit(&prepared_of(&members));
    let plan = ClusterPlan {
        format: "pitr-cluster-plan/1",
        cluster: p.file.path.display().to_string(),
        limit: p.limit,
        limit_utc: p.limit.utc_string(),
        exclusive: true,
        explanation: p.explanation,
        incidents_replayed: p.replayed,
        members,
        transactions_at_limit,
        shards_at_limit: routing.shards.clone(),
        sharded_collections: routing
            .collections
            .values()
            .map(|c| ShardedBrief {
                ns: c.ns.clone(),
                key: bson::Bson::Document(c.key.clone()).into_relaxed_extjson(),
                unique: c.unique,
                chunks: c.chunks.len(),
                command: c.shard_command(),
            })
            .collect(),
        out: out.display().to_string(),
    };
    let json = serde_json::to_string_pretty(&plan).map_err(io::Error::from)? + "\n";
    std::fs::write(tmp.path().join("cluster-plan.json"), &json)?;
    std::fs::rename(tmp.keep(), &out)?;
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    if a.json {
        w.write_all(json.as_bytes())?;
    } else {
        render_plan(&mut w, &plan)?;
    }
    w.flush()?;
    Ok(0)
}

/// Each member's prepared transactions open at the limit.
fn prepared_of(members: &[MemberReport]) -> Vec<(String, Vec<crate::plan::PreparedAtLimit>)> {
    members
        .iter()
        .map(|m| (m.member.clone(), m.prepared_at_limit.clone()))
        .collect()
}

/// One line per cross-shard transaction the limit cuts through.
fn txn_lines(w: &mut impl Write, txns: &[CrossShardTxn]) -> io::Result<()> {
    for t in txns {
        let what = match (t.included, t.commit_timestamp) {
            (true, Some(ct)) => {
                format!("commitTimestamp {ct} is before the limit: in, on every participant")
            }
            (false, Some(ct)) => {
                format!("commitTimestamp {ct} is at or after the limit: out, on every participant")
            }
            _ => "aborted: out, on every participant".to_string(),
        };
        let entries: Vec<String> = t
            .decision_entries
            .iter()
            .map(|d| format!("{} at {}", d.member, d.ts))
            .collect();
        let coordinator = t
            .coordinator_decision
            .as_ref()
            .map_or_else(String::new, |d| {
                format!(
                    " (the coordinator's decision document: {} at {})",
                    d.member, d.ts
                )
            });
        let entries = if entries.is_empty() {
            "none in the oplogs read".to_string()
        } else {
            entries.join(", ")
        };
        writeln!(
            w,
            "CROSS-SHARD TRANSACTION {}: open at the limit on {} (prepared before it, its decision entry after it); decision entries: {entries}{coordinator}; {what}",
            t.txn,
            t.open_on.join(", "),
        )?;
    }
    Ok(())
}

pub(super) fn member_lines(
    w: &mut impl Write,
    members: &[MemberReport],
    applied: bool,
) -> io::Result<()> {
    let header = if applied {
        "MEMBER    ROLE    BACKUP END      OPLOG FROM - TO                   TO APPLY  APPLIED"
    } else {
        "MEMBER    ROLE    BACKUP END      OPLOG FROM - TO                   TO APPLY"
    };
    writeln!(w, "{header}")?;
    for m in members {
        let mut line = format!(
            "{:<9} {:<7} {:<15} {:<33} {:>8}",
            m.member,
            m.role.as_str(),
            m.backup_end.to_string(),
            format!("{} - {}", m.oplog_first, m.oplog_last),
            m.entries_to_apply
        );
        if let Some(n) = m.entries_applied {
            line.push_str(&format!("  {n:>7}"));
        }
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

/// The incidents the restore replays, one line each, and how to leave them out.
fn replayed_lines(w: &mut impl Write, replayed: &[Replayed]) -> io::Result<()> {
    for r in replayed {
        writeln!(
            w,
            "REPLAYED: {} of `{}` at {} is before the limit: the restore holds its damage (--until {} stops before it)",
            r.kind, r.ns, r.ts, r.oplog_limit
        )?;
    }
    Ok(())
}

fn render_plan(w: &mut impl Write, p: &ClusterPlan) -> io::Result<()> {
    writeln!(
        w,
        "Cluster limit {} ({}), exclusive, one for every member: {}.",
        p.limit, p.limit_utc, p.explanation
    )?;
    writeln!(w)?;
    member_lines(w, &p.members, false)?;
    writeln!(w)?;
    writeln!(
        w,
        "Every member's backup ends before the limit and its oplog reaches from there to an entry at or after it; \
         the limit is not inside a drop, dropDatabase or rename logged on several members; config.shards at the \
         limit lists {}.",
        p.shards_at_limit
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    txn_lines(w, &p.transactions_at_limit)?;
    for c in &p.sharded_collections {
        writeln!(
            w,
            "sharded at the limit: {} ({} chunks): {}",
            c.ns, c.chunks, c.command
        )?;
    }
    writeln!(
        w,
        "Each member's plan: {}/members/<member>/plan.json",
        p.out
    )?;
    writeln!(
        w,
        "Next: pitr replay --cluster {} --until {} --out DIR",
        p.cluster, p.limit
    )
}

/// `--json` of `replay --cluster` (`pitr-cluster-replay/1`).
#[derive(Serialize)]
struct ClusterReplay {
    format: &'static str,
    engine: &'static str,
    /// `restored`, or `incident_replayed` (exit 1 without --accept-incidents).
    result: &'static str,
    exit_code: u8,
    accept_incidents: bool,
    #[serde(flatten)]
    at: AtLimit,
    sharding_file: String,
    /// `--out` in a bucket: the command that downloads the dump (mongorestore reads
    /// local files only); else null.
    download: Option<String>,
    members: Vec<MemberReport>,
    transactions_at_limit: Vec<CrossShardTxn>,
    namespaces: Vec<NsCount>,
    seconds: f64,
}

pub fn replay(a: ReplayArgs) -> Result<u8, Failure> {
    let mongod = a.engine == Engine::Mongod;
    if a.gzip || a.archive || a.port.is_some() {
        return Err(Failure::new(
            "--gzip, --archive and --port are not available with --cluster",
        )
        .with_hint("replay --cluster writes a plain mongodump directory to --out (with --engine mongod, each member's spare takes a free port)"));
    }
    if a.dry_run && !mongod {
        return Err(Failure::new(
            "--dry-run with --cluster shows the commands of --engine mongod; the embedded engine runs none",
        )
        .with_hint("`pitr plan --cluster FILE --until V` shows what the embedded engine replays on each member; add --engine mongod for the spares' commands"));
    }
    if !mongod && (a.keep || a.mongodb_bin.is_some() || a.jobs.is_some_and(|j| j > 1)) {
        return Err(Failure::new(
            "--keep, --mongodb-bin and --jobs are for --engine mongod (one spare mongod per member)",
        )
        .with_hint("add --engine mongod, or leave them out: the embedded engine replays the members one after the other in-process"));
    }
    let Some(out) = a.out.clone() else {
        return Err(Failure::new("replay --cluster needs --out DIR")
            .with_hint("e.g. `pitr replay --cluster cluster.toml --until auto --out restored/`"));
    };
    crate::engine::replica::interrupt::install();
    let started = Instant::now();
    let cwd = std::env::current_dir()?;
    let dest = out::ClusterOut::new(&out, &cwd)?;
    let out = dest.path.clone();
    crate::engine::replica::dump::check_new(
        &out,
        crate::engine::replica::dump::DumpFormat::Directory { gzip: false },
    )?;
    // --engine mongod: the programs first (a missing one is named before the
    // members' oplogs are read).
    let programs = match mongod {
        true => Some(super::cluster_mongod::programs(&a)?),
        false => None,
    };
    let budget = crate::memory::budget(a.memory.map(|m| m as u64));
    let file = load(&a.plan)?;
    // Where the work dir goes: --engine mongod's is the replica set's
    // (`./pitr-replay-<time>` unless --workdir); the embedded engine's a temporary
    // directory in --workdir or beside --out.
    let work_home = match mongod {
        true => crate::replay::WorkDir::home(a.workdir.as_deref(), &cwd),
        false => match &a.workdir {
            Some(w) => cwd.join(w),
            None => dest.work_home(&cwd),
        },
    };
    if !a.dry_run && !a.no_space_check {
        let jobs = usize::from(a.jobs.unwrap_or(1)).max(1);
        let out_room = (!dest.in_bucket()).then_some(out.as_path());
        space::check(&file, (&work_home, out_room), budget.bytes, mongod, jobs)?;
    }
    let p = prepare(&a.plan, file)?;
    if a.dry_run {
        let programs = programs.expect("--dry-run is for --engine mongod");
        return dry_run(
            &p,
            &a,
            programs,
            (&cwd, &dest.shown()),
            budget.bytes as usize,
        );
    }
    dest.announce();
    let (members, counts) = if let Some(programs) = programs {
        super::cluster_mongod::replay_members(
            &p,
            &a,
            programs,
            (&cwd, &out),
            budget.bytes as usize,
        )?
    } else {
        std::fs::create_dir_all(&work_home)?;
        let work = tempfile::Builder::new()
            .prefix(match a.workdir {
                Some(_) => "pitr-cluster-",
                None => ".pitr-cluster-work-",
            })
            .tempdir_in(&work_home)?;
        replay_members(&p, &a, work.path(), &cwd, budget.bytes as usize, &out)?
    };
    let exit_code = u8::from(!p.replayed.is_empty() && !a.accept_incidents);
    let (shown, sharding_file) = (dest.shown(), dest.shown_file(restore::SHARDING_FILE));
    let download = dest.download();
    let report = ClusterReplay {
        format: "pitr-cluster-replay/1",
        engine: if mongod { "mongod" } else { "embedded" },
        result: if exit_code == 0 {
            "restored"
        } else {
            "incident_replayed"
        },
        exit_code,
        accept_incidents: a.accept_incidents,
        at: AtLimit::of(&p, shown),
        sharding_file,
        download,
        transactions_at_limit: p.txns.at_limit(&prepared_of(&members)),
        members,
        namespaces: counts,
        seconds: started.elapsed().as_secs_f64(),
    };
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    if a.json {
        super::output::write_json(&mut w, &report)?;
    } else {
        render_replay(&mut w, &report)?;
    }
    w.flush()?;
    Ok(exit_code)
}

/// Where a cluster replay stops and what it holds there, at the head of its report
/// and of its dry run. JSON: `incidents_replayed`, `cluster`, `limit`,
/// `limit_utc`, `explanation`, `out`.
#[derive(Serialize)]
struct AtLimit {
    incidents_replayed: Vec<Replayed>,
    cluster: String,
    limit: Ts,
    limit_utc: String,
    explanation: String,
    out: String,
}

impl AtLimit {
    fn of(p: &Prepared, out: String) -> AtLimit {
        AtLimit {
            incidents_replayed: p.replayed.clone(),
            cluster: p.file.path.display().to_string(),
            limit: p.limit,
            limit_utc: p.limit.utc_string(),
            explanation: p.explanation.clone(),
            out,
        }
    }
}

/// `replay --cluster --engine mongod --dry-run`. JSON: `format`, `exit_code` (the
/// code the real run would end with if every member's restore and verification
/// passed: 1 when it replays incidents without `--accept-incidents`),
/// `incidents_replayed`, `cluster`, `limit`, `limit_utc`, `explanation`, `out`,
/// `jobs` (spares at once), `workdir`, `members` (each with its own dry run).
#[derive(Serialize)]
struct ClusterDryRun {
    format: &'static str,
    exit_code: u8,
    #[serde(flatten)]
    at: AtLimit,
    jobs: u16,
    workdir: String,
    members: Vec<super::cluster_mongod::MemberDryRun>,
}

/// Plans every member as the real run does and prints the spares' commands;
/// nothing is started and --out is not written.
fn dry_run(
    p: &Prepared,
    a: &ReplayArgs,
    programs: (
        crate::replay::tools::Tools,
        crate::plan::versions::VersionHints,
    ),
    (cwd, out): (&Path, &str),
    memory: usize,
) -> Result<u8, Failure> {
    let (work, binaries, members) =
        super::cluster_mongod::dry_run_members(p, a, programs, cwd, memory)?;
    let exit_code = u8::from(!p.replayed.is_empty() && !a.accept_incidents);
    let d = ClusterDryRun {
        format: "pitr-cluster-replay-dry-run/1",
        exit_code,
        at: AtLimit::of(p, out.to_string()),
        jobs: a.jobs.unwrap_or(1).max(1),
        workdir: work.display().to_string(),
        members,
    };
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    if a.json {
        super::output::write_json(&mut w, &d)?;
    } else {
        render_dry_run(&mut w, &d, &binaries)?;
    }
    w.flush()?;
    Ok(exit_code)
}

fn render_dry_run(w: &mut impl Write, d: &ClusterDryRun, binaries: &str) -> io::Result<()> {
    writeln!(
        w,
        "Cluster limit {} ({}), exclusive, one for every member: {}.",
        d.at.limit, d.at.limit_utc, d.at.explanation
    )?;
    writeln!(w)?;
    write!(w, "{binaries}")?;
    for m in &d.members {
        writeln!(w)?;
        writeln!(
            w,
            "Member `{}` ({}): its spare restores to --oplogLimit {} ({} after its backup's end, {} past the limit appended); work dir {}",
            m.member,
            m.role.as_str(),
            m.oplog_limit,
            counted(m.entries, "entry", "entries"),
            counted(m.commits_appended as u64, "commit entry", "commit entries"),
            m.workdir
        )?;
        write!(w, "{}", m.commands)?;
    }
    writeln!(w)?;
    writeln!(
        w,
        "Then     {}; once every member's spare passed its verification, their dumps are merged into `{}` \
         (the config server's routing decides which shard owns each document) with sharding.json.",
        if d.jobs > 1 {
            format!("{} spares at once (--jobs)", d.jobs)
        } else {
            "one spare after the other".to_string()
        },
        d.at.out
    )?;
    writeln!(
        w,
        "Work dir  {} (each member's plan in members/<member>/plan/)",
        d.workdir
    )?;
    // The incidents the restore would hold, each with the --until that stops
    // before it, as the real run's report lists them.
    replayed_lines(w, &d.at.incidents_replayed)?;
    let incidents =
        (d.exit_code == 1).then_some("the incidents REPLAYED above, without --accept-incidents");
    write!(w, "{}", crate::replay::dry_run::go_ahead_text(incidents))?;
    writeln!(
        w,
        "Nothing was run (--dry-run): no spare started, --out not written."
    )
}

/// Each member replayed to the limit (the config server first: its routing decides
/// ownership; then the shards, primaries first), merged, and let go.
fn replay_members(
    p: &Prepared,
    a: &ReplayArgs,
    work: &Path,
    cwd: &Path,
    memory: usize,
    out: &Path,
) -> Result<(Vec<MemberReport>, Vec<NsCount>), Failure> {
    let mut merge: Option<Merge> = None;
    let mut reports = Vec::new();
    let mut order: Vec<&cluster::Member> = restore::order(&p.file, &[]);
    let mut k = 0;
    while k < order.len() {
        let m = order[k];
        let r = p
            .ranges
            .iter()
            .find(|r| r.member == m.id)
            .expect("a range per member");
        let spill = tempfile::tempdir_in(work)?;
        let (_, model, mut rep) = restore::member_plan(
            MemberJob {
                member: m,
                range: r,
                limit: p.limit,
                dir: work.join("members").join(&m.id),
                cwd: cwd.to_path_buf(),
                allow_truncated: a.plan.allow_truncated,
                content: Some((memory, spill.path().to_path_buf())),
                txns: &p.txns,
                mongod: None,
                // The member plans live in a temporary dir removed at the end.
                keep_slice: false,
                sort_room: (!a.no_space_check).then(|| {
                    let backup = preflight::input_size(&m.backup);
                    let oplog = m.oplog.iter().map(|o| preflight::input_size(o)).sum();
                    let store = preflight::store_bytes(backup, oplog, memory as u64);
                    super::room::sort_room_in(work.to_path_buf(), store, &super::room::REPLAY)
                }),
            },
            &Quiet,
        )?;
        let mut model = model;
        model.flush().map_err(Failure::from)?;
        rep.entries_applied = Some(model.replica().applied);
        if a.per_member {
            let dir = work.join("member-dumps").join(&m.id);
            std::fs::create_dir_all(work.join("member-dumps"))?;
            let n = restore::member_dump(model.replica(), m.role, &dir)
                .map_err(|e| e.in_context(format!("member `{}`", m.id)))?;
            rep.dump = Some(
                out.join(restore::MEMBERS_DIR)
                    .join(&m.id)
                    .display()
                    .to_string(),
            );
            rep.dump_documents = Some(n);
        }
        merge_step(p, &mut merge, &mut order, &m.id, model.replica())?;
        drop(model);
        reports.push(rep);
        k += 1;
    }
    let merge = merge.expect("the config server comes first");
    let members = work.join("member-dumps");
    let counts = merge.write(out, p.limit, a.per_member.then_some(members.as_path()))?;
    Ok((reports, counts))
}

/// One member's state into the merge: the config server's first (it starts the
/// merge with its routing, checks `config.shards` against the file, and orders the
/// shards, the databases' primaries first), then each shard's.
pub(super) fn merge_step<'a>(
    p: &'a Prepared,
    merge: &mut Option<Merge>,
    order: &mut Vec<&'a cluster::Member>,
    member: &str,
    replica: &crate::engine::replica::Replica,
) -> Result<(), Failure> {
    let context = format!("member `{member}`");
    match merge {
        None => {
            let mg = Merge::new(replica).map_err(|e| Failure::from(e).in_context(&context))?;
            let ids: Vec<&str> = p.file.shards.iter().map(|s| s.id.as_str()).collect();
            limit::check_shards(&mg.routing.shards, &ids, p.limit)?;
            let prim: Vec<&str> = mg.routing.databases.values().map(String::as_str).collect();
            *order = restore::order(&p.file, &prim);
            *merge = Some(mg);
        }
        Some(mg) => mg
            .add_shard(member, replica)
            .map_err(|e| Failure::from(e).in_context(&context))?,
    }
    Ok(())
}

fn render_replay(w: &mut impl Write, r: &ClusterReplay) -> io::Result<()> {
    writeln!(
        w,
        "Restored the cluster at {} ({}), exclusive, one limit for every member: {}.",
        r.at.limit, r.at.limit_utc, r.at.explanation
    )?;
    writeln!(w)?;
    member_lines(w, &r.members, true)?;
    spare_lines(w, &r.members)?;
    txn_lines(w, &r.transactions_at_limit)?;
    writeln!(w)?;
    writeln!(
        w,
        "NAMESPACE                 SHARDED  DOCUMENTS  LEFT OUT  FROM"
    )?;
    for n in &r.namespaces {
        let from = n
            .owned
            .iter()
            .map(|(s, c)| format!("{s} {c}"))
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(
            w,
            "{:<25} {:<8} {:>9}  {:>8}  {}",
            n.ns,
            if n.sharded { "yes" } else { "no" },
            n.documents,
            n.left_out,
            from
        )?;
    }
    writeln!(w)?;
    writeln!(
        w,
        "One logical dump in `{}` ({}; documents owned at the limit by the config server's chunks; {} left out: \
         orphans, migration clones, copies off the primary shard).",
        r.at.out,
        counted(
            r.namespaces.iter().map(|n| n.documents).sum(),
            "document",
            "documents"
        ),
        r.namespaces.iter().map(|n| n.left_out).sum::<u64>()
    )?;
    replayed_lines(w, &r.at.incidents_replayed)?;
    if r.exit_code == 1 {
        writeln!(
            w,
            "INCIDENT REPLAYED (exit 1): the dump is complete, but holds the damage above; --accept-incidents \
             if that is what you want"
        )?;
    }
    if r.members.iter().any(|m| m.dump.is_some()) {
        writeln!(
            w,
            "Each member's own dump at the limit (--per-member): `{}/{}/<member>/`.",
            r.at.out,
            restore::MEMBERS_DIR
        )?;
    }
    let local = match &r.download {
        Some(cmd) => {
            writeln!(
                w,
                "Download it first (mongorestore reads local files only):\n  {cmd}"
            )?;
            // Where that download puts it.
            crate::storage::Location::parse(&r.at.out)
                .map(|l| l.local_name())
                .unwrap_or_else(|_| "dump".to_string())
        }
        None => r.at.out.clone(),
    };
    writeln!(
        w,
        "Before restoring through mongos, shard the collections: the mongosh commands are in `{}`; then:\n  \
         mongorestore --uri mongodb://MONGOS {local}",
        r.sharding_file
    )?;
    Ok(())
}

/// `--engine mongod`: each member's spare, its resolved slice and its verification.
fn spare_lines(w: &mut impl Write, members: &[MemberReport]) -> io::Result<()> {
    for m in members {
        let Some(md) = &m.mongod else { continue };
        let spare = match &md.spare {
            Some(s) if s.kept => format!(
                "spare KEPT running at {} (pid {}; stop: kill {})",
                s.uri, s.pid, s.pid
            ),
            Some(s) => format!(
                "spare 127.0.0.1:{} {}",
                s.port,
                s.stopped.as_deref().unwrap_or("stopped")
            ),
            None => "no spare".into(),
        };
        let mut slice = format!(
            "mongorestore --oplogReplay --oplogLimit {} of {}",
            md.slice.oplog_limit,
            counted(md.slice.entries, "entry", "entries")
        );
        if !md.slice.commits_appended.is_empty() {
            let c: Vec<String> = md
                .slice
                .commits_appended
                .iter()
                .map(|c| format!("{} at {}", c.txn, c.ts))
                .collect();
            slice.push_str(&format!(
                " (with the commitTransaction past the limit of: {})",
                c.join("; ")
            ));
        }
        if md.slice.prepares_copied > 0 {
            slice.push_str(&format!(
                ", {} copied from before the backup's end",
                counted(md.slice.prepares_copied, "prepare", "prepares")
            ));
        }
        if md.slice.config_apply_ops > 0 {
            slice.push_str(&format!(
                ", {} on config.$cmd given on admin.$cmd",
                counted(
                    md.slice.config_apply_ops,
                    "chunk commit applyOps",
                    "chunk commit applyOps"
                )
            ));
        }
        let verified = match &md.verification {
            Some(v) => format!(
                "verified: {} of {} passed (counts and dbHash against the embedded engine's prediction{})",
                v.checked - v.failed,
                counted(v.checked as u64, "check", "checks"),
                if v.routing_checked.is_empty() { "" } else { "; the routing collections by their dump" }
            ),
            None => "not verified".into(),
        };
        writeln!(w, "  {}: {spare}; {slice}; {verified}", m.member)?;
    }
    Ok(())
}
