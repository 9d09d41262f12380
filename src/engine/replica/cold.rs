//! Collections the oplog never touches, left in the backup's data file.
//!
//! A restore's backup is mostly collections the oplog's hour never writes: loading
//! them into the replica (memory, or the on-disk store past `--memory`) only to
//! hash and dump them again costs the time and the memory of the whole backup. A
//! collection is kept *cold* when the oplog names it nowhere (the plan's scan,
//! [`crate::forensics::seen::Seen`]) and its data file is a plain BSON file of a
//! directory backup whose documents are already in the `_id` index's order (each
//! `_id` strictly greater than the one before, in the server's order: [`IdKey`]),
//! which [`ColdDocs::check`] verifies while it reads the file once. Its documents
//! are then the file's bytes, in the order the dump writes them and `dbHash` hashes
//! them, so:
//!
//! - the dump copies the file ([`ColdDocs::copy_to`]; the kernel's
//!   `copy_file_range`), and the hash is the MD5 of its bytes ([`ColdDocs::md5`]);
//!   the embedded replay has the copy made ahead, while the oplog is applied, beside
//!   the dump ([`ColdDocs::copy_ahead`]), and the dump renames it into place;
//! - reads stream the file ([`ColdDocs::for_each`]), and a single document is
//!   found through a sparse index of the file's keys ([`ColdDocs::get`]);
//! - none of it counts against `--memory`.
//!
//! A file out of `_id` order (mongodump reads in natural order, so ObjectIds from
//! several clients interleave), with a duplicate `_id`, a document without one, or
//! gzip content is loaded as before. If an entry does touch a cold collection after
//! all (the scan's names are a hint, not a proof), the replica loads it first
//! ([`super::Replica::warm`]), as the seeding would have: the outcome never depends
//! on the hint, only the time does.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, SystemTime};

use md5::{Digest, Md5};

use super::{interrupt, ReplicaError};
use crate::engine::IdKey;
use crate::oplog::{OplogReader, ReadOptions};

mod early;
pub use early::{early, Early};

/// The environment variable that turns cold collections off: `load` loads every
/// collection of the backup, as before them; `late` checks their files when the
/// replica is seeded, not while the oplog is read ([`early`]) (for comparisons
/// and benchmarks).
pub const COLD_ENV: &str = "PITR_COLD";

/// Whether [`COLD_ENV`] turns cold collections off.
pub fn disabled() -> bool {
    std::env::var(COLD_ENV).is_ok_and(|v| v.trim() == "load")
}

/// The environment variable that decides the copies made ahead: `0` never (the
/// dump copies cold collections' files itself, as before them), `1` always;
/// otherwise past the kernel's dirty page limit
/// ([`copy_ahead_from_bytes`]). For comparisons and benchmarks.
pub const COPY_AHEAD_ENV: &str = "PITR_COLD_COPY";

/// Where cold collections' files are copied ahead of the dump
/// ([`ColdDocs::copy_ahead`]), and from what size on.
#[derive(Clone, Debug)]
pub struct CopyAhead {
    /// The staging directory beside the dump (its file system).
    pub dir: PathBuf,
    /// The copies are made only when the wanted cold files hold at least this many
    /// bytes together.
    pub from_bytes: u64,
}

/// From what size on copies are made, as [`COPY_AHEAD_ENV`] says: never (None)
/// with `0`, from any size with `1`, and by default once the cold files pass
/// what the kernel lets the page cache hold dirty before it starts writing
/// back ([`dirty_background_bytes`]). Below that the dump's write goes at memory
/// speed and a copy made during the apply only takes CPU and memory bandwidth
/// from it (1 GiB bench: the apply 0.5 s longer, the dump 0.2 s shorter); past
/// it the dump's write waits for the disk (4 GiB bench: the dump's last phase
/// 8-10 s, 2-3 s with the copies made ahead).
pub fn copy_ahead_from_bytes() -> Option<u64> {
    match std::env::var(COPY_AHEAD_ENV).as_deref().map(str::trim) {
        Ok("0") => None,
        Ok("1") => Some(0),
        _ => dirty_background_bytes(),
    }
}

/// The dirty page cache past which Linux starts writing back (and soon throttles
/// writers): `vm.dirty_background_bytes` when set, else `vm.dirty_background_ratio`
/// percent of the memory available now. None where `/proc` does not say.
fn dirty_background_bytes() -> Option<u64> {
    let read = |p: &str| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok();
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    dirty_background(
        read("/proc/sys/vm/dirty_background_bytes")?,
        read("/proc/sys/vm/dirty_background_ratio")?,
        available_bytes(&meminfo)?,
    )
}

/// [`dirty_background_bytes`] from the two settings and the available memory.
fn dirty_background(bytes: u64, ratio: u64, available: u64) -> Option<u64> {
    match bytes {
        0 => Some(available / 100 * ratio),
        b => Some(b),
    }
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn available_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Whether [`COLD_ENV`] leaves the files' checks to the seeding.
pub fn late() -> bool {
    std::env::var(COLD_ENV).is_ok_and(|v| v.trim() == "late")
}

/// Whether a collection may stay cold: an ordinary collection with the simple
/// `_id` index (its documents in the order the dump writes and `dbHash` hashes:
/// not capped, not clustered, no collation), outside the system databases and
/// collections.
pub fn eligible(ns: &str, c: &super::CollInfo) -> bool {
    c.kind == super::CollKind::Collection
        && !c.is_capped()
        && !c.is_clustered()
        && c.has_id_index()
        && !super::hash::ids_follow_a_collation(c)
        && eligible_name(ns)
}

/// The part of [`eligible`] a name decides: outside the system databases and
/// collections (what the early checks can know before the catalog, [`early`]).
pub fn eligible_name(ns: &str) -> bool {
    let (db, coll) = ns.split_once('.').unwrap_or((ns, ""));
    !coll.starts_with("system.") && !matches!(db, "admin" | "local" | "config")
}

/// One key of the sparse index every this many bytes of the file.
const INDEX_EVERY: u64 = 64 << 10;

/// Bytes copied at a time (the kernel's copy between two checks for Ctrl-C and two
/// reports of progress).
#[cfg(not(test))]
const COPY_CHUNK: u64 = 64 << 20;
#[cfg(test)]
const COPY_CHUNK: u64 = 16 << 10;

/// Bytes read at a time for the MD5 (between two checks for Ctrl-C and two reports
/// of progress).
#[cfg(not(test))]
const HASH_CHUNK: usize = 1 << 20;
#[cfg(test)]
const HASH_CHUNK: usize = 16 << 10;

/// A cold collection's documents: its backup data file, checked.
#[derive(Debug)]
pub struct ColdDocs {
    path: PathBuf,
    /// Documents in the file.
    pub count: u64,
    /// The file's length and modification time when checked: a file changed since
    /// is refused, never read as something else.
    len: u64,
    modified: Option<SystemTime>,
    /// The first key at or after every [`INDEX_EVERY`] bytes, with its offset.
    index: Vec<(IdKey, u64)>,
    /// The MD5 of the file once computed; held locked while it is, so that a
    /// reader waits for the background hashing ([`hash_in_background`]) instead
    /// of hashing the file twice.
    md5: Mutex<Option<[u8; 16]>>,
    /// The copy made ahead of the dump ([`ColdDocs::copy_ahead`]); held locked
    /// while it is made, so that the dump waits for it instead of copying twice.
    ahead: Mutex<Ahead>,
    /// Bytes of the file hashed, and copied, so far by whichever thread does it:
    /// what a thread waiting for that one reports ([`lock_reporting`]), so that a
    /// dump waiting minutes for a large collection's MD5 or copy shows it moving.
    hashed: AtomicU64,
    copied: AtomicU64,
}

/// How often a thread waiting for another's MD5 or copy reports its progress
/// (and checks for Ctrl-C).
const WAIT_POLL: Duration = Duration::from_millis(20);

/// Locks `m`; while another thread holds it (the MD5 or the copy under way there),
/// hands `progress` the bytes that thread has done (`done`) every [`WAIT_POLL`],
/// and stops on Ctrl-C.
fn lock_reporting<'a, T>(
    m: &'a Mutex<T>,
    done: &AtomicU64,
    progress: &mut dyn FnMut(u64),
) -> Result<MutexGuard<'a, T>, ReplicaError> {
    loop {
        match m.try_lock() {
            Ok(g) => return Ok(g),
            Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => {
                progress(done.load(Ordering::Relaxed));
                interrupt::check()?;
                std::thread::sleep(WAIT_POLL);
            }
        }
    }
}

/// Documents shown in a [`super::Meter`] as a cold collection's bytes are hashed
/// or copied (its documents in proportion), the rest at [`DocsShown::finish`].
pub struct DocsShown<'a> {
    docs: &'a ColdDocs,
    meter: &'a super::Meter,
    shown: u64,
}

impl<'a> DocsShown<'a> {
    pub fn new(docs: &'a ColdDocs, meter: &'a super::Meter) -> DocsShown<'a> {
        DocsShown {
            docs,
            meter,
            shown: 0,
        }
    }

    /// `bytes` of the file done.
    pub fn at(&mut self, bytes: u64) {
        let d = self.docs;
        let now = match d.len {
            0 => 0,
            len => (u128::from(d.count) * u128::from(bytes.min(len)) / u128::from(len)) as u64,
        };
        if now > self.shown {
            self.meter.add(now - self.shown);
            self.shown = now;
        }
    }

    /// All `total` documents shown (the collection's count).
    pub fn finish(self, total: u64) {
        self.meter.add(total.saturating_sub(self.shown));
    }
}

/// Where the copy made ahead of the dump stands.
#[derive(Debug, Default)]
enum Ahead {
    #[default]
    NotYet,
    /// A complete copy of the file, in the staging directory beside the dump.
    Made(tempfile::TempPath),
    /// The dump has copied the file itself (or taken the copy): none is made.
    Taken,
}

impl ColdDocs {
    /// Reads `path` once: the cold documents when every document has an `_id`
    /// greater than the one before and the file is plain BSON, None otherwise (the
    /// caller loads the collection). `each` sees every document read (progress and
    /// Ctrl-C: its error stops the check).
    pub fn check(
        path: &Path,
        each: &mut dyn FnMut() -> Result<(), ReplicaError>,
    ) -> Result<Option<ColdDocs>, ReplicaError> {
        let (mut file, len, modified) = open_checked(path, None)?;
        let mut head = [0u8; 2];
        if file.read_exact(&mut head).is_ok() && crate::stream::gzip::is_gzip(&head) {
            return Ok(None);
        }
        file.rewind().map_err(|e| io_failed(path, e))?;
        let mut r = reader(path, file);
        let mut index = Vec::new();
        let mut prev: Option<IdKey> = None;
        let mut count = 0u64;
        let mut next_mark = 0u64;
        while let Some((doc, offset, _)) = r.next_raw().map_err(|e| read_failed(path, e))? {
            each()?;
            let Ok(key) = IdKey::from_document_id(doc) else {
                return Ok(None);
            };
            if prev.as_ref().is_some_and(|p| *p >= key) {
                return Ok(None);
            }
            if offset >= next_mark {
                index.push((key.clone(), offset));
                next_mark = offset + INDEX_EVERY;
            }
            prev = Some(key);
            count += 1;
        }
        if r.offset() != len {
            return Ok(None);
        }
        Ok(Some(ColdDocs {
            path: path.to_path_buf(),
            count,
            len,
            modified,
            index,
            md5: Mutex::new(None),
            ahead: Mutex::default(),
            hashed: AtomicU64::new(0),
            copied: AtomicU64::new(0),
        }))
    }

    /// The data file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of documents (the file's length).
    pub fn bytes(&self) -> u64 {
        self.len
    }

    fn open(&self) -> Result<File, ReplicaError> {
        open_checked(&self.path, Some((self.len, self.modified))).map(|(f, _, _)| f)
    }

    /// Calls `f` with every document, in `_id` order; stops on Ctrl-C.
    pub fn for_each(
        &self,
        f: &mut dyn FnMut(&[u8]) -> Result<(), ReplicaError>,
    ) -> Result<(), ReplicaError> {
        let mut r = reader(&self.path, self.open()?);
        let mut n = 0u64;
        while let Some((doc, _, _)) = r.next_raw().map_err(|e| read_failed(&self.path, e))? {
            n += 1;
            if n.is_multiple_of(interrupt::EVERY) {
                interrupt::check()?;
            }
            f(doc.as_bytes())?;
        }
        if n != self.count {
            return Err(changed(&self.path));
        }
        Ok(())
    }

    /// The document with `_id` `key`: from the indexed key at or before it, read on
    /// until a greater key.
    pub fn get(&self, key: &IdKey) -> Result<Option<Vec<u8>>, ReplicaError> {
        let at = self.index.partition_point(|(k, _)| k <= key);
        let Some((_, offset)) = at.checked_sub(1).map(|i| &self.index[i]) else {
            return Ok(None);
        };
        let mut file = self.open()?;
        file.seek(SeekFrom::Start(*offset))
            .map_err(|e| io_failed(&self.path, e))?;
        let mut r = reader(&self.path, file);
        while let Some((doc, _, _)) = r.next_raw().map_err(|e| read_failed(&self.path, e))? {
            let k = IdKey::from_document_id(doc).map_err(|_| changed(&self.path))?;
            match k.cmp(key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Ok(Some(doc.as_bytes().to_vec())),
                std::cmp::Ordering::Greater => break,
            }
        }
        Ok(None)
    }

    /// The MD5 of the documents in `_id` order (what `dbHash` computes): the file's
    /// bytes.
    pub fn md5(&self) -> Result<[u8; 16], ReplicaError> {
        self.md5_unless(&|| false)
    }

    /// [`ColdDocs::md5`], handing `progress` the bytes hashed as they are, here or
    /// on the thread hashing the file already (the dump then waits for it).
    pub fn md5_reporting(&self, progress: &mut dyn FnMut(u64)) -> Result<[u8; 16], ReplicaError> {
        self.md5_with(&|| false, progress)
    }

    /// Whether the MD5 is made, or being made on another thread.
    fn md5_known(&self) -> bool {
        self.md5.try_lock().map_or(true, |kept| kept.is_some())
    }

    /// [`ColdDocs::md5`], given up (an error) as soon as `stop` says so.
    fn md5_unless(&self, stop: &dyn Fn() -> bool) -> Result<[u8; 16], ReplicaError> {
        self.md5_with(stop, &mut |_| {})
    }

    /// The MD5 made once: waits for a thread making it (reporting its bytes), else
    /// makes it here, given up as soon as `stop` says so.
    fn md5_with(
        &self,
        stop: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<[u8; 16], ReplicaError> {
        let mut kept = lock_reporting(&self.md5, &self.hashed, progress)?;
        if let Some(h) = *kept {
            return Ok(h);
        }
        let h = self.hash_file(stop, progress)?;
        *kept = Some(h);
        Ok(h)
    }

    /// The file's MD5, with the bytes hashed so far in `hashed` and `progress`.
    fn hash_file(
        &self,
        stop: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<[u8; 16], ReplicaError> {
        self.hashed.store(0, Ordering::Relaxed);
        let mut file = self.open()?;
        let mut h = Md5::new();
        let mut buf = vec![0u8; HASH_CHUNK];
        let mut total = 0u64;
        loop {
            interrupt::check()?;
            if stop() {
                return Err(ReplicaError::Interrupted);
            }
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_failed(&self.path, e)),
            };
            h.update(&buf[..n]);
            total += n as u64;
            self.hashed.store(total, Ordering::Relaxed);
            progress(total);
        }
        if total != self.len {
            return Err(changed(&self.path));
        }
        Ok(h.finalize().into())
    }

    /// Writes the documents to `dest` (a new file): the copy made ahead when there
    /// is one (renamed there, the data file checked unchanged since the copy was
    /// made: same length and modification time as when it was checked), else a
    /// copy of the data file made now. Waits for a copy being made ahead.
    /// `progress` is handed the bytes copied as they are, here or by the copy made
    /// ahead while the dump waits for it.
    pub fn copy_to(&self, dest: &Path, progress: &mut dyn FnMut(u64)) -> Result<(), ReplicaError> {
        let made = {
            let mut ahead = lock_reporting(&self.ahead, &self.copied, progress)?;
            match std::mem::replace(&mut *ahead, Ahead::Taken) {
                Ahead::Made(p) => Some(p),
                Ahead::NotYet | Ahead::Taken => None,
            }
        };
        if let Some(p) = made {
            self.open()?;
            match p.persist(dest) {
                Ok(()) => return Ok(()),
                // Another file system after all: copied below (the copy made
                // ahead is removed with its error).
                Err(e) => drop(e),
            }
        }
        let mut out = File::create(dest).map_err(|e| write_failed(dest, e))?;
        self.copy_into(&mut out, dest, &|| false, progress)
    }

    /// The data file streamed into `out` (an object being uploaded, shown as
    /// `dest`), checked unchanged as [`ColdDocs::copy_to`] checks it. A copy made
    /// ahead is not used (none is made for a dump to a bucket).
    pub fn copy_to_writer(
        &self,
        out: &mut impl std::io::Write,
        dest: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ReplicaError> {
        self.copy_into(out, dest, &|| false, progress)
    }

    /// Copies the data file into `dir` (the staging directory beside the dump, on
    /// the dump's file system) so that [`ColdDocs::copy_to`] only renames it: the
    /// embedded replay has it made while the oplog is applied, when the disk is
    /// otherwise idle, instead of in the dump's last phase. Nothing when a copy was
    /// made or the dump has copied the file already; given up (the partial copy
    /// removed) as soon as `stop` says so or on Ctrl-C.
    pub fn copy_ahead(&self, dir: &Path, stop: &dyn Fn() -> bool) -> Result<(), ReplicaError> {
        let mut ahead = self.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(*ahead, Ahead::NotYet) {
            return Ok(());
        }
        let mut tmp = tempfile::Builder::new()
            .prefix("cold-")
            .suffix(".bson")
            .tempfile_in(dir)
            .map_err(|e| write_failed(dir, e))?;
        let path = tmp.path().to_path_buf();
        self.copy_into(tmp.as_file_mut(), &path, stop, &mut |_| {})?;
        *ahead = Ahead::Made(tmp.into_temp_path());
        Ok(())
    }

    /// Whether a copy made ahead waits to be renamed into the dump.
    #[cfg(test)]
    pub fn copied_ahead(&self) -> bool {
        matches!(
            *self.ahead.lock().unwrap_or_else(PoisonError::into_inner),
            Ahead::Made(_)
        )
    }

    /// The data file copied into `out` (at `dest`; a `File` by the kernel,
    /// `copy_file_range`) a [`COPY_CHUNK`] at a time, so that a Ctrl-C or `stop`
    /// ends it soon, with the bytes copied so far in `copied` and `progress`;
    /// refused when the file changed since it was checked.
    fn copy_into<W: std::io::Write>(
        &self,
        out: &mut W,
        dest: &Path,
        stop: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ReplicaError> {
        self.copied.store(0, Ordering::Relaxed);
        let src = self.open()?;
        let mut copied = 0u64;
        loop {
            interrupt::check()?;
            if stop() {
                return Err(ReplicaError::Interrupted);
            }
            let n = std::io::copy(&mut (&src).take(COPY_CHUNK), out)
                .map_err(|e| self.copy_failed(dest, e))?;
            if n == 0 {
                break;
            }
            copied += n;
            self.copied.store(copied, Ordering::Relaxed);
            progress(copied);
        }
        if copied != self.len {
            return Err(changed(&self.path));
        }
        Ok(())
    }

    /// A failed copy of the data file to `dest`: a write that failed (the kinds
    /// only a write gives: no space, quota, a read-only file system, a file too
    /// large) is `dest`'s; anything else is put down to the backup's file, which
    /// is the one read. (`std::io::copy` does not say which side failed, and the
    /// kernel's copy it makes between two files must be kept.)
    fn copy_failed(&self, dest: &Path, e: std::io::Error) -> ReplicaError {
        use std::io::ErrorKind::*;
        match e.kind() {
            StorageFull | QuotaExceeded | ReadOnlyFilesystem | FileTooLarge | WriteZero => {
                write_failed(dest, e)
            }
            _ => io_failed(&self.path, e),
        }
    }
}

/// Hashes cold collections on a thread of its own at the lowest CPU priority, so
/// that it takes only what the replay leaves idle (the apply keeps about one and a
/// half of two cores busy); the dump then finds their hashes made
/// ([`ColdDocs::md5`]). Dropped, it stops at its next read (the hashes it made
/// stay). An error is not kept: the dump's own hashing meets it again and reports
/// it.
pub struct Background {
    stop: Arc<AtomicBool>,
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts [`Background`] hashing of `docs` (None when the thread cannot start:
/// the dump hashes them then).
pub fn hash_in_background(docs: Vec<Arc<ColdDocs>>) -> Option<Background> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("pitr-cold-md5".into())
        .spawn(move || {
            lowest_priority();
            for d in docs {
                if flag.load(Ordering::Relaxed)
                    || d.md5_unless(&|| flag.load(Ordering::Relaxed)).is_err()
                {
                    return;
                }
            }
        })
        .ok()?;
    Some(Background { stop })
}

/// This thread at nice 19 (Linux schedules threads on their own: `setpriority`
/// with the thread's id).
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take no pointers; a failure leaves the
    // thread at its priority, which is only slower.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

/// Opens `path`, with its length and modification time; with `expect`, refuses a
/// file whose length or modification time changed since.
fn open_checked(
    path: &Path,
    expect: Option<(u64, Option<SystemTime>)>,
) -> Result<(File, u64, Option<SystemTime>), ReplicaError> {
    let file = File::open(path).map_err(|e| io_failed(path, e))?;
    let meta = file.metadata().map_err(|e| io_failed(path, e))?;
    let (len, modified) = (meta.len(), meta.modified().ok());
    if expect.is_some_and(|e| e != (len, modified)) {
        return Err(changed(path));
    }
    Ok((file, len, modified))
}

/// Documents from where `file` stands (offsets counted from there).
fn reader(path: &Path, file: File) -> OplogReader {
    OplogReader::new(path.display().to_string(), file, ReadOptions::default())
}

fn io_failed(path: &Path, e: std::io::Error) -> ReplicaError {
    ReplicaError::BackupFile {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

fn write_failed(path: &Path, e: std::io::Error) -> ReplicaError {
    ReplicaError::DumpFile {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

fn read_failed(path: &Path, e: crate::oplog::ReadError) -> ReplicaError {
    ReplicaError::BackupFile {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

fn changed(path: &Path) -> ReplicaError {
    ReplicaError::BackupFile {
        path: path.display().to_string(),
        why: "the file changed while pitr was using it".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson};

    pub(super) fn file_of(dir: &Path, name: &str, ids: &[Bson]) -> PathBuf {
        let mut b = Vec::new();
        for (n, id) in ids.iter().enumerate() {
            let pad = "x".repeat(n % 90);
            b.extend(bson::to_vec(&doc! { "_id": id.clone(), "n": n as i64, "pad": pad }).unwrap());
        }
        let p = dir.join(name);
        std::fs::write(&p, b).unwrap();
        p
    }

    pub(super) fn check(p: &Path) -> Option<ColdDocs> {
        ColdDocs::check(p, &mut || Ok(())).unwrap()
    }

    /// Ids in the server's order across numeric types and strings, over many
    /// index blocks.
    pub(super) fn ordered(n: i64) -> Vec<Bson> {
        (0..n)
            .map(|i| match i % 3 {
                0 => Bson::Int32(i as i32 * 2),
                1 => Bson::Double(i as f64 * 2.0 - 0.5),
                _ => Bson::Int64(i * 2 - 1),
            })
            .chain((0..n).map(|i| Bson::String(format!("k{i:06}"))))
            .collect()
    }

    #[test]
    fn an_ordered_file_reads_back_whole_and_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ordered(3000);
        let p = file_of(dir.path(), "t.bson", &ids);
        let d = check(&p).expect("in _id order");
        assert_eq!(d.count, ids.len() as u64);
        assert!(d.index.len() > 5, "{} index keys", d.index.len());
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(d.md5().unwrap(), <[u8; 16]>::from(Md5::digest(&bytes)));
        let mut all = Vec::new();
        d.for_each(&mut |doc| {
            all.extend_from_slice(doc);
            Ok(())
        })
        .unwrap();
        assert_eq!(all, bytes);
        let key = |b: &Bson| {
            let raw = bson::RawDocumentBuf::from_document(&doc! { "_id": b.clone() }).unwrap();
            IdKey::from_document_id(&raw).unwrap()
        };
        for (n, id) in ids
            .iter()
            .enumerate()
            .step_by(37)
            .chain([(ids.len() - 1, &ids[ids.len() - 1])])
        {
            let got = d
                .get(&key(id))
                .unwrap()
                .unwrap_or_else(|| panic!("{id} not found"));
            let got: bson::Document = bson::from_slice(&got).unwrap();
            assert_eq!(got.get_i64("n").unwrap(), n as i64);
        }
        // Equal across numeric types: the int64 6 finds the int32 6.
        assert!(d.get(&key(&Bson::Int64(6))).unwrap().is_some());
        for absent in [
            Bson::Int32(-7),
            Bson::Double(0.25),
            Bson::String("k9".into()),
            Bson::Boolean(true),
        ] {
            assert_eq!(d.get(&key(&absent)).unwrap(), None, "{absent}");
        }
        let copy = dir.path().join("copy.bson");
        d.copy_to(&copy, &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), bytes);
    }

    #[test]
    fn files_not_in_id_order_are_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, Vec<Bson>); 3] = [
            (
                "swapped",
                vec![Bson::Int32(1), Bson::Int32(3), Bson::Int32(2)],
            ),
            // 1 and 1.0 are the same `_id`.
            (
                "duplicate",
                vec![Bson::Int32(1), Bson::Double(1.0), Bson::Int32(2)],
            ),
            (
                "string before number",
                vec![Bson::String("a".into()), Bson::Int32(1)],
            ),
        ];
        for (name, ids) in cases {
            assert!(check(&file_of(dir.path(), name, &ids)).is_none(), "{name}");
        }
        let p = dir.path().join("no-id.bson");
        let mut b = bson::to_vec(&doc! { "_id": 1 }).unwrap();
        b.extend(bson::to_vec(&doc! { "x": 2 }).unwrap());
        std::fs::write(&p, &b).unwrap();
        assert!(check(&p).is_none(), "a document without _id");
        let gz = dir.path().join("t.bson.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, &bson::to_vec(&doc! { "_id": 1 }).unwrap()).unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        assert!(check(&gz).is_none(), "gzip content");
        let empty = file_of(dir.path(), "empty.bson", &[]);
        assert_eq!(check(&empty).map(|d| d.count), Some(0));
    }

    #[test]
    fn a_file_changed_since_the_check_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = file_of(dir.path(), "t.bson", &ordered(10));
        let d = check(&p).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        std::io::Write::write_all(&mut f, &bson::to_vec(&doc! { "_id": "zz" }).unwrap()).unwrap();
        drop(f);
        let e = d.md5().unwrap_err();
        assert!(e.to_string().contains("changed"), "{e}");
        assert!(d.for_each(&mut |_| Ok(())).is_err());
    }

    /// The MD5 and the copy hand over their progress as they go, and so does a
    /// thread waiting for another's (the dump waiting for the early hashing or the
    /// copy made ahead): a large collection's minutes of either are not a frozen
    /// progress line. The documents shown follow the bytes, all of them at the end.
    #[test]
    fn the_md5_and_the_copy_report_their_progress_and_so_does_a_wait_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = file_of(dir.path(), "t.bson", &ordered(2000));
        let bytes = std::fs::read(&p).unwrap();
        let len = bytes.len() as u64;
        assert!(len > 8 * COPY_CHUNK && len > 8 * HASH_CHUNK as u64, "{len}");
        let rising_to_len = |seen: &[u64]| {
            seen.len() > 8 && seen.windows(2).all(|w| w[0] <= w[1]) && seen.last() == Some(&len)
        };
        // Done here.
        let d = check(&p).unwrap();
        let mut seen = Vec::new();
        let md5 = d.md5_reporting(&mut |b| seen.push(b)).unwrap();
        assert_eq!(md5, <[u8; 16]>::from(Md5::digest(&bytes)));
        assert!(rising_to_len(&seen), "{seen:?}");
        let mut seen = Vec::new();
        d.copy_to(&dir.path().join("c1.bson"), &mut |b| seen.push(b))
            .unwrap();
        assert!(rising_to_len(&seen), "{seen:?}");
        // Done by another thread, slowed down, while this one waits: this one
        // reports where that one is, then has the result without doing it again.
        let staging = tempfile::tempdir().unwrap();
        let d = Arc::new(check(&p).unwrap());
        let slow = || {
            std::thread::sleep(Duration::from_millis(15));
            false
        };
        for what in ["md5", "copy"] {
            let other = {
                let d = d.clone();
                let staging = staging.path().to_path_buf();
                std::thread::spawn(move || match what {
                    "md5" => d.md5_unless(&slow).map(drop),
                    _ => d.copy_ahead(&staging, &slow),
                })
            };
            let done = match what {
                "md5" => &d.hashed,
                _ => &d.copied,
            };
            while done.load(Ordering::Relaxed) == 0 {
                std::thread::yield_now();
            }
            let mut seen = Vec::new();
            match what {
                "md5" => {
                    let h = d.md5_reporting(&mut |b| seen.push(b)).unwrap();
                    assert_eq!(h, <[u8; 16]>::from(Md5::digest(&bytes)));
                }
                _ => {
                    let dest = dir.path().join("c2.bson");
                    d.copy_to(&dest, &mut |b| seen.push(b)).unwrap();
                    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
                    assert_eq!(std::fs::read_dir(staging.path()).unwrap().count(), 0);
                }
            }
            other.join().unwrap().unwrap();
            assert!(
                seen.iter().any(|&b| 0 < b && b < len),
                "{what}: nothing reported while waiting: {seen:?}"
            );
        }
        // Shown as documents: in proportion, never past the count, the rest at the end.
        let meter = super::super::Meter::new();
        let mut shown = DocsShown::new(&d, &meter);
        shown.at(len / 2);
        assert_eq!(meter.get(), d.count / 2);
        shown.at(len / 4);
        assert_eq!(meter.get(), d.count / 2, "never backwards");
        shown.at(len * 3);
        assert_eq!(meter.get(), d.count);
        shown.finish(d.count);
        assert_eq!(meter.get(), d.count);
    }

    /// A copy into the dump that fails for want of room names the dump's file and
    /// says to check the space there (it used to say that the backup's data file
    /// could not be read, and to leave the backup unchanged); one whose source
    /// cannot be read names the backup's file, not the dump's.
    #[test]
    fn a_failed_copy_names_the_side_that_failed() {
        let dir = tempfile::tempdir().unwrap();
        let p = file_of(dir.path(), "t.bson", &ordered(2000));
        let d = check(&p).unwrap();
        // /dev/full: every write fails with ENOSPC.
        let full = Path::new("/dev/full");
        if full.exists() {
            let e = d.copy_to(full, &mut |_| {}).unwrap_err();
            assert!(matches!(e, ReplicaError::DumpFile { .. }), "{e:?}");
            assert!(e.to_string().starts_with("cannot write `/dev/full`"), "{e}");
            let hint = crate::error::Hint::hint(&e).unwrap();
            assert!(hint.contains("free space"), "{hint}");
        } else {
            eprintln!("a_failed_copy_names_the_side_that_failed: no /dev/full here, the write side is not tested");
        }
        let e = d.copy_failed(Path::new("/out/t.bson"), std::io::Error::other("EIO"));
        assert!(
            e.to_string().starts_with(&format!(
                "cannot read the backup's data file `{}`",
                p.display()
            )),
            "{e}"
        );
    }

    /// A copy made ahead is what the dump renames into place (the same bytes, the
    /// staging directory left empty); one given up leaves nothing and the dump
    /// copies; a data file changed after the copy was made is refused, never
    /// handed over stale.
    #[test]
    fn a_copy_made_ahead_is_renamed_into_the_dump() {
        let dir = tempfile::tempdir().unwrap();
        let staging = tempfile::tempdir().unwrap();
        let p = file_of(dir.path(), "t.bson", &ordered(2000));
        let bytes = std::fs::read(&p).unwrap();
        let staged = || std::fs::read_dir(staging.path()).unwrap().count();

        // Given up midway: nothing left; the dump copies the file itself.
        let d = check(&p).unwrap();
        let e = d.copy_ahead(staging.path(), &|| true).unwrap_err();
        assert!(matches!(e, ReplicaError::Interrupted), "{e}");
        assert!(!d.copied_ahead());
        assert_eq!(staged(), 0);
        let dest = dir.path().join("dump-1.bson");
        d.copy_to(&dest, &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), bytes);

        // Made: renamed into place, once; a second dump copies again.
        let d = check(&p).unwrap();
        d.copy_ahead(staging.path(), &|| false).unwrap();
        assert!(d.copied_ahead());
        assert_eq!(staged(), 1);
        let dest = dir.path().join("dump-2.bson");
        d.copy_to(&dest, &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), bytes);
        assert_eq!(staged(), 0, "renamed, not copied");
        assert!(!d.copied_ahead());
        let again = dir.path().join("dump-3.bson");
        d.copy_to(&again, &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(&again).unwrap(), bytes);
        // The dump has the file already: no copy is made after it.
        d.copy_ahead(staging.path(), &|| false).unwrap();
        assert_eq!(staged(), 0);

        // The data file changed after the copy was made: refused, copy removed.
        let d = check(&p).unwrap();
        d.copy_ahead(staging.path(), &|| false).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        std::io::Write::write_all(&mut f, &bson::to_vec(&doc! { "_id": "zz" }).unwrap()).unwrap();
        drop(f);
        let dest = dir.path().join("dump-4.bson");
        let e = d.copy_to(&dest, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("changed"), "{e}");
        assert!(!dest.exists());
        assert_eq!(staged(), 0);
    }

    /// The dirty page limit: the bytes setting when set, else the ratio of the
    /// memory available; `MemAvailable` read in KiB.
    #[test]
    fn the_dirty_page_limit_follows_the_kernels_settings() {
        assert_eq!(
            dirty_background(0, 10, 24 << 30),
            Some((24 << 30) / 100 * 10)
        );
        assert_eq!(dirty_background(1 << 30, 10, 24 << 30), Some(1 << 30));
        let meminfo =
            "MemTotal:       24000000 kB\nMemFree:        1000 kB\nMemAvailable:   23000000 kB\n";
        assert_eq!(available_bytes(meminfo), Some(23_000_000 * 1024));
        assert_eq!(available_bytes("MemTotal: 5 kB\n"), None);
        if std::path::Path::new("/proc/sys/vm/dirty_background_ratio").exists() {
            assert!(dirty_background_bytes().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn background_hashing_leaves_the_hashes_made() {
        let dir = tempfile::tempdir().unwrap();
        let docs: Vec<Arc<ColdDocs>> = (0..3)
            .map(|i| {
                Arc::new(
                    check(&file_of(
                        dir.path(),
                        &format!("{i}.bson"),
                        &ordered(500 * (i + 1)),
                    ))
                    .unwrap(),
                )
            })
            .collect();
        let bg = hash_in_background(docs.clone()).expect("a thread");
        for d in &docs {
            let want: [u8; 16] = Md5::digest(std::fs::read(d.path()).unwrap()).into();
            // Waits for the thread when it is on this file; hashes itself otherwise.
            assert_eq!(d.md5().unwrap(), want);
            assert_eq!(*d.md5.lock().unwrap(), Some(want));
        }
        drop(bg);
    }
}
