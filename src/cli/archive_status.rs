//! `pitr status --archive DIR [--uri URI]`: what an oplog archive covers, whether
//! every chunk it lists is there and intact, its gaps, its size, whether an archiver
//! writes it, and (with `--uri`) its lag behind the live oplog. The archive side is
//! [`crate::oplog::oplog_archive::status`]. A path that is not an oplog archive is
//! named for what it is (a backup directory, a mongodump archive file, ...).
//!
//! Exit codes: 0 intact and no gap; 1 a chunk missing or damaged, a recorded gap,
//! (with `--uri`) an oplog that no longer reaches back to the archive, or a local
//! archive's filesystem filling within `--min-disk-time` ([`disk`]);
//! 2 error.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use serde::Serialize;

use crate::error::{exit, Failure};
use crate::mongo::error::human_secs;
use crate::mongo::oplog_source::{covers, window, Lower, Window};
use crate::mongo::{self as live};
use crate::oplog::oplog_archive::read::is_oplog_archive_at;
use crate::oplog::oplog_archive::status::{status_at, ArchiveStatus, ChunkDamage};
use crate::oplog::oplog_archive::{is_oplog_archive, GapRecord, SetAsideRecord, MANIFEST_FILE};
use crate::oplog::Ts;
use crate::size::human;
use crate::storage::Location;

use super::output::counted;
use crate::oplog::oplog_archive::disk::{self, Disk};

/// The archive against the live oplog.
#[derive(Clone, Debug, Serialize)]
struct Live {
    server: String,
    newest: Option<Ts>,
    oldest: Option<Ts>,
    /// Seconds between the archive's last entry and the server's newest.
    lag_seconds: Option<u64>,
    /// The oplog still holds the archive's last entry (or the archive is empty):
    /// the archiver can resume without a gap.
    resumable: bool,
}

#[derive(Serialize)]
struct JsonArchive<'a> {
    dir: String,
    replica_set: Option<&'a str>,
    source: &'a str,
    first: Option<Ts>,
    last: Option<Ts>,
    entries: u64,
    chunks: usize,
    bytes: u64,
    bson_bytes: u64,
    pruned_through: Option<Ts>,
    /// Whether each chunk's CRC-64 was checked (false with --quick: presence and
    /// size only).
    crc_checked: bool,
    /// Chunks missing or not matching the manifest (empty when all are intact).
    damaged: &'a [ChunkDamage],
    gaps: &'a [GapRecord],
    set_aside: Vec<JsonSetAside<'a>>,
    archiver_running: bool,
    partial_bytes: u64,
    live: Option<Live>,
    warning: Option<String>,
    /// A local archive's filesystem against its growth ([`disk`]).
    disk: Option<Disk>,
    /// Its free space lasts less than `--min-disk-time`.
    disk_warning: Option<String>,
}

#[derive(Serialize)]
struct JsonSetAside<'a> {
    dir: &'a str,
    diverged_at: Ts,
    through: Ts,
    chunks: usize,
    detected: &'a str,
    detail: &'a str,
}

/// What `pitr status --archive` was asked.
pub struct Ask<'a> {
    pub uri: Option<&'a str>,
    pub json: bool,
    pub quick: bool,
    /// Warn when the archive's filesystem fills within this at its growth.
    pub min_disk: std::time::Duration,
}

pub fn run(at: &Location, ask: &Ask<'_>) -> Result<u8, Failure> {
    let Ask {
        uri, json, quick, ..
    } = *ask;
    let dir = &at.display_path();
    match at.local_path() {
        Some(p) if !is_oplog_archive(p) => return Err(not_an_archive(p)),
        Some(_) => {}
        None if !is_oplog_archive_at(at)? => {
            return Err(Failure::new(format!(
                "`{at}` is not an oplog archive: there is no pitr `manifest.json` under it"
            ))
            .with_hint(
                "give the prefix `pitr archive --dir s3://bucket/prefix` writes (it holds `manifest.json` and `chunks/`); \
                 `pitr oplog stats URL` shows what any other oplog covers",
            ))
        }
        None => {}
    }
    let st = status_at(at, !quick)?;
    let last = st.manifest.last();
    let live = match uri {
        Some(u) => {
            let u = u.to_string();
            let (w, server): (Option<Window>, String) = live::block_on(async move {
                let (client, _) = super::progress::connect_saying(&u, !json).await?;
                let w = window(&client).await;
                let target = client.target().display.clone();
                client.close().await;
                Ok::<_, Failure>((w?, target))
            })??;
            Some(Live {
                server,
                newest: w.map(|w| w.newest.ts),
                oldest: w.map(|w| w.oldest.ts),
                lag_seconds: match (w, last) {
                    (Some(w), Some(l)) => Some(w.newest.ts.t.saturating_sub(l.t) as u64),
                    _ => None,
                },
                resumable: match (w, last) {
                    (Some(w), Some(l)) => covers(w.oldest.ts, Lower::Exclusive(l)),
                    _ => true,
                },
            })
        }
        None => None,
    };
    let warning = live.as_ref().filter(|l| !l.resumable).map(|l| {
        format!(
            "the oplog of `{}` no longer reaches back to the archive's last entry {} ({}): its oldest entry is {} ({}); \
             entries in between are lost to the archive, and the next `pitr archive` run records that gap",
            l.server,
            last.unwrap_or_default(),
            last.unwrap_or_default().utc_string(),
            l.oldest.unwrap_or_default(),
            l.oldest.unwrap_or_default().utc_string()
        )
    });
    let disk = at
        .local_path()
        .and_then(|p| disk::disk(p, &st.manifest.chunks));
    let disk_warning = disk
        .as_ref()
        .and_then(|d| disk::warning(d, &st.dir, ask.min_disk));
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if json {
        let view = json_view(
            &st,
            live.clone(),
            warning.clone(),
            (disk, disk_warning.clone()),
        );
        super::output::write_json(&mut out, &view)?;
    } else {
        render(&mut out, &st, live.as_ref())?;
        if let Some(d) = &disk {
            writeln!(out, "{}", disk::line(d))?;
        }
    }
    out.flush()?;
    if let Some(w) = &disk_warning {
        eprintln!("warning: {w}");
    }
    let gaps = &st.manifest.gaps;
    if !gaps.is_empty() {
        let list: Vec<String> = gaps
            .iter()
            .map(|g| format!("after {} and before {}", g.after, g.before))
            .collect();
        eprintln!(
            "warning: the oplog archive `{}` records {} ({}): entries in between may be missing, \
             and a restore whose range crosses one is refused",
            dir.display(),
            counted(gaps.len() as u64, "gap", "gaps"),
            list.join("; ")
        );
    }
    if let Some(w) = &warning {
        eprintln!("warning: {w}");
    }
    if !st.damaged.is_empty() {
        let list: Vec<String> = st
            .damaged
            .iter()
            .map(|d| format!("chunk {} ({})", d.seq, short_problem(d)))
            .collect();
        return Err(Failure::new(format!(
            "the oplog archive `{}` is damaged: {}",
            dir.display(),
            list.join(", ")
        ))
        .with_hint(
            "restore those chunk files from a copy of the archive (pitr never rewrites a complete chunk); \
             until then, commands whose range needs them fail naming them, and ranges that do not need them still work",
        )
        .with_exit_code(exit::NOT_FOUND));
    }
    Ok(
        if warning.is_some() || disk_warning.is_some() || !gaps.is_empty() {
            exit::NOT_FOUND
        } else {
            exit::OK
        },
    )
}

fn short_problem(d: &ChunkDamage) -> &'static str {
    use crate::oplog::oplog_archive::status::ChunkProblem::*;
    match d.problem {
        Missing => "missing",
        Unreadable => "unreadable",
        Size => "wrong size",
        Crc => "CRC-64 mismatch",
    }
}

fn json_view(
    st: &ArchiveStatus,
    live: Option<Live>,
    warning: Option<String>,
    (disk, disk_warning): (Option<Disk>, Option<String>),
) -> JsonArchive<'_> {
    let m = &st.manifest;
    JsonArchive {
        dir: st.dir.display().to_string(),
        replica_set: m.replica_set.as_deref(),
        source: &m.source,
        first: m.first(),
        last: m.last(),
        entries: m.entries(),
        chunks: m.chunks.len(),
        bytes: m.bytes(),
        bson_bytes: m.chunks.iter().map(|c| c.bson_bytes).sum(),
        pruned_through: m.pruned_through,
        crc_checked: st.crc_checked,
        damaged: &st.damaged,
        gaps: &m.gaps,
        set_aside: m
            .set_aside
            .iter()
            .map(|s: &SetAsideRecord| JsonSetAside {
                dir: &s.dir,
                diverged_at: s.diverged_at,
                through: s.through,
                chunks: s.chunks.len(),
                detected: &s.detected,
                detail: &s.detail,
            })
            .collect(),
        archiver_running: st.archiver_running,
        partial_bytes: st.partial.iter().map(|(_, n)| n).sum(),
        live,
        warning,
        disk,
        disk_warning,
    }
}

/// Why `path` is not an oplog archive, saying what it is instead.
fn not_an_archive(path: &Path) -> Failure {
    let shown = path.display();
    let archive_hint = "give the directory `pitr archive --dir DIR` writes (it holds `manifest.json` and `chunks/`)";
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Failure::new(format!("`{shown}` does not exist (no such directory)"))
                .with_hint(archive_hint);
        }
        Err(e) => {
            return Failure::new(format!("cannot read `{shown}`"))
                .with_hint("check its permissions (pitr only reads it)")
                .with_cause(e);
        }
    };
    if !meta.is_dir() {
        return match file_kind(path) {
            Some(FileKind::MongodumpArchive) => Failure::new(format!(
                "`{shown}` is a mongodump archive file (`mongodump --archive`), not an oplog archive directory"
            ))
            .with_hint(format!(
                "use it as `--backup {shown}`, or read the oplog it holds with `pitr oplog stats {shown}`; \
                 `status --archive` is for the directory `pitr archive` writes"
            )),
            Some(FileKind::Oplog) => Failure::new(format!(
                "`{shown}` is an oplog file, not an oplog archive directory"
            ))
            .with_hint(format!(
                "see what it covers with `pitr oplog stats {shown}`; `status --archive` is for the directory `pitr archive` writes"
            )),
            None => Failure::new(format!("`{shown}` is a file, not an oplog archive directory"))
                .with_hint(archive_hint),
        };
    }
    let manifest = path.join(MANIFEST_FILE);
    if manifest.exists() {
        return Failure::new(format!(
            "`{}` is not a pitr oplog archive manifest (it does not say \"format\": \"pitr-oplog-archive\"): \
             `{shown}` is not an oplog archive",
            manifest.display()
        ))
        .with_hint(archive_hint);
    }
    match dump_dir(path) {
        Some(DumpDir::Backup) => {
            return Failure::new(format!(
                "`{shown}` is a mongodump backup directory, not an oplog archive"
            ))
            .with_hint(format!(
                "use it as `--backup {shown}` (plan, replay, find-drop); `pitr oplog stats {shown}` shows its own oplog, if it has one"
            ))
        }
        Some(DumpDir::OplogOnly(file)) => {
            return Failure::new(format!(
                "`{shown}` is a dump of the oplog (`{file}`), not an oplog archive"
            ))
            .with_hint(format!(
                "use it as `--oplog {shown}` (plan, replay) or give it to find-drop; `pitr oplog stats {shown}` shows what it covers"
            ))
        }
        None => {}
    }
    if path.join(crate::oplog::oplog_archive::CHUNKS_DIR).is_dir() {
        return Failure::new(format!(
            "`{shown}` has a `chunks/` directory but no `manifest.json`: an oplog archive whose manifest is lost, or not one"
        ))
        .with_hint(
            "pitr finds chunks only through the manifest; restore `manifest.json` from a copy of the archive",
        );
    }
    Failure::new(format!(
        "`{shown}` is not an oplog archive: it has no `manifest.json`"
    ))
    .with_hint(archive_hint)
}

enum FileKind {
    MongodumpArchive,
    Oplog,
}

/// What a file holds, by its first bytes (decompressed when gzip).
fn file_kind(path: &Path) -> Option<FileKind> {
    let f = fs::File::open(path).ok()?;
    let (mut src, _) = crate::oplog::source::decompressed(&path.display().to_string(), f).ok()?;
    let mut head = Vec::new();
    src.by_ref().take(64 * 1024).read_to_end(&mut head).ok();
    if head.starts_with(&crate::archive::MAGIC) {
        return Some(FileKind::MongodumpArchive);
    }
    let len = i32::from_le_bytes(head.get(..4)?.try_into().ok()?);
    let doc = bson::RawDocument::from_bytes(head.get(..usize::try_from(len).ok()?)?).ok()?;
    crate::oplog::Entry::parse(doc)
        .ok()
        .map(|_| FileKind::Oplog)
}

/// What a directory without a manifest holds, when it is a dump.
enum DumpDir {
    /// Collections (a database directory other than `local` with dump files, or a
    /// `prelude.json`): a mongodump backup.
    Backup,
    /// Only an oplog (`pitr dump-oplog --out`, `mongodump -d local -c oplog.rs`).
    OplogOnly(String),
}

/// A mongodump `--out` directory, or a directory holding only an oplog dump.
fn dump_dir(dir: &Path) -> Option<DumpDir> {
    let dump_file = |name: &str| {
        [".bson", ".bson.gz", ".metadata.json", ".metadata.json.gz"]
            .iter()
            .any(|s| name.ends_with(s))
    };
    let collections = ["prelude.json", "prelude.json.gz"]
        .iter()
        .any(|f| dir.join(f).is_file())
        || fs::read_dir(dir).is_ok_and(|rd| {
            rd.flatten()
                .filter(|e| e.file_name() != "local" && e.path().is_dir())
                .any(|db| {
                    fs::read_dir(db.path()).is_ok_and(|files| {
                        files
                            .flatten()
                            .any(|f| dump_file(&f.file_name().to_string_lossy()))
                    })
                })
        });
    if collections {
        return Some(DumpDir::Backup);
    }
    crate::oplog::source::DIR_CANDIDATES
        .iter()
        .find(|c| dir.join(c).is_file())
        .map(|c| DumpDir::OplogOnly(c.to_string()))
}

fn render(out: &mut impl Write, st: &ArchiveStatus, live: Option<&Live>) -> io::Result<()> {
    let m = &st.manifest;
    writeln!(
        out,
        "archive   {} (pitr oplog archive of {}, from {})",
        st.dir.display(),
        m.replica_set.as_deref().map_or_else(
            || "a standalone".to_string(),
            |n| format!("replica set `{n}`")
        ),
        m.source
    )?;
    match (m.first(), m.last()) {
        (Some(f), Some(l)) => {
            writeln!(out, "covers    {f}  {}", f.utc_string())?;
            writeln!(
                out,
                "      to  {l}  {}  ({})",
                l.utc_string(),
                human_secs(l.t.saturating_sub(f.t) as u64)
            )?;
            writeln!(
                out,
                "          {} in {}, {} on disk ({} of oplog)",
                counted(m.entries(), "entry", "entries"),
                counted(m.chunks.len() as u64, "chunk", "chunks"),
                human(m.bytes()),
                human(m.chunks.iter().map(|c| c.bson_bytes).sum())
            )?;
        }
        _ => writeln!(out, "covers    nothing yet (no complete chunk)")?,
    }
    let what = if st.crc_checked {
        "present, with the size and CRC-64 the manifest records"
    } else {
        "present, with the size the manifest records (CRC-64 not checked: --quick)"
    };
    if st.damaged.is_empty() {
        if !m.chunks.is_empty() {
            writeln!(out, "chunks    all {} {what}", m.chunks.len())?;
        }
    } else {
        writeln!(
            out,
            "chunks    {} of {} DAMAGED (a reader refuses them)",
            st.damaged.len(),
            m.chunks.len()
        )?;
    }
    for d in &st.damaged {
        writeln!(
            out,
            "DAMAGED   chunk {} `{}` ({} to {}): {}",
            d.seq, d.file, d.first, d.last, d.detail
        )?;
    }
    if let Some(p) = m.pruned_through {
        writeln!(out, "pruned    entries up to {p} ({})", p.utc_string())?;
    }
    if m.gaps.is_empty() {
        writeln!(out, "gaps      none")?;
    }
    for g in &m.gaps {
        writeln!(
            out,
            "GAP       after {} ({}) and before {} ({}): entries in between may be missing ({})",
            g.after,
            g.after.utc_string(),
            g.before,
            g.before.utc_string(),
            g.cause
        )?;
    }
    for s in &m.set_aside {
        writeln!(
            out,
            "set aside {} from {} to {} in {}: {} (detected {})",
            counted(s.chunks.len() as u64, "chunk", "chunks"),
            s.diverged_at,
            s.through,
            s.dir,
            s.detail,
            s.detected
        )?;
    }
    let partial: u64 = st.partial.iter().map(|(_, n)| n).sum();
    writeln!(
        out,
        "writer    {}{}",
        if st.archiver_running {
            "an archiver is writing this directory"
        } else {
            "no archiver is running"
        },
        match (st.partial.is_empty(), st.dir.join(MANIFEST_FILE).exists()) {
            (true, _) => String::new(),
            (false, true) => format!("; chunk in progress: {} compressed", human(partial)),
            // A bucket: objects no manifest names (never read; prune removes them).
            (false, false) => format!(
                "; {} not in the manifest ({}: uploads of a run that stopped before recording them, \
                 never read; `pitr archive prune` removes them)",
                counted(st.partial.len() as u64, "chunk object", "chunk objects"),
                human(partial)
            ),
        }
    )?;
    if let Some(l) = live {
        match l.newest {
            Some(n) => writeln!(
                out,
                "server    {}: newest entry {n} ({}); the archive is {} behind{}",
                l.server,
                n.utc_string(),
                l.lag_seconds.map_or_else(|| "?".to_string(), human_secs),
                if l.resumable {
                    "; its oplog still reaches back to the archive's last entry"
                } else {
                    "; ITS OPLOG NO LONGER REACHES BACK TO THE ARCHIVE'S LAST ENTRY"
                }
            )?,
            None => writeln!(out, "server    {}: its oplog is empty", l.server)?,
        }
    }
    Ok(())
}
