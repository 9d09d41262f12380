//! `pitr archive prune`: deleting chunks older than the retention, but never one
//! that a given backup still needs to be rolled forward to the present, and never
//! the newest chunk (it holds the position the archiver resumes from; without it a
//! restart could not tell a gap).
//!
//! A backup ending at `E` needs every entry after `E` (and the entry at `E`, which
//! proves the archive continues the backup's own history): every chunk whose last
//! entry is at or after `E`. Chunks are deleted oldest first, so the archive stays
//! one contiguous range. The manifest is changed first (under its lock), the files
//! deleted after: a crash in between leaves files the manifest no longer names,
//! which the next prune deletes.

use std::fs;
use std::path::Path;

use super::manifest::{
    self, seq_of_file_name, ChunkRecord, Manifest, OplogArchiveError, SetAsideRecord,
};
use super::{CHUNKS_DIR, MANIFEST_FILE};
use crate::oplog::Ts;
use crate::storage::{self, Location};

/// A backup the archive must keep rolling forward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    /// How to name it (its path).
    pub name: String,
    /// Its end: the last entry of its own oplog.
    pub end: Ts,
}

/// What prune decided (and, unless it was a dry run, did).
#[derive(Clone, Debug, Default)]
pub struct PruneOutcome {
    pub deleted: Vec<ChunkRecord>,
    pub deleted_set_aside: Vec<SetAsideRecord>,
    /// Files no manifest named (left by an interrupted prune), deleted.
    pub leftovers: Vec<String>,
    /// Old chunks kept, and why (a backup's name, or "the newest chunk").
    pub kept_old: Vec<(ChunkRecord, String)>,
    /// Backups the archive cannot roll forward anyway (their end is before its
    /// first entry), with the archive's first entry.
    pub uncovered: Vec<(Protected, Ts)>,
    pub manifest: Option<Manifest>,
}

/// Which chunks to delete: those whose last entry is before `cutoff`, oldest first,
/// up to the first one a backup needs or the newest one.
pub fn plan(m: &Manifest, cutoff: Ts, protect: &[Protected]) -> PruneOutcome {
    let mut out = PruneOutcome::default();
    let n = m.chunks.len();
    let mut stopped = false;
    for (i, c) in m.chunks.iter().enumerate() {
        if c.last >= cutoff {
            break;
        }
        let why = if i + 1 == n {
            Some("the newest chunk (where the archiver resumes)".to_string())
        } else {
            protect
                .iter()
                .filter(|p| c.last >= p.end)
                .map(|p| format!("backup `{}` (ends at {})", p.name, p.end))
                .next()
        };
        match why {
            Some(w) => {
                stopped = true;
                out.kept_old.push((c.clone(), w));
            }
            None if !stopped => out.deleted.push(c.clone()),
            None => out
                .kept_old
                .push((c.clone(), "a newer chunk is kept".to_string())),
        }
    }
    if let Some(first) = m.chunks.first() {
        for p in protect {
            if p.end < first.first {
                out.uncovered.push((p.clone(), first.first));
            }
        }
    }
    out.deleted_set_aside = m
        .set_aside
        .iter()
        .filter(|s| s.through < cutoff)
        .cloned()
        .collect();
    out
}

/// [`prune`] for an archive anywhere: a local directory, or a bucket prefix. On a
/// bucket the manifest is changed by conditional put (retried on a fresh read when an
/// archiver renewed it in between), then the objects deleted; leftovers are chunk
/// objects the manifest does not name whose sequence number it has already passed
/// (never to be recorded), or older than a day (no upload takes that long).
pub fn prune_at(
    dir: &Location,
    cutoff: Ts,
    protect: &[Protected],
    dry_run: bool,
) -> Result<PruneOutcome, OplogArchiveError> {
    if let Some(p) = dir.local_path() {
        return prune(p, cutoff, protect, dry_run);
    }
    let s = storage::global();
    let known = Manifest::load_at(dir)?.ok_or_else(|| OplogArchiveError::BadManifest {
        path: dir.join(MANIFEST_FILE).display_path(),
        detail: "there is none: not an oplog archive".into(),
    })?;
    if dry_run {
        let mut out = plan(&known.0, cutoff, protect);
        out.manifest = Some(known.0);
        return Ok(out);
    }
    let (m, _, mut out) = manifest::update_at(
        dir,
        Some(known),
        |_| Ok(()),
        |m| {
            let out = plan(m, cutoff, protect);
            let changed = apply(m, &out, cutoff);
            Ok::<_, OplogArchiveError>((changed, out))
        },
    )?;
    for c in &out.deleted {
        s.delete(&dir.join(&c.file))?;
    }
    for sa in &out.deleted_set_aside {
        if sa.dir.starts_with(super::SET_ASIDE_DIR) {
            for o in s.list(&dir.join(&sa.dir))? {
                s.delete(&o.location)?;
            }
        }
    }
    let base = dir.to_string();
    let day_ago = chrono::Utc::now() - chrono::Duration::days(1);
    for o in s.list(&dir.join(CHUNKS_DIR))? {
        let url = o.location.to_string();
        let rel = url
            .strip_prefix(&base)
            .unwrap_or(&url)
            .trim_start_matches('/');
        let name = rel.strip_prefix(&format!("{CHUNKS_DIR}/")).unwrap_or(rel);
        let Some(seq) = seq_of_file_name(name) else {
            continue;
        };
        let referenced = m.chunks.iter().any(|c| c.file == rel)
            || m.set_aside
                .iter()
                .any(|s| s.chunks.iter().any(|c| c.file == rel));
        let dead = seq < m.next_seq || o.last_modified.is_some_and(|t| t < day_ago);
        if !referenced && dead {
            s.delete(&o.location)?;
            out.leftovers.push(rel.to_string());
        }
    }
    out.manifest = Some(m);
    Ok(out)
}

/// Changes the manifest as `out` (from [`plan`]) says; whether anything changed.
fn apply(m: &mut Manifest, out: &PruneOutcome, cutoff: Ts) -> bool {
    if out.deleted.is_empty() && out.deleted_set_aside.is_empty() {
        return false;
    }
    if let Some(last) = out.deleted.last() {
        m.pruned_through = Some(m.pruned_through.map_or(last.last, |p| p.max(last.last)));
    }
    m.chunks.drain(..out.deleted.len());
    let first = m.first().unwrap_or(Ts::MAX);
    // Gaps that now lie before the archive's first entry are history.
    m.gaps.retain(|g| g.before > first);
    m.set_aside.retain(|s| s.through >= cutoff);
    true
}

/// Prunes the archive `dir` (see the module comment); with `dry_run`, only says what
/// it would delete.
pub fn prune(
    dir: &Path,
    cutoff: Ts,
    protect: &[Protected],
    dry_run: bool,
) -> Result<PruneOutcome, OplogArchiveError> {
    let missing = || OplogArchiveError::BadManifest {
        path: dir.join(MANIFEST_FILE),
        detail: "there is none: not an oplog archive".into(),
    };
    if dry_run {
        let m = Manifest::load(dir)?.ok_or_else(missing)?;
        let mut out = plan(&m, cutoff, protect);
        out.manifest = Some(m);
        return Ok(out);
    }
    if Manifest::load(dir)?.is_none() {
        return Err(missing());
    }
    let (m, mut out) = manifest::update(dir, empty_manifest, |m| {
        let out = plan(m, cutoff, protect);
        let changed = apply(m, &out, cutoff);
        Ok::<_, OplogArchiveError>((changed, out))
    })?;
    let io_err = OplogArchiveError::io;
    for c in &out.deleted {
        let p = dir.join(&c.file);
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("delete", &p)(e)),
        }
    }
    for s in &out.deleted_set_aside {
        let p = dir.join(&s.dir);
        if p.starts_with(dir.join(super::SET_ASIDE_DIR)) && p.exists() {
            fs::remove_dir_all(&p).map_err(io_err("delete", &p))?;
        }
    }
    // Chunk files older than the first chunk that no manifest names: what an
    // interrupted prune left.
    let first_seq = m.chunks.first().map_or(m.next_seq, |c| c.seq);
    let chunks = dir.join(CHUNKS_DIR);
    if let Ok(rd) = fs::read_dir(&chunks) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if seq_of_file_name(&name).is_some_and(|s| s < first_seq) {
                let rel = format!("{CHUNKS_DIR}/{name}");
                let referenced = m
                    .set_aside
                    .iter()
                    .any(|s| s.chunks.iter().any(|c| c.file == rel));
                if !referenced {
                    fs::remove_file(e.path()).map_err(io_err("delete", &e.path()))?;
                    out.leftovers.push(rel);
                }
            }
        }
    }
    manifest::sync_dir(&chunks);
    out.manifest = Some(m);
    Ok(out)
}

fn empty_manifest() -> Manifest {
    // `prune` checked that the manifest exists; if it vanished since, an empty one
    // is stored by nobody (the update finds nothing to delete).
    Manifest::new(String::new(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(ranges: &[(u32, u32)]) -> Manifest {
        let mut m = Manifest::new("x".into(), None);
        for (n, (a, b)) in ranges.iter().enumerate() {
            let (first, last) = (Ts::new(*a, 1), Ts::new(*b, 1));
            let seq = n as u64 + 1;
            m.chunks.push(ChunkRecord::placeholder(seq, first, last));
            m.next_seq = seq + 1;
        }
        m
    }

    fn deleted(o: &PruneOutcome) -> Vec<u64> {
        o.deleted.iter().map(|c| c.seq).collect()
    }

    #[test]
    fn old_chunks_go_unless_a_backup_needs_them() {
        let a = m(&[(10, 19), (20, 29), (30, 39), (40, 49)]);
        // Everything before 35 is old: chunks 1 and 2 (chunk 3 ends after it).
        assert_eq!(deleted(&plan(&a, Ts::new(35, 0), &[])), vec![1, 2]);
        // A backup ending inside chunk 2 needs chunk 2 (and all later).
        let b = Protected {
            name: "nightly".into(),
            end: Ts::new(25, 0),
        };
        let o = plan(&a, Ts::new(35, 0), std::slice::from_ref(&b));
        assert_eq!(deleted(&o), vec![1]);
        assert!(o.kept_old[0].1.contains("nightly"), "{:?}", o.kept_old);
        // A backup ending exactly at a chunk's last entry needs that chunk (the anchor).
        let b = Protected {
            name: "x".into(),
            end: Ts::new(19, 1),
        };
        assert!(deleted(&plan(&a, Ts::new(35, 0), &[b])).is_empty());
        // ... and one ending just after it does not.
        let b = Protected {
            name: "x".into(),
            end: Ts::new(19, 2),
        };
        assert_eq!(deleted(&plan(&a, Ts::new(35, 0), &[b])), vec![1]);
        // The newest chunk stays even when everything is old.
        let o = plan(&a, Ts::new(99, 0), &[]);
        assert_eq!(deleted(&o), vec![1, 2, 3]);
        assert!(o.kept_old[0].1.contains("newest"));
        // A backup older than the archive is reported.
        let b = Protected {
            name: "old".into(),
            end: Ts::new(5, 0),
        };
        assert_eq!(plan(&a, Ts::new(0, 0), &[b]).uncovered.len(), 1);
    }
}
