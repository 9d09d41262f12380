//! Where two versions of a document differ: the field paths, found by walking the raw
//! BSON of both. Documents are first compared byte for byte (the rehearsal's
//! question is "would a restore give production exactly this?"); this runs only on
//! documents whose bytes differ, to say where.
//!
//! Values are the same only when their BSON is the same: `1` (int32), `1` (int64) and
//! `1.0` differ, and so do `0.0` and `-0.0` (a restore that changed a number's type
//! changed the document). Paths are dotted, array elements by index (`items.3.qty`).
//! Bytes that differ while every field holds the same value mean the fields are in
//! another order: the path is then the document holding them, with `(field order)`.

use bson::{RawBsonRef, RawDocument};

/// At most this many paths per document (a document rewritten wholesale would list
/// every field).
pub const MAX_PATHS: usize = 20;

/// The field paths where `a` and `b` differ (empty when their bytes are equal).
pub fn differing_paths(a: &RawDocument, b: &RawDocument) -> Vec<String> {
    let mut out = Vec::new();
    if a.as_bytes() != b.as_bytes() {
        walk_doc(a, b, "", &mut out);
        if out.is_empty() {
            out.push("(field order)".to_string());
        }
    }
    out.truncate(MAX_PATHS);
    out
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn fields(d: &RawDocument) -> Vec<(&str, Option<RawBsonRef<'_>>)> {
    d.iter()
        .map(|r| match r {
            Ok((k, v)) => (k, Some(v)),
            // Malformed from here on: compared as bytes by the caller's check.
            Err(_) => ("(malformed)", None),
        })
        .collect()
}

fn walk_doc(a: &RawDocument, b: &RawDocument, prefix: &str, out: &mut Vec<String>) {
    if out.len() >= MAX_PATHS {
        return;
    }
    let fa = fields(a);
    let fb = fields(b);
    for (k, va) in &fa {
        let vb = fb.iter().find(|(kb, _)| kb == k).and_then(|(_, v)| *v);
        match (va, vb) {
            (Some(va), Some(vb)) => walk_value(*va, vb, &join(prefix, k), out),
            _ => out.push(join(prefix, k)),
        }
        if out.len() >= MAX_PATHS {
            return;
        }
    }
    for (k, _) in &fb {
        if !fa.iter().any(|(ka, _)| ka == k) {
            out.push(join(prefix, k));
        }
    }
    let order_a: Vec<&str> = fa.iter().map(|(k, _)| *k).collect();
    let order_b: Vec<&str> = fb.iter().map(|(k, _)| *k).collect();
    if out.is_empty() && order_a != order_b && a.as_bytes() != b.as_bytes() {
        out.push(if prefix.is_empty() {
            "(field order)".to_string()
        } else {
            format!("{prefix} (field order)")
        });
    }
}

fn walk_value(a: RawBsonRef<'_>, b: RawBsonRef<'_>, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (RawBsonRef::Document(x), RawBsonRef::Document(y)) => {
            if x.as_bytes() == y.as_bytes() {
                return;
            }
            let before = out.len();
            walk_doc(x, y, path, out);
            if out.len() == before {
                out.push(path.to_string());
            }
        }
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => {
            if x.as_bytes() == y.as_bytes() {
                return;
            }
            let before = out.len();
            let (dx, dy) = (
                RawDocument::from_bytes(x.as_bytes()),
                RawDocument::from_bytes(y.as_bytes()),
            );
            if let (Ok(dx), Ok(dy)) = (dx, dy) {
                walk_doc(dx, dy, path, out);
            }
            if out.len() == before {
                out.push(path.to_string());
            }
        }
        (x, y) if !same_scalar(x, y) => out.push(path.to_string()),
        _ => {}
    }
}

/// Same BSON type and the same value bytes.
fn same_scalar(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    match (a, b) {
        (RawBsonRef::Double(x), RawBsonRef::Double(y)) => x.to_bits() == y.to_bits(),
        (RawBsonRef::Document(_), _) | (RawBsonRef::Array(_), _) => false,
        (x, y) => x.element_type() == y.element_type() && x == y,
    }
}

/// The value at `path` in `doc`, as relaxed extended JSON (cut to `max` characters),
/// or `(absent)`.
pub fn value_at(doc: &RawDocument, path: &str, max: usize) -> String {
    let path = path.trim_end_matches(" (field order)");
    if path == "(field order)" {
        return shown(RawBsonRef::Document(doc), max);
    }
    let mut cur = RawBsonRef::Document(doc);
    for part in path.split('.') {
        let next = match cur {
            RawBsonRef::Document(d) => d.get(part).ok().flatten(),
            RawBsonRef::Array(a) => part
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get(i).ok().flatten()),
            _ => None,
        };
        match next {
            Some(v) => cur = v,
            None => return "(absent)".to_string(),
        }
    }
    shown(cur, max)
}

/// A value as relaxed extended JSON, cut to `max` characters.
pub fn shown(v: RawBsonRef<'_>, max: usize) -> String {
    let text = match bson::Bson::try_from(v) {
        Ok(b) => b.into_relaxed_extjson().to_string(),
        Err(e) => format!("(unreadable: {e})"),
    };
    if text.chars().count() > max {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).unwrap()
    }

    #[test]
    fn equal_bytes_have_no_paths() {
        let a = raw(doc! {"_id": 1, "a": {"b": [1, 2]}});
        assert!(differing_paths(&a, &a.clone()).is_empty());
    }

    #[test]
    fn nested_fields_and_array_elements_are_named() {
        let a = raw(doc! {"_id": 1, "a": {"b": [1, 2, 3]}, "c": "x", "gone": true});
        let b = raw(doc! {"_id": 1, "a": {"b": [1, 5, 3]}, "c": "y", "new": 1});
        assert_eq!(differing_paths(&a, &b), vec!["a.b.1", "c", "gone", "new"]);
        assert_eq!(value_at(&a, "a.b.1", 50), "2");
        assert_eq!(value_at(&b, "c", 50), "\"y\"");
        assert_eq!(value_at(&a, "new", 50), "(absent)");
    }

    #[test]
    fn number_types_and_negative_zero_are_differences() {
        let a = raw(doc! {"_id": 1, "n": 1i32, "z": 0.0});
        let b = raw(doc! {"_id": 1, "n": 1i64, "z": -0.0});
        assert_eq!(differing_paths(&a, &b), vec!["n", "z"]);
        let c = raw(doc! {"_id": 1, "n": 1.0, "z": 0.0});
        assert_eq!(differing_paths(&a, &c), vec!["n"]);
    }

    #[test]
    fn field_order_is_a_difference_of_its_own() {
        let a = raw(doc! {"_id": 1, "a": 1, "b": 2});
        let b = raw(doc! {"_id": 1, "b": 2, "a": 1});
        assert_eq!(differing_paths(&a, &b), vec!["(field order)"]);
        let a = raw(doc! {"_id": 1, "s": {"a": 1, "b": 2}});
        let b = raw(doc! {"_id": 1, "s": {"b": 2, "a": 1}});
        assert_eq!(differing_paths(&a, &b), vec!["s (field order)"]);
    }

    #[test]
    fn long_values_are_cut() {
        let a = raw(doc! {"s": "x".repeat(100)});
        assert_eq!(value_at(&a, "s", 10).chars().count(), 11);
    }
}
