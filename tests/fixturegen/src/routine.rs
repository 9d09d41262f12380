//! Routine traffic: what a real application's oplog holds besides its own writes and
//! the planted incidents, each in the shape the server writes it (the sources are the
//! ones cited in pitr's `src/forensics/routine.rs`):
//!
//! - **retryable writes**: most background inserts, updates and deletes carry `lsid`,
//!   `txnNumber` and `stmtId` (first, as the server writes them) and `prevOpTime`;
//! - **`$out` refreshes**: a reporting job rebuilding `reports.daily` every 5 minutes
//!   and a `mapReduce` (`out: replace`, an `$out` since 4.4) rebuilding
//!   `reports.top_products` every 10: `create` of `tmp.agg_out.<UUID>` with
//!   `temp: true` and `idIndex`, the target's index copied by `createIndexes`, the
//!   results inserted, `renameCollection` over the target with `stayTemp: false`,
//!   `dropTarget: <target UUID>` and `o2.numRecords`; one run fails and drops its
//!   temporary collection;
//! - **TTL expiry**: `shop.otp_tokens`, created with a TTL index (300 s), gets a
//!   trickle of one-time tokens and one batch of 110 from a mailing job; the TTL
//!   monitor, every 60 s, deletes what expired in 6.1+ batched `applyOps` entries
//!   without a session (at most 100 deletes each), a lone expiry as a plain `d`;
//! - **time series**: `metrics.cpu` (buckets `metrics.system.buckets.cpu`, created with
//!   `expireAfterSeconds`, and its view in `metrics.system.views`) gets a measurement
//!   per host a minute (a bucket `i`, then `$v:2` diff `u`s), and a backfill of old
//!   measurements whose buckets the TTL monitor deletes at its next pass.
//!
//! Everything here draws from its own random stream (seeded from the run's seed), and
//! its entries come after the second's other entries and take their wall clocks from
//! the emitter's side stream: the main stream, and with it every background write
//! and planted incident, is the same with or without routine traffic (only `ts`
//! ordinals and walls of later entries in a second shift).

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};

use super::emit::Prev;
use super::ids::{Id, Live, OidGen};
use super::rng::{hex, mix, uuid, MainRng};
use super::scenario::Gen;
use super::script::create_collection;
use super::shapes::Shape;
use super::truth::RoutineOp;
use super::world::{CollSpec, IdKind, IndexSpec};
use pitr::oplog::Ts;

/// The TTL monitor's period (`ttlMonitorSleepSecs` default).
const TTL_PERIOD: u32 = 60;
/// Deletes per batched `applyOps` (`batchedDeletesTargetBatchDocs` default).
const BATCH_DOCS: usize = 100;
/// `shop.otp_tokens`' TTL.
const TOKEN_TTL: i32 = 300;
/// Tokens the mailing job issues at once: their expiry is one TTL pass of more than
/// find-drop's burst threshold.
const TOKEN_BATCH: u32 = 110;
/// `metrics.cpu`'s `expireAfterSeconds` and `bucketMaxSpanSeconds` (granularity
/// seconds): ttl.cpp deletes a bucket once its `_id` time is older than both.
const TS_EXPIRE: i64 = 86_400;
const TS_MAX_SPAN: u32 = 3_600;

/// One `$out` job.
struct OutJob {
    db: &'static str,
    target: &'static str,
    /// For truth and details: `$out` or `mapReduce`.
    what: &'static str,
    every: u32,
    next: u32,
    /// Index copied to each temporary collection.
    index: IndexSpec,
    /// The target in the world, once it exists.
    coll: Option<usize>,
    /// Replacements with dropTarget: first, last, count.
    replaced: Option<(Ts, Ts, u64)>,
}

/// A time-series host's open bucket: world live entry, measurements so far.
struct Bucket {
    live: Live,
    n: u32,
}

/// The routine traffic of one run (inactive in the bench scenario).
pub struct RoutineTraffic {
    on: bool,
    rng: MainRng,
    oids: OidGen,
    retryable_share: f64,
    start: u32,
    jobs: Vec<OutJob>,
    failed_out_at: u32,
    tokens: Option<usize>,
    tokens_at: u32,
    token_batch_at: u32,
    next_token: u32,
    /// Live tokens with their expiry second, oldest first.
    expiring: VecDeque<(u32, Live)>,
    ttl_phase: u32,
    /// TTL passes of `shop.otp_tokens` that deleted at least the burst threshold.
    token_bursts: Option<(Ts, Ts, u64)>,
    buckets: Option<usize>,
    ts_at: u32,
    hosts: Vec<Option<Bucket>>,
    next_measure: u32,
    backfill_at: u32,
    /// Buckets and the second the TTL monitor may delete them.
    old_buckets: Vec<(u32, Live)>,
    ops: Vec<RoutineOp>,
}

impl RoutineTraffic {
    /// `backup_end`: routine collections appear after it, so the backup is the same
    /// with or without routine traffic.
    pub fn new(seed: u64, on: bool, retryable_share: f64, backup_end: u32) -> RoutineTraffic {
        let mut rng = MainRng::seed_from_u64(mix(seed ^ 0x7275_6e5f_726f_7574));
        let oids = OidGen::new(&mut rng, 2);
        let b = backup_end;
        let ix = |name, key| IndexSpec {
            name,
            key,
            unique: false,
            ttl: None,
        };
        RoutineTraffic {
            on,
            oids,
            retryable_share,
            start: b + 10,
            jobs: vec![
                OutJob {
                    db: "reports",
                    target: "daily",
                    what: "$out",
                    every: 300,
                    next: b + 40,
                    index: ix("day_1", &[("day", 1)]),
                    coll: None,
                    replaced: None,
                },
                OutJob {
                    db: "reports",
                    target: "top_products",
                    what: "mapReduce (out: replace)",
                    every: 600,
                    next: b + 70,
                    index: ix("metric_1", &[("metric", 1)]),
                    coll: None,
                    replaced: None,
                },
            ],
            failed_out_at: b + 505,
            tokens: None,
            tokens_at: b + 12,
            token_batch_at: b + 200 + rng.random_range(0..30),
            next_token: b + 20,
            expiring: VecDeque::new(),
            ttl_phase: rng.random_range(0..TTL_PERIOD),
            token_bursts: None,
            buckets: None,
            ts_at: b + 25,
            hosts: vec![None, None],
            next_measure: b + 30,
            backfill_at: b + 800 + rng.random_range(0..60),
            old_buckets: Vec::new(),
            ops: Vec::new(),
            rng,
        }
    }

    /// What find-drop must list as routine (with `--include-routine`), for truth.json.
    pub fn truth(&mut self) -> Vec<RoutineOp> {
        let mut ops = std::mem::take(&mut self.ops);
        for j in &self.jobs {
            if let Some((first, last, n)) = j.replaced {
                ops.push(RoutineOp {
                    kind: "renameDropTarget",
                    routine: "outReplace",
                    ns: format!("{}.{}", j.db, j.target),
                    ts: first,
                    last_ts: last,
                    count: n,
                    what: format!("{} refreshing it every {} s", j.what, j.every),
                });
            }
        }
        if let Some((first, last, n)) = self.token_bursts {
            ops.push(RoutineOp {
                kind: "deleteBurst",
                routine: "ttlExpiry",
                ns: "shop.otp_tokens".into(),
                ts: first,
                last_ts: last,
                count: n,
                what: "TTL passes deleting at least 100 expired tokens".into(),
            });
        }
        ops.sort_by_key(|o| o.ts);
        ops
    }
}

impl Gen {
    /// A session for a background insert, update or delete written as a retryable
    /// write (`None`: written without one), chosen from the routine stream.
    pub fn app_session(&mut self) -> Option<(usize, i32, Prev)> {
        let r = &mut self.routine;
        if r.retryable_share <= 0.0 || !r.rng.random_bool(r.retryable_share) {
            return None;
        }
        let n = self.sessions.len();
        let from = r.rng.random_range(0..n);
        let s = (0..n)
            .map(|k| (from + k) % n)
            .find(|&s| !self.sessions[s].busy)?;
        self.sessions[s].txn_number += 1;
        Some((s, 0, Prev::Start))
    }

    /// Writes this second's routine entries (after every other entry of the second).
    pub fn routine_second(&mut self, sec: u32) {
        if !self.routine.on || sec < self.routine.start || self.winding_down {
            return;
        }
        self.em.routine_now = true;
        if sec == self.routine.tokens_at {
            self.create_tokens();
        }
        if sec == self.routine.ts_at {
            self.create_timeseries();
        }
        for j in 0..self.routine.jobs.len() {
            if sec == self.routine.jobs[j].next {
                self.out_run(j, sec);
                let job = &mut self.routine.jobs[j];
                job.next = sec + job.every;
            }
        }
        if sec == self.routine.failed_out_at {
            self.failed_out(sec);
        }
        if self.routine.tokens.is_some() {
            if sec >= self.routine.next_token {
                self.issue_tokens(sec, 1, true);
                let gap = self.routine.rng.random_range(60..120);
                self.routine.next_token = sec + gap;
            }
            if sec == self.routine.token_batch_at {
                self.issue_tokens(sec, TOKEN_BATCH, false);
            }
        }
        if self.routine.buckets.is_some() {
            if sec >= self.routine.next_measure {
                self.measure(sec);
                self.routine.next_measure = sec + 60;
            }
            if sec == self.routine.backfill_at {
                self.backfill(sec);
            }
        }
        if (sec + self.routine.ttl_phase).is_multiple_of(TTL_PERIOD) {
            self.ttl_pass(sec);
        }
        self.em.routine_now = false;
    }

    fn new_coll(&mut self, db: &'static str, name: String, indexes: Vec<IndexSpec>) -> usize {
        let u = uuid(&mut self.routine.rng);
        let c = self.world.add(
            CollSpec {
                db,
                name,
                // Report rows; tokens and buckets are written by this module.
                shape: Shape::Rollup,
                id_kind: IdKind::Int,
                first_n: 0,
                indexes,
                bg: false,
            },
            u,
            usize::MAX,
        );
        self.world.colls[c].exists = true;
        c
    }

    /// `$out` (document_source_out.cpp, 4.4-7.0 on a replica set): temporary
    /// collection, its index, the results, the rename over the target.
    fn out_run(&mut self, j: usize, sec: u32) {
        let (db, target, index) = {
            let job = &self.routine.jobs[j];
            (job.db, job.target, job.index.clone())
        };
        let u = uuid(&mut self.routine.rng);
        let tmp_name = format!(
            "tmp.agg_out.{}-{}-{}-{}-{}",
            hex(&u[0..4]),
            hex(&u[4..6]),
            hex(&u[6..8]),
            hex(&u[8..10]),
            hex(&u[10..16])
        );
        let tmp = self.new_coll(db, tmp_name.clone(), vec![index]);
        self.temp_create(tmp);
        let rows = self.routine.rng.random_range(4..9);
        for _ in 0..rows {
            let l =
                self.world.colls[tmp].new_live(&mut self.routine.rng, &mut self.routine.oids, sec);
            self.write_insert(tmp, l, None);
            self.world.colls[tmp].inserted(&mut self.routine.rng, l);
        }
        let old = self.routine.jobs[j].coll;
        let (tmp_uuid, tmp_ns) = (self.world.colls[tmp].uuid, self.world.colls[tmp].ns.clone());
        self.em.begin("c", &format!("{db}.$cmd"), Some(&tmp_uuid));
        let w = &mut self.em.w;
        w.doc("o");
        w.str("renameCollection", &tmp_ns);
        w.str_fmt("to", format_args!("{db}.{target}"));
        w.bool("stayTemp", false);
        if let Some(t) = old {
            w.uuid("dropTarget", &self.world.colls[t].uuid);
        }
        w.end();
        if let Some(t) = old {
            w.doc("o2");
            w.i64("numRecords", self.world.colls[t].count as i64);
            w.end();
        }
        let ts = self.em.finish(Prev::None);
        // The temporary collection becomes the target.
        if let Some(t) = old {
            self.world.colls[t].exists = false;
            let job = &mut self.routine.jobs[j];
            job.replaced = Some(match job.replaced {
                Some((first, _, n)) => (first, ts, n + 1),
                None => (ts, ts, 1),
            });
        }
        let c = &mut self.world.colls[tmp];
        c.name = target.to_string();
        c.ns = format!("{db}.{target}");
        self.routine.jobs[j].coll = Some(tmp);
    }

    /// `create` with `temp: true` and `idIndex`, then the copied indexes.
    fn temp_create(&mut self, c: usize) {
        let (db, name, u, indexes) = {
            let c = &self.world.colls[c];
            (c.db.clone(), c.name.clone(), c.uuid, c.indexes.clone())
        };
        let cmd_ns = format!("{db}.$cmd");
        self.em.begin("c", &cmd_ns, Some(&u));
        let w = &mut self.em.w;
        w.doc("o");
        w.str("create", &name);
        w.bool("temp", true);
        w.doc("idIndex");
        w.i32("v", 2);
        w.doc("key");
        w.i32("_id", 1);
        w.end();
        w.str("name", "_id_");
        w.end();
        w.end();
        self.em.finish(Prev::None);
        for ix in &indexes {
            self.em.begin("c", &cmd_ns, Some(&u));
            self.em.w.doc("o");
            self.em.w.str("createIndexes", &name);
            super::script::index_fields(self, ix);
            self.em.w.end();
            self.em.finish(Prev::None);
        }
    }

    /// A `$out` that fails after writing part of its results: DocumentSourceOut's
    /// destructor drops the temporary collection.
    fn failed_out(&mut self, sec: u32) {
        let u = uuid(&mut self.routine.rng);
        let name = format!(
            "tmp.agg_out.{}-{}-{}-{}-{}",
            hex(&u[0..4]),
            hex(&u[4..6]),
            hex(&u[6..8]),
            hex(&u[8..10]),
            hex(&u[10..16])
        );
        let tmp = self.new_coll("reports", name.clone(), vec![]);
        self.temp_create(tmp);
        for _ in 0..2 {
            let l =
                self.world.colls[tmp].new_live(&mut self.routine.rng, &mut self.routine.oids, sec);
            self.write_insert(tmp, l, None);
            self.world.colls[tmp].inserted(&mut self.routine.rng, l);
        }
        let c = &self.world.colls[tmp];
        let (u, n) = (c.uuid, c.count);
        self.em.begin("c", "reports.$cmd", Some(&u));
        self.em.w.doc("o");
        self.em.w.str("drop", &name);
        self.em.w.end();
        self.em.w.doc("o2");
        self.em.w.i64("numRecords", n as i64);
        self.em.w.end();
        let ts = self.em.finish(Prev::None);
        let c = &mut self.world.colls[tmp];
        c.exists = false;
        c.pool.take_all();
        c.count = 0;
        self.routine.ops.push(RoutineOp {
            kind: "drop",
            routine: "tempDrop",
            ns: format!("reports.{name}"),
            ts,
            last_ts: ts,
            count: 1,
            what: "a failed $out dropping its temporary collection".into(),
        });
    }

    /// `shop.otp_tokens` with its TTL index, as a fresh collection gets them:
    /// `create`, then `createIndexes` (empty collection: no two-phase build).
    fn create_tokens(&mut self) {
        let c = self.new_coll(
            "shop",
            "otp_tokens".into(),
            vec![IndexSpec {
                name: "createdAt_1",
                key: &[("createdAt", 1)],
                unique: false,
                ttl: Some(TOKEN_TTL),
            }],
        );
        create_collection(self, c, None);
        self.routine.tokens = Some(c);
    }

    /// `n` tokens: one from the login service (a retryable insert), or a batch from a
    /// mailing job (`insertMany` without retryable writes: one `i` each).
    fn issue_tokens(&mut self, sec: u32, n: u32, retryable: bool) {
        let Some(c) = self.routine.tokens else { return };
        for _ in 0..n {
            let l = Live {
                id: Id::Oid(self.routine.oids.next(&mut self.routine.rng, sec)),
                born: sec,
                src: self.world.colls[c].index,
            };
            let sess = if retryable {
                self.app_session_always()
            } else {
                None
            };
            let coll = &self.world.colls[c];
            match sess {
                Some((s, _, _)) => {
                    self.em
                        .begin_session(&self.sessions[s], "i", &coll.ns, Some(&coll.uuid))
                }
                None => self.em.begin("i", &coll.ns, Some(&coll.uuid)),
            }
            let code = self.routine.rng.random_range(100_000..1_000_000);
            let user = self.routine.rng.random_range(1..9000);
            let w = &mut self.em.w;
            w.doc("o");
            l.id.write(w, "_id");
            w.str_fmt("userId", format_args!("u_{user:06}"));
            w.i32("code", code);
            w.date("createdAt", sec as i64 * 1000);
            w.end();
            w.doc("o2");
            l.id.write(w, "_id");
            w.end();
            let prev = match sess {
                Some((_, stmt, prev)) => {
                    w.i32("stmtId", stmt);
                    prev
                }
                None => Prev::None,
            };
            self.em.finish(prev);
            self.world.colls[c].inserted(&mut self.routine.rng, l);
            self.routine.expiring.push_back((sec + TOKEN_TTL as u32, l));
        }
    }

    /// Like [`Gen::app_session`], always with a session (when one is idle).
    fn app_session_always(&mut self) -> Option<(usize, i32, Prev)> {
        let n = self.sessions.len();
        let from = self.routine.rng.random_range(0..n);
        let s = (0..n)
            .map(|k| (from + k) % n)
            .find(|&s| !self.sessions[s].busy)?;
        self.sessions[s].txn_number += 1;
        Some((s, 0, Prev::Start))
    }

    /// `metrics.cpu`: its buckets collection (options abbreviated: the real
    /// `validator` is a long `$jsonSchema`), `system.views`, and the view.
    fn create_timeseries(&mut self) {
        let c = self.new_coll("metrics", "system.buckets.cpu".into(), vec![]);
        let u = self.world.colls[c].uuid;
        self.em.begin("c", "metrics.$cmd", Some(&u));
        let w = &mut self.em.w;
        w.doc("o");
        w.str("create", "system.buckets.cpu");
        w.doc("validator");
        w.doc("$jsonSchema");
        w.str("bsonType", "object");
        w.arr("required");
        w.str("", "_id");
        w.str("", "control");
        w.str("", "data");
        w.end();
        w.end();
        w.end();
        w.bool("clusteredIndex", true);
        w.doc("timeseries");
        w.str("timeField", "t");
        w.str("metaField", "host");
        w.str("granularity", "seconds");
        w.i32("bucketMaxSpanSeconds", TS_MAX_SPAN as i32);
        w.end();
        w.i64("expireAfterSeconds", TS_EXPIRE);
        w.end();
        self.em.finish(Prev::None);
        let views = uuid(&mut self.routine.rng);
        self.em.begin("c", "metrics.$cmd", Some(&views));
        let w = &mut self.em.w;
        w.doc("o");
        w.str("create", "system.views");
        w.doc("idIndex");
        w.i32("v", 2);
        w.doc("key");
        w.i32("_id", 1);
        w.end();
        w.str("name", "_id_");
        w.end();
        w.end();
        self.em.finish(Prev::None);
        self.em.begin("i", "metrics.system.views", Some(&views));
        let w = &mut self.em.w;
        w.doc("o");
        w.str("_id", "metrics.cpu");
        w.str("viewOn", "system.buckets.cpu");
        w.arr("pipeline");
        w.doc("");
        w.doc("$_internalUnpackBucket");
        w.str("timeField", "t");
        w.str("metaField", "host");
        w.i32("bucketMaxSpanSeconds", TS_MAX_SPAN as i32);
        w.end();
        w.end();
        w.end();
        w.end();
        w.doc("o2");
        w.str("_id", "metrics.cpu");
        w.end();
        self.em.finish(Prev::None);
        self.routine.buckets = Some(c);
    }

    /// A new bucket holding `n` measurements from second `from`, one a minute.
    fn write_bucket(&mut self, c: usize, host: usize, from: u32, n: u32) -> Live {
        let oid = self.routine.oids.next(&mut self.routine.rng, from);
        let l = Live {
            id: Id::Oid(oid),
            born: from,
            src: self.world.colls[c].index,
        };
        let coll = &self.world.colls[c];
        self.em.begin("i", &coll.ns, Some(&coll.uuid));
        let vals: Vec<f64> = (0..n)
            .map(|_| self.routine.rng.random_range(0..1000) as f64 / 10.0)
            .collect();
        let w = &mut self.em.w;
        w.doc("o");
        w.oid("_id", &oid);
        w.doc("control");
        w.i32("version", 1);
        for (key, k) in [("min", 0), ("max", n - 1)] {
            w.doc(key);
            w.date("t", (from + 60 * k) as i64 * 1000);
            w.f64("v", vals[k as usize]);
            w.end();
        }
        w.end();
        w.str_fmt("host", format_args!("h{:02}", host + 1));
        w.doc("data");
        w.doc("t");
        for k in 0..n {
            w.date(&k.to_string(), (from + 60 * k) as i64 * 1000);
        }
        w.end();
        w.doc("v");
        for (k, v) in vals.iter().enumerate() {
            w.f64(&k.to_string(), *v);
        }
        w.end();
        w.end();
        w.end();
        w.doc("o2");
        w.oid("_id", &oid);
        w.end();
        self.em.finish(Prev::None);
        self.world.colls[c].inserted(&mut self.routine.rng, l);
        l
    }

    /// One measurement per host: a new bucket, or a `$v:2` diff appending to it.
    fn measure(&mut self, sec: u32) {
        let Some(c) = self.routine.buckets else {
            return;
        };
        for h in 0..self.routine.hosts.len() {
            match self.routine.hosts[h].take() {
                None => {
                    let live = self.write_bucket(c, h, sec, 1);
                    self.routine.hosts[h] = Some(Bucket { live, n: 1 });
                }
                Some(mut b) => {
                    let v = self.routine.rng.random_range(0..1000) as f64 / 10.0;
                    let coll = &self.world.colls[c];
                    self.em.begin("u", &coll.ns, Some(&coll.uuid));
                    let k = b.n.to_string();
                    let w = &mut self.em.w;
                    w.doc("o");
                    w.i32("$v", 2);
                    w.doc("diff");
                    w.doc("scontrol");
                    w.doc("smax");
                    w.doc("u");
                    w.date("t", sec as i64 * 1000);
                    w.f64("v", v);
                    w.end();
                    w.end();
                    w.end();
                    w.doc("sdata");
                    w.doc("st");
                    w.doc("i");
                    w.date(&k, sec as i64 * 1000);
                    w.end();
                    w.end();
                    w.doc("sv");
                    w.doc("i");
                    w.f64(&k, v);
                    w.end();
                    w.end();
                    w.end();
                    w.end();
                    w.end();
                    w.doc("o2");
                    b.live.id.write(w, "_id");
                    w.end();
                    self.em.finish(Prev::None);
                    b.n += 1;
                    self.routine.hosts[h] = Some(b);
                }
            }
        }
    }

    /// Old measurements loaded by a backfill job: one bucket per host and hour,
    /// three days old, expired as soon as the TTL monitor passes.
    fn backfill(&mut self, sec: u32) {
        let Some(c) = self.routine.buckets else {
            return;
        };
        let from = sec - 3 * 86_400;
        for h in 0..self.routine.hosts.len() {
            for hour in 0..4 {
                let l = self.write_bucket(c, h, from + hour * TS_MAX_SPAN, 3);
                let expires = l.born + TS_EXPIRE as u32 + TS_MAX_SPAN;
                self.routine.old_buckets.push((expires, l));
            }
        }
    }

    /// The TTL monitor's pass: expired tokens, then expired buckets, each in batches.
    fn ttl_pass(&mut self, sec: u32) {
        if let Some(c) = self.routine.tokens {
            let mut gone = Vec::new();
            while self
                .routine
                .expiring
                .front()
                .is_some_and(|(at, _)| *at <= sec)
            {
                if let Some((_, l)) = self.routine.expiring.pop_front() {
                    gone.push(l);
                }
            }
            if let Some((first, last)) = self.ttl_deletes(c, &gone) {
                if gone.len() >= 100 {
                    let n = gone.len() as u64;
                    self.routine.token_bursts = Some(match self.routine.token_bursts {
                        Some((f, _, m)) => (f, last, m + n),
                        None => (first, last, n),
                    });
                }
            }
        }
        if let Some(c) = self.routine.buckets {
            let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.routine.old_buckets)
                .into_iter()
                .partition(|(at, _)| *at <= sec);
            self.routine.old_buckets = keep;
            let gone: Vec<Live> = due.into_iter().map(|(_, l)| l).collect();
            self.ttl_deletes(c, &gone);
        }
    }

    /// Deletes `gone` from `c` as the TTL monitor does from 6.1: batched `applyOps`
    /// on `admin.$cmd` without a session, at most [`BATCH_DOCS`] each; a batch of one
    /// is a plain `d` entry. Returns the first and last entry's ts.
    fn ttl_deletes(&mut self, c: usize, gone: &[Live]) -> Option<(Ts, Ts)> {
        let mut span: Option<(Ts, Ts)> = None;
        for batch in gone.chunks(BATCH_DOCS) {
            let ts = if let [l] = batch {
                let coll = &self.world.colls[c];
                self.em.begin("d", &coll.ns, Some(&coll.uuid));
                self.em.w.doc("o");
                l.id.write(&mut self.em.w, "_id");
                self.em.w.end();
                self.em.finish(Prev::None)
            } else {
                self.em.begin("c", "admin.$cmd", None);
                self.em.w.doc("o");
                self.em.w.arr("applyOps");
                for l in batch {
                    self.inner_delete(c, *l);
                }
                self.em.w.end();
                self.em.w.end();
                self.em.finish(Prev::None)
            };
            // The ids stay in the pool: nothing else picks from these collections.
            for _ in batch {
                self.world.colls[c].deleted();
            }
            span = Some(span.map_or((ts, ts), |(f, _)| (f, ts)));
        }
        span
    }
}
