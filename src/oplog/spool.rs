//! A local copy of an oplog object, made by the first pass that reads it whole, so
//! that later passes of the same run read the copy instead of the bucket.
//!
//! A replay reads its oplog more than once (the plan's scan, the slice, the engine's
//! own passes). From a local file the later passes come from the page cache; from a
//! bucket each one is another full GET (on loopback against s3s-fs, 6 s per GiB per
//! pass). While a spool is on ([`enable`], for the length of one run), the first read
//! of an oplog object through [`super::source`] (or of a chunk of an oplog archive in a
//! bucket, through [`super::oplog_archive`]) also writes the bytes it receives into
//! the spool directory, under a temporary name; only a read that reached the object's
//! last byte (the storage layer has checked by then that every range came from the one
//! version the read started on) renames it and records it. A read dropped early, or a
//! write that fails (a full disk), leaves no copy, and the next pass reads the bucket
//! again. Later reads of the same location open the copy: the same bytes as the first
//! pass read, even if the object were replaced in between.
//!
//! The copy costs the object's size on the work dir's disk (the replay counts it in its
//! space check, and runs without the spool when it does not fit). It is removed when
//! the [`SpoolGuard`] is dropped.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::storage::{Location, StorageReader};

struct Spool {
    dir: PathBuf,
    /// Complete copies, by the location's URL.
    done: HashMap<String, PathBuf>,
    made: u64,
}

static SPOOL: Mutex<Option<Spool>> = Mutex::new(None);

fn spool() -> std::sync::MutexGuard<'static, Option<Spool>> {
    SPOOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// While alive, oplog objects read whole are copied into its directory; dropping it
/// turns the spool off and removes the copies.
#[derive(Debug)]
pub struct SpoolGuard {
    dir: PathBuf,
}

impl Drop for SpoolGuard {
    fn drop(&mut self) {
        *spool() = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Turns the spool on, with its copies in `dir` (created; it must not exist yet).
pub fn enable(dir: &Path) -> io::Result<SpoolGuard> {
    std::fs::create_dir(dir)?;
    *spool() = Some(Spool {
        dir: dir.to_path_buf(),
        done: HashMap::new(),
        made: 0,
    });
    Ok(SpoolGuard {
        dir: dir.to_path_buf(),
    })
}

/// The complete copy of `loc`, if the spool holds one.
pub(crate) fn copy_of(loc: &Location) -> Option<PathBuf> {
    spool().as_ref()?.done.get(&loc.to_string()).cloned()
}

/// `r`, reading `loc`, copying what it reads into the spool when the spool is on.
pub(crate) fn tee(loc: &Location, r: StorageReader) -> Box<dyn Read + Send> {
    if loc.local_path().is_some() {
        return Box::new(r); // a local file is no faster to read from a copy
    }
    let file = {
        let g = spool();
        let Some(s) = g.as_ref() else {
            return Box::new(r);
        };
        tempfile::Builder::new()
            .prefix(".oplog-")
            .suffix(".tmp")
            .tempfile_in(&s.dir)
    };
    match file {
        Ok(file) => Box::new(Tee {
            url: loc.to_string(),
            size: r.size(),
            inner: r,
            pos: 0,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
        }),
        Err(_) => Box::new(r),
    }
}

struct Tee {
    url: String,
    size: u64,
    inner: StorageReader,
    pos: u64,
    out: Option<BufWriter<tempfile::NamedTempFile>>,
}

impl Tee {
    /// The read reached the object's end: keep the copy.
    fn keep(&mut self) {
        let Some(out) = self.out.take() else {
            return;
        };
        let Ok(file) = out.into_inner() else {
            return;
        };
        let mut g = spool();
        let Some(s) = g.as_mut() else {
            return; // the run ended meanwhile: the temp file goes with `file`
        };
        if s.done.contains_key(&self.url) {
            return; // another pass made one first
        }
        s.made += 1;
        let path = s.dir.join(format!("oplog-{}.bson", s.made));
        if file.persist(&path).is_ok() {
            s.done.insert(self.url.clone(), path);
        }
    }
}

impl Read for Tee {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            if self.pos == self.size {
                self.keep();
            }
            return Ok(0);
        }
        self.pos += n as u64;
        if let Some(out) = &mut self.out {
            if out.write_all(&buf[..n]).is_err() {
                // No copy (a full disk?): this pass goes on; later ones read the bucket.
                self.out = None;
            }
        }
        Ok(n)
    }
}

/// Opens the copy of `loc` made by an earlier pass, if any.
pub(crate) fn open_copy(loc: &Location) -> Option<(File, u64)> {
    let path = copy_of(loc)?;
    let f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    Some((f, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_to_the_end_is_kept_and_a_partial_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let src = dir.path().join("oplog.bson");
        std::fs::write(&src, &data).unwrap();
        let spool_dir = dir.path().join("spool");
        let loc = Location::parse("s3://bkt/oplog.bson").unwrap();
        let open = || {
            let file = File::open(&src).unwrap();
            StorageReader::Local {
                file,
                size: data.len() as u64,
            }
        };
        {
            let _guard = enable(&spool_dir).unwrap();
            // Dropped after part of it: no copy, no temp file left.
            let mut r = tee(&loc, open());
            let mut head = vec![0u8; 1000];
            r.read_exact(&mut head).unwrap();
            drop(r);
            assert!(copy_of(&loc).is_none());
            assert_eq!(std::fs::read_dir(&spool_dir).unwrap().count(), 0);
            // Read whole: kept, byte for byte.
            let mut all = Vec::new();
            tee(&loc, open()).read_to_end(&mut all).unwrap();
            assert_eq!(all, data);
            let copy = copy_of(&loc).expect("a copy");
            assert_eq!(std::fs::read(&copy).unwrap(), data);
            let (_, len) = open_copy(&loc).unwrap();
            assert_eq!(len, data.len() as u64);
            // Another location has none.
            assert!(copy_of(&Location::parse("s3://bkt/other.bson").unwrap()).is_none());
        }
        // The guard dropped: the spool is off and its directory gone.
        assert!(copy_of(&loc).is_none());
        assert!(!spool_dir.exists());
        let r = tee(&loc, open());
        drop(r);
        assert!(!spool_dir.exists());
    }
}
