//! `prelude.json`: the small file mongodump 100.12+ writes at the root of a
//! *directory* dump (`prelude.json.gz` with `--gzip`; under `DB/` with `--db`).
//!
//! mongodump.go `DumpPreludeMetadata` writes `json.Marshal(PreludeData{...})`, i.e.
//! exactly `{"ServerVersion":"7.0.16","ToolVersion":"100.18.0"}`; it is not written
//! for `--archive` or `--out -`. mongorestore.go `ReadPreludeMetadata` reads only
//! `ServerVersion` (required, non-empty; `"unknown"` when mongodump could not get
//! it) and looks for the file in the target directory, then in its parent.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Hint;

/// What `prelude.json` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreludeJson {
    /// Version of the dumped server, or `"unknown"`.
    pub server_version: String,
    /// Version of the mongodump that wrote it (empty when built without one, as in
    /// mongo-tools' own test data).
    pub tool_version: String,
}

impl PreludeJson {
    /// `false` when mongodump could not learn the server version
    /// (`common.ServerVersionUnknown`).
    pub fn server_version_known(&self) -> bool {
        self.server_version != "unknown"
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PreludeJsonError {
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{name}` is not a valid prelude.json: {detail}")]
    Invalid { name: String, detail: String },
}

impl Hint for PreludeJsonError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            PreludeJsonError::Read { .. } => return None,
            PreludeJsonError::Invalid { .. } => {
                "mongorestore refuses this dump too; remove the damaged prelude.json (it only records versions) or dump again".into()
            }
        })
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "ServerVersion", default)]
    server_version: Option<String>,
    #[serde(rename = "ToolVersion", default)]
    tool_version: Option<String>,
}

/// Parses the content of `prelude.json` or `prelude.json.gz` (gzip recognised by
/// its magic bytes). `name` is how errors refer to it.
pub fn parse(name: &str, bytes: &[u8]) -> Result<PreludeJson, PreludeJsonError> {
    let invalid = |detail: String| PreludeJsonError::Invalid {
        name: name.to_string(),
        detail,
    };
    let text;
    let json: &[u8] = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut v = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .take(1 << 20)
            .read_to_end(&mut v)
            .map_err(|e| invalid(format!("its gzip data is damaged: {e}")))?;
        text = v;
        &text
    } else {
        bytes
    };
    let raw: Raw = serde_json::from_slice(json).map_err(|e| invalid(e.to_string()))?;
    let server_version = raw
        .server_version
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid("no `ServerVersion` (mongorestore requires it)".into()))?;
    Ok(PreludeJson {
        server_version,
        tool_version: raw.tool_version.unwrap_or_default(),
    })
}

/// Reads and parses a `prelude.json` or `prelude.json.gz` file.
pub fn read(path: &Path) -> Result<PreludeJson, PreludeJsonError> {
    let bytes = std::fs::read(path).map_err(|source| PreludeJsonError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&path.display().to_string(), &bytes)
}

/// Finds the prelude of a dump directory the way mongorestore does: in `dir`, then
/// in its parent (a database directory of a full dump). Both names are tried in
/// each place, since the content decides whether it is gzipped.
pub fn locate(dir: &Path) -> Option<PathBuf> {
    let parent = dir.parent();
    [Some(dir), parent]
        .into_iter()
        .flatten()
        .flat_map(|d| ["prelude.json", "prelude.json.gz"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_mongodump_writes() {
        let p = parse(
            "x",
            br#"{"ServerVersion":"7.0.16","ToolVersion":"100.18.0"}"#,
        )
        .unwrap();
        assert_eq!(p.server_version, "7.0.16");
        assert_eq!(p.tool_version, "100.18.0");
        assert!(p.server_version_known());
        let unknown = parse("x", br#"{"ServerVersion":"unknown","ToolVersion":""}"#).unwrap();
        assert!(!unknown.server_version_known());
    }

    #[test]
    fn refuses_what_mongorestore_refuses() {
        for bad in [
            &br#"{"ToolVersion":"1"}"#[..],
            br#"{"ServerVersion":""}"#,
            b"not json",
        ] {
            let e = parse("p.json", bad).unwrap_err();
            assert!(e.to_string().contains("`p.json`"), "{e}");
        }
    }
}
