//! The hash `dbHash` returns for a collection (`src/mongo/db/commands/dbhash.cpp`,
//! `DBHashCmd::_hashCollection`): the MD5 of the concatenated BSON bytes of its
//! documents, read through the `_id` index (`InternalPlanner::indexScan`, forward:
//! the server's `_id` order, which [`crate::engine::IdKey`] follows), or by a
//! collection scan for a clustered collection (clustered by `_id`: the same order)
//! and for a capped collection without `_id` index (natural order). A collection
//! with neither gets the literal string `no _id _index` instead of a hash.
//!
//! The database hash (`md5` of the reply) is the MD5 of the per-collection hex
//! strings concatenated in collection-name order, over the collections `dbHash`
//! includes (not `system.profile`, not `tmp.mr.*`, nothing in `local`).
//!
//! Releases after 8.0 read capped collections in natural order even when they have
//! an `_id` index (`useIndexScanForCappedCollections`); the engine keeps `_id` order
//! (6.0 to 8.0) and does not model natural order for capped collections with an
//! `_id` index.

use md5::{Digest, Md5};

use super::catalog::CollKind;
use super::{Replica, ReplicaError};

/// What `dbHash` says about one collection.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CollHash {
    /// `db.coll`, as the data lives (`db.system.buckets.X` for a time-series collection).
    pub ns: String,
    pub documents: u64,
    /// Hex MD5, or `no _id _index`.
    pub md5: String,
}

/// The literal the server returns for a collection it cannot read in a stable order.
pub const NO_ID_INDEX: &str = "no _id _index";

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `dbHash` lists `ns` (`dbhash.cpp`: replicated namespaces only, not
/// `tmp.mr.*`, not `system.profile`).
pub fn db_hash_includes(ns: &str) -> bool {
    let (db, coll) = ns.split_once('.').unwrap_or((ns, ""));
    db != "local" && coll != "system.profile" && !coll.starts_with("tmp.mr.")
}

impl Replica {
    /// The `dbHash` of collection `ns` (None for a view or a missing namespace).
    pub fn collection_hash(&self, ns: &str) -> Result<Option<CollHash>, ReplicaError> {
        let Some(c) = self.get(ns) else {
            return Ok(None);
        };
        if c.kind == CollKind::View {
            return Ok(None);
        }
        let documents = self.count(ns);
        let ordered = c.has_id_index() || c.is_clustered() || c.kind == CollKind::TimeseriesBuckets;
        if !ordered && !c.is_capped() {
            return Ok(Some(CollHash {
                ns: ns.to_string(),
                documents,
                md5: NO_ID_INDEX.to_string(),
            }));
        }
        let mut h = Md5::new();
        self.for_each_document(ns, &mut |doc| {
            h.update(doc);
            Ok(())
        })?;
        Ok(Some(CollHash {
            ns: ns.to_string(),
            documents,
            md5: hex(&h.finalize()),
        }))
    }

    /// [`Replica::collection_hash`] of every collection `dbHash` lists, sorted by
    /// namespace.
    pub fn hashes(&self) -> Result<Vec<CollHash>, ReplicaError> {
        let mut out = Vec::new();
        for (ns, _) in self.namespaces() {
            if !db_hash_includes(ns) {
                continue;
            }
            if let Some(h) = self.collection_hash(ns)? {
                out.push(h);
            }
        }
        Ok(out)
    }
}

/// The database-level `md5` from per-collection hashes of one database, given in
/// collection-name order.
pub fn database_md5<'a>(collection_hashes: impl IntoIterator<Item = &'a str>) -> String {
    let mut h = Md5::new();
    for c in collection_hashes {
        h.update(c.as_bytes());
    }
    hex(&h.finalize())
}
