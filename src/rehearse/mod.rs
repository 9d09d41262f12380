//! `pitr rehearse`: prove, read-only, that the backup and the oplog restore production
//! exactly. The embedded engine rebuilds the state at a recent cluster time `T`
//! (the plan's replay model, [`crate::plan::build_with_model`], strict, within
//! `--memory`); production is read as of `T` (`readConcern: {level: "snapshot",
//! atClusterTime: T}`, MongoDB 5.0+, while the server keeps history for `T`); the two
//! are compared namespace by namespace: existence, kind, collection options, UUID,
//! index specifications, view definitions, document counts, and documents byte for
//! byte (all with `--full`, a sample of `_id`s from both sides by default).
//!
//! Verdict: exit 0 when everything compared matches, 1 on any difference (each named
//! by namespace, `_id` and field paths; values only with `--show-values`), 2 when the
//! rehearsal cannot run (a mongos, a server before 5.0, `T` out of the server's
//! history, a gap or a break in the chain), with a hint.
//!
//! Read-only, always: every read goes through [`crate::mongo::ReadOnlyClient`] (the
//! oplog reader's `find` on `local.oplog.rs` and its `collStats`, `listDatabases`, `listCollections`,
//! `listIndexes`, `find` and `aggregate` with fixed read-only pipelines on the user
//! collections), with the URI's read preference, `secondaryPreferred` by default.
//!
//! Files: [`point`] (choosing `T`, the history window), [`catalog`] (namespaces,
//! options, indexes, catalog changes after `T`), [`content`] (counts, full and
//! sampled documents), [`docdiff`] (field paths), [`report`] (the JSON), [`metrics`]
//! (the Prometheus textfile), [`out`] (`--out`: the rebuilt state as a dump),
//! [`error`].

pub mod catalog;
pub mod content;
pub mod docdiff;
pub mod error;
pub mod metrics;
pub mod out;
pub mod point;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bson::{doc, Bson};

use crate::engine::replica::{interrupt, Meter, Replica, ReplicaError};
use crate::error::Failure;
use crate::mongo::oplog_source::RetryPolicy;
use crate::mongo::readonly::ReadCommand;
use crate::mongo::{MongoError, ReadOnlyClient, Topology};
use crate::oplog::{Entry, ReadOptions, Ts};
use crate::plan::{self, ContentOptions, PlanError, PlanRequest, Progress, Unit, UntilSpec};
use crate::time::{TimeForm, TimeValue};

pub use error::RehearseError;
pub use out::OutSpec;
pub use point::AtSpec;
pub use report::{RehearseReport, Verdict};

use catalog::{Change, NsCatalog};
use content::{Comparer, ComparerSettings};
use report::{AtPoint, DiffKind, Difference, NotCompared, NsResult};

/// Documents per batch read from production.
pub const DEFAULT_BATCH: u32 = 1000;

/// What to rehearse.
#[derive(Clone, Debug)]
pub struct RehearseRequest {
    pub uri: String,
    pub backup: PathBuf,
    pub backup_end: Option<TimeValue>,
    /// None: read the oplog from the server (from the backup's end to `T`).
    pub oplog: Option<String>,
    pub at: AtSpec,
    /// How far before the newest majority-committed write `--at now` stays.
    pub margin: Duration,
    /// Every document (`--full`), else a sample of `sample` `_id`s per side.
    pub full: bool,
    pub sample: u64,
    pub ns: Vec<String>,
    pub memory: usize,
    /// Where temporary files go (a new directory inside it, removed at the end).
    pub work_parent: PathBuf,
    /// Documents per second read from production at most.
    pub max_read_rate: Option<u64>,
    pub batch_size: u32,
    pub retry: RetryPolicy,
    pub show_values: bool,
    /// `--out`: write the rebuilt state as a dump (checked by the caller first).
    pub out: Option<OutSpec>,
    /// The caller's check of the work dir once the oplog is found out of order
    /// ([`PlanRequest::sort_room`]: its slice is then sorted on disk).
    pub sort_room: Option<crate::plan::SortRoom>,
    /// The caller's check of the disks before the oplog is read from the server
    /// into the work dir, given an estimate of its bytes
    /// ([`crate::mongo::oplog_source::range_bytes`]).
    pub oplog_room: Option<OplogRoom>,
}

/// See [`RehearseRequest::oplog_room`]: called with the estimated bytes of the
/// oplog to read from the server.
#[derive(Clone)]
pub struct OplogRoom(pub std::sync::Arc<dyn Fn(u64) -> Result<(), Failure> + Send + Sync>);

impl std::fmt::Debug for OplogRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OplogRoom(..)")
    }
}

/// The plan's progress without its "what the restore replays and leaves out": a
/// rehearsal restores nothing, and the incidents in its range are production's own
/// history, rebuilt on purpose.
struct RebuildProgress<'a>(&'a dyn Progress);

impl Progress for RebuildProgress<'_> {
    fn opening(&self, source: &str) -> Box<dyn FnOnce(bool) + '_> {
        self.0.opening(source)
    }

    fn pass(
        &self,
        what: &str,
        counter: crate::stream::ByteCounter,
        total: Option<u64>,
    ) -> Box<dyn FnMut() + '_> {
        self.0.pass(what, counter, total)
    }

    fn phase(
        &self,
        what: &str,
        unit: Unit,
        total: Option<u64>,
        meter: &Meter,
    ) -> Box<dyn FnMut() + '_> {
        self.0.phase(what, unit, total, meter)
    }

    fn phase_alongside(
        &self,
        what: &str,
        unit: Unit,
        total: Option<u64>,
        meter: &Meter,
        after: &crate::plan::Gate,
    ) -> Box<dyn FnMut() + '_> {
        self.0.phase_alongside(what, unit, total, meter, after)
    }
}

/// Runs a rehearsal; the report is always filled (with the error when it could not
/// run), the failure is what the CLI prints.
pub fn run(
    req: &RehearseRequest,
    progress: &dyn Progress,
    note: &dyn Fn(&str),
) -> (RehearseReport, Option<Failure>) {
    interrupt::install();
    let started = Instant::now();
    let mut report = RehearseReport::new(
        crate::mongo::redact_uri(&req.uri),
        if req.full { "full" } else { "sample" },
        (!req.full).then_some(req.sample),
    );
    report.backup.path = req.backup.display().to_string();
    report.oplog.source = req.oplog.clone().unwrap_or_else(|| "server".into());
    let result = rehearse(req, progress, note, &mut report, started);
    report.timing.total_secs = started.elapsed().as_secs_f64();
    match result {
        Ok(()) => {
            if report.differences_total > 0 {
                report.result = Verdict::Differences;
                report.exit_code = crate::error::exit::NOT_FOUND;
            } else {
                report.result = Verdict::Passed;
                report.exit_code = crate::error::exit::OK;
            }
            // A pass that compared no documents says so (every namespace's
            // documents left out, or no namespace at all).
            report.nothing_compared = !report.namespaces.iter().any(|n| n.status != "not_compared");
            if report.nothing_compared && report.result == Verdict::Passed {
                note("warning: no documents were compared: see \"Not compared\"");
            }
            (report, None)
        }
        Err(f) => {
            report.result = Verdict::Error;
            report.exit_code = f.exit_code();
            report.error = Some(report::ErrorRecord {
                message: f.message().to_string(),
                hint: f.hint().map(str::to_string),
            });
            (report, Some(f))
        }
    }
}

fn interrupted() -> Failure {
    Failure::new(format!(
        "interrupted by {}: nothing was written to production (nothing ever is); temporary files were removed",
        interrupt::signal_name()
    ))
    .with_exit_code(interrupt::exit_code())
}

fn replica_failure(e: ReplicaError) -> Failure {
    match e {
        ReplicaError::Interrupted => interrupted(),
        e => Failure::from(RehearseError::Replica(e)),
    }
}

/// What the server says about itself.
struct ServerNow {
    majority: Ts,
    window_secs: u64,
}

fn rehearse(
    req: &RehearseRequest,
    progress: &dyn Progress,
    note: &dyn Fn(&str),
    report: &mut RehearseReport,
    started: Instant,
) -> Result<(), Failure> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("pitr-rehearse")
        .build()?;
    let work = tempfile::Builder::new()
        .prefix("pitr-rehearse-")
        .tempdir_in(&req.work_parent)
        .map_err(|source| RehearseError::Io {
            what: "create a temporary directory in",
            path: req.work_parent.clone(),
            source,
        })?;

    // The server: a replica set member of 5.0 or later.
    let (client, topology) = rt
        .block_on(crate::mongo::connect(&req.uri))
        .map_err(|e| match e {
            MongoError::Mongos { target } => RehearseError::Mongos { target },
            MongoError::NoOplog { target } => RehearseError::Standalone { target },
            e => RehearseError::Mongo(e),
        })?;
    let result = (|| {
        let server = server_facts(&rt, &client, &topology, report)?;
        with_client(
            req,
            progress,
            note,
            report,
            started,
            &rt,
            &client,
            &topology,
            &server,
            work.path(),
        )
    })();
    rt.block_on(client.close());
    result
}

fn server_facts(
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    topology: &Topology,
    report: &mut RehearseReport,
) -> Result<ServerNow, Failure> {
    let target = client.target().display.clone();
    if *topology == Topology::StandaloneWithOplog {
        return Err(RehearseError::Standalone { target }.into());
    }
    report.server.replica_set = topology.set_name().map(str::to_string);
    let build = rt
        .block_on(client.command(ReadCommand::BuildInfo))
        .map_err(|e| client.target().error("run `buildInfo`", e))
        .map_err(RehearseError::Mongo)?;
    let version = build.get_str("version").unwrap_or("unknown").to_string();
    report.server.version = Some(version.clone());
    report.server.standin = build.get_bool("pitrStandIn").unwrap_or(false);
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if major < 5 {
        return Err(RehearseError::TooOld { target, version }.into());
    }
    let window_secs = match rt.block_on(client.command(ReadCommand::SnapshotWindow)) {
        Ok(d) => match d.get("minSnapshotHistoryWindowInSeconds") {
            Some(Bson::Int32(n)) if *n >= 0 => {
                report.server.snapshot_window_source = "getParameter".into();
                *n as u64
            }
            Some(Bson::Int64(n)) if *n >= 0 => {
                report.server.snapshot_window_source = "getParameter".into();
                *n as u64
            }
            _ => {
                report.server.snapshot_window_source =
                    "default (not in the getParameter reply)".into();
                point::DEFAULT_WINDOW_SECS
            }
        },
        Err(e) => {
            report.server.snapshot_window_source = format!("default (getParameter refused: {e})");
            point::DEFAULT_WINDOW_SECS
        }
    };
    report.server.snapshot_window_secs = window_secs;
    let hello = rt
        .block_on(client.hello())
        .map_err(|e| client.target().error("run `hello`", e))
        .map_err(RehearseError::Mongo)?;
    let optime = |k: &str| -> Option<Ts> {
        match hello.get_document("lastWrite").ok()?.get(k)? {
            Bson::Document(d) => d.get_timestamp("ts").ok().map(Ts::from),
            Bson::Timestamp(t) => Some(Ts::from(*t)),
            _ => None,
        }
    };
    let majority = match optime("majorityOpTime").or_else(|| optime("opTime")) {
        Some(t) => t,
        None => {
            let w = rt
                .block_on(crate::mongo::oplog_source::window(client))
                .map_err(RehearseError::Mongo)?
                .ok_or(RehearseError::Standalone { target })?;
            w.newest.ts
        }
    };
    Ok(ServerNow {
        majority,
        window_secs,
    })
}

/// The last entry's position of an oplog source (an oplog archive: from its manifest).
fn last_ts_of(spec: &str) -> Result<Option<Ts>, RehearseError> {
    let p = Path::new(spec);
    if p.is_dir() && crate::oplog::oplog_archive::is_oplog_archive(p) {
        if let Ok(Some(m)) = crate::oplog::oplog_archive::Manifest::load(p) {
            return Ok(m.chunks.last().map(|c| c.last));
        }
    }
    let mut r = crate::oplog::open(spec, ReadOptions::default()).map_err(|source| {
        RehearseError::OplogSource {
            oplog: spec.to_string(),
            source,
        }
    })?;
    let mut last = None;
    while let Some((doc, _, _)) = r.next_raw().map_err(|source| RehearseError::OplogSource {
        oplog: spec.to_string(),
        source,
    })? {
        if let Ok(e) = Entry::parse(doc) {
            last = Some(e.ts);
        }
    }
    Ok(last)
}

/// Where the backup's data is complete up to: `--backup-end`, or its oplog's last entry.
fn backup_end_of(req: &RehearseRequest) -> Result<Ts, RehearseError> {
    if let Some(v) = &req.backup_end {
        return Ok(v.ts);
    }
    let b = crate::backup::open(&req.backup)?;
    let Some(path) = b.oplog else {
        return Err(RehearseError::NoBackupEnd {
            backup: req.backup.clone(),
        });
    };
    let mut r =
        crate::oplog::open(&path.to_string_lossy(), ReadOptions::default()).map_err(|source| {
            RehearseError::BackupOplog {
                backup: req.backup.clone(),
                source,
            }
        })?;
    let mut last = None;
    while let Some((doc, _, _)) = r.next_raw().map_err(|source| RehearseError::BackupOplog {
        backup: req.backup.clone(),
        source,
    })? {
        if let Ok(e) = Entry::parse(doc) {
            last = Some(e.ts);
        }
    }
    last.ok_or_else(|| RehearseError::NoBackupEnd {
        backup: req.backup.clone(),
    })
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The exclusive limit just after `at` (the rebuild includes `at`).
fn limit_after(at: Ts) -> Ts {
    if at.i == u32::MAX {
        Ts::new(at.t.saturating_add(1), 0)
    } else {
        Ts::new(at.t, at.i + 1)
    }
}

/// The point `T` (see [`point`]) and how it was chosen.
fn choose_point(
    req: &RehearseRequest,
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    majority: Ts,
    backup_end: Ts,
) -> Result<(Ts, String), Failure> {
    Ok(match &req.at {
        AtSpec::At(ts) => (*ts, "--at".to_string()),
        AtSpec::Now => {
            let aim = point::now_target(majority, req.margin);
            let newest = rt
                .block_on(client.oplog_newest_at_or_before(aim.into()))
                .map_err(|e| client.target().error("read `local.oplog.rs`", e))
                .map_err(RehearseError::Mongo)?;
            let mut at = newest
                .as_ref()
                .and_then(|d| Entry::parse(d).ok().map(|e| e.ts))
                .unwrap_or(backup_end)
                .max(backup_end);
            let mut how = format!(
                "the newest oplog entry at or before the newest majority-committed write ({majority}) less {} s",
                req.margin.as_secs()
            );
            if let Some(spec) = &req.oplog {
                match last_ts_of(spec)? {
                    Some(last) if last < at => {
                        at = last;
                        how = format!("the last entry of the oplog `{spec}` (it ends before the newest majority-committed write less {} s)", req.margin.as_secs());
                    }
                    Some(_) => {}
                    None => {
                        return Err(RehearseError::EmptyOplogSource {
                            oplog: spec.clone(),
                        }
                        .into())
                    }
                }
            }
            (at, how)
        }
    })
}

/// Reads the oplog from the backup's end to `at` from the server into `work` (as
/// `dump-oplog` does); returns the file's path.
#[allow(clippy::too_many_arguments)]
fn oplog_from_server(
    req: &RehearseRequest,
    note: &dyn Fn(&str),
    report: &mut RehearseReport,
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    topology: &Topology,
    backup_end: Ts,
    at: Ts,
    work: &Path,
) -> Result<String, Failure> {
    let t0 = Instant::now();
    let dump_dir = work.join("oplog");
    let dreq = crate::mongo::dump::DumpRequest {
        to: crate::mongo::dump::DumpTo::Dir(dump_dir),
        since: Some(backup_end),
        until: Some(limit_after(at)),
        gzip: false,
        resume: false,
        allow_gap: false,
        batch_size: None,
        retry: req.retry,
    };
    if let Some(room) = &req.oplog_room {
        match rt.block_on(crate::mongo::oplog_source::range_bytes(client, backup_end, at)) {
            Some(bytes) => (room.0)(bytes)?,
            None => note(
                "the oplog's size is not known (collStats refused or without a size): the work dir's room for it is not checked",
            ),
        }
    }
    note(&format!(
        "reading the oplog from {backup_end} to {at} from the server"
    ));
    let out = rt
        .block_on(crate::mongo::dump::dump(
            client,
            topology,
            &dreq,
            &mut crate::mongo::dump::Quiet,
        ))
        .map_err(|source| RehearseError::Oplog {
            target: client.target().display.clone(),
            source: Box::new(source),
        })?;
    report.timing.oplog_read_secs = t0.elapsed().as_secs_f64();
    report.oplog.entries = Some(out.entries);
    report.oplog.first_ts = out.first;
    report.oplog.last_ts = out.last;
    Ok(out.at)
}

#[allow(clippy::too_many_arguments)]
fn with_client(
    req: &RehearseRequest,
    progress: &dyn Progress,
    note: &dyn Fn(&str),
    report: &mut RehearseReport,
    started: Instant,
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    topology: &Topology,
    server: &ServerNow,
    work: &Path,
) -> Result<(), Failure> {
    let backup_end = backup_end_of(req)?;
    report.backup.end_ts = Some(backup_end);
    report.backup.end_utc = Some(backup_end.utc_string());
    report.backup.age_secs = Some(now_secs().saturating_sub(backup_end.t as u64));

    // The point.
    let majority = server.majority;
    let window = server.window_secs;
    let (at, how) = choose_point(req, rt, client, majority, backup_end)?;
    point::check(at, backup_end, majority, window)?;
    report.at = Some(AtPoint {
        ts: at,
        utc: at.utc_string(),
        how,
        majority_ts: Some(majority),
    });
    report.recovery_window_secs = Some((at.t as u64).saturating_sub(backup_end.t as u64));
    note(&format!(
        "rehearsing at {at} ({}); the backup ends at {backup_end} ({}): a recovery window of {}",
        at.utc_string(),
        backup_end.utc_string(),
        humantime::format_duration(Duration::from_secs(
            report.recovery_window_secs.unwrap_or(0)
        ))
    ));

    // Will the server still hold `at` when the reads are done?
    let left_at_start = point::seconds_left(at, majority, window);
    let deadline = started + Duration::from_secs(left_at_start);
    let backup_bytes = crate::storage::size_on_disk(&req.backup);
    let oplog_bytes = req
        .oplog
        .as_deref()
        .map_or(0, |s| crate::storage::size_on_disk(Path::new(s)));
    let rough_reads = if req.full {
        point::read_secs(backup_bytes / 1024, req.max_read_rate)
    } else {
        0
    };
    point::fits(
        "rebuilding the backup and the oplog, then reading production (estimated from their sizes)",
        at,
        point::rebuild_secs(backup_bytes + oplog_bytes) + rough_reads,
        left_at_start.saturating_sub(started.elapsed().as_secs()),
        window,
    )?;

    // The oplog from the backup's end to `at`.
    let oplog_spec = match &req.oplog {
        Some(s) => s.clone(),
        None => oplog_from_server(
            req, note, report, rt, client, topology, backup_end, at, work,
        )?,
    };
    interrupt::check().map_err(replica_failure)?;

    // The rebuild.
    let t0 = Instant::now();
    let spill = work.join("spill");
    std::fs::create_dir_all(&spill).map_err(|source| RehearseError::Io {
        what: "create",
        path: spill.clone(),
        source,
    })?;
    let limit = limit_after(at);
    let until = UntilSpec::Time(TimeValue {
        ts: limit,
        form: TimeForm::OplogTs {
            ordinal_given: true,
        },
        input: limit.to_string(),
    });
    let preq = PlanRequest {
        backup_end: req.backup_end.clone(),
        ns: req.ns.clone(),
        out: Some(work.join("plan")),
        expect: false,
        id_cap: 0,
        content: Some(ContentOptions {
            memory: req.memory,
            spill_dir: spill,
            strict: true,
            defer_hashes: false,
            config_server: false,
            cold_copies: None,
        }),
        mongorestore_inputs: false,
        keep_slice: false,
        sort_room: req.sort_room.clone(),
        ..PlanRequest::new(req.backup.clone(), oplog_spec, until, work.to_path_buf())
    };
    let (plan, model) = match plan::build_with_model(&preq, &RebuildProgress(progress)) {
        Ok(x) => x,
        Err(PlanError::Replica(ReplicaError::Interrupted)) => return Err(interrupted()),
        Err(PlanError::NsUnmatched { glob, .. }) => {
            return Err(ns_matches_nothing(&[glob], rt, client, at, window))
        }
        Err(source) => return Err(RehearseError::Rebuild { at, source }.into()),
    };
    let mut replica = model.into_replica();
    report.timing.rebuild_secs = t0.elapsed().as_secs_f64();
    if req.oplog.is_some() {
        report.oplog.entries = Some(plan.oplog.entries);
        report.oplog.first_ts = plan.oplog.first_ts;
        report.oplog.last_ts = plan.oplog.last_ts;
    }
    report.rebuild = report::RebuildFacts {
        documents: replica.total_documents(),
        memory_bytes: req.memory as u64,
        peak_memory_bytes: replica.store().peak_memory() as u64,
        spilled_to_disk: replica.store().spilled(),
    };
    note(&format!(
        "rebuilt the state at {at} in {:.1} s ({} documents{})",
        report.timing.rebuild_secs,
        report.rebuild.documents,
        if report.rebuild.spilled_to_disk {
            ", moved to disk past --memory"
        } else {
            ""
        }
    ));
    interrupt::check().map_err(replica_failure)?;

    compare(
        req, progress, note, report, rt, client, &replica, at, window, deadline,
    )?;
    if let Some(spec) = &req.out {
        write_out(req, spec, &mut replica, report, progress, note)?;
    }
    Ok(())
}

/// `--out` (see [`out`]): the namespaces `--ns` keeps.
fn write_out(
    req: &RehearseRequest,
    spec: &OutSpec,
    replica: &mut Replica,
    report: &mut RehearseReport,
    progress: &dyn Progress,
    note: &dyn Fn(&str),
) -> Result<(), Failure> {
    let filter = plan::filter::NsFilter::new(&req.ns).ok().flatten();
    let include = |ns: &str| filter.as_ref().is_none_or(|f| f.matches(ns));
    let version = report
        .server
        .version
        .clone()
        .unwrap_or_else(|| "unknown".into());
    let facts = out::write(spec, replica, &include, &version, progress)?;
    note(&format!(
        "wrote the state at the point to `{}` ({}): {} documents in {:.1} s",
        facts.path, facts.format, facts.documents, facts.write_secs
    ));
    report.out = Some(facts);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn compare(
    req: &RehearseRequest,
    progress: &dyn Progress,
    note: &dyn Fn(&str),
    report: &mut RehearseReport,
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    replica: &Replica,
    at: Ts,
    window: u64,
    deadline: Instant,
) -> Result<(), Failure> {
    let target = client.target().display.clone();
    let t0 = Instant::now();
    let filter = plan::filter::NsFilter::new(&req.ns)
        .map_err(|e| Failure::from(RehearseError::Rebuild { at, source: e }))?;
    let wanted = |c: &NsCatalog| {
        filter
            .as_ref()
            .is_none_or(|f| f.matches(&c.ns) || c.data_ns.as_deref().is_some_and(|d| f.matches(d)))
    };

    // Both catalogs, and what changed in production's since `at`.
    let rebuilt: Vec<NsCatalog> = catalog::from_replica(replica)
        .map_err(replica_failure)?
        .into_iter()
        .filter(|c| wanted(c))
        .collect();
    let ddl = catalog_changes_after(rt, client, at, window)?;
    let production = production_catalog(rt, client, &wanted, at, window)?;
    let mut names: Vec<String> = rebuilt
        .iter()
        .chain(production.iter())
        .map(|c| c.ns.clone())
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() && !req.ns.is_empty() {
        // A rehearsal that compares nothing must not read as a pass.
        return Err(ns_matches_nothing(&req.ns, rt, client, at, window));
    }

    // How much will be read: must fit in what is left of the history window.
    let to_read: u64 = rebuilt
        .iter()
        .filter(|c| c.kind == "collection" && !c.is_capped())
        .filter_map(|c| c.data_ns.as_deref())
        .map(|d| {
            if req.full {
                replica.count(d)
            } else {
                replica.count(d).min(req.sample) * 2
            }
        })
        .sum();
    let left = deadline.saturating_duration_since(Instant::now()).as_secs();
    point::fits(
        format!("reading {to_read} documents of production"),
        at,
        point::read_secs(to_read, req.max_read_rate),
        left,
        window,
    )?;

    let reader = rt
        .block_on(client.snapshot_reader(at.into()))
        .map_err(|e| content::read_error(e, "starting a snapshot session", &target, at, window))?;
    let mut cmp = Comparer::new(
        rt,
        reader,
        ComparerSettings {
            max_read_rate: req.max_read_rate,
            batch_size: req.batch_size,
            retry: req.retry,
            deadline,
            at,
            window_secs: window,
            target: target.clone(),
            show_values: req.show_values,
        },
    );
    let meter = Meter::new();
    let phase = progress.phase(
        "comparing with production",
        Unit::Documents,
        Some(to_read),
        &meter,
    );
    for ns in &names {
        interrupt::check().map_err(replica_failure)?;
        let sides = Sides {
            rebuild: rebuilt.iter().find(|c| &c.ns == ns),
            production: production.iter().find(|c| &c.ns == ns),
        };
        compare_namespace(req, report, &mut cmp, replica, ns, sides, &ddl, at, &meter)?;
    }
    drop(phase);
    let stats = cmp.stats.clone();
    drop(cmp.into_reader());
    use std::sync::atomic::Ordering::Relaxed;
    report.reads.commands = stats.commands.load(Relaxed);
    report.reads.documents = stats.documents.load(Relaxed);
    report.reads.bytes = stats.bytes.load(Relaxed);
    report.reads.retries = stats.retries.load(Relaxed);
    report.reads.retried = stats
        .retried
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    for r in &report.reads.retried {
        note(&format!("retried a read: {r}"));
    }
    report.timing.compare_secs = t0.elapsed().as_secs_f64();
    let secs = report.timing.compare_secs.max(1e-3);
    report.reads.documents_per_sec = report.reads.documents as f64 / secs;
    report.documents_compared_per_sec = report.documents_compared as f64 / secs;
    note(&format!(
        "compared {} documents in {:.1} s ({} read from production in {} commands)",
        report.documents_compared,
        report.timing.compare_secs,
        report.reads.documents,
        report.reads.commands
    ));
    Ok(())
}

/// `--ns` (`globs`, or one of them) matches nothing the backup and the oplog rebuild: an error, so that a
/// rehearsal that compares nothing never reads as a pass; naming production's
/// namespaces that match (the chain lacks them) or, for a typo, some there are.
fn ns_matches_nothing(
    globs: &[String],
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    at: Ts,
    window: u64,
) -> Failure {
    let filter = match plan::filter::NsFilter::new(globs) {
        Ok(Some(f)) => f,
        _ => {
            return RehearseError::NsMatchesNothing {
                globs: globs.to_vec(),
                known: Vec::new(),
                in_production: Vec::new(),
            }
            .into()
        }
    };
    // listCollections only: none is wanted, so no listIndexes.
    let seen = std::cell::RefCell::new(Vec::new());
    let listed = production_catalog(
        rt,
        client,
        &|c: &NsCatalog| {
            seen.borrow_mut().push(c.ns.clone());
            false
        },
        at,
        window,
    );
    if let Err(f) = listed {
        return f;
    }
    let mut known = seen.into_inner();
    let in_production: Vec<String> = known
        .iter()
        .filter(|n| filter.matches(n))
        .cloned()
        .collect();
    if known.len() > 10 {
        let more = known.len() - 10;
        known.truncate(10);
        known.push(format!("and {more} more"));
    }
    RehearseError::NsMatchesNothing {
        globs: globs.to_vec(),
        known,
        in_production,
    }
    .into()
}

/// The catalog changes in production's oplog after `at` (see [`catalog::ddl_of`]).
fn catalog_changes_after(
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    at: Ts,
    window: u64,
) -> Result<Vec<catalog::Ddl>, Failure> {
    let ddl = rt.block_on(async {
        let mut cursor = client
            .oplog_cursor(
                doc! {"ts": {"$gt": Bson::Timestamp(at.into())}, "op": "c"},
                None,
            )
            .await?;
        let mut out = Vec::new();
        while cursor
            .advance()
            .await
            .map_err(|e| client.target().driver_error(&e))?
        {
            if let Ok(e) = Entry::parse(cursor.current()) {
                out.extend(catalog::ddl_of(&e));
            }
        }
        Ok::<_, crate::mongo::DriverError>(out)
    });
    Ok(ddl.map_err(|e| {
        content::read_error(
            e,
            "reading catalog changes after the point from `local.oplog.rs`",
            &client.target().display,
            at,
            window,
        )
    })?)
}

/// Production's user namespaces as they are now (`wanted` ones), with their indexes.
fn production_catalog(
    rt: &tokio::runtime::Runtime,
    client: &ReadOnlyClient,
    wanted: &dyn Fn(&NsCatalog) -> bool,
    at: Ts,
    window: u64,
) -> Result<Vec<NsCatalog>, Failure> {
    let target = client.target().display.clone();
    let read_err = |what: String| {
        let target = target.clone();
        move |e: crate::mongo::DriverError| content::read_error(e, &what, &target, at, window)
    };
    let mut production: Vec<NsCatalog> = Vec::new();
    let dbs = rt
        .block_on(client.command(ReadCommand::ListDatabases))
        .map_err(read_err("`listDatabases`".into()))?;
    let names: Vec<String> = dbs
        .get_array("databases")
        .map(|a| {
            a.iter()
                .filter_map(|d| d.as_document()?.get_str("name").ok().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for db in names {
        if matches!(db.as_str(), "admin" | "config" | "local") {
            continue;
        }
        let colls = rt
            .block_on(client.list_collections(&db))
            .map_err(read_err(format!("`listCollections` on `{db}`")))?;
        for mut c in catalog::from_list_collections(&db, &colls) {
            if !wanted(&c) {
                continue;
            }
            if c.kind != "view" {
                let name = c.ns.split_once('.').map_or("", |(_, n)| n).to_string();
                c.indexes = rt
                    .block_on(client.list_indexes(&db, &name))
                    .map_err(read_err(format!("`listIndexes` on `{}`", c.ns)))?;
            }
            production.push(c);
        }
    }
    Ok(production)
}

/// One namespace as each side has it (or not).
#[derive(Clone, Copy)]
struct Sides<'a> {
    rebuild: Option<&'a NsCatalog>,
    production: Option<&'a NsCatalog>,
}

/// Compares one namespace (catalog, then documents) and adds its row to the report.
#[allow(clippy::too_many_arguments)]
fn compare_namespace(
    req: &RehearseRequest,
    report: &mut RehearseReport,
    cmp: &mut Comparer<'_>,
    replica: &Replica,
    ns: &str,
    sides: Sides<'_>,
    ddl: &[catalog::Ddl],
    at: Ts,
    meter: &Meter,
) -> Result<(), Failure> {
    let (r, p) = (sides.rebuild, sides.production);
    let changed = catalog::change_of(ns, ddl);
    if let Some(d) = changed.filter(|d| d.change == Change::Whole) {
        report.not_compared.push(NotCompared {
            ns: ns.to_string(),
            why: format!(
                "`{}` at {} (after the point) changed it; production's catalog now is not its catalog then",
                d.command, d.ts
            ),
        });
        return Ok(());
    }
    let kind = r.or(p).map(|c| c.kind.clone()).unwrap_or_default();
    let mut result = NsResult {
        ns: ns.to_string(),
        kind: kind.clone(),
        rebuild_documents: r
            .and_then(|c| c.data_ns.as_deref())
            .map(|d| replica.count(d)),
        production_documents: None,
        compared: 0,
        differences: 0,
        status: "match".into(),
    };
    let before = report.differences_total;
    let kind_of = |c: &NsCatalog| {
        if c.kind == "view" {
            "a view"
        } else {
            "the collection"
        }
    };
    match (r, p) {
        (Some(r), None) => report.differ(Difference {
            ns: ns.to_string(),
            kind: DiffKind::MissingInProduction,
            id: None,
            paths: Vec::new(),
            detail: format!(
                "the rebuild has {} `{ns}`{}; production has no such namespace",
                kind_of(r),
                result
                    .rebuild_documents
                    .map(|n| format!(" with {n} documents"))
                    .unwrap_or_default()
            ),
            values: None,
        }),
        (None, Some(p)) => report.differ(Difference {
            ns: ns.to_string(),
            kind: DiffKind::MissingInRebuild,
            id: None,
            paths: Vec::new(),
            detail: format!(
                "production has {} `{ns}`; the rebuild (backup + oplog) has no such namespace",
                kind_of(p)
            ),
            values: None,
        }),
        (Some(r), Some(p)) if r.kind != p.kind => report.differ(Difference {
            ns: ns.to_string(),
            kind: DiffKind::Kind,
            id: None,
            paths: Vec::new(),
            detail: format!("a {} in the rebuild, a {} in production", r.kind, p.kind),
            values: None,
        }),
        (Some(r), Some(p)) => {
            if let Some(d) = changed {
                report.not_compared.push(NotCompared {
                    ns: ns.to_string(),
                    why: format!(
                        "options and indexes: `{}` at {} (after the point) changed them; its documents are compared",
                        d.command, d.ts
                    ),
                });
            } else {
                compare_catalog(report, ns, r, p, req.show_values);
            }
            if r.kind != "view" {
                compare_documents(req, report, cmp, replica, r, p, &mut result, at, meter)?;
            }
        }
        (None, None) => {}
    }
    result.differences += report.differences_total - before;
    if result.status != "not_compared" && result.differences > 0 {
        result.status = "differs".into();
    }
    report.documents_compared += result.compared;
    report.namespaces.push(result);
    Ok(())
}

/// Options, UUID, indexes and view definitions of one namespace on both sides.
fn compare_catalog(
    report: &mut RehearseReport,
    ns: &str,
    r: &NsCatalog,
    p: &NsCatalog,
    show: bool,
) {
    let opts = catalog::differing_options(&r.options, &p.options);
    if !opts.is_empty() {
        let kind = if r.kind == "view" {
            DiffKind::ViewDefinition
        } else {
            DiffKind::Options
        };
        let values = show.then(|| {
            opts.iter()
                .map(|k| report::PathValues {
                    path: k.clone(),
                    rebuild: shown_opt(r.options.get(k)),
                    production: shown_opt(p.options.get(k)),
                })
                .collect()
        });
        report.differ(Difference {
            ns: ns.to_string(),
            kind,
            id: None,
            paths: opts.clone(),
            detail: format!(
                "{} differ: {}",
                if r.kind == "view" {
                    "the view's definition fields"
                } else {
                    "collection options"
                },
                opts.join(", ")
            ),
            values,
        });
    }
    if let (Some(a), Some(b)) = (&r.uuid, &p.uuid) {
        if a != b {
            report.differ(Difference {
                ns: ns.to_string(),
                kind: DiffKind::Uuid,
                id: None,
                paths: Vec::new(),
                detail: format!("collection UUID {a} in the rebuild, {b} in production: not the same collection (another cluster's backup, or re-created outside the oplog read)"),
                values: None,
            });
        }
    }
    for (kind, name, fields) in catalog::differing_indexes(&r.indexes, &p.indexes) {
        let detail = match kind {
            DiffKind::IndexMissingInProduction => {
                format!("index `{name}` is in the rebuild, not in production")
            }
            DiffKind::IndexMissingInRebuild => format!(
                "index `{name}` is in production, not in the rebuild: a restore would not build it"
            ),
            _ => format!("index `{name}` differs in {}", fields.join(", ")),
        };
        report.differ(Difference {
            ns: ns.to_string(),
            kind,
            id: None,
            paths: if fields.is_empty() {
                vec![name]
            } else {
                fields
            },
            detail,
            values: None,
        });
    }
}

fn shown_opt(v: Option<&Bson>) -> String {
    match v {
        Some(b) => b.clone().into_relaxed_extjson().to_string(),
        None => "(absent)".into(),
    }
}

/// Counts, then documents (full or sampled) of one namespace.
#[allow(clippy::too_many_arguments)]
fn compare_documents(
    req: &RehearseRequest,
    report: &mut RehearseReport,
    cmp: &mut Comparer<'_>,
    replica: &Replica,
    r: &NsCatalog,
    p: &NsCatalog,
    result: &mut NsResult,
    at: Ts,
    meter: &Meter,
) -> Result<(), Failure> {
    let ns = &r.ns;
    if r.is_capped() || p.is_capped() {
        result.status = "not_compared".into();
        report.not_compared.push(NotCompared {
            ns: ns.clone(),
            why: "capped: the server refuses snapshot reads of capped collections (SnapshotUnavailable)".into(),
        });
        return Ok(());
    }
    let Some(data_ns) = r.data_ns.as_deref() else {
        return Ok(());
    };
    let unavailable = |report: &mut RehearseReport, result: &mut NsResult, e: &RehearseError| {
        if let RehearseError::SnapshotRefused { source, .. } = e {
            if source.code == Some(246) {
                result.status = "not_compared".into();
                report.not_compared.push(NotCompared {
                    ns: ns.clone(),
                    why: format!("the server cannot read it as of the point: {source}"),
                });
                return true;
            }
        }
        false
    };
    let produced = match cmp.count(p.data_ns.as_deref().unwrap_or(data_ns)) {
        Ok(n) => n,
        Err(e) if unavailable(report, result, &e) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    result.production_documents = Some(produced);
    let rebuilt = replica.count(data_ns);
    if rebuilt != produced {
        report.differ(Difference {
            ns: ns.clone(),
            kind: DiffKind::Count,
            id: None,
            paths: Vec::new(),
            detail: format!(
                "{rebuilt} {} in the rebuild, {produced} in production as of the point",
                if r.kind == "timeseries" {
                    "buckets"
                } else {
                    "documents"
                }
            ),
            values: None,
        });
    }
    if r.kind == "timeseries" {
        // Time-series collections compare their buckets' counts.
        return Ok(());
    }
    let tally = if req.full {
        cmp.full(replica, ns, data_ns, report, meter)
    } else {
        let seed = at.t as u64 ^ (at.i as u64) << 32 ^ fxhash(ns);
        cmp.sample(replica, ns, data_ns, req.sample, seed, report, meter)
    };
    match tally {
        Ok(t) => {
            result.compared = t.compared;
        }
        Err(e) if unavailable(report, result, &e) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// A stable hash of a namespace, for the sample's seed.
fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}
