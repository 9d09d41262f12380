//! The walk over the oplog: what an oplog does, in the order it does it. `applyOps`
//! is unpacked op by op; transactions are buffered per (lsid, txnNumber) and
//! applied at their commit (the final `applyOps` of an unprepared transaction, or
//! `commitTransaction`), an abort discards them. The one place this is decided: the
//! embedded engine's replica ([`super::replica`]), the plan's expected counts and its
//! lint all walk through here.
//!
//! Mirrors mongo-tools `mongorestore/oplog.go` (`HandleOp`, `HandleNonTxnOp`,
//! `HandleTxnOp`) and `common/txn`, which follow the server's own grouping
//! (`src/mongo/db/repl/transaction_oplog_application.cpp`). What is skipped (op
//! types, namespaces, commands) is the caller's [`WalkRules`]: mongorestore's skips
//! depend on its release (`plan::versions::RestoreRules`). The limit is the caller's
//! business too: feed only entries with `ts < limit`.

use std::collections::HashMap;

use bson::RawDocumentBuf;
use serde::{Deserialize, Serialize};

use crate::oplog::{Entry, EntryError, Ts};

/// What the walk leaves out, and how it tells transactions apart.
pub trait WalkRules: Send {
    /// Operations on this namespace are skipped.
    fn ignores_namespace(&self, ns: &str) -> bool;
    /// Operations of this op type (`n`, ...) are skipped.
    fn ignores_op(&self, op: &str) -> bool;
    /// Commands of this name are skipped.
    fn ignores_command(&self, name: &str) -> bool;
    /// `multiOpType: 1` entries (the vectored inserts of one retryable write, which
    /// carry `lsid`/`txnNumber`) are not taken for a transaction.
    fn knows_multi_op_type(&self) -> bool;
    /// An operation inside a committing transaction on this namespace is skipped.
    /// mongorestore checks no namespace there (`HandleNonTxnOp`); only a config
    /// server's own replay skips some (`RestoreRules::config_server`).
    fn ignores_in_transaction(&self, _ns: &str) -> bool {
        false
    }
}

/// Where an entry comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The backup's own `oplog.bson` (replayed by the backup restore, step 2).
    BackupOplog,
    /// The slice pitr wrote (replayed by step 3).
    Slice,
}

/// Why mongorestore skips an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// `__mdb_internal*`, or `config.*` outside the collections it keeps.
    Namespace,
    /// `n` or record-id bookkeeping.
    OpType,
    /// `startIndexBuild`, `abortIndexBuild`, and per release `setMultikeyMetadata`,
    /// `dropIdent`.
    Command,
}

/// A transaction that never committed before the end of the input.
#[derive(Clone, Debug)]
pub struct OpenTxn {
    /// Its [`txn_key`]: the same on every participant of a cross-shard transaction
    /// (the router sends each shard the client's `lsid` and `txnNumber`).
    pub key: Vec<u8>,
    /// `lsid.id` and `txnNumber`, for people.
    pub label: String,
    pub first: Ts,
    pub last: Ts,
    pub parts: usize,
    pub prepared: bool,
    /// Namespaces its operations write, sorted.
    pub namespaces: Vec<String>,
}

/// Receives what the replay does.
pub trait Visitor {
    /// One operation applied at `at` (a transaction's commit ts for its operations).
    fn applied(&mut self, op: &Entry<'_>, at: Ts, src: Source, in_txn: bool);
    /// One operation mongorestore skips.
    fn ignored(&mut self, _op: &Entry<'_>, _why: Ignored, _src: Source) {}
    /// A transaction committed at `at`; `parts_from` lists where its parts came from.
    fn committed(&mut self, _at: Ts, _first: Ts, _parts_from: &[Source], _src: Source) {}
    /// A `commitTransaction` whose transaction has no part in the input (its prepare
    /// came before the first entry walked): nothing is applied, as mongorestore
    /// applies nothing (mongo-tools `common/txn/buffer.go`).
    fn commit_without_parts(&mut self, _commit: &Entry<'_>, _src: Source) {}
}

/// How a cross-shard (prepared) transaction was decided, from any participant's
/// `commitTransaction` or `abortTransaction` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnDecision {
    /// Committed at this `commitTimestamp` (the same on every participant: the
    /// coordinator chooses it, server `transaction_coordinator_util.cpp`).
    Commit(Ts),
    Abort,
}

struct Buffered {
    parts: Vec<(RawDocumentBuf, Source)>,
    prepared: bool,
}

/// The transaction buffer and the routing; see the module documentation.
pub struct Walker {
    txns: HashMap<Vec<u8>, Buffered>,
    rules: Box<dyn WalkRules>,
}

/// The transaction key (lsid bytes + txnNumber) when mongorestore treats `e` as a
/// transaction entry: see [`Entry::transaction_key`].
pub fn txn_key(e: &Entry<'_>) -> Option<Vec<u8>> {
    e.transaction_key()
}

impl Walker {
    /// [`txn_key`] as the rules decide it: before 100.10.0 mongorestore took
    /// `multiOpType: 1` vectored inserts for a transaction too.
    fn txn_key(&self, e: &Entry<'_>) -> Option<Vec<u8>> {
        match (e.multi_op_type, self.rules.knows_multi_op_type()) {
            (Some(1), false) => {
                let mut plain = *e;
                plain.multi_op_type = None;
                plain.transaction_key()
            }
            _ => e.transaction_key(),
        }
    }
}

/// `lsid <id as hex>, txnNumber N` of a transaction entry, with `, txnUUID <hex>`
/// for an internal transaction (6.0+ retryable writes and sharding DDL run as
/// transactions on a child session that shares its parent's `lsid.id` and differs
/// by `lsid.txnUUID`): the cluster matches members' transactions by this label, so
/// two such children must not read as one.
pub fn txn_label(e: &Entry<'_>) -> String {
    session_label(e.lsid, e.txn_number)
}

/// [`txn_label`] of a session document (`lsid`) and transaction number, wherever
/// they were read (a participant's entry, the coordinator's document).
pub fn session_label(lsid: Option<&bson::RawDocument>, txn_number: Option<i64>) -> String {
    let hex = |field: &str| {
        lsid.and_then(|l| l.get_binary(field).ok()).map(|b| {
            b.bytes
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect::<String>()
        })
    };
    let id = hex("id").unwrap_or_else(|| "?".into());
    let child = hex("txnUUID").map_or_else(String::new, |u| format!(", txnUUID {u}"));
    format!("lsid {id}{child}, txnNumber {}", txn_number.unwrap_or(-1))
}

impl Walker {
    /// Walks entries, skipping what `rules` say.
    pub fn new(rules: impl WalkRules + 'static) -> Walker {
        Walker {
            txns: HashMap::new(),
            rules: Box::new(rules),
        }
    }

    /// Applies one top-level entry.
    pub fn feed(
        &mut self,
        e: &Entry<'_>,
        src: Source,
        v: &mut impl Visitor,
    ) -> Result<(), EntryError> {
        self.handle_op(e, src, None, v)
    }

    /// `HandleOp`: skips, then transactions, then everything else. `txn_at` is the
    /// commit ts when `e` sits inside a committing transaction.
    fn handle_op(
        &mut self,
        e: &Entry<'_>,
        src: Source,
        txn_at: Option<Ts>,
        v: &mut impl Visitor,
    ) -> Result<(), EntryError> {
        if self.rules.ignores_namespace(e.ns) {
            v.ignored(e, Ignored::Namespace, src);
            return Ok(());
        }
        if self.rules.ignores_op(e.op.as_str()) {
            v.ignored(e, Ignored::OpType, src);
            return Ok(());
        }
        if e.command_name()
            .is_some_and(|c| self.rules.ignores_command(c))
        {
            v.ignored(e, Ignored::Command, src);
            return Ok(());
        }
        // Only top-level entries carry a session; nested ones inherit it from their
        // parent in our view, but mongorestore reads their own fields (none).
        if e.depth == 0 && txn_at.is_none() {
            if let Some(key) = self.txn_key(e) {
                return self.handle_txn(e, key, src, v);
            }
        }
        self.non_txn(e, src, txn_at, v)
    }

    /// `HandleNonTxnOp`: an `applyOps` is walked op by op through `HandleOp`.
    fn non_txn(
        &mut self,
        e: &Entry<'_>,
        src: Source,
        txn_at: Option<Ts>,
        v: &mut impl Visitor,
    ) -> Result<(), EntryError> {
        match e.apply_ops() {
            Some(ops) => {
                for inner in ops? {
                    self.handle_op(&inner?, src, txn_at, v)?;
                }
                Ok(())
            }
            None => {
                v.applied(e, txn_at.unwrap_or(e.ts), src, txn_at.is_some());
                Ok(())
            }
        }
    }

    fn handle_txn(
        &mut self,
        e: &Entry<'_>,
        key: Vec<u8>,
        src: Source,
        v: &mut impl Visitor,
    ) -> Result<(), EntryError> {
        let name = e.command_name().unwrap_or("");
        if name == "abortTransaction" {
            self.txns.remove(&key);
            return Ok(());
        }
        let is_data = name == "applyOps";
        let partial = e.o_flag("partialTxn");
        let prepare = e.o_flag("prepare");
        let buf = self.txns.entry(key.clone()).or_insert_with(|| Buffered {
            parts: Vec::new(),
            prepared: false,
        });
        buf.prepared |= prepare;
        if is_data {
            buf.parts.push((
                RawDocumentBuf::from_bytes(e.raw.as_bytes().to_vec()).map_err(EntryError::from)?,
                src,
            ));
        }
        let commit = name == "commitTransaction" || (is_data && !partial && !prepare);
        if !commit {
            return Ok(());
        }
        match self.txns.remove(&key) {
            Some(buf) if !buf.parts.is_empty() => self.apply_buffer(buf, e.ts, src, v),
            _ => {
                if name == "commitTransaction" {
                    v.commit_without_parts(e, src);
                }
                Ok(())
            }
        }
    }

    /// Applies a committed transaction's parts at `at`.
    fn apply_buffer(
        &mut self,
        buf: Buffered,
        at: Ts,
        src: Source,
        v: &mut impl Visitor,
    ) -> Result<(), EntryError> {
        let first = buf
            .parts
            .first()
            .and_then(|(raw, _)| Entry::parse(raw).ok())
            .map_or(at, |p| p.ts);
        let sources: Vec<Source> = buf.parts.iter().map(|(_, s)| *s).collect();
        for (raw, psrc) in &buf.parts {
            let part = Entry::parse(raw)?;
            if let Some(ops) = part.apply_ops() {
                for inner in ops? {
                    // The buffer holds the inner operations; each goes to HandleNonTxnOp.
                    let inner = inner?;
                    if self.rules.ignores_in_transaction(inner.ns) {
                        v.ignored(&inner, Ignored::Namespace, *psrc);
                        continue;
                    }
                    self.non_txn(&inner, *psrc, Some(at), v)?;
                }
            }
        }
        v.committed(at, first, &sources, src);
        Ok(())
    }

    /// Decides the prepared transactions still open at the end of the walk (a
    /// cluster restore at one limit `L`, rule R2 of shared/reference/sharded-pitr.md):
    /// one whose `commitTimestamp` is before `limit` is applied at it, although this
    /// member's own `commitTransaction` entry is at or after `limit`; one aborted, or
    /// committed at or after `limit`, is let go (in on no participant). One with no
    /// decision in `decided` stays open ([`Walker::open_transactions`]). Returns the
    /// outcome of each prepared transaction that was open.
    pub fn decide_prepared(
        &mut self,
        decided: &HashMap<Vec<u8>, TxnDecision>,
        limit: Ts,
        v: &mut impl Visitor,
    ) -> Result<Vec<(OpenTxn, Option<TxnDecision>)>, EntryError> {
        let open: Vec<OpenTxn> = self
            .open_transactions()
            .into_iter()
            .filter(|t| t.prepared)
            .collect();
        let mut out = Vec::new();
        for t in open {
            let d = decided.get(&t.key).copied();
            match d {
                Some(TxnDecision::Commit(ct)) if ct < limit => {
                    let buf = self.txns.remove(&t.key).expect("listed as open");
                    self.apply_buffer(buf, ct, Source::Slice, v)?;
                }
                Some(_) => {
                    self.txns.remove(&t.key);
                }
                None => {}
            }
            out.push((t, d));
        }
        Ok(out)
    }

    /// Transactions still buffered (never committed), oldest first.
    pub fn open_transactions(&self) -> Vec<OpenTxn> {
        let mut out: Vec<OpenTxn> = self
            .txns
            .iter()
            .filter(|(_, b)| !b.parts.is_empty())
            .map(|(key, b)| {
                let mut namespaces = Vec::new();
                let mut ts = Vec::new();
                for (raw, _) in &b.parts {
                    if let Ok(p) = Entry::parse(raw) {
                        ts.push(p.ts);
                        let _ = p.for_each_leaf(&mut |l: &Entry<'_>| -> Result<(), EntryError> {
                            if !l.ns.is_empty() && !namespaces.iter().any(|n: &String| n == l.ns) {
                                namespaces.push(l.ns.to_string());
                            }
                            Ok(())
                        });
                    }
                }
                namespaces.sort();
                OpenTxn {
                    key: key.clone(),
                    label: b
                        .parts
                        .first()
                        .and_then(|(raw, _)| Entry::parse(raw).ok())
                        .map_or_else(String::new, |p| txn_label(&p)),
                    first: ts.iter().copied().min().unwrap_or(Ts::ZERO),
                    last: ts.iter().copied().max().unwrap_or(Ts::ZERO),
                    parts: b.parts.len(),
                    prepared: b.prepared,
                    namespaces,
                }
            })
            .collect();
        out.sort_by_key(|t| t.first);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, Timestamp};

    #[derive(Default)]
    struct Log {
        applied: Vec<(String, String, Ts, bool)>,
        ignored: Vec<(String, Ignored)>,
        commits: Vec<(Ts, Ts, Vec<Source>)>,
        without_parts: Vec<Ts>,
    }

    impl Visitor for Log {
        fn applied(&mut self, op: &Entry<'_>, at: Ts, _src: Source, in_txn: bool) {
            self.applied
                .push((op.op.as_str().to_string(), op.ns.to_string(), at, in_txn));
        }
        fn ignored(&mut self, op: &Entry<'_>, why: Ignored, _src: Source) {
            self.ignored.push((op.ns.to_string(), why));
        }
        fn committed(&mut self, at: Ts, first: Ts, parts_from: &[Source], _src: Source) {
            self.commits.push((at, first, parts_from.to_vec()));
        }
        fn commit_without_parts(&mut self, commit: &Entry<'_>, _src: Source) {
            self.without_parts.push(commit.ts);
        }
    }

    fn ts(t: u32, i: u32) -> Bson {
        Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    /// Skips no-ops, `config.system.sessions`, `__mdb_internal*` and
    /// `startIndexBuild`: enough to see each kind of skip routed.
    struct Rules;

    impl WalkRules for Rules {
        fn ignores_namespace(&self, ns: &str) -> bool {
            ns == "config.system.sessions" || ns.starts_with("__mdb_internal")
        }
        fn ignores_op(&self, op: &str) -> bool {
            op == "n"
        }
        fn ignores_command(&self, name: &str) -> bool {
            name == "startIndexBuild"
        }
        fn knows_multi_op_type(&self) -> bool {
            true
        }
    }

    fn run(docs: &[Document]) -> (Log, Walker) {
        let mut a = Walker::new(Rules);
        let mut log = Log::default();
        for d in docs {
            let raw = bson::RawDocumentBuf::from_document(d).unwrap();
            a.feed(&Entry::parse(&raw).unwrap(), Source::Slice, &mut log)
                .unwrap();
        }
        (log, a)
    }

    fn part(t: u32, txn: i64, ns: &str, extra: Document) -> Document {
        let mut o = doc! { "applyOps": [ { "op": "i", "ns": ns, "o": { "_id": t as i64 } } ] };
        o.extend(extra);
        doc! { "ts": ts(t, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] } }, "txnNumber": txn, "o": o }
    }

    #[test]
    fn skips_are_routed_by_kind_also_inside_apply_ops() {
        let (log, _) = run(&[
            doc! { "ts": ts(1, 1), "op": "n", "ns": "", "o": { "msg": "noop" } },
            doc! { "ts": ts(1, 2), "op": "d", "ns": "config.system.sessions", "o": { "_id": 1 } },
            doc! { "ts": ts(1, 3), "op": "i", "ns": "config.settings", "o": { "_id": 1 } },
            doc! { "ts": ts(1, 4), "op": "c", "ns": "shop.$cmd", "o": { "startIndexBuild": "orders" } },
            doc! { "ts": ts(1, 5), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [
                { "op": "d", "ns": "shop.orders", "o": { "_id": 1 } },
                { "op": "d", "ns": "__mdb_internal_x.y", "o": { "_id": 1 } },
            ] } },
        ]);
        assert_eq!(
            log.applied,
            vec![
                ("i".into(), "config.settings".into(), Ts::new(1, 3), false),
                ("d".into(), "shop.orders".into(), Ts::new(1, 5), false),
            ]
        );
        assert_eq!(
            log.ignored.iter().map(|i| i.1).collect::<Vec<_>>(),
            vec![
                Ignored::OpType,
                Ignored::Namespace,
                Ignored::Command,
                Ignored::Namespace
            ]
        );
    }

    #[test]
    fn transactions_apply_at_commit_and_aborts_vanish() {
        let (log, a) = run(&[
            part(10, 1, "shop.a", doc! { "partialTxn": true }),
            part(11, 1, "shop.b", doc! {}),
            part(12, 2, "shop.c", doc! { "prepare": true }),
            doc! { "ts": ts(13, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] } }, "txnNumber": 2i64, "o": { "abortTransaction": 1 } },
            part(14, 3, "shop.d", doc! { "partialTxn": true }),
        ]);
        assert_eq!(
            log.applied,
            vec![
                ("i".into(), "shop.a".into(), Ts::new(11, 1), true),
                ("i".into(), "shop.b".into(), Ts::new(11, 1), true),
            ]
        );
        assert_eq!(
            log.commits,
            vec![(
                Ts::new(11, 1),
                Ts::new(10, 1),
                vec![Source::Slice, Source::Slice]
            )]
        );
        let open = a.open_transactions();
        assert_eq!(open.len(), 1);
        assert_eq!(
            (open[0].first, open[0].parts, open[0].namespaces.clone()),
            (Ts::new(14, 1), 1, vec!["shop.d".to_string()])
        );
    }

    #[test]
    fn prepared_commit() {
        let (log, _) = run(&[
            part(20, 5, "shop.p", doc! { "prepare": true }),
            doc! { "ts": ts(21, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] } }, "txnNumber": 5i64, "o": { "commitTransaction": 1, "commitTimestamp": ts(20, 9) } },
        ]);
        assert_eq!(
            log.applied,
            vec![("i".into(), "shop.p".into(), Ts::new(21, 1), true)]
        );
    }

    fn commit(t: u32, txn: i64, ct: (u32, u32)) -> Document {
        doc! { "ts": ts(t, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] } }, "txnNumber": txn, "o": { "commitTransaction": 1, "commitTimestamp": ts(ct.0, ct.1) } }
    }

    /// Internal transactions of one parent session differ by `lsid.txnUUID`: their
    /// labels (what the cluster matches members' transactions by) differ too.
    #[test]
    fn child_sessions_have_their_own_label() {
        let label = |child: Option<u8>| {
            let mut lsid =
                doc! { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] } };
            if let Some(c) = child {
                lsid.insert(
                    "txnUUID",
                    Binary {
                        subtype: BinarySubtype::Uuid,
                        bytes: vec![c; 16],
                    },
                );
            }
            let raw = bson::RawDocumentBuf::from_document(&doc! {
            "ts": ts(1, 1), "op": "c", "ns": "admin.$cmd", "lsid": lsid, "txnNumber": 0i64,
            "o": { "commitTransaction": 1, "commitTimestamp": ts(1, 0) } })
            .unwrap();
            txn_label(&Entry::parse(&raw).unwrap())
        };
        assert_eq!(
            label(None),
            format!("lsid {}, txnNumber 0", "01".repeat(16))
        );
        assert_ne!(label(Some(2)), label(Some(3)));
        assert!(label(Some(2)).contains(&format!("txnUUID {}", "02".repeat(16))));
    }

    /// A commit whose prepare was never walked applies nothing, and says so.
    #[test]
    fn a_commit_without_parts_is_reported() {
        let (log, _) = run(&[commit(21, 5, (20, 9))]);
        assert!(log.applied.is_empty());
        assert!(log.commits.is_empty());
        assert_eq!(log.without_parts, vec![Ts::new(21, 1)]);
    }

    /// Prepared transactions open at the end of the walk, decided by a cluster's
    /// table: committed before the limit -> applied at the commitTimestamp;
    /// committed at or after it, or aborted -> let go; undecided -> still open.
    #[test]
    fn prepared_transactions_are_decided_by_commit_timestamp() {
        let (mut log, mut a) = run(&[
            part(20, 5, "shop.in", doc! { "prepare": true }),
            part(21, 6, "shop.late", doc! { "prepare": true }),
            part(22, 7, "shop.aborted", doc! { "prepare": true }),
            part(23, 8, "shop.open", doc! { "prepare": true }),
            part(24, 9, "shop.unprepared", doc! { "partialTxn": true }),
        ]);
        let key = |txn: i64| {
            let raw = bson::RawDocumentBuf::from_document(&part(1, txn, "x.y", doc! {})).unwrap();
            txn_key(&Entry::parse(&raw).unwrap()).unwrap()
        };
        let decided: HashMap<Vec<u8>, TxnDecision> = [
            (key(5), TxnDecision::Commit(Ts::new(29, 1))),
            (key(6), TxnDecision::Commit(Ts::new(30, 0))),
            (key(7), TxnDecision::Abort),
        ]
        .into_iter()
        .collect();
        let out = a
            .decide_prepared(&decided, Ts::new(30, 0), &mut log)
            .unwrap();
        assert_eq!(
            log.applied,
            vec![("i".into(), "shop.in".into(), Ts::new(29, 1), true)]
        );
        let got: Vec<(Vec<String>, Option<TxnDecision>)> =
            out.into_iter().map(|(t, d)| (t.namespaces, d)).collect();
        assert_eq!(got.len(), 4, "the unprepared chain is not decided here");
        assert_eq!(got[3], (vec!["shop.open".to_string()], None));
        let open: Vec<Vec<String>> = a
            .open_transactions()
            .into_iter()
            .map(|t| t.namespaces)
            .collect();
        assert_eq!(
            open,
            vec![
                vec!["shop.open".to_string()],
                vec!["shop.unprepared".to_string()]
            ]
        );
    }
}
