//! Command dispatch of the stand-in mongod: one function per command, each taking
//! the command document and answering the reply document the real server would.

use super::applyops::apply_ops_command;
use super::insert_rules::fix_document_for_insert;
use super::state::{CmdError, CmdResult, Cursor, CursorKind, Mode, State};
use super::store::split_ns;
use super::views;
use super::writes;
use crate::matcher::{matches, project, sort_records};
use crate::update::{apply_modifiers, is_modifier, replace, upsert_seed};
use bson::{doc, Bson, Document, Timestamp};
use std::borrow::Cow;
use std::collections::VecDeque;

/// What the connection should do with a command's result.
#[derive(Debug)]
pub enum Outcome {
    Reply(Document),
    /// An awaitData getMore found nothing yet: ask again shortly.
    Wait,
    /// Close the socket without replying (fault knob).
    Close,
    /// `shutdown`: close without replying and stop the server.
    Shutdown,
}

/// Per-connection facts.
pub struct Conn {
    pub id: i64,
    pub peer: String,
}

const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

fn ok(mut d: Document) -> Outcome {
    d.insert("ok", 1.0);
    Outcome::Reply(d)
}

fn num(v: Option<&Bson>) -> Option<i64> {
    match v? {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) => Some(*d as i64),
        _ => None,
    }
}

fn truthy(v: Option<&Bson>) -> bool {
    match v {
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        Some(Bson::Null) | None => false,
        Some(_) => true,
    }
}

fn sub_doc(cmd: &Document, key: &str) -> CmdResult<Document> {
    match cmd.get(key) {
        None | Some(Bson::Null) => Ok(Document::new()),
        Some(Bson::Document(d)) => Ok(d.clone()),
        Some(other) => Err(CmdError::type_mismatch(format!(
            "BSON field '{key}' is the wrong type '{:?}', expected type 'object'",
            other.element_type()
        ))),
    }
}

fn coll_arg(cmd: &Document, name: &str) -> CmdResult<String> {
    match cmd.get(name) {
        Some(Bson::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(CmdError::new(
            73,
            "InvalidNamespace",
            format!(
                "collection name has invalid type {:?}",
                cmd.get(name).map(|v| v.element_type())
            ),
        )),
    }
}

fn docs_arg(cmd: &Document, key: &str) -> CmdResult<Vec<Document>> {
    match cmd.get(key) {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| match v {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(CmdError::type_mismatch(format!(
                    "'{key}' entries must be documents"
                ))),
            })
            .collect(),
        _ => Err(CmdError::new(
            40414,
            "Location40414",
            format!("BSON field '{key}' is missing but a required field"),
        )),
    }
}

/// (stand-in) The most documents one tailable `getMore` returns.
const MAX_TAIL_BATCH: usize = 20_000;

fn cursor_reply(id: i64, ns: &str, first: bool, docs: Vec<Document>) -> Document {
    let key = if first { "firstBatch" } else { "nextBatch" };
    doc! {
        "cursor": {key: docs.into_iter().map(Bson::Document).collect::<Vec<_>>(), "id": id, "ns": ns},
        "ok": 1.0,
    }
}

/// Take at most `n` documents (and at most 16 MB, but at least one).
fn take_batch(q: &mut VecDeque<Vec<u8>>, n: Option<usize>) -> Vec<Document> {
    let mut out = Vec::new();
    let mut bytes = 0;
    while let Some(d) = q.front() {
        if n.is_some_and(|n| out.len() >= n) {
            break;
        }
        let sz = d.len();
        if !out.is_empty() && bytes + sz > MAX_BATCH_BYTES {
            break;
        }
        bytes += sz;
        let raw = q.pop_front().expect("front");
        // Bytes this server serialised itself: they parse.
        out.push(bson::from_slice(&raw).expect("a buffered document"));
    }
    out
}

/// A document as it waits in a buffered cursor.
fn buffered(d: &Document) -> Vec<u8> {
    bson::to_vec(d).expect("a document serialises")
}

fn last_ts(docs: &[Document]) -> Option<Timestamp> {
    docs.iter().rev().find_map(|d| match d.get("ts") {
        Some(Bson::Timestamp(t)) => Some(*t),
        _ => None,
    })
}

/// Commands a client may run before authenticating.
fn allowed_without_auth(name: &str) -> bool {
    matches!(
        name,
        "hello"
            | "isMaster"
            | "ismaster"
            | "ping"
            | "buildInfo"
            | "buildinfo"
            | "saslStart"
            | "saslContinue"
            | "authenticate"
            | "logout"
            | "endSessions"
            | "getnonce"
    )
}

/// Run one command.
/// The commands that write user data.
const WRITES: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
    "applyOps",
    "create",
    "drop",
    "dropDatabase",
    "renameCollection",
    "createIndexes",
    "dropIndexes",
    "collMod",
];

pub fn dispatch(
    st: &mut State,
    conn: &Conn,
    db: &str,
    cmd: &Document,
    await_expired: bool,
) -> Outcome {
    let Some(name) = cmd.keys().next().cloned() else {
        return Outcome::Reply(
            CmdError::new(59, "CommandNotFound", "no such command: ''").to_doc(),
        );
    };
    // An oplog that keeps being written: whatever is due by now goes in first.
    super::oplog_writer::tick(st);
    if let Some(e) = st.cluster.as_ref().and_then(|c| c.refusal(db, &name)) {
        return Outcome::Reply(e.to_doc());
    }
    if st.mode == Mode::Auth && !allowed_without_auth(&name) {
        return Outcome::Reply(
            CmdError::new(
                13,
                "Unauthorized",
                format!("Command {name} requires authentication"),
            )
            .to_doc(),
        );
    }
    // Started with `recoverFromOplogAsStandalone`: no user writes (`service_context.h`,
    // `userWritesAllowed`; the message is the stand-in's).
    if st.read_only && WRITES.contains(&name.as_str()) && db != "local" {
        return Outcome::Reply(
            CmdError::new(
                20,
                "IllegalOperation",
                "Cannot execute a write operation in read-only mode (recoverFromOplogAsStandalone)",
            )
            .to_doc(),
        );
    }
    if let Some(o) = injected_read_error(st, conn, db, cmd, &name) {
        return o;
    }
    match run(st, conn, db, &name, cmd, await_expired) {
        Ok(o) => o,
        Err(e) => Outcome::Reply(e.to_doc()),
    }
}

/// The `fail-snapshot-reads=N:K:CODE` fault: snapshot reads N to N+K-1 fail.
fn injected_read_error(
    st: &mut State,
    conn: &Conn,
    db: &str,
    cmd: &Document,
    name: &str,
) -> Option<Outcome> {
    let (first, count, code) = st.faults.fail_snapshot_reads()?;
    let snapshot = match name {
        "find" | "aggregate" => {
            cmd.get_document("readConcern")
                .ok()
                .and_then(|rc| rc.get_str("level").ok())
                == Some("snapshot")
        }
        "getMore" => {
            num(cmd.get("getMore")).is_some_and(|id| st.snapshot_cursors.contains_key(&id))
        }
        _ => false,
    };
    if !snapshot {
        return None;
    }
    st.snapshot_reads_seen += 1;
    let n = st.snapshot_reads_seen;
    if n < first || n >= first + count {
        return None;
    }
    let fault = format!("fail-snapshot-reads={first}:{count}:{code}");
    st.logger.info(
        "COMMAND",
        22990,
        &format!("conn{}", conn.id),
        "Stand-in fault: failing a read",
        serde_json::json!({"fault": fault, "read": n, "command": name, "db": db}),
    );
    let (_, code_name, msg) = crate::faults::READ_ERRORS
        .iter()
        .find(|(c, _, _)| *c == code)
        .expect("checked when parsed");
    if code == 0 {
        return Some(Outcome::Close);
    }
    Some(Outcome::Reply(
        CmdError::new(code, code_name, format!("{msg} (injected by {fault})")).to_doc(),
    ))
}

fn run(
    st: &mut State,
    conn: &Conn,
    db: &str,
    name: &str,
    cmd: &Document,
    expired: bool,
) -> CmdResult<Outcome> {
    // `readConcern: {level: "snapshot"}`: refused here unless the command may read
    // as of a cluster time (see snapshot.rs).
    let at = super::snapshot::requested(st, name, cmd)?;
    if let Some(t) = at {
        let coll = match cmd.get(name) {
            Some(Bson::String(s)) => s.clone(),
            _ => String::new(),
        };
        let o = super::snapshot::run_at(st, t, db, &coll, |st| {
            run_now(st, conn, db, name, cmd, expired)
        })?;
        return Ok(stamp_snapshot(st, o, t));
    }
    let o = run_now(st, conn, db, name, cmd, expired)?;
    if name == "getMore" {
        let id = num(cmd.get("getMore")).unwrap_or(0);
        if let Some(t) = st.snapshot_cursors.get(&id).copied() {
            st.snapshot_cursors.remove(&id);
            return Ok(stamp_snapshot(st, o, t));
        }
    }
    Ok(o)
}

/// A snapshot read's reply carries `atClusterTime`; its open cursor is remembered so
/// that each `getMore` reply does too.
fn stamp_snapshot(st: &mut State, o: Outcome, t: Timestamp) -> Outcome {
    match o {
        Outcome::Reply(mut d) => {
            if d.get_f64("ok") == Ok(1.0) {
                super::snapshot::stamp(&mut d, t);
                let id = d
                    .get_document("cursor")
                    .ok()
                    .and_then(|c| num(c.get("id")))
                    .unwrap_or(0);
                if id != 0 {
                    st.snapshot_cursors.insert(id, t);
                }
            }
            Outcome::Reply(d)
        }
        other => other,
    }
}

fn run_now(
    st: &mut State,
    conn: &Conn,
    db: &str,
    name: &str,
    cmd: &Document,
    expired: bool,
) -> CmdResult<Outcome> {
    Ok(match name {
        // A server before 4.4.2 (or 4.4.0/4.4.1) has no `hello` (SERVER-49987).
        "hello" if st.faults.has(&crate::faults::Fault::NoHello) => Outcome::Reply(
            CmdError::new(59, "CommandNotFound", "no such command: 'hello'").to_doc(),
        ),
        "hello" | "isMaster" | "ismaster" => Outcome::Reply(hello(st, conn, cmd, name == "hello")),
        "ping" => ok(doc! {}),
        "buildInfo" | "buildinfo" => ok(build_info(st)),
        "saslStart" | "saslContinue" | "authenticate" => Outcome::Reply(
            CmdError::new(18, "AuthenticationFailed", "Authentication failed.").to_doc(),
        ),
        "logout"
        | "endSessions"
        | "killAllSessions"
        | "killSessions"
        | "refreshSessions"
        | "setFeatureCompatibilityVersion" => ok(doc! {}),
        "startSession" => ok(
            doc! {"id": {"id": bson::Binary::from_uuid(bson::Uuid::new())}, "timeoutMinutes": 30},
        ),
        "connectionStatus" => {
            ok(doc! {"authInfo": {"authenticatedUsers": [], "authenticatedUserRoles": []}})
        }
        "whatsmyuri" => ok(doc! {"you": conn.peer.clone()}),
        "getLog" => ok(doc! {"totalLinesWritten": 0, "log": []}),
        "getCmdLineOpts" => ok(doc! {
            "argv": std::iter::once("mongod".to_string()).chain(st.argv.iter().cloned()).collect::<Vec<_>>(),
            "parsed": st.parsed.clone(),
        }),
        "getParameter" => get_parameter(st, cmd)?,
        "setParameter" => {
            let mut was = Document::new();
            for (k, v) in cmd.iter().skip(1) {
                if k.starts_with('$') || k == "lsid" || k == "comment" {
                    continue;
                }
                if let Some(old) = st.params.get(k) {
                    was.insert("was", old.clone());
                }
                st.params.insert(k.clone(), v.clone());
            }
            ok(was)
        }
        "serverStatus" => ok(server_status(st)),
        "hostInfo" => {
            ok(doc! {"system": {"hostname": "localhost", "numCores": 2}, "os": {"type": "Linux"}})
        }
        "shutdown" => Outcome::Shutdown,
        // A checkpoint now, when the stand-in keeps data files (persist.rs).
        "fsync" => match super::persist::fsync(st) {
            Ok(()) => ok(doc! {"numFiles": 1}),
            Err(e) => return Err(CmdError::new(1, "InternalError", format!("fsync: {e}"))),
        },
        "replSetGetStatus" => repl_set_get_status(st)?,
        "replSetInitiate" => match st.mode {
            Mode::Replset => {
                return Err(CmdError::new(
                    23,
                    "AlreadyInitialized",
                    "already initialized",
                ))
            }
            Mode::Mongos => return Err(no_such_command(name)),
            _ => {
                return Err(CmdError::new(
                    76,
                    "NoReplicationEnabled",
                    "This node was not started with replication enabled.",
                ))
            }
        },
        "listDatabases" => list_databases(st, cmd)?,
        "listCollections" => list_collections(st, db, cmd)?,
        "listIndexes" => {
            let coll = coll_arg(cmd, name)?;
            views::check_not_view(st, db, &coll)?;
            let specs = match views::timeseries_options(st, db, &coll) {
                // The buckets' indexes, keys mapped back to the user's fields.
                Some(ts) => {
                    let b = st
                        .store
                        .get(db, &format!("{}{coll}", views::BUCKETS_PREFIX));
                    b.map(|b| b.indexes.clone())
                        .unwrap_or_default()
                        .into_iter()
                        .map(|mut spec| {
                            if let Ok(k) = spec.get_document("key") {
                                let k = views::from_buckets_key(&ts, k);
                                spec.insert("key", k);
                            }
                            spec
                        })
                        .collect()
                }
                None => st
                    .store
                    .get(db, &coll)
                    .ok_or_else(|| {
                        CmdError::ns_not_found(format!("ns does not exist: {db}.{coll}"))
                    })?
                    .indexes
                    .clone(),
            };
            Outcome::Reply(cursor_reply(
                0,
                &format!("{db}.$cmd.listIndexes"),
                true,
                specs,
            ))
        }
        "dbStats" => {
            let names = st.store.collection_names(db);
            let (mut objects, mut size) = (0i64, 0i64);
            for n in &names {
                let c = st.store.get(db, n).expect("listed");
                objects += c.len() as i64;
                size += c.data_size();
            }
            ok(
                doc! {"db": db, "collections": names.len() as i64, "views": 0, "objects": objects, "dataSize": size as f64, "storageSize": size as f64, "indexes": names.len() as i64},
            )
        }
        "collStats" => {
            let coll = coll_arg(cmd, name)?;
            let (count, mut size) = st
                .store
                .get(db, &coll)
                .map(|c| (c.len() as i64, c.data_size()))
                .unwrap_or((0, 0));
            // `PITR_STANDIN_OPLOG_SIZE`: the oplog's size as a server with a much
            // larger one reports it (a test of what is checked before reading it).
            if (db, coll.as_str()) == ("local", "oplog.rs") {
                if let Some(n) = std::env::var("PITR_STANDIN_OPLOG_SIZE")
                    .ok()
                    .and_then(|v| v.parse::<i64>().ok())
                {
                    size = n;
                }
            }
            ok(
                doc! {"ns": format!("{db}.{coll}"), "count": count, "size": size, "storageSize": size, "nindexes": 1},
            )
        }
        "find" => {
            views::check_readable(st, db, &coll_arg(cmd, name)?)?;
            find(st, db, cmd)?
        }
        "dbHash" | "dbhash" => {
            if st.mode == Mode::Mongos {
                return Err(no_such_command(name));
            }
            ok(super::dbhash::db_hash(st, db, cmd)?)
        }
        "_mergeAuthzCollections" => {
            if db != "admin" {
                return Err(CmdError::new(
                    13,
                    "Unauthorized",
                    "_mergeAuthzCollections may only be run against the admin database.",
                ));
            }
            super::authz::merge_authz_collections(st, cmd)?;
            ok(doc! {})
        }
        "getMore" => get_more(st, db, cmd, expired)?,
        "killCursors" => {
            let _coll = coll_arg(cmd, name)?;
            let mut killed = Vec::new();
            let mut not_found = Vec::new();
            if let Some(Bson::Array(ids)) = cmd.get("cursors") {
                for id in ids {
                    if let Some(id) = num(Some(id)) {
                        if st.cursors.remove(&id).is_some() {
                            killed.push(Bson::Int64(id));
                        } else {
                            not_found.push(Bson::Int64(id));
                        }
                    }
                }
            }
            ok(
                doc! {"cursorsKilled": killed, "cursorsNotFound": not_found, "cursorsAlive": [], "cursorsUnknown": []},
            )
        }
        "count" => {
            let coll = coll_arg(cmd, name)?;
            views::check_readable(st, db, &coll)?;
            let query = sub_doc(cmd, "query")?;
            let mut n = 0i64;
            if let Some(c) = st.store.get(db, &coll) {
                for (_, d) in c.iter() {
                    if matches(&d, &query).map_err(CmdError::bad_value)? {
                        n += 1;
                    }
                }
            }
            let skip = num(cmd.get("skip")).unwrap_or(0).max(0);
            n = (n - skip).max(0);
            if let Some(limit) = num(cmd.get("limit")).filter(|l| *l != 0) {
                n = n.min(limit.abs());
            }
            ok(
                doc! {"n": if n <= i32::MAX as i64 { Bson::Int32(n as i32) } else { Bson::Int64(n) }},
            )
        }
        "distinct" => {
            let coll = coll_arg(cmd, name)?;
            views::check_readable(st, db, &coll)?;
            let key = cmd
                .get_str("key")
                .map_err(|_| CmdError::type_mismatch("'key' must be a string"))?;
            let query = sub_doc(cmd, "query")?;
            let mut values: Vec<Bson> = Vec::new();
            if let Some(c) = st.store.get(db, &coll) {
                for (_, d) in c.iter() {
                    if !matches(&d, &query).map_err(CmdError::bad_value)? {
                        continue;
                    }
                    for v in crate::matcher::lookup(&d, key) {
                        let items: Vec<&Bson> = match v {
                            Bson::Array(a) => a.iter().collect(),
                            o => vec![o],
                        };
                        for it in items {
                            if !values.iter().any(|x| crate::matcher::values_equal(x, it)) {
                                values.push(it.clone());
                            }
                        }
                    }
                }
            }
            ok(doc! {"values": values})
        }
        "aggregate" => aggregate(st, db, cmd)?,
        "insert" => insert(st, db, cmd)?,
        "update" => update(st, db, cmd)?,
        "delete" => delete(st, db, cmd)?,
        "create" => {
            let coll = coll_arg(cmd, name)?;
            let options = strip_generic(cmd.iter().skip(1));
            if options.contains_key("viewOn") {
                views::create_view(st, db, &coll, &options)?;
            } else if options.contains_key("timeseries") {
                views::create_timeseries(st, db, &coll, &options, None)?;
            } else {
                writes::create_collection(st, db, &coll, options, None)?;
            }
            ok(doc! {})
        }
        "drop" => {
            let coll = coll_arg(cmd, name)?;
            if views::drop_view(st, db, &coll).is_some() {
                return Ok(ok(doc! {"ns": format!("{db}.{coll}")}));
            }
            kill_cursors_on(st, db, &coll);
            match writes::drop_collection(st, db, &coll) {
                Some(n) => ok(doc! {"nIndexesWas": n as i32, "ns": format!("{db}.{coll}")}),
                None => ok(doc! {}),
            }
        }
        "dropDatabase" => {
            for coll in st.store.collection_names(db) {
                kill_cursors_on(st, db, &coll);
            }
            writes::drop_database(st, db);
            ok(doc! {"dropped": db})
        }
        "renameCollection" => {
            if db != "admin" {
                return Err(CmdError::new(
                    13,
                    "Unauthorized",
                    "renameCollection may only be run against the admin database.",
                ));
            }
            let from = coll_arg(cmd, name)?;
            let to = cmd
                .get_str("to")
                .map_err(|_| CmdError::type_mismatch("'to' must be a string"))?;
            writes::rename_collection(st, &from, to, truthy(cmd.get("dropTarget")))?;
            ok(doc! {})
        }
        "createIndexes" => {
            let coll = coll_arg(cmd, name)?;
            let mut specs = docs_arg(cmd, "indexes")?;
            views::check_not_view(st, db, &coll)?;
            let coll = match views::timeseries_options(st, db, &coll) {
                // Built on the buckets collection with translated keys.
                Some(ts) => {
                    for spec in &mut specs {
                        if let Ok(k) = spec.get_document("key") {
                            let k = views::to_buckets_key(&ts, k)?;
                            spec.insert("key", k);
                        }
                    }
                    format!("{}{coll}", views::BUCKETS_PREFIX)
                }
                None => coll,
            };
            let created = writes::ensure_collection(st, db, &coll)?;
            let before = st
                .store
                .get(db, &coll)
                .map(|c| c.indexes.len())
                .unwrap_or(0);
            for s in specs {
                writes::create_index(st, db, &coll, s)?;
            }
            let after = st
                .store
                .get(db, &coll)
                .map(|c| c.indexes.len())
                .unwrap_or(0);
            ok(
                doc! {"numIndexesBefore": before as i32, "numIndexesAfter": after as i32, "createdCollectionAutomatically": created},
            )
        }
        "dropIndexes" | "deleteIndexes" => {
            let coll = coll_arg(cmd, name)?;
            let which = cmd
                .get("index")
                .cloned()
                .unwrap_or(Bson::String("*".into()));
            let was = writes::drop_indexes(st, db, &coll, &which)?;
            ok(doc! {"nIndexesWas": was as i32})
        }
        "collMod" => {
            let coll = coll_arg(cmd, name)?;
            let c = st
                .store
                .get_mut(db, &coll)
                .ok_or_else(|| CmdError::ns_not_found(format!("ns does not exist: {db}.{coll}")))?;
            let old = c.options.clone();
            let mut o = doc! {"collMod": coll.clone()};
            for (k, v) in strip_generic(cmd.iter().skip(1)) {
                c.options.insert(k.clone(), v.clone());
                o.insert(k, v);
            }
            let uuid = c.uuid;
            // Logged as a primary logs it (`op_observer_impl.cpp`, onCollMod): the
            // command's changes in `o`, the options before in `o2`.
            st.log_op(
                "c",
                &format!("{db}.$cmd"),
                Some(uuid),
                o,
                Some(doc! {"collectionOptions_old": old}),
            );
            ok(doc! {})
        }
        "applyOps" => {
            if st.mode == Mode::Mongos {
                return Err(no_such_command(name));
            }
            match apply_ops_command(st, cmd) {
                Ok(d) => ok(d),
                Err(d) => Outcome::Reply(d),
            }
        }
        _ => return Err(no_such_command(name)),
    })
}

fn no_such_command(name: &str) -> CmdError {
    CmdError::new(59, "CommandNotFound", format!("no such command: '{name}'"))
}

/// Command options without the generic fields every command may carry.
fn strip_generic<'a>(it: impl Iterator<Item = (&'a String, &'a Bson)>) -> Document {
    let generic = [
        "lsid",
        "txnNumber",
        "writeConcern",
        "readConcern",
        "comment",
        "apiVersion",
        "apiStrict",
        "apiDeprecationErrors",
        "autocommit",
        "startTransaction",
        "maxTimeMS",
    ];
    let mut out = Document::new();
    for (k, v) in it {
        if !k.starts_with('$') && !generic.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn kill_cursors_on(st: &mut State, db: &str, coll: &str) {
    st.cursors.retain(|_, c| {
        !(c.db == db && c.coll == coll && matches!(c.kind, CursorKind::Tailable { .. }))
    });
}

fn hello(st: &mut State, conn: &Conn, cmd: &Document, new_name: bool) -> Document {
    let mut d = Document::new();
    if truthy(cmd.get("helloOk")) && !st.faults.has(&crate::faults::Fault::NoHello) {
        d.insert("helloOk", true);
    }
    let is_primary = st.members.as_ref().is_none_or(|m| m.is_primary());
    d.insert(
        if new_name {
            "isWritablePrimary"
        } else {
            "ismaster"
        },
        is_primary,
    );
    // No `topologyVersion`: without it the driver polls instead of streaming
    // (awaitable hello with exhaust), which the stand-in does not implement.
    match st.mode {
        Mode::Replset => {
            let ts = st.last_optime();
            d.insert("setName", st.set_name.clone());
            d.insert("setVersion", 1);
            match &st.members {
                Some(m) => {
                    d.insert("hosts", m.hosts.clone());
                    d.insert("primary", m.primary_host().to_string());
                }
                None => {
                    d.insert("hosts", vec![st.me.clone()]);
                    d.insert("primary", st.me.clone());
                }
            }
            d.insert("me", st.me.clone());
            d.insert("secondary", !is_primary);
            // A config server's member says so (server
            // `src/mongo/db/repl/replication_info.cpp`: `configsvr: 2`).
            if st.argv.iter().any(|a| a == "--configsvr") {
                d.insert("configsvr", 2);
            }
            // A new primary's electionId is greater than the old one's (the driver
            // ignores a primary whose electionId went backwards).
            d.insert(
                "electionId",
                bson::oid::ObjectId::parse_str(format!("7fffffff{:016x}", st.term.max(0)))
                    .expect("valid"),
            );
            d.insert(
                "lastWrite",
                doc! {
                    "opTime": {"ts": ts, "t": st.term},
                    "lastWriteDate": bson::DateTime::from_millis(ts.time as i64 * 1000),
                    "majorityOpTime": {"ts": ts, "t": st.term},
                    "majorityWriteDate": bson::DateTime::from_millis(ts.time as i64 * 1000),
                },
            );
        }
        Mode::Mongos => {
            d.insert("msg", "isdbgrid");
        }
        _ => {}
    }
    if st.mode == Mode::Auth && cmd.contains_key("saslSupportedMechs") {
        d.insert("saslSupportedMechs", vec!["SCRAM-SHA-1", "SCRAM-SHA-256"]);
    }
    d.insert("maxBsonObjectSize", 16 * 1024 * 1024);
    d.insert("maxMessageSizeBytes", super::wire::MAX_MESSAGE);
    d.insert("maxWriteBatchSize", 100_000);
    d.insert("localTime", bson::DateTime::now());
    d.insert("logicalSessionTimeoutMinutes", 30);
    d.insert("connectionId", conn.id as i32);
    d.insert("minWireVersion", 0);
    d.insert("maxWireVersion", st.version.max_wire_version());
    d.insert("readOnly", false);
    d.insert("ok", 1.0);
    d
}

fn build_info(st: &State) -> Document {
    let v = st.version.array();
    doc! {
        "version": st.version.to_string(),
        // Lets pitr (and anyone) tell over the wire that this is a test double.
        "pitrStandIn": true,
        "gitVersion": "ce59cfc6a3c5e5c067dca0d30697edd68d4f5188",
        "modules": [],
        "allocator": "tcmalloc",
        "javascriptEngine": "mozjs",
        "sysInfo": "deprecated",
        "versionArray": [v[0], v[1], v[2], v[3]],
        "openssl": {"running": "OpenSSL 3.0.2 15 Mar 2022", "compiled": "OpenSSL 3.0.2 15 Mar 2022"},
        "buildEnvironment": {"distmod": "ubuntu2204", "distarch": "x86_64", "target_arch": "x86_64"},
        "bits": 64,
        "debug": false,
        "maxBsonObjectSize": 16 * 1024 * 1024,
        "storageEngines": ["devnull", "wiredTiger"],
    }
}

fn get_parameter(st: &State, cmd: &Document) -> CmdResult<Outcome> {
    let all = matches!(cmd.get("getParameter"), Some(Bson::String(s)) if s == "*");
    let mut out = Document::new();
    if all {
        out = st.params.clone();
    } else {
        for (k, _) in cmd.iter().skip(1) {
            if k.starts_with('$') || k == "lsid" || k == "comment" {
                continue;
            }
            match st.params.get(k) {
                Some(v) => {
                    out.insert(k.clone(), v.clone());
                }
                None => {
                    return Err(CmdError::new(
                        72,
                        "InvalidOptions",
                        format!("no option found to get: {k}"),
                    ))
                }
            }
        }
    }
    Ok(ok(out))
}

fn server_status(st: &State) -> Document {
    let mut d = doc! {
        "host": "localhost",
        "version": st.version.to_string(),
        "process": if st.mode == Mode::Mongos { "mongos" } else { "mongod" },
        "pid": std::process::id() as i64,
        "uptime": st.started.elapsed().as_secs_f64(),
        "uptimeMillis": st.started.elapsed().as_millis() as i64,
        "localTime": bson::DateTime::now(),
        "connections": {"current": 1, "available": 1000, "totalCreated": st.next_conn_id - 1},
        "storageEngine": {"name": "wiredTiger", "readOnly": st.read_only, "persistent": st.persist.is_some()},
    };
    if let Some(c) = &st.cluster {
        d.insert("sharding", c.server_status_section());
    }
    if st.mode == Mode::Replset {
        d.insert("repl", doc! {"setName": st.set_name.clone(), "isWritablePrimary": true, "hosts": [st.me.clone()], "primary": st.me.clone(), "me": st.me.clone()});
    }
    d
}

fn repl_set_get_status(st: &State) -> CmdResult<Outcome> {
    match st.mode {
        Mode::Replset => {}
        Mode::Mongos => return Err(no_such_command("replSetGetStatus")),
        _ => {
            return Err(CmdError::new(
                76,
                "NoReplicationEnabled",
                "not running with --replSet",
            ))
        }
    }
    let ts = st.last_optime();
    let optime = doc! {"ts": ts, "t": st.term};
    let date = bson::DateTime::from_millis(ts.time as i64 * 1000);
    Ok(ok(doc! {
        "set": st.set_name.clone(),
        "date": bson::DateTime::now(),
        "myState": 1,
        "term": st.term,
        "heartbeatIntervalMillis": 2000i64,
        "optimes": {
            "lastCommittedOpTime": optime.clone(),
            "appliedOpTime": optime.clone(),
            "durableOpTime": optime.clone(),
        },
        "members": [{
            "_id": 0,
            "name": st.me.clone(),
            "health": 1.0,
            "state": 1,
            "stateStr": "PRIMARY",
            "uptime": st.started.elapsed().as_secs() as i64,
            "optime": optime.clone(),
            "optimeDate": date,
            "self": true,
        }],
    }))
}

fn list_databases(st: &State, cmd: &Document) -> CmdResult<Outcome> {
    let name_only = truthy(cmd.get("nameOnly"));
    let filter = sub_doc(cmd, "filter")?;
    let mut dbs = Vec::new();
    let mut total = 0i64;
    for (name, colls) in &st.store.dbs {
        let size: i64 = colls.values().map(|c| c.data_size().max(4096)).sum();
        let entry = if name_only {
            doc! {"name": name.clone()}
        } else {
            doc! {"name": name.clone(), "sizeOnDisk": size, "empty": colls.values().all(|c| c.is_empty())}
        };
        if matches(&entry, &filter).map_err(CmdError::bad_value)? {
            total += size;
            dbs.push(Bson::Document(entry));
        }
    }
    let mut d = doc! {"databases": dbs};
    if !name_only {
        d.insert("totalSize", total);
        d.insert("totalSizeMb", total / (1024 * 1024));
    }
    Ok(ok(d))
}

fn list_collections(st: &State, db: &str, cmd: &Document) -> CmdResult<Outcome> {
    let filter = sub_doc(cmd, "filter")?;
    let name_only = truthy(cmd.get("nameOnly"));
    let mut entries = Vec::new();
    if let Some(colls) = st.store.dbs.get(db) {
        for (name, c) in colls {
            // `buildCollectionBson`: the uuid lives in `info`, the `_id` index spec in
            // `idIndex` (absent for clustered collections such as time-series buckets).
            let mut entry = doc! {
                "name": name.clone(),
                "type": "collection",
                "options": c.options.clone(),
                "info": {"readOnly": false, "uuid": bson::Binary::from_uuid(c.uuid)},
            };
            if let Some(id) = c.indexes.iter().find(|i| i.get_str("name") == Ok("_id_")) {
                entry.insert("idIndex", id.clone());
            }
            entries.push(entry);
        }
    }
    entries.extend(views::list_entries(st, db));
    let mut out = Vec::new();
    for mut entry in entries {
        if matches(&entry, &filter).map_err(CmdError::bad_value)? {
            if name_only {
                entry = doc! {"name": entry.get("name").cloned().unwrap_or(Bson::Null), "type": entry.get("type").cloned().unwrap_or(Bson::Null)};
            }
            out.push(entry);
        }
    }
    Ok(Outcome::Reply(cursor_reply(
        0,
        &format!("{db}.$cmd.listCollections"),
        true,
        out,
    )))
}

fn find(st: &mut State, db: &str, cmd: &Document) -> CmdResult<Outcome> {
    let coll = coll_arg(cmd, "find")?;
    let ns = format!("{db}.{coll}");
    let filter = sub_doc(cmd, "filter")?;
    let sort = sub_doc(cmd, "sort")?;
    let projection = sub_doc(cmd, "projection")?;
    let skip = num(cmd.get("skip")).unwrap_or(0).max(0) as usize;
    let raw_limit = num(cmd.get("limit")).unwrap_or(0);
    let single_batch = truthy(cmd.get("singleBatch")) || raw_limit < 0;
    let limit = raw_limit.unsigned_abs() as usize;
    let batch_size = num(cmd.get("batchSize"))
        .map(|b| b.max(0) as usize)
        .unwrap_or(101);
    let tailable = truthy(cmd.get("tailable"));
    let await_data = truthy(cmd.get("awaitData"));
    let Some(c) = st.store.get(db, &coll) else {
        return Ok(Outcome::Reply(cursor_reply(0, &ns, true, vec![])));
    };
    if tailable && !c.is_capped() {
        return Err(CmdError::bad_value(format!(
            "error processing query: ns={ns} tailable cursor requested on non capped collection"
        )));
    }
    // Fault: a lagging secondary's range reads do not see the newest entries yet.
    let lag_hides = match st.faults.lagging_reads_ms() {
        Some(ms)
            if ns == "local.oplog.rs"
                && !filter.is_empty()
                && st.started.elapsed().as_millis() < ms as u128 =>
        {
            5
        }
        _ => 0,
    };
    let visible = c.len().saturating_sub(lag_hides);
    // References into the store (no copy of a whole collection's scan): each is
    // copied once, as bytes, when it goes into the cursor.
    let mut records: Vec<(u64, Cow<'_, Document>)> = Vec::new();
    // Where a tailable cursor stands after its first batch: the last record it
    // examined (after a scan that found fewer matches than the batch holds, the end).
    let mut scanned_to = 0;
    let tail_first = if batch_size == 0 {
        0
    } else {
        batch_size.max(1)
    };
    // A collection kept as bytes (the oplog) sorted in natural order or not at all:
    // the matches are kept as record ids and parsed again one at a time when
    // buffered, not all at once (`placeholder` stands in for the document).
    let by_rid = c.stores_bytes() && sort.keys().all(|k| k == "$natural");
    let placeholder = || Cow::Owned(Document::new());
    for (rid, d) in c.iter().take(visible) {
        if tailable && skip == 0 && records.len() >= tail_first {
            break;
        }
        scanned_to = rid;
        if matches(&d, &filter).map_err(CmdError::bad_value)? {
            records.push((rid, if by_rid { placeholder() } else { d }));
        }
    }
    let fetch = |rid: u64, d: Cow<'_, Document>| -> Document {
        if by_rid {
            c.get(rid).map(Cow::into_owned).unwrap_or_default()
        } else {
            d.into_owned()
        }
    };
    if !tailable {
        sort_records(&mut records, &sort).map_err(CmdError::bad_value)?;
    }
    let mut records: Vec<(u64, Cow<'_, Document>)> = records.into_iter().skip(skip).collect();
    if limit > 0 {
        records.truncate(limit);
    }
    let first_n = if limit > 0 {
        batch_size.min(limit)
    } else {
        batch_size
    };
    let first_n = if batch_size == 0 { 0 } else { first_n };
    if tailable {
        let take: Vec<(u64, Cow<'_, Document>)> = records
            .into_iter()
            .take(first_n.max(if batch_size == 0 { 0 } else { 1 }))
            .collect();
        let last_rid = if skip == 0 && take.len() < tail_first {
            scanned_to
        } else {
            take.last().map(|(r, _)| *r).unwrap_or(0)
        };
        let docs: Vec<Document> = take
            .into_iter()
            .map(|(rid, d)| project(&fetch(rid, d), &projection))
            .collect();
        let id = st.new_cursor_id();
        st.cursors.insert(
            id,
            Cursor {
                db: db.to_string(),
                coll: coll.clone(),
                kind: CursorKind::Tailable {
                    filter,
                    last_rid,
                    await_data,
                },
                last_ts: last_ts(&docs),
            },
        );
        return Ok(Outcome::Reply(cursor_reply(id, &ns, true, docs)));
    }
    let mut queue: VecDeque<Vec<u8>> = records
        .into_iter()
        .map(|(rid, d)| {
            let d = if by_rid { Cow::Owned(fetch(rid, d)) } else { d };
            if projection.is_empty() {
                buffered(&d)
            } else {
                buffered(&project(&d, &projection))
            }
        })
        .collect();
    let first = take_batch(&mut queue, Some(first_n));
    if queue.is_empty() || single_batch {
        return Ok(Outcome::Reply(cursor_reply(0, &ns, true, first)));
    }
    let id = st.new_cursor_id();
    let lt = last_ts(&first);
    st.cursors.insert(
        id,
        Cursor {
            db: db.to_string(),
            coll,
            kind: CursorKind::Buffered(queue),
            last_ts: lt,
        },
    );
    Ok(Outcome::Reply(cursor_reply(id, &ns, true, first)))
}

fn get_more(st: &mut State, db: &str, cmd: &Document, expired: bool) -> CmdResult<Outcome> {
    let id =
        num(cmd.get("getMore")).ok_or_else(|| CmdError::type_mismatch("getMore must be a long"))?;
    let coll = coll_arg(cmd, "collection")?;
    let batch_size = num(cmd.get("batchSize"))
        .filter(|b| *b > 0)
        .map(|b| b as usize);
    let Some(cursor) = st.cursors.get(&id) else {
        return Err(CmdError::new(
            43,
            "CursorNotFound",
            format!("cursor id {id} not found"),
        ));
    };
    if cursor.db != db || cursor.coll != coll {
        return Err(CmdError::new(
            13,
            "Unauthorized",
            format!("Requested getMore on namespace '{db}.{coll}', but cursor belongs to a different namespace {}.{}", cursor.db, cursor.coll),
        ));
    }
    let ns = format!("{db}.{coll}");
    if !expired {
        // Fault knobs count each getMore once, not each awaitData poll.
        st.getmores += 1;
        let n = st.getmores;
        if let Some(after) = st.faults.drop_connection_after() {
            if n > after && !st.drop_fired {
                st.drop_fired = true;
                st.logger.info("NETWORK", 22989, "conn", "Stand-in fault: dropping connection", serde_json::json!({"fault": format!("drop-connection-after-getmores={after}"), "getMore": n}));
                return Ok(Outcome::Close);
            }
        }
        if ns == "local.oplog.rs" {
            if let Some(ms) = st.faults.slow_getmores_ms() {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
            if let Some(after) = st.faults.rollover_after() {
                if n > after && !st.rollover_fired {
                    st.rollover_fired = true;
                    return Err(rollover(st, id));
                }
            }
            if let Some(after) = st.faults.rollback_after() {
                if n > after && !st.rollback_fired {
                    st.rollback_fired = true;
                    return Err(super::oplog_writer::rollback(st));
                }
            }
        }
    }
    let cursor = st.cursors.get_mut(&id).expect("checked");
    match &mut cursor.kind {
        CursorKind::Buffered(q) => {
            let batch = take_batch(q, batch_size);
            let done = q.is_empty();
            if let Some(t) = last_ts(&batch) {
                cursor.last_ts = Some(t);
            }
            if done {
                st.cursors.remove(&id);
            }
            Ok(Outcome::Reply(cursor_reply(
                if done { 0 } else { id },
                &ns,
                false,
                batch,
            )))
        }
        CursorKind::Tailable {
            filter,
            last_rid,
            await_data,
        } => {
            let Some(c) = st.store.get(db, &coll) else {
                st.cursors.remove(&id);
                return Err(CmdError::new(
                    175,
                    "QueryPlanKilled",
                    format!("collection dropped: {ns}"),
                ));
            };
            // The capped collection dropped the record the cursor stood on.
            if *last_rid > 0
                && c.get(*last_rid).is_none()
                && c.first_rid().is_none_or(|f| f > *last_rid)
            {
                let lost = *last_rid;
                st.cursors.remove(&id);
                return Err(CmdError::new(
                    136,
                    "CappedPositionLost",
                    format!("Executor error during getMore :: caused by :: CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId({lost})"),
                ));
            }
            let mut batch = Vec::new();
            let mut new_last = *last_rid;
            for (rid, d) in c.iter_after(*last_rid) {
                // (stand-in) Batches are cut by count, not by the real 16 MiB.
                if batch_size.is_some_and(|n| batch.len() >= n) || batch.len() >= MAX_TAIL_BATCH {
                    break;
                }
                new_last = rid;
                if matches(&d, filter).map_err(CmdError::bad_value)? {
                    batch.push(d.into_owned());
                }
            }
            *last_rid = new_last;
            if batch.is_empty() && *await_data && !expired {
                return Ok(Outcome::Wait);
            }
            if let Some(t) = last_ts(&batch) {
                cursor.last_ts = Some(t);
            }
            Ok(Outcome::Reply(cursor_reply(id, &ns, false, batch)))
        }
    }
}

/// The `rollover-after-getmores` fault: the oldest oplog entries, up to and
/// including where this cursor had got to, are deleted as if the capped oplog
/// wrapped, and the cursor dies with CappedPositionLost.
fn rollover(st: &mut State, cursor_id: i64) -> CmdError {
    let cursor = st.cursors.remove(&cursor_id);
    let upto = cursor.and_then(|c| c.last_ts);
    let mut deleted = 0;
    let mut last_rid = 0;
    if let Some(oplog) = st.store.get_mut("local", "oplog.rs") {
        let victims: Vec<u64> = oplog
            .iter()
            .enumerate()
            .filter(|(n, (_, d))| {
                let ts = match d.get("ts") {
                    Some(Bson::Timestamp(t)) => Some((t.time, t.increment)),
                    _ => None,
                };
                match (upto, ts) {
                    (Some(u), Some(t)) => t <= (u.time, u.increment),
                    _ => *n == 0,
                }
            })
            .map(|(_, (r, _))| r)
            .collect();
        let victims = if victims.is_empty() {
            oplog.iter().take(1).map(|(r, _)| r).collect()
        } else {
            victims
        };
        for r in victims {
            oplog.remove(r);
            deleted += 1;
            last_rid = r;
        }
    }
    st.logger.info(
        "STORAGE",
        22383,
        "conn",
        "Stand-in fault: oplog rolled over",
        serde_json::json!({"deletedEntries": deleted}),
    );
    CmdError::new(
        136,
        "CappedPositionLost",
        format!("Executor error during getMore :: caused by :: CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId({last_rid})"),
    )
}

fn new_id_first(doc: Document) -> Document {
    if doc.contains_key("_id") {
        return doc;
    }
    let mut d = doc! {"_id": bson::oid::ObjectId::new()};
    d.extend(doc);
    d
}

fn insert(st: &mut State, db: &str, cmd: &Document) -> CmdResult<Outcome> {
    let coll = coll_arg(cmd, "insert")?;
    writes::valid_coll_name(db, &coll)?;
    let bypass_empty_ts = match cmd.get("bypassEmptyTsReplacement") {
        None => false,
        // An IDL field only on servers with SERVER-88750 (see `version.rs`); older
        // ones refuse it like any unknown field.
        Some(_) if !st.version.knows_bypass_empty_ts() => {
            return Err(CmdError::new(
                40415,
                "Location40415",
                "BSON field 'insert.bypassEmptyTsReplacement' is an unknown field.",
            ))
        }
        Some(v) => truthy(Some(v)),
    };
    views::check_writable(st, db, &coll)?;
    let docs = docs_arg(cmd, "documents")?;
    let ordered = cmd.get("ordered").map(|v| truthy(Some(v))).unwrap_or(true);
    writes::ensure_collection(st, db, &coll)?;
    let mut n = 0;
    let mut errors = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        let fixed = fix_document_for_insert(d, bypass_empty_ts, &mut || st.next_ts());
        let result = match fixed {
            Ok(d) => writes::insert_doc(st, db, &coll, d).map_err(|dup| {
                let mut e = doc! {
                    "index": i as i32,
                    "code": 11000,
                    "errmsg": writes::dup_key_message(db, &coll, &dup.0),
                };
                e.insert("keyPattern", doc! {"_id": 1});
                e.insert("keyValue", doc! {"_id": dup.0});
                e
            }),
            Err(e) => Err(doc! {"index": i as i32, "code": e.code, "errmsg": e.msg}),
        };
        match result {
            Ok(()) => n += 1,
            Err(e) => {
                errors.push(Bson::Document(e));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut r = doc! {"n": n};
    if !errors.is_empty() {
        r.insert("writeErrors", errors);
    }
    Ok(ok(r))
}

fn update(st: &mut State, db: &str, cmd: &Document) -> CmdResult<Outcome> {
    let coll = coll_arg(cmd, "update")?;
    writes::valid_coll_name(db, &coll)?;
    views::check_writable(st, db, &coll)?;
    let updates = docs_arg(cmd, "updates")?;
    let ordered = cmd.get("ordered").map(|v| truthy(Some(v))).unwrap_or(true);
    let (mut n, mut modified) = (0i32, 0i32);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    for (i, u) in updates.iter().enumerate() {
        match update_one_statement(st, db, &coll, u) {
            Ok((matched, changed, up)) => {
                n += matched;
                modified += changed;
                if let Some(id) = up {
                    n += 1;
                    upserted.push(Bson::Document(doc! {"index": i as i32, "_id": id}));
                }
            }
            Err(e) => {
                errors.push(Bson::Document(
                    doc! {"index": i as i32, "code": e.code, "codeName": e.name, "errmsg": e.msg},
                ));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut r = doc! {"n": n, "nModified": modified};
    if !upserted.is_empty() {
        r.insert("upserted", upserted);
    }
    if !errors.is_empty() {
        r.insert("writeErrors", errors);
    }
    Ok(ok(r))
}

/// The one pipeline update the stand-in runs: `[{$replaceRoot|$replaceWith: {newRoot:
/// {$literal: D}}}]`, a replacement by `D` taken literally. mongorestore 100.12+ sends
/// it after inserting a document that holds an empty timestamp to a server without
/// `bypassEmptyTsReplacement` (mongo-tools `mongorestore/restore.go`
/// `insertDocWithEmptyTimestamps`), because `$literal` keeps `Timestamp(0, 0)`.
fn literal_replacement(stages: &[Bson]) -> CmdResult<Document> {
    let not_implemented = || {
        CmdError::new(
            9,
            "FailedToParse",
            "pipeline-style updates other than [{$replaceRoot: {newRoot: {$literal: ...}}}] are not implemented by the pitr stand-in mongod",
        )
    };
    let [Bson::Document(stage)] = stages else {
        return Err(not_implemented());
    };
    let root = match (stage.get("$replaceRoot"), stage.get("$replaceWith")) {
        (Some(Bson::Document(r)), None) => r.get("newRoot"),
        (None, Some(r)) => Some(r),
        _ => None,
    };
    match root {
        Some(Bson::Document(d)) if d.len() == 1 => match d.get("$literal") {
            Some(Bson::Document(lit)) => Ok(lit.clone()),
            _ => Err(not_implemented()),
        },
        _ => Err(not_implemented()),
    }
}

fn update_one_statement(
    st: &mut State,
    db: &str,
    coll: &str,
    u: &Document,
) -> CmdResult<(i32, i32, Option<Bson>)> {
    let q = sub_doc(u, "q")?;
    let spec = match u.get("u") {
        Some(Bson::Document(d)) => d.clone(),
        Some(Bson::Array(stages)) => literal_replacement(stages)?,
        _ => {
            return Err(CmdError::new(
                9,
                "FailedToParse",
                "BSON field 'u' is missing but a required field",
            ))
        }
    };
    let multi = truthy(u.get("multi"));
    let upsert = truthy(u.get("upsert"));
    let modifier = is_modifier(&spec);
    if multi && !modifier {
        return Err(CmdError::new(
            9,
            "FailedToParse",
            "multi update is not supported for replacement-style update",
        ));
    }
    let mut targets = Vec::new();
    if let Some(c) = st.store.get(db, coll) {
        for (rid, d) in c.iter() {
            if matches(&d, &q).map_err(CmdError::bad_value)? {
                targets.push((rid, d.into_owned()));
                if !multi {
                    break;
                }
            }
        }
    }
    if targets.is_empty() {
        if !upsert {
            return Ok((0, 0, None));
        }
        writes::ensure_collection(st, db, coll)?;
        let seed = upsert_seed(&q);
        let new = if modifier {
            apply_modifiers(&seed, &spec, true)?
        } else {
            let mut base = Document::new();
            if let Some(id) = seed.get("_id") {
                base.insert("_id", id.clone());
            }
            let mut r = base;
            for (k, v) in &spec {
                r.insert(k.clone(), v.clone());
            }
            r
        };
        let new = new_id_first(new);
        let id = new.get("_id").cloned().unwrap_or(Bson::Null);
        writes::insert_doc(st, db, coll, new).map_err(|d| {
            CmdError::new(
                11000,
                "DuplicateKey",
                writes::dup_key_message(db, coll, &d.0),
            )
        })?;
        return Ok((0, 0, Some(id)));
    }
    let (mut matched, mut changed) = (0, 0);
    for (rid, old) in targets {
        matched += 1;
        let new = if modifier {
            apply_modifiers(&old, &spec, false)?
        } else {
            replace(&old, &spec)?
        };
        if crate::matcher::cmp_docs(&old, &new).is_ne() || old.keys().ne(new.keys()) {
            writes::replace_doc(st, db, coll, rid, new);
            changed += 1;
        }
    }
    Ok((matched, changed, None))
}

fn delete(st: &mut State, db: &str, cmd: &Document) -> CmdResult<Outcome> {
    let coll = coll_arg(cmd, "delete")?;
    views::check_writable(st, db, &coll)?;
    let deletes = docs_arg(cmd, "deletes")?;
    let mut n = 0;
    for d in deletes {
        let q = sub_doc(&d, "q")?;
        let limit = num(d.get("limit")).unwrap_or(0);
        if limit != 0 && limit != 1 {
            return Err(CmdError::bad_value(format!(
                "The limit field in delete objects must be 0 or 1. Got {limit}"
            )));
        }
        let mut victims = Vec::new();
        if let Some(c) = st.store.get(db, &coll) {
            for (rid, doc) in c.iter() {
                if matches(&doc, &q).map_err(CmdError::bad_value)? {
                    victims.push(rid);
                    if limit == 1 {
                        break;
                    }
                }
            }
        }
        for rid in victims {
            writes::delete_doc(st, db, &coll, rid);
            n += 1;
        }
    }
    Ok(ok(doc! {"n": n}))
}

/// Evaluate a tiny subset of aggregation expressions: `"$field"` paths, literals and
/// documents of those.
fn eval(doc: &Document, e: &Bson) -> Bson {
    match e {
        Bson::String(s) if s.starts_with('$') => crate::matcher::lookup(doc, &s[1..])
            .first()
            .map(|v| (*v).clone())
            .unwrap_or(Bson::Null),
        Bson::Document(d) => {
            let mut out = Document::new();
            for (k, v) in d {
                out.insert(k.clone(), eval(doc, v));
            }
            Bson::Document(out)
        }
        other => other.clone(),
    }
}

fn add(a: &Bson, b: &Bson) -> Bson {
    match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => x
            .checked_add(*y)
            .map(Bson::Int32)
            .unwrap_or(Bson::Int64(*x as i64 + *y as i64)),
        (Bson::Int32(_) | Bson::Int64(_), Bson::Int32(_) | Bson::Int64(_)) => {
            Bson::Int64(num(Some(a)).unwrap_or(0) + num(Some(b)).unwrap_or(0))
        }
        (Bson::Double(x), o) | (o, Bson::Double(x)) => match o {
            Bson::Double(y) => Bson::Double(x + y),
            Bson::Int32(y) => Bson::Double(x + *y as f64),
            Bson::Int64(y) => Bson::Double(x + *y as f64),
            _ => Bson::Double(*x),
        },
        (x, _) => x.clone(),
    }
}

fn group(docs: Vec<Document>, spec: &Document) -> CmdResult<Vec<Document>> {
    let id_expr = spec.get("_id").cloned().unwrap_or(Bson::Null);
    let mut groups: Vec<(Bson, Document)> = Vec::new();
    for d in &docs {
        let key = eval(d, &id_expr);
        let pos = match groups
            .iter()
            .position(|(k, _)| crate::matcher::values_equal(k, &key))
        {
            Some(p) => p,
            None => {
                groups.push((key.clone(), doc! {"_id": key.clone()}));
                groups.len() - 1
            }
        };
        let acc = &mut groups[pos].1;
        for (field, a) in spec {
            if field == "_id" {
                continue;
            }
            let Bson::Document(a) = a else {
                return Err(CmdError::new(
                    40234,
                    "Location40234",
                    format!("The field '{field}' must be an accumulator object"),
                ));
            };
            let Some((op, arg)) = a.iter().next() else {
                continue;
            };
            let v = eval(d, arg);
            let cur = acc.get(field).cloned();
            let new = match op.as_str() {
                "$sum" => {
                    let v = if matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)) { v } else { Bson::Int32(0) };
                    add(cur.as_ref().unwrap_or(&Bson::Int32(0)), &v)
                }
                "$count" => add(cur.as_ref().unwrap_or(&Bson::Int32(0)), &Bson::Int32(1)),
                "$first" => cur.unwrap_or(v),
                "$last" => v,
                "$min" => match cur { Some(c) if crate::matcher::cmp_values(&c, &v).is_le() => c, _ => v },
                "$max" => match cur { Some(c) if crate::matcher::cmp_values(&c, &v).is_ge() => c, _ => v },
                "$push" => {
                    let mut arr = match cur { Some(Bson::Array(a)) => a, _ => vec![] };
                    arr.push(v);
                    Bson::Array(arr)
                }
                other => {
                    return Err(CmdError::new(15952, "Location15952", format!("unknown group operator '{other}' (not implemented by the pitr stand-in mongod)")))
                }
            };
            acc.insert(field.clone(), new);
        }
    }
    Ok(groups.into_iter().map(|(_, d)| d).collect())
}

/// `$sample`: `size` documents drawn without replacement, in random order (all of
/// them, shuffled, when there are fewer). (stand-in) A fixed-seed generator: the
/// same data gives the same sample.
fn sample<T>(mut docs: Vec<T>, size: usize) -> Vec<T> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ docs.len() as u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let n = docs.len();
    let take = size.min(n);
    for i in 0..take {
        let j = i + (next() % (n - i) as u64) as usize;
        docs.swap(i, j);
    }
    docs.truncate(take);
    docs
}

fn aggregate(st: &mut State, db: &str, cmd: &Document) -> CmdResult<Outcome> {
    let coll = match cmd.get("aggregate") {
        Some(Bson::String(s)) => s.clone(),
        _ => {
            return Err(CmdError::new(
                73,
                "InvalidNamespace",
                "collection-less aggregate is not implemented by the pitr stand-in mongod",
            ))
        }
    };
    views::check_readable(st, db, &coll)?;
    let ns = format!("{db}.{coll}");
    let pipeline = docs_arg(cmd, "pipeline")?;
    let batch_size = cmd
        .get_document("cursor")
        .ok()
        .and_then(|c| num(c.get("batchSize")))
        .map(|b| b.max(0) as usize)
        .unwrap_or(101);
    // References into the store until a stage makes new documents ($project,
    // $group, $count): `$count` and `$sample` copy nothing of the collection.
    let mut docs: Vec<(u64, Cow<'_, Document>)> = st
        .store
        .get(db, &coll)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    for stage in &pipeline {
        let Some((name, arg)) = stage.iter().next() else {
            return Err(CmdError::new(
                40323,
                "Location40323",
                "A pipeline stage specification object must contain exactly one field.",
            ));
        };
        match name.as_str() {
            "$match" => {
                let Bson::Document(f) = arg else { return Err(CmdError::bad_value("$match needs a document")) };
                let mut kept = Vec::new();
                for (r, d) in docs {
                    if matches(&d, f).map_err(CmdError::bad_value)? {
                        kept.push((r, d));
                    }
                }
                docs = kept;
            }
            "$sort" => {
                let Bson::Document(s) = arg else { return Err(CmdError::bad_value("$sort needs a document")) };
                sort_records(&mut docs, s).map_err(CmdError::bad_value)?;
            }
            "$skip" => docs = docs.into_iter().skip(num(Some(arg)).unwrap_or(0).max(0) as usize).collect(),
            "$limit" => docs.truncate(num(Some(arg)).unwrap_or(0).max(0) as usize),
            "$project" => {
                let Bson::Document(p) = arg else { return Err(CmdError::bad_value("$project needs a document")) };
                docs = docs.into_iter().map(|(r, d)| (r, Cow::Owned(project(&d, p)))).collect();
            }
            "$group" => {
                let Bson::Document(g) = arg else { return Err(CmdError::bad_value("$group needs a document")) };
                docs = group(docs.into_iter().map(|(_, d)| d.into_owned()).collect(), g)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, d)| (i as u64, Cow::Owned(d)))
                    .collect();
            }
            "$sample" => {
                let size = match arg {
                    Bson::Document(d) => num(d.get("size")),
                    _ => None,
                };
                let Some(size) = size.filter(|n| *n >= 0) else {
                    return Err(CmdError::new(28746, "Location28746", "size argument to $sample must be a number"));
                };
                docs = sample(docs, size as usize);
            }
            "$count" => {
                let Bson::String(field) = arg else { return Err(CmdError::bad_value("$count needs a string")) };
                let n = docs.len() as i32;
                docs = if n == 0 { vec![] } else { vec![(0, Cow::Owned(doc! {field.clone(): n}))] };
            }
            other => {
                return Err(CmdError::new(
                    40324,
                    "Location40324",
                    format!("Unrecognized pipeline stage name: '{other}' (not implemented by the pitr stand-in mongod)"),
                ))
            }
        }
    }
    let mut queue: VecDeque<Vec<u8>> = docs.into_iter().map(|(_, d)| buffered(&d)).collect();
    let first = take_batch(&mut queue, Some(batch_size));
    if queue.is_empty() {
        return Ok(Outcome::Reply(cursor_reply(0, &ns, true, first)));
    }
    let id = st.new_cursor_id();
    st.cursors.insert(
        id,
        Cursor {
            db: db.to_string(),
            coll,
            kind: CursorKind::Buffered(queue),
            last_ts: None,
        },
    );
    Ok(Outcome::Reply(cursor_reply(id, &ns, true, first)))
}

/// Split a `db.coll` namespace (re-exported for the server loop).
pub fn ns_parts(ns: &str) -> (&str, &str) {
    split_ns(ns)
}
