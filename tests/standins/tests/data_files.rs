//! The stand-in's data files (`src/mongod/persist.rs`, issue 23): a copy of a
//! member's dbpath taken while it runs holds the data of its last checkpoint and an
//! oplog past it; started as a plain standalone it shows the checkpoint's data (the
//! trap a snapshot restore must avoid), started with `recoverFromOplogAsStandalone`
//! it replays the oplog from the checkpoint and refuses writes, and
//! `takeUnstableCheckpointOnShutdown` keeps the recovered state for a plain restart.

mod common;

use bson::{doc, Document, Timestamp};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A stand-in started on `dbpath` (not a temp one), waiting until it listens or exits.
struct OnFiles {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl OnFiles {
    fn start(
        dbpath: &Path,
        params: &[&str],
        env: &[(&str, &str)],
    ) -> Result<OnFiles, (i32, String)> {
        let port = free_port();
        let log = dbpath.with_extension(format!("{port}.log"));
        let mut cmd = Command::new(MONGOD);
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind_ip",
            "127.0.0.1",
            "--dbpath",
        ])
        .arg(dbpath)
        .arg("--logpath")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        for p in params {
            cmd.args(["--setParameter", p]);
        }
        for k in [
            "PITR_STANDIN_MODE",
            "PITR_STANDIN_PERSIST",
            "PITR_STANDIN_FAULT",
        ] {
            cmd.env_remove(k);
        }
        cmd.envs(env.iter().copied());
        let mut child = cmd.spawn().expect("spawn mongod");
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if port_open(port) {
                return Ok(OnFiles { child, port, log });
            }
            if let Ok(Some(st)) = child.try_wait() {
                return Err((
                    st.code().unwrap_or(-1),
                    std::fs::read_to_string(&log).unwrap_or_default(),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("mongod did not listen within 10s");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A clean shutdown (SIGTERM), as pitr stops a spare.
    fn stop(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let st = self.child.wait().unwrap();
        assert_eq!(st.code(), Some(0), "{}", self.log());
    }
}

impl Drop for OnFiles {
    /// A failed test leaves no server behind (after `stop` this finds it gone).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Every file's bytes under `dir`, to show a directory was not written.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(contents(&e.path()));
        } else {
            out.push((e.path(), std::fs::read(e.path()).unwrap()));
        }
    }
    out.sort();
    out
}

async fn docs(port: u16) -> Vec<Document> {
    let c = client(port).await;
    let r = c
        .database("app")
        .run_command(doc! {"find": "c", "sort": {"_id": 1}})
        .await
        .unwrap();
    r.get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().clone())
        .collect()
}

async fn newest(port: u16) -> Timestamp {
    let c = client(port).await;
    let r = c
        .database("local")
        .run_command(doc! {"find": "oplog.rs", "sort": {"$natural": -1}, "limit": 1})
        .await
        .unwrap();
    r.get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .get_timestamp("ts")
        .unwrap()
}

fn ids(d: &[Document]) -> Vec<i32> {
    d.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

const RECOVER: &str = "recoverFromOplogAsStandalone=true";
const TAKE_UNSTABLE: &str = "takeUnstableCheckpointOnShutdown=true";

#[tokio::test]
async fn a_copy_of_a_members_files_needs_recovery_from_its_oplog() {
    let d = tempfile::tempdir().unwrap();
    let live = d.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let member = OnFiles::start(
        &live,
        &[],
        &[
            ("PITR_STANDIN_MODE", "replset"),
            ("PITR_STANDIN_PERSIST", "1"),
        ],
    )
    .unwrap();
    let c = client(member.port).await;
    let app = c.database("app");
    app.run_command(doc! {"insert": "c", "documents": [{"_id": 1, "v": 1}, {"_id": 2, "v": 2}, {"_id": 3, "v": 3}]}).await.unwrap();
    c.database("admin")
        .run_command(doc! {"fsync": 1})
        .await
        .unwrap();
    let checkpoint = newest(member.port).await;
    app.run_command(doc! {"insert": "c", "documents": [{"_id": 4, "v": 4}, {"_id": 5, "v": 5}]})
        .await
        .unwrap();
    app.run_command(doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"v": 10}}}]})
        .await
        .unwrap();
    app.run_command(doc! {"delete": "c", "deletes": [{"q": {"_id": 2}, "limit": 1}]})
        .await
        .unwrap();
    let top = newest(member.port).await;
    // The snapshot: taken while the member runs, as a volume snapshot is.
    let snap = d.path().join("snap");
    copy_dir(&live, &snap);
    let mut member = member;
    member.child.kill().unwrap();
    member.child.wait().unwrap();
    let untouched = contents(&snap);
    for m in [
        "WiredTiger",
        "WiredTiger.wt",
        "WiredTiger.turtle",
        "_mdb_catalog.wt",
        "storage.bson",
        "journal",
    ] {
        assert!(snap.join(m).exists(), "{m}");
    }

    // A plain standalone on a copy: the checkpoint's data, an oplog past it.
    let plain = d.path().join("plain");
    copy_dir(&snap, &plain);
    let s = OnFiles::start(&plain, &[], &[]).unwrap();
    assert_eq!(ids(&docs(s.port).await), [1, 2, 3]);
    assert_eq!(newest(s.port).await, top, "the oplog reaches past the data");
    s.stop();

    // Recovery on another copy: the oplog replayed from the checkpoint, writes refused.
    let rec = d.path().join("rec");
    copy_dir(&snap, &rec);
    let s = OnFiles::start(&rec, &[RECOVER, TAKE_UNSTABLE], &[]).unwrap();
    let got = docs(s.port).await;
    assert_eq!(ids(&got), [1, 3, 4, 5]);
    assert_eq!(got[0].get_i32("v").unwrap(), 10);
    let log = s.log();
    let line = log
        .lines()
        .find(|l| l.contains("\"id\":21544"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains(&format!(
            "\"t\":{},\"i\":{}",
            checkpoint.time, checkpoint.increment
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!("\"t\":{},\"i\":{}", top.time, top.increment)),
        "{line}"
    );
    assert!(log.contains("\"id\":21536"), "{log}");
    let c = client(s.port).await;
    let e = c
        .database("app")
        .run_command(doc! {"insert": "c", "documents": [{"_id": 9}]})
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(20), "{e}");
    let ss = c
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .unwrap();
    assert!(ss
        .get_document("storageEngine")
        .unwrap()
        .get_bool("readOnly")
        .unwrap());
    s.stop();

    // Restarted plain, the recovered state stays (the unstable checkpoint at shutdown)
    // and takes writes.
    let s = OnFiles::start(&rec, &[], &[]).unwrap();
    assert_eq!(ids(&docs(s.port).await), [1, 3, 4, 5]);
    client(s.port)
        .await
        .database("app")
        .run_command(doc! {"insert": "c", "documents": [{"_id": 6}]})
        .await
        .unwrap();
    s.stop();
    // Recovery again on an unstable checkpoint: only with takeUnstableCheckpointOnShutdown.
    let s = OnFiles::start(&rec, &[RECOVER, TAKE_UNSTABLE], &[]).unwrap();
    assert!(s.log().contains("\"id\":21538"), "{}", s.log());
    assert_eq!(ids(&docs(s.port).await), [1, 3, 4, 5, 6]);
    s.stop();
    let Err((code, log)) = OnFiles::start(&rec, &[RECOVER], &[]) else {
        panic!(
            "recovery from an unstable checkpoint without takeUnstableCheckpointOnShutdown started"
        )
    };
    assert_eq!(code, 14, "{log}");
    assert!(log.contains("\"id\":31229"), "{log}");

    // Recovery without takeUnstableCheckpointOnShutdown keeps nothing for a plain restart.
    let keep = d.path().join("keep");
    copy_dir(&snap, &keep);
    let s = OnFiles::start(&keep, &[RECOVER], &[]).unwrap();
    assert_eq!(ids(&docs(s.port).await), [1, 3, 4, 5]);
    s.stop();
    let s = OnFiles::start(&keep, &[], &[]).unwrap();
    assert_eq!(ids(&docs(s.port).await), [1, 2, 3]);
    s.stop();

    assert_eq!(
        contents(&snap),
        untouched,
        "the snapshot itself was written"
    );
}
