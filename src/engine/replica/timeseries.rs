//! A time-series collection's indexes as `listIndexes` shows them, and so as
//! mongodump dumps them: the oplog builds indexes on `db.system.buckets.X` in bucket
//! terms (`meta`, `control.min.<f>`/`control.max.<f>`), and `listIndexes` on the
//! time-series collection translates each back to the collection's own field names
//! (`createTimeseriesIndexFromBucketsIndex`,
//! `src/mongo/db/timeseries/timeseries_index_schema_conversion_functions.cpp`):
//!
//! - a spec that carries `originalSpec` (6.0+, the user's own definition) is listed
//!   as that;
//! - otherwise its `key` is translated (`createTimeseriesIndexSpecFromBucketsIndexSpec`)
//!   and replaces the key in place, `originalSpec` removed, every other field kept;
//! - a key that does not translate is not listed at all (the server hides it).
//!
//! The time-series metric indexes feature flag (measurement fields, `2dsphere` on
//! `data.<f>`) is taken as enabled: it is from 6.0, and earlier releases could not
//! build such indexes.

use bson::{Bson, Document};

const CONTROL_MIN: &str = "control.min.";
const CONTROL_MAX: &str = "control.max.";

/// The spec `listIndexes` shows for the buckets index `spec` of a time-series
/// collection with these collection `options` (`{timeseries: {timeField,
/// metaField?}}`); None when the server would not list it.
pub fn listed_index(options: &Document, spec: &Document) -> Option<Document> {
    if let Ok(original) = spec.get_document("originalSpec") {
        return Some(original.clone());
    }
    let key = key_from_buckets(options, spec.get_document("key").ok()?)?;
    let mut out = Document::new();
    for (name, v) in spec {
        match name.as_str() {
            "originalSpec" => {}
            "key" => {
                out.insert("key", Bson::Document(key.clone()));
            }
            _ => {
                out.insert(name.clone(), v.clone());
            }
        }
    }
    Some(out)
}

/// `BSONElement::number()`: the value of a number, 0 for any other type.
fn number(v: &Bson) -> f64 {
    match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => d.to_string().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

/// `extractControlPrefixAndKey`: `control.max.x.y` to (`control.max.`, `x.y`).
fn control_prefix_and_key(field: &str) -> Option<(&str, &str)> {
    [CONTROL_MIN, CONTROL_MAX]
        .into_iter()
        .find_map(|p| field.strip_prefix(p).map(|k| (p, k)))
}

/// `createTimeseriesIndexSpecFromBucketsIndexSpec`: a buckets key pattern in the
/// time-series collection's terms; None when it does not translate.
pub fn key_from_buckets(options: &Document, key: &Document) -> Option<Document> {
    let ts = options.get_document("timeseries").ok()?;
    let time = ts.get_str("timeField").ok()?;
    let meta = ts.get_str("metaField").ok();
    let (min_time, max_time) = (
        format!("{CONTROL_MIN}{time}"),
        format!("{CONTROL_MAX}{time}"),
    );
    let mut out = Document::new();
    let mut it = key.iter();
    while let Some((name, v)) = it.next() {
        if *name == min_time {
            if !is_number(v) {
                return None;
            }
            out.insert(time, v.clone());
            continue;
        }
        if *name == max_time {
            // control.min.<time> alone says ascending or descending.
            continue;
        }
        if let Some(m) = meta {
            if name == "meta" {
                out.insert(m, v.clone());
                continue;
            }
            if let Some(sub) = name.strip_prefix("meta.") {
                out.insert(format!("{m}.{sub}"), v.clone());
                continue;
            }
        }
        if let (Some(f), Bson::String(kind)) = (name.strip_prefix("data."), v) {
            if kind == "2dsphere_bucket" {
                out.insert(f, "2dsphere");
                continue;
            }
        }
        // A measurement index: the compound pair control.min.f/control.max.f.
        let (p1, k1) = control_prefix_and_key(name)?;
        let (name2, v2) = it.next()?;
        let (p2, k2) = control_prefix_and_key(name2)?;
        let (first, second) = (number(v), number(v2));
        if first != second || k1 != k2 {
            return None;
        }
        let ascending = p1 == CONTROL_MIN && p2 == CONTROL_MAX && first >= 0.0;
        let descending = p1 == CONTROL_MAX && p2 == CONTROL_MIN && first < 0.0;
        if !(ascending || descending) {
            return None;
        }
        out.insert(k1, v2.clone());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    /// `makeTimeseriesOptions` of the server's test: time field `tm`, meta `mm`.
    fn options() -> Document {
        doc! { "timeseries": { "timeField": "tm", "metaField": "mm", "granularity": "seconds" } }
    }

    fn key(buckets: Document) -> Option<Document> {
        key_from_buckets(&options(), &buckets)
    }

    /// The buckets-to-time-series cases of
    /// `timeseries_index_schema_conversion_functions_test.cpp`
    /// (`TimeseriesIndexSchemaConversionTest`), each named after its test.
    #[test]
    fn the_servers_conversion_cases() {
        // EmptyTimeseriesIndexSpecDoesNothing
        assert_eq!(key(doc! {}), Some(doc! {}));
        // AscendingTimeIndexSpecConversion
        assert_eq!(
            key(doc! { "control.min.tm": 1, "control.max.tm": 1 }),
            Some(doc! { "tm": 1 })
        );
        // DescendingTimeIndexSpecConversion
        assert_eq!(
            key(doc! { "control.max.tm": -1, "control.min.tm": -1 }),
            Some(doc! { "tm": -1 })
        );
        // TimeSubFieldIndexSpecConversionFails
        assert_eq!(key(doc! { "tm.subfield1": 1 }), None);
        // AscendingMetadataIndexSpecConversion, DescendingMetadataIndexSpecConversion
        assert_eq!(key(doc! { "meta": 1 }), Some(doc! { "mm": 1 }));
        assert_eq!(key(doc! { "meta": -1 }), Some(doc! { "mm": -1 }));
        // MetadataCompoundIndexSpecConversion
        assert_eq!(
            key(doc! { "meta.subfield1": 1, "meta.subfield2": 1 }),
            Some(doc! { "mm.subfield1": 1, "mm.subfield2": 1 })
        );
        // TimeAndMetadataCompoundIndexSpecConversion
        assert_eq!(
            key(doc! { "control.min.tm": 1, "control.max.tm": 1, "meta.subfield1": 1 }),
            Some(doc! { "tm": 1, "mm.subfield1": 1 })
        );
        // MetadataAndTimeCompoundIndexSpecConversion
        assert_eq!(
            key(doc! { "meta.subfield1": 1, "control.min.tm": 1, "control.max.tm": 1 }),
            Some(doc! { "mm.subfield1": 1, "tm": 1 })
        );
        // DataIndexSpecConversionFails and the compounds with it
        assert_eq!(key(doc! { "data.somedatafield": 1 }), None);
        assert_eq!(
            key(doc! { "control.min.tm": 1, "control.max.tm": 1, "data.somedatafield": 1 }),
            None
        );
        assert_eq!(key(doc! { "meta": 1, "data.somedatafield": 1 }), None);
        // Hashed, wildcard, text, 2d and 2dsphere on the metaField
        for kind in ["hashed", "text", "2d", "2dsphere"] {
            assert_eq!(key(doc! { "meta": kind }), Some(doc! { "mm": kind }));
        }
        assert_eq!(key(doc! { "meta.$**": 1 }), Some(doc! { "mm.$**": 1 }));
        assert_eq!(
            key(doc! { "meta.subfield1.$**": 1 }),
            Some(doc! { "mm.subfield1.$**": 1 })
        );
    }

    /// Measurement indexes (metric indexes, 6.0+): ascending is the pair
    /// min-then-max, descending max-then-min, with equal orderings; anything else is
    /// not listed. `2dsphere_bucket` on `data.<f>` is a `2dsphere` on `<f>`.
    #[test]
    fn measurement_indexes_translate_as_pairs() {
        assert_eq!(
            key(doc! { "control.min.x": 1, "control.max.x": 1 }),
            Some(doc! { "x": 1 })
        );
        assert_eq!(
            key(doc! { "control.max.x.y": -1, "control.min.x.y": -1, "meta": 1 }),
            Some(doc! { "x.y": -1, "mm": 1 })
        );
        assert_eq!(key(doc! { "control.min.x": 1 }), None);
        assert_eq!(key(doc! { "control.min.x": 1, "control.max.x": -1 }), None);
        assert_eq!(key(doc! { "control.max.x": 1, "control.min.x": 1 }), None);
        assert_eq!(key(doc! { "control.min.x": 1, "control.max.y": 1 }), None);
        assert_eq!(
            key(doc! { "data.loc": "2dsphere_bucket" }),
            Some(doc! { "loc": "2dsphere" })
        );
        // Without a metaField, `meta` is nobody's field.
        let no_meta = doc! { "timeseries": { "timeField": "tm" } };
        assert_eq!(key_from_buckets(&no_meta, &doc! { "meta": 1 }), None);
    }

    /// The whole spec: `originalSpec` wins; otherwise the key is replaced in place
    /// and every other field kept (`BSONObj::addFields`).
    #[test]
    fn listed_specs() {
        let spec = doc! { "v": 2, "key": { "meta": 1, "control.min.tm": 1, "control.max.tm": 1 }, "name": "mm_1_tm_1", "hidden": true };
        assert_eq!(
            listed_index(&options(), &spec),
            Some(doc! { "v": 2, "key": { "mm": 1, "tm": 1 }, "name": "mm_1_tm_1", "hidden": true })
        );
        let with_original = doc! {
            "v": 2, "key": { "control.min.x": 1, "control.max.x": 1 }, "name": "x_1",
            "partialFilterExpression": { "meta": { "$gt": 1 } },
            "originalSpec": { "v": 2, "key": { "x": 1 }, "name": "x_1", "partialFilterExpression": { "mm": { "$gt": 1 } } },
        };
        assert_eq!(
            listed_index(&options(), &with_original),
            Some(
                doc! { "v": 2, "key": { "x": 1 }, "name": "x_1", "partialFilterExpression": { "mm": { "$gt": 1 } } }
            )
        );
        assert_eq!(
            listed_index(
                &options(),
                &doc! { "v": 2, "key": { "data.x": 1 }, "name": "d" }
            ),
            None
        );
    }
}
