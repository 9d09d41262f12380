//! Data files (issue 23: snapshot backups): with `PITR_STANDIN_PERSIST=1`, or on a
//! dbpath that already holds the stand-in's files, the stand-in keeps its data on
//! disk the way a WiredTiger replica-set member does where pitr depends on it, so
//! that a copy of its dbpath taken at any moment is a faithful "snapshot backup".
//!
//! - **Checkpoints** hold every collection except `local.oplog.rs`, as of one
//!   timestamp (`standin-checkpoint.bson`, written to a temp name and renamed). A
//!   replica-set member takes a *stable* one on `fsync` and at a clean shutdown.
//! - **The journal** holds the oplog: every entry the member logs is appended to
//!   `journal/standin-oplog.bson` at once, so the oplog is ahead of the checkpoint,
//!   as a real member's is (replicated collections are not journaled in a replica
//!   set, only the oplog and `local` are: `wiredtiger_util.cpp`, `useTableLogging`).
//! - **Start-up on such files**, after `replication_recovery.cpp`:
//!   - with `--replSet`: the checkpoint, then the oplog after it replayed;
//!   - as a standalone: the checkpoint's data and the whole oplog, nothing replayed
//!     (the data is behind the oplog: SERVER-33986); its clean shutdown leaves an
//!     *unstable* checkpoint;
//!   - as a standalone with `recoverFromOplogAsStandalone=true`
//!     (`recoverFromOplogAsStandalone`): from a stable checkpoint, logs 21544
//!     "Recovering from stable timestamp" with `stableTimestamp` and `topOfOplog`,
//!     replays the oplog after it (the recovery applier upserts), logs 21536
//!     "Completed oplog application for recovery", and refuses user writes (`service_context.h`
//!     `userWritesAllowed`: "disallowed when starting with ... recoverFromOplogAsStandalone";
//!     `serverStatus.storageEngine.readOnly` says so). From an unstable checkpoint
//!     it only starts with `takeUnstableCheckpointOnShutdown=true` (21537/21538, no
//!     recovery: the unstable checkpoint is up to date), else fatal 31229 "Cannot use
//!     'recoverFromOplogAsStandalone' without a stable checkpoint" (exit 14). Its
//!     clean shutdown checkpoints (unstable) only with `takeUnstableCheckpointOnShutdown`.
//!
//! Marker files (`WiredTiger`, `WiredTiger.wt`, `WiredTiger.turtle`,
//! `_mdb_catalog.wt`, `storage.bson`) are written so that pitr recognises the
//! directory by the same files as a real dbpath; they hold no data. As a real
//! mongod, the stand-in holds its pid in `mongod.lock` while it runs and empties it
//! at a clean shutdown (`mod.rs`), so a copy taken while it runs (or after a kill)
//! is crash-consistent by its lock file; and it starts an
//! FTDC archive file in `diagnostic.data/` whose metadata document names its
//! `buildInfo.version` (`src/mongo/db/ftdc/README.md`), as a real one does at every
//! start.

use super::applyops::apply_entry;
use super::state::State;
use super::store::{Collection, Store};
use bson::{doc, Bson, Document, Timestamp};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

pub const CHECKPOINT: &str = "standin-checkpoint.bson";
pub const JOURNAL: &str = "journal/standin-oplog.bson";

/// What a start-up found in the dbpath.
pub struct Loaded {
    pub store: Store,
    pub checkpoint_ts: Timestamp,
    pub stable: bool,
    pub oplog: Vec<Document>,
}

/// The files of a persisting stand-in.
#[derive(Debug)]
pub struct Persist {
    pub dbpath: PathBuf,
    journal: File,
}

/// How this start uses the files, from the options (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartMode {
    Member,
    Standalone,
    Recovery { take_unstable_on_shutdown: bool },
}

/// Whether this dbpath is persisted (it holds a checkpoint), or should become one.
pub fn wanted(dbpath: &Path) -> bool {
    dbpath.join(CHECKPOINT).is_file()
        || std::env::var("PITR_STANDIN_PERSIST").is_ok_and(|v| v == "1")
}

fn ts_of(e: &Document) -> Timestamp {
    match e.get("ts") {
        Some(Bson::Timestamp(t)) => *t,
        _ => Timestamp {
            time: 0,
            increment: 0,
        },
    }
}

fn key(t: Timestamp) -> (u32, u32) {
    (t.time, t.increment)
}

fn show(t: Timestamp) -> serde_json::Value {
    serde_json::json!({"$timestamp": {"t": t.time, "i": t.increment}})
}

/// Writes the marker files a WiredTiger dbpath has, when absent.
pub fn write_markers(dbpath: &Path) -> io::Result<()> {
    fs::create_dir_all(dbpath.join("journal"))?;
    let text = [
        ("WiredTiger", "WiredTiger\nWiredTiger 11.2.0: (pitr stand-in: no data in this file)\n"),
        (
            "WiredTiger.turtle",
            "WiredTiger version string\nWiredTiger 11.2.0: (pitr stand-in)\nWiredTiger version\nmajor=11,minor=2,patch=0\n\
             file:WiredTiger.wt\naccess_pattern_hint=none,encryption=(keyid=,name=),format=btree\n",
        ),
        ("WiredTiger.wt", "pitr stand-in: the data is in standin-checkpoint.bson\n"),
        ("_mdb_catalog.wt", "pitr stand-in: the catalog is in standin-checkpoint.bson\n"),
    ];
    for (name, body) in text {
        let p = dbpath.join(name);
        if !p.exists() {
            fs::write(p, body)?;
        }
    }
    let meta = dbpath.join("storage.bson");
    if !meta.exists() {
        let d = doc! {"storage": {"engine": "wiredTiger", "options": {"directoryPerDB": false, "directoryForIndexes": false}}};
        fs::write(meta, bson::to_vec(&d).map_err(io::Error::other)?)?;
    }
    Ok(())
}

/// Reads the checkpoint and the journal's oplog; `None` when there is no checkpoint.
pub fn load(dbpath: &Path) -> io::Result<Option<Loaded>> {
    let path = dbpath.join(CHECKPOINT);
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut r = BufReader::new(f);
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    let header = crate::bsonfile::next_doc(&mut r)?.ok_or_else(|| bad("empty"))?;
    let checkpoint_ts = match header.get("checkpointTimestamp") {
        Some(Bson::Timestamp(t)) => *t,
        _ => return Err(bad("no checkpointTimestamp")),
    };
    let stable = header.get_bool("stable").unwrap_or(false);
    let mut store = Store::default();
    while let Some(h) = crate::bsonfile::next_doc(&mut r)? {
        let (Ok(db), Ok(name), Ok(n)) = (h.get_str("db"), h.get_str("coll"), h.get_i64("count"))
        else {
            return Err(bad("a collection header without db, coll or count"));
        };
        let uuid = match h.get("uuid") {
            Some(Bson::Binary(b)) => b.to_uuid().map_err(|_| bad("a bad uuid"))?,
            _ => return Err(bad("a collection without uuid")),
        };
        let mut c =
            Collection::with_uuid(h.get_document("options").cloned().unwrap_or_default(), uuid);
        if let Ok(ix) = h.get_array("indexes") {
            c.indexes = ix.iter().filter_map(|i| i.as_document().cloned()).collect();
        }
        for _ in 0..n {
            let d = crate::bsonfile::next_doc(&mut r)?.ok_or_else(|| bad("cut short"))?;
            let _ = c.insert(d);
        }
        store.put(db, name, c);
    }
    let journal = dbpath.join(JOURNAL);
    let oplog = if journal.is_file() {
        crate::bsonfile::read_all(&journal, false)?
    } else {
        Vec::new()
    };
    Ok(Some(Loaded {
        store,
        checkpoint_ts,
        stable,
        oplog,
    }))
}

/// Writes a checkpoint of `store` (without the oplog) as of `ts`.
pub fn checkpoint(dbpath: &Path, store: &Store, ts: Timestamp, stable: bool) -> io::Result<()> {
    let tmp = dbpath.join(format!("{CHECKPOINT}.tmp"));
    let mut w = io::BufWriter::new(File::create(&tmp)?);
    let put = |w: &mut io::BufWriter<File>, d: &Document| d.to_writer(w).map_err(io::Error::other);
    put(&mut w, &doc! {"checkpointTimestamp": ts, "stable": stable})?;
    for (db, colls) in &store.dbs {
        for (name, c) in colls {
            if db == "local" && name == "oplog.rs" {
                continue;
            }
            put(
                &mut w,
                &doc! {"db": db, "coll": name, "uuid": bson::Binary::from_uuid(c.uuid), "options": c.options.clone(),
                "indexes": c.indexes.iter().cloned().map(Bson::Document).collect::<Vec<_>>(), "count": c.len() as i64},
            )?;
            for (_, d) in c.iter() {
                put(&mut w, d)?;
            }
        }
    }
    let f = w.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    fs::rename(&tmp, dbpath.join(CHECKPOINT))
}

impl Persist {
    pub fn open(dbpath: &Path) -> io::Result<Persist> {
        write_markers(dbpath)?;
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dbpath.join(JOURNAL))?;
        Ok(Persist {
            dbpath: dbpath.to_path_buf(),
            journal,
        })
    }

    /// Appends one oplog entry to the journal (written through at once: a copy of
    /// the dbpath taken right after holds it).
    pub fn journal(&mut self, e: &Document) {
        if let Ok(b) = bson::to_vec(e) {
            let _ = self.journal.write_all(&b);
        }
    }
}

/// Start-up on persisted files (or fresh ones that should persist): loads them into
/// `st` as `mode` says. `Err(exit code)` for the fatal cases.
pub fn start(st: &mut State, dbpath: &Path, mode: StartMode) -> Result<(), i32> {
    let loaded = match load(dbpath) {
        Ok(l) => l,
        Err(e) => {
            st.logger.error(
                "STORAGE",
                22435,
                "initandlisten",
                "WiredTiger error",
                serde_json::json!({"error": e.to_string()}),
            );
            return Err(100);
        }
    };
    // Fresh files: nothing to recover, the member starts empty.
    if let Some(l) = loaded {
        restore(st, l, mode)?;
    }
    let opened = Persist::open(dbpath).and_then(|p| {
        ftdc_archive(dbpath, &st.version.to_string())?;
        Ok(p)
    });
    match opened {
        Ok(p) => st.persist = Some(p),
        Err(e) => {
            st.logger.error(
                "STORAGE",
                22435,
                "initandlisten",
                "WiredTiger error",
                serde_json::json!({"error": e.to_string()}),
            );
            return Err(100);
        }
    }
    Ok(())
}

fn restore(st: &mut State, l: Loaded, mode: StartMode) -> Result<(), i32> {
    // The data of the checkpoint over what a fresh server has (its startup_log, ...).
    for (db, colls) in l.store.dbs {
        for (name, c) in colls {
            st.store.put(&db, &name, c);
        }
    }
    st.ensure_oplog();
    let top = l
        .oplog
        .iter()
        .map(ts_of)
        .max_by_key(|t| key(*t))
        .unwrap_or(l.checkpoint_ts);
    let after: Vec<Document> = l
        .oplog
        .iter()
        .filter(|e| key(ts_of(e)) > key(l.checkpoint_ts))
        .cloned()
        .collect();
    st.seed_oplog(l.oplog);
    if key(top) > key(st.last_ts) {
        st.last_ts = top;
    }
    let logger = st.logger.clone();
    match mode {
        StartMode::Standalone => {
            st.last_checkpoint = Some((l.checkpoint_ts, l.stable));
            return Ok(());
        }
        StartMode::Recovery {
            take_unstable_on_shutdown,
        } if !l.stable => {
            if !take_unstable_on_shutdown {
                logger.log(
                    "F",
                    "REPL",
                    31229,
                    "initandlisten",
                    "Cannot use 'recoverFromOplogAsStandalone' without a stable checkpoint",
                    serde_json::Value::Null,
                );
                return Err(14);
            }
            logger.info("REPL", 21537, "initandlisten", "Recovering from unstable checkpoint with 'takeUnstableCheckpointOnShutdown'. Confirming that no oplog recovery is needed", serde_json::Value::Null);
            logger.info("REPL", 21538, "initandlisten", "Not doing any oplog recovery since there is an unstable checkpoint that is up to date", serde_json::Value::Null);
            st.read_only = true;
            return Ok(());
        }
        StartMode::Recovery { .. } | StartMode::Member => {}
    }
    logger.info(
        "REPL",
        21544,
        "initandlisten",
        "Recovering from stable timestamp",
        serde_json::json!({"stableTimestamp": show(l.checkpoint_ts), "topOfOplog": {"ts": show(top), "t": st.term}}),
    );
    st.replaying = true;
    let mut applied = 0u64;
    for e in &after {
        if apply_entry(st, e, true).is_err() {
            st.replaying = false;
            logger.log("F", "REPL", 21570, "initandlisten", "Caught exception during replication recovery", serde_json::json!({"entry": bson::Bson::Document(e.clone()).into_relaxed_extjson()}));
            return Err(14);
        }
        applied += 1;
    }
    st.replaying = false;
    logger.info(
        "REPL",
        21536,
        "initandlisten",
        "Completed oplog application for recovery",
        serde_json::json!({"numOpsApplied": applied, "numBatches": u64::from(applied > 0), "applyThroughOpTime": {"ts": show(top), "t": st.term}}),
    );
    if matches!(mode, StartMode::Recovery { .. }) {
        st.read_only = true;
    }
    Ok(())
}

/// A new `diagnostic.data/metrics.<UTC time>-00000` archive file holding the
/// metadata document (type 0) a real mongod writes first: `buildInfo` among the
/// rotate collectors' results.
fn ftdc_archive(dbpath: &Path, version: &str) -> io::Result<()> {
    let dir = dbpath.join("diagnostic.data");
    fs::create_dir_all(&dir)?;
    let now = bson::DateTime::now();
    let name = now
        .try_to_rfc3339_string()
        .map_err(io::Error::other)?
        .replace(':', "-");
    let name = format!("metrics.{}Z-00000", &name[..19]);
    let meta = doc! {
        "_id": now,
        "type": 0,
        "doc": {
            "start": now,
            "buildInfo": {"start": now, "version": version, "gitVersion": "pitr-standin", "end": now},
            "getCmdLineOpts": {"start": now, "argv": ["mongod"], "end": now},
            "end": now,
        },
    };
    fs::write(
        dir.join(name),
        bson::to_vec(&meta).map_err(io::Error::other)?,
    )
}

/// At a clean shutdown: the checkpoint this kind of start leaves (see the module
/// comment).
pub fn shutdown(st: &State, mode: StartMode) {
    let Some(p) = &st.persist else { return };
    let take = match mode {
        StartMode::Member => Some(true),
        StartMode::Standalone => Some(false),
        StartMode::Recovery {
            take_unstable_on_shutdown: true,
        } => Some(false),
        StartMode::Recovery {
            take_unstable_on_shutdown: false,
        } => None,
    };
    if let Some(stable) = take {
        if let Err(e) = checkpoint(&p.dbpath, &st.store, st.last_ts, stable) {
            st.logger.error(
                "STORAGE",
                22435,
                "SignalHandler",
                "WiredTiger error",
                serde_json::json!({"error": e.to_string()}),
            );
        }
    }
}

/// `fsync` on a member: a stable checkpoint now.
pub fn fsync(st: &mut State) -> io::Result<()> {
    let Some(p) = &st.persist else { return Ok(()) };
    if st.read_only {
        return Ok(());
    }
    let stable = st.mode == super::state::Mode::Replset;
    checkpoint(&p.dbpath, &st.store, st.last_ts, stable)?;
    st.last_checkpoint = Some((st.last_ts, stable));
    Ok(())
}
