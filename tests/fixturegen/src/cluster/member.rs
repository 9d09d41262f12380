//! One member of the simulated cluster (the config server's replica set, or a shard's):
//! its own clock, its own oplog, and the documents it holds.
//!
//! The clock follows the cluster-wide logical clock of MongoDB (SIGMOD 2019,
//! "Implementation of Cluster-wide Logical Clock and Causal Consistency in MongoDB";
//! server `src/mongo/db/vector_clock.cpp`): a member's time only *ticks* when it writes
//! to its oplog, and every message it receives carries the sender's cluster time,
//! which the member adopts when it is ahead of its own. A write's `ts` is therefore
//! `(wall seconds, 1)` when the member's wall clock has moved past everything it has
//! seen, else one increment past the newest time it has seen (its own or a
//! gossiped one). Each member has its own wall clock skew, so `ts.t` can lead the
//! `wall` field of the same entry, as it does on real clusters.

use std::collections::BTreeMap;

use bson::{Bson, Document};
use pitr::oplog::Ts;

/// What a member is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Config,
    Shard,
}

/// One oplog entry as written, with the simulated time it was written at.
pub struct Logged {
    /// Simulated (true) time in milliseconds: decides which oplog dumps hold it.
    pub sim_ms: i64,
    pub ts: Ts,
    pub bytes: Vec<u8>,
}

/// One collection on one member.
#[derive(Clone, Default)]
pub struct Coll {
    pub uuid: [u8; 16],
    /// Documents by a sort key (`_id` rendered so that the order is stable).
    pub docs: BTreeMap<String, Document>,
}

/// A time window in simulated milliseconds, `[start, end)`.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
}

pub struct Member {
    /// `config` or the shard's id (= `config.shards._id`).
    pub id: String,
    pub role: Role,
    /// Added to the simulated time to get this member's wall clock.
    pub skew_ms: i64,
    /// The newest cluster time this member has written or heard.
    pub clock: Ts,
    /// Election term written in `t`.
    pub term: i64,
    pub entries: Vec<Logged>,
    /// Collections by namespace.
    pub colls: BTreeMap<String, Coll>,
    /// When its `mongodump --oplog` ran.
    pub backup: Window,
    /// When its oplog was dumped: entries written in this window.
    pub oplog: Window,
    /// The backup's collections, as the dump read them at `backup.start_ms`.
    pub snapshot: BTreeMap<String, Coll>,
    /// Last simulated second with a write (for the periodic no-op writer).
    pub last_write_sec: i64,
}

/// A document key that sorts like the `_id` values the generator uses.
pub fn doc_key(id: &Bson) -> String {
    match id {
        Bson::Int64(n) => format!("{n:020}"),
        Bson::Int32(n) => format!("{n:020}"),
        Bson::String(s) => s.clone(),
        Bson::ObjectId(o) => o.to_hex(),
        other => other.to_string(),
    }
}

impl Member {
    pub fn new(id: &str, role: Role, skew_ms: i64, term: i64) -> Member {
        Member {
            id: id.to_string(),
            role,
            skew_ms,
            clock: Ts::ZERO,
            term,
            entries: Vec::new(),
            colls: BTreeMap::new(),
            backup: Window {
                start_ms: 0,
                end_ms: 0,
            },
            oplog: Window {
                start_ms: 0,
                end_ms: 0,
            },
            snapshot: BTreeMap::new(),
            last_write_sec: i64::MIN,
        }
    }

    /// The member adopts a gossiped cluster time (no tick: nothing is written).
    pub fn hear(&mut self, t: Ts) {
        self.clock = self.clock.max(t);
    }

    /// Appends an entry written at simulated time `now_ms` by a request carrying the
    /// cluster time `heard`: fills in `ts`, `t`, `v` and `wall` after the fields of
    /// `d` (the 5.0-7.0 field order: `[lsid, txnNumber,] op, ns, [ui,] o, [o2,]
    /// [fromMigrate,] ts, t, v, wall`). Returns the entry's `ts`.
    pub fn log(&mut self, now_ms: i64, heard: Ts, mut d: Document) -> Ts {
        // A member's writes are ordered in time as in ts: the oplog dumps are cut
        // by simulated time and must never leave a hole.
        let now_ms = now_ms.max(self.entries.last().map_or(i64::MIN, |e| e.sim_ms));
        let wall = now_ms + self.skew_ms;
        let secs = (wall / 1000) as u32;
        let base = self.clock.max(heard);
        let ts = if secs > base.t {
            Ts::new(secs, 1)
        } else {
            Ts::new(base.t, base.i + 1)
        };
        self.clock = ts;
        d.insert(
            "ts",
            Bson::Timestamp(bson::Timestamp {
                time: ts.t,
                increment: ts.i,
            }),
        );
        d.insert("t", self.term);
        d.insert("v", 2i64);
        d.insert("wall", bson::DateTime::from_millis(wall));
        let bytes = bson::to_vec(&d).expect("generator documents encode");
        self.entries.push(Logged {
            sim_ms: now_ms,
            ts,
            bytes,
        });
        self.last_write_sec = now_ms / 1000;
        ts
    }

    pub fn coll(&mut self, ns: &str) -> &mut Coll {
        self.colls.entry(ns.to_string()).or_default()
    }

    /// The documents of `ns` on this member (0 when it holds none).
    pub fn count(&self, ns: &str) -> usize {
        self.colls.get(ns).map_or(0, |c| c.docs.len())
    }

    /// Entries written in `w`, in ts order (a member's own writes are ordered).
    pub fn entries_in(&self, w: Window) -> impl Iterator<Item = &Logged> {
        self.entries
            .iter()
            .filter(move |e| e.sim_ms >= w.start_ms && e.sim_ms < w.end_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn clock_ticks_on_writes_and_adopts_gossip() {
        let mut m = Member::new("shard0", Role::Shard, 0, 1);
        let a = m.log(1_000_000, Ts::ZERO, doc! { "op": "n" });
        assert_eq!(a, Ts::new(1000, 1));
        let b = m.log(1_000_100, Ts::ZERO, doc! { "op": "n" });
        assert_eq!(b, Ts::new(1000, 2));
        // A request from a member whose clock is ahead: the write follows it.
        let c = m.log(1_000_200, Ts::new(1003, 7), doc! { "op": "n" });
        assert_eq!(c, Ts::new(1003, 8));
        // Wall time has not caught up: still ticking on the gossiped second.
        let d = m.log(1_001_500, Ts::ZERO, doc! { "op": "n" });
        assert_eq!(d, Ts::new(1003, 9));
        let e = m.log(1_004_000, Ts::ZERO, doc! { "op": "n" });
        assert_eq!(e, Ts::new(1004, 1));
        // Hearing alone does not write.
        m.hear(Ts::new(2000, 1));
        assert_eq!(m.entries.len(), 5);
        assert_eq!(m.log(1_004_001, Ts::ZERO, doc! {}), Ts::new(2000, 2));
    }
}
