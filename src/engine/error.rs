//! Why an update could not be applied.
//!
//! Three different situations, which the caller must treat differently:
//!
//! - [`UpdateError::Rejected`]: the server itself fails this update, with the error code
//!   it would return (for applyOps, mongorestore then aborts). The entry is malformed
//!   or impossible; replaying past it would diverge from what a real server holds.
//! - [`UpdateError::Unsupported`]: the server would do something pitr does not model
//!   (an operator primaries never log, behaviour that is nondeterministic on the
//!   server, an internal assertion). Refused rather than guessed.
//! - [`UpdateError::Malformed`]: the bytes are not valid BSON.
//!
//! Messages name the offending value in backticks; the caller adds the entry's `ts`
//! and namespace.

use crate::error::Hint;

/// Server error codes used by the update engine, with the server's names.
pub mod codes {
    /// `ErrorCodes::BadValue`.
    pub const BAD_VALUE: i32 = 2;
    /// `ErrorCodes::FailedToParse`.
    pub const FAILED_TO_PARSE: i32 = 9;
    /// `ErrorCodes::CannotBackfillArray` (`path_support.cpp` `maybePadTo`).
    pub const CANNOT_BACKFILL_ARRAY: i32 = 34;
    /// `ErrorCodes::ConflictingUpdateOperators`.
    pub const CONFLICTING_UPDATE_OPERATORS: i32 = 40;
    /// `ErrorCodes::EmptyFieldName`.
    pub const EMPTY_FIELD_NAME: i32 = 56;
    /// `BSONElement::embeddedObjectUserCheck`: "invalid parameter: expected an object".
    pub const EXPECTED_OBJECT: i32 = 10065;
    /// `ErrorCodes::BSONObjectTooLarge` (servers before 5.x used 17419 for the same check).
    pub const BSON_OBJECT_TOO_LARGE: i32 = 10334;
    /// `BufBuilder::grow_reallocate`: a document being built grew past 64 MB.
    pub const BUFFER_PAST_64MB: i32 = 13548;
    /// `doc_diff`: the same field named twice in one diff level.
    pub const DIFF_DUPLICATE_FIELD: i32 = 4728000;
    /// `doc_diff`: empty diff.
    pub const DIFF_EMPTY: i32 = 4770500;
    /// `doc_diff`: array sub-diff `s<idx>` is not an object.
    pub const DIFF_ARRAY_SUBDIFF_NOT_OBJECT: i32 = 4770501;
    /// `doc_diff`: array diff entry neither `u<idx>` nor `s<idx>`.
    pub const DIFF_ARRAY_BAD_PREFIX: i32 = 4770502;
    /// `doc_diff`: unknown, repeated or out-of-order section.
    pub const DIFF_UNEXPECTED_SECTION: i32 = 4770503;
    /// `doc_diff`: empty section name.
    pub const DIFF_EMPTY_SECTION_NAME: i32 = 4770505;
    /// `doc_diff`: a section (or `l`) of the wrong BSON type.
    pub const DIFF_SECTION_WRONG_TYPE: i32 = 4770507;
    /// `doc_diff`: array index is not an unsigned integer.
    pub const DIFF_ARRAY_BAD_INDEX: i32 = 4770512;
    /// `doc_diff`: a non-`s` field after the sub-diffs started.
    pub const DIFF_FIELD_AFTER_SUBDIFFS: i32 = 4770514;
    /// `doc_diff`: array header `a` is not a boolean.
    pub const DIFF_ARRAY_HEADER_NOT_BOOL: i32 = 4770519;
    /// `doc_diff`: array header `a` is false.
    pub const DIFF_ARRAY_HEADER_FALSE: i32 = 4770520;
    /// `doc_diff`: array entry name shorter than two characters.
    pub const DIFF_ARRAY_NAME_TOO_SHORT: i32 = 4770521;
    /// `doc_diff`: sub-diff `s<field>` is not an object.
    pub const DIFF_SUBDIFF_NOT_OBJECT: i32 = 470510;
    /// `doc_diff`: binary diff `d` is not BinData (newest servers only).
    pub const DIFF_BINARY_DATA_NOT_BINDATA: i32 = 12262900;
    /// `doc_diff`: binary diff offset `o` negative (newest servers only).
    pub const DIFF_BINARY_NEGATIVE_OFFSET: i32 = 12262901;
    /// `doc_diff`: array modification beyond the new length `l` (newest servers; older
    /// servers failed an invariant).
    pub const DIFF_INDEX_BEYOND_RESIZE: i32 = 12495901;
    /// `UpdateModification::parseFromOplogEntry`: neither `_id` nor a usable `$v`.
    pub const OPLOG_UPDATE_BAD_VERSION: i32 = 4772600;
    /// `UpdateModification::parseFromOplogEntry`: `$v:2` without an object `diff`.
    pub const OPLOG_UPDATE_DIFF_NOT_OBJECT: i32 = 4772601;
    /// `UpdateModification::parseFromOplogEntry` (4.7–5.x): unknown `$v` value.
    pub const OPLOG_UPDATE_UNKNOWN_VERSION: i32 = 4772604;
}

/// Why an update could not be applied; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// The server fails this update with `code`.
    #[error("{message} (the server fails this update with error code {code})")]
    Rejected { code: i32, message: String },
    /// The server would do something pitr does not reproduce.
    #[error("{message}")]
    Unsupported { message: String },
    /// Not valid BSON.
    #[error("malformed BSON in {what}: {detail}")]
    Malformed { what: &'static str, detail: String },
}

impl UpdateError {
    pub(crate) fn rejected(code: i32, message: impl Into<String>) -> UpdateError {
        UpdateError::Rejected {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> UpdateError {
        UpdateError::Unsupported {
            message: message.into(),
        }
    }

    pub(crate) fn malformed(what: &'static str, detail: impl Into<String>) -> UpdateError {
        UpdateError::Malformed {
            what,
            detail: detail.into(),
        }
    }

    /// The server's error code, when the server rejects the update too.
    pub fn code(&self) -> Option<i32> {
        match self {
            UpdateError::Rejected { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl Hint for UpdateError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            UpdateError::Rejected { .. } => {
                "a real server fails this oplog entry too (mongorestore would abort here); \
                 stop the replay before this entry or inspect it with `bsondump`"
                    .into()
            }
            UpdateError::Unsupported { .. } => {
                "pitr cannot reproduce this entry byte for byte; replay through a real \
                 mongod (`pitr replay` with mongorestore) for this range"
                    .into()
            }
            UpdateError::Malformed { .. } => {
                "the oplog or backup is corrupt at this entry; check the source file".into()
            }
        })
    }
}

/// Shorthand used throughout the engine.
pub type Result<T> = std::result::Result<T, UpdateError>;

/// Field names and other BSON bytes are shown lossily: they need not be UTF-8.
pub(crate) fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
