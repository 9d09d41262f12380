//! Normal traffic, and the primitive entries everything else is made of.
//!
//! Background operations are drawn from a weighted mix: inserts (some as retryable
//! writes with `lsid`/`txnNumber`/`stmtId`), updates in every form, scattered
//! deletes (never 100 per collection within 10 s, see `world::Limiter`), rare field
//! removals, small committed transactions, multi-part transactions
//! (`partialTxn`), prepared transactions committed a second later, and 6.1+ style
//! batched deletes. An operation that cannot run (its collection was dropped, or it
//! would exceed a limit) becomes an insert into `shop.clicks`.

use rand::Rng;

use super::emit::Prev;
use super::ids::{Live, Session};
use super::rng::weighted;
use super::scenario::Gen;
use super::world::{MAX_BG_DELETES_PER_10S, MAX_BG_UNSETS_PER_10S};
use pitr::oplog::Ts;

/// One kind of background operation.
#[derive(Clone, Copy, Debug)]
enum Bg {
    Insert,
    RetryInsert,
    RetryInsertMany,
    Update,
    Delete,
    Unset,
    TxnPay,
    TxnArchive,
    TxnLarge,
    Prepared,
    Batched,
}

/// The mix: (weight, operation, namespace).
const MIX: &[(u32, Bg, &str)] = &[
    (100, Bg::Insert, "shop.orders"),
    (40, Bg::RetryInsert, "shop.orders"),
    (140, Bg::Update, "shop.orders"),
    (10, Bg::Delete, "shop.orders"),
    (40, Bg::Insert, "shop.payments"),
    (30, Bg::Update, "shop.payments"),
    (100, Bg::Update, "shop.inventory"),
    (10, Bg::Insert, "shop.inventory"),
    (20, Bg::Insert, "shop.customers"),
    (50, Bg::Update, "shop.customers"),
    (10, Bg::Insert, "shop.profiles"),
    (50, Bg::Update, "shop.profiles"),
    (80, Bg::Insert, "shop.sessions_log"),
    (40, Bg::Delete, "shop.sessions_log"),
    (80, Bg::Insert, "shop.clicks"),
    (15, Bg::RetryInsertMany, "shop.clicks"),
    (10, Bg::Delete, "shop.clicks"),
    (70, Bg::Insert, "shop.events"),
    (30, Bg::Update, "analytics.pageviews"),
    (10, Bg::Insert, "analytics.pageviews"),
    (10, Bg::Update, "analytics.daily_rollup"),
    (10, Bg::Insert, "analytics.daily_rollup"),
    (10, Bg::Insert, "analytics.funnels"),
    (6, Bg::Unset, "shop.customers"),
    (6, Bg::Unset, "shop.profiles"),
    (20, Bg::TxnPay, "shop.payments"),
    (10, Bg::TxnArchive, "shop.orders_archive"),
    (8, Bg::Batched, "shop.sessions_log"),
    (3, Bg::TxnLarge, "shop.events"),
    (4, Bg::Prepared, "shop.payments"),
];

const FALLBACK_NS: &str = "shop.clicks";

/// A prepared transaction waiting for its `commitTransaction`.
pub struct Prepared {
    pub session: usize,
    pub prepare_ts: Ts,
    pub term: i64,
    /// Documents it inserts (visible at commit).
    pub inserted: Vec<(usize, Live)>,
    /// Documents it updates, out of their pools until the commit.
    pub locked: Vec<(usize, Live)>,
}

impl Gen {
    /// `{op: "n", ns: "", o: {msg}}`.
    pub fn noop(&mut self, msg: &str) -> Ts {
        self.em.begin("n", "", None);
        self.em.w.doc("o");
        self.em.w.str("msg", msg);
        self.em.w.end();
        self.em.finish(Prev::None)
    }

    /// A random idle session, its transaction number advanced (`None` when every
    /// session has a prepared transaction open).
    pub fn next_session(&mut self) -> Option<usize> {
        let n = self.sessions.len();
        let from = self.rng.random_range(0..n);
        let s = (0..n)
            .map(|k| (from + k) % n)
            .find(|&s| !self.sessions[s].busy)?;
        self.sessions[s].txn_number += 1;
        Some(s)
    }

    /// An idle session for a scripted transaction (a new one if none is idle).
    pub fn script_session(&mut self) -> usize {
        if let Some(s) = self.next_session() {
            return s;
        }
        let uid = self.sessions[0].uid;
        self.sessions.push(Session::new(&mut self.rng, uid));
        self.sessions.len() - 1
    }

    /// Inserts a new document into collection `c`; with `sess`
    /// (session, stmtId, prevOpTime) as a retryable write.
    pub fn insert(&mut self, c: usize, sess: Option<(usize, i32, Prev)>) -> Ts {
        let sec = self.em.sec();
        let l = self.world.colls[c].new_live(&mut self.rng, &mut self.oids, sec);
        let ts = self.write_insert(c, l, sess);
        self.world.colls[c].inserted(&mut self.rng, l);
        ts
    }

    /// Writes the insert entry of document `l` into `c` (the caller records it).
    pub fn write_insert(&mut self, c: usize, l: Live, sess: Option<(usize, i32, Prev)>) -> Ts {
        let coll = &self.world.colls[c];
        match sess {
            Some((s, _, _)) => {
                self.em
                    .begin_session(&self.sessions[s], "i", &coll.ns, Some(&coll.uuid))
            }
            None => self.em.begin("i", &coll.ns, Some(&coll.uuid)),
        }
        let w = &mut self.em.w;
        w.doc("o");
        coll.shape.write_fields(w, self.seed, l);
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
        self.em.finish(prev)
    }

    /// A normal update of document `l` of collection `c`; with `sess` (session,
    /// stmtId, prevOpTime) as a retryable write.
    pub fn update(&mut self, c: usize, l: Live, sess: Option<(usize, i32, Prev)>) -> Ts {
        let now = self.em.now_ms(&mut self.rng);
        self.begin_write("u", c, sess);
        let coll = &self.world.colls[c];
        coll.shape
            .write_update(&mut self.em.w, &mut self.rng, now, self.seed, l);
        self.em.w.doc("o2");
        l.id.write(&mut self.em.w, "_id");
        self.em.w.end();
        let prev = self.end_write(sess);
        self.em.finish(prev)
    }

    /// `{op: "d", o: {_id}}` of document `l` (already out of the pool); with `sess`
    /// as a retryable write.
    pub fn delete(
        &mut self,
        c: usize,
        l: Live,
        from_migrate: bool,
        sess: Option<(usize, i32, Prev)>,
    ) -> Ts {
        self.begin_write("d", c, sess);
        self.em.w.doc("o");
        l.id.write(&mut self.em.w, "_id");
        self.em.w.end();
        if from_migrate {
            self.em.w.bool("fromMigrate", true);
        }
        self.world.colls[c].deleted();
        let prev = self.end_write(sess);
        self.em.finish(prev)
    }

    /// Opens a write entry on collection `c`, with the session fields first for a
    /// retryable write.
    fn begin_write(&mut self, op: &str, c: usize, sess: Option<(usize, i32, Prev)>) {
        let coll = &self.world.colls[c];
        match sess {
            Some((s, _, _)) => {
                self.em
                    .begin_session(&self.sessions[s], op, &coll.ns, Some(&coll.uuid))
            }
            None => self.em.begin(op, &coll.ns, Some(&coll.uuid)),
        }
    }

    /// Writes `stmtId` of a retryable write; returns the `prevOpTime` to finish with.
    fn end_write(&mut self, sess: Option<(usize, i32, Prev)>) -> Prev {
        match sess {
            Some((_, stmt, prev)) => {
                self.em.w.i32("stmtId", stmt);
                prev
            }
            None => Prev::None,
        }
    }

    /// Writes one `applyOps` element deleting `l` from `c`.
    pub fn inner_delete(&mut self, c: usize, l: Live) {
        let coll = &self.world.colls[c];
        self.em.inner("d", &coll.ns, &coll.uuid);
        self.em.w.doc("o");
        l.id.write(&mut self.em.w, "_id");
        self.em.w.end();
        self.em.w.end();
    }

    /// Writes one `applyOps` element inserting `l` into `c`.
    pub fn inner_insert(&mut self, c: usize, l: Live) {
        let coll = &self.world.colls[c];
        self.em.inner("i", &coll.ns, &coll.uuid);
        self.em.w.doc("o");
        coll.shape.write_fields(&mut self.em.w, self.seed, l);
        self.em.w.end();
        self.em.w.doc("o2");
        l.id.write(&mut self.em.w, "_id");
        self.em.w.end();
        self.em.w.end();
    }

    /// Writes one `applyOps` element updating `l` of `c` normally.
    pub fn inner_update(&mut self, c: usize, l: Live) {
        let now = self.em.now_ms(&mut self.rng);
        let coll = &self.world.colls[c];
        self.em.inner("u", &coll.ns, &coll.uuid);
        coll.shape
            .write_update(&mut self.em.w, &mut self.rng, now, self.seed, l);
        self.em.w.doc("o2");
        l.id.write(&mut self.em.w, "_id");
        self.em.w.end();
        self.em.w.end();
    }

    /// Commits the prepared transactions of the previous second.
    pub fn commit_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            // The commit timestamp lies after every entry of the prepare's second.
            let commit_ts = if p.prepare_ts.t + 1 == self.em.sec() {
                Ts::new(p.prepare_ts.t, self.em.prev_second_entries + 1)
            } else {
                Ts::new(self.em.sec() - 1, 1)
            };
            self.em
                .begin_session(&self.sessions[p.session], "c", "admin.$cmd", None);
            self.em.w.doc("o");
            self.em.w.i32("commitTransaction", 1);
            self.em.w.ts("commitTimestamp", commit_ts.t, commit_ts.i);
            self.em.w.end();
            self.em.finish(Prev::At(p.prepare_ts, p.term));
            self.sessions[p.session].busy = false;
            for (c, l) in p.inserted {
                self.world.colls[c].inserted(&mut self.rng, l);
            }
            for (c, l) in p.locked {
                self.world.colls[c].pool.add(&mut self.rng, l);
            }
        }
    }

    /// One background operation.
    pub fn background(&mut self) {
        let k = weighted(&mut self.rng, MIX, |m| m.0);
        let (_, op, ns) = MIX[k];
        if !self.try_background(op, ns) {
            if let Some(c) = self.world.find(FALLBACK_NS) {
                self.insert(c, None);
            }
        }
    }

    fn try_background(&mut self, op: Bg, ns: &str) -> bool {
        let sec = self.em.sec();
        let Some(c) = self.world.find(ns) else {
            return false;
        };
        if !self.world.colls[c].bg {
            return false;
        }
        match op {
            Bg::Insert => {
                let sess = self.app_session();
                self.insert(c, sess);
            }
            Bg::RetryInsert => {
                let Some(s) = self.next_session() else {
                    return false;
                };
                self.insert(c, Some((s, 0, Prev::Start)));
            }
            Bg::RetryInsertMany => {
                let Some(s) = self.next_session() else {
                    return false;
                };
                let mut prev = Prev::Start;
                for stmt in 0..self.rng.random_range(2..5) {
                    let ts = self.insert(c, Some((s, stmt, prev)));
                    prev = Prev::At(ts, self.em.term);
                }
            }
            Bg::Update => {
                let coll = &self.world.colls[c];
                let Some(l) = coll.pool.pick(&mut self.rng) else {
                    return false;
                };
                if !coll.shape.updatable() {
                    return false;
                }
                let sess = self.app_session();
                self.update(c, l, sess);
            }
            Bg::Delete => {
                let coll = &mut self.world.colls[c];
                if coll.is_quiet(sec)
                    || coll.pool.is_empty()
                    || !coll.deletes.try_take(sec, 1, MAX_BG_DELETES_PER_10S)
                {
                    return false;
                }
                let l = coll.pool.take(&mut self.rng).expect("pool is not empty");
                let sess = self.app_session();
                self.delete(c, l, false, sess);
            }
            Bg::Unset => {
                let coll = &mut self.world.colls[c];
                if coll.is_quiet(sec)
                    || coll.pool.is_empty()
                    || !coll.unsets.try_take(sec, 1, MAX_BG_UNSETS_PER_10S)
                {
                    return false;
                }
                let l = coll.pool.pick(&mut self.rng).expect("pool is not empty");
                let coll = &self.world.colls[c];
                self.em.begin("u", &coll.ns, Some(&coll.uuid));
                coll.shape.write_minor_unset(&mut self.em.w, &mut self.rng);
                self.em.w.doc("o2");
                l.id.write(&mut self.em.w, "_id");
                self.em.w.end();
                self.em.finish(Prev::None);
            }
            Bg::TxnPay => return self.txn_pay(c),
            Bg::TxnArchive => return self.txn_archive(c),
            Bg::TxnLarge => return self.txn_large(c),
            Bg::Prepared => return self.prepared(c),
            Bg::Batched => {
                let k = self.rng.random_range(2..5u32);
                let coll = &mut self.world.colls[c];
                if coll.is_quiet(sec)
                    || coll.pool.len() < k as usize
                    || !coll.deletes.try_take(sec, k, MAX_BG_DELETES_PER_10S)
                {
                    return false;
                }
                let gone: Vec<Live> = (0..k)
                    .filter_map(|_| coll.pool.take(&mut self.rng))
                    .collect();
                self.em.begin("c", "admin.$cmd", None);
                self.em.w.doc("o");
                self.em.w.arr("applyOps");
                for l in &gone {
                    self.inner_delete(c, *l);
                    self.world.colls[c].deleted();
                }
                self.em.w.end();
                self.em.w.end();
                self.em.finish(Prev::None);
            }
        }
        true
    }

    /// A committed transaction: a payment inserted, its order marked paid.
    fn txn_pay(&mut self, payments: usize) -> bool {
        let Some(orders) = self.world.find("shop.orders") else {
            return false;
        };
        let Some(order) = self.world.colls[orders].pool.pick(&mut self.rng) else {
            return false;
        };
        let sec = self.em.sec();
        let pay = self.world.colls[payments].new_live(&mut self.rng, &mut self.oids, sec);
        let now = self.em.now_ms(&mut self.rng);
        let Some(s) = self.next_session() else {
            return false;
        };
        self.em
            .begin_session(&self.sessions[s], "c", "admin.$cmd", None);
        self.em.w.doc("o");
        self.em.w.arr("applyOps");
        self.inner_insert(payments, pay);
        let oc = &self.world.colls[orders];
        self.em.inner("u", &oc.ns, &oc.uuid);
        let w = &mut self.em.w;
        w.doc("o");
        w.i32("$v", 2);
        w.doc("diff");
        w.doc("u");
        w.str("status", "paid");
        w.end();
        w.doc("i");
        w.date("paidAt", now);
        w.end();
        w.end();
        w.end();
        w.doc("o2");
        order.id.write(w, "_id");
        w.end();
        w.end();
        self.em.w.end();
        self.em.w.end();
        self.em.finish(Prev::Start);
        self.world.colls[payments].inserted(&mut self.rng, pay);
        true
    }

    /// A committed transaction moving an order to the archive.
    fn txn_archive(&mut self, archive: usize) -> bool {
        let sec = self.em.sec();
        let Some(orders) = self.world.find("shop.orders") else {
            return false;
        };
        let oc = &mut self.world.colls[orders];
        if oc.is_quiet(sec)
            || oc.pool.is_empty()
            || !oc.deletes.try_take(sec, 1, MAX_BG_DELETES_PER_10S)
        {
            return false;
        }
        let Some(s) = self.next_session() else {
            return false;
        };
        let l = self.world.colls[orders]
            .pool
            .take(&mut self.rng)
            .expect("pool is not empty");
        self.em
            .begin_session(&self.sessions[s], "c", "admin.$cmd", None);
        self.em.w.doc("o");
        self.em.w.arr("applyOps");
        self.inner_insert(archive, l);
        self.inner_delete(orders, l);
        self.em.w.end();
        self.em.w.end();
        self.em.finish(Prev::Start);
        self.world.colls[orders].deleted();
        self.world.colls[archive].inserted(&mut self.rng, l);
        true
    }

    /// A large committed transaction: `partialTxn` parts chained by `prevOpTime`,
    /// the last one with `count`.
    fn txn_large(&mut self, events: usize) -> bool {
        let sec = self.em.sec();
        if self.in_window(sec) {
            return false;
        }
        let per = self.params.large_txn_ops;
        let parts = 3;
        let Some(s) = self.next_session() else {
            return false;
        };
        let mut prev = Prev::Start;
        let mut all = Vec::new();
        for part in 0..parts {
            let lives: Vec<Live> = (0..per)
                .map(|_| self.world.colls[events].new_live(&mut self.rng, &mut self.oids, sec))
                .collect();
            self.em
                .begin_session(&self.sessions[s], "c", "admin.$cmd", None);
            self.em.w.doc("o");
            self.em.w.arr("applyOps");
            for l in &lives {
                self.inner_insert(events, *l);
            }
            self.em.w.end();
            if part + 1 < parts {
                self.em.w.bool("partialTxn", true);
            } else {
                self.em.w.i32("count", (per * parts) as i32);
            }
            self.em.w.end();
            let ts = self.em.finish(prev);
            prev = Prev::At(ts, self.em.term);
            all.extend(lives);
        }
        for l in all {
            self.world.colls[events].inserted(&mut self.rng, l);
        }
        true
    }

    /// A prepared transaction (payment inserted, stock updated), committed at the
    /// start of the next second.
    fn prepared(&mut self, payments: usize) -> bool {
        let sec = self.em.sec();
        if self.in_window(sec) || self.winding_down {
            return false;
        }
        let Some(inv) = self.world.find("shop.inventory") else {
            return false;
        };
        if self.world.colls[inv].pool.is_empty() {
            return false;
        }
        let Some(s) = self.next_session() else {
            return false;
        };
        self.sessions[s].busy = true;
        let stock = self.world.colls[inv]
            .pool
            .take(&mut self.rng)
            .expect("pool is not empty");
        let pay = self.world.colls[payments].new_live(&mut self.rng, &mut self.oids, sec);
        self.em
            .begin_session(&self.sessions[s], "c", "admin.$cmd", None);
        self.em.w.doc("o");
        self.em.w.arr("applyOps");
        self.inner_insert(payments, pay);
        self.inner_update(inv, stock);
        self.em.w.end();
        self.em.w.bool("prepare", true);
        self.em.w.end();
        let ts = self.em.finish(Prev::Start);
        self.pending.push(Prepared {
            session: s,
            prepare_ts: ts,
            term: self.em.term,
            inserted: vec![(payments, pay)],
            locked: vec![(inv, stock)],
        });
        true
    }
}
