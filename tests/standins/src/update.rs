//! Updates in the three forms the stand-in mongod meets: the `update` command's
//! modifiers (`$set`, `$unset`, ...) and replacements, and the oplog's `u` entries,
//! which add the `$v:2` delta format (`o.diff`) written by MongoDB 5.0+.

use crate::matcher::{cmp_values, lookup};
use bson::{Bson, Document};
use std::cmp::Ordering;

/// An error message and the server code that goes with it.
#[derive(Debug, Clone)]
pub struct UpdateError {
    pub code: i32,
    pub code_name: &'static str,
    pub msg: String,
}

fn bad(msg: impl Into<String>) -> UpdateError {
    UpdateError {
        code: 9,
        code_name: "FailedToParse",
        msg: msg.into(),
    }
}

/// Is this update document a modifier update (first key starts with `$`)?
pub fn is_modifier(update: &Document) -> bool {
    update
        .keys()
        .find(|k| k.as_str() != "$v")
        .is_some_and(|k| k.starts_with('$'))
}

/// Replace `doc` by `replacement`, keeping `_id` (which may not change).
pub fn replace(doc: &Document, replacement: &Document) -> Result<Document, UpdateError> {
    let mut out = Document::new();
    if let Some(id) = doc.get("_id") {
        if let Some(new_id) = replacement.get("_id") {
            if cmp_values(id, new_id) != Ordering::Equal {
                return Err(UpdateError {
                    code: 66,
                    code_name: "ImmutableField",
                    msg: "Performing an update on the path '_id' would modify the immutable field '_id'".into(),
                });
            }
        }
        out.insert("_id", id.clone());
    }
    for (k, v) in replacement {
        if k != "_id" || !out.contains_key("_id") {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

/// Apply modifier operators. `inserting` is true when an upsert creates the document
/// (then `$setOnInsert` applies).
pub fn apply_modifiers(
    doc: &Document,
    update: &Document,
    inserting: bool,
) -> Result<Document, UpdateError> {
    let mut out = doc.clone();
    for (op, arg) in update {
        if op == "$v" {
            continue;
        }
        let Bson::Document(fields) = arg else {
            return Err(bad(format!(
                "Modifiers operate on fields but we found type {:?} instead",
                arg.element_type()
            )));
        };
        for (path, value) in fields {
            if path == "_id" && op != "$setOnInsert" && op != "$set" {
                return Err(UpdateError {
                    code: 66,
                    code_name: "ImmutableField",
                    msg: "Performing an update on the path '_id' would modify the immutable field '_id'".into(),
                });
            }
            match op.as_str() {
                "$set" => set_path(&mut out, path, value.clone())?,
                "$setOnInsert" => {
                    if inserting {
                        set_path(&mut out, path, value.clone())?
                    }
                }
                "$unset" => unset_path(&mut out, path),
                "$inc" | "$mul" => {
                    let cur = lookup(&out, path).first().map(|v| (*v).clone());
                    let new = arith(cur.as_ref(), value, op == "$inc")?;
                    set_path(&mut out, path, new)?
                }
                "$min" | "$max" => {
                    let cur = lookup(&out, path).first().map(|v| (*v).clone());
                    let replace = match &cur {
                        None => true,
                        Some(c) => {
                            let o = cmp_values(value, c);
                            (op == "$min" && o == Ordering::Less)
                                || (op == "$max" && o == Ordering::Greater)
                        }
                    };
                    if replace {
                        set_path(&mut out, path, value.clone())?
                    }
                }
                "$currentDate" => set_path(&mut out, path, Bson::DateTime(bson::DateTime::now()))?,
                "$rename" => {
                    let Bson::String(to) = value else {
                        return Err(bad("The 'to' field for $rename must be a string"));
                    };
                    if let Some(v) = lookup(&out, path).first().map(|v| (*v).clone()) {
                        unset_path(&mut out, path);
                        set_path(&mut out, to, v)?;
                    }
                }
                "$push" | "$addToSet" => {
                    let items: Vec<Bson> = match value {
                        Bson::Document(d) if d.contains_key("$each") => match d.get("$each") {
                            Some(Bson::Array(a)) => a.clone(),
                            _ => return Err(bad("$each must be an array")),
                        },
                        other => vec![other.clone()],
                    };
                    let mut arr = match lookup(&out, path).first() {
                        None => Vec::new(),
                        Some(Bson::Array(a)) => a.clone(),
                        Some(_) => {
                            return Err(UpdateError {
                                code: 2,
                                code_name: "BadValue",
                                msg: format!("The field '{path}' must be an array"),
                            })
                        }
                    };
                    for item in items {
                        if op == "$push"
                            || !arr.iter().any(|e| cmp_values(e, &item) == Ordering::Equal)
                        {
                            arr.push(item);
                        }
                    }
                    set_path(&mut out, path, Bson::Array(arr))?
                }
                "$pull" => {
                    if let Some(Bson::Array(a)) = lookup(&out, path).first() {
                        let kept: Vec<Bson> = a
                            .iter()
                            .filter(|e| cmp_values(e, value) != Ordering::Equal)
                            .cloned()
                            .collect();
                        set_path(&mut out, path, Bson::Array(kept))?
                    }
                }
                other => {
                    return Err(bad(format!(
                        "Unknown modifier: {other}. Expected a valid update modifier or pipeline-style update specified as an array (not implemented by the pitr stand-in mongod)"
                    )))
                }
            }
        }
    }
    Ok(out)
}

fn arith(cur: Option<&Bson>, by: &Bson, add: bool) -> Result<Bson, UpdateError> {
    let zero = Bson::Int32(0);
    let cur = cur.unwrap_or(&zero);
    let f = |a: f64, b: f64| if add { a + b } else { a * b };
    Ok(match (cur, by) {
        (Bson::Int32(a), Bson::Int32(b)) => {
            let r = if add {
                a.checked_add(*b)
            } else {
                a.checked_mul(*b)
            };
            match r {
                Some(r) => Bson::Int32(r),
                None => Bson::Int64(if add {
                    *a as i64 + *b as i64
                } else {
                    *a as i64 * *b as i64
                }),
            }
        }
        (Bson::Int32(_) | Bson::Int64(_), Bson::Int32(_) | Bson::Int64(_)) => {
            let a = as_i64(cur);
            let b = as_i64(by);
            Bson::Int64(if add {
                a.wrapping_add(b)
            } else {
                a.wrapping_mul(b)
            })
        }
        (
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_),
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_),
        ) => Bson::Double(f(as_f64(cur), as_f64(by))),
        _ => {
            return Err(UpdateError {
                code: 14,
                code_name: "TypeMismatch",
                msg: "Cannot apply $inc to a value of non-numeric type".into(),
            })
        }
    })
}

fn as_i64(v: &Bson) -> i64 {
    match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(d) => *d as i64,
        _ => 0,
    }
}

fn as_f64(v: &Bson) -> f64 {
    match v {
        Bson::Int32(i) => *i as f64,
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        _ => 0.0,
    }
}

/// Set a dotted path, creating documents on the way (numeric components index arrays).
pub fn set_path(doc: &mut Document, path: &str, value: Bson) -> Result<(), UpdateError> {
    let parts: Vec<&str> = path.split('.').collect();
    set_in_doc(doc, &parts, value, path)
}

fn set_in_doc(
    doc: &mut Document,
    parts: &[&str],
    value: Bson,
    full: &str,
) -> Result<(), UpdateError> {
    if parts.len() == 1 {
        doc.insert(parts[0], value);
        return Ok(());
    }
    if !doc.contains_key(parts[0]) {
        doc.insert(parts[0], Document::new());
    }
    let child = doc.get_mut(parts[0]).expect("just inserted");
    set_in_value(child, &parts[1..], value, full)
}

fn set_in_value(v: &mut Bson, parts: &[&str], value: Bson, full: &str) -> Result<(), UpdateError> {
    match v {
        Bson::Document(d) => set_in_doc(d, parts, value, full),
        Bson::Array(a) => {
            let idx: usize = parts[0].parse().map_err(|_| UpdateError {
                code: 28,
                code_name: "PathNotViable",
                msg: format!("Cannot create field '{}' in element {{{full}}}", parts[0]),
            })?;
            while a.len() <= idx {
                a.push(Bson::Null);
            }
            if parts.len() == 1 {
                a[idx] = value;
                Ok(())
            } else {
                if !matches!(a[idx], Bson::Document(_) | Bson::Array(_)) {
                    a[idx] = Bson::Document(Document::new());
                }
                set_in_value(&mut a[idx], &parts[1..], value, full)
            }
        }
        _ => Err(UpdateError {
            code: 28,
            code_name: "PathNotViable",
            msg: format!("Cannot create field '{}' in element {{{full}}}", parts[0]),
        }),
    }
}

/// Remove a dotted path if present.
pub fn unset_path(doc: &mut Document, path: &str) {
    let parts: Vec<&str> = path.split('.').collect();
    unset_in_doc(doc, &parts);
}

fn unset_in_doc(doc: &mut Document, parts: &[&str]) {
    if parts.len() == 1 {
        doc.remove(parts[0]);
        return;
    }
    match doc.get_mut(parts[0]) {
        Some(Bson::Document(d)) => unset_in_doc(d, &parts[1..]),
        Some(Bson::Array(a)) => {
            if let Ok(i) = parts[1].parse::<usize>() {
                if parts.len() == 2 {
                    if i < a.len() {
                        a[i] = Bson::Null;
                    }
                } else if let Some(Bson::Document(d)) = a.get_mut(i) {
                    unset_in_doc(d, &parts[2..]);
                }
            }
        }
        _ => {}
    }
}

/// Apply the `o` of an oplog `u` entry: `$v:2` delta, modifier form or replacement.
pub fn apply_oplog_update(doc: &Document, o: &Document) -> Result<Document, UpdateError> {
    let version = o.get("$v").map(|v| match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(d) => *d as i64,
        _ => 0,
    });
    if version == Some(2) {
        let Some(Bson::Document(diff)) = o.get("diff") else {
            return Err(bad("$v:2 update without a 'diff' document"));
        };
        let mut out = doc.clone();
        apply_doc_diff(&mut out, diff)?;
        return Ok(out);
    }
    if is_modifier(o) {
        apply_modifiers(doc, o, false)
    } else {
        replace(doc, o)
    }
}

/// Apply a `$v:2` document diff: `d` deletes, `u` updates, `i` inserts, `s<field>`
/// recurses into a sub-document or (with `a:true`) an array.
pub fn apply_doc_diff(doc: &mut Document, diff: &Document) -> Result<(), UpdateError> {
    for (k, v) in diff {
        match k.as_str() {
            "d" => {
                if let Bson::Document(fields) = v {
                    for name in fields.keys() {
                        doc.remove(name);
                    }
                }
            }
            "u" => {
                if let Bson::Document(fields) = v {
                    for (name, val) in fields {
                        doc.insert(name.clone(), val.clone());
                    }
                }
            }
            "i" => {
                if let Bson::Document(fields) = v {
                    for (name, val) in fields {
                        doc.remove(name);
                        doc.insert(name.clone(), val.clone());
                    }
                }
            }
            s if s.starts_with('s') && s.len() > 1 => {
                let field = &s[1..];
                let Bson::Document(sub) = v else {
                    return Err(bad(format!("diff section {s} is not a document")));
                };
                let is_array = matches!(sub.get("a"), Some(Bson::Boolean(true)));
                if !doc.contains_key(field) {
                    doc.insert(
                        field,
                        if is_array {
                            Bson::Array(vec![])
                        } else {
                            Bson::Document(Document::new())
                        },
                    );
                }
                let target = doc.get_mut(field).expect("present");
                apply_sub_diff(target, sub, is_array)?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn apply_sub_diff(target: &mut Bson, sub: &Document, is_array: bool) -> Result<(), UpdateError> {
    if is_array {
        let Bson::Array(arr) = target else {
            return Err(bad("array diff applied to a non-array"));
        };
        if let Some(l) = sub.get("l") {
            let n = as_i64(l).max(0) as usize;
            arr.resize(n, Bson::Null);
        }
        for (k, v) in sub {
            if k == "a" || k == "l" {
                continue;
            }
            let (kind, idx) = k.split_at(1);
            let Ok(idx) = idx.parse::<usize>() else {
                continue;
            };
            while arr.len() <= idx {
                arr.push(Bson::Null);
            }
            match kind {
                "u" => arr[idx] = v.clone(),
                "s" => {
                    let Bson::Document(d) = v else {
                        return Err(bad("array sub-diff is not a document"));
                    };
                    let nested_array = matches!(d.get("a"), Some(Bson::Boolean(true)));
                    apply_sub_diff(&mut arr[idx], d, nested_array)?;
                }
                _ => {}
            }
        }
        Ok(())
    } else {
        match target {
            Bson::Document(d) => apply_doc_diff(d, sub),
            _ => {
                let mut d = Document::new();
                apply_doc_diff(&mut d, sub)?;
                *target = Bson::Document(d);
                Ok(())
            }
        }
    }
}

/// The equality fields of a filter, which seed an upserted document.
pub fn upsert_seed(filter: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in filter {
        if k == "$and" {
            if let Bson::Array(items) = v {
                for item in items {
                    if let Bson::Document(d) = item {
                        for (k2, v2) in upsert_seed(d) {
                            out.insert(k2, v2);
                        }
                    }
                }
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let value = match v {
            Bson::Document(d) if d.keys().next().is_some_and(|x| x.starts_with('$')) => {
                match d.get("$eq") {
                    Some(e) => e.clone(),
                    None => continue,
                }
            }
            other => other.clone(),
        };
        let _ = set_path(&mut out, k, value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn v2_diffs_apply() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 1, "x": 0}, "arr": [1, 2, 3]};
        let o = doc! {"$v": 2, "diff": {"d": {"a": false}, "u": {"z": 5}, "i": {"n": 1},
        "sb": {"u": {"c": 2}, "d": {"x": false}}, "sarr": {"a": true, "l": 2, "u1": 9}}};
        let r = apply_oplog_update(&d, &o).unwrap();
        assert_eq!(
            r,
            doc! {"_id": 1, "b": {"c": 2}, "arr": [1, 9], "z": 5, "n": 1}
        );
    }

    #[test]
    fn modifier_and_replacement_forms() {
        let d = doc! {"_id": 1, "a": 1};
        assert_eq!(
            apply_oplog_update(&d, &doc! {"$set": {"b.c": 2}, "$unset": {"a": 1}}).unwrap(),
            doc! {"_id": 1, "b": {"c": 2}}
        );
        assert_eq!(
            apply_oplog_update(&d, &doc! {"$v": 1, "$set": {"a": 3}}).unwrap(),
            doc! {"_id": 1, "a": 3}
        );
        assert_eq!(
            apply_oplog_update(&d, &doc! {"q": 1}).unwrap(),
            doc! {"_id": 1, "q": 1}
        );
        assert_eq!(
            apply_modifiers(&d, &doc! {"$inc": {"a": 2}}, false).unwrap(),
            doc! {"_id": 1, "a": 3}
        );
    }
}
