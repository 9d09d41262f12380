//! The concrete values for the plan's step commands ([`crate::plan::steps`]): the
//! binaries found, the spare's port and dbpath, the dump's temporary directory.
//! `pitr replay` runs exactly what these functions return.

use std::path::Path;

use crate::plan::steps::{self, CommandValues};

/// Shown in `--dry-run` for what is only known once the spare runs.
pub const PORT_PLACEHOLDER: &str = "<PORT>";
pub const DBPATH_PLACEHOLDER: &str = "<WORKDIR>/pitr-spare-XXXXXX/db";
pub const DUMP_PLACEHOLDER: &str = "<OUT_PARENT>/.pitr-dump-XXXXXX";

/// Binary paths and the spare's place; `None` where not known yet.
pub struct Values<'a> {
    pub mongod: &'a Path,
    pub mongorestore: &'a Path,
    pub mongodump: Option<&'a Path>,
    pub pitr: &'a Path,
    pub port: Option<u16>,
    pub dbpath: Option<&'a Path>,
    pub logpath: &'a Path,
    pub dump_dir: Option<&'a Path>,
}

pub fn values(v: &Values<'_>) -> CommandValues {
    let s = |p: &Path| p.display().to_string();
    CommandValues {
        mongod: s(v.mongod),
        mongorestore: s(v.mongorestore),
        mongodump: v.mongodump.map_or_else(|| "mongodump".to_string(), s),
        pitr: s(v.pitr),
        host: "127.0.0.1".into(),
        port: v
            .port
            .map_or_else(|| PORT_PLACEHOLDER.to_string(), |p| p.to_string()),
        dbpath: v.dbpath.map_or_else(|| DBPATH_PLACEHOLDER.to_string(), s),
        logpath: s(v.logpath),
        // The spare has no users: no credentials to pass.
        config: None,
        dump_dir: v.dump_dir.map_or_else(|| DUMP_PLACEHOLDER.to_string(), s),
    }
}

/// The spare's command line: the plan's step 1 plus what
/// [`crate::exec::SpareMongod`] always adds (`--logappend`, so each start of the
/// spare appends to the kept log; `--nounixsocket`, so no socket file is left in
/// /tmp). It is started by that module, which owns the readiness checks.
pub fn spare_mongod_argv(v: &CommandValues) -> Vec<String> {
    let mut a = steps::mongod_argv(v);
    a.push("--logappend".into());
    a.push("--nounixsocket".into());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_until_known() {
        let p = Path::new;
        let mut v = Values {
            mongod: p("/b/mongod"),
            mongorestore: p("/b/mongorestore"),
            mongodump: None,
            pitr: p("/bin/pitr"),
            port: None,
            dbpath: None,
            logpath: p("/w/logs/mongod.log"),
            dump_dir: None,
        };
        let c = values(&v);
        assert_eq!(
            steps::shell_line(&spare_mongod_argv(&c)),
            "/b/mongod --port <PORT> --bind_ip 127.0.0.1 --dbpath <WORKDIR>/pitr-spare-XXXXXX/db \
             --setParameter ttlMonitorEnabled=false --logpath /w/logs/mongod.log --logappend --nounixsocket"
        );
        v.port = Some(28001);
        v.dbpath = Some(p("/w/pitr-spare-abc/db"));
        let c = values(&v);
        assert_eq!(
            (c.port.as_str(), c.dbpath.as_str()),
            ("28001", "/w/pitr-spare-abc/db")
        );
        assert_eq!(c.mongodump, "mongodump");
    }
}
