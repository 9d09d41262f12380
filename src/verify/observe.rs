//! What a server holds: its user namespaces (collections, not views) and the exact
//! document count of each namespace a check needs. Read-only commands only:
//! `buildInfo`, `listDatabases`, `listCollections`, and `aggregate` for
//! `countDocuments`.

use std::collections::{BTreeMap, BTreeSet};

use bson::{doc, Bson, Document};
use mongodb::Client;

use super::connect::driver_message;
use super::error::VerifyError;
use super::ServerInfo;
use crate::engine::replica::Meter;
use crate::plan::{Progress, Unit};

/// The server's collections (`db.coll`, outside `admin`, `config` and `local`), and
/// counts of the wanted ones that exist.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub namespaces: BTreeSet<String>,
    pub counts: BTreeMap<String, u64>,
    /// `dbHash` of the namespaces asked for by hash.
    pub hashes: BTreeMap<String, String>,
    /// Per namespace, what the first differing document is (filled by the caller
    /// when it has a dump to compare with).
    pub first_difference: BTreeMap<String, String>,
    pub server: ServerInfo,
    /// What `hashes` are: the server's `dbHash` (default), or pitr's md5 of the
    /// documents read in `_id` order (`verify --cluster`, through mongos, which has no
    /// `dbHash`).
    pub content: ContentKind,
}

/// How a collection's content was hashed (see [`Observed::content`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContentKind {
    #[default]
    DbHash,
    DocumentsInIdOrder,
}

/// Lists every user namespace and counts the `wanted` ones. `uri` is only used to
/// scrub credentials from error messages.
pub async fn observe(
    client: &Client,
    uri: &str,
    wanted: &[String],
    hashed: &[String],
    progress: &dyn Progress,
) -> Result<Observed, VerifyError> {
    let err = |what: String| {
        move |e: mongodb::error::Error| VerifyError::Command {
            what,
            uri: super::redact_uri(uri),
            detail: driver_message(uri, &e),
        }
    };
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .map_err(|e| VerifyError::Unreachable {
            uri: super::redact_uri(uri),
            detail: driver_message(uri, &e),
        })?;
    let build: Document = client
        .database("admin")
        .run_command(doc! { "buildInfo": 1 })
        .await
        .map_err(err("buildInfo".into()))?;
    let server = ServerInfo {
        version: build.get_str("version").ok().map(str::to_string),
        standin: matches!(build.get("pitrStandIn"), Some(Bson::Boolean(true))),
    };
    let mut namespaces = BTreeSet::new();
    let dbs = client
        .list_database_names()
        .await
        .map_err(err("listDatabases".into()))?;
    for db in dbs {
        if matches!(db.as_str(), "admin" | "config" | "local") {
            continue;
        }
        let names = client
            .database(&db)
            .list_collection_names()
            .filter(doc! { "type": "collection" })
            .await
            .map_err(err(format!("listCollections on `{db}`")))?;
        namespaces.extend(names.into_iter().map(|c| format!("{db}.{c}")));
    }
    let mut counts = BTreeMap::new();
    // Each count reads its whole collection on the server: the long part with the
    // hashes. No total: the restore's counts are what is being checked.
    let counted = Meter::new();
    let counting = progress.phase(
        "counting the restored documents",
        Unit::Documents,
        None,
        &counted,
    );
    for ns in wanted {
        if !namespaces.contains(ns) {
            continue;
        }
        let (db, coll) = ns.split_once('.').unwrap_or((ns.as_str(), ""));
        let n = client
            .database(db)
            .collection::<Document>(coll)
            .count_documents(doc! {})
            .await
            .inspect_err(|_| counted.cut_short())
            .map_err(err(format!("counting the documents of `{ns}`")))?;
        counts.insert(ns.clone(), n);
        counted.add(n);
    }
    drop(counting);
    // dbHash per database, for the collections whose content is predicted
    // (`src/mongo/db/commands/dbhash.cpp`: `collections` restricts the reply).
    let mut by_db: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for ns in hashed.iter().filter(|ns| namespaces.contains(*ns)) {
        let (db, coll) = ns.split_once('.').unwrap_or((ns.as_str(), ""));
        by_db.entry(db).or_default().push(coll);
    }
    let mut hashes = BTreeMap::new();
    // One dbHash per database; the documents hashed are the ones just counted.
    let of = |db: &str, colls: &[&str]| -> u64 {
        colls
            .iter()
            .filter_map(|c| counts.get(&format!("{db}.{c}")))
            .sum()
    };
    let hashed_docs = Meter::new();
    let total = by_db.iter().map(|(db, colls)| of(db, colls)).sum();
    let hashing = (!by_db.is_empty()).then(|| {
        progress.phase(
            "hashing the restored collections (dbHash)",
            Unit::Documents,
            Some(total),
            &hashed_docs,
        )
    });
    for (db, colls) in by_db {
        let reply: Document = client
            .database(db)
            .run_command(doc! { "dbHash": 1, "collections": colls.clone() })
            .await
            .map_err(err(format!("dbHash on `{db}`")))?;
        if let Ok(c) = reply.get_document("collections") {
            for (name, v) in c {
                if let Bson::String(h) = v {
                    hashes.insert(format!("{db}.{name}"), h.clone());
                }
            }
        }
        hashed_docs.add(of(db, &colls));
    }
    drop(hashing);
    Ok(Observed {
        namespaces,
        counts,
        hashes,
        first_difference: BTreeMap::new(),
        server,
        content: ContentKind::DbHash,
    })
}
