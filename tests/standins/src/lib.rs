//! Stand-ins for `mongod`, `mongorestore` and `mongodump`, built only for pitr's tests.
//!
//! No package registry reachable from this project ships the MongoDB binaries, so the
//! orchestration and driver code of pitr is exercised against these instead. Each
//! stand-in enforces the real tool's argument contract, does the real work on a small
//! scale (an in-memory server speaking the wire protocol; a restore and a dump done
//! through the official driver), and fails, hangs or crashes on demand through
//! `PITR_STANDIN_*` environment knobs. `README.md` beside `Cargo.toml` lists what is
//! implemented, what deliberately is not, and every knob.
//!
//! The binaries in `src/bin/` are thin: each calls one `main` here.

pub mod bsonfile;
pub mod faults;
pub mod logline;
pub mod matcher;
pub mod mongod;
pub mod record;
pub mod tools;
pub mod update;

/// Versions the stand-ins claim to be, so pitr's version checks see realistic values.
/// The mongod's release is configurable: see [`mongod::version`].
pub mod versions {
    /// The database tools release the stand-in tools claim to be.
    pub const TOOLS: &str = "100.9.4";
}
