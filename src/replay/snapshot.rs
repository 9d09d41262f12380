//! Snapshot backups through a spare mongod (issue 23): the steps before the usual
//! plan ([`prepare`]): a copy of the files in the work dir, the recovery start that
//! makes their data and their oplog agree, and a dump of the recovered copy (the
//! logical backup at its end). `pitr replay --engine mongod` runs them
//! (`cli/replay_snapshot.rs`), then the usual steps with the spare on the recovered
//! copy. Tested against the stand-in mongod's data files in
//! `tests/snapshot_recovery.rs`.
//!
//! 1. **Copy** ([`copy`]): the snapshot is never written, so the spare runs on a copy:
//!    each file reflinked where the file system can (a copy-on-write clone costs no
//!    space or time), else copied; a tar is unpacked. `mongod.lock` is left out (it
//!    belongs to the process the files came from).
//! 2. **Recover** ([`recover`]): a loopback mongod on the copy with
//!    `recoverFromOplogAsStandalone=true` and `takeUnstableCheckpointOnShutdown=true`
//!    and no `--replSet`: it replays the oplog from the files' stable checkpoint to
//!    the top of the oplog and refuses user writes (`replication_recovery.cpp`,
//!    `recoverFromOplogAsStandalone`; `service_context.h`, `userWritesAllowed`); the
//!    top of the oplog is then where the data is complete: the backup's end. A
//!    server that is not read-only ignored the parameter and is refused, as are files
//!    of a member caught in initial sync (`local.replset.minvalid`'s
//!    `initialSyncFlag`: `replication_consistency_markers_impl.cpp`; recovery skips
//!    such files, "No recovery needed. Initial sync flag set"). A clean shutdown then
//!    checkpoints the recovered state, so a plain start on the copy has it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bson::doc;

use crate::backup::snapshot::{Packaging, Snapshot};
use crate::error::Failure;
use crate::exec::spare::{SpareMongod, SpareOptions};
use crate::exec::Cancel;
use crate::oplog::Ts;
use crate::stream::ByteCounter;

/// What the copy cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copied {
    /// The dbpath to start on (inside the destination).
    pub dbpath: PathBuf,
    pub files: u64,
    /// Bytes written; reflinked files count none.
    pub bytes_copied: u64,
    pub reflinked: u64,
}

/// Copies (or unpacks) the snapshot's files into `dest` (created; must not exist).
/// `counter` advances by the bytes read from the snapshot (a tar's bytes as stored),
/// for progress; `cancel` (Ctrl-C) stops it between two chunks of 8 MiB, and what
/// was copied is removed.
pub fn copy(
    s: &Snapshot,
    dest: &Path,
    cancel: &Cancel,
    counter: &ByteCounter,
) -> Result<Copied, Failure> {
    let fail = |what: &str, p: &Path, e: io::Error| {
        if cancel.is_cancelled() {
            return Failure::new(format!(
                "interrupted while copying the snapshot into `{}`",
                dest.display()
            ))
            .with_exit_code(cancel.exit_code().unwrap_or(130));
        }
        Failure::new(format!("cannot {what} `{}`: {e}", p.display()))
            .with_hint("check the space and permissions of the work dir (--workdir)")
    };
    if dest.exists() {
        return Err(Failure::new(format!("`{}` already exists", dest.display()))
            .with_hint("give an empty --workdir"));
    }
    fs::create_dir_all(dest).map_err(|e| fail("create", dest, e))?;
    let mut c = Copied {
        dbpath: dest.to_path_buf(),
        files: 0,
        bytes_copied: 0,
        reflinked: 0,
    };
    let w = Watch { cancel, counter };
    let done = match s.packaging {
        Packaging::Directory => {
            copy_tree(&s.path, dest, &mut c, &w).map_err(|(p, e)| fail("copy", &p, e))
        }
        Packaging::Tar { .. } => {
            unpack(&s.path, dest, &mut c, &w).map_err(|e| fail("unpack", &s.path, e))
        }
    };
    if let Err(e) = done {
        let _ = fs::remove_dir_all(dest);
        return Err(e);
    }
    if let Packaging::Tar { .. } = s.packaging {
        c.dbpath = dbpath_in(dest).ok_or_else(|| {
            Failure::new(format!(
                "the tar `{}` holds no dbpath (storage.bson or WiredTiger.wt) at its top or one directory down",
                s.path.display()
            ))
        })?;
    }
    Ok(c)
}

/// What a copy reports to and listens to.
struct Watch<'a> {
    cancel: &'a Cancel,
    counter: &'a ByteCounter,
}

impl Watch<'_> {
    /// A reader that counts what it reads and fails once Ctrl-C was pressed (not with
    /// `ErrorKind::Interrupted`, which readers retry).
    fn reader<R: io::Read>(&self, r: R) -> Stoppable<crate::stream::CountingRead<R>> {
        Stoppable {
            inner: crate::stream::CountingRead::new(r, self.counter.clone()),
            cancel: self.cancel.clone(),
        }
    }
}

struct Stoppable<R> {
    inner: R,
    cancel: Cancel,
}

impl<R: io::Read> io::Read for Stoppable<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(io::Error::other("interrupted"));
        }
        // Chunks of at most 8 MiB, so that Ctrl-C is seen soon on a slow disk.
        let n = buf.len().min(8 << 20);
        self.inner.read(&mut buf[..n])
    }
}

fn copy_tree(
    from: &Path,
    to: &Path,
    c: &mut Copied,
    w: &Watch<'_>,
) -> Result<(), (PathBuf, io::Error)> {
    let entries = fs::read_dir(from).map_err(|e| (from.to_path_buf(), e))?;
    for e in entries {
        let e = e.map_err(|e| (from.to_path_buf(), e))?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type().map_err(|er| (src.clone(), er))?;
        if t.is_dir() {
            fs::create_dir(&dst).map_err(|er| (dst.clone(), er))?;
            copy_tree(&src, &dst, c, w)?;
        } else if t.is_file() && e.file_name() != "mongod.lock" {
            copy_file(&src, &dst, c, w).map_err(|er| (src.clone(), er))?;
            c.files += 1;
        }
    }
    Ok(())
}

/// A reflink (copy-on-write clone: no space, no time) where the file system can,
/// else the bytes, in chunks that [`Watch`] counts and can stop.
fn copy_file(src: &Path, dst: &Path, c: &mut Copied, w: &Watch<'_>) -> io::Result<()> {
    if w.cancel.is_cancelled() {
        return Err(io::Error::other("interrupted"));
    }
    if reflink_copy::reflink(src, dst).is_ok() {
        c.reflinked += 1;
        return Ok(());
    }
    let from = fs::File::open(src)?;
    let perms = from.metadata()?.permissions();
    let mut to = fs::File::create(dst)?;
    c.bytes_copied += io::copy(&mut w.reader(from), &mut to)?;
    to.set_permissions(perms)
}

/// Unpacks a tar (plain or gzip, by content) under `dest`; the tar crate refuses
/// entries that would land outside it.
fn unpack(tar_path: &Path, dest: &Path, c: &mut Copied, w: &Watch<'_>) -> io::Result<()> {
    let f = w.reader(fs::File::open(tar_path)?);
    let (r, _) = crate::oplog::source::decompressed(&tar_path.to_string_lossy(), f)
        .map_err(io::Error::other)?;
    let mut a = tar::Archive::new(r);
    for entry in a.entries()? {
        let mut entry = entry?;
        if entry
            .path()?
            .file_name()
            .is_some_and(|n| n == "mongod.lock")
        {
            continue;
        }
        if entry.header().entry_type().is_file() {
            c.files += 1;
            c.bytes_copied += entry.size();
        }
        entry.unpack_in(dest)?;
    }
    Ok(())
}

/// `dir` itself or its one subdirectory, whichever holds the dbpath's files.
fn dbpath_in(dir: &Path) -> Option<PathBuf> {
    let is_db = |d: &Path| d.join("storage.bson").is_file() || d.join("WiredTiger.wt").is_file();
    if is_db(dir) {
        return Some(dir.to_path_buf());
    }
    let subdirs: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    match subdirs.as_slice() {
        [one] if is_db(one) => Some(one.clone()),
        _ => None,
    }
}

/// What the recovery start found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The top of the oplog after recovery: the data is complete up to here.
    pub end: Ts,
    /// The stable checkpoint recovery started from (log 21544), when it says.
    pub stable: Option<Ts>,
    pub took: Duration,
}

/// How to run the recovery start.
pub struct RecoverOptions<'a> {
    pub mongod: &'a Path,
    /// Where the spare's temporary directory (its log) goes.
    pub parent_dir: &'a Path,
    pub start_timeout: Duration,
    pub grace: Duration,
}

/// Starts a loopback mongod on the copy `dbpath` with the recovery parameters, reads
/// where the data ends, and stops it cleanly (see the module documentation).
pub async fn recover(
    dbpath: &Path,
    o: &RecoverOptions<'_>,
    cancel: &Cancel,
) -> Result<Recovered, Failure> {
    let t = Instant::now();
    let mut opts = SpareOptions::new(o.mongod);
    opts.parent_dir = Some(o.parent_dir.to_path_buf());
    opts.dbpath = Some(dbpath.to_path_buf());
    opts.start_timeout = o.start_timeout;
    opts.grace = o.grace;
    opts.probe = Some(crate::verify::spare_probe());
    for p in [
        "recoverFromOplogAsStandalone=true",
        "takeUnstableCheckpointOnShutdown=true",
    ] {
        opts.extra_args.push("--setParameter".into());
        opts.extra_args.push(p.into());
    }
    let spare = SpareMongod::start(opts, cancel).await.map_err(|e| {
        Failure::new(format!("the recovery start of mongod on the copy `{}` failed: {e}", dbpath.display()))
            .with_hint("its log says why (shown above); files of another MongoDB version or storage engine, or without their journal, do not recover")
    })?;
    let log = fs::read_to_string(spare.log_path()).unwrap_or_default();
    let found = inspect(&spare.uri()).await;
    let stopped = spare.shutdown(cancel).await;
    let end = found?;
    match stopped {
        Ok(s) if s.clean() => {}
        Ok(s) => {
            return Err(Failure::new(format!(
                "mongod did not stop cleanly after recovering the copy ({}): the recovered state may not be checkpointed",
                s.finished.outcome
            )))
        }
        Err(e) => return Err(Failure::new(format!("stopping the recovery mongod failed: {e}"))),
    }
    Ok(Recovered {
        end,
        stable: stable_timestamp(&log),
        took: t.elapsed(),
    })
}

/// Read-only (the parameter took), not caught in initial sync, and the top of the oplog.
async fn inspect(uri: &str) -> Result<Ts, Failure> {
    let client = crate::verify::connect::connect(uri, Duration::from_secs(10))
        .await
        .map_err(|e| {
            Failure::new(format!(
                "cannot connect to the recovery mongod at {uri}: {e}"
            ))
        })?;
    let top = inspect_with(&client, uri).await;
    crate::verify::connect::close(client).await;
    top
}

/// [`inspect`] on its client.
async fn inspect_with(client: &mongodb::Client, uri: &str) -> Result<Ts, Failure> {
    let q = |e: mongodb::error::Error| {
        Failure::new(format!("reading the recovery mongod at {uri}: {e}"))
    };
    let status = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .map_err(q)?;
    let read_only = status
        .get_document("storageEngine")
        .ok()
        .and_then(|s| s.get_bool("readOnly").ok());
    if read_only != Some(true) {
        return Err(Failure::new(
            "mongod started on the copy without recovering it (serverStatus.storageEngine.readOnly is not true): \
             this mongod does not support recoverFromOplogAsStandalone",
        )
        .with_hint("use a mongod of the version the files came from (4.2 or later)"));
    }
    let local = client.database("local");
    let minvalid = local
        .run_command(doc! {"find": "replset.minvalid", "limit": 1})
        .await
        .map_err(q)?;
    let flagged = first(&minvalid).is_some_and(|d| {
        d.get_bool("initialSyncFlag").unwrap_or(false)
            || d.get_bool("doingInitialSync").unwrap_or(false)
    });
    if flagged {
        return Err(Failure::new(
            "the files come from a member that was in initial sync (local.replset.minvalid has the initial sync flag): \
             their data is not a consistent copy of anything",
        )
        .with_hint("take the snapshot from a member in SECONDARY or PRIMARY state"));
    }
    let top = local
        .run_command(doc! {"find": "oplog.rs", "sort": {"$natural": -1}, "limit": 1})
        .await
        .map_err(q)?;
    match first(&top).and_then(|d| d.get_timestamp("ts").ok()) {
        Some(t) => Ok(Ts::new(t.time, t.increment)),
        None => Err(Failure::new(
            "the copy has no oplog (local.oplog.rs is empty or missing): the files are not a replica-set member's, so \
             where their data ends is unknown",
        )
        .with_hint("restore them by hand and take a mongodump; pass it with --backup and --backup-end")),
    }
}

fn first(reply: &bson::Document) -> Option<bson::Document> {
    reply
        .get_document("cursor")
        .ok()?
        .get_array("firstBatch")
        .ok()?
        .first()?
        .as_document()
        .cloned()
}

/// The `stableTimestamp` of log 21544 "Recovering from stable timestamp".
fn stable_timestamp(log: &str) -> Option<Ts> {
    let line = log.lines().rev().find(|l| l.contains("\"id\":21544"))?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let t = &v["attr"]["stableTimestamp"]["$timestamp"];
    Some(Ts::new(t["t"].as_u64()? as u32, t["i"].as_u64()? as u32))
}

/// A snapshot backup made ready for the usual replay: copied, recovered, and dumped.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub copied: Copied,
    pub recovered: Recovered,
    /// `mongodump` of the recovered copy: the logical backup at [`Recovered::end`],
    /// what the plan reads and the embedded engine rolls forward for the prediction.
    pub dump: PathBuf,
    pub took: Duration,
}

/// What [`prepare`] needs.
pub struct PrepareOptions<'a> {
    pub mongod: &'a Path,
    pub mongodump: &'a Path,
    /// The work dir: the copy goes to `snapshot-db/`, the dump to `snapshot-at-end/`.
    pub work: &'a Path,
    pub start_timeout: Duration,
    pub grace: Duration,
    /// What `mongod --version` said, for the version rules of a tar's files (known
    /// only once unpacked).
    pub mongod_version: Option<&'a str>,
    /// Shows the copy's progress.
    pub progress: &'a dyn crate::plan::Progress,
}

/// Where [`prepare`] puts the copy (the spare's dbpath afterwards) in the work dir.
pub const COPY_DIR: &str = "snapshot-db";
/// Where [`prepare`] puts the dump of the recovered copy in the work dir.
pub const DUMP_DIR: &str = "snapshot-at-end";

/// Copy, recover, then dump the recovered copy from a plain loopback start (stopped
/// cleanly after). `say` gets one line per phase. The copy stays in the work dir: the
/// spare of the replay runs on it.
pub async fn prepare(
    s: &Snapshot,
    o: &PrepareOptions<'_>,
    cancel: &Cancel,
    say: &dyn Fn(&str),
) -> Result<Prepared, Failure> {
    let t = Instant::now();
    let dest = o.work.join(COPY_DIR);
    say(&format!(
        "snapshot: copying {} into {}: {}",
        s.path.display(),
        dest.display(),
        copy_cost(s, &dest)
    ));
    let counter = ByteCounter::default();
    let copied = {
        let _shown = o
            .progress
            .pass("copying the snapshot", counter.clone(), Some(s.bytes));
        copy(s, &dest, cancel, &counter)?
    };
    say(&format!(
        "snapshot: {} files, {} reflinked, {} bytes copied in {:.1} s",
        copied.files,
        copied.reflinked,
        copied.bytes_copied,
        t.elapsed().as_secs_f64()
    ));
    if let Err(e) = recheck(s, &copied, o.mongod_version) {
        let _ = fs::remove_dir_all(&dest);
        return Err(e);
    }
    if cancel.is_cancelled() {
        return Err(Failure::new("interrupted").with_exit_code(cancel.exit_code().unwrap_or(130)));
    }
    say("snapshot: recovery start (recoverFromOplogAsStandalone=true, takeUnstableCheckpointOnShutdown=true)");
    let ro = RecoverOptions {
        mongod: o.mongod,
        parent_dir: o.work,
        start_timeout: o.start_timeout,
        grace: o.grace,
    };
    let recovered = recover(&copied.dbpath, &ro, cancel).await?;
    say(&format!(
        "snapshot: recovered in {:.1} s from the stable checkpoint {}; data and oplog end at {}",
        recovered.took.as_secs_f64(),
        recovered
            .stable
            .map_or("(not logged)".to_string(), |t| t.to_string()),
        recovered.end
    ));
    let dump = o.work.join(DUMP_DIR);
    say(&format!(
        "snapshot: mongodump of the recovered copy into {}",
        dump.display()
    ));
    dump_recovered(&copied.dbpath, &dump, o, cancel).await?;
    Ok(Prepared {
        copied,
        recovered,
        dump,
        took: t.elapsed(),
    })
}

/// What the copy will cost, said before it starts: a reflink (tried on one small
/// file) costs neither time nor space; otherwise every byte is written.
fn copy_cost(s: &Snapshot, dest: &Path) -> String {
    let size = indicatif::HumanBytes(s.bytes);
    match s.packaging {
        Packaging::Tar { gzip } => format!(
            "unpacking a {}tar of {size}, every byte written{}",
            if gzip { "gzip-compressed " } else { "" },
            if gzip {
                " (more than that once uncompressed)"
            } else {
                ""
            }
        ),
        Packaging::Directory => {
            let probe = dest.with_extension("reflink-probe");
            // One of the marker files that made it a snapshot: small, and there.
            let marker = s.markers.first().map_or("storage.bson", String::as_str);
            let reflinks = reflink_copy::reflink(s.path.join(marker), &probe).is_ok();
            let _ = fs::remove_file(&probe);
            let files = s.files.unwrap_or(0);
            if reflinks {
                format!("{files} files, {size}, reflinked (the file system clones them: no time, no space)")
            } else {
                format!("{files} files, {size}, a full copy (this file system cannot reflink); the progress shows the time left")
            }
        }
    }
}

/// A tar's files are known only once unpacked: the refusals of the files
/// ([`Snapshot::refusals`]) and the version rules, on the copy (the lock file and the
/// version as the tar said, since the copy leaves the lock file out).
fn recheck(s: &Snapshot, copied: &Copied, mongod_version: Option<&str>) -> Result<(), Failure> {
    if s.packaging == Packaging::Directory {
        return Ok(());
    }
    let Ok(Some(mut on_disk)) = crate::backup::snapshot::in_dir(&copied.dbpath) else {
        return Ok(());
    };
    on_disk.unclean = s.unclean;
    on_disk.written_by = s.written_by.clone().or(on_disk.written_by);
    let mut why = on_disk.refusals();
    why.extend(super::snapshot_versions::check(mongod_version, &on_disk).refusals);
    if why.is_empty() {
        return Ok(());
    }
    Err(Failure::new(format!(
        "the files unpacked from `{}` cannot be recovered: {}",
        s.path.display(),
        why.join("; ")
    ))
    .with_hint("the copy was removed; take the snapshot again (with its journal, unencrypted) or recover it with a mongod of the files' release")
    .with_exit_code(crate::error::exit::ERROR))
}

/// A plain loopback start on the recovered copy, `mongodump --out dump`, a clean stop.
async fn dump_recovered(
    dbpath: &Path,
    dump: &Path,
    o: &PrepareOptions<'_>,
    cancel: &Cancel,
) -> Result<(), Failure> {
    let mut opts = SpareOptions::new(o.mongod);
    opts.parent_dir = Some(o.work.to_path_buf());
    opts.dbpath = Some(dbpath.to_path_buf());
    opts.start_timeout = o.start_timeout;
    opts.grace = o.grace;
    opts.probe = Some(crate::verify::spare_probe());
    let spare = SpareMongod::start(opts, cancel)
        .await
        .map_err(|e| Failure::new(format!("starting mongod on the recovered copy failed: {e}")))?;
    let log = o.work.join("snapshot-mongodump.log");
    let ran = crate::exec::child::Command::new(o.mongodump)
        .args(["--host", "127.0.0.1", "--port"])
        .arg(spare.port().to_string())
        .arg("--out")
        .arg(dump)
        .log_file(&log)
        .grace(o.grace)
        .run(cancel)
        .await;
    let stopped = spare.shutdown(cancel).await;
    if let Err(e) = ran {
        return Err(Failure::new(format!(
            "mongodump of the recovered copy failed: {e} (see {})",
            log.display()
        )));
    }
    match stopped {
        Ok(s) if s.clean() => Ok(()),
        Ok(s) => Err(Failure::new(format!(
            "mongod on the recovered copy did not stop cleanly ({})",
            s.finished.outcome
        ))),
        Err(e) => Err(Failure::new(format!(
            "stopping mongod on the recovered copy failed: {e}"
        ))),
    }
}
