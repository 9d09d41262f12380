//! The live source (`status`, `dump-oplog`, `find-drop --uri`) against the stand-in
//! `mongod` of tests/standins, speaking the wire protocol to the real driver and
//! serving the committed incident oplog (fixtures/incident/oplog.bson) as
//! `local.oplog.rs`. Each test starts its own stand-in on a free loopback port with a
//! temp dbpath; a guard kills it on every path.
//!
//! Faults come from the stand-in's knobs: `rollover-after-getmores=N` (the capped
//! oplog overtakes the cursor: code 136), `drop-connection-after-getmores=N` (a
//! network error; used both to test retries and to catch pitr in its backoff so it
//! can be SIGKILLed mid-dump), `PITR_STANDIN_MODE=mongos|auth`.
//!
//! Against a real replica set: `PITR_TEST_URI='mongodb://...' cargo test --test
//! live_source real_` runs the `real_*` tests (read-only); without it they print
//! that they skipped.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pitr::oplog::{OplogReader, ReadOptions, Ts};

// ---------------------------------------------------------------------------------
// helpers

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/incident/oplog.bson")
}

fn fixture_bytes() -> Vec<u8> {
    std::fs::read(fixture()).expect("fixtures/incident/oplog.bson")
}

/// Every entry of the fixture: (ts, bytes).
fn fixture_entries() -> Vec<(Ts, Vec<u8>)> {
    let mut r = OplogReader::new(
        "fixture",
        std::fs::File::open(fixture()).unwrap(),
        ReadOptions::default(),
    );
    let mut out = Vec::new();
    while let Some(e) = r.next_entry().unwrap() {
        out.push((e.ts, e.raw.as_bytes().to_vec()));
    }
    out
}

/// The stand-ins (built once per test process by the shared helper).
fn standin_bin_dir() -> PathBuf {
    common::standin_bin_dir()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A stand-in mongod, SIGKILLed and reaped when dropped.
struct Mongod {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Mongod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mongod {
    fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/", self.port)
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mongod.log")).unwrap_or_default()
    }
}

/// Starts the stand-in (a one-member replica set `rs0` serving the fixture unless
/// `env` says otherwise) and waits until it listens.
fn mongod(env: &[(&str, &str)], replset: bool) -> Mongod {
    let bin = standin_bin_dir().join("mongod");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("db")).unwrap();
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.arg("--port")
        .arg(port.to_string())
        .args(["--bind_ip", "127.0.0.1", "--dbpath"])
        .arg(dir.path().join("db"))
        .arg("--logpath")
        .arg(dir.path().join("mongod.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if replset {
        cmd.args(["--replSet", "rs0"]);
    }
    for k in [
        "PITR_STANDIN_MODE",
        "PITR_STANDIN_FAULT",
        "PITR_STANDIN_MONGOD_FAULT",
        "PITR_STANDIN_OPLOG",
    ] {
        cmd.env_remove(k);
    }
    if replset && !env.iter().any(|(k, _)| *k == "PITR_STANDIN_OPLOG") {
        cmd.env("PITR_STANDIN_OPLOG", fixture());
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("spawn the stand-in mongod");
    let mut m = Mongod { child, port, dir };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(100))
            .is_ok()
        {
            return m;
        }
        if let Ok(Some(st)) = m.child.try_wait() {
            panic!("the stand-in mongod exited early ({st}); log:\n{}", m.log());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "the stand-in mongod did not listen within 10 s; log:\n{}",
        m.log()
    );
}

fn replset() -> Mongod {
    mongod(&[], true)
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

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) -> &Output {
    assert_eq!(code(o), 0, "stdout:\n{}\nstderr:\n{}", stdout(o), stderr(o));
    o
}

fn dump(m: &Mongod, out: &Path, extra: &[&str]) -> Output {
    dump_cmd(m, out, extra).output().expect("run pitr")
}

/// `pitr dump-oplog` from `m` to `out`, with `extra` flags, to run.
fn dump_cmd(m: &Mongod, out: &Path, extra: &[&str]) -> Command {
    let uri = m.uri();
    let mut args = vec!["dump-oplog", "--uri", &uri, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    pitr_cmd(&args)
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Runs a dump that hits `drop-connection-after-getmores` and SIGKILLs pitr while
/// it waits to retry (after it has flushed what it has). Returns its stderr.
fn dump_killed_in_backoff(m: &Mongod, out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["--batch-size", "100"];
    args.extend_from_slice(extra);
    let mut child = dump_cmd(m, out, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            let st = child.wait().unwrap();
            panic!("pitr ended ({st}) before retrying; stderr:\n{seen}");
        }
        seen.push_str(&line);
        if line.contains("retry 1/5") {
            break;
        }
    }
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let st = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGKILL),
        "{seen}"
    );
    seen
}

// ---------------------------------------------------------------------------------
// dump-oplog

#[test]
fn dump_round_trip_is_byte_identical() {
    let m = replset();
    let tmp = tempfile::tempdir().unwrap();
    let o = dump(&m, tmp.path(), &[]);
    ok(&o);
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );
    let n = fixture_entries().len();
    assert!(
        stdout(&o).contains(&format!("{n} entries")),
        "{}",
        stdout(&o)
    );
    // Nothing else is left behind: no partial file, no plan.
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["oplog.bson"]);

    // Compressed: several gzip members, decompressing to exactly the same bytes,
    // in a file still named oplog.bson as `mongodump --oplog --gzip` writes it
    // (`mongorestore --oplogReplay --gzip DIR` reads only that name).
    let gz = tmp.path().join("gz");
    ok(&dump(&m, &gz, &["--gzip"]));
    let bytes = std::fs::read(gz.join("oplog.bson")).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip content");
    assert_eq!(gunzip(&bytes), fixture_bytes());
    assert!(bytes.len() < fixture_bytes().len() / 2);
    assert!(!gz.join("oplog.bson.gz").exists());
    // pitr reads it back by content, as a file and as a dump directory.
    ok(&pitr(&[
        "oplog",
        "stats",
        gz.join("oplog.bson").to_str().unwrap(),
    ]));
    ok(&pitr(&["oplog", "stats", gz.to_str().unwrap()]));
}

/// Off a terminal (a log, CI) a dump longer than `PITR_PROGRESS_INTERVAL` says
/// how far it is each interval: entries, bytes, rate, the oplog time reached and
/// the share of the range, from a thread of its own, so a server slow to answer a
/// batch still gets its lines (the last batch's figures again, the rate falling;
/// before the first one, "no entry yet"). A dump that ends sooner (the default 10 s here) says
/// nothing. Regression: a dump of a large oplog from a CI job printed nothing until
/// it ended.
#[test]
fn a_long_dump_off_a_terminal_logs_how_far_it_is() {
    let m = mongod(&[("PITR_STANDIN_FAULT", "slow-getmores-ms=400")], true);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("d");
    let o = dump_cmd(&m, &out, &["--batch-size", "500"])
        .env("PITR_PROGRESS_INTERVAL", "0.1s")
        .output()
        .unwrap();
    ok(&o);
    let err = stderr(&o);
    let prefix = "pitr: dumping the oplog: ";
    let lines: Vec<&str> = err.lines().filter_map(|l| l.strip_prefix(prefix)).collect();
    // 3 getMores of 400 ms: about 12 lines, several of them while a getMore waits.
    assert!(lines.len() >= 6, "{err}");
    let mut before = None;
    for l in &lines {
        if *l == "no entry yet, waiting for the server" {
            assert_eq!(before, None, "{err}");
            continue;
        }
        assert!(
            l.contains(" entries/s, at 20") && l.ends_with("% of the range)"),
            "{l}"
        );
        let n: u64 = l.split(' ').next().unwrap().parse().unwrap();
        assert!(before.is_none_or(|b| n >= b), "{err}");
        before = Some(n);
    }
    // The same entries said again while the server held a batch back, at a
    // rate taken when the line is printed: `N entries, B, R entries/s, at T (P%...)`.
    let fields = |l: &str| -> (String, u64, String) {
        let f: Vec<&str> = l.split(", ").collect();
        let rate = f[2].strip_suffix(" entries/s").unwrap().parse().unwrap();
        (f[0].to_string(), rate, f[3].to_string())
    };
    assert!(
        lines
            .iter()
            .filter(|l| !l.starts_with("no entry"))
            .map(|l| fields(l))
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w[0].0 == w[1].0 && w[0].2 == w[1].2 && w[1].1 < w[0].1),
        "{err}"
    );
    assert_eq!(
        std::fs::read(out.join("oplog.bson")).unwrap(),
        fixture_bytes()
    );

    let o = dump_cmd(&m, &tmp.path().join("q"), &["--batch-size", "500"])
        .env_remove("PITR_PROGRESS_INTERVAL")
        .output()
        .unwrap();
    ok(&o);
    assert!(!stderr(&o).contains("pitr: dumping"), "{}", stderr(&o));
}

#[test]
fn since_is_inclusive_and_until_exclusive() {
    let m = replset();
    let entries = fixture_entries();
    let (since, until) = (entries[100].0, entries[900].0);
    let tmp = tempfile::tempdir().unwrap();
    let o = dump(
        &m,
        tmp.path(),
        &["--since", &since.to_string(), "--until", &until.to_string()],
    );
    ok(&o);
    let want: Vec<u8> = entries[100..900]
        .iter()
        .flat_map(|(_, b)| b.clone())
        .collect();
    assert_eq!(std::fs::read(tmp.path().join("oplog.bson")).unwrap(), want);
    assert!(
        stdout(&o).contains("(inclusive)") && stdout(&o).contains("(exclusive)"),
        "{}",
        stdout(&o)
    );

    // A bare second means ordinal 0: the whole second is in (since) or out (until).
    let t = entries[500].0.t;
    let tmp = tempfile::tempdir().unwrap();
    ok(&dump(
        &m,
        tmp.path(),
        &["--since", &t.to_string(), "--until", &(t + 1).to_string()],
    ));
    let want: Vec<u8> = entries
        .iter()
        .filter(|(ts, _)| ts.t == t)
        .flat_map(|(_, b)| b.clone())
        .collect();
    assert!(!want.is_empty());
    assert_eq!(std::fs::read(tmp.path().join("oplog.bson")).unwrap(), want);

    // RFC 3339 is the same second.
    let rfc = Ts::new(t, 0).utc_string();
    let tmp2 = tempfile::tempdir().unwrap();
    ok(&dump(
        &m,
        tmp2.path(),
        &["--since", &rfc, "--until", &(t + 1).to_string()],
    ));
    assert_eq!(std::fs::read(tmp2.path().join("oplog.bson")).unwrap(), want);

    // --since not before --until is refused before anything is written.
    let tmp3 = tempfile::tempdir().unwrap();
    let o = dump(
        &m,
        &tmp3.path().join("x"),
        &["--since", &until.to_string(), "--until", &since.to_string()],
    );
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("is not before --until"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp3.path().join("x").exists());
}

#[test]
fn transient_network_errors_are_retried() {
    let m = mongod(
        &[("PITR_STANDIN_FAULT", "drop-connection-after-getmores=2")],
        true,
    );
    let tmp = tempfile::tempdir().unwrap();
    let o = dump(&m, tmp.path(), &["--batch-size", "100"]);
    ok(&o);
    let err = stderr(&o);
    assert!(err.contains("retry 1/5"), "{err}");
    assert!(err.contains("after 300 entries"), "{err}");
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );
}

#[test]
fn killed_dump_resumes_to_the_same_file() {
    let m = mongod(
        &[("PITR_STANDIN_FAULT", "drop-connection-after-getmores=5")],
        true,
    );
    let tmp = tempfile::tempdir().unwrap();
    let err = dump_killed_in_backoff(&m, tmp.path(), &[]);
    assert!(err.contains("after 600 entries"), "{err}");
    let partial = tmp.path().join("oplog.bson.partial");
    assert!(
        !tmp.path().join("oplog.bson").exists(),
        "an interrupted dump must not look complete"
    );
    let len = std::fs::metadata(&partial).unwrap().len();
    assert!(len > 0 && len < fixture_bytes().len() as u64);
    assert!(tmp.path().join("oplog.bson.partial.json").exists());

    // Without --resume the partial dump is not silently replaced.
    let o = dump(&m, tmp.path(), &[]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));

    // A torn last write: half an entry at the end.
    let entry = &fixture_entries()[0].1;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&partial)
        .unwrap()
        .write_all(&entry[..entry.len() / 2])
        .unwrap();
    let o = dump(&m, tmp.path(), &["--resume"]);
    ok(&o);
    assert!(stderr(&o).contains("dropping the last"), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("resumed after 600 entries"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );
    assert!(!partial.exists() && !tmp.path().join("oplog.bson.partial.json").exists());
}

#[test]
fn killed_compressed_dump_resumes_to_the_same_file() {
    let plain = replset();
    let reference = tempfile::tempdir().unwrap();
    ok(&dump(&plain, reference.path(), &["--gzip"]));
    let want = std::fs::read(reference.path().join("oplog.bson")).unwrap();

    // 1300 entries (> one 256 KiB gzip member) before the connection drops.
    let m = mongod(
        &[("PITR_STANDIN_FAULT", "drop-connection-after-getmores=12")],
        true,
    );
    let tmp = tempfile::tempdir().unwrap();
    dump_killed_in_backoff(&m, tmp.path(), &["--gzip"]);
    let partial = tmp.path().join("oplog.bson.partial");
    let len = std::fs::metadata(&partial).unwrap().len() as usize;
    assert!(
        len > 0 && len < want.len(),
        "one complete member expected, partial has {len} bytes"
    );
    // Resuming in the other format is refused.
    let o = dump(&m, tmp.path(), &["--resume"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("other format"), "{}", stderr(&o));
    // A torn write in the middle of the next member.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&partial)
        .unwrap()
        .write_all(&want[len..len + 100])
        .unwrap();
    ok(&dump(&m, tmp.path(), &["--gzip", "--resume"]));
    assert_eq!(std::fs::read(tmp.path().join("oplog.bson")).unwrap(), want);
}

#[test]
fn resume_keeps_the_recorded_bounds() {
    let m = mongod(
        &[("PITR_STANDIN_FAULT", "drop-connection-after-getmores=3")],
        true,
    );
    let entries = fixture_entries();
    let (since, until) = (entries[50].0.to_string(), entries[1200].0.to_string());
    let tmp = tempfile::tempdir().unwrap();
    dump_killed_in_backoff(&m, tmp.path(), &["--since", &since, "--until", &until]);
    // Different bounds on resume are refused; none means "as recorded".
    let o = dump(
        &m,
        tmp.path(),
        &["--resume", "--since", &entries[51].0.to_string()],
    );
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("differs from the interrupted dump"),
        "{}",
        stderr(&o)
    );
    ok(&dump(&m, tmp.path(), &["--resume"]));
    let want: Vec<u8> = entries[50..1200]
        .iter()
        .flat_map(|(_, b)| b.clone())
        .collect();
    assert_eq!(std::fs::read(tmp.path().join("oplog.bson")).unwrap(), want);
}

#[test]
fn a_complete_dump_is_never_overwritten() {
    let m = replset();
    let tmp = tempfile::tempdir().unwrap();
    ok(&dump(&m, tmp.path(), &[]));
    let o = dump(&m, tmp.path(), &[]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );
}

/// `--out` without room for the range is refused before anything is read, the
/// estimate from the oplog's size (`collStats`, here a stand-in reporting 8 TiB)
/// and the share of its time the range spans; `--gzip` and `--no-space-check` are
/// not checked, and a plain dump's estimate of the real oplog fits.
#[test]
fn an_out_without_room_for_the_range_is_refused_before_anything_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let m = mongod(
        &[("PITR_STANDIN_OPLOG_SIZE", &(8u64 << 40).to_string())],
        true,
    );
    let out = tmp.path().join("dump");
    let o = dump(&m, &out, &[]);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains(&format!(
            "not enough free space on the filesystem of `{}`: the dump writes about 8.0 TiB there (the oplog's entries in the range, estimated from the oplog's size and the time the range spans)",
            tmp.path().display()
        )) && err.contains("hint: free some space, or give --out on a larger filesystem, or add --gzip"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written");
    // Half the oplog's seconds: about half the size.
    let entries = fixture_entries();
    let (first, last) = (entries[0].0, entries.last().unwrap().0);
    let mid = pitr::oplog::Ts::new(first.t + (last.t - first.t) / 2, 0);
    let o = dump(&m, &out, &["--until", &mid.to_string()]);
    assert!(
        stderr(&o).contains("the dump writes about 4.0 TiB"),
        "{}",
        stderr(&o)
    );
    // --gzip: the compressed size is not known ahead: a warning saying the ratio
    // it would need, and the dump runs (and here fits: the oplog is really small).
    let o = dump(&m, &out, &["--gzip"]);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("warning: the range holds about 8.0 TiB of entries")
            && err.contains("x smaller (an oplog's entries usually compress 3-10x)")
            && err.contains("`--resume`"),
        "{err}"
    );
    assert!(!err.contains("not enough free space"), "{err}");
    let out2 = tmp.path().join("dump2");
    ok(&dump(&m, &out2, &["--no-space-check"]));
    assert_eq!(
        std::fs::read(out2.join("oplog.bson")).unwrap(),
        fixture_bytes()
    );
    // The stand-in as it is: the fixture's real size fits.
    let m = replset();
    let out3 = tmp.path().join("dump3");
    let o = dump(&m, &out3, &[]);
    ok(&o);
    assert!(!stderr(&o).contains("not known"), "{}", stderr(&o));
    let o = dump(&m, &tmp.path().join("dump4"), &["--gzip"]);
    ok(&o);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

// ---------------------------------------------------------------------------------
// rollover

#[test]
fn since_already_rolled_off_is_refused_with_both_positions() {
    let m = replset();
    let first = fixture_entries()[0].0;
    let since = Ts::new(first.t - 100, 0);
    let tmp = tempfile::tempdir().unwrap();
    let o = dump(&m, tmp.path(), &["--since", &since.to_string()]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.contains("no longer reaches back"), "{err}");
    assert!(
        err.contains(&since.to_string()) && err.contains(&first.to_string()),
        "{err}"
    );
    assert!(err.contains("1 min 40 s later"), "{err}");
    assert!(err.contains("--allow-gap"), "{err}");
    assert!(
        !tmp.path().join("oplog.bson").exists() && !tmp.path().join("oplog.bson.partial").exists()
    );

    // --allow-gap: a warning, then what is left.
    let o = dump(
        &m,
        tmp.path(),
        &["--since", &since.to_string(), "--allow-gap"],
    );
    ok(&o);
    assert!(
        stderr(&o).contains("warning:") && stderr(&o).contains("gap"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );

    // The oldest entry's own position, or its second with ordinal 0, is no gap.
    for s in [first.to_string(), format!("{}:0", first.t)] {
        let tmp = tempfile::tempdir().unwrap();
        ok(&dump(&m, tmp.path(), &["--since", &s]));
    }
}

#[test]
fn rollover_mid_dump_stops_with_the_position_and_resume_checks_the_gap() {
    let m = mongod(&[("PITR_STANDIN_FAULT", "rollover-after-getmores=3")], true);
    let tmp = tempfile::tempdir().unwrap();
    let o = dump(&m, tmp.path(), &["--batch-size", "100"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    let entries = fixture_entries();
    assert!(err.contains("rolled over"), "{err}");
    assert!(err.contains("after 400 entries"), "{err}");
    assert!(err.contains(&entries[399].0.to_string()), "{err}");
    assert!(err.contains("CappedPositionLost"), "{err}");
    assert!(err.contains("--resume") && err.contains("lost"), "{err}");
    assert!(!tmp.path().join("oplog.bson").exists());
    let partial = std::fs::read(tmp.path().join("oplog.bson.partial")).unwrap();
    let want_prefix: Vec<u8> = entries[..400].iter().flat_map(|(_, b)| b.clone()).collect();
    assert_eq!(partial, want_prefix);

    // The stand-in dropped everything up to the last entry read: the oldest entry is
    // now newer than the last one written, so a gap cannot be ruled out.
    let o = dump(&m, tmp.path(), &["--resume"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.contains("possible gap"), "{err}");
    assert!(
        err.contains(&entries[399].0.to_string()) && err.contains(&entries[400].0.to_string()),
        "{err}"
    );

    let o = dump(&m, tmp.path(), &["--resume", "--allow-gap"]);
    ok(&o);
    assert!(stderr(&o).contains("--allow-gap"), "{}", stderr(&o));
    // Nothing was really lost (the entry after the last one written is the oldest).
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );
}

// ---------------------------------------------------------------------------------
// topology and credentials

#[test]
fn mongos_is_refused() {
    let m = mongod(&[("PITR_STANDIN_MODE", "mongos")], false);
    let tmp = tempfile::tempdir().unwrap();
    for o in [
        pitr(&["status", "--uri", &m.uri()]),
        dump(&m, tmp.path(), &[]),
    ] {
        assert_eq!(code(&o), 2);
        let err = stderr(&o);
        assert!(
            err.contains("is a mongos") && err.contains("each member's own replica set"),
            "{err}"
        );
        // The hint names the command that lists the members (issue 19).
        assert!(
            err.contains("hint:") && err.contains("pitr cluster discover --uri"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn standalone_without_oplog_is_refused() {
    let m = mongod(&[], false);
    let o = pitr(&["status", "--uri", &m.uri()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("standalone mongod without an oplog"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn authentication_failure_is_clear_and_never_shows_the_password() {
    let m = mongod(&[("PITR_STANDIN_MODE", "auth")], true);
    let secret = "Sup3r-S3cret%21pw";
    let uri = format!(
        "mongodb://alice:{secret}@127.0.0.1:{}/?authSource=admin",
        m.port
    );
    let tmp = tempfile::tempdir().unwrap();
    let runs = [
        pitr(&["status", "--uri", &uri]),
        pitr_cmd(&["dump-oplog", "--out", tmp.path().to_str().unwrap()])
            .env("PITR_URI", &uri)
            .output()
            .unwrap(),
        pitr(&["find-drop", "--uri", &uri]),
    ];
    for o in &runs {
        assert_eq!(code(o), 2);
        let err = stderr(o);
        assert!(
            err.contains("authentication failed for user `alice`"),
            "{err}"
        );
        assert!(
            err.contains("mongodb://alice:<redacted>@127.0.0.1"),
            "{err}"
        );
        assert!(err.contains("authSource"), "{err}");
        for s in [secret, "Sup3r-S3cret!pw", "Sup3r"] {
            assert!(
                !err.contains(s) && !stdout(o).contains(s),
                "password leaked: {err}"
            );
        }
    }
    // --help never shows PITR_URI's value.
    let o = pitr_cmd(&["dump-oplog", "--help"])
        .env("PITR_URI", &uri)
        .output()
        .unwrap();
    assert!(!stdout(&o).contains("Sup3r"), "{}", stdout(&o));

    // No credentials at all: the server refuses the read, and the hint names the role.
    let o = pitr(&["status", "--uri", &m.uri()]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(
        err.contains("not authorized to read `local.oplog.rs`"),
        "{err}"
    );
    assert!(err.contains("pitrOplogReader"), "{err}");
}

#[test]
fn a_bad_uri_is_rejected_without_echoing_secrets() {
    let o = pitr(&[
        "status",
        "--uri",
        "mongodb://bob:hunter2hunter2@h:notaport/",
    ]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(
        err.contains("not a usable MongoDB connection string"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// A server that cannot be reached keeps pitr waiting for the server selection
/// timeout; off a terminal that wait is said while it lasts (here every 0.2 s of a
/// 1.2 s timeout), ends with "failed after", then the error, the password never
/// shown; `--json` says only the error. Regression: 15 s of silence by default.
#[test]
fn a_server_slow_to_answer_is_reported_while_pitr_waits() {
    let port = free_port(); // nothing listens there any more
    let uri =
        format!("mongodb://bob:hunter2hunter2@127.0.0.1:{port}/?serverSelectionTimeoutMS=1200");
    let o = pitr_cmd(&["status", "--uri", &uri])
        .env("PITR_PROGRESS_INTERVAL", "0.2s")
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains("hunter2"), "{err}");
    let prefix = format!("pitr: connecting to mongodb://bob:<redacted>@127.0.0.1:{port}/");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with(&prefix)).collect();
    let (last, waiting) = lines.split_last().expect("connecting lines");
    assert!(waiting.len() >= 3, "{err}");
    assert!(waiting.iter().all(|l| l.contains(": waiting, ")), "{err}");
    assert!(last.contains(": failed after "), "{err}");
    let (at, error) = (
        err.find(*last).unwrap(),
        err.find("error: cannot reach a server"),
    );
    assert!(error.is_some_and(|e| e > at), "{err}");

    let o = pitr_cmd(&["status", "--json", "--uri", &uri])
        .env("PITR_PROGRESS_INTERVAL", "0.2s")
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    assert!(!stderr(&o).contains("pitr: connecting"), "{}", stderr(&o));
}

// ---------------------------------------------------------------------------------
// find-drop --uri

fn find_drop_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["find-drop", "--json"];
    all.extend_from_slice(args);
    let o = pitr(&all);
    assert!(code(&o) <= 1, "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

#[test]
fn find_drop_uri_gives_the_same_findings_as_the_file() {
    let m = replset();
    let uri = m.uri();
    let file = fixture();
    let file = file.to_str().unwrap();
    let entries = fixture_entries();
    let (since, until) = (entries[300].0.to_string(), entries[1300].0.to_string());
    let filters: Vec<Vec<&str>> = vec![
        vec![],
        vec!["--since", &since],
        vec!["--until", &until],
        vec!["--since", &since, "--until", &until],
        vec!["--kind", "drop", "--kind", "dropDatabase"],
        // Narrowed to command entries on the server.
        vec!["--kind", "dropIndexes", "--kind", "renameDropTarget"],
        vec![
            "--kind",
            "deleteBurst",
            "--ns",
            "shop.*",
            "--min-count",
            "50",
        ],
    ];
    for f in &filters {
        let mut on_file = vec![file];
        on_file.extend_from_slice(f);
        let mut on_server = vec!["--uri", uri.as_str()];
        on_server.extend_from_slice(f);
        let a = find_drop_json(&on_file);
        assert!(
            !a.as_array().unwrap().is_empty() || f.len() > 2,
            "no findings for {f:?}"
        );
        assert_eq!(a, find_drop_json(&on_server), "filters {f:?}");
    }

    // The table names the server (redacted) and says when only commands were read.
    let o = pitr(&["find-drop", "--uri", &uri, "--kind", "dropIndexes"]);
    ok(&o);
    assert!(
        stdout(&o).contains("local.oplog.rs of mongodb://127.0.0.1"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("command entries only"),
        "{}",
        stdout(&o)
    );

    // PITR_URI is used only when no file is given.
    let o = pitr_cmd(&["find-drop", "--json"])
        .env("PITR_URI", &uri)
        .output()
        .unwrap();
    ok(&o);
    let o = pitr_cmd(&["find-drop", file])
        .env("PITR_URI", "mongodb://127.0.0.1:1/")
        .output()
        .unwrap();
    ok(&o);
    assert!(stdout(&o).contains("oplog.bson"), "{}", stdout(&o));
    // Files and --uri together are a usage error.
    let o = pitr(&["find-drop", file, "--uri", &uri]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    let o = pitr(&["find-drop"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no oplog to read"), "{}", stderr(&o));
}

/// `pitr dump-oplog` and the real `mongodump -d local -c oplog.rs` (each mongo-tools
/// release in ../shared/tools) reading the same server write the same entries, byte
/// for byte.
#[test]
fn dump_oplog_equals_the_real_mongodump_of_local_oplog_rs() {
    let dirs = common::mongo_tools_dirs("dump_oplog_equals_the_real_mongodump_of_local_oplog_rs");
    if dirs.is_empty() {
        return;
    }
    let m = replset();
    let ours = tempfile::tempdir().unwrap();
    ok(&dump(&m, ours.path(), &[]));
    let ours = std::fs::read(ours.path().join("oplog.bson")).unwrap();
    for tools in dirs {
        let theirs = tempfile::tempdir().unwrap();
        let o = Command::new(tools.join("mongodump"))
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &m.port.to_string(),
                "-d",
                "local",
                "-c",
                "oplog.rs",
                "--out",
            ])
            .arg(theirs.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: {}",
            tools.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        let theirs = std::fs::read(theirs.path().join("local/oplog.rs.bson")).unwrap();
        assert_eq!(theirs.len(), ours.len(), "{}", tools.display());
        assert!(theirs == ours, "{}: the entries differ", tools.display());
    }
}

/// A dump without --until ends at the newest entry the server reported when it
/// started. A member that lags behind (its range read misses the newest entries)
/// must never end the dump early and call it complete: pitr waits for it, and if it
/// does not catch up, stops with the position reached and keeps the partial file.
#[test]
fn a_lagging_member_never_ends_a_dump_early() {
    // Catches up after 1.5 s: the retries wait for it, the dump is complete.
    let m = mongod(
        &[("PITR_STANDIN_MONGOD_FAULT", "lagging-reads-ms=1500")],
        true,
    );
    let tmp = tempfile::tempdir().unwrap();
    let o = dump(&m, tmp.path(), &[]);
    ok(&o);
    assert!(stderr(&o).contains("has no entry after"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );

    // Never catches up (within the retries): refused, nothing called complete.
    let m = mongod(
        &[("PITR_STANDIN_MONGOD_FAULT", "lagging-reads-ms=600000")],
        true,
    );
    let tmp = tempfile::tempdir().unwrap();
    let o = dump(&m, tmp.path(), &[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let e = stderr(&o);
    let newest = fixture_entries().last().unwrap().0;
    assert!(
        e.contains(&format!("did not deliver the oplog up to {newest}"))
            && e.contains("lags behind"),
        "{e}"
    );
    assert!(
        !tmp.path().join("oplog.bson").exists(),
        "never renamed to complete"
    );
    assert!(tmp.path().join("oplog.bson.partial").exists());
}

// ---------------------------------------------------------------------------------
// status

/// Servers before 4.4.2 (and 4.4.0/4.4.1) have no `hello` command: pitr asks
/// `isMaster` instead, and reads and dumps the oplog as usual.
#[test]
fn a_server_without_hello_is_read_through_is_master() {
    let m = mongod(&[("PITR_STANDIN_MONGOD_FAULT", "no-hello")], true);
    let o = pitr(&["status", "--uri", &m.uri(), "--min-window", "1m", "--json"]);
    ok(&o);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["replica_set"], "rs0");
    let tmp = tempfile::tempdir().unwrap();
    ok(&dump(&m, tmp.path(), &[]));
    assert_eq!(
        std::fs::read(tmp.path().join("oplog.bson")).unwrap(),
        fixture_bytes()
    );
}

#[test]
fn status_shows_version_topology_and_window() {
    let m = replset();
    let entries = fixture_entries();
    let (first, last) = (entries[0].0, entries[entries.len() - 1].0);
    // The fixture covers under half an hour: shorter than the default 24 h.
    let secs = last.t - first.t;
    assert!(secs > 20 * 60 && secs < 30 * 60, "{secs}");
    let window = format!("window {} min {} s (0.5 hours)", secs / 60, secs % 60);
    let o = pitr(&["status", "--uri", &m.uri()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "version   7.0.14",
        "replica set `rs0`, 1 member",
        "PRIMARY",
        &first.to_string(),
        &last.to_string(),
        &window,
        "of maximum unknown",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
    assert!(
        stderr(&o).contains("shorter than --min-window"),
        "{}",
        stderr(&o)
    );

    let o = pitr(&["status", "--uri", &m.uri(), "--min-window", "20m", "--json"]);
    ok(&o);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["replica_set"], "rs0");
    assert_eq!(j["topology"], "replicaSet");
    assert_eq!(j["oplog"]["oldest"]["ts"], first.to_string());
    assert_eq!(j["oplog"]["newest"]["ts"], last.to_string());
    assert_eq!(j["oplog"]["seconds"], (last.t - first.t) as u64);
    assert_eq!(j["oplog_size_bytes"], fixture_bytes().len() as u64);
    assert!(j["oplog_max_bytes"].is_null());
    assert!(j["warning"].is_null());
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

// ---------------------------------------------------------------------------------
// a real replica set (PITR_TEST_URI), read-only

fn real_uri(test: &str) -> Option<String> {
    match std::env::var("PITR_TEST_URI") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            common::skip_optional(
                test,
                "set PITR_TEST_URI to a replica set's URI to run it against a real server",
            );
            None
        }
    }
}

#[test]
fn real_replica_set_status() {
    let Some(uri) = real_uri("real_replica_set_status") else {
        return;
    };
    let o = pitr(&["status", "--uri", &uri, "--json", "--min-window", "1s"]);
    ok(&o);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["oplog"]["oldest"]["ts"].is_string(), "{j}");
    assert!(
        !j["server"].as_str().unwrap().contains("@")
            || j["server"].as_str().unwrap().contains("<redacted>")
    );
}

#[test]
fn real_replica_set_dump_is_bounded_and_readable() {
    let Some(uri) = real_uri("real_replica_set_dump_is_bounded_and_readable") else {
        return;
    };
    let o = pitr(&["status", "--uri", &uri, "--json", "--min-window", "1s"]);
    ok(&o);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let newest = j["oplog"]["newest"]["ts"].as_str().unwrap().to_string();
    let (t, i) = newest.split_once(':').unwrap();
    let newest_ts = Ts::new(t.parse().unwrap(), i.parse().unwrap());
    let since = Ts::new(newest_ts.t.saturating_sub(120), 0);
    let tmp = tempfile::tempdir().unwrap();
    let o = pitr(&[
        "dump-oplog",
        "--uri",
        &uri,
        "--out",
        tmp.path().to_str().unwrap(),
        "--since",
        &since.to_string(),
        "--until",
        &newest,
    ]);
    ok(&o);
    let mut r = OplogReader::new(
        "dump",
        std::fs::File::open(tmp.path().join("oplog.bson")).unwrap(),
        ReadOptions::default(),
    );
    let mut prev = None;
    while let Some(e) = r.next_entry().unwrap() {
        assert!(e.ts >= since && e.ts < newest_ts, "{} out of bounds", e.ts);
        assert!(prev.is_none_or(|p| p < e.ts), "not in ts order at {}", e.ts);
        prev = Some(e.ts);
    }
}
