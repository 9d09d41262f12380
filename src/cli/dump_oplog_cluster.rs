//! `pitr dump-oplog --cluster cluster.toml --out DIR`: every member's oplog, each read
//! from the member's own replica set (its `uri` in the file) exactly as `pitr
//! dump-oplog --uri` reads one (read-only, `DIR/<member>/oplog.bson` written under a
//! temporary name and renamed, `--resume` per member), then `DIR/cluster.toml`: the
//! same members with their backups and `oplog = ["<member>/oplog.bson"]`, ready for
//! `plan --cluster` and `replay --cluster`.
//!
//! Members are dumped one after the other; each dump ends at the newest entry of its
//! member when it starts, so every dump reaches past the moment the command started.

use std::path::{Path, PathBuf};

use crate::cluster::file::{self, LiveFile, RawEntry};
use crate::cluster::Role;
use crate::error::{exit, Failure};
use crate::mongo::cluster::{check_role, with_credentials};
use crate::mongo::dump::{self, DumpOutcome, DumpPaths, DumpRequest};
use crate::mongo::oplog_source::RetryPolicy;
use crate::mongo::{self as live};
use crate::size::human;

use super::dump_oplog::{interrupted, CliObserver, DumpOplogArgs};

/// The environment variables holding the members' credentials (never the file, never
/// the command line).
pub const USER_ENV: &str = "PITR_CLUSTER_USER";
pub const PASSWORD_ENV: &str = "PITR_CLUSTER_PASSWORD";

pub fn run(path: &Path, a: DumpOplogArgs) -> Result<u8, Failure> {
    refuse_uri(&a)?;
    let out = match crate::storage::Location::of_path(&a.out)? {
        crate::storage::Location::Local(p) => p,
        url => return Err(Failure::new(format!(
            "`--out {url}` with --cluster: the members' dumps are written to a local directory"
        ))
        .with_hint(
            "dump to a local DIR, then upload it (or dump each member with --uri to the bucket)",
        )),
    };
    let live_file = file::load_live(path)?;
    for m in &live_file.members {
        check_dir_name(&m.id)?;
    }
    let user = std::env::var(USER_ENV).ok().filter(|v| !v.is_empty());
    let password = std::env::var(PASSWORD_ENV).ok().filter(|v| !v.is_empty());
    let mut done: Vec<(String, Option<DumpOutcome>)> = Vec::new();
    for m in &live_file.members {
        let req = DumpRequest {
            out_dir: out.join(&m.id),
            since: a.since.as_ref().map(|v| v.ts),
            until: a.until.as_ref().map(|v| v.ts),
            gzip: a.gzip,
            resume: a.resume,
            allow_gap: a.allow_gap,
            batch_size: a.batch_size,
            retry: RetryPolicy::default(),
        };
        if a.resume && DumpPaths::new(&req.out_dir).complete.exists() {
            eprintln!(
                "pitr dump-oplog: member `{}`: `{}` is complete, kept",
                m.id,
                DumpPaths::new(&req.out_dir).complete.display()
            );
            done.push((m.id.clone(), None));
            continue;
        }
        let uri = with_credentials(
            m.uri.as_deref().unwrap_or_default(),
            user.as_deref(),
            password.as_deref(),
        );
        let outcome = dump_member(&uri, m.role == Role::Config, req)
            .map_err(|f| f.in_context(format_args!("member `{}`", m.id)))?;
        done.push((m.id.clone(), Some(outcome)));
    }
    for (id, outcome) in &done {
        match outcome {
            Some(o) => println!(
                "{id:<9} wrote {}: {} entries ({}), {}",
                o.path.display(),
                o.entries,
                human(o.file_bytes),
                match (o.first, o.last) {
                    (Some(f), Some(l)) => format!("ts {f} to {l} ({})", l.utc_string()),
                    _ => "no entries in the range".to_string(),
                }
            ),
            None => println!("{id:<9} kept {}", out.join(id).join("oplog.bson").display()),
        }
    }
    let written = out.join("cluster.toml");
    let text = file::render(&header(path), &entries(&live_file, &out));
    super::cluster::write_new_or_replace(&written, &text)?;
    println!(
        "wrote {}: the members' backups and uris as in `{}`, each member's oplog as dumped",
        written.display(),
        path.display()
    );
    if live_file.members.iter().any(|m| m.backup.is_none()) {
        println!(
            "Next: add `backup = \"...\"` to each member in it (a mongodump --oplog of that replica set), then pitr plan --cluster {} --until ...",
            written.display()
        );
    } else {
        println!("Next: pitr find-drop --cluster {}", written.display());
    }
    Ok(exit::OK)
}

/// `--uri` with `--cluster` is a mistake, unless it is only `PITR_URI` from the environment.
fn refuse_uri(a: &DumpOplogArgs) -> Result<(), Failure> {
    match &a.uri {
        Some(u) if std::env::var("PITR_URI").ok().as_deref() != Some(u.as_str()) => Err(Failure::new(
            "--uri and --cluster together: with --cluster every member is read from its own `uri` in the file",
        )
        .with_hint("leave out --uri")),
        _ => Ok(()),
    }
}

/// A member's id names its directory under DIR: no path separators, no `.`/`..`.
pub(crate) fn check_dir_name(id: &str) -> Result<(), Failure> {
    if id.is_empty() || id.starts_with('.') || id.contains(['/', '\\', '\0']) {
        return Err(Failure::new(format!(
            "member id `{id}` cannot name a directory under --out"
        ))
        .with_hint("shard ids are config.shards._id values; rename the [[shard]] id in the file"));
    }
    Ok(())
}

/// One member's dump, as `pitr dump-oplog --uri` runs it.
fn dump_member(uri: &str, config: bool, req: DumpRequest) -> Result<DumpOutcome, Failure> {
    let uri = uri.to_string();
    live::block_on(async move {
        let (client, topology) = live::connect(&uri).await?;
        check_role(&client, config).await?;
        let mut obs = CliObserver::default();
        let outcome = tokio::select! {
            r = dump::dump(&client, &topology, &req, &mut obs) => r.map_err(Failure::from),
            _ = tokio::signal::ctrl_c() => Err(interrupted(&req)),
        };
        obs.finish();
        drop(obs);
        client.close().await;
        outcome
    })
    .map_err(|e| Failure::new("cannot start the async runtime").with_cause(e))?
}

fn header(input: &Path) -> String {
    format!(
        "Written by `pitr dump-oplog --cluster {}`: each member's oplog dumped from its\n\
         own replica set into <member>/oplog.bson; backups and uris as in that file\n\
         (relative paths there are absolute here unless it is in this directory).",
        input.display()
    )
}

/// The members for `out/cluster.toml`: the dumped oplog, the backup as the input file
/// names it (relative to `out` only when the input file is in `out`).
fn entries(input: &LiveFile, out: &Path) -> Vec<RawEntry> {
    let same_dir = {
        let a = input
            .path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .and_then(|p| p.canonicalize().ok());
        a.is_some() && a == out.canonicalize().ok()
    };
    input
        .members
        .iter()
        .map(|m| RawEntry {
            backup: m.backup.as_ref().map(|b| {
                if same_dir {
                    b.clone()
                } else {
                    absolute(&input.resolve(b)).to_string_lossy().into_owned()
                }
            }),
            oplog: vec![format!("{}/oplog.bson", m.id)],
            ..m.clone()
        })
        .collect()
}

fn absolute(p: &Path) -> PathBuf {
    p.canonicalize()
        .or_else(|_| std::path::absolute(p))
        .unwrap_or_else(|_| p.to_path_buf())
}
