//! The LMDB candidate for the engine's on-disk store (measured, not chosen: see
//! docs/performance.md, "The on-disk store"), with the interface of
//! src/engine/replica/disk.rs.
#![allow(dead_code)]

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Mutex;

use heed::types::Bytes;
use heed::{Comparator, Database, Env, EnvFlags, EnvOpenOptions, RoTxn, WithoutTls};
use smallvec::SmallVec;

use pitr::engine::compare::cmp_key_bytes;
use pitr::engine::replica::Slot;
use pitr::engine::IdKey;

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

/// The order of stored keys: the slot's 4 bytes, then the `_id` in the server's order.
/// A key of the slot alone (a range bound) sorts before the slot's documents.
enum SlotIdOrder {}

impl Comparator for SlotIdOrder {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        if a.len() < 4 || b.len() < 4 {
            // Never written by the store; heed asks the comparator not to panic.
            return a.cmp(b);
        }
        a[..4]
            .cmp(&b[..4])
            .then_with(|| match (a.len() > 4, b.len() > 4) {
                // Keys are written only from an `IdKey`: a framed `{_id: v}`.
                (true, true) => cmp_key_bytes(&a[4..], &b[4..]),
                (x, y) => x.cmp(&y),
            })
    }
}

type Docs = Database<Bytes, Bytes, SlotIdOrder>;

/// A stored key: the slot then the `{_id: v}` bytes (inline up to 64 bytes).
type StoredKey = SmallVec<[u8; 64]>;

fn stored_key(slot: Slot, key: &IdKey) -> StoredKey {
    let mut k = StoredKey::new();
    k.extend_from_slice(&slot.to_be_bytes());
    k.extend_from_slice(key.document_bytes());
    k
}

/// The lowest key of `slot` in the write buffer (`{_id: MinKey}` sorts before every
/// value).
fn slot_start(slot: Slot) -> (Slot, IdKey) {
    (slot, IdKey::from_value(bson::RawBsonRef::MinKey))
}

/// Memory a buffered write costs besides the document (map node, key, allocation).
const DIRTY_OVERHEAD: usize = 96;

/// The size of the map reserved (address space only; the file grows as written).
const MAP_BYTES: usize = 1 << 40;

/// LMDB's page size on this platform (4 KiB on x86-64 and aarch64 Linux).
const PAGE: usize = 4096;

/// What one page read through the map can add to RSS: Linux maps the cached pages
/// around a faulting one too (`fault_around_bytes`, 64 KiB by default). Measured:
/// counting 4 KiB per page touched let the map reach 150 MB between trims.
const FAULT_AROUND: usize = 64 << 10;

/// The on-disk document store; see the module documentation.
pub struct DiskStore {
    path: PathBuf,
    env: Env<WithoutTls>,
    db: Docs,
    /// Writes not yet in LMDB, in key order: a document, or `None` for a delete.
    /// Also the documents whose key is too long for LMDB, for good.
    dirty: BTreeMap<(Slot, IdKey), Option<Box<[u8]>>>,
    dirty_bytes: usize,
    /// Of `dirty_bytes`: the documents kept in the buffer for good (long keys).
    pinned_bytes: usize,
    dirty_limit: usize,
    /// The longest stored key LMDB takes.
    max_key: usize,
    /// Writes per write transaction (each may change a page held in the heap).
    txn_entries: usize,
    /// The last commit, for point reads (None only while writing).
    read: Option<Mutex<RoTxn<'static, WithoutTls>>>,
    /// Bytes of the map read since its pages were last given back, and the limit.
    mapped: AtomicUsize,
    trim_after: usize,
    trim: bool,
    /// LMDB's map of the file (address, length), from /proc/self/maps: LMDB does
    /// not tell it (`mdb_env_info`'s address is only set for a fixed map). None:
    /// not found, the pages are left to the kernel.
    map: Option<(usize, usize)>,
}

/// The mapping of `file` in this process (start, length), from /proc/self/maps.
fn find_map(file: &Path) -> Option<(usize, usize)> {
    let file = std::fs::canonicalize(file).ok()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        // "start-end perms offset dev inode   path"
        let mut f = l.splitn(6, ' ');
        let range = f.next()?;
        let path = f.nth(4)?.trim_start();
        if Path::new(path) != file {
            return None;
        }
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        Some((a, b.checked_sub(a)?))
    })
}

impl DiskStore {
    /// Creates the store in `dir` (which must exist). `budget`: the memory the store
    /// may use: its write buffer (half), LMDB's pages of a write transaction (an
    /// eighth), pages of the map read since they were last given back (an eighth).
    pub fn create(dir: &Path, budget: usize) -> Result<DiskStore, DiskError> {
        let path = dir.join("data.mdb");
        let e = |e: heed::Error| err(&path, e);
        let mut opts = EnvOpenOptions::new().read_txn_without_tls();
        opts.map_size(MAP_BYTES).max_dbs(0).max_readers(126);
        // SAFETY: the flags only drop durability (nothing needs to survive a crash)
        // and read-ahead (reads are mostly random); the directory is this store's
        // own (a fresh temporary directory of the work dir), opened once, by this
        // process only, so no other mapping of the file can change it under us.
        let env = unsafe {
            opts.flags(
                EnvFlags::NO_SYNC
                    | EnvFlags::NO_META_SYNC
                    | EnvFlags::NO_READ_AHEAD
                    | EnvFlags::NO_LOCK,
            );
            opts.open(dir)
        }
        .map_err(e)?;
        let mut w = env.write_txn().map_err(e)?;
        let db: Docs = env
            .database_options()
            .types::<Bytes, Bytes>()
            .key_comparator::<SlotIdOrder>()
            .create(&mut w)
            .map_err(e)?;
        w.commit().map_err(e)?;
        let max_key = env.max_key_size();
        let mut store = DiskStore {
            path,
            env,
            db,
            dirty: BTreeMap::new(),
            dirty_bytes: 0,
            pinned_bytes: 0,
            dirty_limit: (budget / 2).max(1 << 20),
            max_key,
            txn_entries: (budget / 8 / PAGE).max(64),
            read: None,
            mapped: AtomicUsize::new(0),
            trim_after: (budget / 8).max(1 << 20),
            trim: true,
            map: None,
        };
        store.map = find_map(&store.path);
        store.renew_snapshot()?;
        Ok(store)
    }

    /// Keeps the map's pages mapped (the benchmark's view of what they cost in RSS).
    #[doc(hidden)]
    pub fn keep_mapped_pages(&mut self) {
        self.trim = false;
    }

    fn renew_snapshot(&mut self) -> Result<(), DiskError> {
        let t = self
            .env
            .clone()
            .static_read_txn()
            .map_err(|e| err(&self.path, e))?;
        self.read = Some(Mutex::new(t));
        Ok(())
    }

    /// Counts `bytes` read through the map; past the limit, gives its pages back.
    fn touched(&self, bytes: usize) {
        if !self.trim {
            return;
        }
        let m = self.mapped.fetch_add(bytes, AtomicOrdering::Relaxed) + bytes;
        if m >= self.trim_after {
            self.mapped.store(0, AtomicOrdering::Relaxed);
            let Some((addr, size)) = self.map else {
                return;
            };
            let len = ((self.env.info().last_page_number + 1) * PAGE).min(size);
            // SAFETY: the range is (part of) LMDB's read-only MAP_SHARED mapping of
            // its data file. MADV_DONTNEED on a shared file mapping drops only the
            // page table entries: the data stays in the page cache (or the file) and
            // the next access maps it again, so every pointer into the map, LMDB's
            // or a caller's, stays valid and reads the same bytes. An error (none is
            // expected) only leaves the pages mapped.
            unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        }
    }

    fn committed_get(
        &self,
        slot: Slot,
        key: &IdKey,
        out: Option<&mut Vec<u8>>,
    ) -> Result<bool, DiskError> {
        let k = stored_key(slot, key);
        if k.len() > self.max_key {
            return Ok(false);
        }
        let txn = self
            .read
            .as_ref()
            .expect("a snapshot is open outside writes")
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let v = self.db.get(&txn, &k).map_err(|e| err(&self.path, e))?;
        // The leaf page and the path to it, each with its fault-around.
        self.touched(2 * FAULT_AROUND);
        Ok(match (v, out) {
            (Some(d), Some(out)) => {
                out.extend_from_slice(d);
                true
            }
            (v, _) => v.is_some(),
        })
    }

    /// Writes the buffered writes in key order, in transactions of at most
    /// `txn_entries` writes, then renews the snapshot. Documents whose key is too
    /// long for LMDB stay in the buffer.
    pub fn flush(&mut self) -> Result<(), DiskError> {
        if self.dirty_bytes == self.pinned_bytes {
            return Ok(());
        }
        // A snapshot would keep the pages this write frees from being reused.
        self.read = None;
        let e = |e: heed::Error| err(&self.path, e);
        let mut keep = BTreeMap::new();
        let mut pinned = 0;
        let mut pending = std::mem::take(&mut self.dirty).into_iter().peekable();
        while pending.peek().is_some() {
            let mut t = self.env.write_txn().map_err(e)?;
            let mut n = 0;
            for ((slot, key), v) in pending.by_ref() {
                let k = stored_key(slot, &key);
                if k.len() > self.max_key {
                    if let Some(d) = v {
                        pinned += DIRTY_OVERHEAD + d.len();
                        keep.insert((slot, key), Some(d));
                    }
                    continue;
                }
                match v {
                    Some(doc) => self.db.put(&mut t, &k, &doc).map_err(e)?,
                    None => {
                        self.db.delete(&mut t, &k).map_err(e)?;
                    }
                }
                // The write read its leaf and the path to it through the map.
                self.touched(2 * FAULT_AROUND);
                n += 1;
                if n >= self.txn_entries {
                    break;
                }
            }
            t.commit().map_err(e)?;
        }
        self.dirty = keep;
        self.dirty_bytes = pinned;
        self.pinned_bytes = pinned;
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
        let long = stored_key(slot, &key).len() > self.max_key;
        let add = DIRTY_OVERHEAD + v.as_ref().map_or(0, |d| d.len());
        let old = if long && v.is_none() {
            // Never in LMDB: forgetting it is the delete.
            self.dirty.remove(&(slot, key))
        } else {
            let old = self.dirty.insert((slot, key), v);
            self.dirty_bytes += add;
            if long {
                self.pinned_bytes += add;
            }
            old
        };
        if let Some(old) = old {
            let was = DIRTY_OVERHEAD + old.map_or(0, |d| d.len());
            self.dirty_bytes -= was;
            if long {
                self.pinned_bytes -= was;
            }
        }
        if self.dirty_bytes - self.pinned_bytes > self.dirty_limit {
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
    /// key range deleted, in transactions of at most `txn_entries` deletes.
    pub fn clear(&mut self, slot: Slot) -> Result<(), DiskError> {
        let mut of_slot = self.dirty.split_off(&slot_start(slot));
        let mut after = of_slot.split_off(&slot_start(slot + 1));
        self.dirty.append(&mut after);
        for ((s, k), v) in of_slot {
            let n = DIRTY_OVERHEAD + v.map_or(0, |d| d.len());
            self.dirty_bytes -= n;
            if stored_key(s, &k).len() > self.max_key {
                self.pinned_bytes -= n;
            }
        }
        self.read = None;
        let e = |e: heed::Error| err(&self.path, e);
        let (lo, hi) = (slot.to_be_bytes(), slot.wrapping_add(1).to_be_bytes());
        let range = (
            Bound::Included(&lo[..]),
            if slot == Slot::MAX {
                Bound::Unbounded
            } else {
                Bound::Excluded(&hi[..])
            },
        );
        loop {
            let mut t = self.env.write_txn().map_err(e)?;
            let mut n = 0;
            {
                let mut it = self.db.range_mut(&mut t, &range).map_err(e)?;
                while n < self.txn_entries {
                    match it.next() {
                        Some(r) => {
                            let (k, v) = r.map_err(e)?;
                            self.touched(k.len() + v.len() + 16);
                            // SAFETY: nothing read from the database is kept while
                            // deleting (heed's own `delete_range` does the same).
                            unsafe { it.del_current() }.map_err(e)?;
                            n += 1;
                        }
                        None => break,
                    }
                }
            }
            t.commit().map_err(e)?;
            if n < self.txn_entries {
                break;
            }
        }
        self.renew_snapshot()
    }

    /// Loads documents already in `_id` order (the spill of the in-memory maps),
    /// through the write buffer's transactions.
    pub fn load(
        &mut self,
        slot: Slot,
        docs_in_order: impl Iterator<Item = (IdKey, Box<[u8]>)>,
    ) -> Result<(), DiskError> {
        for (k, d) in docs_in_order {
            self.buffer(slot, k, Some(d))?;
        }
        self.flush()
    }

    /// Every document of `slot` in `_id` order: the last commit merged with the
    /// buffered writes. Its own read transaction, so that scans can run on several
    /// threads at once.
    pub fn for_each(&self, slot: Slot, f: &mut DocVisitor<'_>) -> Result<(), DiskError> {
        let e = |e: heed::Error| err(&self.path, e);
        let mut pending = self
            .dirty
            .range(slot_start(slot)..slot_start(slot + 1))
            .peekable();
        let txn = self.env.read_txn().map_err(e)?;
        let (lo, hi) = (slot.to_be_bytes(), slot.wrapping_add(1).to_be_bytes());
        let range = (
            Bound::Included(&lo[..]),
            if slot == Slot::MAX {
                Bound::Unbounded
            } else {
                Bound::Excluded(&hi[..])
            },
        );
        let mut page = usize::MAX;
        for item in self.db.range(&txn, &range).map_err(e)? {
            let (k, v) = item.map_err(e)?;
            // A new page of the map: what it maps, with its fault-around.
            if v.as_ptr() as usize / PAGE != page {
                page = v.as_ptr() as usize / PAGE;
                self.touched(FAULT_AROUND);
            }
            let key = IdKey::from_document_bytes(&k[4..]).map_err(|x| err(&self.path, x))?;
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
                _ => f(&key, v)?,
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
