//! The embedded engine's on-disk document store (the path past `--memory`), measured
//! with the engine's own access pattern, for redb (the store pitr used first) and
//! LMDB through heed (issue 22: "measure again with this project's real access
//! pattern and choose by the numbers").
//!
//! Run: `scripts/disk-store-bench.sh` (release; both stores, alternated, medians), or
//! one run: `cargo run --release --example disk_store_bench -- STORE DIR [SCALE]`
//! with STORE `redb` (the engine's B-tree store, src/engine/replica/disk.rs), `lmdb`
//! (`lmdb.rs` beside this file, the LMDB candidate with the interface of
//! src/engine/replica/disk.rs), `lmdb-keep` (the
//! same without giving the map's pages back: shows what the mmap costs in RSS) or
//! `sortmerge` (the engine's sort-merge store, src/engine/replica/sorted.rs, the
//! path past `--memory` now; `sortmerge.rs` beside this file drives it).
//!
//! The pattern, at the scale of the 1 GiB bench (`scripts/bench-engine.sh`; SCALE
//! 1.0), with the engine's `--memory 64MiB` write buffer (half the budget):
//!
//! - *seed*: the backup, in `_id` order, as the replica seeds it past the budget
//!   (`Store::put`: a lookup, then a buffered write): 1,050,000 filler documents
//!   of 1,030 bytes under int32 `_id`s (the bench's `bench.filler`) and 300,000
//!   documents of 300 bytes under ObjectIds.
//! - *apply*: 3,000,000 oplog entries on the ObjectId collection, the bench's mix:
//!   57% inserts of new (increasing) ObjectIds, 38% updates of a random live
//!   document (read it, write it back changed, as `$set` does), 5% deletes of a
//!   random live document; the buffer is flushed whenever it is full, as the
//!   engine does.
//! - *scan*: every document of both collections in `_id` order (the dbHash and
//!   the dump read them this way).
//! - *drop*: the ObjectId collection dropped whole.
//!
//! Printed per phase: wall and CPU (user + sys) seconds, peak RSS of the phase
//! (VmHWM, reset before each phase through /proc/self/clear_refs), bytes the
//! process caused to be written (/proc/self/io `write_bytes`), and the file size.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bson::oid::ObjectId;
use bson::RawBsonRef;
mod lmdb;
mod sortmerge;

use lmdb::{DiskError, DiskStore};
use pitr::engine::replica::disk::DiskStore as RedbStore;
use pitr::engine::replica::Slot;
use pitr::engine::IdKey;
use sortmerge::SortMerge;

const BUDGET: usize = 64 << 20;

/// The engine's store interface (disk.rs), for both candidates.
trait Bench {
    fn get(&self, slot: Slot, key: &IdKey, out: &mut Vec<u8>) -> bool;
    fn put(&mut self, slot: Slot, key: &IdKey, doc: &[u8], exists: Option<bool>) -> bool;
    fn remove(&mut self, slot: Slot, key: &IdKey) -> bool;
    fn clear(&mut self, slot: Slot);
    fn flush(&mut self);
    fn for_each(&self, slot: Slot, f: &mut dyn FnMut(&IdKey, &[u8]));

    // The bench's writes, as a B-tree store takes them (a sort-merge store defers
    // them, see sortmerge.rs).

    /// A document of the backup.
    fn seed(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        self.put(slot, key, doc, None);
    }
    /// An insert of a new document.
    fn insert(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        self.put(slot, key, doc, None);
    }
    /// An update of a live document: read it, write it back changed (`buf` reused).
    fn bump(&mut self, slot: Slot, key: &IdKey, buf: &mut Vec<u8>) {
        buf.clear();
        assert!(self.get(slot, key, buf));
        buf[8] = buf[8].wrapping_add(1);
        self.put(slot, key, buf, Some(true));
    }
    /// A delete of a live document.
    fn delete(&mut self, slot: Slot, key: &IdKey) {
        assert!(self.remove(slot, key));
    }
    /// Makes every write visible to `for_each`, and checks the store's own count
    /// of writes to missing documents (none in the bench).
    fn barrier(&mut self) {
        self.flush();
    }
}

impl Bench for SortMerge {
    fn get(&self, _: Slot, _: &IdKey, _: &mut Vec<u8>) -> bool {
        unreachable!("a sort-merge store has no point reads")
    }
    fn put(&mut self, _: Slot, _: &IdKey, _: &[u8], _: Option<bool>) -> bool {
        unreachable!("writes go through seed and insert")
    }
    fn remove(&mut self, _: Slot, _: &IdKey) -> bool {
        unreachable!("deletes go through delete")
    }
    fn clear(&mut self, slot: Slot) {
        SortMerge::clear(self, slot)
    }
    fn flush(&mut self) {
        SortMerge::flush(self)
    }
    fn for_each(&self, slot: Slot, f: &mut dyn FnMut(&IdKey, &[u8])) {
        SortMerge::for_each(self, slot, f)
    }
    fn seed(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        SortMerge::seed(self, slot, key, doc)
    }
    fn insert(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        SortMerge::insert(self, slot, key, doc)
    }
    fn bump(&mut self, slot: Slot, key: &IdKey, _: &mut Vec<u8>) {
        SortMerge::bump(self, slot, key)
    }
    fn delete(&mut self, slot: Slot, key: &IdKey) {
        SortMerge::delete(self, slot, key)
    }
    fn barrier(&mut self) {
        SortMerge::flush(self);
        assert_eq!(self.missing, 0, "writes to missing documents");
    }
}

/// [`Bench`] for a store with disk.rs's interface and error type `$err`.
macro_rules! bench_store {
    ($store:ty, $err:ty) => {
        impl Bench for $store {
            fn get(&self, slot: Slot, key: &IdKey, out: &mut Vec<u8>) -> bool {
                <$store>::get(self, slot, key, out).unwrap()
            }
            fn put(&mut self, slot: Slot, key: &IdKey, doc: &[u8], exists: Option<bool>) -> bool {
                <$store>::put(self, slot, key, doc, exists).unwrap()
            }
            fn remove(&mut self, slot: Slot, key: &IdKey) -> bool {
                <$store>::remove(self, slot, key).unwrap()
            }
            fn clear(&mut self, slot: Slot) {
                <$store>::clear(self, slot).unwrap()
            }
            fn flush(&mut self) {
                <$store>::flush(self).unwrap()
            }
            fn for_each(&self, slot: Slot, f: &mut dyn FnMut(&IdKey, &[u8])) {
                <$store>::for_each(self, slot, &mut |k, d| {
                    f(k, d);
                    Ok::<(), $err>(())
                })
                .unwrap()
            }
        }
    };
}

// The LMDB candidate (lmdb.rs) and the engine's own store (src/engine/replica/disk.rs,
// redb: one table per slot, a sorted write buffer, durable commits so that freed pages
// are reused), driven through the same calls.
bench_store!(DiskStore, DiskError);
bench_store!(RedbStore, pitr::engine::replica::disk::DiskError);

// ---- the measurement ----

fn cpu_s() -> f64 {
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(r.ru_utime) + tv(r.ru_stime)
}

fn proc_field(file: &str, name: &str) -> u64 {
    let s = std::fs::read_to_string(file).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

struct Phase {
    wall: Instant,
    cpu: f64,
    written: u64,
}

fn start() -> Phase {
    // Resets VmHWM to the current RSS (proc(5), clear_refs "5").
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    Phase {
        wall: Instant::now(),
        cpu: cpu_s(),
        written: proc_field("/proc/self/io", "write_bytes:"),
    }
}

fn report(store: &str, name: &str, p: Phase, dir: &Path) {
    println!(
        "{store}\t{name}\t{:.2}\t{:.2}\t{}\t{}\t{}",
        p.wall.elapsed().as_secs_f64(),
        cpu_s() - p.cpu,
        proc_field("/proc/self/status", "VmHWM:") / 1024,
        (proc_field("/proc/self/io", "write_bytes:") - p.written) >> 20,
        dir_bytes(dir) >> 20,
    );
}

/// splitmix64: a deterministic stream for the bench's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn oid(i: u64) -> IdKey {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&(1_700_000_000 + (i / 1000) as u32).to_be_bytes());
    b[4..9].copy_from_slice(&[7, 1, 2, 3, 4]);
    b[9..].copy_from_slice(&(i as u32).to_be_bytes()[1..]);
    IdKey::from_value(RawBsonRef::ObjectId(ObjectId::from_bytes(b)))
}

fn doc(len: usize, seed: u64) -> Vec<u8> {
    let mut d = vec![b'x'; len];
    d[..8].copy_from_slice(&seed.to_le_bytes());
    d
}

const FILLER: Slot = 1;
const ORDERS: Slot = 2;

fn run(store: &str, s: &mut dyn Bench, dir: &Path, scale: f64) {
    let n_filler = (1_050_000.0 * scale) as u64;
    let n_seed = (300_000.0 * scale) as u64;
    let n_ops = (3_000_000.0 * scale) as u64;

    let p = start();
    for i in 0..n_filler {
        let k = IdKey::from_value(RawBsonRef::Int32(i as i32));
        s.seed(FILLER, &k, &doc(1030, i));
    }
    for i in 0..n_seed {
        s.seed(ORDERS, &oid(i), &doc(300, i));
    }
    s.flush();
    report(store, "seed", p, dir);

    // Live ObjectId documents by sequence number (swap-remove on delete).
    let mut live: Vec<u64> = (0..n_seed).collect();
    let mut next = n_seed;
    let mut rng = Rng(42);
    let mut buf = Vec::new();
    let p = start();
    for _ in 0..n_ops {
        let r = rng.next() % 100;
        if r < 57 {
            s.insert(ORDERS, &oid(next), &doc(300, next));
            live.push(next);
            next += 1;
        } else {
            let at = (rng.next() % live.len() as u64) as usize;
            let k = oid(live[at]);
            if r < 95 {
                s.bump(ORDERS, &k, &mut buf);
            } else {
                s.delete(ORDERS, &k);
                live.swap_remove(at);
            }
        }
    }
    s.barrier();
    report(store, "apply", p, dir);

    let p = start();
    let (mut n, mut bytes) = (0u64, 0u64);
    for slot in [FILLER, ORDERS] {
        let mut prev: Option<IdKey> = None;
        s.for_each(slot, &mut |k, d| {
            if let Some(p) = &prev {
                assert!(p < k, "keys out of order");
            }
            prev = Some(k.clone());
            n += 1;
            bytes += d.len() as u64 + d[d.len() / 2] as u64;
        });
    }
    assert_eq!(n, n_filler + live.len() as u64);
    std::hint::black_box(bytes);
    report(store, "scan", p, dir);

    // Not timed: a digest of every key and document (FNV-1a), so that the stores
    // can be seen to end in the same state.
    let mut digest = 0xCBF2_9CE4_8422_2325u64;
    for slot in [FILLER, ORDERS] {
        s.for_each(slot, &mut |k, d| {
            for b in k.document_bytes().iter().chain(d) {
                digest = (digest ^ u64::from(*b)).wrapping_mul(0x100_0000_01B3);
            }
        });
    }
    eprintln!("{store}: {n} documents, digest {digest:016x}");

    let p = start();
    s.clear(ORDERS);
    report(store, "drop", p, dir);
    let mut any = false;
    s.for_each(ORDERS, &mut |_, _| any = true);
    assert!(!any);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: disk_store_bench redb|lmdb|lmdb-keep|sortmerge DIR [SCALE]");
        std::process::exit(2);
    }
    let dir = PathBuf::from(&args[2]);
    let scale: f64 = args
        .get(3)
        .map_or(1.0, |s| s.parse().expect("SCALE: a number"));
    std::fs::create_dir_all(&dir).unwrap();
    match args[1].as_str() {
        "redb" => run(
            "redb",
            &mut RedbStore::create(&dir, BUDGET).unwrap(),
            &dir,
            scale,
        ),
        "lmdb" => run(
            "lmdb",
            &mut DiskStore::create(&dir, BUDGET).unwrap(),
            &dir,
            scale,
        ),
        "lmdb-keep" => {
            let mut s = DiskStore::create(&dir, BUDGET).unwrap();
            s.keep_mapped_pages();
            run("lmdb-keep", &mut s, &dir, scale)
        }
        "sortmerge" => run(
            "sortmerge",
            &mut SortMerge::create(&dir, BUDGET).unwrap(),
            &dir,
            scale,
        ),
        other => panic!("unknown store {other}"),
    }
}
