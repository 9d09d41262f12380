//! The scripted part of a run: ordinary commands (collMod, an index build, an
//! election), the planted incidents in their fixed order, and the decoys between
//! them, each recorded in the truth as it is written.
//!
//! | # | event | entries | truth |
//! |---|---|---|---|
//! | | collMod TTL, start/commitIndexBuild, new primary | commands, no-op | - |
//! | | fromMigrate deletes on `shop.clicks` | 160 `d`, `fromMigrate: true`, 3 s | decoy |
//! | 1 | drop `shop.orders` | `{drop}`, `o2.numRecords` | drop |
//! | | the application re-creates `shop.orders` | create, createIndexes | - |
//! | | `shop.orders_staging` created and filled | create, createIndexes, inserts | - |
//! | 2 | dropDatabase `analytics` | 3 drops, then `{dropDatabase: 1}` | dropDatabase |
//! | | session reaping | 150 `d` on `config.system.sessions`, 2 s | decoy |
//! | 3 | rename staging over `shop.customers` | `{renameCollection, dropTarget}` | renameDropTarget |
//! | 4 | deleteMany on `shop.inventory` | 300 `d`, 4 s | deleteBurst |
//! | | aborted prepared transaction | `prepare` with 130 deletes, `abortTransaction` | decoy |
//! | 5 | transaction deleting `shop.payments` | 2 `partialTxn` parts + final, 120 deletes | deleteBurst (in txn) |
//! | 6 | dropIndexes on `shop.orders_archive` | `{dropIndexes, index}`, spec in `o2` | dropIndexes |
//! | 7 | profiles wiped | 150 `u`: `{_id}` replacements, `$unset`, diff `d`, 5 s | wipingUpdate |
//! | 8 | batched deleteMany on `shop.events` | one `applyOps` of 110 `d`, no `lsid` | deleteBurst |
//! | 9 | convertToCapped `shop.events` | create tmp (capped), copies, rename with dropTarget | renameDropTarget |

use rand::Rng;

use super::emit::Prev;
use super::ids::Live;
use super::scenario::{Gen, Params};
use super::shapes::{write_wipe, Shape, Wipe};
use super::truth::{Decoy, Incident};
use super::world::{CollSpec, IdKind, IndexSpec};
use pitr::oplog::Ts;

/// One unit of work in a second.
#[derive(Clone, Copy, Debug)]
pub enum Slot {
    Background,
    Event(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    CollMod,
    IndexBuild,
    Election,
    FromMigrate,
    Drop,
    Recreate,
    Staging,
    DropDatabase,
    SessionsPurge,
    Rename,
    DeleteBurst,
    Aborted,
    TxnDeletes,
    DropIndexes,
    Wipe,
    Batched,
    ConvertToCapped,
}

/// Sizes of the planted operations.
const FROM_MIGRATE: u32 = 160;
const SESSIONS_PURGE: u32 = 150;
const DELETE_BURST: u32 = 300;
const ABORTED_DELETES: usize = 130;
const TXN_DELETES: usize = 120;
const TXN_PARTS: usize = 3;
const WIPES: u32 = 150;
const BATCHED: usize = 110;

/// `n` spread evenly over `secs` seconds: the share of second `k`.
fn spread(n: u32, secs: u32, k: u32) -> u32 {
    n * (k + 1) / secs - n * k / secs
}

struct Event {
    kind: Kind,
    /// Seconds after the script's start.
    offset: u32,
    /// Absolute start second (once started).
    start: u32,
    /// Steps done so far.
    done: u32,
    items: Vec<Live>,
    coll: usize,
    session: usize,
    prev: Option<Ts>,
    incident: Option<usize>,
    decoy: Option<usize>,
    uuid: [u8; 16],
}

/// The scripted events of a run.
pub struct Script {
    events: Vec<Event>,
    started: bool,
    now: u32,
    staging_span: u32,
    staging_docs: u32,
}

impl Script {
    pub fn new(g: &mut Gen) -> Script {
        let gap = g.params.gap;
        let jit = g.params.jitter;
        let plan: [(Kind, u32); 17] = [
            (Kind::CollMod, 0),
            (Kind::IndexBuild, gap / 4),
            (Kind::Election, gap / 2),
            (Kind::FromMigrate, gap),
            (Kind::Drop, 2 * gap),
            (Kind::Recreate, 2 * gap + jit + 12),
            (Kind::Staging, 3 * gap),
            (Kind::DropDatabase, 4 * gap),
            (Kind::SessionsPurge, 5 * gap),
            (Kind::Rename, 6 * gap),
            (Kind::DeleteBurst, 7 * gap),
            (Kind::Aborted, 8 * gap),
            (Kind::TxnDeletes, 9 * gap),
            (Kind::DropIndexes, 10 * gap),
            (Kind::Wipe, 11 * gap),
            (Kind::Batched, 12 * gap),
            (Kind::ConvertToCapped, 13 * gap),
        ];
        let events = plan
            .iter()
            .map(|&(kind, at)| Event {
                kind,
                offset: at
                    + if jit > 0 {
                        g.rng.random_range(0..jit)
                    } else {
                        0
                    },
                start: 0,
                done: 0,
                items: Vec::new(),
                coll: 0,
                session: 0,
                prev: None,
                incident: None,
                decoy: None,
                uuid: [0; 16],
            })
            .collect();
        Script {
            events,
            started: false,
            now: 0,
            staging_span: 2 * gap,
            staging_docs: g.params.staging_docs,
        }
    }

    /// Seconds from the start to the end of the last event (approximately).
    pub fn approx_secs(&self, p: &Params) -> u32 {
        13 * p.gap + p.jitter + 5 + p.tail
    }

    pub fn started(&self) -> bool {
        self.started
    }

    /// True once every event is over.
    pub fn finished(&self) -> bool {
        self.started
            && self
                .events
                .iter()
                .all(|e| self.now >= e.start + self.duration(e.kind))
    }

    fn duration(&self, k: Kind) -> u32 {
        match k {
            Kind::IndexBuild | Kind::ConvertToCapped => 2,
            Kind::FromMigrate => 3,
            Kind::SessionsPurge => 2,
            Kind::DeleteBurst => 4,
            Kind::Aborted => 3,
            Kind::Wipe => 5,
            Kind::Staging => 1 + self.staging_span,
            _ => 1,
        }
    }

    /// Starts the script at second `sec`, and keeps normal traffic from deleting or
    /// stripping documents around the planted bursts.
    pub fn start(&mut self, g: &mut Gen, sec: u32) {
        self.started = true;
        for e in &mut self.events {
            e.start = sec + e.offset;
        }
        for e in &self.events {
            let ns = match e.kind {
                Kind::FromMigrate => "shop.clicks",
                Kind::DeleteBurst => "shop.inventory",
                Kind::Aborted | Kind::TxnDeletes => "shop.payments",
                Kind::Wipe => "shop.profiles",
                // Not `shop.sessions_log`: it has a TTL index, and a batched delete
                // there is exactly what a TTL pass looks like (routine, not an incident).
                Kind::Batched => "shop.events",
                _ => continue,
            };
            if let Some(c) = g.world.find(ns) {
                let (from, to) = (
                    e.start.saturating_sub(30),
                    e.start + self.duration(e.kind) + 30,
                );
                let q = &mut g.world.colls[c].quiet;
                *q = if q.0 > q.1 {
                    (from, to)
                } else {
                    (q.0.min(from), q.1.max(to))
                };
            }
        }
    }

    /// Adds this second's scripted steps to `slots`.
    pub fn demand(&mut self, sec: u32, slots: &mut Vec<Slot>) {
        self.now = sec;
        if !self.started {
            return;
        }
        for (i, e) in self.events.iter().enumerate() {
            if sec < e.start || sec >= e.start + self.duration(e.kind) {
                continue;
            }
            let k = sec - e.start;
            let n = match e.kind {
                Kind::FromMigrate => spread(FROM_MIGRATE, 3, k),
                Kind::SessionsPurge => spread(SESSIONS_PURGE, 2, k),
                Kind::DeleteBurst => spread(DELETE_BURST, 4, k),
                Kind::Wipe => spread(WIPES, 5, k),
                Kind::Aborted => (k == 0 || k == 2) as u32,
                // The create, then the inserts spread over the following seconds.
                Kind::Staging if k > 0 => spread(self.staging_docs, self.staging_span, k - 1),
                _ => 1,
            };
            slots.extend(std::iter::repeat_n(Slot::Event(i), n as usize));
        }
    }

    /// Runs the next step of event `i`.
    pub fn step(&mut self, g: &mut Gen, i: usize) {
        let e = &mut self.events[i];
        let step = e.done;
        e.done += 1;
        match e.kind {
            Kind::CollMod => coll_mod(g),
            Kind::IndexBuild => index_build(g, e, step),
            Kind::Election => {
                g.em.term += 1;
                g.noop("new primary");
            }
            Kind::FromMigrate => from_migrate(g, e, step),
            Kind::Drop => drop_orders(g),
            Kind::Recreate => recreate_orders(g),
            Kind::Staging => staging(g, e, step),
            Kind::DropDatabase => drop_database(g, "analytics"),
            Kind::SessionsPurge => sessions_purge(g, e, step),
            Kind::Rename => rename_over_customers(g),
            Kind::DeleteBurst => delete_burst(g, e, step),
            Kind::Aborted => aborted(g, e, step),
            Kind::TxnDeletes => txn_deletes(g),
            Kind::DropIndexes => drop_indexes(g),
            Kind::Wipe => wipe(g, e, step),
            Kind::Batched => batched(g),
            Kind::ConvertToCapped => convert_to_capped(g, e, step),
        }
    }
}

fn id_index(g: &mut Gen) {
    let w = &mut g.em.w;
    w.doc("idIndex");
    w.i32("v", 2);
    w.doc("key");
    w.i32("_id", 1);
    w.end();
    w.str("name", "_id_");
    w.end();
}

pub(crate) fn index_fields(g: &mut Gen, ix: &IndexSpec) {
    let w = &mut g.em.w;
    w.i32("v", 2);
    w.doc("key");
    for (f, d) in ix.key {
        w.i32(f, *d);
    }
    w.end();
    w.str("name", ix.name);
    if ix.unique {
        w.bool("unique", true);
    }
    if let Some(t) = ix.ttl {
        w.i32("expireAfterSeconds", t);
    }
}

/// `create` (with `idIndex`) and one `createIndexes` per secondary index, as a
/// server logs them for a new, empty collection.
pub(crate) fn create_collection(g: &mut Gen, c: usize, capped_size: Option<i64>) {
    let (db, name, uuid, indexes) = {
        let coll = &g.world.colls[c];
        (
            coll.db.clone(),
            coll.name.clone(),
            coll.uuid,
            coll.indexes.clone(),
        )
    };
    let cmd_ns = format!("{db}.$cmd");
    g.em.begin("c", &cmd_ns, Some(&uuid));
    g.em.w.doc("o");
    g.em.w.str("create", &name);
    if let Some(size) = capped_size {
        g.em.w.bool("capped", true);
        g.em.w.i64("size", size);
    }
    id_index(g);
    g.em.w.end();
    g.em.finish(Prev::None);
    for ix in &indexes {
        g.em.begin("c", &cmd_ns, Some(&uuid));
        g.em.w.doc("o");
        g.em.w.str("createIndexes", &name);
        index_fields(g, ix);
        g.em.w.end();
        g.em.finish(Prev::None);
    }
}

fn coll_mod(g: &mut Gen) {
    let c = g.world.get("shop.sessions_log");
    let uuid = g.world.colls[c].uuid;
    let (old, new): (i32, i32) = (604_800, 259_200);
    g.em.begin("c", "shop.$cmd", Some(&uuid));
    let w = &mut g.em.w;
    w.doc("o");
    w.str("collMod", "sessions_log");
    w.doc("index");
    w.str("name", "createdAt_1");
    // As a 7.0 primary logs it (peer data `collMod_ttl_index/oplog.bson`): the
    // number as int64, the old options under `o2.indexOptions_old` (5.0+; 4.x logged
    // `expireAfterSeconds_old`). mongorestore 100.11.0 refuses an int32 here.
    w.i64("expireAfterSeconds", new as i64);
    w.end();
    w.end();
    w.doc("o2");
    w.doc("collectionOptions_old");
    w.uuid("uuid", &uuid);
    w.end();
    w.doc("indexOptions_old");
    w.i64("expireAfterSeconds", old as i64);
    w.end();
    w.end();
    g.em.finish(Prev::None);
    for ix in &mut g.world.colls[c].indexes {
        if ix.name == "createdAt_1" {
            ix.ttl = Some(new);
        }
    }
}

fn index_build(g: &mut Gen, e: &mut Event, step: u32) {
    let Some(c) = g.world.find("shop.orders") else {
        return;
    };
    if step == 0 {
        e.uuid = super::rng::uuid(&mut g.rng);
    }
    let uuid = g.world.colls[c].uuid;
    let spec = IndexSpec {
        name: "createdAt_-1",
        key: &[("createdAt", -1)],
        unique: false,
        ttl: None,
    };
    g.em.begin("c", "shop.$cmd", Some(&uuid));
    g.em.w.doc("o");
    g.em.w.str(
        if step == 0 {
            "startIndexBuild"
        } else {
            "commitIndexBuild"
        },
        "orders",
    );
    g.em.w.uuid("indexBuildUUID", &e.uuid);
    g.em.w.arr("indexes");
    g.em.w.doc("");
    index_fields(g, &spec);
    g.em.w.end();
    g.em.w.end();
    g.em.w.end();
    g.em.finish(Prev::None);
    if step == 1 {
        g.world.colls[c].indexes.push(spec);
    }
}

fn from_migrate(g: &mut Gen, e: &mut Event, step: u32) {
    let c = g.world.get("shop.clicks");
    let Some(l) = g.world.colls[c].pool.take(&mut g.rng) else {
        return;
    };
    let ts = g.delete(c, l, true, None);
    if step == 0 {
        e.decoy = Some(g.decoys.len());
        g.decoys.push(Decoy {
            what: "fromMigrate deletes",
            ns: "shop.clicks".into(),
            first_ts: ts,
            last_ts: ts,
            count: 0,
            why_silent: "chunk migration (fromMigrate: true): the range moved to another shard; not user activity",
        });
    }
    if let Some(d) = e.decoy {
        g.decoys[d].last_ts = ts;
        g.decoys[d].count += 1;
    }
}

/// Writes `{drop: coll}` with `o2.numRecords` and marks the collection gone.
fn write_drop(g: &mut Gen, c: usize) -> (Ts, u64) {
    let coll = &g.world.colls[c];
    let n = coll.count;
    let cmd_ns = format!("{}.$cmd", coll.db);
    g.em.begin("c", &cmd_ns, Some(&coll.uuid));
    g.em.w.doc("o");
    g.em.w.str("drop", &coll.name);
    g.em.w.end();
    g.em.w.doc("o2");
    g.em.w.i64("numRecords", n as i64);
    g.em.w.end();
    let ts = g.em.finish(Prev::None);
    let coll = &mut g.world.colls[c];
    coll.exists = false;
    coll.pool.take_all();
    coll.count = 0;
    (ts, n)
}

fn drop_orders(g: &mut Gen) {
    let c = g.world.get("shop.orders");
    let counts = g.world.user_counts();
    let (ts, n) = write_drop(g, c);
    g.em.want_wall(ts);
    let mut i = Incident::at("drop", "shop.orders", ts, counts);
    i.num_records = Some(n);
    g.incidents.push(i);
}

fn recreate_orders(g: &mut Gen) {
    let uuid = super::rng::uuid(&mut g.rng);
    let spec = CollSpec {
        db: "shop",
        name: "orders".into(),
        shape: Shape::Order,
        id_kind: IdKind::Oid,
        first_n: 0,
        indexes: vec![
            IndexSpec {
                name: "status_1",
                key: &[("status", 1)],
                unique: false,
                ttl: None,
            },
            IndexSpec {
                name: "customerId_1",
                key: &[("customerId", 1)],
                unique: false,
                ttl: None,
            },
        ],
        bg: true,
    };
    let c = g.world.add(spec, uuid, g.params.pool_cap);
    g.world.colls[c].exists = true;
    create_collection(g, c, None);
}

fn staging(g: &mut Gen, e: &mut Event, step: u32) {
    if step == 0 {
        let uuid = super::rng::uuid(&mut g.rng);
        let spec = CollSpec {
            db: "shop",
            name: "orders_staging".into(),
            shape: Shape::Customer,
            id_kind: IdKind::Oid,
            first_n: 0,
            indexes: vec![IndexSpec {
                name: "email_1",
                key: &[("email", 1)],
                unique: true,
                ttl: None,
            }],
            bg: false,
        };
        e.coll = g.world.add(spec, uuid, g.params.pool_cap);
        g.world.colls[e.coll].exists = true;
        create_collection(g, e.coll, None);
    } else if g.world.colls[e.coll].exists {
        g.insert(e.coll, None);
    }
}

fn drop_database(g: &mut Gen, db: &str) {
    let colls: Vec<usize> = (0..g.world.colls.len())
        .filter(|&c| g.world.colls[c].exists && g.world.colls[c].db == db)
        .collect();
    let counts = g.world.user_counts();
    let mut first = None;
    let mut names = Vec::new();
    let mut total = 0;
    for c in colls {
        names.push(g.world.colls[c].ns.clone());
        let (ts, n) = write_drop(g, c);
        first.get_or_insert(ts);
        total += n;
    }
    g.em.begin("c", &format!("{db}.$cmd"), None);
    g.em.w.doc("o");
    g.em.w.i32("dropDatabase", 1);
    g.em.w.end();
    let last = g.em.finish(Prev::None);
    let first = first.unwrap_or(last);
    g.em.want_wall(first);
    let mut i = Incident::at("dropDatabase", db, first, counts);
    i.last_ts = last;
    i.count = names.len() as u64;
    i.num_records = Some(total);
    i.collections = Some(names);
    g.incidents.push(i);
}

fn sessions_purge(g: &mut Gen, e: &mut Event, step: u32) {
    let uuid = g.sessions_coll_uuid;
    let sid = super::rng::uuid(&mut g.rng);
    let uid = g.sessions[0].uid;
    g.em.begin("d", "config.system.sessions", Some(&uuid));
    let w = &mut g.em.w;
    w.doc("o");
    w.doc("_id");
    w.uuid("id", &sid);
    w.bin("uid", super::bsonw::SUBTYPE_GENERIC, &uid);
    w.end();
    w.end();
    let ts = g.em.finish(Prev::None);
    if step == 0 {
        e.decoy = Some(g.decoys.len());
        g.decoys.push(Decoy {
            what: "expired logical sessions reaped",
            ns: "config.system.sessions".into(),
            first_ts: ts,
            last_ts: ts,
            count: 0,
            why_silent: "the server deletes expired sessions itself; config.system.sessions holds no user data",
        });
    }
    if let Some(d) = e.decoy {
        g.decoys[d].last_ts = ts;
        g.decoys[d].count += 1;
    }
}

/// `renameCollection` of `src` over the existing `dst` with `dropTarget`; the
/// target's state becomes the source's. Returns (ts, documents the target had).
fn rename_over(g: &mut Gen, src: usize, dst: usize) -> (Ts, u64) {
    let (s, d) = (&g.world.colls[src], &g.world.colls[dst]);
    let lost = d.count;
    g.em.begin("c", &format!("{}.$cmd", s.db), Some(&s.uuid));
    let w = &mut g.em.w;
    w.doc("o");
    w.str("renameCollection", &s.ns);
    w.str("to", &d.ns);
    w.bool("stayTemp", false);
    w.uuid("dropTarget", &d.uuid);
    w.end();
    w.doc("o2");
    w.i64("numRecords", lost as i64);
    w.end();
    let ts = g.em.finish(Prev::None);
    let (uuid, items, count, capped, indexes) = {
        let s = &mut g.world.colls[src];
        s.exists = false;
        let items = s.pool.take_all();
        let count = s.count;
        s.count = 0;
        (s.uuid, items, count, s.capped, s.indexes.clone())
    };
    let d = &mut g.world.colls[dst];
    d.uuid = uuid;
    d.pool.replace(items);
    d.count = count;
    d.capped = capped;
    d.indexes = indexes;
    (ts, lost)
}

fn rename_over_customers(g: &mut Gen) {
    let src = g.world.get("shop.orders_staging");
    let dst = g.world.get("shop.customers");
    let counts = g.world.user_counts();
    let (ts, lost) = rename_over(g, src, dst);
    g.em.want_wall(ts);
    let mut i = Incident::at("renameDropTarget", "shop.customers", ts, counts);
    i.num_records = Some(lost);
    g.incidents.push(i);
}

fn delete_burst(g: &mut Gen, e: &mut Event, step: u32) {
    let c = g.world.get("shop.inventory");
    if step == 0 {
        let counts = g.world.user_counts();
        let ts = g.em.peek_ts();
        let mut i = Incident::at("deleteBurst", "shop.inventory", ts, counts);
        i.count = 0;
        e.incident = Some(g.incidents.len());
        g.incidents.push(i);
    }
    let Some(l) = g.world.colls[c].pool.take(&mut g.rng) else {
        return;
    };
    let ts = g.delete(c, l, false, None);
    if step == 0 {
        g.em.want_wall(ts);
    }
    if let Some(i) = e.incident {
        g.incidents[i].last_ts = ts;
        g.incidents[i].count += 1;
    }
}

/// Writes the `applyOps` array deleting `items` from `c`.
fn apply_ops_deletes(g: &mut Gen, c: usize, items: &[Live]) {
    g.em.w.arr("applyOps");
    for l in items {
        g.inner_delete(c, *l);
    }
    g.em.w.end();
}

fn aborted(g: &mut Gen, e: &mut Event, step: u32) {
    let c = g.world.get("shop.payments");
    if step == 0 {
        e.coll = c;
        e.items = (0..ABORTED_DELETES)
            .filter_map(|_| g.world.colls[c].pool.take(&mut g.rng))
            .collect();
        e.session = g.script_session();
        g.sessions[e.session].busy = true;
        g.em.begin_session(&g.sessions[e.session], "c", "admin.$cmd", None);
        g.em.w.doc("o");
        let items = std::mem::take(&mut e.items);
        apply_ops_deletes(g, c, &items);
        e.items = items;
        g.em.w.bool("prepare", true);
        g.em.w.end();
        let ts = g.em.finish(Prev::Start);
        e.prev = Some(ts);
        e.decoy = Some(g.decoys.len());
        g.decoys.push(Decoy {
            what: "aborted prepared transaction",
            ns: "shop.payments".into(),
            first_ts: ts,
            last_ts: ts,
            count: e.items.len() as u64,
            why_silent:
                "the transaction was aborted (abortTransaction): its deletes never happened",
        });
    } else {
        g.em.begin_session(&g.sessions[e.session], "c", "admin.$cmd", None);
        g.em.w.doc("o");
        g.em.w.i32("abortTransaction", 1);
        g.em.w.end();
        let prev = e.prev.unwrap_or(Ts::ZERO);
        let ts = g.em.finish(Prev::At(prev, g.em.term));
        g.sessions[e.session].busy = false;
        for l in e.items.drain(..) {
            g.world.colls[e.coll].pool.add(&mut g.rng, l);
        }
        if let Some(d) = e.decoy {
            g.decoys[d].last_ts = ts;
        }
    }
}

fn txn_deletes(g: &mut Gen) {
    let c = g.world.get("shop.payments");
    let items: Vec<Live> = (0..TXN_DELETES)
        .filter_map(|_| g.world.colls[c].pool.take(&mut g.rng))
        .collect();
    let counts = g.world.user_counts();
    let s = g.script_session();
    let per = items.len().div_ceil(TXN_PARTS);
    let mut prev = Prev::Start;
    let mut last = Ts::ZERO;
    for (k, part) in items.chunks(per.max(1)).enumerate() {
        g.em.begin_session(&g.sessions[s], "c", "admin.$cmd", None);
        g.em.w.doc("o");
        apply_ops_deletes(g, c, part);
        if k + 1 < TXN_PARTS {
            g.em.w.bool("partialTxn", true);
        } else {
            g.em.w.i32("count", items.len() as i32);
        }
        g.em.w.end();
        last = g.em.finish(prev);
        prev = Prev::At(last, g.em.term);
    }
    for _ in &items {
        g.world.colls[c].deleted();
    }
    g.em.want_wall(last);
    let mut i = Incident::at("deleteBurst", "shop.payments", last, counts);
    i.count = items.len() as u64;
    i.in_transaction = true;
    g.incidents.push(i);
}

fn drop_indexes(g: &mut Gen) {
    let c = g.world.get("shop.orders_archive");
    let counts = g.world.user_counts();
    let uuid = g.world.colls[c].uuid;
    let spec = IndexSpec {
        name: "status_1",
        key: &[("status", 1)],
        unique: false,
        ttl: None,
    };
    g.em.begin("c", "shop.$cmd", Some(&uuid));
    g.em.w.doc("o");
    g.em.w.str("dropIndexes", "orders_archive");
    g.em.w.str("index", "status_1");
    g.em.w.end();
    g.em.w.doc("o2");
    index_fields(g, &spec);
    g.em.w.end();
    let ts = g.em.finish(Prev::None);
    g.world.colls[c].indexes.retain(|i| i.name != "status_1");
    g.em.want_wall(ts);
    g.incidents.push(Incident::at(
        "dropIndexes",
        "shop.orders_archive",
        ts,
        counts,
    ));
}

fn wipe(g: &mut Gen, e: &mut Event, step: u32) {
    let c = g.world.get("shop.profiles");
    if step == 0 {
        // The wiped profiles leave the pool: live (the count is unchanged) but never
        // given a normal update again (their `prefs` may be gone).
        e.items = (0..WIPES)
            .filter_map(|_| g.world.colls[c].pool.take(&mut g.rng))
            .collect();
        let counts = g.world.user_counts();
        let mut i = Incident::at("wipingUpdate", "shop.profiles", g.em.peek_ts(), counts);
        i.count = 0;
        e.incident = Some(g.incidents.len());
        g.incidents.push(i);
    }
    let Some(l) = e.items.get(step as usize).copied() else {
        return;
    };
    let kind = match g.rng.random_range(0..4) {
        0 => Wipe::ReplaceWithId,
        1 | 2 => Wipe::Unset,
        _ => Wipe::DiffDelete,
    };
    let coll = &g.world.colls[c];
    g.em.begin("u", &coll.ns, Some(&coll.uuid));
    write_wipe(&mut g.em.w, kind, l);
    g.em.w.doc("o2");
    l.id.write(&mut g.em.w, "_id");
    g.em.w.end();
    let ts = g.em.finish(Prev::None);
    if step == 0 {
        g.em.want_wall(ts);
    }
    if let Some(i) = e.incident {
        g.incidents[i].last_ts = ts;
        g.incidents[i].count += 1;
    }
}

fn batched(g: &mut Gen) {
    let c = g.world.get("shop.events");
    let items: Vec<Live> = (0..BATCHED)
        .filter_map(|_| g.world.colls[c].pool.take(&mut g.rng))
        .collect();
    let counts = g.world.user_counts();
    g.em.begin("c", "admin.$cmd", None);
    g.em.w.doc("o");
    apply_ops_deletes(g, c, &items);
    g.em.w.end();
    let ts = g.em.finish(Prev::None);
    for _ in &items {
        g.world.colls[c].deleted();
    }
    g.em.want_wall(ts);
    let mut i = Incident::at("deleteBurst", "shop.events", ts, counts);
    i.count = items.len() as u64;
    g.incidents.push(i);
}

fn convert_to_capped(g: &mut Gen, e: &mut Event, step: u32) {
    let events = g.world.get("shop.events");
    if step == 0 {
        // cloneCollectionAsCapped: a capped temporary collection, the newest
        // documents that fit copied into it.
        let tag: String = (0..5)
            .map(|_| {
                let k = g.rng.random_range(0..36u8);
                (if k < 10 { b'0' + k } else { b'A' + k - 10 }) as char
            })
            .collect();
        let uuid = super::rng::uuid(&mut g.rng);
        let spec = CollSpec {
            db: "shop",
            name: format!("tmp{tag}.convertToCapped.events"),
            shape: Shape::Event,
            id_kind: IdKind::Oid,
            first_n: 0,
            indexes: vec![],
            bg: false,
        };
        let tmp = g.world.add(spec, uuid, g.params.pool_cap);
        g.world.colls[tmp].exists = true;
        g.world.colls[tmp].capped = true;
        g.world.colls[events].bg = false;
        let have = g.world.colls[events].pool.len();
        let keep = (have * 3 / 5).min(g.params.capped_keep_max);
        let size = (keep as i64 * 96).max(4096);
        create_collection(g, tmp, Some(size));
        let copies: Vec<Live> = g.world.colls[events].pool.items()[have - keep..].to_vec();
        for l in copies {
            g.write_insert(tmp, l, None);
            g.world.colls[tmp].inserted(&mut g.rng, l);
        }
        e.coll = tmp;
    } else {
        let counts = g.world.user_counts();
        let (ts, lost) = rename_over(g, e.coll, events);
        g.world.colls[events].bg = true;
        g.em.want_wall(ts);
        let mut i = Incident::at("renameDropTarget", "shop.events", ts, counts);
        i.num_records = Some(lost);
        i.convert_to_capped = true;
        g.incidents.push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_adds_up() {
        for (n, secs) in [(300, 4), (160, 3), (150, 5), (7, 3)] {
            assert_eq!((0..secs).map(|k| spread(n, secs, k)).sum::<u32>(), n);
        }
    }
}
