//! Progress of the scans (`find-drop`, `oplog`, `plan`) when stderr is not a
//! terminal (a log, CI): a scan that runs longer than `PITR_PROGRESS_INTERVAL`
//! (default 10s) logs a line each interval with how far it is, and one at its
//! end; a scan that ends sooner says nothing, as before. The lines come from a
//! thread of their own, so a read that waits for its bytes (a bucket slow to
//! answer, a pipe) is reported too. Regression: off a terminal a scan of a 100 GB
//! oplog, or of a bucket whose first bytes were slow, printed nothing until it
//! ended.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{code, pitr_bin, stderr, stdout};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/incident/oplog.bson")
}

/// Runs pitr with `args` reading the fixture's oplog from its stdin, sent in two
/// halves `pause` apart (a source whose bytes come slowly), with `env` set.
fn through_a_slow_pipe(args: &[&str], pause: Duration, env: &[(&str, &str)]) -> Output {
    let bytes = std::fs::read(fixture()).unwrap();
    let mut cmd = Command::new(pitr_bin());
    cmd.args(args)
        .env_remove("PITR_PROGRESS_INTERVAL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written on a thread of its own while the output is read: a command that
    // writes much (`oplog cat`) would otherwise fill its stdout pipe and stop reading.
    let writer = std::thread::spawn(move || {
        let (first, rest) = bytes.split_at(bytes.len() / 2);
        stdin.write_all(first)?;
        stdin.flush()?;
        std::thread::sleep(pause);
        stdin.write_all(rest)
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    o
}

/// The progress lines of `err` for a read of `name`.
fn progress_lines<'a>(err: &'a str, name: &str) -> Vec<&'a str> {
    let prefix = format!("pitr: reading {name}: ");
    err.lines().filter(|l| l.starts_with(&prefix)).collect()
}

#[test]
fn a_slow_scan_off_a_terminal_logs_how_far_it_is_and_its_end() {
    let size = std::fs::metadata(fixture()).unwrap().len();
    let args = ["find-drop", "-"];
    let o = through_a_slow_pipe(
        &args,
        Duration::from_millis(800),
        &[("PITR_PROGRESS_INTERVAL", "0.1s")],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    let lines = progress_lines(&err, "<stdin>");
    // At least a few lines while the pipe waited (0.8 s at 0.1 s), then the last.
    assert!(lines.len() >= 4, "{err}");
    let (last, running) = lines.split_last().unwrap();
    for l in running {
        // stdin's size is unknown: bytes so far and the rate.
        assert!(l.contains(" so far, ") && l.ends_with("/s"), "{l}");
    }
    // While the pipe waited, half the file had been read, and no more.
    assert!(
        running
            .iter()
            .any(|l| l.contains(&format!("{} so far", human(size / 2)))),
        "{err}"
    );
    assert!(
        last.starts_with(&format!("pitr: reading <stdin>: {} in ", human(size))),
        "{last}"
    );
    // The findings are those of a run without the pause: the lines are on stderr only.
    let direct = through_a_slow_pipe(&args, Duration::ZERO, &[]);
    assert_eq!(code(&direct), 0, "{}", stderr(&direct));
    assert_eq!(stdout(&o), stdout(&direct));
    assert!(!stdout(&o).contains("pitr: reading"));
}

/// `oplog stats` and `oplog cat` scan the same way and say so the same way (the
/// plan's passes too: the same [`ScanProgress`], named by the pass, `reading the
/// oplog`; the plan reads its oplog more than once, so not from a pipe).
#[test]
fn oplog_stats_and_cat_log_their_scans_too() {
    let env = [("PITR_PROGRESS_INTERVAL", "0.1s")];
    for cmd in ["stats", "cat"] {
        let o = through_a_slow_pipe(&["oplog", cmd, "-"], Duration::from_millis(500), &env);
        let err = stderr(&o);
        assert_eq!(code(&o), 0, "{err}");
        assert!(progress_lines(&err, "<stdin>").len() >= 2, "{cmd}: {err}");
        assert!(!stdout(&o).contains("pitr: reading"), "{cmd}");
    }
}

/// A scan that ends within the interval logs nothing (here the default 10 s, and a
/// `--json` run never does, whatever the interval).
#[test]
fn a_quick_scan_and_a_json_one_log_nothing() {
    let o = through_a_slow_pipe(&["find-drop", "-"], Duration::ZERO, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let o = through_a_slow_pipe(
        &["find-drop", "--json", "-"],
        Duration::from_millis(500),
        &[("PITR_PROGRESS_INTERVAL", "0.1s")],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("pitr: reading"), "{}", stderr(&o));
}

/// Runs pitr with `args` (where `{fifo}` stands for a FIFO's path) whose source is a
/// FIFO that gets its writer only after `pause`: the open waits that long.
fn from_a_late_fifo(args: &[&str], pause: Duration) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("oplog.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo");
    let path = fifo.display().to_string();
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            std::thread::sleep(pause);
            std::fs::write(&fifo, std::fs::read(fixture()).unwrap())
        })
    };
    let args: Vec<String> = args.iter().map(|a| a.replace("{fifo}", &path)).collect();
    let o = Command::new(pitr_bin())
        .args(&args)
        .env("PITR_PROGRESS_INTERVAL", "0.1s")
        .output()
        .unwrap();
    writer.join().unwrap().unwrap();
    (o, path)
}

/// A source slow to open (a bucket's first answer; here a FIFO with no writer yet)
/// is reported while it waits, before its scan's own lines. Regression: such a
/// wait printed nothing.
#[test]
fn a_source_slow_to_open_is_reported_while_it_waits() {
    let (o, path) = from_a_late_fifo(&["find-drop", "{fifo}"], Duration::from_millis(700));
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let prefix = format!("pitr: opening {path}: ");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with(&prefix)).collect();
    let (last, waiting) = lines.split_last().expect("lines");
    assert!(waiting.len() >= 3, "{err}");
    for l in waiting {
        assert!(l.contains(": waiting, ") && l.ends_with("s so far"), "{l}");
    }
    assert!(last.contains(": opened in "), "{last}");
    // The same findings as from the file itself.
    let direct = Command::new(pitr_bin())
        .arg("find-drop")
        .arg(fixture())
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o).replace(&path, "OPLOG"),
        stdout(&direct).replace(&fixture().display().to_string(), "OPLOG")
    );
    // `oplog cat` too; `--json` says nothing.
    let (o, _) = from_a_late_fifo(&["oplog", "cat", "{fifo}"], Duration::from_millis(400));
    assert!(stderr(&o).contains(": opened in "), "{}", stderr(&o));
    let (o, _) = from_a_late_fifo(
        &["find-drop", "--json", "{fifo}"],
        Duration::from_millis(400),
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("pitr: opening"), "{}", stderr(&o));
}

/// A bad interval is said once, and the default kept.
#[test]
fn a_bad_interval_is_named() {
    let o = through_a_slow_pipe(
        &["find-drop", "-"],
        Duration::ZERO,
        &[("PITR_PROGRESS_INTERVAL", "often")],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(
        err.matches("warning: PITR_PROGRESS_INTERVAL=`often`: not a duration")
            .count(),
        1,
        "{err}"
    );
}

/// `1.2 MiB` as indicatif's `HumanBytes` writes it (the lines use it).
fn human(n: u64) -> String {
    indicatif::HumanBytes(n).to_string()
}
