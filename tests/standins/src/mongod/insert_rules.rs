//! What the server does to a document on the `insert` command's path before storing
//! it, ported from `fixDocumentForInsert` (`src/mongo/db/ops/insert.cpp`, the
//! version with `bypassEmptyTsReplacement`):
//!
//! - `_id` must not be a regex, `undefined` or an array (BadValue);
//! - `_id` is moved to the first position, and an ObjectId is generated when missing;
//! - every **top-level** `Timestamp(0, 0)` is replaced by the next cluster time,
//!   unless the command says `bypassEmptyTsReplacement: true` (SERVER-88750), which
//!   mongorestore 100.12+ sends to servers that know it;
//! - the other fields keep their order, types and values.
//!
//! Oplog application (applyOps) does not come through here: it stores `o` as logged.

use super::state::CmdError;
use bson::{Bson, Document, Timestamp};

/// `BSONObjMaxUserSize`.
pub const MAX_USER_SIZE: usize = 16 * 1024 * 1024;

/// Check and rewrite one document for insertion; `next_ts` is called once per empty
/// timestamp to replace.
pub fn fix_document_for_insert(
    doc: Document,
    bypass_empty_ts: bool,
    next_ts: &mut dyn FnMut() -> Timestamp,
) -> Result<Document, CmdError> {
    let size = bson::to_vec(&doc).map(|v| v.len()).unwrap_or(0);
    if size > MAX_USER_SIZE {
        return Err(CmdError::new(
            10334,
            "BSONObjectTooLarge",
            format!("object to insert too large. size in bytes: {size}, max size: {MAX_USER_SIZE}"),
        ));
    }
    if let Some(id) = doc.get("_id") {
        let what = match id {
            Bson::RegularExpression(_) => Some("a regex"),
            Bson::Undefined => Some("a undefined"),
            Bson::Array(_) => Some("an array"),
            _ => None,
        };
        if let Some(what) = what {
            return Err(CmdError::bad_value(format!("can't use {what} for _id")));
        }
    }
    let id_first = doc.keys().next().is_some_and(|k| k == "_id");
    let empty_ts = |v: &Bson| matches!(v, Bson::Timestamp(t) if t.time == 0 && t.increment == 0);
    let has_ts_to_fix = !bypass_empty_ts && doc.values().any(empty_ts);
    if id_first && !has_ts_to_fix {
        return Ok(doc);
    }
    let mut out = Document::new();
    match doc.get("_id") {
        Some(id) => out.insert("_id", id.clone()),
        None => out.insert("_id", bson::oid::ObjectId::new()),
    };
    for (k, v) in doc {
        if k == "_id" {
            continue;
        }
        if !bypass_empty_ts && empty_ts(&v) {
            out.insert(k, Bson::Timestamp(next_ts()));
        } else {
            out.insert(k, v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn ts(t: u32, i: u32) -> Timestamp {
        Timestamp {
            time: t,
            increment: i,
        }
    }

    fn fix(d: Document, bypass: bool) -> Result<Document, CmdError> {
        let mut n = 0;
        fix_document_for_insert(d, bypass, &mut || {
            n += 1;
            ts(100, n)
        })
    }

    #[test]
    fn id_moves_first_and_is_generated() {
        let d = fix(doc! {"a": 1i64, "_id": 2.5, "b": "x"}, false).unwrap();
        assert_eq!(d, doc! {"_id": 2.5, "a": 1i64, "b": "x"});
        assert_eq!(d.keys().collect::<Vec<_>>(), ["_id", "a", "b"]);
        let d = fix(doc! {"a": 1}, false).unwrap();
        assert!(matches!(d.get("_id"), Some(Bson::ObjectId(_))));
        assert_eq!(d.keys().collect::<Vec<_>>(), ["_id", "a"]);
    }

    #[test]
    fn empty_top_level_timestamps_are_replaced_unless_bypassed() {
        let d = doc! {"_id": 1, "t": ts(0, 0), "sub": {"t": ts(0, 0)}, "u": ts(5, 1)};
        let fixed = fix(d.clone(), false).unwrap();
        assert_eq!(
            fixed,
            doc! {"_id": 1, "t": ts(100, 1), "sub": {"t": ts(0, 0)}, "u": ts(5, 1)}
        );
        assert_eq!(fix(d.clone(), true).unwrap(), d);
    }

    #[test]
    fn bad_ids_are_refused() {
        for (id, msg) in [
            (Bson::Array(vec![]), "can't use an array for _id"),
            (Bson::Undefined, "can't use a undefined for _id"),
            (
                Bson::RegularExpression(bson::Regex {
                    pattern: "a".into(),
                    options: String::new(),
                }),
                "can't use a regex for _id",
            ),
        ] {
            let e = fix(doc! {"_id": id}, false).unwrap_err();
            assert_eq!((e.code, e.msg.as_str()), (2, msg));
        }
    }
}
