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

/// Accumulates statistics over a stream of entries in constant memory per
/// namespace and per bucket.
pub struct Stats {
    bucket_secs: u32,
    pub entries: u64,
    pub first: Option<(Ts, Option<i64>)>,
    pub last: Option<(Ts, Option<i64>)>,
    /// Top-level entries by op.
    pub by_op: Counts,
    /// Leaf operations (applyOps expanded) by namespace.
    pub by_ns: HashMap<String, Counts>,
    /// Leaf operations by bucket start second.
    pub buckets: BTreeMap<u32, Counts>,
}

impl Stats {
    pub fn new(bucket_secs: u32) -> Stats {
        Stats {
            bucket_secs: bucket_secs.max(1),
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

    pub fn feed(&mut self, e: &Entry<'_>) {
        self.entries += 1;
        if self.first.is_none_or(|(t, _)| e.ts < t) {
            self.first = Some((e.ts, e.wall_ms));
        }
        if self.last.is_none_or(|(t, _)| e.ts > t) {
            self.last = Some((e.ts, e.wall_ms));
        }
        self.by_op.add(e.op);
        let bucket = e.ts.t - e.ts.t % self.bucket_secs;
        let mut leaf = |l: &Entry<'_>| -> Result<(), crate::oplog::EntryError> {
            self.buckets.entry(bucket).or_default().add(l.op);
            let ns = if l.ns.is_empty() { "(no-op)" } else { l.ns };
            match self.by_ns.get_mut(ns) {
                Some(c) => c.add(l.op),
                None => self.by_ns.entry(ns.to_string()).or_default().add(l.op),
            }
            Ok(())
        };
        // A malformed applyOps is counted as the command it is.
        if e.for_each_leaf(&mut leaf).is_err() {
            self.buckets.entry(bucket).or_default().add(e.op);
        }
    }

    /// Namespaces by activity, busiest first.
    pub fn top_namespaces(&self, n: usize) -> Vec<(&str, Counts)> {
        let mut v: Vec<(&str, Counts)> = self.by_ns.iter().map(|(k, c)| (k.as_str(), *c)).collect();
        v.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// Every bucket from first to last, including empty ones (gaps matter).
    pub fn timeline(&self) -> Vec<(u32, Counts)> {
        let (Some((&lo, _)), Some((&hi, _))) = (
            self.buckets.first_key_value(),
            self.buckets.last_key_value(),
        ) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut b = lo as u64;
        while b <= hi as u64 {
            out.push((
                b as u32,
                self.buckets.get(&(b as u32)).copied().unwrap_or_default(),
            ));
            b += self.bucket_secs as u64;
        }
        out
    }
}

/// A bucket size giving at most `max_rows` rows for a window of `span_secs`,
/// rounded to a readable size.
pub fn auto_bucket(span_secs: u64, max_rows: u64) -> u32 {
    const NICE: [u32; 14] = [
        1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400,
    ];
    NICE.iter()
        .copied()
        .find(|b| span_secs / (*b as u64) < max_rows)
        .unwrap_or(86400)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf, Timestamp};

    #[test]
    fn counts_leaves_and_fills_gaps() {
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
        let t = s.timeline();
        assert_eq!(
            t.iter()
                .map(|(b, c)| (*b, c.total, c.deletes))
                .collect::<Vec<_>>(),
            vec![(120, 1, 0), (180, 0, 0), (240, 0, 0), (300, 2, 2)]
        );
    }

    #[test]
    fn auto_bucket_keeps_rows_bounded() {
        assert_eq!(auto_bucket(50, 60), 1);
        assert_eq!(auto_bucket(3600, 60), 300);
        assert_eq!(auto_bucket(3 * 86400, 60), 7200);
    }
}
