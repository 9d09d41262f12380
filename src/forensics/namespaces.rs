//! Which namespaces hold user data, and which are the server's own bookkeeping.
//!
//! Activity on internal namespaces is never reported: deleting expired sessions from
//! `config.system.sessions` or trimming `config.transactions` is the server doing its
//! job, not an incident. Each row says why it is internal.

/// `config.*` collections written by the server itself (sessions, transactions,
/// sharding metadata, migrations). Other `config.*` collections (e.g. `settings`,
/// `tags`, or anything a user created) are treated as user-visible.
const INTERNAL_CONFIG: &[(&str, &str)] = &[
    (
        "system.sessions",
        "logical sessions: the server expires and deletes them",
    ),
    (
        "transactions",
        "retryable-write/transaction records, reaped by the server",
    ),
    (
        "image_collection",
        "pre/post images for retryable findAndModify",
    ),
    ("system.indexBuilds", "index build bookkeeping"),
    ("rangeDeletions", "orphan cleanup after chunk migrations"),
    ("migrationCoordinators", "chunk migration state"),
    ("migrations", "chunk migration state"),
    ("chunks", "sharding metadata maintained by the balancer"),
    ("collections", "sharding metadata"),
    ("databases", "sharding metadata"),
    ("shards", "sharding metadata"),
    ("version", "sharding metadata"),
    ("locks", "distributed locks"),
    ("lockpings", "distributed lock pings"),
    ("mongos", "mongos ping records"),
    ("changelog", "sharding change log (capped)"),
    ("actionlog", "balancer action log (capped)"),
    ("placementHistory", "sharding placement history"),
    ("vectorClock", "cluster time bookkeeping"),
    ("tenantMigrationDonors", "tenant migration state"),
    ("tenantMigrationRecipients", "tenant migration state"),
    ("external_validation_keys", "cluster signing keys"),
    (
        "agg_temp_collections",
        "$out's temporary collections to garbage-collect on step-up (shard servers, 7.1+: \
         ShardServerProcessInterface::createTempCollection)",
    ),
];

/// `config.*` prefixes written by the server.
const INTERNAL_CONFIG_PREFIXES: &[(&str, &str)] = &[
    ("cache.", "routing table caches on shards"),
    ("system.", "server-managed system collections"),
    ("sampledQueries", "query sampling for analyzeShardKey"),
    ("analyzeShardKey", "analyzeShardKey state"),
];

/// True when `ns` (`db.coll`) is the server's own bookkeeping, never user data.
pub fn is_internal(ns: &str) -> bool {
    // Called for every delete and update a scan examines: most namespaces are
    // answered from their first bytes (no rule below matches a database name that
    // starts with neither `l`, `c` nor `_` and a collection that starts with
    // neither `s` nor `_`).
    let bytes = ns.as_bytes();
    let dot = bytes.iter().position(|&b| b == b'.');
    let (db, coll) = match dot {
        Some(d) => (&ns[..d], &ns[d + 1..]),
        None => (ns, ""),
    };
    if !matches!(db.as_bytes().first(), Some(b'l' | b'c' | b'_'))
        && !matches!(coll.as_bytes().first(), Some(b's' | b'_'))
    {
        return false;
    }
    match db {
        // The oplog itself, replica-set config, startup log: never user data.
        "local" => true,
        "config" => {
            INTERNAL_CONFIG.iter().any(|(c, _)| *c == coll)
                || INTERNAL_CONFIG_PREFIXES
                    .iter()
                    .any(|(p, _)| coll.starts_with(p))
        }
        _ => {
            // Two-phase drop (3.6/4.0) renames doomed collections to
            // `db.system.drop.<optime>.<coll>`; the real drop is logged separately.
            coll.starts_with("system.drop.")
                // Resharding and other server-internal temporary collections.
                || coll.starts_with("__mdb_internal")
                || db.starts_with("__mdb_internal")
        }
    }
}

/// For a time-series buckets collection `db.system.buckets.X`, the user-facing
/// name `db.X`.
pub fn timeseries_view(ns: &str) -> Option<String> {
    let (db, coll) = ns.split_once('.')?;
    coll.strip_prefix("system.buckets.")
        .map(|v| format!("{db}.{v}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_namespaces() {
        for ns in [
            "local.oplog.rs",
            "local.replset.minvalid",
            "config.system.sessions",
            "config.transactions",
            "config.cache.chunks.shop.orders",
            "shop.system.drop.1616670362i1t1.orders",
            "config.chunks",
        ] {
            assert!(is_internal(ns), "{ns} should be internal");
        }
        for ns in [
            "shop.orders",
            "config.settings",
            "config.myOwnThing",
            "admin.system.users",
            "shop.system.buckets.weather",
        ] {
            assert!(!is_internal(ns), "{ns} should be user-visible");
        }
    }

    #[test]
    fn timeseries_names() {
        assert_eq!(
            timeseries_view("db.system.buckets.weather").as_deref(),
            Some("db.weather")
        );
        assert_eq!(timeseries_view("db.weather"), None);
    }
}
