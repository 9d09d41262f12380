//! How long a local archive's filesystem lasts at the archive's recent growth. An
//! archive that fills its disk stops its archiver, and the capped oplog then rolls
//! over what was not archived: a gap in every restore across it. So `pitr status
//! --archive` says, before that happens, how many days of growth the free space
//! holds, and warns (exit 1) below `--min-disk-time`; `pitr archive` warns in its
//! log too.
//!
//! The growth is what the newest chunks hold over the time they span, up to the last
//! 7 days (a weekly rhythm averages out). It is growth before pruning: an archive
//! pruned to a retention (`pitr archive prune --keep`) stays about its size, and the
//! forecast then says how long the disk lasts if pruning stops.

use std::path::Path;

use serde::Serialize;

use super::manifest::ChunkRecord;

/// The longest history the growth is taken over.
const RATE_WINDOW_SECS: u64 = 7 * 86_400;
/// Less history than this (an archive started minutes ago) forecasts nothing.
const MIN_HISTORY_SECS: u64 = 3_600;

/// The archive's filesystem against its growth.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Disk {
    /// Free bytes on the archive's filesystem, for an unprivileged writer.
    pub free_bytes: u64,
    /// Bytes the archive grew by per day; None with under an hour of history.
    pub growth_per_day: Option<u64>,
    /// The history the growth was measured over (at most 7 days).
    pub growth_over_seconds: Option<u64>,
    /// How long the free bytes hold that growth.
    pub lasts_seconds: Option<u64>,
}

/// The filesystem of the local archive `dir` against the growth of `chunks`; None
/// when its free space cannot be asked.
pub fn disk(dir: &Path, chunks: &[ChunkRecord]) -> Option<Disk> {
    let free_bytes = crate::storage::free_bytes(dir)?;
    Some(forecast(free_bytes, chunks))
}

/// The status line: `disk      312.4 GiB free on its filesystem: about 41 days of
/// the archive's growth (7.6 GiB a day over the last 7 d 0 h)`.
pub fn line(d: &Disk) -> String {
    use crate::size::human;
    match (d.growth_per_day, d.growth_over_seconds, d.lasts_seconds) {
        (Some(0), Some(over), _) => format!(
            "disk      {} free on its filesystem (the archive did not grow over the last {})",
            human(d.free_bytes),
            crate::size::human_secs(over)
        ),
        (Some(per_day), Some(over), Some(lasts)) => format!(
            "disk      {} free on its filesystem: {} of the archive's growth ({} a day over the last {})",
            human(d.free_bytes),
            lasting(lasts),
            human(per_day),
            crate::size::human_secs(over)
        ),
        _ => format!(
            "disk      {} free on its filesystem (under an hour of history: its growth is not forecast yet)",
            human(d.free_bytes)
        ),
    }
}

/// The warning when `d`'s free space lasts less than `min`, naming the directory.
pub fn warning(d: &Disk, dir: &Path, min: std::time::Duration) -> Option<String> {
    let lasts = d.lasts_seconds?;
    (lasts < min.as_secs()).then(|| {
        format!(
            "the filesystem of the oplog archive `{}` has {} free: {} of the archive's growth ({} a day), \
             less than --min-disk-time {}; when it is full the archiver stops, and the oplog rolls over what it \
             did not archive (a gap in every restore across it): free space, move the archive, or prune it \
             (`pitr archive prune --keep ...`)",
            dir.display(),
            crate::size::human(d.free_bytes),
            lasting(lasts),
            crate::size::human(d.growth_per_day.unwrap_or(0)),
            humantime::format_duration(min)
        )
    })
}

/// "about 41 days", "about 9 hours", "about 20 minutes".
fn lasting(secs: u64) -> String {
    match secs {
        s if s >= 2 * 86_400 => format!("about {} days", s / 86_400),
        s if s >= 2 * 3_600 => format!("about {} hours", s / 3_600),
        s if s >= 60 => format!("about {} minutes", s / 60),
        _ => "less than a minute".into(),
    }
}

fn forecast(free_bytes: u64, chunks: &[ChunkRecord]) -> Disk {
    let Some((bytes, secs)) = growth(chunks) else {
        return Disk {
            free_bytes,
            growth_per_day: None,
            growth_over_seconds: None,
            lasts_seconds: None,
        };
    };
    let per_day = (u128::from(bytes) * 86_400 / u128::from(secs)) as u64;
    let lasts = match bytes {
        0 => u64::MAX,
        _ => (u128::from(free_bytes) * u128::from(secs) / u128::from(bytes))
            .min(u128::from(u64::MAX)) as u64,
    };
    Disk {
        free_bytes,
        growth_per_day: Some(per_day),
        growth_over_seconds: Some(secs),
        lasts_seconds: Some(lasts),
    }
}

/// The bytes of the chunks that end within the last [`RATE_WINDOW_SECS`] of the
/// newest one, and the seconds from the first of them to the newest entry; None
/// below [`MIN_HISTORY_SECS`].
fn growth(chunks: &[ChunkRecord]) -> Option<(u64, u64)> {
    let newest = chunks.iter().map(|c| c.last.t).max()?;
    let recent: Vec<&ChunkRecord> = chunks
        .iter()
        .filter(|c| u64::from(newest - c.last.t) < RATE_WINDOW_SECS)
        .collect();
    let from = recent.iter().map(|c| c.first.t).min()?;
    let secs = u64::from(newest - from);
    (secs >= MIN_HISTORY_SECS).then(|| (recent.iter().map(|c| c.bytes).sum(), secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oplog::Ts;

    fn chunk(first: u32, last: u32, bytes: u64) -> ChunkRecord {
        ChunkRecord {
            seq: u64::from(first),
            file: format!("chunks/{first}.bson.gz"),
            first: Ts::new(first, 1),
            last: Ts::new(last, 1),
            entries: 1,
            bson_bytes: bytes,
            bytes,
            crc64: "0".repeat(16),
            first_wall: None,
            last_wall: None,
            written: String::new(),
        }
    }

    #[test]
    fn the_growth_is_the_newest_chunks_over_their_time() {
        let day = 86_400;
        // Ten days of 1 GiB a day, one chunk a day: the last 7 days count (the
        // chunks ending within them), over the time from the first one's start.
        let chunks: Vec<ChunkRecord> = (0..10)
            .map(|d| chunk(d * day, (d + 1) * day - 1, 1 << 30))
            .collect();
        let d = forecast(3 << 30, &chunks);
        let over = d.growth_over_seconds.unwrap();
        assert_eq!(over, 7 * day as u64 - 1);
        let per_day = d.growth_per_day.unwrap();
        assert!(
            (1 << 30..(1 << 30) + (1 << 20)).contains(&per_day),
            "{per_day}"
        );
        let lasts = d.lasts_seconds.unwrap();
        assert!((3 * 86_399..=3 * 86_400).contains(&lasts), "{lasts}");
    }

    #[test]
    fn the_line_and_the_warning_say_how_long() {
        let day = 86_400;
        let chunks: Vec<ChunkRecord> = (0..3)
            .map(|d| chunk(d * day, (d + 1) * day, 2 << 30))
            .collect();
        let d = forecast(5 << 30, &chunks);
        assert_eq!(
            line(&d),
            "disk      5.0 GiB free on its filesystem: about 2 days of the archive's growth (2.0 GiB a day over the last 3 d 0 h)"
        );
        let dir = Path::new("/backup/oplog");
        let week = std::time::Duration::from_secs(7 * 86_400);
        let w = warning(&d, dir, week).unwrap();
        assert!(
            w.starts_with("the filesystem of the oplog archive `/backup/oplog` has 5.0 GiB free: about 2 days of the archive's growth (2.0 GiB a day), less than --min-disk-time 7days;"),
            "{w}"
        );
        assert_eq!(
            warning(&d, dir, std::time::Duration::from_secs(day as u64)),
            None
        );
        assert_eq!(lasting(3 * 3_600), "about 3 hours");
        assert_eq!(lasting(300), "about 5 minutes");
        assert_eq!(lasting(59), "less than a minute");
        // No growth: no forecast of a date, no warning.
        let still = forecast(5, &[chunk(0, 7200, 0)]);
        assert!(
            line(&still).contains("the archive did not grow over the last 2 h 0 min"),
            "{}",
            line(&still)
        );
        assert_eq!(warning(&still, dir, week), None);
    }

    #[test]
    fn too_little_history_forecasts_nothing() {
        let d = forecast(1 << 30, &[chunk(1000, 1000 + 3599, 5 << 30)]);
        assert_eq!((d.growth_per_day, d.lasts_seconds), (None, None));
        assert_eq!(d.free_bytes, 1 << 30);
        assert_eq!(forecast(7, &[]).lasts_seconds, None);
        // An hour is enough; nothing grown lasts for ever.
        let d = forecast(1 << 30, &[chunk(1000, 4600, 0)]);
        assert_eq!(d.lasts_seconds, Some(u64::MAX));
        // Free space far past the growth does not overflow.
        let d = forecast(u64::MAX, &[chunk(0, u32::MAX, 1)]);
        assert!(d.lasts_seconds.unwrap() > 0);
    }
}
