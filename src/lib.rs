//! pitr: point-in-time recovery for MongoDB.
//!
//! The library holds everything; `main.rs` only runs [`cli::main`]. Pure, synchronous
//! parts (reading oplogs, time values, ObjectIds, forensics, planning) sit at the
//! bottom and know nothing of processes or the network.

pub mod archive;
pub mod backup;
pub mod cli;
pub mod closest;
pub mod engine;
pub mod error;
pub mod exec;
pub mod forensics;
pub mod mongo;
pub mod objectid;
pub mod oplog;
pub mod plan;
pub mod replay;
pub mod size;
pub mod storage;
pub mod table;
pub mod time;
pub mod verify;
