//! Shared helpers for integration tests: run the built `pitr` binary, find the
//! peer data, make temp dirs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The peer-data folder (`../shared/peer-data/mongo-tools` beside the repo), or
/// `None` after printing why the calling test is skipping.
pub fn peer_dir(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/peer-data/mongo-tools");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED {test}: peer data not found at {} (it lives beside the repository in the development workspace, not in clones)",
            dir.display()
        );
        None
    }
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
