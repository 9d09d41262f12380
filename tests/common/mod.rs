//! Shared helpers for integration tests: run the built `pitr` binary, find the
//! peer data, make temp dirs.
#![allow(dead_code)]

pub mod spare;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// True when the environment variable `CI` is set (to anything but empty, `0` or
/// `false`). In CI everything a test needs must be present: a missing resource fails
/// the test instead of skipping it (`.ci/run` sets `CI`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Writes `line` straight to the process's stderr. The test harness captures only
/// `print!`/`eprint!`, so this shows in `cargo test` output even for a passing test.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// `test` cannot run: says `SKIPPED <test>: <reason>` where cargo shows it, and
/// fails the test under CI, where the shared test data and tools must be present.
pub fn skip(test: &str, reason: &str) {
    if in_ci() {
        panic!("{test} cannot run, and CI is set so it must: {reason}");
    }
    say(&format!("SKIPPED {test}: {reason}"));
}

/// `test` needs something CI never has (a real server, real MongoDB binaries):
/// says `SKIPPED <test>: <reason>` where cargo shows it, also under CI.
pub fn skip_optional(test: &str, reason: &str) {
    say(&format!("SKIPPED {test}: {reason}"));
}

/// The shared folder beside the repository (`../shared`: real peer data and the
/// real mongo-tools), or `PITR_SHARED_DIR`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("PITR_SHARED_DIR").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
    }
}

/// The peer-data folder (`../shared/peer-data/mongo-tools`), or `None` after
/// [`skip`]ping the calling test (which fails it under CI).
pub fn peer_dir(test: &str) -> Option<PathBuf> {
    let dir = shared_dir().join("peer-data/mongo-tools");
    if dir.is_dir() {
        Some(dir)
    } else {
        skip(
            test,
            &format!(
                "peer data not found at {} (it lives beside the repository in the development workspace, not in clones)",
                dir.display()
            ),
        );
        None
    }
}

/// The releases of the real mongo-tools in `../shared/tools`, newest first.
pub const MONGO_TOOLS_RELEASES: [&str; 2] = ["100.18.0", "100.11.0"];

/// Directories holding the REAL `mongorestore`, `mongodump` and `bsondump`:
/// `PITR_MONGO_TOOLS_BIN` (one directory) when set, else each release found in
/// `../shared/tools/mongo-tools-<release>`. Empty after [`skip`]ping `test` (which
/// fails it under CI) when there are none.
pub fn mongo_tools_dirs(test: &str) -> Vec<PathBuf> {
    if let Some(d) = std::env::var_os("PITR_MONGO_TOOLS_BIN").filter(|v| !v.is_empty()) {
        let d = PathBuf::from(d);
        if d.join("mongorestore").is_file() {
            return vec![d];
        }
        skip(
            test,
            &format!("PITR_MONGO_TOOLS_BIN={} holds no mongorestore", d.display()),
        );
        return Vec::new();
    }
    let dirs: Vec<PathBuf> = MONGO_TOOLS_RELEASES
        .iter()
        .map(|r| shared_dir().join(format!("tools/mongo-tools-{r}")))
        .filter(|d| d.join("mongorestore").is_file())
        .collect();
    if dirs.is_empty() {
        skip(
            test,
            &format!(
                "the real mongo-tools are not in {} (set PITR_MONGO_TOOLS_BIN to a directory with mongorestore and mongodump)",
                shared_dir().join("tools").display()
            ),
        );
    }
    dirs
}

pub fn pitr_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pitr"))
}

/// Runs `pitr args...` in `cwd` and returns its output.
pub fn pitr_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(pitr_bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("PITR_URI")
        .output()
        .expect("run pitr")
}

pub fn pitr(args: &[&str]) -> Output {
    pitr_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally, not by a signal")
}

/// Converts a file of extended-JSON lines (one oplog entry per line) to BSON bytes.
pub fn extjson_lines_to_bson(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path).expect("read extended JSON");
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        let b = bson::Bson::try_from(v).expect("extended JSON");
        let doc = b.as_document().expect("a document per line").clone();
        out.extend(bson::to_vec(&doc).expect("encode"));
    }
    out
}

/// Builds the test stand-ins (`tests/standins`: mongod, mongorestore, mongodump)
/// once per test process and returns the directory holding them
/// (`target/<profile>`).
///
/// The build runs with the environment of whoever started `cargo test`: cargo and
/// rustup add variables for test processes (`CARGO_PKG_*`, `LD_LIBRARY_PATH`,
/// `RUSTUP_TOOLCHAIN`, ...) that change build fingerprints, and with them the
/// stand-ins and the whole driver would be recompiled inside the test (minutes)
/// instead of found up to date (`.ci/run` builds them first).
pub fn standin_bin_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            // target/<profile>/deps/<test>-HASH -> target/<profile>
            let exe = std::env::current_exe().expect("test binary path");
            let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
            let target_dir = profile_dir.parent().unwrap().to_path_buf();
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args([
                "build",
                "--quiet",
                "-p",
                "pitr-standins",
                "--bins",
                "--target-dir",
            ])
            .arg(&target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
            for (k, _) in std::env::vars_os() {
                let k = k.to_string_lossy().into_owned();
                let injected =
                    (k.starts_with("CARGO") && k != "CARGO_HOME" && k != "CARGO_TARGET_DIR")
                        || matches!(
                            k.as_str(),
                            "LD_LIBRARY_PATH"
                                | "RUSTUP_TOOLCHAIN"
                                | "RUSTUP_TOOLCHAIN_SOURCE"
                                | "RUST_RECURSION_COUNT"
                        );
                if injected {
                    cmd.env_remove(&k);
                }
            }
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let started = std::time::Instant::now();
            let out = cmd.output().expect("run cargo to build the stand-ins");
            assert!(
                out.status.success(),
                "building the stand-ins failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!(
                "stand-ins (test doubles, not MongoDB) ready in {} ({:.1} s)",
                profile_dir.display(),
                started.elapsed().as_secs_f64()
            );
            profile_dir
        })
        .clone()
}

/// Writes a fresh incident scenario (backup/, oplog.bson, truth.json) into `out`
/// with the test-only fixture generator (`tests/fixturegen`).
pub fn generate_incident(out: &Path, seed: u64) {
    pitr_fixturegen::generate(&pitr_fixturegen::Options {
        out: out.to_path_buf(),
        seed,
        scenario: pitr_fixturegen::Scenario::Incident,
        target_bytes: pitr_fixturegen::DEFAULT_BENCH_BYTES,
        start: pitr_fixturegen::DEFAULT_START_SECS,
        mix: pitr_fixturegen::mix::Mix::Current,
    })
    .unwrap_or_else(|e| panic!("generating seed {seed} into {}: {e}", out.display()));
}

/// Every file under `dir`, at any depth, by its path relative to `dir`, with its
/// bytes (in path order). Empty when `dir` does not exist: a caller that expects
/// files says so (`assert!(!files.is_empty())`).
pub fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_str().unwrap().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Copies the directory tree `from` to `to` (created), files and subdirectories.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}
