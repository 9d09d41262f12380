//! The replica's catalog: per namespace, what `listCollections` and `listIndexes`
//! would say (and so what mongodump writes into `<coll>.metadata.json`): the
//! collection's options, its indexes in catalog order, its UUID and type.

use bson::{doc, Bson, Document};

use super::store::Slot;
use crate::backup::Metadata;

/// What a namespace is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollKind {
    /// An ordinary (possibly capped or clustered) collection.
    Collection,
    /// The buckets collection `db.system.buckets.X` of a time-series collection `db.X`;
    /// its options are the time-series collection's (mongodump writes them as `X`'s).
    TimeseriesBuckets,
    /// A view: options `viewOn`/`pipeline`, no documents, no indexes.
    View,
}

/// One namespace of the replica.
#[derive(Clone, Debug)]
pub struct CollInfo {
    pub slot: Slot,
    pub kind: CollKind,
    /// The collection UUID, when known (from the backup's metadata or the oplog's `ui`).
    pub uuid: Option<[u8; 16]>,
    /// `listCollections` `options` (the `create` command without `create`, `idIndex`).
    pub options: Document,
    /// `listIndexes`, in catalog order (`_id_` first).
    pub indexes: Vec<Document>,
    /// Documents without `_id` (only a backup's capped collection without `_id` index
    /// can hold them), in natural order.
    pub no_id: Vec<Vec<u8>>,
    /// Documents the backup's data file held (None for namespaces created later).
    pub backup_documents: Option<u64>,
}

impl CollInfo {
    pub fn new(slot: Slot, kind: CollKind) -> CollInfo {
        CollInfo {
            slot,
            kind,
            uuid: None,
            options: Document::new(),
            indexes: Vec::new(),
            no_id: Vec::new(),
            backup_documents: None,
        }
    }

    /// From a backup's metadata (options, indexes and UUID as dumped).
    pub fn from_metadata(slot: Slot, kind: CollKind, m: &Metadata) -> CollInfo {
        let mut c = CollInfo::new(slot, kind);
        c.options = m.options.clone();
        c.indexes = m.indexes.clone();
        c.uuid = m.uuid.as_deref().and_then(parse_uuid_hex);
        c
    }

    /// Whether an entry's `ui` (None: it has none) leaves it writing to this
    /// collection: `target_slot` goes by `ui` first.
    pub fn takes_ui(&self, ui: Option<&[u8]>) -> bool {
        ui.and_then(|u| <[u8; 16]>::try_from(u).ok())
            .is_none_or(|u| self.uuid == Some(u))
    }

    pub fn is_capped(&self) -> bool {
        matches!(self.options.get("capped"), Some(Bson::Boolean(true)))
    }

    pub fn is_clustered(&self) -> bool {
        self.options.contains_key("clusteredIndex")
    }

    pub fn has_id_index(&self) -> bool {
        self.indexes.iter().any(|i| i.get_str("name") == Ok("_id_"))
    }

    /// The index named `name`, or whose key pattern equals `key` (for a time-series
    /// collection, a key in bucket terms is translated as its indexes are kept: see
    /// [`super::timeseries`]).
    pub fn find_index(&self, by: &Bson) -> Option<usize> {
        let translated = match (self.kind, by) {
            (CollKind::TimeseriesBuckets, Bson::Document(key)) => {
                super::timeseries::key_from_buckets(&self.options, key)
            }
            _ => None,
        };
        self.indexes.iter().position(|ix| match by {
            Bson::String(name) => ix.get_str("name") == Ok(name.as_str()),
            Bson::Document(key) => ix
                .get_document("key")
                .is_ok_and(|k| k == key || Some(k) == translated.as_ref()),
            _ => false,
        })
    }
}

/// The `_id` index a `create` without `idIndex` gets: the oplog leaves `idIndex` out
/// when the primary's `_id` index is version 1 (`MutableOplogEntry::makeCreateCommand`,
/// `src/mongo/db/repl/oplog_entry.cpp`: "Include the full _id index spec in the oplog
/// for index versions >= 2"), so the secondary's is version 1 too.
pub fn default_id_index() -> Document {
    doc! { "v": 1, "key": { "_id": 1 }, "name": "_id_" }
}

/// 32 hex digits (as mongodump writes `uuid`) to bytes.
pub fn parse_uuid_hex(s: &str) -> Option<[u8; 16]> {
    let s = s.replace('-', "");
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Bytes to the 32 lower-case hex digits mongodump writes.
pub fn uuid_hex(u: &[u8; 16]) -> String {
    u.iter().map(|b| format!("{b:02x}")).collect()
}
