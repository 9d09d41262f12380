//! What can be wrong with a cluster description, each with what to do about it.

use std::path::PathBuf;

use crate::error::Hint;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot read the cluster file `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` is not a valid cluster file: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("`{}` has no [config] table (the config server's backup and oplog)", .0.display())]
    NoConfig(PathBuf),
    #[error("`{}` has no [[shard]] table", .0.display())]
    NoShards(PathBuf),
    #[error("`{}`: [config] has id `{id}`; the config server's id is always `config`", path.display())]
    ConfigId { path: PathBuf, id: String },
    #[error("`{}`: {key} has no `id`{}", path.display(), id.as_ref().map(|i| format!(" (`{i}` is not a shard id)")).unwrap_or_default())]
    ShardId {
        path: PathBuf,
        key: String,
        id: Option<String>,
    },
    #[error("`{}`: shard id `{id}` appears twice ({first} and {second})", path.display())]
    DuplicateId {
        path: PathBuf,
        id: String,
        first: String,
        second: String,
    },
    #[error("`{}`: {key} has no `backup`", path.display())]
    NoBackup { path: PathBuf, key: String },
    #[error("`{}`: {key} has no `uri`: the live commands read each member's own replica set", path.display())]
    NoUri { path: PathBuf, key: String },
    #[error("`{}`: {key}.uri holds a password", path.display())]
    PasswordInUri { path: PathBuf, key: String },
    #[error("`{}`: {key}.oplog is empty", path.display())]
    NoOplog { path: PathBuf, key: String },
    #[error("`{}`: {key} is an empty path", path.display())]
    EmptyPath { path: PathBuf, key: String },
    #[error("`{}`: {key} = `{value}` does not exist (looked for `{}`)", path.display(), resolved.display())]
    MissingPath {
        path: PathBuf,
        key: String,
        value: String,
        resolved: PathBuf,
    },
    #[error("`{}` does not list shard{} {} of the config server's config.shards (read from `{}`)",
        path.display(), if missing.len() == 1 { "" } else { "s" },
        missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "), backup.display())]
    MissingMembers {
        path: PathBuf,
        missing: Vec<String>,
        backup: PathBuf,
    },
    #[error("`{}`: {key} has id `{id}`, which is not in the config server's config.shards ({})",
        path.display(), if known.is_empty() { "it lists none".to_string() } else { known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ") })]
    UnknownShard {
        path: PathBuf,
        key: String,
        id: String,
        known: Vec<String>,
    },
    #[error("`{url}`: a cluster file is read from a local path, not from object storage")]
    InBucket { url: String },
    /// `--cluster` named a URL pitr refuses (a secret in it, ...).
    #[error(transparent)]
    Url(#[from] crate::storage::StorageError),
}

impl Hint for ClusterError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            ClusterError::Read { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                crate::storage::not_found_hint(path, "check the path given to --cluster")
            }
            ClusterError::Read { .. } => "check the path given to --cluster".into(),
            ClusterError::Syntax { .. } => {
                "the file takes [config] with backup, oplog (a list) and optionally uri, and one [[shard]] per shard \
                 with id, backup, oplog and optionally uri (docs/sharded.md)"
                    .into()
            }
            ClusterError::NoConfig(_) => {
                "add [config] with the config server's backup and oplog: without its metadata pitr cannot tell one \
                 logical incident from several, nor which shard owns what"
                    .into()
            }
            ClusterError::NoShards(_) => "add one [[shard]] per shard, with id equal to config.shards._id".into(),
            ClusterError::ConfigId { .. } => "drop `id` from [config]".into(),
            ClusterError::ShardId { .. } => {
                "give each [[shard]] an `id` equal to its config.shards._id (`config` is the config server's)".into()
            }
            ClusterError::DuplicateId { .. } => "each shard appears once; remove or rename one of them".into(),
            ClusterError::NoBackup { key, .. } => format!(
                "add `backup = \"...\"` to {key}: a mongodump --oplog of that member's replica set (a file written by \
                 `pitr cluster discover` names the members' servers only; `pitr dump-oplog --cluster` adds their oplogs)"
            ),
            ClusterError::NoUri { key, .. } => format!(
                "add `uri = \"mongodb://HOST:PORT,.../?replicaSet=SET\"` to {key} (without a password), or let \
                 `pitr cluster discover --uri mongodb://MONGOS` write the file"
            ),
            ClusterError::PasswordInUri { .. } => {
                "keep passwords out of the file: remove it from the uri (keep the user if you like) and set \
                 PITR_CLUSTER_PASSWORD in the environment (and PITR_CLUSTER_USER for members whose uri names no user)"
                    .into()
            }
            ClusterError::NoOplog { .. } => {
                "list at least one oplog source of that member (a dump of local.oplog.rs, a pitr archive directory)".into()
            }
            ClusterError::EmptyPath { .. } => "give a path (relative paths are relative to the cluster file)".into(),
            ClusterError::MissingPath { resolved, .. } => crate::storage::not_found_hint(
                resolved,
                "relative paths are relative to the cluster file's directory; fix the path or move the file",
            ),
            ClusterError::MissingMembers { .. } => {
                "add a [[shard]] for each: a cluster without one of its shards cannot be restored, and an incident \
                 on it would go unseen"
                    .into()
            }
            ClusterError::UnknownShard { .. } => {
                "use the shard's config.shards._id (mongosh: `db.getSiblingDB('config').shards.find()` through mongos)".into()
            }
            ClusterError::InBucket { .. } => {
                "copy it here first (e.g. `aws s3 cp URL cluster.toml`) and give that path; the members' backup and \
                 oplog in it may be URLs (docs/object-storage.md)"
                    .into()
            }
            ClusterError::Url(e) => return e.hint(),
        })
    }
}
