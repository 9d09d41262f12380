//! The first pass over an oplog: its range and sortedness, the entries the plan
//! needs to look up (the restore point, `--skip` positions, the backup's end), the
//! transactions `--ns` selects, and the destructive operations (for `--until auto`
//! and the lint). Memory is constant apart from those few lookups.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::forensics::seen::Seen;
use crate::forensics::{BurstRule, Catalog, Finding, Scanner};
use crate::oplog::entry::as_i64;
use crate::oplog::oplog_archive::ChunkRange;
use crate::oplog::reader::not_an_entry;
use crate::oplog::source::recorded_gaps;
use crate::oplog::{self, Entry, EntryError, ReadOptions, Truncation, Ts};

use super::error::PlanError;
use super::filter::{target, NsFilter, Target};
use super::history::{Lookup, Remembered};
use super::{ts_json, Progress};
use crate::engine::walk::txn_key;

/// One oplog entry, as the plan names it. JSON: `ts`, `op`, `ns`, `command` (first
/// key of `o` for commands, else null), `target` (the namespace a command acts on:
/// `db.coll`, a rename's destination, the database of a dropDatabase), `num_records`
/// (`o2.numRecords`, or null), `wall` (RFC 3339 UTC with milliseconds, or null),
/// `transaction` (part of a multi-document transaction).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRef {
    #[serde(deserialize_with = "ts_json::de")]
    pub ts: Ts,
    pub op: String,
    pub ns: String,
    pub command: Option<String>,
    pub target: Option<String>,
    pub num_records: Option<i64>,
    pub wall: Option<String>,
    pub transaction: bool,
}

impl EntryRef {
    pub fn of(e: &Entry<'_>) -> EntryRef {
        EntryRef {
            ts: e.ts,
            op: e.op.as_str().to_string(),
            ns: e.ns.to_string(),
            command: e.command_name().map(str::to_string),
            target: match target(e) {
                Target::Ns(ns) => Some(ns),
                Target::Rename(_, to) => Some(to),
                Target::Database(db) => Some(db),
                Target::Other => None,
            },
            num_records: e
                .o2
                .and_then(|o2| o2.get("numRecords").ok().flatten())
                .and_then(as_i64),
            wall: e
                .wall()
                .map(|w| w.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            transaction: txn_key(e).is_some(),
        }
    }

    /// `ts op ns` plus the command, for messages: `1700000000:3 c shop.$cmd drop shop.orders`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.ts, self.what())
    }

    /// [`EntryRef::describe`] without the ts: `c shop.$cmd drop shop.orders`.
    pub fn what(&self) -> String {
        let mut s = format!(
            "{} {}",
            self.op,
            if self.ns.is_empty() { "\"\"" } else { &self.ns }
        );
        if let Some(c) = &self.command {
            s.push(' ');
            s.push_str(c);
            if let Some(t) = &self.target {
                s.push(' ');
                s.push_str(t);
            }
        }
        s
    }
}

/// What to look for during the pass.
#[derive(Default)]
pub struct Probe<'a> {
    /// Find the first entry (lowest ts) with `ts >= target`.
    pub target: Option<Ts>,
    /// Positions to look up exactly.
    pub positions: HashSet<Ts>,
    /// Collect the transactions touching these namespaces.
    pub ns_filter: Option<&'a NsFilter>,
    /// Run the destructive-operation scanner.
    pub findings: bool,
    /// What the backup's metadata says (TTL indexes, capped and time-series
    /// collections), so that routine operations are told from incidents.
    pub catalog: Option<&'a Catalog>,
    /// For an oplog archive: read only the chunks from the one holding this position
    /// (the backup's end) on, widened by [`ARCHIVE_MARGIN_SECS`] so that a burst
    /// crossing it is seen whole. Other sources are read whole.
    pub chunks_from: Option<Ts>,
    /// Remember the last entries' hashes (the backup's own oplog), so that the
    /// replay oplog can be compared with them ([`super::history`]).
    pub remember: bool,
    /// Compare the entries with the backup oplog's remembered ones.
    pub history: Option<&'a RefCell<Lookup>>,
    /// For an oplog archive: read only the chunks up to the one holding the first
    /// entry at or after this position (the limit a time `--until` names), widened by
    /// [`ARCHIVE_MARGIN_SECS`]; later chunks are not needed, and may be missing.
    pub chunks_to: Option<Ts>,
    /// Record the namespaces the oplog acts on ([`OplogScan::seen`]) without a
    /// filter: the collections it never names stay in the backup's files
    /// ([`crate::engine::replica::cold`]).
    pub seen: bool,
}

/// How far before [`Probe::chunks_from`] (and after [`Probe::chunks_to`]) an oplog
/// archive is read.
pub const ARCHIVE_MARGIN_SECS: u32 = 15 * 60;

/// The result of [`scan`].
#[derive(Debug, Default)]
pub struct OplogScan {
    pub name: String,
    pub entries: u64,
    pub first_ts: Option<Ts>,
    pub last_ts: Option<Ts>,
    /// Entries whose ts is lower than their predecessor's.
    pub out_of_order: u64,
    /// Entries whose ts equals their predecessor's (overlapping dumps concatenated).
    pub duplicates: u64,
    pub at_or_after_target: Option<EntryRef>,
    pub found: HashMap<Ts, EntryRef>,
    /// Keys (lsid + txnNumber) of transactions with an operation on a `--ns` namespace.
    pub ns_txn_keys: HashSet<Vec<u8>>,
    pub findings: Vec<Finding>,
    pub truncation: Option<Truncation>,
    /// Gaps an oplog archive recorded: entries strictly between the two positions
    /// may be missing.
    pub gaps: Vec<(Ts, Ts)>,
    /// With [`Probe::remember`]: the last entries' hashes.
    pub remembered: Remembered,
    /// With [`Probe::ns_filter`] or [`Probe::seen`]: the namespaces the oplog acts on.
    pub seen: Seen,
    /// Where the bytes are, by ts: a slice's size before it is written.
    pub sizes: SizeSamples,
    /// The bytes by ts in whatever order the entries came: an upper bound for an
    /// oplog out of order, whose slice is sorted through a file.
    pub by_time: BytesByTime,
}

impl OplogScan {
    /// First and last ts, when there are entries.
    pub fn range(&self) -> Option<(Ts, Ts)> {
        Some((self.first_ts?, self.last_ts?))
    }

    /// This oplog holds exactly the entries of the backup's own oplog (the same
    /// count, first and last position): most likely the backup itself, or its
    /// `oplog.bson`, given as the oplog. Such a restore ends where the backup does.
    pub fn is_the_backups_own(&self, backup: Option<&OplogScan>) -> bool {
        backup.is_some_and(|b| {
            self.entries > 0 && self.entries == b.entries && self.range() == b.range()
        })
    }
}

/// Some entries' ts and the bytes before them in the oplog: the size of the
/// entries between two positions, known before they are read again (the progress
/// of the embedded engine's apply, which reads the slice as it is written). Every
/// entry at first; past [`SizeSamples::MAX`] samples, every other one is let go
/// and the step doubles (at most 1 MiB whatever the oplog's size). Only meaningful
/// for an oplog in ts order.
#[derive(Clone, Debug)]
pub struct SizeSamples {
    points: Vec<(Ts, u64)>,
    step: u64,
    total: u64,
}

impl Default for SizeSamples {
    fn default() -> Self {
        SizeSamples {
            points: Vec::new(),
            step: 1,
            total: 0,
        }
    }
}

impl SizeSamples {
    const MAX: usize = 1 << 16;

    /// The `n`th entry (1-based) read: `ts`, `len` bytes.
    fn see(&mut self, n: u64, ts: Ts, len: usize) {
        if (n - 1).is_multiple_of(self.step) {
            if self.points.len() == Self::MAX {
                let mut keep = false;
                self.points.retain(|_| {
                    keep = !keep;
                    keep
                });
                self.step *= 2;
            }
            if (n - 1).is_multiple_of(self.step) {
                self.points.push((ts, self.total));
            }
        }
        self.total += len as u64;
    }

    /// At least the bytes of the entries with `from < ts < to` (at most one step
    /// of entries more at each end), in an oplog read in ts order.
    pub fn between(&self, from: Ts, to: Ts) -> u64 {
        // Every entry before the first sample at or after `to` ...
        let i = self.points.partition_point(|p| p.0 < to);
        let upto = self.points.get(i).map_or(self.total, |p| p.1);
        // ... less those before the last sample at or before `from`.
        let j = self.points.partition_point(|p| p.0 <= from);
        let before = j.checked_sub(1).map_or(0, |j| self.points[j].1);
        upto.saturating_sub(before)
    }
}

/// The entries' bytes by the seconds of their `ts`, in buckets of `width`
/// seconds (doubled whenever more than [`BytesByTime::MAX`] buckets would be
/// needed, so memory stays small whatever the oplog's span), whatever the order
/// the entries came in: [`BytesByTime::at_most_between`] bounds a slice's size
/// where [`SizeSamples`], which assume ts order, cannot.
#[derive(Clone, Debug)]
pub struct BytesByTime {
    width: u32,
    /// Bucket (`ts.t / width`) -> bytes.
    buckets: std::collections::BTreeMap<u32, u64>,
    /// The bucket the last entries fell in, and their bytes not yet added to
    /// `buckets` (entries in ts order mostly share one).
    open: Option<(u32, u64)>,
}

impl Default for BytesByTime {
    fn default() -> Self {
        BytesByTime {
            width: 1,
            buckets: Default::default(),
            open: None,
        }
    }
}

impl BytesByTime {
    const MAX: usize = 1 << 12;

    fn see(&mut self, ts: Ts, len: usize) {
        let b = ts.t / self.width;
        match &mut self.open {
            Some((open, bytes)) if *open == b => *bytes += len as u64,
            _ => {
                // Closing may coarsen the buckets: the key is taken again after.
                self.close();
                self.open = Some((ts.t / self.width, len as u64));
            }
        }
    }

    /// Adds the open bucket's bytes, coarsening while there are too many buckets.
    fn close(&mut self) {
        let Some((b, bytes)) = self.open.take() else {
            return;
        };
        *self.buckets.entry(b).or_default() += bytes;
        while self.buckets.len() > Self::MAX {
            self.width = self.width.saturating_mul(2);
            let old = std::mem::take(&mut self.buckets);
            for (k, v) in old {
                *self.buckets.entry(k / 2).or_default() += v;
            }
        }
    }

    /// At least the bytes of the entries with `from < ts < to` (those of the
    /// entries in the same buckets as `from` and `to` too).
    pub fn at_most_between(&self, from: Ts, to: Ts) -> u64 {
        let (lo, hi) = (from.t / self.width, to.t / self.width);
        let open = match self.open {
            Some((b, bytes)) if (lo..=hi).contains(&b) => bytes,
            _ => 0,
        };
        open + self.buckets.range(lo..=hi).map(|(_, v)| v).sum::<u64>()
    }
}

/// Reads the whole oplog at `spec` once.
pub fn scan(
    spec: &str,
    opts: ReadOptions,
    probe: &Probe<'_>,
    progress: &dyn Progress,
    what: &str,
) -> Result<OplogScan, PlanError> {
    let range = ChunkRange {
        from: probe
            .chunks_from
            .map(|t| Ts::new(t.t.saturating_sub(ARCHIVE_MARGIN_SECS), 0)),
        to: probe
            .chunks_to
            .map(|t| Ts::new(t.t.saturating_add(ARCHIVE_MARGIN_SECS), 0)),
    };
    let opened = progress.opening(spec);
    let r = oplog::open_range(spec, opts, &range);
    opened(r.is_ok());
    let mut r = r?;
    let (counter, total) = r.progress();
    let mut tick = progress.pass(what, counter, total);
    let mut scanner = probe.findings.then(|| {
        Scanner::with_catalog(
            BurstRule::default(),
            probe.catalog.cloned().unwrap_or_default(),
        )
    });
    let mut s = OplogScan {
        name: r.name().to_string(),
        gaps: recorded_gaps(spec)?
            .iter()
            .map(|g| (g.after, g.before))
            .collect(),
        ..OplogScan::default()
    };
    let mut prev: Option<Ts> = None;
    // A few positions, looked up once per entry: sorted, searched without hashing.
    let mut positions: Vec<Ts> = probe.positions.iter().copied().collect();
    positions.sort_unstable();
    while let Some(e) = r.next_entry()? {
        s.entries += 1;
        if s.entries.is_multiple_of(8192) {
            tick();
            crate::engine::replica::interrupt::check()?;
        }
        let ts = e.ts;
        s.first_ts = Some(s.first_ts.map_or(ts, |f| f.min(ts)));
        s.last_ts = Some(s.last_ts.map_or(ts, |l| l.max(ts)));
        match prev {
            Some(p) if ts < p => s.out_of_order += 1,
            Some(p) if ts == p => s.duplicates += 1,
            _ => {}
        }
        prev = Some(ts);
        s.sizes.see(s.entries, ts, e.raw.as_bytes().len());
        s.by_time.see(ts, e.raw.as_bytes().len());
        if let Some(t) = probe.target {
            if ts >= t && s.at_or_after_target.as_ref().is_none_or(|b| ts < b.ts) {
                s.at_or_after_target = Some(EntryRef::of(&e));
            }
        }
        if probe.remember {
            s.remembered.push(ts, e.raw.as_bytes());
        }
        if probe.ns_filter.is_some() || probe.seen {
            let (offset, index) = (e.offset, e.index);
            s.seen
                .feed_entry(&e)
                .map_err(|err| PlanError::from(not_an_entry(s.name.clone(), offset, index, err)))?;
        }
        if let Some(h) = probe.history {
            h.borrow_mut().see(ts, e.raw.as_bytes());
        }
        if positions.binary_search(&ts).is_ok() && !s.found.contains_key(&ts) {
            s.found.insert(ts, EntryRef::of(&e));
        }
        let (offset, index) = (e.offset, e.index);
        let fail =
            |err: EntryError| PlanError::from(not_an_entry(s.name.clone(), offset, index, err));
        if let Some(f) = probe.ns_filter {
            if e.command_name() == Some("applyOps") {
                if let Some(key) = txn_key(&e) {
                    if !s.ns_txn_keys.contains(&key) && touches(&e, f).map_err(fail)? {
                        s.ns_txn_keys.insert(key);
                    }
                }
            }
        }
        if let Some(sc) = scanner.as_mut() {
            sc.feed(&e).map_err(fail)?;
        }
    }
    s.truncation = r.truncation().cloned();
    if let Some(sc) = scanner {
        s.findings = sc.finish().0;
    }
    Ok(s)
}

/// True when any leaf of `e` acts on a namespace `f` selects.
pub fn touches(e: &Entry<'_>, f: &NsFilter) -> Result<bool, EntryError> {
    let mut hit = false;
    e.for_each_leaf(&mut |l: &Entry<'_>| -> Result<(), EntryError> {
        if !hit && f.leaf_matches(l, std::iter::empty()) == Some(true) {
            hit = true;
        }
        Ok(())
    })?;
    Ok(hit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Quiet;
    use bson::{doc, Bson, Document, Timestamp};

    fn ts(t: u32, i: u32) -> Bson {
        Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    fn write(dir: &std::path::Path, docs: &[Document]) -> String {
        let p = dir.join("o.bson");
        let mut b = Vec::new();
        for d in docs {
            b.extend(bson::to_vec(d).unwrap());
        }
        std::fs::write(&p, b).unwrap();
        p.display().to_string()
    }

    /// The estimate holds the entries between the two positions, and, past the
    /// samples' cap, stays within a few steps of them.
    #[test]
    fn sizes_between_two_positions() {
        let mut s = SizeSamples::default();
        let n = 3 * SizeSamples::MAX as u64 + 17;
        for k in 1..=n {
            s.see(k, Ts::new(k as u32, 0), 100);
        }
        assert_eq!(s.step, 4);
        assert!(s.points.len() <= SizeSamples::MAX);
        assert_eq!(s.between(Ts::new(0, 0), Ts::new(u32::MAX, 0)), n * 100);
        for (from, to) in [(10u64, 20u64), (1000, 150_000), (5, n - 3), (7, 8)] {
            let exact = (to - from - 1) * 100;
            let got = s.between(Ts::new(from as u32, 0), Ts::new(to as u32, 0));
            assert!(
                got >= exact && got <= exact + 2 * 4 * 100,
                "{from}..{to}: {got} for {exact}"
            );
        }
        // After the last entry: at most a step.
        assert!(s.between(Ts::new(n as u32, 0), Ts::new(u32::MAX, 0)) <= 4 * 100);
        assert_eq!(s.between(Ts::new(0, 0), Ts::new(1, 0)), 0);
    }

    #[test]
    fn range_order_lookups_and_transactions() {
        let d = tempfile::tempdir().unwrap();
        let path = write(
            d.path(),
            &[
                doc! { "ts": ts(10, 1), "op": "i", "ns": "a.b", "o": { "_id": 1 } },
                doc! { "ts": ts(12, 1), "op": "i", "ns": "a.b", "o": { "_id": 2 } },
                doc! { "ts": ts(11, 5), "op": "c", "ns": "a.$cmd", "o": { "drop": "b" }, "o2": { "numRecords": 2 } },
                doc! { "ts": ts(11, 5), "op": "n", "ns": "", "o": {} },
                doc! { "ts": ts(13, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": 1 }, "txnNumber": 1i64,
                "o": { "applyOps": [ { "op": "i", "ns": "x.y", "o": { "_id": 1 } } ] } },
                doc! { "ts": ts(14, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": 1 }, "txnNumber": 2i64,
                "o": { "applyOps": [ { "op": "i", "ns": "a.b", "o": { "_id": 1 } } ] } },
            ],
        );
        let f = NsFilter::new(&["a.*".into()]).unwrap().unwrap();
        let probe = Probe {
            target: Some(Ts::new(11, 0)),
            positions: [Ts::new(12, 1), Ts::new(99, 1)].into_iter().collect(),
            ns_filter: Some(&f),
            findings: true,
            catalog: None,
            chunks_from: None,
            ..Probe::default()
        };
        let s = scan(&path, ReadOptions::default(), &probe, &Quiet, "test").unwrap();
        assert_eq!(
            (s.entries, s.range()),
            (6, Some((Ts::new(10, 1), Ts::new(14, 1))))
        );
        assert_eq!(
            s.sizes.between(Ts::new(0, 0), Ts::new(99, 0)),
            std::fs::metadata(&path).unwrap().len()
        );
        assert_eq!((s.out_of_order, s.duplicates), (1, 1));
        assert_eq!(
            s.by_time.at_most_between(Ts::new(0, 0), Ts::new(99, 0)),
            std::fs::metadata(&path).unwrap().len()
        );
        let at = s.at_or_after_target.unwrap();
        assert_eq!(at.describe(), "11:5 c a.$cmd drop a.b");
        assert_eq!(at.num_records, Some(2));
        assert!(s.found.contains_key(&Ts::new(12, 1)) && !s.found.contains_key(&Ts::new(99, 1)));
        assert_eq!(s.ns_txn_keys.len(), 1);
        assert_eq!(s.findings.len(), 1);
    }

    /// An oplog out of order: the bytes between two positions bounded whatever the
    /// order, exact to the bucket; a long span coarsens the buckets, never losing a
    /// byte.
    #[test]
    fn bytes_by_time_bound_a_range_in_any_order_and_stay_small() {
        let mut b = BytesByTime::default();
        for (t, len) in [(10, 100), (30, 300), (20, 200), (10, 1)] {
            b.see(Ts::new(t, 1), len);
        }
        assert_eq!(b.at_most_between(Ts::new(10, 5), Ts::new(20, 0)), 301);
        assert_eq!(b.at_most_between(Ts::new(11, 0), Ts::new(19, 0)), 0);
        assert_eq!(b.at_most_between(Ts::new(0, 0), Ts::new(99, 0)), 601);
        // One entry a second over three times as many seconds as buckets, backwards.
        let mut b = BytesByTime::default();
        let n = 3 * BytesByTime::MAX as u32;
        for t in (0..n).rev() {
            b.see(Ts::new(t, 1), 10);
        }
        b.close();
        assert!(
            b.buckets.len() <= BytesByTime::MAX && b.width >= 2,
            "{} buckets of {} s",
            b.buckets.len(),
            b.width
        );
        assert_eq!(
            b.at_most_between(Ts::new(0, 0), Ts::new(n, 0)),
            10 * n as u64
        );
        let some = b.at_most_between(Ts::new(100, 0), Ts::new(200, 0));
        let slack = 2 * b.width as u64;
        assert!((990..=10 * (101 + slack)).contains(&some), "{some}");
    }
}
