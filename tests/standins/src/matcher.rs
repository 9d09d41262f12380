//! Query semantics of the stand-in mongod: BSON comparison order, filters, sorts and
//! projections, enough for what pitr, the driver and the tools send (equality, the
//! comparison operators on any type including the oplog's Timestamp `ts`, `$in`,
//! `$exists`, `$and`/`$or`/`$nor`, dotted paths). Anything else is refused with the
//! server's `BadValue` rather than silently matching everything.

use bson::{Bson, Document};
use std::cmp::Ordering;

/// The BSON canonical type class: comparison operators only match values of the
/// same class ("type bracketing"), and sorts order classes in this order.
pub fn type_class(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 1,
        Bson::Null | Bson::Undefined => 2,
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => 3,
        Bson::String(_) | Bson::Symbol(_) => 4,
        Bson::Document(_) => 5,
        Bson::Array(_) => 6,
        Bson::Binary(_) => 7,
        Bson::ObjectId(_) => 8,
        Bson::Boolean(_) => 9,
        Bson::DateTime(_) => 10,
        Bson::Timestamp(_) => 11,
        Bson::RegularExpression(_) => 12,
        Bson::DbPointer(_) => 13,
        Bson::JavaScriptCode(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::MaxKey => 16,
    }
}

/// A number as f64 and, when it is an integer type, as i64.
fn num(v: &Bson) -> (f64, Option<i64>) {
    match v {
        Bson::Int32(i) => (*i as f64, Some(*i as i64)),
        Bson::Int64(i) => (*i as f64, Some(*i)),
        Bson::Double(d) => (*d, None),
        _ => (f64::NAN, None),
    }
}

/// Total order of BSON values (the server's sort order, simplified for Decimal128).
pub fn cmp_values(a: &Bson, b: &Bson) -> Ordering {
    let (ca, cb) = (type_class(a), type_class(b));
    if ca != cb {
        return ca.cmp(&cb);
    }
    match (a, b) {
        (Bson::Decimal128(x), Bson::Decimal128(y)) => x.bytes().cmp(&y.bytes()),
        _ if ca == 3 => {
            let ((fa, ia), (fb, ib)) = (num(a), num(b));
            match (ia, ib) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => fa
                    .partial_cmp(&fb)
                    .unwrap_or_else(|| fa.is_nan().cmp(&fb.is_nan()).reverse()),
            }
        }
        (Bson::String(x), Bson::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::Symbol(x), Bson::Symbol(y))
        | (Bson::String(x), Bson::Symbol(y))
        | (Bson::Symbol(x), Bson::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::Document(x), Bson::Document(y)) => cmp_docs(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            for (ex, ey) in x.iter().zip(y.iter()) {
                let o = cmp_values(ex, ey);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then(u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then(x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => {
            x.pattern.cmp(&y.pattern).then(x.options.cmp(&y.options))
        }
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.cmp(y),
        _ => Ordering::Equal,
    }
}

/// Field-order-sensitive document comparison, like the server's.
pub fn cmp_docs(x: &Document, y: &Document) -> Ordering {
    let mut ix = x.iter();
    let mut iy = y.iter();
    loop {
        match (ix.next(), iy.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((kx, vx)), Some((ky, vy))) => {
                let o = type_class(vx)
                    .cmp(&type_class(vy))
                    .then_with(|| kx.cmp(ky))
                    .then_with(|| cmp_values(vx, vy));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

pub fn values_equal(a: &Bson, b: &Bson) -> bool {
    cmp_values(a, b) == Ordering::Equal
}

/// A key for hashing `_id` values so that `1`, `1i64` and `1.0` collide like they do
/// in the server's unique `_id` index.
pub fn id_key(v: &Bson) -> Vec<u8> {
    let mut out = vec![type_class(v)];
    match v {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => {
            let (f, i) = num(v);
            match i {
                Some(i) => out.extend_from_slice(format!("i{i}").as_bytes()),
                None if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    out.extend_from_slice(format!("i{}", f as i64).as_bytes())
                }
                None => out.extend_from_slice(format!("f{:x}", f.to_bits()).as_bytes()),
            }
        }
        Bson::String(s) | Bson::Symbol(s) => out.extend_from_slice(s.as_bytes()),
        other => {
            let mut d = Document::new();
            d.insert("", other.clone());
            out.extend_from_slice(&bson::to_vec(&d).unwrap_or_default());
        }
    }
    out
}

/// Values found at a dotted path; arrays on the way are traversed (each element that
/// is a document is searched, a numeric component indexes the array).
pub fn lookup<'a>(doc: &'a Document, path: &str) -> Vec<&'a Bson> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut out = Vec::new();
    lookup_in_doc(doc, &parts, &mut out);
    out
}

fn lookup_in_doc<'a>(doc: &'a Document, parts: &[&str], out: &mut Vec<&'a Bson>) {
    if let Some(v) = doc.get(parts[0]) {
        lookup_in_value(v, &parts[1..], out);
    }
}

fn lookup_in_value<'a>(v: &'a Bson, rest: &[&str], out: &mut Vec<&'a Bson>) {
    if rest.is_empty() {
        out.push(v);
        return;
    }
    match v {
        Bson::Document(d) => lookup_in_doc(d, rest, out),
        Bson::Array(items) => {
            if let Ok(idx) = rest[0].parse::<usize>() {
                if let Some(item) = items.get(idx) {
                    lookup_in_value(item, &rest[1..], out);
                }
            }
            for item in items {
                if let Bson::Document(d) = item {
                    lookup_in_doc(d, rest, out);
                }
            }
        }
        _ => {}
    }
}

fn is_operator_doc(v: &Bson) -> Option<&Document> {
    match v {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => Some(d),
        _ => None,
    }
}

/// Does `doc` match `filter`? `Err` carries the server's error message for an
/// operator the stand-in does not implement.
pub fn matches(doc: &Document, filter: &Document) -> Result<bool, String> {
    for (k, v) in filter {
        let ok = match k.as_str() {
            "$and" | "$or" | "$nor" => {
                let Bson::Array(items) = v else {
                    return Err(format!("{k} must be an array"));
                };
                let mut results = Vec::with_capacity(items.len());
                for item in items {
                    let Bson::Document(sub) = item else {
                        return Err(format!("{k} argument's entries must be objects"));
                    };
                    results.push(matches(doc, sub)?);
                }
                match k.as_str() {
                    "$and" => results.iter().all(|r| *r),
                    "$or" => results.iter().any(|r| *r),
                    _ => !results.iter().any(|r| *r),
                }
            }
            "$comment" => true,
            k if k.starts_with('$') => {
                return Err(format!(
                    "unknown top level operator: {k} (not implemented by the pitr stand-in mongod)"
                ))
            }
            path => match_field(doc, path, v)?,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn match_field(doc: &Document, path: &str, cond: &Bson) -> Result<bool, String> {
    let vals = lookup(doc, path);
    match is_operator_doc(cond) {
        Some(ops) => match_ops(&vals, ops),
        None => Ok(eq_match(&vals, cond)),
    }
}

fn match_ops(vals: &[&Bson], ops: &Document) -> Result<bool, String> {
    for (op, arg) in ops {
        if !match_op(vals, op, arg)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Each candidate value, and each element of a candidate array.
fn candidates<'a>(vals: &[&'a Bson]) -> Vec<&'a Bson> {
    let mut out = Vec::new();
    for v in vals {
        out.push(*v);
        if let Bson::Array(items) = v {
            out.extend(items.iter());
        }
    }
    out
}

fn eq_match(vals: &[&Bson], target: &Bson) -> bool {
    if matches!(target, Bson::Null) && vals.is_empty() {
        return true;
    }
    candidates(vals).iter().any(|v| values_equal(v, target))
}

fn match_op(vals: &[&Bson], op: &str, arg: &Bson) -> Result<bool, String> {
    let cmp_any = |want: &dyn Fn(Ordering) -> bool| {
        candidates(vals)
            .iter()
            .any(|v| type_class(v) == type_class(arg) && want(cmp_values(v, arg)))
    };
    Ok(match op {
        "$eq" => eq_match(vals, arg),
        "$ne" => !eq_match(vals, arg),
        "$gt" => cmp_any(&|o| o == Ordering::Greater),
        "$gte" => cmp_any(&|o| o != Ordering::Less),
        "$lt" => cmp_any(&|o| o == Ordering::Less),
        "$lte" => cmp_any(&|o| o != Ordering::Greater),
        "$in" | "$nin" => {
            let Bson::Array(items) = arg else {
                return Err(format!("{op} needs an array"));
            };
            let found = items.iter().any(|t| eq_match(vals, t));
            if op == "$in" {
                found
            } else {
                !found
            }
        }
        "$exists" => {
            let want = match arg {
                Bson::Boolean(b) => *b,
                Bson::Int32(i) => *i != 0,
                Bson::Int64(i) => *i != 0,
                Bson::Double(d) => *d != 0.0,
                _ => true,
            };
            want != vals.is_empty()
        }
        "$not" => match arg {
            Bson::Document(d) => !match_ops(vals, d)?,
            _ => return Err("$not needs a document".into()),
        },
        "$size" => {
            let n = num(arg).0;
            vals.iter()
                .any(|v| matches!(v, Bson::Array(a) if a.len() as f64 == n))
        }
        "$elemMatch" => {
            let Bson::Document(sub) = arg else {
                return Err("$elemMatch needs an Object".into());
            };
            let mut any = false;
            for v in vals {
                if let Bson::Array(items) = v {
                    for item in items {
                        let ok = match (item, is_operator_doc(arg)) {
                            (_, Some(ops)) => match_ops(&[item], ops)?,
                            (Bson::Document(d), None) => matches(d, sub)?,
                            _ => false,
                        };
                        any |= ok;
                    }
                }
            }
            any
        }
        "$type" => {
            let wanted: Vec<&Bson> = match arg {
                Bson::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            candidates(vals)
                .iter()
                .any(|v| wanted.iter().any(|w| type_matches(v, w)))
        }
        other => {
            return Err(format!(
                "unknown operator: {other} (not implemented by the pitr stand-in mongod)"
            ))
        }
    })
}

fn type_matches(v: &Bson, want: &Bson) -> bool {
    let code: i32 = match v {
        Bson::Double(_) => 1,
        Bson::String(_) => 2,
        Bson::Document(_) => 3,
        Bson::Array(_) => 4,
        Bson::Binary(_) => 5,
        Bson::Undefined => 6,
        Bson::ObjectId(_) => 7,
        Bson::Boolean(_) => 8,
        Bson::DateTime(_) => 9,
        Bson::Null => 10,
        Bson::RegularExpression(_) => 11,
        Bson::JavaScriptCode(_) => 13,
        Bson::Symbol(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::Int32(_) => 16,
        Bson::Timestamp(_) => 17,
        Bson::Int64(_) => 18,
        Bson::Decimal128(_) => 19,
        Bson::MinKey => -1,
        Bson::MaxKey => 127,
        Bson::DbPointer(_) => 12,
    };
    match want {
        Bson::String(alias) => {
            let by_name = match alias.as_str() {
                "double" => 1,
                "string" => 2,
                "object" => 3,
                "array" => 4,
                "binData" => 5,
                "objectId" => 7,
                "bool" => 8,
                "date" => 9,
                "null" => 10,
                "int" => 16,
                "timestamp" => 17,
                "long" => 18,
                "decimal" => 19,
                "number" => return matches!(code, 1 | 16 | 18 | 19),
                _ => return false,
            };
            by_name == code
        }
        n => num(n).0 as i32 == code,
    }
}

/// The value a sort key sees for one document (missing sorts as null; an array sorts
/// by its smallest element ascending, its largest descending).
fn sort_key(doc: &Document, path: &str, ascending: bool) -> Bson {
    let vals = lookup(doc, path);
    let mut best: Option<Bson> = None;
    for v in vals {
        let items: Vec<&Bson> = match v {
            Bson::Array(a) if !a.is_empty() => a.iter().collect(),
            other => vec![other],
        };
        for item in items {
            let better = match &best {
                None => true,
                Some(b) => {
                    let o = cmp_values(item, b);
                    if ascending {
                        o == Ordering::Less
                    } else {
                        o == Ordering::Greater
                    }
                }
            };
            if better {
                best = Some(item.clone());
            }
        }
    }
    best.unwrap_or(Bson::Null)
}

fn direction(v: &Bson) -> Result<bool, String> {
    match v {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => Ok(num(v).0 >= 0.0),
        _ => Err("$sort key ordering must be 1 (for ascending) or -1 (for descending)".into()),
    }
}

/// Sort `(record id, document)` pairs (record id = natural order) by a sort spec.
pub fn sort_records<D: std::borrow::Borrow<Document>>(
    records: &mut [(u64, D)],
    spec: &Document,
) -> Result<(), String> {
    let mut keys = Vec::new();
    for (k, v) in spec {
        keys.push((k.clone(), direction(v)?));
    }
    if keys.is_empty() {
        return Ok(());
    }
    records.sort_by(|(ra, a), (rb, b)| {
        for (path, asc) in &keys {
            let o = if path == "$natural" {
                ra.cmp(rb)
            } else {
                cmp_values(
                    &sort_key(a.borrow(), path, *asc),
                    &sort_key(b.borrow(), path, *asc),
                )
            };
            let o = if *asc { o } else { o.reverse() };
            if o != Ordering::Equal {
                return o;
            }
        }
        ra.cmp(rb)
    });
    Ok(())
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Null | Bson::Undefined => false,
        _ => true,
    }
}

/// Apply a top-level projection (inclusion or exclusion; dotted paths act on their
/// top-level field; `$`-operators include the field whole).
pub fn project(doc: &Document, proj: &Document) -> Document {
    if proj.is_empty() {
        return doc.clone();
    }
    let top = |k: &str| k.split('.').next().unwrap_or(k).to_string();
    let inclusion = proj
        .iter()
        .any(|(k, v)| k != "_id" && (truthy(v) || matches!(v, Bson::Document(_))));
    let id_wanted = proj.get("_id").map(truthy).unwrap_or(true);
    let mut out = Document::new();
    if inclusion {
        let wanted: Vec<String> = proj
            .iter()
            .filter(|(k, v)| *k != "_id" && (truthy(v) || matches!(v, Bson::Document(_))))
            .map(|(k, _)| top(k))
            .collect();
        for (k, v) in doc {
            if (k == "_id" && id_wanted) || wanted.iter().any(|w| w == k) {
                out.insert(k.clone(), v.clone());
            }
        }
    } else {
        let dropped: Vec<String> = proj
            .iter()
            .filter(|(k, v)| !truthy(v) && !k.contains('.'))
            .map(|(k, _)| k.clone())
            .collect();
        for (k, v) in doc {
            if !dropped.iter().any(|d| d == k) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    #[test]
    fn timestamp_ranges_and_type_bracketing() {
        let e = doc! {"ts": Timestamp { time: 10, increment: 2 }, "op": "i"};
        assert!(matches(
            &e,
            &doc! {"ts": {"$gt": Timestamp { time: 10, increment: 1 }}}
        )
        .unwrap());
        assert!(!matches(
            &e,
            &doc! {"ts": {"$gte": Timestamp { time: 10, increment: 3 }}}
        )
        .unwrap());
        // a number never compares with a Timestamp
        assert!(!matches(&e, &doc! {"ts": {"$gt": 0}}).unwrap());
        assert!(matches(
            &e,
            &doc! {"$and": [{"op": "i"}, {"ts": {"$lte": Timestamp { time: 10, increment: 2 }}}]}
        )
        .unwrap());
    }

    #[test]
    fn numbers_compare_across_types_and_arrays_match_elements() {
        let d = doc! {"a": 1i64, "tags": ["x", "y"], "sub": {"b": 2.0}};
        assert!(matches(&d, &doc! {"a": 1.0}).unwrap());
        assert!(matches(&d, &doc! {"tags": "y"}).unwrap());
        assert!(matches(&d, &doc! {"sub.b": 2}).unwrap());
        assert!(matches(&d, &doc! {"missing": null}).unwrap());
        assert!(matches(&d, &doc! {"a": {"$in": [5, 1]}}).unwrap());
        assert!(matches(&d, &doc! {"missing": {"$exists": false}}).unwrap());
        assert!(matches(&d, &doc! {"x": {"$regex": "a"}}).is_err());
        assert_eq!(id_key(&Bson::Int32(1)), id_key(&Bson::Double(1.0)));
    }
}
