//! `pitr replay`: restore a backup onto a spare `mongod`, roll it forward with the
//! plan's oplog slice to just before the incident, verify it, optionally dump it,
//! and write a report.
//!
//! The plan comes from [`crate::plan::build()`] (the same code and flags as
//! `pitr plan`); the commands are the plan's own step functions
//! ([`crate::plan::steps`]) called with real values; every child goes through
//! [`crate::exec`]; verification is [`crate::verify`].
//!
//! Files: [`workdir`] (layout of the work directory), [`tools`] (finding the
//! programs), [`commands`] (real values for the step commands), [`run`] (the
//! steps), [`record`] (what each step did), [`progress`] (stderr), [`report`]
//! (`report.json`), [`summary`] (stdout and `report.md`, from one description:
//! [`describe`]), [`dry_run`], [`error`].
//!
//! Exit codes: 0 replayed and verified; 1 the verification failed; 2 a step failed
//! (its exit code, or 128+n for a signal, and the last lines of its stderr are in
//! the message and the report); 130 interrupted by Ctrl-C (143 by SIGTERM).

pub mod commands;
pub mod describe;
pub mod download;
pub mod dry_run;
pub mod embedded;
pub mod error;
pub mod handover;
pub mod preflight;
pub mod progress;
pub mod record;
pub mod report;
pub mod restore_log;
pub mod run;
pub mod snapshot;
pub mod snapshot_versions;
pub mod summary;
pub mod tools;
pub mod workdir;

pub use error::ReplayError;
pub use report::{ReplayReport, ResultKind};
pub use run::{execute, Execution, Settings};
pub use tools::{Tools, STANDIN_BANNER};
pub use workdir::WorkDir;
