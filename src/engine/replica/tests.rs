//! Per-rule tests of the replica, each taken from the server test that pins the
//! rule (named in the test), plus the engine's own invariants (memory and disk give
//! the same documents in the same order).

use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, RawDocumentBuf, Timestamp};

use super::*;
use crate::engine::walk::{Source, Walker};
use crate::plan::expect::Model;

fn ts(t: u32, i: u32) -> Bson {
    Bson::Timestamp(Timestamp {
        time: t,
        increment: i,
    })
}

fn uuid(n: u8) -> Binary {
    Binary {
        subtype: BinarySubtype::Uuid,
        bytes: vec![n; 16],
    }
}

fn replica() -> Replica {
    Replica::new(ReplicaOptions {
        content: Content::Documents,
        ..ReplicaOptions::default()
    })
}

fn apply(r: &mut Replica, d: Document, phase: Phase) -> Result<(), ReplicaError> {
    let raw = RawDocumentBuf::from_document(&d).unwrap();
    let e = Entry::parse(&raw).unwrap();
    r.apply(&e, phase)
}

fn ok(r: &mut Replica, d: Document) {
    apply(r, d.clone(), Phase::Strict).unwrap_or_else(|e| panic!("{d}: {e}"));
}

fn create(r: &mut Replica, ns: &str, ui: u8) {
    let (db, coll) = ns.split_once('.').unwrap();
    ok(
        r,
        doc! { "ts": ts(1, 1), "op": "c", "ns": format!("{db}.$cmd"), "ui": uuid(ui),
        "o": { "create": coll, "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } } },
    );
}

fn docs(r: &Replica, ns: &str) -> Vec<Document> {
    let mut v = Vec::new();
    r.for_each_document(ns, &mut |d| {
        v.push(bson::from_slice(d).unwrap());
        Ok(())
    })
    .unwrap();
    v
}

fn ins(ns: &str, ui: u8, o: Document) -> Document {
    doc! { "ts": ts(2, 1), "op": "i", "ns": ns, "ui": uuid(ui), "o": o }
}

/// oplog_applier_impl_test.cpp `applyOplogEntryOrGroupedInsertsInsertDocumentCollectionMissing`:
/// NamespaceNotFound on a secondary, and the collection is not created implicitly.
#[test]
fn insert_into_a_missing_collection_is_an_error_and_creates_nothing() {
    let mut r = replica();
    let e = apply(&mut r, ins("test.t", 1, doc! { "_id": 0 }), Phase::Strict).unwrap_err();
    assert!(
        e.to_string().contains("NamespaceNotFound") && e.to_string().contains("test.t"),
        "{e}"
    );
    assert!(!r.exists("test.t"));
    // Initial sync (the backup's own oplog): the collection was dropped later.
    apply(
        &mut r,
        ins("test.t", 1, doc! { "_id": 0 }),
        Phase::Idempotent,
    )
    .unwrap();
    assert!(!r.exists("test.t"));
}

/// `applyOplogEntryOrGroupedInsertsInsertExistingDocument` (constraints relaxed: OK,
/// the insert becomes an upsert of `o`): the existing document becomes exactly `o`.
#[test]
fn insert_of_an_existing_id_replaces_the_document() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    ok(&mut r, ins("test.t", 1, doc! { "_id": 0, "a": 1, "b": 2 }));
    ok(&mut r, ins("test.t", 1, doc! { "_id": 0.0, "c": 3 }));
    assert_eq!(docs(&r, "test.t"), vec![doc! { "_id": 0.0, "c": 3 }]);
    assert_eq!(r.count("test.t"), 1);
}

/// `applyOplogEntryOrGroupedInsertsDeleteDocumentDocMissing` (constraints enforced:
/// NoSuchKey) and `...UpdateMissingDocument` (UpdateOperationFailed): errors in the
/// strict phase, tolerated and counted in the initial-sync phase.
#[test]
fn update_or_delete_of_a_missing_document() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    let upd = doc! { "ts": ts(3, 1), "op": "u", "ns": "test.t", "ui": uuid(1), "o": { "$v": 2, "diff": { "u": { "a": 1 } } }, "o2": { "_id": 0 } };
    let del = doc! { "ts": ts(3, 2), "op": "d", "ns": "test.t", "ui": uuid(1), "o": { "_id": 0 } };
    let e = apply(&mut r, upd.clone(), Phase::Strict).unwrap_err();
    assert!(
        e.to_string().contains("3:1") && e.to_string().contains("missing document"),
        "{e}"
    );
    let e = apply(&mut r, del.clone(), Phase::Strict).unwrap_err();
    assert!(e.to_string().contains("3:2"), "{e}");
    apply(&mut r, upd, Phase::Idempotent).unwrap();
    apply(&mut r, del, Phase::Idempotent).unwrap();
    assert_eq!(r.tolerated.idempotent, 2);
    assert_eq!(r.count("test.t"), 0);
}

/// An update with `b: true` was an upsert on the primary: the document is created
/// from `{_id}` and the update (`UpsertStage`), in every phase.
#[test]
fn upsert_flag_creates_the_document() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    ok(
        &mut r,
        doc! { "ts": ts(3, 1), "op": "u", "ns": "test.t", "ui": uuid(1), "b": true, "o": { "$v": 2, "diff": { "i": { "a": 1 } } }, "o2": { "_id": 5 } },
    );
    assert_eq!(docs(&r, "test.t"), vec![doc! { "_id": 5, "a": 1 }]);
}

/// A malformed `$v:2` diff is refused with the server's code, naming the entry.
#[test]
fn malformed_diff_stops_the_strict_phase() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    ok(&mut r, ins("test.t", 1, doc! { "_id": 0, "a": 1 }));
    // document_diff_serialization: an unknown section is 4770503.
    let bad = doc! { "ts": ts(4, 7), "op": "u", "ns": "test.t", "ui": uuid(1), "o": { "$v": 2, "diff": { "x": { "a": 2 } } }, "o2": { "_id": 0 } };
    let e = apply(&mut r, bad, Phase::Strict).unwrap_err();
    assert!(
        e.to_string().contains("4:7") && e.to_string().contains("4770503"),
        "{e}"
    );
    assert_eq!(docs(&r, "test.t"), vec![doc! { "_id": 0, "a": 1 }]);
}

/// `applyOplogEntryOrGroupedInsertsInsertDocumentCollectionLockedByUUID`: the
/// collection is the one of `ui`, not of `ns`; `...LookupByUUIDFails`: a `ui` that
/// names no collection while `ns` has another UUID is NamespaceNotFound.
#[test]
fn crud_finds_the_collection_by_uuid() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    create(&mut r, "test.othername", 2);
    ok(&mut r, ins("test.othername", 1, doc! { "_id": 0 }));
    assert_eq!((r.count("test.t"), r.count("test.othername")), (1, 0));
    let e = apply(
        &mut r,
        ins("test.othername", 9, doc! { "_id": 1 }),
        Phase::Strict,
    )
    .unwrap_err();
    assert!(e.to_string().contains("NamespaceNotFound"), "{e}");
}

fn rename(from: &str, to: &str, drop_target: Bson, ui: Option<u8>) -> Document {
    let mut o = doc! { "renameCollection": from, "to": to, "stayTemp": false };
    if drop_target != Bson::Null {
        o.insert("dropTarget", drop_target);
    }
    let mut d = doc! { "ts": ts(5, 1), "op": "c", "ns": "test.$cmd", "o": o };
    if let Some(u) = ui {
        d.insert("ui", uuid(u));
    }
    d
}

/// rename_collection_test.cpp `RenameCollectionForApplyOpsDropTargetEvenIfSourceDoesNotExist`
/// and `RenameCollectionForApplyOpsSourceAndTargetDoNotExist`.
#[test]
fn rename_drop_target_even_if_source_does_not_exist() {
    let mut r = replica();
    create(&mut r, "test.bar", 1);
    ok(
        &mut r,
        rename("test.bar2", "test.bar", Bson::Boolean(true), Some(7)),
    );
    assert!(!r.exists("test.bar"));
    // Neither exists: NamespaceNotFound, an acceptable error (nothing happens).
    ok(
        &mut r,
        rename("test.foo", "test.bar", Bson::Boolean(true), Some(8)),
    );
    assert!(!r.exists("test.foo") && !r.exists("test.bar"));
}

/// `RenameCollectionForApplyOpsDropTargetByUUIDEvenIfSourceDoesNotExist`: the
/// collection with the dropTarget UUID is dropped; the named target stays.
#[test]
fn rename_drop_target_by_uuid() {
    let mut r = replica();
    create(&mut r, "test.bar", 1);
    create(&mut r, "test.bar3", 3);
    ok(
        &mut r,
        rename("test.bar2", "test.bar", Bson::Binary(uuid(3)), Some(9)),
    );
    assert!(r.exists("test.bar") && !r.exists("test.bar3"));
    // Source present, the target's UUID is the dropTarget: replaced.
    create(&mut r, "test.src", 4);
    ok(&mut r, ins("test.src", 4, doc! { "_id": 1 }));
    ok(
        &mut r,
        rename("test.src", "test.bar", Bson::Binary(uuid(1)), Some(4)),
    );
    assert_eq!((r.exists("test.src"), r.count("test.bar")), (false, 1));
    assert_eq!(r.get("test.bar").unwrap().uuid, Some([4; 16]));
}

/// `RenameCollectionForApplyOpsDropTargetByUUIDTargetExistsButRealDropTargetDoesNotExist`:
/// the server moves the target aside to a random name; pitr refuses rather than
/// invent it.
#[test]
fn rename_onto_a_target_that_is_not_the_drop_target_is_refused() {
    let mut r = replica();
    create(&mut r, "test.A", 1);
    create(&mut r, "test.B", 2);
    let e = apply(
        &mut r,
        rename("test.A", "test.B", Bson::Binary(uuid(3)), Some(1)),
        Phase::Strict,
    )
    .unwrap_err();
    assert!(matches!(e, ReplicaError::Unsupported { .. }), "{e}");
}

/// `RenameSameDatabaseStayTempFalse` / `RenameSameDatabaseStayTempTrue`: `temp` is
/// cleared unless `stayTemp`.
#[test]
fn rename_clears_temp_unless_stay_temp() {
    for stay in [false, true] {
        let mut r = replica();
        ok(
            &mut r,
            doc! { "ts": ts(1, 1), "op": "c", "ns": "test.$cmd", "ui": uuid(1), "o": { "create": "tmp", "temp": true } },
        );
        ok(
            &mut r,
            doc! { "ts": ts(2, 1), "op": "c", "ns": "test.$cmd", "o": { "renameCollection": "test.tmp", "to": "test.final", "stayTemp": stay } },
        );
        let c = r.get("test.final").unwrap();
        assert_eq!(
            c.options.get_bool("temp").ok(),
            stay.then_some(true),
            "stayTemp {stay}"
        );
    }
}

/// `RenameCollectionReturnsNamespaceExitsIfTargetExistsAndDropTargetIsFalse`, across
/// databases in applyOps: NamespaceExists (acceptable), nothing renamed. With
/// `dropTarget` the copy gets a new UUID.
#[test]
fn rename_across_databases() {
    let mut r = replica();
    create(&mut r, "test.a", 1);
    create(&mut r, "other.a", 2);
    ok(&mut r, ins("test.a", 1, doc! { "_id": 1 }));
    ok(&mut r, rename("test.a", "other.a", Bson::Null, None));
    assert!(r.exists("test.a") && r.count("other.a") == 0);
    ok(
        &mut r,
        rename("test.a", "other.a", Bson::Boolean(true), None),
    );
    assert!(!r.exists("test.a"));
    assert_eq!(r.count("other.a"), 1);
    assert_eq!(r.get("other.a").unwrap().uuid, None);
}

/// `create` (`createCollectionForApplyOps`): options as logged, `idIndex` as the
/// `_id` index, no `_id` index for a clustered collection, a buckets collection for
/// time series, NamespaceExists leaves an existing collection as it is.
#[test]
fn create_options_and_indexes() {
    let mut r = replica();
    ok(
        &mut r,
        doc! { "ts": ts(1, 1), "op": "c", "ns": "test.$cmd", "ui": uuid(1), "o": {
        "create": "capped", "capped": true, "size": 4096_i64, "max": 10,
        "validator": { "a": { "$exists": true } }, "collation": { "locale": "fr" },
        "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_", "collation": { "locale": "fr" } } } },
    );
    let c = r.get("test.capped").unwrap();
    assert!(c.is_capped());
    assert_eq!(
        c.options,
        doc! { "capped": true, "size": 4096_i64, "max": 10, "validator": { "a": { "$exists": true } }, "collation": { "locale": "fr" } }
    );
    assert_eq!(
        c.indexes,
        vec![doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_", "collation": { "locale": "fr" } }]
    );
    ok(
        &mut r,
        doc! { "ts": ts(1, 2), "op": "c", "ns": "test.$cmd", "ui": uuid(2), "o": { "create": "clustered", "clusteredIndex": { "key": { "_id": 1 }, "unique": true, "v": 2 } } },
    );
    assert!(r.get("test.clustered").unwrap().indexes.is_empty());
    ok(
        &mut r,
        doc! { "ts": ts(1, 3), "op": "c", "ns": "test.$cmd", "ui": uuid(3), "o": { "create": "system.buckets.w", "clusteredIndex": true, "timeseries": { "timeField": "t" } } },
    );
    assert_eq!(
        r.get("test.system.buckets.w").unwrap().kind,
        CollKind::TimeseriesBuckets
    );
    // Again: NamespaceExists, nothing changes.
    ok(
        &mut r,
        doc! { "ts": ts(1, 4), "op": "c", "ns": "test.$cmd", "o": { "create": "capped" } },
    );
    assert!(r.get("test.capped").unwrap().is_capped());
    assert_eq!(r.tolerated.acceptable, 1);
    // Without idIndex the primary's _id index was version 1.
    ok(
        &mut r,
        doc! { "ts": ts(1, 5), "op": "c", "ns": "test.$cmd", "o": { "create": "old" } },
    );
    assert_eq!(
        r.get("test.old").unwrap().indexes,
        vec![catalog::default_id_index()]
    );
}

/// Index commands: `createIndexes`, two-phase builds (only the commit adds the
/// index), `dropIndexes` by name, key pattern and `*`, `collMod` TTL and hidden.
#[test]
fn index_commands() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    let cmd = |i: u32, o: Document| doc! { "ts": ts(6, i), "op": "c", "ns": "test.$cmd", "ui": uuid(1), "o": o };
    ok(
        &mut r,
        cmd(
            1,
            doc! { "createIndexes": "t", "v": 2, "key": { "a": 1 }, "name": "a_1" },
        ),
    );
    ok(
        &mut r,
        cmd(
            2,
            doc! { "startIndexBuild": "t", "indexBuildUUID": uuid(5), "indexes": [ { "v": 2, "key": { "b": 1 }, "name": "b_1" } ] },
        ),
    );
    assert_eq!(r.get("test.t").unwrap().indexes.len(), 2);
    ok(
        &mut r,
        cmd(
            3,
            doc! { "commitIndexBuild": "t", "indexBuildUUID": uuid(5), "indexes": [ { "v": 2, "key": { "b": 1 }, "name": "b_1", "expireAfterSeconds": 60 } ] },
        ),
    );
    ok(
        &mut r,
        cmd(
            4,
            doc! { "collMod": "t", "index": { "name": "b_1", "expireAfterSeconds": 3600 } },
        ),
    );
    ok(
        &mut r,
        cmd(
            5,
            doc! { "collMod": "t", "index": { "keyPattern": { "a": 1 }, "hidden": true } },
        ),
    );
    let ix = &r.get("test.t").unwrap().indexes;
    assert_eq!(
        ix[1],
        doc! { "v": 2, "key": { "a": 1 }, "name": "a_1", "hidden": true }
    );
    assert_eq!(
        ix[2],
        doc! { "v": 2, "key": { "b": 1 }, "name": "b_1", "expireAfterSeconds": 3600 }
    );
    ok(
        &mut r,
        cmd(6, doc! { "dropIndexes": "t", "index": { "a": 1 } }),
    );
    assert_eq!(r.get("test.t").unwrap().indexes.len(), 2);
    ok(&mut r, cmd(7, doc! { "dropIndexes": "t", "index": "*" }));
    assert_eq!(r.get("test.t").unwrap().indexes.len(), 1);
    // IndexNotFound is acceptable.
    ok(&mut r, cmd(8, doc! { "dropIndexes": "t", "index": "nope" }));
    ok(
        &mut r,
        cmd(
            9,
            doc! { "collMod": "t", "validator": { "x": 1 }, "validationLevel": "moderate" },
        ),
    );
    assert_eq!(
        r.get("test.t").unwrap().options,
        doc! { "validator": { "x": 1 }, "validationLevel": "moderate" }
    );
}

/// Index builds on a time-series collection's buckets (`db.system.buckets.X`, in
/// bucket terms) are kept as `listIndexes` on the time-series collection shows them,
/// so the dump's metadata is mongodump's (`createTimeseriesIndexFromBucketsIndex`,
/// `timeseries_index_schema_conversion_functions.cpp`); a key that does not
/// translate is not listed by the server and is counted; a drop by a bucket key
/// pattern finds the translated index.
#[test]
fn timeseries_index_builds_are_kept_as_listed() {
    let mut r = replica();
    ok(
        &mut r,
        doc! { "ts": ts(6, 1), "op": "c", "ns": "test.$cmd", "ui": uuid(3), "o": { "create": "system.buckets.w",
        "validator": { "$jsonSchema": { "bsonType": "object" } }, "clusteredIndex": true,
        "timeseries": { "timeField": "t", "metaField": "m", "granularity": "seconds", "bucketMaxSpanSeconds": 3600 } } },
    );
    let cmd = |i: u32, o: Document| doc! { "ts": ts(6, i), "op": "c", "ns": "test.$cmd", "ui": uuid(3), "o": o };
    // The default index of a time-series collection with a metaField (6.3+).
    ok(
        &mut r,
        cmd(
            2,
            doc! { "createIndexes": "system.buckets.w", "v": 2, "key": { "meta": 1, "control.min.t": 1, "control.max.t": 1 }, "name": "m_1_t_1" },
        ),
    );
    ok(
        &mut r,
        cmd(
            3,
            doc! { "commitIndexBuild": "system.buckets.w", "indexBuildUUID": uuid(5), "indexes": [
            { "v": 2, "key": { "control.max.x": -1, "control.min.x": -1 }, "name": "x_-1",
              "originalSpec": { "v": 2, "key": { "x": -1 }, "name": "x_-1" } },
            { "v": 2, "key": { "data.y": 1 }, "name": "not_listed" } ] },
        ),
    );
    let c = r.get("test.system.buckets.w").unwrap();
    assert_eq!(
        c.indexes,
        vec![
            doc! { "v": 2, "key": { "m": 1, "t": 1 }, "name": "m_1_t_1" },
            doc! { "v": 2, "key": { "x": -1 }, "name": "x_-1" },
        ]
    );
    assert_eq!(r.tolerated.unlisted_indexes, 1);
    ok(
        &mut r,
        cmd(
            4,
            doc! { "dropIndexes": "system.buckets.w", "index": { "meta": 1, "control.min.t": 1, "control.max.t": 1 } },
        ),
    );
    assert_eq!(r.tolerated.acceptable, 0);
    ok(
        &mut r,
        cmd(
            5,
            doc! { "dropIndexes": "system.buckets.w", "index": "x_-1" },
        ),
    );
    assert!(r.get("test.system.buckets.w").unwrap().indexes.is_empty());
}

/// `drop`, `dropDatabase`, `emptycapped`, `convertToCapped`.
#[test]
fn drops_and_capped_commands() {
    let mut r = replica();
    create(&mut r, "a.x", 1);
    create(&mut r, "a.y", 2);
    create(&mut r, "b.z", 3);
    ok(&mut r, ins("a.x", 1, doc! { "_id": 1 }));
    ok(&mut r, ins("b.z", 3, doc! { "_id": 1 }));
    ok(
        &mut r,
        doc! { "ts": ts(7, 1), "op": "c", "ns": "b.$cmd", "o": { "convertToCapped": "z", "size": 1000 } },
    );
    assert!(r.get("b.z").unwrap().is_capped());
    ok(
        &mut r,
        doc! { "ts": ts(7, 2), "op": "c", "ns": "b.$cmd", "o": { "emptycapped": "z" } },
    );
    assert_eq!((r.exists("b.z"), r.count("b.z")), (true, 0));
    ok(
        &mut r,
        doc! { "ts": ts(7, 3), "op": "c", "ns": "a.$cmd", "o": { "dropDatabase": 1 } },
    );
    assert!(!r.exists("a.x") && !r.exists("a.y") && r.exists("b.z"));
    // A drop of a missing collection is NamespaceNotFound: acceptable.
    ok(
        &mut r,
        doc! { "ts": ts(7, 4), "op": "c", "ns": "a.$cmd", "o": { "drop": "x" } },
    );
    // An unknown command is refused, not guessed.
    let e = apply(
        &mut r,
        doc! { "ts": ts(7, 5), "op": "c", "ns": "a.$cmd", "o": { "importCollection": "x" } },
        Phase::Strict,
    )
    .unwrap_err();
    assert!(matches!(e, ReplicaError::Unsupported { .. }), "{e}");
}

fn txn_part(t: u32, txn: i64, ops: Vec<Document>, extra: Document) -> Document {
    let mut o = doc! { "applyOps": ops };
    o.extend(extra);
    doc! { "ts": ts(t, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": uuid(42) }, "txnNumber": txn, "o": o }
}

/// The walk skipping nothing: a secondary's view.
struct NothingSkipped;

impl crate::engine::walk::WalkRules for NothingSkipped {
    fn ignores_namespace(&self, _: &str) -> bool {
        false
    }
    fn ignores_op(&self, op: &str) -> bool {
        op == "n"
    }
    fn ignores_command(&self, _: &str) -> bool {
        false
    }
    fn knows_multi_op_type(&self) -> bool {
        true
    }
}

/// Transactions through the one walk (`engine::walk::Walker`): an unprepared
/// `partialTxn` chain applies at its last part, a prepared one at
/// `commitTransaction`, an aborted one never, and the vectored inserts of one
/// `applyOps` without a session apply at once.
#[test]
fn transactions_apply_at_their_commit() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    let mut m = visit::ReplicaVisitor::new(&mut r, Phase::Idempotent, Phase::Strict);
    let mut a = Walker::new(NothingSkipped);
    let i = |id: i32| doc! { "op": "i", "ns": "test.t", "ui": uuid(1), "o": { "_id": id } };
    let entries = vec![
        txn_part(10, 1, vec![i(1)], doc! { "partialTxn": true }),
        txn_part(11, 1, vec![i(2)], doc! {}),
        txn_part(12, 2, vec![i(3)], doc! { "prepare": true }),
        doc! { "ts": ts(13, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": uuid(42) }, "txnNumber": 2_i64, "o": { "commitTransaction": 1, "commitTimestamp": ts(12, 5) } },
        txn_part(14, 3, vec![i(4)], doc! { "prepare": true }),
        doc! { "ts": ts(15, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": uuid(42) }, "txnNumber": 3_i64, "o": { "abortTransaction": 1 } },
        doc! { "ts": ts(16, 1), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [ i(5), i(6) ] } },
        txn_part(17, 4, vec![i(7)], doc! { "partialTxn": true }),
    ];
    let mut counts = Vec::new();
    for d in entries {
        let raw = RawDocumentBuf::from_document(&d).unwrap();
        a.feed(&Entry::parse(&raw).unwrap(), Source::Slice, &mut m)
            .unwrap();
        assert!(m.take_error().is_none());
        counts.push(m.replica().count("test.t"));
    }
    assert_eq!(counts, vec![0, 2, 2, 3, 3, 3, 5, 5]);
}

/// dbHash (`dbhash.cpp`): MD5 over the documents in `_id` order, numbers by value
/// across types (the stand-in's `hash_reads_in_id_order_across_numeric_types`);
/// an empty collection hashes to the MD5 of nothing.
#[test]
fn dbhash_reads_in_id_order() {
    let mut r = replica();
    create(&mut r, "test.t", 1);
    create(&mut r, "test.empty", 2);
    let ds = [
        doc! { "_id": 3_i64, "x": "c" },
        doc! { "_id": 1.5, "x": "b" },
        doc! { "_id": 1, "x": "a" },
        doc! { "_id": "s" },
    ];
    for d in &ds {
        ok(&mut r, ins("test.t", 1, d.clone()));
    }
    let mut bytes = Vec::new();
    for i in [2, 1, 0, 3] {
        bytes.extend(bson::to_vec(&ds[i]).unwrap());
    }
    use md5::{Digest, Md5};
    assert_eq!(
        r.collection_hash("test.t").unwrap().unwrap().md5,
        hash::hex(&Md5::digest(&bytes))
    );
    assert_eq!(
        r.collection_hash("test.empty").unwrap().unwrap().md5,
        "d41d8cd98f00b204e9800998ecf8427e"
    );
}

/// A collated `_id` index orders string `_id`s by ICU collation keys
/// (`CollatorInterface`, `src/mongo/db/query/collation/collator_interface.h`), which
/// pitr does not compute: such a collection with a string `_id` gets no predicted
/// hash (never a wrong one), one whose `_id`s are all numbers keeps its hash (a
/// collation changes only string comparison), and `locale: "simple"` is binary.
#[test]
fn dbhash_is_not_predicted_for_string_ids_under_a_collation() {
    let mut r = replica();
    let mk = |r: &mut Replica, coll: &str, ui: u8, locale: &str| {
        ok(
            r,
            doc! { "ts": ts(1, ui as u32), "op": "c", "ns": "test.$cmd", "ui": uuid(ui), "o": {
            "create": coll, "collation": { "locale": locale },
            "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_", "collation": { "locale": locale } } } },
        );
    };
    mk(&mut r, "fr_strings", 1, "fr");
    mk(&mut r, "fr_numbers", 2, "fr");
    mk(&mut r, "simple", 3, "simple");
    for (coll, ui) in [("fr_strings", 1), ("fr_numbers", 2), ("simple", 3)] {
        ok(&mut r, ins(&format!("test.{coll}"), ui, doc! { "_id": 1 }));
        ok(&mut r, ins(&format!("test.{coll}"), ui, doc! { "_id": 2 }));
    }
    ok(
        &mut r,
        ins("test.fr_strings", 1, doc! { "_id": { "k": "B" } }),
    );
    ok(&mut r, ins("test.simple", 3, doc! { "_id": "b" }));
    let h = |ns: &str| r.collection_hash(ns).unwrap().unwrap();
    assert_eq!(h("test.fr_strings").md5, hash::COLLATED_ID);
    assert_eq!(h("test.fr_strings").predicted(), None);
    assert_eq!(h("test.fr_strings").documents, 3);
    assert!(h("test.fr_numbers").predicted().is_some());
    assert!(h("test.simple").predicted().is_some());
    // The plan's expectation predicts no content for it, and still counts it.
    let m = Model::from_replica(r, true, Phase::Strict, Phase::Strict, Default::default());
    let e = m.finish().unwrap().unwrap();
    let fr = e.iter().find(|e| e.ns == "test.fr_strings").unwrap();
    assert_eq!((fr.documents, fr.md5.as_deref()), (3, None));
    assert_eq!(fr.md5_not_predicted.as_deref(), Some(hash::COLLATED_ID));
    assert!(e
        .iter()
        .find(|e| e.ns == "test.simple")
        .unwrap()
        .md5
        .is_some());
}

/// Past the memory budget the documents move to disk; reads, order and hashes
/// are the same, also across numeric `_id` types and after deletes.
#[test]
fn disk_store_keeps_the_server_order() {
    let dir = tempfile::tempdir().unwrap();
    let mk = |budget: usize| {
        Replica::new(ReplicaOptions {
            content: Content::Documents,
            memory: budget,
            spill_dir: Some(dir.path().join(budget.to_string())),
            update: Default::default(),
            writers: 1,
        })
    };
    std::fs::create_dir_all(dir.path().join("100")).unwrap();
    std::fs::create_dir_all(dir.path().join(usize::MAX.to_string())).unwrap();
    let (mut small, mut big) = (mk(100), mk(usize::MAX));
    for r in [&mut small, &mut big] {
        create(r, "test.t", 1);
        for i in (0..300).rev() {
            let id: Bson = match i % 4 {
                0 => Bson::Int32(i),
                1 => Bson::Int64(i as i64),
                2 => Bson::Double(i as f64 + 0.5),
                _ => Bson::String(format!("k{i:04}")),
            };
            ok(r, ins("test.t", 1, doc! { "_id": id, "n": i }));
        }
        for i in (0..300).step_by(7) {
            let _ = apply(
                r,
                doc! { "ts": ts(8, 1), "op": "d", "ns": "test.t", "ui": uuid(1), "o": { "_id": i } },
                Phase::Strict,
            );
        }
        ok(
            r,
            doc! { "ts": ts(9, 1), "op": "u", "ns": "test.t", "ui": uuid(1), "o": { "$v": 2, "diff": { "u": { "n": -1 } } }, "o2": { "_id": 2.5 } },
        );
        // An upsert of a missing document (a new one: counted once).
        ok(
            r,
            doc! { "ts": ts(9, 2), "op": "u", "ns": "test.t", "ui": uuid(1), "b": true, "o": { "_id": "up", "n": 7 }, "o2": { "_id": "up" } },
        );
        r.flush().unwrap();
    }
    assert!(small.store().spilled() && !big.store().spilled());
    assert_eq!(docs(&small, "test.t"), docs(&big, "test.t"));
    assert_eq!(small.count("test.t"), big.count("test.t"));
    // The deletes by int `_id` find the int and long ids (i % 4 < 2): 21 of the 43.
    assert_eq!(small.count("test.t"), 300 - 21 + 1);
    assert_eq!(small.hashes().unwrap(), big.hashes().unwrap());
}

/// `create_collection.cpp` `createCollectionForApplyOps`: with a UUID, an existing
/// collection of that name with another UUID is moved out of the way only when
/// `allowRenameOutOfTheWay` (not in steady-state application: `oplog.cpp` passes
/// false for kSecondary, and the function stops on its invariant). Pinned: a
/// `--skip`ped drop followed by the application's re-create used to fail later, at
/// the first insert, as "different histories".
#[test]
fn create_over_a_collection_with_another_uuid_stops_steady_state_application() {
    let mut r = replica();
    create(&mut r, "shop.orders", 1);
    let again = doc! { "ts": ts(5, 1), "op": "c", "ns": "shop.$cmd", "ui": uuid(2),
    "o": { "create": "orders", "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } } };
    let e = apply(&mut r, again.clone(), Phase::Strict).unwrap_err();
    assert!(
        matches!(e, ReplicaError::CreateOverExisting { .. }),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(
        m.contains("entry 5:1") && m.contains("`shop.orders`"),
        "{m}"
    );
    assert!(m.contains("out of the way"), "{m}");
    assert!(crate::error::Hint::hint(&e)
        .unwrap()
        .contains("--ns shop.orders"));
    // The same UUID again is the collection itself: nothing to do.
    create(&mut r, "shop.orders", 1);
    // Replaying the backup's own oplog (idempotent) tolerates it as before.
    apply(&mut r, again, Phase::Idempotent).unwrap();
}

/// A backup's collection for the cold tests: `n` documents in `_id` order.
fn backup_file(dir: &std::path::Path, name: &str, n: i32) -> std::path::PathBuf {
    let mut b = Vec::new();
    for i in 0..n {
        let id = if i % 5 == 4 {
            Bson::Double(f64::from(i) + 0.5)
        } else {
            Bson::Int32(i)
        };
        b.extend(
            bson::to_vec(&doc! { "_id": id, "n": i, "s": "x".repeat((i % 7) as usize) }).unwrap(),
        );
    }
    let p = dir.join(name);
    std::fs::write(&p, b).unwrap();
    p
}

/// Collections left in the backup's files (`cold`) give what loading them gives,
/// whatever touches them: CRUD applied alone and by the writer threads (the first
/// write loads the collection), a rename, a drop (nothing loaded), a command pitr
/// cannot place (everything loaded), in memory and past the budget; and what
/// nothing touches stays cold and reads the same (documents, counts, single
/// reads, `dbHash`).
#[test]
fn cold_collections_give_what_loading_gives() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["a.x", "a.y", "b.z", "c.q", "d.u"];
    let files: Vec<_> = names
        .iter()
        .map(|ns| backup_file(dir.path(), ns, 300))
        .collect();
    for (case, (writers, memory, unknown_command)) in [
        (1, usize::MAX, false),
        (2, usize::MAX, false),
        (2, 3000, false),
        (1, 3000, true),
        (2, usize::MAX, true),
    ]
    .into_iter()
    .enumerate()
    {
        let mk = |cold: bool| {
            let spill = dir.path().join(format!("spill-{case}-{cold}"));
            std::fs::create_dir_all(&spill).unwrap();
            let mut r = Replica::new(ReplicaOptions {
                content: Content::Documents,
                memory,
                spill_dir: Some(spill),
                update: Default::default(),
                writers,
            });
            r.set_batch_entries(16);
            for (i, (ns, file)) in names.iter().zip(&files).enumerate() {
                r.seed_namespace(ns, |slot| {
                    let mut c = CollInfo::new(slot, CollKind::Collection);
                    c.indexes = vec![catalog::default_id_index()];
                    c.uuid = Some([i as u8 + 1; 16]);
                    c
                });
                if cold {
                    let docs = cold::ColdDocs::check(file, &mut || Ok(()))
                        .unwrap()
                        .unwrap();
                    r.seed_cold(ns, std::sync::Arc::new(docs));
                } else {
                    let bytes = std::fs::read(file).unwrap();
                    let mut at = 0;
                    while at < bytes.len() {
                        let len =
                            i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
                        let d = bson::RawDocument::from_bytes(&bytes[at..at + len]).unwrap();
                        r.seed_document(ns, d, 0).unwrap();
                        at += len;
                    }
                }
            }
            r
        };
        let (mut loaded, mut cold) = (mk(false), mk(true));
        assert_eq!(cold.cold_collections(), names.len());
        let mut entries = Vec::new();
        for i in 0..40 {
            let t = 10 + i as u32;
            let (ns, ui) = if i % 2 == 0 { ("a.x", 1) } else { ("a.y", 2) };
            entries.push(match i % 4 {
                0 | 1 => doc! { "ts": ts(t, 1), "op": "i", "ns": ns, "ui": uuid(ui), "o": { "_id": 1000 + i, "n": i } },
                2 => doc! { "ts": ts(t, 1), "op": "u", "ns": ns, "ui": uuid(ui), "o": { "$v": 2, "diff": { "u": { "n": -i } } }, "o2": { "_id": i * 5 } },
                _ => doc! { "ts": ts(t, 1), "op": "d", "ns": ns, "ui": uuid(ui), "o": { "_id": i * 5 + 1 } },
            });
        }
        entries.push(doc! { "ts": ts(60, 1), "op": "c", "ns": "admin.$cmd", "o": { "renameCollection": "b.z", "to": "b.w" } });
        entries.push(doc! { "ts": ts(61, 1), "op": "c", "ns": "c.$cmd", "o": { "drop": "q" } });
        entries.push(
            doc! { "ts": ts(62, 1), "op": "i", "ns": "b.w", "ui": uuid(3), "o": { "_id": -1 } },
        );
        if unknown_command {
            entries.push(doc! { "ts": ts(63, 1), "op": "c", "ns": "d.$cmd", "o": { "someFutureCommand": 1 } });
        }
        for (which, r) in [("loaded", &mut loaded), ("cold", &mut cold)] {
            for (i, e) in entries.iter().enumerate() {
                let raw = RawDocumentBuf::from_document(e).unwrap();
                let e = Entry::parse(&raw).unwrap();
                // The first writes to `a.x` alone, to `a.y` by the writer threads.
                let res = if i % 2 == 0 {
                    r.apply(&e, Phase::Strict)
                } else {
                    r.apply_partitioned(&e, Phase::Strict)
                };
                if let Err(err) = res {
                    assert!(
                        matches!(err, ReplicaError::Unsupported { .. }),
                        "case {case} {which}: {err}"
                    );
                }
            }
            r.flush().unwrap();
        }
        let what = format!(
            "case {case} (writers {writers}, memory {memory}, unknown command {unknown_command})"
        );
        let left: Vec<&str> = names
            .iter()
            .copied()
            .filter(|ns| cold.cold(ns).is_some())
            .collect();
        assert_eq!(
            left,
            if unknown_command { vec![] } else { vec!["d.u"] },
            "{what}"
        );
        assert_eq!(cold.store().spilled(), loaded.store().spilled(), "{what}");
        assert_eq!(
            cold.namespaces()
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>(),
            loaded
                .namespaces()
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>(),
            "{what}"
        );
        for (ns, _) in loaded.namespaces() {
            assert_eq!(docs(&cold, ns), docs(&loaded, ns), "{what}: {ns}");
            assert_eq!(cold.count(ns), loaded.count(ns), "{what}: {ns}");
            for id in [0, 4, 299, 301, 1000] {
                let k = IdKey::from_value(bson::RawBsonRef::Int32(id));
                assert_eq!(
                    cold.document(ns, &k).unwrap(),
                    loaded.document(ns, &k).unwrap(),
                    "{what}: {ns} {id}"
                );
            }
        }
        assert_eq!(cold.hashes().unwrap(), loaded.hashes().unwrap(), "{what}");
        assert_eq!(cold.total_documents(), loaded.total_documents(), "{what}");
        assert_eq!(cold.applied, loaded.applied, "{what}");
    }
}
