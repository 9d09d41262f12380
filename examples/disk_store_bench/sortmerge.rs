//! The engine's sort-merge store (`src/engine/replica/sorted.rs`, the path past
//! `--memory` since issue 22) driven with the bench's writes: every write is
//! deferred with its place, sorted by `_id` into runs of half the budget, and
//! merged with the collection's sorted base at the barrier (`flush`, before a
//! scan), as the engine merges before it reads a collection. (It began here as a
//! prototype, measured against redb before the engine took it.)

use std::path::Path;

use pitr::engine::replica::sorted::{Flow, Sorted};
use pitr::engine::replica::Slot;
use pitr::engine::IdKey;

/// The bench's write kinds (the engine keeps its own in the same 12 bytes).
const PUT: u8 = 0;
const DELETE: u8 = 1;
/// The bench's update: the document's byte 8 incremented (a stand-in for `$set`'s
/// post-image built from the stored document and the entry's `o`).
const BUMP: u8 = 2;

pub struct SortMerge {
    s: Sorted,
    seq: u64,
    /// Updates and deletes of a document that did not exist, found by the merge.
    pub missing: u64,
}

impl SortMerge {
    pub fn create(dir: &Path, budget: usize) -> std::io::Result<SortMerge> {
        std::fs::create_dir_all(dir)?;
        Ok(SortMerge {
            s: Sorted::create(dir, budget),
            seq: 0,
            missing: 0,
        })
    }

    fn op(&mut self, slot: Slot, key: &IdKey, kind: u8, payload: &[u8]) {
        let mut meta = [0u8; 12];
        meta[0] = kind;
        self.s
            .defer(slot, key, self.seq, meta, &[payload])
            .expect("defer a write");
        self.seq += 1;
    }

    /// A document of the backup: deferred as an insert, as the engine's seed past
    /// the budget is.
    pub fn seed(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        self.op(slot, key, PUT, doc)
    }
    pub fn insert(&mut self, slot: Slot, key: &IdKey, doc: &[u8]) {
        self.op(slot, key, PUT, doc)
    }
    pub fn bump(&mut self, slot: Slot, key: &IdKey) {
        // The size of a `$v: 2` diff's `o`, which the engine keeps with the write.
        self.op(slot, key, BUMP, &[0u8; 48])
    }
    pub fn delete(&mut self, slot: Slot, key: &IdKey) {
        self.op(slot, key, DELETE, &[])
    }

    /// The barrier: every collection's writes merged into its base.
    pub fn flush(&mut self) {
        let missing = &mut self.missing;
        for slot in self.s.pending_slots() {
            self.s
                .merge(slot, &mut |doc, _, op| {
                    match (op.meta[0], doc.live) {
                        (PUT, _) => {
                            doc.bytes.clear();
                            doc.bytes.extend_from_slice(op.payload);
                            doc.live = true;
                        }
                        (DELETE, true) => doc.live = false,
                        (BUMP, true) => doc.bytes[8] = doc.bytes[8].wrapping_add(1),
                        _ => *missing += 1,
                    }
                    Flow::Next
                })
                .expect("merge");
        }
    }

    /// Every document of a collection in `_id` order (after a barrier).
    pub fn for_each(&self, slot: Slot, f: &mut dyn FnMut(&IdKey, &[u8])) {
        self.s
            .for_each(slot, &mut |k, d| {
                f(k, d);
                Ok(())
            })
            .expect("scan");
    }

    /// Drops a collection: its files removed.
    pub fn clear(&mut self, slot: Slot) {
        self.s.clear(slot)
    }
}
