//! Putting a plan together: parse-then-validate, as in ripgrep's low/high args.
//!
//! Order matters for "no partial output": everything that can refuse the plan
//! (inventory, both oplog first passes, the limit, coverage, `--skip` checks) runs
//! before the output directory is touched; the slice and `plan.json` are written
//! under temporary names and renamed into place only at the very end.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::closest::closest_text;
use crate::forensics::{Catalog, Kind, Severity};
use crate::oplog::reader::not_an_entry;
use crate::oplog::{self, Entry, ReadOptions, Ts};
use crate::time::TimeValue;

use super::coverage::{self, CoverageInput, Mode};
use super::error::PlanError;
use super::expect::{Model, Seed};
use super::filter::{ns_include_literal, NsFilter};
use super::glance;
use super::history::{self, HistoryInput};
use super::inventory::{inventory_with, Inventory, InventoryOptions, NsKind};
use super::lint::{LintSeverity, Linter};
use super::onerun;
use super::scan::{self, EntryRef, OplogScan, Probe};
use super::slice::{self, SliceOutcome, SliceRequest};
use super::stake::{self, Stake};
use super::steps::{self, CommandValues, RestoreSpec};
pub use super::timing::PhaseTimer;
use super::timing::ThreadClock;
use super::until::{self, UntilSpec};
use super::versions::{Rules, VersionHints};
use super::{
    BackupSection, OplogRange, PreparedAtLimit, Progress, RestorePlan, SkipOutcome, SliceSection,
    FORMAT,
};
use crate::engine::walk::{Ignored, Source, TxnDecision, Visitor, Walker};

mod streamed;

/// The files `pitr plan` writes into its output directory.
pub const OUT_FILES: [&str; 4] = ["oplog.bson", "plan.json", RESTORE_DIR, RESTORE_ARCHIVE];

/// The one-run restore directory inside the plan's output (see `RestoreSpec`).
pub const RESTORE_DIR: &str = "restore";
/// The one-run restore archive inside the plan's output (archive backups).
pub const RESTORE_ARCHIVE: &str = "restore.archive";

/// Everything `pitr plan` was asked (the CLI's flags, already parsed).
#[derive(Clone, Debug)]
pub struct PlanRequest {
    pub backup: PathBuf,
    /// A file or directory (`-` is refused: the oplog is read more than once).
    pub oplog: String,
    pub until: UntilSpec,
    /// For backups without their own oplog.
    pub backup_end: Option<TimeValue>,
    pub ns: Vec<String>,
    pub skip: Vec<TimeValue>,
    /// None: `pitr-plan-<t>-<i>` in `cwd`.
    pub out: Option<PathBuf>,
    pub cwd: PathBuf,
    pub allow_truncated: bool,
    /// Compute expected counts (keeps every backup `_id` in memory).
    pub expect: bool,
    pub id_cap: u64,
    pub sort_memory: usize,
    /// What is known of the versions of mongorestore and the spare mongod (the
    /// backup's server version is added from the backup itself).
    pub versions: VersionHints,
    /// Build the replica with whole documents (the embedded engine; hash
    /// predictions); None: counts only.
    pub content: Option<ContentOptions>,
    /// Write what mongorestore reads in one run (`OUT/restore/` or
    /// `OUT/restore.archive`: a copy of the slice, and of a whole archive backup).
    /// False for the embedded engine, which applies the slice itself: on a large
    /// oplog that copy is as big as the slice.
    pub mongorestore_inputs: bool,
    /// Keep the slice as `OUT/oplog.bson`. False for the embedded engine without
    /// `--keep-slice`: an oplog in ts order is then applied as it is read and never
    /// written (a copy as big as the slice, which `pitr plan` with the same inputs
    /// writes identically); one out of order is still sorted through a temporary
    /// file, removed at the end.
    pub keep_slice: bool,
    /// The backup's data is already in the spare (a recovered snapshot backup, issue
    /// 23; `backup` is then the mongodump taken of it): the slice is replayed alone,
    /// never in one run with a restore of the backup.
    pub backup_in_spare: bool,
    /// An archive backup is given to mongorestore on its standard input, streamed
    /// by pitr at run time (with the slice appended to its oplog for one run),
    /// instead of `OUT/restore.archive`, a copy of the whole backup on disk (`pitr
    /// replay --engine mongod`; `pitr plan` writes the file for runs by hand).
    pub stream_archive: bool,
    /// A cluster member's plan at the cluster's limit: the decisions of prepared
    /// (cross-shard) transactions read from every member's oplog, by transaction key
    /// ([`crate::engine::walk::txn_key`]). A prepared transaction still open at the
    /// limit is applied when its `commitTimestamp` is before it, wherever this
    /// member's own commit entry falls ([`Walker::decide_prepared`]). None: a replica
    /// set's plan, where mongorestore's limit alone decides.
    pub decided: Option<std::sync::Arc<HashMap<Vec<u8>, TxnDecision>>>,
    /// Asked, once the scan found the oplog out of order and before its slice is
    /// sorted in the output directory, whether that fits (see [`SortRoom`]). None:
    /// not asked (`pitr plan`, `--no-space-check`).
    pub sort_room: Option<SortRoom>,
}

/// The caller's free-space check for the sorting of an oplog found out of order
/// (which only the scan can tell, after the caller's own check ran): called with
/// the bytes the sort writes into the output directory at its peak, the slice and,
/// past `sort_memory`, its sorted runs beside it. The embedded replay counts no
/// slice up front (an oplog in ts order is applied as it is read, never written).
#[derive(Clone)]
pub struct SortRoom(pub std::sync::Arc<dyn Fn(u64) -> Result<(), PlanError> + Send + Sync>);

impl std::fmt::Debug for SortRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SortRoom(..)")
    }
}

/// What sorting a slice of at most `slice_bytes` out of order writes at its peak:
/// the slice and, past `sort_memory`, as much again in sorted runs, which stay
/// until the merge into the slice is done ([`slice::write_teed`]).
pub fn sort_peak_bytes(slice_bytes: u64, sort_memory: usize) -> u64 {
    let runs = if slice_bytes > sort_memory as u64 {
        slice_bytes
    } else {
        0
    };
    slice_bytes + runs
}

impl PlanRequest {
    /// A request for `backup`, `oplog` and `until` with everything else as `pitr
    /// plan` has it by default (counts expected, one-run inputs written, no `--ns`,
    /// no `--skip`, the output named after the limit in `cwd`); callers change what
    /// differs with struct update syntax.
    pub fn new(backup: PathBuf, oplog: String, until: UntilSpec, cwd: PathBuf) -> PlanRequest {
        PlanRequest {
            backup,
            oplog,
            until,
            backup_end: None,
            ns: Vec::new(),
            skip: Vec::new(),
            out: None,
            cwd,
            allow_truncated: false,
            expect: true,
            id_cap: super::expect::DEFAULT_ID_CAP,
            sort_memory: 256 << 20,
            versions: VersionHints::default(),
            content: None,
            mongorestore_inputs: true,
            keep_slice: true,
            backup_in_spare: false,
            stream_archive: false,
            decided: None,
            sort_room: None,
        }
    }
}

/// How the plan builds the replica with whole documents.
#[derive(Clone, Debug)]
pub struct ContentOptions {
    /// Bytes of documents kept in memory before they move to `spill_dir`.
    pub memory: usize,
    /// An existing directory for the on-disk store (removed by the caller).
    pub spill_dir: PathBuf,
    /// Apply the slice strictly (the embedded engine): an entry that a secondary
    /// could not apply stops the plan. Otherwise as a mongorestore replay does.
    pub strict: bool,
    /// Leave the hashes out of the plan's expectations: the caller computes them
    /// ([`super::expect::Model::hash_alongside`]) while it writes its dump, then
    /// writes `plan.json` again ([`rewrite_plan_json`]).
    pub defer_hashes: bool,
    /// Replay as a config server applies its own oplog: the sharding catalog's
    /// `applyOps` on `config.$cmd` are applied (see `RestoreRules::config_server`).
    pub config_server: bool,
    /// A directory on the dump's file system where the files of collections left
    /// cold are copied while the oplog is applied, for the dump to rename into
    /// place ([`crate::engine::replica::cold::ColdDocs::copy_ahead`]; the embedded
    /// replay's plain directory dump). None: the dump copies them.
    pub cold_copies: Option<crate::engine::replica::cold::CopyAhead>,
}

impl ContentOptions {
    /// The content as a mongorestore replay leaves it (`--engine mongod`'s
    /// prediction): applied leniently, hashes in the plan, no config-server rules,
    /// no copies made ahead; documents past `memory` in `spill_dir`.
    pub fn predicting(memory: usize, spill_dir: PathBuf) -> ContentOptions {
        ContentOptions {
            memory,
            spill_dir,
            strict: false,
            defer_hashes: false,
            config_server: false,
            cold_copies: None,
        }
    }
}

/// Refuses an input that can be read only once (a pipe, such as `<(zcat ...)` or
/// `/dev/stdin` fed by one, or a socket): the plan reads each input more than
/// once (the oplog's scan, then its slice; the backup's read, then its load), and
/// the second read of a pipe waited forever for a writer that had gone.
fn refuse_read_once(flag: &'static str, what: &'static str, path: &Path) -> Result<(), PlanError> {
    use std::os::unix::fs::FileTypeExt;
    // What cannot be looked at (a URL, a path not there) is left to the readers,
    // whose errors name it.
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let t = meta.file_type();
    let kind = if t.is_fifo() {
        "a pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        return Ok(());
    };
    Err(PlanError::ReadOnce {
        flag,
        what,
        path: path.display().to_string(),
        kind,
    })
}

/// Makes the plan and writes `<out>/oplog.bson` and `<out>/plan.json`.
pub fn build(req: &PlanRequest, progress: &dyn Progress) -> Result<RestorePlan, PlanError> {
    build_with_model(req, progress).map(|(plan, _)| plan)
}

/// [`build`], also returning the replay model (the replica at the limit).
///
/// The phases, in order (each below): the backup and its end; the replay oplog's
/// first pass (refused if it is another history); the restore point and coverage;
/// then, files being written from here on, the slice; what is at stake; the replay
/// model seeded and fed both oplogs; the lint; the restore commands; the plan,
/// committed last.
pub fn build_with_model(
    req: &PlanRequest,
    progress: &dyn Progress,
) -> Result<(RestorePlan, Model), PlanError> {
    if req.oplog == "-" {
        return Err(PlanError::OplogStdin);
    }
    refuse_read_once("--backup", "backup", &req.backup)?;
    refuse_read_once("--oplog", "oplog", Path::new(&req.oplog))?;
    let filter = NsFilter::new(&req.ns)?;
    let skips = skip_positions(&req.skip)?;
    let opts = ReadOptions {
        allow_truncated: req.allow_truncated,
    };
    let timer = PhaseTimer::start();
    let mut backup = read_backup(req, opts, progress)?;
    timer.mark("backup and its oplog read");
    let oplog_scan = read_oplog(req, opts, &backup, filter.as_ref(), &skips, progress)?;
    let mut point = restore_point(req, &backup, &oplog_scan, filter.as_ref(), &skips)?;
    let limit = point.until.limit;

    // From here on, files are written.
    let out_path = req
        .out
        .clone()
        .unwrap_or_else(|| req.cwd.join(format!("pitr-plan-{}-{}", limit.t, limit.i)));
    let out = OutDir::prepare(out_path)?;
    timer.mark("oplog scanned");
    let layout = Layout::of(req, &backup, filter.as_ref());
    let Replayed {
        slice,
        stake,
        mut model,
        mut linter,
        layout,
        prepared_at_limit,
    } = replay(
        req,
        opts,
        (&mut backup, &oplog_scan),
        &mut point,
        (layout, filter.as_ref()),
        &out,
        (progress, &timer),
    )?;
    {
        let r = model.replica();
        timer.note(&format!(
            "{} entries applied, {} on writer threads, in {} queues ({} shared out)",
            r.applied, r.on_writers, r.batches, r.batches_shared
        ));
    }
    let (mut expected, expected_note) = finish_model(req, &backup, &mut model, progress)?;
    timer.mark("counts and hashes");
    cross_check_num_records(
        &mut expected,
        point.until.entry_at_limit.as_ref(),
        limit,
        &mut linter,
    );
    plan_lints(
        &LintContext {
            inv: &backup.inv,
            oplog: &oplog_scan,
            backup: backup.scan.as_ref(),
            backup_end: backup.end,
            limit,
            mode: point.coverage.mode,
            filter: filter.as_ref(),
            known_ns: &point.known_ns,
            skips: &point.skip_set,
            slice: &slice,
            backup_oplog_replay: backup.replays_own_oplog(),
        },
        &mut linter,
    );
    timer.mark("lint");
    let lint = linter.finish();

    let restore = restore_spec(
        req,
        &backup,
        &point,
        &layout,
        filter.as_ref(),
        expected.as_deref(),
        &out,
    );
    let plan = RestorePlan {
        format: FORMAT.to_string(),
        pitr_version: env!("CARGO_PKG_VERSION").to_string(),
        backup: backup_section(req, &backup),
        oplog: range_of(&oplog_scan),
        steps: steps::steps(&restore, &CommandValues::placeholders()),
        slice: slice_section(req, &slice, &backup, &layout, &out, limit),
        skips: skip_outcomes(&slice),
        until: point.until,
        coverage: point.coverage,
        ns_filter: req.ns.clone(),
        lint,
        expected,
        expected_note,
        stake,
        versions: Some(backup.rules.versions.clone()),
        restore,
        prepared_at_limit,
    };
    let restore_dir = write_one_run(req, &backup, &layout, &slice, &out)?;
    timer.mark(if restore_dir.is_some() {
        "one-run restore directory written"
    } else {
        "plan assembled"
    });
    out.commit(slice, restore_dir, &plan)?;
    Ok((plan, model))
}

/// What [`replay`] leaves: the slice written, what is at stake, the model at the
/// limit, the lint so far.
struct Replayed {
    slice: SliceOutcome,
    stake: Stake,
    model: Model,
    linter: Linter,
    layout: Layout,
    prepared_at_limit: Vec<PreparedAtLimit>,
}

/// The slice written and what is at stake said, the model seeded, and both oplogs
/// applied to it: one after the other, or the slice applied as it is written
/// ([`streamed`]).
fn replay(
    req: &PlanRequest,
    opts: ReadOptions,
    (backup, oplog): (&mut BackupRead, &OplogScan),
    point: &mut Point,
    (layout, f): (Layout, Option<&NsFilter>),
    out: &OutDir,
    (progress, timer): (&dyn Progress, &PhaseTimer),
) -> Result<Replayed, PlanError> {
    let streamed = match streamed::applies(req, oplog, point, &layout) {
        true => streamed::run(
            req,
            opts,
            (&*backup, oplog),
            point,
            (&layout, f),
            out,
            (progress, timer),
        )?,
        false => None,
    };
    let (slice, stake, model, linter, layout, prepared_at_limit) = match streamed {
        Some(st) => {
            let streamed::Streamed {
                mut slice,
                stake,
                mut model,
                mut linter,
                mut walker,
                found,
            } = st;
            let layout = layout.with_slice(&point.coverage, &mut slice)?;
            linter.set_second_run(layout.second_run());
            let prepared = replay_end(
                req,
                (backup.end, oplog),
                (point, &slice, found),
                &mut walker,
                &mut linter,
                &mut model,
            )?;
            (slice, stake, model, linter, layout, prepared)
        }
        None => {
            let (mut slice, stake, mut model) = slice_and_seed(
                req,
                opts,
                (backup, oplog),
                point,
                (&layout, f),
                out,
                (progress, timer),
            )?;
            let layout = layout.with_slice(&point.coverage, &mut slice)?;
            timer.mark("replica seeded");
            let mut linter = Linter::new(&backup.rules);
            linter.set_second_run(layout.second_run());
            let prepared = replay_both(
                req,
                (backup, oplog),
                point,
                &slice,
                &mut linter,
                &mut model,
                progress,
            )?;
            (slice, stake, model, linter, layout, prepared)
        }
    };
    timer.mark("backup oplog and slice applied");
    Ok(Replayed {
        slice,
        stake,
        model,
        linter,
        layout,
        prepared_at_limit,
    })
}

/// The backup, the rules its restore follows, its own oplog's first pass, and where
/// its data is complete up to.
struct BackupRead {
    inv: Inventory,
    /// The releases whose rules the replay walk and the lint follow.
    rules: Rules,
    /// The first pass over the backup's own oplog (none without one).
    scan: Option<OplogScan>,
    /// Its first and last ts.
    range: Option<(Ts, Ts)>,
    /// Its last entries, to compare the replay oplog with ([`history`]).
    history: RefCell<history::Lookup>,
    /// `E`: the position the backup's data is complete up to.
    end: Ts,
    /// `backup_oplog` (its last entry) or `flag` (`--backup-end`).
    end_source: &'static str,
    /// Its files checked and hashed while the oplogs are read ([`early_cold`]).
    early_cold: Option<crate::engine::replica::cold::Early>,
}

impl BackupRead {
    /// The backup's own oplog file, when it is replayed with it.
    fn own_oplog_replayed(&self) -> Option<&Path> {
        self.inv
            .oplog_file
            .as_deref()
            .filter(|_| self.replays_own_oplog())
    }

    /// The backup's own oplog is replayed with it (it has one).
    fn replays_own_oplog(&self) -> bool {
        self.range.is_some()
    }
}

/// `(target, exact)`: the time a `--until` time maps from, or its exact position.
fn until_positions(until: &UntilSpec) -> (Option<Ts>, Option<Ts>) {
    match until {
        UntilSpec::Time(tv) if tv.is_exact_position() => (None, Some(tv.ts)),
        UntilSpec::Time(tv) => (Some(tv.ts), None),
        _ => (None, None),
    }
}

fn read_backup(
    req: &PlanRequest,
    opts: ReadOptions,
    progress: &dyn Progress,
) -> Result<BackupRead, PlanError> {
    let inv = inventory_with(
        &req.backup,
        InventoryOptions {
            collect_ids: req.expect && req.content.is_none(),
            id_cap: req.id_cap,
        },
        progress,
    )?;
    // From here on, alongside the oplogs' first passes.
    let early_cold = early_cold(req, &inv);
    let mut rules = Rules::from_hints(&VersionHints {
        backup_server: inv
            .backup
            .prelude
            .as_ref()
            .and_then(|p| p.server_version.clone()),
        ..req.versions.clone()
    })?;
    rules.mongorestore.config_server = req.content.as_ref().is_some_and(|c| c.config_server);
    let (target, _) = until_positions(&req.until);
    let mut scan = match &inv.oplog_file {
        Some(p) => {
            let probe = Probe {
                target,
                remember: true,
                seen: req.content.is_some() && !crate::engine::replica::cold::disabled(),
                ..Probe::default()
            };
            Some(scan::scan(
                &p.to_string_lossy(),
                opts,
                &probe,
                progress,
                "reading the backup's oplog",
            )?)
        }
        None => None,
    };
    let range = scan.as_ref().and_then(OplogScan::range);
    let history = RefCell::new(
        scan.as_mut()
            .map(|b| std::mem::take(&mut b.remembered).into_lookup())
            .unwrap_or_default(),
    );
    let (end, end_source) = match (range, &req.backup_end) {
        (Some((_, last)), None) => (last, "backup_oplog"),
        (Some((_, last)), Some(v)) if v.ts == last => (last, "backup_oplog"),
        (Some((_, last)), Some(v)) => {
            return Err(PlanError::BackupEndConflict {
                given: v.input.clone(),
                oplog_end: last,
            })
        }
        (None, Some(v)) => (v.ts, "flag"),
        (None, None) => {
            return Err(PlanError::NoBackupEnd {
                dir: req.backup.clone(),
                why: if inv.oplog_file.is_some() {
                    "its oplog.bson is empty"
                } else {
                    "no oplog.bson"
                },
            })
        }
    };
    Ok(BackupRead {
        inv,
        rules,
        scan,
        range,
        history,
        end,
        end_source,
        early_cold,
    })
}

/// The first pass over the replay oplog (the backup's metadata tells routine
/// operations from incidents); an oplog of another history (another replica set,
/// another year, entries the backup holds rolled back since) is refused here,
/// before anything else is decided.
fn read_oplog(
    req: &PlanRequest,
    opts: ReadOptions,
    backup: &BackupRead,
    filter: Option<&NsFilter>,
    skips: &[Ts],
    progress: &dyn Progress,
) -> Result<OplogScan, PlanError> {
    let (target, exact) = until_positions(&req.until);
    let mut positions: HashSet<Ts> = skips.iter().copied().collect();
    positions.insert(backup.end);
    positions.extend(exact);
    let catalog = Catalog::from_backup(&backup.inv.backup);
    let probe = Probe {
        target,
        positions,
        ns_filter: filter,
        findings: true,
        catalog: Some(&catalog),
        chunks_from: Some(backup.end),
        remember: false,
        history: Some(&backup.history),
        // A time --until needs the archive only up to the entry at or after it
        // (`auto` and `end` need all of it).
        chunks_to: match &req.until {
            UntilSpec::Time(tv) => Some(tv.ts),
            _ => None,
        },
        seen: req.content.is_some() && !crate::engine::replica::cold::disabled(),
    };
    let scan = scan::scan(&req.oplog, opts, &probe, progress, "reading the oplog")?;
    history::check(&HistoryInput {
        oplog_name: scan.name.clone(),
        oplog: scan.range(),
        backup_end: backup.end,
        backup_oplog: backup.range,
        overlap: scan
            .range()
            .map(|(first, last)| backup.history.borrow().overlap(first, last)),
    })?;
    Ok(scan)
}

/// The restore point: the limit, coverage, and the `--skip` positions checked.
struct Point {
    until: until::UntilSection,
    coverage: coverage::Coverage,
    skip_set: HashSet<Ts>,
    /// The backup's namespaces.
    known_ns: Vec<String>,
}

fn restore_point(
    req: &PlanRequest,
    backup: &BackupRead,
    oplog: &OplogScan,
    filter: Option<&NsFilter>,
    skips: &[Ts],
) -> Result<Point, PlanError> {
    let known_ns: Vec<String> = backup.inv.namespaces.iter().map(|n| n.ns.clone()).collect();
    check_ns_globs(&req.ns, &known_ns, oplog)?;
    let until = until::resolve(
        &req.until,
        backup.end,
        backup.scan.as_ref(),
        oplog,
        filter,
        &known_ns,
    )?;
    let limit = until.limit;
    let coverage = coverage::check(&CoverageInput {
        backup_end: backup.end,
        end_from_flag: backup.end_source == "flag",
        backup_oplog: backup.range,
        oplog: oplog.range(),
        oplog_name: oplog.name.clone(),
        limit,
        anchor_found: oplog.found.contains_key(&backup.end),
        gaps: oplog.gaps.clone(),
        until: match &req.until {
            UntilSpec::Time(tv) if !tv.is_exact_position() => Some(tv.input.clone()),
            _ => None,
        },
    })?;
    for &s in skips {
        if s <= backup.end {
            return Err(PlanError::SkipInBackup {
                ts: s,
                backup_end: backup.end,
            });
        }
        if s >= limit {
            return Err(PlanError::SkipAfterLimit { ts: s, limit });
        }
        if !oplog.found.contains_key(&s) {
            return Err(PlanError::SkipUnmatched {
                ts: s,
                oplog: oplog.name.clone(),
            });
        }
    }
    Ok(Point {
        until,
        coverage,
        skip_set: skips.iter().copied().collect(),
        known_ns,
    })
}

/// How the restore is laid out for mongorestore: what is restored, and whether the
/// backup and the slice go in one run.
struct Layout {
    is_archive: bool,
    /// Every namespace of the backup is restored (its own oplog is replayed, or no
    /// `--ns`).
    restore_all: bool,
    /// The slice file starts with the backup's own entries, to be linked as the
    /// one-run `restore/oplog.bson` (an uncompressed directory backup).
    linked_one_run: bool,
    /// Known once the slice is written ([`Layout::with_slice`]).
    replays_slice: bool,
    one_run: bool,
    /// The one-run inputs are written (the slice then lives inside them).
    one_run_written: bool,
    /// What mongorestore reads in one run is to be written (not for the embedded
    /// engine).
    mongorestore_inputs: bool,
    /// See [`PlanRequest::backup_in_spare`].
    backup_in_spare: bool,
    /// See [`PlanRequest::stream_archive`]: an archive backup streamed to stdin.
    stream: bool,
}

impl Layout {
    fn of(req: &PlanRequest, backup: &BackupRead, filter: Option<&NsFilter>) -> Layout {
        let is_archive = backup.inv.backup.layout == crate::backup::Layout::Archive;
        let restore_all = backup.replays_own_oplog() || filter.is_none();
        // A directory backup restored in one run reads `restore/oplog.bson`: the
        // backup's own entries, then the slice. Uncompressed, the slice file is
        // written that way from the start and linked there, instead of copied (on a
        // large oplog the copy cost as much time and disk again as the slice). A
        // gzip backup's is compressed, and an archive's is a new archive: both copy.
        let linked_one_run = req.mongorestore_inputs
            && !is_archive
            && !backup.inv.gzip
            && restore_all
            && !req.backup_in_spare;
        Layout {
            is_archive,
            restore_all,
            linked_one_run,
            replays_slice: false,
            one_run: false,
            one_run_written: false,
            mongorestore_inputs: req.mongorestore_inputs,
            backup_in_spare: req.backup_in_spare,
            stream: req.stream_archive && is_archive,
        }
    }

    /// One mongorestore run for the backup and the slice when the layout allows it
    /// (see `RestoreSpec`): a directory backup, restored whole. Without a slice to
    /// replay, a slice file written with the backup's entries first is emptied.
    fn with_slice(
        mut self,
        coverage: &coverage::Coverage,
        slice: &mut SliceOutcome,
    ) -> Result<Layout, PlanError> {
        self.replays_slice = coverage.mode == Mode::AfterBackup && slice.entries > 0;
        self.one_run = self.replays_slice && !self.second_run_with_slice();
        // A streamed archive's one run is made at run time from the backup and the
        // slice (`OUT/oplog.bson`): nothing more is written.
        self.one_run_written = self.one_run && self.mongorestore_inputs && !self.stream;
        if !self.one_run && slice.prefix_bytes > 0 {
            slice
                .file
                .as_file()
                .set_len(0)
                .map_err(|source| PlanError::Write {
                    path: slice.file.path().to_path_buf(),
                    source,
                })?;
            slice.prefix_bytes = 0;
        }
        Ok(self)
    }

    /// Whether the slice is replayed in a run of its own, after the backup's
    /// (once [`Layout::with_slice`] is known): the lint's second run.
    fn second_run(&self) -> bool {
        self.replays_slice && !self.one_run
    }

    /// The lint's second run ([`Linter::set_second_run`]) once [`Layout::with_slice`]
    /// found a slice with entries to replay after the backup (then it is not one
    /// run: the streamed apply sets it before the slice is known).
    fn second_run_with_slice(&self) -> bool {
        !self.restore_all || self.backup_in_spare
    }

    fn restored(&self, filter: Option<&NsFilter>, ns: &str) -> bool {
        self.restore_all || filter.is_some_and(|f| f.matches(ns))
    }
}

#[allow(clippy::too_many_arguments)]
fn write_slice(
    req: &PlanRequest,
    opts: ReadOptions,
    backup: &BackupRead,
    oplog: &OplogScan,
    point: &Point,
    (layout, filter): (&Layout, Option<&NsFilter>),
    out: &OutDir,
    (progress, tee): (&dyn Progress, Option<super::tee::Tee>),
) -> Result<SliceOutcome, PlanError> {
    if !(point.coverage.mode == Mode::AfterBackup && point.coverage.oplog_needed) {
        if let Some(mut t) = tee {
            t.end(&mut || Ok(()));
        }
        return slice::empty(&out.path);
    }
    if let (Some(room), true) = (&req.sort_room, oplog.out_of_order > 0) {
        // The slice's entries, between the backup's end and the limit, counted by
        // the scan whatever their order (`SizeSamples` assume ts order).
        let slice = oplog.by_time.at_most_between(backup.end, point.until.limit);
        (room.0)(sort_peak_bytes(slice, req.sort_memory))?;
    }
    slice::write_teed(
        &SliceRequest {
            oplog: &req.oplog,
            opts,
            from_exclusive: backup.end,
            to_exclusive: point.until.limit,
            filter,
            known_ns: &point.known_ns,
            ns_txn_keys: &oplog.ns_txn_keys,
            skips: &point.skip_set,
            input_sorted: oplog.out_of_order == 0,
            input_unique_ts: oplog.duplicates == 0,
            dir: &out.path,
            keep: req.keep_slice,
            sort_memory: req.sort_memory,
            prefix: backup
                .inv
                .oplog_file
                .as_deref()
                .filter(|_| layout.linked_one_run),
        },
        tee,
        progress,
    )
}

/// The slice written (each entry also handed to `tee`, when given), then what is
/// at stake said.
#[allow(clippy::too_many_arguments)]
fn slice_and_stake(
    req: &PlanRequest,
    opts: ReadOptions,
    (backup, oplog): (&BackupRead, &OplogScan),
    point: &Point,
    (layout, f): (&Layout, Option<&NsFilter>),
    out: &OutDir,
    (progress, tee): (&dyn Progress, Option<super::tee::Tee>),
) -> Result<(SliceOutcome, Stake), PlanError> {
    let mut slice = write_slice(
        req,
        opts,
        backup,
        oplog,
        point,
        (layout, f),
        out,
        (progress, tee),
    )?;
    let stake = at_stake(req, opts, (backup, oplog), point, f, &mut slice, progress);
    Ok((slice, stake))
}

/// What the restore keeps and loses, said (through `progress`) before anything is
/// applied.
fn at_stake(
    req: &PlanRequest,
    opts: ReadOptions,
    (backup, oplog): (&BackupRead, &OplogScan),
    point: &Point,
    filter: Option<&NsFilter>,
    slice: &mut SliceOutcome,
    progress: &dyn Progress,
) -> Stake {
    let limit = point.until.limit;
    let mut st = Stake {
        incidents: stake::incidents(&oplog.findings, backup.end, limit, &point.skip_set, filter),
        ..Stake::default()
    };
    let (lost, note) = if slice.after_limit_read {
        (std::mem::take(&mut slice.after_limit), None)
    } else {
        slice::count_after(&req.oplog, opts, limit, progress)
    };
    lost.finish(&mut st);
    st.lost_note = note;
    progress.at_stake(
        &st,
        &glance::Points {
            oplog: oplog.range(),
            backup_first: backup.range.map(|r| r.0),
            backup_end: backup.end,
            incidents: &st.incidents,
            limit,
            before: point
                .until
                .finding
                .as_ref()
                .filter(|f| f.oplog_limit == limit)
                .map(|f| format!("{} {}", f.kind, f.ns)),
        },
    );
    st
}

/// The slice written and what is at stake said, then the replay model seeded.
///
/// With whole documents (the embedded engine) the two overlap: the backup's
/// documents load into the replica on a thread of their own while this thread
/// writes the slice. They read different inputs (the backup's data files; the
/// oplog) and write different places (the replica's memory and spill directory;
/// the plan's output), so the outcome is the sequential one: the same slice, the
/// same replica, and the same error when either fails (the slice's first, as it
/// came first; a failed slice stops the loading at its next check). A Ctrl-C stops
/// both ([`crate::engine::replica::interrupt`]). The seeding's last progress line
/// waits for the slice's ([`Progress::phase_alongside`]). Memory: only an oplog in
/// ts order overlaps, whose slice is streamed (a few buffers); one out of order is
/// sorted in up to `sort_memory`, which the replica's budget (`--memory`) does not
/// count, so it is written first and the replica seeded after, as before.
fn slice_and_seed(
    req: &PlanRequest,
    opts: ReadOptions,
    (backup, oplog): (&mut BackupRead, &OplogScan),
    point: &Point,
    (layout, f): (&Layout, Option<&NsFilter>),
    out: &OutDir,
    (progress, timer): (&dyn Progress, &PhaseTimer),
) -> Result<(SliceOutcome, Stake, Model), PlanError> {
    let sliced = |backup: &BackupRead| {
        let (slice, stake) = slice_and_stake(
            req,
            opts,
            (backup, oplog),
            point,
            (layout, f),
            out,
            (progress, None),
        )?;
        timer.mark("slice written");
        Ok::<_, PlanError>((slice, stake))
    };
    let Some(c) = &req.content else {
        let (slice, stake) = sliced(backup)?;
        let model = seed_counts(req, &mut backup.inv, layout, f);
        return Ok((slice, stake, model));
    };
    let backup: &BackupRead = backup;
    let inv = &backup.inv;
    let untouched = untouched(backup, oplog);
    let cold = cold_hint(backup, &untouched);
    if oplog.out_of_order > 0 {
        // The slice is sorted in up to `sort_memory` while it is written: that and
        // the replica's budget at once would break the promise of `--memory`.
        let (slice, stake) = sliced(backup)?;
        let model = seed_content(req, c, (inv, cold), (layout, f), progress, None)?;
        return Ok((slice, stake, model));
    }
    let ((slice, stake), (model, (wall, cpu))) = overlap(
        || sliced(backup),
        |alongside| {
            let clock = ThreadClock::start();
            let m = seed_content(req, c, (inv, cold), (layout, f), progress, Some(alongside))?;
            Ok((m, clock.took()))
        },
    )?;
    timer.note(&format!(
        "the backup's documents loaded in {wall:.3} s ({cpu:.3} s cpu) on a thread of their own, alongside the slice"
    ));
    timer.mark("backup loaded");
    // The loading thread's own malloc arena kept what it freed past the budget
    // (40 MB more peak RSS at --memory 64MiB): given back.
    crate::memory::give_back_freed_heap();
    Ok((slice, stake, model))
}

/// What neither oplog names, which may stay in the backup's files (`replica::cold`).
fn untouched<'a>(
    backup: &'a BackupRead,
    oplog: &'a OplogScan,
) -> impl Fn(&str) -> bool + Sync + 'a {
    let (replay_seen, backup_seen) = (&oplog.seen, backup.scan.as_ref().map(|s| &s.seen));
    move |ns: &str| replay_seen.untouched(ns) && backup_seen.is_none_or(|s| s.untouched(ns))
}

/// What may stay cold, unless `PITR_COLD=load`.
fn cold_hint<'a>(backup: &'a BackupRead, untouched: Untouched<'a>) -> Option<ColdHint<'a>> {
    (!crate::engine::replica::cold::disabled()).then_some(ColdHint {
        untouched,
        early: backup.early_cold.as_ref(),
    })
}

/// Runs `side` on a thread of its own while `main` runs on this one, and returns
/// both results. Errors come out as if `main` had run first: its error wins; when it
/// fails, `side` is asked to stop ([`Alongside::stopped`]) and its result dropped.
/// The gate `side` may wait on ([`Alongside::after`]) opens when `main` ends, however
/// it ends (a panic included: the scope then joins `side`, which must not wait
/// forever). A panic on either side goes on up. Without a second thread to be had
/// (the spawn failed), one after the other.
fn overlap<A, B: Send>(
    main: impl FnOnce() -> Result<A, PlanError>,
    side: impl Fn(&Alongside) -> Result<B, PlanError> + Sync,
) -> Result<(A, B), PlanError> {
    let alongside = Alongside::default();
    let (a, b) = std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("pitr-alongside".into())
            .spawn_scoped(s, || side(&alongside));
        let Ok(handle) = spawned else {
            let a = main();
            alongside.release(a.is_err());
            // Stopped at its first check when `main` failed.
            return (a, side(&alongside));
        };
        let release = ReleaseOnDrop(&alongside);
        let a = main();
        alongside.release(a.is_err());
        drop(release);
        let b = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (a, b)
    });
    Ok((a?, b?))
}

/// What the seeding thread shares with the thread writing the slice.
#[derive(Default)]
struct Alongside {
    /// Opened when the slice is written (or failed): the seeding's last line follows.
    after: super::Gate,
    /// Set when the slice failed: its error is the plan's, the loading stops.
    stop: std::sync::atomic::AtomicBool,
    /// The loading's last line does not wait for the gate: the thread goes on to
    /// apply the slice as it is written ([`streamed`]).
    goes_on: bool,
}

impl Alongside {
    fn release(&self, stop: bool) {
        if stop {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.after.open();
    }

    fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Opens the gate and stops the loading however the slice's side ends (a panic
/// included): the scope joins the seeding thread, which must not wait forever.
struct ReleaseOnDrop<'a>(&'a Alongside);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        if !self.0.after.is_open() {
            self.0.release(true);
        }
    }
}

/// The replay model seeded with whole documents (the embedded engine, hash
/// predictions).
fn seed_content(
    req: &PlanRequest,
    c: &ContentOptions,
    (inv, cold): (&Inventory, Option<ColdHint<'_>>),
    (layout, filter): (&Layout, Option<&NsFilter>),
    progress: &dyn Progress,
    alongside: Option<&Alongside>,
) -> Result<Model, PlanError> {
    let restored = |ns: &str| layout.restored(filter, ns);
    let mut m = seed_documents(inv, c, &restored, cold, req.expect, progress, alongside)?;
    if c.defer_hashes {
        m.defer_hashes();
    }
    if !c.strict {
        if let Some(why) = capped_natural_order(&req.versions) {
            m.leave_capped_unpredicted(why);
        }
    }
    Ok(m)
}

/// The replay model seeded with the backup's `_id`s and counts.
fn seed_counts(
    req: &PlanRequest,
    inv: &mut Inventory,
    layout: &Layout,
    filter: Option<&NsFilter>,
) -> Model {
    let restored = |ns: &str| layout.restored(filter, ns);
    let counting = inv.ids.is_some();
    let mut ids = inv.ids.take().unwrap_or_default();
    let seeds: Vec<Seed> = inv
        .namespaces
        .iter()
        .filter(|n| matches!(n.kind, NsKind::Collection | NsKind::Timeseries) && restored(&n.ns))
        .map(|n| {
            // Time-series data lives in (and the oplog writes) the buckets collection.
            let data_ns = n.data_ns.clone().unwrap_or_else(|| n.ns.clone());
            Seed {
                ids: ids.remove(&data_ns),
                ns: data_ns,
                documents: n.documents,
                no_id: n.no_id_documents,
            }
        })
        .collect();
    drop(ids);
    let mut m = Model::new(seeds, counting);
    m.cap_ids(req.id_cap);
    m
}

/// The model and the lint walk exactly what the mongorestore runs apply: the
/// backup's own oplog, then the slice. The restore point's explanation then names
/// the first entry not applied.
fn replay_both(
    req: &PlanRequest,
    (backup, oplog): (&BackupRead, &OplogScan),
    point: &mut Point,
    slice: &SliceOutcome,
    linter: &mut Linter,
    model: &mut Model,
    progress: &dyn Progress,
) -> Result<Vec<PreparedAtLimit>, PlanError> {
    let limit = point.until.limit;
    let mut walker = Walker::new(backup.rules.mongorestore.clone());
    let found = replay_backup_part(
        req,
        (backup.own_oplog_replayed(), slice.bytes),
        limit,
        &mut walker,
        linter,
        model,
        progress,
    )?;
    replay_slice(
        slice,
        backup.end,
        limit,
        &mut walker,
        linter,
        model,
        progress,
    )?;
    replay_end(
        req,
        (backup.end, oplog),
        (point, slice, found),
        &mut walker,
        linter,
        model,
    )
}

/// The backup's own oplog, when it is replayed, then the model told the backup's
/// part is over and about how many bytes of slice are to come
/// ([`Model::expect_writes`]). Returns the backup oplog's first entry at or after
/// the limit.
fn replay_backup_part(
    req: &PlanRequest,
    (own_oplog, slice_bytes): (Option<&Path>, u64),
    limit: Ts,
    walker: &mut Walker,
    linter: &mut Linter,
    model: &mut Model,
    progress: &dyn Progress,
) -> Result<Option<EntryRef>, PlanError> {
    let opts = ReadOptions {
        allow_truncated: req.allow_truncated,
    };
    let mut found = None;
    if let Some(p) = own_oplog {
        found = replay_backup_oplog(p, opts, limit, walker, linter, model, progress)?;
    }
    model.mark_backup_end();
    model.expect_writes(slice_bytes);
    Ok(found)
}

/// After the slice: the prepared transactions open at the limit decided, the open
/// transactions said, and the first entry not applied named.
fn replay_end(
    req: &PlanRequest,
    (backup_end, oplog): (Ts, &OplogScan),
    (point, slice, found): (&mut Point, &SliceOutcome, Option<EntryRef>),
    walker: &mut Walker,
    linter: &mut Linter,
    model: &mut Model,
) -> Result<Vec<PreparedAtLimit>, PlanError> {
    let limit = point.until.limit;
    let prepared = match &req.decided {
        Some(d) => decide_prepared(walker, d, limit, linter, model)?,
        None => Vec::new(),
    };
    linter.open_at_end(&walker.open_transactions(), limit);
    let mut at_or_after: Vec<EntryRef> = slice.at_or_after_limit.iter().cloned().collect();
    at_or_after.extend(oplog.found.get(&limit).cloned());
    at_or_after.extend(found);
    let union_last = backup_end.max(oplog.last_ts.unwrap_or(backup_end));
    let first_not_applied = at_or_after
        .into_iter()
        .filter(|e| e.ts >= limit)
        .min_by_key(|e| e.ts);
    until::explain(&mut point.until, first_not_applied, union_last);
    Ok(prepared)
}

/// A cluster member's prepared transactions open at the limit, decided by the
/// cluster's table ([`PlanRequest::decided`]; rule R2): applied, let go, or left
/// open (undecided: the lint's `txn-open-at-limit`, which a cluster restore refuses).
fn decide_prepared(
    walker: &mut Walker,
    decided: &HashMap<Vec<u8>, TxnDecision>,
    limit: Ts,
    linter: &mut Linter,
    model: &mut Model,
) -> Result<Vec<PreparedAtLimit>, PlanError> {
    let outcomes = walker
        .decide_prepared(
            decided,
            limit,
            &mut Both {
                lint: linter,
                model,
            },
        )
        .map_err(|e| PlanError::PreparedPart(e.to_string()));
    // The transactions' writes may sit in the writer threads' queue.
    let outcomes = settled(model, outcomes)?;
    let mut out = Vec::new();
    for (t, d) in outcomes {
        let (decision, ct) = match d {
            Some(TxnDecision::Commit(ct)) => ("commit", Some(ct)),
            Some(TxnDecision::Abort) => ("abort", None),
            None => ("undecided", None),
        };
        let included = ct.is_some_and(|c| c < limit);
        if d.is_some() {
            linter.prepared_decided(&t, d, limit);
        }
        out.push(PreparedAtLimit {
            txn: t.label,
            first: t.first,
            namespaces: t.namespaces,
            decision: decision.into(),
            commit_timestamp: ct,
            included,
        });
    }
    Ok(out)
}

/// The expected counts (and hashes), or why there are none.
fn finish_model(
    req: &PlanRequest,
    backup: &BackupRead,
    model: &mut Model,
    progress: &dyn Progress,
) -> Result<(Option<Vec<super::ExpectedNs>>, Option<String>), PlanError> {
    model.enforce_cap();
    let expected = model.finish_with(progress)?;
    let note = if !req.expect {
        Some("not computed (--no-expect)".to_string())
    } else if expected.is_none() {
        model
            .ids_note()
            .map(str::to_string)
            .or_else(|| backup.inv.ids_note.clone())
    } else {
        None
    };
    Ok((expected, note))
}

/// The inputs of the restore commands.
fn restore_spec(
    req: &PlanRequest,
    backup: &BackupRead,
    point: &Point,
    layout: &Layout,
    filter: Option<&NsFilter>,
    expected: Option<&[super::ExpectedNs]>,
    out: &OutDir,
) -> RestoreSpec {
    let limit = point.until.limit;
    let out_dir = absolute(&out.path);
    let ns_include = if layout.restore_all || layout.one_run {
        Vec::new()
    } else {
        let matching: Vec<String> = backup
            .inv
            .namespaces
            .iter()
            .filter(|n| layout.restored(filter, &n.ns) && n.kind != NsKind::IndexCatalog)
            .map(|n| ns_include_literal(&n.ns))
            .collect();
        if matching.is_empty() {
            req.ns.clone()
        } else {
            matching
        }
    };
    RestoreSpec {
        backup_dir: if layout.one_run && !layout.stream {
            Path::new(&out_dir)
                .join(if layout.is_archive {
                    RESTORE_ARCHIVE
                } else {
                    RESTORE_DIR
                })
                .display()
                .to_string()
        } else {
            absolute(&req.backup)
        },
        combined: layout.one_run,
        archive: layout.is_archive,
        gzip: backup.inv.gzip,
        backup_oplog_replay: backup.replays_own_oplog() || layout.one_run,
        backup_oplog_limit: (point.coverage.mode == Mode::WithinBackupOplog || layout.one_run)
            .then_some(limit),
        ns_include,
        slice_dir: layout.second_run().then(|| out_dir.clone()),
        limit,
        plan_file: Path::new(&out_dir).join("plan.json").display().to_string(),
        dump_namespaces: dump_namespaces(filter, expected, &point.known_ns),
        inputs_written: req.mongorestore_inputs,
        backup_in_spare: req.backup_in_spare,
        stream: layout.stream.then(|| steps::StreamSpec {
            backup: absolute(&req.backup),
            slice: layout
                .one_run
                .then(|| Path::new(&out_dir).join("oplog.bson").display().to_string()),
        }),
    }
}

/// With `--ns`, the namespaces the optional dump step takes (by a time-series
/// collection's own name: mongodump refuses `--collection system.buckets.X`).
fn dump_namespaces(
    filter: Option<&NsFilter>,
    expected: Option<&[super::ExpectedNs]>,
    known_ns: &[String],
) -> Vec<String> {
    let Some(f) = filter else {
        return Vec::new();
    };
    let mut v: Vec<String> = match expected {
        Some(exp) => exp
            .iter()
            .filter(|e| e.exists && f.matches(&e.ns))
            .map(|e| e.ns.clone())
            .collect(),
        None => known_ns
            .iter()
            .filter(|ns| f.matches(ns))
            .cloned()
            .collect(),
    };
    for ns in v.iter_mut() {
        if let Some(view) = crate::forensics::namespaces::timeseries_view(ns) {
            *ns = view;
        }
    }
    v.sort();
    v.dedup();
    v
}

fn backup_section(req: &PlanRequest, backup: &BackupRead) -> BackupSection {
    let inv = &backup.inv;
    BackupSection {
        dir: absolute(&req.backup),
        gzip: inv.gzip,
        documents: inv
            .namespaces
            .iter()
            .filter(|n| matches!(n.kind, NsKind::Collection | NsKind::Timeseries))
            .map(|n| n.documents)
            .sum(),
        namespaces: inv.namespaces.clone(),
        oplog: backup.scan.as_ref().map(range_of),
        end_ts: backup.end,
        end_utc: backup.end.utc_string(),
        end_source: backup.end_source.to_string(),
        ignored_files: inv.ignored_files.clone(),
    }
}

fn slice_section(
    req: &PlanRequest,
    slice: &SliceOutcome,
    backup: &BackupRead,
    layout: &Layout,
    out: &OutDir,
    limit: Ts,
) -> SliceSection {
    let out_dir = absolute(&out.path);
    SliceSection {
        dir: out_dir.clone(),
        oplog_file: if layout.one_run_written && layout.is_archive {
            Path::new(&out_dir).join(RESTORE_ARCHIVE)
        } else if layout.one_run_written {
            Path::new(&out_dir).join(RESTORE_DIR).join("oplog.bson")
        } else {
            Path::new(&out_dir).join("oplog.bson")
        }
        .display()
        .to_string(),
        after_backup_oplog: layout.one_run_written,
        kept: req.keep_slice,
        entries: slice.entries,
        bytes: slice.bytes,
        first_ts: slice.first_ts,
        last_ts: slice.last_ts,
        from_exclusive: backup.end,
        to_exclusive: limit,
        reordered: slice.reordered,
        duplicates_dropped: slice.duplicates_dropped,
        same_ts_kept: slice.same_ts_kept,
        filtered_out: slice.filtered_out,
        skipped: slice.skipped.len() as u64,
    }
}

/// What happened to each `--skip`, in ts order.
fn skip_outcomes(slice: &SliceOutcome) -> Vec<SkipOutcome> {
    let mut v: Vec<SkipOutcome> = slice
        .skipped
        .iter()
        .map(|e| SkipOutcome {
            ts: e.ts,
            entry: e.clone(),
            outcome: "skipped".into(),
        })
        .chain(slice.skipped_filtered.iter().map(|e| SkipOutcome {
            ts: e.ts,
            entry: e.clone(),
            outcome: "filtered_by_ns".into(),
        }))
        .collect();
    v.sort_by_key(|s| s.ts);
    v
}

/// The one-run restore directory (or archive), when the layout has one.
fn write_one_run(
    req: &PlanRequest,
    backup: &BackupRead,
    layout: &Layout,
    slice: &SliceOutcome,
    out: &OutDir,
) -> Result<Option<onerun::Written>, PlanError> {
    Ok(match (layout.one_run_written, layout.is_archive) {
        (true, true) => Some(onerun::write_archive(
            &out.path,
            &req.backup,
            slice.file.path(),
        )?),
        (true, false) => Some(onerun::write(
            &out.path,
            &req.backup,
            if layout.linked_one_run {
                onerun::Oplog::Linked(slice.file.path())
            } else {
                onerun::Oplog::Copied {
                    backup_oplog: backup.inv.oplog_file.as_deref(),
                    gzip: backup.inv.gzip,
                    slice: slice.file.path(),
                }
            },
        )?),
        (false, _) => None,
    })
}

/// Adds view `ns` as its definition document in `<db>.system.views`.
fn seed_view(
    replica: &mut crate::engine::replica::Replica,
    ns: &str,
    m: &crate::backup::Metadata,
) -> Result<(), PlanError> {
    use crate::engine::replica::{catalog::default_id_index, CollInfo, CollKind};
    let (db, _) = ns.split_once('.').unwrap_or((ns, ""));
    let views = format!("{db}.system.views");
    if !replica.exists(&views) {
        replica.seed_namespace(&views, |slot| {
            let mut c = CollInfo::new(slot, CollKind::Collection);
            c.indexes = vec![default_id_index()];
            c.indexes[0].insert("v", 2);
            c
        });
    }
    let mut d = bson::doc! { "_id": ns };
    for k in ["viewOn", "pipeline", "collation"] {
        if let Some(v) = m.options.get(k) {
            d.insert(k, v.clone());
        }
    }
    let raw = bson::RawDocumentBuf::from_document(&d).map_err(|e| {
        PlanError::Replica(crate::engine::replica::ReplicaError::Seed {
            ns: ns.into(),
            index: 0,
            why: e.to_string(),
        })
    })?;
    replica.seed_document(&views, &raw, 0)?;
    Ok(())
}

/// The replica with whole documents: every restored namespace of the backup with
/// its metadata, then every document of its data.
/// Why a spare `mongod` restored by mongorestore may hash capped collections in an
/// order the replica does not keep: releases after 8.0 read capped collections in
/// natural order in `dbHash` (`dbhash.cpp`, `useIndexScanForCappedCollections`,
/// SERVER-106005), which on the spare is the order mongorestore inserted them (the
/// backup file's, then the oplog's), not `_id` order. None when the spare is known
/// to be 8.0 or older.
fn capped_natural_order(versions: &VersionHints) -> Option<String> {
    let v = versions
        .mongod
        .as_ref()
        .and_then(|(v, _)| super::versions::Version::parse(v));
    match v {
        Some(v) if v < super::versions::Version(8, 1, 0) => None,
        Some(v) => Some(format!(
            "capped: mongod {}.{}.{} hashes capped collections in natural order, the order mongorestore inserted them, which pitr does not keep",
            v.0, v.1, v.2
        )),
        None => Some(
            "capped: the spare mongod's version is unknown, and releases after 8.0 hash capped collections in natural order, which pitr does not keep".into(),
        ),
    }
}

fn seed_documents(
    inv: &Inventory,
    c: &ContentOptions,
    restored: &dyn Fn(&str) -> bool,
    cold: Option<ColdHint<'_>>,
    counting: bool,
    progress: &dyn Progress,
    alongside: Option<&Alongside>,
) -> Result<Model, PlanError> {
    use crate::engine::replica::{CollInfo, CollKind, Content, Phase, Replica, ReplicaOptions};
    let field_order = inv
        .backup
        .prelude
        .as_ref()
        .and_then(|p| p.server_version.as_deref())
        .and_then(crate::plan::versions::Version::parse)
        .map(|v| crate::engine::FieldOrder::for_server(v.0, v.1))
        .unwrap_or_default();
    let mut replica = Replica::new(ReplicaOptions {
        content: Content::Documents,
        memory: c.memory,
        spill_dir: Some(c.spill_dir.clone()),
        update: crate::engine::ApplyOptions { field_order },
        writers: crate::engine::replica::partition::writers().map_err(PlanError::Writers)?,
    });
    replica.set_batch_entries(
        crate::engine::replica::partition::batch_entries().map_err(PlanError::Writers)?,
    );
    let mut backup_ns = std::collections::HashMap::new();
    for n in &inv.namespaces {
        let kind = match n.kind {
            NsKind::Collection | NsKind::Auth => CollKind::Collection,
            NsKind::Timeseries => CollKind::TimeseriesBuckets,
            NsKind::View => CollKind::View,
            NsKind::IndexCatalog | NsKind::Local | NsKind::NotRestored => continue,
        };
        if !restored(&n.ns) {
            continue;
        }
        let meta = inv.backup.get(&n.ns).and_then(|e| e.metadata.clone());
        if kind == CollKind::View {
            // A view is a document of `<db>.system.views` on the server; the oplog
            // creates and drops views by writing there.
            if let Some(m) = &meta {
                seed_view(&mut replica, &n.ns, m)?;
            }
            continue;
        }
        let data_ns = n.data_ns.clone().unwrap_or_else(|| n.ns.clone());
        replica.seed_namespace(&data_ns, |slot| match &meta {
            Some(m) => CollInfo::from_metadata(slot, kind, m),
            None => CollInfo::new(slot, kind),
        });
        backup_ns.insert(data_ns, n.documents);
    }
    let meter = crate::engine::replica::Meter::new();
    let total = inv.namespaces.iter().map(|n| n.documents).sum();
    let what = "loading the backup's documents";
    let unit = super::Unit::Documents;
    let _phase = match alongside {
        Some(a) if !a.goes_on => {
            progress.phase_alongside(what, unit, Some(total), &meter, &a.after)
        }
        _ => progress.phase(what, unit, Some(total), &meter),
    };
    let stopped = || alongside.is_some_and(Alongside::stopped);
    let cold_ns = match cold {
        Some(hint) => seed_cold(inv, &mut replica, hint, &meter, &stopped)?,
        None => HashSet::new(),
    };
    inv.backup.for_each_document_where(
        &|n| !cold_ns.contains(n.data_ns.as_deref().unwrap_or(&n.ns)),
        |entry, doc, _offset, index| -> Result<(), PlanError> {
            if index.is_multiple_of(crate::engine::replica::interrupt::EVERY) && stopped() {
                // The slice failed: its error is the one reported; this one is dropped.
                return Err(crate::engine::replica::ReplicaError::Interrupted.into());
            }
            meter.add(1);
            let data_ns = entry.data_ns.as_deref().unwrap_or(&entry.ns);
            if replica.exists(data_ns) {
                replica.seed_document(data_ns, doc, index)?;
            }
            Ok(())
        },
    )?;
    replica.hash_cold_in_background(cold.and_then(|h| h.early));
    let slice_phase = if c.strict {
        Phase::Strict
    } else {
        Phase::Lenient
    };
    Ok(Model::from_replica(
        replica,
        counting,
        Phase::Idempotent,
        slice_phase,
        backup_ns,
    ))
}

/// Whether no entry of the oplogs names a namespace (the plan's scans, `forensics::seen::Seen`).
type Untouched<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// What may stay in the backup's files ([`crate::engine::replica::cold`]): the
/// namespaces no entry names, and the files checked while the oplog was read.
#[derive(Clone, Copy)]
struct ColdHint<'a> {
    untouched: Untouched<'a>,
    early: Option<&'a crate::engine::replica::cold::Early>,
}

/// The candidates for staying cold (local plain data files of a directory backup,
/// outside the system databases and collections) checked and hashed on a thread of
/// their own while the oplog's first pass runs ([`crate::engine::replica::cold::early`]).
/// Only with whole documents (the embedded engine).
fn early_cold(req: &PlanRequest, inv: &Inventory) -> Option<crate::engine::replica::cold::Early> {
    use crate::engine::replica::cold;
    if req.content.is_none()
        || cold::disabled()
        || cold::late()
        || inv.backup.layout == crate::backup::Layout::Archive
    {
        return None;
    }
    let files = inv
        .backup
        .namespaces
        .iter()
        .filter(|n| cold::eligible_name(n.data_ns.as_deref().unwrap_or(&n.ns)))
        .filter_map(|n| n.data_file.clone())
        .filter(|f| crate::storage::Location::of_path(f).is_ok_and(|l| l.is_local()))
        .collect();
    let copies = req.content.as_ref().and_then(|c| c.cold_copies.clone());
    cold::early(files, copies)
}

/// The collections of a directory backup that `untouched` says no entry names,
/// left in their data files when these are in `_id` order
/// ([`crate::engine::replica::cold`]); the others load as before. Returns the
/// namespaces (as the data lives) left cold.
fn seed_cold(
    inv: &Inventory,
    replica: &mut crate::engine::replica::Replica,
    hint: ColdHint<'_>,
    meter: &crate::engine::replica::Meter,
    stopped: &dyn Fn() -> bool,
) -> Result<HashSet<String>, PlanError> {
    use crate::engine::replica::cold::{self, ColdDocs};
    let mut out = HashSet::new();
    if inv.backup.layout == crate::backup::Layout::Archive {
        return Ok(out);
    }
    let candidates: Vec<(&str, &PathBuf)> = inv
        .backup
        .namespaces
        .iter()
        .filter_map(|n| Some((n.data_ns.as_deref().unwrap_or(&n.ns), n.data_file.as_ref()?)))
        .filter(|(data_ns, file)| {
            // A bucket's objects are read as streams, not files kept open.
            crate::storage::Location::of_path(file).is_ok_and(|l| l.is_local())
                && (hint.untouched)(data_ns)
                && replica
                    .get(data_ns)
                    .is_some_and(|c| cold::eligible(data_ns, c))
        })
        .collect();
    if let Some(e) = hint.early {
        e.want(candidates.iter().map(|(_, f)| (*f).clone()).collect());
    }
    for (data_ns, file) in candidates {
        if let Some(found) = hint.early.and_then(|e| e.checked(file)) {
            if let Some(docs) = found {
                meter.add(docs.count);
                replica.seed_cold(data_ns, docs);
                out.insert(data_ns.to_string());
            }
            continue;
        }
        let mut read = 0u64;
        let mut each = || {
            read += 1;
            if read.is_multiple_of(crate::engine::replica::interrupt::EVERY) {
                crate::engine::replica::interrupt::check()?;
                if stopped() {
                    return Err(crate::engine::replica::ReplicaError::Interrupted);
                }
            }
            Ok(())
        };
        if let Some(docs) = ColdDocs::check(file, &mut each)? {
            meter.add(docs.count);
            replica.seed_cold(data_ns, std::sync::Arc::new(docs));
            out.insert(data_ns.to_string());
        }
    }
    Ok(out)
}

/// A mongodump directory loaded whole as a replica (every collection, its
/// documents as the dump holds them): `replay --cluster --engine mongod` loads the
/// dump of each member's spare this way, so the merged dump is made of the server's
/// own bytes. `c.spill_dir` must exist (removed by the caller).
pub fn load_dump(
    dir: &Path,
    c: &ContentOptions,
    progress: &dyn Progress,
) -> Result<Model, PlanError> {
    let inv = inventory_with(
        dir,
        InventoryOptions {
            collect_ids: false,
            id_cap: 0,
        },
        progress,
    )?;
    let mut m = seed_documents(&inv, c, &|_| true, None, false, progress, None)?;
    m.flush()?;
    Ok(m)
}

/// Writes `DIR/plan.json` again, all or nothing (a temporary file renamed over it),
/// for a caller that filled in what the plan deferred: the embedded engine's
/// hashes, computed while it writes its dump ([`ContentOptions::defer_hashes`]).
pub fn rewrite_plan_json(dir: &Path, plan: &RestorePlan) -> Result<(), PlanError> {
    use std::io::Write;
    let path = dir.join("plan.json");
    let write_err = |source| PlanError::Write {
        path: path.clone(),
        source,
    };
    let mut json = serde_json::to_string_pretty(plan).map_err(|e| write_err(e.into()))?;
    json.push('\n');
    let mut tmp = tempfile::Builder::new()
        .prefix(".pitr-plan-")
        .suffix(".json.tmp")
        .tempfile_in(dir)
        .map_err(write_err)?;
    tmp.write_all(json.as_bytes()).map_err(write_err)?;
    tmp.as_file().sync_all().map_err(write_err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(0o644))
            .map_err(write_err)?;
    }
    tmp.persist(&path).map_err(|e| write_err(e.error))?;
    Ok(())
}

/// Every `--ns` glob must match a namespace of the backup or one the oplog acts on.
fn check_ns_globs(
    globs: &[String],
    known_ns: &[String],
    oplog: &OplogScan,
) -> Result<(), PlanError> {
    for g in globs {
        let Some(f) = NsFilter::new(std::slice::from_ref(g))? else {
            continue;
        };
        let seen = &oplog.seen;
        let hit = known_ns.iter().chain(seen.namespaces.iter()).any(|ns| {
            // A dropped database (`db.*`) stands for every collection of it.
            f.matches(ns)
                || ns.strip_suffix(".*").is_some_and(|db| {
                    g.split_once('.')
                        .is_some_and(|(gdb, _)| gdb == db || gdb == "*")
                })
        });
        if !hit && seen.more == 0 {
            return Err(PlanError::NsUnmatched {
                glob: g.clone(),
                oplog: oplog.name.clone(),
                closest: closest_text(
                    g,
                    known_ns
                        .iter()
                        .chain(seen.namespaces.iter())
                        .map(String::as_str),
                ),
            });
        }
    }
    Ok(())
}

fn skip_positions(skip: &[TimeValue]) -> Result<Vec<Ts>, PlanError> {
    let mut v = Vec::new();
    for s in skip {
        if !s.is_exact_position() {
            return Err(PlanError::SkipNotExact {
                input: s.input.clone(),
            });
        }
        v.push(s.ts);
    }
    v.sort();
    v.dedup();
    Ok(v)
}

fn range_of(s: &OplogScan) -> OplogRange {
    OplogRange {
        path: absolute(Path::new(&s.name)),
        entries: s.entries,
        first_ts: s.first_ts,
        last_ts: s.last_ts,
        out_of_order: s.out_of_order,
        duplicates: s.duplicates,
        sorted: s.out_of_order == 0,
        truncated: s.truncation.as_ref().map(|t| t.to_string()),
    }
}

fn absolute(p: &Path) -> String {
    fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// Feeds the lint before the model, so the lint sees the state just before each op.
pub(crate) struct Both<'a> {
    pub(crate) lint: &'a mut Linter,
    pub(crate) model: &'a mut Model,
}

impl Visitor for Both<'_> {
    fn applied(&mut self, op: &Entry<'_>, at: Ts, src: Source, in_txn: bool) {
        self.lint.applied(op, at, src, self.model);
        self.model.applied(op, at, src, in_txn);
    }
    fn ignored(&mut self, op: &Entry<'_>, why: Ignored, src: Source) {
        self.lint.ignored(op, why, src);
    }
    fn committed(&mut self, at: Ts, first: Ts, parts_from: &[Source], src: Source) {
        self.lint.committed(at, first, parts_from, src);
    }
    fn commit_without_parts(&mut self, commit: &Entry<'_>, src: Source) {
        self.lint.commit_without_parts(commit, src);
    }
}

/// `r` once the entries queued for the replica's writer threads are applied: their
/// error first, as the sequential apply would have stopped there before reaching
/// whatever `r` failed on.
fn settled<T>(model: &mut Model, r: Result<T, PlanError>) -> Result<T, PlanError> {
    model.settle();
    match model.take_error() {
        Some(err) => Err(err.into()),
        None => r,
    }
}

/// Step 2's replay of the backup's own oplog, in file order, stopping where
/// mongorestore stops (the first entry at or past the limit). Returns the first
/// entry at or after the limit.
fn replay_backup_oplog(
    path: &Path,
    opts: ReadOptions,
    limit: Ts,
    applier: &mut Walker,
    linter: &mut Linter,
    model: &mut Model,
    progress: &dyn Progress,
) -> Result<Option<EntryRef>, PlanError> {
    let r = backup_oplog_entries(path, opts, limit, applier, linter, model, progress);
    settled(model, r)
}

fn backup_oplog_entries(
    path: &Path,
    opts: ReadOptions,
    limit: Ts,
    applier: &mut Walker,
    linter: &mut Linter,
    model: &mut Model,
    progress: &dyn Progress,
) -> Result<Option<EntryRef>, PlanError> {
    let name = path.display().to_string();
    let mut r = oplog::open(&name, opts)?;
    let (counter, total) = r.progress();
    let mut tick = progress.pass("applying the backup's oplog", counter, total);
    let mut stopped = false;
    let mut first: Option<EntryRef> = None;
    while let Some(e) = r.next_entry()? {
        if e.index % 4096 == 0 {
            tick();
        }
        if e.ts >= limit {
            stopped = true;
            if first.as_ref().is_none_or(|f| e.ts < f.ts) {
                first = Some(EntryRef::of(&e));
            }
            continue;
        }
        if stopped {
            continue;
        }
        linter.entry(&e, Source::BackupOplog);
        let (offset, index) = (e.offset, e.index);
        applier
            .feed(
                &e,
                Source::BackupOplog,
                &mut Both {
                    lint: linter,
                    model,
                },
            )
            .map_err(|err| not_an_entry(name.clone(), offset, index, err))?;
        if let Some(err) = model.take_error() {
            return Err(err.into());
        }
    }
    Ok(first)
}

/// Step 3's replay: reads the slice just written (which also checks it).
fn replay_slice(
    slice: &SliceOutcome,
    backup_end: Ts,
    limit: Ts,
    applier: &mut Walker,
    linter: &mut Linter,
    model: &mut Model,
    progress: &dyn Progress,
) -> Result<(), PlanError> {
    let path = slice.file.path();
    let io = |source| PlanError::Io {
        path: path.to_path_buf(),
        source,
    };
    let r = fs::File::open(path).map_err(io).and_then(|mut f| {
        // After the backup's own entries when the file leads with them (one run).
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(slice.prefix_bytes)).map_err(io)?;
        let source = SliceSource {
            entries: oplog::OplogReader::new(path.display().to_string(), f, ReadOptions::default()),
            total: (Some(slice.bytes), false),
            after: None,
        };
        slice_entries(source, backup_end, limit, applier, linter, model, progress)
    });
    settled(model, r)
}

/// The slice's entries as the apply reads them: the file written, or the entries
/// handed over as they are written ([`super::tee`]).
struct SliceSource<'a> {
    entries: oplog::OplogReader,
    /// Its bytes (for the progress), when known, and whether only about them.
    total: (Option<u64>, bool),
    /// Opened once the slice's writer has said its last line (its time, what is at
    /// stake): the apply's last line comes after.
    after: Option<&'a super::Gate>,
}

fn slice_entries(
    mut source: SliceSource<'_>,
    backup_end: Ts,
    limit: Ts,
    applier: &mut Walker,
    linter: &mut Linter,
    model: &mut Model,
    progress: &dyn Progress,
) -> Result<(), PlanError> {
    let r = &mut source.entries;
    let name = r.name().to_string();
    let (counter, _) = r.progress();
    let what = "applying the oplog slice";
    let mut tick = match source.total {
        (about, true) => progress.pass_about(what, counter, about),
        (total, false) => progress.pass(what, counter, total),
    };
    let mut prev: Option<Ts> = None;
    while let Some(e) = r.next_entry()? {
        if e.index % 4096 == 0 {
            tick();
        }
        if e.ts <= backup_end || e.ts >= limit || prev.is_some_and(|p| e.ts < p) {
            return Err(PlanError::Changed {
                name,
                what: format!(
                    "the slice just written holds {} out of order or out of range",
                    e.ts
                ),
            });
        }
        prev = Some(e.ts);
        linter.entry(&e, Source::Slice);
        let (offset, index) = (e.offset, e.index);
        applier
            .feed(
                &e,
                Source::Slice,
                &mut Both {
                    lint: linter,
                    model,
                },
            )
            .map_err(|err| not_an_entry(name.clone(), offset, index, err))?;
        if let Some(err) = model.take_error() {
            return Err(err.into());
        }
    }
    if let Some(g) = source.after {
        g.wait();
    }
    Ok(())
}

/// When the limit is a drop (or a rename over a collection) that recorded how many
/// documents it removed, that count is what the restored collection must hold.
fn cross_check_num_records(
    expected: &mut Option<Vec<super::ExpectedNs>>,
    at_limit: Option<&EntryRef>,
    limit: Ts,
    linter: &mut Linter,
) {
    let Some(e) = at_limit.filter(|e| e.ts == limit) else {
        return;
    };
    if !matches!(
        e.command.as_deref(),
        Some("drop") | Some("renameCollection")
    ) {
        return;
    }
    let (Some(n), Some(ns)) = (e.num_records, e.target.as_deref()) else {
        return;
    };
    let Some(exp) = expected
        .as_mut()
        .and_then(|v| v.iter_mut().find(|x| x.ns == ns))
    else {
        return;
    };
    exp.num_records = Some(n);
    if n >= 0 && (!exp.exists || exp.documents != n as u64) {
        linter.push(
            LintSeverity::Warning,
            "num-records-mismatch",
            Some(e.ts),
            ns,
            format!(
                "the {} at the limit recorded {n} documents in `{ns}`, but the backup and the replay give {}: \
                 the backup or the oplog may be incomplete",
                e.command.as_deref().unwrap_or("entry"),
                exp.documents
            ),
        );
    }
}

struct LintContext<'a> {
    inv: &'a Inventory,
    oplog: &'a OplogScan,
    backup: Option<&'a OplogScan>,
    backup_end: Ts,
    limit: Ts,
    mode: Mode,
    filter: Option<&'a NsFilter>,
    known_ns: &'a [String],
    skips: &'a HashSet<Ts>,
    slice: &'a SliceOutcome,
    backup_oplog_replay: bool,
}

/// Checks the planner adds to what the replay walk found.
fn plan_lints(c: &LintContext<'_>, l: &mut Linter) {
    lint_oplog_source(c, l);
    lint_restore_point(c, l);
    lint_oplog_order(c, l);
    lint_incidents_in_range(c, l);
    lint_skips(c, l);
    lint_ns_filter(c, l);
    lint_backup(c, l);
}

/// The oplog given is the backup's own: the restore cannot go past the backup.
fn lint_oplog_source(c: &LintContext<'_>, l: &mut Linter) {
    if c.oplog.is_the_backups_own(c.backup) {
        l.push(
            LintSeverity::Warning,
            "oplog-is-the-backups-own",
            None,
            "",
            format!(
                "`{}` holds exactly the backup's own oplog ({} entries, up to the backup's end {}): nothing after the \
                 backup is replayed; to restore to a later point, give as --oplog {}",
                c.oplog.name,
                c.oplog.entries,
                c.backup_end,
                crate::oplog::source::AFTER_THE_BACKUP
            ),
        );
    }
}

/// A restore point inside the backup's own oplog.
fn lint_restore_point(c: &LintContext<'_>, l: &mut Linter) {
    use LintSeverity::{Error, Warning};
    if c.mode == Mode::WithinBackupOplog {
        l.push(
            Warning,
            "fuzzy-restore-point",
            Some(c.limit),
            "",
            format!(
                "the restore point {} lies inside the backup's own oplog (which ends at {}): the collection files were copied while \
                 writes went on, so documents written between the limit and the backup's end may already be in them; a \
                 `mongodump --oplog` is consistent only at its end",
                c.limit, c.backup_end
            ),
        );
        if c.backup.is_some_and(|b| b.out_of_order > 0) {
            l.push(
                Error,
                "backup-oplog-unsorted",
                None,
                "",
                "the backup's own oplog is not in ts order: mongorestore stops at the first entry at or past --oplogLimit and \
                 would skip the entries after it",
            );
        }
    }
}

/// What the oplog's order, repeats and truncation mean for the replay.
fn lint_oplog_order(c: &LintContext<'_>, l: &mut Linter) {
    use LintSeverity::{Info, Warning};
    if c.oplog.out_of_order > 0 {
        l.push(
            Info,
            "unsorted-oplog",
            None,
            "",
            format!(
                "`{}` has {} entries out of ts order; mongorestore stops at the first entry at or past the limit, so pitr wrote \
                 the slice sorted{}",
                c.oplog.name,
                c.oplog.out_of_order,
                if c.slice.reordered { " (its entries were reordered)" } else { " (its entries happened to be in order)" }
            ),
        );
    }
    if c.slice.duplicates_dropped > 0 {
        l.push(
            Warning,
            "duplicate-entries",
            None,
            "",
            format!(
                "{} entries repeat an earlier entry exactly (overlapping dumps concatenated?) and were written once",
                c.slice.duplicates_dropped
            ),
        );
    }
    if c.slice.same_ts_kept > 0 {
        l.push(
            Warning,
            "same-ts-entries",
            None,
            "",
            format!(
                "{} entries share their ts with a different entry; all are kept, as mongorestore would apply them all, but a \
                 real oplog never does this: the file may mix two histories",
                c.slice.same_ts_kept
            ),
        );
    }
    if let Some(t) = &c.oplog.truncation {
        l.push(
            Warning,
            "truncated-oplog",
            None,
            "",
            format!("{t}; only the complete entries before it were used (--allow-truncated)"),
        );
    }
}

/// Destructive (and routine) operations the replay includes.
fn lint_incidents_in_range(c: &LintContext<'_>, l: &mut Linter) {
    use LintSeverity::{Info, Warning};
    for f in &c.oplog.findings {
        if f.ts <= c.backup_end || f.ts >= c.limit || c.skips.contains(&f.ts) {
            continue;
        }
        if let Some(nf) = c.filter {
            if !(nf.matches(&f.ns) || f.collections.iter().any(|x| nf.matches(x))) {
                continue;
            }
        }
        // One entry can be left out with --skip; a burst or a database drop is many.
        let skip = match f.kind {
            Kind::Drop | Kind::RenameDropTarget | Kind::Emptycapped | Kind::DropIndexes
                if f.count == 1 =>
            {
                format!("; to leave out just that entry, --skip {}", f.ts)
            }
            _ => String::new(),
        };
        l.push(
            if f.severity >= Severity::High { Warning } else { Info },
            if f.is_routine() {
                "routine-before-limit"
            } else {
                "destructive-before-limit"
            },
            Some(f.ts),
            &f.ns,
            format!(
                "the replay includes a {}{} of `{}` at {} ({}): to stop before it use --until {}{skip}",
                if f.is_routine() { "routine " } else { "" },
                f.kind.as_str(),
                f.ns,
                f.ts,
                f.details,
                f.oplog_limit,
            ),
        );
    }
}

/// `--skip` positions that leave out part of a transaction.
fn lint_skips(c: &LintContext<'_>, l: &mut Linter) {
    use LintSeverity::Warning;
    for e in &c.slice.skipped {
        if e.transaction {
            l.push(
                Warning,
                "skip-transaction-part",
                Some(e.ts),
                &e.ns,
                format!("--skip {} leaves out one entry of a transaction; mongorestore applies its other parts at the commit", e.ts),
            );
        }
    }
}

/// What `--ns` does to the restore.
fn lint_ns_filter(c: &LintContext<'_>, l: &mut Linter) {
    use LintSeverity::{Info, Warning};
    if let Some(f) = c.filter {
        if c.backup_oplog_replay {
            l.push(
                Info,
                "ns-backup-restored-whole",
                None,
                "",
                "--ns filters the replay after the backup's end; the backup itself is restored whole with its own oplog \
                 (mongorestore refuses --nsInclude with --oplogReplay), so other namespaces are on the spare as of the backup's end",
            );
        } else if !c.known_ns.iter().any(|ns| f.matches(ns)) {
            l.push(
                Warning,
                "ns-not-in-backup",
                None,
                "",
                format!(
                    "no namespace of the backup matches --ns {}",
                    f.globs().join(" ")
                ),
            );
        }
        if c.slice.mixed_transactions > 0 {
            l.push(
                Info,
                "txn-kept-whole",
                None,
                "",
                format!(
                    "{} transaction entries also write namespaces outside --ns; transactions are kept whole",
                    c.slice.mixed_transactions
                ),
            );
        }
    }
}

/// The backup's layout problems and documents without `_id`.
fn lint_backup(c: &LintContext<'_>, l: &mut Linter) {
    use LintSeverity::{Error, Info};
    for p in &c.inv.backup.problems {
        l.push(Error, "backup-layout", None, &p.file, p.message.clone());
    }
    for n in &c.inv.namespaces {
        if n.no_id_documents > 0 && n.kind == NsKind::Collection {
            l.push(
                Info,
                "documents-without-id",
                None,
                &n.ns,
                format!("{} documents of `{}` have no _id: counted, but no later delete can be matched to them", n.no_id_documents, n.ns),
            );
        }
    }
}

/// The output directory: created if missing, refused if it holds anything pitr plan
/// did not write. Files are renamed into place by [`OutDir::commit`]; until then a
/// failure leaves nothing behind (a directory pitr created is removed again).
struct OutDir {
    path: PathBuf,
    created: bool,
    done: bool,
}

impl OutDir {
    fn prepare(path: PathBuf) -> Result<OutDir, PlanError> {
        if path.exists() {
            if !path.is_dir() {
                return Err(PlanError::OutNotDir(path));
            }
            let io = |source| PlanError::Io {
                path: path.clone(),
                source,
            };
            for e in fs::read_dir(&path).map_err(io)? {
                let name = e.map_err(io)?.file_name().to_string_lossy().into_owned();
                // `.pitr-*` are temporary files of an interrupted run.
                if !OUT_FILES.contains(&name.as_str()) && !name.starts_with(".pitr-") {
                    return Err(PlanError::OutNotEmpty {
                        dir: path,
                        entry: name,
                    });
                }
            }
            return Ok(OutDir {
                path,
                created: false,
                done: false,
            });
        }
        fs::create_dir_all(&path).map_err(|source| PlanError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(OutDir {
            path,
            created: true,
            done: false,
        })
    }

    /// Renames the slice into place and writes `plan.json`. A stale `plan.json` is
    /// removed first so it can never describe the new slice.
    fn commit(
        mut self,
        slice: SliceOutcome,
        restore_dir: Option<onerun::Written>,
        plan: &RestorePlan,
    ) -> Result<(), PlanError> {
        let plan_path = self.path.join("plan.json");
        let oplog_path = self.path.join("oplog.bson");
        let write_err = |path: &Path, source| PlanError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut json =
            serde_json::to_string_pretty(plan).map_err(|e| write_err(&plan_path, e.into()))?;
        json.push('\n');
        let mut tmp = tempfile::Builder::new()
            .prefix(".pitr-plan-")
            .suffix(".json.tmp")
            .tempfile_in(&self.path)
            .map_err(|e| write_err(&self.path, e))?;
        {
            use std::io::Write;
            tmp.write_all(json.as_bytes())
                .map_err(|e| write_err(&plan_path, e))?;
            tmp.as_file()
                .sync_all()
                .map_err(|e| write_err(&plan_path, e))?;
        }
        // Plain data files, readable like anything mongodump writes (tempfile makes 0600).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for f in [slice.file.as_file(), tmp.as_file()] {
                f.set_permissions(fs::Permissions::from_mode(0o644))
                    .map_err(|e| write_err(&self.path, e))?;
            }
        }
        onerun::remove_file(&plan_path)?;
        match restore_dir {
            // One run: the slice lives inside restore/oplog.bson; a stale
            // OUT/oplog.bson of an earlier plan must not be taken for this one's.
            Some(dir) => {
                onerun::install(dir, &self.path)?;
                onerun::remove_file(&oplog_path)?;
                drop(slice);
            }
            None if !plan.slice.kept => {
                // Applied as it was read: no OUT/oplog.bson, and none of an earlier
                // plan left to be taken for this one's.
                onerun::remove_stale(&self.path)?;
                onerun::remove_file(&oplog_path)?;
                drop(slice);
            }
            None => {
                onerun::remove_stale(&self.path)?;
                slice
                    .file
                    .persist(&oplog_path)
                    .map_err(|e| write_err(&oplog_path, e.error))?;
            }
        }
        tmp.persist(&plan_path)
            .map_err(|e| write_err(&plan_path, e.error))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if !self.done && self.created {
            // Only succeeds when empty: temporary files remove themselves first.
            let _ = fs::remove_dir(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::versions::VersionSource;

    fn spare(v: Option<&str>) -> VersionHints {
        VersionHints {
            mongod: v.map(|v| (v.to_string(), VersionSource::Binary)),
            ..Default::default()
        }
    }

    /// Capped collections are hashed in `_id` order up to 8.0 and in natural order
    /// after it (`dbhash.cpp`); an unknown spare is not assumed to be old.
    #[test]
    fn capped_hashes_are_predicted_only_for_spares_up_to_8_0() {
        assert_eq!(capped_natural_order(&spare(Some("7.0.14"))), None);
        assert_eq!(capped_natural_order(&spare(Some("8.0.4"))), None);
        let why = capped_natural_order(&spare(Some("8.2.1"))).unwrap();
        assert!(why.contains("mongod 8.2.1 hashes capped collections in natural order"));
        let why = capped_natural_order(&spare(None)).unwrap();
        assert!(why.contains("version is unknown"));
    }

    fn failed(what: &str) -> PlanError {
        PlanError::Writers(what.into())
    }

    /// The side's work: counts until the slice's side is done (or asks it to stop),
    /// as the loading of the backup's documents checks every so many documents.
    fn side_until_released(a: &Alongside) -> Result<&'static str, PlanError> {
        let t = std::time::Instant::now();
        while !a.after.is_open() {
            assert!(t.elapsed().as_secs() < 60, "the gate never opened");
            std::thread::yield_now();
        }
        if a.stopped() {
            return Err(failed("side stopped"));
        }
        Ok("side")
    }

    #[test]
    fn overlap_runs_both_sides_at_once_and_returns_both() {
        // `side` waits for `main` to end, and `main` for `side` to have started: one
        // after the other, this would never return.
        let started = std::sync::atomic::AtomicBool::new(false);
        let r = overlap(
            || {
                while !started.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                Ok("main")
            },
            |a| {
                started.store(true, std::sync::atomic::Ordering::SeqCst);
                side_until_released(a)
            },
        );
        assert_eq!(r.unwrap(), ("main", "side"));
    }

    #[test]
    fn overlap_reports_mains_error_first_and_stops_the_side() {
        let r: Result<((), &str), _> = overlap(|| Err(failed("main failed")), side_until_released);
        assert_eq!(r.unwrap_err().to_string(), "main failed");
        // Both failing: main's error, as if it had run first.
        let r: Result<((), ()), _> = overlap(
            || Err(failed("main failed")),
            |_| Err(failed("side failed")),
        );
        assert_eq!(r.unwrap_err().to_string(), "main failed");
    }

    #[test]
    fn overlap_reports_the_sides_error_when_main_succeeds() {
        let r: Result<(&str, ()), _> = overlap(|| Ok("main"), |_| Err(failed("side failed")));
        assert_eq!(r.unwrap_err().to_string(), "side failed");
    }

    #[test]
    fn overlap_opens_the_gate_when_main_panics() {
        // The side waits for the gate: a panic on main's side must not leave it (and
        // the scope joining it) waiting forever.
        let r = std::panic::catch_unwind(|| {
            let _: Result<((), &str), _> = overlap(|| panic!("main panicked"), side_until_released);
        });
        assert!(r.is_err());
    }
}
