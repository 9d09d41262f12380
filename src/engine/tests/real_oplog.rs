//! Real `$v:2` diffs recorded by a 5.0 server (mongo-tools' peer data: a time-series
//! collection's buckets dumped with `mongodump --oplog`, and the 872 bucket updates
//! of its oplog). The dump captured each bucket at some point inside the oplog
//! window, so replaying the whole oplog over it relies on the server's idempotency
//! guarantee: the result must not change when the oplog is applied again, every
//! entry must apply, and each bucket's columns must stay aligned.

use std::collections::BTreeMap;
use std::path::Path;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use super::super::compare::IdKey;
use super::super::update::{apply_oplog_update, ApplyOptions};

const DIR: &str =
    "../shared/peer-data/mongo-tools/mongorestore/testdata/timeseries_tests/ts_dump_with_oplog";

fn read_docs(path: &Path) -> Vec<RawDocumentBuf> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let n = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        out.push(RawDocumentBuf::from_bytes(bytes[at..at + n].to_vec()).unwrap());
        at += n;
    }
    out
}

fn replay(buckets: &mut BTreeMap<IdKey, RawDocumentBuf>, oplog: &[RawDocumentBuf]) -> usize {
    let mut applied = 0;
    let mut out = Vec::new();
    for e in oplog {
        if e.get_str("op").unwrap() != "u" {
            continue;
        }
        let o2 = e.get_document("o2").unwrap();
        let key = IdKey::from_document_id(o2).unwrap();
        let Some(cur) = buckets.get(&key) else {
            continue;
        };
        out.clear();
        apply_oplog_update(
            cur,
            e.get_document("o").unwrap(),
            ApplyOptions::default(),
            &mut out,
        )
        .unwrap_or_else(|err| panic!("entry {:?}: {err}", e.get("ts")));
        buckets.insert(key, RawDocumentBuf::from_bytes(out.clone()).unwrap());
        applied += 1;
    }
    applied
}

fn column_keys(bucket: &RawDocument, column: &str) -> Vec<String> {
    match bucket.get_document("data").unwrap().get(column).unwrap() {
        Some(RawBsonRef::Document(d)) => d.iter().map(|e| e.unwrap().0.to_string()).collect(),
        other => panic!("column {column} is {other:?}"),
    }
}

#[test]
fn real_5_0_diffs_replay_idempotently() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    if !dir.is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "peer data missing at {}",
            dir.display()
        );
        eprintln!(
            "SKIPPED real_5_0_diffs_replay_idempotently: no peer data at {}",
            dir.display()
        );
        return;
    }
    let oplog = read_docs(&dir.join("oplog.bson"));
    let dumped = read_docs(&dir.join("timeseries_test/system.buckets.foo_ts.bson"));
    let mut buckets: BTreeMap<IdKey, RawDocumentBuf> = dumped
        .iter()
        .map(|d| (IdKey::from_document_id(d).unwrap(), d.clone()))
        .collect();
    let applied = replay(&mut buckets, &oplog);
    assert_eq!(applied, 872, "every bucket update finds its bucket");
    let once = buckets.clone();
    replay(&mut buckets, &oplog);
    for (k, doc) in &buckets {
        assert_eq!(
            doc.as_bytes(),
            once[k].as_bytes(),
            "bucket {k:?} changed on re-application"
        );
        let ts = column_keys(doc, "ts");
        assert_eq!(ts, column_keys(doc, "_id"), "bucket {k:?}");
        assert_eq!(ts, column_keys(doc, "measurement"), "bucket {k:?}");
        let expected: Vec<String> = (0..ts.len()).map(|i| i.to_string()).collect();
        assert_eq!(ts, expected, "bucket {k:?} rows are numbered 0..n");
    }
    // Some buckets really grew.
    assert!(buckets.iter().any(|(k, d)| d.as_bytes().len()
        > dumped
            .iter()
            .find(|x| IdKey::from_document_id(x).unwrap() == *k)
            .unwrap()
            .as_bytes()
            .len()));
}
