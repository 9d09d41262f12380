//! The drop of a sharded collection, as each member logs it.
//!
//! 7.x shape (server `src/mongo/db/s/drop_collection_coordinator.cpp`, the stored
//! 7.x-era source; table in shared/reference/sharded-pitr.md §2): the coordinator (on
//! the database's primary shard) persists its state document, takes the critical
//! section on every shard, removes the metadata from the config server
//! (`sharding_ddl_util.cpp` `removeCollAndChunksMetadataFromConfig`: the
//! `config.collections` delete and a `config.placementHistory` insert in one internal
//! transaction, then the `config.chunks` deletes by uuid), sends the drop to every
//! non-primary shard with `fromMigrate: true` (`op_observer_impl.cpp`
//! `onDropCollection`: `setFromMigrateIfTrue(markFromMigrate)`), drops on the primary
//! shard last (plain), and writes the changelog. Every shard's drop carries the same
//! `ui` (= `config.collections.uuid`) and its own `o2.numRecords`.
//!
//! 5.0 shape (the early 5.0 coordinator, server commit 011dba7c): the same order, but
//! plain drops on every shard, the metadata deletes as separate entries (no
//! `placementHistory`, which 7.0 added). Whether that coordinator took critical
//! sections is not modelled: they are inserts into internal namespaces either way.

use bson::{doc, Bson};
use pitr::oplog::Ts;

use super::sim::{uuid_bson, Cluster};
use super::truth::{Incident, MemberEntry};

/// Which server generation's DDL shapes to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DdlShape {
    /// 7.0-era: non-primary shards drop with fromMigrate: true.
    V7,
    /// 5.0: plain drops on every shard.
    V5,
}

impl DdlShape {
    pub fn name(self) -> &'static str {
        match self {
            DdlShape::V7 => "v7",
            DdlShape::V5 => "v5",
        }
    }
}

/// The destructive DDL the timeline plants at 200 s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Ddl {
    /// `db.orders.drop()` of the sharded `shop.orders` ([`drop_sharded`]).
    #[default]
    Drop,
    /// `db.dropDatabase()` of `shop` ([`drop_database`]); no `movePrimary` after it.
    DropDatabase,
    /// `shop.events` renamed over `shop.orders` with `dropTarget` ([`rename_over`]):
    /// both sharded; the application then writes its orders to the renamed collection.
    RenameOver,
}

const CONFIG: usize = usize::MAX;

/// Drops the sharded collection `ns` through mongos at `now_ms`; returns the incident.
// Long: one DDL across every member, step by step as the coordinator runs it; split,
// the order of the steps (which is what the tests check) would be harder to read.
pub fn drop_sharded(c: &mut Cluster, now_ms: i64, ns: &str, shape: DdlShape) -> Incident {
    let si = c.sharded(ns);
    let s = c.sharded[si].clone();
    let (db, coll) = ns.split_once('.').expect("db.coll");
    let cmd_ns = format!("{db}.$cmd");
    let primary = c.primary;
    let mut at = now_ms;
    fn step(at: &mut i64, ms: i64) -> i64 {
        *at += ms;
        *at
    }
    // The coordinator's causal chain: every message carries the newest time seen.
    let mut ct = c.router;
    let mut members = Vec::new();
    let log = |c: &mut Cluster, m: usize, at: i64, ct: &mut Ts, d: bson::Document| {
        let ts = c.member(m).log(at, *ct, d);
        *ct = (*ct).max(ts);
        ts
    };
    let changelog = |what: &str, at: i64| {
        doc! { "op": "i", "ns": "config.changelog", "ui": uuid_bson(&[8; 16]),
        "o": { "_id": format!("cfg-{at}-{what}"), "what": what, "ns": ns, "details": {} } }
    };
    log(
        c,
        primary,
        step(&mut at, 2),
        &mut ct,
        doc! { "op": "i", "ns": "config.system.sharding_ddl_coordinators", "ui": uuid_bson(&[10; 16]),
        "o": { "_id": { "namespace": ns, "operationType": "dropCollection" }, "phase": "unset" } },
    );
    log(
        c,
        CONFIG,
        step(&mut at, 3),
        &mut ct,
        changelog("dropCollection.start", at),
    );
    log(
        c,
        CONFIG,
        step(&mut at, 2),
        &mut ct,
        doc! { "op": "u", "ns": "config.collections", "ui": uuid_bson(&[6; 16]),
        "o": { "$v": 2, "diff": { "u": { "allowMigrations": false } } }, "o2": { "_id": ns } },
    );
    if shape == DdlShape::V7 {
        for shard in 0..c.data_shards {
            log(
                c,
                shard,
                step(&mut at, 2),
                &mut ct,
                doc! { "op": "i", "ns": "config.collection_critical_sections", "ui": uuid_bson(&[11; 16]),
                "o": { "_id": ns, "reason": { "command": "dropCollection", "_id": ns } } },
            );
        }
    }
    // The metadata goes first: the first destructive entry of the incident.
    let first = match shape {
        DdlShape::V7 => log(
            c,
            CONFIG,
            step(&mut at, 3),
            &mut ct,
            doc! { "lsid": { "id": uuid_bson(&[12; 16]), "uid": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 32] }), "txnUUID": uuid_bson(&[13; 16]) },
            "txnNumber": 0i64, "op": "c", "ns": "admin.$cmd",
            "o": { "applyOps": [
                { "op": "d", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": { "_id": ns } },
                { "op": "i", "ns": "config.placementHistory", "ui": uuid_bson(&[14; 16]),
                  "o": { "_id": bson::oid::ObjectId::from_bytes([1; 12]), "nss": ns, "uuid": uuid_bson(&s.uuid), "shards": [] } } ] } },
        ),
        DdlShape::V5 => log(
            c,
            CONFIG,
            step(&mut at, 3),
            &mut ct,
            doc! { "op": "d", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": { "_id": ns } },
        ),
    };
    c.logical
        .ops
        .push((first, super::truth::LogicalOp::Drop { ns: ns.to_string() }));
    let mut chunks_last = first;
    for ch in &s.chunks {
        chunks_last = log(
            c,
            CONFIG,
            step(&mut at, 1),
            &mut ct,
            doc! { "op": "d", "ns": "config.chunks", "ui": uuid_bson(&[7; 16]), "o": { "_id": ch.id } },
        );
    }
    let what = match shape {
        DdlShape::V7 => "config.collections delete (applyOps) and config.chunks deletes",
        DdlShape::V5 => "config.collections and config.chunks deletes",
    };
    members.push(MemberEntry::new("config", first, chunks_last, what));
    // Non-primary shards first, then the primary.
    let order: Vec<usize> = (0..c.shards.len())
        .filter(|&k| k != primary)
        .chain(std::iter::once(primary))
        .collect();
    let mut last = chunks_last;
    for shard in order {
        let n = c.shards[shard].count(ns);
        if n == 0 && shard != primary && shard >= c.data_shards {
            // An idle shard never had the collection: the coordinator's drop there
            // is a no-op that logs nothing.
            continue;
        }
        let from_migrate = shape == DdlShape::V7 && shard != primary;
        let mut d = doc! { "op": "c", "ns": &cmd_ns, "ui": uuid_bson(&s.uuid), "o": { "drop": coll }, "o2": { "numRecords": n as i64 } };
        if from_migrate {
            d.insert("fromMigrate", true);
        }
        let ts = log(c, shard, step(&mut at, 4), &mut ct, d);
        c.shards[shard].colls.remove(ns);
        last = ts;
        let mut e = MemberEntry::new(&c.shards[shard].id.clone(), ts, ts, "drop");
        e.from_migrate = from_migrate;
        e.num_records = Some(n as u64);
        members.push(e);
    }
    // The changelog's end entry destroys nothing: not the incident's last entry.
    log(
        c,
        CONFIG,
        step(&mut at, 3),
        &mut ct,
        changelog("dropCollection", at),
    );
    if shape == DdlShape::V7 {
        for shard in 0..c.data_shards {
            log(
                c,
                shard,
                step(&mut at, 1),
                &mut ct,
                doc! { "op": "d", "ns": "config.collection_critical_sections", "ui": uuid_bson(&[11; 16]), "o": { "_id": ns } },
            );
        }
    }
    log(
        c,
        primary,
        step(&mut at, 2),
        &mut ct,
        doc! { "op": "d", "ns": "config.system.sharding_ddl_coordinators", "ui": uuid_bson(&[10; 16]),
        "o": { "_id": { "namespace": ns, "operationType": "dropCollection" } } },
    );
    c.router = c.router.max(ct);
    c.sharded.remove(si);
    let num_records: u64 = members.iter().filter_map(|m| m.num_records).sum();
    Incident {
        kind: "drop",
        ns: ns.to_string(),
        cluster_limit: first,
        last_ts: last,
        count: 1,
        num_records: Some(num_records),
        members,
    }
}

/// Drops the database `db` through mongos at `now_ms`; returns the incident.
///
/// The coordinator (server `src/mongo/db/s/drop_database_coordinator.cpp`; the early
/// 5.0 one at commit 011dba7c, and the 7.x-era order in
/// shared/reference/sharded-pitr.md §1): each sharded collection of the database
/// dropped as [`drop_sharded`] drops it (metadata off the config server, then every
/// shard's drop), then the database on its primary shard (a replica set's
/// `dropDatabase`: one `drop` per remaining collection, then `{dropDatabase: 1}`,
/// shared/reference/oplog-format.md), then on every other shard that has it (plain in
/// both shapes; an idle shard never had it and logs nothing). The config server's
/// `config.databases` delete comes before the shards' `dropDatabase`s in 5.0
/// (`removeDatabaseMetadataFromConfig` first) and after them in 7.x.
pub fn drop_database(c: &mut Cluster, now_ms: i64, db: &str, shape: DdlShape) -> Incident {
    let prefix = format!("{db}.");
    let mut sharded: Vec<String> = c
        .sharded
        .iter()
        .filter(|s| s.ns.starts_with(&prefix))
        .map(|s| s.ns.clone())
        .collect();
    sharded.sort();
    let mut at = now_ms;
    let mut members: Vec<MemberEntry> = Vec::new();
    let mut first = None;
    let mut num_records = 0;
    for ns in &sharded {
        let inc = drop_sharded(c, at, ns, shape);
        first.get_or_insert(inc.cluster_limit);
        num_records += inc.num_records.unwrap_or(0);
        members.extend(inc.members);
        at += 60;
    }
    let first = first.expect("the database has a sharded collection");
    let cmd_ns = format!("{db}.$cmd");
    let mut ct = c.router;
    let databases_delete = |c: &mut Cluster,
                            at: i64,
                            ct: &mut Ts,
                            members: &mut Vec<MemberEntry>| {
        let ts = c.config.log(
            at,
            *ct,
            doc! { "op": "d", "ns": "config.databases", "ui": uuid_bson(&[4; 16]), "o": { "_id": db } },
        );
        *ct = (*ct).max(ts);
        members.push(MemberEntry::new(
            "config",
            ts,
            ts,
            "config.databases delete",
        ));
        ts
    };
    if shape == DdlShape::V5 {
        at += 5;
        databases_delete(c, at, &mut ct, &mut members);
    }
    // The primary first, then the other shards holding the database.
    let order: Vec<usize> = std::iter::once(c.primary)
        .chain((0..c.data_shards).filter(|&k| k != c.primary))
        .collect();
    let mut last = first;
    for shard in order {
        let mut local: Vec<String> = c.shards[shard]
            .colls
            .keys()
            .filter(|ns| ns.starts_with(&prefix))
            .cloned()
            .collect();
        local.sort();
        let mut part_first = None;
        for ns in &local {
            let (_, coll) = ns.split_once('.').expect("db.coll");
            let n = c.shards[shard].count(ns);
            let uuid = c.shards[shard].colls[ns].uuid;
            at += 4;
            let ts = c.shards[shard].log(
                at,
                ct,
                doc! { "op": "c", "ns": &cmd_ns, "ui": uuid_bson(&uuid), "o": { "drop": coll }, "o2": { "numRecords": n as i64 } },
            );
            ct = ct.max(ts);
            part_first.get_or_insert(ts);
            num_records += n as u64;
            c.shards[shard].colls.remove(ns);
            c.logical
                .ops
                .push((first, super::truth::LogicalOp::Drop { ns: ns.clone() }));
        }
        at += 4;
        let ts = c.shards[shard].log(
            at,
            ct,
            doc! { "op": "c", "ns": &cmd_ns, "o": { "dropDatabase": 1 } },
        );
        ct = ct.max(ts);
        last = ts;
        let id = c.shards[shard].id.clone();
        members.push(MemberEntry::new(
            &id,
            part_first.unwrap_or(ts),
            ts,
            "dropDatabase",
        ));
    }
    if shape == DdlShape::V7 {
        at += 5;
        last = databases_delete(c, at, &mut ct, &mut members);
    }
    c.router = c.router.max(ct);
    c.unsharded.retain(|(ns, _)| !ns.starts_with(&prefix));
    Incident {
        kind: "dropDatabase",
        ns: db.to_string(),
        cluster_limit: first,
        last_ts: last,
        count: 1,
        num_records: Some(num_records),
        members: per_member(members),
    }
}

/// One part per member: its first and last destructive entry of the operation.
fn per_member(parts: Vec<MemberEntry>) -> Vec<MemberEntry> {
    let mut out: Vec<MemberEntry> = Vec::new();
    for p in parts {
        match out.iter_mut().find(|o| o.member == p.member) {
            Some(o) => {
                o.ts = o.ts.min(p.ts);
                o.last_ts = o.last_ts.max(p.last_ts);
                o.from_migrate |= p.from_migrate;
                o.num_records = match (o.num_records, p.num_records) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                };
                if !o.what.contains(&p.what) {
                    o.what = format!("{}, {}", o.what, p.what);
                }
            }
            None => out.push(p),
        }
    }
    out
}

/// Renames the sharded collection `from` over the sharded `to` (`dropTarget: true`)
/// through mongos at `now_ms`; returns the incident.
///
/// 7.x shape (server `src/mongo/db/s/rename_collection_coordinator.cpp`, phases
/// `kBlockCrudAndRename` then `kRenameMetadata`): the coordinator (on the database's
/// primary shard) persists its state document and takes the critical sections, each
/// shard renames locally, the other shards first, marked `fromMigrate`
/// (`rename_collection_participant_service.cpp`: `markFromMigrate = thisShardId !=
/// primaryShardId`), the primary last; then the config server, in one internal
/// transaction (`renameCollectionMetadataInTransaction`): the target's
/// `config.collections` document deleted, the source's deleted, the source's
/// re-inserted under the target's name (its uuid and key kept), each with a
/// `config.placementHistory` insert; then the dropped target's `config.chunks`
/// deleted by uuid, as a drop deletes them. The first destructive entry is the first
/// shard's rename.
///
/// 5.0 shape (the early 5.0 coordinator, commit 011dba7c): the primary renames first,
/// then the other shards (plain), then `shardedRenameMetadata`: the target's
/// `config.collections` document and chunks deleted, the source's document inserted
/// under the target's name, the source's deleted, as separate entries.
///
/// Every shard's rename carries the source's uuid as `ui`, the target's as
/// `dropTarget`, and the target's document count as `o2.numRecords`
/// (`op_observer_impl.cpp` `onRenameCollection`).
// Long: one DDL across every member, step by step as the coordinator runs it.
pub fn rename_over(
    c: &mut Cluster,
    now_ms: i64,
    from: &str,
    to: &str,
    shape: DdlShape,
) -> Incident {
    let (fi, ti) = (c.sharded(from), c.sharded(to));
    let (src, dst) = (c.sharded[fi].clone(), c.sharded[ti].clone());
    let (db, _) = from.split_once('.').expect("db.coll");
    let cmd_ns = format!("{db}.$cmd");
    let primary = c.primary;
    let mut at = now_ms;
    let mut ct = c.router;
    let mut members = Vec::new();
    let log = |c: &mut Cluster, m: usize, at: &mut i64, ms: i64, ct: &mut Ts, d: bson::Document| {
        *at += ms;
        let ts = c.member(m).log(*at, *ct, d);
        *ct = (*ct).max(ts);
        ts
    };
    let coordinator = doc! { "namespace": from, "operationType": "renameCollection" };
    log(
        c,
        primary,
        &mut at,
        2,
        &mut ct,
        doc! { "op": "i", "ns": "config.system.sharding_ddl_coordinators",
        "ui": uuid_bson(&[10; 16]), "o": { "_id": coordinator.clone(), "phase": "unset", "to": to } },
    );
    let holders: Vec<usize> = (0..c.data_shards).collect();
    if shape == DdlShape::V7 {
        for &k in &holders {
            log(
                c,
                k,
                &mut at,
                2,
                &mut ct,
                doc! { "op": "i", "ns": "config.collection_critical_sections",
                "ui": uuid_bson(&[11; 16]), "o": { "_id": from, "reason": { "command": "rename", "from": from, "to": to } } },
            );
        }
    }
    let order: Vec<usize> = match shape {
        DdlShape::V7 => holders
            .iter()
            .copied()
            .filter(|&k| k != primary)
            .chain([primary])
            .collect(),
        DdlShape::V5 => std::iter::once(primary)
            .chain(holders.iter().copied().filter(|&k| k != primary))
            .collect(),
    };
    let (_, from_coll) = from.split_once('.').expect("db.coll");
    let mut first = None;
    let mut last = Ts::ZERO;
    let mut num_records = 0;
    for shard in order {
        let n = c.shards[shard].count(to);
        let mut d = doc! { "op": "c", "ns": &cmd_ns, "ui": uuid_bson(&src.uuid),
        "o": { "renameCollection": from, "to": to, "stayTemp": false, "dropTarget": uuid_bson(&dst.uuid) },
        "o2": { "numRecords": n as i64 } };
        let from_migrate = shape == DdlShape::V7 && shard != primary;
        if from_migrate {
            d.insert("fromMigrate", true);
        }
        let ts = log(c, shard, &mut at, 4, &mut ct, d);
        first.get_or_insert(ts);
        last = ts;
        num_records += n as u64;
        let moved = c.shards[shard].colls.remove(from).unwrap_or_default();
        c.shards[shard].colls.insert(to.to_string(), moved);
        let id = c.shards[shard].id.clone();
        let mut e = MemberEntry::new(
            &id,
            ts,
            ts,
            format!("renameCollection {from_coll} over {to}"),
        );
        e.from_migrate = from_migrate;
        e.num_records = Some(n as u64);
        members.push(e);
    }
    let first = first.expect("data shards hold the collection");
    c.logical.ops.push((
        first,
        super::truth::LogicalOp::Rename {
            from: from.to_string(),
            to: to.to_string(),
        },
    ));
    // The source's config.collections document under the target's name.
    let renamed = doc! { "_id": to, "lastmodEpoch": src.epoch, "uuid": uuid_bson(&src.uuid),
    "key": { src.key: if src.hashed { bson::Bson::from("hashed") } else { bson::Bson::Int32(1) } },
    "unique": false, "noBalance": false };
    let history = |ns: &str, uuid: &[u8; 16], n: u8| {
        doc! { "op": "i", "ns": "config.placementHistory",
        "ui": uuid_bson(&[14; 16]), "o": { "_id": bson::oid::ObjectId::from_bytes([n; 12]), "nss": ns, "uuid": uuid_bson(uuid), "shards": [] } }
    };
    let mut config_last = Ts::ZERO;
    let config_first = match shape {
        DdlShape::V7 => log(
            c,
            CONFIG,
            &mut at,
            3,
            &mut ct,
            doc! {
            "lsid": { "id": uuid_bson(&[15; 16]), "uid": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 32] }), "txnUUID": uuid_bson(&[16; 16]) },
            "txnNumber": 0i64, "op": "c", "ns": "admin.$cmd",
            "o": { "applyOps": [
                { "op": "d", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": { "_id": to } },
                history(to, &dst.uuid, 2),
                { "op": "d", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": { "_id": from } },
                history(from, &src.uuid, 3),
                { "op": "i", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": renamed },
                history(to, &src.uuid, 4) ] } },
        ),
        DdlShape::V5 => {
            let ts = log(
                c,
                CONFIG,
                &mut at,
                3,
                &mut ct,
                doc! { "op": "d", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": { "_id": to } },
            );
            for ch in &dst.chunks {
                log(
                    c,
                    CONFIG,
                    &mut at,
                    1,
                    &mut ct,
                    doc! { "op": "d", "ns": "config.chunks", "ui": uuid_bson(&[7; 16]), "o": { "_id": ch.id } },
                );
            }
            log(
                c,
                CONFIG,
                &mut at,
                2,
                &mut ct,
                doc! { "op": "i", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": renamed },
            );
            // The source's document re-keyed: part of the rename's span.
            config_last = log(
                c,
                CONFIG,
                &mut at,
                2,
                &mut ct,
                doc! { "op": "d", "ns": "config.collections", "ui": uuid_bson(&[6; 16]), "o": { "_id": from } },
            );
            ts
        }
    };
    config_last = config_last.max(config_first);
    if shape == DdlShape::V7 {
        for ch in &dst.chunks {
            config_last = log(
                c,
                CONFIG,
                &mut at,
                1,
                &mut ct,
                doc! { "op": "d", "ns": "config.chunks", "ui": uuid_bson(&[7; 16]), "o": { "_id": ch.id } },
            );
        }
        for &k in &holders {
            log(
                c,
                k,
                &mut at,
                1,
                &mut ct,
                doc! { "op": "d", "ns": "config.collection_critical_sections",
                "ui": uuid_bson(&[11; 16]), "o": { "_id": from } },
            );
        }
    }
    members.push(MemberEntry::new(
        "config",
        config_first,
        config_last,
        "config.collections and config.chunks of the target deleted",
    ));
    log(
        c,
        primary,
        &mut at,
        2,
        &mut ct,
        doc! { "op": "d", "ns": "config.system.sharding_ddl_coordinators",
        "ui": uuid_bson(&[10; 16]), "o": { "_id": coordinator } },
    );
    c.router = c.router.max(ct);
    // The source's routing, under the target's name.
    c.sharded.retain(|s| s.ns != to);
    let si = c.sharded(from);
    c.sharded[si].ns = to.to_string();
    Incident {
        kind: "renameDropTarget",
        ns: to.to_string(),
        cluster_limit: first.min(config_first),
        last_ts: last.max(config_last),
        count: 1,
        num_records: Some(num_records),
        members,
    }
}
