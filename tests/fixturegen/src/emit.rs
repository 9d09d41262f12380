//! Writing oplog entries: timestamps, wall clocks, field order, and the two oplog
//! files (the backup's own `oplog.bson` and the replica set's `oplog.bson`).
//!
//! Time advances one second at a time. Entries of the current second are encoded
//! into one reused buffer; when the second ends their `wall` values are filled in
//! (increasing milliseconds within that second, spread like real traffic) and the
//! buffer goes to every oplog file that is recording at that second. Entries get
//! ordinals 1, 2, ... within their second, so `ts` is strictly increasing.
//!
//! Field order follows a 5.0-7.0 primary: `[lsid, txnNumber,] op, ns, [ui,] o,
//! [o2,] [fromMigrate | stmtId,] ts, t, v, wall[, prevOpTime]`.

use std::collections::BTreeMap;
use std::io::{self, Write};

use rand::Rng;

use super::bsonw::BsonW;
use super::files::AtomicFile;
use super::ids::Session;
use super::rng::MainRng;
use pitr::oplog::Ts;

/// The `prevOpTime` of an entry.
#[derive(Clone, Copy, Debug)]
pub enum Prev {
    /// No `prevOpTime` field.
    None,
    /// `{ts: Timestamp(0, 0), t: -1}`: the first entry of a chain.
    Start,
    /// The previous entry of the chain.
    At(Ts, i64),
}

/// One oplog file being written, and what went into it.
pub struct Sink {
    file: Option<AtomicFile>,
    pub on: bool,
    pub first: Option<Ts>,
    pub last: Option<Ts>,
    pub entries: u64,
    pub bytes: u64,
}

impl Sink {
    pub fn new(file: AtomicFile) -> Sink {
        Sink {
            file: Some(file),
            on: false,
            first: None,
            last: None,
            entries: 0,
            bytes: 0,
        }
    }

    fn write(&mut self, buf: &[u8], first: Ts, last: Ts, n: u64) -> io::Result<()> {
        if !self.on || n == 0 {
            return Ok(());
        }
        if let Some(f) = self.file.as_mut() {
            f.write_all(buf)?;
        }
        self.first.get_or_insert(first);
        self.last = Some(last);
        self.entries += n;
        self.bytes += buf.len() as u64;
        Ok(())
    }

    /// Stops recording and takes the file out (to be committed).
    pub fn close(&mut self) -> Option<AtomicFile> {
        self.on = false;
        self.file.take()
    }
}

/// Encodes entries and hands each finished second to the sinks.
pub struct Emitter {
    pub w: BsonW,
    sec: u32,
    ord: u32,
    /// Entries of the previous second (for commit timestamps).
    pub prev_second_entries: u32,
    /// Offsets of the `wall` values of this second's entries.
    walls: Vec<usize>,
    /// Per entry of this second: written by the routine traffic (see `routine.rs`),
    /// whose wall clocks come from [`Emitter::side_rng`] so that adding routine
    /// traffic leaves the main random stream, and so every other entry, unchanged.
    routine_walls: Vec<bool>,
    /// Set while the routine traffic writes.
    pub routine_now: bool,
    /// The random stream of routine entries' wall clocks.
    pub side_rng: Option<MainRng>,
    /// Election term written in `t`.
    pub term: i64,
    /// Ordinals of this second whose wall clock the truth needs.
    wanted: Vec<u32>,
    /// Wall clocks (ms) of wanted entries, by ts.
    pub walls_of: BTreeMap<Ts, i64>,
    pub main: Sink,
    pub backup: Sink,
    pub total_entries: u64,
    /// Write the 4.0/4.2 field order (`--mix legacy`, see [`super::mix::to_legacy`]).
    pub legacy: bool,
    legacy_buf: Vec<u8>,
}

impl Emitter {
    pub fn new(main: Sink, backup: Sink, term: i64) -> Emitter {
        Emitter {
            w: BsonW::new(),
            sec: 0,
            ord: 0,
            prev_second_entries: 0,
            walls: Vec::new(),
            routine_walls: Vec::new(),
            routine_now: false,
            side_rng: None,
            term,
            wanted: Vec::new(),
            walls_of: BTreeMap::new(),
            main,
            backup,
            total_entries: 0,
            legacy: false,
            legacy_buf: Vec::new(),
        }
    }

    /// The second being written.
    pub fn sec(&self) -> u32 {
        self.sec
    }

    /// An approximate "now" in milliseconds, for dates inside documents.
    pub fn now_ms<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        self.sec as i64 * 1000 + rng.random_range(0..1000)
    }

    /// Starts second `sec` (must be later than the previous one).
    pub fn begin_second(&mut self, sec: u32) {
        debug_assert!(self.w.depth() == 0 && (self.sec < sec || self.sec == 0));
        self.sec = sec;
        self.ord = 0;
        self.w.clear();
        self.walls.clear();
        self.routine_walls.clear();
        self.wanted.clear();
    }

    /// Number of entries written in the current second so far.
    pub fn entries_this_second(&self) -> u32 {
        self.ord
    }

    /// Fills in the wall clocks and writes the second to the recording sinks.
    pub fn end_second<R: Rng + ?Sized>(&mut self, rng: &mut R) -> io::Result<()> {
        let n = self.walls.len();
        if n > 0 {
            // Entry k of n falls in the k-th slice of the second: increasing, never
            // leaving the second of its ts, milliseconds varying.
            let base = self.sec as i64 * 1000;
            let width = 1000.0 / n as f64;
            let mut prev = 0i64;
            for k in 0..n {
                let u: f64 = match self.side_rng.as_mut() {
                    Some(side) if self.routine_walls[k] => side.random(),
                    _ => rng.random(),
                };
                let ms = ((k as f64 + u) * width) as i64;
                let ms = ms.clamp(prev, 999);
                prev = ms;
                self.w.patch_date(self.walls[k], base + ms);
                if self.wanted.contains(&(k as u32 + 1)) {
                    self.walls_of
                        .insert(Ts::new(self.sec, k as u32 + 1), base + ms);
                }
            }
            let first = Ts::new(self.sec, 1);
            let last = Ts::new(self.sec, n as u32);
            let out = if self.legacy {
                super::mix::to_legacy(&self.w.buf, &mut self.legacy_buf);
                &self.legacy_buf
            } else {
                &self.w.buf
            };
            self.main.write(out, first, last, n as u64)?;
            self.backup.write(out, first, last, n as u64)?;
            self.total_entries += n as u64;
        }
        self.prev_second_entries = n as u32;
        self.w.clear();
        self.walls.clear();
        self.routine_walls.clear();
        Ok(())
    }

    /// Asks for the wall clock of `ts` (an entry of the current second) to be kept.
    pub fn want_wall(&mut self, ts: Ts) {
        self.wanted.push(ts.i);
    }

    /// Opens an entry: `op`, `ns` and `ui`. Then write `o`, `o2`, ... into
    /// [`Emitter::w`] and call [`Emitter::finish`].
    pub fn begin(&mut self, op: &str, ns: &str, ui: Option<&[u8; 16]>) {
        self.w.start();
        self.w.str("op", op);
        self.w.str("ns", ns);
        if let Some(u) = ui {
            self.w.uuid("ui", u);
        }
    }

    /// Opens an entry of a session (retryable write or transaction): `lsid` and
    /// `txnNumber` come first, as the server writes them.
    pub fn begin_session(&mut self, s: &Session, op: &str, ns: &str, ui: Option<&[u8; 16]>) {
        self.w.start();
        s.write_lsid(&mut self.w);
        self.w.i64("txnNumber", s.txn_number);
        self.w.str("op", op);
        self.w.str("ns", ns);
        if let Some(u) = ui {
            self.w.uuid("ui", u);
        }
    }

    /// The ts the next entry will get.
    pub fn peek_ts(&self) -> Ts {
        Ts::new(self.sec, self.ord + 1)
    }

    /// Closes the entry opened by [`Emitter::begin`]: `ts, t, v, wall` and the
    /// optional `prevOpTime`. Returns its ts.
    pub fn finish(&mut self, prev: Prev) -> Ts {
        self.ord += 1;
        let ts = Ts::new(self.sec, self.ord);
        self.w.ts("ts", ts.t, ts.i);
        self.w.i64("t", self.term);
        self.w.i64("v", 2);
        let at = self.w.date_slot("wall", self.sec as i64 * 1000);
        self.walls.push(at);
        self.routine_walls.push(self.routine_now);
        match prev {
            Prev::None => {}
            Prev::Start => {
                self.w.doc("prevOpTime");
                self.w.ts("ts", 0, 0);
                self.w.i64("t", -1);
                self.w.end();
            }
            Prev::At(p, t) => {
                self.w.doc("prevOpTime");
                self.w.ts("ts", p.t, p.i);
                self.w.i64("t", t);
                self.w.end();
            }
        }
        self.w.end();
        debug_assert_eq!(self.w.depth(), 0);
        ts
    }

    /// Opens one operation inside an `applyOps` array.
    pub fn inner(&mut self, op: &str, ns: &str, ui: &[u8; 16]) {
        self.w.doc("");
        self.w.str("op", op);
        self.w.str("ns", ns);
        self.w.uuid("ui", ui);
    }

    /// Bytes written to the main oplog so far, plus the current second.
    pub fn main_bytes(&self) -> u64 {
        self.main.bytes
            + if self.main.on {
                self.w.buf.len() as u64
            } else {
                0
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::MainRng;
    use pitr::oplog::{OplogReader, ReadOptions};
    use rand::SeedableRng;

    #[test]
    fn entries_are_ordered_and_walls_stay_in_their_second() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oplog.bson");
        let mut main = Sink::new(AtomicFile::create(&path).unwrap());
        main.on = true;
        let mut backup = Sink::new(AtomicFile::create(&dir.path().join("b.bson")).unwrap());
        backup.on = false;
        let mut em = Emitter::new(main, backup, 3);
        let mut rng = MainRng::seed_from_u64(1);
        for sec in [1_795_000_000u32, 1_795_000_001] {
            em.begin_second(sec);
            for k in 0..(50 * (sec % 2 + 1)) {
                em.begin("n", "", None);
                em.w.doc("o");
                em.w.str("msg", "periodic noop");
                em.w.end();
                let ts = em.finish(if k == 0 { Prev::Start } else { Prev::None });
                if k == 7 {
                    em.want_wall(ts);
                }
            }
            em.end_second(&mut rng).unwrap();
        }
        assert_eq!(em.walls_of.len(), 2);
        let f = em.main.close().unwrap();
        f.commit().unwrap();
        let mut r = OplogReader::new(
            "t",
            std::fs::File::open(&path).unwrap(),
            ReadOptions::default(),
        );
        let mut last = Ts::ZERO;
        let mut last_wall = 0;
        let mut n = 0;
        while let Some(e) = r.next_entry().unwrap() {
            assert!(e.ts > last);
            let wall = e.wall_ms.unwrap();
            assert_eq!(wall / 1000, e.ts.t as i64);
            assert!(wall >= last_wall);
            assert_eq!(e.term, Some(3));
            last = e.ts;
            last_wall = wall;
            n += 1;
        }
        assert_eq!(n, 150);
    }
}
