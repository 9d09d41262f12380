//! The scanner on routine operations in the shapes the server writes them (each test
//! cites the source), next to the incidents they must not hide; and the bounded
//! grouping of drops into a dropDatabase.

use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, RawDocumentBuf, Timestamp};

use super::burst::BurstRule;
use super::catalog::Catalog;
use super::finding::{Finding, Kind, Severity};
use super::routine::Routine;
use super::scanner::Scanner;
use crate::oplog::{Entry, Ts};

fn ts(t: u32, i: u32) -> Bson {
    Bson::Timestamp(Timestamp {
        time: t,
        increment: i,
    })
}

fn uuid(b: u8) -> Binary {
    Binary {
        subtype: BinarySubtype::Uuid,
        bytes: vec![b; 16],
    }
}

fn scan_with(docs: &[Document], catalog: Catalog) -> (Vec<Finding>, super::ScanStats) {
    let mut s = Scanner::with_catalog(BurstRule::default(), catalog);
    for d in docs {
        let raw = RawDocumentBuf::from_document(d).unwrap();
        s.feed(&Entry::parse(&raw).unwrap()).unwrap();
    }
    s.finish()
}

fn scan(docs: &[Document]) -> Vec<Finding> {
    scan_with(docs, Catalog::default()).0
}

fn cmd(t: u32, i: u32, ns: &str, o: Document) -> Document {
    doc! { "op": "c", "ns": ns, "ui": uuid(9), "o": o, "ts": ts(t, i), "t": 1i64, "v": 2i64 }
}

fn del(t: u32, i: u32, ns: &str, id: i64) -> Document {
    doc! { "op": "d", "ns": ns, "ui": uuid(2), "o": { "_id": id }, "ts": ts(t, i), "t": 1i64, "v": 2i64 }
}

/// A 6.1+ batched delete: one `applyOps` on `admin.$cmd` without `lsid` (the TTL
/// monitor's and `deleteMany`'s batched deletes look the same; batchedDeletesTargetBatchDocs
/// caps a batch at 100 by default).
fn batched(t: u32, i: u32, ns: &str, ids: std::ops::Range<i64>) -> Document {
    let ops: Vec<Bson> = ids
        .map(|k| Bson::Document(doc! { "op": "d", "ns": ns, "ui": uuid(2), "o": { "_id": k } }))
        .collect();
    doc! { "op": "c", "ns": "admin.$cmd", "o": { "applyOps": ops }, "ts": ts(t, i), "t": 1i64, "v": 2i64 }
}

/// `$out` as document_source_out.cpp writes it (4.4-8.0): `create` of
/// `tmp.agg_out.<UUID>` with `temp: true` (and the target's options, here none) and
/// `idIndex`, the target's indexes copied by `createIndexes`, the results inserted,
/// then `renameCollection` with `stayTemp: false` and `dropTarget: <the target's
/// UUID>` (op_observer_impl.cpp preRenameCollection), `o2.numRecords` the target's
/// count.
fn out_run(t: u32, db: &str, target: &str, n: u8, had: i64) -> Vec<Document> {
    let tmp = format!("tmp.agg_out.{n:08x}-1e2d-4c3b-8a59-{n:012x}");
    let mut v = vec![
        cmd(
            t,
            1,
            &format!("{db}.$cmd"),
            doc! { "create": &tmp, "temp": true, "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } },
        ),
        cmd(
            t,
            2,
            &format!("{db}.$cmd"),
            doc! { "createIndexes": &tmp, "v": 2, "key": { "day": 1 }, "name": "day_1" },
        ),
    ];
    for k in 0..3 {
        v.push(
            doc! { "op": "i", "ns": format!("{db}.{tmp}"), "o": { "_id": k, "day": k }, "ts": ts(t, 3 + k as u32) },
        );
    }
    let mut rename = cmd(
        t + 1,
        1,
        &format!("{db}.$cmd"),
        doc! { "renameCollection": format!("{db}.{tmp}"), "to": format!("{db}.{target}"), "stayTemp": false, "dropTarget": uuid(n) },
    );
    rename.insert("o2", doc! { "numRecords": had });
    v.push(rename);
    v
}

#[test]
fn out_refreshes_are_one_info_finding_and_a_one_off_replacement_says_check() {
    let mut docs = Vec::new();
    for (k, t) in [1000u32, 1300, 1600, 1900].iter().enumerate() {
        docs.extend(out_run(*t, "reports", "daily", k as u8 + 1, 3));
    }
    docs.extend(out_run(1450, "shop", "customers", 9, 93));
    let f = scan(&docs);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert!(f.iter().all(|f| f.severity == Severity::Info
        && f.kind == Kind::RenameDropTarget
        && f.routine == Some(Routine::OutReplace)));
    let daily = f.iter().find(|f| f.ns == "reports.daily").unwrap();
    assert_eq!(
        (daily.ts, daily.last_ts, daily.count),
        (Ts::new(1001, 1), Ts::new(1901, 1), 4)
    );
    assert!(
        daily.details.contains("replaced 4 times") && daily.details.contains("every 300 s"),
        "{}",
        daily.details
    );
    assert!(daily.details.contains("temp: true"), "{}", daily.details);
    assert!(!daily.details.contains("CHECK"));
    let once = f.iter().find(|f| f.ns == "shop.customers").unwrap();
    assert_eq!(once.num_records, Some(93));
    assert!(
        once.details.contains("CHECK") && once.details.contains("--until 1451:1"),
        "{}",
        once.details
    );
}

#[test]
fn a_user_rename_over_a_collection_stays_critical() {
    // renameCollection of a user's staging collection, convertToCapped's temporary
    // collection (documents that do not fit are lost): incidents, not routine.
    let f = scan(&[
        cmd(
            10,
            1,
            "shop.$cmd",
            doc! { "renameCollection": "shop.staging", "to": "shop.customers", "stayTemp": false, "dropTarget": uuid(3) },
        ),
        cmd(
            20,
            1,
            "shop.$cmd",
            doc! { "renameCollection": "shop.tmpAb12c.convertToCapped.events", "to": "shop.events", "stayTemp": false, "dropTarget": uuid(4) },
        ),
    ]);
    assert_eq!(f.len(), 2);
    assert!(f
        .iter()
        .all(|f| f.severity == Severity::Critical && !f.is_routine()));
}

#[test]
fn time_series_out_and_map_reduce_before_4_4() {
    // $out to a time-series collection (7.1+): the temporary collection is
    // `system.buckets.tmp.agg_out.<UUID>` (makeBucketNsIfTimeseries), created with
    // temp, clusteredIndex and the timeseries options (as PBM's tests record from
    // 8.0.17), renamed over the target's buckets.
    let tmp = "system.buckets.tmp.agg_out.9c79fa0c-4512-42ae-97bf-50d958271143";
    // mapReduce before 4.4 (mr.cpp): `tmp.mr.<coll>_<n>` renamed over the output;
    // 4.0 oplogs wrote `dropTarget: true`.
    let f = scan(&[
        cmd(
            10,
            1,
            "m.$cmd",
            doc! { "create": tmp, "temp": true, "clusteredIndex": true,
            "timeseries": { "timeField": "time", "metaField": "tag", "granularity": "seconds" } },
        ),
        cmd(
            11,
            1,
            "m.$cmd",
            doc! { "renameCollection": format!("m.{tmp}"), "to": "m.system.buckets.weather", "stayTemp": false, "dropTarget": uuid(5) },
        ),
        cmd(
            20,
            1,
            "s.$cmd",
            doc! { "renameCollection": "s.tmp.mr.orders_7", "to": "s.order_totals", "stayTemp": false, "dropTarget": true },
        ),
    ]);
    let names: Vec<(&str, Option<Routine>)> =
        f.iter().map(|f| (f.ns.as_str(), f.routine)).collect();
    assert_eq!(
        names,
        vec![
            ("m.weather", Some(Routine::OutReplace)),
            ("s.order_totals", Some(Routine::OutReplace))
        ]
    );
    assert!(
        f[1].details.contains("mapReduce (before 4.4)"),
        "{}",
        f[1].details
    );
}

#[test]
fn a_failed_out_dropping_its_temporary_collection_is_routine() {
    // DocumentSourceOut's destructor drops the temporary collection when the
    // aggregation fails (dropCollection: `{drop: "tmp.agg_out.<UUID>"}`, numRecords).
    let mut docs = out_run(100, "reports", "daily", 1, 0);
    docs.pop(); // no rename: the pipeline failed
    let mut drop = cmd(
        102,
        1,
        "reports.$cmd",
        doc! { "drop": "tmp.agg_out.00000001-1e2d-4c3b-8a59-000000000001" },
    );
    drop.insert("o2", doc! { "numRecords": 3i64 });
    docs.push(drop);
    // A drop of a collection created with temp: true by something else is routine too;
    // a user's own drop is not.
    docs.push(cmd(
        200,
        1,
        "x.$cmd",
        doc! { "create": "scratch", "temp": true },
    ));
    docs.push(cmd(201, 1, "x.$cmd", doc! { "drop": "scratch" }));
    docs.push(cmd(300, 1, "x.$cmd", doc! { "drop": "orders" }));
    let f = scan(&docs);
    let got: Vec<(&str, Severity, Option<Routine>)> = f
        .iter()
        .map(|f| (f.ns.as_str(), f.severity, f.routine))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "reports.tmp.agg_out.00000001-1e2d-4c3b-8a59-000000000001",
                Severity::Info,
                Some(Routine::TempDrop)
            ),
            ("x.scratch", Severity::Info, Some(Routine::TempDrop)),
            ("x.orders", Severity::Critical, None),
        ]
    );
    assert!(
        f[0].details.starts_with("temporary collection of $out"),
        "{}",
        f[0].details
    );
}

/// `create` then `createIndexes` with `expireAfterSeconds`, as 4.4+ logs an index on
/// an empty collection (mongo-tools testdata/create_indexes: spec inline in `o`).
fn ttl_collection(t: u32, ns_db: &str, coll: &str, secs: i32) -> Vec<Document> {
    vec![
        cmd(
            t,
            1,
            &format!("{ns_db}.$cmd"),
            doc! { "create": coll, "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } },
        ),
        cmd(
            t,
            2,
            &format!("{ns_db}.$cmd"),
            doc! { "createIndexes": coll, "v": 2, "key": { "at": 1 }, "name": "at_1", "expireAfterSeconds": secs },
        ),
    ]
}

#[test]
fn ttl_expiry_in_both_shapes_is_one_routine_finding() {
    let mut docs = ttl_collection(100, "app", "tokens", 300);
    // 6.1+: the TTL monitor batches its deletes (ttl.cpp getBatchedDeleteStageParams)
    // into applyOps entries without a session.
    docs.push(batched(460, 1, "app.tokens", 0..100));
    docs.push(batched(460, 2, "app.tokens", 100..130));
    // Before 6.1 (or ttlMonitorBatchDeletes off): one plain `d` per document.
    for k in 0..110 {
        docs.push(del(
            520 + k as u32 / 50,
            k as u32 % 50 + 1,
            "app.tokens",
            1000 + k,
        ));
    }
    let f = scan(&docs);
    assert_eq!(f.len(), 1, "{f:#?}");
    let t = &f[0];
    assert_eq!(
        (t.kind, t.severity, t.routine, t.ns.as_str(), t.count),
        (
            Kind::DeleteBurst,
            Severity::Info,
            Some(Routine::TtlExpiry),
            "app.tokens",
            240
        )
    );
    assert_eq!((t.ts, t.last_ts), (Ts::new(460, 1), Ts::new(522, 10)));
    assert!(
        t.details.contains("2 TTL passes") && t.details.contains("`at_1`, expireAfterSeconds 300"),
        "{}",
        t.details
    );
    // The collection was created with its TTL index: expiring what it was made for.
    assert!(!t.details.contains("CHECK"), "{}", t.details);
}

#[test]
fn a_ttl_index_added_or_lowered_minutes_before_a_mass_expiry_says_so() {
    // commitIndexBuild (two-phase build on existing data, mongo-tools
    // testdata/commit_indexes_build shape) making `shop.carts` TTL, 90 s later the
    // first pass deletes 150 old carts.
    let mut docs = vec![cmd(
        1000,
        1,
        "shop.$cmd",
        doc! { "commitIndexBuild": "carts", "indexBuildUUID": uuid(1),
        "indexes": [ { "v": 2, "key": { "updatedAt": 1 }, "name": "updatedAt_1", "expireAfterSeconds": 3600 } ] },
    )];
    docs.push(batched(1090, 1, "shop.carts", 0..100));
    docs.push(batched(1090, 2, "shop.carts", 100..150));
    let f = scan(&docs);
    assert_eq!((f.len(), f[0].routine), (1, Some(Routine::TtlExpiry)));
    assert!(
        f[0].details.contains("CHECK") && f[0].details.contains("--until 1000:1"),
        "{}",
        f[0].details
    );

    // collMod lowering a TTL the backup knew (7.x o2.indexOptions_old), then a mass
    // expiry; an hour later an ordinary pass is a separate, unremarkable finding.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("app")).unwrap();
    std::fs::write(dir.path().join("app/sessions.bson"), "").unwrap();
    std::fs::write(
        dir.path().join("app/sessions.metadata.json"),
        r#"{"indexes":[{"v":2,"key":{"_id":1},"name":"_id_"},{"v":2,"key":{"at":1},"name":"at_1","expireAfterSeconds":604800}],"collectionName":"sessions","type":"collection"}"#,
    )
    .unwrap();
    let catalog = Catalog::from_backup(&crate::backup::open(dir.path()).unwrap());
    let mut coll_mod = cmd(
        2000,
        1,
        "app.$cmd",
        doc! { "collMod": "sessions", "index": { "name": "at_1", "expireAfterSeconds": 86400 } },
    );
    coll_mod.insert(
        "o2",
        doc! { "collectionOptions_old": { "uuid": uuid(2) }, "indexOptions_old": { "expireAfterSeconds": 604800 } },
    );
    let mut docs = vec![batched(1500, 1, "app.sessions", 0..100), coll_mod];
    docs.push(batched(2055, 1, "app.sessions", 100..200));
    docs.push(batched(2055, 2, "app.sessions", 200..320));
    let (f, stats) = scan_with(&docs, catalog);
    assert!(stats.unclassified.is_empty());
    let got: Vec<(u32, u64, bool)> = f
        .iter()
        .map(|f| (f.ts.t, f.count, f.details.contains("CHECK")))
        .collect();
    assert_eq!(got, vec![(1500, 100, false), (2055, 220, true)], "{f:#?}");
    assert!(
        f[1].details.contains("lowered from 604800 s by collMod"),
        "{}",
        f[1].details
    );
}

#[test]
fn session_deletes_on_a_ttl_collection_are_incidents() {
    let mut docs = ttl_collection(100, "app", "tokens", 300);
    // Retryable single deletes (lsid, txnNumber, stmtId): an application, never the
    // TTL monitor, which runs without a session.
    for k in 0..120u32 {
        let mut d = del(500 + k / 40, k % 40 + 1, "app.tokens", k as i64);
        d.insert("lsid", doc! { "id": uuid(7) });
        d.insert("txnNumber", k as i64 + 1);
        d.insert("stmtId", 0);
        docs.push(d);
    }
    // A committed transaction deleting 110.
    let ops: Vec<Bson> = (0..110)
        .map(|k| {
            Bson::Document(
                doc! { "op": "d", "ns": "app.tokens", "ui": uuid(2), "o": { "_id": 500 + k } },
            )
        })
        .collect();
    docs.push(
        doc! { "lsid": { "id": uuid(8) }, "txnNumber": 1i64, "op": "c", "ns": "admin.$cmd",
        "o": { "applyOps": ops }, "ts": ts(700, 1) },
    );
    let f = scan(&docs);
    let got: Vec<(Severity, bool, bool)> = f
        .iter()
        .map(|f| (f.severity, f.is_routine(), f.in_transaction))
        .collect();
    assert_eq!(
        got,
        vec![
            (Severity::High, false, false),
            (Severity::High, false, true)
        ]
    );
}

fn backup_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Catalog) {
    let dir = tempfile::tempdir().unwrap();
    for (p, s) in files {
        let p = dir.path().join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }
    let c = Catalog::from_backup(&crate::backup::open(dir.path()).unwrap());
    (dir, c)
}

#[test]
fn a_ttl_known_only_from_the_backup_needs_the_backup() {
    let docs: Vec<Document> = (0..150)
        .map(|k| {
            del(
                3000 + k as u32 / 60,
                k as u32 % 60 + 1,
                "shop.sessions_log",
                k,
            )
        })
        .collect();
    // Without the backup: an incident, and the scan says it could not tell.
    let (f, stats) = scan_with(&docs, Catalog::default());
    assert_eq!((f.len(), f[0].severity), (1, Severity::High));
    assert_eq!(
        stats.unclassified.iter().collect::<Vec<_>>(),
        vec!["shop.sessions_log"]
    );
    // With it (mongodump metadata as the generator and mongodump write it).
    let (_d, catalog) = backup_with(&[
        ("shop/sessions_log.bson", ""),
        (
            "shop/sessions_log.metadata.json",
            r#"{"indexes":[{"v":2,"key":{"_id":1},"name":"_id_"},{"v":2,"key":{"createdAt":1},"name":"createdAt_1","expireAfterSeconds":604800}],"uuid":"abababababababababababababababab","collectionName":"sessions_log","type":"collection"}"#,
        ),
    ]);
    let (f, stats) = scan_with(&docs, catalog);
    assert_eq!((f.len(), f[0].routine), (1, Some(Routine::TtlExpiry)));
    assert!(stats.unclassified.is_empty());
}

#[test]
fn time_series_bucket_deletes_are_reported_by_the_collections_name_in_buckets() {
    // A time-series collection created in the oplog: its buckets collection with the
    // collection's expireAfterSeconds (clustered, 5.3+), then the TTL monitor
    // deleting expired buckets (ttl.cpp: a bucket goes once its _id time is older
    // than expireAfterSeconds plus bucketMaxSpanSeconds).
    let create = |coll: &str, expire: Option<i64>| {
        let mut o = doc! { "create": format!("system.buckets.{coll}"), "validator": { "$jsonSchema": {} }, "clusteredIndex": true,
        "timeseries": { "timeField": "t", "metaField": "host", "granularity": "seconds", "bucketMaxSpanSeconds": 3600 } };
        if let Some(e) = expire {
            o.insert("expireAfterSeconds", e);
        }
        cmd(10, 1, "m.$cmd", o)
    };
    let mut docs = vec![create("cpu", Some(600)), create("disk", None)];
    docs.push(batched(5000, 1, "m.system.buckets.cpu", 0..100));
    docs.push(batched(5000, 2, "m.system.buckets.cpu", 100..120));
    // No TTL: a deleteMany of measurements that removed whole buckets: an incident,
    // still named and counted as what it is.
    docs.push(batched(6000, 1, "m.system.buckets.disk", 0..105));
    let f = scan(&docs);
    let got: Vec<(&str, Option<Routine>, Severity, u64)> = f
        .iter()
        .map(|f| (f.ns.as_str(), f.routine, f.severity, f.count))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "m.cpu",
                Some(Routine::TimeseriesExpiry),
                Severity::Info,
                120
            ),
            ("m.disk", None, Severity::High, 105)
        ]
    );
    assert!(
        f[0].details.contains("120 buckets expired"),
        "{}",
        f[0].details
    );
    assert!(
        f[1].details.contains("105 buckets deleted"),
        "{}",
        f[1].details
    );
}

#[test]
fn capped_roll_over_deletes_are_routine() {
    // From FCV 5.0 the primary replicates the deletes that keep a capped collection
    // under its size (capped_collection_maintenance.h).
    let mut docs = vec![cmd(
        1,
        1,
        "log.$cmd",
        doc! { "create": "events", "capped": true, "size": 1048576i64 },
    )];
    for k in 0..130 {
        docs.push(doc! { "op": "i", "ns": "log.events", "o": { "_id": 10_000 + k }, "ts": ts(50 + k as u32 / 30, 2 * (k as u32 % 30) + 1) });
        docs.push(del(
            50 + k as u32 / 30,
            2 * (k as u32 % 30) + 2,
            "log.events",
            k,
        ));
    }
    let f = scan(&docs);
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].routine, f[0].count, f[0].severity),
        (Some(Routine::CappedRollover), 130, Severity::Info)
    );
}

#[test]
fn drop_database_takes_only_the_drops_right_before_it() {
    // The issue's case: a lone drop of app.cache, an hour later dropDatabase of app
    // with its drops of app.a and app.b right before it.
    let mut a = cmd(16 * 3600 + 34 * 60, 1, "app.$cmd", doc! { "drop": "cache" });
    a.insert("o2", doc! { "numRecords": 10i64 });
    let t = 17 * 3600 + 34 * 60;
    let docs = vec![
        a,
        cmd(t, 1, "app.$cmd", doc! { "drop": "a" }),
        cmd(t, 2, "app.$cmd", doc! { "drop": "b" }),
        cmd(t, 3, "app.$cmd", doc! { "dropDatabase": 1 }),
    ];
    let f = scan(&docs);
    let got: Vec<(Kind, &str, Ts, Ts)> = f
        .iter()
        .map(|f| (f.kind, f.ns.as_str(), f.ts, f.oplog_limit))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Kind::Drop,
                "app.cache",
                Ts::new(16 * 3600 + 34 * 60, 1),
                Ts::new(16 * 3600 + 34 * 60, 1)
            ),
            (Kind::DropDatabase, "app", Ts::new(t, 1), Ts::new(t, 1)),
        ]
    );
    assert_eq!(f[1].collections, vec!["app.a", "app.b"]);

    // A chain of drops is cut where two are further apart than the window (10 s);
    // only the last part belongs to the dropDatabase.
    let docs = vec![
        cmd(100, 1, "w.$cmd", doc! { "drop": "a" }),
        cmd(105, 1, "w.$cmd", doc! { "drop": "b" }),
        cmd(120, 1, "w.$cmd", doc! { "drop": "c" }),
        cmd(121, 1, "w.$cmd", doc! { "dropDatabase": 1 }),
    ];
    let f = scan(&docs);
    let got: Vec<(Kind, &str)> = f.iter().map(|f| (f.kind, f.ns.as_str())).collect();
    assert_eq!(
        got,
        vec![
            (Kind::Drop, "w.a"),
            (Kind::Drop, "w.b"),
            (Kind::DropDatabase, "w")
        ]
    );
    assert_eq!(
        (f[2].ts, f[2].collections.clone()),
        (Ts::new(120, 1), vec!["w.c".to_string()])
    );

    // A dropDatabase more than the window after the last drop stands alone.
    let f = scan(&[
        cmd(100, 1, "z.$cmd", doc! { "drop": "a" }),
        cmd(200, 1, "z.$cmd", doc! { "dropDatabase": 1 }),
    ]);
    let got: Vec<(Kind, Ts)> = f.iter().map(|f| (f.kind, f.ts)).collect();
    assert_eq!(
        got,
        vec![
            (Kind::Drop, Ts::new(100, 1)),
            (Kind::DropDatabase, Ts::new(200, 1))
        ]
    );
}

#[test]
fn a_lone_drop_does_not_keep_the_slow_path_forever() {
    // While a drop run is pending every entry is parsed (its namespace is needed);
    // once the window has passed the run is settled and inserts take the fast path
    // again. Observable: the insert is counted without being examined.
    let mut s = Scanner::new(BurstRule::default());
    let feed = |s: &mut Scanner, d: Document| {
        let b = bson::to_vec(&d).unwrap();
        s.feed_bytes(&b).unwrap();
    };
    feed(&mut s, cmd(100, 1, "a.$cmd", doc! { "drop": "x" }));
    feed(
        &mut s,
        doc! { "op": "i", "ns": "b.c", "o": { "_id": 1 }, "ts": ts(200, 1) },
    );
    // The run was settled by the entry at 200.
    feed(
        &mut s,
        doc! { "op": "i", "ns": "b.c", "o": { "_id": 2 }, "ts": ts(50, 1) },
    );
    let (f, stats) = s.finish();
    assert_eq!(f.len(), 1);
    // The fast path does not read positions: the out-of-order insert at 50 went
    // unexamined.
    assert_eq!((stats.entries, stats.out_of_order), (3, 0));
}
