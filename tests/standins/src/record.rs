//! `PITR_STANDIN_RECORD`: what a stand-in tool did, as one JSON object per line.
//!
//! Lines are appended, not overwritten, because one pitr run may start mongorestore
//! more than once (the backup, then the oplog replay) and mongodump after that.

use std::io::Write;

/// Append `value` as one line to the file named by `PITR_STANDIN_RECORD`, if set.
/// A failure to write is reported on stderr but never changes the tool's outcome.
pub fn append(value: &serde_json::Value) {
    let Ok(path) = std::env::var("PITR_STANDIN_RECORD") else {
        return;
    };
    let line = format!("{value}\n");
    let res = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = res {
        eprintln!("pitr stand-in: cannot append to PITR_STANDIN_RECORD `{path}`: {e}");
    }
}

/// Read every record line of a file (for tests).
pub fn read_all(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
