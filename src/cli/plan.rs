//! `pitr plan`: check that a backup and an oplog cover a restore point, show the
//! exact exclusive limit and every step, and write the oplog slice to replay.
//! The work is in [`crate::plan`]; this file parses flags and renders the result.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{exit, Failure};
use crate::oplog::Ts;
use crate::storage::Location;

use super::local_only::local_only_opt;
use crate::plan::expect::DEFAULT_ID_CAP;
use crate::plan::steps::shell_line;
use crate::plan::versions::{VersionHints, VersionSource};
use crate::plan::{
    self, parse_until, LintSeverity, Mode, NsKind, PlanRequest, Progress, RestorePlan, UntilSpec,
};
use crate::stream::ByteCounter;
use crate::table::counted;
use crate::time::{parse_time, TimeValue};

use super::progress::ScanProgress;

// No doc comment here: the one-line about comes from `Command::Plan` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
The limit is EXCLUSIVE, as mongorestore's --oplogLimit: entries with ts < limit are \
applied, the entry at the limit and everything after it are not.

--until forms:
  T:I                    an exact oplog position, used as is
  RFC 3339, epoch, T, T:, oid:<hex>
                         a wall-clock second, mapped to the FIRST oplog entry at or after it;
                         that entry's t:i is the limit (the plan names the entry)
  auto                   just before the first critical or high-severity destructive operation
                         after the backup's end (what `pitr find-drop` reports)
  end                    just after the last entry of the backup's oplog and --oplog

What it checks: the oplog reaches back to the backup's end (the last entry of the backup's \
own oplog.bson, or --backup-end) and forward to the limit; a gap is an error naming both \
sides. It lints the replayed range (commands mongorestore cannot apply, renames, \
transactions cut by the limit, index builds it skips) and computes the document count of \
every namespace after the replay.

What it writes: the slice, the entries with backup end < ts < limit, sorted, filtered by \
--ns, minus --skip, and OUT/plan.json (the whole plan, as --json prints it; schema in \
docs/plan.md). For a directory backup restored whole, the slice is OUT/restore/oplog.bson: \
OUT/restore/ links to the backup's databases, and its oplog.bson holds the backup's own \
entries, then the slice (one mongorestore --oplogReplay run); for an archive backup, \
OUT/restore.archive (the archive with the slice appended to its oplog); otherwise \
OUT/oplog.bson. plan.json's slice.oplog_file names the file. OUT defaults to \
./pitr-plan-<t>-<i>. Nothing is written when a check fails.

Exit codes: 0 plan written; 1 plan written but the lint found errors (the replay would fail \
or lose data); 2 no plan (bad input, coverage gap, ...).

Examples:
  pitr plan --backup dump/ --oplog oplog.bson --until auto
  pitr plan --backup dump/ --oplog oplog.bson --until 2026-11-21T03:12:00Z --ns 'shop.*'
  pitr plan --backup dump/ --oplog oplog.bson --until end --skip 1795741200:3
  pitr plan --backup nightly/ --backup-end 2026-11-21T01:00:00Z --oplog oplog.bson --until auto
  pitr plan --backup dump/ --oplog oplog.bson --until auto --json | jq -r .until.limit
  pitr plan --cluster cluster.toml --until auto      (a sharded cluster: docs/sharded.md)")]
pub struct PlanArgs {
    #[command(flatten)]
    pub input: PlanInputArgs,
    /// Print the whole plan as JSON on stdout (schema in docs/plan.md)
    #[arg(long)]
    pub json: bool,
    /// Where to write oplog.bson and plan.json [default: ./pitr-plan-<t>-<i>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Lint for this mongorestore release (what it skips and refuses) [default: the newest pitr knows]
    #[arg(long, value_name = "VERSION")]
    pub mongorestore_version: Option<String>,
    /// Lint for a spare mongod of this release (what its applyOps refuses)
    /// [default: the source server's version recorded in the backup, else the newest pitr knows]
    #[arg(long, value_name = "VERSION")]
    pub mongod_version: Option<String>,
    /// Skip the check that --out's filesystem has room for the slice and mongorestore's
    /// one-run inputs
    #[arg(long)]
    pub no_space_check: bool,
}

impl PlanArgs {
    /// The versions given on the command line.
    pub fn version_hints(&self) -> VersionHints {
        VersionHints {
            mongorestore: self
                .mongorestore_version
                .clone()
                .map(|v| (v, VersionSource::Flag)),
            mongod: self
                .mongod_version
                .clone()
                .map(|v| (v, VersionSource::Flag)),
            backup_server: None,
        }
    }
}

/// The flags that say what to plan, shared by `pitr plan` and `pitr replay` so the
/// two accept exactly the same plan.
#[derive(Debug, clap::Args)]
pub struct PlanInputArgs {
    /// The backup: what `mongodump --oplog` wrote: a directory (plain or --gzip) or an
    /// --archive file (plain or --gzip), recognised by content
    #[arg(long, value_name = "DIR|ARCHIVE", required_unless_present = "cluster")]
    pub backup: Option<PathBuf>,
    /// The oplog to replay after the backup's end: a .bson file (gzip or not), a dump
    /// directory, a mongodump archive, or an oplog archive directory (`pitr archive`)
    #[arg(long, value_name = "FILE|DIR", required_unless_present = "cluster")]
    pub oplog: Option<String>,
    /// A sharded cluster (cluster.toml: the config server and every shard, each with
    /// its backup and oplog) instead of --backup/--oplog: one limit for every member
    /// (docs/sharded.md)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["backup", "oplog", "backup_end", "skip", "ns"])]
    pub cluster: Option<PathBuf>,
    /// Restore point, exclusive: T:I, RFC 3339, epoch, oid:<hex>, `auto` or `end`
    /// (also `--oplogLimit`, as mongorestore names it)
    #[arg(long, visible_alias = "oplogLimit", value_name = "V", value_parser = parse_until, allow_hyphen_values = true)]
    pub until: UntilSpec,
    /// Only replay entries touching namespaces matching this glob (`shop.orders`, `shop.*`); repeatable
    #[arg(long = "ns", value_name = "GLOB")]
    pub ns: Vec<String>,
    /// Leave out the entry with exactly this ts (e.g. the bad operation) and keep later writes; repeatable
    #[arg(long, value_name = "T:I", value_parser = parse_time)]
    pub skip: Vec<TimeValue>,
    /// For a backup without its own oplog: the position its data is complete up to
    /// (for a dump made without --oplog, the time it STARTED)
    #[arg(long, value_name = "V", value_parser = parse_time)]
    pub backup_end: Option<TimeValue>,
    /// Use the complete entries of a truncated oplog instead of failing
    #[arg(long)]
    pub allow_truncated: bool,
    /// Do not compute expected counts (they keep every backup _id in memory, ~70 bytes each)
    #[arg(long)]
    pub no_expect: bool,
    /// Leave expected counts out above this many documents, in the backup or held during the replay
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ID_CAP)]
    pub expect_max_ids: u64,
    /// Memory for sorting an unsorted oplog before spilling sorted runs to disk
    #[arg(long, value_name = "MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub sort_memory: u64,
}

impl PlanInputArgs {
    /// `--backup` (present unless `--cluster` is: clap requires one of them).
    pub fn backup_path(&self) -> &std::path::Path {
        self.backup.as_deref().unwrap_or(std::path::Path::new(""))
    }

    /// `--oplog` (present unless `--cluster` is).
    pub fn oplog_spec(&self) -> &str {
        self.oplog.as_deref().unwrap_or("")
    }

    /// The plan request, writing into `out` (None: the default beside `cwd`).
    pub fn request(
        self,
        out: Option<PathBuf>,
        cwd: PathBuf,
        versions: VersionHints,
    ) -> PlanRequest {
        PlanRequest {
            backup_end: self.backup_end,
            ns: self.ns,
            skip: self.skip,
            out,
            allow_truncated: self.allow_truncated,
            expect: !self.no_expect,
            id_cap: self.expect_max_ids,
            sort_memory: (self.sort_memory as usize).saturating_mul(1 << 20),
            versions,
            ..PlanRequest::new(
                self.backup.unwrap_or_default(),
                self.oplog.unwrap_or_default(),
                self.until,
                cwd,
            )
        }
    }
}

/// Progress of the plan's passes ([`ScanProgress`]: a bar on a terminal, log lines
/// off one; nothing when `enabled` is false).
pub(crate) struct CliProgress {
    pub(crate) enabled: bool,
    /// Print what the restore replays and leaves out on stderr as soon as it is
    /// known (`pitr replay`: before anything is applied; `pitr plan` prints it in
    /// the plan instead).
    pub(crate) stake: bool,
}

impl Progress for CliProgress {
    fn opening(&self, source: &str) -> Box<dyn FnOnce(bool) + '_> {
        super::progress::opening(source, self.enabled)
    }

    fn pass(&self, what: &str, counter: ByteCounter, total: Option<u64>) -> Box<dyn FnMut() + '_> {
        let bar = ScanProgress::new(what, counter, total, self.enabled);
        Box::new(move || bar.tick())
    }

    fn at_stake(&self, stake: &plan::stake::Stake, timeline: &plan::glance::Points<'_>) {
        if self.stake {
            eprintln!("{}", stake_text(stake, timeline));
        }
    }
}

/// The timeline and what the restore replays and leaves out, as `pitr replay`
/// prints them on stderr before anything is applied.
pub(crate) fn stake_text(
    stake: &plan::stake::Stake,
    timeline: &plan::glance::Points<'_>,
) -> String {
    format!(
        "{}\n{}",
        plan::glance::points_line(timeline, crate::table::width()),
        stake.text_lines(timeline.limit).join("\n")
    )
}

/// Why a plan is written locally: what it holds is for a mongorestore run on this
/// machine.
const PLAN_STAYS_LOCAL: &str = "give a local directory: a plan's `restore/` links the backup's \
files for a mongorestore run on this machine (copied to a bucket, they would be the whole \
backup again); `pitr replay --out s3://...` uploads the restored dump instead";

pub fn run(a: PlanArgs) -> Result<u8, Failure> {
    let versions = a.version_hints();
    let out = local_only_opt("--out", a.out.clone(), PLAN_STAYS_LOCAL)?;
    if a.input.cluster.is_some() {
        return super::cluster_restore::plan(a);
    }
    let in_bucket = !Location::of_path(a.input.backup_path())?.is_local();
    let mut req = a.input.request(out, std::env::current_dir()?, versions);
    if in_bucket {
        // mongorestore reads local files only: the one-run inputs it would read (the
        // backup linked or copied beside the slice) are not written, and its commands
        // need the backup downloaded first.
        req.mongorestore_inputs = false;
        eprintln!(
            "note: the backup is in object storage: `pitr replay` (embedded engine) reads it in place; the mongorestore \
             commands of this plan need it downloaded first"
        );
    }
    if !a.no_space_check {
        req.sort_room = Some(check_room(&req, !a.json)?);
    }
    let plan = plan::build(
        &req,
        &CliProgress {
            enabled: !a.json,
            stake: false,
        },
    )?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if a.json {
        super::output::write_json(&mut out, &plan)?;
    } else {
        render(&mut out, &plan)?;
    }
    out.flush()?;
    Ok(if plan.lint_errors() > 0 {
        exit::NOT_FOUND
    } else {
        exit::OK
    })
}

/// Refused before anything is read (unless `--no-space-check`): an output directory
/// whose filesystem lacks room for what the plan writes there, estimated from the
/// inputs' sizes as `pitr replay --engine mongod` counts them: the slice (at most
/// the oplog's bytes) and, for mongorestore's one run ([`one_run_bytes`]), an
/// archive backup copied with the slice appended, or the directory backup's own
/// oplog entries. Returns the check asked for once the scan finds the oplog out of
/// order: the sorted slice (and its runs past `--sort-memory`) with the one-run
/// copy, against what is free then.
fn check_room(req: &PlanRequest, show: bool) -> Result<plan::SortRoom, Failure> {
    use crate::replay::preflight::{self, Need};
    // For an input in a bucket, the first request to the store: said if it is slow.
    let waiting = super::progress::Waiting::start(super::replay::SIZES, show);
    let oplog = preflight::input_size(Path::new(&req.oplog));
    let archive = req.mongorestore_inputs && req.backup.is_file();
    let one_run = one_run_bytes(req, oplog);
    waiting.end("done in");
    let dir = match &req.out {
        Some(o) => req.cwd.join(crate::storage::parent_dir(o)),
        None => req.cwd.clone(),
    };
    let needs = move |slice: u64| {
        vec![Need {
            dir: dir.clone(),
            bytes: slice + one_run,
            what: match (archive, one_run) {
                (true, _) => "the slice and the one-run restore archive".into(),
                (false, 0) => "the slice".into(),
                (false, _) => "the slice and the one-run restore/oplog.bson".into(),
            },
        }]
    };
    preflight::check_space(&needs(oplog))
        .map_err(|e| super::room::failure(e, &super::room::PLAN))?;
    Ok(super::room::sort_room(needs, &super::room::PLAN))
}

/// What mongorestore's one-run inputs add beside the slice (`plan::onerun`),
/// estimated before anything is read from the inputs' sizes:
///
/// - an archive backup: a copy of it with the slice appended (its bytes and the
///   oplog's again);
/// - a directory backup: its files are linked, not copied, but the one-run
///   `oplog.bson` holds the backup's own oplog entries before the slice's. Written
///   into the slice file itself and hard-linked for a plain backup restored whole
///   (its root oplog file's bytes more); for a gzip backup, a namespace filter or a
///   backup already in the spare, a second file: the backup's oplog, then the slice
///   again (compressed for a gzip backup, which this counts as the compressed root
///   oplog file plus the slice uncompressed, a bound).
fn one_run_bytes(req: &PlanRequest, oplog: u64) -> u64 {
    use crate::replay::preflight::input_size;
    if !req.mongorestore_inputs {
        return 0;
    }
    if req.backup.is_file() {
        return input_size(&req.backup) + oplog;
    }
    let plain = req.backup.join("oplog.bson");
    let (own, gzip) = match std::fs::metadata(&plain) {
        Ok(m) => (m.len(), starts_with_gzip_magic(&plain)),
        Err(_) => match std::fs::metadata(req.backup.join("oplog.bson.gz")) {
            Ok(m) => (m.len(), true),
            Err(_) => (0, false),
        },
    };
    let linked = !gzip && req.ns.is_empty() && !req.backup_in_spare;
    own + if linked { 0 } else { oplog }
}

/// `mongodump --gzip` of some releases names its compressed oplog `oplog.bson`.
fn starts_with_gzip_magic(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| crate::stream::gzip::is_gzip(&head))
}

fn at(ts: Ts) -> String {
    format!("{ts} ({})", ts.utc_string())
}

fn opt_at(ts: Option<Ts>) -> String {
    ts.map_or_else(|| "-".to_string(), at)
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn table(
    out: &mut impl Write,
    indent: &str,
    header: &[&str],
    rows: &[Vec<String>],
) -> io::Result<()> {
    out.write_all(crate::table::render(indent, header, rows).as_bytes())
}

/// The plan as `pitr plan` prints it, section by section.
pub(crate) fn render(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    render_as(out, p, Rendering::Made)
}

/// The plan as a dry run shows it (`replay --dry-run`): nothing was run, so no
/// placeholder steps (the dry run's commands, with real paths, follow) and no word
/// that the embedded engine applied the slice.
pub(crate) fn render_dry_run(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    render_as(out, p, Rendering::DryRun)
}

/// What a plan's text is shown for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rendering {
    /// `pitr plan`, and a replay's plan once made (and, by the embedded engine,
    /// applied).
    Made,
    /// `replay --dry-run`: nothing run, nothing applied.
    DryRun,
}

fn render_as(out: &mut impl Write, p: &RestorePlan, how: Rendering) -> io::Result<()> {
    render_backup(out, p)?;
    render_oplog(out, p)?;
    render_until(out, p)?;
    render_stake(out, p)?;
    render_coverage(out, p)?;
    render_lint(out, p)?;
    render_expected(out, p)?;
    render_slice(out, p, how)?;
    if how == Rendering::Made {
        render_steps(out, p)?;
    }
    render_tail(out, p)?;
    Ok(())
}

/// The backup: its namespaces, its own oplog, its end.
fn render_backup(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    let b = &p.backup;
    writeln!(out, "Backup    {}", b.dir)?;
    let collections = b
        .namespaces
        .iter()
        .filter(|n| matches!(n.kind, NsKind::Collection | NsKind::Timeseries))
        .count();
    writeln!(
        out,
        "  {}, {}{}",
        counted(collections as u64, "collection", "collections"),
        counted(b.documents, "document", "documents"),
        if b.gzip { ", gzip-compressed" } else { "" }
    )?;
    let rows: Vec<Vec<String>> = b
        .namespaces
        .iter()
        .map(|n| {
            let kind = n.kind.label(n.capped);
            vec![
                n.ns.clone(),
                kind.to_string(),
                n.documents.to_string(),
                if n.metadata_file.is_some() {
                    "yes"
                } else if n.has_metadata {
                    "in prelude"
                } else {
                    "no"
                }
                .to_string(),
            ]
        })
        .collect();
    table(
        out,
        "    ",
        &["NAMESPACE", "KIND", "DOCUMENTS", "METADATA"],
        &rows,
    )?;
    match &b.oplog {
        Some(o) => writeln!(
            out,
            "  own oplog: {} entries, {} .. {}",
            o.entries,
            opt_at(o.first_ts),
            opt_at(o.last_ts)
        )?,
        None => writeln!(out, "  own oplog: none")?,
    }
    writeln!(
        out,
        "  end: {} ({})",
        at(b.end_ts),
        if b.end_source == "flag" {
            "from --backup-end"
        } else {
            "the last entry of its own oplog"
        }
    )?;
    writeln!(out)?;
    Ok(())
}

/// The replay oplog: range and order.
fn render_oplog(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    let o = &p.oplog;
    writeln!(out, "Oplog     {}", o.path)?;
    writeln!(
        out,
        "  {} entries, {} .. {}",
        o.entries,
        opt_at(o.first_ts),
        opt_at(o.last_ts)
    )?;
    if o.sorted {
        writeln!(out, "  in ts order")?;
    } else {
        writeln!(out, "  NOT in ts order: {} entries lower than the one before them; the slice is written sorted", o.out_of_order)?;
    }
    if let Some(t) = &o.truncated {
        writeln!(out, "  truncated: {t}")?;
    }
    writeln!(out)?;
    Ok(())
}

/// The restore point and the limit.
fn render_until(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    let u = &p.until;
    writeln!(
        out,
        "Until     {} -> limit {} (exclusive)",
        u.input,
        at(u.limit)
    )?;
    writeln!(out, "  {}", u.explanation)?;
    if let Some(f) = &u.finding {
        writeln!(
            out,
            "  finding: {} {} of {} at {}: {}",
            f.severity, f.kind, f.ns, f.ts, f.details
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The timeline, and what the restore replays and leaves out.
fn render_stake(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    writeln!(out, "{}", plan::glance::line(p, crate::table::width()))?;
    for line in p.stake.text_lines(p.until.limit) {
        writeln!(out, "{line}")?;
    }
    writeln!(out)?;
    Ok(())
}

/// Coverage.
fn render_coverage(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    let c = &p.coverage;
    match c.mode {
        Mode::WithinBackupOplog => writeln!(
            out,
            "Coverage  ok: the limit lies inside the backup's own oplog; it is replayed up to {} and no slice is needed",
            c.limit
        )?,
        Mode::AfterBackup if !c.oplog_needed => writeln!(
            out,
            "Coverage  ok: nothing can lie between the backup's end {} and the limit {}",
            c.backup_end, c.limit
        )?,
        Mode::AfterBackup => {
            writeln!(out, "Coverage  ok: the oplog reaches back to the backup's end and forward to the limit")?;
            writeln!(out, "  oplog first {} <= backup end {}{}", opt_at(c.oplog_first), at(c.backup_end), match c.anchored {
                Some(true) => " (it holds the entry at the backup's end)",
                Some(false) => " (but it lacks the entry at the backup's end: see lint)",
                None => "",
            })?;
            writeln!(out, "  oplog last  {} reaches the limit {}", opt_at(c.oplog_last), at(c.limit))?;
        }
    }
    writeln!(out)?;
    Ok(())
}

/// The lint, and the rules it applied.
fn render_lint(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    let count = |s: LintSeverity| p.lint.iter().filter(|l| l.severity == s).count();
    writeln!(
        out,
        "Lint      {}, {}, {} info",
        counted(count(LintSeverity::Error) as u64, "error", "errors"),
        counted(count(LintSeverity::Warning) as u64, "warning", "warnings"),
        count(LintSeverity::Info)
    )?;
    if let Some(v) = &p.versions {
        let from = |s: VersionSource| match s {
            VersionSource::Flag => "given",
            VersionSource::Binary => "the program's --version",
            VersionSource::Backup => "assumed: the backup's source server",
            VersionSource::Default => "assumed: the newest pitr knows",
        };
        writeln!(
            out,
            "  rules of mongorestore {} ({}) and a spare mongod {} ({})",
            v.mongorestore,
            from(v.mongorestore_source),
            v.mongod,
            from(v.mongod_source)
        )?;
    }
    for l in &p.lint {
        let times = if l.count > 1 {
            format!(" (x{})", l.count)
        } else {
            String::new()
        };
        let ts = l.ts.map_or_else(String::new, |t| format!(" {t}"));
        let ns = if l.ns.is_empty() {
            String::new()
        } else {
            format!(" {}", l.ns)
        };
        writeln!(
            out,
            "  {:<7} {}{ts}{ns}{times}: {}",
            l.severity.as_str(),
            l.code,
            l.message
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The expected documents after the replay.
fn render_expected(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    match &p.expected {
        Some(exp) => {
            writeln!(
                out,
                "Expected  documents after the replay (limit {} exclusive)",
                p.until.limit
            )?;
            let rows: Vec<Vec<String>> = exp
                .iter()
                .map(|e| {
                    let note = match e.num_records {
                        Some(n) if n >= 0 && e.exists && e.documents == n as u64 => {
                            format!("= numRecords {n} of the entry at the limit")
                        }
                        Some(n) => format!("entry at the limit recorded numRecords {n}"),
                        None => String::new(),
                    };
                    vec![
                        e.ns.clone(),
                        e.backup_documents
                            .map_or_else(|| "-".to_string(), |n| n.to_string()),
                        if e.exists {
                            e.documents.to_string()
                        } else {
                            "absent".to_string()
                        },
                        note,
                    ]
                })
                .collect();
            table(
                out,
                "    ",
                &["NAMESPACE", "BACKUP", "EXPECTED", "NOTE"],
                &rows,
            )?;
        }
        None => writeln!(
            out,
            "Expected  counts not computed: {}",
            p.expected_note.as_deref().unwrap_or("-")
        )?,
    }
    writeln!(out)?;
    Ok(())
}

/// The slice written.
fn render_slice(out: &mut impl Write, p: &RestorePlan, how: Rendering) -> io::Result<()> {
    let s = &p.slice;
    if s.kept {
        writeln!(out, "Slice     {}", s.oplog_file)?;
    } else {
        writeln!(
            out,
            "Slice     not kept: the engine applies it as it reads it (`--keep-slice` writes it as {})",
            s.oplog_file
        )?;
    }
    writeln!(
        out,
        "  {} entries ({} bytes): ts > {} (backup end) and < {} (limit, exclusive)",
        s.entries, s.bytes, s.from_exclusive, s.to_exclusive
    )?;
    if s.entries > 0 {
        writeln!(
            out,
            "  first {} .. last {}",
            opt_at(s.first_ts),
            opt_at(s.last_ts)
        )?;
    }
    if s.reordered {
        writeln!(out, "  sorted by pitr: the oplog was not in ts order")?;
    }
    if s.duplicates_dropped > 0 {
        writeln!(
            out,
            "  {} duplicate entries written once",
            s.duplicates_dropped
        )?;
    }
    if s.same_ts_kept > 0 {
        writeln!(
            out,
            "  {} entries share their ts with a different entry (all kept)",
            s.same_ts_kept
        )?;
    }
    if !p.ns_filter.is_empty() {
        writeln!(
            out,
            "  --ns {}: {} entries filtered out",
            p.ns_filter.join(" "),
            s.filtered_out
        )?;
    }
    for k in &p.skips {
        let what = if k.outcome == "skipped" {
            "skipped"
        } else {
            "already filtered out by --ns"
        };
        writeln!(out, "  --skip {}: {what}: {}", k.ts, k.entry.describe())?;
    }
    if p.restore.combined && !p.restore.inputs_written {
        // A dry run applied nothing, and shows no steps: the slice's line above says
        // how it would be applied.
        if how == Rendering::Made {
            let in_file = match s.kept {
                true => format!("in {}: ", s.oplog_file),
                false => String::new(),
            };
            writeln!(
                out,
                "  {in_file}the embedded engine applied it; the one-run restore files the steps below read \
                 were not written (`pitr plan` writes them)",
            )?;
        }
    } else if let (true, Some(st)) = (p.restore.combined, &p.restore.stream) {
        writeln!(
            out,
            "  in {}: pitr streams the archive {} into mongorestore's standard input with this slice appended to its \
             oplog, so the backup and the slice are restored in ONE run (no copy of the archive on disk)",
            p.slice.oplog_file, st.backup
        )?;
    } else if p.restore.combined {
        writeln!(
            out,
            "  in {} after the backup's own entries: the backup and the slice are restored in ONE mongorestore run \
             (its index catalog and transaction buffer then see both)",
            p.slice.oplog_file
        )?;
    } else if p.restore.slice_dir.is_none() {
        writeln!(
            out,
            "  nothing to replay after the backup's end: no separate replay step"
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The restore steps.
fn render_steps(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    writeln!(
        out,
        "Steps     (replace <PORT>, <DBPATH>, <DUMP_DIR>; `pitr replay` runs them for you)"
    )?;
    for st in &p.steps {
        writeln!(out, "  {}. {}", st.number, st.title)?;
        for cmd in &st.commands {
            writeln!(out, "       {}", shell_line(cmd))?;
        }
        if let Some(n) = &st.note {
            writeln!(out, "       # {n}")?;
        }
    }
    writeln!(out)?;
    Ok(())
}

/// Where the plan is, and what its lint means.
fn render_tail(out: &mut impl Write, p: &RestorePlan) -> io::Result<()> {
    writeln!(out, "Plan written to {}", p.restore.plan_file)?;
    if p.lint_errors() > 0 {
        writeln!(
            out,
            "The lint found {}: the replay would fail or lose data as planned.",
            counted(p.lint_errors() as u64, "error", "errors")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};
    use crate::plan::UntilSpec;

    /// An oplog found out of order is sorted in the plan's directory: the check
    /// asked then counts the sort's peak with the one-run copy, in the plan's words.
    #[test]
    fn the_sort_of_an_oplog_out_of_order_is_checked_in_the_plans_directory() {
        use crate::error::Hint;
        let d = tempfile::tempdir().unwrap();
        let oplog = d.path().join("oplog.bson");
        std::fs::write(&oplog, [5u8, 0, 0, 0, 0]).unwrap();
        let a = parse(&[
            "--backup",
            "b",
            "--oplog",
            oplog.to_str().unwrap(),
            "--until",
            "end",
        ])
        .unwrap();
        let req = a
            .input
            .request(None, d.path().to_path_buf(), Default::default());
        let room = super::check_room(&req, false).unwrap();
        (room.0)(1 << 20).unwrap();
        let e = (room.0)(u64::MAX / 4).unwrap_err();
        let message = e.to_string();
        assert!(
            message.starts_with("the oplog is out of order, so its slice is sorted in the plan's directory first: not enough free space on the filesystem of")
                && message.contains(&d.path().display().to_string())
                && message.contains("the plan writes about"),
            "{message}"
        );
        assert!(e.hint().unwrap().contains("give --out"), "{:?}", e.hint());
    }

    /// What the one-run inputs add is counted for every backup form: the archive's
    /// copy, a plain directory's own oplog (in the linked slice), and the second
    /// file (own oplog, then the slice again) for a gzip backup or a filter.
    #[test]
    fn the_one_run_inputs_are_counted_for_every_backup_form() {
        let d = tempfile::tempdir().unwrap();
        let oplog = d.path().join("oplog.bson");
        std::fs::write(&oplog, vec![0u8; 1000]).unwrap();
        let bytes = |backup: &std::path::Path, extra: &[&str]| {
            let mut args = vec![
                "--backup",
                backup.to_str().unwrap(),
                "--oplog",
                oplog.to_str().unwrap(),
                "--until",
                "end",
            ];
            args.extend_from_slice(extra);
            let req = parse(&args).unwrap().input.request(
                None,
                d.path().to_path_buf(),
                Default::default(),
            );
            assert!(req.mongorestore_inputs);
            super::one_run_bytes(&req, 1000)
        };
        let archive = d.path().join("backup.archive");
        std::fs::write(&archive, vec![0u8; 5000]).unwrap();
        assert_eq!(bytes(&archive, &[]), 6000);

        let plain = d.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        assert_eq!(bytes(&plain, &[]), 0, "no oplog in the backup");
        std::fs::write(plain.join("oplog.bson"), vec![0u8; 300]).unwrap();
        assert_eq!(bytes(&plain, &[]), 300, "linked: the slice holds them");
        assert_eq!(bytes(&plain, &["--ns", "shop.*"]), 1300, "copied");

        let gz = d.path().join("gz");
        std::fs::create_dir(&gz).unwrap();
        std::fs::write(gz.join("oplog.bson.gz"), vec![0x1fu8; 200]).unwrap();
        assert_eq!(bytes(&gz, &[]), 1200);
        let named_plain = d.path().join("gz-named-plain");
        std::fs::create_dir(&named_plain).unwrap();
        let mut magic = vec![0x1fu8, 0x8b];
        magic.resize(250, 0);
        std::fs::write(named_plain.join("oplog.bson"), magic).unwrap();
        assert_eq!(bytes(&named_plain, &[]), 1250);
    }

    fn parse(args: &[&str]) -> Result<super::PlanArgs, String> {
        let mut all = vec!["pitr", "plan"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all) {
            Ok(Cli {
                command: Command::Plan(a),
            }) => Ok(a),
            Ok(other) => Err(format!("not plan: {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn command_lines() {
        let base = ["--backup", "b", "--oplog", "o.bson"];
        let ok = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            parse(&v).unwrap_or_else(|e| panic!("{extra:?}: {e}"))
        };
        assert_eq!(ok(&["--until", "auto"]).input.until, UntilSpec::Auto);
        assert_eq!(ok(&["--until", "end"]).input.until, UntilSpec::End);
        let a = ok(&[
            "--until",
            "1700000000:3",
            "--ns",
            "shop.*",
            "--ns",
            "crm.leads",
            "--skip",
            "1700000000:1",
            "--json",
        ]);
        assert_eq!(
            (
                a.input.ns.len(),
                a.input.skip.len(),
                a.json,
                a.input.sort_memory
            ),
            (2, 1, true, 256)
        );
        assert!(ok(&[
            "--until",
            "2026-11-21T03:12:00+01:00",
            "--backup-end",
            "oid:47cc67093475061e3d95369d"
        ])
        .input
        .backup_end
        .is_some());
        assert!(
            ok(&[
                "--until",
                "auto",
                "--no-expect",
                "--expect-max-ids",
                "10",
                "--sort-memory",
                "1"
            ])
            .input
            .no_expect
        );

        let bad = |args: &[&str], needle: &str| {
            let err = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} parsed"));
            assert!(err.contains(needle), "{args:?}: {err}");
        };
        bad(&["--oplog", "o", "--until", "auto"], "--backup");
        bad(&["--backup", "b", "--until", "auto"], "--oplog");
        bad(&base, "--until");
        let with = |extra: &[&str]| -> Vec<String> {
            base.iter().chain(extra).map(|s| s.to_string()).collect()
        };
        let check = |extra: &[&str], needle: &str| {
            let v = with(extra);
            let refs: Vec<&str> = v.iter().map(String::as_str).collect();
            bad(&refs, needle);
        };
        check(&["--until", "yesterday"], "`yesterday`");
        check(&["--until", "1:2:3"], "more than one `:`");
        check(&["--until", "auto", "--skip", "x"], "`x`");
        check(&["--until", "auto", "--sort-memory", "0"], "--sort-memory");
        check(&["--until", "2026-11-21T03:12:00"], "no UTC offset");
    }
}
