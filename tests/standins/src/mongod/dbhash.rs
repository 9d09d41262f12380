//! `dbHash`, as `src/mongo/db/commands/dbhash.cpp` defines it. Read at three points:
//! the 7.0 version (commit 6b0141d1559164e212f66d9b62909b9d61df01c8), the 8.0-era one
//! (`excludeRecordIds`, `MONGO_REGISTER_COMMAND(DBHashCmd).forShard()`) and the newest
//! stored one (`useIndexScanForCappedCollections`, TODO SERVER-106005).
//!
//! - Per collection: MD5 over the concatenated BSON bytes of its documents, read
//!   through the `_id` index (`InternalPlanner::indexScan`, i.e. the server's BSON
//!   order of `_id`, numbers compared by value across types); a capped collection
//!   without `_id` index, or a clustered one (time-series buckets), by a collection
//!   scan (clustered = `_id` order); otherwise the literal hash `"no _id _index"`.
//!   Releases after 8.0 scan capped collections in natural order even with an `_id`
//!   index; the stand-in plays 6.0–8.0, which all use the index.
//! - Skipped: namespaces that are not replicated (`isOplogDisabledForNS` →
//!   `NamespaceString::isReplicated`: the whole `local` database and `system.profile`),
//!   `tmp.mr.*`, drop-pending namespaces (none exist here), temporary collections when
//!   `skipTempCollections` is true, and anything not in `collections: [...]` when given
//!   (entries must be strings: BadValue "collections entries have to be strings").
//! - Reply: `host`, `collections` {name: hex md5} in name order, `capped` [names],
//!   `uuids` {name: UUID}, `md5` = MD5 of the per-collection hex strings concatenated
//!   in name order, `timeMillis`.
//!
//! Record ids are not hashed: `recordIdsReplicated` collections do not exist here.

use super::state::{CmdError, CmdResult, State};
use super::store::Collection;
use crate::matcher::cmp_values;
use bson::{doc, Bson, Document};
use md5::{Digest, Md5};
use std::collections::BTreeSet;
use std::time::Instant;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The documents of `c` in the order dbHash reads them, or `None` when the server
/// would find no way to read them in a stable order.
pub fn scan_order(c: &Collection) -> Option<Vec<std::borrow::Cow<'_, Document>>> {
    let has_id_index = c.indexes.iter().any(|i| i.get_str("name") == Ok("_id_"));
    let clustered = c.options.contains_key("clusteredIndex");
    let mut docs: Vec<std::borrow::Cow<'_, Document>> = c.iter().map(|(_, d)| d).collect();
    if has_id_index || clustered {
        let null = Bson::Null;
        docs.sort_by(|a, b| {
            cmp_values(a.get("_id").unwrap_or(&null), b.get("_id").unwrap_or(&null))
        });
        Some(docs)
    } else if c.is_capped() {
        Some(docs)
    } else {
        None
    }
}

/// The hex MD5 of one collection.
pub fn collection_hash(c: &Collection) -> String {
    let Some(docs) = scan_order(c) else {
        return "no _id _index".to_string();
    };
    let mut h = Md5::new();
    for d in docs {
        h.update(bson::to_vec(&*d).expect("stored documents serialize"));
    }
    hex(&h.finalize())
}

fn excluded(db: &str, name: &str, c: &Collection, skip_temp: bool) -> bool {
    db == "local"
        || name == "system.profile"
        || name.starts_with("tmp.mr.")
        || (skip_temp && matches!(c.options.get("temp"), Some(Bson::Boolean(true))))
}

pub fn db_hash(st: &State, db: &str, cmd: &Document) -> CmdResult<Document> {
    let started = Instant::now();
    if matches!(cmd.iter().next(), Some((_, Bson::String(s))) if s.is_empty()) {
        return Err(CmdError::new(
            73,
            "InvalidNamespace",
            "Cannot pass empty string for 'dbHash' field",
        ));
    }
    let mut wanted = BTreeSet::new();
    if let Some(Bson::Array(items)) = cmd.get("collections") {
        for item in items {
            match item {
                Bson::String(s) => {
                    wanted.insert(s.clone());
                }
                _ => {
                    return Err(CmdError::bad_value(
                        "collections entries have to be strings",
                    ))
                }
            }
        }
    }
    let skip_temp = cmd.get("skipTempCollections").is_some_and(|v| match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Null | Bson::Undefined => false,
        _ => true,
    });
    let mut hashes = Document::new();
    let mut capped = Vec::new();
    let mut uuids = Document::new();
    let mut all = Md5::new();
    if let Some(colls) = st.store.dbs.get(db) {
        // BTreeMap: name order, like the server's std::map.
        for (name, c) in colls {
            if excluded(db, name, c, skip_temp) || (!wanted.is_empty() && !wanted.contains(name)) {
                continue;
            }
            if c.is_capped() {
                capped.push(Bson::String(name.clone()));
            }
            uuids.insert(name.clone(), bson::Binary::from_uuid(c.uuid));
            let h = collection_hash(c);
            all.update(h.as_bytes());
            hashes.insert(name.clone(), h);
        }
    }
    Ok(doc! {
        "host": st.me.clone(),
        "collections": hashes,
        "capped": capped,
        "uuids": uuids,
        "md5": hex(&all.finalize()),
        "timeMillis": started.elapsed().as_millis() as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md5_hex(b: &[u8]) -> String {
        hex(&Md5::digest(b))
    }

    #[test]
    fn hash_reads_in_id_order_across_numeric_types() {
        let mut c = Collection::new(Document::new());
        let docs = [
            doc! {"_id": 3i64, "x": "c"},
            doc! {"_id": 1.5, "x": "b"},
            doc! {"_id": 1, "x": "a"},
            doc! {"_id": "s"},
        ];
        for d in &docs {
            c.insert(d.clone()).unwrap();
        }
        let mut expected = Vec::new();
        for i in [2, 1, 0, 3] {
            expected.extend(bson::to_vec(&docs[i]).unwrap());
        }
        assert_eq!(collection_hash(&c), md5_hex(&expected));
        // The MD5 of nothing, for an empty collection.
        assert_eq!(
            collection_hash(&Collection::new(Document::new())),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
    }

    #[test]
    fn capped_without_id_index_is_natural_order_and_plain_is_unhashable() {
        let mut c = Collection::without_id_index(doc! {"capped": true, "size": 4096});
        c.insert(doc! {"b": 2}).unwrap();
        c.insert(doc! {"a": 1}).unwrap();
        let mut expected = bson::to_vec(&doc! {"b": 2}).unwrap();
        expected.extend(bson::to_vec(&doc! {"a": 1}).unwrap());
        assert_eq!(collection_hash(&c), md5_hex(&expected));
        let plain = Collection::without_id_index(Document::new());
        assert_eq!(collection_hash(&plain), "no _id _index");
    }
}
