//! Turning what the user typed (`oplog.bson`, `oplog.bson.gz`, a dump directory,
//! an oplog archive directory, `-`, or any of them as an `s3://`, `gs://`, `az://`
//! URL) into a reader.
//!
//! What a file holds is decided by its bytes, never by its name: gzip content is
//! decompressed whatever the file is called (see [`crate::stream::gzip`]). A directory is an
//! oplog archive when its `manifest.json` says so ([`super::oplog_archive`]); then
//! only the chunks holding the range a caller needs are read ([`open_range`]).
//!
//! A URL is opened through [`crate::storage`]: an object is streamed (never
//! downloaded first); a prefix is a directory, looked up by listing it. A local path
//! stays a plain `File`, read exactly as before.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::error::ReadError;
use super::oplog_archive::{self, is_oplog_archive, ChunkRange, GapRecord};
use super::reader::{OplogReader, ReadOptions};
use super::spool;
use crate::storage::{self, Found, Location};
use crate::stream::gzip;
use crate::stream::{ByteCounter, CountingRead};

/// Where the oplog of a mongodump directory can be, in order of preference: the
/// root `oplog.bson` of `mongodump --oplog` (gzip content with `--gzip`), a renamed
/// `oplog.bson.gz`, then `mongodump -d local -c oplog.rs`'s layout.
pub const DIR_CANDIDATES: [&str; 4] = [
    "oplog.bson",
    "oplog.bson.gz",
    "local/oplog.rs.bson",
    "local/oplog.rs.bson.gz",
];

/// Resolves a directory to the oplog file inside it; other paths are returned as is.
pub fn resolve(path: &Path) -> Result<PathBuf, ReadError> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    for c in DIR_CANDIDATES {
        let p = path.join(c);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(ReadError::NoOplogInDir {
        dir: path.to_path_buf(),
        looked: DIR_CANDIDATES.iter().map(|c| c.to_string()).collect(),
    })
}

/// Why an oplog with no entry is most likely the wrong file (said with such a file).
pub const NEVER_EMPTY: &str =
    "a replica set's oplog is never empty: by default an idle primary writes a no-op every 10 seconds";

/// Where the entries after a backup are, for a message about an oplog that holds
/// only the backup's own.
pub const AFTER_THE_BACKUP: &str = "the replica set's oplog (a `pitr dump-oplog` or \
`mongodump -d local -c oplog.rs` file, or a `pitr archive` directory)";

/// Whether `path` is the oplog of a `mongodump --oplog` backup: the backup's
/// directory, or its root `oplog.bson` (`.gz`), beside database directories holding
/// collection dumps (each has a `<collection>.metadata.json`, gzipped or not: a
/// directory that only holds another dump, such as `backup/` beside an oplog, is no
/// database directory). Such an oplog holds only what was written while the dump
/// ran. (Local paths only.)
pub fn is_a_backups_own(path: &Path) -> bool {
    let dir = match path.file_name().and_then(|n| n.to_str()) {
        _ if path.is_dir() => path,
        Some("oplog.bson" | "oplog.bson.gz") => match path.parent() {
            Some(p) if p.as_os_str().is_empty() => Path::new("."),
            Some(p) => p,
            None => return false,
        },
        _ => return false,
    };
    if !(dir.join("oplog.bson").is_file() || dir.join("oplog.bson.gz").is_file()) {
        return false;
    }
    let dumped = |f: &std::fs::DirEntry| {
        let name = f.file_name();
        let name = name.to_string_lossy();
        name.strip_suffix(".gz")
            .unwrap_or(&name)
            .ends_with(".metadata.json")
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|db| {
        db.path().is_dir()
            && std::fs::read_dir(db.path()).is_ok_and(|files| files.flatten().any(|f| dumped(&f)))
    })
}

/// How a byte stream is compressed, decided by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// Reads up to `buf.len()` bytes, fewer only at the end of the stream (a pipe may
/// deliver one byte at a time). Returns how many were read.
fn read_head(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The decompressed bytes of `raw` (gzip recognised by its magic bytes), and how it
/// was compressed. `name` is for errors.
pub fn decompressed(
    name: &str,
    mut raw: impl Read + Send + 'static,
) -> Result<(Box<dyn Read + Send>, Compression), ReadError> {
    let mut head = [0u8; 2];
    let got = read_head(&mut raw, &mut head).map_err(|source| ReadError::Io {
        name: name.to_string(),
        offset: 0,
        source,
    })?;
    // Put the peeked bytes back in front of the rest.
    let whole = io::Cursor::new(head[..got].to_vec()).chain(raw);
    if gzip::is_gzip(&head[..got]) {
        Ok((gzip::decoder(whole), Compression::Gzip))
    } else {
        Ok((Box::new(whole), Compression::None))
    }
}

/// Opens `spec`: `-` for stdin, an oplog archive directory (`pitr archive`), a
/// directory (see [`DIR_CANDIDATES`]), or a file; plain BSON, gzip-compressed BSON,
/// or a mongodump archive (`--archive [--gzip] --oplog`: its oplog namespace is
/// read), all recognised by content.
pub fn open(spec: &str, opts: ReadOptions) -> Result<OplogReader, ReadError> {
    open_range(spec, opts, &ChunkRange::ALL)
}

/// Like [`open`], but an oplog archive yields only the chunks holding `range` (the
/// entries from `range.from` up to the first one at or after `range.to`, and maybe
/// more: whole chunks). Any other source is read whole.
pub fn open_range(
    spec: &str,
    opts: ReadOptions,
    range: &ChunkRange,
) -> Result<OplogReader, ReadError> {
    if spec == "-" {
        let counter = ByteCounter::default();
        let src = CountingRead::new(io::stdin(), counter.clone());
        return open_stream("<stdin>".into(), src, opts, counter, None);
    }
    open_location(&Location::parse(spec)?, opts, range)
}

/// [`open_range`] for a parsed location.
pub fn open_location(
    loc: &Location,
    opts: ReadOptions,
    range: &ChunkRange,
) -> Result<OplogReader, ReadError> {
    let Some(spec) = loc.local_path() else {
        return match resolve_object(loc)? {
            Resolved::Archive(dir) => oplog_archive::read::open_at(&dir, opts, range),
            Resolved::File(file) => {
                let counter = ByteCounter::default();
                // A copy made by an earlier pass of this run (see `spool`).
                if let Some((copy, len)) = spool::open_copy(&file) {
                    let counted = CountingRead::new(copy, counter.clone());
                    return open_stream(file.to_string(), counted, opts, counter, Some(len));
                }
                let r = storage::global().open_read(&file)?;
                let len = Some(r.size());
                let counted = CountingRead::new(spool::tee(&file, r), counter.clone());
                open_stream(file.to_string(), counted, opts, counter, len)
            }
        };
    };
    if is_oplog_archive(spec) {
        return oplog_archive::read::open(spec, opts, range);
    }
    let path = resolve(spec)?;
    let file = File::open(&path).map_err(|source| ReadError::Open {
        path: path.clone(),
        source,
    })?;
    // A pipe's or a device's length is 0, not its size: unknown (on a terminal the
    // scan then shows the bytes read so far; with 0 it showed nothing at all).
    let len = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let counter = ByteCounter::default();
    let counted = CountingRead::new(file, counter.clone());
    open_stream(path.display().to_string(), counted, opts, counter, len)
}

/// What an object location names.
enum Resolved {
    /// An oplog archive (a prefix holding pitr's `manifest.json`).
    Archive(Location),
    /// One object holding an oplog (plain, gzip, or a mongodump archive).
    File(Location),
}

/// An object is read as a file; a prefix is a directory: an oplog archive when its
/// `manifest.json` says so, else a dump whose oplog is one of [`DIR_CANDIDATES`].
fn resolve_object(loc: &Location) -> Result<Resolved, ReadError> {
    let listed = match storage::global().stat(loc)? {
        Found::Object(_) => return Ok(Resolved::File(loc.clone())),
        Found::Nothing => return Err(storage::StorageError::not_found(loc).into()),
        Found::Prefix(listed) => listed,
    };
    if oplog_archive::read::is_oplog_archive_at(loc)? {
        return Ok(Resolved::Archive(loc.clone()));
    }
    for c in DIR_CANDIDATES {
        let want = loc.join(c);
        if listed.iter().any(|o| o.location == want) {
            return Ok(Resolved::File(want));
        }
    }
    Err(ReadError::NoOplogInDir {
        dir: PathBuf::from(loc.to_string()),
        looked: DIR_CANDIDATES.iter().map(|c| c.to_string()).collect(),
    })
}

/// Whether `spec` names an oplog archive (a local directory or a prefix holding
/// pitr's `manifest.json`); `-` and what cannot be parsed are not.
pub fn is_archive_spec(spec: &str) -> bool {
    if spec == "-" {
        return false;
    }
    match Location::parse(spec) {
        Ok(Location::Local(p)) => is_oplog_archive(&p),
        Ok(loc) => oplog_archive::read::is_oplog_archive_at(&loc).unwrap_or(false),
        Err(_) => false,
    }
}

fn open_stream(
    name: String,
    raw: impl Read + Send + 'static,
    opts: ReadOptions,
    counter: ByteCounter,
    len: Option<u64>,
) -> Result<OplogReader, ReadError> {
    let (mut src, _) = decompressed(&name, raw)?;
    let mut head = [0u8; 4];
    let mut got = 0;
    // Gzip data cut before 4 bytes decompressed: the reader reports the cut.
    let mut cut: Option<gzip::GzipTruncated> = None;
    while got < head.len() {
        match src.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if gzip::GzipTruncated::of(&e).is_some() => {
                cut = gzip::GzipTruncated::of(&e).cloned();
                break;
            }
            Err(source) => {
                return Err(ReadError::Io {
                    name: name.clone(),
                    offset: 0,
                    source,
                })
            }
        }
    }
    let rest: Box<dyn Read + Send> = match cut {
        Some(c) => Box::new(FailsOnce(Some(c.into_io()))),
        None => src,
    };
    let whole: Box<dyn Read + Send> = Box::new(io::Cursor::new(head[..got].to_vec()).chain(rest));
    if got == 4 && head == crate::archive::MAGIC {
        let archive = crate::archive::ArchiveReader::new(
            name.clone(),
            whole,
            crate::archive::ReadOptions::default(),
        )
        .map_err(|e| ReadError::Archive(Box::new(e)))?;
        let ns = crate::archive::NamespaceReader::new(archive, &crate::archive::Namespace::oplog())
            .map_err(|e| ReadError::Archive(Box::new(e)))?;
        return Ok(OplogReader::with_counter(
            name,
            Box::new(ns),
            opts,
            counter,
            len,
        ));
    }
    Ok(OplogReader::with_counter(name, whole, opts, counter, len))
}

/// A source that fails with one error, then ends.
struct FailsOnce(Option<io::Error>);

impl Read for FailsOnce {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        self.0.take().map_or(Ok(0), Err)
    }
}

/// The gaps recorded by the oplog archive `spec` (entries lost from the server's
/// oplog before the archiver read them); none for any other source.
pub fn recorded_gaps(spec: &str) -> Result<Vec<GapRecord>, ReadError> {
    if spec == "-" {
        return Ok(Vec::new());
    }
    match Location::parse(spec)? {
        Location::Local(p) if is_oplog_archive(&p) => oplog_archive::read::recorded_gaps(&p),
        Location::Local(_) => Ok(Vec::new()),
        loc if oplog_archive::read::is_oplog_archive_at(&loc)? => {
            oplog_archive::read::recorded_gaps_at(&loc)
        }
        _ => Ok(Vec::new()),
    }
}

/// How the file or object at `loc` is compressed, by its first bytes (one ranged
/// GET for an object).
pub fn compression_at(loc: &Location) -> Result<Compression, ReadError> {
    if let Some(p) = loc.local_path() {
        return compression_of(p);
    }
    let head = storage::global().read_head(loc, 2)?;
    Ok(if gzip::is_gzip(&head) {
        Compression::Gzip
    } else {
        Compression::None
    })
}

/// How the file at `path` is compressed, by its first bytes.
pub fn compression_of(path: &Path) -> Result<Compression, ReadError> {
    let mut f = File::open(path).map_err(|source| ReadError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let mut head = [0u8; 2];
    let got = read_head(&mut f, &mut head).map_err(|source| ReadError::Io {
        name: path.display().to_string(),
        offset: 0,
        source,
    })?;
    Ok(if gzip::is_gzip(&head[..got]) {
        Compression::Gzip
    } else {
        Compression::None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn entry() -> Vec<u8> {
        bson::to_vec(&bson::doc! { "ts": bson::Timestamp { time: 3, increment: 1 }, "op": "n", "ns": "", "o": {} }).unwrap()
    }

    /// A file's length is the scan's total; a pipe's (0 from its metadata) is
    /// unknown, so that a terminal shows the bytes read rather than nothing.
    #[test]
    fn a_pipe_has_no_known_length_and_a_file_has_its_own() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("oplog.bson");
        std::fs::write(&file, entry()).unwrap();
        let r = open(file.to_str().unwrap(), ReadOptions::default()).unwrap();
        assert_eq!(r.progress().1, Some(entry().len() as u64));
        let fifo = t.path().join("oplog.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, entry()).unwrap())
        };
        let mut r = open(fifo.to_str().unwrap(), ReadOptions::default()).unwrap();
        assert_eq!(r.progress().1, None);
        assert!(r.next_raw().unwrap().is_some());
        writer.join().unwrap();
    }

    #[test]
    fn a_backups_own_oplog_is_told_from_an_oplog_beside_a_backup() {
        let t = tempfile::tempdir().unwrap();
        let touch = |rel: &str| {
            let p = t.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        };
        // mongodump --oplog: the backup and its root oplog.bson.
        touch("b/oplog.bson");
        touch("b/shop/orders.bson");
        touch("b/shop/orders.metadata.json");
        assert!(is_a_backups_own(&t.path().join("b")));
        assert!(is_a_backups_own(&t.path().join("b/oplog.bson")));
        // --gzip.
        touch("g/oplog.bson");
        touch("g/shop/orders.metadata.json.gz");
        assert!(is_a_backups_own(&t.path().join("g")));
        // An oplog beside a backup directory (the fixtures' layout): not the backup's.
        touch("i/oplog.bson");
        touch("i/backup/oplog.bson");
        touch("i/backup/shop/orders.metadata.json");
        assert!(!is_a_backups_own(&t.path().join("i/oplog.bson")));
        assert!(!is_a_backups_own(&t.path().join("i")));
        assert!(is_a_backups_own(&t.path().join("i/backup")));
        // pitr dump-oplog's directory, mongodump -d local -c oplog.rs, a lone file.
        touch("d/oplog.bson");
        touch("d/.pitr-dump.json");
        touch("l/local/oplog.rs.bson");
        touch("l/local/oplog.rs.metadata.json");
        touch("f.bson");
        for p in ["d", "d/oplog.bson", "l", "f.bson", "missing"] {
            assert!(!is_a_backups_own(&t.path().join(p)), "{p}");
        }
    }

    fn count(r: &mut OplogReader) -> u64 {
        while r.next_entry().unwrap().is_some() {}
        r.entries_read()
    }

    #[test]
    fn opens_plain_gzip_and_dump_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("x.bson");
        std::fs::write(&plain, [entry(), entry()].concat()).unwrap();
        assert_eq!(
            count(&mut open(plain.to_str().unwrap(), ReadOptions::default()).unwrap()),
            2
        );

        let gz = dir.path().join("x.bson.gz");
        let mut enc =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        enc.write_all(&[entry(), entry(), entry()].concat())
            .unwrap();
        enc.finish().unwrap();
        assert_eq!(
            count(&mut open(gz.to_str().unwrap(), ReadOptions::default()).unwrap()),
            3
        );

        let dump = dir.path().join("dump");
        std::fs::create_dir_all(dump.join("local")).unwrap();
        std::fs::write(dump.join("local/oplog.rs.bson"), entry()).unwrap();
        let r = open(dump.to_str().unwrap(), ReadOptions::default()).unwrap();
        assert!(r.name().ends_with("local/oplog.rs.bson"));
        // A root oplog.bson (mongodump --oplog) wins over local/oplog.rs.bson.
        std::fs::write(dump.join("oplog.bson"), [entry(), entry()].concat()).unwrap();
        let mut r = open(dump.to_str().unwrap(), ReadOptions::default()).unwrap();
        assert!(r.name().ends_with("dump/oplog.bson"));
        assert_eq!(count(&mut r), 2);
    }

    fn gzip_bytes(raw: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(raw).unwrap();
        enc.finish().unwrap()
    }

    /// `mongodump --oplog --gzip` writes gzip content into a file still named
    /// `oplog.bson`: it must read as the entries, not as "looks like gzip".
    #[test]
    fn gzip_is_recognised_by_content_not_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let dump = dir.path().join("dump");
        std::fs::create_dir_all(&dump).unwrap();
        std::fs::write(
            dump.join("oplog.bson"),
            gzip_bytes(&[entry(), entry()].concat()),
        )
        .unwrap();
        let mut r = open(dump.to_str().unwrap(), ReadOptions::default()).unwrap();
        assert_eq!(count(&mut r), 2);
        assert_eq!(
            compression_of(&dump.join("oplog.bson")).unwrap(),
            Compression::Gzip
        );
        // Two members (what `cat a.gz b.gz` gives) read as one stream.
        let two = [
            gzip_bytes(&entry()),
            gzip_bytes(&[entry(), entry()].concat()),
        ]
        .concat();
        let f = dir.path().join("two-members.bin");
        std::fs::write(&f, two).unwrap();
        assert_eq!(
            count(&mut open(f.to_str().unwrap(), ReadOptions::default()).unwrap()),
            3
        );
        // A plain file named .gz is plain.
        let f = dir.path().join("plain.bson.gz");
        std::fs::write(&f, entry()).unwrap();
        assert_eq!(compression_of(&f).unwrap(), Compression::None);
        assert_eq!(
            count(&mut open(f.to_str().unwrap(), ReadOptions::default()).unwrap()),
            1
        );
        // Empty and one-byte files are not gzip.
        let f = dir.path().join("empty.bson");
        std::fs::write(&f, b"").unwrap();
        assert_eq!(
            count(&mut open(f.to_str().unwrap(), ReadOptions::default()).unwrap()),
            0
        );
        std::fs::write(&f, [0x1f]).unwrap();
        assert_eq!(compression_of(&f).unwrap(), Compression::None);
    }

    #[test]
    fn missing_file_and_empty_dir_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = open(
            dir.path().join("nope.bson").to_str().unwrap(),
            ReadOptions::default(),
        )
        .err()
        .unwrap();
        assert!(matches!(err, ReadError::Open { .. }));
        let err = open(dir.path().to_str().unwrap(), ReadOptions::default())
            .err()
            .unwrap();
        assert!(err.to_string().contains("without an oplog"), "{err}");
    }
}
