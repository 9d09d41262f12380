//! `pitr archive` against the stand-in `mongod` (tests/standins): an oplog that keeps
//! being written (`PITR_STANDIN_OPLOG_WRITER`), a capped oplog whose old entries fall
//! off while the archiver is stopped (`PITR_STANDIN_OPLOG_MAX_ENTRIES`), two members
//! and a failover (`PITR_STANDIN_MEMBERS`), a rollback of the newest entries (fault
//! `rollback-after-getmores`), a dropped connection (`drop-connection-after-getmores`),
//! a restarted member; and the archive read back as `--oplog` / find-drop input.
//!
//! The truth is always the server's own oplog, read back with `pitr dump-oplog` (or
//! the committed fixture the stand-in served): the archive must hold exactly its
//! entries, byte for byte, each once.

mod common;
mod oplog_archive_common;
mod replay_common;

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use oplog_archive_common::*;
use pitr::oplog::Ts;
use serde_json::Value;

// ---------------------------------------------------------------------------------
// helpers

const FIXTURE_OPLOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident/oplog.bson");
const FIXTURE_BACKUP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident/backup");

/// A stand-in mongod (a replica set member), SIGKILLed when dropped; can be killed
/// and started again on the same port and dbpath.
struct Mongod {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Drop for Mongod {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Mongod {
    fn start(env: &[(&str, &str)]) -> Mongod {
        Self::start_on(free_port(), env)
    }

    fn start_on(port: u16, env: &[(&str, &str)]) -> Mongod {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("db")).unwrap();
        let mut m = Mongod {
            child: None,
            port,
            dir,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        m.spawn();
        m
    }

    fn spawn(&mut self) {
        let bin = common::standin_bin_dir().join("mongod");
        let mut cmd = Command::new(bin);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind_ip", "127.0.0.1", "--replSet", "rs0", "--dbpath"])
            .arg(self.dir.path().join("db"))
            .arg("--logpath")
            .arg(self.dir.path().join("mongod.log"))
            .arg("--logappend")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for k in [
            "PITR_STANDIN_MODE",
            "PITR_STANDIN_FAULT",
            "PITR_STANDIN_MONGOD_FAULT",
            "PITR_STANDIN_OPLOG",
            "PITR_STANDIN_OPLOG_WRITER",
            "PITR_STANDIN_OPLOG_MAX_ENTRIES",
            "PITR_STANDIN_MEMBERS",
        ] {
            cmd.env_remove(k);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // Held by `self` at once, so that Drop kills it on every path.
        self.child = Some(cmd.spawn().expect("spawn the stand-in mongod"));
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if TcpStream::connect_timeout(
                &([127, 0, 0, 1], self.port).into(),
                Duration::from_millis(100),
            )
            .is_ok()
            {
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "the stand-in mongod exited early ({st}); log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "the stand-in mongod did not listen within 10 s; log:\n{}",
            self.log()
        );
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn uri(&self) -> String {
        format!("mongodb://{}/", self.host())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mongod.log")).unwrap_or_default()
    }
}

fn pitr_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pitr"));
    c.args(args).env_remove("PITR_URI").stdin(Stdio::null());
    c
}

fn pitr(args: &[&str]) -> Output {
    pitr_cmd(args).output().expect("run pitr")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("pitr exited by a signal")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// `pitr archive --uri URI --dir DIR --log-every 1s EXTRA...`, running.
fn archiver(uri: &str, dir: &Path, extra: &[&str]) -> Archiver {
    let mut args = vec![
        "archive",
        "--uri",
        uri,
        "--dir",
        dir.to_str().unwrap(),
        "--log-every",
        "1s",
    ];
    args.extend_from_slice(extra);
    Archiver::spawn(pitr_cmd(&args))
}

/// The server's whole oplog, through `pitr dump-oplog`.
fn server_entries(uri: &str) -> Vec<(Ts, Vec<u8>)> {
    let d = tempfile::tempdir().unwrap();
    let o = pitr(&[
        "dump-oplog",
        "--uri",
        uri,
        "--out",
        d.path().to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    entries_of(&d.path().join("oplog.bson"))
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

fn partials(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("chunks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".partial"))
        .collect()
}

/// A mongodump directory with one empty collection whose own oplog is `last_entry`:
/// a backup ending there.
fn fake_backup(dir: &Path, last_entry: &[u8]) {
    std::fs::create_dir_all(dir.join("bench")).unwrap();
    std::fs::write(dir.join("bench/events.bson"), b"").unwrap();
    std::fs::write(
        dir.join("bench/events.metadata.json"),
        r#"{"options":{},"indexes":[{"v":2,"key":{"_id":1},"name":"_id_"}],"uuid":"07070707070707070707070707070707","collectionName":"events","type":"collection"}"#,
    )
    .unwrap();
    std::fs::write(dir.join("oplog.bson"), last_entry).unwrap();
}

fn partial_bytes(dir: &Path) -> u64 {
    partials(dir)
        .iter()
        .map(|n| {
            std::fs::metadata(dir.join("chunks").join(n))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum()
}

fn writer(rate: u64, epoch: u64, count: u64) -> String {
    format!("rate={rate},epoch={epoch},count={count},pad=100")
}

// ---------------------------------------------------------------------------------
// tests

/// `pitr archive --uri URI --dir ARCH --once` plus `extra`.
fn archive_once(uri: &str, arch: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "archive",
        "--uri",
        uri,
        "--dir",
        arch.to_str().unwrap(),
        "--once",
    ];
    args.extend_from_slice(extra);
    pitr(&args)
}

/// A stand-in member serving the committed fixture's oplog, archived once with
/// `pitr archive --once --chunk-size CHUNK` into `TMP/arch`.
fn archive_fixture_once(chunk: &str) -> (Mongod, tempfile::TempDir, std::path::PathBuf) {
    let m = Mongod::start(&[("PITR_STANDIN_OPLOG", FIXTURE_OPLOG)]);
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");
    let o = archive_once(&m.uri(), &arch, &["--chunk-size", chunk]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    (m, tmp, arch)
}

/// An oplog written at 2000 entries/s; the archiver follows it, loses its connection
/// once (fault), is SIGKILLed in the middle of a chunk, the member it reads is
/// killed and restarted, the archiver restarted: the archive ends up with every
/// entry of the server, byte for byte, none twice, none missing.
#[test]
fn follow_survives_sigkill_mid_chunk_restarts_and_a_dropped_connection() {
    let epoch = now_secs();
    let w = writer(2000, epoch, 14_000);
    let mut m = Mongod::start(&[
        ("PITR_STANDIN_OPLOG_WRITER", &w),
        (
            "PITR_STANDIN_MONGOD_FAULT",
            "drop-connection-after-getmores=4",
        ),
    ]);
    let uri = m.uri();
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");

    // 1. Follow for a while, then SIGKILL in the middle of a chunk (1 MiB chunks,
    //    about 3000 entries; complete gzip members every 256 KiB).
    let mut a = archiver(&uri, &arch, &["--chunk-size", "1MiB"]);
    a.wait_for("retry 1/", Duration::from_secs(15));
    a.wait_for("archive: ", Duration::from_secs(15));
    // Kill once the chunk being written holds a complete gzip member on disk.
    let end = Instant::now() + Duration::from_secs(15);
    while partial_bytes(&arch) == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let err1 = a.sigkill();
    assert!(
        !partials(&arch).is_empty(),
        "killed between chunks, not in the middle of one:\n{err1}"
    );

    // 2. The member being read restarts (same history: the writer is clock-driven).
    m.kill();
    std::thread::sleep(Duration::from_millis(300));
    m.spawn();

    // 3. The archiver restarts and follows to the end of the writer's entries.
    let mut a = archiver(&uri, &arch, &["--chunk-size", "1MiB"]);
    a.wait_for(
        "the complete part of an interrupted chunk",
        Duration::from_secs(15),
    );
    // 14 000 entries at 2000/s: done 7 s after the epoch.
    let end = epoch + 8;
    while now_secs() < end {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let (rc, out, err) = a.stop();
    assert_eq!(rc, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("archived "), "{out}");
    assert!(err.contains("stopped by signal"), "{err}");

    let want = server_entries(&uri);
    assert_eq!(want.len(), 14_000);
    assert_same_entries(&entries_of(&arch), &want, "after SIGKILL and restarts");
    // status: what the archive covers, and that it is level with the server.
    let o = pitr(&["status", "--archive", arch.to_str().unwrap(), "--uri", &uri]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let so = text(&o.stdout);
    assert!(
        so.contains("14000 entries in") && so.contains("gaps      none"),
        "{so}"
    );
    assert!(
        so.contains("the archive is 0 s behind; its oplog still reaches back"),
        "{so}"
    );
    let man = manifest(&arch);
    assert_eq!(man["gaps"].as_array().unwrap().len(), 0, "{man}");
    assert_eq!(man["set_aside"].as_array().unwrap().len(), 0, "{man}");
    assert!(partials(&arch).is_empty());
    // Chunks: in order, each checked against its CRC when read (done above).
    let chunks = man["chunks"].as_array().unwrap();
    assert!(chunks.len() >= 3, "{man}");
}

/// The archiver is stopped while the capped oplog rolls over past its last entry:
/// the next run records the gap with both positions and exits 1 (--once); status,
/// find-drop and plan name it; a plan across it is refused.
#[test]
fn a_rollover_while_stopped_is_a_recorded_gap_and_a_plan_across_it_is_refused() {
    let epoch = now_secs().saturating_sub(1);
    let w = format!("rate=1000,epoch={epoch},pad=50");
    let m = Mongod::start(&[
        ("PITR_STANDIN_OPLOG_WRITER", &w),
        ("PITR_STANDIN_OPLOG_MAX_ENTRIES", "1200"),
    ]);
    let uri = m.uri();
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");
    let o = archive_once(&uri, &arch, &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let first_run = entries_of(&arch);
    let last_before = first_run.last().unwrap().0;

    // 2.5 s at 1000/s with 1200 kept: the oplog no longer reaches back.
    std::thread::sleep(Duration::from_millis(2500));
    let o = archive_once(&uri, &arch, &[]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    let err = text(&o.stderr);
    assert!(err.contains("GAP in the oplog archive"), "{err}");
    assert!(err.contains(&last_before.to_string()), "{err}");
    let man = manifest(&arch);
    let gaps = man["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 1, "{man}");
    assert_eq!(gaps[0]["after"], last_before.to_string());
    let all = entries_of(&arch);
    let after_gap = all
        .iter()
        .find(|(t, _)| *t > last_before)
        .expect("entries after the gap")
        .0;
    assert_eq!(gaps[0]["before"], after_gap.to_string());
    assert!(text(&o.stdout).contains(&format!("GAP recorded: entries after {last_before}")));
    // Everything after the gap is the server's, exactly.
    let server = server_entries(&uri);
    let archived_tail: Vec<_> = all
        .iter()
        .filter(|(t, _)| *t >= server[0].0)
        .cloned()
        .collect();
    let server_head: Vec<_> = server
        .iter()
        .filter(|(t, _)| *t <= all.last().unwrap().0)
        .cloned()
        .collect();
    assert_same_entries(&archived_tail, &server_head, "after the gap");

    // status names it, and fails the check (exit 1: a restore across it is refused).
    let o = pitr(&["status", "--archive", arch.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(
        text(&o.stdout).contains(&format!("GAP       after {last_before}")),
        "{}",
        show(&o)
    );
    // find-drop notes it.
    let o = pitr(&["find-drop", arch.to_str().unwrap()]);
    assert!(text(&o.stdout).contains("has a GAP after"), "{}", show(&o));

    // A plan from a backup ending before the gap to the end is refused, naming it.
    let backup = tmp.path().join("backup");
    fake_backup(&backup, &first_run[first_run.len() / 2].1);
    let o = pitr(&[
        "plan",
        "--backup",
        backup.to_str().unwrap(),
        "--oplog",
        arch.to_str().unwrap(),
        "--until",
        "end",
        "--out",
        tmp.path().join("plan").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("recorded a gap after {last_before}"))
            && err.contains(&format!("before {after_gap}")),
        "{err}"
    );
    // A restore point before the gap is fine.
    let o = pitr(&[
        "plan",
        "--backup",
        backup.to_str().unwrap(),
        "--oplog",
        arch.to_str().unwrap(),
        "--until",
        &last_before.to_string(),
        "--out",
        tmp.path().join("plan2").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", show(&o));
}

/// The capped oplog overtakes a following archiver (CappedPositionLost): the gap is
/// recorded with both positions, a loud warning, and archiving goes on.
#[test]
fn a_rollover_while_following_is_recorded_and_archiving_goes_on() {
    let m = Mongod::start(&[
        ("PITR_STANDIN_OPLOG", FIXTURE_OPLOG),
        ("PITR_STANDIN_MONGOD_FAULT", "rollover-after-getmores=3"),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");
    let mut a = archiver(
        &m.uri(),
        &arch,
        &["--batch-size", "100", "--await-time", "300ms"],
    );
    a.wait_for("warning: GAP in the oplog archive", Duration::from_secs(20));
    a.wait_for("caught up", Duration::from_secs(10));
    let (rc, out, err) = a.stop();
    assert_eq!(rc, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("CappedPositionLost"), "{err}");
    let man = manifest(&arch);
    let gaps = man["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 1, "{man}");
    // The fault deleted everything up to the last entry the cursor returned: the
    // gap runs from there to the oldest entry left, the archive holds both ends.
    let server = server_entries(&m.uri());
    let archived = entries_of(&arch);
    assert_eq!(gaps[0]["before"], server[0].0.to_string());
    let after = pitr_ts(&gaps[0]["after"]);
    assert!(archived.iter().any(|(t, _)| *t == after));
    let tail: Vec<_> = archived
        .iter()
        .filter(|(t, _)| *t >= server[0].0)
        .cloned()
        .collect();
    assert_same_entries(&tail, &server, "after the gap");
    assert!(out.contains("GAP recorded"), "{out}");
}

/// The member read rolls back its newest entries (after a failover): the archiver
/// finds the first archived entry the server no longer has, sets the chunks from
/// there aside, and goes on with the server's history.
#[test]
fn a_rollback_of_the_newest_entries_sets_the_diverged_chunks_aside() {
    let m = Mongod::start(&[
        ("PITR_STANDIN_OPLOG", FIXTURE_OPLOG),
        ("PITR_STANDIN_MONGOD_FAULT", "rollback-after-getmores=2"),
    ]);
    let uri = m.uri();
    let original = entries_of(Path::new(FIXTURE_OPLOG));
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");
    let mut a = archiver(
        &uri,
        &arch,
        &["--chunk-size", "100KiB", "--await-time", "300ms"],
    );
    a.wait_for("ROLLBACK", Duration::from_secs(20));
    a.wait_for("caught up", Duration::from_secs(10));
    let (rc, out, err) = a.stop();
    assert_eq!(rc, 0, "stdout:\n{out}\nstderr:\n{err}");
    // The newest 5 entries were rewritten or removed: the first of them is where the
    // histories part.
    let diverged_at = original[original.len() - 5].0;
    let through = original.last().unwrap().0;
    assert!(
        err.contains(&format!("entries from {diverged_at} to {through}")),
        "{err}"
    );
    let man = manifest(&arch);
    let sa = man["set_aside"].as_array().unwrap();
    assert_eq!(sa.len(), 1, "{man}");
    assert_eq!(sa[0]["diverged_at"], diverged_at.to_string());
    assert_eq!(sa[0]["through"], through.to_string());
    let sa_dir = arch.join(sa[0]["dir"].as_str().unwrap());
    for c in sa[0]["chunks"].as_array().unwrap() {
        let name = Path::new(c["file"].as_str().unwrap()).file_name().unwrap();
        assert!(
            sa_dir.join(name).is_file(),
            "{c} not in {}",
            sa_dir.display()
        );
        assert!(!arch.join(c["file"].as_str().unwrap()).exists());
    }
    // The archive is now exactly the server's history.
    assert_same_entries(
        &entries_of(&arch),
        &server_entries(&uri),
        "after the rollback",
    );
    assert!(
        text(out.as_bytes()).contains("ROLLBACK: entries from"),
        "{out}"
    );
}

/// Two members serving the same history; the primary (the member read) is killed:
/// the archiver follows the new primary through the driver and goes on right after
/// its last entry, without a gap.
#[test]
fn a_failover_to_the_other_member_is_survived_without_a_gap() {
    let (pa, pb) = (free_port(), free_port());
    let members = format!("127.0.0.1:{pa},127.0.0.1:{pb}");
    let epoch = now_secs();
    let w = writer(500, epoch, 3500);
    let env = [
        ("PITR_STANDIN_OPLOG_WRITER", w.as_str()),
        ("PITR_STANDIN_MEMBERS", members.as_str()),
    ];
    let mut a_member = Mongod::start_on(pa, &env);
    let b_member = Mongod::start_on(pb, &env);
    let uri = format!(
        "mongodb://{members}/?replicaSet=rs0&readPreference=primary&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=5000"
    );
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");
    let mut a = archiver(&uri, &arch, &["--chunk-time", "1s"]);
    a.wait_for("chunk chunks/00000001", Duration::from_secs(15));
    a_member.kill();
    a.wait_for("retry 1/", Duration::from_secs(15));
    // 3500 entries at 500/s: done 7 s after the epoch.
    while now_secs() < epoch + 8 {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let (rc, out, err) = a.stop();
    assert_eq!(rc, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        b_member.log().contains("this member is now primary"),
        "{}",
        b_member.log()
    );
    let direct = format!("mongodb://{}/?directConnection=true", b_member.host());
    let want = server_entries(&direct);
    assert_eq!(want.len(), 3500);
    assert_same_entries(&entries_of(&arch), &want, "across the failover");
    let man = manifest(&arch);
    assert!(man["gaps"].as_array().unwrap().is_empty(), "{man}");
    assert!(man["set_aside"].as_array().unwrap().is_empty(), "{man}");
}

/// The archive, read as one oplog, gives exactly what the same entries as one file
/// give: find-drop's findings (also over a --since/--until range, which reads only
/// some chunks), and a plan's limit, counts and slice.
#[test]
fn find_drop_and_plan_on_the_archive_equal_the_same_entries_as_one_file() {
    let (m, tmp, arch) = archive_fixture_once("48KiB");
    assert!(manifest(&arch)["chunks"].as_array().unwrap().len() >= 8);
    assert_same_entries(
        &entries_of(&arch),
        &entries_of(Path::new(FIXTURE_OPLOG)),
        "the fixture",
    );
    // Running again adds nothing.
    let o = archive_once(&m.uri(), &arch, &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(
        text(&o.stdout).contains("archived 0 entries"),
        "{}",
        show(&o)
    );

    for extra in [
        vec![],
        vec!["--backup", FIXTURE_BACKUP, "--include-routine"],
        vec!["--since", "1795223400", "--until", "1795224000"],
    ] {
        let run = |src: &str| {
            let mut args = vec!["find-drop", src, "--json"];
            args.extend_from_slice(&extra);
            let o = pitr(&args);
            assert_eq!(code(&o), 0, "{}", show(&o));
            text(&o.stdout)
        };
        let from_archive = run(arch.to_str().unwrap());
        let from_file = run(FIXTURE_OPLOG);
        assert!(from_file.contains("oplog_limit"), "{from_file}");
        assert_eq!(from_archive, from_file, "find-drop {extra:?}");
    }

    // Only the chunks a range needs are read: without the first chunk's file, a
    // find-drop over a later range still works, a whole scan names what is missing.
    let first = manifest(&arch)["chunks"][0]["file"]
        .as_str()
        .unwrap()
        .to_string();
    let kept = tmp.path().join("first-chunk");
    std::fs::rename(arch.join(&first), &kept).unwrap();
    let o = pitr(&["find-drop", arch.to_str().unwrap(), "--since", "1795223700"]);
    assert!(code(&o) < 2, "{}", show(&o));
    let o = pitr(&["find-drop", arch.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        text(&o.stderr).contains("chunk 1 of the oplog archive"),
        "{}",
        show(&o)
    );
    std::fs::rename(&kept, arch.join(&first)).unwrap();

    let plan = |oplog: &str, out: &str| {
        let o = pitr(&[
            "plan",
            "--backup",
            FIXTURE_BACKUP,
            "--oplog",
            oplog,
            "--until",
            "auto",
            "--out",
            tmp.path().join(out).to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(code(&o), 0, "{}", show(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v
    };
    let pa = plan(arch.to_str().unwrap(), "pa");
    let pf = plan(FIXTURE_OPLOG, "pf");
    assert_eq!(pa["until"]["limit"], pf["until"]["limit"]);
    assert_eq!(pa["expected"], pf["expected"]);
    assert_eq!(pa["coverage"]["anchored"], pf["coverage"]["anchored"]);
    assert_eq!(pa["slice"]["entries"], pf["slice"]["entries"]);
    let slice = |v: &Value| std::fs::read(v["slice"]["oplog_file"].as_str().unwrap()).unwrap();
    assert!(slice(&pa) == slice(&pf), "the slices differ");
}

/// A restore from the fixture's backup plus the archive (the real mongorestore
/// against the stand-in mongod) gives the generator's truth.
#[test]
fn a_restore_from_the_backup_plus_the_archive_matches_the_truth() {
    let sets =
        replay_common::tool_sets("a_restore_from_the_backup_plus_the_archive_matches_the_truth");
    let Some(bins) = sets.first() else { return };
    let (_m, tmp, arch) = archive_fixture_once("64KiB");
    let truth = replay_common::read_json(&Path::new(replay_common::FIXTURE).join("truth.json"));
    let incident = truth["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "drop" && i["ns"] == "shop.orders")
        .unwrap();
    let limit = incident["oplog_limit"].as_str().unwrap();
    let want = truth["expected_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["oplog_limit"] == limit)
        .unwrap()["counts"]
        .as_object()
        .unwrap()
        .clone();
    let bin = bins.dir.display().to_string();
    let o = replay_common::run_pitr(
        tmp.path(),
        &[
            "replay",
            "--engine",
            "mongod",
            "--backup",
            FIXTURE_BACKUP,
            "--oplog",
            arch.to_str().unwrap(),
            "--until",
            "auto",
            "--mongodb-bin",
            &bin,
            "--workdir",
            "work",
            "--grace",
            "3s",
        ],
        &[],
    );
    assert_eq!(
        replay_common::code(&o),
        0,
        "{}: {}",
        bins.label,
        replay_common::show(&o)
    );
    let report = replay_common::read_json(&tmp.path().join("work/report.json"));
    assert_eq!(report["restore_point"]["limit"], limit);
    assert_eq!(report["verify"]["passed"], true, "{report}");
    let rows = replay_common::verify_rows(&report["verify"]);
    for (ns, n) in &want {
        let row = rows
            .iter()
            .find(|r| &r.0 == ns)
            .unwrap_or_else(|| panic!("no verify row for {ns}: {rows:?}"));
        assert_eq!((row.1, row.2), (true, n.as_u64()), "{ns}: {row:?}");
    }

    // The embedded engine reads the same archive to the same counts.
    let o = replay_common::run_pitr(
        tmp.path(),
        &[
            "replay",
            "--backup",
            FIXTURE_BACKUP,
            "--oplog",
            arch.to_str().unwrap(),
            "--until",
            "auto",
            "--workdir",
            "work-embedded",
            "--out",
            "restored",
        ],
        &[],
    );
    assert_eq!(replay_common::code(&o), 0, "{}", replay_common::show(&o));
    let report = replay_common::read_json(&tmp.path().join("work-embedded/report.json"));
    assert_eq!(report["restore_point"]["limit"], limit);
    let namespaces = report["namespaces"].as_array().unwrap();
    for (ns, n) in &want {
        let row = namespaces
            .iter()
            .find(|r| r["ns"] == ns.as_str())
            .unwrap_or_else(|| panic!("embedded: no row for {ns}: {report}"));
        let got = if row["exists"] == true {
            row["documents"].as_u64()
        } else {
            Some(0)
        };
        assert_eq!(got, n.as_u64(), "embedded: {ns}: {row}");
    }
}

/// prune deletes old chunks, but keeps what a backup needs and the newest chunk.
#[test]
fn prune_keeps_what_a_backup_needs() {
    let (_m, tmp, arch) = archive_fixture_once("48KiB");
    let chunks = manifest(&arch)["chunks"].as_array().unwrap().clone();
    let n = chunks.len();
    // A backup ending inside chunk 4 (at its third entry): every chunk from the one
    // holding its end must stay, even with --keep 1s (the fixture is from the past).
    let holding = 3;
    let entries = entries_of(&arch);
    let end = entries
        .iter()
        .filter(|(t, _)| *t >= pitr_ts(&chunks[holding]["first"]))
        .nth(2)
        .unwrap();
    let backup = tmp.path().join("backup");
    fake_backup(&backup, &end.1);
    let b = backup.to_str().unwrap();
    let dir = arch.to_str().unwrap();
    let dry = pitr(&[
        "archive",
        "prune",
        "--dir",
        dir,
        "--keep",
        "1s",
        "--backup",
        b,
        "--dry-run",
    ]);
    assert_eq!(code(&dry), 0, "{}", show(&dry));
    assert_eq!(manifest(&arch)["chunks"].as_array().unwrap().len(), n);
    let o = pitr(&[
        "archive", "prune", "--dir", dir, "--keep", "1s", "--backup", b,
    ]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(
        text(&o.stdout).contains(&format!(
            "deleted {holding} chunk{}",
            if holding == 1 { "" } else { "s" }
        )),
        "{}",
        show(&o)
    );
    assert!(text(&o.stdout).contains("needed by backup"), "{}", show(&o));
    // The same words but for the cutoff (now - 1s), which moves between the runs.
    let cutoff_free = |s: String| -> String {
        s.lines()
            .map(|l| match l.find(", older than ") {
                Some(at) => &l[..at],
                None => l,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        cutoff_free(text(&dry.stdout).replace("would delete", "deleted")),
        cutoff_free(text(&o.stdout))
    );
    let left = manifest(&arch)["chunks"].as_array().unwrap().clone();
    assert_eq!(left.len(), n - holding);
    assert_eq!(left[0], chunks[holding]);
    for c in &chunks[..holding] {
        assert!(!arch.join(c["file"].as_str().unwrap()).exists());
    }
    // The backup plus what is left still plans to the end.
    let plan_to_end = |out: &str| {
        pitr(&[
            "plan",
            "--backup",
            b,
            "--oplog",
            dir,
            "--until",
            "end",
            "--out",
            tmp.path().join(out).to_str().unwrap(),
        ])
    };
    let o = plan_to_end("plan");
    assert!(code(&o) != 2, "{}", show(&o));
    let o = pitr(&[
        "archive",
        "prune",
        "--dir",
        arch.to_str().unwrap(),
        "--keep",
        "1s",
    ]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let left = manifest(&arch)["chunks"].as_array().unwrap().clone();
    assert_eq!(left, vec![chunks[n - 1].clone()]);
    // What is left still reads, and a plan from the backup is now refused (gap at start).
    assert_eq!(
        entries_of(&arch).len() as u64,
        chunks[n - 1]["entries"].as_u64().unwrap()
    );
    let o = plan_to_end("plan2");
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(text(&o.stderr).contains("coverage gap"), "{}", show(&o));
}

fn pitr_ts(v: &Value) -> Ts {
    let (t, i) = v.as_str().unwrap().split_once(':').unwrap();
    Ts::new(t.parse().unwrap(), i.parse().unwrap())
}

/// The archiver warns in its log when the archive directory's filesystem lasts less
/// than `--min-disk-time` at the archive's growth: here an hour and a bit of history
/// (4,000 entries, one a second, written 5,000 s ago) against a threshold no disk
/// meets. At the default (2 days) this archive's growth is no concern.
#[test]
fn the_archiver_warns_when_its_disk_would_fill_within_min_disk_time() {
    let w = writer(1, now_secs() - 5000, 4000);
    let m = Mongod::start(&[("PITR_STANDIN_OPLOG_WRITER", w.as_str())]);
    let tmp = tempfile::tempdir().unwrap();
    let arch = tmp.path().join("arch");
    let o = archive_once(
        &m.uri(),
        &arch,
        &["--chunk-size", "64KiB", "--min-disk-time", "100000d"],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "the filesystem of the oplog archive `{}` has",
            arch.display()
        )) && err.contains("of the archive's growth (")
            && err.contains("less than --min-disk-time"),
        "{err}"
    );
    assert_eq!(
        err.matches("less than --min-disk-time").count(),
        1,
        "at most once an hour: {err}"
    );
    let arch2 = tmp.path().join("arch2");
    let o = archive_once(&m.uri(), &arch2, &["--chunk-size", "64KiB"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("--min-disk-time"), "{err}");
    // status says the same from the manifest.
    let o = pitr(&[
        "status",
        "--archive",
        arch.to_str().unwrap(),
        "--quick",
        "--min-disk-time",
        "100000d",
    ]);
    assert_eq!(o.status.code(), Some(1));
}
