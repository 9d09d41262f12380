//! `pitr-gen --scenario cluster`: a sharded cluster, as an on-call engineer would hold
//! it: one `mongodump --oplog` backup and one oplog dump per member (the config
//! server's replica set and each shard's), and a `cluster.toml` naming them.
//!
//! ```text
//! OUT/cluster.toml            [config] and one [[shard]] per shard, relative paths
//! OUT/truth.json              what was planted (schema in [`truth`])
//! OUT/<member>/backup/        that member's mongodump --oplog directory
//! OUT/<member>/oplog.bson     that member's oplog, dumped later (overlaps its backup)
//! ```
//!
//! The timeline (seconds after `--start`): the members' backups run in the first 12
//! seconds and end at different times; background routed CRUD all along; at 40 the
//! balancer moves a chunk of `shop.events` (clone inserts on the recipient, the commit
//! on the config server) and at 70 the donor's range deleter removes the orphans (both
//! `fromMigrate`: decoys); at 120 a `deleteMany` through mongos fans out to every shard
//! owning `shop.orders` (one incident); at 200 `shop.orders` is dropped in the chosen
//! DDL shape (one incident); the oplog dumps end between 240 and 250. The last shard
//! owns no chunk: it writes only periodic no-ops (an idle shard, with its own clock).
//!
//! Files: [`member`] (a member's clock, oplog and data), [`sim`] (routing, fan-out,
//! migrations), [`ddl`] (the drop shapes), [`output`] (backups, oplogs, cluster.toml),
//! [`truth`].

pub mod ddl;
pub mod member;
pub mod move_primary;
pub mod output;
pub mod sim;
pub mod truth;
pub mod txn;

use std::path::PathBuf;
use std::time::Instant;

use bson::{doc, oid::ObjectId, Bson, Document};
use rand::{Rng, RngCore, SeedableRng};

use self::ddl::{Ddl, DdlShape};
use self::member::{doc_key, Member, Role, Window};
use self::sim::{Bound, Chunk, Cluster, Sharded};
use self::truth::Incident;
use crate::rng::{uuid, MainRng};
use crate::GenError;

/// Options of one cluster run.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub out: PathBuf,
    pub seed: u64,
    /// Seconds since the epoch when the first backup starts.
    pub start: u32,
    /// Shards that own chunks (at least 2).
    pub shards: usize,
    /// Shards that own nothing (only periodic no-ops).
    pub idle_shards: usize,
    pub shape: DdlShape,
    /// The destructive DDL at 200 s.
    pub ddl: Ddl,
}

/// What a run wrote.
#[derive(Clone, Debug)]
pub struct ClusterSummary {
    pub out: PathBuf,
    pub members: usize,
    pub entries: u64,
    pub bytes: u64,
    pub incidents: usize,
    pub decoys: usize,
    pub elapsed: std::time::Duration,
    /// The logical content's model: [`truth::Logical::at`] is the truth of a
    /// restore at any limit.
    pub logical: truth::Logical,
}

/// Orders per data shard, and how many of them are cancelled (the fan-out delete's
/// share on each shard: above the burst threshold on every shard, see the limits in
/// docs/sharded.md).
const ORDERS_PER_SHARD: i64 = 260;
const CANCELLED_PER_SHARD: i64 = 120;
/// Events per data shard before the migration; the migrated chunk holds `[MinKey, 200)`.
const EVENTS_PER_SHARD: i64 = 320;
const MIGRATED_UP_TO: i64 = 200;
/// Shard-key range width of each data shard.
const RANGE: i64 = 1000;
/// Seconds of the timeline.
const AT_MIGRATION: i64 = 40;
const AT_RANGE_DELETION: i64 = 70;
const AT_FAN_OUT: i64 = 120;
const AT_DROP: i64 = 200;
/// Cross-shard transactions on `shop.events` ([`txn`]): committed at 100 s (the
/// second participant's commit entry about 2 s after the first's), aborted at 150 s,
/// committed at 160 s (the first participant's commit entry late).
/// `movePrimary` of `shop` to shard1, after the drop ([`move_primary`]).
const AT_MOVE_PRIMARY: i64 = 215;
const AT_TXNS: [(i64, bool, [i64; 2]); 3] = [
    (100, true, [50, 1900]),
    (150, false, [80, 1500]),
    (160, true, [1700, 30]),
];
const END: i64 = 240;
/// `shop.sessions` (hashed shard key): users with a session before the first backup.
const SESSIONS: i64 = 150;
const SESSIONS_NS: &str = "shop.sessions";

/// Writes the cluster into `opts.out`.
pub fn generate(opts: &ClusterOptions) -> Result<ClusterSummary, GenError> {
    if opts.shards < 2 {
        return Err(GenError::Internal(format!(
            "--shards {} is too few: a sharded collection needs at least 2 shards here",
            opts.shards
        )));
    }
    let started = Instant::now();
    let mut c = setup(opts);
    // Before the timeline: every document is on exactly one shard, by its owner.
    for m in &c.shards {
        for (ns, coll) in &m.colls {
            let docs = c.logical.initial.entry(ns.clone()).or_default();
            docs.extend(coll.docs.iter().map(|(k, d)| (k.clone(), d.clone())));
        }
    }
    let incidents = timeline(&mut c, opts.start as i64, opts.shape, opts.ddl);
    let written = output::write(&c, opts, incidents)?;
    Ok(ClusterSummary {
        out: opts.out.clone(),
        members: c.shards.len() + 1,
        entries: written.entries,
        bytes: written.bytes,
        incidents: written.incidents,
        decoys: written.decoys,
        elapsed: started.elapsed(),
        logical: c.logical,
    })
}

fn order(id: i64, customer: i64, status: &str, born_ms: i64) -> Document {
    doc! { "_id": id, "customerId": customer, "status": status, "total": (id % 97) as f64 * 3.5 + 10.0,
    "items": (id % 5 + 1) as i32, "createdAt": bson::DateTime::from_millis(born_ms) }
}

/// A `shop.sessions` document: an ObjectId `_id`, sharded on `{userId: "hashed"}`.
fn session(rng: &mut MainRng, user: i64, born_ms: i64) -> Document {
    let mut b = [0u8; 12];
    rng.fill_bytes(&mut b);
    b[..4].copy_from_slice(&((born_ms / 1000) as u32).to_be_bytes());
    doc! { "_id": ObjectId::from_bytes(b), "userId": user, "started": bson::DateTime::from_millis(born_ms), "pages": (user % 7) as i32 }
}

/// `shop.sessions`, sharded on `{userId: "hashed"}` with one initial chunk per data
/// shard (the idle shards were added later), split where the server splits the hash
/// space (`src/mongo/db/s/config/initial_split_policy.cpp`
/// `calculateHashedSplitPoints`: intervals of `(LLONG_MAX / n) * 2`, symmetric around
/// 0; chunk `i` on shard `i`, `generateShardCollectionInitialChunks`).
fn hashed_sessions(
    rng: &mut MainRng,
    shards: usize,
    oid: impl Fn(&mut MainRng) -> ObjectId,
) -> Sharded {
    let n = shards as i64;
    let interval = (i64::MAX / n) * 2;
    let mut points = Vec::new();
    let mut current = 0i64;
    if n % 2 == 0 {
        points.push(current);
        current += interval;
    } else {
        current += interval / 2;
    }
    for _ in 0..(n - 1) / 2 {
        points.push(current);
        points.push(-current);
        current += interval;
    }
    points.sort_unstable();
    let bounds: Vec<Bound> = std::iter::once(Bound::Min)
        .chain(points.into_iter().map(Bound::At))
        .chain(std::iter::once(Bound::Max))
        .collect();
    let chunks = bounds
        .windows(2)
        .enumerate()
        .map(|(k, w)| Chunk {
            id: oid(rng),
            min: w[0],
            max: w[1],
            shard: k,
        })
        .collect();
    Sharded {
        ns: SESSIONS_NS.to_string(),
        key: "userId",
        hashed: true,
        uuid: uuid(rng),
        epoch: oid(rng),
        chunks,
    }
}

fn event(id: i64, born_ms: i64) -> Document {
    let kinds = ["view", "click", "cart", "checkout"];
    doc! { "_id": id, "kind": kinds[(id % 4) as usize], "at": bson::DateTime::from_millis(born_ms), "n": (id % 13) as i32 }
}

/// The cluster before the first backup: members, chunks, the initial documents
/// (already there, so no oplog entries), and the config server's metadata.
fn setup(opts: &ClusterOptions) -> Cluster {
    // "cluster" in ASCII: a stream of its own, apart from the other scenarios'.
    let mut rng = MainRng::seed_from_u64(opts.seed ^ 0x0063_6c75_7374_6572);
    let t0_ms = opts.start as i64 * 1000;
    let n = opts.shards + opts.idle_shards;
    let config = Member::new("config", Role::Config, 0, rng.random_range(1..9));
    // Skews: a few shards ahead, a few behind (NTP keeps them within a second).
    let shards: Vec<Member> = (0..n)
        .map(|k| {
            let skew = [40, -350, 900, -120, 260][k % 5];
            Member::new(
                &format!("shard{k}"),
                Role::Shard,
                skew,
                rng.random_range(1..9),
            )
        })
        .collect();
    let oid = |rng: &mut MainRng| {
        let mut b = [0u8; 12];
        rng.fill_bytes(&mut b);
        ObjectId::from_bytes(b)
    };
    let mut sharded = Vec::new();
    for (ns, key) in [("shop.orders", "customerId"), ("shop.events", "_id")] {
        let mut chunks = Vec::new();
        for k in 0..opts.shards as i64 {
            let min = if k == 0 {
                Bound::Min
            } else {
                Bound::At(k * RANGE)
            };
            let max = if k + 1 == opts.shards as i64 {
                Bound::Max
            } else {
                Bound::At((k + 1) * RANGE)
            };
            if ns == "shop.events" && k == 0 {
                // The chunk the balancer will move, split off already.
                chunks.push(Chunk {
                    id: oid(&mut rng),
                    min,
                    max: Bound::At(MIGRATED_UP_TO),
                    shard: 0,
                });
                chunks.push(Chunk {
                    id: oid(&mut rng),
                    min: Bound::At(MIGRATED_UP_TO),
                    max,
                    shard: 0,
                });
                continue;
            }
            chunks.push(Chunk {
                id: oid(&mut rng),
                min,
                max,
                shard: k as usize,
            });
        }
        sharded.push(Sharded {
            ns: ns.to_string(),
            key,
            hashed: false,
            uuid: uuid(&mut rng),
            epoch: oid(&mut rng),
            chunks,
        });
    }
    sharded.push(hashed_sessions(&mut rng, opts.shards, oid));
    let customers_uuid = uuid(&mut rng);
    let mut c = Cluster {
        rng,
        config,
        shards,
        data_shards: opts.shards,
        router: pitr::oplog::Ts::ZERO,
        sharded,
        unsharded: vec![("shop.customers".to_string(), customers_uuid)],
        primary: 0,
        decoys: Vec::new(),
        next_order: 0,
        next_event: Vec::new(),
        logical: Default::default(),
        txns: Vec::new(),
    };
    for k in 0..opts.shards {
        let orders_uuid = c.sharded[0].uuid;
        let events_uuid = c.sharded[1].uuid;
        for j in 0..ORDERS_PER_SHARD {
            let id = k as i64 * 10_000 + j;
            let customer = k as i64 * RANGE + (j * 7) % RANGE;
            let status = if j < CANCELLED_PER_SHARD {
                "cancelled"
            } else {
                "paid"
            };
            let d = order(id, customer, status, t0_ms - 86_400_000 + j * 1000);
            let coll = c.shards[k].coll("shop.orders");
            coll.uuid = orders_uuid;
            coll.docs.insert(doc_key(&Bson::Int64(id)), d);
        }
        for j in 0..EVENTS_PER_SHARD {
            let id = k as i64 * RANGE + j;
            let coll = c.shards[k].coll("shop.events");
            coll.uuid = events_uuid;
            coll.docs
                .insert(doc_key(&Bson::Int64(id)), event(id, t0_ms - 3_600_000 + j));
        }
        c.next_event.push(k as i64 * RANGE + EVENTS_PER_SHARD);
    }
    c.next_order = 500_000;
    for u in 0..SESSIONS {
        let d = session(&mut c.rng, u, t0_ms - 7_200_000 + u * 1000);
        let s = &c.sharded[2];
        let (owner, uuid) = (s.owner_of(d.get("userId").expect("set")), s.uuid);
        let coll = c.shards[owner].coll(SESSIONS_NS);
        coll.uuid = uuid;
        coll.docs.insert(doc_key(d.get("_id").expect("set")), d);
    }
    let customers = c.shards[0].coll("shop.customers");
    customers.uuid = customers_uuid;
    for j in 0..80i64 {
        let tier = if j % 2 == 0 { "gold" } else { "silver" };
        customers.docs.insert(
            doc_key(&Bson::Int64(j)),
            doc! { "_id": j, "name": format!("customer {j}"), "tier": tier },
        );
    }
    output::config_metadata(&mut c);
    c
}

/// Everything after the setup, second by second. Returns the planted incidents.
fn timeline(c: &mut Cluster, t0: i64, shape: DdlShape, ddl: Ddl) -> Vec<Incident> {
    let backups = backup_windows(c.shards.len());
    for (k, m) in std::iter::once(&mut c.config)
        .chain(c.shards.iter_mut())
        .enumerate()
    {
        let (from, to) = backups[k];
        m.backup = Window {
            start_ms: (t0 + from) * 1000,
            end_ms: (t0 + to) * 1000,
        };
        m.oplog = Window {
            start_ms: (t0 + from + 3) * 1000,
            end_ms: (t0 + END + [0, 5, 2, 8, 3][k % 5]) * 1000,
        };
    }
    let mut incidents = Vec::new();
    let mut range_deletion = None;
    let mut decisions: Vec<txn::PendingDecision> = Vec::new();
    let last = c.members().map(|m| m.oplog.end_ms).max().unwrap_or(0) / 1000;
    for sec in t0..=last {
        let now = sec * 1000;
        for m in std::iter::once(&mut c.config).chain(c.shards.iter_mut()) {
            if m.backup.start_ms == now {
                m.snapshot = m.colls.clone();
            }
        }
        let rel = sec - t0;
        if rel < END {
            background(c, now);
        }
        match rel {
            AT_MIGRATION => {
                let to = 1;
                range_deletion = Some(c.migrate(now + 300, "shop.events", Bound::Min, to));
            }
            AT_RANGE_DELETION => {
                if let Some(p) = range_deletion.take() {
                    c.range_delete(now + 200, p);
                }
            }
            AT_FAN_OUT => {
                let members = c.fan_out_delete(now + 400, "shop.orders", |d| {
                    d.get_str("status") == Ok("cancelled")
                });
                let count = members.iter().filter_map(|m| m.count).sum();
                incidents.push(Incident {
                    kind: "deleteBurst",
                    ns: "shop.orders".into(),
                    cluster_limit: members.iter().map(|m| m.ts).min().expect("shards"),
                    last_ts: members.iter().map(|m| m.last_ts).max().expect("shards"),
                    count,
                    num_records: None,
                    members,
                });
            }
            AT_DROP => incidents.push(match ddl {
                Ddl::Drop => ddl::drop_sharded(c, now + 600, "shop.orders", shape),
                Ddl::DropDatabase => ddl::drop_database(c, now + 600, "shop", shape),
                Ddl::RenameOver => {
                    ddl::rename_over(c, now + 600, "shop.events", "shop.orders", shape)
                }
            }),
            AT_MOVE_PRIMARY if ddl != Ddl::DropDatabase => c.move_primary(now + 200, 1),
            _ => {}
        }
        if let Some(k) = AT_TXNS.iter().position(|(at, _, _)| *at == rel) {
            let (_, commit, delays) = AT_TXNS[k];
            decisions.extend(cross_shard_txn(c, now + 300, k, commit, &delays));
        }
        decisions.sort_by_key(|d| d.at_ms);
        while decisions.first().is_some_and(|d| d.at_ms < now + 1000) {
            c.deliver(decisions.remove(0));
        }
        c.noops(sec, 10);
    }
    incidents
}

/// The `k`th cross-shard transaction: one event on each data shard gets a new `n`
/// (events `k * 10 + 250` of each shard's own range, which no migration moves).
fn cross_shard_txn(
    c: &mut Cluster,
    now: i64,
    k: usize,
    commit: bool,
    delays: &[i64],
) -> Vec<txn::PendingDecision> {
    let writes: Vec<txn::TxnWrite> = (0..c.data_shards as i64)
        .map(|s| txn::TxnWrite {
            ns: "shop.events",
            id: s * RANGE + 250 + k as i64 * 10,
            field: "n",
            value: Bson::Int32(1000 + k as i32),
        })
        .collect();
    let mut lsid = [0x7c; 16];
    lsid[15] = k as u8;
    let mut delays = delays.to_vec();
    delays.resize(writes.len(), 400);
    c.cross_shard_txn(now, lsid, 1 + k as i64, &writes, commit, &delays)
}

/// Per member (config first), the backup's `[start, end)` in seconds after t0: they
/// start and end at different times, as separate `mongodump --oplog` runs do.
fn backup_windows(shards: usize) -> Vec<(i64, i64)> {
    let mut w = vec![(0, 6)];
    for k in 0..shards as i64 {
        w.push((k % 3, 8 + (k * 2) % 5));
    }
    w
}

/// About one routed write a second: new orders, paid orders shipped, new events.
fn background(c: &mut Cluster, now: i64) {
    let at = now + c.rng.random_range(0..900);
    // After the drop, the application's writes to a dropped collection fail (not
    // modelled).
    let live = |ns: &str| c.sharded.iter().any(|s| s.ns == ns);
    let (orders, events, sessions) = (live("shop.orders"), live("shop.events"), live(SESSIONS_NS));
    match c.rng.random_range(0..10) {
        0..=3 if orders => {
            let id = c.next_order;
            c.next_order += 1;
            let customer = c.rng.random_range(0..c.data_shards as i64 * RANGE);
            c.insert(at, "shop.orders", order(id, customer, "paid", at));
        }
        4..=5 if orders => {
            let shard = c.rng.random_range(0..c.data_shards);
            let paid: Vec<String> = c.shards[shard]
                .coll("shop.orders")
                .docs
                .iter()
                .filter(|(_, d)| d.get_str("status") == Ok("paid"))
                .map(|(k, _)| k.clone())
                .collect();
            if !paid.is_empty() {
                let id = paid[c.rng.random_range(0..paid.len())].clone();
                c.update(at, "shop.orders", shard, &id, "status", "shipped".into());
            }
        }
        6..=8 if events => {
            let shard = c.rng.random_range(0..c.data_shards);
            let id = c.next_event[shard];
            c.next_event[shard] += 1;
            c.insert(at, "shop.events", event(id, at));
        }
        9 if sessions => {
            // A new session, placed by the hash of its user.
            let user = c.rng.random_range(0..SESSIONS * 2);
            let d = session(&mut c.rng, user, at);
            c.insert(at, SESSIONS_NS, d);
        }
        _ => {}
    }
}
