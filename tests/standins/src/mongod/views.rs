//! Views and (view-backed) time-series collections, stored the way MongoDB 5.0–8.0
//! stores them: a view is a document `{_id: "db.name", viewOn, pipeline[,
//! collation]}` in `db.system.views` (so the view catalog *is* that collection, and
//! an applyOps insert into it defines a view, as on the server); a time-series
//! collection `db.X` is a clustered collection `db.system.buckets.X` holding the
//! buckets plus a view `db.X` on it whose pipeline is one `$_internalUnpackBucket`
//! stage (`src/mongo/db/timeseries/README.md`; `timeseries::generateViewPipeline` in
//! `src/mongo/db/timeseries/timeseries_options.cpp`).
//!
//! Not implemented: reading through a view (find/aggregate/count on a view answer
//! `CommandNotSupportedOnView`), inserting measurements into a time-series view (the
//! server's bucket catalog; the tools write buckets into `system.buckets.X`
//! directly), viewless time-series (8.3+ with `rawData`).

use super::state::{CmdError, CmdResult, State};
use super::store::Collection;
use super::writes;
use bson::{doc, Bson, Document};

pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// The `system.views` document defining `db.name`, if `name` is a view (time-series
/// views included).
pub fn view_def(st: &State, db: &str, name: &str) -> Option<Document> {
    let views = st.store.get(db, "system.views")?;
    let id = format!("{db}.{name}");
    views
        .iter()
        .map(|(_, d)| d)
        .find(|d| d.get_str("_id") == Ok(id.as_str()))
        .map(|d| d.into_owned())
}

/// All view definitions of a database, in `_id` order.
pub fn view_defs(st: &State, db: &str) -> Vec<Document> {
    let Some(views) = st.store.get(db, "system.views") else {
        return Vec::new();
    };
    let mut out: Vec<Document> = views.iter().map(|(_, d)| d.into_owned()).collect();
    out.sort_by(|a, b| {
        a.get_str("_id")
            .unwrap_or("")
            .cmp(b.get_str("_id").unwrap_or(""))
    });
    out
}

/// The time-series options of `db.name` when it is a time-series collection.
pub fn timeseries_options(st: &State, db: &str, name: &str) -> Option<Document> {
    let def = view_def(st, db, name)?;
    let on = def.get_str("viewOn").ok()?;
    if on != format!("{BUCKETS_PREFIX}{name}") {
        return None;
    }
    st.store
        .get(db, on)?
        .options
        .get_document("timeseries")
        .ok()
        .cloned()
}

fn is_view_error(db: &str, name: &str) -> CmdError {
    CmdError::new(
        166,
        "CommandNotSupportedOnView",
        format!("Namespace {db}.{name} is a view, not a collection"),
    )
}

/// Writes the `insert`/`update`/`delete` commands may not do: to `system.views`,
/// `system.profile` or (on a replica set) `local.oplog.rs` (`userAllowedWriteNS`,
/// `src/mongo/db/ops/insert.cpp`), to a view, or to a time-series view (stand-in:
/// bucketing is not implemented).
pub fn check_writable(st: &State, db: &str, coll: &str) -> CmdResult<()> {
    let oplog = db == "local" && coll == "oplog.rs" && st.mode == super::state::Mode::Replset;
    if coll == "system.views" || coll == "system.profile" || oplog {
        return Err(CmdError::new(
            73,
            "InvalidNamespace",
            format!("cannot write to {db}.{coll}"),
        ));
    }
    if timeseries_options(st, db, coll).is_some() {
        return Err(CmdError::new(
            2,
            "BadValue",
            format!("pitr stand-in mongod: writing measurements into the time-series collection {db}.{coll} is not implemented; write buckets into {db}.{BUCKETS_PREFIX}{coll}"),
        ));
    }
    if view_def(st, db, coll).is_some() {
        return Err(is_view_error(db, coll));
    }
    Ok(())
}

/// Refuse an index command (listIndexes, createIndexes) on a plain view; a
/// time-series name is handled by the caller (its buckets' indexes).
pub fn check_not_view(st: &State, db: &str, coll: &str) -> CmdResult<()> {
    if view_def(st, db, coll).is_some() && timeseries_options(st, db, coll).is_none() {
        return Err(is_view_error(db, coll));
    }
    Ok(())
}

/// Reads through a view or a time-series collection (find, count, distinct,
/// aggregate) are not implemented: refused rather than answered from an empty
/// namespace.
pub fn check_readable(st: &State, db: &str, coll: &str) -> CmdResult<()> {
    if view_def(st, db, coll).is_some() {
        return Err(CmdError::new(
            166,
            "CommandNotSupportedOnView",
            format!("pitr stand-in mongod: reading through the view {db}.{coll} is not implemented (read {db}.system.buckets.{coll} for a time-series collection)"),
        ));
    }
    Ok(())
}

fn ensure_views_collection(st: &mut State, db: &str) -> CmdResult<()> {
    if !st.store.exists(db, "system.views") {
        writes::create_collection(st, db, "system.views", Document::new(), None)?;
    }
    Ok(())
}

/// `create` with `viewOn`: a `system.views` document; the oplog gets the `create`
/// command as a 5.0+ primary logs it.
pub fn create_view(st: &mut State, db: &str, name: &str, options: &Document) -> CmdResult<()> {
    writes::valid_coll_name(db, name)?;
    if st.store.exists(db, name) || view_def(st, db, name).is_some() {
        return Err(CmdError::new(
            48,
            "NamespaceExists",
            format!("Namespace {db}.{name} already exists"),
        ));
    }
    let view_on = match options.get("viewOn") {
        Some(Bson::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(CmdError::bad_value(
                "'viewOn' option must be specified and non-empty",
            ))
        }
    };
    let pipeline = match options.get("pipeline") {
        None => Bson::Array(vec![]),
        Some(p @ Bson::Array(_)) => p.clone(),
        Some(_) => {
            return Err(CmdError::type_mismatch(
                "'pipeline' option must be an array",
            ))
        }
    };
    ensure_views_collection(st, db)?;
    let mut def = doc! {"_id": format!("{db}.{name}"), "viewOn": view_on.clone(), "pipeline": pipeline.clone()};
    if let Some(c) = options.get("collation") {
        def.insert("collation", c.clone());
    }
    let views = st.store.get_mut(db, "system.views").expect("created");
    views.insert(def).map_err(|_| {
        CmdError::new(
            48,
            "NamespaceExists",
            format!("Namespace {db}.{name} already exists"),
        )
    })?;
    let mut o = doc! {"create": name, "viewOn": view_on, "pipeline": pipeline};
    if let Some(c) = options.get("collation") {
        o.insert("collation", c.clone());
    }
    st.log_op("c", &format!("{db}.$cmd"), None, o, None);
    Ok(())
}

/// Time-series options as the server stores them: IDL field order (`timeField`,
/// `metaField`, `granularity`, `bucketRoundingSeconds`, `bucketMaxSpanSeconds`),
/// `granularity: "seconds"` when no bucketing parameter is given, and
/// `bucketMaxSpanSeconds` from the granularity preset (3600, 86400, 2592000:
/// `getMaxSpanSecondsFromGranularity`, `timeseries_options.cpp`).
pub fn normalize_timeseries(ts: &Document) -> CmdResult<Document> {
    let time_field = match ts.get("timeField") {
        Some(Bson::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(CmdError::new(
                40414,
                "Location40414",
                "BSON field 'create.timeseries.timeField' is missing but a required field",
            ))
        }
    };
    let mut out = doc! {"timeField": time_field};
    if let Some(m) = ts.get("metaField") {
        out.insert("metaField", m.clone());
    }
    let num = |k: &str| {
        ts.get(k)
            .and_then(Bson::as_i32)
            .or_else(|| ts.get(k).and_then(Bson::as_i64).map(|v| v as i32))
    };
    let rounding = num("bucketRoundingSeconds");
    let span = num("bucketMaxSpanSeconds");
    let granularity = match ts.get("granularity") {
        Some(Bson::String(g)) => Some(g.clone()),
        None if rounding.is_none() && span.is_none() => Some("seconds".to_string()),
        None => None,
        Some(_) => return Err(CmdError::type_mismatch("'granularity' must be a string")),
    };
    let preset = match granularity.as_deref() {
        None => None,
        Some("seconds") => Some(3600),
        Some("minutes") => Some(86400),
        Some("hours") => Some(2_592_000),
        Some(other) => {
            return Err(CmdError::bad_value(format!(
                "Enumeration value '{other}' for field 'create.timeseries.granularity' is not a valid value."
            )))
        }
    };
    if let Some(g) = granularity {
        out.insert("granularity", g);
    }
    if let Some(r) = rounding {
        out.insert("bucketRoundingSeconds", r);
    }
    if let Some(s) = span.or(preset) {
        out.insert("bucketMaxSpanSeconds", s);
    }
    Ok(out)
}

/// The `$_internalUnpackBucket` view pipeline (`generateViewPipeline`).
fn view_pipeline(ts: &Document) -> Bson {
    let mut stage = doc! {"timeField": ts.get("timeField").cloned().unwrap_or(Bson::Null)};
    if let Some(m) = ts.get("metaField") {
        stage.insert("metaField", m.clone());
    }
    stage.insert(
        "bucketMaxSpanSeconds",
        ts.get("bucketMaxSpanSeconds")
            .cloned()
            .unwrap_or(Bson::Int32(3600)),
    );
    Bson::Array(vec![Bson::Document(doc! {"$_internalUnpackBucket": stage})])
}

/// `create` with `timeseries`: the clustered buckets collection, then the view.
pub fn create_timeseries(
    st: &mut State,
    db: &str,
    name: &str,
    options: &Document,
    ui: Option<bson::Uuid>,
) -> CmdResult<()> {
    writes::valid_coll_name(db, name)?;
    let Some(Bson::Document(ts)) = options.get("timeseries") else {
        return Err(CmdError::type_mismatch("'timeseries' must be a document"));
    };
    let ts = normalize_timeseries(ts)?;
    let buckets = format!("{BUCKETS_PREFIX}{name}");
    if st.store.exists(db, name)
        || view_def(st, db, name).is_some()
        || st.store.exists(db, &buckets)
    {
        return Err(CmdError::new(
            48,
            "NamespaceExists",
            format!("Collection {db}.{name} already exists."),
        ));
    }
    let time = ts.get_str("timeField").unwrap_or_default().to_string();
    // The buckets collection's options: a validator on the bucket schema (abridged:
    // the server's is a larger $jsonSchema), clustered by _id, the time-series options,
    // then what else the user gave (expireAfterSeconds, collation, storageEngine...).
    let mut bopts = doc! {
        "validator": {"$jsonSchema": {
            "bsonType": "object",
            "required": ["_id", "control", "data"],
            "properties": {
                "_id": {"bsonType": "objectId"},
                "control": {"bsonType": "object", "required": ["version", "min", "max"],
                    "properties": {"version": {"bsonType": "number"},
                        "min": {"bsonType": "object", "required": [time.clone()], "properties": {time.clone(): {"bsonType": "date"}}},
                        "max": {"bsonType": "object", "required": [time.clone()], "properties": {time.clone(): {"bsonType": "date"}}},
                        "closed": {"bsonType": "bool"}}},
                "data": {"bsonType": "object"},
                "meta": {},
            },
            "additionalProperties": false,
        }},
        "clusteredIndex": true,
        "timeseries": ts.clone(),
    };
    for (k, v) in options {
        if !matches!(
            k.as_str(),
            "timeseries" | "idIndex" | "clusteredIndex" | "validator"
        ) {
            bopts.insert(k.clone(), v.clone());
        }
    }
    let mut coll = match ui {
        Some(u) => Collection::with_uuid(bopts.clone(), u),
        None => Collection::new(bopts.clone()),
    };
    // Clustered: no _id index, documents kept in _id order for dbHash and scans.
    coll.indexes.clear();
    if st.version.timeseries_default_index() {
        if let Some(Bson::String(meta)) = ts.get("metaField") {
            coll.indexes.push(doc! {
                "v": 2,
                "key": {"meta": 1, format!("control.min.{time}"): 1, format!("control.max.{time}"): 1},
                "name": format!("{meta}_1_{time}_1"),
            });
        }
    }
    let uuid = coll.uuid;
    st.store.put(db, &buckets, coll);
    let mut o = doc! {"create": buckets.clone()};
    o.extend(bopts);
    st.log_op("c", &format!("{db}.$cmd"), Some(uuid), o, None);
    let mut view = doc! {"viewOn": buckets, "pipeline": view_pipeline(&ts)};
    if let Some(c) = options.get("collation") {
        view.insert("collation", c.clone());
    }
    create_view(st, db, name, &view)
}

/// Drop a view (or a time-series collection: its view and its buckets). `None` when
/// `name` is not a view.
pub fn drop_view(st: &mut State, db: &str, name: &str) -> Option<()> {
    let def = view_def(st, db, name)?;
    let id = def.get("_id").cloned().unwrap_or(Bson::Null);
    let views = st.store.get_mut(db, "system.views")?;
    if let Some(rid) = views.find_id(&id) {
        views.remove(rid);
    }
    st.log_op("c", &format!("{db}.$cmd"), None, doc! {"drop": name}, None);
    let buckets = format!("{BUCKETS_PREFIX}{name}");
    if def.get_str("viewOn") == Ok(buckets.as_str()) {
        writes::drop_collection(st, db, &buckets);
    }
    Some(())
}

/// The `listCollections` entries of views and time-series collections (after the
/// collections): `type: "view"` with `options {viewOn, pipeline[, collation]}` and
/// `info {readOnly: true}` (`buildViewBson`), or `type: "timeseries"` with the
/// buckets collection's creation options and `info {readOnly: false}`
/// (`buildTimeseriesBson`, `src/mongo/db/commands/list_collections.cpp`).
pub fn list_entries(st: &State, db: &str) -> Vec<Document> {
    let mut out = Vec::new();
    for def in view_defs(st, db) {
        let id = def.get_str("_id").unwrap_or_default();
        let name = id.strip_prefix(&format!("{db}.")).unwrap_or(id).to_string();
        if let Some(ts) = timeseries_options(st, db, &name) {
            let bopts = &st
                .store
                .get(db, &format!("{BUCKETS_PREFIX}{name}"))
                .expect("checked")
                .options;
            // timeseries::kAllowedCollectionCreationOptions
            let mut options = Document::new();
            for k in [
                "storageEngine",
                "indexOptionDefaults",
                "collation",
                "timeseries",
                "expireAfterSeconds",
            ] {
                if let Some(v) = bopts.get(k) {
                    options.insert(k, v.clone());
                }
            }
            options.insert("timeseries", ts);
            out.push(doc! {"name": name, "type": "timeseries", "options": options, "info": {"readOnly": false}});
            continue;
        }
        let mut options = doc! {
            "viewOn": def.get("viewOn").cloned().unwrap_or(Bson::Null),
            "pipeline": def.get("pipeline").cloned().unwrap_or(Bson::Array(vec![])),
        };
        if let Some(c) = def.get("collation") {
            options.insert("collation", c.clone());
        }
        out.push(
            doc! {"name": name, "type": "view", "options": options, "info": {"readOnly": true}},
        );
    }
    out
}

/// A user index key on a time-series collection → the buckets collection's key
/// (`timeseries_index_schema_conversion_functions.h`): the time field becomes
/// `control.min.T` + `control.max.T` (ascending) or `control.max.T` + `control.min.T`
/// (descending), the meta field and its subfields become `meta[.sub]`. Measurement
/// fields are refused (not implemented by the stand-in).
pub fn to_buckets_key(ts: &Document, key: &Document) -> CmdResult<Document> {
    let time = ts.get_str("timeField").unwrap_or_default();
    let meta = ts.get_str("metaField").ok();
    let mut out = Document::new();
    for (field, dir) in key {
        let descending = matches!(dir, Bson::Int32(i) if *i < 0)
            || matches!(dir, Bson::Int64(i) if *i < 0)
            || matches!(dir, Bson::Double(d) if *d < 0.0);
        if field == time {
            let (a, b) = if descending {
                ("max", "min")
            } else {
                ("min", "max")
            };
            out.insert(format!("control.{a}.{time}"), dir.clone());
            out.insert(format!("control.{b}.{time}"), dir.clone());
        } else if let Some(m) = meta.filter(|m| field == m || field.starts_with(&format!("{m}."))) {
            out.insert(format!("meta{}", &field[m.len()..]), dir.clone());
        } else {
            return Err(CmdError::bad_value(format!(
                "pitr stand-in mongod: indexes on time-series measurement field '{field}' are not implemented"
            )));
        }
    }
    Ok(out)
}

/// The reverse of [`to_buckets_key`], for `listIndexes` on the time-series name.
pub fn from_buckets_key(ts: &Document, key: &Document) -> Document {
    let time = ts.get_str("timeField").unwrap_or_default();
    let meta = ts.get_str("metaField").unwrap_or_default();
    let mut out = Document::new();
    for (field, dir) in key {
        if field == &format!("control.min.{time}") || field == &format!("control.max.{time}") {
            if !out.contains_key(time) {
                out.insert(time, dir.clone());
            }
        } else if field == "meta" || field.starts_with("meta.") {
            out.insert(format!("{meta}{}", &field[4..]), dir.clone());
        } else {
            out.insert(field.clone(), dir.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeseries_options_get_server_defaults() {
        assert_eq!(
            normalize_timeseries(&doc! {"metaField": "m", "timeField": "t"}).unwrap(),
            doc! {"timeField": "t", "metaField": "m", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}
        );
        assert_eq!(
            normalize_timeseries(&doc! {"timeField": "t", "granularity": "hours"}).unwrap(),
            doc! {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 2_592_000}
        );
        assert!(normalize_timeseries(&doc! {"metaField": "m"}).is_err());
    }

    #[test]
    fn index_keys_translate_both_ways() {
        let ts = doc! {"timeField": "ts", "metaField": "meta"};
        let user = doc! {"ts": 1, "meta.device": 1};
        let b = to_buckets_key(&ts, &user).unwrap();
        assert_eq!(
            b,
            doc! {"control.min.ts": 1, "control.max.ts": 1, "meta.device": 1}
        );
        assert_eq!(from_buckets_key(&ts, &b), user);
        let ts = doc! {"timeField": "t", "metaField": "tags"};
        let b = to_buckets_key(&ts, &doc! {"t": -1, "tags": 1}).unwrap();
        assert_eq!(
            b,
            doc! {"control.max.t": -1, "control.min.t": -1, "meta": 1}
        );
        assert_eq!(from_buckets_key(&ts, &b), doc! {"t": -1, "tags": 1});
        assert!(to_buckets_key(&ts, &doc! {"temp": 1}).is_err());
    }
}
