//! What a restore keeps and what it loses, said before anything is applied.
//!
//! A restore to a point after an incident replays the incident: a drop of
//! `shop.orders` at 01:06 is in a restore to 01:10, and the only sign used to be a
//! count of 4 in a table. And every write at or after the limit is left out of the
//! restore, on every namespace. Both are what a person must see before trusting
//! the result:
//!
//! - [`Incident`]: every critical or high finding inside the replayed range
//!   (after the backup's end, before the limit) that `--skip` did not leave out and
//!   `--ns` does not exclude, with the `--until` that stops before it and, for a
//!   single entry, the `--skip` that leaves it out;
//! - [`LostWrites`]: per namespace, the write operations at or after the limit
//!   (inserts, updates, deletes, commands, counted per operation inside
//!   transactions), with the first and last `ts`.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::forensics::{Finding, Kind, Severity};
use crate::oplog::{Entry, EntryError, Op, Ts};

use super::expect::is_checked_ns;
use super::filter::{target, NsFilter, Target};
use super::ts_json;

/// At most this many namespaces are listed one by one; the rest are summed.
pub const MAX_NAMESPACES: usize = 1000;

/// The plan's `stake` section. JSON: `incidents` (array of [`Incident`]),
/// `lost` (array of [`NsWrites`], most writes first), `lost_operations` (total),
/// `lost_other_namespaces` (namespaces past [`MAX_NAMESPACES`], summed into
/// `lost_operations` but not listed), `lost_counted` (false when the oplog after the
/// limit was not read), `lost_note` (why the count may be short, else null).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stake {
    pub incidents: Vec<Incident>,
    pub lost: Vec<NsWrites>,
    pub lost_operations: u64,
    pub lost_other_namespaces: u64,
    pub lost_counted: bool,
    /// Why the count may be short (a later chunk of an oplog archive is missing or
    /// damaged: the restore does not need it), else null.
    #[serde(default)]
    pub lost_note: Option<String>,
}

impl Stake {
    /// Critical incidents and high ones replayed: the restore holds their damage.
    pub fn has_incidents(&self) -> bool {
        !self.incidents.is_empty()
    }
}

/// A critical or high finding the restore replays. JSON: `kind`, `severity`, `ns`,
/// `ts`, `last_ts`, `oplog_limit` (the `--until` that stops before it), `details`,
/// `collections` (a dropDatabase's), `skip` (the `--skip` value that leaves it out
/// when it is one entry, else null).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incident {
    pub kind: String,
    pub severity: String,
    pub ns: String,
    #[serde(deserialize_with = "ts_json::de")]
    pub ts: Ts,
    #[serde(deserialize_with = "ts_json::de")]
    pub last_ts: Ts,
    #[serde(deserialize_with = "ts_json::de")]
    pub oplog_limit: Ts,
    pub details: String,
    pub collections: Vec<String>,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub skip: Option<Ts>,
}

impl Incident {
    /// `drop of shop.orders at 1795223165:1`.
    pub fn describe(&self) -> String {
        format!("{} of {} at {}", self.kind, self.ns, self.ts)
    }
}

/// How many namespaces the text lists before summing the rest.
const TEXT_ROWS: usize = 12;

impl Stake {
    /// The section as `pitr plan` and `pitr replay` print it, a line each
    /// (`At stake` heading first).
    pub fn text_lines(&self, limit: Ts) -> Vec<String> {
        let mut v = vec!["At stake  what this restore replays and what it leaves out".to_string()];
        if self.incidents.is_empty() {
            v.push(
                "  replays  no critical or high incident between the backup's end and the limit"
                    .into(),
            );
        } else {
            v.push(format!(
                "  REPLAYS {} incident{} the restore will hold the damage of:",
                self.incidents.len(),
                plural(self.incidents.len() as u64),
            ));
            for i in &self.incidents {
                v.push(format!(
                    "    {:<8}  {} ({}): {}",
                    i.severity,
                    i.describe(),
                    i.ts.utc_string(),
                    i.details
                ));
                let mut how = format!("to stop before it: --until {}", i.oplog_limit);
                if let Some(s) = i.skip {
                    how.push_str(&format!(
                        "; to keep the later writes without it: --until {limit} --skip {s} (only if nothing re-creates {} afterwards)",
                        i.ns
                    ));
                }
                v.push(format!("              {how}"));
            }
        }
        if !self.lost_counted {
            v.push("  leaves out  the writes at or after the limit were not counted".into());
        } else if self.lost_operations == 0 {
            v.push(format!(
                "  leaves out  nothing: the oplog holds no write at or after the limit {limit}"
            ));
        } else {
            let namespaces = self.lost.len() as u64 + self.lost_other_namespaces;
            v.push(format!(
                "  LEAVES OUT {} write{} on {} namespace{} at or after the limit {limit}:",
                self.lost_operations,
                plural(self.lost_operations),
                namespaces,
                plural(namespaces)
            ));
            let rows: Vec<Vec<String>> = self
                .lost
                .iter()
                .take(TEXT_ROWS)
                .map(|w| {
                    vec![
                        w.ns.clone(),
                        w.inserts.to_string(),
                        w.updates.to_string(),
                        w.deletes.to_string(),
                        w.commands.to_string(),
                        format!("{} .. {}", w.first_ts, w.last_ts),
                    ]
                })
                .collect();
            let table = crate::table::render(
                "    ",
                &[
                    "NAMESPACE",
                    "INSERTS",
                    "UPDATES",
                    "DELETES",
                    "COMMANDS",
                    "TS",
                ],
                &rows,
            );
            v.extend(table.lines().map(str::to_string));
            let more = namespaces.saturating_sub(TEXT_ROWS as u64);
            if more > 0 {
                v.push(format!(
                    "    ... and {more} more namespace{} (plan.json `stake.lost` lists up to {MAX_NAMESPACES})",
                    plural(more)
                ));
            }
        }
        if let Some(n) = &self.lost_note {
            v.push(format!("    (the count may be short: {n})"));
        }
        v
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The incidents inside `(backup_end, limit)`.
pub fn incidents(
    findings: &[Finding],
    backup_end: Ts,
    limit: Ts,
    skips: &HashSet<Ts>,
    filter: Option<&NsFilter>,
) -> Vec<Incident> {
    findings
        .iter()
        .filter(|f| f.severity >= Severity::High && !f.is_routine())
        .filter(|f| f.ts > backup_end && f.ts < limit)
        // One entry left out with --skip is not replayed; a burst or a database
        // drop is many entries, and skipping one of them does not undo it.
        .filter(|f| !(f.count == 1 && skips.contains(&f.ts)))
        .filter(|f| {
            filter.is_none_or(|nf| nf.matches(&f.ns) || f.collections.iter().any(|c| nf.matches(c)))
        })
        .map(|f| Incident {
            kind: f.kind.as_str().to_string(),
            severity: f.severity.as_str().to_string(),
            ns: f.ns.clone(),
            ts: f.ts,
            last_ts: f.last_ts,
            oplog_limit: f.oplog_limit,
            details: f.details.clone(),
            collections: f.collections.clone(),
            skip: (f.count == 1
                && matches!(
                    f.kind,
                    Kind::Drop | Kind::RenameDropTarget | Kind::Emptycapped
                ))
            .then_some(f.ts),
        })
        .collect()
}

/// Write operations on one namespace at or after the limit. JSON: `ns`, `inserts`,
/// `updates`, `deletes`, `commands`, `first_ts`, `last_ts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsWrites {
    pub ns: String,
    pub inserts: u64,
    pub updates: u64,
    pub deletes: u64,
    pub commands: u64,
    #[serde(deserialize_with = "ts_json::de")]
    pub first_ts: Ts,
    #[serde(deserialize_with = "ts_json::de")]
    pub last_ts: Ts,
}

impl NsWrites {
    pub fn total(&self) -> u64 {
        self.inserts + self.updates + self.deletes + self.commands
    }
}

/// Counts the writes the restore leaves out, entry by entry.
#[derive(Debug, Default)]
pub struct LostWrites {
    by_ns: BTreeMap<String, NsWrites>,
    other_ns: HashSet<String>,
    other_operations: u64,
}

impl LostWrites {
    /// One top-level entry at or after the limit.
    pub fn see(&mut self, e: &Entry<'_>) -> Result<(), EntryError> {
        if e.op == Op::Noop {
            return Ok(());
        }
        let ts = e.ts;
        e.for_each_leaf(&mut |leaf: &Entry<'_>| -> Result<(), EntryError> {
            let ns = match target(leaf) {
                Target::Ns(ns) => ns,
                Target::Rename(from, _) => from,
                Target::Database(db) => format!("{db}.*"),
                Target::Other => return Ok(()),
            };
            if !ns.ends_with(".*") && !is_checked_ns(&ns) {
                return Ok(());
            }
            self.count(ns, leaf.op, ts);
            Ok(())
        })
    }

    fn count(&mut self, ns: String, op: Op<'_>, ts: Ts) {
        if !self.by_ns.contains_key(&ns) && self.by_ns.len() >= MAX_NAMESPACES {
            self.other_ns.insert(ns);
            self.other_operations += 1;
            return;
        }
        let w = self.by_ns.entry(ns.clone()).or_insert(NsWrites {
            ns,
            inserts: 0,
            updates: 0,
            deletes: 0,
            commands: 0,
            first_ts: ts,
            last_ts: ts,
        });
        match op {
            Op::Insert => w.inserts += 1,
            Op::Update => w.updates += 1,
            Op::Delete => w.deletes += 1,
            _ => w.commands += 1,
        }
        w.first_ts = w.first_ts.min(ts);
        w.last_ts = w.last_ts.max(ts);
    }

    /// The namespaces, most writes first.
    pub fn finish(self, stake: &mut Stake) {
        let mut lost: Vec<NsWrites> = self.by_ns.into_values().collect();
        lost.sort_by(|a, b| b.total().cmp(&a.total()).then_with(|| a.ns.cmp(&b.ns)));
        stake.lost_operations =
            lost.iter().map(NsWrites::total).sum::<u64>() + self.other_operations;
        stake.lost_other_namespaces = self.other_ns.len() as u64;
        stake.lost = lost;
        stake.lost_counted = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    fn entry_bytes(d: bson::Document) -> Vec<u8> {
        bson::to_vec(&d).unwrap()
    }

    fn ts(t: u32, i: u32) -> bson::Bson {
        bson::Bson::Timestamp(Timestamp {
            time: t,
            increment: i,
        })
    }

    #[test]
    fn writes_are_counted_per_namespace_and_per_operation_in_transactions() {
        let docs = [
            doc! { "ts": ts(10, 1), "op": "i", "ns": "shop.orders", "o": { "_id": 1 } },
            doc! { "ts": ts(10, 2), "op": "n", "ns": "", "o": { "msg": "periodic noop" } },
            doc! { "ts": ts(11, 1), "op": "u", "ns": "shop.orders", "o": { "$set": { "a": 1 } }, "o2": { "_id": 1 } },
            doc! { "ts": ts(12, 1), "op": "c", "ns": "admin.$cmd", "lsid": { "id": 1 }, "txnNumber": 1i64,
            "o": { "applyOps": [
                { "op": "i", "ns": "shop.payments", "o": { "_id": 1 } },
                { "op": "d", "ns": "shop.orders", "o": { "_id": 1 } } ] } },
            doc! { "ts": ts(13, 1), "op": "c", "ns": "shop.$cmd", "o": { "drop": "carts" } },
            doc! { "ts": ts(14, 1), "op": "i", "ns": "config.transactions", "o": { "_id": 1 } },
        ];
        let mut lost = LostWrites::default();
        for d in docs {
            let bytes = entry_bytes(d);
            let raw = bson::RawDocument::from_bytes(&bytes).unwrap();
            let e = Entry::parse(raw).unwrap();
            lost.see(&e).unwrap();
        }
        let mut s = Stake::default();
        lost.finish(&mut s);
        assert!(s.lost_counted);
        assert_eq!(s.lost_operations, 5);
        let names: Vec<&str> = s.lost.iter().map(|w| w.ns.as_str()).collect();
        assert_eq!(names, ["shop.orders", "shop.carts", "shop.payments"]);
        let o = &s.lost[0];
        assert_eq!((o.inserts, o.updates, o.deletes, o.commands), (1, 1, 1, 0));
        assert_eq!((o.first_ts, o.last_ts), (Ts::new(10, 1), Ts::new(12, 1)));
        assert_eq!(s.lost[1].commands, 1);
    }

    #[test]
    fn namespaces_past_the_cap_are_summed() {
        let mut lost = LostWrites::default();
        for i in 0..(MAX_NAMESPACES + 5) {
            lost.count(format!("db.c{i}"), Op::Insert, Ts::new(1, 1));
        }
        lost.count("db.c0".into(), Op::Insert, Ts::new(1, 2));
        let mut s = Stake::default();
        lost.finish(&mut s);
        assert_eq!(s.lost.len(), MAX_NAMESPACES);
        assert_eq!(s.lost_other_namespaces, 5);
        assert_eq!(s.lost_operations, MAX_NAMESPACES as u64 + 6);
        assert_eq!(s.lost[0].ns, "db.c0");
    }
}
