//! Expected document counts after the replay, read off the engine's replica
//! ([`crate::engine::replica`]): the one model of what the oplog does to data.
//!
//! The plan runs the replica in counts-only mode: the `_id`s of every backup
//! collection, rolled forward through the replayed entries (transactions at their
//! commit: see [`super::apply`]) with the lenient rules of a mongorestore replay
//! (nothing fails; the lint reports what would). `pitr replay --engine embedded`
//! runs the same walk with whole documents and strict rules. Sets make this exact
//! for a `mongodump --oplog` backup, whose collection files may already hold some of
//! the writes its own oplog replays (re-inserting an `_id` or deleting a missing one
//! changes nothing, as on the server).
//!
//! Memory: one entry per document, about 70 bytes (the `_id` plus B-tree overhead);
//! above `--expect-max-ids` (default [`DEFAULT_ID_CAP`]) documents, in the backup or
//! held at any point of the replay (an oplog of inserts grows the set), the counts
//! are left out of the plan rather than risk the machine; `--no-expect` skips them. Without `_id`s
//! the model still tracks which namespaces exist (for the lint).
//!
//! `_id` equality follows the server ([`IdKey`]): numbers compare by value (`1`,
//! `1.0` and `NumberLong(1)` are the same `_id`).

use std::collections::{HashMap, HashSet};

use bson::RawBsonRef;
use serde::{Deserialize, Serialize};

use crate::engine::replica::hash::CollHash;
use crate::engine::replica::{
    CollInfo, CollKind, Content, Meter, Phase, Replica, ReplicaError, ReplicaOptions,
};
pub use crate::engine::IdKey;
use crate::oplog::{Entry, Ts};

use super::{Progress, Unit};
use crate::engine::walk::{Source, Visitor};

/// Default cap on `_id`s kept in memory (about 1.4 GB at 70 bytes each).
pub const DEFAULT_ID_CAP: u64 = 20_000_000;

/// The key of an `_id` value.
pub fn id_key(v: RawBsonRef<'_>) -> IdKey {
    IdKey::from_value(v)
}

/// True for namespaces whose count the plan promises: user databases (not
/// `admin`, `config`, `local`), and not `system.*` collections other than
/// time-series buckets.
pub fn is_checked_ns(ns: &str) -> bool {
    let (db, coll) = ns.split_once('.').unwrap_or((ns, ""));
    if matches!(db, "admin" | "config" | "local") || db.is_empty() || coll.is_empty() {
        return false;
    }
    if crate::forensics::namespaces::is_internal(ns) {
        return false;
    }
    !coll.starts_with("system.") || coll.starts_with("system.buckets.")
}

/// One namespace's expectation after the replay. JSON: `ns`, `exists`, `documents`,
/// `backup_documents` (count in the backup's data files, null when the backup does
/// not hold it), `backup_end_documents` (after the backup's own oplog: the state at
/// the backup's end; null when not computed), `num_records` (the count the entry at
/// the limit recorded when it is a drop or a rename over this namespace: an
/// independent cross-check), `md5` (the `dbHash` the engine predicts; null when the
/// plan did not build documents), `md5_not_predicted` (why there is no `md5`
/// although the plan built documents).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedNs {
    pub ns: String,
    pub exists: bool,
    pub documents: u64,
    pub backup_documents: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_end_documents: Option<u64>,
    pub num_records: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// Why the engine, which built documents, predicts no `md5` for this collection
    /// (verification then checks its count only and says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5_not_predicted: Option<String>,
}

/// One restored backup namespace: its name, documents, documents without `_id`,
/// and the `_id`s when counting.
pub struct Seed {
    pub ns: String,
    pub documents: u64,
    pub no_id: u64,
    pub ids: Option<HashSet<IdKey>>,
}

/// The replica as the plan drives it: how each source applies, the first error.
pub struct Model {
    replica: Replica,
    counting: bool,
    backup_phase: Phase,
    slice_phase: Phase,
    error: Option<ReplicaError>,
    /// Counts at the backup's end, once [`Model::mark_backup_end`] was called.
    backup_end: Option<std::collections::HashMap<String, u64>>,
    /// Documents in the backup's data per namespace it held (whatever happened to
    /// them since).
    backup_ns: HashMap<String, u64>,
    /// Most `_id`s the counting model may hold (None: no cap).
    id_cap: Option<u64>,
    /// Entries applied since the cap was last checked.
    since_check: u32,
    /// Why counting stopped during the replay.
    ids_note: Option<String>,
    /// Why capped collections get no predicted hash (the server that will be
    /// compared hashes them in natural order, which the replica does not keep).
    capped_unpredicted: Option<String>,
    /// [`Model::finish_with`] leaves the hashes to [`Model::hash_alongside`].
    defer_hashes: bool,
    /// CRUD entries go to the replica's writer threads
    /// ([`Replica::apply_partitioned`]): the replica keeps whole documents on
    /// several partitions, and nothing reads single documents during the walk (the
    /// lint's [`Model::holds`] answers None).
    partitioned: bool,
}

/// Per namespace, its `dbHash` (None for a view or a missing namespace).
type Hashes = HashMap<String, Option<CollHash>>;

/// How often (in applied entries) the counting model checks its cap.
const CAP_CHECK_EVERY: u32 = 4096;

impl Model {
    /// Counts-only: `counting` tracks `_id`s (each seed then carries its set);
    /// otherwise only which namespaces exist.
    pub fn new(seeds: Vec<Seed>, counting: bool) -> Model {
        // Not counting: no `_id` is ever asked for, so none is kept (memory would
        // otherwise grow by one key per replayed insert).
        let content = if counting {
            Content::KeysOnly
        } else {
            Content::CatalogOnly
        };
        let mut replica = Replica::new(ReplicaOptions {
            content,
            ..ReplicaOptions::default()
        });
        let mut backup_ns = HashMap::new();
        for s in seeds {
            replica.seed_namespace(&s.ns, |slot| CollInfo::new(slot, CollKind::Collection));
            replica.seed_keys(&s.ns, s.ids.unwrap_or_default(), s.no_id);
            backup_ns.insert(s.ns, s.documents);
        }
        Model::from_replica(replica, counting, Phase::Lenient, Phase::Lenient, backup_ns)
    }

    /// A model over a replica seeded by the caller.
    pub fn from_replica(
        replica: Replica,
        counting: bool,
        backup_phase: Phase,
        slice_phase: Phase,
        backup_ns: HashMap<String, u64>,
    ) -> Model {
        // With one writer the queue still serves: past the budget its entries are
        // deferred to the sort-merge store (`engine::replica::sorted`).
        let partitioned =
            replica.content() == Content::Documents && (!counting || slice_phase == Phase::Strict);
        Model {
            partitioned,
            replica,
            counting,
            backup_phase,
            slice_phase,
            error: None,
            backup_end: None,
            backup_ns,
            id_cap: None,
            since_check: 0,
            ids_note: None,
            capped_unpredicted: None,
            defer_hashes: false,
        }
    }

    /// Leaves the hashes out of [`Model::finish_with`] (its rows then have no
    /// `md5`): the caller computes them with [`Model::hash_alongside`], overlapped
    /// with other work on the replica (the embedded engine writes its dump meanwhile).
    pub fn defer_hashes(&mut self) {
        self.defer_hashes = true;
    }

    /// Makes pending writes of the replica visible to scans (before
    /// [`Model::hash_alongside`] and a dump).
    pub fn flush(&mut self) -> Result<(), ReplicaError> {
        self.replica.flush()
    }

    /// Applies the entries queued for the replica's writer threads; their first
    /// error becomes the model's (see [`Model::take_error`]). Before anything
    /// reads documents, and before the caller reports an error of its own (the
    /// sequential apply would have stopped at a queued entry's error first).
    pub fn settle(&mut self) {
        if let Err(e) = self.replica.settle() {
            if self.error.is_none() {
                self.error = Some(e);
            }
        }
    }

    /// Predicts no hash for capped collections, saying `why`: the server to be
    /// compared reads them in natural order (see [`crate::engine::replica::hash`]).
    pub fn leave_capped_unpredicted(&mut self, why: String) {
        self.capped_unpredicted = Some(why);
    }

    /// Caps the `_id`s a counting model holds: past `cap`, it stops counting (the
    /// plan then has no expected counts) and [`Model::ids_note`] says why.
    pub fn cap_ids(&mut self, cap: u64) {
        self.id_cap = Some(cap);
    }

    /// Why the model stopped counting during the replay, if it did.
    pub fn ids_note(&self) -> Option<&str> {
        self.ids_note.as_deref()
    }

    /// Applies the cap now (the walk checks it every [`CAP_CHECK_EVERY`] entries).
    pub fn enforce_cap(&mut self) {
        self.since_check = 0;
        let Some(cap) = self.id_cap else {
            return;
        };
        if self.counting && self.replica.total_documents() > cap {
            self.counting = false;
            self.replica.forget_documents();
            self.ids_note = Some(format!(
                "the replay holds more than {cap} documents (--expect-max-ids); expected counts need about 70 bytes of memory per document"
            ));
        }
    }

    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    pub fn replica_mut(&mut self) -> &mut Replica {
        &mut self.replica
    }

    pub fn into_replica(self) -> Replica {
        self.replica
    }

    /// Whether the replica keeps whole documents (then hashes can be predicted).
    pub fn has_documents(&self) -> bool {
        self.replica.content() == Content::Documents
    }

    /// The first error since the last call.
    pub fn take_error(&mut self) -> Option<ReplicaError> {
        self.error.take()
    }

    /// Before the slice is applied: about `bytes` of it are to come
    /// ([`crate::engine::replica::Replica::move_to_disk_ahead`]). An error is kept
    /// for [`Model::take_error`] as the apply's are.
    pub fn expect_writes(&mut self, bytes: u64) {
        if let Err(e) = self.replica.move_to_disk_ahead(bytes) {
            self.error.get_or_insert(e);
        }
    }

    /// Remembers the counts now, as those at the backup's end.
    pub fn mark_backup_end(&mut self) {
        self.settle();
        self.backup_end = Some(self.replica.counts());
    }

    pub fn exists(&self, ns: &str) -> bool {
        self.replica.exists(ns)
    }

    /// Whether the document with this `_id` is in `ns` now; `None` when not counting
    /// (then nothing is known about single documents).
    pub fn holds(&self, ns: &str, id: RawBsonRef<'_>) -> Option<bool> {
        // The strict engine fails on an update of a missing document itself; the
        // lint need not look (one lookup less per update).
        if !self.counting || self.slice_phase == Phase::Strict {
            return None;
        }
        self.replica.holds(ns, id).ok()
    }

    /// Current count of `ns` (0 when it does not exist).
    pub fn count(&self, ns: &str) -> u64 {
        self.replica.count(ns)
    }

    /// [`Replica::collection_hash`] of every name, on every core: the collections
    /// are shared out largest first (MD5 of the documents is most of the time, and
    /// the replica is only read). `alongside` runs on this thread meanwhile (with
    /// one core fewer for hashing), which then joins the hashing.
    fn hashes_of<R>(
        &self,
        names: &[String],
        meter: &Meter,
        alongside: impl FnOnce(&Replica) -> R,
    ) -> (R, Result<Hashes, ReplicaError>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let mut order: Vec<&String> = names.iter().collect();
        order.sort_by_key(|ns| std::cmp::Reverse(self.replica.count(ns)));
        let next = AtomicUsize::new(0);
        let others = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(order.len())
            .saturating_sub(1);
        // Each worker takes the next collection until none is left.
        let work = || {
            let mut mine = Vec::new();
            while let Some(ns) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                mine.push((
                    (*ns).clone(),
                    self.replica.collection_hash_metered(ns, meter)?,
                ));
            }
            Ok::<_, ReplicaError>(mine)
        };
        let (r, parts) = std::thread::scope(|s| {
            let others: Vec<_> = (0..others).map(|_| s.spawn(work)).collect();
            let r = alongside(&self.replica);
            let mut parts = vec![work()];
            for h in others {
                parts.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            (r, parts)
        });
        let mut out = HashMap::new();
        for part in parts {
            match part {
                Ok(p) => out.extend(p),
                Err(e) => return (r, Err(e)),
            }
        }
        (r, Ok(out))
    }

    /// The hashes [`Model::defer_hashes`] left out of `expected` (the rows
    /// [`Model::finish_with`] returned), computed on every core while `alongside`
    /// runs on this thread with the same replica (read only); `meter` advances by
    /// the documents hashed.
    pub fn hash_alongside<R>(
        &self,
        expected: &mut [ExpectedNs],
        meter: &Meter,
        alongside: impl FnOnce(&Replica) -> R,
    ) -> (R, Result<(), ReplicaError>) {
        let names: Vec<String> = expected
            .iter()
            .filter(|e| self.has_documents() && e.exists)
            .map(|e| e.ns.clone())
            .collect();
        let (r, hashes) = self.hashes_of(&names, meter, alongside);
        let mut hashes = match hashes {
            Ok(h) => h,
            Err(e) => return (r, Err(e)),
        };
        for e in expected {
            let (md5, why) = self.md5_of(&e.ns, hashes.remove(&e.ns).flatten());
            e.md5 = md5;
            e.md5_not_predicted = why;
        }
        (r, Ok(()))
    }

    /// What `ns`'s row says of its hash: the predicted `md5`, or why there is none.
    fn md5_of(&self, ns: &str, hash: Option<CollHash>) -> (Option<String>, Option<String>) {
        let capped_why = self
            .capped_unpredicted
            .as_ref()
            .filter(|_| self.replica.get(ns).is_some_and(|c| c.is_capped()));
        let md5 = hash
            .as_ref()
            .filter(|_| capped_why.is_none())
            .and_then(|h| h.predicted().map(str::to_string));
        let md5_not_predicted = match (capped_why, hash) {
            (Some(why), Some(_)) => Some(why.clone()),
            (None, Some(h)) if h.predicted().is_none() => Some(h.md5),
            _ => None,
        };
        (md5, md5_not_predicted)
    }

    /// The expectations for checked namespaces the backup held or the replay
    /// touched, sorted by namespace (None when not counting).
    pub fn finish(&self) -> Result<Option<Vec<ExpectedNs>>, ReplicaError> {
        self.finish_with(&super::Quiet)
    }

    /// [`Model::finish`], reporting the hashing (the longest phase after applying,
    /// with whole documents) to `progress`.
    pub fn finish_with(
        &self,
        progress: &dyn Progress,
    ) -> Result<Option<Vec<ExpectedNs>>, ReplicaError> {
        if !self.counting {
            return Ok(None);
        }
        let mut names: Vec<String> = self
            .replica
            .namespaces()
            .into_iter()
            .filter(|(_, c)| c.kind != CollKind::View)
            .map(|(ns, _)| ns.to_string())
            .chain(self.backup_ns.keys().cloned())
            .filter(|ns| is_checked_ns(ns))
            .collect();
        names.sort();
        names.dedup();
        let mut hashes = if self.has_documents() && !self.defer_hashes {
            let meter = Meter::new();
            let total = names.iter().map(|ns| self.replica.count(ns)).sum();
            let _phase = progress.phase("hashing", Unit::Documents, Some(total), &meter);
            self.hashes_of(&names, &meter, |_| ()).1?
        } else {
            HashMap::new()
        };
        let mut out = Vec::new();
        for ns in names {
            let info = self.replica.get(&ns);
            let (md5, md5_not_predicted) = self.md5_of(&ns, hashes.remove(&ns).flatten());
            out.push(ExpectedNs {
                exists: info.is_some(),
                documents: self.replica.count(&ns),
                backup_documents: self.backup_ns.get(&ns).copied(),
                backup_end_documents: self
                    .backup_end
                    .as_ref()
                    .map(|m| m.get(&ns).copied().unwrap_or(0)),
                num_records: None,
                md5,
                md5_not_predicted,
                ns,
            });
        }
        Ok(Some(out))
    }
}

impl Visitor for Model {
    fn applied(&mut self, op: &Entry<'_>, _at: Ts, src: Source, _in_txn: bool) {
        if self.error.is_some() {
            return;
        }
        let phase = match src {
            Source::BackupOplog => self.backup_phase,
            Source::Slice => self.slice_phase,
        };
        // A committed transaction's CRUD operations are shared out by document too,
        // as a secondary does (`oplog_applier_impl.cpp`
        // `_addOplogChainOpsToWriterVectors` -> `addDerivedOps`, serial only when the
        // transaction holds a command; here a command is applied alone in any case):
        // the sequential apply treats them as any other entry.
        let r = if self.partitioned {
            self.replica.apply_partitioned(op, phase)
        } else {
            self.replica.apply(op, phase)
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
        self.since_check += 1;
        if self.since_check >= CAP_CHECK_EVERY {
            self.enforce_cap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::walk::Walker;
    use bson::{doc, Bson, Document, Timestamp};

    fn key(d: Document) -> IdKey {
        let raw = bson::RawDocumentBuf::from_document(&d).unwrap();
        id_key(raw.get("_id").unwrap().unwrap())
    }

    #[test]
    fn numeric_ids_compare_by_value() {
        assert_eq!(key(doc! {"_id": 1}), key(doc! {"_id": 1i64}));
        assert_eq!(key(doc! {"_id": 1i64}), key(doc! {"_id": 1.0}));
        assert_ne!(key(doc! {"_id": 1.5}), key(doc! {"_id": 1}));
        assert_ne!(key(doc! {"_id": "1"}), key(doc! {"_id": 1}));
        assert_ne!(key(doc! {"_id": {"a": 1}}), key(doc! {"_id": {"a": 2}}));
        assert_eq!(
            key(doc! {"_id": bson::oid::ObjectId::from_bytes([7; 12])}),
            key(doc! {"_id": bson::oid::ObjectId::from_bytes([7; 12])})
        );
    }

    #[test]
    fn checked_namespaces() {
        for ns in ["shop.orders", "shop.system.buckets.weather", "a.b.c"] {
            assert!(is_checked_ns(ns), "{ns}");
        }
        for ns in [
            "admin.system.version",
            "config.settings",
            "local.oplog.rs",
            "shop.system.views",
            "shop.system.drop.1i1t1.x",
            "shop",
        ] {
            assert!(!is_checked_ns(ns), "{ns}");
        }
    }

    fn ts(t: u32, i: u32) -> Bson {
        Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    fn seed(ns: &str, ids: &[i32]) -> Seed {
        Seed {
            ns: ns.into(),
            documents: ids.len() as u64,
            no_id: 0,
            ids: Some(ids.iter().map(|i| key(doc! {"_id": *i})).collect()),
        }
    }

    fn replay(model: &mut Model, docs: &[Document]) {
        let mut a = Walker::new(crate::plan::versions::RestoreRules::newest());
        for d in docs {
            let raw = bson::RawDocumentBuf::from_document(d).unwrap();
            a.feed(&Entry::parse(&raw).unwrap(), Source::Slice, model)
                .unwrap();
        }
    }

    #[test]
    fn replays_membership_changes() {
        let mut m = Model::new(
            vec![
                seed("shop.orders", &[1, 2, 3]),
                seed("shop.users", &[1]),
                seed("logs.a", &[1, 2]),
            ],
            true,
        );
        replay(
            &mut m,
            &[
                doc! { "ts": ts(1, 1), "op": "i", "ns": "shop.orders", "o": { "_id": 3.0, "dup": true } },
                doc! { "ts": ts(1, 2), "op": "i", "ns": "shop.orders", "o": { "_id": 4 } },
                doc! { "ts": ts(1, 3), "op": "d", "ns": "shop.orders", "o": { "_id": 1i64 } },
                doc! { "ts": ts(1, 4), "op": "d", "ns": "shop.orders", "o": { "_id": 99 } },
                doc! { "ts": ts(1, 5), "op": "u", "ns": "shop.orders", "o": { "$set": { "x": 1 } }, "o2": { "_id": 2 } },
                doc! { "ts": ts(2, 1), "op": "c", "ns": "shop.$cmd", "o": { "create": "fresh" } },
                doc! { "ts": ts(2, 2), "op": "c", "ns": "shop.$cmd", "o": { "renameCollection": "shop.users", "to": "shop.people", "dropTarget": false } },
                doc! { "ts": ts(2, 3), "op": "c", "ns": "logs.$cmd", "o": { "drop": "a" }, "o2": { "numRecords": 2 } },
                doc! { "ts": ts(2, 4), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [ { "op": "i", "ns": "shop.fresh", "o": { "_id": "x" } } ] } },
            ],
        );
        assert_eq!(m.count("shop.orders"), 3);
        let exp = m.finish().unwrap().unwrap();
        let got: Vec<(&str, bool, u64, Option<u64>)> = exp
            .iter()
            .map(|e| (e.ns.as_str(), e.exists, e.documents, e.backup_documents))
            .collect();
        assert_eq!(
            got,
            vec![
                ("logs.a", false, 0, Some(2)),
                ("shop.fresh", true, 1, None),
                ("shop.orders", true, 3, Some(3)),
                ("shop.people", true, 1, None),
                ("shop.users", false, 0, Some(1)),
            ]
        );
    }

    #[test]
    fn drop_database_and_existence_only_mode() {
        let mut m = Model::new(
            vec![seed("a.x", &[1]), seed("a.y", &[1]), seed("b.z", &[1])],
            false,
        );
        replay(
            &mut m,
            &[doc! { "ts": ts(1, 1), "op": "c", "ns": "a.$cmd", "o": { "dropDatabase": 1 } }],
        );
        assert!(!m.exists("a.x") && !m.exists("a.y") && m.exists("b.z"));
        assert!(m.finish().unwrap().is_none());
    }

    /// The `_id` cap holds for the replay too: an oplog of inserts past
    /// `--expect-max-ids` stops the counting (no expected counts, a note saying
    /// why, the catalog still modelled) instead of growing without bound; under the
    /// cap nothing changes.
    #[test]
    fn the_id_cap_bounds_the_replay_too() {
        let inserts = |n: u32| -> Vec<Document> {
            (0..n)
                .map(|i| doc! { "ts": ts(1, i + 1), "op": "i", "ns": "shop.orders", "o": { "_id": 100 + i as i32 } })
                .collect()
        };
        // Checked by the walk every CAP_CHECK_EVERY entries.
        let mut m = Model::new(vec![seed("shop.orders", &[1, 2])], true);
        m.cap_ids(1000);
        replay(&mut m, &inserts(CAP_CHECK_EVERY));
        assert!(m.ids_note().unwrap().contains("more than 1000 documents"));
        assert!(m.finish().unwrap().is_none());
        assert!(m.exists("shop.orders"));
        // And at the end of the walk (the plan enforces it before finishing).
        let mut m = Model::new(vec![seed("shop.orders", &[1, 2])], true);
        m.cap_ids(5);
        replay(&mut m, &inserts(4));
        assert!(m.ids_note().is_none());
        m.enforce_cap();
        assert!(m.finish().unwrap().is_none());
        assert!(m.ids_note().is_some());
        // Under the cap: counted.
        let mut m = Model::new(vec![seed("shop.orders", &[1, 2])], true);
        m.cap_ids(6);
        replay(&mut m, &inserts(4));
        m.enforce_cap();
        assert_eq!(m.finish().unwrap().unwrap()[0].documents, 6);
    }

    /// A model told that the compared server hashes capped collections in natural
    /// order predicts no hash for them (and says why), and still predicts the rest.
    #[test]
    fn capped_collections_can_be_left_unpredicted() {
        let mut r = Replica::new(ReplicaOptions {
            content: Content::Documents,
            ..ReplicaOptions::default()
        });
        let create = |coll: &str, capped: bool, i: u32| {
            let mut o =
                doc! { "create": coll, "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } };
            if capped {
                o.insert("capped", true);
                o.insert("size", 4096_i64);
            }
            doc! { "ts": ts(1, i), "op": "c", "ns": "shop.$cmd", "o": o }
        };
        for (i, d) in [
            create("log", true, 1),
            create("orders", false, 2),
            doc! { "ts": ts(1, 3), "op": "i", "ns": "shop.log", "o": { "_id": 2 } },
            doc! { "ts": ts(1, 4), "op": "i", "ns": "shop.log", "o": { "_id": 1 } },
            doc! { "ts": ts(1, 5), "op": "i", "ns": "shop.orders", "o": { "_id": 1 } },
        ]
        .into_iter()
        .enumerate()
        {
            let raw = bson::RawDocumentBuf::from_document(&d).unwrap();
            r.apply(&Entry::parse(&raw).unwrap(), Phase::Strict)
                .unwrap_or_else(|e| panic!("{i}: {e}"));
        }
        let mut m = Model::from_replica(r, true, Phase::Strict, Phase::Strict, HashMap::new());
        m.leave_capped_unpredicted("capped: natural order".into());
        let e = m.finish().unwrap().unwrap();
        let log = e.iter().find(|e| e.ns == "shop.log").unwrap();
        assert_eq!(
            (
                log.documents,
                log.md5.as_deref(),
                log.md5_not_predicted.as_deref()
            ),
            (2, None, Some("capped: natural order"))
        );
        let orders = e.iter().find(|e| e.ns == "shop.orders").unwrap();
        assert!(orders.md5.is_some() && orders.md5_not_predicted.is_none());
    }
}
