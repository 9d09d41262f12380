//! The simulated cluster: members, the router's cluster time, the routing table, and
//! the operations a `mongos` routes (CRUD, a fan-out `deleteMany`), plus the balancer's
//! chunk migrations.
//!
//! Every routed request carries the router's cluster time to the member, and the
//! reply carries the member's back (`log` returns it), so the router's time is the
//! maximum of everything it has seen: causality through the router is ordered in
//! `ts` across members, as rule R1 of shared/reference/sharded-pitr.md relies on.

use bson::{doc, Bson, Document};
use pitr::oplog::Ts;
use rand::Rng;

use super::member::{doc_key, Member, Role};
use super::truth::{Decoy, Logical, LogicalOp, MemberEntry};
use crate::rng::MainRng;

/// A shard-key bound: `MinKey`, a value, or `MaxKey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bound {
    Min,
    At(i64),
    Max,
}

impl Bound {
    pub fn bson(self) -> Bson {
        match self {
            Bound::Min => Bson::MinKey,
            Bound::At(v) => Bson::Int64(v),
            Bound::Max => Bson::MaxKey,
        }
    }
}

/// One chunk of a range-sharded collection (`config.chunks`).
#[derive(Clone, Debug)]
pub struct Chunk {
    pub id: bson::oid::ObjectId,
    pub min: Bound,
    pub max: Bound,
    /// Index into [`Cluster::shards`].
    pub shard: usize,
}

/// A sharded collection: its key field and chunks (sharding on one field, by range
/// of its value or, when `hashed`, of the server's hash of it).
#[derive(Clone, Debug)]
pub struct Sharded {
    pub ns: String,
    pub key: &'static str,
    /// `{key: "hashed"}`: chunk bounds are hashes (`BSONElementHasher::hash64`, seed
    /// 0, server `src/mongo/db/hasher.cpp`; pitr's own, checked there against the
    /// server's values, is `pitr::cluster::hasher`).
    pub hashed: bool,
    pub uuid: [u8; 16],
    pub epoch: bson::oid::ObjectId,
    pub chunks: Vec<Chunk>,
}

impl Sharded {
    /// The shard owning shard-key value `v` now.
    pub fn owner(&self, v: i64) -> usize {
        self.owner_of(&Bson::Int64(v))
    }

    /// The shard owning the document whose shard-key field is `v` now.
    pub fn owner_of(&self, v: &Bson) -> usize {
        let b = Bound::At(self.point(v));
        self.chunks
            .iter()
            .find(|c| c.min <= b && b < c.max)
            .map(|c| c.shard)
            .expect("chunks cover the key space")
    }

    /// Where `v` falls among the chunk bounds: the value, or its hash.
    pub fn point(&self, v: &Bson) -> i64 {
        if self.hashed {
            let d = bson::RawDocumentBuf::from_document(&doc! { "v": v.clone() })
                .expect("a one-field document");
            let raw = d.get("v").expect("built above").expect("present");
            pitr::cluster::hasher::hash64(raw, pitr::cluster::hasher::DEFAULT_SEED)
        } else {
            v.as_i64().expect("range keys here are int64")
        }
    }
}

pub struct Cluster {
    pub rng: MainRng,
    pub config: Member,
    pub shards: Vec<Member>,
    /// Shards that own chunks (the rest are idle).
    pub data_shards: usize,
    /// The router's cluster time.
    pub router: Ts,
    pub sharded: Vec<Sharded>,
    /// Unsharded collections: ns -> uuid (they live on the database's primary shard).
    pub unsharded: Vec<(String, [u8; 16])>,
    /// The primary shard of the `shop` database.
    pub primary: usize,
    pub decoys: Vec<Decoy>,
    pub next_order: i64,
    pub next_event: Vec<i64>,
    /// The logical content's writes (the truth of a restore at any limit).
    pub logical: Logical,
    /// Cross-shard transactions, for `truth.json` ([`super::txn`]).
    pub txns: Vec<super::txn::TxnTruth>,
}

pub fn uuid_bson(u: &[u8; 16]) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: u.to_vec(),
    })
}

impl Cluster {
    pub fn member(&mut self, m: usize) -> &mut Member {
        if m == usize::MAX {
            &mut self.config
        } else {
            &mut self.shards[m]
        }
    }

    /// A request from the router to member `m` that writes `d`; the router learns the
    /// member's time from the reply.
    pub fn routed(&mut self, now_ms: i64, m: usize, d: Document) -> Ts {
        let heard = self.router;
        let ts = self.member(m).log(now_ms, heard, d);
        self.router = self.router.max(ts);
        ts
    }

    pub fn sharded(&self, ns: &str) -> usize {
        self.sharded
            .iter()
            .position(|s| s.ns == ns)
            .unwrap_or_else(|| panic!("generator bug: {ns} is not sharded"))
    }

    /// Inserts `o` into `ns` on the shard owning its key (a routed insert).
    pub fn insert(&mut self, now_ms: i64, ns: &str, o: Document) -> Ts {
        let s = &self.sharded[self.sharded(ns)];
        let (uuid, key) = (s.uuid, s.key);
        let shard = s.owner_of(o.get(key).expect("shard key present"));
        let k = doc_key(o.get("_id").expect("_id present"));
        let ts = self.routed(
            now_ms,
            shard,
            doc! { "op": "i", "ns": ns, "ui": uuid_bson(&uuid), "o": o.clone(), "o2": document_key(&o, key) },
        );
        self.logical.ops.push((
            ts,
            LogicalOp::Put {
                ns: ns.to_string(),
                key: k.clone(),
                doc: o.clone(),
            },
        ));
        self.shards[shard].coll(ns).docs.insert(k, o);
        ts
    }

    /// A routed update of one document by its key: `$v: 2` diff setting `field`.
    pub fn update(&mut self, now_ms: i64, ns: &str, shard: usize, id: &str, field: &str, v: Bson) {
        let s = &self.sharded[self.sharded(ns)];
        let (uuid, key) = (s.uuid, s.key);
        let Some(d) = self.shards[shard].coll(ns).docs.get_mut(id) else {
            return;
        };
        d.insert(field, v.clone());
        let post = d.clone();
        let o2 = document_key(d, key);
        let ts = self.routed(
            now_ms,
            shard,
            doc! { "op": "u", "ns": ns, "ui": uuid_bson(&uuid), "o": { "$v": 2, "diff": { "u": { field: v } } }, "o2": o2 },
        );
        self.logical.ops.push((
            ts,
            LogicalOp::Put {
                ns: ns.to_string(),
                key: id.to_string(),
                doc: post,
            },
        ));
    }

    /// The periodic no-op writer (SERVER-23892): a member that wrote nothing for
    /// `every` seconds writes a no-op. Its clock ticks; nobody routes it.
    pub fn noops(&mut self, sec: i64, every: i64) {
        for m in std::iter::once(usize::MAX).chain(0..self.shards.len()) {
            let every = if m == usize::MAX { 1 } else { every };
            let mem = self.member(m);
            if sec.saturating_sub(mem.last_write_sec) >= every {
                mem.log(
                    sec * 1000 + 500,
                    Ts::ZERO,
                    doc! { "op": "n", "ns": "", "o": { "msg": "periodic noop" } },
                );
            }
        }
    }

    /// `deleteMany(filter)` through mongos: sent to every shard that owns a chunk of
    /// `ns`; each deletes its matching documents one entry at a time (the oplog `o` of
    /// a delete on a sharded collection is the document key). Returns each shard's
    /// first and last delete.
    pub fn fan_out_delete(
        &mut self,
        now_ms: i64,
        ns: &str,
        matches: impl Fn(&Document) -> bool,
    ) -> Vec<MemberEntry> {
        let s = self.sharded[self.sharded(ns)].clone();
        let mut owners: Vec<usize> = s.chunks.iter().map(|c| c.shard).collect();
        owners.sort_unstable();
        owners.dedup();
        let heard = self.router;
        let mut out = Vec::new();
        for shard in owners {
            let ids: Vec<String> = self.shards[shard]
                .coll(ns)
                .docs
                .iter()
                .filter(|(_, d)| matches(d))
                .map(|(k, _)| k.clone())
                .collect();
            if ids.is_empty() {
                continue;
            }
            // The shards work in parallel, each at its own pace.
            let step = self.rng.random_range(4..12);
            let mut first = None;
            let mut last = Ts::ZERO;
            let n = ids.len();
            for (k, id) in ids.into_iter().enumerate() {
                let d = self.shards[shard]
                    .coll(ns)
                    .docs
                    .remove(&id)
                    .expect("listed");
                let at = now_ms + 3 + k as i64 * step;
                let ts = self.shards[shard].log(
                    at,
                    heard,
                    doc! { "op": "d", "ns": ns, "ui": uuid_bson(&s.uuid), "o": document_key(&d, s.key) },
                );
                first.get_or_insert(ts);
                last = ts;
                self.logical.ops.push((
                    ts,
                    LogicalOp::Delete {
                        ns: ns.to_string(),
                        key: id,
                    },
                ));
            }
            self.router = self.router.max(last);
            out.push(MemberEntry::new(
                &self.shards[shard].id,
                first.expect("at least one"),
                last,
                format!("{n} deletes"),
            ));
            out.last_mut().expect("pushed").count = Some(n as u64);
        }
        out
    }

    /// The balancer moves the chunk of `ns` starting at `min` to shard `to`
    /// (README_migrations.md in the server's `src/mongo/db/s/`): the recipient
    /// clones the documents (inserts with `fromMigrate: true`), the config server
    /// commits the new owner in `config.chunks` (an `applyOps`, then a changelog
    /// entry), and the donor's range deleter removes the now orphaned documents
    /// later, with `fromMigrate: true` (deferred; 15 minutes by default, shortened
    /// here). Returns when the range deletion should run and what it needs.
    pub fn migrate(
        &mut self,
        now_ms: i64,
        ns: &str,
        min: Bound,
        to: usize,
    ) -> PendingRangeDeletion {
        let si = self.sharded(ns);
        let ci = self.sharded[si]
            .chunks
            .iter()
            .position(|c| c.min == min)
            .expect("chunk exists");
        let chunk = self.sharded[si].chunks[ci].clone();
        let (uuid, key) = (self.sharded[si].uuid, self.sharded[si].key);
        let from = chunk.shard;
        let moving: Vec<(String, Document)> = self.shards[from]
            .coll(ns)
            .docs
            .iter()
            .filter(|(_, d)| {
                let b = Bound::At(d.get_i64(key).unwrap_or(0));
                chunk.min <= b && b < chunk.max
            })
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect();
        // The donor records the range deletion task before the clone starts.
        let donor_id = self.shards[from].id.clone();
        let mut ct = self.router;
        ct = ct.max(self.shards[from].log(
            now_ms,
            ct,
            doc! { "op": "i", "ns": "config.rangeDeletions", "ui": uuid_bson(&[9; 16]),
                   "o": { "_id": uuid_bson(&uuid), "nss": ns, "collectionUuid": uuid_bson(&uuid), "donorShardId": &donor_id,
                          "range": { "min": { key: chunk.min.bson() }, "max": { key: chunk.max.bson() } }, "pending": true, "whenToClean": "delayed" } },
        ));
        let first_clone = self.shards[to].clock.max(ct);
        let mut clone_first = None;
        let mut clone_last = Ts::ZERO;
        for (k, (id, d)) in moving.iter().enumerate() {
            let at = now_ms + 20 + k as i64 * 6;
            let ts = self.shards[to].log(
                at,
                first_clone,
                doc! { "op": "i", "ns": ns, "ui": uuid_bson(&uuid), "o": d.clone(), "o2": document_key(d, key), "fromMigrate": true },
            );
            clone_first.get_or_insert(ts);
            clone_last = ts;
            self.shards[to].coll(ns).docs.insert(id.clone(), d.clone());
        }
        ct = ct.max(clone_last);
        let commit_ms = now_ms + 40 + moving.len() as i64 * 6;
        // The commit on the config server: the chunk's new owner, then the changelog.
        let to_id = self.shards[to].id.clone();
        ct = ct.max(self.config.log(
            commit_ms,
            ct,
            doc! { "op": "c", "ns": "config.$cmd", "o": { "applyOps": [
                { "op": "u", "ns": "config.chunks", "ui": uuid_bson(&[7; 16]),
                  "o": { "$v": 2, "diff": { "u": { "shard": &to_id } } }, "o2": { "_id": chunk.id } } ] } },
        ));
        ct = ct.max(self.config.log(
            commit_ms + 2,
            ct,
            doc! { "op": "i", "ns": "config.changelog", "ui": uuid_bson(&[8; 16]),
                   "o": { "_id": format!("cfg-{commit_ms}"), "what": "moveChunk.commit", "ns": ns,
                          "details": { "min": { key: chunk.min.bson() }, "max": { key: chunk.max.bson() }, "from": &donor_id, "to": &to_id } } },
        ));
        self.sharded[si].chunks[ci].shard = to;
        self.router = self.router.max(ct);
        self.decoys.push(Decoy {
            what: "chunk migration clone (inserts with fromMigrate)",
            member: to_id,
            ns: ns.to_string(),
            first_ts: clone_first.unwrap_or(Ts::ZERO),
            last_ts: clone_last,
            count: moving.len() as u64,
            why_silent: "migration traffic: the recipient's copies, replayed like any write, never a finding (R5)",
        });
        PendingRangeDeletion {
            ns: ns.to_string(),
            uuid,
            key,
            donor: from,
            ids: moving.into_iter().map(|(k, _)| k).collect(),
        }
    }

    /// The donor's range deleter removes a migrated chunk's orphans.
    pub fn range_delete(&mut self, now_ms: i64, p: PendingRangeDeletion) {
        let donor = p.donor;
        let mut first = None;
        let mut last = Ts::ZERO;
        let n = p.ids.len();
        for (k, id) in p.ids.iter().enumerate() {
            let Some(d) = self.shards[donor].coll(&p.ns).docs.remove(id) else {
                continue;
            };
            let ts = self.shards[donor].log(
                now_ms + k as i64 * 5,
                Ts::ZERO,
                doc! { "op": "d", "ns": &p.ns, "ui": uuid_bson(&p.uuid), "o": document_key(&d, p.key), "fromMigrate": true },
            );
            first.get_or_insert(ts);
            last = ts;
        }
        self.shards[donor].log(
            now_ms + n as i64 * 5 + 5,
            Ts::ZERO,
            doc! { "op": "d", "ns": "config.rangeDeletions", "ui": uuid_bson(&[9; 16]), "o": { "_id": uuid_bson(&p.uuid) } },
        );
        self.decoys.push(Decoy {
            what: "range deletion after a chunk migration (deletes with fromMigrate)",
            member: self.shards[donor].id.clone(),
            ns: p.ns,
            first_ts: first.unwrap_or(Ts::ZERO),
            last_ts: last,
            count: n as u64,
            why_silent: "the donor's orphans removed by the range deleter: replayed like any write, never a finding (R5)",
        });
    }

    /// Roles of every member, config first.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        std::iter::once(&self.config).chain(self.shards.iter())
    }

    pub fn is_config(&self, m: &Member) -> bool {
        m.role == Role::Config
    }
}

/// What the range deleter will remove.
pub struct PendingRangeDeletion {
    pub ns: String,
    pub uuid: [u8; 16],
    pub key: &'static str,
    pub donor: usize,
    pub ids: Vec<String>,
}

/// The document key of `d`: the shard key field, then `_id` (what deletes and
/// updates of a sharded collection log in `o` / `o2`).
pub fn document_key(d: &Document, key: &str) -> Document {
    let mut k = Document::new();
    if key != "_id" {
        if let Some(v) = d.get(key) {
            k.insert(key, v.clone());
        }
    }
    k.insert("_id", d.get("_id").cloned().unwrap_or(Bson::Null));
    k
}
