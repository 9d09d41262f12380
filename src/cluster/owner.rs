//! Which shard owns a document at the limit: the config server's routing table
//! (`config.collections`, `config.chunks`, `config.databases`, `config.shards`) as
//! its own replay holds it at `L`, and the shard key of a document extracted as the
//! server extracts it.
//!
//! Server sources (mongodb/mongo):
//! - `src/mongo/db/s/shard_key_pattern.cpp` `extractShardKeyFromDoc`: each field of
//!   the key pattern in pattern order, found by its dotted path through embedded
//!   documents; a missing field is `null` (since 4.4, "missing shard key fields are
//!   treated as null"); an array on the path is not a valid shard key value.
//! - `src/mongo/s/chunk_manager.cpp` `ChunkMap::findIntersectingChunk`: the chunk
//!   with `min <= key < max`, comparing the key's values in order (key strings,
//!   which order as `BSONObj::woCompare` without field names: MinKey and MaxKey
//!   bound the key space).
//! - a hashed field of the key (`{k: "hashed"}`, also in a compound key from 4.4)
//!   stands in the key, and so in the chunks' bounds, as `NumberLong` of the value's
//!   hash (`shard_key_pattern.cpp`, `BSONElementHasher::hash64` with the default
//!   seed; a missing field hashes as null), computed as the server does in
//!   [`super::hasher`].
//! - `config.chunks` names its collection by `uuid` from 5.0, by `ns` before
//!   (`src/mongo/s/catalog/type_chunk.cpp`); pre-5.0 `config.collections` keeps a
//!   dropped collection with `dropped: true` (`type_collection.cpp`).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use serde::Serialize;

use crate::engine::compare_values;
use crate::engine::replica::{Replica, ReplicaError};

/// Why the owner of a document cannot be decided.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error("the config server's `{coll}` at the limit holds a document pitr cannot read: {why}")]
    BadMetadata { coll: String, why: String },
    #[error("`{ns}`: a document with _id {id} has an array in its shard key field `{field}`; the server never stores one")]
    ArrayKey {
        ns: String,
        id: String,
        field: String,
    },
    #[error("`{ns}`: no chunk at the limit holds shard key {key} (the chunks do not cover the key space)")]
    NoChunk { ns: String, key: String },
    #[error(transparent)]
    Replica(#[from] ReplicaError),
}

impl crate::error::Hint for OwnerError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            OwnerError::BadMetadata { .. } | OwnerError::NoChunk { .. } => {
                "check that [config] in the cluster file is this cluster's config server".into()
            }
            OwnerError::ArrayKey { .. } => {
                "check that the shard's backup and oplog belong to this cluster".into()
            }
            OwnerError::Replica(e) => return crate::error::Hint::hint(e),
        })
    }
}

/// One chunk: `[min, max)` on `shard`.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkRange {
    #[serde(serialize_with = "ser_doc")]
    pub min: Document,
    #[serde(serialize_with = "ser_doc")]
    pub max: Document,
    pub shard: String,
    #[serde(skip)]
    raw_min: RawDocumentBuf,
    #[serde(skip)]
    raw_max: RawDocumentBuf,
}

/// A sharded collection at the limit.
#[derive(Clone, Debug, Serialize)]
pub struct ShardedColl {
    pub ns: String,
    #[serde(serialize_with = "ser_doc")]
    pub key: Document,
    pub unique: bool,
    /// Chunks by `min`.
    pub chunks: Vec<ChunkRange>,
}

/// Relaxed extended JSON of a document (MinKey as `{"$minKey":1}`).
fn ser_doc<S: serde::Serializer>(d: &Document, s: S) -> Result<S::Ok, S::Error> {
    Bson::Document(d.clone())
        .into_relaxed_extjson()
        .serialize(s)
}

/// The routing table at the limit.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Routing {
    /// `config.shards._id`, in storage order.
    pub shards: Vec<String>,
    /// Database -> primary shard (`config.databases`).
    pub databases: BTreeMap<String, String>,
    /// Sharded collections by namespace (`config.collections`, not dropped).
    pub collections: BTreeMap<String, ShardedColl>,
}

fn docs_of(r: &Replica, ns: &str) -> Result<Vec<Document>, OwnerError> {
    let mut out = Vec::new();
    let mut bad = None;
    r.for_each_document(ns, &mut |b| {
        match bson::from_slice::<Document>(b) {
            Ok(d) => out.push(d),
            Err(e) => bad = Some(e.to_string()),
        }
        Ok(())
    })?;
    match bad {
        Some(why) => Err(OwnerError::BadMetadata {
            coll: ns.into(),
            why,
        }),
        None => Ok(out),
    }
}

fn bad(coll: &str, why: impl Into<String>) -> OwnerError {
    OwnerError::BadMetadata {
        coll: coll.into(),
        why: why.into(),
    }
}

impl Routing {
    /// Reads the routing table from the config server's replica at the limit.
    pub fn from_config(r: &Replica) -> Result<Routing, OwnerError> {
        let mut out = Routing::default();
        for d in docs_of(r, "config.shards")? {
            if let Ok(id) = d.get_str("_id") {
                out.shards.push(id.to_string());
            }
        }
        for d in docs_of(r, "config.databases")? {
            if let (Ok(db), Ok(p)) = (d.get_str("_id"), d.get_str("primary")) {
                out.databases.insert(db.to_string(), p.to_string());
            }
        }
        let chunks = docs_of(r, "config.chunks")?;
        for d in docs_of(r, "config.collections")? {
            if d.get_bool("dropped") == Ok(true) {
                continue;
            }
            let ns = d
                .get_str("_id")
                .map_err(|_| bad("config.collections", format!("no string _id in {d}")))?
                .to_string();
            let key = d
                .get_document("key")
                .map_err(|_| bad("config.collections", format!("`{ns}` has no key")))?
                .clone();
            let uuid = d.get("uuid").cloned();
            let mut mine: Vec<ChunkRange> = Vec::new();
            for c in &chunks {
                let same = match (&uuid, c.get("uuid")) {
                    (Some(u), Some(cu)) => u == cu,
                    _ => c.get_str("ns") == Ok(ns.as_str()),
                };
                if !same {
                    continue;
                }
                mine.push(chunk(&ns, c)?);
            }
            mine.sort_by(|a, b| cmp_key(&a.raw_min, &b.raw_min));
            out.collections.insert(
                ns.clone(),
                ShardedColl {
                    ns,
                    unique: d.get_bool("unique").unwrap_or(false),
                    key,
                    chunks: mine,
                },
            );
        }
        Ok(out)
    }
}

fn chunk(ns: &str, c: &Document) -> Result<ChunkRange, OwnerError> {
    let get = |k: &str| {
        c.get_document(k)
            .map_err(|_| bad("config.chunks", format!("a chunk of `{ns}` has no `{k}`")))
    };
    let (min, max) = (get("min")?.clone(), get("max")?.clone());
    let shard = c
        .get_str("shard")
        .map_err(|_| bad("config.chunks", format!("a chunk of `{ns}` has no shard")))?
        .to_string();
    let raw = |d: &Document| {
        RawDocumentBuf::from_document(d).map_err(|e| bad("config.chunks", e.to_string()))
    };
    Ok(ChunkRange {
        raw_min: raw(&min)?,
        raw_max: raw(&max)?,
        min,
        max,
        shard,
    })
}

/// Compares two shard keys value by value (field names ignored), as key strings
/// order them.
fn cmp_key(a: &RawDocument, b: &RawDocument) -> Ordering {
    let (mut ia, mut ib) = (a.iter(), b.iter());
    loop {
        match (ia.next(), ib.next()) {
            (Some(Ok((_, x))), Some(Ok((_, y)))) => match compare_values(x, y) {
                Ordering::Equal => continue,
                o => return o,
            },
            (None, None) => return Ordering::Equal,
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            // Bounds and keys are built from valid documents.
            _ => return Ordering::Equal,
        }
    }
}

/// The value at a dotted path, `None` when a part is missing; `Err(())` when the
/// path meets an array (not a valid shard key value).
fn at_path<'a>(doc: &'a RawDocument, path: &str) -> Result<Option<RawBsonRef<'a>>, ()> {
    let mut cur = doc;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        let v = match cur.get(p) {
            Ok(Some(v)) => v,
            _ => return Ok(None),
        };
        if let RawBsonRef::Array(_) = v {
            return Err(());
        }
        if parts.peek().is_none() {
            return Ok(Some(v));
        }
        match v {
            RawBsonRef::Document(d) => cur = d,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

impl ShardedColl {
    /// The shard key of `doc` as a document of the pattern's fields, in pattern
    /// order, a missing field as null (`extractShardKeyFromDoc`).
    pub fn shard_key(&self, doc: &RawDocument) -> Result<RawDocumentBuf, OwnerError> {
        let mut key = RawDocumentBuf::new();
        for (field, kind) in &self.key {
            let hashed = kind.as_str() == Some("hashed");
            match at_path(doc, field) {
                Ok(v) if hashed => key.append(
                    field,
                    bson::RawBson::Int64(super::hasher::hash64(
                        v.unwrap_or(RawBsonRef::Null),
                        super::hasher::DEFAULT_SEED,
                    )),
                ),
                Ok(Some(v)) => key.append_ref(field, v),
                Ok(None) => key.append(field, bson::RawBson::Null),
                Err(()) => {
                    return Err(OwnerError::ArrayKey {
                        ns: self.ns.clone(),
                        id: doc
                            .get("_id")
                            .ok()
                            .flatten()
                            .and_then(|v| Bson::try_from(v).ok())
                            .map_or("?".into(), |b| b.to_string()),
                        field: field.clone(),
                    })
                }
            }
        }
        Ok(key)
    }

    /// The shard that owns `doc` at the limit.
    pub fn owner(&self, doc: &RawDocument) -> Result<&str, OwnerError> {
        let key = self.shard_key(doc)?;
        // The last chunk whose min <= key, if key < its max.
        let n = self
            .chunks
            .partition_point(|c| cmp_key(&c.raw_min, &key) != Ordering::Greater);
        match n.checked_sub(1).map(|k| &self.chunks[k]) {
            Some(c) if cmp_key(&key, &c.raw_max) == Ordering::Less => Ok(&c.shard),
            _ => Err(OwnerError::NoChunk {
                ns: self.ns.clone(),
                key: bson::from_slice::<Document>(key.as_bytes())
                    .map_or("?".into(), |d| d.to_string()),
            }),
        }
    }

    /// `sh.shardCollection(...)` for this collection, as mongosh takes it.
    pub fn shard_command(&self) -> String {
        let key = Bson::Document(self.key.clone()).into_relaxed_extjson();
        format!(
            "sh.shardCollection({}, {}, {})",
            serde_json::Value::String(self.ns.clone()),
            key,
            self.unique
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn coll(key: Document, bounds: &[(Bson, Bson, &str)]) -> ShardedColl {
        let field = key.keys().next().unwrap().clone();
        let chunks = bounds
            .iter()
            .map(|(a, b, s)| {
                chunk(
                    "db.c",
                    &doc! { "min": { &field: a.clone() }, "max": { &field: b.clone() }, "shard": *s },
                )
                .unwrap()
            })
            .collect();
        ShardedColl {
            ns: "db.c".into(),
            key,
            unique: false,
            chunks,
        }
    }

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).unwrap()
    }

    #[test]
    fn ranges_min_inclusive_max_exclusive_numbers_by_value() {
        let c = coll(
            doc! { "a": 1 },
            &[
                (Bson::MinKey, Bson::Int64(10), "s0"),
                (Bson::Int64(10), Bson::Int64(20), "s1"),
                (Bson::Int64(20), Bson::MaxKey, "s2"),
            ],
        );
        assert_eq!(c.owner(&raw(doc! { "_id": 1, "a": 9.5 })).unwrap(), "s0");
        assert_eq!(c.owner(&raw(doc! { "_id": 1, "a": 10i32 })).unwrap(), "s1");
        assert_eq!(c.owner(&raw(doc! { "_id": 1, "a": 19i64 })).unwrap(), "s1");
        assert_eq!(c.owner(&raw(doc! { "_id": 1, "a": 20.0 })).unwrap(), "s2");
        // Strings sort after numbers; a missing field is null, which sorts before them.
        assert_eq!(c.owner(&raw(doc! { "_id": 1, "a": "x" })).unwrap(), "s2");
        assert_eq!(c.owner(&raw(doc! { "_id": 1 })).unwrap(), "s0");
    }

    #[test]
    fn dotted_and_compound_keys() {
        let mut c = coll(
            doc! { "u.id": 1, "n": 1 },
            &[(Bson::MinKey, Bson::MaxKey, "s0")],
        );
        // Two-field bounds: [{u.id: MinKey, n: MinKey}, {u.id: 5, n: 0}) and the rest.
        c.chunks = vec![
            chunk(
                "db.c",
                &doc! { "min": { "u.id": Bson::MinKey, "n": Bson::MinKey }, "max": { "u.id": 5, "n": 0 }, "shard": "s0" },
            )
            .unwrap(),
            chunk(
                "db.c",
                &doc! { "min": { "u.id": 5, "n": 0 }, "max": { "u.id": Bson::MaxKey, "n": Bson::MaxKey }, "shard": "s1" },
            )
            .unwrap(),
        ];
        let key = c
            .shard_key(&raw(doc! { "_id": 1, "u": { "id": 5 }, "n": -1 }))
            .unwrap();
        assert_eq!(
            bson::from_slice::<Document>(key.as_bytes()).unwrap(),
            doc! { "u.id": 5, "n": -1 }
        );
        assert_eq!(
            c.owner(&raw(doc! { "u": { "id": 5 }, "n": -1 })).unwrap(),
            "s0"
        );
        assert_eq!(
            c.owner(&raw(doc! { "u": { "id": 5 }, "n": 0 })).unwrap(),
            "s1"
        );
        // `n` missing: null, below 0.
        assert_eq!(c.owner(&raw(doc! { "u": { "id": 5 } })).unwrap(), "s0");
        // `u` not a document: the path is missing, so null.
        assert_eq!(c.owner(&raw(doc! { "u": 7, "n": 3 })).unwrap(), "s0");
        let err = c.owner(&raw(doc! { "u": [ { "id": 9 } ] })).unwrap_err();
        assert!(err.to_string().contains("array"), "{err}");
    }

    /// A hashed key: the chunks split the hash space (as `shardCollection` with a
    /// hashed key pre-splits it, at 0 for two shards); a document goes where the
    /// hash of its value falls, a missing field hashing as null.
    #[test]
    fn hashed_keys_place_documents_by_the_hash_and_gaps_are_named() {
        let c = coll(
            doc! { "a": "hashed" },
            &[
                (Bson::MinKey, Bson::Int64(0), "s0"),
                (Bson::Int64(0), Bson::MaxKey, "s1"),
            ],
        );
        // hasher_test.cpp: hash(42) < 0, hash(1) > 0, hash("abc") > 0.
        assert_eq!(c.owner(&raw(doc! { "a": 42 })).unwrap(), "s0");
        assert_eq!(c.owner(&raw(doc! { "a": 42.9 })).unwrap(), "s0");
        assert_eq!(c.owner(&raw(doc! { "a": 1i64 })).unwrap(), "s1");
        assert_eq!(c.owner(&raw(doc! { "a": "abc" })).unwrap(), "s1");
        let null_hash = super::super::hasher::hash64(RawBsonRef::Null, 0);
        let missing = if null_hash < 0 { "s0" } else { "s1" };
        assert_eq!(c.owner(&raw(doc! { "b": 1 })).unwrap(), missing);
        assert_eq!(c.owner(&raw(doc! { "a": null })).unwrap(), missing);
        let key = c.shard_key(&raw(doc! { "a": 42, "x": 1 })).unwrap();
        assert_eq!(
            key.get("a").unwrap(),
            Some(RawBsonRef::Int64(-944302157085130861))
        );
        let c = coll(doc! { "a": 1 }, &[(Bson::MinKey, Bson::Int64(0), "s0")]);
        let err = c.owner(&raw(doc! { "a": 3 })).unwrap_err();
        assert!(err.to_string().contains("no chunk"), "{err}");
        assert_eq!(
            coll(doc! { "a": 1 }, &[]).shard_command(),
            r#"sh.shardCollection("db.c", {"a":1}, false)"#
        );
    }
}
