//! Everything that talks to a live MongoDB server through the official driver, and
//! only ever reads from it.
//!
//! - [`connect`]: the connection string (redacted in every message), default read
//!   preference `secondaryPreferred`, and the topology checks (a `mongos` or a
//!   standalone without an oplog is refused).
//! - [`readonly`]: [`readonly::ReadOnlyClient`], the one door to the server. It can
//!   `find` on `local.oplog.rs` and run a fixed list of read-only commands; there is
//!   no write helper anywhere in this module, and no way to send anything else.
//! - [`oplog_source`]: streaming the oplog with `ts` bounds, retries with backoff for
//!   transient errors, and rollover detection.
//! - [`dump`]: `dump-oplog`: the plan, atomic completion and `--resume`;
//!   [`dump_file`]: the file itself (plain or gzip members) and reading a partial one back.
//! - [`status`]: version, topology, oplog window and size.
//! - [`archiver`]: `pitr archive`, following the oplog into an oplog archive.
//! - [`cluster`]: `pitr cluster discover`, a sharded cluster's members read through
//!   its mongos, and each member's own connection string.
//!
//! The code here is async; the CLI starts a Tokio runtime for the commands that
//! need one ([`block_on`]).

pub mod archiver;
pub mod cluster;
pub mod connect;
pub mod dump;
pub mod dump_file;
pub mod error;
pub mod oplog_source;
pub mod readonly;
pub mod status;

pub use connect::{connect, redact_uri, Target, Topology};
pub use error::{DriverError, MongoError};
pub use readonly::ReadOnlyClient;

/// Runs a blocking storage call from async code without stalling the other tasks
/// of its runtime (see [`crate::storage`]: its calls block, and an object reader's
/// `read` refuses to run on a runtime thread at all): the archiver's, and the oplog
/// dump's upload.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Runs `fut` on a new multi-threaded Tokio runtime: the one runtime of a command
/// that talks to a server.
pub fn block_on<F: std::future::Future>(fut: F) -> std::io::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("pitr-mongo")
        .build()?;
    Ok(rt.block_on(fut))
}
