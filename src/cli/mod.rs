//! The command line: clap definitions (one `Args` struct per subcommand), dispatch,
//! and turning failures into `error:`/`hint:` text and exit codes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{exit, Failure};

pub mod archive;
pub mod archive_status;
pub mod dump_oplog;
pub mod find_drop;
pub mod oid;
pub mod oplog_cmd;
pub mod output;
pub mod plan;
pub mod progress;
pub mod replay;
pub mod scan;
pub mod stats;
pub mod status;
pub mod ts;
pub mod verify;
pub mod zone;

/// Point-in-time recovery for MongoDB: find the operation that destroyed data, and
/// restore to just before it.
#[derive(Debug, Parser)]
#[command(
    name = "pitr",
    version,
    about,
    long_about = "Point-in-time recovery for MongoDB.\n\n\
        pitr reads oplog dumps (mongodump's `oplog.bson`, `local/oplog.rs.bson`, `.gz`, or stdin), \
        finds destructive operations and their exact oplog timestamps, and computes the \
        exclusive `--oplogLimit` that mongorestore needs to stop just before them. \
        It never writes to the server it reads from.",
    after_help = "Exit codes: 0 success, 1 nothing found (find-drop) or a check failed, 2 error.\n\
        Documentation: README.md"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Find destructive operations (drops, mass deletes, ...) and the exact --oplogLimit before each
    FindDrop(find_drop::FindDropArgs),
    /// Look inside oplog dumps: print entries, summarise activity
    #[command(subcommand)]
    Oplog(oplog_cmd::OplogCommand),
    /// Decode ObjectIds, or make the boundary ObjectIds of a moment
    #[command(subcommand)]
    Oid(oid::OidCommand),
    /// Check that a backup and an oplog cover a restore point; show the exact limit and every step
    Plan(plan::PlanArgs),
    /// Restore a backup onto a spare mongod, rolled forward to just before the incident, and verify it
    Replay(replay::ReplayArgs),
    /// Check a restored server's document counts against a plan
    Verify(verify::VerifyArgs),
    /// Show a server's version, topology and oplog window (read-only)
    Status(status::StatusArgs),
    /// Dump local.oplog.rs from a replica set to a file, read-only, resumable
    DumpOplog(dump_oplog::DumpOplogArgs),
    /// Keep the oplog beyond its window: follow it into an archive directory (read-only)
    Archive(archive::ArchiveArgs),
    /// Show a time value in every form: t:i, epoch, RFC 3339 UTC, boundary ObjectId
    Ts(ts::TsArgs),
}

/// Entry point of the binary: parse, run, print any error, return the exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.is_broken_pipe() => ExitCode::from(exit::OK),
        Err(f) => {
            eprint!("{}", f.render());
            ExitCode::from(f.exit_code())
        }
    }
}

/// Runs one parsed command line; returns the exit code on success.
pub fn run(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        Command::FindDrop(a) => find_drop::run(a),
        Command::Oplog(c) => oplog_cmd::run(c),
        Command::Oid(c) => oid::run(c),
        Command::Plan(a) => plan::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Status(a) => status::run(a),
        Command::DumpOplog(a) => dump_oplog::run(a),
        Command::Archive(a) => archive::run(a),
        Command::Ts(a) => ts::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definitions_are_consistent() {
        Cli::command().debug_assert();
    }
}
