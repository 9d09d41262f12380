//! Routine operations: destructive-looking oplog entries that the server writes while
//! doing its ordinary job (aggregation output, TTL expiry, capped roll-over), each
//! with the reason it is routine and the server source that writes it.
//!
//! They are reported at severity `info` (with `routine` set), only when the user asks
//! (`find-drop --include-routine`), and are never chosen by `--until auto`. A routine
//! operation that may still have destroyed something the user cares about (a `$out`
//! that replaced a collection nothing else refreshes, a TTL index created or lowered
//! minutes before a mass expiry) says so in its details.

use serde::Serialize;

/// Why a finding is routine; the JSON value of `routine` in `find-drop --json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Routine {
    /// An aggregation `$out` (or a `mapReduce` with `out: replace`) renamed its
    /// temporary collection over its target with `dropTarget`.
    OutReplace,
    /// A temporary collection of `$out`/`mapReduce`/`convertToCapped` was dropped.
    TempDrop,
    /// The TTL monitor deleted expired documents (a TTL index, or a clustered
    /// collection's `expireAfterSeconds`).
    TtlExpiry,
    /// The TTL monitor deleted whole buckets of a time-series collection with
    /// `expireAfterSeconds`.
    TimeseriesExpiry,
    /// Inserts into a capped collection pushed its oldest documents out (replicated as
    /// deletes from 5.0).
    CappedRollover,
    /// A sharded cluster's old primary shard dropped its copy of an unsharded
    /// collection after `movePrimary` moved the database to another shard (found by
    /// `find-drop --cluster` from the config server's changelog).
    MovePrimaryCleanup,
}

impl Routine {
    pub fn as_str(self) -> &'static str {
        match self {
            Routine::OutReplace => "outReplace",
            Routine::TempDrop => "tempDrop",
            Routine::TtlExpiry => "ttlExpiry",
            Routine::TimeseriesExpiry => "timeseriesExpiry",
            Routine::CappedRollover => "cappedRollover",
            Routine::MovePrimaryCleanup => "movePrimaryCleanup",
        }
    }

    /// One sentence: why the server writes this and why it is not an incident.
    pub fn reason(self) -> &'static str {
        match self {
            Routine::OutReplace => {
                "$out (and mapReduce with out: replace) fills a temporary collection and renames it over \
                 its target with dropTarget: a scheduled refresh, not an incident"
            }
            Routine::TempDrop => {
                "the server drops a temporary collection when the $out, mapReduce or convertToCapped \
                 that filled it fails or is interrupted; it never held user data"
            }
            Routine::TtlExpiry => {
                "the TTL monitor deletes documents older than expireAfterSeconds (once a minute by default)"
            }
            Routine::TimeseriesExpiry => {
                "the TTL monitor deletes whole buckets of a time-series collection once all their \
                 measurements are older than expireAfterSeconds"
            }
            Routine::CappedRollover => {
                "a capped collection drops its oldest documents as new ones are inserted; from 5.0 the \
                 primary replicates those deletes"
            }
            Routine::MovePrimaryCleanup => {
                "movePrimary cloned the database's unsharded collections to its new primary shard, committed \
                 the move on the config server, then dropped the old primary's stale copies (not marked \
                 fromMigrate); the data lives on the new primary"
            }
        }
    }
}

/// How a temporary collection's name looks (after any `system.buckets.` prefix).
#[derive(Debug)]
pub enum TempName {
    /// Starts with this.
    Prefix(&'static str),
    /// `tmp` + five random characters (`makeUniqueCollectionName` fills the `%%%%%`
    /// of its model) + this marker.
    TmpMarker(&'static str),
}

/// One kind of temporary collection the server creates, fills, and then renames over
/// a target or drops.
#[derive(Debug)]
pub struct TempCollection {
    pub name: TempName,
    /// What creates it, for details.
    pub what: &'static str,
    /// True when renaming it over its target is a routine refresh (`$out`,
    /// `mapReduce`). False for temporary collections of user commands whose rename
    /// over the target does lose data (`convertToCapped`: documents that did not fit;
    /// cross-database `renameCollection`): those stay incidents, only their drops
    /// are routine.
    pub rename_is_routine: bool,
}

/// The temporary collections, each with the source that names it.
///
/// Recognised by name, not by `temp: true`: shard servers create `$out`'s temporary
/// collection without that option from 7.1 (mongo `ShardServerProcessInterface::
/// createTempCollection`: "we don't set the 'temp: true' option"), and old oplogs may
/// not carry it. `temp: true` is still read and mentioned in details.
pub const TEMP_COLLECTIONS: &[TempCollection] = &[
    TempCollection {
        // mongo src/mongo/db/pipeline/document_source_out.cpp, DocumentSourceOut::
        // initialize (4.4-7.0: `db + ".tmp.agg_out." + UUID::gen()`; 7.1+:
        // NamespaceString::kOutTmpCollectionPrefix + UUID), created with `temp: true`
        // (NonShardServerProcessInterface::createTempCollection) and the target's
        // options and indexes, then `renameIfOptionsAndIndexesHaveNotChanged(...,
        // dropTarget=true, stayTemp=false)` in finalize. Before 4.4 the suffix was a
        // counter (`aggOutCounter`). mapReduce with `out: replace` is translated to
        // `$out` from 4.4 (mr_common.cpp translateOutReplace), so it writes the same.
        name: TempName::Prefix("tmp.agg_out."),
        what: "$out (or mapReduce with out: replace)",
        rename_is_routine: true,
    },
    TempCollection {
        // mapReduce before 4.4 (mr.cpp State::State): `<outDb>.tmp.mr.<coll>_<n>`,
        // created with `temp: true`, renamed over the output for `replace` or merged
        // into it and dropped for `merge`/`reduce`.
        name: TempName::Prefix("tmp.mr."),
        what: "mapReduce (before 4.4)",
        rename_is_routine: true,
    },
    TempCollection {
        // convertToCapped (capped_utils.cpp convertToCapped: model
        // "tmp%%%%%.convertToCapped." + source), filled by cloneCollectionAsCapped and
        // renamed over the collection with dropTarget. Documents that do not fit the
        // cap are lost, so that rename stays an incident (scanner.rs); a drop of the
        // temporary collection after a failure is routine.
        name: TempName::TmpMarker(".convertToCapped."),
        what: "convertToCapped",
        rename_is_routine: false,
    },
    TempCollection {
        // renameCollection across databases (rename_collection.cpp renameBetweenDBs:
        // model "tmp%%%%%.renameCollection"): the source is copied into it, it is
        // renamed over the target, the source is dropped; "it will be removed if we
        // fail to copy". The rename with dropTarget is the user's own and stays an
        // incident.
        name: TempName::TmpMarker(".renameCollection"),
        what: "a cross-database renameCollection",
        rename_is_routine: false,
    },
];

/// `db.coll`'s collection part, without a `system.buckets.` prefix: time-series
/// `$out` (7.1+) writes `system.buckets.tmp.agg_out.<UUID>` (document_source_out.cpp
/// makeBucketNsIfTimeseries).
fn data_coll(coll: &str) -> &str {
    coll.strip_prefix("system.buckets.").unwrap_or(coll)
}

/// The temporary-collection row `coll` (a collection name, no database) matches.
pub fn temp_collection(coll: &str) -> Option<&'static TempCollection> {
    let c = data_coll(coll);
    TEMP_COLLECTIONS.iter().find(|t| match t.name {
        TempName::Prefix(p) => c.starts_with(p),
        TempName::TmpMarker(m) => {
            c.len() > 8 && c.starts_with("tmp") && c.is_char_boundary(8) && c[8..].starts_with(m)
        }
    })
}

/// For a namespace `db.coll`, its temporary-collection row.
pub fn temp_namespace(ns: &str) -> Option<&'static TempCollection> {
    ns.split_once('.').and_then(|(_, c)| temp_collection(c))
}

/// How soon after a TTL index is created (or lowered) a TTL expiry counts as the
/// mass expiry that change caused: the TTL monitor runs every 60 s
/// (`ttlMonitorSleepSecs`), and a large first pass can take several sub-passes.
pub const TTL_CHANGE_CAVEAT_SECS: u32 = 15 * 60;

/// A collection created at most this long before its TTL index is new: documents it
/// expires were inserted after the index existed, so the expiry is the index doing
/// what it was created for.
pub const FRESH_COLLECTION_SECS: u32 = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_collections_by_name() {
        // Shapes from document_source_out.cpp (4.4+ UUID, older counter), time-series
        // $out (7.1+), mapReduce before 4.4, convertToCapped.
        for (coll, what, routine) in [
            (
                "tmp.agg_out.0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
                "$out",
                true,
            ),
            ("tmp.agg_out.17", "$out", true),
            (
                "system.buckets.tmp.agg_out.9c79fa0c-4512-42ae-97bf-50d958271143",
                "$out",
                true,
            ),
            ("tmp.mr.orders_3", "mapReduce", true),
            ("tmpAb12c.convertToCapped.events", "convertToCapped", false),
            ("tmpZ9x8Y.renameCollection", "a cross-database", false),
        ] {
            let t = temp_collection(coll).unwrap_or_else(|| panic!("{coll}"));
            assert!(t.what.starts_with(what), "{coll}: {}", t.what);
            assert_eq!(t.rename_is_routine, routine, "{coll}");
        }
        for coll in [
            "orders",
            "tmp",
            "tmpfiles",
            "agg_out.x",
            "system.buckets.weather",
            "tmp.convertToCapped.events",
            "tmpAb12c.renamed",
        ] {
            assert!(temp_collection(coll).is_none(), "{coll}");
        }
        assert!(temp_namespace("reports.tmp.agg_out.x").is_some());
        assert!(temp_namespace("reports.daily").is_none());
    }

    #[test]
    fn every_routine_kind_has_a_json_name_and_a_reason() {
        for r in [
            Routine::OutReplace,
            Routine::TempDrop,
            Routine::TtlExpiry,
            Routine::TimeseriesExpiry,
            Routine::CappedRollover,
            Routine::MovePrimaryCleanup,
        ] {
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::Value::String(r.as_str().into())
            );
            assert!(!r.reason().is_empty());
        }
    }
}
