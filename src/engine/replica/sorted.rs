//! Documents past the memory budget as sorted files, written and read only in
//! sequence: the sort-merge store (issue 22).
//!
//! Why: past `--memory` the documents first lived in redb ([`super::disk`]), where
//! each update is a random walk down a B-tree and a page rewritten per key: on the
//! 1 GiB bench, 10.4 s to seed the backup and 37.9 s to apply the oplog, against
//! 0.9 s and 2.6 s for the same writes sorted and merged
//! (`examples/disk_store_bench/`, docs/performance.md, "The on-disk store").
//!
//! How: a collection's documents are its *base*, one file of `(key, document)`
//! records in `_id` order ([`cmp_key_bytes`], the server's order), with a sparse
//! index (a key every 64 KiB) for the rare single reads. A write to the collection
//! is not applied where it lands: the replica resolves its collection and `_id` as
//! for the writer threads ([`super::partition`]) and hands it here with its place in
//! the oplog ([`Sorted::defer`]); the buffer (a quarter
//! of the budget, at most [`RUN_BUFFER_MAX`]) is sorted by collection and `_id` (stably: a document's writes
//! keep their oplog order) and written as a *run*, on a thread of its own while the
//! next buffer fills ([`RunWriter`]; two buffers, half the budget in all). When the collection must be read, or
//! a command touches it, [`Sorted::merge`] reads the base and every run's share in
//! one pass and, per `_id`, hands the document and its writes in oplog order to the
//! caller, which applies them exactly as the in-memory writer threads do; the
//! result is the new base. Every byte is read and written in sequence.
//!
//! The files live in the work dir's temporary directory and are removed with it
//! (and as soon as they are replaced); nothing needs to survive a crash.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::disk::{DiskError, DocVisitor};
use super::store::{FastMap, Slot};
use crate::engine::compare::cmp_key_bytes;
use crate::engine::IdKey;

/// A document and its `_id`, as the B-tree store loads them.
pub type Document = (IdKey, Box<[u8]>);

/// Bytes a buffer of writes holds at most before it is sorted into a run, whatever
/// the budget. Sorting is by far the run writer's main cost, and a buffer much
/// larger than the processor's caches sorts slower per write: on the 1 GiB bench
/// with every write deferred, buffers of 128 MiB (a 512 MiB budget) took the
/// oplog's apply 4.06 s, of 16 MiB 3.35 s, of 8 MiB 3.38 s, and the run 6.27 s
/// against 5.77 s. More runs cost little: a merge reads them all at once, and
/// past [`max_runs`] they are compacted.
const RUN_BUFFER_MAX: usize = 16 << 20;

/// A sparse index entry of a base every this many bytes.
const INDEX_EVERY: u64 = 64 << 10;

/// Runs a collection may have before they are merged into one: a merge reads every
/// run at once, so this bounds its open files (a quarter of the process's limit)
/// and its read buffers (half the budget shared out, at least 64 KiB each). Each
/// compaction rewrites the writes so far once more: at 32, the 4 GiB bench's
/// backup (135 runs of 32 MiB at `--memory 64MiB`) was rewritten three times over
/// before its final merge.
fn max_runs() -> usize {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit.
    let open_files = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } {
        0 => r.rlim_cur as usize,
        _ => 1024,
    };
    (open_files / 4).clamp(16, 256)
}

/// What a deferred write carries besides its key: its place in the oplog and what
/// the caller needs to apply it (opaque here).
pub struct Op<'a> {
    pub seq: u64,
    pub meta: [u8; 12],
    pub payload: &'a [u8],
}

/// What the merge does after a write ([`Sorted::merge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// The next write.
    Next,
    /// None of this document's remaining writes (after an error: the caller
    /// keeps the earliest).
    SkipDocument,
    /// Stop the merge (Ctrl-C): the collection is left as it was.
    Stop,
}

/// A document as the writes merged so far leave it.
#[derive(Default)]
pub struct Doc {
    pub bytes: Vec<u8>,
    pub live: bool,
}

fn io(path: &Path, e: std::io::Error) -> DiskError {
    DiskError::Store {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// A file removed when the last handle to it goes.
struct Owned(PathBuf);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A collection's documents: one sorted file.
struct Base {
    path: Owned,
    file: File,
    len: u64,
    count: u64,
    /// (key, offset of its record), one every [`INDEX_EVERY`] bytes, the first at 0.
    index: Vec<(Box<[u8]>, u64)>,
}

/// One collection's part of a run file.
struct Section {
    file: Arc<Owned>,
    at: u64,
    len: u64,
}

#[derive(Default)]
struct Coll {
    base: Option<Base>,
    runs: Vec<Section>,
}

/// A buffered write: (slot, key range, seq, meta, payload range) in the arena.
struct Idx {
    slot: Slot,
    key: (u32, u32),
    seq: u64,
    meta: [u8; 12],
    payload: (u32, u32),
}

/// The sort-merge store; see the module documentation.
pub struct Sorted {
    dir: PathBuf,
    /// Bytes of buffered writes before they are sorted into a run.
    limit: usize,
    colls: FastMap<Slot, Coll>,
    arena: Vec<u8>,
    index: Vec<Idx>,
    files: u64,
    /// Runs merged into one ([`Sorted::compact`]), for the tests.
    compactions: u64,
    /// [`max_runs`].
    max_runs: usize,
    /// The thread sorting and writing the last full buffer ([`RunWriter`]); None
    /// before the first run, or when no thread could be had (then on this one).
    writer: Option<RunWriter>,
    /// Emptied buffers given back by the writer, to be filled again.
    spare: Option<(Vec<u8>, Vec<Idx>)>,
    /// Whether the writer was started (or could not be).
    writer_tried: bool,
    /// A run the writer failed to write: its writes are lost, so every merge from
    /// then on fails with its error.
    broken: Option<(PathBuf, String)>,
}

/// A run's file and each collection's part of it, `(slot, start, end)`.
type Written = (Arc<Owned>, Vec<(Slot, u64, u64)>);
/// A full buffer to write as a run at a path.
type Job = (PathBuf, Vec<u8>, Vec<Idx>);
/// The run written (or its error) and the emptied buffer.
type Done = (Result<Written, DiskError>, Vec<u8>, Vec<Idx>);

/// Past the budget the apply runs on one thread and the other core is mostly
/// idle, while sorting a full buffer and writing it as a run took a tenth of the
/// apply thread's time (`perf`, 1 GiB bench at `--memory 64MiB`). So a full buffer
/// goes to a thread of its own, which sorts and writes it while the next one
/// fills; the run joins its collections before anything reads them
/// ([`Sorted::settle`]). Two buffers then exist at once, each half as large, so
/// the memory is what one buffer used before.
struct RunWriter {
    jobs: Option<std::sync::mpsc::SyncSender<Job>>,
    /// In a mutex only so that the store stays `Sync` (the hashing threads share it).
    done: std::sync::Mutex<std::sync::mpsc::Receiver<Done>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// A run handed over, not settled yet, and the collections it holds.
    busy: Option<Vec<Slot>>,
}

impl RunWriter {
    fn start() -> Option<RunWriter> {
        let (jobs, todo) = std::sync::mpsc::sync_channel::<Job>(1);
        let (finished, done) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("pitr-runs".into())
            .spawn(move || {
                for (path, mut arena, mut index) in todo {
                    let r = sort_and_write(path, &arena, &mut index);
                    arena.clear();
                    index.clear();
                    if finished.send((r, arena, index)).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(RunWriter {
            jobs: Some(jobs),
            done: std::sync::Mutex::new(done),
            thread: Some(thread),
            busy: None,
        })
    }
}

impl Drop for RunWriter {
    /// Waits for the run being written (its file is removed with it): nothing
    /// writes in the directory once the store is gone.
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sorts the buffered writes by collection and `_id` (stably: a document's writes
/// keep their oplog order) and writes them to `path` as a run, one section per
/// collection.
fn sort_and_write(path: PathBuf, arena: &[u8], index: &mut [Idx]) -> Result<Written, DiskError> {
    let key = |i: &Idx| &arena[i.key.0 as usize..(i.key.0 + i.key.1) as usize];
    index.sort_by(|a, b| {
        a.slot
            .cmp(&b.slot)
            .then_with(|| cmp_key_bytes(key(a), key(b)))
    });
    let f = File::create(&path).map_err(|e| io(&path, e))?;
    // Removed if what follows fails.
    let file = Arc::new(Owned(path));
    let path = &file.0;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut sections: Vec<(Slot, u64, u64)> = Vec::new();
    let mut at = 0u64;
    for i in index.iter() {
        let k = key(i);
        let p = &arena[i.payload.0 as usize..(i.payload.0 + i.payload.1) as usize];
        if sections.last().is_none_or(|s| s.0 != i.slot) {
            sections.push((i.slot, at, at));
        }
        at += write_op(&mut w, k, i.seq, &i.meta, p).map_err(|e| io(path, e))?;
        sections.last_mut().expect("pushed above").2 = at;
    }
    w.flush().map_err(|e| io(path, e))?;
    drop(w);
    Ok((file, sections))
}

fn write_all(w: &mut impl Write, parts: &[&[u8]]) -> std::io::Result<()> {
    for p in parts {
        w.write_all(p)?;
    }
    Ok(())
}

/// Writes a run's write ([`next_op`] reads it back); returns its length.
fn write_op(
    w: &mut impl Write,
    key: &[u8],
    seq: u64,
    meta: &[u8; 12],
    payload: &[u8],
) -> std::io::Result<u64> {
    write_all(
        w,
        &[
            &(key.len() as u32).to_le_bytes(),
            key,
            &seq.to_le_bytes(),
            meta,
            &(payload.len() as u32).to_le_bytes(),
            payload,
        ],
    )?;
    Ok(4 + key.len() as u64 + 24 + payload.len() as u64)
}

fn read_u32(r: &mut impl Read) -> std::io::Result<Option<u32>> {
    let mut n = [0u8; 4];
    match r.read_exact(&mut n) {
        Ok(()) => Ok(Some(u32::from_le_bytes(n))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_into(r: &mut impl Read, n: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
    out.resize(n, 0);
    r.read_exact(out)
}

/// Writes a base: `u32` key length, key, `u32` document length, document.
struct BaseWriter {
    path: PathBuf,
    w: BufWriter<File>,
    at: u64,
    next_index: u64,
    count: u64,
    index: Vec<(Box<[u8]>, u64)>,
}

impl BaseWriter {
    fn create(path: PathBuf) -> Result<BaseWriter, DiskError> {
        // Read back by `Sorted::get` through the same handle.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        Ok(BaseWriter {
            w: BufWriter::with_capacity(1 << 20, f),
            path,
            at: 0,
            next_index: 0,
            count: 0,
            index: Vec::new(),
        })
    }

    fn push(&mut self, key: &[u8], doc: &[u8]) -> Result<(), DiskError> {
        if self.at >= self.next_index {
            self.index.push((Box::from(key), self.at));
            self.next_index = self.at + INDEX_EVERY;
        }
        write_all(
            &mut self.w,
            &[
                &(key.len() as u32).to_le_bytes(),
                key,
                &(doc.len() as u32).to_le_bytes(),
                doc,
            ],
        )
        .map_err(|e| io(&self.path, e))?;
        self.at += 8 + key.len() as u64 + doc.len() as u64;
        self.count += 1;
        Ok(())
    }

    fn finish(self) -> Result<Base, DiskError> {
        let path = self.path.clone();
        let mut file = self.w.into_inner().map_err(|e| io(&path, e.into_error()))?;
        file.flush().map_err(|e| io(&path, e))?;
        Ok(Base {
            path: Owned(path),
            file,
            len: self.at,
            count: self.count,
            index: self.index,
        })
    }
}

/// Reads base records in order from `r`.
fn next_doc(r: &mut impl Read, key: &mut Vec<u8>, doc: &mut Vec<u8>) -> std::io::Result<bool> {
    let Some(k) = read_u32(r)? else {
        return Ok(false);
    };
    read_into(r, k as usize, key)?;
    let mut n = [0u8; 4];
    r.read_exact(&mut n)?;
    read_into(r, u32::from_le_bytes(n) as usize, doc)?;
    Ok(true)
}

/// A reader over a base or over a run's section.
type SectionReader = BufReader<std::io::Take<File>>;

/// A reader over a base or over a run's section, from its start.
fn reader(file: &Path, at: u64, len: u64, buf: usize) -> std::io::Result<SectionReader> {
    let mut f = File::open(file)?;
    f.seek(SeekFrom::Start(at))?;
    Ok(BufReader::with_capacity(buf, f.take(len)))
}

/// A head of the merge: a record's key and source (0: the base; then the runs, in
/// oplog order), and the record.
struct Head {
    key: Vec<u8>,
    src: usize,
    /// A run's write: seq, meta, payload; the base's document: payload.
    seq: u64,
    meta: [u8; 12],
    payload: Vec<u8>,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    /// Reversed (`BinaryHeap` is a max-heap): the least key, then the earliest source.
    fn cmp(&self, o: &Self) -> Ordering {
        cmp_key_bytes(&o.key, &self.key).then(o.src.cmp(&self.src))
    }
}

/// Reads a run's write: `u32` key length, key, `u64` seq, meta, `u32` payload
/// length, payload.
fn next_op(r: &mut impl Read, h: &mut Head) -> std::io::Result<bool> {
    let Some(k) = read_u32(r)? else {
        return Ok(false);
    };
    read_into(r, k as usize, &mut h.key)?;
    let mut fixed = [0u8; 24];
    r.read_exact(&mut fixed)?;
    h.seq = u64::from_le_bytes(fixed[..8].try_into().expect("8 bytes"));
    h.meta.copy_from_slice(&fixed[8..20]);
    let n = u32::from_le_bytes(fixed[20..].try_into().expect("4 bytes"));
    read_into(r, n as usize, &mut h.payload)?;
    Ok(true)
}

/// The inputs of a k-way merge in key order: a collection's base (source 0, its
/// documents) and run sections (sources 1.., their writes, in oplog order); each
/// source has one record in the heap at a time.
struct Sources<'a> {
    base: Option<(&'a Path, SectionReader)>,
    runs: Vec<(&'a Path, SectionReader)>,
    heap: BinaryHeap<Head>,
}

impl<'a> Sources<'a> {
    /// Opens every source, with read buffers sharing `limit` bytes, and reads each
    /// one's first record.
    fn open(
        base: Option<&'a Base>,
        runs: &'a [Section],
        limit: usize,
    ) -> Result<Sources<'a>, DiskError> {
        let buf = (limit / (runs.len() + 1)).clamp(64 << 10, 1 << 20);
        let open = |p: &'a Path, at, len| match reader(p, at, len, buf) {
            Ok(r) => Ok((p, r)),
            Err(e) => Err(io(p, e)),
        };
        let mut s = Sources {
            base: base.map(|b| open(&b.path.0, 0, b.len)).transpose()?,
            runs: runs
                .iter()
                .map(|r| open(&r.file.0, r.at, r.len))
                .collect::<Result<_, _>>()?,
            heap: BinaryHeap::with_capacity(runs.len() + 1),
        };
        let first = usize::from(s.base.is_none());
        for src in first..=runs.len() {
            s.refill(Head {
                key: Vec::new(),
                src,
                seq: 0,
                meta: [0; 12],
                payload: Vec::new(),
            })?;
        }
        Ok(s)
    }

    /// The least record (by key, then source).
    fn pop(&mut self) -> Option<Head> {
        self.heap.pop()
    }

    /// Reads `h`'s source's next record into it and puts it back (unless at its end).
    fn refill(&mut self, mut h: Head) -> Result<(), DiskError> {
        let more = match h.src {
            0 => {
                let (_, r) = self.base.as_mut().expect("a base");
                next_doc(r, &mut h.key, &mut h.payload)
            }
            s => next_op(&mut self.runs[s - 1].1, &mut h),
        };
        if more.map_err(|e| self.error(h.src, e))? {
            self.heap.push(h);
        }
        Ok(())
    }

    /// An error reading source `src`, naming its file.
    fn error(&self, src: usize, e: std::io::Error) -> DiskError {
        match src {
            0 => io(self.base.as_ref().expect("a base").0, e),
            s => io(self.runs[s - 1].0, e),
        }
    }
}

impl Sorted {
    /// A store in `dir` (which must exist) that buffers up to half of `budget`.
    pub fn create(dir: &Path, budget: usize) -> Sorted {
        Sorted::with_buffer(dir, (budget / 2).max(1 << 20))
    }

    /// A store that buffers `limit` bytes of writes before it writes a run.
    fn with_buffer(dir: &Path, limit: usize) -> Sorted {
        Sorted {
            dir: dir.to_path_buf(),
            limit,
            colls: FastMap::default(),
            arena: Vec::new(),
            index: Vec::new(),
            files: 0,
            compactions: 0,
            max_runs: max_runs(),
            writer: None,
            spare: None,
            writer_tried: false,
            broken: None,
        }
    }

    /// Bytes a buffer holds before it becomes a run: half of [`Sorted::limit`]
    /// when full buffers are written on another thread (two exist at once), at
    /// most [`RUN_BUFFER_MAX`].
    fn buffer_limit(&self) -> usize {
        match &self.writer {
            Some(_) => (self.limit / 2).clamp(1, RUN_BUFFER_MAX),
            None => self.limit.min(RUN_BUFFER_MAX),
        }
    }

    /// The run being written on the other thread, joined to its collections (its
    /// error, if it failed).
    fn settle(&mut self) -> Result<(), DiskError> {
        if let Some((path, detail)) = &self.broken {
            return Err(DiskError::Store {
                path: path.clone(),
                detail: detail.clone(),
            });
        }
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        if w.busy.take().is_none() {
            return Ok(());
        }
        let received = w
            .done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recv();
        let written = match received {
            Ok((written, arena, index)) => {
                self.spare = Some((arena, index));
                written
            }
            Err(_) => Err(DiskError::Store {
                path: self.dir.clone(),
                detail: "the thread writing the sorted runs stopped".into(),
            }),
        };
        match written {
            Ok(w) => self.register(w),
            Err(e) => {
                self.broken = Some(match &e {
                    DiskError::Store { path, detail } => (path.clone(), detail.clone()),
                    other => (self.dir.clone(), other.to_string()),
                });
                Err(e)
            }
        }
    }

    fn new_path(&mut self, what: &str) -> PathBuf {
        self.files += 1;
        self.dir.join(format!("{what}-{}.sorted", self.files))
    }

    /// Sets `slot`'s documents, given in `_id` order (the move of the in-memory
    /// documents to disk).
    pub fn load(
        &mut self,
        slot: Slot,
        docs_in_order: impl Iterator<Item = Document>,
    ) -> Result<(), DiskError> {
        let mut w = BaseWriter::create(self.new_path("base"))?;
        for (k, d) in docs_in_order {
            w.push(k.document_bytes(), &d)?;
        }
        let base = w.finish()?;
        self.colls.entry(slot).or_default().base = Some(base);
        crate::memory::give_back_freed_heap();
        Ok(())
    }

    /// Whether `slot` has writes not merged yet.
    pub fn pending_for(&self, slot: Slot) -> bool {
        self.index.iter().any(|i| i.slot == slot)
            || self.in_flight().contains(&slot)
            || self.colls.get(&slot).is_some_and(|c| !c.runs.is_empty())
    }

    /// Whether any collection has writes not merged yet.
    pub fn pending(&self) -> bool {
        !self.index.is_empty()
            || !self.in_flight().is_empty()
            || self.colls.values().any(|c| !c.runs.is_empty())
    }

    /// The collections of the run being written on the other thread.
    fn in_flight(&self) -> &[Slot] {
        self.writer
            .as_ref()
            .and_then(|w| w.busy.as_deref())
            .unwrap_or(&[])
    }

    /// The collections with writes not merged yet.
    pub fn pending_slots(&self) -> Vec<Slot> {
        let mut v: Vec<Slot> = self.index.iter().map(|i| i.slot).collect();
        v.extend_from_slice(self.in_flight());
        v.extend(
            self.colls
                .iter()
                .filter(|(_, c)| !c.runs.is_empty())
                .map(|(s, _)| *s),
        );
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A write to `slot`'s document `key`, at place `seq` in the oplog (increasing
    /// from call to call); `payload` is the concatenation of `parts`.
    pub fn defer(
        &mut self,
        slot: Slot,
        key: &IdKey,
        seq: u64,
        meta: [u8; 12],
        parts: &[&[u8]],
    ) -> Result<(), DiskError> {
        if !self.writer_tried {
            // Before the first buffer fills: from then on, two half-size buffers.
            self.writer_tried = true;
            self.writer = RunWriter::start();
        }
        let key = key.document_bytes();
        let plen: usize = parts.iter().map(|p| p.len()).sum();
        if self.arena.len() + key.len() + plen + self.index.len() * size_of::<Idx>()
            > self.buffer_limit()
            && !self.index.is_empty()
        {
            self.write_run()?;
        }
        let k = self.arena.len() as u32;
        self.arena.extend_from_slice(key);
        let p = self.arena.len() as u32;
        for part in parts {
            self.arena.extend_from_slice(part);
        }
        self.index.push(Idx {
            slot,
            key: (k, key.len() as u32),
            seq,
            meta,
            payload: (p, plen as u32),
        });
        Ok(())
    }

    /// The buffered writes as a run: handed to the thread that sorts and writes
    /// runs ([`RunWriter`], started at the first run), after the run before is
    /// settled; on this thread when there is no such thread.
    fn write_run(&mut self) -> Result<(), DiskError> {
        if self.index.is_empty() {
            return Ok(());
        }
        self.settle()?;
        let path = self.new_path("run");
        if let Some(w) = self.writer.as_mut() {
            let mut slots: Vec<Slot> = self.index.iter().map(|i| i.slot).collect();
            slots.sort_unstable();
            slots.dedup();
            let (arena, index) = self.spare.take().unwrap_or_default();
            let job = (
                path,
                std::mem::replace(&mut self.arena, arena),
                std::mem::replace(&mut self.index, index),
            );
            match w.jobs.as_ref().map(|j| j.send(job)) {
                Some(Ok(())) => {
                    w.busy = Some(slots);
                    return Ok(());
                }
                // The thread is gone: this one writes the run.
                Some(Err(std::sync::mpsc::SendError((path, arena, index)))) => {
                    (self.arena, self.index) = (arena, index);
                    self.writer = None;
                    return self.write_run_here(path);
                }
                None => unreachable!("jobs is taken only on drop"),
            }
        }
        self.write_run_here(path)
    }

    fn write_run_here(&mut self, path: PathBuf) -> Result<(), DiskError> {
        let written = sort_and_write(path, &self.arena, &mut self.index)?;
        self.arena.clear();
        self.index.clear();
        self.register(written)
    }

    /// A run's sections joined to their collections (compacted past
    /// [`max_runs`]).
    fn register(&mut self, (file, sections): Written) -> Result<(), DiskError> {
        for (slot, start, end) in sections {
            let c = self.colls.entry(slot).or_default();
            c.runs.push(Section {
                file: Arc::clone(&file),
                at: start,
                len: end - start,
            });
            if c.runs.len() > self.max_runs {
                self.compact(slot)?;
            }
        }
        Ok(())
    }

    /// Merges `slot`'s runs into one (its writes still deferred: per `_id`, in
    /// oplog order).
    fn compact(&mut self, slot: Slot) -> Result<(), DiskError> {
        self.compactions += 1;
        let runs = std::mem::take(&mut self.colls.get_mut(&slot).expect("known").runs);
        let path = self.new_path("run");
        let mut sources = Sources::open(None, &runs, self.limit)?;
        let f = File::create(&path).map_err(|e| io(&path, e))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let mut len = 0u64;
        while let Some(h) = sources.pop() {
            len +=
                write_op(&mut w, &h.key, h.seq, &h.meta, &h.payload).map_err(|e| io(&path, e))?;
            sources.refill(h)?;
        }
        w.flush().map_err(|e| io(&path, e))?;
        drop(w);
        self.colls.get_mut(&slot).expect("known").runs = vec![Section {
            file: Arc::new(Owned(path)),
            at: 0,
            len,
        }];
        Ok(())
    }

    /// Merges `slot`'s base and its writes into a new base: per `_id`, in `_id`
    /// order, `apply` gets the document (`live` false when there is none) and each
    /// write to it in oplog order with the write's own `_id` (of any numeric type
    /// equal to the document's), and says what next ([`Flow`]; on `Stop` the
    /// merge returns [`DiskError::Stopped`] and the collection keeps its base and
    /// writes). Returns the number of documents.
    pub fn merge(
        &mut self,
        slot: Slot,
        apply: &mut dyn FnMut(&mut Doc, &IdKey, &Op<'_>) -> Flow,
    ) -> Result<u64, DiskError> {
        if self.index.iter().any(|i| i.slot == slot) {
            self.write_run()?;
        }
        self.settle()?;
        let Some(c) = self.colls.get_mut(&slot) else {
            return Ok(0);
        };
        if c.runs.is_empty() {
            return Ok(c.base.as_ref().map_or(0, |b| b.count));
        }
        let base = c.base.take();
        let runs = std::mem::take(&mut c.runs);
        let mut sources = Sources::open(base.as_ref(), &runs, self.limit)?;
        let mut out = BaseWriter::create(self.new_path("base"))?;
        let mut doc = Doc::default();
        let (mut cur, mut have, mut skip, mut stopped) = (Vec::new(), false, false, false);
        while let Some(mut h) = sources.pop() {
            if !have || cmp_key_bytes(&cur, &h.key) != Ordering::Equal {
                if have && doc.live {
                    out.push(&cur, &doc.bytes)?;
                }
                cur.clear();
                cur.extend_from_slice(&h.key);
                (have, skip, doc.live) = (true, false, false);
            }
            if h.src == 0 {
                std::mem::swap(&mut doc.bytes, &mut h.payload);
                doc.live = true;
            } else if !skip {
                // The write's own `_id` (5 and 5.0 are one document, but an upsert
                // writes the `_id` of its entry).
                let key = IdKey::from_document_bytes(&h.key)
                    .map_err(|e| sources.error(h.src, std::io::Error::other(e.to_string())))?;
                let op = Op {
                    seq: h.seq,
                    meta: h.meta,
                    payload: &h.payload,
                };
                match apply(&mut doc, &key, &op) {
                    Flow::Next => {}
                    Flow::SkipDocument => skip = true,
                    Flow::Stop => {
                        stopped = true;
                        break;
                    }
                }
            }
            sources.refill(h)?;
        }
        drop(sources);
        if stopped {
            let partial = out.finish()?;
            drop(partial);
            let c = self.colls.get_mut(&slot).expect("known");
            (c.base, c.runs) = (base, runs);
            return Err(DiskError::Stopped);
        }
        if have && doc.live {
            out.push(&cur, &doc.bytes)?;
        }
        let base = out.finish()?;
        let n = base.count;
        self.colls.get_mut(&slot).expect("known").base = Some(base);
        Ok(n)
    }

    /// The document `key` of `slot` (merged: no write pending), appended to `out`.
    pub fn get(&self, slot: Slot, key: &IdKey, out: &mut Vec<u8>) -> Result<bool, DiskError> {
        let Some(b) = self.colls.get(&slot).and_then(|c| c.base.as_ref()) else {
            return Ok(false);
        };
        let want = key.document_bytes();
        // The last index entry at or before the key.
        let i = b
            .index
            .partition_point(|(k, _)| cmp_key_bytes(k, want) != Ordering::Greater);
        if i == 0 {
            return Ok(false);
        }
        let from = b.index[i - 1].1;
        let to = b.index.get(i).map_or(b.len, |(_, at)| *at);
        let mut block = vec![0u8; (to - from) as usize];
        b.file
            .read_exact_at(&mut block, from)
            .map_err(|e| io(&b.path.0, e))?;
        let mut r = &block[..];
        let (mut k, mut d) = (Vec::new(), Vec::new());
        while next_doc(&mut r, &mut k, &mut d).map_err(|e| io(&b.path.0, e))? {
            match cmp_key_bytes(&k, want) {
                Ordering::Less => {}
                Ordering::Equal => {
                    out.extend_from_slice(&d);
                    return Ok(true);
                }
                Ordering::Greater => break,
            }
        }
        Ok(false)
    }

    /// Every document of `slot` in `_id` order (merged: no write pending).
    pub fn for_each(&self, slot: Slot, f: &mut DocVisitor<'_>) -> Result<(), DiskError> {
        let Some(b) = self.colls.get(&slot).and_then(|c| c.base.as_ref()) else {
            return Ok(());
        };
        let mut r = reader(&b.path.0, 0, b.len, 1 << 20).map_err(|e| io(&b.path.0, e))?;
        let (mut k, mut d) = (Vec::new(), Vec::new());
        while next_doc(&mut r, &mut k, &mut d).map_err(|e| io(&b.path.0, e))? {
            let key = IdKey::from_document_bytes(&k).map_err(|e| DiskError::Store {
                path: b.path.0.clone(),
                detail: e.to_string(),
            })?;
            f(&key, &d)?;
        }
        Ok(())
    }

    /// Forgets `slot`'s documents and writes (its files are removed).
    pub fn clear(&mut self, slot: Slot) {
        // The run being written may hold the collection's writes. Its error, if it
        // failed, is kept ([`Sorted::broken`]): every merge from then on fails.
        let _ = self.settle();
        self.colls.remove(&slot);
        self.index.retain(|i| i.slot != slot);
    }

    /// Takes `slot`'s documents out (merged: no write pending), in `_id` order, for
    /// the B-tree store; the iterator stops at a read error, kept in `failed`.
    pub fn take<'a>(
        &mut self,
        slot: Slot,
        failed: &'a mut Option<DiskError>,
    ) -> Result<Box<dyn Iterator<Item = Document> + 'a>, DiskError> {
        let Some(b) = self.colls.remove(&slot).and_then(|c| c.base) else {
            return Ok(Box::new(std::iter::empty()));
        };
        let mut r = reader(&b.path.0, 0, b.len, 1 << 20).map_err(|e| io(&b.path.0, e))?;
        let (mut k, mut d) = (Vec::new(), Vec::new());
        Ok(Box::new(std::iter::from_fn(move || {
            let _keep = &b;
            match next_doc(&mut r, &mut k, &mut d) {
                Ok(true) => match IdKey::from_document_bytes(&k) {
                    Ok(key) => Some((key, Box::from(&d[..]))),
                    Err(e) => {
                        *failed = Some(io(&b.path.0, std::io::Error::other(e.to_string())));
                        None
                    }
                },
                Ok(false) => None,
                Err(e) => {
                    *failed = Some(io(&b.path.0, e));
                    None
                }
            }
        })))
    }
}

#[cfg(test)]
mod tests {
    use bson::RawBsonRef;

    use super::*;
    use crate::engine::replica::TestRng as Rng;

    /// `_id`s of several types, equal values across numeric types included.
    fn key(rng: &mut Rng, n: u64) -> IdKey {
        let k = rng.below(n);
        match rng.below(4) {
            0 => IdKey::from_value(RawBsonRef::Int32(k as i32)),
            1 => IdKey::from_value(RawBsonRef::Int64(k as i64)),
            2 => IdKey::from_value(RawBsonRef::Double(k as f64)),
            _ => IdKey::from_value(RawBsonRef::String(&format!("k{k}"))),
        }
    }

    fn files(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    /// A run the other thread could not write (here: its directory is gone) is an
    /// error at the next merge, and at every merge after: its writes are never
    /// silently left out.
    #[test]
    fn a_run_that_cannot_be_written_fails_every_merge_after() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let mut s = Sorted::with_buffer(&gone, 1 << 10);
        std::fs::remove_dir(&gone).unwrap();
        let mut failed = 0;
        for i in 0..400i32 {
            let k = IdKey::from_value(RawBsonRef::Int32(i));
            if s.defer((i % 2) as Slot, &k, i as u64, [0; 12], &[&[1u8; 20]])
                .is_err()
            {
                failed += 1;
            }
        }
        assert!(
            failed > 0,
            "the failed run is met when the next buffer is full"
        );
        for slot in [0, 1, 0] {
            let r = s.merge(slot, &mut |_, _, _| Flow::Next);
            assert!(matches!(r, Err(DiskError::Store { .. })), "{slot}");
        }
    }

    /// Random writes to three collections through a small buffer (many runs, and
    /// the compaction past [`max_runs`], here 32), merged now and then: every merge gives
    /// what a map applying the same writes in order holds, in `_id` order, and
    /// single reads find each document; a cleared collection leaves no file.
    #[test]
    fn merges_give_what_the_writes_in_order_give() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sorted::with_buffer(dir.path(), 1 << 10);
        s.max_runs = 32;
        let mut model: std::collections::BTreeMap<(Slot, IdKey), Vec<u8>> = Default::default();
        let mut rng = Rng(5);
        let mut seq = 0u64;
        // (slot, key) of the writes the merge found missing, as the model says.
        let (mut missing, mut expect_missing) = (0u64, 0u64);
        for round in 0..6 {
            for _ in 0..3_000 {
                let slot = rng.below(3) as Slot;
                let k = key(&mut rng, 400);
                let kind = rng.below(3) as u8;
                let payload = vec![kind + 1; 1 + rng.below(40) as usize];
                let mut meta = [0u8; 12];
                meta[0] = kind;
                s.defer(slot, &k, seq, meta, &[&payload]).unwrap();
                seq += 1;
                let e = model.get_mut(&(slot, k.clone()));
                match (kind, e) {
                    (0, Some(d)) => *d = payload,
                    (0, None) => {
                        model.insert((slot, k), payload);
                    }
                    (1, Some(_)) => {
                        model.remove(&(slot, k));
                    }
                    (2, Some(d)) => d.push(7),
                    (_, None) => expect_missing += 1,
                    _ => unreachable!(),
                }
            }
            for slot in 0..3 {
                assert!(s.colls.get(&slot).is_none_or(|c| c.runs.len() <= 32));
                let n = s
                    .merge(slot, &mut |doc, _, op| {
                        match (op.meta[0], doc.live) {
                            (0, _) => {
                                doc.bytes.clear();
                                doc.bytes.extend_from_slice(op.payload);
                                doc.live = true;
                            }
                            (1, true) => doc.live = false,
                            (2, true) => doc.bytes.push(7),
                            _ => missing += 1,
                        }
                        Flow::Next
                    })
                    .unwrap();
                let want: Vec<(IdKey, Vec<u8>)> = model
                    .range((slot, IdKey::from_value(RawBsonRef::MinKey))..)
                    .take_while(|((s, _), _)| *s == slot)
                    .map(|((_, k), d)| (k.clone(), d.clone()))
                    .collect();
                assert_eq!(n, want.len() as u64, "round {round} slot {slot}");
                let mut got = Vec::new();
                s.for_each(slot, &mut |k, d| {
                    got.push((k.clone(), d.to_vec()));
                    Ok(())
                })
                .unwrap();
                assert_eq!(got, want, "round {round} slot {slot}");
                for (k, d) in want.iter().step_by(7) {
                    let mut out = Vec::new();
                    assert!(s.get(slot, k, &mut out).unwrap());
                    assert_eq!(&out, d);
                }
                let absent = IdKey::from_value(RawBsonRef::String("zz-absent"));
                assert!(!s.get(slot, &absent, &mut Vec::new()).unwrap());
            }
            assert!(!s.pending());
        }
        assert_eq!(missing, expect_missing);
        // A merge stopped half way (Ctrl-C) leaves the collection as it was: the
        // next merge applies every write once.
        for i in 0..50u8 {
            let k = IdKey::from_value(RawBsonRef::Int32(1_000 + i32::from(i)));
            s.defer(0, &k, seq, [0; 12], &[&[i]]).unwrap();
            seq += 1;
        }
        let before = s.colls[&0].base.as_ref().unwrap().count;
        let mut calls = 0;
        let stopped = s.merge(0, &mut |_, _, _| {
            calls += 1;
            if calls == 10 {
                Flow::Stop
            } else {
                Flow::Next
            }
        });
        assert!(matches!(stopped, Err(DiskError::Stopped)));
        assert!(s.pending_for(0));
        let n = s
            .merge(0, &mut |doc, _, op| {
                doc.bytes = op.payload.to_vec();
                doc.live = true;
                Flow::Next
            })
            .unwrap();
        assert_eq!(n, before + 50);
        assert!(s.compactions > 10, "{} compactions", s.compactions);
        // One base per collection, nothing else, then nothing once cleared.
        assert_eq!(files(dir.path()), 3);
        for slot in 0..3 {
            s.clear(slot);
        }
        assert_eq!(files(dir.path()), 0);
    }
}
