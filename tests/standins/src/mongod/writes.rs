//! Every change to the data goes through here, so that in replica-set mode each one
//! is also recorded in `local.oplog.rs` the way a primary records it (inserts, `$v:2`
//! updates, deletes, `create`, `drop` with `o2.numRecords`, `renameCollection`, the
//! per-collection drops before `dropDatabase`, `createIndexes`, `dropIndexes`).

use super::state::{CmdError, CmdResult, State};
use super::store::{Collection, DuplicateKey};
use bson::{doc, Bson, Document};

pub fn valid_coll_name(db: &str, coll: &str) -> CmdResult<()> {
    if db.is_empty() || db.contains(['/', '\\', ' ', '"', '$', '.']) {
        return Err(CmdError::new(
            73,
            "InvalidNamespace",
            format!("Invalid database name: '{db}'"),
        ));
    }
    if coll.is_empty() || coll.contains('$') || coll.starts_with('.') {
        return Err(CmdError::new(
            73,
            "InvalidNamespace",
            format!("Invalid collection name: {db}.{coll}"),
        ));
    }
    Ok(())
}

/// Explicit `create` of a plain collection. `idIndex` in `options` is not an option
/// but the `_id` index spec to build (its `ns` ignored, `v` defaulting to 2), as in
/// the server's `createCollection`; `clusteredIndex` collections get none.
pub fn create_collection(
    st: &mut State,
    db: &str,
    coll: &str,
    mut options: Document,
    ui: Option<bson::Uuid>,
) -> CmdResult<()> {
    valid_coll_name(db, coll)?;
    if st.store.exists(db, coll) || super::views::view_def(st, db, coll).is_some() {
        return Err(CmdError::new(
            48,
            "NamespaceExists",
            format!("Collection {db}.{coll} already exists."),
        ));
    }
    let id_index = match options.remove("idIndex") {
        Some(Bson::Document(spec)) => {
            let mut full = doc! {"v": spec.get("v").cloned().unwrap_or(Bson::Int32(2))};
            full.insert(
                "key",
                spec.get("key")
                    .cloned()
                    .unwrap_or(Bson::Document(doc! {"_id": 1})),
            );
            full.insert(
                "name",
                spec.get("name")
                    .cloned()
                    .unwrap_or(Bson::String("_id_".into())),
            );
            for (k, v) in &spec {
                if !matches!(k.as_str(), "v" | "key" | "name" | "ns") {
                    full.insert(k.clone(), v.clone());
                }
            }
            full
        }
        _ => doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
    };
    let clustered = options.contains_key("clusteredIndex");
    let mut c = match ui {
        Some(u) => Collection::with_uuid(options.clone(), u),
        None => Collection::new(options.clone()),
    };
    c.indexes = if clustered {
        vec![]
    } else {
        vec![id_index.clone()]
    };
    let uuid = c.uuid;
    st.store.put(db, coll, c);
    let mut o = doc! {"create": coll};
    for (k, v) in options {
        o.insert(k, v);
    }
    if !clustered {
        o.insert("idIndex", id_index);
    }
    st.log_op("c", &format!("{db}.$cmd"), Some(uuid), o, None);
    Ok(())
}

/// Create the collection on first write; true when it was created.
pub fn ensure_collection(st: &mut State, db: &str, coll: &str) -> CmdResult<bool> {
    if st.store.exists(db, coll) {
        return Ok(false);
    }
    create_collection(st, db, coll, Document::new(), None)?;
    Ok(true)
}

/// Drop; `Some(number of indexes)` when it existed.
pub fn drop_collection(st: &mut State, db: &str, coll: &str) -> Option<usize> {
    let c = st.store.remove(db, coll)?;
    st.log_op(
        "c",
        &format!("{db}.$cmd"),
        Some(c.uuid),
        doc! {"drop": coll},
        Some(doc! {"numRecords": c.len() as i64}),
    );
    Some(c.indexes.len())
}

pub fn drop_database(st: &mut State, db: &str) {
    for coll in st.store.collection_names(db) {
        drop_collection(st, db, &coll);
    }
    st.log_op(
        "c",
        &format!("{db}.$cmd"),
        None,
        doc! {"dropDatabase": 1},
        None,
    );
}

pub fn rename_collection(st: &mut State, from: &str, to: &str, drop_target: bool) -> CmdResult<()> {
    let (fdb, fcoll) = super::store::split_ns(from);
    let (tdb, tcoll) = super::store::split_ns(to);
    valid_coll_name(tdb, tcoll)?;
    if !st.store.exists(fdb, fcoll) {
        return Err(CmdError::ns_not_found(format!(
            "Source collection {from} does not exist"
        )));
    }
    if from == to {
        return Err(CmdError::new(
            20,
            "IllegalOperation",
            "Can't rename a collection to itself",
        ));
    }
    let mut dropped = None;
    if st.store.exists(tdb, tcoll) {
        if !drop_target {
            return Err(CmdError::new(
                48,
                "NamespaceExists",
                "target namespace exists",
            ));
        }
        dropped = st.store.remove(tdb, tcoll);
    }
    let c = st.store.remove(fdb, fcoll).expect("checked");
    let uuid = c.uuid;
    st.store.put(tdb, tcoll, c);
    let mut o = doc! {"renameCollection": from, "to": to, "stayTemp": false};
    let o2 = match &dropped {
        Some(d) => {
            o.insert("dropTarget", bson::Binary::from_uuid(d.uuid));
            Some(doc! {"numRecords": d.len() as i64})
        }
        None => {
            o.insert("dropTarget", false);
            None
        }
    };
    st.log_op("c", &format!("{fdb}.$cmd"), Some(uuid), o, o2);
    Ok(())
}

pub fn dup_key_message(db: &str, coll: &str, id: &Bson) -> String {
    format!(
        "E11000 duplicate key error collection: {db}.{coll} index: _id_ dup key: {{ _id: {} }}",
        id
    )
}

/// Insert one document (the caller made sure the collection exists and `_id` is set).
pub fn insert_doc(st: &mut State, db: &str, coll: &str, doc: Document) -> Result<(), DuplicateKey> {
    let c = st.store.get_mut(db, coll).expect("collection exists");
    let uuid = c.uuid;
    c.insert(doc.clone())?;
    st.log_op("i", &format!("{db}.{coll}"), Some(uuid), doc, None);
    Ok(())
}

/// Whether two values are the same BSON, bytes and all (`1` and `1.0`, `0.0` and
/// `-0.0` differ): the server's update diff compares binary-equal (`doc_diff.cpp`
/// `computeDiff` uses `binaryEqual`), so a change of number type is a change.
fn identical(a: &Bson, b: &Bson) -> bool {
    a.element_type() == b.element_type()
        && bson::to_vec(&doc! {"v": a.clone()}).ok() == bson::to_vec(&doc! {"v": b.clone()}).ok()
}

/// Whether applying [`diff`]`(old, new)` to `old` gives `new`'s field order: kept
/// fields stay where they are and new ones go last. When not (a replacement that
/// reorders fields), the entry must carry the whole document instead.
fn diff_keeps_order(old: &Document, new: &Document) -> bool {
    let kept = old.keys().filter(|k| new.contains_key(*k));
    let added = new.keys().filter(|k| !old.contains_key(*k));
    kept.chain(added).eq(new.keys())
}

/// A top-level `$v:2` diff between two versions of a document.
fn diff(old: &Document, new: &Document) -> Document {
    let mut d = Document::new();
    let mut u = Document::new();
    let mut i = Document::new();
    for k in old.keys() {
        if !new.contains_key(k) {
            d.insert(k.clone(), false);
        }
    }
    for (k, v) in new {
        match old.get(k) {
            Some(ov) if identical(ov, v) => {}
            Some(_) => {
                u.insert(k.clone(), v.clone());
            }
            None => {
                i.insert(k.clone(), v.clone());
            }
        }
    }
    let mut out = Document::new();
    if !d.is_empty() {
        out.insert("d", d);
    }
    if !u.is_empty() {
        out.insert("u", u);
    }
    if !i.is_empty() {
        out.insert("i", i);
    }
    out
}

pub fn replace_doc(st: &mut State, db: &str, coll: &str, rid: u64, new: Document) {
    let c = st.store.get_mut(db, coll).expect("collection exists");
    let uuid = c.uuid;
    let old = c.get(rid).map(|d| d.into_owned()).unwrap_or_default();
    c.replace(rid, new.clone());
    let id = new.get("_id").cloned().unwrap_or(Bson::Null);
    // A replacement that reorders fields is logged whole, as the server logs a
    // replacement-style update (`o` is the new document).
    let o = if diff_keeps_order(&old, &new) {
        doc! {"$v": 2, "diff": diff(&old, &new)}
    } else {
        new.clone()
    };
    st.log_op(
        "u",
        &format!("{db}.{coll}"),
        Some(uuid),
        o,
        Some(doc! {"_id": id}),
    );
}

pub fn delete_doc(st: &mut State, db: &str, coll: &str, rid: u64) {
    let c = st.store.get_mut(db, coll).expect("collection exists");
    let uuid = c.uuid;
    if let Some(d) = c.remove(rid) {
        let id = d.get("_id").cloned().unwrap_or(Bson::Null);
        st.log_op(
            "d",
            &format!("{db}.{coll}"),
            Some(uuid),
            doc! {"_id": id},
            None,
        );
    }
}

/// Add an index spec; `Ok(false)` when an identical one exists.
pub fn create_index(st: &mut State, db: &str, coll: &str, spec: Document) -> CmdResult<bool> {
    let Some(Bson::Document(key)) = spec.get("key").cloned() else {
        return Err(CmdError::new(
            9,
            "FailedToParse",
            "The 'key' field is a required property of an index specification",
        ));
    };
    let name = match spec.get("name") {
        Some(Bson::String(n)) => n.clone(),
        _ => {
            return Err(CmdError::new(
                9,
                "FailedToParse",
                "The 'name' field is a required property of an index specification",
            ))
        }
    };
    let c = st.store.get_mut(db, coll).expect("collection exists");
    if let Some(existing) = c
        .indexes
        .iter()
        .find(|i| i.get_str("name") == Ok(name.as_str()))
    {
        let same = matches!(existing.get("key"), Some(Bson::Document(k)) if crate::matcher::cmp_docs(k, &key).is_eq());
        if same {
            return Ok(false);
        }
        return Err(CmdError::new(
            86,
            "IndexKeySpecsConflict",
            format!("An existing index has the same name as the requested index. Requested index: {spec}, existing index: {existing}"),
        ));
    }
    // Stored as {v, key, name, <other options in the order given>}; `ns` is dropped
    // (4.4+ index specs have none) and `v` defaults to 2.
    let mut full = doc! {"v": spec.get("v").cloned().unwrap_or(Bson::Int32(2))};
    full.insert("key", key.clone());
    full.insert("name", name.clone());
    for (k, v) in &spec {
        if !matches!(k.as_str(), "v" | "ns" | "key" | "name") {
            full.insert(k.clone(), v.clone());
        }
    }
    c.indexes.push(full.clone());
    let uuid = c.uuid;
    let mut o = doc! {"createIndexes": coll};
    for (k, v) in full {
        o.insert(k, v);
    }
    st.log_op("c", &format!("{db}.$cmd"), Some(uuid), o, None);
    Ok(true)
}

/// Drop indexes by name, `"*"` (all but `_id_`), key pattern, or list of names.
pub fn drop_indexes(st: &mut State, db: &str, coll: &str, which: &Bson) -> CmdResult<usize> {
    let c = st
        .store
        .get_mut(db, coll)
        .ok_or_else(|| CmdError::ns_not_found(format!("ns not found {db}.{coll}")))?;
    let before = c.indexes.len();
    let mut names: Vec<String> = Vec::new();
    match which {
        Bson::String(s) if s == "*" => {
            names = c
                .indexes
                .iter()
                .filter_map(|i| i.get_str("name").ok())
                .filter(|n| *n != "_id_")
                .map(String::from)
                .collect()
        }
        Bson::String(s) => names.push(s.clone()),
        Bson::Array(a) => names.extend(a.iter().filter_map(|v| v.as_str().map(String::from))),
        Bson::Document(key) => {
            match c.indexes.iter().find(|i| matches!(i.get("key"), Some(Bson::Document(k)) if crate::matcher::cmp_docs(k, key).is_eq())) {
                Some(i) => names.push(i.get_str("name").unwrap_or_default().to_string()),
                None => return Err(CmdError::new(27, "IndexNotFound", format!("can't find index with key: {key}"))),
            }
        }
        _ => return Err(CmdError::type_mismatch("invalid index name spec")),
    }
    for n in &names {
        if n == "_id_" {
            return Err(CmdError::new(72, "InvalidOptions", "cannot drop _id index"));
        }
        if !c
            .indexes
            .iter()
            .any(|i| i.get_str("name") == Ok(n.as_str()))
        {
            return Err(CmdError::new(
                27,
                "IndexNotFound",
                format!("index not found with name [{n}]"),
            ));
        }
    }
    let uuid = c.uuid;
    let mut dropped = Vec::new();
    c.indexes.retain(|i| {
        let drop = names.iter().any(|n| i.get_str("name") == Ok(n.as_str()));
        if drop {
            dropped.push(i.clone());
        }
        !drop
    });
    for spec in dropped {
        let name = spec.get_str("name").unwrap_or_default().to_string();
        st.log_op(
            "c",
            &format!("{db}.$cmd"),
            Some(uuid),
            doc! {"dropIndexes": coll, "index": name},
            Some(spec),
        );
    }
    Ok(before)
}
