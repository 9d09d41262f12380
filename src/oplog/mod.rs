//! Reading oplog dumps: BSON streams from files, `.gz` files, mongodump directories
//! and stdin, viewed as typed zero-copy [`Entry`] values; oplog archive directories
//! ([`oplog_archive`], written by `pitr archive`) read as one oplog.

pub mod elements;
pub mod entry;
pub mod error;
pub mod oplog_archive;
pub mod reader;
pub mod source;
pub mod spool;
pub mod timestamp;
pub mod ts_json;

pub use entry::{Entry, EntryError, Op};
pub use error::{ReadError, Truncation};
pub use reader::{OplogReader, ReadOptions, MAX_ENTRY_BYTES};
pub use source::{open, open_range, Compression};
pub use timestamp::Ts;
