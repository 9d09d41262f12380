//! `pitr archive --cluster cluster.toml --dir DIR`: one oplog archive per member of a
//! sharded cluster, `DIR/<member>/`, each followed from the member's own replica set
//! (its `uri` in the file) by the same archiver as `pitr archive --uri` (read-only,
//! chunks renamed into place, a manifest per member). The archivers run side by side
//! in one process; a signal stops them all (each completes the chunk it is writing),
//! and a fatal error of one stops the others. Each member's archive is an ordinary
//! one: `pitr status --archive DIR/<member>`, and `oplog = ["DIR/<member>"]` in a
//! `cluster.toml` for `plan --cluster`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::future::join_all;

use crate::cluster::file;
use crate::error::{exit, Failure};
use crate::exec::signals::{listen_for_signals, Cancel};
use crate::mongo::archiver::{self, ArchiveOutcome, ArchiveRequest};
use crate::mongo::cluster::check_role;
use crate::mongo::{self as live};

use super::archive::{render_outcome, request, stamp, ArchiveArgs, CliObserver};
use super::dump_oplog_cluster::{check_dir_name, refuse_uri, with_env_credentials};

pub fn run(path: &Path, a: ArchiveArgs) -> Result<u8, Failure> {
    let Some(dir) = a.dir.clone() else {
        return Err(Failure::new("`pitr archive --cluster` needs --dir"));
    };
    refuse_uri(a.uri.as_deref())?;
    let dir = crate::storage::Location::of_path(&dir)?;
    let live_file = file::load_live(path)?;
    for m in &live_file.members {
        check_dir_name(&m.id)?;
    }
    let members: Vec<(String, String, bool, ArchiveRequest)> = live_file
        .members
        .iter()
        .map(|m| {
            let uri = with_env_credentials(m.uri.as_deref().unwrap_or_default());
            let config = m.role == crate::cluster::Role::Config;
            (m.id.clone(), uri, config, request(&a, dir.join(&m.id)))
        })
        .collect();
    let dirs: Vec<(String, crate::storage::Location)> = members
        .iter()
        .map(|(id, _, _, req)| (id.clone(), req.dir.clone()))
        .collect();
    let log_every = a.log_every;
    let results = live::block_on(async move {
        let cancel = Cancel::new();
        let stopping = Arc::new(AtomicBool::new(false));
        let flag = stopping.clone();
        listen_for_signals(
            &cancel,
            Some(Box::new(move |_sig, _level| {
                flag.store(true, Ordering::Relaxed);
            })),
        )
        .map_err(|e| Failure::new("cannot listen for signals").with_cause(e))?;
        let runs = members.iter().map(|(id, uri, config, req)| {
            let cancel = cancel.clone();
            async move {
                let r = member(id, uri, *config, req, &cancel, log_every).await;
                if r.is_err() {
                    // One member failing stops the cluster's archive: a member
                    // silently not archived would leave a hole in every restore.
                    cancel.cancel();
                }
                r
            }
        });
        let results = join_all(runs).await;
        if stopping.load(Ordering::Relaxed) {
            eprintln!(
                "{}stopped by signal; each member's chunk being written was completed",
                stamp()
            );
        }
        Ok::<_, Failure>(results)
    })
    .map_err(|e| Failure::new("cannot start the async runtime").with_cause(e))??;
    let mut first_error = None;
    let mut flagged = false;
    for ((id, member_dir), r) in dirs.iter().zip(results) {
        match r {
            Ok(o) => {
                println!("member `{id}`:");
                render_outcome(&o, member_dir);
                flagged |= !o.gaps.is_empty() || !o.set_aside.is_empty();
            }
            Err(f) => {
                let f = f.in_context(format_args!("member `{id}`"));
                if first_error.is_none() {
                    first_error = Some(f);
                } else {
                    eprint!("{}", f.render());
                }
            }
        }
    }
    if let Some(f) = first_error {
        return Err(f);
    }
    Ok(if a.once && flagged {
        exit::NOT_FOUND
    } else {
        exit::OK
    })
}

/// One member's archiver, as `pitr archive --uri` runs it.
async fn member(
    id: &str,
    uri: &str,
    config: bool,
    req: &ArchiveRequest,
    cancel: &Cancel,
    log_every: std::time::Duration,
) -> Result<ArchiveOutcome, Failure> {
    let (client, topology) = live::connect(uri).await?;
    if let Err(e) = check_role(&client, config).await {
        // Closed, not dropped, on this path too (`verify::connect::close`).
        client.close().await;
        return Err(e.into());
    }
    let mut obs = CliObserver::prefixed(log_every, format!("member `{id}`: "));
    let r = archiver::run(&client, &topology, req, cancel, &mut obs).await;
    obs.finish();
    client.close().await;
    Ok(r?)
}
