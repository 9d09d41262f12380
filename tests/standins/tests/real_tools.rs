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
