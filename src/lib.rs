//! pitr: point-in-time recovery for MongoDB.
//!
//! The library holds everything; `main.rs` only runs [`cli::main`]. Pure, synchronous
//! parts (reading oplogs, time values, ObjectIds, forensics, the engine, planning)
//! sit at the bottom and know nothing of processes or the network.
//!
//! # Rooms and floors
//!
//! Each top-level module (a room) uses only rooms on lower floors, never one on its
//! own floor or above: a change that needs an arrow pointing up shows that something
//! lives in the wrong room. `tests/layers.rs` checks every `crate::ROOM` path in
//! non-test code against this table (it reads the table from this comment).
//!
//! | floor | rooms | what they own |
//! |---|---|---|
//! | 0 | error | failures with hints and exit codes |
//! | 1 | size, table, closest, objectid | byte sizes; terminal tables and wording; "did you mean"; ObjectIds |
//! | 2 | storage, memory | local paths and object-storage URLs (s3, gs, az): streaming reads, all-or-nothing writes, conditional puts; the memory budget's default (a share of what is available), freed heap given back |
//! | 3 | stream | byte streams: counting, gzip by content, what a stream looks like |
//! | 4 | archive | the mongodump archive format (read and write) |
//! | 5 | oplog | oplog entries and positions; opening an oplog source of any kind (files, dump dirs, archives, oplog archive dirs, stdin) |
//! | 6 | time, backup | time values mapped to oplog positions; mongodump backups (directory, gzip, archive) |
//! | 7 | engine, forensics | what the oplog does to data (the walk, the replica, dbHash, dumps); what destroyed data |
//! | 8 | plan | coverage, the limit, the slice, the lint, the steps: the engine's client |
//! | 9 | cluster | a sharded cluster as members (cluster.toml): one logical incident across members; one limit for all, chunk ownership at it, the merged dump |
//! | 10 | exec | child processes (mongod, mongorestore, mongodump) |
//! | 11 | mongo | everything that uses the MongoDB driver (read-only) |
//! | 12 | verify, rehearse | checking a restored server against a plan; rebuilding production's state at a recent cluster time and comparing it with production read as of that time |
//! | 13 | replay | running a plan with an engine, the report |
//! | 14 | cli | flags, rendering, exit codes |

pub mod archive;
pub mod backup;
pub mod cli;
pub mod closest;
pub mod cluster;
pub mod engine;
pub mod error;
pub mod exec;
pub mod forensics;
pub mod memory;
pub mod mongo;
pub mod objectid;
pub mod oplog;
pub mod plan;
pub mod rehearse;
pub mod replay;
pub mod size;
pub mod storage;
pub mod stream;
pub mod table;
pub mod time;
pub mod verify;
