//! Server behaviours of the stand-in mongod that pitr's verification relies on,
//! checked through the real driver: the insert path, dbHash, applyOps rules per
//! claimed release (`PITR_STANDIN_VERSION`), views and time-series in
//! listCollections. Each rule cites its server source in `src/mongod/`.

mod common;

use bson::{doc, Bson, Document, Timestamp};
use common::*;
use md5::{Digest, Md5};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn md5_of(docs: &[Document]) -> String {
    let mut h = Md5::new();
    for d in docs {
        h.update(bson::to_vec(d).unwrap());
    }
    hex(&h.finalize())
}

fn start(version: Option<&str>) -> Mongod {
    let mut env = vec![("PITR_STANDIN_MODE", "replset")];
    if let Some(v) = version {
        env.push(("PITR_STANDIN_VERSION", v));
    }
    start_mongod(&[], &env)
}

async fn cmd(c: &mongodb::Client, db: &str, command: Document) -> Document {
    c.database(db).run_command(command).await.expect("command")
}

async fn cmd_err(c: &mongodb::Client, db: &str, command: Document) -> (i32, String) {
    match c.database(db).run_command(command).await {
        Ok(d) => panic!("expected an error, got {d}"),
        Err(e) => match &*e.kind {
            mongodb::error::ErrorKind::Command(ce) => (ce.code, ce.message.clone()),
            other => panic!("not a command error: {other:?}"),
        },
    }
}

async fn all(c: &mongodb::Client, db: &str, coll: &str) -> Vec<Document> {
    let reply = cmd(c, db, doc! {"find": coll, "sort": {"_id": 1}}).await;
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect()
}

#[tokio::test]
async fn insert_moves_id_first_generates_it_and_reports_duplicates() {
    let m = start(None);
    let c = client(m.port).await;
    let r = cmd(
        &c,
        "t",
        doc! {"insert": "c", "documents": [{"a": 1i64, "_id": 2.5, "b": "x"}, {"k": 1}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 2);
    let got = all(&c, "t", "c").await;
    assert_eq!(got[0], doc! {"_id": 2.5, "a": 1i64, "b": "x"});
    assert_eq!(got[0].keys().collect::<Vec<_>>(), ["_id", "a", "b"]);
    assert!(
        matches!(got[1].get("_id"), Some(Bson::ObjectId(_))),
        "{:?}",
        got[1]
    );
    assert_eq!(got[1].keys().collect::<Vec<_>>(), ["_id", "k"]);

    // A duplicate `_id` (2.5 == 2.5, numbers compared by value) is a write error, not a
    // command error; unordered inserts go on.
    let r = cmd(
        &c,
        "t",
        doc! {"insert": "c", "ordered": false, "documents": [{"_id": 2.5}, {"_id": [1]}, {"_id": 3}]},
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let errs = r.get_array("writeErrors").unwrap();
    let e0 = errs[0].as_document().unwrap();
    assert_eq!(e0.get_i32("code").unwrap(), 11000);
    assert_eq!(
        e0.get_str("errmsg").unwrap(),
        "E11000 duplicate key error collection: t.c index: _id_ dup key: { _id: 2.5 }"
    );
    assert_eq!(e0.get_document("keyValue").unwrap(), &doc! {"_id": 2.5});
    let e1 = errs[1].as_document().unwrap();
    assert_eq!(
        (e1.get_i32("index").unwrap(), e1.get_i32("code").unwrap()),
        (1, 2)
    );
    assert_eq!(e1.get_str("errmsg").unwrap(), "can't use an array for _id");
}

#[tokio::test]
async fn empty_timestamps_and_the_bypass_flag_per_release() {
    let m = start(None);
    let c = client(m.port).await;
    let zero = Timestamp {
        time: 0,
        increment: 0,
    };
    cmd(&c, "t", doc! {"insert": "kept", "bypassEmptyTsReplacement": true, "documents": [{"_id": 1, "t": zero}]}).await;
    assert_eq!(all(&c, "t", "kept").await, vec![doc! {"_id": 1, "t": zero}]);
    cmd(
        &c,
        "t",
        doc! {"insert": "replaced", "documents": [{"_id": 1, "t": zero, "n": {"t": zero}}]},
    )
    .await;
    let got = &all(&c, "t", "replaced").await[0];
    assert!(
        matches!(got.get("t"), Some(Bson::Timestamp(t)) if t.time > 0),
        "{got}"
    );
    assert_eq!(got.get_document("n").unwrap(), &doc! {"t": zero});

    let old = start(Some("7.0.12"));
    let c = client(old.port).await;
    let (code, msg) = cmd_err(
        &c,
        "t",
        doc! {"insert": "x", "bypassEmptyTsReplacement": true, "documents": [{"_id": 1}]},
    )
    .await;
    assert_eq!(code, 40415);
    assert_eq!(
        msg,
        "BSON field 'insert.bypassEmptyTsReplacement' is an unknown field."
    );
}

#[tokio::test]
async fn db_hash_as_the_server_defines_it() {
    let m = start(None);
    let c = client(m.port).await;
    let a = vec![
        doc! {"_id": 1, "x": "one"},
        doc! {"_id": 2i64, "y": 2.0},
        doc! {"_id": 1.5},
        doc! {"_id": "s"},
    ];
    cmd(&c, "h", doc! {"insert": "a", "documents": a.clone()}).await;
    cmd(
        &c,
        "h",
        doc! {"create": "capped", "capped": true, "size": 4096},
    )
    .await;
    let capped = vec![doc! {"_id": 2}, doc! {"_id": 1}];
    cmd(
        &c,
        "h",
        doc! {"insert": "capped", "documents": capped.clone()},
    )
    .await;
    cmd(
        &c,
        "h",
        doc! {"insert": "tmp.mr.x", "documents": [{"_id": 1}]},
    )
    .await;
    cmd(&c, "h", doc! {"create": "temporary", "temp": true}).await;
    cmd(&c, "h", doc! {"create": "v", "viewOn": "a", "pipeline": []}).await;

    let r = cmd(&c, "h", doc! {"dbHash": 1}).await;
    let colls = r.get_document("collections").unwrap();
    // `_id` order with numbers compared by value across types, then strings.
    let in_id_order = vec![a[0].clone(), a[2].clone(), a[1].clone(), a[3].clone()];
    assert_eq!(colls.get_str("a").unwrap(), md5_of(&in_id_order));
    assert_eq!(
        colls.get_str("capped").unwrap(),
        md5_of(&[capped[1].clone(), capped[0].clone()])
    );
    assert_eq!(colls.get_str("temporary").unwrap(), md5_of(&[]));
    let names: Vec<&String> = colls.keys().collect();
    assert_eq!(
        names,
        ["a", "capped", "system.views", "temporary"],
        "tmp.mr.* and views are not hashed"
    );
    assert_eq!(
        r.get_array("capped").unwrap(),
        &vec![Bson::String("capped".into())]
    );
    assert_eq!(
        r.get_document("uuids").unwrap().keys().collect::<Vec<_>>(),
        names
    );
    let mut h = Md5::new();
    for n in &names {
        h.update(colls.get_str(n).unwrap().as_bytes());
    }
    assert_eq!(r.get_str("md5").unwrap(), hex(&h.finalize()));

    let r = cmd(
        &c,
        "h",
        doc! {"dbHash": 1, "collections": ["a", "nope"], "skipTempCollections": true},
    )
    .await;
    assert_eq!(
        r.get_document("collections")
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["a"]
    );
    let r = cmd(&c, "h", doc! {"dbHash": 1, "skipTempCollections": true}).await;
    assert!(!r
        .get_document("collections")
        .unwrap()
        .contains_key("temporary"));
    let (code, msg) = cmd_err(&c, "h", doc! {"dbHash": 1, "collections": [1]}).await;
    assert_eq!(
        (code, msg.as_str()),
        (2, "collections entries have to be strings")
    );
    // Nothing in `local` is replicated, so nothing there is hashed.
    let r = cmd(&c, "local", doc! {"dbHash": 1}).await;
    assert!(r.get_document("collections").unwrap().is_empty());
    assert_eq!(
        r.get_str("md5").unwrap(),
        "d41d8cd98f00b204e9800998ecf8427e"
    );
}

async fn apply(c: &mongodb::Client, ops: Vec<Document>) -> Result<Document, (i32, String)> {
    let ops: Vec<Bson> = ops.into_iter().map(Bson::Document).collect();
    match c
        .database("admin")
        .run_command(doc! {"applyOps": ops})
        .await
    {
        Ok(d) => Ok(d),
        Err(e) => match &*e.kind {
            mongodb::error::ErrorKind::Command(ce) => Err((ce.code, ce.message.clone())),
            other => panic!("{other:?}"),
        },
    }
}

#[tokio::test]
async fn apply_ops_rules_per_release() {
    for version in ["6.0.16", "7.0.14", "8.0.4"] {
        let m = start(Some(version));
        let c = client(m.port).await;
        cmd(
            &c,
            "t",
            doc! {"insert": "c", "documents": [{"_id": 1, "a": 1}]},
        )
        .await;
        // `n` entries are not in `results`; an existing `_id` is replaced by `o`.
        let r = apply(
            &c,
            vec![
                doc! {"op": "n", "ns": "", "o": {"msg": "x"}},
                doc! {"op": "i", "ns": "t.c", "o": {"_id": 1, "b": 2}},
            ],
        )
        .await
        .unwrap();
        assert_eq!(
            r.get_array("results").unwrap(),
            &vec![Bson::Boolean(true)],
            "{version}"
        );
        assert_eq!(
            all(&c, "t", "c").await,
            vec![doc! {"_id": 1, "b": 2}],
            "{version}"
        );
        // An insert without `_id`, an update without `o2._id`.
        let (code, msg) = apply(&c, vec![doc! {"op": "i", "ns": "t.c", "o": {"x": 1}}])
            .await
            .unwrap_err();
        assert_eq!(code, 4, "{version}: {msg}");
        assert!(
            msg.starts_with("Failed to apply insert due to missing _id"),
            "{msg}"
        );
        // CRUD on a missing collection: deletes are fine, the rest fail the command.
        apply(&c, vec![doc! {"op": "d", "ns": "t.none", "o": {"_id": 1}}])
            .await
            .unwrap();
        let (code, msg) = apply(&c, vec![doc! {"op": "i", "ns": "t.none", "o": {"_id": 1}}])
            .await
            .unwrap_err();
        assert_eq!(code, 26, "{version}");
        assert!(
            msg.starts_with(
                "cannot apply insert or update operation on a non-existent namespace t.none"
            ),
            "{msg}"
        );
        // dropDatabase must be alone.
        let (code, _) = apply(
            &c,
            vec![
                doc! {"op": "c", "ns": "t.$cmd", "o": {"dropDatabase": 1}},
                doc! {"op": "n", "ns": "", "o": {}},
            ],
        )
        .await
        .unwrap_err();
        assert_eq!(code, 6275900, "{version}");
        // An update of a missing document, and `alwaysUpsert`.
        let missing = doc! {"op": "u", "ns": "t.c", "o2": {"_id": 9}, "o": {"$v": 2, "diff": {"i": {"z": 1}}}};
        let with_flag = c
            .database("admin")
            .run_command(doc! {"applyOps": [missing.clone()], "alwaysUpsert": false})
            .await;
        if version.starts_with("6.") {
            apply(&c, vec![missing.clone()]).await.unwrap();
            assert_eq!(
                all(&c, "t", "c").await[1],
                doc! {"_id": 9, "z": 1},
                "{version}: upserted"
            );
            // With `alwaysUpsert: false` the op fails; 6.0's atomic applyOps fails the
            // command with the op's own error (77 UpdateOperationFailed).
            let e = with_flag.unwrap_err();
            assert!(
                matches!(&*e.kind, mongodb::error::ErrorKind::Command(ce) if ce.code == 77),
                "{version}: {e}"
            );
            // ... and undoes the ops before it.
            let (code, _) = apply(
                &c,
                vec![
                    doc! {"op": "i", "ns": "t.c", "o": {"_id": 5}},
                    doc! {"op": "d", "ns": "t.c", "o": {}},
                ],
            )
            .await
            .unwrap_err();
            assert_eq!(code, 4, "{version}");
            assert_eq!(
                count_ids(&c).await,
                vec![Bson::Int32(1), Bson::Int32(9)],
                "{version}: `_id` 5 rolled back"
            );
        } else {
            let (code, msg) = apply(
                &c,
                vec![
                    missing.clone(),
                    doc! {"op": "i", "ns": "t.c", "o": {"_id": 5}},
                ],
            )
            .await
            .unwrap_err();
            assert_eq!(
                (code, msg.as_str()),
                (8, "applyOps had one or more errors applying ops"),
                "{version}"
            );
            assert_eq!(
                count_ids(&c).await,
                vec![Bson::Int32(1), Bson::Int32(5)],
                "{version}: the other op applied"
            );
            assert!(
                with_flag.is_err(),
                "{version}: alwaysUpsert was removed in 6.2"
            );
            // A `ui` naming another (or no) collection.
            let (code, _) = apply(&c, vec![doc! {"op": "i", "ns": "t.c", "ui": bson::Binary::from_uuid(bson::Uuid::new()), "o": {"_id": 6}}])
                .await
                .unwrap_err();
            assert_eq!(
                code, 8,
                "{version}: 3318200 makes the op fail, the command answers UnknownError"
            );
        }
        // A `$v:1` update.
        let v1 = apply(
            &c,
            vec![doc! {"op": "u", "ns": "t.c", "o2": {"_id": 1}, "o": {"$v": 1, "$set": {"q": 1}}}],
        )
        .await;
        match version {
            "7.0.14" => assert_eq!(v1.unwrap_err().0, 4772600),
            _ => {
                v1.unwrap();
            }
        }
    }
}

async fn count_ids(c: &mongodb::Client) -> Vec<Bson> {
    all(c, "t", "c")
        .await
        .iter()
        .map(|d| d.get("_id").unwrap().clone())
        .collect()
}

#[tokio::test]
async fn views_and_time_series_in_list_collections() {
    let m = start(None);
    let c = client(m.port).await;
    cmd(&c, "d", doc! {"create": "base"}).await;
    cmd(
        &c,
        "d",
        doc! {"create": "v", "viewOn": "base", "pipeline": [{"$match": {"a": 1}}]},
    )
    .await;
    cmd(&c, "d", doc! {"create": "ts", "timeseries": {"timeField": "t", "metaField": "m"}, "expireAfterSeconds": 60i64}).await;
    let r = cmd(&c, "d", doc! {"listCollections": 1}).await;
    let entries: Vec<Document> = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect();
    let by_name = |n: &str| {
        entries
            .iter()
            .find(|e| e.get_str("name") == Ok(n))
            .cloned()
            .unwrap_or_else(|| panic!("no {n} in {entries:?}"))
    };
    assert_eq!(
        by_name("v"),
        doc! {"name": "v", "type": "view", "options": {"viewOn": "base", "pipeline": [{"$match": {"a": 1}}]}, "info": {"readOnly": true}}
    );
    assert_eq!(
        by_name("ts"),
        doc! {"name": "ts", "type": "timeseries",
        "options": {"expireAfterSeconds": 60i64, "timeseries": {"timeField": "t", "metaField": "m", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}},
        "info": {"readOnly": false}}
    );
    let buckets = by_name("system.buckets.ts");
    assert_eq!(buckets.get_str("type").unwrap(), "collection");
    let opts = buckets.get_document("options").unwrap();
    assert!(opts.get_bool("clusteredIndex").unwrap());
    assert!(!buckets.contains_key("idIndex"), "clustered: no _id index");
    let views = all(&c, "d", "system.views").await;
    assert_eq!(
        views,
        vec![
            doc! {"_id": "d.ts", "viewOn": "system.buckets.ts", "pipeline": [{"$_internalUnpackBucket": {"timeField": "t", "metaField": "m", "bucketMaxSpanSeconds": 3600}}]},
            doc! {"_id": "d.v", "viewOn": "base", "pipeline": [{"$match": {"a": 1}}]},
        ]
    );
    // Writes to a view or to system.views are refused; dropping the time-series name
    // drops its buckets too.
    let (code, _) = cmd_err(&c, "d", doc! {"insert": "v", "documents": [{"_id": 1}]}).await;
    assert_eq!(code, 166);
    // Reading through a view is not implemented: refused, never an empty answer.
    for read in [
        doc! {"find": "v"},
        doc! {"count": "ts"},
        doc! {"aggregate": "v", "pipeline": [], "cursor": {}},
    ] {
        let (code, msg) = cmd_err(&c, "d", read).await;
        assert_eq!(code, 166, "{msg}");
        assert!(msg.contains("not implemented"), "{msg}");
    }
    let (code, msg) = cmd_err(
        &c,
        "d",
        doc! {"insert": "system.views", "documents": [{"_id": 1}]},
    )
    .await;
    assert_eq!((code, msg.as_str()), (73, "cannot write to d.system.views"));
    cmd(&c, "d", doc! {"drop": "ts"}).await;
    let r = cmd(&c, "d", doc! {"listCollections": 1, "nameOnly": true}).await;
    let names: Vec<&str> = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().get_str("name").unwrap())
        .collect();
    assert_eq!(names, ["base", "system.views", "v"]);
}

#[tokio::test]
async fn claimed_release_shows_in_build_info_and_hello() {
    for (v, wire) in [("6.0.16", 17), ("7.0.14", 21), ("8.0.4", 25)] {
        let m = start(Some(v));
        let c = client(m.port).await;
        let b = cmd(&c, "admin", doc! {"buildInfo": 1}).await;
        assert_eq!(b.get_str("version").unwrap(), v);
        let h = cmd(&c, "admin", doc! {"hello": 1}).await;
        assert_eq!(h.get_i32("maxWireVersion").unwrap(), wire, "{v}");
        let fcv = cmd(
            &c,
            "admin",
            doc! {"getParameter": 1, "featureCompatibilityVersion": 1},
        )
        .await;
        assert_eq!(
            fcv.get_document("featureCompatibilityVersion")
                .unwrap()
                .get_str("version")
                .unwrap(),
            &v[..3]
        );
    }
    let out = std::process::Command::new(MONGOD)
        .args(["--version"])
        .env("PITR_STANDIN_VERSION", "8.2.0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("plays 6.0.x, 7.0.x or 8.0.x only"));
    let out = std::process::Command::new(MONGOD)
        .args(["--version"])
        .env("PITR_STANDIN_VERSION", "6.0.16")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("db version v6.0.16\n"));
}
