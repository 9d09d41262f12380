//! Ctrl-C and SIGTERM during `pitr replay --engine embedded`, at every phase
//! (issue 17, item 10). Regression: a Ctrl-C late in a replay (while hashing,
//! writing the dump or the destroyed documents) went unnoticed until the
//! destroyed-documents dump, which then failed with exit 2 about 2 s after the
//! signal, leaving a complete `out/` without `out-destroyed/`; a rerun was then
//! refused because `--out` existed.
//!
//! Each run is the real `pitr` binary on a scenario whose incident drops a large
//! collection; the signal is sent when stderr shows the phase running
//! (`PITR_PROGRESS_INTERVAL=0.05s` makes the progress lines come often;
//! `PITR_TEST_SLOW_DOCUMENTS` slows the loops over documents, which otherwise take
//! milliseconds). pitr must exit 128+n within a second, and leave nothing: no
//! `--out`, no `<out>-destroyed`, no temporary name; a rerun with the same `--out`
//! must then work.

mod common;
mod drop_scenario;
mod replay_common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use drop_scenario::{drop_scenario, DropScenario};

/// How long pitr may take to exit after the signal.
const LATENCY: Duration = Duration::from_secs(1);

/// Where to interrupt: the first stderr line for which this holds.
struct Point {
    name: &'static str,
    trigger: fn(&str) -> bool,
}

/// A progress line of `phase` while it runs (`... (35%), ...`), not its last line.
fn running(line: &str, phase: &str) -> bool {
    line.starts_with(&format!("pitr: {phase}: ")) && line.contains("%)")
}

/// (The dump is written while the other cores hash: one phase, one point.)
const POINTS: [Point; 4] = [
    Point {
        name: "early (as the run starts)",
        trigger: |l| l.starts_with("pitr replay (engine: embedded)"),
    },
    Point {
        name: "applying the oplog",
        trigger: |l| running(l, "applying the oplog slice"),
    },
    Point {
        name: "hashing and writing the dump",
        trigger: |l| running(l, "hashing and writing the dump"),
    },
    Point {
        name: "writing the destroyed documents",
        trigger: |l| running(l, "writing the destroyed documents"),
    },
];

struct Interrupted {
    code: Option<i32>,
    latency: Duration,
    stderr: String,
    stdout: String,
}

/// Runs the replay in `cwd` and sends `signal` once a stderr line satisfies `trigger`.
fn interrupt(sc: &DropScenario, cwd: &Path, workdir: &str, p: &Point, signal: i32) -> Interrupted {
    let backup = sc.backup();
    let oplog = sc.oplog();
    let mut child = replay_common::pitr_cmd(
        cwd,
        &[
            "replay",
            "--backup",
            backup.to_str().unwrap(),
            "--oplog",
            oplog.to_str().unwrap(),
            "--until",
            &sc.until,
            // The scenario's drop comes after the generator's planted incidents: replayed on purpose.
            "--accept-incidents",
            "--workdir",
            workdir,
            "--out",
            "out",
        ],
        &[
            ("PITR_PROGRESS_INTERVAL", "0.05s"),
            ("PITR_TEST_SLOW_DOCUMENTS", "25ms"),
            // Collections no entry touches copied beside the dump whatever their
            // size: the copies and their staging directory are interrupted too.
            ("PITR_COLD_COPY", "1"),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for l in BufReader::new(err).lines() {
            let l = l.unwrap_or_default();
            all.push_str(&l);
            all.push('\n');
            let _ = tx.send(l);
        }
        all
    });
    let mut out = child.stdout.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(l) if (p.trigger)(&l) => break,
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = child.wait();
                panic!(
                    "{}: pitr ended before the point was reached:\n{}",
                    p.name,
                    reader.join().unwrap()
                );
            }
        }
        assert!(Instant::now() < deadline, "{}: never reached", p.name);
    }
    // SAFETY: a plain kill(2) of our own child.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{}: pitr still running 30 s after the signal", p.name);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let latency = sent.elapsed();
    Interrupted {
        code: status.code(),
        latency,
        stderr: reader.join().unwrap(),
        stdout: out_reader.join().unwrap(),
    }
}

/// Names in `dir` that start with a dot (pitr's temporary names).
fn hidden(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

fn assert_nothing_left(cwd: &Path, workdir: &str, what: &str) {
    assert!(!cwd.join("out").exists(), "{what}: out/ was left");
    assert!(
        !cwd.join("out-destroyed").exists(),
        "{what}: out-destroyed/ was left"
    );
    assert_eq!(
        hidden(cwd),
        Vec::<String>::new(),
        "{what}: temporary names beside out/"
    );
    let work = cwd.join(workdir);
    assert_eq!(
        hidden(&work),
        Vec::<String>::new(),
        "{what}: temporary names in the work dir"
    );
    assert_eq!(
        hidden(&work.join("plan")),
        Vec::<String>::new(),
        "{what}: temporary names in the plan"
    );
}

#[test]
fn ctrl_c_at_any_phase_exits_130_at_once_and_leaves_nothing_then_a_rerun_works() {
    let sc = drop_scenario(12 << 20, 40_000, 100);
    // A collection the oplog never touches, left in its file and copied ahead.
    replay_common::add_untouched(&sc.backup());
    let cwd = tempfile::tempdir().unwrap();
    for (k, p) in POINTS.iter().enumerate() {
        let workdir = format!("work-{k}");
        let r = interrupt(&sc, cwd.path(), &workdir, p, libc::SIGINT);
        let show = format!(
            "{} (exit {:?} after {:?})\n--- stdout\n{}--- stderr\n{}",
            p.name, r.code, r.latency, r.stdout, r.stderr
        );
        common::say(&format!(
            "Ctrl-C {}: exit {:?} {} ms after the signal",
            p.name,
            r.code,
            r.latency.as_millis()
        ));
        assert_eq!(r.code, Some(130), "{show}");
        assert!(r.latency < LATENCY, "{show}");
        assert!(
            r.stderr
                .contains("error: interrupted by Ctrl-C (SIGINT): nothing was written to --out"),
            "{show}"
        );
        assert_nothing_left(cwd.path(), &workdir, p.name);
        // The phase it stopped in says so.
        if k > 0 {
            assert!(r.stderr.contains(": interrupted at "), "{show}");
        }
        // When the report was written, it says the run was interrupted.
        let report = cwd.path().join(&workdir).join("report.json");
        if report.exists() {
            let j = replay_common::read_json(&report);
            assert_eq!(
                (
                    j["result"].as_str(),
                    j["exit_code"].as_u64(),
                    j["out"].is_null()
                ),
                (Some("interrupted"), Some(130), true),
                "{show}"
            );
        }
    }
    // The same --out again, to the end: both dumps, complete.
    let o = replay_common::run_pitr(
        cwd.path(),
        &[
            "replay",
            "--backup",
            sc.backup().to_str().unwrap(),
            "--oplog",
            sc.oplog().to_str().unwrap(),
            "--until",
            &sc.until,
            // The scenario's drop comes after the generator's planted incidents: replayed on purpose.
            "--accept-incidents",
            "--workdir",
            "work-rerun",
            "--out",
            "out",
            "--json",
        ],
        &[("PITR_COLD_COPY", "1")],
    );
    assert_eq!(replay_common::code(&o), 0, "{}", replay_common::show(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["destroyed"]["documents"].as_u64(), Some(sc.documents));
    // Collections left in the backup's files, whose copies the runs above made
    // ahead of the dump (and left nothing of when interrupted).
    let cold = j["engine_stats"]["collections_from_backup_files"].as_u64();
    assert!(cold.is_some_and(|n| n >= 1), "cold collections: {cold:?}");
    assert_eq!(hidden(cwd.path()), Vec::<String>::new());
    assert_eq!(
        replay_common::bson_docs(&cwd.path().join("out-destroyed/bulk/filler.bson")) as u64,
        sc.documents
    );
    assert!(cwd.path().join("out/shop").is_dir());
}

#[test]
fn sigterm_while_hashing_exits_143_and_leaves_nothing() {
    let sc = drop_scenario(1 << 20, 40_000, 100);
    let cwd = tempfile::tempdir().unwrap();
    let r = interrupt(&sc, cwd.path(), "work", &POINTS[2], libc::SIGTERM);
    let show = format!(
        "exit {:?} after {:?}\n--- stdout\n{}--- stderr\n{}",
        r.code, r.latency, r.stdout, r.stderr
    );
    assert_eq!(r.code, Some(143), "{show}");
    assert!(r.latency < LATENCY, "{show}");
    assert!(r.stderr.contains("error: interrupted by SIGTERM"), "{show}");
    assert_nothing_left(cwd.path(), "work", "SIGTERM while hashing");
}
