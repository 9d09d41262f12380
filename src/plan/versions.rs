//! What the restore's programs do differently from one release to the next, so that
//! the plan's replay walk and lint apply the rules of the versions that will run.
//!
//! `pitr plan` runs no program: it assumes `--mongorestore-version` (default: the
//! newest release it knows) and `--mongod-version` (default: the source server's
//! version when the backup records it, else the newest it knows), and says which it
//! assumed. `pitr replay` reads `--version` of the programs it found and plans with
//! their rules.
//!
//! Each rule names the release that introduced it, taken from mongo-tools' history
//! (`git tag --contains <commit>`) or the server's ticket.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::engine::walk::WalkRules;

/// A dotted release number (`100.18.0`, `7.0.14`, `8.0.4-rc1` reads as 8.0.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// Reads `100.18.0`, `v7.0.14`, `r4.0.28`, `8.0.4-rc1`, `6.0` (missing parts are 0).
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.trim().trim_start_matches(['v', 'r']);
        let core = s.split(['-', '+', ' ']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u32>());
        let major = parts.next()?.ok()?;
        let minor = match parts.next() {
            Some(p) => p.ok()?,
            None => 0,
        };
        let patch = match parts.next() {
            Some(p) => p.ok()?,
            None => 0,
        };
        Some(Version(major, minor, patch))
    }

    pub fn at_least(self, major: u32, minor: u32, patch: u32) -> bool {
        self.cmp(&Version(major, minor, patch)) != Ordering::Less
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The newest mongorestore release whose rules pitr knows.
pub const NEWEST_MONGORESTORE: Version = Version(100, 18, 0);
/// The newest server release whose applyOps rules pitr knows.
pub const NEWEST_MONGOD: Version = Version(8, 2, 0);

/// Where an assumed version came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VersionSource {
    /// `--mongorestore-version` / `--mongod-version`.
    Flag,
    /// The program's own `--version` (pitr replay).
    Binary,
    /// The source server's version recorded in the backup (prelude, archive header).
    Backup,
    /// Nothing said: the newest release pitr knows.
    Default,
}

/// The versions a plan's rules follow. JSON: `mongorestore`, `mongorestore_source`,
/// `mongod`, `mongod_source` (`flag`, `binary`, `backup`, `default`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    pub mongorestore: String,
    pub mongorestore_source: VersionSource,
    pub mongod: String,
    pub mongod_source: VersionSource,
}

/// What the caller knows about the versions (all optional).
#[derive(Clone, Debug, Default)]
pub struct VersionHints {
    /// From a flag or a binary, with its source.
    pub mongorestore: Option<(String, VersionSource)>,
    pub mongod: Option<(String, VersionSource)>,
    /// The source server's version recorded in the backup.
    pub backup_server: Option<String>,
}

/// A version the caller gave that is not `N.N[.N]`.
#[derive(Debug, thiserror::Error)]
#[error("`{value}` is not a {what} version (expected e.g. {example})")]
pub struct BadVersion {
    pub value: String,
    pub what: &'static str,
    pub example: &'static str,
}

impl crate::error::Hint for BadVersion {
    fn hint(&self) -> Option<String> {
        Some(format!(
            "give the release number, e.g. `{}`, or leave the flag out to assume the newest release pitr knows",
            self.example
        ))
    }
}

/// The rules to plan with, and the versions they are for.
#[derive(Clone, Debug)]
pub struct Rules {
    pub mongorestore: RestoreRules,
    pub server: ServerRules,
    pub versions: Versions,
}

impl Rules {
    /// Decides the versions from what is known; an unparsable flag value is an error,
    /// an unparsable binary version falls back to the newest (and says so through
    /// `versions`).
    pub fn from_hints(h: &VersionHints) -> Result<Rules, BadVersion> {
        let (restore, restore_src, restore_text) = match &h.mongorestore {
            Some((v, src)) => match Version::parse(v) {
                Some(p) => (p, *src, v.clone()),
                None if *src == VersionSource::Flag => {
                    return Err(BadVersion {
                        value: v.clone(),
                        what: "mongorestore",
                        example: "100.18.0",
                    })
                }
                None => (
                    NEWEST_MONGORESTORE,
                    VersionSource::Default,
                    NEWEST_MONGORESTORE.to_string(),
                ),
            },
            None => (
                NEWEST_MONGORESTORE,
                VersionSource::Default,
                NEWEST_MONGORESTORE.to_string(),
            ),
        };
        let from_backup = h
            .backup_server
            .as_deref()
            .and_then(|v| Version::parse(v).map(|p| (p, v.to_string())));
        let (server, server_src, server_text) = match &h.mongod {
            Some((v, src)) => match Version::parse(v) {
                Some(p) => (p, *src, v.clone()),
                None if *src == VersionSource::Flag => {
                    return Err(BadVersion {
                        value: v.clone(),
                        what: "mongod",
                        example: "7.0.14",
                    })
                }
                None => (
                    NEWEST_MONGOD,
                    VersionSource::Default,
                    NEWEST_MONGOD.to_string(),
                ),
            },
            None => match from_backup {
                Some((p, text)) => (p, VersionSource::Backup, text),
                None => (
                    NEWEST_MONGOD,
                    VersionSource::Default,
                    NEWEST_MONGOD.to_string(),
                ),
            },
        };
        Ok(Rules {
            mongorestore: RestoreRules::of(restore),
            server: ServerRules::of(server),
            versions: Versions {
                mongorestore: restore_text,
                mongorestore_source: restore_src,
                mongod: server_text,
                mongod_source: server_src,
            },
        })
    }

    /// The newest releases (tests, and callers that know nothing).
    pub fn newest() -> Rules {
        Rules::from_hints(&VersionHints::default()).expect("defaults parse")
    }
}

/// What one mongorestore release skips and refuses while replaying an oplog
/// (mongo-tools `mongorestore/oplog.go` `HandleOp`, `HandleNonTxnOp`,
/// `shouldIgnoreNamespace`, `ignoredOps`, `ignoredCEntries`, `knownCommands`, and
/// `common/txn/meta.go` `NewMeta`).
#[derive(Clone, Debug)]
pub struct RestoreRules {
    pub version: Version,
    /// The config server's own replay (`pitr replay --cluster`): its `applyOps` run
    /// on the config database (`config.$cmd`, how chunk commits were logged before
    /// internal transactions) hold the sharding catalog's writes, which a config
    /// server applies; mongorestore's rules would skip them whole. Inside
    /// transactions, the other `config.*` collections are skipped
    /// (`ignores_in_transaction`).
    pub config_server: bool,
}

/// `config.*` collections whose oplog entries mongorestore applies
/// (`dumprestore.ConfigCollectionsToKeep`, unchanged from 100.11.0 to 100.18.0); all
/// other `config.*` are skipped.
const CONFIG_COLLECTIONS_TO_KEEP: &[&str] = &[
    "chunks",
    "collections",
    "databases",
    "settings",
    "shards",
    "tags",
    "version",
];

/// Op types mongorestore skips, with the release that started skipping each.
const IGNORED_OPS: &[(&str, Version, &str)] = &[
    ("n", Version(100, 0, 0), "no-op"),
    // TOOLS-4073 (commit 595f22ec): bookkeeping of replicated record ids.
    (
        "cd",
        Version(100, 15, 0),
        "replicated record id bookkeeping",
    ),
    (
        "ci",
        Version(100, 15, 0),
        "replicated record id bookkeeping",
    ),
    (
        "km",
        Version(100, 15, 0),
        "replicated record id bookkeeping",
    ),
    // TOOLS-4120 (commit 2154e6d4).
    (
        "cu",
        Version(100, 16, 0),
        "replicated record id bookkeeping",
    ),
];

/// Commands mongorestore skips (`ignoredCEntries`), with the release that started.
const IGNORED_COMMANDS: &[(&str, Version)] = &[
    ("startIndexBuild", Version(100, 0, 0)),
    ("abortIndexBuild", Version(100, 0, 0)),
    // TOOLS-4039 (commit beb2d58a). Before: not a known command, so fatal.
    ("setMultikeyMetadata", Version(100, 16, 0)),
    // TOOLS-4310 (commit d69f3432): the second phase of a replicated table drop.
    ("dropIdent", Version(100, 18, 0)),
];

/// Commands mongorestore applies (`knownCommands`, the same from 100.0 to 100.18);
/// any other command stops the replay with `unknown oplog command name`.
/// Transaction control (`commitTransaction`, `abortTransaction`) is routed first.
pub const KNOWN_COMMANDS: &[&str] = &[
    "renameCollection",
    "dropDatabase",
    "applyOps",
    "dbCheck",
    "create",
    "convertToCapped",
    "emptycapped",
    "drop",
    "createIndexes",
    "deleteIndex",
    "deleteIndexes",
    "dropIndex",
    "dropIndexes",
    "collMod",
    "startIndexBuild",
    "abortIndexBuild",
    "commitIndexBuild",
];

/// The walk ([`crate::engine::walk`]) skips what this mongorestore release skips.
impl WalkRules for RestoreRules {
    fn ignores_namespace(&self, ns: &str) -> bool {
        RestoreRules::ignores_namespace(self, ns)
    }
    fn ignores_op(&self, op: &str) -> bool {
        RestoreRules::ignores_op(self, op)
    }
    fn ignores_command(&self, name: &str) -> bool {
        RestoreRules::ignores_command(self, name)
    }
    fn knows_multi_op_type(&self) -> bool {
        RestoreRules::knows_multi_op_type(self)
    }
    /// A config server's own replay is for its routing table (the kept `config.*`
    /// collections): its internal transactions' writes to other `config.*`
    /// collections (`config.placementHistory` in a 7.x drop,
    /// `sharding_ddl_util.cpp`) are skipped, as outside transactions, so a dump that
    /// holds only the kept collections (mongo-tools `common/dumprestore/config.go`)
    /// does not stop the replay on a collection it lacks.
    fn ignores_in_transaction(&self, ns: &str) -> bool {
        self.config_server && ns.starts_with("config.") && RestoreRules::ignores_namespace(self, ns)
    }
}

impl RestoreRules {
    /// The rules of the newest mongorestore release pitr knows.
    pub fn newest() -> RestoreRules {
        RestoreRules::of(NEWEST_MONGORESTORE)
    }

    pub fn of(version: Version) -> RestoreRules {
        RestoreRules {
            version,
            config_server: false,
        }
    }

    /// Skips every entry on `ns` (`shouldIgnoreNamespace`): `config.*` outside the
    /// kept collections; `__mdb_internal*` databases from 100.14.0 (REP-6743,
    /// commit 33f2d8e2).
    pub fn ignores_namespace(&self, ns: &str) -> bool {
        if ns.starts_with("__mdb_internal") && self.version.at_least(100, 14, 0) {
            return true;
        }
        if self.config_server && ns == "config.$cmd" {
            return false;
        }
        match ns.strip_prefix("config.") {
            Some(coll) => !CONFIG_COLLECTIONS_TO_KEEP.contains(&coll),
            None => false,
        }
    }

    /// Skips entries of op type `op`.
    pub fn ignores_op(&self, op: &str) -> bool {
        IGNORED_OPS
            .iter()
            .any(|(o, since, _)| *o == op && self.version >= *since)
    }

    /// An op type a later release skips but this one sends to the server, which
    /// refuses it: the release that would skip it.
    pub fn op_skipped_from(&self, op: &str) -> Option<Version> {
        IGNORED_OPS
            .iter()
            .find(|(o, since, _)| *o == op && self.version < *since)
            .map(|(_, since, _)| *since)
    }

    /// Skips command `name` (`ignoredCEntries`).
    pub fn ignores_command(&self, name: &str) -> bool {
        IGNORED_COMMANDS
            .iter()
            .any(|(c, since)| *c == name && self.version >= *since)
    }

    /// A command a later release skips but this one refuses: that release.
    pub fn command_skipped_from(&self, name: &str) -> Option<Version> {
        IGNORED_COMMANDS
            .iter()
            .find(|(c, since)| *c == name && self.version < *since)
            .map(|(_, since)| *since)
    }

    pub fn knows_command(&self, name: &str) -> bool {
        KNOWN_COMMANDS.contains(&name)
    }

    /// `multiOpType: 1` (vectored inserts) is recognised as not a transaction from
    /// 100.10.0 (TOOLS-3546, commit 1a46acd6); before, such an entry with `lsid` and
    /// `txnNumber` was taken for a transaction (applied at once all the same, as its
    /// own commit).
    pub fn knows_multi_op_type(&self) -> bool {
        self.version.at_least(100, 10, 0)
    }
}

/// What one server release refuses when mongorestore replays through `applyOps`
/// (`src/mongo/db/repl/oplog.cpp`, `apply_ops.cpp`, `write_ops.cpp`; see
/// `../shared/reference/server-apply-rules.md`).
#[derive(Clone, Debug)]
pub struct ServerRules {
    pub version: Version,
}

impl ServerRules {
    pub fn of(version: Version) -> ServerRules {
        ServerRules { version }
    }

    /// Update entries in the classic form (`$set`/`$unset`, with `$v: 1` or no `$v`)
    /// are refused with error 4772600 from 6.1 (SERVER-50301 "Delete code which
    /// handles $v:1 update oplog entries", fix version 6.1.0-rc0;
    /// `write_ops::UpdateModification::parseFromOplogEntry` then accepts only a
    /// replacement or `$v: 2`), and accepted again from 8.0, where applyOps converts
    /// them (jstest "These tests verify that we don't create v1 oplog entries when
    /// applying v1 updates supplied to applyOps", tagged "Applying v1 oplog entries
    /// with applyOps is only supported in 8.0 onwards", `requires_fcv_80`).
    /// Primaries logged them until 5.0, so an oplog from a 4.4/5.0 deployment does
    /// not replay into a 6.1-7.x spare.
    pub fn accepts_classic_updates(&self) -> bool {
        !self.version.at_least(6, 1, 0) || self.version.at_least(8, 0, 0)
    }

    /// An update of a document that does not exist: upserted by applyOps up to 6.1
    /// (`alwaysUpsert` defaulted to true); from 6.2 the op fails ("Update of non-mod
    /// failed"), the command answers "applyOps had one or more errors" and
    /// mongorestore stops (`jstests/core/apply_ops2.js`, tagged "6.2 removes support
    /// for atomic applyOps", `requires_fcv_62`; `apply_ops.cpp` passes
    /// `alwaysUpsert = false`). `../shared/reference/oplog-format.md` says 8.1; the
    /// source says 6.2.
    pub fn upserts_missing_documents(&self) -> bool {
        !self.version.at_least(6, 2, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config server's own replay (`replay --cluster`) applies `applyOps` on
    /// `config.$cmd` and skips other `config.*` collections inside transactions;
    /// mongorestore's rules are unchanged otherwise.
    #[test]
    fn config_server_rules() {
        use crate::engine::walk::WalkRules;
        let plain = RestoreRules::newest();
        let mut cfg = RestoreRules::newest();
        cfg.config_server = true;
        assert!(plain.ignores_namespace("config.$cmd"));
        assert!(!cfg.ignores_namespace("config.$cmd"));
        assert!(!WalkRules::ignores_in_transaction(
            &plain,
            "config.placementHistory"
        ));
        assert!(WalkRules::ignores_in_transaction(
            &cfg,
            "config.placementHistory"
        ));
        assert!(!WalkRules::ignores_in_transaction(
            &cfg,
            "config.collections"
        ));
        assert!(!WalkRules::ignores_in_transaction(&cfg, "shop.orders"));
        assert!(cfg.ignores_namespace("config.changelog"));
    }

    /// The walk with the newest mongorestore's rules skips what `mongorestore/oplog.go`
    /// skips: no-ops, `config.system.sessions` (not in `ConfigCollectionsToKeep`),
    /// `__mdb_internal*`, `startIndexBuild`; and keeps `config.settings`.
    #[test]
    fn the_walk_skips_what_mongorestore_skips() {
        use crate::engine::walk::{Ignored, Source, Visitor, Walker};
        use crate::oplog::{Entry, Ts};
        use bson::{doc, Bson, Timestamp};
        #[derive(Default)]
        struct Log {
            applied: Vec<String>,
            ignored: Vec<Ignored>,
        }
        impl Visitor for Log {
            fn applied(&mut self, op: &Entry<'_>, _at: Ts, _src: Source, _in_txn: bool) {
                self.applied.push(op.ns.to_string());
            }
            fn ignored(&mut self, _op: &Entry<'_>, why: Ignored, _src: Source) {
                self.ignored.push(why);
            }
        }
        let ts = |i| {
            Bson::Timestamp(Timestamp {
                time: 1,
                increment: i,
            })
        };
        let mut w = Walker::new(RestoreRules::newest());
        let mut log = Log::default();
        for d in [
            doc! { "ts": ts(1), "op": "n", "ns": "", "o": { "msg": "noop" } },
            doc! { "ts": ts(2), "op": "d", "ns": "config.system.sessions", "o": { "_id": 1 } },
            doc! { "ts": ts(3), "op": "i", "ns": "config.settings", "o": { "_id": 1 } },
            doc! { "ts": ts(4), "op": "c", "ns": "shop.$cmd", "o": { "startIndexBuild": "orders" } },
            doc! { "ts": ts(5), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [
                { "op": "d", "ns": "shop.orders", "o": { "_id": 1 } },
                { "op": "d", "ns": "__mdb_internal_x.y", "o": { "_id": 1 } },
            ] } },
        ] {
            let raw = bson::RawDocumentBuf::from_document(&d).unwrap();
            w.feed(&Entry::parse(&raw).unwrap(), Source::Slice, &mut log)
                .unwrap();
        }
        assert_eq!(log.applied, ["config.settings", "shop.orders"]);
        assert_eq!(
            log.ignored,
            [
                Ignored::OpType,
                Ignored::Namespace,
                Ignored::Command,
                Ignored::Namespace
            ]
        );
    }

    #[test]
    fn versions_parse_and_compare() {
        assert_eq!(Version::parse("100.18.0"), Some(Version(100, 18, 0)));
        assert_eq!(Version::parse("v7.0.14"), Some(Version(7, 0, 14)));
        assert_eq!(Version::parse("r4.0.28"), Some(Version(4, 0, 28)));
        assert_eq!(Version::parse("8.0.4-rc1"), Some(Version(8, 0, 4)));
        assert_eq!(Version::parse("6.0"), Some(Version(6, 0, 0)));
        assert_eq!(Version::parse("built-without-version-string"), None);
        assert_eq!(Version::parse(""), None);
        assert!(Version(100, 9, 4) < Version(100, 11, 0));
        assert!(Version(6, 1, 0).at_least(6, 1, 0) && !Version(6, 0, 20).at_least(6, 1, 0));
    }

    /// The differences between the two releases in `../shared/tools`, from
    /// mongo-tools' history.
    #[test]
    fn mongorestore_100_11_and_100_18_differ_as_their_history_says() {
        let old = RestoreRules::of(Version(100, 11, 0));
        let new = RestoreRules::of(Version(100, 18, 0));
        for op in ["cd", "ci", "cu", "km"] {
            assert!(!old.ignores_op(op) && new.ignores_op(op), "{op}");
        }
        assert_eq!(old.op_skipped_from("cu"), Some(Version(100, 16, 0)));
        assert_eq!(old.op_skipped_from("ci"), Some(Version(100, 15, 0)));
        assert!(old.ignores_op("n") && new.ignores_op("n"));
        for c in ["setMultikeyMetadata", "dropIdent"] {
            assert!(!old.ignores_command(c) && new.ignores_command(c), "{c}");
        }
        assert!(RestoreRules::of(Version(100, 16, 0)).ignores_command("setMultikeyMetadata"));
        assert!(!RestoreRules::of(Version(100, 17, 0)).ignores_command("dropIdent"));
        assert!(old.ignores_command("startIndexBuild") && new.ignores_command("abortIndexBuild"));
        assert!(
            !old.ignores_namespace("__mdb_internal_x.y")
                && new.ignores_namespace("__mdb_internal_x.y")
        );
        assert!(
            old.ignores_namespace("config.system.sessions")
                && !old.ignores_namespace("config.settings")
        );
        assert!(
            old.knows_multi_op_type()
                && !RestoreRules::of(Version(100, 9, 4)).knows_multi_op_type()
        );
    }

    #[test]
    fn server_rules_by_release() {
        assert!(ServerRules::of(Version(6, 0, 19)).accepts_classic_updates());
        assert!(!ServerRules::of(Version(6, 1, 0)).accepts_classic_updates());
        assert!(!ServerRules::of(Version(7, 0, 14)).accepts_classic_updates());
        assert!(ServerRules::of(Version(8, 0, 4)).accepts_classic_updates());
        assert!(ServerRules::of(Version(6, 1, 3)).upserts_missing_documents());
        assert!(!ServerRules::of(Version(6, 2, 0)).upserts_missing_documents());
        assert!(!ServerRules::of(Version(8, 0, 4)).upserts_missing_documents());
    }

    #[test]
    fn assumed_versions_say_where_they_come_from() {
        let r = Rules::newest();
        assert_eq!(r.versions.mongorestore, "100.18.0");
        assert_eq!(r.versions.mongorestore_source, VersionSource::Default);
        let r = Rules::from_hints(&VersionHints {
            backup_server: Some("7.0.16".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            (r.versions.mongod.as_str(), r.versions.mongod_source),
            ("7.0.16", VersionSource::Backup)
        );
        let r = Rules::from_hints(&VersionHints {
            mongorestore: Some(("100.11.0".into(), VersionSource::Flag)),
            mongod: Some(("6.0.5".into(), VersionSource::Binary)),
            backup_server: Some("7.0.16".into()),
        })
        .unwrap();
        assert_eq!(r.mongorestore.version, Version(100, 11, 0));
        assert_eq!(r.server.version, Version(6, 0, 5));
        assert_eq!(r.versions.mongod_source, VersionSource::Binary);
        let e = Rules::from_hints(&VersionHints {
            mongorestore: Some(("latest".into(), VersionSource::Flag)),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e
            .to_string()
            .contains("`latest` is not a mongorestore version"));
        // A binary whose version cannot be read: the newest rules, said so.
        let r = Rules::from_hints(&VersionHints {
            mongorestore: Some(("built-without-version-string".into(), VersionSource::Binary)),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(r.versions.mongorestore_source, VersionSource::Default);
    }
}
