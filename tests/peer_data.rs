//! Real oplog dumps recorded by mongo-tools (see ../shared/peer-data/README.md) are
//! read without error, with the entry counts that README lists. Skips, saying so,
//! where the peer data is absent.

mod common;

use common::*;
use pitr::oplog::{self, ReadOptions};

fn count(path: &std::path::Path) -> u64 {
    let mut r = oplog::open(path.to_str().unwrap(), ReadOptions::default())
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    while r
        .next_entry()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .is_some()
    {}
    r.entries_read()
}

#[test]
fn every_peer_oplog_reads_without_error() {
    let Some(peer) = peer_dir("every_peer_oplog_reads_without_error") else {
        return;
    };
    let mut files = Vec::new();
    let mut stack = vec![peer.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "bson") {
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                // Oplog files: root oplog.bson of dumps, oplog.rs.bson, and the oplogs/ samples.
                if name.contains("oplog") || p.parent().unwrap().ends_with("oplogs/bson") {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    assert!(
        files.len() >= 20,
        "found only {} peer oplog files",
        files.len()
    );
    for f in &files {
        count(f);
    }
}

#[test]
fn peer_entry_counts_match_the_readme() {
    let Some(peer) = peer_dir("peer_entry_counts_match_the_readme") else {
        return;
    };
    let rt = peer.join("mongorestore/testdata");
    for (path, n) in [
        ("oplogs/bson/drop_collection.bson", 1),
        ("oplogs/bson/drop_db.bson", 1),
        ("oplogs/bson/drop_index.bson", 1),
        ("dump_local_oplog/local/oplog.rs.bson", 100),
        ("timeseries_tests/ts_dump_with_oplog/oplog.bson", 872),
        ("testdirs/oplog.bson", 0),
    ] {
        assert_eq!(count(&rt.join(path)), n, "{path}");
    }
    // A dump directory resolves to its local/oplog.rs.bson.
    assert_eq!(count(&rt.join("dump_local_oplog")), 100);
    // 5 entries: _id 10-13 and _id 14.
    assert_eq!(
        count(&peer.join("test/qa-tests/jstests/restore/testdata/dump_with_oplog/oplog.bson")),
        5
    );
    // The 10 deletes of config.system.sessions are in a 21-entry oplog.
    let mut r = oplog::open(
        rt.join("oplog_partial_skips/oplog.bson").to_str().unwrap(),
        ReadOptions::default(),
    )
    .unwrap();
    let mut deletes = 0;
    while let Some(e) = r.next_entry().unwrap() {
        if e.op == oplog::Op::Delete && e.ns == "config.system.sessions" {
            deletes += 1;
        }
    }
    assert_eq!(deletes, 9 + 1);
    // The extended-JSON session has 22 entries.
    let bytes = extjson_lines_to_bson(&rt.join("oplogs/oplog.json"));
    let mut r = oplog::OplogReader::new(
        "oplog.json",
        std::io::Cursor::new(bytes),
        ReadOptions::default(),
    );
    while r.next_entry().unwrap().is_some() {}
    assert_eq!(r.entries_read(), 22);
}

#[test]
fn unsorted_real_oplogs_read_in_file_order() {
    let Some(peer) = peer_dir("unsorted_real_oplogs_read_in_file_order") else {
        return;
    };
    for p in [
        "commit_indexes_build/oplog.bson",
        "create_indexes/oplog.bson",
    ] {
        let path = peer.join("mongorestore/testdata").join(p);
        let mut r = oplog::open(path.to_str().unwrap(), ReadOptions::default()).unwrap();
        let mut prev = None;
        let mut backwards = 0;
        while let Some(e) = r.next_entry().unwrap() {
            if prev.is_some_and(|p| e.ts < p) {
                backwards += 1;
            }
            prev = Some(e.ts);
        }
        assert!(backwards > 0, "{p} is documented as unsorted");
    }
}

/// No silent passes: a test that needs the shared folder says `SKIPPED` where cargo
/// shows it when the folder is missing, and fails instead when `CI` is set. Runs
/// this very test binary as a child with the folder pointed elsewhere.
#[test]
fn a_missing_shared_folder_skips_visibly_and_fails_under_ci() {
    let run = |ci: Option<&str>| {
        let mut c = std::process::Command::new(std::env::current_exe().unwrap());
        c.args([
            "--exact",
            "every_peer_oplog_reads_without_error",
            "--test-threads=1",
        ])
        .env("PITR_SHARED_DIR", "/nonexistent/pitr-shared")
        .env_remove("CI");
        if let Some(v) = ci {
            c.env("CI", v);
        }
        c.output().unwrap()
    };
    let o = run(None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "without CI the test passes: {err}");
    assert!(
        err.contains("SKIPPED every_peer_oplog_reads_without_error: peer data not found at /nonexistent/pitr-shared"),
        "the skip is said on stderr, uncaptured: {err}"
    );
    for ci in ["true", "1"] {
        let o = run(Some(ci));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(!o.status.success(), "CI={ci}: the test must fail: {out}");
        assert!(out.contains("CI is set so it must"), "CI={ci}: {out}");
    }
    let o = run(Some("false"));
    assert!(o.status.success(), "CI=false counts as unset");
}
