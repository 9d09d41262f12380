//! The server's order of BSON values and documents.
//!
//! Ports `BSONElement::woCompare` / `compareElements` (`bson/bsonelement.cpp`) and
//! `BSONObj::woCompare` (`bson/bsonobj.cpp`) with the simple collation (strings by
//! bytes) and field names considered:
//!
//! 1. Values of different types compare by their *canonical type*
//!    (`canonicalizeBSONType`, `bson/bsontypes.h`): MinKey < Undefined < Null <
//!    numbers < strings and symbols < objects < arrays < BinData < ObjectId < bool <
//!    Date < Timestamp < regex < DBPointer < code < code with scope < MaxKey.
//!    Undefined (0) and Null (5) are *different* brackets, so `undefined < null`.
//! 2. Within a bracket: numbers by value across int32/int64/double/decimal128
//!    (`numeric.rs`); strings, symbols and code by bytes, shorter first on a common
//!    prefix; objects and arrays element by element (canonical type, then field name
//!    by bytes, then value), the shorter first; BinData by length, then subtype, then
//!    bytes; ObjectId by bytes; bool by its byte; Date signed; Timestamp unsigned;
//!    regex by pattern then flags; DBPointer by length, then namespace, then id; code
//!    with scope by code, then scope.
//!
//! This is the order of the `_id` index (its KeyString encoding is built to agree
//! with `woCompare`), hence of `dbHash`, and its equality is `_id` equality: `1`,
//! `1.0`, `NumberLong(1)` and `NumberDecimal("1.00")` are the same `_id`.
//!
//! Comparisons work on borrowed bytes and never allocate (a DBPointer given as a
//! [`RawBsonRef`] is the one exception: the bson crate keeps its parts private).
//! Malformed nested documents cannot make the comparison fail: from the first
//! framing error on, the two documents compare by their raw bytes (as do documents
//! nested deeper than [`MAX_NESTING`], which no stored document reaches).

pub(crate) mod id_key;
pub(crate) mod numeric;

use std::cmp::Ordering;
use std::hash::Hasher;

use bson::{RawBsonRef, RawDocument};

pub use id_key::{cmp_key_bytes, IdKey, IdKeyError};
use numeric::{cmp_num, num_key, Num};

use super::raw::{self, fields, read_f64, read_i32, read_i64};

/// Nesting beyond which documents compare (and hash) by their raw bytes; stored
/// documents are limited to far less (`BSONDepth`), so this only bounds recursion on
/// corrupt input.
pub const MAX_NESTING: usize = 256;

/// `canonicalizeBSONType` for a BSON type byte; `None` for bytes that are no type.
pub fn canonical_type(kind: u8) -> Option<i32> {
    Some(match kind {
        raw::T_MINKEY => -1,
        raw::T_UNDEFINED => 0,
        raw::T_NULL => 5,
        raw::T_DOUBLE | raw::T_INT32 | raw::T_INT64 | raw::T_DECIMAL => 10,
        raw::T_STRING | raw::T_SYMBOL => 15,
        raw::T_OBJECT => 20,
        raw::T_ARRAY => 25,
        raw::T_BINARY => 30,
        raw::T_OID => 35,
        raw::T_BOOL => 40,
        raw::T_DATE => 45,
        raw::T_TIMESTAMP => 47,
        raw::T_REGEX => 50,
        raw::T_DBPOINTER => 55,
        raw::T_CODE => 60,
        raw::T_CODE_W_SCOPE => 65,
        raw::T_MAXKEY => 127,
        _ => return None,
    })
}

/// Compares two values as the server does (`BSONElement::woCompare` without field
/// names): the order of `_id` values in the `_id` index.
pub fn compare_values(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    let mut tmp_a = Vec::new();
    let mut tmp_b = Vec::new();
    let va = Val::from_ref(a, &mut tmp_a);
    let vb = Val::from_ref(b, &mut tmp_b);
    cmp_val(&va, &vb)
}

/// Compares two documents as `BSONObj::woCompare` (field names considered).
pub fn compare_documents(a: &RawDocument, b: &RawDocument) -> Ordering {
    cmp_docs(a.as_bytes(), b.as_bytes(), 0)
}

/// One value, borrowed from its bytes, in the shape the comparison needs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Val<'a> {
    MinKey,
    MaxKey,
    Undefined,
    Null,
    Num(Num),
    /// String or symbol: the bytes without length prefix and NUL.
    Str(&'a [u8]),
    Code(&'a [u8]),
    Obj(&'a [u8]),
    Arr(&'a [u8]),
    /// `prefix` carries the inner length of subtype 2 when the bytes came without it.
    Bin {
        subtype: u8,
        prefix: Option<[u8; 4]>,
        data: &'a [u8],
    },
    Oid([u8; 12]),
    Bool(u8),
    Date(i64),
    Ts(u64),
    Regex(&'a [u8], &'a [u8]),
    DbPtr(&'a [u8], &'a [u8]),
    CodeWScope(&'a [u8], &'a [u8]),
    /// A value whose bytes do not parse: compared by type byte, then raw bytes.
    Bad(u8, &'a [u8]),
}

fn string_bytes(v: &[u8]) -> Option<&[u8]> {
    let n = read_i32(v)?;
    if n < 1 {
        return None;
    }
    let s = v.get(4..4 + n as usize)?;
    Some(&s[..s.len() - 1])
}

impl<'a> Val<'a> {
    /// Reads a value from its BSON type byte and value bytes.
    pub(crate) fn from_raw(kind: u8, v: &'a [u8]) -> Val<'a> {
        Self::try_from_raw(kind, v).unwrap_or(Val::Bad(kind, v))
    }

    fn try_from_raw(kind: u8, v: &'a [u8]) -> Option<Val<'a>> {
        Some(match kind {
            raw::T_MINKEY => Val::MinKey,
            raw::T_MAXKEY => Val::MaxKey,
            raw::T_UNDEFINED => Val::Undefined,
            raw::T_NULL => Val::Null,
            raw::T_DOUBLE => Val::Num(Num::F64(read_f64(v)?)),
            raw::T_INT32 => Val::Num(Num::I32(read_i32(v)?)),
            raw::T_INT64 => Val::Num(Num::I64(read_i64(v)?)),
            raw::T_DECIMAL => Val::Num(Num::Dec(v.get(..16)?.try_into().ok()?)),
            raw::T_STRING | raw::T_SYMBOL => Val::Str(string_bytes(v)?),
            raw::T_CODE => Val::Code(string_bytes(v)?),
            raw::T_OBJECT => Val::Obj(v),
            raw::T_ARRAY => Val::Arr(v),
            raw::T_BINARY => {
                let n = read_i32(v)?;
                Val::Bin {
                    subtype: *v.get(4)?,
                    prefix: None,
                    data: v.get(5..5 + usize::try_from(n).ok()?)?,
                }
            }
            raw::T_OID => Val::Oid(v.get(..12)?.try_into().ok()?),
            raw::T_BOOL => Val::Bool(*v.first()?),
            raw::T_DATE => Val::Date(read_i64(v)?),
            raw::T_TIMESTAMP => Val::Ts(read_i64(v)? as u64),
            raw::T_REGEX => {
                let p = v.iter().position(|&c| c == 0)?;
                let rest = v.get(p + 1..)?;
                let f = rest.iter().position(|&c| c == 0)?;
                Val::Regex(&v[..p], &rest[..f])
            }
            raw::T_DBPOINTER => {
                let ns = string_bytes(v)?;
                let at = 4 + ns.len() + 1;
                Val::DbPtr(ns, v.get(at..at + 12)?)
            }
            raw::T_CODE_W_SCOPE => {
                let code = string_bytes(v.get(4..)?)?;
                let scope = v.get(4 + 4 + code.len() + 1..)?;
                Val::CodeWScope(code, scope)
            }
            _ => return None,
        })
    }

    /// Reads a [`RawBsonRef`]; `tmp` holds the encoding of a DBPointer.
    pub(crate) fn from_ref(v: RawBsonRef<'a>, tmp: &'a mut Vec<u8>) -> Val<'a> {
        use bson::spec::BinarySubtype;
        match v {
            RawBsonRef::Double(f) => Val::Num(Num::F64(f)),
            RawBsonRef::String(s) | RawBsonRef::Symbol(s) => Val::Str(s.as_bytes()),
            RawBsonRef::JavaScriptCode(s) => Val::Code(s.as_bytes()),
            RawBsonRef::Document(d) => Val::Obj(d.as_bytes()),
            RawBsonRef::Array(a) => Val::Arr(a.as_bytes()),
            RawBsonRef::Binary(b) => Val::Bin {
                subtype: u8::from(b.subtype),
                prefix: (b.subtype == BinarySubtype::BinaryOld)
                    .then(|| (b.bytes.len() as i32).to_le_bytes()),
                data: b.bytes,
            },
            RawBsonRef::Undefined => Val::Undefined,
            RawBsonRef::ObjectId(o) => Val::Oid(o.bytes()),
            RawBsonRef::Boolean(b) => Val::Bool(b as u8),
            RawBsonRef::DateTime(d) => Val::Date(d.timestamp_millis()),
            RawBsonRef::Null => Val::Null,
            RawBsonRef::RegularExpression(r) => {
                Val::Regex(r.pattern.as_bytes(), r.options.as_bytes())
            }
            RawBsonRef::JavaScriptCodeWithScope(c) => {
                Val::CodeWScope(c.code.as_bytes(), c.scope.as_bytes())
            }
            RawBsonRef::Int32(i) => Val::Num(Num::I32(i)),
            RawBsonRef::Timestamp(t) => Val::Ts((u64::from(t.time) << 32) | u64::from(t.increment)),
            RawBsonRef::Int64(i) => Val::Num(Num::I64(i)),
            RawBsonRef::Decimal128(d) => Val::Num(Num::Dec(d.bytes())),
            RawBsonRef::MaxKey => Val::MaxKey,
            RawBsonRef::MinKey => Val::MinKey,
            RawBsonRef::DbPointer(_) => {
                tmp.clear();
                raw::put_raw_value(tmp, b"", v);
                // type byte + "" NUL, then the value
                Val::from_raw(raw::T_DBPOINTER, &tmp[2..])
            }
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Val::MinKey => raw::T_MINKEY,
            Val::MaxKey => raw::T_MAXKEY,
            Val::Undefined => raw::T_UNDEFINED,
            Val::Null => raw::T_NULL,
            Val::Num(_) => raw::T_DOUBLE,
            Val::Str(_) => raw::T_STRING,
            Val::Code(_) => raw::T_CODE,
            Val::Obj(_) => raw::T_OBJECT,
            Val::Arr(_) => raw::T_ARRAY,
            Val::Bin { .. } => raw::T_BINARY,
            Val::Oid(_) => raw::T_OID,
            Val::Bool(_) => raw::T_BOOL,
            Val::Date(_) => raw::T_DATE,
            Val::Ts(_) => raw::T_TIMESTAMP,
            Val::Regex(..) => raw::T_REGEX,
            Val::DbPtr(..) => raw::T_DBPOINTER,
            Val::CodeWScope(..) => raw::T_CODE_W_SCOPE,
            Val::Bad(k, _) => *k,
        }
    }

    /// The canonical type bracket; unparseable values sort after MaxKey.
    fn bracket(&self) -> i32 {
        match self {
            Val::Bad(..) => 128,
            v => canonical_type(v.kind()).unwrap_or(128),
        }
    }
}

/// Compares two values (`BSONElement::compareElements` after the type check).
pub(crate) fn cmp_val(a: &Val<'_>, b: &Val<'_>) -> Ordering {
    cmp_val_at(a, b, 0)
}

fn cmp_val_at(a: &Val<'_>, b: &Val<'_>, depth: usize) -> Ordering {
    let (ca, cb) = (a.bracket(), b.bracket());
    if ca != cb {
        return ca.cmp(&cb);
    }
    match (a, b) {
        (Val::Num(x), Val::Num(y)) => cmp_num(*x, *y),
        (Val::Str(x), Val::Str(y)) | (Val::Code(x), Val::Code(y)) => x.cmp(y),
        (Val::Obj(x), Val::Obj(y)) | (Val::Arr(x), Val::Arr(y)) => cmp_docs(x, y, depth + 1),
        (
            Val::Bin {
                subtype: sa,
                prefix: pa,
                data: da,
            },
            Val::Bin {
                subtype: sb,
                prefix: pb,
                data: db,
            },
        ) => {
            let len = |p: &Option<[u8; 4]>, d: &[u8]| d.len() + p.map_or(0, |_| 4);
            len(pa, da)
                .cmp(&len(pb, db))
                .then(sa.cmp(sb))
                .then_with(|| {
                    let pa = pa.as_ref().map_or(&[][..], |p| &p[..]);
                    let pb = pb.as_ref().map_or(&[][..], |p| &p[..]);
                    pa.iter().chain(da.iter()).cmp(pb.iter().chain(db.iter()))
                })
        }
        (Val::Oid(x), Val::Oid(y)) => x.cmp(y),
        (Val::Bool(x), Val::Bool(y)) => x.cmp(y),
        (Val::Date(x), Val::Date(y)) => x.cmp(y),
        (Val::Ts(x), Val::Ts(y)) => x.cmp(y),
        (Val::Regex(pa, fa), Val::Regex(pb, fb)) => pa.cmp(pb).then(fa.cmp(fb)),
        (Val::DbPtr(na, ia), Val::DbPtr(nb, ib)) => {
            na.len().cmp(&nb.len()).then(na.cmp(nb)).then(ia.cmp(ib))
        }
        (Val::CodeWScope(ca, sa), Val::CodeWScope(cb, sb)) => {
            ca.cmp(cb).then_with(|| cmp_docs(sa, sb, depth + 1))
        }
        (Val::Bad(ka, xa), Val::Bad(kb, xb)) => ka.cmp(kb).then(xa.cmp(xb)),
        // Same bracket, no value to compare: MinKey, MaxKey, Undefined, Null.
        _ => Ordering::Equal,
    }
}

/// `BSONObj::woCompare` with field names considered, on whole document bytes.
pub(crate) fn cmp_docs(a: &[u8], b: &[u8], depth: usize) -> Ordering {
    if depth > MAX_NESTING {
        return a.cmp(b);
    }
    let (mut ia, mut ib) = (fields(a), fields(b));
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(Ok(x)), Some(Ok(y))) => {
                let (vx, vy) = (
                    Val::from_raw(x.kind, x.value),
                    Val::from_raw(y.kind, y.value),
                );
                let by_type = if x.kind != y.kind {
                    vx.bracket().cmp(&vy.bracket())
                } else {
                    Ordering::Equal
                };
                let o = by_type
                    .then_with(|| x.name.cmp(y.name))
                    .then_with(|| cmp_val_at(&vx, &vy, depth));
                if o != Ordering::Equal {
                    return o;
                }
            }
            // A framing error: fall back to the raw bytes (deterministic, total).
            _ => return a.cmp(b),
        }
    }
}

/// Feeds `v` to `h` so that values equal under [`cmp_val`] hash equally.
pub(crate) fn hash_val<H: Hasher>(v: &Val<'_>, h: &mut H) {
    hash_val_at(v, h, 0)
}

fn hash_val_at<H: Hasher>(v: &Val<'_>, h: &mut H, depth: usize) {
    h.write_i32(v.bracket());
    match v {
        Val::Num(n) => std::hash::Hash::hash(&num_key(*n), h),
        Val::Str(s) | Val::Code(s) => h.write(s),
        Val::Oid(o) => h.write(o),
        Val::Obj(d) | Val::Arr(d) => hash_doc(d, h, depth + 1),
        Val::Bin {
            subtype,
            prefix,
            data,
        } => {
            h.write_u8(*subtype);
            if let Some(p) = prefix {
                h.write(p);
            }
            h.write(data);
        }
        Val::Bool(b) => h.write_u8(*b),
        Val::Date(d) => h.write_i64(*d),
        Val::Ts(t) => h.write_u64(*t),
        Val::Regex(p, f) | Val::DbPtr(p, f) => {
            h.write(p);
            h.write_u8(0);
            h.write(f);
        }
        Val::CodeWScope(c, s) => {
            h.write(c);
            h.write_u8(0);
            hash_doc(s, h, depth + 1);
        }
        Val::Bad(k, b) => {
            h.write_u8(*k);
            h.write(b);
        }
        Val::MinKey | Val::MaxKey | Val::Undefined | Val::Null => {}
    }
}

fn hash_doc<H: Hasher>(d: &[u8], h: &mut H, depth: usize) {
    // Mirrors `cmp_docs`: a framing error (or too deep a nesting) switches to the raw
    // bytes of the whole document, so first check that every element parses.
    if depth > MAX_NESTING || fields(d).any(|f| f.is_err()) {
        h.write_u8(0xEE);
        h.write(d);
        return;
    }
    for f in fields(d).flatten() {
        h.write(f.name);
        h.write_u8(0);
        hash_val_at(&Val::from_raw(f.kind, f.value), h, depth);
    }
    h.write_u8(0xFF);
}
