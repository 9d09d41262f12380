//! The command line: clap definitions (one `Args` struct per subcommand), dispatch,
//! and turning failures into `error:`/`hint:` text and exit codes.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{exit, Failure};

pub mod archive;
mod archive_cluster;
pub mod archive_status;
pub mod cluster;
pub mod cluster_mongod;
pub mod cluster_restore;
pub mod docs;
pub mod dump_oplog;
mod dump_oplog_cluster;
pub mod find_drop;
pub mod find_drop_cluster;
pub mod local_only;
pub mod oid;
pub mod oplog_cmd;
pub mod output;
pub mod plan;
pub mod progress;
pub mod rehearse;
pub mod replay;
mod replay_snapshot;
pub(crate) mod room;
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
        pitr reads oplogs (mongodump's `oplog.bson`, `local/oplog.rs.bson`, gzip or not, mongodump \
        archives, `pitr archive` directories, or stdin), finds destructive operations and their exact \
        oplog timestamps, computes the exclusive `--oplogLimit` that stops just before them, and \
        restores a backup to that point: in-process by default (the embedded engine, no MongoDB \
        needed) or onto a spare mongod with mongorestore. It never writes to the server it reads from.\n\n\
        The 3 a.m. runbook:\n  \
        pitr find-drop OPLOG                                  # what destroyed the data, and when\n  \
        pitr replay --backup DUMP --oplog OPLOG --until auto --dry-run   # what would be restored\n  \
        pitr replay --backup DUMP --oplog OPLOG --until auto --out restored   # restore, hand over",
    after_help = "Exit codes: 0 success, 1 nothing found (find-drop), a check failed, or an incident was \
        replayed (replay), 2 error, 130 interrupted.\n\
        Man pages:     pitr man --dir ~/.local/share/man/man1   (then `man pitr-replay`)\n\
        Completions:   pitr completions bash|zsh|fish\n\
        More:          README.md and docs/ in pitr's source"
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
    /// Restore a backup rolled forward to just before the incident (in-process, or onto a spare mongod) and hand over a dump
    Replay(replay::ReplayArgs),
    /// Check a restored server's document counts and content hashes (dbHash) against a plan
    Verify(verify::VerifyArgs),
    /// Prove, read-only, that the backup and the oplog rebuild production exactly (compared with production read as of a recent cluster time)
    Rehearse(rehearse::RehearseArgs),
    /// Show a server's version, topology and oplog window (read-only)
    Status(status::StatusArgs),
    /// Dump local.oplog.rs from a replica set to a file, read-only, resumable
    DumpOplog(dump_oplog::DumpOplogArgs),
    /// Keep the oplog beyond its window: follow it into an archive directory (read-only)
    Archive(archive::ArchiveArgs),
    /// Sharded clusters: read the members through a mongos (`cluster discover`)
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Show a time value in every form: t:i, epoch, RFC 3339 UTC, boundary ObjectId
    Ts(ts::TsArgs),
    /// Print a shell completion script (bash, zsh, fish, ...)
    Completions(docs::CompletionsArgs),
    /// Print the man page, or write one per command into a directory
    Man(docs::ManArgs),
}

/// Entry point of the binary: parse, run, print any error, return the exit code.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(f) = mongo_tools_habit(&args) {
        eprint!("{}", f.render());
        return ExitCode::from(f.exit_code());
    }
    let cli = Cli::parse_from(args);
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.is_broken_pipe() => ExitCode::from(exit::OK),
        Err(f) => {
            eprint!("{}", f.render());
            ExitCode::from(f.exit_code())
        }
    }
}

/// `--archive=FILE` as mongodump and mongorestore take it: pitr recognises archives by
/// content wherever a backup or an oplog goes, and `replay --archive` is a switch
/// for the form of `--out`. A sentence instead of clap's usage line.
fn mongo_tools_habit(args: &[std::ffi::OsString]) -> Option<Failure> {
    let sub = args.get(1)?.to_string_lossy().into_owned();
    if sub == "status" {
        // `pitr status --archive DIR` names an oplog archive directory.
        return None;
    }
    let value = args.iter().skip(2).find_map(|a| {
        a.to_string_lossy()
            .strip_prefix("--archive=")
            .map(str::to_string)
    })?;
    Some(if sub == "replay" {
        Failure::new(format!(
            "`--archive={value}`: in pitr replay, --archive takes no value: it writes --out as one archive file"
        ))
        .with_hint(format!(
            "to restore FROM an archive, pass it as --backup {value} (archives are recognised by content); to write \
             one, use --archive --out {value}"
        ))
    } else {
        Failure::new(format!(
            "`--archive={value}`: pitr takes no --archive option here; it recognises mongodump archives by their content"
        ))
        .with_hint(format!(
            "pass the archive where a backup or an oplog goes: `--backup {value}`, `--oplog {value}`, or as the OPLOG \
             argument of find-drop and oplog"
        ))
    })
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
        Command::Rehearse(a) => rehearse::run(a),
        Command::Status(a) => status::run(a),
        Command::DumpOplog(a) => dump_oplog::run(a),
        Command::Archive(a) => archive::run(a),
        Command::Cluster(c) => cluster::run(c),
        Command::Ts(a) => ts::run(a),
        Command::Completions(a) => docs::completions(a),
        Command::Man(a) => docs::man(a),
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
