//! Cross-shard (prepared) transactions at one cluster limit (issue 19, rule R2 of
//! shared/reference/sharded-pitr.md): a transaction committed by two-phase commit is
//! in the restore iff its `commitTimestamp` is before the limit, on every participant,
//! wherever each participant's own `commitTransaction` entry falls.
//!
//! The committed fixture (`fixtures/cluster`, `pitr-gen --scenario cluster`) holds
//! three such transactions on `shop.events` (one write on each data shard): committed
//! at about 100 s with the second shard's commit entry about 2 s after the first's,
//! aborted at 150 s, committed at 160 s with the first shard's commit entry late.
//! Each is restored at limits before its commitTimestamp, between the participants'
//! commit entries (where a per-shard `--oplogLimit` would tear it) and after them, and
//! the merged dump is compared with the generator's truth (the writes at the
//! commitTimestamp). A transaction whose decision no oplog holds is refused, and so is
//! a participant whose prepare is missing.

mod cluster_common;
mod common;
mod replay_common;

use std::fs;
use std::path::Path;

use cluster_common::{generated_fixture as generated, parse_ts as ts, replay, FIXTURE};
use pitr::oplog::Ts;
use pitr_fixturegen::cluster::truth::Logical;
use replay_common::{code, run_pitr, show, stderr};
use serde_json::Value;

fn ts_arg(t: Ts) -> String {
    format!("{}:{}", t.t, t.i)
}

/// `shop.events` of the merged dump: `_id` -> `n`.
fn events_n(out: &Path) -> std::collections::BTreeMap<i64, i32> {
    let bytes = fs::read(out.join("shop/events.bson")).unwrap();
    let mut m = std::collections::BTreeMap::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let d: bson::Document = bson::from_slice(&bytes[at..at + n]).unwrap();
        m.insert(d.get_i64("_id").unwrap(), d.get_i32("n").unwrap());
        at += n;
    }
    m
}

/// The truth's `shop.events` at `limit`, in the same form.
fn truth_n(model: &Logical, limit: Ts) -> std::collections::BTreeMap<i64, i32> {
    model.at(limit)["shop.events"]
        .iter()
        .map(|d| (d.get_i64("_id").unwrap(), d.get_i32("n").unwrap()))
        .collect()
}

/// The committed transactions restored before, across and after their participants'
/// commit entries: all or nothing on every shard, equal to the truth.
#[test]
fn committed_transactions_are_in_on_every_shard_iff_commit_timestamp_is_before_the_limit() {
    let gen = tempfile::tempdir().unwrap();
    let model = generated(gen.path());
    let truth: Value =
        serde_json::from_slice(&fs::read(Path::new(FIXTURE).join("truth.json")).unwrap()).unwrap();
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    let txns = truth["transactions"].as_array().unwrap();
    assert_eq!(txns.len(), 3, "{truth}");
    let mut straddled = 0;
    for t in txns.iter().filter(|t| t["decision"] == "commit") {
        let ct = ts(&t["commit_timestamp"]);
        let parts = t["participants"].as_array().unwrap();
        assert_eq!(parts.len(), 2, "{t}");
        let mut commits: Vec<Ts> = parts.iter().map(|p| ts(&p["decision_ts"])).collect();
        commits.sort();
        assert!(
            commits[0] > ct,
            "a commit entry is after the commitTimestamp: {t}"
        );
        // Between the two commit entries: one shard has its commit entry before the
        // limit, the other after; both must hold the writes.
        let between = Ts::new(commits[0].t, commits[0].i + 1);
        assert!(between < commits[1], "{t}");
        let limits = [
            (ct, false),
            (Ts::new(ct.t, ct.i + 1), true),
            (between, true),
            (Ts::new(commits[1].t, commits[1].i + 1), true),
        ];
        for (limit, included) in limits {
            let tmp = tempfile::tempdir().unwrap();
            let report = replay(tmp.path(), &cluster, &ts_arg(limit))
                .unwrap_or_else(|o| panic!("{} at {limit}: {}", t["txn"], show(&o)));
            let got = events_n(&tmp.path().join("out"));
            assert_eq!(got, truth_n(&model, limit), "{} at {limit}", t["txn"]);
            // The writes themselves, all or nothing.
            let n: Vec<i32> = [250i64, 1250]
                .iter()
                .map(|base| {
                    let k = t["txn"].as_str().unwrap().ends_with("txnNumber 1");
                    got[&(base + if k { 0 } else { 20 })]
                })
                .collect();
            assert_eq!(n[0] >= 1000, n[1] >= 1000, "torn at {limit}: {n:?}");
            let listed: Vec<&Value> = report["transactions_at_limit"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["txn"] == t["txn"])
                .collect();
            if limit > commits[0] && limit <= commits[1] {
                straddled += 1;
                assert_eq!(listed.len(), 1, "{report}");
                assert_eq!(listed[0]["included"], included, "{report}");
                assert_eq!(listed[0]["commit_timestamp"], t["commit_timestamp"]);
            }
        }
    }
    assert_eq!(
        straddled, 2,
        "both committed transactions were cut between their commit entries"
    );
}

/// The aborted transaction: cut between its participants' abort entries, it is out on
/// both shards and listed as aborted.
#[test]
fn an_aborted_transaction_is_out_on_every_shard() {
    let gen = tempfile::tempdir().unwrap();
    let model = generated(gen.path());
    let truth: Value =
        serde_json::from_slice(&fs::read(Path::new(FIXTURE).join("truth.json")).unwrap()).unwrap();
    let t = truth["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["decision"] == "abort")
        .unwrap();
    let mut aborts: Vec<Ts> = t["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| ts(&p["decision_ts"]))
        .collect();
    aborts.sort();
    let limit = Ts::new(aborts[0].t, aborts[0].i + 1);
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Path::new(FIXTURE).join("cluster.toml");
    let report =
        replay(tmp.path(), &cluster, &ts_arg(limit)).unwrap_or_else(|o| panic!("{}", show(&o)));
    assert_eq!(events_n(&tmp.path().join("out")), truth_n(&model, limit));
    let listed = &report["transactions_at_limit"];
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["txn"] == t["txn"] && x["decision"] == "abort" && x["included"] == false),
        "{listed}"
    );
}

/// Every entry of `path` (a BSON file) for which `keep` is true, written back.
fn filter_oplog(path: &Path, keep: impl Fn(&bson::Document) -> bool) -> usize {
    let bytes = fs::read(path).unwrap();
    let (mut out, mut dropped, mut at) = (Vec::new(), 0, 0);
    while at < bytes.len() {
        let n = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let d: bson::Document = bson::from_slice(&bytes[at..at + n]).unwrap();
        if keep(&d) {
            out.extend_from_slice(&bytes[at..at + n]);
        } else {
            dropped += 1;
        }
        at += n;
    }
    fs::write(path, out).unwrap();
    dropped
}

/// Whether `d` is a participant's `commitTransaction` of the fixture's first
/// transaction (txnNumber 1).
fn first_commit_entry(d: &bson::Document) -> bool {
    d.get_document("o")
        .is_ok_and(|o| o.contains_key("commitTransaction"))
        && d.get_i64("txnNumber") == Ok(1)
}

/// Whether `d` is the coordinator's decision write for the fixture's first
/// transaction (its `config.transaction_coordinators` document replaced with the
/// decision).
fn first_coordinator_decision(d: &bson::Document) -> bool {
    d.get_str("ns") == Ok("config.transaction_coordinators")
        && d.get_str("op") == Ok("u")
        && d.get_document("o").is_ok_and(|o| {
            o.contains_key("decision")
                && o.get_document("_id")
                    .is_ok_and(|id| id.get_i64("txnNumber") == Ok(1))
        })
}

/// No oplog holds the decision (the participants' commit entries and the
/// coordinator's decision document taken out): at a limit after the prepares,
/// whether the transaction is in depends on a commitTimestamp nobody has, so the
/// restore is refused, naming the transaction and asking for more oplog; before the
/// prepares it restores.
#[test]
fn an_undecided_prepared_transaction_is_refused() {
    let gen = tempfile::tempdir().unwrap();
    generated(gen.path());
    let truth: Value =
        serde_json::from_slice(&fs::read(gen.path().join("truth.json")).unwrap()).unwrap();
    let t = &truth["transactions"][0];
    let label = t["txn"].as_str().unwrap();
    let ct = ts(&t["commit_timestamp"]);
    let mut dropped = 0;
    for m in ["shard0", "shard1"] {
        dropped += filter_oplog(&gen.path().join(m).join("oplog.bson"), |d| {
            !first_commit_entry(d) && !first_coordinator_decision(d)
        });
    }
    assert_eq!(
        dropped, 3,
        "two commit entries and the coordinator's decision"
    );
    let cluster = gen.path().join("cluster.toml");
    for cmd in ["plan", "replay"] {
        let tmp = tempfile::tempdir().unwrap();
        let o = run_pitr(
            tmp.path(),
            &[
                cmd,
                "--cluster",
                cluster.to_str().unwrap(),
                "--until",
                &ts_arg(Ts::new(ct.t, ct.i + 1)),
                "--out",
                "out",
            ],
            &[],
        );
        assert_eq!(code(&o), 2, "{cmd}: {}", show(&o));
        let e = stderr(&o);
        for w in [
            label,
            "undecided",
            "no commitTransaction or abortTransaction in any member's oplog",
            "hint: dump more oplog",
        ] {
            assert!(e.contains(w), "{cmd}: `{w}` not in: {e}");
        }
        assert!(!tmp.path().join("out").exists(), "{cmd}: output left");
    }
    // Before the first prepare the transaction is not open anywhere: restorable.
    let first_prepare = t["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| ts(&p["prepare_ts"]))
        .min()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    replay(tmp.path(), &cluster, &ts_arg(first_prepare)).unwrap_or_else(|o| panic!("{}", show(&o)));
}

/// The participants' commit entries are past the oplogs read (taken out) but the
/// coordinator's decision document is there (the coordinator writes it before it
/// sends the decision, `transaction_coordinator.cpp`): the transaction is decided by
/// it. The embedded engine restores it at its commitTimestamp, equal to the truth
/// before and after it, and the report names the coordinator's document;
/// `--engine mongod`, which needs each participant's own commit entry for
/// mongorestore, refuses, naming the member and the transaction.
#[test]
fn the_coordinators_decision_document_decides_when_no_participant_entry_is_read() {
    let gen = tempfile::tempdir().unwrap();
    let model = generated(gen.path());
    let truth: Value =
        serde_json::from_slice(&fs::read(gen.path().join("truth.json")).unwrap()).unwrap();
    let t = &truth["transactions"][0];
    let label = t["txn"].as_str().unwrap();
    let ct = ts(&t["commit_timestamp"]);
    let mut dropped = 0;
    for m in ["shard0", "shard1"] {
        dropped += filter_oplog(&gen.path().join(m).join("oplog.bson"), |d| {
            !first_commit_entry(d)
        });
    }
    assert_eq!(dropped, 2);
    let cluster = gen.path().join("cluster.toml");
    for limit in [ct, Ts::new(ct.t, ct.i + 1)] {
        let tmp = tempfile::tempdir().unwrap();
        let report = replay(tmp.path(), &cluster, &ts_arg(limit))
            .unwrap_or_else(|o| panic!("at {limit}: {}", show(&o)));
        assert_eq!(
            events_n(&tmp.path().join("out")),
            truth_n(&model, limit),
            "at {limit}"
        );
        let listed = &report["transactions_at_limit"];
        let me = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["txn"] == label)
            .unwrap_or_else(|| panic!("{listed}"));
        assert_eq!(me["included"], limit > ct, "{me}");
        assert!(
            me["decision_entries"].as_array().unwrap().is_empty(),
            "{me}"
        );
        assert!(me["coordinator_decision"]["member"].is_string(), "{me}");
    }
    let test = "the_coordinators_decision_document_decides_when_no_participant_entry_is_read";
    let Some(bins) = replay_common::tool_sets(test).into_iter().next() else {
        return;
    };
    let bin = bins.dir.display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let o = run_pitr(
        tmp.path(),
        &[
            "replay",
            "--cluster",
            cluster.to_str().unwrap(),
            "--until",
            &ts_arg(Ts::new(ct.t, ct.i + 1)),
            "--out",
            "out",
            "--engine",
            "mongod",
            "--mongodb-bin",
            &bin,
            "--accept-incidents",
        ],
        &[],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    for w in [
        label,
        "commitTransaction entry is not in its oplog",
        "embedded engine",
    ] {
        assert!(e.contains(w), "`{w}` not in: {e}");
    }
    assert!(!tmp.path().join("out").exists(), "output left");
}

/// A participant whose prepare is missing (taken out of its oplog, as when its
/// backup's oplog starts after it) while its commit entry is after the limit and the
/// commitTimestamp before it: restoring would hold the writes on the other shard
/// and not on this one. Refused, naming the member.
#[test]
fn a_participant_without_its_prepare_is_refused() {
    let gen = tempfile::tempdir().unwrap();
    generated(gen.path());
    let truth: Value =
        serde_json::from_slice(&fs::read(gen.path().join("truth.json")).unwrap()).unwrap();
    let t = &truth["transactions"][0];
    let parts = t["participants"].as_array().unwrap();
    // The participant whose commit entry is the later one.
    let late = parts.iter().max_by_key(|p| ts(&p["decision_ts"])).unwrap();
    let member = late["member"].as_str().unwrap();
    let prepare = ts(&late["prepare_ts"]);
    let dropped = filter_oplog(&gen.path().join(member).join("oplog.bson"), |d| {
        d.get_timestamp("ts").map(|x| Ts::new(x.time, x.increment)) != Ok(prepare)
    });
    assert_eq!(dropped, 1);
    let early = parts.iter().map(|p| ts(&p["decision_ts"])).min().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cluster = gen.path().join("cluster.toml");
    let o =
        replay(tmp.path(), &cluster, &ts_arg(Ts::new(early.t, early.i + 1))).expect_err("refused");
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("member `{member}`")), "{e}");
    assert!(e.contains("none of its prepared writes"), "{e}");
    assert!(e.contains("hint:"), "{e}");
}
