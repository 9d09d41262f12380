//! The catalog side of a rehearsal: which namespaces each side has, their kind,
//! collection options, UUIDs, index specifications and view definitions.
//!
//! Production's catalog is read as it is NOW: `listCollections` and `listIndexes`
//! cannot read as of a cluster time (`jstests/noPassthrough/readConcern_snapshot.js`:
//! "readConcern 'snapshot' is not supported by non-CRUD commands"). So the oplog
//! after the point is read for catalog changes ([`ddl_of`]): a namespace created,
//! dropped or renamed since is not compared at all, one whose indexes or options
//! changed since has only its documents compared, and the report says so.
//!
//! Compared: user databases only (not `admin`, `config`, `local`), and not the
//! `system.*` collections (a time-series collection is compared through its buckets,
//! views by their definitions).
//!
//! Values in options and index specifications compare by value across number types
//! (a server may answer `size: 4096` as int32 or int64); field order matters only in
//! an index's `key` (it is the index).

use std::collections::BTreeMap;

use bson::{Bson, Document};

use crate::engine::replica::catalog::uuid_hex;
use crate::oplog::{Entry, Ts};

use super::report::DiffKind;

/// One namespace of either side.
#[derive(Clone, Debug)]
pub struct NsCatalog {
    /// `db.name` (a time-series collection by its own name).
    pub ns: String,
    /// `collection`, `timeseries`, `view`.
    pub kind: String,
    pub options: Document,
    pub uuid: Option<String>,
    pub indexes: Vec<Document>,
    /// Where its documents are (`db.system.buckets.X` for a time-series collection;
    /// none for a view).
    pub data_ns: Option<String>,
}

impl NsCatalog {
    pub fn is_capped(&self) -> bool {
        matches!(self.options.get("capped"), Some(Bson::Boolean(true)))
    }
}

/// Whether `db.coll` is compared at all.
pub fn compared(db: &str, coll: &str) -> bool {
    !matches!(db, "admin" | "config" | "local") && !coll.starts_with("system.")
}

/// Production's namespaces from one database's `listCollections` reply documents.
pub fn from_list_collections(db: &str, docs: &[Document]) -> Vec<NsCatalog> {
    let mut out = Vec::new();
    for d in docs {
        let Ok(name) = d.get_str("name") else {
            continue;
        };
        if !compared(db, name) {
            continue;
        }
        let kind = d.get_str("type").unwrap_or("collection").to_string();
        let options = d.get_document("options").cloned().unwrap_or_default();
        let uuid = d
            .get_document("info")
            .ok()
            .and_then(|i| match i.get("uuid") {
                Some(Bson::Binary(b)) if b.bytes.len() == 16 => {
                    let mut u = [0u8; 16];
                    u.copy_from_slice(&b.bytes);
                    Some(uuid_hex(&u))
                }
                _ => None,
            });
        let data_ns = match kind.as_str() {
            "view" => None,
            "timeseries" => Some(format!("{db}.system.buckets.{name}")),
            _ => Some(format!("{db}.{name}")),
        };
        out.push(NsCatalog {
            ns: format!("{db}.{name}"),
            kind,
            options,
            uuid,
            indexes: Vec::new(),
            data_ns,
        });
    }
    out
}

/// The rebuild's namespaces, as `listCollections`/`listIndexes` would show them.
pub fn from_replica(
    r: &crate::engine::replica::Replica,
) -> Result<Vec<NsCatalog>, crate::engine::replica::ReplicaError> {
    let mut out = Vec::new();
    for it in crate::engine::replica::listing::listing(r)? {
        if !compared(&it.db, &it.coll) {
            continue;
        }
        out.push(NsCatalog {
            ns: format!("{}.{}", it.db, it.coll),
            kind: it.kind.to_string(),
            options: it.info.options.clone(),
            uuid: if it.kind == "collection" {
                it.info.uuid.as_ref().map(uuid_hex)
            } else {
                None
            },
            indexes: if it.kind == "view" {
                Vec::new()
            } else {
                it.info.indexes.clone()
            },
            data_ns: it.data_ns.clone(),
        });
    }
    Ok(out)
}

fn as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// Equal as a catalog means it: numbers by value, documents field by field
/// (in order only when `ordered`), arrays element by element.
pub fn same(a: &Bson, b: &Bson, ordered: bool) -> bool {
    match (a, b) {
        (Bson::Document(x), Bson::Document(y)) => same_doc(x, y, ordered),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q, ordered))
        }
        (x, y) => match (as_f64(x), as_f64(y)) {
            (Some(p), Some(q)) => p == q,
            _ => x == y,
        },
    }
}

fn same_doc(x: &Document, y: &Document, ordered: bool) -> bool {
    if x.len() != y.len() {
        return false;
    }
    if ordered {
        x.iter()
            .zip(y.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb, ordered))
    } else {
        x.iter()
            .all(|(k, v)| y.get(k).is_some_and(|w| same(v, w, ordered)))
    }
}

/// The option names whose values differ (or that one side lacks).
pub fn differing_options(rebuild: &Document, production: &Document) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (k, v) in rebuild {
        if production.get(k).is_none_or(|w| !same(v, w, false)) {
            out.push(k.clone());
        }
    }
    for k in production.keys() {
        if !rebuild.contains_key(k) {
            out.push(k.clone());
        }
    }
    out
}

/// One index difference: kind, index name, and which fields of the spec differ.
pub type IndexDiff = (DiffKind, String, Vec<String>);

/// Index specifications compared by name: missing on either side, or a spec that
/// differs (`ns`, which only old servers list, is left out; `key` compares in order).
pub fn differing_indexes(rebuild: &[Document], production: &[Document]) -> Vec<IndexDiff> {
    let by_name = |v: &[Document]| -> BTreeMap<String, Document> {
        v.iter()
            .filter_map(|d| {
                let mut d = d.clone();
                d.remove("ns");
                Some((d.get_str("name").ok()?.to_string(), d))
            })
            .collect()
    };
    let r = by_name(rebuild);
    let p = by_name(production);
    let mut out = Vec::new();
    for (name, spec) in &r {
        match p.get(name) {
            None => out.push((DiffKind::IndexMissingInProduction, name.clone(), Vec::new())),
            Some(other) => {
                let mut fields = Vec::new();
                for (k, v) in spec {
                    let ordered = k == "key";
                    if other.get(k).is_none_or(|w| !same(v, w, ordered)) {
                        fields.push(k.clone());
                    }
                }
                for k in other.keys() {
                    if !spec.contains_key(k) {
                        fields.push(k.clone());
                    }
                }
                if !fields.is_empty() {
                    out.push((DiffKind::IndexDiffers, name.clone(), fields));
                }
            }
        }
    }
    for name in p.keys() {
        if !r.contains_key(name) {
            out.push((DiffKind::IndexMissingInRebuild, name.clone(), Vec::new()));
        }
    }
    out
}

/// How a catalog change after the point affects a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// Indexes or options changed: its catalog now is not its catalog then; its
    /// documents as of the point can still be compared.
    CatalogOnly,
    /// Created, dropped or renamed: nothing is compared.
    Whole,
}

/// A catalog change after the point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ddl {
    /// `db.coll`, or `db.*` for a whole database.
    pub target: String,
    pub command: String,
    pub ts: Ts,
    pub change: Change,
}

/// The catalog changes an oplog entry makes (commands, also inside `applyOps`).
pub fn ddl_of(e: &Entry<'_>) -> Vec<Ddl> {
    let mut out = Vec::new();
    let _ = e.for_each_leaf(
        &mut |leaf: &Entry<'_>| -> Result<(), crate::oplog::EntryError> {
            one_ddl(leaf, e.ts, &mut out);
            Ok(())
        },
    );
    out
}

fn one_ddl(e: &Entry<'_>, ts: Ts, out: &mut Vec<Ddl>) {
    let Some(name) = e.command_name() else {
        return;
    };
    let Some(o) = e.o else { return };
    let db = e.db();
    let arg = |k: &str| o.get_str(k).ok().map(str::to_string);
    let mut push = |target: String, change: Change| {
        out.push(Ddl {
            target,
            command: name.to_string(),
            ts,
            change,
        })
    };
    match name {
        "create" | "drop" | "convertToCapped" | "emptycapped" => {
            if let Some(c) = arg(name) {
                push(format!("{db}.{c}"), Change::Whole);
                if let Some(v) = c.strip_prefix("system.buckets.") {
                    push(format!("{db}.{v}"), Change::Whole);
                }
            }
        }
        "renameCollection" => {
            for k in ["renameCollection", "to"] {
                if let Some(n) = arg(k) {
                    push(n, Change::Whole);
                }
            }
        }
        "dropDatabase" => push(format!("{db}.*"), Change::Whole),
        "createIndexes" | "dropIndexes" | "deleteIndexes" | "collMod" | "startIndexBuild"
        | "commitIndexBuild" | "abortIndexBuild" => {
            if let Some(c) = arg(name) {
                if let Some(v) = c.strip_prefix("system.buckets.") {
                    push(format!("{db}.{v}"), Change::CatalogOnly);
                }
                push(format!("{db}.{c}"), Change::CatalogOnly);
            }
        }
        _ => {}
    }
}

/// The strongest change after the point that touches `ns` (by name, or its
/// database as a whole), with the first entry that made it.
pub fn change_of<'a>(ns: &str, ddl: &'a [Ddl]) -> Option<&'a Ddl> {
    let db = ns.split_once('.').map_or(ns, |(d, _)| d);
    let whole_db = format!("{db}.*");
    ddl.iter()
        .filter(|d| d.target == ns || d.target == whole_db)
        .max_by_key(|d| (d.change, std::cmp::Reverse(d.ts)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn options_compare_numbers_by_value_and_name_what_differs() {
        let r =
            doc! {"capped": true, "size": 4096i32, "validator": {"a": {"$exists": true}, "b": 1}};
        let p =
            doc! {"validator": {"b": 1.0, "a": {"$exists": true}}, "size": 4096i64, "capped": true};
        assert!(differing_options(&r, &p).is_empty());
        let p = doc! {"capped": true, "size": 8192, "max": 5};
        assert_eq!(differing_options(&r, &p), vec!["size", "validator", "max"]);
    }

    #[test]
    fn index_keys_compare_in_order() {
        let r = vec![
            doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            doc! {"v": 2, "key": {"a": 1, "b": -1}, "name": "ab", "unique": true},
            doc! {"v": 2, "key": {"c": 1}, "name": "c_1"},
        ];
        let p = vec![
            doc! {"v": 2i64, "key": {"_id": 1}, "name": "_id_", "ns": "x.y"},
            doc! {"name": "ab", "v": 2, "key": {"b": -1, "a": 1}, "unique": true},
            doc! {"v": 2, "key": {"d": 1}, "name": "d_1"},
        ];
        assert_eq!(
            differing_indexes(&r, &p),
            vec![
                (
                    DiffKind::IndexDiffers,
                    "ab".to_string(),
                    vec!["key".to_string()]
                ),
                (
                    DiffKind::IndexMissingInProduction,
                    "c_1".to_string(),
                    vec![]
                ),
                (DiffKind::IndexMissingInRebuild, "d_1".to_string(), vec![]),
            ]
        );
    }

    fn entry(d: bson::Document) -> bson::RawDocumentBuf {
        bson::RawDocumentBuf::from_document(&d).unwrap()
    }

    #[test]
    fn catalog_changes_after_the_point() {
        let ts = bson::Timestamp {
            time: 10,
            increment: 1,
        };
        let cases = [
            (
                doc! {"op": "c", "ns": "app.$cmd", "o": {"drop": "c"}, "ts": ts},
                vec![("app.c", Change::Whole)],
            ),
            (
                doc! {"op": "c", "ns": "app.$cmd", "o": {"createIndexes": "system.buckets.m", "v": 2, "key": {"meta": 1}, "name": "m"}, "ts": ts},
                vec![
                    ("app.m", Change::CatalogOnly),
                    ("app.system.buckets.m", Change::CatalogOnly),
                ],
            ),
            (
                doc! {"op": "c", "ns": "admin.$cmd", "o": {"renameCollection": "app.a", "to": "app.b"}, "ts": ts},
                vec![("app.a", Change::Whole), ("app.b", Change::Whole)],
            ),
            (
                doc! {"op": "c", "ns": "admin.$cmd", "o": {"applyOps": [{"op": "c", "ns": "app.$cmd", "o": {"collMod": "c"}}]}, "ts": ts},
                vec![("app.c", Change::CatalogOnly)],
            ),
            (
                doc! {"op": "c", "ns": "app.$cmd", "o": {"dropDatabase": 1}, "ts": ts},
                vec![("app.*", Change::Whole)],
            ),
        ];
        for (d, want) in cases {
            let raw = entry(d);
            let e = Entry::parse(&raw).unwrap();
            let got: Vec<(String, Change)> = ddl_of(&e)
                .into_iter()
                .map(|d| (d.target, d.change))
                .collect();
            let want: Vec<(String, Change)> =
                want.into_iter().map(|(t, c)| (t.to_string(), c)).collect();
            assert_eq!(got, want);
        }
        let ddl = vec![
            Ddl {
                target: "app.c".into(),
                command: "collMod".into(),
                ts: Ts::new(5, 1),
                change: Change::CatalogOnly,
            },
            Ddl {
                target: "app.*".into(),
                command: "dropDatabase".into(),
                ts: Ts::new(6, 1),
                change: Change::Whole,
            },
        ];
        assert_eq!(change_of("app.c", &ddl).unwrap().command, "dropDatabase");
        assert!(change_of("other.c", &ddl).is_none());
    }
}
