//! `movePrimary` of the `shop` database, as the 7.x coordinator logs it (server
//! `src/mongo/db/s/move_primary_coordinator.cpp`): a `movePrimary.start` changelog
//! entry on the config server; the recipient clones the unsharded collections (a
//! `create` with the collection's uuid, then its documents as plain inserts); the
//! config server commits the new primary (`config.databases`) and logs
//! `movePrimary.commit`; the old primary drops its stale copies
//! (`dropStaleDataOnDonor`: plain drops, not `fromMigrate`); `movePrimary.end`.
//!
//! Nothing changes for the application: the truth is untouched. A restore must take
//! each unsharded collection from the database's primary at the limit (the donor's
//! copy before the commit, the recipient's after), and `find-drop --cluster` must
//! not report the donor's drops (a decoy).

use bson::{doc, Bson, Document};
use pitr::oplog::Ts;

use super::sim::{uuid_bson, Cluster};
use super::truth::Decoy;

/// A changelog entry of the config server.
fn changelog(what: &str, at_ms: i64, from: &str, to: &str) -> Document {
    doc! { "op": "i", "ns": "config.changelog", "ui": uuid_bson(&[8; 16]),
    "o": { "_id": format!("cfg-movePrimary-{at_ms}"), "server": "config-a.example.net:27019",
           "clientAddr": "", "time": bson::DateTime::from_millis(at_ms), "what": what, "ns": "shop",
           "details": { "from": from, "to": to } } }
}

impl Cluster {
    /// Moves the `shop` database's primary to shard `to`, from `now_ms`.
    pub fn move_primary(&mut self, now_ms: i64, to: usize) {
        let from = self.primary;
        let (from_id, to_id) = (self.shards[from].id.clone(), self.shards[to].id.clone());
        let mut ct = self.router;
        ct = ct.max(self.config.log(
            now_ms + 100,
            ct,
            changelog("movePrimary.start", now_ms + 100, &from_id, &to_id),
        ));
        let unsharded = self.unsharded.clone();
        let mut at = now_ms + 200;
        for (ns, uuid) in &unsharded {
            let (db, coll) = ns.split_once('.').expect("db.coll");
            let docs: Vec<(String, Document)> = self.shards[from]
                .coll(ns)
                .docs
                .iter()
                .map(|(k, d)| (k.clone(), d.clone()))
                .collect();
            ct = ct.max(self.shards[to].log(
                at,
                ct,
                doc! { "op": "c", "ns": format!("{db}.$cmd"), "ui": uuid_bson(uuid),
                       "o": { "create": coll, "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } } },
            ));
            for (k, d) in &docs {
                at += 3;
                ct = ct.max(self.shards[to].log(
                    at,
                    ct,
                    doc! { "op": "i", "ns": ns.as_str(), "ui": uuid_bson(uuid), "o": d.clone() },
                ));
                self.shards[to].coll(ns).docs.insert(k.clone(), d.clone());
            }
            self.shards[to].coll(ns).uuid = *uuid;
        }
        let commit_ms = at + 100;
        ct = ct.max(self.config.log(
            commit_ms,
            ct,
            doc! { "op": "u", "ns": "config.databases", "ui": uuid_bson(&[4; 16]),
            "o": { "$v": 2, "diff": { "u": { "primary": &to_id } } }, "o2": { "_id": "shop" } },
        ));
        if let Some(d) = self
            .config
            .coll("config.databases")
            .docs
            .values_mut()
            .next()
        {
            d.insert("primary", &to_id);
        }
        ct = ct.max(self.config.log(
            commit_ms + 20,
            ct,
            changelog("movePrimary.commit", commit_ms + 20, &from_id, &to_id),
        ));
        let (mut first, mut last) = (None, Ts::ZERO);
        for (k, (ns, uuid)) in unsharded.iter().enumerate() {
            let (db, coll) = ns.split_once('.').expect("db.coll");
            let n = self.shards[from]
                .colls
                .remove(ns)
                .map_or(0, |c| c.docs.len());
            let ts = self.shards[from].log(
                commit_ms + 100 + k as i64,
                ct,
                doc! { "op": "c", "ns": format!("{db}.$cmd"), "ui": uuid_bson(uuid), "o": { "drop": coll },
                       "o2": { "numRecords": Bson::Int64(n as i64) } },
            );
            ct = ct.max(ts);
            first.get_or_insert(ts);
            last = ts;
        }
        ct = ct.max(self.config.log(
            commit_ms + 160,
            ct,
            changelog("movePrimary.end", commit_ms + 160, &from_id, &to_id),
        ));
        self.router = self.router.max(ct);
        self.primary = to;
        self.decoys.push(Decoy {
            what: "movePrimary's drops of the old primary's stale copies",
            member: from_id,
            ns: unsharded.iter().map(|(ns, _)| ns.as_str()).collect::<Vec<_>>().join(","),
            first_ts: first.unwrap_or(Ts::ZERO),
            last_ts: last,
            count: unsharded.len() as u64,
            why_silent: "the database's unsharded collections live on the new primary: routine (movePrimaryCleanup), never an incident",
        });
    }
}
