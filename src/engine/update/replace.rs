//! Replacement semantics and the `_id`-first rule, shared by every update kind.
//!
//! `ObjectReplaceExecutor::applyReplacementUpdate` (`object_replace_executor.cpp`):
//! every field of the current document is removed except `_id` when the replacement
//! has none (every field named `_id` is kept, in order), then the replacement's
//! fields are appended in its order. A `$v:2` delta's post-image goes through the
//! same function (`DeltaExecutor::applyUpdate`), so a diff that drops `_id` keeps it.
//! From the oplog, zero timestamps stay zero (`update_driver.cpp`:
//! `bypassEmptyTsReplacement || _fromOplogApplication`) and immutable-field checks do
//! not apply (they are for user writes).
//!
//! `update::ensureIdFieldIsFirst` (`update_stage.cpp`, `produce_document_for_upsert.cpp`)
//! then moves the first `_id` field to the front.

use super::super::error::{Result, UpdateError};
use super::super::raw::{begin_doc, end_doc, fields, find_field};

/// Writes `ObjectReplaceExecutor::applyReplacementUpdate(current, replacement)` to
/// `out` (without moving `_id`).
pub(crate) fn replace(current: &[u8], replacement: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let keeps_id = find_field(replacement, b"_id")?.is_none();
    let start = begin_doc(out);
    if keeps_id {
        for f in fields(current) {
            let f = f?;
            if f.name == b"_id" {
                out.extend_from_slice(f.whole);
            }
        }
    }
    out.extend_from_slice(&replacement[4..replacement.len() - 1]);
    end_doc(out, start);
    Ok(())
}

/// After a delta: the post-image at `out[start..]` replaces `current`; when it lacks
/// `_id`, `current`'s `_id` is kept in front of it.
pub(crate) fn keep_id_if_missing(current: &[u8], out: &mut Vec<u8>, start: usize) -> Result<()> {
    if find_field(&out[start..], b"_id")?.is_some() {
        return Ok(());
    }
    let end = out.len();
    let fixed = begin_doc(out);
    for f in fields(current) {
        let f = f?;
        if f.name == b"_id" {
            out.extend_from_slice(f.whole);
        }
    }
    out.extend_from_within(start + 4..end - 1);
    end_doc(out, fixed);
    out.copy_within(fixed.., start);
    out.truncate(start + (out.len() - fixed));
    Ok(())
}

/// Whether the document's first field is `_id` (the common case, which needs no
/// further work).
#[inline]
pub(crate) fn id_is_first(doc: &[u8]) -> bool {
    doc.get(5..9) == Some(b"_id\0")
}

/// `ensureIdFieldIsFirst` on the document at `out[start..]`: moves its first `_id`
/// field to the front. A document left without `_id` is refused: the server would
/// generate a new ObjectId (nondeterministic) or, for a capped collection, store it
/// without one.
pub(crate) fn ensure_id_first(out: &mut [u8], start: usize) -> Result<()> {
    let doc = &out[start..];
    let mut first = true;
    for f in fields(doc) {
        let f = f?;
        if f.name == b"_id" {
            if first {
                return Ok(());
            }
            let at = f.whole.as_ptr() as usize - doc.as_ptr() as usize;
            let len = f.whole.len();
            let (from, to) = (start + 4, start + at + len);
            out[from..to].rotate_right(len);
            return Ok(());
        }
        first = false;
    }
    Err(UpdateError::unsupported(
        "the update leaves the document without `_id`; the server would generate a new \
         ObjectId (or, for a capped collection, keep none)",
    ))
}
