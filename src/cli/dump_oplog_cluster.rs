//! `pitr dump-oplog --cluster cluster.toml --out DIR`: every member's oplog, each read
//! from the member's own replica set (its `uri` in the file) exactly as `pitr
//! dump-oplog --uri` reads one (read-only, `DIR/<member>/oplog.bson` written under a
//! temporary name and renamed, `--resume` per member), then `DIR/cluster.toml`: the
//! same members with their backups and `oplog = ["<member>/oplog.bson"]`, ready for
//! `plan --cluster` and `replay --cluster`.
//!
//! Members are dumped side by side; each dump ends at the newest entry of its member
//! when it starts, so every dump reaches past the moment the command started.

use std::path::{Path, PathBuf};

use crate::cluster::file::{self, LiveFile, RawEntry};
use crate::cluster::Role;
use crate::error::{exit, Failure};
use crate::mongo::cluster::{check_role, with_credentials};
use crate::mongo::dump::{self, DumpOutcome, DumpPaths, DumpRequest, DumpTo};
use crate::mongo::oplog_source::RetryPolicy;
use crate::mongo::{self as live};
use crate::size::human;

use futures_util::future::join_all;

use super::dump_oplog::{CliObserver, DumpOplogArgs};

/// The environment variables holding the members' credentials (never the file, never
/// the command line).
pub const USER_ENV: &str = "PITR_CLUSTER_USER";
pub const PASSWORD_ENV: &str = "PITR_CLUSTER_PASSWORD";

pub fn run(path: &Path, a: DumpOplogArgs) -> Result<u8, Failure> {
    refuse_uri(a.uri.as_deref())?;
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
    let done = dump_all(&live_file, &a, &out)?;
    render_done(&done, &out);
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

/// One line per member, then how far the dumps reach together: a cluster limit `L`
/// (exclusive) needs an entry at or after it on every member, so `L` can be at most
/// the earliest of the members' last entries.
fn render_done(done: &[(String, Option<DumpOutcome>)], out: &Path) {
    for (id, outcome) in done {
        match outcome {
            Some(o) => println!(
                "{id:<9} wrote {}: {} entries ({}), {}",
                o.at,
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
    let fresh: Vec<(&String, Option<crate::oplog::Ts>)> = done
        .iter()
        .filter_map(|(id, o)| o.as_ref().map(|o| (id, o.last)))
        .collect();
    if fresh.len() < done.len() {
        return;
    }
    match fresh.iter().map(|(_, l)| *l).collect::<Option<Vec<_>>>() {
        Some(lasts) => {
            if let Some((id, reach)) = fresh
                .iter()
                .zip(&lasts)
                .min_by_key(|(_, l)| **l)
                .map(|((id, _), l)| (id, l))
            {
                println!(
                    "together the dumps reach {reach} ({}), the last entry of `{id}`, the earliest to end: a cluster limit can be at most that",
                    reach.utc_string()
                );
            }
        }
        None => println!(
            "a member's dump holds no entries: no cluster limit can be planned with these dumps alone"
        ),
    }
}

/// A member's `uri` from the file with the password (and user) of
/// [`PASSWORD_ENV`] ([`USER_ENV`]), if set.
pub(crate) fn with_env_credentials(uri: &str) -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    with_credentials(uri, var(USER_ENV).as_deref(), var(PASSWORD_ENV).as_deref())
}

/// `--uri` with `--cluster` is a mistake, unless it is only `PITR_URI` from the environment.
pub(crate) fn refuse_uri(uri: Option<&str>) -> Result<(), Failure> {
    match uri {
        Some(u) if std::env::var("PITR_URI").ok().as_deref() != Some(u) => Err(Failure::new(
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
/// Every member's dump, side by side (each reads its own replica set, so the load on
/// each server is that of one `dump-oplog`): `None` for a member kept complete under
/// `--resume`. Ctrl-C stops them all, each keeping its complete entries for
/// `--resume`. One member failing does not stop the others (their dumps are kept);
/// the first failure is returned, naming its member, the others printed.
fn dump_all(
    f: &LiveFile,
    a: &DumpOplogArgs,
    out: &Path,
) -> Result<Vec<(String, Option<DumpOutcome>)>, Failure> {
    let mut jobs = Vec::new();
    for m in &f.members {
        let dir = out.join(&m.id);
        let req = DumpRequest {
            to: DumpTo::Dir(dir.clone()),
            since: a.since.as_ref().map(|v| v.ts),
            until: a.until.as_ref().map(|v| v.ts),
            gzip: a.gzip,
            resume: a.resume,
            allow_gap: a.allow_gap,
            batch_size: a.batch_size,
            retry: RetryPolicy::default(),
        };
        let complete = DumpPaths::new(&dir).complete;
        if a.resume && complete.exists() {
            eprintln!(
                "pitr dump-oplog: member `{}`: `{}` is complete, kept",
                m.id,
                complete.display()
            );
            jobs.push((m.id.clone(), None));
        } else {
            let uri = with_env_credentials(m.uri.as_deref().unwrap_or_default());
            jobs.push((m.id.clone(), Some((uri, m.role == Role::Config, req))));
        }
    }
    if !(a.no_space_check || a.resume || a.gzip) {
        let members: Vec<(&str, &str, &DumpRequest)> = jobs
            .iter()
            .filter_map(|(id, job)| {
                job.as_ref()
                    .map(|(uri, _, req)| (id.as_str(), uri.as_str(), req))
            })
            .collect();
        live::block_on(check_room(&members, out))
            .map_err(|e| Failure::new("cannot start the async runtime").with_cause(e))??;
    }
    let results = live::block_on(async {
        let runs = jobs.iter().map(|(id, job)| async move {
            match job {
                None => Ok(None),
                Some((uri, config, req)) => dump_member(id, uri, *config, req).await.map(Some),
            }
        });
        tokio::select! {
            r = join_all(runs) => Ok(r),
            _ = tokio::signal::ctrl_c() => Err(Failure::new(format!(
                "interrupted; each member's complete entries so far are in `{}/<member>/oplog.bson.partial`",
                out.display()
            ))
            .with_hint("run the same command again with `--resume` to continue (complete members are kept)")
            .with_exit_code(130)),
        }
    })
    .map_err(|e| Failure::new("cannot start the async runtime").with_cause(e))??;
    let mut done = Vec::new();
    let mut first_error = None;
    for ((id, _), r) in jobs.iter().zip(results) {
        match r {
            Ok(o) => done.push((id.clone(), o)),
            Err(e) => {
                let e = e.in_context(format_args!("member `{id}`"));
                match first_error {
                    None => first_error = Some(e),
                    Some(_) => eprint!("{}", e.render()),
                }
            }
        }
    }
    match first_error {
        Some(e) => {
            render_done(&done, out);
            Err(e)
        }
        None => Ok(done),
    }
}

/// Refused before any member is read (as `pitr dump-oplog --uri`, see
/// [`super::dump_oplog`]): `out`'s filesystem without room for every member's
/// range at once (they are dumped side by side), each estimated from its oplog's
/// size and the share of its time the range spans. Not checked when a member cannot
/// be reached or does not report its size.
async fn check_room(members: &[(&str, &str, &DumpRequest)], out: &Path) -> Result<(), Failure> {
    let mut bytes = 0;
    for (id, uri, req) in members {
        // A member that cannot be reached is reported by the dumps themselves, all
        // at once, as they run side by side.
        let Ok((client, _)) = live::connect(uri).await else {
            return Ok(());
        };
        let est = super::dump_oplog::range_estimate(&client, req).await;
        client.close().await;
        match est {
            Some(b) => bytes += b,
            None => {
                eprintln!(
                    "note: member `{id}`: the oplog's size is not known (collStats refused or without a size): the room for the dumps is not checked"
                );
                return Ok(());
            }
        }
    }
    super::dump_oplog::refuse_without_room(
        &crate::replay::preflight::nearest_existing(out),
        bytes,
        "every member's entries in the range",
    )
}

/// One member's dump, as `pitr dump-oplog --uri` runs it, its lines on stderr after
/// the member's name.
async fn dump_member(
    id: &str,
    uri: &str,
    config: bool,
    req: &DumpRequest,
) -> Result<DumpOutcome, Failure> {
    let (client, topology) = live::connect(uri).await?;
    let r = match check_role(&client, config).await {
        Ok(()) => {
            let mut obs = CliObserver::prefixed(format!("member `{id}`: "));
            let r = dump::dump(&client, &topology, req, &mut obs).await;
            obs.finish();
            r.map_err(Failure::from)
        }
        Err(e) => Err(e.into()),
    };
    client.close().await;
    r
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The written file's backups: as written when the input file is in DIR (its
    /// relative paths stay right), absolute otherwise; the oplog is the dump.
    #[test]
    fn backups_are_relative_only_beside_the_input() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("b")).unwrap();
        let f = d.path().join("cluster.toml");
        let text = "[config]\nbackup = \"b\"\nuri = \"mongodb://c/\"\n\n[[shard]]\nid = \"s0\"\nuri = \"mongodb://s/\"\n";
        let live = file::parse_live(&f, text).unwrap();
        let here = entries(&live, d.path());
        assert_eq!(here[0].backup.as_deref(), Some("b"));
        assert_eq!(here[0].oplog, ["config/oplog.bson"]);
        assert_eq!(here[1].backup, None);
        assert_eq!(here[1].oplog, ["s0/oplog.bson"]);
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let there = entries(&live, &out);
        let abs = d.path().join("b").canonicalize().unwrap();
        assert_eq!(there[0].backup.as_deref(), Some(abs.to_str().unwrap()));
        assert_eq!(there[1].uri.as_deref(), Some("mongodb://s/"));
    }

    #[test]
    fn member_ids_must_name_a_directory() {
        for bad in ["", ".", "..", ".hidden", "a/b", "a\\b"] {
            assert!(check_dir_name(bad).is_err(), "{bad}");
        }
        check_dir_name("shard-0_rs").unwrap();
    }
}
