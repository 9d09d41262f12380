//! What an oplog held, for telling "a filter that matches nothing" from "nothing
//! happened": `find-drop --ns shop.ordrs` used to report nothing destructive,
//! exactly as for a quiet `shop.orders`.
//!
//! [`Seen`] records the namespaces an oplog's entries act on (those inside
//! `applyOps` too; a command's collection, not `db.$cmd`) and its first and last
//! position. It parses only `ts`, `ns` and, for commands, `o`'s first element: it is
//! fed only when a filter asks for it, so the scan's fast path is untouched
//! otherwise. Memory is bounded: past [`MAX_NAMESPACES`] names, new ones are counted
//! but not kept.

use std::collections::BTreeSet;

use bson::{RawBsonRef, RawDocument};

use crate::oplog::{Entry, EntryError, Op, Ts};

/// How deep `applyOps` inside `applyOps` is opened.
const MAX_DEPTH: u8 = 4;

/// Namespaces kept by name.
pub const MAX_NAMESPACES: usize = 100_000;

#[derive(Debug, Default)]
pub struct Seen {
    pub namespaces: BTreeSet<String>,
    /// Namespaces past the cap (not kept).
    pub more: u64,
    pub first: Option<Ts>,
    pub last: Option<Ts>,
    pub entries: u64,
    /// `namespaces` again, looked up faster (once per entry).
    added: std::collections::HashSet<Box<str>, foldhash::fast::RandomState>,
}

impl Seen {
    /// One top-level entry, as framed BSON bytes.
    pub fn feed(&mut self, doc: &[u8]) -> Result<(), EntryError> {
        let raw = RawDocument::from_bytes(doc)?;
        self.entries += 1;
        if let Some(RawBsonRef::Timestamp(t)) = raw.get("ts")? {
            let ts = Ts::new(t.time, t.increment);
            self.first = Some(self.first.map_or(ts, |f| f.min(ts)));
            self.last = Some(self.last.map_or(ts, |l| l.max(ts)));
        }
        self.operation(raw, 0)
    }

    /// [`Seen::feed`] of an entry already parsed: a CRUD entry or a no-op adds its
    /// `ns` without parsing again (a scan's many writes to a few collections), a
    /// transaction's operations are read by the entry's parser.
    pub fn feed_entry(&mut self, e: &Entry<'_>) -> Result<(), EntryError> {
        if e.op != Op::Command && !e.ns.ends_with(".$cmd") {
            // What `operation` does with a CRUD entry or a no-op: its `ns`, if any.
            self.position(e.ts);
            if !e.ns.is_empty() {
                self.add(e.ns);
            }
            return Ok(());
        }
        if e.op == Op::Command {
            // A transaction's `applyOps` through the entry's own parser (the raw
            // document's lookups, which check every key, cost a fifth of a plan's
            // scan on a bench with transactions). Namespaces are added only once
            // every leaf parsed: anything unusual is read the lenient way below.
            let (mut names, mut commands) = (Vec::new(), Vec::new());
            let leaves = e.for_each_leaf(&mut |l: &Entry<'_>| -> Result<(), EntryError> {
                if l.ns.ends_with(".$cmd") {
                    commands.push(l.raw);
                } else if !l.ns.is_empty() {
                    names.push(l.ns);
                }
                Ok(())
            });
            if leaves.is_ok() {
                self.position(e.ts);
                for ns in names {
                    self.add(ns);
                }
                // Commands other than `applyOps` (every `applyOps` was opened above).
                for c in commands {
                    self.operation(c, MAX_DEPTH)?;
                }
                return Ok(());
            }
        }
        self.feed(e.raw.as_bytes())
    }

    /// One more entry, at `ts`.
    fn position(&mut self, ts: Ts) {
        self.entries += 1;
        self.first = Some(self.first.map_or(ts, |f| f.min(ts)));
        self.last = Some(self.last.map_or(ts, |l| l.max(ts)));
    }

    /// Whether no entry seen names `ns`, its database as a whole (`dropDatabase`)
    /// or names past the cap (then nothing is known untouched).
    pub fn untouched(&self, ns: &str) -> bool {
        let db = ns.split_once('.').map_or(ns, |(db, _)| db);
        self.more == 0
            && !self.namespaces.contains(ns)
            && !self.namespaces.contains(&format!("{db}.*"))
    }

    fn operation(&mut self, raw: &RawDocument, depth: u8) -> Result<(), EntryError> {
        let Some(RawBsonRef::String(ns)) = raw.get("ns")? else {
            return Ok(());
        };
        let Some(db) = ns.strip_suffix(".$cmd") else {
            if !ns.is_empty() {
                self.add(ns);
            }
            return Ok(());
        };
        let Some(RawBsonRef::Document(o)) = raw.get("o")? else {
            return Ok(());
        };
        let Some(first) = o.into_iter().next().transpose()? else {
            return Ok(());
        };
        match first {
            ("applyOps", RawBsonRef::Array(ops)) if depth < MAX_DEPTH => {
                for op in ops {
                    if let RawBsonRef::Document(d) = op? {
                        self.operation(d, depth + 1)?;
                    }
                }
            }
            ("renameCollection", RawBsonRef::String(from)) => {
                self.add(from);
                if let Some(RawBsonRef::String(to)) = o.get("to")? {
                    self.add(to);
                }
            }
            ("dropDatabase", _) => self.add(&format!("{db}.*")),
            (_, RawBsonRef::String(coll)) => self.add(&format!("{db}.{coll}")),
            _ => {}
        }
        Ok(())
    }

    fn add(&mut self, ns: &str) {
        if self.added.contains(ns) {
            return;
        }
        if self.namespaces.len() < MAX_NAMESPACES {
            self.namespaces.insert(ns.to_string());
            self.added.insert(ns.into());
        } else {
            self.more += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    fn feed(s: &mut Seen, d: bson::Document) {
        s.feed(&bson::to_vec(&d).unwrap()).unwrap();
    }

    #[test]
    fn namespaces_of_crud_commands_and_transactions() {
        let mut s = Seen::default();
        let ts = |t| {
            bson::Bson::Timestamp(Timestamp {
                time: t,
                increment: 1,
            })
        };
        feed(
            &mut s,
            doc! { "ts": ts(5), "op": "i", "ns": "shop.orders", "o": { "_id": 1 } },
        );
        feed(&mut s, doc! { "ts": ts(3), "op": "n", "ns": "", "o": {} });
        feed(
            &mut s,
            doc! { "ts": ts(9), "op": "c", "ns": "shop.$cmd", "o": { "create": "carts" } },
        );
        feed(
            &mut s,
            doc! { "ts": ts(7), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [
            { "op": "u", "ns": "shop.payments", "o": { "$set": { "a": 1 } }, "o2": { "_id": 1 } } ] } },
        );
        feed(
            &mut s,
            doc! { "ts": ts(8), "op": "c", "ns": "old.$cmd", "o": { "dropDatabase": 1 } },
        );
        feed(
            &mut s,
            doc! { "ts": ts(8), "op": "c", "ns": "a.$cmd", "o": { "renameCollection": "a.x", "to": "b.y" } },
        );
        let names: Vec<&str> = s.namespaces.iter().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "a.x",
                "b.y",
                "old.*",
                "shop.carts",
                "shop.orders",
                "shop.payments"
            ]
        );
        assert_eq!(
            (s.first, s.last),
            (Some(Ts::new(3, 1)), Some(Ts::new(9, 1)))
        );
        assert_eq!(s.entries, 6);
    }

    /// An entry already parsed gives what its bytes give, for every shape `Seen`
    /// reads: CRUD, no-ops with and without `ns`, commands, renames, a
    /// `dropDatabase`, transactions (nested, holding commands), and an `applyOps`
    /// whose operations the entry's parser refuses (read the lenient way).
    #[test]
    fn an_entry_already_parsed_gives_what_its_bytes_give() {
        let ts = |t| {
            bson::Bson::Timestamp(Timestamp {
                time: t,
                increment: 1,
            })
        };
        let docs = [
            doc! { "ts": ts(5), "op": "i", "ns": "shop.orders", "o": { "_id": 1 } },
            doc! { "ts": ts(6), "op": "d", "ns": "", "o": { "_id": 1 } },
            doc! { "ts": ts(3), "op": "n", "ns": "", "o": { "msg": "periodic noop" } },
            doc! { "ts": ts(4), "op": "n", "ns": "shop.moved", "o": { "msg": "migrate" } },
            doc! { "ts": ts(9), "op": "c", "ns": "shop.$cmd", "o": { "create": "carts" } },
            doc! { "ts": ts(8), "op": "c", "ns": "old.$cmd", "o": { "dropDatabase": 1 } },
            doc! { "ts": ts(8), "op": "c", "ns": "a.$cmd", "o": { "renameCollection": "a.x", "to": "b.y" } },
            doc! { "ts": ts(7), "op": "c", "ns": "admin.$cmd", "lsid": { "id": 1 }, "txnNumber": 1i64,
            "o": { "applyOps": [
                { "op": "u", "ns": "shop.payments", "o": { "$set": { "a": 1 } }, "o2": { "_id": 1 } },
                { "op": "c", "ns": "inv.$cmd", "o": { "create": "lots" } },
                { "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [
                    { "op": "i", "ns": "deep.er", "o": { "_id": 2 } } ] } } ] } },
            // An operation without `op`: the entry's parser refuses it, `Seen` does not.
            doc! { "ts": ts(10), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [
            { "ns": "odd.one", "o": { "_id": 3 } } ] } },
        ];
        let (mut by_bytes, mut by_entry) = (Seen::default(), Seen::default());
        for d in &docs {
            let bytes = bson::to_vec(d).unwrap();
            by_bytes.feed(&bytes).unwrap();
            let raw = RawDocument::from_bytes(&bytes).unwrap();
            by_entry.feed_entry(&Entry::parse(raw).unwrap()).unwrap();
        }
        assert!(by_bytes.namespaces.contains("deep.er") && by_bytes.namespaces.contains("odd.one"));
        assert_eq!(by_entry.namespaces, by_bytes.namespaces);
        assert_eq!(
            (
                by_entry.first,
                by_entry.last,
                by_entry.entries,
                by_entry.more
            ),
            (
                by_bytes.first,
                by_bytes.last,
                by_bytes.entries,
                by_bytes.more
            )
        );
    }
}
