//! Chunk files on the writing side: the chunk being written (a `.partial` file of
//! gzip members, through [`OutFile`], the same writer as `dump-oplog --gzip`), its
//! completion (sync, checksum, rename, manifest), and reading chunks back (the last
//! entry to resume after, entries to compare with the server after a rollback).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use bson::RawDocument;

use super::target::Target;
use super::ArchiveError;
use crate::mongo::dump_file::{scan_partial, OutFile};
use crate::oplog::elements::peek_ts_op;
use crate::oplog::oplog_archive::manifest::{
    self, chunk_file_name, now_text, ChunkRecord, GapRecord, Manifest,
};
use crate::oplog::oplog_archive::CHUNKS_DIR;
use crate::oplog::{Entry, OplogReader, ReadOptions, Ts};

/// `DIR/chunks/.NNNNNNNN.partial`: the chunk `seq` while it is written.
pub(super) fn partial_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(CHUNKS_DIR).join(format!(".{seq:08}.partial"))
}

/// `DIR/chunks/.NNNNNNNN.gap.json`: the gap before chunk `seq`, kept beside it until
/// the manifest records both (so that a crash never turns a gap into silence).
pub(super) fn gap_sidecar_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(CHUNKS_DIR).join(format!(".{seq:08}.gap.json"))
}

/// The gap recorded beside chunk `seq`, if any.
pub(super) fn read_gap_sidecar(dir: &Path, seq: u64) -> Result<Option<GapRecord>, ArchiveError> {
    let p = gap_sidecar_path(dir, seq);
    match fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| ArchiveError::Inconsistent {
                detail: format!("`{}` is not a gap record: {e}", p.display()),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("read", &p)(e)),
    }
}

/// The sequence number of a `.NNNNNNNN.partial` name.
pub(super) fn seq_of_partial(name: &str) -> Option<u64> {
    let s = name.strip_prefix('.')?.strip_suffix(".partial")?;
    (s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

pub(super) fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ArchiveError {
    let path = path.to_path_buf();
    move |source| ArchiveError::Io { what, path, source }
}

fn wall_text(ms: Option<i64>) -> Option<String> {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|w| w.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The wall clock of an entry, when it has one.
pub(super) fn wall_of(bytes: &[u8]) -> Option<i64> {
    RawDocument::from_bytes(bytes)
        .ok()
        .and_then(|d| Entry::parse(d).ok())
        .and_then(|e| e.wall_ms)
}

/// The chunk being written.
pub(super) struct ChunkWriter {
    pub seq: u64,
    partial: PathBuf,
    out: OutFile,
    pub first: Option<Ts>,
    pub last: Option<Ts>,
    first_wall: Option<i64>,
    last_entry: Vec<u8>,
    pub entries: u64,
    pub bson_bytes: u64,
    pub opened: Instant,
    /// Recorded in the manifest together with this chunk: the gap before its first
    /// entry.
    pub gap_before: Option<GapRecord>,
}

impl ChunkWriter {
    /// Starts chunk `seq` (a new, empty `.partial` file).
    pub fn create(
        dir: &Path,
        seq: u64,
        gap_before: Option<GapRecord>,
    ) -> Result<ChunkWriter, ArchiveError> {
        let partial = partial_path(dir, seq);
        if let Some(g) = &gap_before {
            let p = gap_sidecar_path(dir, seq);
            let text = serde_json::to_string(g).expect("a gap record serialises");
            File::create(&p)
                .and_then(|mut f| {
                    io::Write::write_all(&mut f, text.as_bytes())?;
                    f.sync_all()
                })
                .map_err(io_err("write", &p))?;
            manifest::sync_dir(&dir.join(CHUNKS_DIR));
        }
        let out = OutFile::open(&partial, 0, true).map_err(|e| ArchiveError::Io {
            what: "create",
            path: partial.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        Ok(ChunkWriter {
            seq,
            partial,
            out,
            first: None,
            last: None,
            first_wall: None,
            last_entry: Vec::new(),
            entries: 0,
            bson_bytes: 0,
            opened: Instant::now(),
            gap_before,
        })
    }

    pub fn write(&mut self, bytes: &[u8], ts: Ts) -> Result<(), ArchiveError> {
        if self.first.is_none() {
            self.first = Some(ts);
            self.first_wall = wall_of(bytes);
            if let Some(g) = &mut self.gap_before {
                g.before = ts;
            }
        }
        self.out
            .write_entry(bytes)
            .map_err(io_err("write", &self.partial))?;
        self.last = Some(ts);
        self.last_entry.clear();
        self.last_entry.extend_from_slice(bytes);
        self.entries += 1;
        self.bson_bytes += bytes.len() as u64;
        Ok(())
    }

    /// Hands the complete gzip members to the OS (a SIGKILL then loses at most the
    /// member being built; a restart keeps the rest).
    pub fn flush(&mut self) -> Result<(), ArchiveError> {
        self.out.flush().map_err(io_err("write", &self.partial))
    }

    /// Completes the file: last member, sync, checksum, rename into place. Returns
    /// its record and the gap before it, not yet in the manifest; `None` for an empty
    /// chunk (its file is removed).
    pub fn finish_file(
        self,
        target: &mut Target,
    ) -> Result<Option<(ChunkRecord, Option<GapRecord>)>, ArchiveError> {
        let (Some(first), Some(last)) = (self.first, self.last) else {
            drop(self.out);
            let _ = fs::remove_file(&self.partial);
            return Ok(None);
        };
        self.out.finish().map_err(io_err("write", &self.partial))?;
        let rec = target.place(
            &self.partial,
            ChunkFacts {
                seq: self.seq,
                first,
                last,
                entries: self.entries,
                bson_bytes: self.bson_bytes,
                first_wall: self.first_wall,
                last_wall: wall_of(&self.last_entry),
            },
        )?;
        Ok(Some((rec, self.gap_before)))
    }

    /// Completes the chunk and records it (with the gap before it) in the manifest.
    pub fn commit(
        self,
        target: &mut Target,
        fresh: impl FnOnce() -> Manifest,
    ) -> Result<Option<(ChunkRecord, Option<GapRecord>, Manifest)>, ArchiveError> {
        let seq = self.seq;
        let sidecar = gap_sidecar_path(target.staging(), seq);
        let Some((rec, gap)) = self.finish_file(target)? else {
            let _ = fs::remove_file(&sidecar);
            return Ok(None);
        };
        let (m, gap) = target.update(fresh, |m| {
            let g = record(m, rec.clone(), gap.clone())?;
            Ok((true, g))
        })?;
        let _ = fs::remove_file(&sidecar);
        Ok(Some((rec, gap, m)))
    }
}

/// What a complete chunk file holds.
#[derive(Clone, Debug)]
pub(super) struct ChunkFacts {
    pub seq: u64,
    pub first: Ts,
    pub last: Ts,
    pub entries: u64,
    pub bson_bytes: u64,
    pub first_wall: Option<i64>,
    pub last_wall: Option<i64>,
}

/// Checksums the synced file `src` and renames it to its chunk name; returns its
/// manifest record (not yet recorded).
pub(super) fn place(dir: &Path, src: &Path, f: ChunkFacts) -> Result<ChunkRecord, ArchiveError> {
    let (bytes, crc) = checksum(src)?;
    let name = chunk_file_name(f.seq, f.first, f.last);
    let dest = dir.join(CHUNKS_DIR).join(&name);
    fs::rename(src, &dest).map_err(io_err("rename", src))?;
    manifest::sync_dir(&dir.join(CHUNKS_DIR));
    Ok(record_of(format!("{CHUNKS_DIR}/{name}"), bytes, crc, &f))
}

/// The manifest record of the chunk `file` (relative to the archive) holding `f`.
pub(super) fn record_of(file: String, bytes: u64, crc: u64, f: &ChunkFacts) -> ChunkRecord {
    ChunkRecord {
        seq: f.seq,
        file,
        first: f.first,
        last: f.last,
        entries: f.entries,
        bson_bytes: f.bson_bytes,
        bytes,
        crc64: format!("{crc:016x}"),
        first_wall: wall_text(f.first_wall),
        last_wall: wall_text(f.last_wall),
        written: now_text(),
    }
}

/// Adds a chunk (and the gap before it) to the manifest: it must follow the last one.
/// Returns the gap as recorded.
pub(super) fn record(
    m: &mut Manifest,
    rec: ChunkRecord,
    gap: Option<GapRecord>,
) -> Result<Option<GapRecord>, ArchiveError> {
    if let Some(prev) = m.chunks.last() {
        if rec.first <= prev.last || rec.seq <= prev.seq {
            return Err(ArchiveError::Inconsistent {
                detail: format!(
                    "chunk {} (from {}) would not follow chunk {} (to {}) in the manifest",
                    rec.seq, rec.first, prev.seq, prev.last
                ),
            });
        }
    }
    m.next_seq = m.next_seq.max(rec.seq + 1);
    let gap = gap.map(|mut g| {
        g.before = rec.first;
        g
    });
    if let Some(g) = &gap {
        m.gaps.push(g.clone());
    }
    m.chunks.push(rec);
    Ok(gap)
}

/// Size and CRC-64/XZ of a file.
pub(super) fn checksum(path: &Path) -> Result<(u64, u64), ArchiveError> {
    let mut f = File::open(path).map_err(io_err("open", path))?;
    let mut crc = crc64fast::Digest::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let got = f.read(&mut buf).map_err(io_err("read", path))?;
        if got == 0 {
            break;
        }
        crc.write(&buf[..got]);
        n += got as u64;
    }
    Ok((n, crc.sum64()))
}

/// Reads every entry of a chunk (a local file or an object: `spec` is what
/// [`Target::inside`] gives; gzip or plain, by content) in order.
pub(super) fn for_each_entry(
    spec: &str,
    mut f: impl FnMut(&[u8], Ts) -> Result<bool, ArchiveError>,
) -> Result<(), ArchiveError> {
    // A chunk in a bucket is read through the storage room, which blocks.
    crate::mongo::blocking(|| for_each_entry_blocking(spec, &mut f))
}

fn for_each_entry_blocking(
    spec: &str,
    f: &mut impl FnMut(&[u8], Ts) -> Result<bool, ArchiveError>,
) -> Result<(), ArchiveError> {
    let path = Path::new(spec);
    let mut r: OplogReader =
        crate::oplog::open(spec, ReadOptions::default()).map_err(|e| ArchiveError::Chunk {
            path: path.to_path_buf(),
            source: e,
        })?;
    while let Some((doc, _, _)) = r.next_raw().map_err(|e| ArchiveError::Chunk {
        path: path.to_path_buf(),
        source: e,
    })? {
        let bytes = doc.as_bytes();
        let Some((ts, _)) = peek_ts_op(bytes) else {
            return Err(ArchiveError::Inconsistent {
                detail: format!("`{}` holds a document without a ts", path.display()),
            });
        };
        if !f(bytes, ts)? {
            break;
        }
    }
    Ok(())
}

/// What a whole chunk file holds, read back.
#[derive(Clone, Debug, Default)]
pub(super) struct Scanned {
    pub entries: u64,
    pub bson_bytes: u64,
    pub first: Option<Ts>,
    pub last: Option<Ts>,
    pub first_wall: Option<i64>,
    pub last_entry: Vec<u8>,
    /// Every entry after the previous one.
    pub increasing: bool,
}

pub(super) fn scan(spec: &str) -> Result<Scanned, ArchiveError> {
    let mut s = Scanned {
        increasing: true,
        ..Scanned::default()
    };
    for_each_entry(spec, |bytes, ts| {
        if s.first.is_none() {
            s.first = Some(ts);
            s.first_wall = wall_of(bytes);
        }
        if s.last.is_some_and(|l| ts <= l) {
            s.increasing = false;
        }
        s.last = Some(ts);
        s.entries += 1;
        s.bson_bytes += bytes.len() as u64;
        s.last_entry.clear();
        s.last_entry.extend_from_slice(bytes);
        Ok(true)
    })?;
    Ok(s)
}

/// The first entry of a chunk file.
pub(super) fn first_entry(spec: &str) -> Result<Option<(Ts, Vec<u8>)>, ArchiveError> {
    let mut out = None;
    for_each_entry(spec, |bytes, ts| {
        out = Some((ts, bytes.to_vec()));
        Ok(false)
    })?;
    Ok(out)
}

/// An interrupted chunk: keeps its complete gzip members (cutting the one being
/// written when the archiver died) and returns what they hold, or `None` when
/// nothing complete is left (the file is then removed).
pub(super) fn salvage_partial(path: &Path) -> Result<Option<Scanned>, ArchiveError> {
    let rp = scan_partial(path, true).map_err(|e| ArchiveError::Io {
        what: "read",
        path: path.to_path_buf(),
        source: io::Error::other(e.to_string()),
    })?;
    if rp.entries == 0 {
        fs::remove_file(path).map_err(io_err("remove", path))?;
        return Ok(None);
    }
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err("open", path))?;
    f.set_len(rp.keep_bytes).map_err(io_err("truncate", path))?;
    f.sync_all().map_err(io_err("sync", path))?;
    drop(f);
    let s = scan(&path.display().to_string())?;
    debug_assert_eq!(s.entries, rp.entries);
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_names() {
        let d = Path::new("/a");
        assert_eq!(
            partial_path(d, 43),
            Path::new("/a/chunks/.00000043.partial")
        );
        assert_eq!(seq_of_partial(".00000043.partial"), Some(43));
        assert_eq!(seq_of_partial(".0000043.partial"), None);
        assert_eq!(seq_of_partial("00000043.partial"), None);
    }
}
