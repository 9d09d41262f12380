//! The stand-in mongodump: dump layout and metadata, `--oplog` rules, `--gzip`, and a
//! dump → restore round trip between two stand-in servers.

mod common;

use bson::{doc, Document, Timestamp};
use common::*;

fn dump(m: &Mongod, args: &[&str]) -> std::process::Output {
    let port = m.port.to_string();
    let mut all = vec!["--port", port.as_str()];
    all.extend_from_slice(args);
    run_tool(MONGODUMP, &all, &[])
}

#[tokio::test]
async fn dump_layout_and_round_trip() {
    let src = start_mongod(&[], &[]);
    let c = client(src.port).await;
    let orders = c.database("shop").collection::<Document>("orders");
    orders
        .insert_many((0..5).map(|i| doc! {"_id": i, "sku": format!("s{i}")}))
        .await
        .unwrap();
    orders
        .create_index(mongodb::IndexModel::builder().keys(doc! {"sku": 1}).build())
        .await
        .unwrap();
    c.database("shop").create_collection("empty").await.unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    for gzip in [false, true] {
        let out_dir = out_dir.join(if gzip { "gz" } else { "plain" });
        let mut args = vec!["--out", out_dir.to_str().unwrap()];
        if gzip {
            args.push("--gzip");
        }
        let out = dump(&src, &args);
        let t = text(&out);
        assert!(out.status.success(), "{t}");
        assert!(
            t.contains("\tdone dumping shop.orders (5 documents)"),
            "{t}"
        );
        let ext = if gzip { ".gz" } else { "" };
        assert!(out_dir.join(format!("shop/orders.bson{ext}")).is_file());
        assert!(out_dir
            .join(format!("admin/system.version.bson{ext}"))
            .is_file());
        assert!(!out_dir.join("local").exists() && !out_dir.join("config").exists());
        let meta = pitr_standins::bsonfile::read_bytes(
            &out_dir.join(format!("shop/orders.metadata.json{ext}")),
            gzip,
        )
        .unwrap();
        let meta: serde_json::Value = serde_json::from_slice(&meta).unwrap();
        assert_eq!(meta["collectionName"], "orders");
        assert_eq!(meta["type"], "collection");
        assert_eq!(meta["uuid"].as_str().unwrap().len(), 32);
        assert_eq!(meta["indexes"][1]["name"], "sku_1");
        assert_eq!(meta["indexes"][1]["key"]["sku"]["$numberInt"], "1");

        let dst = start_mongod(&[], &[]);
        let port = dst.port.to_string();
        let mut rargs = vec!["--port", port.as_str(), out_dir.to_str().unwrap()];
        if gzip {
            rargs.push("--gzip");
        }
        let out = run_tool(MONGORESTORE, &rargs, &[]);
        assert!(out.status.success(), "{}", text(&out));
        let d = client(dst.port).await;
        assert_eq!(ids(&d, "shop", "orders").await, vec![0, 1, 2, 3, 4]);
        assert_eq!(
            d.database("shop")
                .collection::<Document>("orders")
                .list_index_names()
                .await
                .unwrap(),
            vec!["_id_", "sku_1"]
        );
        let mut names = d.database("shop").list_collection_names().await.unwrap();
        names.sort();
        assert_eq!(names, vec!["empty", "orders"]);
    }
}

#[test]
fn oplog_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let o = tmp.path().join("o");
    let standalone = start_mongod(&[], &[]);
    let out = dump(&standalone, &["--oplog", "--out", o.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("Failed: error getting oplog start: error getting recent oplog entry: mongo: no documents in result"), "{}", text(&out));

    let out = dump(&standalone, &["--oplog", "--db", "shop"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("Failed: bad option: --oplog mode only supported on full dumps"));

    let mongos = start_mongod(&[], &[("PITR_STANDIN_MODE", "mongos")]);
    let out = dump(&mongos, &["--oplog", "--out", o.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("can't use --oplog option when dumping from a mongos"));

    let out = run_tool(MONGODUMP, &["--password", "x"], &[]);
    assert_eq!(out.status.code(), Some(3));
    let out = run_tool(MONGODUMP, &["--version"], &[]);
    assert!(text(&out).starts_with("mongodump version: 100.9.4"));
}

#[test]
fn oplog_dump_from_a_replica_set() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed.bson");
    let entries: Vec<Document> = (1..=10)
        .map(|i| insert_entry("app.items", 1_700_000_000, i, doc! {"_id": i as i64}))
        .collect();
    write_bson(&seed, &entries);
    let m = start_mongod(
        &["--replSet", "rs0"],
        &[("PITR_STANDIN_OPLOG", seed.to_str().unwrap())],
    );
    let o = tmp.path().join("o");
    let rec = tmp.path().join("rec.jsonl");
    let port = m.port.to_string();
    let out = run_tool(
        MONGODUMP,
        &[
            "--host",
            "rs0/127.0.0.1",
            "--port",
            &port,
            "--oplog",
            "--out",
            o.to_str().unwrap(),
        ],
        &[("PITR_STANDIN_RECORD", rec.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("\tdumped 1 oplog entry"),
        "{}",
        text(&out)
    );
    let got = pitr_standins::bsonfile::read_all(&o.join("oplog.bson"), false).unwrap();
    assert_eq!(
        got[0].get_timestamp("ts").unwrap(),
        Timestamp {
            time: 1_700_000_000,
            increment: 10
        }
    );
    let r = &pitr_standins::record::read_all(&rec)[0];
    assert_eq!(r["tool"], "mongodump");
    assert_eq!(r["oplog_entries"], 1);
}

#[tokio::test]
async fn faults_fail_midway_and_crash() {
    use std::os::unix::process::ExitStatusExt;
    let m = start_mongod(&[], &[]);
    let c = client(m.port).await;
    for name in ["a", "b"] {
        c.database("shop")
            .collection::<Document>(name)
            .insert_one(doc! {"_id": 1})
            .await
            .unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = tmp.path().join("o");
    let port = m.port.to_string();
    let args = ["--port", port.as_str(), "--out", o.to_str().unwrap()];
    let out = run_tool(
        MONGODUMP,
        &args,
        &[("PITR_STANDIN_MONGODUMP_FAULT", "fail-midway")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("\tFailed: ") && text(&out).contains("fail-midway"),
        "{}",
        text(&out)
    );
    assert!(o.join("admin/system.version.bson").is_file() && !o.join("shop").exists());
    let out = run_tool(MONGODUMP, &args, &[("PITR_STANDIN_FAULT", "crash")]);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT));
}
