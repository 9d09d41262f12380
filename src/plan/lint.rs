//! Preflight lint: what in the replayed range mongorestore cannot apply, applies
//! differently from the original server, or skips.
//!
//! Fed by [`super::apply`] with the operations the replay will apply (so a command
//! inside a transaction is judged where mongorestore judges it: at the commit) plus
//! checks the planner adds itself. Items repeat per (code, namespace): the first
//! occurrence is kept with a count, so a million index builds make one line.
//!
//! Severities: `error` = the replay will fail or silently lose data; `warning` =
//! the result may differ from the original server; `info` = worth knowing.

use std::collections::{HashMap, HashSet};

/// The index's maps are looked up once or more per replayed entry: foldhash.
type Fast = foldhash::fast::RandomState;

use bson::RawBsonRef;
use serde::{Deserialize, Serialize};

use crate::oplog::{Entry, Op, Ts};

use super::expect::Model;
use super::ts_json;
use super::versions::{RestoreRules, Rules, ServerRules};
use crate::engine::walk::{Ignored, OpenTxn, Source, TxnDecision};

/// How serious a lint item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LintSeverity {
    Info,
    Warning,
    Error,
}

impl LintSeverity {
    pub fn as_str(self) -> &'static str {
        match self {
            LintSeverity::Info => "info",
            LintSeverity::Warning => "warning",
            LintSeverity::Error => "error",
        }
    }
}

/// One finding of the lint. JSON: `severity` (`error`/`warning`/`info`), `code`
/// (stable kebab-case name), `ts` (`"t:i"` of the first occurrence, or null),
/// `ns` (may be empty), `count` (occurrences folded into this item), `message`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LintItem {
    pub severity: LintSeverity,
    pub code: String,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub ts: Option<Ts>,
    pub ns: String,
    pub count: u64,
    pub message: String,
}

impl LintItem {
    /// About the inputs given rather than about how a replay applies them (the
    /// oplog is the backup's own): shown with a restore's summary, not only in its
    /// report.
    pub fn about_the_inputs(&self) -> bool {
        self.code == "oplog-is-the-backups-own"
    }
}

/// Collects lint items; see the module documentation.
pub struct Linter {
    items: Vec<LintItem>,
    /// code -> ns -> position in `items`: looked up by `&str` on every repeat (a
    /// replayed oplog repeats a few items millions of times, `ui-stripped` once per
    /// entry), so a repeat allocates nothing.
    index: HashMap<String, HashMap<String, usize, Fast>, Fast>,
    /// `ui-stripped`'s place in `items` once pushed: counted per entry without a
    /// lookup (two string hashes per entry showed in the apply's profile).
    ui_stripped: Option<usize>,
    restore: RestoreRules,
    server: ServerRules,
    /// `mongorestore 100.18.0`, `mongod 7.0.14`: for messages.
    restore_name: String,
    server_name: String,
    /// The slice is replayed by a second mongorestore run (archives; `--ns` without
    /// a backup oplog), which knows neither the backup's indexes nor its buffered
    /// transactions (see [`super::steps::RestoreSpec`]).
    second_run: bool,
    /// Indexes (namespace, name or key pattern bytes) created within the slice: the
    /// only ones a second run's index catalog holds.
    slice_indexes: HashSet<(String, Vec<u8>)>,
}

impl Default for Linter {
    fn default() -> Linter {
        Linter::new(&Rules::newest())
    }
}

impl Linter {
    /// Judges with the rules of these releases of mongorestore and the server.
    pub fn new(rules: &Rules) -> Linter {
        Linter {
            items: Vec::new(),
            index: HashMap::default(),
            ui_stripped: None,
            restore: rules.mongorestore.clone(),
            server: rules.server.clone(),
            restore_name: format!("mongorestore {}", rules.versions.mongorestore),
            server_name: format!("mongod {}", rules.versions.mongod),
            second_run: false,
            slice_indexes: HashSet::new(),
        }
    }

    /// The slice will be replayed by a second mongorestore run.
    pub fn set_second_run(&mut self, second: bool) {
        self.second_run = second;
    }

    /// Adds an item, or counts one more occurrence of the same (code, ns).
    pub fn push(
        &mut self,
        severity: LintSeverity,
        code: &str,
        ts: Option<Ts>,
        ns: &str,
        message: impl Into<String>,
    ) {
        if let Some(&i) = self.index.get(code).and_then(|m| m.get(ns)) {
            self.items[i].count += 1;
            return;
        }
        self.index
            .entry(code.to_string())
            .or_default()
            .insert(ns.to_string(), self.items.len());
        self.items.push(LintItem {
            severity,
            code: code.to_string(),
            ts,
            ns: ns.to_string(),
            count: 1,
            message: message.into(),
        });
    }

    /// Every top-level entry that will be replayed.
    pub fn entry(&mut self, e: &Entry<'_>, _src: Source) {
        if e.ui.is_none() {
            return;
        }
        if let Some(i) = self.ui_stripped {
            self.items[i].count += 1;
            return;
        }
        self.push(
                LintSeverity::Info,
                "ui-stripped",
                Some(e.ts),
                "",
                "entries carry collection UUIDs (`ui`); mongorestore strips them unless --preserveUUID (which needs --drop), \
                 so operations are applied by namespace name",
            );
        self.ui_stripped = self
            .index
            .get("ui-stripped")
            .and_then(|m| m.get(""))
            .copied();
    }

    /// An operation the replay applies (`model` is the state just before it).
    pub fn applied(&mut self, op: &Entry<'_>, at: Ts, src: Source, model: &Model) {
        match op.op {
            Op::Insert | Op::Update | Op::Delete => {
                if op.op == Op::Update {
                    self.update(op, at, model);
                }
                if !model.exists(op.ns) {
                    let restore = match src {
                        Source::BackupOplog => "the backup",
                        Source::Slice => "the backup or an earlier entry of the slice",
                    };
                    self.push(
                        LintSeverity::Warning,
                        "missing-namespace",
                        Some(at),
                        op.ns,
                        format!(
                            "writes to `{}`, which neither {restore} creates: on a standalone mongod, applyOps does not create \
                             missing collections, so these writes may fail or be lost",
                            op.ns
                        ),
                    );
                }
            }
            Op::Command => self.command(op, at, src),
            Op::Noop => {}
            Op::Other(t) => match self.restore.op_skipped_from(t) {
                Some(since) => {
                    let msg = format!(
                        "{} sends `{t}` entries (replicated record id bookkeeping) to the server, which refuses them in \
                         applyOps, and the replay stops; mongorestore {since} and later skip them: use a newer mongorestore",
                        self.restore_name
                    );
                    self.push(LintSeverity::Error, "op-refused", Some(at), op.ns, msg)
                }
                None => {
                    let msg = format!(
                        "op type `{t}` is not one {} skips; the server may reject it in applyOps",
                        self.restore_name
                    );
                    self.push(LintSeverity::Warning, "unknown-op", Some(at), op.ns, msg)
                }
            },
        }
    }

    /// Updates the spare's release refuses: classic (`$set`/`$unset`) entries from
    /// 6.1, and updates of missing documents from 8.1 (see [`ServerRules`]).
    fn update(&mut self, op: &Entry<'_>, at: Ts, model: &Model) {
        if !self.server.accepts_classic_updates() && is_classic_update(op) {
            let msg = format!(
                "updates in the classic `$set`/`$unset` form (logged by 4.4 and 5.0 primaries) are refused by {} in applyOps \
                 (error 4772600; SERVER-50301, 6.1 to 7.x): the replay stops at the first one; use a spare mongod 6.0 or 8.0+ \
                 for this oplog",
                self.server_name
            );
            self.push(
                LintSeverity::Error,
                "classic-update-refused",
                Some(at),
                op.ns,
                msg,
            );
        }
        if self.server.upserts_missing_documents() {
            return;
        }
        let id = op.o2.and_then(|o2| o2.get("_id").ok().flatten());
        if let Some(false) = id.and_then(|id| model.holds(op.ns, id)) {
            let msg = format!(
                "updates of documents that the replay does not have at that point: {} no longer upserts them in applyOps \
                 (from 6.2), the update fails and mongorestore stops; use a spare mongod 6.0 or 6.1, or a limit before it",
                self.server_name
            );
            self.push(
                LintSeverity::Error,
                "update-of-missing-document",
                Some(at),
                op.ns,
                msg,
            );
        }
    }

    fn command(&mut self, op: &Entry<'_>, at: Ts, src: Source) {
        let Some(name) = op.command_name() else {
            return;
        };
        if src == Source::Slice {
            self.second_run_catalog(op, name, at);
        }
        let target = || {
            op.o.and_then(|o| o.get_str(name).ok())
                .map_or_else(|| op.ns.to_string(), |c| format!("{}.{c}", op.db()))
        };
        if name == "upgradeDowngradeViewlessTimeseries" {
            self.push(
                LintSeverity::Error,
                "timeseries-conversion",
                Some(at),
                op.ns,
                "a time-series format conversion (FCV change between 8.x and 9.0): mongorestore refuses to replay across it; \
                 choose a limit before it",
            );
            return;
        }
        if !self.restore.knows_command(name) {
            let newer = match self.restore.command_skipped_from(name) {
                Some(since) => {
                    format!(" (mongorestore {since} and later skip it: use a newer mongorestore)")
                }
                None => String::new(),
            };
            let msg = format!(
                "command `{name}` is not in {}'s known list: the replay stops with `unknown oplog command name {name}`{newer}; \
                 choose a limit before it, or --skip it",
                self.restore_name
            );
            self.push(LintSeverity::Error, "unknown-command", Some(at), op.ns, msg);
            return;
        }
        match name {
            "renameCollection" => self.rename(op, at),
            "createIndexes" | "commitIndexBuild" => {
                let ns = target();
                self.push(
                    LintSeverity::Info,
                    "index-build-deferred",
                    Some(at),
                    &ns,
                    format!("index builds on `{ns}` are not replayed as they happen: mongorestore builds them after the replay"),
                );
            }
            "dropIndexes" | "deleteIndexes" | "deleteIndex" | "dropIndex" => {
                let ns = target();
                self.push(
                    LintSeverity::Info,
                    "index-drop-not-applied",
                    Some(at),
                    &ns,
                    format!(
                        "index drops on `{ns}` only edit mongorestore's own list of indexes to build; an index already \
                         restored from the backup's metadata stays"
                    ),
                );
            }
            "convertToCapped" => {
                let ns = target();
                self.push(
                    LintSeverity::Warning,
                    "convert-to-capped",
                    Some(at),
                    &ns,
                    format!("convertToCapped of `{ns}`: documents that do not fit the cap are lost, so its expected count is an upper bound"),
                );
            }
            _ => {}
        }
    }

    fn rename(&mut self, op: &Entry<'_>, at: Ts) {
        let Some(o) = op.o else { return };
        let (from, to) = (
            o.get_str("renameCollection").unwrap_or("?"),
            o.get_str("to").unwrap_or("?"),
        );
        let mut msg = format!("renameCollection `{from}` -> `{to}`");
        match o.get("dropTarget") {
            Ok(Some(RawBsonRef::Binary(_))) => msg.push_str(
                " with dropTarget by UUID, replacing the existing target; mongorestore strips `ui` but not this UUID, \
                 and the spare's collections have new UUIDs, so the server may refuse or not drop the target",
            ),
            Ok(Some(RawBsonRef::Boolean(true))) => msg.push_str(" with dropTarget: the existing target is replaced"),
            _ => {}
        }
        let db = |ns: &str| {
            ns.split_once('.')
                .map_or(ns.to_string(), |(d, _)| d.to_string())
        };
        if db(from) != db(to) {
            msg.push_str("; a cross-database rename");
        }
        msg.push_str("; later entries address the collection by its new name");
        self.push(LintSeverity::Warning, "rename", Some(at), to, msg);
    }

    /// An operation the replay skips.
    pub fn ignored(&mut self, op: &Entry<'_>, why: Ignored, _src: Source) {
        match why {
            Ignored::Command => {
                let name = op.command_name().unwrap_or("?");
                let ns =
                    op.o.and_then(|o| o.get_str(name).ok())
                        .map_or_else(|| op.ns.to_string(), |c| format!("{}.{c}", op.db()));
                self.push(
                    LintSeverity::Info,
                    "index-build-skipped",
                    Some(op.ts),
                    &ns,
                    format!("`{name}` entries are skipped by {} (the server rebuilds this state itself)", self.restore_name),
                );
            }
            Ignored::Namespace => self.push(
                LintSeverity::Info,
                "ignored-namespace",
                Some(op.ts),
                op.ns,
                format!(
                    "entries on `{}` are skipped by mongorestore (server-internal namespace)",
                    op.ns
                ),
            ),
            Ignored::OpType => {}
        }
    }

    /// A transaction committed.
    pub fn committed(&mut self, at: Ts, first: Ts, parts_from: &[Source], src: Source) {
        if self.second_run && src == Source::Slice && parts_from.contains(&Source::BackupOplog) {
            self.push(
                LintSeverity::Warning,
                "txn-spans-backup-end",
                Some(at),
                "",
                format!(
                    "the transaction committed at {at} began at {first}, inside the backup's own oplog: mongorestore replays that \
                     oplog in a separate run (step 2), so the parts there are not applied"
                ),
            );
        }
    }

    /// What a second mongorestore run's index catalog holds, and the `collMod` of an
    /// index it does not hold: mongo-tools `common/idx/index_catalog.go`
    /// `GetIndexByIndexMod` fails the replay with `cannot find index in indexCatalog
    /// for collMod`.
    fn second_run_catalog(&mut self, op: &Entry<'_>, name: &str, at: Ts) {
        let Some(o) = op.o else { return };
        let coll = o.get_str(name).unwrap_or("");
        let ns = format!("{}.{coll}", op.db());
        let mut remember = |spec: &bson::RawDocument| {
            if let Ok(n) = spec.get_str("name") {
                self.slice_indexes
                    .insert((ns.clone(), n.as_bytes().to_vec()));
            }
            if let Ok(k) = spec.get_document("key") {
                self.slice_indexes
                    .insert((ns.clone(), k.as_bytes().to_vec()));
            }
        };
        match name {
            "createIndexes" => remember(o),
            "commitIndexBuild" => {
                if let Ok(specs) = o.get_array("indexes") {
                    for s in specs.into_iter().flatten() {
                        if let RawBsonRef::Document(d) = s {
                            remember(d);
                        }
                    }
                }
            }
            "collMod" if self.second_run => {
                let Ok(ix) = o.get_document("index") else {
                    return;
                };
                let key = match (ix.get_str("name"), ix.get_document("keyPattern")) {
                    (Ok(n), _) => n.as_bytes().to_vec(),
                    (_, Ok(k)) => k.as_bytes().to_vec(),
                    _ => return,
                };
                if !self.slice_indexes.contains(&(ns.clone(), key)) {
                    let msg = format!(
                        "a collMod of an index of `{ns}` made before the backup's end: the slice is replayed by a second \
                         mongorestore run, whose index catalog does not have that index, and it stops with `cannot find \
                         index in indexCatalog for collMod`; restore from a directory backup (one run), choose a limit \
                         before it, or --skip it"
                    );
                    self.push(
                        LintSeverity::Error,
                        "collmod-index-second-run",
                        Some(at),
                        &ns,
                        msg,
                    );
                }
            }
            _ => {}
        }
    }

    /// A `commitTransaction` with none of its transaction's parts walked before it:
    /// its prepare is older than the first entry replayed (mongo-tools
    /// `mongodump/oplog_dump.go` starts the backup's oplog at the oldest open
    /// transaction; a backup made otherwise, or an oplog given without it, misses
    /// it), so its writes are in neither the backup's data nor the replay. mongorestore applies nothing for it and says
    /// nothing (mongo-tools `common/txn/buffer.go`).
    pub fn commit_without_parts(&mut self, commit: &Entry<'_>, _src: Source) {
        self.push(
            LintSeverity::Warning,
            "txn-commit-without-parts",
            Some(commit.ts),
            "",
            format!(
                "the transaction committed at {} ({}) has none of its parts in the backup's oplog or the slice: it was \
                 prepared before the backup's oplog begins, and its writes are not restored",
                commit.ts,
                crate::engine::walk::txn_label(commit)
            ),
        );
    }

    /// A prepared transaction open at a cluster's limit, decided by another entry
    /// (this member's own commit entry at or after the limit, or another
    /// participant's): rule R2 of shared/reference/sharded-pitr.md.
    pub fn prepared_decided(&mut self, t: &OpenTxn, d: Option<TxnDecision>, limit: Ts) {
        let (code, what) = match d {
            Some(TxnDecision::Commit(ct)) if ct < limit => (
                "txn-prepared-included",
                format!("its commitTimestamp {ct} is before the limit: applied, as on every participant"),
            ),
            Some(TxnDecision::Commit(ct)) => (
                "txn-prepared-excluded",
                format!("its commitTimestamp {ct} is at or after the limit: left out, as on every participant"),
            ),
            Some(TxnDecision::Abort) => ("txn-prepared-excluded", "it was aborted: left out".to_string()),
            None => return,
        };
        self.push(
            LintSeverity::Info,
            code,
            Some(t.first),
            &t.namespaces.join(","),
            format!(
                "a prepared (cross-shard) transaction ({}, prepared at {}, writing {}) commits on this member at or after \
                 the limit {limit}; {what}",
                t.label,
                t.first,
                if t.namespaces.is_empty() { "nothing".to_string() } else { t.namespaces.join(", ") }
            ),
        );
    }

    /// Transactions with parts before the limit and no commit before it.
    pub fn open_at_end(&mut self, open: &[OpenTxn], limit: Ts) {
        for t in open {
            self.push(
                LintSeverity::Warning,
                "txn-open-at-limit",
                Some(t.first),
                &t.namespaces.join(","),
                format!(
                    "a {}transaction ({} from {} to {}, writing {}) does not commit before the limit {limit}: none of it is \
                     replayed",
                    if t.prepared { "prepared " } else { "" },
                    crate::table::counted(t.parts as u64, "part", "parts"),
                    t.first,
                    t.last,
                    if t.namespaces.is_empty() { "nothing".to_string() } else { t.namespaces.join(", ") }
                ),
            );
        }
    }

    /// The items: errors first, then warnings, then info; by ts within each.
    pub fn finish(mut self) -> Vec<LintItem> {
        self.items
            .sort_by(|a, b| b.severity.cmp(&a.severity).then(a.ts.cmp(&b.ts)));
        self.items
    }
}

/// A `u` entry that newer servers refuse (`UpdateModification::parseFromOplogEntry`
/// from 6.1): neither a replacement (its `o` has `_id`) nor a `$v: 2` diff.
fn is_classic_update(op: &Entry<'_>) -> bool {
    let Some(o) = op.o else { return false };
    if matches!(o.get("_id"), Ok(Some(_))) {
        return false;
    }
    let v2 = match o.get("$v") {
        Ok(Some(RawBsonRef::Int32(2))) | Ok(Some(RawBsonRef::Int64(2))) => true,
        Ok(Some(RawBsonRef::Double(d))) => d == 2.0,
        _ => false,
    };
    !v2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::walk::Walker;
    use crate::plan::expect::Seed;
    use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, Timestamp};

    use crate::plan::build::Both;

    fn ts(t: u32, i: u32) -> Bson {
        Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    /// Lints as the two-run restore of an archive does (the slice in a second run).
    fn lint(docs: &[(Document, Source)]) -> Vec<LintItem> {
        lint_with(&Rules::newest(), None, docs, true)
    }

    /// Lints `docs` with the rules of `rules`; `ids`: the backup's `_id`s of
    /// `shop.orders` when counting.
    fn lint_with(
        rules: &Rules,
        ids: Option<&[i32]>,
        docs: &[(Document, Source)],
        second_run: bool,
    ) -> Vec<LintItem> {
        let mut l = Linter::new(rules);
        l.set_second_run(second_run);
        let mut m = Model::new(
            vec![Seed {
                ns: "shop.orders".into(),
                documents: ids.map_or(0, |i| i.len() as u64),
                no_id: 0,
                ids: ids.map(|ids| {
                    ids.iter()
                        .map(|i| {
                            let d = bson::RawDocumentBuf::from_document(&doc! {"_id": *i}).unwrap();
                            crate::plan::expect::id_key(d.get("_id").unwrap().unwrap())
                        })
                        .collect()
                }),
            }],
            ids.is_some(),
        );
        let mut a = Walker::new(rules.mongorestore.clone());
        for (d, src) in docs {
            let raw = bson::RawDocumentBuf::from_document(d).unwrap();
            let e = Entry::parse(&raw).unwrap();
            l.entry(&e, *src);
            a.feed(
                &e,
                *src,
                &mut Both {
                    lint: &mut l,
                    model: &mut m,
                },
            )
            .unwrap();
        }
        l.open_at_end(&a.open_transactions(), Ts::new(99, 0));
        l.finish()
    }

    fn rules(restore: &str, mongod: &str) -> Rules {
        use crate::plan::versions::{VersionHints, VersionSource};
        Rules::from_hints(&VersionHints {
            mongorestore: Some((restore.into(), VersionSource::Flag)),
            mongod: Some((mongod.into(), VersionSource::Flag)),
            backup_server: None,
        })
        .unwrap()
    }

    /// A second mongorestore run knows only the indexes made in the slice; one run
    /// knows the backup's too (mongo-tools `index_catalog.go` `GetIndexByIndexMod`).
    #[test]
    fn collmod_of_an_earlier_index_fails_only_in_a_second_run() {
        let s = Source::Slice;
        let docs = [
            (
                doc! { "ts": ts(1, 1), "op": "c", "ns": "shop.$cmd", "o": { "createIndexes": "orders", "v": 2, "key": { "b": 1 }, "name": "b_1" } },
                s,
            ),
            (
                doc! { "ts": ts(1, 2), "op": "c", "ns": "shop.$cmd", "o": { "collMod": "orders", "index": { "name": "b_1", "expireAfterSeconds": 60 } } },
                s,
            ),
            (
                doc! { "ts": ts(1, 3), "op": "c", "ns": "shop.$cmd", "o": { "collMod": "orders", "index": { "name": "created_1", "expireAfterSeconds": 60 } } },
                s,
            ),
            (
                doc! { "ts": ts(1, 4), "op": "c", "ns": "shop.$cmd", "o": { "collMod": "orders", "index": { "keyPattern": { "b": 1 }, "hidden": true } } },
                s,
            ),
        ];
        let two = lint_with(&Rules::newest(), None, &docs, true);
        let errors: Vec<&LintItem> = two
            .iter()
            .filter(|i| i.code == "collmod-index-second-run")
            .collect();
        assert_eq!(errors.len(), 1, "{two:?}");
        assert_eq!(errors[0].ts, Some(Ts::new(1, 3)));
        let one = lint_with(&Rules::newest(), None, &docs, false);
        assert!(
            one.iter().all(|i| i.code != "collmod-index-second-run"),
            "{one:?}"
        );
    }

    /// What mongorestore 100.11.0 refuses and 100.18.0 skips, per mongo-tools' history.
    #[test]
    fn the_mongorestore_release_decides_what_is_skipped_or_refused() {
        let s = Source::Slice;
        let docs = [
            (
                doc! { "ts": ts(1, 1), "op": "c", "ns": "shop.$cmd", "o": { "setMultikeyMetadata": "orders", "multikeyPaths": [] } },
                s,
            ),
            (
                doc! { "ts": ts(1, 2), "op": "cu", "ns": "shop.orders", "o": { "_id": 1 } },
                s,
            ),
            (
                doc! { "ts": ts(1, 3), "op": "c", "ns": "shop.$cmd", "o": { "dropIdent": "collection-7" } },
                s,
            ),
        ];
        let old = lint_with(&rules("100.11.0", "7.0.14"), None, &docs, false);
        let codes: Vec<(&str, &str)> = old
            .iter()
            .map(|i| (i.code.as_str(), i.severity.as_str()))
            .collect();
        assert!(codes.contains(&("unknown-command", "error")), "{codes:?}");
        assert!(codes.contains(&("op-refused", "error")), "{codes:?}");
        let msg = old.iter().find(|i| i.code == "unknown-command").unwrap();
        assert!(
            msg.message.contains("mongorestore 100.11.0")
                && msg.message.contains("100.16.0 and later skip it"),
            "{}",
            msg.message
        );
        let new = lint_with(&rules("100.18.0", "7.0.14"), None, &docs, false);
        assert!(
            new.iter().all(|i| i.severity != LintSeverity::Error),
            "{new:?}"
        );
        // 100.17.0 knows setMultikeyMetadata and cu but not dropIdent.
        let mid = lint_with(&rules("100.17.0", "7.0.14"), None, &docs, false);
        let errors: Vec<&str> = mid
            .iter()
            .filter(|i| i.severity == LintSeverity::Error)
            .map(|i| i.message.as_str())
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("dropIdent"), "{errors:?}");
    }

    /// SERVER-50301 (6.1): classic updates are refused; 8.1: no upsert of a
    /// missing document.
    #[test]
    fn the_spare_release_decides_which_updates_apply() {
        let s = Source::Slice;
        let docs = [
            (
                doc! { "ts": ts(1, 1), "op": "u", "ns": "shop.orders", "o": { "$set": { "x": 1 } }, "o2": { "_id": 1 } },
                s,
            ),
            (
                doc! { "ts": ts(1, 2), "op": "u", "ns": "shop.orders", "o": { "$v": 2, "diff": { "u": { "x": 2 } } }, "o2": { "_id": 2 } },
                s,
            ),
            (
                doc! { "ts": ts(1, 3), "op": "u", "ns": "shop.orders", "o": { "_id": 1, "x": 3 }, "o2": { "_id": 1 } },
                s,
            ),
        ];
        let errors = |r: &Rules| -> Vec<String> {
            lint_with(r, Some(&[1]), &docs, false)
                .into_iter()
                .filter(|i| i.severity == LintSeverity::Error)
                .map(|i| i.code)
                .collect()
        };
        assert_eq!(errors(&rules("100.18.0", "6.0.19")), Vec::<String>::new());
        // _id 2 is not in the backup: from 6.2 applyOps no longer upserts it.
        assert_eq!(
            errors(&rules("100.18.0", "7.0.14")),
            vec!["classic-update-refused", "update-of-missing-document"]
        );
        assert_eq!(
            errors(&rules("100.18.0", "8.0.4")),
            vec!["update-of-missing-document"]
        );
    }

    fn codes(items: &[LintItem]) -> Vec<(&str, &str, u64)> {
        items
            .iter()
            .map(|i| (i.code.as_str(), i.severity.as_str(), i.count))
            .collect()
    }

    #[test]
    fn unknown_commands_renames_and_index_builds() {
        let s = Source::Slice;
        let uuid = Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![3; 16],
        };
        let items = lint(&[
            (
                doc! { "ts": ts(1, 1), "op": "c", "ns": "shop.$cmd", "ui": uuid.clone(), "o": { "createIndexes": "orders", "v": 2, "key": { "a": 1 }, "name": "a_1" } },
                s,
            ),
            (
                doc! { "ts": ts(1, 2), "op": "c", "ns": "shop.$cmd", "o": { "createIndexes": "orders", "v": 2, "key": { "b": 1 }, "name": "b_1" } },
                s,
            ),
            (
                doc! { "ts": ts(1, 3), "op": "c", "ns": "shop.$cmd", "o": { "startIndexBuild": "orders" } },
                s,
            ),
            (
                doc! { "ts": ts(1, 4), "op": "c", "ns": "shop.$cmd", "o": { "renameCollection": "shop.orders", "to": "arch.orders", "dropTarget": uuid.clone() } },
                s,
            ),
            (
                doc! { "ts": ts(1, 5), "op": "c", "ns": "shop.$cmd", "o": { "setFeatureCompatibilityVersion": "7.0" } },
                s,
            ),
            (
                doc! { "ts": ts(1, 6), "op": "i", "ns": "shop.nowhere", "o": { "_id": 1 } },
                s,
            ),
            (
                doc! { "ts": ts(1, 7), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [ { "op": "c", "ns": "shop.$cmd", "o": { "weirdCmd": 1 } } ] } },
                s,
            ),
        ]);
        assert_eq!(
            codes(&items),
            vec![
                ("unknown-command", "error", 2),
                ("rename", "warning", 1),
                ("missing-namespace", "warning", 1),
                ("ui-stripped", "info", 1),
                ("index-build-deferred", "info", 2),
                ("index-build-skipped", "info", 1),
            ]
        );
        assert!(
            items[0].message.contains("setFeatureCompatibilityVersion"),
            "{}",
            items[0].message
        );
        assert!(
            items[1].message.contains("UUID") && items[1].message.contains("cross-database"),
            "{}",
            items[1].message
        );
    }

    fn txn(t: u32, n: i64, o: Document) -> Document {
        doc! { "ts": ts(t, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": 1 }, "txnNumber": n, "o": o }
    }

    #[test]
    fn transactions_across_the_backup_end_and_the_limit() {
        let items = lint(&[
            (
                txn(
                    1,
                    1,
                    doc! { "applyOps": [ { "op": "i", "ns": "shop.orders", "o": { "_id": 1 } } ], "partialTxn": true },
                ),
                Source::BackupOplog,
            ),
            (
                txn(
                    2,
                    1,
                    doc! { "applyOps": [ { "op": "i", "ns": "shop.orders", "o": { "_id": 2 } } ] },
                ),
                Source::Slice,
            ),
            (
                txn(
                    3,
                    2,
                    doc! { "applyOps": [ { "op": "d", "ns": "shop.orders", "o": { "_id": 2 } } ], "partialTxn": true },
                ),
                Source::Slice,
            ),
            // A commitTransaction without a session is not a transaction to mongorestore.
            (
                doc! { "ts": ts(4, 1), "op": "c", "ns": "admin.$cmd", "o": { "commitTransaction": 1 } },
                Source::Slice,
            ),
        ]);
        assert_eq!(
            codes(&items),
            vec![
                ("unknown-command", "error", 1),
                ("txn-spans-backup-end", "warning", 1),
                ("txn-open-at-limit", "warning", 1)
            ]
        );
        assert!(
            items[2]
                .message
                .contains("does not commit before the limit 99:0"),
            "{}",
            items[2].message
        );
        assert_eq!(items[2].ns, "shop.orders");
    }

    #[test]
    fn known_list_matches_mongo_tools() {
        use crate::plan::versions::KNOWN_COMMANDS;
        assert_eq!(KNOWN_COMMANDS.len(), 17);
        assert!(!KNOWN_COMMANDS.contains(&"commitTransaction"));
        let _ = Op::Noop;
    }
}
