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
//!
//! A collection whose `_id` order follows a collation (an `_id` index, or the
//! clustered key, with a `collation` other than `simple`) orders string `_id`s by
//! ICU collation keys, which pitr does not compute: when such a collection holds an
//! `_id` that is or contains a string, the engine says [`COLLATED_ID`] instead of a
//! hash it cannot order, and the plan predicts no content for it (counts only).
//! Other `_id` types compare the same under every collation (`CollatorInterface`
//! only changes string comparison), so their hash stands.

use md5::{Digest, Md5};

use super::catalog::{CollInfo, CollKind};
use super::{Meter, Replica, ReplicaError};

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

/// What the engine says instead of a hash for a collection whose `_id` order it
/// cannot reproduce (see the module documentation). Never equal to a server's reply.
pub const COLLATED_ID: &str = "not predicted: string _ids ordered by a collation";

impl CollHash {
    /// The hash to compare with the server's `dbHash`, None when the engine could
    /// not predict it.
    pub fn predicted(&self) -> Option<&str> {
        (self.md5 != COLLATED_ID).then_some(self.md5.as_str())
    }
}

/// Whether `c`'s `_id`s are ordered by a collation other than the simple one: the
/// `_id` index's (`idIndex.collation`), or for a clustered collection the
/// collection's default (`options.collation`), which its cluster key follows.
pub(crate) fn ids_follow_a_collation(c: &CollInfo) -> bool {
    let spec = if c.is_clustered() {
        c.options.get_document("collation").ok()
    } else {
        c.indexes
            .iter()
            .find(|i| i.get_str("name") == Ok("_id_"))
            .and_then(|i| i.get_document("collation").ok())
    };
    spec.is_some_and(|s| s.get_str("locale") != Ok("simple"))
}

/// Whether an `_id` of this BSON type compares differently under a collation: a
/// string or symbol, or an object or array that may hold one.
fn collation_sensitive(element_type: u8) -> bool {
    matches!(element_type, 0x02 | 0x03 | 0x04 | 0x0E)
}

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
        self.collection_hash_metered(ns, &Meter::new())
    }

    /// [`Replica::collection_hash`], advancing `meter` by the documents hashed (for
    /// the progress of a long hashing phase); stops on Ctrl-C.
    pub fn collection_hash_metered(
        &self,
        ns: &str,
        meter: &Meter,
    ) -> Result<Option<CollHash>, ReplicaError> {
        let Some(c) = self.get(ns) else {
            return Ok(None);
        };
        if c.kind == CollKind::View {
            return Ok(None);
        }
        let documents = self.count(ns);
        let ordered = c.has_id_index() || c.is_clustered() || c.kind == CollKind::TimeseriesBuckets;
        if !ordered && !c.is_capped() {
            meter.add(documents);
            return Ok(Some(CollHash {
                ns: ns.to_string(),
                documents,
                md5: NO_ID_INDEX.to_string(),
            }));
        }
        if ids_follow_a_collation(c)
            && self.any_id(ns, &mut |k| collation_sensitive(k.element_type()))?
        {
            meter.add(documents);
            return Ok(Some(CollHash {
                ns: ns.to_string(),
                documents,
                md5: COLLATED_ID.to_string(),
            }));
        }
        if let Some(d) = self.cold(ns) {
            // The documents are the data file's bytes, in `_id` order (shown as
            // they are hashed, or as the thread hashing them already goes).
            let mut shown = super::cold::DocsShown::new(d, meter);
            let md5 = d.md5_reporting(&mut |bytes| shown.at(bytes))?;
            shown.finish(documents);
            return Ok(Some(CollHash {
                ns: ns.to_string(),
                documents,
                md5: hex(&md5),
            }));
        }
        let mut h = Md5::new();
        let mut pending = 0u64;
        self.for_each_document(ns, &mut |doc| {
            h.update(doc);
            pending += 1;
            if pending == 1024 {
                meter.add(pending);
                pending = 0;
            }
            Ok(())
        })?;
        meter.add(pending);
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
