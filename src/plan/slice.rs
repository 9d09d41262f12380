//! Writing the oplog slice: the entries with `backup_end < ts < limit`, filtered by
//! `--ns`, minus `--skip`, in ts order, as `oplog.bson` of a mongorestore-ready
//! directory.
//!
//! mongorestore stops at the first entry at or past `--oplogLimit`, so an unsorted
//! file silently loses what follows: the slice is always written sorted. When the
//! first pass found the oplog in order, entries stream straight to the file
//! (constant memory). Otherwise they are sorted: in memory up to `sort_memory`
//! bytes, beyond that as sorted runs in a temporary directory beside the output,
//! merged at the end (an external merge sort: memory stays bounded whatever the
//! slice's size, `sort_memory` plus about 64 KiB per run while merging; disk use
//! is about twice the slice; one open file per run, so a slice of N bytes needs
//! N / sort_memory file descriptors). An entry identical to one
//! already written with the same ts (overlapping dumps concatenated) is written
//! once; different entries sharing a ts are all kept, in input order, as
//! mongorestore would apply them all.
//!
//! The file is written under a temporary name in the output directory; the caller
//! renames it into place only once the whole plan is complete.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::{NamedTempFile, TempDir};

use crate::oplog::oplog_archive::ChunkRange;
use crate::oplog::reader::not_an_entry;
use crate::oplog::{self, Entry, EntryError, ReadOptions, Ts};

use super::error::PlanError;
use super::filter::{NsFilter, Target};
use super::scan::{touches, EntryRef};
use super::stake::LostWrites;
use super::tee::Tee;
use super::Progress;
use crate::engine::walk::txn_key;

/// Default memory for sorting an unsorted slice before spilling runs to disk.
pub const DEFAULT_SORT_MEMORY: usize = 256 << 20;

/// What goes into the slice.
pub struct SliceRequest<'a> {
    pub oplog: &'a str,
    pub opts: ReadOptions,
    /// `E`: entries at or before it are the backup's business.
    pub from_exclusive: Ts,
    /// `L`: the exclusive limit.
    pub to_exclusive: Ts,
    pub filter: Option<&'a NsFilter>,
    /// Namespaces of the backup (for matching database drops against `--ns`).
    pub known_ns: &'a [String],
    /// Transactions `--ns` selects (from the first pass).
    pub ns_txn_keys: &'a HashSet<Vec<u8>>,
    pub skips: &'a HashSet<Ts>,
    /// The first pass found the whole oplog in ts order.
    pub input_sorted: bool,
    /// ... and no two entries sharing a ts: the slice then has no duplicate to drop,
    /// and no entry is kept to compare the next with (a copy of every entry, 3% of
    /// the embedded replay's CPU at 1 GiB). Should one turn up after all (the file
    /// changed between the passes), the slice stops with [`PlanError::Changed`].
    pub input_unique_ts: bool,
    /// Directory for the temporary output and sort runs.
    pub dir: &'a Path,
    /// The slice is kept (`OUT/oplog.bson`). Without it, and with a tee (the
    /// entries applied as they are read), nothing is written: the writer waits
    /// for the apply instead of leaving chunks in the file for it.
    pub keep: bool,
    pub sort_memory: usize,
    /// Bytes to write first, before the slice: the backup's own oplog (decompressed),
    /// so that the file is at once what a one-run mongorestore reads (the backup's
    /// entries, then the slice) and needs no second copy. [`SliceOutcome::prefix_bytes`]
    /// says where the slice starts.
    pub prefix: Option<&'a Path>,
}

/// What was written.
pub struct SliceOutcome {
    /// The slice, under a temporary name in the output directory, after
    /// `prefix_bytes` of the request's prefix.
    pub file: NamedTempFile,
    /// Where the slice starts in `file` (0 without a prefix).
    pub prefix_bytes: u64,
    pub entries: u64,
    pub bytes: u64,
    pub first_ts: Option<Ts>,
    pub last_ts: Option<Ts>,
    /// The input order was not ts order: pitr sorted the slice.
    pub reordered: bool,
    /// Entries dropped because an identical entry (same ts, same bytes) came before.
    pub duplicates_dropped: u64,
    /// Entries kept although another, different entry has the same ts.
    pub same_ts_kept: u64,
    /// In range but not touching a `--ns` namespace.
    pub filtered_out: u64,
    /// `--skip` positions found in range and left out, with what they were.
    pub skipped: Vec<EntryRef>,
    /// `--skip` positions that `--ns` had already filtered out.
    pub skipped_filtered: Vec<EntryRef>,
    /// Kept transactions that also write namespaces outside `--ns`.
    pub mixed_transactions: u64,
    /// The first entry at or after the limit in the oplog.
    pub at_or_after_limit: Option<EntryRef>,
    /// The writes at or after the limit: what the restore leaves out.
    pub after_limit: LostWrites,
    /// The pass read the oplog past the limit (false for [`empty`]).
    pub after_limit_read: bool,
}

/// Writes an empty slice (nothing to replay after the backup's end).
pub fn empty(dir: &Path) -> Result<SliceOutcome, PlanError> {
    let file = temp_in(dir)?;
    Ok(outcome(file))
}

fn outcome(file: NamedTempFile) -> SliceOutcome {
    SliceOutcome {
        file,
        prefix_bytes: 0,
        entries: 0,
        bytes: 0,
        first_ts: None,
        last_ts: None,
        reordered: false,
        duplicates_dropped: 0,
        same_ts_kept: 0,
        filtered_out: 0,
        skipped: Vec::new(),
        skipped_filtered: Vec::new(),
        mixed_transactions: 0,
        at_or_after_limit: None,
        after_limit: LostWrites::default(),
        after_limit_read: false,
    }
}

fn temp_in(dir: &Path) -> Result<NamedTempFile, PlanError> {
    tempfile::Builder::new()
        .prefix(".pitr-slice-")
        .suffix(".bson.tmp")
        .tempfile_in(dir)
        .map_err(|source| PlanError::Write {
            path: dir.to_path_buf(),
            source,
        })
}

/// Reads the oplog a second time and writes the slice.
pub fn write(req: &SliceRequest<'_>, progress: &dyn Progress) -> Result<SliceOutcome, PlanError> {
    write_teed(req, None, progress)
}

/// [`write`], also handing every entry written to `tee` (the embedded engine's
/// apply, on another thread: [`super::tee`]), and its end once the last one is out,
/// before the file is synced.
pub fn write_teed(
    req: &SliceRequest<'_>,
    mut tee: Option<Tee>,
    progress: &dyn Progress,
) -> Result<SliceOutcome, PlanError> {
    // An oplog archive: only the chunks from the backup's end to the first entry at
    // or after the limit (later ones may be missing; the writes in them are counted
    // by [`count_after`]). Other sources are read whole, and the writes after the
    // limit counted on the way.
    let range = ChunkRange {
        from: Some(req.from_exclusive),
        to: Some(req.to_exclusive),
    };
    let mut r = oplog::open_range(req.oplog, req.opts, &range)?;
    let (counter, total) = r.progress();
    // Not kept and applied as read: the file stays empty (and is removed).
    let to_file = req.keep || tee.is_none() || req.prefix.is_some() || !req.input_sorted;
    let what = match to_file {
        true => "writing the slice",
        false => "reading the slice",
    };
    let mut tick = progress.pass(what, counter, total);
    let file = temp_in(req.dir)?;
    let out_path = file.path().to_path_buf();
    let mut out = outcome(file);
    let writer = match to_file {
        true => Some(file_writer(req, &mut out)?),
        false => None,
    };
    if let Some(t) = tee.as_mut().filter(|_| to_file) {
        // Chunks the apply cannot take yet are read back from here (without a
        // second handle, the writer waits for the apply instead).
        if let Ok(f) = out.file.as_file().try_clone() {
            t.read_from(f, out.prefix_bytes);
        }
    }
    let dedup = Dedup::new(
        writer,
        out_path.clone(),
        tee,
        req.input_sorted && req.input_unique_ts,
    );
    let mut sink = if req.input_sorted {
        Sink::Stream(dedup)
    } else {
        Sink::Sort(Sorter::new(req.dir, req.sort_memory, dedup))
    };
    let mut selected: Vec<String> = req
        .known_ns
        .iter()
        .filter(|ns| req.filter.is_none_or(|f| f.matches(ns)))
        .cloned()
        .collect();
    let mut prev: Option<Ts> = None;
    let mut n = 0u64;
    let name = r.name().to_string();
    while let Some((doc, offset, index)) = r.next_raw()? {
        n += 1;
        if n.is_multiple_of(8192) {
            tick();
            crate::engine::replica::interrupt::check()?;
        }
        // Without --ns, an entry inside the range and not skipped is copied as it
        // is: only its `ts` is read (the first pass parsed every entry already).
        if req.filter.is_none() {
            if let Some((ts, _)) = crate::oplog::elements::peek_ts_op(doc.as_bytes()) {
                if ts > req.from_exclusive && ts < req.to_exclusive && !req.skips.contains(&ts) {
                    sink.keep(&mut prev, ts, doc.as_bytes(), (req.oplog, offset, index))?;
                    continue;
                }
            }
        }
        let e = match Entry::parse(doc) {
            Ok(mut e) => {
                (e.offset, e.index) = (offset, index);
                e
            }
            Err(err) => return Err(not_an_entry(name.clone(), offset, index, err).into()),
        };
        let ts = e.ts;
        if ts >= req.to_exclusive {
            if out.at_or_after_limit.as_ref().is_none_or(|b| ts < b.ts) {
                out.at_or_after_limit = Some(EntryRef::of(&e));
            }
            let (offset, index) = (e.offset, e.index);
            out.after_limit.see(&e).map_err(|err| {
                PlanError::from(not_an_entry(req.oplog.to_string(), offset, index, err))
            })?;
            continue;
        }
        if ts <= req.from_exclusive {
            continue;
        }
        let (offset, index) = (e.offset, e.index);
        let keep = match req.filter {
            None => true,
            Some(f) => keep_for_ns(
                &e,
                f,
                req.ns_txn_keys,
                &mut selected,
                &mut out.mixed_transactions,
            )
            .map_err(|err| {
                PlanError::from(not_an_entry(req.oplog.to_string(), offset, index, err))
            })?,
        };
        if req.skips.contains(&ts) {
            if keep {
                out.skipped.push(EntryRef::of(&e));
            } else {
                out.skipped_filtered.push(EntryRef::of(&e));
            }
            continue;
        }
        if !keep {
            out.filtered_out += 1;
            continue;
        }
        sink.keep(&mut prev, ts, e.raw.as_bytes(), (req.oplog, offset, index))?;
    }
    drop(tick);
    out.after_limit_read = !crate::oplog::oplog_archive::is_oplog_archive(Path::new(req.oplog));
    let stats = sink.finish()?;
    out.entries = stats.entries;
    out.bytes = stats.bytes;
    out.first_ts = stats.first;
    out.last_ts = stats.last;
    out.reordered = stats.reordered;
    out.duplicates_dropped = stats.duplicates;
    out.same_ts_kept = stats.same_ts;
    Ok(out)
}

/// The writes at or after `limit` in the oplog, when no slice pass read them (the
/// restore point lies inside the backup's own oplog or right after its end, or the
/// oplog is an archive whose later chunks the restore does not need). What cannot be
/// read (a missing or damaged later chunk) ends the count with a note instead of
/// failing the plan: the restore does not need those entries.
pub fn count_after(
    oplog: &str,
    opts: ReadOptions,
    limit: Ts,
    progress: &dyn Progress,
) -> (LostWrites, Option<String>) {
    let range = ChunkRange {
        from: Some(limit),
        to: None,
    };
    let mut lost = LostWrites::default();
    let mut r = match oplog::open_range(oplog, opts, &range) {
        Ok(r) => r,
        Err(e) => return (lost, Some(format!("not counted: {e}"))),
    };
    let (counter, total) = r.progress();
    let mut tick = progress.pass("counting the writes after the limit", counter, total);
    let mut n = 0u64;
    let mut last = None;
    loop {
        let e = match r.next_entry() {
            Ok(Some(e)) => e,
            Ok(None) => return (lost, None),
            Err(err) => {
                let upto = last.map_or_else(String::new, |t: Ts| format!(" up to {t}"));
                return (lost, Some(format!("counted{upto} only: {err}")));
            }
        };
        n += 1;
        if n.is_multiple_of(8192) {
            tick();
        }
        if e.ts < limit {
            continue;
        }
        last = Some(e.ts);
        if let Err(err) = lost.see(&e) {
            let err = not_an_entry(oplog.to_string(), e.offset, e.index, err);
            return (lost, Some(format!("counted up to {} only: {err}", e.ts)));
        }
    }
}

/// The `--ns` decision for one in-range entry.
fn keep_for_ns(
    e: &Entry<'_>,
    f: &NsFilter,
    txn_keys: &HashSet<Vec<u8>>,
    selected: &mut Vec<String>,
    mixed: &mut u64,
) -> Result<bool, EntryError> {
    if let Some(key) = txn_key(e) {
        // Transactions stay whole: every part and the commit, if any part matches.
        let keep = txn_keys.contains(&key);
        if keep && e.command_name() == Some("applyOps") && !all_leaves_match(e, f)? {
            *mixed += 1;
        }
        return Ok(keep);
    }
    if e.command_name() == Some("applyOps") {
        return touches(e, f);
    }
    let keep = f.leaf_matches(e, selected.iter().map(String::as_str)) == Some(true);
    if keep {
        if let Target::Ns(ns) | Target::Rename(_, ns) = super::filter::target(e) {
            if !selected.contains(&ns) {
                selected.push(ns);
            }
        }
    }
    Ok(keep)
}

fn all_leaves_match(e: &Entry<'_>, f: &NsFilter) -> Result<bool, EntryError> {
    let mut all = true;
    e.for_each_leaf(&mut |l: &Entry<'_>| -> Result<(), EntryError> {
        if f.leaf_matches(l, std::iter::empty()) == Some(false) {
            all = false;
        }
        Ok(())
    })?;
    Ok(all)
}

struct SinkStats {
    entries: u64,
    bytes: u64,
    first: Option<Ts>,
    last: Option<Ts>,
    reordered: bool,
    duplicates: u64,
    same_ts: u64,
}

/// The final writer, fed in ts order: drops an entry identical to one already
/// written with the same ts.
struct Dedup {
    /// None: the slice is not kept, only handed to the tee.
    w: Option<BufWriter<File>>,
    path: PathBuf,
    group_ts: Option<Ts>,
    /// The entries written with `group_ts` (almost always one), one after another
    /// in one reused buffer (no allocation per entry), and where each ends.
    group: Vec<u8>,
    group_ends: Vec<usize>,
    stats: SinkStats,
    /// Where each entry written also goes (the embedded engine's apply).
    tee: Option<Tee>,
    /// No two entries share a ts ([`SliceRequest::input_unique_ts`]): no group kept.
    unique: bool,
}

impl Dedup {
    /// `unique`: no two entries share a ts ([`SliceRequest::input_unique_ts`] of
    /// an oplog in ts order), so no group is kept to compare with.
    fn new(w: Option<BufWriter<File>>, path: PathBuf, tee: Option<Tee>, unique: bool) -> Dedup {
        Dedup {
            w,
            path,
            tee,
            group_ts: None,
            group: Vec::new(),
            group_ends: Vec::new(),
            unique,
            stats: SinkStats {
                entries: 0,
                bytes: 0,
                first: None,
                last: None,
                reordered: false,
                duplicates: 0,
                same_ts: 0,
            },
        }
    }

    fn put(&mut self, ts: Ts, bytes: &[u8]) -> Result<(), PlanError> {
        if self.unique {
            // Nothing to compare with (`Sink::keep` checks that no ts repeats).
        } else if self.group_ts == Some(ts) {
            let mut start = 0;
            let seen = self.group_ends.iter().any(|&end| {
                let same = &self.group[start..end] == bytes;
                start = end;
                same
            });
            if seen {
                self.stats.duplicates += 1;
                return Ok(());
            }
            self.stats.same_ts += 1;
        } else {
            self.group_ts = Some(ts);
            self.group.clear();
            self.group_ends.clear();
        }
        if let Some(w) = &mut self.w {
            w.write_all(bytes).map_err(|source| PlanError::Write {
                path: self.path.clone(),
                source,
            })?;
        }
        if let Some(t) = &mut self.tee {
            let w = &mut self.w;
            t.put(bytes, &mut || flush(w));
        }
        if !self.unique {
            self.group.extend_from_slice(bytes);
            self.group_ends.push(self.group.len());
        }
        self.stats.entries += 1;
        self.stats.bytes += bytes.len() as u64;
        self.stats.first.get_or_insert(ts);
        self.stats.last = Some(ts);
        Ok(())
    }

    fn finish(mut self) -> Result<SinkStats, PlanError> {
        // The apply need not wait for the file's sync.
        if let Some(t) = &mut self.tee {
            let w = &mut self.w;
            t.end(&mut || flush(w));
        }
        let io = |source| PlanError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(w) = &mut self.w {
            w.flush().map_err(io)?;
            w.get_ref().sync_all().map_err(io)?;
        }
        Ok(self.stats)
    }
}

/// The writer of the slice's file, after the request's prefix (copied, its length
/// in `out.prefix_bytes`).
fn file_writer(
    req: &SliceRequest<'_>,
    out: &mut SliceOutcome,
) -> Result<BufWriter<File>, PlanError> {
    let file = out
        .file
        .as_file()
        .try_clone()
        .map_err(|source| PlanError::Write {
            path: out.file.path().to_path_buf(),
            source,
        })?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    if let Some(p) = req.prefix {
        let f = File::open(p).map_err(|source| PlanError::Io {
            path: p.to_path_buf(),
            source,
        })?;
        let (mut r, _) = crate::oplog::source::decompressed(&p.display().to_string(), f)?;
        out.prefix_bytes = std::io::copy(&mut r, &mut writer).map_err(|source| PlanError::Io {
            path: p.to_path_buf(),
            source,
        })?;
    }
    Ok(writer)
}

/// The slice's buffered writer flushed, when there is one.
fn flush(w: &mut Option<BufWriter<File>>) -> std::io::Result<()> {
    w.as_mut().map_or(Ok(()), |w| w.flush())
}

enum Sink {
    Stream(Dedup),
    Sort(Sorter),
}

impl Sink {
    /// An entry of the slice (`prev`: the greatest ts kept so far); streamed, the
    /// oplog must still be in the order the first pass found (`at`: its name, the
    /// entry's offset and number).
    fn keep(
        &mut self,
        prev: &mut Option<Ts>,
        ts: Ts,
        bytes: &[u8],
        (name, offset, index): (&str, u64, u64),
    ) -> Result<(), PlanError> {
        if let Sink::Stream(d) = self {
            if prev.is_some_and(|p| ts < p) {
                return Err(PlanError::Changed {
                    name: name.to_string(),
                    what: format!("entry {} at byte {offset} is out of order, but the first pass found the file sorted", index + 1),
                });
            }
            if d.unique && *prev == Some(ts) {
                return Err(PlanError::Changed {
                    name: name.to_string(),
                    what: format!("entry {} at byte {offset} has the ts of the one before ({ts}), but the first pass found no two entries sharing one", index + 1),
                });
            }
        }
        *prev = Some(prev.map_or(ts, |p| p.max(ts)));
        self.push(ts, bytes)
    }

    fn push(&mut self, ts: Ts, bytes: &[u8]) -> Result<(), PlanError> {
        match self {
            Sink::Stream(d) => d.put(ts, bytes),
            Sink::Sort(s) => s.push(ts, bytes),
        }
    }

    fn finish(self) -> Result<SinkStats, PlanError> {
        match self {
            Sink::Stream(d) => d.finish(),
            Sink::Sort(s) => s.finish(),
        }
    }
}

/// External merge sort by ts, stable (equal ts keep input order).
struct Sorter {
    dir: PathBuf,
    budget: usize,
    arena: Vec<u8>,
    /// (ts, start, len) into `arena`, in input order.
    index: Vec<(Ts, usize, usize)>,
    runs: Vec<NamedTempFile>,
    runs_dir: Option<TempDir>,
    out: Dedup,
    last_in: Option<Ts>,
    reordered: bool,
}

impl Sorter {
    fn new(dir: &Path, budget: usize, out: Dedup) -> Sorter {
        Sorter {
            dir: dir.to_path_buf(),
            budget: budget.max(1),
            arena: Vec::new(),
            index: Vec::new(),
            runs: Vec::new(),
            runs_dir: None,
            out,
            last_in: None,
            reordered: false,
        }
    }

    fn push(&mut self, ts: Ts, bytes: &[u8]) -> Result<(), PlanError> {
        if self.last_in.is_some_and(|p| ts < p) {
            self.reordered = true;
        }
        self.last_in = Some(ts);
        self.index.push((ts, self.arena.len(), bytes.len()));
        self.arena.extend_from_slice(bytes);
        if self.arena.len() >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn sorted_index(&mut self) -> Vec<(Ts, usize, usize)> {
        let mut idx = std::mem::take(&mut self.index);
        idx.sort_by_key(|&(ts, start, _)| (ts, start));
        idx
    }

    fn spill(&mut self) -> Result<(), PlanError> {
        let write_err = |path: &Path, source| PlanError::Write {
            path: path.to_path_buf(),
            source,
        };
        if self.runs_dir.is_none() {
            let d = tempfile::Builder::new()
                .prefix(".pitr-sort-")
                .tempdir_in(&self.dir)
                .map_err(|e| write_err(&self.dir, e))?;
            self.runs_dir = Some(d);
        }
        let runs_dir = self
            .runs_dir
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default();
        let run = NamedTempFile::new_in(&runs_dir).map_err(|e| write_err(&runs_dir, e))?;
        let idx = self.sorted_index();
        {
            let mut w = BufWriter::with_capacity(1 << 20, run.as_file());
            for &(_, start, len) in &idx {
                w.write_all(&self.arena[start..start + len])
                    .map_err(|e| write_err(run.path(), e))?;
            }
            w.flush().map_err(|e| write_err(run.path(), e))?;
        }
        self.arena.clear();
        self.runs.push(run);
        Ok(())
    }

    fn finish(mut self) -> Result<SinkStats, PlanError> {
        if self.runs.is_empty() {
            let idx = self.sorted_index();
            for &(ts, start, len) in &idx {
                let (arena, out) = (&self.arena, &mut self.out);
                out.put(ts, &arena[start..start + len])?;
            }
        } else {
            if !self.index.is_empty() {
                self.spill()?;
            }
            self.merge()?;
        }
        let mut stats = self.out.finish()?;
        stats.reordered = self.reordered;
        Ok(stats)
    }

    fn merge(&mut self) -> Result<(), PlanError> {
        let mut readers: Vec<RunReader> = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            readers.push(RunReader::open(run.path())?);
        }
        let mut heads: Vec<Option<Vec<u8>>> = vec![None; readers.len()];
        let mut heap = BinaryHeap::new();
        for (k, r) in readers.iter_mut().enumerate() {
            if let Some((ts, bytes)) = r.next()? {
                heads[k] = Some(bytes);
                heap.push(Reverse((ts, k)));
            }
        }
        while let Some(Reverse((ts, k))) = heap.pop() {
            if let Some(bytes) = heads[k].take() {
                self.out.put(ts, &bytes)?;
            }
            if let Some((ts, bytes)) = readers[k].next()? {
                heads[k] = Some(bytes);
                heap.push(Reverse((ts, k)));
            }
        }
        Ok(())
    }
}

/// Reads back a sort run pitr wrote itself (entries already validated), with a
/// small buffer: the merge holds one reader per run, so memory is about
/// 64 KiB per run plus one entry each.
struct RunReader {
    r: std::io::BufReader<File>,
    path: PathBuf,
}

impl RunReader {
    fn open(path: &Path) -> Result<RunReader, PlanError> {
        let f = File::open(path).map_err(|source| PlanError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(RunReader {
            r: std::io::BufReader::with_capacity(64 << 10, f),
            path: path.to_path_buf(),
        })
    }

    fn next(&mut self) -> Result<Option<(Ts, Vec<u8>)>, PlanError> {
        use std::io::Read;
        let io = |source| PlanError::Io {
            path: self.path.clone(),
            source,
        };
        let mut len = [0u8; 4];
        match self.r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(io(e)),
        }
        let n = (i32::from_le_bytes(len).max(5) as usize).min(oplog::MAX_ENTRY_BYTES);
        let mut doc = vec![0u8; n];
        doc[..4].copy_from_slice(&len);
        self.r.read_exact(&mut doc[4..]).map_err(io)?;
        let ts = bson::RawDocument::from_bytes(&doc)
            .ok()
            .and_then(|d| d.get_timestamp("ts").ok())
            .map(Ts::from)
            .ok_or_else(|| PlanError::Changed {
                name: self.path.display().to_string(),
                what: "a sort run no longer holds the entries pitr wrote".into(),
            })?;
        Ok(Some((ts, doc)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Quiet;
    use bson::{doc, Bson, Document, Timestamp};

    fn ts(t: u32, i: u32) -> Bson {
        Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    fn ins(t: u32, i: u32, ns: &str) -> Document {
        doc! { "ts": ts(t, i), "op": "i", "ns": ns, "o": { "_id": (t * 100 + i) as i64 } }
    }

    fn write_oplog(dir: &Path, docs: &[Document]) -> String {
        let p = dir.join("in.bson");
        let mut b = Vec::new();
        for d in docs {
            b.extend(bson::to_vec(d).unwrap());
        }
        std::fs::write(&p, b).unwrap();
        p.display().to_string()
    }

    fn read_ts(path: &Path) -> Vec<(u32, u32)> {
        let mut r = oplog::open(&path.to_string_lossy(), ReadOptions::default()).unwrap();
        let mut v = Vec::new();
        while let Some(e) = r.next_entry().unwrap() {
            v.push((e.ts.t, e.ts.i));
        }
        v
    }

    fn req<'a>(
        path: &'a str,
        dir: &'a Path,
        sorted: bool,
        memory: usize,
        empty: &'a HashSet<Vec<u8>>,
        skips: &'a HashSet<Ts>,
    ) -> SliceRequest<'a> {
        SliceRequest {
            oplog: path,
            opts: ReadOptions::default(),
            from_exclusive: Ts::new(10, 1),
            to_exclusive: Ts::new(20, 0),
            filter: None,
            known_ns: &[],
            ns_txn_keys: empty,
            skips,
            input_sorted: sorted,
            input_unique_ts: false,
            dir,
            keep: true,
            sort_memory: memory,
            prefix: None,
        }
    }

    /// Not kept, with a tee (the embedded engine): the apply gets the bytes the
    /// kept slice holds, in order, and nothing is written; the stats are the same.
    /// Many entries, so that the writer waits for the reader (8 chunks of 1 MiB).
    #[test]
    fn a_slice_not_kept_is_handed_over_whole_and_never_written() {
        let d = tempfile::tempdir().unwrap();
        let pad = "x".repeat(2000);
        let docs: Vec<Document> = (0..12_000u32)
            .map(|i| {
                let mut e = ins(10 + i / 1000, i % 1000 + 1, "a.b");
                e.insert("pad", pad.as_str());
                e
            })
            .collect();
        let path = write_oplog(d.path(), &docs);
        let (none, skips) = (HashSet::new(), HashSet::new());
        let mut r = req(&path, d.path(), true, DEFAULT_SORT_MEMORY, &none, &skips);
        r.to_exclusive = Ts::new(30, 0);
        let kept = write(&r, &Quiet).unwrap();
        let want = std::fs::read(kept.file.path()).unwrap();
        assert!(want.len() > 16 << 20, "{}", want.len());
        r.keep = false;
        // As the embedded replay asks it of an oplog whose ts never repeat: no entry
        // kept to compare the next with, the same bytes.
        r.input_unique_ts = true;
        let (tee, mut stream) = crate::plan::tee::pair();
        let (out, got) = std::thread::scope(|s| {
            let reader = s.spawn(move || {
                let mut got = Vec::new();
                std::io::Read::read_to_end(&mut stream, &mut got).map(|_| got)
            });
            let out = write_teed(&r, Some(tee), &Quiet).unwrap();
            (out, reader.join().unwrap().unwrap())
        });
        assert!(
            got == want,
            "{} bytes handed over, {} kept",
            got.len(),
            want.len()
        );
        assert_eq!(std::fs::metadata(out.file.path()).unwrap().len(), 0);
        assert_eq!(
            (out.entries, out.bytes, out.first_ts, out.last_ts),
            (kept.entries, kept.bytes, kept.first_ts, kept.last_ts)
        );
        assert_eq!(out.entries, 12_000 - 1);
    }

    #[test]
    fn bounds_sorting_duplicates_and_skips() {
        let d = tempfile::tempdir().unwrap();
        let docs = vec![
            ins(10, 1, "a.b"),
            ins(15, 1, "a.b"),
            ins(12, 1, "a.b"),
            ins(12, 1, "a.b"),
            ins(19, 9, "a.b"),
            ins(13, 1, "a.b"),
            ins(20, 0, "a.b"),
            ins(11, 1, "a.b"),
            ins(25, 1, "a.b"),
        ];
        let path = write_oplog(d.path(), &docs);
        let none = HashSet::new();
        let skips: HashSet<Ts> = [Ts::new(13, 1)].into_iter().collect();
        // In memory, then with a tiny budget that forces one run per entry.
        for memory in [DEFAULT_SORT_MEMORY, 1] {
            let out = write(&req(&path, d.path(), false, memory, &none, &skips), &Quiet).unwrap();
            assert_eq!(
                read_ts(out.file.path()),
                vec![(11, 1), (12, 1), (15, 1), (19, 9)],
                "memory {memory}"
            );
            assert!(out.reordered);
            assert_eq!(
                (out.entries, out.duplicates_dropped, out.same_ts_kept),
                (4, 1, 0)
            );
            assert_eq!(
                out.skipped.iter().map(|e| e.ts).collect::<Vec<_>>(),
                vec![Ts::new(13, 1)]
            );
            assert_eq!(out.at_or_after_limit.unwrap().ts, Ts::new(20, 0));
        }
        // Streaming refuses a file that turns out unsorted.
        let err = write(
            &req(&path, d.path(), true, DEFAULT_SORT_MEMORY, &none, &skips),
            &Quiet,
        )
        .err()
        .unwrap();
        assert!(matches!(err, PlanError::Changed { .. }), "{err:?}");
        // So does one told that no ts repeats when one does (12:1 twice).
        let sorted: Vec<Document> = [(10, 1), (11, 1), (12, 1), (12, 1), (15, 1)]
            .into_iter()
            .map(|(t, i)| ins(t, i, "a.b"))
            .collect();
        std::fs::create_dir(d.path().join("dup")).unwrap();
        let dup = write_oplog(&d.path().join("dup"), &sorted);
        let mut unique = req(&dup, d.path(), true, DEFAULT_SORT_MEMORY, &none, &skips);
        unique.input_unique_ts = true;
        let err = write(&unique, &Quiet).err().unwrap();
        assert!(
            matches!(&err, PlanError::Changed { what, .. } if what.contains("entry 4 ") && what.contains("12:1")),
            "{err:?}"
        );
        // Told nothing, it drops the copy, as always.
        unique.input_unique_ts = false;
        let out = write(&unique, &Quiet).unwrap();
        assert_eq!((out.entries, out.duplicates_dropped), (3, 1));
        drop(out);
        std::fs::remove_dir_all(d.path().join("dup")).unwrap();
        // Nothing but the input is left behind in the directory.
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("in.bson")]);
    }

    /// With a prefix (the backup's own oplog, for a one-run restore), the file holds
    /// the prefix's bytes unchanged, then the slice, sorted also when it spills;
    /// `prefix_bytes` is where the slice starts and the stats count the slice alone.
    #[test]
    fn a_prefix_leads_the_file_and_the_slice_follows() {
        let d = tempfile::tempdir().unwrap();
        let backup = d.path().join("backup");
        std::fs::create_dir(&backup).unwrap();
        let prefix = write_oplog(&backup, &[ins(9, 1, "a.b"), ins(10, 1, "a.b")]);
        let prefix_len = std::fs::metadata(&prefix).unwrap().len();
        let path = write_oplog(
            d.path(),
            &[ins(12, 1, "a.b"), ins(11, 1, "a.b"), ins(25, 1, "a.b")],
        );
        let (none, no_skips) = (HashSet::new(), HashSet::new());
        for memory in [DEFAULT_SORT_MEMORY, 1] {
            let mut r = req(&path, d.path(), false, memory, &none, &no_skips);
            r.prefix = Some(Path::new(&prefix));
            let out = write(&r, &Quiet).unwrap();
            assert_eq!(out.prefix_bytes, prefix_len);
            assert_eq!(
                read_ts(out.file.path()),
                vec![(9, 1), (10, 1), (11, 1), (12, 1)],
                "memory {memory}"
            );
            assert_eq!(
                std::fs::read(out.file.path()).unwrap()[..prefix_len as usize],
                std::fs::read(&prefix).unwrap()[..]
            );
            assert_eq!(out.entries, 2);
            assert_eq!(
                out.bytes,
                std::fs::metadata(out.file.path()).unwrap().len() - prefix_len
            );
        }
    }

    #[test]
    fn ns_filter_keeps_whole_transactions_and_matching_commands() {
        let d = tempfile::tempdir().unwrap();
        let txn = |t: u32, ns: &str| {
            doc! { "ts": ts(t, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": 1 }, "txnNumber": t as i64,
            "o": { "applyOps": [ { "op": "i", "ns": ns, "o": { "_id": 1 } }, { "op": "i", "ns": "other.x", "o": { "_id": 1 } } ] } }
        };
        let docs = vec![
            ins(11, 1, "shop.orders"),
            ins(11, 2, "shop.users"),
            doc! { "ts": ts(12, 1), "op": "c", "ns": "shop.$cmd", "o": { "drop": "orders" } },
            doc! { "ts": ts(12, 2), "op": "c", "ns": "shop.$cmd", "o": { "drop": "users" } },
            doc! { "ts": ts(12, 3), "op": "c", "ns": "shop.$cmd", "o": { "dropDatabase": 1 } },
            txn(13, "shop.orders"),
            txn(14, "shop.users"),
            doc! { "ts": ts(15, 1), "op": "n", "ns": "", "o": { "msg": "noop" } },
        ];
        let path = write_oplog(d.path(), &docs);
        let f = NsFilter::new(&["shop.orders".into()]).unwrap().unwrap();
        let keys: HashSet<Vec<u8>> = {
            let mut k = bson::to_vec(&doc! { "id": 1 }).unwrap();
            k.extend_from_slice(&13i64.to_le_bytes());
            [k].into_iter().collect()
        };
        let skips = HashSet::new();
        let known = vec!["shop.orders".to_string(), "shop.users".to_string()];
        let mut r = req(&path, d.path(), true, DEFAULT_SORT_MEMORY, &keys, &skips);
        r.filter = Some(&f);
        r.known_ns = &known;
        let out = write(&r, &Quiet).unwrap();
        assert_eq!(
            read_ts(out.file.path()),
            vec![(11, 1), (12, 1), (12, 3), (13, 1)]
        );
        assert_eq!((out.filtered_out, out.mixed_transactions), (4, 1));
        assert!(!out.reordered);
    }
}
