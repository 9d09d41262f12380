//! The REAL mongo-tools (100.18.0 and 100.11.0) against the stand-in mongod: every
//! restore and dump form pitr's end-to-end tests use, the peer dumps recorded from
//! real servers, and the server behaviours pitr's verification relies on (insert
//! path, duplicate keys, dbHash, applyOps rules per claimed release).
//!
//! Each test loops over the tool releases found (see `real/mod.rs`) and skips with
//! `SKIPPED <test>: <reason>` when there are none (fails when `CI` is set).

mod common;
mod real;

use bson::{doc, Bson, Document, Timestamp};
use real::*;
use std::path::Path;

fn ts(t: u32, i: u32) -> Timestamp {
    Timestamp {
        time: t,
        increment: i,
    }
}

fn ids(docs: &[Document]) -> Vec<i64> {
    docs.iter()
        .map(|d| match d.get("_id") {
            Some(Bson::Int32(i)) => *i as i64,
            Some(Bson::Int64(i)) => *i,
            Some(Bson::Double(f)) => *f as i64,
            other => panic!("non-numeric _id {other:?}"),
        })
        .collect()
}

/// The mongo-tools known answer (peer README): 10 documents, 15 with the oplog, 14
/// with `--oplogLimit 1416342266:0`. Also the dbHash known answer: the server's hash
/// of `test.data` is the MD5 of the dump file's own bytes in `_id` order.
#[tokio::test]
async fn known_answer_dump_with_oplog() {
    let test = "known_answer_dump_with_oplog";
    let tools = tools_or_skip(test);
    let Some(peer) = peer_or_skip(test) else {
        return;
    };
    let dump = peer.join("test/qa-tests/jstests/restore/testdata/dump_with_oplog");
    let dump = dump.to_str().unwrap();
    for t in &tools {
        for (args, want) in [
            (vec![], 10),
            (vec!["--oplogReplay"], 15),
            (vec!["--oplogReplay", "--oplogLimit", "1416342266:0"], 14),
        ] {
            let m = mongod("replset", None);
            let mut all = args.clone();
            all.push(dump);
            let out = t.restore(&m, &all);
            expect_exit(&out, 0, &format!("{} {all:?}", t.version));
            // The count line counts dump documents only, never oplog entries.
            assert_eq!(restore_counts(&out), (10, 0), "{}", text(&out));
            let c = common::client(m.port).await;
            let got = ids(&docs(&c, "test", "data").await);
            assert_eq!(
                got,
                (0..want).collect::<Vec<i64>>(),
                "{} {all:?}",
                t.version
            );
            if args.is_empty() {
                let h = db_hash(&c, "test").await;
                let expected = md5_of_file_in_id_order(&Path::new(dump).join("test/data.bson"));
                assert_eq!(
                    h.get_document("collections")
                        .unwrap()
                        .get_str("data")
                        .unwrap(),
                    expected
                );
            }
        }
    }
}

/// Everything pitr's tests restore: typed values, a capped collection, a secondary
/// index, a view, a time-series collection (buckets written directly), a user and a
/// role (merged as mongorestore merges them). The last write is a plain insert, so
/// that the entry `mongodump --oplog` captures replays harmlessly.
async fn fill_source(c: &mongodb::Client) {
    let shop = c.database("shop");
    let orders = shop.collection::<Document>("orders");
    orders
        .insert_many(vec![
            // `_id` not first: the server moves it.
            doc! {"a": 1i64, "_id": 1, "b": 1.5, "c": bson::Decimal128::from_bytes([1; 16]),
                  "s": "x", "nested": {"z": 1, "a": 2}, "arr": [1, "two", {"three": 3}],
                  "dt": bson::DateTime::from_millis(1_700_000_000_000), "t": ts(5, 1),
                  "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0, 1, 2] },
                  "n": Bson::Null, "yes": true, "re": bson::Regex { pattern: "^a".into(), options: "i".into() }},
            doc! {"_id": 2i64, "a": 2, "s": "y"},
            doc! {"_id": 3.5, "a": 3.0, "s": "z"},
            doc! {"_id": "str", "a": -1},
        ])
        .await
        .expect("insert orders");
    orders
        .create_index(mongodb::IndexModel::builder().keys(doc! {"s": 1}).build())
        .await
        .expect("index");
    shop.run_command(doc! {"create": "log", "capped": true, "size": 4096})
        .await
        .expect("capped");
    shop.collection::<Document>("log")
        .insert_many(vec![doc! {"_id": 2, "m": "b"}, doc! {"_id": 1, "m": "a"}])
        .await
        .expect("insert log");
    shop.run_command(doc! {"create": "big_orders", "viewOn": "orders", "pipeline": [{"$match": {"a": {"$gt": 1}}}]})
        .await
        .expect("view");
    shop.run_command(
        doc! {"create": "metrics", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await
    .expect("time-series");
    let (o1, o2) = (bson::oid::ObjectId::new(), bson::oid::ObjectId::new());
    let (d1, d2) = (
        bson::DateTime::from_millis(1_700_000_000_000),
        bson::DateTime::from_millis(1_700_000_001_000),
    );
    shop.collection::<Document>("system.buckets.metrics")
        .insert_one(doc! {
            "_id": bson::oid::ObjectId::new(),
            "control": {"version": 1, "min": {"_id": o1, "t": d1, "v": 1}, "max": {"_id": o2, "t": d2, "v": 2}},
            "meta": "sensor-a",
            "data": {"_id": {"0": o1, "1": o2}, "t": {"0": d1, "1": d2}, "v": {"0": 1, "1": 2}},
        })
        .await
        .expect("bucket");
    let admin = c.database("admin");
    admin
        .collection::<Document>("tempusers")
        .insert_one(doc! {"_id": "shop.clerk", "userId": bson::Binary::from_uuid(bson::Uuid::new()),
            "user": "clerk", "db": "shop", "credentials": {}, "roles": [{"role": "reader", "db": "shop"}]})
        .await
        .expect("temp user");
    admin
        .collection::<Document>("temproles")
        .insert_one(doc! {"_id": "shop.reader", "role": "reader", "db": "shop", "privileges": [], "roles": []})
        .await
        .expect("temp role");
    admin
        .run_command(
            doc! {"_mergeAuthzCollections": 1, "tempUsersCollection": "admin.tempusers",
            "tempRolesCollection": "admin.temproles", "drop": false, "db": ""},
        )
        .await
        .expect("merge");
    admin
        .collection::<Document>("tempusers")
        .drop()
        .await
        .unwrap();
    admin
        .collection::<Document>("temproles")
        .drop()
        .await
        .unwrap();
    orders
        .insert_one(doc! {"_id": 99, "last": true})
        .await
        .expect("last write");
}

/// What must survive a dump and a restore: per-collection hashes of `shop`, the
/// collection types and options, index names, users and roles.
async fn assert_same_data(src: &mongodb::Client, dst: &mongodb::Client, what: &str) {
    let (a, b) = (db_hash(src, "shop").await, db_hash(dst, "shop").await);
    assert_eq!(
        a.get("collections"),
        b.get("collections"),
        "{what}: collection hashes"
    );
    assert_eq!(a.get("md5"), b.get("md5"), "{what}: md5");
    assert_eq!(a.get("capped"), b.get("capped"), "{what}: capped");
    let strip = |v: Vec<Document>| -> Vec<Document> {
        v.into_iter()
            .map(|mut d| {
                d.remove("info");
                d
            })
            .collect()
    };
    assert_eq!(
        strip(collections(src, "shop").await),
        strip(collections(dst, "shop").await),
        "{what}: listCollections"
    );
    for coll in ["orders", "metrics"] {
        assert_eq!(
            index_names(src, "shop", coll).await,
            index_names(dst, "shop", coll).await,
            "{what}: indexes of {coll}"
        );
    }
    for coll in ["system.users", "system.roles"] {
        assert_eq!(
            docs(src, "admin", coll).await,
            docs(dst, "admin", coll).await,
            "{what}: admin.{coll}"
        );
    }
}

/// mongodump then mongorestore in every form: directory (with `--oplog` /
/// `--oplogReplay`), `--gzip` directory, `--archive=FILE` with and without `--gzip`,
/// and `--archive` through stdout/stdin with and without `--gzip`.
#[tokio::test]
async fn dump_and_restore_round_trip_in_every_form() {
    let tools = tools_or_skip("dump_and_restore_round_trip_in_every_form");
    let src = mongod("replset", None);
    let sc = common::client(src.port).await;
    fill_source(&sc).await;
    let tmp = tempfile::tempdir().unwrap();
    for t in &tools {
        let base = tmp.path().join(&t.version);
        std::fs::create_dir_all(&base).unwrap();
        let dir = base.join("dir");
        let gz = base.join("gz");
        let arch = base.join("a.archive");
        let archgz = base.join("a.archive.gz");
        let forms: Vec<(&str, Vec<String>, Vec<String>)> = vec![
            (
                "dir+oplog",
                vec!["--oplog".into(), format!("--out={}", dir.display())],
                vec!["--oplogReplay".into(), dir.display().to_string()],
            ),
            (
                "gzip dir",
                vec!["--gzip".into(), format!("--out={}", gz.display())],
                vec!["--gzip".into(), gz.display().to_string()],
            ),
            (
                "archive file+oplog",
                vec!["--oplog".into(), format!("--archive={}", arch.display())],
                vec![
                    "--oplogReplay".into(),
                    format!("--archive={}", arch.display()),
                ],
            ),
            (
                "archive file gzip",
                vec!["--gzip".into(), format!("--archive={}", archgz.display())],
                vec!["--gzip".into(), format!("--archive={}", archgz.display())],
            ),
        ];
        for (what, dargs, rargs) in forms {
            let what = format!("{} {what}", t.version);
            let d: Vec<&str> = dargs.iter().map(String::as_str).collect();
            let out = t.dump(&src, &d);
            expect_exit(&out, 0, &format!("{what}: mongodump"));
            let dst = mongod("replset", None);
            let r: Vec<&str> = rargs.iter().map(String::as_str).collect();
            let out = t.restore(&dst, &r);
            expect_exit(&out, 0, &format!("{what}: mongorestore"));
            assert_eq!(
                restore_counts(&out).1,
                0,
                "{what}: failures\n{}",
                text(&out)
            );
            assert_same_data(&sc, &common::client(dst.port).await, &what).await;
        }
        for gzip in [false, true] {
            let what = format!("{} archive stdout->stdin gzip={gzip}", t.version);
            let mut d = vec!["--archive"];
            if gzip {
                d.push("--gzip");
            }
            let out = t.dump(&src, &d);
            expect_exit(&out, 0, &format!("{what}: mongodump"));
            assert!(!out.stdout.is_empty(), "{what}: nothing on stdout");
            let dst = mongod("replset", None);
            let out = t.restore_stdin(&dst, &d, Some(out.stdout.clone()));
            expect_exit(&out, 0, &format!("{what}: mongorestore"));
            assert_same_data(&sc, &common::client(dst.port).await, &what).await;
        }
        // The directory layout of the dump: a view is metadata only, a time-series
        // collection is its buckets plus metadata of type `timeseries`.
        let shop = dir.join("shop");
        assert!(shop.join("orders.bson").is_file());
        assert!(
            !shop.join("big_orders.bson").exists(),
            "a view has no data file"
        );
        let view: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(shop.join("big_orders.metadata.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(view["type"], "view");
        assert_eq!(view["options"]["viewOn"], "orders");
        assert!(shop.join("system.buckets.metrics.bson").is_file());
        let ts_meta: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(shop.join("metrics.metadata.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(ts_meta["type"], "timeseries");
        assert_eq!(ts_meta["options"]["timeseries"]["timeField"], "t");
        assert!(gz.join("shop/orders.bson.gz").is_file());
        assert!(dir.join("admin/system.users.bson").is_file());
        assert_eq!(
            raw_docs(&dir.join("oplog.bson")).len(),
            1,
            "the dump's oplog: the newest entry only"
        );
        // Only 100.12+ writes prelude.json in directory dumps.
        assert_eq!(
            dir.join("prelude.json").is_file(),
            t.ver >= (100, 12, 0),
            "prelude.json"
        );
    }
}

/// A small dump written here: `app.c` with `_id` 1..=3 and `other.d` with `_id` 1.
fn small_dump(root: &Path) -> std::path::PathBuf {
    let dir = root.join("small");
    let meta = r#"{"options":{},"indexes":[{"v":2,"key":{"_id":1},"name":"_id_"},{"v":2,"key":{"k":1},"name":"k_1"}],"uuid":"0123456789abcdef0123456789abcdef","collectionName":"c","type":"collection"}"#;
    write_coll(
        &dir,
        "app",
        "c",
        &[
            doc! {"_id": 1, "k": "a"},
            doc! {"_id": 2, "k": "b"},
            doc! {"_id": 3, "k": "c"},
        ],
        Some(meta),
    );
    write_coll(&dir, "other", "d", &[doc! {"_id": 1}], None);
    dir
}

/// `--drop`, `--preserveUUID`, `--nsInclude`, `--nsFrom/--nsTo`.
#[tokio::test]
async fn restore_drop_preserve_uuid_and_namespace_options() {
    let tools = tools_or_skip("restore_drop_preserve_uuid_and_namespace_options");
    let tmp = tempfile::tempdir().unwrap();
    let dump = small_dump(tmp.path());
    let dump = dump.to_str().unwrap();
    for t in &tools {
        let v = &t.version;
        // --drop replaces what is there, --preserveUUID keeps the dump's UUID.
        let m = mongod("replset", None);
        let c = common::client(m.port).await;
        c.database("app")
            .collection::<Document>("c")
            .insert_many(vec![doc! {"_id": 1, "k": "old"}, doc! {"_id": 50}])
            .await
            .unwrap();
        let out = t.restore(&m, &["--drop", "--preserveUUID", dump]);
        expect_exit(&out, 0, &format!("{v} --drop --preserveUUID"));
        assert_eq!(
            docs(&c, "app", "c").await,
            vec![
                doc! {"_id": 1, "k": "a"},
                doc! {"_id": 2, "k": "b"},
                doc! {"_id": 3, "k": "c"}
            ],
            "{v}"
        );
        let info = collections(&c, "app").await[0]
            .get_document("info")
            .unwrap()
            .clone();
        let Some(Bson::Binary(uuid)) = info.get("uuid") else {
            panic!("{v}: no uuid in {info}");
        };
        assert_eq!(
            uuid.bytes
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "0123456789abcdef0123456789abcdef",
            "{v}: --preserveUUID"
        );
        assert_eq!(
            index_names(&c, "app", "c").await,
            vec!["_id_", "k_1"],
            "{v}"
        );
        // --preserveUUID without --drop is refused by the tool itself.
        let out = t.restore(&m, &["--preserveUUID", dump]);
        expect_exit(&out, 1, &format!("{v} --preserveUUID alone"));
        assert!(
            text(&out).contains("cannot specify --preserveUUID without --drop"),
            "{}",
            text(&out)
        );

        // --nsInclude restores only what matches.
        let m = mongod("standalone", None);
        let c = common::client(m.port).await;
        let out = t.restore(&m, &["--nsInclude", "other.*", dump]);
        expect_exit(&out, 0, &format!("{v} --nsInclude"));
        assert_eq!(restore_counts(&out), (1, 0));
        assert_eq!(count(&c, "other", "d").await, 1);
        assert_eq!(
            count(&c, "app", "c").await,
            0,
            "{v}: app.c was not included"
        );

        // --nsFrom/--nsTo rename.
        let out = t.restore(&m, &["--nsFrom", "app.*", "--nsTo", "renamed.*", dump]);
        expect_exit(&out, 0, &format!("{v} --nsFrom/--nsTo"));
        assert_eq!(count(&c, "renamed", "c").await, 3, "{v}");
        assert_eq!(count(&c, "app", "c").await, 0, "{v}");
        assert_eq!(
            index_names(&c, "renamed", "c").await,
            vec!["_id_", "k_1"],
            "{v}"
        );
    }
}

/// Duplicate `_id`s: each is a write error 11000 from the server; without
/// `--stopOnError` mongorestore logs `continuing through error: E11000 ...`, counts
/// the failures and exits 0; with it, it prints `Failed: ...` and exits 1. Both
/// releases end with the same count line.
#[tokio::test]
async fn duplicate_keys_are_reported_like_the_real_tools_do() {
    let tools = tools_or_skip("duplicate_keys_are_reported_like_the_real_tools_do");
    let tmp = tempfile::tempdir().unwrap();
    let dump = small_dump(tmp.path());
    let dump = dump.to_str().unwrap();
    for t in &tools {
        let v = &t.version;
        let m = mongod("standalone", None);
        let c = common::client(m.port).await;
        c.database("app")
            .collection::<Document>("c")
            .insert_many(vec![
                doc! {"_id": 1, "k": "kept"},
                doc! {"_id": 3, "k": "kept"},
            ])
            .await
            .unwrap();
        let out = t.restore(&m, &["--nsInclude", "app.*", dump]);
        expect_exit(&out, 0, &format!("{v} duplicates without --stopOnError"));
        let all = text(&out);
        assert!(all.contains("continuing through error: E11000 duplicate key error collection: app.c index: _id_ dup key: { _id: 1 }"), "{all}");
        assert!(
            all.contains(&format!(
                "finished restoring {} (1 document, 2 failures)",
                t.q("app.c")
            )),
            "{all}"
        );
        assert!(
            all.contains("1 document(s) restored successfully. 2 document(s) failed to restore."),
            "{all}"
        );
        assert_eq!(
            docs(&c, "app", "c").await,
            vec![
                doc! {"_id": 1, "k": "kept"},
                doc! {"_id": 2, "k": "b"},
                doc! {"_id": 3, "k": "kept"}
            ],
            "{v}: the existing documents are untouched"
        );

        // --stopOnError still sends the batch unordered (`ordered: false`): `_id` 2
        // goes in although `_id` 1 failed before it; the counts are exact.
        let m = mongod("standalone", None);
        let c = common::client(m.port).await;
        c.database("app")
            .collection::<Document>("c")
            .insert_many(vec![
                doc! {"_id": 1, "k": "kept"},
                doc! {"_id": 3, "k": "kept"},
            ])
            .await
            .unwrap();
        let out = t.restore(&m, &["--nsInclude", "app.*", "--stopOnError", dump]);
        expect_exit(&out, 1, &format!("{v} duplicates with --stopOnError"));
        assert_eq!(count(&c, "app", "c").await, 3, "{v}: `_id` 2 was inserted");

        let all = text(&out);
        assert!(
            all.contains("Failed: app.c: error restoring from ")
                && all.contains(
                    "E11000 duplicate key error collection: app.c index: _id_ dup key: { _id: 1 }"
                ),
            "{all}"
        );
        assert_eq!(restore_counts(&out), (1, 2), "{v}: {all}");
        // With an unacknowledged write concern nothing is counted and nothing fails:
        // the last line is `done`, the exit code 0, whatever the server refused.
        let out = t.restore(
            &m,
            &["--nsInclude", "app.*", "--writeConcern", "{w: 0}", dump],
        );
        expect_exit(&out, 0, &format!("{v} w:0"));
        let all = text(&out);
        assert!(all.trim_end().ends_with("\tdone"), "{all}");
        assert!(!all.contains("document(s) restored successfully"), "{all}");
    }
}

/// Buckets of a time-series collection hold one entry per measurement under
/// `data.<timeField>`: the measurement count, computed from the buckets.
async fn measurements(c: &mongodb::Client, db: &str, buckets: &str, time_field: &str) -> usize {
    docs(c, db, buckets)
        .await
        .iter()
        .map(|b| {
            b.get_document("data")
                .and_then(|d| d.get_document(time_field))
                .map(|t| t.len())
                .unwrap_or(0)
        })
        .sum()
}

/// Dumps recorded from real servers, with the answers mongo-tools' own tests expect
/// (`mongorestore/oplog_test.go`, `mongorestore_test.go`,
/// `mongorestore_archive_test.go`).
#[tokio::test]
async fn peer_dumps_restore_with_their_known_answers() {
    let test = "peer_dumps_restore_with_their_known_answers";
    let tools = tools_or_skip(test);
    let Some(peer) = peer_or_skip(test) else {
        return;
    };
    let td = peer.join("mongorestore/testdata");
    let p = |rel: &str| td.join(rel).display().to_string();
    for t in &tools {
        let v = &t.version;
        // TestOplogRestore: 5 dumped + 5 inserted by the oplog (one inside a
        // non-transaction applyOps) = 10.
        let m = mongod("replset", None);
        let out = t.restore(
            &m,
            &["--oplogReplay", "--drop", "--preserveUUID", &p("oplogdump")],
        );
        expect_exit(&out, 0, &format!("{v} oplogdump"));
        let c = common::client(m.port).await;
        assert_eq!(count(&c, "db1", "c1").await, 10, "{v} oplogdump");

        // TestOplogRestoreWithDuplicateIndexKeys: 2 dumped, one deleted, the other
        // re-inserted by the oplog (an existing _id: replaced) = 1.
        let m = mongod("replset", None);
        let out = t.restore(
            &m,
            &[
                "--oplogReplay",
                "--drop",
                &p("duplicate_index_key_with_oplog"),
            ],
        );
        expect_exit(&out, 0, &format!("{v} duplicate_index_key_with_oplog"));
        let c = common::client(m.port).await;
        assert_eq!(count(&c, "test", "foo").await, 1, "{v}");
        assert_eq!(
            index_names(&c, "test", "foo").await,
            vec!["_id_", "a_1"],
            "{v}"
        );

        // The time-series dump with 872 `$v:2` diff updates on its buckets: 10 buckets
        // restored, 2164 measurements once the oplog is replayed.
        let m = mongod("replset", None);
        let out = t.restore(
            &m,
            &["--oplogReplay", &p("timeseries_tests/ts_dump_with_oplog")],
        );
        expect_exit(&out, 0, &format!("{v} ts_dump_with_oplog"));
        assert_eq!(restore_counts(&out), (10, 0), "{v}");
        assert!(
            text(&out).contains("applied 872 oplog entries"),
            "{}",
            text(&out)
        );
        let c = common::client(m.port).await;
        assert_eq!(
            count(&c, "timeseries_test", "system.buckets.foo_ts").await,
            10
        );
        assert_eq!(
            measurements(&c, "timeseries_test", "system.buckets.foo_ts", "ts").await,
            2164,
            "{v}: measurements after the diffs"
        );
        let names: Vec<(String, String)> = collections(&c, "timeseries_test")
            .await
            .iter()
            .map(|d| {
                (
                    d.get_str("name").unwrap().into(),
                    d.get_str("type").unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("foo_ts", "timeseries"),
                ("system.buckets.foo_ts", "collection"),
                ("system.views", "collection")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .to_vec(),
            "{v}"
        );

        // The same time-series collection from a 5.0 archive.
        let m = mongod("replset", None);
        let out = t.restore(
            &m,
            &[&format!("--archive={}", p("timeseries_tests/dump.archive"))],
        );
        expect_exit(&out, 0, &format!("{v} timeseries dump.archive"));
        assert_eq!(restore_counts(&out), (10, 0), "{v}");
        let c = common::client(m.port).await;
        assert_eq!(
            index_names(&c, "timeseries_test", "foo_ts").await,
            vec!["meta.device_1", "meta_1_ts_1", "ts_1_meta.device_1"],
            "{v}: the dump's indexes plus 7.0's default {{meta, time}} index"
        );

        // TestMongorestoreArchiveWithOplog and the 3.4 archive of test.bar.
        let m = mongod("replset", None);
        let out = t.restore(
            &m,
            &[
                "--oplogReplay",
                "--drop",
                &format!("--archive={}", p("dump-w-oplog.archive")),
            ],
        );
        expect_exit(&out, 0, &format!("{v} dump-w-oplog.archive"));
        let (ok, failed) = restore_counts(&out);
        assert!(ok > 0 && failed == 0, "{v}: {}", text(&out));
        let m = mongod("standalone", None);
        let out = t.restore(&m, &[&format!("--archive={}", p("test.bar.archive"))]);
        expect_exit(&out, 0, &format!("{v} test.bar.archive"));
        let c = common::client(m.port).await;
        assert_eq!(
            count(&c, "test", "bar").await,
            restore_counts(&out).0,
            "{v}"
        );
        // 100.12+ warns about the version gap; 100.11 says nothing.
        assert_eq!(
            text(&out).contains("Cross-version dump & restore is unsupported"),
            t.ver >= (100, 12, 0),
            "{v}: {}",
            text(&out)
        );

        // A --gzip directory with prelude.json.gz: neither release reads the prelude
        // of a directory (both say they don't know what to do with it).
        let m = mongod("standalone", None);
        let out = t.restore(&m, &["--gzip", &p("prelude_test/prelude_gzip")]);
        expect_exit(&out, 0, &format!("{v} prelude_gzip"));
        assert!(
            text(&out).contains("don't know what to do with file"),
            "{}",
            text(&out)
        );
        let c = common::client(m.port).await;
        assert_eq!(count(&c, "test", "foo").await, 1, "{v}");
    }
}

/// `mongodump -d local -c oplog.rs` writes the server's oplog entries byte for byte,
/// in natural order: for peer oplogs loaded through `PITR_STANDIN_OPLOG` (one of them
/// not sorted by `ts`, one of 872 entries, more than a first batch) the dumped file
/// is the loaded file. pitr compares its own `dump-oplog` output with this file.
#[test]
fn mongodump_of_local_oplog_rs_is_the_oplog_byte_for_byte() {
    let test = "mongodump_of_local_oplog_rs_is_the_oplog_byte_for_byte";
    let tools = tools_or_skip(test);
    let Some(peer) = peer_or_skip(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for t in &tools {
        for rel in [
            "mongorestore/testdata/commit_indexes_build/oplog.bson",
            "mongorestore/testdata/timeseries_tests/ts_dump_with_oplog/oplog.bson",
        ] {
            let src = peer.join(rel);
            let m = common::start_mongod(
                &[],
                &[
                    ("PITR_STANDIN_MODE", "replset"),
                    ("PITR_STANDIN_OPLOG", src.to_str().unwrap()),
                ],
            );
            let out_dir = tmp
                .path()
                .join(format!("{}-{}", t.version, rel.replace('/', "_")));
            let out = t.dump(
                &m,
                &[
                    "-d",
                    "local",
                    "-c",
                    "oplog.rs",
                    &format!("--out={}", out_dir.display()),
                ],
            );
            expect_exit(&out, 0, &format!("{} dump {rel}", t.version));
            let dumped = std::fs::read(out_dir.join("local/oplog.rs.bson")).unwrap();
            assert!(
                dumped == std::fs::read(&src).unwrap(),
                "{} {rel}: the dumped oplog differs from the loaded one",
                t.version
            );
        }
    }
}

/// `mongodump --oplog` against a replica set writes `oplog.bson` (the newest entry
/// before the dump to the newest after it); `--db`/`--collection` dump one
/// namespace; a standalone or a mongos refuses `--oplog` with the tools' own errors.
#[tokio::test]
async fn mongodump_oplog_and_namespace_selection() {
    let tools = tools_or_skip("mongodump_oplog_and_namespace_selection");
    let tmp = tempfile::tempdir().unwrap();
    let src = mongod("replset", None);
    let c = common::client(src.port).await;
    c.database("a")
        .collection::<Document>("x")
        .insert_many(vec![doc! {"_id": 1}, doc! {"_id": 2}])
        .await
        .unwrap();
    c.database("b")
        .collection::<Document>("y")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    for t in &tools {
        let v = &t.version;
        let out_dir = tmp.path().join(format!("{v}-oplog"));
        let out = t.dump(&src, &["--oplog", &format!("--out={}", out_dir.display())]);
        expect_exit(&out, 0, &format!("{v} --oplog"));
        let oplog = raw_docs(&out_dir.join("oplog.bson"));
        assert_eq!(
            oplog.len(),
            1,
            "{v}: no write during the dump: only the newest entry"
        );
        let last = bson::Document::from_reader(&mut &oplog[0][..]).unwrap();
        assert_eq!(last.get_str("ns").unwrap(), "b.y", "{v}: {last}");
        assert_eq!(raw_docs(&out_dir.join("a/x.bson")).len(), 2);
        assert!(
            !out_dir.join("local").exists(),
            "{v}: a full dump leaves out `local`"
        );

        let out_dir = tmp.path().join(format!("{v}-one"));
        let out = t.dump(
            &src,
            &[
                "--db",
                "a",
                "--collection",
                "x",
                &format!("--out={}", out_dir.display()),
            ],
        );
        expect_exit(&out, 0, &format!("{v} --db --collection"));
        assert!(
            out_dir.join("a/x.bson").is_file() && !out_dir.join("b").exists(),
            "{v}"
        );
        assert!(
            text(&out).contains(&format!("done dumping {} (2 documents)", t.q("a.x"))),
            "{}",
            text(&out)
        );

        let m = mongod("standalone", None);
        let out = t.dump(
            &m,
            &[
                "--oplog",
                &format!("--out={}", tmp.path().join("no").display()),
            ],
        );
        expect_exit(&out, 1, &format!("{v} --oplog on a standalone"));
        assert!(
            text(&out).contains("Failed: error getting oplog start: error getting recent oplog entry: mongo: no documents in result"),
            "{}",
            text(&out)
        );
        let m = mongod("mongos", None);
        let out = t.dump(
            &m,
            &[
                "--oplog",
                &format!("--out={}", tmp.path().join("no").display()),
            ],
        );
        expect_exit(&out, 1, &format!("{v} --oplog on a mongos"));
        assert!(
            text(&out).contains("Failed: can't use --oplog option when dumping from a mongos"),
            "{}",
            text(&out)
        );
    }
}

/// A dump of `app.c` = `{_id: 1, a: 1}` with a one-entry oplog.
fn dump_with_entry(root: &Path, name: &str, entry: Document) -> String {
    let dir = root.join(name);
    write_coll(&dir, "app", "c", &[doc! {"_id": 1, "a": 1}], None);
    common::write_bson(&dir.join("oplog.bson"), &[entry]);
    dir.display().to_string()
}

fn update_entry(id: i32, o: Document) -> Document {
    doc! {"ts": ts(10, 1), "t": 1i64, "v": 2, "op": "u", "ns": "app.c", "o2": {"_id": id}, "o": o}
}

/// The same replay against the releases the stand-in can play
/// (`PITR_STANDIN_VERSION`): a `$v:1` (or unversioned) `$set` applies on 6.0 and 8.0
/// and is refused by 7.0 (4772600); an update of a missing document is upserted by
/// 6.0 (`alwaysUpsert` defaults to true) and fails the restore on 7.0 and 8.0.
#[tokio::test]
async fn replay_depends_on_the_claimed_server_release() {
    let tools = tools_or_skip("replay_depends_on_the_claimed_server_release");
    let tmp = tempfile::tempdir().unwrap();
    let v1 = dump_with_entry(
        tmp.path(),
        "v1",
        update_entry(1, doc! {"$v": 1, "$set": {"b": 2}}),
    );
    let bare = dump_with_entry(tmp.path(), "bare", update_entry(1, doc! {"$set": {"b": 2}}));
    let missing = dump_with_entry(
        tmp.path(),
        "missing",
        update_entry(7, doc! {"$v": 2, "diff": {"i": {"b": 2}}}),
    );
    for t in &tools {
        for server in ["6.0.16", "7.0.14", "8.0.4"] {
            let what = format!("tools {} server {server}", t.version);
            for dump in [&v1, &bare] {
                let m = mongod("replset", Some(server));
                let out = t.restore(&m, &["--oplogReplay", dump]);
                let c = common::client(m.port).await;
                if server.starts_with("7.") {
                    expect_exit(&out, 1, &what);
                    assert!(
                        text(&out).contains("Failed: restore error: error applying oplog: applyOps: (Location4772600) Expected _id field or $v:2"),
                        "{what}: {}",
                        text(&out)
                    );
                    assert_eq!(
                        docs(&c, "app", "c").await,
                        vec![doc! {"_id": 1, "a": 1}],
                        "{what}"
                    );
                } else {
                    expect_exit(&out, 0, &what);
                    assert_eq!(
                        docs(&c, "app", "c").await,
                        vec![doc! {"_id": 1, "a": 1, "b": 2}],
                        "{what}"
                    );
                }
            }
            let m = mongod("replset", Some(server));
            let out = t.restore(&m, &["--oplogReplay", &missing]);
            let c = common::client(m.port).await;
            if server.starts_with("6.") {
                expect_exit(&out, 0, &what);
                assert_eq!(
                    docs(&c, "app", "c").await,
                    vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 7, "b": 2}],
                    "{what}: upserted"
                );
            } else {
                expect_exit(&out, 1, &what);
                assert!(
                    text(&out).contains(
                        "applyOps: (UnknownError) applyOps had one or more errors applying ops"
                    ),
                    "{what}: {}",
                    text(&out)
                );
                assert_eq!(count(&c, "app", "c").await, 1, "{what}");
            }
            // The count line still counts the dump's document.
            assert_eq!(restore_counts(&out), (1, 0), "{what}");
        }
    }
}

/// `Timestamp(0, 0)` at the top level of a document is replaced by the server on
/// insert (`fixDocumentForInsert`) unless the insert says `bypassEmptyTsReplacement`.
/// 100.12+ sends it to servers that know it (8.0, 7.0.13+, 6.0.17+) and otherwise
/// inserts then rewrites the document with a `$replaceRoot`/`$literal` update: the
/// value survives either way. 100.11 does neither: the restored value is a fresh
/// cluster time. Nested empty timestamps are never touched.
#[tokio::test]
async fn empty_timestamps_survive_only_with_newer_tools() {
    let tools = tools_or_skip("empty_timestamps_survive_only_with_newer_tools");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ts");
    let original = doc! {"_id": 1, "t": ts(0, 0), "sub": {"t": ts(0, 0)}};
    write_coll(
        &dir,
        "app",
        "t",
        &[original.clone(), doc! {"_id": 2, "t": ts(7, 7)}],
        None,
    );
    for t in &tools {
        for server in ["6.0.16", "6.0.17", "7.0.12", "7.0.14", "8.0.4"] {
            let what = format!("tools {} server {server}", t.version);
            let m = mongod("standalone", Some(server));
            let out = t.restore(&m, &[dir.to_str().unwrap()]);
            expect_exit(&out, 0, &what);
            assert_eq!(restore_counts(&out), (2, 0), "{what}");
            let c = common::client(m.port).await;
            let got = docs(&c, "app", "t").await;
            assert_eq!(got[1], doc! {"_id": 2, "t": ts(7, 7)}, "{what}");
            if t.knows_empty_timestamps() {
                assert_eq!(got[0], original, "{what}");
            } else {
                assert_eq!(
                    got[0].get_document("sub").unwrap(),
                    &doc! {"t": ts(0, 0)},
                    "{what}"
                );
                match got[0].get("t") {
                    Some(Bson::Timestamp(x)) => assert!(x.time > 0, "{what}: {x:?}"),
                    other => panic!("{what}: {other:?}"),
                }
            }
        }
    }
}

/// `local.*` collections are restored like any other, except `local.oplog.rs` on a
/// replica set: the server refuses the write ("cannot write to local.oplog.rs") and
/// mongorestore fails. `admin.system.version` in a dump is read for the auth schema,
/// never restored as data.
#[tokio::test]
async fn local_collections_and_system_version() {
    let tools = tools_or_skip("local_collections_and_system_version");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("local");
    write_coll(&dir, "local", "stuff", &[doc! {"_id": 1, "a": "x"}], None);
    write_coll(
        &dir,
        "admin",
        "system.version",
        &[
            doc! {"_id": "featureCompatibilityVersion", "version": "6.0"},
            doc! {"_id": "authSchema", "currentVersion": 5},
        ],
        None,
    );
    write_coll(&dir, "admin", "other", &[doc! {"_id": 1}], None);
    let with_oplog = tmp.path().join("local_oplog");
    write_coll(
        &with_oplog,
        "local",
        "oplog.rs",
        &[doc! {"ts": ts(5, 1), "op": "n", "ns": "", "o": {"msg": "x"}}],
        None,
    );
    for t in &tools {
        let v = &t.version;
        let m = mongod("replset", None);
        let out = t.restore(&m, &[dir.to_str().unwrap()]);
        expect_exit(&out, 0, v);
        assert_eq!(
            restore_counts(&out),
            (2, 0),
            "{v}: local.stuff and admin.other"
        );
        let c = common::client(m.port).await;
        assert_eq!(
            docs(&c, "local", "stuff").await,
            vec![doc! {"_id": 1, "a": "x"}]
        );
        let sv = docs(&c, "admin", "system.version").await;
        assert_eq!(
            sv,
            vec![doc! {"_id": "featureCompatibilityVersion", "version": "7.0"}],
            "{v}"
        );

        let out = t.restore(&m, &[with_oplog.to_str().unwrap()]);
        expect_exit(&out, 1, &format!("{v} local/oplog.rs.bson"));
        assert!(
            text(&out).contains("(InvalidNamespace) cannot write to local.oplog.rs"),
            "{}",
            text(&out)
        );
    }
}

/// Users and roles: mongorestore loads them into `admin.tempusers`/`temproles`,
/// then `_mergeAuthzCollections` merges (keeping existing users) or, with `--drop`,
/// replaces; `admin.system.version` gets the `authSchema` document.
#[tokio::test]
async fn users_and_roles_merge_like_the_server() {
    let tools = tools_or_skip("users_and_roles_merge_like_the_server");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("users");
    let user = |u: &str, db: &str, tag: &str| {
        doc! {"_id": format!("{db}.{u}"), "user": u, "db": db, "credentials": {}, "roles": [], "tag": tag}
    };
    write_coll(
        &dir,
        "admin",
        "system.users",
        &[user("alice", "admin", "dump"), user("bob", "app", "dump")],
        None,
    );
    write_coll(
        &dir,
        "admin",
        "system.roles",
        &[doc! {"_id": "app.reader", "role": "reader", "db": "app", "privileges": [], "roles": []}],
        None,
    );
    write_coll(
        &dir,
        "admin",
        "system.version",
        &[doc! {"_id": "authSchema", "currentVersion": 5}],
        None,
    );
    for t in &tools {
        let v = &t.version;
        let m = mongod("replset", None);
        let c = common::client(m.port).await;
        c.database("admin")
            .collection::<Document>("tempusers")
            .insert_many(vec![
                user("bob", "app", "server"),
                user("carol", "app", "server"),
            ])
            .await
            .unwrap();
        c.database("admin").run_command(doc! {"_mergeAuthzCollections": 1, "tempUsersCollection": "admin.tempusers", "drop": false, "db": ""}).await.unwrap();
        c.database("admin")
            .collection::<Document>("tempusers")
            .drop()
            .await
            .unwrap();

        let out = t.restore(&m, &[dir.to_str().unwrap()]);
        expect_exit(&out, 0, &format!("{v} merge"));
        assert!(
            text(&out).contains("restoring users from"),
            "{}",
            text(&out)
        );
        let tags: Vec<(String, String)> = docs(&c, "admin", "system.users")
            .await
            .iter()
            .map(|d| {
                (
                    d.get_str("_id").unwrap().into(),
                    d.get_str("tag").unwrap().into(),
                )
            })
            .collect();
        let want = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            tags,
            want(&[
                ("admin.alice", "dump"),
                ("app.bob", "server"),
                ("app.carol", "server")
            ]),
            "{v}: merge keeps existing users"
        );
        assert_eq!(count(&c, "admin", "system.roles").await, 1);
        assert!(
            collections(&c, "admin")
                .await
                .iter()
                .all(|d| !d.get_str("name").unwrap().starts_with("temp")),
            "{v}: temp collections dropped"
        );
        let schema = docs(&c, "admin", "system.version").await;
        assert!(
            schema.contains(&doc! {"_id": "authSchema", "currentVersion": 5}),
            "{v}: {schema:?}"
        );

        let out = t.restore(&m, &["--drop", dir.to_str().unwrap()]);
        expect_exit(&out, 0, &format!("{v} --drop"));
        let tags: Vec<(String, String)> = docs(&c, "admin", "system.users")
            .await
            .iter()
            .map(|d| {
                (
                    d.get_str("_id").unwrap().into(),
                    d.get_str("tag").unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            tags,
            want(&[("admin.alice", "dump"), ("app.bob", "dump")]),
            "{v}: --drop replaces all users"
        );
    }
}

/// `--oplogFile` replays an oplog kept outside the dump directory, and
/// `--oplogLimit T:I` stops before the first entry at or past it.
#[tokio::test]
async fn oplog_file_and_limit() {
    let tools = tools_or_skip("oplog_file_and_limit");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dump");
    write_coll(&dir, "app", "c", &[doc! {"_id": 1}], None);
    let oplog = tmp.path().join("elsewhere.bson");
    let ins = |t: u32, i: u32, id: i32| doc! {"ts": ts(t, i), "t": 1i64, "v": 2, "op": "i", "ns": "app.c", "o": {"_id": id}};
    common::write_bson(&oplog, &[ins(10, 1, 2), ins(10, 2, 3), ins(11, 1, 4)]);
    let (d, o) = (dir.to_str().unwrap(), oplog.to_str().unwrap());
    for t in &tools {
        for (limit, want) in [
            (None, vec![1, 2, 3, 4]),
            (Some("10:2"), vec![1, 2]),
            (Some("11"), vec![1, 2, 3]),
        ] {
            let m = mongod("replset", None);
            let mut args = vec!["--oplogReplay", "--oplogFile", o];
            if let Some(l) = limit {
                args.extend(["--oplogLimit", l]);
            }
            args.push(d);
            let out = t.restore(&m, &args);
            expect_exit(&out, 0, &format!("{} {args:?}", t.version));
            let c = common::client(m.port).await;
            assert_eq!(
                ids(&docs(&c, "app", "c").await),
                want.iter().map(|i| *i as i64).collect::<Vec<_>>(),
                "{} {limit:?}",
                t.version
            );
        }
    }
}

/// Restored documents keep their exact bytes: the server's dbHash of a collection is
/// the MD5 of the dump file's own bytes in `_id` order (field order, int32 vs int64
/// vs double vs decimal, -0.0, nested documents, binary subtypes all as dumped).
/// Documents the stand-in could not keep byte for byte (regex options out of order,
/// a repeated field name) are refused loudly, never silently rewritten.
#[tokio::test]
async fn restored_documents_keep_their_exact_bytes() {
    let tools = tools_or_skip("restored_documents_keep_their_exact_bytes");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("exact");
    let docs_in = vec![
        doc! {"_id": 3, "z": 1i64, "a": 1, "m": 1.0, "neg": -0.0, "d": bson::Decimal128::from_bytes([7; 16])},
        doc! {"_id": 1, "nested": {"b": {"c": [1, 2i64, 3.5]}, "a": Bson::Null}, "old": bson::Binary { subtype: bson::spec::BinarySubtype::UserDefined(0x80), bytes: vec![9, 9] }},
        doc! {"_id": 2, "code": Bson::JavaScriptCode("x()".into()), "sym": Bson::Symbol("s".into()), "u": Bson::Undefined, "min": Bson::MinKey, "max": Bson::MaxKey},
    ];
    write_coll(&dir, "app", "exact", &docs_in, None);
    let bad = tmp.path().join("bad");
    std::fs::create_dir_all(bad.join("app")).unwrap();
    // {_id: 1, re: /a/mi}: options not in alphabetical order, as some clients write.
    let mut raw = Vec::new();
    let body: Vec<u8> = [
        &b"\x10_id\x00"[..],
        &1i32.to_le_bytes(),
        b"\x0bre\x00a\x00mi\x00",
    ]
    .concat();
    raw.extend(((body.len() + 5) as i32).to_le_bytes());
    raw.extend(body);
    raw.push(0);
    std::fs::write(bad.join("app/re.bson"), raw).unwrap();
    for t in &tools {
        let m = mongod("standalone", None);
        let out = t.restore(&m, &[dir.to_str().unwrap()]);
        expect_exit(&out, 0, &t.version);
        let c = common::client(m.port).await;
        let h = db_hash(&c, "app").await;
        assert_eq!(
            h.get_document("collections")
                .unwrap()
                .get_str("exact")
                .unwrap(),
            md5_of_file_in_id_order(&dir.join("app/exact.bson")),
            "{}",
            t.version
        );
        let out = t.restore(&m, &[bad.to_str().unwrap()]);
        expect_exit(&out, 1, &format!("{} unkeepable document", t.version));
        assert!(
            text(&out).contains("cannot keep this request's documents byte for byte"),
            "{}",
            text(&out)
        );
    }
}
