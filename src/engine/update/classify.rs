//! Deciding what kind of update an oplog `u` entry's `o` field is.
//!
//! Servers changed this over time, and an offline tool must accept what every
//! version it models logged:
//!
//! - 5.x+ (`write_ops::UpdateModification::parseFromOplogEntry`, `ops/write_ops.cpp`
//!   and later `query/write_ops/write_ops.cpp`): `o` containing `_id` is a
//!   **replacement**, checked first because a replacement may hold a user field
//!   named `$v`; otherwise `$v` must be 2 (4772600) and `diff` an object (4772601).
//! - 4.7–5.x (`ops/write_ops_parsers.cpp`): `$v` missing, 1 or 2 (a non-integer `$v`
//!   is 4772600, another number 4772604); `$v:2` is a delta; `$v:1` or no `$v` is a
//!   "classic" update, a replacement when the first field name does not start with
//!   `$` (`isClassicalUpdateReplacement`), modifiers (`$set`, `$unset`) otherwise.
//!   Primaries logged `$v:1` modifier updates until 5.1 (`update_oplog_entry_version.h`),
//!   and servers before 3.6 logged them without `$v`.
//!
//! [`classify`] is the union: `_id` first, then `$v`, then the first field name.
//! `$v` may be an int32, an int64 or an integral double (`numberInt()` at 5.x+);
//! anything else is refused with the server's code.

use bson::RawDocument;

use super::super::error::{codes, Result, UpdateError};
use super::super::raw::{self, fields, read_f64, read_i32, read_i64};

/// The kinds of update an oplog `u` entry carries.
#[derive(Clone, Copy, Debug)]
pub enum UpdateKind<'a> {
    /// The whole new document (`_id` kept when absent).
    Replacement(&'a RawDocument),
    /// A `$v:2` delta: the `diff` object.
    Delta(&'a RawDocument),
    /// A `$v:1` (or unversioned) modifier update: the whole `o`, with `$set` and
    /// `$unset` (and possibly `$v`) fields.
    Modifier(&'a RawDocument),
}

/// Classifies an oplog `u` entry's `o` field; see the module documentation.
pub fn classify(o: &RawDocument) -> Result<UpdateKind<'_>> {
    let bytes = o.as_bytes();
    let mut version = None;
    let mut diff = None;
    let mut first_name: Option<&[u8]> = None;
    for f in fields(bytes) {
        let f = f?;
        if first_name.is_none() {
            first_name = Some(f.name);
        }
        match f.name {
            b"_id" => return Ok(UpdateKind::Replacement(o)),
            b"$v" if version.is_none() => version = Some((f.kind, f.value)),
            b"diff" if diff.is_none() => diff = Some((f.kind, f.value)),
            _ => {}
        }
    }
    match version {
        None => Ok(classic(o, first_name)),
        Some((kind, value)) => match version_number(kind, value) {
            None => Err(UpdateError::rejected(
                codes::OPLOG_UPDATE_BAD_VERSION,
                format!(
                    "the update has no `_id` and its `$v` is not an integer (BSON type {kind:#04x})"
                ),
            )),
            Some(2) => match diff {
                Some((raw::T_OBJECT, d)) => Ok(UpdateKind::Delta(
                    RawDocument::from_bytes(d)
                        .map_err(|e| UpdateError::malformed("the `diff` field", e.to_string()))?,
                )),
                other => Err(UpdateError::rejected(
                    codes::OPLOG_UPDATE_DIFF_NOT_OBJECT,
                    format!(
                        "the `$v:2` update's `diff` field is {}, not an object",
                        match other {
                            None => "missing".to_string(),
                            Some((k, _)) => format!("of BSON type {k:#04x}"),
                        }
                    ),
                )),
            },
            Some(1) => Ok(classic(o, first_name)),
            Some(n) => Err(UpdateError::rejected(
                codes::OPLOG_UPDATE_UNKNOWN_VERSION,
                format!("unrecognized update version `$v: {n}`"),
            )),
        },
    }
}

/// `isClassicalUpdateReplacement`: an empty `o`, or one whose first field name does
/// not start with `$`, is a replacement.
fn classic<'a>(o: &'a RawDocument, first_name: Option<&[u8]>) -> UpdateKind<'a> {
    match first_name {
        Some(n) if n.first() == Some(&b'$') => UpdateKind::Modifier(o),
        _ => UpdateKind::Replacement(o),
    }
}

/// The value of `$v`, for the types the parsers accept.
fn version_number(kind: u8, value: &[u8]) -> Option<i64> {
    match kind {
        raw::T_INT32 => read_i32(value).map(i64::from),
        raw::T_INT64 => read_i64(value),
        raw::T_DOUBLE => {
            let d = read_f64(value)?;
            // `numberInt()` truncates; only integral values are taken at face value
            // (a fractional `$v` never appears in a real oplog).
            (d.fract() == 0.0 && d.abs() < 1e9).then_some(d as i64)
        }
        _ => None,
    }
}
