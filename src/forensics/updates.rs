//! Recognising updates that destroy content (see the reference, "Updates").

use bson::RawDocument;

use crate::oplog::elements::{i64_value, Elements};

/// How deep into `$v:2` sub-diffs we look for a `d` (delete-fields) section.
const MAX_DIFF_DEPTH: usize = 6;

/// Why an update wipes content, or `None` when it does not.
///
/// Walks `o` with the raw element walker (this runs for every update in the oplog).
pub fn wiping_reason(o: &RawDocument) -> Option<&'static str> {
    let mut first_key: Option<&[u8]> = None;
    let mut version = None;
    let mut diff = None;
    let mut unset = false;
    let mut fields_besides_id = 0usize;
    for el in Elements::new(o.as_bytes()) {
        let Ok(el) = el else { return None };
        if first_key.is_none() {
            first_key = Some(el.key);
        }
        match el.key {
            b"$v" => version = i64_value(el.kind, el.value),
            b"diff" if el.kind == 0x03 => diff = Some(el.value),
            b"$unset" => unset = true,
            b"_id" => {}
            _ => fields_besides_id += 1,
        }
    }
    match version {
        Some(2) => diff
            .filter(|d| diff_deletes(d))
            .map(|_| "$v:2 diff deletes fields"),
        _ => match first_key {
            // Modifier form ($v:1 or none).
            Some(k) if k.first() == Some(&b'$') => unset.then_some("$unset"),
            // Replacement: the whole document is replaced by `o`.
            _ => (fields_besides_id == 0).then_some("replacement leaves only _id"),
        },
    }
}

/// True when a document diff (or any sub-diff) has a `d` section (the bytes of a
/// framed document; the walk stops at malformed bytes, as it always has).
pub fn diff_deletes(diff: &[u8]) -> bool {
    diff_deletes_at(diff, 0)
}

fn diff_deletes_at(diff: &[u8], depth: usize) -> bool {
    if depth > MAX_DIFF_DEPTH {
        return false;
    }
    Elements::new(diff).flatten().any(|el| match el.key {
        b"d" => true,
        [b's', _, ..] if el.kind == 0x03 => diff_deletes_at(el.value, depth + 1),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn classifies_update_shapes() {
        assert_eq!(
            wiping_reason(&rawdoc! { "_id": 1 }),
            Some("replacement leaves only _id")
        );
        assert_eq!(
            wiping_reason(&rawdoc! {}),
            Some("replacement leaves only _id")
        );
        assert_eq!(wiping_reason(&rawdoc! { "_id": 1, "name": "x" }), None);
        assert_eq!(wiping_reason(&rawdoc! { "$set": { "a": 1 } }), None);
        assert_eq!(
            wiping_reason(&rawdoc! { "$v": 1, "$unset": { "a": true } }),
            Some("$unset")
        );
        assert_eq!(
            wiping_reason(&rawdoc! { "$set": {"b": 1}, "$unset": { "a": true } }),
            Some("$unset")
        );
        assert_eq!(
            wiping_reason(&rawdoc! { "$v": 2, "diff": { "u": { "a": 1 } } }),
            None
        );
        assert_eq!(
            wiping_reason(&rawdoc! { "$v": 2i64, "diff": { "d": { "a": false } } }),
            Some("$v:2 diff deletes fields")
        );
        assert_eq!(
            wiping_reason(
                &rawdoc! { "$v": 2.0, "diff": { "sprofile": { "d": { "email": false } } } }
            ),
            Some("$v:2 diff deletes fields")
        );
        // An array diff `a:true` with `l` is not treated as wiping by itself.
        assert_eq!(
            wiping_reason(&rawdoc! { "$v": 2, "diff": { "sitems": { "a": true, "l": 1 } } }),
            None
        );
    }
}
