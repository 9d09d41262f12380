//! Documents past the memory budget, in [redb](https://docs.rs/redb): an embedded,
//! pure-Rust, copy-on-write B-tree store (one file, no C/C++ to compile).
//!
//! Why redb (measured, see the README's "Storage" section): its keys can carry their
//! own comparison function, so documents are stored under (collection slot, `_id`)
//! in the server's `_id` order ([`IdKey`]'s `Ord`, numbers by value across types)
//! and read back in exactly the order `dbHash` hashes and the dump writes, without
//! inventing an order-preserving encoding of every BSON type. LSM stores (fjall)
//! and SQLite or LMDB only order raw bytes.
//!
//! Writes go through one open write transaction committed every [`BATCH_BYTES`] of
//! written data, so redb's dirty pages stay bounded; each commit is durable
//! (`Durability::Immediate`) because redb only reuses the pages freed by a durable
//! commit, and a non-durable chain would grow the file without bound. The file
//! lives in a temporary directory of the work dir and is removed with it; nothing
//! needs to survive a crash.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use redb::{
    Database, Durability, Key, ReadableTable, TableDefinition, TypeName, Value, WriteTransaction,
};

use super::store::Slot;
use crate::engine::IdKey;
use crate::error::Hint;

/// Commit the write transaction after this many bytes written.
pub const BATCH_BYTES: usize = 32 << 20;

/// redb's page cache.
pub const CACHE_BYTES: usize = 64 << 20;

/// A failure of the on-disk store.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("the engine's document store `{path}`: {detail}")]
    Store { path: PathBuf, detail: String },
    /// A caller's callback stopped a scan (its own error is reported instead).
    #[error("scan stopped")]
    Stopped,
}

impl Hint for DiskError {
    fn hint(&self) -> Option<String> {
        Some(
            "the work dir's disk may be full: free space, or point --workdir at a larger disk"
                .into(),
        )
    }
}

/// Keys: the slot (4 bytes, big-endian) then the `{_id: value}` bytes of an [`IdKey`].
#[derive(Debug)]
struct DocKey;

impl Value for DocKey {
    type SelfType<'a> = &'a [u8];
    type AsBytes<'a> = &'a [u8];

    fn fixed_width() -> Option<usize> {
        None
    }

    fn from_bytes<'a>(data: &'a [u8]) -> &'a [u8]
    where
        Self: 'a,
    {
        data
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a &'b [u8]) -> &'a [u8]
    where
        Self: 'b,
    {
        value
    }

    fn type_name() -> TypeName {
        TypeName::new("pitr::DocKey(slot,_id in server order)")
    }
}

impl Key for DocKey {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        // Keys are written only by `key_bytes`: a slot and a framed `{_id: v}`.
        a[..4]
            .cmp(&b[..4])
            .then_with(|| crate::engine::compare::id_key::cmp_key_bytes(&a[4..], &b[4..]))
    }
}

const DOCS: TableDefinition<DocKey, &[u8]> = TableDefinition::new("docs");

fn key_bytes(slot: Slot, key: &IdKey) -> Vec<u8> {
    let d = key.document_bytes();
    let mut k = Vec::with_capacity(4 + d.len());
    k.extend_from_slice(&slot.to_be_bytes());
    k.extend_from_slice(d);
    k
}

/// The lowest key of `slot` (`{_id: MinKey}` sorts before every value).
fn slot_start(slot: Slot) -> Vec<u8> {
    key_bytes(slot, &IdKey::from_raw_parts(0xFF, &[]))
}

/// The on-disk document store; see the module documentation.
pub struct DiskStore {
    path: PathBuf,
    db: Database,
    txn: Option<WriteTransaction>,
    pending: usize,
}

impl DiskStore {
    /// Creates the store in `dir` (which must exist).
    pub fn create(dir: &Path) -> Result<DiskStore, DiskError> {
        let path = dir.join("documents.redb");
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&path)
            .map_err(|e| err(&path, e))?;
        Ok(DiskStore {
            path,
            db,
            txn: None,
            pending: 0,
        })
    }

    fn txn(&mut self) -> Result<&WriteTransaction, DiskError> {
        if self.txn.is_none() {
            let mut t = self.db.begin_write().map_err(|e| err(&self.path, e))?;
            t.set_durability(Durability::Immediate);
            self.txn = Some(t);
        }
        Ok(self.txn.as_ref().expect("opened above"))
    }

    fn wrote(&mut self, bytes: usize) -> Result<(), DiskError> {
        self.pending += bytes;
        if self.pending >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Commits pending writes.
    pub fn flush(&mut self) -> Result<(), DiskError> {
        if let Some(t) = self.txn.take() {
            t.commit().map_err(|e| err(&self.path, e))?;
        }
        self.pending = 0;
        Ok(())
    }

    pub fn get(&self, slot: Slot, key: &IdKey, out: &mut Vec<u8>) -> Result<bool, DiskError> {
        let k = key_bytes(slot, key);
        let found = match &self.txn {
            Some(t) => {
                let table = t.open_table(DOCS).map_err(|e| err(&self.path, e))?;
                let v = table.get(&k[..]).map_err(|e| err(&self.path, e))?;
                v.map(|g| out.extend_from_slice(g.value())).is_some()
            }
            None => {
                let r = self.db.begin_read().map_err(|e| err(&self.path, e))?;
                let table = r.open_table(DOCS).map_err(|e| err(&self.path, e))?;
                let v = table.get(&k[..]).map_err(|e| err(&self.path, e))?;
                v.map(|g| out.extend_from_slice(g.value())).is_some()
            }
        };
        Ok(found)
    }

    pub fn contains(&self, slot: Slot, key: &IdKey) -> Result<bool, DiskError> {
        let mut scratch = Vec::new();
        self.get(slot, key, &mut scratch)
    }

    /// Inserts or replaces; returns whether a document was replaced.
    pub fn put(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) -> Result<bool, DiskError> {
        let k = key_bytes(slot, key);
        let path = self.path.clone();
        let t = self.txn()?;
        let replaced = {
            let mut table = t.open_table(DOCS).map_err(|e| err(&path, e))?;
            let old = table.insert(&k[..], doc).map_err(|e| err(&path, e))?;
            old.is_some()
        };
        self.wrote(k.len() + doc.len())?;
        Ok(replaced)
    }

    pub fn remove(&mut self, slot: Slot, key: &IdKey) -> Result<bool, DiskError> {
        let k = key_bytes(slot, key);
        let path = self.path.clone();
        let t = self.txn()?;
        let removed = {
            let mut table = t.open_table(DOCS).map_err(|e| err(&path, e))?;
            let old = table.remove(&k[..]).map_err(|e| err(&path, e))?;
            old.is_some()
        };
        self.wrote(k.len())?;
        Ok(removed)
    }

    /// Removes every document of `slot`.
    pub fn clear(&mut self, slot: Slot) -> Result<(), DiskError> {
        let (start, end) = (slot_start(slot), slot_start(slot + 1));
        let path = self.path.clone();
        let t = self.txn()?;
        {
            let mut table = t.open_table(DOCS).map_err(|e| err(&path, e))?;
            table
                .retain_in(&start[..]..&end[..], |_, _| false)
                .map_err(|e| err(&path, e))?;
        }
        self.wrote(BATCH_BYTES / 8)
    }

    /// Loads documents already in `_id` order (the spill of the in-memory maps).
    pub fn load(
        &mut self,
        slot: Slot,
        docs: impl Iterator<Item = (IdKey, Box<[u8]>)>,
    ) -> Result<(), DiskError> {
        for (k, d) in docs {
            self.put(slot, &k, &d)?;
        }
        Ok(())
    }

    /// Every document of `slot` in `_id` order.
    pub fn for_each(
        &self,
        slot: Slot,
        f: &mut dyn FnMut(&IdKey, &[u8]) -> Result<(), DiskError>,
    ) -> Result<(), DiskError> {
        let (start, end) = (slot_start(slot), slot_start(slot + 1));
        let mut visit = |table: &dyn Fn(
            &mut dyn FnMut(&[u8], &[u8]) -> Result<(), DiskError>,
        ) -> Result<(), DiskError>| {
            table(&mut |k, v| {
                let key = IdKey::from_document_bytes(&k[4..]).map_err(|e| err(&self.path, e))?;
                f(&key, v)
            })
        };
        match &self.txn {
            Some(t) => {
                let table = t.open_table(DOCS).map_err(|e| err(&self.path, e))?;
                visit(&|g| {
                    for item in table
                        .range(&start[..]..&end[..])
                        .map_err(|e| err(&self.path, e))?
                    {
                        let (k, v) = item.map_err(|e| err(&self.path, e))?;
                        g(k.value(), v.value())?;
                    }
                    Ok(())
                })
            }
            None => {
                let r = self.db.begin_read().map_err(|e| err(&self.path, e))?;
                let table = match r.open_table(DOCS) {
                    Ok(t) => t,
                    Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
                    Err(e) => return Err(err(&self.path, e)),
                };
                visit(&|g| {
                    for item in table
                        .range(&start[..]..&end[..])
                        .map_err(|e| err(&self.path, e))?
                    {
                        let (k, v) = item.map_err(|e| err(&self.path, e))?;
                        g(k.value(), v.value())?;
                    }
                    Ok(())
                })
            }
        }
    }
}

fn err(path: &Path, e: impl std::fmt::Display) -> DiskError {
    DiskError::Store {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}
