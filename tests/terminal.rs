//! pitr on a terminal: the real binary with its stderr on a pseudo-terminal (the
//! other tests run it on pipes, where progress is log lines). What an engineer sees
//! there: a spinner while a source is slow to open, a byte counter while a pipe is
//! read, the replay's phases with the opening spinner among them; and none of the
//! log lines meant for files (`pitr: ...: waiting, ...`). The screen is the raw
//! bytes pitr wrote to the terminal, escape sequences removed.

mod common;
mod storage_common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use pitr::storage::Location;
use storage_common::{upload_tree, S3Server, ACCESS_KEY, SECRET_KEY};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident");

/// What a run left: how it ended, its stdout, and what it drew on the terminal.
struct Seen {
    status: ExitStatus,
    stdout: String,
    screen: String,
}

/// Runs `cmd` with its stderr on a new pseudo-terminal (120 columns), its stdout
/// piped; `during` runs once it started. Fails after 60 s.
fn on_a_terminal(mut cmd: Command, during: impl FnOnce()) -> Seen {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors it opened; each is owned once below.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both are open descriptors nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave))
        .env("TERM", "xterm-256color");
    let mut child = cmd.spawn().expect("run pitr");
    // Only the child holds the terminal's other end now: its exit ends the reads.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(master);
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                // Linux: EIO once the last holder of the other end closed it.
                Err(_) => break,
            }
        }
        got
    });
    during();
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            child.kill().unwrap();
            panic!("pitr did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let raw = reader.join().unwrap();
    Seen {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        screen: plain(&String::from_utf8_lossy(&raw)),
    }
}

/// The terminal's bytes without escape sequences, one line per redraw.
fn plain(raw: &str) -> String {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ parameters, then a final letter.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
                out.push('\n');
            }
            '\r' => out.push('\n'),
            c => out.push(c),
        }
    }
    out
}

fn pitr(cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(common::pitr_bin());
    c.args(args).current_dir(cwd);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PITR_") {
            c.env_remove(&k);
        }
    }
    c
}

/// A FIFO in `dir` and a thread that writes the fixture's oplog into it: the first
/// `head` bytes after `before`, the rest after `between`.
fn slow_fifo(dir: &Path, before: Duration, head: usize, between: Duration) -> PathBuf {
    let fifo = dir.join("oplog.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo");
    let path = fifo.clone();
    std::thread::spawn(move || {
        use std::io::Write;
        let bytes = std::fs::read(Path::new(FIXTURE).join("oplog.bson")).unwrap();
        std::thread::sleep(before);
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(&bytes[..head]).unwrap();
        w.flush().unwrap();
        std::thread::sleep(between);
        w.write_all(&bytes[head..]).unwrap();
    });
    fifo
}

fn check_found_the_drop(seen: &Seen) {
    assert!(seen.status.success(), "{}\n{}", seen.stdout, seen.screen);
    assert!(
        seen.stdout.contains("1795223165:1") && seen.stdout.contains("shop.orders"),
        "{}",
        seen.stdout
    );
    assert!(
        !seen.screen.contains("pitr: "),
        "log lines on a terminal: {}",
        seen.screen
    );
}

/// find-drop from a FIFO with no writer for 2.5 s: a spinner says what pitr waits
/// for and for how long (`opening PATH, 1s so far`); no log line.
#[test]
fn a_source_slow_to_open_shows_a_spinner() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = slow_fifo(dir.path(), Duration::from_millis(2500), 0, Duration::ZERO);
    let name = fifo.display().to_string();
    let seen = on_a_terminal(pitr(dir.path(), &["find-drop", &name]), || {});
    check_found_the_drop(&seen);
    assert!(
        seen.screen.contains(&format!("opening {name}, 1s so far")),
        "{}",
        seen.screen
    );
}

/// find-drop from a FIFO that stalls after its first 200 KB for 2.5 s: the scan
/// shows a spinner with the bytes read, no bar (a pipe's length is unknown).
/// Regression: a pipe's length was taken as 0, and a terminal showed nothing.
#[test]
fn a_pipe_read_slowly_shows_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = slow_fifo(
        dir.path(),
        Duration::ZERO,
        200_000,
        Duration::from_millis(2500),
    );
    let name = fifo.display().to_string();
    let seen = on_a_terminal(pitr(dir.path(), &["find-drop", &name]), || {});
    check_found_the_drop(&seen);
    let reading: Vec<&str> = seen
        .screen
        .lines()
        .filter(|l| l.contains(&format!("reading {name}")))
        .collect();
    assert!(reading.len() >= 3, "{}", seen.screen);
    assert!(reading.iter().all(|l| !l.contains('[')), "{reading:?}");
    assert!(reading.iter().all(|l| l.contains(" B/s")), "{reading:?}");
}

/// A replay whose oplog is in a bucket whose server is down for 1.8 s after the
/// start (`--no-space-check`: the plan's opening of the oplog is the first request):
/// the opening spinner is drawn among the replay's phases, then the phases go on,
/// and the run restores as ever.
#[test]
fn a_replay_waiting_for_its_oplog_shows_the_spinner_among_its_phases() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::copy(
        Path::new(FIXTURE).join("oplog.bson"),
        local.join("oplog.bson"),
    )
    .unwrap();
    let mut server = S3Server::start(&dir.path().join("s3"), &["pitr-incident"]);
    upload_tree(
        &server.storage(),
        &local,
        &Location::parse("s3://pitr-incident/incident").unwrap(),
    );
    let oplog = "s3://pitr-incident/incident/oplog.bson";
    let backup = format!("{FIXTURE}/backup");
    let mut cmd = pitr(
        dir.path(),
        &[
            "replay",
            "--backup",
            &backup,
            "--oplog",
            oplog,
            "--until",
            "auto",
            "--out",
            "restored",
            "--no-space-check",
        ],
    );
    server.point(&mut cmd, ACCESS_KEY, SECRET_KEY);
    // Refused connections are retried quickly (10 tries took 2.3 s): enough tries
    // to outlast the outage.
    cmd.env("PITR_STORAGE_RETRIES", "40")
        .env("PITR_STORAGE_RETRY_SECS", "60");
    server.kill();
    let seen = on_a_terminal(cmd, || {
        std::thread::sleep(Duration::from_millis(1800));
        server.restart();
    });
    assert!(seen.status.success(), "{}\n{}", seen.stdout, seen.screen);
    assert!(
        seen.screen.contains(&format!("opening {oplog}, 1s so far")),
        "{}",
        seen.screen
    );
    let phases = ["reading the backup", "applying the oplog slice"];
    for p in phases {
        assert!(seen.screen.contains(p), "{p}: {}", seen.screen);
    }
    assert!(
        !seen.screen.contains(": waiting, "),
        "a log line on a terminal: {}",
        seen.screen
    );
    assert!(dir.path().join("restored").is_dir(), "{}", seen.stdout);
}
