//! Reading an oplog archive as one oplog: the chunks a reader needs, chosen from
//! the manifest, decompressed one after the other into one stream of entries for
//! [`OplogReader`]. Each chunk's size and CRC-64 are checked against the manifest as
//! it is read (at its end), so a damaged or replaced chunk is an error naming it,
//! never entries read as history. Chunks hold whole entries, so the stream is a plain
//! concatenation: reading it costs what reading the same bytes as one file costs.
//!
//! The archive may be a local directory or a prefix in a bucket
//! ([`crate::storage::Location`]); chunks are opened through the storage room, which
//! gives a local chunk as a plain `File` and streams an object.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::manifest::{ChunkRecord, GapRecord, Manifest, OplogArchiveError, FORMAT};
use super::MANIFEST_FILE;
use crate::oplog::source::decompressed;
use crate::oplog::{OplogReader, ReadError, ReadOptions, Ts};
use crate::storage::{self, Location, StorageError};
use crate::stream::{ByteCounter, CountingRead};

/// Whether the head of a `manifest.json` says it is pitr's.
fn says_oplog_archive(head: &[u8]) -> bool {
    let needle = format!("\"{FORMAT}\"");
    head.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Whether `dir` is an oplog archive: it holds a `manifest.json` that says so (a
/// damaged manifest of an archive still counts, so that reading it reports the
/// damage instead of "no oplog in this directory").
pub fn is_oplog_archive(dir: &Path) -> bool {
    let path = dir.join(MANIFEST_FILE);
    if !path.is_file() {
        return false;
    }
    let mut head = Vec::new();
    match std::fs::File::open(&path) {
        Ok(f) => {
            let _ = f.take(4096).read_to_end(&mut head);
        }
        Err(_) => return true,
    }
    says_oplog_archive(&head)
}

/// [`is_oplog_archive`] for any location: a prefix in a bucket is an oplog archive
/// when its `manifest.json` says so. A missing bucket, denied access or the like is
/// an error (the caller would otherwise report "no oplog here" for a typo in the
/// bucket's name).
pub fn is_oplog_archive_at(dir: &Location) -> Result<bool, StorageError> {
    if let Some(p) = dir.local_path() {
        return Ok(is_oplog_archive(p));
    }
    match storage::global().read_head(&dir.join(MANIFEST_FILE), 4096) {
        Ok(head) => Ok(says_oplog_archive(&head)),
        Err(StorageError::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Which part of the archive a reader needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkRange {
    /// Entries at or after this position (None: from the first chunk).
    pub from: Option<Ts>,
    /// Entries before this position, and the first entry at or after it (None: to
    /// the last chunk).
    pub to: Option<Ts>,
}

impl ChunkRange {
    pub const ALL: ChunkRange = ChunkRange {
        from: None,
        to: None,
    };

    /// The chunks that hold the range: from the one holding `from` (or the first
    /// one after it) to the one holding the first entry at or after `to`.
    pub fn select<'a>(&self, chunks: &'a [ChunkRecord]) -> Vec<&'a ChunkRecord> {
        let mut out = Vec::new();
        for c in chunks {
            if self.from.is_some_and(|f| c.last < f) {
                continue;
            }
            if let Some(to) = self.to {
                if c.first >= to && out.iter().any(|p: &&ChunkRecord| p.last >= to) {
                    break;
                }
                out.push(c);
                if c.last >= to {
                    break;
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}

fn load(dir: &Location) -> Result<Manifest, OplogArchiveError> {
    Manifest::load_at(dir)?
        .map(|(m, _)| m)
        .ok_or_else(|| OplogArchiveError::BadManifest {
            path: dir.join(MANIFEST_FILE).display_path(),
            detail: "it disappeared".into(),
        })
}

/// Opens the chunks of the archive `dir` that hold `range`, as one oplog.
pub fn open(dir: &Path, opts: ReadOptions, range: &ChunkRange) -> Result<OplogReader, ReadError> {
    open_at(&Location::Local(dir.to_path_buf()), opts, range)
}

/// [`open`] for an archive anywhere (a local directory or a prefix in a bucket).
pub fn open_at(
    dir: &Location,
    opts: ReadOptions,
    range: &ChunkRange,
) -> Result<OplogReader, ReadError> {
    let m = load(dir)?;
    let chunks: Vec<ChunkRecord> = range.select(&m.chunks).into_iter().cloned().collect();
    let total = chunks.iter().map(|c| c.bytes).sum();
    let counter = ByteCounter::default();
    let chain = Chain {
        dir: dir.clone(),
        chunks,
        next: 0,
        current: None,
        checked: Arc::new(AtomicBool::new(false)),
        counter: counter.clone(),
    };
    Ok(OplogReader::with_counter(
        dir.to_string(),
        Box::new(chain),
        opts,
        counter,
        Some(total),
    ))
}

/// The gaps the archive `dir` records.
pub fn recorded_gaps(dir: &Path) -> Result<Vec<GapRecord>, ReadError> {
    recorded_gaps_at(&Location::Local(dir.to_path_buf()))
}

/// [`recorded_gaps`] for an archive anywhere.
pub fn recorded_gaps_at(dir: &Location) -> Result<Vec<GapRecord>, ReadError> {
    Ok(load(dir)?.gaps)
}

/// The chunks, one after the other.
struct Chain {
    dir: Location,
    chunks: Vec<ChunkRecord>,
    next: usize,
    current: Option<Box<dyn Read + Send>>,
    /// Set by the current chunk's [`Verified`] once its end was read and checked.
    checked: Arc<AtomicBool>,
    counter: ByteCounter,
}

impl Chain {
    fn open_next(&mut self) -> io::Result<bool> {
        let Some(c) = self.chunks.get(self.next).cloned() else {
            return Ok(false);
        };
        self.next += 1;
        let loc = self.dir.join(&c.file);
        let path = loc.display_path();
        // A copy made by an earlier pass of this run, or the chunk itself (copied
        // as it is read while the spool is on: `oplog::spool`).
        let file: Box<dyn Read + Send> = match crate::oplog::spool::open_copy(&loc) {
            Some((copy, _)) => Box::new(copy),
            None => self.open_chunk(&loc, &c)?,
        };
        let expected_crc = u64::from_str_radix(&c.crc64, 16).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                OplogArchiveError::ChunkMismatch {
                    path: path.clone(),
                    detail: format!("the manifest's crc64 `{}` is not hex", c.crc64),
                },
            )
        })?;
        self.checked = Arc::new(AtomicBool::new(false));
        let checked = Verified {
            inner: file,
            checked: self.checked.clone(),
            path: path.clone(),
            expected_bytes: c.bytes,
            expected_crc,
            crc: crc64fast::Digest::new(),
            seen: 0,
            ended: false,
        };
        let counted = CountingRead::new(checked, self.counter.clone());
        let (src, _) =
            decompressed(&path.display().to_string(), counted).map_err(io::Error::other)?;
        self.current = Some(src);
        Ok(true)
    }

    fn open_chunk(&self, loc: &Location, c: &ChunkRecord) -> io::Result<Box<dyn Read + Send>> {
        let file = storage::global().open_read(loc).map_err(|e| match e {
            StorageError::NotFound { .. } => io::Error::new(
                io::ErrorKind::NotFound,
                OplogArchiveError::ChunkMissing {
                    dir: self.dir.display_path(),
                    seq: c.seq,
                    file: c.file.clone(),
                    first: c.first,
                    last: c.last,
                },
            ),
            e => io::Error::other(e),
        })?;
        Ok(crate::oplog::spool::tee(loc, file))
    }
}

impl Read for Chain {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.current.is_none() && !self.open_next()? {
                return Ok(0);
            }
            let n = match self.current.as_mut().expect("opened").read(buf) {
                Ok(n) => n,
                Err(e) if e.get_ref().is_some_and(|i| i.is::<OplogArchiveError>()) => {
                    return Err(e)
                }
                // The store failed (a read that could not be resumed): not damage.
                Err(e) if storage::storage_error(&e).is_some() => return Err(e),
                // A decompression error: name the chunk.
                Err(e) => {
                    let c = &self.chunks[self.next - 1];
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        OplogArchiveError::ChunkMismatch {
                            path: self.dir.join(&c.file).display_path(),
                            detail: format!("it cannot be decompressed ({e})"),
                        },
                    ));
                }
            };
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // The decompressor says the chunk is over: its file must have been read
            // to the end, and checked there (never entries without the check).
            if !self.checked.load(Ordering::Relaxed) {
                let c = &self.chunks[self.next - 1];
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    OplogArchiveError::ChunkMismatch {
                        path: self.dir.join(&c.file).display_path(),
                        detail: "its compressed data ends before the end of the file".into(),
                    },
                ));
            }
            self.current = None;
        }
    }
}

/// A chunk file, checked against the manifest when its end is reached.
struct Verified {
    inner: Box<dyn Read + Send>,
    checked: Arc<AtomicBool>,
    path: PathBuf,
    expected_bytes: u64,
    expected_crc: u64,
    crc: crc64fast::Digest,
    seen: u64,
    ended: bool,
}

impl Read for Verified {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.crc.write(&buf[..n]);
            self.seen += n as u64;
            if self.seen > self.expected_bytes {
                return Err(self.mismatch(format!(
                    "it is longer than the {} bytes the manifest records",
                    self.expected_bytes
                )));
            }
        } else if !buf.is_empty() && !self.ended {
            self.ended = true;
            if self.seen != self.expected_bytes {
                return Err(self.mismatch(format!(
                    "it holds {} bytes, the manifest records {}",
                    self.seen, self.expected_bytes
                )));
            }
            let got = self.crc.sum64();
            if got != self.expected_crc {
                return Err(self.mismatch(format!(
                    "its CRC-64 is {got:016x}, the manifest records {:016x}",
                    self.expected_crc
                )));
            }
            self.checked.store(true, Ordering::Relaxed);
        }
        Ok(n)
    }
}

impl Verified {
    fn mismatch(&self, detail: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            OplogArchiveError::ChunkMismatch {
                path: self.path.clone(),
                detail,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oplog::oplog_archive::manifest::{chunk_file_name, now_text};

    fn rec(seq: u64, first: (u32, u32), last: (u32, u32)) -> ChunkRecord {
        ChunkRecord::placeholder(seq, Ts::new(first.0, first.1), Ts::new(last.0, last.1))
    }

    fn entry(t: u32, i: u32) -> Vec<u8> {
        bson::to_vec(&bson::doc! {
            "ts": bson::Timestamp { time: t, increment: i }, "t": 1i64, "op": "n", "ns": "", "o": {},
        })
        .unwrap()
    }

    /// An archive of two chunks written the way the archiver writes them.
    fn archive(dir: &Path) -> Manifest {
        use std::io::Write;
        let mut m = Manifest::new("mongodb://h/".into(), None);
        std::fs::create_dir_all(dir.join(super::super::CHUNKS_DIR)).unwrap();
        for (seq, ts) in [(1u64, [(10u32, 1u32), (10, 2)]), (2, [(11, 1), (12, 1)])] {
            let raw: Vec<u8> = ts.iter().flat_map(|(t, i)| entry(*t, *i)).collect();
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(&raw).unwrap();
            let gz = enc.finish().unwrap();
            let (first, last) = (Ts::new(ts[0].0, ts[0].1), Ts::new(ts[1].0, ts[1].1));
            let file = format!("chunks/{}", chunk_file_name(seq, first, last));
            std::fs::write(dir.join(&file), &gz).unwrap();
            let mut crc = crc64fast::Digest::new();
            crc.write(&gz);
            m.chunks.push(ChunkRecord {
                seq,
                file,
                first,
                last,
                entries: 2,
                bson_bytes: raw.len() as u64,
                bytes: gz.len() as u64,
                crc64: format!("{:016x}", crc.sum64()),
                first_wall: None,
                last_wall: None,
                written: now_text(),
            });
            m.next_seq = seq + 1;
        }
        m.store(dir).unwrap();
        m
    }

    fn read_all(dir: &Path) -> Result<Vec<Ts>, ReadError> {
        let mut r = crate::oplog::open(dir.to_str().unwrap(), ReadOptions::default())?;
        let mut out = Vec::new();
        while let Some(e) = r.next_entry()? {
            out.push(e.ts);
        }
        Ok(out)
    }

    fn cause(e: &ReadError) -> String {
        let mut s = e.to_string();
        let mut next = std::error::Error::source(e);
        while let Some(c) = next {
            s.push_str(" / ");
            s.push_str(&c.to_string());
            next = c.source();
        }
        s
    }

    #[test]
    fn reads_chunks_in_order_and_refuses_damaged_ones() {
        let d = tempfile::tempdir().unwrap();
        let m = archive(d.path());
        assert!(is_oplog_archive(d.path()));
        assert_eq!(
            read_all(d.path()).unwrap(),
            vec![
                Ts::new(10, 1),
                Ts::new(10, 2),
                Ts::new(11, 1),
                Ts::new(12, 1)
            ]
        );
        // Only the chunks a range needs.
        let mut r = open(
            d.path(),
            ReadOptions::default(),
            &ChunkRange {
                from: Some(Ts::new(11, 0)),
                to: None,
            },
        )
        .unwrap();
        assert_eq!(r.next_entry().unwrap().unwrap().ts, Ts::new(11, 1));

        let second = d.path().join(&m.chunks[1].file);
        let good = std::fs::read(&second).unwrap();
        // One flipped byte in the middle: the CRC says so, naming the chunk.
        let mut bad = good.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x01;
        std::fs::write(&second, &bad).unwrap();
        let e = read_all(d.path()).unwrap_err();
        assert!(cause(&e).contains("00000002-"), "{}", cause(&e));
        // Trailing bytes, or a shorter file: the size says so.
        let mut longer = good.clone();
        longer.extend_from_slice(&good[..20]);
        std::fs::write(&second, &longer).unwrap();
        assert!(read_all(d.path()).is_err());
        std::fs::write(&second, &good[..good.len() - 4]).unwrap();
        assert!(read_all(d.path()).is_err());
        // A missing chunk is named.
        std::fs::remove_file(&second).unwrap();
        let e = read_all(d.path()).unwrap_err();
        assert!(
            cause(&e).contains("chunk 2 of the oplog archive"),
            "{}",
            cause(&e)
        );
        std::fs::write(&second, &good).unwrap();
        assert_eq!(read_all(d.path()).unwrap().len(), 4);
        // Not an archive: another tool's manifest.json.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("manifest.json"), "{\"format\": \"x\"}").unwrap();
        assert!(!is_oplog_archive(other.path()));
    }

    #[test]
    fn selects_the_chunks_that_hold_a_range() {
        let cs = vec![
            rec(1, (10, 1), (19, 9)),
            rec(2, (20, 1), (29, 9)),
            rec(3, (30, 1), (39, 9)),
            rec(4, (40, 1), (49, 9)),
        ];
        let seqs = |r: ChunkRange| -> Vec<u64> { r.select(&cs).iter().map(|c| c.seq).collect() };
        assert_eq!(seqs(ChunkRange::ALL), vec![1, 2, 3, 4]);
        let r = |from: Option<(u32, u32)>, to: Option<(u32, u32)>| ChunkRange {
            from: from.map(|f| Ts::new(f.0, f.1)),
            to: to.map(|t| Ts::new(t.0, t.1)),
        };
        // From inside chunk 2 to the end.
        assert_eq!(seqs(r(Some((25, 0)), None)), vec![2, 3, 4]);
        // `from` is the last entry of chunk 2: that chunk holds it.
        assert_eq!(seqs(r(Some((29, 9)), None)), vec![2, 3, 4]);
        // `from` between chunks: the next one.
        assert_eq!(seqs(r(Some((29, 10)), None)), vec![3, 4]);
        // `to` inside chunk 3: it holds the first entry at or after `to`.
        assert_eq!(seqs(r(Some((25, 0)), Some((35, 0)))), vec![2, 3]);
        // `to` between chunks 3 and 4: chunk 4 holds the first entry after it.
        assert_eq!(seqs(r(Some((25, 0)), Some((39, 10)))), vec![2, 3, 4]);
        // `to` exactly at a chunk's first entry.
        assert_eq!(seqs(r(None, Some((30, 1)))), vec![1, 2, 3]);
        // Past the end: everything from `from`.
        assert_eq!(seqs(r(Some((45, 0)), Some((99, 0)))), vec![4]);
        assert!(seqs(r(Some((50, 0)), None)).is_empty());
    }
}
