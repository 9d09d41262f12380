//! `pitr replay` when things go wrong, against the stand-ins with faults injected
//! (`PITR_STANDIN_<TOOL>_FAULT`): a taken port, a mongod that dies at start, a
//! restore that fails midway, a step past its timeout, programs ignoring SIGTERM,
//! and Ctrl-C (one, and a second one that escalates).
//!
//! Each test checks the message (what happened, exit code, stderr tail), pitr's
//! exit code, the report, and that NO process (by the pids pitr printed and
//! reported, and by scanning /proc for the work dir) and NO temporary directory
//! (spare dbpath, partial dump) is left behind.

mod common;
mod replay_common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use replay_common::*;
use serde_json::Value;

struct Case {
    tmp: tempfile::TempDir,
}

impl Case {
    fn new(test: &str) -> Case {
        let b = standins();
        eprintln!(
            "{test}: binaries: pitr's STAND-INS (not real MongoDB) from {}",
            b.dir.display()
        );
        Case {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    fn workdir(&self) -> PathBuf {
        self.tmp.path().join("work")
    }

    /// The replay command line; `extra` may override `--grace` and `--mongodb-bin`.
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            "replay",
            "--engine",
            "mongod",
            "--backup",
            &format!("{FIXTURE}/backup"),
            "--oplog",
            &format!("{FIXTURE}/oplog.bson"),
            "--until",
            "auto",
            "--workdir",
            "work",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if !extra.contains(&"--grace") {
            v.extend(["--grace".to_string(), "2s".to_string()]);
        }
        if !extra.contains(&"--mongodb-bin") {
            v.extend([
                "--mongodb-bin".to_string(),
                standins().dir.display().to_string(),
            ]);
        }
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    fn run(&self, extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let args = self.args(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run_pitr(self.tmp.path(), &refs, env)
    }

    fn report(&self) -> Value {
        read_json(&self.workdir().join("report.json"))
    }

    /// Nothing left: processes (printed, reported, or mentioning the work dir)
    /// and temporary directories.
    fn assert_clean(&self, stderr_text: &str) {
        let mut pids = pids_in(stderr_text);
        if self.workdir().join("report.json").exists() {
            pids.extend(pids_in_report(&self.report()));
        }
        assert_nothing_running(&pids, &self.workdir());
        assert_no_temp_dirs(&self.workdir(), Some(self.tmp.path()));
    }
}

#[test]
fn port_already_taken() {
    let c = Case::new("port_already_taken");
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let o = c.run(&["--port", &port], &[]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("error: step 1 (Start a spare standalone mongod) failed: port {port} on 127.0.0.1 is already in use")), "{e}");
    assert!(e.contains("hint: stop whatever listens there"), "{e}");
    let r = c.report();
    assert_eq!(r["result"], "error");
    assert_eq!(step(&r, "start_spare")["status"], "failed");
    assert_eq!(step(&r, "restore_backup")["status"], "not_run");
    assert_eq!(step(&r, "shutdown")["status"], "skipped");
    assert!(stdout(&o).contains("Result    ERROR"), "{}", show(&o));
    c.assert_clean(&e);
}

#[test]
fn mongod_exits_at_start() {
    let c = Case::new("mongod_exits_at_start");
    let o = c.run(&[], &[("PITR_STANDIN_MONGOD_FAULT", "exit-at-start")]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(
        e.contains("the spare mongod failed with exit code 1 during startup"),
        "{e}"
    );
    assert!(e.contains("last lines of its log"), "{e}");
    assert!(
        e.contains(&format!("log: `{}/logs/mongod.log`", c.workdir().display())),
        "the log outlives the spare dir: {e}"
    );
    let r = c.report();
    assert_eq!(step(&r, "start_spare")["exit_code"], 1);
    assert!(c.workdir().join("logs/mongod.log").is_file());
    c.assert_clean(&e);
}

#[test]
fn mongorestore_fails_midway() {
    let c = Case::new("mongorestore_fails_midway");
    let o = c.run(
        &["--out", "handover"],
        &[("PITR_STANDIN_MONGORESTORE_FAULT", "fail-midway")],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(
        e.contains(
            "error: step 2 (Restore the backup and replay the oplog up to the limit) failed: `"
        ),
        "{e}"
    );
    assert!(e.contains("` failed with exit code 1"), "{e}");
    assert!(
        e.contains("| ") && e.contains("injected by PITR_STANDIN_FAULT=fail-midway"),
        "stderr tail: {e}"
    );
    assert!(
        e.contains("full output: `") && e.contains("2-restore-backup.log"),
        "{e}"
    );
    let r = c.report();
    let s2 = step(&r, "restore_backup");
    assert_eq!(
        (s2["status"].as_str(), s2["exit_code"].as_i64()),
        (Some("failed"), Some(1))
    );
    assert!(s2["stderr_tail"].to_string().contains("fail-midway"));
    assert_eq!(step(&r, "verify")["status"], "not_run");
    // The spare was still shut down cleanly, and no dump was started.
    assert_eq!(step(&r, "shutdown")["status"], "ok");
    assert!(!c.tmp.path().join("handover").exists());
    let md = std::fs::read_to_string(c.workdir().join("report.md")).unwrap();
    assert!(
        md.contains("## Error") && md.contains("fail-midway"),
        "{md}"
    );
    c.assert_clean(&e);
}

#[test]
fn step_past_its_timeout() {
    let c = Case::new("step_past_its_timeout");
    let t = Instant::now();
    let o = c.run(
        &["--step-timeout", "1s"],
        &[("PITR_STANDIN_MONGORESTORE_FAULT", "hang")],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(
        e.contains("did not finish within 1s; stopped it with SIGTERM"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(step(&c.report(), "restore_backup")["status"], "failed");
    c.assert_clean(&e);
}

#[test]
fn mongorestore_ignoring_sigterm_is_killed_after_the_grace_period() {
    let c = Case::new("mongorestore_ignoring_sigterm");
    let o = c.run(
        &["--step-timeout", "1s", "--grace", "300ms"],
        &[("PITR_STANDIN_MONGORESTORE_FAULT", "ignore-sigterm")],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(
        e.contains("did not finish within 1s; sent SIGTERM, then SIGKILL"),
        "{e}"
    );
    assert!(step(&c.report(), "restore_backup")["detail"]
        .as_str()
        .unwrap()
        .contains("SIGKILL"));
    c.assert_clean(&e);
}

#[test]
fn mongod_ignoring_sigterm_is_killed_after_the_grace_period() {
    let c = Case::new("mongod_ignoring_sigterm");
    let o = c.run(
        &["--grace", "300ms"],
        &[("PITR_STANDIN_MONGOD_FAULT", "ignore-sigterm")],
    );
    // The replay and the verification passed; the unclean stop is a warning.
    assert_eq!(code(&o), 0, "{}", show(&o));
    let so = stdout(&o);
    assert!(
        so.contains("warning: the spare mongod did not stop within the 0.30s grace period after SIGTERM: killed with SIGKILL"),
        "{so}"
    );
    let r = c.report();
    assert_eq!(step(&r, "shutdown")["exit_code"], 137);
    assert!(r["warnings"][0].as_str().unwrap().contains("SIGKILL"));
    c.assert_clean(&stderr(&o));
}

#[test]
fn missing_programs_are_refused_before_anything_starts() {
    let c = Case::new("missing_programs");
    let empty = tempfile::tempdir().unwrap();
    let o = c.run(&["--mongodb-bin", &empty.path().display().to_string()], &[]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(
        e.contains("error: `mongod` not found (searched --mongodb-bin `"),
        "{e}"
    );
    assert!(e.contains("hint: install MongoDB Community Server"), "{e}");
    // Before the plan reads the backup and the oplog (minutes on a large one).
    for planned in ["pitr: reading", "pitr replay: limit", "At stake"] {
        assert!(!e.contains(planned), "{planned:?} before the refusal:\n{e}");
    }
    c.assert_clean(&e);
}

#[test]
fn out_must_be_new_or_empty() {
    let c = Case::new("out_must_be_new_or_empty");
    std::fs::create_dir(c.tmp.path().join("taken")).unwrap();
    std::fs::write(c.tmp.path().join("taken/x"), "x").unwrap();
    let o = c.run(&["--out", "taken"], &[]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(
        stderr(&o).contains("exists and is not an empty directory"),
        "{}",
        show(&o)
    );
    assert!(!c.workdir().exists(), "checked before anything is created");
}

/// Runs pitr as a child, waits until mongorestore runs (pitr prints its pid),
/// sends `sigints` SIGINTs 300 ms apart, and returns (exit code, stderr, time from
/// the first SIGINT to the exit).
fn interrupt(
    c: &Case,
    extra: &[&str],
    env: &[(&str, &str)],
    sigints: usize,
) -> (i32, String, Duration) {
    let args = c.args(extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = pitr_cmd(c.tmp.path(), &refs, env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l.clone());
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let l = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("pitr never started mongorestore");
        if l.starts_with("[2/5] started `mongorestore` (pid ") {
            break;
        }
    }
    // Let the stand-in connect and reach its hang.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    for i in 0..sigints {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(300));
        }
        // SAFETY: kill(2) to the pitr child this test spawned.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    }
    let status = child.wait().unwrap();
    let took = t.elapsed();
    let text = reader.join().unwrap();
    (
        status.code().expect("pitr exits, it is not killed"),
        text,
        took,
    )
}

#[test]
fn ctrl_c_during_replay_stops_everything_and_exits_130() {
    let c = Case::new("ctrl_c_during_replay");
    let (code, e, took) = interrupt(
        &c,
        &["--keep", "--out", "handover"],
        &[("PITR_STANDIN_MONGORESTORE_FAULT", "hang")],
        1,
    );
    assert_eq!(code, 130, "{e}");
    assert!(
        e.contains("pitr: Ctrl-C: stopping the running step and the spare mongod"),
        "{e}"
    );
    assert!(e.contains("error: interrupted: the running step and the spare mongod were stopped and its data directory removed"), "{e}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let r = c.report();
    assert_eq!(r["result"], "interrupted");
    assert_eq!(r["exit_code"], 130);
    assert_eq!(step(&r, "restore_backup")["status"], "interrupted");
    // Ctrl-C wins over --keep: the spare was stopped, not kept.
    assert_eq!(step(&r, "shutdown")["status"], "ok");
    assert_eq!(r["kept"], Value::Null);
    assert!(!c.tmp.path().join("handover").exists());
    c.assert_clean(&e);
}

#[test]
fn a_second_ctrl_c_kills_at_once() {
    let c = Case::new("a_second_ctrl_c_kills_at_once");
    // mongorestore ignores SIGTERM and the grace period is long: only the second
    // Ctrl-C can end this quickly.
    let (code, e, took) = interrupt(
        &c,
        &["--grace", "60s"],
        &[("PITR_STANDIN_MONGORESTORE_FAULT", "ignore-sigterm")],
        2,
    );
    assert_eq!(code, 130, "{e}");
    assert!(
        e.contains("pitr: Ctrl-C again: killing the running programs now (SIGKILL)"),
        "{e}"
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
    let r = c.report();
    assert!(
        step(&r, "restore_backup")["detail"]
            .as_str()
            .unwrap()
            .contains("SIGKILL"),
        "{r}"
    );
    assert!(
        step(&r, "shutdown")["detail"]
            .as_str()
            .unwrap()
            .contains("SIGKILL"),
        "{r}"
    );
    c.assert_clean(&e);
}

#[test]
fn lint_errors_are_refused_unless_ignored() {
    // The plan's own lint tests cover which entries are errors; here only the
    // refusal: an unknown command right after the backup's end.
    let c = Case::new("lint_errors_are_refused");
    let backup = c.tmp.path().join("backup");
    common::copy_dir(&Path::new(FIXTURE).join("backup"), &backup);
    let end = pitr::oplog::Ts::new(1795222807, 3);
    let mut oplog = std::fs::read(format!("{FIXTURE}/oplog.bson")).unwrap();
    let bad = bson::doc! {
        "op": "c", "ns": "shop.$cmd", "o": { "frobnicate": 1 },
        "ts": bson::Timestamp { time: end.t + 1, increment: 0 },
        "t": 1_i64, "v": 2_i32, "wall": bson::DateTime::from_millis(1_795_222_808_000),
    };
    let bytes = bson::to_vec(&bad).unwrap();
    // The oplog is sorted; an extra entry at the end is out of order, which the plan sorts.
    oplog.extend_from_slice(&bytes);
    let op = c.tmp.path().join("oplog.bson");
    std::fs::write(&op, oplog).unwrap();
    let args: Vec<String> = c
        .args(&[])
        .into_iter()
        .map(|a| {
            if a.ends_with("/fixtures/incident/backup") {
                backup.display().to_string()
            } else if a.ends_with("/fixtures/incident/oplog.bson") {
                op.display().to_string()
            } else {
                a
            }
        })
        .collect();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run_pitr(c.tmp.path(), &refs, &[]);
    assert_eq!(code(&o), 1, "lint errors: exit 1, {}", show(&o));
    let e = stderr(&o);
    assert!(
        e.contains("the plan's lint found 1 error:") && e.contains("unknown-command"),
        "{e}"
    );
    assert!(e.contains("--ignore-lint-errors"), "{e}");
    assert!(!c.workdir().join("report.json").exists(), "nothing ran");
    c.assert_clean(&e);

    // The rehearsal fails the same way, printing everything first.
    let dry = |extra: &[&str], workdir: &str| {
        let mut a: Vec<String> = args
            .iter()
            .map(|x| {
                if x == "work" {
                    workdir.to_string()
                } else {
                    x.clone()
                }
            })
            .collect();
        a.push("--dry-run".into());
        a.extend(extra.iter().map(|x| x.to_string()));
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        run_pitr(c.tmp.path(), &refs, &[])
    };
    let o = dry(&[], "dry1");
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(
        stdout(&o).contains("Commands  pitr replay would run"),
        "{}",
        show(&o)
    );
    assert!(
        stdout(&o).contains("Verdict   the real run would refuse"),
        "{}",
        show(&o)
    );
    assert!(
        stderr(&o).contains("error: --dry-run: the lint found 1 error:"),
        "{}",
        show(&o)
    );
    let o = dry(&["--ignore-lint-errors"], "dry2");
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(
        stdout(&o).contains("the real run would go ahead"),
        "{}",
        show(&o)
    );
    let o = dry(&["--json"], "dry3");
    assert_eq!(code(&o), 1, "{}", show(&o));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["exit_code"], 1);
    assert!(d["refusal"].as_str().unwrap().contains("lint"), "{d}");
}

#[test]
fn spare_mongod_crashing_during_a_step_is_named_in_the_error() {
    let c = Case::new("spare_mongod_crashing_during_a_step");
    // mongod aborts 1.5 s after start-up while mongorestore hangs connected; the
    // step then times out, and the error says what happened to the server too.
    let o = c.run(
        &["--step-timeout", "3s", "--grace", "300ms"],
        &[
            ("PITR_STANDIN_MONGOD_FAULT", "crash-after-ms=1500"),
            ("PITR_STANDIN_MONGORESTORE_FAULT", "hang"),
        ],
    );
    assert_eq!(code(&o), 2, "{}", show(&o));
    let e = stderr(&o);
    assert!(e.contains("did not finish within 3s"), "{e}");
    assert!(
        e.contains("meanwhile the spare mongod itself was killed by signal 6 (SIGABRT)"),
        "{e}"
    );
    let r = c.report();
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("exited on its own"),
        "{r}"
    );
    assert!(
        step(&r, "shutdown")["detail"]
            .as_str()
            .unwrap()
            .contains("had already exited"),
        "{r}"
    );
    c.assert_clean(&e);
}
