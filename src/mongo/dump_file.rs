//! The dump file on disk: writing entries (plain, or as gzip members closed at
//! content-defined boundaries) and reading an interrupted one back to find where
//! `--resume` continues. See [`super::dump`] for why the boundaries make a resumed
//! dump byte-identical to an uninterrupted one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;

use super::dump::DumpError;
use crate::oplog::elements::peek_ts_op;
use crate::oplog::{OplogReader, ReadError, ReadOptions, Ts};
use crate::storage::StorageWriter;

/// Uncompressed bytes per gzip member. Small enough that an interrupted compressed
/// dump loses little on resume; deflate's window is 32 KiB, so the ratio barely
/// changes.
pub const GZIP_MEMBER_BYTES: usize = 256 * 1024;

/// What survived of an interrupted dump.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResumePoint {
    /// Bytes of the partial file kept.
    pub keep_bytes: u64,
    /// Bytes cut off the end (an incomplete entry or gzip member).
    pub cut_bytes: u64,
    pub entries: u64,
    /// Uncompressed BSON bytes of the kept entries.
    pub bson_bytes: u64,
    pub first: Option<Ts>,
    pub last: Option<Ts>,
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> DumpError {
    let path = path.to_path_buf();
    move |source| DumpError::Io { what, path, source }
}

// ---------------------------------------------------------------------------------
// reading back a partial dump

/// A `BufRead` that counts the bytes consumed from it, to find gzip member ends.
struct Counted<R> {
    inner: R,
    consumed: u64,
}

impl<R: BufRead> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.consumed += amt as u64;
        self.inner.consume(amt)
    }
}

/// Walks complete entries of `bytes` (a whole plain partial file's reader, or one
/// gzip member); returns how many bytes are whole entries and adds them to `rp`.
/// Any framing problem ends the walk there: what follows is re-read from the server.
fn walk_entries(
    name: &str,
    src: impl Read + Send + 'static,
    rp: &mut ResumePoint,
) -> Result<(u64, bool), DumpError> {
    let mut r = OplogReader::new(
        name,
        src,
        ReadOptions {
            allow_truncated: true,
        },
    );
    loop {
        match r.next_raw() {
            Ok(Some((doc, _, _))) => match peek_ts_op(doc.as_bytes()) {
                Some((ts, _)) => {
                    rp.entries += 1;
                    rp.bson_bytes += doc.as_bytes().len() as u64;
                    rp.first.get_or_insert(ts);
                    rp.last = Some(ts);
                }
                None => {
                    // Not an entry: cut before it.
                    let len = doc.as_bytes().len() as u64;
                    return Ok((r.offset() - len, false));
                }
            },
            Ok(None) => {
                return Ok(match r.truncation() {
                    Some(t) => (t.offset, false),
                    None => (r.offset(), true),
                })
            }
            Err(ReadError::Io { source, .. }) => {
                return Err(DumpError::Io {
                    what: "read",
                    path: PathBuf::from(name),
                    source,
                })
            }
            Err(ReadError::BadLength { offset, .. })
            | Err(ReadError::Malformed { offset, .. })
            | Err(ReadError::NotAnEntry { offset, .. }) => return Ok((offset, false)),
            Err(ReadError::NotBson { .. }) => return Ok((0, false)),
            Err(e) => {
                return Err(DumpError::PartialUnreadable {
                    path: PathBuf::from(name),
                    source: e,
                })
            }
        }
    }
}

/// Finds where an interrupted dump can continue: after its last complete entry
/// (plain) or its last complete gzip member.
pub fn scan_partial(path: &Path, gzip: bool) -> Result<ResumePoint, DumpError> {
    let total = fs::metadata(path).map_err(io_err("read", path))?.len();
    let name = path.display().to_string();
    let mut rp = ResumePoint::default();
    if !gzip {
        let f = File::open(path).map_err(io_err("open", path))?;
        let (keep, _) = walk_entries(&name, f, &mut rp)?;
        rp.keep_bytes = keep;
    } else {
        let f = File::open(path).map_err(io_err("open", path))?;
        let mut src = Counted {
            inner: BufReader::with_capacity(1 << 20, f),
            consumed: 0,
        };
        loop {
            let start = src.consumed;
            if src.fill_buf().map_err(io_err("read", path))?.is_empty() {
                break;
            }
            let mut member = Vec::new();
            let ok = flate2::bufread::GzDecoder::new(&mut src)
                .read_to_end(&mut member)
                .is_ok();
            if !ok {
                break;
            }
            let mut in_member = ResumePoint::default();
            let len = member.len() as u64;
            let (whole, clean) = walk_entries(&name, io::Cursor::new(member), &mut in_member)?;
            if !clean || whole != len {
                // A member pitr wrote always holds whole entries: this one is damaged.
                break;
            }
            rp.entries += in_member.entries;
            rp.bson_bytes += in_member.bson_bytes;
            if rp.first.is_none() {
                rp.first = in_member.first;
            }
            if in_member.last.is_some() {
                rp.last = in_member.last;
            }
            rp.keep_bytes = src.consumed;
            debug_assert!(src.consumed > start);
        }
    }
    rp.cut_bytes = total - rp.keep_bytes.min(total);
    Ok(rp)
}

// ---------------------------------------------------------------------------------
// writing

/// The output: plain, or gzip members closed every [`GZIP_MEMBER_BYTES`]; into a
/// local file, or into an object's upload (`dump-oplog --out URL`).
pub(super) struct OutFile {
    sink: Sink,
    /// Entries of the gzip member being built (`None` for plain output).
    member: Option<Vec<u8>>,
    level: Compression,
}

/// Where the bytes go.
enum Sink {
    File(BufWriter<File>),
    /// An object's multipart upload (parts sent as they fill). Its calls block while
    /// a part waits for room, so they go through [`crate::mongo::blocking`], once per
    /// MiB buffered here.
    Object(BufWriter<Blocking<StorageWriter>>),
}

/// A writer whose writes run through [`crate::mongo::blocking`] (off the async
/// runtime's worker, which must not block).
struct Blocking<W>(W);

impl<W: Write> Write for Blocking<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::mongo::blocking(|| self.0.write(buf))
    }
    fn flush(&mut self) -> io::Result<()> {
        crate::mongo::blocking(|| self.0.flush())
    }
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::File(f) => f,
            Sink::Object(o) => o,
        }
    }
}

impl OutFile {
    /// Opens `path`, keeping its first `keep` bytes (0 for a new dump).
    pub(super) fn open(path: &Path, keep: u64, gzip: bool) -> Result<OutFile, DumpError> {
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err("create", path))?;
        f.set_len(keep).map_err(io_err("truncate", path))?;
        f.seek(SeekFrom::Start(keep))
            .map_err(io_err("seek in", path))?;
        Ok(OutFile::over(
            Sink::File(BufWriter::with_capacity(1 << 20, f)),
            gzip,
        ))
    }

    /// Writes into an object's upload: visible only once [`OutFile::finish`]ed;
    /// dropped before, the upload is aborted.
    pub(super) fn object(w: StorageWriter, gzip: bool) -> OutFile {
        OutFile::over(
            Sink::Object(BufWriter::with_capacity(1 << 20, Blocking(w))),
            gzip,
        )
    }

    fn over(sink: Sink, gzip: bool) -> OutFile {
        OutFile {
            sink,
            member: gzip.then(|| Vec::with_capacity(GZIP_MEMBER_BYTES + (1 << 16))),
            level: Compression::default(),
        }
    }

    pub(super) fn write_entry(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.member {
            None => self.sink.writer().write_all(bytes),
            Some(m) => {
                m.extend_from_slice(bytes);
                if m.len() >= GZIP_MEMBER_BYTES {
                    self.close_member()?;
                }
                Ok(())
            }
        }
    }

    /// Compresses the current member in one go (same input, same bytes) and writes it.
    pub(super) fn close_member(&mut self) -> io::Result<()> {
        let Some(m) = &mut self.member else {
            return Ok(());
        };
        if m.is_empty() {
            return Ok(());
        }
        // Each member records its own length, so that readers can decompress
        // members in parallel (see `oplog::gzip::SIZE_SUBFIELD`).
        let mut gz = Vec::with_capacity(m.len() / 3);
        crate::stream::gzip::write_member(&mut gz, m, self.level)?;
        m.clear();
        self.sink.writer().write_all(&gz)
    }

    /// Hands what is complete to the OS (not the gzip member being built); for an
    /// object, to its upload's part buffer.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.sink.writer().flush()
    }

    /// Flushes and syncs what is complete (after a failure: the resume starts after
    /// it). An object's upload is dropped instead, so there is nothing to keep.
    pub(super) fn sync_complete(&mut self) -> io::Result<()> {
        match &mut self.sink {
            Sink::File(f) => {
                f.flush()?;
                f.get_ref().sync_all()
            }
            Sink::Object(_) => Ok(()),
        }
    }

    /// Closes the last member, flushes and syncs (a file) or completes the upload
    /// (an object, which is then readable); returns the bytes written.
    pub(super) fn finish(mut self) -> io::Result<u64> {
        self.close_member()?;
        match self.sink {
            Sink::File(mut file) => {
                file.flush()?;
                let f = file.get_ref();
                f.sync_all()?;
                Ok(f.metadata()?.len())
            }
            Sink::Object(o) => {
                let Blocking(w) = o.into_inner().map_err(|e| e.into_error())?;
                crate::mongo::blocking(|| w.finish())
                    .map(|w| w.size)
                    .map_err(io::Error::other)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    fn entry(t: u32, i: u32, pad: usize) -> Vec<u8> {
        bson::to_vec(&doc! {
            "ts": Timestamp { time: t, increment: i }, "t": 1i64, "v": 2i32, "op": "i",
            "ns": "shop.orders", "o": { "_id": i as i64, "pad": "x".repeat(pad) },
        })
        .unwrap()
    }

    fn write_with(out: &Path, gzip: bool, entries: &[Vec<u8>]) -> u64 {
        let mut f = OutFile::open(out, 0, gzip).unwrap();
        for e in entries {
            f.write_entry(e).unwrap();
        }
        f.finish().unwrap()
    }

    #[test]
    fn plain_partial_is_cut_after_the_last_complete_entry() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("oplog.bson.partial");
        let es: Vec<Vec<u8>> = (1..=5).map(|i| entry(100, i, 10)).collect();
        let mut bytes = es.concat();
        let whole = bytes.len() as u64;
        bytes.extend_from_slice(&es[0][..7]);
        fs::write(&p, &bytes).unwrap();
        let rp = scan_partial(&p, false).unwrap();
        assert_eq!(rp.entries, 5);
        assert_eq!(rp.keep_bytes, whole);
        assert_eq!(rp.cut_bytes, 7);
        assert_eq!(rp.first, Some(Ts::new(100, 1)));
        assert_eq!(rp.last, Some(Ts::new(100, 5)));
        // Zero-filled garbage (a crash can leave it) is cut too.
        bytes.truncate(whole as usize);
        bytes.extend([0u8; 64]);
        fs::write(&p, &bytes).unwrap();
        assert_eq!(scan_partial(&p, false).unwrap().keep_bytes, whole);
    }

    #[test]
    fn gzip_members_are_content_defined_and_resumable() {
        let dir = tempfile::tempdir().unwrap();
        let es: Vec<Vec<u8>> = (1..=400).map(|i| entry(100, i, 2000)).collect();
        let full = dir.path().join("full.gz");
        write_with(&full, true, &es);
        let full_bytes = fs::read(&full).unwrap();
        // Decompresses (multi-member) to exactly the entries.
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&full_bytes[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, es.concat());

        // Cut anywhere: resume keeps whole members, and finishing from the entry
        // after the last kept one gives the same bytes.
        for cut in [
            10usize,
            full_bytes.len() / 3,
            full_bytes.len() / 2 + 17,
            full_bytes.len() - 3,
        ] {
            let p = dir.path().join("x.gz.partial");
            fs::write(&p, &full_bytes[..cut]).unwrap();
            let rp = scan_partial(&p, true).unwrap();
            assert!(rp.keep_bytes <= cut as u64);
            let done = rp.entries as usize;
            let mut f = OutFile::open(&p, rp.keep_bytes, true).unwrap();
            for e in &es[done..] {
                f.write_entry(e).unwrap();
            }
            f.finish().unwrap();
            assert_eq!(fs::read(&p).unwrap(), full_bytes, "cut at {cut}");
        }
    }
}
