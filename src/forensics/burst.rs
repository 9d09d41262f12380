//! Sliding-window detection of bursts (many deletes, or many wiping updates, on one
//! namespace in a short time), in constant memory per namespace.
//!
//! A burst starts when at least `threshold` events fall within `window_secs`
//! seconds (first to last, by oplog second); it then extends as long as each next
//! event comes within `window_secs` of the previous one. Its first event is where
//! the data loss began, so that is the restore limit.

use std::collections::VecDeque;

use super::FastMap;

use crate::oplog::Ts;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstRule {
    pub threshold: u64,
    pub window_secs: u32,
}

impl Default for BurstRule {
    fn default() -> Self {
        BurstRule {
            threshold: 100,
            window_secs: 10,
        }
    }
}

/// Something that happened at one oplog position: `n` events (a transaction applies
/// many deletes at its commit entry's `ts`).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    second: u32,
    count: u64,
    first: Ts,
    first_wall_ms: Option<i64>,
    in_txn: bool,
}

/// A detected burst.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Burst {
    pub ns: String,
    pub first: Ts,
    pub last: Ts,
    pub first_wall_ms: Option<i64>,
    pub count: u64,
    /// True when any of the events was applied by a committed transaction.
    pub in_transaction: bool,
}

#[derive(Default)]
struct NsState {
    /// Recent events by second, oldest first; never spans more than the window.
    window: VecDeque<Bucket>,
    sum: u64,
    active: Option<Burst>,
}

/// Tracks every namespace; finished bursts are collected in `done`.
pub struct BurstDetector {
    rule: BurstRule,
    states: FastMap<Box<str>, NsState>,
    done: Vec<Burst>,
}

impl BurstDetector {
    pub fn new(rule: BurstRule) -> Self {
        BurstDetector {
            rule,
            states: FastMap::default(),
            done: Vec::new(),
        }
    }

    /// Records `n` events on `ns` at `ts`.
    pub fn record(&mut self, ns: &str, ts: Ts, wall_ms: Option<i64>, n: u64, in_txn: bool) {
        let rule = self.rule;
        let st = match self.states.get_mut(ns) {
            Some(s) => s,
            None => self.states.entry(ns.into()).or_default(),
        };
        if let Some(a) = &mut st.active {
            if ts.t.saturating_sub(a.last.t) <= rule.window_secs {
                a.count += n;
                a.last = a.last.max(ts);
                a.in_transaction |= in_txn;
                return;
            }
            self.done.push(st.active.take().expect("checked above"));
        }
        match st.window.back_mut() {
            Some(b) if b.second == ts.t => {
                b.count += n;
                b.in_txn |= in_txn;
            }
            _ => st.window.push_back(Bucket {
                second: ts.t,
                count: n,
                first: ts,
                first_wall_ms: wall_ms,
                in_txn,
            }),
        }
        st.sum += n;
        while let Some(front) = st.window.front() {
            if ts.t.saturating_sub(front.second) > rule.window_secs {
                st.sum -= front.count;
                st.window.pop_front();
            } else {
                break;
            }
        }
        if st.sum >= rule.threshold {
            let front = st.window.front().expect("sum > 0 means non-empty");
            st.active = Some(Burst {
                ns: ns.to_string(),
                first: front.first,
                last: ts,
                first_wall_ms: front.first_wall_ms,
                count: st.sum,
                in_transaction: st.window.iter().any(|b| b.in_txn),
            });
            st.window.clear();
            st.sum = 0;
        }
    }

    /// All bursts, including those still open at the end of the input.
    pub fn finish(mut self) -> Vec<Burst> {
        for (_, st) in self.states.drain() {
            if let Some(a) = st.active {
                self.done.push(a);
            }
        }
        self.done.sort_by_key(|b| b.first);
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(threshold: u64, window_secs: u32) -> BurstRule {
        BurstRule {
            threshold,
            window_secs,
        }
    }

    #[test]
    fn exactly_threshold_within_window_is_a_burst() {
        let mut d = BurstDetector::new(rule(100, 10));
        for k in 0..100u32 {
            d.record("a.b", Ts::new(1000 + k / 10, k), None, 1, false);
        }
        let b = d.finish();
        assert_eq!(b.len(), 1);
        assert_eq!(
            (b[0].first, b[0].last, b[0].count),
            (Ts::new(1000, 0), Ts::new(1009, 99), 100)
        );
    }

    #[test]
    fn one_short_or_spread_out_is_silent() {
        let mut d = BurstDetector::new(rule(100, 10));
        for k in 0..99u32 {
            d.record("a.b", Ts::new(1000, k), None, 1, false);
        }
        // 200 deletes, one every 11 s: never 100 within 10 s.
        for k in 0..200u32 {
            d.record("a.c", Ts::new(2000 + k * 11, 1), None, 1, false);
        }
        assert!(d.finish().is_empty());
    }

    #[test]
    fn burst_extends_while_events_keep_coming_then_a_new_one_starts() {
        let mut d = BurstDetector::new(rule(10, 10));
        for k in 0..50u32 {
            d.record("a.b", Ts::new(100 + k, 1), None, 1, false);
        }
        for k in 0..10u32 {
            d.record("a.b", Ts::new(1000, k), None, 1, false);
        }
        let b = d.finish();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].first, b[0].count), (Ts::new(100, 1), 50));
        assert_eq!((b[1].first, b[1].count), (Ts::new(1000, 0), 10));
    }

    #[test]
    fn many_events_at_one_commit_count_and_keep_txn_flag() {
        let mut d = BurstDetector::new(rule(100, 10));
        d.record("a.b", Ts::new(5, 3), Some(5000), 120, true);
        let b = d.finish();
        assert_eq!(b[0].count, 120);
        assert!(b[0].in_transaction);
        assert_eq!(b[0].first_wall_ms, Some(5000));
    }

    #[test]
    fn namespaces_are_independent() {
        let mut d = BurstDetector::new(rule(3, 10));
        d.record("a.x", Ts::new(1, 1), None, 1, false);
        d.record("a.y", Ts::new(1, 2), None, 1, false);
        d.record("a.x", Ts::new(1, 3), None, 1, false);
        d.record("a.y", Ts::new(1, 4), None, 1, false);
        assert!(d.finish().is_empty());
    }
}
