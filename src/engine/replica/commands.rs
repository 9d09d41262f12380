//! Commands (`op: "c"`), as `applyCommand_inlock` applies them
//! (`src/mongo/db/repl/oplog.cpp`, its `kOpsMap`: each command with the error codes
//! that are "acceptable" and swallowed as success during oplog application).
//!
//! | command | effect here | acceptable (a no-op, counted in [`super::Tolerated`]) |
//! |---|---|---|
//! | `create` | new collection with the entry's options; `_id_` from `idIndex` (none when clustered); a time-series collection is its buckets collection; `viewOn` makes a view (`create_collection.cpp` `createCollectionForApplyOps`) | NamespaceExists |
//! | `drop` | drops the collection and its documents | NamespaceNotFound |
//! | `dropDatabase` | drops every collection of the database | NamespaceNotFound |
//! | `renameCollection` | `rename_collection.cpp` `renameCollectionForApplyOps` (below) | NamespaceNotFound, NamespaceExists |
//! | `createIndexes`, `commitIndexBuild` | appends the spec(s) to the catalog | IndexAlreadyExists, NamespaceNotFound |
//! | `startIndexBuild`, `abortIndexBuild` | nothing: an index exists from its commit on | NamespaceNotFound |
//! | `dropIndexes` (and `deleteIndexes`) | by name, key pattern, list or `"*"` | IndexNotFound, NamespaceNotFound |
//! | `collMod` | collection options (`validator`, `validationLevel`, `validationAction`, `expireAfterSeconds`, `viewOn`, `pipeline`, ...) and `index: {name or keyPattern, expireAfterSeconds, hidden}` | IndexNotFound, NamespaceNotFound |
//! | `emptycapped` | removes every document | NamespaceNotFound |
//! | `convertToCapped` | the collection becomes capped with `size` | NamespaceNotFound |
//! | `dbCheck`, `setMultikeyMetadata`, `dropIdent`, `createDatabaseMetadata`, ... | no user data change | — |
//!
//! Anything else (`importCollection`, unknown commands) is refused: pitr does not
//! guess what it does.

use bson::{Bson, Document, RawBsonRef, RawDocument};

use super::catalog::{default_id_index, CollInfo, CollKind};
use super::{timeseries, Phase, Replica, ReplicaError};
use crate::oplog::Entry;

/// Commands that change no user data or catalog entry pitr dumps.
const NO_DATA_CHANGE: &[&str] = &[
    // startIndexBuild/abortIndexBuild: the index appears in the catalog at its
    // commitIndexBuild (two-phase index builds, 4.4+).
    "startIndexBuild",
    "abortIndexBuild",
    "dbCheck",
    "setMultikeyMetadata",
    "dropIdent",
    "createDatabaseMetadata",
    "dropDatabaseMetadata",
    "invalidateCollectionMetadata",
    "setAllowChunkOperations",
    "updateCollectionMetadata",
    "initReplicatedFastCount",
];

/// The namespaces whose documents a command reads or writes ([`apply`]'s cases),
/// so that only their deferred writes are applied before it
/// ([`super::sorted`]); None when that is not known (every collection then).
/// Index, option and catalog changes touch no document.
pub(super) fn documents_touched(r: &Replica, op: &Entry<'_>) -> Option<Vec<String>> {
    let o = op.o?;
    let name = op.command_name()?;
    let db = op.db();
    let target = || o.get_str(name).ok().map(|c| format!("{db}.{c}"));
    match name {
        "drop" | "emptycapped" => Some(target().into_iter().collect()),
        "dropDatabase" => Some(r.namespaces_of_db(db)),
        "renameCollection" => {
            let from = o.get_str("renameCollection").ok()?;
            let to = o.get_str("to").ok()?;
            let mut v = vec![from.to_string(), to.to_string()];
            // `dropTarget` may name the collection to drop by UUID.
            if let Ok(Some(RawBsonRef::Binary(b))) = o.get("dropTarget") {
                let u = <[u8; 16]>::try_from(b.bytes).ok()?;
                v.extend(r.find_by_uuid(&u));
            }
            Some(v)
        }
        "create" | "createIndexes" | "commitIndexBuild" | "dropIndexes" | "deleteIndexes"
        | "collMod" | "convertToCapped" | "applyOps" | "commitTransaction" | "abortTransaction" => {
            Some(Vec::new())
        }
        n if NO_DATA_CHANGE.contains(&n) => Some(Vec::new()),
        _ => None,
    }
}

pub(super) fn apply(r: &mut Replica, op: &Entry<'_>, phase: Phase) -> Result<(), ReplicaError> {
    let Some(o) = op.o else {
        return Err(Replica::fail(op, "the command entry has no `o`"));
    };
    let Some(name) = op.command_name() else {
        return Err(Replica::fail(op, "the command's `o` is empty"));
    };
    let db = op.db();
    let target = || o.get_str(name).ok().map(|c| format!("{db}.{c}"));
    match name {
        "create" => create(r, op, o, target(), phase),
        "drop" => {
            let ns = named(op, target())?;
            let found = r.drop_ns(&ns)?;
            acceptable(r, found);
            Ok(())
        }
        "dropDatabase" => {
            for ns in r.namespaces_of_db(db) {
                r.drop_ns(&ns)?;
            }
            Ok(())
        }
        "renameCollection" => rename(r, op, o, phase),
        "createIndexes" => {
            let ns = named(op, target())?;
            let mut spec = without(o, &["createIndexes"]);
            spec.remove("ns");
            add_indexes(r, &ns, vec![spec]);
            Ok(())
        }
        "commitIndexBuild" => {
            let ns = named(op, target())?;
            let specs = match o.get_array("indexes") {
                Ok(a) => a
                    .into_iter()
                    .filter_map(|v| match v {
                        Ok(RawBsonRef::Document(d)) => Document::try_from(d).ok(),
                        _ => None,
                    })
                    .collect(),
                Err(_) => return Err(Replica::fail(op, "commitIndexBuild without `indexes`")),
            };
            add_indexes(r, &ns, specs);
            Ok(())
        }
        "dropIndexes" | "deleteIndexes" => {
            let ns = named(op, target())?;
            drop_indexes(r, &ns, o);
            Ok(())
        }
        "collMod" => {
            let ns = named(op, target())?;
            coll_mod(r, &ns, o);
            Ok(())
        }
        "emptycapped" => {
            let ns = named(op, target())?;
            let found = r.exists(&ns);
            acceptable(r, found);
            r.clear_documents(&ns)
        }
        "convertToCapped" => {
            let ns = named(op, target())?;
            let size = o.get("size").ok().flatten().and_then(bson_of);
            match r.coll_mut(&ns) {
                Some(c) => {
                    c.options.insert("capped", true);
                    if let Some(s) = size {
                        c.options.insert("size", s);
                    }
                }
                None => acceptable(r, false),
            }
            Ok(())
        }
        n if NO_DATA_CHANGE.contains(&n) => Ok(()),
        // The walk unpacks these; one reaching here sits where the walk does not
        // expect it (a nested transaction command).
        "applyOps" | "commitTransaction" | "abortTransaction" => Ok(()),
        other => r.refuse(op, phase, || {
            format!("the command `{other}` is not modelled")
        }),
    }
}

fn named(op: &Entry<'_>, ns: Option<String>) -> Result<String, ReplicaError> {
    ns.ok_or_else(|| Replica::fail(op, "the command does not name its collection as a string"))
}

/// Records an "acceptable" error (the operation found nothing to work on).
fn acceptable(r: &mut Replica, found: bool) {
    if !found {
        r.tolerated.acceptable += 1;
    }
}

fn bson_of(v: RawBsonRef<'_>) -> Option<Bson> {
    Bson::try_from(v).ok()
}

/// `o` as a document without the named fields, in its order.
fn without(o: &RawDocument, skip: &[&str]) -> Document {
    let mut d = Document::new();
    for (k, v) in o.iter().flatten() {
        if !skip.contains(&k) {
            if let Some(b) = bson_of(v) {
                d.insert(k, b);
            }
        }
    }
    d
}

fn create(
    r: &mut Replica,
    op: &Entry<'_>,
    o: &RawDocument,
    ns: Option<String>,
    phase: Phase,
) -> Result<(), ReplicaError> {
    let ns = named(op, ns)?;
    let options = without(o, &["create", "idIndex"]);
    let coll = ns.split_once('.').map_or("", |(_, c)| c);
    let (data_ns, kind) = if options.contains_key("viewOn") {
        (ns.clone(), CollKind::View)
    } else if coll.starts_with("system.buckets.") {
        // 5.0+ log the buckets collection's own `create` (with `timeseries`), then
        // the view as an insert into `system.views`.
        (ns.clone(), CollKind::TimeseriesBuckets)
    } else if options.contains_key("timeseries") {
        // The buckets collection holds the data; the view `db.X` is implied.
        let (db, coll) = ns.split_once('.').unwrap_or((&ns, ""));
        (
            format!("{db}.system.buckets.{coll}"),
            CollKind::TimeseriesBuckets,
        )
    } else {
        (ns.clone(), CollKind::Collection)
    };
    let uuid = op.ui.and_then(|u| <[u8; 16]>::try_from(u).ok());
    // Steady-state application (the slice, applied strictly) never renames an
    // existing collection out of the way: a create with a UUID over a collection of
    // that name with another UUID stops a secondary (`create_collection.cpp`
    // `createCollectionForApplyOps`: `invariant(!needsRenaming ||
    // allowRenameOutOfTheWay)`; `oplog.cpp` passes false for kSecondary).
    if phase == Phase::Strict {
        let existing = r.get(&data_ns).and_then(|c| c.uuid);
        if let (Some(new), Some(old)) = (uuid, existing) {
            if new != old {
                return Err(ReplicaError::CreateOverExisting {
                    ts: op.ts,
                    ns: data_ns,
                    existing_uuid: crate::oplog::entry::format_uuid(&old),
                    new_uuid: crate::oplog::entry::format_uuid(&new),
                });
            }
        }
    }
    // NamespaceExists is acceptable: an existing collection keeps its options
    // (`createCollectionForApplyOps` without a UUID match changes nothing).
    if r.exists(&data_ns) {
        acceptable(r, false);
        return Ok(());
    }
    let indexes = match kind {
        CollKind::View => Vec::new(),
        // Clustered collections (and time-series buckets, clustered by `_id`) have
        // no `_id` index.
        _ if options.contains_key("clusteredIndex") || kind == CollKind::TimeseriesBuckets => {
            Vec::new()
        }
        _ => match o.get_document("idIndex") {
            Ok(ix) => {
                let mut d = Document::try_from(ix).unwrap_or_default();
                d.remove("ns");
                vec![d]
            }
            Err(_) => vec![default_id_index()],
        },
    };
    r.create(&data_ns, |slot| {
        let mut c = CollInfo::new(slot, kind);
        c.options = options;
        c.indexes = indexes;
        c.uuid = uuid;
        c
    });
    Ok(())
}

/// `renameCollectionForApplyOps` (`src/mongo/db/catalog/rename_collection.cpp`), as
/// its tests in `rename_collection_test.cpp` pin it:
///
/// - the source is the collection of the entry's `ui` when it resolves, else the
///   named one; source = target: nothing;
/// - `dropTarget: true` drops an existing target; `dropTarget: <UUID>` drops the
///   collection with that UUID, wherever it is
///   (`RenameCollectionForApplyOpsDropTargetByUUIDEvenIfSourceDoesNotExist`), also
///   when the source is missing (`...DropTargetEvenIfSourceDoesNotExist`); a source
///   missing otherwise is NamespaceNotFound (`...SourceAndTargetDoNotExist`);
/// - a target still in the way (its UUID is not the `dropTarget` one) is moved aside
///   to a random `tmpXXXXX.rename` name by the server
///   (`...DropTargetByUUIDTargetExistsButRealDropTargetDoesNotExist`): a random name
///   cannot be reproduced, so this is refused (a primary never logs such a rename:
///   the two catalogs disagree);
/// - across databases, an existing target without `dropTarget` is NamespaceExists
///   and nothing is renamed (`RenameCollectionReturnsNamespaceExitsIfTargetExistsAndDropTargetIsFalse`);
///   the renamed collection is a copy with a new UUID, learnt from later entries;
/// - `temp` is cleared unless `stayTemp` (`RenameSameDatabaseStayTempFalse`,
///   `RenameDifferentDatabaseStayTempTrue`, ...).
fn rename(
    r: &mut Replica,
    op: &Entry<'_>,
    o: &RawDocument,
    phase: Phase,
) -> Result<(), ReplicaError> {
    let (Ok(from), Ok(to)) = (o.get_str("renameCollection"), o.get_str("to")) else {
        return Err(Replica::fail(
            op,
            "renameCollection without string `renameCollection`/`to`",
        ));
    };
    let by_uuid = if phase == Phase::Lenient {
        None
    } else {
        op.ui.and_then(|u| r.find_by_uuid(u))
    };
    let from = by_uuid.unwrap_or_else(|| from.to_string());
    if from == to {
        return Ok(());
    }
    enum DropTarget {
        No,
        Yes,
        Uuid([u8; 16]),
    }
    let drop_target = match o.get("dropTarget") {
        Ok(Some(RawBsonRef::Boolean(true))) => DropTarget::Yes,
        Ok(Some(RawBsonRef::Binary(b))) => match <[u8; 16]>::try_from(b.bytes) {
            // mongorestore strips UUIDs: the lenient model drops by name.
            Ok(u) if phase != Phase::Lenient => DropTarget::Uuid(u),
            _ => DropTarget::Yes,
        },
        _ => DropTarget::No,
    };
    let stay_temp = matches!(o.get("stayTemp"), Ok(Some(RawBsonRef::Boolean(true))));
    // The dropTarget collection goes first, whatever happens to the source.
    match drop_target {
        DropTarget::Uuid(u) => {
            match r.find_by_uuid(&u) {
                Some(ns) => {
                    r.drop_ns(&ns)?;
                }
                // A target whose UUID pitr never learnt is taken for the dropTarget.
                None if r.get(to).is_some_and(|c| c.uuid.is_none()) => {
                    r.drop_ns(to)?;
                }
                None => {}
            }
        }
        DropTarget::Yes => {
            r.drop_ns(to)?;
        }
        _ => {}
    }
    if !r.exists(&from) {
        if matches!(drop_target, DropTarget::No) {
            acceptable(r, false);
        }
        return Ok(());
    }
    let db_of = |ns: &str| ns.split_once('.').map_or(ns, |(d, _)| d).to_string();
    let across = db_of(&from) != db_of(to);
    if r.exists(to) {
        if across || phase == Phase::Lenient {
            if across {
                acceptable(r, false);
                return Ok(());
            }
            r.drop_ns(to)?;
        } else {
            return Err(ReplicaError::Unsupported {
                ts: op.ts,
                ns: to.to_string(),
                why: format!(
                    "the rename of `{from}` onto the existing `{to}` (whose UUID is not the entry's dropTarget) would move \
                     `{to}` aside to a random `tmpXXXXX.rename` name on a secondary"
                ),
            });
        }
    }
    r.rename_ns(&from, to);
    if let Some(c) = r.coll_mut(to) {
        if !stay_temp {
            c.options.remove("temp");
        }
        if across {
            c.uuid = None;
        }
    }
    Ok(())
}

fn add_indexes(r: &mut Replica, ns: &str, specs: Vec<Document>) {
    let Some(c) = r.get(ns) else {
        acceptable(r, false);
        return;
    };
    let specs: Vec<Document> = if c.kind == CollKind::TimeseriesBuckets {
        // Index specs on the buckets collection are in bucket terms (`meta`,
        // `control.min.t`); the catalog keeps them as `listIndexes` on the
        // time-series collection shows them, which is what mongodump dumps (and what
        // a backup's metadata already holds). One the server would not list is not
        // dumped either: counted.
        let listed: Vec<Document> = specs
            .iter()
            .filter_map(|spec| timeseries::listed_index(&c.options, spec))
            .collect();
        r.tolerated.unlisted_indexes += (specs.len() - listed.len()) as u64;
        listed
    } else {
        specs
    };
    let Some(c) = r.coll_mut(ns) else {
        return;
    };
    let mut dup = false;
    for spec in specs {
        let name = spec.get_str("name").unwrap_or("").to_string();
        if c.indexes
            .iter()
            .any(|ix| ix.get_str("name") == Ok(name.as_str()))
        {
            dup = true; // IndexAlreadyExists
            continue;
        }
        c.indexes.push(spec);
    }
    if dup {
        acceptable(r, false);
    }
}

fn drop_indexes(r: &mut Replica, ns: &str, o: &RawDocument) {
    let Some(c) = r.coll_mut(ns) else {
        acceptable(r, false);
        return;
    };
    let which = o.get("index").ok().flatten().and_then(bson_of);
    let mut missing = false;
    match which {
        Some(Bson::String(s)) if s == "*" => {
            c.indexes.retain(|ix| ix.get_str("name") == Ok("_id_"))
        }
        Some(Bson::Array(names)) => {
            for n in names {
                match c.find_index(&n) {
                    Some(i) => {
                        c.indexes.remove(i);
                    }
                    None => missing = true,
                }
            }
        }
        Some(by) => match c.find_index(&by) {
            Some(i) => {
                c.indexes.remove(i);
            }
            None => missing = true,
        },
        None => missing = true,
    }
    if missing {
        acceptable(r, false);
    }
}

/// Option keys `collMod` copies into the collection options; `index` changes one
/// index; anything else (`noPadding`, `usePowerOf2Sizes`, `dryRun`, ...) changes no
/// listed option.
const COLLMOD_OPTIONS: &[&str] = &[
    "validator",
    "validationLevel",
    "validationAction",
    "expireAfterSeconds",
    "viewOn",
    "pipeline",
    "changeStreamPreAndPostImages",
    "timeseriesBucketsMayHaveMixedSchemaData",
];

fn coll_mod(r: &mut Replica, ns: &str, o: &RawDocument) {
    let Some(c) = r.coll_mut(ns) else {
        acceptable(r, false);
        return;
    };
    let mut missing = false;
    for (k, v) in o.iter().flatten() {
        if COLLMOD_OPTIONS.contains(&k) {
            if let Some(b) = bson_of(v) {
                // `expireAfterSeconds: "off"` removes the option (clustered TTL).
                if k == "expireAfterSeconds" && b == Bson::String("off".into()) {
                    c.options.remove(k);
                } else {
                    c.options.insert(k, b);
                }
            }
        } else if k == "index" {
            let Some(Bson::Document(spec)) = bson_of(v) else {
                continue;
            };
            let by = spec
                .get("name")
                .cloned()
                .or_else(|| spec.get("keyPattern").cloned());
            let Some(i) = by.and_then(|b| c.find_index(&b)) else {
                missing = true;
                continue;
            };
            let ix = &mut c.indexes[i];
            if let Some(secs) = spec.get("expireAfterSeconds") {
                ix.insert("expireAfterSeconds", secs.clone());
            }
            match spec.get("hidden") {
                Some(Bson::Boolean(true)) => {
                    ix.insert("hidden", true);
                }
                // Unhiding removes the field from the spec (`CollModCommand`
                // `hidden: false` -> `IndexCatalogEntry` spec without `hidden`).
                Some(Bson::Boolean(false)) => {
                    ix.remove("hidden");
                }
                _ => {}
            }
            for key in ["prepareUnique", "unique"] {
                if let Some(Bson::Boolean(true)) = spec.get(key) {
                    ix.insert(key, true);
                }
            }
        }
    }
    if missing {
        acceptable(r, false);
    }
}
