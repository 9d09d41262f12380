//! `pitr cluster discover`: a sharded cluster's members read through its mongos
//! (read-only), written as a `cluster.toml` the other `--cluster` commands take. The
//! work is in [`crate::mongo::cluster`]; this file parses flags, writes the file and
//! prints what was found.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cluster::file::{render, RawEntry};
use crate::cluster::Role;
use crate::error::{exit, Failure};
use crate::mongo::cluster::{self as live, Discovered};
use crate::mongo::{self as mongo};

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Read a sharded cluster's members through its mongos and write cluster.toml (read-only)
    Discover(DiscoverArgs),
}

// No doc comment here: the one-line about comes from `ClusterCommand::Discover`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Asks the mongos, read-only, for the cluster's members: `hello` (a mongos answers \
msg: \"isdbgrid\"; anything else is refused), `find` on config.shards (each shard's _id \
and its replica set `set/host:port,...`) and `serverStatus` (sharding.configsvrConnectionString: \
the config server's replica set). The user needs the clusterMonitor role.

Writes a cluster.toml with [config] and one [[shard]] per shard, each with `uri`: the \
member's hosts with replicaSet=<its set> and the options of --uri (authSource, tls, ...), \
never its user or password. Add each member's `backup` (a mongodump --oplog of that replica \
set) before `plan --cluster`/`replay --cluster`; `pitr dump-oplog --cluster FILE --out DIR` \
adds the oplogs. The live --cluster commands take the members' password from \
PITR_CLUSTER_PASSWORD (and the user from PITR_CLUSTER_USER when a uri names none).

Without --out the file is printed on stdout. With --out it is written under a temporary \
name and renamed; an existing file is refused.

Examples:
  pitr cluster discover --uri 'mongodb://monitor@mongos1:27017/?authSource=admin' --out cluster.toml
  PITR_URI='mongodb://...' pitr cluster discover > cluster.toml")]
pub struct DiscoverArgs {
    /// Connection string of a mongos (password inside it, never on its own)
    #[arg(long, env = "PITR_URI", hide_env_values = true, value_name = "URI")]
    pub uri: String,
    /// Write cluster.toml here instead of printing it
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(c: ClusterCommand) -> Result<u8, Failure> {
    match c {
        ClusterCommand::Discover(a) => discover(a),
    }
}

fn discover(a: DiscoverArgs) -> Result<u8, Failure> {
    let a = DiscoverArgs {
        out: super::local_only::local_only_opt(
            "--out",
            a.out,
            "give a local file: cluster files are read from local paths (the members' backups and oplogs in it may be URLs)",
        )?,
        ..a
    };
    if let Some(out) = &a.out {
        if out.exists() {
            return Err(Failure::new(format!("`{}` already exists", out.display()))
                .with_hint("remove it or give another --out: discover never overwrites a cluster file (it may hold backups added by hand)"));
        }
    }
    let uri = a.uri.clone();
    let found = mongo::block_on(async move { live::discover(&uri).await })
        .map_err(|e| Failure::new("cannot start the async runtime").with_cause(e))?
        .map_err(Failure::from)?;
    let text = render(&header(&found), &entries(&a.uri, &found));
    match &a.out {
        None => {
            print!("{text}");
        }
        Some(out) => {
            write_new_or_replace(out, &text)?;
            println!("wrote {}:", out.display());
            for line in summary(&found) {
                println!("  {line}");
            }
            println!(
                "Next: add each member's backup to it, and `pitr dump-oplog --cluster {} --out DIR` for their oplogs (docs/sharded.md).",
                out.display()
            );
        }
    }
    for s in found.shards.iter().filter(|s| s.draining) {
        eprintln!(
            "note: shard `{}` is draining (removeShard in progress): it is still a member and listed",
            s.id
        );
    }
    Ok(exit::OK)
}

/// The members as the file names them: the config server first, then the shards in
/// `_id` order, each with its own connection string.
fn entries(router_uri: &str, found: &Discovered) -> Vec<RawEntry> {
    let entry = |id: &str, role: Role, key: String, set| RawEntry {
        id: id.to_string(),
        role,
        backup: None,
        oplog: Vec::new(),
        uri: Some(live::member_uri(router_uri, set)),
        key,
    };
    std::iter::once(entry(
        "config",
        Role::Config,
        "config".into(),
        &found.config,
    ))
    .chain(
        found
            .shards
            .iter()
            .enumerate()
            .map(|(k, s)| entry(&s.id, Role::Shard, format!("shard[{k}]"), &s.hosts)),
    )
    .collect()
}

fn header(found: &Discovered) -> String {
    let mut h = format!(
        "A sharded cluster, read by `pitr cluster discover` through the mongos\n{} (config.shards and serverStatus.sharding).\n\n",
        found.mongos
    );
    h.push_str(
        "Each `uri` is the member's own replica set, without user or password (the live\n\
         --cluster commands take them from PITR_CLUSTER_USER / PITR_CLUSTER_PASSWORD).\n\
         Add `backup = \"...\"` (a mongodump --oplog of that replica set) to each member;\n\
         `pitr dump-oplog --cluster THIS_FILE --out DIR` writes DIR/cluster.toml with the oplogs.",
    );
    h
}

fn summary(found: &Discovered) -> Vec<String> {
    std::iter::once(format!("config    {}", found.config))
        .chain(
            found
                .shards
                .iter()
                .map(|s| format!("{:<9} {}", s.id, s.hosts)),
        )
        .collect()
}

/// Writes `text` to `path` under a temporary name in its directory, then renames it
/// over whatever `path` was.
pub(crate) fn write_new_or_replace(path: &Path, text: &str) -> Result<(), Failure> {
    let dir = crate::storage::parent_dir(path);
    let fail = |e: std::io::Error| {
        Failure::new(format!("cannot write `{}`", path.display()))
            .with_hint("check that the directory exists and is writable")
            .with_cause(e)
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".cluster.toml.")
        .tempfile_in(dir)
        .map_err(fail)?;
    tmp.write_all(text.as_bytes()).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}
