//! The replica: a source's collections, indexes and documents, built from a backup
//! and rolled forward through oplog entries as the source's secondaries apply them.
//!
//! This is pitr's one model of what the oplog does to data. The plan runs it in
//! counts-only mode ([`Content::KeysOnly`]: `_id`s only, for expected counts and the
//! lint); `pitr replay --engine embedded` runs it with whole documents and writes the
//! result as a mongodump directory ([`dump`]), with the `dbHash` of every collection
//! ([`hash`]). The walk that feeds it (which entries are applied, transactions at
//! their commit, `applyOps` unpacked) is [`crate::engine::walk::Walker`]'s.
//!
//! How an entry applies depends on where it sits ([`Phase`]):
//!
//! - [`Phase::Idempotent`]: the backup's own oplog. The data files were copied while
//!   these writes went on, so documents may already show them. Applied as initial
//!   sync applies the oplog after cloning (`OplogApplication::Mode::kInitialSync`,
//!   `src/mongo/db/repl/oplog.cpp` `applyOperation_inlock`; jstests
//!   `replsets/initial_sync_update_missing_doc*.js`): an insert of an existing `_id`
//!   replaces it, an update of a missing document is ignored unless it is an upsert,
//!   an update that fails on a later shape of the document is ignored, a delete of a
//!   missing document and a write to a missing collection (dropped later) do nothing.
//! - [`Phase::Strict`]: the oplog after the backup's end, which must apply exactly:
//!   an insert of an existing `_id` becomes a replacement, as on a secondary
//!   (`applyOperation_inlock`: a duplicate-key insert outside a transaction is retried
//!   as an upsert of `o`), but an update or delete of a missing document, an
//!   insert into a missing collection or an update the server rejects
//!   (malformed diff, ...) is an error naming the entry
//!   (`oplogApplicationEnforcesSteadyStateConstraints` semantics).
//! - [`Phase::Lenient`]: the plan's model of a mongorestore replay: nothing fails
//!   (the lint reports what would), an insert creates a missing collection.
//!
//! Commands follow `applyCommand_inlock` (`oplog.cpp`, its `kOpsMap`), each with its
//! "acceptable" errors treated as success; see [`commands`].

pub mod catalog;
pub mod cold;
mod commands;
pub mod disk;
pub mod dump;
pub mod error;
pub mod extjson;
pub mod hash;
pub mod interrupt;
pub mod listing;
pub mod meter;
pub mod partition;
pub mod sorted;
pub mod store;
pub mod timeseries;
pub mod visit;

#[cfg(test)]
mod tests;

/// splitmix64: deterministic choices for the store's and the writers' random tests.
#[cfg(test)]
pub(crate) struct TestRng(pub u64);

#[cfg(test)]
impl TestRng {
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

use std::collections::HashMap;
use std::path::Path;

use bson::{RawBsonRef, RawDocument};

use crate::engine::update::{self, ApplyOptions};
use crate::engine::IdKey;
use crate::oplog::{Entry, Op, Ts};

pub use catalog::{CollInfo, CollKind};
pub use error::ReplicaError;
pub use meter::Meter;
pub use store::{Content, Slot, Store};

/// How strictly an entry is applied; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idempotent,
    Strict,
    Lenient,
}

/// How the replica is built.
#[derive(Clone, Debug)]
pub struct ReplicaOptions {
    pub content: Content,
    /// Bytes of documents kept in memory before they move to disk.
    pub memory: usize,
    /// Where documents go past `memory` (None: never spill).
    pub spill_dir: Option<std::path::PathBuf>,
    /// Update semantics of the source's release.
    pub update: ApplyOptions,
    /// Writer threads for [`Replica::apply_partitioned`] (1: sequential); whole
    /// documents only.
    pub writers: usize,
}

impl Default for ReplicaOptions {
    fn default() -> ReplicaOptions {
        ReplicaOptions {
            content: Content::KeysOnly,
            memory: usize::MAX,
            spill_dir: None,
            update: ApplyOptions::default(),
            writers: 1,
        }
    }
}

/// What was tolerated while applying (reported, never silent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tolerated {
    /// Backup-oplog entries that found their document already in a later state.
    pub idempotent: u64,
    /// Commands whose "acceptable" error the server swallows (drop of a missing
    /// collection, ...).
    pub acceptable: u64,
    /// Indexes built on time-series buckets collections that `listIndexes` on the
    /// time-series collection does not show (so mongodump does not dump them, nor
    /// does the engine; see `timeseries`).
    pub unlisted_indexes: u64,
}

impl Tolerated {
    /// What was tolerated since `before`.
    fn since(&self, before: &Tolerated) -> Tolerated {
        Tolerated {
            idempotent: self.idempotent - before.idempotent,
            acceptable: self.acceptable - before.acceptable,
            unlisted_indexes: self.unlisted_indexes - before.unlisted_indexes,
        }
    }

    fn add(&mut self, o: &Tolerated) {
        self.idempotent += o.idempotent;
        self.acceptable += o.acceptable;
        self.unlisted_indexes += o.unlisted_indexes;
    }
}

/// The replica; see the module documentation.
pub struct Replica {
    colls: store::FastMap<String, CollInfo>,
    store: Store,
    /// Collections whose documents are still only in the backup's data file
    /// ([`cold`]), by slot (a rename keeps it).
    cold: store::FastMap<Slot, std::sync::Arc<cold::ColdDocs>>,
    /// Their hashing alongside the apply ([`Replica::hash_cold_in_background`]).
    cold_hashing: Option<cold::Background>,
    next_slot: Slot,
    opts: ReplicaOptions,
    pub tolerated: Tolerated,
    /// Entries applied.
    pub applied: u64,
    /// Entries of `applied` applied by the writer threads ([`partition`]).
    pub on_writers: u64,
    /// Queues applied ([`Replica::settle`]), and of them those shared out to
    /// other threads (the others were short).
    pub batches: u64,
    pub batches_shared: u64,
    /// Writes deferred to the sort-merge store past the budget ([`sorted`]): the
    /// backup's documents and the CRUD entries.
    pub deferred_writes: u64,
    /// While writes are deferred ([`sorted`]): what was tolerated before the first
    /// of them, and every entry tolerated since with its place in the oplog, so that
    /// an error found later in a deferred write has the counts as they stood at it.
    tolerated_clean: Tolerated,
    tolerated_log: Vec<(u64, Tolerated)>,
    scratch: Vec<u8>,
    /// CRUD entries queued for the writer threads ([`partition`]).
    batch: partition::Batch,
}

impl Replica {
    pub fn new(opts: ReplicaOptions) -> Replica {
        let writers = match opts.content {
            Content::Documents => opts.writers.max(1),
            Content::KeysOnly | Content::CatalogOnly => 1,
        };
        Replica {
            colls: store::FastMap::default(),
            store: Store::partitioned(
                opts.content,
                opts.memory,
                opts.spill_dir.as_deref(),
                writers,
            ),
            cold: store::FastMap::default(),
            cold_hashing: None,
            next_slot: 0,
            opts,
            tolerated: Tolerated::default(),
            applied: 0,
            on_writers: 0,
            batches: 0,
            batches_shared: 0,
            deferred_writes: 0,
            tolerated_clean: Tolerated::default(),
            tolerated_log: Vec::new(),
            scratch: Vec::new(),
            batch: partition::Batch::default(),
        }
    }

    pub fn content(&self) -> Content {
        self.opts.content
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// [`Store::move_ahead`], once the batch in flight is applied: the documents
    /// go to disk now when `writes` more bytes could take them past the budget.
    pub fn move_to_disk_ahead(&mut self, writes: u64) -> Result<bool, ReplicaError> {
        self.settle()?;
        Ok(self.store.move_ahead(writes)?)
    }

    /// Adds an (empty) namespace of the backup.
    pub fn seed_namespace(&mut self, ns: &str, make: impl FnOnce(Slot) -> CollInfo) {
        let slot = self.take_slot();
        let mut info = make(slot);
        info.backup_documents = Some(0);
        self.colls.insert(ns.to_string(), info);
    }

    /// Adds one document of the backup's data file for `ns` (seeded first).
    pub fn seed_document(
        &mut self,
        ns: &str,
        doc: &RawDocument,
        index: u64,
    ) -> Result<(), ReplicaError> {
        if index.is_multiple_of(interrupt::EVERY) {
            interrupt::check()?;
        }
        let Some(c) = self.colls.get_mut(ns) else {
            return Err(ReplicaError::Seed {
                ns: ns.into(),
                index,
                why: "no such namespace was seeded".into(),
            });
        };
        *c.backup_documents.get_or_insert(0) += 1;
        match IdKey::from_document_id(doc) {
            // Past the budget, a write to the sort-merge store, as the oplog's.
            Ok(key) => {
                let slot = c.slot;
                self.put_seed(slot, key, doc.as_bytes(), ns)?;
            }
            Err(crate::engine::IdKeyError::Missing) => c.no_id.push(match self.opts.content {
                Content::Documents => doc.as_bytes().to_vec(),
                Content::KeysOnly | Content::CatalogOnly => Vec::new(),
            }),
            Err(e) => {
                return Err(ReplicaError::Seed {
                    ns: ns.into(),
                    index,
                    why: e.to_string(),
                })
            }
        }
        Ok(())
    }

    /// A collection of the backup (seeded first) whose documents stay in its data
    /// file until something touches them ([`cold`]).
    pub fn seed_cold(&mut self, ns: &str, docs: std::sync::Arc<cold::ColdDocs>) {
        let Some(c) = self.colls.get_mut(ns) else {
            return;
        };
        c.backup_documents = Some(docs.count);
        self.cold.insert(c.slot, docs);
    }

    /// Starts hashing the cold collections on a low-priority thread
    /// ([`cold::Background`]), for the dump to find their hashes made; or, given the
    /// thread that checked them early ([`cold::Early`]), lets it go on with them.
    pub fn hash_cold_in_background(&mut self, early: Option<&cold::Early>) {
        if let Some(e) = early {
            self.cold_hashing = Some(e.hand_over());
        } else if !self.cold.is_empty() {
            self.cold_hashing = cold::hash_in_background(self.cold.values().cloned().collect());
        }
    }

    /// Stops the cold collections' hashing and the copies made ahead of the dump
    /// on their thread ([`Replica::hash_cold_in_background`]; the dump is written,
    /// or failed): a hash or a copy under way ends at its next block.
    pub fn stop_cold_work(&mut self) {
        self.cold_hashing = None;
    }

    /// The cold documents of `ns` ([`cold`]), if it has them.
    pub fn cold(&self, ns: &str) -> Option<&cold::ColdDocs> {
        self.colls
            .get(ns)
            .and_then(|c| self.cold.get(&c.slot))
            .map(|d| &**d)
    }

    /// Cold collections ([`cold`]) left at this point.
    pub fn cold_collections(&self) -> usize {
        self.cold.len()
    }

    /// Bytes of the cold collections' documents ([`cold`]) left at this point.
    pub fn cold_bytes(&self) -> u64 {
        self.cold.values().map(|d| d.bytes()).sum()
    }

    /// Loads a cold collection's documents as the seeding would have ([`cold`]):
    /// before the first entry that touches it applies. Entries queued for the
    /// writer threads apply first (they touch other collections), so the documents
    /// go where the store keeps them then, in memory or past the budget on disk
    /// (merged there at once).
    fn warm(&mut self, slot: Slot) -> Result<(), ReplicaError> {
        if !self.cold.contains_key(&slot) {
            return Ok(());
        }
        self.settle_slots(Some(&[]))?;
        let Some(docs) = self.cold.remove(&slot) else {
            return Ok(());
        };
        let ns = self
            .colls
            .iter()
            .find(|(_, c)| c.slot == slot)
            .map(|(ns, _)| ns.clone())
            .unwrap_or_default();
        let mut index = 0u64;
        docs.for_each(&mut |doc| {
            index += 1;
            let key = IdKey::from_raw_document_id(doc).map_err(|e| ReplicaError::Seed {
                ns: ns.clone(),
                index: index - 1,
                why: e.to_string(),
            })?;
            self.put_seed(slot, key, doc, &ns)
        })?;
        // Past the budget the documents went to the sort-merge store as deferred
        // writes: merged now, as the entry that touches them may read them alone.
        if self.store.deferred() {
            self.settle_slots(Some(&[slot]))?;
        }
        Ok(())
    }

    /// One document of the backup into the store: past the budget a write to the
    /// sort-merge store, as the oplog's.
    fn put_seed(
        &mut self,
        slot: Slot,
        key: IdKey,
        doc: &[u8],
        ns: &str,
    ) -> Result<(), ReplicaError> {
        if self.store.defers(slot) {
            self.defer_seed(slot, &key, doc, ns)
        } else {
            self.store.put(slot, key, doc)?;
            Ok(())
        }
    }

    /// Before a command applies: the cold collections whose documents it reads or
    /// writes are loaded (every one when that is not known). A drop needs none: the
    /// collection and its cold documents go together ([`Replica::drop_ns`]).
    fn warm_for_command(&mut self, op: &Entry<'_>) -> Result<(), ReplicaError> {
        if self.cold.is_empty() || matches!(op.command_name(), Some("drop" | "dropDatabase")) {
            return Ok(());
        }
        let slots: Vec<Slot> = match commands::documents_touched(self, op) {
            Some(names) => names
                .iter()
                .filter_map(|n| self.colls.get(n.as_str()).map(|c| c.slot))
                .collect(),
            None => self.cold.keys().copied().collect(),
        };
        for slot in slots {
            self.warm(slot)?;
        }
        Ok(())
    }

    /// Counts-only seeding: the `_id`s of `ns` (seeded first) and how many documents
    /// had none.
    pub fn seed_keys(&mut self, ns: &str, ids: impl IntoIterator<Item = IdKey>, no_id: u64) {
        let Some(c) = self.colls.get_mut(ns) else {
            return;
        };
        let slot = c.slot;
        c.no_id.extend((0..no_id).map(|_| Vec::new()));
        let mut n = c.no_id.len() as u64;
        for k in ids {
            // Keys only: in memory, never spilled (the plan caps their number).
            let _ = self.store.put(slot, k, &[]);
            n += 1;
        }
        if let Some(c) = self.colls.get_mut(ns) {
            c.backup_documents = Some(n);
        }
    }

    fn take_slot(&mut self) -> Slot {
        self.next_slot += 1;
        self.next_slot
    }

    /// Whether `ns` exists (a collection, buckets collection or view).
    pub fn exists(&self, ns: &str) -> bool {
        self.colls.contains_key(ns)
    }

    pub fn get(&self, ns: &str) -> Option<&CollInfo> {
        self.colls.get(ns)
    }

    /// Whether `ns` holds a document with this `_id`.
    pub fn holds(&self, ns: &str, id: RawBsonRef<'_>) -> Result<bool, ReplicaError> {
        self.assert_settled();
        let Some(c) = self.colls.get(ns) else {
            return Ok(false);
        };
        let key = IdKey::from_value(id);
        if let Some(d) = self.cold.get(&c.slot) {
            return Ok(d.get(&key)?.is_some());
        }
        Ok(self.store.contains(c.slot, &key)?)
    }

    /// The document of `ns` with this `_id`, as stored (its BSON bytes).
    pub fn document(&self, ns: &str, key: &IdKey) -> Result<Option<Vec<u8>>, ReplicaError> {
        self.assert_settled();
        let Some(c) = self.colls.get(ns) else {
            return Ok(None);
        };
        if let Some(d) = self.cold.get(&c.slot) {
            return d.get(key);
        }
        let mut out = Vec::new();
        Ok(self.store.get(c.slot, key, &mut out)?.then_some(out))
    }

    /// Documents in `ns` (0 when it does not exist).
    pub fn count(&self, ns: &str) -> u64 {
        self.assert_settled();
        self.colls.get(ns).map_or(0, |c| {
            let cold = self.cold.get(&c.slot).map_or(0, |d| d.count);
            self.store.count(c.slot) + c.no_id.len() as u64 + cold
        })
    }

    /// Every namespace, sorted.
    pub fn namespaces(&self) -> Vec<(&str, &CollInfo)> {
        let mut v: Vec<(&str, &CollInfo)> =
            self.colls.iter().map(|(k, c)| (k.as_str(), c)).collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Calls `f` with every document of `ns` with an `_id`, in `_id` order, then the
    /// documents without `_id` in natural order. Stops with
    /// [`ReplicaError::Interrupted`] soon after a Ctrl-C ([`interrupt`]): every
    /// long loop over documents (hashing, dumping) goes through here.
    pub fn for_each_document(
        &self,
        ns: &str,
        f: &mut dyn FnMut(&[u8]) -> Result<(), ReplicaError>,
    ) -> Result<(), ReplicaError> {
        self.assert_settled();
        let Some(c) = self.colls.get(ns) else {
            return Ok(());
        };
        let mut seen = 0u64;
        let mut each = |doc: &[u8]| -> Result<(), ReplicaError> {
            seen += 1;
            if seen.is_multiple_of(interrupt::EVERY) {
                interrupt::check()?;
                interrupt::test_pause();
            }
            f(doc)
        };
        if let Some(d) = self.cold.get(&c.slot) {
            return d.for_each(&mut each);
        }
        let mut failed: Option<ReplicaError> = None;
        let r = self.store.for_each(c.slot, &mut |_, doc| match each(doc) {
            Ok(()) => Ok(()),
            Err(e) => {
                failed = Some(e);
                Err(disk::DiskError::Stopped)
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        r?;
        for d in &c.no_id {
            each(d)?;
        }
        Ok(())
    }

    /// Whether some document of `ns` has an `_id` for which `pred` holds (stops at
    /// the first).
    pub fn any_id(
        &self,
        ns: &str,
        pred: &mut dyn FnMut(&IdKey) -> bool,
    ) -> Result<bool, ReplicaError> {
        let Some(c) = self.colls.get(ns) else {
            return Ok(false);
        };
        if let Some(d) = self.cold.get(&c.slot) {
            let mut found = false;
            let r = d.for_each(&mut |doc| {
                if IdKey::from_raw_document_id(doc).is_ok_and(|k| pred(&k)) {
                    found = true;
                    return Err(ReplicaError::Interrupted);
                }
                Ok(())
            });
            return match r {
                Err(ReplicaError::Interrupted) if found => Ok(true),
                r => r.map(|()| false),
            };
        }
        let mut found = false;
        let mut seen = 0u64;
        let mut interrupted = false;
        let r = self.store.for_each(c.slot, &mut |k, _| {
            seen += 1;
            if seen.is_multiple_of(interrupt::EVERY) && interrupt::requested() {
                interrupted = true;
                return Err(disk::DiskError::Stopped);
            }
            if pred(k) {
                found = true;
                return Err(disk::DiskError::Stopped);
            }
            Ok(())
        });
        if interrupted {
            return Err(ReplicaError::Interrupted);
        }
        match r {
            Err(disk::DiskError::Stopped) | Ok(()) => Ok(found),
            Err(e) => Err(e.into()),
        }
    }

    /// Documents held, over every collection.
    pub fn total_documents(&self) -> u64 {
        self.assert_settled();
        self.store.total() + self.cold.values().map(|d| d.count).sum::<u64>()
    }

    /// Stops keeping documents (or `_id`s): only the catalog is modelled from now
    /// on, and counts are no longer known. For a counting plan past its cap.
    pub fn forget_documents(&mut self) {
        self.store.forget_documents();
        self.opts.content = Content::CatalogOnly;
    }

    /// Makes pending writes visible to scans (applying the queued entries first).
    pub fn flush(&mut self) -> Result<(), ReplicaError> {
        self.settle()?;
        Ok(self.store.flush()?)
    }

    /// Whether entries are queued for the writer threads ([`Replica::settle`]
    /// applies them); reading documents meanwhile would read an older state.
    pub fn unsettled(&self) -> bool {
        self.unsettled_batch() || self.store.deferred()
    }

    /// (Deferred writes past the budget are checked by the store, per collection:
    /// a command settles only the collections it reads.)
    fn assert_settled(&self) {
        debug_assert!(
            !self.unsettled_batch(),
            "the replica was read with entries queued: settle() first"
        );
    }

    /// Before `op` is applied alone: the entries queued before it applied, and past
    /// the budget the deferred writes of the collections whose documents it reads
    /// or writes (every collection unless that is known). A merge rewrites its
    /// collection, so it must not follow every no-op: a backup's oplog has one
    /// every 10 s on a quiet replica set. The counts stay in oplog order whatever
    /// is merged when ([`Replica::failed_at`]).
    fn settle_before(&mut self, op: &Entry<'_>) -> Result<(), ReplicaError> {
        if !self.store.deferred() && !self.unsettled_batch() {
            return Ok(());
        }
        let namespaces = match op.op {
            Op::Noop => Some(Vec::new()),
            Op::Command => commands::documents_touched(self, op),
            // A write applied alone to a collection not in the sort-merge store.
            Op::Insert | Op::Update | Op::Delete => self
                .colls
                .get(op.ns)
                .filter(|c| !self.store.defers(c.slot) && c.takes_ui(op.ui))
                .map(|_| Vec::new()),
            _ => None,
        };
        match namespaces {
            None => self.settle(),
            Some(ns) => {
                let slots: Vec<Slot> = ns
                    .iter()
                    .filter_map(|n| self.colls.get(n.as_str()).map(|c| c.slot))
                    .collect();
                self.settle_slots(Some(&slots))
            }
        }
    }

    /// Applies one operation (a leaf: `applyOps` are unpacked by the walk), after
    /// the entries queued by [`Replica::apply_partitioned`].
    pub fn apply(&mut self, op: &Entry<'_>, phase: Phase) -> Result<(), ReplicaError> {
        if op.op == Op::Command {
            self.warm_for_command(op)?;
        }
        self.settle_before(op)?;
        interrupt::check()?;
        let seq = self.applied;
        self.applied += 1;
        if self.applied.is_multiple_of(interrupt::EVERY) {
            interrupt::test_pause();
        }
        if !self.store.deferred() {
            return self.apply_alone(op, phase);
        }
        let before = self.tolerated.clone();
        let r = self.apply_alone(op, phase);
        if self.tolerated != before {
            let d = self.tolerated.since(&before);
            self.tolerated_log.push((seq, d));
        }
        if r.is_err() {
            // A deferred write before it may have failed first: that is the error.
            self.settle()?;
        }
        r
    }

    /// Before writes start to be deferred: what was tolerated so far is final.
    fn deferring(&mut self) {
        if !self.store.deferred() {
            self.tolerated_clean = self.tolerated.clone();
            self.tolerated_log.clear();
        }
    }

    /// An error found in a deferred write at place `seq`: the counts as they stood
    /// at it (the entries applied alone after it, before it was found, undone).
    fn failed_at(&mut self, seq: u64) {
        self.applied = seq + 1;
        let mut t = self.tolerated_clean.clone();
        for (at, d) in &self.tolerated_log {
            if *at < seq {
                t.add(d);
            }
        }
        self.tolerated = t;
    }

    fn apply_alone(&mut self, op: &Entry<'_>, phase: Phase) -> Result<(), ReplicaError> {
        match op.op {
            Op::Insert => self.insert(op, phase),
            Op::Update => self.update(op, phase),
            Op::Delete => self.delete(op, phase),
            Op::Command => commands::apply(self, op, phase),
            Op::Noop => Ok(()),
            _ => self.refuse(op, phase, || {
                format!("op type `{}` is not modelled", op.op.as_str())
            }),
        }
    }

    fn fail(op: &Entry<'_>, why: impl Into<String>) -> ReplicaError {
        ReplicaError::Apply {
            ts: op.ts,
            ns: op.ns.to_string(),
            op: op.op.as_str().to_string(),
            why: why.into(),
        }
    }

    /// Something pitr does not model: an error unless the plan only counts.
    fn refuse(
        &mut self,
        op: &Entry<'_>,
        phase: Phase,
        why: impl FnOnce() -> String,
    ) -> Result<(), ReplicaError> {
        if phase == Phase::Lenient {
            return Ok(());
        }
        Err(ReplicaError::Unsupported {
            ts: op.ts,
            ns: op.ns.to_string(),
            why: why(),
        })
    }

    /// The collection a CRUD entry writes, or what to do when it is missing; a
    /// cold one ([`cold`]) loaded first.
    fn target_slot(&mut self, op: &Entry<'_>, phase: Phase) -> Result<Option<Slot>, ReplicaError> {
        let slot = self.find_slot(op, phase)?;
        if let Some(s) = slot {
            self.warm(s)?;
        }
        Ok(slot)
    }

    fn find_slot(&mut self, op: &Entry<'_>, phase: Phase) -> Result<Option<Slot>, ReplicaError> {
        // A secondary finds the collection by the entry's `ui` when it has one, not by
        // `ns` (oplog_applier_impl_test.cpp
        // `applyOplogEntryOrGroupedInsertsInsertDocumentCollectionLockedByUUID`,
        // `...LookupByUUIDFails`). mongorestore strips `ui`: the lenient model goes by name.
        if phase != Phase::Lenient {
            let ui = op
                .ui
                .and_then(|u| <[u8; 16]>::try_from(u).ok())
                .filter(|ui| self.colls.get(op.ns).is_none_or(|c| c.uuid != Some(*ui)));
            if let Some(ui) = ui {
                let known_elsewhere = self.find_by_uuid(&ui).is_some();
                match self.colls.get_mut(op.ns) {
                    Some(c) if c.uuid == Some(ui) => {}
                    // A UUID pitr did not know yet (a dump without it, a rename
                    // across databases): the entry teaches it.
                    Some(c) if c.uuid.is_none() && !known_elsewhere => {
                        c.uuid = Some(ui);
                    }
                    _ => match self.find_by_uuid(&ui) {
                        Some(ns) => {
                            let c = &self.colls[&ns];
                            if c.kind == CollKind::View {
                                return Err(Self::fail(op, "the namespace is a view"));
                            }
                            return Ok(Some(c.slot));
                        }
                        None if self.colls.contains_key(op.ns) => {
                            return match phase {
                                Phase::Idempotent => {
                                    self.tolerated.idempotent += 1;
                                    Ok(None)
                                }
                                _ => Err(Self::fail(
                                    op,
                                    format!(
                                        "its `ui` {} names no collection here, and `{}` has another UUID \
                                         (NamespaceNotFound on a secondary): the backup and the oplog come from different histories",
                                        crate::oplog::entry::format_uuid(&ui),
                                        op.ns
                                    ),
                                )),
                            };
                        }
                        None => {}
                    },
                }
            }
        }
        if let Some(c) = self.colls.get(op.ns) {
            if c.kind == CollKind::View {
                return match phase {
                    Phase::Lenient => Ok(None),
                    _ => Err(Self::fail(op, "the namespace is a view")),
                };
            }
            return Ok(Some(c.slot));
        }
        match phase {
            Phase::Strict => Err(Self::fail(
                op,
                "the collection does not exist (NamespaceNotFound): a secondary would stop here",
            )),
            // Initial sync: the collection was dropped later in the oplog.
            Phase::Idempotent => {
                self.tolerated.idempotent += 1;
                Ok(None)
            }
            Phase::Lenient => {
                let slot = self.take_slot();
                self.colls
                    .insert(op.ns.to_string(), CollInfo::new(slot, CollKind::Collection));
                Ok(Some(slot))
            }
        }
    }

    fn insert(&mut self, op: &Entry<'_>, phase: Phase) -> Result<(), ReplicaError> {
        let Some(o) = op.o else {
            return Err(Self::fail(op, "the entry has no `o`"));
        };
        let Some(slot) = self.target_slot(op, phase)? else {
            return Ok(());
        };
        match IdKey::from_document_id(o) {
            // `applyOperation_inlock`: a duplicate-key insert is retried as an upsert
            // with `o` as the whole document (also in initial sync).
            Ok(key) => {
                self.store.put(slot, key, o.as_bytes())?;
                Ok(())
            }
            Err(crate::engine::IdKeyError::Missing) if phase == Phase::Lenient => {
                if let Some(c) = self.colls.get_mut(op.ns) {
                    c.no_id.push(Vec::new());
                }
                Ok(())
            }
            // `applyOperation_inlock`: "Failed to apply insert due to missing _id".
            Err(e) => Err(Self::fail(
                op,
                format!("the inserted document's `_id`: {e}"),
            )),
        }
    }

    fn entry_id(
        op: &Entry<'_>,
        doc: Option<&RawDocument>,
        field: &str,
    ) -> Result<IdKey, ReplicaError> {
        let doc = doc.ok_or_else(|| Self::fail(op, format!("the entry has no `{field}`")))?;
        IdKey::from_document_id(doc).map_err(|e| Self::fail(op, format!("`{field}._id`: {e}")))
    }

    fn update(&mut self, op: &Entry<'_>, phase: Phase) -> Result<(), ReplicaError> {
        let key = Self::entry_id(op, op.o2, "o2")?;
        let Some(o) = op.o else {
            return Err(Self::fail(op, "the entry has no `o`"));
        };
        let Some(slot) = self.target_slot(op, phase)? else {
            return Ok(());
        };
        // Fast path: the document is in memory; the post-image replaces it in place
        // (built in the reused scratch buffer: no allocation when its size is unchanged).
        if self.opts.content == Content::Documents {
            let opts = self.opts.update;
            if let Some(cur) = self.store.mem_get(slot, &key) {
                let mut out = std::mem::take(&mut self.scratch);
                out.clear();
                let r = update::classify(o).and_then(|kind| {
                    let cur = RawDocument::from_bytes(cur).map_err(|e| {
                        crate::engine::UpdateError::malformed("the stored document", e.to_string())
                    })?;
                    update::apply(cur, kind, opts, &mut out)
                });
                let done = match r {
                    Ok(()) => self
                        .store
                        .mem_replace(slot, &key, &out)
                        .map_err(ReplicaError::from),
                    Err(e) => self.update_failed(op, phase, e),
                };
                self.scratch = out;
                return done;
            }
        }
        // `b: true`: the primary's update was an upsert (`OplogEntry::getUpsert`).
        let upsert = op.upsert;
        let mut cur = std::mem::take(&mut self.scratch);
        cur.clear();
        let found = self.store.get(slot, &key, &mut cur)?;
        let r = self.update_found(op, phase, slot, key, o, found, upsert, &mut cur);
        self.scratch = cur;
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn update_found(
        &mut self,
        op: &Entry<'_>,
        phase: Phase,
        slot: Slot,
        key: IdKey,
        o: &RawDocument,
        found: bool,
        upsert: bool,
        buf: &mut Vec<u8>,
    ) -> Result<(), ReplicaError> {
        if !found && !upsert {
            return match phase {
                Phase::Strict => Err(Self::fail(
                    op,
                    "no document has this `_id` (an update of a missing document): the backup and the oplog disagree",
                )),
                Phase::Idempotent => {
                    self.tolerated.idempotent += 1;
                    Ok(())
                }
                Phase::Lenient => Ok(()),
            };
        }
        if self.opts.content != Content::Documents {
            if !found {
                self.store.put_known(slot, key, &[], false)?;
            }
            return Ok(());
        }
        let kind = match update::classify(o) {
            Ok(k) => k,
            Err(e) => return self.update_failed(op, phase, e),
        };
        let start = buf.len();
        let r = if found {
            let cur = RawDocument::from_bytes(&buf[..start])
                .map_err(|e| Self::fail(op, format!("the stored document is corrupt: {e}")))?;
            let mut out = Vec::with_capacity(start + 64);
            let r = update::apply(cur, kind, self.opts.update, &mut out);
            buf.clear();
            buf.extend_from_slice(&out);
            r.map(|()| 0)
        } else {
            update::upsert(&key, kind, self.opts.update, buf).map(|()| start)
        };
        match r {
            // `found` was just read: no second lookup of the document on disk.
            Ok(at) => Ok(self.store.put_known(slot, key, &buf[at..], found)?),
            Err(e) => self.update_failed(op, phase, e),
        }
    }

    fn update_failed(
        &mut self,
        op: &Entry<'_>,
        phase: Phase,
        e: crate::engine::UpdateError,
    ) -> Result<(), ReplicaError> {
        // Initial sync: the document's current shape comes from a later write
        // (initial_sync_update_missing_field.js and friends); a later entry fixes it.
        if partition::update_failure(phase, e, (op.ts, op.ns, op.op.as_str()))? {
            self.tolerated.idempotent += 1;
        }
        Ok(())
    }

    fn delete(&mut self, op: &Entry<'_>, phase: Phase) -> Result<(), ReplicaError> {
        let key = Self::entry_id(op, op.o, "o")?;
        let Some(slot) = self.target_slot_for_delete(op, phase)? else {
            return Ok(());
        };
        if self.store.remove(slot, &key)? {
            return Ok(());
        }
        match phase {
            Phase::Strict => Err(Self::fail(
                op,
                "no document has this `_id` (a delete of a missing document): the backup and the oplog disagree",
            )),
            Phase::Idempotent => {
                self.tolerated.idempotent += 1;
                Ok(())
            }
            Phase::Lenient => Ok(()),
        }
    }

    /// A delete never creates a collection, even in the lenient model.
    fn target_slot_for_delete(
        &mut self,
        op: &Entry<'_>,
        phase: Phase,
    ) -> Result<Option<Slot>, ReplicaError> {
        if phase == Phase::Lenient && !self.colls.contains_key(op.ns) {
            return Ok(None);
        }
        self.target_slot(op, phase)
    }

    /// Per namespace, documents now (for the report's "at the backup's end" column).
    pub fn counts(&self) -> HashMap<String, u64> {
        self.colls
            .keys()
            .map(|ns| (ns.clone(), self.count(ns)))
            .collect()
    }

    // Catalog changes, used by `commands`.

    fn create(&mut self, ns: &str, info: impl FnOnce(Slot) -> CollInfo) {
        let slot = self.take_slot();
        self.colls.insert(ns.to_string(), info(slot));
    }

    fn drop_ns(&mut self, ns: &str) -> Result<bool, ReplicaError> {
        match self.colls.remove(ns) {
            Some(c) => {
                self.cold.remove(&c.slot);
                self.store.clear(c.slot)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn rename_ns(&mut self, from: &str, to: &str) {
        if let Some(c) = self.colls.remove(from) {
            self.colls.insert(to.to_string(), c);
        }
    }

    fn coll_mut(&mut self, ns: &str) -> Option<&mut CollInfo> {
        self.colls.get_mut(ns)
    }

    pub(crate) fn find_by_uuid(&self, uuid: &[u8]) -> Option<String> {
        self.colls
            .iter()
            .find(|(_, c)| c.uuid.is_some_and(|u| u[..] == *uuid))
            .map(|(ns, _)| ns.clone())
    }

    fn namespaces_of_db(&self, db: &str) -> Vec<String> {
        let prefix = format!("{db}.");
        self.colls
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect()
    }

    fn clear_documents(&mut self, ns: &str) -> Result<(), ReplicaError> {
        if let Some(c) = self.colls.get_mut(ns) {
            c.no_id.clear();
            let slot = c.slot;
            self.store.clear(slot)?;
        }
        Ok(())
    }

    /// The time an entry's error names.
    pub fn ts_of(op: &Entry<'_>) -> Ts {
        op.ts
    }

    /// Where documents go past the memory budget.
    pub fn spill_dir(&self) -> Option<&Path> {
        self.opts.spill_dir.as_deref()
    }
}
