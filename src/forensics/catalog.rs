//! What is known about the collections an oplog touches, to tell routine deletes
//! (TTL expiry, capped roll-over) from incidents: TTL indexes and `expireAfterSeconds`,
//! capped and time-series collections, and views.
//!
//! Two sources, in this order: the backup's metadata (`find-drop --backup`, and
//! `pitr plan`, which always has the backup), then the oplog's own DDL entries as the
//! scan meets them (`create`, `createIndexes`, `commitIndexBuild`, `collMod`,
//! `dropIndexes`, `drop`, `dropDatabase`, `renameCollection`). Without a backup, a
//! collection created before the oplog starts is unknown, and the scanner says which
//! of its findings it therefore could not classify.
//!
//! Keys are data namespaces: `db.system.buckets.X` for a time-series collection `db.X`
//! (its deletes are on the buckets collection).

use super::FastMap;

use bson::{RawBsonRef, RawDocument};

use crate::backup::{Backup, NsKind};
use crate::oplog::entry::as_i64;
use crate::oplog::{Entry, Ts};

use super::namespaces::timeseries_view;

/// How a TTL came to be what it is, when the oplog shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TtlChange {
    pub ts: Ts,
    /// "created by createIndexes", "lowered from 604800 s by collMod", ...
    pub how: String,
}

/// A TTL in force on a collection: an index with `expireAfterSeconds`, or the
/// collection's own `expireAfterSeconds` (clustered and time-series collections).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ttl {
    /// The index name, or `None` for the collection option.
    pub index: Option<String>,
    pub secs: i64,
    /// When this oplog created or lowered it (`None`: from the backup, or raised).
    pub change: Option<TtlChange>,
}

impl Ttl {
    /// `index createdAt_1 (expireAfterSeconds 3600)`.
    pub fn describe(&self) -> String {
        match &self.index {
            Some(name) => format!("TTL index `{name}`, expireAfterSeconds {}", self.secs),
            None => format!("collection option expireAfterSeconds {}", self.secs),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct CollInfo {
    ttl_indexes: Vec<Ttl>,
    /// `expireAfterSeconds` of a clustered or time-series (buckets) collection.
    expire: Option<Ttl>,
    capped: bool,
    timeseries: bool,
    view: bool,
    /// Created with `temp: true` in this oplog.
    temp: bool,
    /// Created in this oplog (its `create` entry).
    created: Option<Ts>,
}

/// What [`Catalog::delete_kind`] says about a collection's deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteKind {
    /// Not known (no backup, not created in the oplog).
    Unknown,
    /// Known, neither TTL nor capped.
    Plain,
    Capped,
    Ttl,
    /// A time-series buckets collection with `expireAfterSeconds`.
    TimeseriesTtl,
}

/// The catalog. [`Catalog::default`] knows nothing (no backup).
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    colls: FastMap<String, CollInfo>,
    from_backup: bool,
}

/// A number where a number is expected, `expireAfterSeconds` in any numeric type.
fn number(v: Option<RawBsonRef<'_>>) -> Option<i64> {
    v.and_then(as_i64)
}

fn get<'a>(d: &'a RawDocument, key: &str) -> Option<RawBsonRef<'a>> {
    d.get(key).ok().flatten()
}

impl Catalog {
    /// What a backup's metadata says: TTL indexes, `expireAfterSeconds` of clustered
    /// and time-series collections, capped collections, views.
    pub fn from_backup(b: &Backup) -> Catalog {
        let mut c = Catalog {
            colls: FastMap::default(),
            from_backup: true,
        };
        for n in &b.namespaces {
            let Some(m) = &n.metadata else { continue };
            let key = n.data_ns.clone().unwrap_or_else(|| n.ns.clone());
            let info = c.colls.entry(key).or_default();
            match n.kind {
                NsKind::View => info.view = true,
                NsKind::Timeseries => info.timeseries = true,
                _ => {}
            }
            info.capped = m.is_capped();
            info.ttl_indexes = m
                .ttl_indexes()
                .into_iter()
                .map(|(name, secs)| Ttl {
                    index: Some(name),
                    secs,
                    change: None,
                })
                .collect();
            let expire = match m.options.get("expireAfterSeconds") {
                Some(bson::Bson::Int32(n)) => Some(*n as i64),
                Some(bson::Bson::Int64(n)) => Some(*n),
                Some(bson::Bson::Double(d)) => Some(*d as i64),
                _ => None,
            };
            info.expire = expire.map(|secs| Ttl {
                index: None,
                secs,
                change: None,
            });
        }
        c
    }

    /// True when this catalog started from a backup's metadata.
    pub fn has_backup(&self) -> bool {
        self.from_backup
    }

    /// True when the catalog knows `ns` (from the backup, or created in the oplog):
    /// then "no TTL, not capped" is a fact, not a guess.
    pub fn knows(&self, ns: &str) -> bool {
        self.colls.contains_key(ns)
    }

    /// The TTL that expires documents of `ns` (a data namespace), the shortest if
    /// there are several.
    pub fn ttl(&self, ns: &str) -> Option<&Ttl> {
        let c = self.colls.get(ns)?;
        c.ttl_indexes
            .iter()
            .chain(c.expire.as_ref())
            .min_by_key(|t| t.secs)
    }

    /// What a delete without a session on `ns` may be, in one lookup (this runs for
    /// every delete of the oplog).
    pub fn delete_kind(&self, ns: &str) -> DeleteKind {
        if self.colls.is_empty() {
            return DeleteKind::Unknown;
        }
        let Some(c) = self.colls.get(ns) else {
            return DeleteKind::Unknown;
        };
        if c.capped {
            DeleteKind::Capped
        } else if c.expire.is_some() || !c.ttl_indexes.is_empty() {
            if c.timeseries || timeseries_view(ns).is_some() {
                DeleteKind::TimeseriesTtl
            } else {
                DeleteKind::Ttl
            }
        } else {
            DeleteKind::Plain
        }
    }

    pub fn is_capped(&self, ns: &str) -> bool {
        self.colls.get(ns).is_some_and(|c| c.capped)
    }

    pub fn is_timeseries(&self, ns: &str) -> bool {
        timeseries_view(ns).is_some() || self.colls.get(ns).is_some_and(|c| c.timeseries)
    }

    pub fn is_view(&self, ns: &str) -> bool {
        self.colls.get(ns).is_some_and(|c| c.view)
    }

    /// Created with `temp: true` in this oplog.
    pub fn is_temp(&self, ns: &str) -> bool {
        self.colls.get(ns).is_some_and(|c| c.temp)
    }

    /// When the oplog created `ns`, if it did.
    pub fn created(&self, ns: &str) -> Option<Ts> {
        self.colls.get(ns).and_then(|c| c.created)
    }

    /// Learns from one command entry (call it for every command, before acting on it
    /// elsewhere only when the old state is needed: see the scanner).
    pub fn observe(&mut self, e: &Entry<'_>) {
        let (Some(name), Some(o)) = (e.command_name(), e.o) else {
            return;
        };
        let db = e.db();
        let target = |key: &str| o.get_str(key).ok().map(|c| format!("{db}.{c}"));
        match name {
            "create" => {
                let Some(ns) = target("create") else { return };
                let flag = |k: &str| matches!(get(o, k), Some(RawBsonRef::Boolean(true)));
                let info = CollInfo {
                    capped: flag("capped"),
                    temp: flag("temp"),
                    timeseries: get(o, "timeseries").is_some(),
                    view: get(o, "viewOn").is_some(),
                    created: Some(e.ts),
                    expire: number(get(o, "expireAfterSeconds")).map(|secs| Ttl {
                        index: None,
                        secs,
                        change: Some(TtlChange {
                            ts: e.ts,
                            how: "set when the collection was created".into(),
                        }),
                    }),
                    ttl_indexes: Vec::new(),
                };
                self.colls.insert(ns, info);
            }
            // 4.4+: an index built on an empty collection (createIndexesOnEmptyCollection)
            // or by a single-phase build; the spec's fields are inline in `o`.
            "createIndexes" => {
                if let Some(ns) = target("createIndexes") {
                    self.add_ttl_index(ns, o, e.ts, "created by createIndexes");
                }
            }
            // Two-phase index builds (4.4+): the index is usable, and the TTL monitor
            // acts on it, only once committed (ttl.cpp skips indexes not ready).
            "commitIndexBuild" => {
                let Some(ns) = target("commitIndexBuild") else {
                    return;
                };
                if let Some(Ok(arr)) = o.get_array("indexes").ok().map(|a| {
                    a.into_iter()
                        .map(|x| x.map(|v| v.as_document()))
                        .collect::<Result<Vec<_>, _>>()
                }) {
                    for spec in arr.into_iter().flatten() {
                        self.add_ttl_index(
                            ns.clone(),
                            spec,
                            e.ts,
                            "created by an index build on existing data",
                        );
                    }
                }
            }
            "collMod" => self.coll_mod(e, o),
            "dropIndexes" | "deleteIndexes" | "deleteIndex" | "dropIndex" => {
                let Some(ns) = target(name) else { return };
                let Some(c) = self.colls.get_mut(&ns) else {
                    return;
                };
                match get(o, "index") {
                    Some(RawBsonRef::String("*")) => c.ttl_indexes.clear(),
                    Some(RawBsonRef::String(n)) => {
                        c.ttl_indexes.retain(|t| t.index.as_deref() != Some(n))
                    }
                    // By key pattern: the spec is not kept, forget them all rather than
                    // call later deletes routine.
                    _ => c.ttl_indexes.clear(),
                }
            }
            "drop" => {
                if let Some(ns) = target("drop") {
                    self.colls.remove(&ns);
                }
            }
            "dropDatabase" => {
                let prefix = format!("{db}.");
                self.colls.retain(|ns, _| !ns.starts_with(&prefix));
            }
            "renameCollection" => {
                let (Ok(from), Ok(to)) = (o.get_str("renameCollection"), o.get_str("to")) else {
                    return;
                };
                let moved = self.colls.remove(from);
                self.colls.remove(to);
                if let Some(mut info) = moved {
                    // `stayTemp: false` (the default) makes the target permanent.
                    info.temp = matches!(get(o, "stayTemp"), Some(RawBsonRef::Boolean(true)));
                    self.colls.insert(to.to_string(), info);
                }
            }
            _ => {}
        }
    }

    fn add_ttl_index(&mut self, ns: String, spec: &RawDocument, ts: Ts, how: &str) {
        let Some(secs) = number(get(spec, "expireAfterSeconds")) else {
            return;
        };
        let name = spec.get_str("name").unwrap_or("?").to_string();
        let c = self.colls.entry(ns).or_default();
        c.ttl_indexes
            .retain(|t| t.index.as_deref() != Some(name.as_str()));
        c.ttl_indexes.push(Ttl {
            index: Some(name),
            secs,
            change: Some(TtlChange {
                ts,
                how: how.to_string(),
            }),
        });
    }

    /// `collMod`: `index: {name|keyPattern, expireAfterSeconds}` changes a TTL index
    /// (or makes one TTL); a top-level `expireAfterSeconds` (number or `"off"`)
    /// changes a clustered or time-series collection's. The old values are in `o2`:
    /// `indexOptions_old` / `collectionOptions_old` (5.0+), `expireAfterSeconds_old`
    /// (4.x) (op_observer_impl.cpp onCollMod).
    fn coll_mod(&mut self, e: &Entry<'_>, o: &RawDocument) {
        let Ok(coll) = o.get_str("collMod") else {
            return;
        };
        let db = e.db();
        let mut ns = format!("{db}.{coll}");
        // collMod on a time-series collection acts on its buckets.
        let buckets = format!("{db}.system.buckets.{coll}");
        if !self.colls.contains_key(&ns) && self.colls.contains_key(&buckets) {
            ns = buckets;
        }
        let o2 = e.o2;
        let old_of = |section: &str| -> Option<i64> {
            let o2 = o2?;
            number(
                o2.get_document(section)
                    .ok()
                    .and_then(|d| get(d, "expireAfterSeconds")),
            )
            .or_else(|| number(get(o2, "expireAfterSeconds_old")))
        };
        let change = |old: Option<i64>, new: i64| -> Option<TtlChange> {
            let how = match old {
                None => "made TTL by collMod".to_string(),
                Some(old) if new < old => format!("lowered from {old} s by collMod"),
                Some(_) => return None,
            };
            Some(TtlChange { ts: e.ts, how })
        };
        if let Ok(ix) = o.get_document("index") {
            let Some(secs) = number(get(ix, "expireAfterSeconds")) else {
                return;
            };
            let name = ix
                .get_str("name")
                .map(str::to_string)
                .unwrap_or_else(|_| "(by key pattern)".into());
            let c = self.colls.entry(ns).or_default();
            let prev = c
                .ttl_indexes
                .iter()
                .position(|t| t.index.as_deref() == Some(name.as_str()));
            let old = old_of("indexOptions_old").or(prev.map(|p| c.ttl_indexes[p].secs));
            let kept = prev.and_then(|p| c.ttl_indexes[p].change.clone());
            if let Some(p) = prev {
                c.ttl_indexes.remove(p);
            }
            c.ttl_indexes.push(Ttl {
                index: Some(name),
                secs,
                change: change(old, secs).or(kept),
            });
            return;
        }
        match get(o, "expireAfterSeconds") {
            Some(RawBsonRef::String("off")) => {
                if let Some(c) = self.colls.get_mut(&ns) {
                    c.expire = None;
                }
            }
            Some(v) => {
                let Some(secs) = as_i64(v) else { return };
                let c = self.colls.entry(ns).or_default();
                let old = old_of("collectionOptions_old").or(c.expire.as_ref().map(|t| t.secs));
                let kept = c.expire.as_ref().and_then(|t| t.change.clone());
                c.expire = Some(Ttl {
                    index: None,
                    secs,
                    change: change(old, secs).or(kept),
                });
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, Document, RawDocumentBuf, Timestamp};

    fn observe(c: &mut Catalog, d: Document) {
        let raw = RawDocumentBuf::from_document(&d).unwrap();
        c.observe(&Entry::parse(&raw).unwrap());
    }

    fn cmd(t: u32, ns: &str, o: Document) -> Document {
        doc! { "op": "c", "ns": ns, "o": o, "ts": Timestamp { time: t, increment: 1 } }
    }

    #[test]
    fn ttl_from_the_oplogs_ddl() {
        let mut c = Catalog::default();
        // createIndexes as 4.4+ logs it for an empty collection (mongo-tools
        // testdata/create_indexes: spec fields inline).
        observe(
            &mut c,
            cmd(
                10,
                "app.$cmd",
                doc! { "create": "tokens", "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } },
            ),
        );
        observe(
            &mut c,
            cmd(
                10,
                "app.$cmd",
                doc! { "createIndexes": "tokens", "v": 2, "key": { "at": 1 }, "name": "at_1", "expireAfterSeconds": 300 },
            ),
        );
        let t = c.ttl("app.tokens").unwrap();
        assert_eq!((t.index.as_deref(), t.secs), (Some("at_1"), 300));
        assert_eq!(t.change.as_ref().unwrap().ts, Ts::new(10, 1));
        assert_eq!(c.created("app.tokens"), Some(Ts::new(10, 1)));

        // collMod converting a plain index to TTL, as mongo-tools'
        // testdata/collMod_ttl_index holds it (7.x: o2.indexOptions_old {}).
        observe(
            &mut c,
            doc! { "op": "c", "ns": "db.$cmd", "ts": Timestamp { time: 20, increment: 1 },
            "o": { "collMod": "coll1", "index": { "name": "a_1", "expireAfterSeconds": 1000i64 } },
            "o2": { "collectionOptions_old": { "uuid": 1 }, "indexOptions_old": {} } },
        );
        let t = c.ttl("db.coll1").unwrap();
        assert_eq!(t.secs, 1000);
        assert_eq!(t.change.as_ref().unwrap().how, "made TTL by collMod");

        // Lowering (4.x spelling of the old value), then raising keeps the lowering.
        observe(
            &mut c,
            doc! { "op": "c", "ns": "db.$cmd", "ts": Timestamp { time: 30, increment: 1 },
            "o": { "collMod": "coll1", "index": { "name": "a_1", "expireAfterSeconds": 100 } },
            "o2": { "expireAfterSeconds_old": 1000 } },
        );
        assert_eq!(
            c.ttl("db.coll1").unwrap().change.as_ref().unwrap().how,
            "lowered from 1000 s by collMod"
        );
        observe(
            &mut c,
            doc! { "op": "c", "ns": "db.$cmd", "ts": Timestamp { time: 40, increment: 1 },
            "o": { "collMod": "coll1", "index": { "name": "a_1", "expireAfterSeconds": 500 } },
            "o2": { "indexOptions_old": { "expireAfterSeconds": 100 } } },
        );
        let t = c.ttl("db.coll1").unwrap();
        assert_eq!(
            (t.secs, t.change.as_ref().unwrap().ts),
            (500, Ts::new(30, 1))
        );

        // Dropping the index, the collection, the database forgets the TTL.
        observe(
            &mut c,
            cmd(
                50,
                "db.$cmd",
                doc! { "dropIndexes": "coll1", "index": "a_1" },
            ),
        );
        assert!(c.ttl("db.coll1").is_none());
        observe(&mut c, cmd(60, "app.$cmd", doc! { "dropDatabase": 1 }));
        assert!(c.ttl("app.tokens").is_none() && !c.knows("app.tokens"));
    }

    #[test]
    fn index_builds_time_series_capped_and_renames() {
        let mut c = Catalog::default();
        // Two-phase build (mongo-tools testdata/commit_indexes_build shape).
        observe(
            &mut c,
            cmd(
                5,
                "shop.$cmd",
                doc! { "commitIndexBuild": "carts", "indexBuildUUID": Bson::Null,
                "indexes": [ { "v": 2, "key": { "updatedAt": 1 }, "name": "updatedAt_1", "expireAfterSeconds": 1800 } ] },
            ),
        );
        assert_eq!(c.ttl("shop.carts").unwrap().secs, 1800);
        // A time-series collection: the buckets collection is created with the
        // collection's expireAfterSeconds (8.0 shape in PBM's tests: temp, clusteredIndex,
        // timeseries).
        observe(
            &mut c,
            cmd(
                6,
                "m.$cmd",
                doc! { "create": "system.buckets.cpu", "clusteredIndex": true,
                "timeseries": { "timeField": "t", "metaField": "host", "granularity": "seconds", "bucketMaxSpanSeconds": 3600 },
                "expireAfterSeconds": 86400i64 },
            ),
        );
        assert!(c.is_timeseries("m.system.buckets.cpu"));
        let t = c.ttl("m.system.buckets.cpu").unwrap();
        assert_eq!((t.index.as_deref(), t.secs), (None, 86400));
        // collMod on the time-series name reaches the buckets; "off" removes it.
        observe(
            &mut c,
            cmd(
                7,
                "m.$cmd",
                doc! { "collMod": "cpu", "expireAfterSeconds": "off" },
            ),
        );
        assert!(c.ttl("m.system.buckets.cpu").is_none());
        // Capped, temp, and a rename carrying what is known to the target.
        observe(
            &mut c,
            cmd(
                8,
                "shop.$cmd",
                doc! { "create": "tmpAb12c.convertToCapped.log", "capped": true, "size": 4096, "temp": true },
            ),
        );
        assert!(
            c.is_capped("shop.tmpAb12c.convertToCapped.log")
                && c.is_temp("shop.tmpAb12c.convertToCapped.log")
        );
        observe(
            &mut c,
            cmd(
                9,
                "shop.$cmd",
                doc! { "renameCollection": "shop.tmpAb12c.convertToCapped.log", "to": "shop.log", "stayTemp": false, "dropTarget": true },
            ),
        );
        assert!(c.is_capped("shop.log") && !c.is_temp("shop.log"));
        assert!(!c.knows("shop.tmpAb12c.convertToCapped.log"));
    }

    #[test]
    fn from_a_backups_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let p = dir.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("shop/sessions.bson", "");
        w(
            "shop/sessions.metadata.json",
            r#"{"indexes":[{"v":2,"key":{"_id":1},"name":"_id_"},{"v":2,"key":{"at":1},"name":"at_1","expireAfterSeconds":3600}],"collectionName":"sessions","type":"collection"}"#,
        );
        w("shop/log.bson", "");
        w(
            "shop/log.metadata.json",
            r#"{"options":{"capped":true,"size":4096},"indexes":[],"collectionName":"log","type":"collection"}"#,
        );
        w("m/system.buckets.cpu.bson", "");
        w(
            "m/cpu.metadata.json",
            r#"{"options":{"timeseries":{"timeField":"t"},"expireAfterSeconds":{"$numberLong":"86400"}},"indexes":[],"collectionName":"cpu","type":"timeseries"}"#,
        );
        w(
            "shop/open_orders.metadata.json",
            r#"{"options":{"viewOn":"orders","pipeline":[]},"indexes":[],"collectionName":"open_orders","type":"view"}"#,
        );
        let b = crate::backup::open(dir.path()).unwrap();
        let c = Catalog::from_backup(&b);
        assert!(c.has_backup());
        assert_eq!(c.ttl("shop.sessions").unwrap().secs, 3600);
        assert!(c.ttl("shop.sessions").unwrap().change.is_none());
        assert!(c.is_capped("shop.log") && c.ttl("shop.log").is_none());
        assert_eq!(c.ttl("m.system.buckets.cpu").unwrap().secs, 86400);
        assert!(c.is_view("shop.open_orders"));
        assert!(c.knows("shop.log") && !c.knows("shop.orders"));
    }
}
