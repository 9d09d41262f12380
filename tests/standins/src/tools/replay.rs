//! mongorestore's `--oplogReplay`, step for step like mongo-tools' `RestoreOplog`:
//! entries are taken in file order; ignored namespaces, no-ops and a few internal
//! entries are skipped before the limit is looked at; the first entry at or past
//! `--oplogLimit` ends the replay (an unsorted file loses what follows); transactions
//! are buffered and applied at their commit; every other entry is sent on its own in
//! an `applyOps` command, with `ui` removed unless `--preserveUUID`; index builds go
//! to a catalog that is built after the replay.

use super::connect::describe;
use bson::{doc, Bson, Document, Timestamp};
use mongodb::Client;
use std::collections::{BTreeMap, HashMap};

/// Commands mongorestore knows how to replay (mongo-tools `knownCommands`); any
/// other command in the oplog is a fatal error.
pub const KNOWN_COMMANDS: &[&str] = &[
    "renameCollection",
    "dropDatabase",
    "applyOps",
    "dbCheck",
    "create",
    "convertToCapped",
    "emptycapped",
    "drop",
    "createIndexes",
    "deleteIndex",
    "deleteIndexes",
    "dropIndex",
    "dropIndexes",
    "collMod",
    "startIndexBuild",
    "abortIndexBuild",
    "commitIndexBuild",
];

/// Commands skipped without being applied (they describe index-build or storage
/// bookkeeping that the target server redoes itself).
pub const SKIPPED_COMMANDS: &[&str] = &[
    "startIndexBuild", // two-phase index builds (4.4+): the build is redone at the end
    "abortIndexBuild", // same
    "setMultikeyMetadata", // storage bookkeeping for multikey indexes (6.0+)
    "dropIdent",       // storage engine identifier cleanup
];

/// Op types skipped: `n` no-ops, and internal bookkeeping that is not a user write.
pub const SKIPPED_OPS: &[&str] = &[
    "n",  // no-op (periodic noop writer, migrations)
    "cd", // container delete (internal)
    "ci", // container insert (internal)
    "cu", // container update (internal)
    "km", // key management (internal)
];

/// Namespaces whose entries are never applied (mongo-tools `shouldIgnoreNamespace`,
/// plus the server's internal `__mdb_internal` collections).
pub fn ignored_namespace(ns: &str) -> bool {
    ns.starts_with("config.cache.")
        || ns == "config.system.sessions"
        || ns == "config.system.indexBuilds"
        || ns.contains("__mdb_internal")
}

/// Index specs to build once the replay is done, per namespace.
#[derive(Debug, Default)]
pub struct IndexCatalog {
    pub specs: BTreeMap<(String, String), Vec<Document>>,
}

impl IndexCatalog {
    pub fn add(&mut self, db: &str, coll: &str, spec: Document) {
        let list = self.specs.entry((db.into(), coll.into())).or_default();
        let name = spec.get_str("name").unwrap_or_default().to_string();
        list.retain(|s| s.get_str("name").unwrap_or_default() != name);
        list.push(spec);
    }
    pub fn drop_collection(&mut self, db: &str, coll: &str) {
        self.specs.remove(&(db.to_string(), coll.to_string()));
    }
    pub fn drop_database(&mut self, db: &str) {
        self.specs.retain(|(d, _), _| d != db);
    }
    pub fn delete(&mut self, db: &str, coll: &str, which: Option<&Bson>) {
        let Some(list) = self.specs.get_mut(&(db.to_string(), coll.to_string())) else {
            return;
        };
        match which {
            Some(Bson::String(s)) if s == "*" => list.clear(),
            Some(Bson::String(s)) => list.retain(|x| x.get_str("name").unwrap_or_default() != s),
            Some(Bson::Document(key)) => {
                list.retain(|x| x.get_document("key").map(|k| k != key).unwrap_or(true))
            }
            _ => {}
        }
    }
}

/// Outcome of a replay, for the log and `PITR_STANDIN_RECORD`.
#[derive(Debug, Default)]
pub struct ReplaySummary {
    pub seen: u64,
    pub applied: u64,
    pub last_applied: Option<Timestamp>,
    pub stopped_at: Option<Timestamp>,
}

enum Step {
    Continue,
    Stop,
}

type TxnId = (Vec<u8>, i64);

pub struct Replayer<'a> {
    pub client: &'a Client,
    pub limit: Option<Timestamp>,
    pub preserve_uuid: bool,
    pub catalog: &'a mut IndexCatalog,
    pub summary: ReplaySummary,
    /// The `fail-midway` / `crash` knobs: act out the fault before this entry.
    pub fault_at: Option<(usize, super::Midway)>,
    txns: HashMap<TxnId, Vec<Document>>,
}

fn ts_of(e: &Document) -> Timestamp {
    match e.get("ts") {
        Some(Bson::Timestamp(t)) => *t,
        _ => Timestamp {
            time: 0,
            increment: 0,
        },
    }
}

fn before_limit(limit: Option<Timestamp>, ts: Timestamp) -> bool {
    match limit {
        None => true,
        Some(l) if l.time == 0 && l.increment == 0 => true,
        Some(l) => (ts.time, ts.increment) < (l.time, l.increment),
    }
}

fn log(msg: impl AsRef<str>) {
    crate::logline::tool_log(msg)
}

impl<'a> Replayer<'a> {
    pub fn new(
        client: &'a Client,
        limit: Option<Timestamp>,
        preserve_uuid: bool,
        catalog: &'a mut IndexCatalog,
    ) -> Self {
        Replayer {
            client,
            limit,
            preserve_uuid,
            catalog,
            summary: ReplaySummary::default(),
            fault_at: None,
            txns: HashMap::new(),
        }
    }

    /// Replay entries in order; stops at the first one at or past the limit.
    pub async fn replay(&mut self, entries: &[Document]) -> Result<(), String> {
        for (n, e) in entries.iter().enumerate() {
            if let Some((at, midway)) = self.fault_at {
                if n == at {
                    midway.act()?;
                }
            }
            self.summary.seen += 1;
            match Box::pin(self.handle_op(e, true)).await? {
                Step::Continue => {}
                Step::Stop => {
                    self.summary.stopped_at = Some(ts_of(e));
                    break;
                }
            }
        }
        Ok(())
    }

    async fn handle_op(&mut self, e: &Document, top: bool) -> Result<Step, String> {
        let ns = e.get_str("ns").unwrap_or_default();
        if ignored_namespace(ns) {
            log(format!("skipping applying the {ns} namespace in applyOps"));
            return Ok(Step::Continue);
        }
        let op = e.get_str("op").unwrap_or_default();
        if SKIPPED_OPS.contains(&op) {
            return Ok(Step::Continue);
        }
        let o = e.get_document("o").ok();
        let cmd_name = o.and_then(|o| o.keys().next().cloned()).unwrap_or_default();
        if op == "c" && SKIPPED_COMMANDS.contains(&cmd_name.as_str()) {
            log(format!("skipping applying the oplog entry {cmd_name}"));
            return Ok(Step::Continue);
        }
        let ts = ts_of(e);
        if !before_limit(self.limit, ts) {
            return Ok(Step::Stop);
        }
        if let Some(txn) = txn_meta(e) {
            self.handle_txn(e, txn)
                .await
                .map_err(|err| format!("error handling transaction oplog entry: {err}"))?;
        } else {
            self.handle_non_txn(e.clone())
                .await
                .map_err(|err| format!("error applying oplog: {err}"))?;
        }
        if top {
            self.summary.last_applied = Some(ts);
        }
        Ok(Step::Continue)
    }

    async fn handle_txn(&mut self, e: &Document, t: TxnMeta) -> Result<(), String> {
        if let Some(Bson::Array(ops)) = e.get_document("o").ok().and_then(|o| o.get("applyOps")) {
            let buf = self.txns.entry(t.id.clone()).or_default();
            for op in ops {
                if let Bson::Document(d) = op {
                    buf.push(d.clone());
                }
            }
        }
        if t.abort {
            self.txns.remove(&t.id);
            return Ok(());
        }
        if !(t.commit || (!t.prepare && !t.partial)) {
            return Ok(());
        }
        let ops = self.txns.remove(&t.id).unwrap_or_default();
        for op in ops {
            self.handle_non_txn(op)
                .await
                .map_err(|err| format!("error applying transaction op: {err}"))?;
        }
        Ok(())
    }

    async fn handle_non_txn(&mut self, mut op: Document) -> Result<(), String> {
        self.summary.applied += 1;
        if !self.preserve_uuid {
            op.remove("ui");
        }
        let ns = op.get_str("ns").unwrap_or_default().to_string();
        let db = ns.split('.').next().unwrap_or_default().to_string();
        if op.get_str("op") == Ok("c") {
            let o = op
                .get_document("o")
                .map_err(|_| format!("Empty object value for op: {op}"))?
                .clone();
            let Some((name, value)) = o.iter().next() else {
                return Err(format!("Empty object value for op: {op}"));
            };
            if !KNOWN_COMMANDS.contains(&name.as_str()) {
                return Err(format!("unknown oplog command name {name}: {op}"));
            }
            let coll = value.as_str().unwrap_or_default().to_string();
            match name.as_str() {
                "createIndexes" => {
                    let mut spec = Document::new();
                    for (k, v) in o.iter().skip(1) {
                        spec.insert(k.clone(), v.clone());
                    }
                    if !spec.contains_key("key") {
                        return Err(format!(
                            "failed to parse IndexDocument from createIndexes in {coll}, {op}"
                        ));
                    }
                    self.catalog.add(&db, &coll, spec);
                    return Ok(());
                }
                "commitIndexBuild" => {
                    let Ok(specs) = o.get_array("indexes") else {
                        return Err(format!(
                            "failed to parse IndexDocument from commitIndexBuild in {coll}, {op}"
                        ));
                    };
                    for s in specs {
                        if let Bson::Document(s) = s {
                            self.catalog.add(&db, &coll, s.clone());
                        }
                    }
                    return Ok(());
                }
                "deleteIndex" | "deleteIndexes" | "dropIndex" | "dropIndexes" => {
                    self.catalog.delete(&db, &coll, o.get("index"));
                    return Ok(());
                }
                "dropDatabase" => self.catalog.drop_database(&db),
                "drop" => self.catalog.drop_collection(&db, &coll),
                "applyOps" => {
                    let Bson::Array(nested) = value else {
                        return Err(format!("unknown format for applyOps: {o}"));
                    };
                    for n in nested {
                        let Bson::Document(n) = n else {
                            return Err(format!("could not unmarshal applyOps command: {n}"));
                        };
                        Box::pin(self.handle_op(n, false)).await.map_err(|err| {
                            format!("error applying nested op from applyOps: {err}")
                        })?;
                    }
                    return Ok(());
                }
                "collMod" if o.contains_key("index") => {
                    // Index changes go to the catalog; the rest is applied.
                    let mut o2 = o.clone();
                    o2.remove("index");
                    if o2.len() == 1 {
                        return Ok(());
                    }
                    op.insert("o", o2);
                }
                _ => {}
            }
        }
        let res = self
            .client
            .database("admin")
            .run_command(doc! {"applyOps": [op]})
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("applyOps: {}", describe(&e))),
        }
    }
}

struct TxnMeta {
    id: TxnId,
    commit: bool,
    abort: bool,
    partial: bool,
    prepare: bool,
}

/// Transaction metadata of an entry (mongo-tools `txn.NewMeta`): `lsid` + `txnNumber`
/// on a command holding `applyOps`, `commitTransaction` or `abortTransaction`.
fn txn_meta(e: &Document) -> Option<TxnMeta> {
    let lsid = e.get_document("lsid").ok()?;
    let txn_number = match e.get("txnNumber")? {
        Bson::Int64(n) => *n,
        Bson::Int32(n) => *n as i64,
        _ => return None,
    };
    if e.get_str("op").ok()? != "c" {
        return None;
    }
    let o = e.get_document("o").ok()?;
    let mut m = TxnMeta {
        id: (bson::to_vec(lsid).ok()?, txn_number),
        commit: false,
        abort: false,
        partial: false,
        prepare: false,
    };
    let mut real = false;
    for k in o.keys() {
        match k.as_str() {
            "applyOps" => real = true,
            "commitTransaction" => {
                real = true;
                m.commit = true
            }
            "abortTransaction" => {
                real = true;
                m.abort = true
            }
            "partialTxn" => m.partial = true,
            "prepare" => m.prepare = true,
            _ => {}
        }
    }
    real.then_some(m)
}

/// Parse an `--oplogLimit` value the way mongo-tools does: `T`, `T:` or `T:I`; more
/// than one `:` is an error; each part must fit an unsigned 32-bit integer.
pub fn parse_oplog_limit(s: &str) -> Result<Timestamp, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() > 2 {
        return Err("too many : characters".into());
    }
    let parse = |what: &str, v: &str| -> Result<u32, String> {
        v.parse::<u32>().map_err(|e| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            format!("error parsing timestamp {what}: strconv.ParseUint: parsing \"{v}\": {why}")
        })
    };
    let t = parse("seconds", parts[0])?;
    let i = match parts.get(1) {
        Some(p) if !p.is_empty() => parse("increment", p)?,
        _ => 0,
    };
    Ok(Timestamp {
        time: t,
        increment: i,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oplog_limit_forms() {
        assert_eq!(
            parse_oplog_limit("5").unwrap(),
            Timestamp {
                time: 5,
                increment: 0
            }
        );
        assert_eq!(
            parse_oplog_limit("5:").unwrap(),
            Timestamp {
                time: 5,
                increment: 0
            }
        );
        assert_eq!(
            parse_oplog_limit("5:7").unwrap(),
            Timestamp {
                time: 5,
                increment: 7
            }
        );
        assert_eq!(
            parse_oplog_limit("5:1:2").unwrap_err(),
            "too many : characters"
        );
        assert!(parse_oplog_limit("4294967296")
            .unwrap_err()
            .contains("value out of range"));
        assert!(parse_oplog_limit("1:4294967296")
            .unwrap_err()
            .contains("increment"));
        assert!(parse_oplog_limit("x")
            .unwrap_err()
            .contains("invalid syntax"));
        assert!(parse_oplog_limit(":5").is_err());
        assert!(parse_oplog_limit("-1")
            .unwrap_err()
            .contains("invalid syntax"));
    }

    #[test]
    fn limit_is_exclusive() {
        let l = Some(Timestamp {
            time: 10,
            increment: 2,
        });
        assert!(before_limit(
            l,
            Timestamp {
                time: 10,
                increment: 1
            }
        ));
        assert!(!before_limit(
            l,
            Timestamp {
                time: 10,
                increment: 2
            }
        ));
        assert!(before_limit(
            Some(Timestamp {
                time: 0,
                increment: 0
            }),
            Timestamp {
                time: 99,
                increment: 0
            }
        ));
    }
}
