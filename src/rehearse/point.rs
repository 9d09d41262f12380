//! The point `T` a rehearsal compares at, and whether the server keeps history for it
//! long enough.
//!
//! `--at now` (the default) is the newest oplog entry at or before the newest
//! majority-committed write less `--margin` (so every member the read may go to has
//! it, and it cannot roll back); with `--oplog`, no later than that oplog's last
//! entry. `--at V` is a position or time value (`t:i`, RFC 3339, epoch): the state
//! after every entry with `ts <= V` (a time value is second `V` ordinal 0: the state
//! as that second began).
//!
//! The server keeps history for `minSnapshotHistoryWindowInSeconds` (default 300)
//! behind its newest writes: `T` stays readable for about `window - (newest - T)`
//! seconds from the start. The rehearsal refuses to start when its estimate (the
//! rebuild from the inputs' sizes, the reads from the documents to read) does not fit,
//! and checks again with exact counts after the rebuild.

use std::time::Duration;

use crate::oplog::Ts;

use super::error::RehearseError;

/// The server's default `minSnapshotHistoryWindowInSeconds`
/// (`src/mongo/db/storage/storage_parameters.idl`).
pub const DEFAULT_WINDOW_SECS: u64 = 300;

/// Bytes of backup and oplog the embedded engine rebuilds per second, for the
/// estimate: the slower, past-`--memory` rate of docs/performance.md (14-18 MB/s of
/// oplog), rounded down.
pub const REBUILD_BYTES_PER_SEC: u64 = 12_000_000;

/// Documents per second assumed read from production when `--max-read-rate` does
/// not say (docs/rehearse.md has what was measured).
pub const READ_DOCS_PER_SEC: u64 = 20_000;

/// What was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AtSpec {
    Now,
    At(Ts),
}

/// The position `--at now` aims at: `margin` before the newest majority-committed
/// write (its last ordinal: every entry of that second counts).
pub fn now_target(majority: Ts, margin: Duration) -> Ts {
    Ts::new(majority.t.saturating_sub(margin.as_secs() as u32), u32::MAX)
}

/// Checks `at` against the backup, the newest majority write and the history window.
pub fn check(at: Ts, backup_end: Ts, majority: Ts, window_secs: u64) -> Result<(), RehearseError> {
    if at < backup_end {
        return Err(RehearseError::BeforeBackup { at, backup_end });
    }
    if at > majority {
        return Err(RehearseError::AfterNewest {
            at,
            newest: majority,
        });
    }
    if (majority.t as u64).saturating_sub(at.t as u64) > window_secs {
        return Err(RehearseError::BeforeWindow {
            at,
            newest: majority,
            window_secs,
        });
    }
    Ok(())
}

/// Seconds `at` stays readable from the moment the newest majority write was `majority`.
pub fn seconds_left(at: Ts, majority: Ts, window_secs: u64) -> u64 {
    window_secs.saturating_sub((majority.t as u64).saturating_sub(at.t as u64))
}

/// Seconds the rebuild of `bytes` of backup and oplog is expected to take.
pub fn rebuild_secs(bytes: u64) -> u64 {
    bytes.div_ceil(REBUILD_BYTES_PER_SEC)
}

/// Seconds reading `documents` is expected to take at `rate` (documents per second).
pub fn read_secs(documents: u64, rate: Option<u64>) -> u64 {
    documents.div_ceil(rate.unwrap_or(READ_DOCS_PER_SEC).max(1))
}

/// Refuses when `needs` seconds of work do not fit in the `left` seconds `at` stays
/// readable.
pub fn fits(
    what: impl Into<String>,
    at: Ts,
    needs: u64,
    left: u64,
    window_secs: u64,
) -> Result<(), RehearseError> {
    if needs > left {
        return Err(RehearseError::WouldOutlive {
            what: what.into(),
            at,
            needs_secs: needs,
            left_secs: left,
            window_secs,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_point_must_be_after_the_backup_and_within_the_window() {
        let m = Ts::new(1000, 3);
        assert!(check(Ts::new(900, 1), Ts::new(800, 1), m, 300).is_ok());
        assert!(matches!(
            check(Ts::new(700, 1), Ts::new(800, 1), m, 300),
            Err(RehearseError::BeforeBackup { .. })
        ));
        assert!(matches!(
            check(Ts::new(1000, 4), Ts::new(800, 1), m, 300),
            Err(RehearseError::AfterNewest { .. })
        ));
        assert!(matches!(
            check(Ts::new(650, 1), Ts::new(600, 1), m, 300),
            Err(RehearseError::BeforeWindow { .. })
        ));
        assert_eq!(seconds_left(Ts::new(900, 1), m, 300), 200);
        assert_eq!(seconds_left(Ts::new(600, 1), m, 300), 0);
    }

    #[test]
    fn now_is_the_margin_before_the_newest_majority_write() {
        assert_eq!(
            now_target(Ts::new(1000, 3), Duration::from_secs(5)),
            Ts::new(995, u32::MAX)
        );
        assert_eq!(read_secs(45_000, Some(1000)), 45);
        assert_eq!(read_secs(1, None), 1);
        assert!(fits("x", Ts::new(1, 1), 10, 9, 300).is_err());
        assert!(fits("x", Ts::new(1, 1), 9, 9, 300).is_ok());
    }
}
