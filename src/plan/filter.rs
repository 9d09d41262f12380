//! `--ns` globs, and which namespaces an oplog entry touches.
//!
//! Commands are logged on `db.$cmd`, so matching them needs the namespace they act
//! on: `drop`/`create`/`collMod`/index commands name a collection of `db`,
//! `renameCollection` names two full namespaces, `dropDatabase` touches every
//! collection of `db`. Transactions are matched as a whole elsewhere (all parts and
//! the commit stay together; see [`super::scan`]).

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::oplog::{Entry, Op};

use super::error::PlanError;

/// Commands whose first value names a collection of the entry's database.
const COLLECTION_COMMANDS: &[&str] = &[
    "create",
    "drop",
    "collMod",
    "emptycapped",
    "convertToCapped",
    "createIndexes",
    "commitIndexBuild",
    "startIndexBuild",
    "abortIndexBuild",
    "dropIndexes",
    "deleteIndexes",
    "deleteIndex",
    "dropIndex",
];

/// The namespaces an entry (or an `applyOps` leaf) acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One `db.coll`.
    Ns(String),
    /// `renameCollection`: source and destination.
    Rename(String, String),
    /// `dropDatabase`: every collection of this database.
    Database(String),
    /// `applyOps`, transaction control, no-ops and anything unknown: decided elsewhere.
    Other,
}

/// What one leaf operation touches.
pub fn target(e: &Entry<'_>) -> Target {
    match e.op {
        Op::Insert | Op::Update | Op::Delete => Target::Ns(e.ns.to_string()),
        Op::Command => {
            let Some(name) = e.command_name() else {
                return Target::Other;
            };
            let Some(o) = e.o else {
                return Target::Other;
            };
            if name == "renameCollection" {
                return match (o.get_str("renameCollection"), o.get_str("to")) {
                    (Ok(from), Ok(to)) => Target::Rename(from.to_string(), to.to_string()),
                    _ => Target::Other,
                };
            }
            if name == "dropDatabase" {
                return Target::Database(e.db().to_string());
            }
            if COLLECTION_COMMANDS.contains(&name) {
                if let Ok(coll) = o.get_str(name) {
                    return Target::Ns(format!("{}.{coll}", e.db()));
                }
            }
            Target::Other
        }
        _ => Target::Other,
    }
}

/// The compiled `--ns` globs.
#[derive(Debug, Clone)]
pub struct NsFilter {
    globs: Vec<String>,
    set: GlobSet,
}

impl NsFilter {
    /// `None` when no glob was given (everything is kept).
    pub fn new(globs: &[String]) -> Result<Option<NsFilter>, PlanError> {
        if globs.is_empty() {
            return Ok(None);
        }
        let mut b = GlobSetBuilder::new();
        for g in globs {
            let glob = Glob::new(g).map_err(|source| PlanError::BadGlob {
                glob: g.clone(),
                source,
            })?;
            b.add(glob);
        }
        let set = b.build().map_err(|source| PlanError::BadGlob {
            glob: globs.join(" "),
            source,
        })?;
        Ok(Some(NsFilter {
            globs: globs.to_vec(),
            set,
        }))
    }

    pub fn globs(&self) -> &[String] {
        &self.globs
    }

    pub fn matches(&self, ns: &str) -> bool {
        self.set.is_match(ns)
    }

    /// True when a database drop can touch a selected namespace: a glob matches
    /// `db.*` literally, or one of `known` (namespaces of the backup) in that
    /// database matches.
    pub fn matches_db<'k>(&self, db: &str, known: impl IntoIterator<Item = &'k str>) -> bool {
        if self.set.is_match(format!("{db}.*")) {
            return true;
        }
        let prefix = format!("{db}.");
        known
            .into_iter()
            .any(|ns| ns.starts_with(&prefix) && self.set.is_match(ns))
    }

    /// Whether a leaf operation touches a selected namespace (`None`: undecidable
    /// here, e.g. transaction control).
    pub fn leaf_matches<'k>(
        &self,
        leaf: &Entry<'_>,
        known: impl IntoIterator<Item = &'k str>,
    ) -> Option<bool> {
        match target(leaf) {
            Target::Ns(ns) => Some(self.matches(&ns)),
            Target::Rename(a, b) => Some(self.matches(&a) || self.matches(&b)),
            Target::Database(db) => Some(self.matches_db(&db, known)),
            Target::Other => None,
        }
    }
}

/// Escapes a namespace for mongorestore's `--nsInclude`, where `*` is a wildcard
/// and `\` escapes.
pub fn ns_include_literal(ns: &str) -> String {
    let mut s = String::with_capacity(ns.len());
    for c in ns.chars() {
        if c == '*' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawdoc, Timestamp};

    fn ts() -> Timestamp {
        Timestamp {
            time: 1,
            increment: 1,
        }
    }

    #[test]
    fn command_targets() {
        let cases = [
            (
                rawdoc! { "ts": ts(), "op": "c", "ns": "shop.$cmd", "o": { "drop": "orders" } },
                Target::Ns("shop.orders".into()),
            ),
            (
                rawdoc! { "ts": ts(), "op": "c", "ns": "shop.$cmd", "o": { "create": "x", "idIndex": {} } },
                Target::Ns("shop.x".into()),
            ),
            (
                rawdoc! { "ts": ts(), "op": "c", "ns": "shop.$cmd", "o": { "renameCollection": "shop.a", "to": "arch.b" } },
                Target::Rename("shop.a".into(), "arch.b".into()),
            ),
            (
                rawdoc! { "ts": ts(), "op": "c", "ns": "shop.$cmd", "o": { "dropDatabase": 1 } },
                Target::Database("shop".into()),
            ),
            (
                rawdoc! { "ts": ts(), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [] } },
                Target::Other,
            ),
            (
                rawdoc! { "ts": ts(), "op": "i", "ns": "shop.orders", "o": { "_id": 1 } },
                Target::Ns("shop.orders".into()),
            ),
            (
                rawdoc! { "ts": ts(), "op": "n", "ns": "", "o": { "msg": "x" } },
                Target::Other,
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(target(&Entry::parse(&raw).unwrap()), want, "{raw:?}");
        }
    }

    #[test]
    fn globs_and_database_drops() {
        let f = NsFilter::new(&["shop.orders".into(), "crm.*".into()])
            .unwrap()
            .unwrap();
        assert!(f.matches("shop.orders") && f.matches("crm.leads") && !f.matches("shop.users"));
        assert!(f.matches_db("crm", []));
        assert!(f.matches_db("shop", ["shop.orders"]));
        assert!(!f.matches_db("shop", ["shop.users"]));
        assert!(NsFilter::new(&[]).unwrap().is_none());
        assert!(matches!(
            NsFilter::new(&["shop.{a".into()]),
            Err(PlanError::BadGlob { .. })
        ));
        assert_eq!(ns_include_literal(r"a.b*c\d"), r"a.b\*c\\d");
    }
}
