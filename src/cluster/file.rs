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
//!
//! Two readings of one format: [`load`] for the commands that read backups and oplogs
//! (every member needs `backup` and `oplog`), [`load_live`] for the commands that read
//! the members' servers (`dump-oplog --cluster`, `archive --cluster`: every member
//! needs `uri`; `backup` and `oplog` may be absent, as in the file `pitr cluster
//! discover` writes). [`render`] writes the format back.

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
    backup: Option<String>,
    oplog: Option<Vec<String>>,
    uri: Option<String>,
}

/// Reads and checks `path`.
pub fn load(path: &Path) -> Result<ClusterFile, ClusterError> {
    let (local, text) = read_text(path)?;
    parse(&local, &text)
}

/// Parses `text` as the contents of `path` (relative paths resolve against its
/// directory) and checks that every path exists.
pub fn parse(path: &Path, text: &str) -> Result<ClusterFile, ClusterError> {
    let (config, shards) = parse_raw(path, text)?;
    // `cluster.toml` (no directory) has the parent "": paths stay as written.
    let base = path.parent().unwrap_or(Path::new(""));
    let config = member(path, base, config)?;
    let shards = shards
        .into_iter()
        .map(|s| member(path, base, s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ClusterFile {
        path: path.to_path_buf(),
        config,
        shards,
    })
}

/// One member as the file writes it, paths as written (unresolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEntry {
    /// `config` for the config server, else the shard's id.
    pub id: String,
    pub role: Role,
    pub backup: Option<String>,
    pub oplog: Vec<String>,
    pub uri: Option<String>,
    /// Where in the file it is (`config`, `shard[2]`), for messages.
    pub key: String,
}

/// A `cluster.toml` read for the live commands: every member has a `uri`.
#[derive(Clone, Debug)]
pub struct LiveFile {
    pub path: PathBuf,
    /// The config server first, then the shards in file order.
    pub members: Vec<RawEntry>,
}

impl LiveFile {
    /// `value` of `member` resolved against the file's directory.
    pub fn resolve(&self, value: &str) -> PathBuf {
        self.path.parent().unwrap_or(Path::new("")).join(value)
    }
}

/// Reads `path` for the live commands (see [`LiveFile`]).
pub fn load_live(path: &Path) -> Result<LiveFile, ClusterError> {
    let (local, text) = read_text(path)?;
    parse_live(&local, &text)
}

/// The cluster file's local path (a `file://` URL decoded: its relative paths are
/// relative to that) and its text. A local file only: a bucket URL is refused with
/// what to do, not read as a relative path `s3:/...` that does not exist.
fn read_text(path: &Path) -> Result<(PathBuf, String), ClusterError> {
    let local = match crate::storage::Location::of_path(path)? {
        crate::storage::Location::Local(p) => p,
        url => {
            return Err(ClusterError::InBucket {
                url: url.to_string(),
            })
        }
    };
    match std::fs::read_to_string(&local) {
        Ok(text) => Ok((local, text)),
        Err(source) => Err(ClusterError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parses `text` for the live commands: ids checked as by [`parse`], every member
/// needs a non-empty `uri`; `backup` and `oplog` are kept as written, unchecked.
pub fn parse_live(path: &Path, text: &str) -> Result<LiveFile, ClusterError> {
    let (config, shards) = parse_raw(path, text)?;
    let members: Vec<RawEntry> = std::iter::once(config).chain(shards).collect();
    for m in &members {
        let uri = m.uri.as_deref().unwrap_or_default();
        if uri.trim().is_empty() {
            return Err(ClusterError::NoUri {
                path: path.to_path_buf(),
                key: m.key.clone(),
            });
        }
        if has_password(uri) {
            return Err(ClusterError::PasswordInUri {
                path: path.to_path_buf(),
                key: m.key.clone(),
            });
        }
    }
    Ok(LiveFile {
        path: path.to_path_buf(),
        members,
    })
}

/// Whether the userinfo of `uri` holds a password (`user:password@`).
fn has_password(uri: &str) -> bool {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    rest.rfind('@').is_some_and(|at| rest[..at].contains(':'))
}

/// The structure both readings share: a `[config]`, at least one `[[shard]]`, shard
/// ids present, not `config`, and unique.
fn parse_raw(path: &Path, text: &str) -> Result<(RawEntry, Vec<RawEntry>), ClusterError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| ClusterError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })?;
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
    let entry = |key: String, id: String, role: Role, r: RawMember| RawEntry {
        id,
        role,
        backup: r.backup,
        oplog: r.oplog.unwrap_or_default(),
        uri: r.uri,
        key,
    };
    let config = entry("config".into(), "config".into(), Role::Config, config);
    let mut shards: Vec<RawEntry> = Vec::new();
    for (k, s) in raw.shard.into_iter().enumerate() {
        let key = format!("shard[{k}]");
        let id = match s.id.clone() {
            Some(id) if !id.trim().is_empty() && id != "config" => id,
            id => {
                return Err(ClusterError::ShardId {
                    path: path.to_path_buf(),
                    key,
                    id,
                })
            }
        };
        if let Some(first) = shards.iter().find(|o| o.id == id) {
            return Err(ClusterError::DuplicateId {
                path: path.to_path_buf(),
                id,
                first: first.key.clone(),
                second: key,
            });
        }
        shards.push(entry(key, id, Role::Shard, s));
    }
    Ok((config, shards))
}

fn member(path: &Path, base: &Path, raw: RawEntry) -> Result<Member, ClusterError> {
    let key = raw.key;
    let Some(backup) = raw.backup else {
        return Err(ClusterError::NoBackup {
            path: path.to_path_buf(),
            key,
        });
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
        // A bucket URL (`s3://...`, `gs://...`, `az://...`) is kept as it is and read
        // in place by the storage layer, which names it if it is missing.
        if crate::storage::Location::parse(value).is_ok_and(|l| !l.is_local()) {
            return Ok(PathBuf::from(value));
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
    let backup = resolve(format!("{key}.backup"), &backup)?;
    let oplog = raw
        .oplog
        .iter()
        .enumerate()
        .map(|(k, o)| resolve(format!("{key}.oplog[{k}]"), o))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Member {
        id: raw.id,
        role: raw.role,
        backup,
        oplog,
        uri: raw.uri,
        key,
    })
}

/// A TOML basic string: `"` and `\` escaped, control characters as `\uXXXX`.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The text of a `cluster.toml` holding `members` (the config server first), after
/// `header` (each line written as a comment). [`parse_live`] reads it back as given;
/// [`parse`] does when every member has a backup and an oplog.
pub fn render(header: &str, members: &[RawEntry]) -> String {
    let mut out = String::new();
    for line in header.lines() {
        match line {
            "" => out.push_str("#\n"),
            l => out.push_str(&format!("# {l}\n")),
        }
    }
    for m in members {
        out.push('\n');
        match m.role {
            Role::Config => out.push_str("[config]\n"),
            Role::Shard => {
                out.push_str("[[shard]]\n");
                out.push_str(&format!("id = {}\n", quoted(&m.id)));
            }
        }
        if let Some(b) = &m.backup {
            out.push_str(&format!("backup = {}\n", quoted(b)));
        }
        if !m.oplog.is_empty() {
            let list: Vec<String> = m.oplog.iter().map(|o| quoted(o)).collect();
            out.push_str(&format!("oplog = [{}]\n", list.join(", ")));
        }
        if let Some(u) = &m.uri {
            out.push_str(&format!("uri = {}\n", quoted(u)));
        }
    }
    out
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
                &["cluster.toml", "shard[0] has no `backup`"],
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

    /// What `cluster discover` writes (uris only) is read back by the live reading,
    /// and refused by the offline one, naming the missing backup.
    #[test]
    fn rendered_files_read_back() {
        let d = place();
        let members = vec![
            RawEntry {
                id: "config".into(),
                role: Role::Config,
                backup: None,
                oplog: vec![],
                uri: Some("mongodb://c:1/?replicaSet=csrs".into()),
                key: "config".into(),
            },
            RawEntry {
                id: "sh \"0\"".into(),
                role: Role::Shard,
                backup: Some("a".into()),
                oplog: vec!["b.bson".into()],
                uri: Some("mongodb://s:2/?replicaSet=rs0&authSource=admin".into()),
                key: "shard[0]".into(),
            },
        ];
        let text = render("line one\n\nline three", &members);
        assert!(text.starts_with("# line one\n#\n# line three\n"), "{text}");
        let live = parse_live(&d.path().join("cluster.toml"), &text).unwrap();
        assert_eq!(live.members, members);
        let err = parse_in(&d, &text).unwrap_err();
        assert!(err.to_string().contains("config has no `backup`"), "{err}");
    }

    #[test]
    fn the_live_reading_needs_a_uri_and_no_password() {
        use crate::error::Hint;
        let d = place();
        let f = d.path().join("cluster.toml");
        let err = parse_live(&f, GOOD).unwrap_err();
        assert!(err.to_string().contains("config has no `uri`"), "{err}");
        let with_uri = |u: &str| {
            GOOD.replace(
                "oplog = [\"b.bson\"]\n\n[[shard]]\nid = \"rs0\"",
                &format!("oplog = [\"b.bson\"]\nuri = \"{u}\"\n\n[[shard]]\nid = \"rs0\""),
            )
            .replace("oplog = [\"b.bson\"]\n\"#", "")
        };
        let text = with_uri("mongodb://bob:hunter2@c:1/") + "uri = \"mongodb://x/\"\n";
        let err = parse_live(&f, &text).unwrap_err();
        assert!(
            err.to_string().contains("config.uri holds a password"),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"));
        assert!(err.hint().unwrap().contains("PITR_CLUSTER_PASSWORD"));
        let text = with_uri("mongodb://bob@c:1/") + "uri = \"mongodb://x/\"\n";
        let live = parse_live(&f, &text).unwrap();
        assert_eq!(live.members.len(), 3);
        assert_eq!(live.members[0].uri.as_deref(), Some("mongodb://bob@c:1/"));
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
