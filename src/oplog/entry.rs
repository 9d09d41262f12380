//! The typed, zero-copy view of one oplog entry.
//!
//! [`Entry::parse`] walks the top-level fields of the raw document once and keeps
//! borrowed references to the ones pitr uses; everything else (unknown fields,
//! unknown op types) stays reachable through [`Entry::raw`] and is never an error.
//! Nested `applyOps` (transactions, batched writes, vectored inserts) are walked with
//! [`Entry::apply_ops`]: inner operations inherit the parent's `ts`, `wall`, term and
//! session fields, exactly as the server applies them.

use bson::spec::ElementType;
use bson::{RawBsonRef, RawDocument};
use chrono::{DateTime, Utc};

use super::elements::{i64_value, leading_op, str_value, ts_value, ElementError, Elements};
use super::timestamp::Ts;

/// Nested `applyOps` deeper than this is refused rather than recursed into.
pub const MAX_APPLY_OPS_DEPTH: usize = 8;

/// The `op` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    Insert,
    Update,
    Delete,
    Command,
    Noop,
    /// Internal bookkeeping (`xi`, `xd`, `ci`, `cu`, `cd`, `km`) or anything newer:
    /// carried, never fatal.
    Other(&'a str),
}

impl<'a> Op<'a> {
    pub fn parse(s: &'a str) -> Op<'a> {
        match s {
            "i" => Op::Insert,
            "u" => Op::Update,
            "d" => Op::Delete,
            "c" => Op::Command,
            "n" => Op::Noop,
            other => Op::Other(other),
        }
    }

    pub fn as_str(&self) -> &'a str {
        match self {
            Op::Insert => "i",
            Op::Update => "u",
            Op::Delete => "d",
            Op::Command => "c",
            Op::Noop => "n",
            Op::Other(s) => s,
        }
    }
}

/// Why a BSON document is not a usable oplog entry.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("it has no `{0}` field")]
    Missing(&'static str),
    #[error("its `{field}` field is {found:?}, expected {expected}")]
    WrongType {
        field: &'static str,
        found: ElementType,
        expected: &'static str,
    },
    #[error("its BSON is malformed")]
    Malformed(#[from] bson::raw::Error),
    #[error("its BSON is malformed: {0}")]
    Corrupt(#[from] ElementError),
    #[error("its `{0}` field is not valid UTF-8")]
    BadUtf8(&'static str),
    #[error("applyOps[{index}]: {source}")]
    Inner {
        index: usize,
        #[source]
        source: Box<EntryError>,
    },
    #[error("applyOps nested more than {MAX_APPLY_OPS_DEPTH} levels deep")]
    TooDeep,
}

/// What [`Entry::parse_unless_insert`] found.
// Returned by value on the scan's hot path: boxing the entry would cost an
// allocation per entry, a copy of 224 bytes costs nothing measurable.
#[allow(clippy::large_enum_variant)]
pub enum Parsed<'a> {
    Entry(Entry<'a>),
    /// An insert or no-op, at this position; not parsed further.
    InsertOrNoop(Ts),
}

/// One oplog entry (or one operation inside an `applyOps`), borrowed from the
/// reader's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    pub raw: &'a RawDocument,
    pub ts: Ts,
    pub op: Op<'a>,
    /// `db.coll`, `db.$cmd`, `admin.$cmd`, or `""` for no-ops.
    pub ns: &'a str,
    pub o: Option<&'a RawDocument>,
    pub o2: Option<&'a RawDocument>,
    /// Collection UUID bytes (binary subtype 4) when present.
    pub ui: Option<&'a [u8]>,
    /// Primary's wall clock, milliseconds since the epoch.
    pub wall_ms: Option<i64>,
    /// Election term (`t`).
    pub term: Option<i64>,
    pub from_migrate: bool,
    pub lsid: Option<&'a RawDocument>,
    pub txn_number: Option<i64>,
    /// `prevOpTime.ts`, linking the parts of a transaction.
    pub prev_op_time: Option<Ts>,
    /// `multiOpType` (1: the vectored inserts of one retryable write, applied as a
    /// batch but NOT a transaction, although they carry `lsid`/`txnNumber`).
    pub multi_op_type: Option<i64>,
    /// `b: true`: an update that upserts (the server's `OplogEntry::getUpsert`).
    /// Read in the one walk of the fields, as `raw.get("b")` would find it (the
    /// first `b`, true only when a Boolean true), so that the apply does not search
    /// the entry again.
    pub upsert: bool,
    /// Byte offset of the top-level entry in its source (0 for inner operations'
    /// own position: they share their parent's offset).
    pub offset: u64,
    /// 0-based number of the top-level entry in its source.
    pub index: u64,
    /// 0 for a top-level entry, 1 for an operation inside `applyOps`, and so on.
    pub depth: u8,
}

/// A number of any BSON numeric type, as an integer (doubles must be integral).
/// The key of one transaction of one session: the `lsid` document's bytes, then
/// `txnNumber` little-endian ([`Entry::transaction_key`]; the coordinator's decision
/// document names its transaction by the same two values).
pub fn session_key(lsid: &RawDocument, txn_number: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(lsid.as_bytes().len() + 8);
    k.extend_from_slice(lsid.as_bytes());
    k.extend_from_slice(&txn_number.to_le_bytes());
    k
}

pub fn as_i64(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(n) => Some(n as i64),
        RawBsonRef::Int64(n) => Some(n),
        RawBsonRef::Double(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(f as i64),
        _ => None,
    }
}

impl<'a> Entry<'a> {
    /// Parses a top-level oplog entry. `ts` and `op` are required.
    pub fn parse(raw: &'a RawDocument) -> Result<Entry<'a>, EntryError> {
        match Self::parse_with(raw, None, false)? {
            Parsed::Entry(e) => Ok(e),
            Parsed::InsertOrNoop(_) => unreachable!("only returned when asked to stop early"),
        }
    }

    /// Like [`Entry::parse`], but stops as soon as the entry is known to be an insert
    /// or a no-op with its `ts`: a scan that only needs their position saves walking
    /// the rest. Their other fields are not validated.
    pub fn parse_unless_insert(raw: &'a RawDocument) -> Result<Parsed<'a>, EntryError> {
        Self::parse_with(raw, None, true)
    }

    fn parse_with(
        raw: &'a RawDocument,
        parent: Option<&Entry<'a>>,
        stop_at_insert: bool,
    ) -> Result<Parsed<'a>, EntryError> {
        // Fields are kept as raw element values during the walk and decoded after
        // it, so an insert that is abandoned early costs no decoding at all.
        let mut ts = parent.map(|p| p.ts);
        let mut op = None;
        let (mut ns, mut o, mut o2, mut lsid, mut prev) = (None, None, None, None, None);
        let (mut ui, mut wall_ms, mut term, mut from_migrate, mut txn_number) =
            (None, None, None, None, None);
        let mut multi_op_type = None;
        let mut upsert = None;
        for el in Elements::new(raw.as_bytes()) {
            let el = el?;
            let (kind, v) = (el.kind, el.value);
            match el.key {
                b"ts" => match kind {
                    TIMESTAMP => ts = Some(read_ts(v)),
                    _ => return Err(wrong("ts", kind, "a Timestamp")),
                },
                b"op" => match (kind, str_value(v)) {
                    (STRING, Some(s)) => op = Some(Op::parse(s)),
                    (STRING, None) => return Err(EntryError::BadUtf8("op")),
                    _ => return Err(wrong("op", kind, "a string")),
                },
                b"ns" => match kind {
                    STRING => ns = Some(v),
                    _ => return Err(wrong("ns", kind, "a string")),
                },
                b"o" => o = Some((kind, v)),
                b"o2" => o2 = Some((kind, v)),
                b"ui" if kind == BINARY => ui = v.get(5..),
                b"wall" if kind == DATETIME => wall_ms = i64_value(kind, v),
                b"t" => term = i64_value(kind, v),
                b"fromMigrate" => {
                    from_migrate = Some(match kind {
                        BOOLEAN => v.first().is_some_and(|b| *b != 0),
                        _ => i64_value(kind, v).is_some_and(|n| n != 0),
                    })
                }
                b"lsid" => lsid = Some((kind, v)),
                b"txnNumber" => txn_number = i64_value(kind, v),
                b"prevOpTime" => prev = Some((kind, v)),
                b"multiOpType" => multi_op_type = i64_value(kind, v),
                b"b" if upsert.is_none() => upsert = Some(kind == BOOLEAN && v.first() == Some(&1)),
                _ => {}
            }
            if stop_at_insert {
                if let (Some(t), Some(Op::Insert | Op::Noop)) = (ts, op) {
                    return Ok(Parsed::InsertOrNoop(t));
                }
            }
        }
        let doc = |f: Option<(u8, &'a [u8])>| -> Result<Option<&'a RawDocument>, EntryError> {
            match f {
                Some((kind, v)) => sub_document(kind, v),
                None => Ok(None),
            }
        };
        let prev_op_time = doc(prev)?.and_then(|d| {
            Elements::new(d.as_bytes())
                .flatten()
                .find(|x| x.key == b"ts" && x.kind == TIMESTAMP)
                .map(|x| read_ts(x.value))
        });
        let e = Entry {
            raw,
            ts: ts.ok_or(EntryError::Missing("ts"))?,
            op: op.ok_or(EntryError::Missing("op"))?,
            ns: match ns {
                Some(v) => str_value(v).ok_or(EntryError::BadUtf8("ns"))?,
                None => "",
            },
            o: doc(o)?,
            o2: doc(o2)?,
            ui,
            wall_ms: wall_ms.or(parent.and_then(|p| p.wall_ms)),
            term: term.or(parent.and_then(|p| p.term)),
            from_migrate: from_migrate.unwrap_or(parent.is_some_and(|p| p.from_migrate)),
            lsid: doc(lsid)?.or(parent.and_then(|p| p.lsid)),
            txn_number: txn_number.or(parent.and_then(|p| p.txn_number)),
            prev_op_time,
            multi_op_type: multi_op_type.or(parent.and_then(|p| p.multi_op_type)),
            upsert: upsert.unwrap_or(false),
            offset: parent.map_or(0, |p| p.offset),
            index: parent.map_or(0, |p| p.index),
            depth: parent.map_or(0, |p| p.depth + 1),
        };
        Ok(Parsed::Entry(e))
    }

    /// The transaction this entry belongs to (the `lsid` bytes followed by
    /// `txnNumber`), as mongo-tools `common/txn/meta.go` `NewMeta` decides it: a
    /// command with `lsid` and `txnNumber` whose `o` holds `applyOps`,
    /// `commitTransaction` or `abortTransaction`, unless `multiOpType` is 1 (vectored
    /// inserts of a retryable write, applied at once). Other entries with
    /// `lsid`/`txnNumber` are retryable writes, not transactions.
    pub fn transaction_key(&self) -> Option<Vec<u8>> {
        if !self.is_transaction() {
            return None;
        }
        Some(session_key(self.lsid?, self.txn_number?))
    }

    /// Whether this entry has a [`Entry::transaction_key`] (without building it).
    pub fn is_transaction(&self) -> bool {
        if self.op != Op::Command
            || self.multi_op_type == Some(1)
            || self.lsid.is_none()
            || self.txn_number.is_none()
        {
            return false;
        }
        let Some(o) = self.o else { return false };
        Elements::new(o.as_bytes()).flatten().any(|el| {
            matches!(
                el.key,
                b"applyOps" | b"commitTransaction" | b"abortTransaction"
            )
        })
    }

    /// `wall` as a UTC instant.
    pub fn wall(&self) -> Option<DateTime<Utc>> {
        self.wall_ms.and_then(DateTime::from_timestamp_millis)
    }

    /// The database part of `ns`.
    pub fn db(&self) -> &'a str {
        self.ns.split_once('.').map_or(self.ns, |(db, _)| db)
    }

    /// The collection part of `ns` (`$cmd` for commands).
    pub fn coll(&self) -> &'a str {
        self.ns.split_once('.').map_or("", |(_, c)| c)
    }

    /// For a command (`op: "c"`), the command name: the first key of `o`.
    pub fn command_name(&self) -> Option<&'a str> {
        if self.op != Op::Command {
            return None;
        }
        let first = Elements::new(self.o?.as_bytes()).next()?.ok()?;
        // Command names are ASCII: checked word-wise, much cheaper than from_utf8.
        if first.key.is_ascii() {
            // SAFETY: every ASCII byte sequence is valid UTF-8.
            return Some(unsafe { std::str::from_utf8_unchecked(first.key) });
        }
        std::str::from_utf8(first.key).ok()
    }

    /// `ui` formatted as a UUID string.
    pub fn ui_string(&self) -> Option<String> {
        self.ui.map(format_uuid)
    }

    /// For an `applyOps` command, its operations as entries (inheriting this entry's
    /// `ts` and session fields). `None` when this entry is not an `applyOps`.
    pub fn apply_ops(&self) -> Option<Result<ApplyOps<'a>, EntryError>> {
        if self.command_name()? != "applyOps" {
            return None;
        }
        if self.depth as usize >= MAX_APPLY_OPS_DEPTH {
            return Some(Err(EntryError::TooDeep));
        }
        // command_name() saw `applyOps` as the first key of `o`.
        let first = match Elements::new(self.o?.as_bytes()).next()? {
            Ok(el) => el,
            Err(e) => return Some(Err(e.into())),
        };
        Some(match first.kind {
            ARRAY => Ok(ApplyOps {
                parent: *self,
                arr: Elements::new(first.value),
                index: 0,
                skip: None,
            }),
            other => Err(wrong("applyOps", other, "an array")),
        })
    }

    /// Calls `f` on this entry's leaf operations: the entry itself when it is not an
    /// `applyOps`, otherwise every operation inside it, recursively.
    pub fn for_each_leaf<E>(&self, f: &mut impl FnMut(&Entry<'a>) -> Result<(), E>) -> Result<(), E>
    where
        E: From<EntryError>,
    {
        match self.apply_ops() {
            None => f(self),
            Some(ops) => {
                for inner in ops? {
                    inner?.for_each_leaf(f)?;
                }
                Ok(())
            }
        }
    }

    /// A boolean field of `o` (e.g. `partialTxn`, `prepare`), false when absent.
    pub fn o_flag(&self, key: &str) -> bool {
        let Some(o) = self.o else { return false };
        Elements::new(o.as_bytes())
            .flatten()
            .find(|el| el.key == key.as_bytes())
            .is_some_and(|el| match el.kind {
                BOOLEAN => el.value.first().is_some_and(|b| *b != 0),
                kind => i64_value(kind, el.value).is_some_and(|n| n != 0),
            })
    }
}

fn wrong(field: &'static str, kind: impl Into<Kind>, expected: &'static str) -> EntryError {
    EntryError::WrongType {
        field,
        found: kind.into().0,
        expected,
    }
}

/// A BSON element type, from the raw type byte or the bson crate's enum.
pub struct Kind(ElementType);

impl From<u8> for Kind {
    fn from(b: u8) -> Kind {
        // The element walker rejects unknown type bytes before we get here.
        Kind(ElementType::from(b).unwrap_or(ElementType::Undefined))
    }
}

impl From<ElementType> for Kind {
    fn from(t: ElementType) -> Kind {
        Kind(t)
    }
}

const STRING: u8 = 0x02;
const DOCUMENT: u8 = 0x03;
const ARRAY: u8 = 0x04;
const BINARY: u8 = 0x05;
const BOOLEAN: u8 = 0x08;
const DATETIME: u8 = 0x09;
const TIMESTAMP: u8 = 0x11;

/// A Timestamp value (the walker guarantees its 8 bytes).
fn read_ts(v: &[u8]) -> Ts {
    ts_value(v).unwrap_or_default()
}

/// An embedded document value, or `None` when the field has another type.
fn sub_document(kind: u8, v: &[u8]) -> Result<Option<&RawDocument>, EntryError> {
    if kind != DOCUMENT {
        return Ok(None);
    }
    Ok(Some(RawDocument::from_bytes(v)?))
}

/// The operations of one `applyOps`, in order.
pub struct ApplyOps<'a> {
    parent: Entry<'a>,
    /// The array's elements (an array is a document keyed "0", "1", ...).
    arr: Elements<'a>,
    index: usize,
    skip: Option<fn(&[u8]) -> bool>,
}

impl<'a> ApplyOps<'a> {
    /// Leaves out inner inserts and no-ops without parsing them (vectored inserts
    /// make up most `applyOps` traffic, and a scan for destructive operations
    /// does not need them).
    pub fn skipping_inserts(self) -> Self {
        self.skipping(|doc| matches!(leading_op(doc).or_else(|| op_byte(doc)), Some(b'i' | b'n')))
    }

    /// Leaves out, without parsing them, the operations whose bytes `skip` answers
    /// true for (given each operation's whole document).
    pub fn skipping(mut self, skip: fn(&[u8]) -> bool) -> Self {
        self.skip = Some(skip);
        self
    }
}

impl<'a> Iterator for ApplyOps<'a> {
    type Item = Result<Entry<'a>, EntryError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (item, index) = loop {
            let item = self.arr.next()?;
            let index = self.index;
            self.index += 1;
            if let (Some(skip), Ok(el)) = (self.skip, &item) {
                if el.kind == DOCUMENT && skip(el.value) {
                    continue;
                }
            }
            break (item, index);
        };
        let wrap = |e: EntryError| EntryError::Inner {
            index,
            source: Box::new(e),
        };
        Some(match item {
            Ok(el) if el.kind == DOCUMENT => {
                let parsed = RawDocument::from_bytes(el.value)
                    .map_err(EntryError::from)
                    .and_then(|d| Entry::parse_with(d, Some(&self.parent), false));
                match parsed {
                    Ok(Parsed::Entry(e)) => Ok(e),
                    Ok(Parsed::InsertOrNoop(_)) => unreachable!("not asked to stop early"),
                    Err(e) => Err(wrap(e)),
                }
            }
            Ok(el) => Err(wrap(wrong("applyOps element", el.kind, "a document"))),
            Err(e) => Err(wrap(e.into())),
        })
    }
}

/// The one-letter `op` of a document, found by walking only to that field.
fn op_byte(doc: &[u8]) -> Option<u8> {
    for el in Elements::new(doc) {
        let el = el.ok()?;
        if el.key == b"op" {
            return match (el.kind, super::elements::str_bytes(el.value)?) {
                (STRING, [c]) => Some(*c),
                _ => None,
            };
        }
    }
    None
}

/// Formats 16 bytes as a canonical UUID; other lengths as hex.
pub fn format_uuid(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    if b.len() == 16 {
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    } else {
        hex
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc, spec::BinarySubtype, Binary, DateTime as BDateTime, Timestamp};

    fn ts(t: u32, i: u32) -> Timestamp {
        Timestamp {
            time: t,
            increment: i,
        }
    }

    #[test]
    fn parses_modern_fields_in_any_order() {
        let raw = rawdoc! {
            "op": "c", "ns": "shop.$cmd",
            "ui": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1u8; 16] },
            "o": { "drop": "orders" }, "o2": { "numRecords": 3i64 },
            "ts": ts(1700000000, 4), "t": 2i64, "v": 2.0, "wall": BDateTime::from_millis(1700000000123),
            "someFutureField": "kept",
        };
        let e = Entry::parse(&raw).unwrap();
        assert_eq!(e.ts, Ts::new(1700000000, 4));
        assert_eq!(e.op, Op::Command);
        assert_eq!((e.db(), e.coll()), ("shop", "$cmd"));
        assert_eq!(e.command_name(), Some("drop"));
        assert_eq!(e.term, Some(2));
        assert_eq!(e.wall_ms, Some(1700000000123));
        assert_eq!(
            e.ui_string().unwrap(),
            "01010101-0101-0101-0101-010101010101"
        );
        assert_eq!(e.o2.unwrap().get_i64("numRecords").unwrap(), 3);
        assert_eq!(e.raw.get_str("someFutureField").unwrap(), "kept");
    }

    /// The upsert flag is what the apply read with `raw.get("b")` before: the first
    /// `b`, true only when it is the Boolean true; absent, false, another type, or a
    /// later duplicate are not an upsert. Inner operations do not inherit it.
    #[test]
    fn the_upsert_flag_is_the_first_b_when_boolean_true() {
        let base = |b: Option<bson::Bson>, dup: Option<bson::Bson>| {
            let mut d =
                doc! { "ts": ts(1, 1), "op": "u", "ns": "a.b", "o": { "$set": { "x": 1 } } };
            if let Some(b) = b {
                d.insert("b", b);
            }
            d.insert("o2", doc! { "_id": 1 });
            let mut raw = bson::RawDocumentBuf::from_document(&d).unwrap();
            if let Some(dup) = dup {
                raw.append("b", bson::RawBson::try_from(dup).unwrap());
            }
            raw
        };
        for (b, dup) in [
            (None, None),
            (Some(true.into()), None),
            (Some(false.into()), None),
            (Some(1i32.into()), None),
            (Some("true".into()), None),
            (Some(false.into()), Some(true.into())),
            (Some(true.into()), Some(false.into())),
        ] {
            let raw = base(b.clone(), dup.clone());
            let before = matches!(raw.get("b"), Ok(Some(bson::RawBsonRef::Boolean(true))));
            assert_eq!(
                Entry::parse(&raw).unwrap().upsert,
                before,
                "b: {b:?}, then {dup:?}"
            );
        }
        let outer = rawdoc! {
            "ts": ts(1, 1), "op": "c", "ns": "admin.$cmd", "b": true,
            "o": { "applyOps": [ { "op": "u", "ns": "a.b", "o": { "$set": { "x": 1 } }, "o2": { "_id": 1 } } ] },
        };
        let e = Entry::parse(&outer).unwrap();
        assert!(e.upsert);
        let inner: Vec<_> = e
            .apply_ops()
            .unwrap()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(!inner[0].upsert);
    }

    /// mongo-tools `txn.NewMeta`: only commands with lsid + txnNumber that carry
    /// applyOps/commitTransaction/abortTransaction are transactions, and never with
    /// `multiOpType: 1` (vectored inserts of a retryable write).
    #[test]
    fn which_entries_are_transactions() {
        let lsid = rawdoc! { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![9u8; 16] } };
        let txn = rawdoc! { "ts": ts(1, 1), "op": "c", "ns": "admin.$cmd", "lsid": lsid.clone(), "txnNumber": 4i64,
        "o": { "applyOps": [ { "op": "i", "ns": "a.b", "o": { "_id": 1 } } ] } };
        let key = Entry::parse(&txn).unwrap().transaction_key().unwrap();
        assert!(key.ends_with(&4i64.to_le_bytes()));
        let commit = rawdoc! { "ts": ts(1, 2), "op": "c", "ns": "admin.$cmd", "lsid": lsid.clone(), "txnNumber": 4i64,
        "o": { "commitTransaction": 1, "commitTimestamp": ts(1, 1) } };
        assert_eq!(Entry::parse(&commit).unwrap().transaction_key(), Some(key));
        let vectored = rawdoc! { "ts": ts(1, 3), "op": "c", "ns": "admin.$cmd", "lsid": lsid.clone(), "txnNumber": 5i64,
        "multiOpType": 1, "o": { "applyOps": [ { "op": "i", "ns": "a.b", "o": { "_id": 2 } } ] } };
        assert_eq!(Entry::parse(&vectored).unwrap().transaction_key(), None);
        let retryable = rawdoc! { "ts": ts(1, 4), "op": "i", "ns": "a.b", "lsid": lsid.clone(), "txnNumber": 6i64, "o": { "_id": 3 } };
        assert_eq!(Entry::parse(&retryable).unwrap().transaction_key(), None);
        let index = rawdoc! { "ts": ts(1, 5), "op": "c", "ns": "a.$cmd", "lsid": lsid, "txnNumber": 7i64,
        "o": { "createIndexes": "b", "v": 2, "key": { "x": 1 }, "name": "x_1" } };
        assert_eq!(Entry::parse(&index).unwrap().transaction_key(), None);
    }

    #[test]
    fn lenient_numbers_and_unknown_ops() {
        let raw = rawdoc! { "ts": ts(1, 1), "t": 3i32, "h": 0i64, "v": 2.0, "op": "xi", "ns": "", "fromMigrate": true };
        let e = Entry::parse(&raw).unwrap();
        assert_eq!(e.op, Op::Other("xi"));
        assert_eq!(e.term, Some(3));
        assert!(e.from_migrate);
    }

    #[test]
    fn missing_or_mistyped_required_fields() {
        assert!(matches!(
            Entry::parse(&rawdoc! { "op": "n" }),
            Err(EntryError::Missing("ts"))
        ));
        assert!(matches!(
            Entry::parse(&rawdoc! { "ts": ts(1, 1) }),
            Err(EntryError::Missing("op"))
        ));
        let err = Entry::parse(&rawdoc! { "ts": 5i32, "op": "n" }).unwrap_err();
        assert_eq!(
            err.to_string(),
            "its `ts` field is Int32, expected a Timestamp"
        );
    }

    #[test]
    fn apply_ops_inherit_ts_and_session() {
        let raw = rawdoc! {
            "ts": ts(9, 2), "op": "c", "ns": "admin.$cmd", "txnNumber": 4i64, "lsid": { "id": 1 },
            "o": { "applyOps": [
                { "op": "d", "ns": "shop.orders", "o": { "_id": 1 } },
                { "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [ { "op": "i", "ns": "a.b", "o": { "_id": 2 } } ] } },
            ], "partialTxn": true },
        };
        let e = Entry::parse(&raw).unwrap();
        assert!(e.o_flag("partialTxn"));
        let inner: Vec<_> = e
            .apply_ops()
            .unwrap()
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(inner.len(), 2);
        assert_eq!(inner[0].ts, Ts::new(9, 2));
        assert_eq!(inner[0].txn_number, Some(4));
        assert_eq!(inner[0].depth, 1);
        let mut leaves = Vec::new();
        e.for_each_leaf(&mut |l: &Entry| -> Result<(), EntryError> {
            leaves.push((l.op.as_str(), l.ns, l.depth));
            Ok(())
        })
        .unwrap();
        assert_eq!(leaves, vec![("d", "shop.orders", 1), ("i", "a.b", 2)]);
    }

    #[test]
    fn bad_apply_ops_element_is_an_error_not_a_panic() {
        let raw =
            rawdoc! { "ts": ts(1, 1), "op": "c", "ns": "admin.$cmd", "o": { "applyOps": [ 5 ] } };
        let e = Entry::parse(&raw).unwrap();
        let err = e.apply_ops().unwrap().unwrap().next().unwrap().unwrap_err();
        assert!(err.to_string().starts_with("applyOps[0]"), "{err}");
        let _ = doc! {};
    }
}
