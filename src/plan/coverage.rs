//! Coverage: do the backup and the oplog together hold every entry the restore
//! needs? Pure: decided from a few positions, so every edge is table-tested.
//!
//! The restore applies the backup's data, its own oplog (entries up to its end `E`),
//! then the replay oplog's entries with `E < ts < L` (`L` = the exclusive limit). An
//! oplog dump holds every entry between its first and last ts, and no ts can lie
//! between `x` and `x.successor()`, so:
//!
//! - `L <= E`: the restore point lies inside the backup's own oplog window. Possible
//!   only when the backup has its own oplog and `L` is after its first entry (the
//!   collection files were copied after that); step 2 then replays the backup's
//!   oplog with `--oplogLimit L` and no slice is needed. (A `mongodump --oplog` is
//!   consistent only at its end: see the `fuzzy-restore-point` lint.)
//! - `L == E.successor()`: nothing can lie between the backup's end and the limit;
//!   no slice is needed and the oplog is not consulted.
//! - otherwise the oplog must reach back to the backup's end (`first <= E.successor()`;
//!   ideally it holds the entry at exactly `E`, which proves the two oplogs are the
//!   same history) and forward to the limit (`last.successor() >= L`: an entry at or
//!   after `L` exists, or the last entry is the one just before it). Anything else
//!   is a gap: entries we cannot see might exist there.

use serde::{Deserialize, Serialize};

use crate::error::Hint;
use crate::oplog::Ts;

use super::ts_json;

/// The positions coverage is decided from.
#[derive(Clone, Debug)]
pub struct CoverageInput {
    /// `E`: the last ts the backup's data is complete up to.
    pub backup_end: Ts,
    /// `E` came from `--backup-end`, not from the backup's own oplog.
    pub end_from_flag: bool,
    /// First and last ts of the backup's own oplog (None: it has none, or it is empty).
    pub backup_oplog: Option<(Ts, Ts)>,
    /// First and last ts of the replay oplog (None: empty).
    pub oplog: Option<(Ts, Ts)>,
    /// How errors name the replay oplog.
    pub oplog_name: String,
    /// `L`, exclusive.
    pub limit: Ts,
    /// The replay oplog has an entry at exactly `E`.
    pub anchor_found: bool,
    /// Gaps the replay oplog records (an oplog archive): entries strictly between
    /// the two positions may be missing.
    pub gaps: Vec<(Ts, Ts)>,
    /// The `--until` as typed, when it was a time mapped to an entry (so that an
    /// error names the value the user gave, not only the entry it mapped to).
    pub until: Option<String>,
}

/// Where the restore point lies relative to the backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `L > E`: restore the backup whole, then replay the slice `E < ts < L`.
    AfterBackup,
    /// `L <= E`: replay the backup's own oplog with `--oplogLimit L`; no slice.
    WithinBackupOplog,
}

/// The verdict, as recorded in the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    pub mode: Mode,
    #[serde(deserialize_with = "ts_json::de")]
    pub backup_end: Ts,
    #[serde(deserialize_with = "ts_json::de")]
    pub limit: Ts,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub oplog_first: Option<Ts>,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub oplog_last: Option<Ts>,
    /// Entries may exist strictly between the backup's end and the limit, so the
    /// replay oplog had to cover that range (false: nothing can be there).
    pub oplog_needed: bool,
    /// The replay oplog holds the entry at exactly the backup's end (null when that
    /// is not expected: `--backup-end`, or the oplog starts right after it, or it
    /// was not needed).
    pub anchored: Option<bool>,
}

/// A gap, or a restore point the backup cannot reach.
#[derive(Debug, thiserror::Error)]
pub enum CoverageError {
    #[error("the restore point {limit} ({}{}) is not after the backup's end {backup_end} ({}), and the backup has no oplog of its own to stop inside", limit.utc_string(), typed(until), backup_end.utc_string())]
    BeforeBackup {
        limit: Ts,
        backup_end: Ts,
        until: Option<String>,
    },

    #[error("the restore point {limit} ({}{}) is not after the first entry of the backup's own oplog {backup_first} ({}): the backup's collection files may already hold later writes", limit.utc_string(), typed(until), backup_first.utc_string())]
    BeforeBackupData {
        limit: Ts,
        backup_first: Ts,
        until: Option<String>,
    },

    #[error("coverage gap: `{oplog}` is empty, but entries after the backup's end {backup_end} ({}) up to the limit {limit} ({}) are needed", backup_end.utc_string(), limit.utc_string())]
    EmptyOplog {
        oplog: String,
        backup_end: Ts,
        limit: Ts,
    },

    #[error("coverage gap: the backup ends at {backup_end} ({}) but `{oplog}` starts at {oplog_first} ({}); entries between them are missing", backup_end.utc_string(), oplog_first.utc_string())]
    GapAtStart {
        oplog: String,
        backup_end: Ts,
        oplog_first: Ts,
    },

    #[error("coverage gap: `{oplog}` ends at {last} ({}) but the limit is {limit} ({}); entries between them are unknown", last.utc_string(), limit.utc_string())]
    GapAtEnd { oplog: String, last: Ts, limit: Ts },

    #[error(
        "coverage gap: the oplog archive `{oplog}` recorded a gap after {after} ({}) and before {before} ({}), inside the range the restore needs (after the backup's end {backup_end} ({}), before the limit {limit} ({})): entries in it may be missing",
        after.utc_string(), before.utc_string(), backup_end.utc_string(), limit.utc_string()
    )]
    ArchiveGap {
        oplog: String,
        after: Ts,
        before: Ts,
        backup_end: Ts,
        limit: Ts,
    },

    #[error("coverage gap: --until `{until}` is after the last entry {last} ({}) of the backup and `{oplog}`; what happened up to then is unknown", last.utc_string())]
    UntilAfterOplog {
        until: String,
        oplog: String,
        last: Ts,
    },
}

/// `; --until `X` stands for ...` when the limit came from a time the user typed.
fn typed(until: &Option<String>) -> String {
    match until {
        Some(u) => format!(
            "; --until `{u}` stands for the first oplog entry at or after it, and the backup's oplog holds none earlier"
        ),
        None => String::new(),
    }
}

impl Hint for CoverageError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            CoverageError::BeforeBackup { .. } | CoverageError::BeforeBackupData { .. } => {
                "a backup cannot be rolled back: restore from an older backup, or choose a later --until \
                 (a time given to --until stands for the first oplog entry at or after it)"
                    .into()
            }
            CoverageError::EmptyOplog { .. } | CoverageError::GapAtStart { .. } => {
                "use an oplog dump that reaches back to the backup's end: dump the replica set's oplog again while its \
                 window still covers it (`mongodump -d local -c oplog.rs`), or restore from a newer backup"
                    .into()
            }
            CoverageError::ArchiveGap { after, before, .. } => format!(
                "the archiver was stopped (or fell behind) longer than the oplog window, and the entries written \
                 in between were never archived; restore to a point before {after} (`--until {}` or earlier), or \
                 from a backup taken after {before}",
                after.successor()
            ),
            CoverageError::GapAtEnd { last, .. } | CoverageError::UntilAfterOplog { last, .. } => format!(
                "dump the oplog again so it reaches past the restore point, or replay everything it holds with \
                 `--until end` (= {})",
                last.successor()
            ),
        })
    }
}

/// Decides coverage; see the module documentation for the rules.
pub fn check(inp: &CoverageInput) -> Result<Coverage, CoverageError> {
    let (e, l) = (inp.backup_end, inp.limit);
    let mut c = Coverage {
        mode: Mode::AfterBackup,
        backup_end: e,
        limit: l,
        oplog_first: inp.oplog.map(|o| o.0),
        oplog_last: inp.oplog.map(|o| o.1),
        oplog_needed: false,
        anchored: None,
    };
    if l <= e {
        return match inp.backup_oplog {
            None => Err(CoverageError::BeforeBackup {
                limit: l,
                backup_end: e,
                until: inp.until.clone(),
            }),
            Some((first, _)) if l <= first => Err(CoverageError::BeforeBackupData {
                limit: l,
                backup_first: first,
                until: inp.until.clone(),
            }),
            Some(_) => {
                c.mode = Mode::WithinBackupOplog;
                Ok(c)
            }
        };
    }
    if l <= e.successor() {
        return Ok(c);
    }
    c.oplog_needed = true;
    let Some((first, last)) = inp.oplog else {
        return Err(CoverageError::EmptyOplog {
            oplog: inp.oplog_name.clone(),
            backup_end: e,
            limit: l,
        });
    };
    if first > e.successor() {
        return Err(CoverageError::GapAtStart {
            oplog: inp.oplog_name.clone(),
            backup_end: e,
            oplog_first: first,
        });
    }
    if last.successor() < l {
        return Err(CoverageError::GapAtEnd {
            oplog: inp.oplog_name.clone(),
            last,
            limit: l,
        });
    }
    // A gap the archive recorded inside (E, L): entries there may be missing, even
    // though the first and last entries read reach both ends.
    if let Some(&(after, before)) = inp
        .gaps
        .iter()
        .find(|(a, b)| (*a).max(e).successor() < (*b).min(l))
    {
        return Err(CoverageError::ArchiveGap {
            oplog: inp.oplog_name.clone(),
            after,
            before,
            backup_end: e,
            limit: l,
        });
    }
    if !inp.end_from_flag && first <= e {
        c.anchored = Some(inp.anchor_found);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(t: u32, i: u32) -> Ts {
        Ts::new(t, i)
    }

    fn input(limit: Ts, oplog: Option<(Ts, Ts)>) -> CoverageInput {
        CoverageInput {
            backup_end: ts(100, 5),
            end_from_flag: false,
            backup_oplog: Some((ts(90, 1), ts(100, 5))),
            oplog,
            oplog_name: "oplog.bson".into(),
            limit,
            anchor_found: true,
            gaps: Vec::new(),
            until: None,
        }
    }

    #[test]
    fn table() {
        use CoverageError as E;
        let full = Some((ts(80, 1), ts(200, 3)));
        // (limit, oplog) -> Ok(mode, oplog_needed) or the error's name
        type Case = (Ts, Option<(Ts, Ts)>, Result<(Mode, bool), &'static str>);
        let cases: Vec<Case> = vec![
            (ts(150, 0), full, Ok((Mode::AfterBackup, true))),
            // An entry exactly at the limit, or the last entry just before it.
            (ts(200, 3), full, Ok((Mode::AfterBackup, true))),
            (ts(200, 4), full, Ok((Mode::AfterBackup, true))),
            (ts(200, 5), full, Err("GapAtEnd")),
            (ts(201, 0), full, Err("GapAtEnd")),
            // Starting right after the backup's end is no gap; one later is.
            (
                ts(150, 0),
                Some((ts(100, 6), ts(200, 3))),
                Ok((Mode::AfterBackup, true)),
            ),
            (
                ts(150, 0),
                Some((ts(100, 7), ts(200, 3))),
                Err("GapAtStart"),
            ),
            (
                ts(150, 0),
                Some((ts(120, 1), ts(200, 3))),
                Err("GapAtStart"),
            ),
            (ts(150, 0), None, Err("EmptyOplog")),
            // Nothing can lie between the backup's end and its successor.
            (ts(100, 6), None, Ok((Mode::AfterBackup, false))),
            // Inside the backup's own oplog window.
            (ts(100, 5), None, Ok((Mode::WithinBackupOplog, false))),
            (ts(95, 0), None, Ok((Mode::WithinBackupOplog, false))),
            (ts(90, 2), None, Ok((Mode::WithinBackupOplog, false))),
            (ts(90, 1), None, Err("BeforeBackupData")),
            (ts(10, 0), full, Err("BeforeBackupData")),
        ];
        for (limit, oplog, want) in cases {
            let got = check(&input(limit, oplog));
            match (&got, &want) {
                (Ok(c), Ok((mode, needed))) => {
                    assert_eq!((c.mode, c.oplog_needed), (*mode, *needed), "limit {limit}")
                }
                (Err(e), Err(name)) => {
                    let dbg = format!("{e:?}");
                    assert!(dbg.starts_with(name), "limit {limit}: {dbg}");
                    assert!(e.hint().is_some());
                }
                _ => panic!("limit {limit} oplog {oplog:?}: got {got:?}, want {want:?}"),
            }
        }
        let mut no_backup_oplog = input(ts(100, 5), full);
        no_backup_oplog.backup_oplog = None;
        assert!(matches!(
            check(&no_backup_oplog),
            Err(E::BeforeBackup { .. })
        ));
    }

    #[test]
    fn recorded_gaps_inside_the_needed_range_are_named() {
        // Backup end 100:5, oplog 80:1 .. 200:3; a gap after 150:1 before 160:1.
        let mut i = input(ts(170, 0), Some((ts(80, 1), ts(200, 3))));
        i.gaps = vec![(ts(150, 1), ts(160, 1))];
        let e = check(&i).unwrap_err();
        assert!(matches!(e, CoverageError::ArchiveGap { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("150:1") && msg.contains("160:1"), "{msg}");
        assert!(
            e.hint().unwrap().contains("--until 150:2"),
            "{:?}",
            e.hint()
        );
        // A limit before the gap, or right after its start: nothing missing.
        i.limit = ts(150, 0);
        assert!(check(&i).is_ok());
        i.limit = ts(150, 2);
        assert!(check(&i).is_ok());
        i.limit = ts(150, 3);
        assert!(check(&i).is_err());
        // A backup ending at the gap's end (or after it) does not need it.
        let mut i = input(ts(170, 0), Some((ts(80, 1), ts(200, 3))));
        i.backup_end = ts(160, 0);
        i.gaps = vec![(ts(150, 1), ts(160, 1))];
        assert!(check(&i).is_ok());
        i.backup_end = ts(159, 9);
        i.gaps = vec![(ts(150, 1), ts(160, 1))];
        assert!(check(&i).is_err());
    }

    #[test]
    fn anchor_and_messages() {
        let mut i = input(ts(150, 0), Some((ts(80, 1), ts(200, 3))));
        assert_eq!(check(&i).unwrap().anchored, Some(true));
        i.anchor_found = false;
        assert_eq!(check(&i).unwrap().anchored, Some(false));
        i.end_from_flag = true;
        assert_eq!(check(&i).unwrap().anchored, None);
        let e = check(&input(ts(150, 0), Some((ts(120, 1), ts(200, 3))))).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("100:5 (1970-01-01T00:01:40Z)")
                && msg.contains("120:1 (1970-01-01T00:02:00Z)"),
            "{msg}"
        );
        let e = check(&input(ts(201, 0), Some((ts(80, 1), ts(200, 3))))).unwrap_err();
        assert!(
            e.hint().unwrap().contains("--until end` (= 200:4)"),
            "{:?}",
            e.hint()
        );
    }
}
