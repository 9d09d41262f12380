//! Where the replica's documents live: in memory while they fit in the budget, then
//! on disk: whole documents in the sort-merge store ([`super::sorted`]: sorted
//! files, writes deferred and merged), a collection written one document at a time
//! and the counts-only model's keys in the B-tree store ([`super::disk`], redb).
//!
//! Documents are keyed by (collection slot, `_id`) and read back in the `_id`
//! index's order ([`IdKey`]'s `Ord`, the server's), which is the order `dbHash`
//! hashes them and the order the dump writes them. A collection keeps its slot when
//! it is renamed, so a rename moves no document.
//!
//! In counts-only mode ([`Content::KeysOnly`]) only the `_id`s are kept: the plan's
//! expected counts and lint need membership, not content.
//!
//! Memory accounting is an estimate of the heap held (document bytes, key bytes and
//! a fixed per-entry overhead for the hash table and allocations); when it passes the
//! budget, less what the on-disk store holds while they move ([`disk::own_memory`],
//! at most 96 MiB), every document moves to disk at once and later writes go there
//! (`PITR_DISK_STORE=redb`: all to the B-tree store, as before the sort-merge one).

use std::collections::HashMap;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use std::path::{Path, PathBuf};

use super::disk::{self, DiskError, DiskStore};
use super::sorted::{self, Sorted};
use crate::engine::IdKey;

/// The maps looked up once or more per applied entry (by slot, by namespace):
/// foldhash instead of SipHash, which showed in an in-memory replay's profile.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What the store keeps of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// The whole document.
    Documents,
    /// Only its `_id` (counts and membership).
    KeysOnly,
    /// Nothing: only the catalog (which collections exist) is modelled, for a plan
    /// that does not count (`--no-expect`), so memory does not grow with inserts.
    CatalogOnly,
}

/// The environment variable that chooses the on-disk store past the budget:
/// `redb` keeps every collection in the B-tree store ([`super::disk`], as before
/// the sort-merge store); unset or `sorted`, the sort-merge store.
pub const DISK_STORE_ENV: &str = "PITR_DISK_STORE";

/// Whether documents past the budget go to the sort-merge store.
fn sort_merge() -> bool {
    std::env::var(DISK_STORE_ENV).map_or(true, |v| v.trim() != "redb")
}

/// `PITR_MOVE=late`: the documents move to disk only when they pass the budget,
/// never ahead of the slice ([`Store::move_ahead`]), for comparisons and for the
/// tests of a move in the middle of the apply (which still happens when the
/// slice's bytes underestimate what it adds, or the backup's own oplog crosses).
fn move_late() -> bool {
    std::env::var_os("PITR_MOVE").is_some_and(|v| v == "late")
}

/// A collection's documents are addressed by this slot, not by name.
pub type Slot = u32;

/// Per-entry heap overhead assumed on top of the bytes (the hash table's share,
/// the document's allocation header, the key inline). Measured with glibc's malloc
/// (`cargo run --release --example store_memory`): a million documents of 100, 300
/// and 1,000 bytes under int32 and ObjectId `_id`s, in two partitions, took 111-125
/// bytes each beyond their own while hashed (77 with 1.8 million: the tables grow
/// by doubling, so their share depends on how full they are), 56-69 once sorted
/// ([`Store::flush`]). The B-tree they lived in before took 111-119; 64, assumed
/// before that, undercounted the heap by 5-10%: past the 100 MB of headroom
/// `--memory` promises once the budget is a few GiB.
const ENTRY_OVERHEAD: usize = 120;

/// One document in memory: its `_id` and its bytes.
pub(crate) type Entry = (IdKey, Box<[u8]>);

/// Hash tables per collection and partition: a table grows by doubling, and for
/// a moment holds its old and new arrays; sixteen smaller tables keep that moment
/// to a sixteenth of the collection, and the same for the move to sorted order
/// ([`Coll::sort`]).
const SHARDS: usize = 16;

/// The hash of an `_id` in the in-memory tables and for its partition (agrees
/// with [`IdKey`]'s `Eq`, across numeric types too). Bits 32-35 choose the shard,
/// the bits from 36 the partition ([`Store::locate`]): hashbrown places by the
/// low bits and tags by the top seven.
fn key_hash(key: &IdKey) -> u64 {
    foldhash::fast::FixedState::with_seed(0x6964_6b65).hash_one(key)
}

fn shard(hash: u64) -> usize {
    (hash >> 32) as usize % SHARDS
}

fn rehash(e: &Entry) -> u64 {
    key_hash(&e.0)
}

/// One collection's documents in one partition. While the oplog is applied they
/// are hashed by `_id` (a point lookup per write: the B-tree they lived in before
/// cost a cache miss at each of its levels, 2.3 M documents deep on the bench, and
/// was half of the writer threads' time); reads in `_id` order (`dbHash`, the
/// dump, the move to disk) sort them once ([`Store::flush`]), and a later write
/// hashes them again.
enum Coll {
    Hashed(Box<[HashTable<Entry>; SHARDS]>),
    Sorted(Vec<Entry>),
}

impl Default for Coll {
    fn default() -> Coll {
        Coll::Hashed(Box::default())
    }
}

impl Coll {
    /// `h`: the key's [`key_hash`] (computed once per write, by whoever queued it).
    fn get(&self, key: &IdKey, h: u64) -> Option<&Entry> {
        match self {
            Coll::Hashed(t) => t[shard(h)].find(h, |e| e.0 == *key),
            Coll::Sorted(v) => v.binary_search_by(|e| e.0.cmp(key)).ok().map(|i| &v[i]),
        }
    }

    fn get_mut(&mut self, key: &IdKey, h: u64) -> Option<&mut Entry> {
        match self {
            Coll::Hashed(t) => t[shard(h)].find_mut(h, |e| e.0 == *key),
            Coll::Sorted(v) => match v.binary_search_by(|e| e.0.cmp(key)) {
                Ok(i) => Some(&mut v[i]),
                Err(_) => None,
            },
        }
    }

    /// The tables, hashing the documents again if they were sorted.
    fn tables(&mut self) -> &mut [HashTable<Entry>; SHARDS] {
        if let Coll::Sorted(v) = self {
            let mut t: Box<[HashTable<Entry>; SHARDS]> = Box::default();
            for e in std::mem::take(v) {
                let h = key_hash(&e.0);
                t[shard(h)].insert_unique(h, e, rehash);
            }
            *self = Coll::Hashed(t);
        }
        match self {
            Coll::Hashed(t) => t,
            Coll::Sorted(_) => unreachable!("hashed above"),
        }
    }

    /// Sorts the documents by `_id` (the server's index order), a table at a time
    /// so that the tables and the sorted list together hold no more than the
    /// tables did, but for one table.
    fn sort(&mut self) {
        if let Coll::Hashed(_) = self {
            let c = std::mem::replace(self, Coll::Sorted(Vec::new()));
            *self = Coll::Sorted(c.into_sorted());
        }
    }

    /// Every document, in no particular order unless sorted.
    fn iter(&self) -> Box<dyn Iterator<Item = &Entry> + '_> {
        match self {
            Coll::Hashed(t) => Box::new(t.iter().flat_map(HashTable::iter)),
            Coll::Sorted(v) => Box::new(v.iter()),
        }
    }

    /// The documents sorted by `_id`, the tables moved out one at a time (each
    /// freed once its entries are in the list).
    fn into_sorted(self) -> Vec<Entry> {
        let mut v = match self {
            Coll::Sorted(v) => return v,
            Coll::Hashed(t) => {
                let mut v = Vec::with_capacity(t.iter().map(HashTable::len).sum());
                for table in *t {
                    v.extend(table);
                }
                v
            }
        };
        v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// A hint to load the cache line at `p` (nothing where there is no such hint).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Writes `doc` over a stored document (over its bytes when the size is
/// unchanged, else in an allocation of the new size): the change of the memory
/// estimate.
pub(crate) fn overwrite(old: &mut Box<[u8]>, doc: &[u8]) -> isize {
    let old_len = old.len();
    if old_len == doc.len() {
        old.copy_from_slice(doc);
    } else {
        *old = Box::from(doc);
    }
    doc.len() as isize - old_len as isize
}

/// One partition of the in-memory documents: every `_id` lives in the partition
/// [`Store::locate`] names, so writer threads applying a batch
/// ([`super::partition`]) each own one partition and share nothing (no lock).
#[derive(Default)]
pub(crate) struct Part {
    mem: FastMap<Slot, Coll>,
    counts: FastMap<Slot, u64>,
}

impl Part {
    /// `h` is `key`'s [`key_hash`], here and in every method taking one.
    pub(crate) fn get(&self, slot: Slot, key: &IdKey, h: u64) -> Option<&[u8]> {
        self.mem.get(&slot)?.get(key, h).map(|e| &e.1[..])
    }

    /// Brings where `key`'s document lives into the cache (its table's control
    /// bytes and bucket, and the document's first bytes), so that the write that
    /// follows finds them there. The writer threads call it for a few queued
    /// entries before applying them: the lookups' cache misses, each a trip to
    /// memory among millions of documents, then overlap instead of following one
    /// another. Changes nothing.
    pub(crate) fn prefetch(&self, slot: Slot, key: &IdKey, h: u64) {
        // Sorted (only after `Store::flush`), a lookup is a binary search: nothing
        // worth bringing ahead.
        if let Some(coll @ Coll::Hashed(_)) = self.mem.get(&slot) {
            if let Some(e) = coll.get(key, h) {
                prefetch(e.1.as_ptr());
            }
        }
    }

    /// The document, to be written over.
    pub(crate) fn get_mut(&mut self, slot: Slot, key: &IdKey, h: u64) -> Option<&mut Box<[u8]>> {
        Some(&mut self.mem.get_mut(&slot)?.get_mut(key, h)?.1)
    }

    /// Inserts or replaces: whether a document was replaced, and the change of
    /// the memory estimate.
    pub(crate) fn put(&mut self, slot: Slot, key: IdKey, h: u64, doc: &[u8]) -> (bool, isize) {
        let add = Store::cost(&key, doc.len());
        let coll = self.mem.entry(slot).or_default();
        // Same key size: the old entry cost `add` with the old document's length.
        let replaced = |old: &mut Box<[u8]>| (true, overwrite(old, doc));
        if let Coll::Sorted(_) = coll {
            if let Some(e) = coll.get_mut(&key, h) {
                return replaced(&mut e.1);
            }
        }
        match coll.tables()[shard(h)].entry(h, |e| e.0 == key, rehash) {
            hashbrown::hash_table::Entry::Occupied(mut o) => replaced(&mut o.get_mut().1),
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert((key, Box::from(doc)));
                *self.counts.entry(slot).or_default() += 1;
                (false, add as isize)
            }
        }
    }

    /// Replaces a document in place (over its bytes when the size is unchanged):
    /// the change of the memory estimate, None when it is absent.
    pub(crate) fn replace(&mut self, slot: Slot, key: &IdKey, h: u64, doc: &[u8]) -> Option<isize> {
        Some(overwrite(self.get_mut(slot, key, h)?, doc))
    }

    /// Removes: the change of the memory estimate, None when it was absent.
    pub(crate) fn remove(&mut self, slot: Slot, key: &IdKey, h: u64) -> Option<isize> {
        let coll = self.mem.get_mut(&slot)?;
        coll.get(key, h)?;
        let (k, doc) = coll.tables()[shard(h)]
            .find_entry(h, |e| e.0 == *key)
            .ok()?
            .remove()
            .0;
        if let Some(c) = self.counts.get_mut(&slot) {
            *c -= 1;
        }
        Some(-(Store::cost(&k, doc.len()) as isize))
    }

    /// Sorts every collection's documents by `_id`.
    fn sort(&mut self) {
        for c in self.mem.values_mut() {
            c.sort();
        }
    }
}

/// Bytes of documents from which a dropped collection is freed on a thread of its
/// own: a `free` per document (a cache miss each) took the 1 GiB bench's walking
/// thread 0.3 s for its drops, the last of them alone at the end of the apply.
const FREE_ASIDE_BYTES: usize = 16 << 20;

/// Frees a dropped collection's documents: on a thread of its own when they are
/// many (the apply goes on meanwhile), else here.
fn free_aside(colls: Vec<Coll>, bytes: usize) {
    if bytes >= FREE_ASIDE_BYTES {
        // Should no thread start, the closure, and the documents with it, drop here.
        let _ = std::thread::Builder::new()
            .name("pitr-free".into())
            .spawn(move || drop(colls));
    }
}

/// Merges iterators each sorted by key into one sorted by key (the partitions of
/// a collection hold disjoint `_id`s; the first iterator wins a tie).
fn merge_sorted<K: Ord, V, I: Iterator<Item = (K, V)>>(
    iters: Vec<I>,
) -> impl Iterator<Item = (K, V)> {
    let mut iters = iters;
    let mut heads: Vec<Option<(K, V)>> = iters.iter_mut().map(Iterator::next).collect();
    std::iter::from_fn(move || {
        let mut best: Option<usize> = None;
        for (i, head) in heads.iter().enumerate() {
            let Some((k, _)) = head else {
                continue;
            };
            if best.is_none_or(|b| heads[b].as_ref().is_some_and(|(bk, _)| k < bk)) {
                best = Some(i);
            }
        }
        let b = best?;
        let next = iters[b].next();
        std::mem::replace(&mut heads[b], next)
    })
}

/// The documents of every collection; see the module documentation.
pub struct Store {
    content: Content,
    /// The in-memory documents, split by the hash of their `_id` (one partition
    /// unless the replica applies on several writer threads).
    parts: Vec<Part>,
    mem_bytes: usize,
    budget: usize,
    spill_dir: Option<PathBuf>,
    /// Past the budget, documents needing single reads and writes (a collection the
    /// replica writes to one entry at a time, or any in counts-only mode).
    disk: Option<DiskStore>,
    /// Past the budget with whole documents: the sort-merge store, for every
    /// collection not in `tree` ([`super::sorted`]).
    sorted: Option<Sorted>,
    /// The collections moved from `sorted` to `disk`.
    tree: std::collections::HashSet<Slot, foldhash::fast::RandomState>,
    peak_mem_bytes: usize,
    /// A batch of the writer threads passed the budget: the documents move to disk
    /// once every batch in flight is back ([`Store::spill_now`]).
    spill_pending: bool,
}

impl Store {
    /// `budget`: bytes of documents kept in memory before spilling to `spill_dir`
    /// (None: never spill).
    pub fn new(content: Content, budget: usize, spill_dir: Option<&Path>) -> Store {
        Store::partitioned(content, budget, spill_dir, 1)
    }

    /// [`Store::new`] with the in-memory documents in `parts` partitions (by the
    /// hash of the `_id`), one per writer thread.
    pub fn partitioned(
        content: Content,
        budget: usize,
        spill_dir: Option<&Path>,
        parts: usize,
    ) -> Store {
        Store {
            content,
            parts: (0..parts.max(1)).map(|_| Part::default()).collect(),
            mem_bytes: 0,
            budget,
            spill_dir: spill_dir.map(Path::to_path_buf),
            disk: None,
            sorted: None,
            tree: Default::default(),
            peak_mem_bytes: 0,
            spill_pending: false,
        }
    }

    pub fn content(&self) -> Content {
        self.content
    }

    /// How many partitions the in-memory documents are split into.
    pub fn partitions(&self) -> usize {
        self.parts.len()
    }

    /// The partition holding `key`, and the key's hash in the tables ([`Part`]'s
    /// methods take it; the writer threads get it queued with the write). Equal
    /// `_id`s of different numeric types hash alike: [`IdKey`]'s `Hash` agrees with
    /// its `Eq`.
    pub(crate) fn locate(&self, key: &IdKey) -> (usize, u64) {
        let h = key_hash(key);
        if self.parts.len() == 1 {
            return (0, h);
        }
        (((h >> 36) % self.parts.len() as u64) as usize, h)
    }

    /// The partitions, for writer threads that each take one.
    pub(crate) fn parts_mut(&mut self) -> &mut [Part] {
        &mut self.parts
    }

    /// Whether documents live on disk now.
    pub fn spilled(&self) -> bool {
        self.disk.is_some() || self.sorted.is_some()
    }

    /// Whether `slot`'s documents are in the sort-merge store, so that writes to it
    /// are deferred ([`Store::defer`]): documents are past the budget, kept whole,
    /// and the collection was never moved to the B-tree store (once past the
    /// budget, a collection not here is there).
    pub(crate) fn defers(&self, slot: Slot) -> bool {
        self.sorted.is_some() && !self.tree.contains(&slot)
    }

    /// A write to `slot`'s document `key` at place `seq` in the oplog, applied at the
    /// next [`Store::merge_deferred`] of the collection.
    pub(crate) fn defer(
        &mut self,
        slot: Slot,
        key: &IdKey,
        seq: u64,
        meta: [u8; 12],
        parts: &[&[u8]],
    ) -> Result<(), DiskError> {
        let s = self.sorted.as_mut().expect("defers() was checked");
        s.defer(slot, key, seq, meta, parts)
    }

    /// The collections with deferred writes not applied yet.
    pub(crate) fn deferred_slots(&self) -> Vec<Slot> {
        self.sorted
            .as_ref()
            .map_or(Vec::new(), Sorted::pending_slots)
    }

    /// Whether any collection has deferred writes not applied yet.
    pub(crate) fn deferred(&self) -> bool {
        self.sorted.as_ref().is_some_and(Sorted::pending)
    }

    /// Applies `slot`'s deferred writes: `apply` gets each document and its writes
    /// ([`Sorted::merge`]).
    pub(crate) fn merge_deferred(
        &mut self,
        slot: Slot,
        apply: &mut dyn FnMut(&mut sorted::Doc, &IdKey, &sorted::Op<'_>) -> sorted::Flow,
    ) -> Result<(), DiskError> {
        let s = self.sorted.as_mut().expect("deferred() was checked");
        let n = s.merge(slot, apply)?;
        self.set_count(slot, n);
        Ok(())
    }

    /// The per-slot counts live in the first partition once on disk.
    fn set_count(&mut self, slot: Slot, n: u64) {
        if n == 0 {
            self.parts[0].counts.remove(&slot);
        } else {
            self.parts[0].counts.insert(slot, n);
        }
    }

    /// Moves `slot` from the sort-merge store to the B-tree store, for single reads
    /// and writes (its deferred writes must have been merged).
    fn move_to_tree(&mut self, slot: Slot) -> Result<(), DiskError> {
        if !self.defers(slot) {
            return Ok(());
        }
        let s = self.sorted.as_mut().expect("defers");
        debug_assert!(
            !s.pending_for(slot),
            "moved to the B-tree with writes deferred"
        );
        if self.disk.is_none() {
            // A quarter of the budget (its write buffer and page cache): the
            // sort-merge store's buffer holds half, its merges' reads up to a
            // few dozen MiB.
            let dir = self.spill_dir.clone().expect("spilled");
            self.disk = Some(DiskStore::create(&dir, self.budget / 4)?);
        }
        let disk = self.disk.as_mut().expect("just made");
        let mut failed = None;
        let docs = s.take(slot, &mut failed)?;
        disk.load(slot, docs)?;
        if let Some(e) = failed {
            return Err(e);
        }
        self.tree.insert(slot);
        Ok(())
    }

    /// The most memory the documents held (estimate), in bytes.
    pub fn peak_memory(&self) -> usize {
        self.peak_mem_bytes
    }

    /// Documents held, over every collection.
    pub fn total(&self) -> u64 {
        self.parts.iter().flat_map(|p| p.counts.values()).sum()
    }

    /// Forgets every document and keeps none from now on (catalog only): for a
    /// counting model that outgrew its cap.
    pub fn forget_documents(&mut self) {
        self.content = Content::CatalogOnly;
        for p in &mut self.parts {
            *p = Part::default();
        }
        self.mem_bytes = 0;
        self.disk = None;
        self.sorted = None;
    }

    pub fn count(&self, slot: Slot) -> u64 {
        self.parts
            .iter()
            .map(|p| p.counts.get(&slot).copied().unwrap_or(0))
            .sum()
    }

    fn cost(key: &IdKey, doc_len: usize) -> usize {
        let k = key.document_bytes().len();
        ENTRY_OVERHEAD + doc_len + if k > 30 { k } else { 0 }
    }

    /// Adds a change of the memory estimate (never below zero).
    fn add_bytes(&mut self, delta: isize) {
        self.mem_bytes = if delta >= 0 {
            self.mem_bytes + delta as usize
        } else {
            self.mem_bytes.saturating_sub(delta.unsigned_abs())
        };
    }

    /// Whether the in-memory documents are past what they may hold: the budget less
    /// what the on-disk store holds while they move there ([`disk::own_memory`]),
    /// so that the move itself stays within the budget; at least half the budget
    /// (below 128 MiB the store's share, mostly its fixed 32 MiB batch, is more than
    /// half: there the move may pass the budget by up to that share, within the
    /// + 100 MB `--memory` promises).
    fn over_budget(&self) -> bool {
        self.spill_dir.is_some() && self.mem_bytes > Store::kept_in_memory(self.budget)
    }

    /// The most the in-memory documents hold before they move to disk, given the
    /// budget ([`Store::over_budget`]).
    fn kept_in_memory(budget: usize) -> usize {
        budget
            .saturating_sub(disk::own_memory(budget))
            .max(budget / 2)
    }

    /// After a write that may have grown the documents: the peak, and the move to
    /// disk past the budget.
    fn grew(&mut self) -> Result<(), DiskError> {
        self.peak_mem_bytes = self.peak_mem_bytes.max(self.mem_bytes);
        if self.disk.is_none() && self.over_budget() {
            self.spill()?;
        }
        Ok(())
    }

    /// A batch applied by writer threads ([`super::partition`]) changed the memory
    /// estimate by `deltas` (in the sequential order of its writes, each with
    /// whether it was a write that grows, as [`Store::put`] or
    /// [`Store::mem_replace`]): the peak and the move to disk are those the
    /// sequential apply would have seen (it moved to disk at the first write past
    /// the budget, and no later write changed the peak); the documents move to disk
    /// later, at [`Store::spill_now`], once no batch is in flight (the same
    /// documents end up there).
    pub(crate) fn batch_applied(&mut self, deltas: impl Iterator<Item = (isize, bool)>) {
        for (d, write) in deltas {
            self.add_bytes(d);
            if self.spill_pending || !write {
                continue;
            }
            self.peak_mem_bytes = self.peak_mem_bytes.max(self.mem_bytes);
            self.spill_pending = self.over_budget();
        }
    }

    /// Moves whole documents to the sort-merge store now, before `writes` more
    /// bytes are applied, when these (what the oplog still to apply holds: about
    /// an upper bound on what it adds, as an insert's entry holds the document
    /// and an update's the change, beside fields of 100 bytes or more) could take
    /// them past the budget; returns whether they moved. No batch of the writer
    /// threads may be in flight. Inserts of documents so small that their heap
    /// overhead ([`ENTRY_OVERHEAD`]) passes their entry's other fields may still
    /// cross later: the move in the middle of the apply remains for that.
    ///
    /// Why: the move in the middle of the apply stops it while the documents are
    /// written, and the writes before it ran the slower way (random reads and
    /// writes of documents in memory, where the sort-merge store reads and writes
    /// in sequence). On the 1 GiB bench with a budget crossed during the apply
    /// (488 MiB), moving first took the run from 7.7-8.5 s to about the
    /// `--memory 64MiB` run's time (docs/performance.md). When the writes would not
    /// have crossed after all (updates in place, deletes), the run goes the disk
    /// way for nothing, which on the bench is no slower; the work dir's room for it
    /// is the one `replay::preflight` asks for whenever the backup and the oplog
    /// together pass the budget.
    pub fn move_ahead(&mut self, writes: u64) -> Result<bool, DiskError> {
        if self.spilled()
            || self.spill_pending
            || self.spill_dir.is_none()
            || self.content != Content::Documents
            || !sort_merge()
            || move_late()
        {
            return Ok(false);
        }
        let at_most = (self.mem_bytes as u64).saturating_add(writes);
        if at_most <= Store::kept_in_memory(self.budget) as u64 {
            return Ok(false);
        }
        self.spill()?;
        Ok(true)
    }

    /// Whether a batch passed the budget and the documents have yet to move to disk.
    pub(crate) fn spill_pending(&self) -> bool {
        self.spill_pending
    }

    /// Moves the documents to disk if a batch passed the budget.
    pub(crate) fn spill_now(&mut self) -> Result<(), DiskError> {
        if std::mem::take(&mut self.spill_pending) {
            self.spill()?;
        }
        Ok(())
    }

    /// The document with `_id` `key`, appended to `out`; false when absent. In
    /// counts-only mode nothing is appended.
    pub fn get(&self, slot: Slot, key: &IdKey, out: &mut Vec<u8>) -> Result<bool, DiskError> {
        if self.defers(slot) {
            let s = self.sorted.as_ref().expect("defers");
            debug_assert!(!s.pending_for(slot), "read with writes deferred");
            return s.get(slot, key, out);
        }
        if let Some(d) = &self.disk {
            return d.get(slot, key, out);
        }
        let (p, h) = self.locate(key);
        match self.parts[p].get(slot, key, h) {
            Some(doc) => {
                out.extend_from_slice(doc);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The in-memory document (None when absent or when documents are on disk).
    pub fn mem_get(&self, slot: Slot, key: &IdKey) -> Option<&[u8]> {
        if self.spilled() {
            return None;
        }
        let (p, h) = self.locate(key);
        self.parts[p].get(slot, key, h)
    }

    /// Replaces an in-memory document (after [`Store::mem_get`] found it): over its
    /// bytes when the size is unchanged, else in an allocation of the new size.
    pub fn mem_replace(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) -> Result<(), DiskError> {
        let (p, h) = self.locate(key);
        let Some(delta) = self.parts[p].replace(slot, key, h, doc) else {
            return self.put(slot, key.clone(), doc).map(|_| ());
        };
        self.add_bytes(delta);
        self.grew()
    }

    pub fn contains(&self, slot: Slot, key: &IdKey) -> Result<bool, DiskError> {
        if self.defers(slot) {
            return self.get(slot, key, &mut Vec::new());
        }
        if let Some(d) = &self.disk {
            return d.contains(slot, key);
        }
        let (p, h) = self.locate(key);
        Ok(self.parts[p].get(slot, key, h).is_some())
    }

    /// Inserts or replaces; returns whether a document was replaced.
    pub fn put(&mut self, slot: Slot, key: IdKey, doc: &[u8]) -> Result<bool, DiskError> {
        self.put_checked(slot, key, doc, None)
    }

    /// [`Store::put`] of a document the caller just looked up (`exists`: whether
    /// it was found): on disk, no second lookup.
    pub fn put_known(
        &mut self,
        slot: Slot,
        key: IdKey,
        doc: &[u8],
        exists: bool,
    ) -> Result<(), DiskError> {
        let replaced = self.put_checked(slot, key, doc, Some(exists))?;
        debug_assert_eq!(replaced, exists, "put_known told a wrong `exists`");
        Ok(())
    }

    fn put_checked(
        &mut self,
        slot: Slot,
        key: IdKey,
        doc: &[u8],
        exists: Option<bool>,
    ) -> Result<bool, DiskError> {
        let doc: &[u8] = match self.content {
            Content::Documents => doc,
            Content::KeysOnly => &[],
            Content::CatalogOnly => return Ok(false),
        };
        self.move_to_tree(slot)?;
        if let Some(d) = &mut self.disk {
            let replaced = d.put(slot, &key, doc, exists)?;
            if !replaced {
                // The per-slot counts live in the first partition once on disk.
                *self.parts[0].counts.entry(slot).or_default() += 1;
            }
            return Ok(replaced);
        }
        let (p, h) = self.locate(&key);
        let (replaced, delta) = self.parts[p].put(slot, key, h, doc);
        self.add_bytes(delta);
        self.grew()?;
        Ok(replaced)
    }

    /// Removes; returns whether the document existed.
    pub fn remove(&mut self, slot: Slot, key: &IdKey) -> Result<bool, DiskError> {
        self.move_to_tree(slot)?;
        if let Some(d) = &mut self.disk {
            let removed = d.remove(slot, key)?;
            if removed {
                if let Some(c) = self.parts[0].counts.get_mut(&slot) {
                    *c -= 1;
                }
            }
            return Ok(removed);
        }
        let (p, h) = self.locate(key);
        match self.parts[p].remove(slot, key, h) {
            Some(delta) => {
                self.add_bytes(delta);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Removes every document of `slot`.
    pub fn clear(&mut self, slot: Slot) -> Result<(), DiskError> {
        for p in &mut self.parts {
            p.counts.remove(&slot);
        }
        if let Some(s) = &mut self.sorted {
            s.clear(slot);
            // Empty again: later writes may be deferred.
            self.tree.remove(&slot);
        }
        if let Some(d) = &mut self.disk {
            return d.clear(slot);
        }
        let mut freed = 0usize;
        let mut gone = Vec::new();
        for p in &mut self.parts {
            if let Some(m) = p.mem.remove(&slot) {
                for (k, doc) in m.iter() {
                    freed += Self::cost(k, doc.len());
                }
                gone.push(m);
            }
        }
        self.mem_bytes = self.mem_bytes.saturating_sub(freed);
        free_aside(gone, freed);
        Ok(())
    }

    /// Calls `f` with every document of `slot` in `_id` order (the server's order).
    pub fn for_each(
        &self,
        slot: Slot,
        f: &mut super::disk::DocVisitor<'_>,
    ) -> Result<(), DiskError> {
        if self.defers(slot) {
            let s = self.sorted.as_ref().expect("defers");
            debug_assert!(!s.pending_for(slot), "scanned with writes deferred");
            return s.for_each(slot, f);
        }
        if let Some(d) = &self.disk {
            return d.for_each(slot, f);
        }
        let colls: Vec<&Coll> = self.parts.iter().filter_map(|p| p.mem.get(&slot)).collect();
        if colls.iter().all(|c| matches!(c, Coll::Sorted(_))) {
            let sorted = colls.iter().map(|c| c.iter().map(|(k, d)| (k, d)));
            for (k, doc) in merge_sorted(sorted.collect()) {
                f(k, doc)?;
            }
            return Ok(());
        }
        // Not sorted since the last write ([`Store::flush`] sorts): a sorted list
        // of references for this scan.
        let mut all: Vec<&Entry> = colls.iter().flat_map(|c| c.iter()).collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (k, doc) in all {
            f(k, doc)?;
        }
        Ok(())
    }

    /// Moves every document to disk; from now on the store works there (the
    /// per-slot counts move to the first partition): whole documents to the
    /// sort-merge store (each collection's documents, already in `_id` order,
    /// written as its base), keys or `PITR_DISK_STORE=redb` to the B-tree store.
    fn spill(&mut self) -> Result<(), DiskError> {
        enum Target {
            Tree(DiskStore),
            Sorted(Sorted),
        }
        let dir = self.spill_dir.clone().expect("checked by the caller");
        let mut target = if self.content == Content::Documents && sort_merge() {
            Target::Sorted(Sorted::create(&dir, self.budget))
        } else {
            Target::Tree(DiskStore::create(&dir, self.budget)?)
        };
        let mut slots: Vec<Slot> = self
            .parts
            .iter()
            .flat_map(|p| p.mem.keys().copied())
            .collect();
        slots.sort_unstable();
        slots.dedup();
        let mut counts: FastMap<Slot, u64> = FastMap::default();
        for p in &self.parts {
            for (slot, n) in &p.counts {
                *counts.entry(*slot).or_default() += n;
            }
        }
        for slot in slots {
            let maps: Vec<_> = self
                .parts
                .iter_mut()
                .filter_map(|p| p.mem.remove(&slot))
                .map(|c| c.into_sorted().into_iter())
                .collect();
            match &mut target {
                Target::Tree(d) => d.load(slot, merge_sorted(maps))?,
                Target::Sorted(s) => s.load(slot, merge_sorted(maps))?,
            }
        }
        for p in &mut self.parts {
            *p = Part::default();
        }
        self.parts[0].counts = counts;
        self.mem_bytes = 0;
        // The documents freed here were given back batch by batch as they were
        // written (`DiskStore::load`, `Sorted::load`,
        // `crate::memory::give_back_freed_heap`).
        match target {
            Target::Tree(mut d) => {
                d.flush()?;
                self.disk = Some(d);
            }
            Target::Sorted(s) => self.sorted = Some(s),
        }
        Ok(())
    }

    /// Makes pending disk writes readable by a fresh scan; in memory, sorts every
    /// collection's documents by `_id` for the scans in order to come (each
    /// partition on a thread of its own).
    pub fn flush(&mut self) -> Result<(), DiskError> {
        if let [part] = &mut self.parts[..] {
            part.sort();
        } else {
            std::thread::scope(|s| {
                for part in &mut self.parts {
                    s.spawn(|| part.sort());
                }
            });
        }
        match &mut self.disk {
            Some(d) => d.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{rawdoc, Bson, RawDocumentBuf};

    use super::*;

    use super::super::TestRng as Rng;

    /// The `_id` of document `i`: numbers of every type (equal values across types
    /// are the same `_id`), strings, and long strings (over 511 bytes: too long for an LMDB key).
    fn id(i: u64, long_every: u64) -> Bson {
        if long_every > 0 && i.is_multiple_of(long_every) {
            return Bson::String(format!("{i:08}{}", "L".repeat(600)));
        }
        match i % 5 {
            0 => Bson::Int32(i as i32),
            1 => Bson::Int64(i as i64),
            2 => Bson::Double(i as f64 + 0.5),
            3 => Bson::String(format!("s{i:06}")),
            _ => Bson::ObjectId(bson::oid::ObjectId::from_bytes(
                [
                    [0u8; 4],
                    [(i >> 24) as u8, (i >> 16) as u8, (i >> 8) as u8, i as u8],
                ]
                .concat()
                .into_iter()
                .chain([9u8; 4])
                .collect::<Vec<_>>()
                .try_into()
                .unwrap(),
            )),
        }
    }

    fn document(id: &Bson, len: usize) -> RawDocumentBuf {
        let id = bson::RawBson::try_from(id.clone()).unwrap();
        rawdoc! { "_id": id, "pad": "p".repeat(len) }
    }

    /// Every document of every slot in the order the dump writes and `dbHash`
    /// hashes them: (slot, key bytes, document bytes).
    fn contents(s: &Store) -> Vec<(Slot, Vec<u8>, Vec<u8>)> {
        let mut v = Vec::new();
        for slot in 0..4 {
            s.for_each(slot, &mut |k, d| {
                v.push((slot, k.document_bytes().to_vec(), d.to_vec()));
                Ok(())
            })
            .unwrap();
        }
        v
    }

    /// One mix (per mille of inserts, updates, deletes; drops of a whole slot;
    /// long `_id`s every `long_every`) applied to a store that spills at once and to
    /// one that never does: at every check the two give the same bytes in the same
    /// order, and the same counts.
    fn same_as_in_memory(seed: u64, ops: usize, mix: [u64; 3], drop_every: usize, long_every: u64) {
        let dir = tempfile::tempdir().unwrap();
        let mut disk = Store::new(Content::Documents, 1, Some(dir.path()));
        let mut mem = Store::new(Content::Documents, usize::MAX, None);
        let mut rng = Rng(seed);
        let mut out = Vec::new();
        for n in 0..ops {
            let slot = rng.below(4) as Slot;
            let i = rng.below(ops as u64 / 2 + 1);
            let raw = bson::RawBson::try_from(id(i, long_every)).unwrap();
            let key = IdKey::from_value(raw.as_raw_bson_ref());
            let r = rng.below(1000);
            for s in [&mut disk, &mut mem] {
                if r < mix[0] {
                    let d = document(&id(i, long_every), 50 + (n % 300));
                    s.put(slot, key.clone(), d.as_bytes()).unwrap();
                } else if r < mix[0] + mix[1] {
                    out.clear();
                    if s.get(slot, &key, &mut out).unwrap() {
                        let d = document(&id(i, long_every), out.len() % 97 + n % 7);
                        s.put_known(slot, key.clone(), d.as_bytes(), true).unwrap();
                    }
                } else if r < mix[0] + mix[1] + mix[2] {
                    s.remove(slot, &key).unwrap();
                }
            }
            if drop_every > 0 && n % drop_every == drop_every - 1 {
                disk.clear(slot).unwrap();
                mem.clear(slot).unwrap();
            }
            if n % (ops / 4) == 0 || n == ops - 1 {
                assert_eq!(contents(&disk), contents(&mem), "mix {mix:?}, op {n}");
                disk.flush().unwrap();
                assert_eq!(
                    contents(&disk),
                    contents(&mem),
                    "mix {mix:?}, op {n}, flushed"
                );
                for slot in 0..4 {
                    assert_eq!(disk.count(slot), mem.count(slot));
                }
            }
        }
        assert!(disk.spilled() && !mem.spilled());
        assert!(!contents(&mem).is_empty());
    }

    /// The documents move to disk before they reach the budget by the on-disk
    /// store's own memory (its page cache and a write batch), so that the move
    /// stays within it, but never before half the budget.
    #[test]
    fn documents_move_to_disk_before_the_budget_by_the_stores_share() {
        const MIB: usize = 1 << 20;
        // 64 MiB of page cache and a 32 MiB batch: the 1 GiB bench's crossing case.
        assert_eq!(Store::kept_in_memory(1300 * MIB), 1204 * MIB);
        assert_eq!(Store::kept_in_memory(64 << 30), (64 << 30) - 96 * MIB);
        // A quarter of the budget as cache, and the batch: more than half of it.
        assert_eq!(Store::kept_in_memory(64 * MIB), 32 * MIB);
        assert_eq!(Store::kept_in_memory(192 * MIB), 112 * MIB);
        assert_eq!(Store::kept_in_memory(300_000), 150_000);
        assert_eq!(Store::kept_in_memory(1), 0);
        // Past the kept share, the next write moves everything (and not before).
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::new(Content::Documents, 4 * MIB, Some(dir.path()));
        let doc = document(&Bson::Int32(0), 1000);
        let mut i = 0;
        while s.mem_bytes + Store::cost(&key_of(i), doc.as_bytes().len()) <= 2 * MIB {
            s.put(0, key_of(i), doc.as_bytes()).unwrap();
            i += 1;
        }
        assert!(!s.spilled(), "moved at {} bytes", s.mem_bytes);
        s.put(0, key_of(i), doc.as_bytes()).unwrap();
        assert!(s.spilled());
        assert_eq!(s.count(0), i as u64 + 1);
    }

    /// Ahead of the slice, the documents move only when what they hold and the
    /// writes to come could pass the kept share; they come out the same; once
    /// moved, nothing moves again; keys only and no work dir never move ahead.
    #[test]
    fn documents_move_ahead_only_when_the_writes_to_come_could_pass_the_budget() {
        const MIB: usize = 1 << 20;
        let dir = tempfile::tempdir().unwrap();
        let doc = document(&Bson::Int32(0), 1000);
        let fill = |s: &mut Store| {
            for i in 0..500 {
                s.put(2, key_of(i), doc.as_bytes()).unwrap();
            }
        };
        let mut s = Store::new(Content::Documents, 4 * MIB, Some(dir.path()));
        fill(&mut s);
        let before = contents(&s);
        let room = (Store::kept_in_memory(4 * MIB) - s.mem_bytes) as u64;
        assert!(!s.move_ahead(room).unwrap(), "moved with room left");
        assert!(!s.spilled());
        assert!(s.move_ahead(room + 1).unwrap());
        assert!(s.spilled() && s.defers(2));
        assert_eq!(contents(&s), before);
        assert_eq!(s.count(2), 500);
        assert!(!s.move_ahead(u64::MAX).unwrap(), "moved twice");
        // Keys only (counts): their cost is not the slice's bytes; nothing ahead.
        let mut k = Store::new(Content::KeysOnly, 4 * MIB, Some(dir.path()));
        fill(&mut k);
        assert!(!k.move_ahead(u64::MAX).unwrap() && !k.spilled());
        // No work dir: never on disk.
        let mut m = Store::new(Content::Documents, 4 * MIB, None);
        fill(&mut m);
        assert!(!m.move_ahead(u64::MAX).unwrap() && !m.spilled());
    }

    fn key_of(i: i32) -> IdKey {
        let raw = bson::RawBson::Int32(i);
        IdKey::from_value(raw.as_raw_bson_ref())
    }

    #[test]
    fn the_in_memory_tables_keep_the_servers_id_order_hashed_or_sorted() {
        // Two partitions (as with two writer threads), `_id`s of every kind the
        // tests know (equal numbers of different types are one `_id`; ObjectIds
        // and long strings), writes between sorts (`flush`) so that sorted
        // collections are read, replaced in place, written to and hashed again:
        // the contents and their order are always a B-tree's over the same keys.
        use std::collections::BTreeMap;
        for (seed, long_every) in [(11u64, 0u64), (12, 13)] {
            let mut s = Store::partitioned(Content::Documents, usize::MAX, None, 2);
            let mut model: BTreeMap<(Slot, IdKey), Vec<u8>> = BTreeMap::new();
            let mut rng = Rng(seed);
            let mut out = Vec::new();
            for n in 0..20_000usize {
                let slot = rng.below(3) as Slot;
                let i = rng.below(5_000);
                // The same value under another numeric type half of the time.
                let v = match id(i, long_every) {
                    Bson::Int32(x) if rng.below(2) == 0 => Bson::Int64(i64::from(x)),
                    Bson::Int64(x) if rng.below(2) == 0 => Bson::Double(x as f64),
                    other => other,
                };
                let key = IdKey::from_value(
                    bson::RawBson::try_from(v.clone())
                        .unwrap()
                        .as_raw_bson_ref(),
                );
                match rng.below(10) {
                    0..=4 => {
                        let d = document(&v, 20 + n % 90);
                        let replaced = s.put(slot, key.clone(), d.as_bytes()).unwrap();
                        let had = model.insert((slot, key), d.as_bytes().to_vec()).is_some();
                        assert_eq!(replaced, had, "put {v:?}");
                    }
                    5..=6 => {
                        if s.mem_get(slot, &key).is_some() {
                            // Same size (over the bytes) or not.
                            let d = document(&v, if n % 2 == 0 { 7 } else { 20 + n % 90 });
                            s.mem_replace(slot, &key, d.as_bytes()).unwrap();
                            model.insert((slot, key), d.as_bytes().to_vec());
                        } else {
                            assert!(!model.contains_key(&(slot, key)), "{v:?} lost");
                        }
                    }
                    7..=8 => {
                        let removed = s.remove(slot, &key).unwrap();
                        assert_eq!(
                            removed,
                            model.remove(&(slot, key)).is_some(),
                            "remove {v:?}"
                        );
                    }
                    _ => {
                        out.clear();
                        let found = s.get(slot, &key, &mut out).unwrap();
                        assert_eq!(found.then_some(&out), model.get(&(slot, key)), "get {v:?}");
                    }
                }
                if n % 1_500 == 0 {
                    s.flush().unwrap();
                }
                if n % 2_500 == 0 || n == 19_999 {
                    let want: Vec<(Slot, Vec<u8>, Vec<u8>)> = model
                        .iter()
                        .map(|((slot, k), d)| (*slot, k.document_bytes().to_vec(), d.clone()))
                        .collect();
                    assert_eq!(contents(&s), want, "seed {seed}, op {n}");
                    s.flush().unwrap();
                    assert_eq!(contents(&s), want, "seed {seed}, op {n}, sorted");
                    for slot in 0..3 {
                        let n = model.keys().filter(|(sl, _)| *sl == slot).count() as u64;
                        assert_eq!(s.count(slot), n);
                    }
                }
            }
        }
    }

    /// The spill path (the on-disk store, [`super::super::disk`]) gives byte-identical contents
    /// in the same order as the in-memory path, on several mixes: what the dump
    /// writes and `dbHash` hashes on either path.
    #[test]
    fn the_disk_path_matches_the_memory_path_on_every_mix() {
        // Inserts only (the seed), then the bench's mix, update-heavy,
        // delete-heavy, with collection drops, and with `_id`s over 511 bytes.
        same_as_in_memory(1, 20_000, [1000, 0, 0], 0, 0);
        same_as_in_memory(2, 30_000, [570, 380, 50], 0, 0);
        same_as_in_memory(3, 30_000, [200, 750, 50], 0, 0);
        same_as_in_memory(4, 30_000, [400, 100, 500], 0, 0);
        same_as_in_memory(5, 30_000, [600, 300, 100], 7_000, 0);
        same_as_in_memory(6, 20_000, [500, 300, 200], 5_000, 37);
    }
}
