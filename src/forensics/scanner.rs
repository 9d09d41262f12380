//! The single pass over an oplog that finds destructive operations.
//!
//! Feed it every top-level entry in oplog order; it keeps only small per-namespace
//! and per-transaction counters, so memory does not grow with the oplog.
//!
//! Transactions are counted where the server applies them: an unprepared
//! transaction at its final `applyOps` (earlier `partialTxn` parts are buffered), a
//! prepared one at `commitTransaction`; an aborted one counts for nothing.
//! `fromMigrate` entries (chunk migrations) and internal namespaces are ignored.
//!
//! Routine operations (see [`super::routine`]) are told from incidents with what the
//! [`Catalog`] knows: temporary collections by name, TTL and capped collections from
//! the backup's metadata and the oplog's own DDL. They become `info` findings, one per
//! namespace and cause, never `critical` or `high`.

use std::collections::{BTreeMap, BTreeSet};

use bson::RawBsonRef;

use crate::oplog::elements::{find_field, find_op};
use crate::oplog::entry::as_i64;
use crate::oplog::entry::Parsed;
use crate::oplog::{Entry, EntryError, Op, Ts};

use super::burst::{BurstDetector, BurstRule};
use super::catalog::{Catalog, DeleteKind};
use super::finding::{Finding, Kind};
use super::grouped::{burst_finding, capped_findings, out_finding, ttl_findings, OutGroup, TtlEra};
use super::namespaces::{is_internal, timeseries_view};
use super::routine::{temp_collection, temp_namespace, Routine, FRESH_COLLECTION_SECS};
use super::updates::{diff_deletes, wiping_reason};
use super::{FastMap, FastSet};

/// Counts kept while scanning, for the summary line and for `oplog stats`.
#[derive(Clone, Debug, Default)]
pub struct ScanStats {
    pub entries: u64,
    /// Positions of the entries examined (inserts and no-ops recognised from their
    /// leading `op` are counted in `entries` but not examined).
    pub first_ts: Option<Ts>,
    pub last_ts: Option<Ts>,
    /// Entries whose ts is lower than the entry before them.
    pub out_of_order: u64,
    /// fromMigrate entries among the fully parsed ones (inserts are only peeked).
    pub from_migrate: u64,
    /// Transactions still open (prepared or partial) at the end of the input.
    pub open_transactions: usize,
    /// Namespaces of delete bursts that could not be classified for lack of a backup:
    /// collections that existed before the oplog, whose TTL indexes and capped option
    /// only the backup's metadata tells (their bursts are reported as incidents).
    pub unclassified: BTreeSet<String>,
    /// A cluster member's scan only ([`Scanner::cluster_member`]): deletes of the
    /// sharding catalog on the config server, the evidence that ties a sharded drop's
    /// per-shard entries into one incident (runs of chunk deletes merged).
    pub sharding_metadata: Vec<MetadataDelete>,
}

/// Deletes of one sharding catalog collection on the config server: a
/// `config.collections` or `config.databases` document (by `_id`: the namespace or the
/// database), or a run of `config.chunks` documents.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MetadataDelete {
    /// `config.collections`, `config.chunks` or `config.databases`.
    pub ns: String,
    /// The deleted document's `_id` when it is a string (collections: `db.coll`;
    /// databases: `db`); None for chunks.
    pub id: Option<String>,
    pub ts: Ts,
    pub last_ts: Ts,
    #[serde(skip)]
    pub wall_ms: Option<i64>,
    pub count: u64,
}

/// The sharding catalog collections whose deletes are a sharded DDL's evidence
/// (the config server's `removeCollAndChunksMetadataFromConfig` in
/// `src/mongo/db/s/sharding_ddl_util.cpp`, and `config.databases` in
/// `drop_database_coordinator.cpp`).
const SHARDING_CATALOG: [&str; 3] = ["config.collections", "config.chunks", "config.databases"];

/// The DDL commands a shard logs with `fromMigrate: true` as a participant of a
/// sharded DDL (research note §8 trap 1): they destroy data like the primary's.
/// `op_observer_impl.cpp` `onDropCollection` (`setFromMigrateIfTrue(markFromMigrate)`),
/// `rename_collection_participant_service.cpp` (`markFromMigrate = thisShardId !=
/// primaryShardId`), master's `drop_database_coordinator.cpp` (`setFromMigrate(true)`).
const PARTICIPANT_DDL: [&str; 3] = ["drop", "dropDatabase", "renameCollection"];

/// Per transaction: what its buffered parts will do when it commits.
#[derive(Default)]
struct TxnBuffer {
    /// ns -> (deletes, wiping updates)
    effects: FastMap<String, (u64, u64)>,
}

/// The transaction an `applyOps` belongs to, as its leaves need it.
struct Txn<'k> {
    /// Present when this part is buffered or parts buffered before it commit.
    key: Option<&'k [u8]>,
    in_txn: bool,
    /// A `partialTxn` or `prepare` part: its effects wait for the commit.
    deferred: bool,
}

/// Where a leaf operation's effect goes: applied now, or buffered in a transaction.
enum Sink<'k> {
    Now {
        ts: Ts,
        wall_ms: Option<i64>,
        /// Written under a logical session (retryable write or transaction).
        session: bool,
        in_txn: bool,
    },
    Defer(&'k [u8]),
}

pub struct Scanner {
    rule: BurstRule,
    deletes: BurstDetector,
    wipes: BurstDetector,
    /// Deletes the TTL monitor made (TTL indexes, clustered and time-series expiry).
    ttl_deletes: BurstDetector,
    /// Capped roll-over deletes.
    capped_deletes: BurstDetector,
    ttl_eras: FastMap<String, Vec<TtlEra>>,
    /// By target namespace (as users name it).
    out_replaced: BTreeMap<String, OutGroup>,
    catalog: Catalog,
    /// Namespaces with non-session deletes the catalog knew nothing about.
    unknown_ns: FastSet<String>,
    findings: Vec<Finding>,
    /// Consecutive per-collection drops of one database, which become a single
    /// dropDatabase finding if a `dropDatabase` entry follows within the window.
    pending_drops: FastMap<String, Vec<Finding>>,
    txns: FastMap<Vec<u8>, TxnBuffer>,
    stats: ScanStats,
    prev_ts: Option<Ts>,
    /// Scanning one member of a sharded cluster: keep `fromMigrate` DDL, collect the
    /// sharding catalog's deletes.
    cluster: bool,
}

impl Scanner {
    /// A scanner that knows only what the oplog tells (no backup).
    pub fn new(rule: BurstRule) -> Scanner {
        Scanner::with_catalog(rule, Catalog::default())
    }

    /// A scanner starting from what a backup's metadata says ([`Catalog::from_backup`]).
    pub fn with_catalog(rule: BurstRule, catalog: Catalog) -> Scanner {
        Scanner {
            rule,
            deletes: BurstDetector::new(rule),
            wipes: BurstDetector::new(rule),
            ttl_deletes: BurstDetector::new(rule),
            capped_deletes: BurstDetector::new(rule),
            ttl_eras: FastMap::default(),
            out_replaced: BTreeMap::new(),
            catalog,
            unknown_ns: FastSet::default(),
            findings: Vec::new(),
            pending_drops: FastMap::default(),
            txns: FastMap::default(),
            stats: ScanStats::default(),
            prev_ts: None,
            cluster: false,
        }
    }

    /// Scans one member of a sharded cluster (`find-drop --cluster`). Two things
    /// change, and only here, so a single replica set's findings stay as they were:
    /// - a drop, dropDatabase or rename with `fromMigrate: true` is a finding, marked
    ///   [`Finding::from_migrate`]: on 7.0+ the non-primary shards log their part of a
    ///   sharded DDL that way, and it destroys their data (`fromMigrate` CRUD, the
    ///   chunk migrations' clones and range deletions, stays silent);
    /// - deletes on `config.collections`, `config.chunks` and `config.databases` are
    ///   recorded in [`ScanStats::sharding_metadata`].
    pub fn cluster_member(mut self) -> Scanner {
        self.cluster = true;
        self
    }

    pub fn stats(&self) -> &ScanStats {
        &self.stats
    }

    /// Processes one top-level entry given as the bytes of a framed BSON document.
    ///
    /// The fast path: inserts and no-ops (most of any oplog) are recognised from
    /// their `op` alone ([`find_op`]: fixed byte positions when `op` comes first as
    /// in 4.4+, a walk over the few elements before it for retryable writes and
    /// 4.0/4.2 oplogs) and passed over without being parsed; their position is not
    /// read, so [`ScanStats`] positions and the out-of-order count cover the entries
    /// that are examined. An update is parsed only when its `o` may wipe content.
    pub fn feed_bytes(&mut self, doc: &[u8]) -> Result<(), EntryError> {
        if self.pending_drops.is_empty() && passes_over(doc) {
            self.stats.entries += 1;
            return Ok(());
        }
        self.feed_raw(bson::RawDocument::from_bytes(doc)?)
    }

    /// Processes one top-level entry given as raw BSON. Inserts and no-ops (most of
    /// any oplog) only need their position: they are recognised by a partial walk
    /// and never fully parsed. Everything else goes through [`Scanner::feed`].
    pub fn feed_raw(&mut self, doc: &bson::RawDocument) -> Result<(), EntryError> {
        // A pending dropDatabase run needs every entry's namespace.
        if !self.pending_drops.is_empty() {
            return self.feed(&Entry::parse(doc)?);
        }
        match Entry::parse_unless_insert(doc)? {
            Parsed::InsertOrNoop(ts) => {
                self.note_position(ts);
                Ok(())
            }
            Parsed::Entry(e) => self.feed(&e),
        }
    }

    /// Processes one top-level entry.
    pub fn feed(&mut self, e: &Entry<'_>) -> Result<(), EntryError> {
        self.note_position(e.ts);
        if !self.pending_drops.is_empty() {
            self.expire_drop_runs(e.ts);
        }
        if e.from_migrate {
            self.stats.from_migrate += 1;
            let participant = self.cluster
                && e.op == Op::Command
                && e.command_name()
                    .is_some_and(|c| PARTICIPANT_DDL.contains(&c));
            if !participant {
                return Ok(());
            }
        }
        if !self.pending_drops.is_empty() && !self.continues_drop_run(e) {
            if let Some(run) = self.pending_drops.remove(e.db()) {
                self.findings.extend(run);
            }
        }
        match e.op {
            Op::Delete | Op::Update => self.leaf(
                e,
                Sink::Now {
                    ts: e.ts,
                    wall_ms: e.wall_ms,
                    // A retryable write (single delete) carries the session: never
                    // the TTL monitor.
                    session: e.lsid.is_some(),
                    in_txn: false,
                },
            ),
            Op::Command => self.command(e)?,
            _ => {}
        }
        if e.from_migrate {
            self.mark_participant(e.ts);
        }
        Ok(())
    }

    /// Marks the findings the `fromMigrate` DDL entry at `ts` produced (pending drops
    /// included, which may still become a dropDatabase).
    fn mark_participant(&mut self, ts: Ts) {
        let pending = self.pending_drops.values_mut().flatten();
        for f in self.findings.iter_mut().rev().take(4).chain(pending) {
            if f.ts == ts || f.last_ts == ts {
                f.from_migrate = true;
            }
        }
    }

    /// Records a delete of the sharding catalog (cluster members only).
    fn sharding_metadata(&mut self, e: &Entry<'_>, ts: Ts, wall_ms: Option<i64>) {
        let id = e.o.and_then(|o| o.get_str("_id").ok()).map(str::to_string);
        let runs = &mut self.stats.sharding_metadata;
        if let Some(last) = runs.last_mut() {
            // A run of chunk deletes (one per chunk) is one record.
            if last.ns == e.ns
                && id.is_none()
                && last.id.is_none()
                && ts.t.saturating_sub(last.last_ts.t) <= self.rule.window_secs
            {
                last.last_ts = ts;
                last.count += 1;
                return;
            }
        }
        runs.push(MetadataDelete {
            ns: e.ns.to_string(),
            id,
            ts,
            last_ts: ts,
            wall_ms,
            count: 1,
        });
    }

    /// All findings in ts order, and the scan's counters.
    pub fn finish(mut self) -> (Vec<Finding>, ScanStats) {
        for (_, run) in self.pending_drops.drain() {
            self.findings.extend(run);
        }
        for (kind, det) in [
            (Kind::DeleteBurst, self.deletes),
            (Kind::WipingUpdate, self.wipes),
        ] {
            for b in det.finish() {
                let f = burst_finding(kind, &b);
                if kind == Kind::DeleteBurst && self.unknown_ns.contains(&b.ns) {
                    self.stats.unclassified.insert(f.ns.clone());
                }
                self.findings.push(f);
            }
        }
        let ttl = self.ttl_deletes.finish();
        self.findings.extend(ttl_findings(ttl, &self.ttl_eras));
        let capped = self.capped_deletes.finish();
        self.findings.extend(capped_findings(capped));
        for (ns, g) in std::mem::take(&mut self.out_replaced) {
            self.findings.push(out_finding(ns, g));
        }
        self.findings
            .sort_by(|a, b| (a.ts, a.kind, &a.ns).cmp(&(b.ts, b.kind, &b.ns)));
        self.stats.open_transactions = self.txns.len();
        (self.findings, self.stats)
    }

    /// Drop runs whose last drop is more than the window before `now` will never
    /// join a `dropDatabase`: they are separate findings with their own limits.
    fn expire_drop_runs(&mut self, now: Ts) {
        let window = self.rule.window_secs;
        let findings = &mut self.findings;
        self.pending_drops.retain(|_, run| {
            let last = run.last().map_or(now, |f| f.ts);
            if now.t.saturating_sub(last.t) > window {
                findings.append(run);
                false
            } else {
                true
            }
        });
    }

    fn note_position(&mut self, ts: Ts) {
        self.stats.entries += 1;
        if self.prev_ts.is_some_and(|p| ts < p) {
            self.stats.out_of_order += 1;
        }
        self.prev_ts = Some(ts);
        self.stats.first_ts = Some(self.stats.first_ts.map_or(ts, |f| f.min(ts)));
        self.stats.last_ts = Some(self.stats.last_ts.map_or(ts, |l| l.max(ts)));
    }

    /// A `drop` in a database with a pending run keeps the run going; anything else
    /// touching that database ends it.
    fn continues_drop_run(&self, e: &Entry<'_>) -> bool {
        !self.pending_drops.contains_key(e.db())
            || matches!(e.command_name(), Some("drop") | Some("dropDatabase"))
    }

    /// Why a delete on `ns` is routine, if it is, and whether the catalog knew the
    /// collection at all. Capped roll-over deletes come with the insert that caused
    /// them, whatever its session (collection_internal::
    /// cappedDeleteUntilBelowConfiguredMaximum: "Generates oplog entries for the
    /// deleted records in FCV >= 5.0"); the TTL monitor never uses a session (ttl.cpp).
    fn routine_delete(&self, ns: &str, session: bool) -> (Option<Routine>, bool) {
        match self.catalog.delete_kind(ns) {
            DeleteKind::Unknown => (None, false),
            DeleteKind::Plain => (None, true),
            DeleteKind::Capped => (Some(Routine::CappedRollover), true),
            _ if session => (None, true),
            DeleteKind::Ttl => (Some(Routine::TtlExpiry), true),
            DeleteKind::TimeseriesTtl => (Some(Routine::TimeseriesExpiry), true),
        }
    }

    /// Records a TTL delete, noting when the TTL in force changed.
    fn record_ttl(&mut self, ns: &str, ts: Ts, wall_ms: Option<i64>) {
        self.ttl_deletes.record(ns, ts, wall_ms, 1, false);
        let Some(ttl) = self.catalog.ttl(ns) else {
            return;
        };
        let eras = match self.ttl_eras.get_mut(ns) {
            Some(v) => v,
            None => self.ttl_eras.entry(ns.to_string()).or_default(),
        };
        if eras.last().is_none_or(|era| &era.ttl != ttl) {
            let fresh = match (self.catalog.created(ns), &ttl.change) {
                (Some(created), Some(ch)) => {
                    ch.ts.t.saturating_sub(created.t) <= FRESH_COLLECTION_SECS
                }
                _ => false,
            };
            eras.push(TtlEra {
                from: ts,
                ttl: ttl.clone(),
                fresh,
            });
        }
    }

    /// A delete or update, applied now or buffered in a transaction.
    fn leaf(&mut self, e: &Entry<'_>, sink: Sink<'_>) {
        if self.cluster && e.op == Op::Delete && SHARDING_CATALOG.contains(&e.ns) {
            if let Sink::Now { ts, wall_ms, .. } = sink {
                self.sharding_metadata(e, ts, wall_ms);
            }
        }
        if e.from_migrate || is_internal(e.ns) {
            return;
        }
        let (is_delete, is_wipe) = match e.op {
            Op::Delete => (true, false),
            Op::Update => (false, e.o.and_then(wiping_reason).is_some()),
            _ => (false, false),
        };
        if !is_delete && !is_wipe {
            return;
        }
        match sink {
            Sink::Now {
                ts,
                wall_ms,
                session,
                in_txn,
            } => {
                if is_delete {
                    match self.routine_delete(e.ns, session || in_txn) {
                        (Some(Routine::CappedRollover), _) => {
                            self.capped_deletes.record(e.ns, ts, wall_ms, 1, in_txn);
                            return;
                        }
                        (Some(_), _) => {
                            self.record_ttl(e.ns, ts, wall_ms);
                            return;
                        }
                        (None, known) => {
                            if !known
                                && !session
                                && !in_txn
                                && !self.catalog.has_backup()
                                && !self.unknown_ns.contains(e.ns)
                            {
                                self.unknown_ns.insert(e.ns.to_string());
                            }
                        }
                    }
                }
                let det = if is_delete {
                    &mut self.deletes
                } else {
                    &mut self.wipes
                };
                det.record(e.ns, ts, wall_ms, 1, in_txn);
            }
            Sink::Defer(key) => {
                let buf = self.txns.entry(key.to_vec()).or_default();
                let slot = match buf.effects.get_mut(e.ns) {
                    Some(s) => s,
                    None => buf.effects.entry(e.ns.to_string()).or_default(),
                };
                if is_delete {
                    slot.0 += 1;
                } else {
                    slot.1 += 1;
                }
            }
        }
    }

    fn command(&mut self, e: &Entry<'_>) -> Result<(), EntryError> {
        let Some(name) = e.command_name() else {
            return Ok(());
        };
        match name {
            // Transaction bookkeeping: no catalog change of their own (the commands
            // inside an applyOps reach the catalog through apply_leaf).
            "applyOps" => return self.apply_ops(e),
            "commitTransaction" => {
                if let Some(key) = e.transaction_key() {
                    self.commit(&key, e.ts, e.wall_ms);
                }
                return Ok(());
            }
            "abortTransaction" => {
                if let Some(key) = e.transaction_key() {
                    self.txns.remove(&key);
                }
                return Ok(());
            }
            "drop" => self.drop_collection(e),
            "dropDatabase" => self.drop_database(e),
            "renameCollection" => self.rename(e),
            "emptycapped" => {
                if let Some(coll) = o_str(e, "emptycapped") {
                    let ns = format!("{}.{coll}", e.db());
                    if !is_internal(&ns) {
                        let mut f = Finding::new(Kind::Emptycapped, ns, e.ts, e.wall_ms);
                        f.details = "capped collection emptied".into();
                        self.findings.push(f);
                    }
                }
            }
            // `deleteIndex(es)` and `dropIndex` are legacy spellings of dropIndexes.
            "dropIndexes" | "deleteIndexes" | "deleteIndex" | "dropIndex" => {
                self.drop_indexes(e, name)
            }
            _ => {}
        }
        // After the findings above, which need the state before this entry (was the
        // dropped or renamed collection temporary?).
        self.catalog.observe(e);
        Ok(())
    }

    fn apply_ops(&mut self, e: &Entry<'_>) -> Result<(), EntryError> {
        let in_txn = e.is_transaction();
        let deferred = in_txn && (e.o_flag("partialTxn") || e.o_flag("prepare"));
        // The key (an allocation) is needed only to buffer this part, or to commit
        // parts buffered before it; a single-part transaction needs neither.
        let key = if deferred || (in_txn && !self.txns.is_empty()) {
            e.transaction_key()
        } else {
            None
        };
        let Some(ops) = e.apply_ops() else {
            return Ok(());
        };
        let txn = Txn {
            key: key.as_deref(),
            in_txn,
            deferred,
        };
        // Inner inserts, no-ops and updates that wipe nothing are passed over from
        // their bytes, as at the top level ([`Scanner::feed_bytes`]).
        for op in ops?.skipping(passes_over) {
            let op = op?;
            match op.op {
                Op::Command if op.command_name() == Some("applyOps") => {
                    // Nested applyOps: walk its leaves the same way.
                    op.for_each_leaf(&mut |leaf: &Entry<'_>| -> Result<(), EntryError> {
                        self.apply_leaf(leaf, e, &txn);
                        Ok(())
                    })?;
                }
                _ => self.apply_leaf(&op, e, &txn),
            }
        }
        if !deferred {
            if let Some(k) = &key {
                // The final part of an unprepared transaction commits the earlier ones.
                self.commit(k, e.ts, e.wall_ms);
            }
        }
        Ok(())
    }

    fn apply_leaf(&mut self, leaf: &Entry<'_>, parent: &Entry<'_>, txn: &Txn<'_>) {
        match (leaf.op, txn.deferred, txn.key) {
            (Op::Command, false, _) => {
                // Commands inside a non-transaction applyOps (or a committing one) act now.
                let _ = self.command(leaf);
            }
            (Op::Command, true, _) => {}
            (_, true, Some(k)) => self.leaf(leaf, Sink::Defer(k)),
            _ => self.leaf(
                leaf,
                Sink::Now {
                    ts: parent.ts,
                    wall_ms: parent.wall_ms,
                    session: parent.lsid.is_some(),
                    in_txn: txn.in_txn,
                },
            ),
        }
    }

    fn commit(&mut self, key: &[u8], ts: Ts, wall_ms: Option<i64>) {
        if let Some(buf) = self.txns.remove(key) {
            for (ns, (deletes, wipes)) in buf.effects {
                if deletes > 0 {
                    self.deletes.record(&ns, ts, wall_ms, deletes, true);
                }
                if wipes > 0 {
                    self.wipes.record(&ns, ts, wall_ms, wipes, true);
                }
            }
        }
    }

    fn drop_collection(&mut self, e: &Entry<'_>) {
        let Some(coll) = o_str(e, "drop") else { return };
        let ns = format!("{}.{coll}", e.db());
        if is_internal(&ns) {
            return;
        }
        let mut f = Finding::new(Kind::Drop, ns.clone(), e.ts, e.wall_ms);
        f.num_records = num_records(e);
        f.uuid = e.ui_string();
        f.details = match f.num_records {
            Some(n) if n >= 0 => format!(
                "collection dropped with {n} document{}",
                if n == 1 { "" } else { "s" }
            ),
            Some(_) => "collection dropped (document count overflowed)".into(),
            None => "collection dropped (no document count in this oplog version)".into(),
        };
        if let Some(view) = timeseries_view(&ns) {
            f.details
                .push_str(&format!("; buckets of time-series collection {view}"));
        }
        let temp = temp_namespace(&ns).map(|t| t.what).or_else(|| {
            self.catalog
                .is_temp(&ns)
                .then_some("a command (created with temp: true)")
        });
        if let Some(what) = temp {
            f.make_routine(Routine::TempDrop);
            f.details = format!(
                "temporary collection of {what} dropped ({}): {}",
                f.details.trim_start_matches("collection dropped "),
                Routine::TempDrop.reason()
            );
        }
        self.pending_drops
            .entry(e.db().to_string())
            .or_default()
            .push(f);
    }

    fn drop_database(&mut self, e: &Entry<'_>) {
        let db = e.db();
        if matches!(db, "local" | "config") {
            return;
        }
        let run = self.pending_drops.remove(db).unwrap_or_default();
        // The data is gone from the first per-collection drop of the burst.
        let (ts, wall_ms) = run.first().map_or((e.ts, e.wall_ms), |f| {
            (f.ts, f.wall.map(|w| w.timestamp_millis()))
        });
        let mut f = Finding::new(Kind::DropDatabase, db, ts, wall_ms);
        f.last_ts = e.ts;
        f.collections = run.iter().map(|d| d.ns.clone()).collect();
        f.count = f.collections.len().max(1) as u64;
        let known: Vec<i64> = run
            .iter()
            .filter_map(|d| d.num_records)
            .filter(|n| *n >= 0)
            .collect();
        if !run.is_empty() && known.len() == run.len() {
            f.num_records = Some(known.iter().sum());
        }
        f.details = if run.is_empty() {
            "database dropped (its collections are not listed in this oplog)".into()
        } else {
            format!(
                "database dropped: {}",
                crate::table::counted(run.len() as u64, "collection", "collections")
            )
        };
        self.findings.push(f);
    }

    fn rename(&mut self, e: &Entry<'_>) {
        let Some(o) = e.o else { return };
        let drop_target = match o.get("dropTarget") {
            Ok(Some(RawBsonRef::Boolean(b))) => b,
            Ok(Some(RawBsonRef::Binary(_))) => true,
            _ => false,
        };
        if !drop_target {
            return;
        }
        let (Ok(from), Ok(to)) = (o.get_str("renameCollection"), o.get_str("to")) else {
            return;
        };
        if is_internal(to) {
            return;
        }
        let from_coll = from.split_once('.').map_or(from, |(_, c)| c);
        // A cluster member: resharding's recipients rename their
        // `system.resharding.<uuid>` copy over the source with dropTarget
        // (`rename_collection_participant_service.cpp`, research note §1): internal
        // to the cluster, never an incident.
        if self.cluster && from_coll.starts_with("system.resharding.") {
            return;
        }
        if let Some(t) = temp_collection(from_coll).filter(|t| t.rename_is_routine) {
            let target = timeseries_view(to).unwrap_or_else(|| to.to_string());
            let temp_flag = self.catalog.is_temp(from);
            let n = num_records(e);
            let g = self.out_replaced.entry(target).or_insert(OutGroup {
                first: e.ts,
                first_wall_ms: e.wall_ms,
                last: e.ts,
                count: 0,
                num_records: n,
                what: t.what,
                temp_flag,
            });
            g.last = g.last.max(e.ts);
            g.count += 1;
            return;
        }
        let mut f = Finding::new(Kind::RenameDropTarget, to, e.ts, e.wall_ms);
        f.num_records = num_records(e);
        f.uuid = e.ui_string();
        f.renamed_from = Some(from.to_string());
        f.details = if is_convert_to_capped(from_coll) {
            "convertToCapped: collection replaced by a capped copy; documents that did not fit are lost".into()
        } else if from_coll.starts_with("tmp") && from_coll.contains(".renameCollection") {
            "cross-database renameCollection replaced the existing target".into()
        } else {
            format!("renamed `{from}` over it, dropping the existing collection")
        };
        if let Some(n) = f.num_records {
            f.details.push_str(&format!(" (target had {n} documents)"));
        }
        self.findings.push(f);
    }

    fn drop_indexes(&mut self, e: &Entry<'_>, name: &str) {
        let Some(coll) = o_str(e, name) else { return };
        let ns = format!("{}.{coll}", e.db());
        if is_internal(&ns) {
            return;
        }
        let index = match e.o.and_then(|o| o.get("index").ok().flatten()) {
            Some(RawBsonRef::String(s)) => s.to_string(),
            Some(other) => other
                .to_raw_bson()
                .try_into()
                .map(|b: bson::Bson| b.to_string())
                .unwrap_or_default(),
            None => "?".into(),
        };
        // Consecutive dropIndexes on one collection are one operation.
        if let Some(last) = self.findings.last_mut() {
            if last.kind == Kind::DropIndexes
                && last.ns == ns
                && e.ts.t.saturating_sub(last.last_ts.t) <= self.rule.window_secs
            {
                last.count += 1;
                last.last_ts = e.ts;
                last.details.push_str(&format!(", {index}"));
                return;
            }
        }
        let mut f = Finding::new(Kind::DropIndexes, ns, e.ts, e.wall_ms);
        f.details = format!("indexes dropped (data intact): {index}");
        self.findings.push(f);
    }
}

/// True for an entry (top-level or inside an `applyOps`) the scan has nothing to
/// learn from, decided from its bytes without parsing it: an insert or no-op, or an
/// update whose `o` wipes nothing ([`update_may_wipe`]). Anything else, including
/// every entry whose `op` is not among its first fields, is parsed.
#[inline]
fn passes_over(doc: &[u8]) -> bool {
    match find_op(doc) {
        Some((b'i' | b'n', _)) => true,
        Some((b'u', after_op)) => !update_may_wipe(doc, after_op),
        _ => false,
    }
}

/// For an update entry's bytes: false only when its `o` (the first one after `op`,
/// which starts at offset `after_op`) is present, well-formed and does not wipe
/// content. Anything unusual answers true, so the caller parses the entry fully and
/// reports problems precisely.
#[inline]
fn update_may_wipe(doc: &[u8], after_op: usize) -> bool {
    match find_field(doc, after_op, b"o") {
        Some((0x03, o)) => {
            if let Some(diff) = v2_diff(o) {
                // What wiping_reason answers for `$v: 2`, without walking `o` again.
                return diff_deletes(diff);
            }
            match bson::RawDocument::from_bytes(o) {
                Ok(o) => wiping_reason(o).is_some(),
                Err(_) => true,
            }
        }
        _ => true,
    }
}

/// The diff of the commonest update of 5.0+ oplogs, found from the bytes: `o` is
/// exactly `{$v: 2 (int32), diff: {...}}`. [`wiping_reason`] (forensics/updates.rs)
/// decides such an update with [`diff_deletes`] alone. Any other shape answers
/// `None` and is classified by [`wiping_reason`] itself.
#[inline]
fn v2_diff(o: &[u8]) -> Option<&[u8]> {
    // 10 '$' 'v' 00 <02 00 00 00> 03 'd' 'i' 'f' 'f' 00 <diff>, then o's final NUL.
    const HEAD: [u8; 14] = [
        0x10, b'$', b'v', 0, 2, 0, 0, 0, 0x03, b'd', b'i', b'f', b'f', 0,
    ];
    let diff = o.get(4 + HEAD.len()..o.len().checked_sub(1)?)?;
    if o[4..4 + HEAD.len()] != HEAD {
        return None;
    }
    // The diff must fill the rest of `o` exactly (no third field after it) and be
    // a framed document.
    let len = diff
        .get(0..4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))?;
    if len as usize != diff.len() || len < 5 || diff[diff.len() - 1] != 0 {
        return None;
    }
    Some(diff)
}

/// `tmpXXXXX.convertToCapped.<coll>`: the temporary collection convertToCapped fills.
fn is_convert_to_capped(coll: &str) -> bool {
    coll.starts_with("tmp") && coll.contains(".convertToCapped.")
}

fn o_str<'a>(e: &Entry<'a>, key: &str) -> Option<&'a str> {
    e.o?.get_str(key).ok()
}

fn num_records(e: &Entry<'_>) -> Option<i64> {
    e.o2?.get("numRecords").ok().flatten().and_then(as_i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, RawDocumentBuf, Timestamp};

    fn ts(t: u32, i: u32) -> Bson {
        Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    fn uuid(b: u8) -> Binary {
        Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![b; 16],
        }
    }

    fn scan(docs: &[Document]) -> Vec<Finding> {
        scan_rule(docs, BurstRule::default())
    }

    fn scan_rule(docs: &[Document], rule: BurstRule) -> Vec<Finding> {
        let mut s = Scanner::new(rule);
        for d in docs {
            let raw = RawDocumentBuf::from_document(d).unwrap();
            s.feed(&Entry::parse(&raw).unwrap()).unwrap();
        }
        s.finish().0
    }

    fn del(t: u32, i: u32, ns: &str, id: i64) -> Document {
        doc! { "ts": ts(t, i), "op": "d", "ns": ns, "o": { "_id": id } }
    }

    fn inner_del(ns: &str, id: i64) -> Bson {
        Bson::Document(doc! { "op": "d", "ns": ns, "ui": uuid(1), "o": { "_id": id } })
    }

    fn txn_part(t: u32, ops: Vec<Bson>, txn: i64, extra: Document) -> Document {
        let mut o = doc! { "applyOps": ops };
        o.extend(extra);
        doc! { "ts": ts(t, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": uuid(7) }, "txnNumber": txn, "o": o }
    }

    fn dels(ns: &str, n: i64) -> Vec<Bson> {
        (0..n).map(|k| inner_del(ns, k)).collect()
    }

    #[test]
    fn partial_txn_chain_counts_at_the_final_part() {
        let docs = vec![
            txn_part(
                100,
                dels("shop.payments", 50),
                1,
                doc! { "partialTxn": true },
            ),
            txn_part(
                101,
                dels("shop.payments", 50),
                1,
                doc! { "partialTxn": true },
            ),
            txn_part(102, dels("shop.payments", 20), 1, doc! { "count": 120i64 }),
        ];
        let f = scan(&docs);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].kind, f[0].count, f[0].ts, f[0].oplog_limit),
            (Kind::DeleteBurst, 120, Ts::new(102, 1), Ts::new(102, 1))
        );
        assert!(f[0].in_transaction);
    }

    #[test]
    fn prepared_txn_counts_at_commit_and_aborted_counts_nothing() {
        let commit = vec![
            txn_part(100, dels("shop.a", 130), 1, doc! { "prepare": true }),
            doc! { "ts": ts(105, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": uuid(7) }, "txnNumber": 1i64,
            "o": { "commitTransaction": 1, "commitTimestamp": ts(104, 9) } },
        ];
        let f = scan(&commit);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].ts, f[0].count), (Ts::new(105, 1), 130));

        let abort = vec![
            txn_part(100, dels("shop.a", 130), 2, doc! { "prepare": true }),
            doc! { "ts": ts(101, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": uuid(7) }, "txnNumber": 2i64,
            "o": { "abortTransaction": 1 } },
        ];
        assert!(scan(&abort).is_empty());
    }

    #[test]
    fn batched_deletes_without_session_are_not_a_transaction() {
        let d = doc! { "ts": ts(50, 3), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": dels("shop.log", 110) } };
        let f = scan(&[d]);
        assert_eq!(
            (f[0].kind, f[0].count, f[0].in_transaction),
            (Kind::DeleteBurst, 110, false)
        );
    }

    #[test]
    fn decoys_stay_silent() {
        let mut docs = Vec::new();
        for k in 0..200u32 {
            let mut d = del(10, k + 1, "shop.orders", k as i64);
            d.insert("fromMigrate", true);
            docs.push(d);
            docs.push(del(11, k + 1, "config.system.sessions", k as i64));
            docs.push(del(12, k + 1, "local.replset.election", k as i64));
            docs.push(del(13, k + 1, "shop.system.drop.1i1t1.old", k as i64));
        }
        docs.push(doc! { "ts": ts(14, 1), "op": "n", "ns": "", "o": { "msg": "periodic noop" } });
        // A rename without dropTarget loses nothing.
        docs.push(doc! { "ts": ts(15, 1), "op": "c", "ns": "shop.$cmd", "o": { "renameCollection": "shop.a", "to": "shop.b", "dropTarget": false } });
        assert!(scan(&docs).is_empty());
    }

    #[test]
    fn rename_with_drop_target_reports_the_target() {
        let docs = vec![
            doc! { "ts": ts(20, 1), "op": "c", "ns": "shop.$cmd", "o": { "renameCollection": "shop.staging", "to": "shop.customers", "dropTarget": uuid(3) }, "o2": { "numRecords": 42 } },
            doc! { "ts": ts(21, 1), "op": "c", "ns": "shop.$cmd", "o": { "renameCollection": "shop.tmpAb12c.convertToCapped.events", "to": "shop.events", "dropTarget": true } },
        ];
        let f = scan(&docs);
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0].kind, f[0].ns.as_str(), f[0].num_records),
            (Kind::RenameDropTarget, "shop.customers", Some(42))
        );
        assert!(
            f[1].details.starts_with("convertToCapped"),
            "{}",
            f[1].details
        );
    }

    #[test]
    fn drop_database_groups_its_drops_even_with_other_traffic_between() {
        let docs = vec![
            doc! { "ts": ts(30, 1), "op": "c", "ns": "an.$cmd", "o": { "drop": "a" }, "o2": { "numRecords": 3 } },
            doc! { "ts": ts(30, 2), "op": "i", "ns": "shop.orders", "o": { "_id": 1 } },
            doc! { "ts": ts(30, 3), "op": "c", "ns": "an.$cmd", "o": { "drop": "b" }, "o2": { "numRecords": 4 } },
            doc! { "ts": ts(30, 4), "op": "c", "ns": "an.$cmd", "o": { "dropDatabase": 1 } },
        ];
        let f = scan(&docs);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].kind, f[0].ts, f[0].last_ts),
            (Kind::DropDatabase, Ts::new(30, 1), Ts::new(30, 4))
        );
        assert_eq!(f[0].collections, vec!["an.a", "an.b"]);
        assert_eq!((f[0].count, f[0].num_records), (2, Some(7)));
    }

    #[test]
    fn a_drop_followed_by_other_work_in_its_db_is_just_a_drop() {
        let docs = vec![
            doc! { "ts": ts(30, 1), "op": "c", "ns": "an.$cmd", "o": { "drop": "a" } },
            doc! { "ts": ts(31, 1), "op": "i", "ns": "an.b", "o": { "_id": 1 } },
            doc! { "ts": ts(40, 1), "op": "c", "ns": "an.$cmd", "o": { "dropDatabase": 1 } },
        ];
        let f = scan(&docs);
        assert_eq!(
            f.iter().map(|f| f.kind).collect::<Vec<_>>(),
            vec![Kind::Drop, Kind::DropDatabase]
        );
        assert_eq!(f[1].ts, Ts::new(40, 1));
        assert!(f[1].collections.is_empty());
    }

    #[test]
    fn wiping_update_bursts_and_emptycapped() {
        let mut docs: Vec<Document> = (0..120u32)
            .map(|k| doc! { "ts": ts(60, k + 1), "op": "u", "ns": "shop.profiles", "o2": { "_id": k as i64 },
                             "o": { "$v": 2, "diff": { "d": { "email": false } } } })
            .collect();
        docs.extend((0..150u32).map(|k| {
            doc! { "ts": ts(61, k + 1), "op": "u", "ns": "shop.other", "o2": { "_id": k as i64 },
            "o": { "$v": 2, "diff": { "u": { "n": 1 } } } }
        }));
        docs.push(
            doc! { "ts": ts(70, 1), "op": "c", "ns": "shop.$cmd", "o": { "emptycapped": "log" } },
        );
        let f = scan(&docs);
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0].kind, f[0].count, f[0].ns.as_str()),
            (Kind::WipingUpdate, 120, "shop.profiles")
        );
        assert_eq!(
            (f[1].kind, f[1].ns.as_str()),
            (Kind::Emptycapped, "shop.log")
        );
    }

    #[test]
    fn consecutive_index_drops_merge() {
        let docs = vec![
            doc! { "ts": ts(80, 1), "op": "c", "ns": "shop.$cmd", "o": { "dropIndexes": "orders", "index": "a_1" } },
            doc! { "ts": ts(80, 2), "op": "c", "ns": "shop.$cmd", "o": { "dropIndexes": "orders", "index": "b_1" } },
            doc! { "ts": ts(500, 1), "op": "c", "ns": "shop.$cmd", "o": { "deleteIndexes": "orders", "index": "*" } },
        ];
        let f = scan(&docs);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].count, 2);
        assert!(f[0].details.ends_with("a_1, b_1"), "{}", f[0].details);
    }

    /// Research note §8 trap 1: `fromMigrate` means two things. A cluster member's
    /// scan keeps the participant drop of a 7.x sharded drop (marked) and records the
    /// config server's catalog deletes, while migration CRUD stays silent; a single
    /// replica set's scan ignores all of it, as before.
    #[test]
    fn cluster_members_keep_participant_ddl_but_not_migration_crud() {
        let mut docs: Vec<Document> = (0..150u32)
            .map(|k| {
                let mut d = del(10, k + 1, "shop.events", k as i64);
                d.insert("fromMigrate", true);
                d
            })
            .collect();
        docs.push(doc! { "ts": ts(20, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": uuid(9) }, "txnNumber": 0i64,
            "o": { "applyOps": [ { "op": "d", "ns": "config.collections", "ui": uuid(6), "o": { "_id": "shop.orders" } } ] } });
        for k in 0..3u32 {
            docs.push(doc! { "ts": ts(20, 2 + k), "op": "d", "ns": "config.chunks", "ui": uuid(7), "o": { "_id": k as i64 } });
        }
        docs.push(doc! { "ts": ts(21, 1), "op": "c", "ns": "shop.$cmd", "ui": uuid(3), "o": { "drop": "orders" },
            "o2": { "numRecords": 187 }, "fromMigrate": true });

        // Resharding's recipient renames its copy over the collection: never a finding.
        docs.push(doc! { "ts": ts(22, 1), "op": "c", "ns": "shop.$cmd", "ui": uuid(4),
            "o": { "renameCollection": "shop.system.resharding.0a0b", "to": "shop.events", "dropTarget": uuid(5) },
            "o2": { "numRecords": 40 }, "fromMigrate": true });
        let plain = scan(&docs);
        assert!(plain.is_empty(), "{plain:?}");

        let mut s = Scanner::new(BurstRule::default()).cluster_member();
        for d in &docs {
            let raw = RawDocumentBuf::from_document(d).unwrap();
            s.feed(&Entry::parse(&raw).unwrap()).unwrap();
        }
        let (f, stats) = s.finish();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].kind, f[0].ts, f[0].num_records),
            (Kind::Drop, Ts::new(21, 1), Some(187))
        );
        assert!(f[0].from_migrate);
        assert_eq!(
            f[0].uuid.as_deref(),
            Some("03030303-0303-0303-0303-030303030303")
        );
        let m = &stats.sharding_metadata;
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(
            (m[0].ns.as_str(), m[0].id.as_deref(), m[0].ts),
            ("config.collections", Some("shop.orders"), Ts::new(20, 1))
        );
        assert_eq!(
            (m[1].ns.as_str(), m[1].count, m[1].last_ts),
            ("config.chunks", 3, Ts::new(20, 4))
        );
        // The JSON of a finding is unchanged by the new fields.
        let v = serde_json::to_value(&f[0]).unwrap();
        assert!(
            v.get("from_migrate").is_none() && v.get("uuid").is_none(),
            "{v}"
        );
    }

    #[test]
    fn plain_delete_burst_limit_is_its_first_delete() {
        let docs: Vec<Document> = (0..300u32)
            .map(|k| del(1000 + k / 100, k % 100 + 1, "shop.inventory", k as i64))
            .collect();
        let f = scan(&docs);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].ts, f[0].oplog_limit, f[0].last_ts, f[0].count),
            (Ts::new(1000, 1), Ts::new(1000, 1), Ts::new(1002, 100), 300)
        );
    }
}

#[cfg(test)]
mod v2_diff_tests {
    use super::*;
    use bson::{doc, rawdoc, Document};

    /// The byte-level answer for an update's `o` must be exactly what
    /// `wiping_reason` answers, for every shape (`$v: 2` diffs taken from the bytes,
    /// anything else through `wiping_reason` itself).
    #[test]
    fn agrees_with_wiping_reason() {
        let cases: Vec<(Document, bool)> = vec![
            (doc! { "$v": 2, "diff": { "u": { "a": 1 } } }, true),
            (
                doc! { "$v": 2, "diff": { "u": { "a": 1 }, "i": { "b": 2 } } },
                true,
            ),
            (doc! { "$v": 2, "diff": { "d": { "a": false } } }, true),
            (doc! { "$v": 2, "diff": { "u": { "d": 1 } } }, true),
            (
                doc! { "$v": 2, "diff": { "sitems": { "a": true, "u0": 1 } } },
                true,
            ),
            (
                doc! { "$v": 2, "diff": { "sprefs": { "d": { "x": false } } } },
                true,
            ),
            (
                doc! { "$v": 2, "diff": { "sa": { "sb": { "sc": { "d": { "x": false } } } } } },
                true,
            ),
            (doc! { "$v": 2i64, "diff": { "u": { "a": 1 } } }, false),
            (
                doc! { "$v": 2, "diff": { "u": { "a": 1 } }, "$unset": { "a": 1 } },
                false,
            ),
            (doc! { "diff": { "u": { "a": 1 } }, "$v": 2 }, false),
            (doc! { "$set": { "a": 1 } }, false),
            (doc! { "$unset": { "a": 1 } }, false),
            (doc! { "_id": 1 }, false),
            (doc! { "_id": 1, "x": 2 }, false),
        ];
        for (o, fast) in cases {
            let bytes = bson::to_vec(&o).unwrap();
            assert_eq!(v2_diff(&bytes).is_some(), fast, "{o}");
            let entry = bson::to_vec(&doc! { "op": "u", "ns": "a.b", "o": o.clone() }).unwrap();
            let raw = bson::RawDocument::from_bytes(&bytes).unwrap();
            assert_eq!(
                update_may_wipe(&entry, 4),
                wiping_reason(raw).is_some(),
                "{o}"
            );
        }
        // Truncated or inconsistent bytes never take the diff shortcut.
        let mut bytes = bson::to_vec(&doc! { "$v": 2, "diff": { "u": { "a": 1 } } }).unwrap();
        let n = bytes.len();
        bytes[18..22].copy_from_slice(&((n - 18) as i32).to_le_bytes());
        assert!(v2_diff(&bytes).is_none());
        assert!(v2_diff(rawdoc! {}.as_bytes()).is_none());
        assert!(v2_diff(&[]).is_none());
    }
}

#[cfg(test)]
mod fast_path_tests {
    //! The byte-level fast paths of `feed_bytes` (inserts, no-ops and non-wiping
    //! updates recognised without a full parse) must find exactly what the full
    //! parse finds, on modern (op first) and legacy (ts first) field orders.
    use super::*;
    use crate::oplog::{self, ReadOptions};
    use bson::{Document, RawDocumentBuf};

    fn fixture_docs() -> Vec<Vec<u8>> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident/oplog.bson");
        let mut r = oplog::open(path, ReadOptions::default()).unwrap();
        let mut out = Vec::new();
        while let Some((d, _, _)) = r.next_raw().unwrap() {
            out.push(d.as_bytes().to_vec());
        }
        out
    }

    /// The same entry with `ts`, `t`, `h`, `v` first, as servers before 4.4 wrote it.
    fn legacy_order(bytes: &[u8]) -> Vec<u8> {
        let d = Document::from_reader(bytes).unwrap();
        let mut out = Document::new();
        for k in ["ts", "t", "h", "v"] {
            if let Some(v) = d.get(k) {
                out.insert(k, v.clone());
            }
        }
        for (k, v) in &d {
            if !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        bson::to_vec(&out).unwrap()
    }

    fn findings(docs: &[Vec<u8>], fast: bool) -> Vec<Finding> {
        let mut s = Scanner::new(BurstRule::default());
        for d in docs {
            if fast {
                s.feed_bytes(d).unwrap();
            } else {
                let raw = RawDocumentBuf::from_bytes(d.clone()).unwrap();
                s.feed(&Entry::parse(&raw).unwrap()).unwrap();
            }
        }
        s.finish().0
    }

    #[test]
    fn fast_paths_find_what_the_full_parse_finds() {
        let modern = fixture_docs();
        // Entries with `op` first and retryable writes (which lead with
        // lsid/txnNumber and take the walking path) are both there, so both paths
        // are exercised.
        let op_first = modern
            .iter()
            .filter(|d| crate::oplog::elements::leading_op(d).is_some())
            .count();
        assert!(
            op_first > modern.len() / 4 && op_first < modern.len(),
            "{op_first} of {}",
            modern.len()
        );
        let full = findings(&modern, false);
        assert_eq!(full.iter().filter(|f| !f.is_routine()).count(), 9);
        assert!(full.iter().any(|f| f.is_routine()));
        assert_eq!(findings(&modern, true), full);

        let legacy: Vec<Vec<u8>> = modern.iter().map(|d| legacy_order(d)).collect();
        assert!(legacy
            .iter()
            .all(|d| crate::oplog::elements::leading_op(d).is_none()));
        assert_eq!(findings(&legacy, true), full);
    }
}
