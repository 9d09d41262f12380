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
//! Writes are buffered in memory in key order (a `BTreeMap`, at most half the
//! budget) and written to redb in one write transaction when the buffer is full:
//! sorted writes touch each leaf page once instead of dirtying a page per random
//! write. Each commit is durable (`Durability::Immediate`) because redb only
//! reuses the pages freed by a durable commit, and a chain of non-durable commits
//! would grow the file without bound. Reads go through a snapshot of the last
//! commit merged with the buffer. The file lives in a temporary directory of the
//! work dir and is removed with it; nothing
//! needs to survive a crash.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use redb::{Database, Durability, Key, ReadTransaction, TableDefinition, TypeName, Value};

use super::store::Slot;
use crate::engine::IdKey;
use crate::error::Hint;

/// A bulk load (the spill of the in-memory maps) commits after this many bytes.
pub const BATCH_BYTES: usize = 32 << 20;

/// redb's page cache.
pub const CACHE_BYTES: usize = 64 << 20;

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

/// Memory a buffered write costs besides the document (map node, key, allocation).
const DIRTY_OVERHEAD: usize = 96;

/// The on-disk document store; see the module documentation.
pub struct DiskStore {
    path: PathBuf,
    db: Database,
    /// Writes not yet in redb, in key order: a document, or `None` for a delete.
    dirty: BTreeMap<(Slot, IdKey), Option<Box<[u8]>>>,
    dirty_bytes: usize,
    dirty_limit: usize,
    /// A snapshot of what redb holds (renewed after every commit).
    read: Option<ReadTransaction>,
}

impl DiskStore {
    /// Creates the store in `dir` (which must exist). `budget`: the memory the store
    /// may use: its write buffer (half), redb's page cache (a quarter, at most
    /// [`CACHE_BYTES`]).
    pub fn create(dir: &Path, budget: usize) -> Result<DiskStore, DiskError> {
        let path = dir.join("documents.redb");
        let db = Database::builder()
            .set_cache_size((budget / 4).clamp(1 << 20, CACHE_BYTES))
            .create(&path)
            .map_err(|e| err(&path, e))?;
        let t = db.begin_write().map_err(|e| err(&path, e))?;
        t.open_table(DOCS).map_err(|e| err(&path, e))?;
        t.commit().map_err(|e| err(&path, e))?;
        let read = Some(db.begin_read().map_err(|e| err(&path, e))?);
        Ok(DiskStore {
            path,
            db,
            dirty: BTreeMap::new(),
            dirty_bytes: 0,
            dirty_limit: (budget / 2).max(1 << 20),
            read,
        })
    }

    fn committed_get(&self, k: &[u8], out: &mut Vec<u8>) -> Result<bool, DiskError> {
        let r = self.read.as_ref().expect("a snapshot is always open");
        let table = r.open_table(DOCS).map_err(|e| err(&self.path, e))?;
        let v = table.get(k).map_err(|e| err(&self.path, e))?;
        Ok(v.map(|g| out.extend_from_slice(g.value())).is_some())
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
        {
            let mut table = t.open_table(DOCS).map_err(|e| err(&self.path, e))?;
            for ((slot, key), v) in std::mem::take(&mut self.dirty) {
                let k = key_bytes(slot, &key);
                match v {
                    Some(doc) => {
                        table
                            .insert(&k[..], &doc[..])
                            .map_err(|e| err(&self.path, e))?;
                    }
                    None => {
                        table.remove(&k[..]).map_err(|e| err(&self.path, e))?;
                    }
                }
            }
        }
        t.commit().map_err(|e| err(&self.path, e))?;
        self.dirty_bytes = 0;
        self.read = Some(self.db.begin_read().map_err(|e| err(&self.path, e))?);
        Ok(())
    }

    pub fn get(&self, slot: Slot, key: &IdKey, out: &mut Vec<u8>) -> Result<bool, DiskError> {
        match self.dirty.get(&(slot, key.clone())) {
            Some(Some(doc)) => {
                out.extend_from_slice(doc);
                Ok(true)
            }
            Some(None) => Ok(false),
            None => self.committed_get(&key_bytes(slot, key), out),
        }
    }

    pub fn contains(&self, slot: Slot, key: &IdKey) -> Result<bool, DiskError> {
        let mut scratch = Vec::new();
        self.get(slot, key, &mut scratch)
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

    /// Inserts or replaces; returns whether a document was replaced.
    pub fn put(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) -> Result<bool, DiskError> {
        let replaced = self.contains(slot, key)?;
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

    /// Removes every document of `slot`.
    pub fn clear(&mut self, slot: Slot) -> Result<(), DiskError> {
        self.flush()?;
        let (start, end) = (slot_start(slot), slot_start(slot + 1));
        self.read = None;
        let mut t = self.db.begin_write().map_err(|e| err(&self.path, e))?;
        t.set_durability(Durability::Immediate);
        {
            let mut table = t.open_table(DOCS).map_err(|e| err(&self.path, e))?;
            table
                .retain_in(&start[..]..&end[..], |_, _| false)
                .map_err(|e| err(&self.path, e))?;
        }
        t.commit().map_err(|e| err(&self.path, e))?;
        self.read = Some(self.db.begin_read().map_err(|e| err(&self.path, e))?);
        Ok(())
    }

    /// Loads documents already in `_id` order (the spill of the in-memory maps),
    /// straight into redb.
    pub fn load(
        &mut self,
        slot: Slot,
        docs: impl Iterator<Item = (IdKey, Box<[u8]>)>,
    ) -> Result<(), DiskError> {
        self.flush()?;
        self.read = None;
        let mut docs = docs.peekable();
        while docs.peek().is_some() {
            let mut t = self.db.begin_write().map_err(|e| err(&self.path, e))?;
            t.set_durability(Durability::Immediate);
            {
                let mut table = t.open_table(DOCS).map_err(|e| err(&self.path, e))?;
                let mut bytes = 0;
                for (k, d) in docs.by_ref() {
                    table
                        .insert(&key_bytes(slot, &k)[..], &d[..])
                        .map_err(|e| err(&self.path, e))?;
                    bytes += d.len();
                    if bytes >= BATCH_BYTES {
                        break;
                    }
                }
            }
            t.commit().map_err(|e| err(&self.path, e))?;
        }
        self.read = Some(self.db.begin_read().map_err(|e| err(&self.path, e))?);
        Ok(())
    }

    /// Every document of `slot` in `_id` order: redb's snapshot merged with the
    /// buffered writes.
    pub fn for_each(&self, slot: Slot, f: &mut DocVisitor<'_>) -> Result<(), DiskError> {
        let lo = (slot, IdKey::from_raw_parts(0xFF, &[]));
        let hi = (slot + 1, IdKey::from_raw_parts(0xFF, &[]));
        let mut pending = self.dirty.range(lo..hi).peekable();
        let (start, end) = (slot_start(slot), slot_start(slot + 1));
        let r = self.read.as_ref().expect("a snapshot is always open");
        let table = r.open_table(DOCS).map_err(|e| err(&self.path, e))?;
        for item in table
            .range(&start[..]..&end[..])
            .map_err(|e| err(&self.path, e))?
        {
            let (k, v) = item.map_err(|e| err(&self.path, e))?;
            let key =
                IdKey::from_document_bytes(&k.value()[4..]).map_err(|e| err(&self.path, e))?;
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
