//! `dump-oplog`: copying `local.oplog.rs` to `DIR/oplog.bson`, ready for
//! `mongorestore --oplogReplay [--gzip] DIR`. With `--gzip` the file holds gzip
//! content but keeps the name `oplog.bson`, exactly as `mongodump --oplog --gzip`
//! lays it out (mongo-tools `mongodump/prepare.go`); mongorestore `--gzip` reads
//! the root `oplog.bson` through gzip and ignores an `oplog.bson.gz`.
//!
//! **Never a file that looks complete but is not.** The entries go to
//! `oplog.bson.partial`; only a dump that reached its planned end is synced and
//! renamed to `oplog.bson`. Next to the partial file, `oplog.bson.partial.json`
//! records the plan (bounds, planned end, replica set, compression) so that
//! `--resume` finishes exactly the dump that was started.
//!
//! **Resume is byte-exact.** The partial file is read back with the oplog reader,
//! cut after its last complete entry, and the read continues with `ts > last`.
//! Compressed dumps are written as a series of gzip members, each closed after
//! [`GZIP_MEMBER_BYTES`] of entries (a boundary that depends only on the data, so
//! an interrupted and resumed dump ends byte-identical to an uninterrupted one);
//! resuming keeps the complete members and drops the one being written. Every
//! member records its own length in its header (`oplog::gzip::SIZE_SUBFIELD`), so
//! pitr decompresses the members of such a file on every core.
//! `mongorestore` reads multi-member gzip like any other, and skips the extra field.
//!
//! **To a bucket** ([`DumpTo::Bucket`]): the same bytes, streamed into
//! `URL/oplog.bson` by one multipart upload as they are read, completed (and the
//! manifest written after it) only when the dump reached its planned end. Nothing is
//! staged on local disk, and there is nothing to resume: a dump that stops aborts
//! its upload and removes its marker ([`DirUpload`]).
//!
//! **Bounds.** `--since` is inclusive, `--until` exclusive (as everywhere in pitr);
//! the upper end is also capped at the newest entry when the dump was planned, so a
//! dump of a busy server ends.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bson::RawDocument;
use serde::{Deserialize, Serialize};

use super::connect::Topology;
use super::dump_file::OutFile;
pub use super::dump_file::{scan_partial, ResumePoint, GZIP_MEMBER_BYTES};
use super::error::{MongoError, Reached};
use super::oplog_source::{
    covers, stream, window, Lower, OplogQuery, OplogSink, Progress, RetryNotice, RetryPolicy,
    StreamError, Window,
};
use super::readonly::ReadOnlyClient;
use crate::backup::upload::DirUpload;
use crate::error::Hint;
use crate::mongo::blocking;
use crate::oplog::{ReadError, Ts};
use crate::storage::{self, Location, StorageError};

/// How often the output is flushed to the OS while streaming.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// The files of one dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpPaths {
    /// `DIR/oplog.bson` (gzip content with `--gzip`).
    pub complete: PathBuf,
    /// The same with `.partial`.
    pub partial: PathBuf,
    /// The same with `.partial.json`: the plan.
    pub state: PathBuf,
}

/// The dump's name, in a directory or under a bucket prefix.
pub const OPLOG_FILE: &str = "oplog.bson";

impl DumpPaths {
    pub fn new(dir: &Path) -> DumpPaths {
        let name = OPLOG_FILE;
        DumpPaths {
            complete: dir.join(name),
            partial: dir.join(format!("{name}.partial")),
            state: dir.join(format!("{name}.partial.json")),
        }
    }
}

/// Where a dump goes.
#[derive(Clone, Debug)]
pub enum DumpTo {
    /// `DIR/oplog.bson`, through `oplog.bson.partial` (resumable).
    Dir(PathBuf),
    /// `URL/oplog.bson`, streamed there as it is read: one multipart upload,
    /// between the in-progress marker and the manifest written last
    /// ([`DirUpload`]), so that it is readable only once complete. Not resumable:
    /// a dump that stops leaves nothing there.
    Bucket(Location),
}

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct DumpRequest {
    pub to: DumpTo,
    /// Inclusive.
    pub since: Option<Ts>,
    /// Exclusive.
    pub until: Option<Ts>,
    pub gzip: bool,
    pub resume: bool,
    /// Continue (with a warning) when the oplog no longer reaches back to the start.
    pub allow_gap: bool,
    pub batch_size: Option<u32>,
    pub retry: RetryPolicy,
}

/// The plan recorded next to a partial dump.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpState {
    pub format: u32,
    /// The redacted connection string (for the user; never used to connect).
    pub source: String,
    pub replica_set: Option<String>,
    /// `t:i`, inclusive.
    pub since: Option<String>,
    /// `t:i`, exclusive.
    pub until: Option<String>,
    /// `t:i`, inclusive: the newest entry when the dump was planned.
    pub end: String,
    pub gzip: bool,
    pub started: String,
}

const STATE_FORMAT: u32 = 1;

fn ts_text(t: Ts) -> String {
    t.to_string()
}

/// The dump about to run, for progress and messages.
#[derive(Clone, Debug)]
pub struct DumpPlan {
    pub window: Window,
    pub since: Option<Ts>,
    pub until: Option<Ts>,
    /// Inclusive upper end.
    pub end: Ts,
    pub resumed: Option<ResumePoint>,
    /// Where progress starts (resume point, `--since`, or the oldest entry).
    pub from: Ts,
}

/// The finished dump.
#[derive(Clone, Debug)]
pub struct DumpOutcome {
    /// Where the dump is: its path, or its object's URL.
    pub at: String,
    pub entries: u64,
    /// Uncompressed BSON bytes.
    pub bson_bytes: u64,
    /// Size of the file written.
    pub file_bytes: u64,
    pub first: Option<Ts>,
    pub last: Option<Ts>,
    pub plan: DumpPlan,
}

/// Hooks for progress display and warnings.
pub trait DumpObserver {
    fn planned(&mut self, _plan: &DumpPlan) {}
    fn progress(&mut self, _p: &Progress) {}
    fn retrying(&mut self, _n: &RetryNotice<'_>) {}
    fn warning(&mut self, _msg: &str) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl DumpObserver for Quiet {}

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error(transparent)]
    Source(#[from] MongoError),

    #[error("{cause}; the {} entries read so far are kept in `{}`", reached.entries, partial.display())]
    Interrupted {
        partial: PathBuf,
        reached: Reached,
        #[source]
        cause: Box<MongoError>,
    },

    #[error("{cause}; nothing was kept at {url} after {} entries (a dump to a bucket is all or nothing)", reached.entries)]
    UploadInterrupted {
        url: String,
        reached: Reached,
        #[source]
        cause: Box<MongoError>,
    },

    #[error("`--out {url} --resume`: a dump to a bucket cannot be resumed (there is no partial dump there: one that stops leaves nothing)")]
    ResumeInBucket { url: String },

    #[error(transparent)]
    Storage(#[from] StorageError),

    #[error(
        "cannot resume `{}` without a possible gap: it ends at {last} ({}), but the oplog's oldest entry is now {oldest} ({})",
        partial.display(), last.utc_string(), oldest.utc_string()
    )]
    ResumeGap {
        partial: PathBuf,
        last: Ts,
        oldest: Ts,
    },

    #[error("`{}` already exists", path.display())]
    Exists { path: PathBuf },

    #[error("an interrupted dump is in `{}`", partial.display())]
    PartialExists { partial: PathBuf },

    #[error("`--resume` found `{}`, which is the other format (--gzip {})", found.display(), if *found_gzip { "on" } else { "off" })]
    OtherFormatPartial { found: PathBuf, found_gzip: bool },

    #[error("{flag} `{given}` differs from the interrupted dump's `{recorded}` (in `{}`)", state.display())]
    ResumeMismatch {
        flag: &'static str,
        given: String,
        recorded: String,
        state: PathBuf,
    },

    #[error("the interrupted dump in `{}` came from replica set `{recorded}`, this server is {now}", partial.display())]
    ResumeOtherSet {
        partial: PathBuf,
        recorded: String,
        now: String,
    },

    #[error("`{}` is not a dump plan pitr wrote: {detail}", path.display())]
    BadState { path: PathBuf, detail: String },

    #[error("cannot read the interrupted dump `{}`", path.display())]
    PartialUnreadable {
        path: PathBuf,
        #[source]
        source: ReadError,
    },

    #[error("--since `{since}` is not before --until `{until}`")]
    BadRange { since: Ts, until: Ts },

    #[error("the oplog of `{target}` is empty")]
    EmptyOplog { target: String },

    #[error("cannot {what} `{}`", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Hint for DumpError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            DumpError::Source(e) => return e.hint(),
            DumpError::Interrupted { cause, .. } => match cause.as_ref() {
                MongoError::PositionLost { .. } => "run the same command again with `--resume` to continue after the last \
                    entry written; entries after it may already have been lost from the oplog window, and --resume checks \
                    that (it refuses to leave a silent gap). Read from a less busy member or grow the oplog \
                    (`replSetResizeOplog`) if this repeats"
                    .into(),
                _ => {
                    let more = cause.hint().map(|h| format!("; {h}")).unwrap_or_default();
                    format!("fix the cause, then run the same command with `--resume` to continue after the last entry written{more}")
                }
            },
            DumpError::UploadInterrupted { cause, .. } => {
                let more = cause.hint().map(|h| format!("; {h}")).unwrap_or_default();
                format!("fix the cause, then run the same command again (to be able to `--resume` a long dump, dump to a local DIR and upload it after){more}")
            }
            DumpError::ResumeInBucket { .. } => {
                "run it again without --resume; to be able to resume a long dump, dump to a local DIR and upload it after".into()
            }
            DumpError::Storage(e) => return e.hint(),
            DumpError::ResumeGap { last, oldest, .. } => format!(
                "anything written after {last} and before {oldest} was dropped by the capped oplog before it \
                 was read (pitr cannot tell whether there was anything); pass `--allow-gap` to complete the dump \
                 anyway, or delete the partial files and dump again from a point still in the window (`--since {oldest}`)"
            ),
            DumpError::Exists { .. } => {
                "pitr never overwrites a complete dump: choose another --out directory, or move the old file away".into()
            }
            DumpError::PartialExists { partial } => format!(
                "pass `--resume` to continue it, or delete `{}` (and its `.json`) to start over",
                partial.display()
            ),
            DumpError::OtherFormatPartial { found_gzip, .. } => format!(
                "resume with the same format as the interrupted dump ({}), or delete the partial files",
                if *found_gzip { "add --gzip" } else { "without --gzip" }
            ),
            DumpError::ResumeMismatch { .. } => {
                "resume with the same bounds (or leave them out: the recorded ones are used), or delete the partial files to start a new dump".into()
            }
            DumpError::ResumeOtherSet { .. } => {
                "point --uri at the replica set the dump came from, or delete the partial files to start a new dump".into()
            }
            DumpError::BadState { .. } => "delete it; `--resume` then uses the bounds on the command line".into(),
            DumpError::PartialUnreadable { .. } => "delete the partial files and dump again".into(),
            DumpError::BadRange { .. } => {
                "--since is inclusive and --until exclusive; swap them or widen the range".into()
            }
            DumpError::EmptyOplog { .. } => "nothing to dump: is this the right server?".into(),
            DumpError::Io { .. } => "check free space and permissions of the --out directory".into(),
        })
    }
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> DumpError {
    let path = path.to_path_buf();
    move |source| DumpError::Io { what, path, source }
}

/// Where the entries read go: the dump's [`OutFile`] (a local file, or an object's
/// upload), with the observer told of each batch.
struct OutSink<'a> {
    out: OutFile,
    obs: &'a mut dyn DumpObserver,
    first: Option<Ts>,
    last_flush: Instant,
}

impl OplogSink for OutSink<'_> {
    type Error = io::Error;

    fn entry(&mut self, doc: &RawDocument, ts: Ts) -> io::Result<()> {
        self.first.get_or_insert(ts);
        self.out.write_entry(doc.as_bytes())
    }

    fn progress(&mut self, p: &Progress) -> io::Result<()> {
        if self.last_flush.elapsed() >= FLUSH_EVERY {
            self.out.flush()?;
            self.last_flush = Instant::now();
        }
        self.obs.progress(p);
        Ok(())
    }

    fn retrying(&mut self, n: &RetryNotice<'_>) -> io::Result<()> {
        self.out.flush()?;
        self.obs.retrying(n);
        Ok(())
    }
}

fn read_state(path: &Path) -> Result<Option<DumpState>, DumpError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", path)(e)),
    };
    let st: DumpState = serde_json::from_str(&text).map_err(|e| DumpError::BadState {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    if st.format != STATE_FORMAT {
        return Err(DumpError::BadState {
            path: path.to_path_buf(),
            detail: format!("format {} (this pitr writes {STATE_FORMAT})", st.format),
        });
    }
    Ok(Some(st))
}

fn write_state(path: &Path, st: &DumpState) -> Result<(), DumpError> {
    let text =
        serde_json::to_string_pretty(st).map_err(|e| io_err("write", path)(io::Error::other(e)))?;
    fs::write(path, text + "\n").map_err(io_err("write", path))
}

/// A bound from the command line against the recorded one: equal, or only one given.
fn reconcile(
    flag: &'static str,
    given: Option<Ts>,
    recorded: Option<&Option<String>>,
    state: &Path,
) -> Result<Option<Ts>, DumpError> {
    let Some(recorded) = recorded else {
        return Ok(given);
    };
    let rec = match recorded {
        Some(s) => Some(
            crate::oplog::ts_json::parse(s).ok_or_else(|| DumpError::BadState {
                path: state.to_path_buf(),
                detail: format!("{flag} `{s}` is not t:i"),
            })?,
        ),
        None => None,
    };
    match (given, rec) {
        (Some(g), r) if Some(g) != r => Err(DumpError::ResumeMismatch {
            flag,
            given: g.to_string(),
            recorded: r.map_or_else(|| "(none)".to_string(), |r| r.to_string()),
            state: state.to_path_buf(),
        }),
        _ => Ok(rec),
    }
}

fn sync_dir(dir: &Path) {
    // Best effort: makes the rename durable on filesystems that need it.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// What is wrong with `req` before anything is read: refused without connecting.
pub fn check_request(req: &DumpRequest) -> Result<(), DumpError> {
    if let (Some(s), Some(u)) = (req.since, req.until) {
        if s >= u {
            return Err(DumpError::BadRange { since: s, until: u });
        }
    }
    match &req.to {
        DumpTo::Bucket(url) if req.resume => Err(DumpError::ResumeInBucket {
            url: url.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Runs a dump (see the module comment).
pub async fn dump(
    client: &ReadOnlyClient,
    topology: &Topology,
    req: &DumpRequest,
    obs: &mut dyn DumpObserver,
) -> Result<DumpOutcome, DumpError> {
    check_request(req)?;
    match &req.to {
        DumpTo::Dir(dir) => dump_to_dir(client, topology, req, dir, obs).await,
        DumpTo::Bucket(url) => dump_to_bucket(client, req, url, obs).await,
    }
}

/// The oplog's window, refused when empty.
async fn window_of(client: &ReadOnlyClient) -> Result<Window, DumpError> {
    window(client).await?.ok_or_else(|| DumpError::EmptyOplog {
        target: client.target().display.clone(),
    })
}

async fn dump_to_dir(
    client: &ReadOnlyClient,
    topology: &Topology,
    req: &DumpRequest,
    dir: &Path,
    obs: &mut dyn DumpObserver,
) -> Result<DumpOutcome, DumpError> {
    let paths = DumpPaths::new(dir);
    let have_partial = check_outputs(req, dir, &paths, obs)?;
    let resuming = req.resume && have_partial;
    let Resume {
        recorded,
        since,
        until,
    } = resume_bounds(req, &paths, topology, resuming, obs)?;

    let win = window_of(client).await?;
    let end = match recorded.as_ref().map(|r| r.end.as_str()) {
        Some(e) => crate::oplog::ts_json::parse(e).ok_or_else(|| DumpError::BadState {
            path: paths.state.clone(),
            detail: format!("end `{e}` is not t:i"),
        })?,
        None => win.newest.ts,
    };
    let resume_point = if resuming {
        Some(resume_point(req, &paths, obs)?)
    } else {
        None
    };
    let start = resume_point
        .as_ref()
        .map(|rp| Progress {
            entries: rp.entries,
            bytes: rp.bson_bytes,
            last: rp.last,
        })
        .unwrap_or_default();
    let bounds = Bounds { since, until, end };
    check_window(req, Some(&paths.partial), &win, bounds, start, obs)?;

    if !resuming || recorded.is_none() {
        let st = DumpState {
            format: STATE_FORMAT,
            source: client.target().display.clone(),
            replica_set: topology.set_name().map(str::to_string),
            since: since.map(ts_text),
            until: until.map(ts_text),
            end: ts_text(end),
            gzip: req.gzip,
            started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        write_state(&paths.state, &st)?;
    }
    let keep = resume_point.as_ref().map_or(0, |rp| rp.keep_bytes);
    let out = OutFile::open(&paths.partial, keep, req.gzip)?;
    let (plan, streamed, sink) = stream_into(
        client,
        req,
        &win,
        bounds,
        (start, resume_point.clone()),
        out,
        obs,
    )
    .await;
    finish(dir, &paths, plan, streamed, sink, resume_point, start)
}

/// `req.to` a bucket: the entries streamed into `url/oplog.bson` (an upload
/// completed, and the manifest written, only once the dump reached its end; on any
/// failure or interruption, the upload is aborted and the marker removed, when
/// `upload` and the writer are dropped).
async fn dump_to_bucket(
    client: &ReadOnlyClient,
    req: &DumpRequest,
    url: &Location,
    obs: &mut dyn DumpObserver,
) -> Result<DumpOutcome, DumpError> {
    let win = window_of(client).await?;
    let bounds = Bounds {
        since: req.since,
        until: req.until,
        end: win.newest.ts,
    };
    let start = Progress::default();
    check_window(req, None, &win, bounds, start, obs)?;
    let mut upload = blocking(|| DirUpload::begin(url))?;
    let at = upload.object(OPLOG_FILE);
    let w = blocking(|| storage::global().create_all_or_nothing(&at))?;
    let out = OutFile::object(w, req.gzip);
    let (plan, streamed, sink) =
        stream_into(client, req, &win, bounds, (start, None), out, obs).await;
    let upload_err = |e: io::Error| match storage::into_storage_error(e) {
        Ok(se) => DumpError::Storage(se),
        Err(source) => DumpError::Io {
            what: "upload",
            path: at.display_path(),
            source,
        },
    };
    match streamed {
        Ok(p) => {
            let first = sink.first;
            let file_bytes = sink.out.finish().map_err(upload_err)?;
            upload.record(OPLOG_FILE.to_string(), file_bytes);
            blocking(|| upload.commit())?;
            Ok(DumpOutcome {
                at: at.to_string(),
                entries: p.entries,
                bson_bytes: p.bytes,
                file_bytes,
                first,
                last: p.last,
                plan,
            })
        }
        Err(StreamError::Sink(e)) => Err(upload_err(e)),
        Err(StreamError::Source(cause)) => Err(DumpError::UploadInterrupted {
            url: url.to_string(),
            reached: reached_at(&cause, start),
            cause: Box::new(cause),
        }),
    }
}

/// The bounds of a dump: `since` inclusive, `until` exclusive, `end` the newest
/// entry when it was planned (inclusive).
#[derive(Clone, Copy, Debug)]
struct Bounds {
    since: Option<Ts>,
    until: Option<Ts>,
    end: Ts,
}

/// Reads the planned range into `out` from `start` (where a resumed dump stopped,
/// or nothing), telling `obs` the plan first.
async fn stream_into<'a>(
    client: &ReadOnlyClient,
    req: &DumpRequest,
    win: &Window,
    Bounds { since, until, end }: Bounds,
    (start, resumed): (Progress, Option<ResumePoint>),
    out: OutFile,
    obs: &'a mut dyn DumpObserver,
) -> (
    DumpPlan,
    Result<Progress, StreamError<io::Error>>,
    OutSink<'a>,
) {
    let plan = DumpPlan {
        window: *win,
        since,
        until,
        end,
        resumed,
        from: start
            .last
            .or(since)
            .unwrap_or(win.oldest.ts)
            .max(win.oldest.ts)
            .min(end),
    };
    obs.planned(&plan);
    let q = OplogQuery {
        lower: since.map(Lower::Inclusive),
        upper_inclusive: Some(end),
        upper_exclusive: until,
        only_commands: false,
        batch_size: req.batch_size,
        // Checked before (and refused unless --allow-gap).
        allow_start_gap: req.allow_gap,
        // Without --until the dump ends at the newest entry it saw when it started;
        // the member read must deliver it (a lagging one must not end the dump early).
        must_reach: until.is_none_or(|u| end < u).then_some(end),
    };
    let mut sink = OutSink {
        out,
        obs,
        first: None,
        last_flush: Instant::now(),
    };
    let streamed = stream(client, &q, &req.retry, start, &mut sink).await;
    (plan, streamed, sink)
}

/// The dump's files as found: a complete dump is never overwritten; an interrupted
/// one is resumed only with `--resume`. Returns whether an interrupted one exists.
fn check_outputs(
    req: &DumpRequest,
    dir: &Path,
    paths: &DumpPaths,
    obs: &mut dyn DumpObserver,
) -> Result<bool, DumpError> {
    if paths.complete.exists() {
        return Err(DumpError::Exists {
            path: paths.complete.clone(),
        });
    }
    let have_partial = paths.partial.exists();
    if !have_partial && req.resume {
        obs.warning(&format!(
            "--resume: no interrupted dump in `{}`; starting a new one",
            dir.display()
        ));
    }
    if have_partial && !req.resume {
        return Err(DumpError::PartialExists {
            partial: paths.partial.clone(),
        });
    }
    fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
    Ok(have_partial)
}

/// The bounds of the dump: the ones recorded by the interrupted run being resumed
/// (which must agree with the command line, and come from the same replica set),
/// else the command line's.
struct Resume {
    recorded: Option<DumpState>,
    since: Option<Ts>,
    until: Option<Ts>,
}

fn resume_bounds(
    req: &DumpRequest,
    paths: &DumpPaths,
    topology: &Topology,
    resuming: bool,
    obs: &mut dyn DumpObserver,
) -> Result<Resume, DumpError> {
    let recorded = if resuming {
        read_state(&paths.state)?
    } else {
        None
    };
    // The partial file's compression: recorded in the plan, else read from its bytes.
    if resuming {
        let found_gzip = match &recorded {
            Some(r) => r.gzip,
            None => {
                crate::oplog::source::compression_of(&paths.partial).map_err(|e| {
                    DumpError::PartialUnreadable {
                        path: paths.partial.clone(),
                        source: e,
                    }
                })? == crate::oplog::Compression::Gzip
            }
        };
        if found_gzip != req.gzip {
            return Err(DumpError::OtherFormatPartial {
                found: paths.partial.clone(),
                found_gzip,
            });
        }
    }
    if resuming && recorded.is_none() {
        obs.warning(&format!(
            "no plan recorded next to `{}`; resuming with the bounds on the command line",
            paths.partial.display()
        ));
    }
    let since = reconcile(
        "--since",
        req.since,
        recorded.as_ref().map(|r| &r.since),
        &paths.state,
    )?;
    let until = reconcile(
        "--until",
        req.until,
        recorded.as_ref().map(|r| &r.until),
        &paths.state,
    )?;
    if let Some(rec) = &recorded {
        if rec.replica_set.as_deref() != topology.set_name() {
            return Err(DumpError::ResumeOtherSet {
                partial: paths.partial.clone(),
                recorded: rec
                    .replica_set
                    .clone()
                    .unwrap_or_else(|| "(standalone)".into()),
                now: topology.set_name().map_or_else(
                    || "a standalone".to_string(),
                    |n| format!("replica set `{n}`"),
                ),
            });
        }
    }
    Ok(Resume {
        recorded,
        since,
        until,
    })
}

/// Where an interrupted dump resumes: after its last complete entry (an incomplete
/// one at the end is dropped, with a warning).
fn resume_point(
    req: &DumpRequest,
    paths: &DumpPaths,
    obs: &mut dyn DumpObserver,
) -> Result<ResumePoint, DumpError> {
    let rp = scan_partial(&paths.partial, req.gzip)?;
    if rp.cut_bytes > 0 {
        obs.warning(&format!(
            "`{}`: dropping the last {} (an incomplete {}); {} kept",
            paths.partial.display(),
            crate::table::counted(rp.cut_bytes, "byte", "bytes"),
            if req.gzip { "gzip member" } else { "entry" },
            crate::table::counted(rp.entries, "complete entry", "complete entries")
        ));
    }
    Ok(rp)
}

/// Is everything still needed in the server's oplog window? Only matters when
/// something is left to read; refused unless `--allow-gap`, which warns instead.
/// `partial`: the file a resumed dump continues (None for a dump to a bucket,
/// which never resumes).
fn check_window(
    req: &DumpRequest,
    partial: Option<&Path>,
    win: &Window,
    Bounds { since, until, end }: Bounds,
    start: Progress,
    obs: &mut dyn DumpObserver,
) -> Result<(), DumpError> {
    let from = match start.last {
        Some(l) => Some(Lower::Exclusive(l)),
        None => since.map(Lower::Inclusive),
    };
    let Some(from) = from else {
        return Ok(());
    };
    let wanted_more = from.ts() < end && until.is_none_or(|u| from.ts() < u);
    if !wanted_more || covers(win.oldest.ts, from) {
        return Ok(());
    }
    let err = match from {
        Lower::Exclusive(last) => DumpError::ResumeGap {
            partial: partial.map(Path::to_path_buf).unwrap_or_default(),
            last,
            oldest: win.oldest.ts,
        },
        Lower::Inclusive(s) => DumpError::Source(MongoError::SinceRolledOff {
            wanted: s,
            oldest: win.oldest.ts,
        }),
    };
    if !req.allow_gap {
        return Err(err);
    }
    obs.warning(&format!(
        "{err}; continuing with the oldest entry (--allow-gap): the dump has a gap before {}",
        win.oldest.ts
    ));
    Ok(())
}

/// The end of the stream: a complete dump is renamed into place (and its state
/// removed); an interrupted one keeps what is complete, so a resume starts after it.
fn finish(
    dir: &Path,
    paths: &DumpPaths,
    plan: DumpPlan,
    streamed: Result<Progress, StreamError<io::Error>>,
    mut sink: OutSink<'_>,
    resume_point: Option<ResumePoint>,
    start: Progress,
) -> Result<DumpOutcome, DumpError> {
    match streamed {
        Ok(p) => {
            let file_bytes = sink.out.finish().map_err(io_err("write", &paths.partial))?;
            fs::rename(&paths.partial, &paths.complete)
                .map_err(io_err("rename", &paths.partial))?;
            let _ = fs::remove_file(&paths.state);
            sync_dir(dir);
            Ok(DumpOutcome {
                at: paths.complete.display().to_string(),
                entries: p.entries,
                bson_bytes: p.bytes,
                file_bytes,
                first: resume_point.as_ref().and_then(|rp| rp.first).or(sink.first),
                last: p.last,
                plan,
            })
        }
        Err(StreamError::Sink(e)) => Err(io_err("write", &paths.partial)(e)),
        Err(StreamError::Source(cause)) => {
            // Keep what is complete: the resume starts after it.
            let _ = sink.out.sync_complete();
            Err(DumpError::Interrupted {
                partial: paths.partial.clone(),
                reached: reached_at(&cause, start),
                cause: Box::new(cause),
            })
        }
    }
}

/// How far a read that stopped on `cause` got (from `start`, when it does not say).
fn reached_at(cause: &MongoError, start: Progress) -> Reached {
    match cause {
        MongoError::PositionLost { reached, .. }
        | MongoError::RetriesExhausted { reached, .. }
        | MongoError::EndNotReached { reached, .. }
        | MongoError::Read { reached, .. } => *reached,
        _ => start.reached(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_bounds_win_unless_contradicted() {
        let st = Path::new("s.json");
        let rec = Some("10:1".to_string());
        assert_eq!(
            reconcile("--since", None, Some(&rec), st).unwrap(),
            Some(Ts::new(10, 1))
        );
        assert_eq!(
            reconcile("--since", Some(Ts::new(10, 1)), Some(&rec), st).unwrap(),
            Some(Ts::new(10, 1))
        );
        assert!(matches!(
            reconcile("--since", Some(Ts::new(10, 2)), Some(&rec), st),
            Err(DumpError::ResumeMismatch { .. })
        ));
        assert_eq!(
            reconcile("--since", Some(Ts::new(3, 0)), None, st).unwrap(),
            Some(Ts::new(3, 0))
        );
        assert!(matches!(
            reconcile("--since", None, Some(&Some("x".into())), st),
            Err(DumpError::BadState { .. })
        ));
    }

    #[test]
    fn paths_are_named_after_the_format() {
        // The same names with and without --gzip, as mongodump --oplog --gzip.
        let p = DumpPaths::new(Path::new("/d"));
        assert_eq!(p.complete, Path::new("/d/oplog.bson"));
        assert_eq!(p.partial, Path::new("/d/oplog.bson.partial"));
        assert_eq!(p.state, Path::new("/d/oplog.bson.partial.json"));
    }
}
