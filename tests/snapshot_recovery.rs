//! Snapshot backups (issue 23), the copy and the recovery start
//! (`src/replay/snapshot.rs`), against the stand-in mongod's data files: a copy of a
//! running member's dbpath (its data at the last checkpoint, its oplog past it) is
//! copied or unpacked into a work dir, recovered with `recoverFromOplogAsStandalone`,
//! and ends where the member's oplog ended, with every write in the data, while the
//! snapshot itself is never written. Files of a member in initial sync are refused.
//! And `pitr replay --engine mongod` with such a snapshot as `--backup`, with the
//! real mongorestore and mongodump: the slice from the recovered end replayed into a
//! spare on the recovered copy, verified, handed over.
//! Every server here is the stand-in, not MongoDB.

mod common;
mod replay_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bson::{doc, Document};
use pitr::backup::snapshot;
use pitr::exec::Cancel;
use pitr::oplog::Ts;
use pitr::replay::snapshot::{copy, recover, RecoverOptions};
use pitr::stream::ByteCounter;

/// `PITR_E2E_BIN` (real MongoDB programs, `scripts/e2e-real.sh`), else none.
fn real_dir() -> Option<PathBuf> {
    std::env::var_os(replay_common::REAL_BIN_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The real mongod with `PITR_E2E_BIN`, else the stand-in.
fn mongod() -> PathBuf {
    match real_dir() {
        Some(d) => d.join("mongod"),
        None => common::standin_bin_dir().join("mongod"),
    }
}

/// Tests that play other releases or other member states through the stand-in's
/// knobs say so and stop when real programs are asked for.
fn standin_only(test: &str) -> bool {
    if real_dir().is_some() {
        eprintln!("{test}: SKIPPED with real programs: it plays versions or states through the stand-in's PITR_STANDIN_* knobs");
        return false;
    }
    true
}

/// A stand-in on `dbpath`, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// A replica-set member keeping data files: the stand-in in its replica-set
    /// mode, or a real mongod started with `--replSet` and initiated alone.
    async fn member(dbpath: &Path, env: &[(&str, &str)]) -> Server {
        let mut env = env.to_vec();
        env.extend([
            ("PITR_STANDIN_MODE", "replset"),
            ("PITR_STANDIN_PERSIST", "1"),
        ]);
        let s = Server::start(dbpath, &env);
        if real_dir().is_some() {
            let c = s.client().await;
            let host = format!("127.0.0.1:{}", s.port);
            run(
                &c,
                "admin",
                doc! {"replSetInitiate": {"_id": "snaprs", "members": [{"_id": 0, "host": host}]}},
            )
            .await;
            let end = Instant::now() + Duration::from_secs(60);
            while !run(&c, "admin", doc! {"hello": 1})
                .await
                .get_bool("isWritablePrimary")
                .unwrap_or(false)
            {
                assert!(
                    Instant::now() < end,
                    "the real member did not become primary"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        s
    }

    /// A copy of the running member's files: a plain copy of the stand-in's (its
    /// files are consistent at any moment); a real mongod's between `fsync` lock and
    /// unlock, the documented way to copy WiredTiger files of a running server.
    async fn snapshot_to(&self, live: &Path, snap: &Path) {
        if real_dir().is_none() {
            common::copy_dir(live, snap);
            return;
        }
        let c = self.client().await;
        run(&c, "admin", doc! {"fsync": 1, "lock": true}).await;
        common::copy_dir(live, snap);
        run(&c, "admin", doc! {"fsyncUnlock": 1}).await;
    }

    fn start(dbpath: &Path, env: &[(&str, &str)]) -> Server {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut c = Command::new(mongod());
            c.args([
                "--port",
                &port.to_string(),
                "--bind_ip",
                "127.0.0.1",
                "--dbpath",
            ])
            .arg(dbpath)
            .arg("--logpath")
            .arg(dbpath.with_extension("log"))
            .args(
                (real_dir().is_some() && env.contains(&("PITR_STANDIN_MODE", "replset")))
                    .then_some(["--replSet", "snaprs"])
                    .into_iter()
                    .flatten(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            for (k, _) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("PITR_STANDIN") {
                    c.env_remove(k);
                }
            }
            c.envs(env.iter().copied());
            let mut s = Server {
                child: c.spawn().unwrap(),
                port,
            };
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return s;
                }
                if s.child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile: try another
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("the stand-in did not start on {}", dbpath.display());
    }

    async fn client(&self) -> mongodb::Client {
        pitr::verify::connect(
            &format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port),
            Duration::from_secs(5),
        )
        .await
        .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn run(c: &mongodb::Client, db: &str, cmd: Document) -> Document {
    c.database(db).run_command(cmd).await.unwrap()
}

async fn newest(c: &mongodb::Client) -> Ts {
    let r = run(
        c,
        "local",
        doc! {"find": "oplog.rs", "sort": {"$natural": -1}, "limit": 1},
    )
    .await;
    let t = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .get_timestamp("ts")
        .unwrap();
    Ts::new(t.time, t.increment)
}

async fn ids(c: &mongodb::Client) -> Vec<i32> {
    let r = run(c, "app", doc! {"find": "c", "sort": {"_id": 1}}).await;
    r.get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("_id").unwrap())
        .collect()
}

fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files_except(dir, Path::new(""))
}

/// The writes the files hold only in their oplog: `app.c` gets 4 and 5, loses 2.
async fn writes_after_the_checkpoint(c: &mongodb::Client) {
    run(
        c,
        "app",
        doc! {"insert": "c", "documents": [{"_id": 4}, {"_id": 5}]},
    )
    .await;
    run(
        c,
        "app",
        doc! {"delete": "c", "deletes": [{"q": {"_id": 2}, "limit": 1}]},
    )
    .await;
}

/// A member with writes before and after its checkpoint, snapshotted while it runs.
/// Returns (snapshot dir, the checkpoint's ts, the top of its oplog).
async fn member_snapshot(root: &Path, initial_sync: bool) -> (PathBuf, Ts, Ts) {
    member_snapshot_of("7.0.14", root, initial_sync).await
}

/// [`member_snapshot`] of a member of release `version`.
async fn member_snapshot_of(version: &str, root: &Path, initial_sync: bool) -> (PathBuf, Ts, Ts) {
    let live = root.join("live");
    std::fs::create_dir_all(&live).unwrap();
    let m = Server::member(&live, &[("PITR_STANDIN_VERSION", version)]).await;
    let c = m.client().await;
    run(
        &c,
        "app",
        doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}, {"_id": 3}]},
    )
    .await;
    if initial_sync {
        run(
            &c,
            "local",
            doc! {"insert": "replset.minvalid", "documents": [{"_id": 0, "initialSyncFlag": true}]},
        )
        .await;
    }
    run(&c, "admin", doc! {"fsync": 1}).await;
    let checkpoint = newest(&c).await;
    writes_after_the_checkpoint(&c).await;
    let top = newest(&c).await;
    let snap = root.join("snap");
    m.snapshot_to(&live, &snap).await;
    drop(m);
    (snap, checkpoint, top)
}

/// The copy into `work/copy`, nothing watching it.
fn copy_to(
    s: &snapshot::Snapshot,
    work: &Path,
) -> Result<pitr::replay::snapshot::Copied, pitr::error::Failure> {
    copy(
        s,
        &work.join("copy"),
        &Cancel::new(),
        &ByteCounter::default(),
    )
}

fn options<'a>(mongod: &'a Path, parent: &'a Path) -> RecoverOptions<'a> {
    RecoverOptions {
        mongod,
        parent_dir: parent,
        start_timeout: Duration::from_secs(20),
        grace: Duration::from_secs(10),
    }
}

#[tokio::test]
async fn a_snapshot_copied_and_recovered_ends_at_the_top_of_its_oplog_with_every_write() {
    let d = tempfile::tempdir().unwrap();
    let (snap, checkpoint, top) = member_snapshot(d.path(), false).await;
    let before = files(&snap);
    let tgz = d.path().join("snap.tar.gz");
    let st = Command::new("tar")
        .args([
            "-czf",
            tgz.to_str().unwrap(),
            "-C",
            d.path().to_str().unwrap(),
            "snap",
        ])
        .status()
        .expect("the system tar");
    assert!(st.success());
    let bin = mongod();
    for (name, given) in [("dir", snap.clone()), ("tgz", tgz.clone())] {
        let s = if given.is_dir() {
            snapshot::in_dir(&given).unwrap()
        } else {
            snapshot::in_tar(&given).unwrap()
        }
        .unwrap_or_else(|| panic!("{name}: not recognised"));
        let work = d.path().join(format!("work-{name}"));
        let copied = copy_to(&s, &work).unwrap();
        assert!(copied.files >= 6, "{name}: {copied:?}");
        assert!(
            !copied.dbpath.join("mongod.lock").exists(),
            "{name}: the lock file was copied"
        );
        std::fs::create_dir_all(&work).unwrap();
        let r = recover(&copied.dbpath, &options(&bin, &work), &Cancel::new())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(r.end, top, "{name}");
        if real_dir().is_none() {
            // The stand-in's checkpoint is exactly its fsync; a real member's
            // stable timestamp is its own (fsync-locked: at the top).
            assert_eq!(r.stable, Some(checkpoint), "{name}");
        }
        // A plain start on the copy now has every write, the ones after the checkpoint too.
        let plain = Server::start(&copied.dbpath, &[]);
        assert_eq!(ids(&plain.client().await).await, [1, 3, 4, 5], "{name}");
        assert_eq!(newest(&plain.client().await).await, top, "{name}");
    }
    assert_eq!(files(&snap), before, "the snapshot itself was written");
}

#[tokio::test]
async fn files_of_a_member_in_initial_sync_are_refused() {
    if !standin_only("files_of_a_member_in_initial_sync_are_refused") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (snap, _, _) = member_snapshot(d.path(), true).await;
    let s = snapshot::in_dir(&snap).unwrap().unwrap();
    let work = d.path().join("work");
    let copied = copy_to(&s, &work).unwrap();
    let bin = mongod();
    let e = recover(&copied.dbpath, &options(&bin, &work), &Cancel::new())
        .await
        .unwrap_err();
    let text = format!("{e:?}");
    assert!(text.contains("initial sync"), "{text}");
    // And a copy into a directory that exists is refused before anything is written.
    let e = copy_to(&s, &work).unwrap_err();
    assert!(format!("{e:?}").contains("already exists"), "{e:?}");
}

/// `pitr replay --engine mongod --backup SNAPSHOT`: the copy, the recovery start, the
/// dump of the recovered copy, then the slice from its end replayed into a spare on
/// the copy (no restore step), verified by counts and dbHash, and handed over; the
/// writes between the checkpoint and the snapshot are there, the drop is not. The
/// dry run shows the steps and copies nothing. The snapshot is never written, the
/// copy is removed at the end.
#[tokio::test]
async fn replay_with_a_snapshot_backup_restores_to_just_before_the_drop() {
    let d = tempfile::tempdir().unwrap();
    let live = d.path().join("live");
    std::fs::create_dir_all(&live).unwrap();
    let m = Server::member(&live, &[]).await;
    let c = m.client().await;
    let orders: Vec<Document> = (1..=50).map(|i| doc! {"_id": i, "qty": i}).collect();
    run(&c, "shop", doc! {"insert": "orders", "documents": orders}).await;
    run(
        &c,
        "app",
        doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}, {"_id": 3}]},
    )
    .await;
    run(&c, "admin", doc! {"fsync": 1}).await;
    // After the checkpoint, before the snapshot: only the oplog of the files has these.
    writes_after_the_checkpoint(&c).await;
    run(
        &c,
        "shop",
        doc! {"update": "orders", "updates": [{"q": {"_id": 7}, "u": {"$set": {"qty": 700}}}]},
    )
    .await;
    let snap = d.path().join("snap");
    m.snapshot_to(&live, &snap).await;
    // After the snapshot: a write, the incident, a write after it.
    run(&c, "app", doc! {"insert": "c", "documents": [{"_id": 6}]}).await;
    run(&c, "shop", doc! {"drop": "orders"}).await;
    run(&c, "app", doc! {"insert": "c", "documents": [{"_id": 7}]}).await;
    let uri = format!("mongodb://127.0.0.1:{}/?directConnection=true", m.port);
    let o = replay_common::run_pitr(
        d.path(),
        &["dump-oplog", "--uri", &uri, "--out", "oplogdump"],
        &[],
    );
    assert_eq!(replay_common::code(&o), 0, "{}", replay_common::show(&o));
    drop(m);
    let before = files(&snap);

    for (k, bins) in
        replay_common::tool_sets("replay_with_a_snapshot_backup_restores_to_just_before_the_drop")
            .into_iter()
            .enumerate()
    {
        let bin = bins.dir.display().to_string();
        let args = |extra: &[&'static str]| {
            let mut v = vec![
                "replay",
                "--engine",
                "mongod",
                "--backup",
                "snap",
                "--oplog",
                "oplogdump",
                "--until",
                "auto",
            ];
            v.extend_from_slice(extra);
            v
        };
        let work = format!("work{k}");
        let out = format!("out{k}");
        let mut dry = args(&["--dry-run", "--workdir"]);
        dry.push(&work);
        dry.extend(["--mongodb-bin", &bin]);
        let o = replay_common::run_pitr(d.path(), &dry, &[]);
        let text = replay_common::stdout(&o);
        assert_eq!(
            replay_common::code(&o),
            0,
            "{}: {}",
            bins.label,
            replay_common::show(&o)
        );
        assert!(
            text.contains("recoverFromOplogAsStandalone=true")
                && text.contains("S1")
                && text.contains("S3"),
            "{text}"
        );
        assert!(
            !d.path().join(&work).join("snapshot-db").exists(),
            "the dry run copied"
        );

        let mut real = args(&["--workdir"]);
        real.extend([
            work.as_str(),
            "--out",
            out.as_str(),
            "--json",
            "--mongodb-bin",
            bin.as_str(),
        ]);
        let o = replay_common::run_pitr(d.path(), &real, &[]);
        assert_eq!(
            replay_common::code(&o),
            0,
            "{}: {}",
            bins.label,
            replay_common::show(&o)
        );
        let report = replay_common::read_json(&d.path().join(&work).join("report.json"));
        assert_eq!(
            replay_common::step(&report, "restore_backup")["status"],
            "skipped",
            "{report}"
        );
        assert!(
            report["prediction"]
                .as_str()
                .unwrap()
                .contains("recovered snapshot backup"),
            "{report}"
        );
        assert_eq!(
            replay_common::step(&report, "replay_oplog")["status"],
            "ok",
            "{report}"
        );
        let rows = replay_common::verify_rows(&report["verify"]);
        let row = |ns: &str| {
            rows.iter()
                .find(|r| r.0 == ns)
                .unwrap_or_else(|| panic!("{ns}: {rows:?}"))
                .clone()
        };
        assert_eq!(row("app.c").2, Some(5), "{}: {rows:?}", bins.label);
        assert_eq!(row("shop.orders").2, Some(50), "{}: {rows:?}", bins.label);
        assert!(
            rows.iter().all(|r| r.3 == "pass"),
            "{}: {rows:?}",
            bins.label
        );
        assert_eq!(
            replay_common::bson_docs(&d.path().join(&out).join("app/c.bson")),
            5
        );
        assert_eq!(
            replay_common::bson_docs(&d.path().join(&out).join("shop/orders.bson")),
            50
        );
        assert!(
            !d.path().join(&work).join("snapshot-db").exists(),
            "the copy was left behind"
        );
    }
    assert_eq!(files(&snap), before, "the snapshot itself was written");
}

/// `replay --engine mongod --backup snap --oplog oplog.bson ... --mongodb-bin BIN`.
fn snapshot_args(bin: &str) -> Vec<&str> {
    vec![
        "replay",
        "--engine",
        "mongod",
        "--backup",
        "snap",
        "--oplog",
        "oplog.bson",
        "--until",
        "1700000000:1",
        "--workdir",
        "work",
        "--mongodb-bin",
        bin,
    ]
}

/// [`snapshot_args`] with the stand-in mongod playing `version` (and the real tools
/// of the first release found).
fn replay_snapshot(dir: &Path, version: &str, extra: &[&str]) -> std::process::Output {
    let bins = replay_common::tool_sets("snapshot_versions").remove(0);
    let bin = bins.dir.display().to_string();
    let mut args = snapshot_args(&bin);
    args.extend_from_slice(extra);
    replay_common::run_pitr(dir, &args, &[("PITR_STANDIN_VERSION", version)])
}

/// The version rules (`src/replay/snapshot_versions.rs`) decide before anything is
/// copied or started: files a 7.0 member last ran on are refused to a 6.0 mongod
/// (older than the files) and to an 8.0 one is fine; a crash-consistent copy of a
/// 5.0 member is refused to a 5.0 mongod (SERVER-84432), the same member's files
/// after a clean shutdown are not.
#[tokio::test]
async fn the_versions_decide_before_anything_is_copied() {
    if !standin_only("the_versions_decide_before_anything_is_copied") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let seventy = d.path().join("seventy");
    let (snap, _, _) = member_snapshot_of("7.0.14", &seventy, false).await;
    std::fs::write(seventy.join("oplog.bson"), b"").unwrap();
    let s = snapshot::in_dir(&snap).unwrap().unwrap();
    assert_eq!(
        (s.written_by.as_deref(), s.unclean),
        (Some("7.0.14"), Some(true))
    );

    let o = replay_snapshot(&seventy, "6.0.14", &[]);
    eprintln!("{}", replay_common::show(&o));
    let err = replay_common::stderr(&o);
    assert_eq!(replay_common::code(&o), 2, "{}", replay_common::show(&o));
    assert!(
        err.contains("mongod 6.0.14 is older than the files")
            && err.contains("a 7.0 mongod last ran on them"),
        "{err}"
    );
    assert!(err.contains("nothing was copied"), "{err}");
    assert!(
        !seventy.join("work/snapshot-db").exists(),
        "copied before refusing"
    );
    let o = replay_snapshot(&seventy, "8.0.4", &["--dry-run"]);
    eprintln!("{}", replay_common::show(&o));
    let out = replay_common::stdout(&o);
    assert_eq!(replay_common::code(&o), 0, "{}", replay_common::show(&o));
    assert!(
        out.contains("mongod 8.0.4; the files were last run by mongod 7.0.14, which was running when they were copied"),
        "{out}"
    );

    // 5.0: killed (crash-consistent) refused, cleanly stopped accepted.
    let fifty = d.path().join("fifty");
    let (snap, _, _) = member_snapshot_of("5.0.24", &fifty, false).await;
    std::fs::write(fifty.join("oplog.bson"), b"").unwrap();
    let o = replay_snapshot(&fifty, "5.0.24", &["--dry-run"]);
    let err = replay_common::stderr(&o);
    assert_eq!(replay_common::code(&o), 2, "{}", replay_common::show(&o));
    assert!(
        err.contains("SERVER-84432") && err.contains("mongod.lock holds a process id"),
        "{err}"
    );
    std::fs::remove_dir_all(&snap).unwrap();
    let live = fifty.join("live");
    let m = Server::start(
        &live,
        &[
            ("PITR_STANDIN_MODE", "replset"),
            ("PITR_STANDIN_VERSION", "5.0.24"),
        ],
    );
    let _ = m
        .client()
        .await
        .database("admin")
        .run_command(doc! {"shutdown": 1})
        .await;
    let mut m = m;
    let end = Instant::now() + Duration::from_secs(20);
    while m.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the stand-in did not shut down");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read(live.join("mongod.lock")).unwrap(),
        b"",
        "a clean shutdown empties the lock file"
    );
    common::copy_dir(&live, &snap);
    let o = replay_snapshot(&fifty, "5.0.24", &["--dry-run"]);
    assert_eq!(replay_common::code(&o), 0, "{}", replay_common::show(&o));
    assert!(
        replay_common::stdout(&o).contains("cleanly shut down"),
        "{}",
        replay_common::show(&o)
    );
}

/// Ctrl-C while the files are copied: the copy stops within a chunk, what was copied
/// is removed, the snapshot is untouched, the exit is 130; and before it, the size
/// was said and the progress shown.
#[tokio::test]
async fn ctrl_c_during_the_copy_stops_it_and_removes_the_copy() {
    let d = tempfile::tempdir().unwrap();
    let (snap, _, _) = member_snapshot(d.path(), false).await;
    std::fs::write(d.path().join("oplog.bson"), b"").unwrap();
    // A big collection file (sparse: no disk used by the snapshot; the copy writes it).
    let big = snap.join("collection-99-big.wt");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let small_before: Vec<_> = files_except(&snap, &big);
    let bins = replay_common::tool_sets("ctrl_c_during_the_copy").remove(0);
    let bin = bins.dir.display().to_string();
    let errlog = d.path().join("stderr.txt");
    let mut child = replay_common::pitr_cmd(
        d.path(),
        &snapshot_args(&bin),
        &[("PITR_PROGRESS_INTERVAL", "50ms")],
    )
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&errlog).unwrap())
    .spawn()
    .unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&errlog).unwrap_or_default();
        if text.contains("copying the snapshot") && text.contains("GiB") {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "pitr ended before the copy: {text}"
        );
        assert!(Instant::now() < end, "no copy progress: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let sent = Instant::now();
    let status = child.wait().unwrap();
    let text = std::fs::read_to_string(&errlog).unwrap();
    eprintln!("{text}");
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?} to stop",
        sent.elapsed()
    );
    assert!(
        text.contains("a full copy") || text.contains("reflinked"),
        "the cost was not said before the copy: {text}"
    );
    assert!(
        !d.path().join("work/snapshot-db").exists(),
        "the partial copy was left: {text}"
    );
    assert_eq!(
        files_except(&snap, &big),
        small_before,
        "the snapshot was written"
    );
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 2 << 30);
}

fn files_except(dir: &Path, skip: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p == skip {
            continue;
        }
        if p.is_dir() {
            out.extend(files_except(&p, skip));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}
