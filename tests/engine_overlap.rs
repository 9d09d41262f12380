//! The backup's documents load on a thread of their own while the slice is written
//! (issue 22): only for an oplog in ts order (its slice is streamed); one out of
//! order is sorted in `--sort-memory` first and the backup loaded after, so that the
//! two budgets never add up. Either way the outcome is the same: the same oplog,
//! in order or not, gives the same dump, byte for byte, and the same hashes. In
//! order, the slice is also applied as it is written (its file is not read back).

mod common;
mod replay_common;

use std::path::Path;

use replay_common::{code, read_json, run_pitr, show, stderr, FIXTURE};

/// The oplog's entries, each its bytes.
fn entries(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        out.push(&bytes[at..at + len]);
        at += len;
    }
    out
}

fn ts_of(entry: &[u8]) -> bson::Timestamp {
    bson::RawDocument::from_bytes(entry)
        .unwrap()
        .get_timestamp("ts")
        .unwrap()
}

/// `pitr replay --engine embedded --until auto` of the fixture's backup and `oplog`
/// in `cwd` (`PITR_TIMING=1`).
fn replay(cwd: &Path, oplog: &Path) -> std::process::Output {
    let backup = Path::new(FIXTURE).join("backup");
    let args = [
        "replay",
        "--engine",
        "embedded",
        "--backup",
        backup.to_str().unwrap(),
        "--oplog",
        oplog.to_str().unwrap(),
        "--until",
        "auto",
        "--accept-incidents",
        "--workdir",
        "work",
        "--out",
        "out",
    ];
    run_pitr(cwd, &args, &[("PITR_TIMING", "1")])
}

#[test]
fn an_oplog_out_of_order_gives_the_dump_of_the_same_oplog_in_order() {
    let sorted = std::fs::read(Path::new(FIXTURE).join("oplog.bson")).unwrap();
    let mut es = entries(&sorted);
    // Two neighbours of different ts in the middle (after the backup's end, before
    // the drop that `auto` stops at), swapped.
    let mid = es.len() / 3;
    let k = (mid..es.len() - 1)
        .find(|&i| ts_of(es[i]) != ts_of(es[i + 1]))
        .unwrap();
    es.swap(k, k + 1);
    let unsorted: Vec<u8> = es.concat();
    assert_ne!(unsorted, sorted);

    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::write(b.path().join("oplog.bson"), &unsorted).unwrap();
    let in_order = replay(a.path(), &Path::new(FIXTURE).join("oplog.bson"));
    let out_of_order = replay(b.path(), &b.path().join("oplog.bson"));
    assert_eq!(code(&in_order), 0, "{}", show(&in_order));
    assert_eq!(code(&out_of_order), 0, "{}", show(&out_of_order));

    // The overlap is taken for the oplog in order only; there the slice is applied
    // as it is written (`src/plan/build/streamed.rs`).
    let alongside = "on a thread of their own, alongside the slice";
    assert!(stderr(&in_order).contains(alongside), "{}", show(&in_order));
    assert!(
        stderr(&in_order).contains("loaded and both oplogs applied in"),
        "{}",
        show(&in_order)
    );
    assert!(
        !stderr(&out_of_order).contains(alongside),
        "{}",
        show(&out_of_order)
    );

    let (da, db) = (
        common::files_under(&a.path().join("out")),
        common::files_under(&b.path().join("out")),
    );
    assert!(!da.is_empty());
    assert_eq!(
        da.keys().collect::<Vec<_>>(),
        db.keys().collect::<Vec<_>>(),
        "the same files"
    );
    for (name, bytes) in &da {
        assert!(&db[name] == bytes, "{name} differs");
    }
    let (ra, rb) = (
        read_json(&a.path().join("work/report.json")),
        read_json(&b.path().join("work/report.json")),
    );
    assert_eq!(ra["namespaces"], rb["namespaces"]);
}
