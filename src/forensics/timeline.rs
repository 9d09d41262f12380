//! Oplog statistics: the window an oplog covers, entries by op and namespace, and
//! an activity timeline in fixed buckets (by oplog second, not wall clock), so that
//! an incident (a spike of deletes or commands) stands out.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::oplog::{Entry, Op, Ts};

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    pub total: u64,
    pub inserts: u64,
    pub updates: u64,
    pub deletes: u64,
    pub commands: u64,
    pub noops: u64,
    pub other: u64,
}

impl Counts {
    /// Counts a leaf operation (inside applyOps, each op counts).
    fn add(&mut self, op: Op<'_>) {
        self.total += 1;
        match op {
            Op::Insert => self.inserts += 1,
            Op::Update => self.updates += 1,
            Op::Delete => self.deletes += 1,
            Op::Command => self.commands += 1,
            Op::Noop => self.noops += 1,
            Op::Other(_) => self.other += 1,
        }
    }
}

/// Bucket sizes the timeline chooses from, each a multiple of the one before, so that
/// buckets merge exactly when the accumulator coarsens ([`Stats::auto`]): seconds to
/// a day, then 7, 28 and 364 days (an oplog dump can span decades: mongo-tools'
/// test dump `dump_local_oplog` has an entry at ts `0:1` and others in 2015).
pub const NICE: [u32; 16] = [
    1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400, 604800, 2419200, 31449600,
];

/// At most this many buckets with activity are held, whatever the oplog's time
/// span: memory is bounded by it (each is a few dozen bytes), and so is the printed
/// timeline (at most twice as many rows: a run of empty buckets is one row).
pub const MAX_BUCKETS: usize = 10_000;

/// A fixed `--bucket` would need more than [`MAX_BUCKETS`] buckets with activity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyBuckets {
    pub bucket_secs: u32,
    /// The oplog seconds seen so far, first and last.
    pub first: u32,
    pub last: u32,
}

/// How [`Stats`] chooses its buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sizing {
    /// The size the user asked for; more than [`MAX_BUCKETS`] with activity is
    /// refused.
    Fixed,
    /// From 1 s up along [`NICE`], coarsened whenever more than [`MAX_BUCKETS`]
    /// have activity.
    Auto,
}

/// Accumulates statistics over a stream of entries in bounded memory: per namespace,
/// and per bucket with activity (at most [`MAX_BUCKETS`] of them; empty buckets are
/// never stored, so the time span costs nothing).
pub struct Stats {
    bucket_secs: u32,
    sizing: Sizing,
    /// Set when a fixed bucket size met its cap; buckets are no longer added.
    overflow: Option<TooManyBuckets>,
    pub entries: u64,
    pub first: Option<(Ts, Option<i64>)>,
    pub last: Option<(Ts, Option<i64>)>,
    /// Top-level entries by op.
    pub by_op: Counts,
    /// Leaf operations (applyOps expanded) by namespace.
    pub by_ns: HashMap<String, Counts>,
    /// Leaf operations by bucket start second (buckets with activity only).
    pub buckets: BTreeMap<u32, Counts>,
}

/// One row of the timeline: a bucket, or a run of empty buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Start second of the (first) bucket.
    pub start: u32,
    /// How many buckets the row stands for: 1 for a bucket, more for a run of empty
    /// ones collapsed into one row.
    pub buckets: u64,
    pub counts: Counts,
}

impl Counts {
    fn merge(&mut self, c: &Counts) {
        self.total += c.total;
        self.inserts += c.inserts;
        self.updates += c.updates;
        self.deletes += c.deletes;
        self.commands += c.commands;
        self.noops += c.noops;
        self.other += c.other;
    }
}

impl Stats {
    /// Buckets of exactly `bucket_secs` (at least 1); see [`Stats::overflow`].
    pub fn new(bucket_secs: u32) -> Stats {
        Stats::with(bucket_secs.max(1), Sizing::Fixed)
    }

    /// Buckets as fine as [`MAX_BUCKETS`] allows (starting at 1 s, coarsened along
    /// [`NICE`]); regroup into a coarser [`NICE`] size with [`Stats::timeline`].
    pub fn auto() -> Stats {
        Stats::with(NICE[0], Sizing::Auto)
    }

    fn with(bucket_secs: u32, sizing: Sizing) -> Stats {
        Stats {
            bucket_secs,
            sizing,
            overflow: None,
            entries: 0,
            first: None,
            last: None,
            by_op: Counts::default(),
            by_ns: HashMap::new(),
            buckets: BTreeMap::new(),
        }
    }

    pub fn bucket_secs(&self) -> u32 {
        self.bucket_secs
    }

    /// Set once a fixed bucket size needed more than [`MAX_BUCKETS`] buckets with
    /// activity: the timeline is then incomplete and must not be shown.
    pub fn overflow(&self) -> Option<TooManyBuckets> {
        self.overflow
    }

    pub fn feed(&mut self, e: &Entry<'_>) {
        self.entries += 1;
        if self.first.is_none_or(|(t, _)| e.ts < t) {
            self.first = Some((e.ts, e.wall_ms));
        }
        if self.last.is_none_or(|(t, _)| e.ts > t) {
            self.last = Some((e.ts, e.wall_ms));
        }
        self.by_op.add(e.op);
        let mut bucket = e.ts.t - e.ts.t % self.bucket_secs;
        if !self.buckets.contains_key(&bucket) && self.buckets.len() >= MAX_BUCKETS {
            match self.sizing {
                Sizing::Auto => {
                    self.coarsen();
                    bucket = e.ts.t - e.ts.t % self.bucket_secs;
                }
                Sizing::Fixed => {
                    if self.overflow.is_none() {
                        self.overflow = Some(TooManyBuckets {
                            bucket_secs: self.bucket_secs,
                            first: self.first.map_or(e.ts.t, |f| f.0.t),
                            last: self.last.map_or(e.ts.t, |l| l.0.t),
                        });
                    }
                }
            }
        }
        let keep = self.overflow.is_none();
        let mut slot = Counts::default();
        let mut leaf = |l: &Entry<'_>| -> Result<(), crate::oplog::EntryError> {
            slot.add(l.op);
            let ns = if l.ns.is_empty() { "(no-op)" } else { l.ns };
            match self.by_ns.get_mut(ns) {
                Some(c) => c.add(l.op),
                None => self.by_ns.entry(ns.to_string()).or_default().add(l.op),
            }
            Ok(())
        };
        // A malformed applyOps is counted as the command it is.
        if e.for_each_leaf(&mut leaf).is_err() {
            slot.add(e.op);
        }
        if keep {
            self.buckets.entry(bucket).or_default().merge(&slot);
        }
    }

    /// Moves to the next [`NICE`] size (or further) until the buckets with activity
    /// fit under [`MAX_BUCKETS`] with room for one more.
    fn coarsen(&mut self) {
        while self.buckets.len() >= MAX_BUCKETS {
            let Some(&next) = NICE.iter().find(|&&b| b > self.bucket_secs) else {
                return; // 364 days: 10,000 of them is beyond what a u32 second holds
            };
            self.bucket_secs = next;
            let old = std::mem::take(&mut self.buckets);
            for (b, c) in old {
                self.buckets.entry(b - b % next).or_default().merge(&c);
            }
        }
    }

    /// Namespaces by activity, busiest first.
    pub fn top_namespaces(&self, n: usize) -> Vec<(&str, Counts)> {
        let mut v: Vec<(&str, Counts)> = self.by_ns.iter().map(|(k, c)| (k.as_str(), *c)).collect();
        v.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// The timeline in buckets of `bucket` seconds (a multiple of
    /// [`Stats::bucket_secs`]), from the first bucket with activity to the last: every
    /// bucket with activity is a row; between two of them, one empty bucket is a row
    /// of its own (gaps matter) and a run of two or more is one row. At most
    /// `2 * MAX_BUCKETS - 1` rows, whatever the time span.
    pub fn timeline(&self, bucket: u32) -> Vec<Row> {
        let bucket = bucket.max(1);
        debug_assert_eq!(bucket % self.bucket_secs, 0, "regrouping must be exact");
        let mut grouped: BTreeMap<u32, Counts> = BTreeMap::new();
        for (b, c) in &self.buckets {
            grouped.entry(b - b % bucket).or_default().merge(c);
        }
        let mut out: Vec<Row> = Vec::with_capacity(grouped.len().min(MAX_BUCKETS) * 2);
        let mut next: Option<u64> = None;
        for (&b, c) in &grouped {
            if let Some(n) = next {
                let empty = (b as u64 - n) / bucket as u64;
                if empty > 0 {
                    out.push(Row {
                        start: n as u32,
                        buckets: empty,
                        counts: Counts::default(),
                    });
                }
            }
            out.push(Row {
                start: b,
                buckets: 1,
                counts: *c,
            });
            next = Some(b as u64 + bucket as u64);
        }
        out
    }
}

/// A bucket size from [`NICE`] giving fewer than `max_rows` buckets for a window of
/// `span_secs` (the coarsest one when none does).
pub fn auto_bucket(span_secs: u64, max_rows: u64) -> u32 {
    NICE.iter()
        .copied()
        .find(|b| span_secs / (*b as u64) < max_rows)
        .unwrap_or(NICE[NICE.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf, Timestamp};

    #[test]
    fn counts_leaves_and_collapses_runs_of_empty_buckets() {
        let mut s = Stats::new(60);
        let docs = [
            doc! { "ts": Timestamp { time: 120, increment: 1 }, "op": "i", "ns": "a.b", "o": { "_id": 1 } },
            doc! { "ts": Timestamp { time: 300, increment: 1 }, "op": "c", "ns": "admin.$cmd",
            "o": { "applyOps": [ { "op": "d", "ns": "a.b", "o": { "_id": 1 } }, { "op": "d", "ns": "a.c", "o": { "_id": 2 } } ] } },
        ];
        for d in docs {
            let raw = RawDocumentBuf::from_document(&d).unwrap();
            s.feed(&Entry::parse(&raw).unwrap());
        }
        assert_eq!(s.entries, 2);
        assert_eq!(s.by_op.commands, 1);
        assert_eq!(s.by_ns["a.b"].total, 2);
        let t = s.timeline(60);
        assert_eq!(
            t.iter()
                .map(|r| (r.start, r.buckets, r.counts.total, r.counts.deletes))
                .collect::<Vec<_>>(),
            vec![(120, 1, 1, 0), (180, 2, 0, 0), (300, 1, 2, 2)]
        );
        // One empty bucket between two is a row of its own.
        assert_eq!(
            s.timeline(120)
                .iter()
                .map(|r| (r.start, r.buckets, r.counts.total))
                .collect::<Vec<_>>(),
            vec![(120, 1, 1), (240, 1, 2)]
        );
    }

    fn insert_at(t: u32) -> RawDocumentBuf {
        RawDocumentBuf::from_document(
            &doc! { "ts": Timestamp { time: t, increment: 1 }, "op": "i", "ns": "a.b", "o": { "_id": 1 } },
        )
        .unwrap()
    }

    /// Issue 17 item 7: with ts `0:1` and 2015 in one dump, the timeline listed every
    /// empty bucket in between (16,796 rows by day; by second it grew to 24 GB).
    #[test]
    fn the_time_span_costs_nothing() {
        let mut s = Stats::new(1);
        for t in [0, 0, 1, 1_450_127_227] {
            s.feed(&Entry::parse(&insert_at(t)).unwrap());
        }
        assert_eq!(s.overflow(), None);
        let t = s.timeline(1);
        assert_eq!(
            t.iter()
                .map(|r| (r.start, r.buckets, r.counts.total))
                .collect::<Vec<_>>(),
            vec![
                (0, 1, 2),
                (1, 1, 1),
                (2, 1_450_127_225, 0),
                (1_450_127_227, 1, 1)
            ]
        );
    }

    #[test]
    fn a_fixed_bucket_stops_at_the_cap_and_auto_coarsens() {
        let mut fixed = Stats::new(1);
        let mut auto = Stats::auto();
        let n = MAX_BUCKETS as u32 + 5;
        for t in 0..n {
            let raw = insert_at(1000 + 2 * t);
            let e = Entry::parse(&raw).unwrap();
            fixed.feed(&e);
            auto.feed(&e);
        }
        assert_eq!(
            fixed.overflow(),
            Some(TooManyBuckets {
                bucket_secs: 1,
                first: 1000,
                last: 1000 + 2 * MAX_BUCKETS as u32
            })
        );
        assert_eq!(fixed.buckets.len(), MAX_BUCKETS);
        assert_eq!(auto.overflow(), None);
        assert!(auto.buckets.len() <= MAX_BUCKETS);
        assert_eq!(auto.bucket_secs(), 5);
        let total: u64 = auto.buckets.values().map(|c| c.total).sum();
        assert_eq!((total, auto.entries), (n as u64, n as u64));
    }

    #[test]
    fn auto_bucket_keeps_rows_bounded() {
        assert_eq!(auto_bucket(50, 60), 1);
        assert_eq!(auto_bucket(3600, 60), 300);
        assert_eq!(auto_bucket(3 * 86400, 60), 7200);
        assert_eq!(auto_bucket(1_450_127_227, 60), 31449600);
        for w in NICE.windows(2) {
            assert_eq!(w[1] % w[0], 0, "{w:?}");
        }
    }
}
