//! `pitr status --archive` checks what a reader relies on, and readers of an oplog
//! archive need only the chunks of their range (issue 17 items 12 and 15).
//!
//! Pinned bugs: `status --archive` said "gaps none" and exited 0 with a chunk
//! deleted or corrupted, and exited 0 with a recorded gap; `plan --until T` needing
//! only the first chunks failed because a later chunk was missing; on a missing
//! directory, a backup directory or a mongodump archive file it said the manifest
//! was damaged.
//!
//! The archive is written by the real `pitr archive --once` from a stand-in member
//! serving the committed fixture's oplog (9 chunks of 48 KiB of oplog).

mod common;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{code, pitr, stderr, stdout};
use serde_json::Value;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident");

/// A stand-in replica set member serving the fixture's oplog; killed on drop.
struct Member {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn member() -> Member {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("db")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(common::standin_bin_dir().join("mongod"));
    cmd.args(["--port", &port.to_string(), "--bind_ip", "127.0.0.1"])
        .args(["--replSet", "rs0", "--dbpath"])
        .arg(dir.path().join("db"))
        .arg("--logpath")
        .arg(dir.path().join("mongod.log"))
        .env("PITR_STANDIN_OPLOG", format!("{FIXTURE}/oplog.bson"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for k in [
        "PITR_STANDIN_MODE",
        "PITR_STANDIN_FAULT",
        "PITR_STANDIN_MONGOD_FAULT",
        "PITR_STANDIN_OPLOG_WRITER",
        "PITR_STANDIN_OPLOG_MAX_ENTRIES",
        "PITR_STANDIN_MEMBERS",
    ] {
        cmd.env_remove(k);
    }
    let m = Member {
        child: cmd.spawn().expect("start the stand-in mongod"),
        port,
        _dir: dir,
    };
    let end = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < end, "the stand-in mongod did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    m
}

/// The fixture's oplog archived into `TMP/arch` (9 chunks).
fn archive() -> (tempfile::TempDir, PathBuf) {
    let m = member();
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");
    let o = pitr(&[
        "archive",
        "--uri",
        &format!("mongodb://127.0.0.1:{}/", m.port),
        "--dir",
        arch.to_str().unwrap(),
        "--once",
        "--chunk-size",
        "48KiB",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(chunk_files(&arch).len(), 9);
    (tmp, arch)
}

fn manifest(arch: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(arch.join("manifest.json")).unwrap()).unwrap()
}

/// The chunk files, in sequence order.
fn chunk_files(arch: &Path) -> Vec<PathBuf> {
    manifest(arch)["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| arch.join(c["file"].as_str().unwrap()))
        .collect()
}

/// A copy of the archive, to damage.
fn copy(arch: &Path, name: &str) -> PathBuf {
    let to = arch.parent().unwrap().join(name);
    std::fs::create_dir_all(to.join("chunks")).unwrap();
    std::fs::copy(arch.join("manifest.json"), to.join("manifest.json")).unwrap();
    for f in std::fs::read_dir(arch.join("chunks")).unwrap().flatten() {
        std::fs::copy(f.path(), to.join("chunks").join(f.file_name())).unwrap();
    }
    to
}

fn status(arch: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["status", "--archive", arch.to_str().unwrap()];
    args.extend_from_slice(extra);
    pitr(&args)
}

#[test]
fn status_checks_every_chunk_and_names_damage_and_gaps() {
    let (_tmp, arch) = archive();
    let o = status(&arch, &[]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("chunks    all 9 present, with the size and CRC-64"),
        "{out}"
    );
    assert!(out.contains("gaps      none"), "{out}");

    // Chunk 4 deleted, chunk 6 with one flipped byte, chunk 7 cut short.
    let bad = copy(&arch, "bad");
    let files = chunk_files(&bad);
    std::fs::remove_file(&files[3]).unwrap();
    let mut b = std::fs::read(&files[5]).unwrap();
    b[100] ^= 0x01;
    std::fs::write(&files[5], &b).unwrap();
    let b = std::fs::read(&files[6]).unwrap();
    std::fs::write(&files[6], &b[..b.len() - 10]).unwrap();
    let o = status(&bad, &[]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("chunks    3 of 9 DAMAGED"), "{out}");
    assert!(
        out.contains("DAMAGED   chunk 4 `chunks/00000004-")
            && out.contains(": the file is missing"),
        "{out}"
    );
    assert!(
        out.contains("DAMAGED   chunk 6 `chunks/00000006-") && out.contains("its CRC-64 is "),
        "{out}"
    );
    assert!(out.contains("DAMAGED   chunk 7 `chunks/00000007-"), "{out}");
    let err = stderr(&o);
    assert!(
        err.starts_with("error: the oplog archive `")
            && err.contains("chunk 4 (missing), chunk 6 (CRC-64 mismatch), chunk 7 (wrong size)"),
        "{err}"
    );
    assert!(err.contains("\nhint: restore those chunk files"), "{err}");
    // --quick: presence and size only (the flipped byte goes unseen).
    let o = status(&bad, &["--quick"]);
    assert_eq!(code(&o), 1);
    assert!(
        stdout(&o).contains("chunks    2 of 9 DAMAGED"),
        "{}",
        stdout(&o)
    );
    // JSON names them too.
    let o = status(&bad, &["--json"]);
    assert_eq!(code(&o), 1);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let seqs: Vec<u64> = v["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![4, 6, 7]);
    assert_eq!(v["damaged"][1]["problem"], "crc");

    // A recorded gap between chunks 4 and 5: exit 1, named.
    let gap = copy(&arch, "gap");
    let mut m = manifest(&gap);
    let (after, before) = (
        m["chunks"][3]["last"].clone(),
        m["chunks"][4]["first"].clone(),
    );
    m["gaps"] = serde_json::json!([{
        "after": after, "before": before,
        "detected": "2026-11-21T02:00:00Z", "cause": "the oplog rolled over while the archiver was stopped",
    }]);
    std::fs::write(
        gap.join("manifest.json"),
        serde_json::to_vec_pretty(&m).unwrap(),
    )
    .unwrap();
    let o = status(&gap, &[]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&format!("GAP       after {}", after.as_str().unwrap())));
    assert!(
        stderr(&o).contains("records 1 gap (after ") && stderr(&o).contains("refused"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn plan_and_find_drop_read_only_the_chunks_they_need() {
    let (tmp, arch) = archive();
    let backup = format!("{FIXTURE}/backup");
    let plan = |oplog: &Path, out: &str| {
        pitr(&[
            "plan",
            "--backup",
            &backup,
            "--oplog",
            oplog.to_str().unwrap(),
            "--until",
            "1795223165:1",
            "--out",
            tmp.path().join(out).to_str().unwrap(),
            "--json",
        ])
    };
    let whole = plan(&arch, "whole");
    assert_eq!(code(&whole), 0, "{}", stderr(&whole));
    let want: Value = serde_json::from_slice(&whole.stdout).unwrap();

    // The last chunk starts 22 minutes after the limit: not needed.
    let late = copy(&arch, "late");
    std::fs::remove_file(&chunk_files(&late)[8]).unwrap();
    let o = plan(&late, "late-plan");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let got: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(got["until"]["limit"], want["until"]["limit"]);
    assert_eq!(got["expected"], want["expected"]);
    assert_eq!(got["slice"]["entries"], want["slice"]["entries"]);
    let o = pitr(&["find-drop", late.to_str().unwrap(), "--until", "1795223200"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    // Chunk 2 holds entries the plan replays: a clear error naming it.
    let early = copy(&arch, "early");
    std::fs::remove_file(&chunk_files(&early)[1]).unwrap();
    let o = plan(&early, "early-plan");
    assert_eq!(code(&o), 2, "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with("error: chunk 2 of the oplog archive `")
            && err.contains("is missing: `chunks/00000002-")
            && err.contains("this command needs it"),
        "{err}"
    );
    assert!(err.contains("\nhint: "), "{err}");
}

/// Was: "`X/manifest.json` is not a valid oplog archive manifest: there is none"
/// with a hint about a damaged manifest, whatever X was.
#[test]
fn status_on_something_else_says_what_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let said = |path: &str| {
        let o = pitr(&["status", "--archive", path]);
        assert_eq!(code(&o), 2, "{path}");
        let err = stderr(&o);
        assert!(!err.contains("damaged"), "{path}: {err}");
        err
    };
    let missing = tmp.path().join("nope");
    assert!(said(missing.to_str().unwrap()).contains("does not exist (no such directory)"));
    let err = said(&format!("{FIXTURE}/backup"));
    assert!(
        err.contains("is a mongodump backup directory, not an oplog archive")
            && err.contains("use it as `--backup "),
        "{err}"
    );
    let err = said(&format!("{FIXTURE}/oplog.bson"));
    assert!(
        err.contains("is an oplog file, not an oplog archive directory"),
        "{err}"
    );
    if let Some(peer) = common::peer_dir("status_on_something_else_says_what_it_is") {
        let t = peer.join("mongorestore/testdata");
        let err = said(t.join("dump-w-oplog.archive").to_str().unwrap());
        assert!(err.contains("is a mongodump archive file"), "{err}");
        let err = said(t.join("dump_local_oplog").to_str().unwrap());
        assert!(
            err.contains("is a dump of the oplog (`local/oplog.rs.bson`)")
                && err.contains("`--oplog "),
            "{err}"
        );
    }
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("manifest.json"), "{\"format\": \"x\"}").unwrap();
    assert!(said(other.to_str().unwrap()).contains("is not a pitr oplog archive manifest"));
}

/// The archive's filesystem against its growth: an archive of 28 minutes is not
/// forecast yet; one whose chunks say it grows by 8 TiB in two hours (the first
/// chunk's start moved two hours back, the last chunk a sparse file of 8 TiB, as
/// the manifest records it) fills any disk here within minutes: a warning naming
/// `--min-disk-time`, exit 1, and the figures in `--json`.
#[test]
fn status_forecasts_how_long_the_disk_lasts() {
    let (_tmp, arch) = archive();
    let o = status(&arch, &["--quick"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "free on its filesystem (under an hour of history: its growth is not forecast yet)"
        ),
        "{}",
        stdout(&o)
    );

    let big = copy(&arch, "big");
    let mut m = manifest(&big);
    let chunks = m["chunks"].as_array_mut().unwrap();
    let first = chunks[0]["first"].as_str().unwrap().to_string();
    let (t, i) = first.split_once(':').unwrap();
    chunks[0]["first"] = format!("{}:{i}", t.parse::<u64>().unwrap() - 7200).into();
    let last = chunks.last_mut().unwrap();
    last["bytes"] = (8u64 << 40).into();
    let file = big.join(last["file"].as_str().unwrap());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(8 << 40)
        .unwrap();
    std::fs::write(
        big.join("manifest.json"),
        serde_json::to_vec_pretty(&m).unwrap(),
    )
    .unwrap();

    let o = status(&big, &["--quick"]);
    assert_eq!(code(&o), 1, "{}\n{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("of the archive's growth (")
            && out.contains(" a day over the last 2 h 28 min)"),
        "{out}"
    );
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "warning: the filesystem of the oplog archive `{}` has",
            big.display()
        )) && err.contains("less than --min-disk-time 2days")
            && err.contains("pitr archive prune --keep"),
        "{err}"
    );
    let o = status(&big, &["--quick", "--json"]);
    assert_eq!(code(&o), 1);
    let j: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(j["disk"]["free_bytes"].as_u64().unwrap() > 0, "{j}");
    assert!(
        j["disk"]["growth_per_day"].as_u64().unwrap() > 8u64 << 40,
        "{j}"
    );
    assert!(
        j["disk"]["lasts_seconds"].as_u64().unwrap() < 2 * 86_400,
        "{j}"
    );
    assert!(
        j["disk_warning"]
            .as_str()
            .unwrap()
            .contains("--min-disk-time"),
        "{j}"
    );
    // A threshold it meets: no warning.
    let o = status(&big, &["--quick", "--min-disk-time", "1s"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}
