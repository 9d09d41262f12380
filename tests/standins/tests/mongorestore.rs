//! The stand-in mongorestore: the mongo-tools known answer for --oplogReplay and
//! --oplogLimit, its argument contract, replay rules (transactions, skips, order),
//! the record file, and its fault knobs.

mod common;

use bson::{doc, Bson, Document, Timestamp};
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn restore(m: &Mongod, args: &[&str]) -> std::process::Output {
    restore_env(m, args, &[])
}

fn restore_env(m: &Mongod, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let port = m.port.to_string();
    let mut all = vec!["--host", "127.0.0.1", "--port", port.as_str()];
    all.extend_from_slice(args);
    run_tool(MONGORESTORE, &all, env)
}

async fn known_answer(dump: &Path) {
    let m = start_mongod(&[], &[]);
    let c = client(m.port).await;
    let d = dump.to_str().unwrap();
    let cases: [(&[&str], Vec<i32>); 3] = [
        (&["--dir", d], (0..=9).collect()),
        (&["--oplogReplay", "--dir", d], (0..=14).collect()),
        (
            &["--oplogReplay", "--oplogLimit", "1416342266:0", "--dir", d],
            (0..=13).collect(),
        ),
    ];
    for (args, want) in cases {
        c.database("test")
            .collection::<Document>("data")
            .drop()
            .await
            .unwrap();
        let out = restore(&m, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert_eq!(
            ids(&c, "test", "data").await,
            want,
            "{args:?}: {}",
            text(&out)
        );
    }
}

#[tokio::test]
async fn known_answer_on_a_generated_dump() {
    let tmp = tempfile::tempdir().unwrap();
    known_answer(&known_answer_dump(tmp.path())).await;
}

#[tokio::test]
async fn known_answer_on_mongo_tools_peer_data() {
    let peer = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/peer-data/mongo-tools/test/qa-tests/jstests/restore/testdata/dump_with_oplog");
    if !peer.is_dir() {
        eprintln!(
            "skipping: peer data not found at {} (only present in the project's workspace)",
            peer.display()
        );
        return;
    }
    known_answer(&peer).await;
}

#[tokio::test]
async fn log_lines_and_record_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = known_answer_dump(tmp.path());
    let m = start_mongod(&[], &[]);
    let cfg = tmp.path().join("restore.yaml");
    std::fs::write(&cfg, "password: \"s3cret\"\n").unwrap();
    let rec = tmp.path().join("record.jsonl");
    let out = restore_env(
        &m,
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--oplogReplay",
            "--oplogLimit",
            "1416342265:4",
            "-v",
            "--stopOnError",
            "--numParallelCollections",
            "1",
            dump.to_str().unwrap(),
        ],
        &[("PITR_STANDIN_RECORD", rec.to_str().unwrap())],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains(&format!(
            "\trestoring test.data from {}",
            dump.join("test/data.bson").display()
        )),
        "{t}"
    );
    assert!(
        t.contains("\treplaying oplog") && t.contains("\tapplied 2 oplog entries"),
        "{t}"
    );
    assert!(
        t.contains("\t10 document(s) restored successfully. 0 document(s) failed to restore."),
        "{t}"
    );
    assert!(
        t.lines().all(|l| l.len() > 29 && &l[23..28] == "+0000"),
        "every line starts with a tools time stamp: {t}"
    );
    let r = pitr_standins::record::read_all(&rec);
    assert_eq!(r.len(), 1);
    let r = &r[0];
    assert_eq!(r["tool"], "mongorestore");
    assert_eq!(r["password_from_config"], true);
    assert!(!r["argv"].to_string().contains("s3cret"));
    assert_eq!(r["entries_applied"], 2);
    assert_eq!(
        r["last_applied_ts"],
        serde_json::json!({"t": 1416342265u32, "i": 3})
    );
    assert_eq!(
        r["oplog_limit"],
        serde_json::json!({"t": 1416342265u32, "i": 4})
    );
    assert_eq!(
        r["stopped_at_ts"],
        serde_json::json!({"t": 1416342265u32, "i": 4})
    );
    assert_eq!(r["documents_restored"], 10);
    assert_eq!(r["exit_code"], 0);
}

/// Refusals that need no server (the stand-in checks options before connecting).
#[test]
fn argument_contract() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--oplogReplay", "--oplogLimit", "5:1:2", d], 1, "error parsing timestamp argument to --oplogLimit: too many : characters"),
        (&["--oplogReplay", "--oplogLimit", "4294967296:0", d], 1, "error parsing timestamp seconds: strconv.ParseUint: parsing \"4294967296\": value out of range"),
        (&["--oplogReplay", "--oplogLimit", "5:x", d], 1, "error parsing timestamp increment"),
        (&["--oplogLimit", "5:1", d], 1, "cannot use --oplogLimit without --oplogReplay enabled"),
        (&["--oplogReplay", "--nsInclude", "test.*", d], 1, "cannot use --oplogReplay with includes specified"),
        (&["--oplogReplay", "-d", "test", d], 1, "cannot use --oplogReplay with includes specified"),
        (&["--oplogReplay", "--nsExclude", "test.*", d], 1, "cannot use --oplogReplay with excludes specified"),
        (&["--oplogReplay", "--nsFrom", "a.*", "--nsTo", "b.*", d], 1, "cannot use --oplogReplay with namespace renames specified"),
        (&["--oplogFile", "x.bson", d], 1, "cannot use --oplogFile without --oplogReplay enabled"),
        (&["--preserveUUID", d], 1, "cannot specify --preserveUUID without --drop"),
        (&["--dir", d, d], 1, "cannot use both --dir and a positional argument"),
        (&["--bogus", d], 1, "error parsing command line options: unknown flag `bogus'"),
        (&["--port"], 1, "expected argument for flag `--port'"),
        (&["--password", "x", d], 3, "pitr must pass secrets via --config"),
        (&["-pX", d], 3, "refusing -p"),
        (&["--uri", "mongodb://u:pw@127.0.0.1:1/", d], 3, "connection string with a password"),
        (&["--config", "/nonexistent/cfg.yaml", d], 1, "error opening file with --config: open /nonexistent/cfg.yaml: no such file or directory"),
    ];
    for (args, code, msg) in cases {
        let out = run_tool(MONGORESTORE, args, &[]);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains(msg),
            "{args:?}: want `{msg}` in:\n{}",
            text(&out)
        );
    }
    let out = run_tool(MONGORESTORE, &["--version"], &[]);
    assert!(out.status.success());
    assert!(text(&out).starts_with("mongorestore version: 100.9.4\n"));
    let bad_cfg = tmp.path().join("bad.yaml");
    std::fs::write(&bad_cfg, "user: x\n").unwrap();
    let out = run_tool(
        MONGORESTORE,
        &["--config", bad_cfg.to_str().unwrap(), d],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("field user not found"),
        "{}",
        text(&out)
    );
}

#[test]
fn checks_that_need_the_dump_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = known_answer_dump(tmp.path());
    let bare = tmp.path().join("bare");
    std::fs::create_dir_all(bare.join("test")).unwrap();
    write_bson(&bare.join("test/data.bson"), &[doc! {"_id": 1}]);
    let m = start_mongod(&[], &[]);

    let out = restore(&m, &["--oplogReplay", bare.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out)
            .contains("Failed: no oplog file to replay; make sure you run mongodump with --oplog"),
        "{}",
        text(&out)
    );

    let other = tmp.path().join("other.bson");
    write_bson(&other, &[]);
    let out = restore(
        &m,
        &[
            "--oplogReplay",
            "--oplogFile",
            other.to_str().unwrap(),
            dump.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out)
        .contains("cannot provide both an oplog.bson file and an oplog file with --oplogFile"));

    let missing = tmp.path().join("missing");
    let out = restore(&m, &[missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains(&format!(
        "mongorestore target '{}' invalid",
        missing.display()
    )));

    // --dryRun returns before the oplog is read: a corrupt oplog passes.
    std::fs::write(bare.join("oplog.bson"), b"\x05\x00\x00").unwrap();
    let out = restore(&m, &["--dryRun", "--oplogReplay", bare.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("dry run completed"));
}

fn txn_entry(t: u32, i: u32, lsid: u8, txn: i64, o: Document) -> Document {
    doc! {
        "lsid": {"id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![lsid; 16] }},
        "txnNumber": txn,
        "op": "c", "ns": "admin.$cmd", "o": o,
        "ts": Timestamp { time: t, increment: i }, "t": 1i64, "v": 2,
    }
}

fn ins(id: i32) -> Bson {
    Bson::Document(doc! {"op": "i", "ns": "test.data", "o": {"_id": id}})
}

/// A dump of `test.data` (`_id` 0-9) with the given oplog.
fn dump_with(root: &Path, oplog: &[Document]) -> PathBuf {
    let dump = known_answer_dump(root);
    write_bson(&dump.join("oplog.bson"), oplog);
    dump
}

#[tokio::test]
async fn replay_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let e = |t: u32, i: u32, d: Document| -> Document {
        let mut d = d;
        d.insert(
            "ts",
            Timestamp {
                time: t,
                increment: i,
            },
        );
        d
    };
    let oplog = vec![
        // skipped: no-op, internal namespace, index-build bookkeeping
        e(
            10,
            1,
            doc! {"op": "n", "ns": "", "o": {"msg": "periodic noop"}},
        ),
        e(
            10,
            2,
            doc! {"op": "d", "ns": "config.system.sessions", "o": {"_id": 1}},
        ),
        e(
            10,
            3,
            doc! {"op": "c", "ns": "test.$cmd", "o": {"startIndexBuild": "data", "indexBuildUUID": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![1; 16] }}},
        ),
        // plain CRUD, with a `ui` that must be stripped (no such UUID on the target)
        e(
            11,
            1,
            doc! {"op": "u", "ns": "test.data", "ui": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![9; 16] }, "o": {"$v": 2, "diff": {"i": {"x": 1}}}, "o2": {"_id": 0}},
        ),
        e(11, 2, doc! {"op": "d", "ns": "test.data", "o": {"_id": 1}}),
        // a non-transaction applyOps batch
        e(
            12,
            1,
            doc! {"op": "c", "ns": "admin.$cmd", "o": {"applyOps": [ins(106), ins(107)]}},
        ),
        // an unprepared transaction in one entry: applied at once
        txn_entry(13, 1, 1, 1, doc! {"applyOps": [ins(100)]}),
        // a large transaction: partial parts wait for the last one
        txn_entry(
            14,
            1,
            2,
            1,
            doc! {"applyOps": [ins(101)], "partialTxn": true},
        ),
        txn_entry(14, 2, 2, 1, doc! {"applyOps": [ins(102)]}),
        // prepared and committed
        txn_entry(15, 1, 3, 1, doc! {"applyOps": [ins(103)], "prepare": true}),
        txn_entry(
            15,
            2,
            3,
            1,
            doc! {"commitTransaction": 1, "commitTimestamp": Timestamp { time: 15, increment: 1 }},
        ),
        // prepared and aborted: nothing
        txn_entry(16, 1, 4, 1, doc! {"applyOps": [ins(104)], "prepare": true}),
        txn_entry(16, 2, 4, 1, doc! {"abortTransaction": 1}),
        // a create, then inserts into the new collection; an index build
        e(
            17,
            1,
            doc! {"op": "c", "ns": "other.$cmd", "o": {"create": "things"}},
        ),
        e(
            17,
            2,
            doc! {"op": "i", "ns": "other.things", "o": {"_id": 1, "k": 5}},
        ),
        e(
            17,
            3,
            doc! {"op": "c", "ns": "other.$cmd", "o": {"createIndexes": "things", "v": 2, "key": {"k": 1}, "name": "k_1"}},
        ),
        // prepared before the limit, committed at it: not applied
        txn_entry(18, 1, 5, 1, doc! {"applyOps": [ins(105)], "prepare": true}),
        txn_entry(30, 1, 5, 1, doc! {"commitTransaction": 1}),
        // after the limit entry, even entries before the limit are lost (unsorted file)
        e(
            19,
            1,
            doc! {"op": "i", "ns": "test.data", "o": {"_id": 200}},
        ),
    ];
    let dump = dump_with(tmp.path(), &oplog);
    let m = start_mongod(&[], &[]);
    let c = client(m.port).await;
    let rec = tmp.path().join("rec.jsonl");
    let out = restore_env(
        &m,
        &[
            "--oplogReplay",
            "--oplogLimit",
            "30:1",
            dump.to_str().unwrap(),
        ],
        &[("PITR_STANDIN_RECORD", rec.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", text(&out));
    let mut want: Vec<i32> = (0..=9).filter(|i| *i != 1).collect();
    want.extend([100, 101, 102, 103, 106, 107]);
    assert_eq!(ids(&c, "test", "data").await, want, "{}", text(&out));
    let zero = c
        .database("test")
        .collection::<Document>("data")
        .find_one(doc! {"_id": 0})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(zero.get_i32("x").unwrap(), 1);
    assert_eq!(
        c.database("other")
            .collection::<Document>("things")
            .list_index_names()
            .await
            .unwrap(),
        vec!["_id_", "k_1"]
    );
    let r = &pitr_standins::record::read_all(&rec)[0];
    assert_eq!(r["stopped_at_ts"], serde_json::json!({"t": 30, "i": 1}));
    assert_eq!(r["last_applied_ts"], serde_json::json!({"t": 18, "i": 1}));
}

#[test]
fn unknown_oplog_command_is_fatal_and_missing_namespaces_are_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let m = start_mongod(&[], &[]);
    let dump = dump_with(
        &tmp.path().join("a"),
        &[
            doc! {"op": "c", "ns": "test.$cmd", "o": {"frobnicate": "data"}, "ts": Timestamp { time: 5, increment: 1 }},
        ],
    );
    let out = restore(&m, &["--oplogReplay", dump.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(
            "Failed: restore error: error applying oplog: unknown oplog command name frobnicate"
        ),
        "{}",
        text(&out)
    );

    let dump = dump_with(
        &tmp.path().join("b"),
        &[insert_entry("nowhere.coll", 5, 1, doc! {"_id": 1})],
    );
    let out = restore(&m, &["--oplogReplay", dump.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        // The server's wording (src/mongo/db/repl/apply_ops.cpp, _applyOps).
        text(&out).contains(
            "(NamespaceNotFound) cannot apply insert or update operation on a non-existent namespace nowhere.coll"
        ),
        "{}",
        text(&out)
    );
}

fn big_dump(root: &Path) -> PathBuf {
    let dump = root.join("big");
    std::fs::create_dir_all(dump.join("shop")).unwrap();
    let docs: Vec<Document> = (0..20).map(|i| doc! {"_id": i}).collect();
    write_bson(&dump.join("shop/orders.bson"), &docs);
    dump
}

#[tokio::test]
async fn fault_fail_midway() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = big_dump(tmp.path());
    let m = start_mongod(&[], &[]);
    let out = restore_env(
        &m,
        &[dump.to_str().unwrap()],
        &[("PITR_STANDIN_MONGORESTORE_FAULT", "fail-midway")],
    );
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    assert!(
        t.contains("\tFailed: shop.orders: error restoring from") && t.contains("fail-midway"),
        "{t}"
    );
    assert!(t.contains("10 document(s) restored successfully"), "{t}");
    let c = client(m.port).await;
    assert_eq!(
        c.database("shop")
            .collection::<Document>("orders")
            .count_documents(doc! {})
            .await
            .unwrap(),
        10
    );
}

#[test]
fn fault_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = big_dump(tmp.path());
    let m = start_mongod(&[], &[]);
    // mongod ignores the mongorestore-only entry in the shared variable
    let out = restore_env(
        &m,
        &[dump.to_str().unwrap()],
        &[("PITR_STANDIN_FAULT", "crash")],
    );
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", text(&out));
}

fn spawn_restore(m: &Mongod, dump: &Path, fault: &str) -> Proc {
    let child = Command::new(MONGORESTORE)
        .args(["--port", &m.port.to_string(), dump.to_str().unwrap()])
        .env("PITR_STANDIN_MONGORESTORE_FAULT", fault)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Proc { child }
}

#[test]
fn fault_hang_and_ignore_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = big_dump(tmp.path());
    let m = start_mongod(&[], &[]);

    let mut p = spawn_restore(&m, &dump, "hang");
    std::thread::sleep(Duration::from_millis(700));
    assert!(p.child.try_wait().unwrap().is_none(), "hangs");
    p.signal(libc::SIGTERM);
    assert_eq!(
        p.wait_for(Duration::from_secs(5))
            .expect("SIGTERM ends a hang")
            .signal(),
        Some(libc::SIGTERM)
    );

    let mut p = spawn_restore(&m, &dump, "ignore-sigterm");
    std::thread::sleep(Duration::from_millis(700));
    p.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(p.child.try_wait().unwrap().is_none(), "survives SIGTERM");
    p.signal(libc::SIGKILL);
    assert_eq!(
        p.wait_for(Duration::from_secs(5))
            .expect("SIGKILL")
            .signal(),
        Some(libc::SIGKILL)
    );
}

#[tokio::test]
async fn connection_string_from_config_or_uri() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = known_answer_dump(tmp.path());
    let m = start_mongod(&[], &[]);
    let c = client(m.port).await;
    let cfg = tmp.path().join("c.yaml");
    std::fs::write(
        &cfg,
        format!(
            "uri: 'mongodb://127.0.0.1:{}/?directConnection=true'\n",
            m.port
        ),
    )
    .unwrap();
    let rec = tmp.path().join("rec.jsonl");
    let out = run_tool(
        MONGORESTORE,
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--drop",
            dump.to_str().unwrap(),
        ],
        &[("PITR_STANDIN_RECORD", rec.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        pitr_standins::record::read_all(&rec)[0]["uri_from_config"],
        true
    );
    assert_eq!(ids(&c, "test", "data").await.len(), 10);

    let uri = m.uri();
    let out = run_tool(
        MONGORESTORE,
        &[
            "--uri",
            &uri,
            "--drop",
            "--oplogReplay",
            dump.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(ids(&c, "test", "data").await.len(), 15);

    let out = run_tool(
        MONGORESTORE,
        &["--uri", &uri, "--host", "127.0.0.1", dump.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("illegal argument combination: cannot specify --host and --uri"));
}
