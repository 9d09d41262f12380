//! Document ids, ObjectId generation, logical sessions, and the pool of live ids
//! per collection.
//!
//! The generator never keeps documents, only their ids (and the second they were
//! inserted): a document's content is re-derived from its id when needed (see
//! `rng::DocRng::for_doc`). Updates and deletes only ever target ids that are live at
//! that moment, so replaying the generated oplog never touches a missing document.

use rand::Rng;

use super::bsonw::{BsonW, SUBTYPE_GENERIC};
use super::rng::{mix, uuid};

/// A document `_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Id {
    Oid([u8; 12]),
    Int(i32),
    /// `prefix` followed by `n` zero-padded to 6 digits, e.g. `C-000042`.
    Str {
        prefix: &'static str,
        n: u32,
    },
}

impl Id {
    /// Writes the id as the value of `key`.
    pub fn write(&self, w: &mut BsonW, key: &str) {
        match self {
            Id::Oid(b) => w.oid(key, b),
            Id::Int(n) => w.i32(key, *n),
            Id::Str { prefix, n } => w.str_fmt(key, format_args!("{prefix}{n:06}")),
        }
    }

    /// A stable 64-bit hash (seeds the document's content stream).
    pub fn hash(&self) -> u64 {
        match self {
            Id::Oid(b) => {
                let hi = u64::from_be_bytes(b[0..8].try_into().expect("8 bytes"));
                let lo = u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")) as u64;
                mix(hi ^ mix(lo))
            }
            Id::Int(n) => mix(0x1_0000_0000 | *n as u32 as u64),
            Id::Str { prefix, n } => mix(((prefix.len() as u64) << 40)
                ^ ((prefix.as_bytes()[0] as u64) << 32)
                ^ *n as u64),
        }
    }

    /// The ObjectId's seconds, if it is one.
    pub fn oid_secs(&self) -> Option<u32> {
        match self {
            Id::Oid(b) => Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            _ => None,
        }
    }
}

/// A live document: its id, the second it was inserted, and the number of the
/// collection whose content stream made it (documents keep their content when a
/// rename or an archiving transaction moves them to another collection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Live {
    pub id: Id,
    pub born: u32,
    pub src: u16,
}

/// Makes ObjectIds the way current drivers do: 4-byte big-endian seconds, a 5-byte
/// random value per client process, a 3-byte counter starting at a random value.
pub struct OidGen {
    procs: Vec<([u8; 5], u32)>,
}

impl OidGen {
    /// `n` client processes (application servers) inserting concurrently.
    pub fn new<R: Rng + ?Sized>(rng: &mut R, n: usize) -> OidGen {
        let procs = (0..n.max(1))
            .map(|_| {
                let mut p = [0u8; 5];
                rng.fill_bytes(&mut p);
                (p, rng.random_range(0..0x00ff_ffff))
            })
            .collect();
        OidGen { procs }
    }

    /// A new ObjectId created at second `secs` by a random process.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, secs: u32) -> [u8; 12] {
        let k = rng.random_range(0..self.procs.len());
        let (p, counter) = &mut self.procs[k];
        *counter = (*counter + 1) & 0x00ff_ffff;
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&secs.to_be_bytes());
        b[4..9].copy_from_slice(p);
        b[9..12].copy_from_slice(&counter.to_be_bytes()[1..4]);
        b
    }
}

/// A logical session (`lsid`) and its transaction counter.
pub struct Session {
    pub id: [u8; 16],
    /// SHA-256 of the authenticated user name, as the server records it.
    pub uid: [u8; 32],
    pub txn_number: i64,
    /// A prepared transaction is open on it: no other operation may use it.
    pub busy: bool,
}

impl Session {
    pub fn new<R: Rng + ?Sized>(rng: &mut R, uid: [u8; 32]) -> Session {
        Session {
            id: uuid(rng),
            uid,
            txn_number: rng.random_range(1..500),
            busy: false,
        }
    }

    /// Writes `lsid: {id, uid}`.
    pub fn write_lsid(&self, w: &mut BsonW) {
        w.doc("lsid");
        w.uuid("id", &self.id);
        w.bin("uid", SUBTYPE_GENERIC, &self.uid);
        w.end();
    }
}

/// The ids known to be live in one collection.
///
/// With an unbounded capacity this is the exact live set. With a bound (the bench
/// scenario), a new id replaces a random tracked one when the pool is full: the
/// evicted document stays live but is never updated or deleted again, so the
/// collection's document *count* (kept separately) stays exact.
#[derive(Debug, Default)]
pub struct IdPool {
    items: Vec<Live>,
    cap: usize,
}

impl IdPool {
    pub fn new(cap: usize) -> IdPool {
        IdPool {
            items: Vec::new(),
            cap,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// All tracked ids, oldest first as long as nothing was removed.
    pub fn items(&self) -> &[Live] {
        &self.items
    }

    /// Tracks a newly inserted id.
    pub fn add<R: Rng + ?Sized>(&mut self, rng: &mut R, l: Live) {
        if self.items.len() < self.cap {
            self.items.push(l);
        } else if self.cap > 0 {
            let k = rng.random_range(0..self.items.len());
            self.items[k] = l;
        }
    }

    /// A random live id, still tracked.
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<Live> {
        if self.items.is_empty() {
            None
        } else {
            Some(self.items[rng.random_range(0..self.items.len())])
        }
    }

    /// Removes and returns a random live id.
    pub fn take<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Option<Live> {
        if self.items.is_empty() {
            None
        } else {
            let k = rng.random_range(0..self.items.len());
            Some(self.items.swap_remove(k))
        }
    }

    /// Removes everything, returning it.
    pub fn take_all(&mut self) -> Vec<Live> {
        std::mem::take(&mut self.items)
    }

    /// Replaces the content (used by renames).
    pub fn replace(&mut self, items: Vec<Live>) {
        self.items = items;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::MainRng;
    use rand::SeedableRng;

    #[test]
    fn object_ids_carry_the_insert_second_and_count_up() {
        let mut rng = MainRng::seed_from_u64(1);
        let mut g = OidGen::new(&mut rng, 1);
        let a = g.next(&mut rng, 1_795_000_000);
        let b = g.next(&mut rng, 1_795_000_001);
        assert_eq!(Id::Oid(a).oid_secs(), Some(1_795_000_000));
        assert_eq!(a[4..9], b[4..9]);
        let ca = u32::from_be_bytes([0, a[9], a[10], a[11]]);
        let cb = u32::from_be_bytes([0, b[9], b[10], b[11]]);
        assert_eq!((ca + 1) & 0xff_ffff, cb);
    }

    #[test]
    fn string_ids_are_padded() {
        let mut w = BsonW::new();
        w.start();
        Id::Str {
            prefix: "C-",
            n: 42,
        }
        .write(&mut w, "_id");
        w.end();
        let d = bson::Document::from_reader(&w.buf[..]).unwrap();
        assert_eq!(d.get_str("_id").unwrap(), "C-000042");
    }

    #[test]
    fn bounded_pool_keeps_its_size() {
        let mut rng = MainRng::seed_from_u64(2);
        let mut p = IdPool::new(3);
        for n in 0..10 {
            p.add(
                &mut rng,
                Live {
                    id: Id::Int(n),
                    born: 0,
                    src: 0,
                },
            );
        }
        assert_eq!(p.len(), 3);
        assert!(p.take(&mut rng).is_some());
        assert_eq!(p.len(), 2);
    }
}
