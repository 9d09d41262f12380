//! Which namespaces a full mongodump writes, and under which name and type: what
//! `listCollections` shows of the replica, filtered as mongodump filters it.

use bson::Bson;

use super::catalog::{CollInfo, CollKind};
use super::{Replica, ReplicaError};

/// One namespace as mongodump lists it.
pub struct Item {
    /// Where its documents are in the replica (None: a view).
    pub data_ns: Option<String>,
    pub db: String,
    pub coll: String,
    /// `collection`, `timeseries` or `view`.
    pub kind: &'static str,
    pub info: CollInfo,
}

/// `shouldSkipSystemNamespace` (mongo-tools `mongodump/prepare.go`): `<db>.system.*`
/// is skipped except `system.js`; in `admin` everything but `system.keys`; `config`
/// and `local` are not part of the dump here.
pub fn skipped_by_mongodump(db: &str, coll: &str) -> bool {
    match db {
        "local" | "config" => true,
        "admin" => coll == "system.keys",
        _ => coll.starts_with("system.") && coll != "system.js",
    }
}

/// What `listCollections` would list, per database: collections, time-series
/// collections (their buckets' data), and views (the documents of
/// `<db>.system.views`, except the views time-series collections make), sorted.
pub fn listing(r: &Replica) -> Result<Vec<Item>, ReplicaError> {
    let mut out = Vec::new();
    for (ns, c) in r.namespaces() {
        let (db, coll) = ns.split_once('.').unwrap_or((ns, ""));
        if db == "local" || db == "config" {
            continue;
        }
        match c.kind {
            CollKind::TimeseriesBuckets => {
                let mut info = c.clone();
                // listCollections shows the time-series collection's own options,
                // not the buckets collection's validator and clustering.
                info.options.remove("validator");
                info.options.remove("clusteredIndex");
                out.push(Item {
                    data_ns: Some(ns.to_string()),
                    db: db.into(),
                    coll: coll.strip_prefix("system.buckets.").unwrap_or(coll).into(),
                    kind: "timeseries",
                    info,
                });
            }
            CollKind::View => out.push(Item {
                data_ns: None,
                db: db.into(),
                coll: coll.into(),
                kind: "view",
                info: c.clone(),
            }),
            CollKind::Collection if coll == "system.views" && db != "admin" => {
                r.for_each_document(ns, &mut |doc| {
                    if let Some(v) = view_of(db, doc) {
                        out.push(v);
                    }
                    Ok(())
                })?;
            }
            CollKind::Collection if skipped_by_mongodump(db, coll) => {}
            CollKind::Collection => out.push(Item {
                data_ns: Some(ns.to_string()),
                db: db.into(),
                coll: coll.into(),
                kind: "collection",
                info: c.clone(),
            }),
        }
    }
    out.sort_by(|a, b| (&a.db, &a.coll).cmp(&(&b.db, &b.coll)));
    Ok(out)
}

/// A view from its `system.views` document `{_id: "db.name", viewOn, pipeline,
/// collation?}`; None for a time-series collection's view.
fn view_of(db: &str, doc: &[u8]) -> Option<Item> {
    let d = bson::RawDocument::from_bytes(doc).ok()?;
    let id = d.get_str("_id").ok()?;
    let name = id.strip_prefix(db)?.strip_prefix('.')?;
    let view_on = d.get_str("viewOn").ok()?;
    if view_on.starts_with("system.buckets.") {
        return None;
    }
    let mut info = CollInfo::new(0, CollKind::View);
    for k in ["viewOn", "pipeline", "collation"] {
        if let Ok(Some(v)) = d.get(k) {
            if let Ok(b) = Bson::try_from(v) {
                info.options.insert(k, b);
            }
        }
    }
    Some(Item {
        data_ns: None,
        db: db.into(),
        coll: name.into(),
        kind: "view",
        info,
    })
}
