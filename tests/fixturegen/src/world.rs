//! The simulated replica set's catalogue: every collection with its UUID, indexes,
//! live ids and exact document count, plus the rate limits that keep normal traffic
//! from ever looking like an incident.

use std::collections::BTreeMap;

use rand::Rng;

use super::ids::{Id, IdPool, Live, OidGen};
use super::shapes::Shape;

/// How a collection's new documents get their `_id`.
#[derive(Clone, Copy, Debug)]
pub enum IdKind {
    Oid,
    /// Consecutive integers (written as int32).
    Int,
    /// `prefix` + zero-padded counter.
    Str(&'static str),
}

/// A secondary index (mongodump metadata, `createIndexes`, `dropIndexes` specs).
#[derive(Clone, Debug)]
pub struct IndexSpec {
    pub name: &'static str,
    pub key: &'static [(&'static str, i32)],
    pub unique: bool,
    pub ttl: Option<i32>,
}

/// Normal traffic never deletes more than this many documents of one collection in
/// one aligned 10-second bucket, so no 10-second window ever holds 2x this (< 100).
pub const MAX_BG_DELETES_PER_10S: u32 = 40;
/// Normal updates that remove a field (`$unset`, diff `d`): at most this many per
/// collection and aligned 10-second bucket.
pub const MAX_BG_UNSETS_PER_10S: u32 = 3;

/// Counts events per aligned 10-second bucket.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limiter {
    bucket: u32,
    n: u32,
}

impl Limiter {
    /// Whether `k` more events fit at second `sec` under `max`; records them if so.
    pub fn try_take(&mut self, sec: u32, k: u32, max: u32) -> bool {
        if self.bucket != sec / 10 {
            self.bucket = sec / 10;
            self.n = 0;
        }
        if self.n + k > max {
            return false;
        }
        self.n += k;
        true
    }
}

/// One collection.
pub struct Coll {
    pub db: String,
    pub name: String,
    pub ns: String,
    pub uuid: [u8; 16],
    pub shape: Shape,
    pub id_kind: IdKind,
    pub next_n: u32,
    pub pool: IdPool,
    /// Exact number of documents.
    pub count: u64,
    pub exists: bool,
    pub capped: bool,
    pub indexes: Vec<IndexSpec>,
    /// Normal traffic writes here.
    pub bg: bool,
    /// Normal traffic neither deletes nor strips fields here from `quiet.0` to
    /// `quiet.1` (seconds): keeps planted bursts exactly as planted.
    pub quiet: (u32, u32),
    pub deletes: Limiter,
    pub unsets: Limiter,
    /// Position in `World::colls`: the content stream of documents inserted here.
    pub index: u16,
}

impl Coll {
    /// True for user data (not `admin`, `config`, `local`).
    pub fn is_user(&self) -> bool {
        !matches!(self.db.as_str(), "admin" | "config" | "local")
    }

    pub fn is_quiet(&self, sec: u32) -> bool {
        sec >= self.quiet.0 && sec <= self.quiet.1
    }

    /// Makes a new id for a document inserted at second `sec`.
    pub fn new_live<R: Rng + ?Sized>(&mut self, rng: &mut R, oids: &mut OidGen, sec: u32) -> Live {
        let id = match self.id_kind {
            IdKind::Oid => Id::Oid(oids.next(rng, sec)),
            IdKind::Int => {
                self.next_n += 1;
                Id::Int(self.next_n as i32)
            }
            IdKind::Str(prefix) => {
                self.next_n += 1;
                Id::Str {
                    prefix,
                    n: self.next_n,
                }
            }
        };
        Live {
            id,
            born: sec,
            src: self.index,
        }
    }

    /// Records an insert.
    pub fn inserted<R: Rng + ?Sized>(&mut self, rng: &mut R, l: Live) {
        self.pool.add(rng, l);
        self.count += 1;
    }

    /// Records the delete of a document previously taken out of the pool.
    pub fn deleted(&mut self) {
        self.count = self.count.saturating_sub(1);
    }
}

/// The whole catalogue.
#[derive(Default)]
pub struct World {
    pub colls: Vec<Coll>,
}

/// What a new collection looks like.
pub struct CollSpec {
    pub db: &'static str,
    pub name: String,
    pub shape: Shape,
    pub id_kind: IdKind,
    pub first_n: u32,
    pub indexes: Vec<IndexSpec>,
    pub bg: bool,
}

impl World {
    /// Adds a collection (not yet marked existing) and returns its index.
    pub fn add(&mut self, spec: CollSpec, uuid: [u8; 16], pool_cap: usize) -> usize {
        let index = self.colls.len();
        self.colls.push(Coll {
            ns: format!("{}.{}", spec.db, spec.name),
            db: spec.db.to_string(),
            name: spec.name,
            uuid,
            shape: spec.shape,
            id_kind: spec.id_kind,
            next_n: spec.first_n,
            pool: IdPool::new(pool_cap),
            count: 0,
            exists: false,
            capped: false,
            indexes: spec.indexes,
            bg: spec.bg,
            quiet: (1, 0),
            deletes: Limiter::default(),
            unsets: Limiter::default(),
            index: index as u16,
        });
        index
    }

    /// The existing collection named `ns`.
    pub fn find(&self, ns: &str) -> Option<usize> {
        self.colls.iter().position(|c| c.exists && c.ns == ns)
    }

    /// The existing collection named `ns`; a missing one is a bug in the scenario.
    pub fn get(&self, ns: &str) -> usize {
        self.find(ns)
            .unwrap_or_else(|| panic!("scenario bug: collection {ns} does not exist"))
    }

    /// Document counts of every existing user collection, by namespace.
    pub fn user_counts(&self) -> BTreeMap<String, u64> {
        self.colls
            .iter()
            .filter(|c| c.exists && c.is_user())
            .map(|c| (c.ns.clone(), c.count))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_resets_per_bucket() {
        let mut l = Limiter::default();
        assert!(l.try_take(100, 40, 40));
        assert!(!l.try_take(109, 1, 40));
        assert!(l.try_take(110, 1, 40));
    }
}
