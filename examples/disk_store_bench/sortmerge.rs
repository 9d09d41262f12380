//! A sort-merge store: the candidate for the path past `--memory` that does not go
//! through a B-tree at all (issue 22: "within 3x past the budget"; docs/performance.md,
//! "1 GiB against 4 GiB", says why a faster B-tree cannot get there).
//!
//! A collection's documents are one *base*: files of `(key, document)` records in
//! `_id` order ([`cmp_key_bytes`], the server's order), read and written only
//! sequentially. Writes are not applied where they land: each is appended, with its
//! position in the oplog, to an in-memory buffer; a full buffer (half the budget) is
//! sorted by `_id` (stably: a document's operations keep their oplog order) and
//! written as a *run*. At a barrier (here `flush`, before a scan; in the engine also
//! a command touching the collection) the base and the runs are merged in one pass:
//! per `_id`, the base's document (if any) and then every run's operations on it, in
//! run order, give the document's final state, written to a new base. Every byte is
//! read and written sequentially, once per barrier; no page is rewritten per key.
//!
//! The seed needs no sorting when the backup comes in `_id` order (consecutive
//! sorted chunks become the base's files as they are); otherwise the chunks are
//! merged into one base.
//!
//! What the bench measures is only the store: the engine would also have to defer
//! the checks an operation makes at its position (an update or a delete of a missing
//! document is an error in the strict phase: kept with the operation's position,
//! and the earliest one reported after the merge) and merge at each command that
//! reads or rewrites the collection.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use pitr::engine::compare::cmp_key_bytes;
use pitr::engine::replica::Slot;
use pitr::engine::IdKey;

/// Operation kinds in a run.
const PUT: u8 = 0;
const DELETE: u8 = 1;
/// The bench's update: the document's byte 8 incremented (a stand-in for `$set`'s
/// post-image built from the stored document and the entry's `o`).
const BUMP: u8 = 2;
/// A base record.
const DOC: u8 = 3;

/// A record: `u32` key length, key (`{_id: v}` bytes), kind, `u32` payload length,
/// payload.
fn write_rec(w: &mut impl Write, key: &[u8], kind: u8, payload: &[u8]) -> std::io::Result<()> {
    w.write_all(&(key.len() as u32).to_le_bytes())?;
    w.write_all(key)?;
    w.write_all(&[kind])?;
    w.write_all(&(payload.len() as u32).to_le_bytes())?;
    w.write_all(payload)
}

/// A record read back (buffers reused).
#[derive(Default)]
struct Rec {
    key: Vec<u8>,
    kind: u8,
    payload: Vec<u8>,
}

struct Reader {
    r: BufReader<File>,
    /// The files still to read after this one (a base of several files).
    rest: Vec<PathBuf>,
    buf_bytes: usize,
}

impl Reader {
    fn open(mut files: Vec<PathBuf>, buf_bytes: usize) -> std::io::Result<Option<Reader>> {
        if files.is_empty() {
            return Ok(None);
        }
        files.reverse();
        let first = files.pop().expect("not empty");
        Ok(Some(Reader {
            r: BufReader::with_capacity(buf_bytes, File::open(first)?),
            rest: files,
            buf_bytes,
        }))
    }

    fn next(&mut self, rec: &mut Rec) -> std::io::Result<bool> {
        loop {
            let mut n = [0u8; 4];
            match self.r.read_exact(&mut n) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    let Some(next) = self.rest.pop() else {
                        return Ok(false);
                    };
                    self.r = BufReader::with_capacity(self.buf_bytes, File::open(next)?);
                    continue;
                }
                Err(e) => return Err(e),
            }
            rec.key.resize(u32::from_le_bytes(n) as usize, 0);
            self.r.read_exact(&mut rec.key)?;
            let mut k = [0u8; 5];
            self.r.read_exact(&mut k)?;
            rec.kind = k[0];
            rec.payload
                .resize(u32::from_le_bytes([k[1], k[2], k[3], k[4]]) as usize, 0);
            self.r.read_exact(&mut rec.payload)?;
            return Ok(true);
        }
    }
}

/// Buffered operations of one collection: records in one arena, sorted through an
/// index.
#[derive(Default)]
struct Buffer {
    arena: Vec<u8>,
    /// (key start, key length, kind, payload start, payload length)
    index: Vec<(u32, u32, u8, u32, u32)>,
}

impl Buffer {
    fn push(&mut self, key: &[u8], kind: u8, payload: &[u8]) {
        let k = self.arena.len() as u32;
        self.arena.extend_from_slice(key);
        let p = self.arena.len() as u32;
        self.arena.extend_from_slice(payload);
        self.index
            .push((k, key.len() as u32, kind, p, payload.len() as u32));
    }

    fn bytes(&self) -> usize {
        self.arena.len() + self.index.len() * 20
    }

    /// Writes the buffer sorted by key (stable: a key's operations keep their order)
    /// to `path`, and empties it; returns its first and last keys.
    fn write_sorted(&mut self, path: &Path) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
        let arena = &self.arena;
        let key = |i: &(u32, u32, u8, u32, u32)| &arena[i.0 as usize..(i.0 + i.1) as usize];
        let sorted = self
            .index
            .windows(2)
            .all(|w| cmp_key_bytes(key(&w[0]), key(&w[1])) != Ordering::Greater);
        if !sorted {
            self.index.sort_by(|a, b| cmp_key_bytes(key(a), key(b)));
        }
        let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
        for i in &self.index {
            write_rec(
                &mut w,
                key(i),
                i.2,
                &arena[i.3 as usize..(i.3 + i.4) as usize],
            )?;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_data()?;
        let bounds = (
            key(self.index.first().expect("not empty")).to_vec(),
            key(self.index.last().expect("not empty")).to_vec(),
        );
        self.arena.clear();
        self.index.clear();
        Ok(bounds)
    }
}

#[derive(Default)]
struct Coll {
    /// The base: files in `_id` order, each after the previous one.
    base: Vec<PathBuf>,
    /// The base's last key (for appending sorted seed chunks).
    base_last: Option<Vec<u8>>,
    /// Seed chunks that were not in order after the base: merged at the barrier.
    seed_runs: Vec<PathBuf>,
    /// Operation runs, in oplog order.
    runs: Vec<PathBuf>,
    buf: Buffer,
    /// Whether `buf` holds the seed (documents) or operations.
    seeding: bool,
}

pub struct SortMerge {
    dir: PathBuf,
    budget: usize,
    colls: HashMap<Slot, Coll>,
    files: u64,
    /// Updates and deletes of a document that did not exist, found by the merge.
    pub missing: u64,
}

/// A head of the merge: the record and its source (0 the base, then the runs in
/// order; each source is in key order, and has one head at a time).
struct Head {
    rec: Rec,
    src: usize,
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
    /// Reversed: `BinaryHeap` is a max-heap, the merge takes the least key, then the
    /// earliest source.
    fn cmp(&self, o: &Self) -> Ordering {
        cmp_key_bytes(&o.rec.key, &self.rec.key).then(o.src.cmp(&self.src))
    }
}

impl SortMerge {
    pub fn create(dir: &Path, budget: usize) -> std::io::Result<SortMerge> {
        std::fs::create_dir_all(dir)?;
        Ok(SortMerge {
            dir: dir.to_path_buf(),
            budget,
            colls: HashMap::new(),
            files: 0,
            missing: 0,
        })
    }

    fn file(&mut self) -> PathBuf {
        self.files += 1;
        self.dir.join(format!("{}.run", self.files))
    }

    fn buffered(&self) -> usize {
        self.colls.values().map(|c| c.buf.bytes()).sum()
    }

    /// The seed: a document of the backup.
    pub fn seed(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        let c = self.colls.entry(slot).or_default();
        c.seeding = true;
        c.buf.push(key.document_bytes(), DOC, doc);
        if self.buffered() > self.budget / 2 {
            self.spill_all();
        }
    }

    /// A write at its place in the oplog.
    pub fn op(&mut self, slot: Slot, key: &IdKey, kind: u8, payload: &[u8]) {
        if self.colls.entry(slot).or_default().seeding {
            self.spill(slot);
        }
        let c = self.colls.get_mut(&slot).expect("just made");
        c.buf.push(key.document_bytes(), kind, payload);
        if self.buffered() > self.budget / 2 {
            self.spill_all();
        }
    }

    pub fn insert(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        self.op(slot, key, PUT, doc)
    }
    pub fn bump(&mut self, slot: Slot, key: &IdKey) {
        self.op(slot, key, BUMP, &[0u8; 48])
    }
    pub fn delete(&mut self, slot: Slot, key: &IdKey) {
        self.op(slot, key, DELETE, &[])
    }

    fn spill_all(&mut self) {
        let slots: Vec<Slot> = self.colls.keys().copied().collect();
        for s in slots {
            self.spill(s);
        }
    }

    /// Writes a collection's buffer out: seed chunks in order after the base extend
    /// it, others become seed runs; operations become a run.
    fn spill(&mut self, slot: Slot) {
        let path = self.file();
        let c = self.colls.get_mut(&slot).expect("known");
        if c.buf.index.is_empty() {
            c.seeding = false;
            return;
        }
        let (first, last) = c.buf.write_sorted(&path).expect("write a run");
        if c.seeding {
            c.seeding = false;
            let follows = c.seed_runs.is_empty()
                && c.base_last
                    .as_ref()
                    .is_none_or(|l| cmp_key_bytes(l, &first) == Ordering::Less);
            if follows {
                c.base.push(path);
                c.base_last = Some(last);
            } else {
                c.seed_runs.push(path);
            }
        } else {
            c.runs.push(path);
        }
    }

    /// The barrier: every collection's base, seed runs and runs merged into a new
    /// base.
    pub fn flush(&mut self) {
        self.spill_all();
        let slots: Vec<Slot> = self.colls.keys().copied().collect();
        for s in slots {
            self.merge(s).expect("merge");
        }
    }

    fn merge(&mut self, slot: Slot) -> std::io::Result<()> {
        let c = self.colls.get_mut(&slot).expect("known");
        if c.runs.is_empty() && c.seed_runs.is_empty() {
            return Ok(());
        }
        let mut sources: Vec<Vec<PathBuf>> = vec![std::mem::take(&mut c.base)];
        // Seed runs are documents (they come before every operation); then the
        // operation runs in oplog order.
        sources.extend(
            std::mem::take(&mut c.seed_runs)
                .into_iter()
                .map(|p| vec![p]),
        );
        sources.extend(std::mem::take(&mut c.runs).into_iter().map(|p| vec![p]));
        let buf_bytes = (self.budget / 2 / sources.len()).clamp(64 << 10, 1 << 20);
        let mut readers = Vec::new();
        let mut heap = BinaryHeap::new();
        for (src, files) in sources.iter().enumerate() {
            readers.push(Reader::open(files.clone(), buf_bytes)?);
            if let Some(r) = readers[src].as_mut() {
                let mut rec = Rec::default();
                if r.next(&mut rec)? {
                    heap.push(Head { rec, src });
                }
            }
        }
        self.files += 1;
        let out = self.dir.join(format!("{}.base", self.files));
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&out)?);
        // The current key's document as the records so far leave it.
        let (mut cur, mut doc, mut live, mut have) = (Vec::new(), Vec::new(), false, false);
        let mut last: Option<Vec<u8>> = None;
        while let Some(Head { rec, src }) = heap.pop() {
            if !have || cmp_key_bytes(&cur, &rec.key) != Ordering::Equal {
                if live {
                    write_rec(&mut w, &cur, DOC, &doc)?;
                    last = Some(cur.clone());
                }
                cur.clear();
                cur.extend_from_slice(&rec.key);
                (have, live) = (true, false);
            }
            match rec.kind {
                DOC | PUT => {
                    doc.clear();
                    doc.extend_from_slice(&rec.payload);
                    live = true;
                }
                DELETE if live => live = false,
                BUMP if live => doc[8] = doc[8].wrapping_add(1),
                DELETE | BUMP => self.missing += 1,
                k => panic!("record kind {k}"),
            }
            let r = readers[src].as_mut().expect("a source with a head");
            let mut next = rec;
            if r.next(&mut next)? {
                heap.push(Head { rec: next, src });
            }
        }
        if live {
            write_rec(&mut w, &cur, DOC, &doc)?;
            last = Some(cur);
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_data()?;
        for files in sources {
            for f in files {
                std::fs::remove_file(f)?;
            }
        }
        let c = self.colls.get_mut(&slot).expect("known");
        c.base = vec![out];
        c.base_last = last;
        Ok(())
    }

    /// Every document of a collection in `_id` order (after a barrier).
    pub fn for_each(&self, slot: Slot, f: &mut dyn FnMut(&IdKey, &[u8])) {
        let Some(c) = self.colls.get(&slot) else {
            return;
        };
        assert!(c.runs.is_empty() && c.buf.index.is_empty(), "flush first");
        let Some(mut r) = Reader::open(c.base.clone(), 1 << 20).expect("open the base") else {
            return;
        };
        let mut rec = Rec::default();
        while r.next(&mut rec).expect("read the base") {
            let key = IdKey::from_document_bytes(&rec.key).expect("a key");
            f(&key, &rec.payload);
        }
    }

    /// Drops a collection: its files removed.
    pub fn clear(&mut self, slot: Slot) {
        if let Some(c) = self.colls.remove(&slot) {
            for f in c.base.iter().chain(&c.seed_runs).chain(&c.runs) {
                std::fs::remove_file(f).expect("remove a run");
            }
        }
    }
}
