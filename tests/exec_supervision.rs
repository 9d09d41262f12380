//! Child supervision (`pitr::exec`) against ordinary programs standing in for the
//! MongoDB tools: `sh -c` scripts that fail, crash, flood stderr, ignore SIGTERM or
//! never listen, and fake `mongod` scripts. Every test checks that it leaves no
//! process and no temporary directory behind.
//!
//! Two "programs" are this test binary itself, re-executed with a helper role in
//! `PITR_EXEC_TEST_HELPER` (see `helper_fake_mongod` and `helper_signal_target`): a
//! fake mongod that really listens, and a pitr-like process that installs the signal
//! handlers, so SIGINT can be sent to it and never to the test runner.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use pitr::error::Hint;
use pitr::exec::binaries::{Origin, Tool, ToolSearch};
use pitr::exec::child::{ChildError, Command, Outcome};
use pitr::exec::output::Stream;
use pitr::exec::pgroup::is_running;
use pitr::exec::signals::{listen_for_signals, Cancel};
use pitr::exec::spare::{ProbeError, SpareError, SpareMongod, SpareOptions, StartStage};

const HELPER_VAR: &str = "PITR_EXEC_TEST_HELPER";

// ---------------------------------------------------------------------------------
// helpers

fn sh(script: &str) -> Command {
    Command::new("/bin/sh").args(["-c", script])
}

/// Waits until `pid` is gone (zombies count as gone); false if it outlives `within`.
fn gone_within(pid: u32, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if !is_running(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    !is_running(pid)
}

fn assert_gone(pid: u32, what: &str) {
    assert!(
        gone_within(pid, Duration::from_secs(3)),
        "{what} (pid {pid}) is still running"
    );
}

/// Collects output lines through the progress callback.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<(Stream, String)>>>);

impl Lines {
    fn attach(&self, cmd: Command) -> Command {
        let me = self.clone();
        cmd.on_line(move |s, l| me.0.lock().unwrap().push((s, l.to_string())))
    }
    fn all(&self) -> Vec<(Stream, String)> {
        self.0.lock().unwrap().clone()
    }
    /// The pid in a `grandchild N` line, waiting up to 5 s for it.
    fn grandchild(&self) -> u32 {
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Some(p) = self.all().iter().find_map(|(_, l)| {
                l.strip_prefix("grandchild ")
                    .map(|p| p.trim().parse().unwrap())
            }) {
                return p;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no `grandchild N` line in {:?}", self.all());
    }
}

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn dir_entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

fn this_test_binary() -> PathBuf {
    std::env::current_exe().unwrap()
}

// ---------------------------------------------------------------------------------
// plain children

#[tokio::test(flavor = "multi_thread")]
async fn output_goes_to_log_callback_and_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("step.log");
    let lines = Lines::default();
    let cmd = lines.attach(
        sh("echo out-1; echo err-1 >&2; echo out-2; printf 'no newline' >&2").log_file(&log),
    );
    let f = cmd.run(&Cancel::new()).await.unwrap();
    assert_eq!(f.outcome, Outcome::Success);
    assert_eq!(f.stdout_tail, ["out-1", "out-2"]);
    assert_eq!(f.stderr_tail, ["err-1", "no newline"]);
    let all = lines.all();
    assert!(all.contains(&(Stream::Stdout, "out-2".into())));
    assert!(all.contains(&(Stream::Stderr, "no newline".into())));
    let text = std::fs::read_to_string(&log).unwrap();
    for l in ["out-1", "err-1", "out-2", "no newline"] {
        assert!(
            text.lines().any(|x| x == l),
            "{l} missing from log:\n{text}"
        );
    }
    assert!(
        text.starts_with("# pitr: ") && text.contains("starting `/bin/sh -c"),
        "{text}"
    );
    assert!(
        text.trim_end()
            .lines()
            .last()
            .unwrap()
            .contains("succeeded after"),
        "{text}"
    );
    assert_eq!(f.log.as_deref(), Some(log.as_path()));
    assert_gone(f.pid, "the child");
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_code_3_is_an_error_with_the_stderr_tail() {
    let err = sh("echo 'connecting to 127.0.0.1'; echo 'Failed: restore error: boom' >&2; exit 3")
        .run(&Cancel::new())
        .await
        .unwrap_err();
    assert_eq!(err.outcome(), Some(&Outcome::Failed { code: 3 }));
    let msg = err.to_string();
    assert!(msg.contains("failed with exit code 3"), "{msg}");
    assert!(msg.contains("| Failed: restore error: boom"), "{msg}");
    assert!(
        !msg.contains("| connecting to"),
        "stdout is not shown when stderr has lines: {msg}"
    );
    assert!(err.hint().is_some());
    assert_gone(err.finished().unwrap().pid, "the child");
}

#[tokio::test(flavor = "multi_thread")]
async fn death_by_signal_is_reported_as_128_plus_n() {
    let err = sh("echo about to crash >&2; kill -SEGV $$")
        .run(&Cancel::new())
        .await
        .unwrap_err();
    let o = err.outcome().unwrap();
    assert_eq!(
        o,
        &Outcome::Signaled {
            signal: libc::SIGSEGV
        }
    );
    assert_eq!(o.shell_code(), Some(139));
    let msg = err.to_string();
    assert!(
        msg.contains("killed by signal 11 (SIGSEGV), exit status 139"),
        "{msg}"
    );
    assert!(msg.contains("| about to crash"), "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_megabyte_on_each_stream_does_not_deadlock() {
    let bytes = Arc::new(AtomicUsize::new(0));
    let b = bytes.clone();
    let script = "yes 'a line of progress output, long enough to fill a pipe quickly' | head -c 1048576 >&2; echo >&2; \
                  yes 'and some on stdout too' | head -c 1048576; echo last words >&2";
    let f = sh(script)
        .timeout(Duration::from_secs(30))
        .on_line(move |_, l| {
            b.fetch_add(l.len() + 1, Ordering::Relaxed);
        })
        .run(&Cancel::new())
        .await
        .unwrap();
    assert_eq!(f.outcome, Outcome::Success);
    // 2 MiB plus the last line; `head -c` may cut a line, whose newline we add back.
    let n = bytes.load(Ordering::Relaxed);
    assert!((2 * 1048576..2 * 1048576 + 64).contains(&n), "{n}");
    assert_eq!(f.stderr_tail.len(), 40);
    assert_eq!(f.stderr_tail.last().unwrap(), "last words");
}

/// `stdin_from`: the child reads every byte pitr feeds it; a feed that fails on
/// pitr's side fails a child that exited 0 (it read a cut input); a child that
/// stops reading early is reported by its own exit, and the feed does not hang.
#[tokio::test(flavor = "multi_thread")]
async fn stdin_is_fed_whole_and_a_failed_feed_fails_the_child() {
    let d = tempfile::tempdir().unwrap();
    let count = d.path().join("count");
    let script = format!("wc -c > {}", count.display());
    let block = vec![7u8; 1 << 20];
    let b = block.clone();
    let f = sh(&script)
        .stdin_from(Box::new(move |w| {
            for _ in 0..3 {
                w.write_all(&b)?;
            }
            Ok(())
        }))
        .run(&Cancel::new())
        .await
        .expect("fed and counted");
    assert!(f.is_success());
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "3145728");

    let b = block.clone();
    let e = sh(&script)
        .stdin_from(Box::new(move |w| {
            w.write_all(&b)?;
            Err(std::io::Error::other("the object store went away"))
        }))
        .run(&Cancel::new())
        .await
        .expect_err("a cut feed must fail the child");
    let ChildError::Exited(f) = &e else {
        panic!("{e:?}")
    };
    assert!(
        matches!(&f.outcome, Outcome::InputFailed { error } if error.contains("went away")),
        "{:?}",
        f.outcome
    );
    assert!(e.to_string().contains("did not get all its input"), "{e}");
    assert!(e.hint().unwrap().contains("incomplete"), "{:?}", e.hint());

    let started = Instant::now();
    let e = sh("exit 3")
        .stdin_from(Box::new(move |w| {
            for _ in 0..1000 {
                w.write_all(&block)?;
            }
            Ok(())
        }))
        .run(&Cancel::new())
        .await
        .expect_err("exit 3");
    let ChildError::Exited(f) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(f.outcome, Outcome::Failed { code: 3 });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_sends_sigterm_then_sigkill_when_term_is_ignored() {
    let lines = Lines::default();
    let cmd = lines.attach(
        sh("trap '' TERM; sleep 30 & echo \"grandchild $!\"; wait; wait")
            .timeout(Duration::from_millis(300))
            .grace(Duration::from_millis(400)),
    );
    let started = Instant::now();
    let running = cmd.spawn().unwrap();
    let pid = running.pid();
    let f = running.wait(&Cancel::new()).await;
    let took = started.elapsed();
    assert_eq!(
        f.outcome,
        Outcome::TimedOut {
            after: Duration::from_millis(300)
        }
    );
    assert!(f.killed, "TERM was ignored, so SIGKILL was needed");
    assert!(
        took >= Duration::from_millis(700),
        "grace not honoured: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_gone(pid, "the shell");
    assert_gone(lines.grandchild(), "the grandchild sleep");
    let msg = f.into_result().unwrap_err().to_string();
    assert!(msg.contains("did not finish within 300ms"), "{msg}");
    assert!(msg.contains("then SIGKILL"), "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_stops_the_whole_group_with_sigterm_alone_when_honoured() {
    let lines = Lines::default();
    let cmd = lines.attach(
        sh("sleep 30 & echo \"grandchild $!\"; wait")
            .timeout(Duration::from_millis(300))
            .grace(Duration::from_secs(20)),
    );
    let started = Instant::now();
    let f = cmd.spawn().unwrap().wait(&Cancel::new()).await;
    assert!(matches!(f.outcome, Outcome::TimedOut { .. }));
    assert!(!f.killed);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_gone(f.pid, "the shell");
    assert_gone(lines.grandchild(), "the grandchild sleep");
}

#[tokio::test(flavor = "multi_thread")]
async fn leftovers_of_a_leader_that_exited_are_killed_and_do_not_hold_the_pipes() {
    // The background sleep keeps stdout open; without killing it we would wait 30 s
    // for EOF, and leave it behind as an orphan.
    let lines = Lines::default();
    let started = Instant::now();
    let f = lines
        .attach(sh("sleep 30 & echo \"grandchild $!\"; exit 0"))
        .run(&Cancel::new())
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(f.is_success());
    assert_gone(lines.grandchild(), "the orphaned sleep");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_stops_the_child_gracefully() {
    let cancel = Cancel::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
    });
    let err = sh("sleep 30")
        .grace(Duration::from_secs(20))
        .run(&cancel)
        .await
        .unwrap_err();
    assert!(err.is_cancelled());
    let f = err.finished().unwrap();
    assert!(!f.killed);
    assert!(f.duration < Duration::from_secs(5));
    assert!(err.hint().is_none());
    assert!(
        err.to_string()
            .contains("was interrupted; stopped it with SIGTERM"),
        "{err}"
    );
    assert_gone(f.pid, "the child");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_cancel_escalates_to_sigkill_at_once() {
    let cancel = Cancel::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.escalate();
    });
    let lines = Lines::default();
    let cmd = lines.attach(
        sh("trap '' TERM; sleep 30 & echo \"grandchild $!\"; wait; wait")
            .grace(Duration::from_secs(30)),
    );
    let f = cmd.spawn().unwrap().wait(&cancel).await;
    assert_eq!(f.outcome, Outcome::Cancelled);
    assert!(f.killed);
    assert!(
        f.duration < Duration::from_secs(5),
        "did not escalate: {:?}",
        f.duration
    );
    assert_gone(f.pid, "the shell");
    assert_gone(lines.grandchild(), "the grandchild sleep");
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_running_child_kills_its_group() {
    let lines = Lines::default();
    let running = lines
        .attach(sh("sleep 30 & echo \"grandchild $!\"; wait"))
        .spawn()
        .unwrap();
    let pid = running.pid();
    let grandchild = lines.grandchild();
    assert!(is_running(pid) && is_running(grandchild));
    drop(running);
    assert_gone(pid, "the shell");
    assert_gone(grandchild, "the grandchild sleep");
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_never_reach_messages_or_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("restore.log");
    let err = sh("echo 'Failed: auth error' >&2; exit 1")
        .args([
            "--username",
            "admin",
            "--password",
            "hunter2",
            "--uri=mongodb://admin:s3cret@db.example:27017/",
        ])
        .log_file(&log)
        .run(&Cancel::new())
        .await
        .unwrap_err();
    let msg = format!("{err} {}", std::fs::read_to_string(&log).unwrap());
    assert!(!msg.contains("hunter2") && !msg.contains("s3cret"), "{msg}");
    assert!(msg.contains("--password '<redacted>'"), "{msg}");
    assert!(
        msg.contains("mongodb://admin:<redacted>@db.example:27017/"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_program_is_a_spawn_error_with_a_hint() {
    let err = Command::new("/nonexistent/bin/mongorestore")
        .run(&Cancel::new())
        .await
        .unwrap_err();
    assert!(matches!(err, ChildError::Spawn { .. }));
    assert_eq!(
        err.to_string(),
        "cannot start `/nonexistent/bin/mongorestore`"
    );
    assert!(err.hint().unwrap().contains("exists"));

    let tmp = tempfile::tempdir().unwrap();
    let not_exec = tmp.path().join("mongodump");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let err = Command::new(&not_exec)
        .run(&Cancel::new())
        .await
        .unwrap_err();
    assert!(err.hint().unwrap().contains("chmod +x"), "{:?}", err.hint());
}

// ---------------------------------------------------------------------------------
// Ctrl-C: a separate process installs the handlers and receives real signals

/// Not a test: the pitr-like process for the signal tests (runs only when
/// `PITR_EXEC_TEST_HELPER=signal`). Prints `READY <grandchild pid>` once its child runs
/// and `OUTCOME ...` when the child is gone.
#[test]
#[ignore = "a helper process run by the Ctrl-C tests, not a test"]
fn helper_signal_target() {
    assert_eq!(
        std::env::var(HELPER_VAR).as_deref(),
        Ok("signal"),
        "run by run_signal_target only"
    );
    let grace_ms: u64 = std::env::var("PITR_EXEC_TEST_GRACE_MS")
        .unwrap()
        .parse()
        .unwrap();
    let ignore_term = std::env::var("PITR_EXEC_TEST_IGNORE_TERM").is_ok();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let cancel = Cancel::new();
        listen_for_signals(
            &cancel,
            Some(Box::new(|sig, level| println!("SIGNAL {sig} {level:?}"))),
        )
        .unwrap();
        let script = if ignore_term {
            "trap '' TERM; sleep 30 & echo \"grandchild $!\"; wait; wait"
        } else {
            "sleep 30 & echo \"grandchild $!\"; wait"
        };
        let running = sh(script)
            .grace(Duration::from_millis(grace_ms))
            .on_line(|_, l| {
                if let Some(p) = l.strip_prefix("grandchild ") {
                    println!("READY {p}");
                }
            })
            .spawn()
            .unwrap();
        println!("CHILD {}", running.pid());
        let f = running.wait(&cancel).await;
        println!(
            "OUTCOME {:?} killed={} exit_code={:?}",
            f.outcome,
            f.killed,
            cancel.exit_code()
        );
    });
    std::process::exit(0);
}

struct SignalRun {
    lines: Vec<String>,
    took: Duration,
}

/// Runs the helper, sends it `sigints` SIGINTs 300 ms apart once its child runs,
/// and returns its output.
fn run_signal_target(grace_ms: u64, ignore_term: bool, sigints: usize) -> SignalRun {
    let mut cmd = std::process::Command::new(this_test_binary());
    cmd.args([
        "--exact",
        "helper_signal_target",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(HELPER_VAR, "signal")
    .env("PITR_EXEC_TEST_GRACE_MS", grace_ms.to_string())
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped());
    if ignore_term {
        cmd.env("PITR_EXEC_TEST_IGNORE_TERM", "1");
    }
    let mut helper = cmd.spawn().unwrap();
    let (tx, rx) = mpsc::channel();
    let out = helper.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut lines = Vec::new();
    let next = |lines: &mut Vec<String>| -> String {
        let l = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("helper went quiet");
        lines.push(l.clone());
        l
    };
    while !next(&mut lines).starts_with("READY ") {}
    let started = Instant::now();
    for i in 0..sigints {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(300));
        }
        // SAFETY: kill(2) to the helper we spawned.
        assert_eq!(unsafe { libc::kill(helper.id() as i32, libc::SIGINT) }, 0);
    }
    while !next(&mut lines).starts_with("OUTCOME ") {}
    let took = started.elapsed();
    assert!(helper.wait().unwrap().success());
    for l in &lines {
        if let Some(p) = l.strip_prefix("READY ").or(l.strip_prefix("CHILD ")) {
            assert_gone(p.parse().unwrap(), l);
        }
    }
    SignalRun { lines, took }
}

#[test]
fn ctrl_c_stops_the_child_group_gracefully() {
    let r = run_signal_target(20_000, false, 1);
    let outcome = r.lines.last().unwrap();
    assert_eq!(
        outcome,
        "OUTCOME Cancelled killed=false exit_code=Some(130)"
    );
    assert!(
        r.lines.contains(&"SIGNAL 2 Stop".to_string()),
        "{:?}",
        r.lines
    );
    assert!(r.took < Duration::from_secs(10), "{:?}", r.took);
}

#[test]
fn a_second_ctrl_c_kills_at_once() {
    // TERM is ignored and the grace period is long: only the escalation ends it soon.
    let r = run_signal_target(30_000, true, 2);
    assert_eq!(
        r.lines.last().unwrap(),
        "OUTCOME Cancelled killed=true exit_code=Some(130)"
    );
    assert!(
        r.lines.contains(&"SIGNAL 2 Kill".to_string()),
        "{:?}",
        r.lines
    );
    assert!(r.took < Duration::from_secs(10), "{:?}", r.took);
}

// ---------------------------------------------------------------------------------
// finding binaries

#[tokio::test(flavor = "multi_thread")]
async fn find_reads_versions_and_spots_standins() {
    let tmp = tempfile::tempdir().unwrap();
    let [flag, env, path] = ["flag", "env", "path"].map(|d| tmp.path().join(d));
    for d in [&flag, &env, &path] {
        std::fs::create_dir(d).unwrap();
    }
    write_script(&flag.join("mongod"), "echo 'db version v7.0.14'\necho 'Build Info: {'\necho '    \"version\": \"7.0.14\"'\necho '}'\n");
    write_script(&env.join("mongod"), "echo 'db version v6.0.1'\n");
    write_script(
        &env.join("mongorestore"),
        "echo 'mongorestore version: 100.9.4'\necho 'git version: 8fa3'\necho 'Go version: go1.21.8'\necho '(pitr stand-in: not the real MongoDB tool)'\n",
    );
    write_script(
        &path.join("mongodump"),
        "echo \"$0: error while loading shared libraries: libcrypto.so.3: cannot open shared object file\" >&2\nexit 127\n",
    );
    let search = ToolSearch {
        flag_dir: Some(flag.clone()),
        env_dir: Some(env.clone()),
        path: Some(path.clone().into_os_string()),
    };
    let cancel = Cancel::new();
    let d = search.find(Tool::Mongod, &cancel).await.unwrap();
    assert_eq!(
        (d.origin, d.version.as_deref(), d.is_standin),
        (Origin::Flag, Some("7.0.14"), false)
    );
    assert_eq!(d.path, flag.join("mongod"));
    assert_eq!(d.version_line, "db version v7.0.14");
    let r = search.find(Tool::Mongorestore, &cancel).await.unwrap();
    assert_eq!(
        (r.origin, r.version.as_deref(), r.is_standin),
        (Origin::EnvVar, Some("100.9.4"), true)
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["tool"], "mongorestore");
    assert_eq!(json["is_standin"], true);

    let e = search.find(Tool::Mongodump, &cancel).await.unwrap_err();
    let msg = format!("{e}");
    assert!(
        msg.contains("`mongodump --version` did not succeed"),
        "{msg}"
    );
    let f = pitr::error::Failure::from(e);
    let text = f.render();
    assert!(text.contains("failed with exit code 127"), "{text}");
    assert!(text.contains("libcrypto.so.3"), "{text}");
}

// ---------------------------------------------------------------------------------
// the spare mongod, with fake mongod scripts

/// Not a test: a fake mongod that listens (runs only when
/// `PITR_EXEC_TEST_HELPER=listener`). Binds `--port`, or logs "Address already in
/// use" and exits 48 like the real one; then logs "Waiting for connections" and
/// accepts until killed.
#[test]
#[ignore = "a helper process run by the spare mongod tests, not a test"]
fn helper_fake_mongod() {
    assert_eq!(
        std::env::var(HELPER_VAR).as_deref(),
        Ok("listener"),
        "run by fake_mongod scripts only"
    );
    let args: Vec<String> = std::env::var("PITR_EXEC_TEST_ARGS")
        .unwrap()
        .split(' ')
        .map(String::from)
        .collect();
    let value = |name: &str| {
        let i = args.iter().position(|a| a == name).unwrap();
        args[i + 1].clone()
    };
    let port: u16 = value("--port").parse().unwrap();
    let log = value("--logpath");
    let append = |line: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    };
    let listener = match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => {
            append(&format!("{{\"s\":\"E\",\"msg\":\"Failed to set up listener\",\"attr\":{{\"error\":\"{e}\"}}}}"));
            std::process::exit(48);
        }
    };
    append(&format!(
        "{{\"s\":\"I\",\"msg\":\"Waiting for connections\",\"attr\":{{\"port\":{port}}}}}"
    ));
    for conn in listener.incoming() {
        drop(conn);
    }
}

/// Writes a fake `mongod` into `dir`: `body` runs with `$log`, `$port` and `$dbpath`
/// set from its arguments; `become_listener` at the end turns it into a real listener.
fn fake_mongod(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("mongod");
    let script = format!(
        r#"args="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --logpath) log="$2"; shift;;
    --port) port="$2"; shift;;
    --dbpath) dbpath="$2"; shift;;
  esac
  shift
done
become_listener() {{
  exec env {HELPER_VAR}=listener PITR_EXEC_TEST_ARGS="$args" '{exe}' --exact helper_fake_mongod --ignored --nocapture --test-threads=1
}}
{body}
"#,
        exe = this_test_binary().display()
    );
    write_script(&path, &script);
    path
}

struct Fixture {
    tmp: tempfile::TempDir,
    parent: PathBuf,
    bin: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().join("spares");
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&parent).unwrap();
        std::fs::create_dir(&bin).unwrap();
        Fixture { tmp, parent, bin }
    }

    fn opts(&self, mongod_body: &str) -> SpareOptions {
        let mut o = SpareOptions::new(fake_mongod(&self.bin, mongod_body));
        o.parent_dir = Some(self.parent.clone());
        o.grace = Duration::from_millis(500);
        o.start_timeout = Duration::from_secs(20);
        o
    }

    fn file(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    fn pid_from(&self, name: &str) -> u32 {
        std::fs::read_to_string(self.file(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn assert_no_spare_dirs(&self) {
        assert_eq!(
            dir_entries(&self.parent),
            Vec::<PathBuf>::new(),
            "a spare directory was left behind"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn spare_that_exits_at_once_reports_code_and_log_tail() {
    let fx = Fixture::new();
    let opts = fx.opts(
        r#"echo '{"s":"I","msg":"MongoDB starting"}' >> "$log"
echo '{"s":"F","msg":"Fatal assertion","attr":{"msgid":28595,"error":"13: Permission denied"}}' >> "$log"
echo "boom on stderr" >&2
exit 1"#,
    );
    let err = SpareMongod::start(opts, &Cancel::new())
        .await
        .err()
        .expect("start must fail");
    let SpareError::ExitedAtStart { outcome, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(outcome, &Outcome::Failed { code: 1 });
    let msg = err.to_string();
    assert!(
        msg.contains("failed with exit code 1 during startup"),
        "{msg}"
    );
    assert!(msg.contains("Fatal assertion"), "{msg}");
    assert!(msg.contains("| boom on stderr"), "{msg}");
    assert!(err.hint().unwrap().contains("--keep"));
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn spare_that_never_listens_times_out_and_is_killed() {
    let fx = Fixture::new();
    let mut opts = fx.opts(&format!(
        "echo $$ > '{}'\ntrap '' TERM\necho '{{\"msg\":\"starting\"}}' >> \"$log\"\nexec sleep 30",
        fx.file("pid").display()
    ));
    opts.start_timeout = Duration::from_millis(800);
    opts.grace = Duration::from_millis(300);
    let started = Instant::now();
    let err = SpareMongod::start(opts, &Cancel::new())
        .await
        .err()
        .expect("start must time out");
    assert!(started.elapsed() < Duration::from_secs(5));
    let SpareError::StartTimeout { stage, killed, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(stage, &StartStage::NotListening);
    assert!(
        killed,
        "TERM was ignored (inherited by sleep), so SIGKILL was needed"
    );
    let msg = err.to_string();
    assert!(msg.contains("did not become ready within 800ms"), "{msg}");
    assert!(
        msg.contains("never said it was waiting for connections"),
        "{msg}"
    );
    assert!(msg.contains("| {\"msg\":\"starting\"}"), "{msg}");
    assert_gone(fx.pid_from("pid"), "the fake mongod");
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn spare_retries_on_another_port_when_its_port_was_taken() {
    let fx = Fixture::new();
    let count = fx.file("count");
    let opts = fx.opts(&format!(
        r#"echo x >> '{count}'
if [ "$(wc -l < '{count}')" -lt 2 ]; then
  echo '{{"s":"E","c":"NETWORK","msg":"Failed to set up listener","attr":{{"error":{{"code":9001,"codeName":"SocketException","errmsg":"Address already in use"}}}}}}' >> "$log"
  exit 48
fi
echo $$ > '{pid}'
become_listener"#,
        count = count.display(),
        pid = fx.file("pid").display()
    ));
    let cancel = Cancel::new();
    let spare = SpareMongod::start(opts, &cancel).await.unwrap();
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
    let pid = fx.pid_from("pid");
    assert_eq!(spare.pid(), pid);
    assert!(is_running(pid));
    assert!(std::net::TcpStream::connect(("127.0.0.1", spare.port())).is_ok());
    // Both attempts are in the one log.
    let log = std::fs::read_to_string(spare.log_path()).unwrap();
    assert!(log.contains("Address already in use") && log.contains("Waiting for connections"));
    let stopped = spare.shutdown(&cancel).await.unwrap();
    assert!(stopped.clean(), "{:?}", stopped.finished);
    assert_gone(pid, "the fake mongod");
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn spare_gives_up_when_every_port_is_taken() {
    let fx = Fixture::new();
    let mut opts =
        fx.opts(r#"echo "Failed to set up listener: Address already in use" >> "$log"; exit 48"#);
    opts.port_attempts = 3;
    let err = SpareMongod::start(opts, &Cancel::new())
        .await
        .err()
        .unwrap();
    let SpareError::PortInUse { ports, fixed, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((ports.len(), *fixed), (3, false));
    assert!(
        err.to_string()
            .contains("was taken before mongod could bind it"),
        "{err}"
    );
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn spare_on_a_fixed_port_that_is_in_use_fails_clearly() {
    let fx = Fixture::new();
    let held = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = held.local_addr().unwrap().port();
    let mut opts = fx.opts(&format!(
        "echo ran > '{}'; become_listener",
        fx.file("ran").display()
    ));
    opts.port = Some(port);
    let err = SpareMongod::start(opts, &Cancel::new())
        .await
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        format!("port {port} on 127.0.0.1 is already in use")
    );
    assert!(err.hint().unwrap().contains("ss -ltnp"));
    assert!(
        !fx.file("ran").exists(),
        "mongod must not be started on a taken port"
    );
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn spare_waits_for_the_probe_then_shuts_down_cleanly() {
    let fx = Fixture::new();
    let mut opts = fx.opts(&format!(
        r#"printf '%s\n' "$args" > '{argv}'
become_listener"#,
        argv = fx.file("argv").display()
    ));
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    opts.probe = Some(Arc::new(move |target| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            assert!(target
                .uri
                .ends_with(&format!(":{}/?directConnection=true", target.port)));
            if n < 2 {
                Err::<(), ProbeError>("not master and secondaryOk=false".into())
            } else {
                Ok(())
            }
        })
    }));
    let cancel = Cancel::new();
    let spare = SpareMongod::start(opts, &cancel).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        spare.uri(),
        format!(
            "mongodb://127.0.0.1:{}/?directConnection=true",
            spare.port()
        )
    );
    assert!(spare.dbpath().is_dir() && spare.dbpath().starts_with(spare.dir()));
    assert!(spare.dir().starts_with(&fx.parent));
    let argv = std::fs::read_to_string(fx.file("argv")).unwrap();
    assert!(
        argv.contains(&format!(
            "--port {} --bind_ip 127.0.0.1 --dbpath {}",
            spare.port(),
            spare.dbpath().display()
        )),
        "{argv}"
    );
    assert!(
        argv.contains("--setParameter ttlMonitorEnabled=false --nounixsocket"),
        "{argv}"
    );
    assert!(!argv.contains("--fork"));
    let pid = spare.pid();
    let dir = spare.dir().to_path_buf();
    let stopped = spare.shutdown(&cancel).await.unwrap();
    assert!(stopped.clean() && stopped.kept_dir.is_none());
    assert_gone(pid, "the fake mongod");
    assert!(!dir.exists());
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_spare_kills_it_and_removes_its_directory() {
    let fx = Fixture::new();
    let spare = SpareMongod::start(fx.opts("become_listener"), &Cancel::new())
        .await
        .unwrap();
    let pid = spare.pid();
    drop(spare);
    // Drop reaps synchronously: gone at once, not eventually.
    assert!(!is_running(pid));
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn keep_leaves_the_directory_and_detach_leaves_it_running() {
    let fx = Fixture::new();
    let cancel = Cancel::new();
    let mut opts = fx.opts("become_listener");
    opts.keep = true;

    let spare = SpareMongod::start(opts.clone(), &cancel).await.unwrap();
    let stopped = spare.shutdown(&cancel).await.unwrap();
    let kept = stopped.kept_dir.expect("kept");
    assert!(kept.join("db").is_dir() && kept.join("mongod.log").is_file());
    std::fs::remove_dir_all(&kept).unwrap();

    let spare = SpareMongod::start(opts, &cancel).await.unwrap();
    let conn = spare.detach();
    assert!(is_running(conn.pid));
    assert!(std::net::TcpStream::connect(("127.0.0.1", conn.port)).is_ok());
    assert!(conn.to_string().contains(&format!("kill {}", conn.pid)));
    // SAFETY: killing the spare this test started.
    unsafe { libc::kill(conn.pid as i32, libc::SIGKILL) };
    assert_gone(conn.pid, "the detached fake mongod");
    assert!(conn.dbpath.is_dir());
    std::fs::remove_dir_all(&conn.dir).unwrap();
    fx.assert_no_spare_dirs();
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_spare_start_cleans_up() {
    let fx = Fixture::new();
    let opts = fx.opts(&format!(
        "echo $$ > '{}'; exec sleep 30",
        fx.file("pid").display()
    ));
    let cancel = Cancel::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.cancel();
    });
    let err = SpareMongod::start(opts, &cancel).await.err().unwrap();
    assert!(matches!(err, SpareError::Cancelled), "{err:?}");
    assert_gone(fx.pid_from("pid"), "the fake mongod");
    fx.assert_no_spare_dirs();
}

// ---------------------------------------------------------------------------------
// the stand-in mongod built by tests/standins

#[tokio::test(flavor = "multi_thread")]
async fn spare_with_the_standin_mongod() {
    let bin = common::standin_bin_dir();
    let search = ToolSearch {
        flag_dir: Some(bin.clone()),
        ..Default::default()
    };
    let cancel = Cancel::new();
    let mongod = search.find(Tool::Mongod, &cancel).await.unwrap();
    assert_eq!(mongod.version.as_deref(), Some("7.0.14"));
    assert!(
        mongod.is_standin,
        "the stand-in says so in --version: {mongod:?}"
    );

    let parent = tempfile::tempdir().unwrap();
    let mut opts = SpareOptions::new(&mongod.path);
    opts.parent_dir = Some(parent.path().to_path_buf());
    opts.grace = Duration::from_secs(5);
    let spare = SpareMongod::start(opts, &cancel).await.unwrap();
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(spare.dbpath().join("standin-argv.json")).unwrap(),
    )
    .unwrap();
    let argv: Vec<&str> = rec["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let pos = argv
        .iter()
        .position(|a| *a == "--bind_ip")
        .expect("--bind_ip passed");
    assert_eq!(argv[pos + 1], "127.0.0.1");
    assert!(
        argv.windows(2)
            .any(|w| w == ["--setParameter", "ttlMonitorEnabled=false"]),
        "{argv:?}"
    );
    assert_eq!(rec["port"], spare.port());
    assert!(!argv.contains(&"--fork"));

    let pid = spare.pid();
    let stopped = spare.shutdown(&cancel).await.unwrap();
    assert_eq!(
        stopped.finished.outcome,
        Outcome::Success,
        "the stand-in exits 0 on SIGTERM"
    );
    assert!(stopped.clean());
    assert_gone(pid, "the stand-in mongod");
    assert_eq!(dir_entries(parent.path()), Vec::<PathBuf>::new());
}
