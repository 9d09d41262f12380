//! `pitr replay`: plan, restore onto a spare mongod, roll forward to the limit,
//! verify, optionally dump, report. The work is in [`crate::replay`]; this file
//! parses flags, builds the plan (same flags and code as `pitr plan`), starts
//! tokio, and prints.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backup::upload;
use crate::error::{exit, Failure};
use crate::exec::binaries::ToolSearch;
use crate::exec::signals::{listen_for_signals, CancelLevel, SignalNotice};
use crate::exec::Cancel;
use crate::plan;
use crate::replay::preflight::{self, Need, PreflightError};
use crate::replay::progress::{seconds, Console};
use crate::replay::report::{ReplayReport, ResultKind, Timing};
use crate::replay::tools::{describe, Tools, STANDIN_BANNER};
use crate::replay::{download, dry_run, tools};
use crate::replay::{execute, summary, ReplayError, Settings, WorkDir};
use crate::verify::DEFAULT_CONNECT_TIMEOUT;

use crate::storage::Location;

use super::local_only::local_only_opt;
use super::plan::{CliProgress, PlanInputArgs};

// No doc comment here: the one-line about comes from `Command::Replay` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Two engines restore the same plan (the one `pitr plan` shows):

--engine embedded (the default): no MongoDB needed, nothing started, no network.
  1. plan: coverage, the exclusive limit, what the restore replays and leaves out (printed \
before anything is applied), lint
  2. apply the backup, its own oplog and the slice in-process, as a secondary applies them
  3. dbHash of every collection; write --out as mongodump writes it (a directory, --gzip, \
--archive), under a temporary name renamed when complete; the documents the incident at the \
limit destroys are written on their own beside it (<out>-destroyed)
  4. report.md and report.json in the work dir, and the mongorestore commands that hand the \
affected namespace over

--engine mongod: a spare mongod and mongorestore (looked up in --mongodb-bin, then \
$PITR_MONGODB_BIN, then PATH).
  1. start a spare standalone mongod: 127.0.0.1 only, a free port, a new dbpath in the \
work dir, TTL monitor off
  2. mongorestore the backup (with --oplogReplay of its own oplog when it has one); a \
backup in a bucket (s3://, gs://, az://) is downloaded into the work dir first, saying how \
much and where (mongorestore reads local files only)
  3. mongorestore --oplogReplay --oplogLimit <limit> of the plan's slice; the limit is \
EXCLUSIVE: the entry at the limit and everything after it are not applied
  4. verify: counts and dbHash of every namespace against the plan's prediction
  5. with --out: mongodump the restored namespaces (renamed to DIR when complete)
  6. stop the spare (SIGTERM, the --grace period, then SIGKILL) and remove its dbpath, \
also after a failure and on Ctrl-C; --keep leaves it running and prints how to connect

Before any work: --out must be new or an empty directory in a writable place, and the \
disks must have room (--no-space-check skips the estimate). Progress goes to stderr (the \
embedded engine: a bar per phase on a terminal, else a line every PITR_PROGRESS_INTERVAL, \
default 10s, and one as each phase ends; none with --json); the summary (or --json: \
report.json) to stdout. The work dir keeps plan/ (plan.json and the slice), logs/ (mongod.log \
and one log per step), report.md and report.json.

Exit codes: 0 restored (embedded: applied and hashed; mongod: replayed and verified); 1 the \
verification failed, the plan's lint found errors (refused before anything starts), or the \
restore replays a critical or high incident without --accept-incidents (INCIDENT REPLAYED: \
the dump is complete, but holds that damage); 2 error (a program is missing, the plan is \
refused, or a step failed: its exit code, or 128+n for a signal, and its last stderr lines \
are shown); 130 interrupted by Ctrl-C (143 by SIGTERM; the embedded engine then leaves \
neither --out nor OUT-destroyed). --dry-run exits with the code the real run would have.

Examples:
  pitr replay --backup dump/ --oplog oplog.bson --until auto --dry-run
  pitr replay --backup dump/ --oplog oplog.bson --until auto --out restored/
  pitr replay --backup dump.archive --oplog /backup/oplog-archive --until auto --out restored.archive --archive --gzip
  pitr replay --backup dump/ --oplog oplog.bson --until 1795223165:1 --engine mongod --keep
  pitr replay --backup dump/ --oplog oplog.bson --until end --skip 1795741200:3 \\
      --engine mongod --mongodb-bin /opt/mongodb/bin --workdir /data/pitr-run --step-timeout 2h
  pitr replay --backup dump/ --oplog oplog.bson --until auto --json | jq -r .result
  pitr replay --cluster cluster.toml --until auto --out restored/   (a sharded cluster: docs/sharded.md)
  pitr replay --cluster cluster.toml --until auto --out restored/ --engine mongod --jobs 2   (one spare per member)")]
pub struct ReplayArgs {
    #[command(flatten)]
    pub plan: PlanInputArgs,
    /// Which engine restores: `embedded` (pitr applies the backup and the oplog itself
    /// and writes a mongodump dump to --out; needs no MongoDB) or `mongod` (a spare
    /// mongod and mongorestore)
    #[arg(long, value_enum, default_value_t = Engine::Embedded)]
    pub engine: Engine,
    /// Memory for documents (e.g. `512MiB`, `2GiB`): they move to an on-disk store in
    /// the work dir before they fill it, leaving that store's cache room in it: the
    /// embedded engine's replica (and the documents it
    /// writes to OUT-destroyed), and with `--engine mongod` the replica that
    /// predicts each collection's dbHash for verification. Collections no entry
    /// touches, whose backup file is already in `_id` order, are read from the
    /// backup and take none of it [default: half of the
    /// memory available when pitr starts (MemAvailable), at most 64GiB; 384MiB where
    /// that is unknown]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<usize>,
    /// Embedded engine: write --out as `mongodump --gzip` does
    #[arg(long)]
    pub gzip: bool,
    /// Embedded engine: write --out as one archive file (`mongodump --archive`)
    #[arg(long)]
    pub archive: bool,
    /// Print the plan and the exact commands (with the programs found); start nothing
    /// (with --cluster: every member's spare's commands, --engine mongod)
    #[arg(long)]
    pub dry_run: bool,
    /// Leave the spare mongod running at the end and print how to connect and stop it
    #[arg(long)]
    pub keep: bool,
    /// Hand the restored data over: mongodump it into this new directory (or an
    /// `s3://`, `gs://`, `az://` URL holding nothing yet: the embedded engine streams the
    /// dump there, readable once complete; --engine mongod writes it in the work dir, then
    /// uploads it)
    #[arg(long, value_name = "DIR|URL")]
    pub out: Option<PathBuf>,
    /// Directory holding mongod, mongorestore and mongodump [default: $PITR_MONGODB_BIN, then PATH]
    #[arg(long, value_name = "DIR")]
    pub mongodb_bin: Option<PathBuf>,
    /// New or empty directory for the plan, the logs, the report and the spare's data
    /// [default: ./pitr-replay-YYYYMMDDTHHMMSSZ]
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Stop a restore, replay, verify or dump step running longer than this (e.g. `90m`) [default: no limit]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub step_timeout: Option<Duration>,
    /// How long the spare mongod may take to become ready
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub start_timeout: Duration,
    /// Time a program gets between SIGTERM and SIGKILL when it is stopped
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Run the spare on this port of 127.0.0.1 instead of a free one
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Replay even though the plan's lint found errors (the replay may fail or lose data)
    #[arg(long)]
    pub ignore_lint_errors: bool,
    /// Skip the check that the disks of --out and --workdir have room for the replay
    /// (estimated generously from the backup's and the oplog's sizes)
    #[arg(long)]
    pub no_space_check: bool,
    /// Restore to a point after a critical or high incident on purpose: the restore
    /// holds its damage (without this, such a replay ends with exit 1, INCIDENT REPLAYED)
    #[arg(long)]
    pub accept_incidents: bool,
    /// Embedded engine: also keep the oplog slice it applied as WORKDIR/plan/oplog.bson,
    /// as `pitr plan` writes it. Without it the slice is applied as it is read and
    /// not written: a copy as big as the slice (the --engine mongod plan always
    /// keeps it: mongorestore reads it). Not with --cluster, whose embedded replay
    /// keeps no member plans (`pitr plan --cluster` writes them)
    #[arg(long, conflicts_with = "cluster")]
    pub keep_slice: bool,
    /// Print report.json on stdout instead of the summary (with --dry-run: the plan and commands)
    #[arg(long)]
    pub json: bool,
    /// With --cluster: also write each member's own dump at the limit under
    /// OUT/members/<member>/ (for rebuilding a cluster of the same shape)
    #[arg(long, requires = "cluster")]
    pub per_member: bool,
    /// With --cluster --engine mongod: run at most N members' spare mongods at once
    /// [default: 1, one after the other]
    #[arg(long, value_name = "N", requires = "cluster", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
}

/// The restore engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// In-process: no MongoDB needed.
    Embedded,
    /// A spare mongod and mongorestore.
    Mongod,
}

/// clap value parser for sizes: `512MiB`, `2GiB`, `300MB`, or bytes.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size; use e.g. `512MiB`, `2GiB`"))?;
    let mult: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "`{s}`: unknown unit; use B, KiB, MiB, GiB, KB, MB, GB"
            ))
        }
    };
    let v = n.saturating_mul(mult);
    if v < (64 << 10) {
        return Err(format!("`{s}`: at least 64KiB"));
    }
    Ok(v)
}

/// clap value parser for durations: `500ms`, `30s`, `90m`, `2h`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| {
        format!("`{s}` is not a duration ({e}); use e.g. `500ms`, `30s`, `90m`, `2h`")
    })?;
    if d.is_zero() {
        return Err(format!("`{s}`: the duration must be more than zero"));
    }
    Ok(d)
}

fn absolute(cwd: &Path, p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        p
    } else {
        cwd.join(p)
    }
}

/// `--out` must be new or an empty directory; checked before anything runs.
fn check_out(out: &Path) -> Result<(), ReplayError> {
    if !out.exists() {
        return Ok(());
    }
    let empty = out.is_dir()
        && std::fs::read_dir(out)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
    if empty {
        Ok(())
    } else {
        Err(ReplayError::OutNotEmpty(out.to_path_buf()))
    }
}

/// The programs found (`mongodump` too when `need_dump`). A real run refuses a
/// missing one before the plan reads anything (the oplog's passes take minutes on a
/// large one): the first not found, in the probe's order; a dry run lists them all.
fn programs(
    a: &ReplayArgs,
    need_dump: bool,
    rt: &tokio::runtime::Runtime,
) -> Result<Vec<tools::Probed>, Failure> {
    let search = ToolSearch::from_env(a.mongodb_bin.clone());
    let mut probed = rt.block_on(tools::probe(&search, need_dump, &Cancel::new()));
    let missing = probed.iter().position(|p| p.found.is_err());
    if let Some(i) = missing.filter(|_| !a.dry_run) {
        if let Err(e) = probed.swap_remove(i).found {
            return Err(e.into());
        }
    }
    Ok(probed)
}

/// The backup's and the oplog's bytes on disk (for the space check).
fn input_sizes(a: &ReplayArgs) -> (u64, u64) {
    // For an input in a bucket, the first request to the store: said if it is slow.
    let waiting = super::progress::Waiting::start(SIZES, !a.json);
    let sizes = (
        preflight::input_size(a.plan.backup_path()),
        preflight::input_size(Path::new(a.plan.oplog_spec())),
    );
    waiting.end("done in");
    sizes
}

/// What [`input_sizes`] says while it waits.
pub(super) const SIZES: &str = "looking up the sizes of the backup and the oplog";

/// The embedded run's space check (unless `--dry-run` or `--no-space-check`): the
/// slice, the engine's on-disk store past the memory budget, the dump beside `--out`,
/// and, when it fits too, a copy of an oplog object that the run's later passes read
/// instead of the bucket (`oplog::spool`, on for as long as the guard returned lives).
/// With it, the check the plan runs once its scan finds the oplog out of order
/// ([`super::room::sort_room`]).
fn embedded_space(
    a: &ReplayArgs,
    work: &WorkDir,
    out: &Path,
    budget: u64,
) -> Result<
    (
        Option<crate::oplog::spool::SpoolGuard>,
        Option<plan::SortRoom>,
    ),
    Failure,
> {
    if a.dry_run || a.no_space_check {
        return Ok((None, None));
    }
    let (backup, oplog) = input_sizes(a);
    let space = EmbeddedSpace {
        work: work.root.clone(),
        out: out.to_path_buf(),
        backup,
        oplog,
        budget,
    };
    // The slice when it is kept (an oplog out of order is checked again once the
    // scan says so: `sort_room`).
    let slice = if a.keep_slice { oplog } else { 0 };
    let spool = spool_if_room(a, work, oplog, |copy| space.needs(slice, copy))?;
    // The sort's bytes in the work dir beside the oplog's copy (the spool lasts
    // through the plan).
    let copy = if spool.is_some() { oplog } else { 0 };
    Ok((
        spool,
        Some(super::room::sort_room(
            move |sorted| space.needs(sorted, copy),
            &super::room::REPLAY,
        )),
    ))
}

/// What an embedded run writes, for [`preflight::check_space`].
struct EmbeddedSpace {
    work: PathBuf,
    out: PathBuf,
    backup: u64,
    oplog: u64,
    budget: u64,
}

impl EmbeddedSpace {
    /// In the work dir the slice's `slice` bytes (kept, or sorted), past `--memory`
    /// the on-disk store of the documents, and a `copy` of an oplog object; the
    /// dump beside `--out`.
    fn needs(&self, slice: u64, copy: u64) -> Vec<Need> {
        let store = preflight::store_bytes(self.backup, self.oplog, self.budget);
        let mut what = vec![];
        if slice > 0 {
            what.push("the slice");
        }
        what.push("the engine's on-disk store");
        if copy > 0 {
            what.push("a copy of the oplog");
        }
        let what = match what.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        };
        vec![
            Need {
                dir: self.work.clone(),
                bytes: slice + store + copy,
                what,
            },
            out_need(&self.out, self.backup + self.oplog),
        ]
    }
}

/// With the oplog in a bucket, turns the spool on (`oplog::spool`: the run's later
/// passes read one copy in the work dir) when `needs(copy)` fits with the copy's
/// `oplog` bytes; else checks `needs(0)` and says that each pass reads the bucket.
fn spool_if_room(
    a: &ReplayArgs,
    work: &WorkDir,
    oplog: u64,
    needs: impl Fn(u64) -> Vec<Need>,
) -> Result<Option<crate::oplog::spool::SpoolGuard>, Failure> {
    let spoolable = spoolable_oplog(a.plan.oplog_spec());
    if spoolable && preflight::check_space(&needs(oplog)).is_ok() {
        let guard = crate::oplog::spool::enable(&work.root.join("oplog-copy"))?;
        return Ok(Some(guard));
    }
    preflight::check_space(&needs(0)).map_err(Failure::from)?;
    if spoolable {
        eprintln!(
            "note: no room in the work dir for a copy of the oplog ({}): each pass over it reads the bucket",
            crate::size::human(oplog)
        );
    }
    Ok(None)
}

/// Whether the oplog is in a bucket (an object, a dump prefix, an oplog archive), whose
/// passes would each GET what they read: what `oplog::spool` copies.
fn spoolable_oplog(spec: &str) -> bool {
    matches!(Location::parse(spec), Ok(loc) if loc.local_path().is_none())
}

/// The dump (and the dump of what the incident destroys) beside `out`.
fn out_need(out: &Path, bytes: u64) -> Need {
    Need {
        dir: crate::storage::parent_dir(out).to_path_buf(),
        bytes,
        what: "the dump of the restored data".into(),
    }
}

pub(crate) fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

pub(super) fn notice(console: Arc<Console>, grace: Duration) -> SignalNotice {
    Box::new(move |sig, level| {
        let name = if sig == libc::SIGINT {
            "Ctrl-C"
        } else {
            "SIGTERM"
        };
        match level {
            CancelLevel::Kill => {
                console.line(&format!("pitr: {name} again: killing the running programs now (SIGKILL)"))
            }
            _ => console.line(&format!(
                "pitr: {name}: stopping the running step and the spare mongod (SIGTERM, then SIGKILL after {}); \
                 press Ctrl-C again to kill them at once",
                seconds(grace)
            )),
        }
    })
}

/// The plan's lint found errors: refused before anything starts, exit 1.
fn lint_refusal(plan: &plan::RestorePlan) -> Failure {
    let mut codes: Vec<&str> = plan
        .lint
        .iter()
        .filter(|l| l.severity == plan::LintSeverity::Error)
        .map(|l| l.code.as_str())
        .collect();
    codes.dedup();
    Failure::from(ReplayError::LintErrors {
        count: plan.lint_errors(),
        codes: codes.join(", "),
    })
    .with_exit_code(exit::NOT_FOUND)
}

/// The flags that must be local paths, as paths (a `file://` URL decoded), or a
/// refusal naming the flag; a backup URL with a secret is refused here, first.
fn local_paths(mut a: ReplayArgs) -> Result<ReplayArgs, Failure> {
    // A `file://` backup is a local path (a URL with a secret is refused here, first).
    if let Location::Local(p) = Location::of_path(a.plan.backup_path())? {
        a.plan.backup = Some(p);
    }
    Ok(ReplayArgs {
        workdir: local_only_opt(
            "--workdir",
            a.workdir,
            "the work dir holds the spare's data and the logs: give a local directory",
        )?,
        mongodb_bin: local_only_opt(
            "--mongodb-bin",
            a.mongodb_bin,
            "give the local directory holding mongod and mongorestore",
        )?,
        // Both engines upload their dump to a URL (`backup::upload`).
        ..a
    })
}

pub fn run(a: ReplayArgs) -> Result<u8, Failure> {
    if a.plan.cluster.is_some() {
        return super::cluster_restore::replay(a);
    }
    let a = local_paths(a)?;
    if a.engine == Engine::Embedded {
        return run_embedded(a);
    }
    if a.gzip || a.archive {
        return Err(Failure::new(
            "--gzip and --archive choose the form of the embedded engine's dump",
        )
        .with_hint("with --engine mongod, --out is written by mongodump as a directory")
        .with_exit_code(exit::ERROR));
    }
    run_mongod(a)
}

/// `--engine mongod`: the places, the programs, a snapshot backup made ready, the
/// plan (or the dry run), the steps, the report.
fn run_mongod(a: ReplayArgs) -> Result<u8, Failure> {
    let started = Instant::now();
    let started_utc = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let cwd = std::env::current_dir()?;
    // A copy of data files instead of a mongodump (issue 23): refused first if the
    // files say they cannot be recovered.
    let snapshot = match a.plan.backup.as_deref() {
        Some(b) => super::replay_snapshot::detect(b)?,
        None => None,
    };
    let MongodPlaces {
        work,
        out,
        upload,
        download,
        spool,
        sort_room,
    } = mongod_places(&a, &cwd)?;
    // The programs first: their versions decide what the plan's lint expects them to
    // skip and refuse (a dry run runs only these `--version`s).
    let rt = runtime()?;
    let probed = programs(&a, out.is_some() || snapshot.is_some(), &rt)
        .inspect_err(|_| work.discard_if_unused())?;
    let mut req = a.plan.request(
        Some(work.plan_dir()),
        cwd.clone(),
        tools::version_hints(&probed),
    );
    req.sort_room = sort_room;
    if let Err(e) = fetch_backup(download.as_ref(), &probed, a.dry_run, &mut req) {
        work.discard_if_unused();
        return Err(e);
    }
    let console = Console::for_stderr(a.json);
    let cancel = Cancel::new();
    // The recovered copy of a snapshot backup: the spare runs on it.
    let snapshot_db = match &snapshot {
        Some(s) if a.dry_run => return super::replay_snapshot::dry_run(s, &probed, &work),
        Some(s) => Some(super::replay_snapshot::prepare_plan(
            s,
            &probed,
            &work,
            (a.start_timeout, a.grace, &rt, &cancel, &console, a.json),
            &mut req,
        )?),
        None => None,
    };
    // The engine predicts each collection's content (its dbHash) so verification
    // checks more than counts; its temporary store lives in the work dir.
    let predict = tempfile::Builder::new()
        .prefix(".pitr-engine-")
        .tempdir_in(&work.root)?;
    if !a.dry_run && req.expect {
        let memory = crate::memory::budget(a.memory.map(|m| m as u64)).bytes as usize;
        req.content = Some(plan::ContentOptions::predicting(
            memory,
            predict.path().to_path_buf(),
        ));
    }
    let built = plan::build(
        &req,
        &CliProgress {
            enabled: !a.json,
            stake: !a.dry_run,
        },
    );
    drop(predict);
    drop(spool); // mongorestore reads the slice the plan wrote, never the oplog itself
    let plan = match built {
        Ok(p) => p,
        Err(e) => {
            work.discard_if_unused();
            return Err(e.into());
        }
    };
    let pitr = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("pitr"));

    if a.dry_run {
        let at = DryRunAt {
            work: &work,
            out: out.as_deref(),
            port: a.port,
            pitr: &pitr,
        };
        let allow = dry_run::Allow {
            ignore_lint_errors: a.ignore_lint_errors,
            accept_incidents: a.accept_incidents,
        };
        return mongod_dry_run(&plan, &probed, &at, allow, a.json);
    }

    let settings = Settings {
        keep: a.keep,
        out,
        step_timeout: a.step_timeout,
        start_timeout: a.start_timeout,
        grace: a.grace,
        port: a.port,
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        pitr,
        dbpath: snapshot_db.clone(),
    };
    console.line(&format!(
        "pitr replay: limit {} (exclusive), work dir {}",
        plan.limit(),
        work.root.display()
    ));
    let ran = rt.block_on(async {
        if snapshot_db.is_none() {
            listen_for_signals(&cancel, Some(notice(console.clone(), settings.grace)))?;
        }
        let tools = Tools::from_probe(probed).map_err(Failure::from)?;
        // The programs are there; a plan with lint errors is refused next, before
        // anything starts (`--dry-run` reports the same verdict in the same order).
        announce_tools(&console, &tools);
        if plan.lint_errors() > 0 && !a.ignore_lint_errors {
            return Err(lint_refusal(&plan));
        }
        let ex = execute(&plan, &work, &tools, &settings, &cancel, &console).await;
        let interrupted =
            (ex.interrupted || cancel.is_cancelled()).then(|| cancel.exit_code().unwrap_or(130));
        Ok::<_, Failure>((tools, ex, interrupted))
    });
    drop(rt);
    let kept = ran.as_ref().is_ok_and(|(_, ex, _)| ex.kept.is_some());
    remove_inputs(download.as_ref(), snapshot_db.as_deref(), kept);
    let (tools, mut ex, interrupted) = ran?;
    if let (Some(url), None) = (&upload, interrupted) {
        upload_dump(url, &mut ex);
    }
    let report = ReplayReport::build(
        &plan,
        &work,
        &tools,
        &ex,
        Timing {
            started_utc,
            duration_ms: started.elapsed().as_millis() as u64,
        },
        interrupted,
        a.accept_incidents,
    );
    mongod_ending(a.json, &work, &report, ex)
}

/// After the steps: a downloaded backup (mongorestore is done with it: the spare holds
/// the data now) and a snapshot's recovered copy (unless kept with the spare).
fn remove_inputs(download: Option<&download::Download>, snapshot_db: Option<&Path>, kept: bool) {
    if let Some(d) = download {
        let _ = std::fs::remove_dir_all(&d.dest).or_else(|_| std::fs::remove_file(&d.dest));
    }
    super::replay_snapshot::remove_copy(snapshot_db, kept);
}

/// The programs that will run, and a banner when any is a test stand-in.
fn announce_tools(console: &Console, tools: &Tools) {
    for b in tools.all() {
        console.line(&format!("  {}", describe(b)));
    }
    let standins = tools.standins();
    if !standins.is_empty() {
        console.line(&format!(
            "*** {STANDIN_BANNER}: {} {} pitr's test stand-in(s) ***",
            standins.join(", "),
            if standins.len() == 1 { "is" } else { "are" }
        ));
    }
}

/// Where the mongod engine works, reads and writes, settled before any work.
struct MongodPlaces {
    work: WorkDir,
    /// Where the hand-over dump is renamed to: `--out`, or its staging place in the
    /// work dir when `--out` is a URL.
    out: Option<PathBuf>,
    /// `--out` as a URL: the dump is uploaded there after the run.
    upload: Option<Location>,
    /// `--backup` as a URL: downloaded into the work dir (not by a dry run).
    download: Option<download::Download>,
    /// An oplog in a bucket: one copy for the plan's passes (`oplog::spool`), while
    /// this lives.
    spool: Option<crate::oplog::spool::SpoolGuard>,
    /// The plan's check of an oplog out of order (`PlanRequest::sort_room`).
    sort_room: Option<plan::SortRoom>,
}

/// `--out` checked (a local path new or empty and writable, a URL holding nothing),
/// the work dir created, a backup in a bucket checked and measured, and the space
/// checked (with its download).
fn mongod_places(a: &ReplayArgs, cwd: &Path) -> Result<MongodPlaces, Failure> {
    // A `file://` --out is a local path.
    let (upload, local_out) = match &a.out {
        Some(o) => match Location::of_path(o)? {
            Location::Local(p) => (None, Some(absolute(cwd, p))),
            url => {
                upload::check_new(&url)?;
                (Some(url), None)
            }
        },
        None => (None, None),
    };
    if let Some(o) = &local_out {
        check_out(o)?;
        preflight::check_writable(o)?;
    }
    let work = WorkDir::create(a.workdir.as_deref(), cwd)?;
    let settled = (|| -> Result<_, Failure> {
        let out = match &upload {
            Some(url) => {
                let staged = upload::staging(&work.root, url);
                if let Some(d) = staged.parent() {
                    std::fs::create_dir_all(d)?;
                }
                Some(staged)
            }
            None => local_out,
        };
        // An archive in a bucket is streamed to mongorestore as it is read (see
        // `PlanRequest::stream_archive`); a directory backup is downloaded first.
        // The first requests to the store: said if it is slow (as the embedded
        // engine's opening of its inputs is).
        let download =
            match Location::of_path(a.plan.backup_path())? {
                Location::Local(_) => None,
                url => super::progress::while_opening(&url.to_string(), !a.json, || {
                    match streamed_archive(&url)? {
                        true => Ok::<_, Failure>(None),
                        false => Ok(Some(download::measure(&url, &work.root)?)),
                    }
                })?,
            };
        let (spool, sort_room) = if !a.dry_run && !a.no_space_check {
            mongod_space(a, &work, out.as_deref(), download.as_ref())?
        } else {
            (None, None)
        };
        Ok((out, download, spool, sort_room))
    })();
    match settled {
        Ok((out, download, spool, sort_room)) => Ok(MongodPlaces {
            work,
            out,
            upload,
            download,
            spool,
            sort_room,
        }),
        Err(e) => {
            work.discard_if_unused();
            Err(e)
        }
    }
}

/// Whether the backup at `url` is an archive (then streamed, not downloaded); the
/// backup is checked as every read of it is.
fn streamed_archive(url: &Location) -> Result<bool, Failure> {
    let b = crate::backup::open(&url.display_path())?;
    Ok(b.layout == crate::backup::Layout::Archive)
}

/// Marks an archive backup for streaming (see `PlanRequest::stream_archive`), and
/// a directory backup given as a URL: downloaded into the work dir (mongorestore
/// restores a directory from local files only), once the programs are known to be there, and the plan then reads the local
/// copy. A dry run and a run missing a program (which fails next, saying so) download
/// nothing: the plan reads the backup in place and writes no one-run inputs for
/// mongorestore (as `pitr plan` with a backup in a bucket).
fn fetch_backup(
    d: Option<&download::Download>,
    probed: &[tools::Probed],
    dry_run: bool,
    req: &mut plan::PlanRequest,
) -> Result<(), Failure> {
    // An archive backup, local or in a bucket, goes to mongorestore's standard
    // input: never downloaded, no copy of it on disk.
    req.stream_archive = true;
    let Some(d) = d else { return Ok(()) };
    req.mongorestore_inputs = false;
    if dry_run {
        eprintln!(
            "note: the backup is in object storage: the real run downloads it first ({}, {} objects, into {}); \
             the commands below name it as it is in the bucket",
            crate::size::human(d.bytes),
            d.objects(),
            d.dest.display()
        );
        return Ok(());
    }
    if probed.iter().any(|p| p.found.is_err()) {
        return Ok(());
    }
    eprintln!("pitr replay: {}", d.describe());
    req.backup = download::fetch(d)?;
    req.mongorestore_inputs = true;
    Ok(())
}

/// `--out URL`: the dump mongodump wrote in the work dir is uploaded all or nothing
/// ([`upload::upload`]) and the local copy removed; a failed upload is the run's
/// error (exit 2).
fn upload_dump(url: &Location, ex: &mut crate::replay::Execution) {
    let Some(dump) = ex.dump.as_mut() else {
        return;
    };
    let staged = PathBuf::from(&dump.dir);
    eprintln!(
        "pitr replay: uploading the dump to {url} ({})",
        crate::size::human(dump.bytes)
    );
    let result = upload::upload(&staged, url);
    let _ = std::fs::remove_dir_all(&staged);
    if let Some(parent) = staged.parent() {
        let _ = std::fs::remove_dir(parent);
    }
    match result {
        Ok(up) => {
            eprintln!(
                "pitr replay: uploaded {} objects, {} bytes to {url}",
                up.objects, up.bytes
            );
            dump.dir = url.to_string();
        }
        Err(e) => {
            ex.dump = None;
            if ex.error.is_none() {
                ex.error = Some(Failure::from(e).with_exit_code(exit::ERROR));
            }
        }
    }
}

/// The space a restore onto a spare needs: its data directory lives in the work dir
/// (about the backup and the oplog's writes, as the dump does), beside the slice;
/// and a backup in a bucket is downloaded there first. With it, the check the plan
/// runs once its scan finds the oplog out of order ([`super::room::sort_room`]: the slice's
/// sorted runs beside it).
fn mongod_space(
    a: &ReplayArgs,
    work: &WorkDir,
    out: Option<&Path>,
    download: Option<&download::Download>,
) -> Result<
    (
        Option<crate::oplog::spool::SpoolGuard>,
        Option<plan::SortRoom>,
    ),
    Failure,
> {
    let (backup, oplog) = input_sizes(a);
    let space = MongodSpace {
        work: work.root.clone(),
        out: out.map(Path::to_path_buf),
        download: download.map(|d| (d.bytes, format!("the backup downloaded from {}", d.url))),
        backup,
        oplog,
    };
    // An oplog in a bucket: the plan's passes over it (the scan, the slice, the
    // prediction of the content) read one copy in the work dir, as the embedded
    // engine's do, when it fits. The slice: at most the whole oplog.
    let spool = spool_if_room(a, work, oplog, |copy| space.needs(oplog, copy))?;
    let copy = if spool.is_some() { oplog } else { 0 };
    Ok((
        spool,
        Some(super::room::sort_room(
            move |sorted| space.needs(sorted, copy),
            &super::room::REPLAY,
        )),
    ))
}

/// What a restore onto a spare writes, for [`preflight::check_space`].
struct MongodSpace {
    work: PathBuf,
    out: Option<PathBuf>,
    /// A backup in a bucket: its bytes, and what to call them.
    download: Option<(u64, String)>,
    backup: u64,
    oplog: u64,
}

impl MongodSpace {
    /// In the work dir the slice's `slice` bytes, the spare's data, a `copy` of an
    /// oplog object and a downloaded backup; the dump beside `--out`.
    fn needs(&self, slice: u64, copy: u64) -> Vec<Need> {
        let mut needs = vec![Need {
            dir: self.work.clone(),
            bytes: slice + self.backup + self.oplog + copy,
            what: if copy > 0 {
                "the slice, the spare mongod's data and a copy of the oplog".into()
            } else {
                "the slice and the spare mongod's data".into()
            },
        }];
        if let Some((bytes, what)) = &self.download {
            needs.push(Need {
                dir: self.work.clone(),
                bytes: *bytes,
                what: what.clone(),
            });
        }
        if let Some(o) = &self.out {
            needs.push(out_need(o, self.backup + self.oplog));
        }
        needs
    }
}

/// Where a dry run would run.
struct DryRunAt<'a> {
    work: &'a WorkDir,
    out: Option<&'a Path>,
    port: Option<u16>,
    pitr: &'a Path,
}

/// `--engine mongod --dry-run`: the plan and the exact commands; exits with the code
/// the real run would have before starting anything.
fn mongod_dry_run(
    plan: &plan::RestorePlan,
    probed: &[tools::Probed],
    at: &DryRunAt<'_>,
    allow: dry_run::Allow,
    json: bool,
) -> Result<u8, Failure> {
    let d = dry_run::prepare(plan, at.work, probed, at.out, at.port, at.pitr, allow);
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    if json {
        super::output::write_json(&mut w, &d)?;
    } else {
        super::plan::render_dry_run(&mut w, plan)?;
        writeln!(w)?;
        write!(w, "{}", dry_run::text(&d))?;
    }
    w.flush()?;
    // A rehearsal fails for the reasons the real run would refuse (CI relies on it).
    if let Some(why) = &d.refusal {
        eprintln!("error: --dry-run: {why}");
    }
    Ok(d.exit_code)
}

/// The end of a restore onto a spare: the report written, the summary (or
/// report.json) printed, and the exit code of its result.
fn mongod_ending(
    json: bool,
    work: &WorkDir,
    report: &ReplayReport,
    mut ex: crate::replay::Execution,
) -> Result<u8, Failure> {
    if let Err(e) = report.write(work) {
        let f = Failure::from(e);
        eprint!("warning: {}", f.render());
    }
    {
        let stdout = io::stdout();
        let mut w = io::BufWriter::new(stdout.lock());
        if json {
            super::output::write_json(&mut w, report)?;
        } else {
            write!(w, "{}", summary::text(report))?;
        }
        w.flush()?;
    }
    match report.result {
        ResultKind::Passed | ResultKind::Restored => Ok(exit::OK),
        ResultKind::VerifyFailed | ResultKind::IncidentReplayed => Ok(exit::NOT_FOUND),
        ResultKind::Error => Err(ex
            .error
            .take()
            .unwrap_or_else(|| Failure::new("the replay failed"))
            .with_exit_code(exit::ERROR)),
        ResultKind::Interrupted => Err(Failure::new(format!(
            "interrupted: the running step and the spare mongod were stopped{}; the report is in `{}`",
            if report.kept.is_some() { "" } else { " and its data directory removed" },
            work.report_md().display()
        ))
        .with_exit_code(report.exit_code)),
    }
}

/// `--engine embedded`: plan, build the state in-process, write the dump.
/// The embedded engine's `--out`, checked before any work: a local path must be new
/// or an empty directory in a writable place; a URL must hold nothing yet (nor its
/// `-destroyed` sibling), and is returned: the dump is then streamed there.
fn embedded_out(a: &ReplayArgs, cwd: &Path) -> Result<Option<Location>, Failure> {
    let Some(o) = &a.out else { return Ok(None) };
    let o = match Location::of_path(o)? {
        Location::Local(p) => absolute(cwd, p),
        url => {
            upload::check_new(&url)?;
            upload::check_new(&url.with_name_suffix(crate::replay::embedded::DESTROYED_SUFFIX))?;
            return Ok(Some(url));
        }
    };
    check_out(&o)?;
    if a.archive && o.is_dir() {
        return Err(PreflightError::ArchiveOverDir(o).into());
    }
    preflight::check_writable(&o)?;
    Ok(None)
}

fn run_embedded(a: ReplayArgs) -> Result<u8, Failure> {
    use crate::engine::replica::dump::DumpFormat;
    // Ctrl-C and SIGTERM from the first moment: the run stops and cleans up (exit
    // 128+n) instead of dying half-way.
    if !a.dry_run {
        crate::engine::replica::interrupt::install();
    }
    if a.keep || a.mongodb_bin.is_some() || a.port.is_some() {
        return Err(Failure::new(
            "--keep, --mongodb-bin and --port are for --engine mongod (the embedded engine starts no server)",
        )
        .with_exit_code(exit::ERROR));
    }
    if a.gzip && a.archive {
        // mongodump --archive --gzip gzips the whole archive: allowed.
    }
    let cwd = std::env::current_dir()?;
    let upload = embedded_out(&a, &cwd)?;
    let work = WorkDir::create(a.workdir.as_deref(), &cwd)?;
    // A URL is written there directly, streamed (no copy on local disk).
    let out = match &upload {
        Some(url) => url.display_path(),
        None => absolute(
            &cwd,
            a.out.clone().unwrap_or_else(|| work.root.join("dump")),
        ),
    };
    // Measured once, at the start: what the engine may keep in memory.
    let budget = crate::memory::budget(a.memory.map(|m| m as u64));
    let (spool, sort_room) = match embedded_space(&a, &work, &out, budget.bytes) {
        Ok(s) => s,
        Err(e) => {
            work.discard_if_unused();
            return Err(e);
        }
    };
    let format = if a.archive {
        DumpFormat::Archive { gzip: a.gzip }
    } else {
        DumpFormat::Directory { gzip: a.gzip }
    };
    let mut req = a
        .plan
        .request(Some(work.plan_dir()), cwd.clone(), Default::default());
    // The engine applies the slice itself: no copy of it (or of an archive backup)
    // for a mongorestore run that will not happen, and the slice kept only when
    // asked for.
    req.mongorestore_inputs = false;
    req.keep_slice = a.keep_slice;
    req.sort_room = sort_room;
    if a.dry_run {
        let plan = match plan::build(
            &req,
            &CliProgress {
                enabled: !a.json,
                stake: false,
            },
        ) {
            Ok(p) => p,
            Err(e) => {
                work.discard_if_unused();
                return Err(e.into());
            }
        };
        let verdict = dry_run::incident_verdict(&plan, a.accept_incidents);
        let stdout = io::stdout();
        let mut w = io::BufWriter::new(stdout.lock());
        if a.json {
            super::output::write_json(&mut w, &plan)?;
        } else {
            // The plan without its mongod/mongorestore steps: this path runs none.
            super::plan::render_dry_run(&mut w, &plan)?;
            writeln!(
                w,
                "\nEngine    embedded: would apply the backup and the slice in-process and write {} (nothing started, nothing written there)",
                out.display()
            )?;
            writeln!(
                w,
                "Memory    {budget} for documents; near it they move to disk"
            )?;
            match &verdict {
                Some(why) => writeln!(
                    w,
                    "Verdict   the real run would go ahead and end with exit code 1 (INCIDENT REPLAYED): {why}."
                )?,
                None => writeln!(w, "Verdict   the real run would go ahead (exit code 0).")?,
            }
            writeln!(w, "Nothing was applied (--dry-run).")?;
        }
        w.flush()?;
        if verdict.is_some() {
            return Ok(exit::NOT_FOUND);
        }
        return Ok(exit::OK);
    }
    eprintln!(
        "pitr replay (engine: embedded): no mongod, no mongorestore; work dir {}",
        work.root.display()
    );
    eprintln!("memory for documents: {budget}");
    if let Some(url) = &upload {
        eprintln!(
            "--out {url}: the dump is streamed there as it is written (no copy on local disk), readable once complete"
        );
    }
    let (report, result) = crate::replay::embedded::run(
        crate::replay::embedded::EmbeddedRun {
            req,
            work: &work,
            out,
            format,
            memory: budget,
            accept_incidents: a.accept_incidents,
            upload,
            process_exits_after: true,
        },
        &super::progress::PhaseProgress::for_stderr(a.json),
    );
    // The copy of the oplog goes before the work dir is looked at.
    drop(spool);
    let Some(report) = report else {
        work.discard_if_unused();
        return result.map(|()| exit::OK);
    };
    {
        let stdout = io::stdout();
        let mut w = io::BufWriter::new(stdout.lock());
        if a.json {
            super::output::write_json(&mut w, &report)?;
        } else {
            write!(w, "{}", crate::replay::embedded::summary(&report))?;
        }
        w.flush()?;
    }
    result.map(|()| report.exit_code)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};
    use crate::plan::UntilSpec;

    fn parse(args: &[&str]) -> Result<super::ReplayArgs, String> {
        let mut all = vec!["pitr", "replay"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all) {
            Ok(Cli {
                command: Command::Replay(a),
            }) => Ok(a),
            Ok(other) => Err(format!("not replay: {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The check the plan asks once its scan finds the oplog out of order: the
    /// embedded run's needs with the sorted slice in the work dir, refused with the
    /// work dir, the sizes and the usual hint when they do not fit; not asked for
    /// with `--no-space-check` or `--dry-run`.
    #[test]
    fn the_sort_of_an_oplog_out_of_order_is_checked_against_the_work_dirs_room() {
        use crate::error::Hint;
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("work");
        let w = w.to_str().unwrap();
        let args = |extra: &[&str]| {
            let mut v = vec![
                "--backup",
                "b",
                "--oplog",
                "o.bson",
                "--until",
                "auto",
                "--workdir",
                w,
            ];
            v.extend_from_slice(extra);
            parse(&v).unwrap()
        };
        let a = args(&[]);
        let work = crate::replay::WorkDir::create(a.workdir.as_deref(), d.path()).unwrap();
        let out = d.path().join("dump");
        let (spool, room) = super::embedded_space(&a, &work, &out, 1 << 30).unwrap();
        assert!(spool.is_none(), "a local oplog is never copied");
        let room = room.expect("checked");
        (room.0)(1 << 20).unwrap();
        let e = (room.0)(u64::MAX / 4).unwrap_err();
        let message = e.to_string();
        assert!(message.starts_with("the oplog is out of order, so its slice is sorted in the work dir first: not enough free space"), "{message}");
        assert!(
            message.contains(&work.root.display().to_string()),
            "{message}"
        );
        assert!(
            message.contains("the slice and the engine's on-disk store"),
            "{message}"
        );
        assert!(
            e.hint().unwrap().contains("--no-space-check"),
            "{:?}",
            e.hint()
        );
        for flag in ["--no-space-check", "--dry-run"] {
            let (_, room) = super::embedded_space(&args(&[flag]), &work, &out, 1 << 30).unwrap();
            assert!(room.is_none(), "{flag}");
        }
        // `--engine mongod`: the slice is kept for mongorestore, the sort's runs
        // beside it are what the check up front could not count.
        let (_, room) = super::mongod_space(&a, &work, Some(&out), None).unwrap();
        let room = room.expect("checked");
        (room.0)(1 << 20).unwrap();
        let message = (room.0)(u64::MAX / 4).unwrap_err().to_string();
        assert!(
            message.contains("is sorted in the work dir first")
                && message.contains("the slice and the spare mongod's data"),
            "{message}"
        );
    }

    /// A cluster member's check (`room::sort_room_in`): the sorted slice plus what
    /// the engine's store still writes, against the work dir, in the replay's words.
    #[test]
    fn a_members_sort_counts_the_store_still_to_come() {
        let d = tempfile::tempdir().unwrap();
        let room =
            crate::cli::room::sort_room_in(d.path().to_path_buf(), 0, &crate::cli::room::REPLAY);
        (room.0)(1 << 20).unwrap();
        let message = (room.0)(u64::MAX / 4).unwrap_err().to_string();
        assert!(
            message.contains(&d.path().display().to_string())
                && message.contains("(the sorted slice)"),
            "{message}"
        );
        // A store too large for the disk: a slice of one byte is refused with it.
        let room = crate::cli::room::sort_room_in(
            d.path().to_path_buf(),
            u64::MAX / 4,
            &crate::cli::room::REPLAY,
        );
        let message = (room.0)(1).unwrap_err().to_string();
        assert!(
            message.contains("(the sorted slice and the engine's on-disk store)"),
            "{message}"
        );
    }

    #[test]
    fn command_lines() {
        let base = ["--backup", "b", "--oplog", "o.bson", "--until", "auto"];
        let ok = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            parse(&v).unwrap_or_else(|e| panic!("{extra:?}: {e}"))
        };
        let a = ok(&[]);
        assert_eq!(a.plan.until, UntilSpec::Auto);
        assert!(!a.dry_run && !a.keep && a.out.is_none() && a.step_timeout.is_none());
        assert_eq!(a.grace, std::time::Duration::from_secs(10));
        let a = ok(&[
            "--dry-run",
            "--keep",
            "--out",
            "d",
            "--mongodb-bin",
            "/opt/m",
            "--workdir",
            "w",
            "--step-timeout",
            "90m",
            "--grace",
            "500ms",
            "--port",
            "28017",
            "--ns",
            "shop.*",
            "--skip",
            "1700000000:1",
            "--json",
        ]);
        assert!(a.dry_run && a.keep && a.json);
        assert_eq!(a.step_timeout, Some(std::time::Duration::from_secs(5400)));
        assert_eq!(a.grace, std::time::Duration::from_millis(500));
        assert_eq!(
            (a.port, a.plan.ns.len(), a.plan.skip.len()),
            (Some(28017), 1, 1)
        );

        let bad = |extra: &[&str], needle: &str| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            let err = parse(&v)
                .err()
                .unwrap_or_else(|| panic!("{extra:?} parsed"));
            assert!(err.contains(needle), "{extra:?}: {err}");
        };
        bad(&["--step-timeout", "soon"], "`soon` is not a duration");
        bad(&["--grace", "0s"], "more than zero");
        bad(&["--port", "0"], "--port");
        bad(&["--port", "70000"], "--port");
        assert!(parse(&["--backup", "b", "--oplog", "o"]).is_err());
    }
}
