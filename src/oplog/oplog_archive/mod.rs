//! Oplog archives: the directories `pitr archive` writes, read back as one oplog.
//!
//! Not to be confused with [`crate::archive`], the *mongodump archive* format
//! (`mongodump --archive`): an oplog archive is a directory of compressed oplog
//! chunks and a manifest.
//!
//! ```text
//! DIR/manifest.json                          what the archive holds (manifest.rs)
//! DIR/chunks/00000042-1795741200.1-1795741800.17.bson.gz
//!                                            one chunk: whole entries, oplog order,
//!                                            gzip members (like dump-oplog --gzip)
//! DIR/chunks/.00000043.partial               the chunk being written (never read)
//! DIR/set-aside/<t>.<i>-<unix time>/         chunks of a rolled-back history
//! DIR/.archiver.lock, DIR/.manifest.lock     advisory locks (flock)
//! ```
//!
//! A directory is an oplog archive when it holds a `manifest.json` whose content
//! says so (`"format": "pitr-oplog-archive"`); chunk files are found through the
//! manifest only, never by their names (which are for people: sequence number,
//! first and last `t.i`).
//!
//! The invariants every writer keeps (`pitr archive`, `pitr archive prune`):
//! chunks listed in the manifest are complete files, in oplog order, with strictly
//! increasing entries and no overlap; a file is written under a temporary name,
//! synced, and renamed into place before the manifest names it; the manifest is
//! replaced atomically (temporary file, sync, rename, directory sync) under
//! `.manifest.lock`. A crash at any instant therefore leaves a readable archive.
//! Recorded gaps sit between chunks, never inside one.

pub mod disk;
pub mod lock;
pub mod manifest;
pub mod prune;
pub mod read;
pub mod status;

pub use manifest::{ChunkRecord, GapRecord, Manifest, SetAsideRecord};
pub use read::{is_oplog_archive, ChunkRange};

/// The manifest's file name inside an archive directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Where chunks live, relative to the archive directory.
pub const CHUNKS_DIR: &str = "chunks";
/// Where chunks of a rolled-back history are moved.
pub const SET_ASIDE_DIR: &str = "set-aside";
