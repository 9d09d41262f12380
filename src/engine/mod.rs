//! pitr's embedded replay engine: the document-level semantics of a MongoDB server
//! applying oplog entries, reproduced byte for byte on raw BSON.
//!
//! - [`compare`]: the server's order of BSON values and documents (`woCompare`),
//!   the order of the `_id` index and so of `dbHash`, and [`IdKey`], an owned `_id`
//!   usable as a map key whose equality is `_id` equality.
//! - [`update`]: what an oplog `u` entry's `o` is ([`update::classify`]) and the
//!   post-image it produces ([`update::apply`], [`update::upsert`]): replacements,
//!   `$v:2` deltas, and the `$v:1`/unversioned `$set`/`$unset` updates of older
//!   oplogs.
//!
//! Every rule is ported from the server source (mongodb/mongo, cited per module) and
//! tested on the server's own unit-test cases. Server versions modelled: the update
//! semantics of 3.6 through 8.x (the "UpdateNode" system), with the behaviours that
//! differ between versions chosen by [`update::ApplyOptions`] or documented where
//! they are. Refused with [`UpdateError::Unsupported`] rather than guessed: update
//! operators other than `$set`/`$unset`, `$[]` paths, updates that leave a document
//! without `_id`, and the few inputs on which the server fails an internal
//! assertion.
//!
//! Documents are never decoded into `bson::Document`: the appliers walk the
//! pre-image's elements, copy untouched elements whole, and write the new document
//! into a caller-provided `Vec<u8>`.

pub mod compare;
pub mod error;
pub(crate) mod raw;
pub mod update;

#[cfg(test)]
mod tests;

pub use compare::{compare_documents, compare_values, IdKey, IdKeyError};
pub use error::UpdateError;
pub use update::{
    apply, apply_oplog_update, classify, upsert, ApplyOptions, FieldOrder, UpdateKind,
};
