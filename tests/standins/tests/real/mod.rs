//! Helpers for running the REAL mongo-tools (mongorestore, mongodump, bsondump)
//! against the stand-in mongod: finding them, finding the peer data, running them
//! with a timeout, writing dump directories, and reading what the server holds.
//!
//! Where they are looked for:
//! - `PITR_MONGO_TOOLS_BIN`: one folder holding mongorestore/mongodump/bsondump; only
//!   that release is tested;
//! - otherwise each of `../shared/tools/mongo-tools-100.18.0` and
//!   `../shared/tools/mongo-tools-100.11.0` relative to the repository root that
//!   exists (a git worktree one level deeper, `WORKSPACE/wt/NAME`, finds them at
//!   `../../shared`);
//! - peer data: `../shared/peer-data/mongo-tools` by the same rule.
//!
//! When nothing is found the test prints `SKIPPED <test>: <reason>` and passes,
//! unless `CI` is set: then it fails.

#![allow(dead_code)]

use crate::common::{self, Mongod};
use bson::{doc, Bson, Document};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// How long one tool run may take before the test fails.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `../shared/<rel>` beside the repository (or beside the worktree's parent).
fn shared(rel: &str) -> Vec<PathBuf> {
    let root = repo_root();
    vec![
        root.join("../shared").join(rel),
        root.join("../../shared").join(rel),
    ]
}

fn skip(test: &str, reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {reason} (CI is set, so this test may not skip)");
    }
    eprintln!("SKIPPED {test}: {reason}");
}

/// One release of the real tools.
#[derive(Debug, Clone)]
pub struct Tools {
    pub dir: PathBuf,
    /// `100.18.0`
    pub version: String,
    pub ver: (u32, u32, u32),
}

impl Tools {
    fn probe(dir: &Path) -> Option<Tools> {
        let out = Command::new(dir.join("mongorestore"))
            .arg("--version")
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let version = text
            .lines()
            .find_map(|l| l.strip_prefix("mongorestore version: "))?
            .trim()
            .to_string();
        let parts: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
        let ver = (*parts.first()?, *parts.get(1)?, *parts.get(2)?);
        Some(Tools {
            dir: dir.to_path_buf(),
            version,
            ver,
        })
    }

    /// 100.12.0 and later send `bypassEmptyTsReplacement` (TOOLS-3540).
    pub fn knows_empty_timestamps(&self) -> bool {
        self.ver >= (100, 12, 0)
    }

    /// Log lines quote namespaces in backticks from 100.12 on (`%#q`).
    pub fn q(&self, s: &str) -> String {
        if self.ver >= (100, 12, 0) {
            format!("`{s}`")
        } else {
            s.to_string()
        }
    }

    pub fn bin(&self, tool: &str) -> PathBuf {
        self.dir.join(tool)
    }

    /// Run a tool with a timeout; `stdin` is written and closed.
    pub fn run(&self, tool: &str, args: &[&str], stdin: Option<Vec<u8>>) -> Output {
        run_with_timeout(
            Command::new(self.bin(tool)).args(args),
            stdin,
            &format!("{tool} {}", self.version),
        )
    }

    fn conn(m: &Mongod) -> Vec<String> {
        vec![
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            m.port.to_string(),
        ]
    }

    pub fn restore(&self, m: &Mongod, args: &[&str]) -> Output {
        self.restore_stdin(m, args, None)
    }

    pub fn restore_stdin(&self, m: &Mongod, args: &[&str], stdin: Option<Vec<u8>>) -> Output {
        let mut all = Self::conn(m);
        all.extend(args.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        self.run("mongorestore", &all, stdin)
    }

    pub fn dump(&self, m: &Mongod, args: &[&str]) -> Output {
        let mut all = Self::conn(m);
        all.extend(args.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        self.run("mongodump", &all, None)
    }
}

/// Run a command to completion or fail after [`TOOL_TIMEOUT`] (killing it).
pub fn run_with_timeout(cmd: &mut Command, stdin: Option<Vec<u8>>, what: &str) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
    }
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(TOOL_TIMEOUT) {
        Ok(out) => out.expect("tool output"),
        Err(_) => {
            // SAFETY: killing the child started above.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("{what} did not finish within {TOOL_TIMEOUT:?}");
        }
    }
}

/// The releases to test, or an empty list after printing why the test skips.
pub fn tools_or_skip(test: &str) -> Vec<Tools> {
    if let Some(dir) = std::env::var_os("PITR_MONGO_TOOLS_BIN") {
        let dir = PathBuf::from(dir);
        return match Tools::probe(&dir) {
            Some(t) => vec![t],
            None => panic!(
                "{test}: PITR_MONGO_TOOLS_BIN={} holds no runnable mongorestore",
                dir.display()
            ),
        };
    }
    let mut found = Vec::new();
    for rel in ["tools/mongo-tools-100.18.0", "tools/mongo-tools-100.11.0"] {
        if let Some(t) = shared(rel).iter().find_map(|d| Tools::probe(d)) {
            found.push(t);
        }
    }
    if found.is_empty() {
        skip(
            test,
            "no real mongo-tools: set PITR_MONGO_TOOLS_BIN or provide ../shared/tools/mongo-tools-100.{18,11}.0 beside the repository",
        );
    }
    found
}

/// `../shared/peer-data/mongo-tools`, or `None` after printing why the test skips.
pub fn peer_or_skip(test: &str) -> Option<PathBuf> {
    let found = shared("peer-data/mongo-tools")
        .into_iter()
        .find(|d| d.is_dir());
    if found.is_none() {
        skip(
            test,
            "peer data not found at ../shared/peer-data/mongo-tools beside the repository",
        );
    }
    found
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Assert the exit code, showing the tool's output when it differs.
#[track_caller]
pub fn expect_exit(o: &Output, code: i32, what: &str) {
    assert_eq!(o.status.code(), Some(code), "{what}:\n{}", text(o));
}

/// mongorestore's last line: `N document(s) restored successfully. M document(s)
/// failed to restore.`; returns (N, M).
#[track_caller]
pub fn restore_counts(o: &Output) -> (u64, u64) {
    let t = text(o);
    let line = t
        .lines()
        .rev()
        .find(|l| l.contains("document(s) restored successfully"))
        .unwrap_or_else(|| panic!("no count line in:\n{t}"));
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums.len(), 2, "count line `{line}`");
    (nums[0], nums[1])
}

/// A fresh stand-in mongod in `mode` playing `version` (None = default).
pub fn mongod(mode: &str, version: Option<&str>) -> Mongod {
    let mut env = vec![("PITR_STANDIN_MODE", mode)];
    if let Some(v) = version {
        env.push(("PITR_STANDIN_VERSION", v));
    }
    common::start_mongod(&["--slowms", "-1"], &env)
}

/// Write `dir/db/coll.bson` (and `.metadata.json` when given).
pub fn write_coll(dir: &Path, db: &str, coll: &str, docs: &[Document], meta: Option<&str>) {
    std::fs::create_dir_all(dir.join(db)).unwrap();
    common::write_bson(&dir.join(db).join(format!("{coll}.bson")), docs);
    if let Some(m) = meta {
        std::fs::write(dir.join(db).join(format!("{coll}.metadata.json")), m).unwrap();
    }
}

pub async fn docs(c: &mongodb::Client, db: &str, coll: &str) -> Vec<Document> {
    let mut cur = c
        .database(db)
        .collection::<Document>(coll)
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .expect("find");
    let mut out = Vec::new();
    while cur.advance().await.expect("advance") {
        out.push(cur.deserialize_current().expect("doc"));
    }
    out
}

pub async fn count(c: &mongodb::Client, db: &str, coll: &str) -> u64 {
    c.database(db)
        .collection::<Document>(coll)
        .count_documents(doc! {})
        .await
        .expect("count")
}

pub async fn db_hash(c: &mongodb::Client, db: &str) -> Document {
    c.database(db)
        .run_command(doc! {"dbHash": 1})
        .await
        .expect("dbHash")
}

/// `listCollections` entries by name.
pub async fn collections(c: &mongodb::Client, db: &str) -> Vec<Document> {
    let reply = c
        .database(db)
        .run_command(doc! {"listCollections": 1, "cursor": {}})
        .await
        .expect("listCollections");
    let batch = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .expect("firstBatch");
    let mut out: Vec<Document> = batch
        .iter()
        .filter_map(|b| b.as_document().cloned())
        .collect();
    out.sort_by(|a, b| {
        a.get_str("name")
            .unwrap_or("")
            .cmp(b.get_str("name").unwrap_or(""))
    });
    out
}

pub async fn index_names(c: &mongodb::Client, db: &str, coll: &str) -> Vec<String> {
    let mut names = c
        .database(db)
        .collection::<Document>(coll)
        .list_index_names()
        .await
        .expect("listIndexes");
    names.sort();
    names
}

/// The raw BSON documents of a file (gzip detected by its magic bytes), as sliced
/// from the file: nothing is parsed and re-encoded.
pub fn raw_docs(path: &Path) -> Vec<Vec<u8>> {
    use std::io::Read;
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .expect("gunzip");
        out
    } else {
        bytes
    };
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 4 <= bytes.len() {
        let len = i32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        out.push(bytes[pos..pos + len].to_vec());
        pos += len;
    }
    out
}

/// dbHash of one collection computed from a dump file, independently of the server:
/// MD5 over the file's raw document bytes in `_id` order (here: the tests' `_id`s
/// are numbers of one type or strings, whose order is obvious).
pub fn md5_of_file_in_id_order(path: &Path) -> String {
    use md5::{Digest, Md5};
    let mut docs: Vec<(Bson, Vec<u8>)> = raw_docs(path)
        .into_iter()
        .map(|raw| {
            let d = Document::from_reader(&mut &raw[..]).expect("parse");
            (d.get("_id").cloned().unwrap_or(Bson::Null), raw)
        })
        .collect();
    docs.sort_by(|(a, _), (b, _)| match (a, b) {
        (Bson::String(x), Bson::String(y)) => x.cmp(y),
        _ => a
            .as_f64()
            .or_else(|| a.as_i64().map(|v| v as f64))
            .or_else(|| a.as_i32().map(|v| v as f64))
            .partial_cmp(
                &b.as_f64()
                    .or_else(|| b.as_i64().map(|v| v as f64))
                    .or_else(|| b.as_i32().map(|v| v as f64)),
            )
            .expect("comparable _ids"),
    });
    let mut h = Md5::new();
    for (_, raw) in docs {
        h.update(raw);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
