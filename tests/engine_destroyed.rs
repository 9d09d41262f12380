//! The documents the incident destroys (`<out>-destroyed`, issue 17, item 8), within
//! `--memory`. Regression: after the main dump, the engine copied every destroyed
//! document into a second replica with no memory budget before writing it: stopping
//! just before the drop of a large collection peaked at the budget plus the whole
//! collection (862 MB RSS with the default 384 MiB budget, 472 MB with `--memory
//! 64MiB` on a 428 MB oplog; `scripts/mem-destroyed.sh` measures it on that size).
//! Now a dropped collection's documents are written straight from the state's
//! store, and a burst's go through a replica that spills past a slice of the budget.
//!
//! Checked on the real `pitr` binary: peak RSS (the child's own `ru_maxrss`, from
//! `wait4`) within `--memory` + 100 MB with a 124 MB dropped collection; the
//! destroyed dump byte for byte the dropped collection as the state holds it, with
//! the same metadata, whatever the budget; restored by the REAL mongorestore into
//! the stand-in mongod, a dropped collection has the `dbHash` the engine predicted
//! for it, and a delete burst's documents are those deleted, in `_id` order.

mod common;
mod drop_scenario;
mod replay_common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use drop_scenario::drop_scenario;
use replay_common::{pitr_cmd, FIXTURE};

struct Measured {
    code: i32,
    stdout: String,
    stderr: String,
    /// Peak resident set of the pitr process, in bytes.
    peak_rss: u64,
}

/// `VmHWM` of `pid` (its peak RSS since its `exec`), in bytes; None once it ended.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Runs `cmd`, following its peak RSS (`VmHWM` in `/proc`, every few milliseconds
/// until it exits). Not `wait4`'s `ru_maxrss`: a child started by `posix_spawn`
/// shares the test process's memory until its `exec`, and `ru_maxrss` keeps that
/// (the test process's own, hundreds of MB) as the child's peak.
fn measured(mut cmd: Command) -> Measured {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let mut peak = 0;
    let status = loop {
        if let Some(hwm) = vm_hwm(child.id()) {
            peak = peak.max(hwm);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    Measured {
        code: status.code().expect("pitr exited, not killed"),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_rss: peak,
    }
}

fn replay(
    cwd: &Path,
    backup: &Path,
    oplog: &Path,
    until: &str,
    memory: &str,
    extra: &[&str],
) -> Command {
    let mut args = vec![
        "replay",
        "--backup",
        backup.to_str().unwrap(),
        "--oplog",
        oplog.to_str().unwrap(),
        "--until",
        until,
        // The scenario's drop comes after the generator's planted incidents: replayed on purpose.
        "--accept-incidents",
        "--workdir",
        "work",
        "--out",
        "out",
        "--memory",
        memory,
        "--json",
    ];
    args.extend_from_slice(extra);
    pitr_cmd(cwd, &args, &[])
}

#[test]
fn a_large_dropped_collection_is_written_within_the_memory_budget_and_unchanged() {
    // 120,000 documents of about 1 KB: 124 MB, far more than the budget + 100 MB
    // leaves for a second copy.
    let sc = drop_scenario(1 << 20, 120_000, 1000);
    let tmp = tempfile::tempdir().unwrap();
    let m = measured(replay(
        tmp.path(),
        &sc.backup(),
        &sc.oplog(),
        &sc.until,
        "64KiB",
        &[],
    ));
    let show = format!(
        "exit {}\n--- stdout\n{}\n--- stderr\n{}",
        m.code, m.stdout, m.stderr
    );
    assert_eq!(m.code, 0, "{show}");
    common::say(&format!(
        "--memory 64KiB, a 124 MB collection dropped at the limit: peak RSS {} MB",
        m.peak_rss / 1_000_000
    ));
    let limit = (64 << 10) + 100_000_000;
    assert!(
        m.peak_rss < limit,
        "peak RSS {} bytes, more than --memory + 100 MB ({limit})",
        m.peak_rss
    );
    let report: serde_json::Value = serde_json::from_str(&m.stdout).unwrap();
    assert_eq!(
        report["destroyed"]["documents"].as_u64(),
        Some(sc.documents)
    );
    assert_eq!(report["engine_stats"]["spilled_to_disk"], true);
    // Byte for byte the collection as the state holds it just before the drop.
    let out = tmp.path().join("out/bulk");
    let lost = tmp.path().join("out-destroyed/bulk");
    for f in ["filler.bson", "filler.metadata.json"] {
        assert!(
            std::fs::read(out.join(f)).unwrap() == std::fs::read(lost.join(f)).unwrap(),
            "{f} differs between the state and the destroyed documents"
        );
    }
    assert_eq!(
        replay_common::bson_docs(&lost.join("filler.bson")) as u64,
        sc.documents
    );
    // Only the dropped collection.
    let dbs: Vec<String> = std::fs::read_dir(tmp.path().join("out-destroyed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(dbs, ["bulk"]);
}

#[test]
fn the_real_mongorestore_restores_a_dropped_collection_as_the_engine_predicted_it() {
    // The committed incident's drop of shop.orders, with the smallest budget.
    let fixture = Path::new(FIXTURE);
    let tmp = tempfile::tempdir().unwrap();
    let m = measured(replay(
        tmp.path(),
        &fixture.join("backup"),
        &fixture.join("oplog.bson"),
        "auto",
        "64KiB",
        &[],
    ));
    assert_eq!(m.code, 0, "{}\n{}", m.stdout, m.stderr);
    let report: serde_json::Value = serde_json::from_str(&m.stdout).unwrap();
    assert_eq!(report["destroyed"]["documents"], 113);
    let row = report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ns"] == "shop.orders")
        .unwrap()
        .clone();
    let test = "the_real_mongorestore_restores_a_dropped_collection_as_the_engine_predicted_it";
    for b in replay_common::tool_sets(test) {
        let (hash, n) =
            restore_and_hash(&b.dir, &tmp.path().join("out-destroyed"), "shop", "orders");
        assert_eq!(
            (hash.as_str(), n),
            (row["md5"].as_str().unwrap(), 113),
            "{}",
            b.label
        );
    }
}

#[test]
fn a_delete_bursts_documents_are_the_same_whatever_the_budget() {
    let fixture = Path::new(FIXTURE);
    // The deleteMany on shop.inventory (300 deletes over 4 s): the first incident
    // on that collection.
    let until = "auto";
    let mut dumps = Vec::new();
    let kept = tempfile::tempdir().unwrap();
    let dump_dir = kept.path().join("out-destroyed");
    for memory in ["64KiB", "512MiB"] {
        let tmp = tempfile::tempdir().unwrap();
        let m = measured(replay(
            tmp.path(),
            &fixture.join("backup"),
            &fixture.join("oplog.bson"),
            until,
            memory,
            &["--ns", "shop.inventory"],
        ));
        assert_eq!(m.code, 0, "{memory}: {}\n{}", m.stdout, m.stderr);
        let report: serde_json::Value = serde_json::from_str(&m.stdout).unwrap();
        let d = &report["destroyed"];
        assert_eq!(d["kind"], "deleteBurst", "{memory}: {d}");
        let n = d["documents"].as_u64().unwrap();
        assert!(n > 0, "{memory}: {d}");
        let lost = std::fs::read(tmp.path().join("out-destroyed/shop/inventory.bson")).unwrap();
        assert_eq!(
            replay_common::bson_docs(&tmp.path().join("out-destroyed/shop/inventory.bson")) as u64,
            n
        );
        // Each one as the state holds it at the limit.
        let state = std::fs::read(tmp.path().join("out/shop/inventory.bson")).unwrap();
        let held: std::collections::HashSet<&[u8]> = docs(&state).collect();
        assert!(docs(&lost).all(|d| held.contains(d)), "{memory}");
        if !dump_dir.exists() {
            std::fs::rename(tmp.path().join("out-destroyed"), &dump_dir).unwrap();
        }
        dumps.push(lost);
    }
    assert!(
        dumps[0] == dumps[1],
        "the budget changed the destroyed documents"
    );
    // Restored by the real mongorestore: the same documents, in the same `_id` order
    // (dbHash is the MD5 of the documents in `_id` order).
    let want = {
        use md5::{Digest, Md5};
        Md5::digest(&dumps[0])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let test = "a_delete_bursts_documents_are_the_same_whatever_the_budget";
    for b in replay_common::tool_sets(test) {
        let (hash, n) = restore_and_hash(&b.dir, &dump_dir, "shop", "inventory");
        assert_eq!(
            (hash.as_str(), n),
            (want.as_str(), docs(&dumps[0]).count() as u64),
            "{}",
            b.label
        );
    }
}

fn docs(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + 4 > bytes.len() {
            return None;
        }
        let len = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let d = &bytes[at..at + len];
        at += len;
        Some(d)
    })
}

/// Restores `dump` with the real mongorestore of `bins` into a fresh stand-in
/// mongod, and returns `dbHash` and the count of `db.coll` there.
fn restore_and_hash(bins: &Path, dump: &Path, db: &str, coll: &str) -> (String, u64) {
    let mongod = common::spare::Mongod::start(&bins.join("mongod"));
    mongod.restore(&bins.join("mongorestore"), &[dump.to_str().unwrap()]);
    mongod.hash_and_count(db, coll)
}

/// Both or neither: when the destroyed documents cannot be put in place after the
/// state was (here a file put at `out-destroyed` in between, which pitr never
/// overwrites), the state is taken back out, the file left as it was, and the run
/// fails naming `out-destroyed`.
#[test]
fn a_failed_second_commit_takes_the_state_back_out() {
    let fixture = Path::new(FIXTURE);
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = replay(
        tmp.path(),
        &fixture.join("backup"),
        &fixture.join("oplog.bson"),
        "auto",
        "64MiB",
        &[],
    );
    cmd.env("PITR_TEST_PAUSE_BETWEEN_COMMITS", "3s")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let (out, destroyed) = (tmp.path().join("out"), tmp.path().join("out-destroyed"));
    let t0 = std::time::Instant::now();
    while !out.exists() {
        assert!(t0.elapsed().as_secs() < 60, "the state never appeared");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::create_dir(&destroyed).unwrap();
    std::fs::write(destroyed.join("mine.txt"), "not pitr's").unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("out-destroyed") && err.contains("already exists"),
        "{err}"
    );
    assert!(
        !out.exists(),
        "the state was left in place without its destroyed documents"
    );
    assert_eq!(
        std::fs::read_dir(&destroyed).unwrap().count(),
        1,
        "out-destroyed was written into"
    );
    assert_eq!(
        std::fs::read_to_string(destroyed.join("mine.txt")).unwrap(),
        "not pitr's"
    );
}
