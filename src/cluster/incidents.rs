//! One logical incident per cluster operation, from the findings of every member's scan.
//!
//! A sharded cluster logs one user operation on several members (research note §2,
//! shared/reference/sharded-pitr.md): the drop of a sharded collection is a metadata
//! delete on the config server (`sharding_ddl_util.cpp`
//! `removeCollAndChunksMetadataFromConfig`), then a drop on every shard that has the
//! collection (`drop_collection_coordinator.cpp`: the non-primary shards first, marked
//! `fromMigrate` from 7.0 on, the database's primary last), all with the same
//! collection uuid `ui`; a `deleteMany` through mongos is a delete burst on every shard
//! owning matching documents. Reported per member, one drop would read as several
//! incidents, with limits after the data of the others is gone.
//!
//! The merge:
//! - drops and renames over a target: the members' findings with the same collection
//!   uuid (else the same namespace) within [`DDL_WINDOW_SECS`] of each other are one
//!   incident, with the config server's deletes of that namespace's
//!   `config.collections` document and the `config.chunks` run that follows it as
//!   evidence;
//! - dropDatabase: the members' findings for one database within the window, the
//!   drops of its collections, and the config server's `config.databases` /
//!   `config.collections` / `config.chunks` deletes for it;
//! - delete bursts and wiping updates: the same namespace on several members, their
//!   windows overlapping within the burst window: one burst, counts summed;
//! - anything else stays as found, on its member.
//!
//! The incident's limit is its first destructive entry across all members (often the
//! config server's metadata delete): `ts` values are ticks of one cluster clock, so
//! one exclusive limit cuts every member at the same cluster time (rule R1).

use serde::Serialize;

use crate::forensics::{Finding, Kind, MetadataDelete, Severity};
use crate::oplog::Ts;

use super::file::Role;

/// How far apart (seconds) the entries of one sharded DDL may be on different
/// members. A DDL coordinator runs its phases back to back, but each phase waits for
/// every shard (and retries after a step-down), so minutes are possible.
pub const DDL_WINDOW_SECS: u32 = 600;

/// What one member's scan found.
#[derive(Clone, Debug)]
pub struct MemberScan {
    pub member: String,
    pub role: Role,
    pub findings: Vec<Finding>,
    pub metadata: Vec<MetadataDelete>,
    /// The config server's `movePrimary` and resharding changelog entries.
    pub changelog: Changelog,
}

/// What the config server's `config.changelog` says of operations that move data
/// between shards without a user asking for data to go.
#[derive(Clone, Debug, Default)]
pub struct Changelog {
    pub moves: Vec<MovePrimary>,
    pub reshards: Vec<Reshard>,
}

/// One resharding of a collection (`reshardCollection`, `moveCollection`,
/// `unshardCollection`), from the coordinator's `resharding.coordinator.transition`
/// changelog entries (server `resharding_coordinator_service.cpp`
/// `_updateCoordinatorDocStateAndCatalogEntries`: `ns` the collection, `details` with
/// `newState`, `oldState` and `reshardingUUID`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reshard {
    pub ns: String,
    pub resharding_uuid: String,
    /// Its first and last transition entries.
    pub first: Ts,
    pub last: Ts,
    /// The last `newState` seen (`done` or `quiesced` when it finished).
    pub state: String,
}

impl Changelog {
    /// Reads one config server oplog entry (framed BSON): a `config.changelog` insert
    /// of a `movePrimary.<phase>` ([`MovePrimary::record`]) or of a resharding
    /// coordinator's state transition is recorded.
    pub fn feed(&mut self, doc: &[u8]) {
        let Ok(raw) = bson::RawDocument::from_bytes(doc) else {
            return;
        };
        if raw.get_str("ns") != Ok("config.changelog") || raw.get_str("op") != Ok("i") {
            return;
        }
        let (Ok(o), Ok(ts)) = (raw.get_document("o"), raw.get_timestamp("ts")) else {
            return;
        };
        let ts = Ts::new(ts.time, ts.increment);
        let what = o.get_str("what").unwrap_or("");
        let details = o.get_document("details").ok();
        let field = |k: &str| details.and_then(|d| d.get_str(k).ok()).unwrap_or("");
        let ns = o.get_str("ns").unwrap_or("");
        if let Some(phase) = what.strip_prefix("movePrimary.") {
            MovePrimary::record(&mut self.moves, phase, ns, field("from"), field("to"), ts);
        } else if what == "resharding.coordinator.transition" {
            let uuid = field("reshardingUUID");
            match self
                .reshards
                .iter_mut()
                .find(|r| r.resharding_uuid == uuid && r.ns == ns)
            {
                Some(r) => {
                    r.last = ts;
                    r.state = field("newState").to_string();
                }
                None => self.reshards.push(Reshard {
                    ns: ns.to_string(),
                    resharding_uuid: uuid.to_string(),
                    first: ts,
                    last: ts,
                    state: field("newState").to_string(),
                }),
            }
        }
    }
}

/// One `movePrimary` of a database, from the config server's `config.changelog`
/// entries (`what: "movePrimary.<phase>"`, `ns` the database, `details.from` and
/// `details.to` the shards: server `move_primary_coordinator.cpp` `logChange`; the
/// 4.x-6.x source manager logs `start` and `commit` only).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MovePrimary {
    pub db: String,
    pub from: String,
    pub to: String,
    pub start: Option<Ts>,
    pub commit: Option<Ts>,
    pub end: Option<Ts>,
}

impl MovePrimary {
    /// Adds one changelog entry (`what`, database, from, to, its ts) to `moves`: a
    /// `start` opens a move, `commit` and `end` complete the last open one of the
    /// database.
    pub fn record(
        moves: &mut Vec<MovePrimary>,
        what: &str,
        db: &str,
        from: &str,
        to: &str,
        ts: Ts,
    ) {
        let open = moves
            .iter_mut()
            .rev()
            .find(|m| m.db == db && m.end.is_none() && (what != "commit" || m.commit.is_none()));
        match (what, open) {
            ("start", _) | (_, None) => {
                moves.push(MovePrimary {
                    db: db.into(),
                    from: from.into(),
                    to: to.into(),
                    ..MovePrimary::default()
                });
                let m = moves.last_mut().expect("pushed");
                match what {
                    "start" => m.start = Some(ts),
                    "commit" => m.commit = Some(ts),
                    _ => m.end = Some(ts),
                }
            }
            ("commit", Some(m)) => m.commit = Some(ts),
            ("end", Some(m)) => m.end = Some(ts),
            _ => {}
        }
    }

    /// When the old primary drops its stale copies: from the commit to the `end`
    /// entry (7.0+: `dropStaleDataOnDonor` runs between them), or, with no `end`
    /// (older releases clean up after logging `commit`), within the DDL window.
    fn cleanup_window(&self) -> Option<(Ts, Ts)> {
        let commit = self.commit?;
        let end = self
            .end
            .unwrap_or(Ts::new(commit.t.saturating_add(DDL_WINDOW_SECS), u32::MAX));
        Some((commit, end))
    }
}

/// One member's part of an incident.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberPart {
    pub member: String,
    pub role: Role,
    /// The finding's kind on that member, or `metadata` for the config server's
    /// deletes of the sharding catalog.
    pub kind: &'static str,
    /// The finding's namespace; for `metadata`, the catalog collection.
    pub ns: String,
    /// For `metadata`: the deleted catalog document's `_id` (the collection's
    /// namespace, the database) when it has one; else null.
    pub id: Option<String>,
    pub ts: Ts,
    pub last_ts: Ts,
    pub count: u64,
    pub num_records: Option<i64>,
    /// A sharded DDL's participant entry (7.0+ non-primary shards).
    pub from_migrate: bool,
}

/// One logical incident of the cluster: a finding whose `ts` and `oplog_limit` are
/// its first destructive entry across members, plus each member's part.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterFinding {
    #[serde(flatten)]
    pub finding: Finding,
    pub members: Vec<MemberPart>,
}

fn part(member: &str, role: Role, f: &Finding) -> MemberPart {
    MemberPart {
        member: member.to_string(),
        role,
        kind: f.kind.as_str(),
        ns: f.ns.clone(),
        id: None,
        ts: f.ts,
        last_ts: f.last_ts,
        count: f.count,
        num_records: f.num_records,
        from_migrate: f.from_migrate,
    }
}

fn metadata_part(m: &MetadataDelete) -> MemberPart {
    MemberPart {
        member: "config".to_string(),
        role: Role::Config,
        kind: "metadata",
        ns: m.ns.clone(),
        id: m.id.clone(),
        ts: m.ts,
        last_ts: m.last_ts,
        count: m.count,
        num_records: None,
        from_migrate: false,
    }
}

/// A group being built: the findings (with their member) of one incident.
struct Group {
    kind: Kind,
    /// The collection uuid, the namespace, or the database it is keyed by.
    key: String,
    items: Vec<(String, Role, Finding)>,
    metadata: Vec<MetadataDelete>,
}

impl Group {
    fn first(&self) -> Ts {
        self.items
            .iter()
            .map(|(_, _, f)| f.ts)
            .min()
            .unwrap_or(Ts::MAX)
    }

    fn last(&self) -> Ts {
        self.items
            .iter()
            .map(|(_, _, f)| f.last_ts)
            .max()
            .unwrap_or(Ts::ZERO)
    }

    fn near(&self, f: &Finding, window: u32) -> bool {
        f.ts.t.saturating_add(window) >= self.first().t
            && self.last().t.saturating_add(window) >= f.ts.t
    }
}

/// The key a finding joins others by, if it is of a kind that spans members.
fn join_key(f: &Finding) -> Option<String> {
    match f.kind {
        Kind::Drop | Kind::RenameDropTarget => Some(f.uuid.clone().unwrap_or_else(|| f.ns.clone())),
        Kind::DropDatabase | Kind::DeleteBurst | Kind::WipingUpdate => Some(f.ns.clone()),
        _ => None,
    }
}

fn db_of(ns: &str) -> &str {
    ns.split_once('.').map_or(ns, |(db, _)| db)
}

/// Merges every member's findings into the cluster's incidents, in `ts` order; also
/// returns the config server's sharding-catalog deletes that no member's finding
/// explains (for a note: metadata gone with no data loss seen on any shard).
pub fn merge(
    scans: Vec<MemberScan>,
    burst_window: u32,
) -> (Vec<ClusterFinding>, Vec<MetadataDelete>) {
    let mut groups: Vec<Group> = Vec::new();
    let mut metadata: Vec<MetadataDelete> = Vec::new();
    let mut moves: Vec<MovePrimary> = Vec::new();
    let mut all: Vec<(String, Role, Finding)> = Vec::new();
    for s in scans {
        metadata.extend(s.metadata);
        moves.extend(s.changelog.moves);
        all.extend(
            s.findings
                .into_iter()
                .map(|f| (s.member.clone(), s.role, f)),
        );
    }
    // dropDatabase first, so the drops of its collections can join it.
    all.sort_by_key(|(_, _, f)| (f.kind != Kind::DropDatabase, f.ts));
    for (member, role, f) in all {
        let window = match f.kind {
            Kind::DeleteBurst | Kind::WipingUpdate => burst_window,
            _ => DDL_WINDOW_SECS,
        };
        let target = join_key(&f).and_then(|key| {
            groups.iter().position(|g| {
                let same = g.kind == f.kind && g.key == key;
                // A collection drop of a database being dropped belongs to it.
                let of_db =
                    g.kind == Kind::DropDatabase && f.kind == Kind::Drop && g.key == db_of(&f.ns);
                // One member's own incidents stay apart (two bursts, two dropDatabases).
                let other_member = !g.items.iter().any(|(m, _, _)| *m == member);
                ((same && other_member) || of_db) && g.near(&f, window)
            })
        });
        match target {
            Some(k) => groups[k].items.push((member, role, f)),
            None => groups.push(Group {
                kind: f.kind,
                key: join_key(&f).unwrap_or_default(),
                items: vec![(member, role, f)],
                metadata: Vec::new(),
            }),
        }
    }
    let unexplained = attach_metadata(&mut groups, metadata);
    for g in &mut groups {
        move_primary_cleanup(g, &moves);
    }
    let mut out: Vec<ClusterFinding> = groups.into_iter().map(finish).collect();
    out.sort_by(|a, b| {
        (a.finding.ts, a.finding.kind, &a.finding.ns).cmp(&(
            b.finding.ts,
            b.finding.kind,
            &b.finding.ns,
        ))
    });
    (out, unexplained)
}

/// Gives each drop, rename and dropDatabase incident the config server's deletes of
/// its metadata; returns those that belong to none.
fn attach_metadata(groups: &mut [Group], metadata: Vec<MetadataDelete>) -> Vec<MetadataDelete> {
    let mut unexplained = Vec::new();
    // The namespace or database each metadata delete names; a chunk run belongs to
    // the collection whose config.collections delete precedes it.
    let mut owner: Option<usize> = None;
    for m in metadata {
        let named = m.id.as_deref();
        let hit = match m.ns.as_str() {
            "config.collections" => groups.iter().position(|g| {
                let ns_of =
                    |g: &Group| g.items.iter().any(|(_, _, f)| Some(f.ns.as_str()) == named);
                let names = match g.kind {
                    Kind::Drop | Kind::RenameDropTarget => ns_of(g),
                    Kind::DropDatabase => named.is_some_and(|n| db_of(n) == g.key),
                    _ => false,
                };
                names && near_ts(g, m.ts)
            }),
            "config.databases" => groups.iter().position(|g| {
                g.kind == Kind::DropDatabase && named == Some(g.key.as_str()) && near_ts(g, m.ts)
            }),
            // config.chunks: the run right after the collection's metadata delete.
            _ => owner.filter(|&k| near_ts(&groups[k], m.ts)),
        };
        // A rename's re-key: the config server deletes the renamed collection's
        // document as it inserts it under the target's name (7.x: in the same
        // transaction as the target's delete, `rename_collection_coordinator.cpp`
        // `renameCollectionMetadataInTransaction`; 5.0: after it,
        // `sharding_ddl_util.cpp` `shardedRenameMetadata`). Part of the rename (a
        // limit must not cut between it and the rest); the chunk run that follows
        // still belongs to the dropped target.
        let rekey = if m.ns == "config.collections" && hit.is_none() {
            groups.iter().position(|g| {
                g.kind == Kind::RenameDropTarget
                    && g.items.iter().any(|(_, _, f)| {
                        f.renamed_from.is_some() && f.renamed_from.as_deref() == named
                    })
                    && near_ts(g, m.ts)
            })
        } else {
            None
        };
        if m.ns == "config.collections" && rekey.is_none() {
            owner = hit;
        }
        match hit.or(rekey) {
            Some(k) => groups[k].metadata.push(m),
            None => unexplained.push(m),
        }
    }
    unexplained
}

/// A drop on one shard alone, of a collection of a database that shard stopped
/// being the primary of (`movePrimary` committed), with no sharding metadata
/// deleted for it, inside the move's cleanup: the old primary dropping its stale
/// copy of an unsharded collection (`dropStaleDataOnDonor`, not marked
/// `fromMigrate`: percona-clustersync-mongodb PR #222). Routine, never an incident.
fn move_primary_cleanup(g: &mut Group, moves: &[MovePrimary]) {
    if g.kind != Kind::Drop || g.items.len() != 1 || !g.metadata.is_empty() {
        return;
    }
    let (member, _, f) = &mut g.items[0];
    let hit = moves.iter().any(|m| {
        m.from == *member
            && m.db == db_of(&f.ns)
            && m.cleanup_window()
                .is_some_and(|(from, to)| f.ts >= from && f.ts <= to)
    });
    if hit {
        f.make_routine(crate::forensics::Routine::MovePrimaryCleanup);
    }
}

fn near_ts(g: &Group, ts: Ts) -> bool {
    ts.t.saturating_add(DDL_WINDOW_SECS) >= g.first().t
        && g.last().t.saturating_add(DDL_WINDOW_SECS) >= ts.t
}

/// The incident of a group: limit at its first destructive entry on any member.
fn finish(g: Group) -> ClusterFinding {
    let mut parts: Vec<MemberPart> = g.metadata.iter().map(metadata_part).collect();
    parts.extend(g.items.iter().map(|(m, r, f)| part(m, *r, f)));
    parts.sort_by(|a, b| (a.ts, &a.member).cmp(&(b.ts, &b.member)));
    // The finding of the group's own kind (a dropDatabase's, not one of its
    // collection drops) is the base; the first entry of any part gives ts and wall.
    let (_, _, base) = g
        .items
        .iter()
        .filter(|(_, _, f)| f.kind == g.kind)
        .min_by_key(|(_, _, f)| f.ts)
        .expect("a group has a finding of its kind");
    let mut f = base.clone();
    if let Some((_, _, earlier)) = g
        .items
        .iter()
        .min_by_key(|(_, _, i)| i.ts)
        .filter(|(_, _, i)| i.ts < f.ts)
    {
        f.ts = earlier.ts;
        f.wall = earlier.wall;
    }
    if let Some(m) = g
        .metadata
        .iter()
        .min_by_key(|m| m.ts)
        .filter(|m| m.ts < f.ts)
    {
        // The config server's metadata delete comes first.
        f.ts = m.ts;
        f.wall = m.wall_ms.and_then(chrono::DateTime::from_timestamp_millis);
    }
    f.oplog_limit = f.ts;
    f.last_ts = parts.iter().map(|p| p.last_ts).max().unwrap_or(f.last_ts);
    f.severity = g
        .items
        .iter()
        .map(|(_, _, f)| f.severity)
        .max()
        .unwrap_or(Severity::Info);
    if g.items.iter().any(|(_, _, f)| !f.is_routine()) {
        f.routine = None;
        if f.severity == Severity::Info {
            f.severity = f.kind.severity();
        }
    }
    f.in_transaction = g.items.iter().any(|(_, _, f)| f.in_transaction);
    f.from_migrate = false;
    let shards: Vec<&Finding> = g.items.iter().map(|(_, _, f)| f).collect();
    if g.items.len() > 1 || !g.metadata.is_empty() {
        describe(&mut f, g.kind, &shards, g.items.len());
    }
    ClusterFinding {
        finding: f,
        members: parts,
    }
}

/// Counts and words of a merged incident.
fn describe(f: &mut Finding, kind: Kind, items: &[&Finding], members: usize) {
    let records: Vec<i64> = items
        .iter()
        .filter_map(|i| i.num_records)
        .filter(|n| *n >= 0)
        .collect();
    let all_known = records.len() == items.len();
    match kind {
        Kind::DeleteBurst | Kind::WipingUpdate => {
            f.count = items.iter().map(|i| i.count).sum();
            f.details = format!(
                "{} {} on {members} members (one operation through mongos fanned out to the shards)",
                f.count,
                if kind == Kind::DeleteBurst { "deletes" } else { "wiping updates" },
            );
        }
        Kind::DropDatabase => {
            let mut colls: Vec<String> = items
                .iter()
                .flat_map(|i| {
                    if i.kind == Kind::Drop {
                        vec![i.ns.clone()]
                    } else {
                        i.collections.clone()
                    }
                })
                .collect();
            colls.sort();
            colls.dedup();
            f.count = colls.len().max(1) as u64;
            f.collections = colls;
            f.num_records = all_known.then(|| records.iter().sum());
            f.details = format!(
                "database dropped on {members} member{}{}",
                if members == 1 { "" } else { "s" },
                sum_text(f.num_records)
            );
        }
        _ => {
            f.num_records = all_known.then(|| records.iter().sum());
            f.details = format!(
                "{} on {members} shard{}{}",
                if kind == Kind::Drop {
                    "sharded collection dropped"
                } else {
                    "renamed over, dropping the sharded target"
                },
                if members == 1 { "" } else { "s" },
                sum_text(f.num_records)
            );
        }
    }
}

fn sum_text(n: Option<i64>) -> String {
    match n {
        Some(n) => format!(
            " with {n} document{} (summed over shards; orphans, if any, included)",
            if n == 1 { "" } else { "s" }
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(kind: Kind, ns: &str, ts: Ts) -> Finding {
        let mut f = Finding::new(kind, ns, ts, None);
        f.last_ts = ts;
        f
    }

    fn drop(ns: &str, ts: Ts, uuid: &str, n: i64, from_migrate: bool) -> Finding {
        let mut f = finding(Kind::Drop, ns, ts);
        f.uuid = Some(uuid.into());
        f.num_records = Some(n);
        f.from_migrate = from_migrate;
        f
    }

    fn shard(id: &str, findings: Vec<Finding>) -> MemberScan {
        MemberScan {
            member: id.into(),
            role: Role::Shard,
            findings,
            metadata: Vec::new(),
            changelog: Changelog::default(),
        }
    }

    fn meta(ns: &str, id: Option<&str>, ts: Ts, count: u64) -> MetadataDelete {
        MetadataDelete {
            ns: ns.into(),
            id: id.map(str::to_string),
            ts,
            last_ts: ts,
            wall_ms: None,
            count,
        }
    }

    fn config(metadata: Vec<MetadataDelete>) -> MemberScan {
        MemberScan {
            member: "config".into(),
            role: Role::Config,
            findings: Vec::new(),
            metadata,
            changelog: Changelog::default(),
        }
    }

    #[test]
    fn one_sharded_drop_limit_at_the_config_servers_metadata_delete() {
        let (found, rest) = merge(
            vec![
                config(vec![
                    meta(
                        "config.collections",
                        Some("shop.orders"),
                        Ts::new(100, 3),
                        1,
                    ),
                    meta("config.chunks", None, Ts::new(100, 4), 5),
                ]),
                shard(
                    "rs0",
                    vec![drop("shop.orders", Ts::new(101, 2), "u1", 10, false)],
                ),
                shard(
                    "rs1",
                    vec![drop("shop.orders", Ts::new(100, 9), "u1", 7, true)],
                ),
            ],
            10,
        );
        assert!(rest.is_empty());
        assert_eq!(found.len(), 1);
        let f = &found[0].finding;
        assert_eq!(
            (f.ts, f.oplog_limit, f.last_ts),
            (Ts::new(100, 3), Ts::new(100, 3), Ts::new(101, 2))
        );
        assert_eq!(f.num_records, Some(17));
        assert!(f.details.contains("orphans"), "{}", f.details);
        let members: Vec<(&str, &str)> = found[0]
            .members
            .iter()
            .map(|p| (p.member.as_str(), p.kind))
            .collect();
        assert_eq!(
            members,
            [
                ("config", "metadata"),
                ("config", "metadata"),
                ("rs1", "drop"),
                ("rs0", "drop")
            ]
        );
    }

    fn changelog(what: &str, db: &str, ts: Ts) -> Vec<u8> {
        bson::to_vec(&bson::doc! {
            "op": "i", "ns": "config.changelog",
            "o": { "_id": format!("cfg-{}", ts.i), "what": what, "ns": db, "details": { "from": "shard0", "to": "shard1" } },
            "ts": bson::Timestamp { time: ts.t, increment: ts.i }, "t": 1i64,
        })
        .unwrap()
    }

    /// The old primary's drops of its stale copies after a movePrimary are routine;
    /// a drop of the same collection on the new primary, one before the commit, one
    /// on another database or after the end stay incidents.
    #[test]
    fn move_primary_cleanup_drops_are_routine() {
        let mut log = Changelog::default();
        for (what, ts) in [
            ("movePrimary.start", Ts::new(100, 1)),
            ("movePrimary.commit", Ts::new(105, 1)),
            ("movePrimary.end", Ts::new(107, 1)),
        ] {
            log.feed(&changelog(what, "shop", ts));
        }
        // Other changelog entries and other ops are not moves.
        log.feed(&changelog(
            "moveChunk.commit",
            "shop.events",
            Ts::new(101, 1),
        ));
        let moves = log.moves.clone();
        assert_eq!(moves.len(), 1);
        assert_eq!(
            (moves[0].start, moves[0].commit, moves[0].end),
            (
                Some(Ts::new(100, 1)),
                Some(Ts::new(105, 1)),
                Some(Ts::new(107, 1))
            )
        );
        assert_eq!(
            (moves[0].from.as_str(), moves[0].to.as_str()),
            ("shard0", "shard1")
        );
        let mut cfg = config(Vec::new());
        cfg.changelog = log;
        let (found, _) = merge(
            vec![
                cfg,
                shard(
                    "shard0",
                    vec![
                        drop("shop.before", Ts::new(104, 1), "u1", 5, false),
                        drop("shop.customers", Ts::new(106, 2), "u2", 80, false),
                        drop("other.customers", Ts::new(106, 3), "u3", 8, false),
                        drop("shop.after", Ts::new(108, 1), "u4", 8, false),
                    ],
                ),
                shard(
                    "shard1",
                    vec![drop("shop.mine", Ts::new(106, 4), "u5", 3, false)],
                ),
            ],
            60,
        );
        let routine: Vec<(&str, bool)> = found
            .iter()
            .map(|f| (f.finding.ns.as_str(), f.finding.is_routine()))
            .collect();
        assert_eq!(
            routine,
            vec![
                ("shop.before", false),
                ("shop.customers", true),
                ("other.customers", false),
                ("shop.mine", false),
                ("shop.after", false),
            ]
        );
        // A release that logs no `end`: the window after the commit.
        let mut legacy = Changelog::default();
        legacy.feed(&changelog("movePrimary.start", "shop", Ts::new(100, 1)));
        legacy.feed(&changelog("movePrimary.commit", "shop", Ts::new(105, 1)));
        let mut cfg = config(Vec::new());
        cfg.changelog = legacy;
        let (found, _) = merge(
            vec![
                cfg,
                shard(
                    "shard0",
                    vec![drop("shop.customers", Ts::new(130, 1), "u2", 80, false)],
                ),
            ],
            60,
        );
        assert!(found[0].finding.is_routine());
    }

    #[test]
    fn drops_of_different_incarnations_or_far_apart_stay_apart() {
        // Same namespace, another uuid (the collection was recreated and dropped again).
        let (found, _) = merge(
            vec![
                shard("rs0", vec![drop("shop.a", Ts::new(100, 1), "u1", 1, false)]),
                shard("rs1", vec![drop("shop.a", Ts::new(100, 2), "u2", 1, false)]),
            ],
            10,
        );
        assert_eq!(found.len(), 2);
        // Without a uuid (old oplogs): by namespace, within the DDL window only.
        let mut a = drop("shop.a", Ts::new(100, 1), "", 1, false);
        a.uuid = None;
        let mut b = drop(
            "shop.a",
            Ts::new(100 + DDL_WINDOW_SECS + 1, 1),
            "",
            1,
            false,
        );
        b.uuid = None;
        let (found, _) = merge(vec![shard("rs0", vec![a]), shard("rs1", vec![b])], 10);
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn fan_out_bursts_merge_but_one_members_two_bursts_do_not() {
        let burst = |ts: Ts, last: Ts, n: u64| {
            let mut f = finding(Kind::DeleteBurst, "shop.orders", ts);
            f.last_ts = last;
            f.count = n;
            f
        };
        let (found, _) = merge(
            vec![
                shard(
                    "rs0",
                    vec![
                        burst(Ts::new(100, 1), Ts::new(101, 9), 120),
                        burst(Ts::new(500, 1), Ts::new(501, 9), 150),
                    ],
                ),
                shard("rs1", vec![burst(Ts::new(100, 4), Ts::new(100, 90), 130)]),
            ],
            10,
        );
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].finding.count, found[0].finding.ts),
            (250, Ts::new(100, 1))
        );
        assert_eq!(found[0].members.len(), 2);
        assert_eq!((found[1].finding.count, found[1].members.len()), (150, 1));
        assert_eq!(found[1].finding.details, "");
    }

    #[test]
    fn a_sharded_rename_over_a_target_is_one_incident() {
        let rename = |ts: Ts, n: i64, fm: bool| {
            let mut f = finding(Kind::RenameDropTarget, "shop.live", ts);
            f.uuid = Some("src".into());
            f.num_records = Some(n);
            f.from_migrate = fm;
            f
        };
        let (found, rest) = merge(
            vec![
                config(vec![meta(
                    "config.collections",
                    Some("shop.live"),
                    Ts::new(300, 1),
                    1,
                )]),
                shard("rs1", vec![rename(Ts::new(300, 5), 3, true)]),
                shard("rs0", vec![rename(Ts::new(300, 8), 4, false)]),
            ],
            10,
        );
        assert!(rest.is_empty());
        assert_eq!(found.len(), 1);
        let f = &found[0].finding;
        assert_eq!((f.oplog_limit, f.num_records), (Ts::new(300, 1), Some(7)));
        assert!(f.details.starts_with("renamed over"), "{}", f.details);
    }

    #[test]
    fn drop_database_gathers_its_collection_drops_and_metadata() {
        let mut dd = finding(Kind::DropDatabase, "an", Ts::new(200, 5));
        dd.collections = vec!["an.a".into()];
        dd.num_records = Some(4);
        let (found, rest) = merge(
            vec![
                config(vec![
                    meta("config.collections", Some("an.big"), Ts::new(199, 1), 1),
                    meta("config.chunks", None, Ts::new(199, 2), 3),
                    meta("config.databases", Some("an"), Ts::new(201, 1), 1),
                    meta("config.collections", Some("other.x"), Ts::new(150, 1), 1),
                ]),
                shard("rs0", vec![dd]),
                shard("rs1", vec![drop("an.big", Ts::new(199, 7), "u9", 6, true)]),
            ],
            10,
        );
        assert_eq!(found.len(), 1, "{found:#?}");
        let f = &found[0].finding;
        assert_eq!(
            (f.kind, f.ts, f.last_ts),
            (Kind::DropDatabase, Ts::new(199, 1), Ts::new(201, 1))
        );
        assert_eq!(f.collections, ["an.a", "an.big"]);
        assert_eq!(f.num_records, Some(10));
        // Metadata no incident explains is handed back (for a note), not dropped.
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].id.as_deref(), Some("other.x"));
    }
}
