//! Reading several oplog sources in one pass, with progress, for the commands that
//! scan (find-drop, oplog stats).
//!
//! When sources overlap (say the backup's own `oplog.bson` and a later dump of
//! `local.oplog.rs`), entries of a later source at or before the newest position
//! already read are skipped, so nothing is counted twice.

use crate::error::Failure;
#[allow(unused_imports)] // for the doc link
use bson::RawDocument;

use crate::oplog::elements::peek_ts_op;
use crate::oplog::oplog_archive::ChunkRange;
use crate::oplog::{self, reader::not_an_entry, EntryError, ReadOptions, Truncation, Ts};

use super::progress::{while_opening, ScanProgress};

/// What happened while reading the sources.
#[derive(Debug, Default)]
pub struct SourcesSummary {
    /// Source names as resolved (a directory becomes its oplog file).
    pub names: Vec<String>,
    pub entries: u64,
    /// Entries skipped because an earlier source already covered their position.
    pub skipped_overlap: u64,
    /// Truncated sources read with `--allow-truncated`.
    pub truncations: Vec<Truncation>,
    /// Gaps recorded by oplog archives among the sources (in the range read): the
    /// source, and the positions entries may be missing between.
    pub gaps: Vec<(String, Ts, Ts)>,
    /// Sources read whole that held no entry at all (an empty file, most likely the
    /// wrong one: a replica set's primary writes a no-op every 10 s when idle).
    pub empty: Vec<String>,
    /// The one source read, when it is a `mongodump --oplog` backup's own oplog, and
    /// the entries it held ([`oplog::source::is_a_backups_own`]; beside a later
    /// oplog, the backup's is where the timeline starts, and says nothing).
    pub backups_own: Vec<(String, u64)>,
}

/// Why a scan's callback stops it: the entry is not what it must be (reported with
/// its position), or the caller gives up for its own reason (reported as is).
#[derive(Debug)]
pub enum ScanStop {
    Entry(EntryError),
    Failed(Failure),
}

impl From<EntryError> for ScanStop {
    fn from(e: EntryError) -> ScanStop {
        ScanStop::Entry(e)
    }
}

/// Calls `f` on every entry of every source, in order, as the bytes of one framed
/// BSON document (callers parse as much as they need; see
/// [`RawDocument::from_bytes`]; an [`EntryError`] from `f` is reported with the
/// entry's position, a [`ScanStop::Failed`] ends the scan with that failure).
pub fn scan_sources<E: Into<ScanStop>>(
    sources: &[String],
    opts: ReadOptions,
    show_progress: bool,
    f: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<SourcesSummary, Failure> {
    scan_sources_in(sources, opts, show_progress, &ChunkRange::ALL, f)
}

/// [`scan_sources`], reading only the chunks of an oplog archive that hold `range`
/// (other sources are read whole).
pub fn scan_sources_in<E: Into<ScanStop>>(
    sources: &[String],
    opts: ReadOptions,
    show_progress: bool,
    range: &ChunkRange,
    mut f: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<SourcesSummary, Failure> {
    let mut summary = SourcesSummary::default();
    let mut newest_before: Option<Ts> = None;
    // Each source is opened while the one before it is scanned: a compressed one
    // starts decompressing on its own threads (see `oplog::gzip`), and a missing
    // file is reported before a long scan rather than after it.
    let open = |s: &String| while_opening(s, show_progress, || oplog::open_range(s, opts, range));
    let mut next = sources.first().map(open).transpose()?;
    for (n, src) in sources.iter().enumerate() {
        for g in oplog::source::recorded_gaps(src)? {
            if g.overlaps(range.from.unwrap_or(Ts::ZERO), range.to.unwrap_or(Ts::MAX)) {
                summary.gaps.push((src.clone(), g.after, g.before));
            }
        }
        let mut r = next.take().expect("opened ahead");
        next = sources.get(n + 1).map(open).transpose()?;
        let (counter, total) = r.progress();
        let what = match sources.len() {
            1 => format!("reading {}", r.name()),
            all => format!("reading {}/{all} {}", n + 1, r.name()),
        };
        let mut bar = ScanProgress::new(&what, counter, total, show_progress);
        let floor = newest_before;
        let mut newest = newest_before;
        // Positions matter only when another source follows or precedes this one.
        let track = sources.len() > 1;
        let entries_before = summary.entries;
        while let Some((doc, offset, index)) = r.next_bytes()? {
            summary.entries += 1;
            if summary.entries % 8192 == 0 {
                bar.tick();
            }
            // Overlap handling needs the position; a document without one is passed
            // on, and the callback's full parse reports it.
            if let Some((ts, _)) = track.then(|| peek_ts_op(doc)).flatten() {
                if floor.is_some_and(|fl| ts <= fl) {
                    summary.skipped_overlap += 1;
                    continue;
                }
                newest = Some(newest.map_or(ts, |x: Ts| x.max(ts)));
            }
            if let Err(stop) = f(doc) {
                bar.finish();
                return Err(match stop.into() {
                    ScanStop::Entry(err) => {
                        not_an_entry(r.name().to_string(), offset, index, err).into()
                    }
                    ScanStop::Failed(f) => f,
                });
            }
        }
        bar.finish();
        newest_before = newest;
        summary.names.push(r.name().to_string());
        if summary.entries == entries_before && *range == ChunkRange::ALL {
            summary.empty.push(r.name().to_string());
        } else if sources.len() == 1 && oplog::source::is_a_backups_own(std::path::Path::new(src)) {
            let held = summary.entries - entries_before;
            summary.backups_own.push((r.name().to_string(), held));
        }
        if let Some(t) = r.truncation() {
            summary.truncations.push(t.clone());
        }
    }
    Ok(summary)
}
