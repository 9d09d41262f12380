//! Documents past the memory budget, in [redb](https://docs.rs/redb): an embedded,
//! pure-Rust, copy-on-write B-tree store (one file, no C/C++ to compile).
//!
//! Why redb (measured, see docs/engine.md, "Storage"): its keys can carry their
//! own comparison function, so documents are stored under (collection slot, `_id`)
//! in the server's `_id` order ([`IdKey`]'s `Ord`, numbers by value across types)
//! and read back in exactly the order `dbHash` hashes and the dump writes, without
//! inventing an order-preserving encoding of every BSON type. LSM stores (fjall)
//! and SQLite or LMDB only order raw bytes.
//!
//! Each collection slot is its own redb table (`docs-<slot>`, keys the `{_id: v}`
//! bytes), so that dropping a collection is `delete_table`: its pages are freed in
//! one pass, without a write. (One shared table cleared with `retain_in` deleted
//! key by key in a single transaction that, by redb's design, copies the leaf and
//! its path for every key and frees nothing until the end: a drop of a large
//! collection wrote gigabytes, grew the file by as much and held a page set in
//! memory proportional to it, which is what broke the memory budget.)
//!
//! Writes are buffered in memory in key order (a `BTreeMap`, at most half the
//! budget) and written to redb in one write transaction when the buffer is full:
//! sorted writes touch each leaf page once instead of dirtying a page per random
//! write. Each commit is durable (`Durability::Immediate`) because redb only
//! reuses the pages freed by a durable commit, and a chain of non-durable commits
//! would grow the file without bound. Reads go through a snapshot of the last
//! commit merged with the buffer. The file lives in a temporary directory of the
//! work dir and is removed with it; nothing needs to survive a crash.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use redb::{
    Database, Durability, Key, ReadOnlyTable, ReadTransaction, ReadableTable, TableDefinition,
    TableError, TypeName, Value,
};

use super::store::Slot;
use crate::engine::IdKey;
use crate::error::Hint;

/// A bulk load (the spill of the in-memory maps) commits after this many bytes.
pub const BATCH_BYTES: usize = 32 << 20;

/// redb's page cache.
pub const CACHE_BYTES: usize = 64 << 20;

/// redb's page cache for a store given `budget` (a quarter of it, from 1 MiB to
/// [`CACHE_BYTES`]).
fn cache_bytes(budget: usize) -> usize {
    (budget / 4).clamp(1 << 20, CACHE_BYTES)
}

/// The memory a store created with `budget` holds while the documents move in
/// ([`DiskStore::load`]) on top of the documents themselves: redb's page cache and
/// one write transaction's batch. The in-memory documents move to disk this much
/// before they reach the budget ([`super::store::Store`]), so that the move, when
/// both are held, stays within it: measured on the 1 GiB bench, a `--memory
/// 1300MiB` crossed during the apply peaked at 1,414 MiB of RSS while the move
/// waited for the full budget, past the 1,395 MiB of `--memory` + 100 MB.
pub fn own_memory(budget: usize) -> usize {
    cache_bytes(budget) + BATCH_BYTES
}

/// Whether a BSON element type is a number (double, int32, int64, decimal128):
/// equal values of these types are one `_id` with different bytes.
fn is_number(t: u8) -> bool {
    matches!(t, 0x01 | 0x10 | 0x12 | 0x13)
}

/// A callback over documents in `_id` order: the key and the document's bytes.
pub type DocVisitor<'a> = dyn FnMut(&IdKey, &[u8]) -> Result<(), DiskError> + 'a;

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

/// Keys: the `{_id: value}` bytes of an [`IdKey`] (the table names the slot).
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
        TypeName::new("pitr::DocKey(_id in server order)")
    }
}

impl Key for DocKey {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        // Keys are written only from an `IdKey`: a framed `{_id: v}`.
        crate::engine::compare::id_key::cmp_key_bytes(a, b)
    }
}

type ReadDocs = ReadOnlyTable<DocKey, &'static [u8]>;

/// The name of `slot`'s table.
fn table_name(slot: Slot) -> String {
    format!("docs-{slot}")
}

/// `slot`'s table; `name` is [`table_name`]'s.
fn docs(name: &str) -> TableDefinition<'_, DocKey, &'static [u8]> {
    TableDefinition::new(name)
}

/// The lowest key of `slot` in the write buffer (`{_id: MinKey}` sorts before every
/// value).
fn slot_start(slot: Slot) -> (Slot, IdKey) {
    (slot, IdKey::from_raw_parts(0xFF, &[]))
}

/// Memory a buffered write costs besides the document (map node, key, allocation).
const DIRTY_OVERHEAD: usize = 96;

/// A snapshot of what redb holds, with the tables opened in it so far (`None`: the
/// slot has no table, no document).
struct Snapshot {
    txn: ReadTransaction,
    tables: Mutex<HashMap<Slot, Option<Arc<ReadDocs>>>>,
}

/// The on-disk document store; see the module documentation.
pub struct DiskStore {
    path: PathBuf,
    db: Database,
    /// Writes not yet in redb, in key order: a document, or `None` for a delete.
    dirty: BTreeMap<(Slot, IdKey), Option<Box<[u8]>>>,
    dirty_bytes: usize,
    dirty_limit: usize,
    /// What redb holds (renewed after every commit; None only while writing).
    read: Option<Snapshot>,
}

impl DiskStore {
    /// Creates the store in `dir` (which must exist). `budget`: the memory the store
    /// may use: its write buffer (half), redb's page cache (a quarter, at most
    /// [`CACHE_BYTES`]).
    pub fn create(dir: &Path, budget: usize) -> Result<DiskStore, DiskError> {
        let path = dir.join("documents.redb");
        let db = Database::builder()
            .set_cache_size(cache_bytes(budget))
            .create(&path)
            .map_err(|e| err(&path, e))?;
        let mut store = DiskStore {
            path,
            db,
            dirty: BTreeMap::new(),
            dirty_bytes: 0,
            dirty_limit: (budget / 2).max(1 << 20),
            read: None,
        };
        store.renew_snapshot()?;
        Ok(store)
    }

    fn renew_snapshot(&mut self) -> Result<(), DiskError> {
        self.read = Some(Snapshot {
            txn: self.db.begin_read().map_err(|e| err(&self.path, e))?,
            tables: Mutex::new(HashMap::new()),
        });
        Ok(())
    }

    /// `slot`'s table in the snapshot (None: no document was ever committed there).
    fn committed_table(&self, slot: Slot) -> Result<Option<Arc<ReadDocs>>, DiskError> {
        let r = self
            .read
            .as_ref()
            .expect("a snapshot is open outside writes");
        let mut tables = r.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tables.get(&slot) {
            return Ok(t.clone());
        }
        let t = match r.txn.open_table(docs(&table_name(slot))) {
            Ok(t) => Some(Arc::new(t)),
            Err(TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(err(&self.path, e)),
        };
        tables.insert(slot, t.clone());
        Ok(t)
    }

    fn committed_get(
        &self,
        slot: Slot,
        key: &IdKey,
        out: Option<&mut Vec<u8>>,
    ) -> Result<bool, DiskError> {
        let Some(table) = self.committed_table(slot)? else {
            return Ok(false);
        };
        let v = table
            .get(key.document_bytes())
            .map_err(|e| err(&self.path, e))?;
        Ok(match (v, out) {
            (Some(g), Some(out)) => {
                out.extend_from_slice(g.value());
                true
            }
            (v, _) => v.is_some(),
        })
    }

    /// Writes the buffered writes in key order in one durable transaction (redb
    /// reuses pages only after a durable commit), then renews the snapshot.
    pub fn flush(&mut self) -> Result<(), DiskError> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        self.read = None;
        let mut t = self.db.begin_write().map_err(|e| err(&self.path, e))?;
        t.set_durability(Durability::Immediate);
        let mut pending = std::mem::take(&mut self.dirty).into_iter().peekable();
        while let Some(((slot, _), _)) = pending.peek() {
            let slot = *slot;
            let name = table_name(slot);
            let mut table = t.open_table(docs(&name)).map_err(|e| err(&self.path, e))?;
            while let Some(((_, key), v)) = pending.next_if(|((s, _), _)| *s == slot) {
                let k = key.document_bytes();
                match v {
                    Some(doc) => {
                        // An `_id` equal to the stored one but of another numeric
                        // type (5 and 5.0) has other bytes: redb's in-place
                        // overwrite of a leaf assumes the key keeps its length
                        // (redb 2.6 `LeafMutator::insert` panicked with "dest is
                        // out of bounds" in `writers_match_the_sequential_apply`,
                        // whose `_id`s are numbers of every type), so the old
                        // entry goes first.
                        if is_number(key.element_type()) {
                            table.remove(k).map_err(|e| err(&self.path, e))?;
                        }
                        table.insert(k, &doc[..]).map_err(|e| err(&self.path, e))?;
                    }
                    None => {
                        table.remove(k).map_err(|e| err(&self.path, e))?;
                    }
                }
            }
            drop(table);
        }
        t.commit().map_err(|e| err(&self.path, e))?;
        self.dirty_bytes = 0;
        self.renew_snapshot()
    }

    pub fn get(&self, slot: Slot, key: &IdKey, out: &mut Vec<u8>) -> Result<bool, DiskError> {
        match self.dirty.get(&(slot, key.clone())) {
            Some(Some(doc)) => {
                out.extend_from_slice(doc);
                Ok(true)
            }
            Some(None) => Ok(false),
            None => self.committed_get(slot, key, Some(out)),
        }
    }

    pub fn contains(&self, slot: Slot, key: &IdKey) -> Result<bool, DiskError> {
        match self.dirty.get(&(slot, key.clone())) {
            Some(v) => Ok(v.is_some()),
            None => self.committed_get(slot, key, None),
        }
    }

    fn buffer(&mut self, slot: Slot, key: IdKey, v: Option<Box<[u8]>>) -> Result<(), DiskError> {
        let add = DIRTY_OVERHEAD + v.as_ref().map_or(0, |d| d.len());
        if let Some(old) = self.dirty.insert((slot, key), v) {
            self.dirty_bytes -= DIRTY_OVERHEAD + old.map_or(0, |d| d.len());
        }
        self.dirty_bytes += add;
        if self.dirty_bytes > self.dirty_limit {
            self.flush()?;
        }
        Ok(())
    }

    /// Inserts or replaces; returns whether a document was replaced. `exists`:
    /// whether the caller just found the document (it read it to update it), which
    /// saves a second lookup; None to look.
    pub fn put(
        &mut self,
        slot: Slot,
        key: &IdKey,
        doc: &[u8],
        exists: Option<bool>,
    ) -> Result<bool, DiskError> {
        let replaced = match exists {
            Some(e) => e,
            None => self.contains(slot, key)?,
        };
        self.buffer(slot, key.clone(), Some(doc.to_vec().into_boxed_slice()))?;
        Ok(replaced)
    }

    pub fn remove(&mut self, slot: Slot, key: &IdKey) -> Result<bool, DiskError> {
        if !self.contains(slot, key)? {
            return Ok(false);
        }
        self.buffer(slot, key.clone(), None)?;
        Ok(true)
    }

    /// Removes every document of `slot`: its buffered writes are dropped and its
    /// table deleted (redb frees the table's pages without rewriting any).
    pub fn clear(&mut self, slot: Slot) -> Result<(), DiskError> {
        let mut of_slot = self.dirty.split_off(&slot_start(slot));
        let mut after = of_slot.split_off(&slot_start(slot + 1));
        self.dirty.append(&mut after);
        for (_, v) in of_slot {
            self.dirty_bytes -= DIRTY_OVERHEAD + v.map_or(0, |d| d.len());
        }
        self.read = None;
        let mut t = self.db.begin_write().map_err(|e| err(&self.path, e))?;
        t.set_durability(Durability::Immediate);
        t.delete_table(docs(&table_name(slot)))
            .map_err(|e| err(&self.path, e))?;
        t.commit().map_err(|e| err(&self.path, e))?;
        self.renew_snapshot()
    }

    /// Loads documents already in `_id` order (the spill of the in-memory maps),
    /// straight into redb, [`BATCH_BYTES`] per transaction.
    pub fn load(
        &mut self,
        slot: Slot,
        docs_in_order: impl Iterator<Item = (IdKey, Box<[u8]>)>,
    ) -> Result<(), DiskError> {
        self.flush()?;
        self.read = None;
        let name = table_name(slot);
        let mut it = docs_in_order.peekable();
        while it.peek().is_some() {
            let mut t = self.db.begin_write().map_err(|e| err(&self.path, e))?;
            t.set_durability(Durability::Immediate);
            {
                let mut table = t.open_table(docs(&name)).map_err(|e| err(&self.path, e))?;
                let mut bytes = 0;
                for (k, d) in it.by_ref() {
                    table
                        .insert(k.document_bytes(), &d[..])
                        .map_err(|e| err(&self.path, e))?;
                    bytes += d.len();
                    if bytes >= BATCH_BYTES {
                        break;
                    }
                }
            }
            t.commit().map_err(|e| err(&self.path, e))?;
            // The documents written are freed as the iterator moves on, many in
            // other threads' malloc arenas, which the store's own allocations
            // here do not reuse: given back batch by batch, so that the spill
            // does not hold the freed budget beside redb's (see
            // `crate::memory::give_back_freed_heap`).
            crate::memory::give_back_freed_heap();
        }
        self.renew_snapshot()
    }

    /// Every document of `slot` in `_id` order: redb's snapshot merged with the
    /// buffered writes.
    pub fn for_each(&self, slot: Slot, f: &mut DocVisitor<'_>) -> Result<(), DiskError> {
        let mut pending = self
            .dirty
            .range(slot_start(slot)..slot_start(slot + 1))
            .peekable();
        if let Some(table) = self.committed_table(slot)? {
            for item in table.iter().map_err(|e| err(&self.path, e))? {
                let (k, v) = item.map_err(|e| err(&self.path, e))?;
                let key = IdKey::from_document_bytes(k.value()).map_err(|e| err(&self.path, e))?;
                // Buffered writes before this key: new documents.
                while let Some(((_, dk), dv)) = pending.peek() {
                    if *dk >= key {
                        break;
                    }
                    if let Some(d) = dv {
                        f(dk, d)?;
                    }
                    pending.next();
                }
                match pending.peek() {
                    Some(((_, dk), dv)) if *dk == key => {
                        if let Some(d) = dv {
                            f(dk, d)?;
                        }
                        pending.next();
                    }
                    _ => f(&key, v.value())?,
                }
            }
        }
        for ((_, dk), dv) in pending {
            if let Some(d) = dv {
                f(dk, d)?;
            }
        }
        Ok(())
    }
}

fn err(path: &Path, e: impl std::fmt::Display) -> DiskError {
    DiskError::Store {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store stays movable and shareable across threads (a snapshot's table
    /// cache is behind a `Mutex`, not a `RefCell`).
    #[test]
    fn the_store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<DiskStore>();
    }

    fn key(i: i32) -> IdKey {
        IdKey::from_raw_parts(0x10, &i.to_le_bytes())
    }

    fn keys(s: &DiskStore, slot: Slot) -> Vec<IdKey> {
        let mut v = Vec::new();
        s.for_each(slot, &mut |k, _| {
            v.push(k.clone());
            Ok(())
        })
        .unwrap();
        v
    }

    /// Regression: dropping a large collection used `retain_in` on one shared table,
    /// which copied a leaf and its path per deleted key and freed nothing before the
    /// commit: the file grew by gigabytes and redb's page set by hundreds of MB on the
    /// 1 GiB bench. A drop must free pages, not write them.
    #[test]
    fn clear_drops_one_collection_without_growing_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DiskStore::create(dir.path(), 4 << 20).unwrap();
        let doc = vec![7u8; 200];
        s.load(
            1,
            (0..20_000).map(|i| (key(i), doc.clone().into_boxed_slice())),
        )
        .unwrap();
        s.load(
            2,
            (0..100).map(|i| (key(i), doc.clone().into_boxed_slice())),
        )
        .unwrap();
        // Buffered writes of both slots, not yet in redb.
        s.put(1, &key(-1), &doc, None).unwrap();
        s.put(2, &key(-1), &doc, None).unwrap();
        assert!(s.remove(1, &key(5)).unwrap());
        let file = dir.path().join("documents.redb");
        let before = std::fs::metadata(&file).unwrap().len();

        s.clear(1).unwrap();

        let after = std::fs::metadata(&file).unwrap().len();
        assert!(
            after <= before + (1 << 20),
            "the drop grew the file from {before} to {after} bytes"
        );
        assert_eq!(keys(&s, 1), Vec::<IdKey>::new());
        assert!(!s.contains(1, &key(3)).unwrap());
        assert!(!s.contains(1, &key(-1)).unwrap());
        // Only slot 2's buffered write is still accounted for.
        assert_eq!(s.dirty_bytes, DIRTY_OVERHEAD + doc.len());
        assert_eq!(keys(&s, 2), (-1..100).map(key).collect::<Vec<_>>());
        // The slot is usable again (a collection created in a recycled namespace
        // gets a new slot, but a cleared one, as by `emptycapped`, keeps its own).
        assert!(!s.put(1, &key(3), &doc, None).unwrap());
        s.flush().unwrap();
        assert_eq!(keys(&s, 1), vec![key(3)]);
        assert!(s.contains(2, &key(-1)).unwrap());
    }

    /// Reads merge the snapshot with the buffer: a delete in the buffer hides a
    /// committed document, a buffered put shows before its commit, and a slot that
    /// never had a table reads as empty.
    #[test]
    fn reads_merge_the_buffer_over_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DiskStore::create(dir.path(), 4 << 20).unwrap();
        s.load(
            3,
            (0..10).map(|i| (key(i), vec![i as u8].into_boxed_slice())),
        )
        .unwrap();
        assert!(s.remove(3, &key(4)).unwrap());
        assert!(!s.remove(3, &key(4)).unwrap());
        assert!(s.put(3, &key(2), &[42], None).unwrap());
        assert!(!s.put(3, &key(10), &[10], None).unwrap());
        let mut out = Vec::new();
        assert!(s.get(3, &key(2), &mut out).unwrap());
        assert_eq!(out, [42]);
        assert!(!s.get(3, &key(4), &mut out).unwrap());
        assert!(!s.contains(9, &key(1)).unwrap());
        assert_eq!(keys(&s, 9), Vec::<IdKey>::new());
        let expect: Vec<IdKey> = (0..11).filter(|&i| i != 4).map(key).collect();
        assert_eq!(keys(&s, 3), expect);
        s.flush().unwrap();
        assert_eq!(keys(&s, 3), expect);
        out.clear();
        assert!(s.get(3, &key(2), &mut out).unwrap());
        assert_eq!(out, [42]);
    }
}
