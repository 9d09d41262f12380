//! The fixture generator (`pitr-gen`): determinism, readable output, a
//! sorted oplog, a `truth.json` that agrees with an independent replay of the files,
//! and a committed `fixtures/incident/` that is exactly what the script regenerates.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use bson::{Bson, RawBsonRef, RawDocument};
use pitr::oplog::{self, Entry, Op, ReadOptions, Ts};
use pitr_fixturegen::{generate, Options, Scenario};
use serde_json::Value;

const START: u32 = 1_795_222_800; // 2026-11-21T01:00:00Z

/// The repository root (this crate lives in `tests/fixturegen`).
fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn gen(dir: &Path, seed: u64, scenario: Scenario, target_bytes: u64) {
    generate(&Options {
        out: dir.to_path_buf(),
        seed,
        scenario,
        target_bytes,
        start: START,
        mix: Default::default(),
    })
    .unwrap();
}

/// Every file under `dir`, relative path -> bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn truth(dir: &Path) -> Value {
    serde_json::from_slice(&fs::read(dir.join("truth.json")).unwrap()).unwrap()
}

fn ts_of(v: &Value) -> Ts {
    let s = v.as_str().unwrap_or_else(|| panic!("not a ts string: {v}"));
    let (t, i) = s.split_once(':').unwrap();
    Ts::new(t.parse().unwrap(), i.parse().unwrap())
}

/// Calls `f` on every entry of an oplog file.
fn each_entry(path: &Path, mut f: impl FnMut(&Entry<'_>)) -> u64 {
    let mut r = oplog::open(path.to_str().unwrap(), ReadOptions::default()).unwrap();
    while let Some(e) = r.next_entry().unwrap() {
        f(&e);
    }
    r.entries_read()
}

/// Reads a collection dump: a plain sequence of BSON documents.
fn read_docs(path: &Path) -> Vec<bson::Document> {
    let bytes = fs::read(path).unwrap();
    let mut docs = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let raw = RawDocument::from_bytes(&bytes[at..at + len]).unwrap();
        docs.push(bson::Document::try_from(raw).unwrap());
        at += len;
    }
    docs
}

// ---------------------------------------------------------------------------------
// An independent replay: what mongorestore would leave, as sets of _id per namespace.

fn is_user(ns: &str) -> bool {
    !matches!(
        ns.split('.').next(),
        Some("admin" | "config" | "local") | None
    )
}

fn id_key(v: RawBsonRef<'_>) -> String {
    let b: Bson = v.to_raw_bson().try_into().unwrap();
    b.into_relaxed_extjson().to_string()
}

/// One data operation, owned.
#[derive(Clone, Debug)]
enum DataOp {
    Insert(String, String),
    Update(String, String),
    Delete(String, String),
}

#[derive(Default)]
struct Replay {
    colls: HashMap<String, HashSet<String>>,
    /// Open transactions by (lsid.id, txnNumber).
    txns: HashMap<(Vec<u8>, i64), Vec<DataOp>>,
    /// Check that updates and deletes find their document and inserts do not.
    strict: bool,
    problems: Vec<String>,
}

impl Replay {
    fn counts(&self) -> BTreeMap<String, u64> {
        self.colls
            .iter()
            // View definitions are not data (pitr plan does not count them either).
            .filter(|(ns, _)| is_user(ns) && !ns.ends_with(".system.views"))
            .map(|(ns, ids)| (ns.clone(), ids.len() as u64))
            .collect()
    }

    fn data_op(e: &Entry<'_>) -> Option<DataOp> {
        let ns = e.ns.to_string();
        match e.op {
            Op::Insert => Some(DataOp::Insert(ns, id_key(e.o?.get("_id").ok()??))),
            Op::Delete => Some(DataOp::Delete(ns, id_key(e.o?.get("_id").ok()??))),
            Op::Update => Some(DataOp::Update(ns, id_key(e.o2?.get("_id").ok()??))),
            _ => None,
        }
    }

    fn apply(&mut self, op: DataOp, at: Ts) {
        match op {
            DataOp::Insert(ns, id) => {
                let set = self.colls.entry(ns.clone()).or_default();
                if !set.insert(id.clone()) && self.strict && is_user(&ns) {
                    self.problems
                        .push(format!("{at}: insert of existing {ns} {id}"));
                }
            }
            DataOp::Delete(ns, id) => {
                let gone = self.colls.get_mut(&ns).is_some_and(|s| s.remove(&id));
                if !gone && self.strict && is_user(&ns) {
                    self.problems
                        .push(format!("{at}: delete of missing {ns} {id}"));
                }
            }
            DataOp::Update(ns, id) => {
                let there = self.colls.get(&ns).is_some_and(|s| s.contains(&id));
                if !there && self.strict && is_user(&ns) {
                    self.problems
                        .push(format!("{at}: update of missing {ns} {id}"));
                }
            }
        }
    }

    fn entry(&mut self, e: &Entry<'_>) {
        match e.op {
            Op::Insert | Op::Update | Op::Delete => {
                if let Some(op) = Self::data_op(e) {
                    self.apply(op, e.ts);
                }
            }
            Op::Command => self.command(e),
            _ => {}
        }
    }

    fn command(&mut self, e: &Entry<'_>) {
        let o = e.o.unwrap();
        let db = e.db();
        let key = e.lsid.map(|l| {
            let id = match l.get("id").unwrap().unwrap() {
                RawBsonRef::Binary(b) => b.bytes.to_vec(),
                _ => panic!("lsid.id is not binary"),
            };
            (id, e.txn_number.unwrap())
        });
        match e.command_name().unwrap() {
            "applyOps" => {
                let mut ops = Vec::new();
                for inner in e.apply_ops().unwrap().unwrap() {
                    let inner = inner.unwrap();
                    ops.push(Self::data_op(&inner).expect("data op inside applyOps"));
                }
                match key {
                    Some(k) if e.o_flag("partialTxn") || e.o_flag("prepare") => {
                        self.txns.entry(k).or_default().extend(ops);
                    }
                    Some(k) => {
                        let mut all = self.txns.remove(&k).unwrap_or_default();
                        all.extend(ops);
                        for op in all {
                            self.apply(op, e.ts);
                        }
                    }
                    None => {
                        for op in ops {
                            self.apply(op, e.ts);
                        }
                    }
                }
            }
            "commitTransaction" => {
                for op in self
                    .txns
                    .remove(&key.unwrap())
                    .expect("commit of an unknown transaction")
                {
                    self.apply(op, e.ts);
                }
            }
            "abortTransaction" => {
                self.txns
                    .remove(&key.unwrap())
                    .expect("abort of an unknown transaction");
            }
            "create" => {
                let ns = format!("{db}.{}", o.get_str("create").unwrap());
                self.colls.entry(ns).or_default();
            }
            "drop" => {
                let ns = format!("{db}.{}", o.get_str("drop").unwrap());
                assert!(
                    self.colls.remove(&ns).is_some() || !self.strict,
                    "drop of missing {ns}"
                );
            }
            "dropDatabase" => {
                let prefix = format!("{db}.");
                self.colls.retain(|ns, _| !ns.starts_with(&prefix));
            }
            "renameCollection" => {
                let from = o.get_str("renameCollection").unwrap();
                let to = o.get_str("to").unwrap();
                let ids = self.colls.remove(from).unwrap_or_default();
                self.colls.insert(to.to_string(), ids);
            }
            _ => {}
        }
    }
}

/// Restores `dir/backup`, replays its oplog, then the main oplog after the backup's
/// end and before `limit`; returns the user counts and any problems.
fn replay_until(dir: &Path, limit: Ts) -> (BTreeMap<String, u64>, Vec<String>) {
    let t = truth(dir);
    let mut r = Replay::default();
    let backup = dir.join("backup");
    for db in fs::read_dir(&backup).unwrap() {
        let db = db.unwrap().path();
        if !db.is_dir() {
            continue;
        }
        for f in fs::read_dir(&db).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(coll) = name.strip_suffix(".bson") {
                let ns = format!("{}.{coll}", db.file_name().unwrap().to_string_lossy());
                let ids = read_docs(&f)
                    .iter()
                    .map(|d| {
                        d.get("_id")
                            .unwrap()
                            .clone()
                            .into_relaxed_extjson()
                            .to_string()
                    })
                    .collect();
                r.colls.insert(ns, ids);
            }
        }
    }
    each_entry(&backup.join("oplog.bson"), |e| r.entry(e));
    let end = ts_of(&t["backup"]["end_ts"]);
    r.strict = true;
    each_entry(&dir.join("oplog.bson"), |e| {
        if e.ts > end && e.ts < limit {
            r.entry(e);
        }
    });
    (r.counts(), r.problems)
}

// ---------------------------------------------------------------------------------

/// Checks everything about one generated directory.
fn check_output(dir: &Path) {
    let t = truth(dir);
    assert_eq!(t["generator"], "pitr-gen");

    // Backup: collection files are BSON documents, counted as the truth says; each
    // has mongodump's metadata.
    let counts = t["backup"]["counts"].as_object().unwrap();
    let mut seen = 0;
    for (ns, n) in counts {
        let (db, coll) = ns.split_once('.').unwrap();
        let docs = read_docs(&dir.join(format!("backup/{db}/{coll}.bson")));
        assert_eq!(docs.len() as u64, n.as_u64().unwrap(), "{ns}");
        for d in &docs {
            assert!(d.contains_key("_id"), "{ns}: document without _id");
        }
        let meta: Value = serde_json::from_slice(
            &fs::read(dir.join(format!("backup/{db}/{coll}.metadata.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(meta["collectionName"], coll);
        assert_eq!(meta["type"], "collection");
        assert_eq!(meta["uuid"].as_str().unwrap().len(), 32);
        assert_eq!(meta["indexes"][0]["name"], "_id_");
        seen += 1;
    }
    let files = tree(&dir.join("backup"));
    assert_eq!(
        files
            .keys()
            .filter(|k| k.ends_with(".bson") && *k != "oplog.bson")
            .count(),
        seen
    );

    // Both oplogs read back, sorted, with walls in their second.
    for (path, key) in [
        (dir.join("backup/oplog.bson"), "backup"),
        (dir.join("oplog.bson"), "oplog"),
    ] {
        let mut last = Ts::ZERO;
        let mut first = None;
        let n = each_entry(&path, |e| {
            assert!(e.ts > last, "{}: {} after {last}", path.display(), e.ts);
            last = e.ts;
            first.get_or_insert(e.ts);
            assert_eq!(
                e.wall_ms.unwrap().div_euclid(1000),
                e.ts.t as i64,
                "wall of {}",
                e.ts
            );
            assert!(e.term.is_some());
            e.for_each_leaf::<oplog::EntryError>(&mut |_| Ok(()))
                .unwrap();
        });
        let (f, l, entries) = if key == "backup" {
            ("oplog_first_ts", "oplog_last_ts", "oplog_entries")
        } else {
            ("first_ts", "last_ts", "entries")
        };
        assert_eq!(ts_of(&t[key][f]), first.unwrap());
        assert_eq!(ts_of(&t[key][l]), last);
        assert_eq!(t[key][entries].as_u64().unwrap(), n);
    }
    assert_eq!(t["backup"]["end_ts"], t["backup"]["oplog_last_ts"]);
    assert!(
        ts_of(&t["oplog"]["first_ts"]) <= ts_of(&t["backup"]["end_ts"]),
        "the oplog must overlap the backup"
    );
    assert_eq!(t["oplog"]["sorted"], true);

    // Incidents: in time order, each found at its ts in the oplog with the planted
    // shape; expected counts agree with an independent replay.
    let incidents = t["incidents"].as_array().unwrap();
    let kinds: Vec<&str> = incidents
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "drop",
            "dropDatabase",
            "renameDropTarget",
            "deleteBurst",
            "deleteBurst",
            "dropIndexes",
            "wipingUpdate",
            "deleteBurst",
            "renameDropTarget"
        ]
    );
    let mut at_ts: HashMap<Ts, bson::Document> = HashMap::new();
    let wanted: HashSet<Ts> = incidents.iter().map(|i| ts_of(&i["ts"])).collect();
    each_entry(&dir.join("oplog.bson"), |e| {
        if wanted.contains(&e.ts) {
            at_ts.insert(e.ts, bson::Document::try_from(e.raw).unwrap());
        }
    });
    let expected = t["expected_counts"].as_array().unwrap();
    assert_eq!(expected.len(), incidents.len());
    let mut prev = Ts::ZERO;
    for (i, x) in incidents.iter().zip(expected) {
        let ts = ts_of(&i["ts"]);
        assert!(ts > prev);
        prev = ts;
        assert_eq!(i["oplog_limit"], x["oplog_limit"]);
        assert!(ts_of(&i["last_ts"]) >= ts);
        assert!(i["wall"].as_str().unwrap().ends_with('Z'), "{i}");
        let e = &at_ts[&ts];
        let o = e.get_document("o").unwrap();
        match i["kind"].as_str().unwrap() {
            "drop" => {
                assert_eq!(o.get_str("drop").unwrap(), "orders");
                assert_eq!(
                    e.get_document("o2").unwrap().get_i64("numRecords").unwrap() as u64,
                    i["num_records"].as_u64().unwrap()
                );
                assert_eq!(x["counts"]["shop.orders"], i["num_records"]);
            }
            "dropDatabase" => {
                let colls = i["collections"].as_array().unwrap();
                assert_eq!(colls.len() as u64, i["count"].as_u64().unwrap());
                let sum: u64 = colls
                    .iter()
                    .map(|c| x["counts"][c.as_str().unwrap()].as_u64().unwrap())
                    .sum();
                assert_eq!(sum, i["num_records"].as_u64().unwrap());
            }
            "renameDropTarget" => {
                assert_eq!(o.get_str("to").unwrap(), i["ns"].as_str().unwrap());
                assert_eq!(x["counts"][i["ns"].as_str().unwrap()], i["num_records"]);
                assert_eq!(
                    o.get_str("renameCollection")
                        .unwrap()
                        .contains(".convertToCapped."),
                    i["convert_to_capped"].as_bool().unwrap()
                );
            }
            "deleteBurst" => assert!(i["count"].as_u64().unwrap() >= 100),
            "wipingUpdate" => assert_eq!(i["count"], 150),
            "dropIndexes" => assert_eq!(o.get_str("index").unwrap(), "status_1"),
            k => panic!("unexpected kind {k}"),
        }
        let limit = ts_of(&x["oplog_limit"]);
        let (got, problems) = replay_until(dir, limit);
        assert!(problems.is_empty(), "replay before {limit}: {problems:?}");
        let want: BTreeMap<String, u64> = x["counts"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
            .collect();
        assert_eq!(got, want, "counts just before {limit} ({})", i["kind"]);
    }
    check_routine(dir, &t);
    check_quiet(dir, &t);
}

/// The routine operations in truth.json are in the oplog in the server's shapes:
/// `$out` renames from `tmp.agg_out.<UUID>` (created with `temp: true`) with
/// `stayTemp: false`, a UUID `dropTarget` and `o2.numRecords`; a drop of such a
/// temporary collection; TTL passes as `applyOps` without a session (at most 100
/// deletes each) on a collection whose `createIndexes` has `expireAfterSeconds`.
fn check_routine(dir: &Path, t: &Value) {
    let routine = t["routine"].as_array().unwrap();
    let scenario = t["scenario"].as_str().unwrap();
    if scenario == "bench" {
        assert!(routine.is_empty());
        return;
    }
    let kinds: HashSet<&str> = routine
        .iter()
        .map(|r| r["routine"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        HashSet::from(["outReplace", "tempDrop", "ttlExpiry"]),
        "{routine:?}"
    );
    let mut entries: HashMap<Ts, bson::Document> = HashMap::new();
    let mut temp_created: HashSet<String> = HashSet::new();
    let mut ttl_ns: HashSet<String> = HashSet::new();
    let (mut retryable, mut plain) = (0u64, 0u64);
    each_entry(&dir.join("oplog.bson"), |e| {
        entries.insert(e.ts, bson::Document::try_from(e.raw).unwrap());
        if matches!(e.op, Op::Insert | Op::Update | Op::Delete) && !e.from_migrate {
            if e.lsid.is_some() {
                assert!(e.txn_number.is_some(), "{}: lsid without txnNumber", e.ts);
                assert!(
                    e.raw.get("stmtId").unwrap().is_some(),
                    "{}: no stmtId",
                    e.ts
                );
                retryable += 1;
            } else {
                plain += 1;
            }
        }
        let o = e.o.unwrap();
        match e.command_name() {
            Some("create") if o.get_bool("temp").unwrap_or(false) => {
                temp_created.insert(format!("{}.{}", e.db(), o.get_str("create").unwrap()));
            }
            Some("createIndexes") if o.get("expireAfterSeconds").unwrap().is_some() => {
                ttl_ns.insert(format!(
                    "{}.{}",
                    e.db(),
                    o.get_str("createIndexes").unwrap()
                ));
            }
            _ => {}
        }
    });
    assert!(
        retryable > 0 && plain > 0,
        "{retryable} retryable, {plain} not"
    );
    for r in routine {
        let (ts, last) = (ts_of(&r["ts"]), ts_of(&r["last_ts"]));
        assert!(last >= ts);
        let e = &entries[&ts];
        let o = e.get_document("o").unwrap();
        let ns = r["ns"].as_str().unwrap();
        match r["routine"].as_str().unwrap() {
            "outReplace" => {
                for at in [ts, last] {
                    let o = entries[&at].get_document("o").unwrap();
                    let from = o.get_str("renameCollection").unwrap();
                    assert!(from.contains(".tmp.agg_out."), "{from}");
                    assert!(
                        temp_created.contains(from),
                        "{from} not created with temp: true"
                    );
                    assert_eq!(o.get_str("to").unwrap(), ns);
                    assert!(!o.get_bool("stayTemp").unwrap());
                    assert!(matches!(o.get("dropTarget"), Some(Bson::Binary(_))), "{o}");
                    assert!(entries[&at]
                        .get_document("o2")
                        .unwrap()
                        .contains_key("numRecords"));
                }
            }
            "tempDrop" => {
                let (db, coll) = ns.split_once('.').unwrap();
                assert_eq!(o.get_str("drop").unwrap(), coll);
                assert_eq!(e.get_str("ns").unwrap(), format!("{db}.$cmd"));
                assert!(temp_created.contains(ns));
            }
            "ttlExpiry" => {
                assert!(ttl_ns.contains(ns), "{ns} has no TTL index in the oplog");
                assert!(!e.contains_key("lsid"));
                let ops = o.get_array("applyOps").unwrap();
                assert!(ops.len() <= 100);
                assert!(r["count"].as_u64().unwrap() >= 100);
            }
            other => panic!("unexpected routine {other}"),
        }
    }
}

/// Outside the planted deleteBursts (incidents, and routine TTL passes), no user
/// namespace ever sees 100 deletes within 10 seconds (fromMigrate and aborted
/// transactions do not count).
fn check_quiet(dir: &Path, t: &Value) {
    let mut deletes: HashMap<String, Vec<u32>> = HashMap::new();
    let mut txn: HashMap<(Vec<u8>, i64), Vec<String>> = HashMap::new();
    each_entry(&dir.join("oplog.bson"), |e| {
        let lsid = e
            .lsid
            .map(|l| (l.as_bytes().to_vec(), e.txn_number.unwrap_or(0)));
        match (e.op, e.command_name()) {
            (Op::Delete, _) if !e.from_migrate && is_user(e.ns) => {
                deletes.entry(e.ns.into()).or_default().push(e.ts.t)
            }
            (Op::Command, Some("applyOps")) => {
                let mut ns = Vec::new();
                e.for_each_leaf::<oplog::EntryError>(&mut |l| {
                    if l.op == Op::Delete {
                        ns.push(l.ns.to_string());
                    }
                    Ok(())
                })
                .unwrap();
                match lsid {
                    Some(k) if e.o_flag("partialTxn") || e.o_flag("prepare") => {
                        txn.entry(k).or_default().extend(ns)
                    }
                    Some(k) => {
                        for n in txn.remove(&k).unwrap_or_default().into_iter().chain(ns) {
                            deletes.entry(n).or_default().push(e.ts.t);
                        }
                    }
                    None => {
                        for n in ns {
                            deletes.entry(n).or_default().push(e.ts.t);
                        }
                    }
                }
            }
            (Op::Command, Some("commitTransaction")) => {
                for n in txn.remove(&lsid.unwrap()).unwrap_or_default() {
                    deletes.entry(n).or_default().push(e.ts.t);
                }
            }
            (Op::Command, Some("abortTransaction")) => {
                txn.remove(&lsid.unwrap());
            }
            _ => {}
        }
    });
    let bursts: Vec<(String, u32, u32)> = t["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .chain(t["routine"].as_array().unwrap())
        .filter(|i| i["kind"] == "deleteBurst")
        .map(|i| {
            (
                i["ns"].as_str().unwrap().to_string(),
                ts_of(&i["ts"]).t,
                ts_of(&i["last_ts"]).t,
            )
        })
        .collect();
    for (ns, secs) in deletes {
        let mut lo = 0;
        for hi in 0..secs.len() {
            while secs[hi] - secs[lo] >= 10 {
                lo += 1;
            }
            if hi - lo + 1 >= 100 {
                let planted = bursts
                    .iter()
                    .any(|(n, a, b)| *n == ns && secs[hi] + 10 > *a && secs[lo] <= *b + 10);
                assert!(
                    planted,
                    "{ns}: {} deletes within 10 s at {} outside any planted burst",
                    hi - lo + 1,
                    secs[lo]
                );
            }
        }
    }
}

#[test]
fn incident_output_is_complete_and_consistent() {
    let d = tempfile::tempdir().unwrap();
    gen(d.path(), 11, Scenario::Incident, 0);
    check_output(d.path());
    let t = truth(d.path());
    assert_eq!(t["scenario"], "incident");
    assert_eq!(t["seed"], 11);
    assert_eq!(t["decoys"].as_array().unwrap().len(), 3);
}

#[test]
fn small_bench_output_is_consistent() {
    let d = tempfile::tempdir().unwrap();
    gen(d.path(), 3, Scenario::Bench, 6 << 20);
    check_output(d.path());
    let size = fs::metadata(d.path().join("oplog.bson")).unwrap().len();
    assert!(
        size > 5 << 20 && size < 8 << 20,
        "bench oplog is {size} bytes for a 6 MiB target"
    );
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    gen(a.path(), 5, Scenario::Incident, 0);
    gen(b.path(), 5, Scenario::Incident, 0);
    gen(c.path(), 6, Scenario::Incident, 0);
    let (ta, tb, tc) = (tree(a.path()), tree(b.path()), tree(c.path()));
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
    for (k, v) in &ta {
        assert!(
            v == &tb[k],
            "{k} differs between two runs with the same seed"
        );
    }
    assert_ne!(ta["oplog.bson"], tc["oplog.bson"]);
    assert_ne!(ta["truth.json"], tc["truth.json"]);
}

#[test]
fn regenerating_into_the_same_directory_replaces_the_output() {
    let d = tempfile::tempdir().unwrap();
    gen(d.path(), 5, Scenario::Incident, 0);
    let first = tree(d.path());
    gen(d.path(), 6, Scenario::Incident, 0);
    gen(d.path(), 5, Scenario::Incident, 0);
    assert_eq!(tree(d.path()), first);
    let names: Vec<String> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "leftovers: {names:?}");
}

/// `SEED=` and `START=` from scripts/gen-fixtures.sh.
fn script_args() -> (String, String) {
    let script = fs::read_to_string(root().join("scripts/gen-fixtures.sh")).unwrap();
    let get = |key: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("scripts/gen-fixtures.sh has no {key}= line"))
            .trim_matches('"')
            .to_string()
    };
    (get("SEED"), get("START"))
}

fn pitr_gen() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pitr-gen"))
}

#[test]
fn committed_fixture_is_what_the_script_generates() {
    let committed = root().join("fixtures/incident");
    let (seed, start) = script_args();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("incident");
    let st = pitr_gen()
        .args([
            "--scenario",
            "incident",
            "--seed",
            &seed,
            "--start",
            &start,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let (want, got) = (tree(&out), tree(&committed));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "fixtures/incident/ has other files than scripts/gen-fixtures.sh writes: run the script"
    );
    for (k, v) in &want {
        assert!(
            v == &got[k],
            "fixtures/incident/{k} differs from what scripts/gen-fixtures.sh generates: run the script, never edit by hand"
        );
    }
}

#[test]
fn committed_fixture_is_consistent_and_covers_the_backup_end() {
    let dir = root().join("fixtures/incident");
    let t = truth(&dir);
    let first = ts_of(&t["oplog"]["first_ts"]);
    let end = ts_of(&t["backup"]["end_ts"]);
    assert!(
        first <= end,
        "oplog starts at {first}, after the backup's end {end}"
    );
    // The files say the same as the truth.
    let mut first_in_file = None;
    each_entry(&dir.join("oplog.bson"), |e| {
        first_in_file.get_or_insert(e.ts);
    });
    let mut last_in_backup = Ts::ZERO;
    each_entry(&dir.join("backup/oplog.bson"), |e| last_in_backup = e.ts);
    assert_eq!(first_in_file, Some(first));
    assert_eq!(last_in_backup, end);
    check_output(&dir);
    let total: u64 = tree(&dir).values().map(|v| v.len() as u64).sum();
    assert!(
        total < 700 * 1024,
        "the committed fixture grew to {total} bytes"
    );
}

#[test]
fn bad_command_lines_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let check = |args: &[&str], what: &str| {
        let o = pitr_gen().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("error:") && err.contains(what),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    };
    let out = d.path().join("o");
    let out = out.to_str().unwrap();
    check(
        &["--out", out, "--target-bytes", "1GiB"],
        "only applies to --scenario bench",
    );
    check(
        &[
            "--out",
            out,
            "--scenario",
            "bench",
            "--target-bytes",
            "lots",
        ],
        "is not a size",
    );
    check(
        &["--out", out, "--scenario", "bench", "--target-bytes", "10"],
        "too small",
    );
    check(&["--out", out, "--start", "tomorrow"], "RFC 3339");
    check(
        &["--out", out, "--start", "1950-01-01T00:00:00Z"],
        "out of range",
    );
    check(&["--out", out, "--scenario", "huge"], "huge");
    let file = d.path().join("file");
    fs::write(&file, "x").unwrap();
    check(&["--out", file.to_str().unwrap()], "not a directory");
    let busy = d.path().join("busy");
    fs::create_dir(&busy).unwrap();
    fs::write(busy.join("notes.txt"), "mine").unwrap();
    check(&["--out", busy.to_str().unwrap()], "notes.txt");
    assert!(fs::read_to_string(busy.join("notes.txt")).unwrap() == "mine");
}

/// Checks any generated directory, e.g. a large bench output:
/// `PITR_GEN_CHECK_DIR=bench-data/1g cargo test --release -p pitr-fixturegen --test gen_fixtures -- --ignored`.
#[test]
#[ignore = "needs PITR_GEN_CHECK_DIR"]
fn check_directory_from_env() {
    let dir = std::env::var_os("PITR_GEN_CHECK_DIR")
        .expect("set PITR_GEN_CHECK_DIR to a gen-fixtures output directory");
    check_output(Path::new(&dir));
}
