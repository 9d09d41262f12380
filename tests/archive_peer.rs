//! Real archives nobody here wrote (mongo-tools' own test data, see
//! ../shared/peer-data/README.md): what they hold, the oplog inside
//! `dump-w-oplog.archive` read through the archive adapter and `OplogReader`, the
//! malformed `bad-format.archive` refused, and a directory dump's `prelude.json.gz`.

mod archive_common;
mod common;

use archive_common::*;
use pitr::archive::{
    self, prelude_json, ArchiveError, CollectionType, CrcCheck, Namespace, NamespaceReader,
    ReadOptions,
};
use pitr::oplog::{OplogReader, ReadOptions as OplogOptions};

fn open(path: &std::path::Path) -> archive::ArchiveReader {
    archive::open(path.to_str().unwrap(), ReadOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn counts(inv: &Inventory) -> Vec<(&str, u64)> {
    inv.counts.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

#[test]
fn dump_with_oplog_archive_holds_its_namespaces_and_counts() {
    let Some(td) = peer_testdata("dump_with_oplog_archive_holds_its_namespaces_and_counts") else {
        return;
    };
    let r = open(&td.join("dump-w-oplog.archive"));
    assert!(!r.is_gzip());
    let h = r.header();
    assert_eq!(
        (
            h.format_version.as_str(),
            h.server_version.as_str(),
            h.concurrent_collections
        ),
        ("0.1", "4.0.2", 4)
    );
    assert_eq!(h.tool_version, "r4.1.3-4-gd9eefb54");
    // The oplog is a root-level entry: database "", collection "oplog", no metadata.
    let oplog = r.prelude().iter().find(|m| m.db.is_empty()).unwrap();
    assert_eq!(
        (oplog.collection.as_str(), oplog.metadata.as_str()),
        ("oplog", "")
    );
    let foo = r.prelude().iter().find(|m| m.collection == "foo").unwrap();
    // This tool version wrote no `type` field.
    assert_eq!(foo.kind, CollectionType::Unset);
    assert!(
        foo.metadata
            .starts_with(r#"{"options":{},"indexes":[{"v":2,"#),
        "{}",
        foo.metadata
    );

    let inv = inventory(r).unwrap();
    assert_eq!(
        counts(&inv),
        [("admin.system.version", 1), ("oplog", 18), ("test.foo", 25)]
    );
    // The oplog comes last (mongodump dumps it after all collections).
    assert_eq!(inv.ended.last().map(String::as_str), Some("oplog"));
    assert!(inv.crcs.values().all(|c| matches!(c, CrcCheck::Matched(_))));
}

#[test]
fn the_oplog_of_an_archive_reads_through_oplog_reader() {
    let Some(td) = peer_testdata("the_oplog_of_an_archive_reads_through_oplog_reader") else {
        return;
    };
    let path = td.join("dump-w-oplog.archive");
    // The same documents through the event stream...
    let expected = inventory(open(&path))
        .unwrap()
        .documents
        .remove("oplog")
        .unwrap();

    // ...and through the adapter, as OplogReader sees them.
    let ns = NamespaceReader::new(open(&path), &Namespace::oplog()).unwrap();
    let mut oplog = OplogReader::new("dump-w-oplog.archive (oplog)", ns, OplogOptions::default());
    let mut seen = Vec::new();
    let mut ops = Vec::new();
    while let Some(e) = oplog.next_entry().unwrap() {
        ops.push((e.ts, e.op == pitr::oplog::Op::Insert, e.ns.to_string()));
        seen.push(e.raw.as_bytes().to_vec());
    }
    assert_eq!(seen.len(), 18);
    assert_eq!(seen, expected);
    // Real entries: inserts into test.foo among them, timestamps in order.
    assert!(
        ops.iter()
            .any(|(_, insert, ns)| *insert && ns == "test.foo"),
        "{ops:?}"
    );
    assert!(ops.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn short_archive_and_timeseries_archive() {
    let Some(td) = peer_testdata("short_archive_and_timeseries_archive") else {
        return;
    };
    let inv = inventory(open(&td.join("test.bar.archive"))).unwrap();
    assert_eq!(counts(&inv), [("admin.system.version", 1), ("test.bar", 1)]);
    let bar = bson::RawDocument::from_bytes(&inv.documents["test.bar"][0]).unwrap();
    assert_eq!(bar.get_str("foo").unwrap(), "bar");

    let r = open(&td.join("timeseries_tests/dump.archive"));
    let ts = r
        .prelude()
        .iter()
        .find(|m| m.collection == "foo_ts")
        .unwrap();
    assert_eq!(ts.kind, CollectionType::Timeseries);
    // A 5.0 server: the data is under system.buckets.<name>, not the prelude's name.
    assert_eq!(
        ts.data_namespace(r.header()).to_string(),
        "timeseries_test.system.buckets.foo_ts"
    );
    let inv = inventory(r).unwrap();
    assert_eq!(
        counts(&inv),
        [
            ("admin.system.version", 1),
            // An empty collection: one segment with no documents, then its EOF.
            ("admin.system.views", 0),
            ("timeseries_test.system.buckets.foo_ts", 10),
        ]
    );
}

#[test]
fn bad_format_archive_is_refused_with_a_clear_error() {
    let Some(td) = peer_testdata("bad_format_archive_is_refused_with_a_clear_error") else {
        return;
    };
    // Its framing is sound; the metadata of test.ixtest has an unescaped quote in an
    // index key (`"{"a":"b"}"`), which mongorestore cannot parse either
    // (mongorestore_archive_test.go `TestMongorestoreBadFormatArchive`).
    let err = archive::open(
        td.join("bad-format.archive").to_str().unwrap(),
        ReadOptions::default(),
    )
    .err()
    .expect("bad-format.archive must be refused");
    assert!(
        matches!(err, ArchiveError::BadMetadata { ref namespace, .. } if namespace == "test.ixtest"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("bad-format.archive")
            && msg.contains("`test.ixtest`")
            && msg.contains("byte 106"),
        "{msg}"
    );
    assert!(pitr::error::Hint::hint(&err).is_some());
}

#[test]
fn prelude_json_gz_of_a_directory_dump() {
    let Some(td) = peer_testdata("prelude_json_gz_of_a_directory_dump") else {
        return;
    };
    let dir = td.join("prelude_test/prelude_gzip");
    let found = prelude_json::locate(&dir.join("test")).expect("found in the parent directory");
    assert_eq!(found, dir.join("prelude.json.gz"));
    let p = prelude_json::read(&found).unwrap();
    assert_eq!(p.server_version, "7.0.16");
    assert_eq!(p.tool_version, "");
}

#[test]
fn peer_archives_are_not_mistaken_for_other_formats() {
    let Some(td) = peer_testdata("peer_archives_are_not_mistaken_for_other_formats") else {
        return;
    };
    // A plain BSON oplog is not an archive, and the error says what it is.
    let err = archive::open(
        td.join("extra_oplog.bson").to_str().unwrap(),
        ReadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("plain BSON file"), "{err}");
    // A gzipped BSON file: gzip recognised, content described.
    let err = archive::open(
        td.join("prelude_test/prelude_gzip/test/foo.bson.gz")
            .to_str()
            .unwrap(),
        ReadOptions::default(),
    )
    .err()
    .unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("gzip-compressed data holding a plain BSON file"),
        "{msg}"
    );
    // And a JSON file.
    let err = archive::open(
        td.join("prelude_test/prelude_gzip/prelude.json.gz")
            .to_str()
            .unwrap(),
        ReadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("JSON"), "{err}");
}
