//! `applyOps`: applying oplog entries, which is how mongorestore replays an oplog.
//!
//! Behaviour copied from a 7.0 server where it matters to a restore: inserts,
//! updates and deletes need their collection to exist (`NamespaceNotFound`
//! otherwise: applyOps does not create namespaces); an insert of an existing `_id`
//! and an update of a missing document upsert; `ui`, when present, must name an
//! existing collection; `n` is a no-op; unknown op types and commands are refused.

use super::state::{CmdError, CmdResult, State};
use super::store::split_ns;
use super::writes;
use crate::update::{apply_oplog_update, upsert_seed};
use bson::{doc, Bson, Document};

fn get_doc<'a>(e: &'a Document, key: &str) -> CmdResult<&'a Document> {
    match e.get(key) {
        Some(Bson::Document(d)) => Ok(d),
        _ => Err(CmdError::bad_value(format!(
            "applyOps entry is missing the '{key}' document: {e}"
        ))),
    }
}

/// Resolve the target collection of a CRUD entry: by `ui` when given, else by `ns`.
fn target(st: &State, e: &Document, what: &str) -> CmdResult<(String, String)> {
    if let Some(Bson::Binary(b)) = e.get("ui") {
        let uuid = b
            .to_uuid()
            .map_err(|_| CmdError::bad_value("'ui' is not a UUID"))?;
        return st.store.find_uuid(&uuid).ok_or_else(|| {
            CmdError::ns_not_found(format!(
                "Failed to apply operation due to missing collection ({uuid}): {e}"
            ))
        });
    }
    let ns = e.get_str("ns").unwrap_or_default();
    let (db, coll) = split_ns(ns);
    if !st.store.exists(db, coll) {
        return Err(CmdError::ns_not_found(format!(
            "Failed to apply {what} due to missing collection: {e}"
        )));
    }
    Ok((db.to_string(), coll.to_string()))
}

/// Apply one oplog entry.
pub fn apply_entry(st: &mut State, e: &Document) -> CmdResult<()> {
    let op = e
        .get_str("op")
        .map_err(|_| CmdError::bad_value(format!("applyOps entry without 'op': {e}")))?;
    match op {
        "n" => Ok(()),
        "i" => {
            let (db, coll) = target(st, e, "insert")?;
            let mut o = get_doc(e, "o")?.clone();
            if !o.contains_key("_id") {
                let mut with_id = doc! {"_id": bson::oid::ObjectId::new()};
                with_id.extend(o);
                o = with_id;
            }
            let existing = st
                .store
                .get(&db, &coll)
                .and_then(|c| c.find_id(o.get("_id").expect("set")));
            match existing {
                Some(rid) => writes::replace_doc(st, &db, &coll, rid, o),
                None => {
                    let _ = writes::insert_doc(st, &db, &coll, o);
                }
            }
            Ok(())
        }
        "u" => {
            let (db, coll) = target(st, e, "update")?;
            let o = get_doc(e, "o")?;
            let key = get_doc(e, "o2")?;
            let c = st.store.get(&db, &coll).expect("resolved");
            let rid = match key.get("_id") {
                Some(id) => c.find_id(id),
                None => c
                    .iter()
                    .find(|(_, d)| crate::matcher::matches(d, key).unwrap_or(false))
                    .map(|(r, _)| r),
            };
            match rid {
                Some(rid) => {
                    let new = apply_oplog_update(c.get(rid).expect("present"), o)?;
                    writes::replace_doc(st, &db, &coll, rid, new);
                }
                None => {
                    let seed = upsert_seed(key);
                    let new = apply_oplog_update(&seed, o)?;
                    let _ = writes::insert_doc(st, &db, &coll, new);
                }
            }
            Ok(())
        }
        "d" => {
            let (db, coll) = target(st, e, "delete")?;
            let o = get_doc(e, "o")?;
            let c = st.store.get(&db, &coll).expect("resolved");
            let rid = match o.get("_id") {
                Some(id) => c.find_id(id),
                None => c
                    .iter()
                    .find(|(_, d)| crate::matcher::matches(d, o).unwrap_or(false))
                    .map(|(r, _)| r),
            };
            if let Some(rid) = rid {
                writes::delete_doc(st, &db, &coll, rid);
            }
            Ok(())
        }
        "c" => apply_command(st, e),
        other => Err(CmdError::bad_value(format!(
            "Unknown opType '{other}' in applyOps entry: {e}"
        ))),
    }
}

fn apply_command(st: &mut State, e: &Document) -> CmdResult<()> {
    let o = get_doc(e, "o")?.clone();
    let ns = e.get_str("ns").unwrap_or_default();
    let (db, _) = split_ns(ns);
    let db = db.to_string();
    let Some((name, value)) = o.iter().next() else {
        return Err(CmdError::bad_value("empty command in applyOps entry"));
    };
    let coll = value.as_str().unwrap_or_default().to_string();
    let ui = match e.get("ui") {
        Some(Bson::Binary(b)) => b.to_uuid().ok(),
        _ => None,
    };
    match name.as_str() {
        "create" => {
            let mut options = Document::new();
            for (k, v) in o.iter().skip(1) {
                if k != "idIndex" {
                    options.insert(k.clone(), v.clone());
                }
            }
            writes::create_collection(st, &db, &coll, options, ui)
        }
        "drop" => {
            writes::drop_collection(st, &db, &coll);
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
            writes::rename_collection(st, &from, &to, drop_target)
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
            writes::drop_indexes(st, &db, &coll, &which).map(|_| ())
        }
        "collMod" => {
            if let Some(c) = st.store.get_mut(&db, &coll) {
                for (k, v) in o.iter().skip(1) {
                    if k != "index" {
                        c.options.insert(k.clone(), v.clone());
                    }
                }
                Ok(())
            } else {
                Err(CmdError::ns_not_found(format!("ns does not exist: {db}.{coll}")))
            }
        }
        "convertToCapped" => {
            let c = st
                .store
                .get_mut(&db, &coll)
                .ok_or_else(|| CmdError::ns_not_found(format!("source collection {db}.{coll} does not exist")))?;
            c.options.insert("capped", true);
            if let Some(size) = o.get("size") {
                c.options.insert("size", size.clone());
            }
            Ok(())
        }
        "emptycapped" => {
            if let Some(c) = st.store.get_mut(&db, &coll) {
                c.clear();
            }
            Ok(())
        }
        "applyOps" => {
            let Bson::Array(ops) = value else {
                return Err(CmdError::bad_value("applyOps must be an array"));
            };
            for op in ops {
                let Bson::Document(op) = op else {
                    return Err(CmdError::bad_value("applyOps entries must be documents"));
                };
                apply_entry(st, op)?;
            }
            Ok(())
        }
        "startIndexBuild" | "abortIndexBuild" | "dbCheck" | "setMultikeyMetadata" => Ok(()),
        other => Err(CmdError::bad_value(format!(
            "Invalid command in applyOps entry: '{other}' (not implemented by the pitr stand-in mongod): {e}"
        ))),
    }
}
