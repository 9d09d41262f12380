//! Shared by `replay_e2e.rs` and `replay_faults.rs`: which MongoDB programs to run
//! (the stand-ins built from `tests/standins`, or real ones from `PITR_E2E_BIN`),
//! running `pitr` with a clean environment, and the "nothing left behind" checks.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use pitr::exec::pgroup::is_running;

/// Set by `scripts/e2e-real.sh`: a directory with real `mongod`, `mongorestore`,
/// `mongodump`; the end-to-end tests then run them instead of the stand-ins.
pub const REAL_BIN_VAR: &str = "PITR_E2E_BIN";

pub const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident");

/// Which programs a test runs.
#[derive(Clone, Debug)]
pub struct Bins {
    pub dir: PathBuf,
    /// The mongod is pitr's stand-in.
    pub standin: bool,
    /// mongorestore and mongodump are pitr's stand-ins too (fault injection).
    pub standin_tools: bool,
    /// What ran, for messages: `stand-in mongod + real mongo-tools 100.18.0`.
    pub label: String,
    /// Keeps a directory of links alive as long as the set is used.
    _links: Option<std::sync::Arc<tempfile::TempDir>>,
}

/// `PITR_E2E_BIN` when set (real MongoDB programs), else the stand-ins (built once
/// per test process). Prints which, so test output says what ran.
pub fn bins(test: &str) -> Bins {
    let b = match real_bin(test) {
        Some(b) => b,
        None => standins(),
    };
    eprintln!("{test}: binaries: {} from {}", b.label, b.dir.display());
    b
}

fn real_bin(test: &str) -> Option<Bins> {
    let dir = PathBuf::from(std::env::var_os(REAL_BIN_VAR).filter(|v| !v.is_empty())?);
    // Whatever the variable says, the programs say what they are.
    let version = Command::new(dir.join("mongod"))
        .arg("--version")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{test}: {REAL_BIN_VAR}: cannot run {}/mongod: {e}",
                dir.display()
            )
        });
    let text = String::from_utf8_lossy(&version.stdout).to_lowercase();
    let standin = text.contains("pitr stand-in");
    Some(Bins {
        dir,
        standin,
        standin_tools: standin,
        label: if standin {
            "pitr's STAND-INS (not real MongoDB)".into()
        } else {
            "REAL MongoDB programs".into()
        },
        _links: None,
    })
}

/// The stand-ins, whatever `PITR_E2E_BIN` says (fault injection needs them),
/// built once per test process by `tests/common`.
pub fn standins() -> Bins {
    Bins {
        dir: crate::common::standin_bin_dir(),
        standin: true,
        standin_tools: true,
        label: "pitr's STAND-INS (not real MongoDB)".into(),
        _links: None,
    }
}

/// The program sets the end-to-end tests run, one per mongo-tools release: with
/// `PITR_E2E_BIN`, the real MongoDB programs there; otherwise pitr's stand-in
/// `mongod` with the REAL `mongorestore` and `mongodump` of every release found
/// (`tests/common` `mongo_tools_dirs`: `PITR_MONGO_TOOLS_BIN`, else
/// `../shared/tools`). None found: the test is skipped, saying so (and fails under
/// CI). Prints which programs each set is.
pub fn tool_sets(test: &str) -> Vec<Bins> {
    if let Some(b) = real_bin(test) {
        eprintln!("{test}: binaries: {} from {}", b.label, b.dir.display());
        return vec![b];
    }
    let mongod = crate::common::standin_bin_dir().join("mongod");
    crate::common::mongo_tools_dirs(test)
        .into_iter()
        .map(|tools| {
            let links = tempfile::Builder::new()
                .prefix("pitr-e2e-bin-")
                .tempdir()
                .expect("temp dir for the program links");
            for (name, target) in [
                ("mongod", mongod.clone()),
                ("mongorestore", tools.join("mongorestore")),
                ("mongodump", tools.join("mongodump")),
            ] {
                std::os::unix::fs::symlink(&target, links.path().join(name))
                    .expect("link a program");
            }
            let version = Command::new(tools.join("mongorestore"))
                .arg("--version")
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
                .unwrap_or_default();
            let b = Bins {
                dir: links.path().to_path_buf(),
                standin: true,
                standin_tools: false,
                label: format!(
                    "pitr's STAND-IN mongod (not MongoDB) + REAL mongo-tools ({version}, {})",
                    tools.display()
                ),
                _links: Some(std::sync::Arc::new(links)),
            };
            eprintln!("{test}: binaries: {}", b.label);
            b
        })
        .collect()
}

/// `pitr` in `cwd` with a clean environment (no inherited PITR_* knobs) plus `env`.
pub fn pitr_cmd(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pitr"));
    c.args(args).current_dir(cwd);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PITR_") {
            c.env_remove(&k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

pub fn run_pitr(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    pitr_cmd(cwd, args, env).output().expect("run pitr")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status
        .code()
        .expect("pitr exited normally, not by a signal")
}

pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    )
}

pub fn read_json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every `(pid N)` in a text.
pub fn pids_in(text: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for part in text.split("(pid ").skip(1) {
        let n: String = part.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let Ok(p) = n.parse() {
            out.insert(p);
        }
    }
    out
}

/// Every pid in a replay report: the steps' children and the spare.
pub fn pids_in_report(report: &serde_json::Value) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for st in report["steps"].as_array().into_iter().flatten() {
        for p in st["pids"].as_array().into_iter().flatten() {
            out.insert(p.as_u64().unwrap() as u32);
        }
    }
    if let Some(p) = report["spare"]["pid"].as_u64() {
        out.insert(p as u32);
    }
    out
}

/// Live processes whose command line mentions `needle` (a test's unique work dir).
pub fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmd.contains(needle) && is_running(pid) {
            out.push((pid, cmd));
        }
    }
    out
}

/// No process of the run is alive: the given pids, and anything mentioning `dir`.
pub fn assert_nothing_running(pids: &BTreeSet<u32>, dir: &Path) {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| is_running(*p)).collect();
        let mention = processes_mentioning(&dir.display().to_string());
        if alive.is_empty() && mention.is_empty() {
            return;
        }
        if Instant::now() > end {
            panic!("left behind: pids {alive:?}, processes {mention:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// No spare directory in the work dir and no partial dump beside `out_parent`.
pub fn assert_no_temp_dirs(workdir: &Path, out_parent: Option<&Path>) {
    let names = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let spare: Vec<String> = names(workdir)
        .into_iter()
        .filter(|n| n.starts_with("pitr-spare-"))
        .collect();
    assert!(
        spare.is_empty(),
        "spare dirs left in {}: {spare:?}",
        workdir.display()
    );
    if let Some(p) = out_parent {
        let partial: Vec<String> = names(p)
            .into_iter()
            .filter(|n| n.starts_with(".pitr-dump-"))
            .collect();
        assert!(
            partial.is_empty(),
            "partial dumps left in {}: {partial:?}",
            p.display()
        );
    }
}

/// Documents in a `.bson` file.
pub fn bson_docs(path: &Path) -> usize {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut n = 0;
    let mut at = 0;
    while at + 4 <= b.len() {
        let len = i32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        assert!(
            len >= 5 && at + len <= b.len(),
            "bad BSON in {}",
            path.display()
        );
        at += len;
        n += 1;
    }
    n
}

/// The verify rows of a report or a `pitr verify --json`: ns → (found, documents).
pub fn verify_rows(v: &serde_json::Value) -> Vec<(String, bool, Option<u64>, String)> {
    v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["ns"].as_str().unwrap().to_string(),
                r["found"].as_bool().unwrap(),
                r["documents"].as_u64(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The step of `kind` (`start_spare`, `restore_backup`, `replay_oplog`, `verify`,
/// `dump`, `shutdown`) in a replay report.
pub fn step<'a>(report: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} step in {report}"))
}

/// Adds to a generated backup a database the oplog never touches: `cold.ordered`
/// (its file in `_id` order: left in the backup's file) and `cold.shuffled` (out of
/// order: loaded). Returns the ordered file's bytes.
pub fn add_untouched(backup: &Path) -> Vec<u8> {
    let dir = backup.join("cold");
    std::fs::create_dir_all(&dir).unwrap();
    let doc = |i: i64| {
        let id = if i % 3 == 0 {
            bson::Bson::Double(i as f64 + 0.5)
        } else {
            bson::Bson::Int64(i)
        };
        bson::to_vec(&bson::doc! { "_id": id, "n": i, "pad": "p".repeat((i % 50) as usize) })
            .unwrap()
    };
    let ordered: Vec<u8> = (0..4000).flat_map(doc).collect();
    let shuffled: Vec<u8> = (0..4000).map(|i| (i * 7919) % 4000).flat_map(doc).collect();
    for (name, bytes) in [("ordered", &ordered), ("shuffled", &shuffled)] {
        std::fs::write(dir.join(format!("{name}.bson")), bytes).unwrap();
        std::fs::write(
            dir.join(format!("{name}.metadata.json")),
            format!(
                r#"{{"indexes":[{{"v":{{"$numberInt":"2"}},"key":{{"_id":{{"$numberInt":"1"}}}},"name":"_id_"}}],"collectionName":"{name}","type":"collection"}}"#
            ),
        )
        .unwrap();
    }
    ordered
}
