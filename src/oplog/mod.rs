//! Reading oplog dumps: BSON streams from files, `.gz` files, mongodump directories
//! and stdin, viewed as typed zero-copy [`Entry`] values.

pub mod elements;
pub mod entry;
pub mod error;
pub mod gzip;
pub mod reader;
pub mod sniff;
pub mod source;
pub mod timestamp;

pub use entry::{Entry, EntryError, Op};
pub use error::{ReadError, Truncation};
pub use reader::{OplogReader, ReadOptions, MAX_ENTRY_BYTES};
pub use source::{open, Compression};
pub use timestamp::Ts;
