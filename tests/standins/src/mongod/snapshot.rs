//! Snapshot reads: `find`, `aggregate` and `distinct` with `readConcern: {level:
//! "snapshot"[, atClusterTime: T]}` answered from the data as it was at `T`, as
//! `pitr rehearse` reads production.
//!
//! **History.** The server keeps a base state (its data without `local`, as of
//! `base_ts`) and every entry it logged itself since (its own oplog, kept apart from
//! `local.oplog.rs`, which tests may also seed with entries that never touched the
//! data; kept as BSON bytes, parsed only to rebuild a state). The state at `T` is:
//!
//! - the live data itself when no entry was logged after `T` (nothing changed since:
//!   no copy, what a rehearsal at the newest point reads);
//! - else the base with the entries up to `T` applied by the same code as `applyOps`
//!   ([`super::applyops::apply_entry`]), with logging off, built once: the last
//!   state built is cached (one, for one `T`), so one rehearsal builds it once.
//!
//! So the data is held once, its history once as bytes, plus at most one state
//! built for a past `T` (`scripts/bench-rehearse.sh` prints the stand-in's peak RSS).
//!
//! **The window.** Like WiredTiger's oldest timestamp, the oldest readable point is
//! `minSnapshotHistoryWindowInSeconds` (a `--setParameter`, default 300) before the
//! newest write, and never before the server started; entries older than that are
//! folded into the base. Rules, each after the server source:
//!
//! - `T` before the oldest readable point: 239 SnapshotTooOld "Read timestamp
//!   Timestamp(t, i) is older than the oldest available timestamp."
//!   (`src/mongo/db/storage/wiredtiger/wiredtiger_recovery_unit.cpp`,
//!   `_txnOpen`, `ReadSource::kProvided`);
//! - `T` after the current cluster time: 72 InvalidOptions "readConcern atClusterTime
//!   value must not be greater than the current clusterTime. Requested clusterTime:
//!   ...; current clusterTime: ..." (`src/mongo/db/read_concern_mongod.cpp`,
//!   `waitForReadConcernImpl`);
//! - no `atClusterTime`: the newest point, echoed back as `atClusterTime` in the
//!   cursor (`jstests/noPassthrough/readConcern_snapshot.js`: "readConcern 'snapshot'
//!   is supported by find outside of transactions", the reply's cursor has
//!   `atClusterTime`, and so does a `getMore`'s);
//! - not a replica set: 123 NotAReplicaSet "node needs to be a replica set member to
//!   use readConcern: snapshot" (`read_concern_mongod.cpp`);
//! - `getMore` carrying the session's snapshot read concern (drivers send it on every
//!   command of a snapshot session): accepted, the cursor reads on as of its point;
//! - a command other than `find`/`aggregate`/`distinct`/`getMore`: 72 InvalidOptions (the same jstest: `count`, `listCollections`,
//!   `listIndexes`, `listDatabases` with snapshot fail with InvalidOptions; the
//!   message is the stand-in's);
//! - a capped collection: 246 SnapshotUnavailable
//!   (`jstests/noPassthrough/snapshot_reads_capped_collection.js`; the message is the
//!   stand-in's);
//! - a release before 5.0 ([`super::version::ServerVersion::snapshot_reads_outside_transactions`]):
//!   72 InvalidOptions "readConcern level snapshot is only valid in multi-statement
//!   transactions" (`src/mongo/db/service_entry_point_common.cpp`, the check on
//!   `kSnapshotReadConcern` outside a transaction; 4.2/4.4 jstests such as
//!   `readConcern_snapshot_mongos.js` expect InvalidOptions for "readConcern
//!   'snapshot' is not allowed outside transaction context").

use super::applyops::{apply_entry, OpError};
use super::state::{CmdError, CmdResult, Mode, State};
use super::store::Store;
use bson::{Bson, Document, RawDocumentBuf, Timestamp};

/// The base state, the entries logged since, and the last state built.
#[derive(Debug)]
pub struct History {
    base: Store,
    base_ts: Timestamp,
    /// As BSON bytes: a parsed copy of every entry would cost several times more.
    entries: Vec<RawDocumentBuf>,
    cached: Option<(Timestamp, Store)>,
    /// Snapshot reads answered (for the `history-lost-after-reads` fault).
    reads: u64,
}

fn without_local(store: &Store) -> Store {
    let mut s = store.clone();
    s.dbs.remove("local");
    s
}

fn ts_of(e: &RawDocumentBuf) -> Timestamp {
    e.get_timestamp("ts").unwrap_or(Timestamp {
        time: 0,
        increment: 0,
    })
}

fn key(t: Timestamp) -> (u32, u32) {
    (t.time, t.increment)
}

/// `Timestamp(t, i)`, as the server's `Timestamp::toString` writes it.
pub fn show(t: Timestamp) -> String {
    format!("Timestamp({}, {})", t.time, t.increment)
}

impl Default for History {
    fn default() -> History {
        History::starting(
            &Store::default(),
            Timestamp {
                time: 0,
                increment: 0,
            },
        )
    }
}

impl History {
    /// History starts now: the data as it is, at `now`.
    pub fn starting(store: &Store, now: Timestamp) -> History {
        History {
            base: without_local(store),
            base_ts: now,
            entries: Vec::new(),
            cached: None,
            reads: 0,
        }
    }

    /// An entry this server just logged.
    pub fn record(&mut self, entry: &Document) {
        if let Ok(raw) = RawDocumentBuf::from_document(entry) {
            self.entries.push(raw);
        }
    }

    /// Whether nothing was logged after `t`: the live data is the state at `t`.
    fn unchanged_since(&self, t: Timestamp) -> bool {
        self.entries.last().is_none_or(|e| key(ts_of(e)) <= key(t))
    }
}

/// The `atClusterTime` a snapshot read asks for (`None` when the command does not ask
/// for a snapshot read), after every check in the module documentation except the
/// collection's own (capped, see [`run_at`]).
pub fn requested(st: &mut State, name: &str, cmd: &Document) -> CmdResult<Option<Timestamp>> {
    let Ok(rc) = cmd.get_document("readConcern") else {
        return Ok(None);
    };
    let level = rc.get_str("level").ok();
    let at = match rc.get("atClusterTime") {
        None => None,
        Some(Bson::Timestamp(t)) => Some(*t),
        Some(_) => {
            return Err(CmdError::type_mismatch(
                "BSON field 'atClusterTime' is the wrong type, expected type 'timestamp'",
            ))
        }
    };
    if level != Some("snapshot") {
        if at.is_some() {
            // `ReadConcernArgs::parse` (`src/mongo/db/repl/read_concern_args.cpp`).
            return Err(CmdError::new(
                72,
                "InvalidOptions",
                "atClusterTime field can be set only if level is equal to snapshot",
            ));
        }
        return Ok(None);
    }
    if name == "getMore" {
        // A driver sends a snapshot session's read concern with every command of the
        // session, getMore included (the driver specification
        // `source/sessions/snapshot-sessions.rst`, "Sending readConcern to the server on
        // all commands"); the getMore reads on from its cursor, which keeps the point it
        // was opened at (`getmore_cmd.cpp`: "Uses the readConcern setting from whatever
        // created the cursor"). The reply is stamped by the caller from that cursor.
        return Ok(None);
    }
    if !st.version.snapshot_reads_outside_transactions() {
        return Err(CmdError::new(
            72,
            "InvalidOptions",
            "readConcern level snapshot is only valid in multi-statement transactions",
        ));
    }
    if st.mode != Mode::Replset {
        return Err(CmdError::new(
            123,
            "NotAReplicaSet",
            "node needs to be a replica set member to use readConcern: snapshot",
        ));
    }
    if !matches!(name, "find" | "aggregate" | "distinct") {
        return Err(CmdError::new(
            72,
            "InvalidOptions",
            format!("Command {name} does not support read concern {{ level: \"snapshot\" }}"),
        ));
    }
    let now = st.last_ts;
    let t = at.unwrap_or(now);
    if key(t) > key(now) {
        return Err(CmdError::new(
            72,
            "InvalidOptions",
            format!(
                "readConcern atClusterTime value must not be greater than the current clusterTime. Requested clusterTime: {}; current clusterTime: {}",
                show(t),
                show(now)
            ),
        ));
    }
    // Fault: the history older than the newest point is gone.
    st.history.reads += 1;
    if let Some(n) = st.faults.history_lost_after_reads() {
        if st.history.reads > n {
            st.history.base_ts = now;
        }
    }
    let oldest = fold_expired(st)?;
    if key(t) < key(oldest) {
        return Err(CmdError::new(
            239,
            "SnapshotTooOld",
            format!(
                "Read timestamp {} is older than the oldest available timestamp.",
                show(t)
            ),
        ));
    }
    Ok(Some(t))
}

/// The oldest readable point now; entries older than it are folded into the base.
fn fold_expired(st: &mut State) -> CmdResult<Timestamp> {
    let window = match st.params.get("minSnapshotHistoryWindowInSeconds") {
        Some(Bson::Int32(n)) => (*n).max(0) as u32,
        Some(Bson::Int64(n)) => (*n).clamp(0, u32::MAX as i64) as u32,
        _ => 300,
    };
    let newest = st.last_ts;
    let by_window = Timestamp {
        time: newest.time.saturating_sub(window),
        increment: 0,
    };
    let oldest = if key(by_window) > key(st.history.base_ts) {
        by_window
    } else {
        st.history.base_ts
    };
    let n = st
        .history
        .entries
        .iter()
        .take_while(|e| key(ts_of(e)) < key(oldest))
        .count();
    if n > 0 || key(oldest) > key(st.history.base_ts) {
        let folded: Vec<RawDocumentBuf> = st.history.entries.drain(..n).collect();
        let mut base = std::mem::take(&mut st.history.base);
        let r = apply_all(st, &mut base, &folded);
        st.history.base = base;
        r?;
        st.history.base_ts = oldest;
        if st
            .history
            .cached
            .as_ref()
            .is_some_and(|(t, _)| key(*t) < key(oldest))
        {
            st.history.cached = None;
        }
    }
    Ok(oldest)
}

/// Applies `entries` to `target` with this server's applyOps code, logging nothing.
fn apply_all(st: &mut State, target: &mut Store, entries: &[RawDocumentBuf]) -> CmdResult<()> {
    std::mem::swap(&mut st.store, target);
    st.replaying = true;
    let mut result = Ok(());
    for e in entries {
        let applied = match e.to_document() {
            Ok(d) => apply_entry(st, &d, false).map_err(|err| {
                let (OpError::Abort(c) | OpError::Failed(c)) = err;
                c
            }),
            Err(err) => Err(CmdError::new(
                8,
                "UnknownError",
                format!("a bad entry: {err}"),
            )),
        };
        if let Err(c) = applied {
            result = Err(CmdError::new(
                8,
                "UnknownError",
                format!(
                    "pitr stand-in mongod: cannot rebuild its history at {}: {} ({})",
                    show(ts_of(e)),
                    c.msg,
                    c.name
                ),
            ));
            break;
        }
    }
    st.replaying = false;
    std::mem::swap(&mut st.store, target);
    result
}

/// The data as of `t` (at or after the base, checked by [`requested`]).
fn state_at(st: &mut State, t: Timestamp) -> CmdResult<Store> {
    if let Some((ct, store)) = st.history.cached.take() {
        if key(ct) == key(t) {
            return Ok(store);
        }
    }
    let mut store = st.history.base.clone();
    // Lent out while they are applied (nothing is logged meanwhile: `replaying`).
    let entries = std::mem::take(&mut st.history.entries);
    let upto = entries
        .iter()
        .take_while(|e| key(ts_of(e)) <= key(t))
        .count();
    let r = apply_all(st, &mut store, &entries[..upto]);
    st.history.entries = entries;
    r?;
    Ok(store)
}

/// Runs `f` (the command) against the data as of `t`, and adds `atClusterTime` to
/// the reply (in its cursor, or at the top for `distinct`). `coll` is the collection
/// read: a capped one is refused, as the server refuses snapshot reads on them.
pub fn run_at<T>(
    st: &mut State,
    t: Timestamp,
    db: &str,
    coll: &str,
    f: impl FnOnce(&mut State) -> CmdResult<T>,
) -> CmdResult<T> {
    if db != "local" && st.history.unchanged_since(t) {
        // Nothing changed since `t`: read the live data, without a copy.
        if st.store.get(db, coll).is_some_and(|c| c.is_capped()) {
            return Err(capped(db, coll));
        }
        return f(st);
    }
    let mut store = state_at(st, t)?;
    if store.get(db, coll).is_some_and(|c| c.is_capped()) {
        st.history.cached = Some((t, store));
        return Err(capped(db, coll));
    }
    std::mem::swap(&mut st.store, &mut store);
    let out = f(st);
    std::mem::swap(&mut st.store, &mut store);
    st.history.cached = Some((t, store));
    out
}

fn capped(db: &str, coll: &str) -> CmdError {
    CmdError::new(
        246,
        "SnapshotUnavailable",
        format!(
            "Reading from capped collection {db}.{coll} with readConcern snapshot is not supported"
        ),
    )
}

/// Adds `atClusterTime: t` where the server puts it.
pub fn stamp(reply: &mut Document, t: Timestamp) {
    match reply.get_mut("cursor") {
        Some(Bson::Document(c)) => {
            c.insert("atClusterTime", t);
        }
        _ => {
            reply.insert("atClusterTime", t);
        }
    }
}
