//! `applyOps`: applying oplog entries, which is how mongorestore replays an oplog.
//!
//! Ported from `src/mongo/db/repl/apply_ops.cpp` `_applyOps` (6.0-era commit
//! ab5428c1, newest stored 00fd21d4) and `applyOperation_inlock`
//! (`src/mongo/db/repl/oplog.cpp`), for the release the stand-in plays
//! ([`super::version`]):
//!
//! - `n` entries are skipped and do not appear in `results`;
//! - CRUD on a missing collection: `d` succeeds, `i`/`u` fail the whole command with
//!   NamespaceNotFound "cannot apply insert or update operation on a non-existent
//!   namespace ..." (applyOps never creates a collection);
//! - `i` needs `_id` (NoSuchKey); an existing `_id` is replaced by `o` (the
//!   DuplicateKey retry as an upsert, or on 6.0 the atomic-mode upsert);
//! - `u` needs `o2._id` (NoSuchKey) and matches by `_id` only. `o` with `_id` is a
//!   replacement, `$v:2` a diff; a `$v:1` or unversioned modifier update is accepted by
//!   6.0 and 8.0 but refused by 7.0 (4772600). With no matching document it upserts
//!   when `alwaysUpsert` (default true on 6.0, refused with 6711601 from 6.2) or the
//!   entry's `b: true` say so; otherwise that op fails (UpdateOperationFailed, "Failed
//!   to apply update" / "Update of non-mod failed"), the others still apply, and the
//!   command answers UnknownError "applyOps had one or more errors applying ops";
//! - `d` needs `o._id` (NoSuchKey), deletes by `_id`, deleting nothing is fine;
//! - a `ui` must name the entry's `ns` (7.0+: 3318200 "... point to different
//!   collections"; pinned from the newest source, assumed for 7.0); on 6.0 the
//!   collection is looked up by `ui`;
//! - on 6.0 a CRUD-only applyOps is atomic (`allowAtomic`, default true): a failing
//!   op undoes the others and the command fails with that op's own error;
//! - commands swallow their "acceptable" errors (create: NamespaceExists; drop,
//!   dropIndexes, collMod: NamespaceNotFound; renameCollection: NamespaceNotFound,
//!   NamespaceExists; dropIndexes, collMod: IndexNotFound), and a `dropDatabase` must be
//!   the only entry (6275900).

use super::state::{CmdError, CmdResult, State};
use super::store::split_ns;
use super::{views, writes};
use crate::update::{apply_doc_diff, apply_modifiers, is_modifier, replace};
use bson::{doc, Bson, Document};

/// How one entry failed.
#[derive(Debug)]
pub enum OpError {
    /// Thrown (uassert): stops the command, which fails with this error.
    Abort(CmdError),
    /// Returned as a status: this op's result is false, the others still run.
    Failed(CmdError),
}

impl From<CmdError> for OpError {
    fn from(e: CmdError) -> Self {
        OpError::Abort(e)
    }
}

type OpResult = Result<(), OpError>;

fn get_doc<'a>(e: &'a Document, key: &str) -> CmdResult<&'a Document> {
    match e.get(key) {
        Some(Bson::Document(d)) => Ok(d),
        _ => Err(CmdError::new(
            40414,
            "Location40414",
            format!("BSON field 'OplogEntryBase.{key}' is missing but a required field"),
        )),
    }
}

fn no_such_key(what: &str, e: &Document) -> CmdError {
    CmdError::new(
        4,
        "NoSuchKey",
        format!("Failed to apply {what} due to missing _id: {e}"),
    )
}

/// Resolve the target collection of a CRUD entry; `None` when it does not exist.
fn target(st: &State, e: &Document) -> Result<Option<(String, String)>, OpError> {
    let ns = e.get_str("ns").unwrap_or_default();
    let (db, coll) = split_ns(ns);
    if let Some(Bson::Binary(b)) = e.get("ui") {
        let uuid = b
            .to_uuid()
            .map_err(|_| CmdError::bad_value("'ui' is not a UUID"))?;
        let found = st.store.find_uuid(&uuid);
        if st.version.major >= 7 {
            if found.as_ref().map(|(d, c)| (d.as_str(), c.as_str())) != Some((db, coll)) {
                return Err(OpError::Failed(CmdError::new(
                    3318200,
                    "Location3318200",
                    format!("Namespace '{ns}' and UUID '{uuid}' point to different collections"),
                )));
            }
        } else {
            return match found {
                Some(t) => Ok(Some(t)),
                None => Err(CmdError::ns_not_found(format!(
                    "Failed to apply operation due to missing collection ({uuid}): {e}"
                ))
                .into()),
            };
        }
    }
    Ok(st
        .store
        .exists(db, coll)
        .then(|| (db.to_string(), coll.to_string())))
}

fn missing_collection(e: &Document) -> OpError {
    let ns = e.get_str("ns").unwrap_or_default();
    OpError::Abort(CmdError::ns_not_found(format!(
        "cannot apply insert or update operation on a non-existent namespace {ns}: {e}"
    )))
}

/// Apply one oplog entry (`always_upsert`: the command's effective `alwaysUpsert`).
pub fn apply_entry(st: &mut State, e: &Document, always_upsert: bool) -> OpResult {
    let op = e
        .get_str("op")
        .map_err(|_| CmdError::bad_value(format!("applyOps entry without 'op': {e}")))?;
    match op {
        "n" => Ok(()),
        "i" => {
            let Some((db, coll)) = target(st, e)? else {
                return Err(missing_collection(e));
            };
            let o = get_doc(e, "o")?.clone();
            let Some(id) = o.get("_id").cloned() else {
                return Err(no_such_key("insert", e).into());
            };
            match st.store.get(&db, &coll).and_then(|c| c.find_id(&id)) {
                // parseFromClassicUpdate(o): a replacement, `_id` kept first.
                Some(rid) => {
                    let old = st
                        .store
                        .get(&db, &coll)
                        .and_then(|c| c.get(rid))
                        .map(|d| d.into_owned())
                        .unwrap_or_default();
                    let new = replace(&old, &o).map_err(CmdError::from)?;
                    writes::replace_doc(st, &db, &coll, rid, new);
                }
                None => {
                    let _ = writes::insert_doc(st, &db, &coll, o);
                }
            }
            Ok(())
        }
        "u" => apply_update(st, e, always_upsert),
        "d" => {
            let Some((db, coll)) = target(st, e)? else {
                return Ok(());
            };
            let o = get_doc(e, "o")?;
            let Some(id) = o.get("_id") else {
                return Err(no_such_key("delete", e).into());
            };
            if let Some(rid) = st.store.get(&db, &coll).and_then(|c| c.find_id(id)) {
                writes::delete_doc(st, &db, &coll, rid);
            }
            Ok(())
        }
        "c" => apply_command(st, e, always_upsert),
        other => Err(CmdError::bad_value(format!(
            "Unknown opType '{other}' in applyOps entry: {e}"
        ))
        .into()),
    }
}

/// The three forms of a `u` entry's `o` (`UpdateModification::parseFromOplogEntry`).
enum UpdateForm {
    Replacement,
    Delta(Document),
    Classic,
}

fn classify(st: &State, o: &Document) -> CmdResult<UpdateForm> {
    if o.contains_key("_id") {
        return Ok(UpdateForm::Replacement);
    }
    let v = o.get("$v");
    let v2 = matches!(v, Some(Bson::Int32(2)) | Some(Bson::Int64(2)))
        || matches!(v, Some(Bson::Double(d)) if *d == 2.0);
    if v2 {
        return match o.get("diff") {
            Some(Bson::Document(d)) => Ok(UpdateForm::Delta(d.clone())),
            other => Err(CmdError::new(
                4772601,
                "Location4772601",
                format!(
                    "Expected 'diff' field to be an object, instead got type: {:?}",
                    other.map(|b| b.element_type())
                ),
            )),
        };
    }
    if !st.version.apply_ops_accepts_v1_updates() {
        let shown = v
            .map(|b| format!("$v: {b}"))
            .unwrap_or_else(|| "EOO".into());
        return Err(CmdError::new(
            4772600,
            "Location4772600",
            format!("Expected _id field or $v:2, but got: {shown}"),
        ));
    }
    Ok(UpdateForm::Classic)
}

fn apply_form(
    form: &UpdateForm,
    doc: &Document,
    o: &Document,
    inserting: bool,
) -> CmdResult<Document> {
    Ok(match form {
        UpdateForm::Replacement => replace(doc, o)?,
        UpdateForm::Delta(diff) => {
            let mut out = doc.clone();
            apply_doc_diff(&mut out, diff)?;
            out
        }
        UpdateForm::Classic => {
            let mut o = o.clone();
            o.remove("$v");
            if is_modifier(&o) {
                apply_modifiers(doc, &o, inserting)?
            } else {
                replace(doc, &o)?
            }
        }
    })
}

fn apply_update(st: &mut State, e: &Document, always_upsert: bool) -> OpResult {
    let Some((db, coll)) = target(st, e)? else {
        return Err(missing_collection(e));
    };
    let o = get_doc(e, "o")?.clone();
    let o2 = get_doc(e, "o2")?;
    let Some(id) = o2.get("_id").cloned() else {
        return Err(no_such_key("update", e).into());
    };
    let form = classify(st, &o)?;
    let upsert = always_upsert || matches!(e.get("b"), Some(Bson::Boolean(true)));
    match st.store.get(&db, &coll).and_then(|c| c.find_id(&id)) {
        Some(rid) => {
            let old = st
                .store
                .get(&db, &coll)
                .and_then(|c| c.get(rid))
                .map(|d| d.into_owned())
                .unwrap_or_default();
            let new = apply_form(&form, &old, &o, false)?;
            if new != old || new.keys().ne(old.keys()) {
                writes::replace_doc(st, &db, &coll, rid, new);
            }
            Ok(())
        }
        None if upsert => {
            let new = apply_form(&form, &doc! {"_id": id.clone()}, &o, true)?;
            // update::ensureIdFieldIsFirst
            let mut out = doc! {"_id": new.get("_id").cloned().unwrap_or(id)};
            for (k, v) in new {
                if k != "_id" {
                    out.insert(k, v);
                }
            }
            let _ = writes::insert_doc(st, &db, &coll, out);
            Ok(())
        }
        None => {
            let msg = match form {
                UpdateForm::Replacement => "Update of non-mod failed",
                _ => "Failed to apply update",
            };
            Err(OpError::Failed(CmdError::new(
                77,
                "UpdateOperationFailed",
                format!("{msg}: {e}"),
            )))
        }
    }
}

/// Run a command's body, turning its "acceptable" errors into success.
fn tolerate(r: CmdResult<()>, acceptable: &[i32]) -> CmdResult<()> {
    match r {
        Err(e) if acceptable.contains(&e.code) => Ok(()),
        other => other,
    }
}

const NS_NOT_FOUND: i32 = 26;
const NS_EXISTS: i32 = 48;
const INDEX_NOT_FOUND: i32 = 27;

fn apply_command(st: &mut State, e: &Document, always_upsert: bool) -> OpResult {
    let o = get_doc(e, "o")?.clone();
    let ns = e.get_str("ns").unwrap_or_default();
    let (db, _) = split_ns(ns);
    let db = db.to_string();
    let Some((name, value)) = o.iter().next() else {
        return Err(CmdError::bad_value("empty command in applyOps entry").into());
    };
    let coll = value.as_str().unwrap_or_default().to_string();
    let ui = match e.get("ui") {
        Some(Bson::Binary(b)) => b.to_uuid().ok(),
        _ => None,
    };
    let r = match name.as_str() {
        "create" => {
            let mut options = Document::new();
            for (k, v) in o.iter().skip(1) {
                options.insert(k.clone(), v.clone());
            }
            let r = if options.contains_key("viewOn") {
                views::create_view(st, &db, &coll, &options)
            } else if options.contains_key("timeseries") && !coll.starts_with(views::BUCKETS_PREFIX) {
                views::create_timeseries(st, &db, &coll, &options, ui)
            } else {
                writes::create_collection(st, &db, &coll, options, ui)
            };
            tolerate(r, &[NS_EXISTS])
        }
        "drop" => {
            if views::drop_view(st, &db, &coll).is_none() {
                writes::drop_collection(st, &db, &coll);
            }
            Ok(())
        }
        "dropDatabase" => {
            writes::drop_database(st, &db);
            Ok(())
        }
        "renameCollection" => {
            let from = value.as_str().unwrap_or_default().to_string();
            let to = o.get_str("to").unwrap_or_default().to_string();
            let drop_target = match o.get("dropTarget") {
                Some(Bson::Boolean(b)) => *b,
                Some(Bson::Binary(_)) => true,
                _ => false,
            };
            tolerate(
                writes::rename_collection(st, &from, &to, drop_target),
                &[NS_NOT_FOUND, NS_EXISTS],
            )
        }
        "createIndexes" => {
            writes::ensure_collection(st, &db, &coll)?;
            let mut spec = Document::new();
            for (k, v) in o.iter().skip(1) {
                spec.insert(k.clone(), v.clone());
            }
            writes::create_index(st, &db, &coll, spec).map(|_| ())
        }
        "commitIndexBuild" => {
            writes::ensure_collection(st, &db, &coll)?;
            if let Some(Bson::Array(specs)) = o.get("indexes") {
                for s in specs {
                    if let Bson::Document(s) = s {
                        writes::create_index(st, &db, &coll, s.clone())?;
                    }
                }
            }
            Ok(())
        }
        "dropIndexes" | "deleteIndexes" | "deleteIndex" | "dropIndex" => {
            let which = o.get("index").cloned().unwrap_or(Bson::String("*".into()));
            tolerate(
                writes::drop_indexes(st, &db, &coll, &which).map(|_| ()),
                &[NS_NOT_FOUND, INDEX_NOT_FOUND],
            )
        }
        "collMod" => match st.store.get_mut(&db, &coll) {
            Some(c) => {
                for (k, v) in o.iter().skip(1) {
                    if k != "index" {
                        c.options.insert(k.clone(), v.clone());
                    }
                }
                Ok(())
            }
            None => Ok(()),
        },
        "convertToCapped" => match st.store.get_mut(&db, &coll) {
            Some(c) => {
                c.options.insert("capped", true);
                if let Some(size) = o.get("size") {
                    c.options.insert("size", size.clone());
                }
                Ok(())
            }
            None => Ok(()),
        },
        "emptycapped" => {
            if let Some(c) = st.store.get_mut(&db, &coll) {
                c.clear();
            }
            Ok(())
        }
        "applyOps" => {
            let Bson::Array(ops) = value else {
                return Err(CmdError::bad_value("applyOps must be an array").into());
            };
            for op in ops {
                let Bson::Document(op) = op else {
                    return Err(CmdError::bad_value("applyOps entries must be documents").into());
                };
                match apply_entry(st, op, always_upsert) {
                    Ok(()) => {}
                    Err(OpError::Abort(e)) | Err(OpError::Failed(e)) => return Err(e.into()),
                }
            }
            Ok(())
        }
        "startIndexBuild" | "abortIndexBuild" | "dbCheck" | "setMultikeyMetadata" => Ok(()),
        other => Err(CmdError::bad_value(format!(
            "Invalid command in applyOps entry: '{other}' (not implemented by the pitr stand-in mongod): {e}"
        ))),
    };
    r.map_err(OpError::Abort)
}

/// The `applyOps` command: the reply document, or the error that fails it.
pub fn apply_ops_command(st: &mut State, cmd: &Document) -> Result<Document, Document> {
    let fail = |e: CmdError| e.to_doc();
    let ops: Vec<Document> = match cmd.get("applyOps") {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| match v {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(fail(CmdError::type_mismatch(
                    "applyOps entries must be documents",
                ))),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(fail(CmdError::type_mismatch("ops has to be an array"))),
    };
    if cmd.contains_key("prepare") {
        return Err(fail(CmdError::bad_value(
            "applyOps command can't have 'prepare' field",
        )));
    }
    if cmd.contains_key("partialTxn") {
        return Err(fail(CmdError::new(
            31056,
            "Location31056",
            "applyOps command can't have 'partialTxn' field.",
        )));
    }
    if cmd.contains_key("count") {
        return Err(fail(CmdError::new(
            31240,
            "Location31240",
            "applyOps command can't have 'count' field.",
        )));
    }
    if cmd.contains_key("preCondition") {
        return Err(fail(CmdError::bad_value(
            "pitr stand-in mongod: applyOps 'preCondition' is not implemented",
        )));
    }
    let always_upsert = if st.version.apply_ops_always_upsert() {
        cmd.get("alwaysUpsert")
            .map(|v| !matches!(v, Bson::Boolean(false) | Bson::Null) && v.as_i32() != Some(0))
            .unwrap_or(true)
    } else {
        if cmd.contains_key("alwaysUpsert") {
            // The option was removed with atomic applyOps in 6.2; the message is the
            // stand-in's, the code the server's (jstests/core/apply_ops2.js).
            return Err(fail(CmdError::new(
                6711601,
                "Location6711601",
                "applyOps 'alwaysUpsert' is no longer supported",
            )));
        }
        false
    };
    let has_drop_db = ops.iter().any(|op| {
        op.get_str("op") == Ok("c")
            && op
                .get_document("o")
                .ok()
                .and_then(|o| o.keys().next().cloned())
                .as_deref()
                == Some("dropDatabase")
    });
    if has_drop_db && ops.len() != 1 {
        return Err(fail(CmdError::new(
            6275900,
            "Location6275900",
            "dropDatabase in an applyOps must be the only entry",
        )));
    }
    // 6.0 (before 6.2) applies a CRUD-only applyOps atomically unless `allowAtomic:
    // false`: one failing op undoes the others and fails the command with its own
    // error, every result false (`applyOps` in apply_ops.cpp@ab5428c1). A missing
    // collection raises AtomicityFailure there, and the ops are retried one by one,
    // which is what the non-atomic path below does anyway.
    let crud_only = ops
        .iter()
        .all(|op| matches!(op.get_str("op"), Ok("i" | "u" | "d" | "n")));
    let atomic = st.version.apply_ops_always_upsert()
        && crud_only
        && !matches!(cmd.get("allowAtomic"), Some(Bson::Boolean(false)));
    let missing_coll = ops.iter().any(|op| {
        matches!(op.get_str("op"), Ok("i" | "u"))
            && op
                .get_str("ns")
                .map(|ns| {
                    let (d, c) = split_ns(ns);
                    !st.store.exists(d, c)
                })
                .unwrap_or(false)
    });
    let snapshot = (atomic && !missing_coll).then(|| (st.store.clone(), st.last_ts));
    let mut results: Vec<Bson> = Vec::new();
    let mut errors = 0;
    for op in &ops {
        if op.get_str("op") == Ok("n") {
            continue;
        }
        let outcome = apply_entry(st, op, always_upsert);
        if let (Err(OpError::Failed(e)) | Err(OpError::Abort(e)), Some((store, last_ts))) =
            (&outcome, &snapshot)
        {
            st.store = store.clone();
            st.last_ts = *last_ts;
            let applied = results.len() as i32 + 1;
            let mut d = e.to_doc();
            d.insert("applied", applied);
            d.insert("results", vec![Bson::Boolean(false); applied as usize]);
            return Err(d);
        }
        match outcome {
            Ok(()) => results.push(Bson::Boolean(true)),
            Err(OpError::Failed(e)) => {
                st.logger.info(
                    "COMMAND",
                    21064,
                    "conn",
                    "applyOps error applying",
                    serde_json::json!({"error": e.msg}),
                );
                results.push(Bson::Boolean(false));
                errors += 1;
            }
            Err(OpError::Abort(e)) => {
                results.push(Bson::Boolean(false));
                let mut d = e.to_doc();
                d.insert("applied", results.len() as i32);
                d.insert("results", results);
                return Err(d);
            }
        }
    }
    let applied = results.len() as i32;
    if errors > 0 {
        let mut d = CmdError::new(
            8,
            "UnknownError",
            "applyOps had one or more errors applying ops",
        )
        .to_doc();
        d.insert("applied", applied);
        d.insert("results", results);
        return Err(d);
    }
    Ok(doc! {"applied": applied, "results": results})
}
