//! Which shards the cluster has, as its config server records them (`config.shards`),
//! checked against the members a cluster file lists.
//!
//! Phase A reads `config.shards` from the config server's backup: shards added or
//! removed after the backup (inserts and deletes of `config.shards` in its oplog)
//! are not yet followed to the limit, as rule R3 of shared/reference/sharded-pitr.md
//! will need (issue 19, phase B).

use std::path::Path;

use crate::backup::{Backup, BackupError};

use super::error::ClusterError;
use super::file::ClusterFile;

/// The `_id`s of `config.shards` in a config server's backup, in storage order;
/// None when the backup has no `config.shards` (not a config server's, or dumped
/// without the config database).
pub fn config_shards(b: &Backup) -> Result<Option<Vec<String>>, BackupError> {
    if b.get("config.shards").is_none() {
        return Ok(None);
    }
    let mut ids = Vec::new();
    b.for_each_document(|n, doc, _, _| {
        if n.ns == "config.shards" {
            if let Ok(id) = doc.get_str("_id") {
                ids.push(id.to_string());
            }
        }
        Ok::<(), BackupError>(())
    })?;
    Ok(Some(ids))
}

/// Every member of `file` is a shard of `config.shards`, and every shard there is a
/// member.
pub fn check_members(
    file: &ClusterFile,
    known: &[String],
    backup: &Path,
) -> Result<(), ClusterError> {
    // A misspelt id is named as such first (it also leaves a shard missing).
    if let Some(s) = file.shards.iter().find(|s| !known.contains(&s.id)) {
        return Err(ClusterError::UnknownShard {
            path: file.path.clone(),
            key: s.key.clone(),
            id: s.id.clone(),
            known: known.to_vec(),
        });
    }
    let missing: Vec<String> = known
        .iter()
        .filter(|id| !file.shards.iter().any(|s| &s.id == *id))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(ClusterError::MissingMembers {
            path: file.path.clone(),
            missing,
            backup: backup.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::file::{Member, Role};
    use std::path::PathBuf;

    fn member(id: &str, k: usize) -> Member {
        Member {
            id: id.into(),
            role: Role::Shard,
            backup: PathBuf::from("b"),
            oplog: vec![PathBuf::from("o")],
            uri: None,
            key: format!("shard[{k}]"),
        }
    }

    fn file(ids: &[&str]) -> ClusterFile {
        ClusterFile {
            path: PathBuf::from("cluster.toml"),
            config: Member {
                id: "config".into(),
                role: Role::Config,
                key: "config".into(),
                ..member("config", 0)
            },
            shards: ids
                .iter()
                .enumerate()
                .map(|(k, id)| member(id, k))
                .collect(),
        }
    }

    #[test]
    fn members_must_match_config_shards() {
        let known = vec!["rs0".to_string(), "rs1".to_string()];
        let b = Path::new("cfg/backup");
        check_members(&file(&["rs1", "rs0"]), &known, b).unwrap();
        let err = check_members(&file(&["rs0"]), &known, b).unwrap_err();
        assert!(
            err.to_string().contains("does not list shard `rs1`"),
            "{err}"
        );
        let err = check_members(&file(&["rs0", "rs1", "rs9"]), &known, b).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("shard[2]") && msg.contains("`rs9`"), "{msg}");
    }
}
