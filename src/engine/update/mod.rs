//! Applying an oplog `u` entry's update to a document, as a server's oplog
//! application does.
//!
//! [`classify`] decides what the entry's `o` is ([`UpdateKind`]: replacement, `$v:2`
//! delta, or `$v:1`/unversioned `$set`/`$unset`); [`apply`] writes the post-image of
//! an existing document, [`upsert`] the document an upsert creates when no document
//! has the entry's `_id`. Both write raw BSON into a caller-provided `Vec<u8>`,
//! appended at its current end; on error the vector is left as it was.
//!
//! After the update proper, every kind goes through the same steps as on the server:
//! a delta's post-image replaces the document keeping `_id` if it lost it
//! (`DeltaExecutor`), and the first `_id` is moved to the front
//! (`ensureIdFieldIsFirst`). A result larger than 16 MiB is refused with
//! `BSONObjectTooLarge` (10334; 17419 on servers before 5.x); whether a secondary
//! enforces that limit during oplog application is not determined.
//!
//! Not modelled (refused or documented): the storage validation of user writes
//! (`$`-prefixed names, DBRef shape, depth limits) which oplog application skips on
//! secondaries; operators other than `$set`/`$unset` (`modifier.rs`); the insert-only
//! shortcut of time-series buckets on secondaries
//! (`mustCheckExistenceForInsertOperations = false`), which applyOps never uses.

mod classify;
pub(crate) mod diff;
pub(crate) mod modifier;
mod replace;

use bson::RawDocument;

pub use classify::{classify, UpdateKind};

use super::compare::IdKey;
use super::error::Result;
use super::raw::{check_doc, MAX_USER_DOC};

/// The order in which a `$set`/`$unset` update's fields are applied (it decides the
/// order of the fields it creates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldOrder {
    /// Byte order of the field names: servers 3.6 to 4.4 (`std::map<std::string>`),
    /// so `a.10` is applied before `a.2`.
    Lexicographic,
    /// 5.0 and later (`pathsupport::cmpPathsAndArrayIndexes`): components that are
    /// both numbers without leading zeros compare as numbers, so `a.2` before `a.10`.
    #[default]
    NumericAware,
}

impl FieldOrder {
    /// The order a server of version `major.minor` applies.
    pub fn for_server(major: u32, _minor: u32) -> FieldOrder {
        if major >= 5 {
            FieldOrder::NumericAware
        } else {
            FieldOrder::Lexicographic
        }
    }
}

/// How to apply updates: the behaviours that differ between server versions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    pub field_order: FieldOrder,
}

/// Classifies `o` and applies it to `current`; see [`apply`].
pub fn apply_oplog_update(
    current: &RawDocument,
    o: &RawDocument,
    opts: ApplyOptions,
    out: &mut Vec<u8>,
) -> Result<()> {
    apply(current, classify(o)?, opts, out)
}

/// Writes the post-image of `current` under `update`, appended to `out`.
pub fn apply(
    current: &RawDocument,
    update: UpdateKind<'_>,
    opts: ApplyOptions,
    out: &mut Vec<u8>,
) -> Result<()> {
    let current = current.as_bytes();
    check_doc(current, "the current document")?;
    guarded(out, |out, start| {
        apply_at(current, update, opts, out, start)
    })
}

/// Writes the document an upsert creates when no document has `_id` `id`: the update
/// applied to the seed `{_id: id}` (`UpsertStage`: the query's equality fields, which
/// for an oplog entry's `{_id: o2._id}` are the `_id` alone), appended to `out`.
///
/// A replacement without `_id` keeps the seed's `_id` (the server's IDHACK path; the
/// canonical-query path would instead generate a new ObjectId, which cannot be
/// reproduced), a `$set` creates its paths, a diff's updates and inserts are
/// appended, and its sub-diffs find nothing to change.
pub fn upsert(
    id: &IdKey,
    update: UpdateKind<'_>,
    opts: ApplyOptions,
    out: &mut Vec<u8>,
) -> Result<()> {
    let seed = id.document_bytes();
    guarded(out, |out, start| apply_at(seed, update, opts, out, start))
}

/// Runs `f`, then checks the result's size; restores `out` on any error.
fn guarded(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>, usize) -> Result<()>) -> Result<()> {
    let start = out.len();
    let r = f(out, start).and_then(|()| {
        if out.len() - start > MAX_USER_DOC {
            Err(diff::too_large("the updated document grows"))
        } else {
            Ok(())
        }
    });
    if r.is_err() {
        out.truncate(start);
    }
    r
}

fn apply_at(
    current: &[u8],
    update: UpdateKind<'_>,
    opts: ApplyOptions,
    out: &mut Vec<u8>,
    start: usize,
) -> Result<()> {
    match update {
        UpdateKind::Replacement(r) => {
            let r = r.as_bytes();
            check_doc(r, "the replacement document")?;
            replace::replace(current, r, out)?;
        }
        UpdateKind::Delta(d) => {
            let d = d.as_bytes();
            check_doc(d, "the $v:2 diff")?;
            diff::apply_diff(current, d, out)?;
            if replace::id_is_first(&out[start..]) {
                return Ok(());
            }
            replace::keep_id_if_missing(current, out, start)?;
        }
        UpdateKind::Modifier(o) => {
            let o = o.as_bytes();
            check_doc(o, "the update")?;
            let tree = modifier::parse(o, opts.field_order)?;
            modifier::apply(current, &tree, out)?;
        }
    }
    if replace::id_is_first(&out[start..]) {
        return Ok(());
    }
    replace::ensure_id_first(out, start)
}
