//! Expected document counts after the replay.
//!
//! Starts from the `_id`s of every backup collection and applies, in replay order,
//! what changes membership: inserts, deletes, `create`, `drop`, `dropDatabase`,
//! `renameCollection`, `emptycapped` (transactions at their commit: see
//! [`super::apply`]). Sets make this exact for a `mongodump --oplog` backup, whose
//! collection files may already hold some of the writes its own oplog replays
//! (re-inserting an `_id` or deleting a missing one changes nothing, as on the server).
//! Updates never change a count.
//!
//! Memory: one entry per document, about 70 bytes (the `_id` bytes plus hash-set
//! overhead); above `--expect-max-ids` (default [`DEFAULT_ID_CAP`]) the counts are
//! left out of the plan rather than risk the machine; `--no-expect` skips them.
//! Without `_id`s the model still tracks which namespaces exist (for the lint).
//!
//! `_id` equality follows the server: numbers compare by value (`1`, `1.0` and
//! `NumberLong(1)` are the same `_id`); other types compare by type and bytes.

use std::collections::{HashMap, HashSet};

use bson::RawBsonRef;
use serde::{Deserialize, Serialize};

use crate::oplog::{Entry, Op, Ts};

use super::apply::{Source, Visitor};

/// Default cap on `_id`s kept in memory (about 1.4 GB at 70 bytes each).
pub const DEFAULT_ID_CAP: u64 = 20_000_000;

/// The comparable bytes of one `_id`.
pub type IdKey = Box<[u8]>;

/// The key of an `_id` value; see the module documentation for equality.
pub fn id_key(v: RawBsonRef<'_>) -> IdKey {
    let mut k: Vec<u8> = Vec::with_capacity(17);
    let num = |k: &mut Vec<u8>, n: i64| {
        k.push(b'n');
        k.extend_from_slice(&n.to_le_bytes());
    };
    match v {
        RawBsonRef::Int32(n) => num(&mut k, n as i64),
        RawBsonRef::Int64(n) => num(&mut k, n),
        RawBsonRef::Double(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => num(&mut k, f as i64),
        RawBsonRef::Double(f) => {
            k.push(b'f');
            k.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        other => {
            k.push(other.element_type() as u8);
            match other {
                RawBsonRef::String(s) | RawBsonRef::Symbol(s) | RawBsonRef::JavaScriptCode(s) => {
                    k.extend_from_slice(s.as_bytes())
                }
                RawBsonRef::ObjectId(o) => k.extend_from_slice(&o.bytes()),
                RawBsonRef::Document(d) => k.extend_from_slice(d.as_bytes()),
                RawBsonRef::Array(a) => k.extend_from_slice(a.as_bytes()),
                RawBsonRef::Binary(b) => {
                    k.push(u8::from(b.subtype));
                    k.extend_from_slice(b.bytes);
                }
                RawBsonRef::DateTime(d) => k.extend_from_slice(&d.timestamp_millis().to_le_bytes()),
                RawBsonRef::Boolean(b) => k.push(b as u8),
                RawBsonRef::Timestamp(t) => {
                    k.extend_from_slice(&t.time.to_le_bytes());
                    k.extend_from_slice(&t.increment.to_le_bytes());
                }
                RawBsonRef::Decimal128(d) => k.extend_from_slice(&d.bytes()),
                RawBsonRef::Null
                | RawBsonRef::Undefined
                | RawBsonRef::MinKey
                | RawBsonRef::MaxKey => {}
                rare => k.extend_from_slice(format!("{rare:?}").as_bytes()),
            }
        }
    }
    k.into_boxed_slice()
}

/// True for namespaces whose count the plan promises: user databases (not
/// `admin`, `config`, `local`), and not `system.*` collections other than
/// time-series buckets.
pub fn is_checked_ns(ns: &str) -> bool {
    let (db, coll) = ns.split_once('.').unwrap_or((ns, ""));
    if matches!(db, "admin" | "config" | "local") || db.is_empty() || coll.is_empty() {
        return false;
    }
    if crate::forensics::namespaces::is_internal(ns) {
        return false;
    }
    !coll.starts_with("system.") || coll.starts_with("system.buckets.")
}

/// One namespace's expectation after the replay. JSON: `ns`, `exists`, `documents`,
/// `backup_documents` (count in the backup's data files, null when the backup does
/// not hold it), `num_records` (the count the entry at the limit recorded when it
/// is a drop or a rename over this namespace: an independent cross-check).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedNs {
    pub ns: String,
    pub exists: bool,
    pub documents: u64,
    pub backup_documents: Option<u64>,
    pub num_records: Option<i64>,
}

#[derive(Default, Debug)]
struct NsState {
    exists: bool,
    ids: HashSet<IdKey>,
    no_id: u64,
    backup_documents: Option<u64>,
}

/// The replay model; see the module documentation.
pub struct Model {
    ns: HashMap<String, NsState>,
    counting: bool,
}

/// One restored backup namespace: its name, documents, documents without `_id`,
/// and the `_id`s when counting.
pub struct Seed {
    pub ns: String,
    pub documents: u64,
    pub no_id: u64,
    pub ids: Option<HashSet<IdKey>>,
}

impl Model {
    /// `counting`: track `_id`s (each seed then carries its set); otherwise only
    /// which namespaces exist.
    pub fn new(seeds: Vec<Seed>, counting: bool) -> Model {
        let mut ns = HashMap::new();
        for s in seeds {
            ns.insert(
                s.ns,
                NsState {
                    exists: true,
                    ids: s.ids.unwrap_or_default(),
                    no_id: s.no_id,
                    backup_documents: Some(s.documents),
                },
            );
        }
        Model { ns, counting }
    }

    pub fn exists(&self, ns: &str) -> bool {
        self.ns.get(ns).is_some_and(|s| s.exists)
    }

    /// Whether the document with this `_id` is in `ns` now; `None` when not counting
    /// (then nothing is known about single documents).
    pub fn holds(&self, ns: &str, id: RawBsonRef<'_>) -> Option<bool> {
        if !self.counting {
            return None;
        }
        Some(
            self.ns
                .get(ns)
                .is_some_and(|s| s.exists && s.ids.contains(&id_key(id))),
        )
    }

    /// Current count of `ns` (0 when it does not exist).
    pub fn count(&self, ns: &str) -> u64 {
        self.ns.get(ns).map_or(0, |s| {
            if s.exists {
                s.ids.len() as u64 + s.no_id
            } else {
                0
            }
        })
    }

    fn state(&mut self, ns: &str) -> &mut NsState {
        if !self.ns.contains_key(ns) {
            self.ns.insert(ns.to_string(), NsState::default());
        }
        self.ns.get_mut(ns).expect("inserted above")
    }

    fn clear(&mut self, ns: &str) {
        if let Some(s) = self.ns.get_mut(ns) {
            s.exists = false;
            s.ids = HashSet::new();
            s.no_id = 0;
        }
    }

    /// The expectations for checked namespaces the backup held or the replay
    /// touched, sorted by namespace (None when not counting).
    pub fn finish(self) -> Option<Vec<ExpectedNs>> {
        if !self.counting {
            return None;
        }
        let mut out: Vec<ExpectedNs> = self
            .ns
            .into_iter()
            .filter(|(ns, _)| is_checked_ns(ns))
            .map(|(ns, s)| ExpectedNs {
                exists: s.exists,
                documents: if s.exists {
                    s.ids.len() as u64 + s.no_id
                } else {
                    0
                },
                backup_documents: s.backup_documents,
                num_records: None,
                ns,
            })
            .collect();
        out.sort_by(|a, b| a.ns.cmp(&b.ns));
        Some(out)
    }

    fn command(&mut self, op: &Entry<'_>) {
        let (Some(name), Some(o)) = (op.command_name(), op.o) else {
            return;
        };
        let db = op.db();
        let coll_ns = || o.get_str(name).ok().map(|c| format!("{db}.{c}"));
        match name {
            "create" => {
                if let Some(ns) = coll_ns() {
                    self.state(&ns).exists = true;
                }
            }
            "drop" => {
                if let Some(ns) = coll_ns() {
                    self.clear(&ns);
                }
            }
            "emptycapped" => {
                if let Some(ns) = coll_ns() {
                    let s = self.state(&ns);
                    s.ids = HashSet::new();
                    s.no_id = 0;
                }
            }
            "dropDatabase" => {
                let prefix = format!("{db}.");
                let doomed: Vec<String> = self
                    .ns
                    .keys()
                    .filter(|k| k.starts_with(&prefix))
                    .cloned()
                    .collect();
                for ns in doomed {
                    self.clear(&ns);
                }
            }
            "renameCollection" => {
                let (Ok(from), Ok(to)) = (o.get_str("renameCollection"), o.get_str("to")) else {
                    return;
                };
                if from == to {
                    return;
                }
                let moved = match self.ns.get_mut(from) {
                    Some(s) if s.exists => {
                        let m = NsState {
                            exists: true,
                            ids: std::mem::take(&mut s.ids),
                            no_id: s.no_id,
                            backup_documents: None,
                        };
                        s.exists = false;
                        s.no_id = 0;
                        m
                    }
                    _ => NsState {
                        exists: true,
                        ..NsState::default()
                    },
                };
                let target = self.state(to);
                target.exists = true;
                target.ids = moved.ids;
                target.no_id = moved.no_id;
            }
            _ => {}
        }
    }
}

fn doc_id<'a>(op: &Entry<'a>) -> Option<RawBsonRef<'a>> {
    op.o?.get("_id").ok().flatten()
}

impl Visitor for Model {
    fn applied(&mut self, op: &Entry<'_>, _at: Ts, _src: Source, _in_txn: bool) {
        match op.op {
            Op::Insert => {
                let counting = self.counting;
                let id = doc_id(op);
                let s = self.state(op.ns);
                s.exists = true;
                if counting {
                    match id {
                        Some(v) => {
                            s.ids.insert(id_key(v));
                        }
                        None => s.no_id += 1,
                    }
                }
            }
            Op::Delete if self.counting => {
                if let (Some(v), Some(s)) = (doc_id(op), self.ns.get_mut(op.ns)) {
                    s.ids.remove(&id_key(v));
                }
            }
            Op::Command => self.command(op),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::apply::Applier;
    use bson::{doc, Bson, Document, Timestamp};

    fn key(d: Document) -> IdKey {
        let raw = bson::RawDocumentBuf::from_document(&d).unwrap();
        id_key(raw.get("_id").unwrap().unwrap())
    }

    #[test]
    fn numeric_ids_compare_by_value() {
        assert_eq!(key(doc! {"_id": 1}), key(doc! {"_id": 1i64}));
        assert_eq!(key(doc! {"_id": 1i64}), key(doc! {"_id": 1.0}));
        assert_ne!(key(doc! {"_id": 1.5}), key(doc! {"_id": 1}));
        assert_ne!(key(doc! {"_id": "1"}), key(doc! {"_id": 1}));
        assert_ne!(key(doc! {"_id": {"a": 1}}), key(doc! {"_id": {"a": 2}}));
        assert_eq!(
            key(doc! {"_id": bson::oid::ObjectId::from_bytes([7; 12])}),
            key(doc! {"_id": bson::oid::ObjectId::from_bytes([7; 12])})
        );
    }

    #[test]
    fn checked_namespaces() {
        for ns in ["shop.orders", "shop.system.buckets.weather", "a.b.c"] {
            assert!(is_checked_ns(ns), "{ns}");
        }
        for ns in [
            "admin.system.version",
            "config.settings",
            "local.oplog.rs",
            "shop.system.views",
            "shop.system.drop.1i1t1.x",
            "shop",
        ] {
            assert!(!is_checked_ns(ns), "{ns}");
        }
    }

    fn ts(t: u32, i: u32) -> Bson {
        Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    fn seed(ns: &str, ids: &[i32]) -> Seed {
        Seed {
            ns: ns.into(),
            documents: ids.len() as u64,
            no_id: 0,
            ids: Some(ids.iter().map(|i| key(doc! {"_id": *i})).collect()),
        }
    }

    fn replay(model: &mut Model, docs: &[Document]) {
        let mut a = Applier::default();
        for d in docs {
            let raw = bson::RawDocumentBuf::from_document(d).unwrap();
            a.feed(&Entry::parse(&raw).unwrap(), Source::Slice, model)
                .unwrap();
        }
    }

    #[test]
    fn replays_membership_changes() {
        let mut m = Model::new(
            vec![
                seed("shop.orders", &[1, 2, 3]),
                seed("shop.users", &[1]),
                seed("logs.a", &[1, 2]),
            ],
            true,
        );
        replay(
            &mut m,
            &[
                doc! { "ts": ts(1, 1), "op": "i", "ns": "shop.orders", "o": { "_id": 3.0, "dup": true } },
                doc! { "ts": ts(1, 2), "op": "i", "ns": "shop.orders", "o": { "_id": 4 } },
                doc! { "ts": ts(1, 3), "op": "d", "ns": "shop.orders", "o": { "_id": 1i64 } },
                doc! { "ts": ts(1, 4), "op": "d", "ns": "shop.orders", "o": { "_id": 99 } },
                doc! { "ts": ts(1, 5), "op": "u", "ns": "shop.orders", "o": { "$set": { "x": 1 } }, "o2": { "_id": 2 } },
                doc! { "ts": ts(2, 1), "op": "c", "ns": "shop.$cmd", "o": { "create": "fresh" } },
                doc! { "ts": ts(2, 2), "op": "c", "ns": "shop.$cmd", "o": { "renameCollection": "shop.users", "to": "shop.people", "dropTarget": false } },
                doc! { "ts": ts(2, 3), "op": "c", "ns": "logs.$cmd", "o": { "drop": "a" }, "o2": { "numRecords": 2 } },
                doc! { "ts": ts(2, 4), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [ { "op": "i", "ns": "shop.fresh", "o": { "_id": "x" } } ] } },
            ],
        );
        assert_eq!(m.count("shop.orders"), 3);
        let exp = m.finish().unwrap();
        let got: Vec<(&str, bool, u64, Option<u64>)> = exp
            .iter()
            .map(|e| (e.ns.as_str(), e.exists, e.documents, e.backup_documents))
            .collect();
        assert_eq!(
            got,
            vec![
                ("logs.a", false, 0, Some(2)),
                ("shop.fresh", true, 1, None),
                ("shop.orders", true, 3, Some(3)),
                ("shop.people", true, 1, None),
                ("shop.users", false, 0, Some(1)),
            ]
        );
    }

    #[test]
    fn drop_database_and_existence_only_mode() {
        let mut m = Model::new(
            vec![seed("a.x", &[1]), seed("a.y", &[1]), seed("b.z", &[1])],
            false,
        );
        replay(
            &mut m,
            &[doc! { "ts": ts(1, 1), "op": "c", "ns": "a.$cmd", "o": { "dropDatabase": 1 } }],
        );
        assert!(!m.exists("a.x") && !m.exists("a.y") && m.exists("b.z"));
        assert!(m.finish().is_none());
    }
}
