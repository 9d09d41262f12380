//! The same backup in every layout mongodump writes (directory, `--gzip`
//! directory with a gzip `oplog.bson`, archive, gzipped archive), converted by the
//! generator from the committed incident: pitr reads each one the same way. The
//! real tools restore them in `replay_e2e.rs`. A time-series collection is added
//! to the backup first, so that every layout carries one.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use pitr_fixturegen::layout::{add_timeseries, convert, Layout};
use serde_json::Value;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident");

/// Buckets of the time-series collection `iot.readings` added to the backup.
const BUCKETS: u32 = 12;

/// The committed backup with a time-series collection (`iot.readings`, as
/// mongodump writes one) converted into every layout, in a temp dir.
fn layouts() -> (tempfile::TempDir, Vec<(Layout, PathBuf)>) {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("plain");
    convert(&Path::new(FIXTURE).join("backup"), Layout::Dir, &src).unwrap();
    add_timeseries(&src, "iot", "readings", BUCKETS, 1_795_200_000).unwrap();
    let v = Layout::ALL
        .iter()
        .map(|&l| {
            let dest = d.path().join(l.file_name());
            convert(&src, l, &dest).unwrap();
            (l, dest)
        })
        .collect();
    (d, v)
}

fn plan(backup: &Path, until: &str, out: &Path) -> Value {
    let o = pitr_in(
        Path::new(FIXTURE),
        &[
            "plan",
            "--backup",
            backup.to_str().unwrap(),
            "--oplog",
            "oplog.bson",
            "--until",
            until,
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&o), 0, "{}: {}", backup.display(), stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn every_layout_plans_the_same_counts_and_restore() {
    let (d, layouts) = layouts();
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(FIXTURE).join("truth.json")).unwrap(),
    )
    .unwrap();
    for inc in truth["incidents"].as_array().unwrap().iter().take(3) {
        let limit = inc["oplog_limit"].as_str().unwrap();
        let mut reference: Option<Value> = None;
        for (l, path) in &layouts {
            let p = plan(
                path,
                limit,
                &d.path().join(format!("p-{l:?}-{limit}").replace(':', "_")),
            );
            assert_eq!(p["until"]["limit"], limit);
            assert_eq!(
                p["backup"]["gzip"],
                matches!(l, Layout::Gzip | Layout::ArchiveGzip),
                "{l:?}"
            );
            let problems: Vec<&Value> = p["lint"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["code"] == "backup-layout")
                .collect();
            assert!(problems.is_empty(), "{l:?}: {problems:?}");
            let ts = p["expected"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["ns"] == "iot.system.buckets.readings")
                .unwrap_or_else(|| panic!("{l:?}: no time-series row: {}", p["expected"]));
            assert_eq!(ts["documents"], BUCKETS, "{l:?}: {ts}");
            match &reference {
                None => reference = Some(p["expected"].clone()),
                Some(r) => assert_eq!(&p["expected"], r, "{l:?} at {limit}"),
            }
            let restore = p["steps"][1]["commands"][0]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect::<Vec<_>>();
            let gzip = restore.contains(&"--gzip".to_string());
            assert_eq!(
                gzip,
                matches!(l, Layout::Gzip | Layout::ArchiveGzip),
                "{l:?}: {restore:?}"
            );
            let archive = restore.iter().any(|a| a.starts_with("--archive="));
            assert_eq!(
                archive,
                matches!(l, Layout::Archive | Layout::ArchiveGzip),
                "{l:?}: {restore:?}"
            );
            // One mongorestore run for every layout: a directory through links and
            // one oplog.bson, an archive re-streamed with the slice in its oplog.
            assert_eq!(p["restore"]["combined"], true, "{l:?}");
            let target = restore.last().unwrap();
            assert!(
                target.ends_with(if archive {
                    "/restore.archive"
                } else {
                    "/restore"
                }),
                "{l:?}: {target}"
            );
            if archive {
                // The restore archive: the backup's namespaces and counts, and its
                // oplog followed by the slice.
                let path = target.trim_start_matches("--archive=");
                let b = pitr::backup::open(Path::new(path)).unwrap();
                assert_eq!(b.gzip, gzip);
                let o = pitr_in(Path::new(FIXTURE), &["oplog", "stats", "--json", path]);
                let s: Value = serde_json::from_slice(&o.stdout).unwrap();
                assert_eq!(
                    s["entries"].as_u64().unwrap(),
                    20 + p["slice"]["entries"].as_u64().unwrap(),
                    "{l:?}"
                );
            }
        }
    }
}

#[test]
fn find_drop_with_backup_and_the_backups_own_oplog_take_every_layout() {
    let (_d, layouts) = layouts();
    let mut reference: Option<Value> = None;
    for (l, path) in &layouts {
        let o = pitr_in(
            Path::new(FIXTURE),
            &[
                "find-drop",
                "--json",
                "--backup",
                path.to_str().unwrap(),
                "oplog.bson",
            ],
        );
        assert_eq!(code(&o), 0, "{l:?}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        match &reference {
            None => reference = Some(v),
            Some(r) => assert_eq!(&v, r, "{l:?}"),
        }
        // The backup's own oplog read out of every layout.
        let o = pitr_in(
            Path::new(FIXTURE),
            &["oplog", "stats", "--json", path.to_str().unwrap()],
        );
        assert_eq!(code(&o), 0, "{l:?}: {}", stderr(&o));
        let s: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(s["entries"], 20, "{l:?}");
    }
}

/// The embedded engine restores every layout to the same state: the same
/// documents and `dbHash` per collection, the time-series buckets included, and
/// its dump of each holds the same collections.
#[test]
fn the_embedded_engine_restores_every_layout_alike() {
    let (d, layouts) = layouts();
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(FIXTURE).join("truth.json")).unwrap(),
    )
    .unwrap();
    let limit = truth["incidents"][0]["oplog_limit"].as_str().unwrap();
    let mut reference: Option<Value> = None;
    for (l, path) in &layouts {
        let work = d.path().join(format!("w-{l:?}"));
        let out = d.path().join(format!("out-{l:?}"));
        let o = pitr_in(
            Path::new(FIXTURE),
            &[
                "replay",
                "--backup",
                path.to_str().unwrap(),
                "--oplog",
                "oplog.bson",
                "--until",
                limit,
                "--workdir",
                work.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(code(&o), 0, "{l:?}: {}", stderr(&o));
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(work.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["engine"], "embedded", "{l:?}");
        let rows: Vec<Value> = report["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                serde_json::json!({
                    "ns": n["ns"], "exists": n["exists"], "documents": n["documents"], "md5": n["md5"]
                })
            })
            .collect();
        let ts = rows
            .iter()
            .find(|r| r["ns"] == "iot.system.buckets.readings")
            .unwrap_or_else(|| panic!("{l:?}: no time-series row: {rows:?}"));
        assert_eq!(ts["documents"], BUCKETS, "{l:?}: {ts}");
        assert!(ts["md5"].is_string(), "{l:?}: {ts}");
        // mongodump's layout for a time-series collection: buckets under
        // system.buckets.<name>.bson, metadata under the time-series name.
        assert!(
            out.join("iot/system.buckets.readings.bson").is_file(),
            "{l:?}"
        );
        assert!(out.join("iot/readings.metadata.json").is_file(), "{l:?}");
        let rows = Value::Array(rows);
        match &reference {
            None => reference = Some(rows),
            Some(r) => assert_eq!(&rows, r, "{l:?} at {limit}"),
        }
    }
}

/// A dbpath as a WiredTiger mongod leaves it (the files pitr looks at; the data
/// files' bytes do not matter to recognition).
fn dbpath(dir: &Path, engine: &str, journal: bool) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("WiredTiger"),
        "WiredTiger\nWiredTiger 10.0.2: (March 31, 2022)\n",
    )
    .unwrap();
    std::fs::write(dir.join("WiredTiger.wt"), [0u8; 4096]).unwrap();
    std::fs::write(dir.join("_mdb_catalog.wt"), [0u8; 4096]).unwrap();
    std::fs::write(dir.join("collection-0-123.wt"), [0u8; 4096]).unwrap();
    let meta = bson::doc! {"storage": {"engine": engine, "options": {"directoryPerDB": false, "directoryForIndexes": false}}};
    std::fs::write(dir.join("storage.bson"), bson::to_vec(&meta).unwrap()).unwrap();
    if journal {
        std::fs::create_dir_all(dir.join("journal")).unwrap();
        std::fs::write(dir.join("journal/WiredTigerLog.0000000001"), [0u8; 128]).unwrap();
    }
}

/// Issue 23: data files given as --backup (a directory or a tar.gz of one) are named
/// for what they are, with the by-hand procedure, by every command that reads a
/// backup; files that could not be recovered at all say why. Exit 2, nothing written.
#[test]
fn a_snapshot_backup_is_named_and_refused_with_the_procedure() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("snap/db");
    dbpath(&db, "wiredTiger", true);
    let tgz = d.path().join("snap.tar.gz");
    let st = std::process::Command::new("tar")
        .args([
            "-czf",
            tgz.to_str().unwrap(),
            "-C",
            d.path().join("snap").to_str().unwrap(),
            "db",
        ])
        .status()
        .expect("the system tar");
    assert!(st.success());
    let out = d.path().join("out");
    for backup in [&db, &tgz] {
        let b = backup.to_str().unwrap();
        for args in [
            vec![
                "plan",
                "--backup",
                b,
                "--oplog",
                "oplog.bson",
                "--until",
                "auto",
            ],
            vec![
                "replay",
                "--backup",
                b,
                "--oplog",
                "oplog.bson",
                "--until",
                "auto",
                "--out",
                out.to_str().unwrap(),
            ],
            vec!["find-drop", "--backup", b, "oplog.bson"],
        ] {
            let o = pitr_in(Path::new(FIXTURE), &args);
            let e = stderr(&o);
            assert_eq!(code(&o), 2, "{args:?}: {e}");
            assert!(
                e.contains("a snapshot backup, not a mongodump") && e.contains("WiredTiger 10.0.2"),
                "{args:?}: {e}"
            );
            assert!(
                e.contains("recoverFromOplogAsStandalone=true") && e.contains("--backup-end T"),
                "{e}"
            );
            assert!(!out.exists(), "{args:?} wrote {}", out.display());
        }
    }
    let bad = d.path().join("bad");
    dbpath(&bad, "inMemory", false);
    let o = pitr_in(
        Path::new(FIXTURE),
        &[
            "plan",
            "--backup",
            bad.to_str().unwrap(),
            "--oplog",
            "oplog.bson",
            "--until",
            "auto",
        ],
    );
    let e = stderr(&o);
    assert_eq!(code(&o), 2, "{e}");
    assert!(
        e.contains("storage engine `inMemory`") && e.contains("no journal/"),
        "{e}"
    );
    assert!(
        !e.contains("recoverFromOplogAsStandalone"),
        "no procedure for files that cannot be recovered: {e}"
    );
}
