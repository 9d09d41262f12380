//! The restore of a cluster at one limit: each member's own plan at `L` (the
//! single-replica-set plan, [`crate::plan::build_with_model`], run once per member),
//! and for a replay the members' states at `L` merged into one logical dump: for a
//! sharded namespace the documents each shard owns at `L` by the config server's
//! routing table at `L` ([`super::owner`]), orphans and in-flight migration clones
//! left out; an unsharded namespace from its database's primary shard
//! (`config.databases`).
//!
//! Memory: the config server's state, the merged dump's documents and one shard's
//! state at a time (each shard is replayed, merged, and let go before the next).

use std::path::{Path, PathBuf};

use bson::RawDocument;
use serde::Serialize;

use crate::engine::replica::dump::{self, DumpFormat};
use crate::engine::replica::{Content, Replica, ReplicaOptions};
use crate::error::Failure;
use crate::oplog::Ts;
use crate::plan::expect::Model;
use crate::plan::{
    self, ContentOptions, PlanRequest, PreparedAtLimit, Progress, RestorePlan, UntilSpec,
};
use crate::time::parse_time;

use super::file::{ClusterFile, Member, Role};
use super::limit::{LimitError, MemberRange};
use super::owner::{OwnerError, Routing, ShardedColl};
use super::txns::TxnTable;

/// One member in the plan and the report.
#[derive(Clone, Debug, Serialize)]
pub struct MemberReport {
    pub member: String,
    pub role: Role,
    pub backup_end: Ts,
    pub oplog: String,
    pub oplog_first: Ts,
    pub oplog_last: Ts,
    /// Entries of the member's oplog after its backup's end and before the limit.
    pub entries_to_apply: u64,
    /// The member's own plan (`plan.json` and its slice).
    pub plan_dir: String,
    /// Lint errors of the member's own plan (what mongorestore would fail on).
    pub lint_errors: usize,
    /// Entries the engine applied (backup oplog and slice); replay only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries_applied: Option<u64>,
    /// `--per-member`: the member's own dump at the limit and its documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dump: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dump_documents: Option<u64>,
    /// Prepared (cross-shard) transactions open at the limit on this member, and
    /// whether the restore holds each (by its commitTimestamp, rule R2).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prepared_at_limit: Vec<PreparedAtLimit>,
    /// `--engine mongod`: the member's spare, resolved slice and verification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mongod: Option<super::mongod_slice::MongodMember>,
}

/// What the plan asked of one member.
pub struct MemberJob<'a> {
    pub member: &'a Member,
    pub range: &'a MemberRange,
    pub limit: Ts,
    /// Where its plan is written.
    pub dir: PathBuf,
    pub cwd: PathBuf,
    pub allow_truncated: bool,
    /// Whole documents (a replay, or the config server's routing): memory and
    /// spill directory.
    pub content: Option<(usize, PathBuf)>,
    /// Every member's decisions of prepared transactions (rule R2).
    pub txns: &'a TxnTable,
    /// `--engine mongod`: the plan is for mongorestore onto a spare (its one-run
    /// inputs written, expected counts and hashes predicted as mongorestore
    /// replays, for verification), with what is known of the programs' versions.
    pub mongod: Option<crate::plan::versions::VersionHints>,
    /// Keep the member's slice in its plan ([`PlanRequest::keep_slice`]): always
    /// for mongorestore and `pitr plan --cluster`; the embedded replay's member
    /// plans are temporary.
    pub keep_slice: bool,
    /// The run's check of its work dir once the member's oplog is found out of
    /// order ([`PlanRequest::sort_room`]): its slice is then sorted on disk.
    pub sort_room: Option<crate::plan::SortRoom>,
}

/// Runs the single-replica-set plan of one member at the limit.
pub fn member_plan(
    job: MemberJob<'_>,
    progress: &dyn Progress,
) -> Result<(RestorePlan, Model, MemberReport), Failure> {
    let context = format!("member `{}`", job.member.id);
    let limit = job.limit;
    let until = parse_time(&format!("{}:{}", limit.t, limit.i))
        .map_err(|e| Failure::from(e).in_context(&context))?;
    let config_server = job.member.role == Role::Config;
    let mongod = job.mongod.is_some();
    let req = PlanRequest {
        out: Some(job.dir.clone()),
        allow_truncated: job.allow_truncated,
        expect: job.content.is_none() || mongod,
        content: job.content.map(|(memory, spill_dir)| ContentOptions {
            memory,
            spill_dir,
            // As mongorestore replays (the spare's verification), or strictly (the
            // embedded engine).
            strict: !mongod,
            defer_hashes: !mongod,
            config_server,
            cold_copies: None,
        }),
        mongorestore_inputs: mongod,
        keep_slice: mongod || job.keep_slice,
        versions: job.mongod.unwrap_or_default(),
        decided: Some(job.txns.decisions()),
        sort_room: job.sort_room,
        ..PlanRequest::new(
            job.member.backup.clone(),
            job.range.oplog.clone(),
            UntilSpec::Time(until),
            job.cwd,
        )
    };
    let (p, model) = plan::build_with_model(&req, progress)
        .map_err(|e| Failure::from(e).in_context(&context))?;
    refuse_open_prepared(&job.member.id, &p, limit)?;
    job.txns
        .check_member(&job.member.id, &p.prepared_at_limit, limit)?;
    let report = MemberReport {
        member: job.member.id.clone(),
        role: job.member.role,
        backup_end: p.coverage.backup_end,
        oplog: job.range.oplog.clone(),
        oplog_first: p.oplog.first_ts.unwrap_or(Ts::ZERO),
        oplog_last: p.oplog.last_ts.unwrap_or(Ts::ZERO),
        entries_to_apply: p.slice.entries,
        plan_dir: job.dir.display().to_string(),
        lint_errors: p
            .lint
            .iter()
            .filter(|l| l.severity == plan::LintSeverity::Error)
            .count(),
        entries_applied: None,
        dump: None,
        dump_documents: None,
        prepared_at_limit: p.prepared_at_limit.clone(),
        mongod: None,
    };
    Ok((p, model, report))
}

/// A prepared transaction with parts before the limit that no member's oplog
/// decides (the member's plan leaves it open and lints it, `txn-open-at-limit`):
/// whether it is in the cluster at `L` depends on its `commitTimestamp` (rule R2 of
/// shared/reference/sharded-pitr.md), which only a later decision entry tells, so it
/// is refused rather than guessed. A `commitTransaction` of this member with none of
/// its parts replayed (`txn-commit-without-parts`) would leave the transaction out
/// here and in on the other participants: refused too.
fn refuse_open_prepared(member: &str, p: &RestorePlan, limit: Ts) -> Result<(), LimitError> {
    let undecided = p
        .prepared_at_limit
        .iter()
        .find(|t| t.decision == "undecided");
    if let Some(t) = undecided {
        return Err(LimitError::PreparedOpen {
            member: member.to_string(),
            limit,
            first: t.first,
            last: p.oplog.last_ts.unwrap_or(limit),
            message: format!(
                "{} (writing {}) has no commitTransaction or abortTransaction in any member's oplog, nor a decision in its coordinator's config.transaction_coordinators document",
                t.txn,
                t.namespaces.join(", ")
            ),
        });
    }
    match p.lint.iter().find(|l| l.code == "txn-commit-without-parts") {
        Some(l) => Err(LimitError::CommitWithoutParts {
            member: member.to_string(),
            message: l.message.clone(),
        }),
        None => Ok(()),
    }
}

/// Per namespace in the merged dump.
#[derive(Clone, Debug, Default, Serialize)]
pub struct NsCount {
    pub ns: String,
    pub sharded: bool,
    /// Documents in the merged dump (owned at the limit).
    pub documents: u64,
    /// Per shard: the owned documents taken from it.
    pub owned: Vec<(String, u64)>,
    /// Documents on shards that did not own them at the limit (orphans, in-flight
    /// migration clones; for an unsharded namespace, copies off its primary shard):
    /// left out.
    pub left_out: u64,
}

/// The merged dump being built.
pub struct Merge {
    pub routing: Routing,
    replica: Replica,
    pub counts: Vec<NsCount>,
    seeded: u64,
}

/// Why two shards' documents cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("`{ns}`: shard `{shard}` owns a document with _id {id} that another shard also owns at the limit; _id is unique only per shard, so one mongorestore through mongos would refuse one of them")]
    DuplicateId {
        ns: String,
        shard: String,
        id: String,
    },
    #[error("`{ns}` is on shard `{shard}` but its database `{db}` has no config.databases entry at the limit: which shard's copy is the cluster's is unknown")]
    NoPrimary {
        ns: String,
        db: String,
        shard: String,
    },
    #[error(transparent)]
    Owner(#[from] OwnerError),
    #[error(transparent)]
    Replica(#[from] crate::engine::replica::ReplicaError),
}

impl crate::error::Hint for MergeError {
    fn hint(&self) -> Option<String> {
        match self {
            MergeError::DuplicateId { .. } => Some(
                "restore that namespace per shard (`pitr replay --backup ... --oplog ... --until <limit>` on each) and merge by hand"
                    .into(),
            ),
            MergeError::NoPrimary { .. } => {
                Some("check that [config] in the cluster file is this cluster's config server".into())
            }
            MergeError::Owner(e) => crate::error::Hint::hint(e),
            MergeError::Replica(e) => crate::error::Hint::hint(e),
        }
    }
}

/// The cluster's users, roles and authorization schema (see [`Merge::add_auth`]).
const AUTH_NS: [&str; 3] = ["admin.system.users", "admin.system.roles", AUTH_VERSION_NS];
const AUTH_VERSION_NS: &str = "admin.system.version";

/// Databases that are each replica set's own, never the cluster's user data.
fn skipped_db(db: &str) -> bool {
    matches!(db, "admin" | "config" | "local")
}

impl Merge {
    /// Starts from the config server's state at the limit: its routing table, and
    /// the cluster's users and roles ([`Merge::add_auth`]).
    pub fn new(config: &Replica) -> Result<Merge, MergeError> {
        let routing = Routing::from_config(config)?;
        let mut m = Merge {
            routing,
            replica: Replica::new(ReplicaOptions {
                content: Content::Documents,
                ..ReplicaOptions::default()
            }),
            counts: Vec::new(),
            seeded: 0,
        };
        m.add_auth(config)?;
        Ok(m)
    }

    /// The cluster's users and roles: in a sharded cluster they live in the config
    /// server's `admin` database (mongos reads and writes them there:
    /// `src/mongo/db/auth/authz_manager_external_state_s.cpp`; a shard's own
    /// `admin.system.users` holds only that shard's local maintenance users, left
    /// out). The merged dump takes `admin.system.users` and `admin.system.roles` from
    /// the config server's state at the limit, with `admin.system.version` (the
    /// authorization schema mongorestore checks before restoring users,
    /// mongo-tools `mongorestore/metadata.go`) when either is there, so that
    /// `mongorestore` through mongos restores them as from a mongodump of the cluster.
    fn add_auth(&mut self, config: &Replica) -> Result<(), MergeError> {
        let present: Vec<String> = config
            .namespaces()
            .into_iter()
            .map(|(ns, _)| ns.to_string())
            .filter(|ns| AUTH_NS.contains(&ns.as_str()) && config.count(ns) > 0)
            .collect();
        if !present.iter().any(|ns| ns != AUTH_VERSION_NS) {
            return Ok(());
        }
        for ns in &present {
            if let Some((_, info)) = config
                .namespaces()
                .into_iter()
                .find(|(n, _)| *n == ns.as_str())
            {
                let mut c = info.clone();
                self.replica.seed_namespace(ns, |slot| {
                    c.slot = slot;
                    c.no_id.clear();
                    c
                });
            }
            self.count(ns, false);
            self.take("config", ns, config, None, true)?;
        }
        Ok(())
    }

    fn count(&mut self, ns: &str, sharded: bool) -> &mut NsCount {
        if let Some(k) = self.counts.iter().position(|c| c.ns == ns) {
            return &mut self.counts[k];
        }
        self.counts.push(NsCount {
            ns: ns.to_string(),
            sharded,
            ..NsCount::default()
        });
        self.counts.last_mut().expect("pushed")
    }

    /// Takes what `shard` owns at the limit from its state at the limit.
    pub fn add_shard(&mut self, shard: &str, r: &Replica) -> Result<(), MergeError> {
        for (ns, info) in r.namespaces() {
            let db = ns.split_once('.').map_or(ns, |(d, _)| d);
            if skipped_db(db) {
                continue;
            }
            let sharded = self.routing.collections.get(ns).cloned();
            let primary = self.routing.databases.get(db).cloned();
            if sharded.is_none() && primary.is_none() {
                return Err(MergeError::NoPrimary {
                    ns: ns.into(),
                    db: db.into(),
                    shard: shard.into(),
                });
            }
            let whole = sharded.is_none() && primary.as_deref() == Some(shard);
            // The collection's catalog (options, indexes): from the primary shard when
            // it has the collection (merged first), else the first shard that has it.
            if (whole || sharded.is_some()) && !self.replica.exists(ns) {
                let mut c = info.clone();
                self.replica.seed_namespace(ns, |slot| {
                    c.slot = slot;
                    c.no_id.clear();
                    c
                });
            }
            self.count(ns, sharded.is_some());
            self.take(shard, ns, r, sharded.as_ref(), whole)?;
        }
        Ok(())
    }

    fn take(
        &mut self,
        shard: &str,
        ns: &str,
        r: &Replica,
        sharded: Option<&ShardedColl>,
        whole: bool,
    ) -> Result<(), MergeError> {
        let (mut owned, mut left_out) = (0u64, 0u64);
        let mut failed: Option<MergeError> = None;
        let replica = &mut self.replica;
        let seeded = &mut self.seeded;
        let walked = r.for_each_document(ns, &mut |bytes| {
            let doc = RawDocument::from_bytes(bytes).map_err(|e| {
                crate::engine::replica::ReplicaError::Seed {
                    ns: ns.into(),
                    index: 0,
                    why: e.to_string(),
                }
            })?;
            let mine = match sharded {
                Some(c) => match c.owner(doc) {
                    Ok(o) => o == shard,
                    Err(e) => {
                        failed = Some(e.into());
                        return Err(crate::engine::replica::ReplicaError::Interrupted);
                    }
                },
                None => whole,
            };
            if !mine {
                left_out += 1;
                return Ok(());
            }
            if let Ok(Some(id)) = doc.get("_id") {
                if replica.holds(ns, id)? {
                    failed = Some(MergeError::DuplicateId {
                        ns: ns.into(),
                        shard: shard.into(),
                        id: bson::Bson::try_from(id).map_or("?".into(), |b| b.to_string()),
                    });
                    return Err(crate::engine::replica::ReplicaError::Interrupted);
                }
            }
            *seeded += 1;
            owned += 1;
            replica.seed_document(ns, doc, *seeded)
        });
        if let Err(e) = walked {
            return Err(failed.take().unwrap_or(MergeError::Replica(e)));
        }
        let c = self.count(ns, sharded.is_some());
        c.documents += owned;
        c.left_out += left_out;
        if owned > 0 {
            c.owned.push((shard.to_string(), owned));
        }
        Ok(())
    }

    /// Writes the merged dump (mongodump's directory layout) and `sharding.json` in
    /// it, under a temporary name renamed to `out` at the end; `members` (the
    /// `--per-member` dumps, a directory on the same file system) is moved into it
    /// as `members/` before that rename.
    pub fn write(
        mut self,
        out: &Path,
        limit: Ts,
        members: Option<&Path>,
    ) -> Result<Vec<NsCount>, Failure> {
        self.replica
            .flush()
            .map_err(|e| Failure::from(MergeError::from(e)))?;
        let items = dump::select(&self.replica, &|_| true)
            .map_err(|e| Failure::from(MergeError::from(e)))?;
        let meter = crate::engine::replica::Meter::new();
        let fmt = DumpFormat::Directory { gzip: false };
        let mut pending = dump::prepare(&mut self.replica, out, fmt, &items, "unknown", &meter)?;
        pending.add_file(
            SHARDING_FILE,
            sharding_json(&self.routing, limit).as_bytes(),
        )?;
        if let Some(m) = members {
            pending.add_tree(m, MEMBERS_DIR)?;
        }
        pending.commit()?;
        self.counts.sort_by(|a, b| a.ns.cmp(&b.ns));
        Ok(self.counts)
    }
}

/// Where `--per-member` puts each member's own dump inside the merged dump.
pub const MEMBERS_DIR: &str = "members";

/// The `config.*` collections a config server's dump holds (mongo-tools
/// `common/dumprestore/config.go` `ConfigCollectionsToKeep`).
const CONFIG_KEPT: [&str; 7] = [
    "chunks",
    "collections",
    "databases",
    "settings",
    "shards",
    "tags",
    "version",
];

/// The config server's kept `config.*` collections (its routing table and
/// catalog) in `r`, each with its count and md5 over its documents in `_id` order
/// (what `dbHash` computes, [`Replica::collection_hash`]): `--engine mongod`
/// compares the embedded engine's prediction with the config spare's dump, since
/// the plan's verification covers user databases only.
pub fn routing_hashes(r: &Replica) -> Result<Vec<crate::engine::replica::hash::CollHash>, Failure> {
    let mut out = Vec::new();
    for coll in CONFIG_KEPT {
        let ns = format!("config.{coll}");
        if let Some(h) = r
            .collection_hash(&ns)
            .map_err(|e| Failure::from(MergeError::from(e)))?
        {
            out.push(h);
        }
    }
    Ok(out)
}

/// `--per-member`: a member's own dump at the limit, as a `mongodump --oplog` of its
/// replica set would hold its data then (its `admin` and user databases; for the
/// config server also the kept `config.*` collections), for rebuilding a cluster of
/// the same shape. Written under a temporary name and renamed to `dir`; returns
/// its documents.
pub fn member_dump(r: &Replica, role: Role, dir: &Path) -> Result<u64, Failure> {
    use crate::engine::replica::dump::Item;
    let mut items = dump::select(r, &|_| true).map_err(|e| Failure::from(MergeError::from(e)))?;
    if role == Role::Config {
        for coll in CONFIG_KEPT {
            let ns = format!("config.{coll}");
            if let Some(c) = r.get(&ns) {
                items.push(Item {
                    data_ns: Some(ns),
                    db: "config".into(),
                    coll: coll.into(),
                    kind: "collection",
                    info: c.clone(),
                });
            }
        }
    }
    let meter = crate::engine::replica::Meter::new();
    let fmt = DumpFormat::Directory { gzip: false };
    let pending = dump::prepare_flushed(r, dir, fmt, &items, "unknown", &meter)?;
    Ok(pending.commit()?.iter().map(|d| d.documents).sum())
}

/// The sharding file's name inside the merged dump (mongorestore skips files it
/// does not know at the dump's root).
pub const SHARDING_FILE: &str = "sharding.json";

/// `sharding.json`: each sharded collection's key, `unique` flag and chunks at the
/// limit, and the mongosh commands to run through mongos before mongorestore
/// (the official dump-restore procedure for sharded clusters: shard each
/// collection first, then restore through mongos).
pub fn sharding_json(routing: &Routing, limit: Ts) -> String {
    let colls: Vec<serde_json::Value> = routing
        .collections
        .values()
        .filter(|c| !c.ns.starts_with("config."))
        .map(|c| {
            serde_json::json!({
                "ns": c.ns, "key": bson::Bson::Document(c.key.clone()).into_relaxed_extjson(),
                "unique": c.unique, "chunks": c.chunks, "command": c.shard_command(),
            })
        })
        .collect();
    let mut dbs: Vec<&str> = routing
        .collections
        .keys()
        .filter(|ns| !ns.starts_with("config."))
        .filter_map(|ns| ns.split_once('.').map(|(d, _)| d))
        .collect();
    dbs.dedup();
    let mut commands: Vec<String> = vec!["sh.stopBalancer()".into()];
    commands.extend(dbs.iter().map(|d| {
        format!(
            "sh.enableSharding({})",
            serde_json::Value::String(d.to_string())
        )
    }));
    commands.extend(
        colls
            .iter()
            .filter_map(|c| c["command"].as_str().map(str::to_string)),
    );
    let v = serde_json::json!({
        "format": "pitr-cluster-sharding/1",
        "limit": limit,
        "shards_at_limit": routing.shards,
        "databases": routing.databases,
        "collections": colls,
        "mongosh": commands,
        "note": "run the mongosh commands through mongos, then mongorestore through mongos; \
                 sh.startBalancer() afterwards if the balancer should run",
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

/// The cluster file's members in the order a replay needs them: the config server
/// first (its routing decides ownership), then each shard, the primary shards of
/// the databases first (their catalogs are the collections').
pub fn order<'a>(file: &'a ClusterFile, primaries: &[&str]) -> Vec<&'a Member> {
    let mut shards: Vec<&Member> = file.shards.iter().collect();
    shards.sort_by_key(|s| !primaries.contains(&s.id.as_str()));
    std::iter::once(&file.config).chain(shards).collect()
}
