//! `cluster.toml`: the members of a sharded cluster and where each one's backup and
//! oplog are.
//!
//! ```toml
//! [config]                      # the config server's replica set (CSRS)
//! backup = "config/backup"      # any layout pitr reads: a mongodump --oplog of the member's replica set
//! oplog = ["config/oplog.bson"] # files, dump directories, archives, pitr archive directories
//! uri = "mongodb://cfg1,cfg2/?replicaSet=csrs"   # optional, for the live commands
//!
//! [[shard]]                     # one per shard
//! id = "shard0"                 # equal to config.shards._id
//! backup = "shard0/backup"
//! oplog = ["shard0/oplog.bson"]
//! ```
//!
//! Relative paths are relative to the file. Refused, naming the file and the key:
//! unknown keys, a missing `[config]` or `[[shard]]`, a missing or empty value, two
//! shards with one id, a path that does not exist.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::ClusterError;

/// Which part of the cluster a member is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Config,
    Shard,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Config => "config",
            Role::Shard => "shard",
        }
    }
}

/// One member, paths resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// `config` for the config server, else the shard's id.
    pub id: String,
    pub role: Role,
    pub backup: PathBuf,
    pub oplog: Vec<PathBuf>,
    pub uri: Option<String>,
    /// Where in the file it is (`config`, `shard[2]`), for messages.
    pub key: String,
}

/// A parsed, checked `cluster.toml`.
#[derive(Clone, Debug)]
pub struct ClusterFile {
    pub path: PathBuf,
    pub config: Member,
    pub shards: Vec<Member>,
}

impl ClusterFile {
    /// Every member, the config server first.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        std::iter::once(&self.config).chain(self.shards.iter())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    config: Option<RawMember>,
    #[serde(default)]
    shard: Vec<RawMember>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    id: Option<String>,
    backup: String,
    oplog: Vec<String>,
    uri: Option<String>,
}

/// Reads and checks `path`.
pub fn load(path: &Path) -> Result<ClusterFile, ClusterError> {
    let text = std::fs::read_to_string(path).map_err(|source| ClusterError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Parses `text` as the contents of `path` (relative paths resolve against its
/// directory) and checks that every path exists.
pub fn parse(path: &Path, text: &str) -> Result<ClusterFile, ClusterError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| ClusterError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })?;
    // `cluster.toml` (no directory) has the parent "": paths stay as written.
    let base = path.parent().unwrap_or(Path::new(""));
    let Some(config) = raw.config else {
        return Err(ClusterError::NoConfig(path.to_path_buf()));
    };
    if raw.shard.is_empty() {
        return Err(ClusterError::NoShards(path.to_path_buf()));
    }
    if let Some(id) = &config.id {
        if id != "config" {
            return Err(ClusterError::ConfigId {
                path: path.to_path_buf(),
                id: id.clone(),
            });
        }
    }
    let config = member(path, base, "config".into(), Role::Config, config)?;
    let mut shards: Vec<Member> = Vec::new();
    for (k, s) in raw.shard.into_iter().enumerate() {
        let key = format!("shard[{k}]");
        let m = member(path, base, key, Role::Shard, s)?;
        if let Some(first) = shards.iter().find(|o| o.id == m.id) {
            return Err(ClusterError::DuplicateId {
                path: path.to_path_buf(),
                id: m.id,
                first: first.key.clone(),
                second: m.key,
            });
        }
        shards.push(m);
    }
    Ok(ClusterFile {
        path: path.to_path_buf(),
        config,
        shards,
    })
}

fn member(
    path: &Path,
    base: &Path,
    key: String,
    role: Role,
    raw: RawMember,
) -> Result<Member, ClusterError> {
    let id = match (role, raw.id) {
        (Role::Config, _) => "config".to_string(),
        (Role::Shard, Some(id)) if !id.trim().is_empty() && id != "config" => id,
        (Role::Shard, id) => {
            return Err(ClusterError::ShardId {
                path: path.to_path_buf(),
                key,
                id,
            })
        }
    };
    if raw.oplog.is_empty() {
        return Err(ClusterError::NoOplog {
            path: path.to_path_buf(),
            key,
        });
    }
    let resolve = |field: String, value: &str| -> Result<PathBuf, ClusterError> {
        if value.trim().is_empty() {
            return Err(ClusterError::EmptyPath {
                path: path.to_path_buf(),
                key: field,
            });
        }
        let p = base.join(value);
        if !p.exists() {
            return Err(ClusterError::MissingPath {
                path: path.to_path_buf(),
                key: field,
                value: value.to_string(),
                resolved: p,
            });
        }
        Ok(p)
    };
    let backup = resolve(format!("{key}.backup"), &raw.backup)?;
    let oplog = raw
        .oplog
        .iter()
        .enumerate()
        .map(|(k, o)| resolve(format!("{key}.oplog[{k}]"), o))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Member {
        id,
        role,
        backup,
        oplog,
        uri: raw.uri,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory holding `a/`, `b.bson` and `c/` (what the paths below point at).
    fn place() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        std::fs::write(d.path().join("b.bson"), b"").unwrap();
        std::fs::create_dir(d.path().join("c")).unwrap();
        d
    }

    const GOOD: &str = r#"
[config]
backup = "a"
oplog = ["b.bson"]

[[shard]]
id = "rs0"
backup = "c"
oplog = ["b.bson", "a"]
uri = "mongodb://h/?replicaSet=rs0"

[[shard]]
id = "rs1"
backup = "a"
oplog = ["b.bson"]
"#;

    fn parse_in(d: &tempfile::TempDir, text: &str) -> Result<ClusterFile, ClusterError> {
        parse(&d.path().join("cluster.toml"), text)
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let d = place();
        let c = parse_in(&d, GOOD).unwrap();
        assert_eq!(c.config.id, "config");
        assert_eq!(c.config.backup, d.path().join("a"));
        let ids: Vec<&str> = c.shards.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["rs0", "rs1"]);
        assert_eq!(
            c.shards[0].oplog,
            vec![d.path().join("b.bson"), d.path().join("a")]
        );
        assert_eq!(
            c.shards[0].uri.as_deref(),
            Some("mongodb://h/?replicaSet=rs0")
        );
        assert_eq!(c.members().count(), 3);
    }

    /// Every refusal names the file and the key, and says what to do.
    #[test]
    fn refusals_name_the_file_and_the_key() {
        use crate::error::Hint;
        let d = place();
        let cases: Vec<(String, &[&str])> = vec![
            (
                GOOD.replace("uri =", "url ="),
                &["cluster.toml", "unknown field `url`"],
            ),
            (
                GOOD.replace("id = \"rs1\"", "id = \"rs0\""),
                &["cluster.toml", "`rs0`", "shard[0]", "shard[1]"],
            ),
            (
                GOOD.replace("backup = \"c\"", "backup = \"nope\""),
                &["cluster.toml", "shard[0].backup", "`nope`"],
            ),
            (
                GOOD.replace("[\"b.bson\", \"a\"]", "[\"b.bson\", \"gone.bson\"]"),
                &["shard[0].oplog[1]", "`gone.bson`"],
            ),
            (
                GOOD.replace("[config]", "[configs]"),
                &["unknown field `configs`"],
            ),
            (GOOD.replace("id = \"rs0\"\n", ""), &["shard[0]", "no `id`"]),
            (
                GOOD.replace("oplog = [\"b.bson\", \"a\"]", "oplog = []"),
                &["shard[0].oplog", "empty"],
            ),
            (
                GOOD.replace("backup = \"c\"\n", ""),
                &["cluster.toml", "missing field `backup`"],
            ),
            (
                "[config]\nbackup = \"a\"\noplog = [\"b.bson\"]\n".into(),
                &["no [[shard]]"],
            ),
            (
                "[[shard]]\nid = \"x\"\nbackup = \"a\"\noplog = [\"b.bson\"]\n".into(),
                &["no [config]"],
            ),
            ("[config\n".into(), &["cluster.toml", "line 1"]),
        ];
        for (text, wanted) in cases {
            let err = parse_in(&d, &text).unwrap_err();
            let msg = err.to_string();
            for w in wanted {
                assert!(msg.contains(w), "`{w}` not in: {msg}");
            }
            assert!(err.hint().is_some_and(|h| !h.is_empty()), "{msg}");
        }
    }

    #[test]
    fn a_file_that_cannot_be_read_is_named() {
        let err = load(Path::new("/nonexistent/cluster.toml")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/cluster.toml"),
            "{err}"
        );
    }
}
