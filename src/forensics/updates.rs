//! Recognising updates that destroy content (see the reference, "Updates").

use bson::{RawBsonRef, RawDocument};

use crate::oplog::entry::as_i64;

/// How deep into `$v:2` sub-diffs we look for a `d` (delete-fields) section.
const MAX_DIFF_DEPTH: usize = 6;

/// Why an update wipes content, or `None` when it does not.
pub fn wiping_reason(o: &RawDocument) -> Option<&'static str> {
    let mut first_key = None;
    let mut version = None;
    for el in o.iter_elements().flatten() {
        if first_key.is_none() {
            first_key = Some(el.key());
        }
        if el.key() == "$v" {
            version = el.value().ok().and_then(as_i64);
        }
    }
    match version {
        Some(2) => match o.get("diff") {
            Ok(Some(RawBsonRef::Document(diff))) if diff_deletes(diff, 0) => Some("$v:2 diff deletes fields"),
            _ => None,
        },
        _ => match first_key {
            Some(k) if k.starts_with('$') => {
                // Modifier form ($v:1 or none).
                matches!(o.get("$unset"), Ok(Some(_))).then_some("$unset")
            }
            // Replacement: the whole document is replaced by `o`.
            _ => {
                let fields = o.iter_elements().flatten().filter(|el| el.key() != "_id").count();
                (fields == 0).then_some("replacement leaves only _id")
            }
        },
    }
}

/// True when a document diff (or any sub-diff) has a `d` section.
fn diff_deletes(diff: &RawDocument, depth: usize) -> bool {
    if depth > MAX_DIFF_DEPTH {
        return false;
    }
    diff.iter_elements().flatten().any(|el| {
        let key = el.key();
        if key == "d" {
            return true;
        }
        if key.len() > 1 && key.starts_with('s') {
            if let Ok(RawBsonRef::Document(sub)) = el.value() {
                return diff_deletes(sub, depth + 1);
            }
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn classifies_update_shapes() {
        assert_eq!(wiping_reason(&rawdoc! { "_id": 1 }), Some("replacement leaves only _id"));
        assert_eq!(wiping_reason(&rawdoc! {}), Some("replacement leaves only _id"));
        assert_eq!(wiping_reason(&rawdoc! { "_id": 1, "name": "x" }), None);
        assert_eq!(wiping_reason(&rawdoc! { "$set": { "a": 1 } }), None);
        assert_eq!(wiping_reason(&rawdoc! { "$v": 1, "$unset": { "a": true } }), Some("$unset"));
        assert_eq!(wiping_reason(&rawdoc! { "$set": {"b": 1}, "$unset": { "a": true } }), Some("$unset"));
        assert_eq!(wiping_reason(&rawdoc! { "$v": 2, "diff": { "u": { "a": 1 } } }), None);
        assert_eq!(
            wiping_reason(&rawdoc! { "$v": 2i64, "diff": { "d": { "a": false } } }),
            Some("$v:2 diff deletes fields")
        );
        assert_eq!(
            wiping_reason(&rawdoc! { "$v": 2.0, "diff": { "sprofile": { "d": { "email": false } } } }),
            Some("$v:2 diff deletes fields")
        );
        // An array diff `a:true` with `l` is not treated as wiping by itself.
        assert_eq!(wiping_reason(&rawdoc! { "$v": 2, "diff": { "sitems": { "a": true, "l": 1 } } }), None);
    }
}
