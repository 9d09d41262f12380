//! Progress of `pitr replay --engine embedded` on stderr when it is not a terminal
//! (a log, CI): each long phase says now and then how far it is, and each phase
//! ends with one line saying what it did and how long it took (issue 17, item 13).
//! Regression: applying the oplog and hashing, about 89% of an embedded replay,
//! showed nothing at all; only the plan's scans had a bar, and only on a terminal.
//!
//! `PITR_PROGRESS_INTERVAL` (default 10s) sets how often a running phase logs a
//! line; the tests make it short so that a run of a few seconds shows them.

mod common;
mod drop_scenario;
mod replay_common;

use std::path::Path;

use replay_common::{code, run_pitr, show, stderr, FIXTURE};

/// Every phase of an embedded replay that stops at a drop, in order.
/// (The dump is written while the other cores hash: one phase, counting the
/// documents hashed plus those written. The slice is read (not kept: no
/// `--keep-slice`) while the backup's documents load and its own oplog applies, on
/// another thread: see [`ALONGSIDE`].)
const PHASES: [&str; 9] = [
    "reading the backup",
    "reading the backup's oplog",
    "reading the oplog",
    "reading the slice",
    "loading the backup's documents",
    "applying the backup's oplog",
    "applying the oplog slice",
    "hashing and writing the dump",
    "writing the destroyed documents",
];

/// The phases that run while the slice is read (`src/plan/build/streamed.rs`):
/// after the oplog's reading, before the slice's apply, in this order, but in any
/// order with the slice's writing.
const ALONGSIDE: [&str; 4] = [
    "reading the oplog",
    "loading the backup's documents",
    "applying the backup's oplog",
    "applying the oplog slice",
];

fn replay(
    cwd: &Path,
    scenario: &Path,
    until: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let backup = scenario.join("backup");
    let oplog = scenario.join("oplog.bson");
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
    ];
    args.extend_from_slice(extra);
    run_pitr(cwd, &args, env)
}

/// The lines of `err` that report phase `what` (`pitr: <what>: ...`).
fn lines_of<'a>(err: &'a str, what: &str) -> Vec<&'a str> {
    let prefix = format!("pitr: {what}: ");
    err.lines().filter(|l| l.starts_with(&prefix)).collect()
}

#[test]
fn a_short_run_logs_one_line_per_phase_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let o = replay(tmp.path(), Path::new(FIXTURE), "auto", &[], &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let err = stderr(&o);
    let sequential: Vec<&str> = PHASES
        .into_iter()
        .filter(|p| !ALONGSIDE[1..3].contains(p))
        .collect();
    for chain in [&sequential[..], &ALONGSIDE[..]] {
        let mut at = 0;
        for &what in chain {
            let lines = lines_of(&err, what);
            // No line while it runs (it takes less than the 10 s interval): one at its end.
            assert_eq!(lines.len(), 1, "{what}: {lines:?}\n{err}");
            let l = lines[0];
            assert!(
                l.contains(" in ") && !l.contains("interrupted") && !l.contains("stopped"),
                "{l}"
            );
            let pos = err.find(l).unwrap();
            assert!(pos >= at, "{what} is out of order:\n{err}");
            at = pos;
        }
    }
    assert!(
        err.contains("pitr: writing the destroyed documents: 113 documents in "),
        "{err}"
    );
    // Written as a person writes: no "1 documents", no "in 0 s" or "in 0.00s".
    for bad in [" 1 documents", " 1 entries", "in 0 s", "in 0.00s", "in 0s"] {
        assert!(!err.contains(bad), "{bad:?} in:\n{err}");
    }
    // Data stays on stdout: no progress there.
    assert!(
        !replay_common::stdout(&o).contains("pitr: "),
        "{}",
        show(&o)
    );
}

#[test]
fn a_longer_run_logs_each_running_phase_with_done_total_and_rate() {
    let sc = drop_scenario::drop_scenario(8 << 20, 20_000, 100);
    let tmp = tempfile::tempdir().unwrap();
    let o = replay(
        tmp.path(),
        sc.dir.path(),
        &sc.until,
        &[],
        &[
            ("PITR_PROGRESS_INTERVAL", "0.1s"),
            // Applying, hashing and writing the dumps take milliseconds at this
            // size on a fast machine: slowed down to a few tenths of a second,
            // they log while they run there too.
            ("PITR_TEST_SLOW_DOCUMENTS", "20ms"),
        ],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let err = stderr(&o);
    for what in [
        "applying the oplog slice",
        "hashing and writing the dump",
        "writing the destroyed documents",
    ] {
        let lines = lines_of(&err, what);
        let running: Vec<&&str> = lines.iter().filter(|l| l.contains("%)")).collect();
        assert!(!running.is_empty(), "{what}: no line while it ran:\n{err}");
        // `<done> of <total> (<n>%), <rate>/s[, about <t> left]`
        for l in &running {
            assert!(l.contains(" of ") && l.contains("/s"), "{l}");
        }
        // The last line is the end of the phase.
        assert!(lines.last().unwrap().contains(" in "), "{what}: {lines:?}");
    }
    assert!(
        err.contains(&format!(
            "pitr: writing the destroyed documents: {} documents in ",
            common_count(sc.documents)
        )),
        "{err}"
    );
}

/// `20,000`.
fn common_count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (k, c) in s.chars().enumerate() {
        if k > 0 && (s.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A phase with no total cut short by an error (here the backup's reading, by a
/// damaged document) ends with where it stopped, then the error; not with a line
/// that reads as if it had finished. Regression: "reading the backup: 863
/// documents in 0.01s" came just before "is corrupt".
#[test]
fn a_phase_cut_short_by_an_error_says_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("scenario");
    common::copy_dir(Path::new(FIXTURE), &scenario);
    // An element of an unknown type (0x20) in a document with no `_id` before it.
    let orders = scenario.join("backup/shop/orders.bson");
    let mut bytes = std::fs::read(&orders).unwrap();
    bytes.extend_from_slice(&[10, 0, 0, 0, 0x20, b'a', 0, 0, 0, 0]);
    std::fs::write(&orders, bytes).unwrap();
    let o = replay(tmp.path(), &scenario, "auto", &[], &[]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let err = stderr(&o);
    let lines = lines_of(&err, "reading the backup");
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(": stopped at ") && lines[0].contains(" documents "),
        "{err}"
    );
    let (at, corrupt) = (err.find(lines[0]).unwrap(), err.find("is corrupt at byte"));
    assert!(corrupt.is_some_and(|c| c > at), "{err}");
}

#[test]
fn json_output_has_no_progress_and_a_bad_interval_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let o = replay(tmp.path(), Path::new(FIXTURE), "auto", &["--json"], &[]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let err = stderr(&o);
    assert!(!err.contains("pitr: hashing"), "{err}");
    serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("stdout is the report");

    let tmp = tempfile::tempdir().unwrap();
    let o = replay(
        tmp.path(),
        Path::new(FIXTURE),
        "auto",
        &[],
        &[("PITR_PROGRESS_INTERVAL", "often")],
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning: PITR_PROGRESS_INTERVAL=`often`: not a duration")
            && err.contains("progress lines every 10s"),
        "{err}"
    );
}
