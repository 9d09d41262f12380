//! The stand-in mongod's data: databases of collections of documents, in memory,
//! in insertion ("natural") order, with a unique `_id` index per collection
//! (except `local.oplog.rs`, which like the real one has none).

use crate::matcher::id_key;
use bson::{doc, Bson, Document, RawDocumentBuf};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

/// One stored document: parsed (user data, scanned by every query), or as BSON
/// bytes (the oplog: read in order, mostly appended; a parsed entry took several
/// times its bytes, and the oplog of a large load was half the stand-in's memory).
#[derive(Debug, Clone)]
enum Stored {
    Doc(Document),
    Raw(RawDocumentBuf),
}

impl Stored {
    fn doc(&self) -> Cow<'_, Document> {
        match self {
            Stored::Doc(d) => Cow::Borrowed(d),
            Stored::Raw(r) => Cow::Owned(r.to_document().unwrap_or_default()),
        }
    }
    fn into_doc(self) -> Document {
        match self {
            Stored::Doc(d) => d,
            Stored::Raw(r) => r.to_document().unwrap_or_default(),
        }
    }
    fn len(&self) -> i64 {
        match self {
            Stored::Doc(d) => bson::to_vec(d).map(|v| v.len() as i64).unwrap_or(0),
            Stored::Raw(r) => r.as_bytes().len() as i64,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Collection {
    pub uuid: bson::Uuid,
    /// `create` options (`capped`, `size`, ...).
    pub options: Document,
    /// Index specs (`{v, key, name, ...}`), `_id_` first. Only `_id` is enforced.
    pub indexes: Vec<Document>,
    docs: BTreeMap<u64, Stored>,
    id_index: Option<HashMap<Vec<u8>, u64>>,
    next_rid: u64,
    /// Documents kept as BSON bytes (see [`Stored`]).
    as_bytes: bool,
}

/// A duplicate `_id`.
#[derive(Debug)]
pub struct DuplicateKey(pub Bson);

impl Collection {
    pub fn new(options: Document) -> Self {
        Self::with_uuid(options, bson::Uuid::new())
    }

    pub fn with_uuid(options: Document, uuid: bson::Uuid) -> Self {
        Collection {
            uuid,
            options,
            indexes: vec![doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}],
            docs: BTreeMap::new(),
            id_index: Some(HashMap::new()),
            next_rid: 1,
            as_bytes: false,
        }
    }

    /// Whether its documents are kept as bytes (reading one parses it).
    pub fn stores_bytes(&self) -> bool {
        self.as_bytes
    }

    /// Keeps its documents as BSON bytes, parsed when read (the oplog).
    pub fn stored_as_bytes(mut self) -> Self {
        self.as_bytes = true;
        self
    }

    fn store(&self, doc: Document) -> Stored {
        if self.as_bytes {
            if let Ok(r) = RawDocumentBuf::from_document(&doc) {
                return Stored::Raw(r);
            }
        }
        Stored::Doc(doc)
    }

    /// A collection without an `_id` index (the oplog).
    pub fn without_id_index(options: Document) -> Self {
        let mut c = Collection::new(options);
        c.indexes.clear();
        c.id_index = None;
        c
    }

    pub fn is_capped(&self) -> bool {
        matches!(self.options.get("capped"), Some(Bson::Boolean(true)))
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    pub fn data_size(&self) -> i64 {
        self.docs.values().map(Stored::len).sum()
    }

    /// The documents in natural order (borrowed, or parsed from bytes).
    pub fn iter(&self) -> impl Iterator<Item = (u64, Cow<'_, Document>)> {
        self.docs.iter().map(|(r, d)| (*r, d.doc()))
    }

    pub fn iter_after(&self, rid: u64) -> impl Iterator<Item = (u64, Cow<'_, Document>)> {
        self.docs
            .range(rid.saturating_add(1)..)
            .map(|(r, d)| (*r, d.doc()))
    }

    pub fn get(&self, rid: u64) -> Option<Cow<'_, Document>> {
        self.docs.get(&rid).map(Stored::doc)
    }

    pub fn find_id(&self, id: &Bson) -> Option<u64> {
        match &self.id_index {
            Some(ix) => ix.get(&id_key(id)).copied(),
            None => self
                .docs
                .iter()
                .find(|(_, d)| {
                    d.doc()
                        .get("_id")
                        .is_some_and(|v| crate::matcher::values_equal(v, id))
                })
                .map(|(r, _)| *r),
        }
    }

    /// Insert; a collection with an `_id` index needs `_id` (callers add one).
    pub fn insert(&mut self, doc: Document) -> Result<u64, DuplicateKey> {
        if let Some(ix) = &mut self.id_index {
            let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
            let key = id_key(&id);
            if ix.contains_key(&key) {
                return Err(DuplicateKey(id));
            }
            ix.insert(key, self.next_rid);
        }
        let rid = self.next_rid;
        self.next_rid += 1;
        let stored = self.store(doc);
        self.docs.insert(rid, stored);
        Ok(rid)
    }

    /// Remove the oldest document (a capped collection rolling over).
    pub fn pop_oldest(&mut self) -> Option<(u64, Document)> {
        let rid = *self.docs.keys().next()?;
        self.remove(rid).map(|d| (rid, d))
    }

    /// The record id of the oldest document.
    pub fn first_rid(&self) -> Option<u64> {
        self.docs.keys().next().copied()
    }

    /// Replace the document at `rid` (its `_id` may not change).
    pub fn replace(&mut self, rid: u64, doc: Document) {
        let stored = self.store(doc);
        self.docs.insert(rid, stored);
    }

    pub fn remove(&mut self, rid: u64) -> Option<Document> {
        let d = self.docs.remove(&rid)?.into_doc();
        if let Some(ix) = &mut self.id_index {
            ix.remove(&id_key(d.get("_id").unwrap_or(&Bson::Null)));
        }
        Some(d)
    }

    pub fn clear(&mut self) {
        self.docs.clear();
        if let Some(ix) = &mut self.id_index {
            ix.clear();
        }
    }

    /// The highest record id handed out so far (a tailable cursor's "end").
    pub fn last_rid(&self) -> u64 {
        self.next_rid - 1
    }
}

#[derive(Debug, Default, Clone)]
pub struct Store {
    pub dbs: BTreeMap<String, BTreeMap<String, Collection>>,
}

impl Store {
    pub fn get(&self, db: &str, coll: &str) -> Option<&Collection> {
        self.dbs.get(db)?.get(coll)
    }

    pub fn get_mut(&mut self, db: &str, coll: &str) -> Option<&mut Collection> {
        self.dbs.get_mut(db)?.get_mut(coll)
    }

    pub fn exists(&self, db: &str, coll: &str) -> bool {
        self.get(db, coll).is_some()
    }

    pub fn put(&mut self, db: &str, coll: &str, c: Collection) {
        self.dbs
            .entry(db.to_string())
            .or_default()
            .insert(coll.to_string(), c);
    }

    /// Remove a collection; a database without collections stops existing.
    pub fn remove(&mut self, db: &str, coll: &str) -> Option<Collection> {
        let colls = self.dbs.get_mut(db)?;
        let c = colls.remove(coll);
        if colls.is_empty() {
            self.dbs.remove(db);
        }
        c
    }

    pub fn collection_names(&self, db: &str) -> Vec<String> {
        self.dbs
            .get(db)
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The namespace of the collection with this UUID.
    pub fn find_uuid(&self, uuid: &bson::Uuid) -> Option<(String, String)> {
        for (db, colls) in &self.dbs {
            for (name, c) in colls {
                if &c.uuid == uuid {
                    return Some((db.clone(), name.clone()));
                }
            }
        }
        None
    }
}

/// Split `db.coll` at the first dot.
pub fn split_ns(ns: &str) -> (&str, &str) {
    match ns.split_once('.') {
        Some((d, c)) => (d, c),
        None => (ns, ""),
    }
}
