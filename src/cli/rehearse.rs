//! `pitr rehearse`: flags, and the report as text, JSON and a Prometheus textfile.
//! The work is in [`crate::rehearse`].

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::replica::dump::{self, DumpFormat};
use crate::error::Failure;
use crate::mongo::oplog_source::RetryPolicy;
use crate::rehearse::report::{DiffKind, MetricsFacts, RehearseReport, Verdict};
use crate::rehearse::{self, AtSpec, OutSpec, RehearseRequest};
use crate::replay::preflight::{self, Need, PreflightError};
use crate::time::{parse_time, TimeValue};

use super::replay::{parse_duration, parse_size};

// No doc comment here: the one-line about comes from `Command::Rehearse` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Rebuilds the state at a recent cluster time T from the backup and the oplog with the \
embedded engine (no mongod, nothing written but temporary files), reads production as of T \
(readConcern snapshot with atClusterTime: MongoDB 5.0+, while the server keeps history for \
T: minSnapshotHistoryWindowInSeconds, 300 s by default), and compares them per namespace: \
existence, collection options, UUID, index specifications, view definitions, document counts, \
and documents byte for byte (--full: every document; by default a sample of _ids drawn from \
both sides, so a document missing on either side is found). Time-series collections compare \
their buckets' counts.

T: --at now (default) is the newest oplog entry at or before the newest majority-committed \
write less --margin, and no later than --oplog's last entry. Without --oplog the oplog from the \
backup's end to T is read from the server (as dump-oplog does).

Read-only, always: find on local.oplog.rs, listDatabases, listCollections, listIndexes, and \
find/aggregate (fixed pipelines: $count, $sample) on the user collections; the read preference \
is the URI's, secondaryPreferred by default. A mongos is refused. The role is in docs/rehearse.md.

Exit codes: 0 everything compared is identical; 1 differences (each named by namespace, _id \
and field paths; values only with --show-values: they are production data); 2 the rehearsal \
could not run (a mongos, a server before 5.0, T no longer in the server's history, a gap or \
break in the chain), with a hint. A --metrics file that cannot be written is an error too \
(exit 2, after the report): a stale textfile would read as the last run's result.

--out writes the rebuilt state at T as mongodump writes a dump (a directory, --gzip, --archive), \
as `pitr replay --engine embedded` does; it must be new (or an empty directory), and is written \
once the comparison has run. In a bucket (`--out s3://bucket/prefix`) it is streamed there, all \
or nothing (a manifest last; a failed write deletes what it wrote), with no copy on local disk: \
the prefix must hold nothing yet.

Examples:
  PITR_URI='mongodb://rehearse@db1,db2,db3/?replicaSet=rs0&authSource=admin' \\
    pitr rehearse --backup /backup/nightly --oplog /backup/oplog --metrics /var/lib/node_exporter/pitr.prom
  pitr rehearse --uri \"$URI\" --backup /backup/nightly.archive --full --max-read-rate 5000
  pitr rehearse --uri \"$URI\" --backup /backup/nightly --ns 'shop.*' --json")]
pub struct RehearseArgs {
    /// MongoDB connection string of the replica set (password inside it, never on its own)
    #[arg(long, env = "PITR_URI", hide_env_values = true, value_name = "URI")]
    pub uri: String,
    /// The backup: a mongodump --oplog directory (plain or --gzip) or archive, recognised by content
    #[arg(long, value_name = "DIR|ARCHIVE")]
    pub backup: PathBuf,
    /// The oplog after the backup: a file, a dump directory, an archive, or a `pitr archive`
    /// directory [default: read from the server]
    #[arg(long, value_name = "FILE|DIR")]
    pub oplog: Option<String>,
    /// The point to rehearse, inclusive: `now`, or T:I, RFC 3339, epoch seconds
    #[arg(long, value_name = "now|V", default_value = "now", value_parser = parse_at)]
    pub at: AtSpec,
    /// How far before the newest majority-committed write `--at now` stays
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_margin)]
    pub margin: Duration,
    /// Compare up to N documents per collection drawn from each side
    #[arg(long, value_name = "N", default_value_t = 1000, conflicts_with = "full", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample: u64,
    /// Compare every document
    #[arg(long)]
    pub full: bool,
    /// Only namespaces matching this glob (`shop.orders`, `shop.*`); repeatable
    #[arg(long = "ns", value_name = "GLOB")]
    pub ns: Vec<String>,
    /// Memory for the rebuilt documents (they move to an on-disk store in --work-dir
    /// before they fill it, leaving that store's cache room in it)
    /// [default: half of the memory available when pitr starts, 64 MiB to 64 GiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<usize>,
    /// Read at most N documents per second from production
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_read_rate: Option<u64>,
    /// For a backup without its own oplog: the position its data is complete up to
    #[arg(long, value_name = "V", value_parser = parse_time)]
    pub backup_end: Option<TimeValue>,
    /// Show the differing values (production data: they may be personal or secret)
    #[arg(long)]
    pub show_values: bool,
    /// Print the report as JSON (format pitr-rehearse/1) on stdout
    #[arg(long)]
    pub json: bool,
    /// Also write the result for node_exporter's textfile collector (all or nothing)
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Also write the rebuilt state at the point as mongodump writes a dump (new, or an
    /// empty directory; under a temporary name, renamed when complete), or to a bucket
    /// (s3://, gs://, az://: streamed there, readable once complete)
    #[arg(long, value_name = "DIR|FILE|URL")]
    pub out: Option<PathBuf>,
    /// Write --out as `mongodump --gzip` does
    #[arg(long, requires = "out")]
    pub gzip: bool,
    /// Write --out as one archive file (`mongodump --archive`)
    #[arg(long, requires = "out")]
    pub archive: bool,
    /// Skip the checks that the work dir has room for the engine's on-disk store (past
    /// --memory) and for sorting an oplog out of order, and --out's filesystem for the dump
    #[arg(long)]
    pub no_space_check: bool,
    /// Where temporary files go (the oplog read, the engine's on-disk store) [default: the system temp dir]
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Documents per server batch
    #[arg(long, value_name = "N", hide = true, default_value_t = rehearse::DEFAULT_BATCH, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,
}

fn parse_at(s: &str) -> Result<AtSpec, String> {
    if s.eq_ignore_ascii_case("now") {
        return Ok(AtSpec::Now);
    }
    parse_time(s)
        .map(|v| AtSpec::At(v.ts))
        .map_err(|e| format!("{e} (or `now`)"))
}

fn parse_margin(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(s)
}

pub fn run(a: RehearseArgs) -> Result<u8, Failure> {
    // Local paths only so far: a URL is refused, not taken for a directory `s3:`.
    use super::local_only::local_only_opt;
    let a = RehearseArgs {
        work_dir: local_only_opt("--work-dir", a.work_dir, "give a local directory")?,
        metrics: local_only_opt(
            "--metrics",
            a.metrics,
            "write the metrics file locally (node_exporter's textfile collector reads a local directory)",
        )?,
        ..a
    };
    // Refused before anything is read: outputs that cannot be written.
    if let Some(path) = &a.metrics {
        check_metrics_dir(path)?;
    }
    let out = check_out(&a)?;
    // The same rule as the embedded replay's (crate::memory).
    let memory = crate::memory::budget(a.memory.map(|m| m as u64)).bytes;
    check_room(&a, out.as_ref(), memory)?;
    let oplog_room = (!a.no_space_check && a.oplog.is_none())
        .then(|| server_oplog_room(&a, out.as_ref(), memory));
    let req = RehearseRequest {
        uri: a.uri.clone(),
        backup: a.backup.clone(),
        backup_end: a.backup_end.clone(),
        oplog: a.oplog.clone(),
        at: a.at.clone(),
        margin: a.margin,
        full: a.full,
        sample: a.sample,
        ns: a.ns.clone(),
        memory: memory as usize,
        work_parent: work_parent(&a),
        max_read_rate: a.max_read_rate,
        batch_size: a.batch_size,
        retry: RetryPolicy::default(),
        show_values: a.show_values,
        out,
        sort_room: (!a.no_space_check).then(|| work_sort_room(&a, memory)),
        oplog_room,
    };
    let progress = super::progress::PhaseProgress::for_stderr(a.json);
    let quiet = a.json;
    let note = |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let (mut report, failure) = rehearse::run(&req, &progress, &note);
    // A metrics file that stays as it was would read as the last run's result: not
    // written is an error (exit 2), reported after the report itself.
    let metrics_failure = a
        .metrics
        .as_deref()
        .and_then(|path| write_metrics(path, &mut report));
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    if a.json {
        super::output::write_json(&mut w, &report)?;
    } else if failure.is_none() {
        render(&mut w, &report)?;
    }
    w.flush()?;
    match (failure, metrics_failure) {
        (Some(f), Some(m)) => {
            // The rehearsal's own error is the one returned; the metrics' is printed.
            eprintln!("error: {}", m.message());
            Err(f)
        }
        (Some(f), None) | (None, Some(f)) => Err(f),
        (None, None) => Ok(report.exit_code),
    }
}

const METRICS_HINT: &str = "give --metrics a file in a directory pitr can write \
(node_exporter's --collector.textfile.directory), not an existing directory; until it is written the \
collector shows the previous run's result";

/// `--metrics`' directory must exist and be writable (checked before the rehearsal).
fn check_metrics_dir(path: &Path) -> Result<(), Failure> {
    let dir = crate::storage::parent_dir(path);
    tempfile::Builder::new()
        .prefix(".pitr-write-check-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| {
            Failure::new(format!(
                "cannot write the metrics to `{}`: its directory `{}` cannot be written ({e})",
                path.display(),
                dir.display()
            ))
            .with_hint(METRICS_HINT)
            .with_exit_code(crate::error::exit::ERROR)
        })
}

/// Writes the metrics of `report`, recording the outcome in it; the failure when
/// the file could not be written (the report's exit code becomes 2).
fn write_metrics(path: &Path, report: &mut RehearseReport) -> Option<Failure> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let result = rehearse::metrics::write(path, &rehearse::metrics::render(report, now));
    report.metrics = Some(MetricsFacts {
        path: path.display().to_string(),
        written: result.is_ok(),
        error: result.as_ref().err().map(|e| e.to_string()),
    });
    let e = result.err()?;
    report.exit_code = crate::error::exit::ERROR;
    Some(
        Failure::new(format!(
            "cannot write the metrics to `{}`: {e}; the rehearsal's own result was {} (exit {})",
            path.display(),
            verdict_word(report.result),
            match report.result {
                Verdict::Passed => 0,
                Verdict::Differences => 1,
                Verdict::Error => 2,
            }
        ))
        .with_hint(METRICS_HINT)
        .with_exit_code(crate::error::exit::ERROR),
    )
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Passed => "passed",
        Verdict::Differences => "differences",
        Verdict::Error => "error",
    }
}

/// `--out`, checked before anything is read, as `pitr replay` checks its own: new
/// (or an empty directory for a directory dump), its directory writable, and room
/// for about the backup plus the oplog there.
fn check_out(a: &RehearseArgs) -> Result<Option<OutSpec>, Failure> {
    let Some(o) = &a.out else {
        if a.gzip || a.archive {
            return Err(
                Failure::new("--gzip and --archive choose the form of --out")
                    .with_hint("add --out DIR (or --out FILE with --archive)")
                    .with_exit_code(crate::error::exit::ERROR),
            );
        }
        return Ok(None);
    };
    let format = if a.archive {
        DumpFormat::Archive { gzip: a.gzip }
    } else {
        DumpFormat::Directory { gzip: a.gzip }
    };
    // A `file://` --out is a local path; a bucket must hold nothing there yet (the
    // dump is streamed there).
    let o = match crate::storage::Location::of_path(o)? {
        crate::storage::Location::Local(p) => p,
        url => {
            crate::backup::upload::check_new(&url)?;
            return Ok(Some(OutSpec {
                path: url.display_path(),
                format,
            }));
        }
    };
    let o = if o.is_absolute() {
        o
    } else {
        std::env::current_dir()?.join(o)
    };
    dump::check_new(&o, format)?;
    if a.archive && o.is_dir() {
        return Err(PreflightError::ArchiveOverDir(o).into());
    }
    preflight::check_writable(&o)?;
    Ok(Some(OutSpec { path: o, format }))
}

/// The directory the dump is written in: beside a local `--out`; none for one in a
/// bucket (streamed there, no copy on local disk).
fn dump_dir(out: &OutSpec) -> Option<PathBuf> {
    match crate::storage::Location::of_path(&out.path) {
        Ok(crate::storage::Location::Local(p)) => {
            Some(crate::storage::parent_dir(&p).to_path_buf())
        }
        _ => None,
    }
}

/// Input sizes: the backup's bytes and the given oplog's (0 when it is read from
/// the server: its size is known only once it is read).
fn input_sizes(a: &RehearseArgs) -> (u64, u64) {
    let oplog = a
        .oplog
        .as_deref()
        .map_or(0, |s| preflight::input_size(Path::new(s)));
    (preflight::input_size(&a.backup), oplog)
}

/// The work dir's parent (`--work-dir`, or the system temp dir).
fn work_parent(a: &RehearseArgs) -> PathBuf {
    a.work_dir.clone().unwrap_or_else(std::env::temp_dir)
}

/// Refused before anything is read (unless `--no-space-check`): a work dir without
/// room for the engine's on-disk store (past `--memory`, as the embedded replay
/// counts it), and `--out`'s filesystem without room for the dump, summed when
/// they share one. A rehearsal that fills the disk at 3 a.m. proves nothing.
fn check_room(a: &RehearseArgs, out: Option<&OutSpec>, memory: u64) -> Result<(), Failure> {
    if a.no_space_check {
        return Ok(());
    }
    let (backup, oplog) = input_sizes(a);
    let needs = room_needs(
        &work_parent(a),
        out.and_then(dump_dir).as_deref(),
        (backup, oplog),
        0,
        memory,
    );
    preflight::check_space(&needs).map_err(|e| super::room::failure(e, &super::room::REHEARSE))
}

/// In the work dir, `read` bytes of oplog read from the server and, past `--memory`,
/// the engine's on-disk store for the backup and the oplog (`sizes`); in `dump_dir`
/// ([`dump_dir`]), the dump.
fn room_needs(
    work: &Path,
    dump_dir: Option<&Path>,
    (backup, oplog): (u64, u64),
    read: u64,
    memory: u64,
) -> Vec<Need> {
    let oplog = oplog + read;
    let mut needs = vec![Need {
        dir: work.to_path_buf(),
        bytes: read + preflight::store_bytes(backup, oplog, memory),
        what: match read {
            0 => "the engine's on-disk store".into(),
            _ => "the oplog read from the server (estimated from its size and the time it spans) \
                  and the engine's on-disk store"
                .into(),
        },
    }];
    if let Some(dir) = dump_dir {
        needs.push(Need {
            dir: dir.to_path_buf(),
            bytes: backup + oplog,
            what: "the dump of the rebuilt state".into(),
        });
    }
    needs
}

/// The check before the oplog is read from the server into the work dir
/// ([`rehearse::OplogRoom`]), once its bytes are estimated: the oplog's file, the
/// store and the dump for it, against what is free then.
fn server_oplog_room(a: &RehearseArgs, out: Option<&OutSpec>, memory: u64) -> rehearse::OplogRoom {
    let work = work_parent(a);
    let dump = out.and_then(dump_dir);
    let sizes = input_sizes(a);
    rehearse::OplogRoom(std::sync::Arc::new(move |read| {
        let needs = room_needs(&work, dump.as_deref(), sizes, read, memory);
        preflight::check_space(&needs).map_err(|e| super::room::failure(e, &super::room::REHEARSE))
    }))
}

/// The check of the work dir's room when the oplog is out of order (its slice is
/// then sorted there): the sorted slice, and past `--memory` the engine's on-disk
/// store. An oplog read from the server is counted by what it wrote there before
/// the plan (already off the free space), not in the store's estimate.
fn work_sort_room(a: &RehearseArgs, memory: u64) -> crate::plan::SortRoom {
    let (backup, oplog) = input_sizes(a);
    let store = preflight::store_bytes(backup, oplog, memory);
    super::room::sort_room_in(work_parent(a), store, &super::room::REHEARSE)
}

fn secs(s: u64) -> String {
    humantime::format_duration(Duration::from_secs(s)).to_string()
}

fn kind_word(k: DiffKind) -> &'static str {
    match k {
        DiffKind::MissingInProduction => "namespace only in the rebuild",
        DiffKind::MissingInRebuild => "namespace only in production",
        DiffKind::Kind => "kind",
        DiffKind::Options => "options",
        DiffKind::Uuid => "uuid",
        DiffKind::IndexMissingInProduction => "index only in the rebuild",
        DiffKind::IndexMissingInRebuild => "index only in production",
        DiffKind::IndexDiffers => "index",
        DiffKind::ViewDefinition => "view",
        DiffKind::Count => "count",
        DiffKind::DocumentMissingInProduction => "document only in the rebuild",
        DiffKind::DocumentMissingInRebuild => "document only in production",
        DiffKind::DocumentDiffers => "document",
    }
}

/// The report as text (stdout).
pub fn render(w: &mut impl Write, r: &RehearseReport) -> io::Result<()> {
    let version = r.server.version.as_deref().unwrap_or("unknown");
    writeln!(
        w,
        "Production  {} (MongoDB {version}{}{})",
        r.target,
        r.server
            .replica_set
            .as_deref()
            .map(|s| format!(", replica set {s}"))
            .unwrap_or_default(),
        if r.server.standin {
            "; pitr's test stand-in, NOT MongoDB"
        } else {
            ""
        }
    )?;
    if let Some(at) = &r.at {
        writeln!(
            w,
            "Point       {} ({}), inclusive: {}",
            at.ts, at.utc, at.how
        )?;
    }
    writeln!(
        w,
        "Backup      {} ends at {}{}",
        r.backup.path,
        r.backup
            .end_ts
            .map_or("?".to_string(), |t| format!("{t} ({})", t.utc_string())),
        r.backup
            .age_secs
            .map(|a| format!(", {} old", secs(a)))
            .unwrap_or_default()
    )?;
    writeln!(
        w,
        "Oplog       {}{}",
        r.oplog.source,
        match (r.oplog.entries, r.oplog.first_ts, r.oplog.last_ts) {
            (Some(n), Some(f), Some(l)) => format!(": {n} entries, {f} to {l}"),
            (Some(n), _, _) => format!(": {n} entries"),
            _ => String::new(),
        }
    )?;
    if let Some(rw) = r.recovery_window_secs {
        writeln!(
            w,
            "Window      {} of recovery proven (backup end to the point)",
            secs(rw)
        )?;
    }
    writeln!(
        w,
        "History     the server keeps {} s of snapshot history ({})",
        r.server.snapshot_window_secs, r.server.snapshot_window_source
    )?;
    writeln!(
        w,
        "Timing      rebuild {:.1} s, oplog read {:.1} s, compare {:.1} s, total {:.1} s",
        r.timing.rebuild_secs, r.timing.oplog_read_secs, r.timing.compare_secs, r.timing.total_secs
    )?;
    writeln!(
        w,
        "Compared    {} ({}): {} documents byte for byte ({:.0}/s); {} documents read from production in {} commands ({:.0}/s)",
        r.content,
        match r.sample_per_side {
            Some(n) => format!("up to {n} _ids per collection from each side"),
            None => "every document".into(),
        },
        r.documents_compared,
        r.documents_compared_per_sec,
        r.reads.documents,
        r.reads.commands,
        r.reads.documents_per_sec
    )?;
    if r.reads.retries > 0 {
        writeln!(
            w,
            "Retried     {} reads after transient errors (within the history window)",
            r.reads.retries
        )?;
    }
    writeln!(
        w,
        "Rebuild     {} documents; {}",
        r.rebuild.documents,
        if r.rebuild.spilled_to_disk {
            format!(
                "past --memory ({}) they moved to disk in --work-dir",
                crate::size::human(r.rebuild.memory_bytes)
            )
        } else {
            format!(
                "held in memory (peak {} of --memory {})",
                crate::size::human(r.rebuild.peak_memory_bytes),
                crate::size::human(r.rebuild.memory_bytes)
            )
        }
    )?;
    if let Some(o) = &r.out {
        writeln!(
            w,
            "Dump        {} ({}): the state at the point, {} namespaces, {} documents, written in {:.1} s",
            o.path,
            o.format,
            o.namespaces.len(),
            o.documents,
            o.write_secs
        )?;
    }
    writeln!(w)?;
    render_namespaces(w, r)?;
    render_findings(w, r)
}

/// One row per namespace compared.
fn render_namespaces(w: &mut impl Write, r: &RehearseReport) -> io::Result<()> {
    let rows: Vec<Vec<String>> = r
        .namespaces
        .iter()
        .map(|n| {
            let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
            vec![
                n.ns.clone(),
                n.kind.clone(),
                opt(n.rebuild_documents),
                opt(n.production_documents),
                n.compared.to_string(),
                match n.status.as_str() {
                    "differs" => format!("DIFFERS ({})", n.differences),
                    other => other.to_string(),
                },
            ]
        })
        .collect();
    if !rows.is_empty() {
        write!(
            w,
            "{}",
            crate::table::render(
                "",
                &[
                    "NAMESPACE",
                    "KIND",
                    "REBUILD",
                    "PRODUCTION",
                    "COMPARED",
                    "RESULT"
                ],
                &rows
            )
        )?;
    }
    Ok(())
}

/// The differences, what was left out, and the verdict.
fn render_findings(w: &mut impl Write, r: &RehearseReport) -> io::Result<()> {
    if !r.differences.is_empty() {
        writeln!(w, "\nDifferences ({}):", r.differences_total)?;
        for d in &r.differences {
            let id =
                d.id.as_deref()
                    .map(|i| format!(" _id {i}"))
                    .unwrap_or_default();
            writeln!(w, "  {}{id}: {}: {}", d.ns, kind_word(d.kind), d.detail)?;
            for v in d.values.iter().flatten() {
                let path = if v.path.is_empty() {
                    "(document)"
                } else {
                    &v.path
                };
                writeln!(
                    w,
                    "      {path}: rebuild {}  production {}",
                    v.rebuild, v.production
                )?;
            }
        }
        if (r.differences.len() as u64) < r.differences_total {
            writeln!(
                w,
                "  ... {} more (per namespace the first {} are listed)",
                r.differences_total - r.differences.len() as u64,
                crate::rehearse::report::MAX_PER_NAMESPACE
            )?;
        }
    }
    if !r.not_compared.is_empty() {
        writeln!(w, "\nNot compared ({}):", r.not_compared.len())?;
        for n in &r.not_compared {
            writeln!(w, "  {}: {}", n.ns, n.why)?;
        }
    }
    writeln!(w)?;
    match r.result {
        Verdict::Passed if r.nothing_compared => writeln!(
            w,
            "REHEARSAL PASSED, BUT NO DOCUMENTS WERE COMPARED: {}; this run proves little about the chain",
            if r.namespaces.is_empty() {
                "neither side has a user namespace".to_string()
            } else {
                format!(
                    "the documents of every namespace were left out ({} listed above)",
                    r.not_compared.len()
                )
            }
        )?,
        Verdict::Passed => writeln!(
            w,
            "REHEARSAL PASSED: the backup and the oplog rebuild production exactly as of {}{}",
            r.at.as_ref().map_or("?".to_string(), |a| a.ts.to_string()),
            if r.not_compared.is_empty() {
                String::new()
            } else {
                format!(" ({} left out, listed above)", r.not_compared.len())
            }
        )?,
        Verdict::Differences => writeln!(
            w,
            "REHEARSAL FAILED: {} between the rebuild and production; a restore from this chain would not give production back",
            crate::table::counted(r.differences_total, "difference", "differences")
        )?,
        Verdict::Error => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<RehearseArgs, String> {
        let mut v = vec!["pitr", "rehearse"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v) {
            Ok(Cli {
                command: crate::cli::Command::Rehearse(a),
            }) => Ok(a),
            Ok(_) => Err("other command".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// An oplog found out of order is sorted in the work dir: the check then asked
    /// for (`PlanRequest::sort_room`) counts the sorted slice in the work dir and
    /// speaks of the rehearsal's `--work-dir`.
    #[test]
    fn the_sort_of_an_oplog_out_of_order_is_checked_in_the_work_dir() {
        use crate::error::Hint;
        let d = tempfile::tempdir().unwrap();
        let w = d.path().to_str().unwrap();
        let a = parse(&["--uri", "u", "--backup", "b", "--work-dir", w]).unwrap();
        let room = work_sort_room(&a, 1 << 30);
        (room.0)(1 << 20).unwrap();
        let e = (room.0)(u64::MAX / 4).unwrap_err();
        let message = e.to_string();
        assert!(
            message.starts_with("the oplog is out of order, so its slice is sorted in the work dir first: not enough free space on the filesystem of")
                && message.contains(w)
                && message.contains("the rehearsal writes about")
                && message.contains("(the sorted slice)"),
            "{message}"
        );
        assert!(e.hint().unwrap().contains("--work-dir"), "{:?}", e.hint());
        assert!(
            parse(&["--uri", "u", "--backup", "b", "--no-space-check"])
                .unwrap()
                .no_space_check
        );
    }

    #[test]
    fn command_lines() {
        let a = parse(&["--uri", "mongodb://h/", "--backup", "b"]).unwrap();
        assert_eq!(a.at, AtSpec::Now);
        assert_eq!(a.sample, 1000);
        assert!(!a.full);
        assert_eq!(a.margin, Duration::from_secs(5));
        let a = parse(&[
            "--uri",
            "u",
            "--backup",
            "b",
            "--at",
            "1700000000:5",
            "--full",
        ])
        .unwrap();
        assert_eq!(a.at, AtSpec::At(crate::oplog::Ts::new(1_700_000_000, 5)));
        let a = parse(&[
            "--uri",
            "u",
            "--backup",
            "b",
            "--at",
            "2023-11-14T22:13:20Z",
        ])
        .unwrap();
        assert_eq!(a.at, AtSpec::At(crate::oplog::Ts::new(1_700_000_000, 0)));
        assert!(
            parse(&["--uri", "u", "--backup", "b", "--full", "--sample", "5"])
                .unwrap_err()
                .contains("cannot be used with")
        );
        assert!(parse(&["--uri", "u", "--backup", "b", "--sample", "0"]).is_err());
        assert!(parse(&["--uri", "u", "--backup", "b", "--at", "yesterday"])
            .unwrap_err()
            .contains("or `now`"));
        assert!(parse(&["--uri", "u", "--backup", "b", "--max-read-rate", "0"]).is_err());
        assert!(parse(&["--backup", "b"]).is_err() || std::env::var_os("PITR_URI").is_some());
    }
}
