//! Do the backup and the replay oplog belong together? They must be two views of one
//! replica set's history: the replay oplog reaches the backup's end, and where it
//! overlaps the backup's own oplog it holds the very same entries.
//!
//! An oplog of another replica set (or of another year: a 2020 oplog beside a 2026
//! backup) used to be accepted when the limit did not need it, and the restore was
//! reported as passed although nothing from the oplog was applied. Entries of one
//! history are identical wherever they appear: mongodump `--oplog` and a dump of
//! `local.oplog.rs` both copy the server's oplog documents as they are, so the same
//! `ts` with different bytes (another term `t`, another operation) or an entry missing
//! where the replay oplog covers its `ts` means another history: another replica set,
//! or a rollback of entries the backup captured (the server's rollback removes them
//! from the oplog; `src/mongo/db/repl/rollback_impl.cpp`).
//!
//! The backup's own oplog is remembered as hashes of its last [`REMEMBERED`] entries
//! (the ones nearest its end, which any replay oplog that reaches the end overlaps);
//! memory stays bounded whatever the backup's size.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hasher};

use crate::error::Hint;
use crate::oplog::Ts;

/// How many of the backup oplog's last entries are compared.
pub const REMEMBERED: usize = 100_000;

/// A 64-bit hash of one entry's bytes (fixed seed: the same bytes hash alike in
/// every pass).
pub fn entry_hash(bytes: &[u8]) -> u64 {
    let mut h = foldhash::quality::FixedState::with_seed(0x7069_7472).build_hasher();
    h.write(bytes);
    h.finish()
}

/// The backup oplog's last entries, as `(ts, hash)` in input order.
#[derive(Debug, Default)]
pub struct Remembered {
    entries: VecDeque<(Ts, u64)>,
}

impl Remembered {
    pub fn push(&mut self, ts: Ts, bytes: &[u8]) {
        if self.entries.len() == REMEMBERED {
            self.entries.pop_front();
        }
        self.entries.push_back((ts, entry_hash(bytes)));
    }

    /// The lookup the replay oplog's pass uses.
    pub fn into_lookup(self) -> Lookup {
        let mut by_ts: HashMap<Ts, Vec<u64>> = HashMap::with_capacity(self.entries.len());
        let mut span: Option<(Ts, Ts)> = None;
        for (ts, h) in self.entries {
            by_ts.entry(ts).or_default().push(h);
            span = Some(span.map_or((ts, ts), |(lo, hi)| (lo.min(ts), hi.max(ts))));
        }
        Lookup {
            by_ts,
            span,
            identical: HashSet::new(),
            different: None,
        }
    }
}

/// The backup oplog's remembered entries, and what the replay oplog's pass found
/// of them.
#[derive(Debug, Default)]
pub struct Lookup {
    by_ts: HashMap<Ts, Vec<u64>>,
    /// The smallest and largest remembered `ts`: the replay oplog's entries outside
    /// it (almost all of them) are let go without hashing their `ts`.
    span: Option<(Ts, Ts)>,
    /// Remembered positions the replay oplog holds with identical bytes.
    identical: HashSet<Ts>,
    /// The first position seen with other bytes.
    different: Option<Ts>,
}

impl Lookup {
    /// One entry of the replay oplog.
    pub fn see(&mut self, ts: Ts, bytes: &[u8]) {
        if self.span.is_none_or(|(lo, hi)| ts < lo || ts > hi) {
            return;
        }
        let Some(hashes) = self.by_ts.get(&ts) else {
            return;
        };
        if hashes.contains(&entry_hash(bytes)) {
            self.identical.insert(ts);
        } else if self.different.is_none_or(|d| ts < d) {
            self.different = Some(ts);
        }
    }

    /// Compares the remembered entries inside `[first, last]` (the replay oplog's
    /// range, which holds every entry of its history between those two).
    pub fn overlap(&self, first: Ts, last: Ts) -> Overlap {
        let mut o = Overlap::default();
        for &ts in self.by_ts.keys() {
            if ts < first || ts > last {
                continue;
            }
            o.compared += 1;
            if self.identical.contains(&ts) {
                o.identical += 1;
            } else if o.first_missing.is_none_or(|m| ts < m) && self.different != Some(ts) {
                o.first_missing = Some(ts);
            }
        }
        o.first_different = self.different.filter(|d| *d >= first && *d <= last);
        o
    }
}

/// The comparison inside the range both oplogs cover.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overlap {
    /// Remembered backup-oplog positions inside the replay oplog's range.
    pub compared: u64,
    /// Of those, the ones the replay oplog holds with the same bytes.
    pub identical: u64,
    /// The first position the replay oplog holds with other bytes.
    pub first_different: Option<Ts>,
    /// The first position the replay oplog lacks although it covers it.
    pub first_missing: Option<Ts>,
}

/// What is known of both sides.
#[derive(Clone, Debug)]
pub struct HistoryInput {
    pub oplog_name: String,
    /// First and last ts of the replay oplog (as read).
    pub oplog: Option<(Ts, Ts)>,
    /// The backup's end `E`.
    pub backup_end: Ts,
    /// First and last ts of the backup's own oplog, when it has one.
    pub backup_oplog: Option<(Ts, Ts)>,
    pub overlap: Option<Overlap>,
}

/// The replay oplog cannot belong to the backup.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(
        "`{oplog}` ends at {last} ({}), before the backup's end {backup_end} ({}): it cannot carry the backup forward \
         (the oplog covers {first} .. {last}; {})",
        last.utc_string(), backup_end.utc_string(), backup_range(*backup_oplog, *backup_end)
    )]
    EndsBeforeBackup {
        oplog: String,
        first: Ts,
        last: Ts,
        backup_end: Ts,
        backup_oplog: Option<(Ts, Ts)>,
    },

    #[error(
        "coverage gap: the backup ends at {backup_end} ({}) but `{oplog}` starts at {first} ({}); the entries between \
         them are missing (the oplog covers {first} .. {last}; {})",
        backup_end.utc_string(), first.utc_string(), backup_range(*backup_oplog, *backup_end)
    )]
    StartsAfterBackup {
        oplog: String,
        first: Ts,
        last: Ts,
        backup_end: Ts,
        backup_oplog: Option<(Ts, Ts)>,
    },

    #[error(
        "`{oplog}` and the backup's own oplog are not the same history: of the {} backup-oplog entries in the range both \
         cover, {} {} identical in `{oplog}`{} (the oplog covers {first} .. {last}; the backup's oplog {} .. {})",
        overlap.compared,
        overlap.identical,
        if overlap.identical == 1 { "is" } else { "are" },
        first_difference(overlap),
        backup_oplog.0, backup_oplog.1
    )]
    DifferentHistory {
        oplog: String,
        first: Ts,
        last: Ts,
        backup_oplog: (Ts, Ts),
        overlap: Overlap,
    },
}

fn backup_range(backup_oplog: Option<(Ts, Ts)>, end: Ts) -> String {
    match backup_oplog {
        Some((f, l)) => format!("the backup's own oplog covers {f} .. {l}"),
        None => format!("the backup has no oplog of its own and ends at {end} (--backup-end)"),
    }
}

fn first_difference(o: &Overlap) -> String {
    match (o.first_different, o.first_missing) {
        (Some(d), Some(m)) if m < d => format!("; the first difference: no entry at {m}"),
        (Some(d), _) => format!("; the first difference: another entry at {d}"),
        (None, Some(m)) => format!("; the first difference: no entry at {m}"),
        (None, None) => String::new(),
    }
}

impl Hint for HistoryError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            HistoryError::EndsBeforeBackup { .. } => {
                "this oplog was dumped before the backup was taken, or comes from another replica set: dump the oplog of \
                 the replica set the backup was taken from again (`pitr dump-oplog`), so that it reaches past the backup's end"
                    .into()
            }
            HistoryError::StartsAfterBackup { .. } => {
                "the oplog no longer reaches back to the backup's end (its window rolled over, or it comes from another \
                 replica set): use an oplog archive or dump that covers the backup's end, or a newer backup"
                    .into()
            }
            HistoryError::DifferentHistory { .. } => {
                "the oplog comes from another replica set, or entries the backup captured were rolled back afterwards: \
                 use the oplog of the replica set the backup was taken from (`pitr oplog cat --around <ts>` on both shows \
                 the entries that differ), or a backup taken after the rollback"
                    .into()
            }
        })
    }
}

/// Refuses a replay oplog that cannot belong to the backup (see the module
/// documentation). An empty replay oplog is left to the coverage check.
pub fn check(inp: &HistoryInput) -> Result<(), HistoryError> {
    let Some((first, last)) = inp.oplog else {
        return Ok(());
    };
    let e = inp.backup_end;
    if last < e {
        return Err(HistoryError::EndsBeforeBackup {
            oplog: inp.oplog_name.clone(),
            first,
            last,
            backup_end: e,
            backup_oplog: inp.backup_oplog,
        });
    }
    if first > e.successor() {
        return Err(HistoryError::StartsAfterBackup {
            oplog: inp.oplog_name.clone(),
            first,
            last,
            backup_end: e,
            backup_oplog: inp.backup_oplog,
        });
    }
    if let (Some(o), Some(b)) = (inp.overlap, inp.backup_oplog) {
        if o.identical < o.compared || o.first_different.is_some() {
            return Err(HistoryError::DifferentHistory {
                oplog: inp.oplog_name.clone(),
                first,
                last,
                backup_oplog: b,
                overlap: o,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(t: u32, i: u32) -> Ts {
        Ts::new(t, i)
    }

    fn remembered(entries: &[(Ts, &[u8])]) -> Lookup {
        let mut r = Remembered::default();
        for (t, b) in entries {
            r.push(*t, b);
        }
        r.into_lookup()
    }

    fn input(oplog: (Ts, Ts), overlap: Option<Overlap>) -> HistoryInput {
        HistoryInput {
            oplog_name: "oplog.bson".into(),
            oplog: Some(oplog),
            backup_end: ts(100, 3),
            backup_oplog: Some((ts(90, 1), ts(100, 3))),
            overlap,
        }
    }

    #[test]
    fn identical_entries_in_the_overlap_pass() {
        let mut l = remembered(&[(ts(99, 1), b"a"), (ts(100, 3), b"b")]);
        l.see(ts(98, 1), b"x");
        l.see(ts(99, 1), b"a");
        l.see(ts(100, 3), b"b");
        let o = l.overlap(ts(98, 1), ts(120, 1));
        assert_eq!((o.compared, o.identical), (2, 2));
        assert!(check(&input((ts(98, 1), ts(120, 1)), Some(o))).is_ok());
        // The replay oplog starting at the backup's end overlaps it in one entry.
        let o = l.overlap(ts(100, 3), ts(120, 1));
        assert_eq!((o.compared, o.identical), (1, 1));
        // Starting right after it: nothing to compare, nothing missing.
        let o = l.overlap(ts(100, 4), ts(120, 1));
        assert_eq!(o.compared, 0);
        assert!(check(&input((ts(100, 4), ts(120, 1)), Some(o))).is_ok());
    }

    #[test]
    fn other_bytes_or_a_missing_entry_is_another_history() {
        let mut l = remembered(&[(ts(99, 1), b"a"), (ts(100, 3), b"b")]);
        l.see(ts(99, 1), b"a");
        l.see(ts(100, 3), b"B");
        let o = l.overlap(ts(95, 1), ts(120, 1));
        assert_eq!(o.first_different, Some(ts(100, 3)));
        let e = check(&input((ts(95, 1), ts(120, 1)), Some(o))).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("of the 2 backup-oplog entries in the range both cover, 1 is identical"),
            "{m}"
        );
        assert!(m.contains("another entry at 100:3"), "{m}");
        assert!(e.hint().unwrap().contains("rolled back"));

        let mut l = remembered(&[(ts(99, 1), b"a"), (ts(100, 3), b"b")]);
        l.see(ts(100, 3), b"b");
        let o = l.overlap(ts(95, 1), ts(120, 1));
        let m = check(&input((ts(95, 1), ts(120, 1)), Some(o)))
            .unwrap_err()
            .to_string();
        assert!(m.contains("no entry at 99:1"), "{m}");
        // A duplicate of an identical entry with the same ts is still identical.
        let mut l = remembered(&[(ts(100, 3), b"b")]);
        l.see(ts(100, 3), b"b");
        l.see(ts(100, 3), b"b");
        assert!(check(&input(
            (ts(95, 1), ts(120, 1)),
            Some(l.overlap(ts(95, 1), ts(120, 1)))
        ))
        .is_ok());
    }

    #[test]
    fn ranges_that_cannot_meet_are_refused_naming_both() {
        let e = check(&input((ts(10, 1), ts(20, 1)), None)).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, HistoryError::EndsBeforeBackup { .. }));
        assert!(
            m.contains("10:1 .. 20:1") && m.contains("90:1 .. 100:3"),
            "{m}"
        );
        let e = check(&input((ts(100, 5), ts(200, 1)), None)).unwrap_err();
        assert!(matches!(e, HistoryError::StartsAfterBackup { .. }), "{e:?}");
        // Ending at the backup's end, or starting right after it, can belong.
        assert!(check(&input((ts(50, 1), ts(100, 3)), None)).is_ok());
        assert!(check(&input((ts(100, 4), ts(200, 1)), None)).is_ok());
        let mut no_oplog = input((ts(10, 1), ts(20, 1)), None);
        no_oplog.backup_oplog = None;
        let m = check(&no_oplog).unwrap_err().to_string();
        assert!(m.contains("no oplog of its own and ends at 100:3"), "{m}");
    }

    #[test]
    fn only_the_last_entries_are_remembered() {
        let mut r = Remembered::default();
        for i in 0..(REMEMBERED as u32 + 10) {
            r.push(ts(1, i), &i.to_le_bytes());
        }
        let l = r.into_lookup();
        assert_eq!(l.by_ts.len(), REMEMBERED);
        assert!(!l.by_ts.contains_key(&ts(1, 9)) && l.by_ts.contains_key(&ts(1, 10)));
    }
}
