//! `pitr replay --engine mongod` with a snapshot backup (a copy of a mongod's data
//! files, issue 23): recognised before anything else, refused when the files alone
//! say they cannot be recovered, shown step by step by `--dry-run`, and otherwise
//! made ready by [`crate::replay::snapshot::prepare`] (copy, recovery start, dump of
//! the recovered copy) so that the usual plan reads that dump, ends at the recovered
//! oplog's top, and the spare runs on the recovered copy.

use std::path::{Path, PathBuf};

use crate::backup::snapshot::{self, Snapshot};
use crate::error::{exit, Failure};
use crate::exec::binaries::Tool;
use crate::exec::Cancel;
use crate::plan::PlanRequest;
use crate::replay::progress::Console;
use crate::replay::snapshot::{prepare, PrepareOptions, COPY_DIR, DUMP_DIR};
use crate::replay::tools::Probed;
use crate::replay::WorkDir;
use crate::storage::Location;
use crate::time::{TimeForm, TimeValue};

/// A local `--backup` that is a snapshot; refused (exit 2) when its files say it
/// cannot be recovered.
pub(super) fn detect(backup: &Path) -> Result<Option<Snapshot>, Failure> {
    if !Location::of_path(backup)?.is_local() {
        return Ok(None);
    }
    let found = if backup.is_dir() {
        snapshot::in_dir(backup)
    } else if backup.is_file() {
        snapshot::in_tar(backup)
    } else {
        Ok(None)
    };
    let Some(s) = found.map_err(|e| Failure::new(e.to_string()))? else {
        return Ok(None);
    };
    let refusals = s.refusals();
    if !refusals.is_empty() {
        return Err(Failure::new(format!(
            "backup `{}` is {}, and cannot be recovered: {}",
            s.path.display(),
            s.describe(),
            refusals.join("; ")
        ))
        .with_hint("take the snapshot again (the journal on the same volume; WiredTiger, not encrypted), or give a mongodump")
        .with_exit_code(exit::ERROR));
    }
    Ok(Some(s))
}

/// The version rules ([`crate::replay::snapshot_versions`]) for the mongod found:
/// a refusal is exit 2 before anything is copied; the notes are returned.
fn versions(s: &Snapshot, probed: &[Probed]) -> Result<(Option<String>, Vec<String>), Failure> {
    let version = probed
        .iter()
        .find(|p| p.tool == Tool::Mongod)
        .and_then(|p| p.found.as_ref().ok())
        .and_then(|b| b.version.clone());
    let c = crate::replay::snapshot_versions::check(version.as_deref(), s);
    if !c.refusals.is_empty() {
        return Err(Failure::new(format!(
            "backup `{}` cannot be recovered with this mongod: {}",
            s.path.display(),
            c.refusals.join("; ")
        ))
        .with_hint(
            "give a mongod of the release the files came from with --mongodb-bin (see docs/backup-layouts.md, \"Which mongod\"); nothing was copied",
        )
        .with_exit_code(exit::ERROR));
    }
    Ok((version, c.notes))
}

/// The mongod that will recover the files, as the other runs name their programs,
/// with the banner when it is pitr's test stand-in.
fn mongod_line(probed: &[Probed]) -> Vec<String> {
    let Some(b) = probed
        .iter()
        .find(|p| p.tool == Tool::Mongod)
        .and_then(|p| p.found.as_ref().ok())
    else {
        return Vec::new();
    };
    let mut v = vec![crate::replay::tools::describe(b)];
    if b.is_standin {
        v.push(format!(
            "*** {}: mongod is pitr's test stand-in ***",
            crate::replay::tools::STANDIN_BANNER
        ));
    }
    v
}

/// One line: the mongod, and what the files say about the one that last ran on them.
fn versions_line(s: &Snapshot, mongod: Option<&str>) -> String {
    format!(
        "mongod {}; the files were last run by {}{}",
        mongod.unwrap_or("(version unknown)"),
        s.written_by.as_deref().map_or(
            "an unknown version (no diagnostic.data)".to_string(),
            |v| format!("mongod {v}")
        ),
        match s.unclean {
            Some(true) => ", which was running when they were copied (crash-consistent)",
            Some(false) => ", cleanly shut down",
            None => "",
        }
    )
}

fn program(probed: &[Probed], tool: Tool) -> Result<PathBuf, Failure> {
    match probed.iter().find(|p| p.tool == tool).map(|p| &p.found) {
        Some(Ok(b)) => Ok(b.path.clone()),
        Some(Err(e)) => Err(Failure::new(e.to_string()).with_exit_code(exit::ERROR)),
        None => {
            Err(Failure::new(format!("{tool:?} was not looked for")).with_exit_code(exit::ERROR))
        }
    }
}

/// `--dry-run`: the steps a snapshot takes before the usual plan, with their
/// commands; the plan itself needs the recovered data, so it is not made.
pub(super) fn dry_run(s: &Snapshot, probed: &[Probed], work: &WorkDir) -> Result<u8, Failure> {
    let mongod = program(probed, Tool::Mongod)?;
    let mongodump = program(probed, Tool::Mongodump)?;
    let (version, notes) = versions(s, probed).inspect_err(|_| work.discard_if_unused())?;
    let copy = work.root.join(COPY_DIR);
    let m = mongod.display();
    println!("Backup    {}", s.path.display());
    println!("  {}", s.describe());
    println!("  {}", versions_line(s, version.as_deref()));
    for n in &notes {
        println!("  note: {n}");
    }
    for l in mongod_line(probed) {
        println!("  {l}");
    }
    println!("Steps before the plan (nothing is written to the snapshot):");
    println!(
        "  S1  copy the files into {} ({}{}; reflinked where the file system can, else every byte copied; mongod.lock left out)",
        copy.display(),
        s.files.map_or(String::new(), |f| format!("{f} files, ")),
        indicatif::HumanBytes(s.bytes)
    );
    println!(
        "  S2  recovery start: {m} --dbpath {} --bind_ip 127.0.0.1 --port <PORT> --setParameter \
         recoverFromOplogAsStandalone=true --setParameter takeUnstableCheckpointOnShutdown=true",
        copy.display()
    );
    println!("      read-only checked; the top of local.oplog.rs is the backup's end; a clean stop checkpoints it");
    println!(
        "  S3  {m} --dbpath {} --bind_ip 127.0.0.1 --port <PORT>, then",
        copy.display()
    );
    println!(
        "      {} --host 127.0.0.1 --port <PORT> --out {} (the logical backup at the end), and a clean stop",
        mongodump.display(),
        work.root.join(DUMP_DIR).display()
    );
    println!("Then the usual plan, made from that dump with --backup-end at the recovered end; its slice is");
    println!("replayed into a spare started on the recovered copy (no restore of the backup: its data is there),");
    println!("and verified against the dump rolled forward by the embedded engine.");
    println!("dry run: the plan needs the recovered data, so it is shown by the real run; nothing was copied or started");
    work.discard_if_unused();
    Ok(0)
}

/// Copies, recovers and dumps the snapshot, then points the plan at the dump: the
/// returned dbpath is the recovered copy the spare must start on.
pub(super) fn prepare_plan(
    s: &Snapshot,
    probed: &[Probed],
    work: &WorkDir,
    (start_timeout, grace, rt, cancel, console, json): (
        std::time::Duration,
        std::time::Duration,
        &tokio::runtime::Runtime,
        &Cancel,
        &std::sync::Arc<Console>,
        bool,
    ),
    req: &mut PlanRequest,
) -> Result<PathBuf, Failure> {
    // Ctrl-C stops the copy, the recovery start and the dump, and their mongods.
    rt.block_on(async {
        crate::exec::signals::listen_for_signals(
            cancel,
            Some(super::replay::notice(console.clone(), grace)),
        )
    })?;
    let mongod = program(probed, Tool::Mongod)?;
    let mongodump = program(probed, Tool::Mongodump)?;
    let (version, notes) = versions(s, probed).inspect_err(|_| work.discard_if_unused())?;
    for l in mongod_line(probed) {
        console.line(&format!("snapshot: {l}"));
    }
    console.line(&format!(
        "snapshot: {}",
        versions_line(s, version.as_deref())
    ));
    for n in &notes {
        console.line(&format!("snapshot: note: {n}"));
    }
    let progress = super::progress::PhaseProgress::for_stderr(json);
    let o = PrepareOptions {
        mongod: &mongod,
        mongodump: &mongodump,
        work: &work.root,
        start_timeout,
        grace,
        mongod_version: version.as_deref(),
        progress: &progress,
    };
    let p = rt
        .block_on(prepare(s, &o, cancel, &|l| console.line(l)))
        .map_err(|e| {
            let _ = std::fs::remove_dir_all(work.root.join(COPY_DIR));
            if cancel.is_cancelled() {
                e.with_exit_code(cancel.exit_code().unwrap_or(130))
            } else {
                e.with_exit_code(exit::ERROR)
            }
        })?;
    req.backup = p.dump.clone();
    req.backup_end = Some(TimeValue {
        ts: p.recovered.end,
        form: TimeForm::OplogTs {
            ordinal_given: true,
        },
        input: p.recovered.end.to_string(),
    });
    req.backup_in_spare = true;
    Ok(p.copied.dbpath)
}

/// At the end: the recovered copy is kept with the spare (`--keep`), else removed.
pub(super) fn remove_copy(db: Option<&Path>, kept: bool) {
    if let (Some(db), false) = (db, kept) {
        let _ = std::fs::remove_dir_all(db);
    }
}
